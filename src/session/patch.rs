//! Patches of cached aggregates at a write's OK (`policy::patch`, planned by
//! `engine::patch`): whether the OK allows them, the new entries, and the background
//! verifier that re-reads a share of them from the server (`cache.verify_patched`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::warn;

use super::Session;
use crate::cache::patches::{Candidate, PatchWrite};
use crate::cache::writes::Pending;
use crate::cache::{Entry, Key, Stamps};
use crate::faults::Fault;
use crate::observe::stats::CacheStats;
use crate::policy::patch::{Patched, Recipe};
use crate::shared::Shared;

impl Session {
    /// Whether the server's answer lets `p` patch: an OK outside a transaction, every row
    /// inserted, no warning (no conversion), the write still changing only its table, the
    /// switch still on and no L2 (whose copies no local patch reaches).
    pub(super) fn may_patch(
        &self,
        p: &PatchWrite,
        new_status: Option<u16>,
        pending: &Pending,
    ) -> bool {
        let Some(ok) = p.ok else { return false };
        new_status.is_some()
            && !self.st.txn.writes_in_transaction(new_status)
            && ok.affected_rows == p.rows
            && ok.warnings == 0
            && crate::engine::patch::only_table_of(pending)
                .is_some_and(|t| Arc::ptr_eq(&t, &p.table))
            && self.shared.config().cache.patch_aggregates
            && self.shared.l2.is_none()
    }

    /// The new results of `p`'s entries still held and current (computed before the write
    /// went upstream, so before it): each recipe applied to the write's rows. Called inside
    /// the patch window, before the write's bumps.
    pub(super) fn patches_of(&self, p: &PatchWrite) -> Vec<(Candidate, Patched)> {
        let cache = &self.shared.cache;
        let versions = cache.versions();
        let corrupt = versions.faults.on(Fault::Patches);
        p.candidates
            .iter()
            .filter(|c| {
                cache.peek(c.key).is_some_and(|h| Arc::ptr_eq(&h, &c.entry))
                    && !c.entry.expired_now()
                    && c.entry.stamps.is_current(versions)
            })
            .filter_map(|c| {
                let r = c
                    .recipe
                    .apply(&c.entry.bytes, c.entry.status_at, &c.rows, corrupt);
                r.ok().map(|patched| (c.clone(), patched))
            })
            .collect()
    }

    /// Stores the patched entries under the stamps re-read in the window, counts them, and
    /// sends a share to the verifier.
    pub(super) fn store_patches(&self, patches: Vec<(Candidate, Patched)>, stamps: Vec<Stamps>) {
        let cache = &self.shared.cache;
        let cfg = self.shared.config();
        for ((c, p), stamps) in patches.into_iter().zip(stamps) {
            let entry = c.entry.patched(p.bytes, p.status_at, stamps);
            if !cache.replace_patched(c.key, &c.entry, entry) {
                continue;
            }
            let stats = cache.stats();
            let n = stats.patched.fetch_add(1, Ordering::Relaxed) + 1;
            if due(n, cfg.cache.verify_patched) {
                if let Some(e) = cache.peek(c.key) {
                    tokio::spawn(verify(self.shared.clone(), c.key, e, c.recipe.clone()));
                }
            }
        }
    }
}

/// Whether the `n`-th patch (from 1) is verified under share `f`: every `1/f`-th, spread
/// evenly, so that a share of 1 verifies all and 0 none.
fn due(n: u64, f: f64) -> bool {
    let f = f.clamp(0.0, 1.0);
    (n as f64 * f).floor() > ((n - 1) as f64 * f).floor()
}

/// Re-reads a patched entry's values from the server and compares them. Compared only when
/// no statement that may commit a write through qcache was in flight or began from before
/// the read to its answer, and the entry is still held and current after it. A write from
/// elsewhere not yet seen on the binlog can still differ; then a right patch is dropped and
/// its shape's patching turned off (fail closed).
async fn verify(shared: Arc<Shared>, key: Key, entry: Arc<Entry>, recipe: Arc<Recipe>) {
    let cache = &shared.cache;
    let held = |cache: &crate::cache::Cache| {
        cache.peek(key).is_some_and(|h| Arc::ptr_eq(&h, &entry))
            && entry.stamps.is_current(cache.versions())
    };
    // No write through qcache in flight before the read, none begun until its answer: a
    // write the answer includes has bumped already, and then the entry is not current.
    // The patching write itself is in flight until its OK went out: wait for quiet a
    // little (the entry must stay held and current meanwhile), then give up.
    let mut mark = None;
    for _ in 0..100 {
        mark = cache.patches().writes_quiet();
        if mark.is_some() || !held(cache) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let Some(mark) = mark else {
        return;
    };
    if !held(cache) {
        return;
    }
    let Some(row) = shared.catalog.first_row_text(recipe.verify_sql()).await else {
        return;
    };
    if !cache.patches().writes_quiet_since(mark) || !held(cache) {
        return;
    }
    CacheStats::incr(&cache.stats().patch_verified);
    let server = Recipe::text_values(&row);
    let ours = recipe.values(&entry.bytes, entry.status_at);
    if server.is_some() && server == ours {
        return;
    }
    cache.remove_entry(key, &entry);
    cache.patches().turn_off(recipe.digest);
    CacheStats::incr(&cache.stats().patch_mismatches);
    warn!(
        digest = %format!("{:016x}", recipe.digest),
        sql = %recipe.sql,
        ?ours,
        ?server,
        "patched entry differs from the server: dropped, patching off for this shape"
    );
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn a_share_of_patches_is_verified() {
        let count = |f: f64| (1..=100).filter(|n| due(*n, f)).count();
        assert_eq!(count(1.0), 100);
        assert_eq!(count(0.0), 0);
        assert_eq!(count(0.05), 5);
        assert_eq!(count(0.5), 50);
        assert!(due(20, 0.05) && !due(19, 0.05));
    }
}
