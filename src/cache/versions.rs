//! Table versions: one generation counter per table, a global sequence and an epoch.
//!
//! Entries hold `Arc`s to the counters they depend on, so validating an entry is a few atomic
//! loads and invalidating a table is one store, independent of how many entries exist.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use super::privileges::Privileges;
/// Told of every local bump, so that a shared second level (`cache::l2`) raises the same
/// versions fleet-wide. Called synchronously from `bump*`: it must only queue.
pub trait BumpSink: Send + Sync {
    fn table(&self, schema: &str, name: &str);
    fn schema(&self, schema: &str);
    fn all(&self);
    /// This instance's binlog tail may have missed events (it lost or started its stream).
    /// What others hold need not be invalidated if another tail was watching; by default it
    /// is.
    fn gap(&self) {
        self.all();
    }
}

/// One table's generation.
#[derive(Debug)]
pub struct TableVersion {
    pub schema: String,
    pub name: String,
    version: AtomicU64,
    /// A `mysql` privilege table: a write to it is a privilege change too.
    privileges: bool,
}

impl TableVersion {
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// `schema.name`, for logs and admin listings.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

pub type TableHandle = Arc<TableVersion>;

/// The registry of table generations.
#[derive(Debug, Default)]
pub struct Versions {
    tables: DashMap<(String, String), TableHandle>,
    /// Every bump takes the next value, so "unchanged since a snapshot taken at S" is
    /// `version <= S` for every table, with no per-transaction copy of the registry.
    seq: AtomicU64,
    /// Bumping the epoch invalidates every entry at once (FLUSH, unknown writes, binlog gaps).
    epoch: AtomicU64,
    /// Users' privilege generations, part of every key's fingerprint.
    pub privileges: Privileges,
    /// Set once when an L2 runs; bumps learned from L2 itself use the `_quiet` forms.
    sink: std::sync::OnceLock<Arc<dyn BumpSink>>,
}

impl std::fmt::Debug for dyn BumpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BumpSink")
    }
}

impl Versions {
    pub fn new() -> Versions {
        Versions::default()
    }

    /// The counter of `schema.name` (lower-cased by the caller), created at version 0.
    pub fn table(&self, schema: &str, name: &str) -> TableHandle {
        if let Some(t) = self.tables.get(&(schema.to_string(), name.to_string())) {
            return t.clone();
        }
        self.tables
            .entry((schema.to_string(), name.to_string()))
            .or_insert_with(|| {
                Arc::new(TableVersion {
                    schema: schema.to_string(),
                    name: name.to_string(),
                    version: AtomicU64::new(0),
                    privileges: crate::policy::privileges::is_privilege_table(schema, name),
                })
            })
            .clone()
    }

    /// Gives the table a new generation; every entry stamped with an older one is now stale.
    pub fn bump(&self, t: &TableVersion) {
        self.bump_quiet(t);
        if let Some(s) = self.sink.get() {
            s.table(&t.schema, &t.name);
        }
    }

    /// `bump` without telling the sink: for bumps that came from the sink's side.
    pub fn bump_quiet(&self, t: &TableVersion) {
        let v = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
        t.version.fetch_max(v, Ordering::AcqRel);
        if t.privileges {
            // Through qcache or a ROW event of the binlog: every user, sticky. Quiet like
            // the bump that caused it: whoever learns of that bump does the same.
            let c = crate::policy::privileges::PrivilegeChange::privilege_table();
            self.privileges.apply(&c);
            for (s, n) in crate::policy::privileges::change_stamps(&c) {
                let stamp = self.table(&s, &n);
                self.bump_quiet(&stamp);
            }
        }
    }

    /// Records a privilege change: the users it reaches get a new privilege generation (their
    /// keys change), and the privilege stamps it covers are bumped, so that reads through
    /// DEFINER views owned by those users stop being served (`policy::privileges`). Returns
    /// how many stamps were bumped.
    pub fn apply_privileges(&self, c: &crate::policy::privileges::PrivilegeChange) -> usize {
        self.privileges.apply(c);
        let stamps = crate::policy::privileges::change_stamps(c);
        for (s, n) in &stamps {
            self.bump_name(s, n);
        }
        stamps.len()
    }

