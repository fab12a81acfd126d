//! Which temporary tables stored code on the server may create: the catalog's answer,
//! worked out from routine and trigger bodies without a server.
//!
//! A temporary table shadows the base table of the same name for the rest of its session.
//! qcache follows the temporary tables a session creates with its own statements
//! (`policy::classify::track_temporary`), but a stored function or a trigger may create one
//! too (`CREATE TEMPORARY TABLE` is allowed in both), and no statement text shows it. A
//! procedure may as well, but it runs only through CALL (after which qcache no longer
//! follows the session) or from a function or trigger that calls it.
//!
//! So the catalog names them: every `CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT EXISTS]
//! [db.]name` in the body of a function, a trigger, or a procedure one of those calls (by
//! `CALL name`, or under ORACLE mode by a bare name; schema ignored, transitively), in the
//! schema the body runs in unless the statement names one. Bodies are split by the
//! project's lexer as the server splits them under the sql_mode they were created with
//! (strings and comments skipped, `"…"` a name under ANSI_QUOTES, NO_BACKSLASH_ESCAPES
//! deciding where strings end), and under every sql_mode when it is unknown (DDL seen
//! before the reload). A session that runs stored code counts those names as its
//! temporary tables (never served, never stored, as for one it created itself). It errs
//! towards "any name": a `TEMPORARY` token where no such name can be read, or a body the
//! catalog's account cannot read, makes the session's temporary tables unknown; a `CALL`
//! whose procedure cannot be read calls them all. Dynamic SQL, the only way to hide a
//! name, is refused by the server inside functions and triggers and anything they call.

use std::collections::HashSet;

use crate::analysis::lexer::{Lexer, Tok};

/// One row of information_schema.ROUTINES.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routine {
    /// ROUTINE_SCHEMA, lower-cased: where its statements run.
    pub schema: String,
    /// ROUTINE_NAME, lower-cased (routine names are case-insensitive).
    pub name: String,
    /// A PROCEDURE (reached by CALL) rather than a FUNCTION (reached by a call in an
    /// expression).
    pub procedure: bool,
    /// ROUTINE_DEFINITION; None when the catalog's account may not read it.
    pub body: Option<String>,
    /// SQL_MODE: the mode the body was created, and is read, under (where strings end,
    /// what `"…"` is, whether a bare name calls a procedure). None when unknown: every
    /// reading counts.
    pub sql_mode: Option<String>,
}

/// One trigger: (TRIGGER_SCHEMA, ACTION_STATEMENT, SQL_MODE if known), as [`Routine`].
pub type Trigger<'a> = (&'a str, &'a str, Option<&'a str>);

/// The temporary tables stored code may create when a function or trigger runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Temporaries {
    /// These (schema, name), lower-cased; usually none.
    #[default]
    None,
    Named(Vec<(String, String)>),
    /// Some that qcache cannot name.
    Any,
}

impl Temporaries {
    /// Both sets.
    pub fn union(&self, other: &Temporaries) -> Temporaries {
        match (self, other) {
            (Temporaries::Any, _) | (_, Temporaries::Any) => Temporaries::Any,
            (Temporaries::None, x) | (x, Temporaries::None) => x.clone(),
            (Temporaries::Named(a), Temporaries::Named(b)) => {
                let mut all = a.clone();
                all.extend(b.iter().filter(|n| !a.contains(n)).cloned());
                Temporaries::Named(all)
            }
        }
    }
}

