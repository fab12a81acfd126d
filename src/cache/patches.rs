//! Which entries a write may patch (`policy::patch`): the keys of patchable entries per
//! table, each beside its recipe's WHERE summary (`policy::patch::Summary`) and what of its
//! table its stamps depend on ([`Reach`]), indexed by slice counter, so that a write finds
//! the few entries its bumps reach ([`WriteReach`]) without visiting the others; the
//! statement shapes whose patching the verifier turned off; and what a write in flight
//! means to patch.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::{DashMap, DashSet};

use super::entry::Entry;
use super::key::Key;
use super::versions::{KnownRows, Stamps, TableHandle, Versions};
use crate::policy::patch::{Param, ReadShape, Recipe, Refusal, Summary};
use crate::policy::verify::{Budget, Outcome};
use crate::protocol::packets::OkInfo;

/// Keys remembered per table; the oldest is forgotten first (it may long be gone).
const KEYS_PER_TABLE: usize = 256;
/// Columns a table's summaries may test; a conjunct on another one is left out of its
/// summary (it then may match more: fail closed).
const SUMMARY_COLUMNS: usize = 16;
/// Lists of used columns shared per table; past it, a recipe's list is its own.
const SHAPES_PER_TABLE: usize = 32;

/// The patchable entries' keys per table, and the shapes patching is off for.
#[derive(Debug, Default)]
pub struct Patchable {
    /// By table name, then schema: looked up without building a key.
    by_table: DashMap<String, Vec<(String, TableKeys)>>,
    off: DashSet<u64>,
    /// Statements that may commit a write (`WriteInFlight`), begun and ended: what the
    /// verifier asks so that it never compares a patch with an answer that includes a
    /// write through qcache whose bump has not landed yet.
    writes_begun: AtomicU64,
    writes_ended: Arc<AtomicU64>,
    /// Per statement shape, the server time its verification may spend (`policy::verify`).
    budgets: DashMap<u64, Budget>,
    /// Statement shapes (digests) whose structure no recipe takes (a join, ORDER BY,
    /// LIMIT: `Refusal::NotSimple`): not parsed again for a recipe at each of their misses.
    refused: DashSet<u64>,
    /// What `policy::patch::read_shape_bound` made of a statement's text and bound values
    /// (a function of nothing else), by both: a statement missed again (a dashboard's
    /// window re-read after a write) is not parsed again.
    shapes: std::sync::Mutex<ShapeMemo>,
    /// Whether `policy::patch::insert_rows_bound` takes an INSERT's structure, by its slice
    /// shape's key (`analysis::slices::Shape::memo_key`) and how many values an execute
    /// bound (None: a text statement): what its statements share, so that the values the
    /// write's plan read are judged without a parse (`Patchable::insert_structure`).
    inserts: DashMap<(u64, Option<usize>), Result<(), Refusal>>,
}

/// Read shapes parsed, by a hash of their text and bound values; each compared in full.
type ShapeMemo = HashMap<u64, Vec<(Box<str>, Option<Vec<Param>>, Result<ReadShape, Refusal>)>>;

/// Statements whose read shape is remembered; past it the memo starts over.
const SHAPES_MEMO: usize = 4096;

/// What of its table an entry's stamps depend on, as far as a write to that table goes:
/// which of the table's bumps reach them. Taken from the stamps when the key is
/// registered; a patch re-stamps the same counters (`Stamps::recapture`), so it stays true
/// of the entry under the key until another fill replaces it (then registered again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Every write to the table reaches them: they stamp one of its whole-table versions
    /// (or do not name the table at all, which fails closed).
    pub all: bool,
    /// The slice columns they read the table by: a write that does not name its rows'
    /// values in one of them bumps that column's unknown version.
    pub columns: Box<[Box<str>]>,
    /// The slice counter indexes they stamp, sorted.
    pub slices: Box<[u32]>,
}

