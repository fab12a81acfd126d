//! An application-shaped workload: a shop's schema at a stated size and the mix of reads and
//! writes its web pages send, with Zipf-skewed keys, over the text or the binary protocol.
//! Point selects by primary key are the cheapest thing a database does; this measures what a
//! cache gains on the queries applications put caches in front of (joins, aggregates, sorted
//! pages, dashboards), and what writes cost it (each one invalidates).
//!
//! ```sh
//! # once per server (directly, not through a proxy): the schema and its rows
//! cargo run --release --example shopload -- prepare --addr 127.0.0.1:3306
//! # after runs, back to that size (the orders they added deleted), also directly
//! cargo run --release --example shopload -- reset --addr 127.0.0.1:3306
//! # 32 connections, 5 s warm-up then 10 s measured, 1% writes, prepared statements
//! cargo run --release --example shopload -- run --addr 127.0.0.1:3307 --write-pct 1 \
//!     --ps prepared --warmup 5 --secs 10 --server-pid $(pidof qcache)
//! ```
//!
//! Client model as `examples/loadgen`: one thread, one event loop, `--conns` connections with
//! one request in flight each (closed loop), so the client's own CPU per request is small
//! and the same for every server. Each request is one of:
//!
//! | kind | statement | key |
//! |---|---|---|
//! | product | product page: `products` ⋈ `categories` by product id | product, Zipf |
//! | history | a customer's last 10 orders with item counts (join, GROUP BY, ORDER BY, LIMIT) | customer, Zipf |
//! | category | a category page: its products by units sold (LEFT JOIN, GROUP BY, LIMIT 24) | category, Zipf |
//! | dashboard | orders and revenue by status over 7 days (range on an index, SUM/COUNT); `--dashboard daily`: per day (`GROUP BY DATE(created_at)`, issue #37's) | window, Zipf, newest hottest |
//! | search | products whose name starts with a prefix (`LIKE 'abc%'` on an index) | prefix, Zipf |
//! | order | a new order: INSERT into `orders`, then one into `order_items` (2 statements) | customer, product, Zipf |
//! | stock | `UPDATE products SET stock = …` by product id | product, Zipf |
//!
//! `--write-pct` of the requests are writes (half orders, half stock updates), the rest
//! reads picked by `--mix` weights. Zipf ranks are scattered over the key space (a hot
//! customer is not customer 1), except dashboard windows, where the newest is the hottest.
//! `run` prints one line per kind and overall (requests, requests/s, p50/p95/p99 latency in
//! ms, errors), then the hit ratio (the server's `Qcache_hits` delta — qcache's `SHOW QCACHE
//! STATUS`, else MariaDB's `SHOW GLOBAL STATUS` — over reads completed), the CPU per
//! statement of `--server-pid` (user+system, /proc/PID/stat) and of this client, and the
//! load average. Everything is measured over the `--secs` after the `--warmup`.

#[path = "../tests/rawclient/mod.rs"]
mod rawclient;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use qcache::protocol::codec::Packet;
use qcache::protocol::packets::{com, read_lenenc, read_lenenc_str};
use qcache::protocol::response::{Expect, Response, Step};
use rawclient::Raw;

#[derive(Parser)]
#[command(about = "A shop-shaped MySQL workload (see the example's header)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct Size {
    /// Rows in `orders` (each has 1–5 items, 3 on average, in `order_items`).
    #[arg(long, default_value_t = 100_000)]
    orders: u64,
    /// Rows in `customers`.
    #[arg(long, default_value_t = 10_000)]
    customers: u64,
    /// Rows in `products`.
    #[arg(long, default_value_t = 1_000)]
    products: u64,
    /// Leaf categories (products belong to these), under 10 departments.
    #[arg(long, default_value_t = 100)]
    categories: u64,
}

/// Where the shop is and how big `prepare` made it: what `prepare` and `reset` take.
#[derive(clap::Args)]
struct Shop {
    #[arg(long)]
    addr: String,
    #[arg(long, default_value = "root")]
    user: String,
    #[arg(long, default_value = "shop")]
    db: String,
    #[command(flatten)]
    size: Size,
}

