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
