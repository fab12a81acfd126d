//! The admin statements qcache answers over the MySQL protocol: what they look like, and the
//! rows they return. The session decides who may run them (see `session::admin`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::invalidation::binlog::BinlogStatus;
use crate::observe::digests::{format_utc, wall_time, Counts, DigestRow};
use crate::protocol::packets::{TYPE_LONGLONG, TYPE_VAR_STRING};
use crate::shared::Shared;

/// MySQL's ER_SPECIFIC_ACCESS_DENIED_ERROR, as the query cache's FLUSH/RESET gave it.
pub const ACCESS_DENIED_CODE: u16 = 1227;
pub const ACCESS_DENIED_STATE: &str = "42000";
pub const ACCESS_DENIED_MESSAGE: &str =
    "Access denied; you need (at least one of) the RELOAD privilege(s) for this operation";
/// ER_PARSE_ERROR for a `SHOW QCACHE …` / `QCACHE …` qcache does not know.
pub const PARSE_ERROR_CODE: u16 = 1064;

/// One row, one column: 1 when the current account holds RELOAD globally (who may run the
/// privileged admin statements). CURRENT_USER() is the account the server matched, which
/// is how GRANTEE is spelled. Its strings are single-quoted (a quote doubled inside): it runs
/// under the session's sql_mode, and under ANSI_QUOTES a double-quoted string is a column
/// name (the query failed, and an account was refused what the server allows it).
pub const RELOAD_QUERY: &str = "SELECT COUNT(*) > 0 FROM information_schema.USER_PRIVILEGES \
     WHERE PRIVILEGE_TYPE = 'RELOAD' AND GRANTEE = CONCAT('''', \
     SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', \
     SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";

/// One row, one column: 1 when the server lists `schema.table` (a table or a view) to the
/// session's user, for `QCACHE INVALIDATE TABLE`'s answer. The names go as hex, which every
/// sql_mode and character set reads alike, so no name can end the string early.
pub fn table_exists_query(schema: &str, table: &str) -> String {
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    format!(
        "SELECT COUNT(*) > 0 FROM information_schema.TABLES WHERE \
         TABLE_SCHEMA = CONVERT(X'{}' USING utf8mb4) AND \
         TABLE_NAME = CONVERT(X'{}' USING utf8mb4)",
        hex(schema),
        hex(table)
    )
}

/// Whether the server's ERR to `EXPLAIN <read>` (asked before `QCACHE EXPLAIN` answers) is a
/// denial: 1044 (database), 1142 (table), 1143 (column). Only a denial is passed on; what
/// the user may read (1146 for a missing table in a database they can read, 1345 for a view
/// over tables they cannot) is theirs to have explained.
pub fn explain_denied(err: &[u8]) -> bool {
    matches!(err.get(1..3), Some([lo, hi])
        if matches!(u16::from_le_bytes([*lo, *hi]), 1044 | 1142 | 1143))
}

/// How `QCACHE EXPLAIN <sql>` makes sure it tells the user no more than the server would (a
/// read's verdict tells whether a table or view of some kind exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainCheck {
    /// Nothing to check: not a single read, so the verdict names no table.
    None,
    /// Ask the server `EXPLAIN <sql>` first and pass a denial on.
    AskServer,
    /// Answered to the privileged only: the server's EXPLAIN would run part of it.
    PrivilegedOnly,
}

/// [`ExplainCheck`] of `sql` (`scan`, and `an`, its analysis as a read). Never the server's
/// EXPLAIN for more than one statement: the server runs every statement of a
/// multi-statement text, the second one for real (`SELECT 1; DELETE FROM t`), as the
/// session's user and unseen by the cache; its verdict (`multi_statement`) names no table.
/// Nor for a read whose EXPLAIN may have effects: MariaDB's optimizer evaluates constant
/// expressions and subqueries while it explains, so `(SELECT f())` runs a stored function
/// (which may write), `@x := 9` assigns, `LAST_INSERT_ID(8)` sets, `GET_LOCK(…)` locks. Fail
/// closed: any read the analysis does not find deterministic, free of variables and of
/// unknown functions, or that it could not parse.
pub fn explain_check(scan: &crate::analysis::Scan, an: &crate::analysis::Analysis) -> ExplainCheck {
    use crate::analysis::{Analysis, NotCached};
    if scan.kind != crate::analysis::StatementKind::Select || scan.multi {
        return ExplainCheck::None;
    }
    let quiet = match an {
        Analysis::Read(info) => {
            !info.may_write
                && !matches!(
                    info.verdict,
                    Err(NotCached::Unparsable
                        | NotCached::NonDeterministic(_)
                        | NotCached::StoredFunction
                        | NotCached::UserVariable
                        | NotCached::Into
                        | NotCached::Sequence)
                )
        }
        _ => false,
    };
    if quiet {
        ExplainCheck::AskServer
    } else {
        ExplainCheck::PrivilegedOnly
    }
}

/// An error qcache answers itself (an ERR from the server is only relayed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnError {
    pub code: u16,
    pub state: &'static str,
    pub message: String,
}

impl OwnError {
    /// A `SHOW QCACHE …` / `QCACHE …` qcache does not know.
    pub fn syntax(message: String) -> OwnError {
        OwnError {
            code: PARSE_ERROR_CODE,
            state: "42000",
            message,
        }
    }

    /// MySQL's answer to a user without RELOAD.
    pub fn access_denied() -> OwnError {
        OwnError {
            code: ACCESS_DENIED_CODE,
            state: ACCESS_DENIED_STATE,
            message: ACCESS_DENIED_MESSAGE.to_string(),
        }
    }

    /// `QCACHE INVALIDATE TABLE t` with no database selected: ER_NO_DB_ERROR.
    pub fn no_database() -> OwnError {
        OwnError {
            code: 1046,
            state: "3D000",
            message: "No database selected".to_string(),
        }
    }

    /// `QCACHE INVALIDATE TABLE` of a table the server does not list: ER_NO_SUCH_TABLE.
    pub fn no_such_table(schema: &str, table: &str) -> OwnError {
        OwnError {
            code: 1146,
            state: "42S02",
            message: format!("Table '{schema}.{table}' doesn't exist"),
        }
    }
}

/// Who an admin statement is answered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Anyone: nothing of other sessions or of cached data is shown.
    Open,
    /// Those who may administer (`admin.users`, or RELOAD); others are denied.
    Privileged,
    /// `QCACHE EXPLAIN` of a read: to those who may not administer, only when the server's
    /// own `EXPLAIN` ([`explain_question`]) is not denied to them ([`explain_denied`]).
    AskServer,
}

