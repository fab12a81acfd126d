//! Table versions: per table a generation every write moves and one only writes with
//! unknown rows move, per registered slice column one more, a bounded array of row-slice
//! counters, a global sequence and an epoch.
//!
//! Entries hold `Arc`s to the counters they depend on, so validating an entry is a few atomic
//! loads and invalidating a table is one store, independent of how many entries exist.
//!
//! The `bump*` methods are primitives: every source of invalidation reaches them through
//! `invalidation::apply`, which picks the published or `_quiet` form by its source and
//! drops the parent mappings of rows that may have moved before a row-level bump (the
//! whole-table and global bumps here drop them on their own).
//!
//! Row slices (`analysis::slices`): an entry that reads only the rows where column `c` of
//! table `t` holds given values stamps `t`'s unknown-rows version, `c`'s own unknown version
//! and the slice counters of those values. A write whose rows qcache can name bumps, for
//! every column registered on `t`, the counters of the values its rows hold there before and
//! after (or the column's unknown version when it cannot name them), then `t`'s all-writes
//! version; any other write bumps `t` as a whole (both versions). Counters are indexed by a
//! hash of (table, column, value): a collision costs an invalidation, never a stale read.
//!
//! Columns (`analysis::slices::Shape::read_columns`): an entry whose columns read in each
//! table are known depends on them instead of the table's every column. Each world has its
//! own table-level versions: an `UPDATE` whose changed columns are known (its `SET` list on
//! a table where nothing else changes implicitly, or the columns a row image shows changed:
//! [`Versions::bump_columns`]) bumps the column counters of those columns, and the versions
//! that entries with unknown columns stamp (`version`, `unknown`, the columns' `unknown`),
//! but not their column-aware twins (`rows`, `unknown_rows`, `unknown_rows` of each slice
//! column), which every other write bumps as well. A column-aware entry stamps the twins and
//! the counters of the columns it reads: an update changing none of them changes neither the
//! rows it reads nor any value it shows. For an entry slicing on column `c` those counters
//! are per (`c`, column read) ([`Versions::column_slice_index`]), and a column-known update
//! bumps them only where it cannot name its rows' values in `c`; where it can, it bumps
//! those values' slices as any write with known rows does, so other slices' entries stay
//! even when they read the changed columns. Column counters are a bounded array indexed by a
//! hash of (table, column), always bumped (no registration, so no registration race); a
//! collision costs an invalidation, never a stale read.
//!
//! Kinds of invalidation (`policy::stale`): an entry a change of rows outdated may be
//! served stale under a `max_stale` rule; one outdated by anything else (DDL, a privilege
//! change, a flush, a gap, L2) never is. Every such other bump raises the table's `hard`
//! mark to its version after the bump, inside [`Versions::begin_hard`] /
//! [`Versions::end_hard`]: a reader that sees the bump's version either sees the mark or
//! sees the bump still in flight ([`Stamps::dropped`]), so it never takes the bump for a
//! change of rows. Changes of rows touch none of this (the write path is unchanged).
//!
//! Why a write acknowledged after an entry's stamps were read always moves one of them:
//! the entry registers its column ([`Versions::register`], under `t`'s column lock) before
//! it reads its stamps, and the write reads `t`'s registered columns ([`Versions::bump_rows`],
//! same lock) only after the server acknowledged it. Either the write's read of the column
//! list comes after the registration — then it bumps the counters of every value its rows
//! hold in that column, which include the entry's value if it touched any row the entry
//! reads (values equal under the column's collation have one key), or the column's unknown
//! version — or it comes before, and then the write was acknowledged before the entry's
//! stamps were read and before its query was sent, so the server's answer includes it.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use xxhash_rust::xxh3::xxh3_64;

use dashmap::DashMap;

use super::fkmap::ParentMaps;
use super::privileges::Privileges;
use crate::faults::{Fault, Faults};
use crate::policy::stale::Dropped;
/// Told of every local bump, so that a shared second level (`l2`) raises the same
/// versions fleet-wide. Called synchronously from `bump*`: it must only queue.
pub trait BumpSink: Send + Sync {
    fn table(&self, schema: &str, name: &str);
    /// A write with known rows ([`Versions::bump_rows`]): per column whose values it names,
    /// the slice counter indexes of those values (every column it names, registered here or
    /// not: other instances may slice on others). By default a whole-table bump.
    fn rows(&self, schema: &str, name: &str, known: &[(String, Vec<u32>)]) {
        let _ = known;
        self.table(schema, name);
    }
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
    /// Moved by every write: what entries reading the whole table stamp.
    version: AtomicU64,
    /// Moved only by writes whose rows qcache cannot name: what sliced entries stamp.
    unknown: AtomicU64,
    /// `version` for entries whose columns are known: every write but a column-known update.
    rows: AtomicU64,
    /// `unknown` for entries whose columns are known: not moved by column-known updates.
    unknown_rows: AtomicU64,
    /// The columns entries slice on; a write with known rows bumps the values of each.
    columns: RwLock<Vec<Arc<SliceColumn>>>,
    /// A `mysql` privilege table: a write to it is a privilege change too.
    privileges: bool,
    /// The version after its last bump that was no change of rows (module docs).
    hard: AtomicU64,
    /// What that bump was (`policy::stale::Dropped` as a byte).
    hard_kind: AtomicU8,
}

/// A column some entry slices on, with the version writes move when they cannot name their
/// rows' values in it.
#[derive(Debug)]
pub struct SliceColumn {
    pub name: Box<str>,
    unknown: AtomicU64,
    /// `unknown` for entries whose columns are known: not moved by column-known updates.
    unknown_rows: AtomicU64,
    /// A foreign-key-derived column (`cache::fkmap::derived_column`): its stamps also check
    /// `pending`.
    derived: bool,
    /// Child writes acknowledged to their clients whose derived slices are not bumped yet
    /// ([`DerivedPending`]): while it is not 0, no entry stamping this column is current. A
    /// count beside the version counters, never inside them: those only grow
    /// (`fetch_max`), which the patch window's argument (`Versions::own_range`) and the
    /// snapshot rule (`Stamps::valid_in`) rely on, and a mark in their high bits would hide
    /// a bump made while it is set (`fetch_max` of a smaller value) and come back to the
    /// same value in the next window.
    pending: AtomicU64,
}

/// What a stamp of a derived column records of its `pending` count when the count was not
/// 0: a value the count never holds, so an entry filled while a child write's derived slices
/// were pending is never current (its stamps may predate the slices' bump, which then moves
/// nothing it checks).
const PENDING_SEEN: u64 = u64::MAX;

impl SliceColumn {
    pub fn version(&self) -> u64 {
        self.unknown.load(Ordering::Acquire)
    }

    pub fn rows_version(&self) -> u64 {
        self.unknown_rows.load(Ordering::Acquire)
    }

    /// How many child writes' derived slices of this column are pending now.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Acquire)
    }

    /// What a stamp captured now records of `pending`: 0, or [`PENDING_SEEN`].
    fn pending_stamp(&self) -> u64 {
        if self.pending() == 0 {
            0
        } else {
            PENDING_SEEN
        }
    }
}

/// What [`Versions::slice_column_index`] is given for the entries of a slice whose columns
/// read are unknown: every column-known update naming rows of the slice bumps it.
pub const ANY_COLUMN: &str = "*";

/// Number of column counters (a power of two).
const COLUMN_COUNTERS: usize = 1 << 12;

/// Number of row-slice counters (a power of two).
const SLICE_COUNTERS: usize = 1 << 16;

/// The bounded array of row-slice counters.
struct SliceCounters(Box<[AtomicU64]>);

impl Default for SliceCounters {
    fn default() -> Self {
        SliceCounters((0..SLICE_COUNTERS).map(|_| AtomicU64::new(0)).collect())
    }
}

/// The bounded array of column counters.
struct ColumnCounters(Box<[AtomicU64]>);

impl Default for ColumnCounters {
    fn default() -> Self {
        ColumnCounters((0..COLUMN_COUNTERS).map(|_| AtomicU64::new(0)).collect())
    }
}

impl std::fmt::Debug for ColumnCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ColumnCounters({})", self.0.len())
    }
}

impl std::fmt::Debug for SliceCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SliceCounters({})", self.0.len())
    }
}

/// What a write with known rows says of one table: per column, the keys of the values its
/// rows hold there before and after (`analysis::slices::RowWrite::known`). Registered columns
/// not listed are unknown.
pub type KnownRows = [(String, Vec<String>)];

impl TableVersion {
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The unknown-rows version.
    pub fn unknown_version(&self) -> u64 {
        self.unknown.load(Ordering::Acquire)
    }

    /// The all-writes version as entries whose columns are known see it.
    pub fn rows_version(&self) -> u64 {
        self.rows.load(Ordering::Acquire)
    }

    /// The unknown-rows version as entries whose columns are known see it.
    pub fn unknown_rows_version(&self) -> u64 {
        self.unknown_rows.load(Ordering::Acquire)
    }

    /// The registered slice columns' names.
    pub fn slice_columns(&self) -> Vec<String> {
        self.columns
            .read()
            .map(|c| c.iter().map(|c| c.name.to_string()).collect())
            .unwrap_or_default()
    }

