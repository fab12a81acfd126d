//! Reads through the cache: the hit (before and after the scan), the plan of a miss (the
//! policy's verdict, the tables it depends on, operator rules), and the fill that stores a
//! clean result. Counts every reason not to cache.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Session, SessionError};
use crate::analysis::{self, Analysis, ReadInfo};
use crate::cache::{key, Claim, Entry, FillGuard, Key, TableHandle};
use crate::clock;
use crate::engine::exchange;
use crate::engine::fill::{Fill, FillStamps};
use crate::engine::read::{
    dressed, hints_for_server, keep_plan, with_plan, Lookup, ReadMode, ReadPlan, ReadPlanner,
};
use crate::engine::store::{store_fill, FillTarget, L2Fill};
use crate::engine::Planner;
use crate::invalidation::catalog::{ReadResolution, TableName};
use crate::l2;
use crate::policy::decide::{Answer, Decide, Step};
use crate::policy::read::{self, Planned};
use crate::policy::Reason;
use crate::protocol::codec::Packet;
use crate::protocol::response::{Expect, Response};
use tracing::info;

use crate::cache::key::TAG_TEXT;

impl Session {
    /// A hit served before the statement is scanned, the lexer being a seventh of a hit's
    /// cost. Only in a session with query_cache_type ON whose context is tracked, and only
    /// under the statement's own bytes: entries are stored under the hint-free text of one
    /// cacheable SELECT, and equal bytes scan alike, so bytes that find an entry are that
    /// SELECT, without hints, in a session that wants it. Anything else (a hint, a write, a
    /// multi-statement, a DEMAND session) finds nothing or is not tried, and is scanned.
    /// None when not tried, Some(served) when looked up.
    pub(super) async fn hit_before_scan(
        &mut self,
        sql: &Bytes,
    ) -> Result<Option<bool>, SessionError> {
        let Some(mode) = self.before_scan_mode(sql, clock::now()) else {
            return Ok(None);
        };
        // The rare awaits of a hit are boxed: this future is built for every COM_QUERY, and
        // their larger ones inside it wrote cold lines on every hit (#36).
        if !self.privileges_current() && !Box::pin(self.refresh_privileges()).await? {
            return Ok(None);
        }
        let started = clock::now();
        let Some((k, e)) = self.cached().lookup_text(sql, &mode) else {
            return Ok(Some(false));
        };
        if self.shared.l2_remote && !Box::pin(self.l2_confirm(k, &e)).await {
            return Ok(Some(false));
        }
        self.serve_hit(&e, started).await?;
        Ok(Some(true))
    }

    /// [`hit_before_scan`](Self::hit_before_scan) when it needs no await: the privileges
    /// current, no L2 to confirm with, no keep-alive due. What the command loop tries
    /// before it builds the command's future (#36). None when not tried (then nothing
    /// happened: the full path runs), Some(served) when looked up; a hit is answered
    /// into the client's write buffer, which the loop flushes next.
    pub(super) fn text_hit_at_once(&mut self, sql: &[u8]) -> Option<bool> {
        let started = clock::now();
        let mode = self.before_scan_mode(sql, started)?;
        if !self.privileges_current() || self.shared.l2_remote {
            return None;
        }
        if self.keep_alive_due(started) {
            return None;
        }
        let Some((_, e)) = self.cached().lookup_text(sql, &mode) else {
            return Some(false);
        };
        self.answer_hit(&e, started);
        let took = clock::between(started, clock::now());
        self.shared.latencies.hit.observe_ns(took);
        Some(true)
    }

