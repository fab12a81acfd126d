//! Benchmarks backing the result store's performance claims: the cost of a hit, invalidation
//! that does not depend on cache size, and quick_cache vs moka under a mixed concurrent load.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

#[path = "support/mod.rs"]
mod support;

use qcache::cache::{key, Cache, Entry, Stamps};
use qcache::config::CacheConfig;
use qcache::protocol::packets::status;
use support::{cache_with_entries, response};

fn hit_path(c: &mut Criterion) {
    let cache = Cache::new(&CacheConfig::default());
    let t = cache.versions().table("shop", "orders");
    let stmt = b"SELECT id, total, status FROM orders WHERE customer_id = 4211 ORDER BY id";
    let fp = 0x1234_5678_9abc_def0;
    let (bytes, at) = response(200);
    let stamps = Stamps::capture(cache.versions(), std::slice::from_ref(&t));
    assert!(cache.insert(key(fp, 0, stmt), Entry::new(bytes, at, stamps, 1)));
    let mut out = BytesMut::with_capacity(4096);

    let mut g = c.benchmark_group("hit_path");
    g.throughput(Throughput::Elements(1));
    g.bench_function("key", |b| b.iter(|| key(black_box(fp), 0, black_box(stmt))));
    g.bench_function("key+get+is_current+write_patched_200B", |b| {
        b.iter(|| {
            out.clear();
            let k = key(black_box(fp), 0, black_box(stmt));
            let e = cache.get(k).expect("entry stays cached");
            assert!(e.stamps.is_current(cache.versions()));
            e.write_patched(status::AUTOCOMMIT | status::IN_TRANS, &mut out);
            black_box(&out);
        })
    });
    g.bench_function("key+get_current+write_patched_200B", |b| {
        b.iter(|| {
            out.clear();
            let k = key(black_box(fp), 0, black_box(stmt));
            let e = cache.get_current(k).expect("entry stays current");
            e.write_patched(status::AUTOCOMMIT, &mut out);
            black_box(&out);
        })
    });
    g.finish();
}

fn invalidation(c: &mut Criterion) {
    // Both caches exist for the whole group, so the two cases run with the same memory
    // footprint and only the number of entries stamped with the bumped table differs. The
    // empty case runs again last to show the spread that is noise on this machine.
    let empty = cache_with_entries(0);
    let full = cache_with_entries(1_000_000);
    let mut g = c.benchmark_group("invalidation");
    g.throughput(Throughput::Elements(1));
    for (name, (cache, t)) in [
        ("bump_with_0_entries", &empty),
        ("bump_with_1000000_entries", &full),
        ("bump_with_0_entries_again", &empty),
    ] {
        g.bench_function(name, |b| b.iter(|| cache.versions().bump(black_box(t))));
    }
    g.finish();
}

/// Splitmix64: deterministic, allocation-free key streams for both caches.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const KEYS: u64 = 200_000;
const CAPACITY: u64 = 64 << 20;

/// 90% gets, 10% inserts; keys skewed (80% of operations on 20% of keys), values 100 B to
/// 4 KiB so the caches must weigh, and the key space is about twice the capacity so eviction
/// runs throughout.
struct Op {
    get: bool,
    key: u128,
    len: usize,
}

fn ops(seed: u64, n: usize) -> Vec<Op> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            let r = splitmix(&mut s);
            let hot = r % 10 < 8;
            let k = splitmix(&mut s) % if hot { KEYS / 5 } else { KEYS };
            Op {
                get: !splitmix(&mut s).is_multiple_of(10),
                key: key(k, 0, b"k"),
                len: 100 + (k as usize * 7919) % 4000,
            }
        })
        .collect()
}

fn weight(v: &Bytes) -> u64 {
    v.len() as u64 + 64
}

fn run_threads<F: Fn(&Op) + Sync>(iters: u64, streams: &[Vec<Op>; 2], f: F) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for stream in streams {
            let f = &f;
            s.spawn(move || {
                for i in 0..iters as usize {
                    f(&stream[i % stream.len()]);
                }
            });
        }
    });
    start.elapsed()
}

