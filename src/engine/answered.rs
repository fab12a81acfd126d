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
    // Patches (`policy::patch`): the new results computed first, from the entries as they
    // were planned (a function of their bytes and the write's rows); then, inside a window
    // that opens with no bump in flight, the entries still current, the write's own bumps
    // and their stamps re-read; the window spans nothing else.
    let patch = pending.patch.take();
    let patch = patch.filter(|p| may_patch(shared, st, p, new_status, &pending));
    let computed = patch.map(|p| patches_of(&shared.cache, p));
    let window = match &computed {
        Some(c) if !c.is_empty() => open_window(versions),
        _ => None,
    };
    let patches = match (computed, window) {
        (Some(c), Some(_)) => still_current(&shared.cache, c),
        (Some(c), None) => {
            lost(shared, c.len());
            Vec::new()
        }
        _ => Vec::new(),
    };
    for inv in writes::statement(&pending) {
        shared.invalidate(&inv);
        st.own_writes.note(&inv);
    }
    // A result the write left as it was, whose stamps its bumps did not reach (its row
    // slices are not the write's), stays valid as it is: nothing to store or verify. Most
    // such entries were never carried (`cache::patches::WriteReach`: a dashboard's windows
    // other than the inserted day's); those carried by a reach wider than the bumps' (a
    // slice counter two slices share, a column the plan did not name) are left here. One
    // they reached is stored again as it is, re-stamped.
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
        // Other threads' bumps inside the window drop only the entries whose counters they
        // moved (`Versions::own_range`), when they came after all of this write's own.
        let (kept, dropped): (Vec<_>, Vec<_>) = match versions.own_range(w) {
            Some(own) => patches
                .into_iter()
                .zip(stamps)
                .partition(|((c, _), s)| s.moved_only_by(&c.entry.stamps, own)),
            None => (Vec::new(), patches.into_iter().zip(stamps).collect()),
        };
        lost(shared, dropped.len());
        verify = store_patches(shared, kept);
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

