//! The schema catalog: which base tables a view reads, which tables a write to a table also
//! changes (triggers, foreign-key cascades), loaded from `information_schema` and swapped
//! atomically so that lookups on the query path never take a lock.
//!
//! The binlog cannot replace this: InnoDB cascades are not logged (before MySQL 9.6) and a view
//! never appears in it, so an entry reading a view must be stamped with the view's base tables.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use sqlparser::ast::{ObjectName, ObjectNamePart, Query, Statement, Visit, Visitor};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use crate::analysis::slices::{ColType, ColumnInfo};
use crate::config::InvalidationConfig;

/// A lower-cased `(schema, name)` pair, the table identity used everywhere in qcache.
pub type TableName = (String, String);

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
}

pub use crate::cache::writes::Changed;

/// How long a refresh may take before the caller gets an error (and the old snapshot stays).
const LOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Schemas qcache never caches reads of (DESIGN.md "What is not cached"): loading them would
/// only cost time (sys alone has a hundred views) on every refresh. A user view reading one of
/// them is opaque, as it must be.
const SKIPPED_SCHEMAS: &str = "('information_schema', 'performance_schema', 'mysql', 'sys')";

/// One loaded state of the server's schema. Immutable once built.
#[derive(Debug, Default)]
pub struct SchemaSnapshot {
    /// Every base table and view.
    relations: HashMap<TableName, Kind>,
    /// Views, resolved to the base tables they read (Err: why the view is opaque).
    views: HashMap<TableName, Result<Vec<TableName>, String>>,
    /// Direct write edges: a write to the key also writes these (triggers, cascades).
    writes: HashMap<TableName, Vec<TableName>>,
    /// Tables with a trigger whose body could not be analysed, with the reason.
    unknown_writes: HashMap<TableName, String>,
    /// Relation names by schema, sorted.
    by_schema: HashMap<String, Vec<String>>,
    /// Base tables' columns.
    columns: HashMap<TableName, TableColumns>,
    /// Tables with a trigger (analysed or not): a trigger may change the row being written,
    /// so a write's statement does not name its rows.
    triggered: HashSet<TableName>,
    /// Views whose reads must not be cached although they expand: their definition (or a
    /// nested view's) calls a function that is not cacheable inline (non-deterministic,
    /// session-dependent, a stored function or UDF, a sequence, a system variable).
    uncacheable: HashMap<TableName, String>,
    /// Lower-cased names that stand for more than one relation: a server with
    /// `lower_case_table_names = 0` holds `v1` and `V1`, or schemas `RT` and `rt`, as
    /// different objects. qcache's table identity is lower-case (merging them costs only
    /// extra invalidations), but a view's expansion or a trigger's edges under such a name
    /// could be another object's: reads of it are not cached and writes to it invalidate
    /// conservatively.
    ambiguous: HashSet<TableName>,
    /// SQL SECURITY DEFINER views, with the privilege stamps a read through them carries
    /// (`policy::privileges::definer_stamps`).
    definers: HashMap<TableName, [TableName; 2]>,
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
    /// (trigger schema, table schema, table, ACTION_STATEMENT)
    pub triggers: Vec<(String, String, String, String)>,
    /// (child schema, child table, parent schema, parent table, UPDATE_RULE, DELETE_RULE)
    pub foreign_keys: Vec<(String, String, String, String, String, String)>,
    /// (schema, view, DEFINER) of the `SQL SECURITY DEFINER` views: a read through one runs
    /// with its definer's privileges.
    pub definers: Vec<(String, String, String)>,
    /// (schema, table, expression) of the column DEFAULT and generation expressions that
    /// call something: a write to the table runs them (`DEFAULT NEXTVAL(s)` writes `s`).
    pub column_code: Vec<(String, String, String)>,
    /// Columns of tables and views, for row slices.
    pub columns: Vec<RawColumn>,
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
}

