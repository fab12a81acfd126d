//! The session's identity for the cache: the account and active role the server matched
//! (asked of the server, never read off the handshake or a SET ROLE's text), and the
//! privilege generation its key is computed under. Privilege changes seen through this
//! session are planned here and applied with the statement's OK.

use super::{Session, SessionError};
use crate::engine::context;
use crate::engine::state::Identity;
use crate::protocol::rows;

/// Asked once per session (again after SET ROLE, COM_CHANGE_USER, COM_RESET_CONNECTION).
/// MySQL before 8.0 has no CURRENT_ROLE(): then roles do not exist. `FOUND_ROWS()` and
/// `ROW_COUNT()` first, read before this SELECT sets its own: what it changed is owed back
/// should the read it comes before be refused (`Session::after_refused_read`).
const IDENTITY_QUERY: &str = "SELECT FOUND_ROWS(), ROW_COUNT(), CURRENT_USER(), CURRENT_ROLE()";
const ACCOUNT_QUERY: &str = "SELECT FOUND_ROWS(), ROW_COUNT(), CURRENT_USER()";

impl Session {
    /// Whether the key may be computed now: the identity is known and no privilege change
    /// happened since the fingerprint was computed. One atomic load on the hit path.
    #[inline]
    pub(crate) fn privileges_current(&self) -> bool {
        self.st.identity.is_some()
            && self.shared.cache.versions().privileges.epoch() == self.st.priv_epoch
    }

    /// Learns what [`privileges_current`](Self::privileges_current) found missing and
    /// recomputes the fingerprint. False: the session cannot use the cache (the server would
    /// not say who it is).
    pub(crate) async fn refresh_privileges(&mut self) -> Result<bool, SessionError> {
        if self.st.identity_unusable {
            return Ok(false);
        }
        if self.st.identity.is_none() {
            match self.ask_identity().await? {
                Some(id) => self.st.identity = Some(id),
                None => {
                    self.st.identity_unusable = true;
                    return Ok(false);
                }
            }
        }
        let cfg = self.shared.config();
        let versions = self.shared.cache.versions();
        context::privileges_known(&mut self.st, &cfg, &versions.faults, &versions.privileges);
        Ok(true)
    }

    async fn ask_identity(&mut self) -> Result<Option<Identity>, SessionError> {
        if let Some(row) = self.ask_first_row(IDENTITY_QUERY).await? {
            let mut it = context::owed_after_ask(&mut self.st, row).into_iter();
            return Ok(it.next().flatten().map(|account| Identity {
                account,
                role: it.next().flatten(),
            }));
        }
        let row = self.ask_first_row(ACCOUNT_QUERY).await?;
        Ok(row
            .and_then(|row| {
                context::owed_after_ask(&mut self.st, row)
                    .into_iter()
                    .next()
                    .flatten()
            })
            .map(|account| Identity {
                account,
                role: None,
            }))
    }

    /// Runs `sql` on the session's upstream connection without relaying it and returns the
    /// server's ERR payload, if it refused it (`QCACHE EXPLAIN` asks `EXPLAIN` first, so that
    /// it tells no user more than the server would).
    pub(crate) async fn ask_refusal(
        &mut self,
        sql: &[u8],
    ) -> Result<Option<Vec<u8>>, SessionError> {
        self.send_private_bytes(sql).await?;
        self.st.cost.disturbed();
        let mut err = None;
        let resp = self
            .read_private("the privilege check (EXPLAIN)", |_, _, p| {
                // No row or column definition starts with 0xff (not a length prefix).
                if p.first() == Some(&0xff) {
                    err = Some(p.to_vec());
                }
            })
            .await?;
        Ok(if resp.error { err } else { None })
    }

    /// Runs `sql` on the session's upstream connection without relaying it and returns its
    /// first row (None: an error, or no row). Touches no table, so it opens no snapshot.
    async fn ask_first_row(
        &mut self,
        sql: &str,
    ) -> Result<Option<Vec<Option<String>>>, SessionError> {
        self.send_private(sql).await?;
        self.st.cost.disturbed();
        let mut row = None;
        let resp = self
            .read_private("the identity query", |resp, before, p| {
                if before == 0 && resp.rows == 1 {
                    row = Some(rows::text_row_prefix(p));
                }
            })
            .await?;
        Ok(if resp.error { None } else { row })
    }
}
