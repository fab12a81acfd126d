//! The one place invalidation is applied. Every source (writes through qcache, transaction
//! ends, the binlog tail, L2's channel, DDL and the catalog, admin statements) describes what
//! changed as an [`Invalidation`] value and hands it to [`Invalidator::apply`], which moves the
//! versions (`cache::versions`), keeps the parent-row maps right (`cache::fkmap`), counts it
//! under its source and tells L2 of it unless L2 is where it came from.
//!
//! Why one place: each source used to bump by hand, and each had to remember the rules that
//! are not about its own event (drop parent mappings before a row-level bump, do not echo
//! L2's bumps back, count under the right label). Here they are properties of the value.

use std::sync::Arc;

use crate::cache::fkmap;
use crate::cache::versions::{KnownRows, TableVersion, Versions};
use crate::observe::stats::{CacheStats, InvalidationSource};
use crate::policy::privileges::PrivilegeChange;
use crate::policy::stale::Dropped;

/// A table by name (schema, name), lower-cased.
pub type TableName = (String, String);

/// Who says something changed. What a bump is counted as, whether L2 is told of it and
/// whether child rows are named through the parent maps follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A source of this instance (writes through qcache, transaction ends, the binlog tail,
    /// the catalog, operators, privilege changes), counted under its `Qcache_invalidations_*`
    /// label. Adding a source adds its label there (`observe::stats`).
    Here(InvalidationSource),
    /// Another instance's bump, or a loss of bumps, learned from L2's channel; counted by
    /// L2 itself (`qcache_l2_*`).
    L2,
}

impl Source {
    /// The `Qcache_invalidations_*` counter it is counted under.
    pub fn counted_as(self) -> Option<InvalidationSource> {
        match self {
            Source::Here(label) => Some(label),
            Source::L2 => None,
        }
    }

    /// Whether L2 is told of the bump (`Versions`' sink). Not for what came from L2: every
    /// instance would echo every bump back to the fleet.
    pub fn publishes(self) -> bool {
        self != Source::L2
    }

    /// Whether a write's known rows of a child table name its derived slices through the
    /// parent maps (`cache::fkmap`): only the binlog's. A write through qcache asks the
    /// server for its parents instead (`engine::fkslices`), since a mapping may still name
    /// a row's old value while the binlog has not delivered its move.
    fn derives_through_parent_maps(self) -> bool {
        self == Source::Here(InvalidationSource::Binlog)
    }
}

/// One thing that changed.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// Every row of a table: every entry reading it.
    Table(TableName),
    /// Only the rows `known` names (granularity row): their slices.
    Rows {
        table: TableName,
        known: Arc<KnownRows>,
    },
    /// An UPDATE that changed only the columns `set`, of the rows `known` names (None: rows
    /// unknown) (`Versions::bump_columns`).
    Columns {
        table: TableName,
        set: Arc<[String]>,
        known: Option<Arc<KnownRows>>,
    },
    /// Rows named by slice counter indexes per column, as L2's channel carries another
    /// instance's write (`Versions::bump_rows_quiet`); a column not listed is unknown.
    Slices {
        table: TableName,
        indexes: Vec<(String, Vec<u32>)>,
    },
    /// Every table of a schema.
    Schema(String),
    /// Everything.
    Everything,
    /// Everything, because the binlog stream lost events: L2 decides whether the fleet's
    /// entries go too (`Versions::bump_all_gap`).
    Gap,
    /// What some users may read changed (`Versions::apply_privileges`).
    Privileges(PrivilegeChange),
}

/// What a source says changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalidation {
    pub source: Source,
    /// Tables whose existing rows may have moved (updated or deleted rows the write names,
    /// another instance's write): their parent-row mappings are forgotten before anything
    /// is bumped, so that no child row of the same change is named through a stale one.
    /// Whole-table, schema and global bumps forget them on their own (`Versions::bump`).
    pub moved: Vec<TableName>,
    /// In the order it is applied.
    pub what: Vec<What>,
    /// Its table and row bumps are changes of rows (DML acknowledged by the server, a
    /// transaction's end, the binlog's row and DML events): entries they outdate may be
    /// served stale under a `max_stale` rule. False (the default) for everything else, and
    /// for a DDL's own bump: fail closed (`policy::stale`).
    pub data: bool,
}

impl Invalidation {
    pub fn new(source: Source, what: Vec<What>) -> Invalidation {
        Invalidation {
            source,
            moved: Vec::new(),
            what,
            data: false,
        }
    }

