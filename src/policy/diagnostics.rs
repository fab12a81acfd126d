//! Policy: what the statements after a hit (SHOW WARNINGS, FOUND_ROWS(), ROW_COUNT(), …)
//! must answer, since the server did not run the SELECT that was served.
//!
//! After a hit the server's diagnostics still describe the statement before it. A cached
//! SELECT read tables and raised no warning (results with warnings are never stored), so
//! the server, had it run it, would now hold: no warnings or errors, `ROW_COUNT()` -1, and
//! `FOUND_ROWS()` = the rows it counted. Rather than answer every possible reader of those
//! (`SHOW WARNINGS`, `@@warning_count`, `GET DIAGNOSTICS`, `FOUND_ROWS()` inside any
//! statement, a procedure…), qcache puts the server in that state: before the next statement
//! that reaches the server, unless that statement is itself a cacheable read (which sets all
//! of them again), it sends [`resetter`] and drops its answer, or, before a statement that
//! may read the SELECT's own `Last_query_cost` ([`observes_last_query`]), the SELECT itself.
//! The hit itself records only the count, in a field: no allocation, no lock.
//!
//! `FOUND_ROWS()` after a SELECT without `SQL_CALC_FOUND_ROWS` counts the rows the server
//! sent plus those a LIMIT offset skipped. Rows of a cached result are known; an offset is
//! known only when it is a literal, and not at all for the rows skipped by an offset past
//! the end, so a result whose count does not follow from its rows is not stored
//! ([`found_rows`] is None). `SQL_CALC_FOUND_ROWS` results are never cached.

/// What a hit on a stored result must leave behind besides its bytes, built once per fill by
/// [`entry_diagnostics`] and carried by every copy of the entry (L1, and L2 through its
/// encoding), so a hit from either level leaves the session as the server would have. The
/// rest is the same for every stored result and needs no field: no warnings or errors and
/// `ROW_COUNT()` -1 (results that raised anything are never stored), no info string (a result
/// set has none), and status flags in the bytes, their per-session bits patched at the hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryDiagnostics {
    /// `FOUND_ROWS()` after the statement ran.
    pub found_rows: u64,
    /// Rows in the result: what a hit adds to its digest's statistics.
    pub rows: u64,
}

/// The diagnostics of a result `stmt` produced with `rows` rows; None when they do not follow
/// from the text and the count (see [`found_rows`]), and the result must not be stored.
///
/// `select_limited`: the session's `sql_select_limit` is not (or may not be) the default. It
/// cuts a set operation's rows after the server counted them all (`UNION` of 4 rows under a
/// limit of 1 leaves FOUND_ROWS() 4), which the rows sent do not tell; a `SET STATEMENT` of
/// it in the text counts too.
pub fn entry_diagnostics(stmt: &[u8], rows: u64, select_limited: bool) -> Option<EntryDiagnostics> {
    let limited = select_limited || has_word(stmt, b"sql_select_limit");
    if limited
        && [&b"union"[..], b"except", b"intersect"]
            .iter()
            .any(|w| has_word(stmt, w))
    {
        return None;
    }
    Some(EntryDiagnostics {
        found_rows: found_rows(stmt, rows)?,
        rows,
    })
}

/// `FOUND_ROWS()` after `stmt` sent `rows` rows, when that follows from the text and the
/// count alone; None when not. Conservative: any `OFFSET`, `LIMIT a, b` or `ROWS EXAMINED`
/// anywhere after the first `LIMIT` (a subquery's included) gives None unless it is read as
/// a literal offset of the statement's last LIMIT clause.
pub fn found_rows(stmt: &[u8], rows: u64) -> Option<u64> {
    let Some(first) = find_ci(stmt, b"limit", 0) else {
        // The standard's spelling cuts rows too (`OFFSET n ROWS`, `FETCH FIRST n ROWS
        // [ONLY | WITH TIES]`), and the server counts what it skipped or cut.
        if has_word(stmt, b"offset") || has_word(stmt, b"fetch") {
            return None;
        }
        return Some(rows);
    };
    // A set operation with a LIMIT: the server counts the combined rows before the LIMIT
    // (`(SELECT …) UNION (SELECT …) LIMIT 1` leaves FOUND_ROWS() at 2), which the rows sent
    // do not tell.
    if [&b"union"[..], b"except", b"intersect"]
        .iter()
        .any(|w| find_ci(stmt, w, 0).is_some())
    {
        return None;
    }
    let tail = &stmt[first..];
    let tricky = tail.contains(&b',')
        || find_ci(tail, b"offset", 0).is_some()
        || find_ci(tail, b"examined", 0).is_some();
    if !tricky {
        return Some(rows);
    }
    // One LIMIT with a literal offset, at the end: `LIMIT o, n` or `LIMIT n OFFSET o`.
    if find_ci(stmt, b"limit", first + 5).is_some() {
        return None;
    }
    let words: Vec<&[u8]> = tail[5..]
        .split(|b| b.is_ascii_whitespace() || *b == b',' || *b == b';')
        .filter(|w| !w.is_empty())
        .collect();
    let num = |w: &[u8]| -> Option<u64> {
        (!w.is_empty() && w.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(w).ok()?.parse().ok())
            .flatten()
    };
    let offset = match words.as_slice() {
        [o, _n] if tail[5..].contains(&b',') => num(o)?.min(u64::MAX / 2),
        [_n, kw, o] if kw.eq_ignore_ascii_case(b"offset") => num(o)?.min(u64::MAX / 2),
        _ => return None,
    };
    let rest_ok = words
        .iter()
        .all(|w| num(w).is_some() || w.eq_ignore_ascii_case(b"offset"));
    if !rest_ok {
        return None;
    }
    match (offset, rows) {
        (0, r) => Some(r),
        // Past the end: the server counted the rows it skipped, which only it knows.
        (_, 0) => None,
        (o, r) => Some(o + r),
    }
}

/// The statement that leaves the server's diagnostics as a SELECT that read tables, raised
/// nothing and counted `found_rows` rows would: warnings cleared (a statement over a derived
/// table or a table function counts as reading tables), `ROW_COUNT()` -1, `FOUND_ROWS()` =
/// `found_rows`. It reads no real table, so it takes no lock and opens no snapshot, and needs
/// no privilege and no default database. On MariaDB it sends no row; on MySQL (where
/// `SQL_CALC_FOUND_ROWS` warns) it sends the rows, which are dropped.
///
/// On MariaDB the N rows come from two `JSON_TABLE`s of ⌈√N⌉ elements each, joined and cut
/// to N: a table function streams its rows, so no temporary table is built and a session's
/// small `tmp_table_size`/`max_heap_table_size` cannot make it fail (the recursive CTE did),
/// and the text stays short. `sql_big_selects = 1`: the session's `max_join_size` judges its
/// own statements, not this one. A server without `JSON_TABLE` (before 10.6), or one that
/// answers it with a warning or an error (an array longer than `max_allowed_packet`), gets
/// [`resetter_fallback`].
pub fn resetter(found_rows: u64, mariadb: bool) -> String {
    match found_rows {
        0 | 1 => resetter_fallback(found_rows, mariadb),
        n if mariadb => {
            let r = n.isqrt();
            let k = if r * r < n { r + 1 } else { r };
            let rows = |alias: &str| {
                format!(
                    "JSON_TABLE(CONCAT('[', REPEAT('0,', {}), '0]'), '$[*]' \
                     COLUMNS(i FOR ORDINALITY)) AS {alias}",
                    k - 1
                )
            };
            format!(
                "SET STATEMENT sql_big_selects = 1 FOR SELECT SQL_CALC_FOUND_ROWS 1 FROM {} \
                 JOIN {} WHERE (qcache_a.i - 1) * {k} + qcache_b.i <= {n} LIMIT 0",
                rows("qcache_a"),
                rows("qcache_b")
            )
        }
        _ => resetter_fallback(found_rows, mariadb),
    }
}

/// The statement sent when [`resetter`]'s answer was an error or had warnings: a recursive
/// CTE of `found_rows` rows (a temporary table, so a session's tiny limits can still refuse
/// it; then the next statement's own answer stands, as before).
pub fn resetter_fallback(found_rows: u64, mariadb: bool) -> String {
    match found_rows {
        0 => "SELECT 1 FROM (SELECT 1) AS qcache_diag WHERE 0".to_string(),
        1 => "SELECT 1 FROM (SELECT 1) AS qcache_diag".to_string(),
        n if mariadb => format!(
            "SET STATEMENT max_recursive_iterations = {n} FOR \
             WITH RECURSIVE qcache_diag(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM qcache_diag \
             WHERE n < {n}) SELECT SQL_CALC_FOUND_ROWS n FROM qcache_diag LIMIT 0"
        ),
        n => format!(
            "WITH RECURSIVE qcache_diag(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM qcache_diag \
             WHERE n < {n}) SELECT /*+ SET_VAR(cte_max_recursion_depth = {n}) */ n FROM qcache_diag"
        ),
    }
}

