//! What `QCACHE EXPLAIN` and `SHOW QCACHE LAST` say: the verdicts and rows made of what the
//! read machine decided (`policy::decide`, driven by `session/explain.rs`), of the session's
//! state and of its previous statement. Words only: nothing here asks the server or the
//! cache; the session passes what it found.

use std::sync::Arc;

use super::last::Last;
use super::state::{LastExecute, SessionState};
use crate::admin::statements::Rows;
use crate::analysis::{Scan, StatementKind};
use crate::cache::{Entry, Key};
use crate::config::QueryCacheType;
use crate::policy::stale::{StaleOk, Why};
use crate::policy::Reason;
use crate::protocol::packets::TYPE_VAR_STRING;

/// What the privileged fields say to a user without the privilege.
pub const HIDDEN: &str = "(needs RELOAD or admin.users)";

/// What depends on the key of a prepared statement whose parameters are not bound yet.
pub const UNBOUND: &str = "(unknown until its parameters are bound)";

/// EXPLAIN's rows: (field, value), in the order shown.
pub type Fields = Vec<(&'static str, Option<String>)>;

/// An outdated entry under a `max_stale` rule and what the stale rule says of serving it
/// (`Session::miss_start`).
pub type StaleFound = (Arc<Entry>, Result<StaleOk, Why>);

/// What a miss's start says (`Session::miss_start`): an outdated entry found, if any; or why
/// the read relays without a copy (None: its result is cached, this read could not be served).
pub type MissStart = Result<Option<StaleFound>, Option<Reason>>;

/// The verdict of EXPLAIN.
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: &'static str,
    pub reason: Option<String>,
}

impl Verdict {
    /// Sent upstream, not stored, for `reason`.
    pub fn send(reason: Reason) -> Verdict {
        Verdict {
            decision: "send",
            reason: Some(reason.as_str().to_string()),
        }
    }

    /// Served from the cache.
    pub fn hit() -> Verdict {
        Verdict {
            decision: "hit",
            reason: None,
        }
    }

    /// A statement that is not a read: relayed, invalidating what it writes.
    pub fn not_a_read(kind: StatementKind) -> Verdict {
        Verdict {
            decision: "relay",
            reason: Some(format!(
                "not a read ({kind:?}): relayed; a statement that may write invalidates what it \
                 writes"
            )),
        }
    }
}

/// `(field, value)` pairs as a two-column result.
pub fn rows(fields: Fields) -> Rows {
    Rows {
        columns: vec![("field", TYPE_VAR_STRING), ("value", TYPE_VAR_STRING)],
        rows: fields
            .into_iter()
            .map(|(f, v)| vec![Some(f.to_string()), v])
            .collect(),
    }
}

pub fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// `SHOW QCACHE LAST`: the session's previous statement and what happened to it.
pub fn last_rows(l: &Last) -> Rows {
    if l.none {
        return rows(vec![("outcome", Some("no statement yet".into()))]);
    }
    let w = &l.what;
    let outcome = if !w.read {
        "relayed (not a read: the cache was not consulted)"
    } else if w.hit {
        "hit"
    } else if w.stored {
        "miss-stored"
    } else {
        "miss-not-stored"
    };
    rows(vec![
        (
            "statement",
            Some(String::from_utf8_lossy(&l.sql).into_owned()),
        ),
        ("prepared", Some(yes_no(l.prepared))),
        ("digest", w.digest.map(|d| format!("{d:016x}"))),
        ("outcome", Some(outcome.to_string())),
        ("reason", w.reason.map(|r| r.as_str().to_string())),
        ("rows_sent", Some(w.rows.to_string())),
        ("bytes_sent", Some(w.bytes.to_string())),
        (
            "upstream_ms",
            Some(format!("{:.3}", w.upstream.as_secs_f64() * 1e3)),
        ),
    ])
}

