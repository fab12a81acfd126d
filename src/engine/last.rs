//! What a session records of the statement it is answering (`Current`) and of the one
//! before (`Last`, for `SHOW QCACHE LAST`): what happened to it, gathered as it goes and
//! swapped in once the command is done.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::state::SessionState;
use crate::analysis;
use crate::observe::digests::{Digests, Observation, Outcome, TEXT_MAX};
use crate::policy::Reason;

/// The statement being answered.
#[derive(Debug, Default)]
pub struct Current {
    /// Answered by qcache as an admin statement: `SHOW QCACHE LAST` keeps the one before.
    pub admin: bool,
    /// A read that consulted the cache: served, or sent with or without storing.
    pub read: bool,
    pub digest: Option<u64>,
    pub hit: bool,
    /// The hit was an outdated entry served under its rule's `max_stale`.
    pub stale: bool,
    pub stored: bool,
    /// The first reason counted as `Qcache_not_cached_<reason>`.
    pub reason: Option<Reason>,
    pub rows: u64,
    pub bytes: u64,
    pub upstream: Duration,
    pub at: Option<Instant>,
}

impl Current {
    /// What the digest cell of a read not served from the cache records at the command's
    /// end: stored, or sent with the reason counted (a hit records where it is served).
    pub fn unserved_outcome(&self) -> Outcome {
        if self.stored {
            Outcome::Stored
        } else {
            Outcome::Sent(self.reason)
        }
    }

    /// A read went to the server and its answer (`rows`, `bytes`) was relayed, sent at
    /// `sent` and answered in `took`: the figures add up over the statement's sends, and
    /// it happened at its first.
    pub fn sent(&mut self, rows: u64, bytes: u64, sent: Instant, took: Duration) {
        self.read = true;
        self.rows += rows;
        self.bytes += bytes;
        self.upstream += took;
        self.at.get_or_insert(sent);
    }
}

/// Whether [`count_unserved`] counts anything for the statement: a read not served from
/// the cache, with digests on. Checked before the call so that a hit makes none.
#[inline]
pub fn unserved_counted(cur: &Current, digests: &Digests) -> bool {
    cur.read && !cur.hit && digests.enabled()
}

/// A read that was not served from the cache, counted under its digest when the command
/// is done (`sql`: its text; its digest computed here when the miss path had not).
#[inline(never)]
pub fn count_unserved(cur: &mut Current, st: &mut SessionState, digests: &Digests, sql: &[u8]) {
    if !unserved_counted(cur, digests) {
        return;
    }
    let text = analysis::server_text(sql, st.server);
    let digest = *cur.digest.get_or_insert_with(|| analysis::digest(&text));
    let shape = digests.text(digest, || analysis::normalised_text(&text, TEXT_MAX));
    let o = Observation {
        digest,
        schema: st.db.as_deref(),
        user: Some(&st.user),
        schema_key: st.db_key,
        text: shape.as_ref(),
        outcome: cur.unserved_outcome(),
        rows: cur.rows,
        bytes: cur.bytes,
        upstream: cur.upstream,
        at: cur.at.unwrap_or_else(Instant::now),
    };
    digests.record(&o, &mut st.digest_hint);
}

/// The normalised text a miss stores with its entry (`sql` read as `server` reads it), so
/// hits can name their row; None with digests off.
pub fn shape_text(
    digests: &Digests,
    server: analysis::ServerVersion,
    digest: u64,
    sql: &[u8],
) -> Option<Arc<str>> {
    if !digests.enabled() {
        return None;
    }
    digests.text(digest, || {
        analysis::normalised_text(&analysis::server_text(sql, server), TEXT_MAX)
    })
}

/// The session's previous statement, for `SHOW QCACHE LAST`; by default none yet.
#[derive(Debug)]
pub struct Last {
    /// Its bytes (a prepared statement's SQL), cut at [`LAST_SQL_MAX`]; the buffer is
    /// reused from statement to statement. Kept as bytes: every statement, hits included,
    /// passes through here, and only `SHOW QCACHE LAST` needs them as text (checking
    /// UTF-8 per statement cost a hit about 7% more instructions).
    pub sql: Vec<u8>,
    pub prepared: bool,
    pub what: Current,
    /// No statement yet.
    pub none: bool,
}

