//! Debug-build fault switches: each breaks one invariant class on purpose, in one proxy
//! instance, so that a test can show the checker guarding that invariant (the differential
//! scenarios, `qcache check-consistency`) fails when the rule is broken.
//!
//! A release build has no way to turn one on: [`Faults::set`] does not exist there and
//! [`Faults::on`] is a constant `false` the compiler folds away. The switches live in the
//! instance's [`Versions`](crate::cache::Versions) (`versions().faults`), which every path
//! that applies a rule reaches (sessions, the binlog tail, L2), so concurrent proxies in one
//! test process never see each other's faults. Each switch is read at the one place its rule
//! decides, named in [`Fault`]'s variants.

#[cfg(debug_assertions)]
use std::sync::atomic::{AtomicU32, Ordering};

/// One invariant class, and what turning its switch on breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Fault {
    /// Writes with known rows move no row-slice or column counter
    /// (`Versions::bump_indexes_at`, `Versions::bump_columns`): sliced entries go stale.
    RowSlices = 1 << 0,
    /// Writes with known rows move no foreign-key-derived slice counter
    /// (`Versions::bump_indexes_at`, derived columns only).
    DerivedSlices = 1 << 1,
    /// Privilege changes move no user's privilege generation and no privilege stamp
    /// (`Versions::apply_privileges`): a revoked user keeps being served.
    PrivilegeStamps = 1 << 2,
    /// The context fingerprint leaves out the session's key variables
    /// (`SessionState::refresh_fingerprint`): sessions with different settings share entries.
    ContextKeys = 1 << 3,
    /// The snapshot rule says every table is unchanged since a transaction's snapshot
    /// (`Snapshot::unchanged`, `Stamps::valid_in`): a transaction's old view is stored for
    /// everyone, and a transaction is served entries newer than its snapshot.
    Snapshot = 1 << 4,
    /// A gap in the binlog stream invalidates nothing (`Versions::bump_all_gap`, and the
    /// tail's `after_end` when it cannot resume): writes made while no tail watched stay
    /// invisible.
    BinlogGaps = 1 << 5,
    /// An UPDATE of an index or partitioning column counts as changing only its columns
    /// (`Catalog::update_keeps_order`, read through [`Faults::row_order_broken`]): unordered
    /// reads that never name the column keep serving the old row order.
    RowOrder = 1 << 6,
    /// Not an invariant broken but a timing made visible: every catalog reload after a DDL
    /// (`Shared::refresh_catalog`, the binlog tail's `after_ddl`) first waits
    /// [`SLOW_CATALOG_RELOAD`], so that statements run while the reload is still pending
    /// and the pending-DDL rule (`invalidation::pending`) is what keeps them right.
    SlowCatalogReload = 1 << 7,
    /// Every patch of a cached aggregate adds one to its first value (`policy::patch`,
    /// read where the session patches): patched entries are served wrong, and the
    /// verifier (`cache.verify_patched`) must count them as mismatches.
    Patches = 1 << 8,
    /// Not an invariant broken but a timing made visible: every parent lookup of a child
    /// write finds no idle connection (`Shared::parent_lookups`, as
    /// `Catalog::parent_values` answers when all are in use), so the conservative fallback
    /// is what keeps the write's readers right.
    BusyParentLookups = 1 << 9,
    /// Not an invariant broken but a timing made visible: the binlog tail handles each
    /// event [`SLOW_BINLOG_EVENT`] late (a slowed process, a slow consumer), so that it
    /// streams and heartbeats while falling behind the server, and the lag rule
    /// (`policy::tails::behind`) is what stops the hits a direct write made stale.
    SlowBinlog = 1 << 10,
    /// Not an invariant broken but a timing made visible: L2's recovery after a reconnection
    /// (`l2::recover`) holds, while this is on, between taking what it must raise and
    /// raising it, as a slow Redis would hold it, so that what an instance does while it is
    /// down for L2 with Redis reachable (its writes, their raises) lasts as long as a test
    /// needs.
    HeldL2Recovery = 1 << 11,
    /// Not an invariant broken but a timing made visible: every parent lookup of a child
    /// write waits [`SLOW_PARENT_LOOKUP`] before it is asked (`Shared::parent_lookups`), so
    /// that reads made while a deferred lookup's derived slices are pending
    /// (`engine::fkslices::Timing::Deferred`) are what its tests see.
    SlowParentLookups = 1 << 12,
}

/// How long [`Fault::SlowParentLookups`] delays each parent lookup.
pub const SLOW_PARENT_LOOKUP: std::time::Duration = std::time::Duration::from_millis(200);

/// How late [`Fault::SlowBinlog`] makes the tail handle each event.
pub const SLOW_BINLOG_EVENT: std::time::Duration = std::time::Duration::from_millis(400);

/// How long [`Fault::SlowCatalogReload`] delays each catalog reload after a DDL.
pub const SLOW_CATALOG_RELOAD: std::time::Duration = std::time::Duration::from_millis(300);

impl Fault {
    pub const ALL: [Fault; 13] = [
        Fault::RowSlices,
        Fault::DerivedSlices,
        Fault::PrivilegeStamps,
        Fault::ContextKeys,
        Fault::Snapshot,
        Fault::BinlogGaps,
        Fault::RowOrder,
        Fault::SlowCatalogReload,
        Fault::Patches,
        Fault::BusyParentLookups,
        Fault::SlowBinlog,
        Fault::HeldL2Recovery,
        Fault::SlowParentLookups,
    ];
}

/// The switches of one proxy instance; all off unless a debug-build test turns one on.
#[derive(Debug, Default)]
pub struct Faults {
    #[cfg(debug_assertions)]
    on: AtomicU32,
}

impl Faults {
    /// Debug builds only: turns `fault` on or off for this instance (a test's handle).
    #[cfg(debug_assertions)]
    #[doc(hidden)]
    pub fn set(&self, fault: Fault, on: bool) {
        if on {
            tracing::warn!(
                ?fault,
                "debug fault switch on: this instance breaks a cache invariant on purpose"
            );
            self.on.fetch_or(fault as u32, Ordering::Relaxed);
        } else {
            self.on.fetch_and(!(fault as u32), Ordering::Relaxed);
        }
    }

    /// Whether `fault` is on; always false in a release build.
    #[inline]
    pub fn on(&self, fault: Fault) -> bool {
        #[cfg(debug_assertions)]
        return self.on.load(Ordering::Relaxed) & fault as u32 != 0;
        #[cfg(not(debug_assertions))]
        {
            let _ = fault;
            false
        }
    }

    /// The row-order rule's switch point: the rule (column-aware invalidation deciding that
    /// a write leaves a read's rows and their order alone) calls this and, when it is true,
    /// lets such a write leave the read's entry served even if it changes the row order.
    #[inline]
    pub fn row_order_broken(&self) -> bool {
        self.on(Fault::RowOrder)
    }

    /// The catalog-reload switch point: a reload after a DDL awaits this first (no wait
    /// unless [`Fault::SlowCatalogReload`] is on).
    pub async fn before_catalog_reload(&self) {
        if self.on(Fault::SlowCatalogReload) {
            tokio::time::sleep(SLOW_CATALOG_RELOAD).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_are_independent_and_off_by_default() {
        let f = Faults::default();
        for x in Fault::ALL {
            assert!(!f.on(x), "{x:?}");
        }
        #[cfg(debug_assertions)]
        for x in Fault::ALL {
            f.set(x, true);
            for y in Fault::ALL {
                assert_eq!(f.on(y), x == y, "{x:?} on, {y:?}");
            }
            f.set(x, false);
            assert!(!f.on(x));
        }
    }
}
