//! Foreign-key-derived slices on the session's paths (`cache::fkmap` has the rules and the
//! races): a read's derived slices, a write's standing with the parent maps (taken before it
//! is sent, finished after its invalidation or its transaction), the mappings a parent
//! insert teaches, and the derived slices a child write bumps.

use std::sync::Arc;

use super::Session;
use crate::analysis::slices::{ColumnInfo, Lit, Shape, WriteKind};
use crate::analysis::TableRef;
use crate::cache::fkmap::{self, Learn, MapKey, Token, Touch, Window};
use crate::cache::sliceplans;
use crate::cache::versions::SlicePlan;
use crate::cache::TableHandle;
use crate::protocol::packets::OkInfo;

/// What the statement in flight owes or may teach the parent maps.
#[derive(Debug, Default)]
pub struct FkState {
    /// Read before the statement was sent: the window its learning and its child bumps are
    /// judged by.
    pub window: Option<Window>,
    /// How its single-table write touches its table, from its shape.
    pub how: Option<((String, String), Touch)>,
    /// Its standing while it may change rows (finished when dropped).
    pub tokens: Vec<Token>,
    /// What it may teach once acknowledged.
    pub learn: Option<Learn>,
    /// The OK packet of a statement with `learn`.
    pub ok: Option<OkInfo>,
}

/// Per derived column of a child table (its name, as `fkmap::derived_column` makes it), the
/// slice keys of the parent values its written rows name.
pub type Answers = Vec<(String, Vec<String>)>;

impl Session {
    /// The derived slices of a read, for the tables it would read whole (`rest`): each one
    /// the statement proves it reads only through a parent's pinned rows becomes a sliced
    /// table of its derived column. Registers maps and columns before the caller reads the
    /// stamps.
    pub(super) fn plan_derived(
        &self,
        shape: &Shape,
        text: &str,
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
        params: &dyn Fn(usize) -> Option<Lit>,
        rest: &mut Vec<TableHandle>,
        sliced: &mut Vec<SlicePlan>,
    ) {
        if rest.is_empty() || !self.shared.config().invalidation.derived_slices {
            return;
        }
        let catalog = &self.shared.catalog;
        let pk = |t: &TableRef| {
            let q = self.st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.primary_key(&q)
        };
        let derived = shape.derived_slices(text, columns, params, &pk);
        if derived.is_empty() {
            return;
        }
        let versions = self.shared.cache.versions();
        for d in derived {
            let (Some(child), Some(parent)) = (
                self.st.qualify(d.child.schema.as_deref(), &d.child.name),
                self.st.qualify(d.parent.schema.as_deref(), &d.parent.name),
            ) else {
                continue;
            };
            let Some(pos) = rest
                .iter()
                .position(|t| t.schema == child.0 && t.name == child.1)
            else {
                continue;
            };
            let key = MapKey {
                schema: parent.0,
                table: parent.1,
                pk: d.pk,
                col: d.col,
            };
            versions.parents.register(&key);
            let t = rest.remove(pos);
            let name = fkmap::derived_column(&d.fk, &key);
            // Columns read are not tracked for derived slices: the slices' "any column"
            // counters, which every column-known update of their rows bumps.
            sliced.push(sliceplans::slice_plan(versions, &t, &name, &d.values, None));
        }
    }

    /// After the write's shape is known (`plan_write_rows`): how it touches its table, and
    /// what a single-row insert into a parent may teach.
    pub(super) fn plan_fk_write(
        &mut self,
        shape: &Shape,
        target: &(String, String),
        known: Option<&[(String, Vec<String>)]>,
    ) {
        let Some(kind) = shape.write_kind() else {
            return;
        };
        self.st.fk.how = Some((target.clone(), Touch::of(&kind)));
        let WriteKind::Insert { columns, rows, .. } = kind else {
            return;
        };
        let (Some(known), 1) = (known, rows) else {
            return;
        };
        // Inside a transaction the row may never commit; a temporary table may shadow the
        // parent's name.
        if self.st.txn.in_transaction() || !self.st.temp_tables.is_empty() {
            return;
        }
        let maps = self
            .shared
            .cache
            .versions()
            .parents
            .maps_of(&target.0, &target.1);
        let catalog = &self.shared.catalog;
        let auto_increment =
            |pk: &str| catalog.column(target, pk).is_some_and(|c| c.auto_increment);
        if let Some(learn) = Learn::from_insert(&maps, known, columns.as_deref(), auto_increment) {
            self.st.fk.learn = Some(learn);
        }
    }

    /// Just before a statement with writes is sent: its window, and its standing with the
    /// parent maps.
    pub(super) fn fk_begin(&mut self) {
        let p = &self.st.pending;
        if p.is_empty() || !self.shared.config().invalidation.derived_slices {
            self.st.fk.how = None;
            return;
        }
        let parents = &self.shared.cache.versions().parents;
        // The window first: this statement's own move must break it.
        self.st.fk.window = Some(parents.window());
        let how = self.st.fk.how.take();
        let mut tables: Vec<((String, String), Touch)> = Vec::new();
        for t in p.tables.iter().chain(p.rows.iter().map(|(t, _)| t)) {
            let name = (t.schema.clone(), t.name.clone());
            let touch = match &how {
                Some((n, touch)) if *n == name => touch.clone(),
                _ => Touch::Other,
            };
            tables.push((name, touch));
        }
        let everything = p.all || !p.schemas.is_empty() || p.ddl;
        self.st.fk.tokens.extend(parents.begin(&tables, everything));
    }

