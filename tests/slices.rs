//! Row-slice invalidation through the real proxy: a write into one slice leaves other
//! slices' entries served (counted as hits) and never serves the written slice stale, for
//! text and prepared statements, writes through qcache and from elsewhere (binlog), and
//! under concurrency.

mod common;
use common::{setup, status};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use qcache::config::Granularity;

async fn ids(c: &mut Conn, q: &str) -> Vec<i64> {
    c.query(q).await.unwrap_or_else(|e| panic!("{q}: {e}"))
}

const ORDERS: &[&str] = &[
    "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, \
     status VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, total INT NOT NULL, \
     KEY c (customer_id))",
    "INSERT INTO orders (customer_id, status, total) VALUES (1, 'new', 1), (2, 'new', 2), \
     (3, 'paid', 3)",
];

/// Reads `q` twice more and returns how many of those were hits.
async fn hits_of(c: &mut Conn, q: &str) -> u64 {
    let before = status(c, "Qcache_hits").await;
    ids(c, q).await;
    status(c, "Qcache_hits").await - before
}

#[tokio::test]
async fn other_slices_stay_served() {
    let schema = common::fresh_schema("sl_other").await;
    setup(&schema, ORDERS).await;
    // Patching off: the whole-table COUNT(*) below is what invalidation leaves (a known
    // insert would patch it instead; tests/patch.rs).
    let proxy = common::proxy(|c| {
        c.invalidation.granularity = Granularity::Row;
        c.cache.patch_aggregates = false;
    })
    .await;
    let mut c = proxy.conn(&schema).await;
    let one = "SELECT id FROM orders WHERE customer_id = 1 ORDER BY id";
    let two = "SELECT id FROM orders WHERE customer_id = 2 ORDER BY id";
    let whole = "SELECT COUNT(*) FROM orders";
    for q in [one, two, whole] {
        ids(&mut c, q).await;
        assert_eq!(hits_of(&mut c, q).await, 1, "{q} cached");
    }
    c.query_drop("INSERT INTO orders (customer_id, status, total) VALUES (1, 'x', 9)")
        .await
        .unwrap();
    assert!(status(&mut c, "Qcache_invalidations_slice").await >= 1);
    assert_eq!(
        hits_of(&mut c, two).await,
        1,
        "another customer's entry served"
    );
    assert_eq!(
        hits_of(&mut c, one).await,
        0,
        "the written slice is read again"
    );
    assert_eq!(ids(&mut c, one).await, vec![1, 4]);
    assert_eq!(
        hits_of(&mut c, whole).await,
        0,
        "whole-table entries see every write"
    );
    // UPDATE and DELETE pinned by the slice column.
    ids(&mut c, one).await;
    c.query_drop("UPDATE orders SET total = 5 WHERE customer_id = 2")
        .await
        .unwrap();
    assert_eq!(hits_of(&mut c, one).await, 1);
    assert_eq!(
        hits_of(&mut c, two).await,
        1,
        "its rows' ids did not change"
    );
    c.query_drop("DELETE FROM orders WHERE customer_id IN (2)")
        .await
        .unwrap();
    assert_eq!(ids(&mut c, two).await, Vec::<i64>::new());
    assert_eq!(hits_of(&mut c, one).await, 1);
    // '1' and 1 are one slice of an INT column.
    let quoted = "SELECT id FROM orders WHERE customer_id = '1' ORDER BY id";
    ids(&mut c, quoted).await;
    c.query_drop("INSERT INTO orders (customer_id, status, total) VALUES ('1', 'y', 1)")
        .await
        .unwrap();
    assert_eq!(ids(&mut c, quoted).await, vec![1, 4, 5]);
    assert_eq!(ids(&mut c, one).await, vec![1, 4, 5]);
    // A write pinning another column (id): every slice of customer_id whose entries read
    // what it changes goes; those reading none of it stay (column-aware).
    let totals = "SELECT total FROM orders WHERE customer_id = 1 ORDER BY id";
    ids(&mut c, two).await;
    ids(&mut c, one).await;
    ids(&mut c, totals).await;
    c.query_drop("UPDATE orders SET total = 0 WHERE id = 3")
        .await
        .unwrap();
    assert_eq!(hits_of(&mut c, totals).await, 0);
    assert_eq!(hits_of(&mut c, one).await, 1, "reads no total");
    // A write with unknown rows: everything of the table (an UPDATE of `total` would spare
    // the entries reading none of it).
    ids(&mut c, one).await;
    c.query_drop("DELETE FROM orders WHERE total > 100")
        .await
        .unwrap();
    assert_eq!(hits_of(&mut c, one).await, 0);
    // Case-insensitive column: 'NEW' and 'new' are one slice.
    let new = "SELECT id FROM orders WHERE status = 'new' ORDER BY id";
    ids(&mut c, new).await;
    assert_eq!(hits_of(&mut c, new).await, 1);
    c.query_drop("INSERT INTO orders (customer_id, status, total) VALUES (9, 'NEW', 1)")
        .await
        .unwrap();
    assert_eq!(ids(&mut c, new).await, vec![1, 6]);
    proxy.shutdown().await;
}

