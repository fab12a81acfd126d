//! SET and USE: the session state changes qcache follows itself. Never memoised by digest,
//! because here the literals are the point.
//!
//! A token scan rather than sqlparser: SET has many MySQL/MariaDB-only forms, and what the
//! session needs is each assignment's name and value text, which tokens give exactly.

use crate::config::QueryCacheType;

use super::lexer::{Lexer, Tok, Token};

/// An assignment to `query_cache_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QcAssign {
    Value(QueryCacheType),
    /// `= DEFAULT`: back to the configured default.
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfo {
    /// In statement order: (lower-case name without `@@session.` / `SESSION`, value as SQL
    /// text). User variables keep their `@` (`@u`); `@@global.x` / `GLOBAL x` appear as `x`
    /// (see `global`). `SET NAMES …` gives ("names", "utf8mb4 COLLATE …"), `SET CHARACTER SET`
    /// and `SET CHARSET` give ("character set", …), `SET [scope] TRANSACTION …` gives
    /// ("transaction", "ISOLATION LEVEL …"), `SET ROLE …` gives ("role", …).
    /// `query_cache_type` assignments are listed here too.
    pub assignments: Vec<(String, String)>,
    /// Some when `query_cache_type` is assigned at session scope (the last one wins).
    pub query_cache_type: Option<QcAssign>,
    /// Any GLOBAL / PERSIST / `@@global.` assignment. A scope keyword carries over to the
    /// following unmarked assignments, as MariaDB reads `SET GLOBAL a = 1, b = 2`.
    pub global: bool,
    /// Per assignment (same order as `assignments`): at GLOBAL / PERSIST scope. A SET may
    /// mix scopes (`SET GLOBAL a = 1, SESSION b = 2`): only the session ones change it.
    pub globals: Vec<bool>,
    /// `SET TRANSACTION …` with no scope keyword: for the next transaction only.
    pub next_transaction_only: bool,
    /// Only `@x = …` assignments: the session's settings are untouched.
    pub user_vars_only: bool,
    /// A value calls a stored function, a UDF or a sequence (`SET @x = f()`), which may
    /// write tables: treat the statement also as a write to unknown tables. (An addition to
    /// the original contract.)
    pub may_write: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Session,
    Global,
}

fn text(sql: &str, from: usize, to: usize) -> String {
    sql.get(from..to).unwrap_or("").trim().to_string()
}

/// The assignments of a SET statement; None when qcache cannot follow it (MariaDB
/// `SET STATEMENT … FOR`, which changes nothing after its statement anyway and is not
/// `StatementKind::Set`; a second statement; a `query_cache_type` value it cannot read; malformed
/// text).
pub fn analyze_set(sql: &str) -> Option<SetInfo> {
    let mut info = analyze_set_reading(sql)?;
    // Where another sql_mode or client character set cuts the text otherwise (`'x\'` is a
    // whole string under NO_BACKSLASH_ESCAPES, `[x']` a name under MSSQL, `--` and a high
    // byte a comment under latin1), it may assign other variables: `SET @a = 'x\',
    // time_zone = '+05:00' -- '` sets time_zone there. The session's mode is not known
    // here, so qcache follows the SET only when every reading assigns alike (fail closed:
    // None, the session's settings unknown).
    let bytes = sql.as_bytes();
    for alt in super::lexer::other_readings(bytes)
        .into_iter()
        .chain(super::lexer::single_byte_reading(bytes))
    {
        let other = analyze_set_reading(&String::from_utf8_lossy(&alt))?;
        if !assigns_alike(&info, &other) {
            return None;
        }
        info.may_write |= other.may_write;
    }
    Some(info)
}

