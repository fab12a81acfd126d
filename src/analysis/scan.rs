//! The hit-path scan: the statement's kind from its first keywords, the SQL_CACHE /
//! SQL_NO_CACHE hint among the SELECT options, and whether more than one statement follows.
//!
//! Runs on every COM_QUERY, so it reads only as many tokens as it needs and allocates only
//! when there is a hint to record.

use std::borrow::Cow;
use std::ops::Range;

use super::lexer::{Lexer, Tok, Token};

/// What a statement is, from its first keyword(s).
///
/// Fail closed: a statement is anything but [`StatementKind::Write`] only when its first
/// keywords are on a closed list of known shapes. Every unrecognised statement is a `Write` (of tables
/// the analysis may not be able to name), so it invalidates rather than hides a change.
///
/// `TABLE t` and `VALUES …` are `Select`: they are reads (MySQL 8.0.19+), and the analysis
/// decides whether they can be cached. `WITH …` is `Select` when its main statement is a
/// SELECT (or a parenthesised query), `Write` when it is UPDATE/DELETE/INSERT/REPLACE or
/// cannot be recognised (so an unknown shape is invalidated rather than ignored). MariaDB
/// `SET STATEMENT … FOR <stmt>` takes the kind of `<stmt>`, since that is what runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatementKind {
    Select,
    /// INSERT, UPDATE, DELETE, REPLACE, LOAD, TRUNCATE, CREATE, ALTER, DROP, RENAME, GRANT,
    /// REVOKE, OPTIMIZE, REPAIR, ANALYZE (of tables, or MariaDB's `ANALYZE [FORMAT=…]` of
    /// anything but a read, which runs it), MySQL's `EXPLAIN ANALYZE` of a non-read, IMPORT,
    /// DO, BINLOG, MariaDB `BEGIN NOT ATOMIC` and other compound statements — and every
    /// statement whose first keywords are not recognised.
    Write,
    /// BEGIN [WORK], START TRANSACTION, XA START / XA BEGIN.
    Begin,
    /// COMMIT, XA COMMIT.
    Commit,
    /// ROLLBACK, XA ROLLBACK — but `ROLLBACK [WORK] TO [SAVEPOINT]` is `Other`.
    Rollback,
    Set,
    Use,
    /// SHOW, DESCRIBE, DESC, EXPLAIN (not run, unless `EXPLAIN ANALYZE`), HELP, MariaDB
    /// `ANALYZE [FORMAT=…] SELECT` (run, but only a read).
    Show,
    Flush,
    Reset,
    Call,
    /// SQL-level EXECUTE (PREPARE and DEALLOCATE / DROP PREPARE are `Other`).
    Execute,
    /// Known statements that change no table: PREPARE, DEALLOCATE / DROP PREPARE,
    /// SAVEPOINT, RELEASE SAVEPOINT, ROLLBACK TO, XA END / PREPARE / RECOVER, LOCK, UNLOCK,
    /// HANDLER, CHECK, CHECKSUM, KILL, GET DIAGNOSTICS, qcache's own `QCACHE …`. (A call of
    /// a stored function inside one still writes: see `policy::classify`.)
    Other,
    /// Only whitespace and comments.
    Empty,
}

/// The query cache hint among the SELECT options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Hint {
    #[default]
    None,
    SqlCache,
    /// Also chosen when both hints are present: never caching is the safe reading.
    SqlNoCache,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    pub kind: StatementKind,
    pub hint: Hint,
    /// Byte ranges of SQL_CACHE / SQL_NO_CACHE keywords to cut before forwarding (inside
    /// `/*! */` comments too). Empty, and so not allocated, when there is no hint.
    pub hint_spans: Vec<Range<usize>>,
    /// More than one statement: a `;` outside strings, comments and quoted identifiers,
    /// followed by more SQL.
    pub multi: bool,
}

const MAX_PREFIX_DEPTH: u32 = 8;

/// Up to 24 bytes of a word, upper-cased, for matching keywords without allocating.
struct Upper {
    buf: [u8; 24],
    len: usize,
}

impl Upper {
    fn of(sql: &[u8], t: &Token) -> Upper {
        let b = t.bytes(sql);
        let mut buf = [0u8; 24];
        // Longer words are no keyword we look for; keeping them empty makes them match nothing.
        let len = if t.tok == Tok::Word && b.len() <= buf.len() {
            b.len()
        } else {
            0
        };
        for (d, s) in buf.iter_mut().zip(&b[..len]) {
            *d = s.to_ascii_uppercase();
        }
        Upper { buf, len }
    }

