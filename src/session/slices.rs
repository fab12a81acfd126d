//! Row slices on the session's paths (`invalidation.granularity = "row"`): which slices a
//! read's entry stamps, and which rows a write names, from the statement, the catalog and an
//! execute's parameters (`analysis::slices` decides; this file only gathers its inputs).

use std::sync::Arc;

use super::Session;
use crate::analysis::params;
use crate::analysis::slices::Lit;
use crate::analysis::{TableRef, WriteInfo, WriteTargets};
use crate::cache::sliceplans;
use crate::cache::versions::{ColumnReads, SlicePlan};
use crate::cache::TableHandle;
use crate::config::Granularity;
use crate::protocol::commands;
use crate::protocol::packets::com;

impl Session {
    fn slices_on(&self) -> bool {
        self.shared.config().invalidation.granularity == Granularity::Row
    }

    /// The execute's parameter values when `payload` is a COM_STMT_EXECUTE of a known
    /// statement; None for a text query (no parameters) or when they cannot be read.
    pub(super) fn execute_literals(&self, payload: &[u8]) -> Option<Vec<Option<Lit>>> {
        if payload.first() != Some(&com::STMT_EXECUTE) {
            return None;
        }
        if self.st.execute_long_data {
            return None;
        }
        let id = commands::stmt_id(payload)?;
        let stmt = self.st.stmts.get(&id)?;
        let p = commands::execute_params(payload, stmt.params, stmt.types.as_deref())?;
        Some(params::param_literals(&p, stmt.params as usize))
    }

    /// Splits a read's tables into those it reads whole and those it reads by slices, and
    /// registers each slice column (before the caller reads the stamps); says which tables'
    /// columns read are known, and which (`ColumnReads`). Returns the catalog generation the
    /// column types were read under. `sql` is the statement's text (the prepared SQL for an
    /// execute), `payload` what goes upstream.
    pub(super) fn plan_slices(
        &self,
        tables: &Arc<[TableHandle]>,
        sql: &[u8],
        payload: &[u8],
    ) -> (Arc<[TableHandle]>, Vec<SlicePlan>, ColumnReads, u64) {
        // Column types come from this catalog generation; the caller checks, after reading
        // the stamps, that no reload (a DDL that may have changed them) came in between.
        let generation = self.shared.catalog.generation();
        let whole = || {
            (
                tables.clone(),
                Vec::new(),
                ColumnReads::default(),
                generation,
            )
        };
        // With an L2, slice versions travel there too (`l2`, docs/fleet.md).
        if !self.slices_on() || !self.st.temp_tables.is_empty() {
            return whole();
        }
        let catalog = &self.shared.catalog;
        // A view among them reads its tables in ways the statement does not show.
        if tables.iter().any(|t| {
            catalog
                .columns_by_ordinal(&(t.schema.clone(), t.name.clone()))
                .is_none()
        }) {
            return whole();
        }
        let Ok(text) = std::str::from_utf8(sql) else {
            return whole();
        };
        // The shape comes from the memo: no parse here once the digest has been seen.
        let Some(shape) = self
            .shared
            .analyzer
            .slice_shape(text)
            .filter(|s| s.is_read())
        else {
            return whole();
        };
        let lits = self.execute_literals(payload);
        if payload.first() == Some(&com::STMT_EXECUTE) && lits.is_none() {
            return whole();
        }
        let params = |i: usize| lits.as_ref()?.get(i).cloned().flatten();
        let columns = |t: &TableRef, c: &str| {
            let q = self.st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.column(&q, c)
        };
        let pins = shape.read_slices(text, &columns, &params);
        // The columns read of each table: the names the statement spells that are its
        // columns (every table here has its column list: views were ruled out above).
        let words = shape.read_columns(text);
        let read_of = |t: &TableHandle| -> Option<Vec<String>> {
            let words = words?;
            let all = catalog.columns_by_ordinal(&(t.schema.clone(), t.name.clone()))?;
            // MySQL folds accents in column names: only ASCII names compare as spelled.
            if all.iter().any(|(n, _)| !n.is_ascii()) {
                return None;
            }
            Some(
                all.iter()
                    .filter(|(n, _)| words.binary_search(n).is_ok())
                    .map(|(n, _)| n.clone())
                    .collect(),
            )
        };
        if pins.is_empty() && words.is_none() {
            return whole();
        }
        let (mut rest, mut sliced, mut cols) = sliceplans::split_by_slices(
            self.shared.cache.versions(),
            tables,
            |t| {
                let (_, (col, keys)) = pins.iter().find(|(r, _)| {
                    self.st.qualify(r.schema.as_deref(), &r.name)
                        == Some((t.schema.clone(), t.name.clone()))
                })?;
                Some((col.as_str(), keys.as_slice()))
            },
            read_of,
        );
        let before = sliced.len();
        self.plan_derived(&shape, text, &columns, &params, &mut rest, &mut sliced);
        // A table that became a derived slice is stamped by its slices, not as read whole.
        for p in &sliced[before..] {
            cols.tables.retain(|t| !Arc::ptr_eq(t, &p.table));
        }
        cols.indexes.sort_unstable();
        cols.indexes.dedup();
        (rest.into(), sliced, cols, generation)
    }

