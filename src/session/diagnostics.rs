//! Putting the server's diagnostics right after a hit (`policy::diagnostics` says what and
//! why): the resetter statement, sent on the session's upstream connection and dropped.

use super::{Session, SessionError};
use crate::policy::diagnostics;
use crate::protocol::codec::Packet;
use crate::protocol::packets::mariadb_cap;
use crate::protocol::response::{Expect, Response, Step};
use crate::protocol::rows::{Rewrite, Rewriter};

impl Session {
    /// Leaves the server's warnings, errors, `ROW_COUNT()` and `FOUND_ROWS()` as the SELECT
    /// served from the cache would have, before the next statement reaches the server.
    /// `effect`: what that statement does to `Last_query_cost`
    /// (`policy::diagnostics::cost_effect`); where it may read it, the hit's SELECT is sent
    /// again instead of the resetter where it can be, and a cost owed is put back before
    /// `ROW_COUNT()` is.
    pub(crate) async fn reset_diagnostics(
        &mut self,
        pending: u64,
        effect: diagnostics::CostEffect,
    ) -> Result<(), SessionError> {
        use diagnostics::CostEffect;
        let (found_rows, row_count_zero) = diagnostics::pending_restore(pending);
        let observes = matches!(
            effect,
            CostEffect::Reads | CostEffect::Shows | CostEffect::Unknown
        );
        let may_replay = diagnostics::may_replay(
            self.st.txn.statement_runs_in_transaction(),
            self.st.txn.begin_pending(),
        );
        if observes
            && !row_count_zero
            && self.last.what.hit
            && may_replay
            && self.replay_hit().await?
        {
            self.st.cost.replayed();
            return Ok(());
        }
        if let Some(n) = found_rows {
            self.send_resetter(n).await?;
            self.st.cost.disturbed();
        }
        self.replay_cost(effect).await?;
        if row_count_zero {
            // After qcache's own read-back: ROW_COUNT() 0, as the SET before it left it.
            self.batch(&[super::context::RESTORE]).await?;
        }
        Ok(())
    }

    /// Before a statement of `effect` that may read `Last_query_cost`, sends again the
    /// statement whose run left the value the client would read, when qcache's own SELECTs
    /// changed it since (`policy::diagnostics::LastQueryCost`), its answer dropped: under the
    /// `sql_mode` it ran in, moved back for it and forward again after it where it moved
    /// since (`engine::diagnostics::replay`; never in another database). Not where an earlier
    /// statement's warnings may still be read: the replay would clear them, and they weigh
    /// more than the cost (docs/reliability.md); nor where it would run in a transaction
    /// (`policy::diagnostics::may_replay`): the cost stays owed.
    pub(crate) async fn replay_cost(
        &mut self,
        effect: diagnostics::CostEffect,
    ) -> Result<(), SessionError> {
        if !self.st.cost.owed()
            || (self.st.diag_may_persist && !effect.clears_diagnostics())
            || !diagnostics::may_replay(
                self.st.txn.statement_runs_in_transaction(),
                self.st.txn.begin_pending(),
            )
        {
            return Ok(());
        }
        let Some(replay) = crate::engine::diagnostics::replay(&mut self.st, effect) else {
            return Ok(());
        };
        // Moved back first; a refusal sends no replay and moves nothing forward: the
        // server's value stands.
        let back = replay.back();
        let mut moved = 0;
        for sql in &back {
            self.send_private(sql).await?;
            let resp = self
                .read_private("the cost's context", |_, _, _| {})
                .await?;
            // Its error or warnings are the server's diagnostics now.
            self.st.diag_may_persist |= resp.error || resp.warnings > 0;
            if resp.error {
                break;
            }
            moved += 1;
        }
        if moved == back.len() {
            // Waiting for no table lock (`policy::diagnostics::replay_statement`).
            let text = diagnostics::replay_statement(&replay.text, self.st.mariadb);
            self.send_private_bytes(&text).await?;
            let resp = self.read_private("the cost's replay", |_, _, _| {}).await?;
            self.st.diag_may_persist = resp.error || resp.warnings > 0;
        }
        for sql in replay.forward(moved) {
            self.send_private(sql).await?;
            let resp = self
                .read_private("the cost's context", |_, _, _| {})
                .await?;
            self.st.diag_may_persist |= resp.warnings > 0;
            if resp.error {
                // The session's mode on the server is no longer the one the client set: nothing qcache sends or serves for it can be trusted.
                return Err(SessionError::Protocol(format!(
                    "could not move the session back after the cost's replay ({sql})"
                )));
            }
        }
        Ok(())
    }

    /// Before a statement of `effect`: the restore a hit left owed, then a cost owed.
    async fn owed_before(&mut self, effect: diagnostics::CostEffect) -> Result<(), SessionError> {
        if let Some(n) = self.st.after_hit.take() {
            self.reset_diagnostics(n, effect).await?;
        }
        self.replay_cost(effect).await
    }

    /// A hit is owed its restore: when the last statement was that hit, it is the last to
    /// have set `Last_query_cost` (its text, if it can be sent again).
    pub(crate) fn note_hit_cost(&mut self) {
        if self.last.what.hit {
            let cut = self.last.sql.len() >= crate::engine::last::LAST_SQL_MAX;
            let text = diagnostics::replay_text(&self.last.sql, self.last.prepared, cut);
            crate::engine::diagnostics::note_hit(&mut self.st, text);
        }
    }

