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

/// First wait after L2 is lost.
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest wait between reconnection attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The next reconnection delay after one that failed: doubling, capped.
pub fn next_backoff(prev: Duration) -> Duration {
    (prev * 2).clamp(BACKOFF_MIN, BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn backoff_doubles_and_caps() {
        assert_eq!(next_backoff(Duration::ZERO), BACKOFF_MIN);
        assert_eq!(next_backoff(BACKOFF_MIN), BACKOFF_MIN * 2);
        assert_eq!(next_backoff(BACKOFF_MAX), BACKOFF_MAX);
    }
}
