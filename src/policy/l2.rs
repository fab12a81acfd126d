//! Policy: when an entry of the shared second level (or an L1 copy of one, in strict mode) may
//! be served, and how long to wait before reconnecting to it.
//!
//! The rule is L1's, fleet-wide: an entry carries the L2 versions of its tables read before
//! its query went upstream, and is served only while every one of them is still current.
//! Anything L2 cannot vouch for (a version missing, a list that does not match) is a miss.

use std::time::Duration;

/// What the version check says about an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L2Verdict {
    /// Every version is present and equal to the entry's: serve it.
    Serve,
    /// A version moved since the entry was computed: a write came after it.
    Stale,
    /// The entry depends on other names than the read (a collision, a catalog change, a
    /// forged value): it says nothing about this read.
    Mismatch,
    /// L2 could not give a version (a lying or partial answer): nothing can be vouched for.
    MissingVersion,
}

/// Judges an entry's stamps (`entry`: dependency name and version, as stored) against the
/// current versions read from L2 for the names this read depends on, in the same order.
pub fn judge<'a>(
    entry: &[(String, u64)],
    current: impl ExactSizeIterator<Item = (&'a str, Option<u64>)>,
) -> L2Verdict {
    if entry.len() != current.len() || entry.is_empty() {
        return L2Verdict::Mismatch;
    }
    let mut stale = false;
    for ((name, v), (cur_name, cur)) in entry.iter().zip(current) {
        if name != cur_name {
            return L2Verdict::Mismatch;
        }
        match cur {
            None => return L2Verdict::MissingVersion,
            Some(c) if c != *v => stale = true,
            Some(_) => {}
        }
    }
    if stale {
        L2Verdict::Stale
    } else {
        L2Verdict::Serve
    }
}

/// Whether a miss that leads its fill asks L2 before the server (and so whether its result
/// is stored there): only a plain read (a transaction's snapshot is the server's alone, L2
/// knows nothing of it), of a session with no temporary tables (L2's names cannot tell them
/// from the base tables they hide) and with no key space of its own (`own_keys`: the
/// privileges the server kept for it since a sticky change, `SessionState::make_private`;
/// no other session may share its entries, and the number that keys them apart is counted
/// per process, so another instance's session of the same user, with other privileges, has
/// the same one), while L2 is usable.
pub fn asks_before_server(plain: bool, temporaries: bool, own_keys: bool, usable: bool) -> bool {
    plain && !temporaries && !own_keys && usable
}

/// Whether reads (lookups, strict-mode checks, fills) may use L2 now: `healthy`
/// (connected and resynced), every bump queued before it last became healthy raised
/// (`raised`, the sequence of the last raised bump, at least `readable_from`: those bumps'
/// writes were acknowledged while L2 was down, without waiting for them, and a version they
/// have not moved yet still vouches for entries from before them), no binlog gap undecided
/// (`gap_pending`) and the server's data not being adopted again (`adopting`).
pub fn readable(
    healthy: bool,
    raised: u64,
    readable_from: u64,
    gap_pending: bool,
    adopting: bool,
) -> bool {
    healthy && raised >= readable_from && !gap_pending && !adopting
}

/// Whether a write's OK waits for its raises (`L2::flush`, at most `l2.timeout`): while L2
/// is `healthy`, and while it is down for a check that found another server behind its
/// connection (`reconnecting`: [`Recheck::Reconnect`], until the reconnection that adopts
/// it ends), since that Redis answers and the raises land once it is adopted, within
/// milliseconds; acknowledged at once there, the write's raise stayed queued while another
/// instance, back first and strict, confirmed its hits. Not while Redis cannot be reached
/// (refused, timed out, this instance cut off): the write would wait the whole timeout for
/// nothing; its raises are kept and raised before L2 is read again ([`readable`]).
pub fn write_waits(healthy: bool, reconnecting: bool) -> bool {
    healthy || reconnecting
}

