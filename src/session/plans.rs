//! Moved to [`crate::cache::plans`]; this path stays only until the branches that edit
//! `session/query.rs` have merged and it imports from there.

pub use crate::cache::plans::*;
