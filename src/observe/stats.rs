//! Cache counters, and the `SHOW STATUS LIKE 'Qcache%'` rows built from them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::policy::Reason;

/// Why a set of entries was invalidated, so operators can see which source dominates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidationSource {
    /// A write through qcache, acknowledged by the server.
    Write,
    /// The end of a transaction that wrote tables.
    TxnEnd,
    /// A commit seen in the binlog (writes that bypassed qcache), or a broken stream.
    Binlog,
    /// Widening through the schema catalog: views, triggers, cascading foreign keys.
    Catalog,
    /// `RESET QUERY CACHE` / `FLUSH TABLES` and other explicit flushes.
    Flush,
    /// A write qcache could not analyse precisely, invalidated by schema or wholesale.
    Conservative,
    /// A privilege change (through qcache or in the binlog): reads through DEFINER views
    /// whose definer it may reach.
    Privileges,
}

impl InvalidationSource {
    pub const ALL: [InvalidationSource; 7] = [
        InvalidationSource::Write,
        InvalidationSource::TxnEnd,
        InvalidationSource::Binlog,
        InvalidationSource::Catalog,
        InvalidationSource::Flush,
        InvalidationSource::Conservative,
        InvalidationSource::Privileges,
    ];

    /// The status variable counting this source.
    pub fn status_name(self) -> &'static str {
        match self {
            InvalidationSource::Write => "Qcache_invalidations_write",
            InvalidationSource::TxnEnd => "Qcache_invalidations_txn_end",
            InvalidationSource::Binlog => "Qcache_invalidations_binlog",
            InvalidationSource::Catalog => "Qcache_invalidations_catalog",
            InvalidationSource::Flush => "Qcache_invalidations_flush",
            InvalidationSource::Conservative => "Qcache_invalidations_conservative",
            InvalidationSource::Privileges => "Qcache_invalidations_privileges",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Stripes of the hit counter; more than the cores qcache is likely to run on is pointless.
pub(crate) const STRIPES: usize = 16;

/// One stripe per cache line (128 bytes covers adjacent-line prefetch), so threads counting
/// hits do not bounce one line between cores.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

/// This thread's stripe, fixed for its life.
#[inline]
pub(crate) fn stripe() -> usize {
    thread_local! {
        static STRIPE: usize = {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed) as usize % STRIPES
        };
    }
    STRIPE.with(|s| *s)
}

/// Not-cached counts by reason for the threads of one stripe. A short list, not a map:
/// a session repeats one reason, so a scan beats hashing.
#[derive(Debug, Default)]
#[repr(align(128))]
struct ReasonStripe(Mutex<Vec<(Reason, u64)>>);

/// A counter incremented on every hit from every worker thread. A single atomic would be the
/// one contended write on the hit path; each thread adds to its own stripe and readers sum.
#[derive(Debug, Default)]
pub struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

impl StripedCounter {
    #[inline]
    pub fn incr(&self) {
        self.stripes[stripe()].0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// Counters. Relaxed atomics: they are statistics read by admin queries, never used to order
/// other memory operations.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Results served from the cache (MySQL's Qcache_hits).
    pub hits: StripedCounter,
    /// Results stored (MySQL's Qcache_inserts).
    pub inserts: AtomicU64,
    /// Statements not served from and not stored in the cache, every reason together (MySQL's
    /// Qcache_not_cached).
    pub not_cached: StripedCounter,
    /// Servable entries (current, unexpired) evicted to make room (MySQL's
    /// Qcache_lowmem_prunes).
    pub lowmem_prunes: AtomicU64,
    /// One count per invalidation event (a table bump, a schema, a flush), by source.
    invalidations: [AtomicU64; InvalidationSource::ALL.len()],
    /// Row-slice counters bumped (writes with known rows, granularity row).
    pub slice_invalidations: AtomicU64,
    /// Writes bumped by their changed columns only (`Versions::bump_columns`): entries
    /// reading none of those columns stay served.
    pub column_writes: AtomicU64,
    /// Followers that waited for another session's fill of the same key.
    pub stampede_waits: AtomicU64,
    /// Outdated entries served while another session refreshed them (rules with
    /// `max_stale`, `policy::stale`); each is also a hit.
    pub stale_served: AtomicU64,
    /// Entries with outdated table versions dropped: found on lookup, replaced by a new fill,
    /// or evicted to make room.
    pub stale_dropped: AtomicU64,
    /// Entries past their TTL dropped: on lookup, replaced, or evicted to make room.
    pub expired: AtomicU64,
    /// Results refused because they exceed `max_result_bytes` (or a cache shard).
    pub too_large: AtomicU64,
    /// Entries patched from a write's known rows and kept valid (`policy::patch`).
    pub patched: AtomicU64,
    /// Patched entries the verifier found differing from the server's answer: each was
    /// dropped and its statement shape's patching turned off.
    pub patch_mismatches: AtomicU64,
    /// Patched entries re-read by the verifier (`cache.verify_patched`).
    pub patch_verified: AtomicU64,
    /// Entries a write would have patched, invalidated instead because another thread's
    /// bump was in flight when its patch window opened, or may have hidden under its own
    /// bumps, or moved their counters (`engine::answered`).
    pub patches_lost: AtomicU64,
    /// Not-cached counts by reason. Striped like the hit counter: with the cache off every
    /// relayed SELECT counts here, from every worker thread.
    reasons: [ReasonStripe; STRIPES],
}

impl CacheStats {
    pub fn new() -> CacheStats {
        CacheStats::default()
    }

    /// Qcache_hits so far.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }

