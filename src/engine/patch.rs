//! Patching cached aggregates (`policy::patch`) over the session's state and the catalog:
//! the recipe a read's entry is stored with, and, before an INSERT goes upstream, the
//! entries its rows will patch ([`PatchWrite`]). Only the registered keys whose stamps the
//! write's planned bumps reach are visited (`cache::patches::WriteReach`, the keys indexed
//! by slice counter): the others it neither changes nor re-stamps. The insert's rows are
//! tested against each reached key's WHERE summary (`policy::patch::Summary`) before its
//! entry is read further: an entry they cannot change is carried untouched, read no more.
//! The patch itself happens at the write's OK (`session::relay`), inside a version window
//! (`cache::versions::PatchWindow`).

use std::sync::Arc;

use super::slices::Planner;
use super::state::SessionState;
use crate::analysis::slices::InsertValues;
use crate::cache::patches::{Candidate, PatchWrite, TableKeys, WriteReach};
use crate::cache::{Cache, TableHandle};
use crate::policy::patch::{self, Param, Recipe, Refusal};
use crate::protocol::commands;
use crate::protocol::packets::com;

/// Why no recipe or no patch: the policy's refusal, or what the session or catalog rule out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPatch {
    /// `cache.patch_aggregates` is off.
    Off,
    /// Inside a transaction, or a session holding temporary tables (a name may be one).
    /// (What the session does to its rows, `sql_select_limit` among them, is the policy's:
    /// `patch::session_rows`.)
    Session,
    /// Groups from a server whose GROUP BY does not sort them (MySQL 8.0): where a new
    /// group lands is not known.
    GroupOrder,
    /// Entries are shared through L2, whose copy no local patch reaches.
    SharedLevel,
    /// Not exactly one table, or one the catalog cannot vouch for (a view, a trigger, a
    /// generated or ON UPDATE column, system versioning, a DDL pending on it).
    Table,
    /// The write does not change exactly this one table by its own rows.
    Write,
    /// The verifier turned patching off for this statement shape.
    ShapeOff,
    Policy(Refusal),
}

impl NoPatch {
    pub fn as_str(self) -> &'static str {
        match self {
            NoPatch::Off => "off",
            NoPatch::Session => "session",
            NoPatch::GroupOrder => "group_order",
            NoPatch::SharedLevel => "l2",
            NoPatch::Table => "table",
            NoPatch::Write => "write",
            NoPatch::ShapeOff => "shape_off",
            NoPatch::Policy(r) => r.as_str(),
        }
    }
}

impl From<Refusal> for NoPatch {
    fn from(r: Refusal) -> NoPatch {
        NoPatch::Policy(r)
    }
}

