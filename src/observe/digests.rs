//! Per-digest statistics: for each statement shape (digest) and default schema, how often
//! it ran, hit, missed and was stored, why it was not cached, what it sent and what it cost
//! the server — bounded to the top N shapes by calls, the rest folded into one "other" row.
//!
//! Counting is on the hit path, so nothing here is shared by all sessions. A hit on the row
//! a session counted last (the common case) goes to that session's own cell, without a lock
//! or a locked instruction; everything else goes to the session thread's stripe under a
//! mutex only readers and that thread take, and the cell's hits are moved into their row
//! whenever its stripe is locked for a read, a fill or the session moving to another row.
//! A stripe holds at most 2·N rows; when it fills, its N most-called rows stay and the rest
//! fold into its "other". A read merges the stripes, keeps the N most-called shapes and
//! folds the rest, so counts are exact whatever the concurrency: every call lands in
//! exactly one row or in "other". Memory: 2·N rows per stripe and one cell per session.
//!
//! Nothing here parses: the caller hands in the digest the hit path already has (it is
//! stored in the cache entry) and, on a miss, the normalised text.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use xxhash_rust::xxh3::xxh3_64;

use super::stats::{stripe, STRIPES};
use crate::policy::Reason;

/// How one statement went, as far as the cache is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served from the cache.
    Hit,
    /// Served from the cache an entry a change of rows had outdated, under its rule's
    /// `max_stale` (`policy::stale`): a hit, also counted apart.
    StaleHit,
    /// Sent to the server and its result stored.
    Stored,
    /// Sent to the server, nothing stored; the reason when one was counted as
    /// `Qcache_not_cached_<reason>`.
    Sent(Option<Reason>),
}

/// One statement's figures, handed to [`Digests::record`].
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    pub digest: u64,
    /// The session's default schema.
    pub schema: Option<&'a str>,
    /// The session's user (rows are per shape, schema and user).
    pub user: Option<&'a str>,
    /// [`row_key`]`(schema, user)`, which the session keeps from one `USE` to the next rather
    /// than hashing the name on every statement.
    pub schema_key: u64,
    /// The normalised text, when the caller has it (a miss computes it; a hit passes the
    /// entry's). Only read when the row is new or has none yet.
    pub text: Option<&'a Arc<str>>,
    pub outcome: Outcome,
    pub rows: u64,
    pub bytes: u64,
    /// Time from sending to the end of the server's answer; zero for a hit.
    pub upstream: Duration,
    /// When it happened (the hit path's own clock reading, no extra one).
    pub at: Instant,
}

/// The counts of one row (or of "other").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub calls: u64,
    pub hits: u64,
    /// Statements sent to the server: calls − hits.
    pub misses: u64,
    pub stores: u64,
    /// Hits that served an outdated entry under `max_stale` (among `hits`).
    pub stale_hits: u64,
    /// Not cached, by reason (the names of `Qcache_not_cached_<reason>`).
    pub not_cached: Vec<(Reason, u64)>,
    pub rows: u64,
    pub bytes: u64,
    pub upstream_ns: u64,
    /// The shortest and longest of the misses' upstream times (0 before the first).
    pub upstream_min_ns: u64,
    pub upstream_max_ns: u64,
    pub first_seen: Option<Instant>,
    pub last_seen: Option<Instant>,
}

impl Counts {
    /// Inlined into [`Digests::record`]: a hit takes only the straight path.
    #[inline]
    fn add(&mut self, o: &Observation<'_>) {
        self.calls += 1;
        self.rows += o.rows;
        self.bytes += o.bytes;
        if o.outcome == Outcome::Hit {
            self.hits += 1;
        } else if o.outcome == Outcome::StaleHit {
            self.hits += 1;
            self.stale_hits += 1;
        } else {
            self.add_sent(o);
        }
        if self.first_seen.is_none() {
            self.first_seen = Some(o.at);
        }
        if self.last_seen < Some(o.at) {
            self.last_seen = Some(o.at);
        }
    }

    /// What a statement sent to the server adds besides its call.
    fn add_sent(&mut self, o: &Observation<'_>) {
        match o.outcome {
            Outcome::Stored => self.stores += 1,
            Outcome::Sent(Some(reason)) => self.count_reason(reason, 1),
            Outcome::Sent(None) | Outcome::Hit | Outcome::StaleHit => {}
        }
        self.misses += 1;
        let ns = u64::try_from(o.upstream.as_nanos()).unwrap_or(u64::MAX);
        self.upstream_ns = self.upstream_ns.saturating_add(ns);
        self.upstream_min_ns = if self.misses == 1 {
            ns
        } else {
            self.upstream_min_ns.min(ns)
        };
        self.upstream_max_ns = self.upstream_max_ns.max(ns);
    }