impl Default for Last {
    fn default() -> Last {
        Last {
            sql: Vec::new(),
            prepared: false,
            what: Current::default(),
            none: true,
        }
    }
}

/// Longest statement text `SHOW QCACHE LAST` repeats.
pub const LAST_SQL_MAX: usize = 1024;

/// Makes the statement just answered `SHOW QCACHE LAST`'s: its bytes (cut) and what
/// happened to it.
pub fn remember(last: &mut Last, cur: &mut Current, sql: &[u8], prepared: bool) {
    last.sql.clear();
    last.sql
        .extend_from_slice(&sql[..sql.len().min(LAST_SQL_MAX)]);
    last.prepared = prepared;
    last.none = false;
    std::mem::swap(&mut last.what, cur);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    /// What a statement's digest cell records at its end, one row per case: (read, hit,
    /// stored, reason, digests on) → the calls, hits, stores and reasons counted.
    #[test]
    fn what_the_end_of_a_statement_records() {
        /// (calls, hits, stores, reasons) counted; None: nothing recorded.
        type Want = Option<(u64, u64, u64, usize)>;
        type Row = (&'static str, bool, bool, bool, Option<Reason>, bool, Want);
        let r = Some(Reason::Unparsable);
        #[rustfmt::skip]
        let rows: &[Row] = &[
            ("a miss stored",           true,  false, true,  None, true,  Some((1, 0, 1, 0))),
            ("a miss sent, a reason",   true,  false, false, r,    true,  Some((1, 0, 0, 1))),
            ("a miss sent, no reason",  true,  false, false, None, true,  Some((1, 0, 0, 0))),
            ("a hit (counted served)",  true,  true,  false, None, true,  None),
            ("not a read",              false, false, false, r,    true,  None),
            ("digests off",             true,  false, true,  None, false, None),
        ];
        let w = World::new(false);
        for (name, read, hit, stored, reason, on, want) in rows {
            let digests = Digests::new(if *on { 16 } else { 0 });
            let mut st = w.session(Some("db"));
            let mut cur = Current {
                read: *read,
                hit: *hit,
                stored: *stored,
                reason: *reason,
                rows: 3,
                bytes: 40,
                ..Current::default()
            };
            assert_eq!(unserved_counted(&cur, &digests), want.is_some(), "{name}");
            count_unserved(&mut cur, &mut st, &digests, b"SELECT a FROM t WHERE id = 7");
            let rows = digests.rows();
            let got = rows.iter().find(|r| r.digest.is_some()).map(|r| {
                let c = &r.counts;
                (c.calls, c.hits, c.stores, c.not_cached.len())
            });
            assert_eq!(got, *want, "{name}");
            if want.is_some() {
                let row = rows.iter().find(|r| r.digest.is_some()).unwrap();
                assert_eq!(
                    row.digest, cur.digest,
                    "{name}: the digest computed is kept"
                );
                assert_eq!((row.counts.rows, row.counts.bytes), (3, 40), "{name}");
                assert_eq!(row.schema.as_deref(), Some("db"), "{name}");
            }
        }
    }

    /// A statement sent twice (a refused read sent again) adds its figures up and keeps
    /// its first send's time; the outcome follows `stored`.
    #[test]
    fn sends_add_up() {
        let mut cur = Current::default();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(5);
        cur.sent(2, 10, t0, Duration::from_millis(1));
        cur.sent(3, 20, t1, Duration::from_millis(2));
        assert!(cur.read);
        assert_eq!((cur.rows, cur.bytes), (5, 30));
        assert_eq!(cur.upstream, Duration::from_millis(3));
        assert_eq!(cur.at, Some(t0));
        assert_eq!(cur.unserved_outcome(), Outcome::Sent(None));
        cur.stored = true;
        assert_eq!(cur.unserved_outcome(), Outcome::Stored);
    }

    /// The shape text is made only with digests on.
    #[test]
    fn shape_text_only_when_counting() {
        let w = World::new(false);
        let st = w.session(Some("db"));
        let sql = b"SELECT a FROM t WHERE id = 7";
        for (cap, some) in [(16, true), (0, false)] {
            let d = Digests::new(cap);
            assert_eq!(
                shape_text(&d, st.server, 1, sql).is_some(),
                some,
                "cap {cap}"
            );
        }
    }
}