impl RawCatalog {
    /// The child tables whose foreign keys reference a relation `changed` covers, as this
    /// catalog spells them, minus those `changed` covers itself. Renaming a parent rewrites
    /// its children's foreign keys (InnoDB follows the rename), so their rows are reloaded too.
    pub fn children_of(&self, changed: &Changed) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .foreign_keys
            .iter()
            .filter(|(cs, ct, ps, pt, _, _)| {
                let (ps, pt) = lower(ps, pt);
                let (cs_l, ct_l) = lower(cs, ct);
                changed.covers(&ps, &pt) && !changed.covers(&cs_l, &ct_l)
            })
            .map(|(cs, ct, ..)| (cs.clone(), ct.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Replaces every row `changed` covers (relations, views, the triggers on them and the
    /// foreign keys of them as children), and the foreign keys of `children`, by the rows
    /// of `fresh`, which holds the server's current rows for exactly that scope.
    pub fn replace(&mut self, changed: &Changed, children: &[(String, String)], fresh: RawCatalog) {
        let child = |cs: &str, ct: &str| {
            let (cs, ct) = lower(cs, ct);
            changed.covers(&cs, &ct)
                || children
                    .iter()
                    .any(|(s, t)| s.to_lowercase() == cs && t.to_lowercase() == ct)
        };
        let covered = |schema: &str, name: &str| {
            let (s, n) = lower(schema, name);
            changed.covers(&s, &n)
        };
        self.tables.retain(|(s, n, _)| !covered(s, n));
        self.views.retain(|(s, n, _)| !covered(s, n));
        self.triggers.retain(|(_, s, t, _)| !covered(s, t));
        self.foreign_keys.retain(|(cs, ct, ..)| !child(cs, ct));
        self.definers.retain(|(s, n, _)| !covered(s, n));
        self.column_code.retain(|(s, n, _)| !covered(s, n));
        self.columns.retain(|c| !covered(&c.schema, &c.table));
        self.columns.extend(fresh.columns);
        self.tables.extend(fresh.tables);
        self.views.extend(fresh.views);
        self.triggers.extend(fresh.triggers);
        self.foreign_keys.extend(fresh.foreign_keys);
        self.definers.extend(fresh.definers);
        self.column_code.extend(fresh.column_code);
    }
}

impl SchemaSnapshot {
    /// Analyses the raw rows: view expansion, trigger bodies and cascade edges.
    pub fn build(raw: &RawCatalog) -> SchemaSnapshot {
        let mut snap = SchemaSnapshot::default();
        let mut exact: HashMap<TableName, (&str, &str)> = HashMap::new();
        for (schema, name, kind) in &raw.tables {
            let key = lower(schema, name);
            if exact
                .insert(key.clone(), (schema.as_str(), name.as_str()))
                .is_some_and(|(s, n)| s != schema || n != name)
            {
                snap.ambiguous.insert(key.clone());
            }
            // SYSTEM VIEW only occurs in the skipped schemas; anything else that is not a view
            // (BASE TABLE, SYSTEM VERSIONED, SEQUENCE) holds data of its own.
            let kind = if kind.eq_ignore_ascii_case("VIEW") {
                Kind::View
            } else {
                Kind::Base
            };
            snap.relations.insert(key, kind);
        }
        let mut definitions: HashMap<TableName, &str> = HashMap::new();
        for (schema, name, def) in &raw.views {
            let key = lower(schema, name);
            if definitions.insert(key.clone(), def.as_str()).is_some() {
                snap.ambiguous.insert(key.clone());
            }
            if let Err(why) = view_cacheable(def) {
                snap.uncacheable
                    .insert(key, format!("view {schema}.{name}: {why}"));
            }
        }
        let view_keys: Vec<TableName> = snap
            .relations
            .iter()
            .filter(|(_, k)| **k == Kind::View)
            .map(|(t, _)| t.clone())
            .collect();
        let mut memo = HashMap::new();
        for v in view_keys {
            let mut stack = Vec::new();
            let r = resolve_view(&v, &snap.relations, &definitions, &mut memo, &mut stack);
            snap.views.insert(v, r);
        }

        for (trigger_schema, schema, table, body) in &raw.triggers {
            let key = lower(schema, table);
            snap.triggered.insert(key.clone());
            // A function the body calls may write tables nobody named.
            let analysed = if crate::analysis::calls_unknown_code(body) {
                Err("the trigger calls a stored function or a sequence".to_string())
            } else {
                trigger_writes(body, &trigger_schema.to_lowercase())
            };
            match analysed {
                Ok(written) => snap.writes.entry(key).or_default().extend(written),
                Err(why) => {
                    snap.unknown_writes.insert(key, why);
                }
            }
        }
        for (cs, ct, ps, pt, update_rule, delete_rule) in &raw.foreign_keys {
            // RESTRICT / NO ACTION never change the child; CASCADE, SET NULL and SET DEFAULT do.
            let changes = |rule: &str| {
                let r = rule.to_ascii_uppercase();
                r == "CASCADE" || r == "SET NULL" || r == "SET DEFAULT"
            };
            if changes(update_rule) || changes(delete_rule) {
                snap.writes
                    .entry(lower(ps, pt))
                    .or_default()
                    .push(lower(cs, ct));
            }
        }
        for (schema, table, expr) in &raw.column_code {
            let key = lower(schema, table);
            match crate::analysis::sequences_written(expr) {
                Some(seqs) => {
                    let written: Vec<TableName> = seqs
                        .into_iter()
                        .map(|r| (r.schema.unwrap_or_else(|| key.0.clone()), r.name))
                        .collect();
                    snap.writes.entry(key).or_default().extend(written);
                }
                None => {
                    snap.unknown_writes.insert(
                        key,
                        format!("a column of {schema}.{table} computes `{expr}`"),
                    );
                }
            }
        }
        for (schema, view, definer) in &raw.definers {
            let stamps = crate::policy::privileges::definer_stamps(definer);
            snap.definers.insert(lower(schema, view), stamps);
        }
        for edges in snap.writes.values_mut() {
            edges.sort();
            edges.dedup();
        }
        for (schema, name) in snap.relations.keys() {
            snap.by_schema
                .entry(schema.clone())
                .or_default()
                .push(name.clone());
        }
        for names in snap.by_schema.values_mut() {
            names.sort();
        }
        let mut cols: HashMap<TableName, Vec<&RawColumn>> = HashMap::new();
        for c in &raw.columns {
            cols.entry(lower(&c.schema, &c.table)).or_default().push(c);
        }
        for (t, mut list) in cols {
            if snap.relations.get(&t) != Some(&Kind::Base) || snap.ambiguous.contains(&t) {
                continue;
            }
            list.sort_by_key(|c| c.ordinal);
            let mut tc = TableColumns::default();
            let extra = |c: &RawColumn| c.extra.to_ascii_lowercase();
            let invisible = list.iter().any(|c| extra(c).contains("invisible"));
            tc.order = (!invisible).then(|| list.iter().map(|c| c.name.to_lowercase()).collect());
            let mut all = Vec::with_capacity(list.len());
            for c in list {
                let e = extra(c);
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
                    all.clear();
                    break;
                }
            }
            tc.all = all.into();
            snap.columns.insert(t, tc);
        }
        snap
    }

    /// Whether a write's statement names the rows it changes in `t`: a base table with no
    /// trigger (which may change the row written) that no cascade leads back to.
    fn rows_knowable(&self, t: &TableName) -> bool {
        if self.relations.get(t) != Some(&Kind::Base)
            || self.ambiguous.contains(t)
            || self.triggered.contains(t)
            || self.unknown_writes.contains_key(t)
        {
            return false;
        }
        let mut seen: HashSet<&TableName> = HashSet::new();
        let mut queue: Vec<&TableName> = self.writes.get(t).into_iter().flatten().collect();
        while let Some(n) = queue.pop() {
            if n == t {
                return false;
            }
            if seen.insert(n) {
                queue.extend(self.writes.get(n).into_iter().flatten());
            }
        }
        true
    }

    fn resolve_read(&self, tables: &[TableName]) -> ReadResolution {
        let mut out = Vec::new();
        let mut unknown = None;
        for t in tables {
            if self.ambiguous.contains(t) {
                return ReadResolution::Opaque(format!(
                    "{}.{} names several objects differing in case (lower_case_table_names = 0)",
                    t.0, t.1
                ));
            }
            match self.relations.get(t) {
                Some(Kind::Base) => out.push(t.clone()),
                Some(Kind::View) => match self.views.get(t) {
                    Some(Ok(bases)) => {
                        // The view, or a view nested in it, calls what cannot be cached; or
                        // a name it reads is ambiguous.
                        let inner = std::iter::once(t).chain(bases.iter());
                        for v in inner {
                            if let Some(why) = self.uncacheable.get(v) {
                                return ReadResolution::Opaque(why.clone());
                            }
                            if self.ambiguous.contains(v) {
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
                            if let Some(stamps) = self.definers.get(v) {
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
            if self.unknown_writes.contains_key(&t) || self.ambiguous.contains(&t) {
                return None;
            }
            if self.relations.get(&t) == Some(&Kind::View) {
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
            if let Some(next) = self.writes.get(&t) {
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
    relations: &HashMap<TableName, Kind>,
    definitions: &HashMap<TableName, &str>,
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
    let result = (|| {
        let def = definitions
            .get(view)
            .copied()
            .filter(|d| !d.trim().is_empty())
            .ok_or_else(|| format!("view {name}: definition not visible to the catalog user"))?;
        let refs = relations_of(def, &view.0)
            .map_err(|e| format!("view {name}: definition cannot be analysed: {e}"))?;
        let mut bases = Vec::new();
        stack.push(view.clone());
        for r in refs {
            match relations.get(&r) {
                Some(Kind::Base) => bases.push(r),
                Some(Kind::View) => {
                    let inner = resolve_view(&r, relations, definitions, memo, stack);
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
pub fn trigger_writes(body: &str, trigger_schema: &str) -> Result<Vec<TableName>, String> {
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
    w.written.sort();
    w.written.dedup();
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
            opts: upstream_opts(&upstream_addr, cfg),
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
        })
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
        // A kept connection may have been closed by the server (wait_timeout, restart) since
        // the last load: one failure on it earns a retry on a fresh one.
        let reused = st.conn.is_some();
        let mut attempt = tokio::time::timeout(LOAD_TIMEOUT, self.load(&mut st.conn)).await;
        if reused && matches!(attempt, Ok(Err(_))) {
            st.conn = None;
            attempt = tokio::time::timeout(LOAD_TIMEOUT, self.load(&mut st.conn)).await;
        }
        let raw = match attempt {
            Ok(Ok(raw)) => raw,
            Ok(Err(e)) => {
                st.conn = None;
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
            Err(_) => {
                st.conn = None;
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(CatalogError::Timeout(LOAD_TIMEOUT));
            }
        };
        self.install(st, raw);
        st.last_started = Some(started);
        Ok(())
    }

    /// Builds the snapshot of `raw` and swaps it in.
    fn install(&self, st: &mut RefreshState, raw: RawCatalog) {
        let snap = SchemaSnapshot::build(&raw);
        for (t, why) in &snap.unknown_writes {
            tracing::debug!(table = %format!("{}.{}", t.0, t.1), %why, "catalog: trigger not analysed; writes to this table invalidate conservatively");
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
                raw.replace(changed, &children, fresh);
                self.install(&mut st, raw);
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
        let snap = self.snapshot.load();
        let mut names: Vec<&TableName> = snap.relations.keys().collect();
        names.sort();
        let mut out: Vec<String> = names
            .into_iter()
            .map(|t| {
                let one = std::slice::from_ref(t);
                format!(
                    "{}.{}: read {:?}, write {:?}",
                    t.0,
                    t.1,
                    snap.resolve_read(one),
                    snap.expand_write(one)
                )
            })
            .collect();
        let mut schemas: Vec<_> = snap.by_schema.iter().collect();
        schemas.sort();
        out.extend(
            schemas
                .into_iter()
                .map(|(s, n)| format!("schema {s}: {n:?}")),
        );
        out
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
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
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
                "SELECT {COLUMN_CODE_COLUMNS} FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA NOT IN {SKIPPED_SCHEMAS} AND {COLUMN_CODE_FILTER}"
            ))
            .await?;
        for r in rows {
            push_column_code(&mut raw, r);
        }
        let rows: Vec<Row> = conn
            .query(
                format!(
                "SELECT TRIGGER_SCHEMA, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT \
                 FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA NOT IN {SKIPPED_SCHEMAS}"
            ))
            .await?;
        for mut r in rows {
            raw.triggers.push((
                text(&mut r, 0),
                text(&mut r, 1),
                text(&mut r, 2),
                text(&mut r, 3),
            ));
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
        columns_where(
            conn,
            &format!("TABLE_SCHEMA NOT IN {SKIPPED_SCHEMAS}"),
            &mut raw,
        )
        .await?;
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
        self.snapshot.load().resolve_read(tables)
    }

    /// Tables a write to `tables` changes: the tables themselves, plus what their triggers
    /// write and FK cascades reach, transitively (cycle-safe). `None` = a trigger body we
    /// couldn't analyse, or no catalog loaded: the caller invalidates conservatively.
    pub fn expand_write(&self, tables: &[TableName]) -> Option<Vec<TableName>> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot.load().expand_write(tables)
    }

    /// [`Catalog::expand_write`] for a data change a session is about to send, which may race
    /// a DDL from elsewhere: while a reload after a DDL is under way, a table the snapshot
    /// does not know counts as unknown writes, since it may be one that DDL just created with
    /// a trigger or a column default that writes other tables. (A temporary table or one
    /// that does not exist costs an extra invalidation in that window, no more. A DDL's own
    /// tables are expanded again once its reload is done.)
    pub fn expand_data_write(&self, tables: &[TableName]) -> Option<Vec<TableName>> {
        if !self.is_loaded() {
            return None;
        }
        let snap = self.snapshot.load();
        if self.ddl_reloads.load(Ordering::Acquire) > 0
            && tables.iter().any(|t| !snap.relations.contains_key(t))
        {
            return None;
        }
        snap.expand_write(tables)
    }

    /// A base table's column (lower-cased names), for row slices. None when unknown.
    pub fn column(&self, t: &TableName, column: &str) -> Option<ColumnInfo> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot
            .load()
            .columns
            .get(t)?
            .by_name
            .get(column)
            .cloned()
    }

    /// A base table's columns in the order a column-less INSERT fills them.
    pub fn column_order(&self, t: &TableName) -> Option<Vec<String>> {
        if !self.is_loaded() {
            return None;
        }
        self.snapshot.load().columns.get(t)?.order.clone()
    }

    /// Whether a write's own statement (or row image) names the rows it changes in `t`
    /// (no trigger on it, no cascade back to it). False when the catalog is not loaded.
    pub fn rows_knowable(&self, t: &TableName) -> bool {
        // While a DDL's reload is under way, the table may just have gained a trigger.
        self.is_loaded()
            && self.ddl_reloads.load(Ordering::Acquire) == 0
            && self.snapshot.load().rows_knowable(t)
    }

    /// A base table's columns in ordinal order, as row images carry them.
    pub fn columns_by_ordinal(&self, t: &TableName) -> Option<Arc<[(String, ColumnInfo)]>> {
        if !self.is_loaded() {
            return None;
        }
        let snap = self.snapshot.load();
        let all = &snap.columns.get(t)?.all;
        (!all.is_empty()).then(|| all.clone())
    }

    /// Tables a write to `tables` reaches through triggers and cascades (not the tables
    /// themselves unless an edge leads back to them): their rows are not in any statement
    /// or row image qcache saw.
    pub fn reached_by_edges(&self, tables: &[TableName]) -> HashSet<TableName> {
        let snap = self.snapshot.load();
        let mut seen: HashSet<TableName> = HashSet::new();
        let mut queue: Vec<&TableName> = tables
            .iter()
            .flat_map(|t| snap.writes.get(t).into_iter().flatten())
            .collect();
        while let Some(n) = queue.pop() {
            if seen.insert(n.clone()) {
                queue.extend(snap.writes.get(n).into_iter().flatten());
            }
        }
        seen
    }

    /// Every base table and view of `schema` (lower-cased), sorted.
    pub fn schema_tables(&self, schema: &str) -> Vec<String> {
        self.snapshot
            .load()
            .by_schema
            .get(schema)
            .cloned()
            .unwrap_or_default()
    }
}

/// A string literal for a name known to hold no backslash (see [`Catalog::refresh_changed`]):
/// quotes are doubled, which every sql_mode reads alike.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The server's current rows for what `changed` covers, plus the foreign keys of
/// `children`. Every query is one information_schema reads by schema and table name
/// (`TABLE_SCHEMA = … AND TABLE_NAME = …` lets the server open just that table), except
/// the first per schema, which lists the schema's relations to find the named ones by the
/// server's own spelling (names compare by case on most servers, and qcache's are
/// lower-cased).
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
    if !lowered.is_empty() {
        let list: Vec<String> = lowered.iter().map(|s| lit(s)).collect();
        let spellings: Vec<Row> = conn
            .query(format!(
                "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
                 WHERE LOWER(SCHEMA_NAME) IN ({})",
                list.join(", ")
            ))
            .await?;
        for mut r in spellings {
            let schema = text(&mut r, 0);
            let lower_schema = schema.to_lowercase();
            if skipped(&lower_schema) {
                continue;
            }
            let whole = changed.schemas.contains(&lower_schema);
            let select =
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES";
            let mut rows: Vec<Row> = Vec::new();
            if whole {
                let sql = format!("{select} WHERE TABLE_SCHEMA = {}", lit(&schema));
                rows = conn.query(sql).await?;
            } else {
                // The names alone come from the schema's directory listing; TABLE_TYPE would
                // make the server read every table's definition in the schema. Then each
                // relation found is read by its exact name.
                let names: Vec<String> = changed
                    .objects
                    .iter()
                    .filter(|(s, _)| *s == lower_schema)
                    .map(|(_, n)| lit(n))
                    .collect();
                let spelled: Vec<Row> = conn
                    .query(format!(
                        "SELECT TABLE_NAME FROM information_schema.TABLES \
                         WHERE TABLE_SCHEMA = {} AND LOWER(TABLE_NAME) IN ({})",
                        lit(&schema),
                        names.join(", ")
                    ))
                    .await?;
                for mut r in spelled {
                    // Lower-cased, it is one of the names checked in refresh_changed.
                    let name = text(&mut r, 0);
                    let sql = format!(
                        "{select} WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
                        lit(&schema),
                        lit(&name)
                    );
                    rows.extend(conn.query::<Row, _>(sql).await?);
                }
            }
            let mut found = Vec::new();
            for mut r in rows {
                found.push((text(&mut r, 0), text(&mut r, 1), text(&mut r, 2)));
            }
            raw.tables.extend(found.iter().cloned());
            // By schema when it is reloaded whole, else by each relation found.
            let lookups: Vec<(String, bool, Option<String>)> = if whole {
                vec![(schema.clone(), false, None)]
            } else {
                found
                    .into_iter()
                    .map(|(s, n, kind)| (s, kind.eq_ignore_ascii_case("VIEW"), Some(n)))
                    .collect()
            };
            for (s, is_view, name) in lookups {
                let and = |col: &str| {
                    name.as_ref()
                        .map_or(String::new(), |n| format!(" AND {col} = {}", lit(n)))
                };
                if name.is_none() || is_view {
                    let rows: Vec<Row> = conn
                        .query(format!(
                            "SELECT {VIEW_COLUMNS} FROM information_schema.VIEWS \
                             WHERE TABLE_SCHEMA = {}{}",
                            lit(&s),
                            and("TABLE_NAME")
                        ))
                        .await?;
                    for r in rows {
                        push_view(&mut raw, r);
                    }
                }
                columns_where(
                    conn,
                    &format!("TABLE_SCHEMA = {}{}", lit(&s), and("TABLE_NAME")),
                    &mut raw,
                )
                .await?;
                if name.is_none() || !is_view {
                    let rows: Vec<Row> = conn
                        .query(format!(
                            "SELECT TRIGGER_SCHEMA, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, \
                             ACTION_STATEMENT FROM information_schema.TRIGGERS \
                             WHERE EVENT_OBJECT_SCHEMA = {}{}",
                            lit(&s),
                            and("EVENT_OBJECT_TABLE")
                        ))
                        .await?;
                    for mut r in rows {
                        raw.triggers.push((
                            text(&mut r, 0),
                            text(&mut r, 1),
                            text(&mut r, 2),
                            text(&mut r, 3),
                        ));
                    }
                    foreign_keys_of(conn, &s, name.as_deref(), &mut raw).await?;
                    let rows: Vec<Row> = conn
                        .query(format!(
                            "SELECT {COLUMN_CODE_COLUMNS} FROM information_schema.COLUMNS \
                             WHERE TABLE_SCHEMA = {}{} AND {COLUMN_CODE_FILTER}",
                            lit(&s),
                            and("TABLE_NAME")
                        ))
                        .await?;
                    for r in rows {
                        push_column_code(&mut raw, r);
                    }
                }
            }
        }
    }
    for (s, t) in children {
        if s.contains('\\') || t.contains('\\') {
            return Err(CatalogError::Unreadable(format!("{s}.{t}")));
        }
        let lower_schema = s.to_lowercase();
        if !skipped(&lower_schema) {
            foreign_keys_of(conn, s, Some(t), &mut raw).await?;
        }
    }
    Ok(raw)
}

/// The foreign keys of table `name` of `schema` (all of the schema's when None), as children.
async fn foreign_keys_of(
    conn: &mut Conn,
    schema: &str,
    name: Option<&str>,
    raw: &mut RawCatalog,
) -> Result<(), CatalogError> {
    let and = name.map_or(String::new(), |n| format!(" AND TABLE_NAME = {}", lit(n)));
    let rows: Vec<Row> = conn
        .query(format!(
            "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, \
             REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE \
             FROM information_schema.REFERENTIAL_CONSTRAINTS \
             WHERE CONSTRAINT_SCHEMA = {}{and}",
            lit(schema)
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
    Ok(())
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

/// The expressions of a table's columns that the server evaluates on a write. Only those
/// with a parenthesis can call anything (a literal default is shown quoted, so a parenthesis
/// inside it costs a parse that finds no call).
const COLUMN_CODE_COLUMNS: &str = "TABLE_SCHEMA, TABLE_NAME, COLUMN_DEFAULT, GENERATION_EXPRESSION";
const COLUMN_CODE_FILTER: &str =
    "(COLUMN_DEFAULT LIKE '%(%' OR GENERATION_EXPRESSION LIKE '%(%' OR COLUMN_DEFAULT LIKE '%value%for%')";

fn push_column_code(raw: &mut RawCatalog, mut r: Row) {
    let (schema, table) = (text(&mut r, 0), text(&mut r, 1));
    for i in [2, 3] {
        let expr = text(&mut r, i);
        if !expr.is_empty() {
            raw.column_code.push((schema.clone(), table.clone(), expr));
        }
    }
}

/// The rows of information_schema.COLUMNS matching `filter`.
async fn columns_where(
    conn: &mut Conn,
    filter: &str,
    raw: &mut RawCatalog,
) -> Result<(), CatalogError> {
    let rows: Vec<Row> = conn
        .query(format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, \
             COLUMN_TYPE, IFNULL(COLLATION_NAME, ''), CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, \
             EXTRA FROM information_schema.COLUMNS WHERE {filter}"
        ))
        .await?;
    for mut r in rows {
        let num = |r: &mut Row, i: usize| text(r, i).parse::<u64>().ok();
        raw.columns.push(RawColumn {
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
        });
    }
    Ok(())
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

    fn t(s: &str, n: &str) -> TableName {
        (s.into(), n.into())
    }

    fn raw() -> RawCatalog {
        let s = |x: &str| x.to_string();
        RawCatalog {
            columns: Vec::new(),
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
                (s("db"), s("db"), s("a"), s("INSERT INTO audit VALUES (NEW.id)")),
                (
                    s("db"),
                    s("db"),
                    s("audit"),
                    s("BEGIN\n  SET NEW.x = 1;\n  IF NEW.id > 3 THEN UPDATE other.c SET x = 1; END IF;\nEND"),
                ),
                (s("db"), s("db"), s("weird"), s("BEGIN CALL p(); END")),
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
            columns: Vec::new(),
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

    #[test]
    fn schema_listing() {
        let s = SchemaSnapshot::build(&raw());
        assert_eq!(s.by_schema.get("other"), Some(&vec!["c".to_string()]));
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
