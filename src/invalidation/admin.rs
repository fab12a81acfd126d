//! Operators' statements as an invalidation source: `QCACHE INVALIDATE TABLE` and
//! `RESET QUERY CACHE` (answered in `session::admin` and `session::statements`).

use super::apply::{Invalidation, Source, What};
use crate::observe::stats::InvalidationSource;

/// `QCACHE INVALIDATE TABLE schema.table` (names lower-cased by the caller).
pub fn invalidate_table(schema: &str, table: &str) -> Invalidation {
    Invalidation::one(
        Source::Here(InvalidationSource::Flush),
        What::Table((schema.to_string(), table.to_string())),
    )
}

/// `RESET QUERY CACHE`: every entry goes, and the epoch moves so that fills in flight
/// (stamped before the reset) are refused or invisible too; the store then frees its memory
/// (`Cache::drop_entries`).
pub fn reset_query_cache() -> Invalidation {
    Invalidation::one(Source::Here(InvalidationSource::Flush), What::Everything)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::entry::tests::response;
    use crate::cache::entry::Entry;
    use crate::cache::key::key;
    use crate::cache::versions::Stamps;
    use crate::cache::Cache;
    use crate::config::CacheConfig;
    use crate::invalidation::Invalidator;
    use crate::observe::stats::InvalidationSource;

    #[test]
    fn each_admin_statement_gives_its_invalidation() {
        let rows = [
            (
                "QCACHE INVALIDATE TABLE: that table, as a flush",
                invalidate_table("shop", "orders"),
                Invalidation::one(
                    Source::Here(InvalidationSource::Flush),
                    What::Table(("shop".into(), "orders".into())),
                ),
            ),
            (
                "RESET QUERY CACHE: everything, as a flush",
                reset_query_cache(),
                Invalidation::one(Source::Here(InvalidationSource::Flush), What::Everything),
            ),
        ];
        for (rule, got, want) in rows {
            assert_eq!(got, want, "{rule}");
        }
    }

    /// RESET QUERY CACHE as the session does it (moved from `cache::store`, where it was
    /// `Cache::clear`): every entry goes, a fill stamped before it is refused, one flush is
    /// counted.
    #[test]
    fn clear_empties_and_refuses_older_fills() {
        let c = Cache::new(&CacheConfig::default());
        let entry = |c: &Cache, tables: &[_]| {
            let (bytes, at) = response(0, 10);
            Entry::new(bytes, at, Stamps::capture(c.versions(), tables), 1)
        };
        let t = c.versions().table("db", "t");
        let early = entry(&c, std::slice::from_ref(&t));
        for i in 0..100u8 {
            assert!(c.insert(key(1, 0, &[i]), entry(&c, std::slice::from_ref(&t))));
        }
        let inv = Invalidator::new(c.versions_arc(), c.stats_arc());
        inv.apply(&reset_query_cache());
        c.drop_entries();
        assert_eq!(c.len(), 0);
        assert_eq!(c.weight(), 0);
        assert!(!c.insert(key(9, 0, b"x"), early));
        assert_eq!(c.stats().invalidations(InvalidationSource::Flush), 1);
    }
}