impl Planner<'_> {
    /// Whether writes to `q` have rows the statement shows in full: a plain base table the
    /// catalog knows (no trigger, no cascade back to it, no generated, invisible or ON
    /// UPDATE column, not system versioned, no DDL pending on it), outside `mysql`.
    fn patchable_table(&self, q: &(String, String)) -> bool {
        q.0 != "mysql" && self.catalog.update_changes_only_set(q)
    }

    /// The recipe a read's entry is stored with, when a known insert can patch it: `sql`
    /// its text (an execute's prepared SQL), `params` an execute's bound values
    /// ([`execute_params`]; None for a text read, or when they could not be read: then a
    /// `?` refuses), `tables` what its plan reads, `binary` an execute's result,
    /// `shared_level` an instance with L2, `under_snapshot` a result read in a
    /// transaction's snapshot, which may be older than the latest rows (never patched:
    /// `NoPatch::Session`).
    #[allow(clippy::too_many_arguments)]
    pub fn patch_recipe(
        &self,
        st: &SessionState,
        sql: &[u8],
        params: Option<&[Param]>,
        tables: &[TableHandle],
        binary: bool,
        digest: u64,
        shared_level: bool,
        under_snapshot: bool,
    ) -> Result<Recipe, NoPatch> {
        if under_snapshot && self.cfg.cache.patch_aggregates {
            return Err(NoPatch::Session);
        }
        self.recipe_for(
            st,
            sql,
            params,
            Some(tables),
            (binary, shared_level),
            digest,
        )
    }

    /// [`patch_recipe`](Self::patch_recipe) for a fill being stored: the recipe, shared,
    /// or None (why not is logged at debug level, unless patching is off).
    #[allow(clippy::too_many_arguments)]
    pub fn fill_recipe(
        &self,
        st: &SessionState,
        sql: &[u8],
        params: Option<&[Param]>,
        tables: &[TableHandle],
        binary: bool,
        digest: u64,
        shared_level: bool,
        under_snapshot: bool,
    ) -> Option<std::sync::Arc<Recipe>> {
        let r = self.patch_recipe(
            st,
            sql,
            params,
            tables,
            binary,
            digest,
            shared_level,
            under_snapshot,
        );
        if let Err(why) = &r {
            if *why != NoPatch::Off {
                tracing::debug!(why = why.as_str(), "read not patchable");
            }
        }
        r.ok().map(std::sync::Arc::new)
    }

    /// `how`: an execute's result, and an instance with L2.
    fn recipe_for(
        &self,
        st: &SessionState,
        sql: &[u8],
        params: Option<&[Param]>,
        tables: Option<&[TableHandle]>,
        how: (bool, bool),
        digest: u64,
    ) -> Result<Recipe, NoPatch> {
        let (binary, shared_level) = how;
        if !self.cfg.cache.patch_aggregates {
            return Err(NoPatch::Off);
        }
        // Not with an L2: its copy of the entry is not patched, and another instance
        // would serve it unpatched (or this one, after its own copy is evicted).
        if shared_level {
            return Err(NoPatch::SharedLevel);
        }
        if st.txn.in_transaction() || !st.temp_tables.is_empty() || st.temporaries_unknown {
            return Err(NoPatch::Session);
        }
        patch::session_rows(patch::SessionRows {
            select_limited: st.select_may_be_limited(),
            results_ascii: st.results_ascii(),
            reads_limited: st.reads_may_be_refused(),
        })?;
        // A shape refused by its structure (every miss of a join, a sorted page) is not
        // parsed again at each miss: patching off parses nothing here.
        if self.patches.shape_refused(digest) {
            return Err(NoPatch::Policy(Refusal::NotSimple));
        }
        let text = std::str::from_utf8(sql).map_err(|_| Refusal::Unparsable)?;
        let shape = match self.patches.read_shape(text, params) {
            Err(Refusal::NotSimple) => {
                self.patches.refuse_shape(digest);
                return Err(NoPatch::Policy(Refusal::NotSimple));
            }
            r => r?,
        };
        // A join is read both ways round (which table is aggregated, the catalog says):
        // the first that binds is the recipe; else the first's refusal.
        let mut first = None;
        let mut next = Some(shape);
        while let Some(mut s) = next.take() {
            next = s.other.take().map(|o| *o);
            match self.bind_shape(st, s, tables, binary, digest, text) {
                Ok(r) => return Ok(r),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or(NoPatch::Table))
    }

    /// One reading of a shape bound to the catalog: its table (and the joined one) the
    /// plan's (`tables`, when given: exactly those), the aggregated one patchable, the
    /// joined one a base table with a primary key.
    fn bind_shape(
        &self,
        st: &SessionState,
        shape: patch::ReadShape,
        tables: Option<&[TableHandle]>,
        binary: bool,
        digest: u64,
        text: &str,
    ) -> Result<Recipe, NoPatch> {
        // MariaDB (like MySQL before 8.0) sorts the groups by their key: a new group's
        // place is known. MySQL 8.0 sends them in whatever order its plan made.
        if shape.group.is_some() && !st.mariadb {
            return Err(NoPatch::GroupOrder);
        }
        let q = st
            .qualify(shape.table.schema.as_deref(), &shape.table.name)
            .ok_or(NoPatch::Table)?;
        let jq = match &shape.join {
            Some(j) => Some(
                st.qualify(j.table.schema.as_deref(), &j.table.name)
                    .ok_or(NoPatch::Table)?,
            ),
            None => None,
        };
        if jq.as_ref() == Some(&q) {
            return Err(NoPatch::Table);
        }
        if let Some(tables) = tables {
            let want: Vec<&(String, String)> = std::iter::once(&q).chain(jq.iter()).collect();
            let same = tables.len() == want.len()
                && tables.iter().all(|t| {
                    want.iter().any(|w| {
                        (t.schema.as_str(), t.name.as_str()) == (w.0.as_str(), w.1.as_str())
                    })
                });
            if !same {
                return Err(NoPatch::Table);
            }
        }
        if !self.patchable_table(&q) {
            return Err(NoPatch::Table);
        }
        let columns = self.catalog.columns_by_ordinal(&q).ok_or(NoPatch::Table)?;
        let Some(jq) = jq else {
            return Ok(shape.bind(q, &columns, binary, digest, text)?);
        };
        let joined_columns = self.catalog.columns_by_ordinal(&jq).ok_or(NoPatch::Table)?;
        let key = self
            .catalog
            .primary_key_columns(&jq)
            .ok_or(NoPatch::Table)?;
        let joined = patch::JoinedTable {
            q: jq,
            columns: &joined_columns,
            key: &key,
        };
        Ok(shape.bind_with(q, &columns, Some(joined), binary, digest, text)?)
    }

    /// What `QCACHE EXPLAIN` says of a read's entry under inserts: patched by a known
    /// insert into its table, or why not. Its table is the statement's own (no plan read).
    pub fn explain_patch(
        &self,
        st: &SessionState,
        sql: &[u8],
        binary: bool,
        shared_level: bool,
    ) -> String {
        match self.recipe_for(st, sql, None, None, (binary, shared_level), 0) {
            Ok(r) => match &r.join {
                None => format!(
                    "yes: an autocommit INSERT ... VALUES of known rows into {}.{} patches it",
                    r.schema, r.table
                ),
                Some(j) => format!(
                    "yes: an autocommit INSERT ... VALUES of known rows into {}.{} patches it \
                     while it shows the joined row of {}.{}; writes to {}.{} invalidate it",
                    r.schema, r.table, j.schema, j.table, j.schema, j.table
                ),
            },
            Err(why) => format!("no ({}): such an insert invalidates it", why.as_str()),
        }
    }

    /// Before a write goes upstream, after its invalidation was planned: when it is an
    /// autocommit `INSERT … VALUES` of known rows into one table, the entries of that
    /// table it will patch (into `st.pending.patch`). Entries looked up now hold results
    /// computed before the write reached the server.
    /// `inserted`: the INSERT's values as its plan read them (`plan_write_rows`), judged
    /// without reading the statement again; None when the plan did not read them (then
    /// the statement is parsed here).
    pub fn plan_patch(
        &self,
        st: &mut SessionState,
        text: &[u8],
        payload: &[u8],
        cache: &Cache,
        inserted: Option<&InsertValues>,
    ) {
        st.pending.patch = None;
        match self.patch_write(st, text, payload, cache, inserted) {
            Ok(p) => st.pending.patch = Some(p),
            Err(NoPatch::Off) => {}
            Err(why) => tracing::debug!(why = why.as_str(), "write patches nothing"),
        }
    }

    /// `payload`: what goes upstream, an execute's parameters for a prepared INSERT's `?`.
    fn patch_write(
        &self,
        st: &SessionState,
        text: &[u8],
        payload: &[u8],
        cache: &Cache,
        inserted: Option<&InsertValues>,
    ) -> Result<PatchWrite, NoPatch> {
        if !self.cfg.cache.patch_aggregates {
            return Err(NoPatch::Off);
        }
        if st.txn.in_transaction() || !st.temp_tables.is_empty() || st.temporaries_unknown {
            return Err(NoPatch::Session);
        }
        let table = only_table(st).ok_or(NoPatch::Write)?;
        // Nothing to patch, nothing to parse: a write to a table without patchable entries
        // costs one map lookup, and one whose bumps reach none of them (`WriteReach`: no
        // registered key indexed by its slices) a few more.
        let patches = cache.patches();
        let reach = WriteReach::of(&st.pending.tables, &st.pending.rows, &table);
        let reached = patches
            .with_table(&table.schema, &table.name, |t| {
                !t.reached(&reach).is_empty()
            })
            .unwrap_or(false);
        if !reached {
            return Err(NoPatch::Write);
        }
        let text = std::str::from_utf8(text).map_err(|_| Refusal::Unparsable)?;
        let params = execute_params(st, payload);
        let ins = self.inserted_rows(text, inserted, params.as_deref())?;
        let q = st
            .qualify(ins.table.schema.as_deref(), &ins.table.name)
            .ok_or(NoPatch::Table)?;
        if (table.schema.as_str(), table.name.as_str()) != (q.0.as_str(), q.1.as_str())
            || !self.patchable_table(&q)
        {
            return Err(NoPatch::Table);
        }
        let columns = self.catalog.columns_by_ordinal(&q).ok_or(NoPatch::Table)?;
        let candidates = patches
            .with_table(&q.0, &q.1, |t| {
                candidates(cache, t, &reach, &q, &ins, &columns)
            })
            .unwrap_or_default();
        if candidates.is_empty() {
            return Err(NoPatch::Write);
        }
        Ok(PatchWrite {
            table,
            rows: ins.rows.len() as u64,
            candidates,
            ok: None,
        })
    }
}

