//! Reading the session's effective settings from the server, on the session's own upstream
//! connection, for the key (`policy::context`): at connect, after a reset or change-user,
//! and after a SET whose value qcache cannot evaluate.

use tracing::{debug, warn};
use xxhash_rust::xxh3::Xxh3;

use super::{Session, SessionError};
use crate::policy::context;
use crate::protocol::packets::{self, com};
use crate::protocol::response::{Expect, Response, Step};

/// Sent after each read-back, in the same write: a fresh session and a SET both leave
/// ROW_COUNT() at 0 and no warnings, which the read-back's SELECT would change.
const RESTORE: &[u8] = b"\x03DO 0";

/// One row of text values (None for SQL NULL).
type Values = Vec<Option<String>>;

impl Session {
    /// Reads the key variables as the session has them now into `server_ctx`, and the
    /// isolation level into `isolation_ru`. A server that knows none of the flavour's
    /// names is asked for the common ones; one that refuses both leaves the session
    /// uncached (fail closed).
    pub(crate) async fn read_server_context(&mut self) -> Result<(), SessionError> {
        let lists = [
            context::key_variables(self.st.mariadb),
            context::COMMON_KEY_VARIABLES,
        ];
        for names in lists {
            let Some(values) = self.read_back(names).await? else {
                continue;
            };
            let mut h = Xxh3::new();
            self.st.isolation_ru = false;
            for (n, v) in names.iter().zip(&values) {
                h.update(n.as_bytes());
                h.update(&[0]);
                match v {
                    Some(v) => {
                        if context::is_isolation(n) {
                            self.st.isolation_ru = context::reads_uncommitted(v);
                        }
                        h.update(v.as_bytes());
                        h.update(&[0]);
                    }
                    None => h.update(&[1]),
                }
            }
            // Never 0, which means "not read".
            self.st.server_ctx = h.digest() | 1;
            self.st.refresh_fingerprint(&self.shared);
            return Ok(());
        }
        warn!("the server refused to report the session's settings: this session is not cached");
        self.st.lost_track = true;
        Ok(())
    }

    /// `SELECT @@session.<name>, …` on the upstream connection, its answer not relayed; the
    /// values in order, or None when the server answered with an error (or the names could
    /// not be asked for).
    pub(crate) async fn read_back(
        &mut self,
        names: &[&str],
    ) -> Result<Option<Values>, SessionError> {
        let Some(sql) = context::read_back_sql(names) else {
            return Ok(None);
        };
        // Like any statement sent in a transaction, the read may count as its first.
        self.note_send_point();
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(com::QUERY);
        payload.extend_from_slice(sql.as_bytes());
        // A compressed leg numbers each command's frames from zero: one command per write.
        let pipelined = self.upstream.compression().is_none();
        self.upstream.start_command();
        self.upstream.push(0, &payload);
        if pipelined {
            self.upstream.push(0, RESTORE);
        }
        self.upstream
            .flush()
            .await
            .map_err(SessionError::upstream)?;
        let values = self.read_row_answer().await?;
        if !pipelined {
            self.upstream.start_command();
            self.upstream.push(0, RESTORE);
            self.upstream
                .flush()
                .await
                .map_err(SessionError::upstream)?;
        }
        let mut restore = Response::new(Expect::Results, self.st.deprecate_eof);
        self.drain(&mut restore).await?;
        debug!(?names, ?values, "read the session's settings back");
        Ok(values.filter(|v| v.len() == names.len()))
    }

    /// Reads one text result set's first row; None on an error.
    async fn read_row_answer(&mut self) -> Result<Option<Values>, SessionError> {
        let mut resp = Response::new(Expect::Results, self.st.deprecate_eof);
        let mut columns: Option<u64> = None;
        let mut row: Option<Values> = None;
        let mut n: u64 = 0;
        loop {
            let p = self
                .upstream
                .read_some()
                .await
                .map_err(SessionError::upstream)?;
            let step = resp
                .feed(&p.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            if n == 0 && !resp.error {
                columns = packets::read_lenenc(&p.payload).map(|(c, _)| c);
            }
            let first_row = columns.map(|c| 1 + c + u64::from(!self.st.deprecate_eof));
            if Some(n) == first_row && resp.status_here.is_none() && !resp.error {
                row = parse_text_row(&p.payload);
            }
            n += 1;
            if step == Step::Done {
                break;
            }
        }
        Ok(if resp.error { None } else { row })
    }

    async fn drain(&mut self, resp: &mut Response) -> Result<(), SessionError> {
        loop {
            let p = self
                .upstream
                .read_some()
                .await
                .map_err(SessionError::upstream)?;
            let step = resp
                .feed(&p.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            if step == Step::Done {
                return Ok(());
            }
        }
    }
}

/// A text-protocol row: length-encoded strings, 0xfb for NULL.
fn parse_text_row(mut p: &[u8]) -> Option<Values> {
    let mut out = Vec::new();
    while !p.is_empty() {
        if p[0] == 0xfb {
            out.push(None);
            p = &p[1..];
            continue;
        }
        let (v, used) = packets::read_lenenc_str(p)?;
        out.push(Some(String::from_utf8_lossy(v).into_owned()));
        p = p.get(used..)?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_rows() {
        assert_eq!(
            parse_text_row(b"\x03abc\xfb\x00"),
            Some(vec![Some("abc".into()), None, Some(String::new())])
        );
        assert_eq!(parse_text_row(b"\x05ab"), None, "truncated");
        assert_eq!(parse_text_row(b""), Some(vec![]));
    }
}
