//! The shared second-level cache in Redis/Valkey: table versions that only grow, entries
//! stamped with them, the bump queue every local invalidation feeds, the notification channel
//! other instances learn bumps from, fill leases, and the health state that keeps a down,
//! slow or lying Redis out of the way (docs/fleet.md).
//!
//! Keys (all under `l2.key_prefix`):
//! - `v:<dep>` a version: `e` (everything), `s:<schema>`, and per table `T` =
//!   `<len>:<schema>.<table>` its all-writes version `t:{T}`, its unknown-rows version
//!   `u:{T}` (a hash: field `v`, and one field `r:<column id>` per column some instance
//!   slices on), per such column its unknown version `c:<column id>:{T}` and its slices'
//!   versions `k:<column id>:<index>:{T}` (row slices, `cache::versions`); raised by Lua
//!   scripts to `max(current + 1, Redis time in µs)`, so they only grow, even when a key was
//!   lost and is created again. `{T}` is a hash tag: a table's keys share a cluster slot, so
//!   one script reads or raises them together;
//! - `e:<hex key>` an entry (`encode`), with a PX expiry of `l2.ttl`;
//! - `epoch` the identity of the server the fleet last adopted, and `raises` the fleet's
//!   raise counter (standalone only), moved by the raise scripts (see `L2::raises_seen`);
//! - `l:<hex key>` a fill lease (SET NX PX);
//! - channel `bumps`: `<instance id> <dep>` for every bump, published by the bump script;
//! - `tails`: a sorted set of the binlog tails watching now (`<id>:<connection>` scored by
//!   the Redis time of its last heartbeat), so that a tail (re)starting invalidates the
//!   fleet's entries only when no other tail was watching (see [`L2::resolve_gap`]).

pub mod read;
pub mod resp;
pub mod tails;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Script, Value};
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

pub use crate::cache::entry::L2Stamps;
use crate::cache::key::Key;
use crate::cache::versions::{BumpSink, SlicePlan, TableHandle, Versions};
use crate::config::{L2Config, L2Url, ValidateHits};
use crate::observe::latency::LatencyHistogram;
use crate::policy::diagnostics::EntryDiagnostics;
use crate::policy::l2::{
    judge, next_backoff, recheck, Adoption, Held, L2Verdict, Recheck, BACKOFF_MIN, RAISES_SUSPECT,
};
use resp::Reply;

/// Why an L2 operation gave nothing; every kind means "bypass L2 for this one".
#[derive(Debug, thiserror::Error)]
pub enum L2Error {
    #[error("L2 is down")]
    Down,
    #[error("L2 did not answer within {0:?}")]
    Timeout(Duration),
    #[error("L2: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("L2 answered something malformed: {0}")]
    Malformed(&'static str),
    #[error("L2 connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("L2 answered an error: {0}")]
    ErrorReply(String),
}

/// Bumps waiting to be raised in L2 before this many are queued are kept one by one; past it
/// (a burst of DDL, a flood while L2 is down) the whole set is replaced by one `e` bump.
const MAX_QUEUED_DEPS: usize = 4096;
/// How often a healthy L2 is pinged, so a stalled Redis is noticed without traffic.
const PING_EVERY: Duration = Duration::from_millis(250);
/// The ping is a PUBLISH to this instance's own heartbeat channel, which its subscriber
/// listens to on the same connection as the bumps: when none has arrived for this long, the
/// subscription delivers nothing (a half-open connection nothing closes) and is treated as
/// lost. It bounds how long another instance's bump can go unseen.
const CHANNEL_SILENCE: Duration = Duration::from_millis(1000);
const MAGIC: &[u8; 4] = b"QC2F";

/// A column's identity in L2: its name and everything the catalog says of how it compares
/// (`ColumnInfo`), hashed. Two instances whose catalogs disagree on a column's type give it
/// different ids, so a write through one never claims to name the values of a slice the
/// other keyed differently: it raises that column's unknown version instead.
pub type ColumnIds = Arc<dyn Fn(&str, &str, &str) -> Option<u64> + Send + Sync>;

/// What this instance learned from L2 that it must invalidate locally: another instance's
/// bump from the channel, or bumps it may have missed (channel lost or made again, a
/// different Redis). Handed to [`OnLearned`], which applies it without publishing it back
/// (`invalidation::l2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Learned {
    /// Another instance raised everything (`e`).
    Everything,
    /// Bumps this instance may have missed: everything, and any privilege change among
    /// them (`policy::privileges::PrivilegeChange::missed`).
    Missed,
    Schema(String),
    Table(String, String),
    /// Another instance's write with known rows: per column registered here whose id
    /// matches the writer's, the slice counter indexes of the values it names; a registered
    /// column not listed is unknown for this write.
    Rows {
        schema: String,
        name: String,
        indexes: Vec<(String, Vec<u32>)>,
    },
    /// A DDL a binlog tail of the fleet saw: this instance (a standby, with no stream of its
    /// own) reloads what it names in its catalog.
    Ddl(crate::cache::writes::Changed),
}

/// Applies what L2 taught this instance (the invalidation entry point, installed by
/// `shared`; `l2` sits below `invalidation` and cannot call it itself).
pub type OnLearned = Arc<dyn Fn(Learned) + Send + Sync>;

/// The id [`ColumnIds`] gives a column (schema, table, column) of this catalog description.
/// Hashed, not formatted: it is computed on every sliced lookup.
pub fn column_id(column: &str, info: &impl std::hash::Hash) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    column.hash(&mut h);
    info.hash(&mut h);
    h.finish()
}

/// Appends `v` as `digits` lower-case hex digits (`format!("{v:0N$x}")` without the
/// formatting machinery, which showed up in the lookup's profile).
fn push_hex(out: &mut String, v: u128, digits: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = digits.min(32) as usize;
    let mut buf = [0u8; 32];
    for (i, b) in buf[..n].iter_mut().enumerate() {
        *b = HEX[((v >> ((n - 1 - i) * 4)) & 0xf) as usize];
    }
    // Hex digits only: always UTF-8.
    out.push_str(std::str::from_utf8(&buf[..n]).unwrap_or_default());
}

/// What a read depends on in L2: dependency names (sorted, unique, so every instance names
/// the same read the same way) and the slice columns it registers (table id, column id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct L2Deps {
    pub deps: Vec<String>,
    pub registers: Vec<(String, u64)>,
}

/// The dependencies of a read of `tables` whole: everything, each schema, each table.
pub fn deps_of(tables: &[TableHandle]) -> L2Deps {
    deps_with_slices(tables, &[], &|_, _, _| None)
}

/// The dependencies of a read of `whole` tables and of `sliced` ones by slices: for a sliced
/// table, its unknown-rows version, its column's unknown version and the versions of the
/// slices read, and the column is registered. A column `ids` cannot name is read whole.
pub fn deps_with_slices(
    whole: &[TableHandle],
    sliced: &[SlicePlan],
    ids: &dyn Fn(&str, &str, &str) -> Option<u64>,
) -> L2Deps {
    let mut set = BTreeSet::new();
    let mut registers = Vec::new();
    set.insert("e".to_string());
    for t in whole {
        set.insert(schema_dep(&t.schema));
        set.insert(table_dep(&t.schema, &t.name));
    }
    for p in sliced {
        let t = &p.table;
        set.insert(schema_dep(&t.schema));
        let tid = table_id(&t.schema, &t.name);
        match ids(&t.schema, &t.name, &p.column.name) {
            Some(col) => {
                let dep = |kind: &str, idx: Option<u32>| {
                    let mut d = String::with_capacity(tid.len() + 32);
                    d.push_str(kind);
                    push_hex(&mut d, u128::from(col), 16);
                    d.push(':');
                    if let Some(i) = idx {
                        d.push_str(&i.to_string());
                        d.push(':');
                    }
                    d.push_str(&tid);
                    d
                };
                set.insert(format!("u:{tid}"));
                set.insert(dep("c:", None));
                for i in &p.slices {
                    set.insert(dep("k:", Some(*i)));
                }
                registers.push((tid, col));
            }
            None => {
                set.insert(format!("t:{tid}"));
            }
        }
    }
    registers.sort();
    registers.dedup();
    L2Deps {
        deps: set.into_iter().collect(),
        registers,
    }
}

fn schema_dep(schema: &str) -> String {
    format!("s:{schema}")
}

/// A table's id: the schema's length makes it unambiguous whatever the identifiers contain.
fn table_id(schema: &str, name: &str) -> String {
    format!("{}:{schema}.{name}", schema.len())
}

fn table_dep(schema: &str, name: &str) -> String {
    format!("t:{}", table_id(schema, name))
}

/// A dependency on a table's versions split into the part before its table id and the id:
/// `t:T`, `u:T`, `c:<16 hex>:T`, `k:<16 hex>:<index>:T`. None for `e` and `s:`.
fn split_table_dep(d: &str) -> Option<(&str, &str)> {
    let at = match d.get(..2)? {
        "t:" | "u:" => 2,
        "c:" => 2 + 17,
        "k:" => {
            let rest = d.get(2 + 17..)?;
            2 + 17 + rest.find(':')? + 1
        }
        _ => return None,
    };
    Some((d.get(..at)?, d.get(at..)?))
}

/// The version keys (positions) and registrations of one cluster slot: one script call.
struct SlotGroup<'a> {
    tag: &'a str,
    keys: Vec<usize>,
    regs: Vec<&'a (String, String)>,
}

impl<'a> SlotGroup<'a> {
    fn of<'g>(groups: &'g mut Vec<SlotGroup<'a>>, tag: &'a str) -> &'g mut SlotGroup<'a> {
        let at = match groups.iter().position(|g| g.tag == tag) {
            Some(at) => at,
            None => {
                groups.push(SlotGroup {
                    tag,
                    keys: Vec::new(),
                    regs: Vec::new(),
                });
                groups.len() - 1
            }
        };
        &mut groups[at]
    }
}

/// What Redis Cluster hashes to place `key`: the first non-empty `{…}`, else all of it.
fn slot_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// What a dependency name means, for bumps learned from the channel.
#[derive(Debug, PartialEq, Eq)]
pub enum Dep<'a> {
    All,
    Schema(&'a str),
    Table(&'a str, &'a str),
}

pub fn parse_dep(d: &str) -> Option<Dep<'_>> {
    if d == "e" {
        return Some(Dep::All);
    }
    if let Some(s) = d.strip_prefix("s:") {
        return Some(Dep::Schema(s));
    }
    let rest = d.strip_prefix("t:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let schema = rest.get(..len)?;
    let name = rest.get(len..)?.strip_prefix('.')?;
    Some(Dep::Table(schema, name))
}

/// A result as L2 stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Entry {
    pub stamps: Vec<(String, u64)>,
    pub bytes: Bytes,
    pub status_at: usize,
    pub meta_status_at: Option<usize>,
    pub digest: u64,
    /// Unix time in ms after which the entry must not be served (a rule's TTL); 0 for none.
    pub expires_at_ms: u64,
    /// What a hit leaves behind (`FOUND_ROWS()`, rows): the L1 entry's, carried so that a hit
    /// served from L2, and its L1 copy, leave the session as a local hit does.
    pub diag: EntryDiagnostics,
}

/// `QC2F`, dependency count, each (name, version), offsets, digest, expiry, found rows, rows,
/// bytes, then an xxh3 checksum of everything before it: a value that is not ours, or was
/// cut, is refused. (`QC2E`, the format before the diagnostics, is refused too: an entry
/// without them would leave `FOUND_ROWS()` wrong after its hit.)
pub fn encode(e: &L2Entry) -> Vec<u8> {
    let mut b = BytesMut::with_capacity(e.bytes.len() + 64 + e.stamps.len() * 40);
    b.put_slice(MAGIC);
    b.put_u16_le(e.stamps.len() as u16);
    for (n, v) in &e.stamps {
        b.put_u16_le(n.len() as u16);
        b.put_slice(n.as_bytes());
        b.put_u64_le(*v);
    }
    b.put_u32_le(e.status_at as u32);
    b.put_u32_le(e.meta_status_at.map_or(u32::MAX, |m| m as u32));
    b.put_u64_le(e.digest);
    b.put_u64_le(e.expires_at_ms);
    b.put_u64_le(e.diag.found_rows);
    b.put_u64_le(e.diag.rows);
    b.put_u32_le(e.bytes.len() as u32);
    b.put_slice(&e.bytes);
    let sum = xxhash_rust::xxh3::xxh3_64(&b);
    b.put_u64_le(sum);
    b.to_vec()
}