/// Whether two readings of one SET assign the same variables, in the same scopes, and the
/// same value to each that is not a user variable (whose value no key holds).
fn assigns_alike(a: &SetInfo, b: &SetInfo) -> bool {
    a.assignments.len() == b.assignments.len()
        && a.globals == b.globals
        && a.query_cache_type == b.query_cache_type
        && a.next_transaction_only == b.next_transaction_only
        && a.assignments
            .iter()
            .zip(&b.assignments)
            .all(|((an, av), (bn, bv))| an == bn && (an.starts_with('@') || av == bv))
}

/// [`analyze_set`] under the default rules alone.
fn analyze_set_reading(sql: &str) -> Option<SetInfo> {
    let b = sql.as_bytes();
    let mut toks: Vec<Token> = Lexer::new(b).collect();
    // A trailing `;` is harmless; anything after it is another statement.
    if let Some(semi) = toks.iter().position(|t| t.is_punct(b';')) {
        if semi + 1 < toks.len() {
            return None;
        }
        toks.truncate(semi);
    }
    let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_kw(b, k));
    if !kw(0, "SET") || toks.len() < 2 {
        return None;
    }
    let end = toks.last().map_or(0, |t| t.end);
    let mut info = SetInfo {
        assignments: Vec::new(),
        query_cache_type: None,
        global: false,
        globals: Vec::new(),
        next_transaction_only: false,
        user_vars_only: true,
        may_write: super::fallback::calls_unknown_code(sql),
    };
    if kw(1, "STATEMENT") {
        return None;
    }
    if whole_statement(sql, &toks, end, &mut info) {
        return Some(info);
    }
    let mut scope = Scope::Session;
    let mut k = 1;
    while k < toks.len() {
        // Scope keyword for this and the following assignments.
        if kw(k, "GLOBAL") || kw(k, "PERSIST") || kw(k, "PERSIST_ONLY") {
            scope = Scope::Global;
            k += 1;
        } else if kw(k, "SESSION") || kw(k, "LOCAL") {
            scope = Scope::Session;
            k += 1;
        }
        let (name, this_scope, user, next) = assignment_name(b, &toks, k, scope)?;
        // `=` or `:=`
        let mut v = next;
        if toks.get(v).is_some_and(|x| x.is_punct(b':')) {
            v += 1;
        }
        if !toks.get(v).is_some_and(|x| x.is_punct(b'=')) {
            return None;
        }
        v += 1;
        let start = v;
        v = value_end(&toks, start);
        if v == start {
            return None;
        }
        let from = toks.get(start).map_or(end, |x| x.start);
        let to = toks.get(v - 1).map_or(end, |x| x.end);
        let value = text(sql, from, to);
        if this_scope == Scope::Global {
            info.global = true;
        }
        if !user {
            info.user_vars_only = false;
        }
        if name == "query_cache_type" && this_scope == Scope::Session {
            info.query_cache_type = Some(qc_value(&value)?);
        }
        info.assignments.push((name, value));
        info.globals.push(this_scope == Scope::Global);
        k = v + 1;
    }
    if info.assignments.is_empty() {
        return None;
    }
    Some(info)
}

