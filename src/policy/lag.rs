//! How far behind the server a connected binlog tail is, and when that stops hits
//! (`invalidation.max_lag`). Sans-IO: the tail feeds [`CatchUp`] what it applied and what the
//! server said its binlog's end was, with times as milliseconds on one monotonic clock, and
//! [`hits_stop`] decides.
//!
//! A tail can stream and heartbeat while it falls behind (a slowed process, a big
//! transaction, a slow consumer): connected is not caught up. An event's header timestamp
//! has one-second resolution and a heartbeat comes only on an idle stream, so neither bounds
//! the lag of a busy one. What does: the server's binlog end, asked at time `t` (before the
//! question is sent), holds every transaction committed before `t` (a transaction is in the
//! binlog before it is committed in the engine). Once the tail has applied (bumped) up to
//! that position, it has seen every write committed before `t`: it is caught up *as of*
//! `t`, however late it got there. So the lag is at most now − the latest such `t`, and an
//! instance whose bound exceeds `max_lag`, or cannot tell, serves no hit a direct write could
//! have made stale. The probe costs one `SHOW MASTER STATUS` per period on the tail's own
//! connection; a probe that fails or does not come back lets the bound grow: fail closed.

use std::collections::VecDeque;
use std::time::Duration;

/// A binlog position: file name and offset.
pub type Position = (String, u64);

/// Probes not yet reached that are kept: each newer one reached implies the older ones, so
/// dropping the oldest only delays what the bound can claim.
const MAX_TARGETS: usize = 64;

/// True when offset `end` of `file` is at or past `target`: the same file further on, or a
/// later file of the same sequence (`binlog.000042` after `binlog.000041`). Files that do
/// not compare (another base name, no sequence number) are not reached.
pub fn reached(file: &str, end: u64, target: &Position) -> bool {
    if file == target.0 {
        return end >= target.1;
    }
    match (split(file), split(&target.0)) {
        (Some((a, i)), Some((b, j))) => a == b && i > j,
        _ => false,
    }
}

fn split(name: &str) -> Option<(&str, u64)> {
    let (base, n) = name.rsplit_once('.')?;
    Some((base, n.parse().ok()?))
}

/// What the tail knows of how far it is behind: the latest time (ms) as of which it has
/// applied everything the server had written, from the probes it reached.
#[derive(Debug, Default, Clone)]
pub struct CatchUp {
    /// Probes of the server's binlog end not reached yet: (asked at, position), oldest first.
    targets: VecDeque<(u64, Position)>,
    /// Where the tail has applied up to (at a transaction boundary).
    applied: Option<Position>,
    /// Caught up as of this time; None: unknown.
    as_of: Option<u64>,
}

impl CatchUp {
    /// A new stream: nothing is known until [`CatchUp::caught_up`] or a probe is reached.
    pub fn reset(&mut self) {
        *self = CatchUp::default();
    }

    /// The stream reached the server's end as asked at `asked` (a fresh stream starts
    /// there; a resumed one caught up with it), and has applied up to `at`.
    pub fn caught_up(&mut self, asked: u64, at: Position) {
        self.as_of = Some(self.as_of.map_or(asked, |t| t.max(asked)));
        self.applied = Some(at);
        self.settle();
    }

    /// The server said, asked at `asked`, that its binlog ends at `end`.
    pub fn probed(&mut self, asked: u64, end: Position) {
        if self.targets.len() == MAX_TARGETS {
            self.targets.pop_front();
        }
        self.targets.push_back((asked, end));
        self.settle();
    }

    /// The tail applied every event up to `at` (a transaction boundary).
    pub fn applied(&mut self, at: Position) {
        self.applied = Some(at);
        self.settle();
    }

    fn settle(&mut self) {
        let Some((file, end)) = &self.applied else {
            return;
        };
        while let Some((asked, target)) = self.targets.front() {
            if !reached(file, *end, target) {
                break;
            }
            self.as_of = Some(self.as_of.map_or(*asked, |t| t.max(*asked)));
            self.targets.pop_front();
        }
    }

    /// The time the tail is caught up as of; None: unknown.
    pub fn as_of(&self) -> Option<u64> {
        self.as_of
    }

    /// How far behind the tail may be at `now`: None when unknown.
    pub fn behind(&self, now: u64) -> Option<Duration> {
        self.as_of
            .map(|t| Duration::from_millis(now.saturating_sub(t)))
    }
}