    /// A `mysql` privilege table: its changes of rows are privilege changes.
    pub fn is_privilege_table(&self) -> bool {
        self.privileges
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
    /// What qcache knows of parent rows, for foreign-key-derived slices (`cache::fkmap`).
    pub parents: Arc<ParentMaps>,
    slices: SliceCounters,
    /// Column counters ([`Versions::column_index`]), moved by column-known updates.
    columns: ColumnCounters,
    /// Set once when an L2 runs; bumps learned from L2 itself use the `_quiet` forms.
    sink: std::sync::OnceLock<Arc<dyn BumpSink>>,
    /// This instance's debug-build fault switches (`crate::faults`); all off otherwise.
    pub faults: Faults,
    /// Invalidations other than changes of rows being applied now (module docs).
    hard_in_flight: AtomicU64,
    /// What the last epoch bump was (`policy::stale::Dropped` as a byte).
    epoch_kind: AtomicU8,
    /// Bumps finished: every bump takes its value from `seq` and counts itself here when
    /// its counters have moved, so `seq == bumps_done` means none is in flight (what a
    /// patch's window asks, [`Versions::patch_window`]).
    bumps_done: AtomicU64,
}

thread_local! {
    /// Values of `seq` this thread has taken: what a patch's own bumps are, told from
    /// everyone else's ([`Versions::window_holds`]).
    static OWN_BUMPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The last value of `seq` this thread took ([`Versions::own_range`]).
    static OWN_LAST: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The values of `seq` a patch's own bumps took, when they are all the values taken from
/// its window's opening to its thread's last bump ([`Versions::own_range`]): `after` the
/// sequence when the window opened, `upto` the last own value (`upto == after`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnRange {
    after: u64,
    upto: u64,
}

/// The point a patch was planned at ([`Versions::patch_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchWindow {
    seq: u64,
    own: u64,
}

impl std::fmt::Debug for dyn BumpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BumpSink")
    }
}

impl Versions {
    pub fn new() -> Versions {
        let v = Versions::default();
        #[cfg(debug_assertions)]
        if std::env::var_os("QCACHE_DEBUG_BREAK_SLICE_BUMPS").is_some_and(|x| x == "1") {
            tracing::warn!(
                "QCACHE_DEBUG_BREAK_SLICE_BUMPS=1: writes with known rows bump no slices; \
                 this instance serves stale reads on purpose (checker self-test)"
            );
            v.break_slice_bumps(true);
        }
        v
    }

    /// Debug builds only (the method does not exist in release builds): makes every write
    /// with known rows skip its slice and column bumps, so that entries reading slices are
    /// served stale. It exists so that the stale-read checker can be shown to fail against
    /// such a build (docs/reliability.md); also set by `QCACHE_DEBUG_BREAK_SLICE_BUMPS=1`.
    /// [`Fault::RowSlices`] under its first name.
    #[cfg(debug_assertions)]
    #[doc(hidden)]
    pub fn break_slice_bumps(&self, on: bool) {
        self.faults.set(Fault::RowSlices, on);
    }