    fn get(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The hit-path scan: skips leading whitespace and comments, reads the first keyword(s), and
/// for a SELECT the select options, where SQL_CACHE / SQL_NO_CACHE may stand.
pub fn scan(sql: &[u8]) -> Scan {
    let mut lx = Lexer::new(sql);
    let mut out = Scan {
        kind: StatementKind::Empty,
        hint: Hint::None,
        hint_spans: Vec::new(),
        multi: false,
    };
    let (kind, at_select) = classify(sql, &mut lx, 0);
    out.kind = kind;
    if at_select {
        scan_select_options(sql, &mut lx, &mut out);
    }
    // Most statements hold no `;` at all: then there is nothing more to lex.
    if sql.contains(&b';') {
        out.multi = is_multi(sql);
    }
    out
}

/// Classifies from the lexer's position. Returns the kind and whether the lexer stands just
/// after the SELECT keyword of a read, where the select options begin.
pub(crate) fn classify(sql: &[u8], lx: &mut Lexer, depth: u32) -> (StatementKind, bool) {
    // Nested WITH / SET STATEMENT prefixes recurse; hostile input must not exhaust the stack,
    // and an unrecognised shape is treated as a write so it invalidates rather than hides.
    if depth > MAX_PREFIX_DEPTH {
        return (StatementKind::Write, false);
    }
    let mut parens = false;
    let first = loop {
        match lx.next_token() {
            None => {
                return (
                    if parens {
                        StatementKind::Other
                    } else {
                        StatementKind::Empty
                    },
                    false,
                )
            }
            Some(t) if t.is_punct(b'(') => parens = true,
            Some(t) => break t,
        }
    };
    let next_upper = |lx: &mut Lexer| lx.next_token().map(|t| Upper::of(sql, &t));
    let w = Upper::of(sql, &first);
    let kind = match w.get() {
        b"SELECT" => return (StatementKind::Select, true),
        b"WITH" => return classify_with(sql, lx, depth),
        b"TABLE" | b"VALUES" => StatementKind::Select,
        b"INSERT" | b"UPDATE" | b"DELETE" | b"REPLACE" | b"LOAD" | b"TRUNCATE" | b"CREATE"
        | b"ALTER" | b"RENAME" | b"GRANT" | b"REVOKE" | b"OPTIMIZE" | b"REPAIR" | b"IMPORT"
        | b"DO" | b"BINLOG" => StatementKind::Write,
        b"DROP" => match next_upper(lx) {
            Some(u) if u.get() == b"PREPARE" => StatementKind::Other,
            _ => StatementKind::Write,
        },
        // MariaDB's ANALYZE runs the statement it explains; ANALYZE TABLE changes statistics.
        b"ANALYZE" => return classify_analyzed(sql, lx, depth),
        b"EXPLAIN" | b"DESCRIBE" | b"DESC" => {
            let mut ahead = lx.clone();
            match next_upper(&mut ahead) {
                // MySQL's EXPLAIN ANALYZE runs the statement too.
                Some(u) if u.get() == b"ANALYZE" => {
                    *lx = ahead;
                    return classify_analyzed(sql, lx, depth);
                }
                _ => StatementKind::Show,
            }
        }
        // `BEGIN [WORK]` opens a transaction; anything else after BEGIN is anonymous stored
        // code (`BEGIN NOT ATOMIC …`, and under sql_mode=ORACLE `BEGIN stmt; … END`).
        b"BEGIN" => match lx.next_token() {
            None => StatementKind::Begin,
            Some(t) if t.is_punct(b';') || t.is_kw(sql, "WORK") => StatementKind::Begin,
            _ => StatementKind::Write,
        },
        b"START" => match next_upper(lx) {
            Some(u) if u.get() == b"TRANSACTION" => StatementKind::Begin,
            _ => StatementKind::Write,
        },
        b"XA" => match next_upper(lx) {
            Some(u) => match u.get() {
                b"START" | b"BEGIN" => StatementKind::Begin,
                b"COMMIT" => StatementKind::Commit,
                b"ROLLBACK" => StatementKind::Rollback,
                b"END" | b"PREPARE" | b"RECOVER" => StatementKind::Other,
                _ => StatementKind::Write,
            },
            None => StatementKind::Other,
        },
        b"COMMIT" => StatementKind::Commit,
        b"ROLLBACK" => {
            let mut u = next_upper(lx);
            if u.as_ref().is_some_and(|u| u.get() == b"WORK") {
                u = next_upper(lx);
            }
            match u {
                Some(u) if u.get() == b"TO" => StatementKind::Other,
                _ => StatementKind::Rollback,
            }
        }
        b"SET" => match next_upper(lx) {
            Some(u) if u.get() == b"STATEMENT" => return classify_set_statement(sql, lx, depth),
            _ => StatementKind::Set,
        },
        b"USE" => StatementKind::Use,
        b"SHOW" | b"HELP" => StatementKind::Show,
        b"FLUSH" => StatementKind::Flush,
        b"RESET" => StatementKind::Reset,
        b"CALL" => StatementKind::Call,
        b"EXECUTE" => StatementKind::Execute,
        b"PREPARE" | b"DEALLOCATE" | b"SAVEPOINT" | b"RELEASE" | b"LOCK" | b"UNLOCK"
        | b"HANDLER" | b"CHECK" | b"CHECKSUM" | b"KILL" | b"QCACHE" => StatementKind::Other,
        b"GET" => match next_upper(lx) {
            Some(u) if u.get() == b"DIAGNOSTICS" => StatementKind::Other,
            _ => StatementKind::Write,
        },
        // Not a recognised shape: it may write.
        _ => StatementKind::Write,
    };
    (kind, false)
}

/// After MariaDB's `ANALYZE` (or MySQL's `EXPLAIN ANALYZE`): `[FORMAT = name]` and the
/// statement that runs. A read is `Show` (run, never cached); ANALYZE TABLE and anything
/// else is a `Write`.
fn classify_analyzed(sql: &[u8], lx: &mut Lexer, depth: u32) -> (StatementKind, bool) {
    skip_format_option(sql, lx);
    let mut ahead = lx.clone();
    match ahead.next_token().map(|t| Upper::of(sql, &t)) {
        Some(u)
            if matches!(
                u.get(),
                b"TABLE" | b"TABLES" | b"LOCAL" | b"NO_WRITE_TO_BINLOG"
            ) =>
        {
            (StatementKind::Write, false)
        }
        _ => match classify(sql, lx, depth + 1) {
            (StatementKind::Select | StatementKind::Empty, _) => (StatementKind::Show, false),
            _ => (StatementKind::Write, false),
        },
    }
}

/// Skips `FORMAT = name` (or `FORMAT name`) where the lexer stands, if it is there.
fn skip_format_option(sql: &[u8], lx: &mut Lexer) {
    let mut ahead = lx.clone();
    if !ahead.next_token().is_some_and(|t| t.is_kw(sql, "FORMAT")) {
        return;
    }
    let mut after = ahead.clone();
    if after.next_token().is_some_and(|t| t.is_punct(b'=')) {
        ahead = after;
    }
    let _ = ahead.next_token();
    *lx = ahead;
}

/// The statement MariaDB's `SET STATEMENT var = value [, …] FOR <statement>` prefixes run
/// (they nest), else `sql` whole: what the server runs, and so what takes table locks,
/// changes the default database, starts an XA transaction or prepares a name, as it would
/// alone. Every reader of a statement's leading words reads them here. A prefix without
/// FOR (a SET) is not one. With a prefix, executable-comment markers are blanked (the
/// server runs their content as code), so that a prefix ending inside one
/// (`/*!40101 SET STATEMENT … FOR */ USE d`) leaves its statement readable.
pub fn statement_body(sql: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let prefixed = |b: &[u8]| {
        let mut lx = Lexer::new(b);
        matches!((lx.next_token(), lx.next_token()),
            (Some(a), Some(s)) if a.is_kw(b, "SET") && s.is_kw(b, "STATEMENT"))
    };
    if !prefixed(sql) {
        return std::borrow::Cow::Borrowed(sql);
    }
    let mut lx = Lexer::recording_marks(sql);
    for _ in lx.by_ref() {}
    let mut code = sql.to_vec();
    for m in lx.take_marks() {
        if let Some(r) = code.get_mut(m) {
            r.fill(b' ');
        }
    }
    let mut at = 0;
    // Hostile nesting is bounded like the scan's.
    for _ in 0..8 {
        let body = &code[at..];
        if !prefixed(body) {
            break;
        }
        let mut depth = 0i32;
        let found = Lexer::new(body).skip(2).find(|t| {
            if t.is_punct(b'(') {
                depth += 1;
            } else if t.is_punct(b')') {
                depth -= 1;
            }
            depth == 0 && t.is_kw(body, "FOR")
        });
        match found {
            Some(f) => at += f.end,
            None => break,
        }
    }
    if at == 0 {
        return std::borrow::Cow::Borrowed(sql);
    }
    code.drain(..at);
    std::borrow::Cow::Owned(code)
}

/// Whether the statement's first keyword (after comments and opening parentheses) is `kw`
/// (upper-case ASCII).
pub fn first_keyword_is(sql: &[u8], kw: &str) -> bool {
    Lexer::new(sql)
        .find(|t| !t.is_punct(b'('))
        .is_some_and(|t| t.is_kw(sql, kw))
}

/// Whether any name in the statement (an unquoted word, a backquoted or double-quoted
/// name, lower-cased) is one `is_name` knows, under both readings of its strings (with and
/// without backslash escapes: the session's sql_mode decides which the server uses, and a
/// name found in either counts).
pub fn any_name(sql: &[u8], mut is_name: impl FnMut(&str) -> bool) -> bool {
    use super::lexer::Tok;
    let mut scan = |mut lexer: Lexer<'_>| {
        lexer.any(|t| {
            let b = t.bytes(sql);
            let bracketed;
            let inner = match t.tok {
                Tok::Word => b,
                Tok::Backquoted | Tok::DoubleQuoted if b.len() >= 2 => &b[1..b.len() - 1],
                // `[…]`: a name under sql_mode=MSSQL's reading.
                Tok::Bracketed => {
                    bracketed = super::lexer::bracketed_name(b);
                    &bracketed
                }
                _ => return false,
            };
            is_name(&String::from_utf8_lossy(inner).to_lowercase())
        })
    };
    scan(Lexer::new(sql)) || super::lexer::other_lexers(sql).into_iter().any(scan)
}

/// Whether any name in the statement (an unquoted word, a backquoted, double-quoted or
/// bracketed name) holds a byte beyond ASCII, in any reading of its text: such a name is
/// read in the client's character set by the server (`policy::context::names_undecodable`).
/// A `"…"` counts, since ANSI_QUOTES may make it a name; strings, comments and user
/// variables do not.
pub fn names_beyond_ascii(sql: &[u8]) -> bool {
    use super::lexer::Tok;
    if sql.is_ascii() {
        return false;
    }
    let names = |mut lexer: Lexer<'_>| {
        lexer.any(|t| {
            matches!(
                t.tok,
                Tok::Word | Tok::Backquoted | Tok::DoubleQuoted | Tok::Bracketed
            ) && !t.bytes(sql).is_ascii()
        })
    };
    names(Lexer::new(sql)) || super::lexer::other_lexers(sql).into_iter().any(names)
}