/// What the functions and triggers on a server may create, with the procedures they call.
pub fn temporaries<'a>(
    routines: &[Routine],
    triggers: impl IntoIterator<Item = Trigger<'a>>,
) -> Temporaries {
    let bodies: Vec<Option<Code>> = routines
        .iter()
        .map(|r| {
            r.body
                .as_deref()
                .map(|b| Code::read(b, r.sql_mode.as_deref()))
        })
        .collect();
    let triggers: Vec<(String, Code)> = triggers
        .into_iter()
        .map(|(s, b, m)| (s.to_lowercase(), Code::read(b, m)))
        .collect();
    // What runs: every function and trigger, and the procedures they call, transitively.
    let mut runs: Vec<bool> = routines.iter().map(|r| !r.procedure).collect();
    let mut every = triggers.iter().any(|(_, c)| c.calls_every);
    let mut called: HashSet<String> = triggers
        .iter()
        .flat_map(|(_, c)| c.calls.iter().cloned())
        .collect();
    loop {
        let mut grew = false;
        for (i, r) in routines.iter().enumerate() {
            if !runs[i] && (every || called.contains(&r.name)) {
                runs[i] = true;
                grew = true;
            }
            if runs[i] {
                for c in bodies[i].iter() {
                    grew |= c.calls_every && !every;
                    every |= c.calls_every;
                    for n in &c.calls {
                        grew |= called.insert(n.clone());
                    }
                }
            }
        }
        if !grew {
            break;
        }
    }
    let mut named = Vec::new();
    let mut add = |schema: &str, code: &Code| -> bool {
        let Some(found) = &code.created else {
            return false;
        };
        for (s, n) in found {
            let q = (s.clone().unwrap_or_else(|| schema.to_string()), n.clone());
            if !named.contains(&q) {
                named.push(q);
            }
        }
        true
    };
    for (i, r) in routines.iter().enumerate().filter(|(i, _)| runs[*i]) {
        match &bodies[i] {
            Some(c) if add(&r.schema, c) => {}
            _ => return Temporaries::Any,
        }
    }
    for (schema, c) in &triggers {
        if !add(schema, c) {
            return Temporaries::Any;
        }
    }
    if named.is_empty() {
        Temporaries::None
    } else {
        Temporaries::Named(named)
    }
}

/// What the code DDL statements `ddl` (each `(statement, schema it ran in)`, in the order
/// seen: before one is sent through qcache, or when the binlog tail reads it) add to
/// [`temporaries`] of the `known` routines and triggers, judged as the reload after them
/// will judge them: a CREATE of a FUNCTION, PROCEDURE, TRIGGER or PACKAGE is judged with
/// everything known (a new procedure may be what an existing trigger calls). Anything else
/// (tables, views, events, which run in a session of their own) adds none; a CREATE whose
/// kind or name cannot be read adds [`Temporaries::Any`]. The statements' sql_mode is not
/// known: each is read under every one. So that code a session runs before the catalog's
/// reload is judged with it.
pub fn ddl_temporaries<'a>(
    ddl: &[(&str, &str)],
    known: &[Routine],
    triggers: impl IntoIterator<Item = Trigger<'a>>,
) -> Temporaries {
    let mut routines = known.to_vec();
    let mut new_triggers: Vec<(String, &str)> = Vec::new();
    for &(sql, schema) in ddl {
        let header = match ddl_header(sql) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(()) => return Temporaries::Any,
        };
        let schema = header.schema.unwrap_or_else(|| schema.to_lowercase());
        match header.kind {
            CodeKind::Trigger => new_triggers.push((schema, sql)),
            CodeKind::Function | CodeKind::Procedure | CodeKind::Package => {
                let procedure = header.kind == CodeKind::Procedure;
                // CREATE OR REPLACE replaces it (functions and procedures have a name each).
                routines.retain(|r| {
                    !(r.name == header.name && r.schema == schema && r.procedure == procedure)
                });
                routines.push(Routine {
                    schema,
                    name: header.name,
                    procedure,
                    body: Some(sql.to_string()),
                    sql_mode: None,
                });
            }
        }
    }
    let mut all: Vec<Trigger> = Vec::new();
    for t in triggers {
        all.push(t);
    }
    for (s, b) in &new_triggers {
        all.push((s.as_str(), b, None));
    }
    temporaries(&routines, all)
}

/// What stored code may do to the session's `query_cache_type` (`policy::qct`): whether a
/// body of `routines`, of `triggers` or of code DDL seen since the load (`ddl`) names the
/// variable or cannot be read (`named`), and whether a procedure's may run dynamic SQL,
/// whose text no body shows (`dynamic`; refused in functions and triggers). By the raw
/// text: a comment naming it counts too (fail closed).
pub fn sets_qct<'a>(
    routines: &[Routine],
    triggers: impl IntoIterator<Item = &'a str>,
    ddl: impl IntoIterator<Item = &'a str>,
) -> (bool, bool) {
    use crate::analysis::contains_ci;
    let names = |b: &str| contains_ci(b.as_bytes(), b"query_cache_type");
    let dynamic = |b: &str| crate::policy::qct::text_may_set(b.as_bytes());
    let mut named = false;
    let mut dyn_sql = false;
    for r in routines {
        match r.body.as_deref() {
            None => return (true, true),
            Some(b) => {
                named |= names(b);
                dyn_sql |= r.procedure && dynamic(b);
            }
        }
    }
    named |= triggers.into_iter().any(names);
    for d in ddl {
        named |= names(d);
        dyn_sql |= dynamic(d);
    }
    (named, dyn_sql)
}

