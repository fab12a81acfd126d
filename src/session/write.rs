//! Writes, text or prepared: what a statement changes is planned before it goes upstream
//! (`engine::write` decides, over the session's state) and applied before its OK reaches
//! the client (`apply_status`); temporary tables and a dropped default database are
//! followed after it. The one-line methods below are the engine's plans as the command
//! paths call them.

use super::{Session, SessionError};
use crate::analysis::{self, Analysis, WriteInfo};
use crate::engine::{write as plan, Planner};
use crate::policy::classify;
use crate::protocol::codec::Packet;
use crate::protocol::response::Expect;

impl Session {
    /// A write, text or prepared: what it changes is planned before it goes upstream and
    /// bumped before its OK reaches the client (in `apply_status`).
    /// `digest` is that of the statement as the server reads it ([`analysis::server_text`]).
    pub(super) async fn write(
        &mut self,
        pkt: &Packet,
        sql: &[u8],
        digest: u64,
    ) -> Result<(), SessionError> {
        let text = analysis::server_text(sql, self.st.server);
        plan::plan_privileges(&mut self.st, &text);
        if analysis::is_compound(&text) {
            self.plan_compound(&text);
            return self.relay_command(pkt, Expect::Results).await.map(drop);
        }
        self.plan_code_views(&text);
        let an = self.shared.analyzer.analyze(&text, digest);
        self.plan_ddl_code(&text);
        match &*an {
            Analysis::Write(w) => {
                self.plan_write(w);
                let planner = Planner::new(&self.shared);
                planner.plan_write_rows(&mut self.st, w, &text, &pkt.payload);
                // Last: what it patches depends on all it invalidates.
                planner.plan_patch(&mut self.st, &text, &self.shared.cache);
            }
            _ => self.plan_unknown_write(),
        }
        let resp = self.relay_command(pkt, Expect::Results).await?;
        if let Analysis::Write(w) = &*an {
            plan::after_write(&mut self.st, w, resp.error);
        }
        Ok(())
    }

    pub(super) fn plan_write(&mut self, w: &WriteInfo) {
        Planner::new(&self.shared).plan_write(&mut self.st, w)
    }

    pub(super) fn plan_unknown_write_in(&mut self, db: Option<&str>) {
        Planner::new(&self.shared).plan_unknown_write_in(&mut self.st, db)
    }

    pub(super) fn plan_ddl_code(&mut self, text: &[u8]) {
        Planner::new(&self.shared).plan_ddl_code(&mut self.st, text)
    }

    pub(super) fn plan_unknown_write(&mut self) {
        Planner::new(&self.shared).plan_unknown_write(&mut self.st)
    }

    pub(super) fn plan_unknown_write_for(&mut self, why: classify::UnknownWrite) {
        Planner::new(&self.shared).plan_unknown_write_for(&mut self.st, why)
    }

    pub(super) fn temporaries_after_code(&mut self) {
        Planner::new(&self.shared).temporaries_after_code(&mut self.st)
    }

    pub(super) fn plan_code_views(&mut self, text: &[u8]) {
        Planner::new(&self.shared).plan_code_views(&mut self.st, text)
    }

    pub(super) fn plan_compound(&mut self, text: &[u8]) {
        Planner::new(&self.shared).plan_compound(&mut self.st, text)
    }

    pub(super) fn code_ran_unseen(&mut self, text: &[u8]) {
        Planner::new(&self.shared).code_ran_unseen(&mut self.st, text)
    }

    pub(super) fn plan_call(&mut self) {
        Planner::new(&self.shared).plan_call(&mut self.st)
    }

    pub(super) fn track_temporary(&mut self, w: &WriteInfo, outcome: classify::Outcome) {
        plan::track_temporary(&mut self.st, w, outcome)
    }

    pub(crate) fn plan_privileges(&mut self, sql: &[u8]) {
        plan::plan_privileges(&mut self.st, sql)
    }
}
