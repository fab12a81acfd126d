//! The session runtimes: one single-threaded tokio runtime per core, each running the
//! sessions handed to it whole, so that a session's client and upstream sockets are polled by
//! the thread that runs it.
//!
//! Why not the multi-threaded runtime: a relayed query is two reads and two writes, and on
//! that runtime most of them woke a task that another worker then stole, one futex wake and
//! one context switch per hop. Measured on 2 cores with sysbench point selects relayed, that
//! was about one futex call per query. A session pinned to one thread needs none; the price
//! is that sessions do not migrate between cores, so connections are dealt out round-robin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};

struct Workers {
    handles: Vec<Handle>,
    next: AtomicUsize,
}

/// Started on first use and kept for the life of the process: every proxy started in this
/// process (tests start many) shares them, as they share the cores.
fn workers() -> &'static Workers {
    static WORKERS: OnceLock<Workers> = OnceLock::new();
    WORKERS.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let handles = (0..n).map(start_worker).collect();
        Workers {
            handles,
            next: AtomicUsize::new(0),
        }
    })
}

fn start_worker(i: usize) -> Handle {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("qcache-worker-{i}"))
        .spawn(move || {
            let rt = Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cannot build a session runtime");
            let _ = tx.send(rt.handle().clone());
            // Spawned sessions run while this waits forever.
            rt.block_on(std::future::pending::<()>());
        })
        .expect("cannot start a session thread");
    rx.recv().expect("session runtime did not start")
}

/// The runtime the next session goes to.
pub fn next() -> &'static Handle {
    let w = workers();
    let i = w.next.fetch_add(1, Ordering::Relaxed) % w.handles.len();
    &w.handles[i]
}
