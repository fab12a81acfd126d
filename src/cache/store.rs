//! The bounded result store: lookups that drop stale and expired entries, inserts that refuse
//! what must not be stored, fill claims that let one session compute a result while others
//! wait, and eviction by weight.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};
use tokio::sync::watch;

use super::entry::Entry;
use super::key::Key;
use super::patches::Patchable;
use super::versions::{Snapshot, Versions};
use crate::config::CacheConfig;
use crate::observe::stats::CacheStats;
use crate::policy::Reason;

/// quick_cache's share of a shard for "hot" entries; an entry heavier than this share of one
/// shard is rejected by quick_cache, so the store checks the same bound first and counts it.
const HOT_ALLOCATION: f64 = 0.97;

/// Expected mean entry weight, only to size quick_cache's ghost list; being off by 10× costs
/// some admission accuracy, nothing else.
const MEAN_ENTRY_WEIGHT: u64 = 2048;

/// A shard must hold at least this many of the largest entries, or large results would evict
/// each other constantly.
const MIN_LARGE_PER_SHARD: u64 = 8;

type Map = quick_cache::sync::Cache<Key, Arc<Entry>, EntryWeighter, KeyHashBuilder, Evictions>;

/// The result cache. Cheap to clone (one `Arc`); fill guards hold a clone so that a session
/// can keep one across awaits.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

struct Inner {
    map: Map,
    versions: Arc<Versions>,
    stats: Arc<CacheStats>,
    /// Patchable entries' keys per table (`policy::patch`).
    patches: Patchable,
    /// Keys being filled right now, with the channel their followers wait on. The id tells a
    /// guard's own marker from a successor's, so a late drop never removes someone else's.
    fills: DashMap<Key, (u64, watch::Receiver<bool>)>,
    next_fill: AtomicU64,
    /// The configured bound, for Qcache_free_memory.
    max_bytes: u64,
    /// Atomic so that a config reload changes it for the next fill.
    max_result_bytes: AtomicUsize,
    /// Heaviest entry quick_cache accepts (see `HOT_ALLOCATION`).
    max_weight: u64,
    /// The global TTL in nanoseconds, `NO_TTL` for none; atomic so that a reload applies it
    /// to new entries.
    ttl_ns: AtomicU64,
}

const NO_TTL: u64 = u64::MAX;

fn ttl_ns(ttl: Option<Duration>) -> u64 {
    // u64::MAX - 1 ns is 584 years: "never" in practice, and checked_add decides.
    ttl.map_or(NO_TTL, |d| {
        u64::try_from(d.as_nanos())
            .unwrap_or(NO_TTL - 1)
            .min(NO_TTL - 1)
    })
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("len", &self.len())
            .field("weight", &self.weight())
            .field("max_bytes", &self.inner.max_bytes)
            .finish_non_exhaustive()
    }
}

/// One entry's weight is what it costs in memory, so `max_bytes` bounds memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct EntryWeighter;

impl Weighter<Key, Arc<Entry>> for EntryWeighter {
    fn weight(&self, _key: &Key, val: &Arc<Entry>) -> u64 {
        val.weight()
    }
}

/// Counts what quick_cache drops and defers dropping up to two entries until the shard lock is
/// released.
///
/// quick_cache reports an entry replaced under its key (a new fill over a stale entry) the
/// same way as one evicted for room. Only the loss of a servable entry is a
/// Qcache_lowmem_prune, as in MySQL, where invalidation had already freed stale results: a
/// stale entry counts as dropped, an expired one as expired. A fill never replaces a
/// servable entry (`insert_checked`), except when two fills of one key race past that check.
#[derive(Clone, Debug)]
pub struct Evictions {
    stats: Arc<CacheStats>,
    versions: Arc<Versions>,
}

impl Lifecycle<Key, Arc<Entry>> for Evictions {
    type RequestState = [Option<Arc<Entry>>; 2];

    fn on_evict(&self, state: &mut Self::RequestState, _key: Key, val: Arc<Entry>) {
        let counter = if !val.stamps.is_current(&self.versions) {
            &self.stats.stale_dropped
        } else if val.expired_now() {
            &self.stats.expired
        } else {
            &self.stats.lowmem_prunes
        };
        CacheStats::incr(counter);
        if let Some(slot) = state.iter_mut().find(|s| s.is_none()) {
            *slot = Some(val);
        }
    }
}

/// Keys are already xxh3 outputs; rehashing them with SipHash would cost more than the rest of
/// a lookup. They are derived from client input, though, so the fold is keyed with a
/// per-process random secret: a client cannot aim many keys at one hash bucket.
#[derive(Clone, Copy, Debug)]
pub struct KeyHashBuilder {
    k0: u64,
    k1: u64,
}

impl Default for KeyHashBuilder {
    fn default() -> Self {
        let rs = std::collections::hash_map::RandomState::new();
        let mut a = rs.build_hasher();
        a.write_u8(0);
        let mut b = rs.build_hasher();
        b.write_u8(1);
        KeyHashBuilder {
            // Odd, so the multiply in `fold` never collapses to zero on the secret alone.
            k0: a.finish() | 1,
            k1: b.finish() | 1,
        }
    }
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            k0: self.k0,
            k1: self.k1,
            h: 0,
        }
    }
}

#[derive(Debug)]
pub struct KeyHasher {
    k0: u64,
    k1: u64,
    h: u64,
}