/// [`Gate`] of `stmt`; `explain`: its [`explain_check`] when it is `QCACHE EXPLAIN`, and
/// `in_txn`: whether a statement runs in a transaction now. A read's verdict tells whether a
/// table or view of some kind exists: only where the server itself would explain it (one
/// private round trip, outside a transaction, whose read view it could open, and of a single
/// read whose EXPLAIN runs nothing) is the server asked; otherwise only the privileged are
/// answered. The privileged are shown every table anyway (SHOW QCACHE ENTRIES): nothing is
/// asked for them, so nothing of the statement runs.
pub fn gate(stmt: &AdminStatement, explain: ExplainCheck, in_txn: bool) -> Gate {
    match (stmt, explain) {
        (AdminStatement::Explain { .. }, ExplainCheck::None) => Gate::Open,
        (AdminStatement::Explain { .. }, ExplainCheck::AskServer) if !in_txn => Gate::AskServer,
        (AdminStatement::Explain { .. }, _) => Gate::Privileged,
        (s, _) if s.needs_privilege() => Gate::Privileged,
        _ => Gate::Open,
    }
}

/// The statement `QCACHE EXPLAIN <sql>` asks the server first ([`Gate::AskServer`]).
pub fn explain_question(sql: &[u8]) -> Vec<u8> {
    let mut ask = b"EXPLAIN ".to_vec();
    ask.extend_from_slice(sql);
    ask
}

/// What the statements answered from the shared state alone return: their rows, or None
/// for an OK (`FLUSH QCACHE DIGESTS`, done here). Not for those that need the session
/// (`SHOW QCACHE LAST`, `QCACHE EXPLAIN …`, `QCACHE INVALIDATE TABLE`): None is never
/// asked of them.
pub fn run(shared: &Shared, stmt: &AdminStatement) -> Option<Rows> {
    match stmt {
        AdminStatement::Status => Some(status(shared)),
        AdminStatement::Entries { limit } => Some(entries(shared, *limit)),
        AdminStatement::Tables => Some(tables(shared)),
        AdminStatement::Digests(q) => Some(digests(shared, q)),
        AdminStatement::FlushDigests => {
            shared.digests.reset();
            tracing::info!("FLUSH QCACHE DIGESTS");
            None
        }
        _ => None,
    }
}

/// `QCACHE INVALIDATE TABLE s.t`: invalidated whether or not the server knows the name:
/// dropping entries of a table that is not there costs nothing, and one it does not list (a
/// temporary table) is dropped all the same. The server is asked ([`table_exists_query`])
/// only for the answer.
pub fn invalidate_table(shared: &Shared, schema: &str, table: &str) {
    shared.invalidate(&crate::invalidation::admin::invalidate_table(schema, table));
    tracing::info!(table = %format!("{schema}.{table}"), "QCACHE INVALIDATE TABLE");
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminStatement {
    /// `SHOW QCACHE STATUS`
    Status,
    /// `SHOW QCACHE ENTRIES [LIMIT n]`
    Entries { limit: Option<usize> },
    /// `SHOW QCACHE TABLES`
    Tables,
    /// `QCACHE INVALIDATE TABLE [db.]t`
    InvalidateTable {
        schema: Option<String>,
        table: String,
    },
    /// `SHOW QCACHE DIGESTS [LIKE '…'] [ORDER BY column [ASC|DESC]] [LIMIT n]`
    Digests(DigestQuery),
    /// `FLUSH QCACHE DIGESTS`
    FlushDigests,
    /// `SHOW QCACHE LAST`: how this session's previous statement went.
    Last,
    /// `QCACHE EXPLAIN <statement>`: what this session would do with it, without running it.
    Explain { sql: Vec<u8> },
    /// `QCACHE EXPLAIN STATEMENT <id>` / `… STATEMENT LAST` (None): the same for an execute of
    /// this session's binary-protocol prepared statement, with its last bound parameters.
    ExplainStatement { id: Option<u32> },
}

/// What `SHOW QCACHE DIGESTS` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestQuery {
    /// Matched against the normalised text, case-insensitively (SQL LIKE, `%` and `_`).
    pub like: Option<String>,
    pub order_by: DigestColumn,
    pub descending: bool,
    pub limit: Option<usize>,
}

impl Default for DigestQuery {
    fn default() -> Self {
        DigestQuery {
            like: None,
            order_by: DigestColumn::Calls,
            descending: true,
            limit: None,
        }
    }
}

/// The columns of `SHOW QCACHE DIGESTS` (and the fields of `/digests`), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestColumn {
    Digest,
    Schema,
    User,
    DigestText,
    Calls,
    Hits,
    Misses,
    Stores,
    NotCached,
    RowsSent,
    BytesSent,
    UpstreamMsTotal,
    UpstreamMsMin,
    UpstreamMsMax,
    TimeSavedMs,
    FirstSeen,
    LastSeen,
    /// Hits that served an outdated entry under its rule's `max_stale` (last: added after
    /// the others, so that positions operators rely on stay).
    StaleHits,
}

impl DigestColumn {
    pub const ALL: [DigestColumn; 18] = [
        DigestColumn::Digest,
        DigestColumn::Schema,
        DigestColumn::User,
        DigestColumn::DigestText,
        DigestColumn::Calls,
        DigestColumn::Hits,
        DigestColumn::Misses,
        DigestColumn::Stores,
        DigestColumn::NotCached,
        DigestColumn::RowsSent,
        DigestColumn::BytesSent,
        DigestColumn::UpstreamMsTotal,
        DigestColumn::UpstreamMsMin,
        DigestColumn::UpstreamMsMax,
        DigestColumn::TimeSavedMs,
        DigestColumn::FirstSeen,
        DigestColumn::LastSeen,
        DigestColumn::StaleHits,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DigestColumn::Digest => "digest",
            DigestColumn::Schema => "schema",
            DigestColumn::User => "user",
            DigestColumn::DigestText => "digest_text",
            DigestColumn::Calls => "calls",
            DigestColumn::Hits => "hits",
            DigestColumn::Misses => "misses",
            DigestColumn::Stores => "stores",
            DigestColumn::NotCached => "not_cached",
            DigestColumn::RowsSent => "rows_sent",
            DigestColumn::BytesSent => "bytes_sent",
            DigestColumn::UpstreamMsTotal => "upstream_ms_total",
            DigestColumn::UpstreamMsMin => "upstream_ms_min",
            DigestColumn::UpstreamMsMax => "upstream_ms_max",
            DigestColumn::TimeSavedMs => "time_saved_ms",
            DigestColumn::FirstSeen => "first_seen",
            DigestColumn::LastSeen => "last_seen",
            DigestColumn::StaleHits => "stale_hits",
        }
    }

    fn from_name(s: &str) -> Option<DigestColumn> {
        DigestColumn::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
    }
}

