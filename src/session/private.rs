//! Private round trips: statements qcache sends for itself on the session's upstream
//! connection (identity, privileges, context read-back, the diagnostics resetter, a replay),
//! whose answers it reads to the end without relaying any of it to the client. One helper
//! sends and reads; what an answer means is `protocol::answer`'s and the engine's.

use super::{Session, SessionError};
use crate::protocol::answer::Answer;
use crate::protocol::packets::com;
use crate::protocol::response::{Response, Step};
use crate::protocol::rows;

impl Session {
    /// Sends `payloads`, commands of qcache's own (sequence 0 each), and reads each answer
    /// to its end, relaying none: pipelined in one write, or one command per write on a
    /// compressed leg (which numbers each command's frames from zero). A request for a
    /// local file is an error (`what` names the statements in it): none reads one, and
    /// answering it would leave both sides waiting. The last status flags an answer
    /// carried are kept (`private_status`).
    pub(super) async fn ask_private(
        &mut self,
        payloads: &[impl AsRef<[u8]>],
        what: &str,
    ) -> Result<Vec<Answer>, SessionError> {
        let together = match self.upstream.compression() {
            None => payloads.len().max(1),
            Some(_) => 1,
        };
        let mut out = Vec::with_capacity(payloads.len());
        for group in payloads.chunks(together) {
            self.upstream.start_command();
            for p in group {
                self.upstream.push(0, p.as_ref());
            }
            self.upstream
                .flush()
                .await
                .map_err(SessionError::upstream)?;
            for _ in group {
                let a = self.read_answer(what).await?;
                if let Some(st) = a.resp.last_status {
                    self.private_status = Some(st);
                }
                out.push(a);
            }
        }
        Ok(out)
    }

    /// Reads one answer to its end, relaying none of it; a request for a local file is an
    /// error (`what` names the statement that asked).
    pub(super) async fn read_answer(&mut self, what: &str) -> Result<Answer, SessionError> {
        let mut a = Answer::new(self.st.deprecate_eof);
        loop {
            let p = self
                .upstream
                .read_some()
                .await
                .map_err(SessionError::upstream)?;
            let step = a
                .feed(&p.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            match step {
                Step::Done => return Ok(a),
                Step::More => {}
                Step::LocalInfile => {
                    let msg = format!("{what} asked for a local file");
                    return Err(SessionError::Protocol(msg));
                }
            }
        }
    }

    /// [`ask_private`](Self::ask_private) of one statement's text (bytes: a client's own
    /// statement, asked again for qcache's purposes, may not be UTF-8).
    pub(super) async fn ask_one(
        &mut self,
        sql: impl AsRef<[u8]>,
        what: &str,
    ) -> Result<Answer, SessionError> {
        let payload = rows::query_payload_bytes(sql.as_ref());
        let mut answers = self.ask_private(&[payload], what).await?;
        Ok(answers.remove(0))
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
        let mut answers = self.ask_private(&[payload], what).await?;
        Ok(answers.remove(0).resp)
    }
}