/// The whole-statement forms of SET (`TRANSACTION …`, `NAMES`, `CHARACTER SET`, `CHARSET`,
/// `ROLE`, `DEFAULT ROLE`, `PASSWORD`): true when `toks` (of `sql`, whose last token ends at
/// `end`) is one, with `info` filled in.
fn whole_statement(sql: &str, toks: &[Token], end: usize, info: &mut SetInfo) -> bool {
    let b = sql.as_bytes();
    let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_kw(b, k));
    let mut j = 1;
    if kw(j, "GLOBAL") || kw(j, "SESSION") || kw(j, "LOCAL") {
        j += 1;
    }
    if kw(j, "TRANSACTION") {
        info.global = kw(1, "GLOBAL");
        info.next_transaction_only = j == 1;
        info.user_vars_only = false;
        let from = toks.get(j + 1).map_or(end, |t| t.start);
        info.assignments
            .push(("transaction".into(), text(sql, from, end)));
        info.globals.push(info.global);
        return true;
    }
    let single = |name: &str, from: usize, info: &mut SetInfo| {
        let from = toks.get(from).map_or(end, |t| t.start);
        info.user_vars_only = false;
        info.assignments.push((name.into(), text(sql, from, end)));
        info.globals.push(false);
    };
    if kw(1, "NAMES") {
        single("names", 2, info);
        return true;
    }
    if kw(1, "CHARACTER") && kw(2, "SET") {
        single("character set", 3, info);
        return true;
    }
    if kw(1, "CHARSET") {
        single("character set", 2, info);
        return true;
    }
    if kw(1, "ROLE") {
        single("role", 2, info);
        return true;
    }
    if kw(1, "DEFAULT") && kw(2, "ROLE") {
        // Changes what future sessions start with, not this one.
        info.user_vars_only = false;
        return true;
    }
    if kw(1, "PASSWORD") {
        // Changes no session setting; the value (a password) is deliberately not kept.
        info.user_vars_only = false;
        return true;
    }
    false
}

/// The assignments of MariaDB's `SET STATEMENT a = x, … FOR <statement>` prefixes (nested
/// ones too), as [`analyze_set`] names them: None when `sql` has no such prefix, Some(None)
/// when it has one qcache cannot read.
pub fn statement_settings(sql: &str) -> Option<Option<Vec<(String, String)>>> {
    let mut out: Option<Vec<(String, String)>> = None;
    let mut rest = sql;
    // Hostile nesting is bounded like the scan's.
    for _ in 0..8 {
        let b = rest.as_bytes();
        let toks: Vec<Token> = Lexer::new(b).collect();
        let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_kw(b, k));
        if !(kw(0, "SET") && kw(1, "STATEMENT")) {
            return out.map(Some);
        }
        let mut depth = 0usize;
        let mut at = None;
        for (i, t) in toks.iter().enumerate().skip(2) {
            if t.is_punct(b'(') {
                depth += 1;
            } else if t.is_punct(b')') {
                depth = depth.saturating_sub(1);
            } else if depth == 0 && t.is_kw(b, "FOR") {
                at = Some(i);
                break;
            }
        }
        let Some(at) = at.filter(|&i| i > 2) else {
            return Some(None);
        };
        let list = rest.get(toks[2].start..toks[at - 1].end).unwrap_or("");
        let Some(info) = analyze_set(&format!("SET {list}")) else {
            return Some(None);
        };
        if info.global {
            return Some(None);
        }
        out.get_or_insert_with(Vec::new).extend(info.assignments);
        rest = rest.get(toks[at].end..).unwrap_or("");
    }
    Some(None)
}

/// The name of the assignment at token `k`, its scope (`scope` unless the name says one), whether
/// it is a user variable, and the token after the name.
fn assignment_name(
    b: &[u8],
    toks: &[Token],
    k: usize,
    scope: Scope,
) -> Option<(String, Scope, bool, usize)> {
    let t = toks.get(k)?;
    let named = match t.tok {
        Tok::Var => {
            let v = t.bytes(b);
            if v.starts_with(b"@@") {
                let first = String::from_utf8_lossy(&v[2..]).to_ascii_lowercase();
                if toks.get(k + 1).is_some_and(|x| x.is_punct(b'.')) {
                    let second = toks.get(k + 2).filter(|x| x.tok == Tok::Word)?;
                    let second = String::from_utf8_lossy(second.bytes(b)).to_ascii_lowercase();
                    match first.as_str() {
                        "global" | "persist" | "persist_only" => {
                            (second, Scope::Global, false, k + 3)
                        }
                        "session" | "local" => (second, Scope::Session, false, k + 3),
                        // A structured name (`keycache.key_buffer_size`).
                        _ => (format!("{first}.{second}"), scope, false, k + 3),
                    }
                } else {
                    (first, Scope::Session, false, k + 1)
                }
            } else {
                let name = String::from_utf8_lossy(v).to_ascii_lowercase();
                (name, Scope::Session, true, k + 1)
            }
        }
        Tok::Word | Tok::Backquoted => {
            let raw = String::from_utf8_lossy(t.bytes(b)).to_ascii_lowercase();
            let mut name = raw.trim_matches('`').to_string();
            let mut next = k + 1;
            if toks.get(next).is_some_and(|x| x.is_punct(b'.')) {
                let second = toks.get(next + 1).filter(|x| x.tok == Tok::Word)?;
                name = format!(
                    "{name}.{}",
                    String::from_utf8_lossy(second.bytes(b)).to_ascii_lowercase()
                );
                next += 2;
            }
            (name, scope, false, next)
        }
        _ => return None,
    };
    Some(named)
}