    fn count_reason(&mut self, reason: Reason, n: u64) {
        // A short list: a shape has one or two reasons, and a scan beats hashing.
        match self.not_cached.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, c)) => *c += n,
            None => self.not_cached.push((reason, n)),
        }
    }

    fn merge(&mut self, o: &Counts) {
        self.upstream_min_ns = match (self.misses, o.misses) {
            (_, 0) => self.upstream_min_ns,
            (0, _) => o.upstream_min_ns,
            _ => self.upstream_min_ns.min(o.upstream_min_ns),
        };
        self.calls += o.calls;
        self.hits += o.hits;
        self.misses += o.misses;
        self.stores += o.stores;
        self.stale_hits += o.stale_hits;
        for (r, n) in &o.not_cached {
            self.count_reason(*r, *n);
        }
        self.rows += o.rows;
        self.bytes += o.bytes;
        self.upstream_ns = self.upstream_ns.saturating_add(o.upstream_ns);
        self.upstream_max_ns = self.upstream_max_ns.max(o.upstream_max_ns);
        self.first_seen = match (self.first_seen, o.first_seen) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_seen = self.last_seen.max(o.last_seen);
    }

    /// Statements not cached, every reason together.
    pub fn not_cached_total(&self) -> u64 {
        self.not_cached.iter().map(|(_, n)| n).sum()
    }

    /// What the hits would have cost the server at this shape's mean upstream time.
    pub fn time_saved_ns(&self) -> u64 {
        if self.misses == 0 {
            return 0;
        }
        let mean = self.upstream_ns as u128 / self.misses as u128;
        u64::try_from(mean * self.hits as u128).unwrap_or(u64::MAX)
    }
}

#[derive(Debug, Clone)]
struct Row {
    schema: Option<Arc<str>>,
    user: Option<Arc<str>>,
    text: Option<Arc<str>>,
    counts: Counts,
}

/// (digest, [`row_key`] of schema and user): the map key of a row.
type RowKey = (u64, u64);

#[derive(Debug, Default)]
struct StripeData {
    /// Rows in slots, found by key through `index`; a slot keeps its row until the stripe's
    /// `layout` changes (a fill that folds rows, a reset).
    rows: Vec<(RowKey, Row)>,
    index: HashMap<RowKey, u32, foldhash::fast::FixedState>,
    other: Counts,
    /// The hit cells of the sessions counting here (see [`Cell`]), dead ones (whose session
    /// dropped its hint) pruned when a cell is added and on reads.
    cells: Vec<Arc<Cell>>,
}

/// A session's hits on the row it last counted, added without a lock: the session's
/// [`RowHint`] owns the cell and is the only writer of its counters (a load and a store each,
/// no read-modify-write: nothing else writes them), and whoever holds the cell's stripe lock
/// moves what the counters gained since into the row ("settles" them) — a read, a fill that
/// folds rows, the session moving the cell to another row. Every hit is in the row or still
/// in the cell, never in both and never lost, so counts stay exact under any concurrency.
/// `repr(C)`: what a hit reads and writes (the stripe, the four counters) on the cell's
/// first line; left to the compiler, the stripe went last, on a second line (#36).
#[derive(Debug)]
#[repr(C, align(64))]
struct Cell {
    /// The stripe the cell is registered in, fixed for its life.
    stripe: u32,
    // Written by the owning session only.
    hits: AtomicU64,
    rows: AtomicU64,
    bytes: AtomicU64,
    /// The latest hit's time, in nanoseconds after [`Digests::epoch`].
    last_ns: AtomicU64,
    // Under the stripe's lock: the row the counters belong to (its key), and how much of
    // them was already settled into it.
    digest: AtomicU64,
    schema: AtomicU64,
    settled_hits: AtomicU64,
    settled_rows: AtomicU64,
    settled_bytes: AtomicU64,
}