    /// At a child write's OK outside a transaction, before its invalidation: the parent
    /// values of its rows' fk values, asked of the server (`Catalog::parent_values`), per
    /// child table with known rows (indexed as `pending.rows`): each derived column whose
    /// every fk value the server answered, with the slice keys of the answers.
    ///
    /// Why the server and not the maps: a parent row moved from elsewhere is seen only when
    /// the binlog delivers it, and until then a mapping learned earlier still names the old
    /// value; a child write bumping that would leave the entries of the row's new slice
    /// stale after its own OK. The server answers after the write committed, so its answer
    /// is the parent's value at a time after the commit: an entry whose slice the row was in
    /// then is bumped, and one whose slice the row moves to later is invalidated by that
    /// move's own write to the parent (which the entry stamps). The answers are also learned
    /// (under the write's window, `cache::fkmap`) for the binlog's child events.
    pub(super) async fn fk_lookup(&mut self, in_transaction: bool) -> Vec<Answers> {
        let Some(w) = self.st.fk.window else {
            return Vec::new();
        };
        if in_transaction || self.st.pending.rows.is_empty() {
            return Vec::new();
        }
        let cfg = self.shared.config();
        if !cfg.invalidation.derived_lookups {
            return Vec::new();
        }
        let learn = cfg.invalidation.parent_map_entries > 0;
        let parents = self.shared.cache.versions().parents.clone();
        let mut out = Vec::with_capacity(self.st.pending.rows.len());
        for (t, known) in &self.st.pending.rows {
            let mut answers = Answers::new();
            for name in t.slice_columns() {
                let Some((fk, key)) = fkmap::parse_derived(&name) else {
                    continue;
                };
                let Some((_, fks)) = known.iter().find(|(c, _)| c == fk) else {
                    continue;
                };
                let Some(xs) = fkmap::fk_values(fks) else {
                    continue;
                };
                if xs.is_empty() || xs.len() > 64 {
                    continue;
                }
                let parent = (key.schema.clone(), key.table.clone());
                let Some(found) = self
                    .shared
                    .catalog
                    .parent_values(&parent, &key.pk, &key.col, &xs)
                    .await
                else {
                    continue;
                };
                parents
                    .stats
                    .lookups
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // A child row whose parent the server does not hold (foreign key checks
                // off) is left to the fallback.
                let all = xs.iter().all(|x| found.iter().any(|(y, _)| y == x));
                let mut keys: Vec<String> = found.iter().filter_map(|(_, v)| v.clone()).collect();
                keys.sort();
                keys.dedup();
                if learn {
                    for (x, v) in found {
                        parents.learn(&w, &key, x, v);
                    }
                }
                if all {
                    answers.push((name, keys));
                }
            }
            out.push(answers);
        }
        out
    }

    /// At the write's OK, before its invalidation is applied: the derived slices of each
    /// child table with known rows, from the server's answers (`fk_lookup`). A derived
    /// column left out is bumped as unknown (every derived slice of the table).
    pub(super) fn fk_child_rows(&mut self, answers: Vec<Answers>) {
        if self.st.fk.window.is_none() || self.st.pending.rows.is_empty() {
            return;
        }
        let parents = self.shared.cache.versions().parents.clone();
        let mut answers = answers.into_iter();
        for (t, known) in self.st.pending.rows.iter_mut() {
            let answered = answers.next().unwrap_or_default();
            let registered = t
                .slice_columns()
                .into_iter()
                .filter(|c| c.starts_with('\0'))
                .count();
            if registered == 0 || known.iter().any(|(c, _)| c.starts_with('\0')) {
                continue;
            }
            let n = answered.len();
            let stats = &parents.stats;
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            stats.fallbacks.fetch_add((registered - n) as u64, relaxed);
            if n == 0 {
                continue;
            }
            let rows: usize = answered
                .iter()
                .filter_map(|(name, _)| {
                    let (fk, _) = fkmap::parse_derived(name)?;
                    Some(known.iter().find(|(c, _)| c == fk)?.1.len())
                })
                .sum();
            stats.mapped.fetch_add(rows as u64, relaxed);
            let mut all: Vec<(String, Vec<String>)> = known.to_vec();
            all.extend(answered);
            *known = Arc::from(all);
        }
    }

    /// After the write's invalidation was applied: what a parent insert teaches.
    pub(super) fn fk_learn(&mut self, in_transaction: bool) {
        let (Some(learn), ok) = (self.st.fk.learn.take(), self.st.fk.ok.take()) else {
            return;
        };
        let (Some(w), Some(ok)) = (self.st.fk.window, ok) else {
            return;
        };
        let Some(x) = learn.inserted_pk(&ok, in_transaction) else {
            return;
        };
        let parents = &self.shared.cache.versions().parents;
        parents.set_max_entries(self.shared.config().invalidation.parent_map_entries);
        for (key, value) in learn.values {
            parents.learn(&w, &key, x, value);
        }
    }

    /// The response ended: a write outside a transaction is finished; inside one, its
    /// standing lasts until the transaction ends.
    pub(super) fn fk_end(&mut self) {
        let tokens = std::mem::take(&mut self.st.fk.tokens);
        match self.st.txn.writes_mut() {
            Some(txn) => txn.fk_tokens.extend(tokens),
            None => drop(tokens),
        }
        self.st.fk.window = None;
        self.st.fk.how = None;
        self.st.fk.learn = None;
        self.st.fk.ok = None;
    }
}

/// A packet of the response: the OK of a statement that may teach the parent maps.
pub(super) fn note_ok(fk: &mut FkState, resp: &crate::protocol::response::Response, p: &[u8]) {
    if fk.learn.is_some() && resp.status_here.is_some() && p.first() == Some(&0) {
        fk.ok = crate::protocol::packets::parse_ok(p);
    }
}
