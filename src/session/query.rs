//! COM_QUERY and the prepared-statement commands: reads through the cache, writes with
//! invalidation, session statements followed or answered by qcache.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use super::diagnostics::{Rewrite, CLIENT_LEG_STATUS};
use super::l2::L2Step;
use super::plans::Outcome;
use super::relay::{Fill, KEEP_SCRATCH};
use super::state::Prepared;
use super::{Session, SessionError};
use crate::admin::{rules, statements};
use crate::analysis::{self, Analysis, Hint, Kind, QcAssign, ReadInfo, WriteInfo, WriteTargets};
use crate::cache::l2::{now_ms, L2Entry};
use crate::cache::{key, Claim, Entry, Key, Stamps, TableHandle};
use crate::config::{Conservative, QueryCacheType};
use crate::invalidation::catalog::{ReadResolution, TableName};
use crate::policy::classify;
// Why a read may use the cache, and under which snapshot rules.
use crate::policy::snapshot::{self, ReadView};
type ReadMode = ReadView<crate::cache::Snapshot>;
use crate::policy::diagnostics;
use crate::policy::privileges::{self, PrivilegeChange};
use crate::protocol::codec::Packet;
use crate::protocol::commands::{self, ExecuteParams};
use crate::protocol::packets::{self, com, status};
use crate::protocol::response::{Expect, Response};
use tracing::info;

/// Key tags: the same SQL answered in the text and the binary protocol has different bytes.
const TAG_TEXT: u8 = 1;
const TAG_BINARY: u8 = 2;

/// Schemas whose contents change without writes qcache could see.
const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

/// A cacheable read on a miss: its key, the tables it depends on, the payload to send.
struct ReadPlan {
    key: Key,
    tables: Arc<[TableHandle]>,
    digest: u64,
    /// From a `cache` rule with a TTL: the entry expires this long after it is stored.
    ttl: Option<Duration>,
}

impl Session {
    pub(crate) async fn query(&mut self, pkt: Packet) -> Result<(), SessionError> {
        let sql = pkt.payload.slice(1..);
        let looked_up = match self.hit_before_scan(&sql).await? {
            Some(true) => return Ok(()),
            Some(false) => true,
            None => false,
        };
        // The statement as the server reads it: versioned comments it skips are comments.
        // Same length as `sql`, so the scan's hint spans apply to `sql` too.
        let text = analysis::server_text(&sql, self.st.server);
        let scan = analysis::scan(&text);
        if scan.multi {
            return self.multi_statement(pkt, &text).await;
        }
        if matches!(scan.kind, Kind::Show | Kind::Other) && self.admin_statement(&pkt, &sql).await?
        {
            return Ok(());
        }
        if let Some(why) = classify::relayed_write(scan.kind, &text) {
            self.plan_unknown_write_for(why);
        }
        match scan.kind {
            Kind::Select => self.select(pkt, &sql, &scan, looked_up).await,
            Kind::Set => self.set_statement(pkt, &sql).await,
            Kind::Show => {
                if let Some(rows) = self.qcache_status_rows(&sql) {
                    return self.send_status_rows(rows).await;
                }
                if let Some(rw) = self.own_show_values(&sql) {
                    return self.relay_rewriting(&pkt, rw).await;
                }
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            Kind::Flush | Kind::Reset => self.flush_or_reset(pkt, &sql, scan.kind).await,
            Kind::Write => self.write(&pkt, &sql, analysis::digest(&text)).await,
            Kind::Call | Kind::Execute => {
                // A procedure or a SQL-level prepared statement may write any table and
                // SET any variable: invalidate as configured and stop trusting the context.
                self.plan_call();
                self.relay_command(&pkt, Expect::Results).await?;
                Ok(())
            }
            Kind::Begin | Kind::Commit | Kind::Rollback => {
                if self
                    .answer_transaction_locally(pkt.seq, &sql, scan.kind)
                    .await?
                {
                    return Ok(());
                }
                // Its snapshot point, however it is spelled (WITH CONSISTENT SNAPSHOT, XA
                // START), is taken as it is sent, like every statement's (`exchange_as`).
                self.st.txn_boundary = true;
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            Kind::Use => {
                let resp = self.relay_command(&pkt, Expect::Results).await?;
                if resp.oks > 0 && !resp.error {
                    if let Some(db) = analysis::use_schema(&String::from_utf8_lossy(&sql)) {
                        self.st.set_db(Some(db));
                    }
                }
                Ok(())
            }
            _ => self.relay_command(&pkt, Expect::Results).await.map(drop),
        }
    }

    /// Several statements in one COM_QUERY: each is looked at for what it changes; nothing
    /// of it is cached.
    /// `sql` is the statement as the server reads it ([`analysis::server_text`]).
    async fn multi_statement(&mut self, pkt: Packet, sql: &[u8]) -> Result<(), SessionError> {
        let mut lost = false;
        let mut writes = Vec::new();
        for part in analysis::split_statements(sql) {
            self.plan_privileges(part);
            let scan = analysis::scan(part);
            match scan.kind {
                Kind::Write => {
                    let an = analysis::analyze(&String::from_utf8_lossy(part));
                    match an {
                        Analysis::Write(w) => {
                            self.plan_write(&w);
                            // Whether or not it ran: forgetting the database is only
                            // conservative.
                            self.forget_dropped_db(&w);
                            writes.push(w);
                        }
                        _ => self.plan_unknown_write(),
                    }
                }
                Kind::Call | Kind::Execute => self.plan_call(),
                Kind::Set => {
                    lost = true;
                    let text = String::from_utf8_lossy(part);
                    let info = analysis::analyze_set(&text);
                    if let Some(why) = classify::set_writes(info.as_ref(), &text) {
                        self.plan_unknown_write_for(why);
                    }
                }
                Kind::Use => lost = true,
                Kind::Select => {
                    if let Analysis::Read(r) = analysis::analyze(&String::from_utf8_lossy(part)) {
                        if r.may_write {
                            self.plan_unknown_write();
                        }
                    }
                }
                k => {
                    if matches!(k, Kind::Begin | Kind::Commit | Kind::Rollback) {
                        self.st.txn_boundary = true;
                    }
                    if let Some(why) = classify::relayed_write(k, part) {
                        self.plan_unknown_write_for(why);
                    }
                }
            }
        }
        self.note_not_cached("multi_statement");
        self.relay_command(&pkt, Expect::Results).await?;
        // Which statements ran is not followed: a temporary table any of them may have
        // created or renamed is one from now on.
        for w in &writes {
            self.track_temporary(w, classify::Outcome::Maybe);
        }
        if lost {
            // Session state changed in ways qcache does not replay statement by statement.
            self.st.lost_track = true;
        }
        Ok(())
    }

    // ----- reads -------------------------------------------------------------------------

    /// A hit served before the statement is scanned, the lexer being a seventh of a hit's
    /// cost. Only in a session with query_cache_type ON whose context is tracked, and only
    /// under the statement's own bytes: entries are stored under the hint-free text of one
    /// cacheable SELECT, and equal bytes scan alike, so bytes that find an entry are that
    /// SELECT, without hints, in a session that wants it. Anything else (a hint, a write, a
    /// multi-statement, a DEMAND session) finds nothing or is not tried, and is scanned.
    /// None when not tried, Some(served) when looked up.
    async fn hit_before_scan(&mut self, sql: &Bytes) -> Result<Option<bool>, SessionError> {
        // Writes and everything else not starting with SELECT skip the hashing.
        let select = sql
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"select"));
        if !select || self.st.qct != QueryCacheType::On || self.st.lost_track {
            return Ok(None);
        }
        let Some(mode) = self.read_mode() else {
            return Ok(None);
        };
        if !self.privileges_current() && !self.refresh_privileges().await? {
            return Ok(None);
        }
        let started = Instant::now();
        let k = key(self.st.fingerprint, TAG_TEXT, sql);
        let Some(e) = self.lookup(k, &mode) else {
            return Ok(Some(false));
        };
        if self.shared.l2_remote && !self.l2_confirm(k, &e).await {
            return Ok(Some(false));
        }
        self.serve_hit(&e, started).await?;
        Ok(Some(true))
    }