/// The verdict on a text statement decided by its scan alone, before the read machine:
/// several statements, a SQL-level EXECUTE or a CALL, or not a read. None: a read, which
/// the machine decides.
pub fn before_read(scan: &Scan, f: &mut Fields) -> Option<Verdict> {
    if scan.multi {
        return Some(Verdict::send(Reason::MultiStatement));
    }
    if matches!(scan.kind, StatementKind::Execute | StatementKind::Call) {
        f.push((
            "effect",
            Some(
                "a SQL-level prepared statement or a procedure may read user variables, write \
                 any table and SET anything: never served nor stored; its writes invalidate as \
                 invalidation.call says, and the session stops caching until \
                 COM_RESET_CONNECTION or COM_CHANGE_USER (a binary-protocol prepared statement \
                 is cached: QCACHE EXPLAIN STATEMENT <id>)"
                    .into(),
            ),
        ));
        return Some(Verdict {
            decision: "relay",
            reason: Some(Reason::NotARead.as_str().to_string()),
        });
    }
    (scan.kind != StatementKind::Select).then(|| Verdict::not_a_read(scan.kind))
}

/// How a prepared statement's parameters key its next execute, as EXPLAIN STATEMENT shows.
pub fn parameters(last: &LastExecute, params: u16) -> String {
    match (last, params) {
        (_, 0) => "none".to_string(),
        (LastExecute::Keyed(_), n) => format!("{n}, as the last execute bound them"),
        (LastExecute::NotKeyed(_), n) => {
            format!("{n}, last execute not keyed: unknown until bound again")
        }
        (LastExecute::None, n) => format!("{n}, not bound yet"),
    }
}

/// The `entry_present` row, and the verdict when an entry decides the read: `present`, an
/// entry this session may be served is under the key (`k`, None while an execute's
/// parameters are not bound); `holds`, whether any servable entry is; `may_see_entry`,
/// whether this user may know (its own key, or the admin privilege).
pub fn entry(
    k: Option<Key>,
    present: bool,
    holds: impl FnOnce(Key) -> bool,
    may_see_entry: bool,
    f: &mut Fields,
) -> Option<Verdict> {
    f.push((
        "entry_present",
        Some(match k {
            None => UNBOUND.to_string(),
            Some(k) if may_see_entry => yes_no(present || holds(k)),
            Some(_) => HIDDEN.to_string(),
        }),
    ));
    present.then(|| match may_see_entry {
        true => Verdict::hit(),
        false => Verdict {
            decision: "hit or store",
            reason: Some(format!("which one: {HIDDEN}")),
        },
    })
}

/// The verdict on a read planned to fill, from what a miss's start says
/// (`Session::miss_start`: the fill view, then the stale verdict), so EXPLAIN cannot drift
/// from the miss. `keyed`: the key is known (an execute's parameters are bound).
pub fn fill(
    start: MissStart,
    keyed: bool,
    may_see_entry: bool,
    opts: &crate::rules::Options,
    f: &mut Fields,
) -> Verdict {
    if !keyed {
        if let Err(Some(r)) = start {
            return Verdict::send(r);
        }
        return Verdict {
            decision: "unknown until executed",
            reason: Some(
                "the key holds the parameter values, which this session has not bound yet: an \
                 execute is served if an entry for its values is present, and otherwise stored \
                 unless the result has warnings, is larger than cache.max_result_bytes, or a \
                 table changes while it runs"
                    .into(),
            ),
        };
    }
    let stale = match start {
        Err(Some(r)) => return Verdict::send(r),
        Err(None) => {
            return Verdict {
                decision: "send",
                reason: Some(
                    "an entry is present, but this transaction's first read must reach the \
                     server to open its snapshot"
                        .into(),
                ),
            }
        }
        Ok(stale) => stale,
    };
    // An outdated entry under a `max_stale` rule: the same decision a miss makes, shown to
    // whoever may see entries.
    if let Some(v) = stale
        .filter(|_| may_see_entry)
        .and_then(|s| stale_words(s, f))
    {
        return v;
    }
    rule_options(opts, f);
    Verdict {
        decision: "store",
        reason: Some(
            "stored unless the result has warnings, is larger than cache.max_result_bytes, is \
             not one result set, or a table changes while it runs"
                .into(),
        ),
    }
}

