//! Slice plans remembered per statement: what a miss's slice planning
//! (`Session::plan_slices`) decided for one statement text, with its parameter values, under
//! one default database and catalog generation, and the L2 lookup keys made from it.
//!
//! Planning runs on every L1 miss and costs several lexer passes (the shape key, the
//! literals, the columns read), catalog lookups by owned names and a dozen allocations: a
//! quarter of an L2 hit. Its answer depends only on the statement's bytes (which hold its
//! literals), an execute's parameter values, the default database (names are qualified by
//! it), the catalog (trusted while its generation is unchanged, as `cache::plans`), the
//! tables the read resolved to and `invalidation.derived_slices`; anything else (temporary
//! tables, table granularity) is planned without the memo. Entries are matched on all of
//! them exactly, not by hash alone.
//!
//! What a remembered plan must not skip is registration: `cache::versions` needs every
//! slice column registered before the stamps are read, on every read. The registry never
//! drops a column once registered, so a plan's columns are registered already; the caller
//! registers them again anyway ([`SlicePlans::get`] gives the plan, the session re-registers
//! and checks it gets the same column back), which costs a read lock per sliced table.

use std::sync::{Arc, OnceLock};

use quick_cache::sync::Cache;
use xxhash_rust::xxh3::Xxh3;

use crate::analysis::slices::Lit;
use crate::cache::versions::{ColumnReads, SlicePlan, TableHandle, Versions, ANY_COLUMN};
use crate::l2::L2Read;

/// A read's slice plan: the tables it depends on whole, those it reads by slices, which
/// columns it reads, and the catalog generation the column types were read under.
#[derive(Debug)]
pub struct PlannedSlices {
    pub whole: Arc<[TableHandle]>,
    pub sliced: Vec<SlicePlan>,
    pub cols: ColumnReads,
    pub generation: u64,
    /// What this plan depends on in L2, with its keys: made by the first L2 lookup under it
    /// whose catalog generation is still the plan's (`session::l2`).
    pub l2: OnceLock<Arc<L2Read>>,
}

impl PlannedSlices {
    pub fn new(
        whole: Arc<[TableHandle]>,
        sliced: Vec<SlicePlan>,
        cols: ColumnReads,
        generation: u64,
    ) -> PlannedSlices {
        PlannedSlices {
            whole,
            sliced,
            cols,
            generation,
            l2: OnceLock::new(),
        }
    }
}

/// What a plan was made from, compared in full on lookup.
#[derive(Debug, PartialEq, Eq)]
pub struct PlanInput<'a> {
    pub sql: &'a [u8],
    pub db: Option<&'a str>,
    /// An execute's parameter values; None for a text statement.
    pub params: Option<&'a [Option<Lit>]>,
    pub derived_slices: bool,
}

