//! Invalidation sources beyond proxied writes: the binlog tail and the schema catalog.