    /// Installs the sink told of every later bump; false when one is already set.
    pub fn set_sink(&self, sink: Arc<dyn BumpSink>) -> bool {
        self.sink.set(sink).is_ok()
    }

    pub fn bump_name(&self, schema: &str, name: &str) {
        let t = self.table(schema, name);
        self.bump(&t);
    }

    /// Bumps every table of `schema` the registry knows. Tables it does not know have no
    /// entries yet; one created concurrently starts after this point and is fresh.
    pub fn bump_schema(&self, schema: &str) -> usize {
        let handles: Vec<TableHandle> = self
            .tables
            .iter()
            .filter(|e| e.key().0 == schema)
            .map(|e| e.value().clone())
            .collect();
        for t in &handles {
            self.bump_quiet(t);
        }
        // Others may hold entries on tables of this schema that this registry never saw.
        if let Some(s) = self.sink.get() {
            s.schema(schema);
        }
        handles.len()
    }

    /// Invalidates everything. The sequence moves too, so open transactions' snapshots
    /// see every table as changed.
    pub fn bump_all(&self) {
        self.bump_all_quiet();
        if let Some(s) = self.sink.get() {
            s.all();
        }
    }

    /// `bump_all` for a binlog gap: local entries all go; the sink decides about shared ones.
    pub fn bump_all_gap(&self) {
        self.bump_all_quiet();
        if let Some(s) = self.sink.get() {
            s.gap();
        }
    }

    /// `bump_all` without telling the sink.
    pub fn bump_all_quiet(&self) {
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub fn tables(&self) -> Vec<TableHandle> {
        self.tables.iter().map(|e| e.value().clone()).collect()
    }

    /// The point a transaction's reads are judged against; take it when the transaction's
    /// read view is created (at the latest: before its first read is forwarded).
    pub fn snapshot(&self) -> Snapshot {
        // Epoch first, mirroring bump_all (seq then epoch): a racing bump_all yields an epoch
        // that is already old, so the snapshot is conservatively unusable, never too new.
        let epoch = self.epoch();
        Snapshot {
            seq: self.seq(),
            epoch,
        }
    }
}

/// What a transaction may rely on: no table changed after `seq` and no bump_all after
/// `epoch`. An entry that is current and whose tables are all unchanged since `seq` holds
/// exactly what the transaction's snapshot would read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub seq: u64,
    pub epoch: u64,
}

impl Snapshot {
    /// True when no bump_all happened and none of `tables` changed since the snapshot: only
    /// then can a result computed now be valid in it. What `Stamps::valid_in` would say of
    /// stamps captured now, without capturing them.
    pub fn unchanged(&self, v: &Versions, tables: &[TableHandle]) -> bool {
        v.epoch() == self.epoch && tables.iter().all(|t| t.version() <= self.seq)
    }
}

/// The generations an entry was computed under, read before its query went upstream.
#[derive(Debug, Clone)]
pub struct Stamps {
    pub tables: Vec<(TableHandle, u64)>,
    pub epoch: u64,
    /// Global sequence at capture time.
    pub seq: u64,
}

impl Stamps {
    pub fn capture(v: &Versions, tables: &[TableHandle]) -> Stamps {
        // Epoch first: a bump_all racing with the capture makes the stamps stale, never
        // wrongly current.
        let epoch = v.epoch();
        let seq = v.seq();
        Stamps {
            tables: tables.iter().map(|t| (t.clone(), t.version())).collect(),
            epoch,
            seq,
        }
    }

    pub fn is_current(&self, v: &Versions) -> bool {
        self.epoch == v.epoch() && self.tables.iter().all(|(t, ver)| t.version() == *ver)
    }

    /// True when no table of these stamps changed after the global sequence `seq`, and no
    /// bump_all happened after it either (the caller compares epochs).
    pub fn unchanged_since(&self, seq: u64) -> bool {
        self.tables.iter().all(|(t, _)| t.version() <= seq)
    }

