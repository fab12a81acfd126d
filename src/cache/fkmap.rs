//! Foreign-key-derived slices: what qcache knows of parent rows (`P.pk = X` holds
//! `P.col = c`), so that a write to a child table `T` joined on `T.fk = P.pk` can bump the
//! derived slice `(T, fk→P.col, c)` of each row's fk value `X` instead of every derived slice
//! of `T` (`analysis::slices::Derived`, docs/design.md "Derived slices").
//!
//! A read that pins `P.col` to constants and joins `T` on `T.fk = P.pk` reads only the `T`
//! rows whose fk names a `P` row of those values. Its entry stamps `P`'s slices (or `P`
//! whole) as any read does, so a write that moves a `P` row between values of `col` (or
//! changes its pk) invalidates it already; the derived slice covers only `T`'s rows. A write
//! to `T` names its rows' fk values `X`; it may bump the derived slice of `M(X)` only when
//! `M(X)` is the value `P.col` holds in row `X` for as long as that matters. Everything here
//! serves that one rule; where it cannot be kept, the write bumps the derived column's
//! unknown version (every derived slice of `T`), as a write with unknown rows would.
//!
//! **Where `M(X)` comes from.** A plain single-row `INSERT` into `P` through qcache, outside
//! a transaction, names the new row's `col` value and its pk (the statement's literal, or the
//! OK packet's last_insert_id for an omitted AUTO_INCREMENT pk); it is recorded after the
//! server acknowledged the insert ([`ParentMaps::learn`]). A child write's lookup of its
//! parents through qcache is recorded the same way.
//!
//! **What makes `M(X)` wrong**: a write that changes an existing `P` row's `col` or pk, or
//! removes a row (a later insert could reuse its pk): an UPDATE setting `col` or the pk, a
//! DELETE, REPLACE, `INSERT … ON DUPLICATE KEY UPDATE`, a write with unknown rows or tables,
//! DDL. Through qcache such a write is a *move* ([`ParentMaps::begin`]): counted as started
//! before it is sent, and finished ([`Token`]'s drop) only after its invalidation was applied
//! and, inside a transaction, after the transaction ended — then `P`'s mappings are dropped.
//! From elsewhere (binlog, L2), the mappings of `P` are dropped when the write is seen.
//!
//! **The window rule** (the fill-race rule of entries, for mappings). Every learner and every
//! user of a mapping reads a [`Window`] before its own statement is sent, and acts only if,
//! when it records or uses the mapping, no move started since, none is in flight, no mapping
//! was dropped since, and the map was ready ([`ParentMaps::register`]) when the window
//! opened. Why that suffices, for a user (a child write `W` of row fk `X`, acknowledged after
//! an entry `E` of slice `c'` read its stamps): if `X` names a row of `E`'s slice when `W`
//! commits and `M(X) = c ≠ c'` were used, then row `X` held `c` at some time and `c'` at
//! another; the write that changed it (a move) either finished before `W`'s window opened —
//! then it dropped `M(X)`, and the value present now was learned by a learner whose own
//! window saw no move, so after it: `c'`, a contradiction — or it started before and
//! finished after the window opened (`drops` moved, or it is in flight), or it started
//! after (`started` moved): `W` falls back. The learner's case is the same argument with its
//! read of the row in place of `W`'s commit.
//!
//! **Who uses `M(X)`**: the binlog's child row events only. A move from elsewhere is seen
//! only when the binlog (or L2) delivers it, so a mapping may still name a row's old value
//! while a child write of it goes through qcache; such writes ask the server instead
//! (`engine::fkslices`), whose answer comes after they committed. On the binlog, a move
//! from elsewhere is delivered before any later child event of its row, in commit order.
//!
//! **Registration.** A map `(P, pk, col)` is registered when the first entry deriving a slice
//! from it is planned. A write to `P` planned before that was classified without knowing
//! `col` mattered (an UPDATE setting only columns no map used is *quiet*, not a move), so a
//! new map becomes ready only once every quiet write in flight at its registration has
//! finished ([`ParentMaps::begin`] counts them).
//!
//! Bounded: at most `max_entries` mappings over all maps, the oldest forgotten first
//! (forgetting is always safe: the write falls back).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A parent map's identity: the parent table (schema, name), its single-column primary key
/// and the column whose value the derived slices are keyed by (all lower-cased).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MapKey {
    pub schema: String,
    pub table: String,
    pub pk: String,
    pub col: String,
}

