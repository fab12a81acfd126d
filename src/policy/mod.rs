//! The cache policy, sans-IO: which statements are cacheable reads, what a statement may
//! write, whether a result may be stored and whether a session may be served. The session
//! asks these functions and does the I/O; each rule has a table-driven unit test here.
//!
//! The rule every function follows (docs/design.md, "Fail closed"): unknown means harmful,
//! and what the server reported beats what qcache parsed.

pub mod classify;
pub mod context;
pub mod decide;
pub mod diagnostics;
pub mod l2;
pub mod lag;
pub mod locks;
pub mod order;
pub mod patch;
pub mod privileges;
pub mod qct;
pub mod read;
pub mod reason;
pub mod snapshot;
pub mod stale;
pub mod stored_code;
pub mod tails;
pub mod timecol;
pub mod txn;
pub mod verify;

pub use reason::Reason;
