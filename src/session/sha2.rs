//! Moved to [`crate::tls::sha2`] (TLS builds qcache's RSA key, and sits below the session);
//! this path stays only until the branches that edit `session/handshake.rs` have merged and
//! it imports from there.

pub(crate) use crate::tls::sha2::*;