    /// `looked_up`: [`hit_before_scan`](Self::hit_before_scan) already tried the
    /// statement's bytes as they are.
    async fn select(
        &mut self,
        pkt: Packet,
        sql: &Bytes,
        scan: &analysis::Scan,
        looked_up: bool,
    ) -> Result<(), SessionError> {
        // MySQL 8.0 rejects SQL_CACHE and warns on SQL_NO_CACHE: the server never sees them.
        let stmt: Bytes = if scan.hint_spans.is_empty() {
            sql.clone()
        } else {
            Bytes::from(analysis::strip_hints(sql, scan).into_owned())
        };
        let payload = if scan.hint_spans.is_empty() {
            pkt.payload.clone()
        } else {
            let mut p = BytesMut::with_capacity(stmt.len() + 1);
            p.put_u8(com::QUERY);
            p.put_slice(&stmt);
            p.freeze()
        };
        let wanted = wants_cache(self.st.qct, scan.hint);
        if !wanted || self.st.lost_track {
            if let Some(v) = self.session_variable_answer(&stmt) {
                return self.answer_variable(&pkt, v).await;
            }
            self.note_not_cached(if self.st.lost_track {
                "session_untracked"
            } else {
                "not_requested"
            });
            return self
                .forward_read(pkt.seq, &payload, None, false)
                .await
                .map(drop);
        }
        // The key holds the account, role and privilege generation the server reports.
        let identified = self.privileges_current() || self.refresh_privileges().await?;
        let mode = self.read_mode().filter(|_| identified);
        let key = key(self.st.fingerprint, TAG_TEXT, &stmt);
        let tried = looked_up && scan.hint_spans.is_empty();
        if let (Some(mode), false) = (&mode, tried) {
            let started = Instant::now();
            if let Some(e) = self.lookup(key, mode) {
                if !self.shared.l2_remote || self.l2_confirm(key, &e).await {
                    return self.serve_hit(&e, started).await;
                }
            }
        }
        // Miss: from here on parsing is allowed.
        if let Some(v) = self.session_variable_answer(&stmt) {
            return self.answer_variable(&pkt, v).await;
        }
        let text = analysis::server_text(&stmt, self.st.server);
        let digest = analysis::digest(&text);
        let an = self.shared.analyzer.analyze(&text, digest);
        let plan = match self.plan_read(&an, key, digest, &stmt).await {
            Ok(_) if !identified => {
                self.note_not_cached("identity_unknown");
                return self
                    .forward_read(pkt.seq, &payload, None, true)
                    .await
                    .map(drop);
            }
            Ok(plan) => plan,
            Err(reason) => {
                self.note_not_cached(reason);
                self.plan_side_effects(&an);
                return self
                    .forward_read(pkt.seq, &payload, None, false)
                    .await
                    .map(drop);
            }
        };
        self.miss(pkt.seq, &payload, &payload[1..], plan, mode)
            .await
            .map(drop)
    }

    /// The snapshot rules that apply to a read now; None when the cache cannot be used at
    /// all for this read.
    fn read_mode(&self) -> Option<ReadMode> {
        if self.shared.hits_suspended() {
            return None;
        }
        Some(snapshot::read_view(
            self.st.txn.as_ref().map(|t| t.view()),
            self.st.status & status::AUTOCOMMIT != 0,
        ))
    }

    /// A cached entry this session may be served, if any (counted as a hit).
    fn lookup(&self, key: Key, mode: &ReadMode) -> Option<Arc<Entry>> {
        let cache = &self.shared.cache;
        let snap = match mode {
            ReadMode::Establishing(_) => return None,
            // The common case: one map lookup and the stamp check, nothing else.
            ReadMode::Plain if self.st.temp_tables.is_empty() => return cache.get_current(key),
            ReadMode::Plain => None,
            ReadMode::Snapshot(snap) => Some(snap),
        };
        let e = cache.get(key)?;
        let versions = cache.versions();
        let usable = match snap {
            None => e.stamps.is_current(versions),
            Some(snap) => {
                e.stamps.valid_in(versions, snap)
                    && !self
                        .st
                        .txn
                        .as_ref()
                        .is_some_and(|txn| e.tables().any(|t| txn.wrote(t)))
            }
        };
        let shadowed = e.tables().any(|t| {
            self.st
                .temp_tables
                .contains(&(t.schema.clone(), t.name.clone()))
        });
        if !usable || shadowed {
            return None;
        }
        cache.hit(&e);
        Some(e)
    }

