//! Reading the session's effective settings from the server, on the session's own upstream
//! connection, for the key (`policy::context`): at connect, after a reset or change-user,
//! and after a SET whose value qcache cannot evaluate. What the answers mean is
//! `engine::context`'s.

use super::{Session, SessionError};
use crate::engine::context::{self, ContextRead};
use crate::protocol::rows::{self, Values};
use tracing::{debug, warn};

impl Session {
    /// Reads the key variables as the session has them now into `server_ctx`, and the
    /// isolation level into `isolation_ru`, in the tiers `engine::context::ContextRead`
    /// says. One round trip.
    pub(crate) async fn read_server_context(&mut self) -> Result<(), SessionError> {
        let read = ContextRead::new(&self.st, &self.shared.optional_vars);
        let mut i = 0;
        while let Some(tier) = read.tier(i) {
            i += 1;
            let Some((values, probed)) = self
                .read_values(tier.names, tier.probe, tier.identity)
                .await?
            else {
                read.refused(i - 1, &self.shared.optional_vars);
                continue;
            };
            let mut found = Vec::new();
            if let Some(rows) = probed {
                let present = read.probed(rows.as_deref(), &self.shared.optional_vars);
                // information_schema spells some values otherwise than `@@session.` does
                // (`OFF` for 0, doubles with other digits): read the present ones as later
                // connects read them, or this session's key would differ from theirs. Once
                // per server version.
                if !present.is_empty() {
                    match self.read_values(&present, None, false).await? {
                        Some((values, _)) => found = present.into_iter().zip(values).collect(),
                        None => continue,
                    }
                }
            }
            context::server_context_read(&mut self.st, tier.names, &values, &found);
            self.st.refresh_fingerprint(&self.shared);
            return Ok(());
        }
        warn!("the server refused to report the session's settings: this session is not cached");
        self.st.lost_track = true;
        Ok(())
    }

    /// Reads the settings again when a write may have changed them (`st.ctx_stale`: a
    /// trigger may SET the writer's variables), before `stmt` is looked up, when `stmt` is a
    /// read the cache may serve; any other statement is answered by the server, and one that
    /// reads the diagnostics (`SELECT @@warning_count`) must find them untouched.
    pub(crate) async fn reread_stale_context(&mut self, stmt: &[u8]) -> Result<(), SessionError> {
        if !self.st.ctx_stale || !self.analysis_of(stmt, None).reads_tables() {
            return Ok(());
        }
        self.st.ctx_stale = false;
        debug!("a write may have changed the session's settings: reading them again");
        self.read_server_context().await
    }

    /// `SELECT @@session.<name>, …` on the upstream connection, its answer not relayed; the
    /// values in order, or None when the server answered with an error (or the names could
    /// not be asked for). The session's diagnostics are left as they were.
    pub(crate) async fn read_back(
        &mut self,
        names: &[&str],
    ) -> Result<Option<Values>, SessionError> {
        Ok(self.read_values(names, None, false).await?.map(|(v, _)| v))
    }

    /// Reads `names` (and runs `probe`, when given, in the same batch; with `identity`, the
    /// account and role too) in one round trip (`engine::context::read_back_answered` says
    /// what the answer means and owes). The values, and the probe's rows or None for its
    /// error; None when the SELECT failed.
    async fn read_values(
        &mut self,
        names: &[&str],
        probe: Option<&str>,
        identity: bool,
    ) -> Result<Option<(Values, Option<Option<Vec<Values>>>)>, SessionError> {
        let Some(sql) = context::read_back_question(names, identity) else {
            return Ok(None);
        };
        // Like any statement sent in a transaction, the read may count as its first.
        self.note_send_point();
        let batch: Vec<Vec<u8>> = std::iter::once(sql.as_str())
            .chain(probe)
            .map(rows::query_payload)
            .collect();
        let answers = self.ask_private(&batch, "a read-back").await?;
        let mut rows = answers.iter().map(|a| a.text_rows());
        let row = rows.next().flatten();
        let probed = probe.map(|_| rows.next().flatten());
        let values = context::read_back_answered(&mut self.st, names, identity, row);
        Ok(values.map(|v| (v, probed)))
    }
}
