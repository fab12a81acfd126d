//! A read's way through the second level: an L1 hit confirmed in strict mode, the lookup
//! (and lease wait) a plain miss makes before it goes upstream, and a fill stored in L2 or
//! its lease let go. When each is asked is `policy::l2`'s and the session's; how it is
//! asked of Redis is here, beside the client.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{L2Entry, L2Read, L2Stamps, Lookup, L2};
use crate::cache::sliceplans::PlannedSlices;
use crate::cache::{Cache, Entry, Key, TableHandle};

/// What a miss does after asking L2.
pub enum Step {
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

const NO_FILL: Step = Step::Fill {
    stamps: None,
    leased: false,
};

/// Strict mode: whether an L1 hit may be served (`policy::l2::strict_hit_served`). An
/// entry L2 no longer vouches for (or never did), or whose check L2 cannot make now (down,
/// slow), is removed, and the read goes on as a miss (docs/fleet.md, "When Redis fails").
pub async fn confirm(l2: Option<&L2>, cache: &Cache, key: Key, e: &Entry) -> bool {
    let Some(l2) = l2 else {
        return true;
    };
    let check = match &e.l2 {
        _ if !l2.usable() => None,
        Some(stamps) => l2.confirm(stamps).await,
        None => Some(false),
    };
    let ok = crate::policy::l2::strict_hit_served(check);
    if !ok {
        cache.remove(key);
    }
    ok
}

impl L2 {
    /// Before a plain miss goes upstream: L2's entry if it is current, else the versions to
    /// stamp the fill with. When another instance holds the fill lease, waits for its result
    /// (at most `l2.lease`), then fills itself. `slicing` is the read's slice plan as its
    /// local stamps depend on it (None: they depend on `tables` whole), `planned_current`
    /// whether the catalog is still the one its slices were planned under, `queued` the
    /// local bumps its stamps include.
    pub async fn before_fill(
        &self,
        key: Key,
        tables: &[TableHandle],
        slicing: Option<&PlannedSlices>,
        planned_current: impl Fn() -> bool,
        queued: u64,
        privileges: &[TableHandle],
    ) -> Step {
        if !self.usable() {
            return NO_FILL;
        }
        let read = self.read_for(tables, slicing, planned_current, privileges);
        let settled = self.raised() >= queued;
        let stamps = match self.lookup(key, &read).await {
            Lookup::Hit(e, s) => return Step::Hit(e, s, settled),
            Lookup::Unavailable => return NO_FILL,
            Lookup::Miss(s) => s,
        };
        if self.lease(key).await {
            let leased = !self.config().lease.is_zero();
            return Step::Fill {
                stamps: Some(stamps),
                leased,
            };
        }
        self.stats.lease_waits.fetch_add(1, Relaxed);
        let deadline = Instant::now() + self.config().lease;
        let mut pause = Duration::from_millis(1);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(10));
            let settled = self.raised() >= queued;
            match self.lookup(key, &read).await {
                Lookup::Hit(e, s) => {
                    self.stats.lease_served.fetch_add(1, Relaxed);
                    return Step::Hit(e, s, settled);
                }
                Lookup::Unavailable => return NO_FILL,
                // The versions just read are the newest, so they stamp the local fill.
                Lookup::Miss(s) if Instant::now() >= deadline => {
                    return Step::Fill {
                        stamps: Some(s),
                        leased: false,
                    }
                }
                Lookup::Miss(_) => {}
            }
        }
    }

    /// What the read depends on in L2, with its keys: the plan's, made once per plan, and
    /// `privileges`, the reader's privilege stamps: privilege generations are numbered per
    /// instance, so only the fleet's versions of those stamps tell whether an entry was
    /// filled before a privilege change that reached the reader (an entry of another
    /// instance's history may carry the reader's key).
    fn read_for(
        &self,
        tables: &[TableHandle],
        slicing: Option<&PlannedSlices>,
        planned_current: impl Fn() -> bool,
        privileges: &[TableHandle],
    ) -> Arc<L2Read> {
        if !privileges.is_empty() {
            let mut whole: Vec<TableHandle> = privileges.to_vec();
            let sliced = match slicing {
                Some(p) if p.sliced.is_empty() || planned_current() => {
                    whole.extend(p.whole.iter().cloned());
                    &p.sliced[..]
                }
                Some(p) => {
                    whole.extend(p.whole.iter().cloned());
                    whole.extend(p.sliced.iter().map(|s| s.table.clone()));
                    &[][..]
                }
                None => {
                    whole.extend(tables.iter().cloned());
                    &[][..]
                }
            };
            return Arc::new(self.read_of(self.deps(&whole, sliced)));
        }
        let Some(p) = slicing else {
            return Arc::new(self.read_of(self.deps(tables, &[])));
        };
        let current = || p.sliced.is_empty() || planned_current();
        if let Some(r) = p.l2.get() {
            if current() {
                return r.clone();
            }
        }
        let deps = self.deps(&p.whole, &p.sliced);
        if !current() {
            // The column ids come from a catalog newer than the slices' keys: depend on the
            // tables whole in L2 (the local stamps were checked against the plan's
            // generation already).
            let all: Vec<TableHandle> = p
                .whole
                .iter()
                .cloned()
                .chain(p.sliced.iter().map(|s| s.table.clone()))
                .collect();
            return Arc::new(self.read_of(self.deps(&all, &[])));
        }
        let r = Arc::new(self.read_of(deps));
        let _ = p.l2.set(r.clone());
        r
    }

    /// Stores a fill in L2 (in the background) or lets its lease go.
    pub fn after_fill(
        self: &Arc<Self>,
        key: Key,
        stamps: Option<L2Stamps>,
        leased: bool,
        filled: Option<L2Entry>,
    ) {
        match (stamps, filled) {
            (Some(stamps), Some(mut e)) => {
                e.stamps = stamps.to_vec();
                self.store(key, e, leased);
            }
            _ if leased => self.abandon(key),
            _ => {}
        }
    }
}
