//! The monotonic clock of the hit path: nanoseconds as a `u64`, read once per hit and
//! compared with integer arithmetic.
//!
//! `std::time::Instant` reads the same clock (CLOCK_MONOTONIC) but pays a checked
//! `Timespec` subtraction, with its normalising branches, for every `elapsed` or
//! `duration_since`; a hit took three of them (keep-alive due, digest time, hit latency),
//! about 90 instructions of a 3,800-instruction hit (#36). Times kept for the hit path
//! (the upstream's last write, a digest's last hit, the binlog's lag) are kept on this
//! clock so that the hit compares plain integers.

use std::time::{Duration, Instant};

use rustix::time::{clock_gettime, ClockId};

/// Nanoseconds on the monotonic clock (since boot, in practice: an arbitrary origin).
#[inline]
pub fn now() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    // A monotonic clock is never negative; 2^64 ns is 584 years of uptime.
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// Nanoseconds from `earlier` to `later`, 0 if `later` is not after it.
#[inline]
pub fn between(earlier: u64, later: u64) -> u64 {
    later.saturating_sub(earlier)
}

/// The `Instant` of `ns`, a time on this clock in the past, for what keeps `Instant`s
/// (two more clock reads: off the hit path).
pub fn instant_of(ns: u64) -> Instant {
    let (at, then) = (now(), Instant::now());
    then.checked_sub(Duration::from_nanos(between(ns, at)))
        .unwrap_or(then)
}

/// `d` in nanoseconds, saturated (for comparisons with [`between`]).
#[inline]
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_clock_instant_reads() {
        // Both read CLOCK_MONOTONIC: an interval measured on one is the interval on the
        // other, within the time the reads themselves take.
        let (a, i) = (now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (b, j) = (now(), std::time::Instant::now());
        let ours = between(a, b) as i128;
        let std = j.duration_since(i).as_nanos() as i128;
        assert!(ours >= 20_000_000, "{ours}");
        assert!((ours - std).abs() < 5_000_000, "ours {ours} std {std}");
    }

    #[test]
    fn an_instant_of_a_reading_is_that_reading() {
        let (a, i) = (now(), Instant::now());
        std::thread::sleep(Duration::from_millis(10));
        let back = instant_of(a);
        let off = if back > i { back - i } else { i - back };
        assert!(off < Duration::from_millis(5), "{off:?}");
    }

    #[test]
    fn between_never_goes_negative() {
        assert_eq!(between(10, 4), 0);
        assert_eq!(between(4, 10), 6);
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        assert_eq!(nanos(Duration::from_millis(3)), 3_000_000);
    }
}