    /// Whether [`Fault::RowSlices`] is on (never in a release build).
    fn slice_bumps_broken(&self) -> bool {
        self.faults.on(Fault::RowSlices)
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
                    unknown: AtomicU64::new(0),
                    rows: AtomicU64::new(0),
                    unknown_rows: AtomicU64::new(0),
                    columns: RwLock::new(Vec::new()),
                    privileges: crate::policy::privileges::is_privilege_table(schema, name),
                    hard: AtomicU64::new(0),
                    hard_kind: AtomicU8::new(0),
                })
            })
            .clone()
    }

    /// Gives the table a new generation; every entry stamped with an older one is now stale.
    pub fn bump(&self, t: &TableVersion) {
        // The sink first, in every bump: a reader whose stamps include a bump can then tell
        // from the sink whether it has reached the shared level (`L2::queued`).
        if let Some(s) = self.sink.get() {
            s.table(&t.schema, &t.name);
        }
        self.bump_quiet(t);
    }

    /// `bump` without telling the sink: for bumps that came from the sink's side.
    pub fn bump_quiet(&self, t: &TableVersion) {
        // A write whose rows are unknown may have moved parent rows: their mappings go
        // first (through qcache such a write is a move as well, `cache::fkmap`).
        self.parents.drop_table(&t.schema, &t.name);
        let v = self.take_seq();
        t.unknown_rows.fetch_max(v, Ordering::AcqRel);
        t.unknown.fetch_max(v, Ordering::AcqRel);
        t.rows.fetch_max(v, Ordering::AcqRel);
        t.version.fetch_max(v, Ordering::AcqRel);
        self.bump_done();
        if t.privileges && !self.faults.on(Fault::PrivilegeStamps) {
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
        if self.faults.on(Fault::PrivilegeStamps) {
            return 0;
        }
        self.privileges.apply(c);
        let stamps = crate::policy::privileges::change_stamps(c);
        for (s, n) in &stamps {
            self.bump_name(s, n);
        }
        stamps.len()
    }

    /// [`apply_privileges`](Self::apply_privileges) of a change learned from another
    /// instance: the users' generations only; its stamps came bumped with it.
    pub fn apply_privileges_quiet(&self, c: &crate::policy::privileges::PrivilegeChange) {
        if !self.faults.on(Fault::PrivilegeStamps) {
            self.privileges.apply(c);
        }
    }

    /// Registers `column` (lower-cased) of `t` as a slice column, if it is not yet, and returns
    /// it. Call before reading the stamps of an entry that slices on it (module docs).
    pub fn register(&self, t: &TableVersion, column: &str) -> Arc<SliceColumn> {
        if let Ok(cols) = t.columns.read() {
            if let Some(c) = cols.iter().find(|c| &*c.name == column) {
                return c.clone();
            }
        }
        // A poisoned lock only means a panic elsewhere while holding it; the list is whole.
        let mut cols = t.columns.write().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cols.iter().find(|c| &*c.name == column) {
            return c.clone();
        }
        // Writes before now bumped no slice of this column: to a transaction's snapshot
        // ("unchanged since S") they count as writes with unknown rows. Read under the write
        // lock, which `bump_rows` holds across its all-writes bump.
        let c = Arc::new(SliceColumn {
            name: column.into(),
            unknown: AtomicU64::new(t.version()),
            unknown_rows: AtomicU64::new(t.version()),
            derived: super::fkmap::parse_derived(column).is_some(),
            pending: AtomicU64::new(0),
        });
        cols.push(c.clone());
        c
    }

    /// The counter index of a slice.
    pub fn slice_index(t: &TableVersion, column: &str, key: &str) -> u32 {
        let mut buf =
            Vec::with_capacity(t.schema.len() + t.name.len() + column.len() + key.len() + 3);
        for part in [
            t.schema.as_bytes(),
            t.name.as_bytes(),
            column.as_bytes(),
            key.as_bytes(),
        ] {
            buf.extend_from_slice(part);
            buf.push(0);
        }
        (xxh3_64(&buf) as usize & (SLICE_COUNTERS - 1)) as u32
    }

    pub fn slice_version(&self, index: u32) -> u64 {
        self.slices.0[index as usize].load(Ordering::Acquire)
    }

    /// The counter index of a column (lower-cased) of `t`.
    pub fn column_index(t: &TableVersion, column: &str) -> u32 {
        let mut buf = Vec::with_capacity(t.schema.len() + t.name.len() + column.len() + 3);
        for part in [t.schema.as_bytes(), t.name.as_bytes(), column.as_bytes()] {
            buf.extend_from_slice(part);
            buf.push(0);
        }
        (xxh3_64(&buf) as usize & (COLUMN_COUNTERS - 1)) as u32
    }

    pub fn column_version(&self, index: u32) -> u64 {
        self.columns.0[index as usize & (COLUMN_COUNTERS - 1)].load(Ordering::Acquire)
    }

    /// An `UPDATE` of `t` acknowledged by the server that changed only the columns `set`
    /// (lower-cased): bumps their column counters, and for entries whose columns are unknown
    /// what [`bump_rows`](Self::bump_rows) (rows named by `known`) or [`bump`](Self::bump)
    /// (None) would, without the column-aware twins (module docs). The sink is told of it as
    /// of any write with those rows: other instances invalidate it as such. Returns the
    /// number of slice counters bumped.
    pub fn bump_columns(&self, t: &TableVersion, set: &[String], known: Option<&KnownRows>) -> u64 {
        if t.privileges {
            self.bump(t);
            return 0;
        }
        if let Some(s) = self.sink.get() {
            match known {
                None => s.table(&t.schema, &t.name),
                Some(known) => s.rows(&t.schema, &t.name, &Self::all_indexes(t, known)),
            }
        }
        let v = self.take_seq();
        if !self.slice_bumps_broken() {
            for c in set {
                self.columns.0[Versions::column_index(t, c) as usize]
                    .fetch_max(v, Ordering::AcqRel);
            }
        }
        let n = match known {
            None => {
                t.unknown.fetch_max(v, Ordering::AcqRel);
                // Every slice column's values unknown: its entries reading `set` go.
                self.bump_indexes_at(t, v, |_| None, Some(set));
                0
            }
            Some(known) => {
                let indexes = |column: &str| Self::known_indexes(t, known, column);
                self.bump_indexes_at(t, v, indexes, Some(set))
            }
        };
        self.bump_done();
        n
    }

    /// The slice counter index of column `read` (lower-cased) of the rows of one slice (its
    /// counter index `slice`) of `column`: what a column-known update naming its rows'
    /// values in `column`, and not changing `column`, bumps for each column it changes.
    pub fn slice_column_index(t: &TableVersion, column: &str, slice: u32, read: &str) -> u32 {
        let mut buf =
            Vec::with_capacity(t.schema.len() + t.name.len() + column.len() + read.len() + 10);
        for part in [
            t.schema.as_bytes(),
            t.name.as_bytes(),
            column.as_bytes(),
            &slice.to_le_bytes()[..],
            read.as_bytes(),
        ] {
            buf.extend_from_slice(part);
            buf.push(0);
        }
        (xxh3_64(&buf) as usize & (SLICE_COUNTERS - 1)) as u32
    }

    /// The counter index of column `read` (lower-cased) for entries that slice `t` on
    /// `column`: what a column-known update that cannot name its rows' values in `column`
    /// bumps for each column it changes.
    pub fn column_slice_index(t: &TableVersion, column: &str, read: &str) -> u32 {
        let mut buf =
            Vec::with_capacity(t.schema.len() + t.name.len() + column.len() + read.len() + 4);
        for part in [
            t.schema.as_bytes(),
            t.name.as_bytes(),
            column.as_bytes(),
            read.as_bytes(),
        ] {
            buf.extend_from_slice(part);
            buf.push(0);
        }
        (xxh3_64(&buf) as usize & (COLUMN_COUNTERS - 1)) as u32
    }

    fn known_indexes(t: &TableVersion, known: &KnownRows, column: &str) -> Option<Vec<u32>> {
        known.iter().find(|(k, _)| k == column).map(|(_, keys)| {
            keys.iter()
                .map(|key| Versions::slice_index(t, column, key))
                .collect::<Vec<u32>>()
        })
    }

    fn all_indexes(t: &TableVersion, known: &KnownRows) -> Vec<(String, Vec<u32>)> {
        known
            .iter()
            .filter_map(|(c, _)| Some((c.clone(), Self::known_indexes(t, known, c)?)))
            .collect()
    }

    /// A write with known rows to `t`, acknowledged by the server: bumps, per registered
    /// column, the slices of the values `known` lists (else the column's unknown version),
    /// then the all-writes version. The unknown-rows version stays. Returns the number of
    /// slice counters bumped.
    pub fn bump_rows(&self, t: &TableVersion, known: &KnownRows) -> u64 {
        if t.privileges {
            // A privilege table: the whole privilege change, as any write to it.
            self.bump(t);
            return 0;
        }
        // Other instances slice on their own columns: they get every column named.
        if let Some(s) = self.sink.get() {
            s.rows(&t.schema, &t.name, &Self::all_indexes(t, known));
        }
        let indexes = |column: &str| Self::known_indexes(t, known, column);
        self.bump_indexes(t, indexes)
    }

    /// [`bump_rows`](Self::bump_rows) of a write another instance made, learned from the
    /// shared second level: `indexes(column)` gives the slice counter indexes of the values
    /// the write names in a registered column, None when it does not name them. Does not
    /// tell the sink (the indexes came from it). Its parent mappings are
    /// `invalidation::apply`'s to drop: the write may have moved rows.
    pub fn bump_rows_quiet(
        &self,
        t: &TableVersion,
        indexes: impl Fn(&str) -> Option<Vec<u32>>,
    ) -> u64 {
        if t.privileges {
            self.bump_quiet(t);
            return 0;
        }
        self.bump_indexes(t, indexes)
    }

    /// The late half of a child write whose derived slices were pending
    /// ([`DerivedPending`]): bumps, for derived column `c` of `t`, the slices of `keys`
    /// (the parent values the server answered), or with None every derived slice of the
    /// column (its unknown versions: the fallback). Nothing else: the write's other
    /// counters moved at its OK. A sink, if any, is told as of a write with those rows.
    /// Returns the number of slice counters bumped.
    pub fn bump_derived(&self, t: &TableVersion, c: &SliceColumn, keys: Option<&[String]>) -> u64 {
        let indexes: Option<Vec<u32>> =
            keys.map(|k| k.iter().map(|k| Self::slice_index(t, &c.name, k)).collect());
        if let Some(s) = self.sink.get() {
            match &indexes {
                Some(i) => s.rows(&t.schema, &t.name, &[(c.name.to_string(), i.clone())]),
                None => s.table(&t.schema, &t.name),
            }
        }
        let v = self.take_seq();
        let skip = self.slice_bumps_broken() || self.faults.on(Fault::DerivedSlices);
        let n = match (&indexes, skip) {
            (_, true) => 0,
            (Some(list), false) => {
                for &i in list {
                    self.slices.0[i as usize & (SLICE_COUNTERS - 1)].fetch_max(v, Ordering::AcqRel);
                }
                list.len() as u64
            }
            (None, false) => {
                c.unknown_rows.fetch_max(v, Ordering::AcqRel);
                c.unknown.fetch_max(v, Ordering::AcqRel);
                0
            }
        };
        self.bump_done();
        n
    }

    fn bump_indexes(&self, t: &TableVersion, indexes: impl Fn(&str) -> Option<Vec<u32>>) -> u64 {
        let v = self.take_seq();
        let n = self.bump_indexes_at(t, v, indexes, None);
        self.bump_done();
        n
    }

    /// `set`: a column-known update changing only those columns, which leaves the
    /// column-aware twins alone; where it cannot name a slice column's values, it bumps
    /// that column's counters of the columns it changes instead
    /// ([`column_slice_index`](Self::column_slice_index)).
    fn bump_indexes_at(
        &self,
        t: &TableVersion,
        v: u64,
        indexes: impl Fn(&str) -> Option<Vec<u32>>,
        set: Option<&[String]>,
    ) -> u64 {
        let columns_only = set.is_some();
        let mut n = 0;
        {
            // Read after the acknowledgement; see the module docs for why that suffices.
            let cols = t.columns.read().unwrap_or_else(|e| e.into_inner());
            let skip = self.slice_bumps_broken();
            let skip_derived = self.faults.on(Fault::DerivedSlices);
            let derived = |c: &SliceColumn| super::fkmap::parse_derived(&c.name).is_some();
            let kept = |c: &&Arc<SliceColumn>| !(skip || skip_derived && derived(c));
            for c in cols.iter().filter(kept) {
                match indexes(&c.name) {
                    // A column-known update that leaves this column as it is: its rows stay in
                    // their slices and change only in `set`, which those slices' entries read
                    // through their per-slice column counters.
                    Some(list) if set.is_some_and(|s| !s.iter().any(|x| **x == *c.name)) => {
                        for i in list {
                            // Entries of the slice whose columns are unknown stamp "*".
                            let all = Versions::slice_column_index(t, &c.name, i, ANY_COLUMN);
                            self.slices.0[all as usize].fetch_max(v, Ordering::AcqRel);
                            for r in set.unwrap_or_default() {
                                let k = Versions::slice_column_index(t, &c.name, i, r);
                                self.slices.0[k as usize].fetch_max(v, Ordering::AcqRel);
                                n += 1;
                            }
                        }
                    }
                    Some(list) => {
                        for i in list {
                            self.slices.0[i as usize & (SLICE_COUNTERS - 1)]
                                .fetch_max(v, Ordering::AcqRel);
                            n += 1;
                        }
                    }
                    None => {
                        match set {
                            Some(set) => {
                                for s in set {
                                    let i = Versions::column_slice_index(t, &c.name, s);
                                    self.columns.0[i as usize].fetch_max(v, Ordering::AcqRel);
                                }
                            }
                            None => {
                                c.unknown_rows.fetch_max(v, Ordering::AcqRel);
                            }
                        }
                        c.unknown.fetch_max(v, Ordering::AcqRel);
                    }
                }
            }
            // Still under the lock: a column registered after this point starts at `v`.
            if !columns_only {
                t.rows.fetch_max(v, Ordering::AcqRel);
            }
            t.version.fetch_max(v, Ordering::AcqRel);
        }
        n
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
        // Others may hold entries on tables of this schema that this registry never saw.
        if let Some(s) = self.sink.get() {
            s.schema(schema);
        }
        self.bump_schema_quiet(schema)
    }

    /// `bump_schema` without telling the sink.
    pub fn bump_schema_quiet(&self, schema: &str) -> usize {
        let handles: Vec<TableHandle> = self
            .tables
            .iter()
            .filter(|e| e.key().0 == schema)
            .map(|e| e.value().clone())
            .collect();
        for t in &handles {
            self.bump_quiet(t);
        }
        handles.len()
    }

    /// Invalidates everything. The sequence moves too, so open transactions' snapshots
    /// see every table as changed.
    pub fn bump_all(&self) {
        if let Some(s) = self.sink.get() {
            s.all();
        }
        self.bump_all_quiet();
    }

    /// `bump_all` for a binlog gap: local entries all go; the sink decides about shared ones.
    pub fn bump_all_gap(&self) {
        if self.faults.on(Fault::BinlogGaps) {
            return;
        }
        if let Some(s) = self.sink.get() {
            s.gap();
        }
        self.bump_all_quiet();
    }

    /// `bump_all` without telling the sink.
    pub fn bump_all_quiet(&self) {
        self.parents.drop_all();
        self.take_seq();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.bump_done();
    }

    /// The next value of the global sequence, for a bump about to move counters; paired
    /// with [`bump_done`](Self::bump_done) once they have moved.
    fn take_seq(&self) -> u64 {
        OWN_BUMPS.with(|n| n.set(n.get() + 1));
        let v = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        OWN_LAST.with(|n| n.set(v));
        v
    }

    fn bump_done(&self) {
        self.bumps_done.fetch_add(1, Ordering::SeqCst);
    }

    /// Opens a patch's window (`policy::patch`): Some only when no bump is in flight. A
    /// patch checks its entries are current after this, applies its write's own bumps on
    /// this thread with no await, re-reads the entries' stamps
    /// ([`Stamps::recapture`]), then asks [`window_holds`](Self::window_holds).
    pub fn patch_window(&self) -> Option<PatchWindow> {
        // Done first: equal to the sequence read after it, nothing was in flight when it
        // was read and nothing began in between.
        let done = self.bumps_done.load(Ordering::SeqCst);
        let seq = self.seq.load(Ordering::SeqCst);
        (done == seq).then(|| PatchWindow {
            seq,
            own: OWN_BUMPS.with(|n| n.get()),
        })
    }

    /// Whether every bump since `w` opened was this thread's own, and none is in flight:
    /// then stamps re-read now differ from the entries' checked ones only by the patch's own
    /// write, and any later bump takes a larger value, which moves a counter they hold. If
    /// another bump began (or was in flight) it may hide under the patch's values, so the
    /// patch is dropped.
    pub fn window_holds(&self, w: PatchWindow) -> bool {
        let own = OWN_BUMPS.with(|n| n.get()).wrapping_sub(w.own);
        let seq = self.seq.load(Ordering::SeqCst);
        let done = self.bumps_done.load(Ordering::SeqCst);
        seq == done && seq.wrapping_sub(w.seq) == own
    }

    /// When [`window_holds`](Self::window_holds) says no, what can still be kept: Some when
    /// no other thread took a value of `seq` between the window's opening and this thread's
    /// last bump, so every other bump since the opening took a larger value than any of
    /// this thread's, and one that has moved a counter leaves it above them (counters only
    /// grow, each to its bump's value) — it cannot hide under an own value. Stamps re-read
    /// now whose counters each hold the value checked or an own value
    /// ([`Stamps::moved_only_by`]) then differ from the checked ones by the own bumps only;
    /// a bump still in flight moves them later, above what they hold, and so makes them
    /// stale, never wrongly current. None when another value came among the own ones: it
    /// may have been hidden under one of them.
    pub fn own_range(&self, w: PatchWindow) -> Option<OwnRange> {
        let own = OWN_BUMPS.with(|n| n.get()).wrapping_sub(w.own);
        if own == 0 {
            return Some(OwnRange {
                after: w.seq,
                upto: w.seq,
            });
        }
        let last = OWN_LAST.with(|n| n.get());
        (last.wrapping_sub(w.seq) == own).then_some(OwnRange {
            after: w.seq,
            upto: last,
        })
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

    /// Opens an invalidation that is no change of rows: until [`end_hard`](Self::end_hard),
    /// no outdated entry counts as outdated by rows only. SeqCst here and in
    /// [`Stamps::dropped`]: the mark must be seen by whoever sees the bump.
    pub fn begin_hard(&self, kind: Dropped) {
        self.hard_in_flight.fetch_add(1, Ordering::SeqCst);
        self.epoch_kind.store(kind as u8, Ordering::SeqCst);
    }

    /// Marks `t` as bumped by an invalidation of `kind` (after its bump, before
    /// [`end_hard`](Self::end_hard)).
    pub fn mark_hard(&self, t: &TableVersion, kind: Dropped) {
        t.hard_kind.store(kind as u8, Ordering::SeqCst);
        t.hard.fetch_max(t.version(), Ordering::SeqCst);
    }

    /// Marks every table of `schema` the registry knows ([`mark_hard`](Self::mark_hard)).
    pub fn mark_hard_schema(&self, schema: &str, kind: Dropped) {
        for e in self.tables.iter().filter(|e| e.key().0 == schema) {
            self.mark_hard(e.value(), kind);
        }
    }

    pub fn end_hard(&self) {
        self.hard_in_flight.fetch_sub(1, Ordering::SeqCst);
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
        if v.faults.on(Fault::Snapshot) {
            return true;
        }
        v.epoch() == self.epoch && tables.iter().all(|t| t.version() <= self.seq)
    }
}

/// The generations an entry was computed under, read before its query went upstream.
///
/// Every hit asks [`is_current`](Stamps::is_current), which reads only `epoch` and `checks`:
/// one flat array holding every counter and the value read from it, so that a hit reads one
/// allocation of the entry's instead of one per kind of dependency and per sliced table
/// (#36). The lists after them say what the counters are, for everything else (snapshots,
/// staleness, weights, listings); the constructors ([`capture`](Stamps::capture),
/// [`capture_sliced`](Stamps::capture_sliced), [`recapture`](Stamps::recapture)) build both
/// from the same reads, and nothing changes a `Stamps` after.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Stamps {
    /// The epoch at capture time (first: what a hit reads first).
    pub epoch: u64,
    /// Every counter below with the value captured, in the order `is_current` checked them.
    checks: Box<[Check]>,
    /// Tables read whole: their all-writes versions.
    pub tables: Vec<(TableHandle, u64)>,
    /// Tables read by slices.
    pub sliced: Vec<SliceStamp>,
    /// Tables read whole whose columns read are known: their `rows` versions.
    pub rows: Vec<(TableHandle, u64)>,
    /// The column counters of the columns read of column-aware tables (whole or sliced).
    pub columns: Vec<(u32, u64)>,
    /// Global sequence at capture time.
    pub seq: u64,
}

