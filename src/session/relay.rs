//! Relaying one command and its response: packets stream to the client as they arrive
//! (flushed only when the upstream has nothing more buffered), optionally teed into a fill
//! buffer, with the session's bookkeeping run before each OK/EOF/ERR is forwarded.

use super::{Session, SessionError};
use crate::engine::answered;
use crate::engine::command::{followed, Follow};
use crate::engine::diagnostics;
use crate::engine::exchange;
use crate::engine::fill::Fill;
use crate::engine::fkslices::{self, Answers, Ask, AtOk};
use crate::invalidation::catalog::Lookup;
use crate::protocol::codec::Packet;
use crate::protocol::response::{Expect, Response, ResponseError, Step};
use crate::protocol::rows::Rewriter;

/// A parent lookup sent beside its write: the questions, and the task asking them.
pub(crate) struct EarlyLookup {
    asks: Vec<Vec<Ask>>,
    task: tokio::task::JoinHandle<Vec<Vec<Lookup>>>,
}

/// Feeds one server packet to the response tracker and, when it parses, to the fill: the
/// same for a frame copied as it is and for a packet decoded on its own.
fn feed(
    resp: &mut Response,
    fill: &mut Option<&mut Fill>,
    seq: u8,
    payload: &[u8],
) -> Result<Step, ResponseError> {
    tracing::trace!(seq, len = payload.len(), head = ?&payload[..payload.len().min(40)], "server packet");
    let step = resp.feed(payload);
    if let (Ok(_), Some(f)) = (&step, fill.as_deref_mut()) {
        f.add(seq, payload, resp.status_here.map(|s| s.offset));
    }
    step
}

impl Session {
    /// Forwards a client packet unchanged and relays the whole response.
    pub(crate) async fn relay_command(
        &mut self,
        pkt: &Packet,
        expect: Expect,
    ) -> Result<Response, SessionError> {
        self.exchange(pkt.seq, &pkt.payload, expect, None).await
    }

    /// Forwards a client packet unchanged, relays the whole response and applies what its
    /// answer changes in the session (`engine::command::followed`).
    pub(crate) async fn relay_following(
        &mut self,
        pkt: &Packet,
        expect: Expect,
        follow: Follow<'_>,
    ) -> Result<(), SessionError> {
        let resp = self.relay_command(pkt, expect).await?;
        followed(&mut self.st, follow, &resp);
        Ok(())
    }

    /// Sends `payload` upstream and relays the response, teeing it into `fill` if given.
    pub(crate) async fn exchange(
        &mut self,
        seq: u8,
        payload: &[u8],
        expect: Expect,
        fill: Option<&mut Fill>,
    ) -> Result<Response, SessionError> {
        self.exchange_as(seq, payload, expect, fill, false, None)
            .await
    }

