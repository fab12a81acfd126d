//! What qcache counts about itself: the cache's counters ([`stats`]), latency histograms
//! ([`latency`]) and per-digest statistics ([`digests`]), read by the admin surfaces.

pub mod digests;
pub mod latency;
pub mod stats;