/// One counter a [`Stamps`] depends on and the value it held at capture.
#[derive(Debug, Clone)]
struct Check {
    counter: Counter,
    at: u64,
}

/// Where a [`Check`]'s counter is: a table's or slice column's own, or an index into the
/// registry's bounded arrays.
#[derive(Debug, Clone)]
enum Counter {
    Version(TableHandle),
    Rows(TableHandle),
    Unknown(TableHandle),
    UnknownRows(TableHandle),
    Column(Arc<SliceColumn>),
    ColumnRows(Arc<SliceColumn>),
    ColumnRead(u32),
    Slice(u32),
    /// A derived column's pending count (not a version: see [`SliceColumn`]).
    Pending(Arc<SliceColumn>),
}

impl Counter {
    #[inline]
    fn now(&self, v: &Versions) -> u64 {
        match self {
            Counter::Version(t) => t.version(),
            Counter::Rows(t) => t.rows_version(),
            Counter::Unknown(t) => t.unknown_version(),
            Counter::UnknownRows(t) => t.unknown_rows_version(),
            Counter::Column(c) => c.version(),
            Counter::ColumnRows(c) => c.rows_version(),
            Counter::ColumnRead(i) => v.column_version(*i),
            Counter::Slice(i) => v.slice_version(*i),
            Counter::Pending(c) => c.pending(),
        }
    }
}

/// What an entry reading only some slices of a table depends on.
#[derive(Debug, Clone)]
pub struct SliceStamp {
    pub table: TableHandle,
    unknown: u64,
    column: Arc<SliceColumn>,
    column_version: u64,
    slices: Vec<(u32, u64)>,
    /// The columns read are known: `unknown` and `column_version` are the column-aware
    /// twins (`unknown_rows`), and the stamps' column counters cover the columns read.
    by_columns: bool,
    /// A derived column's pending count as stamped: 0, or [`PENDING_SEEN`] (never current).
    pending: u64,
}

impl SliceStamp {
    pub fn slices_len(&self) -> usize {
        self.slices.len()
    }

    /// The slice column these stamps read by (lower-cased).
    pub fn column_name(&self) -> &str {
        &self.column.name
    }

    /// The slice counter indexes stamped (the slices', then their per-slice column
    /// counters'): what a write must bump one of to reach these stamps by their slices.
    pub fn slice_indexes(&self) -> impl Iterator<Item = u32> + '_ {
        self.slices.iter().map(|(i, _)| *i)
    }

    /// The counters of `unknown_now` and `column_now`.
    fn counters(&self) -> [Counter; 2] {
        if self.by_columns {
            [
                Counter::UnknownRows(self.table.clone()),
                Counter::ColumnRows(self.column.clone()),
            ]
        } else {
            [
                Counter::Unknown(self.table.clone()),
                Counter::Column(self.column.clone()),
            ]
        }
    }

    fn unknown_now(&self) -> u64 {
        if self.by_columns {
            self.table.unknown_rows_version()
        } else {
            self.table.unknown_version()
        }
    }

    fn column_now(&self) -> u64 {
        if self.by_columns {
            self.column.rows_version()
        } else {
            self.column.version()
        }
    }

    /// Whether no child write's derived slices of this column are pending, and none were
    /// when these stamps were read (always true of a column that is not derived).
    fn pending_clear(&self) -> bool {
        !self.column.derived || (self.pending == 0 && self.column.pending() == 0)
    }

    fn all_versions<'a>(&'a self, v: &'a Versions) -> impl Iterator<Item = (u64, u64)> + 'a {
        [
            (self.unknown_now(), self.unknown),
            (self.column_now(), self.column_version),
        ]
        .into_iter()
        .chain(self.slices.iter().map(|(i, s)| (v.slice_version(*i), *s)))
    }
}

/// A table an entry reads by slices: the column (registered) and the counter indexes.
#[derive(Debug, Clone)]
pub struct SlicePlan {
    pub table: TableHandle,
    pub column: Arc<SliceColumn>,
    pub slices: Vec<u32>,
    /// The columns the read reads of this table are in the [`ColumnReads`] given with it.
    pub by_columns: bool,
    /// The per-slice column counters of the columns read ([`Versions::slice_column_index`];
    /// without `by_columns`, of [`ANY_COLUMN`]), stamped like slices (not an L2 dependency:
    /// L2 is told of column-known updates as of plain writes with known rows).
    pub slice_columns: Vec<u32>,
}

/// What a read reads by column ([`Stamps::capture_sliced`]): the tables read whole whose
/// columns read are known (their `rows` version replaces `version`), and the column
/// counter indexes of every column read of those tables ([`Versions::column_index`]) and of
/// the sliced tables whose plan says `by_columns` ([`Versions::column_slice_index`] with
/// their slice column).
#[derive(Debug, Clone, Default)]
pub struct ColumnReads {
    pub tables: Vec<TableHandle>,
    pub indexes: Vec<u32>,
}

impl Stamps {
    pub fn capture(v: &Versions, tables: &[TableHandle]) -> Stamps {
        // Epoch first: a bump_all racing with the capture makes the stamps stale, never
        // wrongly current.
        let epoch = v.epoch();
        let seq = v.seq();
        Stamps {
            epoch,
            checks: Box::default(),
            tables: tables.iter().map(|t| (t.clone(), t.version())).collect(),
            sliced: Vec::new(),
            rows: Vec::new(),
            columns: Vec::new(),
            seq,
        }
        .sealed()
    }

    /// These stamps with `checks` built from the lists: every constructor ends here.
    fn sealed(mut self) -> Stamps {
        let n = self.tables.len()
            + self.rows.len()
            + self.columns.len()
            + self
                .sliced
                .iter()
                .map(|s| 2 + s.slices.len() + usize::from(s.column.derived))
                .sum::<usize>();
        let mut checks = Vec::with_capacity(n);
        for (t, at) in &self.tables {
            checks.push(Check {
                counter: Counter::Version(t.clone()),
                at: *at,
            });
        }
        for (t, at) in &self.rows {
            checks.push(Check {
                counter: Counter::Rows(t.clone()),
                at: *at,
            });
        }
        for &(i, at) in &self.columns {
            checks.push(Check {
                counter: Counter::ColumnRead(i),
                at,
            });
        }
        for s in &self.sliced {
            let [unknown, column] = s.counters();
            checks.push(Check {
                counter: unknown,
                at: s.unknown,
            });
            checks.push(Check {
                counter: column,
                at: s.column_version,
            });
            for &(i, at) in &s.slices {
                checks.push(Check {
                    counter: Counter::Slice(i),
                    at,
                });
            }
            // Only derived columns pay for it: other entries' checks are as they were.
            if s.column.derived {
                checks.push(Check {
                    counter: Counter::Pending(s.column.clone()),
                    at: s.pending,
                });
            }
        }
        self.checks = checks.into_boxed_slice();
        self
    }