impl Planner<'_> {
    /// An INSERT's rows as `policy::patch::insert_rows_bound` reads them, read once: from
    /// `inserted`, the values the write's plan read from its tokens, when it read them;
    /// else by that parse. Their values first (a value that is no constant refuses here,
    /// unparsed), then the structure they fill, judged once per shape
    /// (`Patchable::insert_structure`) by a statement whose values are all constants: what
    /// the parse refuses of those is their form (`(5)`), which the shape fixes, never
    /// their values. Refuses exactly what the parse refuses
    /// (`tests::inserts_read_once_refuse_what_the_parse_refuses`).
    fn inserted_rows(
        &self,
        text: &str,
        inserted: Option<&InsertValues>,
        params: Option<&[Param]>,
    ) -> Result<patch::InsertRows, Refusal> {
        let Some(v) = inserted else {
            return patch::insert_rows_bound(text, params);
        };
        let ins = patch::insert_rows_read(v, params)?;
        self.patches.insert_structure(text, v.shape, params)?;
        Ok(ins)
    }
}

/// The entries of table `q` (`t` its registered keys) that insert `ins` may patch: each
/// entry held under a key the write's bumps reach (`reach`: only those keys are visited;
/// an entry they do not reach is left as it is, current or not, and one they reach that its
/// registration says they do not is invalidated by them, never carried stale), whose
/// recipe is still this table's, of a shape not turned off, whose used columns the
/// insert's rows give values in. Whether its WHERE keeps any of them
/// (`Candidate::touched`) is first asked of the key's summary, over the rows' values read
/// once per summary column (`policy::patch::Summary`): an entry it rules out is carried
/// untouched (the write leaves it as it is, and re-stamps it if its bumps reach it) without
/// reading anything more of it. An entry whose recipe is no longer the one registered is
/// judged by its own recipe in full.
fn candidates(
    cache: &Cache,
    t: &TableKeys,
    reach: &WriteReach,
    q: &(String, String),
    ins: &patch::InsertRows,
    columns: &[(String, crate::analysis::slices::ColumnInfo)],
) -> Vec<Candidate> {
    let reached = t.reached(reach);
    let n = ins.rows.len();
    // The rows' values in each column the summaries test, read once for every entry.
    let slots: Vec<Option<Vec<Option<i128>>>> = t
        .columns()
        .iter()
        .map(|c| ins.column_values(columns, c))
        .collect();
    // The rows in each list of columns the recipes use, read once per list: the entries
    // of one shape (a dashboard's windows) share theirs, and its `Arc`.
    let mut by_used: Vec<(Arc<[String]>, Option<InsertedRows>)> = Vec::new();
    let mut rows_in = |used: &Arc<[String]>| -> Option<InsertedRows> {
        if let Some((_, rows)) = by_used.iter().find(|(u, _)| Arc::ptr_eq(u, used)) {
            return rows.clone();
        }
        let rows = match by_used.iter().find(|(u, _)| **u == **used) {
            Some((_, rows)) => rows.clone(),
            None => ins.values_of(columns, used).ok().map(Arc::from),
        };
        by_used.push((used.clone(), rows.clone()));
        rows
    };
    // Whether patching is off for a shape, asked once per run of keys of one shape.
    let mut off: Option<(u64, bool)> = None;
    let mut is_off = |digest: u64| match off {
        Some((d, o)) if d == digest => o,
        _ => {
            let o = cache.patches().is_off(digest);
            off = Some((digest, o));
            o
        }
    };
    let mut out = Vec::with_capacity(reached.len());
    for r in reached {
        let Some(entry) = cache.peek(r.key) else {
            continue;
        };
        let Some(recipe) = entry.patch.as_ref() else {
            continue;
        };
        // The recipe registered beside the key was registered for this table.
        let registered = Arc::ptr_eq(recipe, &r.recipe);
        if !registered && (recipe.schema != q.0 || recipe.table != q.1) {
            continue;
        }
        if is_off(recipe.digest) {
            continue;
        }
        // A refusal here leaves the entry to the write's invalidation.
        let own: Arc<[String]>;
        let used = if registered {
            &r.used
        } else {
            own = Arc::from(recipe.used_columns());
            &own
        };
        let Some(rows) = rows_in(used) else {
            continue;
        };
        let touched = if registered {
            r.summary.may_match(&slots, n) && recipe.keeps_any_in(&rows, used)
        } else {
            recipe.keeps_any_in(&rows, used)
        };
        debug_assert_eq!(touched, recipe.keeps_any(&rows), "the summary fails closed");
        let recipe = recipe.clone();
        out.push(Candidate {
            key: r.key,
            touched,
            entry,
            recipe,
            rows,
        });
    }
    out
}

