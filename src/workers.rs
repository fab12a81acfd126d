//! The session runtimes: single-threaded tokio runtimes (one per core, or `server.workers`),
//! each running the sessions handed to it whole, so that a session's client and upstream
//! sockets are polled by the thread that runs it.
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

static WORKERS: OnceLock<Workers> = OnceLock::new();

/// Starts `n` session threads (0: one per usable core) unless they are already running.
/// They live as long as the process: every proxy started in it (tests start many) shares
/// them, as they share the cores, so only the first start's count counts.
pub fn start(n: usize) {
    let want = if n == 0 { per_core() } else { n };
    let have = workers_with(|| want).handles.len();
    if have != want {
        tracing::warn!(
            running = have,
            configured = want,
            "session threads were already started; server.workers applies after a restart"
        );
    }
}

fn per_core() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `n` is asked only when the threads are first started: `available_parallelism` reads
/// cgroup files, which `next` must not do for every accepted connection.
fn workers_with(n: impl FnOnce() -> usize) -> &'static Workers {
    WORKERS.get_or_init(|| Workers {
        handles: (0..n()).map(start_worker).collect(),
        next: AtomicUsize::new(0),
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
    let w = workers_with(per_core);
    let i = w.next.fetch_add(1, Ordering::Relaxed) % w.handles.len();
    &w.handles[i]
}