/// Whether a DDL statement may create code ([`ddl_temporaries`] judges it): a CREATE of a
/// function, procedure, trigger or package, or one whose kind qcache cannot read.
pub fn creates_code(sql: &str) -> bool {
    !matches!(ddl_header(sql), Ok(None))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodeKind {
    Function,
    Procedure,
    Trigger,
    Package,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    kind: CodeKind,
    /// Named with the object (`db.name`), lower-cased.
    schema: Option<String>,
    name: String,
}

/// What a DDL statement creates, when it is code: Ok(None) when it is no CREATE of code,
/// Err when it is a CREATE whose kind or name some reading (sql_mode) cannot read, or
/// readings disagree about.
fn ddl_header(sql: &str) -> Result<Option<Header>, ()> {
    let mut seen = None;
    for mode in Mode::every() {
        let one = header_in(&words(sql, mode))?;
        if seen.get_or_insert_with(|| one.clone()) != &one {
            return Err(());
        }
    }
    Ok(seen.flatten())
}

fn header_in(w: &[W]) -> Result<Option<Header>, ()> {
    let at = |i: usize| w.get(i);
    let kw = |i: usize, k: &str| at(i).is_some_and(|t| t.kw(k));
    // After comments; executable ones are code (`/*!50003 CREATE*/ /*!50017 DEFINER=…*/`).
    if !kw(0, "create") {
        return Ok(None);
    }
    let mut i = 1;
    if kw(i, "or") && kw(i + 1, "replace") {
        i += 2;
    }
    loop {
        if (kw(i, "algorithm") || kw(i, "definer")) && at(i + 1).is_some_and(|t| t.is_punct(b'=')) {
            i += 2;
            if kw(i, "current_user") {
                i += 1;
                if at(i).is_some_and(|t| t.is_punct(b'('))
                    && at(i + 1).is_some_and(|t| t.is_punct(b')'))
                {
                    i += 2;
                }
            } else {
                // A user (`name`, 'name', `name`@`host`, 'name'@'host') or an algorithm.
                match at(i).map(|t| t.tok) {
                    Some(Tok::Word | Tok::Backquoted | Tok::Str) => i += 1,
                    _ => return Err(()),
                }
                if at(i).is_some_and(|t| t.tok == Tok::Var) {
                    i += 1;
                }
            }
        } else if kw(i, "sql")
            && kw(i + 1, "security")
            && at(i + 2).is_some_and(|t| t.tok == Tok::Word)
        {
            i += 3;
        } else if kw(i, "aggregate") {
            i += 1;
        } else {
            break;
        }
    }
    let kind = match at(i)
        .filter(|t| t.tok == Tok::Word)
        .map(|t| t.text.as_str())
    {
        Some("function") => CodeKind::Function,
        Some("procedure") => CodeKind::Procedure,
        Some("trigger") => CodeKind::Trigger,
        Some("package") => CodeKind::Package,
        // What runs in no session that ran a function or trigger: none of its code.
        Some(
            "table" | "temporary" | "view" | "event" | "index" | "unique" | "fulltext" | "spatial"
            | "database" | "schema" | "user" | "role" | "server" | "sequence" | "tablespace"
            | "logfile" | "resource" | "undo",
        ) => return Ok(None),
        _ => return Err(()),
    };
    i += 1;
    if kind == CodeKind::Package && kw(i, "body") {
        i += 1;
    }
    if kw(i, "if") && kw(i + 1, "not") && kw(i + 2, "exists") {
        i += 3;
    }
    let (schema, name) = qualified(w, i).ok_or(())?;
    Ok(Some(Header { kind, schema, name }))
}

/// `[schema.]name` at `i`, or None when no name stands there.
fn qualified(w: &[W], i: usize) -> Option<(Option<String>, String)> {
    let first = w.get(i)?.name()?;
    if w.get(i + 1).is_some_and(|t| t.is_punct(b'.')) {
        Some((Some(first.to_string()), w.get(i + 2)?.name()?.to_string()))
    } else {
        Some((None, first.to_string()))
    }
}

/// What one body does, under every reading its sql_mode allows.
#[derive(Debug, Default)]
struct Code {
    /// The procedures it calls, by name.
    calls: HashSet<String>,
    /// It may call any procedure (a CALL qcache cannot read).
    calls_every: bool,
    /// The temporary tables it creates, `(schema if named, name)`; None when it has a
    /// `TEMPORARY` qcache cannot read as one.
    created: Option<Vec<(Option<String>, String)>>,
}

impl Code {
    fn read(body: &str, sql_mode: Option<&str>) -> Code {
        let modes = match sql_mode {
            Some(m) => vec![Mode::of(m)],
            None => Mode::every().to_vec(),
        };
        let mut all = Code {
            created: Some(Vec::new()),
            ..Code::default()
        };
        for mode in modes {
            let w = words(body, mode);
            calls(&w, mode, &mut all);
            match (created(&w), all.created.as_mut()) {
                (Some(found), Some(out)) => out.extend(found),
                _ => all.created = None,
            }
        }
        all
    }
}

/// The sql_mode flags that change how a body reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mode {
    /// `"…"` is an identifier.
    ansi_quotes: bool,
    /// `\` escapes nothing in a string.
    no_backslash_escapes: bool,
    /// A bare `name;` or `name(…);` statement calls a procedure (MariaDB's ORACLE mode).
    oracle: bool,
    /// `[…]` is a name (MariaDB's MSSQL mode): `[x']` opens no string.
    brackets: bool,
}

