//! COM_QUERY and the prepared-statement commands: reads through the cache, writes with
//! invalidation, session statements followed or answered by qcache.

use super::{Session, SessionError};
use crate::protocol::codec::Packet;
use crate::protocol::response::Expect;

impl Session {
    pub(crate) async fn query(&mut self, pkt: Packet) -> Result<(), SessionError> {
        self.relay_command(&pkt, Expect::Results).await?;
        Ok(())
    }

    pub(crate) async fn stmt_prepare(&mut self, pkt: Packet) -> Result<(), SessionError> {
        self.relay_command(&pkt, Expect::Prepare).await?;
        Ok(())
    }

    pub(crate) async fn stmt_execute(&mut self, pkt: Packet) -> Result<(), SessionError> {
        self.relay_command(&pkt, Expect::Results).await?;
        Ok(())
    }
}
