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
    /// One row of aggregates no order changes (`MIN`/`MAX` of look-alike values, `SUM`/`AVG`
    /// of exact ones: [`group_key_looks_alike`], [`sum_is_exact`]), and no `LIMIT`.
    pub aggregate_row: bool,
    /// One row per group of a GROUP BY of columns whose equal values look alike
    /// ([`group_key_looks_alike`]), with only those columns and such aggregates selected,
    /// sorted by the key (the server sorts groups unless an ORDER BY covering it says how).
    pub grouped: bool,
    /// The server sorts a GROUP BY's groups by their key when no ORDER BY says otherwise:
    /// MariaDB does; MySQL 8.0 returns them in the order its plan made them (a temporary
    /// table's, an index's), so there `grouped` is no order.
    pub groups_sorted: bool,
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
/// its primary key), one table ordered by its primary key; or what [`result_keeps_order`]
/// proves (the engine asks both). Fail closed: anything else reads its tables whole.
pub fn slices_keep_order(f: &OrderFacts) -> bool {
    if f.shown {
        return false;
    }
    f.aggregate_row
        || (f.grouped && f.groups_sorted)
        || f.pinned_to_key
        || (f.single_table && f.ordered_by_key)
}

/// A value a read shows or sorts by (`analysis::slices` reads it from the text).
pub use crate::analysis::slices::Term;

/// A top-level FROM reference, for [`result_keeps_order`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultTable {
    /// Its primary key's columns (lower-cased), or None when qcache does not know them.
    pub key: Option<Vec<String>>,
    /// Its primary key is pinned to one value by the WHERE (one single-column key).
    pub pinned: bool,
}

/// What [`result_keeps_order`] decides from: a read's text (`analysis::slices::OrderShape`)
/// with the catalog's keys, its slices and its column types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultFacts {
    /// A value made of the row order (`GROUP_CONCAT`, a window, `ROWNUM()`), or a `LIMIT`
    /// below the top level.
    pub shown: bool,
    /// Tables read elsewhere than in the top-level FROM (subqueries, derived tables).
    pub nested: bool,
    /// `SELECT DISTINCT`, a `HAVING`, or one table referenced twice in the FROM: not
    /// modelled here.
    pub unmodelled: bool,
    /// The top-level FROM's references.
    pub tables: Vec<ResultTable>,
    /// Column equalities that hold in every row of the result, each meaning "reference `d`'s
    /// column equals reference `s`'s column, compared exactly (both integers)": (d, its
    /// column, s, its column). From the WHERE and inner joins' ON (both directions), and a
    /// LEFT JOIN's ON with `d` the reference it null-extends.
    pub equalities: Vec<(usize, String, usize, String)>,
    /// The GROUP BY list, every item a plain column (empty without GROUP BY); None when an
    /// item is something else or has a modifier.
    pub group_by: Option<Vec<(usize, String)>>,
    /// The select list; None for `*` and other items that are no expression.
    pub select: Option<Vec<Term>>,
    /// The ORDER BY list (empty without one), aliases and positions resolved to the select
    /// item they name; None when it cannot be read (`ORDER BY ALL`).
    pub order_by: Option<Vec<Term>>,
}

