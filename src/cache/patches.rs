//! Which entries a write may patch (`policy::patch`): the keys of patchable entries per
//! table, the statement shapes whose patching the verifier turned off, and what a write
//! in flight means to patch.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::{DashMap, DashSet};

use super::entry::Entry;
use super::key::Key;
use super::versions::TableHandle;
use crate::policy::patch::Recipe;
use crate::policy::verify::{Budget, Outcome};
use crate::protocol::packets::OkInfo;

/// Keys remembered per table; the oldest is forgotten first (it may long be gone).
const KEYS_PER_TABLE: usize = 256;

/// The patchable entries' keys per table, and the shapes patching is off for.
#[derive(Debug, Default)]
pub struct Patchable {
    by_table: DashMap<(String, String), VecDeque<Key>>,
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
    /// Remembers that `key` holds an entry of `schema.table` a write may patch.
    pub fn register(&self, schema: &str, table: &str, key: Key) {
        let mut keys = self
            .by_table
            .entry((schema.to_string(), table.to_string()))
            .or_default();
        if keys.contains(&key) {
            return;
        }
        if keys.len() >= KEYS_PER_TABLE {
            keys.pop_front();
        }
        keys.push_back(key);
    }

    /// The keys remembered for `schema.table` (entries under them may be gone or replaced:
    /// the caller looks each one up).
    pub fn keys(&self, schema: &str, table: &str) -> Vec<Key> {
        self.by_table
            .get(&(schema.to_string(), table.to_string()))
            .map(|k| k.iter().copied().collect())
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

    #[test]
    fn keys_are_bounded_and_shapes_turned_off() {
        let p = Patchable::default();
        for i in 0..(KEYS_PER_TABLE as u128 + 10) {
            p.register("db", "t", i);
            p.register("db", "t", i);
        }
        let keys = p.keys("db", "t");
        assert_eq!(keys.len(), KEYS_PER_TABLE);
        assert_eq!(keys[0], 10);
        assert!(p.keys("db", "u").is_empty());
        assert!(!p.is_off(7));
        p.turn_off(7);
        assert!(p.is_off(7));
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
