//! Putting the server's diagnostics right after a hit (`policy::diagnostics` says what and
//! why): the resetter statement, sent on the session's upstream connection and dropped.

use super::{Session, SessionError};
use crate::engine;
use crate::policy::diagnostics;
use crate::protocol::codec::Packet;
use crate::protocol::packets::mariadb_cap;
use crate::protocol::response::Expect;
use crate::protocol::rows::{Rewrite, Rewriter};

impl Session {
    /// Leaves the server's warnings, errors, `ROW_COUNT()` and `FOUND_ROWS()` as the SELECT
    /// served from the cache would have, before the next statement reaches the server.
    /// `effect`: what that statement does to `Last_query_cost`
    /// (`policy::diagnostics::cost_effect`); what is sent is `engine::diagnostics::restore`'s,
    /// and a cost owed is put back before `ROW_COUNT()` is.
    pub(crate) async fn reset_diagnostics(
        &mut self,
        pending: u64,
        effect: diagnostics::CostEffect,
    ) -> Result<(), SessionError> {
        let plan = engine::diagnostics::restore(&self.st, &self.last, pending, effect);
        if let Some(sql) = &plan.replay_hit {
            let ok = self.ask_one(sql, "the hit's replay").await?.clean();
            self.st.diag_may_persist = !ok;
            if ok {
                self.st.cost.replayed();
                return Ok(());
            }
        }
        for sql in &plan.resetters {
            let failed = !self.ask_one(sql, "the diagnostics resetter").await?.clean();
            // Over a derived table: the server cleared its warnings, unless it raised some.
            self.st.diag_may_persist = failed;
            if !failed {
                break;
            }
        }
        if !plan.resetters.is_empty() {
            if self.st.diag_may_persist {
                // A server that refuses both (a SELECT is not allowed in this state): the
                // next statement's own answer stands, as before.
                tracing::debug!("the diagnostics resetter failed");
            }
            self.st.cost.disturbed();
        }
        self.replay_cost(effect).await?;
        if plan.row_count_zero {
            self.ask_one(engine::context::RESTORE, "a read-back")
                .await?;
        }
        Ok(())
    }

    /// Before a statement of `effect` that may read `Last_query_cost`, sends again the
    /// statement whose run left the value the client would read, when qcache's own SELECTs
    /// changed it since (`policy::diagnostics::LastQueryCost`), its answer dropped: under the
    /// `sql_mode` it ran in, moved back for it and forward again after it where it moved
    /// since (`engine::diagnostics::replay_owed` says whether and what; never in another
    /// database).
    pub(crate) async fn replay_cost(
        &mut self,
        effect: diagnostics::CostEffect,
    ) -> Result<(), SessionError> {
        let Some(replay) = engine::diagnostics::replay_owed(&mut self.st, effect) else {
            return Ok(());
        };
        // Moved back first; a refusal sends no replay and moves nothing forward: the
        // server's value stands.
        let back = replay.back();
        let mut moved = 0;
        for sql in &back {
            let a = self.ask_one(sql, "the cost's context").await?;
            // Its error or warnings are the server's diagnostics now.
            self.st.diag_may_persist |= !a.clean();
            if a.resp.error {
                break;
            }
            moved += 1;
        }
        if moved == back.len() {
            // Waiting for no table lock (`policy::diagnostics::replay_statement`).
            let text = diagnostics::replay_statement(&replay.text, self.st.mariadb);
            let a = self.ask_one(&text, "the cost's replay").await?;
            self.st.diag_may_persist = !a.clean();
        }
        for sql in replay.forward(moved) {
            let a = self.ask_one(sql, "the cost's context").await?;
            self.st.diag_may_persist |= a.resp.warnings > 0;
            if a.resp.error {
                // The session's mode on the server is no longer the one the client set:
                // nothing qcache sends or serves for it can be trusted.
                return Err(SessionError::Protocol(format!(
                    "could not move the session back after the cost's replay ({sql})"
                )));
            }
        }
        Ok(())
    }

    /// A hit is owed its restore: when the last statement was that hit, it is the last to
    /// have set `Last_query_cost` (its text, if it can be sent again).
    pub(crate) fn note_hit_cost(&mut self) {
        engine::diagnostics::note_hit_cost(&mut self.st, &self.last);
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
    /// give: `protocol::rows::rewrite_binary_row`). Relayed as every statement is
    /// (`exchange_as`), with only the rows rewritten on their way to the client.
    pub(crate) async fn relay_rewriting_as(
        &mut self,
        pkt: &Packet,
        rw: Rewrite,
        binary: bool,
    ) -> Result<(), SessionError> {
        let extended = self.st.mariadb_caps & mariadb_cap::EXTENDED_TYPE_INFO != 0;
        let mut rewriter = Rewriter::new(rw, binary, extended);
        let expect = Expect::Results;
        let rw = Some(&mut rewriter);
        self.exchange_as(pkt.seq, &pkt.payload, expect, None, false, rw)
            .await
            .map(drop)
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
