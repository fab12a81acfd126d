//! Policy: the order of decisions for one read, sans-IO. Whether the cache is consulted at
//! all, which entry a session may be served, whether a miss may fill the cache, and whether
//! its result may be stored.
//!
//! A read reaches qcache three ways: a COM_QUERY SELECT, a COM_STMT_EXECUTE of a prepared
//! SELECT, and `QCACHE EXPLAIN` of either (which asks without sending). All three build the
//! same facts ([`Session`], [`Via`]) and drive one machine (`policy::decide`) that asks these
//! functions in this order:
//!
//! 1. [`admit`], then [`keyable`]: is the cache consulted (the session wants it, qcache
//!    follows the session, the read can be keyed)? Else the read is relayed, counting why.
//!    Between the two the session asks who it is, when it must ([`consult_view`]).
//! 2. [`may_serve`]: may the entry under the key be served in the session's read view?
//! 3. [`settle`]: on a miss, the plan (tables, rules) and the session's identity decide
//!    whether the result is filled into the cache or relayed (and whether what it may write
//!    is planned).
//! 4. [`fill`]: may the miss fill in this transaction's view, or is its result relayed?
//! 5. [`store_verdict`]: once the server answered, may the copy be stored?
//!
//! The session carries each step out (lookups, round trips, the relay); it decides none.

use super::reason::Reason;
use super::snapshot::{self, ReadView};
use crate::analysis::{Hint, ReadInfo};
use crate::config::QueryCacheType;
use crate::protocol::packets::status;
use crate::protocol::response::Response;

/// Whether a SELECT asks for the cache: `query_cache_type` with the statement's hint, as
/// MySQL's query cache decided it (text and prepared alike).
pub fn wants_cache(qct: QueryCacheType, hint: Hint) -> bool {
    match (qct, hint) {
        (QueryCacheType::Off, _) | (_, Hint::SqlNoCache) => false,
        (QueryCacheType::Demand, h) => h == Hint::SqlCache,
        (QueryCacheType::On, _) => true,
    }
}

/// Whether a statement's `SQL_CACHE` / `SQL_NO_CACHE` go to the server as the client wrote
/// them. MariaDB accepts both (its own query cache, off or on, changes no answer), and
/// whatever shows the server's copy of a statement (the optimizer trace, the process list,
/// the logs) must show what the client sent. MySQL 8.0 refuses `SQL_CACHE` and warns on
/// `SQL_NO_CACHE`, so there they are removed. Either way the key is the hint-free text.
pub fn hints_reach_server(mariadb: bool) -> bool {
    mariadb
}

/// Why a relayed read was not cached, as counted once the server answered (`refused`: its
/// error code, if it refused). A read the server refused for want of a privilege counts as
/// `error`, whatever kept it from the cache: the server answers those alike for every name
/// (1142 for a table, a view of any kind or a missing name in a database the user cannot
/// read), and what qcache says of the read (`SHOW QCACHE LAST`, the public
/// `Qcache_not_cached_*` counters) must tell no more (#35 class 10). Other refusals name
/// what the server named (1146 for a missing table): the planned reason stands.
pub fn reason_answered(reason: Reason, refused: Option<u16>) -> Reason {
    match refused {
        Some(code) if denied(code) => Reason::Error,
        _ => reason,
    }
}

/// The server's "access denied" answers: to a table or column, a database, a routine, or
/// a privilege the statement needs.
fn denied(code: u16) -> bool {
    matches!(code, 1044 | 1142 | 1143 | 1227 | 1370)
}

/// What the decisions read of the session (the session passes it; nothing here holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    pub qct: QueryCacheType,
    /// qcache no longer knows the session's context (a multi-statement SET, a procedure…).
    pub lost_track: bool,
    /// The session ran stored code that may have created temporary tables the catalog
    /// cannot yet rule out (`policy::classify::after_stored_code`).
    pub temporaries_unknown: bool,
    /// The server records the session's statements where it can read them back (its
    /// optimizer trace, its profiles: `policy::context::Recorders`), and why not to cache:
    /// such a session is served nothing and sent nothing of qcache's (no read-back, no
    /// identity ask), so every read reaches the server as directly.
    pub quiet: Option<Reason>,
}

/// How a read reached qcache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A COM_QUERY SELECT (or EXPLAIN of one). Keyed by its text whoever the session is;
    /// its identity is judged after its plan ([`settle`]), so that a read the cache could
    /// never hold counts its own reason.
    Text,
    /// A COM_STMT_EXECUTE of a prepared SELECT (or EXPLAIN STATEMENT of one).
    Execute(Execute),
}