/// Whether `stmt`, the first statement to reach the server after a hit, may read what only
/// the served SELECT's own run leaves: `Last_query_cost`, which `SHOW STATUS` reads without
/// compiling a query of its own (a SELECT from `information_schema.SESSION_STATUS` reports
/// its own cost), directly or as the first statement of a procedure (`CALL`) or a prepared
/// statement (`EXECUTE`). Before such a statement the hit's SELECT itself is sent again
/// (rows dropped) instead of [`resetter`], so the server's state is the read's. (The
/// optimizer trace is context instead: a session that traces is never served,
/// `policy::context::traces_optimizer`.) Fails closed: any text holding the words `show` and
/// `status`, or `call`, or `execute`, in any case, anywhere (a string, a comment, the second
/// statement of a multi-statement). Words, not letters: a write to a column named `status`
/// after a hit would otherwise run the hit's SELECT again on the server. Asked only after a
/// hit, of a statement that is not a cacheable read.
pub fn observes_last_query(stmt: &[u8]) -> bool {
    (has_word(stmt, b"show") && has_word(stmt, b"status"))
        || has_word(stmt, b"call")
        || has_word(stmt, b"execute")
}

/// What a statement that reaches the server does to the session's `Last_query_cost`, as
/// MariaDB 10.11 was seen to behave: every SELECT sets it (0 for one without tables, a set
/// operation or a failed one), as do `SHOW` over information_schema, `EXPLAIN`,
/// `INSERT … SELECT` and multi-table `UPDATE`/`DELETE`; `SET` (a subquery's too), `DO`,
/// single-table writes, transaction statements, `SHOW WARNINGS` and `SHOW STATUS` (which
/// puts back the status it changed) leave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostEffect {
    /// Leaves it as it was.
    Keeps,
    /// Leaves it, but writes rows: a SELECT run again after it may cost (and count)
    /// otherwise than it did before (the optimizer's row estimates moved), so what set the
    /// cost can no longer be replayed.
    Writes,
    /// Sets it itself (a SELECT: its own cost).
    Sets,
    /// Reads it and leaves it (a SET that may turn on a recorder or change how a replay
    /// costs: the last moment to put it back).
    Reads,
    /// Reads it and leaves it, after clearing the diagnostics area itself (`SHOW [SESSION]
    /// STATUS` reads information_schema, a table): a replay sent before it hides no
    /// warning or error the client could still read.
    Shows,
    /// May read it, and may set it (CALL, EXECUTE, anything not recognised: fail closed).
    Unknown,
}

/// ERR codes of a statement the server could not parse, which ran nothing and left
/// `Last_query_cost` as it was (seen on MariaDB 10.11: `SELECT FROM t` keeps the previous
/// read's cost, `SELECT a FROM no_such_table` sets 0): ER_PARSE_ERROR, ER_SYNTAX_ERROR.
pub const RAN_NOTHING: &[u16] = &[1064, 1149];

impl CostEffect {
    /// The statement clears the server's diagnostics area before it reads anything
    /// ([`CostEffect::Shows`]): what qcache sends just before it (a replay) hides nothing.
    pub fn clears_diagnostics(self) -> bool {
        self == CostEffect::Shows
    }
}

/// [`CostEffect`] of a statement's text. Only a single statement whose first word says so
/// keeps or sets the cost; anything that may read it ([`observes_last_query`]), a
/// multi-statement, or a statement not recognised is `Unknown`.
pub fn cost_effect(stmt: &[u8]) -> CostEffect {
    use crate::analysis::lexer::Lexer;
    let mut lx = Lexer::new(stmt);
    let mut words: Vec<&[u8]> = Vec::with_capacity(6);
    let mut statements_after = false;
    let mut ended = false;
    while let Some(t) = lx.next_token() {
        if t.is_punct(b';') {
            ended = true;
            continue;
        }
        if ended {
            statements_after = true;
            break;
        }
        if words.len() < 6 && t.tok == crate::analysis::lexer::Tok::Word {
            words.push(t.bytes(stmt));
        }
    }
    if statements_after {
        return CostEffect::Unknown;
    }
    let is = |i: usize, w: &str| {
        words
            .get(i)
            .is_some_and(|x| x.eq_ignore_ascii_case(w.as_bytes()))
    };
    if observes_last_query(stmt) {
        let status_at = if ["session", "local", "global"].iter().any(|w| is(1, w)) {
            2
        } else {
            1
        };
        return if is(0, "show") && is(status_at, "status") {
            CostEffect::Shows
        } else {
            CostEffect::Unknown
        };
    }
    let Some(first) = words.first().map(|w| w.to_ascii_lowercase()) else {
        return CostEffect::Unknown;
    };
    let reads_more = ["select", "join", "using"]
        .iter()
        .any(|w| has_word(stmt, w.as_bytes()));
    match first.as_slice() {
        b"select" | b"with" => CostEffect::Sets,
        // A SET that may turn on what records the session's statements (its profiles, its
        // optimizer trace) is the last moment qcache may send one of its own
        // (`policy::context::Recorders`): a cost owed is put back before it, as before a
        // reader. The SET itself leaves the cost.
        b"set" if !is(1, "statement") && turns_on_a_recorder(stmt) => CostEffect::Reads,
        // Likewise a SET that may change how the owed text is read or costed (its sql_mode,
        // character sets, optimizer settings): a replay after it would put back another
        // cost than the read's (`changes_what_a_replay_costs`).
        b"set" if !is(1, "statement") && changes_what_a_replay_costs(stmt) => CostEffect::Reads,
        b"set" if !is(1, "statement") => CostEffect::Keeps,
        // `USE` too (the session's database moves; the text that set the cost is replayed
        // in its own: `LastQueryCost::before`).
        b"do" | b"begin" | b"start" | b"commit" | b"rollback" | b"savepoint" | b"release"
        | b"lock" | b"unlock" | b"get" | b"use" => CostEffect::Keeps,
        b"show"
            if ["warnings", "errors", "profiles", "profile"]
                .iter()
                .any(|w| is(1, w)) =>
        {
            CostEffect::Keeps
        }
        b"insert" | b"replace" if !reads_more => CostEffect::Writes,
        // Single-table only: `UPDATE a, b SET …` and `DELETE a FROM …` optimise a join.
        b"update" if !reads_more && !before_word(stmt, b",", b"set") => CostEffect::Writes,
        b"delete" if !reads_more && delete_from_one(&words) => CostEffect::Writes,
        _ => CostEffect::Unknown,
    }
}

/// Whether a SET's text names `profiling` or `optimizer_trace` (words, anywhere: fails
/// closed for a value or a comment that names them).
fn turns_on_a_recorder(stmt: &[u8]) -> bool {
    has_word(stmt, b"profiling") || has_word(stmt, b"optimizer_trace")
}

/// Whether a SET's text may change how a replay of the cost's source would be read or
/// costed: it names a variable the cache key holds (`policy::context::read_at_connect`, for
/// either flavour: the sql_mode, the character sets and collation, every optimizer setting
/// and limit; not `wait_timeout`, read but unkeyed) or `NAMES` / `CHARACTER` (`SET NAMES`,
/// `SET CHARACTER SET`). Names anywhere, as a word, a `@@` variable or a backquoted name (a
/// value or a comment that names one fails closed). Such a SET is the last moment qcache may
/// put the owed cost back: the server costed the read under the settings before it (seen on
/// MariaDB 10.11: a join costed 2021.999 under `join_cache_level` 2 and 2120.999 under 0).
/// A SET whose values qcache reads back afterwards still leaves the read-back's own cost,
/// which is then replayed under the new settings (a limit, docs/guarantees.md).
fn changes_what_a_replay_costs(stmt: &[u8]) -> bool {
    use crate::analysis::lexer::{Lexer, Tok};
    let mut lx = Lexer::new(stmt);
    while let Some(t) = lx.next_token() {
        let name = match t.tok {
            Tok::Word => t.bytes(stmt),
            Tok::Var => t.bytes(stmt).trim_ascii_start(),
            Tok::Backquoted => t.bytes(stmt),
            _ => continue,
        };
        let name = name
            .iter()
            .copied()
            .skip_while(|&b| b == b'@')
            .filter(|&b| b != b'`')
            .collect::<Vec<u8>>();
        let Ok(name) = std::str::from_utf8(&name) else {
            continue;
        };
        if name.eq_ignore_ascii_case("names") || name.eq_ignore_ascii_case("character") {
            return true;
        }
        let unkeyed = crate::policy::context::UNKEYED
            .iter()
            .any(|u| u.eq_ignore_ascii_case(name));
        if !unkeyed
            && (crate::policy::context::read_at_connect(name, true)
                || crate::policy::context::read_at_connect(name, false))
        {
            return true;
        }
    }
    false
}