impl Reach {
    /// What `stamps` depend on of table `schema.table`.
    pub fn of(stamps: &Stamps, schema: &str, table: &str) -> Reach {
        let this = |t: &TableHandle| t.schema == schema && t.name == table;
        let whole = stamps
            .tables
            .iter()
            .chain(&stamps.rows)
            .any(|(t, _)| this(t));
        let sliced: Vec<_> = stamps.sliced.iter().filter(|s| this(&s.table)).collect();
        if whole || sliced.is_empty() {
            return Reach {
                all: true,
                ..Reach::default()
            };
        }
        let mut columns: Vec<Box<str>> = Vec::new();
        let mut slices = Vec::new();
        for s in sliced {
            if !columns.iter().any(|c| **c == *s.column_name()) {
                columns.push(s.column_name().into());
            }
            slices.extend(s.slice_indexes());
        }
        slices.sort_unstable();
        slices.dedup();
        Reach {
            all: false,
            columns: columns.into(),
            slices: slices.into(),
        }
    }
}

/// What a planned write's bumps of one table move (`Versions::bump` or `bump_rows`), as far
/// as [`Reach`] tells entries apart: everything, or the slice counters of the values its
/// rows name per column, and the unknown versions of the slice columns it names no values
/// in. Read from the plan before the write goes upstream; what the OK adds to the plan
/// (derived slices) names more columns, so it is taken as not named here: more reached,
/// never fewer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteReach {
    pub all: bool,
    /// Columns whose rows' values the write names.
    pub named: Vec<String>,
    /// The slice counter indexes of those values, sorted.
    pub slices: Vec<u32>,
}

impl WriteReach {
    /// What the bumps of `t` move of a planned write (`cache::writes::Pending`) that bumps
    /// `tables` whole and the rows `rows` names.
    pub fn of(
        tables: &[TableHandle],
        rows: &[(TableHandle, Arc<KnownRows>)],
        t: &TableHandle,
    ) -> WriteReach {
        let mut w = WriteReach {
            all: t.is_privilege_table() || tables.iter().any(|x| Arc::ptr_eq(x, t)),
            ..WriteReach::default()
        };
        if w.all {
            return w;
        }
        for (_, known) in rows.iter().filter(|(x, _)| Arc::ptr_eq(x, t)) {
            for (column, keys) in known.iter() {
                if !w.named.contains(column) {
                    w.named.push(column.clone());
                }
                w.slices
                    .extend(keys.iter().map(|k| Versions::slice_index(t, column, k)));
            }
        }
        w.slices.sort_unstable();
        w.slices.dedup();
        w
    }

    /// Whether these bumps move a counter that stamps of reach `r` hold. Never false when
    /// they do (`tests::write_reach_predicts_every_bump`); true also for a counter two
    /// slices share (an index collision), which the bump moves for both.
    pub fn reaches(&self, r: &Reach) -> bool {
        self.all
            || r.all
            || r.columns
                .iter()
                .any(|c| !self.named.iter().any(|n| **n == **c))
            || r.slices
                .iter()
                .any(|i| self.slices.binary_search(i).is_ok())
    }
}

/// One table's registered keys, oldest first, what their summaries share, and the keys
/// indexed by what reaches them ([`Reach`]).
#[derive(Debug, Default)]
pub struct TableKeys {
    /// Oldest first.
    order: VecDeque<Key>,
    keys: HashMap<Key, Registered>,
    /// Keys every write of the table reaches (`Reach::all`).
    always: Vec<Key>,
    /// Keys by the slice columns they read by (reached when a write names no values there).
    by_column: Vec<(Box<str>, Vec<Key>)>,
    /// Keys by the slice counters they stamp.
    by_slice: HashMap<u32, Vec<Key>>,
    /// The columns the summaries test, by slot (`Summary`).
    columns: Vec<String>,
    /// The lists of columns the recipes use (`Recipe::used_columns`), one `Arc` per list.
    shapes: Vec<Arc<[String]>>,
}

/// A registered key and what the recipe it was registered with asks of a write's rows.
/// The entry under the key may since hold another recipe: the write then judges it by its
/// own (`engine::patch`), so a summary out of date costs time, never a wrong answer. The
/// same for its reach: a write that reaches the entry but not the reach registered leaves
/// it out, and its bumps then invalidate it (a lost patch, never a stale entry).
#[derive(Debug, Clone)]
pub struct Registered {
    pub key: Key,
    pub recipe: Arc<Recipe>,
    /// `recipe`'s WHERE, over [`TableKeys::columns`]' slots.
    pub summary: Summary,
    /// `recipe.used_columns()`, the same `Arc` for every key of one list.
    pub used: Arc<[String]>,
    /// What of the table the stamps of the entry stored with it depend on.
    pub reach: Reach,
}

