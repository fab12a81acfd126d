//! Session statements: SET (followed into the key, or qcache's own `query_cache_type`),
//! `SELECT @@query_cache_type`, the SHOW rows whose values are qcache's (`Qcache%` status,
//! `query_cache_type`, the client leg's TLS and compression), FLUSH/RESET QUERY CACHE.

use bytes::Bytes;

use super::{Session, SessionError};
use crate::analysis::{self, StatementKind};
use crate::engine::answers::{self, VarAnswer};
use crate::engine::settings::{self, SetSent};
use crate::engine::Planner;
use crate::invalidation;
use crate::protocol::codec::Packet;
use crate::protocol::packets::{self};
use crate::protocol::response::Expect;
use crate::protocol::rows::Rewrite;

impl Session {
    pub(super) async fn set_statement(
        &mut self,
        pkt: Packet,
        sql: &Bytes,
    ) -> Result<(), SessionError> {
        let text = String::from_utf8_lossy(sql).into_owned();
        let info = analysis::analyze_set(&text);
        let planner = Planner::new(&self.shared);
        let (role, qct) = match planner.before_set(&mut self.st, info.as_ref(), &text, sql) {
            SetSent::Local => return self.send_ok(pkt.seq.wrapping_add(1)).await,
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
        if !rb.names.is_empty() && settings::may_read_back(&self.st, warnings) {
            let names: Vec<&str> = rb.names.iter().map(String::as_str).collect();
            values = self.read_back(&names).await?;
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

    /// `SHOW … VARIABLES` and `SHOW … STATUS`: the rows whose values are qcache's
    /// (`engine::answers::show_values`).
    pub(super) fn own_show_values(&self, sql: &[u8]) -> Option<Rewrite> {
        let default = self.shared.config().cache.query_cache_type;
        answers::show_values(
            &self.st,
            sql,
            default,
            || self.own_status_rows(),
            || self.client_leg(),
        )
    }

    /// `SHOW [GLOBAL|SESSION] STATUS LIKE 'Qcache%'`: rows qcache answers from its state.
    pub(super) fn qcache_status_rows(&self, sql: &[u8]) -> Option<Vec<(String, String)>> {
        answers::qcache_status_rows(sql, || self.own_status_rows())
    }

    /// qcache's `Qcache_*` status rows: the cache's, then L2's.
    fn own_status_rows(&self) -> Vec<(String, String)> {
        self.shared
            .cache
            .status_rows()
            .into_iter()
            .chain(self.shared.l2.iter().flat_map(|l| l.status_rows()))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Answers a [`session_variable_answer`](Self::session_variable_answer).
    pub(super) async fn answer_variable(
        &mut self,
        pkt: &Packet,
        v: VarAnswer,
    ) -> Result<(), SessionError> {
        match v {
            VarAnswer::Relay(rw) => self.relay_rewriting(pkt, rw).await,
            VarAnswer::Own(row) => self.send_status_rows_named(row).await,
        }
    }

    pub(super) async fn send_status_rows_named(
        &mut self,
        (name, value): (String, String),
    ) -> Result<(), SessionError> {
        self.send_text_result(
            &[(name.as_str(), packets::TYPE_VAR_STRING)],
            &[vec![Some(value)]],
        )
        .await
    }

    pub(super) async fn send_status_rows(
        &mut self,
        rows: Vec<(String, String)>,
    ) -> Result<(), SessionError> {
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
            return self.deny(pkt.seq.wrapping_add(1)).await;
        }
        let refused = qc.relayed && self.relay_command(&pkt, Expect::Results).await?.error;
        if qc.empties && !refused {
            self.shared
                .invalidate(&invalidation::admin::reset_query_cache());
            self.shared.cache.drop_entries();
        }
        if qc.relayed {
            return Ok(());
        }
        self.send_ok(pkt.seq.wrapping_add(1)).await
    }
}
