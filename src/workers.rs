//! The session runtimes (single-threaded tokio runtimes, one per core or `server.workers`)
//! and where each session runs on them: placed by load when it connects, moved between
//! commands to another worker when a change of how many are open pays, gathered back onto
//! one worker when the load is light (`server.placement`).
//!
//! Why not the multi-threaded runtime: a relayed query is two reads and two writes, and on
//! that runtime most of them woke a task that another worker then stole, one futex wake and
//! one context switch per hop. Measured on 2 cores with sysbench point selects relayed, that
//! was about one futex call per query. A session pinned to one thread needs none.
//!
//! Why by load, not round-robin: sessions dealt out evenly leave each worker with less work
//! than it could do, so each runs out of ready sockets and sleeps, and is woken for the next
//! request: 0.35 context switches per hit at 50 connections from one client, against none
//! for one worker carrying them all (docs/benchmarks.md O6). Whether a second worker pays
//! is not in any share of busy time (on a core the client needs it only takes turns with
//! the client; for a client that waits for each answer it may serve more), so it is tried
//! and judged by the commands served per second ([`Planner`]). A session moves only between
//! commands, with nothing owed on either leg, and only on plain legs (a TLS leg's state
//! stays where it was made).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Handle};

/// How sessions are given to the session threads (`server.placement`).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// By load: one thread carries every session while it can; another opens on trial
    /// when it is busy, and stays only if more is served; sessions move between commands
    /// to even them, and gather back on one when the load is light.
    #[default]
    Load,
    /// Dealt out in turn at connect, never moved.
    RoundRobin,
}

/// At or above this share of its time running, a worker is saturated: new sessions go
/// elsewhere if an open worker has room, and some of its sessions move to one.
const SATURATED: f64 = 0.8;
/// Below this share a worker has room to take moved sessions.
const ROOM: f64 = 0.5;
/// Open workers busy less than this in all gather onto the first: one worker carries it
/// with no cross-thread wake-ups, and stays under [`SATURATED`] (no flapping).
const GATHER: f64 = 0.4;
/// When every open worker is at least this busy, another worker is opened on trial.
const TRY_OPEN: f64 = 0.6;
/// When open workers are busy less than this in all, one could carry them: closing the last
/// is tried.
const TRY_CLOSE: f64 = 0.9;
/// A trial's ticks to let moved sessions settle, then its ticks measured.
const SETTLE: u32 = 3;
const MEASURE: u32 = 5;
/// An opened worker stays if the served rate rose by this share; a closed one stays closed
/// if the rate fell by less.
const GAIN: f64 = 0.03;
/// Ticks before the next trial after one, doubling with each failure in a row, up to the
/// last (5 s to about a minute).
const RETRY: u32 = 50;
const RETRY_MAX: u32 = 600;
/// How often the load is read and the plan renewed.
const TICK: Duration = Duration::from_millis(100);

struct Worker {
    handle: Handle,
    load: Load,
}

/// One worker's counters, written by its sessions, read by the planner (its busy time is
/// the runtime's own, `worker_total_busy_duration`, which tokio keeps anyway). Aligned so
/// that two workers' counters never share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct Load {
    sessions: AtomicUsize,
    /// Commands begun on this worker (written by its own thread only).
    served: AtomicU64,
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

    /// Called by the session before each command: counts it, and says where the session
    /// should go now if it was asked to leave its worker and `may_move`. A relaxed load
    /// when nothing is asked.
    #[inline]
    pub fn between_commands(&self, may_move: bool) -> Option<usize> {
        let w = WORKERS.get()?;
        let l = &w.workers.get(self.index)?.load;
        // Only this worker's thread runs its sessions: no atomic increment needed.
        l.served
            .store(l.served.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if !may_move {
            return None;
        }
        #[cfg(debug_assertions)]
        if SHUFFLE.load(Ordering::Relaxed) && w.workers.len() > 1 {
            return Some((self.index + 1) % w.workers.len());
        }
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

/// What the planner decided for the next tick: where new sessions go, and which move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub place: usize,
    /// `(from, to, how many)`.
    pub moves: Option<(usize, usize, usize)>,
}

/// A change of how many workers are open, on trial: kept only if the served rate says so.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Trial {
    /// Worker `w` opened, with `from`'s sessions to go back to if it does not pay.
    Open { w: usize, from: usize },
    /// Worker `w` closed, its sessions sent to `to`.
    Close { w: usize, to: usize },
}

