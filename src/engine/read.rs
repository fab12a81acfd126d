//! A cacheable read between its plan and its entry, sans IO: what a planned read is
//! (`ReadPlan`), which cached entry a session may be served and in which view
//! (`Lookup`), how a miss starts (fill view, then an outdated entry's verdict), and the
//! entry a relayed result becomes (`filled_entry`, `dressed`). The session looks up,
//! relays and stores; the text read, the execute and `QCACHE EXPLAIN` all ask here.

use std::sync::Arc;

use bytes::BytesMut;

use super::fill::Fill;
use super::state::SessionState;
use crate::analysis::{self, Analysis, ReadInfo};
use crate::cache::entry::L2Stamps;
use crate::cache::key::{key, TAG_TEXT};
use crate::cache::plans::{Outcome, ReadPlans};
use crate::cache::{Cache, Entry, Key, Snapshot, TableHandle, Versions};
use crate::config::Config;
use crate::invalidation::catalog::{Catalog, ReadResolution, TableName};
use crate::policy::diagnostics;
use crate::policy::read::{self, Planned};
use crate::policy::snapshot::ReadView;
use crate::policy::stale;
use crate::policy::timecol;
use crate::policy::Reason;
use crate::protocol::response::Response;

/// Why a read may use the cache, and under which snapshot rules.
pub type ReadMode = ReadView<Snapshot>;

/// An outdated entry under a read's key and whether this session may be served it.
pub type StaleVerdict = (Arc<Entry>, Result<stale::StaleOk, stale::Why>);

/// A statement command (`payload`: COM_QUERY or COM_STMT_PREPARE, then the text) whose
/// text has `SQL_CACHE` / `SQL_NO_CACHE` (`scan.hint_spans`): the hint-free text, which keys
/// and is analysed, and the payload the server gets, with the hints where it accepts them
/// (`policy::read::hints_reach_server`), else the hint-free text under the same command.
/// Without hints, both are the client's.
pub fn hints_for_server(
    payload: &bytes::Bytes,
    scan: &analysis::Scan,
    mariadb: bool,
) -> (bytes::Bytes, bytes::Bytes) {
    let sql = payload.slice(1..);
    if scan.hint_spans.is_empty() {
        return (sql, payload.clone());
    }
    let stripped = bytes::Bytes::from(analysis::strip_hints(&sql, scan).into_owned());
    if read::hints_reach_server(mariadb) {
        return (stripped, payload.clone());
    }
    let mut p = BytesMut::with_capacity(stripped.len() + 1);
    p.extend_from_slice(&payload[..1]);
    p.extend_from_slice(&stripped);
    (stripped, p.freeze())
}

/// A cacheable read on a miss: its key, the tables it depends on, the payload to send.
pub struct ReadPlan {
    pub key: Key,
    pub tables: Arc<[TableHandle]>,
    pub digest: u64,
    /// What a matching `cache` rule sets: a TTL (the entry expires this long after it is
    /// stored), `max_stale`, `cache_empty`.
    pub opts: crate::rules::Options,
    /// The catalog's DDL number when planning began (`Catalog::ddl_epoch`): if a DDL was
    /// registered since, the plan may predate it, and nothing is stored.
    pub ddl_epoch: u64,
}

/// A plan for the read machine (`policy::decide`), which carries no plan: the plan is kept
/// in `kept` and the machine told only whether there is one.
pub fn keep_plan(
    plan: Result<ReadPlan, Reason>,
    kept: &mut Option<ReadPlan>,
) -> Result<(), Reason> {
    let answer = plan.as_ref().map(drop).map_err(|r| *r);
    *kept = plan.ok();
    answer
}

/// The machine's decision with the plan [`keep_plan`] kept.
pub fn with_plan(planned: Planned<()>, kept: Option<ReadPlan>) -> Planned<ReadPlan> {
    match (planned, kept) {
        (Planned::Fill(()), Some(plan)) => Planned::Fill(plan),
        (Planned::Fill(()), None) => read::refused(Reason::UnexpectedShape),
        (Planned::Relay { reason, cacheable }, _) => Planned::Relay { reason, cacheable },
    }
}

/// What the cache holds for one session's reads, as the session may see it.
pub struct Lookup<'a> {
    pub cache: &'a Cache,
    pub st: &'a SessionState,
}