fn unlist(list: &mut Vec<Key>, key: Key) {
    if let Some(i) = list.iter().position(|k| *k == key) {
        list.swap_remove(i);
    }
}

impl TableKeys {
    /// The registered keys, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Registered> {
        self.order.iter().filter_map(|k| self.keys.get(k))
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The columns the summaries test, by slot.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The registered keys whose entries' stamps a write moving `w` reaches (as registered:
    /// [`Registered`]), each once: every key when the write reaches the whole table, else
    /// only those its slice counters or unnamed columns index, not visiting the others.
    pub fn reached(&self, w: &WriteReach) -> Vec<&Registered> {
        if w.all {
            return self.iter().collect();
        }
        let mut out: Vec<Key> = self.always.clone();
        for (c, keys) in &self.by_column {
            if !w.named.iter().any(|n| **n == **c) {
                out.extend(keys);
            }
        }
        for i in &w.slices {
            if let Some(keys) = self.by_slice.get(i) {
                out.extend(keys);
            }
        }
        out.sort_unstable();
        out.dedup();
        out.iter().filter_map(|k| self.keys.get(k)).collect()
    }

    fn index(&mut self, key: Key, reach: &Reach) {
        if reach.all {
            self.always.push(key);
            return;
        }
        for c in reach.columns.iter() {
            match self.by_column.iter_mut().find(|(x, _)| x == c) {
                Some((_, keys)) => keys.push(key),
                None => self.by_column.push((c.clone(), vec![key])),
            }
        }
        for i in reach.slices.iter() {
            self.by_slice.entry(*i).or_default().push(key);
        }
    }

    fn unindex(&mut self, key: Key, reach: &Reach) {
        if reach.all {
            unlist(&mut self.always, key);
            return;
        }
        for c in reach.columns.iter() {
            if let Some(i) = self.by_column.iter().position(|(x, _)| x == c) {
                unlist(&mut self.by_column[i].1, key);
                if self.by_column[i].1.is_empty() {
                    self.by_column.swap_remove(i);
                }
            }
        }
        for i in reach.slices.iter() {
            if let Some(keys) = self.by_slice.get_mut(i) {
                unlist(keys, key);
                if keys.is_empty() {
                    self.by_slice.remove(i);
                }
            }
        }
    }

    fn register(&mut self, key: Key, recipe: &Arc<Recipe>, reach: Reach) {
        let columns = &mut self.columns;
        let summary = Summary::of(&recipe.filter, |c| {
            if let Some(i) = columns.iter().position(|x| x == c) {
                return Some(i);
            }
            (columns.len() < SUMMARY_COLUMNS).then(|| {
                columns.push(c.to_string());
                columns.len() - 1
            })
        });
        let used = recipe.used_columns();
        let used = match self.shapes.iter().find(|s| ***s == *used) {
            Some(s) => s.clone(),
            None => {
                let s: Arc<[String]> = Arc::from(used);
                if self.shapes.len() < SHAPES_PER_TABLE {
                    self.shapes.push(s.clone());
                }
                s
            }
        };
        let r = Registered {
            key,
            recipe: recipe.clone(),
            summary,
            used,
            reach,
        };
        // A key registered again keeps its place (as it always did) with its new recipe
        // and reach.
        if let Some(old) = self.keys.remove(&key) {
            self.unindex(key, &old.reach);
        } else {
            if self.order.len() >= KEYS_PER_TABLE {
                if let Some(gone) = self.order.pop_front() {
                    if let Some(old) = self.keys.remove(&gone) {
                        self.unindex(gone, &old.reach);
                    }
                }
            }
            self.order.push_back(key);
        }
        self.index(key, &r.reach);
        self.keys.insert(key, r);
    }
}

