//! Prometheus metrics: a collector that reads, on each scrape, the latency histograms the
//! sessions record (`observe::latency`) and the counters the cache and server already keep.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Moved to `observe::latency` (the cache records into it too); this path stays only until the
/// `l2` branch, whose `cache/l2.rs` imports it from here, has merged.
use crate::observe::latency::LatencyHistogram;
use crate::observe::stats::InvalidationSource;
use crate::shared::Shared;

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
        InvalidationSource::Privileges => "privileges",
    }
}

impl Collector for SharedCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let sh = &self.0;
        encode_cache(&mut e, sh)?;
        encode_parent_maps(&mut e, &sh.cache)?;
        encode_sessions(&mut e, sh)?;
        if let Some(b) = &sh.binlog {
            encode_binlog(&mut e, b)?;
        }
        if let Some(l2) = &sh.l2 {
            encode_l2(&mut e, l2)?;
        }
        encode_process(&mut e)
    }
}

/// The cache's own counters: hits, misses, stores, reasons, evictions, invalidations.
fn encode_cache(e: &mut DescriptorEncoder, sh: &Shared) -> std::fmt::Result {
    let cache = &sh.cache;
    let stats = cache.stats();
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    counter(
        e,
        "qcache_hits",
        "Results served from the cache.",
        stats.hits(),
    )?;
    // Every cacheable read that went upstream was a miss; not-cached reads are counted
    // apart, by reason.
    counter(
        e,
        "qcache_misses",
        "Cacheable reads sent upstream because no valid entry was found.",
        sh.latencies.miss.count(),
    )?;
    counter(
        e,
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
            ConstCounter::new(n).encode(me.encode_family(&[("reason", reason.as_str())])?)?;
        }
    }
    counter(
        e,
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
        e,
        "qcache_invalidations_slice",
        "Row-slice counters bumped by writes whose rows qcache could name.",
        load(&stats.slice_invalidations),
    )?;
    counter(
        e,
        "qcache_invalidations_column",
        "Writes (UPDATEs, row images) invalidated by their changed columns only.",
        load(&stats.column_writes),
    )?;
    counter(
        e,
        "qcache_stale_dropped",
        "Outdated entries dropped (on lookup, replacement or eviction).",
        load(&stats.stale_dropped),
    )?;
    counter(
        e,
        "qcache_expired",
        "Expired entries dropped (on lookup, replacement or eviction).",
        load(&stats.expired),
    )?;
    counter(
        e,
        "qcache_stampede_waits",
        "Sessions that waited for another session filling the same key.",
        load(&stats.stampede_waits),
    )?;
    counter(
        e,
        "qcache_stale_served",
        "Outdated entries served within their rule's max_stale while another session refreshed them.",
        load(&stats.stale_served),
    )?;
    counter(
        e,
        "qcache_patched",
        "Entries patched from a write's known rows instead of invalidated.",
        load(&stats.patched),
    )?;
    counter(
        e,
        "qcache_patch_verified",
        "Patched entries re-read from the server by the verifier.",
        load(&stats.patch_verified),
    )?;
    counter(
        e,
        "qcache_patch_mismatches",
        "Patched entries that differed from the server's answer (dropped, shape's patching turned off).",
        load(&stats.patch_mismatches),
    )?;
    counter(
        e,
        "qcache_patches_lost",
        "Entries a write would have patched, invalidated instead because of another thread's bump in its patch window.",
        load(&stats.patches_lost),
    )?;
    gauge(e, "qcache_entries", "Entries held now.", cache.len() as u64)?;
    Ok(())
}