/// The token after a value starting at `start`: the value runs to the next top-level comma.
fn value_end(toks: &[Token], start: usize) -> usize {
    let mut v = start;
    let mut depth = 0usize;
    while let Some(x) = toks.get(v) {
        if x.is_punct(b'(') {
            depth += 1;
        } else if x.is_punct(b')') {
            depth = depth.saturating_sub(1);
        } else if x.is_punct(b',') && depth == 0 {
            break;
        }
        v += 1;
    }
    v
}

fn qc_value(v: &str) -> Option<QcAssign> {
    let unquoted = v
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| v.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
        .or_else(|| v.strip_prefix('`').and_then(|s| s.strip_suffix('`')))
        .unwrap_or(v);
    if unquoted.eq_ignore_ascii_case("DEFAULT") && unquoted.len() == v.len() {
        return Some(QcAssign::Default);
    }
    QueryCacheType::parse(unquoted).map(QcAssign::Value)
}

/// `USE db` → Some("db"), unquoted but with its case kept: database names are case-sensitive
/// on Linux and the name goes into the cache key. (Table qualification lower-cases it.)
pub fn use_schema(sql: &str) -> Option<String> {
    // `SET STATEMENT … FOR USE db` changes the database too.
    let body = super::scan::statement_body(sql.as_bytes());
    let b: &[u8] = &body;
    let toks: Vec<Token> = Lexer::new(b).take(4).collect();
    if !toks.first()?.is_kw(b, "USE") {
        return None;
    }
    let t = toks.get(1)?;
    match toks.get(2) {
        None => {}
        Some(x) if x.is_punct(b';') && toks.get(3).is_none() => {}
        Some(_) => return None,
    }
    let raw = t.bytes(b);
    let name = match t.tok {
        Tok::Word => String::from_utf8_lossy(raw).into_owned(),
        Tok::Backquoted | Tok::DoubleQuoted if raw.len() >= 2 => {
            let q = raw[0] as char;
            String::from_utf8_lossy(&raw[1..raw.len() - 1])
                .replace(&format!("{q}{q}"), &q.to_string())
        }
        _ => return None,
    };
    if name.is_empty() {
        None
    } else {
        Some(name)
    }
}

/// A SQL-level statement that runs other text on the server, with what its text shows of
/// it ([`sql_level_text`]). Names are lower-cased: the server's are case-insensitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlLevel {
    /// `PREPARE name FROM …`: the text prepared, when a plain literal gives it.
    Prepare(String, Option<String>),
    /// `EXECUTE name [USING …]`.
    Execute(String),
    /// `EXECUTE IMMEDIATE …`: the text run, when a plain literal gives it.
    Immediate(Option<String>),
    /// `DEALLOCATE PREPARE name` / `DROP PREPARE name`.
    Deallocate(String),
}

