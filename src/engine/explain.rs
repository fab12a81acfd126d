//! What `QCACHE EXPLAIN` and `SHOW QCACHE LAST` say: the verdicts and rows made of what the
//! read machine decided (`policy::decide`, driven by `session/explain.rs`), of the session's
//! state and of its previous statement. Words only: nothing here asks the server or the
//! cache; the session passes what it found.

use std::sync::Arc;

use super::last::Last;
use super::read::Resolved;
use super::state::{LastExecute, SessionState};
use crate::admin::statements::Rows;
use crate::analysis::{Hint, ReadInfo, Scan, StatementKind};
use crate::cache::{Entry, Key};
use crate::config::QueryCacheType;
use crate::policy::privileges;
use crate::policy::read;
use crate::policy::stale::{StaleOk, Why};
use crate::policy::Reason;
use crate::protocol::commands::ExecuteParams;
use crate::protocol::packets::TYPE_VAR_STRING;
use crate::rules::{Rule, Subject};

/// What the privileged fields say to a user without the privilege.
pub const HIDDEN: &str = "(needs RELOAD or admin.users)";

/// What depends on the key of a prepared statement whose parameters are not bound yet.
pub const UNBOUND: &str = "(unknown until its parameters are bound)";

/// EXPLAIN's rows: (field, value), in the order shown.
pub type Fields = Vec<(&'static str, Option<String>)>;

/// An outdated entry under a `max_stale` rule and what the stale rule says of serving it
/// (`engine::read::Lookup::miss_start`).
pub type StaleFound = (Arc<Entry>, Result<StaleOk, Why>);

/// What a miss's start says (`engine::read::Lookup::miss_start`): an outdated entry found, if any; or why
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

/// The fields `QCACHE EXPLAIN <sql>` opens with: the statement as the client sent it, and
/// the digest and normalised text of `text`, the statement as the server reads it.
pub fn statement_fields(sql: &[u8], text: &[u8]) -> Fields {
    vec![
        ("statement", Some(String::from_utf8_lossy(sql).into_owned())),
        (
            "digest",
            Some(format!("{:016x}", crate::analysis::digest(text))),
        ),
        (
            "digest_text",
            crate::analysis::normalised_text(text, crate::observe::digests::TEXT_MAX),
        ),
    ]
}

/// What of the session the key holds (`cache::key`, `policy::context`).
pub fn key_context(st: &SessionState) -> Fields {
    let (account, role) = match &st.identity {
        Some(id) => (id.account.clone(), id.role.clone()),
        None => ("(not asked yet)".to_string(), None),
    };
    let vars: Vec<String> = st.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let qct = match st.qct {
        _ if st.qct_unsure() => "(unknown: stored code may have set it)",
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
        ("context_tracked", Some(yes_no(!st.untracked()))),
    ]
}

/// The tables a read names, qualified in the session; and, for the privileged (`resolved`
/// is their resolution, None for others), the base tables under its views, the definer
/// privileges a read through a definer view depends on, and the operator's rule that
/// matches it (`what`: the statement's digest and text).
pub fn tables(
    st: &SessionState,
    info: &ReadInfo,
    resolved: Option<Resolved>,
    rules: &[Rule],
    what: (u64, &[u8]),
    f: &mut Fields,
) {
    let named: Vec<String> = info
        .tables
        .iter()
        .map(|t| match st.qualify(t.schema.as_deref(), &t.name) {
            Some((s, n)) => format!("{s}.{n}"),
            None => t.name.clone(),
        })
        .collect();
    f.push(("tables", Some(named.join(","))));
    let (named, bases) = match resolved {
        None => {
            f.push(("base_tables", Some(HIDDEN.into())));
            f.push(("rule", Some(HIDDEN.into())));
            return;
        }
        Some(Err(reason)) => {
            f.push((
                "base_tables",
                Some(format!("(not resolved: {})", reason.as_str())),
            ));
            f.push(("rule", Some("(not consulted)".into())));
            return;
        }
        Some(Ok(resolved)) => resolved,
    };
    // A read through a definer view also depends on the definer's privileges: stamps in no
    // schema (`policy::privileges::definer_stamps`).
    let (stamps, tables): (Vec<_>, Vec<_>) = bases
        .iter()
        .partition(|(s, _)| s == privileges::STAMP_SCHEMA);
    let list: Vec<String> = tables.iter().map(|(s, n)| format!("{s}.{n}")).collect();
    f.push(("base_tables", Some(list.join(","))));
    if !stamps.is_empty() {
        let list: Vec<&str> = stamps.iter().map(|(_, n)| n.as_str()).collect();
        f.push(("definer_privileges", Some(list.join(","))));
    }
    let mut subject_tables = named;
    subject_tables.extend(bases);
    let (digest, stmt) = what;
    let text = String::from_utf8_lossy(stmt);
    let subject = Subject {
        tables: &subject_tables,
        user: &st.user,
        digest,
        sql: &text,
    };
    let rule = rules
        .iter()
        .position(|r| r.matches(&subject))
        .map_or("none".to_string(), |i| {
            let body = serde_json::to_string(&rules[i]).unwrap_or_default();
            format!("rules[{i}] {body}")
        });
    f.push(("rule", Some(rule)));
}

/// A binary-protocol prepared statement as `QCACHE EXPLAIN STATEMENT` asks about it.
pub struct Statement {
    pub sql: bytes::Bytes,
    pub kind: StatementKind,
    pub hint: Hint,
    /// Its context at PREPARE, compared with the session's once a stale context is read
    /// back (`policy::read::Execute::context_moved`).
    pub context: u64,
    /// The execute's own facts as its last execute was sent (`policy::read::keyable`);
    /// `context_moved` is judged as the execute judges it, once the context is read back.
    pub execute: read::Execute,
    /// An execute's key material: its bound parameters (none to bind, or those of its last
    /// execute); None while they are not known.
    pub material: Option<Vec<u8>>,
    /// What is known of those parameters (`policy::timecol::params_known`: no date, no
    /// TIME), as the execute judges its own.
    pub params: crate::policy::timecol::Params,
}

/// What `QCACHE EXPLAIN STATEMENT <id>` (None: the statement prepared last) asks about and
/// its first rows; or its whole answer when the session holds no such statement.
pub fn statement(st: &SessionState, id: Option<u32>) -> Result<(Statement, Fields), Rows> {
    let Some(id) = id.or(st.last_stmt) else {
        return Err(rows(vec![(
            "decision",
            Some("no statement prepared in this session".into()),
        )]));
    };
    let Some(p) = st.stmts.get(&id) else {
        return Err(rows(vec![
            ("statement_id", Some(id.to_string())),
            (
                "decision",
                Some("no such prepared statement in this session".into()),
            ),
        ]));
    };
    let from_last = |r: Reason| matches!(&p.last_execute, LastExecute::NotKeyed(l) if *l == r);
    let execute = read::Execute {
        cursor: from_last(Reason::Cursor),
        cursor_open: p.cursor_open,
        long_data: from_last(Reason::LongData),
        bulk_seen: p.bulk_seen,
        context_moved: None,
        malformed: from_last(Reason::MalformedExecute),
    };
    let material = match (&p.last_execute, p.params) {
        (LastExecute::Keyed(m), _) => Some(m.clone()),
        (_, 0) => {
            let mut m = Vec::new();
            let none = ExecuteParams {
                types: None,
                null_bitmap: &[],
                values: &[],
            };
            super::prepared::execute_material(&mut m, &p.sql, p.columns, &none);
            Some(m)
        }
        _ => None,
    };
    let text = crate::analysis::server_text(&p.sql, st.server);
    let f: Fields = vec![
        (
            "statement",
            Some(String::from_utf8_lossy(&p.sql).into_owned()),
        ),
        ("statement_id", Some(id.to_string())),
        (
            "digest",
            Some(format!("{:016x}", crate::analysis::digest(&text))),
        ),
        (
            "digest_text",
            crate::analysis::normalised_text(&text, crate::observe::digests::TEXT_MAX),
        ),
        ("parameters", Some(parameters(&p.last_execute, p.params))),
    ];
    let values = material.as_deref().and_then(|m| {
        let params = super::prepared::material_params(m, p.params)?;
        Some(crate::analysis::params::param_literals(
            &params,
            p.params as usize,
        ))
    });
    // Not bound yet: what the parameters are decides only once they are, and the verdict
    // says so ("unknown until executed"); what the statement's own text decides is judged.
    let params = match &material {
        Some(_) => crate::policy::timecol::params_known(values.as_deref(), p.params),
        None => crate::policy::timecol::Params {
            not_dates: true,
            not_times: true,
        },
    };
    let asked = Statement {
        sql: p.sql.clone(),
        kind: p.kind,
        hint: p.hint,
        context: p.context,
        execute,
        material,
        params,
    };
    Ok((asked, f))
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

    fn field<'a>(f: &'a Fields, name: &str) -> Option<&'a str> {
        f.iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// One row per thing EXPLAIN STATEMENT may be asked about: none prepared, an id the
    /// session does not hold, and a statement whose key is known (no parameters, or its last
    /// execute's) or not yet (parameters never bound).
    #[test]
    fn explain_statement_asks_about_what_the_session_holds() {
        use crate::engine::state::Prepared;
        use bytes::Bytes;
        let w = crate::engine::World::new(true);
        let prepared = |params: u16, last: LastExecute| Prepared {
            context: 7,
            bulk_seen: true,
            last_execute: last,
            ..Prepared::new(
                Bytes::from_static(b"SELECT a FROM child WHERE id = ?"),
                StatementKind::Select,
                params,
                1,
            )
        };
        // (rule, statement held as 1, id asked, the answer's decision when it answers at
        // once, else whether the key is known)
        type Row = (
            &'static str,
            Option<Prepared>,
            Option<u32>,
            Result<bool, &'static str>,
        );
        let rows: Vec<Row> = vec![
            (
                "nothing prepared",
                None,
                None,
                Err("no statement prepared in this session"),
            ),
            (
                "an id the session does not hold",
                Some(prepared(0, LastExecute::None)),
                Some(2),
                Err("no such prepared statement in this session"),
            ),
            (
                "no parameters: its key is known",
                Some(prepared(0, LastExecute::None)),
                None,
                Ok(true),
            ),
            (
                "parameters never bound: not yet",
                Some(prepared(1, LastExecute::None)),
                Some(1),
                Ok(false),
            ),
            (
                "its last execute's parameters",
                Some(prepared(1, LastExecute::Keyed(b"k".to_vec()))),
                Some(1),
                Ok(true),
            ),
        ];
        for (rule, held, id, want) in rows {
            let mut st = w.session(Some("db"));
            if let Some(p) = held {
                st.stmts.insert(1, p);
                st.last_stmt = Some(1);
            }
            match (statement(&st, id), want) {
                (Ok((p, f)), Ok(known)) => {
                    assert_eq!(p.material.is_some(), known, "{rule}");
                    assert_eq!(p.context, 7, "{rule}: the context at PREPARE");
                    assert!(p.execute.bulk_seen, "{rule}: the execute's own facts");
                    assert_eq!(field(&f, "statement_id"), Some("1"), "{rule}");
                    assert!(field(&f, "parameters").is_some(), "{rule}");
                }
                (Err(r), Err(decision)) => {
                    let said = r
                        .rows
                        .iter()
                        .find(|row| row[0].as_deref() == Some("decision"));
                    assert_eq!(
                        said.and_then(|row| row[1].as_deref()),
                        Some(decision),
                        "{rule}"
                    );
                }
                _ => panic!("{rule}: answered otherwise than {want:?}"),
            }
        }
    }

    /// What EXPLAIN shows of a read's tables: to everyone the names it reads; to the
    /// privileged the base tables and the rule, or why they could not be resolved.
    #[test]
    fn explain_shows_the_tables_to_whom_it_may() {
        let w = crate::engine::World::new(true);
        let st = w.session(Some("db"));
        let info = match crate::analysis::analyze("SELECT id FROM v") {
            crate::analysis::Analysis::Read(info) => info,
            other => panic!("not a read: {other:?}"),
        };
        let resolved = || {
            (
                vec![("db".into(), "v".into())],
                vec![("db".into(), "parent".into())],
            )
        };
        // (rule, resolution, base tables shown, rule shown)
        type Row = (&'static str, Option<Resolved>, &'static str, &'static str);
        let rows: Vec<Row> = vec![
            ("not privileged", None, HIDDEN, HIDDEN),
            (
                "not resolved",
                Some(Err(Reason::UnknownTable)),
                "(not resolved: unknown_table)",
                "(not consulted)",
            ),
            (
                "resolved, no rule",
                Some(Ok(resolved())),
                "db.parent",
                "none",
            ),
        ];
        for (rule, res, bases, matched) in rows {
            let mut f = Fields::new();
            tables(&st, &info, res, &[], (1, b"SELECT id FROM v"), &mut f);
            assert_eq!(field(&f, "tables"), Some("db.v"), "{rule}");
            assert_eq!(field(&f, "base_tables"), Some(bases), "{rule}");
            assert_eq!(field(&f, "rule"), Some(matched), "{rule}");
        }
    }
}
