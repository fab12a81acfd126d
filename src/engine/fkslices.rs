//! Foreign-key-derived slices (`cache::fkmap` has the rules and the races): a read's derived
//! slices, a write's standing with the parent maps (taken before it is sent, finished after
//! its invalidation or its transaction), the mappings a parent insert teaches, and the
//! derived slices a child write bumps, with the parent values it asks the server for (the
//! session asks them: [`asks`], then [`answered`]).

use std::sync::Arc;

use super::slices::Planner;
use super::state::SessionState;
use crate::analysis::slices::{ColumnInfo, Lit, Shape, WriteKind};
use crate::analysis::TableRef;
use crate::cache::fkmap::{self, Learn, MapKey, ParentMaps, Touch, Window};
use crate::cache::sliceplans;
use crate::cache::versions::{DerivedPending, SlicePlan, Versions};
use crate::cache::TableHandle;
use crate::config::InvalidationConfig;
use crate::invalidation::catalog::Lookup;
use crate::shared::Shared;
use std::sync::atomic::Ordering::Relaxed;

/// Per derived column of a child table (its name, as `fkmap::derived_column` makes it), the
/// slice keys of the parent values its written rows name.
pub type Answers = Vec<(String, Vec<String>)>;

impl Planner<'_> {
    /// The derived slices of a read, for the tables it would read whole (`rest`): each one
    /// the statement proves it reads only through a parent's pinned rows becomes a sliced
    /// table of its derived column. Registers maps and columns before the caller reads the
    /// stamps. `(rest, sliced)` are the read's tables as planned so far.
    pub fn plan_derived(
        &self,
        st: &SessionState,
        (shape, text): (&Shape, &str),
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
        params: &dyn Fn(usize) -> Option<Lit>,
        (rest, sliced): (&mut Vec<TableHandle>, &mut Vec<SlicePlan>),
    ) {
        if rest.is_empty() || !self.cfg.invalidation.derived_slices {
            return;
        }
        let catalog = self.catalog;
        let pk = |t: &TableRef| {
            let q = st.qualify(t.schema.as_deref(), &t.name)?;
            catalog.primary_key(&q)
        };
        let derived = shape.derived_slices(text, columns, params, &pk);
        if derived.is_empty() {
            return;
        }
        let versions = self.versions;
        for d in derived {
            let (Some(child), Some(parent)) = (
                st.qualify(d.child.schema.as_deref(), &d.child.name),
                st.qualify(d.parent.schema.as_deref(), &d.parent.name),
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
    pub fn plan_fk_write(
        &self,
        st: &mut SessionState,
        shape: &Shape,
        target: &(String, String),
        known: Option<&[(String, Vec<String>)]>,
    ) {
        let Some(kind) = shape.write_kind() else {
            return;
        };
        st.fk.how = Some((target.clone(), Touch::of(&kind)));
        let WriteKind::Insert { columns, rows, .. } = kind else {
            return;
        };
        let (Some(known), 1) = (known, rows) else {
            return;
        };
        // Inside a transaction the row may never commit; a temporary table may shadow the
        // parent's name.
        if st.txn.in_transaction() || !st.temp_tables.is_empty() {
            return;
        }
        let maps = self.versions.parents.maps_of(&target.0, &target.1);
        let catalog = self.catalog;
        let auto_increment =
            |pk: &str| catalog.column(target, pk).is_some_and(|c| c.auto_increment);
        if let Some(learn) = Learn::from_insert(&maps, known, columns.as_deref(), auto_increment) {
            st.fk.learn = Some(learn);
        }
    }
}

/// Just before a statement with writes is sent: its window, and its standing with the
/// parent maps. `derived_slices` (the configuration's) is asked only of a statement with
/// writes.
pub fn begin(
    st: &mut SessionState,
    parents: &Arc<ParentMaps>,
    derived_slices: impl FnOnce() -> bool,
) {
    let p = &st.pending;
    if p.is_empty() || !derived_slices() {
        st.fk.how = None;
        return;
    }
    // The window first: this statement's own move must break it.
    st.fk.window = Some(parents.window());
    let how = st.fk.how.take();
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
    st.fk.tokens.extend(parents.begin(&tables, everything));
}

/// At a child write's OK outside a transaction, before its invalidation: the parent
/// values of its rows' fk values to ask of the server (`Catalog::parent_values`), per
/// child table with known rows (indexed as `pending.rows`), with the window their
/// answers are learned under; None when nothing is asked. The session asks them and
/// hands each answer to [`answered`].
///
/// Why the server and not the maps: a parent row moved from elsewhere is seen only when
/// the binlog delivers it, and until then a mapping learned earlier still names the old
/// value; a child write bumping that would leave the entries of the row's new slice
/// stale after its own OK. The server answers after the write committed, so its answer
/// is the parent's value at a time after the commit: an entry whose slice the row was in
/// then is bumped, and one whose slice the row moves to later is invalidated by that
/// move's own write to the parent (which the entry stamps). The answers are also learned
/// (under the write's window, `cache::fkmap`) for the binlog's child events.
pub fn asks(
    st: &SessionState,
    in_transaction: bool,
    cfg: &InvalidationConfig,
) -> Option<(Window, Vec<Vec<Ask>>)> {
    let w = st.fk.window?;
    // A session that holds (or may hold) table locks asks nothing: qcache's own connection
    // would wait on the server for a WRITE lock of the parent until the lookup's timeout
    // (1 s), holding the client's OK (`AfterOk`) or the derived slices (`Deferred`) that
    // long; its child writes bump every derived slice of their tables instead.
    if in_transaction || st.txn.table_locks() || st.pending.rows.is_empty() || !cfg.derived_lookups
    {
        return None;
    }
    let mut out = Vec::with_capacity(st.pending.rows.len());
    for (t, known) in &st.pending.rows {
        let mut asks = Vec::new();
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
            asks.push(Ask { name, key, xs });
        }
        out.push(asks);
    }
    Some((w, out))
}

/// When a child write's parent lookup ([`asks`]) is asked, relative to the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Not asked: the write bumps every derived slice of its table.
    Off,
    /// After the server's OK, before the client's: the answer is the parent's value at a
    /// time after the write committed.
    AfterOk,
    /// Sent as soon as the write is forwarded, on qcache's own connection, and used at the
    /// OK only if [`early_verdict`] says so.
    WithWrite,
    /// After the server's OK, on qcache's own connection, while the client already has its
    /// OK: the derived columns asked are pending from before that OK until the answer's
    /// bumps are made (`cache::versions::DerivedPending`), and no entry stamping them is
    /// served meanwhile.
    Deferred,
}

