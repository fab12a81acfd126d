//! The session's identity for the cache: the account and active role the server matched
//! (asked of the server, never read off the handshake or a SET ROLE's text), and the
//! privilege generation its key is computed under. Privilege changes seen through this
//! session are planned here and applied with the statement's OK.

use super::{Session, SessionError};
use crate::engine::context;

impl Session {
    /// The stamps of this session's privileges an L2 read depends on
    /// (`policy::privileges::reader_stamps`).
    pub(crate) fn privilege_stamps(&self) -> Vec<crate::cache::versions::TableHandle> {
        let user = match (&self.st.identity, self.st.shared_users) {
            (Some(id), false) => Some(crate::policy::privileges::account_user(&id.account)),
            _ => None,
        };
        let versions = self.shared.cache.versions();
        crate::policy::privileges::reader_stamps(user)
            .iter()
            .map(|(s, n)| versions.table(s, n))
            .collect()
    }

    /// Whether the key may be computed now: the identity is known and no privilege change
    /// happened since the fingerprint was computed. One atomic load on the hit path.
    #[inline]
    pub(crate) fn privileges_current(&self) -> bool {
        self.st.identity.is_some()
            && self.shared.cache.versions().privileges.epoch() == self.st.priv_epoch
    }

    /// Learns what [`privileges_current`](Self::privileges_current) found missing and
    /// recomputes the fingerprint. False: the session cannot use the cache (the server would
    /// not say who it is: `engine::context::IDENTITY_QUESTIONS`, each until one answers).
    pub(crate) async fn refresh_privileges(&mut self) -> Result<bool, SessionError> {
        if self.st.identity_unusable {
            return Ok(false);
        }
        if self.st.identity.is_none() {
            let mut identity = None;
            for sql in context::IDENTITY_QUESTIONS {
                let answer = self.ask_one(sql, "the identity query").await?;
                self.st.cost.disturbed();
                if let Some(row) = answer.first_row() {
                    identity = context::identity_answered(&mut self.st, row);
                    break;
                }
            }
            if identity.is_none() {
                self.st.identity_unusable = true;
                return Ok(false);
            }
            self.st.identity = identity;
        }
        let cfg = self.shared.config();
        let versions = self.shared.cache.versions();
        context::privileges_known(&mut self.st, &cfg, &versions.faults, &versions.privileges);
        Ok(true)
    }
}
