//! The session's side of the second level: an L2 hit served (and copied into L1), and the
//! wait for this session's writes to reach L2. A read's conversation with Redis is
//! `l2::read`'s; when to have it, `policy::l2`'s.

use super::{Session, SessionError};
use crate::cache::{Entry, FillGuard, Key};

impl Session {
    /// Waits until the versions this session's write bumped are raised in L2 too.
    pub(super) async fn l2_flush(&self) {
        if let Some(l2) = &self.shared.l2 {
            l2.flush().await;
        }
    }

    /// Strict mode: whether an L1 hit may be served (`l2::read::confirm`).
    pub(super) async fn l2_confirm(&self, key: Key, e: &Entry) -> bool {
        crate::l2::read::confirm(self.shared.l2.as_deref(), &self.shared.cache, key, e).await
    }

    /// Serves `entry`, made from an L2 hit, and, when `settled` (`l2::read::Step::Hit`),
    /// copies it into L1 (under the local versions read before L2 was asked, so a local
    /// bump meanwhile leaves the copy stale).
    pub(super) async fn serve_l2_hit(
        &mut self,
        guard: FillGuard,
        entry: Entry,
        settled: bool,
    ) -> Result<(), SessionError> {
        let started = crate::clock::now();
        self.serve_hit(&entry, started).await?;
        if settled {
            let _ = guard.insert(entry);
        }
        Ok(())
    }
}
