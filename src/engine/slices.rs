//! Row slices (`invalidation.granularity = "row"`): which slices a read's entry stamps, and
//! which rows a write names, from the statement, the catalog and an execute's parameters
//! (`analysis::slices` decides; this file gathers its inputs from what it is given).

use std::sync::Arc;

use super::state::SessionState;
use crate::analysis::params;
use crate::analysis::slices::{
    pins_one_value, ColType, ColumnInfo, InsertValues, Lit, OrderShape, ReadPins,
};
use crate::analysis::{Analyzer, TableRef, WriteInfo, WriteTargets};
use crate::cache::sliceplans::{self, SlicePlans};
use crate::cache::versions::{ColumnReads, SlicePlan, Versions};
use crate::cache::TableHandle;
use crate::config::{Config, Granularity};
use crate::invalidation::catalog::Catalog;
use crate::policy::order::{
    group_key_looks_alike, result_keeps_order, slices_keep_order, sum_is_exact, OrderFacts,
    ResultFacts, ResultTable,
};
use crate::protocol::commands;
use crate::protocol::packets::com;
use crate::shared::Shared;

/// What slice planning reads of the shared state: the catalog (column types and lists),
/// the statement analyses, the versions (where slice columns register), the memo of plans
/// and the configuration. The session's own part (its database, temporary tables, prepared
/// statements, writes waiting for their OK) is passed to each call as its [`SessionState`].
pub struct Planner<'a> {
    pub catalog: &'a Catalog,
    pub analyzer: &'a Analyzer,
    pub versions: &'a Versions,
    pub memo: &'a SlicePlans,
    /// The statement shapes no patch recipe takes (`Patchable::shape_refused`).
    pub patches: &'a crate::cache::patches::Patchable,
    pub cfg: Arc<Config>,
}

impl<'a> Planner<'a> {
    /// The planner over `shared`, under its configuration now.
    pub fn new(shared: &'a Shared) -> Planner<'a> {
        Planner {
            catalog: &shared.catalog,
            analyzer: &shared.analyzer,
            versions: shared.cache.versions(),
            memo: &shared.slice_plans,
            patches: shared.cache.patches(),
            cfg: shared.config(),
        }
    }

    fn slices_on(&self) -> bool {
        self.cfg.invalidation.granularity == Granularity::Row
    }

    /// Splits a read's tables into those it reads whole and those it reads by slices, and
    /// registers each slice column (before the caller reads the stamps); says which tables'
    /// columns read are known, and which (`ColumnReads`). Returns the catalog generation the
    /// column types were read under. `sql` is the statement's text (the prepared SQL for an
    /// execute), `payload` what goes upstream.
    pub fn plan_slices(
        &self,
        st: &SessionState,
        tables: &Arc<[TableHandle]>,
        sql: &[u8],
        payload: &[u8],
    ) -> (Arc<[TableHandle]>, Vec<SlicePlan>, ColumnReads, u64) {
        // Column types come from this catalog generation; the caller checks, after reading
        // the stamps, that no reload (a DDL that may have changed them) came in between.
        let generation = self.catalog.generation();
        let whole = || {
            (
                tables.clone(),
                Vec::new(),
                ColumnReads::default(),
                generation,
            )
        };
        // With an L2, slice versions travel there too (`l2`, docs/fleet.md).
        if !self.slices_on() || !st.temp_tables.is_empty() || slices_refused(st) {
            return whole();
        }
        let catalog = self.catalog;
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
        let Some(shape) = self.analyzer.slice_shape(text).filter(|s| s.is_read()) else {
            return whole();
        };
        let lits = execute_literals(st, payload);
        if payload.first() == Some(&com::STMT_EXECUTE) && lits.is_none() {
            return whole();
        }
        let params = |i: usize| lits.as_ref()?.get(i).cloned().flatten();
        let columns = |t: &TableRef, c: &str| {
            let q = st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.column(&q, c)
        };
        let pins = shape.read_slices(text, &columns, &params);
        // Row order is data: a write to another slice may change the plan, and so the
        // result of a read that shows the order its plan walks rows in.
        let keeps_order = shape.read_order().is_some_and(|o| {
            slices_keep_order(&self.order_facts(st, o, &pins, &columns))
                || result_keeps_order(&self.result_facts(st, o, &pins, &columns))
        });
        let pins = if keeps_order { pins } else { ReadPins::new() };
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
            self.versions,
            tables,
            |t| {
                let (_, (col, keys)) = pins.iter().find(|(r, _)| {
                    st.qualify(r.schema.as_deref(), &r.name)
                        == Some((t.schema.clone(), t.name.clone()))
                })?;
                Some((col.as_str(), keys.as_slice()))
            },
            read_of,
        );
        let before = sliced.len();
        if keeps_order {
            let out = (&mut rest, &mut sliced);
            self.plan_derived(st, (&shape, text), &columns, &params, out);
        }
        // A table that became a derived slice is stamped by its slices, not as read whole.
        for p in &sliced[before..] {
            cols.tables.retain(|t| !Arc::ptr_eq(t, &p.table));
        }
        cols.indexes.sort_unstable();
        cols.indexes.dedup();
        (rest.into(), sliced, cols, generation)
    }