impl PlanInput<'_> {
    fn hash(&self) -> u128 {
        let mut h = Xxh3::new();
        match self.db {
            None => h.update(&[0]),
            Some(d) => {
                h.update(&[1]);
                h.update(&(d.len() as u64).to_le_bytes());
                h.update(d.as_bytes());
            }
        }
        h.update(&[u8::from(self.derived_slices)]);
        h.update(&(self.sql.len() as u64).to_le_bytes());
        h.update(self.sql);
        if let Some(ps) = self.params {
            h.update(&(ps.len() as u64).to_le_bytes());
            for p in ps {
                let (tag, s): (u8, &str) = match p {
                    None => (0, ""),
                    Some(Lit::Null) => (1, ""),
                    Some(Lit::Int(s)) => (2, s),
                    Some(Lit::Str(s)) => (3, s),
                    Some(Lit::Param(_)) => (4, ""),
                    // A temporal parameter is not the string it is spelled as (a string
                    // pins a VARCHAR column; a DATETIME value does not).
                    Some(Lit::Time(s)) => (5, s),
                };
                h.update(&[tag]);
                h.update(&(s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
                if let Some(Lit::Param(i)) = p {
                    h.update(&(*i as u64).to_le_bytes());
                }
            }
        }
        h.digest128()
    }
}

struct Remembered {
    sql: Box<[u8]>,
    db: Option<Box<str>>,
    params: Option<Box<[Option<Lit>]>>,
    derived_slices: bool,
    /// The tables the read resolved to (compared by identity).
    tables: Arc<[TableHandle]>,
    planned: Arc<PlannedSlices>,
}

impl Remembered {
    fn matches(&self, input: &PlanInput<'_>, tables: &[TableHandle]) -> bool {
        *self.sql == *input.sql
            && self.db.as_deref() == input.db
            && self.params.as_deref() == input.params
            && self.derived_slices == input.derived_slices
            && self.tables.len() == tables.len()
            && self
                .tables
                .iter()
                .zip(tables)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// The bounded memo (quick_cache) of slice plans, shared by every session.
pub struct SlicePlans {
    memo: Cache<u128, Arc<Remembered>>,
}

impl SlicePlans {
    /// `capacity`: statements remembered (at least one).
    pub fn new(capacity: usize) -> SlicePlans {
        SlicePlans {
            memo: Cache::new(capacity.max(1)),
        }
    }

    /// The plan remembered for `input` and `tables` under the catalog generation
    /// `generation`, if any. The caller must register its slice columns again before it
    /// reads stamps (module docs).
    pub fn get(
        &self,
        input: &PlanInput<'_>,
        tables: &[TableHandle],
        generation: u64,
    ) -> Option<Arc<PlannedSlices>> {
        let r = self.memo.get(&input.hash())?;
        (r.planned.generation == generation && r.matches(input, tables)).then(|| r.planned.clone())
    }

    /// Remembers `planned` (made from `input` and `tables`). The caller inserts only plans
    /// whose catalog generation was still current when planning ended, so a reload racing
    /// the planning leaves nothing a lookup trusts.
    pub fn insert(
        &self,
        input: &PlanInput<'_>,
        tables: &Arc<[TableHandle]>,
        planned: Arc<PlannedSlices>,
    ) {
        self.memo.insert(
            input.hash(),
            Arc::new(Remembered {
                sql: input.sql.into(),
                db: input.db.map(Box::from),
                params: input.params.map(Box::from),
                derived_slices: input.derived_slices,
                tables: tables.clone(),
                planned,
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

/// The plan of a table read by slices: column `col` pinned to `keys`, with the slice-column
/// counters of the columns `read` (None: unknown, the slices' "any column" counters).
pub fn slice_plan(
    versions: &Versions,
    t: &TableHandle,
    col: &str,
    keys: &[String],
    read: Option<&[String]>,
) -> SlicePlan {
    let column = versions.register(t, col);
    let slices: Vec<u32> = keys
        .iter()
        .map(|k| Versions::slice_index(t, col, k))
        .collect();
    // Columns unknown: the slices' "any column" counters.
    let any = [ANY_COLUMN.to_string()];
    let slice_columns = read
        .unwrap_or(&any)
        .iter()
        .flat_map(|r| {
            slices
                .iter()
                .map(move |&i| Versions::slice_column_index(t, col, i, r))
        })
        .collect();
    SlicePlan {
        table: t.clone(),
        column,
        slices,
        by_columns: read.is_some(),
        slice_columns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(sql: &'a [u8], db: Option<&'a str>) -> PlanInput<'a> {
        PlanInput {
            sql,
            db,
            params: None,
            derived_slices: true,
        }
    }

    #[test]
    fn remembered_per_statement_database_generation_and_tables() {
        let v = Versions::new();
        let p = SlicePlans::new(16);
        let t: Arc<[TableHandle]> = Arc::from(vec![v.table("a", "t")]);
        let plan = Arc::new(PlannedSlices::new(
            t.clone(),
            Vec::new(),
            ColumnReads::default(),
            3,
        ));
        let sql = b"SELECT c FROM t WHERE id=1";
        p.insert(&input(sql, Some("a")), &t, plan.clone());
        let got = p.get(&input(sql, Some("a")), &t, 3).unwrap();
        assert!(Arc::ptr_eq(&got, &plan));
        // Another literal, database, generation, set of tables, parameters, setting.
        assert!(p
            .get(&input(b"SELECT c FROM t WHERE id=2", Some("a")), &t, 3)
            .is_none());
        assert!(p.get(&input(sql, Some("b")), &t, 3).is_none());
        assert!(p.get(&input(sql, None), &t, 3).is_none());
        assert!(p.get(&input(sql, Some("a")), &t, 4).is_none());
        let other: Arc<[TableHandle]> = Arc::from(vec![v.table("a", "u")]);
        assert!(p.get(&input(sql, Some("a")), &other, 3).is_none());
        let params = [Some(Lit::Int("1".into()))];
        let with = PlanInput {
            params: Some(&params),
            ..input(sql, Some("a"))
        };
        assert!(p.get(&with, &t, 3).is_none());
        let off = PlanInput {
            derived_slices: false,
            ..input(sql, Some("a"))
        };
        assert!(p.get(&off, &t, 3).is_none());
        // Parameter values are part of the key.
        p.insert(&with, &t, plan.clone());
        assert!(p.get(&with, &t, 3).is_some());
        let params2 = [Some(Lit::Int("2".into()))];
        let with2 = PlanInput {
            params: Some(&params2),
            ..input(sql, Some("a"))
        };
        assert!(p.get(&with2, &t, 3).is_none());
    }

    #[test]
    fn bounded() {
        let v = Versions::new();
        let p = SlicePlans::new(4);
        let t: Arc<[TableHandle]> = Arc::from(vec![v.table("a", "t")]);
        for i in 0..100 {
            let sql = format!("SELECT {i}");
            let plan = Arc::new(PlannedSlices::new(
                t.clone(),
                Vec::new(),
                ColumnReads::default(),
                0,
            ));
            p.insert(&input(sql.as_bytes(), None), &t, plan);
        }
        assert!(p.len() <= 8, "{}", p.len());
    }

    /// A sliced read's plan: one slice per key, in order; with the columns read known, one
    /// per-slice counter per (column, slice); unknown, the slices' "any column" counters.
    #[test]
    fn slice_plans_pin_keys_and_columns() {
        let v = Versions::new();
        let t = v.table("a", "t");
        let keys = ["1".to_string(), "2".to_string()];
        let read = ["c".to_string(), "d".to_string(), "e".to_string()];
        /// (keys, columns read or None, counters, by columns).
        type Case<'a> = (&'a [String], Option<&'a [String]>, usize, bool);
        let cases: &[Case] = &[
            (&keys, Some(&read), 6, true),
            (&keys, None, 2, false),
            (&keys[..1], Some(&read[..1]), 1, true),
            (&[], Some(&read), 0, true),
        ];
        for (keys, read, counters, by_columns) in cases {
            let p = slice_plan(&v, &t, "id", keys, *read);
            assert_eq!(p.slices.len(), keys.len());
            assert_eq!(p.slice_columns.len(), *counters, "{keys:?} {read:?}");
            assert_eq!(p.by_columns, *by_columns);
            for (k, i) in keys.iter().zip(&p.slices) {
                assert_eq!(*i, Versions::slice_index(&t, "id", k));
            }
            let any = [ANY_COLUMN.to_string()];
            let expect: Vec<u32> = read
                .unwrap_or(&any)
                .iter()
                .flat_map(|r| {
                    p.slices
                        .iter()
                        .map(|&i| Versions::slice_column_index(&t, "id", i, r))
                })
                .collect();
            assert_eq!(p.slice_columns, expect);
        }
    }

    /// The plan registers its column, and registering again finds the same one: a
    /// remembered plan is checked against exactly that.
    #[test]
    fn slice_plans_register_their_column() {
        let v = Versions::new();
        let t = v.table("a", "t");
        let p = slice_plan(&v, &t, "id", &["1".to_string()], None);
        assert!(Arc::ptr_eq(&p.column, &v.register(&t, "id")));
        let q = slice_plan(&v, &t, "other", &["1".to_string()], None);
        assert!(!Arc::ptr_eq(&p.column, &q.column));
        assert_ne!(p.slices, q.slices, "another column's slice of the same key");
    }
}