pub fn decode(raw: &[u8]) -> Result<L2Entry, L2Error> {
    let bad = L2Error::Malformed;
    if raw.len() < 8 {
        return Err(bad("short entry"));
    }
    let (body, sum) = raw.split_at(raw.len() - 8);
    let sum = u64::from_le_bytes(sum.try_into().map_err(|_| bad("checksum"))?);
    if xxhash_rust::xxh3::xxh3_64(body) != sum {
        return Err(bad("checksum mismatch"));
    }
    let mut r = Reader(body);
    if r.take(4)? != MAGIC {
        return Err(bad("not a qcache entry"));
    }
    let n = r.u16()? as usize;
    let mut stamps = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let len = r.u16()? as usize;
        let name = std::str::from_utf8(r.take(len)?).map_err(|_| bad("dependency name"))?;
        stamps.push((name.to_string(), r.u64()?));
    }
    let status_at = r.u32()? as usize;
    let meta = r.u32()?;
    let digest = r.u64()?;
    let expires_at_ms = r.u64()?;
    let diag = EntryDiagnostics {
        found_rows: r.u64()?,
        rows: r.u64()?,
    };
    let len = r.u32()? as usize;
    let bytes = Bytes::copy_from_slice(r.take(len)?);
    if !r.0.is_empty() {
        return Err(bad("trailing bytes"));
    }
    // The offsets a hit patches must lie inside the bytes (as `Entry::is_well_formed`).
    let fits = |at: usize| at.checked_add(2).is_some_and(|end| end <= bytes.len());
    if !fits(status_at)
        || (meta != u32::MAX && !(fits(meta as usize) && (meta as usize) < status_at))
    {
        return Err(bad("status offsets"));
    }
    Ok(L2Entry {
        stamps,
        bytes,
        status_at,
        meta_status_at: (meta != u32::MAX).then_some(meta as usize),
        digest,
        expires_at_ms,
        diag,
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], L2Error> {
        if self.0.len() < n {
            return Err(L2Error::Malformed("truncated entry"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, L2Error> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().unwrap_or([0; 2]),
        ))
    }
    fn u32(&mut self) -> Result<u32, L2Error> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or([0; 4]),
        ))
    }
    fn u64(&mut self) -> Result<u64, L2Error> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or([0; 8]),
        ))
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Raises each version of KEYS to `max(current + 1, Redis time in µs)` and publishes the
/// bump (ARGV[1] channel, ARGV[2] message); ARGV[2 + i] is `h` when KEYS[i] is a hash whose
/// field `v` holds the version. Time keeps a version that was lost (eviction, FLUSHALL) from
/// coming back lower than before. ARGV[3 + #KEYS], when not empty, is the fleet's raise
/// counter (see `L2::raises_seen`): incremented with the raise, its value returned.
const BUMP_LUA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = '0'
for i, k in ipairs(KEYS) do
  local h = ARGV[2 + i] == 'h'
  local cur
  if h then cur = redis.call('HGET', k, 'v') else cur = redis.call('GET', k) end
  local v = (tonumber(cur or '0') or 0) + 1
  if now > v then v = now end
  s = string.format('%.0f', v)
  if h then redis.call('HSET', k, 'v', s) else redis.call('SET', k, s) end
