//! Session statements: SET (followed into the key, or qcache's own `query_cache_type`),
//! `SELECT @@query_cache_type`, the SHOW rows whose values are qcache's (`Qcache%` status,
//! `query_cache_type`, the client leg's TLS and compression), FLUSH/RESET QUERY CACHE.

use super::{Session, SessionError};
use crate::admin::statements::{self, OwnError, Rows};
use crate::analysis::{self, StatementKind};
use crate::engine::answers::{self, VarAnswer};
use crate::engine::settings::{self, SetSent};
use crate::engine::Planner;
use crate::protocol::codec::Packet;
use crate::protocol::packets;
use crate::protocol::response::Expect;
use crate::protocol::rows::Rewrite;

impl Session {
    /// A SET, `sql` as the server reads it (a scope word in a comment it skips is none).
    pub(super) async fn set_statement(
        &mut self,
        pkt: Packet,
        sql: &[u8],
    ) -> Result<(), SessionError> {
        let text = String::from_utf8_lossy(sql).into_owned();
        let info = analysis::analyze_set(&text);
        let planner = Planner::new(&self.shared);
        let (role, qct) = match planner.before_set(&mut self.st, info.as_ref(), &text, sql) {
            SetSent::Local => return self.answer_ok_locally(pkt.seq.wrapping_add(1)).await,
            SetSent::Up { role, qct } => (role, qct),
        };
        let epoch_before = self.shared.cache.versions().privileges.epoch();
        let resp = self.relay_command(&pkt, Expect::Results).await?;
        let role_epoch = role.then_some(epoch_before);
        if !settings::set_answered(&mut self.st, info.as_ref(), role_epoch, qct, resp.error) {
            return Ok(());
        }
        self.follow_set(info, resp.warnings).await
    }

    /// Brings the key up to what a successful SET left the session with
    /// (`engine::settings`): literal values by their text, other values as the server
    /// reports them, GLOBAL assignments and user variables not at all.
    pub(super) async fn follow_set(
        &mut self,
        info: Option<analysis::SetInfo>,
        warnings: u32,
    ) -> Result<(), SessionError> {
        let Some(rb) = settings::follow_set(&mut self.st, info.as_ref()) else {
            return Ok(());
        };
        let mut values = None;
        let mut rb = rb;
        if !rb.names.is_empty() {
            if settings::may_read_back(&self.st, warnings) {
                let names: Vec<&str> = rb.names.iter().map(String::as_str).collect();
                values = self.read_back(&names).await?;
            } else {
                // Put off where it can be; otherwise left unanswered (the session loses track).
                rb = settings::read_back_put_off(&mut self.st, rb);
            }
        }
        settings::read_back_answered(&mut self.st, rb, values);
        self.st.refresh_fingerprint(&self.shared);
        Ok(())
    }

    /// A SELECT reading `@@query_cache_type`: how qcache answers it
    /// (`engine::answers::session_variable`).
    pub(super) fn session_variable_answer(&self, stmt: &[u8]) -> Option<VarAnswer> {
        let default = || self.shared.config().cache.query_cache_type;
        answers::session_variable(&self.st, default, stmt)
    }

    /// `SHOW … VARIABLES` and `SHOW … STATUS` (`sql` as the server reads it): the rows
    /// whose values are qcache's (`engine::answers::show_values`).
    pub(super) fn own_show_values(&self, sql: &[u8]) -> Option<Rewrite> {
        let default = self.shared.config().cache.query_cache_type;
        let own = || statements::own_status(&self.shared);
        answers::show_values(&self.st, sql, default, own, || self.client_leg())
    }

    /// `SHOW [GLOBAL|SESSION] STATUS LIKE 'Qcache%'`: rows qcache answers from its state.
    pub(super) fn qcache_status_rows(&self, sql: &[u8]) -> Option<Vec<(String, String)>> {
        answers::qcache_status_rows(sql, || statements::own_status(&self.shared))
    }

    /// Answers a [`session_variable_answer`](Self::session_variable_answer).
    pub(super) async fn answer_variable(
        &mut self,
        pkt: &Packet,
        v: VarAnswer,
    ) -> Result<(), SessionError> {
        match v {
            VarAnswer::Relay(rw) => self.relay_rewriting(pkt, rw).await,
            VarAnswer::Own((name, value)) => {
                let column = [(name.as_str(), packets::TYPE_VAR_STRING)];
                self.send_text_result(&column, &[vec![Some(value)]]).await
            }
        }
    }

    /// Answers `SHOW … STATUS LIKE 'Qcache%'` alone, leaving the diagnostics the server's
    /// SHOW would have (`policy::diagnostics::after_own_rows`).
    pub(super) async fn send_status_rows(
        &mut self,
        rows: Vec<(String, String)>,
    ) -> Result<(), SessionError> {
        self.st.after_hit = crate::policy::diagnostics::after_own_rows(rows.len() as u64);
        self.send_rows(Rows::status(rows)).await
    }

    /// FLUSH and RESET: `… QUERY CACHE` is qcache's (`engine::command::query_cache_statement`),
    /// anything else goes to the server.
    pub(super) async fn flush_or_reset(
        &mut self,
        pkt: Packet,
        sql: &[u8],
        kind: StatementKind,
    ) -> Result<(), SessionError> {
        let Some(qc) = crate::engine::command::query_cache_statement(&mut self.st, sql, kind)
        else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        if !self.may_administer().await? {
            let denied = OwnError::access_denied();
            return self
                .send_own_error(pkt.seq.wrapping_add(1), denied)
                .await
                .map(drop);
        }
        let refused = qc.relayed && self.relay_command(&pkt, Expect::Results).await?.error;
        if qc.empties && !refused {
            statements::reset_query_cache(&self.shared);
        }
        if qc.relayed {
            return Ok(());
        }
        self.answer_ok_locally(pkt.seq.wrapping_add(1)).await
    }
}