impl AdminStatement {
    /// Whether the RELOAD privilege (or `admin.users`) is needed, as FLUSH QUERY CACHE needed
    /// it in MySQL. Not only for statements that change state: cached statement text carries
    /// literals (emails, password hashes, tokens) and cached results carry rows of tables the
    /// asking user may not read, so every listing needs it too. Only the counters are public,
    /// as `SHOW STATUS` is. Fail closed: a statement is privileged unless named here.
    /// `SHOW QCACHE LAST` and `QCACHE EXPLAIN` speak of the session's own statements; what
    /// EXPLAIN would reveal of other sessions (whether an entry is present, the rule, the
    /// tables under views) it shows only to users who hold the privilege.
    pub fn needs_privilege(&self) -> bool {
        !matches!(
            self,
            AdminStatement::Status
                | AdminStatement::Last
                | AdminStatement::Explain { .. }
                | AdminStatement::ExplainStatement { .. }
        )
    }
}

/// None when `sql` is not an admin statement (relay it); Some(Err) for one qcache owns but
/// cannot read, answered with a syntax error.
pub fn parse(sql: &[u8]) -> Option<Result<AdminStatement, String>> {
    // Cheap prefix test first: every SHOW and unknown statement passes here.
    let head: Vec<u8> = sql
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take(12)
        .map(|b| b.to_ascii_lowercase())
        .collect();
    if !(head.starts_with(b"show") || head.starts_with(b"qcache") || head.starts_with(b"flush")) {
        return None;
    }
    if let Some(stmt) = explained(sql) {
        // No SQL statement starts with STATEMENT (MariaDB's `SET STATEMENT` starts with SET).
        let text = String::from_utf8_lossy(stmt);
        let words: Vec<&str> = text
            .trim()
            .trim_end_matches(';')
            .split_whitespace()
            .collect();
        if words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("statement"))
        {
            return Some(match words.as_slice() {
                [_, last] if last.eq_ignore_ascii_case("last") => {
                    Ok(AdminStatement::ExplainStatement { id: None })
                }
                [_, n] => n
                    .parse()
                    .map(|id| AdminStatement::ExplainStatement { id: Some(id) })
                    .map_err(|_| format!("QCACHE EXPLAIN STATEMENT takes an id or LAST: {text}")),
                _ => Err(format!(
                    "QCACHE EXPLAIN STATEMENT takes an id or LAST: {text}"
                )),
            });
        }
        return Some(Ok(AdminStatement::Explain { sql: stmt.to_vec() }));
    }
    let text = String::from_utf8_lossy(sql);
    let text = text.trim().trim_end_matches(';').trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let lw: Vec<&str> = lower.iter().map(String::as_str).collect();
    let bad = |what: &str| Some(Err(format!("unknown {what} statement: {text}")));
    match lw.as_slice() {
        ["show", "qcache", rest @ ..] => match rest {
            ["status"] => Some(Ok(AdminStatement::Status)),
            ["tables"] => Some(Ok(AdminStatement::Tables)),
            ["entries"] => Some(Ok(AdminStatement::Entries { limit: None })),
            ["entries", "limit", n] => match n.parse() {
                Ok(n) => Some(Ok(AdminStatement::Entries { limit: Some(n) })),
                Err(_) => bad("SHOW QCACHE"),
            },
            ["last"] => Some(Ok(AdminStatement::Last)),
            ["digests", ..] => {
                // After `show qcache digests`, from the text itself: a LIKE pattern keeps
                // its spaces and case.
                let at = nth_word_end(text, 3);
                Some(
                    digest_query(&text[at..])
                        .map(AdminStatement::Digests)
                        .map_err(|e| format!("SHOW QCACHE DIGESTS: {e}: {text}")),
                )
            }
            _ => bad("SHOW QCACHE"),
        },
        ["qcache", "invalidate", "table", _] => {
            let name = words[3].replace('`', "");
            let (schema, table) = match name.split_once('.') {
                Some((s, t)) => (Some(s.to_string()), t.to_string()),
                None => (None, name),
            };
            if table.is_empty() || schema.as_deref() == Some("") {
                return bad("QCACHE");
            }
            Some(Ok(AdminStatement::InvalidateTable { schema, table }))
        }
        ["flush", "qcache", "digests"] => Some(Ok(AdminStatement::FlushDigests)),
        ["flush", "qcache", ..] => bad("FLUSH QCACHE"),
        ["qcache", ..] => bad("QCACHE"),
        _ => None,
    }
}

/// The statement of `QCACHE EXPLAIN <statement>`, its bytes as the client sent them (its
/// key is of those bytes).
fn explained(sql: &[u8]) -> Option<&[u8]> {
    let mut rest = sql;
    for word in [&b"qcache"[..], b"explain"] {
        let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
        rest = &rest[start..];
        let head = rest.get(..word.len())?;
        if !head.eq_ignore_ascii_case(word) {
            return None;
        }
        rest = &rest[word.len()..];
        // `QCACHE EXPLAINED` is not `QCACHE EXPLAIN`.
        if !rest.first().is_some_and(u8::is_ascii_whitespace) {
            return None;
        }
    }
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    Some(&rest[start..])
}

/// Byte offset in `text` just after its `n`th whitespace-separated word.
fn nth_word_end(text: &str, n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        let rest = &text[at..];
        let start = rest.len() - rest.trim_start().len();
        let word = rest[start..]
            .find(char::is_whitespace)
            .unwrap_or(rest.len() - start);
        at += start + word;
    }
    at
}

/// `[LIKE '…'] [ORDER BY column [ASC|DESC]] [LIMIT n]`, each optional, in this order.
fn digest_query(rest: &str) -> Result<DigestQuery, String> {
    let mut q = DigestQuery::default();
    let mut rest = rest.trim();
    let take_word = |rest: &mut &str| -> Option<String> {
        let r = rest.trim_start();
        let end = r.find(char::is_whitespace).unwrap_or(r.len());
        if end == 0 {
            return None;
        }
        let w = r[..end].to_string();
        *rest = &r[end..];
        Some(w)
    };
    let mut next = take_word(&mut rest);
    if next
        .as_deref()
        .is_some_and(|w| w.eq_ignore_ascii_case("like"))
    {
        let r = rest.trim_start();
        let quote = r.chars().next().filter(|c| *c == '\'' || *c == '"');
        let Some(quote) = quote else {
            return Err("LIKE needs a quoted pattern".into());
        };
        let body = &r[1..];
        let Some(end) = body.find(quote) else {
            return Err("unterminated LIKE pattern".into());
        };
        q.like = Some(body[..end].to_lowercase());
        rest = &body[end + 1..];
        next = take_word(&mut rest);
    }
    if next
        .as_deref()
        .is_some_and(|w| w.eq_ignore_ascii_case("order"))
    {
        if !take_word(&mut rest).is_some_and(|w| w.eq_ignore_ascii_case("by")) {
            return Err("ORDER needs BY".into());
        }
        let col = take_word(&mut rest).ok_or("ORDER BY needs a column")?;
        q.order_by = DigestColumn::from_name(&col).ok_or_else(|| {
            let names: Vec<_> = DigestColumn::ALL.iter().map(|c| c.name()).collect();
            format!("no column {col:?} (one of {})", names.join(", "))
        })?;
        // Numbers read best most first, names alphabetically.
        q.descending = !matches!(
            q.order_by,
            DigestColumn::Digest
                | DigestColumn::Schema
                | DigestColumn::User
                | DigestColumn::DigestText
        );
        next = take_word(&mut rest);
        match next.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("asc") => {
                q.descending = false;
                next = take_word(&mut rest);
            }
            Some("desc") => {
                q.descending = true;
                next = take_word(&mut rest);
            }
            _ => {}
        }
    }
    if next
        .as_deref()
        .is_some_and(|w| w.eq_ignore_ascii_case("limit"))
    {
        let n = take_word(&mut rest).ok_or("LIMIT needs a number")?;
        q.limit = Some(
            n.parse()
                .map_err(|_| format!("LIMIT {n:?} is not a number"))?,
        );
        next = take_word(&mut rest);
    }
    match next {
        None => Ok(q),
        Some(w) => Err(format!("unexpected {w:?}")),
    }
}