/// Strict mode (`l2.validate_hits = "remote"`): whether an L1 hit is served, given L2's
/// answer to its check: `Some(current)`, or None when L2 could not say (down, slow, this
/// instance cut off or adopting a flushed Redis anew). Only a hit L2 vouched for is served.
/// An unchecked hit used to fall back to the local rule, which the other instances' writes
/// reach only through the notification channel; but an instance that cannot reach Redis
/// hears nothing on it either, while a writer that can raises its versions and answers OK:
/// B filled an entry while cut off and served it after A's acknowledged write. Such a hit
/// goes to the server, as a miss does.
pub fn strict_hit_served(check: Option<bool>) -> bool {
    check == Some(true)
}

/// First wait after L2 is lost.
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest wait between reconnection attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The next reconnection delay after one that failed: doubling, capped.
pub fn next_backoff(prev: Duration) -> Duration {
    (prev * 2).clamp(BACKOFF_MIN, BACKOFF_MAX)
}

/// What a (re)connection to Redis must do before L2 is used, given whose data it holds now:
/// `known`, the server identity (`run_id`) this instance last followed; `marker`, the identity
/// qcache last wrote into Redis's data (its `epoch` key); `now`, the server's identity. A
/// server that restarted (from whatever snapshot) or a replica promoted in its place has a
/// new identity, and its data may predate raises acknowledged before: versions that went
/// back in time, vouching again for entries filled before writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adoption {
    /// The same server as before, or one the fleet already adopted and this instance never
    /// followed another: nothing to do.
    Keep,
    /// Another instance adopted this server first (and invalidated L2): this instance's own
    /// entries, some perhaps copied from the old server's answers, go.
    InvalidateLocal,
    /// Nobody adopted this server's data yet: every L2 entry is invalidated (`e` raised past
    /// any version it held) and every local one, then the marker names this server.
    InvalidateFleet,
    /// The server this instance followed, without the marker: emptied (FLUSHALL; the raise
    /// count restarts with it), the marker evicted or deleted, or data that went back to a
    /// dump taken while the marker was missing (deleted by hand, then saved before a ping
    /// wrote it back). Not taken for an outage: L2 stays up and no rollback is counted; but
    /// `e` is raised for the fleet and this instance's entries go ([`Adoption::
    /// raises_everything`]), harmless on an emptied server (every version read again is
    /// created at Redis time, above any stamp) and what a rollback needs; then the marker
    /// is written again.
    Mark,
}

impl Adoption {
    /// Whether `e` is raised for the fleet (every L2 entry invalidated) and this instance's
    /// own entries dropped before the server is used: data nobody adopted, and a server
    /// found without the marker, whose data may have gone back to a dump without it.
    pub fn raises_everything(self) -> bool {
        matches!(self, Adoption::InvalidateFleet | Adoption::Mark)
    }

    /// Whether this is counted as a rollback (`Qcache_l2_rollbacks`) and, found by a ping,
    /// takes L2 down until it is adopted again: not a missing marker on the server this
    /// instance followed, which a FLUSHALL leaves.
    pub fn is_rollback(self) -> bool {
        matches!(self, Adoption::InvalidateFleet | Adoption::InvalidateLocal)
    }
}

/// What the periodic check of a connection L2 is used through (`L2::still_adopted`, every
/// ping) does with its [`Adoption`] verdict, given whether the server answering is the one
/// this instance follows (`same_server`: the same identity, process and data history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recheck {
    /// The data this instance adopted: nothing to do.
    Keep,
    /// The same server, whose data moved under it (emptied, marked again by another instance
    /// after a FLUSHALL, back to an older dump, its raise count below one seen): adopted
    /// again on this connection. Reads of L2 wait until `e` is raised and the marker written;
    /// raises go on landing throughout, so a write is still raised before its OK. Taking L2
    /// down instead queued the raises of a writer that re-checked after another instance
    /// had marked the server again, and its OK went out with them unraised while the others
    /// (strict ones too) confirmed hits against versions they had not moved yet.
    Readopt,
    /// Another server behind the same connection (a new `master_replid`: made a replica of
    /// another and promoted): L2 goes down, and the reconnection adopts it.
    Reconnect,
}

/// The rule of [`Recheck`].
pub fn recheck(adoption: Adoption, same_server: bool) -> Recheck {
    match adoption {
        Adoption::Keep => Recheck::Keep,
        _ if same_server => Recheck::Readopt,
        _ => Recheck::Reconnect,
    }
}