/// Where writes other than this instance's own may come from, for [`timing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Elsewhere {
    /// A binlog tail runs (not off).
    pub tail: bool,
    /// L2 is on: other instances serve hits from what this one's bumps raise.
    pub l2: bool,
}

/// The rule for [`Timing`] (the session does the I/O): `with_write` is
/// `invalidation.derived_lookups_with_write`, `deferred`
/// `invalidation.derived_lookups_deferred`.
///
/// Why a lookup runs beside the write only when the configuration says every write to a
/// parent goes through this instance: an answer read before the write committed names the
/// parent's value then, and the derived slice it bumps must be the one the child row is in
/// at the commit. A parent row moved between the lookup's read and the commit leaves an
/// entry of the row's new slice stale after the child write's OK: filled after the move
/// and before the commit, it stamps the parent *with* the move, so the move's own bump does
/// not reach it, and the child write bumps the old slice. A move through this qcache is
/// counted before it is sent, so the write's window shows it and the answer is not used
/// ([`early_verdict`]). A move from elsewhere (a direct write, another instance's through
/// L2) is seen only when the binlog or the bump channel delivers it, possibly after the OK,
/// or never with neither: no window can show it, so the lookup must read after the commit.
/// A tail or L2 running means writes from elsewhere are expected: never beside the write.
///
/// Why the client's OK may go before the lookup (`Deferred`): the lookup still reads after
/// the commit, so what it answers is what `AfterOk`'s would be; only the bump comes later,
/// and until it is made the columns' pending counts keep every entry that stamps them from
/// being served (`cache::versions::DerivedPending` has the argument). Those counts are this
/// instance's: with L2 on, another instance serves from what this one raises in Redis, and
/// its hits cannot see them, so the raise must precede the OK (`AfterOk`). A tail alone
/// changes nothing: the cache it feeds is this instance's, and its event for the write
/// arrives later and bumps, through the parent maps, the slices of what they hold, else the
/// derived column's unknown version: counters only move up, so a bump from it, before,
/// inside or after the window, only drops more. A parent row changed or inserted in the
/// same uncommitted transaction is invisible to another connection: inside a transaction
/// nothing is asked (`Off`: every derived slice of the table), as before.
pub fn timing(
    in_transaction: bool,
    lookups: bool,
    with_write: bool,
    deferred: bool,
    elsewhere: Elsewhere,
) -> Timing {
    if in_transaction || !lookups {
        Timing::Off
    } else if with_write && !elsewhere.tail && !elsewhere.l2 {
        Timing::WithWrite
    } else if deferred && !elsewhere.l2 {
        Timing::Deferred
    } else {
        Timing::AfterOk
    }
}