/// The name of the derived slice column registered on the child table for `fk` joined to
/// `key`: a name no real column can have (identifiers cannot hold NUL), parsed back by
/// [`parse_derived`].
pub fn derived_column(fk: &str, key: &MapKey) -> String {
    format!(
        "\0{fk}\0{}\0{}\0{}\0{}",
        key.schema, key.table, key.pk, key.col
    )
}

/// The child's fk column and the parent map of a derived column's name; None for a real
/// column.
pub fn parse_derived(name: &str) -> Option<(&str, MapKey)> {
    let rest = name.strip_prefix('\0')?;
    let mut it = rest.split('\0');
    let fk = it.next()?;
    let key = MapKey {
        schema: it.next()?.to_string(),
        table: it.next()?.to_string(),
        pk: it.next()?.to_string(),
        col: it.next()?.to_string(),
    };
    it.next().is_none().then_some((fk, key))
}

/// What an operator sees of the parent maps (`SHOW QCACHE STATUS`, `/metrics`).
#[derive(Debug, Default)]
pub struct ParentStats {
    /// Mappings recorded from writes to a parent.
    pub learned: AtomicU64,
    /// Child-row fk values a write bumped by their parent's value.
    pub mapped: AtomicU64,
    /// Child writes that fell back to every derived slice of their table (a value not
    /// known, a move in flight, a map not ready).
    pub fallbacks: AtomicU64,
    /// Times a parent's mappings were dropped (moves, writes from elsewhere).
    pub drops: AtomicU64,
    /// Mappings forgotten to stay within `max_entries`.
    pub evicted: AtomicU64,
    /// Parent lookups asked of the server for child writes.
    pub lookups: AtomicU64,
    /// Parent lookups not waited for (no idle connection, or a lookup sent beside its write
    /// not answered by the write's OK): the write fell back instead.
    pub skips: AtomicU64,
    /// Parent lookups asked after their write's OK went out (`Timing::Deferred`).
    pub deferred: AtomicU64,
    /// Of those, the ones whose derived slices are still pending (a gauge).
    pub pending: AtomicU64,
}

#[derive(Debug, Default)]
struct Map {
    /// pk value → the key of `col`'s value (None: NULL, in no slice).
    values: HashMap<i128, Option<String>>,
    /// Set when the map became ready: the `tick` then.
    ready_at: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    moves_started: u64,
    moves_finished: u64,
    /// Moves through qcache finished, and drops of writes from elsewhere.
    drops: u64,
    /// Writes through qcache that are not moves, in flight (see "Registration").
    quiet_in_flight: u64,
    /// Moves on every readiness change.
    tick: u64,
    maps: HashMap<MapKey, Map>,
    /// Insertion order, for eviction: (map, pk).
    order: VecDeque<(Arc<MapKey>, i128)>,
    entries: usize,
}

impl State {
    fn window_ok(&self, w: &Window) -> bool {
        self.moves_started == w.started
            && self.moves_finished == self.moves_started
            && self.drops == w.drops
    }

    fn ready_in(&self, key: &MapKey, w: &Window) -> Option<&Map> {
        let m = self.maps.get(key)?;
        (m.ready_at? <= w.tick).then_some(m)
    }

    fn promote(&mut self) {
        if self.quiet_in_flight != 0 || self.maps.values().all(|m| m.ready_at.is_some()) {
            return;
        }
        self.tick += 1;
        let t = self.tick;
        for m in self.maps.values_mut() {
            m.ready_at.get_or_insert(t);
        }
    }

    fn drop_where(&mut self, f: impl Fn(&MapKey) -> bool) -> bool {
        let mut any = false;
        for (k, m) in self.maps.iter_mut() {
            if f(k) {
                any = true;
                self.entries -= m.values.len();
                m.values.clear();
            }
        }
        if any {
            self.drops += 1;
            // The order list keeps stale pairs; eviction skips them.
        }
        any
    }
}