impl Mode {
    /// The flags of a SQL_MODE value as information_schema shows it (combination modes
    /// expanded; the combinations that imply ANSI_QUOTES count too, in case they are not).
    fn of(sql_mode: &str) -> Mode {
        let has = |f: &str| {
            sql_mode
                .split(',')
                .any(|m| m.trim().eq_ignore_ascii_case(f))
        };
        let oracle = has("ORACLE");
        Mode {
            ansi_quotes: oracle
                || ["ANSI_QUOTES", "ANSI", "DB2", "MAXDB", "MSSQL", "POSTGRESQL"]
                    .iter()
                    .any(|f| has(f)),
            no_backslash_escapes: has("NO_BACKSLASH_ESCAPES"),
            oracle,
            brackets: has("MSSQL"),
        }
    }

    /// Every reading of a text whose sql_mode is unknown.
    fn every() -> [Mode; 8] {
        let m = |ansi_quotes, no_backslash_escapes, brackets| Mode {
            ansi_quotes,
            no_backslash_escapes,
            oracle: true,
            brackets,
        };
        [
            m(false, false, false),
            m(true, false, false),
            m(false, true, false),
            m(true, true, false),
            m(false, false, true),
            m(true, false, true),
            m(false, true, true),
            m(true, true, true),
        ]
    }
}

/// One token of a body: its kind (a `"…"` identifier is [`Tok::Backquoted`], a `"…"`
/// string [`Tok::Str`]) and its text, lower-cased, a quoted identifier's without quotes.
#[derive(Debug)]
struct W {
    tok: Tok,
    text: String,
}

impl W {
    fn kw(&self, k: &str) -> bool {
        self.tok == Tok::Word && self.text == k
    }

    fn is_punct(&self, c: u8) -> bool {
        self.tok == Tok::Punct(c)
    }

    /// The identifier it is, plain or quoted.
    fn name(&self) -> Option<&str> {
        matches!(self.tok, Tok::Word | Tok::Backquoted).then_some(self.text.as_str())
    }
}

/// A body as the server splits it under `mode`: comments dropped (executable ones are
/// code), strings kept whole.
fn words(body: &str, mode: Mode) -> Vec<W> {
    let sql = body.as_bytes();
    Lexer::with_modes(sql, mode.ansi_quotes, mode.no_backslash_escapes)
        .with_brackets(mode.brackets)
        .map(|t| {
            let b = t.bytes(sql);
            let quoted = |q: u8| -> Tok {
                // An identifier left open runs to the end of a text the server refused.
                if b.len() >= 2 && b[b.len() - 1] == q {
                    Tok::Backquoted
                } else {
                    Tok::Str
                }
            };
            let (tok, text) = match t.tok {
                Tok::Backquoted => (quoted(b'`'), unquote(b, b'`')),
                Tok::DoubleQuoted if mode.ansi_quotes => (quoted(b'"'), unquote(b, b'"')),
                Tok::DoubleQuoted => (Tok::Str, String::new()),
                Tok::Bracketed => (
                    quoted(b']'),
                    String::from_utf8_lossy(&crate::analysis::lexer::bracketed_name(b))
                        .to_lowercase(),
                ),
                Tok::Word => (Tok::Word, String::from_utf8_lossy(b).to_lowercase()),
                other => (other, String::new()),
            };
            W { tok, text }
        })
        .collect()
}

