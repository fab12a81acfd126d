//! Who streams the binlog in a fleet (`l2.binlog_tails`): the lease state machine, sans-IO.
//! The L2 lease task (`l2::tails`) feeds it what Redis and the tail said and carries out the
//! actions it returns; nothing here touches a socket or a clock.
//!
//! A slot is a Redis key (`tail:{lease}:<i>`, i < k) set with this instance's token for
//! [`LEASE`], renewed every [`RENEW_EVERY`] by a script that checks the token. An instance
//! holding a slot streams the binlog (a *tail*); the others (*standbys*) hear the tails'
//! heartbeats on a channel and try to take a slot only while they hear fewer than k tails, so
//! a quiet fleet costs Redis nothing but the tails' renewals. An instance that cannot reach
//! Redis, or cannot hear its channel, streams on its own (`Fallback`): it would learn
//! nothing as a standby. More tails than k is only a cost; fewer is the risk, so every doubt
//! resolves toward streaming, except a held slot whose stream stays down, which is given up
//! so that another instance can stream.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a slot's key lives without renewal: a killed tail's slot is free this long after
/// its last renewal.
pub const LEASE: Duration = Duration::from_millis(1000);
/// How often a tail renews its slot (and publishes its heartbeat with it).
pub const RENEW_EVERY: Duration = Duration::from_millis(250);
/// How often a standby that hears fewer than k tails tries to take a slot.
pub const ACQUIRE_EVERY: Duration = Duration::from_millis(250);
/// A tail not heard from for this long is taken for gone: its slot has expired by then
/// (the heartbeat is published by the renewal that extends it).
pub const HEARD_FOR: Duration = LEASE;
/// After start, how long an instance that has not reached Redis yet waits before streaming
/// on its own: a fleet restarting should not open one stream per instance for the moment
/// it takes to connect.
pub const STARTUP_GRACE: Duration = Duration::from_millis(1000);
/// A tail whose stream has been down this long (after having had [`STREAM_START`] to open
/// it) gives its slot up, so that an instance that can reach the server streams instead.
pub const STREAM_DOWN_MAX: Duration = Duration::from_millis(2000);
/// How long a new tail may take to open its stream before [`STREAM_DOWN_MAX`] counts.
pub const STREAM_START: Duration = Duration::from_millis(3000);
/// After giving a slot up (stream down, lease lost), how long before trying again, so that
/// another instance gets it.
pub const COOLDOWN: Duration = Duration::from_millis(2000);

/// What this instance is in the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not reached Redis yet (within [`STARTUP_GRACE`]): neither streaming nor listening.
    Starting,
    /// Listening to the tails; no stream.
    Standby,
    /// Holding slot `slot`, streaming.
    Tailing { slot: u32 },
    /// Redis out of reach (or its channel deaf): streaming on its own, holding no slot.
    Fallback,
    /// Shut down; nothing more happens.
    Stopped,
}

/// What happened, as the lease task saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Time passed; `stream_up`: this instance's binlog stream is connected and caught up.
    Tick { stream_up: bool },
    /// The acquire script took slot `slot`.
    Acquired(u32),
    /// The acquire script found every slot held.
    Busy,
    /// The renew script found the slot still (or again) ours.
    Renewed,
    /// The renew script found another token in the slot.
    Lost,
    /// Redis did not answer, or this instance cannot hear the channel.
    Unreachable,
    /// Another instance's tail heartbeated (its instance id).
    Heard(String),
    /// Another instance's tail released its slot (graceful shutdown).
    Gone(String),
    /// This instance is shutting down.
    Shutdown,
}

/// What the lease task must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    StartTail,
    StopTail,
    TryAcquire,
    Renew(u32),
    Release(u32),
}

/// The machine. `slots` is `l2.binlog_tails` (at least 1 here: 0 means no lease at all).
#[derive(Debug, Clone)]
pub struct Lease {
    slots: u32,
    role: Role,
    started: Instant,
    /// When the current role began (for `Qcache_l2_tailing_since`).
    since: Instant,
    /// When an acquire or renew was last asked, for pacing.
    asked: Option<Instant>,
    /// When the slot was last confirmed ours.
    renewed: Option<Instant>,
    /// Since when the stream has been down while tailing.
    down_since: Option<Instant>,
    /// No acquire before this (after giving a slot up).
    cooldown_until: Option<Instant>,
    /// Other tails by instance id, when last heard.
    heard: HashMap<String, Instant>,
}