/// Adds to a counter only one thread writes: no locked instruction.
#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Cell {
    fn new(stripe: usize) -> Cell {
        let z = || AtomicU64::new(0);
        Cell {
            stripe: stripe as u32,
            hits: z(),
            rows: z(),
            bytes: z(),
            last_ns: z(),
            digest: z(),
            schema: z(),
            settled_hits: z(),
            settled_rows: z(),
            settled_bytes: z(),
        }
    }

    fn key(&self) -> RowKey {
        (
            self.digest.load(Ordering::Relaxed),
            self.schema.load(Ordering::Relaxed),
        )
    }

    /// What the counters gained since they were last settled, marked settled: (hits, rows,
    /// bytes, latest hit). Under the stripe's lock.
    fn take(&self) -> Option<(u64, u64, u64, u64)> {
        let r = Ordering::Relaxed;
        // Each counter on its own: a settle may see a hit's `hits` before its `rows`, and
        // what it does not see yet is taken by a later one.
        let hits = self.hits.load(r);
        let rows = self.rows.load(r);
        let bytes = self.bytes.load(r);
        let dh = hits.wrapping_sub(self.settled_hits.swap(hits, r));
        let dr = rows.wrapping_sub(self.settled_rows.swap(rows, r));
        let db = bytes.wrapping_sub(self.settled_bytes.swap(bytes, r));
        if (dh, dr, db) == (0, 0, 0) {
            return None;
        }
        Some((dh, dr, db, self.last_ns.load(r)))
    }

    /// Forgets what the counters gained (a reset): they were hits before it.
    fn discard(&self) {
        let r = Ordering::Relaxed;
        self.settled_hits.store(self.hits.load(r), r);
        self.settled_rows.store(self.rows.load(r), r);
        self.settled_bytes.store(self.bytes.load(r), r);
    }
}

impl StripeData {
    /// Moves cell `c`'s unsettled hits into its row, or into "other" when the row was folded
    /// away since.
    fn settle(&mut self, c: &Cell, epoch: Instant) {
        let Some((hits, rows, bytes, last_ns)) = c.take() else {
            return;
        };
        let at = epoch + Duration::from_nanos(last_ns);
        let counts = match self.index.get(&c.key()) {
            Some(&slot) => &mut self.rows[slot as usize].1.counts,
            None => &mut self.other,
        };
        counts.calls += hits;
        counts.hits += hits;
        counts.rows += rows;
        counts.bytes += bytes;
        if counts.first_seen.is_none() {
            counts.first_seen = Some(at);
        }
        counts.last_seen = counts.last_seen.max(Some(at));
    }

    /// Settles every cell, dropping (after settling) those no session holds any more.
    fn settle_all(&mut self, epoch: Instant) {
        let cells = std::mem::take(&mut self.cells);
        let mut live = Vec::with_capacity(cells.len());
        for c in cells {
            // Whether the session is gone is asked before settling: a session may add its
            // last hit and drop its hint between a settle and the question, and a cell
            // dropped then would take that hit with it.
            let dead = is_dead(&c);
            self.settle(&c, epoch);
            if !dead {
                live.push(c);
            }
        }
        self.cells = live;
    }
}

/// Whether `c`'s session dropped its hint: then nothing writes the cell any more (the
/// stripe's list holds the only reference, and only the lock holder may clone it).
fn is_dead(c: &Arc<Cell>) -> bool {
    if Arc::strong_count(c) != 1 {
        return false;
    }
    // Pairs with the release of the session's drop: its last writes are visible.
    std::sync::atomic::fence(Ordering::Acquire);
    true
}

/// Where a session's statements are counted: its [`Cell`] (made on its first statement), and
/// the row the cell points at with the stripe's layout then. A session repeating a shape
/// (the common case: a hit path serving one query shape) adds a hit to its cell without a
/// lock, hashing or comparing the schema name. The session calls [`forget`](Self::forget)
/// when its default schema changes, since the name was compared only when the hint was made.
#[derive(Debug, Default)]
pub struct RowHint {
    cell: Option<Arc<Cell>>,
    /// 0: hits take the locked path (layouts start at 1).
    layout: u64,
    key: RowKey,
}

impl RowHint {
    /// The next statement finds its row again (the cell is kept).
    pub fn forget(&mut self) {
        self.layout = 0;
    }
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    data: Mutex<StripeData>,
    /// Moves (under the lock) whenever rows change slots, so a [`RowHint`] from before no
    /// longer matches. Outside the lock: a hit reads it without taking it.
    layout: AtomicU64,
}

/// One row of a read: a shape under one schema, or (digest None) "other".
#[derive(Debug, Clone)]
pub struct DigestRow {
    /// None for the "other" row.
    pub digest: Option<u64>,
    pub schema: Option<Arc<str>>,
    pub user: Option<Arc<str>>,
    pub text: Option<Arc<str>>,
    pub counts: Counts,
}

impl DigestRow {
    /// A row with nothing in it (for column types).
    pub fn empty() -> DigestRow {
        DigestRow {
            digest: None,
            schema: None,
            user: None,
            text: None,
            counts: Counts::default(),
        }
    }
}