    /// [`capture`](Self::capture) for a read of `whole` tables and of `sliced` ones by slices.
    /// Every column of `sliced` must have been registered before this call. The tables of
    /// `cols` are among `whole`.
    pub fn capture_sliced(
        v: &Versions,
        whole: &[TableHandle],
        sliced: &[SlicePlan],
        cols: &ColumnReads,
    ) -> Stamps {
        let (by_cols, plain): (Vec<TableHandle>, Vec<TableHandle>) = whole
            .iter()
            .cloned()
            .partition(|t| cols.tables.iter().any(|c| Arc::ptr_eq(c, t)));
        let mut s = Stamps::capture(v, &plain);
        s.rows = by_cols
            .into_iter()
            .map(|t| {
                let ver = t.rows_version();
                (t, ver)
            })
            .collect();
        s.columns = cols
            .indexes
            .iter()
            .map(|i| (*i, v.column_version(*i)))
            .collect();
        s.sliced = sliced
            .iter()
            .map(|p| {
                let mut st = SliceStamp {
                    table: p.table.clone(),
                    unknown: 0,
                    column: p.column.clone(),
                    column_version: 0,
                    slices: p
                        .slices
                        .iter()
                        .chain(&p.slice_columns)
                        .map(|i| (*i, v.slice_version(*i)))
                        .collect(),
                    by_columns: p.by_columns,
                    // In any order with the versions ([`DerivedPending`]).
                    pending: p.column.pending_stamp(),
                };
                st.unknown = st.unknown_now();
                st.column_version = st.column_now();
                st
            })
            .collect();
        s.sealed()
    }

    /// The same dependencies at their versions now: a patched entry's new stamps, taken
    /// inside its window ([`Versions::patch_window`]).
    pub fn recapture(&self, v: &Versions) -> Stamps {
        let epoch = v.epoch();
        let seq = v.seq();
        Stamps {
            epoch,
            checks: Box::default(),
            tables: self
                .tables
                .iter()
                .map(|(t, _)| (t.clone(), t.version()))
                .collect(),
            sliced: self
                .sliced
                .iter()
                .map(|s| {
                    let mut st = SliceStamp {
                        table: s.table.clone(),
                        unknown: 0,
                        column: s.column.clone(),
                        column_version: 0,
                        slices: s
                            .slices
                            .iter()
                            .map(|(i, _)| (*i, v.slice_version(*i)))
                            .collect(),
                        by_columns: s.by_columns,
                        pending: s.column.pending_stamp(),
                    };
                    st.unknown = st.unknown_now();
                    st.column_version = st.column_now();
                    st
                })
                .collect(),
            rows: self
                .rows
                .iter()
                .map(|(t, _)| (t.clone(), t.rows_version()))
                .collect(),
            columns: self
                .columns
                .iter()
                .map(|(i, _)| (*i, v.column_version(*i)))
                .collect(),
            seq,
        }
        .sealed()
    }

    /// Whether these stamps, re-read ([`recapture`](Self::recapture)) from `checked` inside
    /// a patch's window, differ from them by the patch's own bumps only: the same epoch,
    /// and each counter holding the value checked or one of `own`'s
    /// ([`Versions::own_range`]). An entry checked current when the window opened then
    /// holds, under these stamps, the rows it held plus the write's own.
    pub fn moved_only_by(&self, checked: &Stamps, own: OwnRange) -> bool {
        self.epoch == checked.epoch
            && self.checks.len() == checked.checks.len()
            && self
                .checks
                .iter()
                .zip(checked.checks.iter())
                .all(|(now, then)| now.at == then.at || (own.after < now.at && now.at <= own.upto))
    }

    /// Whether these stamps are outdated by derived columns' pending counts only: read
    /// before the window, nothing else they check moved. Their entry is current again when
    /// the counts clear, unless the lookup's bump reaches it, so a lookup that finds it
    /// keeps it (`Cache::get_current`). Asked only of entries found not current.
    pub fn held_by_pending(&self, v: &Versions) -> bool {
        self.epoch == v.epoch()
            && self.checks.iter().all(|c| match &c.counter {
                Counter::Pending(_) => c.at == 0,
                counter => counter.now(v) == c.at,
            })
    }

    /// Whether these stamps were read while a derived column they stamp was pending: they
    /// are never current ([`DerivedPending`]), so their entry is not worth storing.
    pub fn saw_pending(&self) -> bool {
        self.sliced.iter().any(|s| s.pending == PENDING_SEEN)
    }

    /// What the flat check array takes, for an entry's weight.
    pub fn checks_bytes(&self) -> usize {
        self.checks.len() * std::mem::size_of::<Check>()
    }

    /// Every table these stamps depend on, whole or by slices.
    pub fn all_tables(&self) -> impl Iterator<Item = &TableHandle> {
        self.tables
            .iter()
            .map(|(t, _)| t)
            .chain(self.rows.iter().map(|(t, _)| t))
            .chain(self.sliced.iter().map(|s| &s.table))
    }

    /// Every hit asks this: the epoch, then one pass over the flat `checks` (the lists'
    /// counters in their order), so a sliced entry costs a table-granular one's check plus
    /// its loads, all from one allocation.
    #[inline]
    pub fn is_current(&self, v: &Versions) -> bool {
        self.epoch == v.epoch() && self.checks.iter().all(|c| c.counter.now(v) == c.at)
    }

    /// Whether an invalidation other than a change of rows reached these stamps, and which
    /// (`policy::stale`). Asked only of outdated entries, under a `max_stale` rule.
    pub fn dropped(&self, v: &Versions) -> Option<Dropped> {
        // Versions (by the caller's staleness check) first, then this: a bump seen there
        // whose mark is not here yet is still in flight.
        if v.hard_in_flight.load(Ordering::SeqCst) > 0 {
            return Some(Dropped::Pending);
        }
        if self.epoch != v.epoch() {
            return Some(Dropped::from_u8(v.epoch_kind.load(Ordering::SeqCst)));
        }
        let hard = |t: &TableVersion, stamped: u64| {
            (t.hard.load(Ordering::SeqCst) > stamped)
                .then(|| Dropped::from_u8(t.hard_kind.load(Ordering::SeqCst)))
        };
        self.tables
            .iter()
            .chain(&self.rows)
            .find_map(|(t, s)| hard(t, *s))
            .or_else(|| self.sliced.iter().find_map(|s| hard(&s.table, s.unknown)))
    }

    /// True when no table of these stamps changed after the global sequence `seq`, and no
    /// bump_all happened after it either (the caller compares epochs).
    pub fn unchanged_since(&self, v: &Versions, seq: u64) -> bool {
        self.tables.iter().all(|(t, _)| t.version() <= seq)
            && self.rows.iter().all(|(t, _)| t.rows_version() <= seq)
            && self
                .columns
                .iter()
                .all(|(i, _)| v.column_version(*i) <= seq)
            && self
                .sliced
                .iter()
                .all(|s| s.pending_clear() && s.all_versions(v).all(|(cur, _)| cur <= seq))
    }

    /// Valid inside a transaction that began at `snap`: current (so the entry reflects every
    /// change up to now) and unchanged since the snapshot (so "now" is what the snapshot
    /// sees). `unchanged_since` alone is not enough: an entry stamped before a write that
    /// committed before the snapshot has old versions that are still `<= seq`.
    pub fn valid_in(&self, v: &Versions, snap: &Snapshot) -> bool {
        if v.faults.on(Fault::Snapshot) {
            return self.is_current(v);
        }
        snap.epoch == self.epoch
            && v.epoch() == self.epoch
            && self.tables.iter().all(|(t, ver)| {
                let cur = t.version();
                cur == *ver && cur <= snap.seq
            })
            && self.rows.iter().all(|(t, ver)| {
                let cur = t.rows_version();
                cur == *ver && cur <= snap.seq
            })
            && self.columns.iter().all(|(i, ver)| {
                let cur = v.column_version(*i);
                cur == *ver && cur <= snap.seq
            })
            && self.sliced.iter().all(|s| {
                s.pending_clear()
                    && s.all_versions(v)
                        .all(|(cur, ver)| cur == ver && cur <= snap.seq)
            })
    }
}

/// A child write's derived slices acknowledged to its client before they are bumped
/// (`engine::fkslices::Timing::Deferred`): made before the OK goes out, it raises each
/// column's pending count; [`finish`](Self::finish) bumps the slices the server's answer
/// names (every derived slice of a column it left out) and only then lowers the counts.
/// Dropped unfinished (the lookup failed, its task ended), it bumps every derived slice of
/// each column, then lowers them.
///
/// Why no entry is served stale after the OK: a stale one lacks the write's row and reads
/// the row's slice. Until the counts come down it is not current (its stamps check the
/// count, `Counter::Pending`). After, it is current only if the slice counter it stamped
/// still holds: it read that counter after the bump, hence after the commit, and its query
/// went upstream after all its stamps were read, so it has the row. A stamp that saw a
/// count above 0 holds [`PENDING_SEEN`] and is never current, whatever the order of its
/// reads, so one read inside the window cannot come back in a later window at the same
/// count. The counts are apart from the versions, which only grow.
#[derive(Debug)]
pub struct DerivedPending {
    versions: Arc<Versions>,
    columns: Vec<(TableHandle, Arc<SliceColumn>)>,
}

