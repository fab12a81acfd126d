//! What a successful SET leaves the session with (`policy::context` decides each
//! assignment): literal values followed by their text, and the variables whose values
//! must be read back from the server, which the session reads and hands back.

use super::state::SessionState;
use crate::analysis::SetInfo;
use crate::policy::context::{self, Assignment};
use crate::protocol::rows::Values;

/// What following a SET asks of the server.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReadBack {
    /// The variables to read back; none when the text said all.
    pub names: Vec<String>,
    /// qcache can no longer tell the session's settings.
    pub lost: bool,
}

/// Brings the session's state up to what a successful SET `i` left it with, as far as
/// the text tells: literal values by their text, GLOBAL assignments and user variables not
/// at all; what must be read back from the server, in the answer. None: qcache can tell
/// neither what changed nor what to read back (the session has lost track).
pub fn follow_set(st: &mut SessionState, i: Option<&SetInfo>) -> Option<ReadBack> {
    let Some(i) = i else {
        st.lost_track = true;
        return None;
    };
    let mut read_back: Vec<String> = Vec::new();
    let mut lost = false;
    for ((k, v), global) in i.assignments.iter().zip(&i.globals) {
        match context::assignment(k, v, *global) {
            Assignment::Ignore => continue,
            Assignment::Literal => {}
            Assignment::Keyed { value, .. } => {
                st.txn.isolation_set(
                    context::reads_uncommitted(value),
                    context::serializable(value),
                );
            }
            Assignment::ReadBack(names) => {
                read_back.extend(names.iter().map(|n| n.to_string()));
                continue;
            }
            Assignment::ReadBackNamed => {
                read_back.push(k.clone());
                continue;
            }
            Assignment::Lost => {
                lost = true;
                continue;
            }
        }
        if k == "transaction" && v.to_ascii_uppercase().contains("ISOLATION") {
            let ru = context::reads_uncommitted(v);
            let ser = context::serializable(v);
            if i.next_transaction_only {
                st.txn.next_isolation_set(ru, ser);
            } else {
                st.txn.isolation_set(ru, ser);
            }
        }
        match context::key_entries(k, v, i.next_transaction_only) {
            Some(entries) => st.vars.extend(entries),
            None => {
                st.vars.insert(k.clone(), v.clone());
                read_back.push(context::isolation_variable(st.mariadb).to_string());
            }
        }
    }
    // What the SET turned on that records the session's statements, by its text: the
    // read-back is a statement such a recorder would show.
    let recorders = i
        .assignments
        .iter()
        .zip(&i.globals)
        .filter(|((k, _), global)| !**global && (k.starts_with("@@") || !k.starts_with('@')))
        .fold(st.recorders(), |r, ((k, v), _)| r.after_set(k, v));
    (st.optimizer_traced, st.profiling) = (recorders.optimizer_trace, recorders.profiling);
    if !read_back.is_empty() && recorders.quiet() {
        // Read with the rest when the session is quiet again, or never.
        let mariadb = st.mariadb;
        if read_back
            .iter()
            .all(|n| context::read_at_connect(n, mariadb))
        {
            st.ctx_stale = true;
        } else {
            lost = true;
        }
        read_back.clear();
    }
    Some(ReadBack {
        names: read_back,
        lost,
    })
}

/// Whether the read-back may be sent: it would clear the SET's warnings, or those of an
/// earlier statement that the SET left in place, which the client may ask for. In an XA
/// transaction past XA END the server refuses any read of a table (1399), so the restore
/// of FOUND_ROWS() the read-back owes would fail where the client sees it: the session is
/// given up instead (never served, as in XA anyway).
pub fn may_read_back(st: &SessionState, warnings: u32) -> bool {
    warnings == 0 && !st.diag_may_persist && !st.txn.xa()
}

