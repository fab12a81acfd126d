//! Private round trips: a statement qcache sends for itself on the session's upstream
//! connection (identity, privileges, context read-back, the diagnostics resetter), whose
//! answer it reads to the end without relaying any of it to the client.

use super::{Session, SessionError};
use crate::protocol::packets::com;
use crate::protocol::response::{Expect, Response, Step};

impl Session {
    /// Sends `sql` as a COM_QUERY of qcache's own (sequence 0, a new command).
    pub(super) async fn send_private(&mut self, sql: &str) -> Result<(), SessionError> {
        self.send_private_bytes(sql.as_bytes()).await
    }

    /// [`Session::send_private`] of statement bytes that may not be UTF-8 (a client's own
    /// statement text, asked again for qcache's purposes).
    pub(super) async fn send_private_bytes(&mut self, sql: &[u8]) -> Result<(), SessionError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(com::QUERY);
        payload.extend_from_slice(sql);
        self.upstream.start_command();
        self.upstream
            .send(0, &payload)
            .await
            .map_err(SessionError::upstream)?;
        Ok(())
    }

    /// Reads the answer to a private statement to its end. `seen` is told of each packet
    /// after the response machine has read it: (the response so far, its row count before
    /// this packet, the packet's payload). A request for a local file is an error (`what`
    /// names the statement in it): no private statement reads one, and answering it would
    /// leave both sides waiting.
    pub(super) async fn read_private(
        &mut self,
        what: &str,
        mut seen: impl FnMut(&Response, u64, &[u8]),
    ) -> Result<Response, SessionError> {
        let mut resp = Response::new(Expect::Results, self.st.deprecate_eof);
        loop {
            let p = self
                .upstream
                .read_some()
                .await
                .map_err(SessionError::upstream)?;
            let before = resp.rows;
            let step = resp
                .feed(&p.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            seen(&resp, before, &p.payload);
            match step {
                Step::Done => break,
                Step::More => {}
                Step::LocalInfile => {
                    return Err(SessionError::Protocol(format!(
                        "{what} asked for a local file"
                    )))
                }
            }
        }
        Ok(resp)
    }

    /// A COM_PING on the upstream leg, its OK read and dropped: the server's idle timers
    /// start again, nothing else changes (no statement runs, the diagnostics stay).
    pub(super) async fn keep_upstream_alive(&mut self) -> Result<(), SessionError> {
        self.round_trip_private(&[com::PING], "a keep-alive ping")
            .await
            .map(drop)
    }

    /// Sends a whole command payload of qcache's own (sequence 0) and reads its answer to
    /// the end, relaying none of it.
    pub(super) async fn round_trip_private(
        &mut self,
        payload: &[u8],
        what: &str,
    ) -> Result<Response, SessionError> {
        self.upstream.start_command();
        self.upstream
            .send(0, payload)
            .await
            .map_err(SessionError::upstream)?;
        self.read_private(what, |_, _, _| {}).await
    }
}