/// A quoted identifier's name: without its quotes, a doubled quote standing for one.
fn unquote(b: &[u8], q: u8) -> String {
    let inner = b.get(1..b.len().saturating_sub(1)).unwrap_or(&[]);
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        out.push(inner[i]);
        i += if inner[i] == q { 2 } else { 1 };
    }
    String::from_utf8_lossy(&out).to_lowercase()
}

/// The procedures a body calls (`CALL [db.]name`), by name; one whose name cannot be read
/// may be any. Under ORACLE a bare name is a call too: every identifier counts.
fn calls(w: &[W], mode: Mode, out: &mut Code) {
    for (i, t) in w.iter().enumerate() {
        if mode.oracle && t.name().is_some() {
            out.calls.insert(t.text.clone());
        }
        if t.kw("call") {
            match qualified(w, i + 1) {
                Some((_, name)) => {
                    out.calls.insert(name);
                }
                None => out.calls_every = true,
            }
        }
    }
}

/// The temporary tables a body creates (`CREATE [OR REPLACE] TEMPORARY TABLE|SEQUENCE [IF NOT
/// EXISTS] [db.]name`), `(schema if named, name)`; None when it has a `TEMPORARY` anywhere
/// else, or where no name can be read.
fn created(w: &[W]) -> Option<Vec<(Option<String>, String)>> {
    let kw = |i: usize, k: &str| w.get(i).is_some_and(|t| t.kw(k));
    let mut out = Vec::new();
    for (i, t) in w.iter().enumerate() {
        if !t.kw("temporary") {
            continue;
        }
        let create = (i >= 1 && kw(i - 1, "create"))
            || (i >= 3 && kw(i - 1, "replace") && kw(i - 2, "or") && kw(i - 3, "create"));
        // A sequence is a table: `CREATE TEMPORARY SEQUENCE s` shadows `s` as one would.
        if !create || !(kw(i + 1, "table") || kw(i + 1, "sequence")) {
            return None;
        }
        let mut j = i + 2;
        if kw(j, "if") {
            if !(kw(j + 1, "not") && kw(j + 2, "exists")) {
                return None;
            }
            j += 3;
        }
        out.push(qualified(w, j)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function created under the default sql_mode.
    fn f(name: &str, body: &str) -> Routine {
        Routine {
            schema: "db".into(),
            name: name.into(),
            procedure: false,
            body: Some(body.into()),
            sql_mode: Some("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION".into()),
        }
    }

    fn p(name: &str, body: &str) -> Routine {
        Routine {
            procedure: true,
            ..f(name, body)
        }
    }

    /// `r` as created under `sql_mode` (None: not known).
    fn under(sql_mode: Option<&str>, r: Routine) -> Routine {
        Routine {
            sql_mode: sql_mode.map(str::to_string),
            ..r
        }
    }

    fn named(list: &[(&str, &str)]) -> Temporaries {
        Temporaries::Named(
            list.iter()
                .map(|(s, n)| (s.to_string(), n.to_string()))
                .collect(),
        )
    }

    const MK: &str = "BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT); RETURN 1; END";
    /// As information_schema shows the modes a routine was created under.
    const ANSI: &str = "PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI";
    const ORACLE: &str = "PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ORACLE,NO_KEY_OPTIONS,NO_TABLE_OPTIONS,NO_FIELD_OPTIONS,NO_AUTO_CREATE_USER,SIMULTANEOUS_ASSIGNMENT";
    const NBE: &str = "NO_BACKSLASH_ESCAPES";
    const MSSQL: &str = "PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,MSSQL,NO_KEY_OPTIONS,NO_TABLE_OPTIONS,NO_FIELD_OPTIONS";

    #[test]
    fn which_temporary_tables_code_may_create() {
        let plain = "BEGIN UPDATE side SET n = n + 1; RETURN 1; END";
        let unreadable = Routine {
            body: None,
            ..f("hidden", "")
        };
        let none = None;
        type Case<'a> = (&'a str, Vec<Routine>, Vec<Trigger<'a>>, Temporaries);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("no code at all", vec![], vec![], Temporaries::None),
            ("functions that create none", vec![f("a", plain)], vec![], Temporaries::None),
            ("a function that creates one, in its schema", vec![f("mk", MK)], vec![], named(&[("db", "t")])),
            ("in any case, named elsewhere", vec![f("mk", "begin create Temporary table `Other`.`T2` (i int); return 1; end")], vec![], named(&[("other", "t2")])),
            ("with OR REPLACE", vec![f("mk", "BEGIN CREATE OR REPLACE TEMPORARY TABLE x (i INT); RETURN 1; END")], vec![], named(&[("db", "x")])),
            ("two, once each", vec![f("a", MK), f("b", MK)], vec![], named(&[("db", "t")])),
            ("a procedure alone: only CALL reaches it", vec![p("tmp", MK)], vec![], Temporaries::None),
            ("a function that calls it", vec![p("tmp", MK), f("a", "BEGIN CALL tmp(); RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("qualified and quoted", vec![p("tmp", MK), f("a", "BEGIN CALL `db`.`Tmp`(); RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("through two procedures", vec![p("inner", MK), p("outer", "BEGIN CALL inner(); END"), f("a", "BEGIN CALL outer(); RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("a procedure's word is not a call", vec![p("diagnostics", MK), f("a", "BEGIN GET DIAGNOSTICS CONDITION 1 @x = MESSAGE_TEXT; RETURN 1; END")], vec![], Temporaries::None),
            ("a function qcache cannot read", vec![unreadable.clone()], vec![], Temporaries::Any),
            ("a called procedure qcache cannot read", vec![Routine { procedure: true, ..unreadable.clone() }, f("a", "BEGIN CALL hidden(); RETURN 1; END")], vec![], Temporaries::Any),
            ("an uncalled procedure qcache cannot read", vec![Routine { procedure: true, ..unreadable.clone() }], vec![], Temporaries::None),
            ("the word where no name can be read", vec![f("a", "BEGIN DECLARE temporary INT; RETURN 1; END")], vec![], Temporaries::Any),
            ("the word in a string or a comment is neither", vec![f("a", "BEGIN SET @s = 'temporary'; /* temporary */ RETURN 1; END")], vec![], Temporaries::None),
            ("a backquote in a string hides nothing", vec![f("mk", "BEGIN DECLARE s VARCHAR(10) DEFAULT '`'; CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT); SET s = '`'; RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("a temporary sequence", vec![f("mk", "BEGIN CREATE TEMPORARY SEQUENCE IF NOT EXISTS t; RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("a comment before the name", vec![f("mk", "BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS /* scratch */ t (id INT); RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("a comment after CALL", vec![p("mkp", MK), f("a", "BEGIN CALL /* scratch */ mkp(); RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("CALL and no name: any procedure", vec![p("mkp", MK), f("a", "BEGIN CALL 'mkp'; RETURN 1; END")], vec![], named(&[("db", "t")])),
            ("a name in double quotes under ANSI_QUOTES", vec![under(Some(ANSI), f("mk", r#"BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS "T" (id INT); RETURN 1; END"#))], vec![], named(&[("db", "t")])),
            ("a double-quoted name under an unknown mode", vec![under(None, f("mk", r#"BEGIN CREATE TEMPORARY TABLE "t" (id INT); RETURN 1; END"#))], vec![], Temporaries::Any),
            ("a backslash ends no string under NO_BACKSLASH_ESCAPES", vec![under(Some(NBE), f("mk", r"BEGIN SET @s = 'a\'; CREATE TEMPORARY TABLE t (id INT); SET @s = '\'; RETURN 1; END"))], vec![], named(&[("db", "t")])),
            ("the same text under the default mode hides nothing either", vec![f("mk", r"BEGIN SET @s = 'a\'; CREATE TEMPORARY TABLE t (id INT); SET @s = '\'; RETURN 1; END")], vec![], Temporaries::None),
            ("a non-ASCII unquoted name, whole", vec![f("mk", "BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS t€ (id INT); RETURN 1; END")], vec![], named(&[("db", "t€")])),
            ("a quoted keyword is a name", vec![f("mk", "BEGIN CREATE TEMPORARY TABLE `if` (id INT); RETURN 1; END")], vec![], named(&[("db", "if")])),
            ("a quoted keyword after IF NOT EXISTS", vec![f("mk", "BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS `if` (id INT); RETURN 1; END")], vec![], named(&[("db", "if")])),
            ("IF with no NOT EXISTS", vec![f("mk", "BEGIN CREATE TEMPORARY TABLE if (id INT); RETURN 1; END")], vec![], Temporaries::Any),
            ("a number is no name", vec![f("mk", "BEGIN CREATE TEMPORARY TABLE 12 (id INT); RETURN 1; END")], vec![], Temporaries::Any),
            ("a bare call under ORACLE", vec![under(Some(ORACLE), p("mkp", MK)), under(Some(ORACLE), f("f", "AS BEGIN mkp; RETURN 1; END"))], vec![], named(&[("db", "t")])),
            ("a bare name is no call outside ORACLE", vec![p("mkp", MK), f("f", "BEGIN DECLARE mkp INT; SET mkp = 1; RETURN mkp; END")], vec![], Temporaries::None),
            ("a quote in a bracket opens no string under MSSQL", vec![under(Some(MSSQL), f("mk", "BEGIN SET @s = [x']; CREATE TEMPORARY TABLE t (id INT); SET @s = [']; RETURN 1; END"))], vec![], named(&[("db", "t")])),
            ("a bracketed name under MSSQL", vec![under(Some(MSSQL), f("mk", "BEGIN CREATE TEMPORARY TABLE [T]]x] (id INT); RETURN 1; END"))], vec![], named(&[("db", "t]x")])),
            ("a bracket under an unknown mode", vec![under(None, f("mk", "BEGIN SET @s = [x']; CREATE TEMPORARY TABLE t (id INT); SET @s = [']; RETURN 1; END"))], vec![], named(&[("db", "t")])),
            ("a trigger's bracket under MSSQL", vec![], vec![("tdb", "BEGIN SET @s = [x']; CREATE TEMPORARY TABLE x (i INT); SET @s = ['];END", Some(MSSQL))], named(&[("tdb", "x")])),
            ("a trigger that creates one", vec![], vec![("tdb", "BEGIN CREATE TEMPORARY TABLE x (i INT); END", none)], named(&[("tdb", "x")])),
            ("a trigger that calls a procedure that does", vec![p("tmp", MK)], vec![("tdb", "CALL tmp()", Some(""))], named(&[("db", "t")])),
            ("a trigger that creates none", vec![p("tmp", MK)], vec![("tdb", "UPDATE side SET n = n + 1", Some(""))], Temporaries::None),
            ("a trigger's bare call under ORACLE", vec![p("tmp", MK)], vec![("tdb", "BEGIN tmp; END", Some(ORACLE))], named(&[("db", "t")])),
            ("a trigger's name in double quotes under ANSI_QUOTES", vec![], vec![("tdb", r#"CREATE TEMPORARY TABLE "x" (i INT)"#, Some(ANSI))], named(&[("tdb", "x")])),
        ];
        for (what, routines, triggers, want) in cases {
            assert_eq!(temporaries(&routines, triggers), want, "{what}");
        }
    }

    #[test]
    fn what_ddl_adds() {
        let known = vec![
            f("calls_p", "BEGIN CALL p(); RETURN 1; END"),
            p("old", MK),
            f("plain", "RETURN 1"),
        ];
        let trigger: Vec<Trigger> = vec![("db", "CALL mkp()", Some(""))];
        let none: Vec<Trigger> = vec![];
        #[rustfmt::skip]
        let cases = [
            ("a function that creates one", "CREATE FUNCTION mk() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN CREATE TEMPORARY TABLE t (i INT); RETURN 1; END", &none, named(&[("cur", "t")])),
            ("with OR REPLACE, a definer and a schema", "CREATE OR REPLACE DEFINER=`root`@`localhost` FUNCTION d2.mk() RETURNS INT BEGIN CREATE TEMPORARY TABLE t (i INT); RETURN 1; END", &none, named(&[("d2", "t")])),
            ("a function that creates none", "CREATE FUNCTION g() RETURNS INT RETURN 2", &none, Temporaries::None),
            ("a function that calls a known procedure that does", "CREATE FUNCTION g() RETURNS INT BEGIN CALL old(); RETURN 1; END", &none, named(&[("db", "t")])),
            ("a trigger that creates one", "CREATE TRIGGER tr AFTER INSERT ON log FOR EACH ROW CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT)", &none, named(&[("cur", "t")])),
            ("a trigger that creates none", "CREATE TRIGGER tr AFTER INSERT ON log FOR EACH ROW UPDATE side SET n = n + 1", &none, Temporaries::None),
            ("a procedure a known function calls", "CREATE PROCEDURE p() BEGIN CREATE TEMPORARY TABLE t (i INT); END", &none, named(&[("cur", "t")])),
            ("a procedure no code calls", "CREATE PROCEDURE lonely() BEGIN CREATE TEMPORARY TABLE t (i INT); END", &none, Temporaries::None),
            ("a procedure a known trigger calls", "CREATE PROCEDURE mkp() MODIFIES SQL DATA BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT); END", &trigger, named(&[("cur", "t")])),
            ("replacing a routine with one that creates none", "CREATE OR REPLACE PROCEDURE db.old() BEGIN END", &none, Temporaries::None),
            ("a table", "CREATE TABLE temporary_things (i INT)", &none, Temporaries::None),
            ("a temporary table", "CREATE TEMPORARY TABLE t (i INT)", &none, Temporaries::None),
            ("a view", "CREATE VIEW v AS SELECT plain() AS x", &none, Temporaries::None),
            ("a view with its options", "CREATE OR REPLACE ALGORITHM=MERGE DEFINER='root'@'%' SQL SECURITY INVOKER VIEW v AS SELECT 1", &none, Temporaries::None),
            ("an event runs in its own session", "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO CREATE TEMPORARY TABLE t (i INT)", &none, Temporaries::None),
            ("not a CREATE", "DROP FUNCTION mk", &none, Temporaries::None),
            ("as mysqldump writes a trigger", "/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`%`*/ /*!50003 TRIGGER tr AFTER INSERT ON log FOR EACH ROW CREATE TEMPORARY TABLE t (i INT) */", &none, named(&[("cur", "t")])),
            ("a comment that says table before FUNCTION", "CREATE /* table */ FUNCTION mk() RETURNS INT BEGIN CREATE TEMPORARY TABLE t (i INT); RETURN 1; END", &none, named(&[("cur", "t")])),
            ("a kind qcache cannot read", "CREATE DEFINER = 'a' 'b' FUNCTION mk() RETURNS INT RETURN 1", &none, Temporaries::Any),
            ("a name qcache cannot read", "CREATE FUNCTION 'mk'() RETURNS INT RETURN 1", &none, Temporaries::Any),
            ("a double-quoted name, mode unknown", r#"CREATE FUNCTION "mk"() RETURNS INT RETURN 1"#, &none, Temporaries::Any),
            ("a bare call, mode unknown (ORACLE)", "CREATE FUNCTION f RETURN INT AS BEGIN old; RETURN 1; END", &none, named(&[("db", "t")])),
        ];
        for (what, sql, triggers, want) in cases {
            let got = ddl_temporaries(&[(sql, "cur")], &known, triggers.iter().copied());
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn ddl_judged_with_the_ddl_before_it() {
        // A trigger created elsewhere calls a procedure; the procedure comes next, before
        // any reload read the trigger.
        let ddl = [
            (
                "CREATE TRIGGER tr AFTER INSERT ON log FOR EACH ROW CALL mkp()",
                "cur",
            ),
            (
                "CREATE PROCEDURE mkp() BEGIN CREATE TEMPORARY TABLE t (i INT); END",
                "cur",
            ),
        ];
        assert_eq!(ddl_temporaries(&ddl, &[], []), named(&[("cur", "t")]));
        assert_eq!(ddl_temporaries(&ddl[1..], &[], []), Temporaries::None);
    }

    #[test]
    fn unions() {
        let a = named(&[("db", "t")]);
        assert_eq!(a.union(&Temporaries::None), a);
        assert_eq!(Temporaries::None.union(&a), a);
        assert_eq!(a.union(&Temporaries::Any), Temporaries::Any);
        assert_eq!(
            a.union(&named(&[("db", "t"), ("db", "u")])),
            named(&[("db", "t"), ("db", "u")])
        );
    }
}