    /// This invalidation as a change of rows ([`data`](Self::data)).
    pub fn of_rows(mut self) -> Invalidation {
        self.data = true;
        self
    }

    pub fn one(source: Source, what: What) -> Invalidation {
        Invalidation::new(source, vec![what])
    }

    pub fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.what.is_empty()
    }
}

/// What kind of invalidation `what` is when it is no change of rows (`policy::stale`):
/// None only for a table or rows bumped by an invalidation marked [`Invalidation::data`]
/// from this instance, and not of a privilege table.
fn hard_kind(source: Source, data: bool, what: &What) -> Option<Dropped> {
    let label = match source {
        Source::L2 => return Some(Dropped::Shared),
        Source::Here(label) => label,
    };
    let of_rows = matches!(
        what,
        What::Table(_) | What::Rows { .. } | What::Columns { .. } | What::Slices { .. }
    );
    let privilege_table = match what {
        What::Table(t)
        | What::Rows { table: t, .. }
        | What::Columns { table: t, .. }
        | What::Slices { table: t, .. } => {
            crate::policy::privileges::is_privilege_table(&t.0, &t.1)
        }
        _ => false,
    };
    if data && of_rows && !privilege_table {
        return None;
    }
    Some(match (what, label) {
        (What::Gap, _) => Dropped::Gap,
        (What::Privileges(_), _) | (_, InvalidationSource::Privileges) => Dropped::Privileges,
        _ if privilege_table => Dropped::Privileges,
        (_, InvalidationSource::Flush) => Dropped::Flush,
        (_, InvalidationSource::Conservative) => Dropped::Conservative,
        (What::Everything, _) => Dropped::Conservative,
        (What::Schema(_), _) if data => Dropped::Conservative,
        // A table or schema bumped by the catalog, or by a write not marked as a change
        // of rows: a DDL's own bump, through qcache or in the binlog.
        _ => Dropped::Catalog,
    })
}

/// Applies invalidations to one instance's versions and counters. Cheap to clone; every
/// source holds one (`Shared::invalidator`).
#[derive(Clone, Debug)]
pub struct Invalidator {
    versions: Arc<Versions>,
    stats: Arc<CacheStats>,
}

impl Invalidator {
    pub fn new(versions: Arc<Versions>, stats: Arc<CacheStats>) -> Invalidator {
        Invalidator { versions, stats }
    }

    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// Applies `inv`. Returns the number of tables bumped (a schema counts the tables the
    /// registry knows in it; everything counts one), what the binlog tail reports.
    pub fn apply(&self, inv: &Invalidation) -> u64 {
        for (s, t) in &inv.moved {
            self.versions.parents.drop_table(s, t);
        }
        inv.what
            .iter()
            .map(|w| match hard_kind(inv.source, inv.data, w) {
                None => self.apply_one(inv.source, w),
                Some(kind) => {
                    let v = &self.versions;
                    v.begin_hard(kind);
                    let n = self.apply_one(inv.source, w);
                    self.mark_hard(w, kind);
                    v.end_hard();
                    n
                }
            })
            .sum()
    }

    /// Marks what `what` bumped as outdated by an invalidation of `kind`
    /// (`Versions::mark_hard`); an epoch bump needs no mark (`Stamps::dropped`).
    fn mark_hard(&self, what: &What, kind: Dropped) {
        let v = &self.versions;
        match what {
            What::Table(t)
            | What::Rows { table: t, .. }
            | What::Columns { table: t, .. }
            | What::Slices { table: t, .. } => {
                let t = v.table(&t.0, &t.1);
                v.mark_hard(&t, kind);
                if t.is_privilege_table() {
                    self.mark_privilege_stamps(&PrivilegeChange::privilege_table());
                }
            }
            What::Schema(s) => v.mark_hard_schema(s, kind),
            What::Everything | What::Gap => {}
            What::Privileges(c) => self.mark_privilege_stamps(c),
        }
    }

    fn mark_privilege_stamps(&self, c: &PrivilegeChange) {
        let v = &self.versions;
        for (s, n) in crate::policy::privileges::change_stamps(c) {
            v.mark_hard(&v.table(&s, &n), Dropped::Privileges);
        }
    }

