//! The fleet's binlog tails (`l2.binlog_tails` = k > 0): the lease task that takes, renews and
//! releases one of k slots in Redis and starts or stops this instance's stream as
//! `policy::tails` decides; the tails' heartbeats (with their binlog position) and the DDL
//! they see, published on channels the standbys listen to (docs/fleet.md, "A few tails for a
//! fleet").
//!
//! Keys and channels (under `l2.key_prefix`):
//! - `tail:{lease}:<i>`, i < k: a slot, holding the tail's instance id, PX [`LEASE`]; the
//!   hash tag keeps the k keys in one cluster slot, so one script tries them all;
//! - channel `tails`: `<id> hb <file>:<offset> <ms behind>` from each tail whose stream is up, with each
//!   renewal; `<id> bye` when it releases its slot;
//! - channel `ddl`: `<id> <json>` naming what a DDL the tail saw changed (`Changed`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::{Script, Value};
use tracing::{info, warn};

use super::{L2Error, L2};
use crate::cache::writes::Changed;
use crate::policy::tails::{Action, Input, Lease, Role, HEARD_FOR, LEASE};

/// How often the lease task looks at the machine: finer than its paces.
const TICK: Duration = Duration::from_millis(50);

/// Takes the first free slot of KEYS for ARGV[1] (PX ARGV[2]), or the one it already holds;
/// returns its index from 0, or -1 when all are held by others.
const ACQUIRE_LUA: &str = r"
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then
    redis.call('PEXPIRE', k, ARGV[2])
    return i - 1
  end
end
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, ARGV[1], 'NX', 'PX', ARGV[2]) then return i - 1 end
end
return -1
";

/// Renews slot KEYS[1] for token ARGV[1] (PX ARGV[2]): 1 if it was ours, or free (an expiry
/// nobody took: ours again); 0 if another instance holds it. With it, publishes ARGV[4] on
/// channel ARGV[3] (the heartbeat) when ARGV[4] is not empty: one round trip for both, so a
/// heartbeat heard means a slot renewed.
const RENEW_LUA: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  return 0
end
if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
return 1
";

/// Deletes slot KEYS[1] if token ARGV[1] holds it, and says so on channel ARGV[2]
/// (message ARGV[3]) so that standbys take it at once.
const RELEASE_LUA: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
";

/// The lease side of [`L2`]: the machine and the scripts.
pub(super) struct Tails {
    pub(super) lease: std::sync::Mutex<Lease>,
    slots: u32,
    acquire: Script,
    renew: Script,
    release: Script,
    /// Wall-clock ms when this instance began streaming, 0 while it does not.
    since_ms: std::sync::atomic::AtomicU64,
}

impl Tails {
    pub(super) fn new(slots: u32) -> Tails {
        Tails {
            lease: std::sync::Mutex::new(Lease::new(slots, Instant::now())),
            slots,
            acquire: Script::new(ACQUIRE_LUA),
            renew: Script::new(RENEW_LUA),
            release: Script::new(RELEASE_LUA),
            since_ms: Default::default(),
        }
    }

    fn step(&self, input: Input) -> Vec<Action> {
        self.lease
            .lock()
            .map(|mut l| l.step(input, Instant::now()))
            .unwrap_or_default()
    }
}

/// What a DDL changed, as the `ddl` channel carries it.
pub fn encode_changed(c: &Changed) -> String {
    serde_json::json!({ "o": c.objects, "s": c.schemas, "e": c.everything }).to_string()
}