/// The server's answer to the read-back of `rb` (None: not asked, or not answered), into
/// the session's state. The caller recomputes the fingerprint.
pub fn read_back_answered(st: &mut SessionState, rb: ReadBack, values: Option<Values>) {
    let ReadBack { names, mut lost } = rb;
    if !names.is_empty() {
        match values {
            Some(values) => {
                for (n, v) in names.iter().zip(values) {
                    let v = v.unwrap_or_else(|| "\u{0}NULL".to_string());
                    if context::is_isolation(n) {
                        st.txn.isolation_set(
                            context::reads_uncommitted(&v),
                            context::serializable(&v),
                        );
                    }
                    if context::is_optimizer_trace(n) {
                        st.optimizer_traced = context::traces_optimizer(&v);
                    }
                    st.vars.insert(context::key_name(n).to_string(), v);
                }
            }
            None => lost = true,
        }
    }
    if lost {
        st.lost_track = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    /// What a SET leaves the session with, from its text: what is keyed, what is read
    /// back, what the recorders become.
    #[test]
    fn each_set_is_followed_or_read_back() {
        struct Row {
            sql: &'static str,
            read_back: &'static [&'static str],
            vars: &'static [&'static str],
            stale: bool,
            traced: bool,
            profiling: bool,
        }
        let row = |sql, read_back, vars| Row {
            sql,
            read_back,
            vars,
            stale: false,
            traced: false,
            profiling: false,
        };
        let rows = [
            row("SET sql_mode = 'ANSI'", &[], &["sql_mode"]),
            row("SET SESSION sql_mode = DEFAULT", &["sql_mode"], &[]),
            row("SET @x = 1", &[], &[]),
            row("SET GLOBAL sql_mode = 'ANSI'", &[], &[]),
            row("SET time_zone = @@global.time_zone", &["time_zone"], &[]),
            row(
                "SET NAMES utf8mb4",
                &[
                    "character_set_client",
                    "character_set_connection",
                    "character_set_results",
                    "collation_connection",
                ],
                &[],
            ),
            row(
                "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                &[],
                &["transaction"],
            ),
            Row {
                profiling: true,
                ..row("SET profiling = 1", &[], &["profiling"])
            },
            // A trace on: the session keeps quiet, its settings read when it is not.
            Row {
                stale: true,
                traced: true,
                ..row("SET optimizer_trace = 'enabled=on'", &[], &[])
            },
        ];
        let w = World::new(false);
        for r in rows {
            let mut st = w.session(Some("db"));
            let info = crate::analysis::analyze_set(r.sql);
            let rb = follow_set(&mut st, info.as_ref()).expect(r.sql);
            assert_eq!(rb.names, r.read_back, "{}", r.sql);
            assert!(!rb.lost, "{}", r.sql);
            let vars: Vec<&str> = st.vars.keys().map(String::as_str).collect();
            assert_eq!(vars, r.vars, "{}", r.sql);
            let got = (st.ctx_stale, st.optimizer_traced, st.profiling);
            assert_eq!(got, (r.stale, r.traced, r.profiling), "{}", r.sql);
            assert!(!st.lost_track, "{}", r.sql);
        }
    }

    /// Isolation levels a SET names reach the transaction state (dirty reads are keyed).
    #[test]
    fn isolation_levels_reach_the_transaction() {
        let w = World::new(false);
        let rows: &[(&str, bool)] = &[
            ("SET tx_isolation = 'READ-UNCOMMITTED'", true),
            (
                "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
                true,
            ),
            ("SET sql_mode = 'ANSI'", false),
        ];
        for (sql, dirty) in rows {
            let mut st = w.session(Some("db"));
            follow_set(&mut st, crate::analysis::analyze_set(sql).as_ref());
            st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
            assert_eq!(st.txn.dirty_reads(), *dirty, "{sql}");
        }
    }

    /// A SET qcache cannot read loses track; so does a read-back not sent or not answered.
    #[test]
    fn what_cannot_be_followed_loses_track() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        assert_eq!(follow_set(&mut st, None), None);
        assert!(st.lost_track);
        let names = vec!["time_zone".to_string()];
        let rows: &[(Option<Values>, bool, Option<&str>)] = &[
            (Some(vec![Some("+01:00".into())]), false, Some("+01:00")),
            (Some(vec![None]), false, Some("\u{0}NULL")),
            (None, true, None),
        ];
        for (values, lost, value) in rows {
            let mut st = w.session(Some("db"));
            let rb = ReadBack {
                names: names.clone(),
                lost: false,
            };
            read_back_answered(&mut st, rb, values.clone());
            assert_eq!(st.lost_track, *lost, "{values:?}");
            assert_eq!(st.vars.get("time_zone").map(String::as_str), *value);
        }
        // Nothing to read back: nothing lost.
        let mut st = w.session(Some("db"));
        read_back_answered(&mut st, ReadBack::default(), None);
        assert!(!st.lost_track);
    }

    /// The read-back is not sent where it would clear diagnostics the client may read, nor
    /// in an XA transaction.
    #[test]
    fn the_read_back_keeps_the_diagnostics() {
        let w = World::new(false);
        let rows: &[(u32, bool, bool)] = &[(0, false, true), (1, false, false), (0, true, false)];
        for (warnings, persist, may) in rows {
            let mut st = w.session(Some("db"));
            st.diag_may_persist = *persist;
            assert_eq!(may_read_back(&st, *warnings), *may, "{warnings} {persist}");
        }
    }
}