    fn apply_one(&self, source: Source, what: &What) -> u64 {
        let v = &self.versions;
        let publish = source.publishes();
        let table = |(s, n): &TableName| v.table(s, n);
        let slices = match what {
            What::Table(t) => {
                self.bump_table(&table(t), publish);
                None
            }
            // Keys are what local sources name; a quiet source naming them (none does)
            // gets the whole table, never a publication.
            What::Rows { table: t, .. } | What::Columns { table: t, .. } if !publish => {
                self.bump_table(&table(t), false);
                None
            }
            What::Rows { table: t, known } => {
                let t = table(t);
                let known = self.derived(source, &t, known);
                Some(v.bump_rows(&t, &known))
            }
            What::Columns {
                table: t,
                set,
                known,
            } => {
                let t = table(t);
                let known = known.as_ref().map(|k| self.derived(source, &t, k));
                let n = v.bump_columns(&t, set, known.as_deref());
                self.stats.column_write();
                Some(n)
            }
            What::Slices { table: t, indexes } => {
                let lookup = |c: &str| indexes.iter().find(|(k, _)| k == c).map(|(_, i)| i.clone());
                Some(v.bump_rows_quiet(&table(t), lookup))
            }
            What::Schema(s) => {
                let n = if publish {
                    v.bump_schema(s)
                } else {
                    v.bump_schema_quiet(s)
                };
                self.count(source, None);
                return n as u64;
            }
            What::Everything | What::Gap if !publish => {
                v.bump_all_quiet();
                None
            }
            What::Everything => {
                v.bump_all();
                None
            }
            What::Gap => {
                v.bump_all_gap();
                None
            }
            What::Privileges(c) if !publish => {
                // Learned from L2 with the bump of its stamps (bumped quietly beside it):
                // the generations only, never published back.
                v.apply_privileges_quiet(c);
                return 0;
            }
            What::Privileges(c) => {
                // Counted only when it reached a privilege stamp, as it always was.
                if v.apply_privileges(c) > 0 {
                    self.count(source, None);
                }
                return 0;
            }
        };
        self.count(source, slices);
        1
    }

    fn bump_table(&self, t: &TableVersion, publish: bool) {
        if publish {
            self.versions.bump(t);
        } else {
            self.versions.bump_quiet(t);
        }
    }

    fn count(&self, source: Source, slices: Option<u64>) {
        let Some(label) = source.counted_as() else {
            return;
        };
        self.stats.invalidation(label);
        if let Some(n) = slices {
            self.stats.slice_invalidations(n);
        }
    }

