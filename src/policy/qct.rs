//! Policy: when qcache still knows the session's `query_cache_type` after the server ran
//! code qcache does not read statement by statement (#35).
//!
//! qcache answers `SELECT @@query_cache_type` (and the `SHOW VARIABLES` row) itself, and
//! caches by it. A text SET of it is answered by qcache; a SET the server runs where qcache
//! can read it (prepared through either protocol, EXECUTE IMMEDIATE of a literal) is followed
//! once the server accepted it. But MariaDB lets stored code set it too: a procedure (CALL
//! in any form), a stored function called from any statement, a trigger fired by a write,
//! anonymous compound statements, a SQL-level prepared statement whose text qcache never
//! saw (`PREPARE s FROM @v`), a SET inside a multi-statement (which part ran is not
//! followed). Probed on MariaDB 10.11: `SET SESSION query_cache_type = OFF` in a
//! function and in a trigger succeeds and stays after the statement; dynamic SQL is refused
//! in functions and triggers (1336) and in the procedures they call.
//!
//! After such code the value is unknown: reads of the session's value go to the server
//! unrewritten (its session variable is the one the code set) and nothing is served or
//! stored, until a SET of it through qcache or a reset. A read-back cannot settle it: the
//! server's session value is not qcache's (with the server's own query cache off, as it
//! is in front of qcache, the server refuses ON and DEMAND for a session, so it reads OFF
//! whether or not the code set it), so only a change of it would tell, and a procedure
//! that sets OFF changes nothing there. What the catalog knows of the bodies keeps the
//! cost off ordinary code: only code whose text may set the variable counts.
//!
//! MySQL 8.0 has no such variable: no code can set it there.

/// What the catalog knows of the stored code on the server that may set the variable
/// (`stored_code::sets_qct`), for the code that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CodeFacts {
    /// The catalog has read the server's routines and triggers.
    pub loaded: bool,
    /// A function, trigger or procedure body names `query_cache_type` (or cannot be read).
    pub named: bool,
    /// The code a CALL runs may run dynamic SQL (PREPARE / EXECUTE), whose text no body
    /// shows: the procedure it names says so, calls others, or cannot be found or read;
    /// for a CALL qcache cannot name, any procedure on the server that does.
    pub dynamic: bool,
}

/// The procedure a `CALL` (`text`) names: (its schema if given, its name), lower-cased;
/// None when qcache cannot read it (a `"…"` name, which ANSI_QUOTES may make one).
pub fn called_procedure(text: &[u8]) -> Option<(Option<String>, String)> {
    use crate::analysis::lexer::{Lexer, Tok};
    let mut toks = Lexer::new(text);
    if !toks.next()?.is_kw(text, "CALL") {
        return None;
    }
    let ident = |t: crate::analysis::lexer::Token| -> Option<String> {
        let b = t.bytes(text);
        let s = match t.tok {
            Tok::Word => String::from_utf8_lossy(b).into_owned(),
            Tok::Backquoted if b.len() >= 2 && b.ends_with(b"`") => {
                String::from_utf8_lossy(&b[1..b.len() - 1]).replace("``", "`")
            }
            _ => return None,
        };
        Some(s.to_lowercase())
    };
    let first = ident(toks.next()?)?;
    match toks.next() {
        Some(t) if t.is_punct(b'.') => Some((Some(first), ident(toks.next()?)?)),
        _ => Some((None, first)),
    }
}

/// Whether a procedure body (None: unreadable) may run dynamic SQL or call code that does.
pub fn body_dynamic(body: Option<&str>) -> bool {
    body.is_none_or(|b| {
        text_may_set(b.as_bytes()) || crate::analysis::contains_ci(b.as_bytes(), b"call")
    })
}

/// Code the session had the server run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeRan<'a> {
    /// A stored function or a trigger (from a read, a write, a SET's value, a view).
    FunctionOrTrigger,
    /// A CALL (text, prepared through either protocol, inside a multi-statement), or a
    /// SQL-level EXECUTE / EXECUTE IMMEDIATE whose text qcache read (a SET of the
    /// variable there is followed as such; its values may still call functions).
    Call,
    /// A CALL whose text is this: the facts judge the procedure it names alone
    /// ([`called_procedure`]).
    CallOf(&'a [u8]),
    /// Anonymous compound code (`BEGIN NOT ATOMIC … END`, `IF … END IF`): its text.
    Compound(&'a [u8]),
    /// A SQL-level EXECUTE or EXECUTE IMMEDIATE of text qcache did not see.
    OpaqueText,
    /// A SET of `query_cache_type` in a multi-statement: the server may have run it.
    UnfollowedSet,
}

/// What qcache knows of the session's `query_cache_type` once the server ran some code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Still qcache's value.
    Known,
    /// Unknown until a SET of it through qcache or a reset.
    Unknown,
    /// The catalog has not read the server's code yet: judged with it once it has
    /// ([`judged_when_loaded`]); until then the session is served nothing and its reads of
    /// the variable go to the server, as for [`After::Unknown`].
    WhenLoaded {
        /// The code was a CALL (procedures' dynamic SQL counts).
        call: bool,
    },
}

/// What the session's `query_cache_type` is once the server ran `ran`, with what the
/// catalog knows now.
pub fn after_code(ran: CodeRan<'_>, facts: CodeFacts, mariadb: bool) -> After {
    if !mariadb {
        return After::Known;
    }
    // What the text alone says, whatever the server's code.
    let by_text = match ran {
        CodeRan::Compound(text) => text_may_set(text),
        CodeRan::OpaqueText | CodeRan::UnfollowedSet => true,
        CodeRan::FunctionOrTrigger | CodeRan::Call | CodeRan::CallOf(_) => false,
    };
    let call = !matches!(ran, CodeRan::FunctionOrTrigger);
    if by_text || (facts.loaded && (facts.named || (call && facts.dynamic))) {
        return After::Unknown;
    }
    if !facts.loaded {
        return After::WhenLoaded { call };
    }
    After::Known
}

