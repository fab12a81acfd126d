//! The session's part in per-digest statistics (`observe::digests`) and `SHOW QCACHE LAST`:
//! what happened to the statement being answered is gathered as it goes (served, sent,
//! stored, the reason not) and recorded once when the command is done. A hit is recorded
//! where it is served, from the entry (digest, rows, bytes): no statement text is looked at.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use crate::cache::Entry;
use crate::engine::last::{self, remember, Current};
use crate::observe::digests::{Observation, Outcome};
use crate::protocol::response::Response;

/// Which statement a command ran, for [`Session::statement_end`].
pub(crate) enum Statement<'a> {
    Text(&'a [u8]),
    Prepared(u32),
}

impl Session {
    /// A new COM_QUERY or execute begins.
    pub(crate) fn statement_start(&mut self) {
        self.cur = Current::default();
    }

    /// The command is done: a read that was not served from the cache is counted under its
    /// digest, and the statement becomes `SHOW QCACHE LAST`'s.
    pub(crate) fn statement_end(&mut self, stmt: Statement<'_>) {
        if self.cur.admin {
            return;
        }
        match stmt {
            Statement::Text(sql) => {
                // Checked here so that a hit makes no call.
                if self.unserved_counted() {
                    self.count_unserved(sql);
                }
                remember(&mut self.last, &mut self.cur, sql, false);
            }
            Statement::Prepared(id) => {
                let Some(s) = self.st.stmts.get(&id) else {
                    self.count_unserved(&[]);
                    return remember(&mut self.last, &mut self.cur, &[], true);
                };
                if self.cur.digest.is_none() {
                    self.cur.digest = Some(s.digest);
                }
                if self.unserved_counted() {
                    // A miss: the handle is cloned so that the session can be borrowed.
                    let sql = s.sql.clone();
                    self.count_unserved(&sql);
                }
                // A hit copies the statement's bytes straight from the map, no clone.
                let sql = self.st.stmts.get(&id).map_or(&[][..], |s| &s.sql[..]);
                remember(&mut self.last, &mut self.cur, sql, true);
            }
        }
    }

    /// Whether [`count_unserved`](Self::count_unserved) counts anything for this statement.
    #[inline]
    fn unserved_counted(&self) -> bool {
        last::unserved_counted(&self.cur, &self.shared.digests)
    }

    /// A read that was not served from the cache, counted under its digest (a hit was
    /// counted where it was served): `engine::last::count_unserved`.
    fn count_unserved(&mut self, sql: &[u8]) {
        last::count_unserved(&mut self.cur, &mut self.st, &self.shared.digests, sql);
    }

    /// A hit, counted at once from the entry: its digest, rows and bytes.
    pub(crate) fn note_hit(&mut self, e: &Entry, at: u64) {
        self.cur.read = true;
        self.cur.hit = true;
        self.cur.digest = Some(e.digest);
        self.cur.rows = e.rows;
        self.cur.bytes = e.bytes.len() as u64;
        let digests = &self.shared.digests;
        let bytes = e.bytes.len() as u64;
        if !self.cur.stale
            && digests.record_hit(
                e.digest,
                self.st.db_key,
                e.rows,
                bytes,
                at,
                &self.st.digest_hint,
            )
        {
            return;
        }
        if digests.enabled() {
            digests.record(
                &Observation {
                    digest: e.digest,
                    schema: self.st.db.as_deref(),
                    user: Some(&self.st.user),
                    schema_key: self.st.db_key,
                    text: e.shape.as_ref(),
                    outcome: if self.cur.stale {
                        Outcome::StaleHit
                    } else {
                        Outcome::Hit
                    },
                    rows: e.rows,
                    bytes,
                    upstream: Duration::ZERO,
                    at: crate::clock::instant_of(at),
                },
                &mut self.st.digest_hint,
            );
        }
    }

    /// A read went to the server and its answer was relayed.
    pub(crate) fn note_sent(&mut self, resp: &Response, sent: Instant, took: Duration) {
        self.cur.sent(resp.rows, resp.bytes, sent, took);
    }

    /// The read's digest, where the miss path has computed it anyway.
    pub(crate) fn note_digest(&mut self, digest: u64) {
        self.cur.digest = Some(digest);
    }

    /// The normalised text a miss stores with its entry, so hits can name their row.
    pub(crate) fn shape_text(&self, digest: u64, sql: &[u8]) -> Option<Arc<str>> {
        last::shape_text(&self.shared.digests, self.st.server, digest, sql)
    }
}
