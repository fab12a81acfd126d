//! Resolved reads: the table handles a statement shape depends on under one default database.
//!
//! A miss needs the tables its result depends on. Working them out qualifies every name,
//! looks each up in the catalog (expanding views) and finds each table's version counter:
//! a dozen small allocations and hashes per miss. What comes out depends only on the shape
//! (its digest), the session's default database and the catalog, so it is remembered per
//! (digest, database) and trusted while the catalog's generation is unchanged. The version
//! registry never drops a counter, so a remembered handle stays the one writes bump.

use std::sync::Arc;

use quick_cache::sync::Cache;
use xxhash_rust::xxh3::xxh3_64;

use crate::cache::versions::TableHandle;
use crate::policy::Reason;

/// What resolving a shape gave: the tables, or why it can never be cached under this
/// database and catalog.
pub type Outcome = Result<Arc<[TableHandle]>, Reason>;

struct Resolved {
    /// The database the shape was resolved under, compared on lookup so that two databases
    /// whose names hash alike never share an answer.
    db: Option<Box<str>>,
    catalog_generation: u64,
    outcome: Outcome,
}

/// The bounded memo (quick_cache) of resolved reads, shared by every session.
pub struct ReadPlans {
    memo: Cache<(u64, u64), Arc<Resolved>>,
}

impl ReadPlans {
    /// `capacity`: (shape, database) pairs remembered (at least one).
    pub fn new(capacity: usize) -> ReadPlans {
        ReadPlans {
            memo: Cache::new(capacity.max(1)),
        }
    }

    /// The remembered outcome of `digest` under `db`, if it was resolved under the catalog
    /// generation `catalog_generation`.
    pub fn get(&self, digest: u64, db: Option<&str>, catalog_generation: u64) -> Option<Outcome> {
        let r = self.memo.get(&(digest, db_hash(db)))?;
        (r.catalog_generation == catalog_generation && r.db.as_deref() == db)
            .then(|| r.outcome.clone())
    }

    /// Remembers `outcome`. The caller passes the generation it read before resolving, so a
    /// catalog refresh racing the resolution leaves an entry that no lookup trusts.
    pub fn insert(&self, digest: u64, db: Option<&str>, catalog_generation: u64, outcome: Outcome) {
        self.memo.insert(
            (digest, db_hash(db)),
            Arc::new(Resolved {
                db: db.map(Box::from),
                catalog_generation,
                outcome,
            }),
        );
    }

    pub fn len(&self) -> usize {
        self.memo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.memo.is_empty()
    }
}

/// No database and an empty name differ: the first cannot resolve unqualified names.
fn db_hash(db: Option<&str>) -> u64 {
    match db {
        None => 0,
        Some(d) => xxh3_64(d.as_bytes()) | 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::versions::Versions;

    #[test]
    fn remembered_per_database_and_generation() {
        let v = Versions::new();
        let p = ReadPlans::new(16);
        let t: Arc<[TableHandle]> = Arc::from(vec![v.table("a", "t")]);
        p.insert(7, Some("a"), 1, Ok(t.clone()));
        let got = p.get(7, Some("a"), 1).unwrap().unwrap();
        assert!(Arc::ptr_eq(&got, &t));
        // Another database, no database, another shape, a newer catalog: not known.
        assert!(p.get(7, Some("b"), 1).is_none());
        assert!(p.get(7, None, 1).is_none());
        assert!(p.get(8, Some("a"), 1).is_none());
        assert!(p.get(7, Some("a"), 2).is_none());
        p.insert(7, None, 1, Err(Reason::NoDatabase));
        assert!(matches!(p.get(7, None, 1), Some(Err(Reason::NoDatabase))));
        assert!(p.get(7, Some(""), 1).is_none());
    }

    #[test]
    fn bounded() {
        let p = ReadPlans::new(4);
        for i in 0..100 {
            p.insert(i, None, 0, Err(Reason::Rule));
        }
        assert!(p.len() <= 8, "{}", p.len());
    }
}