    /// After `plan_write`: when the statement names the rows it changes in its one target
    /// table, that table's bump becomes a bump of those rows' slices. Not for what the
    /// write reaches through triggers or cascades (still whole tables).
    pub(super) fn plan_write_rows(&mut self, w: &WriteInfo, text: &[u8], payload: &[u8]) {
        if !self.slices_on() || w.ddl {
            return;
        }
        let WriteTargets::Tables(list) = &w.targets else {
            return;
        };
        let [target] = list.as_slice() else { return };
        let Some(q) = self.st.qualify(target.schema.as_deref(), &target.name) else {
            return;
        };
        let catalog = self.shared.catalog.clone();
        if q.0 == "mysql" || !catalog.rows_knowable(&q) {
            return;
        }
        let Some(pos) = self
            .st
            .pending
            .tables
            .iter()
            .position(|t| t.schema == q.0 && t.name == q.1)
        else {
            return;
        };
        let Ok(text) = std::str::from_utf8(text) else {
            return;
        };
        let Some(shape) = self
            .shared
            .analyzer
            .slice_shape(text)
            .filter(|s| s.is_write())
        else {
            return;
        };
        let lits = self.execute_literals(payload);
        if payload.first() == Some(&com::STMT_EXECUTE) && lits.is_none() {
            return;
        }
        let params = |i: usize| lits.as_ref()?.get(i).cloned().flatten();
        let columns = |t: &TableRef, c: &str| {
            let q = self.st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.column(&q, c)
        };
        let order = |t: &TableRef| {
            let q = self.st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.column_order(&q)
        };
        // An UPDATE that assigns a known list of columns of a table where nothing else
        // changes implicitly changes only those: entries reading none of them stay, unless
        // it may move rows in an unordered read (an index or partitioning column).
        let mut column_set = None;
        if let Some((table, set)) = shape.update_columns(text) {
            let same = self.st.qualify(table.schema.as_deref(), &table.name) == Some(q.clone());
            if same
                && catalog.update_changes_only_set(&q)
                && catalog.update_keeps_order(&q, &set, &self.shared.cache.versions().faults)
            {
                column_set = Some(set);
            }
        }
        let rw = shape
            .write_rows(text, &columns, &order, &params)
            .filter(|rw| {
                self.st.qualify(rw.table.schema.as_deref(), &rw.table.name) == Some(q.clone())
            });
        self.plan_fk_write(&shape, &q, rw.as_ref().map(|r| r.known.as_slice()));
        if let Some(set) = column_set {
            let t = self.st.pending.tables[pos].clone();
            self.st.pending.columns.push((t, Arc::from(set)));
        }
        let Some(rw) = rw else {
            return;
        };
        let t = self.st.pending.tables.remove(pos);
        self.st.pending.rows.push((t, Arc::from(rw.known)));
    }
}