#[derive(Subcommand)]
enum Cmd {
    /// Drop and create the database, its tables and rows (send it to the server directly).
    Prepare(Shop),
    /// Put the shop back to what `prepare` made: delete the orders (and their items) that
    /// `run` added since (send it to the server directly). Stock levels are left as they are.
    Reset(Shop),
    /// Send the workload and report.
    Run {
        #[arg(long)]
        addr: String,
        #[arg(long, default_value = "root")]
        user: String,
        #[arg(long, default_value = "shop")]
        db: String,
        /// The sizes `prepare` used (keys are drawn from them).
        #[command(flatten)]
        size: Size,
        #[arg(long, default_value_t = 32)]
        conns: u64,
        /// Unmeasured seconds first (fills caches), on the same connections.
        #[arg(long, default_value_t = 0)]
        warmup: u64,
        /// Measured seconds.
        #[arg(long, default_value_t = 10)]
        secs: u64,
        /// Percent of requests that are writes (orders and stock updates, half each).
        #[arg(long, default_value_t = 0.0)]
        write_pct: f64,
        /// Read mix weights: product,history,category,dashboard,search.
        #[arg(long, default_value = "40,20,15,5,20")]
        mix: String,
        /// Zipf exponent of the key popularity (0 = uniform).
        #[arg(long, default_value_t = 0.99)]
        zipf: f64,
        /// `text` (COM_QUERY with literals) or `prepared` (COM_STMT_EXECUTE with parameters).
        #[arg(long, default_value = "text")]
        ps: String,
        /// `status` (orders and revenue by status, the default) or `daily` (per day, as
        /// issue #37's dashboard).
        #[arg(long, default_value = "status")]
        dashboard: String,
        /// `page` (the product and its category, the default) or `stats` (the product's
        /// sales, issue #37's per-product aggregate over a join).
        #[arg(long, default_value = "page")]
        product: String,
        /// The process whose CPU per statement is reported (the server the client talks to).
        #[arg(long)]
        server_pid: Option<u32>,
        /// A process behind it (the database behind a proxy), reported separately.
        #[arg(long)]
        backend_pid: Option<u32>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// Words product names are made of (an adjective, a noun, the id): searches use their
/// prefixes, so the client and `prepare` must agree on them.
const ADJ: [&str; 24] = [
    "Amber", "Bold", "Cosy", "Dusty", "Eager", "Fancy", "Giant", "Handy", "Icy", "Jolly", "Kind",
    "Lucky", "Mellow", "Noble", "Olive", "Plain", "Quiet", "Rapid", "Silky", "Tidy", "Urban",
    "Vivid", "Warm", "Young",
];
const NOUN: [&str; 24] = [
    "Anchor", "Basket", "Candle", "Drum", "Easel", "Fork", "Globe", "Hammer", "Inkpot", "Jar",
    "Kettle", "Lamp", "Mirror", "Needle", "Oven", "Pillow", "Quilt", "Rope", "Stool", "Teapot",
    "Umbrella", "Vase", "Wallet", "Yoyo",
];
/// Dashboard windows and order dates: 365 days from this date (days since 1970-01-01:
/// 2025-07-01).
const DAY0: i64 = 20_270;
const DAYS: u64 = 365;
const WINDOW_DAYS: u64 = 7;

fn elt(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(",")
}

fn prepare_sql(s: &Size, db: &str) -> Vec<String> {
    let (adj, noun) = (elt(&ADJ), elt(&NOUN));
    let n_adj = ADJ.len();
    let n_noun = NOUN.len();
    let mut v = vec![
        format!("DROP DATABASE IF EXISTS `{db}`"),
        format!("CREATE DATABASE `{db}`"),
        format!("USE `{db}`"),
        "SET SESSION foreign_key_checks = 0, unique_checks = 0".into(),
        "CREATE TABLE categories (id INT NOT NULL PRIMARY KEY, parent_id INT NULL, \
         name VARCHAR(64) NOT NULL, KEY parent (parent_id), \
         CONSTRAINT fk_category_parent FOREIGN KEY (parent_id) REFERENCES categories (id)) \
         ENGINE=InnoDB"
            .into(),
        "CREATE TABLE products (id INT NOT NULL PRIMARY KEY, category_id INT NOT NULL, \
         name VARCHAR(100) NOT NULL, price DECIMAL(10,2) NOT NULL, stock INT NOT NULL, \
         description TEXT NOT NULL, KEY category (category_id), KEY name (name), \
         CONSTRAINT fk_product_category FOREIGN KEY (category_id) REFERENCES categories (id)) \
         ENGINE=InnoDB"
            .into(),
        "CREATE TABLE customers (id INT NOT NULL PRIMARY KEY, email VARCHAR(100) NOT NULL, \
         name VARCHAR(100) NOT NULL, country CHAR(2) NOT NULL, created_at DATETIME NOT NULL, \
         UNIQUE KEY email (email)) ENGINE=InnoDB"
            .into(),
        "CREATE TABLE orders (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, \
         customer_id INT NOT NULL, created_at DATETIME NOT NULL, status VARCHAR(16) NOT NULL, \
         total DECIMAL(12,2) NOT NULL, KEY customer (customer_id, created_at), \
         KEY created (created_at), \
         CONSTRAINT fk_order_customer FOREIGN KEY (customer_id) REFERENCES customers (id)) \
         ENGINE=InnoDB"
            .into(),
        "CREATE TABLE order_items (order_id INT NOT NULL, product_id INT NOT NULL, \
         qty INT NOT NULL, price DECIMAL(10,2) NOT NULL, PRIMARY KEY (order_id, product_id), \
         KEY product (product_id), \
         CONSTRAINT fk_item_order FOREIGN KEY (order_id) REFERENCES orders (id), \
         CONSTRAINT fk_item_product FOREIGN KEY (product_id) REFERENCES products (id)) \
         ENGINE=InnoDB"
            .into(),
        "INSERT INTO categories SELECT seq, NULL, CONCAT('Department ', seq) FROM seq_1_to_10"
            .into(),
        format!(
            "INSERT INTO categories SELECT 10 + seq, 1 + (seq - 1) % 10, \
             CONCAT(ELT(1 + seq % {n_noun}, {noun}), 's ', seq) FROM seq_1_to_{}",
            s.categories
        ),
        format!(
            "INSERT INTO products SELECT seq, 11 + (seq * 7) % {cats}, \
             CONCAT(ELT(1 + seq % {n_adj}, {adj}), ' ', \
                    ELT(1 + (seq DIV {n_adj}) % {n_noun}, {noun}), ' ', seq), \
             5 + ((seq * 37) % 9500) / 100, 100 + seq % 50, \
             REPEAT('A fine thing for the home. ', 4 + seq % 8) FROM seq_1_to_{}",
            s.products,
            cats = s.categories
        ),
        format!(
            "INSERT INTO customers SELECT seq, CONCAT('user', seq, '@example.com'), \
             CONCAT('Customer ', seq), ELT(1 + seq % 5, 'DE', 'FR', 'US', 'GB', 'PL'), \
             TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq MINUTE FROM seq_1_to_{}",
            s.customers
        ),
        format!(
            "INSERT INTO orders SELECT seq, 1 + (seq * 7919) % {cust}, \
             TIMESTAMP'2025-07-01 00:00:00' + INTERVAL ((seq * 104729) % {secs}) SECOND, \
             ELT(1 + seq % 10, 'delivered', 'delivered', 'delivered', 'delivered', \
                 'delivered', 'delivered', 'delivered', 'shipped', 'paid', 'cancelled'), 0 \
             FROM seq_1_to_{}",
            s.orders,
            cust = s.customers,
            secs = DAYS * 86_400
        ),
        format!(
            "INSERT IGNORE INTO order_items \
             SELECT x.o, p.id, 1 + x.o % 3, p.price FROM \
               (SELECT 1 + (seq - 1) DIV 5 AS o, (seq - 1) % 5 AS k FROM seq_1_to_{}) x \
             JOIN products p ON p.id = 1 + (x.o * 31 + x.k * 337) % {prods} \
             WHERE x.k <= x.o % 5",
            s.orders * 5,
            prods = s.products
        ),
        "UPDATE orders o JOIN (SELECT order_id, SUM(qty * price) AS t FROM order_items \
         GROUP BY order_id) x ON x.order_id = o.id SET o.total = x.t"
            .into(),
        "ANALYZE TABLE categories, products, customers, orders, order_items".into(),
    ];
    v.shrink_to_fit();
    v
}

/// Splitmix64: a cheap, deterministic random stream per connection.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(state: &mut u64) -> f64 {
    (next(state) >> 11) as f64 / (1u64 << 53) as f64
}

/// Ranks 0..n with P(rank r) ∝ 1/(r+1)^s, by inverting the cumulative distribution.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: u64, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for r in 0..n {
            sum += 1.0 / ((r + 1) as f64).powf(s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    fn rank(&self, state: &mut u64) -> u64 {
        let u = unit(state);
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }

    /// A key in 1..=n, the popular ones scattered over the range.
    fn key(&self, state: &mut u64) -> u64 {
        let n = self.cdf.len() as u64;
        // 7919 is prime: multiplying by it permutes 0..n unless n is a multiple of it.
        let m = if n.is_multiple_of(7919) { 1 } else { 7919 };
        (self.rank(state) * m) % n + 1
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn date(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

#[derive(Clone, Debug)]
enum Val {
    Int(i64),
    Str(String),
}

const KINDS: [&str; 7] = [
    "product",
    "history",
    "category",
    "dashboard",
    "search",
    "order",
    "stock",
];
const READS: usize = 5;
const ORDER: usize = 5;
const STOCK: usize = 6;

/// The statements, in KINDS order; `order` is two (orders, then order_items).
const SQL: [&str; 8] = [
    "SELECT p.id, p.name, p.price, p.stock, p.description, c.name AS category \
     FROM products p JOIN categories c ON c.id = p.category_id WHERE p.id = ?",
    "SELECT o.id, o.created_at, o.status, o.total, COUNT(*) AS items \
     FROM orders o JOIN order_items i ON i.order_id = o.id WHERE o.customer_id = ? \
     GROUP BY o.id, o.created_at, o.status, o.total \
     ORDER BY o.created_at DESC, o.id DESC LIMIT 10",
    "SELECT p.id, p.name, p.price, COUNT(i.order_id) AS sold \
     FROM products p LEFT JOIN order_items i ON i.product_id = p.id \
     WHERE p.category_id = ? GROUP BY p.id, p.name, p.price ORDER BY sold DESC, p.id LIMIT 24",
    "SELECT o.status, COUNT(*) AS orders, SUM(o.total) AS revenue FROM orders o \
     WHERE o.created_at >= ? AND o.created_at < ? GROUP BY o.status ORDER BY o.status",
    "SELECT id, name, price FROM products WHERE name LIKE ? ORDER BY name LIMIT 20",
    "INSERT INTO orders (customer_id, created_at, status, total) VALUES (?, ?, 'new', ?)",
    "UPDATE products SET stock = IF(stock > 0, stock - 1, 100) WHERE id = ?",
    "INSERT INTO order_items (order_id, product_id, qty, price) VALUES (?, ?, 1, ?)",
];
const ITEM_SQL: usize = 7;

/// `--dashboard daily`: the dashboard of issue #37 instead, revenue per day of the window
/// (`GROUP BY DATE(created_at)`), a shape qcache patches under inserts.
const DAILY_SQL: &str = "SELECT DATE(created_at), COUNT(*), SUM(total) FROM orders \
     WHERE created_at >= ? AND created_at < ? GROUP BY DATE(created_at)";
static DAILY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--product stats`: issue #37's per-product page instead, the product's sales (an
/// aggregate of order_items joined to the one product its key pins), a shape qcache
/// patches under inserts of order items.
const STATS_SQL: &str = "SELECT p.name, COUNT(*), SUM(i.qty), SUM(i.price) \
     FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.product_id = ?";
static STATS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Statement `i` of [`SQL`], the dashboard as `--dashboard` chose, the product page as
/// `--product` did.
fn sql(i: usize) -> &'static str {
    if i == 0 && STATS.load(std::sync::atomic::Ordering::Relaxed) {
        STATS_SQL
    } else if i == 3 && DAILY.load(std::sync::atomic::Ordering::Relaxed) {
        DAILY_SQL
    } else {
        SQL[i]
    }
}

/// The key distributions of one run.
struct Keys {
    products: Zipf,
    customers: Zipf,
    categories: Zipf,
    windows: Zipf,
    prefixes: Zipf,
}

impl Keys {
    fn new(size: &Size, s: f64) -> Keys {
        Keys {
            products: Zipf::new(size.products, s),
            customers: Zipf::new(size.customers, s),
            categories: Zipf::new(size.categories, s),
            windows: Zipf::new(DAYS - WINDOW_DAYS + 1, s),
            prefixes: Zipf::new((ADJ.len() + ADJ.len() * NOUN.len()) as u64, s),
        }
    }

    /// Parameters of read `kind`.
    fn params(&self, kind: usize, st: &mut u64) -> Vec<Val> {
        match kind {
            0 => vec![Val::Int(self.products.key(st) as i64)],
            1 => vec![Val::Int(self.customers.key(st) as i64)],
            2 => vec![Val::Int(10 + self.categories.key(st) as i64)],
            3 => {
                // Rank 0 is the newest window.
                let start = DAY0 + (DAYS - WINDOW_DAYS) as i64 - self.windows.rank(st) as i64;
                vec![
                    Val::Str(date(start)),
                    Val::Str(date(start + WINDOW_DAYS as i64)),
                ]
            }
            _ => {
                let k = (self.prefixes.key(st) - 1) as usize;
                let p = if k < ADJ.len() {
                    format!("{}%", ADJ[k])
                } else {
                    let k = k - ADJ.len();
                    format!("{} {}%", ADJ[k % ADJ.len()], NOUN[k / ADJ.len()])
                };
                vec![Val::Str(p)]
            }
        }
    }
}

/// `sql` with each `?` replaced by a literal.
fn inline(sql: &str, params: &[Val]) -> String {
    let mut out = String::with_capacity(sql.len() + 32);
    let mut it = params.iter();
    for ch in sql.chars() {
        if ch == '?' {
            match it.next() {
                Some(Val::Int(i)) => out.push_str(&i.to_string()),
                Some(Val::Str(s)) => {
                    out.push('\'');
                    for c in s.chars() {
                        if c == '\'' || c == '\\' {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push('\'');
                }
                None => out.push('?'),
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// COM_STMT_EXECUTE with typed parameters (LONGLONG, VAR_STRING).
fn execute(id: u32, params: &[Val]) -> Vec<u8> {
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    if !params.is_empty() {
        e.extend(std::iter::repeat_n(0u8, params.len().div_ceil(8)));
        e.push(1);
        for p in params {
            e.extend_from_slice(match p {
                Val::Int(_) => &[0x08, 0],
                Val::Str(_) => &[0xfd, 0],
            });
        }
        for p in params {
            match p {
                Val::Int(i) => e.extend_from_slice(&i.to_le_bytes()),
                Val::Str(s) => {
                    // Every string here is shorter than 251 bytes: a one-byte length.
                    e.push(s.len() as u8);
                    e.extend_from_slice(s.as_bytes());
                }
            }
        }
    }
    e
}

/// Per-kind latencies (µs) and errors of the measured window.
#[derive(Default)]
struct Stats {
    lat: [Vec<u32>; 7],
    errors: [u64; 7],
    statements: u64,
}

/// One connection's way of sending statements.
struct Conn {
    raw: Raw,
    /// Statement ids when prepared, by SQL index.
    stmts: Option<Vec<u32>>,
}

impl Conn {
    /// Sends statement `i` with `params`; Ok(last insert id) or Err on an error reply.
    async fn exec(&mut self, i: usize, params: &[Val]) -> Result<u64, ()> {
        match &self.stmts {
            Some(ids) => self.raw.send(0, &execute(ids[i], params)).await,
            None => {
                let mut p = vec![com::QUERY];
                p.extend_from_slice(inline(sql(i), params).as_bytes());
                self.raw.send(0, &p).await;
            }
        }
        let mut r = Response::new(Expect::Results, self.raw.deprecate_eof());
        let mut last: Option<Packet> = None;
        loop {
            let p = self
                .raw
                .read()
                .await
                .expect("the server closed mid-response");
            match r.feed(&p.payload).expect("well-formed response") {
                Step::More => {}
                Step::Done => {
                    last = Some(p);
                    break;
                }
                Step::LocalInfile => panic!("unexpected LOCAL INFILE request"),
            }
            last.replace(p);
        }
        if r.error {
            if let Some(p) = last {
                eprintln!(
                    "shopload: error: {}",
                    String::from_utf8_lossy(p.payload.get(3..).unwrap_or_default())
                );
            }
            return Err(());
        }
        // An OK packet: 0x00, affected rows, last insert id.
        let id = last
            .filter(|p| p.payload.first() == Some(&0))
            .and_then(|p| {
                let (_, n) = read_lenenc(&p.payload[1..])?;
                read_lenenc(&p.payload[1 + n..]).map(|(v, _)| v)
            })
            .unwrap_or(0);
        Ok(id)
    }
}

#[allow(clippy::too_many_arguments)]
async fn client(
    addr: String,
    user: String,
    db: String,
    prepared: bool,
    keys: Rc<Keys>,
    mix: Rc<Vec<f64>>,
    write_frac: f64,
    seed: u64,
    measure: Instant,
    until: Instant,
    stats: Rc<RefCell<Stats>>,
) {
    let raw = Raw::connect(&addr, &user, &db, true).await;
    let mut c = Conn { raw, stmts: None };
    if prepared {
        let mut ids = Vec::new();
        for i in 0..SQL.len() {
            let mut p = vec![com::STMT_PREPARE];
            p.extend_from_slice(sql(i).as_bytes());
            let (_, resp) = c.raw.command(&p, Expect::Prepare).await;
            ids.push(resp.prepared.expect("prepare failed").0);
        }
        c.stmts = Some(ids);
    }
    let mut st = seed;
    loop {
        let t0 = Instant::now();
        if t0 >= until {
            break;
        }
        let kind = if unit(&mut st) < write_frac {
            if next(&mut st).is_multiple_of(2) {
                ORDER
            } else {
                STOCK
            }
        } else {
            let u = unit(&mut st);
            mix.iter().position(|&c| u < c).unwrap_or(READS - 1)
        };
        let (ok, n) = match kind {
            ORDER => {
                let cust = keys.customers.key(&mut st) as i64;
                let secs = next(&mut st) % 86_400;
                let at = format!(
                    "{} {:02}:{:02}:{:02}",
                    date(DAY0 + DAYS as i64 - 1),
                    secs / 3600,
                    secs / 60 % 60,
                    secs % 60
                );
                let price = Val::Str(format!("{}.99", 5 + next(&mut st) % 90));
                match c
                    .exec(ORDER, &[Val::Int(cust), Val::Str(at), price.clone()])
                    .await
                {
                    Ok(id) => {
                        let prod = keys.products.key(&mut st) as i64;
                        let params = [Val::Int(id as i64), Val::Int(prod), price];
                        (c.exec(ITEM_SQL, &params).await.is_ok(), 2)
                    }
                    Err(()) => (false, 1),
                }
            }
            STOCK => {
                let prod = keys.products.key(&mut st) as i64;
                (c.exec(STOCK, &[Val::Int(prod)]).await.is_ok(), 1)
            }
            read => {
                let params = keys.params(read, &mut st);
                (c.exec(read, &params).await.is_ok(), 1)
            }
        };
        if t0 >= measure {
            let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
            let mut s = stats.borrow_mut();
            s.lat[kind].push(us);
            s.statements += n;
            if !ok {
                s.errors[kind] += 1;
            }
        }
    }
}

/// The server's cache hits so far: qcache's SHOW QCACHE STATUS, else MariaDB's Qcache_hits.
async fn hits(raw: &mut Raw) -> u64 {
    for sql in [
        "SHOW QCACHE STATUS",
        "SHOW GLOBAL STATUS LIKE 'Qcache_hits'",
    ] {
        let (packets, r) = raw.query(sql).await;
        if r.error {
            continue;
        }
        for p in &packets {
            let Some((name, n)) = read_lenenc_str(&p.payload) else {
                continue;
            };
            if name == b"Qcache_hits" {
                if let Some((v, _)) = read_lenenc_str(&p.payload[n..]) {
                    return std::str::from_utf8(v)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    0
}

/// utime + stime of a process, in seconds.
fn cpu_secs(pid: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = &s[s.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    // CLK_TCK is 100 on every Linux this runs on.
    ticks / 100.0
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

fn line(name: &str, lat: &mut [u32], errors: u64, secs: f64) {
    lat.sort_unstable();
    println!(
        "{name} {} {:.0} {:.3} {:.3} {:.3} {errors}",
        lat.len(),
        lat.len() as f64 / secs,
        pct(lat, 0.50),
        pct(lat, 0.95),
        pct(lat, 0.99)
    );
}

/// What `reset` sends: every order is a new order past `prepare`'s ids (AUTO_INCREMENT), so
/// deleting by id restores the stated size; the statistics are taken again as `prepare` took
/// them, so that the optimizer plans as it did on the fresh shop.
fn reset_sql(s: &Size, db: &str) -> Vec<String> {
    vec![
        format!(
            "DELETE FROM `{db}`.order_items WHERE order_id > {}",
            s.orders
        ),
        format!("DELETE FROM `{db}`.orders WHERE id > {}", s.orders),
        format!("ANALYZE TABLE `{db}`.orders, `{db}`.order_items"),
    ]
}

/// Sends `sqls` one by one, printing each one's time; any error ends the process.
async fn send_all(what: &str, addr: &str, user: &str, sqls: Vec<String>) {
    let mut raw = Raw::connect(addr, user, "information_schema", true).await;
    for sql in sqls {
        let t = Instant::now();
        let (packets, r) = raw.query(&sql).await;
        if r.error {
            let msg = packets.last().map(|p| {
                String::from_utf8_lossy(p.payload.get(3..).unwrap_or_default()).into_owned()
            });
            eprintln!("shopload {what}: {sql}\n  failed: {msg:?}");
            std::process::exit(1);
        }
        let head: String = sql.chars().take(50).collect();
        eprintln!(
            "shopload {what}: {:>6.2} s  {head}…",
            t.elapsed().as_secs_f64()
        );
    }
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    match cli.cmd {
        Cmd::Prepare(s) => local.block_on(
            &rt,
            send_all("prepare", &s.addr, &s.user, prepare_sql(&s.size, &s.db)),
        ),
        Cmd::Reset(s) => local.block_on(
            &rt,
            send_all("reset", &s.addr, &s.user, reset_sql(&s.size, &s.db)),
        ),
        Cmd::Run {
            addr,
            user,
            db,
            size,
            conns,
            warmup,
            secs,
            write_pct,
            mix,
            zipf,
            ps,
            dashboard,
            product,
            server_pid,
            backend_pid,
            seed,
        } => {
            assert!(
                matches!(product.as_str(), "page" | "stats"),
                "--product: page or stats"
            );
            STATS.store(product == "stats", std::sync::atomic::Ordering::Relaxed);
            assert!(
                matches!(dashboard.as_str(), "status" | "daily"),
                "--dashboard: status or daily"
            );
            DAILY.store(dashboard == "daily", std::sync::atomic::Ordering::Relaxed);
            let weights: Vec<f64> = mix
                .split(',')
                .map(|w| w.trim().parse().expect("--mix: five numbers"))
                .collect();
            assert_eq!(weights.len(), READS, "--mix: five weights");
            let total: f64 = weights.iter().sum();
            assert!(total > 0.0, "--mix: some weight must be positive");
            let cum: Vec<f64> = weights
                .iter()
                .scan(0.0, |acc, w| {
                    *acc += w / total;
                    Some(*acc)
                })
                .collect();
            let prepared = match ps.as_str() {
                "text" => false,
                "prepared" => true,
                other => panic!("--ps: text or prepared, not {other}"),
            };
            let keys = Rc::new(Keys::new(&size, zipf));
            let mix = Rc::new(cum);
            let stats = Rc::new(RefCell::new(Stats::default()));
            let pid = server_pid.map(|p| p.to_string());
            let backend = backend_pid.map(|p| p.to_string());
            let (measured, hit_delta, server_cpu, backend_cpu, client_cpu, load) =
                local.block_on(&rt, async {
                    let mut admin = Raw::connect(&addr, &user, &db, true).await;
                    let start = Instant::now();
                    let measure = start + Duration::from_secs(warmup);
                    let until = measure + Duration::from_secs(secs);
                    let mut tasks = Vec::new();
                    for i in 0..conns {
                        tasks.push(tokio::task::spawn_local(client(
                            addr.clone(),
                            user.clone(),
                            db.clone(),
                            prepared,
                            keys.clone(),
                            mix.clone(),
                            write_pct / 100.0,
                            seed.wrapping_mul(0x1000_0000_01b3) ^ (i << 32) ^ 0x5eed,
                            measure,
                            until,
                            stats.clone(),
                        )));
                    }
                    tokio::time::sleep_until(measure.into()).await;
                    let load = std::fs::read_to_string("/proc/loadavg")
                        .unwrap_or_default()
                        .split_whitespace()
                        .next()
                        .unwrap_or("?")
                        .to_string();
                    let h0 = hits(&mut admin).await;
                    let s0 = pid.as_deref().map_or(f64::NAN, cpu_secs);
                    let b0 = backend.as_deref().map_or(f64::NAN, cpu_secs);
                    let c0 = cpu_secs("self");
                    let m0 = Instant::now();
                    tokio::time::sleep_until(until.into()).await;
                    let s1 = pid.as_deref().map_or(f64::NAN, cpu_secs);
                    let b1 = backend.as_deref().map_or(f64::NAN, cpu_secs);
                    let c1 = cpu_secs("self");
                    let measured = m0.elapsed().as_secs_f64();
                    for t in tasks {
                        t.await.expect("a connection failed");
                    }
                    let h1 = hits(&mut admin).await;
                    (
                        measured,
                        h1.saturating_sub(h0),
                        s1 - s0,
                        b1 - b0,
                        c1 - c0,
                        load,
                    )
                });
            let mut s = stats.borrow_mut();
            println!(
                "# kind requests per_s p50_ms p95_ms p99_ms errors ({secs} s, {conns} conns, \
                 {ps}, {write_pct}% writes, mix {mix:?}, zipf {zipf})",
                mix = weights
            );
            let mut reads = Vec::new();
            let mut writes = Vec::new();
            let mut all = Vec::new();
            let mut errs = [0u64; 3];
            for (k, name) in KINDS.iter().enumerate() {
                let e = s.errors[k];
                if k < READS {
                    reads.extend_from_slice(&s.lat[k]);
                    errs[0] += e;
                } else {
                    writes.extend_from_slice(&s.lat[k]);
                    errs[1] += e;
                }
                all.extend_from_slice(&s.lat[k]);
                errs[2] += e;
                let mut lat = std::mem::take(&mut s.lat[k]);
                line(name, &mut lat, e, measured);
            }
            let n_reads = reads.len();
            line("reads", &mut reads, errs[0], measured);
            line("writes", &mut writes, errs[1], measured);
            line("all", &mut all, errs[2], measured);
            println!(
                "statements {} {:.0}",
                s.statements,
                s.statements as f64 / measured
            );
            println!(
                "hit_ratio {:.3}",
                if n_reads > 0 {
                    hit_delta as f64 / n_reads as f64
                } else {
                    f64::NAN
                }
            );
            let per = |cpu: f64| cpu * 1e6 / s.statements.max(1) as f64;
            println!("server_cpu_us_per_statement {:.1}", per(server_cpu));
            println!("backend_cpu_us_per_statement {:.1}", per(backend_cpu));
            println!("client_cpu_us_per_statement {:.1}", per(client_cpu));
            println!("load1 {load}");
        }
    }
}
