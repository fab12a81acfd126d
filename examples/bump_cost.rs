//! Interleaved measurement of one table invalidation (`Versions::bump`) with no entries cached
//! and with 1,000,000: both caches live in one process and the rounds alternate, so machine
//! noise lands on both alike (criterion's `invalidation` group runs them one after the other).
//!
//! ```sh
//! cargo run --release --example bump_cost            # 15 rounds of 5,000,000 bumps per cache
//! cargo run --release --example bump_cost -- 21 2000000
//! ```
//!
//! Prints each round, then the medians and their ratio (full / empty).

use std::hint::black_box;
use std::time::Instant;

#[path = "../benches/support/mod.rs"]
mod support;

use qcache::cache::{Cache, TableHandle};
use support::cache_with_entries;

/// Nanoseconds per invalidation over `n` of them: by handle (what a session holding the
/// analysed tables does), then by name (what the binlog tail and admin commands do).
#[inline(never)]
fn bumps(cache: &Cache, t: &TableHandle, n: u64) -> (f64, f64) {
    let start = Instant::now();
    for _ in 0..n {
        cache.versions().bump(black_box(t));
    }
    let handle = start.elapsed().as_nanos() as f64 / n as f64;
    let start = Instant::now();
    for _ in 0..n / 10 {
        cache
            .versions()
            .bump_name(black_box("shop"), black_box("orders"));
    }
    let name = start.elapsed().as_nanos() as f64 / (n / 10) as f64;
    (handle, name)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(15, |a| a.parse().expect("rounds"));
    let per_round: u64 = args.next().map_or(5_000_000, |a| a.parse().expect("bumps"));
    let empty = cache_with_entries(0);
    let full = cache_with_entries(1_000_000);
    let (mut e, mut f, mut en, mut fname) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which goes first, so neither always follows the other.
        let (a, b) = if r % 2 == 0 {
            let a = bumps(&empty.0, &empty.1, per_round);
            (a, bumps(&full.0, &full.1, per_round))
        } else {
            let b = bumps(&full.0, &full.1, per_round);
            (bumps(&empty.0, &empty.1, per_round), b)
        };
        println!(
            "round {r:2}: bump   0 entries {:6.2} ns, 1000000 entries {:6.2} ns | \
             bump_name   0 entries {:6.2} ns, 1000000 entries {:6.2} ns",
            a.0, b.0, a.1, b.1
        );
        e.push(a.0);
        f.push(b.0);
        en.push(a.1);
        fname.push(b.1);
    }
    for (what, e, f) in [("bump", &mut e, &mut f), ("bump_name", &mut en, &mut fname)] {
        let (me, mf) = (median(e), median(f));
        println!(
            "median {what}: 0 entries {me:.2} ns, 1000000 entries {mf:.2} ns, ratio {:.3}",
            mf / me
        );
    }
}
