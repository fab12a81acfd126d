//! What a statement's answer applies before the client can act on it: its pending writes'
//! invalidation (with the foreign-key answers the session asked for), the DDL it registers,
//! the cached aggregates its known rows patch instead, what the parent maps learn, and what
//! a transaction the answer ended wrote. The session asks the server what the foreign-key
//! slices need first, and afterwards queues the DDL's catalog reload, spawns the patch
//! verifier and flushes L2.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::fkslices::{self, Answers};
use super::state::SessionState;
use crate::cache::patches::{Candidate, PatchWrite, ToVerify};
use crate::cache::writes::{Changed, Pending};
use crate::cache::{Cache, Stamps};
use crate::faults::Fault;
use crate::invalidation::writes;
use crate::policy::patch::Patched;
use crate::policy::verify::Outcome;
use crate::shared::Shared;

/// What applying a write's answer leaves the session to carry out.
#[derive(Default)]
pub struct Applied {
    /// A DDL registered under this number: the catalog reloads what it changed.
    pub ddl: Option<(u64, Changed)>,
    /// Patched entries sent to the verifier (`cache.verify_patched`).
    pub verify: Vec<ToVerify>,
}

/// Applies the session's pending writes at an OK or EOF with `new_status`, or at a final
/// ERR (None): writes are bumped at their OK, inside a transaction too (non-transactional
/// tables change at once), and again when the transaction ends. `answers`: what the server
/// said of the parent values a child write's slices need (`fkslices::asks`).
pub fn writes_answered(
    shared: &Shared,
    st: &mut SessionState,
    new_status: Option<u16>,
    answers: Vec<Answers>,
) -> Applied {
    let versions = shared.cache.versions();
    fkslices::child_rows(st, &versions.parents, answers);
    let mut pending = std::mem::take(&mut st.pending);
    // Registered before the DDL's first bump: a read that reads its stamps after that bump
    // sees the registration when it checks (`engine::fill`), and stores nothing.
    let ddl = pending
        .ddl
        .then(|| shared.catalog.register_ddl(&pending.ddl_changed));
    // Patches (`policy::patch`): computed from entries current now, in a window that closes
    // after this write's own bumps, with nothing in between.
    let patch = pending.patch.take();
    let patch = patch.filter(|p| may_patch(shared, st, p, new_status, &pending));
    let window = patch.as_ref().and_then(|_| versions.patch_window());
    let patches = match (patch, window) {
        (Some(p), Some(_)) => patches_of(&shared.cache, p),
        _ => Vec::new(),
    };
    for inv in writes::statement(&pending) {
        shared.invalidate(&inv);
        st.own_writes.note(&inv);
    }
    // A result the write left as it was, whose stamps its bumps did not reach (its row
    // slices are not the write's), stays valid as it is: nothing to store or verify. A
    // dashboard's windows other than the inserted day's are all such. One they reached is
    // stored again as it is, re-stamped.
    let patches: Vec<_> = patches
        .into_iter()
        .filter_map(|(c, p)| match p {
            Some(p) => (p.changed || !c.entry.stamps.is_current(versions)).then_some((c, p)),
            None => (!c.entry.stamps.is_current(versions)).then(|| {
                let same = unchanged(&c.entry);
                (c, same)
            }),
        })
        .collect();
    let mut verify = Vec::new();
    if let (Some(w), false) = (window, patches.is_empty()) {
        let stamps: Vec<_> = patches
            .iter()
            .map(|(c, _)| c.entry.stamps.recapture(versions))
            .collect();
        if versions.window_holds(w) {
            verify = store_patches(shared, patches, stamps);
        }
    }
    let in_txn = st.txn.writes_in_transaction(new_status);
    let max_entries = shared.config().invalidation.parent_map_entries;
    fkslices::learn(st, &versions.parents, max_entries, in_txn);
    if st.txn.writes_in_transaction(new_status) {
        st.txn.transaction_writes().wrote_pending(&pending);
    }
    // The OK does not wait for the catalog: until the reload lands, what the DDL named is
    // unknown to every read and write (`invalidation::pending`).
    let ddl = ddl.map(|seq| (seq, pending.ddl_changed.clone()));
    // Kept, so that later OKs of the same response bump again.
    st.pending = pending;
    Applied { ddl, verify }
}

/// A status the server sent: a transaction it ended invalidates what it wrote. Whether it
/// ended one (the session then flushes L2).
pub fn status_answered(shared: &Shared, st: &mut SessionState, status: u16) -> bool {
    let Some(ended) = st.txn.status_answered(status) else {
        return false;
    };
    let inv = writes::transaction_end(&ended);
    shared.invalidate(&inv);
    st.own_writes.note(&inv);
    true
}

