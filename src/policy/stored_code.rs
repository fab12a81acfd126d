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
//! So the catalog names them: every `CREATE TEMPORARY TABLE [IF NOT EXISTS] [db.]name` in
//! the body of a function, a trigger, or a procedure one of those calls (by name, schema
//! ignored, transitively), in the schema the body runs in unless the statement names one.
//! A session that runs stored code counts those names as its temporary tables (never
//! served, never stored, as for one it created itself). It errs towards "any name": a body
//! that mentions `TEMPORARY` (in a statement, string or comment) where no such name can
//! be read, or a body the catalog's account cannot read, makes the session's temporary
//! tables unknown. Dynamic SQL, the only way to hide a name, is refused by the server
//! inside functions and triggers and anything they call.

use std::collections::HashSet;

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
}

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

/// What the functions and triggers (`(trigger schema, body)`) on a server may create, with
/// the procedures they call.
pub fn temporaries<'a>(
    routines: &[Routine],
    triggers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Temporaries {
    let bodies: Vec<Option<Vec<String>>> = routines
        .iter()
        .map(|r| r.body.as_deref().map(words))
        .collect();
    let triggers: Vec<(String, Vec<String>)> = triggers
        .into_iter()
        .map(|(s, b)| (s.to_lowercase(), words(b)))
        .collect();
    // What runs: every function and trigger, and the procedures they call, transitively.
    let mut runs: Vec<bool> = routines.iter().map(|r| !r.procedure).collect();
    let mut called: HashSet<String> = triggers.iter().flat_map(|(_, w)| calls(w)).collect();
    loop {
        let mut grew = false;
        for (i, r) in routines.iter().enumerate() {
            if !runs[i] && called.contains(&r.name) {
                runs[i] = true;
                grew = true;
            }
            if runs[i] {
                for c in bodies[i].iter().flat_map(|w| calls(w)) {
                    grew |= called.insert(c);
                }
            }
        }
        if !grew {
            break;
        }
    }
    let mut named = Vec::new();
    let mut add = |schema: &str, w: &[String]| -> bool {
        let Some(found) = created(w) else {
            return false;
        };
        for (s, n) in found {
            let q = (s.unwrap_or_else(|| schema.to_string()), n);
            if !named.contains(&q) {
                named.push(q);
            }
        }
        true
    };
    for (i, r) in routines.iter().enumerate().filter(|(i, _)| runs[*i]) {
        match &bodies[i] {
            Some(w) if add(&r.schema, w) => {}
            _ => return Temporaries::Any,
        }
    }
    for (schema, w) in &triggers {
        if !add(schema, w) {
            return Temporaries::Any;
        }
    }
    if named.is_empty() {
        Temporaries::None
    } else {
        Temporaries::Named(named)
    }
}

/// What a DDL statement seen in `schema` (before it is sent through qcache, or when the
/// binlog tail reads it) adds to [`temporaries`] of `known`, judged as the reload after it
/// will judge it: a CREATE of a FUNCTION, TRIGGER or PROCEDURE. Anything else (tables,
/// views, events, which run in a session of their own) adds none. So that code a session
/// runs before the catalog's reload is judged with it.
pub fn ddl_temporaries(sql: &str, schema: &str, known: &[Routine]) -> Temporaries {
    let w = words(sql);
    // After comments, executable ones too (`/*!50003 CREATE*/ /*!50017 DEFINER=…*/ …`).
    let Some(c) = w.iter().take(16).position(|t| t.as_str() == "create") else {
        return Temporaries::None;
    };
    // The kind comes before the name and the body; OR REPLACE, DEFINER = …, AGGREGATE
    // and the like before it.
    let Some(k) = w.iter().skip(c).take(40).position(|t| {
        matches!(
            t.as_str(),
            "function" | "procedure" | "trigger" | "package" | "table" | "view" | "event"
        )
    }) else {
        // Unreadable: as if it added code that creates what its text could.
        return match created(&w) {
            Some(n) if n.is_empty() => Temporaries::None,
            _ => Temporaries::Any,
        };
    };
    let k = c + k;
    let kind = w[k].as_str();
    if matches!(kind, "table" | "view" | "event") {
        return Temporaries::None;
    }
    let mut i = k + 1;
    while matches!(
        w.get(i).map(String::as_str),
        Some("if" | "not" | "exists" | "body")
    ) {
        i += 1;
    }
    let mut schema = schema.to_lowercase();
    if w.get(i + 1).map(String::as_str) == Some(".") {
        schema = w[i].clone();
        i += 2;
    }
    let name = w.get(i).cloned().unwrap_or_default();
    let mut all: Vec<Routine> = known
        .iter()
        .filter(|r| kind == "trigger" || r.name != name || r.schema != schema)
        .cloned()
        .collect();
    if kind == "trigger" {
        return temporaries(&all, [(schema.as_str(), sql)]);
    }
    all.push(Routine {
        schema,
        name,
        procedure: kind == "procedure",
        body: Some(sql.to_string()),
    });
    temporaries(&all, [])
}

/// The procedures a body calls (`CALL [db.]name`), by name.
fn calls(w: &[String]) -> Vec<String> {
    w.iter()
        .enumerate()
        .filter(|(_, t)| t.as_str() == "call")
        .filter_map(
            |(i, _)| match (w.get(i + 1), w.get(i + 2).map(String::as_str)) {
                (Some(_), Some(".")) => w.get(i + 3).cloned(),
                (n, _) => n.cloned(),
            },
        )
        .collect()
}

