//! Result sets qcache builds itself (status, session variables) and results it caches must
//! parse for the mariadb command-line client (libmariadb, which negotiates MariaDB's extended
//! type info) as well as for mysql_async. Added after the soak's status sampling with the
//! mariadb client once reported "Received malformed packet" (not reproduced since).

mod common;

use mysql_async::prelude::*;

/// The mariadb client, run off the runtime so that the in-process proxy keeps serving it.
async fn cli(addr: &str, args: &[&str]) -> std::process::Output {
    let addr = addr.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::mariadb_cli(&addr, &args, "")
    })
    .await
    .unwrap()
}

fn ok_stdout(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_answered_and_cached_results_parse_in_the_mariadb_client() {
    let schema = common::fresh_schema("cli_meta").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, j JSON, s VARCHAR(10))")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1, '{\"a\": 1}', 'x')")
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let addr = proxy.addr_string();
    let status = ok_stdout(
        &cli(
            &addr,
            &[
                "--batch",
                "--skip-column-names",
                "-e",
                "SHOW STATUS LIKE 'Qcache_hits'",
            ],
        )
        .await,
    );
    assert!(status.contains("Qcache_hits"), "{status}");
    let qct = ok_stdout(&cli(&addr, &["--batch", "-e", "SELECT @@query_cache_type"]).await);
    assert!(qct.contains("ON"), "{qct}");
    // The same cached result served to both client kinds, in both orders.
    let sql = "SELECT id, j, s FROM t";
    for _ in 0..2 {
        let out = ok_stdout(&cli(&addr, &["--batch", "-D", &schema, "-e", sql]).await);
        assert!(out.contains("{\"a\": 1}"), "{out}");
        let mut c = proxy.conn(&schema).await;
        let rows: Vec<(i64, String, String)> = c.query(sql).await.unwrap();
        assert_eq!(rows, vec![(1, "{\"a\": 1}".to_string(), "x".to_string())]);
    }
    assert!(proxy.running.shared.cache.stats().hits() >= 2);
    proxy.shutdown().await;
}