/// A final ERR: a statement that commits implicitly committed the transaction before the
/// server refused it (`engine::write::refused_implicit_commit`), so what the transaction
/// wrote is invalidated now, before the client sees the error. Whether it was (the session
/// then flushes L2).
pub fn implicit_commit_refused(shared: &Shared, st: &mut SessionState) -> bool {
    let Some(inv) = super::write::refused_implicit_commit(st) else {
        return false;
    };
    shared.invalidate(&inv);
    st.own_writes.note(&inv);
    true
}

/// A final ERR with `code`: when the server rolled the whole transaction back with it (a
/// deadlock's victim, `policy::txn::error_rolls_back`), the transaction qcache follows ends
/// there, and what it wrote is invalidated (never committed: bumping is harmless, as for a
/// reset). Whether it was (the session then flushes L2).
pub fn error_answered(shared: &Shared, st: &mut SessionState, code: Option<u16>) -> bool {
    let Some(txn) = st.txn.error_answered(code) else {
        return false;
    };
    shared.invalidate(&writes::transaction_end(&txn));
    true
}

/// Whether the server's answer lets `p` patch: an OK outside a transaction, every row
/// inserted, no warning (no conversion), the write still changing only its table, the
/// switch still on and no L2 (whose copies no local patch reaches).
fn may_patch(
    shared: &Shared,
    st: &SessionState,
    p: &PatchWrite,
    new_status: Option<u16>,
    pending: &Pending,
) -> bool {
    let Some(ok) = p.ok else { return false };
    new_status.is_some()
        && !st.txn.writes_in_transaction(new_status)
        && ok.affected_rows == p.rows
        && ok.warnings == 0
        && super::patch::only_table_of(pending).is_some_and(|t| Arc::ptr_eq(&t, &p.table))
        && shared.config().cache.patch_aggregates
        && shared.l2.is_none()
}

/// The new results of `p`'s entries still held and current (computed before the write went
/// upstream, so before it): each recipe applied to the write's rows. Called inside the patch
/// window, before the write's bumps. An entry whose `FOUND_ROWS()` is not its row count
/// (never for these shapes, which have no LIMIT) is not patched: its new value is unknown.
/// An entry whose WHERE keeps none of the rows is its own result, unchanged (None: not
/// re-encoded, nor even copied unless the bumps reach it): it is not looked up again here
/// (most of a table's entries are such, and most stay as they are), since storing its
/// re-stamp replaces exactly the entry it was (`Cache::replace_patched`), and nothing when
/// that one is gone.
fn patches_of(cache: &Cache, p: PatchWrite) -> Vec<(Candidate, Option<Patched>)> {
    let versions = cache.versions();
    let corrupt = versions.faults.on(Fault::Patches);
    p.candidates
        .into_iter()
        .filter(|c| {
            (!c.touched || cache.peek(c.key).is_some_and(|h| Arc::ptr_eq(&h, &c.entry)))
                && !c.entry.expired_now()
                && c.entry.stamps.is_current(versions)
        })
        .filter_map(|c| {
            if !c.touched {
                return Some((c, None));
            }
            let r = c
                .recipe
                .apply(&c.entry.bytes, c.entry.status_at, &c.rows, corrupt);
            r.ok()
                .filter(|p| p.rows_before == c.entry.found_rows)
                .map(|patched| (c, Some(patched)))
        })
        .collect()
}

/// An entry's result as it is: what a write that keeps none of its rows leaves.
fn unchanged(e: &crate::cache::Entry) -> Patched {
    Patched {
        bytes: e.bytes.clone(),
        status_at: e.status_at,
        changed: false,
        rows_before: e.found_rows,
        rows: e.found_rows,
    }
}