/// The per-digest statistics of one qcache, shared by every session.
#[derive(Debug)]
pub struct Digests {
    /// N: rows kept; 0 turns counting off.
    cap: AtomicUsize,
    stripes: [Stripe; STRIPES],
    /// Normalised texts by digest, computed once per shape on a miss and shared by its
    /// rows and cache entries.
    texts: quick_cache::sync::Cache<u64, Arc<str>>,
    /// What cells' hit times count from (an `Instant` does not fit an atomic).
    epoch: Instant,
    /// `epoch` on [`crate::clock`] (read with it), for the hit path's times.
    epoch_ns: u64,
}

/// Longest normalised text kept (then cut, with `…`).
pub const TEXT_MAX: usize = 1024;

impl Digests {
    pub fn new(cap: usize) -> Digests {
        Digests {
            cap: AtomicUsize::new(cap),
            stripes: Default::default(),
            texts: quick_cache::sync::Cache::new(cap.saturating_mul(4).max(4096)),
            epoch: Instant::now(),
            epoch_ns: crate::clock::now(),
        }
    }

    /// The normalised text of shape `digest`: remembered, or made by `make` (a miss's
    /// work, never a hit's) and remembered.
    pub fn text(&self, digest: u64, make: impl FnOnce() -> Option<String>) -> Option<Arc<str>> {
        if let Some(t) = self.texts.get(&digest) {
            return Some(t);
        }
        let t: Arc<str> = Arc::from(make()?);
        self.texts.insert(digest, t.clone());
        Some(t)
    }

    /// The remembered text of `digest`, if any.
    fn known_text(&self, digest: u64, given: Option<&Arc<str>>) -> Option<Arc<str>> {
        given.cloned().or_else(|| self.texts.get(&digest))
    }