/// Folded 64×64→128 multiply (as in wyhash): every input bit reaches the output.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let r = u128::from(a).wrapping_mul(u128::from(b));
    (r as u64) ^ ((r >> 64) as u64)
}

impl Hasher for KeyHasher {
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.h ^= fold((i as u64) ^ self.k0, ((i >> 64) as u64) ^ self.k1);
    }

    /// Only reached if a key type other than `u128` is ever hashed; kept correct, not fast.
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.h = fold(self.h ^ u64::from_le_bytes(b) ^ self.k0, self.k1);
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.h
    }
}

/// The answer to `claim`.
#[derive(Debug)]
pub enum Claim {
    /// Nobody else is computing this key: the caller forwards the query and fills.
    Leader(FillGuard),
    /// Another session is computing it: wait (bounded), then look up again.
    Follower(Waiter),
}

/// The right to fill one key. Dropping it without `insert` stores nothing and releases the
/// waiters, so an error, a cancelled task or an uncacheable result cannot strand them.
#[derive(Debug)]
pub struct FillGuard {
    cache: Cache,
    key: Key,
    id: u64,
    /// `true` is sent when the entry was stored; dropping the sender wakes everyone anyway.
    tx: watch::Sender<bool>,
}

impl FillGuard {
    pub fn key(&self) -> Key {
        self.key
    }

    /// Stores `entry` under the claimed key (same rules as `Cache::insert`) and wakes the
    /// followers. Returns whether the key holds the result now.
    pub fn insert(self, entry: Entry) -> bool {
        self.finish(entry, None)
    }

    /// `insert` for a fill made inside a transaction that began at `snap` (see
    /// `Cache::insert_in`).
    pub fn insert_in(self, entry: Entry, snap: &Snapshot) -> bool {
        self.finish(entry, Some(snap))
    }

    fn finish(self, entry: Entry, snap: Option<&Snapshot>) -> bool {
        let stored = self.cache.insert_checked(self.key, entry, snap);
        if stored {
            // No receiver is not an error here: followers may all have timed out.
            let _ = self.tx.send(true);
        }
        stored
        // Drop removes the in-flight marker, then the sender closes.
    }
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        let id = self.id;
        self.cache
            .inner
            .fills
            .remove_if(&self.key, |_, (owner, _)| *owner == id);
    }
}

/// How a follower's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The leader stored an entry: look it up.
    Filled,
    /// The leader finished without storing (error, uncacheable, stale, cancelled).
    Abandoned,
    /// The leader took longer than the timeout.
    TimedOut,
}

/// A follower's handle on another session's fill.
#[derive(Debug)]
pub struct Waiter {
    rx: watch::Receiver<bool>,
}

impl Waiter {
    /// Waits until the leader stores, gives up, or `timeout` passes. No wake-up can be lost:
    /// the receiver was cloned while the leader's sender was alive, so a send or drop that
    /// happens before this call is still seen.
    pub async fn wait(mut self, timeout: Duration) -> WaitOutcome {
        if *self.rx.borrow_and_update() {
            return WaitOutcome::Filled;
        }
        match tokio::time::timeout(timeout, self.rx.changed()).await {
            Err(_) => WaitOutcome::TimedOut,
            // Ok(Ok): a value was sent; Ok(Err): the sender was dropped, possibly right after
            // sending, so the value decides.
            Ok(_) => {
                if *self.rx.borrow() {
                    WaitOutcome::Filled
                } else {
                    WaitOutcome::Abandoned
                }
            }
        }
    }
}

/// One entry as an admin listing shows it.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    pub key: Key,
    pub digest: u64,
    /// `schema.table` of every table the entry depends on.
    pub tables: Vec<String>,
    pub bytes: usize,
    pub weight: u64,
    pub hits: u64,
    pub age: Duration,
    /// False when a table changed since: the entry is waiting to be dropped or evicted.
    pub current: bool,
    pub sql: Option<Box<str>>,
}

impl Cache {
    pub fn new(cfg: &CacheConfig) -> Cache {
        let stats = Arc::new(CacheStats::new());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let largest = cfg.max_result_bytes as u64 + 4096;
        let mut shards = (cores * 4).next_power_of_two();
        while shards > 1 && cfg.max_bytes / shards < largest * MIN_LARGE_PER_SHARD {
            shards /= 2;
        }
        // Whole shards, so quick_cache's per-shard rounding never lets the total exceed
        // max_bytes.
        let shard_capacity = cfg.max_bytes / shards;
        let capacity = shard_capacity * shards;
        // At least 32 items per shard, or quick_cache merges shards and re-rounds capacity.
        let items = (capacity / MEAN_ENTRY_WEIGHT).max(32 * shards);
        let options = OptionsBuilder::new()
            .shards(shards as usize)
            .estimated_items_capacity(items as usize)
            .weight_capacity(capacity)
            .hot_allocation(HOT_ALLOCATION)
            .build();
        let versions = Arc::new(Versions::new());
        let map = match options {
            Ok(o) => Map::with_options(
                o,
                EntryWeighter,
                KeyHashBuilder::default(),
                Evictions {
                    stats: stats.clone(),
                    versions: versions.clone(),
                },
            ),
            // build() fails only when a capacity is unset, and both are set above.
            Err(e) => unreachable!("quick_cache options: {e}"),
        };
        let max_weight = (map.shard_capacity() as f64 * HOT_ALLOCATION) as u64;
        Cache {
            inner: Arc::new(Inner {
                map,
                versions,
                stats,
                patches: Patchable::default(),
                fills: DashMap::new(),
                next_fill: AtomicU64::new(0),
                max_bytes: cfg.max_bytes,
                max_result_bytes: AtomicUsize::new(cfg.max_result_bytes),
                max_weight,
                ttl_ns: AtomicU64::new(ttl_ns(cfg.ttl)),
            }),
        }
    }