/// Stores the patched entries under the stamps re-read in the window and counts them;
/// returns those the shapes' verification budgets (`policy::verify`) want re-read.
fn store_patches(
    shared: &Shared,
    patches: Vec<(Candidate, Patched)>,
    stamps: Vec<Stamps>,
) -> Vec<ToVerify> {
    let cache = &shared.cache;
    let share = shared.config().cache.verify_patched;
    let mut verify = Vec::new();
    for ((c, p), stamps) in patches.into_iter().zip(stamps) {
        let mut entry = c.entry.patched(p.bytes, p.status_at, stamps);
        // A new group is one more row: in FOUND_ROWS() after a hit, and in the digests.
        entry.found_rows = p.rows;
        entry.rows = p.rows;
        let fill_ns = entry.fill_ns;
        if !cache.replace_patched(c.key, &c.entry, entry) {
            continue;
        }
        cache.stats().patched.fetch_add(1, Ordering::Relaxed);
        // The entry this patch replaced was itself a patch: served since, it saved a miss.
        let saved = c.entry.patch_saved_ns();
        let Some(estimate) = cache
            .patches()
            .verify_due(c.recipe.digest, share, saved, fill_ns)
        else {
            continue;
        };
        match cache.peek(c.key) {
            Some(e) => verify.push(ToVerify {
                key: c.key,
                entry: e,
                recipe: c.recipe.clone(),
                estimate,
            }),
            None => cache
                .patches()
                .verify_ended(c.recipe.digest, estimate, 0, Outcome::NotSent),
        }
    }
    verify
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::packets::status::IN_TRANS;

    /// A shared state whose upstream refuses (its catalog never loads): nothing here asks it.
    fn shared() -> Arc<Shared> {
        let mut cfg = crate::config::Config::default();
        cfg.server.upstream = "127.0.0.1:1".into();
        Arc::new(Shared::new(cfg))
    }

    /// One row per way an answer applies a write of `db.t`: an autocommit OK bumps it once;
    /// an OK inside a transaction bumps it and the transaction remembers it, and the status
    /// that ends the transaction bumps it again; a final ERR bumps what may have been
    /// written; a DDL is registered for its reload.
    #[tokio::test]
    async fn an_answer_applies_its_writes_once_and_a_transaction_end_again() {
        // (rule, in a transaction, the answer's status (None: ERR), a DDL, bumps at the
        // answer, ended by a later status without IN_TRANS, bumps at that end)
        type Row = (&'static str, bool, Option<u16>, bool, u64, bool, u64);
        let rows: &[Row] = &[
            (
                "an autocommit write's OK",
                false,
                Some(2),
                false,
                1,
                false,
                0,
            ),
            (
                "a write's OK in a transaction",
                true,
                Some(IN_TRANS | 2),
                false,
                1,
                true,
                1,
            ),
            (
                "a write's ERR in a transaction",
                true,
                None,
                false,
                1,
                true,
                1,
            ),
            (
                "a DDL's OK registers its reload",
                false,
                Some(2),
                true,
                1,
                false,
                0,
            ),
        ];
        for (rule, in_txn, status, ddl, bumps, ends, at_end) in rows {
            let shared = shared();
            let w = crate::engine::World::new(true);
            let mut st = w.session(Some("db"));
            let t = shared.cache.versions().table("db", "t");
            if *in_txn {
                assert!(
                    !status_answered(&shared, &mut st, IN_TRANS | 2),
                    "{rule}: opens"
                );
            }
            st.pending.tables.push(t.clone());
            st.pending.ddl = *ddl;
            let before = t.version();
            let applied = writes_answered(&shared, &mut st, *status, Vec::new());
            assert_eq!(t.version() - before, *bumps, "{rule}");
            assert_eq!(applied.ddl.is_some(), *ddl, "{rule}");
            assert!(
                !st.pending.is_empty(),
                "{rule}: kept for later OKs of the response"
            );
            st.pending = Default::default();
            let before = t.version();
            assert_eq!(status_answered(&shared, &mut st, 2), *ends, "{rule}");
            assert_eq!(
                t.version() - before,
                *at_end,
                "{rule}: at the transaction's end"
            );
        }
    }

    /// A deadlock's ERR (1213), innodb_snapshot_isolation's (1020) and a full lock table's
    /// (1206) end the transaction the session followed: its status loses IN_TRANS (what hits
    /// then carry) and its writes are bumped; a lock wait timeout's ERR (1205) leaves it open.
    #[tokio::test]
    async fn a_deadlock_ends_the_transaction_a_timeout_does_not() {
        for (code, ends) in [(1213, true), (1020, true), (1206, true), (1205, false)] {
            let shared = shared();
            let w = crate::engine::World::new(true);
            let mut st = w.session(Some("db"));
            let t = shared.cache.versions().table("db", "t");
            assert!(!status_answered(&shared, &mut st, IN_TRANS | 2));
            st.pending.tables.push(t.clone());
            writes_answered(&shared, &mut st, Some(IN_TRANS | 2), Vec::new());
            st.pending = Default::default();
            let before = t.version();
            assert_eq!(error_answered(&shared, &mut st, Some(code)), ends, "{code}");
            assert_eq!(t.version() - before, u64::from(ends), "{code}: bumped");
            assert_eq!(st.txn.status() & IN_TRANS == 0, ends, "{code}: IN_TRANS");
            assert_eq!(st.txn.in_transaction(), !ends, "{code}");
        }
    }
}