/// Whether `needle` occurs in `stmt` before the first word `word` (or anywhere, without it).
fn before_word(stmt: &[u8], needle: &[u8], word: &[u8]) -> bool {
    let mut from = 0;
    let end = loop {
        match find_ci(stmt, word, from) {
            Some(at) => {
                let ident = |i: Option<&u8>| {
                    i.is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
                };
                let before = at.checked_sub(1).and_then(|i| stmt.get(i));
                if !ident(before) && !ident(stmt.get(at + word.len())) {
                    break at;
                }
                from = at + 1;
            }
            None => break stmt.len(),
        }
    };
    find_ci(&stmt[..end], needle, 0).is_some()
}

/// `DELETE [LOW_PRIORITY] [QUICK] [IGNORE] FROM …`: the first words name one table's delete.
fn delete_from_one(words: &[&[u8]]) -> bool {
    words
        .iter()
        .skip(1)
        .find(|w| {
            !["low_priority", "quick", "ignore"]
                .iter()
                .any(|m| w.eq_ignore_ascii_case(m.as_bytes()))
        })
        .is_some_and(|w| w.eq_ignore_ascii_case(b"from"))
}

/// What the session's `Last_query_cost` on the server owes what the client would read
/// directly, after qcache's own statements changed it: the diagnostics resetter after a hit,
/// a read-back, the identity ask (each a SELECT, which sets it). Kept off the hit path: a hit
/// records nothing here; the statement after it tells ([`LastQueryCost::hit`]).
///
/// `source` is the text whose run leaves the cost the client would read (the last statement
/// that set it, when that is a cacheable read: deterministic, no side effect, so it may run
/// again), with the session's context when it ran ([`CostContext`]); `owed`, that the
/// server's value is not that text's now. Before a statement that may read it
/// ([`CostEffect::Reads`], `Unknown`), the text is sent again (its answer dropped) under
/// that context ([`Replay`]), or not at all where the context cannot be put back. A source
/// that is not a cacheable read is unknown and never replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastQueryCost {
    source: CostSource,
    /// The context `source` ran under (meaningful for a `Replay` source only).
    at: OwnedContext,
    owed: bool,
    /// The record as it was before the statement in flight, a SELECT that is no cacheable
    /// read ([`LastQueryCost::after`]): put back if the server could not parse it
    /// ([`LastQueryCost::ran_nothing`]).
    undo: Option<(CostSource, bool)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum CostSource {
    /// A fresh session: 0, as qcache's own SELECTs without tables leave it.
    #[default]
    Zero,
    Replay(Vec<u8>),
    Unknown,
}

/// What a text is read under on the server, borrowed from the session: the default
/// database (where its unqualified names live), the `sql_mode` (how it parses: `ANSI_QUOTES`
/// makes `"x"` a column, `NO_BACKSLASH_ESCAPES` moves where a string ends), and what its
/// bytes are read as (`policy::context::literal_charset`, which matters to a text with
/// bytes beyond ASCII only). A text replayed under another database may name other tables,
/// under another mode parse otherwise; one under the same context reads as it read. (The
/// optimizer's settings are not followed: a replay after a SET of them may cost otherwise.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostContext<'a> {
    pub db: Option<&'a str>,
    /// The session's `sql_mode` as qcache knows its text (the server's spelling read back,
    /// or the literal a SET gave it); None when unknown.
    pub sql_mode: Option<&'a str>,
    pub charset: u64,
}

/// [`CostContext`], kept with the source (its buffers reused from source to source).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct OwnedContext {
    db: Option<String>,
    sql_mode: Option<String>,
    charset: u64,
}

impl OwnedContext {
    fn set(&mut self, at: CostContext<'_>) {
        fn keep(slot: &mut Option<String>, v: Option<&str>) {
            match (slot.as_mut(), v) {
                (Some(s), Some(v)) => {
                    s.clear();
                    s.push_str(v);
                }
                (_, v) => *slot = v.map(str::to_owned),
            }
        }
        keep(&mut self.db, at.db);
        keep(&mut self.sql_mode, at.sql_mode);
        self.charset = at.charset;
    }

    fn borrow(&self) -> CostContext<'_> {
        CostContext {
            db: self.db.as_deref(),
            sql_mode: self.sql_mode.as_deref(),
            charset: self.charset,
        }
    }
}

/// What qcache sends to put the cost back: `text`, run in the source's context. Where the
/// session's `sql_mode` moved since the text ran, `sql_mode` holds the `SET SESSION sql_mode`
/// that moves it back before the text and the one that moves it forward again after it
/// (neither changes the cost: the text's own stands). `SET STATEMENT sql_mode = … FOR`
/// would not do: the server parses the statement after `FOR` under the mode of the moment
/// (seen on MariaDB 10.11). The database is never moved ([`LastQueryCost::before`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub text: Vec<u8>,
    /// (before the text, after it)
    pub sql_mode: Option<(String, String)>,
}

impl Replay {
    /// What moves the session back before the text.
    pub fn back(&self) -> Vec<&str> {
        self.sql_mode
            .iter()
            .map(|(back, _)| back.as_str())
            .collect()
    }

    /// What moves the session forward again after the text, once the first `moved` of
    /// [`Replay::back`] went through (a refusal stops there, and the text is not sent).
    pub fn forward(&self, moved: usize) -> Vec<&str> {
        self.sql_mode
            .iter()
            .take(moved)
            .map(|(_, forward)| forward.as_str())
            .collect()
    }
}

