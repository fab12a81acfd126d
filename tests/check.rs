//! The shipped stale-read checker (`qcache check-consistency`): it passes through a correct
//! qcache (as a library call and as the built binary), and it does catch a cache that serves
//! stale data (a proxy without a binlog tail while every write bypasses it).

mod common;

use std::time::Duration;

use qcache::check::{self, CheckOptions};

/// Options for a short run through `proxy` against the test server.
fn options(target: &str, schema: &str, secs: u64) -> CheckOptions {
    let d = common::db();
    CheckOptions {
        target: target.to_string(),
        direct: Some(d.addr()),
        user: d.user.clone(),
        password: d.password.clone(),
        database: schema.to_string(),
        duration: Duration::from_secs(secs),
        writers: 3,
        readers: 6,
        ..Default::default()
    }
}

/// Waits until the proxy's binlog tail streams, so that direct writes are seen.
async fn binlog_connected(p: &common::TestProxy) {
    let h = p.running.shared.binlog.clone().expect("binlog enabled");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !h.connected() {
        assert!(
            std::time::Instant::now() < deadline,
            "binlog tail did not connect: {:?}",
            h.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_finds_no_stale_reads_through_qcache() {
    let schema = common::fresh_schema("chk_ok").await;
    let proxy = common::proxy(|_| {}).await;
    let o = options(&proxy.addr_string(), &schema, 3);
    let report = tokio::time::timeout(Duration::from_secs(60), check::run(&o))
        .await
        .expect("check run hung")
        .expect("check run could not start");
    println!("{report}");
    assert!(report.passed(), "{report}");
    assert_eq!(report.errors, 0, "{report}");
    assert!(report.reads > 100 && report.writes > 20, "{report}");
    // The run must have exercised the cache, or it proves nothing about it.
    assert!(report.hits.unwrap_or(0) > 0, "{report}");
    proxy.shutdown().await;
}

/// Writes that bypass qcache are seen through the binlog within the allowed lag. The lag is
/// generous because the test machine is shared with builds; docs/reliability.md has the
/// measured figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_finds_no_stale_reads_with_direct_writes_and_binlog() {
    let schema = common::fresh_schema("chk_direct").await;
    let proxy = common::proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::On).await;
    binlog_connected(&proxy).await;
    let mut o = options(&proxy.addr_string(), &schema, 3);
    o.direct_writes = true;
    o.direct_share = 0.5;
    o.allowed_lag = Duration::from_secs(1);
    let report = tokio::time::timeout(Duration::from_secs(60), check::run(&o))
        .await
        .expect("check run hung")
        .expect("check run could not start");
    println!("{report}");
    assert!(report.passed(), "{report}");
    assert!(report.direct_writes > 0, "{report}");
    proxy.shutdown().await;
}

/// The checker is only worth something if it fails a broken cache: a proxy that never hears
/// of direct writes (no binlog) serves what it cached before them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_detects_stale_reads() {
    let schema = common::fresh_schema("chk_stale").await;
    let proxy = common::proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::Off).await;
    let mut o = options(&proxy.addr_string(), &schema, 2);
    o.direct_writes = true;
    o.direct_share = 1.0;
    o.allowed_lag = Duration::ZERO;
    let report = tokio::time::timeout(Duration::from_secs(60), check::run(&o))
        .await
        .expect("check run hung")
        .expect("check run could not start");
    println!("{report}");
    assert!(!report.passed(), "{report}");
    assert!(report.stale_reads > 0, "{report}");
    assert!(!report.stale_examples.is_empty());
    proxy.shutdown().await;
}

/// The shipped command: exit status 0 and a PASS summary through a correct qcache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_consistency_command_passes() {
    let schema = common::fresh_schema("chk_bin").await;
    let proxy = common::proxy(|_| {}).await;
    let d = common::db();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_qcache"));
    cmd.args([
        "check-consistency",
        "--target",
        &proxy.addr_string(),
        "--user",
        &d.user,
        "--password",
        &d.password,
        "--database",
        &schema,
        "--duration",
        "3s",
        "--writers",
        "2",
        "--readers",
        "4",
        "--seed",
        "7",
    ])
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("check-consistency hung")
        .expect("cannot run qcache");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("result:        PASS"), "{stdout}");
    assert!(stdout.contains("stale reads:   0"), "{stdout}");
    proxy.shutdown().await;
}

/// A failing run exits non-zero: the same broken setup as `checker_detects_stale_reads`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_consistency_command_fails_on_stale_reads() {
    let schema = common::fresh_schema("chk_binfail").await;
    let proxy = common::proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::Off).await;
    let d = common::db();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_qcache"));
    cmd.args([
        "check-consistency",
        "--target",
        &proxy.addr_string(),
        "--direct",
        &d.addr(),
        "--user",
        &d.user,
        "--password",
        &d.password,
        "--database",
        &schema,
        "--duration",
        "2s",
        "--direct-writes",
        "--direct-share",
        "1",
        "--allowed-lag",
        "0ms",
    ])
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("check-consistency hung")
        .expect("cannot run qcache");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("FAIL (stale reads)"), "{stdout}");
    proxy.shutdown().await;
}

/// Row slices: the slice-shaped mix (a customer's rows by `=`, IN and a join chain, while
/// rows are inserted, deleted and moved between customers, through qcache and directly
/// through the binlog) finds nothing stale on a correct qcache, and finds stale reads on one
/// whose writes skip their slice bumps (a debug-build switch; there is no such switch in a
/// release build). Both runs are one scenario, so the pass means something.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_slice_mix_passes_and_fails_without_slice_bumps() {
    for broken in [false, true] {
        let schema = common::fresh_schema(if broken { "chk_sl_bad" } else { "chk_sl_ok" }).await;
        let proxy = common::proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::On).await;
        assert_eq!(
            proxy.running.shared.config().invalidation.granularity,
            qcache::config::Granularity::Row
        );
        binlog_connected(&proxy).await;
        proxy
            .running
            .shared
            .cache
            .versions()
            .break_slice_bumps(broken);
        let mut o = options(&proxy.addr_string(), &schema, 3);
        o.slices_only = true;
        o.direct_writes = true;
        o.direct_share = 0.3;
        o.allowed_lag = Duration::from_secs(1);
        let report = tokio::time::timeout(Duration::from_secs(60), check::run(&o))
            .await
            .expect("check run hung")
            .expect("check run could not start");
        println!("slice bumps broken: {broken}\n{report}");
        assert!(report.reads > 100 && report.writes > 20, "{report}");
        assert!(report.direct_writes > 0, "{report}");
        assert!(report.hits.unwrap_or(0) > 0, "{report}");
        if broken {
            assert!(report.stale_reads > 0, "{report}");
            assert!(
                report
                    .stale_examples
                    .iter()
                    .all(|s| s.kind.starts_with("slice")),
                "{report}"
            );
        } else {
            assert!(report.passed(), "{report}");
            assert_eq!(report.errors, 0, "{report}");
        }
        proxy.shutdown().await;
    }
}
