//! What the L2 tests share: an instance's L2 turned on, its status rows, and the waits for
//! L2 to come up and for a condition, so that every L2 test waits for the same thing.

use std::time::{Duration, Instant};

use qcache::config::{Config, L2Mode, L2Url};
use qcache::l2::L2;

use super::TestProxy;

/// L2 on `url`, with a generous timeout: the test machine is loaded, and a slow round trip
/// marks L2 down.
pub fn on(c: &mut Config, url: &str) {
    c.l2.mode = L2Mode::On;
    c.l2.url = L2Url::One(url.to_string());
    c.l2.timeout = Duration::from_millis(500);
}

/// An instance on `url`, `tweak`ed, once its L2 is up.
pub async fn proxy(url: &str, tweak: impl FnOnce(&mut Config)) -> TestProxy {
    let p = super::proxy(|c| {
        on(c, url);
        tweak(c);
    })
    .await;
    wait_up(&p).await;
    p
}

pub fn of(p: &TestProxy) -> &L2 {
    p.running.shared.l2.as_deref().expect("l2 on")
}

/// One of the instance's `Qcache_l2_*` status rows.
pub fn stat(p: &TestProxy, name: &str) -> u64 {
    of(p)
        .status_rows()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no status row {name}"))
}

/// Until L2 is usable, its notification channel subscribed and the binlog tail (if any)
/// streaming.
pub async fn wait_up(p: &TestProxy) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // A binlog tail's first event opens a gap that must be decided before L2 is read.
    let tail_up = || {
        p.running
            .shared
            .binlog
            .as_ref()
            .is_none_or(|b| b.connected())
    };
    while !(tail_up() && of(p).usable() && of(p).notifications_up()) {
        assert!(Instant::now() < deadline, "L2 never came up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
