//! The session's side of the second level: strict-mode checks of L1 hits, the L2 lookup (and
//! lease wait) a plain miss makes before going upstream, and an L2 hit copied into L1. The
//! decisions are `policy::l2`'s; the protocol with Redis is `l2`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Session, SessionError};
use crate::cache::entry::L2Stamps;
use crate::cache::sliceplans::PlannedSlices;
use crate::cache::{Entry, FillGuard, Key, TableHandle};
use crate::l2::{L2Entry, L2Read, Lookup, L2};

/// What a miss does after asking L2.
pub(super) enum L2Step {
    /// L2 had a current entry: serve it. `settled` when every local bump the read's local
    /// stamps include had reached L2 before it was asked; else the hit is served but not
    /// copied into L1, since L2 may have vouched for rows those stamps already see as
    /// changed (a write between its local bump and its raise).
    Hit(L2Entry, L2Stamps, bool),
    /// Go upstream; `stamps` (the L2 versions read before the query) go with the result
    /// into L2 when it is stored, `leased` when this instance holds the fill lease.
    Fill {
        stamps: Option<L2Stamps>,
        leased: bool,
    },
}

const NO_FILL: L2Step = L2Step::Fill {
    stamps: None,
    leased: false,
};

impl Session {
    /// Waits until the versions this session's write bumped are raised in L2 too.
    pub(super) async fn l2_flush(&self) {
        if let Some(l2) = &self.shared.l2 {
            l2.flush().await;
        }
    }

    /// Strict mode: whether an L1 hit may be served. An entry L2 no longer vouches for (or
    /// never did) is removed, and the read goes on as a miss through L2. When L2 cannot
    /// answer, the local rule stands (docs/fleet.md, "When Redis fails").
    pub(super) async fn l2_confirm(&self, key: Key, e: &Entry) -> bool {
        let Some(l2) = &self.shared.l2 else {
            return true;
        };
        if !l2.usable() {
            return true;
        }
        let ok = match &e.l2 {
            Some(stamps) => l2.confirm(stamps).await.unwrap_or(true),
            None => false,
        };
        if !ok {
            self.shared.cache.remove(key);
        }
        ok
    }

    /// Before a plain miss goes upstream: L2's entry if it is current, else the versions to
    /// stamp the fill with. When another instance holds the fill lease, waits for its result
    /// (at most `l2.lease`), then fills itself. `slicing` is the read's slice plan as its
    /// local stamps depend on it (None: they depend on `tables` whole), `generation` the
    /// catalog generation the slices were planned under.
    pub(super) async fn l2_before_forward(
        &self,
        key: Key,
        tables: &[TableHandle],
        slicing: Option<&PlannedSlices>,
        generation: u64,
        queued: u64,
    ) -> L2Step {
        let Some(l2) = &self.shared.l2 else {
            return NO_FILL;
        };
        if !l2.usable() {
            return NO_FILL;
        }
        let read = self.l2_read(l2, tables, slicing, generation);
        let deps = &*read;
        let settled = l2.raised() >= queued;
        let stamps = match l2.lookup(key, deps).await {
            Lookup::Hit(e, s) => return L2Step::Hit(e, s, settled),
            Lookup::Unavailable => return NO_FILL,
            Lookup::Miss(s) => s,
        };
        if l2.lease(key).await {
            let leased = !l2.config().lease.is_zero();
            return L2Step::Fill {
                stamps: Some(stamps),
                leased,
            };
        }
        l2.stats
            .lease_waits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let deadline = Instant::now() + l2.config().lease;
        let mut pause = Duration::from_millis(1);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(10));
            let settled = l2.raised() >= queued;
            match l2.lookup(key, deps).await {
                Lookup::Hit(e, s) => {
                    l2.stats
                        .lease_served
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return L2Step::Hit(e, s, settled);
                }
                Lookup::Unavailable => return NO_FILL,
                // The versions just read are the newest, so they stamp the local fill.
                Lookup::Miss(s) if Instant::now() >= deadline => {
                    return L2Step::Fill {
                        stamps: Some(s),
                        leased: false,
                    }
                }
                Lookup::Miss(_) => {}
            }
        }
    }

    /// What the read depends on in L2, with its keys: the plan's, made once per plan.
    fn l2_read(
        &self,
        l2: &L2,
        tables: &[TableHandle],
        slicing: Option<&PlannedSlices>,
        generation: u64,
    ) -> Arc<L2Read> {
        let Some(p) = slicing else {
            return Arc::new(l2.read_of(l2.deps(tables, &[])));
        };
        let current = || p.sliced.is_empty() || self.shared.catalog.generation() == generation;
        if let Some(r) = p.l2.get() {
            if current() {
                return r.clone();
            }
        }
        let deps = l2.deps(&p.whole, &p.sliced);
        if !current() {
            // The column ids come from a catalog newer than the slices' keys: depend on the
            // tables whole in L2 (the local stamps were checked against `generation` already).
            let all: Vec<TableHandle> = p
                .whole
                .iter()
                .cloned()
                .chain(p.sliced.iter().map(|s| s.table.clone()))
                .collect();
            return Arc::new(l2.read_of(l2.deps(&all, &[])));
        }
        let r = Arc::new(l2.read_of(deps));
        let _ = p.l2.set(r.clone());
        r
    }

    /// Serves `entry`, made from an L2 hit, and, when `settled` ([`L2Step::Hit`]), copies it
    /// into L1 (under the local versions read before L2 was asked, so a local bump meanwhile
    /// leaves the copy stale).
    pub(super) async fn serve_l2_hit(
        &mut self,
        guard: FillGuard,
        entry: Entry,
        settled: bool,
    ) -> Result<(), SessionError> {
        let started = Instant::now();
        self.serve_hit(&entry, started).await?;
        if settled {
            let _ = guard.insert(entry);
        }
        Ok(())
    }

    /// Stores a fill in L2 (in the background) or lets its lease go.
    pub(super) fn l2_after_fill(
        &self,
        key: Key,
        stamps: Option<L2Stamps>,
        leased: bool,
        filled: Option<L2Entry>,
    ) {
        let Some(l2) = &self.shared.l2 else { return };
        match (stamps, filled) {
            (Some(stamps), Some(mut e)) => {
                e.stamps = stamps.to_vec();
                l2.store(key, e, leased);
            }
            _ if leased => l2.abandon(key),
            _ => {}
        }
    }

    /// Whether `l2` is on and usable for a plain read right now.
    pub(super) fn l2_usable(&self) -> bool {
        self.shared.l2.as_ref().is_some_and(|l| l.usable())
    }
}