impl DerivedPending {
    /// Raises the pending count of each derived column named (by `names`, registered on
    /// the table; others are left to the write's own bumps).
    pub fn mark(versions: Arc<Versions>, tables: &[(TableHandle, Vec<String>)]) -> Self {
        let mut columns = Vec::new();
        for (t, names) in tables {
            let cols = t.columns.read().unwrap_or_else(|e| e.into_inner());
            for c in cols
                .iter()
                .filter(|c| c.derived && names.iter().any(|n| *n == *c.name))
            {
                c.pending.fetch_add(1, Ordering::AcqRel);
                columns.push((t.clone(), c.clone()));
            }
        }
        DerivedPending { versions, columns }
    }

    /// The derived columns marked, by table and name.
    pub fn columns(&self) -> impl Iterator<Item = (&TableHandle, &str)> {
        self.columns.iter().map(|(t, c)| (t, &*c.name))
    }

    /// Bumps what `keys(table, column)` names (None: every derived slice of the column),
    /// then clears. Returns the slice counters bumped.
    pub fn finish(mut self, keys: impl Fn(&TableVersion, &str) -> Option<Vec<String>>) -> u64 {
        let mut n = 0;
        for (t, c) in std::mem::take(&mut self.columns) {
            let k = keys(&t, &c.name);
            n += self.versions.bump_derived(&t, &c, k.as_deref());
            c.pending.fetch_sub(1, Ordering::AcqRel);
        }
        n
    }
}