end
if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
local c = ARGV[3 + #KEYS]
if c and c ~= '' then return redis.call('INCR', c) end
return 0
";

/// A write with known rows to one table: for every column registered in the table's
/// unknown-rows hash (KEYS[2], fields `r:<id>`), raises the versions of the slices the write
/// names in it (ARGV pairs from 7 on: column id, comma-separated indexes), or the column's
/// unknown version when it names none; then the table's all-writes version (KEYS[1]), and
/// publishes (ARGV[1], ARGV[2]). ARGV[3] and ARGV[4] begin the keys of column and slice
/// versions, ARGV[5] ends them (the table's hash tag); ARGV[6], when not empty, is the
/// fleet's raise counter, incremented and returned as in [`BUMP_LUA`]. Atomic with the
/// registrations a read makes before reading its versions: a write either sees a read's
/// column or is older than the read's versions.
const ROWS_LUA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function raise(k)
  local v = (tonumber(redis.call('GET', k) or '0') or 0) + 1
  if now > v then v = now end
  redis.call('SET', k, string.format('%.0f', v))
end
local known = {}
for i = 7, #ARGV, 2 do known[ARGV[i]] = ARGV[i + 1] end
for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
  if string.sub(f, 1, 2) == 'r:' then
    local id = string.sub(f, 3)
    local list = known[id]
    if list then
      for idx in string.gmatch(list, '[^,]+') do
        raise(ARGV[4] .. id .. ':' .. idx .. ':' .. ARGV[5])
      end
    else
      raise(ARGV[3] .. id .. ':' .. ARGV[5])
    end
  end
end
raise(KEYS[1])
if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
if ARGV[6] ~= '' then return redis.call('INCR', ARGV[6]) end
return 0
";

/// What L2 needs to know of this instance's binlog tail (implemented by
/// `invalidation::binlog::BinlogHandle`; a trait so that the cache does not import the tail).
pub trait TailStatus: Send + Sync {
    /// The stream is up and applied.
    fn connected(&self) -> bool;
    /// How many times the stream ended: a new value names a new watch.
    fn reconnects(&self) -> u64;
    /// Streams (true) or stands by (false), as the fleet's lease decides (`tails`).
    fn set_streaming(&self, on: bool);
    /// Another instance's tail was heard, at most `behind` the server: a standby's stand-in
    /// for its own stream.
    fn heard(&self, behind: std::time::Duration);
    /// How far behind the server the stream may be (`policy::lag`); None: unknown.
    fn behind(&self) -> Option<std::time::Duration>;
    /// The stream's position (file, offset), for the heartbeat.
    fn position(&self) -> Option<(String, u64)>;
    /// The tail is off for good: nothing to stream, no slot to hold.
    fn is_off(&self) -> bool;
}

/// Refreshes this tail's heartbeat (ARGV[1], empty for none), drops its previous one
/// (ARGV[2]) and heartbeats older than a minute; returns Redis time in µs.
const TAILS_LUA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[2] ~= '' then redis.call('ZREM', KEYS[1], ARGV[2]) end
if ARGV[1] ~= '' then redis.call('ZADD', KEYS[1], now, ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000000)
return string.format('%.0f', now)
";

/// 1 when a tail other than ARGV[2] (an id prefix) heartbeated at or after ARGV[1] (µs).
const OTHER_TAIL_LUA: &str = r"
local m = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')
for _, x in ipairs(m) do
  if string.sub(x, 1, #ARGV[2]) ~= ARGV[2] then return 1 end
end
return 0
";

/// How long a tail that (re)started waits for another tail's heartbeat before it
/// invalidates every L2 entry: several heartbeat periods.
const GAP_WAIT: Duration = Duration::from_millis(1500);

/// Registers slice columns, then reads versions. KEYS[1..n] are versions (n = ARGV[1];
/// ARGV[1 + i] is `h` for a hash whose field `v` holds it), KEYS[n + 1..] unknown-rows hashes
/// to register the column ARGV[1 + j] in (field `r:<id>`). A missing version is created at
/// Redis time, which is above any value it had, so entries stamped before it was lost stay
/// stale; so is a hash that registrations create (its registrations are lost with it, and
/// with them the version every sliced entry of the table stamps).
const READ_LUA: &str = r"
local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local n = tonumber(ARGV[1])
for j = n + 1, #KEYS do
  redis.call('HSETNX', KEYS[j], 'v', now)
  redis.call('HSET', KEYS[j], 'r:' .. ARGV[1 + j], '1')
end
local out = {}
for i = 1, n do
  local k = KEYS[i]
  local v
  if ARGV[1 + i] == 'h' then
    v = redis.call('HGET', k, 'v')
    if not v then redis.call('HSET', k, 'v', now); v = now end
  else
    v = redis.call('GET', k)
    if not v then redis.call('SET', k, now); v = now end
  end
  out[i] = v
end
return out
";

/// One connection to a standalone Redis or to a cluster.
#[derive(Clone)]
enum Conn {
    One(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// Counters behind `Qcache_l2_*` and `/metrics`.
#[derive(Debug, Default)]
pub struct L2Stats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Entries found whose versions had moved (the fill race and ordinary staleness).
    pub stale: AtomicU64,
    /// Values that were not a well-formed entry, or version lists that did not match.
    pub malformed: AtomicU64,
    /// Operations that failed or timed out.
    pub errors: AtomicU64,
    pub stores: AtomicU64,
    pub store_bytes: AtomicU64,
    pub hit_bytes: AtomicU64,
    pub too_large: AtomicU64,
    /// Versions raised in L2 (one per dependency).
    pub bumps: AtomicU64,
    /// Bumps learned from other instances over the channel.
    pub notifications: AtomicU64,
    /// Strict mode: hits checked against L2, and those refused.
    pub remote_checks: AtomicU64,
    pub remote_rejects: AtomicU64,
    /// Misses that waited for another instance's fill lease, and of those, served from it.
    pub lease_waits: AtomicU64,
    pub lease_served: AtomicU64,
    /// Healthy → down transitions, and down → healthy ones.
    pub downs: AtomicU64,
    pub recoveries: AtomicU64,
    /// Times the notification channel was lost (each drops every L1 entry).
    pub notify_losses: AtomicU64,
    /// Binlog gaps of this instance's tail another tail watched through, and those nobody
    /// did (each invalidated every L2 entry).
    pub gaps_covered: AtomicU64,
    pub gaps_uncovered: AtomicU64,
    /// Reconnections to a Redis that was not the one followed before (`policy::l2::Adoption`):
    /// entries from before it were invalidated.
    pub rollbacks: AtomicU64,
    /// Version reads that needed the script (a version to create, a column to register):
    /// the rest were plain MGET/HMGET.
    pub script_reads: AtomicU64,
    /// Every L2 round trip.
    pub latency: LatencyHistogram,
}

/// A write with known rows to one table, to raise in L2 (`ROWS_LUA`): the table's id, and
/// per column it names (by column id) the slice indexes of its values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RowsBump {
    tid: String,
    known: Vec<(u64, Vec<u32>)>,
}

impl RowsBump {
    /// The channel message: `r:<id>=<i>,<i>;<id>=…` then a space and the table id (last, as
    /// it may hold spaces).
    fn message(&self) -> String {
        let list: Vec<String> = self
            .known
            .iter()
            .map(|(id, idx)| {
                let idx: Vec<String> = idx.iter().map(u32::to_string).collect();
                format!("{id:016x}={}", idx.join(","))
            })
            .collect();
        format!("r:{} {}", list.join(";"), self.tid)
    }

    /// `message` back (without the `r:`), None when it is not one.
    fn parse(body: &str) -> Option<RowsBump> {
        let (list, tid) = body.split_once(' ')?;
        let mut known = Vec::new();
        for col in list.split(';').filter(|c| !c.is_empty()) {
            let (id, idx) = col.split_once('=')?;
            let id = u64::from_str_radix(id, 16).ok()?;
            let idx = idx
                .split(',')
                .filter(|i| !i.is_empty())
                .map(|i| i.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            known.push((id, idx));
        }
        Some(RowsBump {
            tid: tid.to_string(),
            known,
        })
    }
}

/// What is waiting to be raised: whole dependencies, and writes with known rows.
#[derive(Debug, Default, Clone)]
struct Raises {
    deps: Vec<String>,
    rows: Vec<RowsBump>,
}

impl Raises {
    fn len(&self) -> usize {
        self.deps.len() + self.rows.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For the resync after a failure: writes with known rows become their tables' whole
    /// bumps (coarser, never staler; the precise ones may or may not have landed).
    fn coarse(self) -> Vec<String> {
        let mut deps = self.deps;
        deps.extend(self.rows.into_iter().map(|r| format!("t:{}", r.tid)));
        deps
    }
}

#[derive(Default)]
struct Queue {
    /// Sequence of the last dependency queued.
    seq: u64,
    deps: BTreeSet<String>,
    rows: Vec<RowsBump>,
    /// Too many to keep one by one: raise `e` instead.
    overflow: bool,
    /// The batch the bump task took and is raising (its sequence, coarse): a resync after a
    /// reconnect raises it too, since it moves `done` past it while the batch's own script
    /// may still be waiting in a stalled Redis (never run, or run after the resync).
    in_flight: Option<(u64, Vec<String>)>,
}

impl Queue {
    fn full(&mut self) -> bool {
        self.seq += 1;
        if self.overflow {
            return true;
        }
        if self.deps.len() + self.rows.len() >= MAX_QUEUED_DEPS {
            self.overflow = true;
            self.deps.clear();
            self.rows.clear();
            return true;
        }
        false
    }

    fn push(&mut self, d: String) {
        if !self.full() {
            self.deps.insert(d);
        }
    }

    fn push_rows(&mut self, r: RowsBump) {
        if !self.full() {
            self.rows.push(r);
        }
    }

    fn take(&mut self) -> (u64, Raises) {
        let overflow = std::mem::take(&mut self.overflow);
        let mut deps: Vec<String> = std::mem::take(&mut self.deps).into_iter().collect();
        let mut rows = std::mem::take(&mut self.rows);
        if overflow {
            deps = vec!["e".to_string()];
            rows.clear();
        }
        (self.seq, Raises { deps, rows })
    }
}

/// A read's dependencies and the Redis keys a lookup of them reads ([`L2::read_of`]):
/// version keys (and whether each is a hash) and registrations (unknown-rows hash, column
/// id in hex).
#[derive(Debug)]
pub struct L2Read {
    pub deps: L2Deps,
    vkeys: Vec<(String, bool)>,
    regs: Vec<(String, String)>,
    /// The version commands on a lookup connection of our own, when L2 has them.
    raw: Option<RawPlan>,
}

/// A lookup's version commands for a standalone Redis, encoded once (`l2::resp`), and
/// how their replies map to the read's versions: one MGET of the plain keys (their
/// positions), then per hash an HMGET of `v` (at that position, if it is one) and of as
/// many registration fields.
#[derive(Debug)]
struct RawPlan {
    request: Vec<u8>,
    plain: Vec<usize>,
    hashes: Vec<(Option<usize>, usize)>,
}

impl RawPlan {
    /// As [`L2::read_plain`] groups them on a standalone Redis.
    fn new(keys: &[(String, bool)], regs: &[(String, String)]) -> RawPlan {
        let mut plain = Vec::new();
        let mut hashes: Vec<(&str, Option<usize>, Vec<&str>)> = Vec::new();
        for (i, (k, hash)) in keys.iter().enumerate() {
            if *hash {
                hashes.push((k, Some(i), Vec::new()));
            } else {
                plain.push(i);
            }
        }
        for (h, id) in regs {
            match hashes.iter_mut().find(|(k, _, _)| *k == h.as_str()) {
                Some((_, _, f)) => f.push(id),
                None => hashes.push((h, None, vec![id])),
            }
        }
        let mut request = Vec::new();
        if !plain.is_empty() {
            let mut args: Vec<&[u8]> = vec![b"MGET"];
            args.extend(plain.iter().map(|i| keys[*i].0.as_bytes()));
            resp::command(&mut request, &args);
        }
        for (h, _, ids) in &hashes {
            let fields: Vec<String> = ids.iter().map(|id| format!("r:{id}")).collect();
            let mut args: Vec<&[u8]> = vec![b"HMGET", h.as_bytes(), b"v"];
            args.extend(fields.iter().map(|f| f.as_bytes()));
            resp::command(&mut request, &args);
        }
        RawPlan {
            request,
            plain,
            hashes: hashes.iter().map(|(_, at, ids)| (*at, ids.len())).collect(),
        }
    }

    /// The replies to `GET <entry>` then [`request`](Self::request), read from `buf`: the
    /// versions (None when one is missing or a column is not registered: the script's job,
    /// as in `read_plain`) and the entry. Ok(None) while incomplete; Err for anything but
    /// exactly these replies (the connection is then dropped, the lookup a miss).
    fn replies(&self, buf: &[u8], max_bulk: usize) -> Result<Option<RawReplies>, L2Error> {
        let mut at = 0;
        macro_rules! next {
            () => {
                match resp::next(buf, at, max_bulk).map_err(L2Error::Malformed)? {
                    None => return Ok(None),
                    Some((Reply::Error(e), _)) => {
                        return Err(L2Error::ErrorReply(String::from_utf8_lossy(e).into()))
                    }
                    Some((r, n)) => {
                        at = n;
                        r
                    }
                }
            };
        }
        let entry = match next!() {
            Reply::Nil => None,
            Reply::Bulk(b) => Some(b),
            _ => return Err(L2Error::Malformed("entry reply")),
        };
        let mut out: Vec<Option<u64>> = vec![None; self.len()];
        if !self.plain.is_empty() {
            if next!() != Reply::Array(self.plain.len()) {
                return Err(L2Error::Malformed("version reply"));
            }
            for i in &self.plain {
                out[*i] = resp::version(next!()).map_err(L2Error::Malformed)?;
            }
        }
        let mut complete = true;
        for (pos, regs) in &self.hashes {
            if next!() != Reply::Array(1 + regs) {
                return Err(L2Error::Malformed("version reply"));
            }
            let v = resp::version(next!()).map_err(L2Error::Malformed)?;
            if let Some(i) = pos {
                out[*i] = v;
            }
            for _ in 0..*regs {
                // A column not registered yet (or a hash that went): the script's job.
                match next!() {
                    Reply::Nil => complete = false,
                    Reply::Bulk(_) => {}
                    _ => return Err(L2Error::Malformed("registration reply")),
                }
            }
        }
        if at != buf.len() {
            return Err(L2Error::Malformed("more replies than commands"));
        }
        let versions = out.into_iter().collect::<Option<Vec<u64>>>();
        Ok(Some((
            versions.filter(|_| complete),
            entry.map(<[u8]>::to_vec),
        )))
    }

    /// How many versions the read has.
    fn len(&self) -> usize {
        self.plain.len() + self.hashes.iter().filter(|(at, _)| at.is_some()).count()
    }
}

/// The versions read (None: the script must run) and the entry, if any.
type RawReplies = (Option<Vec<u64>>, Option<Vec<u8>>);

/// Where the lookup connections of our own go: a standalone Redis over plain TCP (TLS, a
/// Unix socket or a cluster: lookups go through redis-rs like everything else).
#[derive(Debug)]
struct RawTarget {
    host: String,
    port: u16,
    db: i64,
    username: Option<String>,
    password: Option<String>,
}

impl RawTarget {
    fn of(cfg: &L2Config) -> Option<RawTarget> {
        let L2Url::One(url) = &cfg.url else {
            return None;
        };
        if !url.starts_with("redis://") {
            return None;
        }
        let client = redis::Client::open(url.as_str()).ok()?;
        let info = client.get_connection_info();
        let redis::ConnectionAddr::Tcp(host, port) = info.addr() else {
            return None;
        };
        let r = info.redis_settings();
        Some(RawTarget {
            host: host.clone(),
            port: *port,
            db: r.db(),
            username: r.username().map(str::to_string),
            password: r.password().map(str::to_string),
        })
    }
}

/// Lookup connections of our own open at most per instance; past it, lookups share the
/// redis-rs connection.
const RAW_MAX: usize = 16;

/// A lookup connection of our own: RESP2 (no HELLO), taken from the pool for one exchange
/// and put back only after a complete, well-formed one, so a pooled connection is never in
/// the middle of a reply. Counted in `open` while it lives.
struct RawConn {
    stream: tokio::net::TcpStream,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    open: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for RawConn {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl RawConn {
    async fn connect(
        t: &RawTarget,
        open: &Arc<std::sync::atomic::AtomicUsize>,
    ) -> Result<RawConn, L2Error> {
        let stream = tokio::net::TcpStream::connect((t.host.as_str(), t.port)).await?;
        stream.set_nodelay(true)?;
        open.fetch_add(1, Ordering::AcqRel);
        let mut c = RawConn {
            stream,
            rbuf: Vec::with_capacity(16 * 1024),
            wbuf: Vec::with_capacity(1024),
            open: open.clone(),
        };
        let mut expect = 0;
        if let Some(p) = &t.password {
            match &t.username {
                Some(u) => resp::command(&mut c.wbuf, &[b"AUTH", u.as_bytes(), p.as_bytes()]),
                None => resp::command(&mut c.wbuf, &[b"AUTH", p.as_bytes()]),
            }
            expect += 1;
        }
        if t.db != 0 {
            let db = t.db.to_string();
            resp::command(&mut c.wbuf, &[b"SELECT", db.as_bytes()]);
            expect += 1;
        }
        if expect > 0 {
            c.send().await?;
            loop {
                let mut at = 0;
                let mut got = 0;
                while got < expect {
                    match resp::next(&c.rbuf, at, 0).map_err(L2Error::Malformed)? {
                        None => break,
                        Some((Reply::Status(_), n)) => {
                            at = n;
                            got += 1;
                        }
                        Some((Reply::Error(e), _)) => {
                            return Err(L2Error::ErrorReply(String::from_utf8_lossy(e).into()))
                        }
                        Some(_) => return Err(L2Error::Malformed("handshake reply")),
                    }
                }
                if got == expect {
                    if at != c.rbuf.len() {
                        return Err(L2Error::Malformed("more replies than commands"));
                    }
                    break;
                }
                c.fill().await?;
            }
        }
        Ok(c)
    }

    /// Writes `wbuf` and clears the read buffer for the replies.
    async fn send(&mut self) -> Result<(), L2Error> {
        use tokio::io::AsyncWriteExt;
        self.stream.write_all(&self.wbuf).await?;
        self.rbuf.clear();
        Ok(())
    }

    /// Reads more reply bytes.
    async fn fill(&mut self) -> Result<(), L2Error> {
        use tokio::io::AsyncReadExt;
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        if self.stream.read_buf(&mut self.rbuf).await? == 0 {
            return Err(L2Error::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(())
    }
}

/// What [`L2::lookup`] found.
#[derive(Debug)]
pub enum Lookup {
    /// A current entry, with the versions that vouch for it.
    Hit(L2Entry, L2Stamps),
    /// Nothing servable; the versions read now are the stamps for this read's fill.
    Miss(L2Stamps),
    /// L2 cannot be used for this read.
    Unavailable,
}

/// The second level. One per qcache instance (`Shared::l2`).
pub struct L2 {
    cfg: L2Config,
    /// Random per process: the channel's own messages are recognised and skipped.
    id: String,
    conn: ArcSwapOption<Conn>,
    healthy: AtomicBool,
    /// Set while the notification channel is subscribed.
    notify_up: AtomicBool,
    /// Wall-clock ms when the channel was last subscribed (0: never).
    notify_since_ms: AtomicU64,
    versions: Arc<Versions>,
    queue: Mutex<Queue>,
    /// Bumps that could not be raised while L2 was down: raised before it is used again.
    resync: Mutex<Queue>,
    /// Shared with the tasks, which hold the L2 itself only weakly.
    wake_bumper: Arc<Notify>,
    wake_health: Arc<Notify>,
    /// Sequence of the last queued bump that has been raised (or given up on).
    done: watch::Sender<u64>,
    /// The queue's sequence when L2 last became healthy: the bumps up to it were queued
    /// while it was down, their writes acknowledged without waiting for them, so L2 is not
    /// read until they are raised too (`done` past it).
    readable_from: AtomicU64,
    /// Moves on every healthy → down transition, so the subscriber restarts.
    down_gen: watch::Sender<u64>,
    bump: Script,
    rows: Script,
    /// Column ids from this instance's catalog; None: writes with known rows are raised as
    /// whole-table bumps and no read slices in L2.
    columns: Option<ColumnIds>,
    /// Where learned bumps go ([`OnLearned`]).
    learned: OnLearned,
    read: Script,
    tails: Script,
    other_tail: Script,
    /// This instance's binlog tail, whose heartbeat tells others it watches.
    tail: Option<Arc<dyn TailStatus>>,
    /// Set when the tail lost or (re)started its stream, until [`L2::resolve_gap`] decided
    /// whether the fleet's entries must go; L2 is not read meanwhile.
    gap_pending: AtomicBool,
    /// Set while the server this instance follows is adopted again on the connection in use
    /// ([`Recheck::Readopt`]): L2 is not read meanwhile, raises still land.
    adopting: AtomicBool,
    /// Set from a check that found another server behind the connection
    /// ([`Recheck::Reconnect`]) until the reconnection that adopts it ends: writes still
    /// wait for their raises meanwhile (`policy::l2::write_waits`).
    reconnecting: AtomicBool,
    /// The heartbeat member last written, to replace it.
    heartbeat: Mutex<Option<String>>,
    /// The fleet's binlog lease (`l2.binlog_tails` > 0 with a tail): who streams.
    fleet: Option<tails::Tails>,
    /// The identity (`policy::l2::identity`) of the Redis whose data this instance last
    /// adopted
    /// (`policy::l2::Adoption`).
    identity: Mutex<Option<String>>,
    /// The highest value of the fleet's raise counter (key `raises`) this instance's raises
    /// and checks saw; 0 before any, and in a cluster (where the counter would be a key of
    /// another slot). A Redis whose data went back (an older dump loaded in the same
    /// process, keys restored over it) may keep its identity, but not the counter: the
    /// raise scripts move it with the versions, so no copy of the data has the one without
    /// the other, and a count lower than this is data that lost raises
    /// (`policy::l2::adopt`).
    raises_seen: AtomicU64,
    /// The stamp of the marker this instance last saw or wrote (`policy::l2::marker_value`;
    /// 0: none): a marker stamped earlier is data that went back.
    marker_stamp: AtomicU64,
    pub stats: L2Stats,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Lookups' own connections (`RawConn`): where they go, the idle ones, how many are
    /// open.
    raw: Option<RawTarget>,
    raw_pool: Mutex<Vec<RawConn>>,
    raw_open: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Debug for L2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("L2")
            .field("healthy", &self.healthy())
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for L2 {
    fn drop(&mut self) {
        if let Ok(t) = self.tasks.lock() {
            for h in t.iter() {
                h.abort();
            }
        }
    }
}

/// Queues every local bump for L2; holds the L2 weakly, as L2 holds the versions.
struct Sink(Weak<L2>);

impl BumpSink for Sink {
    fn table(&self, schema: &str, name: &str) {
        if let Some(l2) = self.0.upgrade() {
            l2.enqueue(table_dep(schema, name));
        }
    }
    fn rows(&self, schema: &str, name: &str, known: &[(String, Vec<u32>)]) {
        let Some(l2) = self.0.upgrade() else { return };
        let Some(ids) = &l2.columns else {
            l2.enqueue(table_dep(schema, name));
            return;
        };
        // A column this catalog cannot name is left out: unknown to the script, which then
        // raises that column's unknown version wherever it is registered.
        let known = known
            .iter()
            .filter_map(|(c, idx)| Some((ids(schema, name, c)?, idx.clone())))
            .collect();
        if let Ok(mut q) = l2.queue.lock() {
            q.push_rows(RowsBump {
                tid: table_id(schema, name),
                known,
            });
        }
        l2.wake_bumper.notify_one();
    }
    fn schema(&self, schema: &str) {
        if let Some(l2) = self.0.upgrade() {
            l2.enqueue(schema_dep(schema));
        }
    }
    fn all(&self) {
        if let Some(l2) = self.0.upgrade() {
            l2.enqueue("e".into());
        }
    }
    fn gap(&self) {
        if let Some(l2) = self.0.upgrade() {
            l2.gap_pending.store(true, Ordering::Release);
            l2.wake_health.notify_one();
        }
    }
}

impl L2 {
    /// The channel is subscribed: from here every bump is seen; what went before may not
    /// have been (the first time: this instance's start, its sessions as new as any).
    fn subscribed(&self) {
        let first = self.notify_since_ms.load(Ordering::Acquire) == 0;
        (self.learned)(if first {
            Learned::Everything
        } else {
            Learned::Missed
        });
        self.notify_since_ms.store(now_ms(), Ordering::Release);
        self.notify_up.store(true, Ordering::Release);
    }

    /// Starts the L2 client in the background of the current runtime: it is down until the
    /// first connection succeeds, and never blocks the caller.
    pub fn start(
        cfg: L2Config,
        versions: Arc<Versions>,
        tail: Option<Arc<dyn TailStatus>>,
        columns: Option<ColumnIds>,
        learned: OnLearned,
    ) -> Arc<L2> {
        let id = format!("{:016x}", crate::config::random_id());
        let raw = RawTarget::of(&cfg);
        let (cfg_tails, has_tail) = (cfg.binlog_tails, tail.is_some());
        let l2 = Arc::new(L2 {
            cfg,
            id,
            conn: ArcSwapOption::empty(),
            healthy: AtomicBool::new(false),
            notify_up: AtomicBool::new(false),
            notify_since_ms: AtomicU64::new(0),
            versions: versions.clone(),
            queue: Mutex::new(Queue::default()),
            resync: Mutex::new(Queue::default()),
            wake_bumper: Arc::new(Notify::new()),
            wake_health: Arc::new(Notify::new()),
            done: watch::Sender::new(0),
            readable_from: AtomicU64::new(0),
            down_gen: watch::Sender::new(0),
            bump: Script::new(BUMP_LUA),
            rows: Script::new(ROWS_LUA),
            columns,
            learned,
            read: Script::new(READ_LUA),
            tails: Script::new(TAILS_LUA),
            other_tail: Script::new(OTHER_TAIL_LUA),
            tail,
            gap_pending: AtomicBool::new(false),
            adopting: AtomicBool::new(false),
            reconnecting: AtomicBool::new(false),
            heartbeat: Mutex::new(None),
            fleet: (cfg_tails > 0 && has_tail).then(|| tails::Tails::new(cfg_tails)),
            identity: Mutex::new(None),
            raises_seen: AtomicU64::new(0),
            marker_stamp: AtomicU64::new(0),
            stats: L2Stats::default(),
            tasks: Mutex::new(Vec::new()),
            raw,
            raw_pool: Mutex::new(Vec::new()),
            raw_open: Arc::default(),
        });
        versions.set_sink(Arc::new(Sink(Arc::downgrade(&l2))));
        let mut handles = vec![
            tokio::spawn(health_task(Arc::downgrade(&l2), l2.wake_health.clone())).abort_handle(),
            tokio::spawn(bump_task(Arc::downgrade(&l2), l2.wake_bumper.clone())).abort_handle(),
            tokio::spawn(subscribe_task(Arc::downgrade(&l2))).abort_handle(),
        ];
        if l2.fleet.is_some() {
            handles.push(tokio::spawn(tails::lease_task(Arc::downgrade(&l2))).abort_handle());
        }
        if let Ok(mut t) = l2.tasks.lock() {
            *t = handles;
        }
        l2
    }

    pub fn config(&self) -> &L2Config {
        &self.cfg
    }

    /// What a read of `whole` tables and `sliced` ones depends on in L2 (slices only with
    /// column ids from the catalog).
    pub fn deps(&self, whole: &[TableHandle], sliced: &[SlicePlan]) -> L2Deps {
        match &self.columns {
            Some(ids) => deps_with_slices(whole, sliced, ids.as_ref()),
            None => {
                let all: Vec<TableHandle> = whole
                    .iter()
                    .cloned()
                    .chain(sliced.iter().map(|p| p.table.clone()))
                    .collect();
                deps_of(&all)
            }
        }
    }

    /// `deps` with the keys a lookup of them reads (`L2::lookup`): made once per slice plan
    /// (`cache::sliceplans`), not per lookup.
    pub fn read_of(&self, deps: L2Deps) -> L2Read {
        let vkeys: Vec<(String, bool)> = deps.deps.iter().map(|d| self.version_key(d)).collect();
        let regs: Vec<(String, String)> = deps
            .registers
            .iter()
            .map(|(tid, col)| {
                let mut id = String::with_capacity(16);
                push_hex(&mut id, u128::from(*col), 16);
                (self.unknown_key(tid), id)
            })
            .collect();
        let raw = self.raw.as_ref().map(|_| RawPlan::new(&vkeys, &regs));
        L2Read {
            deps,
            vkeys,
            regs,
            raw,
        }
    }

    /// Whether L2 may be used now: connected, and every bump it missed raised since.
    pub fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    pub fn remote_validation(&self) -> bool {
        self.cfg.validate_hits == ValidateHits::Remote
    }

    pub fn notifications_up(&self) -> bool {
        self.notify_up.load(Ordering::Acquire)
    }

    fn key(&self, kind: &str, rest: &str) -> String {
        format!("{}{kind}:{rest}", self.cfg.key_prefix)
    }

    fn entry_key(&self, k: Key) -> String {
        let mut s = String::with_capacity(self.cfg.key_prefix.len() + 34);
        s.push_str(&self.cfg.key_prefix);
        s.push_str("e:");
        push_hex(&mut s, k, 32);
        s
    }

    /// A version's key, and whether it is a hash (`u:`, whose field `v` holds it).
    fn version_key(&self, dep: &str) -> (String, bool) {
        let mut k = String::with_capacity(self.cfg.key_prefix.len() + dep.len() + 4);
        k.push_str(&self.cfg.key_prefix);
        k.push_str("v:");
        match split_table_dep(dep) {
            // The table id as hash tag: every version of one table in one cluster slot.
            Some((head, tid)) => {
                k.push_str(head);
                k.push('{');
                k.push_str(tid);
                k.push('}');
                (k, head == "u:")
            }
            None => {
                k.push_str(dep);
                (k, false)
            }
        }
    }

    /// The hash holding `tid`'s unknown-rows version and its registered slice columns.
    fn unknown_key(&self, tid: &str) -> String {
        format!("{}v:u:{{{tid}}}", self.cfg.key_prefix)
    }

    fn channel(&self) -> String {
        format!("{}bumps", self.cfg.key_prefix)
    }

    /// This instance's own heartbeat channel (`hb:<id>`), which only it subscribes to.
    fn heartbeat_channel(&self) -> String {
        format!("{}hb:{}", self.cfg.key_prefix, self.id)
    }

    fn enqueue(&self, dep: String) {
        if let Ok(mut q) = self.queue.lock() {
            q.push(dep);
        }
        self.wake_bumper.notify_one();
    }

    /// Waits (at most `l2.timeout`) until every bump queued so far is raised in L2: a write's
    /// OK goes to its client only after this. A Redis out of reach is not waited for
    /// (`policy::l2::write_waits`), nor a slow one past the timeout: what could not be raised
    /// is raised before L2 is used again (and L2 is not used until then).
    pub async fn flush(&self) {
        let target = match self.queue.lock() {
            Ok(q) => q.seq,
            Err(_) => return,
        };
        let mut rx = self.done.subscribe();
        let waits = crate::policy::l2::write_waits(
            self.healthy(),
            self.reconnecting.load(Ordering::Acquire),
        );
        if *rx.borrow() >= target || !waits {
            return;
        }
        let wait = rx.wait_for(|d| *d >= target);
        if tokio::time::timeout(self.cfg.timeout, wait).await.is_err() {
            self.mark_down("a write's version bumps timed out");
        }
    }

    /// How many bumps have been queued so far. Every bump tells the sink before it moves a
    /// local version (`cache::versions`), so bumps included in stamps read before this call
    /// are counted: once [`raised`](Self::raised) reaches it, L2 holds them all.
    pub fn queued(&self) -> u64 {
        self.queue.lock().map(|q| q.seq).unwrap_or(u64::MAX)
    }

    /// How many of the queued bumps have been raised in L2 (or given up on, which marks it
    /// down).
    pub fn raised(&self) -> u64 {
        *self.done.borrow()
    }

    /// Current connection, if L2 may be read and filled.
    fn usable_conn(&self) -> Option<Conn> {
        if !self.usable() {
            return None;
        }
        self.conn.load_full().map(|c| (*c).clone())
    }

    /// Connection for raising versions: they are raised even while a binlog gap is being
    /// decided.
    fn bump_conn(&self) -> Option<Conn> {
        if !self.healthy() {
            return None;
        }
        self.conn.load_full().map(|c| (*c).clone())
    }

    /// Whether reads may use L2 now (`policy::l2::readable`).
    pub fn usable(&self) -> bool {
        crate::policy::l2::readable(
            self.healthy(),
            self.raised(),
            self.readable_from.load(Ordering::Acquire),
            self.gap_pending.load(Ordering::Acquire),
            self.adopting.load(Ordering::Acquire),
        )
    }

    /// Runs `f` with the timeout, recording latency and errors; a failure marks L2 down.
    async fn timed<T, F>(&self, what: &'static str, f: F) -> Result<T, L2Error>
    where
        F: std::future::Future<Output = Result<T, L2Error>>,
    {
        let started = Instant::now();
        let r = match tokio::time::timeout(self.cfg.timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(L2Error::Timeout(self.cfg.timeout)),
        };
        self.stats.latency.observe(started.elapsed());
        if let Err(e) = &r {
            CacheStatsExt::incr(&self.stats.errors);
            if !matches!(e, L2Error::Malformed(_)) {
                self.mark_down(what);
            }
        }
        r
    }

    /// Reads the current versions of `keys` (key, is a hash) and checks that every column
    /// of `regs` (unknown-rows hash, column id) is registered, with plain commands and no
    /// script: one pipeline (GET of `ekey` too, when given) on a standalone Redis, one
    /// command per slot at once in a cluster. The versions are None when one is missing or
    /// a column is not registered yet: the caller then runs the script, which creates and
    /// registers. Sound without atomicity: a registration, once present, is seen by every
    /// later write (it goes only with its hash, and then the hash's `v` comes back higher
    /// than any entry's stamp), and a write that did not see it ran before this read ended,
    /// so before the query goes upstream; the versions are read before it too.
    async fn read_plain(
        conn: &mut Conn,
        ekey: Option<&str>,
        keys: &[(String, bool)],
        regs: &[(String, String)],
    ) -> Result<(Option<Vec<u64>>, Option<Vec<u8>>), L2Error> {
        let cluster = matches!(conn, Conn::Cluster(_));
        // Plain version keys: one MGET (per slot in a cluster: MGET must stay in one).
        let mut plain: Vec<(&str, Vec<usize>)> = Vec::new();
        // Hashes: HMGET of `v` (the version at that position, if it is one) and the
        // registration fields.
        let mut hashes: Vec<(&str, Option<usize>, Vec<&str>)> = Vec::new();
        for (i, (k, hash)) in keys.iter().enumerate() {
            if *hash {
                hashes.push((k, Some(i), Vec::new()));
            } else {
                let tag = if cluster { slot_tag(k) } else { "" };
                match plain.iter_mut().find(|(t, _)| *t == tag) {
                    Some((_, at)) => at.push(i),
                    None => plain.push((tag, vec![i])),
                }
            }
        }
        for (h, id) in regs {
            match hashes.iter_mut().find(|(k, _, _)| *k == h.as_str()) {
                Some((_, _, f)) => f.push(id),
                None => hashes.push((h, None, vec![id])),
            }
        }
        let mut cmds: Vec<Cmd> = Vec::with_capacity(1 + plain.len() + hashes.len());
        if let Some(e) = ekey {
            let mut c = redis::cmd("GET");
            c.arg(e);
            cmds.push(c);
        }
        for (_, at) in &plain {
            let mut c = redis::cmd("MGET");
            for i in at {
                c.arg(&keys[*i].0);
            }
            cmds.push(c);
        }
        let mut field = String::with_capacity(18);
        for (h, _, ids) in &hashes {
            let mut c = redis::cmd("HMGET");
            c.arg(*h).arg("v");
            for id in ids {
                field.clear();
                field.push_str("r:");
                field.push_str(id);
                c.arg(&field);
            }
            cmds.push(c);
        }
        let replies: Vec<Value> = match conn {
            Conn::One(_) => {
                let mut p = redis::pipe();
                for c in cmds {
                    p.add_command(c);
                }
                p.query_async(conn).await?
            }
            Conn::Cluster(_) => {
                let futs = cmds.iter().map(|c| {
                    let mut conn = conn.clone();
                    async move { c.query_async::<Value>(&mut conn).await }
                });
                futures::future::join_all(futs)
                    .await
                    .into_iter()
                    .collect::<Result<_, _>>()?
            }
        };
        let mut replies = replies.into_iter();
        let raw = match ekey {
            None => None,
            Some(_) => match replies.next() {
                Some(Value::Nil) => None,
                Some(Value::BulkString(b)) => Some(b),
                _ => return Err(L2Error::Malformed("entry reply")),
            },
        };
        let mut out: Vec<Option<u64>> = vec![None; keys.len()];
        let mut complete = true;
        for (_, at) in &plain {
            let Some(Value::Array(vs)) = replies.next() else {
                return Err(L2Error::Malformed("version reply"));
            };
            if vs.len() != at.len() {
                return Err(L2Error::Malformed("version reply"));
            }
            for (i, v) in at.iter().zip(vs) {
                out[*i] = version_value(v)?;
            }
        }
        for (_, at, ids) in &hashes {
            let Some(Value::Array(vs)) = replies.next() else {
                return Err(L2Error::Malformed("version reply"));
            };
            if vs.len() != 1 + ids.len() {
                return Err(L2Error::Malformed("version reply"));
            }
            let mut vs = vs.into_iter();
            let v = version_value(vs.next().unwrap_or(Value::Nil))?;
            if let Some(i) = at {
                out[*i] = v;
            }
            // A column not registered yet (or a hash that went): the script's job.
            complete &= vs.all(|r| !matches!(r, Value::Nil));
        }
        let versions = out.into_iter().collect::<Option<Vec<u64>>>();
        Ok((versions.filter(|_| complete), raw))
    }

    /// Registers `regs` (unknown-rows hash, column id) and reads the current versions of
    /// `keys` (key, is a hash), creating missing ones.
    async fn read_versions(
        conn: &mut Conn,
        read: &Script,
        keys: &[(String, bool)],
        regs: &[(String, String)],
    ) -> Result<Vec<u64>, L2Error> {
        let invoke = |keys: &[&(String, bool)], regs: &[&(String, String)]| {
            let mut inv = read.prepare_invoke();
            inv.arg(keys.len());
            for (k, hash) in keys {
                inv.key(k).arg(if *hash { "h" } else { "s" });
            }
            for (k, id) in regs {
                inv.key(k).arg(id);
            }
            inv
        };
        let raw: Vec<Value> = match conn {
            Conn::One(_) => {
                let keys: Vec<&(String, bool)> = keys.iter().collect();
                let regs: Vec<&(String, String)> = regs.iter().collect();
                invoke(&keys, &regs).invoke_async(conn).await?
            }
            // A script's keys must share a slot: one call per hash tag (a table's versions
            // and registrations together), concurrently.
            Conn::Cluster(_) => {
                let mut groups: Vec<SlotGroup> = Vec::new();
                for (i, (k, _)) in keys.iter().enumerate() {
                    SlotGroup::of(&mut groups, slot_tag(k)).keys.push(i);
                }
                for r in regs {
                    SlotGroup::of(&mut groups, slot_tag(&r.0)).regs.push(r);
                }
                let futs = groups.iter().map(|g| {
                    let mut c = conn.clone();
                    let ks: Vec<&(String, bool)> = g.keys.iter().map(|i| &keys[*i]).collect();
                    let inv = invoke(&ks, &g.regs);
                    async move { inv.invoke_async::<Vec<Value>>(&mut c).await }
                });
                let mut out = vec![Value::Nil; keys.len()];
                for (g, r) in groups.iter().zip(futures::future::join_all(futs).await) {
                    let v = r?;
                    if v.len() != g.keys.len() {
                        return Err(L2Error::Malformed("version reply"));
                    }
                    for (i, v) in g.keys.iter().zip(v) {
                        out[*i] = v;
                    }
                }
                out
            }
        };
        if raw.len() != keys.len() {
            return Err(L2Error::Malformed("version count"));
        }
        raw.into_iter()
            .map(|v| version_value(v)?.ok_or(L2Error::Malformed("version value")))
            .collect()
    }

    /// A lookup connection of our own: an idle one, or a new one while fewer than
    /// [`RAW_MAX`] are open; None: use the shared redis-rs connection.
    async fn raw_conn(&self, t: &RawTarget) -> Result<Option<RawConn>, L2Error> {
        if let Some(c) = self.raw_pool.lock().ok().and_then(|mut p| p.pop()) {
            return Ok(Some(c));
        }
        if self.raw_open.load(Ordering::Acquire) >= RAW_MAX {
            return Ok(None);
        }
        RawConn::connect(t, &self.raw_open).await.map(Some)
    }

    /// `read_plain` on a connection of our own: `GET` of the entry and the read's version
    /// commands written at once, the replies read in place (`l2::resp`).
    async fn read_raw(
        &self,
        mut c: RawConn,
        ekey: &str,
        plan: &RawPlan,
    ) -> Result<RawReplies, L2Error> {
        c.wbuf.clear();
        resp::command(&mut c.wbuf, &[b"GET", ekey.as_bytes()]);
        c.wbuf.extend_from_slice(&plan.request);
        c.send().await?;
        // An entry is at most `max_entry_bytes` of result and its header.
        let max_bulk = self.cfg.max_entry_bytes.saturating_add(64 * 1024);
        loop {
            if let Some(r) = plan.replies(&c.rbuf, max_bulk)? {
                if let Ok(mut p) = self.raw_pool.lock() {
                    if self.healthy() {
                        p.push(c);
                    }
                }
                return Ok(r);
            }
            c.fill().await?;
        }
    }

    /// Looks `key` up for a read depending on `read`: one round trip reads the entry and the
    /// current versions together (registering its slice columns first).
    pub async fn lookup(&self, key: Key, read: &L2Read) -> Lookup {
        let Some(mut conn) = self.usable_conn() else {
            return Lookup::Unavailable;
        };
        let deps = &read.deps.deps;
        let (vkeys, regs) = (&read.vkeys, &read.regs);
        let ekey = self.entry_key(key);
        let r = self
            .timed("lookup", async {
                // Plain commands first; the script only for a version to create or a column
                // to register (once per column and table, until the hash is lost).
                let raw_conn = match (&self.raw, &read.raw) {
                    (Some(t), Some(_)) => self.raw_conn(t).await?,
                    _ => None,
                };
                let (vers, raw) = match (raw_conn, &read.raw) {
                    (Some(c), Some(plan)) => self.read_raw(c, &ekey, plan).await?,
                    _ => Self::read_plain(&mut conn, Some(&ekey), vkeys, regs).await?,
                };
                let vers = match vers {
                    Some(v) => v,
                    None => {
                        CacheStatsExt::incr(&self.stats.script_reads);
                        Self::read_versions(&mut conn, &self.read, vkeys, regs).await?
                    }
                };
                Ok((vers, raw))
            })
            .await;
        let (current, raw) = match r {
            Ok(x) => x,
            Err(_) => return Lookup::Unavailable,
        };
        // The fill's stamps, made only when it comes to a fill.
        let miss = || -> L2Stamps { deps.iter().cloned().zip(current.iter().copied()).collect() };
        let Some(raw) = raw else {
            CacheStatsExt::incr(&self.stats.misses);
            return Lookup::Miss(miss());
        };
        let mut entry = match decode(&raw) {
            Ok(e) => e,
            Err(e) => {
                CacheStatsExt::incr(&self.stats.malformed);
                warn_once(&self.stats.malformed, &e);
                return Lookup::Miss(miss());
            }
        };
        let cur = deps
            .iter()
            .map(String::as_str)
            .zip(current.iter().map(|v| Some(*v)));
        let verdict = if self.cfg.unsafe_skip_version_check {
            L2Verdict::Serve
        } else {
            judge(&entry.stamps, cur)
        };
        let expired = entry.expires_at_ms != 0 && now_ms() >= entry.expires_at_ms;
        match verdict {
            L2Verdict::Serve if !expired => {
                CacheStatsExt::incr(&self.stats.hits);
                self.stats
                    .hit_bytes
                    .fetch_add(entry.bytes.len() as u64, Ordering::Relaxed);
                // The entry's own list moves to the stamps: nothing reads it after this.
                let stamps: L2Stamps = std::mem::take(&mut entry.stamps).into();
                Lookup::Hit(entry, stamps)
            }
            L2Verdict::Serve | L2Verdict::Stale => {
                CacheStatsExt::incr(&self.stats.stale);
                Lookup::Miss(miss())
            }
            L2Verdict::Mismatch | L2Verdict::MissingVersion => {
                CacheStatsExt::incr(&self.stats.malformed);
                Lookup::Miss(miss())
            }
        }
    }

    /// Strict mode: whether an entry with these L2 stamps is still current. None when L2
    /// cannot say (down or slow): the caller falls back to the local rule.
    pub async fn confirm(&self, stamps: &[(String, u64)]) -> Option<bool> {
        let mut conn = self.usable_conn()?;
        CacheStatsExt::incr(&self.stats.remote_checks);
        let vkeys: Vec<(String, bool)> = stamps.iter().map(|(d, _)| self.version_key(d)).collect();
        let current = self
            .timed("remote check", async {
                match Self::read_plain(&mut conn, None, &vkeys, &[]).await?.0 {
                    Some(v) => Ok(v),
                    None => {
                        CacheStatsExt::incr(&self.stats.script_reads);
                        Self::read_versions(&mut conn, &self.read, &vkeys, &[]).await
                    }
                }
            })
            .await
            .ok()?;
        let cur = stamps
            .iter()
            .map(|(d, _)| d.as_str())
            .zip(current.iter().map(|v| Some(*v)));
        let ok = judge(stamps, cur) == L2Verdict::Serve;
        if !ok {
            CacheStatsExt::incr(&self.stats.remote_rejects);
        }
        Some(ok)
    }

    /// Stores a filled entry in the background (the client already has its answer), and
    /// releases the fill lease when `leased`.
    pub fn store(self: &Arc<Self>, key: Key, entry: L2Entry, leased: bool) {
        if entry.bytes.len() > self.cfg.max_entry_bytes {
            CacheStatsExt::incr(&self.stats.too_large);
            if leased {
                self.release(key);
            }
            return;
        }
        let Some(mut conn) = self.usable_conn() else {
            return;
        };
        let me = self.clone();
        let ttl = match entry.expires_at_ms {
            0 => self.cfg.ttl,
            at => Duration::from_millis(at.saturating_sub(now_ms())).min(self.cfg.ttl),
        };
        tokio::spawn(async move {
            let value = encode(&entry);
            let n = value.len() as u64;
            let ekey = me.entry_key(key);
            let lkey = me.key("l", &format!("{key:032x}"));
            let r = me
                .timed("store", async {
                    let mut p = redis::pipe();
                    p.cmd("SET")
                        .arg(&ekey)
                        .arg(value)
                        .arg("PX")
                        .arg(ttl.as_millis().max(1) as u64)
                        .ignore();
                    if leased {
                        p.cmd("DEL").arg(&lkey).ignore();
                    }
                    match &mut conn {
                        // A cluster pipeline must stay within one slot; the lease and entry
                        // keys differ, so send them one by one there.
                        Conn::Cluster(_) => {
                            for c in p.cmd_iter() {
                                c.query_async::<Value>(&mut conn).await?;
                            }
                            Ok(())
                        }
                        Conn::One(_) => p.query_async::<()>(&mut conn).await.map_err(Into::into),
                    }
                })
                .await;
            if r.is_ok() {
                CacheStatsExt::incr(&me.stats.stores);
                me.stats.store_bytes.fetch_add(n, Ordering::Relaxed);
            }
        });
    }

    /// Tries to take the fill lease of `key`: true when this instance should fill (it holds
    /// the lease, leases are off, or L2 cannot say).
    pub async fn lease(&self, key: Key) -> bool {
        if self.cfg.lease.is_zero() {
            return true;
        }
        let Some(mut conn) = self.usable_conn() else {
            return true;
        };
        let lkey = self.key("l", &format!("{key:032x}"));
        let ms = self.cfg.lease.as_millis().max(1) as u64;
        let r = self
            .timed("lease", async {
                let mut cmd = redis::cmd("SET");
                cmd.arg(&lkey).arg(&self.id).arg("NX").arg("PX").arg(ms);
                cmd.query_async::<Option<String>>(&mut conn)
                    .await
                    .map_err(L2Error::from)
            })
            .await;
        !matches!(r, Ok(None))
    }

    fn release(self: &Arc<Self>, key: Key) {
        let Some(mut conn) = self.usable_conn() else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            let lkey = me.key("l", &format!("{key:032x}"));
            let _ = me
                .timed("release", async {
                    let mut cmd = redis::cmd("DEL");
                    cmd.arg(&lkey);
                    cmd.query_async::<Value>(&mut conn)
                        .await
                        .map(drop)
                        .map_err(L2Error::from)
                })
                .await;
        });
    }

    /// Lets go of a lease whose fill will not be stored.
    pub fn abandon(self: &Arc<Self>, key: Key) {
        if !self.cfg.lease.is_zero() {
            self.release(key);
        }
    }

    /// Another instance's write with known rows, from the channel: the local slices of the
    /// values it names, per column this instance slices on and whose id (from this catalog)
    /// matches the writer's; every other registered column's unknown version.
    fn apply_rows(&self, body: &str) {
        let parsed = RowsBump::parse(body).and_then(|r| match parse_dep(&format!("t:{}", r.tid)) {
            Some(Dep::Table(s, n)) => Some((s.to_string(), n.to_string(), r.known)),
            _ => None,
        });
        let Some((schema, name, known)) = parsed else {
            // Not understood: assume the worst.
            (self.learned)(Learned::Missed);
            return;
        };
        let learned = match &self.columns {
            Some(ids) => {
                let t = self.versions.table(&schema, &name);
                // The columns registered now; one registered after this is unknown for
                // this write, which bumps all of its slices.
                let indexes = t
                    .slice_columns()
                    .into_iter()
                    .filter_map(|col| {
                        let id = ids(&schema, &name, &col)?;
                        let (_, i) = known.iter().find(|(k, _)| *k == id)?;
                        Some((col, i.clone()))
                    })
                    .collect();
                Learned::Rows {
                    schema,
                    name,
                    indexes,
                }
            }
            None => Learned::Table(schema, name),
        };
        (self.learned)(learned);
    }

    /// Marks L2 down (once per outage: logged and counted) and wakes the reconnector.
    pub fn mark_down(&self, why: &str) {
        if self.healthy.swap(false, Ordering::AcqRel) {
            CacheStatsExt::incr(&self.stats.downs);
            warn!(
                reason = why,
                "L2 down: bypassed until it answers again and bumps are resynced"
            );
            self.down_gen.send_modify(|g| *g += 1);
        }
        if let Ok(mut p) = self.raw_pool.lock() {
            p.clear();
        }
        self.wake_health.notify_one();
    }

    /// Raises `r` in L2, all at once. Err leaves L2 down.
    async fn raise(&self, conn: &mut Conn, r: &Raises) -> Result<(), L2Error> {
        // Before the raise is sent: every count seen by then was the counter's before it.
        let seen = self.raises_seen.load(Ordering::Acquire);
        let channel = self.channel();
        let counter = match conn {
            Conn::Cluster(_) => String::new(),
            _ => self.key("raises", ""),
        };
        let whole = r.deps.iter().map(|d| {
            let mut c = conn.clone();
            let mut inv = self.bump.prepare_invoke();
            inv.arg(&channel).arg(format!("{} {d}", self.id));
            let mut keys = vec![self.version_key(d)];
            // A table's whole bump moves its unknown-rows version too: sliced entries stamp
            // that one, not the all-writes version.
            if let Some(tid) = d.strip_prefix("t:") {
                keys.push(self.version_key(&format!("u:{tid}")));
            }
            for (k, hash) in keys {
                inv.key(k).arg(if hash { "h" } else { "s" });
            }
            inv.arg(&counter);
            async move { inv.invoke_async::<Value>(&mut c).await }
        });
        let rows = r.rows.iter().map(|b| {
            let mut c = conn.clone();
            let mut inv = self.rows.prepare_invoke();
            let p = &self.cfg.key_prefix;
            inv.key(self.version_key(&format!("t:{}", b.tid)).0)
                .key(self.unknown_key(&b.tid))
                .arg(&channel)
                .arg(format!("{} {}", self.id, b.message()))
                .arg(format!("{p}v:c:"))
                .arg(format!("{p}v:k:"))
                .arg(format!("{{{}}}", b.tid))
                .arg(&counter);
            for (id, idx) in &b.known {
                let idx: Vec<String> = idx.iter().map(u32::to_string).collect();
                inv.arg(format!("{id:016x}")).arg(idx.join(","));
            }
            async move { inv.invoke_async::<Value>(&mut c).await }
        });
        let started = Instant::now();
        let all = futures::future::join(
            futures::future::join_all(whole),
            futures::future::join_all(rows),
        );
        let out = tokio::time::timeout(self.cfg.timeout, all).await;
        self.stats.latency.observe(started.elapsed());
        match out {
            Err(_) => Err(L2Error::Timeout(self.cfg.timeout)),
            Ok((a, b)) => {
                let mut went_back = false;
                for x in a.into_iter().chain(b) {
                    if let Value::Int(n) = x? {
                        let n = n.max(0) as u64;
                        went_back |= crate::policy::l2::raise_went_back(seen, n);
                        self.raises_seen.fetch_max(n, Ordering::AcqRel);
                    }
                }
                if went_back {
                    // The data lost raises (an older dump reloaded), whatever count later
                    // raises bring it back to: the next check, at once, adopts it anew.
                    self.raises_seen
                        .store(crate::policy::l2::RAISES_SUSPECT, Ordering::Release);
                    warn!("L2's raise count went back: checking whose data it holds");
                    self.wake_health.notify_one();
                }
                self.stats
                    .bumps
                    .fetch_add(r.len() as u64, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// After this instance's binlog tail lost or (re)started its stream: if another
    /// instance's tail heartbeated after this point, it was watching through the gap and
    /// every commit in it raised its versions; otherwise nobody was, and every L2 entry is
    /// invalidated (`e`). Only then is L2 read again.
    async fn resolve_gap(&self, conn: &mut Conn) -> Result<(), L2Error> {
        let key = self.key("tails", "");
        let now: String = self
            .timed("tails", async {
                let mut inv = self.tails.prepare_invoke();
                inv.key(&key).arg("").arg("");
                inv.invoke_async(conn).await.map_err(L2Error::from)
            })
            .await?;
        let since: u64 = now.parse().map_err(|_| L2Error::Malformed("time"))?;
        let deadline = Instant::now() + GAP_WAIT;
        let covered = loop {
            let n: i64 = self
                .timed("tails", async {
                    let mut inv = self.other_tail.prepare_invoke();
                    inv.key(&key).arg(since).arg(format!("{}:", self.id));
                    inv.invoke_async(conn).await.map_err(L2Error::from)
                })
                .await?;
            if n == 1 {
                break true;
            }
            if Instant::now() >= deadline || self.alone() {
                break false;
            }
            tokio::time::sleep(PING_EVERY / 2).await;
        };
        if !covered {
            let e = Raises {
                deps: vec!["e".to_string()],
                rows: Vec::new(),
            };
            self.raise(conn, &e).await?;
        }
        // L2 is read again before the verdict is counted: whoever sees the count (status,
        // a test) may rely on the next read consulting L2.
        self.gap_pending.store(false, Ordering::Release);
        if covered {
            CacheStatsExt::incr(&self.stats.gaps_covered);
            info!("binlog gap covered by another instance's tail; L2 entries kept");
        } else {
            CacheStatsExt::incr(&self.stats.gaps_uncovered);
            warn!("binlog gap with no other tail watching: every L2 entry invalidated");
        }
        Ok(())
    }

    /// Whose data the server behind `conn` holds (`policy::l2::adopt`): its identity
    /// (`policy::l2::identity`: process and data history, from `INFO server` and `INFO
    /// replication`), the `epoch` marker qcache wrote and the fleet's raise counter. None in
    /// cluster mode, where the nodes have an identity each (not checked: docs/fleet.md).
    async fn identity(&self, conn: &mut Conn) -> Result<Option<Held>, L2Error> {
        if matches!(conn, Conn::Cluster(_)) {
            return Ok(None);
        }
        let marker_key = self.key("epoch", "");
        let counter_key = self.key("raises", "");
        let (server, replication, marker, raises): (String, String, Option<String>, Option<u64>) =
            self.timed("identity", async {
                redis::pipe()
                    .cmd("INFO")
                    .arg("server")
                    .cmd("INFO")
                    .arg("replication")
                    .cmd("GET")
                    .arg(&marker_key)
                    .cmd("GET")
                    .arg(&counter_key)
                    .query_async(conn)
                    .await
                    .map_err(L2Error::from)
            })
            .await?;
        let identity =
            crate::policy::l2::identity(&server, &replication).map_err(L2Error::Malformed)?;
        Ok(Some(Held {
            identity,
            marker,
            raises: raises.unwrap_or(0),
        }))
    }

    /// Whether the server behind `conn` still holds the data this instance adopted, and what
    /// follows when it does not (`policy::l2::recheck`): the same server is adopted again on
    /// this connection ([`L2::readopt`]); another one takes L2 down (Err), to be adopted at
    /// the reconnection. Err too (and down) when its identity cannot be read.
    async fn still_adopted(&self, conn: &mut Conn) -> Result<(), L2Error> {
        let known = self.identity.lock().ok().and_then(|g| g.clone());
        // Before the question: a raise answered after it may count past what it reads.
        let seen = self.raises_seen.load(Ordering::Acquire);
        let stamp = self.marker_stamp.load(Ordering::Acquire);
        let held = match self.identity(conn).await {
            Ok(Some(held)) => held,
            Ok(None) => return Ok(()),
            Err(e) => {
                self.mark_down(&format!("L2's identity could not be read: {e}"));
                return Err(e);
            }
        };
        let adoption = held.adopt(known.as_deref(), seen, stamp);
        match recheck(adoption, known.as_deref() == Some(held.identity.as_str())) {
            Recheck::Keep => {
                self.raises_seen.fetch_max(held.raises, Ordering::AcqRel);
                self.marker_stamp
                    .fetch_max(held.marker_stamp(), Ordering::AcqRel);
                Ok(())
            }
            Recheck::Readopt => self.readopt(conn, &held, adoption).await,
            Recheck::Reconnect => {
                // Before L2 is down: a write from then on waits for the reconnection.
                self.reconnecting.store(true, Ordering::Release);
                self.mark_down(
                    "L2 now holds other data (its identity, qcache's marker or the raise count moved)",
                );
                Err(L2Error::Down)
            }
        }
    }

    /// [`Recheck::Readopt`]: the server this instance follows, whose data moved (emptied,
    /// marked again by another instance, back to an older dump), adopted again on the
    /// connection in use: nothing from before is served (this instance's entries dropped,
    /// `e` raised for the fleet), then the marker is written. L2 is not read meanwhile, but
    /// stays healthy: the bump task keeps raising, so a write's OK still waits for its raises
    /// (`L2::flush`). If this fails, L2 goes down, and the reconnection adopts the data anew
    /// whatever count it then reads.
    async fn readopt(
        &self,
        conn: &mut Conn,
        held: &Held,
        adoption: Adoption,
    ) -> Result<(), L2Error> {
        self.adopting.store(true, Ordering::Release);
        (self.learned)(Learned::Missed);
        // Counted from what this data holds now: the raise of `e` below counts past it.
        self.raises_seen.store(held.raises, Ordering::Release);
        let e = Raises {
            deps: vec!["e".to_string()],
            rows: Vec::new(),
        };
        let adopted = async {
            self.raise(conn, &e).await?;
            self.mark_adopted(conn, &held.identity).await
        }
        .await;
        if let Err(e) = &adopted {
            self.raises_seen.store(RAISES_SUSPECT, Ordering::Release);
            self.mark_down(&format!("L2 could not be adopted again: {e}"));
        } else if adoption.is_rollback() {
            CacheStatsExt::incr(&self.stats.rollbacks);
            warn!(
                ?adoption,
                "L2's data went back (its raise count or marker): adopted again, entries \
                 from before are not served"
            );
        }
        self.adopting.store(false, Ordering::Release);
        adopted
    }

    /// Writes the marker naming the server this instance just adopted, after `e` was raised
    /// on it.
    /// The marker is stamped with the Redis time it is written at (`policy::l2::marker_value`).
    async fn mark_adopted(&self, conn: &mut Conn, run_id: &str) -> Result<(), L2Error> {
        let marker_key = self.key("epoch", "");
        let (secs, micros): (u64, u64) = self
            .timed("identity", async {
                redis::cmd("TIME")
                    .query_async(conn)
                    .await
                    .map_err(L2Error::from)
            })
            .await?;
        let stamp = secs.saturating_mul(1_000_000).saturating_add(micros);
        self.timed("identity", async {
            redis::cmd("SET")
                .arg(&marker_key)
                .arg(crate::policy::l2::marker_value(run_id, stamp))
                .query_async::<Value>(conn)
                .await
                .map(drop)
                .map_err(L2Error::from)
        })
        .await?;
        self.marker_stamp.store(stamp, Ordering::Release);
        Ok(())
    }

    /// While this instance's tail streams (and its own gap is decided), says so in `tails`.
    async fn heartbeat(&self, conn: &mut Conn) -> Result<(), L2Error> {
        let Some(tail) = &self.tail else {
            return Ok(());
        };
        let watching = tail.connected() && !self.gap_pending.load(Ordering::Acquire);
        let member = watching.then(|| format!("{}:{}", self.id, tail.reconnects()));
        let prev = self.heartbeat.lock().ok().and_then(|g| g.clone());
        if member.is_none() && prev.is_none() {
            return Ok(());
        }
        let old = prev.filter(|p| Some(p) != member.as_ref());
        let key = self.key("tails", "");
        self.timed("tails", async {
            let mut inv = self.tails.prepare_invoke();
            inv.key(&key)
                .arg(member.as_deref().unwrap_or(""))
                .arg(old.as_deref().unwrap_or(""));
            inv.invoke_async::<String>(conn)
                .await
                .map(drop)
                .map_err(L2Error::from)
        })
        .await?;
        if let Ok(mut g) = self.heartbeat.lock() {
            *g = member;
        }
        Ok(())
    }

    /// `Qcache_l2_*` rows.
    pub fn status_rows(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("Qcache_l2_up", u64::from(self.usable())),
            (
                "Qcache_l2_notifications_up",
                u64::from(self.notifications_up()),
            ),
            ("Qcache_l2_hits", l(&s.hits)),
            ("Qcache_l2_misses", l(&s.misses)),
            ("Qcache_l2_stale", l(&s.stale)),
            ("Qcache_l2_malformed", l(&s.malformed)),
            ("Qcache_l2_errors", l(&s.errors)),
            ("Qcache_l2_stores", l(&s.stores)),
            ("Qcache_l2_store_bytes", l(&s.store_bytes)),
            ("Qcache_l2_hit_bytes", l(&s.hit_bytes)),
            ("Qcache_l2_too_large", l(&s.too_large)),
            ("Qcache_l2_bumps", l(&s.bumps)),
            ("Qcache_l2_notifications", l(&s.notifications)),
            ("Qcache_l2_remote_checks", l(&s.remote_checks)),
            ("Qcache_l2_remote_rejects", l(&s.remote_rejects)),
            ("Qcache_l2_lease_waits", l(&s.lease_waits)),
            ("Qcache_l2_lease_served", l(&s.lease_served)),
            ("Qcache_l2_downs", l(&s.downs)),
            ("Qcache_l2_recoveries", l(&s.recoveries)),
            ("Qcache_l2_notify_losses", l(&s.notify_losses)),
            ("Qcache_l2_gaps_covered", l(&s.gaps_covered)),
            ("Qcache_l2_gaps_uncovered", l(&s.gaps_uncovered)),
            ("Qcache_l2_rollbacks", l(&s.rollbacks)),
            ("Qcache_l2_script_reads", l(&s.script_reads)),
        ]
    }

    /// The configured CA and client certificate, for `rediss://` (None: the system's roots
    /// and no client certificate). Read at each connection, so renewed files are picked up
    /// on the next reconnect.
    fn tls_certs(&self) -> Result<Option<redis::TlsCertificates>, L2Error> {
        let read = |path: &str, what: &'static str| {
            std::fs::read(path).map_err(|_| L2Error::Malformed(what))
        };
        let root_cert = match self.cfg.tls_ca.as_str() {
            "" => None,
            p => Some(read(p, "l2.tls_ca cannot be read")?),
        };
        let client_tls = match (self.cfg.tls_cert.as_str(), self.cfg.tls_key.as_str()) {
            ("", _) | (_, "") => None,
            (c, k) => Some(redis::ClientTlsConfig {
                client_cert: read(c, "l2.tls_cert cannot be read")?,
                client_key: read(k, "l2.tls_key cannot be read")?,
            }),
        };
        if root_cert.is_none() && client_tls.is_none() {
            return Ok(None);
        }
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
    }

    fn client(&self, url: &str) -> Result<redis::Client, L2Error> {
        Ok(match self.tls_certs()? {
            Some(certs) if url.starts_with("rediss://") => {
                redis::Client::build_with_tls(url, certs)?
            }
            _ => redis::Client::open(url)?,
        })
    }

    async fn connect(&self) -> Result<Conn, L2Error> {
        let t = self.cfg.timeout.max(Duration::from_millis(500));
        let fut = async {
            Ok::<_, L2Error>(match &self.cfg.url {
                L2Url::One(u) => {
                    let c = self.client(u)?;
                    Conn::One(c.get_multiplexed_async_connection().await?)
                }
                L2Url::Cluster(nodes) => {
                    let mut b = redis::cluster::ClusterClientBuilder::new(nodes.clone())
                        .connection_timeout(t)
                        .response_timeout(self.cfg.timeout)
                        .retries(0);
                    if let Some(certs) = self.tls_certs()? {
                        b = b.certs(certs);
                    }
                    let c = b.build()?;
                    Conn::Cluster(c.get_async_connection().await?)
                }
            })
        };
        match tokio::time::timeout(t, fut).await {
            Ok(r) => r,
            Err(_) => Err(L2Error::Timeout(t)),
        }
    }
}

/// Tiny helper so counters read alike everywhere.
struct CacheStatsExt;
impl CacheStatsExt {
    fn incr(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Logs a malformed value the first time, and then every 1000th, not on every lookup.
fn warn_once(count: &AtomicU64, e: &L2Error) {
    let n = count.load(Ordering::Relaxed);
    if n == 1 || n.is_multiple_of(1000) {
        warn!(error = %e, count = n, "L2 held a value that is not a valid entry; treated as a miss");
    }
}

/// A version as Redis returns it: None for a missing key or field; anything but a number
/// is an error (L2 is lying).
fn version_value(v: Value) -> Result<Option<u64>, L2Error> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => std::str::from_utf8(&b)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(Some)
            .ok_or(L2Error::Malformed("version value")),
        Value::Int(i) if i >= 0 => Ok(Some(i as u64)),
        _ => Err(L2Error::Malformed("version value")),
    }
}

/// Makes a fresh connection usable: checks whose data this Redis holds, raises what this
/// instance bumped while L2 was out of reach, and only then declares L2 healthy. False when
/// the resync failed (the bumps are kept for the next try).
async fn recover(me: &Arc<L2>, mut conn: Conn, first: &mut bool) -> bool {
    // Whose data this is, before anything of it is believed: a server that lost
    // acknowledged raises (restarted from an old snapshot, a replica promoted in
    // its place) vouches again for entries filled before them.
    let known = me.identity.lock().ok().and_then(|g| g.clone());
    let seen = me.raises_seen.load(Ordering::Acquire);
    let stamp = me.marker_stamp.load(Ordering::Acquire);
    let identity = me.identity(&mut conn).await;
    let adoption = match &identity {
        Ok(Some(held)) => held.adopt(known.as_deref(), seen, stamp),
        _ => Adoption::Keep,
    };
    if let Ok(Some(held)) = &identity {
        if !adoption.raises_everything() {
            // The marker accepted as it is (one written anew is stamped when written).
            me.marker_stamp
                .store(held.marker_stamp(), Ordering::Release);
        }
        // Counted from what this data holds now: a count that went back is adopted with
        // the data (the raise of `e` below counts past it).
        if adoption == Adoption::Keep {
            me.raises_seen.fetch_max(held.raises, Ordering::AcqRel);
        } else {
            me.raises_seen.store(held.raises, Ordering::Release);
        }
    }
    // Everything this instance bumped while L2 was out of reach is raised first:
    // until then, other instances may hold entries those writes made stale.
    let (_, missed) = me.resync.lock().map(|mut q| q.take()).unwrap_or_default();
    let (seq, mut deps, in_flight) = me
        .queue
        .lock()
        .map(|mut q| {
            let (seq, deps) = q.take();
            (seq, deps, q.in_flight.take())
        })
        .unwrap_or_default();
    deps.deps.extend(missed.coarse());
    deps.deps
        .extend(in_flight.map(|(_, d)| d).unwrap_or_default());
    if adoption.raises_everything() {
        deps.deps.push("e".to_string());
    }
    if adoption == Adoption::Mark {
        // Perhaps back to a dump without the marker: entries copied from it go too.
        (me.learned)(Learned::Missed);
    }
    if adoption.is_rollback() {
        // Entries this instance holds may have come from the old server's data.
        (me.learned)(Learned::Missed);
        CacheStatsExt::incr(&me.stats.rollbacks);
        warn!(
            ?adoption,
            "L2 is a different Redis than before (restarted or replaced): its \
                 versions may have gone back, so entries from before are not served"
        );
    }
    deps.deps.sort();
    deps.deps.dedup();
    while me.versions.faults.on(crate::faults::Fault::HeldL2Recovery) {
        // A debug test's hold (never in a release build): a resync as slow as it needs.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let raised = async {
        let id = identity?;
        me.raise(&mut conn, &deps).await?;
        if let Some(held) = id {
            if adoption.raises_everything() {
                me.mark_adopted(&mut conn, &held.identity).await?;
            }
            if let Ok(mut g) = me.identity.lock() {
                *g = Some(held.identity);
            }
        }
        Ok::<_, L2Error>(())
    };
    match raised.await {
        Ok(()) => {
            me.conn.store(Some(Arc::new(conn)));
            // Healthy under the queue's lock: a bump queued before (after what this resync
            // took, its write acknowledged without waiting: L2 was down) is at most
            // `readable_from`, and raised by the bump task before L2 is read; one queued after
            // finds L2 healthy, and its write waits for it (`L2::flush`).
            let q = me.queue.lock();
            // A poisoned queue: never read again (fail closed).
            let floor = q.as_ref().map_or(u64::MAX, |q| q.seq);
            me.readable_from.store(floor, Ordering::Release);
            me.healthy.store(true, Ordering::Release);
            drop(q);
            me.done.send_modify(|d| *d = (*d).max(seq));
            me.wake_bumper.notify_one();
            if *first {
                info!("L2 connected");
            } else {
                CacheStatsExt::incr(&me.stats.recoveries);
                info!(
                    resynced = deps.len(),
                    "L2 back: missed bumps raised, serving from it again"
                );
            }
            *first = false;
            true
        }
        Err(e) => {
            if let Ok(mut q) = me.resync.lock() {
                for d in deps.coarse() {
                    q.push(d);
                }
            }
            me.done.send_modify(|d| *d = (*d).max(seq));
            tracing::debug!(error = %e, "L2 resync failed");
            false
        }
    }
}

/// Keeps a connection while healthy (pinging it) and, while down, reconnects with back-off,
/// raises what was missed, and only then declares L2 usable again.
async fn health_task(l2: Weak<L2>, wake_health: Arc<Notify>) {
    let mut backoff = BACKOFF_MIN;
    let mut first = true;
    loop {
        let Some(me) = l2.upgrade() else { return };
        if me.healthy() {
            let mut conn = match me.conn.load_full() {
                Some(c) => (*c).clone(),
                None => {
                    me.mark_down("no connection");
                    continue;
                }
            };
            // A PUBLISH to the own heartbeat channel: a ping of this connection, and proof
            // for the subscriber that its connection still delivers.
            let hb = me.heartbeat_channel();
            let mut ping = me
                .timed("ping", async {
                    redis::cmd("PUBLISH")
                        .arg(&hb)
                        .arg("hb")
                        .query_async::<Value>(&mut conn)
                        .await
                        .map_err(L2Error::from)
                })
                .await
                .map(drop);
            let tail_up = me.tail.as_ref().is_some_and(|t| t.connected());
            if ping.is_ok() && tail_up && me.gap_pending.load(Ordering::Acquire) {
                ping = me.resolve_gap(&mut conn).await;
            }
            if ping.is_ok() {
                ping = me.heartbeat(&mut conn).await;
            }
            if ping.is_ok() {
                // The same connection may now reach other data: a server made a replica of
                // an older copy and promoted again keeps its connections and its `run_id`;
                // one emptied or reloaded keeps its identity too (`policy::l2::recheck`).
                ping = me.still_adopted(&mut conn).await;
            }
            let wake = wake_health.notified();
            drop(me);
            if ping.is_ok() {
                tokio::select! {
                    _ = tokio::time::sleep(PING_EVERY) => {}
                    _ = wake => {}
                }
            }
            continue;
        }
        me.conn.store(None);
        match me.connect().await {
            Ok(conn) => {
                let recovered = recover(&me, conn, &mut first).await;
                me.reconnecting.store(false, Ordering::Release);
                if recovered {
                    backoff = BACKOFF_MIN;
                    continue;
                }
            }
            Err(e) => {
                me.reconnecting.store(false, Ordering::Release);
                // The queued bumps cannot be raised now: keep them for the resync, and let
                // writers stop waiting for them.
                let (seq, deps) = me.queue.lock().map(|mut q| q.take()).unwrap_or_default();
                if let Ok(mut q) = me.resync.lock() {
                    for d in deps.coarse() {
                        q.push(d);
                    }
                }
                me.done.send_modify(|d| *d = (*d).max(seq));
                if first {
                    warn!(error = %e, "L2 not reachable yet; bypassed until it is");
                    first = false;
                }
            }
        }
        drop(me);
        tokio::time::sleep(backoff).await;
        backoff = next_backoff(backoff);
    }
}

/// Raises queued bumps in L2 as they come, in batches.
async fn bump_task(l2: Weak<L2>, wake_bumper: Arc<Notify>) {
    loop {
        let wake = {
            let Some(me) = l2.upgrade() else { return };
            let Some(mut conn) = me.bump_conn() else {
                // Down: what is queued stays queued, for the resync to take, or for this task
                // once the resync has made L2 healthy (it wakes it). Given up here, a bump
                // queued while a resync was under way (after it took its share) was raised by
                // nobody: its write acknowledged, L2 read again with the version unmoved.
                let n = wake_bumper.notified();
                drop(me);
                n.await;
                continue;
            };
            let (seq, deps) = me
                .queue
                .lock()
                .map(|mut q| {
                    let (seq, deps) = q.take();
                    if !deps.is_empty() {
                        q.in_flight = Some((seq, deps.clone().coarse()));
                    }
                    (seq, deps)
                })
                .unwrap_or_default();
            if !deps.is_empty() {
                let done = match me.raise(&mut conn, &deps).await {
                    Ok(()) => true,
                    Err(e) => {
                        CacheStatsExt::incr(&me.stats.errors);
                        me.mark_down(&format!("bump failed: {e}"));
                        false
                    }
                };
                if !done {
                    // A timed-out script may or may not have run; raising it again is
                    // harmless (versions only grow), so it is kept for the resync.
                    if let Ok(mut q) = me.resync.lock() {
                        for d in deps.coarse() {
                            q.push(d);
                        }
                    }
                }
                if let Ok(mut q) = me.queue.lock() {
                    if q.in_flight.as_ref().is_some_and(|(s, _)| *s == seq) {
                        q.in_flight = None;
                    }
                }
                me.done.send_modify(|d| *d = (*d).max(seq));
                continue;
            }
            me.done.send_modify(|d| *d = (*d).max(seq));
            let n = wake_bumper.notified();
            let pending = me
                .queue
                .lock()
                .map(|q| !q.deps.is_empty() || !q.rows.is_empty() || q.overflow)
                .unwrap_or(false);
            drop(me);
            if pending {
                continue;
            }
            n
        };
        wake.await;
    }
}

/// Subscribes to the bump channel while L2 is healthy and applies other instances' bumps to
/// the local versions. Whenever the subscription is (re)made or lost, every local entry is
/// dropped: bumps may have gone by unseen.
async fn subscribe_task(l2: Weak<L2>) {
    let mut backoff = BACKOFF_MIN;
    // In a cluster any node delivers every message; a node that fails is passed over.
    let mut node = 0usize;
    loop {
        let (client, channel, hb, tails_ch, ddl_ch, mut down, id, gen) = {
            let Some(me) = l2.upgrade() else { return };
            if !me.healthy() {
                drop(me);
                tokio::time::sleep(backoff).await;
                backoff = next_backoff(backoff);
                continue;
            }
            let nodes = me.cfg.url.nodes();
            let url = nodes.get(node % nodes.len().max(1)).map(|s| s.to_string());
            let Some(client) = url.and_then(|u| me.client(&u).ok()) else {
                return;
            };
            let down = me.down_gen.subscribe();
            let gen = *down.borrow();
            (
                client,
                me.channel(),
                me.heartbeat_channel(),
                me.tails_channel(),
                me.ddl_channel(),
                down,
                me.id.clone(),
                gen,
            )
        };
        let sub = async {
            let mut ps = client.get_async_pubsub().await?;
            ps.subscribe(&[&channel, &hb, &tails_ch, &ddl_ch]).await?;
            Ok::<_, redis::RedisError>(ps)
        };
        let ps = match tokio::time::timeout(Duration::from_secs(2), sub).await {
            Ok(Ok(ps)) => ps,
            _ => {
                node = node.wrapping_add(1);
                tokio::time::sleep(backoff).await;
                backoff = next_backoff(backoff);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        {
            let Some(me) = l2.upgrade() else { return };
            if *down.borrow() != gen {
                continue;
            }
            me.subscribed();
        }
        let mut stream = ps.into_on_message();
        let mut heard = Instant::now();
        let mut silent = false;
        loop {
            let deadline = tokio::time::Instant::from_std(heard + CHANNEL_SILENCE);
            tokio::select! {
                m = stream.next() => {
                    let Some(me) = l2.upgrade() else { return };
                    let Some(m) = m else { break };
                    if m.get_channel_name() == hb {
                        heard = Instant::now();
                        continue;
                    }
                    let payload = m.get_payload_bytes();
                    let Ok(text) = std::str::from_utf8(payload) else { continue };
                    let Some((from, dep)) = text.split_once(' ') else { continue };
                    if from == id {
                        continue;
                    }
                    if me.on_fleet_message(m.get_channel_name(), &tails_ch, &ddl_ch, from, dep) {
                        continue;
                    }
                    CacheStatsExt::incr(&me.stats.notifications);
                    if let Some(body) = dep.strip_prefix("r:") {
                        me.apply_rows(body);
                        continue;
                    }
                    (me.learned)(match parse_dep(dep) {
                        Some(Dep::All) => Learned::Everything,
                        Some(Dep::Schema(s)) => Learned::Schema(s.to_string()),
                        Some(Dep::Table(s, n)) => Learned::Table(s.to_string(), n.to_string()),
                        // Unknown names from a newer or foreign writer: assume the worst.
                        None => Learned::Missed,
                    });
                }
                _ = down.changed() => break,
                _ = tokio::time::sleep_until(deadline) => {
                    silent = true;
                    break;
                }
            }
        }
        let Some(me) = l2.upgrade() else { return };
        node = node.wrapping_add(1);
        me.notify_up.store(false, Ordering::Release);
        (me.learned)(Learned::Missed);
        CacheStatsExt::incr(&me.stats.notify_losses);
        if silent {
            // Commands still work (the heartbeats are published): only this subscription
            // is dropped and made again; L2's entries are checked in Redis anyway.
            warn!(
                silence_ms = CHANNEL_SILENCE.as_millis() as u64,
                "L2 notification channel silent: every local entry dropped, subscribing again"
            );
            continue;
        }
        warn!("L2 notification channel lost: every local entry dropped");
        if me.healthy() {
            // The channel died but commands still work: the channel alone is not trusted,
            // so L2 resyncs through a reconnect as well.
            me.mark_down("notification channel lost");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trip_and_corruption() {
        let e = L2Entry {
            stamps: vec![("e".into(), 5), ("t:2:db.t".into(), 1 << 50)],
            bytes: Bytes::from_static(b"\x01\x00\x00\x01\x01abcdef"),
            status_at: 3,
            meta_status_at: None,
            digest: 42,
            expires_at_ms: 7,
            diag: EntryDiagnostics {
                found_rows: 9,
                rows: 3,
            },
        };
        let raw = encode(&e);
        assert_eq!(decode(&raw).unwrap(), e);
        for cut in [0, 3, 8, raw.len() - 1] {
            assert!(decode(&raw[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = raw.clone();
        flipped[10] ^= 1;
        assert!(decode(&flipped).is_err());
        assert!(decode(b"garbage that is long enough").is_err());
    }

    #[test]
    fn dep_names_parse_back() {
        assert_eq!(parse_dep("e"), Some(Dep::All));
        assert_eq!(parse_dep(&schema_dep("a.b")), Some(Dep::Schema("a.b")));
        assert_eq!(
            parse_dep(&table_dep("a.b", "c.d")),
            Some(Dep::Table("a.b", "c.d"))
        );
        assert_eq!(parse_dep("t:99:x.y"), None);
        assert_eq!(parse_dep("t:x"), None);
        assert_eq!(parse_dep("zz"), None);
    }

    #[test]
    fn queue_overflows_to_everything() {
        let mut q = Queue::default();
        for i in 0..MAX_QUEUED_DEPS + 5 {
            q.push(format!("t:1:a.{i}"));
        }
        q.push_rows(RowsBump {
            tid: "1:a.b".into(),
            known: Vec::new(),
        });
        let (seq, deps) = q.take();
        assert_eq!(seq, (MAX_QUEUED_DEPS + 6) as u64);
        assert_eq!(deps.deps, vec!["e".to_string()]);
        assert!(deps.rows.is_empty());
        assert!(q.take().1.is_empty());
    }

    #[test]
    fn hex_and_column_ids() {
        for (v, n) in [
            (0u128, 16),
            (0xabcdefu128, 16),
            (u128::MAX, 32),
            (0x1234u128, 32),
        ] {
            let mut s = String::new();
            push_hex(&mut s, v, n);
            assert_eq!(s, format!("{v:0w$x}", w = n as usize));
        }
        // The type takes part: the same column under another collation is another column.
        let ci = |c: &str| crate::analysis::slices::ColumnInfo {
            ty: crate::analysis::slices::ColType::Str {
                fold: crate::analysis::slices::Fold::AsciiLower,
                max_chars: 10,
                collation: c.into(),
            },
            nullable: false,
            auto_increment: false,
        };
        assert_eq!(column_id("a", &ci("x")), column_id("a", &ci("x")));
        assert_ne!(column_id("a", &ci("x")), column_id("a", &ci("y")));
        assert_ne!(column_id("a", &ci("x")), column_id("b", &ci("x")));
    }

    #[test]
    fn rows_messages_round_trip() {
        let r = RowsBump {
            tid: table_id("my db", "t;x y"),
            known: vec![(0xabc, vec![1, 65535]), (7, vec![])],
        };
        let m = r.message();
        assert_eq!(
            RowsBump::parse(m.strip_prefix("r:").unwrap()),
            Some(r.clone())
        );
        assert_eq!(
            Raises {
                deps: vec!["e".into()],
                rows: vec![r],
            }
            .coarse(),
            vec!["e".to_string(), "t:5:my db.t;x y".to_string()]
        );
        assert_eq!(RowsBump::parse("zz=1 1:a.b"), None);
        assert_eq!(RowsBump::parse("no-table"), None);
    }

    /// A sliced read's lookup on a connection of our own: the commands as `read_plain`
    /// groups them, the versions from well-formed replies, and a miss (an error, the
    /// connection dropped) for anything else.
    #[test]
    fn raw_lookup_replies() {
        let keys = vec![
            ("v:e".to_string(), false),
            ("v:u:{T}".to_string(), true),
            ("v:s:db".to_string(), false),
        ];
        let regs = vec![("v:u:{T}".to_string(), "00000000000000aa".to_string())];
        let plan = RawPlan::new(&keys, &regs);
        let mut want = Vec::new();
        resp::command(&mut want, &[b"MGET", b"v:e", b"v:s:db"]);
        resp::command(
            &mut want,
            &[b"HMGET", b"v:u:{T}", b"v", b"r:00000000000000aa"],
        );
        assert_eq!(plan.request, want);
        let ok =
            |entry: &str| format!("{entry}*2\r\n$1\r\n7\r\n:9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n");
        let r = plan.replies(ok("$3\r\nabc\r\n").as_bytes(), 1024).unwrap();
        assert_eq!(r, Some((Some(vec![7, 11, 9]), Some(b"abc".to_vec()))));
        let r = plan.replies(ok("$-1\r\n").as_bytes(), 1024).unwrap();
        assert_eq!(r, Some((Some(vec![7, 11, 9]), None)));
        // Cut anywhere: more bytes are needed, nothing is decided.
        let whole = ok("$3\r\nabc\r\n");
        for cut in 0..whole.len() {
            assert!(plan
                .replies(&whole.as_bytes()[..cut], 1024)
                .unwrap()
                .is_none());
        }
        // A missing version or registration: the script's job (no versions), not a miss.
        let unregistered = "$-1\r\n*2\r\n$1\r\n7\r\n:9\r\n*2\r\n$2\r\n11\r\n$-1\r\n";
        let r = plan.replies(unregistered.as_bytes(), 1024).unwrap();
        assert_eq!(r, Some((None, None)));
        let missing = "$-1\r\n*2\r\n$-1\r\n:9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n";
        assert_eq!(
            plan.replies(missing.as_bytes(), 1024).unwrap(),
            Some((None, None))
        );
        // Malformed: refused, whatever the part that lies.
        for bad in [
            // A version that is no number, a negative one, an array for a version.
            "$-1\r\n*2\r\n$1\r\nx\r\n:9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n",
            "$-1\r\n*2\r\n$1\r\n7\r\n:-9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n",
            "$-1\r\n*2\r\n*0\r\n:9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n",
            // Too few or too many values, an integer for the entry, an entry too long.
            "$-1\r\n*1\r\n$1\r\n7\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n",
            "$-1\r\n*2\r\n$1\r\n7\r\n:9\r\n*3\r\n$2\r\n11\r\n$1\r\n1\r\n$1\r\n1\r\n",
            ":1\r\n*2\r\n$1\r\n7\r\n:9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n",
            "$2000\r\n",
            // An error reply, a registration field that is an array, trailing bytes, no RESP.
            "-ERR wrong\r\n",
            "$-1\r\n*2\r\n$1\r\n7\r\n:9\r\n*2\r\n$2\r\n11\r\n*0\r\n",
            "$-1\r\n*2\r\n$1\r\n7\r\n:9\r\n*2\r\n$2\r\n11\r\n$1\r\n1\r\n+OK\r\n",
            "\u{0}\u{ff}not redis at all\r\n:x\r\n$-7\r\n",
        ] {
            assert!(plan.replies(bad.as_bytes(), 1024).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_tables_versions_share_a_slot() {
        let tid = table_id("d{b", "t}");
        let deps = [
            format!("t:{tid}"),
            format!("u:{tid}"),
            format!("c:{:016x}:{tid}", 5u64),
            format!("k:{:016x}:{}:{tid}", 5u64, 123u32),
        ];
        let mut tags = Vec::new();
        for d in &deps {
            let (head, t) = split_table_dep(d).unwrap();
            assert_eq!(t, tid, "{d}");
            let key = format!("qcache:v:{head}{{{t}}}");
            tags.push(slot_tag(&key).to_string());
        }
        assert!(tags.windows(2).all(|w| w[0] == w[1]), "{tags:?}");
        assert_eq!(split_table_dep("e"), None);
        assert_eq!(split_table_dep("s:db"), None);
        assert_eq!(slot_tag("a{}b"), "a{}b");
        assert_eq!(slot_tag("a{x}b{y}"), "x");
    }

    #[test]
    fn sliced_reads_depend_on_their_slices() {
        let v = Versions::new();
        let t = v.table("db", "orders");
        let w = v.table("db", "items");
        let column = v.register(&t, "customer_id");
        let plan = SlicePlan {
            table: t.clone(),
            column,
            slices: vec![3, 9],
            by_columns: false,
            slice_columns: Vec::new(),
        };
        let ids = |_: &str, _: &str, c: &str| (c == "customer_id").then_some(0x11u64);
        let d = deps_with_slices(std::slice::from_ref(&w), std::slice::from_ref(&plan), &ids);
        let tid = table_id("db", "orders");
        assert_eq!(
            d.deps,
            vec![
                format!("c:{:016x}:{tid}", 0x11),
                "e".to_string(),
                format!("k:{:016x}:3:{tid}", 0x11),
                format!("k:{:016x}:9:{tid}", 0x11),
                "s:db".to_string(),
                "t:2:db.items".to_string(),
                format!("u:{tid}"),
            ]
        );
        assert_eq!(d.registers, vec![(tid.clone(), 0x11)]);
        // A column without an id: the table is read whole.
        let none = deps_with_slices(&[], &[plan], &|_, _, _| None);
        assert_eq!(
            none.deps,
            vec!["e".to_string(), "s:db".into(), format!("t:{tid}")]
        );
        assert!(none.registers.is_empty());
    }
}