    /// `started` is when the lookup began: the hit-latency histogram covers lookup and
    /// write, one clock pair per hit.
    pub(super) async fn serve_hit(
        &mut self,
        e: &Entry,
        started: Instant,
    ) -> Result<(), SessionError> {
        let st = self.st.status;
        e.write_patched(st, self.client.wbuf());
        self.st.after_hit = Some(e.found_rows);
        self.client
            .flush_if_large()
            .await
            .map_err(SessionError::client)?;
        self.shared.latencies.hit.observe(started.elapsed());
        Ok(())
    }

    /// Decides whether a read can be cached and on which tables it depends.
    async fn plan_read(
        &mut self,
        an: &Analysis,
        key: Key,
        digest: u64,
        sql: &[u8],
    ) -> Result<ReadPlan, &'static str> {
        let Analysis::Read(info) = an else {
            return Err("not_a_read");
        };
        // Operator rules, evaluated on misses only; the config is the swapped one, so a
        // reload applies to the next miss.
        let cfg = self.shared.config();
        // What resolving gives depends on the session only through its default database,
        // unless its temporary tables shadow names or rules look at the statement.
        let shared_answer = self.st.temp_tables.is_empty() && cfg.rules.is_empty();
        let generation = self.shared.catalog.generation();
        let db = self.st.db.as_deref();
        let remembered = shared_answer
            .then(|| self.shared.plans.get(digest, db, generation))
            .flatten();
        let mut ttl = None;
        let tables = match remembered {
            Some(outcome) => outcome?,
            None => {
                let resolved = self.resolve_tables(info).await;
                let outcome: Outcome = resolved.as_ref().map_err(|r| *r).map(|(_, bases)| {
                    let versions = self.shared.cache.versions();
                    bases.iter().map(|(s, n)| versions.table(s, n)).collect()
                });
                // An unknown table may appear with the next catalog refresh, which is
                // rate-limited: asking again is what triggers it.
                if shared_answer && resolved.as_ref().err() != Some(&"unknown_table") {
                    self.shared
                        .plans
                        .insert(digest, db, generation, outcome.clone());
                }
                let (named, bases) = resolved?;
                if !cfg.rules.is_empty() {
                    ttl = self.evaluate_rules(&cfg.rules, named, bases, digest, sql)?;
                }
                outcome?
            }
        };
        if self.st.dirty_reads {
            return Err("read_uncommitted");
        }
        if let Some(txn) = &self.st.txn {
            if tables.iter().any(|t| txn.wrote(t)) {
                return Err("written_in_transaction");
            }
        }
        Ok(ReadPlan {
            key,
            tables,
            digest,
            ttl,
        })
    }

    /// The tables a read names, qualified, and the base tables it depends on (views
    /// expanded), or why it cannot be cached.
    async fn resolve_tables(
        &self,
        info: &ReadInfo,
    ) -> Result<(Vec<TableName>, Vec<TableName>), &'static str> {
        if let Err(reason) = &info.verdict {
            return Err(reason.as_str());
        }
        if info.tables.is_empty() {
            return Err("no_table");
        }
        let mut named = Vec::with_capacity(info.tables.len());
        for t in &info.tables {
            let q = self
                .st
                .qualify(t.schema.as_deref(), &t.name)
                .ok_or("no_database")?;
            if SYSTEM_SCHEMAS.contains(&q.0.as_str()) {
                return Err("system_schema");
            }
            if self.st.temp_tables.contains(&q) {
                return Err("temporary_table");
            }
            named.push(q);
        }
        let catalog = &self.shared.catalog;
        let mut resolved = catalog.resolve_read(&named);
        if matches!(resolved, ReadResolution::Unknown(_)) {
            // A table created since the catalog was loaded, by someone qcache did not see.
            // Rate-limited: a name that stays unknown (a temporary table of another
            // session, a typo) must not reload the catalog on every query.
            let _ = catalog.refresh_if_older(Duration::from_millis(100)).await;
            resolved = catalog.resolve_read(&named);
        }
        match resolved {
            ReadResolution::Tables(bases) => Ok((named, bases)),
            ReadResolution::Opaque(_) => Err("opaque_view"),
            ReadResolution::Unknown(_) => Err("unknown_table"),
        }
    }

    /// The operator rules' verdict on a read: Err to leave it uncached, else its TTL.
    fn evaluate_rules(
        &self,
        rules: &[rules::Rule],
        mut named: Vec<TableName>,
        bases: Vec<TableName>,
        digest: u64,
        sql: &[u8],
    ) -> Result<Option<Duration>, &'static str> {
        let text = String::from_utf8_lossy(sql);
        // A rule may name a view as the statement does, or a table under it (not the
        // privilege stamps of DEFINER views, which are no tables).
        named.extend(bases.into_iter().filter(|(s, _)| !s.is_empty()));
        let subject = rules::Subject {
            tables: &named,
            user: &self.st.user,
            digest,
            sql: &text,
        };
        match rules::evaluate(rules, &subject) {
            rules::Verdict::Never => Err("rule"),
            rules::Verdict::Cache { ttl } => Ok(ttl),
            rules::Verdict::Default => Ok(None),
        }
    }

    /// Forwards a read and stores its result when it qualifies.
    /// Returns whether `payload` went upstream: a session that waited for another's fill
    /// and was served from it sent nothing.
    /// `sql` is the statement's text, for `SHOW QCACHE ENTRIES` (an execute's payload holds
    /// only the statement id and parameters).
    async fn miss(
        &mut self,
        seq: u8,
        payload: &Bytes,
        sql: &[u8],
        plan: ReadPlan,
        mode: Option<ReadMode>,
    ) -> Result<bool, SessionError> {
        let Some(mode) = mode else {
            self.note_not_cached("hits_suspended");
            return self
                .forward_read(seq, payload, None, true)
                .await
                .map(|_| true);
        };
        let cache = self.shared.cache.clone();
        let versions = cache.versions();
        let snap = mode.store_point();
        let unchanged = snap.is_none_or(|s| s.unchanged(versions, &plan.tables));
        if let Err(reason) = snapshot::may_store(mode, unchanged) {
            // A table changed since this transaction's snapshot: the server answers from the
            // snapshot, which no other session sees, so the result can never be stored.
            // Decided before claiming, so no other session waits on a fill that cannot land,
            // and the result is relayed without a copy.
            self.note_not_cached(reason.as_str());
            return self
                .forward_read(seq, payload, None, true)
                .await
                .map(|_| true);
        }
        if cache.holds_servable(plan.key) {
            // A read that reached the server though its result is cached, because it could
            // not be served from it: the one that opens a transaction's snapshot, once per
            // read-only transaction. Nothing to copy or store.
            return self
                .forward_read(seq, payload, None, true)
                .await
                .map(|_| true);
        }
        // Stamps are read before the query goes upstream: a write that lands while the
        // query runs makes them stale, so the result can never outlive it.
        let stamps = Stamps::capture(versions, &plan.tables);
        // Stampede protection: one session fills, the others wait for its result.
        let guard = match cache.claim(plan.key) {
            Claim::Leader(g) => Some(g),
            Claim::Follower(w) => {
                w.wait(self.shared.config().cache.stampede_timeout).await;
                let started = Instant::now();
                if let Some(e) = self.lookup(plan.key, &mode) {
                    if !self.shared.l2_remote || self.l2_confirm(plan.key, &e).await {
                        return self.serve_hit(&e, started).await.map(|_| false);
                    }
                }
                None
            }
        };
        // L2 between L1 and the server, for plain reads (not inside transactions, whose
        // snapshot L2 knows nothing of).
        let mut guard = guard;
        let mut l2_fill = None;
        if guard.is_some()
            && matches!(mode, ReadMode::Plain)
            && self.st.temp_tables.is_empty()
            && self.l2_usable()
        {
            match self.l2_before_forward(plan.key, &plan.tables).await {
                L2Step::Hit(hit, l2_stamps) => {
                    if let Some(g) = guard.take() {
                        self.serve_l2_hit(g, hit, l2_stamps, stamps.clone(), sql)
                            .await?;
                        return Ok(false);
                    }
                }
                L2Step::Fill { stamps, leased } => l2_fill = Some((stamps, leased)),
            }
        }
        let storable = snap.is_none_or(|s| stamps.valid_in(versions, &s));
        let cfg = self.shared.config();
        let mut fill = Fill::new(
            cfg.cache.max_result_bytes,
            std::mem::take(&mut self.fill_scratch),
        );
        let sent = Instant::now();
        let resp = self
            .forward_read(seq, payload, Some(&mut fill), true)
            .await?;
        let took = sent.elapsed();
        self.shared.latencies.miss.observe(took);
        if cfg.log.slow_miss.is_some_and(|t| took > t) {
            info!(
                digest = %format!("{:016x}", plan.digest),
                ms = took.as_secs_f64() * 1e3,
                "slow miss"
            );
        }
        let shape = match *fill.status_offsets.as_slice() {
            [last] => Some((None, last)),
            [meta, last] => Some((Some(meta), last)),
            _ => None,
        };
        // What the server's FOUND_ROWS() says now, which a later hit must reproduce.
        let found_rows = diagnostics::found_rows(sql, resp.rows);
        let verdict = store_verdict(&resp, &fill, storable)
            .or_else(|| found_rows.is_none().then_some("found_rows_unknown"));
        let (meta, last) = match (verdict, shape) {
            (None, Some(shape)) => shape,
            (reason, _) => {
                self.fill_scratch = fill.into_scratch();
                self.note_not_cached(reason.unwrap_or("unexpected_shape"));
                if let Some((_, leased)) = l2_fill {
                    self.l2_after_fill(plan.key, None, leased, None);
                }
                return Ok(true);
            }
        };
        let (bytes, scratch) = fill.take();
        self.fill_scratch = scratch;
        let l2_copy = l2_fill.as_ref().map(|(_, _)| L2Entry {
            stamps: Vec::new(),
            bytes: bytes.clone(),
            status_at: last,
            meta_status_at: meta,
            digest: plan.digest,
            expires_at_ms: plan.ttl.map_or(0, |t| now_ms() + t.as_millis() as u64),
        });
        let mut entry = Entry::new(bytes, last, stamps, plan.digest)
            .with_found_rows(found_rows.unwrap_or(0))
            .with_meta_status_at(meta)
            .with_sql(&String::from_utf8_lossy(&sql[..sql.len().min(256)]))
            .with_l2(l2_fill.as_ref().and_then(|(s, _)| s.clone()));
        if let Some(ttl) = plan.ttl {
            // The store still applies the global TTL when it is shorter.
            entry.expires = entry.created.checked_add(ttl);
        }
        if let Some((l2_stamps, leased)) = l2_fill {
            self.l2_after_fill(plan.key, l2_stamps, leased, l2_copy);
        }
        // The store counts its own refusals (too large, stale fill).
        let _ = match (guard, snap) {
            (Some(g), Some(s)) => g.insert_in(entry, &s),
            (Some(g), None) => g.insert(entry),
            (None, Some(s)) => cache.insert_in(plan.key, entry, &s),
            (None, None) => cache.insert(plan.key, entry),
        };
        Ok(true)
    }

    /// Sends a read upstream (its snapshot point is taken as it is sent, `exchange_as`).
    /// `planned`: a read the cache could hold, so it calls nothing that writes and may go
    /// up in one write with a deferred BEGIN.
    async fn forward_read(
        &mut self,
        seq: u8,
        payload: &[u8],
        fill: Option<&mut Fill>,
        planned: bool,
    ) -> Result<Response, SessionError> {
        let resp = self
            .exchange_as(seq, payload, Expect::Results, fill, planned)
            .await?;
        if snapshot::opens_view(planned) {
            if let Some(txn) = &mut self.st.txn {
                txn.view_open = true;
            }
        }
        Ok(resp)
    }

    /// A statement that reads may still write: a stored function can change any table, and
    /// a shape the scan took for a read may parse as a write (`WITH … UPDATE`).
    fn plan_side_effects(&mut self, an: &Analysis) {
        match an {
            Analysis::Read(r) if r.may_write => self.plan_unknown_write(),
            Analysis::Write(w) => self.plan_write(w),
            _ => {}
        }
    }

    fn note_not_cached(&self, reason: &'static str) {
        self.shared.cache.stats().not_cached(reason);
    }

    // ----- writes ------------------------------------------------------------------------

    /// A write, text or prepared: what it changes is planned before it goes upstream and
    /// bumped before its OK reaches the client (in `observe`).
    /// `digest` is that of the statement as the server reads it ([`analysis::server_text`]).
    async fn write(&mut self, pkt: &Packet, sql: &[u8], digest: u64) -> Result<(), SessionError> {
        let text = analysis::server_text(sql, self.st.server);
        self.plan_privileges(&text);
        let an = self.shared.analyzer.analyze(&text, digest);
        match &*an {
            Analysis::Write(w) => self.plan_write(w),
            _ => self.plan_unknown_write(),
        }
        let resp = self.relay_command(pkt, Expect::Results).await?;
        if let Analysis::Write(w) = &*an {
            self.after_write(w, &resp);
        }
        Ok(())
    }

    fn plan_write(&mut self, w: &WriteInfo) {
        match &w.targets {
            WriteTargets::Tables(list) => {
                let mut named = Vec::with_capacity(list.len());
                for t in list {
                    match self.st.qualify(t.schema.as_deref(), &t.name) {
                        Some(q) => named.push(q),
                        // No default database: the server will refuse it; nothing changes.
                        None => continue,
                    }
                }
                if named
                    .iter()
                    .any(|(s, n)| privileges::is_privilege_table(s, n))
                {
                    self.plan_privilege_change(PrivilegeChange::privilege_table());
                }
                let catalog = &self.shared.catalog;
                let expanded = if w.ddl {
                    catalog.expand_write(&named)
                } else {
                    catalog.expand_data_write(&named)
                };
                match expanded {
                    Some(all) => {
                        let v = self.shared.cache.versions();
                        for (s, n) in all {
                            self.st.pending.tables.push(v.table(&s, &n));
                        }
                    }
                    None => self.plan_unknown_write(),
                }
            }
            WriteTargets::Schema(s) => self.st.pending.schemas.push(s.to_lowercase()),
            WriteTargets::Unknown => self.plan_unknown_write(),
        }
        if w.ddl {
            self.st.pending.ddl = true;
            match &w.targets {
                WriteTargets::Tables(list) if !list.is_empty() => {
                    let named: Vec<_> = list
                        .iter()
                        .filter_map(|t| self.st.qualify(t.schema.as_deref(), &t.name))
                        .collect();
                    self.st.pending.ddl_changed.objects.extend(named);
                }
                WriteTargets::Schema(s) => {
                    self.st.pending.ddl_changed.schemas.push(s.to_lowercase());
                }
                // DDL naming nothing (DROP TRIGGER t, routines) or unreadable.
                _ => self.st.pending.ddl_changed.everything = true,
            }
        }
    }

    fn plan_scope(&mut self, scope: Conservative) {
        match (scope, &self.st.db) {
            (Conservative::Schema, Some(db)) => {
                let db = db.to_lowercase();
                self.st.pending.schemas.push(db);
            }
            _ => self.st.pending.all = true,
        }
    }

    fn plan_unknown_write(&mut self) {
        let scope = self.shared.config().invalidation.unknown_write;
        self.plan_scope(scope);
    }

    /// A statement of a shape that writes nothing by itself still runs code, or ends a
    /// transaction, whose writes qcache cannot name (`policy::classify`).
    fn plan_unknown_write_for(&mut self, why: classify::UnknownWrite) {
        tracing::debug!(reason = why.as_str(), "statement may write unknown tables");
        self.plan_unknown_write();
    }

    fn plan_call(&mut self) {
        let scope = self.shared.config().invalidation.call;
        self.plan_scope(scope);
        self.st.pending.ddl = false;
        self.st.lost_track = true;
    }

    fn after_write(&mut self, w: &WriteInfo, resp: &Response) {
        let outcome = if resp.error {
            classify::Outcome::Failed
        } else {
            self.forget_dropped_db(w);
            classify::Outcome::Done
        };
        self.track_temporary(w, outcome);
    }

    fn track_temporary(&mut self, w: &WriteInfo, outcome: classify::Outcome) {
        let st = &mut self.st;
        let db = st.db.clone();
        classify::track_temporary(&mut st.temp_tables, w, outcome, |t| {
            let schema = t.schema.clone().or_else(|| db.clone())?;
            Some((schema.to_lowercase(), t.name.to_lowercase()))
        });
    }

    /// After DROP DATABASE of the session's current database the server has none.
    fn forget_dropped_db(&mut self, w: &WriteInfo) {
        if let WriteTargets::Schema(s) = &w.targets {
            if crate::policy::context::drop_forgets_db(self.st.db.as_deref(), s) {
                self.st.set_db(None);
            }
        }
    }

    // ----- session statements ------------------------------------------------------------

    async fn set_statement(&mut self, pkt: Packet, sql: &Bytes) -> Result<(), SessionError> {
        let text = String::from_utf8_lossy(sql).into_owned();
        let info = analysis::analyze_set(&text);
        if let Some(why) = classify::set_writes(info.as_ref(), &text) {
            // `SET @x = f()` runs a function that may write anything.
            self.plan_unknown_write_for(why);
        }
        if let Some(i) = &info {
            if let Some(q) = i.query_cache_type {
                self.st.qct = match q {
                    QcAssign::Value(v) => v,
                    QcAssign::Default => self.shared.config().cache.query_cache_type,
                };
                let only_ours = i.assignments.iter().all(|(k, _)| k == "query_cache_type");
                if only_ours {
                    // qcache's own variable: MySQL 8.0 would reject it, so it never goes up.
                    return self.send_ok(pkt.seq.wrapping_add(1)).await;
                }
            }
        }
        // SET DEFAULT ROLE, SET PASSWORD; and SET ROLE, after which the server recomputes the
        // session's privileges and role.
        self.plan_privileges(sql);
        let role = privileges::sets_role(sql);
        let epoch_before = self.shared.cache.versions().privileges.epoch();
        let resp = self.relay_command(&pkt, Expect::Results).await?;
        if role {
            // Even a failed SET ROLE is asked about again: qcache does not guess.
            self.role_set(if resp.error {
                self.st.priv_baseline
            } else {
                epoch_before
            });
        }
        if resp.error {
            return Ok(());
        }
        if info.as_ref().is_none_or(|i| {
            i.assignments.iter().any(|(k, _)| {
                k.starts_with("session_track") || k.contains("transaction") || k.contains("tx_")
            })
        }) {
            // The server's answer to BEGIN may now say more than qcache's would: the
            // transaction state a tracking client asked for, or that it is read-only.
            self.st.defer_begin = false;
        }
        self.follow_set(info, resp.warnings).await
    }

    /// Brings the key up to what a successful SET left the session with
    /// (`policy::context`): literal values by their text, other values as the server reports
    /// them, GLOBAL assignments and user variables not at all.
    async fn follow_set(
        &mut self,
        info: Option<analysis::SetInfo>,
        warnings: u32,
    ) -> Result<(), SessionError> {
        use crate::policy::context::{self, Assignment};
        let Some(i) = info else {
            // qcache can tell neither what changed nor what to read back.
            self.st.lost_track = true;
            return Ok(());
        };
        let mut read_back: Vec<String> = Vec::new();
        let mut lost = false;
        for ((k, v), global) in i.assignments.iter().zip(&i.globals) {
            match context::assignment(k, v, *global) {
                Assignment::Ignore => continue,
                Assignment::Literal => {}
                Assignment::ReadBack(names) => {
                    read_back.extend(names.iter().map(|n| n.to_string()));
                    continue;
                }
                Assignment::ReadBackNamed => {
                    read_back.push(k.clone());
                    continue;
                }
                Assignment::Lost => {
                    lost = true;
                    continue;
                }
            }
            if k == "transaction" && v.to_ascii_uppercase().contains("ISOLATION") {
                let ru = context::reads_uncommitted(v);
                if i.next_transaction_only {
                    self.st.next_txn_ru |= ru;
                } else {
                    self.st.isolation_ru = ru;
                }
            }
            if context::is_isolation(k) {
                self.st.isolation_ru = context::reads_uncommitted(v);
            }
            self.st.vars.insert(k.clone(), v.clone());
        }
        if !read_back.is_empty() {
            let names: Vec<&str> = read_back.iter().map(String::as_str).collect();
            // The read-back would clear the SET's warnings, which the client may ask for.
            let values = if warnings == 0 {
                self.read_back(&names).await?
            } else {
                None
            };
            match values {
                Some(values) => {
                    for (n, v) in names.iter().zip(values) {
                        let v = v.unwrap_or_else(|| "\u{0}NULL".to_string());
                        if context::is_isolation(n) {
                            self.st.isolation_ru = context::reads_uncommitted(&v);
                        }
                        self.st.vars.insert(n.to_string(), v);
                    }
                }
                None => lost = true,
            }
        }
        if lost {
            self.st.lost_track = true;
        }
        self.st.refresh_fingerprint(&self.shared);
        Ok(())
    }

    /// `SELECT @@query_cache_type` (and its session-scoped spelling) is qcache's to answer.
    fn session_variable_answer(&self, stmt: &[u8]) -> Option<(String, String)> {
        // Every form answered here reads `@@`: one byte search rules out nearly every
        // statement before the case-insensitive scan, which ran on every relayed SELECT.
        if stmt.len() > 64 || !stmt.contains(&b'@') || !contains_ci(stmt, b"query_cache_type") {
            return None;
        }
        let norm: String = String::from_utf8_lossy(stmt)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_ascii_lowercase();
        let norm = norm.trim_end_matches(';').trim();
        let (name, value) = match norm {
            "select @@query_cache_type" => ("@@query_cache_type", self.st.qct),
            "select @@session.query_cache_type" => ("@@session.query_cache_type", self.st.qct),
            "select @@local.query_cache_type" => ("@@local.query_cache_type", self.st.qct),
            "select @@global.query_cache_type" => (
                "@@global.query_cache_type",
                self.shared.config().cache.query_cache_type,
            ),
            _ => return None,
        };
        Some((name.to_string(), value.as_str().to_string()))
    }

    /// `SELECT @@query_cache_type`: MariaDB has the variable, so its answer (column
    /// metadata and all) is relayed with qcache's value; MySQL 8.0 has none, so qcache
    /// answers alone.
    async fn answer_variable(
        &mut self,
        pkt: &Packet,
        v: (String, String),
    ) -> Result<(), SessionError> {
        if self.st.mariadb {
            return self.relay_rewriting(pkt, Rewrite::Single(v.1)).await;
        }
        self.send_status_rows_named(v).await
    }

    /// `SHOW … VARIABLES` (qcache's `query_cache_type`) and `SHOW [SESSION] STATUS` (the
    /// client leg's TLS and compression): the rows whose values are qcache's.
    fn own_show_values(&self, sql: &[u8]) -> Option<Rewrite> {
        let text = statements::lowercase(sql);
        let words = statements::words(&text);
        if let Some(global) = diagnostics::show_variables_scope(&words) {
            let qct = if global {
                self.shared.config().cache.query_cache_type
            } else {
                self.st.qct
            };
            return Some(Rewrite::Named(vec![(
                "query_cache_type",
                qct.as_str().to_string(),
            )]));
        }
        if diagnostics::is_session_status(&words) {
            let leg = self.client_leg();
            let values = CLIENT_LEG_STATUS
                .iter()
                .filter_map(|n| diagnostics::client_leg_status(n, &leg).map(|v| (*n, v)))
                .collect();
            return Some(Rewrite::Named(values));
        }
        None
    }

    async fn send_status_rows_named(
        &mut self,
        (name, value): (String, String),
    ) -> Result<(), SessionError> {
        self.send_text_result(
            &[(name.as_str(), packets::TYPE_VAR_STRING)],
            &[vec![Some(value)]],
        )
        .await
    }

    /// `SHOW [GLOBAL|SESSION] STATUS LIKE 'Qcache%'`: rows qcache answers from its state.
    fn qcache_status_rows(&self, sql: &[u8]) -> Option<Vec<(String, String)>> {
        let pattern = statements::status_like_pattern(sql)?;
        let rows = self
            .shared
            .cache
            .status_rows()
            .into_iter()
            .chain(self.shared.l2.iter().flat_map(|l| l.status_rows()))
            .filter(|(name, _)| statements::like_match(&pattern, &name.to_ascii_lowercase()))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Some(rows)
    }

    async fn send_status_rows(&mut self, rows: Vec<(String, String)>) -> Result<(), SessionError> {
        let rows: Vec<Vec<Option<String>>> = rows
            .into_iter()
            .map(|(n, v)| vec![Some(n), Some(v)])
            .collect();
        let columns = [
            ("Variable_name", packets::TYPE_VAR_STRING),
            ("Value", packets::TYPE_VAR_STRING),
        ];
        self.send_text_result(&columns, &rows).await
    }

    async fn flush_or_reset(
        &mut self,
        pkt: Packet,
        sql: &[u8],
        kind: Kind,
    ) -> Result<(), SessionError> {
        let text = statements::lowercase(sql);
        let words = statements::words(&text);
        if words.len() == 3 && words[1] == "query" && words[2] == "cache" {
            if !self.may_administer().await? {
                return self.deny(pkt.seq.wrapping_add(1)).await;
            }
            if kind == Kind::Reset {
                self.shared.cache.clear();
            }
            // FLUSH QUERY CACHE defragmented MySQL's cache; qcache's store has nothing to
            // defragment, so it only answers.
            return self.send_ok(pkt.seq.wrapping_add(1)).await;
        }
        // FLUSH TABLES and friends change no data; FLUSH PRIVILEGES makes grant-table edits
        // effective.
        self.plan_privileges(sql);
        self.relay_command(&pkt, Expect::Results).await.map(drop)
    }

    // ----- prepared statements -----------------------------------------------------------

    pub(crate) async fn stmt_prepare(&mut self, pkt: Packet) -> Result<(), SessionError> {
        let sql = pkt.payload.slice(1..);
        let text = analysis::server_text(&sql, self.st.server);
        let scan = analysis::scan(&text);
        drop(text);
        let (sql, payload) = if scan.hint_spans.is_empty() {
            (sql, pkt.payload.clone())
        } else {
            let stripped = Bytes::from(analysis::strip_hints(&sql, &scan).into_owned());
            let mut p = BytesMut::with_capacity(stripped.len() + 1);
            p.put_u8(com::STMT_PREPARE);
            p.put_slice(&stripped);
            (stripped, p.freeze())
        };
        let resp = self
            .exchange(pkt.seq, &payload, Expect::Prepare, None)
            .await?;
        if let Some((id, columns, params)) = resp.prepared {
            self.st.stmts.insert(
                id,
                Prepared {
                    digest: analysis::digest(&analysis::server_text(&sql, self.st.server)),
                    sql,
                    kind: scan.kind,
                    hint: scan.hint,
                    params,
                    columns,
                    types: None,
                    long_data: false,
                    server_has_types: false,
                },
            );
            self.st.last_stmt = Some(id);
        }
        Ok(())
    }

    pub(crate) async fn stmt_execute(&mut self, pkt: Packet) -> Result<(), SessionError> {
        let Some(mut id) = super::stmt_id(&pkt.payload) else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        if id == u32::MAX {
            // MariaDB's "the statement prepared last" (pipelined prepare + execute).
            id = self.st.last_stmt.unwrap_or(id);
        }
        let Some(stmt) = self.st.stmts.get_mut(&id) else {
            // Unknown id: the server answers with its own error.
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        let long_data = std::mem::take(&mut stmt.long_data);
        let kind = stmt.kind;
        let bulk = pkt.first() == Some(com::STMT_BULK_EXECUTE);
        if kind == Kind::Select && !bulk {
            return self.execute_select(pkt, id, long_data).await;
        }
        if matches!(kind, Kind::Begin | Kind::Commit | Kind::Rollback) && !bulk {
            // Drivers (sysbench among them) prepare BEGIN and COMMIT once and execute them.
            let sql = stmt.sql.clone();
            if self.answer_transaction_locally(pkt.seq, &sql, kind).await? {
                return Ok(());
            }
        }
        let pkt = if bulk {
            pkt
        } else {
            // Every path below sends it.
            let (up, typed) = self.execute_for_upstream(id, &pkt);
            self.types_sent(id, typed);
            Packet::new(pkt.seq, up)
        };
        match kind {
            Kind::Write => {
                // Looked up above; a miss here would only mean "relay it as it is".
                match self.st.stmts.get(&id).map(|s| (s.sql.clone(), s.digest)) {
                    Some((sql, digest)) => self.write(&pkt, &sql, digest).await,
                    None => self.relay_command(&pkt, Expect::Results).await.map(drop),
                }
            }
            Kind::Call | Kind::Execute => {
                self.plan_call();
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            Kind::Set | Kind::Use => {
                // A prepared SET changes the session in ways the packet does not show.
                self.st.lost_track = true;
                self.relayed_write_of(id);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            Kind::Begin | Kind::Commit | Kind::Rollback => {
                self.st.txn_boundary = true;
                self.relayed_write_of(id);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            _ => {
                self.relayed_write_of(id);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
        }
    }

    /// [`classify::relayed_write`] for prepared statement `id`.
    fn relayed_write_of(&mut self, id: u32) {
        let Some((kind, sql)) = self.st.stmts.get(&id).map(|s| (s.kind, s.sql.clone())) else {
            return;
        };
        let text = analysis::server_text(&sql, self.st.server);
        let why = if kind == Kind::Set {
            let text = String::from_utf8_lossy(&text);
            classify::set_writes(analysis::analyze_set(&text).as_ref(), &text)
        } else {
            classify::relayed_write(kind, &text)
        };
        if let Some(why) = why {
            self.plan_unknown_write_for(why);
        }
    }

    /// An execute of a prepared SELECT. The hit path borrows the statement and builds its key
    /// in the session's scratch buffer: no clone, no allocation.
    async fn execute_select(
        &mut self,
        pkt: Packet,
        id: u32,
        long_data: bool,
    ) -> Result<(), SessionError> {
        let identified = self.privileges_current()
            || (self.st.qct != QueryCacheType::Off
                && !self.st.lost_track
                && self.refresh_privileges().await?);
        let Some(stmt) = self.st.stmts.get(&id) else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        let wanted = wants_cache(self.st.qct, stmt.hint);
        let parts = commands::execute_params(&pkt.payload, stmt.params, stmt.types.as_deref());
        // Types the client sent that differ from the remembered ones are learned; a driver
        // that re-sends the same types on every execute costs no copy.
        let learned = match &parts {
            Some(ExecuteParams {
                types: Some(types), ..
            }) if stmt.types.as_deref() != Some(*types) => Some(Bytes::copy_from_slice(types)),
            _ => None,
        };
        let cursor = pkt.payload.get(5).map(|f| f & 0x07 != 0).unwrap_or(true);
        let reason = if !wanted {
            Some("not_requested")
        } else if self.st.lost_track {
            Some("session_untracked")
        } else if !identified {
            Some("identity_unknown")
        } else if cursor {
            Some("cursor")
        } else if long_data {
            Some("long_data")
        } else if parts.is_none() {
            Some("malformed_execute")
        } else {
            None
        };
        // The same execution keys the same whether or not the client re-sent the types.
        let key = match (&parts, reason) {
            (Some(params), None) => {
                let m = &mut self.key_scratch;
                m.clear();
                m.extend_from_slice(&(stmt.sql.len() as u32).to_le_bytes());
                m.extend_from_slice(&stmt.sql);
                m.extend_from_slice(params.types.unwrap_or_default());
                m.push(0xff);
                m.extend_from_slice(params.null_bitmap);
                m.push(0xff);
                m.extend_from_slice(params.values);
                let k = key(self.st.fingerprint, TAG_BINARY, m);
                if m.capacity() > KEEP_SCRATCH {
                    // A large parameter passed; an idle session should not keep its copy.
                    *m = Vec::new();
                }
                Some(k)
            }
            _ => None,
        };
        if let Some(types) = learned {
            if let Some(s) = self.st.stmts.get_mut(&id) {
                s.types = Some(types);
            }
        }
        let Some(key) = key else {
            self.note_not_cached(reason.unwrap_or("malformed_execute"));
            let (up, typed) = self.execute_for_upstream(id, &pkt);
            self.types_sent(id, typed);
            self.forward_read(pkt.seq, &up, None, false).await?;
            return Ok(());
        };
        let mode = self.read_mode();
        if let Some(mode) = &mode {
            let started = Instant::now();
            if let Some(e) = self.lookup(key, mode) {
                if !self.shared.l2_remote || self.l2_confirm(key, &e).await {
                    return self.serve_hit(&e, started).await;
                }
            }
        }
        let Some((sql, digest)) = self.st.stmts.get(&id).map(|s| (s.sql.clone(), s.digest)) else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        let an = self
            .shared
            .analyzer
            .analyze(&analysis::server_text(&sql, self.st.server), digest);
        let (up, typed) = self.execute_for_upstream(id, &pkt);
        match self.plan_read(&an, key, digest, &sql).await {
            Ok(plan) => {
                // Only an execute that reached the server taught it the types; one served
                // from another session's fill did not.
                let sent = self.miss(pkt.seq, &up, &sql, plan, mode).await?;
                self.types_sent(id, typed && sent);
                Ok(())
            }
            Err(reason) => {
                self.note_not_cached(reason);
                self.plan_side_effects(&an);
                self.types_sent(id, typed);
                self.forward_read(pkt.seq, &up, None, false).await.map(drop)
            }
        }
    }

    /// Records that the server has parameter types for statement `id` once an execute
    /// carrying them was sent.
    fn types_sent(&mut self, id: u32, typed: bool) {
        if typed {
            if let Some(s) = self.st.stmts.get_mut(&id) {
                s.server_has_types = true;
            }
        }
    }

    /// The execute packet as the server must receive it, and whether it carries parameter
    /// types. A client sends types once (new-params-bound = 1) and then executes with the
    /// flag 0; when the server never received that first execute (it was a cache hit, or
    /// was served from another session's fill) the types are put back in. Re-sending types
    /// is always allowed, so the answer is the same. The caller marks the types as known
    /// to the server ([`types_sent`](Self::types_sent)) only once the packet went upstream.
    fn execute_for_upstream(&self, id: u32, pkt: &Packet) -> (Bytes, bool) {
        let Some(stmt) = self.st.stmts.get(&id) else {
            return (pkt.payload.clone(), false);
        };
        let n = stmt.params as usize;
        let nb = n.div_ceil(8);
        let p = &pkt.payload;
        if n == 0 || p.len() < 11 + nb {
            return (pkt.payload.clone(), false);
        }
        match (p[10 + nb], &stmt.types) {
            (1, _) => (pkt.payload.clone(), true),
            (0, Some(types)) if !stmt.server_has_types => {
                let mut out = BytesMut::with_capacity(p.len() + types.len());
                out.put_slice(&p[..10 + nb]);
                out.put_u8(1);
                out.put_slice(types);
                out.put_slice(&p[11 + nb..]);
                (out.freeze(), true)
            }
            _ => (pkt.payload.clone(), false),
        }
    }
}

/// Whether a SELECT asks for the cache: `query_cache_type` with the statement's hint, as
/// MySQL's query cache decided it (text and prepared alike).
fn wants_cache(qct: QueryCacheType, hint: Hint) -> bool {
    match (qct, hint) {
        (QueryCacheType::Off, _) | (_, Hint::SqlNoCache) => false,
        (QueryCacheType::Demand, h) => h == Hint::SqlCache,
        (QueryCacheType::On, _) => true,
    }
}

/// Why a relayed result is not stored, if it is not.
fn store_verdict(resp: &Response, fill: &Fill, storable: bool) -> Option<&'static str> {
    if resp.error {
        return Some("error");
    }
    if fill.overflow {
        return Some("too_large");
    }
    if resp.result_sets != 1 || resp.oks != 0 {
        return Some("multi_result");
    }
    if resp.warnings != 0 {
        return Some("warnings");
    }
    if resp.cursor {
        return Some("cursor");
    }
    let last = resp.last_status.unwrap_or(0);
    if last & (status::MORE_RESULTS | status::SESSION_STATE_CHANGED) != 0 {
        return Some("session_state_changed");
    }
    if !storable {
        return Some("changed_since_snapshot");
    }
    None
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}