/// An insert's rows in the columns a recipe uses, in its `used_columns` order.
type InsertedRows = Arc<[Vec<Option<i128>>]>;

/// The parameters of `payload` when it is a COM_STMT_EXECUTE of a statement the session
/// knows, as the server receives them (`policy::patch::bound_params`); None for anything
/// else, or when they cannot be read (long data, no types known, a short packet): then a
/// statement's `?` refuses its patch.
pub fn execute_params(st: &SessionState, payload: &[u8]) -> Option<Vec<Param>> {
    if payload.first() != Some(&com::STMT_EXECUTE) || st.execute_long_data {
        return None;
    }
    let stmt = st.stmts.get(&commands::stmt_id(payload)?)?;
    if stmt.long_data {
        return None;
    }
    let p = commands::execute_params(payload, stmt.params, stmt.types.as_deref())?;
    patch::bound_params(&p, usize::from(stmt.params))
}

/// Keeps the first OK of a write that means to patch: its affected rows and warnings say
/// whether the server did exactly what the statement shows.
pub fn note_patch_ok(
    pending: &mut crate::cache::writes::Pending,
    resp: &crate::protocol::response::Response,
    payload: &[u8],
) {
    if let Some(p) = pending.patch.as_mut() {
        if p.ok.is_none() && resp.status_here.is_some() && payload.first() == Some(&0) {
            p.ok = crate::protocol::packets::parse_ok(payload);
        }
    }
}

