//! The schema catalog: which base tables a view reads, which tables a write to a table also
//! changes (triggers, foreign-key cascades), loaded from `information_schema` and swapped
//! atomically so that lookups on the query path never take a lock.
//!
//! The binlog cannot replace this: InnoDB cascades are not logged (before MySQL 9.6) and a view
//! never appears in it, so an entry reading a view must be stamped with the view's base tables.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use sqlparser::ast::{ObjectName, ObjectNamePart, Query, Statement, Visit, Visitor};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::pending::PendingDdl;
use crate::analysis::slices::{ColType, ColumnInfo};
use crate::cache::fkmap::MapKey;
use crate::config::InvalidationConfig;
use crate::policy::timecol::Temporals;

/// A lower-cased `(schema, name)` pair, the table identity used everywhere in qcache.
pub type TableName = (String, String);

pub use crate::policy::context::WriteTriggers;

/// Why the catalog could not be (re)loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog: upstream query failed: {0}")]
    Upstream(#[from] mysql_async::Error),
    #[error("catalog: loading information_schema took longer than {0:?}")]
    Timeout(Duration),
    #[error("catalog: the name {0} cannot be looked up exactly")]
    Unreadable(String),
}

/// What a read of some tables depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResolution {
    /// The tables whose versions the read must be stamped with: base tables as-is, and for a
    /// view both the view itself (so that redefining it invalidates) and every base table it
    /// reads, through nested views. Sorted, without duplicates.
    Tables(Vec<TableName>),
    /// A view whose definition could not be expanded (unparsable, invisible to the catalog
    /// user, or reading something the catalog does not know): the read must not be cached.
    Opaque(String),
    /// A name the catalog does not know: a temporary table, a table created since the last
    /// refresh, or one that does not exist.
    Unknown(String),
    /// A relation the read depends on was named by a DDL whose reload has not landed, or a
    /// name the catalog does not list while some DDL is pending
    /// ([`Catalog::ddl_pending`]): the catalog cannot vouch for it yet, and the read must
    /// not be cached (nor wait: the reload runs in the background).
    DdlPending,
}

pub use crate::cache::writes::Changed;