/// The timing of a lookup asked at an OK or final ERR with `new_status` (None for an
/// ERR): [`timing`], except that only a response's last OK defers. An earlier one's
/// answers stay in the write's rows for the later OKs of the same response to bump again.
pub fn timing_at(
    cfg: &InvalidationConfig,
    in_transaction: bool,
    new_status: Option<u16>,
    elsewhere: Elsewhere,
) -> Timing {
    use crate::protocol::packets::status::MORE_RESULTS;
    let last = new_status.is_some_and(|s| s & MORE_RESULTS == 0);
    let with_write = cfg.derived_lookups_with_write;
    let deferred = cfg.derived_lookups_deferred && last;
    timing(
        in_transaction,
        cfg.derived_lookups,
        with_write,
        deferred,
        elsewhere,
    )
}

/// Just after a write was forwarded: the lookups to send beside it, when [`timing`] says
/// [`Timing::WithWrite`] and it has any to ask.
pub fn early_asks(
    st: &SessionState,
    cfg: &InvalidationConfig,
    elsewhere: Elsewhere,
) -> Option<Vec<Vec<Ask>>> {
    if st.pending.rows.is_empty() || !cfg.derived_lookups_with_write {
        return None;
    }
    let in_txn = st.txn.in_transaction();
    let timing = timing(
        in_txn,
        cfg.derived_lookups,
        cfg.derived_lookups_with_write,
        cfg.derived_lookups_deferred,
        elsewhere,
    );
    if timing != Timing::WithWrite {
        return None;
    }
    let (_, asks) = asks(st, in_txn, cfg)?;
    (!asks.iter().all(|t| t.is_empty())).then_some(asks)
}

/// How long past its write's OK a lookup sent beside the write is waited for before the
/// write falls back ([`EarlyVerdict::Slower`]): it started with the write on a connection it
/// did not wait for, so this bounds what it can add to the OK, and a parent lookup on an
/// idle server answers well within it.
pub const EARLY_GRACE: std::time::Duration = std::time::Duration::from_millis(5);

/// What becomes of a lookup sent beside the write ([`Timing::WithWrite`]) at its OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyVerdict {
    /// Its answers are used as an `AfterOk` lookup's would be.
    Use,
    /// Not answered within [`EARLY_GRACE`] of the OK: the write falls back (every derived
    /// slice of its table), counted in `Qcache_parent_lookup_skips`.
    Slower,
    /// Answered, but a move through qcache started, was in flight or finished since the
    /// write's window, or the question changed (the write's OK put it in a transaction):
    /// the answer may name a value the row no longer had at the commit. Falls back.
    Doubted,
}

/// The rule for a lookup sent beside its write, at the write's OK: `answered` (its answer
/// is in), `same` (the write asks at its OK what it asked when sent: outside a
/// transaction, the same rows) and `window_holds` (`ParentMaps::window_holds` of the
/// write's window). A lookup slower than the write by more than [`EARLY_GRACE`] falls
/// back.
pub fn early_verdict(answered: bool, same: bool, window_holds: bool) -> EarlyVerdict {
    if !same || !window_holds {
        EarlyVerdict::Doubted
    } else if !answered {
        EarlyVerdict::Slower
    } else {
        EarlyVerdict::Use
    }
}

/// One question of [`asks`]: the parent rows of `xs` in the parent `key` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The derived column of the child table.
    pub name: String,
    pub key: MapKey,
    /// The child rows' fk values.
    pub xs: Vec<i128>,
}

/// The server's answer to `ask` (pairs of the parent's primary key and the column's
/// slice key): learned under `w` when `learn`, and the derived column with the slice keys
/// of the answers when the server holds every row's parent (a child row whose parent it
/// does not hold, foreign key checks off, is left to the fallback).
pub fn answered(
    parents: &ParentMaps,
    w: &Window,
    learn: bool,
    ask: Ask,
    found: Vec<(i128, Option<String>)>,
) -> Option<(String, Vec<String>)> {
    parents
        .stats
        .lookups
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let all = ask.xs.iter().all(|x| found.iter().any(|(y, _)| y == x));
    let mut keys: Vec<String> = found.iter().filter_map(|(_, v)| v.clone()).collect();
    keys.sort();
    keys.dedup();
    if learn {
        for (x, v) in found {
            parents.learn(w, &ask.key, x, v);
        }
    }
    all.then_some((ask.name, keys))
}