/// The new results of `p`'s entries (as they were planned, before the write went upstream,
/// so computed before it): each recipe applied to the write's rows. Called before the patch
/// window opens: the result is a function of the entry's bytes and the rows alone, and
/// [`still_current`] keeps, inside the window, only those whose entries are still held and
/// current. An entry whose `FOUND_ROWS()` is not its row count
/// (never for these shapes, which have no LIMIT) is not patched: its new value is unknown.
/// An entry whose WHERE keeps none of the rows is its own result, unchanged (None: not
/// re-encoded, nor even copied unless the bumps reach it): it is not looked up again
/// (most of a table's entries are such, and most stay as they are), since storing its
/// re-stamp replaces exactly the entry it was (`Cache::replace_patched`), and nothing when
/// that one is gone.
fn patches_of(cache: &Cache, p: PatchWrite) -> Vec<(Candidate, Option<Patched>)> {
    let corrupt = cache.versions().faults.on(Fault::Patches);
    p.candidates
        .into_iter()
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

/// Of [`patches_of`]'s, those whose entries are still held and current: called inside the
/// patch window, before the write's bumps.
fn still_current(
    cache: &Cache,
    patches: Vec<(Candidate, Option<Patched>)>,
) -> Vec<(Candidate, Option<Patched>)> {
    let versions = cache.versions();
    patches
        .into_iter()
        .filter(|(c, _)| {
            (!c.touched || cache.peek(c.key).is_some_and(|h| Arc::ptr_eq(&h, &c.entry)))
                && !c.entry.expired_now()
                && c.entry.stamps.is_current(versions)
        })
        .collect()
}

/// Tries to open a patch's window (`Versions::patch_window`) for a short while: a bump in
/// flight on another thread ends within a few instructions unless its thread was
/// descheduled. Waiting changes nothing of what the window proves.
fn open_window(versions: &crate::cache::Versions) -> Option<crate::cache::versions::PatchWindow> {
    for i in 0..WINDOW_TRIES {
        if let Some(w) = versions.patch_window() {
            return Some(w);
        }
        if i < WINDOW_SPINS {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    None
}

/// How often [`open_window`] asks, and how many of those it spins before yielding.
const WINDOW_TRIES: u32 = 64;
const WINDOW_SPINS: u32 = 16;

/// Counts `n` patches lost to other threads' bumps (`Qcache_patches_lost`).
fn lost(shared: &Shared, n: usize) {
    if n > 0 {
        shared
            .cache
            .stats()
            .patches_lost
            .fetch_add(n as u64, Ordering::Relaxed);
    }
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
fn store_patches(shared: &Shared, patches: Vec<((Candidate, Patched), Stamps)>) -> Vec<ToVerify> {
    let cache = &shared.cache;
    let share = shared.config().cache.verify_patched;
    let mut verify = Vec::new();
    for ((c, p), stamps) in patches {
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

    /// A text result of one LONGLONG column and one row `n` (what `SELECT COUNT(*)`
    /// sends), with the offset of its terminator's status flags.
    fn count_result(n: &str) -> (bytes::Bytes, usize) {
        let mut out = Vec::new();
        let mut seq = 1u8;
        let mut frame = |out: &mut Vec<u8>, p: &[u8]| {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes()[..3]);
            out.push(seq);
            seq += 1;
            out.extend_from_slice(p);
        };
        frame(&mut out, &[1]);
        let mut d = Vec::new();
        for s in ["def", "db", "child", "child", "COUNT(*)", ""] {
            d.push(s.len() as u8);
            d.extend_from_slice(s.as_bytes());
        }
        d.push(0x0c);
        d.extend_from_slice(&63u16.to_le_bytes());
        d.extend_from_slice(&21u32.to_le_bytes());
        d.extend_from_slice(&[0x08, 0x81, 0, 0, 0, 0]);
        frame(&mut out, &d);
        frame(&mut out, &[0xfe, 0, 0, 2, 0]);
        let mut row = vec![n.len() as u8];
        row.extend_from_slice(n.as_bytes());
        frame(&mut out, &row);
        let at = out.len() + 4 + 3;
        frame(&mut out, &[0xfe, 0, 0, 2, 0]);
        (out.into(), at)
    }

    /// A write finds the entries to patch by what its bumps reach (`cache::patches`): one
    /// registered as reached is patched; one its bumps reach but whose registration says
    /// they do not (a filter that wrongly leaves it out) is not carried, and the bumps
    /// invalidate it as if patching were off (never served as it was); one they do not
    /// reach stays as it is, the same entry; one every write reaches (a whole-table stamp)
    /// that its rows leave as it was is stored again under the new stamps.
    #[tokio::test]
    async fn a_write_patches_what_it_reaches_and_invalidates_what_its_filter_skips() {
        use crate::cache::patches::Reach;
        use crate::cache::versions::{ColumnReads, SlicePlan, Versions};
        use crate::cache::Entry;
        let mut cfg = crate::config::Config::default();
        cfg.server.upstream = "127.0.0.1:1".into();
        cfg.cache.patch_aggregates = true;
        cfg.cache.verify_patched = 0.0;
        cfg.invalidation.granularity = crate::config::Granularity::Row;
        let shared = Arc::new(Shared::new(cfg));
        let w = crate::engine::World::new(true);
        let cache = &shared.cache;
        let versions = cache.versions();
        let p = crate::engine::Planner {
            catalog: &w.catalog,
            analyzer: &w.analyzer,
            versions,
            memo: &w.memo,
            patches: cache.patches(),
            cfg: shared.config(),
        };
        let t = versions.table("db", "child");
        // The slice keys writes give `a = 1` and `a = 2`, from the writes' own plans.
        let plan = |sql: &str| {
            let mut st = w.session(Some("db"));
            let info = w.write(sql);
            p.plan_write(&mut st, &info);
            let inserted = p.plan_write_rows(&mut st, &info, sql.as_bytes(), &[0x03]);
            (st, inserted)
        };
        let key_of_a = |st: &SessionState| {
            let (_, known) = &st.pending.rows[0];
            let (_, keys) = known.iter().find(|(c, _)| c == "a").unwrap();
            keys[0].clone()
        };
        let sql = "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 1)";
        let one = key_of_a(&plan(sql).0);
        let two = key_of_a(&plan("INSERT INTO child (id, parent_id, a) VALUES (8, 1, 2)").0);
        let column = versions.register(&t, "a");
        let sliced = |key: &str| {
            let plan = SlicePlan {
                table: t.clone(),
                column: column.clone(),
                slices: vec![Versions::slice_index(&t, "a", key)],
                by_columns: false,
                slice_columns: Vec::new(),
            };
            Stamps::capture_sliced(versions, &[], &[plan], &ColumnReads::default())
        };
        let whole = || Stamps::capture(versions, std::slice::from_ref(&t));
        let st0 = w.session(Some("db"));
        let tables = [t.clone()];
        let recipe = |sql: &str| {
            Arc::new(
                p.patch_recipe(&st0, sql.as_bytes(), None, &tables, false, 1, false, false)
                    .unwrap(),
            )
        };
        let (a1, a2) = (
            recipe("SELECT COUNT(*) FROM child WHERE a = 1"),
            recipe("SELECT COUNT(*) FROM child WHERE a = 2"),
        );
        // (key, recipe, stamps, the reach registered)
        let entries = [
            (
                1,
                &a1,
                sliced(&one),
                Reach::of(&sliced(&one), "db", "child"),
            ),
            (
                2,
                &a1,
                sliced(&one),
                Reach::of(&sliced(&two), "db", "child"),
            ),
            (
                3,
                &a2,
                sliced(&two),
                Reach::of(&sliced(&two), "db", "child"),
            ),
            (4, &a2, whole(), Reach::of(&whole(), "db", "child")),
        ];
        for (key, r, stamps, reach) in entries {
            let (bytes, at) = count_result("5");
            let mut e = Entry::new(bytes, at, stamps, 1).with_found_rows(1);
            e.rows = 1;
            e.patch = Some(r.clone());
            assert!(cache.insert(key, e), "{key} stored");
            cache.patches().register("db", "child", key, r, reach);
        }
        let held = |key| cache.peek(key).unwrap();
        let before: Vec<_> = (1..=4).map(held).collect();
        let (mut st, inserted) = plan(sql);
        assert!(inserted.is_some(), "the plan read the insert's values");
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        p.plan_patch(
            &mut st,
            sql.as_bytes(),
            &payload,
            cache,
            inserted.as_deref(),
        );
        let planned = st.pending.patch.as_mut().expect("a patch planned");
        let mut carried: Vec<_> = planned.candidates.iter().map(|c| c.key).collect();
        carried.sort_unstable();
        planned.ok = crate::protocol::packets::parse_ok(&[0, 1, 0, 2, 0, 0, 0]);
        writes_answered(&shared, &mut st, Some(2), Vec::new());
        // Patched: current, one more row counted.
        let e1 = cache.get_current(1).expect("1: patched, current");
        assert_eq!(e1.bytes, count_result("6").0, "1: the count patched");
        // Reached, skipped by its registration: invalidated by the bumps, as without patching.
        assert!(
            !held(2).stamps.is_current(versions) && cache.get_current(2).is_none(),
            "2: skipped by the filter, invalidated by the write"
        );
        // Not reached: the same entry, still current.
        assert!(Arc::ptr_eq(&held(3), &before[2]) && held(3).stamps.is_current(versions));
        // Reached, left as it was: re-stamped, the same bytes.
        let e4 = cache.get_current(4).expect("4: re-stamped, current");
        assert!(!Arc::ptr_eq(&e4, &before[3]) && e4.bytes == before[3].bytes);
        assert_eq!(cache.stats().patched.load(Ordering::Relaxed), 2);
        assert_eq!(carried, [1, 4], "only the keys registered as reached");
    }
}