    /// `known` with, for a source that names child rows through the parent maps, the
    /// derived slices of `t`'s rows by the parents' values qcache knows as of now (after
    /// this invalidation's moved parents were forgotten).
    fn derived(&self, source: Source, t: &TableVersion, known: &Arc<KnownRows>) -> Arc<KnownRows> {
        if !source.derives_through_parent_maps() {
            return known.clone();
        }
        let registered: Vec<String> = t
            .slice_columns()
            .into_iter()
            .filter(|c| fkmap::parse_derived(c).is_some())
            .collect();
        if registered.is_empty() {
            return known.clone();
        }
        let parents = &self.versions.parents;
        let w = parents.window();
        let mut k = known.to_vec();
        k.extend(fkmap::derived_known(parents, &w, &registered, known));
        k.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::fkmap::{derived_column, MapKey};

    /// What an entry on `shop.orders` stamped before each invalidation says of it after:
    /// only a change of rows from this instance leaves it servable stale (`policy::stale`).
    #[test]
    fn only_changes_of_rows_leave_entries_servable_stale() {
        let orders = || ("shop".to_string(), "orders".to_string());
        let here = Source::Here;
        let rows: Vec<(&str, Invalidation, Option<Dropped>)> = vec![
            (
                "a DML write through qcache",
                Invalidation::one(here(InvalidationSource::Write), What::Table(orders())).of_rows(),
                None,
            ),
            (
                "a transaction's end",
                Invalidation::one(here(InvalidationSource::TxnEnd), What::Table(orders()))
                    .of_rows(),
                None,
            ),
            (
                "a binlog commit's rows",
                Invalidation::one(
                    here(InvalidationSource::Binlog),
                    What::Rows {
                        table: orders(),
                        known: vec![("id".to_string(), vec!["1".to_string()])].into(),
                    },
                )
                .of_rows(),
                None,
            ),
            (
                "a DDL's own bump (not marked as rows)",
                Invalidation::one(here(InvalidationSource::Write), What::Table(orders())),
                Some(Dropped::Catalog),
            ),
            (
                "a binlog DDL",
                Invalidation::one(here(InvalidationSource::Binlog), What::Table(orders())),
                Some(Dropped::Catalog),
            ),
            (
                "the catalog's reload",
                Invalidation::one(here(InvalidationSource::Catalog), What::Table(orders())),
                Some(Dropped::Catalog),
            ),
            (
                "QCACHE INVALIDATE TABLE",
                Invalidation::one(here(InvalidationSource::Flush), What::Table(orders())),
                Some(Dropped::Flush),
            ),
            (
                "a schema, even in a commit",
                Invalidation::one(
                    here(InvalidationSource::Binlog),
                    What::Schema("shop".to_string()),
                )
                .of_rows(),
                Some(Dropped::Conservative),
            ),
            (
                "an unanalysable write: everything",
                Invalidation::one(here(InvalidationSource::Conservative), What::Everything),
                Some(Dropped::Conservative),
            ),
            (
                "a binlog gap",
                Invalidation::one(here(InvalidationSource::Binlog), What::Gap),
                Some(Dropped::Gap),
            ),
            (
                "RESET QUERY CACHE",
                Invalidation::one(here(InvalidationSource::Flush), What::Everything),
                Some(Dropped::Flush),
            ),
            (
                "a bump learned from L2, even of rows",
                Invalidation::one(Source::L2, What::Table(orders())).of_rows(),
                Some(Dropped::Shared),
            ),
        ];
        for (rule, inv, want) in rows {
            let versions = Arc::new(Versions::new());
            let t = versions.table("shop", "orders");
            let stamps = crate::cache::Stamps::capture(&versions, std::slice::from_ref(&t));
            Invalidator::new(versions.clone(), Arc::new(CacheStats::new())).apply(&inv);
            assert!(!stamps.is_current(&versions), "{rule}: outdated");
            assert_eq!(stamps.dropped(&versions), want, "{rule}");
            // An entry stamped after a DDL is servable stale after the next change of rows.
            let after = crate::cache::Stamps::capture(&versions, std::slice::from_ref(&t));
            versions.bump(&t);
            if inv.what != vec![What::Gap] && inv.what != vec![What::Everything] {
                assert_eq!(after.dropped(&versions), None, "{rule}: then rows");
            }
        }
    }
    use crate::cache::versions::BumpSink;
    use std::sync::Mutex;

    /// What L2's sink was told.
    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl Heard {
        fn note(&self, what: String) {
            self.0.lock().unwrap().push(what);
        }
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl BumpSink for Arc<Heard> {
        fn table(&self, schema: &str, name: &str) {
            self.note(format!("table {schema}.{name}"));
        }
        fn rows(&self, schema: &str, name: &str, _: &[(String, Vec<u32>)]) {
            self.note(format!("rows {schema}.{name}"));
        }
        fn schema(&self, schema: &str) {
            self.note(format!("schema {schema}"));
        }
        fn all(&self) {
            self.note("all".into());
        }
        fn gap(&self) {
            self.note("gap".into());
        }
    }

    /// `shop.orders` is a parent: customer_id by id.
    fn orders_map() -> MapKey {
        MapKey {
            schema: "shop".into(),
            table: "orders".into(),
            pk: "id".into(),
            col: "customer_id".into(),
        }
    }

    fn t(s: &str, n: &str) -> TableName {
        (s.into(), n.into())
    }

    fn known(col: &str, keys: &[&str]) -> Arc<KnownRows> {
        vec![(
            col.to_string(),
            keys.iter().map(|k| k.to_string()).collect(),
        )]
        .into()
    }

    /// An instance with an L2 sink, two tables of `shop` and a parent mapping of orders 7
    /// (customer 42).
    fn instance() -> (Invalidator, Arc<Heard>) {
        let versions = Arc::new(Versions::new());
        let heard = Arc::new(Heard::default());
        assert!(versions.set_sink(Arc::new(heard.clone())));
        versions.table("shop", "orders");
        versions.table("shop", "customers");
        versions.parents.register(&orders_map());
        let w = versions.parents.window();
        assert!(versions
            .parents
            .learn(&w, &orders_map(), 7, Some("i42".into())));
        let inv = Invalidator::new(versions, Arc::new(CacheStats::new()));
        (inv, heard)
    }

    struct Row {
        rule: &'static str,
        inv: Invalidation,
        /// What `apply` returns: tables bumped.
        bumped: u64,
        /// What L2's sink hears; None: not checked (privilege stamps).
        heard: Option<&'static [&'static str]>,
        counted: &'static [(InvalidationSource, u64)],
        column_writes: u64,
        /// shop.orders' all-writes and unknown-rows versions, the epoch: moved or not.
        orders: (bool, bool),
        epoch: bool,
        /// orders' parent mapping is still there.
        mapping_kept: bool,
    }

    #[test]
    fn each_value_moves_counts_publishes_and_keeps_parent_maps_right() {
        use InvalidationSource as I;
        let orders = || t("shop", "orders");
        let rows = [
            Row {
                rule: "a written table: bumped, counted, published; rows unknown, so its \
                       parent mappings go",
                inv: Invalidation::one(
                    Source::Here(InvalidationSource::Write),
                    What::Table(orders()),
                ),
                bumped: 1,
                heard: Some(&["table shop.orders"]),
                counted: &[(I::Write, 1)],
                column_writes: 0,
                orders: (true, true),
                epoch: false,
                mapping_kept: false,
            },
            Row {
                rule: "a write's known rows: their slices; a move through qcache finishes \
                       through its own token, so the mappings stay",
                inv: Invalidation::one(
                    Source::Here(InvalidationSource::Write),
                    What::Rows {
                        table: orders(),
                        known: known("id", &["i1"]),
                    },
                ),
                bumped: 1,
                heard: Some(&["rows shop.orders"]),
                counted: &[(I::Write, 1)],
                column_writes: 0,
                orders: (true, false),
                epoch: false,
                mapping_kept: true,
            },
            Row {
                rule: "the binlog's known rows of a table whose rows moved: its mappings go \
                       before anything is bumped",
                inv: Invalidation {
                    source: Source::Here(InvalidationSource::Binlog),
                    moved: vec![orders()],
                    what: vec![What::Rows {
                        table: orders(),
                        known: known("id", &["i1"]),
                    }],
                    data: true,
                },
                bumped: 1,
                heard: Some(&["rows shop.orders"]),
                counted: &[(I::Binlog, 1)],
                column_writes: 0,
                orders: (true, false),
                epoch: false,
                mapping_kept: false,
            },
            Row {
                rule: "a column-known update: counted as a column write too",
                inv: Invalidation::one(
                    Source::Here(InvalidationSource::Write),
                    What::Columns {
                        table: orders(),
                        set: vec!["note".to_string()].into(),
                        known: None,
                    },
                ),
                bumped: 1,
                heard: Some(&["table shop.orders"]),
                counted: &[(I::Write, 1)],
                column_writes: 1,
                orders: (true, true),
                epoch: false,
                mapping_kept: true,
            },
            Row {
                rule: "a table learned from L2: bumped quietly (not published back), not \
                       counted here",
                inv: Invalidation::one(Source::L2, What::Table(orders())),
                bumped: 1,
                heard: Some(&[]),
                counted: &[],
                column_writes: 0,
                orders: (true, true),
                epoch: false,
                mapping_kept: false,
            },
            Row {
                rule: "rows learned from L2: slices quietly; the writer's rows may have \
                       moved, so the mappings go",
                inv: Invalidation {
                    source: Source::L2,
                    moved: vec![orders()],
                    what: vec![What::Slices {
                        table: orders(),
                        indexes: vec![],
                    }],
                    data: false,
                },
                bumped: 1,
                heard: Some(&[]),
                counted: &[],
                column_writes: 0,
                orders: (true, false),
                epoch: false,
                mapping_kept: false,
            },
            Row {
                rule: "a schema: each table the registry knows, counted once",
                inv: Invalidation::one(
                    Source::Here(InvalidationSource::Binlog),
                    What::Schema("shop".into()),
                ),
                bumped: 2,
                heard: Some(&["schema shop"]),
                counted: &[(I::Binlog, 1)],
                column_writes: 0,
                orders: (true, true),
                epoch: false,
                mapping_kept: false,
            },
            Row {
                rule: "a schema learned from L2: quiet",
                inv: Invalidation::one(Source::L2, What::Schema("shop".into())),
                bumped: 2,
                heard: Some(&[]),
                counted: &[],
                column_writes: 0,
                orders: (true, true),
                epoch: false,
                mapping_kept: false,
            },
            Row {
                rule: "everything: the epoch, and every mapping",
                inv: Invalidation::one(
                    Source::Here(InvalidationSource::Conservative),
                    What::Everything,
                ),
                bumped: 1,
                heard: Some(&["all"]),
                counted: &[(I::Conservative, 1)],
                column_writes: 0,
                orders: (false, false),
                epoch: true,
                mapping_kept: false,
            },
            Row {
                rule: "everything learned from L2: quiet",
                inv: Invalidation::one(Source::L2, What::Everything),
                bumped: 1,
                heard: Some(&[]),
                counted: &[],
                column_writes: 0,
                orders: (false, false),
                epoch: true,
                mapping_kept: false,
            },
            Row {
                rule: "a binlog gap: everything here, L2 decides for the fleet",
                inv: Invalidation::one(Source::Here(InvalidationSource::Binlog), What::Gap),
                bumped: 1,
                heard: Some(&["gap"]),
                counted: &[(I::Binlog, 1)],
                column_writes: 0,
                orders: (false, false),
                epoch: true,
                mapping_kept: false,
            },
            Row {
                rule: "a privilege change reaching a stamp: counted as privileges, no table",
                inv: Invalidation::one(
                    Source::Here(InvalidationSource::Privileges),
                    What::Privileges(PrivilegeChange::privilege_table()),
                ),
                bumped: 0,
                heard: None,
                counted: &[(I::Privileges, 1)],
                column_writes: 0,
                orders: (false, false),
                epoch: false,
                mapping_kept: true,
            },
        ];
        for row in rows {
            let (inv, heard) = instance();
            let v = inv.versions();
            let o = v.table("shop", "orders");
            let before = (o.version(), o.unknown_version(), v.epoch());
            assert_eq!(inv.apply(&row.inv), row.bumped, "{}", row.rule);
            let heard_now = heard.take();
            if let Some(h) = row.heard {
                assert_eq!(heard_now, h, "{}", row.rule);
            }
            for source in InvalidationSource::ALL {
                let want = row.counted.iter().find(|(s, _)| *s == source);
                let want = want.map_or(0, |(_, n)| *n);
                assert_eq!(
                    inv.stats.invalidations(source),
                    want,
                    "{source:?}: {}",
                    row.rule
                );
            }
            let cw = inv
                .stats
                .column_writes
                .load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(cw, row.column_writes, "{}", row.rule);
            let moved = (o.version() > before.0, o.unknown_version() > before.1);
            assert_eq!(moved, row.orders, "{}", row.rule);
            assert_eq!(v.epoch() > before.2, row.epoch, "{}", row.rule);
            let kept = v.parents.entries() == 1;
            assert_eq!(kept, row.mapping_kept, "{}", row.rule);
        }
    }

    /// A child row's write names its derived slice (the slice of its parent's customer)
    /// through the parent maps when it comes from the binlog, and not when it went through
    /// qcache (which asks the server): there it bumps every derived slice.
    #[test]
    fn only_the_binlog_names_child_rows_through_the_parent_maps() {
        for (source, derived) in [
            (Source::Here(InvalidationSource::Binlog), true),
            (Source::Here(InvalidationSource::Write), false),
        ] {
            let (inv, _) = instance();
            let v = inv.versions();
            let items = v.table("shop", "items");
            let name = derived_column("order_id", &orders_map());
            let column = v.register(&items, &name);
            let slice = Versions::slice_index(&items, &name, "i42");
            let before = (v.slice_version(slice), column.version());
            let what = What::Rows {
                table: t("shop", "items"),
                known: known("order_id", &["i7"]),
            };
            inv.apply(&Invalidation::one(source, what));
            let after = (v.slice_version(slice), column.version());
            assert_eq!(
                after.0 > before.0,
                derived,
                "{source:?}: customer 42's slice"
            );
            assert_eq!(
                after.1 > before.1,
                !derived,
                "{source:?}: every derived slice"
            );
        }
    }

    /// A source that says nothing changes nothing.
    #[test]
    fn an_empty_invalidation_changes_nothing() {
        let (inv, heard) = instance();
        let seq = inv.versions().seq();
        assert!(Invalidation::new(Source::Here(InvalidationSource::Write), vec![]).is_empty());
        assert_eq!(
            inv.apply(&Invalidation::new(
                Source::Here(InvalidationSource::Write),
                vec![]
            )),
            0
        );
        assert_eq!(inv.versions().seq(), seq);
        assert!(heard.take().is_empty());
        assert_eq!(inv.stats.invalidations_total(), 0);
    }
}