impl LastQueryCost {
    /// The last statement that set the cost was a hit on `text`, run under its context
    /// (None: not replayable).
    pub fn hit(&mut self, text: Option<(&[u8], CostContext<'_>)>) {
        self.undo = None;
        self.set_source(text);
        self.owed = false;
    }

    /// qcache ran a SELECT of its own: the server's cost is that statement's now.
    pub fn disturbed(&mut self) {
        self.owed = !matches!(self.source, CostSource::Zero);
    }

    /// The source's text was just run again (the hit replayed): the server's cost is right.
    pub fn replayed(&mut self) {
        self.owed = false;
    }

    /// Before a client's statement of `effect` reaches the server, the session's context
    /// `now`: what to run first, if the cost is owed and the statement may read it. Clears
    /// the debt. None too (fail closed: the server's value stands) where the text cannot be
    /// read as it was: its bytes beyond ASCII under another character set, another database,
    /// or a `sql_mode` that cannot be put back ([`Replay`], [`sql_mode_statement`]).
    pub fn before(&mut self, effect: CostEffect, now: CostContext<'_>) -> Option<Replay> {
        if !self.owed
            || matches!(
                effect,
                CostEffect::Keeps | CostEffect::Writes | CostEffect::Sets
            )
        {
            return None;
        }
        self.owed = false;
        let CostSource::Replay(text) = &self.source else {
            return None;
        };
        let then = self.at.borrow();
        if then.charset != now.charset && !text.is_ascii() {
            return None;
        }
        // Never in another database: the `USE` that moved the session forward again would
        // re-read the database's character set and collation and the account's privileges
        // on it, which directly stay as the client's own `USE` read them (another session's
        // ALTER DATABASE or REVOKE in between would show early). The server's value stands.
        if then.db != now.db {
            return None;
        }
        let sql_mode = match (then.sql_mode, now.sql_mode) {
            (a, b) if a == b => None,
            (Some(a), Some(b)) => Some((sql_mode_statement(a)?, sql_mode_statement(b)?)),
            _ => return None,
        };
        Some(Replay {
            text: text.clone(),
            sql_mode,
        })
    }

    /// After a client's statement of `effect` was sent; `read`: its text when it is a
    /// cacheable read (replayable), with the context it runs under; None otherwise.
    pub fn after(&mut self, effect: CostEffect, read: Option<(&[u8], CostContext<'_>)>) {
        self.undo = None;
        match effect {
            CostEffect::Keeps | CostEffect::Reads | CostEffect::Shows => {}
            // A SELECT the server may yet refuse to parse: what the record was is kept (moved,
            // not copied) for [`LastQueryCost::ran_nothing`].
            CostEffect::Sets if read.is_none() => {
                let was = std::mem::replace(&mut self.source, CostSource::Unknown);
                self.undo = Some((was, self.owed));
                self.owed = false;
            }
            CostEffect::Sets => {
                self.set_source(read);
                self.owed = false;
            }
            CostEffect::Writes | CostEffect::Unknown => {
                self.source = CostSource::Unknown;
                self.owed = false;
            }
        }
    }

    /// The statement just sent was answered with ERR `code`. One the server could not parse
    /// ([`RAN_NOTHING`]) left the cost as it was before it, which is the record's before
    /// [`after`](Self::after) (and a resetter sent before it leaves the cost owed again).
    /// A SELECT that parsed and then failed set it to 0, as `after` took it.
    pub fn error_answered(&mut self, code: Option<u16>) {
        if let Some((source, owed)) = self.undo.take() {
            if code.is_some_and(|c| RAN_NOTHING.contains(&c)) {
                self.source = source;
                self.owed = owed;
            }
        }
    }

    /// Whether the server's value differs from the client's and a replay could put it right.
    pub fn owed(&self) -> bool {
        self.owed && matches!(self.source, CostSource::Replay(_))
    }

    fn set_source(&mut self, text: Option<(&[u8], CostContext<'_>)>) {
        let Some((t, at)) = text else {
            self.source = CostSource::Unknown;
            return;
        };
        match &mut self.source {
            // The buffers are reused: a miss after a miss allocates nothing.
            CostSource::Replay(buf) => {
                buf.clear();
                buf.extend_from_slice(t);
            }
            _ => self.source = CostSource::Replay(t.to_vec()),
        }
        self.at.set(at);
    }
}

/// `SET SESSION sql_mode` to `mode` (as qcache knows its text: the server's spelling, or a
/// SET's literal, quoted or not), read the same under any `sql_mode`: None unless the value
/// is names (`DB2`, `MYSQL40` hold digits) and commas (a number, the mode's bit mask, an
/// expression, a quote inside: not put back).
pub fn sql_mode_statement(mode: &str) -> Option<String> {
    let m = mode.trim();
    let inner = match m.as_bytes() {
        [q @ (b'\'' | b'"'), .., l] if q == l => &m[1..m.len() - 1],
        _ => m,
    };
    let number = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    let names = inner
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b',')
        && !inner.split(',').any(number);
    names.then(|| format!("SET SESSION sql_mode = '{inner}'"))
}

/// Whether `word` occurs in `text` (any case) with no identifier character on either side:
/// `status` in `SHOW STATUS` or `` `status` ``, not in `statuses`; a column that merely holds
/// the letters does not make every write after a hit replay the hit.
fn has_word(text: &[u8], word: &[u8]) -> bool {
    let ident = |b: Option<&u8>| {
        b.is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80)
    };
    let mut from = 0;
    while let Some(at) = find_ci(text, word, from) {
        let before = at.checked_sub(1).and_then(|i| text.get(i));
        if !ident(before) && !ident(text.get(at + word.len())) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// Whether qcache may now send a read of its own again to put `Last_query_cost` back (the
/// hit's SELECT, or the source [`LastQueryCost`] owes): only where a statement sent now runs
/// in no transaction (`statement_runs_in_transaction`: none open, no deferred BEGIN, autocommit
/// on). The replay reads the source's tables: inside a transaction, or under autocommit = 0
/// where it would open one, it would open the read view and take the tables' metadata locks
/// before the client's own first read does, and the transaction would then miss what other
/// sessions commit before that read and hold off their DDL (seen on MariaDB 10.11: after a
/// hit, `BEGIN; SHOW STATUS`, another session's UPDATE, the transaction read the old row
/// through qcache). There the resetter stands, which reads no table, and the cost stays owed
/// until a statement outside a transaction may read it (a limit: SHOW STATUS inside the
/// transaction reads the resetter's cost). Except before a BEGIN qcache answered and has
/// not sent (`begin_deferred`): the server is in no transaction yet, and what a hit before
/// that BEGIN owes is put back before it goes up (`Session::exchange_as`); under autocommit
/// off the transaction a replay opens there is ended by that BEGIN's implicit commit.
pub fn may_replay(statement_runs_in_transaction: bool, begin_deferred: bool) -> bool {
    !statement_runs_in_transaction || begin_deferred
}

/// The statement qcache sends to run `text` again for `Last_query_cost` (the hit's replay, or
/// the cost's source): on MariaDB under `lock_wait_timeout = 0`, so that a table another
/// session holds (LOCK TABLES … WRITE, a DDL under way) fails the replay at once instead of
/// making the client's statement wait for it: directly that statement (SHOW STATUS, a CALL
/// of code that reads other tables) waits for nothing. The wrapper leaves the cost the
/// SELECT's (seen on MariaDB 10.11). A text that is itself a SET (`SET STATEMENT … FOR`,
/// which does not nest) is sent as it is, as on MySQL (no SET STATEMENT).
pub fn replay_statement(text: &[u8], mariadb: bool) -> std::borrow::Cow<'_, [u8]> {
    use crate::analysis::lexer::{Lexer, Tok};
    let first = Lexer::new(text).find(|t| t.tok == Tok::Word);
    if !mariadb || first.is_none_or(|t| t.is_kw(text, "SET")) {
        return std::borrow::Cow::Borrowed(text);
    }
    const NOWAIT: &[u8] = b"SET STATEMENT lock_wait_timeout = 0 FOR ";
    let mut sql = Vec::with_capacity(NOWAIT.len() + text.len());
    sql.extend_from_slice(NOWAIT);
    sql.extend_from_slice(text);
    std::borrow::Cow::Owned(sql)
}

/// The hit's statement text to send again before a statement that [`observes_last_query`],
/// from the session's record of its last statement (`SHOW QCACHE LAST`'s, kept at no cost
/// to the hit): None when it cannot be replayed as text — cut short (`cut`), or a prepared
/// statement's that holds placeholders, whose values are gone — and [`resetter`] stands.
pub fn replay_text(sql: &[u8], prepared: bool, cut: bool) -> Option<&[u8]> {
    let placeholders = prepared && has_placeholder(sql);
    (!sql.is_empty() && !cut && !placeholders).then_some(sql)
}

/// Whether a prepared statement's text holds a `?` the server reads as a placeholder: one
/// outside strings, quoted names and comments. Where a string ends depends on
/// `NO_BACKSLASH_ESCAPES` (which may differ between the PREPARE and now), so the text is
/// lexed both ways and a `?` that either reading finds counts (fail closed).
pub fn has_placeholder(sql: &[u8]) -> bool {
    use crate::analysis::lexer::Lexer;
    if !sql.contains(&b'?') {
        return false;
    }
    // Every other reading too: NO_BACKSLASH_ESCAPES', ANSI_QUOTES' (`'\'` escapes, `"\"`
    // does not), a multi-byte client character set's.
    std::iter::once(Lexer::new(sql))
        .chain(crate::analysis::lexer::other_lexers(sql))
        .any(|mut lx| std::iter::from_fn(|| lx.next_token()).any(|t| t.is_punct(b'?')))
}

/// Marks a pending restore (`SessionState::after_hit`) as one after qcache's own read-back
/// rather than after a hit: the server must be left as a fresh session or a SET leaves it,
/// `ROW_COUNT()` 0 rather than a SELECT's -1. A hit overwrites the pending value, and with it
/// this mark, so the hit path does no more than it did.
pub const AFTER_READ_BACK: u64 = 1 << 63;

/// With [`AFTER_READ_BACK`]: `FOUND_ROWS()` is already what it must be (the read-back's SELECT
/// sent the one row it was at), so only `DO 0` is owed.
pub const FOUND_ROWS_KEPT: u64 = 1 << 62;

/// The restore owed after qcache's read-back SELECT (which leaves `FOUND_ROWS()` 1,
/// `ROW_COUNT()` -1 and no warnings), given the values it read from before it: None when
/// they were those already; a plain resetter when only `FOUND_ROWS()` differs; with
/// [`AFTER_READ_BACK`] (`DO 0` after it) for any other `ROW_COUNT()` (0 after a SET, and
/// anything unread).
pub fn after_read_back(found_rows: u64, row_count: Option<i64>) -> Option<u64> {
    match row_count {
        Some(-1) if found_rows == 1 => None,
        Some(-1) => Some(found_rows),
        // `DO 0` leaves FOUND_ROWS() as it is (only a SELECT sets it).
        _ if found_rows == 1 => Some(AFTER_READ_BACK | FOUND_ROWS_KEPT | 1),
        _ => Some(AFTER_READ_BACK | found_rows),
    }
}

/// The restore owed after a statement qcache answered with its own OK where the server
/// would have answered with one (`Session::answer_ok_locally`): a plain BEGIN, COMMIT or
/// ROLLBACK (`session/begin.rs`), a SET of `query_cache_type` alone, FLUSH or RESET QUERY
/// CACHE outside a transaction; given the one owed before. On the server each sets
/// `ROW_COUNT()` to 0 and leaves `FOUND_ROWS()` and the warnings, so `DO 0` is owed, after
/// the resetter a hit still owes.
pub fn after_local_ok(pending: Option<u64>) -> Option<u64> {
    Some(match pending {
        None => AFTER_READ_BACK | FOUND_ROWS_KEPT | 1,
        Some(p) => p | AFTER_READ_BACK,
    })
}

/// The restore owed after rows qcache answered alone where the server would have run a
/// statement that reads a table (`SHOW STATUS LIKE 'Qcache%'`, `rows` rows sent): as after a
/// hit of that many rows, `ROW_COUNT()` -1, an earlier statement's warnings cleared and
/// `FOUND_ROWS()` the rows sent. (The server's would count its own rows, which qcache's
/// replace by design.) It replaces what was owed before, which it sets over.
pub fn after_own_rows(rows: u64) -> Option<u64> {
    Some(rows & !(AFTER_READ_BACK | FOUND_ROWS_KEPT))
}

/// The restore still owed once the deferred BEGIN reaches the server ahead of a statement:
/// its own BEGIN sets `ROW_COUNT()` to 0, so a `DO 0` owed alone is dropped (no private
/// statement where the server's BEGIN is sent anyway: riding along a read, or sent first
/// ahead of a write, where the restore would have gone just before it). A resetter owed for
/// a hit stays, `DO 0` after it: riding along, it is sent after BEGIN and leaves
/// `ROW_COUNT()` -1; sent first, it goes with what it owes, as before.
pub fn after_server_begin(pending: Option<u64>) -> Option<u64> {
    pending.filter(|p| pending_restore(*p).0.is_some())
}

/// What a pending restore `pending` (see [`AFTER_READ_BACK`]) sends before the next statement
/// that is not a cacheable read: the `FOUND_ROWS()` for the [`resetter`] (None: no resetter),
/// and whether `DO 0` follows it (`ROW_COUNT()` back to 0).
pub fn pending_restore(pending: u64) -> (Option<u64>, bool) {
    let found_rows = pending & !(AFTER_READ_BACK | FOUND_ROWS_KEPT);
    (
        (pending & FOUND_ROWS_KEPT == 0).then_some(found_rows),
        pending & AFTER_READ_BACK != 0,
    )
}

/// Whether the server's diagnostics area may still hold warnings or errors that a later
/// `SHOW WARNINGS`, `SHOW ERRORS` or `@@warning_count` reads, after a statement's response.
/// The server clears it only for a statement that uses tables: a SET, `SELECT @@x` or `DO`
/// leave the previous statement's. So after a statement that raised something, or one that
/// may use none (`used_tables` false: anything but a read or write of named tables) after
/// such a one, it may: a read-back there (its resetter reads a derived table) would clear
/// what the client can still ask for, and is not sent (`engine::settings::follow_set`).
pub fn may_persist(before: bool, raised: bool, used_tables: bool) -> bool {
    raised || (before && !used_tables)
}

/// The client's own leg, which qcache terminates: what session status describing the
/// connection must report (the server describes its leg to qcache).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientLeg {
    pub compressed: bool,
    /// TLS version and cipher (server spelling), None for plain TCP.
    pub tls: Option<(String, String)>,
    /// The upstream leg is TLS too: for the values qcache cannot compute on a TLS client
    /// leg (the cipher list, verify settings), the server's describe a TLS connection.
    pub upstream_tls: bool,
}

/// The value of session status `name` (any case) for the client's leg, or None when the
/// server's value stands (global counters, and what qcache cannot know).
pub fn client_leg_status(name: &str, leg: &ClientLeg) -> Option<String> {
    let name = name.to_ascii_lowercase();
    if name == "compression" {
        return Some(if leg.compressed { "ON" } else { "OFF" }.to_string());
    }
    match (&leg.tls, name.as_str()) {
        // A plain leg: what the server reports for a plain connection.
        (
            None,
            "ssl_cipher"
            | "ssl_cipher_list"
            | "ssl_version"
            | "ssl_server_not_after"
            | "ssl_server_not_before",
        ) => Some(String::new()),
        (
            None,
            "ssl_default_timeout" | "ssl_verify_depth" | "ssl_verify_mode" | "ssl_sessions_reused",
        ) => Some("0".to_string()),
        (Some((version, _)), "ssl_version") => Some(version.clone()),
        (Some((_, cipher)), "ssl_cipher") => Some(cipher.clone()),
        (Some(_), "ssl_sessions_reused") => Some("0".to_string()),
        _ => None,
    }
}

/// rustls' name of a cipher suite as OpenSSL (and so the server) spells it.
pub fn openssl_cipher_name(rustls_name: &str) -> String {
    let known = [
        ("TLS13_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
        ("TLS13_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
        (
            "TLS13_CHACHA20_POLY1305_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
        ),
        (
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "ECDHE-RSA-AES128-GCM-SHA256",
        ),
        (
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "ECDHE-RSA-AES256-GCM-SHA384",
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "ECDHE-RSA-CHACHA20-POLY1305",
        ),
    ];
    known
        .iter()
        .find(|(r, _)| *r == rustls_name)
        .map_or_else(|| rustls_name.to_string(), |(_, o)| o.to_string())
}

/// Whether `words` (lower-case) are `SHOW [GLOBAL|SESSION|LOCAL] VARIABLES …`, and of which
/// scope (true: GLOBAL): its `query_cache_type` row must be qcache's value of that scope, as
/// `SELECT @@[global.]query_cache_type` is.
pub fn show_variables_scope(words: &[&str]) -> Option<bool> {
    match words {
        ["show", "variables", ..] => Some(false),
        ["show", "session" | "local", "variables", ..] => Some(false),
        ["show", "global", "variables", ..] => Some(true),
        _ => None,
    }
}

/// Whether `words` (lower-case) are `SHOW [SESSION|LOCAL] STATUS …`, which describes this
/// connection (plain `SHOW STATUS` is session status).
pub fn is_session_status(words: &[&str]) -> bool {
    matches!(
        words,
        ["show", "status", ..] | ["show", "session" | "local", "status", ..]
    )
}

fn find_ci(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per restore owed before a locally answered OK (BEGIN / COMMIT, a SET of
    /// `query_cache_type`, FLUSH QUERY CACHE): what is owed after it, and after the deferred
    /// BEGIN then reached the server.
    #[test]
    fn local_ok_statements() {
        let do_0 = AFTER_READ_BACK | FOUND_ROWS_KEPT | 1;
        for (before, local, server) in [
            (None, Some(do_0), None),
            (Some(do_0), Some(do_0), None),
            (
                Some(7),
                Some(AFTER_READ_BACK | 7),
                Some(AFTER_READ_BACK | 7),
            ),
            (Some(0), Some(AFTER_READ_BACK), Some(AFTER_READ_BACK)),
            (
                Some(AFTER_READ_BACK | 5),
                Some(AFTER_READ_BACK | 5),
                Some(AFTER_READ_BACK | 5),
            ),
        ] {
            let after = after_local_ok(before);
            assert_eq!(after, local, "{before:?}");
            assert_eq!(after_server_begin(after), server, "{before:?}");
            assert!(pending_restore(after.unwrap()).1, "DO 0 owed: {before:?}");
        }
        assert_eq!(after_server_begin(None), None);
    }

    /// Rows qcache answered alone owe what a hit of as many rows does.
    #[test]
    fn own_rows_owe_a_hits_restore() {
        for rows in [0, 1, 8, 40] {
            let owed = after_own_rows(rows).expect("owed");
            assert_eq!(pending_restore(owed), (Some(rows), false), "{rows}");
        }
    }

    #[test]
    fn pending_restores() {
        const KEPT: u64 = AFTER_READ_BACK | FOUND_ROWS_KEPT;
        for (pending, want, why) in [
            (0, (Some(0), false), "a hit of an empty result"),
            (7, (Some(7), false), "a hit of 7 rows"),
            (AFTER_READ_BACK, (Some(0), true), "a read-back at connect"),
            (
                AFTER_READ_BACK | 5,
                (Some(5), true),
                "a read-back after a SET",
            ),
            (KEPT | 1, (None, true), "FOUND_ROWS() was 1 already"),
        ] {
            assert_eq!(pending_restore(pending), want, "{why}");
        }
        for (found, row_count, want, why) in [
            (
                1,
                Some(-1),
                None,
                "as the read-back leaves them: nothing owed",
            ),
            (
                0,
                Some(-1),
                Some(0),
                "FOUND_ROWS() 0 after a SELECT: the resetter",
            ),
            (
                5,
                Some(0),
                Some(AFTER_READ_BACK | 5),
                "after a SET: DO 0 too",
            ),
            (
                1,
                Some(0),
                Some(KEPT | 1),
                "FOUND_ROWS() 1 already: DO 0 alone",
            ),
            (
                2,
                Some(3),
                Some(AFTER_READ_BACK | 2),
                "after a write: ROW_COUNT() 0",
            ),
            (
                2,
                None,
                Some(AFTER_READ_BACK | 2),
                "ROW_COUNT() unread: restore both",
            ),
        ] {
            assert_eq!(after_read_back(found, row_count), want, "{why}");
        }
    }

    #[test]
    fn what_the_diagnostics_area_may_still_hold() {
        for (before, raised, used_tables, may, why) in [
            (
                false,
                false,
                false,
                false,
                "nothing raised since the last clear",
            ),
            (false, true, true, true, "the statement raised a warning"),
            (
                true,
                false,
                false,
                true,
                "a SET keeps the previous statement's warnings",
            ),
            (
                true,
                false,
                true,
                false,
                "a statement over tables cleared them",
            ),
            (true, true, false, true, "raised, and kept"),
        ] {
            assert_eq!(may_persist(before, raised, used_tables), may, "{why}");
        }
    }

    #[test]
    fn set_operations_under_a_select_limit_are_not_stored() {
        let u = "SELECT a FROM t UNION SELECT a FROM u";
        for (stmt, limited, stored, why) in [
            (
                u,
                false,
                true,
                "no limit: the rows sent are the rows counted",
            ),
            (u, true, false, "the limit cut rows the server counted"),
            (
                "SELECT a FROM t",
                true,
                true,
                "one SELECT: the server counts what it sent",
            ),
            (
                "SET STATEMENT sql_select_limit = 1 FOR SELECT a FROM t EXCEPT SELECT 1",
                false,
                false,
                "a limit set for the statement",
            ),
            ("SELECT unions FROM t", true, true, "a word, not letters"),
        ] {
            assert_eq!(
                entry_diagnostics(stmt.as_bytes(), 1, limited).is_some(),
                stored,
                "{why}"
            );
        }
    }

    #[test]
    fn found_rows_follows_from_rows_and_literal_offsets() {
        let rows: &[(&str, u64, Option<u64>)] = &[
            ("SELECT a FROM t", 5, Some(5)),
            ("SELECT a, b FROM t WHERE x IN (1, 2)", 2, Some(2)),
            ("SELECT a FROM t LIMIT 3", 3, Some(3)),
            ("SELECT a FROM t LIMIT ?", 2, Some(2)),
            ("SELECT a FROM t ORDER BY a LIMIT 2", 0, Some(0)),
            // An offset counts the rows it skipped.
            ("SELECT a FROM t LIMIT 3, 1", 1, Some(4)),
            ("SELECT a FROM t LIMIT 3,5", 2, Some(5)),
            ("select a from t limit 1 offset 2", 1, Some(3)),
            ("SELECT a FROM t LIMIT 0, 10", 4, Some(4)),
            // Past the end: only the server knows how many it skipped.
            ("SELECT a FROM t LIMIT 10, 1", 0, None),
            // Placeholders, several LIMITs, ROWS EXAMINED: unknown.
            ("SELECT a FROM t LIMIT ?, ?", 1, None),
            ("SELECT a FROM t LIMIT 1 OFFSET ?", 1, None),
            (
                "SELECT * FROM (SELECT a FROM t LIMIT 2, 1) d LIMIT 1",
                1,
                None,
            ),
            (
                "SELECT * FROM t WHERE a IN (SELECT a FROM u LIMIT 2) AND b IN (1, 2)",
                1,
                None,
            ),
            ("SELECT a FROM t LIMIT ROWS EXAMINED 10", 1, None),
            // The standard's OFFSET … ROWS / FETCH FIRST … without the word LIMIT.
            ("SELECT a FROM t ORDER BY a OFFSET 2 ROWS", 3, None),
            (
                "SELECT a FROM t ORDER BY a FETCH FIRST 2 ROWS ONLY",
                2,
                None,
            ),
            (
                "SELECT a FROM t ORDER BY a FETCH FIRST 1 ROWS WITH TIES",
                2,
                None,
            ),
            ("SELECT fetched, offsets FROM t", 2, Some(2)),
            ("SELECT a FROM t LIMIT 1, 2 /* limit */", 1, None),
        ];
        for &(sql, n, want) in rows {
            assert_eq!(found_rows(sql.as_bytes(), n), want, "{sql} ({n} rows)");
        }
    }

    #[test]
    fn session_status_describes_the_clients_leg() {
        let plain = ClientLeg::default();
        let tls = ClientLeg {
            compressed: true,
            tls: Some(("TLSv1.3".into(), "TLS_AES_256_GCM_SHA384".into())),
            upstream_tls: false,
        };
        let rows: &[(&str, &ClientLeg, Option<&str>)] = &[
            ("Compression", &plain, Some("OFF")),
            ("compression", &tls, Some("ON")),
            ("Ssl_version", &plain, Some("")),
            ("Ssl_cipher", &plain, Some("")),
            ("Ssl_verify_mode", &plain, Some("0")),
            ("Ssl_version", &tls, Some("TLSv1.3")),
            ("Ssl_cipher", &tls, Some("TLS_AES_256_GCM_SHA384")),
            // Global counters: the server's.
            ("Ssl_accepts", &plain, None),
            ("Ssl_session_cache_mode", &tls, None),
            ("Uptime", &plain, None),
        ];
        for &(name, leg, want) in rows {
            assert_eq!(client_leg_status(name, leg).as_deref(), want, "{name}");
        }
        assert_eq!(
            openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
            "ECDHE-RSA-AES256-GCM-SHA384"
        );
    }

    #[test]
    fn show_statements_scopes() {
        assert_eq!(
            show_variables_scope(&["show", "variables", "like", "'q%'"]),
            Some(false)
        );
        assert_eq!(
            show_variables_scope(&["show", "session", "variables"]),
            Some(false)
        );
        assert_eq!(
            show_variables_scope(&["show", "global", "variables"]),
            Some(true)
        );
        assert_eq!(show_variables_scope(&["show", "status"]), None);
        assert!(is_session_status(&["show", "status", "like", "'ssl%'"]));
        assert!(is_session_status(&["show", "session", "status"]));
        assert!(!is_session_status(&["show", "global", "status"]));
    }

    #[test]
    fn statements_that_may_read_the_last_querys_cost() {
        for (sql, observes, why) in [
            (
                "SHOW SESSION STATUS LIKE 'Last_query_cost'",
                true,
                "reads it",
            ),
            ("show status", true, "any case"),
            ("SHOW GLOBAL STATUS", true, "fails closed: any STATUS"),
            ("CALL p()", true, "a procedure may start with SHOW STATUS"),
            ("EXECUTE s", true, "a prepared SHOW STATUS"),
            ("INSERT INTO t VALUES (1)", false, "an ordinary write"),
            ("UPDATE t SET a = 1", false, "an ordinary write"),
            ("SET @x = 1", false, "a SET"),
            ("SELECT FOUND_ROWS()", false, "the resetter answers it"),
            (
                "UPDATE t SET status = 1",
                false,
                "a column named status: no SHOW",
            ),
            (
                "INSERT INTO t VALUES (1); SHOW STATUS",
                true,
                "a later statement of a multi-statement",
            ),
            ("SHOW/**/`STATUS`", true, "words, however separated"),
            (
                "UPDATE call_log SET executed = 1",
                false,
                "letters, not words",
            ),
            ("EXECUTE IMMEDIATE 'SHOW STATUS'", true, "SQL-level execute"),
            ("call p()", true, "any case"),
        ] {
            assert_eq!(
                observes_last_query(sql.as_bytes()),
                observes,
                "{why}: {sql}"
            );
        }
        for (sql, prepared, cut, replays, why) in [
            (
                "SELECT a FROM t WHERE a = 2",
                false,
                false,
                true,
                "a text hit",
            ),
            (
                "SELECT a FROM t WHERE a = 2",
                true,
                false,
                true,
                "prepared, no placeholder",
            ),
            (
                "SELECT a FROM t WHERE a = ?",
                true,
                false,
                false,
                "the values are gone",
            ),
            (
                "SELECT a FROM t WHERE b = '?'",
                false,
                false,
                true,
                "text: a literal",
            ),
            (
                "SELECT a FROM t WHERE b = '?'",
                true,
                false,
                true,
                "prepared: a '?' in a string is no placeholder",
            ),
            (
                "SELECT `?` FROM t WHERE b = \"?\" /* ? */ -- ?\n",
                true,
                false,
                true,
                "quoted names, double-quoted strings, comments",
            ),
            (
                "SELECT a FROM t WHERE b = '?' AND a = ?",
                true,
                false,
                false,
                "a placeholder beside a literal",
            ),
            (
                "SELECT a FROM t WHERE b = '\\' AND a = ? AND c = '?'",
                true,
                false,
                false,
                "where the string ends depends on NO_BACKSLASH_ESCAPES",
            ),
            (
                "SELECT a FROM t WHERE b = '\\' AND a = '?'",
                true,
                false,
                false,
                "either reading finding a placeholder counts",
            ),
            (
                "SELECT LENGTH('\\' \"') + \"\\\" + ? -- \"",
                true,
                false,
                false,
                "ANSI_QUOTES' reading alone finds it",
            ),
            (
                "SELECT a FROM t WHERE a = /*!50000 ? */ 1",
                true,
                false,
                false,
                "an executable comment is code",
            ),
            (
                "SELECT a FROM t WHERE a = 2",
                false,
                true,
                false,
                "cut short",
            ),
            ("", false, false, false, "nothing recorded"),
        ] {
            assert_eq!(
                replay_text(sql.as_bytes(), prepared, cut).is_some(),
                replays,
                "{why}"
            );
        }
    }

    /// One row per text: what a replay sends (waiting for no table lock on MariaDB).
    #[test]
    fn a_replay_waits_for_no_lock() {
        const W: &str = "SET STATEMENT lock_wait_timeout = 0 FOR ";
        for (text, mariadb, sent) in [
            ("SELECT a FROM t", true, format!("{W}SELECT a FROM t")),
            (
                "WITH c AS (SELECT a FROM t) SELECT a FROM c",
                true,
                format!("{W}WITH c AS (SELECT a FROM t) SELECT a FROM c"),
            ),
            (
                "(SELECT a FROM t) UNION (SELECT b FROM u)",
                true,
                format!("{W}(SELECT a FROM t) UNION (SELECT b FROM u)"),
            ),
            (
                "/* c */ select a FROM t",
                true,
                format!("{W}/* c */ select a FROM t"),
            ),
            (
                "/* c */ SET STATEMENT max_join_size = 10 FOR SELECT a FROM t",
                true,
                "/* c */ SET STATEMENT max_join_size = 10 FOR SELECT a FROM t".to_string(),
            ),
            ("SELECT a FROM t", false, "SELECT a FROM t".to_string()),
        ] {
            assert_eq!(
                replay_statement(text.as_bytes(), mariadb).as_ref(),
                sent.as_bytes(),
                "{text}"
            );
        }
    }

    /// One row per session state: whether a replay of the cost's source may be sent.
    #[test]
    fn a_replay_opens_no_transaction() {
        for (in_txn, deferred, replays, why) in [
            (
                false,
                false,
                true,
                "autocommit, no transaction: the replay leaves nothing behind",
            ),
            (
                true,
                false,
                false,
                "in a transaction (open, or autocommit off): it would open the read view \
                 and lock the tables early",
            ),
            (
                true,
                true,
                true,
                "only a BEGIN qcache answered: the replay goes up before it, outside",
            ),
        ] {
            assert_eq!(may_replay(in_txn, deferred), replays, "{why}");
        }
    }

    /// One row per statement: what it does to `Last_query_cost` (as MariaDB 10.11 was seen).
    #[test]
    fn what_statements_do_to_the_last_querys_cost() {
        use CostEffect::*;
        for (sql, want) in [
            ("SELECT a FROM t", Sets),
            ("(SELECT a FROM t) UNION (SELECT 1)", Sets),
            ("WITH c AS (SELECT 1) SELECT * FROM c", Sets),
            ("/* trace */ select nosuch FROM t", Sets),
            ("SET @x = 1", Keeps),
            ("SET @y = (SELECT MAX(a) FROM t)", Keeps),
            ("SET autocommit = 0", Keeps),
            ("SET SESSION lock_wait_timeout = 1, @x = 2", Keeps),
            ("SET SESSION wait_timeout = 100", Keeps),
            // What a replay of the cost's source would be read or costed under: the cost is
            // put back before it, as before a reader.
            ("SET NAMES latin1", Reads),
            ("SET CHARACTER SET latin1", Reads),
            ("SET SESSION join_cache_level = 0", Reads),
            ("set @@session.OPTIMIZER_SWITCH = 'mrr=on'", Reads),
            ("SET @@join_buffer_size = 1024", Reads),
            ("SET `sql_mode` = 'ANSI_QUOTES'", Reads),
            ("SET sql_mode = CONCAT(@@sql_mode, ',ANSI')", Reads),
            ("SET SESSION optimizer_use_condition_selectivity = 1", Reads),
            ("SET collation_connection = utf8mb4_bin", Reads),
            ("SET @x = 1, max_join_size = 10", Reads),
            // Recording turned on: nothing of qcache's may be sent after it, so a cost owed
            // is put back before it, as before a reader.
            ("SET SESSION profiling = 1", Reads),
            ("SET @@optimizer_trace = 'enabled=on'", Reads),
            ("SET profiling_history_size = 5", Keeps),
            (
                "SET STATEMENT sql_select_limit = 1 FOR SELECT a FROM t",
                Unknown,
            ),
            ("DO 0", Keeps),
            ("BEGIN", Keeps),
            ("COMMIT", Keeps),
            ("SHOW WARNINGS", Keeps),
            ("SHOW PROFILES", Keeps),
            ("GET DIAGNOSTICS @n = NUMBER", Keeps),
            ("INSERT INTO u VALUES (1), (2)", Writes),
            ("INSERT INTO u SELECT a FROM t", Unknown),
            ("UPDATE u SET b = 2 WHERE b IN (1, 2)", Writes),
            ("UPDATE u JOIN t ON t.a = u.b SET u.b = 1", Unknown),
            ("UPDATE u, t SET u.b = t.a", Unknown),
            ("DELETE FROM u WHERE b IN (1, 2)", Writes),
            ("DELETE LOW_PRIORITY QUICK FROM u", Writes),
            ("DELETE u FROM u JOIN t ON t.a = u.b", Unknown),
            ("DELETE FROM u USING u, t", Unknown),
            ("SHOW STATUS LIKE 'Last_query_cost'", Shows),
            ("show session status", Shows),
            ("SHOW GLOBAL STATUS", Shows),
            ("SHOW VARIABLES", Unknown),
            ("SHOW TABLES", Unknown),
            ("CALL p()", Unknown),
            ("EXECUTE s", Unknown),
            ("SET @x = 1; SHOW STATUS", Unknown),
            ("SET @x = 1; SELECT 1", Unknown),
            // The database moves: the text that set the cost replays in its own.
            ("USE other", Keeps),
            ("use `other`", Keeps),
            ("USE other; SHOW STATUS", Unknown),
            ("SELECT 1;", Sets),
            ("INSERT INTO status VALUES (1)", Writes),
            ("CREATE TABLE v (a INT)", Unknown),
            ("", Unknown),
        ] {
            assert_eq!(cost_effect(sql.as_bytes()), want, "{sql}");
        }
    }

    /// One row per sequence of events: whether a replay is owed, and of what, before a
    /// statement that reads the cost.
    #[test]
    fn the_last_querys_cost_is_owed_and_replayed() {
        use CostEffect::*;
        enum E {
            Hit(Option<&'static str>),
            Private,
            Replayed,
            Sent(CostEffect, Option<&'static str>),
        }
        use E::*;
        let rows: &[(&[E], Option<&str>, &str)] = &[
            (
                &[Private],
                None,
                "a fresh session's 0: qcache's SELECTs leave 0",
            ),
            (
                &[Hit(Some("SELECT h")), Private],
                Some("SELECT h"),
                "the resetter after a hit",
            ),
            (
                &[Hit(Some("SELECT h")), Private, Sent(Keeps, None)],
                Some("SELECT h"),
                "a SET in between keeps the debt",
            ),
            (
                &[Hit(Some("SELECT h")), Private, Sent(Writes, None)],
                None,
                "a write in between: the replay would cost otherwise (not owed, unknown)",
            ),
            (
                &[Hit(Some("SELECT h")), Private, Sent(Sets, None)],
                None,
                "a SELECT in between sets its own",
            ),
            (
                &[Hit(Some("SELECT h")), Private, Sent(Unknown, None)],
                None,
                "an unknown statement had the replay before it",
            ),
            (&[Hit(None), Private], None, "a hit that cannot be replayed"),
            (
                &[Hit(Some("SELECT h")), Replayed],
                None,
                "the hit itself replayed",
            ),
            (
                &[Sent(Sets, Some("SELECT m")), Sent(Keeps, None), Private],
                Some("SELECT m"),
                "a read-back after a miss and a SET",
            ),
            (
                &[Sent(Sets, None), Private],
                None,
                "after a SELECT that cannot run again: unknown",
            ),
            (
                &[
                    Sent(Sets, Some("SELECT m")),
                    Sent(Sets, Some("SELECT n")),
                    Private,
                ],
                Some("SELECT n"),
                "the last one counts",
            ),
        ];
        let at = CostContext {
            db: Some("d"),
            sql_mode: Some("STRICT_TRANS_TABLES"),
            charset: 1,
        };
        for (events, want, why) in rows {
            let mut c = LastQueryCost::default();
            for e in events.iter() {
                match e {
                    Hit(t) => c.hit(t.map(|t| (t.as_bytes(), at))),
                    Private => c.disturbed(),
                    Replayed => c.replayed(),
                    Sent(effect, read) => {
                        if let Some(r) = c.before(*effect, at) {
                            assert!(matches!(effect, Reads | Shows | Unknown), "{why}: {r:?}");
                        }
                        c.after(*effect, read.map(|r| (r.as_bytes(), at)));
                    }
                }
            }
            assert_eq!(c.owed(), want.is_some(), "{why}");
            assert_eq!(
                c.before(Keeps, at),
                None,
                "{why}: never before a statement that keeps it"
            );
            let replay = c.before(Reads, at);
            assert_eq!(
                replay.as_ref().map(|r| r.text.as_slice()),
                want.map(str::as_bytes),
                "{why}"
            );
            if let Some(r) = replay {
                assert_eq!(r.sql_mode, None, "{why}: same context");
            }
            assert!(!c.owed(), "{why}: replayed once");
        }
    }

    /// One row per way the session's context moved between the statement that set the
    /// cost and the reader: the replay runs in the context the text ran in, moved back and
    /// forward again, or not at all where that cannot be put back (fail closed).
    #[test]
    fn a_replay_runs_in_the_context_its_text_ran_in() {
        let then = CostContext {
            db: Some("shop"),
            sql_mode: Some("STRICT_TRANS_TABLES"),
            charset: 7,
        };
        let mode = |a: &str, b: &str| {
            Some((
                format!("SET SESSION sql_mode = '{a}'"),
                format!("SET SESSION sql_mode = '{b}'"),
            ))
        };
        type Moves = Option<Option<(String, String)>>;
        let rows: Vec<(&str, CostContext, Moves)> = vec![
            ("nothing moved: the text as it is", then, Some(None)),
            (
                "USE since: not replayed (a USE re-reads the database's charset, privileges)",
                CostContext {
                    db: Some("other"),
                    ..then
                },
                None,
            ),
            (
                "sql_mode set since (read back): under its mode, and back",
                CostContext {
                    sql_mode: Some("ANSI_QUOTES,STRICT_TRANS_TABLES"),
                    ..then
                },
                Some(mode(
                    "STRICT_TRANS_TABLES",
                    "ANSI_QUOTES,STRICT_TRANS_TABLES",
                )),
            ),
            (
                "a literal's spelling, quoted",
                CostContext {
                    sql_mode: Some("'ANSI'"),
                    ..then
                },
                Some(mode("STRICT_TRANS_TABLES", "ANSI")),
            ),
            (
                "an empty mode is a mode",
                CostContext {
                    sql_mode: Some(""),
                    ..then
                },
                Some(mode("STRICT_TRANS_TABLES", "")),
            ),
            (
                "both moved",
                CostContext {
                    db: Some("b"),
                    sql_mode: Some("ANSI"),
                    charset: 7,
                },
                None,
            ),
            (
                "another character set (SET NAMES): an ASCII text reads the same",
                CostContext { charset: 8, ..then },
                Some(None),
            ),
            (
                "no database now: none to go back to",
                CostContext { db: None, ..then },
                None,
            ),
            (
                "a database name qcache would have to quote otherwise",
                CostContext {
                    db: Some("we`ird"),
                    ..then
                },
                None,
            ),
            (
                "a name in a character set the session may read otherwise",
                CostContext {
                    db: Some("café"),
                    ..then
                },
                None,
            ),
            (
                "a mode qcache cannot spell back",
                CostContext {
                    sql_mode: Some("\u{0}NULL"),
                    ..then
                },
                None,
            ),
            (
                "a mode as a number",
                CostContext {
                    sql_mode: Some("4"),
                    ..then
                },
                None,
            ),
            (
                "a number among the names",
                CostContext {
                    sql_mode: Some("ANSI,4"),
                    ..then
                },
                None,
            ),
            (
                "names with digits",
                CostContext {
                    sql_mode: Some("DB2,MYSQL40"),
                    ..then
                },
                Some(mode("STRICT_TRANS_TABLES", "DB2,MYSQL40")),
            ),
            (
                "the mode unknown now",
                CostContext {
                    sql_mode: None,
                    ..then
                },
                None,
            ),
        ];
        for (why, now, want) in rows {
            let mut c = LastQueryCost::default();
            c.hit(Some((b"SELECT a FROM t WHERE b = \"x\"", then)));
            c.disturbed();
            let got = c.before(CostEffect::Reads, now);
            assert_eq!(got.as_ref().map(|r| r.sql_mode.clone()), want, "{why}");
            if let Some(r) = got {
                assert_eq!(r.text, b"SELECT a FROM t WHERE b = \"x\"", "{why}");
            }
            assert!(!c.owed(), "{why}: asked once");
        }
        // A text with bytes beyond ASCII under another character set reads otherwise.
        let mut c = LastQueryCost::default();
        c.hit(Some(("SELECT a FROM t WHERE b = 'é'".as_bytes(), then)));
        c.disturbed();
        let latin1 = CostContext { charset: 8, ..then };
        assert_eq!(c.before(CostEffect::Reads, latin1), None, "not replayed");
        c.hit(Some(("SELECT a FROM t WHERE b = 'é'".as_bytes(), then)));
        c.disturbed();
        assert!(c.before(CostEffect::Reads, then).is_some(), "same charset");
        // A SELECT that is no cacheable read, after a hit and the resetter sent before it:
        // (why, its ERR code or None for an answer, the hit still replayed before SHOW STATUS)
        let rows: &[(&str, Option<Option<u16>>, bool)] = &[
            ("answered: its own cost", None, false),
            ("a parse error (1064): ran nothing", Some(Some(1064)), true),
            ("ER_SYNTAX_ERROR (1149)", Some(Some(1149)), true),
            ("an unknown table (1146): set 0", Some(Some(1146)), false),
            ("an ERR without a code read", Some(None), false),
        ];
        for (why, err, replayed) in rows {
            let mut c = LastQueryCost::default();
            c.hit(Some((b"SELECT h", then)));
            c.disturbed();
            c.after(CostEffect::Sets, None);
            if let Some(code) = err {
                c.error_answered(*code);
            }
            let r = c.before(CostEffect::Shows, then);
            assert_eq!(r.is_some(), *replayed, "{why}");
        }
        // Only the statement just sent is undone.
        let mut c = LastQueryCost::default();
        c.hit(Some((b"SELECT h", then)));
        c.disturbed();
        c.after(CostEffect::Sets, None);
        c.after(CostEffect::Keeps, None);
        c.error_answered(Some(1064));
        assert_eq!(
            c.before(CostEffect::Shows, then),
            None,
            "a later statement's ERR"
        );
        // The context is the source's: a later read's replaces a hit's.
        let mut c = LastQueryCost::default();
        c.hit(Some((b"SELECT h", then)));
        let there = CostContext {
            db: Some("b"),
            ..then
        };
        c.after(CostEffect::Keeps, None);
        c.after(CostEffect::Sets, Some((b"SELECT m", there)));
        c.disturbed();
        let r = c.before(CostEffect::Unknown, there).expect("owed");
        assert_eq!(r.text.as_slice(), &b"SELECT m"[..]);
        // The mode moved: back before the text, forward after it; a refusal moves nothing.
        let r = Replay {
            text: b"SELECT 1".to_vec(),
            sql_mode: Some(("SET m".into(), "SET n".into())),
        };
        assert_eq!((r.back(), r.forward(1)), (vec!["SET m"], vec!["SET n"]));
        assert!(r.forward(0).is_empty(), "the mode refused: nothing to undo");
        let same = Replay {
            sql_mode: None,
            ..r
        };
        assert!(same.back().is_empty() && same.forward(1).is_empty());
    }

    #[test]
    fn resetters_are_one_statement_per_count() {
        assert!(resetter(0, true).ends_with("WHERE 0"));
        assert!(!resetter(1, true).contains("WHERE"));
        // MariaDB: two table functions of ⌈√N⌉ elements, cut to N; no temporary table.
        for (n, k) in [
            (2, 2),
            (4, 2),
            (5, 3),
            (9, 3),
            (2990, 55),
            (1_000_000, 1000),
        ] {
            let r = resetter(n, true);
            assert!(
                r.starts_with("SET STATEMENT sql_big_selects = 1 FOR SELECT SQL_CALC_FOUND_ROWS"),
                "{r}"
            );
            assert!(r.contains(&format!("REPEAT('0,', {})", k - 1)), "{n}: {r}");
            assert!(
                r.contains(&format!("* {k} + qcache_b.i <= {n} LIMIT 0")),
                "{n}: {r}"
            );
            assert!(!r.contains("RECURSIVE"), "{r}");
        }
        let f = resetter_fallback(7, true);
        assert!(f.starts_with("SET STATEMENT max_recursive_iterations = 7 FOR"));
        assert!(f.contains("n < 7") && f.contains("SQL_CALC_FOUND_ROWS"));
        let m = resetter(7, false);
        assert!(!m.contains("SQL_CALC_FOUND_ROWS") && m.contains("cte_max_recursion_depth = 7"));
        assert_eq!(resetter_fallback(1, true), resetter(1, true));
    }
}