/// The placement rule, sans IO: fed each tick's samples and served rate, it answers a
/// [`Plan`]. A worker is open when it has sessions (the first always is); new sessions go to
/// the first open worker that is not saturated, else to the least busy. A saturated worker
/// sheds the share of its sessions that evens it with an open worker that has room. Whether
/// one more worker pays cannot be read off busy shares (a second worker on a core the
/// client needs only takes turns with it, and a client that waits for each answer may go
/// faster): so it is tried, and kept only if the served rate rose; closing one is tried the
/// same way when one could carry the load. Trials back off while they fail. Open workers
/// light in all gather onto the first without a trial.
#[derive(Debug, Default)]
pub struct Planner {
    trial: Option<(Trial, f64, u32, f64)>,
    /// Ticks before another trial may start; failures in a row.
    wait: u32,
    failures: u32,
    /// The served rate of the last three ticks.
    rates: [f64; 3],
}

impl Planner {
    pub fn tick(&mut self, w: &[Sample], rate: f64) -> Plan {
        self.rates = [self.rates[1], self.rates[2], rate];
        let base = self.rates.iter().sum::<f64>() / 3.0;
        let open = |i: usize| i == 0 || w[i].sessions > 0;
        let open_ones: Vec<usize> = (0..w.len()).filter(|&i| open(i)).collect();
        let least_busy = |but: usize| {
            open_ones
                .iter()
                .copied()
                .filter(|&i| i != but)
                .min_by(|&a, &b| w[a].busy.total_cmp(&w[b].busy))
        };
        let place = open_ones
            .iter()
            .copied()
            .find(|&i| w[i].busy < SATURATED)
            .or_else(|| least_busy(usize::MAX))
            .unwrap_or(0);
        let plan = |moves| Plan { place, moves };
        if let Some((trial, base, ticks, sum)) = self.trial {
            return plan(self.judge(trial, base, ticks + 1, sum, rate, w));
        }
        self.wait = self.wait.saturating_sub(1);
        let busiest = open_ones
            .iter()
            .copied()
            .max_by(|&a, &b| w[a].busy.total_cmp(&w[b].busy))
            .unwrap_or(0);
        let total: f64 = open_ones.iter().map(|&i| w[i].busy).sum();
        let last = open_ones.last().copied().unwrap_or(0);
        // Light in all: one worker carries it, no trial needed.
        if open_ones.len() > 1 && total < GATHER {
            let first = open_ones[0];
            return Plan {
                place: first,
                moves: Some((last, first, w[last].sessions)),
            };
        }
        // A saturated worker sheds to an open one with room.
        if w[busiest].busy >= SATURATED && w[busiest].sessions >= 2 {
            if let Some(to) = least_busy(busiest).filter(|&t| w[t].busy < ROOM) {
                let share = (w[busiest].busy - w[to].busy) / (2.0 * w[busiest].busy);
                let n = ((w[busiest].sessions as f64 * share).round() as usize)
                    .clamp(1, w[busiest].sessions / 2);
                return plan(Some((busiest, to, n)));
            }
        }
        // A trial is judged against the rate before it: only a steady one (three ticks
        // within a fifth of each other) says what the change did, not a load that starts
        // or stops meanwhile.
        let (lo, hi) = self
            .rates
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        if self.wait > 0 || lo <= 0.0 || hi > lo * 1.2 {
            return plan(None);
        }
        let closed = (0..w.len()).find(|&i| !open(i));
        if let Some(c) = closed {
            if open_ones.iter().all(|&i| w[i].busy >= TRY_OPEN) && w[busiest].sessions >= 2 {
                self.trial = Some((
                    Trial::Open {
                        w: c,
                        from: busiest,
                    },
                    base,
                    0,
                    0.0,
                ));
                return plan(Some((busiest, c, w[busiest].sessions / 2)));
            }
        }
        if open_ones.len() > 1 && total < TRY_CLOSE {
            if let Some(to) = least_busy(last) {
                self.trial = Some((Trial::Close { w: last, to }, base, 0, 0.0));
                return plan(Some((last, to, w[last].sessions)));
            }
        }
        plan(None)
    }