/// What an instance knows of its binlog bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailLag {
    /// No tail (off by configuration, or the server has no binlog): no bound to keep.
    Off,
    /// The stream has been down (or replaying, or a standby has heard no tail) this long.
    Down(Duration),
    /// Streaming, and behind by at most this much; None: cannot tell.
    Behind(Option<Duration>),
}

/// Whether hits a direct write could have made stale must stop.
pub fn hits_stop(lag: TailLag, max_lag: Duration) -> bool {
    match lag {
        TailLag::Off => false,
        TailLag::Down(d) => d > max_lag,
        TailLag::Behind(Some(b)) => b > max_lag,
        TailLag::Behind(None) => true,
    }
}

/// How often a tail asks the server's binlog end: a quarter of `max_lag`, between 20 ms and
/// 250 ms, so that a tail keeping up never nears the bound.
pub fn probe_every(max_lag: Duration) -> Duration {
    (max_lag / 4).clamp(Duration::from_millis(20), Duration::from_millis(250))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(f: &str, o: u64) -> Position {
        (f.to_string(), o)
    }

    /// One row per rule of [`hits_stop`].
    #[test]
    fn when_hits_stop() {
        let max = Duration::from_millis(1000);
        let ms = Duration::from_millis;
        let rows: &[(&str, TailLag, bool)] = &[
            ("no tail: no bound to keep", TailLag::Off, false),
            ("down within max_lag", TailLag::Down(ms(900)), false),
            ("down past max_lag", TailLag::Down(ms(1100)), true),
            (
                "streaming, caught up recently",
                TailLag::Behind(Some(ms(200))),
                false,
            ),
            (
                "streaming but behind past max_lag",
                TailLag::Behind(Some(ms(1500))),
                true,
            ),
            (
                "streaming, lag unknown: fail closed",
                TailLag::Behind(None),
                true,
            ),
        ];
        for (why, lag, stop) in rows {
            assert_eq!(hits_stop(*lag, max), *stop, "{why}");
        }
    }

    /// One row per rule of [`reached`].
    #[test]
    fn positions_reached() {
        let rows: &[(&str, &str, u64, Position, bool)] = &[
            (
                "same file, at it",
                "bin.000003",
                500,
                p("bin.000003", 500),
                true,
            ),
            (
                "same file, short of it",
                "bin.000003",
                499,
                p("bin.000003", 500),
                false,
            ),
            ("a later file", "bin.000004", 4, p("bin.000003", 500), true),
            (
                "an earlier file",
                "bin.000002",
                9000,
                p("bin.000003", 500),
                false,
            ),
            (
                "another base name",
                "other.000009",
                4,
                p("bin.000003", 500),
                false,
            ),
            (
                "no sequence number",
                "bin",
                900,
                p("bin.000003", 500),
                false,
            ),
        ];
        for (why, file, end, target, want) in rows {
            assert_eq!(reached(file, *end, target), *want, "{why}");
        }
    }

    /// The bound follows the probes the tail reached, however late it reached them.
    #[test]
    fn caught_up_as_of_the_probes_reached() {
        let mut c = CatchUp::default();
        assert_eq!(c.behind(100), None, "nothing known: unknown");
        c.caught_up(100, p("b.000001", 400));
        assert_eq!(c.behind(350), Some(Duration::from_millis(250)));
        // The server moved on; the tail has not got there.
        c.probed(400, p("b.000001", 900));
        assert_eq!(
            c.behind(2000),
            Some(Duration::from_millis(1900)),
            "a slow tail"
        );
        c.applied(p("b.000001", 700));
        assert_eq!(c.behind(2000), Some(Duration::from_millis(1900)));
        // Reached late: caught up as of when the probe was asked, not when reached.
        c.applied(p("b.000001", 900));
        assert_eq!(c.behind(2000), Some(Duration::from_millis(1600)));
        // An idle server: a probe at the applied position is reached at once.
        c.probed(1900, p("b.000001", 900));
        assert_eq!(c.behind(2000), Some(Duration::from_millis(100)));
        // A rotation: a later file reaches a probe of the earlier one.
        c.probed(2100, p("b.000001", 1200));
        c.applied(p("b.000002", 4));
        assert_eq!(c.behind(2200), Some(Duration::from_millis(100)));
        c.reset();
        assert_eq!(c.behind(2200), None, "a new stream knows nothing");
    }

    #[test]
    fn probe_period_follows_max_lag() {
        let ms = Duration::from_millis;
        assert_eq!(probe_every(ms(1000)), ms(250));
        assert_eq!(probe_every(ms(200)), ms(50));
        assert_eq!(probe_every(ms(10)), ms(20));
        assert_eq!(probe_every(ms(60_000)), ms(250));
    }
}