/// Read before a learner's or user's statement is sent; checked when it records or uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    started: u64,
    drops: u64,
    tick: u64,
}

/// How a write through qcache touches one table, for [`ParentMaps::begin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// A plain INSERT (not REPLACE, not ON DUPLICATE KEY UPDATE): existing rows stay.
    Insert,
    /// A single-table UPDATE assigning exactly these columns (lower-cased).
    Update(Vec<String>),
    /// Anything else that may change or remove existing rows.
    Other,
}

impl Touch {
    /// How a single-table write of this kind touches its table.
    pub fn of(kind: &crate::analysis::slices::WriteKind) -> Touch {
        use crate::analysis::slices::WriteKind;
        match kind {
            WriteKind::Insert { .. } => Touch::Insert,
            WriteKind::Update { set, .. } => Touch::Update(set.clone()),
            WriteKind::Delete { .. } => Touch::Other,
        }
    }
}

/// A single-row plain INSERT into a parent: per map of that table, the row's value there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learn {
    /// The pk's value from the statement; None: the OK's last_insert_id (an omitted
    /// AUTO_INCREMENT pk).
    pub pk: Option<i128>,
    pub values: Vec<(MapKey, Option<String>)>,
}

impl Learn {
    /// What a single-row INSERT into a table with parent `maps` may teach them: `known`, the
    /// slice keys of the row's values per column (`i<n>` for an integer); `columns`, the
    /// INSERT's column list (None: every column); `auto_increment(pk)`, whether the pk
    /// column is AUTO_INCREMENT. None when the row's pk cannot be known (a value that is no
    /// integer, or an omitted pk that the server does not number) or it names no map's
    /// column. Only maps of the first map's pk are taught.
    pub fn from_insert(
        maps: &[MapKey],
        known: &[(String, Vec<String>)],
        columns: Option<&[String]>,
        auto_increment: impl Fn(&str) -> bool,
    ) -> Option<Learn> {
        let first = maps.first()?;
        let int_of = |c: &str| -> Option<Option<i128>> {
            let (_, keys) = known.iter().find(|(k, _)| k == c)?;
            Some(match keys.as_slice() {
                [k] => k.strip_prefix('i').and_then(|n| n.parse().ok()),
                _ => None,
            })
        };
        // The pk: the statement's own value, or an omitted AUTO_INCREMENT one.
        let pk = match int_of(&first.pk) {
            Some(Some(x)) => Some(x),
            Some(None) => return None,
            None => {
                let omitted = columns.is_some_and(|c| !c.contains(&first.pk));
                if !omitted || !auto_increment(&first.pk) {
                    return None;
                }
                None
            }
        };
        let values: Vec<(MapKey, Option<String>)> = maps
            .iter()
            .filter(|m| m.pk == first.pk)
            .filter_map(|m| {
                let (_, keys) = known.iter().find(|(k, _)| *k == m.col)?;
                match keys.as_slice() {
                    [] => Some((m.clone(), None)),
                    [k] => Some((m.clone(), Some(k.clone()))),
                    _ => None,
                }
            })
            .collect();
        (!values.is_empty()).then_some(Learn { pk, values })
    }

    /// The pk of the row the INSERT made, from its OK: the statement's value, or the
    /// server's AUTO_INCREMENT number. None when nothing may be learned: inside a
    /// transaction (the row may never commit), or unless exactly one row was inserted.
    pub fn inserted_pk(
        &self,
        ok: &crate::protocol::packets::OkInfo,
        in_transaction: bool,
    ) -> Option<i128> {
        if in_transaction
            || ok.affected_rows != 1
            || ok.status & crate::protocol::packets::status::IN_TRANS != 0
        {
            return None;
        }
        match self.pk {
            Some(x) => Some(x),
            None if ok.last_insert_id > 0 => Some(i128::from(ok.last_insert_id)),
            None => None,
        }
    }
}

/// The parent maps of every table (shared; see the module docs).
#[derive(Debug)]
pub struct ParentMaps {
    state: Mutex<State>,
    max_entries: AtomicU64,
    pub stats: ParentStats,
}