/// What the parent maps of derived slices hold and did.
fn encode_parent_maps(e: &mut DescriptorEncoder, cache: &crate::cache::Cache) -> std::fmt::Result {
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let parents = &cache.versions().parents;
    let ps = &parents.stats;
    gauge(
        e,
        "qcache_parent_map_entries",
        "Parent-row mappings held for derived slices.",
        parents.entries() as u64,
    )?;
    counter(
        e,
        "qcache_parent_map_learned",
        "Parent-row mappings learned from inserts through qcache.",
        load(&ps.learned),
    )?;
    counter(
        e,
        "qcache_derived_slice_rows",
        "Child-row foreign-key values a write bumped by their parent's value.",
        load(&ps.mapped),
    )?;
    counter(
        e,
        "qcache_derived_slice_fallbacks",
        "Child writes that bumped every derived slice of their table (a parent value not known, a move in flight).",
        load(&ps.fallbacks),
    )?;
    counter(
        e,
        "qcache_parent_map_drops",
        "Times a parent table's mappings were dropped (a write that may move its rows).",
        load(&ps.drops),
    )?;
    counter(
        e,
        "qcache_parent_map_evicted",
        "Parent-row mappings forgotten to stay within invalidation.parent_map_entries.",
        load(&ps.evicted),
    )?;
    counter(
        e,
        "qcache_parent_lookups",
        "Parent lookups asked of the server for child writes (derived slices).",
        load(&ps.lookups),
    )?;
    counter(
        e,
        "qcache_parent_lookup_skips",
        "Parent lookups not waited for (no idle connection, or slower than the write): the write bumped every derived slice of its table instead.",
        load(&ps.skips),
    )?;
    counter(
        e,
        "qcache_parent_lookups_deferred",
        "Parent lookups asked after their child write's OK went to the client (derived slices pending meanwhile).",
        load(&ps.deferred),
    )?;
    gauge(
        e,
        "qcache_parent_lookups_pending",
        "Deferred parent lookups whose derived slices are still pending.",
        load(&ps.pending),
    )?;
    Ok(())
}

/// Memory, connections and the latencies of hits and misses.
fn encode_sessions(e: &mut DescriptorEncoder, sh: &Shared) -> std::fmt::Result {
    let cache = &sh.cache;
    gauge(
        e,
        "qcache_bytes",
        "Bytes held by entries, bookkeeping included.",
        cache.weight(),
    )?;
    gauge(
        e,
        "qcache_max_bytes",
        "Configured cache.max_bytes.",
        cache.max_bytes(),
    )?;
    let conns = sh.connections.load(Ordering::Relaxed);
    gauge(
        e,
        "qcache_client_connections",
        "Client connections open now.",
        conns,
    )?;
    gauge(
        e,
        "qcache_upstream_connections",
        "Upstream connections open now (one per client session).",
        conns,
    )?;
    counter(
        e,
        "qcache_session_moves",
        "Sessions moved between session threads (server.placement = \"load\").",
        crate::workers::moves(),
    )?;
    histogram(
        e,
        "qcache_hit_latency_seconds",
        "Time to serve a hit: lookup to bytes queued for the client.",
        &sh.latencies.hit,
    )?;
    histogram(
        e,
        "qcache_upstream_latency_seconds",
        "Time a cacheable read spent upstream on a miss, result relayed.",
        &sh.latencies.miss,
    )?;
    Ok(())
}

/// The binlog tail's figures, when it runs.
fn encode_binlog(
    e: &mut DescriptorEncoder,
    b: &crate::invalidation::binlog::BinlogHandle,
) -> std::fmt::Result {
    gauge(
        e,
        "qcache_binlog_connected",
        "1 while the binlog stream is connected.",
        u64::from(b.connected()),
    )?;
    gauge(
        e,
        "qcache_binlog_lag_seconds",
        "Event timestamp vs arrival for the last binlog event (1 s resolution).",
        b.last_event_lag().map_or(0.0, |d| d.as_secs_f64()),
    )?;
    counter(
        e,
        "qcache_binlog_reconnects",
        "Times the binlog stream ended (or could not be opened) and the tail started over.",
        b.reconnects(),
    )?;
    {
        let mut me = e.encode_descriptor(
            "qcache_binlog_stream_ends",
            "Binlog stream ends (and failed attempts to open one), by cause.",
            None,
            MetricType::Counter,
        )?;
        for (cause, n) in b.ends() {
            ConstCounter::new(n).encode(me.encode_family(&[("cause", cause.label())])?)?;
        }
    }
    counter(
        e,
        "qcache_binlog_resumes",
        "Reconnects that resumed where the stream left off: nothing lost, nothing \
         invalidated.",
        b.resumes(),
    )?;
    counter(
        e,
        "qcache_binlog_gaps",
        "Times the tail could not resume (binlog purged or reset, another server) and \
         started afresh, invalidating everything.",
        b.gaps(),
    )?;
    counter(
        e,
        "qcache_binlog_events",
        "Binlog events read, heartbeats included.",
        b.events(),
    )?;
    counter(
        e,
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
            e,
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
        e,
        "qcache_binlog_apply_seconds",
        "Time from a commit event's arrival to its tables being bumped.",
        sum,
        count,
        &buckets,
    )?;
    Ok(())
}

