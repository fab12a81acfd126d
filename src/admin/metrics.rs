//! Prometheus metrics: latency histograms recorded on the hit and miss paths, and a collector
//! that reads every other figure from the counters the cache and server already keep.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::cache::InvalidationSource;
use crate::server::Shared;

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
        thread_local! {
            static STRIPE: usize = {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed) as usize % STRIPES
            };
        }
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
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

/// Reads the shared state on each scrape, so nothing is counted twice on the hot path.
struct SharedCollector(Arc<Shared>);

// prometheus-client wants collectors to be Debug; the shared state has nothing useful to show.
impl std::fmt::Debug for SharedCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCollector").finish_non_exhaustive()
    }
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let m = ConstCounter::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn gauge<V>(e: &mut DescriptorEncoder, name: &str, help: &str, v: V) -> std::fmt::Result
where
    V: prometheus_client::encoding::EncodeGaugeValue,
{
    let m = ConstGauge::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &LatencyHistogram,
) -> std::fmt::Result {
    let (sum, count, buckets) = h.snapshot();
    histogram_of(e, name, help, sum, count, &buckets)
}

/// A histogram from its (upper bound, count) buckets, the last bound being +Inf.
fn histogram_of(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    sum: f64,
    count: u64,
    buckets: &[(f64, u64)],
) -> std::fmt::Result {
    let mut me = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    me.encode_histogram::<NoLabelSet>(sum, count, buckets, None)
}

/// The label value of an invalidation source in `qcache_invalidations_total{source=…}`.
pub fn source_label(s: InvalidationSource) -> &'static str {
    match s {
        InvalidationSource::Write => "write",
        InvalidationSource::TxnEnd => "txn_end",
        InvalidationSource::Binlog => "binlog",
        InvalidationSource::Catalog => "catalog",
        InvalidationSource::Flush => "flush",
        InvalidationSource::Conservative => "conservative",
    }
}

impl Collector for SharedCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let sh = &self.0;
        let cache = &sh.cache;
        let stats = cache.stats();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        counter(
            &mut e,
            "qcache_hits",
            "Results served from the cache.",
            stats.hits(),
        )?;
        // Every cacheable read that went upstream was a miss; not-cached reads are counted
        // apart, by reason.
        counter(
            &mut e,
            "qcache_misses",
            "Cacheable reads sent upstream because no valid entry was found.",
            sh.latencies.miss.count(),
        )?;
        counter(
            &mut e,
            "qcache_inserts",
            "Results stored in the cache.",
            stats.inserts(),
        )?;
        {
            let mut me = e.encode_descriptor(
                "qcache_not_cached",
                "Statements neither served from nor stored in the cache, by reason.",
                None,
                MetricType::Counter,
            )?;
            for (reason, n) in stats.not_cached_reasons() {
                ConstCounter::new(n).encode(me.encode_family(&[("reason", reason)])?)?;
            }
        }
        counter(
            &mut e,
            "qcache_evictions",
            "Servable entries evicted to make room (MySQL's Qcache_lowmem_prunes).",
            load(&stats.lowmem_prunes),
        )?;
        {
            let mut me = e.encode_descriptor(
                "qcache_invalidations",
                "Invalidation events (a table, a schema or the whole cache), by source.",
                None,
                MetricType::Counter,
            )?;
            for s in InvalidationSource::ALL {
                ConstCounter::new(stats.invalidations(s))
                    .encode(me.encode_family(&[("source", source_label(s))])?)?;
            }
        }
        counter(
            &mut e,
            "qcache_stale_dropped",
            "Outdated entries dropped (on lookup, replacement or eviction).",
            load(&stats.stale_dropped),
        )?;
        counter(
            &mut e,
            "qcache_expired",
            "Expired entries dropped (on lookup, replacement or eviction).",
            load(&stats.expired),
        )?;
        counter(
            &mut e,
            "qcache_stampede_waits",
            "Sessions that waited for another session filling the same key.",
            load(&stats.stampede_waits),
        )?;
        gauge(
            &mut e,
            "qcache_entries",
            "Entries held now.",
            cache.len() as u64,
        )?;
        gauge(
            &mut e,
            "qcache_bytes",
            "Bytes held by entries, bookkeeping included.",
            cache.weight(),
        )?;
        gauge(
            &mut e,
            "qcache_max_bytes",
            "Configured cache.max_bytes.",
            cache.max_bytes(),
        )?;
        let conns = sh.connections.load(Ordering::Relaxed);
        gauge(
            &mut e,
            "qcache_client_connections",
            "Client connections open now.",
            conns,
        )?;
        gauge(
            &mut e,
            "qcache_upstream_connections",
            "Upstream connections open now (one per client session).",
            conns,
        )?;
        histogram(
            &mut e,
            "qcache_hit_latency_seconds",
            "Time to serve a hit: lookup to bytes queued for the client.",
            &sh.latencies.hit,
        )?;
        histogram(
            &mut e,
            "qcache_upstream_latency_seconds",
            "Time a cacheable read spent upstream on a miss, result relayed.",
            &sh.latencies.miss,
        )?;
        if let Some(b) = &sh.binlog {
            gauge(
                &mut e,
                "qcache_binlog_connected",
                "1 while the binlog stream is connected.",
                u64::from(b.connected()),
            )?;
            gauge(
                &mut e,
                "qcache_binlog_lag_seconds",
                "Event timestamp vs arrival for the last binlog event (1 s resolution).",
                b.last_event_lag().map_or(0.0, |d| d.as_secs_f64()),
            )?;
            counter(
                &mut e,
                "qcache_binlog_reconnects",
                "Times the binlog stream was lost and started over.",
                b.reconnects(),
            )?;
            counter(
                &mut e,
                "qcache_binlog_events",
                "Binlog events read, heartbeats included.",
                b.events(),
            )?;
            counter(
                &mut e,
                "qcache_binlog_commits",
                "Commit events (XID, COMMIT, DDL) whose tables were bumped.",
                b.commits(),
            )?;
            {
                let (buckets, sum) = b.commit_lag_histogram();
                let count = buckets.iter().map(|(_, n)| n).sum();
                let buckets: Vec<(f64, u64)> = buckets
                    .into_iter()
                    .map(|(bound, n)| {
                        let le = if bound == Duration::MAX {
                            f64::INFINITY
                        } else {
                            bound.as_secs_f64()
                        };
                        (le, n)
                    })
                    .collect();
                histogram_of(
                    &mut e,
                    "qcache_binlog_commit_lag_seconds",
                    "Commit event header timestamp (whole seconds) to its arrival: how late \
                     external writes are seen, overstated by up to 1 s.",
                    sum.as_secs_f64(),
                    count,
                    &buckets,
                )?;
            }
            let mut sum = 0.0;
            let mut count = 0;
            let buckets: Vec<(f64, u64)> = b
                .lag_histogram()
                .into_iter()
                .map(|(bound, n)| {
                    // The midpoint stands in for the unknown exact values in the sum.
                    sum += bound.as_secs_f64() * 0.75 * n as f64;
                    count += n;
                    (bound.as_secs_f64(), n)
                })
                .chain(std::iter::once((f64::INFINITY, 0)))
                .collect();
            histogram_of(
                &mut e,
                "qcache_binlog_apply_seconds",
                "Time from a commit event's arrival to its tables being bumped.",
                sum,
                count,
                &buckets,
            )?;
        }
        if let Some(l2) = &sh.l2 {
            encode_l2(&mut e, l2)?;
        }
        Ok(())
    }
}

