//! Foreign-key-derived slices through the real proxy (`cache::fkmap`): a read joining a
//! child table on its parent's primary key, the parent pinned by a constant, stays served
//! while children of other parents' rows are written, and is never served stale — new
//! parents learned from their insert, children of parents qcache never saw (fallback),
//! parents moved to another value, deletes, LEFT JOINs, prepared statements, writes from
//! elsewhere (binlog) and concurrent movers.

mod common;
use common::{setup, status};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

const SHOP: &[&str] = &[
    "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, \
     KEY c (customer_id)) ENGINE=InnoDB",
    "CREATE TABLE products (id INT PRIMARY KEY, category_id INT NOT NULL, KEY c (category_id)) \
     ENGINE=InnoDB",
    "CREATE TABLE order_items (order_id INT NOT NULL, product_id INT NOT NULL, qty INT NOT NULL, \
     PRIMARY KEY (order_id, product_id), KEY p (product_id), \
     FOREIGN KEY (order_id) REFERENCES orders (id)) ENGINE=InnoDB",
    "INSERT INTO orders (id, customer_id) VALUES (1, 1), (2, 2), (3, 1)",
    "INSERT INTO products VALUES (1, 10), (2, 10), (3, 20)",
    "INSERT INTO order_items VALUES (1, 1, 1), (2, 1, 1), (3, 2, 2)",
];

fn history(c: i64) -> String {
    format!(
        "SELECT o.id, COUNT(*), MAX(i.qty) FROM orders o JOIN order_items i ON i.order_id = o.id \
         WHERE o.customer_id = {c} GROUP BY o.id ORDER BY o.id"
    )
}

fn category(c: i64) -> String {
    format!(
        "SELECT p.id, COUNT(i.order_id) FROM products p LEFT JOIN order_items i \
         ON i.product_id = p.id WHERE p.category_id = {c} GROUP BY p.id ORDER BY p.id"
    )
}

type Row = (i64, i64, Option<i64>);

/// A fresh shop schema, a proxy configured by `tweak`, a connection through it and one
/// directly to the server.
async fn shop(
    name: &str,
    tweak: impl FnOnce(&mut qcache::config::Config),
) -> (common::TestProxy, Conn, Conn) {
    let schema = common::fresh_schema(name).await;
    setup(&schema, SHOP).await;
    let proxy = common::proxy(tweak).await;
    let c = proxy.conn(&schema).await;
    let d = common::direct_to(&schema).await;
    (proxy, c, d)
}

async fn read(c: &mut Conn, k: i64) -> Vec<Row> {
    c.exec(
        "SELECT o.id, COUNT(*), MAX(i.qty) FROM orders o JOIN order_items i \
         ON i.order_id = o.id WHERE o.customer_id = ? GROUP BY o.id ORDER BY o.id",
        (k,),
    )
    .await
    .unwrap()
}

async fn rows(c: &mut Conn, q: &str) -> Vec<Row> {
    c.query(q).await.unwrap_or_else(|e| panic!("{q}: {e}"))
}

async fn pairs(c: &mut Conn, q: &str) -> Vec<(i64, i64)> {
    c.query(q).await.unwrap_or_else(|e| panic!("{q}: {e}"))
}