    /// [`exchange`](Self::exchange); `cacheable_read`: the command is a cacheable read, which
    /// changes nothing and so may share its write with a deferred BEGIN. `rewrite`: the
    /// packets go to the client through it (values qcache owns: `relay_rewriting_as`), the
    /// bookkeeping of the statement the same as for any other.
    pub(crate) async fn exchange_as(
        &mut self,
        seq: u8,
        payload: &[u8],
        expect: Expect,
        mut fill: Option<&mut Fill>,
        cacheable_read: bool,
        mut rewrite: Option<&mut Rewriter>,
    ) -> Result<Response, SessionError> {
        exchange::sent(&self.shared, &mut self.st);
        let begin_along = cacheable_read && self.begin_rides_along();
        // A hit (and a cost owed) before a BEGIN qcache answered came before that BEGIN: what
        // it owes the diagnostics is put back before BEGIN goes up, where the server is in
        // no transaction yet, as directly (a replay there opens no read view).
        let early = !begin_along && self.st.txn.begin_pending();
        let mut skipped = None;
        if early {
            diagnostics::begin_goes_first(&mut self.st);
            skipped = self.diagnostics_before(payload, cacheable_read).await?;
        }
        if !begin_along && !self.open_deferred_begin(seq).await? {
            let mut failed = Response::new(expect, self.st.deprecate_eof);
            failed.error = true;
            return Ok(failed);
        }
        if !early {
            skipped = self.diagnostics_before(payload, cacheable_read).await?;
        }
        self.upstream.start_command();
        if begin_along {
            self.push_deferred_begin();
        }
        self.upstream.push(seq, payload);
        self.upstream
            .flush()
            .await
            .map_err(SessionError::upstream)?;
        self.start_early_lookup();
        if begin_along && !self.begin_answered(seq).await? {
            return self.drop_answer(fill).await;
        }
        let mut resp = Response::new(expect, self.st.deprecate_eof);
        if expect == Expect::Nothing {
            return Ok(resp);
        }
        loop {
            // The common case: a packet of one frame, already buffered, copied as it is
            // (queued, not sent: the bookkeeping below still runs before the client sees
            // it). Otherwise a packet decoded on its own: a compressed leg, or a payload of
            // 16 MiB or more.
            let whole = self.upstream.next_frame_len().filter(|_| rewrite.is_none());
            let (step, seq) = if let Some(len) = whole {
                let frame = self.upstream.frame(len);
                let seq = frame[3];
                let step = feed(&mut resp, &mut fill, seq, &frame[4..]);
                exchange::packet(&mut self.st, &resp, &frame[4..]);
                self.client.push_raw(frame);
                self.upstream.consume(len);
                (step, seq)
            } else if let Some(p) = self.upstream.try_decode().map_err(SessionError::upstream)? {
                let rows = resp.rows;
                let step = feed(&mut resp, &mut fill, p.seq, &p.payload);
                exchange::packet(&mut self.st, &resp, &p.payload);
                let new = rewrite
                    .as_deref_mut()
                    .and_then(|r| r.next(&p.payload, resp.rows == rows + 1));
                self.client
                    .push(p.seq, new.as_deref().unwrap_or(&p.payload));
                (step, p.seq)
            } else {
                // Nothing more buffered from the server: let the client have what we hold
                // before waiting.
                self.client.flush().await.map_err(SessionError::client)?;
                self.upstream.fill().await.map_err(SessionError::upstream)?;
                continue;
            };
            let step = match step {
                Ok(s) => s,
                Err(e) => {
                    // The client gets what the server sent; the session cannot continue
                    // because qcache no longer knows where responses end.
                    let _ = self.client.flush().await;
                    return Err(SessionError::Protocol(e.to_string()));
                }
            };
            if let Some(at) = resp.status_here {
                self.apply_status(Some(at.status)).await;
            } else if resp.error && step == Step::Done {
                self.apply_status(None).await;
                self.apply_error(resp.err_code).await;
            }
            match step {
                // A result ended and another follows: where a server flushes, and where a
                // compressed client expects the numbering to restart from the frame count.
                Step::More if resp.between_results() => self
                    .client
                    .sync_at_result_end(seq.wrapping_add(1))
                    .await
                    .map_err(SessionError::client)?,
                Step::More => self
                    .client
                    .flush_if_large()
                    .await
                    .map_err(SessionError::client)?,
                Step::LocalInfile => {
                    if let Some(f) = fill.as_deref_mut() {
                        f.overflow = true;
                    }
                    self.client.flush().await.map_err(SessionError::client)?;
                    self.relay_infile().await?;
                }
                Step::Done => break,
            }
        }
        exchange::answered(&mut self.st, &resp, cacheable_read);
        if let (Some(owed), true) = (skipped, resp.error) {
            self.after_refused_read(owed, payload).await?;
        }
        Ok(resp)
    }

    /// A cacheable read the server refused while a restore was owed (`after_hit`): the
    /// restore was skipped on the word that the read sets `FOUND_ROWS()` and the rest
    /// itself, which a read refused before it runs (an unknown column, a missing
    /// privilege) does not. So the restore is made now, and the read sent again after it,
    /// its answer dropped: the server's diagnostics are then the refusal's over what the
    /// hit left, as directly, whether the read failed before it ran or while it ran. It
    /// changes nothing (a cacheable read writes nothing). The client has its error first.
    async fn after_refused_read(&mut self, owed: u64, payload: &[u8]) -> Result<(), SessionError> {
        self.client.flush().await.map_err(SessionError::client)?;
        self.reset_diagnostics(owed, crate::policy::diagnostics::CostEffect::Keeps)
            .await?;
        self.round_trip_private(payload, "a refused read sent again")
            .await?;
        self.st.diag_may_persist = true;
        Ok(())
    }

