//! What a session records of the statement it is answering (`Current`) and of the one
//! before (`Last`, for `SHOW QCACHE LAST`): what happened to it, gathered as it goes and
//! swapped in once the command is done.

use std::time::{Duration, Instant};

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

/// The session's previous statement, for `SHOW QCACHE LAST`.
#[derive(Debug, Default)]
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
