//! L2's channel as an invalidation source: another instance's bump, or bumps this instance
//! may have missed, applied here without being published back (the source is `L2`).

use std::sync::Arc;

use super::apply::{Invalidation, Invalidator, Source, What};
use super::catalog::Catalog;
use crate::l2::{Learned, OnLearned};

/// The invalidation of what L2 taught this instance.
pub fn learned(l: Learned) -> Invalidation {
    match l {
        Learned::Everything => Invalidation::one(Source::L2, What::Everything),
        Learned::Missed => Invalidation::new(
            Source::L2,
            vec![
                What::Everything,
                What::Privileges(crate::policy::privileges::PrivilegeChange::missed()),
            ],
        ),
        Learned::Schema(s) => Invalidation::one(Source::L2, What::Schema(s)),
        // Another instance's privilege change, as the bump of its stamp: the users it
        // reaches get new generations here too, or this instance keeps serving them what
        // the server now refuses (and finds the fleet's entries under their old keys).
        Learned::Table(s, n) => match crate::policy::privileges::learned_change(&s, &n) {
            Some(c) => {
                Invalidation::new(Source::L2, vec![What::Table((s, n)), What::Privileges(c)])
            }
            None => Invalidation::one(Source::L2, What::Table((s, n))),
        },
        Learned::Rows {
            schema,
            name,
            indexes,
        } => {
            let table = (schema, name);
            Invalidation {
                source: Source::L2,
                // Another instance's write: an insert or a move, qcache cannot tell here.
                moved: vec![table.clone()],
                what: vec![What::Slices { table, indexes }],
                data: false,
            }
        }
        // A DDL a tail of the fleet saw: what it names at once (the catalog reload and its
        // widening follow, `on_learned`); a DDL that names nothing readable, everything.
        Learned::Ddl(c) if c.everything => Invalidation::one(Source::L2, What::Everything),
        Learned::Ddl(c) => Invalidation::new(
            Source::L2,
            c.objects
                .into_iter()
                .map(What::Table)
                .chain(c.schemas.into_iter().map(What::Schema))
                .collect(),
        ),
    }
}

/// What `L2::start` is given: every learned bump through `inv`; a learned DDL also reloads
/// what it names in `catalog` (in the background: the channel must not wait on the server),
/// then bumps what the new catalog widens it to, quietly (the tail raised its own).
pub fn on_learned(inv: Invalidator, catalog: Arc<Catalog>) -> OnLearned {
    Arc::new(move |l| {
        let ddl = match &l {
            Learned::Ddl(c) => Some(c.clone()),
            _ => None,
        };
        inv.apply(&learned(l));
        if let Some(changed) = ddl {
            let (inv, catalog) = (inv.clone(), catalog.clone());
            tokio::spawn(async move {
                if let Some(mut after) = super::ddl::reload(&catalog, &changed).await {
                    after.source = Source::L2;
                    inv.apply(&after);
                }
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_learned_bump_gives_a_quiet_invalidation() {
        let orders = || ("shop".to_string(), "orders".to_string());
        let indexes = vec![("customer_id".to_string(), vec![3u32, 9])];
        let rows = [
            (
                "everything (another instance raised it, or the first subscription)",
                Learned::Everything,
                Invalidation::one(Source::L2, What::Everything),
            ),
            (
                "missed (a lost channel, a new subscription, another Redis): a change of \
                 privileges for every user too",
                Learned::Missed,
                Invalidation::new(
                    Source::L2,
                    vec![
                        What::Everything,
                        What::Privileges(crate::policy::privileges::PrivilegeChange::missed()),
                    ],
                ),
            ),
            (
                "another instance's schema bump",
                Learned::Schema("shop".into()),
                Invalidation::one(Source::L2, What::Schema("shop".into())),
            ),
            (
                "another instance's table bump",
                Learned::Table("shop".into(), "orders".into()),
                Invalidation::one(Source::L2, What::Table(orders())),
            ),
            (
                "another instance's privilege change (its user's stamp): the stamp and the \
                 user's generations",
                Learned::Table(String::new(), "user bob".into()),
                Invalidation::new(
                    Source::L2,
                    vec![
                        What::Table((String::new(), "user bob".into())),
                        What::Privileges(
                            crate::policy::privileges::learned_change("", "user bob").unwrap(),
                        ),
                    ],
                ),
            ),
            (
                "another instance's change that may reach anyone: every user's generations",
                Learned::Table(String::new(), "*".into()),
                Invalidation::new(
                    Source::L2,
                    vec![
                        What::Table((String::new(), "*".into())),
                        What::Privileges(
                            crate::policy::privileges::learned_change("", "*").unwrap(),
                        ),
                    ],
                ),
            ),
            (
                "another instance's rows: their slices; its rows may have moved",
                Learned::Rows {
                    schema: "shop".into(),
                    name: "orders".into(),
                    indexes: indexes.clone(),
                },
                Invalidation {
                    source: Source::L2,
                    moved: vec![orders()],
                    what: vec![What::Slices {
                        table: orders(),
                        indexes: indexes.clone(),
                    }],
                    data: false,
                },
            ),
        ];
        for (rule, l, want) in rows {
            let got = learned(l);
            assert!(!got.source.publishes(), "{rule}: never published back");
            assert_eq!(got, want, "{rule}");
        }
    }
}