/// Whether the statement is a compound statement the client sent for the server to run
/// as anonymous stored code (MariaDB): `BEGIN NOT ATOMIC … END`, `IF … END IF`, `CASE`,
/// `LOOP`, `WHILE`, `REPEAT`, `FOR`, or one of them after a label (`l: LOOP …`). Like a
/// procedure's body it may do anything a procedure may: create temporary tables, SET
/// variables, call procedures.
pub fn is_compound(sql: &[u8]) -> bool {
    let mut toks = Lexer::new(sql).peekable();
    // `SET STATEMENT … FOR <statement>`: the statement after FOR is what runs.
    let first_two = {
        let mut two = toks.clone();
        (two.next(), two.next())
    };
    if let (Some(a), Some(b)) = first_two {
        if a.is_kw(sql, "SET") && b.is_kw(sql, "STATEMENT") {
            let mut depth = 0i32;
            let found = toks.by_ref().skip(2).any(|t| {
                if t.is_punct(b'(') {
                    depth += 1;
                } else if t.is_punct(b')') {
                    depth -= 1;
                }
                depth == 0 && t.is_kw(sql, "FOR")
            });
            if !found {
                return false;
            }
        }
    }
    let Some(first) = toks.next() else {
        return false;
    };
    let second = toks.next();
    if first.tok != super::lexer::Tok::Word {
        return false;
    }
    if second.is_some_and(|t| t.is_punct(b':')) {
        // A label; `SET` and the like never take one.
        return true;
    }
    if first.is_kw(sql, "BEGIN") {
        // Not `BEGIN [WORK]`: `BEGIN NOT ATOMIC …`, or under sql_mode=ORACLE a block
        // `BEGIN stmt; … END` (qcache does not know the mode; in another mode the server
        // refuses the statement, and planning it as code only costs caching).
        return second.is_some_and(|t| !t.is_kw(sql, "WORK") && !t.is_punct(b';'));
    }
    ["IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR", "DECLARE"]
        .iter()
        .any(|k| first.is_kw(sql, k))
}

