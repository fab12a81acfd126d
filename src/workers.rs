//! The session runtimes (single-threaded tokio runtimes, one per core or `server.workers`)
//! and where each session runs on them: placed by load when it connects, moved between
//! commands when its worker is saturated and another has room, gathered back onto one
//! worker when the load is light (`server.placement`).
//!
//! Why not the multi-threaded runtime: a relayed query is two reads and two writes, and on
//! that runtime most of them woke a task that another worker then stole, one futex wake and
//! one context switch per hop. Measured on 2 cores with sysbench point selects relayed, that
//! was about one futex call per query. A session pinned to one thread needs none.
//!
//! Why by load, not round-robin: sessions dealt out evenly leave each worker with less work
//! than it could do, so each runs out of ready sockets and sleeps, and is woken for the next
//! request: 0.4 context switches per hit at 50 connections from one client, against none
//! for one worker carrying them all (docs/benchmarks.md O5). So sessions fill one worker
//! until it is saturated, and a second one opens only while the machine has a core to give
//! it (another worker on a core the clients already use would only take turns with them).
//! A session moves only between commands, with nothing owed on either leg, and only on
//! plain legs (a TLS leg's state stays where it was made).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Handle};

/// How sessions are given to the session threads (`server.placement`).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// By load: one thread carries every session until it is saturated; more open while
    /// the machine has a core to spare, and sessions move between commands to even them;
    /// when the load is light they gather back on one.
    #[default]
    Load,
    /// Dealt out in turn at connect, never moved.
    RoundRobin,
}

/// At or above this share of its time running, a worker is saturated: new sessions go
/// elsewhere if there is room, and some of its sessions are asked to move.
const SATURATED: f64 = 0.8;
/// Below this share a worker has room to take moved sessions.
const ROOM: f64 = 0.5;
/// Open workers busy less than this in all gather onto the first: one worker carries it
/// with no cross-thread wake-ups, and stays under [`SATURATED`] (no flapping).
const GATHER: f64 = 0.4;
/// A worker with no sessions opens only when the machine has this much of a core idle.
const SPARE_CORES: f64 = 0.5;
/// How often the load is read and the plan renewed.
const TICK: Duration = Duration::from_millis(100);

struct Worker {
    handle: Handle,
    load: Load,
}

/// One worker's counters, written by its thread's park hooks and its sessions, read by the
/// planner. Aligned so that two workers' counters never share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct Load {
    /// Nanoseconds the thread ran, summed at each park.
    ran_ns: AtomicU64,
    /// When the thread last woke (nanoseconds since [`epoch`]); 0 while it sleeps.
    woke_at: AtomicU64,
    sessions: AtomicUsize,
    /// Sessions asked to leave this worker, and where to.
    leave: AtomicUsize,
    leave_to: AtomicUsize,
}

struct Workers {
    workers: Vec<Worker>,
    placement: Placement,
    next: AtomicUsize,
    /// Where the next session goes (by load).
    place: AtomicUsize,
}

static WORKERS: OnceLock<Workers> = OnceLock::new();

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    // Never 0, which means "asleep".
    epoch().elapsed().as_nanos() as u64 | 1
}

/// Starts `n` session threads (0: one per usable core) unless they are already running.
/// They live as long as the process: every proxy started in it (tests start many) shares
/// them, as they share the cores, so only the first start's count and placement count.
pub fn start(n: usize, placement: Placement) {
    let want = if n == 0 { per_core() } else { n };
    let have = workers_with(|| (want, placement)).workers.len();
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
/// cgroup files, which placing a session must not do.
fn workers_with(n: impl FnOnce() -> (usize, Placement)) -> &'static Workers {
    WORKERS.get_or_init(|| {
        let (n, placement) = n();
        let w = Workers {
            workers: (0..n).map(start_worker).collect(),
            placement,
            next: AtomicUsize::new(0),
            place: AtomicUsize::new(0),
        };
        if n > 1 && placement == Placement::Load {
            std::thread::Builder::new()
                .name("qcache-placement".into())
                .spawn(planner)
                .expect("cannot start the placement thread");
        }
        w
    })
}