/// What an execute adds to the decision, read from its packet and its statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Execute {
    /// It opens a cursor: its rows come by COM_STMT_FETCH, which no entry answers.
    pub cursor: bool,
    /// The server holds a cursor an earlier execute of the statement opened
    /// ([`cursor_after_execute`]). The server closes it when it runs the statement again; an
    /// execute served from the cache would leave it open, and a COM_STMT_FETCH after it
    /// would read rows of a cursor the client closed, where the server answers 1421.
    pub cursor_open: bool,
    /// Some parameter came by COM_STMT_SEND_LONG_DATA, which the key does not hold.
    pub long_data: bool,
    /// The statement was bulk-executed once: the server's idea of its parameters is not
    /// qcache's (`Prepared::bulk_seen`).
    pub bulk_seen: bool,
    /// The session's database or parsing rules differ from those it was prepared under
    /// (`policy::context::prepared_context_moved`).
    pub context_moved: Option<Reason>,
    /// Its parameters could not be read as the statement declares them.
    pub malformed: bool,
}

/// Step 0, before the statement is scanned: whether its bytes may be looked up as they are.
/// Entries are stored under the hint-free text of one cacheable SELECT, and equal bytes scan
/// alike, so bytes that find an entry are that SELECT, without hints, in a session that
/// wants it: only a session with `query_cache_type` ON (no hint can matter) whose context
/// qcache follows and has read back (`ctx_stale`: a trigger may have changed a setting the
/// key holds). Anything else takes the full path.
pub fn before_scan(starts_with_select: bool, s: &Session, ctx_stale: bool) -> bool {
    starts_with_select
        && s.qct == QueryCacheType::On
        && !s.lost_track
        && !s.temporaries_unknown
        && !ctx_stale
}

/// Step 1: Ok when the session wants the cache for this read and qcache follows the
/// session; Err to relay it uncached, counting why (a relayed read is not one the cache
/// could hold: `cacheable_read` false). After this the session asks who it is, if it must.
pub fn admit(s: &Session, hint: Hint) -> Result<(), Reason> {
    if !wants_cache(s.qct, hint) {
        return Err(Reason::NotRequested);
    }
    if s.lost_track {
        return Err(Reason::SessionUntracked);
    }
    if s.temporaries_unknown {
        return Err(Reason::TemporariesUnknown);
    }
    if let Some(reason) = s.quiet {
        return Err(reason);
    }
    Ok(())
}

/// Step 1b: Ok when the read can be keyed. Text always can; an execute only for a known
/// session (its key material is kept for EXPLAIN STATEMENT, which must not show one built
/// for no one) and when the execute itself carries nothing the key does not hold.
pub fn keyable(via: &Via, identified: bool) -> Result<(), Reason> {
    let Via::Execute(e) = via else {
        return Ok(());
    };
    if !identified {
        return Err(Reason::IdentityUnknown);
    }
    if e.cursor {
        return Err(Reason::Cursor);
    }
    if e.cursor_open {
        return Err(Reason::CursorOpen);
    }
    if e.long_data {
        return Err(Reason::LongData);
    }
    if e.bulk_seen {
        return Err(Reason::MalformedExecute);
    }
    if let Some(r) = e.context_moved {
        return Err(r);
    }
    if e.malformed {
        return Err(Reason::MalformedExecute);
    }
    Ok(())
}

/// Whether the server holds an open cursor for a prepared statement after an execute of it
/// reached the server: `cursor`, the answer said a cursor exists (SERVER_STATUS_CURSOR_EXISTS);
/// `error`, the answer was an error, which may come before the server closed the cursor it
/// held (`was_open`): it is still counted open. A reset or close of the statement closes it
/// too; keeping it counted open there costs one execute sent, never a wrong answer.
pub fn cursor_after_execute(was_open: bool, cursor: bool, error: bool) -> bool {
    cursor || (error && was_open)
}

/// The view the cache is consulted in: none while hits are suspended (the binlog tail fell
/// behind) or while the session is not identified.
pub fn consult_view<S>(
    view: ReadView<S>,
    hits_suspended: bool,
    identified: bool,
) -> Option<ReadView<S>> {
    (!hits_suspended && identified).then_some(view)
}

/// What an entry's stamps and the session say about one entry, asked only as the view needs
/// (each answer walks the entry's tables).
pub trait EntryFacts<S> {
    /// Its stamps are current (no table it depends on changed since it was stored).
    fn current(&self) -> bool;
    /// Its stamps are valid in a transaction's snapshot taken at `point`.
    fn valid_in(&self, point: &S) -> bool;
    /// The transaction wrote one of its tables (the server answers with its own rows).
    fn written_in_transaction(&self) -> bool;
    /// One of its tables is shadowed by a temporary table of this session.
    fn shadowed(&self) -> bool;
    /// Every table of it was read by a statement this transaction sent the server, which
    /// holds a shared metadata lock on each until the transaction ends.
    fn locked_in_transaction(&self) -> bool;
}

