//! The MySQL client/server protocol, sans IO: framing, packets, handshake, commands and the
//! response state machine. Nothing here knows about sockets or caching.

pub mod answer;
pub mod codec;
pub mod commands;
pub mod compress;
pub mod handshake;
pub mod negotiate;
pub mod packets;
pub mod response;
pub mod rows;