/// The raise count an instance records after a raise proved the counter went back
/// ([`raise_went_back`]): above any count, so the next check adopts the data anew (or, if
/// the marker is missing too, marks it again, raising `e`) whatever count it then reads.
pub const RAISES_SUSPECT: u64 = u64::MAX;

/// Whether a raise answered with `count` (the fleet's raise counter after the script's
/// INCR; 0 where none is kept) proves that the counter went back since this instance saw
/// `seen` (its count read before the raise was sent): an INCR answers more than any value
/// the counter held before, so a count at or below one already seen is data that lost
/// raises, even when later raises brought the count back past `seen` before a check read
/// it. Not while already suspect ([`RAISES_SUSPECT`]): the check that follows decides.
pub fn raise_went_back(seen: u64, count: u64) -> bool {
    count != 0 && seen != RAISES_SUSPECT && count <= seen
}

/// What a Redis holds, as far as [`adopt`] asks: its [`identity`], the marker qcache wrote
/// into its data (the identity of the server the fleet last adopted), and the fleet's raise
/// counter (moved by every raise, with the versions; 0 when missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub identity: String,
    pub marker: Option<String>,
    pub raises: u64,
}

impl Held {
    /// [`adopt`] of what this Redis holds, by an instance that followed `known`, saw the
    /// raise counter at `seen` and the marker stamped `stamp` ([`marker_value`]).
    pub fn adopt(&self, known: Option<&str>, seen: u64, stamp: u64) -> Adoption {
        adopt(
            known,
            seen,
            self.marker.as_deref(),
            &self.identity,
            self.raises,
            stamp,
        )
    }

    /// The stamp of the marker this Redis holds (0: none, or one written without).
    pub fn marker_stamp(&self) -> u64 {
        self.marker.as_deref().map_or(0, |m| parse_marker(m).1)
    }
}

/// The marker qcache writes: the adopted server's identity and the Redis time (µs) it was
/// written at. Redis time only grows in one process, so a marker stamped earlier than one an
/// instance saw is data that went back (an older dump reloaded after a FLUSHALL was marked
/// again), whatever count it holds.
pub fn marker_value(identity: &str, stamp: u64) -> String {
    format!("{identity}@{stamp}")
}

/// A marker's identity and stamp ([`marker_value`]); a marker without a stamp (written by an
/// older qcache) is stamped 0.
pub fn parse_marker(marker: &str) -> (&str, u64) {
    match marker.rsplit_once('@') {
        Some((id, stamp)) if !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()) => {
            (id, stamp.parse().unwrap_or(0))
        }
        _ => (marker, 0),
    }
}

/// The rule of [`Adoption`]. Unknown means harmful: a missing marker (a new Redis, one that
/// lost it, the first run of this rule on an old one) invalidates the fleet, unless it is
/// the server this instance followed ([`Adoption::Mark`]), and so does a raise count lower
/// than one this instance saw (`seen`): the data lost raises, whatever identity it keeps;
/// so does a marker stamped earlier than the one this instance saw (`stamp`, 0: none).
pub fn adopt(
    known: Option<&str>,
    seen: u64,
    marker: Option<&str>,
    now: &str,
    raises: u64,
    stamp: u64,
) -> Adoption {
    let marker = marker.map(parse_marker);
    if known == Some(now) && marker.is_none() {
        Adoption::Mark
    } else if marker.map(|m| m.0) != Some(now)
        || marker.is_some_and(|m| m.1 < stamp)
        || raises < seen
    {
        Adoption::InvalidateFleet
    } else if known.is_some_and(|k| k != now) {
        Adoption::InvalidateLocal
    } else {
        Adoption::Keep
    }
}

