//! Writes through qcache as invalidation values: what a statement owes once the server
//! acknowledged it ([`statement`]: text, prepared and multi-statement writes all plan a
//! `cache::writes::Pending`), and what a transaction owes when it ends ([`transaction_end`]).

use std::sync::Arc;

use super::apply::{Invalidation, Source, TableName, What};
use crate::cache::versions::TableHandle;
use crate::cache::writes::{Pending, Txn};
use crate::observe::stats::InvalidationSource;

fn name(t: &TableHandle) -> TableName {
    (t.schema.clone(), t.name.clone())
}

/// What an acknowledged statement invalidates, in the order it is applied: its tables and
/// rows (a column-known UPDATE as its columns), its schemas, then what it could not name
/// (counted as conservative) and the privileges it changed (counted as such).
pub fn statement(p: &Pending) -> Vec<Invalidation> {
    let set_of = |t: &TableHandle| {
        p.columns
            .iter()
            .find(|(c, _)| Arc::ptr_eq(c, t))
            .map(|(_, s)| s.clone())
    };
    let mut what = Vec::new();
    for t in &p.tables {
        what.push(match set_of(t) {
            Some(set) => What::Columns {
                table: name(t),
                set,
                known: None,
            },
            None => What::Table(name(t)),
        });
    }
    for (t, known) in &p.rows {
        what.push(match set_of(t) {
            Some(set) => What::Columns {
                table: name(t),
                set,
                known: Some(known.clone()),
            },
            None => What::Rows {
                table: name(t),
                known: known.clone(),
            },
        });
    }
    what.extend(p.schemas.iter().cloned().map(What::Schema));
    // A DDL's own bump is no change of rows: its entries are never served stale.
    let mut first = Invalidation::new(Source::Here(InvalidationSource::Write), what);
    first.data = !p.ddl;
    let mut out = vec![first];
    if p.all {
        out.push(Invalidation::one(
            Source::Here(InvalidationSource::Conservative),
            What::Everything,
        ));
    }
    if let Some(c) = &p.privileges {
        out.push(Invalidation::one(
            Source::Here(InvalidationSource::Privileges),
            What::Privileges(c.clone()),
        ));
    }
    out.retain(|i| !i.is_empty());
    out
}