    pub fn versions(&self) -> &Versions {
        &self.inner.versions
    }

    /// The registry shared with the binlog tail, which bumps tables from another task.
    pub fn versions_arc(&self) -> Arc<Versions> {
        self.inner.versions.clone()
    }

    pub fn stats(&self) -> &CacheStats {
        &self.inner.stats
    }

    /// Which entries writes may patch (`policy::patch`).
    pub fn patches(&self) -> &Patchable {
        &self.inner.patches
    }

    /// The entry under `key`, whatever its stamps, without marking it used or counting.
    pub fn peek(&self, key: Key) -> Option<Arc<Entry>> {
        self.inner.map.peek(&key)
    }

    /// Puts a patch of `old` (`policy::patch`) under `key` when `old` is still what it
    /// holds; false (nothing stored) otherwise. `old` is taken out first, exactly (not
    /// counted as an eviction); an entry another session stores between that and the store
    /// is replaced: it is either stale already (stamped before the patched write's bumps)
    /// or as current as the patch.
    pub fn replace_patched(&self, key: Key, old: &Arc<Entry>, new: Entry) -> bool {
        if !new.is_well_formed()
            || new.weight() > self.inner.max_weight
            || new.bytes.len() > self.inner.max_result_bytes.load(Ordering::Relaxed)
        {
            return false;
        }
        if !self.remove_exact(key, old) {
            return false;
        }
        self.inner.map.insert(key, Arc::new(new));
        true
    }

    /// Removes exactly `e` from under `key` (a patch the verifier found wrong).
    pub fn remove_entry(&self, key: Key, e: &Arc<Entry>) -> bool {
        self.remove_exact(key, e)
    }

    /// The counters shared with the binlog tail, which counts its invalidations from another
    /// task.
    pub fn stats_arc(&self) -> Arc<CacheStats> {
        self.inner.stats.clone()
    }

    /// The entry under `key` if present and unexpired. It does not check the stamps, because
    /// what is valid depends on the caller's transaction: outside one, use `get_current`;
    /// inside one, check `stamps.unchanged_since(snapshot)` and call `hit` when serving.
    pub fn get(&self, key: Key) -> Option<Arc<Entry>> {
        let e = self.inner.map.get(&key)?;
        if e.expired_now() {
            if self.remove_exact(key, &e) {
                CacheStats::incr(&self.inner.stats.expired);
            }
            return None;
        }
        Some(e)
    }

    /// The entry under `key` if present, unexpired and computed under the current table
    /// versions; a stale entry is removed, unless its rule lets it be served stale for a
    /// while yet (`outdated` finds it then). Counts a hit when it returns one.
    pub fn get_current(&self, key: Key) -> Option<Arc<Entry>> {
        let e = self.get(key)?;
        if !e.stamps.is_current(&self.inner.versions) {
            // Only an outdated entry pays for the `max_stale` check (a clock read), and for
            // the one that keeps an entry a child write's pending derived slices only hold
            // back (it may be served again once they clear).
            let keep = e.max_stale.is_some_and(|m| e.created.elapsed() < m)
                || e.stamps.held_by_pending(&self.inner.versions);
            if !keep {
                self.drop_outdated(key, &e);
            }
            return None;
        }
        self.hit(&e);
        Some(e)
    }

    /// The entry under `key` when it is unexpired, outdated and its rule sets `max_stale`:
    /// what `policy::stale` is asked about. Not marked recently used.
    pub fn outdated(&self, key: Key) -> Option<Arc<Entry>> {
        let e = self.inner.map.peek(&key)?;
        (e.max_stale.is_some() && !e.expired_now() && !e.stamps.is_current(&self.inner.versions))
            .then_some(e)
    }

    /// Removes `e` from under `key`, outdated for good, counted as a stale drop.
    pub fn drop_outdated(&self, key: Key, e: &Arc<Entry>) {
        if self.remove_exact(key, e) {
            CacheStats::incr(&self.inner.stats.stale_dropped);
        }
    }

    /// Whether some session holds the fill claim on `key` (is computing it now).
    pub fn filling(&self, key: Key) -> bool {
        self.inner.fills.contains_key(&key)
    }

    /// Counts `e` as served stale: a hit, and Qcache_stale_served.
    pub fn stale_hit(&self, e: &Entry) {
        self.hit(e);
        CacheStats::incr(&self.inner.stats.stale_served);
    }

    /// Whether `key` holds an entry that is current and unexpired, without counting a hit or
    /// marking it recently used.
    pub fn holds_servable(&self, key: Key) -> bool {
        self.inner
            .map
            .peek(&key)
            .is_some_and(|e| e.stamps.is_current(&self.inner.versions) && !e.expired_now())
    }

    /// Counts `e` as served (Qcache_hits and the entry's own count). `get_current` does this
    /// itself; call it after `get` when validating some other way.
    pub fn hit(&self, e: &Entry) {
        self.inner.stats.hits.incr();
        e.record_hit();
    }

