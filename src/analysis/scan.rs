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
/// Fail closed: a statement is anything but [`Kind::Write`] only when its first keywords are
/// on a closed list of known shapes. Every unrecognised statement is a `Write` (of tables
/// the analysis may not be able to name), so it invalidates rather than hides a change.
///
/// `TABLE t` and `VALUES …` are `Select`: they are reads (MySQL 8.0.19+), and the analysis
/// decides whether they can be cached. `WITH …` is `Select` when its main statement is a
/// SELECT (or a parenthesised query), `Write` when it is UPDATE/DELETE/INSERT/REPLACE or
/// cannot be recognised (so an unknown shape is invalidated rather than ignored). MariaDB
/// `SET STATEMENT … FOR <stmt>` takes the kind of `<stmt>`, since that is what runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
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
    pub kind: Kind,
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
        kind: Kind::Empty,
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
pub(crate) fn classify(sql: &[u8], lx: &mut Lexer, depth: u32) -> (Kind, bool) {
    // Nested WITH / SET STATEMENT prefixes recurse; hostile input must not exhaust the stack,
    // and an unrecognised shape is treated as a write so it invalidates rather than hides.
    if depth > MAX_PREFIX_DEPTH {
        return (Kind::Write, false);
    }
    let mut parens = false;
    let first = loop {
        match lx.next_token() {
            None => return (if parens { Kind::Other } else { Kind::Empty }, false),
            Some(t) if t.is_punct(b'(') => parens = true,
            Some(t) => break t,
        }
    };
    let next_upper = |lx: &mut Lexer| lx.next_token().map(|t| Upper::of(sql, &t));
    let w = Upper::of(sql, &first);
    let kind = match w.get() {
        b"SELECT" => return (Kind::Select, true),
        b"WITH" => return classify_with(sql, lx, depth),
        b"TABLE" | b"VALUES" => Kind::Select,
        b"INSERT" | b"UPDATE" | b"DELETE" | b"REPLACE" | b"LOAD" | b"TRUNCATE" | b"CREATE"
        | b"ALTER" | b"RENAME" | b"GRANT" | b"REVOKE" | b"OPTIMIZE" | b"REPAIR" | b"IMPORT"
        | b"DO" | b"BINLOG" => Kind::Write,
        b"DROP" => match next_upper(lx) {
            Some(u) if u.get() == b"PREPARE" => Kind::Other,
            _ => Kind::Write,
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
                _ => Kind::Show,
            }
        }
        b"BEGIN" => match next_upper(lx) {
            Some(u) if u.get() == b"NOT" => Kind::Write,
            _ => Kind::Begin,
        },
        b"START" => match next_upper(lx) {
            Some(u) if u.get() == b"TRANSACTION" => Kind::Begin,
            _ => Kind::Write,
        },
        b"XA" => match next_upper(lx) {
            Some(u) => match u.get() {
                b"START" | b"BEGIN" => Kind::Begin,
                b"COMMIT" => Kind::Commit,
                b"ROLLBACK" => Kind::Rollback,
                b"END" | b"PREPARE" | b"RECOVER" => Kind::Other,
                _ => Kind::Write,
            },
            None => Kind::Other,
        },
        b"COMMIT" => Kind::Commit,
        b"ROLLBACK" => {
            let mut u = next_upper(lx);
            if u.as_ref().is_some_and(|u| u.get() == b"WORK") {
                u = next_upper(lx);
            }
            match u {
                Some(u) if u.get() == b"TO" => Kind::Other,
                _ => Kind::Rollback,
            }
        }
        b"SET" => match next_upper(lx) {
            Some(u) if u.get() == b"STATEMENT" => return classify_set_statement(sql, lx, depth),
            _ => Kind::Set,
        },
        b"USE" => Kind::Use,
        b"SHOW" | b"HELP" => Kind::Show,
        b"FLUSH" => Kind::Flush,
        b"RESET" => Kind::Reset,
        b"CALL" => Kind::Call,
        b"EXECUTE" => Kind::Execute,
        b"PREPARE" | b"DEALLOCATE" | b"SAVEPOINT" | b"RELEASE" | b"LOCK" | b"UNLOCK"
        | b"HANDLER" | b"CHECK" | b"CHECKSUM" | b"KILL" | b"QCACHE" => Kind::Other,
        b"GET" => match next_upper(lx) {
            Some(u) if u.get() == b"DIAGNOSTICS" => Kind::Other,
            _ => Kind::Write,
        },
        // Not a recognised shape: it may write.
        _ => Kind::Write,
    };
    (kind, false)
}