/// Step 2: whether an entry may be served in `view`. A transaction whose view may not be
/// open yet is never served: the read must reach the server so that the view opens no later
/// than it (`policy::snapshot`). Nor is a transaction served an entry of a table it has not
/// read on the server yet: the server's read takes a shared metadata lock on each table,
/// held until the transaction ends, so that another session's DDL on it waits (or fails
/// with 1205) and the transaction keeps reading the table it knew; a hit takes no lock, and
/// the DDL would go through at once (the transaction's next read of the table then fails
/// with 1412).
pub fn may_serve<S>(view: &ReadView<S>, e: &impl EntryFacts<S>) -> bool {
    let usable = match view {
        ReadView::Establishing(_) => return false,
        ReadView::Plain => e.current(),
        ReadView::Snapshot(point) => {
            e.valid_in(point) && !e.written_in_transaction() && e.locked_in_transaction()
        }
    };
    usable && !e.shadowed()
}

/// Schemas whose contents change without writes qcache could see.
pub const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

/// Step 3a, on a miss: what rules a read out before its tables are looked at. `is_read`:
/// the analysis took it for a read; `auto_is_null`: the session runs under
/// `sql_auto_is_null` (`WHERE id IS NULL` means the last insert id, which no key holds);
/// `settings`: the assignments of a `SET STATEMENT … FOR` read (`Some(None)` when they could
/// not be read; None for a read without them).
pub fn before_tables(
    is_read: bool,
    auto_is_null: bool,
    settings: Option<Option<&[(String, String)]>>,
) -> Result<(), Reason> {
    if !is_read {
        return Err(Reason::NotARead);
    }
    if auto_is_null {
        return Err(Reason::AutoIsNull);
    }
    match settings {
        Some(assignments) => super::context::statement_settings(assignments),
        None => Ok(()),
    }
}

/// Step 3b: the tables a read names, qualified by the session's default database (`db`,
/// lower-cased as the catalog keys them); never a system schema nor a temporary table of
/// the session (`temporary`), whose rows no write qcache sees.
pub fn qualify_tables(
    info: &ReadInfo,
    db: Option<&str>,
    temporary: impl Fn(&(String, String)) -> bool,
) -> Result<Vec<(String, String)>, Reason> {
    info.verdict.map_err(Reason::from)?;
    if info.tables.is_empty() {
        return Err(Reason::NoTable);
    }
    let mut named = Vec::with_capacity(info.tables.len());
    for t in &info.tables {
        let q =
            crate::analysis::qualify(t.schema.as_deref(), &t.name, db).ok_or(Reason::NoDatabase)?;
        if SYSTEM_SCHEMAS.contains(&q.0.as_str()) {
            return Err(Reason::SystemSchema);
        }
        if temporary(&q) {
            return Err(Reason::TemporaryTable);
        }
        named.push(q);
    }
    Ok(named)
}

/// Step 3c: the operator's `[[rules]]` on a read whose tables are known: Err to leave it
/// uncached, else what its rule sets (TTL, `max_stale`, `cache_empty`). A rule may name a view as the statement does, or a table under
/// it (not the privilege stamps of DEFINER views, which are no tables).
pub fn rules_verdict(
    rules: &[crate::rules::Rule],
    mut named: Vec<(String, String)>,
    bases: Vec<(String, String)>,
    user: &str,
    digest: u64,
    sql: &[u8],
) -> Result<crate::rules::Options, Reason> {
    use crate::rules::{evaluate, Options, Subject, Verdict};
    let text = String::from_utf8_lossy(sql);
    named.extend(bases.into_iter().filter(|(s, _)| !s.is_empty()));
    let subject = Subject {
        tables: &named,
        user,
        digest,
        sql: &text,
    };
    match evaluate(rules, &subject) {
        Verdict::Never => Err(Reason::Rule),
        Verdict::Cache(opts) => Ok(opts),
        Verdict::Default => Ok(Options::default()),
    }
}

/// What a read does after its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned<P> {
    /// A cacheable read: fill the cache with its result ([`fill`] decides the view).
    Fill(P),
    /// Relay it counting `reason`. `cacheable`: the read is one the cache could hold (it
    /// writes nothing), so it may travel with a deferred BEGIN; otherwise what it may write
    /// is planned before it is sent.
    Relay { reason: Reason, cacheable: bool },
}

/// A read refused at [`admit`] or [`keyable`]: relayed uncached, and what it may write (a
/// stored function, a sequence, a shape that parses as a write) is planned before it is
/// sent, as for any read the cache cannot hold. Not wanting the cache never means not
/// invalidating: another session's entries must not outlive what this read wrote.
pub fn refused<P>(reason: Reason) -> Planned<P> {
    Planned::Relay {
        reason,
        cacheable: false,
    }
}

