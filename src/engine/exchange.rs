//! One command's exchange with the server, as it changes what the session follows: the
//! point it is sent at (the transaction's read view, a write's foreign-key window, a write
//! in flight for the patch verifier), each packet of its answer (an OK that teaches the
//! parent maps or a patch), and its end (what the server's diagnostics may keep, the tables
//! a transaction's read locked, what was pending forgotten). The session sends and relays; it calls these in that order.

use super::fkslices;
use super::patch::note_patch_ok;
use super::state::SessionState;
use crate::cache::TableHandle;
use crate::protocol::response::Response;
use crate::shared::Shared;

/// Any statement about to reach the server may open the transaction's read view
/// (`policy::snapshot`): the version point is read before it goes, after the write's
/// window with the parent maps is taken.
pub fn sent(shared: &Shared, st: &mut SessionState) {
    let versions = shared.cache.versions();
    fkslices::begin(st, &versions.parents, || {
        shared.config().invalidation.derived_slices
    });
    st.txn.before_send(versions.snapshot());
    // A statement that may commit a write: the patch verifier does not compare while one
    // is in flight (its commit may be in the server's answer before its bump).
    let may_commit = !st.pending.is_empty() || st.txn.in_transaction();
    if may_commit && st.write_in_flight.is_none() {
        st.write_in_flight = Some(shared.cache.patches().write_begins());
    }
}

/// One packet of the answer (`payload`), fed to `resp` already: an OK the parent maps or a
/// patch of the pending write learn from.
#[inline]
pub fn packet(st: &mut SessionState, resp: &Response, payload: &[u8]) {
    fkslices::note_ok(&mut st.fk, resp, payload);
    note_patch_ok(&mut st.pending, resp, payload);
}

/// The answer ended: reads and writes of named tables make the server clear its
/// diagnostics, anything else keeps those a warning or error raised
/// (`policy::diagnostics::may_persist`); then [`ended`].
pub fn answered(st: &mut SessionState, resp: &Response, cacheable_read: bool) {
    let used_tables =
        cacheable_read || !st.pending.tables.is_empty() || !st.pending.rows.is_empty();
    st.diag_may_persist = crate::policy::diagnostics::may_persist(
        st.diag_may_persist,
        resp.error || resp.warnings > 0,
        used_tables,
    );
    super::prepared::bulk_answered(st, resp.err_code);
    ended(st);
}

/// A read of `tables` the server answered: inside a transaction the server now holds a
/// metadata lock on each until it ends, and entries of them may be served in it
/// (`policy::read::may_serve`). Asked after the answer, whose status opened the
/// transaction qcache follows when the read began one.
pub fn read_answered(st: &mut SessionState, tables: &[TableHandle], resp: &Response) {
    if resp.error {
        return;
    }
    if let Some(txn) = st.txn.writes_mut() {
        txn.note_read(tables);
    }
}

/// The statement is over (answered by the server or by qcache): no write in flight, its
/// foreign-key standing settled, nothing pending.
pub fn ended(st: &mut SessionState) {
    // A bulk execute not answered (a deferred BEGIN refused ahead of it) never went.
    st.bulk_in_flight = None;
    st.write_in_flight = None;
    fkslices::end(st);
    st.pending = Default::default();
    st.txn.response_ended();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::response::Expect;
    use std::sync::Arc;

    fn shared() -> Arc<Shared> {
        let mut cfg = crate::config::Config::default();
        cfg.server.upstream = "127.0.0.1:1".into();
        Arc::new(Shared::new(cfg))
    }

    /// (rule, a write pending, in a transaction: a write in flight from the send to the end)
    #[tokio::test]
    async fn a_statement_that_may_commit_is_in_flight_until_its_end() {
        let rows = [
            (
                "a read outside a transaction: nothing in flight",
                false,
                false,
                false,
            ),
            ("a write: in flight", true, false, true),
            (
                "any statement in a transaction: in flight",
                false,
                true,
                true,
            ),
        ];
        let shared = shared();
        for (rule, write, in_txn, in_flight) in rows {
            let w = crate::engine::World::new(true);
            let mut st = w.session(Some("db"));
            if in_txn {
                st.txn
                    .status_answered(crate::protocol::packets::status::IN_TRANS | 2);
            }
            if write {
                st.pending
                    .tables
                    .push(shared.cache.versions().table("db", "t"));
            }
            sent(&shared, &mut st);
            assert_eq!(st.write_in_flight.is_some(), in_flight, "{rule}");
            ended(&mut st);
            assert!(st.write_in_flight.is_none(), "{rule}: over at its end");
            assert!(st.pending.is_empty(), "{rule}: nothing pending after");
        }
    }

    /// (rule, persisted before, the answer raised a warning or error, a cacheable read,
    /// a write of a named table: may persist after)
    #[tokio::test]
    async fn what_the_server_keeps_of_its_diagnostics() {
        let rows = [
            ("a raise persists", false, true, false, false, true),
            ("a read clears", true, false, true, false, false),
            ("a write of a table clears", true, false, false, true, false),
            (
                "anything else keeps what was",
                true,
                false,
                false,
                false,
                true,
            ),
            (
                "nothing raised, nothing was",
                false,
                false,
                false,
                false,
                false,
            ),
        ];
        let shared = shared();
        for (rule, before, raised, read, write, after) in rows {
            let w = crate::engine::World::new(true);
            let mut st = w.session(Some("db"));
            st.diag_may_persist = before;
            if write {
                st.pending
                    .tables
                    .push(shared.cache.versions().table("db", "t"));
            }
            let mut resp = Response::new(Expect::Results, false);
            resp.warnings = u32::from(raised);
            answered(&mut st, &resp, read);
            assert_eq!(st.diag_may_persist, after, "{rule}");
        }
    }

    /// (rule, in a transaction, the read failed: the transaction holds the table after)
    #[tokio::test]
    async fn a_read_answered_in_a_transaction_locks_its_tables() {
        let rows = [
            ("answered in a transaction: locked", true, false, true),
            ("refused in a transaction: not", true, true, false),
            (
                "outside a transaction: nothing to hold it",
                false,
                false,
                false,
            ),
        ];
        let shared = shared();
        for (rule, in_txn, error, locked) in rows {
            let w = crate::engine::World::new(true);
            let mut st = w.session(Some("db"));
            if in_txn {
                st.txn
                    .status_answered(crate::protocol::packets::status::IN_TRANS | 2);
            }
            let t = shared.cache.versions().table("db", "t");
            let mut resp = Response::new(Expect::Results, false);
            resp.error = error;
            read_answered(&mut st, std::slice::from_ref(&t), &resp);
            let held = st.txn.writes().is_some_and(|w| w.locked(&t));
            assert_eq!(held, locked, "{rule}");
        }
    }
}