impl Lease {
    pub fn new(slots: u32, now: Instant) -> Lease {
        Lease {
            slots: slots.max(1),
            role: Role::Starting,
            started: now,
            since: now,
            asked: None,
            renewed: None,
            down_since: None,
            cooldown_until: None,
            heard: HashMap::new(),
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether this instance streams now (tail or fallback).
    pub fn streaming(&self) -> bool {
        matches!(self.role, Role::Tailing { .. } | Role::Fallback)
    }

    /// When the current role began.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// The other tails heard within [`HEARD_FOR`], sorted.
    pub fn tails_heard(&self, now: Instant) -> Vec<String> {
        let mut v: Vec<String> = self
            .heard
            .iter()
            .filter(|(_, t)| now.saturating_duration_since(**t) <= HEARD_FOR)
            .map(|(id, _)| id.clone())
            .collect();
        v.sort();
        v
    }

    /// Moves to `role`; `since` moves only when streaming starts or stops, so a tail that
    /// passes through `Fallback` and back keeps its start.
    fn become_(&mut self, role: Role, now: Instant) {
        let was = self.streaming();
        self.role = role;
        if self.streaming() != was {
            self.since = now;
        }
    }

    fn paced(&self, now: Instant, every: Duration) -> bool {
        self.asked
            .is_none_or(|t| now.saturating_duration_since(t) >= every)
    }

    /// Feeds one input at `now`; returns what to do, in order.
    pub fn step(&mut self, input: Input, now: Instant) -> Vec<Action> {
        use Action::*;
        let mut out = Vec::new();
        match (self.role, input) {
            (Role::Stopped, _) => {}
            (role, Input::Shutdown) => {
                match role {
                    Role::Tailing { slot } => out.extend([StopTail, Release(slot)]),
                    Role::Fallback => out.push(StopTail),
                    _ => {}
                }
                self.become_(Role::Stopped, now);
            }
            (_, Input::Heard(id)) => {
                self.heard.insert(id, now);
            }
            (_, Input::Gone(id)) => {
                self.heard.remove(&id);
                // A slot is free now: take it without waiting for the pace.
                self.asked = None;
            }
            (Role::Starting, Input::Tick { .. }) => {
                if now.saturating_duration_since(self.started) >= STARTUP_GRACE {
                    out.push(StartTail);
                    self.become_(Role::Fallback, now);
                } else if self.paced(now, ACQUIRE_EVERY) {
                    self.asked = Some(now);
                    out.push(TryAcquire);
                }
            }
            (Role::Standby, Input::Tick { .. }) => {
                let cooling = self.cooldown_until.is_some_and(|t| now < t);
                let short = (self.tails_heard(now).len() as u32) < self.slots;
                if short && !cooling && self.paced(now, ACQUIRE_EVERY) {
                    self.asked = Some(now);
                    out.push(TryAcquire);
                }
            }
            (Role::Fallback, Input::Tick { .. }) if self.paced(now, ACQUIRE_EVERY) => {
                self.asked = Some(now);
                out.push(TryAcquire);
            }
            (Role::Tailing { slot }, Input::Tick { stream_up }) => {
                if stream_up {
                    self.down_since = None;
                } else {
                    self.down_since.get_or_insert(now);
                }
                let started_for = now.saturating_duration_since(self.since);
                let down_for = self
                    .down_since
                    .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                if started_for >= STREAM_START && down_for >= STREAM_DOWN_MAX {
                    // This instance cannot stream: let one that can.
                    out.extend([StopTail, Release(slot)]);
                    self.cooldown_until = Some(now + COOLDOWN);
                    self.become_(Role::Standby, now);
                } else if self.paced(now, RENEW_EVERY) {
                    self.asked = Some(now);
                    out.push(Renew(slot));
                }
            }
            (Role::Starting | Role::Standby, Input::Acquired(slot)) => {
                out.push(StartTail);
                self.renewed = Some(now);
                self.down_since = None;
                self.become_(Role::Tailing { slot }, now);
            }
            (Role::Fallback, Input::Acquired(slot)) => {
                // Already streaming: the stream goes on under the slot.
                self.renewed = Some(now);
                self.down_since = None;
                self.role = Role::Tailing { slot };
            }
            (Role::Starting, Input::Busy) => self.become_(Role::Standby, now),
            (Role::Fallback, Input::Busy) => {
                // Redis and the channel are back and k others stream: listen instead.
                out.push(StopTail);
                self.become_(Role::Standby, now);
            }
            (Role::Tailing { .. }, Input::Renewed) => self.renewed = Some(now),
            (Role::Tailing { .. }, Input::Lost) => {
                out.push(StopTail);
                self.cooldown_until = Some(now + COOLDOWN);
                self.become_(Role::Standby, now);
            }
            (Role::Standby, Input::Unreachable) => {
                out.push(StartTail);
                self.become_(Role::Fallback, now);
            }
            (Role::Tailing { .. }, Input::Unreachable) => {
                // Keep streaming, slot or not: this instance cannot hear anyone else.
                self.become_(Role::Fallback, now);
            }
            // Starting waits for its grace; Fallback already streams; stale replies
            // (an acquire answered after a role change, a renew after a loss) change nothing.
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Builds a machine in a given role at t0 + `at` ms.
    fn in_role(role: Role, t0: Instant) -> Lease {
        let mut l = Lease::new(1, t0);
        l.role = role;
        l
    }

    #[test]
    fn one_row_per_rule() {
        let t0 = Instant::now();
        let tick = |up| Input::Tick { stream_up: up };
        let standby = Role::Standby;
        let tail = Role::Tailing { slot: 0 };
        // (rule, role before, setup, input, at ms, actions, role after)
        type Setup = fn(&mut Lease, Instant);
        let none: Setup = |_, _| {};
        let heard_one: Setup = |l, t0| {
            l.heard.insert("b".into(), t0 + ms(900));
        };
        let asked_now: Setup = |l, t0| l.asked = Some(t0 + ms(1000));
        let down_long: Setup = |l, t0| {
            l.since = t0;
            l.down_since = Some(t0 + ms(1000));
        };
        let cooling: Setup = |l, t0| l.cooldown_until = Some(t0 + ms(5000));
        type Row = (&'static str, Role, Setup, Input, u64, Vec<Action>, Role);
        let rows: Vec<Row> = vec![
            (
                "starting: asks for a slot at once",
                Role::Starting,
                none,
                tick(false),
                0,
                vec![TryAcquire],
                Role::Starting,
            ),
            (
                "starting: Redis silent past the grace: streams alone",
                Role::Starting,
                none,
                tick(false),
                1000,
                vec![StartTail],
                Role::Fallback,
            ),
            (
                "starting: Redis unreachable within the grace: waits",
                Role::Starting,
                none,
                Input::Unreachable,
                10,
                vec![],
                Role::Starting,
            ),
            (
                "starting: every slot held: standby",
                Role::Starting,
                none,
                Input::Busy,
                10,
                vec![],
                standby,
            ),
            (
                "starting: a slot taken: streams",
                Role::Starting,
                none,
                Input::Acquired(0),
                10,
                vec![StartTail],
                tail,
            ),
            (
                "standby hearing k tails: asks Redis nothing",
                standby,
                heard_one,
                tick(false),
                1500,
                vec![],
                standby,
            ),
            (
                "standby hearing fewer than k tails: tries a slot",
                standby,
                none,
                tick(false),
                1500,
                vec![TryAcquire],
                standby,
            ),
            (
                "standby: a tail not heard for a lease is gone: tries",
                standby,
                heard_one,
                tick(false),
                1901,
                vec![TryAcquire],
                standby,
            ),
            (
                "standby: tries at most every ACQUIRE_EVERY",
                standby,
                asked_now,
                tick(false),
                1100,
                vec![],
                standby,
            ),
            (
                "standby cooling down after giving a slot up: waits",
                standby,
                cooling,
                tick(false),
                1500,
                vec![],
                standby,
            ),
            (
                "standby: a slot taken: streams",
                standby,
                none,
                Input::Acquired(0),
                1500,
                vec![StartTail],
                tail,
            ),
            (
                "standby: Redis or its channel out of reach: streams alone",
                standby,
                none,
                Input::Unreachable,
                1500,
                vec![StartTail],
                Role::Fallback,
            ),
            (
                "standby: a tail gone gracefully: tries at once",
                standby,
                asked_now,
                Input::Gone("b".into()),
                1100,
                vec![],
                standby,
            ),
            (
                "tail: renews every RENEW_EVERY",
                tail,
                none,
                tick(true),
                1500,
                vec![Renew(0)],
                tail,
            ),
            (
                "tail: not before RENEW_EVERY",
                tail,
                asked_now,
                tick(true),
                1100,
                vec![],
                tail,
            ),
            (
                "tail: lease lost to another token: stops",
                tail,
                none,
                Input::Lost,
                1500,
                vec![StopTail],
                standby,
            ),
            (
                "tail: Redis unreachable: keeps streaming",
                tail,
                none,
                Input::Unreachable,
                1500,
                vec![],
                Role::Fallback,
            ),
            (
                "tail: stream down too long: gives the slot up",
                tail,
                down_long,
                tick(false),
                3500,
                vec![StopTail, Release(0)],
                standby,
            ),
            (
                "tail: shutdown: stops and releases",
                tail,
                none,
                Input::Shutdown,
                1500,
                vec![StopTail, Release(0)],
                Role::Stopped,
            ),
            (
                "fallback: tries a slot every ACQUIRE_EVERY",
                Role::Fallback,
                none,
                tick(true),
                1500,
                vec![TryAcquire],
                Role::Fallback,
            ),
            (
                "fallback: a slot taken: the stream goes on under it",
                Role::Fallback,
                none,
                Input::Acquired(1),
                1500,
                vec![],
                Role::Tailing { slot: 1 },
            ),
            (
                "fallback: back, and k others stream: stops",
                Role::Fallback,
                none,
                Input::Busy,
                1500,
                vec![StopTail],
                standby,
            ),
            (
                "fallback: shutdown: stops",
                Role::Fallback,
                none,
                Input::Shutdown,
                1500,
                vec![StopTail],
                Role::Stopped,
            ),
            (
                "a stale acquire after the role changed: ignored",
                tail,
                none,
                Input::Acquired(1),
                1500,
                vec![],
                tail,
            ),
            (
                "stopped: nothing more",
                Role::Stopped,
                none,
                Input::Acquired(0),
                1500,
                vec![],
                Role::Stopped,
            ),
        ];
        for (rule, before, setup, input, at, want, after) in rows {
            let mut l = in_role(before, t0);
            setup(&mut l, t0);
            let got = l.step(input, t0 + ms(at));
            assert_eq!(got, want, "{rule}");
            assert_eq!(l.role(), after, "{rule}");
        }
    }

    #[test]
    fn a_killed_tail_is_replaced_within_a_lease_and_a_pace() {
        // A standby hears the only tail until t = 1 s, then nothing: it tries from
        // t = 1 s + HEARD_FOR on, every ACQUIRE_EVERY, and takes the slot when it expires.
        let t0 = Instant::now();
        let mut l = Lease::new(1, t0);
        assert_eq!(l.step(Input::Busy, t0), vec![]);
        let mut first_try = None;
        for i in 0..60u64 {
            let now = t0 + ms(i * 50);
            if i * 50 <= 1000 {
                l.step(Input::Heard("b".into()), now);
            }
            if l.step(Input::Tick { stream_up: false }, now) == vec![Action::TryAcquire] {
                first_try.get_or_insert(i * 50);
            }
        }
        let first = first_try.expect("a standby that stops hearing the tail tries a slot");
        assert!((2000..=2050).contains(&first), "first try at {first} ms");
    }

    #[test]
    fn tails_heard_and_since() {
        let t0 = Instant::now();
        let mut l = Lease::new(2, t0);
        l.step(Input::Heard("b".into()), t0);
        l.step(Input::Heard("a".into()), t0 + ms(500));
        assert_eq!(l.tails_heard(t0 + ms(900)), vec!["a", "b"]);
        assert_eq!(l.tails_heard(t0 + ms(1200)), vec!["a"]);
        l.step(Input::Acquired(1), t0 + ms(700));
        assert!(l.streaming());
        assert_eq!(l.since(), t0 + ms(700));
    }
}