/// Step 3: the plan's verdict with the session's identity. The same for every path.
pub fn settle<P>(plan: Result<P, Reason>, identified: bool) -> Planned<P> {
    match plan {
        Err(reason) => Planned::Relay {
            reason,
            cacheable: false,
        },
        // A key without the session's identity would serve one account's rows to another.
        Ok(_) if !identified => Planned::Relay {
            reason: Reason::IdentityUnknown,
            cacheable: true,
        },
        Ok(plan) => Planned::Fill(plan),
    }
}

/// Step 4: the read view a miss may fill the cache in; else why its result is relayed
/// without a copy: a reason not to cache, or None when the result is already cached and only
/// this read could not be served from it. `unchanged(point)`: the plan's tables did not
/// change since `point`; `present`: an entry this read could be served is already stored.
pub fn fill<S: Copy>(
    view: Option<ReadView<S>>,
    unchanged: impl FnOnce(S) -> bool,
    present: impl FnOnce() -> bool,
) -> Result<ReadView<S>, Option<Reason>> {
    let Some(view) = view else {
        return Err(Some(Reason::HitsSuspended));
    };
    let unchanged = view.store_point().is_none_or(unchanged);
    // A table changed since this transaction's snapshot: the server answers from the
    // snapshot, which no other session sees, so the result can never be stored. Decided
    // before claiming, so no other session waits on a fill that cannot land, and the
    // result is relayed without a copy.
    snapshot::may_store(view, unchanged).map_err(Some)?;
    if present() {
        // A read that reached the server though its result is cached, because it could
        // not be served from it: the one that opens a transaction's snapshot, once per
        // read-only transaction. Nothing to copy or store.
        return Err(None);
    }
    Ok(view)
}

