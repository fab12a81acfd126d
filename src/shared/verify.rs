//! The background verifier of patched aggregates (`cache.verify_patched`): re-reads the
//! entries a write's known rows patched (`engine::answered`) that their shape's budget of
//! server time allows (`policy::verify`), and settles the budget with what the read took.

use std::sync::Arc;
use std::time::Instant;

use tracing::warn;

use crate::cache::patches::ToVerify;
use crate::observe::stats::CacheStats;
use crate::policy::verify::Outcome;
use crate::shared::Shared;

/// Settles the shape's budget however the verification ends (a panic or a shutdown too):
/// what its read took, and how it ended.
struct Settle {
    shared: Arc<Shared>,
    digest: u64,
    estimate: u64,
    spent_ns: u64,
    outcome: Outcome,
}

impl Drop for Settle {
    fn drop(&mut self) {
        self.shared.cache.patches().verify_ended(
            self.digest,
            self.estimate,
            self.spent_ns,
            self.outcome,
        );
    }
}

/// Re-reads a patched entry's values from the server and compares them. Compared only when
/// no statement that may commit a write through qcache was in flight or began from before
/// the read to its answer, and the entry is still held and current after it. A write from
/// elsewhere not yet seen on the binlog can still differ; then a right patch is dropped and
/// its shape's patching turned off (fail closed).
pub async fn patched(shared: Arc<Shared>, v: ToVerify) {
    let ToVerify {
        key,
        entry,
        recipe,
        estimate,
    } = v;
    let mut settle = Settle {
        shared: shared.clone(),
        digest: recipe.digest,
        estimate,
        spent_ns: 0,
        outcome: Outcome::NotSent,
    };
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
    // As many rows as the entry holds and one more: more is a difference too. An entry
    // that reads as no result of its recipe differs whatever the answer.
    let ours = recipe.values(&entry.bytes, entry.status_at);
    let max = ours.as_ref().map_or(1, |o| o.len() + 1);
    let sent = Instant::now();
    settle.outcome = Outcome::Inconclusive;
    let rows = shared.catalog.rows_text(recipe.verify_sql(), max).await;
    settle.spent_ns = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let Some(rows) = rows else {
        return;
    };
    if !cache.patches().writes_quiet_since(mark) || !held(cache) {
        return;
    }
    CacheStats::incr(&cache.stats().patch_verified);
    let server = recipe.text_rows(&rows);
    if server.is_some() && server == ours {
        settle.outcome = Outcome::Clean;
        return;
    }
    settle.outcome = Outcome::Mismatch;
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