/// Whether the statement is `CREATE [OR REPLACE] [TEMPORARY] TABLE …` (the only DDL that
/// runs a query, in `… SELECT`).
pub fn creates_table(sql: &[u8]) -> bool {
    let mut kws = Lexer::new(sql).filter(|t| !t.is_punct(b'('));
    if !kws.next().is_some_and(|t| t.is_kw(sql, "CREATE")) {
        return false;
    }
    for t in kws.take(4) {
        if t.is_kw(sql, "TABLE") {
            return true;
        }
        if !(t.is_kw(sql, "OR") || t.is_kw(sql, "REPLACE") || t.is_kw(sql, "TEMPORARY")) {
            return false;
        }
    }
    false
}

/// `WITH [RECURSIVE] name [(cols)] AS (…) [, …] <main statement>`: the main statement's first
/// keyword at parenthesis depth 0 decides.
fn classify_with(sql: &[u8], lx: &mut Lexer, depth: u32) -> (StatementKind, bool) {
    let mut parens: u32 = 0;
    let mut prev: Option<Token> = None;
    while let Some(t) = lx.next_token() {
        match t.tok {
            Tok::Punct(b'(') => {
                // A `(` at depth 0 right after a CTE body's `)` opens a parenthesised main query.
                if parens == 0 && prev.is_some_and(|p| p.is_punct(b')')) {
                    return classify(sql, lx, depth + 1);
                }
                parens += 1;
            }
            Tok::Punct(b')') => parens = parens.saturating_sub(1),
            Tok::Word if parens == 0 => match Upper::of(sql, &t).get() {
                b"SELECT" => return (StatementKind::Select, true),
                b"TABLE" | b"VALUES" => return (StatementKind::Select, false),
                b"UPDATE" | b"DELETE" | b"INSERT" | b"REPLACE" => {
                    return (StatementKind::Write, false)
                }
                _ => {}
            },
            _ => {}
        }
        prev = Some(t);
    }
    (StatementKind::Write, false)
}

/// MariaDB `SET STATEMENT var = value [, …] FOR <statement>`.
fn classify_set_statement(sql: &[u8], lx: &mut Lexer, depth: u32) -> (StatementKind, bool) {
    let mut parens: u32 = 0;
    while let Some(t) = lx.next_token() {
        match t.tok {
            Tok::Punct(b'(') => parens += 1,
            Tok::Punct(b')') => parens = parens.saturating_sub(1),
            Tok::Word if parens == 0 && t.is_kw(sql, "FOR") => return classify(sql, lx, depth + 1),
            _ => {}
        }
    }
    (StatementKind::Other, false)
}