    /// Sends the hit's own statement again, its answer dropped; false when it cannot be
    /// replayed or the server refused it or warned (then the resetter is owed).
    async fn replay_hit(&mut self) -> Result<bool, SessionError> {
        let last = &self.last;
        let cut = last.sql.len() >= crate::engine::last::LAST_SQL_MAX;
        let Some(sql) = diagnostics::replay_text(&last.sql, last.prepared, cut) else {
            return Ok(false);
        };
        let sql = diagnostics::replay_statement(sql, self.st.mariadb).into_owned();
        self.send_private_bytes(&sql).await?;
        let resp = self.read_private("the hit's replay", |_, _, _| {}).await?;
        let ok = !resp.error && resp.warnings == 0;
        self.st.diag_may_persist = !ok;
        Ok(ok)
    }

    /// Sends the resetter for `found_rows`, and its fallback when the server refused it or
    /// warned (`policy::diagnostics::resetter` says when).
    async fn send_resetter(&mut self, found_rows: u64) -> Result<(), SessionError> {
        let mariadb = self.st.mariadb;
        let first = diagnostics::resetter(found_rows, mariadb);
        let fallback = diagnostics::resetter_fallback(found_rows, mariadb);
        let mut failed = false;
        for sql in std::iter::once(&first).chain((first != fallback).then_some(&fallback)) {
            self.send_private(sql).await?;
            let resp = self
                .read_private("the diagnostics resetter", |_, _, _| {})
                .await?;
            failed = resp.error || resp.warnings > 0;
            // Over a derived table: the server cleared its warnings, unless it raised some.
            self.st.diag_may_persist = failed;
            if !failed {
                break;
            }
        }
        if failed {
            // A server that refuses both (a SELECT is not allowed in this state): the next
            // statement's own answer stands, as before.
            tracing::debug!("the diagnostics resetter failed");
        }
        Ok(())
    }
}

impl Session {
    /// Relays a statement whose result holds values qcache owns (its `query_cache_type`,
    /// the client leg's TLS and compression): the server's column metadata and every other
    /// row stand, those values are qcache's.
    pub(crate) async fn relay_rewriting(
        &mut self,
        pkt: &Packet,
        rw: Rewrite,
    ) -> Result<(), SessionError> {
        self.relay_rewriting_as(pkt, rw, false).await
    }

    /// [`relay_rewriting`](Self::relay_rewriting) of a text result, or of a binary one
    /// (`binary`: an execute's, whose rows are read by the column types its definitions
    /// give: `protocol::rows::rewrite_binary_row`).
    pub(crate) async fn relay_rewriting_as(
        &mut self,
        pkt: &Packet,
        rw: Rewrite,
        binary: bool,
    ) -> Result<(), SessionError> {
        let extended = self.st.mariadb_caps & mariadb_cap::EXTENDED_TYPE_INFO != 0;
        let mut rewriter = Rewriter::new(rw, binary, extended);
        // A SHOW of status reads `Last_query_cost`; one of variables sets it.
        let effect = crate::engine::diagnostics::cost_effect(&self.st, &pkt.payload);
        // What a hit before a BEGIN qcache answered owes is put back before that BEGIN goes
        // up, outside any transaction (as in `exchange_as`).
        let early = self.st.txn.begin_pending();
        if early {
            self.owed_before(effect).await?;
        }
        if !self.open_deferred_begin(pkt.seq).await? {
            return Ok(());
        }
        if !early {
            self.owed_before(effect).await?;
        }
        self.st.cost.after(effect, None);
        self.upstream.start_command();
        self.upstream
            .send(pkt.seq, &pkt.payload)
            .await
            .map_err(SessionError::upstream)?;
        let mut resp = Response::new(Expect::Results, self.st.deprecate_eof);
        loop {
            let p = self
                .upstream
                .read_some()
                .await
                .map_err(SessionError::upstream)?;
            let rows = resp.rows;
            let step = resp
                .feed(&p.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            let new = rewriter.next(&p.payload, resp.rows == rows + 1);
            if let Some(at) = resp.status_here {
                self.apply_status(Some(at.status)).await;
            } else if resp.error && step == Step::Done {
                self.apply_status(None).await;
                self.apply_error(resp.err_code).await;
            }
            self.client
                .push(p.seq, new.as_deref().unwrap_or(&p.payload));
            match step {
                Step::Done => break,
                Step::More => {}
                Step::LocalInfile => {
                    return Err(SessionError::Protocol(
                        "a SHOW asked for a local file".into(),
                    ))
                }
            }
        }
        self.end_of_response();
        self.client.flush().await.map_err(SessionError::client)
    }
}

impl Session {
    /// What the client's leg looks like, for session status.
    pub(crate) fn client_leg(&self) -> diagnostics::ClientLeg {
        diagnostics::ClientLeg {
            compressed: self.client.compression().is_some(),
            tls: self.client.tls_session(),
            upstream_tls: self.legs.upstream_tls,
        }
    }
}