/// How long a partial refresh (after a DDL) may take before it falls back to a full load.
const LOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a full load may take before the caller gets an error (and the old snapshot
/// stays). It reads every table's definition: on a busy server holding 10,000 tables that
/// took longer than 10 s, so a shorter bound meant it never succeeded, and every DDL's
/// reload (a full one while nothing is loaded) started another.
const FULL_LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Schemas qcache never caches reads of (DESIGN.md "What is not cached"): loading them would
/// only cost time (sys alone has a hundred views) on every refresh. A user view reading one of
/// them is opaque, as it must be.
const SKIPPED_SCHEMAS: &str = "('information_schema', 'performance_schema', 'mysql', 'sys')";

/// The kind column of a relation's row in `RawCatalog::tables`: its TABLE_TYPE, or for a
/// table whose engine holds no rows of its own — MERGE (the rows of the MyISAM tables it
/// unions), FEDERATED / CONNECT / SPIDER (another server's or a file's), OQGRAPH (a backing
/// table's) — `ENGINE <name>`: a write elsewhere changes what it reads, and a write to it
/// changes rows elsewhere, so its reads are not cached and its writes are unknown. A BASE
/// TABLE of an engine not known to keep exactly the rows it is given (BLACKHOLE keeps none
/// and still answers "1 row affected"; an engine unknown or not loaded) is
/// `BASE TABLE ENGINE=<name>`: a base table, but never one whose rows a statement shows
/// (`SchemaPart::special`).
const TABLE_KIND: &str = "IF(UPPER(ENGINE) IN ('MRG_MYISAM', 'MRG_MARIA', 'FEDERATED', \
     'CONNECT', 'SPIDER', 'OQGRAPH'), CONCAT('ENGINE ', ENGINE), \
     IF(TABLE_TYPE = 'BASE TABLE' AND UPPER(IFNULL(ENGINE, '')) NOT IN ('INNODB', 'MYISAM', \
     'ARIA', 'MEMORY'), CONCAT('BASE TABLE ENGINE=', IFNULL(ENGINE, '')), TABLE_TYPE))";

/// One loaded state of the server's schema. Immutable once built.
///
/// What a schema's own rows say lives in one [`SchemaPart`] per (lower-cased) schema, shared
/// between snapshots: a refresh after a DDL rebuilds the parts of the schemas it touched and
/// keeps the others' (`Arc`s), so its cost does not grow with the tables elsewhere on the
/// server. Only the views' expansions, which may cross schemas, are recomputed each time,
/// from the parts' already-parsed references.
#[derive(Debug, Default)]
pub struct SchemaSnapshot {
    schemas: HashMap<String, Arc<SchemaPart>>,
    /// Views, resolved to the base tables they read (Err: why the view is opaque).
    views: HashMap<TableName, Result<Vec<TableName>, String>>,
    /// The temporary tables stored functions and triggers may create (`stored_code`).
    temporaries: Arc<crate::policy::stored_code::Temporaries>,
    /// The routines it was judged with, for judging the DDL seen before the next reload.
    routines: Arc<Vec<crate::policy::stored_code::Routine>>,
    /// The triggers likewise: (trigger schema, body, SQL_MODE).
    trigger_code: Arc<Vec<(String, String, String)>>,
    /// The names (any schema, lower-cased) of the views whose reading runs stored code
    /// ([`SchemaSnapshot::read_runs_code`]), for statements that may read one inside.
    code_views: Arc<HashSet<String>>,
    /// Whether a body names `query_cache_type` or cannot be read, and whether a procedure's
    /// runs dynamic SQL (`stored_code::sets_qct`), judged with `routines` and `trigger_code`.
    qct_code: (bool, bool),
}

/// The analysis of one schema's rows. Keys are lower-cased names within the schema.
#[derive(Debug, Default)]
struct SchemaPart {
    /// Every base table and view.
    relations: HashMap<String, Kind>,
    /// Relation names, sorted.
    names: Vec<String>,
    /// Views: the relations their definition names (Err: why it cannot be expanded).
    view_refs: HashMap<String, Result<Vec<TableName>, String>>,
    /// Direct write edges: a write to the key also writes these (triggers on it, column
    /// expressions of it, foreign keys that cascade from it as the parent).
    writes: HashMap<String, Vec<TableName>>,
    /// Tables with a trigger or column expression that could not be analysed, with why.
    unknown_writes: HashMap<String, String>,
    /// Base tables' columns, for row slices.
    columns: HashMap<String, TableColumns>,
    /// Tables with a trigger (analysed or not): a trigger may change the row being written,
    /// so a write's statement does not name its rows.
    triggered: HashSet<String>,
    /// Base relations whose TABLE_TYPE is not BASE TABLE (SYSTEM VERSIONED: an UPDATE adds
    /// a history row; SEQUENCE), or whose engine may not keep the rows written as written
    /// (`TABLE_KIND`: BLACKHOLE): never column-known writes, never patched inserts.
    special: HashSet<String>,
    /// Views whose reads must not be cached although they expand: their definition calls a
    /// function that is not cacheable inline (non-deterministic, session-dependent, a
    /// stored function or UDF, a sequence, a system variable) or searches full text.
    uncacheable: HashMap<String, String>,
    /// Views whose definition calls a stored function, a UDF or a sequence: a read through
    /// one runs that code, which may write tables no statement names.
    runs_code: HashSet<String>,
    /// Lower-cased names that stand for more than one relation: a server with
    /// `lower_case_table_names = 0` holds `v1` and `V1`, or schemas `RT` and `rt`, as
    /// different objects. qcache's table identity is lower-case (merging them costs only
    /// extra invalidations), but a view's expansion or a trigger's edges under such a name
    /// could be another object's: reads of it are not cached and writes to it invalidate
    /// conservatively.
    ambiguous: HashSet<String>,
    /// SQL SECURITY DEFINER views, with the privilege stamps a read through them carries
    /// (`policy::privileges::definer_stamps`).
    definers: HashMap<String, [TableName; 2]>,
    /// Every relation's TIME and date-typed columns and the code a read of it runs, for
    /// `policy::timecol` ([`relation_temporals`]). A relation missing here: not known.
    temporals: HashMap<String, Arc<Temporals>>,
}

impl SchemaPart {
    fn is_empty(&self) -> bool {
        self.relations.is_empty()
            && self.view_refs.is_empty()
            && self.writes.is_empty()
            && self.unknown_writes.is_empty()
            && self.definers.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Base,
    View,
}

/// The rows read from `information_schema`, before any analysis. Kept separate from the
/// loading so that the analysis is testable without a server.
#[derive(Debug, Default, Clone)]
pub struct RawCatalog {
    /// (schema, name, TABLE_TYPE)
    pub tables: Vec<(String, String, String)>,
    /// (schema, name, VIEW_DEFINITION); an empty definition means not visible to us.
    pub views: Vec<(String, String, String)>,
    /// (trigger schema, table schema, table, ACTION_STATEMENT, SQL_MODE: how its body
    /// reads, `stored_code`)
    pub triggers: Vec<(String, String, String, String, String)>,
    /// Every stored routine on the server, for what its code may do when a function or
    /// trigger runs it (`stored_code`). Read by full loads only: routine DDL reloads
    /// everything, and a partial reload never drops one.
    pub routines: Vec<crate::policy::stored_code::Routine>,
    /// (child schema, child table, parent schema, parent table, UPDATE_RULE, DELETE_RULE)
    pub foreign_keys: Vec<(String, String, String, String, String, String)>,
    /// (schema, view, DEFINER) of the `SQL SECURITY DEFINER` views: a read through one runs
    /// with its definer's privileges.
    pub definers: Vec<(String, String, String)>,
    /// (schema, table, expression) of the column DEFAULT and generation expressions that
    /// call something: a write to the table runs them (`DEFAULT NEXTVAL(s)` writes `s`).
    pub column_code: Vec<(String, String, String)>,
    /// (schema, table, GENERATION_EXPRESSION) of the generated columns among those: a
    /// VIRTUAL one is computed at each read, in the reader's session.
    pub generated: Vec<(String, String, String)>,
    /// Columns of tables and views, for row slices.
    pub columns: Vec<RawColumn>,
    /// (schema, table, kind, text) of what decides the order rows can come back in: kind
    /// `I` an index's column (information_schema.STATISTICS; empty for an expression), `P`
    /// the partitioning and subpartitioning expressions (PARTITIONS): [`order_sources_sql`].
    pub order_sources: Vec<(String, String, String, String)>,
}

/// One row of information_schema.COLUMNS.
#[derive(Debug, Default, Clone)]
pub struct RawColumn {
    pub schema: String,
    pub table: String,
    pub name: String,
    pub ordinal: u64,
    pub data_type: String,
    pub column_type: String,
    pub collation: String,
    pub max_chars: Option<u64>,
    pub nullable: bool,
    pub extra: String,
    /// COLUMN_KEY is `PRI`: the column is (part of) the primary key, or of the unique NOT
    /// NULL key the server shows in its place.
    pub primary: bool,
    /// GENERATION_EXPRESSION: empty unless the column is generated.
    pub generation: String,
}

/// A base table's columns, for row slices.
#[derive(Debug, Default)]
struct TableColumns {
    by_name: HashMap<String, ColumnInfo>,
    /// In ordinal order; None when an INSERT without a column list does not fill them in
    /// this order (invisible columns).
    order: Option<Vec<String>>,
    /// Every column in ordinal order (as row images carry them).
    all: Arc<[(String, ColumnInfo)]>,
    /// A column whose value the server sets itself on UPDATE (`ON UPDATE
    /// CURRENT_TIMESTAMP`): an UPDATE changes more than it assigns.
    on_update: bool,
    /// A column with anything else in EXTRA but AUTO_INCREMENT (generated, invisible, system
    /// versioning, what a later server adds): what an UPDATE changes is not its SET list, and
    /// a row image may not show it.
    implicit: bool,
    /// The primary key when it is one column (derived slices join on it).
    pk: Option<String>,
    /// Every column of the primary key (or of the unique NOT NULL key the server shows in
    /// its place), in ordinal order: one row at most has given values in all of them.
    pk_all: Vec<String>,
    /// Columns of any index or of the partitioning, lower-cased: an UPDATE changing one may
    /// move rows in an unordered read (`policy::order`). None: not known (an index on an
    /// expression, a partitioning expression naming no column).
    order_columns: Option<HashSet<String>>,
}

impl RawCatalog {
    /// The child tables whose foreign keys reference a relation `changed` covers, as this
    /// catalog spells them, minus those `changed` covers itself. Renaming a parent rewrites
    /// its children's foreign keys (InnoDB follows the rename), so their rows are reloaded too.
    pub fn children_of(&self, changed: &Changed) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .foreign_keys
            .iter()
            .filter(|(cs, ct, ps, pt, _, _)| covers(changed, ps, pt) && !covers(changed, cs, ct))
            .map(|(cs, ct, ..)| (cs.clone(), ct.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The schemas (lower-cased) of the parents of the foreign keys whose child `changed`
    /// covers or is one of `children`: the rows [`RawCatalog::replace`] swaps.
    pub fn parents_of(&self, changed: &Changed, children: &[(String, String)]) -> HashSet<String> {
        let children = lowered(children);
        self.foreign_keys
            .iter()
            .filter(|(cs, ct, ..)| is_child(changed, &children, cs, ct))
            .map(|(_, _, ps, ..)| ps.to_lowercase())
            .collect()
    }

    /// Replaces every row `changed` covers (relations, views, the triggers on them and the
    /// foreign keys of them as children), and the foreign keys of `children`, by the rows
    /// of `fresh`, which holds the server's current rows for exactly that scope. Returns
    /// whether that touched any trigger row (removed or read): if not, what stored code may
    /// do is as it was (routines are never replaced here).
    pub fn replace(
        &mut self,
        changed: &Changed,
        children: &[(String, String)],
        fresh: RawCatalog,
    ) -> bool {
        let children = lowered(children);
        let child = |cs: &str, ct: &str| is_child(changed, &children, cs, ct);
        let covered = |schema: &str, name: &str| covers(changed, schema, name);
        self.tables.retain(|(s, n, _)| !covered(s, n));
        self.views.retain(|(s, n, _)| !covered(s, n));
        let triggers = self.triggers.len();
        self.triggers.retain(|(_, s, t, ..)| !covered(s, t));
        let triggers_touched = self.triggers.len() != triggers || !fresh.triggers.is_empty();
        self.foreign_keys.retain(|(cs, ct, ..)| !child(cs, ct));
        self.definers.retain(|(s, n, _)| !covered(s, n));
        self.column_code.retain(|(s, n, _)| !covered(s, n));
        self.generated.retain(|(s, n, _)| !covered(s, n));
        self.columns.retain(|c| !covered(&c.schema, &c.table));
        self.order_sources.retain(|(s, n, ..)| !covered(s, n));
        self.order_sources.extend(fresh.order_sources);
        self.columns.extend(fresh.columns);
        self.tables.extend(fresh.tables);
        self.views.extend(fresh.views);
        self.triggers.extend(fresh.triggers);
        self.foreign_keys.extend(fresh.foreign_keys);
        self.definers.extend(fresh.definers);
        self.column_code.extend(fresh.column_code);
        self.generated.extend(fresh.generated);
        triggers_touched
    }
}

/// [`Changed::covers`] for a relation as the server spells it; allocates nothing for ASCII
/// names (a refresh runs this over every row the catalog holds).
fn covers(changed: &Changed, schema: &str, name: &str) -> bool {
    changed.schemas.iter().any(|s| lowers_to(schema, s))
        || changed
            .objects
            .iter()
            .any(|(s, n)| lowers_to(schema, s) && lowers_to(name, n))
}

/// Whether a foreign key's child (as the server spells it) is covered by `changed` or is
/// one of `children` (lower-cased).
fn is_child(changed: &Changed, children: &[TableName], schema: &str, name: &str) -> bool {
    covers(changed, schema, name)
        || children
            .iter()
            .any(|(s, t)| lowers_to(schema, s) && lowers_to(name, t))
}

fn lowered(names: &[(String, String)]) -> Vec<TableName> {
    names.iter().map(|(s, n)| lower(s, n)).collect()
}

/// Whether `name` lower-cases to `lowered` (compared without allocating when ASCII).
fn lowers_to(name: &str, lowered: &str) -> bool {
    if name.is_ascii() {
        name.len() == lowered.len() && name.eq_ignore_ascii_case(lowered)
    } else {
        name.to_lowercase() == lowered
    }
}

impl SchemaPart {
    /// Analyses the rows of `raw` that belong to `schema` (lower-cased): its relations and
    /// views, the triggers and column expressions of its tables, the foreign keys whose
    /// parent it holds.
    fn build(raw: &RawCatalog, schema: &str) -> SchemaPart {
        let mut part = SchemaPart::default();
        let mine = |s: &str| lowers_to(s, schema);
        part.add_relations(raw, &mine);
        part.add_views(raw, schema, &mine);
        part.add_code(raw, schema, &mine);
        for (cs, ct, _, pt, update_rule, delete_rule) in
            raw.foreign_keys.iter().filter(|r| mine(&r.2))
        {
            // RESTRICT / NO ACTION never change the child; CASCADE, SET NULL and SET DEFAULT do.
            let changes = |rule: &str| {
                let r = rule.to_ascii_uppercase();
                r == "CASCADE" || r == "SET NULL" || r == "SET DEFAULT"
            };
            if changes(update_rule) || changes(delete_rule) {
                part.writes
                    .entry(pt.to_lowercase())
                    .or_default()
                    .push(lower(cs, ct));
            }
        }
        for (_, view, definer) in raw.definers.iter().filter(|r| mine(&r.0)) {
            let stamps = crate::policy::privileges::definer_stamps(definer);
            part.definers.insert(view.to_lowercase(), stamps);
        }
        for edges in part.writes.values_mut() {
            edges.sort();
            edges.dedup();
        }
        part.names = part.relations.keys().cloned().collect();
        part.names.sort();
        part.columns = table_columns(&part, raw.columns.iter().filter(|c| mine(&c.schema)));
        part.temporals = relation_temporals(&part, raw, &mine);
        part.add_order_columns(raw, &mine);
        part
    }

    /// Its relations: views, base tables, tables whose engine stores rows elsewhere, and names
    /// that differ only in case (ambiguous).
    fn add_relations(&mut self, raw: &RawCatalog, mine: &impl Fn(&str) -> bool) {
        let mut exact: HashMap<String, (&str, &str)> = HashMap::new();
        for (sch, name, kind) in raw.tables.iter().filter(|r| mine(&r.0)) {
            let key = name.to_lowercase();
            if exact
                .insert(key.clone(), (sch.as_str(), name.as_str()))
                .is_some_and(|(s, n)| s != sch || n != name)
            {
                self.ambiguous.insert(key.clone());
            }
            // SYSTEM VIEW only occurs in the skipped schemas; anything else that is not a view
            // (BASE TABLE, SYSTEM VERSIONED, SEQUENCE) holds data of its own.
            if let Some(engine) = kind.strip_prefix("ENGINE ") {
                let why = format!("{sch}.{name}: ENGINE={engine} holds rows stored elsewhere");
                self.uncacheable.insert(key.clone(), why.clone());
                self.unknown_writes.insert(key.clone(), why);
            }
            let kind = if kind.eq_ignore_ascii_case("VIEW") {
                Kind::View
            } else {
                if !kind.eq_ignore_ascii_case("BASE TABLE") {
                    self.special.insert(key.clone());
                }
                Kind::Base
            };
            self.relations.insert(key, kind);
        }
    }

    /// Its views: what each reads, which run code, which cannot be cached.
    fn add_views(&mut self, raw: &RawCatalog, schema: &str, mine: &impl Fn(&str) -> bool) {
        for (sch, name, def) in raw.views.iter().filter(|r| mine(&r.0)) {
            let key = name.to_lowercase();
            let qualified = format!("{schema}.{key}");
            let refs = if def.trim().is_empty() {
                Err(format!(
                    "view {qualified}: definition not visible to the catalog user"
                ))
            } else {
                relations_of(def, schema)
                    .map_err(|e| format!("view {qualified}: definition cannot be analysed: {e}"))
            };
            if self.view_refs.insert(key.clone(), refs).is_some() {
                self.ambiguous.insert(key.clone());
            }
            if matches!(crate::analysis::analyze(def), crate::analysis::Analysis::Read(r) if r.may_write)
            {
                self.runs_code.insert(key.clone());
            }
            if let Err(why) = view_cacheable(def) {
                self.uncacheable
                    .insert(key, format!("view {sch}.{name}: {why}"));
            }
        }
    }

    /// The code its tables run: triggers and what they write, column defaults that write
    /// sequences, generated columns that cannot be cached.
    fn add_code(&mut self, raw: &RawCatalog, schema: &str, mine: &impl Fn(&str) -> bool) {
        for (trigger_schema, _, table, body, _) in raw.triggers.iter().filter(|r| mine(&r.1)) {
            let key = table.to_lowercase();
            self.triggered.insert(key.clone());
            // A function the body calls may write tables nobody named.
            let analysed = if crate::analysis::calls_unknown_code(body) {
                Err("the trigger calls a stored function or a sequence".to_string())
            } else {
                trigger_writes(body, &trigger_schema.to_lowercase())
            };
            match analysed {
                Ok(written) => self.writes.entry(key).or_default().extend(written),
                Err(why) => {
                    self.unknown_writes.insert(key, why);
                }
            }
        }
        for (sch, table, expr) in raw.column_code.iter().filter(|r| mine(&r.0)) {
            let key = table.to_lowercase();
            match crate::analysis::sequences_written(expr) {
                Some(seqs) => {
                    let written: Vec<TableName> = seqs
                        .into_iter()
                        .map(|r| (r.schema.unwrap_or_else(|| schema.to_string()), r.name))
                        .collect();
                    self.writes.entry(key).or_default().extend(written);
                }
                None => {
                    self.unknown_writes
                        .insert(key, format!("a column of {sch}.{table} computes `{expr}`"));
                }
            }
        }
        for (sch, table, expr) in raw.generated.iter().filter(|r| mine(&r.0)) {
            if let Err(why) = view_cacheable(&format!("SELECT {expr} FROM t")) {
                self.uncacheable.insert(
                    table.to_lowercase(),
                    format!("a column of {sch}.{table} computes `{expr}` at read: {why}"),
                );
            }
        }
    }

    /// The columns whose change moves rows in an order a read may depend on without naming
    /// them (indexes, partitioning): `None` for a table where some cannot be named.
    fn add_order_columns(&mut self, raw: &RawCatalog, mine: &impl Fn(&str) -> bool) {
        let part = self;
        for (_, table, kind, text) in raw.order_sources.iter().filter(|r| mine(&r.0)) {
            let Some(tc) = part.columns.get_mut(&table.to_lowercase()) else {
                continue;
            };
            let found = match kind.as_str() {
                "I" if !text.is_empty() => Some(vec![text.to_lowercase()]),
                "P" => {
                    let names: HashSet<String> = tc.by_name.keys().cloned().collect();
                    crate::policy::order::partition_columns(text, &names)
                }
                _ => None,
            };
            match (found, tc.order_columns.as_mut()) {
                (Some(cols), Some(set)) => set.extend(cols),
                _ => tc.order_columns = None,
            }
        }
    }
}

/// What `policy::timecol` needs of each relation of a schema part (base tables and views),
/// by lower-cased name: its TIME columns, its DATE / DATETIME / TIMESTAMP columns, and the
/// code a read of it runs in the reader's session (a view's definition, the expressions of
/// generated columns). A relation with no column rows has its columns unknown
/// (`columns_known`); one whose name is ambiguous gets none: nothing is known.
fn relation_temporals(
    part: &SchemaPart,
    raw: &RawCatalog,
    mine: &impl Fn(&str) -> bool,
) -> HashMap<String, Arc<Temporals>> {
    let mut out: HashMap<String, Temporals> = HashMap::new();
    for c in raw.columns.iter().filter(|c| mine(&c.schema)) {
        let t = c.table.to_lowercase();
        if !part.relations.contains_key(&t) || part.ambiguous.contains(&t) {
            continue;
        }
        let e = out.entry(t).or_default();
        e.columns_known = true;
        let name = c.name.to_lowercase();
        match c.data_type.to_ascii_lowercase().as_str() {
            "time" => e.time.push(name),
            "date" | "datetime" | "timestamp" => e.dated.push(name),
            _ => {}
        }
        if !c.generation.trim().is_empty() {
            e.code.push(c.generation.clone());
        }
    }
    // A view's definition is asked even when its columns are not listed.
    for (_, name, def) in raw.views.iter().filter(|r| mine(&r.0)) {
        let t = name.to_lowercase();
        if part.relations.contains_key(&t) && !part.ambiguous.contains(&t) {
            out.entry(t).or_default().code.push(def.clone());
        }
    }
    out.into_iter().map(|(k, v)| (k, Arc::new(v))).collect()
}

/// The columns of a schema part's base tables, by lower-cased table name. A table whose
/// names collide in case, or that is no base table of the part, gets none.
fn table_columns<'a>(
    part: &SchemaPart,
    rows: impl Iterator<Item = &'a RawColumn>,
) -> HashMap<String, TableColumns> {
    let mut cols: HashMap<String, Vec<&RawColumn>> = HashMap::new();
    for c in rows {
        cols.entry(c.table.to_lowercase()).or_default().push(c);
    }
    let mut out = HashMap::new();
    for (t, mut list) in cols {
        if part.relations.get(&t) != Some(&Kind::Base) || part.ambiguous.contains(&t) {
            continue;
        }
        list.sort_by_key(|c| c.ordinal);
        let mut tc = TableColumns {
            order_columns: Some(HashSet::new()),
            ..TableColumns::default()
        };
        let extra = |c: &RawColumn| c.extra.to_ascii_lowercase();
        let invisible = list.iter().any(|c| extra(c).contains("invisible"));
        tc.order = (!invisible).then(|| list.iter().map(|c| c.name.to_lowercase()).collect());
        if let [pk] = list
            .iter()
            .filter(|c| c.primary)
            .collect::<Vec<_>>()
            .as_slice()
        {
            tc.pk = Some(pk.name.to_lowercase());
        }
        tc.pk_all = list
            .iter()
            .filter(|c| c.primary)
            .map(|c| c.name.to_lowercase())
            .collect();
        let mut all = Vec::with_capacity(list.len());
        for c in list {
            let e = extra(c);
            match e.trim() {
                "" | "auto_increment" => {}
                x if x.starts_with("on update") => tc.on_update = true,
                _ => tc.implicit = true,
            }
            // A generated column's value is not the statement's; invisible columns are
            // left out of column-less INSERTs. Neither is sliced.
            let ty = if e.contains("generated")
                || e.contains("virtual")
                || e.contains("persistent")
                || e.contains("stored")
                || e.contains("invisible")
            {
                ColType::Other
            } else {
                ColType::from_catalog(&c.data_type, &c.column_type, &c.collation, c.max_chars)
            };
            let info = ColumnInfo {
                ty,
                nullable: c.nullable,
                auto_increment: e.contains("auto_increment"),
            };
            all.push((c.name.to_lowercase(), info.clone()));
            if tc.by_name.insert(c.name.to_lowercase(), info).is_some() {
                // Two columns one name apart in case: not a name qcache can resolve.
                tc.order = None;
                tc.by_name.clear();
                tc.pk = None;
                all.clear();
                break;
            }
        }
        tc.all = all.into();
        out.insert(t, tc);
    }
    out
}

impl SchemaSnapshot {
    /// Analyses the raw rows: view expansion, trigger bodies, column expressions and cascade
    /// edges.
    pub fn build(raw: &RawCatalog) -> SchemaSnapshot {
        let mut schemas: HashSet<String> = HashSet::new();
        schemas.extend(raw.tables.iter().map(|r| r.0.to_lowercase()));
        schemas.extend(raw.views.iter().map(|r| r.0.to_lowercase()));
        schemas.extend(raw.triggers.iter().map(|r| r.1.to_lowercase()));
        schemas.extend(raw.column_code.iter().map(|r| r.0.to_lowercase()));
        schemas.extend(raw.foreign_keys.iter().map(|r| r.2.to_lowercase()));
        schemas.extend(raw.definers.iter().map(|r| r.0.to_lowercase()));
        SchemaSnapshot::default().patched(raw, &schemas, None)
    }

    /// This snapshot with the parts of `schemas` (lower-cased) rebuilt from `raw`, which
    /// holds the server's current rows for them; every other part is shared. Answers as
    /// [`SchemaSnapshot::build`] of `raw` does, provided `raw`'s rows changed only in those schemas
    /// (for foreign keys: the schemas of their parents). `code`: the snapshot whose judgement
    /// of stored code (routines, triggers, the temporary tables they may create) still holds
    /// for `raw`, reused rather than judged again (lexing every routine body on the server
    /// at each reload after a DDL); None judges it from `raw`.
    pub fn patched(
        &self,
        raw: &RawCatalog,
        schemas: &HashSet<String>,
        code: Option<&SchemaSnapshot>,
    ) -> SchemaSnapshot {
        let mut parts = self.schemas.clone();
        for s in schemas {
            let part = SchemaPart::build(raw, s);
            if part.is_empty() {
                parts.remove(s);
            } else {
                parts.insert(s.clone(), Arc::new(part));
            }
        }
        let mut views = HashMap::new();
        let mut memo = HashMap::new();
        for (schema, part) in &parts {
            for (name, kind) in &part.relations {
                if *kind == Kind::View {
                    let v = (schema.clone(), name.clone());
                    let mut stack = Vec::new();
                    let r = resolve_view(&v, &parts, &mut memo, &mut stack);
                    views.insert(v, r);
                }
            }
        }
        let (temporaries, routines, trigger_code) = match code {
            Some(c) => (
                c.temporaries.clone(),
                c.routines.clone(),
                c.trigger_code.clone(),
            ),
            None => (
                Arc::new(crate::policy::stored_code::temporaries(
                    &raw.routines,
                    raw.triggers
                        .iter()
                        .map(|t| (t.0.as_str(), t.3.as_str(), Some(t.4.as_str()))),
                )),
                Arc::new(raw.routines.clone()),
                Arc::new(
                    raw.triggers
                        .iter()
                        .map(|t| (t.0.clone(), t.3.clone(), t.4.clone()))
                        .collect(),
                ),
            ),
        };
        let qct_code = match code {
            Some(c) => c.qct_code,
            None => crate::policy::stored_code::sets_qct(
                &routines,
                trigger_code.iter().map(|t| t.1.as_str()),
                std::iter::empty(),
            ),
        };
        let mut snap = SchemaSnapshot {
            schemas: parts,
            views,
            temporaries,
            routines,
            trigger_code,
            code_views: Default::default(),
            qct_code,
        };
        let code_views: HashSet<String> = snap
            .views
            .keys()
            .filter(|v| snap.read_runs_code(std::slice::from_ref(*v)))
            .map(|v| v.1.clone())
            .collect();
        snap.code_views = Arc::new(code_views);
        snap
    }

    /// Replaces in `raw` the rows `changed` (and `children`, as [`RawCatalog::replace`])
    /// covers by `fresh`, and returns this snapshot patched to match: the parts rebuilt are
    /// the schemas the change covers, and those holding a parent of a foreign key that was
    /// replaced (before and after), whose cascade edges live with the parent.
    pub fn apply(
        &self,
        raw: &mut RawCatalog,
        changed: &Changed,
        children: &[(String, String)],
        fresh: RawCatalog,
    ) -> SchemaSnapshot {
        let mut schemas: HashSet<String> = changed.schemas.iter().cloned().collect();
        schemas.extend(changed.objects.iter().map(|(s, _)| s.clone()));
        schemas.extend(raw.parents_of(changed, children));
        let triggers_touched = raw.replace(changed, children, fresh);
        schemas.extend(raw.parents_of(changed, children));
        self.patched(raw, &schemas, (!triggers_touched).then_some(self))
    }

    /// Every answer the snapshot gives, one line per relation it knows, in a canonical
    /// order: the read resolution and the write expansion of each, and the schema listings.
    fn answers(&self) -> Vec<String> {
        let mut names: Vec<TableName> = self.relations().map(|(t, _)| t).collect();
        names.sort();
        let mut out: Vec<String> = names
            .iter()
            .map(|t| {
                let one = std::slice::from_ref(t);
                format!(
                    "{}.{}: read {:?}, write {:?}",
                    t.0,
                    t.1,
                    self.resolve_read(one),
                    self.expand_write(one)
                )
            })
            .collect();
        let mut schemas: Vec<_> = self
            .schemas
            .iter()
            .filter(|(_, p)| !p.names.is_empty())
            .map(|(s, p)| (s, &p.names))
            .collect();
        schemas.sort();
        out.extend(
            schemas
                .into_iter()
                .map(|(s, n)| format!("schema {s}: {n:?}")),
        );
        out
    }

    fn part(&self, t: &TableName) -> Option<&SchemaPart> {
        self.schemas.get(&t.0).map(|p| &**p)
    }

    fn kind(&self, t: &TableName) -> Option<Kind> {
        self.part(t).and_then(|p| p.relations.get(&t.1)).copied()
    }

    fn is_ambiguous(&self, t: &TableName) -> bool {
        self.part(t).is_some_and(|p| p.ambiguous.contains(&t.1))
    }

    fn uncacheable(&self, t: &TableName) -> Option<&String> {
        self.part(t).and_then(|p| p.uncacheable.get(&t.1))
    }

    fn unknown_write(&self, t: &TableName) -> Option<&String> {
        self.part(t).and_then(|p| p.unknown_writes.get(&t.1))
    }

    /// Direct write edges of `t` (triggers, cascades).
    fn edges(&self, t: &TableName) -> &[TableName] {
        self.part(t)
            .and_then(|p| p.writes.get(&t.1))
            .map_or(&[], Vec::as_slice)
    }

    fn columns(&self, t: &TableName) -> Option<&TableColumns> {
        self.part(t).and_then(|p| p.columns.get(&t.1))
    }

    /// Whether a write's statement names the rows it changes in `t`: a base table with no
    /// trigger (which may change the row written) that no cascade leads back to.
    fn rows_knowable(&self, t: &TableName) -> bool {
        if self.kind(t) != Some(Kind::Base)
            || self.is_ambiguous(t)
            || self.part(t).is_some_and(|p| p.triggered.contains(&t.1))
            || self.unknown_write(t).is_some()
        {
            return false;
        }
        let mut seen: HashSet<&TableName> = HashSet::new();
        let mut queue: Vec<&TableName> = self.edges(t).iter().collect();
        while let Some(n) = queue.pop() {
            if n == t {
                return false;
            }
            if seen.insert(n) {
                queue.extend(self.edges(n));
            }
        }
        true
    }

    /// Whether a read of `tables` runs code through a view: a view among them, or nested in
    /// one, whose definition calls a stored function or a sequence. A view whose definition
    /// cannot be expanded counts as running code only if it is known to call some.
    fn read_runs_code(&self, tables: &[TableName]) -> bool {
        let mut seen: HashSet<&TableName> = HashSet::new();
        let mut queue: Vec<&TableName> = tables.iter().collect();
        while let Some(t) = queue.pop() {
            if !seen.insert(t) {
                continue;
            }
            let Some(part) = self.part(t) else { continue };
            if part.runs_code.contains(&t.1) {
                return true;
            }
            if let Some(Ok(refs)) = part.view_refs.get(&t.1) {
                queue.extend(refs.iter());
            }
        }
        false
    }

    /// What a data change to `tables` may fire: a trigger on any table it writes (through
    /// views, triggers and cascades), or qcache cannot tell (a table or view it does not
    /// know, a write it cannot expand).
    fn write_triggers(&self, tables: &[TableName]) -> WriteTriggers {
        let Some(all) = self.expand_write(tables) else {
            return WriteTriggers::Unknown;
        };
        let mut out = WriteTriggers::None;
        for t in &all {
            match self.kind(t) {
                None => return WriteTriggers::Unknown,
                Some(_) if self.part(t).is_some_and(|p| p.triggered.contains(&t.1)) => {
                    out = WriteTriggers::Some;
                }
                Some(_) => {}
            }
        }
        out
    }

    /// Every relation, with its kind (for listings and tests).
    fn relations(&self) -> impl Iterator<Item = (TableName, Kind)> + '_ {
        self.schemas.iter().flat_map(|(s, p)| {
            p.relations
                .iter()
                .map(move |(n, k)| ((s.clone(), n.clone()), *k))
        })
    }

    fn resolve_read(&self, tables: &[TableName]) -> ReadResolution {
        let mut out = Vec::new();
        let mut unknown = None;
        for t in tables {
            if self.is_ambiguous(t) {
                return ReadResolution::Opaque(format!(
                    "{}.{} names several objects differing in case (lower_case_table_names = 0)",
                    t.0, t.1
                ));
            }
            match self.kind(t) {
                Some(Kind::Base) => {
                    // A generated column computed per session at read.
                    if let Some(why) = self.uncacheable(t) {
                        return ReadResolution::Opaque(why.clone());
                    }
                    out.push(t.clone());
                }
                Some(Kind::View) => match self.views.get(t) {
                    Some(Ok(bases)) => {
                        // The view, or a view nested in it, calls what cannot be cached; or
                        // a name it reads is ambiguous.
                        let inner = std::iter::once(t).chain(bases.iter());
                        for v in inner {
                            if let Some(why) = self.uncacheable(v) {
                                return ReadResolution::Opaque(why.clone());
                            }
                            if self.is_ambiguous(v) {
                                return ReadResolution::Opaque(format!(
                                    "view {}.{} reads {}.{}, a name of several objects",
                                    t.0, t.1, v.0, v.1
                                ));
                            }
                        }
                        out.push(t.clone());
                        out.extend(bases.iter().cloned());
                        // The view, and any view nested in it, may run with its definer's
                        // privileges, which a change to the definer's account moves.
                        for v in std::iter::once(t).chain(bases.iter()) {
                            if let Some(stamps) = self.part(v).and_then(|p| p.definers.get(&v.1)) {
                                out.extend(stamps.iter().cloned());
                            }
                        }
                    }
                    Some(Err(why)) => return ReadResolution::Opaque(why.clone()),
                    None => return ReadResolution::Opaque(format!("view {}.{}", t.0, t.1)),
                },
                None => {
                    // Keep looking: an opaque view later in the list is the stronger answer,
                    // since no refresh will make it cacheable.
                    if unknown.is_none() {
                        unknown = Some(format!("{}.{} is not in the catalog", t.0, t.1));
                    }
                }
            }
        }
        if let Some(why) = unknown {
            return ReadResolution::Unknown(why);
        }
        out.sort();
        out.dedup();
        ReadResolution::Tables(out)
    }

    fn expand_write(&self, tables: &[TableName]) -> Option<Vec<TableName>> {
        let mut seen: HashSet<TableName> = HashSet::new();
        let mut queue: VecDeque<TableName> = tables.iter().cloned().collect();
        while let Some(t) = queue.pop_front() {
            if !seen.insert(t.clone()) {
                continue;
            }
            if self.unknown_write(&t).is_some() || self.is_ambiguous(&t) {
                return None;
            }
            if self.kind(&t) == Some(Kind::View) {
                // A write through an updatable view writes its base tables (those of nested
                // views too: the expansion lists them). A view qcache cannot expand may
                // write anything.
                match self.views.get(&t) {
                    Some(Ok(bases)) => {
                        queue.extend(bases.iter().filter(|n| !seen.contains(*n)).cloned())
                    }
                    _ => return None,
                }
            }
            if let Some(next) = self.part(&t).and_then(|p| p.writes.get(&t.1)) {
                queue.extend(next.iter().filter(|n| !seen.contains(*n)).cloned());
            }
        }
        let mut out: Vec<TableName> = seen.into_iter().collect();
        out.sort();
        Some(out)
    }
}

/// Whether reading a view with this definition may be cached, as far as its own text goes:
/// the same rules as a statement's ([`crate::analysis::analyze`]), except that a
/// definition reading no table is fine (the view itself is stamped).
fn view_cacheable(def: &str) -> Result<(), String> {
    use crate::analysis::{Analysis, NotCached};
    if def.trim().is_empty() {
        // Not visible: the expansion reports it.
        return Ok(());
    }
    match crate::analysis::analyze(def) {
        Analysis::Read(r) if r.may_write => Err("it calls a stored function".into()),
        Analysis::Read(r) => match r.verdict {
            Ok(()) | Err(NotCached::NoTable) => Ok(()),
            // The catalog skips those schemas; the expansion reports such a view opaque.
            Err(NotCached::SystemSchema) => Ok(()),
            Err(why) => Err(format!(
                "its definition is not cacheable ({})",
                crate::policy::Reason::from(why)
            )),
        },
        _ => Err("its definition is not a query".into()),
    }
}

fn lower(schema: &str, name: &str) -> TableName {
    (schema.to_lowercase(), name.to_lowercase())
}

/// Expands one view to its base tables, recursing through nested views. `stack` holds the
/// views being expanded, so that a cycle (which the server forbids, but the catalog may be
/// read mid-DDL) makes the view opaque instead of looping.
fn resolve_view(
    view: &TableName,
    parts: &HashMap<String, Arc<SchemaPart>>,
    memo: &mut HashMap<TableName, Result<Vec<TableName>, String>>,
    stack: &mut Vec<TableName>,
) -> Result<Vec<TableName>, String> {
    if let Some(r) = memo.get(view) {
        return r.clone();
    }
    let name = format!("{}.{}", view.0, view.1);
    if stack.contains(view) {
        return Err(format!("view {name} refers to itself"));
    }
    let kind = |t: &TableName| parts.get(&t.0).and_then(|p| p.relations.get(&t.1)).copied();
    let result = (|| {
        let refs = match parts.get(&view.0).and_then(|p| p.view_refs.get(&view.1)) {
            Some(r) => r.clone()?,
            None => {
                return Err(format!(
                    "view {name}: definition not visible to the catalog user"
                ))
            }
        };
        let mut bases = Vec::new();
        stack.push(view.clone());
        for r in refs {
            match kind(&r) {
                Some(Kind::Base) => bases.push(r),
                Some(Kind::View) => {
                    let inner = resolve_view(&r, parts, memo, stack);
                    match inner {
                        Ok(b) => {
                            // The inner view itself too, so redefining it invalidates readers
                            // of the outer one.
                            bases.push(r);
                            bases.extend(b);
                        }
                        Err(e) => {
                            stack.pop();
                            return Err(e);
                        }
                    }
                }
                None => {
                    stack.pop();
                    return Err(format!(
                        "view {name} reads {}.{}, which the catalog does not know",
                        r.0, r.1
                    ));
                }
            }
        }
        stack.pop();
        bases.sort();
        bases.dedup();
        Ok(bases)
    })();
    memo.insert(view.clone(), result.clone());
    result
}

/// Every relation a statement list names, qualified with `default_schema` where it is not,
/// minus names that are only CTEs. Err: not parsable.
fn relations_of(sql: &str, default_schema: &str) -> Result<Vec<TableName>, String> {
    let statements = Parser::parse_sql(&MySqlDialect {}, sql).map_err(|e| e.to_string())?;
    let mut c = Collector::new(default_schema);
    for s in &statements {
        let _ = s.visit(&mut c);
    }
    c.finish()
}

/// Collects relations and CTE names in one pass over the AST.
struct Collector<'a> {
    default_schema: &'a str,
    relations: Vec<TableName>,
    unqualified: HashSet<String>,
    ctes: HashSet<String>,
    error: Option<String>,
}

impl<'a> Collector<'a> {
    fn new(default_schema: &'a str) -> Self {
        Collector {
            default_schema,
            relations: Vec::new(),
            unqualified: HashSet::new(),
            ctes: HashSet::new(),
            error: None,
        }
    }

    fn add(&mut self, name: &ObjectName) {
        let mut parts = Vec::new();
        for p in &name.0 {
            match p {
                ObjectNamePart::Identifier(i) => parts.push(i.value.to_lowercase()),
                _ => {
                    self.error = Some(format!("computed name {name}"));
                    return;
                }
            }
        }
        match parts.as_slice() {
            [t] => {
                self.unqualified.insert(t.clone());
                self.relations
                    .push((self.default_schema.to_string(), t.clone()));
            }
            [.., s, t] => self.relations.push((s.clone(), t.clone())),
            [] => self.error = Some("empty name".into()),
        }
    }

    fn finish(mut self) -> Result<Vec<TableName>, String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let ds = self.default_schema.to_string();
        // An unqualified name that is a CTE of the statement is not a table. If a real table of
        // the same name exists it is kept by the caller only when it resolves, which at worst
        // adds a dependency: harmless.
        self.relations.retain(|(s, t)| {
            !(s == &ds && self.unqualified.contains(t) && (self.ctes.contains(t) || t == "dual"))
        });
        self.relations.sort();
        self.relations.dedup();
        Ok(self.relations)
    }
}