/// Shapes remembered as refused; past it the set starts over.
const REFUSED_SHAPES: usize = 4096;

/// A statement that may commit a write is on its way to the server or back (a write, or
/// any statement of a session in a transaction); dropped when its response ended (or the
/// session went away).
#[derive(Debug)]
pub struct WriteInFlight {
    ended: Arc<AtomicU64>,
}

impl Drop for WriteInFlight {
    fn drop(&mut self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
}

impl Patchable {
    /// Remembers that `key` holds an entry of `schema.table` a write may patch, stored
    /// with `recipe` and stamps of `reach` (`Reach::of` the entry's stamps).
    pub fn register(
        &self,
        schema: &str,
        table: &str,
        key: Key,
        recipe: &Arc<Recipe>,
        reach: Reach,
    ) {
        let mut schemas = self.by_table.entry(table.to_string()).or_default();
        match schemas.iter_mut().find(|(s, _)| s == schema) {
            Some((_, t)) => t.register(key, recipe, reach),
            None => {
                let mut t = TableKeys::default();
                t.register(key, recipe, reach);
                schemas.push((schema.to_string(), t));
            }
        }
    }

    /// Whether any key is remembered for `schema.table`.
    pub fn has_keys(&self, schema: &str, table: &str) -> bool {
        self.with_table(schema, table, |t| !t.is_empty())
            .unwrap_or(false)
    }

    /// `f` of what is remembered for `schema.table` (None when nothing is), under the
    /// map's read lock: `f` must not register. Entries under the keys may be gone or
    /// replaced: the caller looks each one up.
    pub fn with_table<R>(
        &self,
        schema: &str,
        table: &str,
        f: impl FnOnce(&TableKeys) -> R,
    ) -> Option<R> {
        let schemas = self.by_table.get(table)?;
        let (_, t) = schemas.iter().find(|(s, _)| s == schema)?;
        Some(f(t))
    }

    /// The keys remembered for `schema.table`, oldest first.
    pub fn keys(&self, schema: &str, table: &str) -> Vec<Key> {
        self.with_table(schema, table, |t| t.iter().map(|r| r.key).collect())
            .unwrap_or_default()
    }

    /// Turns patching off for the statement shape `digest` (the verifier found a patch of
    /// it wrong). Until the process restarts.
    pub fn turn_off(&self, digest: u64) {
        self.off.insert(digest);
    }

    pub fn is_off(&self, digest: u64) -> bool {
        self.off.contains(&digest)
    }

    /// Whether shape `digest` (0: none) was refused by its structure before: then its
    /// statement need not be parsed again. Statements of one digest differ only in their
    /// literals, which no structural refusal depends on; a collision of digests can only
    /// keep a shape from being patched, never patch one wrongly.
    pub fn shape_refused(&self, digest: u64) -> bool {
        digest != 0 && self.refused.contains(&digest)
    }

    /// `policy::patch::read_shape_bound(sql, params)`, parsed once per text and values
    /// while remembered.
    pub fn read_shape(&self, sql: &str, params: Option<&[Param]>) -> Result<ReadShape, Refusal> {
        use std::hash::{Hash, Hasher};
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        sql.hash(&mut h);
        params.hash(&mut h);
        let hash = h.finish();
        let memo = || self.shapes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = memo().get(&hash) {
            if let Some((_, _, r)) = list
                .iter()
                .find(|(s, p, _)| **s == *sql && p.as_deref() == params)
            {
                return r.clone();
            }
        }
        let r = crate::policy::patch::read_shape_bound(sql, params);
        let mut m = memo();
        if m.len() >= SHAPES_MEMO {
            m.clear();
        }
        m.entry(hash)
            .or_default()
            .push((sql.into(), params.map(<[Param]>::to_vec), r.clone()));
        r
    }

    /// `policy::patch::insert_structure(sql, params)`, parsed once per INSERT shape (`shape`,
    /// the key of `sql`'s slice shape) and number of bound values while remembered. A
    /// collision of keys is the slice shapes' own: the values judged come from that shape.
    pub fn insert_structure(
        &self,
        sql: &str,
        shape: u64,
        params: Option<&[Param]>,
    ) -> Result<(), Refusal> {
        let key = (shape, params.map(<[Param]>::len));
        if let Some(r) = self.inserts.get(&key) {
            return *r;
        }
        let r = crate::policy::patch::insert_structure(sql, params);
        if self.inserts.len() >= SHAPES_MEMO {
            self.inserts.clear();
        }
        self.inserts.insert(key, r);
        r
    }