/// The questions of `asks` as the catalog asks them (`Catalog::parent_lookups`).
pub fn questions(asks: &[Vec<Ask>]) -> Vec<Vec<(MapKey, Vec<i128>)>> {
    asks.iter()
        .map(|t| t.iter().map(|a| (a.key.clone(), a.xs.clone())).collect())
        .collect()
}

/// A lookup sent beside its write, at the write's OK: its answers (None while not in)
/// when [`early_verdict`] uses them; one slower than the write is counted as skipped.
pub fn early_answers(
    parents: &ParentMaps,
    w: &Window,
    got: Option<Vec<Vec<Lookup>>>,
    same: bool,
) -> Option<Vec<Vec<Lookup>>> {
    match early_verdict(got.is_some(), same, parents.window_holds(w)) {
        EarlyVerdict::Use => got,
        EarlyVerdict::Slower => {
            parents.stats.skips.fetch_add(1, Relaxed);
            None
        }
        EarlyVerdict::Doubted => None,
    }
}

/// What the server's answers to `asks` (`found`, in the same order) give per child
/// table ([`answered`]); a lookup that found no idle connection is counted as skipped and
/// left to the fallback, as is one that failed.
pub fn all_answered(
    parents: &ParentMaps,
    w: &Window,
    learn: bool,
    asks: Vec<Vec<Ask>>,
    found: Vec<Vec<Lookup>>,
) -> Vec<Answers> {
    let mut out = Vec::with_capacity(asks.len());
    for (table, found) in asks.into_iter().zip(found) {
        let mut answers = Answers::new();
        for (ask, found) in table.into_iter().zip(found) {
            match found {
                Lookup::Found(found) => answers.extend(answered(parents, w, learn, ask, found)),
                Lookup::Busy => {
                    parents.stats.skips.fetch_add(1, Relaxed);
                }
                Lookup::Failed => {}
            }
        }
        out.push(answers);
    }
    out
}

/// Where a write's lookup goes at its OK or final ERR ([`at_ok`]).
#[derive(Debug)]
pub enum AtOk {
    /// Nothing to ask.
    Nothing,
    /// Asked now, before the client's OK (or, sent beside the write, judged:
    /// [`early_answers`]), learned when `learn`.
    Ask(Window, Vec<Vec<Ask>>, bool),
    /// Asked after the client's OK, its columns pending ([`defer`]): the session spawns it.
    Later(Later),
}

/// The rule at a write's OK or final ERR (`new_status` None): [`asks`], then
/// [`timing_at`] and [`defer`]. `early`: a lookup was sent beside the write.
pub fn at_ok(shared: &Shared, st: &mut SessionState, new_status: Option<u16>, early: bool) -> AtOk {
    let in_transaction = st.txn.writes_in_transaction(new_status);
    let cfg = shared.config();
    let Some((w, asks)) = asks(st, in_transaction, &cfg.invalidation) else {
        return AtOk::Nothing;
    };
    let learn = cfg.invalidation.parent_map_entries > 0;
    let when = timing_at(
        &cfg.invalidation,
        in_transaction,
        new_status,
        elsewhere(shared),
    );
    if early || when != Timing::Deferred || !deferrable(st, &asks) {
        return AtOk::Ask(w, asks, learn);
    }
    AtOk::Later(defer(st, &shared.cache.versions_arc(), (w, asks), learn))
}

/// Asks the server `asks` now (`Shared::parent_lookups`, qcache's own connection).
pub async fn ask(shared: &Shared, asks: &[Vec<Ask>]) -> Vec<Vec<Lookup>> {
    shared.parent_lookups(&questions(asks)).await
}

/// Where writes from elsewhere come from, for this instance.
pub fn elsewhere(shared: &Shared) -> Elsewhere {
    Elsewhere {
        tail: shared.binlog.as_ref().is_some_and(|b| !b.is_off()),
        l2: shared.l2.is_some(),
    }
}

/// A child write's lookup asked after its client's OK ([`Timing::Deferred`]): the
/// questions, the derived columns it holds pending, and the window its answers are learned
/// under. Dropped without [`answered`](Later::answered) (its task ended, the lookup
/// failed), its columns fall back: every derived slice of each is bumped, then cleared.
#[derive(Debug)]
pub struct Later {
    w: Window,
    asks: Vec<Vec<Ask>>,
    /// Per child table of `asks` (in order): the table and how many rows each fk names.
    tables: Vec<(TableHandle, Vec<(String, usize)>)>,
    pending: DerivedPending,
    parents: Arc<ParentMaps>,
    learn: bool,
    /// Last: counted out of `Qcache_parent_lookups_pending` after `pending` cleared.
    _in_flight: InFlight,
}