/// Reads the select options after SELECT, recording the query cache hints. A second hint
/// (`SQL_CACHE SQL_NO_CACHE`, or one twice) is an error on the server (1221, 1225): such a
/// statement keeps its hints, so that the server refuses it as it would directly, and is
/// never cached.
fn scan_select_options(sql: &[u8], lx: &mut Lexer, out: &mut Scan) {
    let mut seen = 0;
    while let Some(t) = lx.next_token() {
        let hint = match Upper::of(sql, &t).get() {
            b"SQL_CACHE" => Hint::SqlCache,
            b"SQL_NO_CACHE" => Hint::SqlNoCache,
            b"ALL"
            | b"DISTINCT"
            | b"DISTINCTROW"
            | b"HIGH_PRIORITY"
            | b"STRAIGHT_JOIN"
            | b"SQL_SMALL_RESULT"
            | b"SQL_BIG_RESULT"
            | b"SQL_BUFFER_RESULT"
            | b"SQL_CALC_FOUND_ROWS" => continue,
            _ => return,
        };
        seen += 1;
        if seen > 1 {
            out.hint = Hint::SqlNoCache;
            out.hint_spans.clear();
            continue;
        }
        out.hint = hint;
        out.hint_spans.push(t.start..t.end);
    }
}

/// True when a `;` outside strings, comments and quoted identifiers is followed by more SQL.
/// qcache cannot see sql_mode here, so a statement with a backslash counts as several if
/// either reading of `\'` (escape, or NO_BACKSLASH_ESCAPES) makes it several.
/// The statements of a multi-statement query, cut at top-level `;` (outside strings,
/// comments and quoted identifiers). Empty pieces are dropped. Under a backslash the cut
/// follows the default sql_mode; the session treats a multi-statement conservatively anyway.
pub fn split_statements(sql: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for t in Lexer::new(sql) {
        if t.is_punct(b';') {
            if let Some(piece) = sql.get(start..t.start) {
                out.push(piece);
            }
            start = t.end;
        }
    }
    if let Some(piece) = sql.get(start..) {
        out.push(piece);
    }
    out.retain(|p| scan(p).kind != StatementKind::Empty);
    out
}

pub(crate) fn is_multi(sql: &[u8]) -> bool {
    multi_with(Lexer::new(sql)) || super::lexer::other_lexers(sql).into_iter().any(multi_with)
}

fn multi_with(lx: Lexer) -> bool {
    let mut seen_semicolon = false;
    for t in lx {
        if t.is_punct(b';') {
            seen_semicolon = true;
        } else if seen_semicolon {
            return true;
        }
    }
    false
}