#[tokio::test]
async fn table_granularity_invalidates_every_entry() {
    let schema = common::fresh_schema("sl_table").await;
    setup(&schema, ORDERS).await;
    let proxy = common::proxy(|c| c.invalidation.granularity = Granularity::Table).await;
    let mut c = proxy.conn(&schema).await;
    let two = "SELECT id FROM orders WHERE customer_id = 2 ORDER BY id";
    ids(&mut c, two).await;
    assert_eq!(hits_of(&mut c, two).await, 1);
    c.query_drop("INSERT INTO orders (customer_id, status, total) VALUES (1, 'x', 9)")
        .await
        .unwrap();
    assert_eq!(hits_of(&mut c, two).await, 0);
    assert_eq!(status(&mut c, "Qcache_invalidations_slice").await, 0);
    proxy.shutdown().await;
}

async fn read(c: &mut Conn, k: i64) -> Vec<i64> {
    c.exec(
        "SELECT id FROM orders WHERE customer_id = ? ORDER BY id",
        (k,),
    )
    .await
    .unwrap()
}

/// A driver sends a prepared statement's parameter types with its first execute only
/// (mysql_async does): later executes of a write must still name their rows, not bump the
/// whole table.
#[tokio::test]
async fn prepared_writes_executed_again_name_their_rows() {
    let schema = common::fresh_schema("sl_prep_again").await;
    setup(&schema, ORDERS).await;
    let proxy = common::proxy(|c| c.invalidation.granularity = Granularity::Row).await;
    let mut c = proxy.conn(&schema).await;
    for i in 0..3 {
        assert_eq!(read(&mut c, 2).await, vec![2]);
        c.exec_drop(
            "INSERT INTO orders (customer_id, status, total) VALUES (?, ?, ?)",
            (1, "new", i),
        )
        .await
        .unwrap();
        let h0 = status(&mut c, "Qcache_hits").await;
        assert_eq!(read(&mut c, 2).await, vec![2]);
        assert_eq!(
            status(&mut c, "Qcache_hits").await - h0,
            1,
            "slice 2 kept after execute {i}"
        );
        assert_eq!(
            read(&mut c, 1).await.len(),
            2 + i as usize,
            "slice 1 read again"
        );
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn prepared_reads_and_writes() {
    let schema = common::fresh_schema("sl_prep").await;
    setup(&schema, ORDERS).await;
    let proxy = common::proxy(|c| c.invalidation.granularity = Granularity::Row).await;
    let mut c = proxy.conn(&schema).await;
    assert_eq!(read(&mut c, 1).await, vec![1]);
    assert_eq!(read(&mut c, 2).await, vec![2]);
    let h0 = status(&mut c, "Qcache_hits").await;
    assert_eq!(read(&mut c, 2).await, vec![2]);
    assert_eq!(status(&mut c, "Qcache_hits").await - h0, 1);
    c.exec_drop(
        "INSERT INTO orders (customer_id, status, total) VALUES (?, ?, ?)",
        (1, "new", 4),
    )
    .await
    .unwrap();
    let h0 = status(&mut c, "Qcache_hits").await;
    assert_eq!(read(&mut c, 2).await, vec![2]);
    assert_eq!(status(&mut c, "Qcache_hits").await - h0, 1, "slice 2 kept");
    assert_eq!(read(&mut c, 1).await, vec![1, 4], "slice 1 read again");
    // A string parameter against the INT column is the same slice.
    c.exec_drop("UPDATE orders SET total = 7 WHERE customer_id = ?", ("2",))
        .await
        .unwrap();
    let totals: Vec<i64> = c
        .exec("SELECT total FROM orders WHERE customer_id = ?", (2,))
        .await
        .unwrap();
    assert_eq!(totals, vec![7]);
    proxy.shutdown().await;
}

#[tokio::test]
async fn writes_from_elsewhere_through_the_binlog() {
    let schema = common::fresh_schema("sl_binlog").await;
    setup(&schema, ORDERS).await;
    let proxy = common::proxy(|c| {
        c.invalidation.granularity = Granularity::Row;
        c.invalidation.binlog = qcache::config::BinlogMode::On;
    })
    .await;
    let b = proxy.running.shared.binlog.clone().expect("binlog tail");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let mut c = proxy.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let one = "SELECT id FROM orders WHERE customer_id = 1 ORDER BY id";
    let three = "SELECT id FROM orders WHERE customer_id = 3 ORDER BY id";
    ids(&mut c, one).await;
    ids(&mut c, three).await;
    let commits = b.commits();
    d.query_drop("INSERT INTO orders (customer_id, status, total) VALUES (1, 'd', 1)")
        .await
        .unwrap();
    d.query_drop("UPDATE orders SET customer_id = 3 WHERE id = 2")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.commits() < commits + 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ids(&mut c, one).await, vec![1, 4]);
    assert_eq!(ids(&mut c, three).await, vec![2, 3]);
    assert!(status(&mut c, "Qcache_invalidations_slice").await >= 1);
    proxy.shutdown().await;
}

/// Readers of one customer's rows while writers insert for that customer and others: every
/// read returns at least every row whose insert was acknowledged before the read began.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_never_leave_a_stale_slice() {
    let schema = common::fresh_schema("sl_conc").await;
    setup(&schema, ORDERS).await;
    let proxy = Arc::new(common::proxy(|c| c.invalidation.granularity = Granularity::Row).await);
    // Per customer 1..=4, the number of rows acknowledged so far (3 customers start with 1,
    // customer 4 with 0).
    let acked: Arc<Vec<AtomicU64>> = Arc::new(
        [1, 1, 1, 0]
            .into_iter()
            .map(AtomicU64::new)
            .collect::<Vec<_>>(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stale = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..2u64 {
        let (proxy, schema, acked, stop) =
            (proxy.clone(), schema.clone(), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Writer 0 writes for customer 1 (the one read) and 4; writer 1 for 2 and 3.
                let cust = if w == 0 { [1, 4][(i % 2) as usize] } else { [2, 3][(i % 2) as usize] };
                i += 1;
                let sql = if i.is_multiple_of(3) {
                    format!("INSERT INTO orders (customer_id, status, total) VALUES ('{cust}', 'w', {i})")
                } else {
                    format!("INSERT INTO orders (customer_id, status, total) VALUES ({cust}, 'w', {i})")
                };
                c.query_drop(sql).await.unwrap();
                acked[cust as usize - 1].fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for r in 0..3u64 {
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
            while !stop.load(Ordering::Relaxed) {
                let cust = 1 + r % 2; // readers of customers 1 and 2
                let want = acked[cust as usize - 1].load(Ordering::SeqCst);
                let q = format!("SELECT COUNT(*) FROM orders WHERE customer_id = {cust}");
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
    assert_eq!(stale.load(Ordering::Relaxed), 0, "stale reads");
    assert!(reads.load(Ordering::Relaxed) > 100, "readers ran");
    assert!(hits > 0, "some reads were served from the cache");
    drop(c);
    if let Ok(p) = Arc::try_unwrap(proxy) {
        p.shutdown().await;
    }
}

/// The checker's slice statements (`qcache check-consistency`), on tables created through
/// the proxy: reads by `=`, IN and the join chain stay served while another customer's rows
/// are inserted, deleted and moved, and are read again after their own change.
#[tokio::test]
async fn checker_shapes_are_sliced_on_tables_created_through_the_proxy() {
    let schema = common::fresh_schema("sl_checker").await;
    let proxy = common::proxy(|c| c.invalidation.granularity = Granularity::Row).await;
    let mut c = proxy.conn(&schema).await;
    for s in [
        "CREATE TABLE cu (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=InnoDB",
        "CREATE TABLE s (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, \
         v BIGINT NOT NULL, KEY (customer_id)) ENGINE=InnoDB",
        "INSERT INTO cu VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO s (customer_id, v) VALUES (1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)",
    ] {
        c.query_drop(s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    // The CREATEs' OKs did not wait for the catalog: until their reloads land, the new
    // tables are unknown (reads not cached, writes not sliced).
    proxy.catalog_settled().await;
    let reads = [
        "SELECT customer_id, MIN(v), MAX(v) FROM s WHERE customer_id = 1 GROUP BY customer_id",
        "SELECT customer_id, MIN(v), MAX(v) FROM s WHERE customer_id IN (1, 3) \
         GROUP BY customer_id",
        "SELECT c.id, MIN(o.v), MAX(o.v) FROM cu c JOIN s o ON o.customer_id = c.id \
         WHERE c.id = 1 GROUP BY c.id",
        "SELECT customer_id, v FROM s WHERE customer_id = 1 ORDER BY v, id",
    ];
    for q in reads {
        let _: Vec<mysql_async::Row> = c.query(q).await.unwrap();
    }
    for w in [
        "INSERT INTO s (customer_id, v) VALUES (2, 3)",
        "DELETE FROM s WHERE customer_id = 2 AND v = 1",
        "UPDATE s SET customer_id = 2, v = 4 WHERE customer_id = 2 AND v = 2",
    ] {
        c.query_drop(w).await.unwrap();
        for q in reads {
            let before = status(&mut c, "Qcache_hits").await;
            let _: Vec<mysql_async::Row> = c.query(q).await.unwrap();
            assert_eq!(
                status(&mut c, "Qcache_hits").await - before,
                1,
                "{q} served after {w}"
            );
        }
    }
    // A move into customer 1: its entries are read again.
    c.query_drop("UPDATE s SET customer_id = 1, v = 5 WHERE customer_id = 2 AND v = 3")
        .await
        .unwrap();
    for q in reads {
        let before = status(&mut c, "Qcache_hits").await;
        let _: Vec<mysql_async::Row> = c.query(q).await.unwrap();
        assert_eq!(
            status(&mut c, "Qcache_hits").await - before,
            0,
            "{q} read again"
        );
    }
    proxy.shutdown().await;
}

/// Row images name the slices of writes from elsewhere: another customer's entries stay
/// served once the binlog has delivered them (tables created through the proxy).
#[tokio::test]
async fn binlog_writes_to_other_slices_leave_entries_served() {
    let schema = common::fresh_schema("sl_checker_bl").await;
    let proxy = common::proxy(|c| {
        c.invalidation.granularity = Granularity::Row;
        c.invalidation.binlog = qcache::config::BinlogMode::On;
    })
    .await;
    let b = proxy.running.shared.binlog.clone().expect("binlog tail");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let mut c = proxy.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let setup_from = b.commits();
    for s in [
        "CREATE TABLE s (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, \
         v BIGINT NOT NULL, KEY (customer_id)) ENGINE=InnoDB",
        "INSERT INTO s (customer_id, v) VALUES (1, 1), (1, 2), (2, 1), (2, 2)",
    ] {
        c.query_drop(s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    let one =
        "SELECT customer_id, MIN(v), MAX(v) FROM s WHERE customer_id = 1 GROUP BY customer_id";
    let wait = |n: u64| {
        let b = b.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while b.commits() < n && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(b.commits() >= n, "binlog delivered the write");
        }
    };
    // Let the tail pass the setup's own events (its DDL and its INSERT) first: a late echo
    // of them would otherwise end a wait below meant for a direct write. And the DDL's
    // catalog reload: until it lands the read is not stored with its slices.
    wait(setup_from + 2).await;
    common::wait_catalog_settled(&proxy.running.shared).await;
    let _: Vec<mysql_async::Row> = c.query(one).await.unwrap();
    for w in [
        "INSERT INTO s (customer_id, v) VALUES (2, 3)",
        "DELETE FROM s WHERE customer_id = 2 AND v = 1",
        "UPDATE s SET customer_id = 2, v = 4 WHERE customer_id = 2 AND v = 2",
    ] {
        let commits = b.commits();
        d.query_drop(w).await.unwrap();
        wait(commits + 1).await;
        let before = status(&mut c, "Qcache_hits").await;
        let _: Vec<mysql_async::Row> = c.query(one).await.unwrap();
        assert_eq!(
            status(&mut c, "Qcache_hits").await - before,
            1,
            "served after {w}"
        );
    }
    let commits = b.commits();
    d.query_drop("INSERT INTO s (customer_id, v) VALUES (1, 9)")
        .await
        .unwrap();
    wait(commits + 1).await;
    let got: Vec<(i64, i64, i64)> = c.query(one).await.unwrap();
    assert_eq!(got, vec![(1, 1, 9)]);
    proxy.shutdown().await;
}

const PRODUCTS: &[&str] = &[
    "CREATE TABLE products (id INT PRIMARY KEY, category_id INT NOT NULL, \
     name VARCHAR(20) NOT NULL, stock INT NOT NULL, KEY c (category_id)) ENGINE=InnoDB",
    "INSERT INTO products VALUES (1, 1, 'a', 5), (2, 1, 'b', 5), (3, 2, 'c', 5)",
];

/// An UPDATE of `stock` (through qcache, then from elsewhere through the binlog's row
/// images) leaves entries that read no `stock` served, and those that do see the new value.
#[tokio::test]
async fn column_updates_leave_other_columns_served() {
    let schema = common::fresh_schema("sl_cols").await;
    setup(&schema, PRODUCTS).await;
    let proxy = common::proxy(|c| {
        c.invalidation.granularity = Granularity::Row;
        c.invalidation.binlog = qcache::config::BinlogMode::On;
    })
    .await;
    let b = proxy.running.shared.binlog.clone().expect("binlog tail");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut c = proxy.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let category = "SELECT id FROM products WHERE category_id = 1 ORDER BY name, id";
    let search = "SELECT id FROM products WHERE name LIKE 'b%' ORDER BY id";
    let count = "SELECT COUNT(*) FROM products";
    let page = "SELECT stock FROM products WHERE id = 1";
    let all_stock = "SELECT SUM(stock) FROM products";
    for q in [category, search, count, page, all_stock] {
        ids(&mut c, q).await;
    }
    let column_writes = status(&mut c, "Qcache_invalidations_column").await;
    let echo = b.commits();
    c.query_drop("UPDATE products SET stock = IF(stock > 0, stock - 1, 100) WHERE id = 1")
        .await
        .unwrap();
    // Once at its OK, maybe once more when the binlog tail sees it.
    assert!(status(&mut c, "Qcache_invalidations_column").await > column_writes);
    for q in [category, search, count] {
        assert_eq!(hits_of(&mut c, q).await, 1, "{q} reads no stock: served");
    }
    assert_eq!(ids(&mut c, page).await, vec![4]);
    assert_eq!(ids(&mut c, all_stock).await, vec![14]);
    // From elsewhere: the row image shows only `stock` changed. The UPDATE above comes
    // back through the tail first: waited for, so that its echo does not end the wait for
    // this one.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.commits() <= echo && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let commits = b.commits();
    d.query_drop("UPDATE products SET stock = 0 WHERE category_id = 1")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.commits() <= commits && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ids(&mut c, page).await, vec![0]);
    assert_eq!(ids(&mut c, all_stock).await, vec![5]);
    for q in [category, search, count] {
        assert_eq!(
            hits_of(&mut c, q).await,
            1,
            "{q}: binlog update of stock only"
        );
    }
    // A column they read: through qcache and from elsewhere.
    c.query_drop("UPDATE products SET name = 'z' WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(ids(&mut c, category).await, vec![2, 1]);
    let commits = b.commits();
    d.query_drop("UPDATE products SET name = 'bb' WHERE id = 3")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.commits() <= commits && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ids(&mut c, search).await, vec![2, 3]);
    proxy.shutdown().await;
}

/// Writers update `stock` of every product while others move products between categories
/// and rename them; readers of one category's names never see fewer or other rows than the
/// acknowledged writes leave, and the stock readers never an old stock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_column_updates_never_serve_an_old_value() {
    let schema = common::fresh_schema("sl_cols_conc").await;
    setup(&schema, PRODUCTS).await;
    let proxy = Arc::new(common::proxy(|c| c.invalidation.granularity = Granularity::Row).await);
    // The stock of product 1 and the name generation of product 2, as acknowledged.
    let stock = Arc::new(AtomicU64::new(5));
    let named = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let stale = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    {
        let (proxy, schema, stock, stop) =
            (proxy.clone(), schema.clone(), stock.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            while !stop.load(Ordering::Relaxed) {
                c.query_drop("UPDATE products SET stock = stock + 1 WHERE id = 1")
                    .await
                    .unwrap();
                stock.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    {
        let (proxy, schema, named, stop) =
            (proxy.clone(), schema.clone(), named.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                c.query_drop(format!("UPDATE products SET name = 'n{i}' WHERE id = 2"))
                    .await
                    .unwrap();
                named.store(i, Ordering::SeqCst);
            }
        }));
    }
    for r in 0..3u64 {
        let (proxy, schema, stock, named, stop, stale, reads) = (
            proxy.clone(),
            schema.clone(),
            stock.clone(),
            named.clone(),
            stop.clone(),
            stale.clone(),
            reads.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            while !stop.load(Ordering::Relaxed) {
                if r == 0 {
                    let want = stock.load(Ordering::SeqCst);
                    let n: Option<u64> = c
                        .query_first("SELECT stock FROM products WHERE id = 1")
                        .await
                        .unwrap();
                    if n.unwrap_or(0) < want {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    let want = named.load(Ordering::SeqCst);
                    let n: Option<String> = c
                        .query_first("SELECT name FROM products WHERE category_id = 1 AND id = 2")
                        .await
                        .unwrap();
                    let got: u64 = n
                        .as_deref()
                        .and_then(|s| s.strip_prefix('n'))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    if got < want {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
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
    assert_eq!(stale.load(Ordering::Relaxed), 0, "stale reads");
    assert!(reads.load(Ordering::Relaxed) > 100, "readers ran");
    assert!(status(&mut c, "Qcache_invalidations_column").await > 10);
    drop(c);
    if let Ok(p) = Arc::try_unwrap(proxy) {
        p.shutdown().await;
    }
}

const EVENTS: &[&str] = &[
    "CREATE TABLE ev (id INT AUTO_INCREMENT PRIMARY KEY, at DATETIME NOT NULL, \
     status VARCHAR(10) COLLATE utf8mb4_nopad_bin NOT NULL, total INT NOT NULL, KEY (at)) \
     ENGINE=InnoDB",
    "INSERT INTO ev (at, status, total) VALUES ('2026-11-02 10:00:00', 'new', 1), \
     ('2026-11-09 10:00:00', 'new', 2), ('2026-10-20 10:00:00', 'paid', 3)",
];

type Dash = Vec<(String, i64, i64)>;

async fn dash(c: &mut Conn, q: String) -> Dash {
    c.query(&q).await.unwrap_or_else(|e| panic!("{q}: {e}"))
}

/// Reads dashboard `q` until it shows the row written elsewhere (status `late`): the binlog
/// delivered the direct `what`. Other tests' commits share the tail, so no commit count.
async fn until_late(c: &mut Conn, q: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dash(c, q.to_string())
        .await
        .iter()
        .any(|(s, _, _)| s == "late")
    {
        assert!(
            Instant::now() < deadline,
            "the binlog's {what} was never seen"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a dashboard once more and returns whether it was a hit.
async fn dash_hits(c: &mut Conn, q: &str) -> u64 {
    let before = status(c, "Qcache_hits").await;
    dash(c, q.to_string()).await;
    status(c, "Qcache_hits").await - before
}

/// The first week of November 2026 by a prepared read, its bounds as strings or as
/// DATETIME-typed parameters.
async fn prepared(c: &mut Conn, typed: bool) -> Vec<(i64, i64)> {
    let sql = "SELECT COUNT(*), SUM(total) FROM ev WHERE at >= ? AND at < ?";
    let as_dt = |y, m, d| mysql_async::Value::Date(y, m, d, 0, 0, 0, 0);
    let params: Vec<mysql_async::Value> = if typed {
        vec![as_dt(2026, 11, 1), as_dt(2026, 11, 8)]
    } else {
        vec!["2026-11-01".into(), "2026-11-08".into()]
    };
    c.exec(sql, params).await.unwrap()
}

/// A dashboard-shaped read bounded by a date range depends on the days (months, years) it
/// covers: an order inserted on another day leaves it served, one on its days is seen, for
/// text and prepared reads (string and DATETIME-typed parameters), through qcache and from
/// elsewhere (the binlog's row images).
#[tokio::test]
async fn date_ranges_of_other_weeks_stay_served() {
    let schema = common::fresh_schema("sl_dates").await;
    setup(&schema, EVENTS).await;
    let proxy = common::proxy(|c| {
        c.invalidation.granularity = Granularity::Row;
        c.invalidation.binlog = qcache::config::BinlogMode::On;
    })
    .await;
    let b = proxy.running.shared.binlog.clone().expect("binlog tail");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let mut c = proxy.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let week = |from: &str, to: &str| {
        format!(
            "SELECT status, COUNT(*), SUM(total) FROM ev WHERE at >= '{from}' AND at < '{to}' \
             GROUP BY status ORDER BY status"
        )
    };
    let first = week("2026-11-01", "2026-11-08");
    let second = week("2026-11-08", "2026-11-15");
    let october = week("2026-10-01", "2026-11-01");
    for q in [&first, &second, &october] {
        dash(&mut c, q.clone()).await;
        assert_eq!(dash_hits(&mut c, q).await, 1, "{q} cached");
    }
    // Through qcache: an order in the second week.
    c.query_drop("INSERT INTO ev (at, status, total) VALUES ('2026-11-10 12:00:00', 'new', 5)")
        .await
        .unwrap();
    assert_eq!(
        dash_hits(&mut c, &first).await,
        1,
        "another week's entry served"
    );
    assert_eq!(
        dash_hits(&mut c, &october).await,
        1,
        "another month's entry served"
    );
    assert_eq!(
        dash(&mut c, second.clone()).await,
        vec![("new".to_string(), 2, 7)],
        "the written week is read again"
    );
    // The last second of the first week is in it; midnight after is not.
    c.query_drop("INSERT INTO ev (at, status, total) VALUES ('2026-11-08 00:00:00', 'new', 6)")
        .await
        .unwrap();
    assert_eq!(
        dash_hits(&mut c, &first).await,
        1,
        "midnight is the next week's"
    );
    c.query_drop("INSERT INTO ev (at, status, total) VALUES ('2026-11-07 23:59:59', 'new', 7)")
        .await
        .unwrap();
    assert_eq!(
        dash(&mut c, first.clone()).await,
        vec![("new".to_string(), 2, 8)]
    );
    // A write whose day qcache cannot read: every range entry of the table goes.
    dash(&mut c, october.clone()).await;
    c.query_drop("UPDATE ev SET total = total + 1 WHERE id = 3")
        .await
        .unwrap();
    assert_eq!(
        dash(&mut c, october.clone()).await,
        vec![("paid".to_string(), 1, 4)]
    );
    // Prepared, with the bounds as strings and as DATETIME-typed parameters.
    for typed in [false, true] {
        assert_eq!(prepared(&mut c, typed).await, vec![(2, 8)]);
        let h0 = status(&mut c, "Qcache_hits").await;
        assert_eq!(prepared(&mut c, typed).await, vec![(2, 8)]);
        assert_eq!(status(&mut c, "Qcache_hits").await - h0, 1, "typed {typed}");
    }
    c.exec_drop(
        "INSERT INTO ev (at, status, total) VALUES (?, 'new', ?)",
        ("2026-11-12 08:00:00", 10),
    )
    .await
    .unwrap();
    for typed in [false, true] {
        let h0 = status(&mut c, "Qcache_hits").await;
        assert_eq!(prepared(&mut c, typed).await, vec![(2, 8)]);
        assert_eq!(
            status(&mut c, "Qcache_hits").await - h0,
            1,
            "prepared insert in another week (typed {typed})"
        );
    }
    // From elsewhere: the binlog's row images name their days. Wait for the write by
    // reading the week it lands in until it shows (other tests' commits share the tail).
    dash(&mut c, first.clone()).await;
    dash(&mut c, october.clone()).await;
    d.query_drop("INSERT INTO ev (at, status, total) VALUES ('2026-11-13 09:00:00', 'late', 20)")
        .await
        .unwrap();
    until_late(&mut c, &second, "insert").await;
    assert_eq!(
        dash_hits(&mut c, &first).await,
        1,
        "served after a direct insert elsewhere"
    );
    assert_eq!(dash_hits(&mut c, &october).await, 1);
    // A direct update moving a row from the second week into the first.
    d.query_drop("UPDATE ev SET at = '2026-11-03 00:00:00' WHERE status = 'late'")
        .await
        .unwrap();
    until_late(&mut c, &first, "update").await;
    assert!(!dash(&mut c, second.clone())
        .await
        .iter()
        .any(|(s, _, _)| s == "late"));
    proxy.shutdown().await;
}

/// DATETIME-typed parameters (what mysql_async sends for `Value::Date`) at the edges of a
/// day: 23:59:59.999999 into DATETIME(0) under TIME_ROUND_FRACTIONAL (the server rounds it
/// into the next day), a time of day into a DATE, typed bounds with a time of day on a DATE
/// column. Every prepared read through qcache answers what the server answers directly.
#[tokio::test]
async fn typed_date_parameters_at_day_edges_are_never_stale() {
    use mysql_async::Value as V;
    let schema = common::fresh_schema("sl_dates_typed").await;
    setup(
        &schema,
        &[
            "CREATE TABLE ed (id INT AUTO_INCREMENT PRIMARY KEY, a0 DATETIME NULL, \
           a3 DATETIME(3) NULL, d DATE NULL, v INT NOT NULL, KEY (a0), KEY (d)) ENGINE=InnoDB",
        ],
    )
    .await;
    let proxy = common::proxy(|c| c.invalidation.granularity = Granularity::Row).await;
    let mut c = proxy.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let mode = "SET SESSION sql_mode = CONCAT(@@sql_mode, ',TIME_ROUND_FRACTIONAL')";
    c.query_drop(mode).await.unwrap();
    d.query_drop(mode).await.unwrap();
    let dt = |day: u8, h: u8, mi: u8, s: u8, us: u32| V::Date(2026, 11, day, h, mi, s, us);
    let reads: Vec<(&str, Vec<V>)> = vec![
        (
            "SELECT COUNT(*), SUM(v) FROM ed WHERE a0 >= ? AND a0 < ?",
            vec![dt(8, 0, 0, 0, 0), dt(9, 0, 0, 0, 0)],
        ),
        (
            "SELECT COUNT(*), SUM(v) FROM ed WHERE a3 >= ? AND a3 < ?",
            vec![dt(8, 0, 0, 0, 0), dt(9, 0, 0, 0, 0)],
        ),
        (
            "SELECT COUNT(*), SUM(v) FROM ed WHERE d >= ? AND d < ?",
            vec![dt(8, 0, 0, 0, 0), dt(9, 0, 0, 0, 0)],
        ),
        (
            "SELECT COUNT(*), SUM(v) FROM ed WHERE d >= ? AND d < ?",
            vec![dt(7, 0, 0, 0, 0), dt(8, 0, 0, 0, 0)],
        ),
        (
            "SELECT COUNT(*), SUM(v) FROM ed WHERE d > ? AND d <= ?",
            vec![dt(7, 12, 0, 0, 0), dt(8, 12, 0, 0, 0)],
        ),
        (
            "SELECT COUNT(*), SUM(v) FROM ed WHERE a0 > ? AND a0 <= ?",
            vec![dt(7, 23, 59, 59, 500_000), dt(8, 0, 0, 0, 500_000)],
        ),
    ];
    async fn all(conn: &mut Conn, reads: &[(&str, Vec<V>)]) -> Vec<Vec<(i64, Option<i64>)>> {
        let mut out = Vec::new();
        for (sql, p) in reads {
            out.push(conn.exec(*sql, p.clone()).await.unwrap());
        }
        out
    }
    let writes: Vec<Vec<V>> = vec![
        // Rounds into 2026-11-08 in a0, a3 (and, rounding, in d).
        vec![
            dt(7, 23, 59, 59, 999_999),
            dt(7, 23, 59, 59, 999_900),
            dt(7, 23, 59, 59, 999_999),
            V::Int(1),
        ],
        // A time of day into a DATE: truncated (or rounded) to a day.
        vec![
            dt(8, 12, 0, 0, 0),
            dt(8, 12, 0, 0, 0),
            dt(7, 12, 0, 0, 0),
            V::Int(2),
        ],
        vec![
            dt(7, 10, 0, 0, 0),
            dt(7, 10, 0, 0, 0),
            dt(8, 0, 0, 0, 0),
            V::Int(4),
        ],
    ];
    for w in writes {
        // Warm every read through qcache, then write, then compare.
        all(&mut c, &reads).await;
        let h0 = status(&mut c, "Qcache_hits").await;
        all(&mut c, &reads).await;
        let hits = status(&mut c, "Qcache_hits").await - h0;
        assert_eq!(hits, reads.len() as u64, "every read cached");
        c.exec_drop(
            "INSERT INTO ed (a0, a3, d, v) VALUES (?, ?, ?, ?)",
            w.clone(),
        )
        .await
        .unwrap();
        let (got, want) = (all(&mut c, &reads).await, all(&mut d, &reads).await);
        assert_eq!(got, want, "after writing {w:?}");
    }
    proxy.shutdown().await;
}