/// The temporary tables a body creates, `(schema if named, name)`; None when it mentions
/// `TEMPORARY` anywhere else (a name qcache cannot read).
fn created(w: &[String]) -> Option<Vec<(Option<String>, String)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < w.len() {
        if w[i] != "temporary" {
            i += 1;
            continue;
        }
        let created = i > 0
            && (w[i - 1] == "create" || (w[i - 1] == "replace" && i > 2 && w[i - 3] == "create"))
            && w.get(i + 1).map(String::as_str) == Some("table");
        if !created {
            return None;
        }
        let mut j = i + 2;
        while matches!(w.get(j).map(String::as_str), Some("if" | "not" | "exists")) {
            j += 1;
        }
        let first = w.get(j)?.clone();
        if w.get(j + 1).map(String::as_str) == Some(".") {
            out.push((Some(first), w.get(j + 2)?.clone()));
        } else {
            out.push((None, first));
        }
        i = j + 1;
    }
    Some(out)
}

/// A body as lower-cased words (identifiers, a backquoted name without its quotes) and
/// single punctuation characters; whitespace dropped. Strings and comments are not told
/// apart: their words count too.
fn words(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' || c == '$' {
            let mut w: String = c.to_lowercase().collect();
            while let Some(&n) = chars.peek() {
                if !(n.is_alphanumeric() || n == '_' || n == '$') {
                    break;
                }
                w.extend(n.to_lowercase());
                chars.next();
            }
            out.push(w);
        } else if c == '`' {
            let mut w = String::new();
            while let Some(n) = chars.next() {
                if n == '`' {
                    if chars.peek() == Some(&'`') {
                        chars.next();
                    } else {
                        break;
                    }
                }
                w.extend(n.to_lowercase());
            }
            out.push(w);
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, body: &str) -> Routine {
        Routine {
            schema: "db".into(),
            name: name.into(),
            procedure: false,
            body: Some(body.into()),
        }
    }

    fn p(name: &str, body: &str) -> Routine {
        Routine {
            procedure: true,
            ..f(name, body)
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

    #[test]
    fn which_temporary_tables_code_may_create() {
        let plain = "BEGIN UPDATE side SET n = n + 1; RETURN 1; END";
        let unreadable = Routine {
            body: None,
            ..f("hidden", "")
        };
        type Case<'a> = (&'a str, Vec<Routine>, Vec<(&'a str, &'a str)>, Temporaries);
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
            ("the word where no name can be read", vec![f("a", "BEGIN SET @s = 'temporary'; RETURN 1; END")], vec![], Temporaries::Any),
            ("a trigger that creates one", vec![], vec![("tdb", "BEGIN CREATE TEMPORARY TABLE x (i INT); END")], named(&[("tdb", "x")])),
            ("a trigger that calls a procedure that does", vec![p("tmp", MK)], vec![("tdb", "CALL tmp()")], named(&[("db", "t")])),
            ("a trigger that creates none", vec![p("tmp", MK)], vec![("tdb", "UPDATE side SET n = n + 1")], Temporaries::None),
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
        #[rustfmt::skip]
        let cases = [
            ("a function that creates one", "CREATE FUNCTION mk() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN CREATE TEMPORARY TABLE t (i INT); RETURN 1; END", named(&[("cur", "t")])),
            ("with OR REPLACE, a definer and a schema", "CREATE OR REPLACE DEFINER=`root`@`localhost` FUNCTION d2.mk() RETURNS INT BEGIN CREATE TEMPORARY TABLE t (i INT); RETURN 1; END", named(&[("d2", "t")])),
            ("a function that creates none", "CREATE FUNCTION g() RETURNS INT RETURN 2", Temporaries::None),
            ("a function that calls a known procedure that does", "CREATE FUNCTION g() RETURNS INT BEGIN CALL old(); RETURN 1; END", named(&[("db", "t")])),
            ("a trigger that creates one", "CREATE TRIGGER tr AFTER INSERT ON log FOR EACH ROW CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT)", named(&[("cur", "t")])),
            ("a trigger that creates none", "CREATE TRIGGER tr AFTER INSERT ON log FOR EACH ROW UPDATE side SET n = n + 1", Temporaries::None),
            ("a procedure a known function calls", "CREATE PROCEDURE p() BEGIN CREATE TEMPORARY TABLE t (i INT); END", named(&[("cur", "t")])),
            ("a procedure no function calls", "CREATE PROCEDURE lonely() BEGIN CREATE TEMPORARY TABLE t (i INT); END", Temporaries::None),
            ("replacing a routine with one that creates none", "CREATE OR REPLACE PROCEDURE db.old() BEGIN END", Temporaries::None),
            ("a table", "CREATE TABLE temporary_things (i INT)", Temporaries::None),
            ("a temporary table", "CREATE TEMPORARY TABLE t (i INT)", Temporaries::None),
            ("a view", "CREATE VIEW v AS SELECT plain() AS x", Temporaries::None),
            ("an event runs in its own session", "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO CREATE TEMPORARY TABLE t (i INT)", Temporaries::None),
            ("not a CREATE", "DROP FUNCTION mk", Temporaries::None),
            ("as mysqldump writes a trigger", "/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`%`*/ /*!50003 TRIGGER tr AFTER INSERT ON log FOR EACH ROW CREATE TEMPORARY TABLE t (i INT) */", named(&[("cur", "t")])),
        ];
        for (what, sql, want) in cases {
            assert_eq!(ddl_temporaries(sql, "cur", &known), want, "{what}");
        }
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