/// Waits (at most 5 s) until no child write's parent lookup asked after its OK is running
/// (`Qcache_parent_lookups_pending`, `engine::fkslices::Timing::Deferred`): until then its
/// derived slices are not served, and what is filled meanwhile is never served.
async fn settled(c: &mut Conn) {
    let start = Instant::now();
    while status(c, "Qcache_parent_lookups_pending").await > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "lookups pending 5 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Reads `q` once, once the lookups asked after their OKs ended ([`settled`]), and
/// returns whether it was a hit.
async fn hit(c: &mut Conn, q: &str) -> bool {
    settled(c).await;
    let before = status(c, "Qcache_hits").await;
    c.query_drop(q).await.unwrap();
    status(c, "Qcache_hits").await - before == 1
}

/// Reads every query once (a miss fills it) and checks that it is then served. With a
/// binlog tail, the row event of a write made just before may land between the fill and
/// the check (a child write's OK no longer waits for its lookup, so it often does): the
/// query is then filled again, for at most 2 s.
async fn warm(c: &mut Conn, qs: &[&str]) {
    settled(c).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    for q in qs {
        loop {
            c.query_drop(*q).await.unwrap();
            if hit(c, q).await {
                break;
            }
            assert!(Instant::now() < deadline, "{q} cached");
        }
    }
}

/// A new order through qcache: its insert teaches the parent map, its items bump only
/// their customer's history.
async fn new_order(c: &mut Conn, customer: i64, product: i64) -> i64 {
    c.query_drop(format!(
        "INSERT INTO orders (customer_id) VALUES ({customer})"
    ))
    .await
    .unwrap();
    let id = c.last_insert_id().unwrap() as i64;
    c.query_drop(format!(
        "INSERT INTO order_items (order_id, product_id, qty) VALUES ({id}, {product}, 1)"
    ))
    .await
    .unwrap();
    id
}

#[tokio::test]
async fn history_of_other_customers_survives_new_orders() {
    let (proxy, mut c, mut d) = shop("fk_hist", |_| {}).await;
    let (h1, h2) = (history(1), history(2));
    warm(&mut c, &[&h1, &h2]).await;

    // A new order for customer 1: its items' order is asked of the server before their OK,
    // so customer 2's history stays served and 1's is fresh.
    let lookups = status(&mut c, "Qcache_parent_lookups").await;
    let id = new_order(&mut c, 1, 3).await;
    assert!(hit(&mut c, &h2).await, "another customer's history served");
    assert!(
        !hit(&mut c, &h1).await,
        "the customer's own history read again"
    );
    assert_eq!(rows(&mut c, &h1).await, rows(&mut d, &h1).await);
    assert_eq!(status(&mut c, "Qcache_parent_lookups").await, lookups + 1);
    assert!(status(&mut c, "Qcache_parent_map_learned").await >= 1);
    assert!(status(&mut c, "Qcache_derived_slice_rows").await >= 1);

    // Items for an order qcache never saw inserted (order 2, customer 2): the same.
    warm(&mut c, &[&h1, &h2]).await;
    c.query_drop("INSERT INTO order_items VALUES (2, 2, 5)")
        .await
        .unwrap();
    assert!(hit(&mut c, &h1).await, "customer 1 untouched by 2's item");
    assert!(!hit(&mut c, &h2).await);
    assert_eq!(rows(&mut c, &h2).await, rows(&mut d, &h2).await);

    // The new order moves to customer 2, then gets items: both histories are right.
    warm(&mut c, &[&h1, &h2]).await;
    c.query_drop(format!("UPDATE orders SET customer_id = 2 WHERE id = {id}"))
        .await
        .unwrap();
    c.query_drop(format!("INSERT INTO order_items VALUES ({id}, 1, 4)"))
        .await
        .unwrap();
    for h in [&h1, &h2] {
        assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
    }

    // Deletes pinned by the child's fk name their parent when it is known.
    let id2 = new_order(&mut c, 1, 2).await;
    warm(&mut c, &[&h1, &h2]).await;
    c.query_drop(format!("DELETE FROM order_items WHERE order_id = {id2}"))
        .await
        .unwrap();
    assert!(hit(&mut c, &h2).await, "customer 2 untouched by 1's delete");
    assert_eq!(rows(&mut c, &h1).await, rows(&mut d, &h1).await);

    // Prepared: the same, through the binary protocol.
    read(&mut c, 1).await;
    read(&mut c, 2).await;
    c.exec_drop("INSERT INTO orders (customer_id) VALUES (?)", (1,))
        .await
        .unwrap();
    let id3 = c.last_insert_id().unwrap() as i64;
    c.exec_drop(
        "INSERT INTO order_items (order_id, product_id, qty) VALUES (?, ?, ?)",
        (id3, 1, 2),
    )
    .await
    .unwrap();
    settled(&mut c).await;
    let h0 = status(&mut c, "Qcache_hits").await;
    let two = read(&mut c, 2).await;
    assert_eq!(
        status(&mut c, "Qcache_hits").await - h0,
        1,
        "prepared: 2 served"
    );
    assert_eq!(two, rows(&mut d, &h2).await);
    assert_eq!(read(&mut c, 1).await, rows(&mut d, &h1).await);
    proxy.shutdown().await;
}

#[tokio::test]
async fn left_join_pages_and_parents_without_children() {
    let (proxy, mut c, mut d) = shop("fk_left", |_| {}).await;
    let (c10, c20) = (category(10), category(20));
    // Product 3 (category 20) has no items: the LEFT JOIN's null-extended row.
    warm(&mut c, &[&c10, &c20]).await;
    assert_eq!(pairs(&mut c, &c20).await, vec![(3, 0)]);
    // A product insert through qcache teaches product → category.
    c.query_drop("INSERT INTO products VALUES (4, 20)")
        .await
        .unwrap();
    assert!(
        hit(&mut c, &c10).await,
        "category 10 untouched by a product of 20"
    );
    warm(&mut c, &[&c20]).await;
    c.query_drop("INSERT INTO orders (id, customer_id) VALUES (50, 3)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO order_items VALUES (50, 4, 1)")
        .await
        .unwrap();
    assert!(
        hit(&mut c, &c10).await,
        "category 10 served after 20's sale"
    );
    assert_eq!(pairs(&mut c, &c20).await, pairs(&mut d, &c20).await);
    // Items of a product qcache never saw inserted: its category is asked of the server
    // before the write's OK, and only that category's page goes.
    warm(&mut c, &[&c10, &c20]).await;
    let lookups = status(&mut c, "Qcache_parent_lookups").await;
    c.query_drop("INSERT INTO order_items VALUES (50, 1, 1)")
        .await
        .unwrap();
    settled(&mut c).await;
    assert_eq!(status(&mut c, "Qcache_parent_lookups").await, lookups + 1);
    assert!(
        hit(&mut c, &c20).await,
        "category 20 served after 10's sale"
    );
    assert_eq!(pairs(&mut c, &c10).await, pairs(&mut d, &c10).await);
    // Every child write asks, though product 1 is learned now: what qcache learned may be
    // moved from elsewhere before the binlog says so (see the test below).
    warm(&mut c, &[&c10, &c20]).await;
    c.query_drop("INSERT INTO order_items VALUES (3, 1, 1)")
        .await
        .unwrap();
    settled(&mut c).await;
    assert_eq!(status(&mut c, "Qcache_parent_lookups").await, lookups + 2);
    assert!(hit(&mut c, &c20).await);
    assert_eq!(pairs(&mut c, &c10).await, pairs(&mut d, &c10).await);
    // A product moved to another category, then sold: both pages are right.
    warm(&mut c, &[&c10, &c20]).await;
    c.query_drop("UPDATE products SET category_id = 10 WHERE id = 4")
        .await
        .unwrap();
    c.query_drop("INSERT INTO order_items VALUES (1, 4, 1)")
        .await
        .unwrap();
    for q in [&c10, &c20] {
        assert_eq!(pairs(&mut c, q).await, pairs(&mut d, q).await, "{q}");
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn child_writes_from_elsewhere_use_what_qcache_learned() {
    let schema = common::fresh_schema("fk_binlog").await;
    setup(&schema, SHOP).await;
    let proxy = common::proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::On).await;
    let b = proxy.running.shared.binlog.clone().expect("binlog tail");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let mut c = proxy.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let (h1, h2) = (history(1), history(2));
    // Learned through qcache (once a read registered the map), then items inserted
    // directly: only customer 1's history.
    warm(&mut c, &[&h1, &h2]).await;
    let mut id = 0;
    // Other tests of this binary share the server, so counting the tail's commits says
    // nothing about which were ours: each direct write is waited for by reading until
    // qcache answers as the server does. A commit that arrives while the tail reloads the
    // catalog for another test's DDL is bumped conservatively (its whole schema, and the
    // parent maps with it), so the "served" half may take a few tries, each with an order
    // learned anew.
    let mut served = false;
    for product in 100..105 {
        id = new_order(&mut c, 1, 3).await;
        warm(&mut c, &[&h1, &h2]).await;
        d.query_drop(format!(
            "INSERT INTO order_items VALUES ({id}, {product}, 7)"
        ))
        .await
        .unwrap();
        fresh_within_lag(&mut c, &mut d, &h1).await;
        served = hit(&mut c, &h2).await;
        if served {
            break;
        }
    }
    assert!(served, "customer 2 untouched");
    // The order moved directly: its mapping goes, the items after it fall back.
    warm(&mut c, &[&h1, &h2]).await;
    d.query_drop(format!("UPDATE orders SET customer_id = 2 WHERE id = {id}"))
        .await
        .unwrap();
    for h in [&h1, &h2] {
        fresh_within_lag(&mut c, &mut d, h).await;
    }
    c.query_drop(format!("INSERT INTO order_items VALUES ({id}, 2, 1)"))
        .await
        .unwrap();
    for h in [&h1, &h2] {
        assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
    }
    // Items for an order qcache never saw, from elsewhere: every history.
    warm(&mut c, &[&h1, &h2]).await;
    d.query_drop("INSERT INTO order_items VALUES (3, 3, 1)")
        .await
        .unwrap();
    fresh_within_lag(&mut c, &mut d, &h1).await;
    proxy.shutdown().await;
}

/// Reads `q` through qcache until it answers as the server does: a write from elsewhere is
/// seen within the binlog tail's lag (10 s here, far above it).
async fn fresh_within_lag(c: &mut Conn, d: &mut Conn, q: &str) {
    let want = rows(d, q).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = rows(c, q).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{q}: {got:?} through qcache, {want:?} directly, 10 s after the write"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Without lookups a child write through qcache names no parent value: every derived slice
/// of its table goes (the fallback), and every history is fresh.
#[tokio::test]
async fn without_lookups_child_writes_bump_every_derived_slice() {
    let (proxy, mut c, mut d) =
        shop("fk_nolookup", |c| c.invalidation.derived_lookups = false).await;
    let (h1, h2) = (history(1), history(2));
    warm(&mut c, &[&h1, &h2]).await;
    let fallbacks = status(&mut c, "Qcache_derived_slice_fallbacks").await;
    new_order(&mut c, 1, 3).await;
    settled(&mut c).await;
    assert!(status(&mut c, "Qcache_derived_slice_fallbacks").await > fallbacks);
    assert_eq!(status(&mut c, "Qcache_parent_lookups").await, 0);
    for h in [&h1, &h2] {
        assert!(!hit(&mut c, h).await, "{h} read again");
        assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
    }
    proxy.shutdown().await;
}

/// A parent row qcache learned, moved directly (the binlog off, so qcache never hears of
/// it), then a child of it written through qcache: the entry of the slice the parent moved
/// to, filled after the move, must go at the child write's OK. A mapping used as it was
/// learned would bump the old slice and leave this one stale.
#[tokio::test]
async fn a_parent_moved_elsewhere_then_a_child_written_through_qcache() {
    let (proxy, mut c, mut d) = shop("fk_moved_direct", |_| {}).await;
    let (c10, c20) = (category(10), category(20));
    warm(&mut c, &[&c20]).await;
    // Learned through qcache: product 4 is in category 20.
    c.query_drop("INSERT INTO products VALUES (4, 20)")
        .await
        .unwrap();
    assert!(status(&mut c, "Qcache_parent_map_learned").await >= 1);
    d.query_drop("UPDATE products SET category_id = 10 WHERE id = 4")
        .await
        .unwrap();
    // Category 10's page first read after the move: it holds product 4.
    warm(&mut c, &[&c10, &c20]).await;
    assert_eq!(pairs(&mut c, &c10).await, pairs(&mut d, &c10).await);
    // A sale of product 4 through qcache: category 10's page changes.
    c.query_drop("INSERT INTO order_items VALUES (1, 4, 1)")
        .await
        .unwrap();
    assert_eq!(
        pairs(&mut c, &c10).await,
        pairs(&mut d, &c10).await,
        "{c10}"
    );
    // Over the binary protocol too.
    warm(&mut c, &[&c10, &c20]).await;
    c.exec_drop("INSERT INTO order_items VALUES (?, ?, ?)", (2, 4, 1))
        .await
        .unwrap();
    assert_eq!(
        pairs(&mut c, &c10).await,
        pairs(&mut d, &c10).await,
        "{c10}"
    );
    proxy.shutdown().await;
}

/// Readers of customer 1's history while a mover creates orders for customer 3, moves them
/// to customer 1 and then adds items, and writers add orders for customers 1 and 2: every
/// read holds at least every item acknowledged for customer 1 before the read began. A
/// mapping that outlived its move would bump customer 3's derived slice for the items
/// added after it, and leave customer 1's history stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moved_parents_never_leave_a_stale_history() {
    movers_writers_readers("fk_conc", |_| {}).await;
}

/// The same with the parent lookups sent beside their writes
/// (`invalidation.derived_lookups_with_write`, every write through this qcache): a lookup
/// whose answer a move through qcache may have outdated is not used.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moved_parents_never_leave_a_stale_history_with_lookups_beside_writes() {
    movers_writers_readers("fk_conc_with", |c| {
        c.invalidation.derived_lookups_with_write = true
    })
    .await;
}

async fn movers_writers_readers(name: &str, tweak: impl FnOnce(&mut qcache::config::Config)) {
    let schema = common::fresh_schema(name).await;
    setup(&schema, SHOP).await;
    let proxy = Arc::new(common::proxy(tweak).await);
    // Items of customer 1 acknowledged so far (orders 1 and 3 have one each).
    let acked = Arc::new(AtomicU64::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let stale = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    {
        let (proxy, schema, acked, stop) =
            (proxy.clone(), schema.clone(), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            while !stop.load(Ordering::Relaxed) {
                let id = new_order(&mut c, 3, 1).await;
                c.query_drop(format!("UPDATE orders SET customer_id = 1 WHERE id = {id}"))
                    .await
                    .unwrap();
                acked.fetch_add(1, Ordering::SeqCst);
                c.query_drop(format!("INSERT INTO order_items VALUES ({id}, 2, 1)"))
                    .await
                    .unwrap();
                acked.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for w in 0..2i64 {
        let (proxy, schema, acked, stop) =
            (proxy.clone(), schema.clone(), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            while !stop.load(Ordering::Relaxed) {
                new_order(&mut c, 1 + w, 3).await;
                if w == 0 {
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for _ in 0..3 {
        let (proxy, schema, acked, stop, stale, reads) = (
            proxy.clone(),
            schema.clone(),
            acked.clone(),
            stop.clone(),
            stale.clone(),
            reads.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            let q = "SELECT COUNT(*) FROM orders o JOIN order_items i ON i.order_id = o.id \
                     WHERE o.customer_id = 1";
            while !stop.load(Ordering::Relaxed) {
                let want = acked.load(Ordering::SeqCst);
                let n: Option<u64> = c.query_first(q).await.unwrap();
                if n.unwrap_or(0) < want {
                    stale.fetch_add(1, Ordering::Relaxed);
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let mut c = proxy.conn(&schema).await;
    let hits = status(&mut c, "Qcache_hits").await;
    let learned = status(&mut c, "Qcache_parent_map_learned").await;
    assert_eq!(stale.load(Ordering::Relaxed), 0, "stale reads");
    assert!(reads.load(Ordering::Relaxed) > 100, "readers ran");
    assert!(hits > 0 && learned > 0, "hits {hits}, learned {learned}");
    drop(c);
    if let Ok(p) = Arc::try_unwrap(proxy) {
        p.shutdown().await;
    }
}

/// Adversary round 10: the parent lookups run on qcache's own pooled connections, new
/// sessions of the server that inherit its globals. Under a global `autocommit = 0` (or an
/// `init_connect` that sets it for qcache's account) a lookup opened a transaction that
/// nothing ended, so every later lookup on that connection read the parent rows of its
/// first snapshot: an order moved to customer 2 was still customer 1's, the item written
/// for it bumped customer 1's history, and customer 2's stayed stale.
#[tokio::test]
async fn parent_lookups_read_the_parent_as_it_is_now() {
    let server = common::own_server();
    let opts = mysql_async::Opts::from_url(&server.url("test")).unwrap();
    let mut d = Conn::new(opts).await.unwrap();
    for sql in SHOP {
        d.query_drop(*sql).await.unwrap();
    }
    d.query_drop("SET GLOBAL autocommit = 0").await.unwrap();
    d.query_drop("SET autocommit = 1").await.unwrap();
    let proxy = common::proxy_to(&server.addr(), |_| {}).await;
    let mut c = proxy.conn("test").await;
    c.query_drop("SET autocommit = 1").await.unwrap();
    let (h1, h2) = (history(1), history(2));
    warm(&mut c, &[&h1, &h2]).await;
    let lookups = status(&mut c, "Qcache_parent_lookups").await;
    c.query_drop("INSERT INTO order_items VALUES (1, 3, 5)")
        .await
        .unwrap();
    settled(&mut c).await;
    assert_eq!(status(&mut c, "Qcache_parent_lookups").await, lookups + 1);
    c.query_drop("UPDATE orders SET customer_id = 2 WHERE id = 1")
        .await
        .unwrap();
    warm(&mut c, &[&h1, &h2]).await;
    c.query_drop("INSERT INTO order_items VALUES (1, 2, 9)")
        .await
        .unwrap();
    for h in [&h1, &h2] {
        assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
    }
    drop(c);
    proxy.shutdown().await;
    server.kill();
}

/// Every parent lookup finding no idle connection (`Fault::BusyParentLookups`: what a
/// lookup meets when all are in use): the child write does not wait for one, it bumps every
/// derived slice of its table (counted in `Qcache_parent_lookup_skips`), and every history
/// is fresh. With the switch off again, lookups narrow again.
#[cfg(debug_assertions)]
#[tokio::test]
async fn busy_lookups_fall_back_and_are_never_stale() {
    use qcache::faults::Fault;
    for with_write in [false, true] {
        let (proxy, mut c, mut d) = shop(&format!("fk_busy{}", with_write as u8), |c| {
            c.invalidation.derived_lookups_with_write = with_write
        })
        .await;
        let faults = &proxy.running.shared.cache.versions().faults;
        faults.set(Fault::BusyParentLookups, true);
        let (h1, h2) = (history(1), history(2));
        warm(&mut c, &[&h1, &h2]).await;
        let skips = status(&mut c, "Qcache_parent_lookup_skips").await;
        let fallbacks = status(&mut c, "Qcache_derived_slice_fallbacks").await;
        let lookups = status(&mut c, "Qcache_parent_lookups").await;
        new_order(&mut c, 1, 3).await;
        settled(&mut c).await;
        assert_eq!(
            status(&mut c, "Qcache_parent_lookup_skips").await,
            skips + 1,
            "with_write {with_write}: skipped"
        );
        assert!(status(&mut c, "Qcache_derived_slice_fallbacks").await > fallbacks);
        assert_eq!(status(&mut c, "Qcache_parent_lookups").await, lookups);
        for h in [&h1, &h2] {
            assert!(
                !hit(&mut c, h).await,
                "with_write {with_write}: {h} read again"
            );
            assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
        }
        // Items for an existing order of customer 2, switch off: customer 1's history stays.
        faults.set(Fault::BusyParentLookups, false);
        warm(&mut c, &[&h1, &h2]).await;
        let skips = status(&mut c, "Qcache_parent_lookup_skips").await;
        let lookups = status(&mut c, "Qcache_parent_lookups").await;
        c.query_drop("INSERT INTO order_items VALUES (2, 3, 4)")
            .await
            .unwrap();
        settled(&mut c).await;
        let asked = status(&mut c, "Qcache_parent_lookups").await - lookups;
        let skipped = status(&mut c, "Qcache_parent_lookup_skips").await - skips;
        assert_eq!(asked + skipped, 1, "with_write {with_write}: one lookup");
        // Beside the write, a lookup slower than it (a loaded machine) is skipped too.
        if asked == 1 {
            assert!(hit(&mut c, &h1).await, "with_write {with_write}: narrowed");
        }
        for h in [&h1, &h2] {
            assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
        }
        proxy.shutdown().await;
    }
}

/// Lookups beside their writes (`invalidation.derived_lookups_with_write`) narrow as those
/// after the OK do, and are not used once a move through qcache started since the write's
/// window (`fkslices::early_verdict`): every history is fresh either way.
#[tokio::test]
async fn lookups_beside_writes_narrow_and_stay_fresh() {
    let (proxy, mut c, mut d) = shop("fk_with", |c| {
        c.invalidation.derived_lookups_with_write = true
    })
    .await;
    let (h1, h2) = (history(1), history(2));
    let mut narrowed = 0;
    for _ in 0..5 {
        warm(&mut c, &[&h1, &h2]).await;
        let lookups = status(&mut c, "Qcache_parent_lookups").await;
        new_order(&mut c, 1, 3).await;
        let h2_hit = hit(&mut c, &h2).await;
        if status(&mut c, "Qcache_parent_lookups").await > lookups {
            assert!(h2_hit, "narrowed to customer 1");
            narrowed += 1;
        }
        assert!(!hit(&mut c, &h1).await, "customer 1's history read again");
        for h in [&h1, &h2] {
            assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
        }
    }
    assert!(narrowed > 0, "no lookup beside a write answered in time");
    // An order moved to customer 2 through qcache, then an item for it: fresh.
    warm(&mut c, &[&h1, &h2]).await;
    c.query_drop("UPDATE orders SET customer_id = 2 WHERE id = 1")
        .await
        .unwrap();
    warm(&mut c, &[&h1, &h2]).await;
    c.query_drop("INSERT INTO order_items VALUES (1, 2, 9)")
        .await
        .unwrap();
    for h in [&h1, &h2] {
        assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
    }
    proxy.shutdown().await;
}

/// Reads `q` once, as it is now (no waiting for pending lookups), and returns whether it
/// was a hit.
#[cfg(debug_assertions)]
async fn hit_now(c: &mut Conn, q: &str) -> (bool, Vec<Row>) {
    let before = status(c, "Qcache_hits").await;
    let got = rows(c, q).await;
    (status(c, "Qcache_hits").await - before == 1, got)
}

/// A child write's OK goes out before its parent lookup (`Timing::Deferred`), the lookup
/// slowed to 200 ms (`Fault::SlowParentLookups`): another connection reading the history
/// of the written customer right after each OK, many times, is never served the history
/// from before the write, and once the lookup ended the other customer's history, filled
/// before the write, is served again (the lookup narrowed it).
#[cfg(debug_assertions)]
#[tokio::test]
async fn deferred_lookups_never_serve_a_stale_derived_slice() {
    use qcache::faults::Fault;
    let schema = common::fresh_schema("fk_deferred").await;
    setup(&schema, SHOP).await;
    let proxy = common::proxy(|_| {}).await;
    let (mut c, mut r) = (proxy.conn(&schema).await, proxy.conn(&schema).await);
    let mut d = common::direct_to(&schema).await;
    let faults = &proxy.running.shared.cache.versions().faults;
    faults.set(Fault::SlowParentLookups, true);
    let (h1, h2) = (history(1), history(2));
    let deferred = status(&mut c, "Qcache_parent_lookups_deferred").await;
    let mut narrowed = 0;
    for i in 0..12 {
        warm(&mut r, &[&h1, &h2]).await;
        let id = new_order(&mut c, 1, 3).await;
        // Right after the OK, its lookup still asleep: the written customer's history.
        for _ in 0..5 {
            let (served, got) = hit_now(&mut r, &h1).await;
            assert!(
                !served,
                "round {i}: customer 1's history served while pending"
            );
            assert_eq!(got, rows(&mut d, &h1).await, "round {i}: stale");
        }
        // The other customer's history too is read from the server meanwhile, and what
        // it reads is not stored over the entry filled before the write.
        let (served, got) = hit_now(&mut r, &h2).await;
        assert!(
            !served,
            "round {i}: customer 2's history served while pending"
        );
        assert_eq!(
            got,
            rows(&mut d, &h2).await,
            "round {i}: customer 2 pending"
        );
        // The item's lookup (200 ms) has not ended: it is still pending.
        assert!(
            status(&mut r, "Qcache_parent_lookups_pending").await > 0,
            "round {i}"
        );
        // Once it ends, customer 2's entry (filled before the write) holds again (a miss
        // of it while pending stored nothing over it).
        settled(&mut r).await;
        let (served, got) = hit_now(&mut r, &h2).await;
        assert_eq!(got, rows(&mut d, &h2).await, "round {i}: customer 2");
        narrowed += served as u32;
        let (served, got) = hit_now(&mut r, &h1).await;
        assert!(!served, "round {i}: filled while pending, never served");
        assert_eq!(got, rows(&mut d, &h1).await, "round {i}: customer 1 after");
        // A move through qcache while the lookup sleeps: both histories right after it.
        warm(&mut r, &[&h1, &h2]).await;
        c.query_drop(format!("INSERT INTO order_items VALUES ({id}, 2, 1)"))
            .await
            .unwrap();
        c.query_drop(format!("UPDATE orders SET customer_id = 2 WHERE id = {id}"))
            .await
            .unwrap();
        for h in [&h1, &h2] {
            assert_eq!(
                rows(&mut r, h).await,
                rows(&mut d, h).await,
                "round {i}: {h}"
            );
        }
    }
    assert!(
        narrowed == 12,
        "customer 2's history served after the lookup in {narrowed} of 12 rounds"
    );
    let asked = status(&mut c, "Qcache_parent_lookups_deferred").await - deferred;
    assert!(asked >= 24, "{asked} lookups deferred");
    faults.set(Fault::SlowParentLookups, false);
    proxy.shutdown().await;
}

/// The client's OK of a child write does not wait for its parent lookup: with the lookup
/// slowed to 200 ms (`Fault::SlowParentLookups`) the write's OK still comes well before
/// (a structural check, not a benchmark: the bound is generous). With deferring off
/// (`invalidation.derived_lookups_deferred = false`), it waits, as it did before.
#[cfg(debug_assertions)]
#[tokio::test]
async fn a_child_writes_ok_does_not_wait_for_its_lookup() {
    use qcache::faults::{Fault, SLOW_PARENT_LOOKUP};
    for deferred in [true, false] {
        let name = format!("fk_ok_first{}", deferred as u8);
        let (proxy, mut c, mut d) = shop(&name, |c| {
            c.invalidation.derived_lookups_deferred = deferred
        })
        .await;
        let faults = &proxy.running.shared.cache.versions().faults;
        faults.set(Fault::SlowParentLookups, true);
        let (h1, h2) = (history(1), history(2));
        warm(&mut c, &[&h1, &h2]).await;
        let start = Instant::now();
        c.query_drop("INSERT INTO order_items VALUES (2, 3, 5)")
            .await
            .unwrap();
        let took = start.elapsed();
        if deferred {
            assert!(
                took < SLOW_PARENT_LOOKUP / 2,
                "the OK took {took:?}: it waited for the lookup"
            );
        } else {
            assert!(took >= SLOW_PARENT_LOOKUP, "not deferred: {took:?}");
        }
        for h in [&h1, &h2] {
            assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
        }
        faults.set(Fault::SlowParentLookups, false);
        warm(&mut c, &[&h1, &h2]).await;
        c.query_drop("INSERT INTO order_items VALUES (2, 2, 5)")
            .await
            .unwrap();
        assert!(hit(&mut c, &h1).await, "deferred {deferred}: narrowed to 2");
        proxy.shutdown().await;
    }
}

/// Adversary round 30: a child write made under `LOCK TABLES … WRITE` of its parent. The
/// parent lookup runs on qcache's own connection, which the server makes wait for the
/// session's table lock: the write's OK must not wait for it (deferred, and with deferring
/// off), and the written customer's history is read as the server reads it after it.
#[tokio::test]
async fn a_child_write_under_a_write_lock_of_its_parent() {
    for deferred in [true, false] {
        let name = format!("fk_locked{}", deferred as u8);
        let (proxy, mut c, mut d) = shop(&name, |c| {
            c.invalidation.derived_lookups_deferred = deferred
        })
        .await;
        let (h1, h2) = (history(1), history(2));
        warm(&mut c, &[&h1, &h2]).await;
        c.query_drop(
            "LOCK TABLES orders WRITE, order_items WRITE, orders AS o READ, order_items AS i READ",
        )
        .await
        .unwrap();
        let start = Instant::now();
        c.query_drop("INSERT INTO order_items VALUES (3, 3, 9)")
            .await
            .unwrap();
        let took = start.elapsed();
        c.query_drop("UNLOCK TABLES").await.unwrap();
        for h in [&h1, &h2] {
            assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
        }
        assert!(
            took < Duration::from_millis(500),
            "deferred {deferred}: the OK of a child write under a parent's write lock took {took:?}"
        );
        proxy.shutdown().await;
    }
}

/// Adversary round 30: a child write through qcache while another session (here directly)
/// holds `LOCK TABLES … WRITE` of its parent. The server lets the child write through; the
/// parent lookup on qcache's own connection would wait for the lock until its 1 s timeout,
/// holding the client's OK with deferring off (and always with L2 on). It is refused at
/// once instead (`lock_wait_timeout = 0` on lookup connections) and the write falls back;
/// both histories then read as the server reads them.
#[tokio::test]
async fn a_child_write_while_another_session_write_locks_its_parent() {
    for deferred in [true, false] {
        let name = format!("fk_otherlock{}", deferred as u8);
        let (proxy, mut c, mut d) = shop(&name, |c| {
            c.invalidation.derived_lookups_deferred = deferred
        })
        .await;
        let (h1, h2) = (history(1), history(2));
        warm(&mut c, &[&h1, &h2]).await;
        let mut locker = common::direct_to(&name_schema(&mut d).await).await;
        locker.query_drop("LOCK TABLES orders WRITE").await.unwrap();
        let start = Instant::now();
        tokio::time::timeout(
            Duration::from_secs(5),
            c.query_drop("INSERT INTO order_items VALUES (3, 3, 9)"),
        )
        .await
        .expect("the server let the child write through")
        .unwrap();
        let took = start.elapsed();
        locker.query_drop("UNLOCK TABLES").await.unwrap();
        settled(&mut c).await;
        for h in [&h1, &h2] {
            assert_eq!(rows(&mut c, h).await, rows(&mut d, h).await, "{h}");
        }
        assert!(
            took < Duration::from_millis(500),
            "deferred {deferred}: the OK of a child write under another session's write \
             lock of its parent took {took:?}"
        );
        proxy.shutdown().await;
    }
}

/// The default database of `c`.
async fn name_schema(c: &mut Conn) -> String {
    c.query_first::<String, _>("SELECT DATABASE()")
        .await
        .unwrap()
        .unwrap()
}