/// `sql` with the hint spans cut out, each replaced by one space so that the tokens around
/// it cannot merge. Borrowed when there is nothing to cut.
pub fn strip_hints<'a>(sql: &'a [u8], scan: &Scan) -> Cow<'a, [u8]> {
    if scan.hint_spans.is_empty() {
        return Cow::Borrowed(sql);
    }
    let mut out = Vec::with_capacity(sql.len());
    let mut at = 0;
    for span in &scan.hint_spans {
        // Spans come from scanning this very statement; a mismatched Scan is ignored rather
        // than trusted.
        if span.start < at || span.end > sql.len() || span.start > span.end {
            return Cow::Borrowed(sql);
        }
        out.extend_from_slice(&sql[at..span.start]);
        out.push(b' ');
        at = span.end;
    }
    out.extend_from_slice(&sql[at..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statement SET STATEMENT prefixes run, one row per rule.
    #[test]
    fn statement_bodies() {
        for (sql, want) in [
            ("LOCK TABLES t READ", "LOCK TABLES t READ"),
            ("SET STATEMENT a = 1 FOR USE d", " USE d"),
            (
                "set statement a = 1, b = 'x' for XA START 'x'",
                " XA START 'x'",
            ),
            (
                "SET STATEMENT a = (SELECT 1 FOR UPDATE) FOR LOCK TABLES t READ",
                " LOCK TABLES t READ",
            ),
            (
                "SET STATEMENT a = 1 FOR SET STATEMENT b = 2 FOR USE d",
                " USE d",
            ),
            ("/* c */ SET STATEMENT a = 1 FOR USE d", " USE d"),
            // A prefix ending inside an executable comment, its statement outside.
            ("/*!40101 SET STATEMENT a = 1 FOR */ USE d", "    USE d"),
            ("/*!40101 SET STATEMENT a = 1 FOR USE d */", " USE d   "),
            ("SET STATEMENT a = 1", "SET STATEMENT a = 1"),
            ("SET a = 1", "SET a = 1"),
        ] {
            let got = String::from_utf8_lossy(&statement_body(sql.as_bytes())).into_owned();
            assert_eq!(got, want, "{sql}");
        }
    }

    #[test]
    fn compound_statements_are_anonymous_stored_code() {
        let rows: &[(&str, bool)] = &[
            (
                "BEGIN NOT ATOMIC CREATE TEMPORARY TABLE t SELECT 1; END",
                true,
            ),
            ("begin not atomic select 1; end", true),
            (
                "IF 1 THEN CREATE TEMPORARY TABLE t SELECT 7 AS id; END IF",
                true,
            ),
            ("CASE WHEN 1 THEN SELECT 1; END CASE", true),
            ("WHILE 0 DO SELECT 1; END WHILE", true),
            ("REPEAT SELECT 1; UNTIL 1 END REPEAT", true),
            ("l: LOOP LEAVE l; END LOOP", true),
            ("FOR i IN 1..2 DO SELECT i; END FOR", true),
            ("/* c */ IF 1 THEN SELECT 1; END IF", true),
            (
                "SET STATEMENT max_statement_time=0 FOR IF 1 THEN SELECT 1; END IF",
                true,
            ),
            (
                "SET STATEMENT a=(1), b=2 FOR BEGIN NOT ATOMIC SELECT 1; END",
                true,
            ),
            ("SET STATEMENT max_statement_time=0 FOR SELECT 1", false),
            ("SET STATEMENT max_statement_time=0", false),
            ("BEGIN", false),
            ("BEGIN WORK", false),
            ("begin /* c */ work", false),
            // sql_mode=ORACLE's anonymous block.
            (
                "BEGIN CREATE TEMPORARY TABLE t AS SELECT 7 AS id; END",
                true,
            ),
            ("BEGIN /* c */ INSERT INTO t VALUES (1); END", true),
            ("SELECT IF(1, 2, 3)", false),
            ("SET @a = 1", false),
            ("INSERT INTO t VALUES (1)", false),
            ("(SELECT 1)", false),
            ("", false),
        ];
        for (sql, want) in rows {
            assert_eq!(is_compound(sql.as_bytes()), *want, "{sql}");
        }
    }

    /// One row per rule: which hints are cut before forwarding, and the hint that counts.
    #[test]
    fn query_cache_hints_cut_once_kept_when_the_server_refuses() {
        let rows: &[(&str, Hint, usize)] = &[
            ("SELECT a FROM t", Hint::None, 0),
            ("SELECT SQL_CACHE a FROM t", Hint::SqlCache, 1),
            ("SELECT SQL_NO_CACHE a FROM t", Hint::SqlNoCache, 1),
            ("SELECT DISTINCT SQL_CACHE a FROM t", Hint::SqlCache, 1),
            ("SELECT /*! SQL_NO_CACHE */ a FROM t", Hint::SqlNoCache, 1),
            // The server refuses these (1221, 1225): forwarded whole, never cached.
            (
                "SELECT SQL_CACHE SQL_NO_CACHE a FROM t",
                Hint::SqlNoCache,
                0,
            ),
            (
                "SELECT SQL_NO_CACHE SQL_CACHE a FROM t",
                Hint::SqlNoCache,
                0,
            ),
            (
                "SELECT SQL_NO_CACHE SQL_NO_CACHE a FROM t",
                Hint::SqlNoCache,
                0,
            ),
            ("SELECT SQL_CACHE SQL_CACHE a FROM t", Hint::SqlNoCache, 0),
            (
                "SELECT /*! SQL_NO_CACHE */ /*! SQL_CACHE */ a FROM t",
                Hint::SqlNoCache,
                0,
            ),
        ];
        for (sql, hint, spans) in rows {
            let s = scan(sql.as_bytes());
            assert_eq!((s.hint, s.hint_spans.len()), (*hint, *spans), "{sql}");
        }
    }

    fn kind(sql: &str) -> StatementKind {
        scan(sql.as_bytes()).kind
    }

    #[test]
    fn every_kind() {
        let cases: &[(&str, StatementKind)] = &[
            ("SELECT 1", StatementKind::Select),
            ("  select c from t", StatementKind::Select),
            ("(SELECT 1) UNION (SELECT 2)", StatementKind::Select),
            ("((select 1))", StatementKind::Select),
            (
                "WITH a AS (SELECT 1) SELECT * FROM a",
                StatementKind::Select,
            ),
            (
                "WITH RECURSIVE a (n) AS (SELECT 1 UNION SELECT n+1 FROM a) SELECT * FROM a",
                StatementKind::Select,
            ),
            (
                "WITH a AS (SELECT 1) (SELECT * FROM a)",
                StatementKind::Select,
            ),
            (
                "WITH a AS (SELECT id FROM s) UPDATE t, a SET t.x = 1",
                StatementKind::Write,
            ),
            (
                "WITH a AS (SELECT id FROM s) DELETE FROM t WHERE id IN (SELECT id FROM a)",
                StatementKind::Write,
            ),
            ("WITH a AS (SELECT 1)", StatementKind::Write),
            ("TABLE t", StatementKind::Select),
            ("VALUES ROW(1, 2)", StatementKind::Select),
            ("INSERT INTO t VALUES (1)", StatementKind::Write),
            ("update t set a = 1", StatementKind::Write),
            ("DELETE FROM t", StatementKind::Write),
            ("REPLACE INTO t VALUES (1)", StatementKind::Write),
            ("LOAD DATA INFILE 'f' INTO TABLE t", StatementKind::Write),
            ("TRUNCATE t", StatementKind::Write),
            ("CREATE TABLE t (a int)", StatementKind::Write),
            ("ALTER TABLE t ADD b int", StatementKind::Write),
            ("DROP TABLE t", StatementKind::Write),
            ("DROP PREPARE s", StatementKind::Other),
            ("RENAME TABLE a TO b", StatementKind::Write),
            ("GRANT SELECT ON *.* TO u", StatementKind::Write),
            ("REVOKE SELECT ON *.* FROM u", StatementKind::Write),
            ("OPTIMIZE TABLE t", StatementKind::Write),
            ("REPAIR TABLE t", StatementKind::Write),
            ("ANALYZE TABLE t", StatementKind::Write),
            ("ANALYZE SELECT * FROM t", StatementKind::Show),
            ("ANALYZE UPDATE t SET a = 1", StatementKind::Write),
            ("IMPORT TABLE FROM 'x.sdi'", StatementKind::Write),
            ("DO 1", StatementKind::Write),
            ("BEGIN", StatementKind::Begin),
            ("begin work", StatementKind::Begin),
            ("BEGIN; SELECT 1", StatementKind::Begin),
            ("BEGIN INSERT INTO t VALUES (1); END", StatementKind::Write),
            (
                "BEGIN NOT ATOMIC UPDATE t SET a = 1; END",
                StatementKind::Write,
            ),
            ("START TRANSACTION READ ONLY", StatementKind::Begin),
            ("START SLAVE", StatementKind::Write),
            ("XA START 'x'", StatementKind::Begin),
            ("XA BEGIN 'x'", StatementKind::Begin),
            ("XA COMMIT 'x'", StatementKind::Commit),
            ("XA ROLLBACK 'x'", StatementKind::Rollback),
            ("XA END 'x'", StatementKind::Other),
            ("XA PREPARE 'x'", StatementKind::Other),
            ("COMMIT", StatementKind::Commit),
            ("commit work", StatementKind::Commit),
            ("ROLLBACK", StatementKind::Rollback),
            ("ROLLBACK WORK", StatementKind::Rollback),
            ("ROLLBACK TO SAVEPOINT s", StatementKind::Other),
            ("ROLLBACK WORK TO s", StatementKind::Other),
            ("SAVEPOINT s", StatementKind::Other),
            ("SET NAMES utf8mb4", StatementKind::Set),
            (
                "SET STATEMENT max_statement_time=1 FOR SELECT * FROM t",
                StatementKind::Select,
            ),
            (
                "SET STATEMENT max_statement_time=1 FOR UPDATE t SET a = 1",
                StatementKind::Write,
            ),
            ("USE db", StatementKind::Use),
            ("SHOW TABLES", StatementKind::Show),
            ("DESCRIBE t", StatementKind::Show),
            ("DESC t", StatementKind::Show),
            ("EXPLAIN SELECT 1", StatementKind::Show),
            ("HELP 'x'", StatementKind::Show),
            ("FLUSH QUERY CACHE", StatementKind::Flush),
            ("RESET QUERY CACHE", StatementKind::Reset),
            ("CALL p()", StatementKind::Call),
            ("EXECUTE s USING @a", StatementKind::Execute),
            ("PREPARE s FROM 'SELECT 1'", StatementKind::Other),
            ("DEALLOCATE PREPARE s", StatementKind::Other),
            ("LOCK TABLES t READ", StatementKind::Other),
            ("KILL 3", StatementKind::Other),
            ("", StatementKind::Empty),
            ("   \n\t", StatementKind::Empty),
            ("/* only */ -- a comment\n# another", StatementKind::Empty),
            ("(", StatementKind::Other),
            ("42", StatementKind::Write),
            ("FROBNICATE t", StatementKind::Write),
            (
                "ANALYZE FORMAT=JSON UPDATE t SET a = 1",
                StatementKind::Write,
            ),
            ("ANALYZE FORMAT JSON SELECT 1", StatementKind::Show),
            ("EXPLAIN ANALYZE DELETE FROM t", StatementKind::Write),
            ("EXPLAIN ANALYZE SELECT 1", StatementKind::Show),
            ("EXPLAIN UPDATE t SET a = 1", StatementKind::Show),
            ("XA RECOVER", StatementKind::Other),
            ("XA FOO", StatementKind::Write),
            ("HANDLER t READ FIRST", StatementKind::Other),
            ("CHECKSUM TABLE t", StatementKind::Other),
            ("GET DIAGNOSTICS @n = NUMBER", StatementKind::Other),
            ("GET x", StatementKind::Write),
            ("QCACHE INVALIDATE TABLE t", StatementKind::Other),
        ];
        for (sql, want) in cases {
            assert_eq!(kind(sql), *want, "{sql}");
        }
    }

    #[test]
    fn leading_comments_are_skipped() {
        assert_eq!(kind("/* a */ -- b\n# c\n SELECT 1"), StatementKind::Select);
        assert_eq!(kind("--\tx\nSELECT 1"), StatementKind::Select);
        assert_eq!(kind("/*! SELECT */ 1"), StatementKind::Select);
        assert_eq!(kind("/*!50000 UPDATE */ t SET a=1"), StatementKind::Write);
        assert_eq!(kind("/*M!100100 DELETE */ FROM t"), StatementKind::Write);
        assert_eq!(kind("/*+ hint */ SELECT 1"), StatementKind::Select);
    }

    fn hint(sql: &str) -> (Hint, String) {
        let s = scan(sql.as_bytes());
        let stripped = strip_hints(sql.as_bytes(), &s);
        (s.hint, String::from_utf8_lossy(&stripped).into_owned())
    }

    #[test]
    fn hints_at_every_position() {
        assert_eq!(
            hint("SELECT SQL_CACHE a FROM t"),
            (Hint::SqlCache, "SELECT   a FROM t".into())
        );
        assert_eq!(
            hint("select sql_no_cache a from t"),
            (Hint::SqlNoCache, "select   a from t".into())
        );
        assert_eq!(
            hint("SELECT DISTINCT HIGH_PRIORITY SQL_NO_CACHE STRAIGHT_JOIN a FROM t"),
            (
                Hint::SqlNoCache,
                "SELECT DISTINCT HIGH_PRIORITY   STRAIGHT_JOIN a FROM t".into()
            )
        );
        assert_eq!(
            hint("SELECT /*!40001 SQL_NO_CACHE */ * FROM t"),
            (Hint::SqlNoCache, "SELECT /*!40001   */ * FROM t".into())
        );
        assert_eq!(
            hint("SELECT/*!SQL_CACHE*/a FROM t"),
            (Hint::SqlCache, "SELECT/*! */a FROM t".into())
        );
        assert_eq!(
            hint("SELECT SQL_CALC_FOUND_ROWS SQL_BUFFER_RESULT SQL_SMALL_RESULT SQL_BIG_RESULT DISTINCTROW ALL SQL_CACHE 1"),
            (Hint::SqlCache, "SELECT SQL_CALC_FOUND_ROWS SQL_BUFFER_RESULT SQL_SMALL_RESULT SQL_BIG_RESULT DISTINCTROW ALL   1".into())
        );
        assert_eq!(hint("(SELECT SQL_NO_CACHE 1)").0, Hint::SqlNoCache);
        assert_eq!(
            hint("WITH a AS (SELECT 1) SELECT SQL_NO_CACHE * FROM a").0,
            Hint::SqlNoCache
        );
        assert_eq!(hint("SELECT SQL_CACHE SQL_NO_CACHE 1").0, Hint::SqlNoCache);
        assert_eq!(hint("SELECT SQL_NO_CACHE SQL_CACHE 1").0, Hint::SqlNoCache);
        assert_eq!(
            hint("SELECT sql_no_cache FROM t"),
            (Hint::SqlNoCache, "SELECT   FROM t".into())
        );
        // Not a select option any more: a column or a string.
        assert_eq!(hint("SELECT a, SQL_CACHE FROM t").0, Hint::None);
        assert_eq!(hint("SELECT 'SQL_NO_CACHE' FROM t").0, Hint::None);
        assert_eq!(hint("SELECT `SQL_NO_CACHE` FROM t").0, Hint::None);
        assert_eq!(hint("UPDATE t SET SQL_CACHE = 1").0, Hint::None);
        let s = scan(b"SELECT c FROM t");
        assert!(s.hint_spans.is_empty());
        assert!(matches!(
            strip_hints(b"SELECT c FROM t", &s),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn split_keeps_semicolons_in_strings() {
        let parts = split_statements(b"SELECT ';' FROM t; UPDATE t SET a = 1 -- x;\n;  ");
        assert_eq!(parts.len(), 2);
        assert_eq!(scan(parts[0]).kind, StatementKind::Select);
        assert_eq!(scan(parts[1]).kind, StatementKind::Write);
    }

    #[test]
    fn multi_statements() {
        assert!(!scan(b"SELECT 1;").multi);
        assert!(!scan(b"SELECT 1 ;  -- trailing\n").multi);
        assert!(scan(b"SELECT 1; SELECT 2").multi);
        assert!(scan(b"UPDATE t SET a=1;DELETE FROM t").multi);
        assert!(!scan(b"SELECT ';' FROM t").multi);
        assert!(!scan(b"SELECT \"a;b\", `c;d` FROM t").multi);
        assert!(!scan(b"SELECT 'it''s; -- x' FROM t").multi);
        // Under NO_BACKSLASH_ESCAPES this is a string, then `; b' FROM t`: more SQL.
        assert!(scan(b"SELECT 'a\\'; b' FROM t").multi);
        assert!(scan(b"SELECT \"a\\\"; DELETE FROM t; \"\"").multi);
        assert!(!scan(b"SELECT 'a\\' FROM t;").multi);
        assert!(!scan(b"SELECT 1 /* ; x */").multi);
        assert!(!scan(b"SELECT 1 -- ; x").multi);
        assert!(!scan(b"SELECT 1 # ; x").multi);
        assert!(scan(b"SELECT 1 --; x").multi);
    }

    #[test]
    fn strip_ignores_foreign_spans() {
        let bad = Scan {
            kind: StatementKind::Select,
            hint: Hint::SqlCache,
            hint_spans: vec![Range { start: 5, end: 100 }],
            multi: false,
        };
        assert_eq!(&*strip_hints(b"SELECT 1", &bad), b"SELECT 1");
    }
}