    /// Whether counting is on (`stats.digests` > 0): callers skip the work of an
    /// observation when it is not.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.cap.load(Ordering::Relaxed) > 0
    }

    /// A reload may change N; stripes shrink at their next fill, reads at once.
    pub fn set_capacity(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    pub fn capacity(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// Counts one statement. `hint` is the session's (see [`RowHint`]); it is updated.
    /// A hit on the row the hint points at goes to the session's cell, without a lock;
    /// everything else takes its stripe's lock.
    #[inline]
    pub fn record(&self, o: &Observation<'_>, hint: &mut RowHint) {
        if o.outcome == Outcome::Hit
            && self.record_hit_after(o.digest, o.schema_key, o.rows, o.bytes, hint, || {
                o.at.saturating_duration_since(self.epoch).as_nanos() as u64
            })
        {
            return;
        }
        self.record_locked(o, hint);
    }

    /// A hit on the row `hint` points at, counted in the session's cell: true when done,
    /// false when it needs [`record`](Self::record) (no hint yet, another row, the stripe's
    /// rows moved). The hit path calls this first and builds an [`Observation`] only when
    /// it returns false.
    /// `at` is the hit's time on [`crate::clock`].
    #[inline]
    pub fn record_hit(
        &self,
        digest: u64,
        schema_key: u64,
        rows: u64,
        bytes: u64,
        at: u64,
        hint: &RowHint,
    ) -> bool {
        let since = || crate::clock::between(self.epoch_ns, at);
        self.record_hit_after(digest, schema_key, rows, bytes, hint, since)
    }

    /// [`record_hit`](Self::record_hit) with its time as nanoseconds after `epoch`, asked
    /// only when the hit is counted here.
    #[inline]
    fn record_hit_after(
        &self,
        digest: u64,
        schema_key: u64,
        rows: u64,
        bytes: u64,
        hint: &RowHint,
        since: impl FnOnce() -> u64,
    ) -> bool {
        if hint.layout == 0 || hint.key != (digest, schema_key) || !self.enabled() {
            return false;
        }
        let Some(c) = &hint.cell else { return false };
        if self.stripes[c.stripe as usize]
            .layout
            .load(Ordering::Relaxed)
            != hint.layout
        {
            return false;
        }
        let ns = since();
        bump(&c.hits, 1);
        bump(&c.rows, rows);
        bump(&c.bytes, bytes);
        c.last_ns.store(ns, Ordering::Relaxed);
        true
    }

    #[inline(never)]
    fn record_locked(&self, o: &Observation<'_>, hint: &mut RowHint) {
        let cap = self.capacity();
        if cap == 0 {
            return;
        }
        debug_assert_eq!(
            o.schema_key,
            row_key(o.schema, o.user.unwrap_or_default()),
            "a stale schema key"
        );
        let key = (o.digest, o.schema_key);
        let at = hint
            .cell
            .as_ref()
            .map_or_else(stripe, |c| c.stripe as usize);
        let stripe = &self.stripes[at];
        let Ok(mut guard) = stripe.data.lock() else {
            return;
        };
        let s = &mut *guard;
        if stripe.layout.load(Ordering::Relaxed) == 0 {
            stripe.layout.store(1, Ordering::Relaxed);
        }
        let cell = hint.cell.get_or_insert_with(|| {
            // Sessions that ended since the last one began are let go here.
            s.settle_all(self.epoch);
            let c = Arc::new(Cell::new(at));
            s.cells.push(c.clone());
            c
        });
        let slot = match s.index.get(&key) {
            Some(&slot) => {
                let row = &mut s.rows[slot as usize].1;
                // Two schemas whose names hash alike never share a row: the later one counts
                // as "other".
                if row.schema.as_deref() != o.schema {
                    s.other.add(o);
                    hint.layout = 0;
                    return;
                }
                if row.text.is_none() {
                    row.text = self.known_text(o.digest, o.text);
                }
                row.counts.add(o);
                slot
            }
            None => {
                if s.rows.len() >= cap.saturating_mul(2) {
                    keep_top(s, &stripe.layout, cap, self.epoch);
                }
                let mut counts = Counts::default();
                counts.add(o);
                let slot = s.rows.len() as u32;
                s.rows.push((
                    key,
                    Row {
                        schema: o.schema.map(Arc::from),
                        user: o.user.map(Arc::from),
                        text: self.known_text(o.digest, o.text),
                        counts,
                    },
                ));
                s.index.insert(key, slot);
                slot
            }
        };
        // The cell now counts for this row: what it holds for the one before goes there.
        if cell.key() != key {
            s.settle(cell, self.epoch);
            cell.digest.store(key.0, Ordering::Relaxed);
            cell.schema.store(key.1, Ordering::Relaxed);
        }
        // A row without its text yet keeps hits on this path, which fills it in.
        let named = s.rows[slot as usize].1.text.is_some();
        hint.key = key;
        hint.layout = if named {
            stripe.layout.load(Ordering::Relaxed)
        } else {
            0
        };
    }

    /// Every stripe merged: at most N rows, most-called first, then "other" when anything
    /// was folded into it.
    pub fn rows(&self) -> Vec<DigestRow> {
        let cap = self.capacity();
        let mut merged: HashMap<RowKey, Row, foldhash::fast::FixedState> = HashMap::default();
        let mut other = Counts::default();
        for st in &self.stripes {
            let Ok(mut s) = st.data.lock() else { continue };
            s.settle_all(self.epoch);
            other.merge(&s.other);
            for (k, r) in &s.rows {
                match merged.get_mut(k) {
                    Some(m) if m.schema == r.schema => {
                        m.counts.merge(&r.counts);
                        if m.text.is_none() {
                            m.text = r.text.clone();
                        }
                    }
                    Some(_) => other.merge(&r.counts),
                    None => {
                        merged.insert(*k, r.clone());
                    }
                }
            }
        }
        let mut list: Vec<(RowKey, Row)> = merged.into_iter().collect();
        // Most calls first; ties by digest so that a read is stable.
        list.sort_by(|a, b| b.1.counts.calls.cmp(&a.1.counts.calls).then(a.0.cmp(&b.0)));
        for (_, r) in list.iter().skip(cap) {
            other.merge(&r.counts);
        }
        list.truncate(cap);
        let mut out: Vec<DigestRow> = list
            .into_iter()
            .map(|((digest, _), r)| DigestRow {
                digest: Some(digest),
                schema: r.schema,
                user: r.user,
                text: r.text,
                counts: r.counts,
            })
            .collect();
        if other.calls > 0 {
            out.push(DigestRow {
                digest: None,
                schema: None,
                user: None,
                text: None,
                counts: other,
            });
        }
        out
    }

    /// `FLUSH QCACHE DIGESTS`: every row and "other" start again from zero. Hits still in
    /// sessions' cells were made before, so they go too.
    pub fn reset(&self) {
        for st in &self.stripes {
            if let Ok(mut s) = st.data.lock() {
                // Dead first, as in a settle: a hit added after the discard counts.
                let cells: Vec<_> = std::mem::take(&mut s.cells)
                    .into_iter()
                    .filter_map(|c| {
                        let dead = is_dead(&c);
                        c.discard();
                        (!dead).then_some(c)
                    })
                    .collect();
                *s = StripeData {
                    cells,
                    ..StripeData::default()
                };
                st.layout.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Keeps a full stripe's `cap` most-called rows and folds the rest into its "other". The
/// cells are settled first, so that their hits count for the rows they were made on.
fn keep_top(s: &mut StripeData, layout: &AtomicU64, cap: usize, epoch: Instant) {
    s.settle_all(epoch);
    let list = &mut s.rows;
    if list.len() > cap {
        list.select_nth_unstable_by(cap, |a, b| b.1.counts.calls.cmp(&a.1.counts.calls));
        for (_, r) in list.drain(cap..) {
            s.other.merge(&r.counts);
        }
    }
    s.index.clear();
    s.index
        .extend(list.iter().enumerate().map(|(i, (k, _))| (*k, i as u32)));
    layout.fetch_add(1, Ordering::Relaxed);
}

/// The hash of a default schema that keys digest rows with the digest. No schema and an
/// empty name differ.
pub fn schema_key(schema: Option<&str>) -> u64 {
    match schema {
        None => 0,
        Some(s) => xxh3_64(s.as_bytes()) | 1,
    }
}

/// The hash of a default schema and a user that keys digest rows with the digest: a shape
/// gets a row per schema and user. A session computes it when either changes, so the hit
/// path's lookup is the same one as per schema alone.
pub fn row_key(schema: Option<&str>, user: &str) -> u64 {
    let u = xxh3_64(user.as_bytes());
    schema_key(schema) ^ u.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15
}

/// The wall-clock time of `at`, an instant in the past (statistics keep instants so the
/// hit path reads no second clock).
pub fn wall_time(at: Instant) -> SystemTime {
    SystemTime::now()
        .checked_sub(at.elapsed())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// `YYYY-MM-DD HH:MM:SS` in UTC, as MySQL shows a DATETIME.
pub fn format_utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text for every shape, so that hits take the cell path once a row has it.
    static TEXT: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from("SELECT ?"));

    fn obs(digest: u64, outcome: Outcome) -> Observation<'static> {
        Observation {
            digest,
            schema: Some("shop"),
            user: Some("app"),
            schema_key: row_key(Some("shop"), "app"),
            text: Some(&TEXT),
            outcome,
            rows: 2,
            bytes: 100,
            upstream: if outcome == Outcome::Hit {
                Duration::ZERO
            } else {
                Duration::from_millis(4)
            },
            at: Instant::now(),
        }
    }

    #[test]
    fn counts_each_outcome() {
        let d = Digests::new(10);
        let mut h = RowHint::default();
        let text: Arc<str> = Arc::from("SELECT c FROM t WHERE id = ?");
        let mut first = obs(7, Outcome::Stored);
        first.text = Some(&text);
        d.record(&first, &mut h);
        d.record(&obs(7, Outcome::Hit), &mut h);
        d.record(&obs(7, Outcome::Hit), &mut h);
        d.record(&obs(7, Outcome::Hit), &mut h);
        d.record(&obs(7, Outcome::Sent(Some(Reason::Warnings))), &mut h);
        d.record(&obs(7, Outcome::Sent(Some(Reason::Warnings))), &mut h);
        d.record(&obs(7, Outcome::Sent(None)), &mut h);
        let rows = d.rows();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.digest, Some(7));
        assert_eq!(r.schema.as_deref(), Some("shop"));
        assert_eq!(r.text.as_deref(), Some("SELECT c FROM t WHERE id = ?"));
        let c = &r.counts;
        assert_eq!((c.calls, c.hits, c.misses, c.stores), (7, 3, 4, 1));
        assert_eq!(c.not_cached, vec![(Reason::Warnings, 2)]);
        assert_eq!((c.rows, c.bytes), (14, 700));
        assert_eq!(c.upstream_ns, 16_000_000);
        assert_eq!(c.upstream_max_ns, 4_000_000);
        assert_eq!(c.upstream_min_ns, 4_000_000);
        // Three hits at the mean of 4 ms.
        assert_eq!(c.time_saved_ns(), 12_000_000);
        assert!(c.first_seen <= c.last_seen);
    }

    #[test]
    fn schemas_are_rows_of_their_own() {
        let d = Digests::new(10);
        let mut h = RowHint::default();
        let mut a = obs(1, Outcome::Hit);
        a.schema = Some("a");
        a.schema_key = row_key(a.schema, "app");
        let mut b = obs(1, Outcome::Hit);
        b.schema = None;
        b.schema_key = row_key(None, "app");
        d.record(&a, &mut h);
        d.record(&b, &mut h);
        d.record(&b, &mut h);
        let rows = d.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].schema, None);
        assert_eq!(rows[0].counts.calls, 2);
        assert_eq!(rows[1].schema.as_deref(), Some("a"));
    }

    #[test]
    fn users_are_rows_of_their_own() {
        let d = Digests::new(10);
        let mut h = RowHint::default();
        let a = obs(1, Outcome::Hit);
        let mut b = obs(1, Outcome::Hit);
        b.user = Some("other");
        b.schema_key = row_key(b.schema, "other");
        for o in [&a, &b, &b] {
            d.record(o, &mut h);
        }
        let rows = d.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].user.as_deref(), rows[0].counts.calls),
            (Some("other"), 2)
        );
        assert_eq!(
            (rows[1].user.as_deref(), rows[1].counts.calls),
            (Some("app"), 1)
        );
        assert_eq!(rows[0].schema, rows[1].schema);
    }

    /// N + 1000 shapes: N rows and "other", with every call counted once.
    #[test]
    fn bounded_with_other() {
        let n = 50;
        let d = Digests::new(n);
        let mut h = RowHint::default();
        // Shapes 0..n are called three times, the rest once.
        for round in 0..3 {
            for i in 0..(n as u64 + 1000) {
                if round == 0 || i < n as u64 {
                    d.record(&obs(i, Outcome::Hit), &mut h);
                }
            }
        }
        for st in &d.stripes {
            assert!(st.data.lock().unwrap().rows.len() <= 2 * n);
        }
        let rows = d.rows();
        assert_eq!(rows.len(), n + 1);
        let other = rows.last().unwrap();
        assert_eq!(other.digest, None);
        let total: u64 = rows.iter().map(|r| r.counts.calls).sum();
        assert_eq!(total, 3 * n as u64 + 1000);
        // The frequent shapes hold the rows. A call made while a shape was one of many
        // (before the stripe last filled) may have been folded into "other".
        assert!(rows[..n]
            .iter()
            .all(|r| r.digest.is_some_and(|d| d < n as u64) && r.counts.calls >= 2));
        assert!(other.counts.calls >= 1000);
    }

    #[test]
    fn exact_across_threads() {
        let d = Arc::new(Digests::new(100));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let d = d.clone();
                std::thread::spawn(move || {
                    let mut h = RowHint::default();
                    for i in 0..1000u64 {
                        let outcome = match (i + t) % 3 {
                            0 => Outcome::Hit,
                            1 => Outcome::Stored,
                            _ => Outcome::Sent(Some(Reason::NoTable)),
                        };
                        d.record(&obs(i % 10, outcome), &mut h);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let rows = d.rows();
        assert_eq!(rows.len(), 10);
        let sum = |f: fn(&Counts) -> u64| rows.iter().map(|r| f(&r.counts)).sum::<u64>();
        assert_eq!(sum(|c| c.calls), 8000);
        assert_eq!(
            sum(|c| c.hits) + sum(|c| c.stores) + sum(|c| c.not_cached_total()),
            8000
        );
        assert_eq!(sum(|c| c.hits) + sum(|c| c.misses), 8000);
    }

    /// A session's hint stays exact across a fill that moves rows, a reset, and shapes
    /// that alternate (each record then misses the hint and makes a new one).
    #[test]
    fn hints_follow_the_layout() {
        let d = Digests::new(2);
        let mut h = RowHint::default();
        let mut other = RowHint::default();
        for _ in 0..5 {
            d.record(&obs(1, Outcome::Hit), &mut h);
        }
        // Shapes 2..=4 fill the stripe (2·N = 4 rows) and fold the least called.
        for i in 2..=4 {
            d.record(&obs(i, Outcome::Hit), &mut other);
            d.record(&obs(i, Outcome::Hit), &mut other);
        }
        d.record(&obs(5, Outcome::Hit), &mut other);
        for _ in 0..3 {
            d.record(&obs(1, Outcome::Hit), &mut h);
        }
        let rows = d.rows();
        assert_eq!(rows[0].digest, Some(1));
        assert_eq!(rows[0].counts.calls, 8);
        let total: u64 = rows.iter().map(|r| r.counts.calls).sum();
        assert_eq!(total, 8 + 6 + 1);
        d.reset();
        d.record(&obs(1, Outcome::Hit), &mut h);
        let rows = d.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].counts.calls, 1);
    }

    /// Hits counted in a session's cell show in a read while the session lives and stay
    /// counted once it has gone; its pending hits move with it to another row.
    #[test]
    fn cell_hits_are_read_and_outlive_the_session() {
        let d = Digests::new(10);
        let mut h = RowHint::default();
        let text: Arc<str> = Arc::from("SELECT 1");
        let mut first = obs(3, Outcome::Stored);
        first.text = Some(&text);
        d.record(&first, &mut h);
        for _ in 0..4 {
            d.record(&obs(3, Outcome::Hit), &mut h);
        }
        let rows = d.rows();
        assert_eq!((rows[0].counts.calls, rows[0].counts.hits), (5, 4));
        assert_eq!(rows[0].counts.rows, 10);
        // Unsettled hits, then another shape: they stay with shape 3.
        d.record(&obs(3, Outcome::Hit), &mut h);
        d.record(&obs(4, Outcome::Hit), &mut h);
        d.record(&obs(4, Outcome::Hit), &mut h);
        drop(h);
        let rows = d.rows();
        let calls = |dg| {
            rows.iter()
                .find(|r| r.digest == Some(dg))
                .unwrap()
                .counts
                .calls
        };
        assert_eq!((calls(3), calls(4)), (6, 2));
        assert!(d
            .stripes
            .iter()
            .all(|s| s.data.lock().unwrap().cells.is_empty()));
    }

    /// Hits in cells racing reads, folds (many shapes, a small N) and nothing else: every
    /// call lands exactly once.
    #[test]
    fn cells_exact_under_reads_and_folds() {
        let d = Arc::new(Digests::new(4));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (d, stop) = (d.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                while !stop.load(Ordering::Relaxed) {
                    let total: u64 = d.rows().iter().map(|r| r.counts.calls).sum();
                    assert!(total >= last, "a read went backwards: {total} < {last}");
                    last = total;
                }
            })
        };
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let d = d.clone();
                std::thread::spawn(move || {
                    let mut h = RowHint::default();
                    for i in 0..20_000u64 {
                        // Mostly one hot shape per thread; now and then a new one.
                        let digest = if i % 97 == 0 { 1000 + i } else { t };
                        let mut o = obs(digest, Outcome::Hit);
                        o.rows = 1;
                        d.record(&o, &mut h);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        let rows = d.rows();
        assert!(rows.len() <= 5);
        let sum = |f: fn(&Counts) -> u64| rows.iter().map(|r| f(&r.counts)).sum::<u64>();
        assert_eq!(sum(|c| c.calls), 80_000);
        assert_eq!(sum(|c| c.hits), 80_000);
        assert_eq!(sum(|c| c.rows), 80_000);
    }

    /// Sessions that end while reads settle their cells: the last hit of each, added just
    /// before its session drops its hint, is never lost (a cell dropped as dead after a
    /// settle that missed it lost it).
    #[test]
    fn cells_exact_when_sessions_end_under_reads() {
        let d = Arc::new(Digests::new(4));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (d, stop) = (d.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    d.rows();
                }
            })
        };
        let (threads, sessions, hits) = (2u64, 4_000u64, 3u64);
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let d = d.clone();
                std::thread::spawn(move || {
                    for _ in 0..sessions {
                        let mut h = RowHint::default();
                        for _ in 0..hits {
                            let mut o = obs(t, Outcome::Hit);
                            o.rows = 1;
                            d.record(&o, &mut h);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        let rows = d.rows();
        let sum = |f: fn(&Counts) -> u64| rows.iter().map(|r| f(&r.counts)).sum::<u64>();
        let all = threads * sessions * hits;
        assert_eq!((sum(|c| c.calls), sum(|c| c.rows)), (all, all));
    }

    /// A reset forgets hits still in cells; the cells count again from zero after it.
    #[test]
    fn reset_empties_cells() {
        let d = Digests::new(10);
        let mut h = RowHint::default();
        for _ in 0..5 {
            d.record(&obs(1, Outcome::Hit), &mut h);
        }
        d.reset();
        assert!(d.rows().is_empty());
        for _ in 0..3 {
            d.record(&obs(1, Outcome::Hit), &mut h);
        }
        let rows = d.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].counts.calls, rows[0].counts.hits), (3, 3));
    }

    #[test]
    fn reset_and_off() {
        let d = Digests::new(10);
        let mut h = RowHint::default();
        d.record(&obs(1, Outcome::Hit), &mut h);
        d.reset();
        assert!(d.rows().is_empty());
        d.set_capacity(0);
        assert!(!d.enabled());
        d.record(&obs(1, Outcome::Hit), &mut h);
        assert!(d.rows().is_empty());
    }

    #[test]
    fn utc_format() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_600_000);
        assert_eq!(format_utc(t), "2025-12-01 14:40:00");
        assert_eq!(format_utc(SystemTime::UNIX_EPOCH), "1970-01-01 00:00:00");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_utc(leap), "2000-02-29 00:00:00");
    }
}
