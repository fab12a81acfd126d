//! Policy: which UPDATEs can change the order in which the server returns a table's rows, so
//! that they may not be treated as changing only the columns they assign.
//!
//! Row order is data: a read without `ORDER BY` (a `LIMIT`, a `GROUP_CONCAT`, a full read)
//! returns rows in the order its plan walks them — the clustered primary key, an index it
//! scans, the partitions. An UPDATE that changes a column of any index of the table (primary,
//! unique, secondary, full-text, spatial) or of its partitioning expressions may move a row
//! in that walk, and with it change which rows a `LIMIT` keeps and the order every other
//! unordered read shows, although those reads never name the column. Such an UPDATE changes
//! every column as far as entries care: it is no column-known write (docs/design.md,
//! "Columns"). Reads whose order the query fixes could keep the column-aware rule; qcache does
//! not tell them apart (fail closed: one rule for every read of the table).
//!
//! The text write path, the binary and SQL-level prepared paths (`session/slices.rs`) and the
//! binlog tail's row images (`invalidation/binlog.rs`) all ask [`update_keeps_order`] through
//! `Catalog::update_keeps_order`, which supplies the table's order columns.

use std::collections::HashSet;

use crate::analysis::slices::ColType;

/// What decides whether a read's result shows the order its plan walks rows in, as the
/// engine found it from the read's text (`analysis::slices::OrderShape`), its slices and
/// the catalog's keys and types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderFacts {
    /// A value made of the row order (`GROUP_CONCAT`, a window function, `ROWNUM()`), or a
    /// `LIMIT` below the top level.
    pub shown: bool,
    /// One row of aggregates no order changes, and no `LIMIT`.
    pub aggregate_row: bool,
    /// One row per group of a GROUP BY of columns whose equal values look alike
    /// ([`group_key_looks_alike`]), with only those columns and such aggregates selected,
    /// sorted by the key (the server sorts groups unless an ORDER BY covering it says how).
    pub grouped: bool,
    /// One table, read once (no join, subquery or derived table).
    pub single_table: bool,
    /// Its ORDER BY (plain columns) holds its primary key: a total order.
    pub ordered_by_key: bool,
    /// Every table's primary key is pinned to one value: at most one row.
    pub pinned_to_key: bool,
}

/// Whether a read may depend on the slices its WHERE pins rather than on its whole tables.
/// A write to another slice changes no row the read returns, but it changes what the
/// optimizer weighs (its range estimates dive into the whole index, the table's size), and
/// with it the plan: the index walked, the join order. Where the result shows the order the
/// plan walks rows in (several rows the query does not order completely, a `LIMIT` keeping
/// the first of them, `GROUP_CONCAT`), that write changes the result (row order is data).
/// Only reads whose result no order can change keep their slices: one row of aggregates, one
/// row per group of a value-typed key, at most one row (every table pinned to one value of
/// its primary key), one table ordered by its primary key. Fail closed: anything else reads
/// its tables whole.
pub fn slices_keep_order(f: &OrderFacts) -> bool {
    if f.shown {
        return false;
    }
    f.aggregate_row || f.grouped || f.pinned_to_key || (f.single_table && f.ordered_by_key)
}

/// Whether rows equal in a GROUP BY column of type `ty` show the same value, so that which
/// row of a group the server shows it from cannot matter: integers, dates and times,
/// decimals, strings under a binary NO PAD collation. Not other strings (`'a'` and `'A'`
/// are one group under most collations, `'a'` and `'a '` under PAD SPACE ones, shown as the
/// first row met) nor types qcache does not know.
pub fn group_key_looks_alike(ty: &ColType) -> bool {
    match ty {
        ColType::Int { .. } | ColType::Temporal { .. } | ColType::Decimal { .. } => true,
        ColType::Str { collation, .. } => collation.to_ascii_lowercase().ends_with("_nopad_bin"),
        ColType::Other => false,
    }
}

/// Whether an UPDATE that changes exactly `changed` (lower-cased column names) leaves every
/// row where it was in any order the server can return the table's rows in.
/// `order_columns`: the table's index and partitioning columns (lower-cased), or None when
/// qcache does not know them (catalog not loaded, an index on an expression, a partitioning
/// expression it cannot read): then no UPDATE keeps the order.
pub fn update_keeps_order(changed: &[String], order_columns: Option<&HashSet<String>>) -> bool {
    let Some(order) = order_columns else {
        return false;
    };
    changed.iter().all(|c| {
        let c = c.to_ascii_lowercase();
        // `_rowid` is the primary key under another name.
        c != "_rowid" && !order.contains(&c)
    })
}