impl Lookup<'_> {
    /// Whether a miss that leads its fill asks L2 before the server, and stores its result
    /// there (`policy::l2::asks_before_server`), for this session now.
    pub fn asks_l2_first(&self, mode: &ReadMode, usable: bool) -> bool {
        crate::policy::l2::asks_before_server(
            matches!(mode, ReadMode::Plain),
            !self.st.temp_tables.is_empty(),
            self.st.priv_private != 0,
            usable,
        )
    }

    /// A cached entry this session may be served, if any (counted as a hit).
    #[inline(always)]
    pub fn lookup(&self, key: Key, mode: &ReadMode) -> Option<Arc<Entry>> {
        // The common case: one map lookup and the stamp check, nothing else.
        if matches!(mode, ReadMode::Plain) && self.st.temp_tables.is_empty() {
            return self.cache.get_current(key);
        }
        let e = self.servable(key, mode)?;
        self.cache.hit(&e);
        Some(e)
    }

    /// A text read's entry by its bytes as they came, before they are scanned: entries are
    /// stored under the text without trace comments at either end (`analysis::key_text`).
    /// The bytes are tried first: bytes with no such comment are their own keyed text, so a
    /// hit costs no scan for comments, and bytes equal to some statement's keyed text mean
    /// what that statement means. Only when they find nothing is the keyed text worked out
    /// and tried. The key it was found under, and the entry (counted as a hit).
    #[inline(always)]
    pub fn lookup_text(&self, sql: &[u8], mode: &ReadMode) -> Option<(Key, Arc<Entry>)> {
        let k = key(self.st.fingerprint, TAG_TEXT, sql);
        if let Some(e) = self.lookup(k, mode) {
            return Some((k, e));
        }
        let keyed = analysis::key_text(sql);
        if keyed.len() == sql.len() {
            return None;
        }
        let k = key(self.st.fingerprint, TAG_TEXT, keyed);
        self.lookup(k, mode).map(|e| (k, e))
    }

    /// The entry [`lookup`](Self::lookup) would serve, without counting it as served
    /// (`QCACHE EXPLAIN` asks this too).
    pub fn servable(&self, key: Key, mode: &ReadMode) -> Option<Arc<Entry>> {
        let e = self.cache.get(key)?;
        let facts = Facts {
            e: &e,
            versions: self.cache.versions(),
            st: self.st,
        };
        read::may_serve(mode, &facts).then_some(e)
    }

    /// The outdated entry under `key`, if its rule sets `max_stale`, and whether this
    /// session may be served it now (`policy::stale::may_serve_stale`). Asked where an entry
    /// was not found current (a miss) and by `QCACHE EXPLAIN`, never on a hit.
    /// `read_max_stale`: what the rule matching this read's own statement allows (its plan's
    /// options), which must opt in as well as the entry's. `mode`: the
    /// view the read is in, None when it may not use the cache; `shared_level`: entries are
    /// shared through L2, whose copies this instance cannot vouch for when outdated.
    pub fn stale_verdict(
        &self,
        key: Key,
        read_max_stale: Option<std::time::Duration>,
        mode: Option<&ReadMode>,
        shared_level: bool,
    ) -> Option<StaleVerdict> {
        let cache = self.cache;
        // Found outdated first, then asked why (`Stamps::dropped` relies on that order).
        let e = cache.outdated(key)?;
        let facts = stale::Facts {
            max_stale: e.max_stale,
            read_max_stale,
            age: e.created.elapsed(),
            in_transaction: !matches!(mode, Some(ReadMode::Plain)),
            context_untracked: self.st.untracked() || shadowed(self.st, &e),
            own_write: self.st.own_writes.since(e.tables(), e.created),
            dropped: e.stamps.dropped(cache.versions()),
            shared_level,
            refresh_in_flight: cache.filling(key),
        };
        let verdict = stale::may_serve_stale(&facts);
        Some((e, verdict))
    }

    /// The read view a miss may fill the cache in; else why its result is relayed without
    /// a copy: a reason not to cache, or None when the result is already cached and only this
    /// read could not be served from it.
    pub fn fill_view(
        &self,
        plan: &ReadPlan,
        mode: Option<ReadMode>,
    ) -> Result<ReadMode, Option<Reason>> {
        let cache = self.cache;
        read::fill(
            mode,
            |point| point.unchanged(cache.versions(), &plan.tables),
            || cache.holds_servable(plan.key),
        )
    }

    /// How a planned miss starts, asked by the miss and by `QCACHE EXPLAIN` alike: the view
    /// it may fill the cache in ([`fill_view`](Self::fill_view); else why its result is
    /// relayed without a copy), then the outdated entry under its key and whether this
    /// session may be served it ([`stale_verdict`](Self::stale_verdict)). Decides only: the
    /// miss serves or drops the outdated entry.
    pub fn miss_start(
        &self,
        plan: &ReadPlan,
        mode: Option<ReadMode>,
        shared_level: bool,
    ) -> Result<(ReadMode, Option<StaleVerdict>), Option<Reason>> {
        let mode = self.fill_view(plan, mode)?;
        let stale = self.stale_verdict(plan.key, plan.opts.max_stale, Some(&mode), shared_level);
        Ok((mode, stale))
    }
}