    /// The primary key column of table `t` as the session names it, if the catalog knows it.
    fn primary_key(&self, st: &SessionState, t: &TableRef) -> Option<String> {
        let q = st.qualify(t.schema.as_deref(), &t.name)?;
        self.catalog.primary_key(&q)
    }

    /// Whether `pins` hold table `t` to one value of its primary key `key`: at most one row.
    /// A calendar bucket of a temporal key is no value ([`pins_one_value`]).
    fn pinned_to_key(t: &TableRef, key: &str, pins: &ReadPins) -> bool {
        pins.get(t)
            .is_some_and(|(c, keys)| c == key && pins_one_value(keys))
    }

    /// What decides whether read `o` shows the order its plan walks rows in
    /// (`policy::order::slices_keep_order`), from its slices `pins` and the catalog's
    /// primary keys and column types.
    fn order_facts(
        &self,
        st: &SessionState,
        o: &OrderShape,
        pins: &ReadPins,
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    ) -> OrderFacts {
        let single = match o.tables.as_slice() {
            [t] if !o.nested => Some(t),
            _ => None,
        };
        let pk = |t: &TableRef| self.primary_key(st, t);
        let key = single.and_then(|t| Some((t, pk(t)?)));
        let alike = |(t, c): &(TableRef, String)| {
            columns(t, c).is_some_and(|i| group_key_looks_alike(&i.ty))
        };
        // `MIN`/`MAX` of a column whose equal values may look different show whichever the
        // plan met first.
        let min_max_alike = o.min_max.as_ref().is_some_and(|m| m.iter().all(alike));
        // `SUM`/`AVG` of floating-point values show the order the plan added them in.
        let exact =
            |(t, c): &(TableRef, String)| columns(t, c).is_some_and(|i| sum_is_exact(&i.ty));
        let order_free = min_max_alike && o.sums.as_ref().is_some_and(|m| m.iter().all(exact));
        OrderFacts {
            shown: o.shown,
            aggregate_row: o.aggregates_only && !o.limited && order_free,
            grouped: order_free && o.grouped_by.as_ref().is_some_and(|g| g.iter().all(alike)),
            groups_sorted: st.mariadb,
            single_table: single.is_some(),
            // Only where every row shown is a row of the table: with an aggregate or a
            // GROUP BY a column shows some row of its group; DISTINCT keeps some row of each.
            ordered_by_key: !o.aggregated
                && !o.unmodelled
                && key
                    .as_ref()
                    .is_some_and(|(t, k)| o.ordered_by.iter().any(|(r, c)| r == *t && c == k)),
            pinned_to_key: !o.tables.is_empty()
                && o.tables
                    .iter()
                    .all(|t| pk(t).is_some_and(|k| Self::pinned_to_key(t, &k, pins))),
        }
    }