    /// Remembers that shape `digest` was refused by its structure.
    pub fn refuse_shape(&self, digest: u64) {
        if digest == 0 {
            return;
        }
        if self.refused.len() >= REFUSED_SHAPES {
            self.refused.clear();
        }
        self.refused.insert(digest);
    }

    /// A patch of shape `digest` was stored (`policy::verify::Budget::patched`): the
    /// estimate charged when it is to be verified, which [`verify_ended`](Self::verify_ended)
    /// must settle.
    pub fn verify_due(&self, digest: u64, share: f64, saved_ns: u64, fill_ns: u64) -> Option<u64> {
        if share <= 0.0 {
            return None;
        }
        self.budgets
            .entry(digest)
            .or_default()
            .patched(share, saved_ns, fill_ns)
    }

    /// A verification of shape `digest` charged `estimate` ended (`Budget::ended`).
    pub fn verify_ended(&self, digest: u64, estimate: u64, spent_ns: u64, outcome: Outcome) {
        if let Some(mut b) = self.budgets.get_mut(&digest) {
            b.ended(estimate, spent_ns, outcome);
        }
    }

    /// Counts a statement that may commit a write, until the guard drops.
    pub fn write_begins(&self) -> WriteInFlight {
        self.writes_begun.fetch_add(1, Ordering::SeqCst);
        WriteInFlight {
            ended: self.writes_ended.clone(),
        }
    }

    /// Some(mark) when no statement that may commit a write is in flight (ended read
    /// first: equal to begun read after it, none was in flight and none began between).
    pub fn writes_quiet(&self) -> Option<u64> {
        let ended = self.writes_ended.load(Ordering::SeqCst);
        let begun = self.writes_begun.load(Ordering::SeqCst);
        (ended == begun).then_some(begun)
    }

    /// Whether none began since `writes_quiet` said `mark` (and so none is in flight).
    pub fn writes_quiet_since(&self, mark: u64) -> bool {
        self.writes_begun.load(Ordering::SeqCst) == mark
            && self.writes_ended.load(Ordering::SeqCst) == mark
    }
}

/// One entry a write means to patch: the entry as it was before the write went upstream
/// (a result computed then, so before the write), its recipe and the write's rows in the
/// recipe's columns.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub key: Key,
    pub entry: Arc<Entry>,
    pub recipe: Arc<Recipe>,
    pub rows: Arc<[Vec<Option<i128>>]>,
    /// Whether the recipe's WHERE keeps any of the rows (`Recipe::keeps_any`): when not,
    /// the result is unchanged, and only re-stamped if the write's bumps reached it.
    pub touched: bool,
}

/// A patched entry to verify against the server (`shared::verify`).
pub struct ToVerify {
    pub key: Key,
    /// The entry stored.
    pub entry: Arc<Entry>,
    pub recipe: Arc<Recipe>,
    /// The server time its shape's budget charged for it (`policy::verify`), settled with
    /// what the re-read took when it ends.
    pub estimate: u64,
}

/// What a write in flight means to patch, planned before it was sent.
#[derive(Debug, Clone)]
pub struct PatchWrite {
    /// The one table it writes.
    pub table: TableHandle,
    /// Rows it inserts: what the server's OK must report as affected.
    pub rows: u64,
    pub candidates: Vec<Candidate>,
    /// The server's OK, once it came.
    pub ok: Option<OkInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cache::versions::{ColumnReads, SlicePlan};
    use crate::policy::patch::{Agg, Cond};

    /// A reach every write of the table has.
    fn all() -> Reach {
        Reach {
            all: true,
            ..Reach::default()
        }
    }