    /// A trial's tick: settling, measuring, or judged (then kept, or undone).
    fn judge(
        &mut self,
        trial: Trial,
        base: f64,
        ticks: u32,
        sum: f64,
        rate: f64,
        w: &[Sample],
    ) -> Option<(usize, usize, usize)> {
        let sum = if ticks > SETTLE { sum + rate } else { sum };
        if ticks < SETTLE + MEASURE {
            self.trial = Some((trial, base, ticks, sum));
            return None;
        }
        self.trial = None;
        let mean = sum / f64::from(MEASURE);
        let kept = match trial {
            Trial::Open { .. } => mean >= base * (1.0 + GAIN),
            Trial::Close { .. } => mean >= base * (1.0 - GAIN),
        };
        if kept {
            self.failures = 0;
            self.wait = RETRY;
            return None;
        }
        self.failures += 1;
        self.wait = RETRY
            .saturating_mul(1 << self.failures.min(4))
            .min(RETRY_MAX);
        match trial {
            Trial::Open { w: opened, from } => Some((opened, from, w[opened].sessions)),
            Trial::Close { w: closed, to } => Some((to, closed, w[to].sessions / 2)),
        }
    }
}

/// The planner's thread: each tick, reads each worker's running time and commands, and
/// publishes the plan.
fn planner() {
    let w = workers_with(defaults);
    let mut ran: Vec<u64> = vec![0; w.workers.len()];
    let mut served: u64 = 0;
    let mut planner = Planner::default();
    let mut last = Instant::now();
    loop {
        std::thread::sleep(TICK);
        let elapsed = last.elapsed().as_nanos().max(1) as f64;
        last = Instant::now();
        let samples: Vec<Sample> = w
            .workers
            .iter()
            .zip(ran.iter_mut())
            .map(|(wk, prev)| {
                let total = wk.handle.metrics().worker_total_busy_duration(0).as_nanos() as u64;
                let busy = total.saturating_sub(*prev) as f64 / elapsed;
                *prev = total;
                Sample {
                    busy: busy.clamp(0.0, 1.0),
                    sessions: wk.load.sessions.load(Ordering::Relaxed),
                }
            })
            .collect();
        let all: u64 = w
            .workers
            .iter()
            .map(|wk| wk.load.served.load(Ordering::Relaxed))
            .sum();
        let rate = all.saturating_sub(served) as f64 * 1e9 / elapsed;
        served = all;
        let p = planner.tick(&samples, rate);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(busy: f64, sessions: usize) -> Sample {
        Sample { busy, sessions }
    }

    /// Each tick the planner is fed, and what it must answer: one row per rule.
    #[test]
    fn where_sessions_go_and_which_move() {
        type Case = (
            &'static str,
            Vec<Sample>,
            usize,
            Option<(usize, usize, usize)>,
        );
        let cases: Vec<Case> = vec![
            (
                "idle: everything on the first",
                vec![s(0.0, 0), s(0.0, 0)],
                0,
                None,
            ),
            (
                "first not busy: it takes more",
                vec![s(0.5, 50), s(0.0, 0)],
                0,
                None,
            ),
            (
                "first busy: the second opens on trial with half",
                vec![s(0.7, 50), s(0.0, 0)],
                0,
                Some((0, 1, 25)),
            ),
            (
                "first saturated: new ones still to the least busy open worker",
                vec![s(0.95, 50), s(0.0, 0)],
                0,
                Some((0, 1, 25)),
            ),
            (
                "both open, one saturated, the other with room: it sheds to even them",
                vec![s(0.9, 30), s(0.3, 10)],
                1,
                Some((0, 1, 10)),
            ),
            (
                "both saturated: new ones to the least busy, nothing moves",
                vec![s(0.95, 30), s(0.85, 30)],
                1,
                None,
            ),
            (
                "light in all: the last open worker gathers onto the first",
                vec![s(0.2, 10), s(0.1, 10)],
                0,
                Some((1, 0, 10)),
            ),
            (
                "both open, one could carry them: closing the last is tried",
                vec![s(0.45, 10), s(0.4, 10)],
                0,
                Some((1, 0, 10)),
            ),
            (
                "a lone session on a busy worker cannot be split",
                vec![s(1.0, 1), s(0.0, 0)],
                0,
                None,
            ),
            (
                "sessions only on the second: the first takes new ones; closing is tried",
                vec![s(0.0, 0), s(0.5, 8)],
                0,
                Some((1, 0, 8)),
            ),
        ];
        for (what, w, place, moves) in cases {
            // A steady rate behind it (`no_trial_while_the_rate_moves`).
            let mut p = Planner {
                rates: [1000.0; 3],
                ..Planner::default()
            };
            assert_eq!(p.tick(&w, 1000.0), Plan { place, moves }, "{what}");
        }
    }

    /// Runs a trial from its start: the rate before, then the rate while it settles and is
    /// measured; what the judging tick answers.
    fn trial(before: f64, during: f64, busy: [Sample; 2], after: [Sample; 2]) -> (Planner, Plan) {
        let mut p = Planner::default();
        for _ in 0..3 {
            p.tick(&[s(0.3, 40), s(0.0, 0)], before);
        }
        let started = p.tick(&busy, before);
        assert!(started.moves.is_some(), "a trial starts");
        for _ in 1..SETTLE + MEASURE {
            assert_eq!(
                p.tick(&after, during).moves,
                None,
                "nothing moves during a trial"
            );
        }
        let judged = p.tick(&after, during);
        (p, judged)
    }

    #[test]
    fn no_trial_while_the_rate_moves() {
        let busy = [s(0.75, 40), s(0.0, 0)];
        let mut p = Planner::default();
        // A load that just started: its first ticks are no base to judge against.
        assert_eq!(p.tick(&busy, 0.0).moves, None);
        assert_eq!(p.tick(&busy, 100_000.0).moves, None);
        assert_eq!(p.tick(&busy, 100_000.0).moves, None);
        assert_eq!(p.tick(&busy, 150_000.0).moves, None, "still rising");
        assert_eq!(p.tick(&busy, 150_000.0).moves, None);
        assert_eq!(p.tick(&busy, 150_000.0).moves, Some((0, 1, 20)), "steady");
    }

    #[test]
    fn an_opened_worker_stays_only_if_the_rate_rose() {
        let busy = [s(0.75, 40), s(0.0, 0)];
        let spread = [s(0.45, 20), s(0.45, 20)];
        // A client that waits for each answer went faster: kept.
        let (mut p, judged) = trial(100_000.0, 110_000.0, busy, spread);
        assert_eq!(judged.moves, None);
        assert_eq!(p.wait, RETRY);
        // A client the second worker only took turns with did not: undone, and the next
        // trial waits.
        let (mut p2, judged) = trial(200_000.0, 160_000.0, busy, spread);
        assert_eq!(judged.moves, Some((1, 0, 20)));
        assert_eq!(p2.wait, RETRY * 2);
        for _ in 0..RETRY * 2 - 1 {
            assert_eq!(p2.tick(&busy, 200_000.0).moves, None, "backing off");
        }
        assert_eq!(
            p2.tick(&busy, 200_000.0).moves,
            Some((0, 1, 20)),
            "tried again"
        );
        // Kept: no close is tried before the wait is over.
        for _ in 0..RETRY - 1 {
            assert_eq!(p.tick(&spread, 110_000.0).moves, None);
        }
    }

    #[test]
    fn a_closed_worker_stays_closed_unless_the_rate_fell() {
        let spread = [s(0.45, 20), s(0.4, 20)];
        let one = [s(0.85, 40), s(0.0, 0)];
        let (_, judged) = trial(150_000.0, 149_000.0, spread, one);
        assert_eq!(
            judged.moves, None,
            "one worker served as much: stays closed"
        );
        let (_, judged) = trial(150_000.0, 120_000.0, spread, one);
        assert_eq!(judged.moves, Some((0, 1, 20)), "reopened with half");
    }
}