    /// Valid inside a transaction that began at `snap`: current (so the entry reflects every
    /// change up to now) and unchanged since the snapshot (so "now" is what the snapshot
    /// sees). `unchanged_since` alone is not enough: an entry stamped before a write that
    /// committed before the snapshot has old versions that are still `<= seq`.
    pub fn valid_in(&self, v: &Versions, snap: &Snapshot) -> bool {
        snap.epoch == self.epoch
            && v.epoch() == self.epoch
            && self.tables.iter().all(|(t, ver)| {
                let cur = t.version();
                cur == *ver && cur <= snap.seq
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bump_makes_stamps_stale() {
        let v = Versions::new();
        let a = v.table("db", "a");
        let b = v.table("db", "b");
        let s = Stamps::capture(&v, &[a.clone(), b.clone()]);
        assert!(s.is_current(&v));
        v.bump(&b);
        assert!(!s.is_current(&v));
        let s2 = Stamps::capture(&v, std::slice::from_ref(&a));
        assert!(s2.is_current(&v));
        v.bump_all();
        assert!(!s2.is_current(&v));
    }

    #[test]
    fn same_name_same_handle() {
        let v = Versions::new();
        assert!(Arc::ptr_eq(&v.table("d", "t"), &v.table("d", "t")));
    }

    #[test]
    fn unchanged_since_snapshot() {
        let v = Versions::new();
        let a = v.table("db", "a");
        let snap = v.seq();
        let s = Stamps::capture(&v, std::slice::from_ref(&a));
        assert!(s.unchanged_since(snap));
        v.bump(&a);
        assert!(!s.unchanged_since(snap));
        assert!(s.unchanged_since(v.seq()));
    }

    #[test]
    fn valid_in_snapshot() {
        let v = Versions::new();
        let a = v.table("db", "a");
        let b = v.table("db", "b");
        // Entry stamped, then a write commits, then the transaction starts: the entry is
        // older than the snapshot and must not be served inside it.
        let old = Stamps::capture(&v, std::slice::from_ref(&a));
        v.bump(&a);
        let snap = v.snapshot();
        assert!(old.unchanged_since(snap.seq), "the trap valid_in avoids");
        assert!(!old.valid_in(&v, &snap));
        // Stamped after the write: valid until a table changes after the snapshot.
        let fresh = Stamps::capture(&v, &[a.clone(), b.clone()]);
        assert!(fresh.valid_in(&v, &snap));
        v.bump(&b);
        assert!(!fresh.valid_in(&v, &snap));
        // bump_all after the snapshot: nothing is valid in it.
        let snap = v.snapshot();
        let s = Stamps::capture(&v, std::slice::from_ref(&a));
        assert!(s.valid_in(&v, &snap));
        v.bump_all();
        let s2 = Stamps::capture(&v, std::slice::from_ref(&a));
        assert!(!s2.valid_in(&v, &snap));
    }

    #[test]
    fn unchanged_agrees_with_stamps_captured_now() {
        let v = Versions::new();
        let a = v.table("db", "a");
        let b = v.table("db", "b");
        let both = [a.clone(), b.clone()];
        let snap = v.snapshot();
        let agree = |v: &Versions| {
            let now = Stamps::capture(v, &both).valid_in(v, &snap);
            assert_eq!(snap.unchanged(v, &both), now);
            now
        };
        assert!(agree(&v));
        v.bump(&v.table("db", "other"));
        assert!(agree(&v), "another table's write changes nothing here");
        v.bump(&b);
        assert!(!agree(&v));
        let snap2 = v.snapshot();
        assert!(snap2.unchanged(&v, &both));
        v.bump_all();
        assert!(!snap2.unchanged(&v, &both));
    }

    #[test]
    fn bump_schema_touches_only_that_schema() {
        let v = Versions::new();
        let a = v.table("x", "a");
        let b = v.table("y", "b");
        assert_eq!(v.bump_schema("x"), 1);
        assert!(a.version() > 0);
        assert_eq!(b.version(), 0);
    }
}