/// A statement's text lowercased, for [`words`].
pub fn lowercase(sql: &[u8]) -> String {
    String::from_utf8_lossy(sql).to_ascii_lowercase()
}

/// The words of a short statement qcache answers itself, without a trailing `;`.
pub fn words(text: &str) -> Vec<&str> {
    text.trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect()
}

/// The words of a statement qcache reads itself, as the server reads them: `text` is the
/// statement as the server sees it (`analysis::server_text`: executable comments it skips are
/// plain comments there), lowercased. Its tokens, so comments are left out, the content of
/// executable comments the server runs is kept, a quoted string is one word, and a trailing
/// `;` is dropped. Splitting on whitespace ([`words`]) read a comment's delimiters and
/// content as words of the statement: `SHOW /*!50000 GLOBAL */ STATUS …` was no SHOW STATUS
/// qcache knew, and the server's own `Qcache_*` rows were relayed as its answer.
pub fn code_words(text: &str) -> Vec<&str> {
    let mut words: Vec<&str> = crate::analysis::lexer::Lexer::new(text.as_bytes())
        .filter_map(|t| text.get(t.start..t.end))
        .collect();
    while words.last() == Some(&";") {
        words.pop();
    }
    words
}

/// The pattern of `SHOW [GLOBAL|SESSION|LOCAL] STATUS LIKE 'qcache…'`, lowercased, which
/// qcache answers from its own counters as MySQL's query cache did; None for any other
/// statement (relayed). `sql` as the server reads it ([`code_words`]).
pub fn status_like_pattern(sql: &[u8]) -> Option<String> {
    let text = lowercase(sql);
    let words = code_words(&text);
    let rest = match words.as_slice() {
        ["show", "status", rest @ ..] => rest,
        ["show", "global" | "session" | "local", "status", rest @ ..] => rest,
        _ => return None,
    };
    let pattern = match rest {
        ["like", p] => p.trim_matches(|c| c == '\'' || c == '"'),
        _ => return None,
    };
    pattern.starts_with("qcache").then(|| pattern.to_string())
}