/// Whether one of the entry's tables is shadowed by a temporary table of the session.
fn shadowed(st: &SessionState, e: &Entry) -> bool {
    // The set is keyed by owned names: look only when the session has temporary tables, or
    // every hit would copy its tables' names.
    let temp = &st.temp_tables;
    !temp.is_empty()
        && e.tables()
            .any(|t| temp.contains(&(t.schema.clone(), t.name.clone())))
}

/// An entry as `policy::read::may_serve` asks about it: its stamps against the versions,
/// the transaction's writes and the session's temporary tables.
struct Facts<'a> {
    e: &'a Entry,
    versions: &'a Versions,
    st: &'a SessionState,
}

impl read::EntryFacts<Snapshot> for Facts<'_> {
    fn current(&self) -> bool {
        self.e.stamps.is_current(self.versions)
    }

    fn valid_in(&self, point: &Snapshot) -> bool {
        self.e.stamps.valid_in(self.versions, point)
    }

    fn written_in_transaction(&self) -> bool {
        self.st
            .txn
            .writes()
            .is_some_and(|txn| self.e.tables().any(|t| txn.wrote(t)))
    }

    fn locked_in_transaction(&self) -> bool {
        self.st
            .txn
            .writes()
            .is_some_and(|txn| self.e.tables().all(|t| txn.locked(t)))
    }

    fn shadowed(&self) -> bool {
        shadowed(self.st, self.e)
    }
}

/// What a miss's entry is stored with, decided before its query went upstream.
pub struct FillFacts {
    /// The versions of its tables read before the query went upstream.
    pub stamps: crate::cache::Stamps,
    /// Whether it may be stored at all (its tables unchanged since the view's point).
    pub storable: bool,
    /// L2's versions read before the query, when this instance fills L2 too.
    pub l2: Option<L2Stamps>,
}

/// A relayed result as the entry it becomes, or why it is not stored: the server's answer
/// and the copy must qualify (`policy::read::store_verdict`), what a later hit must
/// reproduce of `FOUND_ROWS()` must be known, and an empty result is kept only where its
/// rule says so. The fill's buffer comes back for the next fill either way.
pub fn filled_entry(
    st: &SessionState,
    plan: &ReadPlan,
    sql: &[u8],
    resp: &Response,
    fill: Fill,
    facts: FillFacts,
) -> (Result<Entry, Reason>, BytesMut) {
    let FillFacts {
        stamps,
        storable,
        l2,
    } = facts;
    let shape = match *fill.status_offsets.as_slice() {
        [last] => Some((None, last)),
        [meta, last] => Some((Some(meta), last)),
        _ => None,
    };
    // What the server's FOUND_ROWS() says now, which a later hit must reproduce.
    let limited = st.select_may_be_limited();
    let diag = diagnostics::entry_diagnostics(sql, resp.rows, limited);
    let verdict = read::store_verdict(resp, fill.overflow, storable)
        .or_else(|| stamps.saw_pending().then_some(Reason::DerivedPending))
        .or_else(|| diag.is_none().then_some(Reason::FoundRowsUnknown))
        .or_else(|| stale::store_empty(resp.rows, plan.opts.cache_empty).err());
    let (meta, last) = match (verdict, shape) {
        (None, Some(shape)) => shape,
        (reason, _) => {
            return (
                Err(reason.unwrap_or(Reason::UnexpectedShape)),
                fill.into_scratch(),
            )
        }
    };
    let (bytes, scratch) = fill.take();
    let entry = Entry::new(bytes, last, stamps, plan.digest)
        .with_diagnostics(diag.unwrap_or_default())
        .with_meta_status_at(meta)
        .with_l2(l2);
    (Ok(entry), scratch)
}

/// What every local entry of a planned read carries, however it was filled (from the
/// server, or copied from an L2 hit): its shape for the digests (`shape`: the digest's
/// normalised text when digests are kept), its preview, and its rule's options — the TTL
/// (never later than an expiry the entry already has, such as the filling instance's rule
/// gave it in L2; the store still applies the global TTL) and `max_stale`.
pub fn dressed(entry: Entry, plan: &ReadPlan, sql: &[u8], shape: Option<Arc<str>>) -> Entry {
    let rows = entry.rows;
    let mut entry = entry
        .with_shape(rows, shape)
        .with_sql(&String::from_utf8_lossy(&sql[..sql.len().min(256)]));
    if let Some(ttl) = plan.opts.ttl {
        let by_rule = entry.created.checked_add(ttl);
        entry.expires = match (entry.expires, by_rule) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    entry.max_stale = plan.opts.max_stale;
    entry
}

/// Plans a read: whether it qualifies, the tables it depends on (remembered per digest,
/// default database and catalog generation, else resolved in the catalog), the operator's
/// rules, and the transaction's refusals. The session resolves in between, because an
/// unknown name may first refresh the catalog ([`resolve`](Self::resolve),
/// [`resolved`](Self::resolved)).
pub struct ReadPlanner<'a> {
    pub catalog: &'a Catalog,
    pub plans: &'a ReadPlans,
    pub versions: &'a Versions,
    pub cfg: Arc<Config>,
}

