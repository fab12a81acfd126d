//! Putting the server's diagnostics right after a hit (`policy::diagnostics` says what and
//! why): the resetter statement, sent on the session's upstream connection and dropped.

use super::{Session, SessionError};
use crate::policy::diagnostics;
use crate::protocol::packets::com;
use crate::protocol::response::{Expect, Response, Step};

impl Session {
    /// Leaves the server's warnings, errors, `ROW_COUNT()` and `FOUND_ROWS()` as the SELECT
    /// served from the cache would have, before the next statement reaches the server.
    pub(crate) async fn reset_diagnostics(&mut self, found_rows: u64) -> Result<(), SessionError> {
        let sql = diagnostics::resetter(found_rows, self.st.mariadb);
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(com::QUERY);
        payload.extend_from_slice(sql.as_bytes());
        self.upstream.start_command();
        self.upstream
            .send(0, &payload)
            .await
            .map_err(SessionError::upstream)?;
        let mut resp = Response::new(Expect::Results, self.st.deprecate_eof);
        loop {
            let p = self
                .upstream
                .read_some()
                .await
                .map_err(SessionError::upstream)?;
            match resp
                .feed(&p.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?
            {
                Step::Done => break,
                Step::More => {}
                Step::LocalInfile => {
                    return Err(SessionError::Protocol(
                        "the diagnostics resetter asked for a local file".into(),
                    ))
                }
            }
        }
        if resp.error {
            // A server that refuses it (a SELECT is not allowed in this state): the next
            // statement's own answer stands, as before.
            tracing::debug!("the diagnostics resetter failed");
        }
        Ok(())
    }
}