/// Whether a read's result is the same under every plan, proven from its shape (row order is
/// data; see [`slices_keep_order`] for why a plan may change under a write to another slice).
/// Two ways, each exact:
///
/// - At most one row: every reference is pinned to one value of its primary key, or joined
///   by its full primary key equal (exactly, integers) to columns of references already at
///   most one row (`products p JOIN categories c ON c.id = p.category_id WHERE p.id = ?`).
///   One row has no order; a group of it no choice of row.
/// - A total order over values no plan changes: for a reference `T` whose full primary key
///   the result is unique by — the only reference, without GROUP BY (one result row per `T`
///   row); or a GROUP BY holding `T`'s full primary key and only `T`'s columns (one group per
///   `T` row: a GROUP BY column of another table could split it) — every selected and every
///   ORDER BY value is a column of `T` (in a group of one `T` row, that row's value exactly,
///   whatever its collation) or, with GROUP BY, reads columns only inside `COUNT` (the size of
///   the group); and the ORDER BY holds all of `T`'s key columns, which break every tie of the
///   values before them, whatever their collation. A `LIMIT` then keeps the same rows.
///   A column of another table outside `COUNT` is refused: in a group it is the value of
///   whichever row the plan met first.
///
/// Fail closed: a subquery (its own `LIMIT`, its tables), `DISTINCT`, `HAVING`, a table
/// referenced twice, `*`, any other aggregate or expression (`SUM`, `MIN`, `MAX` would need
/// their argument's type), a key qcache does not know, a composite key partly covered: not
/// proven here ([`slices_keep_order`] may still hold).
pub fn result_keeps_order(f: &ResultFacts) -> bool {
    if f.shown || f.nested || f.unmodelled || f.tables.is_empty() {
        return false;
    }
    let key = |t: usize| f.tables[t].key.as_ref().filter(|k| !k.is_empty());
    // At most one row.
    let mut one: Vec<bool> = f
        .tables
        .iter()
        .map(|t| t.pinned && t.key.is_some())
        .collect();
    loop {
        let mut grew = false;
        for d in 0..f.tables.len() {
            if one[d] {
                continue;
            }
            let Some(k) = key(d) else { continue };
            let bound = k.iter().all(|kc| {
                f.equalities
                    .iter()
                    .any(|(t, c, s, _)| *t == d && c == kc && *s != d && one[*s])
            });
            if bound {
                one[d] = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    if one.iter().all(|o| *o) {
        return true;
    }
    // A total order over values no plan changes.
    let (Some(groups), Some(select), Some(order)) = (&f.group_by, &f.select, &f.order_by) else {
        return false;
    };
    (0..f.tables.len()).any(|t| {
        let Some(k) = key(t) else { return false };
        let grouped = !groups.is_empty();
        let unique = if grouped {
            groups.iter().all(|(r, _)| *r == t)
                && k.iter().all(|kc| groups.iter().any(|(_, c)| c == kc))
        } else {
            f.tables.len() == 1
        };
        let exact = |v: &Term| match v {
            Term::Column(r, _) => *r == t,
            Term::Count => grouped,
            Term::Other => false,
        };
        unique
            && select.iter().all(exact)
            && order.iter().all(exact)
            && k.iter()
                .all(|kc| order.iter().any(|v| *v == Term::Column(t, kc.clone())))
    })
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

/// Whether `SUM`/`AVG` of a column of type `ty` is the same whatever order it adds the rows
/// in: integers and decimals, summed exactly. Not floating-point columns (the last bits of a
/// DOUBLE sum follow the order it adds in: 0.3 + 0.2 + 0.1 is 0.6, 0.1 + 0.2 + 0.3 is
/// 0.6000000000000001, and a plan moved by a write to another slice changes that order),
/// strings (summed as doubles), dates, nor types qcache does not know.
pub fn sum_is_exact(ty: &ColType) -> bool {
    matches!(ty, ColType::Int { .. } | ColType::Decimal { .. })
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
                    groups_sorted: true,
                    ..none
                },
                true,
                "one row per group, sorted by an integer key",
            ),
            (
                OrderFacts {
                    grouped: true,
                    ..none
                },
                false,
                "one row per group on a server that does not sort groups (MySQL 8.0)",
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
            (int.clone(), true),
            (date.clone(), true),
            (dec.clone(), true),
            (text("utf8mb4_nopad_bin"), true),
            (text("utf8mb4_bin"), false),
            (text("utf8mb4_general_ci"), false),
            (ColType::Other, false),
        ] {
            assert_eq!(group_key_looks_alike(&ty), want, "{ty:?}");
        }
        // SUM/AVG: exact for integers and decimals only; a DOUBLE (Other), a string or a
        // date sums in floating point, in the order the plan meets rows.
        for (ty, want) in [
            (int, true),
            (dec, true),
            (date, false),
            (text("utf8mb4_nopad_bin"), false),
            (ColType::Other, false),
        ] {
            assert_eq!(sum_is_exact(&ty), want, "{ty:?}");
        }
    }

    /// One row per rule of [`result_keeps_order`], refusals included. References: 0 is the
    /// table the rule is about (key `id`), 1 another (key `id`), 2 one with the composite key
    /// (`a`, `b`).
    #[test]
    fn which_results_no_plan_changes() {
        use Term::{Column, Count, Other};
        let col = |t: usize, c: &str| Column(t, c.to_string());
        let table = |key: &[&str], pinned: bool| ResultTable {
            key: Some(key.iter().map(|k| k.to_string()).collect()),
            pinned,
        };
        let eq = |d: usize, dc: &str, s: usize, sc: &str| (d, dc.to_string(), s, sc.to_string());
        let g =
            |cols: &[(usize, &str)]| Some(cols.iter().map(|(t, c)| (*t, c.to_string())).collect());
        // orders o JOIN order_items i … GROUP BY o.id, o.created_at ORDER BY o.created_at DESC, o.id DESC
        let history = ResultFacts {
            tables: vec![table(&["id"], false), table(&["id"], false)],
            equalities: vec![],
            group_by: g(&[(0, "id"), (0, "created_at")]),
            select: Some(vec![col(0, "id"), col(0, "created_at"), Count]),
            order_by: Some(vec![col(0, "created_at"), col(0, "id")]),
            ..ResultFacts::default()
        };
        // products p JOIN categories c ON c.id = p.category_id WHERE p.id = ?
        let page = ResultFacts {
            tables: vec![table(&["id"], true), table(&["id"], false)],
            equalities: vec![eq(1, "id", 0, "category_id")],
            group_by: g(&[]),
            select: Some(vec![col(0, "name"), col(1, "name")]),
            order_by: Some(vec![]),
            ..ResultFacts::default()
        };
        let single = ResultFacts {
            tables: vec![table(&["id"], false)],
            group_by: g(&[]),
            select: Some(vec![col(0, "name"), col(0, "id")]),
            order_by: Some(vec![col(0, "name"), col(0, "id")]),
            ..ResultFacts::default()
        };
        let cases: Vec<(ResultFacts, bool, &str)> = vec![
            (
                history.clone(),
                true,
                "GROUP BY the key: ORDER BY ties broken by the key",
            ),
            (
                ResultFacts {
                    order_by: Some(vec![Count, col(0, "id")]),
                    ..history.clone()
                },
                true,
                "ORDER BY a count, then the key (the category listing)",
            ),
            (
                ResultFacts {
                    order_by: Some(vec![col(0, "created_at")]),
                    ..history.clone()
                },
                false,
                "ORDER BY without the key: ties in the plan's order",
            ),
            (
                ResultFacts {
                    order_by: Some(vec![]),
                    ..history.clone()
                },
                false,
                "no ORDER BY",
            ),
            (
                ResultFacts {
                    group_by: g(&[(0, "created_at")]),
                    ..history.clone()
                },
                false,
                "GROUP BY without the key: a group holds several rows of the table",
            ),
            (
                ResultFacts {
                    group_by: g(&[(0, "id"), (1, "id")]),
                    ..history.clone()
                },
                false,
                "GROUP BY the key and another table's column: several groups per row",
            ),
            (
                ResultFacts {
                    select: Some(vec![col(0, "id"), col(1, "qty"), Count]),
                    ..history.clone()
                },
                false,
                "a non-aggregated column of another table: the first row the plan met",
            ),
            (
                ResultFacts {
                    order_by: Some(vec![col(1, "qty"), col(0, "id")]),
                    ..history.clone()
                },
                false,
                "ORDER BY a non-aggregated column of another table",
            ),
            (
                ResultFacts {
                    select: Some(vec![col(0, "id"), Other]),
                    ..history.clone()
                },
                false,
                "another aggregate or expression (SUM, MAX, CONCAT)",
            ),
            (
                ResultFacts {
                    shown: true,
                    ..history.clone()
                },
                false,
                "GROUP_CONCAT, a window, ROWNUM",
            ),
            (
                ResultFacts {
                    nested: true,
                    ..history.clone()
                },
                false,
                "a subquery (its LIMIT keeps rows in the plan's order)",
            ),
            (
                ResultFacts {
                    unmodelled: true,
                    ..history.clone()
                },
                false,
                "DISTINCT, HAVING, a table twice",
            ),
            (
                ResultFacts {
                    select: None,
                    ..history.clone()
                },
                false,
                "SELECT *",
            ),
            (
                ResultFacts {
                    tables: vec![ResultTable::default(), table(&["id"], false)],
                    ..history.clone()
                },
                false,
                "the key unknown",
            ),
            (
                ResultFacts {
                    tables: vec![table(&["a", "b"], false), table(&["id"], false)],
                    group_by: g(&[(0, "a"), (0, "c")]),
                    select: Some(vec![col(0, "a"), Count]),
                    order_by: Some(vec![col(0, "c"), col(0, "a")]),
                    ..history.clone()
                },
                false,
                "a composite key partly covered by GROUP BY and ORDER BY",
            ),
            (
                ResultFacts {
                    tables: vec![table(&["a", "b"], false), table(&["id"], false)],
                    group_by: g(&[(0, "a"), (0, "b")]),
                    select: Some(vec![col(0, "a"), col(0, "b"), Count]),
                    order_by: Some(vec![Count, col(0, "b"), col(0, "a")]),
                    ..history.clone()
                },
                true,
                "a composite key covered whole",
            ),
            (
                single.clone(),
                true,
                "one table, ORDER BY a column then the key",
            ),
            (
                ResultFacts {
                    select: Some(vec![col(0, "id"), Count]),
                    ..single.clone()
                },
                false,
                "one table, COUNT beside a column without GROUP BY: one row of a plan's row",
            ),
            (
                ResultFacts {
                    tables: vec![table(&["id"], false), table(&["id"], false)],
                    ..single.clone()
                },
                false,
                "a join without GROUP BY ordered by one table's key: the other's rows tie",
            ),
            (
                page.clone(),
                true,
                "at most one row: pinned, then joined by the key",
            ),
            (
                ResultFacts {
                    equalities: vec![],
                    ..page.clone()
                },
                false,
                "the second table not joined by its key",
            ),
            (
                ResultFacts {
                    equalities: vec![eq(0, "category_id", 1, "id")],
                    tables: vec![table(&["id"], false), table(&["id"], true)],
                    ..page.clone()
                },
                false,
                "joined by another column equal to a one-row table's key: several rows",
            ),
            (
                ResultFacts {
                    tables: vec![table(&["id"], true), table(&["a", "b"], false)],
                    equalities: vec![eq(1, "a", 0, "category_id")],
                    ..page.clone()
                },
                false,
                "a composite key partly bound by the join",
            ),
            (
                ResultFacts {
                    tables: vec![table(&["id"], true), table(&["a", "b"], false)],
                    equalities: vec![eq(1, "a", 0, "category_id"), eq(1, "b", 0, "id")],
                    ..page.clone()
                },
                true,
                "a composite key bound whole",
            ),
            (
                ResultFacts {
                    shown: true,
                    ..page.clone()
                },
                false,
                "at most one row, but a subquery's LIMIT",
            ),
        ];
        for (facts, want, why) in cases {
            assert_eq!(result_keeps_order(&facts), want, "{why}");
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