/// The second level's figures (`Qcache_l2_*` as Prometheus metrics).
fn encode_l2(e: &mut DescriptorEncoder, l2: &crate::cache::l2::L2) -> std::fmt::Result {
    let s = &l2.stats;
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    gauge(
        e,
        "qcache_l2_up",
        "1 while L2 is usable (connected, bumps resynced).",
        u64::from(l2.usable()),
    )?;
    gauge(
        e,
        "qcache_l2_notifications_up",
        "1 while the L2 bump channel is subscribed.",
        u64::from(l2.notifications_up()),
    )?;
    let counters: [(&str, &str, &AtomicU64); 17] = [
        ("qcache_l2_hits", "Misses of L1 served from L2.", &s.hits),
        (
            "qcache_l2_misses",
            "L2 lookups that found no entry.",
            &s.misses,
        ),
        (
            "qcache_l2_stale_rejections",
            "L2 entries refused because a version moved.",
            &s.stale,
        ),
        (
            "qcache_l2_malformed",
            "L2 values refused as malformed or mismatched.",
            &s.malformed,
        ),
        (
            "qcache_l2_errors",
            "L2 operations that failed or timed out.",
            &s.errors,
        ),
        ("qcache_l2_stores", "Entries written to L2.", &s.stores),
        (
            "qcache_l2_store_bytes",
            "Bytes written to L2 as entries.",
            &s.store_bytes,
        ),
        ("qcache_l2_hit_bytes", "Bytes served from L2.", &s.hit_bytes),
        (
            "qcache_l2_too_large",
            "Results over l2.max_entry_bytes, kept in L1 only.",
            &s.too_large,
        ),
        ("qcache_l2_bumps", "Versions raised in L2.", &s.bumps),
        (
            "qcache_l2_notifications",
            "Bumps learned from other instances.",
            &s.notifications,
        ),
        (
            "qcache_l2_remote_checks",
            "Strict mode: hits checked against L2.",
            &s.remote_checks,
        ),
        (
            "qcache_l2_remote_rejects",
            "Strict mode: hits refused by L2.",
            &s.remote_rejects,
        ),
        (
            "qcache_l2_lease_waits",
            "Misses that waited for another instance's fill.",
            &s.lease_waits,
        ),
        (
            "qcache_l2_lease_served",
            "Lease waits served from the other instance's fill.",
            &s.lease_served,
        ),
        ("qcache_l2_downs", "Times L2 was marked down.", &s.downs),
        (
            "qcache_l2_recoveries",
            "Times L2 came back after being down.",
            &s.recoveries,
        ),
    ];
    for (name, help, c) in counters {
        counter(e, name, help, load(c))?;
    }
    counter(
        e,
        "qcache_l2_notify_losses",
        "Times the bump channel was lost (every L1 entry dropped).",
        load(&s.notify_losses),
    )?;
    histogram(
        e,
        "qcache_l2_latency_seconds",
        "Every L2 round trip (lookups, checks, stores, bumps, pings).",
        &s.latency,
    )
}

/// The `/metrics` body in the Prometheus text format, and its content type.
pub fn render(shared: &Arc<Shared>) -> Result<(String, &'static str), std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SharedCollector(shared.clone())));
    let mut out = String::with_capacity(8 * 1024);
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
    Ok((
        out,
        prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
    ))
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
}