impl Visitor for Collector<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        self.add(relation);
        ControlFlow::Continue(())
    }
}

/// The tables a trigger body writes. Every relation named by a data-changing statement in the
/// body counts as written (a superset: `INSERT INTO a SELECT … FROM b` counts `b` too, which
/// only costs an extra invalidation). Err: the body cannot be analysed, or it calls a
/// procedure whose writes are unknown.
///
/// Not followed: stored functions called from expressions in the body. A function that writes
/// tables is rare enough, and MySQL forbids most of what would make it matter (no commits,
/// no writes to the triggering table), that this is accepted and documented.
///
/// A body is read under every reading its text allows (`analysis::lexer::other_readings`:
/// NO_BACKSLASH_ESCAPES, ANSI_QUOTES, MSSQL's `[…]` names, the multi-byte character sets),
/// since the sql_mode it was created under decides where its strings end (under MSSQL
/// `SET @a = (SELECT [x'] …); INSERT INTO side …` writes side, which the default rules read
/// inside a hex string): the tables any reading writes count, and a reading that cannot be
/// analysed is an error.
pub fn trigger_writes(body: &str, trigger_schema: &str) -> Result<Vec<TableName>, String> {
    let mut written = reading_writes(body, trigger_schema)?;
    for alt in crate::analysis::lexer::other_readings(body.as_bytes()) {
        written.extend(reading_writes(
            &String::from_utf8_lossy(&alt),
            trigger_schema,
        )?);
    }
    written.sort();
    written.dedup();
    Ok(written)
}

/// [`trigger_writes`] under the default rules alone.
fn reading_writes(body: &str, trigger_schema: &str) -> Result<Vec<TableName>, String> {
    let statements = parse_body(body)?;
    let mut w = WriteCollector {
        default_schema: trigger_schema,
        written: Vec::new(),
        error: None,
    };
    for s in &statements {
        let _ = s.visit(&mut w);
    }
    if let Some(e) = w.error {
        return Err(e);
    }
    Ok(w.written)
}

/// Parses a trigger body: a single statement, or a `BEGIN … END` block whose inside is a
/// statement list (the MySQL dialect reads a leading BEGIN as START TRANSACTION).
fn parse_body(body: &str) -> Result<Vec<Statement>, String> {
    let dialect = MySqlDialect {};
    match Parser::parse_sql(&dialect, body) {
        Ok(s) => Ok(s),
        Err(first) => {
            let t = body.trim().trim_end_matches(';').trim_end();
            let inner = strip_keyword_prefix(t, "BEGIN")
                .and_then(|rest| strip_keyword_suffix(rest, "END"))
                .ok_or_else(|| format!("trigger body cannot be parsed: {first}"))?;
            Parser::parse_sql(&dialect, inner)
                .map_err(|e| format!("trigger body cannot be parsed: {e}"))
        }
    }
}

fn strip_keyword_prefix<'a>(s: &'a str, kw: &str) -> Option<&'a str> {
    let head = s.get(..kw.len())?;
    let rest = &s[kw.len()..];
    (head.eq_ignore_ascii_case(kw) && rest.starts_with(|c: char| c.is_whitespace())).then_some(rest)
}

fn strip_keyword_suffix<'a>(s: &'a str, kw: &str) -> Option<&'a str> {
    let s = s.trim_end();
    let cut = s.len().checked_sub(kw.len())?;
    let tail = s.get(cut..)?;
    let rest = &s[..cut];
    (tail.eq_ignore_ascii_case(kw) && rest.ends_with(|c: char| c.is_whitespace() || c == ';'))
        .then_some(rest)
}

struct WriteCollector<'a> {
    default_schema: &'a str,
    written: Vec<TableName>,
    error: Option<String>,
}

impl Visitor for WriteCollector<'_> {
    type Break = ();

    fn pre_visit_statement(&mut self, s: &Statement) -> ControlFlow<()> {
        let dml = matches!(
            s,
            Statement::Insert(_)
                | Statement::Update(_)
                | Statement::Delete(_)
                | Statement::Merge(_)
                | Statement::Truncate(_)
        );
        if dml {
            let mut c = Collector::new(self.default_schema);
            let _ = s.visit(&mut c);
            match c.finish() {
                Ok(r) => self.written.extend(r),
                Err(e) => self.error = Some(format!("trigger statement {s}: {e}")),
            }
        } else if matches!(s, Statement::Call(_) | Statement::Execute { .. }) {
            self.error = Some(format!("trigger calls {s}: its writes are unknown"));
        }
        ControlFlow::Continue(())
    }
}

/// The mutable side of refreshing: one connection, and when the last good load began.
struct RefreshState {
    conn: Option<Conn>,
    last_started: Option<Instant>,
    /// The rows the current snapshot was built from, which a partial refresh patches.
    raw: Option<RawCatalog>,
}

/// Most connections parent lookups keep open ([`Catalog::parent_values`]).
pub const PARENT_CONNS: usize = 32;

/// What a parent lookup ([`Catalog::parent_values`]) came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Per row found, its pk and the slice key of the column's value (None for NULL).
    Found(Vec<(i128, Option<String>)>),
    /// No idle connection: not asked (the caller falls back; never waits).
    Busy,
    /// An error, a timeout or a doubt (a value the column's type cannot key).
    Failed,
}

/// No idle parent-lookup connection.
#[derive(Debug)]
struct Busy;

/// Run on each parent-lookup connection when it opens: a lookup never waits for a lock.
const PARENT_LOCK_WAIT: &str = "SET SESSION lock_wait_timeout = 0";

/// The parent lookups' connections: the idle ones, how many are open (idle or in use, or
/// being opened) and whether one is being opened in the background.
#[derive(Default)]
struct ParentConns {
    idle: Vec<Conn>,
    open: usize,
    opening: bool,
}

/// The schema catalog of one upstream server.
pub struct Catalog {
    opts: Opts,
    snapshot: ArcSwap<SchemaSnapshot>,
    loaded: AtomicBool,
    /// Serialises refreshes; waiters coalesce onto the next load (see [`Catalog::refresh`]).
    refresh: tokio::sync::Mutex<RefreshState>,
    /// Moves on every swap, so a caller can tell that a resolution raced a refresh.
    generation: AtomicU64,
    refreshes: AtomicU64,
    failures: AtomicU64,
    /// Reloads after a DDL under way or waiting: a table the snapshot does not know may
    /// have just been created with triggers or column defaults that write other tables.
    ddl_reloads: AtomicU64,
    /// What DDL seen adds to the temporary tables stored code may create
    /// ([`Catalog::note_ddl`]), numbered; a full load drops those numbered before it started.
    code_seq: AtomicU64,
    code_noted: Mutex<Vec<(u64, crate::policy::stored_code::Temporaries)>>,
    /// The code DDL statements seen, `(seq, statement, schema)`, numbered as `code_noted`
    /// and dropped with it: each next one is judged with them (a procedure created after a
    /// trigger that calls it, both before a reload).
    code_ddl: Mutex<Vec<(u64, String, String)>>,
    /// DDL whose reload has not landed ([`Catalog::register_ddl`]), and two lock-free
    /// summaries of it: whether any is pending (the fast path of every lookup) and the last
    /// number handed out (a reader compares it before and after it stamps).
    pending: Mutex<PendingDdl>,
    pending_any: AtomicBool,
    ddl_epoch: AtomicU64,
    /// Connections for derived slices' parent lookups ([`Catalog::parent_values`]): a pool
    /// per thread that asks (a session runtime is one thread, `workers`), so that a
    /// lookup's socket is polled by the thread that waits for it rather than woken across
    /// threads; each opened at its thread's first lookup.
    lookups: Mutex<Vec<(std::thread::ThreadId, mysql_async::Pool)>>,
    /// Idle connections for parent lookups ([`Catalog::parent_values`]), which never wait
    /// for one: a lookup that finds none idle is skipped (the child write falls back to
    /// every derived slice of its table) while one more is opened in the background.
    parent_conns: Arc<Mutex<ParentConns>>,
    /// `'user' at host:port`: qcache's own account, as messages name it.
    account: String,
    /// Why the last load failed, until one succeeds: logged when it starts failing (not once
    /// per read that finds nothing loaded), shown by `SHOW QCACHE STATUS` and `/readyz`.
    last_error: std::sync::Mutex<Option<String>>,
}

/// Counts one DDL reload for as long as it lives.
struct DdlReload<'a>(&'a AtomicU64);

impl<'a> DdlReload<'a> {
    fn new(n: &'a AtomicU64) -> Self {
        n.fetch_add(1, Ordering::AcqRel);
        DdlReload(n)
    }
}

impl Drop for DdlReload<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("loaded", &self.is_loaded())
            .field("generation", &self.generation())
            .finish()
    }
}