    /// The checks of [`hit_before_scan`](Self::hit_before_scan) that need no await: the
    /// view a statement's bytes may be looked up in before they are scanned, if any.
    fn before_scan_mode(&mut self, sql: &[u8], now: u64) -> Option<ReadMode> {
        // Writes and everything else not starting with SELECT skip the hashing (a statement
        // led by a trace comment goes the full way, which keys it without the comment).
        let select = sql
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"select"));
        if !read::before_scan(select, &self.read_facts(), self.st.ctx_stale) {
            return None;
        }
        let mode = self.read_mode_at(now)?;
        // Who the session is must be asked first (`may_ask_identity`): the full path decides.
        self.st.identity.as_ref()?;
        Some(mode)
    }

    /// `looked_up`: [`hit_before_scan`](Self::hit_before_scan) already tried the
    /// statement's bytes as they are.
    pub(super) async fn select(
        &mut self,
        pkt: Packet,
        sql: &Bytes,
        scan: &analysis::Scan,
        looked_up: bool,
    ) -> Result<(), SessionError> {
        // The hint-free text keys and is analysed; the server gets the hints only where it
        // accepts them.
        let (stmt, payload) = if scan.hint_spans.is_empty() {
            (sql.clone(), pkt.payload.clone())
        } else {
            hints_for_server(&pkt.payload, scan, self.st.mariadb)
        };
        // The steps of `policy::decide`, carried out: the machine decides, this does the I/O.
        let facts = self.settled_read_facts().await;
        let tried = looked_up && scan.hint_spans.is_empty();
        let (mut d, mut step) = Decide::start(&facts, scan.hint, true, tried);
        let mut keyed = None;
        let mut analysed = None;
        let mut kept = None;
        loop {
            let answer = match step {
                Step::Identify => Answer::Identified(self.identify_for(&stmt).await?),
                Step::Via => Answer::Came {
                    via: read::Via::Text,
                    view: self.st.txn.read_view(),
                    hits_suspended: self.shared.hits_suspended(),
                },
                Step::Key => {
                    keyed = Some(key(
                        self.st.fingerprint,
                        TAG_TEXT,
                        analysis::key_text(&stmt),
                    ));
                    Answer::Keyed
                }
                // The machine keys before it consults or plans; were it not so, nothing is
                // served and nothing stored.
                Step::Consult(mode) => match keyed {
                    Some(k) => Answer::Looked(self.consult(k, &mode).await?),
                    None => Answer::Looked(false),
                },
                Step::Local => match self.session_variable_answer(&stmt) {
                    Some(v) => return self.answer_variable(&pkt, v).await,
                    None => Answer::Local(false),
                },
                Step::Plan => {
                    let text = analysis::server_text(&stmt, self.st.server);
                    let digest = analysis::digest(&text);
                    self.note_digest(digest);
                    let an = self.shared.analyzer.analyze(&text, digest);
                    let plan = match keyed {
                        Some(k) => {
                            self.plan_read(
                                &an,
                                k,
                                digest,
                                &stmt,
                                crate::policy::timecol::Params::UNKNOWN,
                            )
                            .await
                        }
                        None => Err(Reason::UnexpectedShape),
                    };
                    analysed = Some(an);
                    Answer::Planned(keep_plan(plan, &mut kept))
                }
                Step::Served => return Ok(()),
                Step::Decided(planned, mode) => {
                    let an = match analysed {
                        Some(an) => an,
                        None => self.analysis_of(&stmt, None),
                    };
                    let planned = with_plan(planned, kept);
                    return self
                        .carry_out(planned, &an, pkt.seq, &payload, &payload[1..], mode)
                        .await
                        .map(drop);
                }
            };
            step = d.next(answer);
        }
    }

    /// [`read_facts`](Self::read_facts) for a read about to be admitted: stored code that
    /// ran before the catalog's first load is judged once that load is done, waited for as a
    /// read's table resolution waits for it, so that the session's first reads are not
    /// refused only because the catalog was still loading.
    pub(super) async fn settled_read_facts(&mut self) -> read::Session {
        if self.facts_wait() {
            // Boxed, as the hit's rare awaits are (`hit_before_scan`).
            let _ = Box::pin(
                self.shared
                    .catalog
                    .refresh_if_older(Duration::from_millis(100)),
            )
            .await;
        }
        self.read_facts()
    }

    /// Whether [`settled_read_facts`](Self::settled_read_facts) waits for the catalog.
    #[inline]
    pub(super) fn facts_wait(&self) -> bool {
        self.st.temporaries_unknown && !self.shared.catalog.is_loaded()
    }

    /// What the read decisions (`policy::read`) read of the session.
    /// Stored code that ran earlier and that the catalog could not judge then is judged
    /// again first (`policy::classify::after_stored_code`).
    pub(super) fn read_facts(&mut self) -> read::Session {
        if self.st.temporaries_unknown {
            Planner::new(&self.shared).temporaries_after_code(&mut self.st);
        }
        if self.st.qct_pending.is_some() {
            Planner::new(&self.shared).judge_pending_qct(&mut self.st);
        }
        read::Session {
            qct: self.st.qct,
            lost_track: self.st.untracked(),
            temporaries_unknown: self.st.temporaries_unknown,
            quiet: self.st.recorders().reason(),
        }
    }

    /// Once a read is admitted: re-reads the settings a trigger may have changed (the key
    /// holds the settings the server has), and asks who the session is when it must (the
    /// key holds the account, role and privilege generation the server reports). Whether
    /// the session is identified.
    pub(super) async fn identify_for(&mut self, stmt: &[u8]) -> Result<bool, SessionError> {
        if self.identified_now() {
            return Ok(true);
        }
        self.reread_stale_context(stmt).await?;
        Ok(self.privileges_current()
            || (self.may_ask_identity(stmt) && self.refresh_privileges().await?))
    }

    /// Whether [`identify_for`](Self::identify_for) has nothing to ask: no setting to read
    /// back and the identity current.
    pub(super) fn identified_now(&self) -> bool {
        !self.st.ctx_stale && self.privileges_current()
    }

    /// Serves `key` when an entry this session may be served is cached (L1, confirmed by L2
    /// when entries are shared remotely). Whether it was served.
    pub(super) async fn consult(
        &mut self,
        key: Key,
        mode: &ReadMode,
    ) -> Result<bool, SessionError> {
        let started = clock::now();
        let Some(e) = self.lookup(key, mode) else {
            return Ok(false);
        };
        if self.shared.l2_remote && !self.l2_confirm(key, &e).await {
            return Ok(false);
        }
        self.serve_hit(&e, started).await?;
        Ok(true)
    }

    /// Carries out a planned read (`policy::read::settle`): a miss that fills, or a relay
    /// that first plans what the read may write when it is not one the cache could hold.
    /// Whether `payload` went upstream (a session served from another's fill sent nothing).
    pub(super) async fn carry_out(
        &mut self,
        planned: Planned<ReadPlan>,
        an: &Analysis,
        seq: u8,
        payload: &Bytes,
        sql: &[u8],
        mode: Option<ReadMode>,
    ) -> Result<bool, SessionError> {
        match planned {
            Planned::Fill(plan) => self.miss(seq, payload, sql, plan, mode).await,
            Planned::Relay { reason, cacheable } => {
                if !cacheable {
                    Planner::new(&self.shared).plan_side_effects(&mut self.st, an, sql);
                }
                let resp = self.forward_read(seq, payload, None, cacheable).await?;
                self.note_not_cached(read::reason_answered(
                    reason,
                    resp.err_code.filter(|_| resp.error),
                ));
                Ok(true)
            }
        }
    }

    /// Whether the session's identity may be asked before `stmt` (when it is not known
    /// yet: after connect, reset, change-user, SET ROLE). The ask is a SELECT of its own,
    /// which leaves `FOUND_ROWS()` 1 and `ROW_COUNT()` -1: harmless before a read of tables,
    /// which sets both (and clears the warnings) itself, but not before `SELECT FOUND_ROWS()`,
    /// `SELECT ROW_COUNT()`, `SELECT @@warning_count`, which read them. Such a statement is
    /// never cached, so it does without: only statements that name tables ask.
    pub(super) fn may_ask_identity(&self, stmt: &[u8]) -> bool {
        self.st.identity.is_some() || self.analysis_of(stmt, None).reads_tables()
    }

    /// What the analysis says of `stmt` (memoised by digest; `digest` when already known).
    pub(super) fn analysis_of(&self, stmt: &[u8], digest: Option<u64>) -> Arc<Analysis> {
        self.shared.analyzer.of(stmt, self.st.server, digest)
    }

    /// The snapshot rules that apply to a read now; None when the cache cannot be used at
    /// all for this read, as of `now` (a clock the hit already read).
    fn read_mode_at(&self, now: u64) -> Option<ReadMode> {
        if self.shared.hits_suspended_at(now) {
            return None;
        }
        self.st.txn.read_view()
    }

    /// What the cache holds for this session's reads (`engine::read::Lookup`).
    #[inline(always)]
    pub(super) fn cached(&self) -> Lookup<'_> {
        Lookup {
            cache: &self.shared.cache,
            st: &self.st,
        }
    }

    /// A cached entry this session may be served, if any (counted as a hit).
    #[inline(always)]
    pub(super) fn lookup(&self, key: Key, mode: &ReadMode) -> Option<Arc<Entry>> {
        self.cached().lookup(key, mode)
    }

    /// `started` is when the lookup began: the hit-latency histogram covers lookup and
    /// write, one clock pair per hit.
    pub(super) async fn serve_hit(&mut self, e: &Entry, started: u64) -> Result<(), SessionError> {
        self.answer_hit(e, started);
        if self.keep_alive_due(started) {
            // Boxed, as the hit's rare awaits are (`hit_before_scan`).
            Box::pin(self.keep_upstream_alive()).await?;
        }
        self.client
            .flush_if_large()
            .await
            .map_err(SessionError::client)?;
        let took = clock::between(started, clock::now());
        self.shared.latencies.hit.observe_ns(took);
        Ok(())
    }

    /// What every hit does before it is flushed: the entry written with the session's
    /// status flags, the diagnostics it leaves owed, its statistics.
    pub(super) fn answer_hit(&mut self, e: &Entry, started: u64) {
        let st = self.st.txn.status();
        e.write_patched(st, self.client.wbuf());
        self.st.after_hit = Some(e.found_rows);
        self.note_hit(e, started);
    }

    /// Every hit is a command the server would have seen: its idle timers must not run out
    /// while the client is busy. Whether a hit at `now` must first send the server one.
    pub(super) fn keep_alive_due(&self, now: u64) -> bool {
        self.upstream
            .last_flush()
            .is_some_and(|t| clock::between(t, now) > clock::nanos(self.st.keep_alive_after))
    }

    /// Decides whether a read can be cached and on which tables it depends
    /// (`engine::read::ReadPlanner`); resolving its tables may refresh the catalog.
    /// `params`: what is known of an execute's parameter values
    /// (`policy::timecol::params_known`); nothing for text.
    pub(super) async fn plan_read(
        &mut self,
        an: &Analysis,
        key: Key,
        digest: u64,
        sql: &[u8],
        params: crate::policy::timecol::Params,
    ) -> Result<ReadPlan, Reason> {
        let planner = ReadPlanner::new(&self.shared);
        let start = planner.start(&self.st, an, digest, sql)?;
        let resolved = match start.remembered {
            Some(_) => None,
            None => Some(self.resolve_tables(start.info).await),
        };
        planner.finish(&self.st, start, key, digest, sql, resolved, params)
    }

    /// The tables a read names, qualified, and the base tables it depends on (views
    /// expanded), or why it cannot be cached.
    pub(super) async fn resolve_tables(
        &self,
        info: &ReadInfo,
    ) -> Result<(Vec<TableName>, Vec<TableName>), Reason> {
        let planner = ReadPlanner::new(&self.shared);
        let (named, mut resolution) = planner.resolve(&self.st, info)?;
        if matches!(resolution, ReadResolution::Unknown(_)) {
            // A table created since the catalog was loaded, by someone qcache did not see.
            // Rate-limited: a name that stays unknown (a temporary table of another
            // session, a typo) must not reload the catalog on every query.
            let catalog = &self.shared.catalog;
            let _ = catalog.refresh_if_older(Duration::from_millis(100)).await;
            resolution = catalog.resolve_read(&named);
        }
        planner.resolved(named, resolution)
    }

    /// Forwards a read and stores its result when it qualifies.
    /// Returns whether `payload` went upstream: a session that waited for another's fill
    /// and was served from it sent nothing.
    /// `sql` is the statement's text, for `SHOW QCACHE ENTRIES` (an execute's payload holds
    /// only the statement id and parameters).
    pub(super) async fn miss(
        &mut self,
        seq: u8,
        payload: &Bytes,
        sql: &[u8],
        plan: ReadPlan,
        mode: Option<ReadMode>,
    ) -> Result<bool, SessionError> {
        let started = clock::now();
        let start = self.cached().miss_start(&plan, mode, self.shared.l2_remote);
        let (mode, stale) = match start {
            Ok(start) => start,
            Err(reason) => {
                return self
                    .relay_uncached(seq, payload, &plan.tables, reason)
                    .await
            }
        };
        // Another session is refreshing an entry a change of rows outdated: under a
        // `max_stale` rule this one may be served it rather than wait (`policy::stale`,
        // counted in Qcache_stale_served); one no session may ever be served again is dropped.
        match stale {
            Some((e, Ok(_))) => {
                self.shared.cache.stale_hit(&e);
                self.cur.stale = true;
                self.serve_hit(&e, started).await?;
                return Ok(false);
            }
            Some((e, Err(why))) if why.permanent() => self.shared.cache.drop_outdated(plan.key, &e),
            _ => {}
        }
        let planner = Planner::new(&self.shared);
        let fill = match planner.fill_stamps(&self.st, &plan.tables, plan.ddl_epoch, sql, payload) {
            Ok(fill) => fill,
            Err(reason) => {
                return self
                    .relay_uncached(seq, payload, &plan.tables, Some(reason))
                    .await
            }
        };
        // The bumps these stamps include, as L2 counts them (after the stamps: every bump
        // is queued before it moves a local version, and the fence orders the reads).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let l2_queued = self.shared.l2.as_ref().map_or(0, |l| l.queued());
        let Some((guard, l2_fill)) = self.claim_fill(&plan, &mode, &fill, l2_queued, sql).await?
        else {
            return Ok(false);
        };
        let versions = self.shared.cache.versions();
        let params = self
            .shared
            .config()
            .cache
            .patch_aggregates
            .then(|| crate::engine::patch::execute_params(&self.st, payload))
            .flatten();
        let target = FillTarget::new(
            versions,
            fill.stamps,
            &mode,
            guard,
            l2_fill,
            (payload, params),
        );
        self.forward_fill(seq, payload, sql, &plan, target).await?;
        Ok(true)
    }

    /// Relays a read without a copy, counting `reason` (None: its result is cached and only
    /// this read could not be served from it). Returns that the payload went upstream.
    async fn relay_uncached(
        &mut self,
        seq: u8,
        payload: &[u8],
        tables: &[TableHandle],
        reason: Option<Reason>,
    ) -> Result<bool, SessionError> {
        let resp = self.forward_read(seq, payload, None, true).await?;
        if let Some(reason) = reason {
            self.note_not_cached(read::reason_answered(
                reason,
                resp.err_code.filter(|_| resp.error),
            ));
        }
        exchange::read_answered(&mut self.st, tables, &resp);
        Ok(true)
    }

    /// Stampede protection: one session fills a key, the others wait for its result. The
    /// leader asks L2 before the server where `policy::l2` allows. None when the read was
    /// served (from another session's fill, or L2's copy); else this session's claim (None
    /// when it waited in vain) and what L2 said to carry into the fill.
    async fn claim_fill(
        &mut self,
        plan: &ReadPlan,
        mode: &ReadMode,
        fill: &FillStamps,
        l2_queued: u64,
        sql: &[u8],
    ) -> Result<Option<(Option<FillGuard>, Option<L2Fill>)>, SessionError> {
        let mut guard = match self.shared.cache.claim(plan.key) {
            Claim::Leader(g) => Some(g),
            Claim::Follower(w) => {
                w.wait(self.shared.config().cache.stampede_timeout).await;
                if self.consult(plan.key, mode).await? {
                    return Ok(None);
                }
                None
            }
        };
        let l2 = self
            .shared
            .l2
            .as_ref()
            .filter(|l| guard.is_some() && self.cached().asks_l2_first(mode, l.usable()));
        let Some(l2) = l2 else {
            return Ok(Some((guard, None)));
        };
        let generation = fill.planned.generation;
        let catalog = &self.shared.catalog;
        let planned_current = || catalog.generation() == generation;
        let privileges = self.privilege_stamps();
        let step = l2
            .before_fill(
                plan.key,
                &plan.tables,
                fill.slicing(),
                planned_current,
                l2_queued,
                &privileges,
            )
            .await;
        match step {
            l2::read::Step::Hit(hit, l2_stamps, settled) => {
                if let Some(g) = guard.take() {
                    // Dressed as a fill from the server is (`local_entry`): a copy that
                    // lacked the rule's TTL or `max_stale` would live or be served otherwise
                    // than the entry it stands for.
                    let entry = Entry::from_l2(hit, fill.stamps.clone(), crate::l2::now_ms())
                        .with_l2(Some(l2_stamps));
                    let entry = self.local_entry(entry, plan, sql);
                    self.serve_l2_hit(g, entry, settled).await?;
                    return Ok(None);
                }
                Ok(Some((guard, None)))
            }
            l2::read::Step::Fill { stamps, leased } => Ok(Some((guard, Some((stamps, leased))))),
        }
    }

    /// Sends a miss upstream teeing its result into a fill, then stores it when it
    /// qualifies (`store_fill`).
    async fn forward_fill(
        &mut self,
        seq: u8,
        payload: &[u8],
        sql: &[u8],
        plan: &ReadPlan,
        mut target: FillTarget,
    ) -> Result<(), SessionError> {
        let cfg = self.shared.config();
        let mut fill = Fill::new(
            cfg.cache.max_result_bytes,
            std::mem::take(&mut self.fill_scratch),
        );
        let sent = Instant::now();
        let resp = self
            .forward_read(seq, payload, Some(&mut fill), true)
            .await?;
        exchange::read_answered(&mut self.st, &plan.tables, &resp);
        let took = sent.elapsed();
        target.took_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.shared.latencies.miss.observe(took);
        if cfg.log.slow_miss.is_some_and(|t| took > t) {
            info!(
                digest = %format!("{:016x}", plan.digest),
                ms = took.as_secs_f64() * 1e3,
                "slow miss"
            );
        }
        self.store_fill(plan, sql, &resp, fill, target);
        Ok(())
    }

    /// Stores a relayed result when it qualifies (`engine::store::store_fill`); else counts
    /// why not.
    fn store_fill(
        &mut self,
        plan: &ReadPlan,
        sql: &[u8],
        resp: &Response,
        fill: Fill,
        target: FillTarget,
    ) {
        let shape = || self.shape_text(plan.digest, sql);
        let (stored, scratch) =
            store_fill(&self.shared, &self.st, plan, sql, resp, fill, target, shape);
        self.fill_scratch = scratch;
        match stored {
            Ok(stored) => self.cur.stored = stored,
            Err(reason) => self.note_not_cached(reason),
        }
    }

    /// The entry of a planned read as every local entry is (`engine::read::dressed`).
    pub(super) fn local_entry(&self, entry: Entry, plan: &ReadPlan, sql: &[u8]) -> Entry {
        dressed(entry, plan, sql, self.shape_text(plan.digest, sql))
    }

    /// Sends a read upstream (its snapshot point is taken as it is sent, `exchange_as`).
    /// `cacheable_read`: a read the cache could hold, so it calls nothing that writes and may go
    /// up in one write with a deferred BEGIN.
    pub(super) async fn forward_read(
        &mut self,
        seq: u8,
        payload: &[u8],
        fill: Option<&mut Fill>,
        cacheable_read: bool,
    ) -> Result<Response, SessionError> {
        let sent = Instant::now();
        let resp = self
            .exchange_as(seq, payload, Expect::Results, fill, cacheable_read, None)
            .await?;
        self.note_sent(&resp, sent, sent.elapsed());
        self.st.txn.read_forwarded(cacheable_read);
        self.read_answer = Some(crate::engine::prepared::ReadAnswer::of(&resp));
        Ok(resp)
    }

    pub(super) fn note_not_cached(&mut self, reason: Reason) {
        self.shared.cache.stats().not_cached(reason);
        self.cur.read = true;
        self.cur.reason.get_or_insert(reason);
    }
}