/// Step 5: why a relayed result is not stored, if it is not. `overflow`: the copy outgrew
/// `cache.max_result_bytes`; `storable`: its tables did not change since the view's point.
pub fn store_verdict(resp: &Response, overflow: bool, storable: bool) -> Option<Reason> {
    if resp.error {
        return Some(Reason::Error);
    }
    if overflow {
        return Some(Reason::TooLarge);
    }
    if resp.result_sets != 1 || resp.oks != 0 {
        return Some(Reason::MultiResult);
    }
    if resp.warnings != 0 {
        return Some(Reason::Warnings);
    }
    if resp.cursor {
        return Some(Reason::Cursor);
    }
    let last = resp.last_status.unwrap_or(0);
    // METADATA_CHANGED says this execute re-prepared its statement after DDL with another
    // column count: a fact of that execution, not of the result. The statement's next
    // execute is not flagged, nor is one of a statement prepared after the DDL; one
    // prepared before it is keyed apart (`engine::prepared::execute_key`) and reaches the
    // server, which flags it.
    if last & (status::MORE_RESULTS | status::SESSION_STATE_CHANGED | status::METADATA_CHANGED) != 0
    {
        return Some(Reason::SessionStateChanged);
    }
    if !storable {
        return Some(Reason::ChangedSinceSnapshot);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::response::Expect;

    const ON: QueryCacheType = QueryCacheType::On;
    const OFF: QueryCacheType = QueryCacheType::Off;
    const DEMAND: QueryCacheType = QueryCacheType::Demand;

    #[test]
    fn wants_cache_is_query_cache_type_with_the_hint() {
        let rows = [
            (ON, Hint::None, true),
            (ON, Hint::SqlCache, true),
            (ON, Hint::SqlNoCache, false),
            (OFF, Hint::None, false),
            (OFF, Hint::SqlCache, false),
            (DEMAND, Hint::None, false),
            (DEMAND, Hint::SqlCache, true),
            (DEMAND, Hint::SqlNoCache, false),
        ];
        for (qct, hint, want) in rows {
            assert_eq!(wants_cache(qct, hint), want, "{qct:?} {hint:?}");
        }
    }

    fn s(qct: QueryCacheType, lost_track: bool) -> Session {
        Session {
            qct,
            lost_track,
            temporaries_unknown: false,
            quiet: None,
        }
    }

    /// A followed ON session that ran stored code the catalog cannot yet vouch for.
    fn unvouched() -> Session {
        Session {
            temporaries_unknown: true,
            ..s(ON, false)
        }
    }

    #[test]
    fn before_scan_only_for_a_followed_on_session() {
        let rows = [
            ("a SELECT, ON, followed", true, s(ON, false), false, true),
            ("not a SELECT", false, s(ON, false), false, false),
            (
                "DEMAND: the hint decides",
                true,
                s(DEMAND, false),
                false,
                false,
            ),
            ("OFF", true, s(OFF, false), false, false),
            ("untracked", true, s(ON, true), false, false),
            ("temporaries unknown", true, unvouched(), false, false),
            ("settings to read back", true, s(ON, false), true, false),
        ];
        for (what, select, session, stale, want) in rows {
            assert_eq!(before_scan(select, &session, stale), want, "{what}");
        }
    }

    #[test]
    fn hints_reach_only_a_server_that_accepts_them() {
        assert!(hints_reach_server(true), "MariaDB");
        assert!(!hints_reach_server(false), "MySQL 8.0 refuses SQL_CACHE");
    }

    #[test]
    fn admit_one_row_per_reason() {
        let rows = [
            (s(ON, false), Hint::None, Ok(())),
            (s(OFF, false), Hint::None, Err(Reason::NotRequested)),
            (s(DEMAND, false), Hint::None, Err(Reason::NotRequested)),
            (s(DEMAND, false), Hint::SqlCache, Ok(())),
            (s(ON, true), Hint::None, Err(Reason::SessionUntracked)),
            (unvouched(), Hint::None, Err(Reason::TemporariesUnknown)),
            // Not wanted counts before untracked: the session asked for nothing.
            (s(OFF, true), Hint::None, Err(Reason::NotRequested)),
            (s(ON, false), Hint::SqlNoCache, Err(Reason::NotRequested)),
            (
                Session {
                    quiet: Some(Reason::OptimizerTrace),
                    ..s(ON, false)
                },
                Hint::None,
                Err(Reason::OptimizerTrace),
            ),
            // Untracked counts before quiet, as the session's state is the broader cause.
            (
                Session {
                    quiet: Some(Reason::Profiling),
                    ..s(ON, true)
                },
                Hint::None,
                Err(Reason::SessionUntracked),
            ),
        ];
        for (session, hint, want) in rows {
            assert_eq!(admit(&session, hint), want, "{session:?} {hint:?}");
        }
    }

    #[test]
    fn keyable_one_row_per_reason_in_the_order_an_execute_meets_them() {
        let clean = Execute::default();
        let moved = Some(Reason::PreparedContextMoved);
        let rows = [
            (Via::Text, false, Ok(())),
            (Via::Text, true, Ok(())),
            (Via::Execute(clean), true, Ok(())),
            (Via::Execute(clean), false, Err(Reason::IdentityUnknown)),
            (
                Via::Execute(Execute {
                    cursor: true,
                    long_data: true,
                    ..clean
                }),
                false,
                Err(Reason::IdentityUnknown),
            ),
            (
                Via::Execute(Execute {
                    cursor: true,
                    long_data: true,
                    ..clean
                }),
                true,
                Err(Reason::Cursor),
            ),
            (
                Via::Execute(Execute {
                    cursor_open: true,
                    long_data: true,
                    ..clean
                }),
                true,
                Err(Reason::CursorOpen),
            ),
            (
                Via::Execute(Execute {
                    cursor_open: true,
                    ..clean
                }),
                false,
                Err(Reason::IdentityUnknown),
            ),
            (
                Via::Execute(Execute {
                    long_data: true,
                    bulk_seen: true,
                    ..clean
                }),
                true,
                Err(Reason::LongData),
            ),
            (
                Via::Execute(Execute {
                    bulk_seen: true,
                    context_moved: moved,
                    ..clean
                }),
                true,
                Err(Reason::MalformedExecute),
            ),
            (
                Via::Execute(Execute {
                    context_moved: moved,
                    malformed: true,
                    ..clean
                }),
                true,
                Err(Reason::PreparedContextMoved),
            ),
            (
                Via::Execute(Execute {
                    malformed: true,
                    ..clean
                }),
                true,
                Err(Reason::MalformedExecute),
            ),
        ];
        for (via, identified, want) in rows {
            assert_eq!(keyable(&via, identified), want, "{via:?} {identified}");
        }
    }

    /// (was open, the answer said a cursor exists, the answer was an error, open after).
    #[test]
    fn a_cursor_stays_open_until_an_execute_closes_it() {
        let rows = [
            (false, false, false, false),
            (false, true, false, true),
            (true, false, false, false),
            (true, true, false, true),
            // An error may come before the server closed the cursor it held.
            (true, false, true, true),
            (false, false, true, false),
        ];
        for (was_open, cursor, error, want) in rows {
            assert_eq!(
                cursor_after_execute(was_open, cursor, error),
                want,
                "open {was_open}, cursor {cursor}, error {error}"
            );
        }
    }

    #[test]
    fn consult_view_needs_hits_and_an_identity() {
        let rows = [
            (false, true, Some(ReadView::Plain)),
            (true, true, None),
            (false, false, None),
            (true, false, None),
        ];
        for (suspended, identified, want) in rows {
            assert_eq!(
                consult_view(ReadView::<u32>::Plain, suspended, identified),
                want,
                "suspended {suspended} identified {identified}"
            );
        }
    }

    /// An entry's facts as plain answers; `point` is the newest snapshot it is valid in.
    struct E {
        current: bool,
        valid_since: u32,
        written: bool,
        shadowed: bool,
        locked: bool,
    }

    impl EntryFacts<u32> for E {
        fn current(&self) -> bool {
            self.current
        }
        fn valid_in(&self, point: &u32) -> bool {
            *point >= self.valid_since
        }
        fn written_in_transaction(&self) -> bool {
            self.written
        }
        fn shadowed(&self) -> bool {
            self.shadowed
        }
        fn locked_in_transaction(&self) -> bool {
            self.locked
        }
    }

    #[test]
    fn may_serve_one_row_per_rule() {
        let fresh = E {
            current: true,
            valid_since: 5,
            written: false,
            shadowed: false,
            locked: true,
        };
        let stale = E {
            current: false,
            ..fresh
        };
        let shadowed = E {
            shadowed: true,
            ..fresh
        };
        let written = E {
            written: true,
            ..fresh
        };
        let unlocked = E {
            locked: false,
            ..fresh
        };
        let rows: [(&str, ReadView<u32>, &E, bool); 12] = [
            ("plain, current", ReadView::Plain, &fresh, true),
            ("plain, stale", ReadView::Plain, &stale, false),
            (
                "plain, shadowed by a temporary table",
                ReadView::Plain,
                &shadowed,
                false,
            ),
            (
                "snapshot after the entry",
                ReadView::Snapshot(7),
                &fresh,
                true,
            ),
            // A snapshot older than the entry's change: the transaction sees older rows.
            (
                "snapshot before the entry",
                ReadView::Snapshot(3),
                &fresh,
                false,
            ),
            // Valid in the snapshot though no longer current: the snapshot is older.
            ("snapshot, stale now", ReadView::Snapshot(7), &stale, true),
            (
                "snapshot, written in it",
                ReadView::Snapshot(7),
                &written,
                false,
            ),
            (
                "snapshot, shadowed",
                ReadView::Snapshot(7),
                &shadowed,
                false,
            ),
            // The transaction holds no metadata lock on a table it has not read on the
            // server: a hit would let another session's DDL through.
            (
                "snapshot, a table not read in it yet",
                ReadView::Snapshot(7),
                &unlocked,
                false,
            ),
            // Outside a transaction the server keeps no lock past the statement.
            ("plain, not locked", ReadView::Plain, &unlocked, true),
            (
                "view not open yet",
                ReadView::Establishing(None),
                &fresh,
                false,
            ),
            (
                "view not open, point known",
                ReadView::Establishing(Some(7)),
                &fresh,
                false,
            ),
        ];
        for (what, view, e, want) in rows {
            assert_eq!(may_serve(&view, e), want, "{what}");
        }
    }

    #[test]
    fn a_refused_read_plans_what_it_may_write() {
        for reason in [
            Reason::NotRequested,
            Reason::SessionUntracked,
            Reason::Cursor,
        ] {
            assert_eq!(
                refused::<()>(reason),
                Planned::Relay {
                    reason,
                    cacheable: false
                }
            );
        }
    }

    #[test]
    fn settle_one_row_per_outcome() {
        let rows: [(Result<u8, Reason>, bool, Planned<u8>); 4] = [
            (Ok(1), true, Planned::Fill(1)),
            (
                Ok(1),
                false,
                Planned::Relay {
                    reason: Reason::IdentityUnknown,
                    cacheable: true,
                },
            ),
            // The plan's own reason wins over the identity: the read could never be cached,
            // and what it may write is planned.
            (
                Err(Reason::NoTable),
                false,
                Planned::Relay {
                    reason: Reason::NoTable,
                    cacheable: false,
                },
            ),
            (
                Err(Reason::Rule),
                true,
                Planned::Relay {
                    reason: Reason::Rule,
                    cacheable: false,
                },
            ),
        ];
        for (plan, identified, want) in rows {
            assert_eq!(settle(plan, identified), want, "{plan:?} {identified}");
        }
    }

    #[test]
    fn fill_one_row_per_rule() {
        type Row = (
            &'static str,
            Option<ReadView<u32>>,
            bool,
            bool,
            Result<ReadView<u32>, Option<Reason>>,
        );
        let rows: [Row; 7] = [
            (
                "hits suspended",
                None,
                true,
                false,
                Err(Some(Reason::HitsSuspended)),
            ),
            (
                "plain",
                Some(ReadView::Plain),
                true,
                false,
                Ok(ReadView::Plain),
            ),
            // A plain read's result is current whatever changed: no point to compare.
            (
                "plain, tables changed",
                Some(ReadView::Plain),
                false,
                false,
                Ok(ReadView::Plain),
            ),
            (
                "plain, already cached",
                Some(ReadView::Plain),
                true,
                true,
                Err(None),
            ),
            (
                "snapshot, unchanged since its point",
                Some(ReadView::Snapshot(4)),
                true,
                false,
                Ok(ReadView::Snapshot(4)),
            ),
            (
                "snapshot, changed since its point",
                Some(ReadView::Snapshot(4)),
                false,
                false,
                Err(Some(Reason::ChangedSinceSnapshot)),
            ),
            (
                "opening the view with no point yet",
                Some(ReadView::Establishing(None)),
                false,
                false,
                Ok(ReadView::Establishing(None)),
            ),
        ];
        for (what, view, unchanged, present, want) in rows {
            assert_eq!(fill(view, |_| unchanged, || present), want, "{what}");
        }
    }

    #[test]
    fn store_verdict_one_row_per_reason() {
        let ok = || {
            let mut r = Response::new(Expect::Results, true);
            r.result_sets = 1;
            r.last_status = Some(status::AUTOCOMMIT);
            r
        };
        let with = |f: fn(&mut Response)| {
            let mut r = ok();
            f(&mut r);
            r
        };
        let rows: [(&str, Response, bool, bool, Option<Reason>); 11] = [
            ("one clean result set", ok(), false, true, None),
            (
                "error",
                with(|r| r.error = true),
                false,
                true,
                Some(Reason::Error),
            ),
            ("too large", ok(), true, true, Some(Reason::TooLarge)),
            (
                "two result sets",
                with(|r| r.result_sets = 2),
                false,
                true,
                Some(Reason::MultiResult),
            ),
            (
                "an OK besides",
                with(|r| r.oks = 1),
                false,
                true,
                Some(Reason::MultiResult),
            ),
            (
                "warnings",
                with(|r| r.warnings = 1),
                false,
                true,
                Some(Reason::Warnings),
            ),
            (
                "cursor",
                with(|r| r.cursor = true),
                false,
                true,
                Some(Reason::Cursor),
            ),
            (
                "more results",
                with(|r| r.last_status = Some(status::MORE_RESULTS)),
                false,
                true,
                Some(Reason::SessionStateChanged),
            ),
            (
                "session state changed",
                with(|r| r.last_status = Some(status::SESSION_STATE_CHANGED)),
                false,
                true,
                Some(Reason::SessionStateChanged),
            ),
            (
                "re-prepared with other columns",
                with(|r| r.last_status = Some(status::AUTOCOMMIT | status::METADATA_CHANGED)),
                false,
                true,
                Some(Reason::SessionStateChanged),
            ),
            (
                "changed since the snapshot",
                ok(),
                false,
                false,
                Some(Reason::ChangedSinceSnapshot),
            ),
        ];
        for (what, resp, overflow, storable, want) in rows {
            assert_eq!(store_verdict(&resp, overflow, storable), want, "{what}");
        }
    }

    fn n(s: &str, t: &str) -> (String, String) {
        (s.to_string(), t.to_string())
    }

    #[test]
    fn before_tables_one_row_per_reason() {
        let literal = [n("max_statement_time", "5")];
        let from_var = [n("max_statement_time", "@t")];
        let auto = [n("sql_auto_is_null", "1")];
        type Settings<'a> = Option<Option<&'a [(String, String)]>>;
        type Row<'a> = (&'a str, bool, bool, Settings<'a>, Result<(), Reason>);
        let rows: [Row; 8] = [
            ("a read", true, false, None, Ok(())),
            ("not a read", false, false, None, Err(Reason::NotARead)),
            // Not a read counts first, whatever the session.
            (
                "not a read, auto_is_null",
                false,
                true,
                None,
                Err(Reason::NotARead),
            ),
            (
                "sql_auto_is_null",
                true,
                true,
                None,
                Err(Reason::AutoIsNull),
            ),
            (
                "SET STATEMENT of a literal",
                true,
                false,
                Some(Some(&literal)),
                Ok(()),
            ),
            (
                "SET STATEMENT of a variable",
                true,
                false,
                Some(Some(&from_var)),
                Err(Reason::StatementSettings),
            ),
            (
                "SET STATEMENT unreadable",
                true,
                false,
                Some(None),
                Err(Reason::StatementSettings),
            ),
            (
                "SET STATEMENT sql_auto_is_null=1",
                true,
                false,
                Some(Some(&auto)),
                Err(Reason::AutoIsNull),
            ),
        ];
        for (what, is_read, auto_is_null, settings, want) in rows {
            assert_eq!(
                before_tables(is_read, auto_is_null, settings),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn qualify_tables_one_row_per_reason() {
        use crate::analysis::{NotCached, TableRef};
        let read = |tables: &[(Option<&str>, &str)]| ReadInfo {
            tables: tables.iter().map(|(s, t)| TableRef::new(*s, t)).collect(),
            verdict: Ok(()),
            may_write: false,
        };
        let temp = |q: &(String, String)| q == &n("app", "scratch");
        type Row<'a> = (
            &'a str,
            ReadInfo,
            Option<&'a str>,
            Result<Vec<(String, String)>, Reason>,
        );
        let rows: Vec<Row> = vec![
            (
                "default database",
                read(&[(None, "T")]),
                Some("App"),
                Ok(vec![n("app", "t")]),
            ),
            (
                "qualified and not",
                read(&[(Some("Other"), "u"), (None, "t")]),
                Some("app"),
                Ok(vec![n("other", "u"), n("app", "t")]),
            ),
            (
                "no database",
                read(&[(None, "t")]),
                None,
                Err(Reason::NoDatabase),
            ),
            ("no table", read(&[]), Some("app"), Err(Reason::NoTable)),
            (
                "system schema",
                read(&[(Some("MySQL"), "user")]),
                Some("app"),
                Err(Reason::SystemSchema),
            ),
            (
                "information_schema by default",
                read(&[(None, "tables")]),
                Some("information_schema"),
                Err(Reason::SystemSchema),
            ),
            (
                "temporary table",
                read(&[(None, "scratch")]),
                Some("app"),
                Err(Reason::TemporaryTable),
            ),
            (
                "the analysis said no",
                ReadInfo {
                    verdict: Err(NotCached::UserVariable),
                    ..read(&[(None, "t")])
                },
                Some("app"),
                Err(Reason::from(NotCached::UserVariable)),
            ),
        ];
        for (what, info, db, want) in rows {
            assert_eq!(qualify_tables(&info, db, temp), want, "{what}");
        }
    }

    #[test]
    fn rules_verdict_one_row_per_outcome() {
        #[derive(serde::Deserialize)]
        struct W {
            rules: Vec<crate::rules::Rule>,
        }
        let rules = toml::from_str::<W>(
            r#"
            [[rules]]
            table = "secrets"
            action = "never"
            [[rules]]
            schema = "catalog"
            action = "cache"
            ttl = "30s"
            "#,
        )
        .expect("rules parse")
        .rules;
        let ttl = |ttl| crate::rules::Options {
            ttl,
            ..crate::rules::Options::default()
        };
        let rows = [
            (
                "no rule matches",
                vec![n("app", "t")],
                vec![],
                Ok(ttl(None)),
            ),
            (
                "never",
                vec![n("app", "secrets")],
                vec![],
                Err(Reason::Rule),
            ),
            (
                "cache with a TTL",
                vec![n("catalog", "items")],
                vec![],
                Ok(ttl(Some(std::time::Duration::from_secs(30)))),
            ),
            // A rule on a table under a view the statement names.
            (
                "a base table under a view",
                vec![n("app", "v")],
                vec![n("app", "secrets")],
                Err(Reason::Rule),
            ),
            // A definer view's privilege stamps are no tables.
            (
                "a privilege stamp",
                vec![n("app", "v")],
                vec![n("", "secrets")],
                Ok(ttl(None)),
            ),
        ];
        for (what, named, bases, want) in rows {
            assert_eq!(
                rules_verdict(&rules, named, bases, "app", 0, b"SELECT 1"),
                want,
                "{what}"
            );
        }
        assert_eq!(
            rules_verdict(&[], vec![], vec![], "app", 0, b""),
            Ok(ttl(None))
        );
    }

    /// A text read and an execute with nothing of its own take the same decision at every
    /// step, for every session: the paths differ only by what an execute adds.
    #[test]
    fn text_and_a_clean_execute_decide_alike() {
        for qct in [ON, OFF, DEMAND] {
            for lost_track in [false, true] {
                for hint in [Hint::None, Hint::SqlCache, Hint::SqlNoCache] {
                    let session = s(qct, lost_track);
                    let text = admit(&session, hint).and_then(|()| keyable(&Via::Text, true));
                    let exec = admit(&session, hint)
                        .and_then(|()| keyable(&Via::Execute(Execute::default()), true));
                    assert_eq!(text, exec, "{session:?} {hint:?}");
                }
            }
        }
    }

    /// A read the server refused for want of a privilege counts as `error`; the planned
    /// reason stands for any other answer.
    #[test]
    fn a_denied_read_tells_no_more_than_the_server() {
        let rows = [
            ("answered", Reason::UnknownTable, None, Reason::UnknownTable),
            (
                "no such table (1146)",
                Reason::UnknownTable,
                Some(1146),
                Reason::UnknownTable,
            ),
            (
                "table denied (1142)",
                Reason::UnknownTable,
                Some(1142),
                Reason::Error,
            ),
            (
                "column denied (1143)",
                Reason::NonDeterministic,
                Some(1143),
                Reason::Error,
            ),
            (
                "database denied (1044)",
                Reason::UnknownTable,
                Some(1044),
                Reason::Error,
            ),
            (
                "privilege needed (1227)",
                Reason::NonDeterministic,
                Some(1227),
                Reason::Error,
            ),
            (
                "routine denied (1370)",
                Reason::NonDeterministic,
                Some(1370),
                Reason::Error,
            ),
            (
                "a syntax error (1064)",
                Reason::UnexpectedShape,
                Some(1064),
                Reason::UnexpectedShape,
            ),
        ];
        for (rule, planned, code, want) in rows {
            assert_eq!(reason_answered(planned, code), want, "{rule}");
        }
    }
}