    /// What decides whether read `o`'s result is the same under every plan
    /// (`policy::order::result_keeps_order`), from its slices `pins` and the catalog's primary
    /// keys and column types: an equality joins exactly when both its columns are integers.
    fn result_facts(
        &self,
        st: &SessionState,
        o: &OrderShape,
        pins: &ReadPins,
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    ) -> ResultFacts {
        let pk = |t: &TableRef| self.primary_key(st, t);
        let int = |i: usize, c: &str| {
            o.tables
                .get(i)
                .and_then(|t| columns(t, c))
                .is_some_and(|i| matches!(i.ty, ColType::Int { .. }))
        };
        ResultFacts {
            shown: o.shown,
            nested: o.nested,
            unmodelled: o.unmodelled,
            tables: o
                .tables
                .iter()
                .map(|t| {
                    let key = pk(t);
                    let pinned = key
                        .as_ref()
                        .is_some_and(|k| Self::pinned_to_key(t, k, pins));
                    ResultTable {
                        key: key.map(|k| vec![k]),
                        pinned,
                    }
                })
                .collect(),
            equalities: o
                .equalities
                .iter()
                .filter(|(d, dc, s, sc)| int(*d, dc) && int(*s, sc))
                .cloned()
                .collect(),
            group_by: o.group_cols.clone(),
            select: o.select.clone(),
            order_by: o.order_terms.clone(),
        }
    }

    /// After `plan_write`: when the statement names the rows it changes in its one target
    /// table, that table's bump becomes a bump of those rows' slices. Not for what the
    /// write reaches through triggers or cascades (still whole tables). Returns an INSERT's
    /// values as this reading found them (`analysis::slices::InsertValues`), for the
    /// patches it may make (`plan_patch`), which then do not read the statement again.
    pub fn plan_write_rows(
        &self,
        st: &mut SessionState,
        w: &WriteInfo,
        text: &[u8],
        payload: &[u8],
    ) -> Option<Arc<InsertValues>> {
        if !self.slices_on() || w.ddl {
            return None;
        }
        let WriteTargets::Tables(list) = &w.targets else {
            return None;
        };
        let [target] = list.as_slice() else {
            return None;
        };
        let q = st.qualify(target.schema.as_deref(), &target.name)?;
        let catalog = self.catalog;
        if q.0 == "mysql" || !catalog.rows_knowable(&q) {
            return None;
        }
        let pos = st
            .pending
            .tables
            .iter()
            .position(|t| t.schema == q.0 && t.name == q.1)?;
        let text = std::str::from_utf8(text).ok()?;
        let shape = self.analyzer.slice_shape(text).filter(|s| s.is_write())?;
        let lits = execute_literals(st, payload);
        if payload.first() == Some(&com::STMT_EXECUTE) && lits.is_none() {
            return None;
        }
        let params = |i: usize| lits.as_ref()?.get(i).cloned().flatten();
        let columns = |t: &TableRef, c: &str| {
            let q = st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.column(&q, c)
        };
        let order = |t: &TableRef| {
            let q = st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.column_order(&q)
        };
        // An UPDATE that assigns a known list of columns of a table where nothing else
        // changes implicitly changes only those: entries reading none of them stay, unless
        // it may move rows in an unordered read (an index or partitioning column).
        let mut column_set = None;
        if let Some((table, set)) = shape.update_columns(text) {
            let same = st.qualify(table.schema.as_deref(), &table.name) == Some(q.clone());
            if same
                && catalog.update_changes_only_set(&q)
                && catalog.update_keeps_order(&q, &set, &self.versions.faults)
            {
                column_set = Some(set);
            }
        }
        let rw = shape
            .write_rows(text, &columns, &order, &params)
            .filter(|rw| st.qualify(rw.table.schema.as_deref(), &rw.table.name) == Some(q.clone()));
        self.plan_fk_write(st, &shape, &q, rw.as_ref().map(|r| r.known.as_slice()));
        if let Some(set) = column_set {
            let t = st.pending.tables[pos].clone();
            st.pending.columns.push((t, Arc::from(set)));
        }
        let rw = rw?;
        let t = st.pending.tables.remove(pos);
        st.pending.rows.push((t, Arc::from(rw.known)));
        rw.inserted
    }
}

/// Whether a session's reads depend on their tables whole whatever they pin: the server may
/// refuse its reads once their tables grow (a read limit, `policy::context::READ_LIMITS`:
/// `max_join_size` refuses a read whose plan's estimate passes it, ERROR 1104), and that
/// estimate weighs the rows of every slice, so a write to another slice may turn a read
/// answered before into an error. Not memoised either (`planned_slices`): the memo's plans
/// are those of sessions without limits.
pub fn slices_refused(st: &SessionState) -> bool {
    st.reads_may_be_refused()
}