/// `qcache_build_info` and the `process_*` metrics every Prometheus client library exports,
/// which dashboards and alerts expect by these names.
fn encode_process(e: &mut DescriptorEncoder) -> std::fmt::Result {
    {
        let mut me = e.encode_descriptor(
            "qcache_build_info",
            "Always 1; the labels say which build runs.",
            None,
            MetricType::Gauge,
        )?;
        let profile = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        ConstGauge::new(1i64).encode(
            me.encode_family(&[("version", env!("CARGO_PKG_VERSION")), ("profile", profile)])?,
        )?;
    }
    let Some(p) = process_sample() else {
        return Ok(());
    };
    gauge(
        e,
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        p.rss_bytes as i64,
    )?;
    gauge(
        e,
        "process_open_fds",
        "Number of open file descriptors.",
        p.open_fds as i64,
    )?;
    let cpu = ConstCounter::new(p.cpu_seconds);
    cpu.encode(e.encode_descriptor(
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
        None,
        cpu.metric_type(),
    )?)?;
    gauge(
        e,
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        p.start_time_seconds,
    )
}

/// The process's own figures, read from /proc on each scrape (no dependency, nothing kept).
#[derive(Debug, Clone, PartialEq)]
struct ProcessSample {
    rss_bytes: u64,
    open_fds: u64,
    cpu_seconds: f64,
    start_time_seconds: f64,
}

/// None where /proc cannot be read (not Linux): the metrics are then left out.
fn process_sample() -> Option<ProcessSample> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let system = std::fs::read_to_string("/proc/stat").ok()?;
    // The directory's own descriptor, open while it is read, is not counted.
    let fds = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .count()
        .saturating_sub(1);
    parse_process(&stat, &status, &system, fds as u64)
}

/// Clock ticks per second in /proc's times: USER_HZ, fixed at 100 in Linux's user ABI.
const USER_HZ: f64 = 100.0;

fn parse_process(stat: &str, status: &str, system: &str, open_fds: u64) -> Option<ProcessSample> {
    // The command name may hold spaces and parentheses: the fields start after the last ')',
    // at field 3 (state), so field n is at n - 3.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let (utime, stime, start) = (field(14)?, field(15)?, field(22)?);
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let boot: u64 = system
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(ProcessSample {
        rss_bytes: rss_kb * 1024,
        open_fds,
        cpu_seconds: (utime + stime) as f64 / USER_HZ,
        start_time_seconds: boot as f64 + start as f64 / USER_HZ,
    })
}

/// Which instances stream the binlog for the fleet (`l2.binlog_tails`), when leased.
fn encode_tails(e: &mut DescriptorEncoder, l2: &crate::l2::L2) -> std::fmt::Result {
    if let Some((tailing, since, tails)) = l2.tail_roles() {
        gauge(
            e,
            "qcache_l2_tailing",
            "1 while this instance streams the binlog for the fleet (l2.binlog_tails).",
            u64::from(tailing),
        )?;
        gauge(
            e,
            "qcache_l2_tailing_since_seconds",
            "Unix time this instance began streaming for the fleet; 0 while a standby.",
            since,
        )?;
        gauge(
            e,
            "qcache_l2_tails",
            "Instances holding a binlog tail slot, as this instance knows them.",
            tails.len() as u64,
        )?;
    }
    Ok(())
}

/// The second level's figures (`Qcache_l2_*` as Prometheus metrics).
fn encode_l2(e: &mut DescriptorEncoder, l2: &crate::l2::L2) -> std::fmt::Result {
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
    encode_tails(e, l2)?;
    let counters: [(&str, &str, &AtomicU64); 18] = [
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
        (
            "qcache_l2_script_reads",
            "Version reads that ran the script (a version to create, a column to register).",
            &s.script_reads,
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
mod process_tests {
    use super::*;

    #[test]
    fn proc_files_are_read_by_field() {
        let stat = "4242 (qc (a) b) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 \
                    123400 1000000 2000 18446744073709551615";
        let status = "Name:\tqcache\nVmPeak:\t  9000 kB\nVmRSS:\t  5120 kB\nThreads:\t9\n";
        let system = "cpu  1 2 3\nbtime 1764900000\nprocesses 42\n";
        assert_eq!(
            parse_process(stat, status, system, 7),
            Some(ProcessSample {
                rss_bytes: 5120 * 1024,
                open_fds: 7,
                cpu_seconds: 3.0,
                start_time_seconds: 1764900000.0 + 1234.0,
            })
        );
        assert_eq!(parse_process("garbage", status, system, 7), None);
        assert_eq!(parse_process(stat, "", system, 7), None);
    }

    #[test]
    fn this_process_is_readable() {
        let p = process_sample().expect("/proc/self on Linux");
        assert!(p.rss_bytes > 0 && p.open_fds > 0 && p.start_time_seconds > 1.6e9);
    }
}
