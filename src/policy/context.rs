//! Policy: which session state the cache key must hold, and when qcache must ask the server
//! for the effective values instead of trusting a SET's text.