fn start_worker(i: usize) -> Worker {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("qcache-worker-{i}"))
        .spawn(move || {
            let rt = Builder::new_current_thread()
                .enable_all()
                .on_thread_unpark(move || woke(i))
                .on_thread_park(move || parking(i))
                .build()
                .expect("cannot build a session runtime");
            let _ = tx.send(rt.handle().clone());
            // Spawned sessions run while this waits forever.
            rt.block_on(std::future::pending::<()>());
        })
        .expect("cannot start a session thread");
    let handle = rx.recv().expect("session runtime did not start");
    Worker {
        handle,
        load: Load::default(),
    }
}

fn load(i: usize) -> Option<&'static Load> {
    Some(&WORKERS.get()?.workers.get(i)?.load)
}

fn woke(i: usize) {
    if let Some(l) = load(i) {
        l.woke_at.store(now_ns(), Ordering::Relaxed);
    }
}

fn parking(i: usize) {
    if let Some(l) = load(i) {
        let woke = l.woke_at.swap(0, Ordering::Relaxed);
        if woke != 0 {
            l.ran_ns
                .fetch_add(now_ns().saturating_sub(woke), Ordering::Relaxed);
        }
    }
}

static MOVES: AtomicU64 = AtomicU64::new(0);

/// Sessions moved from one session thread to another since the process started.
pub fn moves() -> u64 {
    MOVES.load(Ordering::Relaxed)
}

/// Sessions on each session thread now (empty before any started).
pub fn sessions_per_worker() -> Vec<usize> {
    WORKERS.get().map_or_else(Vec::new, |w| {
        w.workers
            .iter()
            .map(|wk| wk.load.sessions.load(Ordering::Relaxed))
            .collect()
    })
}

/// A session's place on a worker: counted there while it lives, moved with it.
pub struct Seat {
    index: usize,
}

impl Seat {
    /// The runtime this seat is on.
    pub fn handle(&self) -> &'static Handle {
        &workers_with(defaults).workers[self.index].handle
    }

    /// Where this session should go now, if it was asked to leave its worker. Called by
    /// the session between commands; a relaxed load when nothing is asked.
    #[inline]
    pub fn asked_to_leave(&self) -> Option<usize> {
        let w = WORKERS.get()?;
        #[cfg(debug_assertions)]
        if SHUFFLE.load(Ordering::Relaxed) && w.workers.len() > 1 {
            return Some((self.index + 1) % w.workers.len());
        }
        let l = &w.workers.get(self.index)?.load;
        if l.leave.load(Ordering::Relaxed) == 0 {
            return None;
        }
        l.leave
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .ok()?;
        let to = l.leave_to.load(Ordering::Relaxed);
        (to != self.index && to < w.workers.len()).then_some(to)
    }

    /// Counts the session on worker `to` from now on.
    pub fn move_to(&mut self, to: usize) {
        MOVES.fetch_add(1, Ordering::Relaxed);
        let w = workers_with(defaults);
        w.workers[self.index]
            .load
            .sessions
            .fetch_sub(1, Ordering::Relaxed);
        w.workers[to].load.sessions.fetch_add(1, Ordering::Relaxed);
        self.index = to;
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let w = workers_with(defaults);
        w.workers[self.index]
            .load
            .sessions
            .fetch_sub(1, Ordering::Relaxed);
    }
}

fn defaults() -> (usize, Placement) {
    (per_core(), Placement::Load)
}

/// A seat for a new session: on the worker the load says, or the next in turn.
pub fn seat() -> Seat {
    let w = workers_with(defaults);
    let n = w.workers.len();
    let index = match w.placement {
        Placement::RoundRobin => w.next.fetch_add(1, Ordering::Relaxed) % n,
        Placement::Load => w.place.load(Ordering::Relaxed).min(n - 1),
    };
    w.workers[index]
        .load
        .sessions
        .fetch_add(1, Ordering::Relaxed);
    Seat { index }
}

/// Runs `f` on `runtime` and waits for it; `None` if it panicked. Dropping the wait (a fast
/// stop aborts the session's first task) aborts it there too.
pub async fn run_on<T: Send + 'static>(
    runtime: &Handle,
    f: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);
    impl<T> Drop for AbortOnDrop<T> {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mut task = AbortOnDrop(runtime.spawn(f));
    (&mut task.0).await.ok()
}

/// Debug builds: every session moves to the next worker after every command, so that a
/// test can show a move changes no answer.
#[cfg(debug_assertions)]
static SHUFFLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(debug_assertions)]
pub fn shuffle_sessions(on: bool) {
    SHUFFLE.store(on, Ordering::Relaxed);
}

