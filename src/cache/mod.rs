//! The result cache: keys, the bounded store, entries stamped with table versions, the fill
//! guard, stampede protection and the table-version registry.
//!
//! API CONTRACT (filled in by the cache work; the session code is written against it):
//!
//! ```ignore
//! // versions.rs
//! /// One table's generation. Interned: every entry holds Arcs, so checking a stamp is an
//! /// atomic load, and invalidation is one store, whatever the cache holds.
//! pub struct TableVersion { pub schema: String, pub name: String, version: AtomicU64 }
//! pub type TableHandle = Arc<TableVersion>;
//! pub struct Versions;  // DashMap<(schema,name), TableHandle>, a global sequence, an epoch
//! impl Versions {
//!     pub fn table(&self, schema: &str, name: &str) -> TableHandle;   // get or create
//!     /// New version = global sequence + 1, so "unchanged since seq S" is version <= S.
//!     pub fn bump(&self, t: &TableHandle);
//!     pub fn bump_schema(&self, schema: &str);      // every known table of the schema
//!     pub fn bump_all(&self);                       // epoch += 1: every entry invalid
//!     pub fn seq(&self) -> u64;                     // current global sequence
//!     pub fn epoch(&self) -> u64;
//!     pub fn tables(&self) -> Vec<TableHandle>;     // for admin listings
//! }
//! pub struct Stamps { pub tables: Vec<(TableHandle, u64)>, pub epoch: u64 }
//! impl Stamps {
//!     pub fn capture(v: &Versions, tables: &[TableHandle]) -> Stamps;
//!     pub fn is_current(&self, v: &Versions) -> bool;
//!     /// every table's current version <= seq (unchanged since a snapshot at seq)
//!     pub fn unchanged_since(&self, seq: u64) -> bool;
//! }
//! // entry.rs
//! pub struct Entry {
//!     pub bytes: Bytes,            // whole response as wire frames, seq ids from 1
//!     pub status_at: usize,        // absolute offset of the final packet's 2 status bytes
//!     pub stamps: Stamps,
//!     pub digest: u64, pub created: Instant, pub expires: Option<Instant>,
//!     pub hits: AtomicU64,
//! }
//! // key.rs: xxh3-128
//! pub type Key = u128;
//! pub fn key(session_fingerprint: u64, protocol_tag: u8, stmt: &[u8]) -> Key;
//! // store.rs
//! pub struct Cache;
//! impl Cache {
//!     pub fn new(cfg: &CacheConfig) -> Cache;
//!     pub fn versions(&self) -> &Versions;
//!     /// Entry if present, unexpired, and valid under `check` (drops stale ones).
//!     pub fn get(&self, key: Key) -> Option<Arc<Entry>>;
//!     /// Leader: this caller fills (guard); Follower: wait (bounded) then get() again.
//!     pub fn claim(&self, key: Key) -> Claim;   // Claim::Leader(FillGuard) | Claim::Wait(rx)
//!     pub fn insert(&self, key: Key, entry: Entry) -> bool;  // false: too big / stale
//!     pub fn clear(&self);
//!     pub fn stats(&self) -> &CacheStats;   // atomics for Qcache_* and reasons
//! }
//! ```

pub mod entry;
pub mod key;
pub mod versions;
