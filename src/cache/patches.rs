//! Which entries a write may patch (`policy::patch`): the keys of patchable entries per
//! table, each beside its recipe's WHERE summary (`policy::patch::Summary`) so that a write
//! looks up only the entries its rows may change; the statement shapes whose patching the
//! verifier turned off; and what a write in flight means to patch.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::{DashMap, DashSet};

use super::entry::Entry;
use super::key::Key;
use super::versions::TableHandle;
use crate::policy::patch::{Recipe, Summary};
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
}

/// One table's registered keys, oldest first, and what their summaries share.
#[derive(Debug, Default)]
pub struct TableKeys {
    keys: VecDeque<Registered>,
    /// The columns the summaries test, by slot (`Summary`).
    columns: Vec<String>,
    /// The lists of columns the recipes use (`Recipe::used_columns`), one `Arc` per list.
    shapes: Vec<Arc<[String]>>,
}

/// A registered key and what the recipe it was registered with asks of a write's rows.
/// The entry under the key may since hold another recipe: the write then judges it by its
/// own (`engine::patch`), so a summary out of date costs time, never a wrong answer.
#[derive(Debug, Clone)]
pub struct Registered {
    pub key: Key,
    pub recipe: Arc<Recipe>,
    /// `recipe`'s WHERE, over [`TableKeys::columns`]' slots.
    pub summary: Summary,
    /// `recipe.used_columns()`, the same `Arc` for every key of one list.
    pub used: Arc<[String]>,
}

impl TableKeys {
    /// The registered keys, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Registered> {
        self.keys.iter()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The columns the summaries test, by slot.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    fn register(&mut self, key: Key, recipe: &Arc<Recipe>) {
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
        };
        // A key registered again keeps its place (as it always did) with its new recipe.
        if let Some(old) = self.keys.iter_mut().find(|k| k.key == key) {
            *old = r;
            return;
        }
        if self.keys.len() >= KEYS_PER_TABLE {
            self.keys.pop_front();
        }
        self.keys.push_back(r);
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
    /// with `recipe`.
    pub fn register(&self, schema: &str, table: &str, key: Key, recipe: &Arc<Recipe>) {
        let mut schemas = self.by_table.entry(table.to_string()).or_default();
        match schemas.iter_mut().find(|(s, _)| s == schema) {
            Some((_, t)) => t.register(key, recipe),
            None => {
                let mut t = TableKeys::default();
                t.register(key, recipe);
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

    use crate::policy::patch::{Agg, Cond};

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
        })
    }

    #[test]
    fn keys_are_bounded_and_shapes_turned_off() {
        let p = Patchable::default();
        let r = recipe(&[]);
        for i in 0..(KEYS_PER_TABLE as u128 + 10) {
            p.register("db", "t", i, &r);
            p.register("db", "t", i, &r);
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
        p.register("db", "t", 1, &a);
        p.register("db", "t", 2, &a2);
        p.register("db", "t", 3, &b);
        p.register("db", "t", 1, &a2);
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
            q.register("db", "t", i as Key, &recipe(&[(&c, Cond::In(vec![1]))]));
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
}