    /// Long data held for an execute (`engine::command::Release`), sent right before it:
    /// first the execute the client was answered from the cache, sent again so that the
    /// server reads the long data as directly (`Prepared::replay_before_long_data`), its
    /// answer dropped, then the held packets. Handled as the cacheable read it is: it takes
    /// the restore a hit owed (the consuming execute, next, sets every diagnostic itself),
    /// and a transaction's points are taken before it (the earlier point is the safe one).
    /// A deferred BEGIN stays deferred: the served execute came before it.
    pub(super) async fn release_long_data(
        &mut self,
        release: crate::engine::command::Release,
    ) -> Result<(), SessionError> {
        if let Some(replay) = release.replay {
            let _ = self.diagnostics_before(&replay, true).await?;
            let now = self.shared.cache.versions().snapshot();
            self.st.txn.before_send(now);
            self.round_trip_private(&replay, "an execute sent again before long data")
                .await?;
        }
        for p in &release.held {
            self.upstream.start_command();
            self.upstream
                .send(0, p)
                .await
                .map_err(SessionError::upstream)?;
        }
        Ok(())
    }

    /// After a hit, puts the server's diagnostics where the served SELECT would have left
    /// them before a command that may read them. A cacheable read sets every diagnostic
    /// itself; a ping (a pool's check between statements) leaves them for the next one.
    /// `Last_query_cost` is followed across commands (`policy::diagnostics::LastQueryCost`).
    /// What is owed is the engine's (`engine::diagnostics::before_command`); this makes it.
    pub(super) async fn diagnostics_before(
        &mut self,
        payload: &[u8],
        cacheable_read: bool,
    ) -> Result<Option<u64>, SessionError> {
        let Some(owed) = diagnostics::before_command(&mut self.st, payload, cacheable_read) else {
            return Ok(None);
        };
        if owed.hit_cost {
            self.note_hit_cost();
        }
        let mut skipped = None;
        if let Some(found_rows) = owed.restore {
            if owed.skipped {
                skipped = Some(found_rows);
            } else {
                self.reset_diagnostics(found_rows, owed.effect).await?;
            }
        }
        self.replay_cost(owed.effect).await?;
        diagnostics::command_sent(&mut self.st, &owed, payload);
        Ok(skipped)
    }

    /// LOCAL INFILE: the client's file packets go upstream until the empty one.
    async fn relay_infile(&mut self) -> Result<(), SessionError> {
        loop {
            let p = self
                .client
                .read_some()
                .await
                .map_err(SessionError::client)?;
            tracing::trace!(seq = p.seq, len = p.payload.len(), "infile packet");
            self.upstream.push(p.seq, &p.payload);
            self.upstream
                .flush_if_large()
                .await
                .map_err(SessionError::upstream)?;
            if p.payload.is_empty() {
                self.upstream
                    .flush()
                    .await
                    .map_err(SessionError::upstream)?;
                return Ok(());
            }
        }
    }

    /// COM_BINLOG_DUMP: the server streams events until it ends or either side closes.
    pub(crate) async fn relay_stream(&mut self, pkt: &Packet) -> Result<(), SessionError> {
        self.upstream.start_command();
        self.upstream
            .send(pkt.seq, &pkt.payload)
            .await
            .map_err(SessionError::upstream)?;
        loop {
            let p = match self.upstream.try_decode().map_err(SessionError::upstream)? {
                Some(p) => p,
                None => {
                    self.client.flush().await.map_err(SessionError::client)?;
                    match self.upstream.read().await.map_err(SessionError::upstream)? {
                        Some(p) => p,
                        None => return Ok(()),
                    }
                }
            };
            let end =
                matches!(p.first(), Some(0xff)) || (p.first() == Some(0xfe) && p.payload.len() < 9);
            self.client.push(p.seq, &p.payload);
            self.client
                .flush_if_large()
                .await
                .map_err(SessionError::client)?;
            if end {
                self.client.flush().await.map_err(SessionError::client)?;
                return Ok(());
            }
        }
    }

