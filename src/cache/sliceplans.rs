//! Slice plans remembered per statement: what a miss's slice planning
//! (`engine::Planner::plan_slices`) decided for one statement text, with its parameter
//! values, under one default database and catalog generation, and the L2 lookup keys made
//! from it.
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

/// Beyond this many (slice, column read) pairs, a sliced table's entry depends on all its
/// columns: each pair is one more counter a hit checks.
pub const MAX_SLICE_COLUMNS: usize = 64;

/// Splits a read's tables into those it reads by slices (`pin_of`: the column pinned and
/// its slice keys) and those it reads whole, registering each slice column (before the
/// caller reads the stamps); with the columns read of each table known (`read_of`), the
/// counters of those columns instead of the whole table's. Returns (tables read whole,
/// slice plans, columns read).
pub fn split_by_slices<'a>(
    versions: &Versions,
    tables: &[TableHandle],
    pin_of: impl Fn(&TableHandle) -> Option<(&'a str, &'a [String])>,
    read_of: impl Fn(&TableHandle) -> Option<Vec<String>>,
) -> (Vec<TableHandle>, Vec<SlicePlan>, ColumnReads) {
    let mut cols = ColumnReads::default();
    let mut sliced = Vec::new();
    let mut rest: Vec<TableHandle> = Vec::new();
    for t in tables {
        let pin = pin_of(t);
        let mut read = read_of(t);
        if let Some((_, keys)) = pin {
            // Bounded: per slice and column read one more counter to check at each hit.
            if read
                .as_ref()
                .is_some_and(|r| r.len() * keys.len() > MAX_SLICE_COLUMNS)
            {
                read = None;
            }
        }
        let by_columns = read.is_some();
        if let Some(read) = &read {
            // Per slice column for a sliced table (`Versions::column_slice_index`).
            let col = pin.map(|(c, _)| c);
            cols.indexes.extend(read.iter().map(|r| match col {
                Some(c) => Versions::column_slice_index(t, c, r),
                None => Versions::column_index(t, r),
            }));
        }
        match pin {
            Some((col, keys)) => sliced.push(slice_plan(versions, t, col, keys, read.as_deref())),
            None => {
                if by_columns {
                    cols.tables.push(t.clone());
                }
                rest.push(t.clone())
            }
        }
    }
    (rest, sliced, cols)
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

    /// A pinned table becomes a slice plan, the others are read whole; the columns read
    /// count per slice column for the pinned table and per column for the others, and a
    /// table whose columns are unknown depends on all of them.
    #[test]
    fn reads_split_into_slices_and_whole_tables() {
        let v = Versions::new();
        let (a, b, c) = (v.table("s", "a"), v.table("s", "b"), v.table("s", "c"));
        let keys = vec!["1".to_string(), "2".to_string()];
        let cols = |n: &[&str]| n.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let (rest, sliced, reads) = split_by_slices(
            &v,
            &[a.clone(), b.clone(), c.clone()],
            |t| (t.name == "a").then_some(("id", keys.as_slice())),
            |t| (t.name != "c").then(|| cols(&["x", "y"])),
        );
        let names = |ts: &[TableHandle]| ts.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&rest), ["b", "c"]);
        assert_eq!(sliced.len(), 1);
        assert!(Arc::ptr_eq(&sliced[0].table, &a));
        assert!(sliced[0].by_columns);
        assert_eq!(sliced[0].slice_columns.len(), 4, "two slices × two columns");
        assert_eq!(names(&reads.tables), ["b"]);
        let want = [
            Versions::column_slice_index(&a, "id", "x"),
            Versions::column_slice_index(&a, "id", "y"),
            Versions::column_index(&b, "x"),
            Versions::column_index(&b, "y"),
        ];
        assert_eq!(reads.indexes, want);
    }

    /// Past [`MAX_SLICE_COLUMNS`] (slices × columns read) a pinned table's columns are
    /// dropped: its slices' "any column" counters instead.
    #[test]
    fn too_many_slice_columns_fall_back_to_any_column() {
        let v = Versions::new();
        let t = v.table("s", "t");
        let read: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
        for (slices, by_columns) in [(8usize, true), (9, false)] {
            let keys: Vec<String> = (0..slices).map(|k| k.to_string()).collect();
            let (_, sliced, reads) = split_by_slices(
                &v,
                std::slice::from_ref(&t),
                |_| Some(("id", keys.as_slice())),
                |_| Some(read.clone()),
            );
            assert_eq!(sliced[0].by_columns, by_columns, "{slices} slices");
            let counters = if by_columns { slices * 8 } else { slices };
            assert_eq!(sliced[0].slice_columns.len(), counters, "{slices} slices");
            assert_eq!(reads.indexes.is_empty(), !by_columns, "{slices} slices");
        }
    }
}
