//! Cost of statement analysis: the per-query scan and digest (hit path) and the sqlparser
//! analysis (miss path), with and without the digest memo.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use qcache::analysis::{analyze, digest, scan, Analyzer};

const POINT: &str = "SELECT c FROM sbtest1 WHERE id=42";
const JOIN: &str = "SELECT o.id, o.total, c.name, SUM(i.qty) FROM orders o \
    JOIN customers c ON c.id = o.customer_id LEFT JOIN order_items i ON i.order_id = o.id \
    WHERE o.created_at >= '2024-01-01' AND c.country IN ('FR', 'DE') \
    GROUP BY o.id, o.total, c.name ORDER BY o.total DESC LIMIT 20";
const HINTED: &str = "SELECT /*!40001 SQL_NO_CACHE */ c FROM sbtest1 WHERE id=42";

fn bench(c: &mut Criterion) {
    c.bench_function("scan/point_select", |b| {
        b.iter(|| scan(black_box(POINT.as_bytes())))
    });
    c.bench_function("scan/hinted", |b| {
        b.iter(|| scan(black_box(HINTED.as_bytes())))
    });
    c.bench_function("scan/join", |b| b.iter(|| scan(black_box(JOIN.as_bytes()))));
    c.bench_function("digest/point_select", |b| {
        b.iter(|| digest(black_box(POINT.as_bytes())))
    });
    c.bench_function("digest/join", |b| {
        b.iter(|| digest(black_box(JOIN.as_bytes())))
    });
    c.bench_function("analyze/point_select", |b| {
        b.iter(|| analyze(black_box(POINT)))
    });
    c.bench_function("analyze/join", |b| b.iter(|| analyze(black_box(JOIN))));
    let memo = Analyzer::new(1024);
    c.bench_function("analyzer_memo_hit/join", |b| {
        b.iter(|| {
            let sql = black_box(JOIN.as_bytes());
            memo.analyze(sql, digest(sql))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