/// One worker as the planner saw it over the last tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Share of the tick its thread ran (0 to 1).
    pub busy: f64,
    pub sessions: usize,
}

/// What the planner decided: where new sessions go, and which sessions move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub place: usize,
    /// `(from, to, how many)`.
    pub moves: Option<(usize, usize, usize)>,
}

/// The placement rule. A worker is open when it has sessions (the first always is). New
/// sessions go to the first open worker that is not saturated; when all are, to a closed
/// one if the machine has a core to spare for it, else to the least busy. The most busy
/// saturated worker sheds enough sessions to even it with the place if the place has room;
/// when open workers are light in all, the last one's sessions gather onto the first.
pub fn plan(w: &[Sample], spare_cores: f64) -> Plan {
    let open = |i: usize| i == 0 || w[i].sessions > 0;
    let least_busy = (0..w.len())
        .filter(|&i| open(i))
        .min_by(|&a, &b| w[a].busy.total_cmp(&w[b].busy))
        .unwrap_or(0);
    let place = (0..w.len())
        .find(|&i| open(i) && w[i].busy < SATURATED)
        .or_else(|| (0..w.len()).find(|&i| !open(i) && spare_cores >= SPARE_CORES))
        .unwrap_or(least_busy);
    let saturated = (0..w.len())
        .filter(|&i| w[i].busy >= SATURATED && w[i].sessions >= 2)
        .max_by(|&a, &b| w[a].busy.total_cmp(&w[b].busy));
    if let Some(from) = saturated {
        let to = place;
        if to != from && w[to].busy < ROOM {
            // Sessions assumed alike: move the share that evens the two.
            let share = (w[from].busy - w[to].busy) / (2.0 * w[from].busy);
            let n =
                ((w[from].sessions as f64 * share).round() as usize).clamp(1, w[from].sessions / 2);
            return Plan {
                place,
                moves: Some((from, to, n)),
            };
        }
        return Plan { place, moves: None };
    }
    let open_ones: Vec<usize> = (0..w.len()).filter(|&i| w[i].sessions > 0).collect();
    let total: f64 = open_ones.iter().map(|&i| w[i].busy).sum();
    if let (Some(&first), Some(&last)) = (open_ones.first(), open_ones.last()) {
        if first != last && total < GATHER {
            return Plan {
                place: first,
                moves: Some((last, first, w[last].sessions)),
            };
        }
    }
    Plan { place, moves: None }
}

/// The planner's thread: each tick, reads each worker's running time and the machine's
/// idle time, and publishes the plan.
fn planner() {
    let w = workers_with(defaults);
    let mut ran: Vec<u64> = vec![0; w.workers.len()];
    let mut cpu: Option<MachineIdle> = None;
    // Whether /proc/stat could be read; without it (no procfs) a core is assumed to spare,
    // as round-robin would.
    let mut proc_stat = MachineIdle::read().is_some();
    let mut last = Instant::now();
    loop {
        std::thread::sleep(TICK);
        let elapsed = last.elapsed().as_nanos().max(1) as f64;
        last = Instant::now();
        let now = now_ns();
        let samples: Vec<Sample> = w
            .workers
            .iter()
            .zip(ran.iter_mut())
            .map(|(wk, prev)| {
                let l = &wk.load;
                let woke = l.woke_at.load(Ordering::Relaxed);
                let running = if woke == 0 {
                    0
                } else {
                    now.saturating_sub(woke)
                };
                let total = l.ran_ns.load(Ordering::Relaxed) + running;
                let busy = total.saturating_sub(*prev) as f64 / elapsed;
                *prev = total;
                Sample {
                    busy: busy.clamp(0.0, 1.0),
                    sessions: l.sessions.load(Ordering::Relaxed),
                }
            })
            .collect();
        // The machine's idle time matters only to open a worker, which only a saturated
        // one asks for: read while one is, so that a quiet proxy reads no file each tick.
        // The first tick of saturation has no earlier reading and opens nothing.
        let spare = if samples.iter().any(|s| s.busy >= SATURATED) {
            let next = MachineIdle::read();
            let spare = match (&cpu, &next, proc_stat) {
                (Some(a), Some(b), _) => b.idle_cores_since(a),
                (None, None, false) => f64::INFINITY,
                _ => 0.0,
            };
            proc_stat = next.is_some();
            cpu = next;
            spare
        } else {
            cpu = None;
            0.0
        };
        let p = plan(&samples, spare);
        w.place.store(p.place, Ordering::Relaxed);
        for (i, wk) in w.workers.iter().enumerate() {
            let (n, to) = match p.moves {
                Some((from, to, n)) if from == i => (n, to),
                _ => (0, 0),
            };
            wk.load.leave_to.store(to, Ordering::Relaxed);
            wk.load.leave.store(n, Ordering::Relaxed);
        }
    }
}