/// One deferred lookup in `Qcache_parent_lookups_pending`, from [`defer`] to its end.
#[derive(Debug)]
struct InFlight(Arc<ParentMaps>);

impl InFlight {
    fn new(parents: &Arc<ParentMaps>) -> Self {
        parents.stats.deferred.fetch_add(1, Relaxed);
        parents.stats.pending.fetch_add(1, Relaxed);
        InFlight(parents.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.stats.pending.fetch_sub(1, Relaxed);
    }
}

/// At a child write's OK under [`Timing::Deferred`], before the write's invalidation is
/// applied: marks each derived column `asks` names pending (`DerivedPending::mark`) and
/// lists it among the write's known rows with no slice, so that the write's own bumps
/// leave it to the lookup; a derived column not asked is left out, and falls back at the
/// OK as before. Only when [`deferrable`].
pub fn defer(
    st: &mut SessionState,
    versions: &Arc<Versions>,
    (w, asks): (Window, Vec<Vec<Ask>>),
    learn: bool,
) -> Later {
    let rows = &mut st.pending.rows;
    let marked: Vec<(TableHandle, Vec<String>)> = rows
        .iter()
        .zip(&asks)
        .map(|((t, _), a)| (t.clone(), a.iter().map(|a| a.name.clone()).collect()))
        .collect();
    let pending = DerivedPending::mark(versions.clone(), &marked);
    let mut tables = Vec::with_capacity(rows.len());
    for ((t, known), (_, names)) in rows.iter_mut().zip(&marked) {
        let count = |name: &str| {
            let (fk, _) = fkmap::parse_derived(name)?;
            Some(known.iter().find(|(c, _)| c == fk)?.1.len())
        };
        let sizes = names
            .iter()
            .map(|n| (n.clone(), count(n).unwrap_or(0)))
            .collect();
        tables.push((t.clone(), sizes));
        let registered = t
            .slice_columns()
            .iter()
            .filter(|c| c.starts_with('\0'))
            .count();
        let stats = &versions.parents.stats;
        stats
            .fallbacks
            .fetch_add(registered.saturating_sub(names.len()) as u64, Relaxed);
        if !names.is_empty() {
            let mut all: Vec<(String, Vec<String>)> = known.to_vec();
            all.extend(names.iter().map(|n| (n.clone(), Vec::new())));
            *known = Arc::from(all);
        }
    }
    Later {
        w,
        asks,
        tables,
        pending,
        parents: versions.parents.clone(),
        learn,
        _in_flight: InFlight::new(&versions.parents),
    }
}

/// Whether [`defer`] has anything to hold pending: something is asked, and no earlier OK
/// of the response already named the rows' derived slices.
pub fn deferrable(st: &SessionState, asks: &[Vec<Ask>]) -> bool {
    let derived = |k: &[(String, Vec<String>)]| k.iter().any(|(c, _)| c.starts_with('\0'));
    !st.pending.rows.iter().any(|(_, k)| derived(k)) && asks.iter().any(|a| !a.is_empty())
}

impl Later {
    /// What the lookup asks (`Catalog::parent_lookups`).
    pub fn questions(&self) -> Vec<Vec<(MapKey, Vec<i128>)>> {
        questions(&self.asks)
    }

    /// Asks the server (`Shared::parent_lookups`, qcache's own connection) and applies
    /// the answer ([`answered`](Self::answered)): what the session spawns after the OK.
    pub async fn run(self, shared: Arc<Shared>) {
        let found = shared.parent_lookups(&self.questions()).await;
        self.answered(found);
    }

    /// The derived columns it holds pending, by table and name.
    pub fn columns(&self) -> impl Iterator<Item = (&TableHandle, &str)> {
        self.pending.columns()
    }