    /// A `SELECT COUNT(*) FROM db.t WHERE …` recipe of `filter`.
    fn recipe(filter: &[(&str, Cond)]) -> Arc<Recipe> {
        Arc::new(Recipe {
            schema: "db".into(),
            table: "t".into(),
            aggs: vec![Agg::CountStar],
            ints: vec![None],
            scales: vec![0],
            minmax: vec![None],
            filter: filter
                .iter()
                .map(|(c, cond)| (c.to_string(), cond.clone()))
                .collect(),
            kinds: Vec::new(),
            group: None,
            key: None,
            binary: false,
            digest: 1,
            sql: String::new(),
            join: None,
        })
    }

    #[test]
    fn keys_are_bounded_and_shapes_turned_off() {
        let p = Patchable::default();
        let r = recipe(&[]);
        for i in 0..(KEYS_PER_TABLE as u128 + 10) {
            p.register("db", "t", i, &r, all());
            p.register("db", "t", i, &r, all());
        }
        let keys = p.keys("db", "t");
        assert_eq!(keys.len(), KEYS_PER_TABLE);
        assert_eq!(keys[0], 10);
        assert!(p.keys("db", "u").is_empty());
        assert!(p.keys("other", "t").is_empty(), "per schema");
        assert!(p.has_keys("db", "t") && !p.has_keys("other", "t"));
        assert!(!p.is_off(7));
        p.turn_off(7);
        assert!(p.is_off(7));
    }

    /// Each key keeps its recipe's summary over the table's column slots, and the keys of
    /// one list of used columns share it; a key registered again keeps its place with its
    /// new recipe; a column past the slots is left out of the summary (it may match more).
    #[test]
    fn keys_keep_their_summaries() {
        let p = Patchable::default();
        let a = recipe(&[("a", Cond::In(vec![1]))]);
        let a2 = recipe(&[("a", Cond::In(vec![2]))]);
        let b = recipe(&[(
            "b",
            Cond::Range {
                lo: Some(0),
                hi: None,
            },
        )]);
        p.register("db", "t", 1, &a, all());
        p.register("db", "t", 2, &a2, all());
        p.register("db", "t", 3, &b, all());
        p.register("db", "t", 1, &a2, all());
        p.with_table("db", "t", |t| {
            assert_eq!(t.columns(), ["a".to_string(), "b".to_string()]);
            let r: Vec<_> = t.iter().collect();
            assert_eq!(r.iter().map(|r| r.key).collect::<Vec<_>>(), [1, 2, 3]);
            assert!(Arc::ptr_eq(&r[0].recipe, &a2), "the new recipe, in place");
            assert!(Arc::ptr_eq(&r[0].used, &r[1].used), "one list of columns");
            assert!(!Arc::ptr_eq(&r[0].used, &r[2].used));
            let one = [Some(vec![Some(1)]), Some(vec![Some(5)])];
            let two = [Some(vec![Some(2)]), Some(vec![Some(-1)])];
            assert!(!r[0].summary.may_match(&one, 1) && r[0].summary.may_match(&two, 1));
            assert!(r[2].summary.may_match(&one, 1) && !r[2].summary.may_match(&two, 1));
        })
        .unwrap();
        let q = Patchable::default();
        for i in 0..SUMMARY_COLUMNS + 1 {
            let c = format!("c{i}");
            q.register(
                "db",
                "t",
                i as Key,
                &recipe(&[(&c, Cond::In(vec![1]))]),
                all(),
            );
        }
        q.with_table("db", "t", |t| {
            assert_eq!(t.columns().len(), SUMMARY_COLUMNS);
            let last = t.iter().last().unwrap();
            assert!(last.summary.is_any(), "no slot left: tests nothing");
            assert!(last.summary.may_match(&[], 1));
        })
        .unwrap();
    }

    /// The verifier's question: was a write in flight, or did one begin, meanwhile?
    #[test]
    fn writes_in_flight_are_seen() {
        let p = Patchable::default();
        let mark = p.writes_quiet().unwrap();
        assert!(p.writes_quiet_since(mark));
        let w = p.write_begins();
        assert!(p.writes_quiet().is_none(), "one in flight");
        assert!(!p.writes_quiet_since(mark));
        drop(w);
        assert!(!p.writes_quiet_since(mark), "one began and ended meanwhile");
        let mark = p.writes_quiet().unwrap();
        assert!(p.writes_quiet_since(mark));
    }