/// After MariaDB's `ANALYZE` (or MySQL's `EXPLAIN ANALYZE`): `[FORMAT = name]` and the
/// statement that runs. A read is `Show` (run, never cached); ANALYZE TABLE and anything
/// else is a `Write`.
fn classify_analyzed(sql: &[u8], lx: &mut Lexer, depth: u32) -> (Kind, bool) {
    skip_format_option(sql, lx);
    let mut ahead = lx.clone();
    match ahead.next_token().map(|t| Upper::of(sql, &t)) {
        Some(u)
            if matches!(
                u.get(),
                b"TABLE" | b"TABLES" | b"LOCAL" | b"NO_WRITE_TO_BINLOG"
            ) =>
        {
            (Kind::Write, false)
        }
        _ => match classify(sql, lx, depth + 1) {
            (Kind::Select | Kind::Empty, _) => (Kind::Show, false),
            _ => (Kind::Write, false),
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

/// Whether the statement's first keyword (after comments and opening parentheses) is `kw`
/// (upper-case ASCII).
pub fn first_keyword_is(sql: &[u8], kw: &str) -> bool {
    Lexer::new(sql)
        .find(|t| !t.is_punct(b'('))
        .is_some_and(|t| t.is_kw(sql, kw))
}

/// `WITH [RECURSIVE] name [(cols)] AS (…) [, …] <main statement>`: the main statement's first
/// keyword at parenthesis depth 0 decides.
fn classify_with(sql: &[u8], lx: &mut Lexer, depth: u32) -> (Kind, bool) {
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
                b"SELECT" => return (Kind::Select, true),
                b"TABLE" | b"VALUES" => return (Kind::Select, false),
                b"UPDATE" | b"DELETE" | b"INSERT" | b"REPLACE" => return (Kind::Write, false),
                _ => {}
            },
            _ => {}
        }
        prev = Some(t);
    }
    (Kind::Write, false)
}

/// MariaDB `SET STATEMENT var = value [, …] FOR <statement>`.
fn classify_set_statement(sql: &[u8], lx: &mut Lexer, depth: u32) -> (Kind, bool) {
    let mut parens: u32 = 0;
    while let Some(t) = lx.next_token() {
        match t.tok {
            Tok::Punct(b'(') => parens += 1,
            Tok::Punct(b')') => parens = parens.saturating_sub(1),
            Tok::Word if parens == 0 && t.is_kw(sql, "FOR") => return classify(sql, lx, depth + 1),
            _ => {}
        }
    }
    (Kind::Other, false)
}

/// Reads the select options after SELECT, recording the query cache hints.
fn scan_select_options(sql: &[u8], lx: &mut Lexer, out: &mut Scan) {
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
        if out.hint != Hint::SqlNoCache {
            out.hint = hint;
        }
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
    out.retain(|p| scan(p).kind != Kind::Empty);
    out
}