/// SQL LIKE with % and _ (no escapes), for SHOW STATUS patterns.
///
/// The pattern comes from the client, so this must stay cheap whatever it holds: on a
/// mismatch only the most recent % is retried one byte further, which is enough for
/// LIKE (a later % can absorb whatever an earlier one would have) and keeps the work
/// within pattern length × name length. Trying every split at every % instead takes
/// exponential time in the number of %s: `LIKE 'qcache%%%…%x'` held a runtime worker
/// for good (found by the `commands` fuzz target).
pub fn like_match(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    // Where to resume after the last %: (pattern index after it, name index it took up to).
    let mut retry: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'%') => {
                pi += 1;
                retry = Some((pi, si));
            }
            Some(&c) if c == b'_' || c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match retry {
                Some((rp, rs)) => {
                    pi = rp;
                    si = rs + 1;
                    retry = Some((rp, rs + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'%')
}

/// A result to send: column names with types, and rows of text values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub columns: Vec<(&'static str, u8)>,
    pub rows: Vec<Vec<Option<String>>>,
}

impl Rows {
    /// `Variable_name, Value` rows, as `SHOW STATUS` and `SHOW VARIABLES` return them.
    pub fn status(rows: Vec<(String, String)>) -> Rows {
        Rows {
            columns: vec![
                ("Variable_name", TYPE_VAR_STRING),
                ("Value", TYPE_VAR_STRING),
            ],
            rows: rows
                .into_iter()
                .map(|(n, v)| vec![Some(n), Some(v)])
                .collect(),
        }
    }
}

/// qcache's `Qcache_*` status rows, which `SHOW STATUS` shows as qcache's: the cache's,
/// then L2's.
pub fn own_status(shared: &Shared) -> Vec<(String, String)> {
    shared
        .cache
        .status_rows()
        .into_iter()
        .chain(shared.l2.iter().flat_map(|l| l.status_rows()))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// `FLUSH QUERY CACHE` / `RESET QUERY CACHE` that the server did not refuse: every entry
/// dropped, and the versions moved so that no fill under way stores one.
pub fn reset_query_cache(shared: &Shared) {
    shared.invalidate(&crate::invalidation::admin::reset_query_cache());
    shared.cache.drop_entries();
}

/// `SHOW QCACHE STATUS`: the Qcache_* counters, then the figures /metrics has beyond them.
pub fn status(shared: &Shared) -> Rows {
    let cache = &shared.cache;
    let mut rows: Vec<(String, String)> = cache
        .status_rows()
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    rows.push((
        "Qcache_misses".into(),
        shared.latencies.miss.count().to_string(),
    ));
    rows.push(("Qcache_entries".into(), cache.len().to_string()));
    rows.push(("Qcache_bytes".into(), cache.weight().to_string()));
    rows.push(("Qcache_max_bytes".into(), cache.max_bytes().to_string()));
    rows.push((
        "Qcache_client_connections".into(),
        shared.connections.load(Ordering::Relaxed).to_string(),
    ));
    let per_worker = crate::workers::sessions_per_worker();
    let per_worker: Vec<String> = per_worker.iter().map(usize::to_string).collect();
    rows.push(("Qcache_worker_sessions".into(), per_worker.join(",")));
    rows.push((
        "Qcache_session_moves".into(),
        crate::workers::moves().to_string(),
    ));
    for (reason, n) in cache.stats().not_cached_reasons() {
        rows.push((format!("Qcache_not_cached_{reason}"), n.to_string()));
    }
    let binlog = match &shared.binlog {
        None => "OFF".to_string(),
        Some(b) if b.connected() => "CONNECTED".to_string(),
        Some(b) if b.status() == BinlogStatus::Standby => "STANDBY".to_string(),
        Some(b) => format!("{:?}", b.status()),
    };
    rows.push(("Qcache_binlog".into(), binlog));
    let catalog = match (shared.catalog.is_loaded(), shared.catalog.last_error()) {
        (true, None) => "LOADED".to_string(),
        (true, Some(why)) => format!("LOADED (the last refresh failed: {why})"),
        (false, None) => "LOADING".to_string(),
        (false, Some(why)) => format!("UNAVAILABLE: {why}"),
    };
    rows.push(("Qcache_catalog".into(), catalog));
    for (n, v) in shared.l2.iter().flat_map(|l| l.status_rows()) {
        rows.push((n.to_string(), v.to_string()));
    }
    if let Some(l2) = &shared.l2 {
        // Which instances stream the binlog for the fleet (`l2.binlog_tails`); without a
        // lease every instance with a tail streams for itself.
        let (tailing, since, tails) = l2.tail_roles().unwrap_or_else(|| {
            let own = shared.binlog.as_ref().is_some_and(|b| b.connected());
            (own, 0, Vec::new())
        });
        rows.push(("Qcache_l2_instance".into(), l2.instance_id().to_string()));
        rows.push(("Qcache_l2_tailing".into(), u64::from(tailing).to_string()));
        rows.push(("Qcache_l2_tailing_since".into(), since.to_string()));
        rows.push(("Qcache_l2_tails".into(), tails.join(",")));
    }
    if let Some(b) = &shared.binlog {
        let lag = b
            .last_event_lag()
            .map_or(String::new(), |d| d.as_millis().to_string());
        rows.push(("Qcache_binlog_lag_ms".into(), lag));
        rows.push((
            "Qcache_binlog_reconnects".into(),
            b.reconnects().to_string(),
        ));
        rows.push(("Qcache_binlog_resumes".into(), b.resumes().to_string()));
        rows.push(("Qcache_binlog_gaps".into(), b.gaps().to_string()));
    }
    Rows::status(rows)
}

/// `SHOW QCACHE ENTRIES`: the most-hit entries first.
pub fn entries(shared: &Shared, limit: Option<usize>) -> Rows {
    let mut list = shared.cache.entries();
    list.sort_by(|a, b| b.hits.cmp(&a.hits).then(a.age.cmp(&b.age)));
    list.truncate(limit.unwrap_or(usize::MAX));
    Rows {
        columns: vec![
            ("digest", TYPE_VAR_STRING),
            ("tables", TYPE_VAR_STRING),
            ("bytes", TYPE_LONGLONG),
            ("hits", TYPE_LONGLONG),
            ("age_ms", TYPE_LONGLONG),
            ("current", TYPE_LONGLONG),
            ("sql", TYPE_VAR_STRING),
        ],
        rows: list
            .into_iter()
            .map(|e| {
                vec![
                    Some(format!("{:016x}", e.digest)),
                    Some(e.tables.join(",")),
                    Some(e.bytes.to_string()),
                    Some(e.hits.to_string()),
                    Some(e.age.as_millis().to_string()),
                    Some(u8::from(e.current).to_string()),
                    e.sql.map(|s| s.to_string()),
                ]
            })
            .collect(),
    }
}

/// The rows of `SHOW QCACHE DIGESTS` as `q` asks: filtered by LIKE on the normalised text,
/// ordered, limited; then "other" (shapes beyond `stats.digests`) unless a LIKE filtered.
pub fn digest_rows(shared: &Shared, q: &DigestQuery) -> Vec<DigestRow> {
    let all = shared.digests.rows();
    let (mut list, other): (Vec<DigestRow>, Vec<DigestRow>) =
        all.into_iter().partition(|r| r.digest.is_some());
    if let Some(p) = &q.like {
        list.retain(|r| {
            r.text
                .as_deref()
                .is_some_and(|t| like_match(p, &t.to_lowercase()))
        });
    }
    list.sort_by(|a, b| {
        let o = compare(a, b, q.order_by);
        let o = if q.descending { o.reverse() } else { o };
        o.then(a.digest.cmp(&b.digest))
    });
    list.truncate(q.limit.unwrap_or(usize::MAX));
    if q.like.is_none() {
        list.extend(other);
    }
    list
}

fn compare(a: &DigestRow, b: &DigestRow, by: DigestColumn) -> std::cmp::Ordering {
    let (x, y) = (&a.counts, &b.counts);
    match by {
        DigestColumn::Digest => a.digest.cmp(&b.digest),
        DigestColumn::Schema => a.schema.cmp(&b.schema),
        DigestColumn::User => a.user.cmp(&b.user),
        DigestColumn::DigestText => a.text.cmp(&b.text),
        DigestColumn::Calls => x.calls.cmp(&y.calls),
        DigestColumn::Hits => x.hits.cmp(&y.hits),
        DigestColumn::Misses => x.misses.cmp(&y.misses),
        DigestColumn::Stores => x.stores.cmp(&y.stores),
        DigestColumn::NotCached => x.not_cached_total().cmp(&y.not_cached_total()),
        DigestColumn::RowsSent => x.rows.cmp(&y.rows),
        DigestColumn::BytesSent => x.bytes.cmp(&y.bytes),
        DigestColumn::UpstreamMsTotal => x.upstream_ns.cmp(&y.upstream_ns),
        DigestColumn::UpstreamMsMin => x.upstream_min_ns.cmp(&y.upstream_min_ns),
        DigestColumn::UpstreamMsMax => x.upstream_max_ns.cmp(&y.upstream_max_ns),
        DigestColumn::TimeSavedMs => x.time_saved_ns().cmp(&y.time_saved_ns()),
        DigestColumn::FirstSeen => x.first_seen.cmp(&y.first_seen),
        DigestColumn::LastSeen => x.last_seen.cmp(&y.last_seen),
        DigestColumn::StaleHits => x.stale_hits.cmp(&y.stale_hits),
    }
}

/// One value of a digest row: a count, or text (NULL when None).
pub enum DigestValue {
    Count(u64),
    Text(Option<String>),
}

/// `reason:n,…`, most frequent first: the not-cached counts of a row as one cell.
pub fn reasons_cell(c: &Counts) -> String {
    let mut r = c.not_cached.clone();
    r.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.as_str().cmp(b.0.as_str())));
    r.iter()
        .map(|(reason, n)| format!("{}:{n}", reason.as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Column `c` of row `r`, as SHOW QCACHE DIGESTS and /digests show it.
pub fn digest_value(r: &DigestRow, c: DigestColumn) -> DigestValue {
    let n = &r.counts;
    let when = |t: Option<std::time::Instant>| t.map(|t| format_utc(wall_time(t)));
    match c {
        DigestColumn::Digest => DigestValue::Text(Some(
            r.digest
                .map_or_else(|| "other".to_string(), |d| format!("{d:016x}")),
        )),
        DigestColumn::Schema => DigestValue::Text(r.schema.as_deref().map(str::to_string)),
        DigestColumn::User => DigestValue::Text(r.user.as_deref().map(str::to_string)),
        DigestColumn::DigestText => DigestValue::Text(r.text.as_deref().map(str::to_string)),
        DigestColumn::Calls => DigestValue::Count(n.calls),
        DigestColumn::Hits => DigestValue::Count(n.hits),
        DigestColumn::Misses => DigestValue::Count(n.misses),
        DigestColumn::Stores => DigestValue::Count(n.stores),
        DigestColumn::NotCached => DigestValue::Text(Some(reasons_cell(n))),
        DigestColumn::RowsSent => DigestValue::Count(n.rows),
        DigestColumn::BytesSent => DigestValue::Count(n.bytes),
        DigestColumn::UpstreamMsTotal => DigestValue::Text(Some(ms(n.upstream_ns))),
        DigestColumn::UpstreamMsMin => DigestValue::Text(Some(ms(n.upstream_min_ns))),
        DigestColumn::UpstreamMsMax => DigestValue::Text(Some(ms(n.upstream_max_ns))),
        DigestColumn::TimeSavedMs => DigestValue::Text(Some(ms(n.time_saved_ns()))),
        DigestColumn::FirstSeen => DigestValue::Text(when(n.first_seen)),
        DigestColumn::LastSeen => DigestValue::Text(when(n.last_seen)),
        DigestColumn::StaleHits => DigestValue::Count(n.stale_hits),
    }
}

/// `SHOW QCACHE DIGESTS`.
pub fn digests(shared: &Shared, q: &DigestQuery) -> Rows {
    let rows = digest_rows(shared, q);
    Rows {
        columns: DigestColumn::ALL
            .iter()
            .map(|c| {
                let t = match digest_value(&DigestRow::empty(), *c) {
                    DigestValue::Count(_) => TYPE_LONGLONG,
                    DigestValue::Text(_) => TYPE_VAR_STRING,
                };
                (c.name(), t)
            })
            .collect(),
        rows: rows
            .iter()
            .map(|r| {
                DigestColumn::ALL
                    .iter()
                    .map(|c| match digest_value(r, *c) {
                        DigestValue::Count(n) => Some(n.to_string()),
                        DigestValue::Text(t) => t,
                    })
                    .collect()
            })
            .collect(),
    }
}

/// `/digests`: every row as a JSON object (not-cached reasons as an object of counts,
/// times in milliseconds as numbers), "other" apart.
pub fn digests_json(shared: &Shared) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let rows = digest_rows(shared, &DigestQuery::default());
    let object = |r: &DigestRow| -> Value {
        let mut m = Map::new();
        for c in DigestColumn::ALL {
            let v = match (c, digest_value(r, c)) {
                (DigestColumn::NotCached, _) => Value::Object(
                    r.counts
                        .not_cached
                        .iter()
                        .map(|(k, n)| (k.as_str().to_string(), json!(n)))
                        .collect(),
                ),
                (
                    DigestColumn::UpstreamMsTotal
                    | DigestColumn::UpstreamMsMin
                    | DigestColumn::UpstreamMsMax
                    | DigestColumn::TimeSavedMs,
                    DigestValue::Text(Some(t)),
                ) => t.parse::<f64>().map_or(Value::Null, |f| json!(f)),
                (_, DigestValue::Count(n)) => json!(n),
                (_, DigestValue::Text(t)) => json!(t),
            };
            m.insert(c.name().to_string(), v);
        }
        Value::Object(m)
    };
    let (list, other): (Vec<&DigestRow>, Vec<&DigestRow>) =
        rows.iter().partition(|r| r.digest.is_some());
    json!({
        "capacity": shared.digests.capacity(),
        "digests": list.into_iter().map(object).collect::<Vec<_>>(),
        "other": other.first().map(|r| object(r)),
    })
}

/// `SHOW QCACHE TABLES`: every table qcache has a version for, with its entries held now.
pub fn tables(shared: &Shared) -> Rows {
    let mut per_table: HashMap<String, u64> = HashMap::new();
    for e in shared.cache.entries() {
        for t in e.tables {
            *per_table.entry(t).or_insert(0) += 1;
        }
    }
    let mut list: Vec<(String, u64)> = shared
        .cache
        .versions()
        .tables()
        .iter()
        .map(|t| (t.qualified(), t.version()))
        .collect();
    list.sort();
    Rows {
        columns: vec![
            ("table", TYPE_VAR_STRING),
            ("version", TYPE_LONGLONG),
            ("entries", TYPE_LONGLONG),
        ],
        rows: list
            .into_iter()
            .map(|(name, v)| {
                let n = per_table.get(&name).copied().unwrap_or(0);
                vec![Some(name), Some(v.to_string()), Some(n.to_string())]
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_statements() {
        assert_eq!(
            parse(b"SHOW QCACHE STATUS"),
            Some(Ok(AdminStatement::Status))
        );
        assert_eq!(
            parse(b"  show qcache tables ;"),
            Some(Ok(AdminStatement::Tables))
        );
        assert_eq!(
            parse(b"SHOW QCACHE ENTRIES LIMIT 5"),
            Some(Ok(AdminStatement::Entries { limit: Some(5) }))
        );
        assert_eq!(
            parse(b"QCACHE INVALIDATE TABLE `shop`.`orders`"),
            Some(Ok(AdminStatement::InvalidateTable {
                schema: Some("shop".into()),
                table: "orders".into()
            }))
        );
        assert_eq!(
            parse(b"qcache invalidate table t"),
            Some(Ok(AdminStatement::InvalidateTable {
                schema: None,
                table: "t".into()
            }))
        );
        assert!(matches!(parse(b"SHOW QCACHE NONSENSE"), Some(Err(_))));
        assert!(matches!(parse(b"QCACHE DROP"), Some(Err(_))));
        assert!(matches!(
            parse(b"SHOW QCACHE ENTRIES LIMIT x"),
            Some(Err(_))
        ));
        assert_eq!(parse(b"SHOW TABLES"), None);
        assert_eq!(parse(b"SHOW STATUS LIKE 'Qcache%'"), None);
        assert_eq!(parse(b"SELECT 1"), None);
    }

    #[test]
    fn parses_digests_last_and_explain() {
        let q = |sql: &str| match parse(sql.as_bytes()) {
            Some(Ok(AdminStatement::Digests(q))) => q,
            other => panic!("{sql}: {other:?}"),
        };
        assert_eq!(q("SHOW QCACHE DIGESTS"), DigestQuery::default());
        assert_eq!(
            q("show qcache digests like 'SELECT % FROM t%' order by upstream_ms_total asc limit 3;"),
            DigestQuery {
                like: Some("select % from t%".into()),
                order_by: DigestColumn::UpstreamMsTotal,
                descending: false,
                limit: Some(3),
            }
        );
        let by_text = q("SHOW QCACHE DIGESTS ORDER BY digest_text");
        assert_eq!(by_text.order_by, DigestColumn::DigestText);
        assert!(!by_text.descending);
        assert!(q("SHOW QCACHE DIGESTS ORDER BY hits DESC").descending);
        assert_eq!(q("SHOW QCACHE DIGESTS LIMIT 0").limit, Some(0));
        for bad in [
            "SHOW QCACHE DIGESTS LIKE",
            "SHOW QCACHE DIGESTS LIKE 'x",
            "SHOW QCACHE DIGESTS ORDER hits",
            "SHOW QCACHE DIGESTS ORDER BY nothing",
            "SHOW QCACHE DIGESTS LIMIT many",
            "SHOW QCACHE DIGESTS LIMIT 1 LIKE 'x'",
            "SHOW QCACHE DIGESTS extra",
        ] {
            assert!(matches!(parse(bad.as_bytes()), Some(Err(_))), "{bad}");
        }
        assert_eq!(
            parse(b"FLUSH QCACHE DIGESTS"),
            Some(Ok(AdminStatement::FlushDigests))
        );
        assert!(matches!(parse(b"FLUSH QCACHE"), Some(Err(_))));
        assert_eq!(parse(b"FLUSH TABLES"), None);
        assert_eq!(parse(b"show qcache last"), Some(Ok(AdminStatement::Last)));
        assert_eq!(
            parse(b"QCACHE EXPLAIN  SELECT c FROM t WHERE id = 1"),
            Some(Ok(AdminStatement::Explain {
                sql: b"SELECT c FROM t WHERE id = 1".to_vec()
            }))
        );
        assert_eq!(
            parse(b"qcache explain\nSELECT 'a  b'"),
            Some(Ok(AdminStatement::Explain {
                sql: b"SELECT 'a  b'".to_vec()
            }))
        );
        assert!(matches!(parse(b"QCACHE EXPLAIN"), Some(Err(_))));
        assert_eq!(
            parse(b"qcache explain statement 7;"),
            Some(Ok(AdminStatement::ExplainStatement { id: Some(7) }))
        );
        assert_eq!(
            parse(b"QCACHE EXPLAIN STATEMENT  last"),
            Some(Ok(AdminStatement::ExplainStatement { id: None }))
        );
        for bad in [
            &b"QCACHE EXPLAIN STATEMENT"[..],
            b"QCACHE EXPLAIN STATEMENT x",
            b"QCACHE EXPLAIN STATEMENT 1 2",
            b"QCACHE EXPLAIN STATEMENT -1",
        ] {
            assert!(matches!(parse(bad), Some(Err(_))), "{bad:?}");
        }
        // EXECUTE of a SQL-level prepared statement is a statement like any other.
        assert_eq!(
            parse(b"QCACHE EXPLAIN EXECUTE s USING @a"),
            Some(Ok(AdminStatement::Explain {
                sql: b"EXECUTE s USING @a".to_vec()
            }))
        );
        assert!(matches!(parse(b"QCACHE EXPLAINED x"), Some(Err(_))));
    }

    /// Every admin statement that shows or changes cached data needs the privilege; only the
    /// counters do not.
    #[test]
    fn privilege_by_statement() {
        let cases = [
            ("SHOW QCACHE STATUS", false),
            ("SHOW QCACHE ENTRIES", true),
            ("SHOW QCACHE ENTRIES LIMIT 1", true),
            ("SHOW QCACHE TABLES", true),
            ("QCACHE INVALIDATE TABLE t", true),
            ("SHOW QCACHE DIGESTS", true),
            ("SHOW QCACHE DIGESTS LIKE '%' LIMIT 1", true),
            ("FLUSH QCACHE DIGESTS", true),
            // The session's own statements; EXPLAIN hides what is not (session::explain).
            ("SHOW QCACHE LAST", false),
            ("QCACHE EXPLAIN SELECT 1", false),
            ("QCACHE EXPLAIN STATEMENT 1", false),
        ];
        for (sql, want) in cases {
            let stmt = parse(sql.as_bytes()).unwrap().unwrap();
            assert_eq!(stmt.needs_privilege(), want, "{sql}");
        }
    }

    #[test]
    fn code_words_are_the_statements_tokens() {
        for (text, want) in [
            (
                "show status like 'qcache%'",
                &["show", "status", "like", "'qcache%'"][..],
            ),
            (
                "show status like 'a b' ;",
                &["show", "status", "like", "'a b'"],
            ),
            ("show /* full */ status", &["show", "status"]),
            (
                "show /*!50000 global */ status",
                &["show", "global", "status"],
            ),
            ("show # x\nstatus -- y", &["show", "status"]),
        ] {
            assert_eq!(code_words(text), want, "{text}");
        }
    }

    #[test]
    fn status_patterns() {
        assert_eq!(
            status_like_pattern(b"SHOW STATUS LIKE 'Qcache%'").as_deref(),
            Some("qcache%")
        );
        assert_eq!(
            status_like_pattern(b" show global status like \"qcache_hits\" ;").as_deref(),
            Some("qcache_hits")
        );
        assert_eq!(status_like_pattern(b"SHOW STATUS LIKE 'Com%'"), None);
        assert_eq!(status_like_pattern(b"SHOW STATUS"), None);
        assert!(like_match("qcache%", "qcache_hits"));
        assert!(like_match("qcache_hit_", "qcache_hits"));
        assert!(!like_match("qcache_i%", "qcache_hits"));
        assert!(like_match("%", ""));
        assert!(like_match("q%h%s", "qcache_hits"));
        assert!(!like_match("q%x%", "qcache_hits"));
        assert!(!like_match("_", ""));
        assert!(like_match("%_", "a"));
        assert!(like_match("%%a%", "xay"));
        assert!(!like_match("a%", ""));
        assert!(like_match("a%%", "a"));
    }

    /// The shape of the input the `commands` fuzz target found (`SHOW STATUS LIKE
    /// Qcache%%…%S`, 72 %s; 31 already took over 5 s): the recursive matcher took time
    /// exponential in the number of %s.
    #[test]
    fn many_percent_signs_stay_fast() {
        let sql = format!("SHOW STATUS LIKE 'qcache{}x'", "%".repeat(200));
        let pattern = status_like_pattern(sql.as_bytes()).unwrap();
        let started = std::time::Instant::now();
        assert!(!like_match(&pattern, "qcache_queries_in_cache"));
        assert!(like_match(&pattern, "qcache_x"));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    proptest::proptest! {
        /// The same answers as a regex translation of the pattern, on a small alphabet where
        /// %, _ and literal bytes collide often.
        #[test]
        fn like_agrees_with_a_regex(p in "[ab%_]{0,8}", s in "[ab]{0,8}") {
            let re: String = p
                .chars()
                .map(|c| match c {
                    '%' => ".*".to_string(),
                    '_' => ".".to_string(),
                    c => c.to_string(),
                })
                .collect();
            let re = regex::Regex::new(&format!("^(?s:{re})$")).unwrap();
            proptest::prop_assert_eq!(like_match(&p, &s), re.is_match(&s));
        }
    }

    /// The names go as hex of their bytes, whatever they hold: no quote, backslash or
    /// multibyte character can change the statement.
    #[test]
    fn table_existence_names_go_as_hex() {
        for (schema, table, hexes) in [
            ("shop", "orders", ["73686f70", "6f7264657273"]),
            ("a'b", "c\\d", ["612762", "635c64"]),
            ("é", "`x`", ["c3a9", "607860"]),
            ("", "t", ["", "74"]),
        ] {
            let sql = table_exists_query(schema, table);
            assert!(
                sql.contains(&format!("TABLE_SCHEMA = CONVERT(X'{}'", hexes[0])),
                "{sql}"
            );
            assert!(
                sql.contains(&format!("TABLE_NAME = CONVERT(X'{}'", hexes[1])),
                "{sql}"
            );
            // The only quotes are the two hex literals'.
            assert_eq!(sql.matches('\'').count(), 4, "{sql}");
        }
    }

    /// Which errors to `EXPLAIN` deny `QCACHE EXPLAIN`: one row per error code.
    #[test]
    fn explain_denials_by_code() {
        let err = |code: u16| {
            let mut p = vec![0xff];
            p.extend_from_slice(&code.to_le_bytes());
            p.extend_from_slice(b"#42000denied");
            p
        };
        for (code, denied) in [
            (1044, true),
            (1142, true),
            (1143, true),
            (1146, false),
            (1345, false),
            (1064, false),
        ] {
            assert_eq!(explain_denied(&err(code)), denied, "{code}");
        }
        assert!(!explain_denied(&[0xff, 0x14]), "cut short");
        assert!(!explain_denied(&[]));
    }

    /// How each `QCACHE EXPLAIN` text is checked: a single read the server's EXPLAIN cannot
    /// run anything of is asked; a read with effects only the privileged are answered; a
    /// multi-statement or a non-read needs nothing (its verdict names no table).
    #[test]
    fn explain_check_one_row_per_rule() {
        use crate::analysis::{analyze, scan};
        use ExplainCheck::*;
        for (sql, want) in [
            ("SELECT id FROM t", AskServer),
            ("SELECT id FROM t;", AskServer),
            ("SELECT ';' FROM t", AskServer),
            (
                "SELECT id FROM t WHERE id = (SELECT MAX(id) FROM u)",
                AskServer,
            ),
            ("SELECT 1; DELETE FROM t", None),
            ("SELECT 1;DELETE FROM t", None),
            ("SELECT 'a\\'; DELETE FROM t; ''", None),
            ("SELECT 1 /*! ; DELETE FROM t */", None),
            ("DELETE FROM t", None),
            ("SELECT id FROM t WHERE id = (SELECT f())", PrivilegedOnly),
            ("SELECT id FROM t WHERE id = f()", PrivilegedOnly),
            (
                "SELECT id FROM t WHERE id = (SELECT @x := 9)",
                PrivilegedOnly,
            ),
            ("SELECT @x := 5 FROM t", PrivilegedOnly),
            (
                "SELECT id FROM t WHERE id = LAST_INSERT_ID(8)",
                PrivilegedOnly,
            ),
            (
                "SELECT id FROM t WHERE id = GET_LOCK('l', 0)",
                PrivilegedOnly,
            ),
            ("SELECT NEXTVAL(s)", PrivilegedOnly),
            ("SELECT id FROM t INTO @x", PrivilegedOnly),
        ] {
            let an = analyze(sql);
            assert_eq!(explain_check(&scan(sql.as_bytes()), &an), want, "{sql}");
        }
    }

    /// Who each admin statement is answered to, one row per rule.
    #[test]
    fn who_each_statement_is_answered_to() {
        use AdminStatement as A;
        use ExplainCheck as C;
        let explain = || A::Explain {
            sql: b"SELECT 1".to_vec(),
        };
        let rows: Vec<(AdminStatement, ExplainCheck, bool, Gate)> = vec![
            (A::Status, C::None, false, Gate::Open),
            (A::Last, C::None, true, Gate::Open),
            (A::ExplainStatement { id: None }, C::None, false, Gate::Open),
            (A::Entries { limit: None }, C::None, false, Gate::Privileged),
            (A::Tables, C::None, false, Gate::Privileged),
            (
                A::Digests(DigestQuery::default()),
                C::None,
                false,
                Gate::Privileged,
            ),
            (A::FlushDigests, C::None, false, Gate::Privileged),
            (
                A::InvalidateTable {
                    schema: None,
                    table: "t".into(),
                },
                C::None,
                false,
                Gate::Privileged,
            ),
            (explain(), C::None, true, Gate::Open),
            (explain(), C::AskServer, false, Gate::AskServer),
            (explain(), C::AskServer, true, Gate::Privileged),
            (explain(), C::PrivilegedOnly, false, Gate::Privileged),
        ];
        for (stmt, check, in_txn, want) in rows {
            assert_eq!(
                gate(&stmt, check, in_txn),
                want,
                "{stmt:?} {check:?} {in_txn}"
            );
        }
        assert_eq!(explain_question(b"SELECT 1"), b"EXPLAIN SELECT 1".to_vec());
    }

    /// The errors qcache answers itself: MySQL's codes and states.
    #[test]
    fn own_errors_are_the_server_s() {
        let rows = [
            (OwnError::syntax("x".into()), 1064, "42000", "x"),
            (
                OwnError::access_denied(),
                1227,
                "42000",
                ACCESS_DENIED_MESSAGE,
            ),
            (
                OwnError::no_database(),
                1046,
                "3D000",
                "No database selected",
            ),
            (
                OwnError::no_such_table("s", "t"),
                1146,
                "42S02",
                "Table 's.t' doesn't exist",
            ),
        ];
        for (e, code, state, msg) in rows {
            assert_eq!((e.code, e.state, e.message.as_str()), (code, state, msg));
        }
    }

    /// `SHOW STATUS`-shaped rows: two string columns, a row per pair.
    #[test]
    fn status_rows_have_name_and_value() {
        let r = Rows::status(vec![("Qcache_hits".into(), "3".into())]);
        assert_eq!(
            r.columns,
            vec![
                ("Variable_name", TYPE_VAR_STRING),
                ("Value", TYPE_VAR_STRING)
            ]
        );
        assert_eq!(
            r.rows,
            vec![vec![Some("Qcache_hits".into()), Some("3".into())]]
        );
    }
}