#[derive(Clone)]
struct BytesWeighter;
impl quick_cache::Weighter<u128, Bytes> for BytesWeighter {
    fn weight(&self, _k: &u128, v: &Bytes) -> u64 {
        weight(v)
    }
}

fn concurrent_mix(c: &mut Criterion) {
    let streams = [ops(1, 1 << 20), ops(2, 1 << 20)];
    let payload = Bytes::from(vec![b'x'; 4200]);

    let mut g = c.benchmark_group("concurrent_90get_10insert_2threads");
    g.throughput(Throughput::Elements(2));

    let qc = quick_cache::sync::Cache::<u128, Bytes, BytesWeighter>::with_weighter(
        (CAPACITY / 2000) as usize,
        CAPACITY,
        BytesWeighter,
    );
    g.bench_function("quick_cache", |b| {
        b.iter_custom(|iters| {
            run_threads(iters, &streams, |op| {
                if op.get {
                    black_box(qc.get(&op.key));
                } else {
                    qc.insert(op.key, payload.slice(..op.len));
                }
            })
        })
    });

    let mk = moka::sync::Cache::<u128, Bytes>::builder()
        .max_capacity(CAPACITY)
        .weigher(|_k, v: &Bytes| weight(v).min(u64::from(u32::MAX)) as u32)
        .build();
    g.bench_function("moka", |b| {
        b.iter_custom(|iters| {
            run_threads(iters, &streams, |op| {
                if op.get {
                    black_box(mk.get(&op.key));
                } else {
                    mk.insert(op.key, payload.slice(..op.len));
                }
            })
        })
    });

    // The store as the session uses it (weigher, keyed hasher, stamps, stats, expiry check).
    let store = Cache::new(&CacheConfig {
        max_bytes: CAPACITY,
        ..CacheConfig::default()
    });
    let t = store.versions().table("db", "t");
    let (resp, at) = response(4200);
    g.bench_function("qcache_store", |b| {
        b.iter_custom(|iters| {
            run_threads(iters, &streams, |op| {
                if op.get {
                    black_box(store.get_current(op.key));
                } else {
                    let stamps = Stamps::capture(store.versions(), std::slice::from_ref(&t));
                    let len = op.len.max(at + 2);
                    let bytes = resp.slice(resp.len() - len..);
                    let e = Entry::new(bytes, len - 2, stamps, 0);
                    store.insert(op.key, e);
                }
            })
        })
    });
    g.finish();

    // Hit rates, so the throughput figures are compared at similar work.
    for (name, hits) in [
        (
            "quick_cache",
            streams[0]
                .iter()
                .filter(|o| o.get && qc.get(&o.key).is_some())
                .count(),
        ),
        (
            "moka",
            streams[0]
                .iter()
                .filter(|o| o.get && mk.get(&o.key).is_some())
                .count(),
        ),
    ] {
        let gets = streams[0].iter().filter(|o| o.get).count();
        eprintln!(
            "{name}: hit rate after the run {:.1}%",
            100.0 * hits as f64 / gets as f64
        );
    }
}

fn setup_cost(c: &mut Criterion) {
    // Entry construction on the fill path (stamp capture + Arc), for context next to hits.
    let cache = Cache::new(&CacheConfig::default());
    let t = cache.versions().table("shop", "orders");
    let (bytes, at) = response(200);
    let mut i = 0u64;
    c.bench_function("fill/insert_200B", |b| {
        b.iter_batched(
            || {
                i += 1;
                let stamps = Stamps::capture(cache.versions(), std::slice::from_ref(&t));
                (
                    key(1, 0, &i.to_le_bytes()),
                    Entry::new(bytes.clone(), at, stamps, 0),
                )
            },
            |(k, e)| cache.insert(k, e),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, hit_path, invalidation, concurrent_mix, setup_cost);
criterion_main!(benches);