pub(crate) fn is_multi(sql: &[u8]) -> bool {
    multi_with(Lexer::new(sql))
        || (sql.contains(&b'\\') && multi_with(Lexer::without_backslash_escapes(sql)))
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

    fn kind(sql: &str) -> Kind {
        scan(sql.as_bytes()).kind
    }

    #[test]
    fn every_kind() {
        let cases: &[(&str, Kind)] = &[
            ("SELECT 1", Kind::Select),
            ("  select c from t", Kind::Select),
            ("(SELECT 1) UNION (SELECT 2)", Kind::Select),
            ("((select 1))", Kind::Select),
            ("WITH a AS (SELECT 1) SELECT * FROM a", Kind::Select),
            (
                "WITH RECURSIVE a (n) AS (SELECT 1 UNION SELECT n+1 FROM a) SELECT * FROM a",
                Kind::Select,
            ),
            ("WITH a AS (SELECT 1) (SELECT * FROM a)", Kind::Select),
            (
                "WITH a AS (SELECT id FROM s) UPDATE t, a SET t.x = 1",
                Kind::Write,
            ),
            (
                "WITH a AS (SELECT id FROM s) DELETE FROM t WHERE id IN (SELECT id FROM a)",
                Kind::Write,
            ),
            ("WITH a AS (SELECT 1)", Kind::Write),
            ("TABLE t", Kind::Select),
            ("VALUES ROW(1, 2)", Kind::Select),
            ("INSERT INTO t VALUES (1)", Kind::Write),
            ("update t set a = 1", Kind::Write),
            ("DELETE FROM t", Kind::Write),
            ("REPLACE INTO t VALUES (1)", Kind::Write),
            ("LOAD DATA INFILE 'f' INTO TABLE t", Kind::Write),
            ("TRUNCATE t", Kind::Write),
            ("CREATE TABLE t (a int)", Kind::Write),
            ("ALTER TABLE t ADD b int", Kind::Write),
            ("DROP TABLE t", Kind::Write),
            ("DROP PREPARE s", Kind::Other),
            ("RENAME TABLE a TO b", Kind::Write),
            ("GRANT SELECT ON *.* TO u", Kind::Write),
            ("REVOKE SELECT ON *.* FROM u", Kind::Write),
            ("OPTIMIZE TABLE t", Kind::Write),
            ("REPAIR TABLE t", Kind::Write),
            ("ANALYZE TABLE t", Kind::Write),
            ("ANALYZE SELECT * FROM t", Kind::Show),
            ("ANALYZE UPDATE t SET a = 1", Kind::Write),
            ("IMPORT TABLE FROM 'x.sdi'", Kind::Write),
            ("DO 1", Kind::Write),
            ("BEGIN", Kind::Begin),
            ("begin work", Kind::Begin),
            ("BEGIN NOT ATOMIC UPDATE t SET a = 1; END", Kind::Write),
            ("START TRANSACTION READ ONLY", Kind::Begin),
            ("START SLAVE", Kind::Write),
            ("XA START 'x'", Kind::Begin),
            ("XA BEGIN 'x'", Kind::Begin),
            ("XA COMMIT 'x'", Kind::Commit),
            ("XA ROLLBACK 'x'", Kind::Rollback),
            ("XA END 'x'", Kind::Other),
            ("XA PREPARE 'x'", Kind::Other),
            ("COMMIT", Kind::Commit),
            ("commit work", Kind::Commit),
            ("ROLLBACK", Kind::Rollback),
            ("ROLLBACK WORK", Kind::Rollback),
            ("ROLLBACK TO SAVEPOINT s", Kind::Other),
            ("ROLLBACK WORK TO s", Kind::Other),
            ("SAVEPOINT s", Kind::Other),
            ("SET NAMES utf8mb4", Kind::Set),
            (
                "SET STATEMENT max_statement_time=1 FOR SELECT * FROM t",
                Kind::Select,
            ),
            (
                "SET STATEMENT max_statement_time=1 FOR UPDATE t SET a = 1",
                Kind::Write,
            ),
            ("USE db", Kind::Use),
            ("SHOW TABLES", Kind::Show),
            ("DESCRIBE t", Kind::Show),
            ("DESC t", Kind::Show),
            ("EXPLAIN SELECT 1", Kind::Show),
            ("HELP 'x'", Kind::Show),
            ("FLUSH QUERY CACHE", Kind::Flush),
            ("RESET QUERY CACHE", Kind::Reset),
            ("CALL p()", Kind::Call),
            ("EXECUTE s USING @a", Kind::Execute),
            ("PREPARE s FROM 'SELECT 1'", Kind::Other),
            ("DEALLOCATE PREPARE s", Kind::Other),
            ("LOCK TABLES t READ", Kind::Other),
            ("KILL 3", Kind::Other),
            ("", Kind::Empty),
            ("   \n\t", Kind::Empty),
            ("/* only */ -- a comment\n# another", Kind::Empty),
            ("(", Kind::Other),
            ("42", Kind::Write),
            ("FROBNICATE t", Kind::Write),
            ("ANALYZE FORMAT=JSON UPDATE t SET a = 1", Kind::Write),
            ("ANALYZE FORMAT JSON SELECT 1", Kind::Show),
            ("EXPLAIN ANALYZE DELETE FROM t", Kind::Write),
            ("EXPLAIN ANALYZE SELECT 1", Kind::Show),
            ("EXPLAIN UPDATE t SET a = 1", Kind::Show),
            ("XA RECOVER", Kind::Other),
            ("XA FOO", Kind::Write),
            ("HANDLER t READ FIRST", Kind::Other),
            ("CHECKSUM TABLE t", Kind::Other),
            ("GET DIAGNOSTICS @n = NUMBER", Kind::Other),
            ("GET x", Kind::Write),
            ("QCACHE INVALIDATE TABLE t", Kind::Other),
        ];
        for (sql, want) in cases {
            assert_eq!(kind(sql), *want, "{sql}");
        }
    }

    #[test]
    fn leading_comments_are_skipped() {
        assert_eq!(kind("/* a */ -- b\n# c\n SELECT 1"), Kind::Select);
        assert_eq!(kind("--\tx\nSELECT 1"), Kind::Select);
        assert_eq!(kind("/*! SELECT */ 1"), Kind::Select);
        assert_eq!(kind("/*!50000 UPDATE */ t SET a=1"), Kind::Write);
        assert_eq!(kind("/*M!100100 DELETE */ FROM t"), Kind::Write);
        assert_eq!(kind("/*+ hint */ SELECT 1"), Kind::Select);
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
        assert_eq!(scan(parts[0]).kind, Kind::Select);
        assert_eq!(scan(parts[1]).kind, Kind::Write);
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
            kind: Kind::Select,
            hint: Hint::SqlCache,
            hint_spans: vec![Range { start: 5, end: 100 }],
            multi: false,
        };
        assert_eq!(&*strip_hints(b"SELECT 1", &bad), b"SELECT 1");
    }
}