/// An outdated entry under a `max_stale` rule: a `stale` row, and the verdict when it would
/// be served stale.
fn stale_words((e, verdict): StaleFound, f: &mut Fields) -> Option<Verdict> {
    let age = e.created.elapsed();
    let max = e.max_stale.unwrap_or_default();
    match verdict {
        Ok(_) => {
            f.push((
                "stale",
                Some(format!(
                    "served stale: age {age:.3?} of max_stale {max:?}, a change of rows \
                     outdated it and another session is refreshing it"
                )),
            ));
            Some(Verdict {
                decision: "hit (stale)",
                reason: Some(format!("outdated entry, age {age:.3?} < {max:?}")),
            })
        }
        Err(why) => {
            f.push((
                "stale",
                Some(format!(
                    "not served stale: {} (age {age:.3?}, max_stale {max:?})",
                    why.as_str()
                )),
            ));
            None
        }
    }
}

/// What the read's `cache` rule sets, as rows.
fn rule_options(opts: &crate::rules::Options, f: &mut Fields) {
    if let Some(ttl) = opts.ttl {
        f.push(("ttl", Some(format!("{ttl:?}"))));
    }
    if let Some(m) = opts.max_stale {
        f.push(("max_stale", Some(format!("{m:?}"))));
    }
    if !opts.cache_empty {
        f.push((
            "cache_empty",
            Some("false: a result of no rows is not stored".into()),
        ));
    }
}