/// The tables a read names and the base tables it depends on, or why it cannot be cached.
pub type Resolved = Result<(Vec<TableName>, Vec<TableName>), Reason>;

/// Where planning a read stands once the statement qualified: the plan memo's answer, or
/// none and its tables are to be resolved.
pub struct PlanStart<'b> {
    pub info: &'b ReadInfo,
    pub remembered: Option<Outcome>,
    ddl_epoch: u64,
    shared_answer: bool,
    generation: u64,
}

impl<'a> ReadPlanner<'a> {
    /// The planner over `shared`, under its configuration now: operator rules apply from the
    /// next miss after a reload.
    pub fn new(shared: &'a crate::shared::Shared) -> ReadPlanner<'a> {
        ReadPlanner {
            catalog: &shared.catalog,
            plans: &shared.plans,
            versions: shared.cache.versions(),
            cfg: shared.config(),
        }
    }

    /// Whether `an` may be planned at all in this session (`policy::read::before_tables`),
    /// and what the plan memo remembers of its tables.
    pub fn start<'b>(
        &self,
        st: &SessionState,
        an: &'b Analysis,
        digest: u64,
        sql: &[u8],
    ) -> Result<PlanStart<'b>, Reason> {
        let settings = analysis::first_keyword_is(sql, "SET")
            .then(|| {
                let text = analysis::server_text(sql, st.server);
                analysis::statement_settings(&String::from_utf8_lossy(&text))
            })
            .flatten();
        let info = match an {
            Analysis::Read(info) => Some(info),
            _ => None,
        };
        read::before_tables(
            info.is_some(),
            st.auto_is_null,
            settings.as_ref().map(|s| s.as_deref()),
        )?;
        // Names in a client character set qcache does not read (latin1's `café`, GBK's
        // backquote bytes): not the ones the catalog and the analysis know.
        if let Some(why) =
            crate::policy::context::names_undecodable(st.client_utf8(), st.db.as_deref(), sql)
        {
            return Err(why);
        }
        let Some(info) = info else {
            return Err(Reason::NotARead);
        };
        // Read before anything is resolved or remembered: a DDL registered after this point
        // stops the fill (the miss's stamps), one registered before it is seen by the
        // resolution.
        let ddl_epoch = self.catalog.ddl_epoch();
        // What resolving gives depends on the session only through its default database,
        // unless its temporary tables shadow names or rules look at the statement. While DDL
        // is pending, the memo (per catalog generation, and the generation moves only when
        // the reload lands) may hold what the DDL changed: resolve afresh, where the pending
        // rule applies.
        let shared_answer = st.temp_tables.is_empty()
            && self.cfg.rules.is_empty()
            && !self.catalog.ddl_pending_any();
        let generation = self.catalog.generation();
        let remembered = shared_answer
            .then(|| self.plans.get(digest, st.db.as_deref(), generation))
            .flatten();
        Ok(PlanStart {
            info,
            remembered,
            ddl_epoch,
            shared_answer,
            generation,
        })
    }

    /// The tables a read names, qualified in the session, and the catalog's answer for them
    /// now. An unknown name may be a table created since the catalog was loaded: the
    /// session refreshes the catalog (rate-limited) and asks again before
    /// [`resolved`](Self::resolved).
    pub fn resolve(
        &self,
        st: &SessionState,
        info: &ReadInfo,
    ) -> Result<(Vec<TableName>, ReadResolution), Reason> {
        let temp = &st.temp_tables;
        let named = read::qualify_tables(info, st.db.as_deref(), |q| temp.contains(q))?;
        let resolution = self.catalog.resolve_read(&named);
        Ok((named, resolution))
    }

    /// The tables a read names and the base tables it depends on (views expanded), or why
    /// it cannot be cached.
    pub fn resolved(&self, named: Vec<TableName>, resolution: ReadResolution) -> Resolved {
        match resolution {
            ReadResolution::Tables(bases) => Ok((named, bases)),
            ReadResolution::Opaque(_) => Err(Reason::OpaqueView),
            // Not while DDL is pending: no read waits on a catalog backlog.
            ReadResolution::DdlPending => Err(Reason::DdlPending),
            // Nothing loaded: the cause is qcache's own access to the server (logged once by
            // the catalog, shown by SHOW QCACHE STATUS and /readyz), not the table.
            ReadResolution::Unknown(_) if !self.catalog.is_loaded() => {
                Err(Reason::CatalogUnavailable)
            }
            ReadResolution::Unknown(_) => Err(Reason::UnknownTable),
        }
    }

    /// The plan, from the memo's answer or the resolution (`resolved`, None when the memo
    /// answered): the resolution is remembered for other sessions when it may be, the
    /// operator's rules are asked (misses only), a read that may give a TIME value the
    /// session's date is refused (`policy::timecol`: asked of this statement's text, never
    /// remembered by digest, whose shape hides its literals; `params`: what is known of an
    /// execute's parameter values), and the transaction may refuse the read.
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        &self,
        st: &SessionState,
        start: PlanStart<'_>,
        key: Key,
        digest: u64,
        sql: &[u8],
        resolved: Option<Resolved>,
        params: timecol::Params,
    ) -> Result<ReadPlan, Reason> {
        let mut opts = crate::rules::Options::default();
        let tables = match (start.remembered, resolved) {
            (Some(outcome), _) => outcome?,
            (None, resolved) => {
                let resolved = resolved.unwrap_or(Err(Reason::UnexpectedShape));
                let outcome: Outcome = resolved.as_ref().map_err(|r| *r).map(|(_, bases)| {
                    bases
                        .iter()
                        .map(|(s, n)| self.versions.table(s, n))
                        .collect()
                });
                // An unknown table may appear with the next catalog refresh, which is
                // rate-limited: asking again is what triggers it.
                if start.shared_answer
                    && !matches!(
                        resolved,
                        Err(Reason::UnknownTable | Reason::CatalogUnavailable | Reason::DdlPending)
                    )
                    && self.catalog.ddl_epoch() == start.ddl_epoch
                {
                    self.plans
                        .insert(digest, st.db.as_deref(), start.generation, outcome.clone());
                }
                let (named, bases) = resolved?;
                if !self.cfg.rules.is_empty() {
                    opts =
                        read::rules_verdict(&self.cfg.rules, named, bases, &st.user, digest, sql)?;
                }
                outcome?
            }
        };
        let temporals = self
            .catalog
            .temporals(tables.iter().map(|t| (t.schema.as_str(), t.name.as_str())));
        let relations: Vec<_> = temporals.iter().map(Option::as_deref).collect();
        timecol::time_with_date(sql, &relations, params)?;
        st.txn
            .read_refusal(|txn| tables.iter().any(|t| txn.wrote(t)))?;
        Ok(ReadPlan {
            key,
            tables,
            digest,
            opts,
            ddl_epoch: start.ddl_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::writes::Changed;
    use crate::engine::World;

    /// What keys and what the server gets of a statement's cache hints, for a text read
    /// and a PREPARE alike.
    #[test]
    fn hints_reach_the_server_only_where_it_accepts_them() {
        use crate::protocol::packets::com;
        let with = |cmd: u8, sql: &str| {
            let mut p = vec![cmd];
            p.extend_from_slice(sql.as_bytes());
            bytes::Bytes::from(p)
        };
        // (rule, command, text, MariaDB, the key's text, the text the server gets)
        let rows = [
            (
                "no hint",
                com::QUERY,
                "SELECT 1",
                false,
                "SELECT 1",
                "SELECT 1",
            ),
            (
                "MariaDB takes them",
                com::QUERY,
                "SELECT SQL_CACHE 1",
                true,
                "SELECT 1",
                "SELECT SQL_CACHE 1",
            ),
            (
                "MySQL does not",
                com::QUERY,
                "SELECT SQL_NO_CACHE 1",
                false,
                "SELECT 1",
                "SELECT 1",
            ),
            (
                "a PREPARE on MySQL keeps its command",
                com::STMT_PREPARE,
                "SELECT SQL_CACHE ?",
                false,
                "SELECT ?",
                "SELECT ?",
            ),
            (
                "a PREPARE on MariaDB",
                com::STMT_PREPARE,
                "SELECT SQL_CACHE ?",
                true,
                "SELECT ?",
                "SELECT SQL_CACHE ?",
            ),
        ];
        for (rule, cmd, sql, mariadb, key, sent) in rows {
            let payload = with(cmd, sql);
            let scan = analysis::scan(sql.as_bytes());
            let (k, p) = hints_for_server(&payload, &scan, mariadb);
            let k = String::from_utf8_lossy(&k);
            assert_eq!(
                k.split_whitespace().collect::<Vec<_>>().join(" "),
                key,
                "{rule}"
            );
            assert_eq!(p[0], cmd, "{rule}");
            let sent_text = String::from_utf8_lossy(&p[1..]);
            let sent_text = sent_text.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(sent_text, sent, "{rule}");
        }
    }

    fn planner<'a>(w: &'a World, plans: &'a ReadPlans) -> ReadPlanner<'a> {
        ReadPlanner {
            catalog: &w.catalog,
            plans,
            versions: &w.versions,
            cfg: w.cfg.clone(),
        }
    }

    /// (rule, default database, statement, a DDL pending, the plan's tables or why not)
    type PlanRow = (
        &'static str,
        Option<&'static str>,
        &'static str,
        bool,
        Result<&'static [&'static str], Reason>,
    );

    /// One row per way planning ends: planned on a table or through a view, and each
    /// refusal of the statement, the names and the catalog.
    #[test]
    fn a_read_plans_on_its_base_tables_or_says_why_not() {
        let rows: &[PlanRow] = &[
            (
                "a read of a table",
                Some("db"),
                "SELECT a FROM child",
                false,
                Ok(&["child"]),
            ),
            (
                "a view is its base tables and itself",
                Some("db"),
                "SELECT id FROM v",
                false,
                Ok(&["parent", "v"]),
            ),
            (
                "qualified names need no default database",
                None,
                "SELECT id FROM db.parent",
                false,
                Ok(&["parent"]),
            ),
            (
                "a write is not a read",
                Some("db"),
                "DELETE FROM child",
                false,
                Err(Reason::NotARead),
            ),
            (
                "an unqualified name without a default database",
                None,
                "SELECT a FROM child",
                false,
                Err(Reason::NoDatabase),
            ),
            (
                "a table the catalog does not hold",
                Some("db"),
                "SELECT a FROM nowhere",
                false,
                Err(Reason::UnknownTable),
            ),
            (
                "a table a pending DDL named",
                Some("db"),
                "SELECT a FROM child",
                true,
                Err(Reason::DdlPending),
            ),
        ];
        for (rule, db, sql, ddl, want) in rows {
            let w = World::new(true);
            if *ddl {
                let changed = Changed {
                    objects: vec![("db".into(), "child".into())],
                    ..Changed::default()
                };
                w.catalog.register_ddl(&changed);
            }
            let plans = ReadPlans::new(16);
            let p = planner(&w, &plans);
            let st = w.session(*db);
            let digest = analysis::digest(sql.as_bytes());
            let an = w.analyzer.analyze(sql.as_bytes(), digest);
            let key = crate::cache::key(st.fingerprint, 0, sql.as_bytes());
            let got = p.start(&st, &an, digest, sql.as_bytes()).and_then(|start| {
                let resolved = p
                    .resolve(&st, start.info)
                    .and_then(|(named, res)| p.resolved(named, res));
                p.finish(
                    &st,
                    start,
                    key,
                    digest,
                    sql.as_bytes(),
                    Some(resolved),
                    timecol::Params::UNKNOWN,
                )
            });
            let got = got.map(|plan| {
                plan.tables
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
            });
            let want = want.map(|ts| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{rule}");
        }
    }

    /// The TIME rule (`policy::timecol`) sits in `finish`, which every path's plan passes
    /// (text, execute, QCACHE EXPLAIN; L2 fills only what was planned), and is asked again
    /// when the memo answers: one row per form over a catalog with TIME columns, a view
    /// and a generated column, each planned twice (the second time from the memo).
    #[test]
    fn a_read_that_may_date_a_time_is_refused_however_planned() {
        use crate::invalidation::catalog::{Catalog, RawCatalog, RawColumn};
        let s = |x: &str| x.to_string();
        let col = |table: &str, name: &str, ordinal: u64, ty: &str, generation: &str| RawColumn {
            schema: s("db"),
            table: s(table),
            name: s(name),
            ordinal,
            data_type: s(ty),
            column_type: s(ty),
            nullable: true,
            generation: s(generation),
            ..RawColumn::default()
        };
        let mut w = World::new(true);
        w.catalog = Catalog::loaded_from(RawCatalog {
            tables: vec![
                (s("db"), s("tt"), s("BASE TABLE")),
                (s("db"), s("g"), s("BASE TABLE")),
                (s("db"), s("plain"), s("BASE TABLE")),
                (s("db"), s("vt"), s("VIEW")),
                (s("db"), s("vc"), s("VIEW")),
                (s("db"), s("vx"), s("VIEW")),
                (s("db"), s("vy"), s("VIEW")),
            ],
            views: vec![
                (
                    s("db"),
                    s("vt"),
                    s("select `db`.`tt`.`id` AS `id`,`db`.`tt`.`tm` AS `tm` from `db`.`tt`"),
                ),
                (
                    s("db"),
                    s("vc"),
                    s("select cast(`db`.`tt`.`tm` as datetime) AS `d` from `db`.`tt`"),
                ),
                (
                    s("db"),
                    s("vx"),
                    s("select `db`.`tt`.`id` AS `id` from `db`.`tt`"),
                ),
                (
                    s("db"),
                    s("vy"),
                    s("select year(`db`.`tt`.`tm`) AS `y` from `db`.`tt`"),
                ),
            ],
            columns: vec![
                col("tt", "id", 1, "int", ""),
                col("tt", "tm", 2, "time", ""),
                col("tt", "dt", 3, "datetime", ""),
                col("g", "id", 1, "int", ""),
                col("plain", "id", 1, "int", ""),
                col("plain", "d", 2, "date", ""),
                col("g", "tm", 2, "time", ""),
                col("g", "y", 3, "int", "year(`tm`)"),
                col("vt", "id", 1, "int", ""),
                col("vt", "tm", 2, "time", ""),
                col("vc", "d", 1, "datetime", ""),
                // vx's and vy's columns are not listed: unknown.
            ],
            ..Default::default()
        });
        let no = Err(Reason::TimeWithDate);
        // (statement, an execute whose values hold no date, the verdict)
        let rows: &[(&str, bool, Result<(), Reason>)] = &[
            ("SELECT tm FROM tt WHERE id = 1", false, Ok(())),
            ("SELECT id FROM tt WHERE tm > '10:00:00'", false, Ok(())),
            (
                "SELECT id FROM tt WHERE tm > '2026-01-01 10:00:00'",
                false,
                no,
            ),
            ("SELECT CAST(tm AS DATETIME) FROM tt", false, no),
            ("SELECT id FROM tt WHERE tm < dt", false, no),
            ("SELECT tm FROM tt UNION SELECT dt FROM tt", false, no),
            ("SELECT DATE(dt) FROM tt", false, Ok(())),
            ("SELECT tm FROM tt WHERE id = ?", true, Ok(())),
            ("SELECT tm FROM tt WHERE tm = ?", false, no),
            ("SELECT YEAR(tm) FROM vt", false, no),
            ("SELECT tm FROM vt WHERE id = 1", false, Ok(())),
            ("SELECT d FROM vc", false, no),
            ("SELECT id FROM g", false, no),
            ("SELECT id FROM vx", false, Ok(())),
            ("SELECT y FROM vy", false, no),
            ("SELECT DATE_FORMAT(id, '%Y') FROM vx", false, no),
            ("SELECT id FROM plain WHERE d = '2026-01-01'", false, Ok(())),
        ];
        let plans = ReadPlans::new(16);
        let p = planner(&w, &plans);
        let st = w.session(Some("db"));
        for (sql, params_ok, want) in rows {
            for round in ["resolved", "remembered"] {
                let digest = analysis::digest(sql.as_bytes());
                let an = w.analyzer.analyze(sql.as_bytes(), digest);
                let key = crate::cache::key(st.fingerprint, 0, sql.as_bytes());
                let got = p.start(&st, &an, digest, sql.as_bytes()).and_then(|start| {
                    let resolved = start.remembered.is_none().then(|| {
                        p.resolve(&st, start.info)
                            .and_then(|(named, res)| p.resolved(named, res))
                    });
                    p.finish(
                        &st,
                        start,
                        key,
                        digest,
                        sql.as_bytes(),
                        resolved,
                        if *params_ok {
                            timecol::Params {
                                not_dates: true,
                                not_times: true,
                            }
                        } else {
                            timecol::Params::UNKNOWN
                        },
                    )
                });
                assert_eq!(got.map(drop), *want, "{round}: {sql}");
            }
        }
    }

    /// What the memo remembers: a resolution for other sessions of the same default
    /// database, never one that may change with the next catalog refresh or a pending DDL.
    #[test]
    fn the_memo_keeps_resolutions_that_outlive_the_session() {
        // (rule, statement, remembered afterwards)
        let rows: &[(&str, &str, bool)] = &[
            ("a resolved read is remembered", "SELECT a FROM child", true),
            (
                "a view is remembered as its base tables",
                "SELECT id FROM v",
                true,
            ),
            (
                "an unknown table is asked again",
                "SELECT a FROM nowhere",
                false,
            ),
        ];
        for (rule, sql, want) in rows {
            let w = World::new(true);
            let plans = ReadPlans::new(16);
            let p = planner(&w, &plans);
            let st = w.session(Some("db"));
            let digest = analysis::digest(sql.as_bytes());
            let an = w.analyzer.analyze(sql.as_bytes(), digest);
            let key = crate::cache::key(st.fingerprint, 0, sql.as_bytes());
            let start = p.start(&st, &an, digest, sql.as_bytes()).unwrap();
            assert!(start.remembered.is_none(), "{rule}: nothing remembered yet");
            let resolved = p
                .resolve(&st, start.info)
                .and_then(|(named, res)| p.resolved(named, res));
            let first = p
                .finish(
                    &st,
                    start,
                    key,
                    digest,
                    sql.as_bytes(),
                    Some(resolved),
                    timecol::Params::UNKNOWN,
                )
                .map(|plan| plan.tables.len());
            let again = p.start(&st, &an, digest, sql.as_bytes()).unwrap();
            assert_eq!(again.remembered.is_some(), *want, "{rule}");
            if *want {
                let second = p
                    .finish(
                        &st,
                        again,
                        key,
                        digest,
                        sql.as_bytes(),
                        None,
                        timecol::Params::UNKNOWN,
                    )
                    .map(|plan| plan.tables.len());
                assert_eq!(first, second, "{rule}: the memo answers as the catalog did");
            }
        }
    }

    /// A text read is found by its bytes as they came, or by its text without trace
    /// comments at either end, under the session's fingerprint only.
    #[test]
    fn a_text_read_is_found_by_its_bytes_or_its_keyed_text() {
        use crate::config::CacheConfig;
        let w = World::new(false);
        let st = w.session(Some("db"));
        let cache = Cache::new(&CacheConfig::default());
        let stored = |text: &[u8], fingerprint: u64| {
            let (bytes, at) = crate::cache::entry::tests::response(0, 10);
            let e = Entry::new(
                bytes,
                at,
                crate::cache::Stamps::capture(cache.versions(), &[]),
                1,
            );
            assert!(cache.insert(key(fingerprint, TAG_TEXT, text), e));
        };
        stored(b"SELECT 1", st.fingerprint);
        stored(b"SELECT 3", st.fingerprint ^ 1);
        let look = Lookup {
            cache: &cache,
            st: &st,
        };
        // (rule, bytes as they came, found under the bytes (true) or the keyed text (false))
        let rows: &[(&str, &[u8], Option<bool>)] = &[
            ("its own bytes", b"SELECT 1", Some(true)),
            (
                "a trace comment before",
                b"/* trace */ SELECT 1",
                Some(false),
            ),
            ("a trace comment after", b"SELECT 1 -- trace", Some(false)),
            ("other bytes", b"SELECT 2", None),
            ("another session's entry", b"SELECT 3", None),
            ("a comment inside is not a trace", b"SELECT /* x */ 1", None),
        ];
        for (rule, sql, want) in rows {
            let got = look
                .lookup_text(sql, &ReadMode::Plain)
                .map(|(k, _)| k == key(st.fingerprint, TAG_TEXT, sql));
            assert_eq!(got, *want, "{rule}");
        }
    }

    /// A rule's TTL shortens an entry's life, never lengthens one it already has; its
    /// `max_stale` is the entry's.
    #[test]
    fn a_dressed_entry_carries_its_rules_options() {
        use std::time::Duration;
        let w = World::new(true);
        let secs = Duration::from_secs;
        // (rule, expiry it had, the rule's TTL, expiry after, in seconds from creation)
        type Row = (&'static str, Option<u64>, Option<u64>, Option<u64>);
        let rows: &[Row] = &[
            ("no rule, no expiry", None, None, None),
            ("the rule's TTL", None, Some(5), Some(5)),
            ("an earlier expiry stays", Some(3), Some(5), Some(3)),
            ("the rule's earlier TTL wins", Some(9), Some(5), Some(5)),
            ("no rule keeps what it had", Some(9), None, Some(9)),
        ];
        for (rule, had, ttl, want) in rows {
            let stamps = crate::cache::Stamps::capture(&w.versions, &[]);
            let mut e = Entry::new(bytes::Bytes::from_static(b"x"), 0, stamps, 1);
            e.expires = had.and_then(|s| e.created.checked_add(secs(s)));
            let created = e.created;
            let plan = ReadPlan {
                key: crate::cache::key(0, 0, b"q"),
                tables: Vec::new().into(),
                digest: 1,
                opts: crate::rules::Options {
                    ttl: ttl.map(secs),
                    max_stale: Some(secs(2)),
                    cache_empty: true,
                },
                ddl_epoch: 0,
            };
            let e = dressed(e, &plan, b"SELECT 1", None);
            assert_eq!(
                e.expires,
                want.and_then(|s| created.checked_add(secs(s))),
                "{rule}"
            );
            assert_eq!(e.max_stale, Some(secs(2)), "{rule}");
        }
    }
}
