//! The statements after a hit see what they would have seen (issue #17, section 6): the
//! server's diagnostics (warnings, errors, FOUND_ROWS(), ROW_COUNT()) after a SELECT served
//! from the cache, and qcache's own variables, compared with the server directly.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Row};

/// One step: the connection (`root`, or `name:user` opened as `user{u}` with password `pw`;
/// a `!` prefix opens it straight to the server in every run) and the statement.
/// `sleep N` pauses N ms.
type Step = (&'static str, &'static str);

type Outcome = Result<Vec<Vec<String>>, String>;

struct Run<'a> {
    schema: &'a str,
    suffix: String,
    proxy: Option<&'a common::TestProxy>,
    conns: HashMap<String, Conn>,
}

impl Run<'_> {
    fn fill(&self, s: &str) -> String {
        s.replace("{db}", self.schema).replace("{u}", &self.suffix)
    }

    async fn conn(&mut self, spec: &str) -> &mut Conn {
        if !self.conns.contains_key(spec) {
            let direct = spec.starts_with('!');
            let spec_t = spec.trim_start_matches('!');
            let (user, pw) = match spec_t.split_once(':') {
                Some((_, u)) => (self.fill(u), "pw".to_string()),
                None => ("root".to_string(), String::new()),
            };
            let d = common::db();
            let addr = match (self.proxy, direct) {
                (Some(p), false) => p.addr.to_string(),
                _ => d.addr(),
            };
            let auth = if pw.is_empty() {
                user
            } else {
                format!("{user}:{pw}")
            };
            // No default database: a user without privileges on it could not connect at all.
            let url = format!("mysql://{auth}@{addr}/?prefer_socket=false");
            let c = Conn::from_url(url)
                .await
                .unwrap_or_else(|e| panic!("connect {spec}: {e}"));
            self.conns.insert(spec.to_string(), c);
        }
        self.conns.get_mut(spec).unwrap()
    }

    async fn step(&mut self, who: &str, sql: &str) -> Outcome {
        if let Some(ms) = sql.strip_prefix("sleep ") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            return Ok(Vec::new());
        }
        let sql = self.fill(sql);
        let c = self.conn(who).await;
        // `P …`: through the binary protocol.
        let res = match sql.strip_prefix("P ") {
            Some(sql) => c.exec::<Row, _, _>(sql, ()).await,
            None => c.query::<Row, _>(sql).await,
        };
        match res {
            Ok(rows) => Ok(rows
                .into_iter()
                .map(|r| r.unwrap().into_iter().map(|v| format!("{v:?}")).collect())
                .collect()),
            Err(mysql_async::Error::Server(e)) => Err(format!("{} {}", e.code, e.message)),
            Err(e) => panic!("{who}: {e}"),
        }
    }
}

async fn run(schema: &str, steps: &[Step], proxy: Option<&common::TestProxy>) -> Vec<Outcome> {
    let mut r = Run {
        schema,
        suffix: common::unique_name("u"),
        proxy,
        conns: HashMap::new(),
    };
    let mut out = Vec::new();
    for (who, sql) in steps {
        // Names are the run's own; errors are compared with them put back.
        let o = r.step(who, sql).await;
        out.push(o.map_err(|e| e.replace(&r.suffix, "{u}").replace(schema, "{db}")));
    }
    for (_, c) in r.conns.drain() {
        let _ = c.disconnect().await;
    }
    out
}

/// Runs `steps` directly and through a fresh qcache (tweaked), and compares step by step.
async fn differential(
    prefix: &str,
    steps: &[Step],
    tweak: impl FnOnce(&mut qcache::config::Config),
) {
    let schema = common::fresh_schema(prefix).await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (a INT, b INT)").await.unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
        .await
        .unwrap();
    d.query_drop("CREATE TABLE u (a INT)").await.unwrap();
    let want = run(&schema, steps, None).await;
    let proxy = common::proxy(tweak).await;
    let got = run(&schema, steps, Some(&proxy)).await;
    for (i, ((who, sql), (w, g))) in steps.iter().zip(want.iter().zip(&got)).enumerate() {
        assert_eq!(
            g, w,
            "step {i} ({who}: {sql}): through qcache (left) differs from the server (right)"
        );
    }
    proxy.shutdown().await;
}

fn steps(body: &[Step]) -> Vec<Step> {
    body.to_vec()
}

#[tokio::test]
async fn warnings_and_errors_after_a_hit_are_the_selects() {
    let s = steps(&[
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT CAST('x' AS INT)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW WARNINGS"),
        ("c", "SELECT CAST('x' AS INT)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW COUNT(*) WARNINGS"),
        ("c", "SELECT CAST('x' AS INT)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT @@warning_count, @@error_count"),
        ("c", "SELECT * FROM {db}.no_such_table"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW ERRORS"),
        ("c", "SELECT * FROM {db}.no_such_table"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW COUNT(*) ERRORS"),
        ("c", "SELECT * FROM {db}.no_such_table"),
        ("c", "P SELECT a FROM {db}.t ORDER BY a"),
        ("c", "P SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT @@error_count"),
    ]);
    differential("dg_warn", &s, |_| {}).await;
}

#[tokio::test]
async fn found_rows_and_row_count_after_a_hit_are_the_selects() {
    let s = steps(&[
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "INSERT INTO {db}.u VALUES (1), (2), (3)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT FOUND_ROWS(), ROW_COUNT()"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1"),
        ("c", "SELECT FOUND_ROWS()"),
        // An offset counts the rows it skipped.
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1, 1"),
        ("c", "SELECT 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1, 1"),
        ("c", "SELECT FOUND_ROWS()"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1 OFFSET 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1 OFFSET 1"),
        ("c", "SELECT FOUND_ROWS()"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 5, 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 5, 1"),
        ("c", "SELECT FOUND_ROWS()"),
        // A write after a hit: its own ROW_COUNT(), the hit's FOUND_ROWS().
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "INSERT INTO {db}.u VALUES (4)"),
        ("c", "SELECT FOUND_ROWS(), ROW_COUNT()"),
        // Prepared.
        ("c", "P SELECT a FROM {db}.t WHERE a > 0 ORDER BY a"),
        ("c", "INSERT INTO {db}.u VALUES (1), (2), (3)"),
        ("c", "P SELECT a FROM {db}.t WHERE a > 0 ORDER BY a"),
        ("c", "P SELECT FOUND_ROWS(), ROW_COUNT()"),
    ]);
    differential("dg_found", &s, |_| {}).await;
}