/// What a transaction's end invalidates: everything it wrote changes for everyone now.
pub fn transaction_end(txn: &Txn) -> Invalidation {
    let mut what: Vec<What> = txn.written.iter().map(|t| What::Table(name(t))).collect();
    what.extend(txn.written_schemas.iter().cloned().map(What::Schema));
    if txn.written_unknown {
        what.push(What::Everything);
    }
    // DDL ends a transaction before it runs (an implicit commit): what a transaction
    // wrote is rows; `Schema` and `Everything` in it are still never taken for rows.
    Invalidation::new(Source::Here(InvalidationSource::TxnEnd), what).of_rows()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::versions::Versions;
    use crate::policy::privileges::PrivilegeChange;

    fn t(s: &str, n: &str) -> TableName {
        (s.into(), n.into())
    }

    /// The value of each kind of write through qcache. Text and prepared writes, and each
    /// statement of a multi-statement, plan the same `Pending` (`session::write`); these are
    /// the shapes it takes.
    #[test]
    fn each_write_kind_gives_its_invalidation() {
        let v = Versions::new();
        let orders = v.table("shop", "orders");
        let items = v.table("shop", "items");
        let ids: Arc<crate::cache::versions::KnownRows> =
            vec![("id".to_string(), vec!["i1".to_string()])].into();
        let set: Arc<[String]> = vec!["note".to_string()].into();
        // A DML statement's bump is a change of rows (`policy::stale`); a DDL's is not.
        let write =
            |what| vec![Invalidation::new(Source::Here(InvalidationSource::Write), what).of_rows()];
        let rows: Vec<(&str, Pending, Vec<Invalidation>)> = vec![
            ("nothing written: nothing", Pending::default(), vec![]),
            (
                "a text or prepared write of a table: the table",
                Pending {
                    tables: vec![orders.clone()],
                    ..Pending::default()
                },
                write(vec![What::Table(t("shop", "orders"))]),
            ),
            (
                "a multi-statement (or a trigger's widening): every table, in order",
                Pending {
                    tables: vec![orders.clone(), items.clone()],
                    ..Pending::default()
                },
                write(vec![
                    What::Table(t("shop", "orders")),
                    What::Table(t("shop", "items")),
                ]),
            ),
            (
                "a write with known rows (granularity row): its rows",
                Pending {
                    rows: vec![(orders.clone(), ids.clone())],
                    ..Pending::default()
                },
                write(vec![What::Rows {
                    table: t("shop", "orders"),
                    known: ids.clone(),
                }]),
            ),
            (
                "a column-known UPDATE of unknown rows: its columns",
                Pending {
                    tables: vec![orders.clone()],
                    columns: vec![(orders.clone(), set.clone())],
                    ..Pending::default()
                },
                write(vec![What::Columns {
                    table: t("shop", "orders"),
                    set: set.clone(),
                    known: None,
                }]),
            ),
            (
                "a column-known UPDATE of known rows: its columns of those rows",
                Pending {
                    rows: vec![(orders.clone(), ids.clone())],
                    columns: vec![(orders.clone(), set.clone())],
                    ..Pending::default()
                },
                write(vec![What::Columns {
                    table: t("shop", "orders"),
                    set: set.clone(),
                    known: Some(ids.clone()),
                }]),
            ),
            (
                "a write scoped to a schema: the schema, as a write",
                Pending {
                    schemas: vec!["shop".into()],
                    ..Pending::default()
                },
                write(vec![What::Schema("shop".into())]),
            ),
            (
                "a write qcache cannot name: everything, counted as conservative",
                Pending {
                    all: true,
                    ..Pending::default()
                },
                vec![Invalidation::one(
                    Source::Here(InvalidationSource::Conservative),
                    What::Everything,
                )],
            ),
            (
                "DDL: its tables now (the catalog reload's bump is invalidation::ddl's)",
                Pending {
                    tables: vec![orders.clone()],
                    ddl: true,
                    ..Pending::default()
                },
                vec![Invalidation::new(
                    Source::Here(InvalidationSource::Write),
                    vec![What::Table(t("shop", "orders"))],
                )],
            ),
            (
                "a privilege change: after the tables, counted as privileges",
                Pending {
                    tables: vec![orders.clone()],
                    privileges: Some(PrivilegeChange::privilege_table()),
                    ..Pending::default()
                },
                vec![
                    Invalidation::new(
                        Source::Here(InvalidationSource::Write),
                        vec![What::Table(t("shop", "orders"))],
                    )
                    .of_rows(),
                    Invalidation::one(
                        Source::Here(InvalidationSource::Privileges),
                        What::Privileges(PrivilegeChange::privilege_table()),
                    ),
                ],
            ),
        ];
        for (rule, pending, want) in rows {
            assert_eq!(statement(&pending), want, "{rule}");
        }
    }

    /// What a transaction's end owes: everything it wrote, again, for everyone.
    #[test]
    fn a_transaction_end_gives_what_it_wrote() {
        let v = Versions::new();
        let orders = v.table("shop", "orders");
        let end =
            |what| Invalidation::new(Source::Here(InvalidationSource::TxnEnd), what).of_rows();
        let rows: Vec<(&str, Txn, Invalidation)> = vec![
            ("wrote nothing: nothing", Txn::default(), end(vec![])),
            (
                "wrote tables and schemas: them",
                Txn {
                    written: vec![orders.clone()],
                    written_schemas: vec!["logs".into()],
                    ..Txn::default()
                },
                end(vec![
                    What::Table(t("shop", "orders")),
                    What::Schema("logs".into()),
                ]),
            ),
            (
                "wrote something qcache could not name: everything too",
                Txn {
                    written: vec![orders.clone()],
                    written_unknown: true,
                    ..Txn::default()
                },
                end(vec![What::Table(t("shop", "orders")), What::Everything]),
            ),
        ];
        for (rule, txn, want) in rows {
            assert_eq!(transaction_end(&txn), want, "{rule}");
        }
    }
}