impl Drop for DerivedPending {
    fn drop(&mut self) {
        for (t, c) in std::mem::take(&mut self.columns) {
            self.versions.bump_derived(&t, &c, None);
            c.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child write's derived slices held pending past its OK (`DerivedPending`): what an
    /// entry of a derived slice is, by when its stamps were read. One row per case; the
    /// steps run in order on a fresh registry.
    #[test]
    fn derived_pending_marks() {
        #[derive(Debug, Clone, Copy)]
        enum S {
            /// Read stamps `n` of derived slice `k` (or of a plain column's slice when
            /// `k` is "plain").
            Capture(usize, &'static str),
            /// Write `w` marks the derived column pending.
            Mark(usize),
            /// Write `w`'s lookup answered: bump slice `k`, clear.
            Finish(usize, &'static str),
            /// Write `w`'s lookup never answered (dropped): every derived slice, clear.
            Fail(usize),
            /// A write with rows unknown in the derived column, meanwhile.
            Unknown,
            /// Whether stamps `n` are current, and valid in a snapshot taken now.
            Current(usize, bool),
        }
        use S::*;
        let rows: &[(&str, &[S])] = &[
            (
                "read before: not served while pending, again after (another slice bumped)",
                &[
                    Capture(0, "r1"),
                    Mark(0),
                    Current(0, false),
                    Finish(0, "r2"),
                    Current(0, true),
                ],
            ),
            (
                "read before, its own slice bumped by the answer",
                &[
                    Capture(0, "r1"),
                    Mark(0),
                    Finish(0, "r1"),
                    Current(0, false),
                ],
            ),
            (
                "filled inside the window: never served, not in a later window at the same count",
                &[
                    Mark(0),
                    Capture(0, "r1"),
                    Current(0, false),
                    Finish(0, "r2"),
                    Current(0, false),
                    Mark(1),
                    Current(0, false),
                    Finish(1, "r2"),
                    Current(0, false),
                ],
            ),
            (
                "read after the window: served",
                &[Mark(0), Finish(0, "r2"), Capture(0, "r1"), Current(0, true)],
            ),
            (
                "two writes overlapping: served only when both ended",
                &[
                    Capture(0, "r1"),
                    Mark(0),
                    Mark(1),
                    Finish(0, "r2"),
                    Current(0, false),
                    Finish(1, "r3"),
                    Current(0, true),
                ],
            ),
            (
                "the lookup failed: every derived slice bumped, then cleared",
                &[
                    Capture(0, "r1"),
                    Capture(1, "r2"),
                    Mark(0),
                    Fail(0),
                    Current(0, false),
                    Current(1, false),
                    Capture(2, "r1"),
                    Current(2, true),
                ],
            ),
            (
                "a bump made while pending is not lost when it clears",
                &[
                    Capture(0, "r1"),
                    Mark(0),
                    Unknown,
                    Finish(0, "r2"),
                    Current(0, false),
                ],
            ),
            (
                "a plain column's entries never wait for a derived column",
                &[
                    Capture(0, "plain"),
                    Mark(0),
                    Current(0, true),
                    Finish(0, "r2"),
                ],
            ),
        ];
        for (why, steps) in rows {
            let v = Arc::new(Versions::new());
            let t = v.table("db", "orders");
            let name = derived_name();
            let derived = v.register(&t, &name);
            let plain = v.register(&t, "status");
            let mut stamps: Vec<Option<Stamps>> = vec![None, None, None];
            let mut writes: Vec<Option<DerivedPending>> = vec![None, None];
            for (i, step) in steps.iter().enumerate() {
                match *step {
                    Capture(n, k) => {
                        let (col, k) = if k == "plain" {
                            (plain.clone(), "open")
                        } else {
                            (derived.clone(), k)
                        };
                        let plan = SlicePlan {
                            table: t.clone(),
                            slices: vec![Versions::slice_index(&t, &col.name, k)],
                            column: col,
                            by_columns: false,
                            slice_columns: Vec::new(),
                        };
                        let cols = ColumnReads::default();
                        stamps[n] = Some(Stamps::capture_sliced(&v, &[], &[plan], &cols));
                    }
                    Mark(w) => {
                        let marked = [(t.clone(), vec![name.clone()])];
                        writes[w] = Some(DerivedPending::mark(v.clone(), &marked));
                    }
                    Finish(w, k) => {
                        let p = writes[w].take().unwrap();
                        p.finish(|_, _| Some(vec![k.to_string()]));
                    }
                    Fail(w) => drop(writes[w].take()),
                    Unknown => {
                        v.bump_rows(&t, &[("status".to_string(), vec!["open".into()])]);
                    }
                    Current(n, want) => {
                        let s = stamps[n].as_ref().unwrap();
                        assert_eq!(s.is_current(&v), want, "{why}: step {i}, current");
                        // Kept on a lookup only when the pending counts alone hold it back.
                        let held = !want && s.held_by_pending(&v);
                        let only_pending = !want && derived.pending() > 0 && {
                            let mut cleared = s.clone();
                            cleared.checks.iter_mut().for_each(|c| {
                                if matches!(c.counter, Counter::Pending(_)) && c.at == 0 {
                                    c.at = derived.pending();
                                }
                            });
                            cleared.is_current(&v)
                        };
                        assert_eq!(held, only_pending, "{why}: step {i}, held");
                        let snap = v.snapshot();
                        assert_eq!(s.valid_in(&v, &snap), want, "{why}: step {i}, snapshot");
                    }
                }
            }
            drop(writes);
            assert_eq!(derived.pending(), 0, "{why}: every mark cleared");
        }
    }

    /// The derived column of `orders.customer_id` by `customers.region`.
    fn derived_name() -> String {
        let key = crate::cache::fkmap::MapKey {
            schema: "db".into(),
            table: "customers".into(),
            pk: "id".into(),
            col: "region".into(),
        };
        crate::cache::fkmap::derived_column("customer_id", &key)
    }

    /// The pending count is apart from the versions, which stay monotonic: the patch
    /// window's test of stamps re-read (`Stamps::moved_only_by`) never takes a stamp read
    /// inside a window for one read outside.
    #[test]
    fn pending_stamps_are_never_moved_only_by_own_bumps() {
        let v = Arc::new(Versions::new());
        let t = v.table("db", "orders");
        let name = derived_name();
        let col = v.register(&t, &name);
        let plan = SlicePlan {
            table: t.clone(),
            slices: vec![Versions::slice_index(&t, &name, "r1")],
            column: col,
            by_columns: false,
            slice_columns: Vec::new(),
        };
        let checked = Stamps::capture_sliced(&v, &[], &[plan], &ColumnReads::default());
        let w = v.patch_window().unwrap();
        let p = DerivedPending::mark(v.clone(), &[(t.clone(), vec![name.clone()])]);
        v.bump_rows(&t, &[(name.clone(), Vec::new())]);
        let own = v.own_range(w).unwrap();
        let now = checked.recapture(&v);
        assert!(!now.moved_only_by(&checked, own), "read inside the window");
        drop(p);
    }

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

    /// Every bump reaches the sink before it moves a local version: a reader whose stamps
    /// already include a bump then finds it counted in L2's queue (`L2::queued`), or it
    /// could copy an L2 entry that predates the bump into L1 under stamps that include it.
    #[test]
    fn the_sink_hears_of_every_bump_before_a_local_version_moves() {
        struct Probe {
            versions: std::sync::OnceLock<Arc<Versions>>,
            seen: std::sync::Mutex<Vec<u64>>,
        }
        impl Probe {
            fn note(&self) {
                let v = self.versions.get().expect("set").seq();
                self.seen.lock().unwrap().push(v);
            }
        }
        impl BumpSink for Arc<Probe> {
            fn table(&self, _: &str, _: &str) {
                self.note();
            }
            fn rows(&self, _: &str, _: &str, _: &[(String, Vec<u32>)]) {
                self.note();
            }
            fn schema(&self, _: &str) {
                self.note();
            }
            fn all(&self) {
                self.note();
            }
            fn gap(&self) {
                self.note();
            }
        }
        let v = Arc::new(Versions::new());
        let probe = Arc::new(Probe {
            versions: std::sync::OnceLock::new(),
            seen: std::sync::Mutex::new(Vec::new()),
        });
        let _ = probe.versions.set(v.clone());
        assert!(v.set_sink(Arc::new(probe.clone())));
        let t = v.table("db", "t");
        let known: Vec<(String, Vec<String>)> = vec![("id".to_string(), vec!["1".to_string()])];
        let bumps: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| v.bump(&t)),
            Box::new(|| {
                v.bump_rows(&t, &known);
            }),
            Box::new(|| {
                v.bump_columns(&t, &["v".to_string()], Some(&known));
            }),
            Box::new(|| {
                v.bump_columns(&t, &["v".to_string()], None);
            }),
            Box::new(|| {
                v.bump_schema("db");
            }),
            Box::new(|| v.bump_all()),
            Box::new(|| v.bump_all_gap()),
        ];
        for (i, bump) in bumps.iter().enumerate() {
            let before = v.seq();
            bump();
            let seen = probe.seen.lock().unwrap().pop();
            assert_eq!(
                seen,
                Some(before),
                "bump {i}: the sink heard of it after it moved"
            );
            assert!(v.seq() > before, "bump {i} moved nothing");
        }
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
        assert!(s.unchanged_since(&v, snap));
        v.bump(&a);
        assert!(!s.unchanged_since(&v, snap));
        assert!(s.unchanged_since(&v, v.seq()));
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
        assert!(
            old.unchanged_since(&v, snap.seq),
            "the trap valid_in avoids"
        );
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

    fn sliced(v: &Versions, t: &TableHandle, col: &str, keys: &[&str]) -> Stamps {
        let column = v.register(t, col);
        let slices: Vec<u32> = keys
            .iter()
            .map(|k| Versions::slice_index(t, col, k))
            .collect();
        Stamps::capture_sliced(
            v,
            &[],
            &[SlicePlan {
                table: t.clone(),
                column,
                slice_columns: slices
                    .iter()
                    .map(|&i| Versions::slice_column_index(t, col, i, ANY_COLUMN))
                    .collect(),
                slices,
                by_columns: false,
            }],
            &ColumnReads::default(),
        )
    }

    #[test]
    fn known_rows_bump_only_their_slices() {
        let v = Versions::new();
        let t = v.table("db", "orders");
        let five = sliced(&v, &t, "customer_id", &["i5"]);
        let six = sliced(&v, &t, "customer_id", &["i6"]);
        let whole = Stamps::capture(&v, std::slice::from_ref(&t));
        let known = |vals: &[&str]| {
            vec![(
                "customer_id".to_string(),
                vals.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )]
        };
        assert_eq!(v.bump_rows(&t, &known(&["i5"])), 1);
        assert!(!five.is_current(&v));
        assert!(six.is_current(&v), "another slice's entry stays");
        assert!(!whole.is_current(&v), "whole-table entries see every write");
        // Rows whose column value is not named: every slice of that column.
        v.bump_rows(&t, &[]);
        assert!(!six.is_current(&v));
        // A column registered later: earlier writes did not bump it, later ones do.
        let by_id = sliced(&v, &t, "id", &["i1"]);
        let six = sliced(&v, &t, "customer_id", &["i6"]);
        v.bump_rows(&t, &known(&["i7"]));
        assert!(!by_id.is_current(&v), "id unknown for that write");
        assert!(six.is_current(&v));
        // Unknown rows: everything of the table.
        v.bump(&t);
        assert!(!six.is_current(&v));
    }

    #[test]
    fn writes_before_registration_count_for_snapshots() {
        let v = Versions::new();
        let t = v.table("db", "t");
        let snap = v.snapshot();
        // A write after the snapshot, before any entry sliced on `id`.
        v.bump_rows(&t, &[("id".to_string(), vec!["i1".to_string()])]);
        let s = sliced(&v, &t, "id", &["i1"]);
        assert!(s.is_current(&v));
        assert!(!s.valid_in(&v, &snap), "the row changed after the snapshot");
        assert!(s.valid_in(&v, &v.snapshot()));
    }

    #[test]
    fn sliced_stamps_in_snapshots() {
        let v = Versions::new();
        let t = v.table("db", "orders");
        let snap = v.snapshot();
        let s = sliced(&v, &t, "c", &["i1"]);
        assert!(s.valid_in(&v, &snap));
        v.bump_rows(&t, &[("c".to_string(), vec!["i2".to_string()])]);
        assert!(s.valid_in(&v, &snap), "another slice changed");
        assert!(
            !snap.unchanged(&v, std::slice::from_ref(&t)),
            "table-level check stays coarse"
        );
        v.bump_rows(&t, &[("c".to_string(), vec!["i1".to_string()])]);
        assert!(!s.valid_in(&v, &snap));
        assert!(!s.unchanged_since(&v, snap.seq));
    }

    /// Stamps of a read of `t` whose columns read are `cols`, whole or sliced on `col = key`.
    fn by_columns(
        v: &Versions,
        t: &TableHandle,
        cols: &[&str],
        slice: Option<(&str, &str)>,
    ) -> Stamps {
        let reads = ColumnReads {
            tables: if slice.is_none() {
                vec![t.clone()]
            } else {
                Vec::new()
            },
            indexes: cols
                .iter()
                .map(|c| match slice {
                    None => Versions::column_index(t, c),
                    Some((col, _)) => Versions::column_slice_index(t, col, c),
                })
                .collect(),
        };
        match slice {
            None => Stamps::capture_sliced(v, std::slice::from_ref(t), &[], &reads),
            Some((col, key)) => {
                let column = v.register(t, col);
                let slice = Versions::slice_index(t, col, key);
                let plan = SlicePlan {
                    table: t.clone(),
                    column,
                    slices: vec![slice],
                    by_columns: true,
                    slice_columns: cols
                        .iter()
                        .map(|c| Versions::slice_column_index(t, col, slice, c))
                        .collect(),
                };
                Stamps::capture_sliced(v, &[], std::slice::from_ref(&plan), &reads)
            }
        }
    }

    #[test]
    fn column_known_updates_spare_other_columns() {
        let v = Versions::new();
        let t = v.table("db", "products");
        let s = |c: &[&str]| c.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let search = by_columns(&v, &t, &["id", "name", "price"], None);
        let page = by_columns(&v, &t, &["id", "name", "stock"], Some(("id", "i5")));
        let category = by_columns(
            &v,
            &t,
            &["id", "name", "category_id"],
            Some(("category_id", "i3")),
        );
        let unknown_cols = Stamps::capture(&v, std::slice::from_ref(&t));
        let unknown_sliced = sliced(&v, &t, "category_id", &["i3"]);
        let snap = v.snapshot();
        // UPDATE products SET stock = … WHERE id = 5: id named, category_id not.
        let known = vec![("id".to_string(), vec!["i5".to_string()])];
        v.bump_columns(&t, &s(&["stock"]), Some(&known));
        assert!(search.is_current(&v), "reads no stock");
        assert!(
            category.is_current(&v),
            "reads no stock, its slice column unknown"
        );
        assert!(category.valid_in(&v, &snap));
        assert!(!page.is_current(&v), "reads stock");
        let other_page = by_columns(&v, &t, &["id", "stock"], Some(("id", "i6")));
        v.bump_columns(&t, &s(&["stock"]), Some(&known));
        assert!(other_page.is_current(&v), "reads stock, but of another row");
        // Named in the slice column it leaves alone (a row image names every column): that
        // slice's entries reading the column go, the others' stay.
        let in_three = vec![
            ("id".to_string(), vec!["i7".to_string()]),
            ("category_id".to_string(), vec!["i3".to_string()]),
        ];
        let cat_stock = by_columns(
            &v,
            &t,
            &["category_id", "stock"],
            Some(("category_id", "i3")),
        );
        let cat4_stock = by_columns(
            &v,
            &t,
            &["category_id", "stock"],
            Some(("category_id", "i4")),
        );
        v.bump_columns(&t, &s(&["stock"]), Some(&in_three));
        assert!(category.is_current(&v), "reads no stock");
        assert!(!cat_stock.is_current(&v));
        assert!(cat4_stock.is_current(&v), "another category");
        // Moved out of category 3 into 4, named: both slices.
        let moved = vec![(
            "category_id".to_string(),
            vec!["i3".to_string(), "i4".to_string()],
        )];
        let cat3 = by_columns(&v, &t, &["id", "category_id"], Some(("category_id", "i3")));
        let cat4 = by_columns(&v, &t, &["id", "category_id"], Some(("category_id", "i4")));
        let cat5 = by_columns(&v, &t, &["id", "category_id"], Some(("category_id", "i5")));
        v.bump_columns(&t, &s(&["category_id"]), Some(&moved));
        assert!(!cat3.is_current(&v) && !cat4.is_current(&v));
        assert!(cat5.is_current(&v), "neither before nor after");
        assert!(!unknown_cols.is_current(&v), "columns unknown: every write");
        assert!(
            !unknown_sliced.is_current(&v),
            "columns unknown: as a bump_rows"
        );
        let unknown_page = sliced(&v, &t, "id", &["i5"]);
        v.bump_columns(&t, &s(&["stock"]), Some(&known));
        assert!(
            !unknown_page.is_current(&v),
            "columns unknown, its slice named"
        );
        // The same with rows unknown.
        let category = by_columns(
            &v,
            &t,
            &["id", "name", "category_id"],
            Some(("category_id", "i3")),
        );
        let page = by_columns(&v, &t, &["id", "name", "stock"], Some(("id", "i6")));
        v.bump_columns(&t, &s(&["stock"]), None);
        assert!(search.is_current(&v) && category.is_current(&v));
        assert!(!page.is_current(&v));
        // A column read: gone, whatever its rows.
        v.bump_columns(&t, &s(&["price"]), None);
        assert!(!search.is_current(&v));
        // Moving a row to another category: the slice column is read by its entries.
        v.bump_columns(&t, &s(&["category_id"]), Some(&known));
        assert!(!category.is_current(&v));
        // Any other write reaches column-aware entries: inserts (rows), unknown writes.
        let search = by_columns(&v, &t, &["id", "name", "price"], None);
        let category = by_columns(&v, &t, &["id", "category_id"], Some(("category_id", "i3")));
        v.bump_rows(&t, &[("id".to_string(), vec!["i9".to_string()])]);
        assert!(!search.is_current(&v), "a new row");
        assert!(!category.is_current(&v), "category_id not named");
        let category = by_columns(&v, &t, &["id", "category_id"], Some(("category_id", "i3")));
        v.bump(&t);
        assert!(!category.is_current(&v));
        // Counting no columns (COUNT(*)): only row changes matter.
        let count = by_columns(&v, &t, &[], None);
        v.bump_columns(&t, &s(&["stock", "price"]), None);
        assert!(count.is_current(&v));
        let snap = v.snapshot();
        v.bump_columns(&t, &s(&["stock"]), None);
        assert!(count.valid_in(&v, &snap));
        assert!(
            !snap.unchanged(&v, std::slice::from_ref(&t)),
            "table-level stays coarse"
        );
    }

    #[test]
    fn column_bumps_in_snapshots() {
        let v = Versions::new();
        let t = v.table("db", "t");
        let snap = v.snapshot();
        let e = by_columns(&v, &t, &["a"], None);
        assert!(e.valid_in(&v, &snap));
        v.bump_columns(&t, &["a".to_string()], None);
        let e2 = by_columns(&v, &t, &["a"], None);
        assert!(e2.is_current(&v));
        assert!(!e2.valid_in(&v, &snap), "a changed after the snapshot");
        assert!(!e2.unchanged_since(&v, snap.seq));
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

    /// A patch's window holds only when every bump inside it was the patching thread's
    /// own: another thread's bump, or one in flight when it opened, drops the patch.
    #[test]
    fn a_patch_window_sees_every_other_bump() {
        let v = Arc::new(Versions::new());
        let t = v.table("db", "t");
        let u = v.table("db", "u");
        // Own bumps only (a write's several bumps too): the window holds.
        let w = v.patch_window().expect("nothing in flight");
        v.bump(&t);
        v.bump_rows(&t, &[("a".to_string(), vec!["1".to_string()])]);
        assert!(v.window_holds(w));
        // Nothing of ours, nothing of theirs: holds (a patch whose write bumped nothing).
        let w = v.patch_window().unwrap();
        assert!(v.window_holds(w));
        // Another thread's bump of any table inside the window: refused.
        let w = v.patch_window().unwrap();
        v.bump(&t);
        let (v2, u2) = (v.clone(), u.clone());
        std::thread::spawn(move || v2.bump(&u2)).join().unwrap();
        assert!(!v.window_holds(w));
        // Another thread's bump all: refused.
        let w = v.patch_window().unwrap();
        let v2 = v.clone();
        std::thread::spawn(move || v2.bump_all()).join().unwrap();
        assert!(!v.window_holds(w));
        // A bump in flight (taken, not done) when the window would open: no window.
        v.take_seq();
        assert!(v.patch_window().is_none());
        v.bump_done();
        assert!(v.patch_window().is_some());
    }

    /// After a window another thread's bumps fell in: which re-read stamps still differ
    /// from the checked ones by the patching thread's own bumps only. One row per kind of
    /// other bump, against stamps of `t` (which the own write bumps) and of `u` (which it
    /// does not): (what, the other bump, kept by `own_range`, `t`'s kept, `u`'s kept).
    #[test]
    fn a_patch_keeps_what_only_its_own_bumps_moved() {
        type Other = fn(&Arc<Versions>, &TableHandle, &TableHandle);
        fn elsewhere(v: &Arc<Versions>, f: impl FnOnce(&Versions) + Send) {
            std::thread::scope(|s| {
                s.spawn(|| f(v));
            });
        }
        let rows: &[(&str, bool, Other, bool, bool, bool)] = &[
            // (what, before the own bump?, the other bump, range, t kept, u kept)
            ("no other bump", false, |_, _, _| {}, true, true, true),
            (
                "another table's bump after the own one",
                false,
                |v, _, u| elsewhere(v, |v| v.bump(u)),
                true,
                true,
                false,
            ),
            (
                "the same table's bump after the own one: above it",
                false,
                |v, t, _| elsewhere(v, |v| v.bump(t)),
                true,
                false,
                true,
            ),
            (
                "a bump all after the own one",
                false,
                |v, _, _| elsewhere(v, |v| v.bump_all()),
                true,
                false,
                false,
            ),
            (
                "another table's bump before the own one: among the own values",
                true,
                |v, _, u| elsewhere(v, |v| v.bump(u)),
                false,
                false,
                false,
            ),
            (
                "the same table's bump before the own one: hidden under it",
                true,
                |v, t, _| elsewhere(v, |v| v.bump(t)),
                false,
                false,
                false,
            ),
        ];
        for (what, before, other, range, t_kept, u_kept) in rows {
            let v = Arc::new(Versions::new());
            let (t, u) = (v.table("db", "t"), v.table("db", "u"));
            v.bump(&t);
            v.bump(&u);
            let (st, su) = (
                Stamps::capture(&v, std::slice::from_ref(&t)),
                Stamps::capture(&v, std::slice::from_ref(&u)),
            );
            let w = v.patch_window().expect("nothing in flight");
            if *before {
                other(&v, &t, &u);
            }
            v.bump(&t);
            if !*before {
                other(&v, &t, &u);
            }
            let own = v.own_range(w);
            assert_eq!(own.is_some(), *range, "{what}");
            let kept = |s: &Stamps| own.is_some_and(|o| s.recapture(&v).moved_only_by(s, o));
            assert_eq!(kept(&st), *t_kept, "{what}: t");
            assert_eq!(kept(&su), *u_kept, "{what}: u");
        }
        // A bump in flight after the own one (its value taken, its counter not yet moved):
        // the stamps re-read before it lands are kept, and go stale when it lands.
        let v = Arc::new(Versions::new());
        let t = v.table("db", "t");
        let s = Stamps::capture(&v, std::slice::from_ref(&t));
        let w = v.patch_window().unwrap();
        v.bump(&t);
        let late = std::thread::scope(|x| x.spawn(|| v.take_seq()).join().unwrap());
        let own = v
            .own_range(w)
            .expect("the other value is above the own one");
        let r = s.recapture(&v);
        assert!(r.moved_only_by(&s, own) && r.is_current(&v));
        t.version.fetch_max(late, Ordering::AcqRel);
        v.bump_done();
        assert!(!r.is_current(&v), "stale once it lands");
        // One taken before the own bump and landing after it hides under it: no range.
        let s = Stamps::capture(&v, std::slice::from_ref(&t));
        let w = v.patch_window().unwrap();
        let early = std::thread::scope(|x| x.spawn(|| v.take_seq()).join().unwrap());
        v.bump(&t);
        t.version.fetch_max(early, Ordering::AcqRel);
        v.bump_done();
        assert!(s.recapture(&v).is_current(&v));
        assert_eq!(v.own_range(w), None, "hidden: nothing kept");
    }

    /// Re-read stamps are current at once and stay so until the next bump.
    #[test]
    fn recaptured_stamps_are_current() {
        let v = Versions::new();
        let t = v.table("db", "t");
        let s = Stamps::capture(&v, std::slice::from_ref(&t));
        v.bump(&t);
        assert!(!s.is_current(&v));
        let r = s.recapture(&v);
        assert!(r.is_current(&v));
        v.bump(&t);
        assert!(!r.is_current(&v));
    }

    /// The lists' check as it was written before the flat array (#36): what `is_current`
    /// must keep saying, counter by counter.
    fn current_by_lists(s: &Stamps, v: &Versions) -> bool {
        s.epoch == v.epoch()
            && s.tables.iter().all(|(t, ver)| t.version() == *ver)
            && s.rows.iter().all(|(t, ver)| t.rows_version() == *ver)
            && s.columns.iter().all(|&(i, ver)| v.column_version(i) == ver)
            && s.sliced.iter().all(|st| {
                st.unknown_now() == st.unknown
                    && st.column_now() == st.column_version
                    && st.slices.iter().all(|&(i, ver)| v.slice_version(i) == ver)
            })
    }

    /// The flat checks hold every counter of the lists, and agree with them through every
    /// kind of bump, for every kind of stamps (whole, by columns, sliced, both).
    #[test]
    fn flat_checks_agree_with_the_lists() {
        let v = Versions::new();
        let t = v.table("db", "products");
        let u = v.table("db", "other");
        let s = |c: &[&str]| c.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let known = |col: &str, k: &str| vec![(col.to_string(), vec![k.to_string()])];
        let mut all: Vec<Stamps> = Vec::new();
        let capture = |all: &mut Vec<Stamps>| {
            all.push(Stamps::capture(&v, &[t.clone(), u.clone()]));
            all.push(by_columns(&v, &t, &["id", "name"], None));
            all.push(by_columns(&v, &t, &["id", "stock"], Some(("id", "i5"))));
            all.push(sliced(&v, &t, "category_id", &["i3", "i4"]));
            all.push(sliced(&v, &u, "id", &["i1"]).recapture(&v));
        };
        capture(&mut all);
        let bumps: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| {
                v.bump_columns(&t, &s(&["stock"]), Some(&known("id", "i6")));
            }),
            Box::new(|| {
                v.bump_columns(&t, &s(&["stock"]), Some(&known("id", "i5")));
            }),
            Box::new(|| {
                v.bump_columns(&t, &s(&["name"]), None);
            }),
            Box::new(|| {
                v.bump_rows(&t, &known("category_id", "i4"));
            }),
            Box::new(|| {
                v.bump_rows(&u, &known("id", "i2"));
            }),
            Box::new(|| {
                v.bump_rows(&u, &[]);
            }),
            Box::new(|| v.bump(&t)),
            Box::new(|| v.bump_all()),
        ];
        for bump in &bumps {
            for st in &all {
                let lists = st.tables.len()
                    + st.rows.len()
                    + st.columns.len()
                    + st.sliced.iter().map(|x| 2 + x.slices.len()).sum::<usize>();
                assert_eq!(st.checks.len(), lists);
                assert_eq!(st.is_current(&v), current_by_lists(st, &v), "{st:?}");
            }
            bump();
            capture(&mut all);
        }
        assert!(all.iter().any(|st| st.is_current(&v)));
        assert!(all.iter().any(|st| !st.is_current(&v)));
    }
}