    /// One row per kind of stamps an entry of `db.t` holds, against each kind of bump a
    /// patching write makes: whether [`WriteReach::reaches`] says the bump reaches them, and
    /// that it never says no when the bump does move one of their counters (a filter that
    /// left such an entry out would leave it to be invalidated, never carried: but it would
    /// lose its patch).
    #[test]
    fn write_reach_predicts_every_bump() {
        type Known = &'static [(&'static str, &'static [&'static str])];
        // (write, the table bumped whole, its rows' values per column)
        let writes: &[(&str, bool, Known)] = &[
            ("rows a=1 b=5", false, &[("a", &["1"]), ("b", &["5"])]),
            ("rows a=2 b=7", false, &[("a", &["2"]), ("b", &["7"])]),
            ("rows a=1, 3 (b not named)", false, &[("a", &["1", "3"])]),
            ("the table whole", true, &[]),
        ];
        // (stamps, reached by each write in order)
        type Stamp = fn(&Versions, &TableHandle) -> Stamps;
        fn sliced(v: &Versions, t: &TableHandle, c: &str, key: &str, by_columns: bool) -> Stamps {
            let column = v.register(t, c);
            let i = Versions::slice_index(t, c, key);
            let plan = SlicePlan {
                table: t.clone(),
                column,
                slices: vec![i],
                by_columns,
                slice_columns: if by_columns {
                    vec![Versions::slice_column_index(t, c, i, "x")]
                } else {
                    Vec::new()
                },
            };
            Stamps::capture_sliced(v, &[], &[plan], &ColumnReads::default())
        }
        let rows: &[(&str, Stamp, [bool; 4])] = &[
            (
                "the table read whole",
                |v, t| Stamps::capture(v, std::slice::from_ref(t)),
                [true, true, true, true],
            ),
            (
                "the table read whole, its columns known",
                |v, t| {
                    let cols = ColumnReads {
                        tables: vec![t.clone()],
                        indexes: vec![Versions::column_index(t, "x")],
                    };
                    Stamps::capture_sliced(v, std::slice::from_ref(t), &[], &cols)
                },
                [true, true, true, true],
            ),
            (
                "the slice a=1",
                |v, t| sliced(v, t, "a", "1", false),
                [true, false, true, true],
            ),
            (
                "the slice a=1, its columns known",
                |v, t| sliced(v, t, "a", "1", true),
                [true, false, true, true],
            ),
            (
                "the slice b=7",
                |v, t| sliced(v, t, "b", "7", false),
                [false, true, true, true],
            ),
            (
                "another table only (its reach fails closed: every write's)",
                |v, _| Stamps::capture(v, &[v.table("db", "u")]),
                [true, true, true, true],
            ),
        ];
        for (what, stamps, want) in rows {
            for ((write, whole, known), want) in writes.iter().zip(want) {
                let v = Versions::new();
                let t = v.table("db", "t");
                // Both columns are registered slice columns before any stamps are read.
                v.register(&t, "a");
                v.register(&t, "b");
                let s = stamps(&v, &t);
                let reach = Reach::of(&s, "db", "t");
                let known: Arc<KnownRows> = known
                    .iter()
                    .map(|(c, ks)| (c.to_string(), ks.iter().map(|k| k.to_string()).collect()))
                    .collect::<Vec<_>>()
                    .into();
                let (mut tables, mut rows) = (Vec::new(), Vec::new());
                if *whole {
                    tables.push(t.clone());
                    v.bump(&t);
                } else {
                    rows.push((t.clone(), known.clone()));
                    v.bump_rows(&t, &known);
                }
                let w = WriteReach::of(&tables, &rows, &t);
                let reached = w.reaches(&reach);
                assert_eq!(reached, *want, "{what}, {write}");
                let moved = !s.is_current(&v);
                assert!(reached || !moved, "{what}, {write}: moved but not reached");
                if !what.starts_with("another") {
                    assert_eq!(moved, reached, "{what}, {write}: exactly what moves");
                }
            }
        }
    }

    /// A write visits only the keys indexed by what it reaches, each once; a key registered
    /// again is indexed by its new reach only, and a key forgotten is in no index.
    #[test]
    fn keys_are_found_by_what_reaches_them() {
        let p = Patchable::default();
        let r = recipe(&[]);
        let by = |columns: &[&str], slices: &[u32]| Reach {
            all: false,
            columns: columns.iter().map(|c| (*c).into()).collect(),
            slices: slices.into(),
        };
        p.register("db", "t", 1, &r, all());
        p.register("db", "t", 2, &r, by(&["a"], &[10, 11]));
        p.register("db", "t", 3, &r, by(&["a"], &[12]));
        p.register("db", "t", 4, &r, by(&["b"], &[20]));
        let write = |all: bool, named: &[&str], slices: &[u32]| WriteReach {
            all,
            named: named.iter().map(|c| c.to_string()).collect(),
            slices: slices.to_vec(),
        };
        let found = |w: &WriteReach| {
            p.with_table("db", "t", |t| {
                let mut k: Vec<Key> = t.reached(w).iter().map(|r| r.key).collect();
                k.sort_unstable();
                k
            })
            .unwrap()
        };
        type Row<'a> = (&'a str, WriteReach, &'a [Key]);
        let rows: &[Row] = &[
            ("one slice of a", write(false, &["a", "b"], &[11]), &[1, 2]),
            (
                "two slices of one key",
                write(false, &["a", "b"], &[10, 11]),
                &[1, 2],
            ),
            ("b not named", write(false, &["a"], &[12]), &[1, 3, 4]),
            ("no slice held", write(false, &["a", "b"], &[99]), &[1]),
            ("the whole table", write(true, &[], &[]), &[1, 2, 3, 4]),
        ];
        for (why, w, want) in rows {
            assert_eq!(found(w), *want, "{why}");
        }
        p.register("db", "t", 2, &r, by(&["a"], &[12]));
        assert_eq!(
            found(&write(false, &["a", "b"], &[11])),
            [1],
            "re-registered"
        );
        assert_eq!(found(&write(false, &["a", "b"], &[12])), [1, 2, 3]);
        assert_eq!(p.keys("db", "t"), [1, 2, 3, 4], "in its place");
        for i in 100..(100 + KEYS_PER_TABLE as Key) {
            p.register("db", "t", i, &r, by(&["c"], &[i as u32]));
        }
        p.with_table("db", "t", |t| {
            assert_eq!(t.len(), KEYS_PER_TABLE);
            assert!(t.always.is_empty() && t.by_column.iter().all(|(c, _)| &**c == "c"));
            assert!(t
                .by_slice
                .values()
                .flatten()
                .all(|k| t.keys.contains_key(k)));
            assert_eq!(t.by_slice.len(), KEYS_PER_TABLE);
        })
        .unwrap();
        assert_eq!(found(&write(false, &["a", "b", "c"], &[12, 100])), [100]);
    }

    /// A read's shape is parsed once per text and bound values: what the parse says each
    /// time, never another statement's.
    #[test]
    fn read_shapes_are_parsed_once_per_text_and_values() {
        use crate::policy::patch::read_shape_bound;
        let p = Patchable::default();
        let sql = "SELECT COUNT(*) FROM t WHERE a = ?";
        let other = "SELECT COUNT(*) FROM t WHERE a = 1";
        let cases: [(&str, Option<Vec<Param>>); 5] = [
            (sql, None),
            (sql, Some(vec![Param::Int(1)])),
            (sql, Some(vec![Param::Int(2)])),
            (other, None),
            ("SELECT AVG(a) FROM t", None),
        ];
        for (sql, params) in &cases {
            let want = read_shape_bound(sql, params.as_deref());
            assert_eq!(
                p.read_shape(sql, params.as_deref()),
                want,
                "{sql} {params:?}"
            );
            assert_eq!(
                p.read_shape(sql, params.as_deref()),
                want,
                "{sql}: remembered"
            );
        }
        let held: usize = p.shapes.lock().unwrap().values().map(Vec::len).sum();
        assert_eq!(held, cases.len(), "one per text and values");
    }
}