/// The identity [`adopt`] compares, read off `INFO server` and `INFO replication`: the
/// process (`run_id`) and the history of its data (`master_replid`). A server that took its
/// data from another (made `REPLICAOF` an older copy and then `REPLICAOF NO ONE`, a replica
/// promoted) keeps its `run_id` but never its `master_replid`: promotion always starts a new
/// one. A server that is not a master (`role:slave`) is no L2 at all: qcache writes
/// versions, and what a replica holds follows another server. Anything missing is an error:
/// an identity that cannot be read cannot be vouched for.
pub fn identity(server: &str, replication: &str) -> Result<String, &'static str> {
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let run_id = field(server, "run_id").ok_or("INFO server without run_id")?;
    match field(replication, "role").as_deref() {
        Some("master") => {}
        Some(_) => return Err("L2 is a replica (role is not master)"),
        None => return Err("INFO replication without role"),
    }
    let replid =
        field(replication, "master_replid").ok_or("INFO replication without master_replid")?;
    Ok(format!("{run_id}/{replid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_of_a_redis() {
        let server = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\ntcp_port:6379\r\n";
        let master = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_replid:r1\r\nmaster_replid2:0000\r\n";
        let promoted = "role:master\r\nmaster_replid:r2\r\nmaster_replid2:r1\r\n";
        let replica = "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_replid:r0\r\n";
        for (why, server, repl, want) in [
            (
                "a master: its process and its data's history",
                server,
                master,
                Ok("abc/r1"),
            ),
            (
                "promoted after a resync: the same process, another history",
                server,
                promoted,
                Ok("abc/r2"),
            ),
            (
                "a replica is not an L2",
                server,
                replica,
                Err("L2 is a replica (role is not master)"),
            ),
            (
                "no run_id",
                "redis_version:7\r\n",
                master,
                Err("INFO server without run_id"),
            ),
            (
                "no role",
                server,
                "master_replid:r1\r\n",
                Err("INFO replication without role"),
            ),
            (
                "no replid (not a Redis of this age)",
                server,
                "role:master\r\n",
                Err("INFO replication without master_replid"),
            ),
            (
                "a field named like another is not it",
                "run_idx:zz\r\nrun_id:abc\r\n",
                "role:master\r\nmaster_replid2:x\r\nmaster_replid:r1\r\n",
                Ok("abc/r1"),
            ),
        ] {
            assert_eq!(
                identity(server, repl).as_deref().map_err(|e| *e),
                want,
                "{why}"
            );
        }
    }

    #[test]
    fn a_miss_asks_l2_first_only_when_l2_can_answer_for_it() {
        let rows = [
            (
                "a plain read, no temporaries, L2 usable",
                true,
                false,
                false,
                true,
                true,
            ),
            (
                "inside a transaction's snapshot",
                false,
                false,
                false,
                true,
                false,
            ),
            (
                "a session with temporary tables",
                true,
                true,
                false,
                true,
                false,
            ),
            (
                "a session with a key space of its own (privileges kept since a sticky change)",
                true,
                false,
                true,
                true,
                false,
            ),
            (
                "L2 down or not configured",
                true,
                false,
                false,
                false,
                false,
            ),
        ];
        for (rule, plain, temporaries, own_keys, usable, want) in rows {
            assert_eq!(
                asks_before_server(plain, temporaries, own_keys, usable),
                want,
                "{rule}"
            );
        }
    }

    #[test]
    fn adoption_of_a_redis() {
        use Adoption::*;
        for (known, marker, now, want, why) in [
            (
                None,
                None,
                "r1",
                InvalidateFleet,
                "a new Redis, or one that lost the marker",
            ),
            (
                None,
                Some("r0"),
                "r1",
                InvalidateFleet,
                "a restart nobody adopted yet",
            ),
            (
                Some("r0"),
                Some("r0"),
                "r1",
                InvalidateFleet,
                "restored from a snapshot",
            ),
            (
                Some("r1"),
                Some("r1"),
                "r1",
                Keep,
                "a reconnect to the same server",
            ),
            (
                None,
                Some("r1"),
                "r1",
                Keep,
                "a new instance on an adopted server",
            ),
            (
                Some("r0"),
                Some("r1"),
                "r1",
                InvalidateLocal,
                "another instance adopted it",
            ),
            (
                Some("r1"),
                None,
                "r1",
                Mark,
                "the server this instance followed, emptied (FLUSHALL)",
            ),
        ] {
            assert_eq!(adopt(known, 0, marker, now, 0, 0), want, "{why}");
        }
        // The raise counter: data that lost raises is adopted anew, whatever its identity.
        for (known, seen, marker, now, raises, want, why) in [
            (
                Some("r1"),
                7,
                Some("r1"),
                "r1",
                7,
                Keep,
                "the count this instance saw",
            ),
            (
                Some("r1"),
                7,
                Some("r1"),
                "r1",
                9,
                Keep,
                "others raised since",
            ),
            (
                Some("r1"),
                7,
                Some("r1"),
                "r1",
                6,
                InvalidateFleet,
                "an older dump, the same process",
            ),
            (
                Some("r1"),
                7,
                Some("r1"),
                "r1",
                0,
                InvalidateFleet,
                "the counter lost, the marker kept",
            ),
            (
                Some("r1"),
                7,
                None,
                "r1",
                0,
                Mark,
                "emptied: versions come back at Redis time",
            ),
            (
                Some("r1"),
                7,
                None,
                "r1",
                3,
                Mark,
                "emptied, then raised again before the check",
            ),
            (
                Some("r0"),
                7,
                None,
                "r1",
                0,
                InvalidateFleet,
                "another server, empty or not",
            ),
            (
                None,
                0,
                Some("r1"),
                "r1",
                3,
                Keep,
                "a new instance has seen nothing",
            ),
            (
                Some("r0"),
                7,
                Some("r1"),
                "r1",
                2,
                InvalidateFleet,
                "adopted by another, yet lower than seen",
            ),
        ] {
            assert_eq!(adopt(known, seen, marker, now, raises, 0), want, "{why}");
        }
    }

    #[test]
    fn what_each_adoption_does() {
        use Adoption::*;
        for (a, everything, rollback, why) in [
            (Keep, false, false, "the same data"),
            (
                InvalidateLocal,
                false,
                true,
                "another instance adopted it first",
            ),
            (InvalidateFleet, true, true, "nobody adopted this data"),
            (
                Mark,
                true,
                false,
                "no marker: emptied, or back to a dump without it",
            ),
        ] {
            assert_eq!(a.raises_everything(), everything, "{why}: raises e");
            assert_eq!(a.is_rollback(), rollback, "{why}: a rollback");
        }
    }

    #[test]
    fn what_a_check_of_the_connection_in_use_does() {
        use Recheck::*;
        for (adoption, same_server, want, why) in [
            (Adoption::Keep, true, Keep, "the data this instance adopted"),
            (
                Adoption::Mark,
                true,
                Readopt,
                "the server followed, without the marker (FLUSHALL): marked again in place",
            ),
            (
                Adoption::InvalidateFleet,
                true,
                Readopt,
                "the server followed, marked again by another instance first, or its count \
                 went back: adopted again in place, raises landing throughout",
            ),
            (
                Adoption::InvalidateFleet,
                false,
                Reconnect,
                "another server nobody adopted behind the connection",
            ),
            (
                Adoption::InvalidateLocal,
                false,
                Reconnect,
                "another server another instance adopted",
            ),
        ] {
            assert_eq!(recheck(adoption, same_server), want, "{why}");
        }
    }

    #[test]
    fn a_raise_count_that_went_back() {
        for (seen, count, want, why) in [
            (7, 8, false, "the next count"),
            (7, 12, false, "others raised since"),
            (7, 7, true, "a count already seen: the counter went back"),
            (7, 3, true, "lower than seen"),
            (0, 1, false, "nothing seen yet"),
            (7, 0, false, "no counter (cluster)"),
            (
                RAISES_SUSPECT,
                5,
                false,
                "already suspect: the check decides",
            ),
        ] {
            assert_eq!(raise_went_back(seen, count), want, "{why}");
        }
        // Suspect: the next check adopts anew whatever the count, or marks a server
        // found without the marker.
        assert_eq!(
            adopt(Some("r1"), RAISES_SUSPECT, Some("r1"), "r1", 40, 0),
            Adoption::InvalidateFleet
        );
        assert_eq!(
            adopt(Some("r1"), RAISES_SUSPECT, None, "r1", 40, 0),
            Adoption::Mark
        );
    }

    #[test]
    fn a_marker_stamped_earlier_than_seen() {
        use Adoption::*;
        let (m5, m9) = (marker_value("r1", 5), marker_value("r1", 9));
        assert_eq!(parse_marker(&m9), ("r1", 9));
        assert_eq!(parse_marker("r1"), ("r1", 0), "an older qcache's marker");
        assert_eq!(parse_marker("a@b"), ("a@b", 0), "no stamp after the @");
        for (marker, stamp, raises, want, why) in [
            (m9.as_str(), 9, 7, Keep, "the marker this instance saw"),
            (m9.as_str(), 5, 7, Keep, "marked again since (a FLUSHALL)"),
            (
                m5.as_str(),
                9,
                40,
                InvalidateFleet,
                "an older dump after a FLUSHALL was marked again: its count is higher",
            ),
            ("r1", 0, 7, Keep, "no stamps yet"),
            (
                "r1",
                9,
                7,
                InvalidateFleet,
                "an unstamped marker after a stamped one",
            ),
        ] {
            assert_eq!(
                adopt(Some("r1"), 7, Some(marker), "r1", raises, stamp),
                want,
                "{why}"
            );
        }
    }

    fn e(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn verdicts() {
        use L2Verdict::*;
        type Case<'a> = (
            &'a [(&'a str, u64)],
            &'a [(&'a str, Option<u64>)],
            L2Verdict,
        );
        let cases: &[Case] = &[
            (
                &[("e", 1), ("t:a", 5)],
                &[("e", Some(1)), ("t:a", Some(5))],
                Serve,
            ),
            (
                &[("e", 1), ("t:a", 5)],
                &[("e", Some(1)), ("t:a", Some(6))],
                Stale,
            ),
            (
                &[("e", 1), ("t:a", 5)],
                &[("e", Some(2)), ("t:a", Some(5))],
                Stale,
            ),
            (
                &[("e", 1), ("t:a", 5)],
                &[("e", Some(1)), ("t:a", None)],
                MissingVersion,
            ),
            (
                &[("e", 1), ("t:a", 5)],
                &[("e", Some(1)), ("t:b", Some(5))],
                Mismatch,
            ),
            (&[("e", 1)], &[("e", Some(1)), ("t:a", Some(5))], Mismatch),
            (&[], &[], Mismatch),
            // A stale version before a missing one still refuses: missing wins, both refuse.
            (
                &[("e", 1), ("t:a", 5)],
                &[("e", Some(2)), ("t:a", None)],
                MissingVersion,
            ),
        ];
        for (entry, cur, want) in cases {
            assert_eq!(
                judge(&e(entry), cur.iter().copied()),
                *want,
                "{entry:?} vs {cur:?}"
            );
        }
    }

    #[test]
    fn when_l2_may_be_read() {
        for (healthy, raised, from, gap, adopting, want, why) in [
            (
                true,
                7,
                7,
                false,
                false,
                true,
                "resynced, every bump raised",
            ),
            (true, 9, 7, false, false, true, "raised past the floor"),
            (
                false,
                9,
                7,
                false,
                false,
                false,
                "down, or the resync not done",
            ),
            (
                true,
                6,
                7,
                false,
                false,
                false,
                "a bump queued while down (its write acknowledged) not raised yet",
            ),
            (true, 7, 7, true, false, false, "a binlog gap undecided"),
            (
                true,
                7,
                7,
                false,
                true,
                false,
                "the server's data adopted again",
            ),
        ] {
            assert_eq!(
                readable(healthy, raised, from, gap, adopting),
                want,
                "{why}"
            );
        }
    }

    #[test]
    fn when_a_write_waits_for_its_raises() {
        for (healthy, reconnecting, want, why) in [
            (
                true,
                false,
                true,
                "L2 healthy: the raises land before the OK",
            ),
            (
                false,
                true,
                true,
                "down to adopt another server behind the connection: it answers",
            ),
            (
                false,
                false,
                false,
                "Redis out of reach: raised at the resync",
            ),
        ] {
            assert_eq!(write_waits(healthy, reconnecting), want, "{why}");
        }
    }

    #[test]
    fn strict_mode_serves_only_checked_hits() {
        for (check, want, why) in [
            (Some(true), true, "L2 vouches for its versions"),
            (
                Some(false),
                false,
                "a version moved, or L2 never vouched for it",
            ),
            (
                None,
                false,
                "L2 could not say: down, slow, cut off, adopted anew",
            ),
        ] {
            assert_eq!(strict_hit_served(check), want, "{why}");
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(next_backoff(Duration::ZERO), BACKOFF_MIN);
        assert_eq!(next_backoff(BACKOFF_MIN), BACKOFF_MIN * 2);
        assert_eq!(next_backoff(BACKOFF_MAX), BACKOFF_MAX);
    }
}
