//! Latency histograms: the hit and miss timings sessions record on the hot path, read by
//! /metrics and `SHOW QCACHE STATUS` when asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in nanoseconds: a hit takes microseconds, a miss
/// a round trip or more, so the range spans both.
const BOUNDS_NS: [u64; 17] = [
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    10_000_000_000,
];
const BUCKETS: usize = BOUNDS_NS.len() + 1;
const STRIPES: usize = 8;

/// One thread's share of a histogram, on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    /// Per-bucket counts (not cumulative); the last is +Inf.
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// A fixed-bucket latency histogram observed with two relaxed atomic adds on a per-thread
/// stripe. prometheus-client's own `Histogram` takes a mutex per observation, which would be
/// the one contended lock on the hit path; this one is summed only when scraped.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    stripes: [Stripe; STRIPES],
}

impl LatencyHistogram {
    #[inline]
    pub fn observe(&self, d: Duration) {
        self.observe_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// [`observe`](Self::observe) of a time in nanoseconds (`crate::clock`, the hit path's).
    #[inline]
    pub fn observe_ns(&self, ns: u64) {
        thread_local! {
            static STRIPE: usize = {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed) as usize % STRIPES
            };
        }
        let i = BOUNDS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(BUCKETS - 1);
        let s = &self.stripes[STRIPE.with(|s| *s)];
        s.buckets[i].fetch_add(1, Ordering::Relaxed);
        s.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// (sum in seconds, count, per-bucket counts with upper bounds in seconds).
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut counts = [0u64; BUCKETS];
        let mut sum = 0u64;
        for s in &self.stripes {
            for (c, b) in counts.iter_mut().zip(&s.buckets) {
                *c += b.load(Ordering::Relaxed);
            }
            sum = sum.wrapping_add(s.sum_ns.load(Ordering::Relaxed));
        }
        let buckets: Vec<(f64, u64)> = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let bound = BOUNDS_NS.get(i).map_or(f64::INFINITY, |&b| b as f64 / 1e9);
                (bound, c)
            })
            .collect();
        (sum as f64 / 1e9, counts.iter().sum(), buckets)
    }

    pub fn count(&self) -> u64 {
        self.snapshot().1
    }
}

/// Timings the session records; everything else is read from existing counters at scrape.
#[derive(Debug, Default)]
pub struct Latencies {
    /// From lookup to the cached bytes queued for the client.
    pub hit: LatencyHistogram,
    /// From sending a cacheable read upstream to its last packet relayed.
    pub miss: LatencyHistogram,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_sum() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(10));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 3);
        assert!((sum - 60.00301).abs() < 1e-6, "{sum}");
        assert_eq!(buckets[0], (25e-6, 1));
        assert_eq!(buckets.last(), Some(&(f64::INFINITY, 1)));
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 3);
    }

    /// Bucket bounds are inclusive: a duration equal to a bound counts in that bucket, one
    /// nanosecond more in the next.
    #[test]
    fn bucket_bounds_are_inclusive() {
        for (i, &bound) in BOUNDS_NS.iter().enumerate() {
            let h = LatencyHistogram::default();
            h.observe(Duration::from_nanos(bound));
            h.observe(Duration::from_nanos(bound + 1));
            let (_, count, buckets) = h.snapshot();
            assert_eq!(count, 2);
            assert_eq!(buckets[i].1, 1, "at {bound}");
            assert_eq!(buckets[i + 1].1, 1, "after {bound}");
        }
    }

    /// An empty histogram reads zero everywhere, with every bound listed and +Inf last.
    #[test]
    fn an_empty_histogram_reads_zero() {
        let h = LatencyHistogram::default();
        let (sum, count, buckets) = h.snapshot();
        assert_eq!((sum, count, h.count()), (0.0, 0, 0));
        assert_eq!(buckets.len(), BOUNDS_NS.len() + 1);
        assert!(buckets.iter().all(|b| b.1 == 0));
        assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(buckets.last().map(|b| b.0), Some(f64::INFINITY));
    }

    /// Observations from many threads land in different stripes and are all summed.
    #[test]
    fn stripes_are_summed() {
        let h = std::sync::Arc::new(LatencyHistogram::default());
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        h.observe(Duration::from_micros(30));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 1600);
        assert_eq!(buckets[1].1, 1600);
        assert!((sum - 1600.0 * 30e-6).abs() < 1e-9, "{sum}");
    }

    /// A duration beyond u64 nanoseconds counts in +Inf with the largest sum it can add.
    #[test]
    fn huge_durations_saturate() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_secs(u64::MAX));
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 1);
        assert_eq!(buckets.last().map(|b| b.1), Some(1));
        assert!((sum - u64::MAX as f64 / 1e9).abs() < 1.0);
    }
}