    /// Removes exactly this entry: a fresh one stored under the same key meanwhile stays.
    fn remove_exact(&self, key: Key, e: &Arc<Entry>) -> bool {
        self.inner
            .map
            .remove_if(&key, |cur| Arc::ptr_eq(cur, e))
            .is_some()
    }

    pub fn remove(&self, key: Key) -> Option<Arc<Entry>> {
        self.inner.map.remove(&key).map(|(_, v)| v)
    }

    /// Claims the right to fill `key`. Exactly one caller at a time gets `Leader`; the others
    /// get a `Waiter` on it (counted in Qcache_stampede_waits).
    pub fn claim(&self, key: Key) -> Claim {
        match self.inner.fills.entry(key) {
            dashmap::Entry::Occupied(o) => {
                CacheStats::incr(&self.inner.stats.stampede_waits);
                Claim::Follower(Waiter {
                    rx: o.get().1.clone(),
                })
            }
            dashmap::Entry::Vacant(v) => {
                let id = self.inner.next_fill.fetch_add(1, Ordering::Relaxed);
                let (tx, rx) = watch::channel(false);
                v.insert((id, rx));
                Claim::Leader(FillGuard {
                    cache: self.clone(),
                    key,
                    id,
                    tx,
                })
            }
        }
    }

    /// Stores `entry` under `key` unless it is larger than `max_result_bytes` (or than a cache
    /// shard can hold), its status offset is out of range, or a table changed since its
    /// stamps were taken. Applies the TTL. Returns whether the key now holds the result:
    /// true also when an equal, servable entry was already held and is kept (not counted as
    /// an insert). A refusal is counted in Qcache_not_cached with its reason.
    ///
    /// A bump between the stamp check and the store leaves a stale entry, which every
    /// lookup's stamp check hides; the check here only avoids storing known garbage.
    pub fn insert(&self, key: Key, entry: Entry) -> bool {
        self.insert_checked(key, entry, None)
    }

    /// `insert` for a result computed inside a transaction that began at `snap`: its stamps
    /// (captured before the query went upstream) must also show no table changed since the
    /// snapshot, because the server answered from the snapshot, not from the latest data.
    pub fn insert_in(&self, key: Key, entry: Entry, snap: &Snapshot) -> bool {
        self.insert_checked(key, entry, Some(snap))
    }

    fn insert_checked(&self, key: Key, mut entry: Entry, snap: Option<&Snapshot>) -> bool {
        let inner = &*self.inner;
        if entry.bytes.len() > inner.max_result_bytes.load(Ordering::Relaxed)
            || entry.weight() > inner.max_weight
        {
            CacheStats::incr(&inner.stats.too_large);
            inner.stats.not_cached(Reason::TooLarge);
            return false;
        }
        if !entry.is_well_formed() {
            inner.stats.not_cached(Reason::Malformed);
            return false;
        }
        let valid = match snap {
            None => entry.stamps.is_current(&inner.versions),
            Some(snap) => entry.stamps.valid_in(&inner.versions, snap),
        };
        if !valid {
            inner.stats.not_cached(Reason::StaleFill);
            return false;
        }
        // A TTL too large to add to an Instant means "never" rather than a panic.
        let ttl = match inner.ttl_ns.load(Ordering::Relaxed) {
            NO_TTL => None,
            ns => Some(Duration::from_nanos(ns)),
        };
        if let Some(by_ttl) = ttl.and_then(|ttl| entry.created.checked_add(ttl)) {
            entry.expires = Some(entry.expires.map_or(by_ttl, |e| e.min(by_ttl)));
        }
        if self.holds_servable(key) {
            // An equal result is already held (a read that had to go to the server anyway,
            // such as the one that opens a transaction's snapshot): keeping it saves
            // quick_cache a replacement, which it would report as an eviction.
            return true;
        }
        inner.map.insert(key, Arc::new(entry));
        CacheStats::incr(&inner.stats.inserts);
        true
    }

    /// RESET QUERY CACHE's second half: every entry goes now, freeing its memory. The first
    /// half is the epoch bump (`invalidation::admin::reset_query_cache`), which makes fills
    /// in flight, stamped before the reset, refused or invisible too.
    pub fn drop_entries(&self) {
        self.inner.map.clear();
    }

    pub fn len(&self) -> usize {
        self.inner.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.map.is_empty()
    }

    /// Weight of the entries held, in bytes (results plus bookkeeping).
    pub fn weight(&self) -> u64 {
        self.inner.map.weight()
    }

    pub fn max_bytes(&self) -> u64 {
        self.inner.max_bytes
    }

    pub fn max_result_bytes(&self) -> usize {
        self.inner.max_result_bytes.load(Ordering::Relaxed)
    }

    /// Applies a reloaded config's TTL and result-size limit to entries stored from now on
    /// (`max_bytes` sizes the shards and needs a restart).
    pub fn reconfigure(&self, cfg: &CacheConfig) {
        self.inner.ttl_ns.store(ttl_ns(cfg.ttl), Ordering::Relaxed);
        self.inner
            .max_result_bytes
            .store(cfg.max_result_bytes, Ordering::Relaxed);
    }

    /// Keys being filled right now.
    pub fn fills_in_flight(&self) -> usize {
        self.inner.fills.len()
    }