/// [`After::WhenLoaded`] judged once the catalog has loaded (`facts`); None while it has not.
pub fn judged_when_loaded(call: bool, facts: CodeFacts) -> Option<bool> {
    facts
        .loaded
        .then_some(facts.named || (call && facts.dynamic))
}

/// Whether code text may set the variable: it names it, or runs text built at run time.
pub fn text_may_set(text: &[u8]) -> bool {
    use crate::analysis::contains_ci;
    contains_ci(text, b"query_cache_type")
        || contains_ci(text, b"execute")
        || contains_ci(text, b"prepare")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn procedure_a_call_names() {
        type Named<'a> = Option<(Option<&'a str>, &'a str)>;
        let rows: &[(&str, Named)] = &[
            ("CALL p_off()", Some((None, "p_off"))),
            ("call P_Off", Some((None, "p_off"))),
            ("CALL db.p(1, 2)", Some((Some("db"), "p"))),
            ("CALL `my db`.`p``q`()", Some((Some("my db"), "p`q"))),
            ("CALL /* c */ d . p", Some((Some("d"), "p"))),
            ("CALL \"p\"()", None),
            ("SELECT 1", None),
        ];
        for (sql, want) in rows {
            let want = want.map(|(s, n)| (s.map(str::to_string), n.to_string()));
            assert_eq!(called_procedure(sql.as_bytes()), want, "{sql}");
        }
        assert!(body_dynamic(None));
        assert!(body_dynamic(Some("BEGIN EXECUTE IMMEDIATE @s; END")));
        assert!(body_dynamic(Some("BEGIN CALL q(); END")));
        assert!(!body_dynamic(Some("BEGIN UPDATE t SET v = 1; END")));
    }

    /// One row per path and what the catalog knows.
    #[test]
    fn after_code_one_row_per_path() {
        let none = CodeFacts {
            loaded: true,
            named: false,
            dynamic: false,
        };
        let named = CodeFacts {
            named: true,
            ..none
        };
        let dynamic = CodeFacts {
            dynamic: true,
            ..none
        };
        let unloaded = CodeFacts {
            loaded: false,
            ..none
        };
        use After::{Known as K, Unknown as U};
        use CodeRan::*;
        const LF: After = After::WhenLoaded { call: false };
        const LC: After = After::WhenLoaded { call: true };
        let p: &[u8] = b"CALL p()";
        let rows: &[(&str, CodeRan, CodeFacts, bool, After)] = &[
            (
                "function, no body names it",
                FunctionOrTrigger,
                none,
                true,
                K,
            ),
            (
                "function, a body names it",
                FunctionOrTrigger,
                named,
                true,
                U,
            ),
            (
                "function, dynamic SQL refused in it",
                FunctionOrTrigger,
                dynamic,
                true,
                K,
            ),
            (
                "function, catalog not loaded",
                FunctionOrTrigger,
                unloaded,
                true,
                LF,
            ),
            ("CALL, no body names it", Call, none, true, K),
            ("CALL, a body names it", Call, named, true, U),
            ("CALL, a procedure runs dynamic SQL", Call, dynamic, true, U),
            ("CALL, catalog not loaded", Call, unloaded, true, LC),
            ("CALL p, its body neither", CallOf(p), none, true, K),
            (
                "CALL p, its body runs dynamic SQL",
                CallOf(p),
                dynamic,
                true,
                U,
            ),
            ("CALL p, a body names it", CallOf(p), named, true, U),
            (
                "compound, plain",
                Compound(b"BEGIN NOT ATOMIC DO 1; END"),
                none,
                true,
                K,
            ),
            (
                "compound that sets it",
                Compound(b"IF 1 THEN SET query_cache_type = 0; END IF"),
                unloaded,
                true,
                U,
            ),
            (
                "compound with dynamic SQL",
                Compound(b"BEGIN NOT ATOMIC EXECUTE IMMEDIATE @s; END"),
                none,
                true,
                U,
            ),
            (
                "compound calling such code",
                Compound(b"BEGIN NOT ATOMIC CALL p(); END"),
                named,
                true,
                U,
            ),
            (
                "compound, catalog not loaded",
                Compound(b"BEGIN NOT ATOMIC DO 1; END"),
                unloaded,
                true,
                LC,
            ),
            ("EXECUTE of unseen text", OpaqueText, none, true, U),
            (
                "EXECUTE of unseen text, catalog not loaded",
                OpaqueText,
                unloaded,
                true,
                U,
            ),
            ("SET in a multi-statement", UnfollowedSet, none, true, U),
            ("MySQL: no such variable", OpaqueText, unloaded, false, K),
            ("MySQL: CALL", Call, named, false, K),
        ];
        for (rule, ran, facts, mariadb, want) in rows {
            assert_eq!(after_code(*ran, *facts, *mariadb), *want, "{rule}");
        }
        // Judged once loaded: a function by the bodies that name it, a CALL by dynamic SQL too.
        assert_eq!(judged_when_loaded(false, unloaded), None);
        assert_eq!(judged_when_loaded(false, dynamic), Some(false));
        assert_eq!(judged_when_loaded(true, dynamic), Some(true));
        assert_eq!(judged_when_loaded(false, named), Some(true));
        assert_eq!(judged_when_loaded(true, none), Some(false));
    }
}
