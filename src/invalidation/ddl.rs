//! DDL through qcache and the schema catalog as an invalidation source: after the catalog
//! reloaded what a DDL changed, its tables are bumped again, widened through the new
//! catalog (`Shared::refresh_catalog`). The DDL's own first bump is its write's
//! (`invalidation::writes`); the binlog's DDL events are the tail's (`invalidation::binlog`).

use tracing::warn;

use super::apply::{Invalidation, Source, TableName, What};
use super::catalog::{Catalog, Changed};
use crate::observe::stats::InvalidationSource;

/// Reloads what a DDL changed in `catalog` and returns what must be bumped after it
/// ([`after_reload`]): the same for a DDL through this instance (`Shared::refresh_catalog`)
/// and one a binlog tail of the fleet saw (`invalidation::l2`).
pub async fn reload(catalog: &Catalog, changed: &Changed) -> Option<Invalidation> {
    let reload = match catalog.refresh_changed(changed).await {
        Err(e) => {
            warn!(error = %e, "schema catalog reload failed");
            Reload::Failed
        }
        Ok(_) if changed.objects.is_empty() => Reload::NothingNamed,
        // The DDL's own tables again too.
        Ok(_) => match catalog.expand_write(&changed.objects) {
            Some(tables) => Reload::Widened(tables),
            None => Reload::NotWidened,
        },
    };
    after_reload(reload)
}

/// How the catalog reload after a DDL went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// It failed: without a current catalog, widening may miss views and triggers.
    Failed,
    /// The DDL named no relation (a schema, or nothing readable): nothing more to bump.
    NothingNamed,
    /// The DDL's relations widened through the new catalog: them, their views, and the
    /// tables their triggers and cascades reach.
    Widened(Vec<TableName>),
    /// The new catalog cannot widen them (a trigger or default it cannot read).
    NotWidened,
}

/// What a reload invalidates, None for nothing.
///
/// A DDL may run what it just defined (`CREATE TABLE t (id INT DEFAULT NEXTVAL(s)) SELECT …`,
/// `ALTER TABLE t ADD c INT DEFAULT NEXTVAL(s)` fill rows with the default), which the catalog
/// could not know when the statement was planned; and an entry sliced by column types read
/// from the old catalog, stamped after the first bump, must not outlive the swap
/// (`session/slices.rs` checks the generation after reading its stamps).
pub fn after_reload(r: Reload) -> Option<Invalidation> {
    match r {
        Reload::Failed => Some(Invalidation::one(
            Source::Here(InvalidationSource::Catalog),
            What::Everything,
        )),
        Reload::NothingNamed => None,
        Reload::Widened(tables) => Some(Invalidation::new(
            Source::Here(InvalidationSource::Catalog),
            tables.into_iter().map(What::Table).collect(),
        )),
        Reload::NotWidened => Some(Invalidation::one(
            Source::Here(InvalidationSource::Conservative),
            What::Everything,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reload_outcome_gives_its_invalidation() {
        let t = |n: &str| ("shop".to_string(), n.to_string());
        let rows = [
            (
                "the reload failed: everything, as the catalog's",
                Reload::Failed,
                Some(Invalidation::one(
                    Source::Here(InvalidationSource::Catalog),
                    What::Everything,
                )),
            ),
            (
                "the DDL named no relation: nothing more",
                Reload::NothingNamed,
                None,
            ),
            (
                "widened through the new catalog: each table, as the catalog's",
                Reload::Widened(vec![t("orders"), t("audit")]),
                Some(Invalidation::new(
                    Source::Here(InvalidationSource::Catalog),
                    vec![What::Table(t("orders")), What::Table(t("audit"))],
                )),
            ),
            (
                "the new catalog cannot widen them: everything, as conservative",
                Reload::NotWidened,
                Some(Invalidation::one(
                    Source::Here(InvalidationSource::Conservative),
                    What::Everything,
                )),
            ),
        ];
        for (rule, reload, want) in rows {
            assert_eq!(after_reload(reload), want, "{rule}");
        }
    }
}