/// What of the session the key holds (`cache::key`, `policy::context`).
pub fn key_context(st: &SessionState) -> Fields {
    let (account, role) = match &st.identity {
        Some(id) => (id.account.clone(), id.role.clone()),
        None => ("(not asked yet)".to_string(), None),
    };
    let vars: Vec<String> = st.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let qct = match st.qct {
        QueryCacheType::On => "ON",
        QueryCacheType::Off => "OFF",
        QueryCacheType::Demand => "DEMAND",
    };
    vec![
        (
            "key.account",
            Some(if st.shared_users {
                "(shared between users)".to_string()
            } else {
                account
            }),
        ),
        ("key.role", role),
        ("key.database", st.db.clone()),
        ("key.variables_set", Some(vars.join(", "))),
        (
            "key.server_context",
            Some(format!("{:016x}", st.server_ctx)),
        ),
        ("key.fingerprint", Some(format!("{:016x}", st.fingerprint))),
        ("query_cache_type", Some(qct.to_string())),
        ("in_transaction", Some(yes_no(st.txn.followed()))),
        ("context_tracked", Some(yes_no(!st.lost_track))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::last::Current;
    use std::time::Duration;

    fn decision(v: Option<Verdict>) -> Option<&'static str> {
        v.map(|v| v.decision)
    }

    #[test]
    fn the_scan_alone_decides_what_is_not_a_plain_read() {
        let rows = [
            ("a SELECT goes to the read machine", "SELECT 1", None),
            (
                "several statements are sent",
                "SELECT 1; SELECT 2",
                Some("send"),
            ),
            ("a SQL-level EXECUTE is relayed", "EXECUTE s", Some("relay")),
            ("a CALL is relayed", "CALL p()", Some("relay")),
            ("a write is relayed", "UPDATE t SET a = 1", Some("relay")),
        ];
        for (rule, sql, want) in rows {
            let mut f = Fields::new();
            let got = decision(before_read(&crate::analysis::scan(sql.as_bytes()), &mut f));
            assert_eq!(got, want, "{rule}");
            // Only EXECUTE and CALL say what they do to the session.
            let effect = f.iter().any(|(k, _)| *k == "effect");
            assert_eq!(
                effect,
                sql.starts_with("EXECUTE") || sql.starts_with("CALL"),
                "{rule}"
            );
        }
    }

    #[test]
    fn a_prepared_statements_parameters_as_its_next_execute_keys_them() {
        let rows = [
            ("no parameters", LastExecute::None, 0, "none"),
            (
                "bound",
                LastExecute::Keyed(vec![1]),
                2,
                "2, as the last execute bound them",
            ),
            (
                "not keyed",
                LastExecute::NotKeyed(Reason::Cursor),
                1,
                "1, last execute not keyed: unknown until bound again",
            ),
            ("never executed", LastExecute::None, 3, "3, not bound yet"),
        ];
        for (rule, last, n, want) in rows {
            assert_eq!(parameters(&last, n), want, "{rule}");
        }
    }

    #[test]
    fn an_entry_is_shown_only_to_whom_may_know_of_it() {
        let k = Some(crate::cache::key(1, 1, b"SELECT 1"));
        // (rule, key, present, any servable, may see, entry_present, decision)
        let rows = [
            (
                "unbound parameters",
                None,
                false,
                false,
                true,
                UNBOUND,
                None,
            ),
            (
                "present and visible",
                k,
                true,
                true,
                true,
                "yes",
                Some("hit"),
            ),
            ("absent", k, false, false, true, "no", None),
            ("held for another view", k, false, true, true, "yes", None),
            (
                "present, hidden",
                k,
                true,
                true,
                false,
                HIDDEN,
                Some("hit or store"),
            ),
            ("absent, hidden", k, false, false, false, HIDDEN, None),
        ];
        for (rule, k, present, holds, see, shown, want) in rows {
            let mut f = Fields::new();
            let got = decision(entry(k, present, |_| holds, see, &mut f));
            assert_eq!(got, want, "{rule}");
            assert_eq!(
                f,
                vec![("entry_present", Some(shown.to_string()))],
                "{rule}"
            );
        }
    }

    #[test]
    fn a_planned_fill_says_what_the_miss_would_do() {
        let opts = crate::rules::Options::default();
        let rows: [(&str, MissStart, bool, &str); 5] = [
            ("keyed, nothing stale: stored", Ok(None), true, "store"),
            (
                "a reason not to fill",
                Err(Some(Reason::TooLarge)),
                true,
                "send",
            ),
            (
                "present but the snapshot must open",
                Err(None),
                true,
                "send",
            ),
            (
                "unbound parameters",
                Ok(None),
                false,
                "unknown until executed",
            ),
            (
                "unbound, but refused whatever the values",
                Err(Some(Reason::TooLarge)),
                false,
                "send",
            ),
        ];
        for (rule, start, keyed, want) in rows {
            let mut f = Fields::new();
            assert_eq!(
                fill(start, keyed, true, &opts, &mut f).decision,
                want,
                "{rule}"
            );
        }
        // A rule's options are shown with a store verdict.
        let opts = crate::rules::Options {
            ttl: Some(Duration::from_secs(5)),
            max_stale: None,
            cache_empty: false,
        };
        let mut f = Fields::new();
        fill(Ok(None), true, true, &opts, &mut f);
        let names: Vec<&str> = f.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, ["ttl", "cache_empty"]);
    }

    #[test]
    fn the_last_statement_says_how_it_went() {
        let last = |what: Current| Last {
            sql: b"SELECT 1".to_vec(),
            prepared: false,
            what,
            none: false,
        };
        let read = |hit, stored| Current {
            read: true,
            hit,
            stored,
            ..Current::default()
        };
        let rows = [
            (
                "relayed",
                last(Current::default()),
                "relayed (not a read: the cache was not consulted)",
            ),
            ("hit", last(read(true, false)), "hit"),
            ("stored", last(read(false, true)), "miss-stored"),
            ("not stored", last(read(false, false)), "miss-not-stored"),
            (
                "nothing yet",
                Last {
                    none: true,
                    ..Last::default()
                },
                "no statement yet",
            ),
        ];
        for (rule, l, want) in rows {
            let r = last_rows(&l);
            let outcome = r
                .rows
                .iter()
                .find(|row| row[0].as_deref() == Some("outcome"));
            assert_eq!(
                outcome.and_then(|row| row[1].as_deref()),
                Some(want),
                "{rule}"
            );
        }
    }
}