/// Reads a SQL-level PREPARE / EXECUTE / EXECUTE IMMEDIATE / DEALLOCATE. A text is only
/// taken from one single-quoted literal that is the whole operand and holds no escape (no
/// `\`, no doubled quote, whatever the sql_mode), so that its bytes are the text the server
/// runs; anything else (a variable, an expression, a literal with escapes) gives None.
pub fn sql_level_text(sql: &[u8]) -> Option<SqlLevel> {
    let toks: Vec<Token> = Lexer::new(sql)
        .filter(|t| !t.is_punct(b';'))
        .take(5)
        .collect();
    let name = |t: &Token| -> Option<String> {
        let raw = t.bytes(sql);
        let n = match t.tok {
            Tok::Word => String::from_utf8_lossy(raw).into_owned(),
            Tok::Backquoted if raw.len() >= 2 && !raw[1..raw.len() - 1].contains(&b'`') => {
                String::from_utf8_lossy(&raw[1..raw.len() - 1]).into_owned()
            }
            _ => return None,
        };
        (!n.is_empty()).then(|| n.to_lowercase())
    };
    let literal = |rest: &[Token]| -> Option<String> {
        let [t] = rest else { return None };
        let raw = t.bytes(sql);
        if t.tok != Tok::Str || raw.len() < 2 || raw[0] != b'\'' || raw[raw.len() - 1] != b'\'' {
            return None;
        }
        let inner = &raw[1..raw.len() - 1];
        if inner.contains(&b'\\') || inner.contains(&b'\'') {
            return None;
        }
        std::str::from_utf8(inner).ok().map(str::to_string)
    };
    let first = toks.first()?;
    if first.is_kw(sql, "PREPARE") {
        let n = name(toks.get(1)?)?;
        if !toks.get(2)?.is_kw(sql, "FROM") {
            return None;
        }
        return Some(SqlLevel::Prepare(n, literal(&toks[3..])));
    }
    if first.is_kw(sql, "EXECUTE") {
        let second = toks.get(1)?;
        if second.is_kw(sql, "IMMEDIATE") {
            return Some(SqlLevel::Immediate(literal(&toks[2..])));
        }
        return Some(SqlLevel::Execute(name(second)?));
    }
    if (first.is_kw(sql, "DEALLOCATE") || first.is_kw(sql, "DROP"))
        && toks.get(1)?.is_kw(sql, "PREPARE")
    {
        return Some(SqlLevel::Deallocate(name(toks.get(2)?)?));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(sql: &str) -> SetInfo {
        analyze_set(sql).unwrap_or_else(|| panic!("{sql}: not followed"))
    }

    /// The SQL-level statements that run other text, and the text qcache takes from them:
    /// only a plain literal that is the whole operand.
    #[test]
    fn sql_level_texts() {
        let some = |s: &str| Some(s.to_string());
        let rows: &[(&str, Option<SqlLevel>)] = &[
            (
                "PREPARE s FROM 'SET query_cache_type = OFF'",
                Some(SqlLevel::Prepare(
                    "s".into(),
                    some("SET query_cache_type = OFF"),
                )),
            ),
            (
                "prepare `My S` from 'SELECT 1';",
                Some(SqlLevel::Prepare("my s".into(), some("SELECT 1"))),
            ),
            (
                "PREPARE s FROM @q",
                Some(SqlLevel::Prepare("s".into(), None)),
            ),
            (
                "PREPARE s FROM 'SET a = ''x'''",
                Some(SqlLevel::Prepare("s".into(), None)),
            ),
            (
                r"PREPARE s FROM 'SET a = \'x\''",
                Some(SqlLevel::Prepare("s".into(), None)),
            ),
            (
                "PREPARE s FROM CONCAT('SET ', 'a = 1')",
                Some(SqlLevel::Prepare("s".into(), None)),
            ),
            ("EXECUTE S", Some(SqlLevel::Execute("s".into()))),
            ("EXECUTE s USING @a", Some(SqlLevel::Execute("s".into()))),
            (
                "EXECUTE IMMEDIATE 'SET query_cache_type = OFF'",
                Some(SqlLevel::Immediate(some("SET query_cache_type = OFF"))),
            ),
            ("EXECUTE IMMEDIATE @q", Some(SqlLevel::Immediate(None))),
            (
                "EXECUTE IMMEDIATE 'SET a = ?' USING 1",
                Some(SqlLevel::Immediate(None)),
            ),
            (
                "DEALLOCATE PREPARE s",
                Some(SqlLevel::Deallocate("s".into())),
            ),
            ("DROP PREPARE S", Some(SqlLevel::Deallocate("s".into()))),
            ("DROP TABLE s", None),
            ("SELECT 1", None),
        ];
        for (sql, want) in rows {
            assert_eq!(sql_level_text(sql.as_bytes()), *want, "{sql}");
        }
    }

    fn pairs(sql: &str) -> Vec<(String, String)> {
        set(sql).assignments
    }

    fn p(a: &str, b: &str) -> (String, String) {
        (a.into(), b.into())
    }

    #[test]
    fn set_statement_prefixes() {
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(statement_settings("SELECT a FROM t"), None);
        assert_eq!(statement_settings("SET sql_mode = ''"), None);
        assert_eq!(
            statement_settings("SET STATEMENT sql_select_limit = DEFAULT FOR SELECT a FROM t"),
            Some(Some(pairs(&[("sql_select_limit", "DEFAULT")])))
        );
        assert_eq!(
            statement_settings(
                "set statement a = (SELECT 1 FOR UPDATE), b = @n for \
                 SET STATEMENT c = 'x' FOR SELECT 1"
            ),
            Some(Some(pairs(&[
                ("a", "(SELECT 1 FOR UPDATE)"),
                ("b", "@n"),
                ("c", "'x'")
            ])))
        );
        assert_eq!(statement_settings("SET STATEMENT FOR SELECT 1"), Some(None));
        assert_eq!(
            statement_settings("SET STATEMENT a = 1 SELECT 1"),
            Some(None)
        );
        assert_eq!(
            statement_settings("SET STATEMENT @@global.a = 1 FOR SELECT 1"),
            Some(None)
        );
    }

    #[test]
    fn session_forms() {
        for sql in [
            "SET sql_mode = 'ANSI'",
            "SET SESSION sql_mode = 'ANSI'",
            "SET LOCAL sql_mode = 'ANSI'",
            "SET @@sql_mode = 'ANSI'",
            "SET @@session.sql_mode = 'ANSI'",
            "set @@SESSION.SQL_MODE='ANSI'",
            "SET @@local.sql_mode := 'ANSI';",
        ] {
            let s = set(sql);
            assert_eq!(s.assignments, vec![p("sql_mode", "'ANSI'")], "{sql}");
            assert!(!s.global && !s.user_vars_only, "{sql}");
        }
    }

    #[test]
    fn global_forms() {
        for sql in [
            "SET GLOBAL max_connections = 10",
            "SET @@global.max_connections = 10",
            "SET PERSIST max_connections = 10",
        ] {
            let s = set(sql);
            assert!(s.global, "{sql}");
            assert_eq!(s.assignments, vec![p("max_connections", "10")]);
        }
    }

    #[test]
    fn several_assignments_and_user_vars() {
        let s = set("SET @a = 1, @b := (SELECT 1, 2), @`c` = 'x,y'");
        assert!(s.user_vars_only);
        assert_eq!(
            s.assignments,
            vec![p("@a", "1"), p("@b", "(SELECT 1, 2)"), p("@`c`", "'x,y'")]
        );
        let s = set("SET autocommit = 0, @u = 1, time_zone = '+00:00'");
        assert!(!s.user_vars_only);
        assert_eq!(
            s.assignments,
            vec![
                p("autocommit", "0"),
                p("@u", "1"),
                p("time_zone", "'+00:00'")
            ]
        );
        let s = set("SET GLOBAL a = 1, SESSION b = 2");
        assert!(s.global);
        assert_eq!(s.assignments, vec![p("a", "1"), p("b", "2")]);
        assert_eq!(s.globals, vec![true, false]);
        let s = set("SET @@global.a = 1, b = 2, GLOBAL c = 3, d = 4, @@session.e = 5");
        assert_eq!(s.globals, vec![true, false, true, true, false]);
    }

    /// A SET that another sql_mode or client character set reads as other assignments is
    /// not followed (None: the session's settings unknown); one every reading reads alike
    /// is. (text, followed)
    #[test]
    fn every_reading_assigns_alike() {
        for (sql, followed) in [
            // NO_BACKSLASH_ESCAPES: `'x\'` ends there, and time_zone is set too.
            (r"SET @a = 'x\', time_zone = '+05:00' -- '", false),
            // MSSQL: `[x']` is a name, and time_zone is set too.
            (
                "SET @a = (SELECT [x'] FROM t), time_zone = '+05:00', @b = (SELECT 1 AS ['])",
                false,
            ),
            // latin1: `--` and 0xa0 open a comment, so sql_mode is not set there.
            ("SET time_zone = '+05:00' --\u{a0}, sql_mode = ''", false),
            // A backslash every reading cuts alike.
            (r"SET @p = 'C:\\dir', time_zone = '+05:00'", true),
            // Read without escapes `'O\'Brien'` leaves a quote open: the server refuses it.
            (r"SET @n = 'O\'Brien', time_zone = '+05:00'", true),
            // A `[` in a string is a byte in every mode.
            ("SET @j = '$[0]', time_zone = '+05:00'", true),
        ] {
            assert_eq!(analyze_set(sql).is_some(), followed, "{sql}");
        }
    }

    #[test]
    fn names_charset_transaction() {
        assert_eq!(pairs("SET NAMES utf8mb4"), vec![p("names", "utf8mb4")]);
        assert_eq!(
            pairs("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_bin'"),
            vec![p("names", "'utf8mb4' COLLATE 'utf8mb4_bin'")]
        );
        assert_eq!(
            pairs("SET CHARACTER SET latin1"),
            vec![p("character set", "latin1")]
        );
        assert_eq!(
            pairs("SET CHARSET latin1"),
            vec![p("character set", "latin1")]
        );
        assert_eq!(
            pairs("SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
            vec![p("transaction", "ISOLATION LEVEL READ COMMITTED")]
        );
        let s = set("SET SESSION TRANSACTION READ ONLY");
        assert_eq!(s.assignments, vec![p("transaction", "READ ONLY")]);
        assert!(!s.global && !s.next_transaction_only);
        assert!(set("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED").next_transaction_only);
        assert!(set("SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE").global);
    }

    #[test]
    fn query_cache_type_values() {
        for (sql, want) in [
            (
                "SET query_cache_type = ON",
                QcAssign::Value(QueryCacheType::On),
            ),
            (
                "SET query_cache_type = off",
                QcAssign::Value(QueryCacheType::Off),
            ),
            (
                "SET query_cache_type = 'DEMAND'",
                QcAssign::Value(QueryCacheType::Demand),
            ),
            (
                "SET SESSION query_cache_type = 0",
                QcAssign::Value(QueryCacheType::Off),
            ),
            (
                "SET @@session.query_cache_type = 1",
                QcAssign::Value(QueryCacheType::On),
            ),
            (
                "SET @@query_cache_type = \"2\"",
                QcAssign::Value(QueryCacheType::Demand),
            ),
            ("SET query_cache_type = DEFAULT", QcAssign::Default),
            ("SET QUERY_CACHE_TYPE=default", QcAssign::Default),
        ] {
            assert_eq!(set(sql).query_cache_type, Some(want), "{sql}");
        }
        // Global scope is not the session's setting.
        let s = set("SET GLOBAL query_cache_type = ON");
        assert_eq!(s.query_cache_type, None);
        assert!(s.global);
        // A value qcache cannot read: it cannot follow the session.
        assert_eq!(analyze_set("SET query_cache_type = @v"), None);
        assert_eq!(analyze_set("SET query_cache_type = 'DEFAULT'"), None);
        assert_eq!(analyze_set("SET query_cache_type = 7"), None);
        let s = set("SET query_cache_type = OFF, sql_mode = ''");
        assert_eq!(
            s.query_cache_type,
            Some(QcAssign::Value(QueryCacheType::Off))
        );
        assert_eq!(s.assignments.len(), 2);
    }

    #[test]
    fn stored_functions_in_values_may_write() {
        assert!(set("SET @x = my_func(1)").may_write);
        assert!(set("SET @x = (SELECT NEXTVAL(s))").may_write);
        // sql_mode=ORACLE spellings.
        assert!(set("SET @x = s.nextval").may_write);
        assert!(set("SET @x = db.`s`.`NEXTVAL` + 1").may_write);
        assert!(!set("SET @x = 'a.nextval'").may_write);
        assert!(!set("SET sql_mode = CONCAT(@@sql_mode, ',ANSI')").may_write);
        assert!(!set("SET NAMES utf8mb4").may_write);
    }

    #[test]
    fn not_followed() {
        assert_eq!(
            analyze_set("SET STATEMENT max_statement_time = 1 FOR SELECT 1"),
            None
        );
        assert_eq!(analyze_set("SET a = 1; SELECT 1"), None);
        assert_eq!(analyze_set("SET"), None);
        assert_eq!(analyze_set("SET a"), None);
        assert_eq!(analyze_set("SET a ="), None);
        assert_eq!(analyze_set("SELECT 1"), None);
        assert_eq!(analyze_set("SET 'x' = 1"), None);
        assert!(analyze_set("SET PASSWORD = 'secret'").is_some_and(|s| s.assignments.is_empty()));
        assert_eq!(pairs("SET ROLE r1"), vec![p("role", "r1")]);
    }

    #[test]
    fn use_forms() {
        assert_eq!(use_schema("USE shop"), Some("shop".into()));
        assert_eq!(use_schema("use Shop;"), Some("Shop".into()));
        assert_eq!(use_schema("USE `my db`"), Some("my db".into()));
        assert_eq!(use_schema("USE `a``b`"), Some("a`b".into()));
        assert_eq!(use_schema("/* c */ USE d"), Some("d".into()));
        assert_eq!(use_schema("USE"), None);
        assert_eq!(use_schema("USE a b"), None);
        assert_eq!(use_schema("USE a; SELECT 1"), None);
        assert_eq!(use_schema("SELECT 1"), None);
        assert_eq!(use_schema("USE ``"), None);
        // SET STATEMENT … FOR runs the USE (MariaDB).
        assert_eq!(
            use_schema("SET STATEMENT sql_mode = '' FOR USE d"),
            Some("d".into())
        );
        assert_eq!(use_schema("SET STATEMENT sql_mode = ''"), None);
    }

    /// Where a value ends: at the first comma outside parentheses, or at the end.
    #[test]
    fn value_ends_at_a_top_level_comma() {
        #[rustfmt::skip]
        let rows: &[(&str, &str)] = &[
            // (statement, the first assignment's value)
            ("SET a = 1, b = 2", "1"),
            ("SET a = f(1, 2), b = 2", "f(1, 2)"),
            ("SET a = ((1, 2)), b = 3", "((1, 2))"),
            ("SET a = 'x,y', b = 2", "'x,y'"),
            ("SET a = 1 + 2", "1 + 2"),
            ("SET a = (1))", "(1))"), // an unbalanced `)` does not end it
        ];
        for (sql, want) in rows {
            let info = analyze_set(sql).unwrap_or_else(|| panic!("{sql}: not followed"));
            assert_eq!(info.assignments[0].1, *want, "{sql}");
        }
    }
}