impl Default for ParentMaps {
    fn default() -> Self {
        ParentMaps {
            state: Mutex::default(),
            max_entries: AtomicU64::new(DEFAULT_MAX_ENTRIES),
            stats: ParentStats::default(),
        }
    }
}

/// `invalidation.parent_map_entries`' default.
pub const DEFAULT_MAX_ENTRIES: u64 = crate::config::DEFAULT_PARENT_MAP_ENTRIES;

/// A write's standing with the parent maps while it may still change rows: a move or a
/// quiet write in flight. Dropping it finishes it (after its invalidation was applied, and
/// for a write inside a transaction after the transaction ended; a lost connection drops it
/// too).
#[derive(Debug)]
pub struct Token {
    maps: Arc<ParentMaps>,
    quiet: bool,
    /// Tables whose mappings the move drops when it finishes; `all` for every table.
    moved: Vec<(String, String)>,
    all: bool,
}

impl Drop for Token {
    fn drop(&mut self) {
        let mut st = self.maps.lock();
        if self.all || !self.moved.is_empty() {
            let (all, moved) = (self.all, &self.moved);
            if st.drop_where(|k| all || moved.iter().any(|(s, t)| *s == k.schema && *t == k.table))
            {
                self.maps.stats.drops.fetch_add(1, Ordering::Relaxed);
            } else {
                // Nothing to forget, but learners and users that overlapped must still see
                // that a move happened.
                st.drops += 1;
            }
            st.moves_finished += 1;
        }
        if self.quiet {
            st.quiet_in_flight -= 1;
            st.promote();
        }
    }
}

impl ParentMaps {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding it leaves counters that only make later windows fail.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_max_entries(&self, n: u64) {
        self.max_entries.store(n, Ordering::Relaxed);
    }