/// The one table a planned write changes, when it changes nothing else: no other table, no
/// schema, nothing conservative, no DDL, no privilege change, no column-known update.
pub fn only_table(st: &SessionState) -> Option<TableHandle> {
    only_table_of(&st.pending)
}

/// [`only_table`] of a plan taken out of the session (at the OK).
pub fn only_table_of(p: &crate::cache::writes::Pending) -> Option<TableHandle> {
    if !p.schemas.is_empty() || p.all || p.ddl || p.privileges.is_some() || !p.columns.is_empty() {
        return None;
    }
    let mut all = p.tables.iter().chain(p.rows.iter().map(|(t, _)| t));
    let first = all.next()?;
    all.all(|t| Arc::ptr_eq(t, first)).then(|| first.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    fn on(w: &mut World) {
        set_switch(w, true);
    }

    fn set_switch(w: &mut World, on: bool) {
        let mut cfg = (*w.cfg).clone();
        cfg.cache.patch_aggregates = on;
        w.cfg = Arc::new(cfg);
    }

    /// Which reads get a recipe, by session, table and switch (the shapes themselves are
    /// `policy::patch`'s table).
    #[test]
    fn reads_get_a_recipe_or_a_reason() {
        type Row<'a> = (&'a str, bool, bool, &'a str, &'a str, Result<(), NoPatch>);
        let rows: &[Row] = &[
            // (why, switch on, temporary table, sql, table read, verdict)
            (
                "a count of a base table",
                true,
                false,
                "SELECT COUNT(*), SUM(a) FROM child WHERE parent_id = 1",
                "child",
                Ok(()),
            ),
            (
                "the switch off",
                false,
                false,
                "SELECT COUNT(*) FROM child",
                "child",
                Err(NoPatch::Off),
            ),
            (
                "a temporary table may shadow the name",
                true,
                true,
                "SELECT COUNT(*) FROM child",
                "child",
                Err(NoPatch::Session),
            ),
            (
                "a view",
                true,
                false,
                "SELECT COUNT(*) FROM v",
                "v",
                Err(NoPatch::Table),
            ),
            (
                "another table than the plan's",
                true,
                false,
                "SELECT COUNT(*) FROM child",
                "parent",
                Err(NoPatch::Table),
            ),
            (
                "a grouped count of a base table",
                true,
                false,
                "SELECT parent_id, COUNT(*), SUM(a) FROM child GROUP BY parent_id",
                "child",
                Ok(()),
            ),
            (
                "DATE() of an integer column",
                true,
                false,
                "SELECT DATE(a), COUNT(*) FROM child GROUP BY DATE(a)",
                "child",
                Err(NoPatch::Policy(Refusal::Column)),
            ),
            (
                "a date compared with an integer column",
                true,
                false,
                "SELECT COUNT(*) FROM child WHERE a >= '2024-01-08'",
                "child",
                Err(NoPatch::Policy(Refusal::Column)),
            ),
            (
                "a shape the policy refuses",
                true,
                false,
                "SELECT AVG(a) FROM child",
                "child",
                Err(NoPatch::Policy(Refusal::Aggregate)),
            ),
        ];
        for (why, switch, temp, sql, table, want) in rows {
            let mut w = World::new(true);
            set_switch(&mut w, *switch);
            let mut st = w.session(Some("db"));
            if *temp {
                st.temp_tables.insert(("db".into(), "tmp".into()));
            }
            let tables = [w.versions.table("db", table)];
            let got = w
                .planner()
                .patch_recipe(&st, sql.as_bytes(), None, &tables, false, 1, false, false)
                .map(drop);
            assert_eq!(got, *want, "{why}");
        }
        // A result read under a transaction's snapshot may be older than the latest rows.
        let mut w = World::new(true);
        on(&mut w);
        let st = w.session(Some("db"));
        let tables = [w.versions.table("db", "child")];
        let sql = b"SELECT COUNT(*) FROM child";
        let p = w.planner();
        assert!(p
            .patch_recipe(&st, sql, None, &tables, false, 1, false, false)
            .is_ok());
        assert_eq!(
            p.patch_recipe(&st, sql, None, &tables, false, 1, false, true)
                .map(drop),
            Err(NoPatch::Session),
            "under a snapshot"
        );
        // What the session or its server rule out, each alone.
        type Case = (&'static str, &'static str, fn(&mut SessionState), NoPatch);
        let cases: [Case; 4] = [
            (
                "a sql_select_limit the session set may cut the groups",
                "SELECT parent_id, COUNT(*) FROM child GROUP BY parent_id",
                |st| {
                    st.vars.insert("sql_select_limit".into(), "1".into());
                },
                NoPatch::Policy(Refusal::SelectLimit),
            ),
            (
                "one inherited from the server's global value, too",
                "SELECT COUNT(*) FROM child",
                |st| st.select_limit_inherited = true,
                NoPatch::Policy(Refusal::SelectLimit),
            ),
            (
                "groups from MySQL 8.0 come in no known order",
                "SELECT parent_id, COUNT(*) FROM child GROUP BY parent_id",
                |st| st.mariadb = false,
                NoPatch::GroupOrder,
            ),
            (
                "a ? without the execute's values",
                "SELECT COUNT(*) FROM child WHERE parent_id = ?",
                |_| {},
                NoPatch::Policy(Refusal::Token),
            ),
        ];
        for (why, sql, change, want) in cases {
            let mut st = w.session(Some("db"));
            let ok = p.patch_recipe(&st, sql.as_bytes(), None, &tables, false, 1, false, false);
            assert!(
                ok.is_ok() || want == NoPatch::Policy(Refusal::Token),
                "{why}: {ok:?}"
            );
            change(&mut st);
            let got = p
                .patch_recipe(&st, sql.as_bytes(), None, &tables, false, 1, false, false)
                .map(drop);
            assert_eq!(got, Err(want), "{why}");
        }
        // Without GROUP BY, MySQL 8.0's one row is patched as MariaDB's.
        let mut st = w.session(Some("db"));
        st.mariadb = false;
        assert!(p
            .patch_recipe(
                &st,
                b"SELECT COUNT(*) FROM child",
                None,
                &tables,
                false,
                1,
                false,
                false
            )
            .is_ok());
        // An execute's values bind its `?`.
        let st = w.session(Some("db"));
        let sql = b"SELECT COUNT(*) FROM child WHERE parent_id = ?";
        let got = p.patch_recipe(
            &st,
            sql,
            Some(&[Param::Int(4)]),
            &tables,
            true,
            1,
            false,
            false,
        );
        assert_eq!(
            got.map(|r| r.filter),
            Ok(vec![(
                "parent_id".to_string(),
                crate::policy::patch::Cond::In(vec![4])
            )])
        );
    }

    /// A shape refused by its structure is remembered by digest and not parsed again;
    /// others are not remembered, and EXPLAIN's digest 0 never is.
    /// What `QCACHE EXPLAIN` says under `patched_by_insert` ([`Planner::explain_patch`]), one
    /// row per answer, the row-order refusal among them: MySQL 8.0 sends groups in whatever
    /// order its plan made, so where an inserted row's new group lands is not known.
    #[test]
    fn explain_says_whether_an_insert_patches_and_why_not() {
        let sql = b"SELECT parent_id, COUNT(*) FROM child GROUP BY parent_id";
        type Case = (&'static str, fn(&mut SessionState), bool, &'static str);
        let cases: [Case; 4] = [
            (
                "MariaDB sorts the groups by their key",
                |_| {},
                false,
                "yes: an autocommit INSERT ... VALUES of known rows into db.child patches it",
            ),
            (
                "row order: MySQL 8.0's groups come in its plan's order",
                |st| st.mariadb = false,
                false,
                "no (group_order): such an insert invalidates it",
            ),
            (
                "an instance with L2, whose copy no local patch reaches",
                |_| {},
                true,
                "no (l2): such an insert invalidates it",
            ),
            (
                "a session holding a temporary table",
                |st| {
                    st.temp_tables.insert(("db".into(), "tmp".into()));
                },
                false,
                "no (session): such an insert invalidates it",
            ),
        ];
        let mut w = World::new(true);
        on(&mut w);
        let p = w.planner();
        for (why, change, l2, want) in cases {
            let mut st = w.session(Some("db"));
            change(&mut st);
            assert_eq!(p.explain_patch(&st, sql, false, l2), want, "{why}");
        }
    }

    #[test]
    fn structural_refusals_are_remembered_per_shape() {
        let mut w = World::new(true);
        on(&mut w);
        let st = w.session(Some("db"));
        let tables = [w.versions.table("db", "child")];
        let p = w.planner();
        let recipe = |sql: &str, digest| {
            p.patch_recipe(
                &st,
                sql.as_bytes(),
                None,
                &tables,
                false,
                digest,
                false,
                false,
            )
            .map(drop)
        };
        let not_simple = Err(NoPatch::Policy(Refusal::NotSimple));
        let join = "SELECT COUNT(*) FROM child JOIN parent ON parent.id = child.parent_id";
        assert_eq!(recipe(join, 0), not_simple);
        assert!(!w.patches.shape_refused(0), "digest 0 is no shape");
        assert_eq!(recipe(join, 7), not_simple);
        assert!(w.patches.shape_refused(7));
        assert_eq!(recipe(join, 7), not_simple, "remembered");
        assert_eq!(recipe("SELECT COUNT(*) FROM child", 8), Ok(()));
        assert_eq!(
            recipe("SELECT AVG(a) FROM child", 9),
            Err(NoPatch::Policy(Refusal::Aggregate))
        );
        assert!(!w.patches.shape_refused(8) && !w.patches.shape_refused(9));
    }

    /// An insert's rows read from its plan's values (`Planner::inserted_rows`) are those
    /// the parse reads, and refused where the parse refuses, whichever statement of a
    /// shape came first (and so built the shape and judged its structure): one class per
    /// shape, each statement of it tried first in a fresh world.
    #[test]
    fn inserts_read_once_refuse_what_the_parse_refuses() {
        use crate::analysis::TableRef;
        let text: &[&[&str]] = &[
            &[
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (-7, 1, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (+7, 1, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1.5, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, -1.5, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, '1', 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 'it''s', 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, x'01', 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1e3, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, -'1', 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 99999999999999999999999999999999999999999)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, -99999999999999999999999999999999999999999)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2147483648)",
                "insert into CHILD (ID, Parent_Id, A) values (7, 1, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2) -- x",
            ],
            &[
                "INSERT INTO child (id, parent_id, a) VALUES (7, NULL, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, NULL, NULL)",
            ],
            &[
                "INSERT INTO child (id, parent_id, a) VALUES ((7), 1, 2)",
                "INSERT INTO child (id, parent_id, a) VALUES ((-7), 1, 2)",
            ],
            &[
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2), (8, 1, 3)",
                "INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2), (8, NULL, -3)",
            ],
            &[
                "INSERT INTO child VALUES (7, 1, 2)",
                "INSERT child VALUES (7, 1, 2)",
                "INSERT INTO child VALUE (7, 1, 2)",
            ],
            &["INSERT INTO db.child (id, parent_id, a) VALUES (7, 1, 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, 1 + 1, 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, ABS(1), 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, DEFAULT, 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, TRUE, 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, \"x\", 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, N'x', 2)"],
            &["INSERT IGNORE INTO child (id, parent_id, a) VALUES (7, 1, 2)"],
            &["INSERT LOW_PRIORITY INTO child (id, parent_id, a) VALUES (7, 1, 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, 1, 2) ON DUPLICATE KEY UPDATE a = 3"],
            &["INSERT INTO child (child.id, parent_id, a) VALUES (7, 1, 2)"],
            &["INSERT INTO child (id, parent_id) VALUES (7, 1, 2)"],
            &["INSERT INTO child (id, parent_id, a) VALUES (7, ?, 2)"],
        ];
        let p = |n: i128| Param::Int(n);
        let prepared: &[(&str, &[&[Param]])] = &[
            (
                "INSERT INTO child (id, parent_id, a) VALUES (?, ?, ?)",
                &[
                    &[p(7), p(1), p(2)],
                    &[p(7), Param::Null, p(2)],
                    &[p(7), Param::Other, p(2)],
                    &[p(7), Param::Str("1".into()), Param::Dec("2.5".into())],
                    &[p(7), p(1)],
                    &[p(7), p(1), p(2), p(3)],
                ],
            ),
            (
                "INSERT INTO child (id, parent_id, a) VALUES (?, 1, ?)",
                &[&[p(7), p(2)], &[p(7), Param::Null]],
            ),
            (
                "INSERT INTO child (id, parent_id, a) VALUES (?, f(1), ?)",
                &[&[p(7), p(2)]],
            ),
        ];
        // (statement, bound values): one class per shape.
        type Class<'a> = Vec<(&'a str, Option<Vec<Param>>)>;
        let mut classes: Vec<Class> = text
            .iter()
            .map(|c| c.iter().map(|s| (*s, None)).collect())
            .collect();
        for (sql, binds) in prepared {
            classes.push(binds.iter().map(|b| (*sql, Some(b.to_vec()))).collect());
        }
        let used = ["parent_id".to_string(), "a".to_string()];
        let mut read = 0;
        for class in &classes {
            for first in 0..class.len() {
                let w = World::new(true);
                let p = w.planner();
                let q = ("db".to_string(), "child".to_string());
                let columns = w.catalog.columns_by_ordinal(&q).unwrap();
                let cols = |_: &TableRef, c: &str| w.catalog.column(&q, c);
                let all = |_: &TableRef| w.catalog.column_order(&q);
                let order = (first..class.len()).chain(0..first);
                for (sql, params) in order.map(|i| &class[i]) {
                    let params = params.as_deref();
                    let parse = patch::insert_rows_bound(sql, params);
                    let inserted = w
                        .analyzer
                        .slice_shape(sql)
                        .and_then(|s| s.write_rows(sql, &cols, &all, &|_| None))
                        .and_then(|rw| rw.inserted);
                    read += usize::from(inserted.is_some());
                    let once = p.inserted_rows(sql, inserted.as_deref(), params);
                    let why = format!("{sql} {params:?}, after {:?}", class[first]);
                    match (&parse, &once) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a.columns, b.columns, "{why}");
                            assert_eq!(a.rows, b.rows, "{why}");
                            assert_eq!(
                                (a.table.schema.as_deref(), a.table.name.to_lowercase()),
                                (b.table.schema.as_deref(), b.table.name.to_lowercase()),
                                "{why}"
                            );
                            assert_eq!(
                                a.values_of(&columns, &used),
                                b.values_of(&columns, &used),
                                "{why}"
                            );
                        }
                        (Err(_), Err(_)) => {}
                        _ => panic!("{why}: parse {parse:?}, read once {once:?}"),
                    }
                }
            }
        }
        assert!(
            read > 20,
            "most statements were read from their plan ({read})"
        );
    }

    /// A write patches only when its plan changes exactly one table, by its own rows.
    #[test]
    fn only_a_write_of_one_table_patches() {
        let w = World::new(true);
        let t = w.versions.table("db", "child");
        let u = w.versions.table("db", "parent");
        let mut st = w.session(Some("db"));
        assert!(only_table(&st).is_none(), "nothing planned");
        st.pending.tables.push(t.clone());
        assert!(only_table(&st).is_some_and(|x| Arc::ptr_eq(&x, &t)));
        st.pending.tables.push(u);
        assert!(only_table(&st).is_none(), "two tables");
        st.pending.tables.truncate(1);
        st.pending.all = true;
        assert!(only_table(&st).is_none(), "a conservative scope");
        st.pending.all = false;
        st.pending.schemas.push("db".into());
        assert!(only_table(&st).is_none(), "a schema");
    }
}
