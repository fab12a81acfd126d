//! The result cache: keys, the bounded store, entries stamped with table versions, the fill
//! guard, stampede protection, the table-version registry, the read plans (tables per
//! statement shape) and the writes a session owes it ([`writes`]).
//!
//! How the session uses it (signatures in each file; docs/cache-store.md explains choices):
//!
//! ```text
//! // when session state changes (user, db, SET, caps, charset):
//! let fp = Fingerprint::new().user(u).db(d).capabilities(c).charset(cs).vars(v).finish();
//! // every cacheable statement:
//! let k = key(fp, protocol_tag, stmt_bytes);
//! // outside a transaction:
//! if let Some(e) = cache.get_current(k) { e.write_patched(session_status, &mut out); }
//! // inside a transaction (snap = cache.versions().snapshot() when it began):
//! // (Session::servable: cache.get(k) whose stamps are valid_in(versions, &snap)), and fill
//! // with guard.insert_in(e, &snap)
//! // miss:
//! match cache.claim(k) {
//!     Claim::Leader(guard) => { stamps = Stamps::capture(cache.versions(), &tables);
//!         /* forward, relay + tee */ guard.insert(Entry::new(bytes, status_at, stamps, digest)); }
//!     Claim::Follower(w) => { w.wait(cfg.stampede_timeout).await; /* get again or forward */ }
//! }
//! // writes: an `invalidation::Invalidation` through `invalidation::apply` before forwarding the OK.
//! ```

pub mod entry;
pub mod fkmap;
pub mod key;
pub mod patches;
pub mod plans;
pub mod privileges;
pub mod sliceplans;
pub mod store;
pub mod versions;
pub mod writes;

pub use entry::Entry;
pub use key::{key, Fingerprint, Key};
pub use store::{Cache, Claim, EntryInfo, FillGuard, WaitOutcome, Waiter};
pub use versions::{Snapshot, Stamps, TableHandle, TableVersion, Versions};

// Old paths of the files moved to `l2` and `observe`, for branches written against them.
pub use crate::l2;
pub use crate::l2::resp;
pub use crate::observe::stats::{CacheStats, InvalidationSource};
pub use crate::observe::{digests, latency, stats};