    /// A snapshot of every entry for admin listings. Walks the whole cache: admin use only.
    pub fn entries(&self) -> Vec<EntryInfo> {
        let now = Instant::now();
        let v = &self.inner.versions;
        self.inner
            .map
            .iter()
            .map(|(key, e)| EntryInfo {
                key,
                digest: e.digest,
                tables: e.tables().map(|t| t.qualified()).collect(),
                bytes: e.bytes.len(),
                weight: e.weight(),
                hits: e.hits.load(Ordering::Relaxed),
                age: now.saturating_duration_since(e.created),
                current: e.stamps.is_current(v) && !e.is_expired(now),
                sql: e.sql.clone(),
            })
            .collect()
    }

    /// The `SHOW STATUS LIKE 'Qcache%'` rows.
    pub fn status_rows(&self) -> Vec<(&'static str, u64)> {
        let free = self.max_bytes().saturating_sub(self.weight());
        let mut rows = self.inner.stats.status_rows(self.len() as u64, free);
        rows.extend(self.versions().parents.status_rows());
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::entry::tests::response;
    use crate::cache::key::key;
    use crate::cache::versions::{Stamps, TableHandle};
    use crate::observe::stats::InvalidationSource;

    fn cfg(max_bytes: u64, max_result_bytes: usize) -> CacheConfig {
        CacheConfig {
            max_bytes,
            max_result_bytes,
            ..CacheConfig::default()
        }
    }

    fn entry(c: &Cache, tables: &[TableHandle], filler: usize) -> Entry {
        let (bytes, at) = response(0, filler);
        Entry::new(bytes, at, Stamps::capture(c.versions(), tables), 1)
    }

    fn load(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// What `invalidation::apply` does for a table or everything, which the store's tests
    /// cannot reach from below it: bump, then count under `source`.
    impl Cache {
        fn invalidate_table(&self, t: &TableHandle, source: InvalidationSource) {
            self.versions().bump(t);
            self.stats().invalidation(source);
        }

        fn invalidate_all(&self, source: InvalidationSource) {
            self.versions().bump_all();
            self.stats().invalidation(source);
        }
    }

    /// A patch replaces exactly the entry it was computed from, and is no eviction.
    #[test]
    fn a_patch_replaces_only_its_own_entry() {
        let c = Cache::new(&cfg(1 << 20, 1 << 16));
        let t = c.versions().table("db", "t");
        assert!(c.insert(1, entry(&c, std::slice::from_ref(&t), 10)));
        let old = c.peek(1).unwrap();
        let patched = old.patched(old.bytes.clone(), old.status_at, old.stamps.clone());
        assert!(c.replace_patched(1, &old, patched));
        let new = c.peek(1).unwrap();
        assert!(!Arc::ptr_eq(&new, &old));
        assert_eq!(
            load(&c.stats().stale_dropped) + load(&c.stats().lowmem_prunes),
            0
        );
        // The old entry is gone: a second patch of it finds nothing to replace.
        let again = old.patched(old.bytes.clone(), old.status_at, old.stamps.clone());
        assert!(!c.replace_patched(1, &old, again));
        assert!(Arc::ptr_eq(&c.peek(1).unwrap(), &new));
        // Nor does a patch of a key that holds nothing.
        let none = old.patched(old.bytes.clone(), old.status_at, old.stamps.clone());
        assert!(!c.replace_patched(2, &old, none));
        assert!(c.peek(2).is_none());
    }

    #[test]
    fn hit_and_miss() {
        let c = Cache::new(&CacheConfig::default());
        let t = c.versions().table("db", "t");
        let k = key(1, 0, b"SELECT * FROM t");
        assert!(c.get_current(k).is_none());
        assert!(c.insert(k, entry(&c, std::slice::from_ref(&t), 10)));
        let e = c.get_current(k).expect("just inserted");
        assert_eq!(e.hits.load(Ordering::Relaxed), 1);
        assert!(c.get_current(key(2, 0, b"SELECT * FROM t")).is_none());
        assert_eq!(c.stats().hits.get(), 1);
        assert_eq!(load(&c.stats().inserts), 1);
        assert_eq!(c.len(), 1);
        assert!(c.weight() >= e.weight());
        assert!(c.remove(k).is_some());
        assert!(c.get(k).is_none());
    }

    #[test]
    fn stale_after_bump_is_dropped() {
        let c = Cache::new(&CacheConfig::default());
        let a = c.versions().table("db", "a");
        let b = c.versions().table("db", "b");
        let k = key(1, 0, b"q");
        assert!(c.insert(k, entry(&c, &[a.clone(), b.clone()], 10)));
        c.invalidate_table(&b, InvalidationSource::Write);
        // get() still sees it (the caller decides validity), get_current() drops it.
        assert!(c.get(k).is_some());
        assert!(c.get_current(k).is_none());
        assert!(c.get(k).is_none(), "stale entry was removed");
        assert_eq!(load(&c.stats().stale_dropped), 1);
        assert_eq!(c.stats().invalidations(InvalidationSource::Write), 1);

        // An entry on another table survives; bump_all kills it.
        let k2 = key(1, 0, b"q2");
        assert!(c.insert(k2, entry(&c, std::slice::from_ref(&a), 10)));
        assert!(c.get_current(k2).is_some());
        c.invalidate_all(InvalidationSource::Binlog);
        assert!(c.get_current(k2).is_none());
    }

    #[test]
    fn replacing_or_evicting_a_stale_entry_is_no_lowmem_prune() {
        // Found by a read_write run: 15k "prunes" with 263 MB of the cache free, because
        // quick_cache reports a replaced entry like an evicted one.
        let c = Cache::new(&CacheConfig::default());
        let t = c.versions().table("db", "t");
        let k = key(1, 0, b"q");
        assert!(c.insert(k, entry(&c, std::slice::from_ref(&t), 10)));
        c.invalidate_table(&t, InvalidationSource::Write);
        assert!(c.insert(k, entry(&c, std::slice::from_ref(&t), 10)));
        assert_eq!(load(&c.stats().lowmem_prunes), 0);
        assert_eq!(load(&c.stats().stale_dropped), 1);
        assert_eq!(c.len(), 1);
        // A second fill of a servable entry keeps the one held: no replacement, no prune.
        let held = c.get(k).expect("held");
        assert!(c.holds_servable(k));
        assert!(c.insert(k, entry(&c, std::slice::from_ref(&t), 10)));
        assert!(Arc::ptr_eq(&held, &c.get(k).expect("still held")));
        assert_eq!(load(&c.stats().lowmem_prunes), 0);
        assert_eq!(load(&c.stats().inserts), 2);

        // Under memory pressure, stale entries that make room are dropped, not pruned;
        // only servable ones count as prunes.
        let one = entry(&c, &[], 1000).weight();
        let max = one * 64;
        let c = Cache::new(&cfg(max, 4096));
        let t = c.versions().table("db", "t");
        let n = 64u64;
        for i in 0..n {
            assert!(c.insert(
                key(1, 0, &i.to_le_bytes()),
                entry(&c, std::slice::from_ref(&t), 1000)
            ));
        }
        c.invalidate_table(&t, InvalidationSource::Write);
        let held = c.len() as u64;
        let dropped_before = load(&c.stats().stale_dropped);
        // Entries on `t` evicted while they were still current were real prunes.
        let pruned_before = load(&c.stats().lowmem_prunes);
        assert_eq!(pruned_before + held, n);
        let u = c.versions().table("db", "u");
        for i in 0..n {
            assert!(c.insert(
                key(2, 0, &i.to_le_bytes()),
                entry(&c, std::slice::from_ref(&u), 1000)
            ));
        }
        let pruned = load(&c.stats().lowmem_prunes) - pruned_before;
        let dropped = load(&c.stats().stale_dropped) - dropped_before;
        assert!(dropped > 0, "stale entries made room");
        // Every entry on `t` was stale; any prune was of a current entry on `u`.
        let left_on_t = (0..n)
            .filter(|i| c.get(key(1, 0, &i.to_le_bytes())).is_some())
            .count() as u64;
        assert_eq!(dropped + left_on_t, held);
        let left_on_u = (0..n)
            .filter(|i| c.get(key(2, 0, &i.to_le_bytes())).is_some())
            .count() as u64;
        assert_eq!(pruned + left_on_u, n);
    }

    #[test]
    fn fill_race_is_refused_or_invisible() {
        let c = Cache::new(&CacheConfig::default());
        let t = c.versions().table("db", "t");
        let k = key(1, 0, b"q");
        // Stamps captured before the query went upstream, a write lands, then the fill ends.
        let e = entry(&c, std::slice::from_ref(&t), 10);
        c.versions().bump(&t);
        assert!(!c.insert(k, e));
        assert!(c.get(k).is_none());
        assert_eq!(c.stats().not_cached_reasons(), vec![(Reason::StaleFill, 1)]);

        // The bump lands after the insert check: the entry is stored but never served.
        let e = entry(&c, std::slice::from_ref(&t), 10);
        assert!(c.insert(k, e));
        c.versions().bump(&t);
        assert!(c.get_current(k).is_none());

        // Same through a guard.
        let Claim::Leader(g) = c.claim(k) else {
            panic!("no fill in flight")
        };
        let e = entry(&c, std::slice::from_ref(&t), 10);
        c.versions().bump(&t);
        assert!(!g.insert(e));
        assert!(c.get(k).is_none());
    }

    #[test]
    fn transaction_snapshot_reads_and_fills() {
        let c = Cache::new(&CacheConfig::default());
        let a = c.versions().table("db", "a");
        let b = c.versions().table("db", "b");
        let ka = key(1, 0, b"SELECT * FROM a");
        let kb = key(1, 0, b"SELECT * FROM b");
        assert!(c.insert(ka, entry(&c, std::slice::from_ref(&a), 10)));
        assert!(c.insert(kb, entry(&c, std::slice::from_ref(&b), 10)));
        let snap = c.versions().snapshot();
        // What a session inside that transaction may be served (`Session::servable`).
        let get_in = |k| c.get(k).filter(|e| e.stamps.valid_in(c.versions(), &snap));
        assert!(get_in(ka).is_some());
        // Another session writes b after our snapshot: b's entry is gone for everyone
        // (stale), and a fresh b entry is still newer than our snapshot.
        c.invalidate_table(&b, InvalidationSource::Write);
        assert!(get_in(kb).is_none());
        assert!(c.insert(kb, entry(&c, std::slice::from_ref(&b), 10)));
        assert!(get_in(kb).is_none());
        assert!(
            c.get(kb).is_some(),
            "kept for sessions outside the snapshot"
        );
        assert!(c.get_current(kb).is_some());
        // Our fill of b computed from the snapshot must not be stored.
        let e = entry(&c, std::slice::from_ref(&b), 10);
        assert!(!c.insert_in(key(1, 0, b"b2"), e, &snap));
        // A fill of a (unchanged since the snapshot) is fine, through a guard too.
        let Claim::Leader(g) = c.claim(key(1, 0, b"a2")) else {
            panic!("leads")
        };
        assert!(g.insert_in(entry(&c, std::slice::from_ref(&a), 10), &snap));
        assert!(get_in(key(1, 0, b"a2")).is_some());
    }

    #[test]
    fn eviction_keeps_weight_within_max_bytes() {
        let max = 1024 * 1024;
        let c = Cache::new(&cfg(max, 16 * 1024));
        let t = c.versions().table("db", "t");
        let one = entry(&c, std::slice::from_ref(&t), 1000).weight();
        let n = 10 * max / one;
        for i in 0..n {
            assert!(c.insert(
                key(1, 0, &i.to_le_bytes()),
                entry(&c, std::slice::from_ref(&t), 1000)
            ));
            assert!(c.weight() <= max, "weight {} > {max}", c.weight());
        }
        assert!(c.len() as u64 <= max / one);
        // Nearly full: eviction works per shard, so allow some slack but not an empty cache.
        assert!(c.weight() > max / 2, "weight {}", c.weight());
        let pruned = load(&c.stats().lowmem_prunes);
        assert_eq!(pruned + c.len() as u64, n);
        let rows = c.status_rows();
        let get = |n: &str| rows.iter().find(|r| r.0 == n).map(|r| r.1);
        assert_eq!(get("Qcache_lowmem_prunes"), Some(pruned));
        assert_eq!(get("Qcache_queries_in_cache"), Some(c.len() as u64));
        assert_eq!(get("Qcache_free_memory"), Some(max - c.weight()));
    }

    #[test]
    fn too_large_is_refused() {
        let c = Cache::new(&cfg(1024 * 1024, 4096));
        let k = key(1, 0, b"big");
        assert!(!c.insert(k, entry(&c, &[], 5000)));
        assert!(c.get(k).is_none());
        assert_eq!(load(&c.stats().too_large), 1);
        assert_eq!(c.stats().not_cached.get(), 1);
        assert!(c.insert(k, entry(&c, &[], 3000)));

        // A tiny cache cannot hold even a permitted result: refused, not evicting everything.
        let tiny = Cache::new(&cfg(1000, 4096));
        assert!(!tiny.insert(k, entry(&tiny, &[], 3000)));
        assert_eq!(load(&tiny.stats().too_large), 1);
        assert_eq!(load(&tiny.stats().lowmem_prunes), 0);
    }

    #[test]
    fn malformed_entry_is_refused() {
        let c = Cache::new(&CacheConfig::default());
        let mut e = entry(&c, &[], 10);
        e.status_at = e.bytes.len();
        assert!(!c.insert(key(1, 0, b"m"), e));
        assert_eq!(c.stats().not_cached_reasons(), vec![(Reason::Malformed, 1)]);
    }

    #[test]
    fn ttl_expiry() {
        let c = Cache::new(&CacheConfig {
            ttl: Some(Duration::from_secs(10)),
            ..CacheConfig::default()
        });
        let k = key(1, 0, b"q");
        assert!(c.insert(k, entry(&c, &[], 10)));
        let e = c.get(k).expect("fresh");
        assert!(e.expires.is_some());
        // Check the rule at given instants rather than sleeping through a TTL.
        assert!(!e.is_expired(e.created + Duration::from_secs(9)));
        assert!(e.is_expired(e.created + Duration::from_secs(10)));

        let mut old = entry(&c, &[], 10);
        old.created = Instant::now() - Duration::from_secs(11);
        let k2 = key(1, 0, b"q2");
        assert!(c.insert(k2, old));
        assert!(c.get(k2).is_none());
        assert!(c.get_current(k2).is_none());
        assert_eq!(c.len(), 1, "expired entry removed on lookup");
        assert_eq!(load(&c.stats().expired), 1);
    }

    #[test]
    fn huge_ttl_means_no_expiry() {
        let c = Cache::new(&CacheConfig {
            ttl: Some(Duration::MAX),
            ..CacheConfig::default()
        });
        assert!(c.insert(key(1, 0, b"q"), entry(&c, &[], 10)));
        assert!(c.get_current(key(1, 0, b"q")).is_some());
    }

    #[test]
    fn entries_listing() {
        let c = Cache::new(&CacheConfig::default());
        let t = c.versions().table("shop", "orders");
        let k = key(1, 0, b"SELECT * FROM orders");
        let e = entry(&c, std::slice::from_ref(&t), 10).with_sql("SELECT * FROM orders");
        assert!(c.insert(k, e));
        let _ = c.get_current(k);
        let list = c.entries();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].key, k);
        assert_eq!(list[0].tables, vec!["shop.orders".to_string()]);
        assert_eq!(list[0].hits, 1);
        assert!(list[0].current);
        assert_eq!(list[0].sql.as_deref(), Some("SELECT * FROM orders"));
        c.versions().bump(&t);
        assert!(!c.entries()[0].current);
    }