impl Catalog {
    /// A catalog for `upstream_addr` (`host:port`), not loaded yet: call [`Catalog::refresh`].
    pub fn new(upstream_addr: String, cfg: &InvalidationConfig) -> Arc<Catalog> {
        Arc::new(Catalog {
            opts: own_session_opts(&upstream_addr, cfg),
            snapshot: ArcSwap::from_pointee(SchemaSnapshot::default()),
            loaded: AtomicBool::new(false),
            refresh: tokio::sync::Mutex::new(RefreshState {
                conn: None,
                last_started: None,
                raw: None,
            }),
            generation: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            ddl_reloads: AtomicU64::new(0),
            code_seq: AtomicU64::new(0),
            code_noted: Mutex::new(Vec::new()),
            code_ddl: Mutex::new(Vec::new()),
            pending: Mutex::new(PendingDdl::default()),
            pending_any: AtomicBool::new(false),
            ddl_epoch: AtomicU64::new(0),
            lookups: Mutex::new(Vec::new()),
            parent_conns: Arc::new(Mutex::new(ParentConns::default())),
            account: format!("'{}' at {upstream_addr}", cfg.user),
            last_error: std::sync::Mutex::new(None),
        })
    }

    /// Why the catalog cannot be loaded now, naming qcache's account and the server's
    /// message; None once a load has succeeded.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|g| g.clone())
    }

    /// Records a failed load; logs an error only when the catalog starts failing, so that a
    /// wrong password is one line in the log rather than one per read.
    fn note_failure(&self, e: &CatalogError) -> bool {
        let why = format!(
            "qcache's own account {} cannot load the schema catalog: {e} (reads are not \
             cached until it can; set invalidation.user and invalidation.password, or \
             QCACHE_INVALIDATION_PASSWORD, and grant it what README.md lists)",
            self.account
        );
        let first = match self.last_error.lock() {
            Ok(mut g) => g.replace(why.clone()).is_none(),
            Err(_) => true,
        };
        if first {
            tracing::error!("{why}");
        } else {
            tracing::debug!("{why}");
        }
        first
    }

    fn note_success(&self) {
        let was = self.last_error.lock().ok().and_then(|mut g| g.take());
        if was.is_some() {
            tracing::info!(account = %self.account, "schema catalog loaded; reads are cached again");
        }
    }

    /// Reloads everything from `information_schema` and swaps it in atomically.
    ///
    /// Coalescing: at most one load runs at a time. A caller that finds a load already
    /// running waits for it, then starts its own only if no load *began after the caller
    /// asked* has completed meanwhile — so a burst of callers costs at most two loads, and
    /// every caller returns with a snapshot read after its call (a DDL it just forwarded is
    /// in it). A load that merely finished recently is not reused: it may predate the DDL.
    /// For the "unknown table" path, where any recent view is good enough, use
    /// [`Catalog::refresh_if_older`].
    ///
    /// On error the previous snapshot stays in place.
    pub async fn refresh(&self) -> Result<(), CatalogError> {
        let _counted = DdlReload::new(&self.ddl_reloads);
        self.refresh_since(Instant::now()).await
    }

    /// Like [`Catalog::refresh`], but reuses a load that began less than `max_age` ago. Use
    /// this for names `resolve_read` reported Unknown (e.g. 100 ms): a temporary table stays
    /// unknown forever, and must not cost a reload per query.
    pub async fn refresh_if_older(&self, max_age: Duration) -> Result<(), CatalogError> {
        let now = Instant::now();
        self.refresh_since(now.checked_sub(max_age).unwrap_or(now))
            .await
    }

    async fn refresh_since(&self, needed: Instant) -> Result<(), CatalogError> {
        let mut st = self.refresh.lock().await;
        if st.last_started.is_some_and(|t| t >= needed) {
            return Ok(());
        }
        self.full_load(&mut st).await
    }

    async fn full_load(&self, st: &mut RefreshState) -> Result<(), CatalogError> {
        let started = Instant::now();
        let noted = self.code_seq.load(Ordering::Acquire);
        // A kept connection may have been closed by the server (wait_timeout, restart) since
        // the last load: one failure on it earns a retry on a fresh one.
        let reused = st.conn.is_some();
        let mut attempt = tokio::time::timeout(FULL_LOAD_TIMEOUT, self.load(&mut st.conn)).await;
        if reused && matches!(attempt, Ok(Err(_))) {
            st.conn = None;
            attempt = tokio::time::timeout(FULL_LOAD_TIMEOUT, self.load(&mut st.conn)).await;
        }
        let raw = match attempt {
            Ok(Ok(raw)) => raw,
            Ok(Err(e)) => {
                st.conn = None;
                self.failures.fetch_add(1, Ordering::Relaxed);
                let _ = self.note_failure(&e);
                return Err(e);
            }
            Err(_) => {
                st.conn = None;
                self.failures.fetch_add(1, Ordering::Relaxed);
                let e = CatalogError::Timeout(FULL_LOAD_TIMEOUT);
                let _ = self.note_failure(&e);
                return Err(e);
            }
        };
        self.note_success();
        self.install(st, raw);
        self.code_noted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(seq, _)| *seq > noted);
        self.code_ddl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(seq, ..)| *seq > noted);
        st.last_started = Some(started);
        Ok(())
    }

    /// A catalog loaded from `raw`, with no server: for the tests of the sources that widen
    /// writes through it (`invalidation::binlog`).
    #[cfg(test)]
    pub(crate) fn loaded_from(raw: RawCatalog) -> Arc<Catalog> {
        let c = Catalog::new("127.0.0.1:1".into(), &InvalidationConfig::default());
        let mut st = c
            .refresh
            .try_lock()
            .expect("a new catalog is not refreshing");
        c.install(&mut st, raw);
        drop(st);
        c
    }

    /// Builds the snapshot of `raw` and swaps it in.
    fn install(&self, st: &mut RefreshState, raw: RawCatalog) {
        let snap = SchemaSnapshot::build(&raw);
        self.swap_in(st, raw, snap);
    }

    fn swap_in(&self, st: &mut RefreshState, raw: RawCatalog, snap: SchemaSnapshot) {
        for (schema, part) in &snap.schemas {
            for (t, why) in &part.unknown_writes {
                tracing::debug!(table = %format!("{schema}.{t}"), %why, "catalog: trigger or column expression not analysed; writes to this table invalidate conservatively");
            }
        }
        self.snapshot.store(Arc::new(snap));
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.loaded.store(true, Ordering::Release);
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        st.raw = Some(raw);
    }

    /// Reloads what `changed` covers, and only that: the relations it names (or the
    /// schemas it names, whole), the views among them, the triggers on them, their foreign
    /// keys and those of the tables referencing them; then re-resolves every view and write
    /// edge from the patched rows, so that the answers are those of a full reload (a view
    /// elsewhere reading a dropped table turns opaque). A DDL statement's OK waits for this
    /// instead of a reload of every table on the server, which grows with the server.
    ///
    /// Falls back to a full reload when nothing was loaded yet, when `changed` says
    /// `everything`, or names a relation qcache cannot look up exactly (a name with a
    /// backslash or beyond ASCII, whose lower-casing may differ from the server's), or when
    /// the partial load fails.
    pub async fn refresh_changed(&self, changed: &Changed) -> Result<(), CatalogError> {
        let _counted = DdlReload::new(&self.ddl_reloads);
        let needed = Instant::now();
        let exact = |s: &str| s.is_ascii() && !s.contains('\\');
        let readable = !changed.everything
            && (!changed.objects.is_empty() || !changed.schemas.is_empty())
            && changed.objects.iter().all(|(s, n)| exact(s) && exact(n))
            && changed.schemas.iter().all(|s| exact(s));
        let mut st = self.refresh.lock().await;
        if st.last_started.is_some_and(|t| t >= needed) {
            return Ok(());
        }
        let Some(base) = st.raw.take().filter(|_| readable) else {
            return self.full_load(&mut st).await;
        };
        let children = base.children_of(changed);
        let partial = tokio::time::timeout(
            LOAD_TIMEOUT,
            load_changed(&mut st.conn, &self.opts, changed, &children),
        )
        .await;
        match partial {
            Ok(Ok(fresh)) => {
                let loaded = needed.elapsed();
                let mut raw = base;
                let snap = self
                    .snapshot
                    .load()
                    .apply(&mut raw, changed, &children, fresh);
                self.swap_in(&mut st, raw, snap);
                tracing::debug!(?loaded, took = ?needed.elapsed(), ?changed, "catalog: partial refresh");
                Ok(())
            }
            _ => {
                st.conn = None;
                self.full_load(&mut st).await
            }
        }
    }

    /// Every answer the catalog gives, one line per relation it knows, in a canonical
    /// order: the read resolution and the write expansion of each, and the schema
    /// listings. Two catalogs with the same lines answer every lookup alike (tests compare a
    /// partial refresh with a full reload this way).
    pub fn answers(&self) -> Vec<String> {
        self.snapshot.load().answers()
    }

    async fn load(&self, slot: &mut Option<Conn>) -> Result<RawCatalog, CatalogError> {
        let conn = match slot {
            Some(c) => c,
            None => slot.insert(Conn::new(self.opts.clone()).await?),
        };
        let mut raw = RawCatalog::default();
        // Name columns are case-insensitive in information_schema: compare as the server does.
        let rows: Vec<Row> = conn
            .query(format!(
                "SELECT TABLE_SCHEMA, TABLE_NAME, {TABLE_KIND} FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            ))
            .await?;
        for mut r in rows {
            raw.tables
                .push((text(&mut r, 0), text(&mut r, 1), text(&mut r, 2)));
        }
        let rows: Vec<Row> = conn
            .query(format!(
                "SELECT {VIEW_COLUMNS} FROM information_schema.VIEWS \
                 WHERE TABLE_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            ))
            .await?;
        for r in rows {
            push_view(&mut raw, r);
        }
        let rows: Vec<Row> = conn
            .query(format!(
                "SELECT {COLUMNS_COLUMNS} FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            ))
            .await?;
        for r in rows {
            push_column(&mut raw, r);
        }
        let rows: Vec<Row> = conn
            .query(order_sources_sql(&format!(
                "TABLE_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            )))
            .await?;
        for r in rows {
            push_order_source(&mut raw, r);
        }
        let rows: Vec<Row> = conn
            .query(format!(
                "SELECT TRIGGER_SCHEMA, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT, \
                 SQL_MODE FROM information_schema.TRIGGERS \
                 WHERE EVENT_OBJECT_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            ))
            .await?;
        for mut r in rows {
            raw.triggers.push((
                text(&mut r, 0),
                text(&mut r, 1),
                text(&mut r, 2),
                text(&mut r, 3),
                text(&mut r, 4),
            ));
        }
        // Every schema's, `sys` too: a function of any schema may be called from any other.
        let rows: Vec<Row> = conn
            .query(
                "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION, SQL_MODE \
                 FROM information_schema.ROUTINES",
            )
            .await?;
        for mut r in rows {
            let schema = text(&mut r, 0).to_lowercase();
            let name = text(&mut r, 1).to_lowercase();
            let procedure = text(&mut r, 2).eq_ignore_ascii_case("PROCEDURE");
            let body = match r.take_opt::<Option<Vec<u8>>, _>(3) {
                Some(Ok(Some(b))) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            };
            let sql_mode = Some(text(&mut r, 4));
            raw.routines.push(crate::policy::stored_code::Routine {
                schema,
                name,
                procedure,
                body,
                sql_mode,
            });
        }
        let rows: Vec<Row> = conn
            .query(format!(
                "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, \
                 REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE \
                 FROM information_schema.REFERENTIAL_CONSTRAINTS \
                 WHERE CONSTRAINT_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            ))
            .await?;
        for mut r in rows {
            raw.foreign_keys.push((
                text(&mut r, 0),
                text(&mut r, 1),
                text(&mut r, 2),
                text(&mut r, 3),
                text(&mut r, 4),
                text(&mut r, 5),
            ));
        }
        Ok(raw)
    }

    /// True once a load has succeeded. Before that every read resolves Unknown and every write
    /// expands to None (conservative).
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Moves on every successful refresh. A caller that resolves, then stamps, can compare the
    /// generation before and after to detect that a refresh raced it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// (successful loads, failed loads)
    pub fn counters(&self) -> (u64, u64) {
        (
            self.refreshes.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }

    /// What a read of `tables` (lower-cased) depends on. Lock-free.
    pub fn resolve_read(&self, tables: &[TableName]) -> ReadResolution {
        if !self.is_loaded() {
            return ReadResolution::Unknown("catalog not loaded".into());
        }
        let snap = self.snapshot.load();
        let resolved = snap.resolve_read(tables);
        // Views nested in what it names, and their base tables, may be what a pending DDL
        // redefined or altered.
        let reached = match &resolved {
            ReadResolution::Tables(list) => list.as_slice(),
            _ => &[],
        };
        if self.pending_hit(&snap, tables, reached) {
            return ReadResolution::DdlPending;
        }
        resolved
    }

    /// Registers a DDL whose OK is about to reach a client (or that the binlog tail is about
    /// to report passed): until [`ddl_landed`](Self::ddl_landed) with the number returned,
    /// what it changed is unknown ([`ddl_pending`](Self::ddl_pending)).
    pub fn register_ddl(&self, changed: &Changed) -> u64 {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let seq = p.register(changed);
        self.pending_any.store(true, Ordering::SeqCst);
        self.ddl_epoch.store(seq, Ordering::SeqCst);
        seq
    }

    /// The reload after DDL `seq` is done (swapped in, its second bump applied), or failed
    /// (and everything was invalidated): the catalog vouches for what it named again.
    pub fn ddl_landed(&self, seq: u64) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.landed(seq);
        self.pending_any.store(p.any_pending(), Ordering::SeqCst);
    }

    /// Whether some DDL's reload has not landed (tests wait for this to turn false).
    pub fn ddl_pending_any(&self) -> bool {
        self.pending_any.load(Ordering::SeqCst)
    }

    /// The number of the last DDL registered: a read that planned against the catalog, then
    /// read its stamps, stores nothing if this moved in between (the DDL's first bump may
    /// precede the stamps while the plan predates the DDL).
    pub fn ddl_epoch(&self) -> u64 {
        self.ddl_epoch.load(Ordering::SeqCst)
    }

    /// Whether the catalog cannot vouch for `t` now: a pending DDL named it (or its schema, or
    /// could not say what it changed), or some DDL is pending and the catalog does not list
    /// it (that DDL may have created it).
    pub fn ddl_pending(&self, t: &TableName) -> bool {
        self.pending_hit(&self.snapshot.load(), std::slice::from_ref(t), &[])
    }

    /// The one pending rule: a name in `named` the catalog does not vouch for
    /// ([`ddl_pending`](Self::ddl_pending)), or a relation in `reached` (what `named`
    /// resolve or expand to through the snapshot) a pending DDL named.
    fn pending_hit(
        &self,
        snap: &SchemaSnapshot,
        named: &[TableName],
        reached: &[TableName],
    ) -> bool {
        if !self.ddl_pending_any() {
            return false;
        }
        let p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.any_pending()
            && (named.iter().any(|t| snap.kind(t).is_none() || p.covers(t))
                || reached.iter().any(|t| p.covers(t)))
    }

    /// Tables a write to `tables` changes: the tables themselves, plus what their triggers
    /// write and FK cascades reach, transitively (cycle-safe). `None` = a trigger body we
    /// couldn't analyse, or no catalog loaded: the caller invalidates conservatively.
    ///
    /// As the snapshot has them, pending DDL or not: for a DDL's own bumps (the first, planned
    /// before it is sent, and the second, after its reload). A data change asks
    /// [`expand_data_write`](Self::expand_data_write).
    pub fn expand_write(&self, tables: &[TableName]) -> Option<Vec<TableName>> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot.load().expand_write(tables)
    }

    /// [`Catalog::expand_write`] for a data change (a session's, or a commit the binlog tail
    /// read), which may race a DDL: while a reload after a DDL is under way or a DDL is
    /// pending, a table the snapshot does not know counts as unknown writes, since it may be
    /// one that DDL just created with a trigger or a column default that writes other
    /// tables; so does a table a pending DDL named, or one the write reaches through the
    /// snapshot's triggers and cascades (it may have gained a trigger). (A temporary table or
    /// one that does not exist costs an extra invalidation in that window, no more.)
    ///
    /// Otherwise, while DDL is pending, the relations pending DDL named are bumped too: a
    /// foreign key with a cascade is declared on the child table (`ALTER TABLE child ADD
    /// FOREIGN KEY … REFERENCES parent ON DELETE CASCADE`), so a write to a parent the
    /// snapshot knows no edge from may reach a child that DDL named, and nothing else.
    pub fn expand_data_write(&self, tables: &[TableName]) -> Option<Vec<TableName>> {
        if !self.is_loaded() {
            return None;
        }
        let snap = self.snapshot.load();
        if self.ddl_reloads.load(Ordering::Acquire) > 0
            && tables.iter().any(|t| snap.kind(t).is_none())
        {
            return None;
        }
        let mut all = snap.expand_write(tables)?;
        if !self.ddl_pending_any() {
            return Some(all);
        }
        let named = {
            let p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if !p.any_pending() {
                return Some(all);
            }
            let hit = tables.iter().any(|t| snap.kind(t).is_none() || p.covers(t))
                || all.iter().any(|t| p.covers(t));
            if hit {
                return None;
            }
            p.named()?
        };
        if !named.is_empty() {
            all.extend(snap.expand_write(&named)?);
            all.sort();
            all.dedup();
        }
        Some(all)
    }

    /// A base table's column (lower-cased names), for row slices. None when unknown.
    pub fn column(&self, t: &TableName, column: &str) -> Option<ColumnInfo> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot
            .load()
            .columns(t)?
            .by_name
            .get(column)
            .cloned()
    }

    /// What `policy::timecol` asks of the relations among `tables` (a plan's tables: base
    /// tables and views, which the catalog resolved; the privilege stamps among them name
    /// no relation and are left out): one per relation, None where the catalog knows
    /// nothing of it. Before the catalog is loaded, every one is unknown.
    pub fn temporals<'t>(
        &self,
        tables: impl Iterator<Item = (&'t str, &'t str)>,
    ) -> Vec<Option<Arc<Temporals>>> {
        let loaded = self.is_loaded();
        let snap = self.snapshot.load();
        tables
            .filter_map(|(schema, name)| {
                if !loaded {
                    return Some(None);
                }
                let part = snap.schemas.get(schema)?;
                if !part.relations.contains_key(name) {
                    return None;
                }
                Some(part.temporals.get(name).cloned())
            })
            .collect()
    }

    /// Asks each of `asks` in order ([`parent_values`](Self::parent_values): never waits for
    /// a connection); `busy` (the debug fault `BusyParentLookups`) answers each as if no
    /// connection were idle.
    pub async fn parent_lookups(
        &self,
        asks: &[Vec<(MapKey, Vec<i128>)>],
        busy: bool,
    ) -> Vec<Vec<Lookup>> {
        let mut out = Vec::with_capacity(asks.len());
        for table in asks {
            let mut found = Vec::with_capacity(table.len());
            for (key, xs) in table {
                found.push(match busy {
                    true => Lookup::Busy,
                    false => {
                        let parent = (key.schema.clone(), key.table.clone());
                        self.parent_values(&parent, &key.pk, &key.col, xs).await
                    }
                });
            }
            out.push(found);
        }
        out
    }

    /// Asks the server, on qcache's own connection, which value `col` holds in the rows of
    /// `table` whose single-column primary key `pk` is one of `xs`: per row found, its pk and
    /// the slice key of its value (None for NULL). None on any error or doubt (a value the
    /// column's type cannot key). For derived slices (`cache::fkmap`): the caller judges the
    /// answer by a window read before it asked.
    ///
    /// It never waits for a connection: with none idle it answers [`Lookup::Busy`] at once
    /// (and one more is opened in the background, up to [`PARENT_CONNS`]), so that a
    /// write's OK never queues behind other sessions' lookups. Only a lookup that finds no
    /// connection open at all (the first, or after all were lost) opens one and waits.
    pub async fn parent_values(
        &self,
        table: &TableName,
        pk: &str,
        col: &str,
        xs: &[i128],
    ) -> Lookup {
        match self.parent_values_inner(table, pk, col, xs).await {
            Ok(Some(v)) => Lookup::Found(v),
            Ok(None) => Lookup::Failed,
            Err(Busy) => Lookup::Busy,
        }
    }

    async fn parent_values_inner(
        &self,
        table: &TableName,
        pk: &str,
        col: &str,
        xs: &[i128],
    ) -> Result<Option<Vec<(i128, Option<String>)>>, Busy> {
        let Some(info) = self.column(table, col) else {
            return Ok(None);
        };
        if xs.is_empty() || !info.ty.sliceable() {
            return Ok(None);
        }
        let q = |s: &str| format!("`{}`", s.replace('`', "``"));
        let list: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
        let sql = format!(
            "SELECT {pk}, {col} FROM {}.{} WHERE {pk} IN ({})",
            q(&table.0),
            q(&table.1),
            list.join(","),
            pk = q(pk),
            col = q(col),
        );
        let mut conn = self.parent_conn().await?;
        // Both as text: a typed conversion panics on a value it cannot hold (a BIGINT
        // UNSIGNED key past i64::MAX).
        type Text = Option<Vec<u8>>;
        let asked = tokio::time::timeout(Duration::from_secs(1), conn.query(sql)).await;
        let rows: Vec<(Text, Text)> = match asked {
            Ok(Ok(rows)) => {
                self.parent_conn_back(conn);
                rows
            }
            // Refused by the server (a lock it would have waited for: `PARENT_LOCK_WAIT`):
            // the connection is as good as before.
            Ok(Err(mysql_async::Error::Server(_))) => {
                self.parent_conn_back(conn);
                return Ok(None);
            }
            // A connection that failed or timed out (its answer may still come) is dropped.
            _ => {
                self.parent_conn_lost();
                return Ok(None);
            }
        };
        let parse = || {
            let mut out = Vec::with_capacity(rows.len());
            for (x, v) in rows {
                let x: i128 = std::str::from_utf8(&x?).ok()?.parse().ok()?;
                let key = match v {
                    None => None,
                    Some(b) => {
                        let s = String::from_utf8(b).ok()?;
                        let lit = match info.ty {
                            ColType::Int { .. } => crate::analysis::slices::Lit::Int(s),
                            _ => crate::analysis::slices::Lit::Str(s),
                        };
                        Some(crate::analysis::slices::normalize(&info.ty, &lit)?)
                    }
                };
                out.push((x, key));
            }
            Some(out)
        };
        Ok(parse())
    }

    /// An idle parent-lookup connection, never waiting for one: Busy when none is idle
    /// (then one more is opened in the background, up to [`PARENT_CONNS`]). Only when none
    /// was ever opened (or all were lost) does the caller open one and wait for it: there is
    /// no other session's lookup to queue behind then.
    async fn parent_conn(&self) -> Result<Conn, Busy> {
        enum Next {
            Inline,
            Background,
            Skip,
        }
        let next = {
            let mut p = self.parent_conns.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = p.idle.pop() {
                return Ok(c);
            }
            if p.open == 0 {
                p.open = 1;
                Next::Inline
            } else if p.open < PARENT_CONNS && !p.opening {
                p.open += 1;
                p.opening = true;
                Next::Background
            } else {
                Next::Skip
            }
        };
        let opts = self.opts.clone();
        let open = async move {
            let open = async {
                let mut c = Conn::new(opts).await.ok()?;
                // A table lock held on the parent (another session's `LOCK TABLES … WRITE`,
                // a DDL's pending metadata lock) refuses the lookup at once (MariaDB; MySQL
                // takes 0 as 1 s) instead of holding it to the 1 s timeout below, and with
                // it the client's OK or the derived slices: the write falls back.
                let _ = c.query_drop(PARENT_LOCK_WAIT).await;
                Some(c)
            };
            tokio::time::timeout(Duration::from_secs(1), open)
                .await
                .ok()
                .flatten()
        };
        match next {
            Next::Inline => match open.await {
                Some(c) => Ok(c),
                None => {
                    self.parent_conn_lost();
                    Err(Busy)
                }
            },
            Next::Background => {
                let conns = self.parent_conns.clone();
                tokio::spawn(async move {
                    let c = open.await;
                    let mut p = conns.lock().unwrap_or_else(|e| e.into_inner());
                    p.opening = false;
                    match c {
                        Some(c) => p.idle.push(c),
                        None => p.open = p.open.saturating_sub(1),
                    }
                });
                Err(Busy)
            }
            Next::Skip => Err(Busy),
        }
    }

    fn parent_conn_back(&self, c: Conn) {
        let mut p = self.parent_conns.lock().unwrap_or_else(|e| e.into_inner());
        p.idle.push(c);
    }

    fn parent_conn_lost(&self) {
        let mut p = self.parent_conns.lock().unwrap_or_else(|e| e.into_inner());
        p.open = p.open.saturating_sub(1);
    }

    /// The first `max` rows of `sql` as text, asked on qcache's own connection (the
    /// verifier of patched entries, `policy::patch`). None on any error or after 5 s.
    pub async fn rows_text(&self, sql: String, max: usize) -> Option<Vec<Vec<Option<Vec<u8>>>>> {
        let pool = self.lookup_pool();
        let ask = async {
            let mut conn = pool.get_conn().await.ok()?;
            let mut rows: Vec<mysql_async::Row> = conn.query(sql).await.ok()?;
            rows.truncate(max);
            rows.iter()
                .map(|row| {
                    (0..row.len())
                        .map(|i| match row.as_ref(i)? {
                            mysql_async::Value::NULL => Some(None),
                            mysql_async::Value::Bytes(b) => Some(Some(b.clone())),
                            mysql_async::Value::Int(n) => Some(Some(n.to_string().into_bytes())),
                            mysql_async::Value::UInt(n) => Some(Some(n.to_string().into_bytes())),
                            _ => None,
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .collect::<Option<Vec<_>>>()
        };
        tokio::time::timeout(Duration::from_secs(5), ask)
            .await
            .ok()?
    }

    /// This thread's pool for parent lookups. Its connections are not reset when they go
    /// back to it: a lookup changes no session state, and the reset would be one more round
    /// trip to the server per lookup.
    fn lookup_pool(&self) -> mysql_async::Pool {
        let me = std::thread::current().id();
        let mut pools = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = pools.iter().find(|(t, _)| *t == me) {
            return p.clone();
        }
        // At most 32 connections per thread: lookups outrunning the server wait for one
        // (and past their 1 s limit fall back) rather than open ever more. Idle ones are
        // kept (up to 32, for a minute): without an idle TTL the driver keeps only `min`
        // idle and disconnects every other one on its return, and with `min` 0 that was a
        // new connection (TCP, handshake, authentication) per lookup.
        let constraints = mysql_async::PoolConstraints::new(1, 32).unwrap_or_default();
        let opts = mysql_async::OptsBuilder::from_opts(self.opts.clone()).pool_opts(
            mysql_async::PoolOpts::default()
                .with_reset_connection(false)
                .with_constraints(constraints)
                .with_inactive_connection_ttl(Duration::from_secs(60)),
        );
        let pool = mysql_async::Pool::new(opts);
        pools.push((me, pool.clone()));
        pool
    }

    /// A base table's primary key when it is a single column (lower-cased).
    pub fn primary_key(&self, t: &TableName) -> Option<String> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot.load().columns(t)?.pk.clone()
    }

    /// A base table's primary key's columns, every one (lower-cased); None when it has
    /// none, or the catalog does not know the table.
    /// Only for a base table (a view shows no key) with no DDL pending or reloading (the
    /// key may just have changed).
    pub fn primary_key_columns(&self, t: &TableName) -> Option<Vec<String>> {
        if !self.is_loaded() || self.ddl_reloads.load(Ordering::Acquire) != 0 || self.ddl_pending(t)
        {
            return None;
        }
        let snap = self.snapshot.load();
        if snap.kind(t) != Some(Kind::Base) || snap.is_ambiguous(t) {
            return None;
        }
        let c = snap.columns(t)?;
        (!c.pk_all.is_empty()).then(|| c.pk_all.clone())
    }

    /// A base table's columns in the order a column-less INSERT fills them.
    pub fn column_order(&self, t: &TableName) -> Option<Vec<String>> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot.load().columns(t)?.order.clone()
    }

    /// Whether a read of `tables` (qualified, lower-cased) runs stored code through a view
    /// it names: the session plans it as a write to unknown tables, as for a read whose own
    /// text calls a stored function. False before the catalog is loaded, when no read is
    /// cached at all.
    /// True for a relation the catalog cannot vouch for while DDL is pending
    /// ([`ddl_pending`](Self::ddl_pending)): it may just have been redefined as a view that
    /// calls a writing function.
    pub fn read_runs_code(&self, tables: &[TableName]) -> bool {
        if !self.is_loaded() {
            return false;
        }
        let snap = self.snapshot.load();
        if self.ddl_pending_any() {
            let resolved = snap.resolve_read(tables);
            let reached = match &resolved {
                ReadResolution::Tables(list) => list.as_slice(),
                _ => &[],
            };
            if self.pending_hit(&snap, tables, reached) {
                return true;
            }
        }
        snap.read_runs_code(tables)
    }

    /// Whether a statement other than a plain read (a write's query or subquery, a SET's or
    /// DO's subquery, CREATE … SELECT) may read a view whose reading runs stored code: one
    /// of its names is such a view's, in any schema (a name that only looks alike costs an
    /// invalidation, never a stale read). Before the first load, whether it has a query.
    pub fn mentions_code_view(&self, sql: &[u8]) -> bool {
        if !self.is_loaded() {
            return crate::analysis::contains_ci(sql, b"select");
        }
        let snap = self.snapshot.load();
        !snap.code_views.is_empty()
            && crate::analysis::any_name(sql, |n| snap.code_views.contains(n))
    }

    /// What a data change a session is about to send to `tables` may fire (`policy::context::
    /// context_stale_after`). Unknown when the catalog is not loaded, or while a DDL's reload
    /// is under way or a DDL pending names one of them or what they reach (a table may just
    /// have gained a trigger).
    pub fn write_triggers(&self, tables: &[TableName]) -> WriteTriggers {
        if !self.is_loaded() || self.ddl_reloads.load(Ordering::Acquire) > 0 {
            return WriteTriggers::Unknown;
        }
        let snap = self.snapshot.load();
        if self.ddl_pending_any() {
            let reached = snap.expand_write(tables).unwrap_or_default();
            if self.pending_hit(&snap, tables, &reached) {
                return WriteTriggers::Unknown;
            }
        }
        snap.write_triggers(tables)
    }

    /// Whether a data change to `tables` runs a trigger as the catalog's snapshot knows them,
    /// or DDL seen since it was read added stored code that creates temporary tables
    /// ([`note_ddl`](Self::note_ddl)): unlike [`write_triggers`](Self::write_triggers),
    /// not unknown while a reload is under way, since a trigger created meanwhile is in
    /// those notes.
    pub fn write_may_create_temporaries(&self, tables: &[TableName]) -> bool {
        if !self.is_loaded() {
            return true;
        }
        let snap = self.snapshot.load();
        if self.ddl_pending_any() {
            // A pending DDL may have given them a trigger that creates one.
            let reached = snap.expand_write(tables).unwrap_or_default();
            if self.pending_hit(&snap, tables, &reached) {
                return true;
            }
        }
        // Read once: two reads could disagree when DDL is noted between them.
        let noted = !self
            .code_noted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if *snap.temporaries == crate::policy::stored_code::Temporaries::None && !noted {
            return false;
        }
        noted || snap.write_triggers(tables) != WriteTriggers::None
    }

    /// The temporary tables stored code that runs now may create (`stored_code`): what the
    /// snapshot read, and what DDL seen since added ([`note_ddl`](Self::note_ddl)). None
    /// before the first load.
    pub fn code_temporaries(&self) -> Option<crate::policy::stored_code::Temporaries> {
        if !self.is_loaded() {
            return None;
        }
        let snap = self.snapshot.load();
        let noted = self.code_noted.lock().unwrap_or_else(|e| e.into_inner());
        Some(
            noted
                .iter()
                .fold((*snap.temporaries).clone(), |all, (_, t)| all.union(t)),
        )
    }

    /// What stored code on the server may do to a session's `query_cache_type`
    /// (`policy::qct`): judged with the snapshot's routines and triggers and the code DDL
    /// seen since (whose bodies count at once); unknown before the first load.
    /// `call`: the procedure a CALL names, (schema, name) lower-cased, when qcache can
    /// read it: judged alone (its body), rather than with every procedure on the server
    /// (MariaDB's own `sys` and `mysql` schemas hold procedures that run dynamic SQL).
    pub fn qct_code_facts(&self, call: Option<(&str, &str)>) -> crate::policy::qct::CodeFacts {
        if !self.is_loaded() {
            return Default::default();
        }
        let snap = self.snapshot.load();
        let (mut named, mut dynamic) = snap.qct_code;
        if let Some((schema, name)) = call {
            let body = snap
                .routines
                .iter()
                .find(|r| r.procedure && r.schema == schema && r.name == name)
                .map(|r| r.body.as_deref());
            // Not found: created since the load (noted below), or the CALL fails.
            dynamic = body.is_none_or(crate::policy::qct::body_dynamic);
        }
        let seen = self.code_ddl.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.is_empty() {
            let (n, d) = crate::policy::stored_code::sets_qct(
                &[],
                std::iter::empty(),
                seen.iter().map(|(_, q, _)| q.as_str()),
            );
            (named, dynamic) = (named || n, dynamic || d);
        }
        crate::policy::qct::CodeFacts {
            loaded: true,
            named,
            dynamic,
        }
    }

    /// Whether a procedure a CALL runs may create a temporary table (of any engine, a MERGE
    /// over base tables included): one's body says TEMPORARY or cannot be read, code was
    /// created since the snapshot, or the catalog is not loaded yet.
    pub fn procedures_may_create_temporaries(&self) -> bool {
        if !self.is_loaded() {
            return true;
        }
        if !self
            .code_noted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            return true;
        }
        self.snapshot.load().routines.iter().any(|r| {
            r.procedure
                && r.body
                    .as_deref()
                    .is_none_or(|b| crate::analysis::contains_ci(b.as_bytes(), b"temporary"))
        })
    }

    /// A DDL statement seen in `schema` (before it is sent through qcache, or as the binlog
    /// tail reads it): what the code it creates may create, judged with the snapshot's
    /// routines and triggers and the code DDL seen since (`stored_code::ddl_temporaries`),
    /// counts from now on, not only once a reload read it. The next full load that started
    /// after this replaces the note.
    pub fn note_ddl(&self, sql: &str, schema: &str) {
        use crate::policy::stored_code::{creates_code, ddl_temporaries, Temporaries};
        /// Code DDL kept between full loads; past it, notes are Any (fail closed).
        const MAX_CODE_DDL: usize = 256;
        if !creates_code(sql) {
            return;
        }
        let snap = self.snapshot.load();
        // Held while judging, so that two notes see each other in order.
        let mut seen = self.code_ddl.lock().unwrap_or_else(|e| e.into_inner());
        let seq = self.code_seq.fetch_add(1, Ordering::AcqRel) + 1;
        let t = if seen.len() >= MAX_CODE_DDL {
            Temporaries::Any
        } else {
            seen.push((seq, sql.to_string(), schema.to_string()));
            let ddl: Vec<(&str, &str)> = seen
                .iter()
                .map(|(_, q, s)| (q.as_str(), s.as_str()))
                .collect();
            ddl_temporaries(
                &ddl,
                &snap.routines,
                snap.trigger_code
                    .iter()
                    .map(|(s, b, m)| (s.as_str(), b.as_str(), Some(m.as_str()))),
            )
        };
        if t != Temporaries::None {
            self.code_noted
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((seq, t));
        }
    }

    /// Whether a write's own statement (or row image) names the rows it changes in `t`
    /// (no trigger on it, no cascade back to it). False when the catalog is not loaded.
    pub fn rows_knowable(&self, t: &TableName) -> bool {
        // While a DDL's reload is under way, or a DDL naming it is pending, the table may just
        // have gained a trigger.
        self.is_loaded()
            && self.ddl_reloads.load(Ordering::Acquire) == 0
            && !self.ddl_pending(t)
            && self.snapshot.load().rows_knowable(t)
    }

    /// Whether an UPDATE of `t` through qcache changes only the columns it assigns: its rows
    /// are knowable ([`rows_knowable`](Self::rows_knowable): no trigger, no cascade back),
    /// it is a plain BASE TABLE whose columns the catalog knows, none of which the server
    /// sets itself (ON UPDATE, generated, invisible, system versioning).
    pub fn update_changes_only_set(&self, t: &TableName) -> bool {
        self.rows_knowable(t) && self.columns_plain(t, false)
    }

    /// Whether an UPDATE row image of `t` shows every column that changed (ON UPDATE
    /// columns are in the image; generated and invisible ones may not be): the caller
    /// still treats a column missing from an image as changed.
    pub fn images_show_changes(&self, t: &TableName) -> bool {
        self.rows_knowable(t) && self.columns_plain(t, true)
    }

    /// Whether an UPDATE of `t` that changes exactly `changed` leaves its rows where they
    /// were in every order the server can return them (`policy::order`): false when it
    /// changes a column of an index or of the partitioning, or when the catalog does not
    /// know them. Asked by every path that would bump an UPDATE by its columns, with the
    /// instance's fault switches (`Fault::RowOrder` makes every such UPDATE keep the order).
    pub fn update_keeps_order(
        &self,
        t: &TableName,
        changed: &[String],
        faults: &crate::faults::Faults,
    ) -> bool {
        if faults.row_order_broken() {
            return true;
        }
        if !self.is_loaded() {
            return false;
        }
        let snap = self.snapshot.load();
        let order = snap.columns(t).and_then(|c| c.order_columns.as_ref());
        crate::policy::order::update_keeps_order(changed, order)
    }

    fn columns_plain(&self, t: &TableName, on_update_ok: bool) -> bool {
        let snap = self.snapshot.load();
        if snap.part(t).is_none_or(|p| p.special.contains(&t.1)) {
            return false;
        }
        snap.columns(t)
            .is_some_and(|c| !c.all.is_empty() && !c.implicit && (on_update_ok || !c.on_update))
    }

    /// A base table's columns in ordinal order, as row images carry them.
    pub fn columns_by_ordinal(&self, t: &TableName) -> Option<Arc<[(String, ColumnInfo)]>> {
        if !self.is_loaded() {
            return None;
        }
        let snap = self.snapshot.load();
        let all = &snap.columns(t)?.all;
        (!all.is_empty()).then(|| all.clone())
    }

    /// Tables a write to `tables` reaches through triggers and cascades (not the tables
    /// themselves unless an edge leads back to them): their rows are not in any statement
    /// or row image qcache saw.
    pub fn reached_by_edges(&self, tables: &[TableName]) -> HashSet<TableName> {
        let snap = self.snapshot.load();
        let mut seen: HashSet<TableName> = HashSet::new();
        let mut queue: Vec<&TableName> = tables.iter().flat_map(|t| snap.edges(t)).collect();
        while let Some(n) = queue.pop() {
            if seen.insert(n.clone()) {
                queue.extend(snap.edges(n));
            }
        }
        seen
    }

    /// Every base table and view of `schema` (lower-cased), sorted.
    pub fn schema_tables(&self, schema: &str) -> Vec<String> {
        self.snapshot
            .load()
            .schemas
            .get(schema)
            .map(|p| p.names.clone())
            .unwrap_or_default()
    }
}

/// A string literal for a name known to hold no backslash (see [`Catalog::refresh_changed`]):
/// quotes are doubled, which every sql_mode reads alike.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The server's current rows for what `changed` covers, plus the foreign keys of
/// `children`, in three round trips whatever the change names (two for whole schemas):
/// the schemas' spellings; the named relations' spellings from each schema's name listing
/// (which opens no table), with whole schemas' rows; then every named relation's rows by
/// exact name (`TABLE_SCHEMA = … AND TABLE_NAME = …` lets the server open just that table),
/// each round trip one multi-statement. Names compare by case on most servers, and qcache's
/// are lower-cased, hence the listings.
async fn load_changed(
    slot: &mut Option<Conn>,
    opts: &Opts,
    changed: &Changed,
    children: &[(String, String)],
) -> Result<RawCatalog, CatalogError> {
    let conn = match slot {
        Some(c) => c,
        None => slot.insert(Conn::new(opts.clone()).await?),
    };
    let skipped = |s: &str| {
        matches!(
            s,
            "information_schema" | "performance_schema" | "mysql" | "sys"
        )
    };
    for (s, t) in children {
        if s.contains('\\') || t.contains('\\') {
            return Err(CatalogError::Unreadable(format!("{s}.{t}")));
        }
    }
    let mut lowered: Vec<&str> = changed
        .objects
        .iter()
        .map(|(s, _)| s.as_str())
        .chain(changed.schemas.iter().map(String::as_str))
        .filter(|s| !skipped(s))
        .collect();
    lowered.sort();
    lowered.dedup();
    let mut raw = RawCatalog::default();
    // (schema, name): the relations to read by exact name, and the children's foreign keys.
    let mut exact: Vec<(String, String)> = Vec::new();
    if !lowered.is_empty() {
        let list: Vec<String> = lowered.iter().map(|s| lit(s)).collect();
        let spellings: Vec<Row> = conn
            .query(format!(
                "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
                 WHERE LOWER(SCHEMA_NAME) IN ({})",
                list.join(", ")
            ))
            .await?;
        let mut batch = Batch::default();
        for mut r in spellings {
            let schema = text(&mut r, 0);
            let lower_schema = schema.to_lowercase();
            if skipped(&lower_schema) {
                continue;
            }
            if changed.schemas.contains(&lower_schema) {
                relation_queries(&mut batch, &schema, None);
            } else {
                let names: Vec<String> = changed
                    .objects
                    .iter()
                    .filter(|(s, _)| *s == lower_schema)
                    .map(|(_, n)| lit(n))
                    .collect();
                batch.push(
                    Sink::Names(schema.clone()),
                    format!(
                        "SELECT TABLE_NAME FROM information_schema.TABLES \
                         WHERE TABLE_SCHEMA = {} AND LOWER(TABLE_NAME) IN ({})",
                        lit(&schema),
                        names.join(", ")
                    ),
                );
            }
        }
        batch.run(conn, &mut raw, &mut exact).await?;
    }
    let mut batch = Batch::default();
    for (schema, name) in &exact {
        relation_queries(&mut batch, schema, Some(name));
    }
    for (s, t) in children {
        if !skipped(&s.to_lowercase()) {
            batch.push(Sink::ForeignKeys, foreign_keys_sql(s, Some(t)));
        }
    }
    batch.run(conn, &mut raw, &mut exact).await?;
    Ok(raw)
}

/// Where the rows of one statement of a [`Batch`] go.
enum Sink {
    /// Names of relations of this schema, to read next by exact name.
    Names(String),
    Tables,
    Views,
    Triggers,
    ForeignKeys,
    Columns,
    OrderSources,
}

/// Statements sent as one multi-statement: one round trip for all of them.
#[derive(Default)]
struct Batch {
    sinks: Vec<Sink>,
    sql: String,
}

impl Batch {
    fn push(&mut self, sink: Sink, sql: String) {
        if !self.sql.is_empty() {
            self.sql.push_str(";\n");
        }
        self.sql.push_str(&sql);
        self.sinks.push(sink);
    }

    async fn run(
        self,
        conn: &mut Conn,
        raw: &mut RawCatalog,
        names: &mut Vec<(String, String)>,
    ) -> Result<(), CatalogError> {
        if self.sinks.is_empty() {
            return Ok(());
        }
        let mut result = conn.query_iter(self.sql).await?;
        for sink in self.sinks {
            let rows: Vec<Row> = result.collect().await?;
            for mut r in rows {
                match &sink {
                    Sink::Names(schema) => names.push((schema.clone(), text(&mut r, 0))),
                    Sink::Tables => {
                        raw.tables
                            .push((text(&mut r, 0), text(&mut r, 1), text(&mut r, 2)))
                    }
                    Sink::Views => push_view(raw, r),
                    Sink::Triggers => raw.triggers.push((
                        text(&mut r, 0),
                        text(&mut r, 1),
                        text(&mut r, 2),
                        text(&mut r, 3),
                        text(&mut r, 4),
                    )),
                    Sink::ForeignKeys => raw.foreign_keys.push((
                        text(&mut r, 0),
                        text(&mut r, 1),
                        text(&mut r, 2),
                        text(&mut r, 3),
                        text(&mut r, 4),
                        text(&mut r, 5),
                    )),
                    Sink::Columns => push_column(raw, r),
                    Sink::OrderSources => push_order_source(raw, r),
                }
            }
        }
        result.drop_result().await?;
        Ok(())
    }
}

/// The statements that read one relation's rows (`name`), or a whole schema's (None).
/// Views and triggers are both asked for: a relation's kind is not known before its row.
fn relation_queries(batch: &mut Batch, schema: &str, name: Option<&str>) {
    let and = |col: &str| name.map_or(String::new(), |n| format!(" AND {col} = {}", lit(n)));
    let schema_lit = lit(schema);
    batch.push(
        Sink::Tables,
        format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, {TABLE_KIND} FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = {schema_lit}{}",
            and("TABLE_NAME")
        ),
    );
    batch.push(
        Sink::Views,
        format!(
            "SELECT {VIEW_COLUMNS} FROM information_schema.VIEWS \
             WHERE TABLE_SCHEMA = {schema_lit}{}",
            and("TABLE_NAME")
        ),
    );
    batch.push(
        Sink::Triggers,
        format!(
            "SELECT TRIGGER_SCHEMA, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT, \
             SQL_MODE FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = {schema_lit}{}",
            and("EVENT_OBJECT_TABLE")
        ),
    );
    batch.push(Sink::ForeignKeys, foreign_keys_sql(schema, name));
    batch.push(
        Sink::Columns,
        format!(
            "SELECT {COLUMNS_COLUMNS} FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = {schema_lit}{}",
            and("TABLE_NAME")
        ),
    );
    batch.push(
        Sink::OrderSources,
        order_sources_sql(&format!("TABLE_SCHEMA = {schema_lit}{}", and("TABLE_NAME"))),
    );
}

/// What decides the order rows can come back in, of the tables `filter` (a condition on
/// TABLE_SCHEMA / TABLE_NAME) selects: every index's columns (`I`; an expression's part has
/// no COLUMN_NAME) and each partitioned table's partitioning and subpartitioning
/// expressions (`P`), as [`RawCatalog::order_sources`] holds them.
fn order_sources_sql(filter: &str) -> String {
    format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME, 'I', COLUMN_NAME FROM information_schema.STATISTICS \
         WHERE {filter} \
         UNION ALL \
         SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME, 'P', \
         CONCAT(IFNULL(PARTITION_EXPRESSION, ''), ' ', IFNULL(SUBPARTITION_EXPRESSION, '')) \
         FROM information_schema.PARTITIONS WHERE PARTITION_METHOD IS NOT NULL AND {filter}"
    )
}

fn push_order_source(raw: &mut RawCatalog, mut r: Row) {
    raw.order_sources.push((
        text(&mut r, 0),
        text(&mut r, 1),
        text(&mut r, 2),
        text(&mut r, 3),
    ));
}

/// The foreign keys of table `name` of `schema` (all of the schema's when None), as children.
fn foreign_keys_sql(schema: &str, name: Option<&str>) -> String {
    let and = name.map_or(String::new(), |n| format!(" AND TABLE_NAME = {}", lit(n)));
    format!(
        "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, \
         REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE \
         FROM information_schema.REFERENTIAL_CONSTRAINTS \
         WHERE CONSTRAINT_SCHEMA = {}{and}",
        lit(schema)
    )
}

/// What the catalog reads of a view: its definition, and whose privileges it runs with.
const VIEW_COLUMNS: &str = "TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION, SECURITY_TYPE, DEFINER";

fn push_view(raw: &mut RawCatalog, mut r: Row) {
    let (schema, name) = (text(&mut r, 0), text(&mut r, 1));
    raw.views
        .push((schema.clone(), name.clone(), text(&mut r, 2)));
    if text(&mut r, 3).eq_ignore_ascii_case("DEFINER") {
        raw.definers.push((schema, name, text(&mut r, 4)));
    }
}

/// What the catalog needs of information_schema.COLUMNS, read once per table for both its
/// uses ([`push_column`]): the columns' types for row slices, and the DEFAULT and generation
/// expressions the server evaluates on a write (and, for a VIRTUAL column, on a read).
const COLUMNS_COLUMNS: &str = "TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, \
     DATA_TYPE, COLUMN_TYPE, IFNULL(COLLATION_NAME, ''), CHARACTER_MAXIMUM_LENGTH, \
     IS_NULLABLE, EXTRA, COLUMN_DEFAULT, GENERATION_EXPRESSION, COLUMN_KEY";

fn push_column(raw: &mut RawCatalog, mut r: Row) {
    let num = |r: &mut Row, i: usize| text(r, i).parse::<u64>().ok();
    let column = RawColumn {
        schema: text(&mut r, 0),
        table: text(&mut r, 1),
        name: text(&mut r, 2),
        ordinal: num(&mut r, 3).unwrap_or(0),
        data_type: text(&mut r, 4),
        column_type: text(&mut r, 5),
        collation: text(&mut r, 6),
        max_chars: num(&mut r, 7),
        nullable: text(&mut r, 8).eq_ignore_ascii_case("YES"),
        extra: text(&mut r, 9),
        primary: text(&mut r, 12).eq_ignore_ascii_case("PRI"),
        generation: String::new(),
    };
    let (default, generation) = (text(&mut r, 10), text(&mut r, 11));
    let column = RawColumn {
        generation: generation.clone(),
        ..column
    };
    if runs_code(&default, &generation) {
        let key = || (column.schema.clone(), column.table.clone());
        if !default.is_empty() {
            let (s, t) = key();
            raw.column_code.push((s, t, default));
        }
        if !generation.is_empty() {
            let (s, t) = key();
            raw.generated
                .push((s.clone(), t.clone(), generation.clone()));
            raw.column_code.push((s, t, generation));
        }
    }
    raw.columns.push(column);
}

/// Whether a column's expressions can run anything. Only those with a parenthesis can call
/// (a literal default is shown quoted, so a parenthesis inside it costs a parse that finds
/// no call); a generation expression may also read a variable (`@@max_error_count`); and
/// `NEXT VALUE FOR s` calls without one. As case-insensitive as the LIKE it replaces.
fn runs_code(default: &str, generation: &str) -> bool {
    let d = default.to_ascii_lowercase();
    d.contains('(')
        || generation.contains('(')
        || generation.contains('@')
        || d.find("value").is_some_and(|i| d[i + 5..].contains("for"))
}

/// A column as text; NULL and non-UTF-8 bytes must not panic (the data is the server's).
fn text(row: &mut Row, i: usize) -> String {
    match row.take_opt::<Option<Vec<u8>>, _>(i) {
        Some(Ok(Some(b))) => String::from_utf8_lossy(&b).into_owned(),
        _ => String::new(),
    }
}

/// Connection options for qcache's own connections (catalog, binlog) to the upstream.
pub(crate) fn upstream_opts(addr: &str, cfg: &InvalidationConfig) -> Opts {
    let (host, port) = split_host_port(addr);
    OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(cfg.user.clone()))
        .pass(Some(cfg.password.clone()))
        // Talk to exactly the configured address: the driver would otherwise switch to the
        // server's unix socket, which may be another path in a container.
        .prefer_socket(false)
        .into()
}

/// What qcache's own sessions (the catalog's, the parent lookups', the binlog tail's) set
/// first. A new session inherits the server's globals (and an `init_connect` may set more
/// for qcache's account), and some would make these sessions read answers qcache relies on
/// wrong, silently:
/// - `sql_select_limit` cuts every SELECT of a session that set none, information_schema's
///   too: the catalog would read the first N triggers, columns or foreign keys and take the
///   rest for absent (a trigger's or a cascade's writes then invalidated nothing);
/// - `autocommit = 0` makes a session's first read open a transaction nothing ends: a
///   pooled parent-lookup connection would read its first snapshot's parent rows forever,
///   and bump the derived slice of a value the parent no longer holds;
/// - READ UNCOMMITTED would read a parent value another transaction may roll back.
///
/// Globals that make these reads fail instead (`max_statement_time`, `max_join_size`) are
/// left to the not-knowing paths.
pub(crate) const OWN_SESSION_INIT: [&str; 2] = [
    "SET SESSION sql_select_limit = 18446744073709551615, autocommit = 1",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
];

/// [`upstream_opts`] for a session of qcache's own that reads answers it relies on:
/// [`OWN_SESSION_INIT`] runs on every connection opened with them.
pub(crate) fn own_session_opts(addr: &str, cfg: &InvalidationConfig) -> Opts {
    OptsBuilder::from_opts(upstream_opts(addr, cfg))
        .init(OWN_SESSION_INIT.iter().map(|s| s.to_string()).collect())
        .into()
}

fn split_host_port(addr: &str) -> (String, u16) {
    let (host, port) = match addr.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => (h, p.parse().unwrap_or(3306)),
        _ => (addr, 3306),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host.to_string(), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog that cannot load says so once in the log, names qcache's account in its
    /// error, and forgets the error when a load succeeds.
    #[test]
    fn a_failing_load_is_logged_once_and_names_the_account() {
        let cfg = InvalidationConfig {
            password: "s3cret".into(),
            ..InvalidationConfig::default()
        };
        let c = Catalog::new("127.0.0.1:1".into(), &cfg);
        assert_eq!(c.last_error(), None);
        let e = CatalogError::Timeout(Duration::from_secs(1));
        assert!(c.note_failure(&e), "the first failure is logged");
        assert!(!c.note_failure(&e), "the next ones are not");
        let why = c.last_error().unwrap();
        assert!(why.contains("'root' at 127.0.0.1:1"), "{why}");
        assert!(
            why.contains("invalidation.password") && !why.contains("s3cret"),
            "{why}"
        );
        c.note_success();
        assert_eq!(c.last_error(), None);
        assert!(c.note_failure(&e), "failing again is news again");
    }

    fn t(s: &str, n: &str) -> TableName {
        (s.into(), n.into())
    }

    fn raw() -> RawCatalog {
        let s = |x: &str| x.to_string();
        RawCatalog {
            tables: vec![
                (s("db"), s("a"), s("BASE TABLE")),
                (s("db"), s("b"), s("BASE TABLE")),
                (s("db"), s("audit"), s("BASE TABLE")),
                (s("db"), s("child"), s("BASE TABLE")),
                (s("db"), s("grandchild"), s("BASE TABLE")),
                (s("db"), s("weird"), s("BASE TABLE")),
                (s("other"), s("c"), s("BASE TABLE")),
                (s("db"), s("v_ab"), s("VIEW")),
                (s("db"), s("v_v"), s("VIEW")),
                (s("db"), s("v_hidden"), s("VIEW")),
                (s("db"), s("v_is"), s("VIEW")),
                (s("db"), s("v_cte"), s("VIEW")),
            ],
            views: vec![
                (
                    s("db"),
                    s("v_ab"),
                    s("select `db`.`a`.`id` AS `id` from (`db`.`a` join `db`.`b` on(`db`.`a`.`id` = `db`.`b`.`id`))"),
                ),
                (
                    s("db"),
                    s("v_v"),
                    s("select `id` from `v_ab` where `id` in (select `x` from `other`.`c`)"),
                ),
                (s("db"), s("v_hidden"), s("")),
                (s("db"), s("v_is"), s("select * from information_schema.tables")),
                (
                    s("db"),
                    s("v_cte"),
                    s("with recursive q as (select 1 as n union all select n + 1 from q) select * from q join a"),
                ),
            ],
            triggers: vec![
                (s("db"), s("db"), s("a"), s("INSERT INTO audit VALUES (NEW.id)"), s("")),
                (
                    s("db"),
                    s("db"),
                    s("audit"),
                    s("BEGIN\n  SET NEW.x = 1;\n  IF NEW.id > 3 THEN UPDATE other.c SET x = 1; END IF;\nEND"),
                    s(""),
                ),
                (s("db"), s("db"), s("weird"), s("BEGIN CALL p(); END"), s("")),
            ],
            foreign_keys: vec![
                (s("db"), s("child"), s("db"), s("a"), s("RESTRICT"), s("CASCADE")),
                (s("db"), s("grandchild"), s("db"), s("child"), s("SET NULL"), s("NO ACTION")),
                (s("db"), s("b"), s("db"), s("a"), s("RESTRICT"), s("NO ACTION")),
                // A cycle must not loop.
                (s("db"), s("a"), s("db"), s("grandchild"), s("CASCADE"), s("CASCADE")),
            ],
            ..RawCatalog::default()
        }
    }

    #[test]
    fn views_resolve_to_base_tables_through_nesting() {
        let s = SchemaSnapshot::build(&raw());
        assert_eq!(
            s.resolve_read(&[t("db", "v_ab")]),
            ReadResolution::Tables(vec![t("db", "a"), t("db", "b"), t("db", "v_ab")])
        );
        assert_eq!(
            s.resolve_read(&[t("db", "v_v"), t("db", "a")]),
            ReadResolution::Tables(vec![
                t("db", "a"),
                t("db", "b"),
                t("db", "v_ab"),
                t("db", "v_v"),
                t("other", "c")
            ])
        );
        assert_eq!(
            s.resolve_read(&[t("db", "v_cte")]),
            ReadResolution::Tables(vec![t("db", "a"), t("db", "v_cte")])
        );
    }

    #[test]
    fn opaque_and_unknown() {
        let s = SchemaSnapshot::build(&raw());
        assert!(matches!(
            s.resolve_read(&[t("db", "v_hidden")]),
            ReadResolution::Opaque(_)
        ));
        assert!(matches!(
            s.resolve_read(&[t("db", "v_is")]),
            ReadResolution::Opaque(_)
        ));
        assert!(matches!(
            s.resolve_read(&[t("db", "tmp"), t("db", "v_hidden")]),
            ReadResolution::Opaque(_)
        ));
        assert!(matches!(
            s.resolve_read(&[t("db", "tmp"), t("db", "a")]),
            ReadResolution::Unknown(_)
        ));
    }

    /// What a pending DDL does to every lookup, one row per rule: the DDL registered (None:
    /// none, or one landed again), the lookup, its answer.
    #[test]
    fn pending_ddl_makes_what_it_named_unknown() {
        let named = |list: &[(&str, &str)]| Changed {
            objects: list.iter().map(|(s, n)| t(s, n)).collect(),
            ..Changed::default()
        };
        let schema = |x: &str| Changed {
            schemas: vec![x.to_string()],
            ..Changed::default()
        };
        let everything = Changed {
            everything: true,
            ..Changed::default()
        };
        type Ask = fn(&Catalog) -> String;
        let rows: Vec<(&str, Option<Changed>, bool, Ask, &str)> = vec![
            (
                "nothing pending: a table resolves",
                None,
                false,
                |c| format!("{:?}", c.resolve_read(&[t("db", "b")])),
                r#"Tables([("db", "b")])"#,
            ),
            (
                "a relation a DDL named is pending",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.resolve_read(&[t("db", "b")])),
                "DdlPending",
            ),
            (
                "a view reading it is pending too",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.resolve_read(&[t("db", "v_ab")])),
                "DdlPending",
            ),
            (
                "a relation it did not name resolves",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.resolve_read(&[t("other", "c")])),
                r#"Tables([("other", "c")])"#,
            ),
            (
                "a name the catalog does not list is pending while any DDL is",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.resolve_read(&[t("db", "nope")])),
                "DdlPending",
            ),
            (
                "once landed, what it named resolves again",
                Some(named(&[("db", "b")])),
                true,
                |c| format!("{:?}", c.resolve_read(&[t("db", "b")])),
                r#"Tables([("db", "b")])"#,
            ),
            (
                "a schema DDL makes its relations pending",
                Some(schema("other")),
                false,
                |c| format!("{:?}", c.resolve_read(&[t("other", "c")])),
                "DdlPending",
            ),
            (
                "a data write to a pending relation is unknown",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.expand_data_write(&[t("db", "b")])),
                "None",
            ),
            (
                "a data write reaching a pending relation through a cascade is unknown",
                Some(named(&[("db", "child")])),
                false,
                |c| format!("{:?}", c.expand_data_write(&[t("db", "a")])),
                "None",
            ),
            (
                "another data write also bumps what pending DDL named (a new cascade's child)",
                Some(named(&[("db", "newchild")])),
                false,
                |c| format!("{:?}", c.expand_data_write(&[t("other", "c")])),
                r#"Some([("db", "newchild"), ("other", "c")])"#,
            ),
            (
                "a DDL that could not say what it changed makes every data write unknown",
                Some(everything),
                false,
                |c| format!("{:?}", c.expand_data_write(&[t("other", "c")])),
                "None",
            ),
            (
                "a DDL's own widening ignores pending DDL",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.expand_write(&[t("db", "b")])),
                r#"Some([("db", "b")])"#,
            ),
            (
                "a read of a pending relation may run code (it may now be a view calling some)",
                Some(named(&[("db", "b")])),
                false,
                |c| c.read_runs_code(&[t("db", "b")]).to_string(),
                "true",
            ),
            (
                "nothing pending: reading a table runs no code",
                None,
                false,
                |c| c.read_runs_code(&[t("db", "b")]).to_string(),
                "false",
            ),
            (
                "a write to a pending relation may fire unknown triggers",
                Some(named(&[("db", "b")])),
                false,
                |c| format!("{:?}", c.write_triggers(&[t("db", "b")])),
                "Unknown",
            ),
            (
                "a pending relation's rows are not knowable",
                Some(named(&[("db", "b")])),
                false,
                |c| c.rows_knowable(&t("db", "b")).to_string(),
                "false",
            ),
            (
                "nothing pending: its rows are",
                None,
                false,
                |c| c.rows_knowable(&t("db", "b")).to_string(),
                "true",
            ),
        ];
        for (rule, ddl, land, ask, want) in rows {
            let c = Catalog::loaded_from(raw());
            let epoch = c.ddl_epoch();
            if let Some(ddl) = &ddl {
                let seq = c.register_ddl(ddl);
                assert_ne!(c.ddl_epoch(), epoch, "{rule}: the epoch moves");
                assert!(c.ddl_pending_any(), "{rule}");
                if land {
                    c.ddl_landed(seq);
                    assert!(!c.ddl_pending_any(), "{rule}");
                }
            }
            assert_eq!(ask(&c), want, "{rule}");
        }
    }

    #[test]
    fn writes_expand_through_triggers_and_cascades() {
        let s = SchemaSnapshot::build(&raw());
        // a → audit (trigger) → other.c (trigger in a block); a → child → grandchild → a.
        assert_eq!(
            s.expand_write(&[t("db", "a")]),
            Some(vec![
                t("db", "a"),
                t("db", "audit"),
                t("db", "child"),
                t("db", "grandchild"),
                t("other", "c")
            ])
        );
        assert_eq!(s.expand_write(&[t("db", "b")]), Some(vec![t("db", "b")]));
        assert_eq!(s.expand_write(&[t("db", "weird")]), None);
        assert_eq!(
            s.expand_write(&[t("db", "nope")]),
            Some(vec![t("db", "nope")])
        );
    }

    /// Section 5 of issue #17, one row per rule.
    fn raw_exact() -> RawCatalog {
        let s = |x: &str| x.to_string();
        let mut r = raw();
        for (schema, name, kind) in [
            ("db", "v_now", "VIEW"),
            ("db", "v_fn", "VIEW"),
            ("db", "v_over_now", "VIEW"),
            ("db", "v_var", "VIEW"),
            ("db", "v_up", "VIEW"),
            ("db", "v_up2", "VIEW"),
            ("db", "cs", "VIEW"),
            ("db", "CS", "VIEW"),
            ("RT", "x", "BASE TABLE"),
            ("rt", "x", "BASE TABLE"),
            ("db", "T1", "BASE TABLE"),
        ] {
            r.tables.push((s(schema), s(name), s(kind)));
        }
        for (schema, name, def) in [
            (
                "db",
                "v_now",
                "select now() AS `n`,`db`.`a`.`id` AS `id` from `db`.`a`",
            ),
            (
                "db",
                "v_fn",
                "select `db`.`f`(`db`.`a`.`id`) AS `x` from `db`.`a`",
            ),
            (
                "db",
                "v_over_now",
                "select `db`.`v_now`.`id` AS `id` from `db`.`v_now`",
            ),
            (
                "db",
                "v_var",
                "select @@sql_mode AS `m`,`db`.`a`.`id` AS `id` from `db`.`a`",
            ),
            ("db", "v_up", "select `db`.`b`.`id` AS `id` from `db`.`b`"),
            (
                "db",
                "v_up2",
                "select `db`.`v_up`.`id` AS `id` from `db`.`v_up`",
            ),
            ("db", "cs", "select `db`.`a`.`id` AS `id` from `db`.`a`"),
            ("db", "CS", "select `db`.`b`.`id` AS `id` from `db`.`b`"),
        ] {
            r.views.push((s(schema), s(name), s(def)));
        }
        r
    }

    #[test]
    fn writes_through_views_write_their_base_tables() {
        let s = SchemaSnapshot::build(&raw_exact());
        assert_eq!(
            s.expand_write(&[t("db", "v_up2")]),
            Some(vec![t("db", "b"), t("db", "v_up"), t("db", "v_up2")])
        );
        // Through a view onto `a`, whose trigger and cascades follow.
        assert_eq!(
            s.expand_write(&[t("db", "v_ab")])
                .map(|v| v.contains(&t("db", "audit"))),
            Some(true)
        );
        // A view qcache cannot expand may write anything.
        assert_eq!(s.expand_write(&[t("db", "v_hidden")]), None);
    }

    #[test]
    fn views_calling_uncacheable_functions_are_not_cacheable() {
        let s = SchemaSnapshot::build(&raw_exact());
        for v in ["v_now", "v_fn", "v_over_now", "v_var"] {
            assert!(
                matches!(s.resolve_read(&[t("db", v)]), ReadResolution::Opaque(_)),
                "{v}"
            );
        }
        assert!(matches!(
            s.resolve_read(&[t("db", "v_up2")]),
            ReadResolution::Tables(_)
        ));
    }

    /// A read runs stored code through a view whose definition calls a stored function,
    /// directly or nested; not through a view of plain tables, a base table, or a view
    /// that calls only built-ins.
    #[test]
    fn reads_through_views_calling_stored_code() {
        let s = |x: &str| x.to_string();
        let mut raw = raw_exact();
        raw.tables.push((s("db"), s("v_over_fn"), s("VIEW")));
        raw.views.push((
            s("db"),
            s("v_over_fn"),
            s("select `db`.`v_fn`.`x` AS `x` from `db`.`v_fn`"),
        ));
        let snap = SchemaSnapshot::build(&raw);
        for (tables, want) in [
            (vec![t("db", "v_fn")], true),
            (vec![t("db", "v_over_fn")], true),
            (vec![t("db", "a"), t("db", "v_fn")], true),
            (vec![t("db", "v_up2")], false),
            (vec![t("db", "v_now")], false),
            (vec![t("db", "a")], false),
            (vec![t("nowhere", "x")], false),
        ] {
            assert_eq!(snap.read_runs_code(&tables), want, "{tables:?}");
        }
    }

    /// Which writes may fire a trigger: one on the table, or on a table its triggers or
    /// cascades write, or through a view; unknown tables cannot be vouched for.
    #[test]
    fn writes_that_may_fire_triggers() {
        let s = SchemaSnapshot::build(&raw());
        for (tables, want) in [
            (vec![t("db", "b")], WriteTriggers::None),
            (vec![t("other", "c")], WriteTriggers::None),
            (vec![t("db", "a")], WriteTriggers::Some),
            (vec![t("db", "audit")], WriteTriggers::Some),
            (vec![t("db", "child")], WriteTriggers::Some),
            (vec![t("db", "v_ab")], WriteTriggers::Some),
            (
                vec![t("db", "b"), t("db", "nosuch")],
                WriteTriggers::Unknown,
            ),
            (vec![t("db", "weird")], WriteTriggers::Unknown),
        ] {
            assert_eq!(s.write_triggers(&tables), want, "{tables:?}");
        }
    }

    /// A base table whose engine may not keep the rows written (TABLE_KIND's
    /// `BASE TABLE ENGINE=…`: BLACKHOLE keeps none) is cached and its writes known, but no
    /// statement shows its rows: no column-known UPDATE, no patched INSERT.
    #[test]
    fn tables_of_engines_that_drop_rows_are_special() {
        let s = |x: &str| x.to_string();
        let col = |table: &str, name: &str, ordinal: u64| RawColumn {
            schema: s("db"),
            table: s(table),
            name: s(name),
            ordinal,
            data_type: s("int"),
            column_type: s("int(11)"),
            collation: String::new(),
            max_chars: None,
            nullable: true,
            extra: String::new(),
            primary: false,
            generation: String::new(),
        };
        let c = Catalog::loaded_from(RawCatalog {
            tables: vec![
                (s("db"), s("plain"), s("BASE TABLE")),
                (s("db"), s("hole"), s("BASE TABLE ENGINE=BLACKHOLE")),
            ],
            columns: vec![col("plain", "k", 1), col("hole", "k", 1)],
            ..Default::default()
        });
        let plain = (s("db"), s("plain"));
        let hole = (s("db"), s("hole"));
        assert!(c.update_changes_only_set(&plain));
        assert!(c.rows_knowable(&hole), "its writes are still known");
        assert!(!c.update_changes_only_set(&hole));
        assert!(!c.images_show_changes(&hole));
    }

    /// A table whose engine holds rows stored elsewhere (MERGE over MyISAM tables,
    /// FEDERATED…): its reads are not cached, its writes invalidate conservatively.
    #[test]
    fn tables_of_rows_stored_elsewhere() {
        let mut raw = RawCatalog::default();
        raw.tables
            .push(("db".into(), "t1".into(), "BASE TABLE".into()));
        raw.tables
            .push(("db".into(), "m".into(), "ENGINE MRG_MyISAM".into()));
        let s = SchemaSnapshot::build(&raw);
        assert!(matches!(
            s.resolve_read(&[t("db", "m")]),
            ReadResolution::Opaque(_)
        ));
        assert_eq!(s.expand_write(&[t("db", "m")]), None);
        assert!(!s.rows_knowable(&t("db", "m")));
        assert!(matches!(
            s.resolve_read(&[t("db", "t1")]),
            ReadResolution::Tables(_)
        ));
    }

    /// A table whose generated column calls a session-dependent or non-deterministic
    /// function (or reads a variable) is never cached, nor is a view over it; a
    /// deterministic one is.
    #[test]
    fn generated_columns_computed_per_session_are_not_cacheable() {
        let s = |x: &str| x.to_string();
        for (expr, cacheable) in [
            ("connection_id()", false),
            ("rand()", false),
            ("@@max_error_count", false),
            ("`a` + 1", true),
            ("concat(`a`,'x')", true),
        ] {
            let mut r = raw();
            r.generated.push((s("db"), s("b"), s(expr)));
            r.column_code.push((s("db"), s("b"), s(expr)));
            let snap = SchemaSnapshot::build(&r);
            for rel in ["b", "v_ab"] {
                let got = snap.resolve_read(&[t("db", rel)]);
                assert_eq!(
                    matches!(got, ReadResolution::Tables(_)),
                    cacheable,
                    "{rel}: {expr}: {got:?}"
                );
            }
        }
    }

    /// The filter the one COLUMNS read applies answers as the LIKE filter it replaced.
    #[test]
    fn column_expressions_that_run_code() {
        for (default, generation, runs) in [
            ("nextval(`db`.`s`)", "", true),
            ("NEXT VALUE FOR s", "", true),
            ("", "`a` + 1", false),
            ("", "concat(`a`,'x')", true),
            ("", "@@max_error_count", true),
            ("'abc'", "", false),
            ("0", "", false),
            ("'value' ", "", false),
            ("", "", false),
        ] {
            assert_eq!(
                runs_code(default, generation),
                runs,
                "{default:?} {generation:?}"
            );
        }
    }

    #[test]
    fn names_differing_only_in_case_are_never_merged() {
        let s = SchemaSnapshot::build(&raw_exact());
        for (schema, name) in [("db", "cs"), ("rt", "x")] {
            assert!(
                matches!(
                    s.resolve_read(&[t(schema, name)]),
                    ReadResolution::Opaque(_)
                ),
                "{schema}.{name}"
            );
            assert_eq!(s.expand_write(&[t(schema, name)]), None, "{schema}.{name}");
        }
        // One object whose name has capitals is just that object.
        assert_eq!(
            s.resolve_read(&[t("db", "t1")]),
            ReadResolution::Tables(vec![t("db", "t1")])
        );
    }

    #[test]
    fn triggers_calling_functions_write_unknown_tables() {
        let mut r = raw();
        r.triggers.push((
            "db".into(),
            "db".into(),
            "b".into(),
            "SET NEW.x = f(NEW.id)".into(),
            String::new(),
        ));
        let s = SchemaSnapshot::build(&r);
        assert_eq!(s.expand_write(&[t("db", "b")]), None);
    }

    #[test]
    fn partial_rows_replace_what_the_change_covers() {
        let s = |x: &str| x.to_string();
        let mut r = raw();
        let changed = Changed {
            objects: vec![t("db", "a"), t("db", "v_ab")],
            ..Changed::default()
        };
        // child and b reference a (a RENAME of a rewrites them); grandchild references child.
        assert_eq!(
            r.children_of(&changed),
            vec![(s("db"), s("b")), (s("db"), s("child"))]
        );
        let children = r.children_of(&changed);
        // The server now has: a renamed away (gone), v_ab reading b only, child following a.
        let fresh = RawCatalog {
            tables: vec![(s("db"), s("v_ab"), s("VIEW"))],
            views: vec![(s("db"), s("v_ab"), s("select id from b"))],
            triggers: Vec::new(),
            foreign_keys: vec![(
                s("db"),
                s("child"),
                s("db"),
                s("a2"),
                s("RESTRICT"),
                s("CASCADE"),
            )],
            ..RawCatalog::default()
        };
        r.replace(&changed, &children, fresh);
        let snap = SchemaSnapshot::build(&r);
        assert_eq!(
            snap.resolve_read(&[t("db", "v_ab")]),
            ReadResolution::Tables(vec![t("db", "b"), t("db", "v_ab")])
        );
        assert!(matches!(
            snap.resolve_read(&[t("db", "a")]),
            ReadResolution::Unknown(_)
        ));
        // a's trigger went with it; b's foreign key (it had one to a) is gone from the rows.
        assert_eq!(snap.expand_write(&[t("db", "a")]), Some(vec![t("db", "a")]));
        assert_eq!(
            snap.expand_write(&[t("db", "a2")]),
            Some(vec![t("db", "a2"), t("db", "child"), t("db", "grandchild")])
        );
        // Rows outside the change stay: audit's trigger, weird's opaque body.
        assert_eq!(snap.expand_write(&[t("db", "weird")]), None);
    }

    /// A partial refresh judges stored code again only when it touched a trigger row: the
    /// routines never change in one, so what code may create is what it was, shared.
    #[test]
    fn partial_refresh_judges_stored_code_again_only_when_a_trigger_changed() {
        use crate::policy::stored_code::Temporaries;
        let s = |x: &str| x.to_string();
        let mut r = raw();
        let before = SchemaSnapshot::build(&r);
        let changed = Changed {
            objects: vec![t("db", "b")],
            ..Changed::default()
        };
        let fresh = RawCatalog {
            tables: vec![(s("db"), s("b"), s("BASE TABLE"))],
            ..RawCatalog::default()
        };
        let after = before.apply(&mut r, &changed, &[], fresh);
        assert!(Arc::ptr_eq(&before.temporaries, &after.temporaries));
        assert!(Arc::ptr_eq(&before.trigger_code, &after.trigger_code));
        assert!(Arc::ptr_eq(&before.routines, &after.routines));
        // A trigger on b that creates a temporary table: judged with the new rows.
        let fresh = RawCatalog {
            tables: vec![(s("db"), s("b"), s("BASE TABLE"))],
            triggers: vec![(
                s("db"),
                s("db"),
                s("b"),
                s("CREATE TEMPORARY TABLE tmp_b (x INT)"),
                String::new(),
            )],
            ..RawCatalog::default()
        };
        let next = after.apply(&mut r, &changed, &[], fresh);
        assert!(!Arc::ptr_eq(&after.trigger_code, &next.trigger_code));
        assert_ne!(*next.temporaries, Temporaries::None);
        assert_eq!(*next.temporaries, *SchemaSnapshot::build(&r).temporaries);
        // And dropping it (no trigger row read, one removed) judges again too.
        let fresh = RawCatalog {
            tables: vec![(s("db"), s("b"), s("BASE TABLE"))],
            ..RawCatalog::default()
        };
        let last = next.apply(&mut r, &changed, &[], fresh);
        assert_eq!(*last.temporaries, *SchemaSnapshot::build(&r).temporaries);
        assert_eq!(*last.temporaries, *before.temporaries);
    }

    /// One row per way a table's own definition makes a write to it run code: the column
    /// expressions as information_schema shows them. (DEFAULT, written tables or None.)
    #[test]
    fn column_expressions_widen_writes_to_what_they_advance() {
        let s = |x: &str| x.to_string();
        type Written<'a> = Option<&'a [(&'a str, &'a str)]>;
        let rows: &[(&str, Written)] = &[
            ("nextval(`db`.`s`)", Some(&[("db", "s")])),
            ("nextval(`s`)", Some(&[("db", "s")])),
            ("nextval(`other`.`s2`)", Some(&[("other", "s2")])),
            ("NEXT VALUE FOR s", Some(&[("db", "s")])),
            ("setval(`db`.`s`,5,1,0)", Some(&[("db", "s")])),
            (
                "nextval(`db`.`s`) + nextval(`db`.`q`)",
                Some(&[("db", "q"), ("db", "s")]),
            ),
            // Reads a sequence, computes, or is a literal: writes nothing more.
            ("lastval(`db`.`s`)", Some(&[])),
            ("current_timestamp()", Some(&[])),
            ("concat('a(', 'b')", Some(&[])),
            ("'nextval(s)'", Some(&[])),
            ("`v` + 1", Some(&[])),
            // Anything qcache cannot name: writes may reach anything.
            ("f(1)", None),
            ("`db`.`f`(1)", None),
            ("db.f(1)", None),
            ("`nextval`(`s`)", None),
            ("nextval(concat('s'))", None),
            ("nextval((select 1))", None),
        ];
        for (expr, want) in rows {
            let mut r = raw();
            r.column_code.push((s("db"), s("b"), s(expr)));
            let snap = SchemaSnapshot::build(&r);
            let got = snap.expand_write(&[t("db", "b")]);
            let want = want.map(|w| {
                let mut v: Vec<TableName> = w.iter().map(|(a, b)| t(a, b)).collect();
                v.push(t("db", "b"));
                v.sort();
                v
            });
            assert_eq!(got, want, "DEFAULT {expr}");
        }
        // Rows of a table the change covers go with it; the rest stay.
        let mut r = raw();
        r.column_code
            .push((s("db"), s("b"), s("nextval(`db`.`s`)")));
        r.column_code.push((s("db"), s("a"), s("f()")));
        let changed = Changed {
            objects: vec![t("db", "b")],
            ..Changed::default()
        };
        r.replace(&changed, &[], RawCatalog::default());
        let snap = SchemaSnapshot::build(&r);
        assert_eq!(snap.expand_write(&[t("db", "b")]), Some(vec![t("db", "b")]));
        assert_eq!(snap.expand_write(&[t("db", "a")]), None);
    }

    /// A read through a DEFINER view (directly or nested in another view) carries its
    /// definer's privilege stamps; an INVOKER view's read does not.
    #[test]
    fn definer_views_carry_their_definers_privilege_stamps() {
        use crate::policy::privileges::definer_stamps;
        let s = |x: &str| x.to_string();
        let mut r = raw();
        r.definers.push((s("db"), s("v_ab"), s("lee@%")));
        let snap = SchemaSnapshot::build(&r);
        let stamps = definer_stamps("lee@%");
        for view in ["v_ab", "v_v"] {
            let ReadResolution::Tables(got) = snap.resolve_read(&[t("db", view)]) else {
                panic!("{view}");
            };
            for st in &stamps {
                assert!(got.contains(st), "{view}: {got:?}");
            }
        }
        let ReadResolution::Tables(got) = snap.resolve_read(&[t("db", "v_cte")]) else {
            panic!("v_cte");
        };
        assert!(got.iter().all(|(schema, _)| !schema.is_empty()), "{got:?}");
        // Redefined as INVOKER: the partial rows hold no definer any more.
        let changed = Changed {
            objects: vec![t("db", "v_ab")],
            ..Changed::default()
        };
        r.replace(
            &changed,
            &[],
            RawCatalog {
                tables: vec![(s("db"), s("v_ab"), s("VIEW"))],
                views: vec![(s("db"), s("v_ab"), s("select id from a"))],
                ..RawCatalog::default()
            },
        );
        let snap = SchemaSnapshot::build(&r);
        assert_eq!(
            snap.resolve_read(&[t("db", "v_ab")]),
            ReadResolution::Tables(vec![t("db", "a"), t("db", "v_ab")])
        );
    }

    /// A snapshot patched after each kind of change answers exactly as one built from all
    /// the rows: views across schemas turning opaque and back, triggers and column defaults
    /// changing, foreign keys following a renamed parent into another schema, DEFINER views,
    /// whole schemas dropped, names differing only in case.
    #[test]
    fn patched_snapshots_answer_like_full_builds() {
        let s = |x: &str| x.to_string();
        let obj = |list: &[(&str, &str)]| Changed {
            objects: list.iter().map(|(a, b)| t(a, b)).collect(),
            ..Changed::default()
        };
        let fk = |cs: &str, ct: &str, ps: &str, pt: &str, rule: &str| {
            (s(cs), s(ct), s(ps), s(pt), s("RESTRICT"), s(rule))
        };
        type Step = (Changed, RawCatalog);
        let steps: Vec<Step> = vec![
            // A DEFINER view reading b and other.c.
            (
                obj(&[("db", "v_new")]),
                RawCatalog {
                    tables: vec![(s("db"), s("v_new"), s("VIEW"))],
                    views: vec![(s("db"), s("v_new"), s("select id from b join other.c"))],
                    definers: vec![(s("db"), s("v_new"), s("lee@%"))],
                    ..RawCatalog::default()
                },
            ),
            // b dropped: v_ab, v_v and v_new turn opaque.
            (obj(&[("db", "b")]), RawCatalog::default()),
            // b back; a gets a column default advancing a sequence and a new trigger.
            (
                obj(&[("db", "b"), ("db", "a")]),
                RawCatalog {
                    tables: vec![
                        (s("db"), s("b"), s("BASE TABLE")),
                        (s("db"), s("a"), s("BASE TABLE")),
                    ],
                    triggers: vec![(s("db"), s("db"), s("a"), s("DELETE FROM b"), s(""))],
                    column_code: vec![(s("db"), s("a"), s("nextval(`db`.`seq`)"))],
                    ..RawCatalog::default()
                },
            ),
            // other.c renamed into db: its readers follow; a child in a new schema.
            (
                obj(&[("other", "c"), ("db", "c2")]),
                RawCatalog {
                    tables: vec![(s("db"), s("c2"), s("BASE TABLE"))],
                    ..RawCatalog::default()
                },
            ),
            (
                obj(&[("x", "kid")]),
                RawCatalog {
                    tables: vec![(s("x"), s("kid"), s("BASE TABLE"))],
                    foreign_keys: vec![fk("x", "kid", "db", "child", "CASCADE")],
                    ..RawCatalog::default()
                },
            ),
            // child renamed: its own and kid's foreign keys follow (kid is a child of it).
            (
                obj(&[("db", "child"), ("db", "child2")]),
                RawCatalog {
                    tables: vec![(s("db"), s("child2"), s("BASE TABLE"))],
                    foreign_keys: vec![
                        fk("db", "child2", "db", "a", "CASCADE"),
                        fk("x", "kid", "db", "child2", "CASCADE"),
                    ],
                    ..RawCatalog::default()
                },
            ),
            // A name differing only in case, then gone again.
            (
                obj(&[("db", "a")]),
                RawCatalog {
                    tables: vec![
                        (s("db"), s("a"), s("BASE TABLE")),
                        (s("db"), s("A"), s("BASE TABLE")),
                    ],
                    ..RawCatalog::default()
                },
            ),
            (
                obj(&[("db", "a")]),
                RawCatalog {
                    tables: vec![(s("db"), s("a"), s("BASE TABLE"))],
                    ..RawCatalog::default()
                },
            ),
            // The DEFINER view redefined as INVOKER.
            (
                obj(&[("db", "v_new")]),
                RawCatalog {
                    tables: vec![(s("db"), s("v_new"), s("VIEW"))],
                    views: vec![(s("db"), s("v_new"), s("select id from b"))],
                    ..RawCatalog::default()
                },
            ),
            // A whole schema dropped.
            (
                Changed {
                    schemas: vec![s("x")],
                    ..Changed::default()
                },
                RawCatalog::default(),
            ),
        ];
        let mut r = raw();
        let mut snap = SchemaSnapshot::build(&r);
        for (i, (changed, fresh)) in steps.into_iter().enumerate() {
            let children = r.children_of(&changed);
            // The server's rows for the children come with the fresh ones (as a load gives).
            let mut fresh = fresh;
            for (cs, ct) in &children {
                let kept = r
                    .foreign_keys
                    .iter()
                    .filter(|(a, b, ..)| a == cs && b == ct);
                let reloaded: Vec<_> = kept
                    .filter(|row| !fresh.foreign_keys.contains(row))
                    .filter(|(.., ps, pt, _, _)| !covers(&changed, ps, pt))
                    .cloned()
                    .collect();
                fresh.foreign_keys.extend(reloaded);
            }
            snap = snap.apply(&mut r, &changed, &children, fresh);
            let full = SchemaSnapshot::build(&r);
            assert_eq!(
                snap.answers(),
                full.answers(),
                "after step {i}: {changed:?}"
            );
        }
    }

    /// Index and partitioning columns from information_schema's rows, per table: what
    /// `Catalog::update_keeps_order` hands to `policy::order`. (table, its order columns or
    /// None when unknown.)
    #[test]
    fn order_columns_from_indexes_and_partitioning() {
        let s = |x: &str| x.to_string();
        let col = |t: &str, n: &str, ordinal: u64| RawColumn {
            schema: s("db"),
            table: s(t),
            name: s(n),
            ordinal,
            data_type: s("int"),
            column_type: s("int(11)"),
            ..RawColumn::default()
        };
        let src = |t: &str, kind: &str, text: &str| (s("db"), s(t), s(kind), s(text));
        let tables = ["plain", "keyed", "parted", "expr", "keyless", "Mixed"];
        let raw = RawCatalog {
            tables: tables
                .iter()
                .map(|t| (s("db"), s(t), s("BASE TABLE")))
                .collect(),
            columns: tables
                .iter()
                .flat_map(|t| {
                    [
                        col(t, "id", 1),
                        col(t, "B", 2),
                        col(t, "k", 3),
                        col(t, "c", 4),
                    ]
                })
                .collect(),
            order_sources: vec![
                src("keyed", "I", "id"),
                src("keyed", "I", "B"),
                src("keyed", "I", "id"),
                src("parted", "P", "`k` "),
                src("parted", "P", "year(`c`) `id`"),
                src("expr", "I", "id"),
                src("expr", "I", ""),
                src("keyless", "P", " "),
                src("Mixed", "I", "K"),
            ],
            ..RawCatalog::default()
        };
        let snap = SchemaSnapshot::build(&raw);
        let order = |t: &str| {
            snap.columns(&(s("db"), s(t)))
                .unwrap()
                .order_columns
                .clone()
                .map(|c| {
                    let mut v: Vec<String> = c.into_iter().collect();
                    v.sort();
                    v
                })
        };
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("plain", Some(&[])),
            ("keyed", Some(&["b", "id"])),
            ("parted", Some(&["c", "id", "k"])),
            ("expr", None),
            ("keyless", None),
            ("mixed", Some(&["k"])),
        ];
        for (t, want) in cases {
            let want = want.map(|w| w.iter().map(|c| c.to_string()).collect::<Vec<_>>());
            assert_eq!(order(t), want, "{t}");
        }
    }

    #[test]
    fn schema_listing() {
        let s = SchemaSnapshot::build(&raw());
        assert_eq!(
            s.schemas.get("other").map(|p| p.names.clone()),
            Some(vec!["c".to_string()])
        );
    }

    #[test]
    fn trigger_body_forms() {
        assert_eq!(
            trigger_writes("SET NEW.updated = NOW()", "d").unwrap(),
            Vec::<TableName>::new()
        );
        assert_eq!(
            trigger_writes(
                "begin\n delete from x where id = OLD.id;\n insert into y.z select * from w;\nend",
                "d"
            )
            .unwrap(),
            vec![t("d", "w"), t("d", "x"), t("y", "z")]
        );
        assert!(trigger_writes("BEGIN DECLARE EXIT HANDLER FOR x; ??? END", "d").is_err());
        // Under MSSQL `[x']` is a name: the INSERT after it is code, which the default
        // rules read inside a hex string.
        assert_eq!(
            trigger_writes(
                "BEGIN SET @a = (SELECT [x'] FROM t LIMIT 1); INSERT INTO side VALUES (NEW.id); \
                 SET @b = (SELECT 1 AS [']); END",
                "d"
            )
            .unwrap(),
            vec![("d".to_string(), "side".to_string())]
        );
    }

    #[test]
    fn addresses() {
        assert_eq!(
            split_host_port("127.0.0.1:3307"),
            ("127.0.0.1".into(), 3307)
        );
        assert_eq!(split_host_port("db"), ("db".into(), 3306));
        assert_eq!(split_host_port("[::1]:3310"), ("::1".into(), 3310));
    }
}