    /// Runs before an OK/EOF (with its status) or a final ERR (None) reaches the client:
    /// writes are invalidated and transactions tracked (`policy::txn`) before the client can
    /// act on it.
    pub(crate) async fn apply_status(&mut self, new_status: Option<u16>) {
        if new_status.is_none() && answered::implicit_commit_refused(&self.shared, &mut self.st) {
            self.l2_flush().await;
        }
        if !self.st.pending.is_empty() {
            let answers = self.fk_lookup(new_status).await;
            let applied =
                answered::writes_answered(&self.shared, &mut self.st, new_status, answers);
            for v in applied.verify {
                tokio::spawn(crate::shared::verify::patched(self.shared.clone(), v));
            }
            if let Some((seq, changed)) = applied.ddl {
                self.shared.reload_after_ddl(seq, changed);
            }
            // Fleet-wide too, before the client can act on the OK.
            self.l2_flush().await;
        }
        let Some(st) = new_status else { return };
        if answered::status_answered(&self.shared, &mut self.st, st) {
            self.l2_flush().await;
        }
    }

    /// After a final ERR's bookkeeping (`apply_status(None)`): an error with which the server
    /// rolled the transaction back ends the one qcache follows
    /// (`engine::answered::error_answered`); one of a statement it could not parse left
    /// `Last_query_cost` as it was (`engine::diagnostics::error_answered`).
    pub(crate) async fn apply_error(&mut self, code: Option<u16>) {
        crate::engine::diagnostics::error_answered(&mut self.st, code);
        if answered::error_answered(&self.shared, &mut self.st, code) {
            self.l2_flush().await;
        }
    }

    /// Just after a write was forwarded: its parent lookup, sent beside it when
    /// `engine::fkslices::early_asks` says so.
    fn start_early_lookup(&mut self) {
        let (cfg, elsewhere) = (self.shared.config(), fkslices::elsewhere(&self.shared));
        self.early_lookup =
            fkslices::early_asks(&self.st, &cfg.invalidation, elsewhere).map(|asks| {
                let (shared, questions) = (self.shared.clone(), fkslices::questions(&asks));
                let task = tokio::spawn(async move { shared.parent_lookups(&questions).await });
                EarlyLookup { asks, task }
            });
    }

    /// At a child write's OK or final ERR: its parent lookup (`engine::fkslices::at_ok`)
    /// asked now, judged (sent beside the write) or spawned to run after the client's OK
    /// (`Later`: nothing here awaits it), and what is answered now per child table.
    async fn fk_lookup(&mut self, new_status: Option<u16>) -> Vec<Answers> {
        let early = self.early_lookup.take();
        let at = fkslices::at_ok(&self.shared, &mut self.st, new_status, early.is_some());
        let (w, asks, learn) = match at {
            AtOk::Nothing => return Vec::new(),
            AtOk::Ask(w, asks, learn) => (w, asks, learn),
            AtOk::Later(later) => {
                tokio::spawn(later.run(self.shared.clone()));
                return Vec::new();
            }
        };
        let parents = self.shared.cache.versions().parents.clone();
        let found = match early {
            Some(mut e) => {
                // Waited for only briefly (`fkslices::EARLY_GRACE`): it started with the
                // write, on a connection it did not wait for; its task is left to finish
                // on its own otherwise (its connection then goes back idle).
                let got = match tokio::time::timeout(fkslices::EARLY_GRACE, &mut e.task).await {
                    Ok(Ok(a)) => Some(a),
                    Ok(Err(_)) => return Vec::new(),
                    Err(_) => None,
                };
                match fkslices::early_answers(&parents, &w, got, e.asks == asks) {
                    Some(found) => found,
                    None => return Vec::new(),
                }
            }
            None => fkslices::ask(&self.shared, &asks).await,
        };
        fkslices::all_answered(&parents, &w, learn, asks, found)
    }

    /// `engine::exchange::sent`, for a statement qcache sends for itself.
    pub(crate) fn note_send_point(&mut self) {
        exchange::sent(&self.shared, &mut self.st);
    }
}