    /// The server's answers (`found`, in the order asked): bumps the slices they name, every
    /// derived slice of a column they leave out ([`all_answered`]), then clears the
    /// columns' pending counts. Returns the slice counters bumped.
    pub fn answered(self, found: Vec<Vec<Lookup>>) -> u64 {
        let Later {
            w,
            asks,
            tables,
            pending,
            parents,
            learn,
            _in_flight,
        } = self;
        let answers = all_answered(&parents, &w, learn, asks, found);
        let stats = &parents.stats;
        let mut slices: Vec<(&TableHandle, &str, Vec<String>)> = Vec::new();
        for ((t, sizes), answers) in tables.iter().zip(&answers) {
            stats.fallbacks.fetch_add(
                (sizes.len() - answers.len().min(sizes.len())) as u64,
                Relaxed,
            );
            for (name, keys) in answers {
                let rows = sizes.iter().find(|(n, _)| n == name).map_or(0, |(_, r)| *r);
                stats.mapped.fetch_add(rows as u64, Relaxed);
                slices.push((t, name, keys.clone()));
            }
        }
        pending.finish(|t, name| {
            slices
                .iter()
                .find(|(u, n, _)| std::ptr::eq(&***u, t) && *n == name)
                .map(|(_, _, k)| k.clone())
        })
    }
}

/// At the write's OK, before its invalidation is applied: the derived slices of each
/// child table with known rows, from the server's answers (`asks`, `answered`). A derived
/// column left out is bumped as unknown (every derived slice of the table).
pub fn child_rows(st: &mut SessionState, parents: &ParentMaps, answers: Vec<Answers>) {
    if st.fk.window.is_none() || st.pending.rows.is_empty() {
        return;
    }
    let mut answers = answers.into_iter();
    for (t, known) in st.pending.rows.iter_mut() {
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
pub fn learn(st: &mut SessionState, parents: &ParentMaps, max_entries: u64, in_transaction: bool) {
    let (Some(learn), ok) = (st.fk.learn.take(), st.fk.ok.take()) else {
        return;
    };
    let (Some(w), Some(ok)) = (st.fk.window, ok) else {
        return;
    };
    let Some(x) = learn.inserted_pk(&ok, in_transaction) else {
        return;
    };
    parents.set_max_entries(max_entries);
    for (key, value) in learn.values {
        parents.learn(&w, &key, x, value);
    }
}

/// The response ended: a write outside a transaction is finished; inside one, its
/// standing lasts until the transaction ends.
pub fn end(st: &mut SessionState) {
    let tokens = std::mem::take(&mut st.fk.tokens);
    match st.txn.writes_mut() {
        Some(txn) => txn.fk_tokens.extend(tokens),
        None => drop(tokens),
    }
    st.fk.window = None;
    st.fk.how = None;
    st.fk.learn = None;
    st.fk.ok = None;
}

/// A packet of the response: the OK of a statement that may teach the parent maps.
pub fn note_ok(
    fk: &mut super::state::FkState,
    resp: &crate::protocol::response::Response,
    p: &[u8],
) {
    if fk.learn.is_some() && resp.status_here.is_some() && p.first() == Some(&0) {
        fk.ok = crate::protocol::packets::parse_ok(p);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::World;

    /// When a child write's parent lookup is asked: one row per rule.
    #[test]
    fn lookup_timing() {
        use super::Elsewhere;
        use super::Timing::*;
        let none = Elsewhere::default();
        let tail = Elsewhere {
            tail: true,
            l2: false,
        };
        let l2 = Elsewhere {
            tail: true,
            l2: true,
        };
        type Row = (
            &'static str,
            bool,
            bool,
            bool,
            bool,
            Elsewhere,
            super::Timing,
        );
        let rows: &[Row] = &[
            // (why, in a transaction, lookups on, declared with_write, deferred, elsewhere,
            // timing)
            (
                "in a transaction: another connection cannot see its rows",
                true,
                true,
                true,
                true,
                none,
                Off,
            ),
            ("lookups off", false, false, true, true, none, Off),
            (
                "default, no tail: the client's OK goes first, the slices pending",
                false,
                true,
                false,
                true,
                none,
                Deferred,
            ),
            (
                "default, a tail: the same (the pending mark is this instance's own)",
                false,
                true,
                false,
                true,
                tail,
                Deferred,
            ),
            (
                "L2 on: other instances cannot see the mark, the raise precedes the OK",
                false,
                true,
                false,
                true,
                l2,
                AfterOk,
            ),
            (
                "deferring turned off: after the server's answer",
                false,
                true,
                false,
                false,
                tail,
                AfterOk,
            ),
            (
                "declared, but a tail runs: writes from elsewhere",
                false,
                true,
                true,
                true,
                tail,
                Deferred,
            ),
            ("declared, L2 on", false, true, true, true, l2, AfterOk),
            (
                "declared, only writes through qcache: beside the write",
                false,
                true,
                true,
                true,
                none,
                WithWrite,
            ),
        ];
        for (why, txn, on, with, deferred, seen, want) in rows {
            assert_eq!(
                super::timing(*txn, *on, *with, *deferred, *seen),
                *want,
                "{why}"
            );
        }
    }

    /// Only a response's last OK defers: one row per status.
    #[test]
    fn only_the_last_ok_defers() {
        use super::Timing::*;
        use crate::protocol::packets::status::{AUTOCOMMIT, MORE_RESULTS};
        let cfg = crate::config::InvalidationConfig::default();
        let rows: &[(&str, Option<u16>, super::Timing)] = &[
            ("the last OK", Some(AUTOCOMMIT), Deferred),
            (
                "more results follow",
                Some(AUTOCOMMIT | MORE_RESULTS),
                AfterOk,
            ),
            ("a final ERR", None, AfterOk),
        ];
        for (why, status, want) in rows {
            let got = super::timing_at(&cfg, false, *status, super::Elsewhere::default());
            assert_eq!(got, *want, "{why}");
        }
    }

    /// A deferred lookup ([`super::defer`]): its columns pending from before the OK, the
    /// write's own rows naming them with no slice, and what each kind of answer bumps
    /// before the columns clear. One row per answer.
    #[test]
    fn deferred_lookup_marks_then_bumps_what_it_answers() {
        use crate::cache::fkmap::{derived_column, MapKey};
        use crate::cache::versions::{ColumnReads, SlicePlan, Stamps, Versions};
        use crate::invalidation::catalog::Lookup;
        use std::sync::atomic::Ordering::Relaxed;
        use std::sync::Arc;
        type Row = (&'static str, Option<Lookup>, bool, bool);
        let rows: Vec<Row> = vec![
            // (why, the answer (None: the task ended unanswered), r1's entry then, r2's)
            (
                "the parent is in r1",
                Some(Lookup::Found(vec![(1, Some("r1".into()))])),
                false,
                true,
            ),
            (
                "the parent is missing: every derived slice",
                Some(Lookup::Found(vec![])),
                false,
                false,
            ),
            ("no idle connection", Some(Lookup::Busy), false, false),
            ("dropped unanswered", None, false, false),
        ];
        for (why, found, r1, r2) in rows {
            let w = World::new(true);
            let v = Arc::new(Versions::new());
            let t = v.table("db", "orders");
            let key = MapKey {
                schema: "db".into(),
                table: "customers".into(),
                pk: "id".into(),
                col: "region".into(),
            };
            let name = derived_column("customer_id", &key);
            let col = v.register(&t, &name);
            let stamps = |k: &str| {
                let plan = SlicePlan {
                    table: t.clone(),
                    slices: vec![Versions::slice_index(&t, &name, k)],
                    column: col.clone(),
                    by_columns: false,
                    slice_columns: Vec::new(),
                };
                Stamps::capture_sliced(&v, &[], &[plan], &ColumnReads::default())
            };
            let (s1, s2) = (stamps("r1"), stamps("r2"));
            let mut st = w.session(Some("db"));
            let known: Vec<(String, Vec<String>)> = vec![("customer_id".into(), vec!["1".into()])];
            st.pending.rows.push((t.clone(), Arc::from(known)));
            let asks = vec![vec![super::Ask {
                name: name.clone(),
                key: key.clone(),
                xs: vec![1],
            }]];
            assert!(super::deferrable(&st, &asks), "{why}: deferrable");
            let later = super::defer(&mut st, &v, (v.parents.window(), asks.clone()), false);
            assert_eq!(col.pending(), 1, "{why}: pending before the OK");
            assert_eq!(v.parents.stats.pending.load(Relaxed), 1, "{why}: gauge");
            let named = st.pending.rows[0]
                .1
                .iter()
                .find(|(c, _)| *c == name)
                .cloned();
            assert_eq!(
                named,
                Some((name.clone(), Vec::new())),
                "{why}: no slice at the OK"
            );
            assert!(
                !super::deferrable(&st, &asks),
                "{why}: a later OK does not defer again"
            );
            assert!(
                !s1.is_current(&v) && !s2.is_current(&v),
                "{why}: not served meanwhile"
            );
            assert_eq!(later.columns().count(), 1, "{why}: one column");
            match found {
                Some(f) => {
                    later.answered(vec![vec![f]]);
                }
                None => drop(later),
            }
            assert_eq!(col.pending(), 0, "{why}: cleared");
            assert_eq!(v.parents.stats.pending.load(Relaxed), 0, "{why}: gauge");
            assert_eq!(s1.is_current(&v), r1, "{why}: r1");
            assert_eq!(s2.is_current(&v), r2, "{why}: r2");
        }
    }

    /// A lookup sent beside its write, at the write's OK: one row per rule.
    #[test]
    fn early_lookup_verdict() {
        use super::EarlyVerdict::*;
        let rows: &[(&str, bool, bool, bool, super::EarlyVerdict)] = &[
            // (why, answered, same question, window holds, verdict)
            ("answered, nothing moved", true, true, true, Use),
            (
                "slower than the write: never waited for",
                false,
                true,
                true,
                Slower,
            ),
            (
                "a move through qcache since the window",
                true,
                true,
                false,
                Doubted,
            ),
            ("a move, and not answered yet", false, true, false, Doubted),
            (
                "the OK put the write in a transaction",
                true,
                false,
                true,
                Doubted,
            ),
        ];
        for (why, answered, same, holds, want) in rows {
            assert_eq!(
                super::early_verdict(*answered, *same, *holds),
                *want,
                "{why}"
            );
        }
    }

    /// The server's answers to a write's lookups, per child table: one row per kind of
    /// answer (what it bumps, and whether it counts a lookup or a skip).
    #[test]
    fn what_each_answer_gives() {
        use crate::cache::fkmap::{MapKey, ParentMaps};
        use crate::invalidation::catalog::Lookup;
        use std::sync::atomic::Ordering::Relaxed;
        type Row = (&'static str, Lookup, Option<Vec<&'static str>>, u64, u64);
        let rows: Vec<Row> = vec![
            // (why, the answer, the derived column's slice keys, lookups, skips)
            (
                "every row's parent found",
                Lookup::Found(vec![(1, Some("k1".into())), (2, Some("k2".into()))]),
                Some(vec!["k1", "k2"]),
                1,
                0,
            ),
            (
                "a row's parent missing: left to the fallback",
                Lookup::Found(vec![(1, Some("k1".into()))]),
                None,
                1,
                0,
            ),
            ("no idle connection", Lookup::Busy, None, 0, 1),
            ("an error or a doubt", Lookup::Failed, None, 0, 0),
        ];
        for (why, found, want, lookups, skips) in rows {
            let parents = ParentMaps::default();
            let w = parents.window();
            let key = MapKey {
                schema: "db".into(),
                table: "parent".into(),
                pk: "id".into(),
                col: "region".into(),
            };
            let ask = super::Ask {
                name: "derived".into(),
                key: key.clone(),
                xs: vec![1, 2],
            };
            assert_eq!(
                super::questions(&[vec![ask.clone()]]),
                vec![vec![(key, vec![1, 2])]]
            );
            let got = super::all_answered(&parents, &w, false, vec![vec![ask]], vec![vec![found]]);
            let want: Vec<super::Answers> = vec![want
                .map(|k| {
                    (
                        "derived".to_string(),
                        k.iter().map(|s| s.to_string()).collect(),
                    )
                })
                .into_iter()
                .collect()];
            assert_eq!(got, want, "{why}");
            assert_eq!(
                parents.stats.lookups.load(Relaxed),
                lookups,
                "{why}: lookups"
            );
            assert_eq!(parents.stats.skips.load(Relaxed), skips, "{why}: skips");
        }
    }

    /// Before a statement is sent: a write takes its window when derived slices are on (and
    /// only a write asks whether they are); after its response, nothing is left in flight.
    #[test]
    fn a_write_takes_its_window_and_ends_with_its_response() {
        let rows: &[(&str, bool, bool, bool, bool)] = &[
            // (why, has writes, derived_slices, asked, window taken)
            ("a read", false, true, false, false),
            ("a write, derived slices on", true, true, true, true),
            ("a write, derived slices off", true, false, true, false),
        ];
        for (why, writes, derived, want_asked, want_window) in rows {
            let w = World::new(true);
            let mut st = w.session(Some("db"));
            if *writes {
                st.pending.tables.push(w.versions.table("db", "parent"));
            }
            let asked = std::cell::Cell::new(false);
            super::begin(&mut st, &w.versions.parents, || {
                asked.set(true);
                *derived
            });
            assert_eq!(asked.get(), *want_asked, "{why}: asked");
            assert_eq!(st.fk.window.is_some(), *want_window, "{why}: window");
            assert!(st.fk.how.is_none(), "{why}: how is taken");
            super::end(&mut st);
            assert!(
                st.fk.window.is_none() && st.fk.tokens.is_empty(),
                "{why}: ended"
            );
            // Nothing asked of the server for a write with no known rows.
            let cfg = &w.cfg.invalidation;
            assert!(super::asks(&st, false, cfg).is_none(), "{why}: asks");
        }
    }
}