    /// Qcache_inserts so far.
    pub fn inserts(&self) -> u64 {
        self.inserts.load(Ordering::Relaxed)
    }

    /// Counts one statement that was not cached, and why.
    pub fn not_cached(&self, reason: Reason) {
        self.not_cached.incr();
        if let Ok(mut list) = self.reasons[stripe()].0.lock() {
            match list.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, n)) => *n += 1,
                None => list.push((reason, 1)),
            }
        }
    }

    /// Counts one invalidation event: `invalidation::apply` calls it for every source but L2.
    pub fn invalidation(&self, source: InvalidationSource) {
        self.invalidations[source.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn slice_invalidations(&self, n: u64) {
        self.slice_invalidations.fetch_add(n, Ordering::Relaxed);
    }

    pub fn column_write(&self) {
        self.column_writes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn invalidations(&self, source: InvalidationSource) -> u64 {
        self.invalidations[source.index()].load(Ordering::Relaxed)
    }

    pub fn invalidations_total(&self) -> u64 {
        self.invalidations
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Not-cached counts by reason (those counted at least once), sorted by label for
    /// stable output.
    pub fn not_cached_reasons(&self) -> Vec<(Reason, u64)> {
        let mut sum: BTreeMap<&'static str, (Reason, u64)> = BTreeMap::new();
        for stripe in &self.reasons {
            if let Ok(list) = stripe.0.lock() {
                for (r, n) in list.iter() {
                    sum.entry(r.as_str()).or_insert((*r, 0)).1 += n;
                }
            }
        }
        sum.into_values().collect()
    }

    pub(crate) fn incr(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The rows of `SHOW STATUS LIKE 'Qcache%'`, MySQL's eight first, then qcache's own, in a
    /// fixed order.
    ///
    /// Qcache_total_blocks is reported as entries × 2 because MySQL's cache used one block
    /// for the query and at least one for its result, and monitoring that derives a
    /// fragmentation ratio from it expects that shape. Qcache_free_blocks is 1 when there is
    /// free room and 0 when full: qcache has no fragmentation to report.
    ///
    /// `entries` and `free` (bytes) come from the store, which owns these counters.
    pub fn status_rows(&self, entries: u64, free: u64) -> Vec<(&'static str, u64)> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut rows = vec![
            ("Qcache_free_blocks", u64::from(free > 0)),
            ("Qcache_free_memory", free),
            ("Qcache_hits", self.hits.get()),
            ("Qcache_inserts", load(&self.inserts)),
            ("Qcache_lowmem_prunes", load(&self.lowmem_prunes)),
            ("Qcache_not_cached", self.not_cached.get()),
            ("Qcache_queries_in_cache", entries),
            ("Qcache_total_blocks", entries * 2),
            ("Qcache_invalidations", self.invalidations_total()),
        ];
        for s in InvalidationSource::ALL {
            rows.push((s.status_name(), self.invalidations(s)));
        }
        rows.extend([
            (
                "Qcache_invalidations_slice",
                load(&self.slice_invalidations),
            ),
            ("Qcache_invalidations_column", load(&self.column_writes)),
            ("Qcache_stale_dropped", load(&self.stale_dropped)),
            ("Qcache_expired", load(&self.expired)),
            ("Qcache_stampede_waits", load(&self.stampede_waits)),
            ("Qcache_stale_served", load(&self.stale_served)),
            ("Qcache_too_large", load(&self.too_large)),
            ("Qcache_patched", load(&self.patched)),
            ("Qcache_patch_verified", load(&self.patch_verified)),
            ("Qcache_patch_mismatches", load(&self.patch_mismatches)),
            ("Qcache_patches_lost", load(&self.patches_lost)),
        ]);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_counted_and_sorted() {
        let s = CacheStats::new();
        s.not_cached(Reason::Warnings);
        s.not_cached(Reason::NonDeterministic);
        s.not_cached(Reason::Warnings);
        assert_eq!(s.not_cached.get(), 3);
        assert_eq!(
            s.not_cached_reasons(),
            vec![(Reason::NonDeterministic, 1), (Reason::Warnings, 2)]
        );
    }

    #[test]
    fn every_reason_has_a_status_row() {
        let s = CacheStats::new();
        for r in Reason::ALL {
            s.not_cached(*r);
        }
        let rows: std::collections::HashSet<String> = s
            .not_cached_reasons()
            .into_iter()
            .map(|(r, n)| {
                assert_eq!(n, 1, "{r}");
                r.status_name()
            })
            .collect();
        assert_eq!(rows.len(), Reason::ALL.len());
        for r in Reason::ALL {
            assert!(rows.contains(&r.status_name()), "{r} has no status row");
        }
    }

    #[test]
    fn striped_counter_sums_across_threads() {
        let c = std::sync::Arc::new(StripedCounter::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| c.incr()))
            })
            .collect();
        for t in threads {
            t.join().expect("counter thread");
        }
        assert_eq!(c.get(), 4000);
    }

    #[test]
    fn invalidations_by_source() {
        let s = CacheStats::new();
        s.invalidation(InvalidationSource::Write);
        s.invalidation(InvalidationSource::Write);
        s.invalidation(InvalidationSource::Binlog);
        assert_eq!(s.invalidations(InvalidationSource::Write), 2);
        assert_eq!(s.invalidations(InvalidationSource::Binlog), 1);
        assert_eq!(s.invalidations(InvalidationSource::Flush), 0);
        assert_eq!(s.invalidations_total(), 3);
        // Every source has a distinct, indexable slot.
        for (i, src) in InvalidationSource::ALL.iter().enumerate() {
            assert_eq!(src.index(), i);
        }
    }
}