/// The machine's CPU time from /proc/stat: idle (with I/O wait) and total, in ticks, and
/// how many CPUs it counts.
struct MachineIdle {
    idle: u64,
    total: u64,
    cpus: usize,
}

impl MachineIdle {
    fn read() -> Option<MachineIdle> {
        MachineIdle::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    fn parse(stat: &str) -> Option<MachineIdle> {
        let mut lines = stat.lines();
        let first = lines.next()?;
        let fields: Vec<u64> = first
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        let cpus = lines
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count();
        Some(MachineIdle {
            idle,
            total: fields.iter().sum(),
            cpus: cpus.max(1),
        })
    }

    /// Cores' worth of idle time between `before` and now.
    fn idle_cores_since(&self, before: &MachineIdle) -> f64 {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            return 0.0;
        }
        self.idle.saturating_sub(before.idle) as f64 / total as f64 * self.cpus as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(busy: f64, sessions: usize) -> Sample {
        Sample { busy, sessions }
    }

    #[test]
    fn where_sessions_go_and_which_move() {
        // (workers, idle cores elsewhere, where new sessions go, what moves)
        type Case = (
            &'static str,
            Vec<Sample>,
            f64,
            usize,
            Option<(usize, usize, usize)>,
        );
        let cases: Vec<Case> = vec![
            (
                "idle: everything on the first",
                vec![s(0.0, 0), s(0.0, 0)],
                2.0,
                0,
                None,
            ),
            (
                "first not saturated: it takes more",
                vec![s(0.7, 50), s(0.0, 0)],
                1.0,
                0,
                None,
            ),
            (
                "first saturated, a core to spare: the second opens and takes half the gap",
                vec![s(0.9, 50), s(0.0, 0)],
                1.0,
                1,
                Some((0, 1, 25)),
            ),
            (
                "first saturated, no core to spare (the client has it): stay on one",
                vec![s(0.95, 50), s(0.0, 0)],
                0.1,
                0,
                None,
            ),
            (
                "both open, the second has room: it takes new ones and some of the first's",
                vec![s(0.9, 30), s(0.3, 10)],
                0.0,
                1,
                Some((0, 1, 10)),
            ),
            (
                "both saturated: new ones to the least busy, nothing moves",
                vec![s(0.95, 30), s(0.85, 30)],
                0.0,
                1,
                None,
            ),
            (
                "light in all: the last open worker gathers onto the first",
                vec![s(0.2, 10), s(0.1, 10)],
                2.0,
                0,
                Some((1, 0, 10)),
            ),
            (
                "a lone session on a saturated worker cannot be split",
                vec![s(1.0, 1), s(0.0, 0)],
                2.0,
                1,
                None,
            ),
            (
                "sessions only on the second (the first's ended): the first takes new ones",
                vec![s(0.0, 0), s(0.5, 8)],
                0.0,
                0,
                None,
            ),
            (
                "never more than half of a worker's sessions in one tick",
                vec![s(1.0, 4), s(0.0, 0)],
                2.0,
                1,
                Some((0, 1, 2)),
            ),
        ];
        for (what, w, spare, place, moves) in cases {
            assert_eq!(plan(&w, spare), Plan { place, moves }, "{what}");
        }
    }

    #[test]
    fn idle_cores_from_proc_stat() {
        let a = MachineIdle::parse(
            "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\nintr 1\n",
        )
        .unwrap();
        let b = MachineIdle::parse(
            "cpu  250 0 150 900 100 0 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\n",
        )
        .unwrap();
        assert_eq!(a.cpus, 2);
        // 400 ticks passed, 200 of them idle or waiting: one core of two.
        assert!((b.idle_cores_since(&a) - 1.0).abs() < 1e-9);
        assert!(MachineIdle::parse("intr 1\n").is_none());
    }
}