/// The execute's parameter values when `payload` is a COM_STMT_EXECUTE of a known
/// statement; None for a text query (no parameters) or when they cannot be read.
pub fn execute_literals(st: &SessionState, payload: &[u8]) -> Option<Vec<Option<Lit>>> {
    if payload.first() != Some(&com::STMT_EXECUTE) {
        return None;
    }
    if st.execute_long_data {
        return None;
    }
    let id = commands::stmt_id(payload)?;
    let stmt = st.stmts.get(&id)?;
    let p = commands::execute_params(payload, stmt.params, stmt.types.as_deref())?;
    Some(params::param_literals(&p, stmt.params as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::StatementKind;
    use crate::engine::state::Prepared;
    use crate::engine::World;

    fn names(ts: &[TableHandle]) -> Vec<String> {
        ts.iter()
            .map(|t| format!("{}.{}", t.schema, t.name))
            .collect()
    }

    /// Which tables a read stamps whole and which by slices, per granularity, database and
    /// what the session holds.
    #[test]
    fn reads_plan_whole_tables_or_slices() {
        struct Row {
            why: &'static str,
            row: bool,
            db: Option<&'static str>,
            temp: bool,
            limited: bool,
            sql: &'static str,
            whole: &'static [&'static str],
            sliced: &'static [&'static str],
        }
        let rows = [
            Row {
                why: "a pinned primary key, row granularity: its slice",
                row: true,
                db: Some("db"),
                temp: false,
                limited: false,
                sql: "SELECT * FROM child WHERE id = 1",
                whole: &[],
                sliced: &["db.child"],
            },
            Row {
                why: "qualified, with no default database: the same",
                row: true,
                db: None,
                temp: false,
                limited: false,
                sql: "SELECT * FROM db.child WHERE id = 1",
                whole: &[],
                sliced: &["db.child"],
            },
            Row {
                why: "table granularity: whole",
                row: false,
                db: Some("db"),
                temp: false,
                limited: false,
                sql: "SELECT * FROM child WHERE id = 1",
                whole: &["db.child"],
                sliced: &[],
            },
            Row {
                why: "a temporary table may shadow any name: whole",
                row: true,
                db: Some("db"),
                temp: true,
                limited: false,
                sql: "SELECT * FROM child WHERE id = 1",
                whole: &["db.child"],
                sliced: &[],
            },
            Row {
                why: "reads the server may refuse once a table grows (max_join_size): whole",
                row: true,
                db: Some("db"),
                temp: false,
                limited: true,
                sql: "SELECT * FROM child WHERE id = 1",
                whole: &["db.child"],
                sliced: &[],
            },
            Row {
                why: "no pin: whole",
                row: true,
                db: Some("db"),
                temp: false,
                limited: false,
                sql: "SELECT * FROM child WHERE a > 1",
                whole: &["db.child"],
                sliced: &[],
            },
            Row {
                why: "a view reads in ways the statement does not show: whole",
                row: true,
                db: Some("db"),
                temp: false,
                limited: false,
                sql: "SELECT * FROM v WHERE id = 1",
                whole: &["db.v"],
                sliced: &[],
            },
        ];
        for r in rows {
            let w = World::new(r.row);
            let mut st = w.session(r.db);
            if r.temp {
                st.temp_tables.insert(("db".into(), "tmp".into()));
            }
            st.reads_limit_inherited = r.limited;
            let table = if r.sql.contains(" v ") { "v" } else { "child" };
            let tables: Arc<[TableHandle]> = Arc::from(vec![w.versions.table("db", table)]);
            let p = w.planner();
            let (whole, sliced, _, generation) =
                p.plan_slices(&st, &tables, r.sql.as_bytes(), &[0x03]);
            assert_eq!(names(&whole), r.whole, "{}", r.why);
            let sliced: Vec<_> = sliced.iter().map(|s| s.table.clone()).collect();
            assert_eq!(names(&sliced), r.sliced, "{}", r.why);
            assert_eq!(generation, w.catalog.generation(), "{}", r.why);
            // The memoised plan answers the same.
            let planned = p.planned_slices(&st, &tables, r.sql.as_bytes(), &[0x03]);
            assert_eq!(names(&planned.whole), r.whole, "{} (memo)", r.why);
            let again = p.planned_slices(&st, &tables, r.sql.as_bytes(), &[0x03]);
            assert_eq!(names(&again.whole), r.whole, "{} (memo, again)", r.why);
        }
    }

    /// A write naming the rows of its one target turns that table's bump into a bump of
    /// its rows' slices (row granularity only); where its rows cannot be named, of every
    /// slice of the table (no column known).
    #[test]
    fn writes_name_their_rows() {
        type Rows = &'static [(&'static str, &'static [&'static str])];
        let rows: &[(&str, bool, &str, &[&str], Rows)] = &[
            // (why, row granularity, sql, tables bumped whole, (table, columns known))
            (
                "an update by primary key",
                true,
                "UPDATE child SET a = 1 WHERE id = 5",
                &[],
                &[("db.child", &["id"])],
            ),
            (
                "an insert: every column it sets",
                true,
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2)",
                &[],
                &[("db.child", &["a", "id", "parent_id"])],
            ),
            (
                "no rows named",
                true,
                "DELETE FROM child WHERE a > 5",
                &[],
                &[("db.child", &[])],
            ),
            (
                "table granularity",
                false,
                "UPDATE child SET a = 1 WHERE id = 5",
                &["db.child"],
                &[],
            ),
        ];
        for (why, row, sql, whole, by_rows) in rows {
            let w = World::new(*row);
            let mut st = w.session(Some("db"));
            let info = w.write(sql);
            let p = w.planner();
            p.plan_write(&mut st, &info);
            p.plan_write_rows(&mut st, &info, sql.as_bytes(), &[0x03]);
            assert_eq!(names(&st.pending.tables), *whole, "{why}");
            let got: Vec<(String, Vec<String>)> = st
                .pending
                .rows
                .iter()
                .map(|(t, known)| {
                    let mut cols: Vec<String> = known.iter().map(|(c, _)| c.clone()).collect();
                    cols.sort();
                    (format!("{}.{}", t.schema, t.name), cols)
                })
                .collect();
            let want: Vec<(String, Vec<String>)> = by_rows
                .iter()
                .map(|(t, cs)| (t.to_string(), cs.iter().map(|c| c.to_string()).collect()))
                .collect();
            assert_eq!(got, want, "{why}");
        }
    }

    /// An update that assigns known columns of a table nothing else changes says which.
    #[test]
    fn an_update_says_which_columns_it_sets() {
        let w = World::new(true);
        let mut st = w.session(Some("db"));
        let sql = "UPDATE child SET a = 1 WHERE parent_id > 5";
        let info = w.write(sql);
        let p = w.planner();
        p.plan_write(&mut st, &info);
        p.plan_write_rows(&mut st, &info, sql.as_bytes(), &[0x03]);
        let cols: Vec<_> = st
            .pending
            .columns
            .iter()
            .map(|(t, c)| (t.name.clone(), c.to_vec()))
            .collect();
        assert_eq!(cols, vec![("child".to_string(), vec!["a".to_string()])]);
    }

    fn prepared(params: u16) -> Prepared {
        Prepared {
            db: Some("db".into()),
            ..Prepared::new(
                "SELECT * FROM child WHERE id = ?".into(),
                StatementKind::Select,
                params,
                3,
            )
        }
    }

    /// An execute's parameters as slices read them, and where they cannot be read.
    #[test]
    fn execute_literals_read_the_packet_of_a_known_statement() {
        // COM_STMT_EXECUTE of statement 1, no cursor, one iteration, one parameter: no
        // nulls, types sent (LONGLONG), the value 5.
        let mut exec = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0x08, 0];
        exec.extend_from_slice(&5i64.to_le_bytes());
        let mut other_id = exec.clone();
        other_id[1] = 2;
        let five = Some(vec![Some(Lit::Int("5".into()))]);
        type Row<'a> = (&'a str, &'a [u8], bool, Option<Vec<Option<Lit>>>);
        let rows: Vec<Row> = vec![
            (
                "a text query has no parameters",
                b"\x03SELECT 1",
                false,
                None,
            ),
            ("an execute of a known statement", &exec, false, five),
            ("an unknown statement", &other_id, false, None),
            (
                "values sent as long data are not in the packet",
                &exec,
                true,
                None,
            ),
            ("a truncated packet", &exec[..12], false, None),
        ];
        let w = World::new(true);
        for (why, payload, long_data, want) in rows {
            let mut st = w.session(Some("db"));
            st.stmts.insert(1, prepared(1));
            st.execute_long_data = long_data;
            assert_eq!(execute_literals(&st, payload), want, "{why}");
        }
    }
}