    #[test]
    fn status_rows_have_stable_names() {
        let c = Cache::new(&cfg(1 << 20, 1 << 16));
        let names: Vec<&str> = c.status_rows().iter().map(|r| r.0).collect();
        assert_eq!(
            &names[..9],
            &[
                "Qcache_free_blocks",
                "Qcache_free_memory",
                "Qcache_hits",
                "Qcache_inserts",
                "Qcache_lowmem_prunes",
                "Qcache_not_cached",
                "Qcache_queries_in_cache",
                "Qcache_total_blocks",
                "Qcache_invalidations",
            ]
        );
        assert!(names.iter().all(|n| n.starts_with("Qcache_")));
        let rows = c.status_rows();
        assert_eq!(rows[1].1, 1 << 20);
        assert_eq!(rows[0].1, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stampede_one_leader_followers_wake_on_insert() {
        let c = Cache::new(&CacheConfig::default());
        let k = key(1, 0, b"SELECT slow");
        let barrier = Arc::new(tokio::sync::Barrier::new(50));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let c = c.clone();
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                match c.claim(k) {
                    Claim::Leader(g) => {
                        // Let every follower register before filling.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let e = entry(&c, &[], 10);
                        assert!(g.insert(e));
                        (true, true)
                    }
                    Claim::Follower(w) => {
                        let out = w.wait(Duration::from_secs(10)).await;
                        (
                            false,
                            out == WaitOutcome::Filled && c.get_current(k).is_some(),
                        )
                    }
                }
            }));
        }
        let mut leaders = 0;
        for t in tasks {
            let (leader, found) = t.await.expect("task");
            leaders += usize::from(leader);
            assert!(found, "follower woke without the entry");
        }
        assert_eq!(leaders, 1);
        assert_eq!(load(&c.stats().stampede_waits), 49);
        assert_eq!(c.fills_in_flight(), 0);
    }

    #[tokio::test]
    async fn followers_wake_on_guard_drop() {
        let c = Cache::new(&CacheConfig::default());
        let k = key(1, 0, b"q");
        let Claim::Leader(g) = c.claim(k) else {
            panic!("first claim leads")
        };
        let mut waiters = Vec::new();
        for _ in 0..5 {
            let Claim::Follower(w) = c.claim(k) else {
                panic!("second claim follows")
            };
            waiters.push(tokio::spawn(w.wait(Duration::from_secs(30))));
        }
        tokio::task::yield_now().await;
        drop(g);
        for w in waiters {
            assert_eq!(w.await.expect("task"), WaitOutcome::Abandoned);
        }
        assert!(c.get(k).is_none());
        // The key can be claimed again.
        assert!(matches!(c.claim(k), Claim::Leader(_)));
    }

    #[tokio::test]
    async fn no_lost_wakeup_when_leader_finishes_before_wait() {
        let c = Cache::new(&CacheConfig::default());
        let k = key(1, 0, b"q");
        let Claim::Leader(g) = c.claim(k) else {
            panic!("first claim leads")
        };
        let Claim::Follower(w1) = c.claim(k) else {
            panic!("follows")
        };
        let Claim::Follower(w2) = c.claim(k) else {
            panic!("follows")
        };
        assert!(g.insert(entry(&c, &[], 10)));
        // Both were cloned before the leader finished and wait only now.
        let short = Duration::from_millis(1);
        assert_eq!(w1.wait(short).await, WaitOutcome::Filled);
        assert_eq!(w2.wait(short).await, WaitOutcome::Filled);

        let k2 = key(1, 0, b"q2");
        let Claim::Leader(g) = c.claim(k2) else {
            panic!("leads")
        };
        let Claim::Follower(w) = c.claim(k2) else {
            panic!("follows")
        };
        drop(g);
        assert_eq!(w.wait(short).await, WaitOutcome::Abandoned);
    }

    #[tokio::test]
    async fn followers_time_out() {
        let c = Cache::new(&CacheConfig::default());
        let k = key(1, 0, b"q");
        let Claim::Leader(_g) = c.claim(k) else {
            panic!("first claim leads")
        };
        let Claim::Follower(w) = c.claim(k) else {
            panic!("second claim follows")
        };
        let t0 = Instant::now();
        let out = w.wait(Duration::from_millis(50)).await;
        assert_eq!(out, WaitOutcome::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn cancelled_leader_releases_followers() {
        let c = Cache::new(&CacheConfig::default());
        let k = key(1, 0, b"q");
        let c2 = c.clone();
        let leader = tokio::spawn(async move {
            let Claim::Leader(_g) = c2.claim(k) else {
                panic!("leads")
            };
            std::future::pending::<()>().await;
        });
        while c.fills_in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        let Claim::Follower(w) = c.claim(k) else {
            panic!("follows")
        };
        leader.abort();
        assert_eq!(
            w.wait(Duration::from_secs(30)).await,
            WaitOutcome::Abandoned
        );
        assert_eq!(c.fills_in_flight(), 0);
    }

    #[test]
    fn key_hasher_spreads_keys() {
        let b = KeyHashBuilder::default();
        let h = |k: u128| b.hash_one(k);
        assert_ne!(h(1), h(2));
        assert_ne!(h(1), h(1 << 64));
        assert_eq!(h(42), h(42));
        // Low bits (bucket index) spread over keys as the cache makes them: xxh3-128 of
        // statements. (Sequential integers are no such keys: for about 3% of random seeds
        // the fold maps 1,024 of them to fewer than 500 buckets, which made this flaky.)
        let mut buckets = std::collections::HashSet::new();
        for i in 0..1024u32 {
            let k = crate::cache::key::key(7, 0, format!("SELECT {i}").as_bytes());
            buckets.insert(h(k) & 1023);
        }
        // 1,024 draws into 1,024 buckets fill about 647 (1 - 1/e); 500 is 14 sigma below.
        assert!(buckets.len() > 500, "{}", buckets.len());
    }
}