    /// The `Qcache_*` rows of the parent maps (derived slices).
    pub fn status_rows(&self) -> [(&'static str, u64); 10] {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let s = &self.stats;
        [
            ("Qcache_parent_map_entries", self.entries() as u64),
            ("Qcache_parent_map_learned", load(&s.learned)),
            ("Qcache_derived_slice_rows", load(&s.mapped)),
            ("Qcache_derived_slice_fallbacks", load(&s.fallbacks)),
            ("Qcache_parent_map_drops", load(&s.drops)),
            ("Qcache_parent_map_evicted", load(&s.evicted)),
            ("Qcache_parent_lookups", load(&s.lookups)),
            ("Qcache_parent_lookup_skips", load(&s.skips)),
            ("Qcache_parent_lookups_deferred", load(&s.deferred)),
            ("Qcache_parent_lookups_pending", load(&s.pending)),
        ]
    }

    /// How many mappings are held now.
    pub fn entries(&self) -> usize {
        self.lock().entries
    }

    /// Registers a map (before the stamps of the entry that derives a slice from it are
    /// read). Ready at once when no quiet write is in flight, else when the last one ends.
    pub fn register(&self, key: &MapKey) {
        let mut st = self.lock();
        if st.maps.contains_key(key) {
            return;
        }
        st.maps.insert(key.clone(), Map::default());
        st.promote();
    }

    /// Whether `table` is the parent of some map (cheap check for callers).
    pub fn is_parent(&self, schema: &str, table: &str) -> bool {
        self.lock()
            .maps
            .keys()
            .any(|k| k.schema == schema && k.table == table)
    }

    /// The maps whose parent is `schema.table`.
    pub fn maps_of(&self, schema: &str, table: &str) -> Vec<MapKey> {
        self.lock()
            .maps
            .keys()
            .filter(|k| k.schema == schema && k.table == table)
            .cloned()
            .collect()
    }

    /// Whether no move started, was in flight or finished and no mapping was dropped since
    /// `w` was taken (a lookup sent beside its write is used only then).
    pub fn window_holds(&self, w: &Window) -> bool {
        self.lock().window_ok(w)
    }

    pub fn window(&self) -> Window {
        let st = self.lock();
        Window {
            started: st.moves_started,
            drops: st.drops,
            tick: st.tick,
        }
    }

    /// Classifies a write about to be sent: per table it writes, how; `everything` when its
    /// tables are not known. None when it is neither a move nor a quiet write (only plain
    /// inserts).
    pub fn begin(
        self: &Arc<Self>,
        tables: &[((String, String), Touch)],
        everything: bool,
    ) -> Option<Token> {
        let mut st = self.lock();
        let mut quiet = false;
        let mut moved = Vec::new();
        for ((s, t), how) in tables {
            let keys: Vec<&MapKey> = st
                .maps
                .keys()
                .filter(|k| k.schema == *s && k.table == *t)
                .collect();
            match how {
                Touch::Insert => {}
                // No map on it yet: a map registered while this is in flight waits for it.
                _ if keys.is_empty() => quiet = true,
                Touch::Update(set)
                    if set
                        .iter()
                        .all(|c| keys.iter().all(|k| k.pk != *c && k.col != *c)) =>
                {
                    quiet = true
                }
                _ => moved.push((s.clone(), t.clone())),
            }
        }
        if everything {
            quiet = true;
        }
        let all = everything;
        if !quiet && moved.is_empty() && !all {
            return None;
        }
        if all || !moved.is_empty() {
            st.moves_started += 1;
        }
        if quiet {
            st.quiet_in_flight += 1;
        }
        Some(Token {
            maps: self.clone(),
            quiet,
            moved,
            all,
        })
    }

    /// Records `M(x) = value` in `key`'s map when the window rule allows it. True when
    /// recorded.
    pub fn learn(&self, w: &Window, key: &MapKey, x: i128, value: Option<String>) -> bool {
        let max = self.max_entries.load(Ordering::Relaxed) as usize;
        let mut st = self.lock();
        if max == 0 || !st.window_ok(w) || st.ready_in(key, w).is_none() {
            return false;
        }
        let key = Arc::new(key.clone());
        let Some(m) = st.maps.get_mut(&*key) else {
            return false;
        };
        if m.values.insert(x, value).is_none() {
            st.entries += 1;
        }
        st.order.push_back((key, x));
        while st.entries > max {
            let Some((k, x)) = st.order.pop_front() else {
                break;
            };
            if let Some(m) = st.maps.get_mut(&*k) {
                if m.values.remove(&x).is_some() {
                    st.entries -= 1;
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        // Stale pairs (dropped maps, re-learned keys) would grow the list: rebuild it.
        if st.order.len() > 2 * max.max(1024) {
            let maps = &st.maps;
            let fresh: VecDeque<(Arc<MapKey>, i128)> = st
                .order
                .iter()
                .filter(|(k, x)| maps.get(&**k).is_some_and(|m| m.values.contains_key(x)))
                .cloned()
                .collect();
            st.order = fresh;
        }
        self.stats.learned.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The value keys of `xs` in `key`'s map (a NULL value gives no key), when the window
    /// rule allows using it and every one is known; None otherwise.
    pub fn lookup(&self, w: &Window, key: &MapKey, xs: &[i128]) -> Option<Vec<String>> {
        let st = self.lock();
        if !st.window_ok(w) {
            return None;
        }
        let m = st.ready_in(key, w)?;
        let mut out = Vec::with_capacity(xs.len());
        for x in xs {
            if let Some(v) = m.values.get(x)? {
                out.push(v.clone());
            }
        }
        out.sort();
        out.dedup();
        Some(out)
    }

    /// The values of `xs` `key`'s map does not hold, when the window rule allows learning
    /// them now (None otherwise): what a lookup should ask.
    pub fn missing(&self, w: &Window, key: &MapKey, xs: &[i128]) -> Option<Vec<i128>> {
        let st = self.lock();
        if !st.window_ok(w) {
            return None;
        }
        let m = st.ready_in(key, w)?;
        let mut out: Vec<i128> = xs
            .iter()
            .filter(|x| !m.values.contains_key(x))
            .copied()
            .collect();
        out.sort();
        out.dedup();
        Some(out)
    }

    /// A write from elsewhere (binlog, L2) may have changed `schema.table`'s rows: forget
    /// its mappings.
    pub fn drop_table(&self, schema: &str, table: &str) {
        let mut st = self.lock();
        if st.drop_where(|k| k.schema == schema && k.table == table) {
            self.stats.drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Anything may have changed (a binlog gap, an unreadable event, FLUSH): forget all.
    pub fn drop_all(&self) {
        let mut st = self.lock();
        if st.drop_where(|_| true) {
            self.stats.drops.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The integer fk values of a column's slice keys (`i<n>`), sorted and without repeats;
/// None when one is not an integer key.
pub fn fk_values(keys: &[String]) -> Option<Vec<i128>> {
    let mut xs = keys
        .iter()
        .map(|k| k.strip_prefix('i')?.parse::<i128>().ok())
        .collect::<Option<Vec<i128>>>()?;
    xs.sort_unstable();
    xs.dedup();
    Some(xs)
}

/// The slice keys of the derived columns registered on a child table for a write with
/// known rows: per derived column (`registered`, names as [`derived_column`] makes them)
/// whose fk values `known` names, the keys of their parents' values when every one is
/// known under `w`. A derived column left out is bumped as unknown (every derived slice).
pub fn derived_known(
    maps: &ParentMaps,
    w: &Window,
    registered: &[String],
    known: &[(String, Vec<String>)],
) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for name in registered {
        let Some((fk, key)) = parse_derived(name) else {
            continue;
        };
        let Some((_, fks)) = known.iter().find(|(c, _)| c == fk) else {
            maps.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        match fk_values(fks).and_then(|xs| Some((maps.lookup(w, &key, &xs)?, fks.len()))) {
            Some((keys, n)) => {
                maps.stats.mapped.fetch_add(n as u64, Ordering::Relaxed);
                out.push((name.clone(), keys));
            }
            None => {
                maps.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MapKey {
        MapKey {
            schema: "shop".into(),
            table: "orders".into(),
            pk: "id".into(),
            col: "customer_id".into(),
        }
    }

    fn maps() -> Arc<ParentMaps> {
        Arc::new(ParentMaps::default())
    }

    fn t(name: &str) -> (String, String) {
        ("shop".into(), name.into())
    }

    #[test]
    fn names_round_trip() {
        let n = derived_column("order_id", &key());
        assert_eq!(parse_derived(&n), Some(("order_id", key())));
        assert_eq!(parse_derived("order_id"), None);
    }

    #[test]
    fn learn_then_use() {
        let m = maps();
        m.register(&key());
        let w = m.window();
        assert!(m.learn(&w, &key(), 10, Some("i5".into())));
        let w = m.window();
        assert_eq!(m.lookup(&w, &key(), &[10]), Some(vec!["i5".to_string()]));
        assert_eq!(m.lookup(&w, &key(), &[10, 11]), None, "11 unknown");
        let col = derived_column("order_id", &key());
        let known = vec![("order_id".to_string(), vec!["i10".to_string()])];
        assert_eq!(
            derived_known(&m, &w, std::slice::from_ref(&col), &known),
            vec![(col.clone(), vec!["i5".to_string()])]
        );
        let unknown_fk = vec![("qty".to_string(), vec!["i1".to_string()])];
        assert!(derived_known(&m, &w, &[col], &unknown_fk).is_empty());
    }

    #[test]
    fn a_move_in_flight_or_during_the_window_breaks_it() {
        let m = maps();
        m.register(&key());
        let w = m.window();
        let mv = m.begin(&[(t("orders"), Touch::Other)], false).unwrap();
        assert!(!m.learn(&w, &key(), 1, Some("i1".into())), "move started");
        let w2 = m.window();
        assert!(
            !m.learn(&w2, &key(), 1, Some("i1".into())),
            "move in flight"
        );
        drop(mv);
        assert!(
            !m.learn(&w2, &key(), 1, Some("i1".into())),
            "it finished since"
        );
        let w3 = m.window();
        assert!(m.learn(&w3, &key(), 1, Some("i1".into())));
        // A later move drops what was learned.
        let mv = m.begin(
            &[(t("orders"), Touch::Update(vec!["customer_id".into()]))],
            false,
        );
        drop(mv);
        assert_eq!(m.lookup(&m.window(), &key(), &[1]), None);
    }

    #[test]
    fn quiet_writes_and_inserts() {
        let m = maps();
        m.register(&key());
        // Inserts and updates of other columns are no move.
        assert!(m.begin(&[(t("orders"), Touch::Insert)], false).is_none());
        let q = m
            .begin(
                &[(t("orders"), Touch::Update(vec!["status".into()]))],
                false,
            )
            .unwrap();
        let w = m.window();
        assert!(m.learn(&w, &key(), 1, Some("i1".into())));
        drop(q);
        // Setting the pk is a move.
        let mv = m
            .begin(&[(t("orders"), Touch::Update(vec!["id".into()]))], false)
            .unwrap();
        drop(mv);
        assert_eq!(m.lookup(&m.window(), &key(), &[1]), None);
    }

    #[test]
    fn a_map_registered_while_a_quiet_write_is_in_flight_waits_for_it() {
        let m = maps();
        // Classified before the map existed: it may set customer_id.
        let q = m
            .begin(
                &[(t("orders"), Touch::Update(vec!["customer_id".into()]))],
                false,
            )
            .unwrap();
        m.register(&key());
        let w = m.window();
        assert!(!m.learn(&w, &key(), 1, Some("i1".into())), "not ready");
        drop(q);
        assert!(
            !m.learn(&w, &key(), 1, Some("i1".into())),
            "ready only after that window opened"
        );
        let w = m.window();
        assert!(m.learn(&w, &key(), 1, Some("i1".into())));
    }

    #[test]
    fn bounded() {
        let m = maps();
        m.set_max_entries(3);
        m.register(&key());
        for x in 0..10 {
            let w = m.window();
            assert!(m.learn(&w, &key(), x, Some(format!("i{x}"))));
        }
        assert_eq!(m.entries(), 3);
        let w = m.window();
        assert_eq!(m.lookup(&w, &key(), &[0]), None, "the oldest went first");
        assert_eq!(m.lookup(&w, &key(), &[9]), Some(vec!["i9".to_string()]));
        assert_eq!(m.stats.evicted.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn drops_from_elsewhere() {
        let m = maps();
        m.register(&key());
        let w = m.window();
        m.learn(&w, &key(), 1, Some("i1".into()));
        let w = m.window();
        m.drop_table("shop", "customers");
        assert!(m.lookup(&w, &key(), &[1]).is_some(), "another table");
        m.drop_table("shop", "orders");
        assert_eq!(m.lookup(&m.window(), &key(), &[1]), None);
        assert!(!m.learn(&w, &key(), 2, Some("i1".into())), "dropped since");
    }

    fn map(pk: &str, col: &str) -> MapKey {
        MapKey {
            pk: pk.into(),
            col: col.into(),
            ..key()
        }
    }

    fn known(cols: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        cols.iter()
            .map(|(c, ks)| (c.to_string(), ks.iter().map(|k| k.to_string()).collect()))
            .collect()
    }

    /// One row per kind of single-table write.
    #[test]
    fn touches_of_write_kinds() {
        use crate::analysis::slices::WriteKind;
        use crate::analysis::TableRef;
        let table = TableRef::new(Some("shop"), "orders");
        let cases = [
            (
                WriteKind::Insert {
                    table: table.clone(),
                    columns: None,
                    rows: 3,
                },
                Touch::Insert,
            ),
            (
                WriteKind::Update {
                    table: table.clone(),
                    set: vec!["a".into(), "b".into()],
                },
                Touch::Update(vec!["a".into(), "b".into()]),
            ),
            (WriteKind::Delete { table }, Touch::Other),
        ];
        for (kind, want) in cases {
            assert_eq!(Touch::of(&kind), want, "{kind:?}");
        }
    }

    /// What a single-row INSERT teaches: one row per way its pk and map values are known.
    #[test]
    fn inserts_teach_the_values_they_name() {
        let maps = [map("id", "customer_id"), map("id", "region")];
        let cols = |c: &[&str]| c.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let learn = |pk, values: Vec<(MapKey, Option<&str>)>| {
            Some(Learn {
                pk,
                values: values
                    .into_iter()
                    .map(|(m, v)| (m, v.map(str::to_string)))
                    .collect(),
            })
        };
        type Case<'a> = (
            Vec<(String, Vec<String>)>,
            Option<Vec<String>>,
            bool,
            Option<Learn>,
        );
        let cases: Vec<Case> = vec![
            // The pk and both mapped columns given.
            (
                known(&[
                    ("id", &["i7"]),
                    ("customer_id", &["i3"]),
                    ("region", &["seu"]),
                ]),
                Some(cols(&["id", "customer_id", "region"])),
                false,
                learn(
                    Some(7),
                    vec![
                        (maps[0].clone(), Some("i3")),
                        (maps[1].clone(), Some("seu")),
                    ],
                ),
            ),
            // A NULL parent value (no key) is learned as None; an unnamed column is not.
            (
                known(&[("id", &["i7"]), ("customer_id", &[])]),
                None,
                false,
                learn(Some(7), vec![(maps[0].clone(), None)]),
            ),
            // The pk omitted: learned from the OK when it is AUTO_INCREMENT.
            (
                known(&[("customer_id", &["i3"])]),
                Some(cols(&["customer_id"])),
                true,
                learn(None, vec![(maps[0].clone(), Some("i3"))]),
            ),
            (
                known(&[("customer_id", &["i3"])]),
                Some(cols(&["customer_id"])),
                false,
                None,
            ),
            // No column list means every column: an omitted pk cannot be.
            (known(&[("customer_id", &["i3"])]), None, true, None),
            // A pk that is not an integer, or has several values.
            (
                known(&[("id", &["sx"]), ("customer_id", &["i3"])]),
                None,
                false,
                None,
            ),
            (
                known(&[("id", &["i1", "i2"]), ("customer_id", &["i3"])]),
                None,
                false,
                None,
            ),
            // Nothing the maps hold named.
            (known(&[("id", &["i7"])]), None, false, None),
        ];
        for (i, (known, columns, ai, want)) in cases.into_iter().enumerate() {
            let got = Learn::from_insert(&maps, &known, columns.as_deref(), |_| ai);
            assert_eq!(got, want, "case {i}");
        }
        assert_eq!(
            Learn::from_insert(&[], &known(&[("id", &["i7"])]), None, |_| true),
            None
        );
    }

    /// Only maps of the first map's pk are taught.
    #[test]
    fn inserts_teach_maps_of_one_pk() {
        let maps = [map("id", "customer_id"), map("code", "customer_id")];
        let k = known(&[("id", &["i1"]), ("code", &["i2"]), ("customer_id", &["i3"])]);
        let got = Learn::from_insert(&maps, &k, None, |_| false).unwrap();
        assert_eq!(got.pk, Some(1));
        assert_eq!(got.values, vec![(maps[0].clone(), Some("i3".to_string()))]);
    }

    /// The inserted row's pk from the OK: one row per condition.
    #[test]
    fn the_inserted_pk_comes_from_the_statement_or_the_ok() {
        use crate::protocol::packets::{status, OkInfo};
        let ok = |affected_rows, last_insert_id, status| OkInfo {
            affected_rows,
            last_insert_id,
            status,
            warnings: 0,
        };
        let given = Learn {
            pk: Some(7),
            values: vec![],
        };
        let numbered = Learn {
            pk: None,
            values: vec![],
        };
        let cases = [
            (&given, ok(1, 0, 0), false, Some(7)),
            (&given, ok(1, 99, status::AUTOCOMMIT), false, Some(7)),
            (&numbered, ok(1, 99, 0), false, Some(99)),
            (&numbered, ok(1, 0, 0), false, None),
            (&given, ok(0, 0, 0), false, None),
            (&given, ok(2, 0, 0), false, None),
            (&given, ok(1, 0, status::IN_TRANS), false, None),
            (&given, ok(1, 0, 0), true, None),
        ];
        for (i, (learn, ok, in_txn, want)) in cases.iter().enumerate() {
            assert_eq!(learn.inserted_pk(ok, *in_txn), *want, "case {i}");
        }
    }
}
