//! Writes, text or prepared: what a statement changes is planned before it goes upstream
//! (`engine::write` decides, over the session's state) and applied before its OK reaches
//! the client (`apply_status`); temporary tables and a dropped default database are
//! followed after it.

use super::{Session, SessionError};
use crate::analysis::Analysis;
use crate::engine::{write as plan, Planner};
use crate::protocol::codec::Packet;
use crate::protocol::response::Expect;

impl Session {
    /// A write, text or prepared: what it changes is planned before it goes upstream
    /// (`Planner::plan_statement_write`) and bumped before its OK reaches the client (in
    /// `apply_status`). `digest` is that of the statement as the server reads it
    /// (`analysis::server_text`).
    pub(super) async fn write(
        &mut self,
        pkt: &Packet,
        sql: &[u8],
        digest: u64,
    ) -> Result<(), SessionError> {
        let planner = Planner::new(&self.shared);
        let an = planner.plan_statement_write(
            &mut self.st,
            sql,
            digest,
            &pkt.payload,
            &self.shared.cache,
        );
        let resp = self.relay_command(pkt, Expect::Results).await?;
        if let Some(Analysis::Write(w)) = an.as_deref() {
            plan::after_write(&mut self.st, w, resp.error);
        }
        Ok(())
    }
}