/// The columns a partitioning expression (`PARTITION_EXPRESSION` or
/// `SUBPARTITION_EXPRESSION` as information_schema shows it: `` `k` ``, `` year(`d`) ``,
/// `` `a`,`b` ``) reads, of the table's `columns` (lower-cased). None when it names none of
/// them (an empty `KEY()` list, a form qcache cannot read): the caller then takes every
/// column as one.
pub fn partition_columns(expression: &str, columns: &HashSet<String>) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut flush = |w: &mut String| {
        let lw = w.to_lowercase();
        if columns.contains(&lw) {
            out.push(lw);
        }
        w.clear();
    };
    for ch in expression.chars() {
        match ch {
            '`' if quoted => {
                quoted = false;
                flush(&mut word);
            }
            '`' => {
                flush(&mut word);
                quoted = true;
            }
            c if quoted || c.is_alphanumeric() || c == '_' || c == '$' => word.push(c),
            _ => flush(&mut word),
        }
    }
    flush(&mut word);
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (changed columns, the table's order columns or None, keeps order).
    type OrderCase = (
        &'static [&'static str],
        Option<&'static [&'static str]>,
        bool,
    );
    /// (expression, table columns, columns read or None).
    type PartitionCase = (
        &'static str,
        &'static [&'static str],
        Option<&'static [&'static str]>,
    );

    fn set(cols: &[&str]) -> HashSet<String> {
        cols.iter().map(|c| c.to_string()).collect()
    }

    /// One row per rule: which reads keep their slices when another slice is written.
    #[test]
    fn which_reads_keep_their_slices() {
        let none = OrderFacts::default();
        let cases: &[(OrderFacts, bool, &str)] = &[
            (none, false, "several rows the query does not order"),
            (
                OrderFacts {
                    single_table: true,
                    ..none
                },
                false,
                "one table, unordered (the index walked decides)",
            ),
            (
                OrderFacts {
                    single_table: true,
                    ordered_by_key: true,
                    ..none
                },
                true,
                "ordered by the primary key, LIMIT or not",
            ),
            (
                OrderFacts {
                    single_table: true,
                    pinned_to_key: true,
                    ..none
                },
                true,
                "at most one row",
            ),
            (
                OrderFacts {
                    ordered_by_key: true,
                    ..none
                },
                false,
                "a join ordered by one table's key: the other's rows tie",
            ),
            (
                OrderFacts {
                    pinned_to_key: true,
                    ..none
                },
                true,
                "a join of tables each pinned to one key value: at most one row",
            ),
            (
                OrderFacts {
                    aggregate_row: true,
                    ..none
                },
                true,
                "one row of COUNT, SUM, MIN, MAX",
            ),
            (
                OrderFacts {
                    grouped: true,
                    ..none
                },
                true,
                "one row per group, sorted by an integer key",
            ),
            (
                OrderFacts {
                    shown: true,
                    aggregate_row: true,
                    ..none
                },
                false,
                "GROUP_CONCAT, a window, ROWNUM, a subquery's LIMIT",
            ),
            (
                OrderFacts {
                    shown: true,
                    single_table: true,
                    ordered_by_key: true,
                    ..none
                },
                false,
                "ordered, but a value shows the order rows were read in",
            ),
        ];
        for (facts, want, why) in cases {
            assert_eq!(slices_keep_order(facts), *want, "{why}");
        }
        let int = ColType::Int { min: 0, max: 9 };
        let date = ColType::Temporal {
            date_only: true,
            fsp: 0,
        };
        let dec = ColType::Decimal {
            precision: 5,
            scale: 2,
            unsigned: false,
        };
        let text = |collation: &str| ColType::Str {
            fold: crate::analysis::slices::Fold::Exact,
            max_chars: 10,
            collation: collation.into(),
        };
        for (ty, want) in [
            (int, true),
            (date, true),
            (dec, true),
            (text("utf8mb4_nopad_bin"), true),
            (text("utf8mb4_bin"), false),
            (text("utf8mb4_general_ci"), false),
            (ColType::Other, false),
        ] {
            assert_eq!(group_key_looks_alike(&ty), want, "{ty:?}");
        }
    }

    /// One row per rule: (changed columns, the table's order columns or None, keeps order).
    #[test]
    fn which_updates_keep_the_order() {
        let cases: &[OrderCase] = &[
            // A column no index or partitioning holds: rows stay where they are.
            (&["stock"], Some(&["id", "category_id"]), true),
            (&["stock", "price"], Some(&["id"]), true),
            // No index at all (heap order by insertion / hidden row id).
            (&["a"], Some(&[]), true),
            // The primary key.
            (&["id"], Some(&["id"]), false),
            // A secondary, unique or full-text index column, in any place of the index.
            (&["b"], Some(&["id", "a", "b"]), false),
            // One of several changed columns is enough.
            (
                &["stock", "category_id"],
                Some(&["id", "category_id"]),
                false,
            ),
            // Case: names compare lower-cased.
            (&["ID"], Some(&["id"]), false),
            // `_rowid` assigns the primary key.
            (&["_rowid"], Some(&[]), false),
            // Order columns unknown (catalog not loaded, expression index, unreadable
            // partitioning): fail closed.
            (&["stock"], None, false),
        ];
        for (changed, order, want) in cases {
            let changed: Vec<String> = changed.iter().map(|c| c.to_string()).collect();
            let order = order.map(set);
            assert_eq!(
                update_keeps_order(&changed, order.as_ref()),
                *want,
                "{changed:?} with order columns {order:?}"
            );
        }
    }

    /// (expression as information_schema shows it, table columns, columns read or None).
    #[test]
    fn partitioning_expressions_name_their_columns() {
        let cases: &[PartitionCase] = &[
            ("`k`", &["k", "a"], Some(&["k"])),
            ("year(`d`)", &["d", "a"], Some(&["d"])),
            ("`a`,`b`", &["a", "b", "c"], Some(&["a", "b"])),
            ("`Mixed Case`", &["mixed case"], Some(&["mixed case"])),
            ("to_days(`d`) ", &["d", "to_days"], Some(&["to_days", "d"])),
            ("k + 1", &["k"], Some(&["k"])),
            // KEY() with an empty list, or anything that names no column: unknown.
            ("", &["k"], None),
            ("`gone`", &["k"], None),
        ];
        for (expr, cols, want) in cases {
            let got = partition_columns(expr, &set(cols));
            let want = want.map(|w| w.iter().map(|c| c.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{expr}");
        }
    }
}