/// The inverse of [`encode_changed`]; anything unreadable means "anything may have changed".
pub fn decode_changed(s: &str) -> Changed {
    let everything = || Changed {
        everything: true,
        ..Changed::default()
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(s) else {
        return everything();
    };
    let objects: Option<Vec<(String, String)>> = serde_json::from_value(v["o"].clone()).ok();
    let schemas: Option<Vec<String>> = serde_json::from_value(v["s"].clone()).ok();
    match (objects, schemas, v["e"].as_bool()) {
        (Some(objects), Some(schemas), Some(e)) => Changed {
            objects,
            schemas,
            everything: e,
        },
        _ => everything(),
    }
}

impl L2 {
    fn slot_key(&self, i: u32) -> String {
        format!("{}tail:{{lease}}:{i}", self.cfg.key_prefix)
    }

    pub(super) fn tails_channel(&self) -> String {
        format!("{}tails", self.cfg.key_prefix)
    }

    pub(super) fn ddl_channel(&self) -> String {
        format!("{}ddl", self.cfg.key_prefix)
    }

    /// This instance's id (random per process): how `Qcache_l2_tails` names it.
    pub fn instance_id(&self) -> &str {
        &self.id
    }

    /// With `l2.binlog_tails` > 0: whether this instance streams now, since when (Unix
    /// seconds), and the instances holding a slot as far as it knows (itself included).
    pub fn tail_roles(&self) -> Option<(bool, u64, Vec<String>)> {
        let t = self.fleet.as_ref()?;
        let l = t.lease.lock().ok()?;
        let mut ids = l.tails_heard(Instant::now());
        if matches!(l.role(), Role::Tailing { .. }) {
            ids.push(self.id.clone());
            ids.sort();
        }
        let since = t.since_ms.load(Ordering::Relaxed) / 1000;
        Some((l.streaming(), since, ids))
    }

    /// Whether a gap of this instance's new stream can only be uncovered: with the lease on,
    /// no other tail is heard, so waiting for one's heartbeat would only delay the takeover
    /// (raising `e` at once is the conservative answer anyway).
    ///
    /// Only once the channel has been listened to for [`HEARD_FOR`]: an instance that just
    /// subscribed has not had the time to hear the tails that are there.
    pub(super) fn alone(&self) -> bool {
        let subscribed = self.notify_since_ms.load(Ordering::Acquire);
        let listened = subscribed != 0
            && self.notifications_up()
            && super::now_ms().saturating_sub(subscribed) >= HEARD_FOR.as_millis() as u64;
        listened
            && self
                .fleet
                .as_ref()
                .and_then(|t| {
                    t.lease
                        .lock()
                        .ok()
                        .map(|l| l.tails_heard(Instant::now()).is_empty())
                })
                .unwrap_or(false)
    }

    /// A message from `from` (not this instance) on channel `name`: true when it was the
    /// `tails` or the `ddl` channel's, handled here.
    pub(super) fn on_fleet_message(
        &self,
        name: &str,
        tails_ch: &str,
        ddl_ch: &str,
        from: &str,
        body: &str,
    ) -> bool {
        if name == tails_ch {
            self.on_tail_message(from, body);
            return true;
        }
        if name == ddl_ch {
            // A tail's own stream gives it the DDL; a standby has only this.
            if !self.tail.as_ref().is_some_and(|t| t.connected()) {
                (self.learned)(super::Learned::Ddl(decode_changed(body)));
            }
            return true;
        }
        false
    }

    /// A message on the `tails` channel from `from` (not this instance).
    pub(super) fn on_tail_message(&self, from: &str, body: &str) {
        let Some(t) = &self.fleet else { return };
        if body.starts_with("hb") {
            t.step(Input::Heard(from.to_string()));
            if let Some(tail) = &self.tail {
                tail.heard(heartbeat_behind(body));
            }
        } else if body == "bye" {
            t.step(Input::Gone(from.to_string()));
        }
    }

    /// Publishes what a DDL this instance's stream saw changed, for the standbys' catalogs.
    pub fn publish_ddl(self: &Arc<Self>, changed: &Changed) {
        if self.fleet.is_none() {
            return;
        }
        let msg = format!("{} {}", self.id, encode_changed(changed));
        let me = self.clone();
        tokio::spawn(async move {
            let Some(mut conn) = me.bump_conn() else {
                return;
            };
            let ch = me.ddl_channel();
            let r = me
                .timed("tails", async {
                    redis::cmd("PUBLISH")
                        .arg(&ch)
                        .arg(&msg)
                        .query_async::<Value>(&mut conn)
                        .await
                        .map(drop)
                        .map_err(L2Error::from)
                })
                .await;
            if let Err(e) = r {
                // Standbys may miss this DDL: L2 is marked down (by `timed`), and they
                // resync, dropping their entries, when it is back.
                warn!(error = %e, "could not publish a DDL to the standbys");
            }
        });
    }

    /// Graceful shutdown: stops the stream and frees the slot, so that a standby takes it
    /// at once instead of after the lease runs out.
    pub async fn hand_over(&self) {
        let Some(t) = &self.fleet else { return };
        let actions = t.step(Input::Shutdown);
        self.carry_out(t, actions).await;
    }

    /// Carries out the machine's actions, feeding it what Redis answered.
    async fn carry_out(&self, t: &Tails, mut actions: Vec<Action>) {
        while !actions.is_empty() {
            let mut next = Vec::new();
            for a in actions {
                next.extend(self.act(t, a).await);
            }
            actions = next;
        }
    }

    async fn act(&self, t: &Tails, a: Action) -> Vec<Action> {
        let Some(tail) = &self.tail else {
            return Vec::new();
        };
        let token = self.id.clone();
        let px = LEASE.as_millis() as u64;
        match a {
            Action::StartTail => {
                t.since_ms.store(super::now_ms(), Ordering::Relaxed);
                info!(id = %self.id, "binlog: this instance streams for the fleet");
                tail.set_streaming(true);
                Vec::new()
            }
            Action::StopTail => {
                t.since_ms.store(0, Ordering::Relaxed);
                tail.set_streaming(false);
                Vec::new()
            }
            Action::TryAcquire => {
                let Some(mut conn) = self.bump_conn() else {
                    return t.step(Input::Unreachable);
                };
                let keys: Vec<String> = (0..t.slots).map(|i| self.slot_key(i)).collect();
                let r: Result<i64, L2Error> = self
                    .timed("tails", async {
                        let mut inv = t.acquire.prepare_invoke();
                        for k in &keys {
                            inv.key(k);
                        }
                        inv.arg(&token).arg(px);
                        inv.invoke_async(&mut conn).await.map_err(L2Error::from)
                    })
                    .await;
                match r {
                    Ok(i) if i >= 0 => t.step(Input::Acquired(i as u32)),
                    Ok(_) => t.step(Input::Busy),
                    Err(_) => t.step(Input::Unreachable),
                }
            }
            Action::Renew(slot) => {
                let Some(mut conn) = self.bump_conn() else {
                    return t.step(Input::Unreachable);
                };
                // The heartbeat says the stream is up and its start's gap decided (the `e` a
                // gap nobody covered raises is published before it): standbys count silence
                // from it, and serve hits again once they hear it.
                // It says how far behind the server the stream may be (`policy::lag`), and
                // is not sent while that is unknown.
                let behind = tail.behind().filter(|_| tail.connected());
                let hb = match behind {
                    Some(b) if !self.gap_pending.load(Ordering::Acquire) => {
                        let pos = tail
                            .position()
                            .map_or("-".to_string(), |(f, o)| format!("{f}:{o}"));
                        format!("{} hb {pos} {}", self.id, b.as_millis())
                    }
                    _ => String::new(),
                };
                let key = self.slot_key(slot);
                let ch = self.tails_channel();
                let r: Result<i64, L2Error> = self
                    .timed("tails", async {
                        let mut inv = t.renew.prepare_invoke();
                        inv.key(&key).arg(&token).arg(px).arg(&ch).arg(&hb);
                        inv.invoke_async(&mut conn).await.map_err(L2Error::from)
                    })
                    .await;
                match r {
                    Ok(1) => t.step(Input::Renewed),
                    Ok(_) => {
                        warn!(slot, "binlog tail lease lost to another instance");
                        t.step(Input::Lost)
                    }
                    Err(_) => t.step(Input::Unreachable),
                }
            }
            Action::Release(slot) => {
                if let Some(mut conn) = self.bump_conn() {
                    let key = self.slot_key(slot);
                    let ch = self.tails_channel();
                    let bye = format!("{} bye", self.id);
                    let _ = self
                        .timed("tails", async {
                            let mut inv = t.release.prepare_invoke();
                            inv.key(&key).arg(&token).arg(&ch).arg(&bye);
                            inv.invoke_async::<Value>(&mut conn)
                                .await
                                .map(drop)
                                .map_err(L2Error::from)
                        })
                        .await;
                }
                Vec::new()
            }
        }
    }
}

/// Drives the machine: a tick every [`TICK`], Redis's and the channel's reachability, and
/// the stream's state.
pub(super) async fn lease_task(l2: Weak<L2>) {
    loop {
        tokio::time::sleep(TICK).await;
        let Some(me) = l2.upgrade() else { return };
        let (Some(t), Some(tail)) = (&me.fleet, &me.tail) else {
            return;
        };
        if tail.is_off() {
            // `auto` found no usable binlog: nothing to stream, no slot to hold.
            let a = t.step(Input::Shutdown);
            me.carry_out(t, a).await;
            return;
        }
        if matches!(t.lease.lock().map(|l| l.role()), Ok(Role::Stopped)) {
            return;
        }
        // A standby needs both: commands to take a slot, the channel to hear the tails.
        let mut actions = Vec::new();
        if !(me.healthy() && me.notifications_up()) {
            actions.extend(t.step(Input::Unreachable));
        }
        actions.extend(t.step(Input::Tick {
            stream_up: tail.connected(),
        }));
        me.carry_out(t, actions).await;
    }
}

/// How far behind the server a heartbeat (`hb <file>:<offset> <ms>`) says its tail may be;
/// 0 for a heartbeat without it (an instance of an earlier version), as those were taken.
fn heartbeat_behind(body: &str) -> std::time::Duration {
    let ms = body
        .split_whitespace()
        .nth(2)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    std::time::Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_messages_round_trip_and_fail_closed() {
        let c = Changed {
            objects: vec![("db".into(), "t \"x\"".into())],
            schemas: vec!["s".into()],
            everything: false,
        };
        assert_eq!(decode_changed(&encode_changed(&c)), c);
        for bad in ["", "{", "{\"o\": 3}", "[]"] {
            assert!(decode_changed(bad).everything, "{bad:?}");
        }
    }
}
