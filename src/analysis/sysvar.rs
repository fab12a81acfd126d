//! Reads of qcache's own system variable in statement text: where a SELECT reads
//! `@@query_cache_type` (the server has no such variable since MySQL 8.0, and MariaDB's is
//! not qcache's), so the session can answer it with qcache's value.

use super::lexer::{Lexer, Tok, Token};

/// How a SELECT reads `@@query_cache_type`.
#[derive(Debug, PartialEq, Eq)]
pub enum QctRead {
    /// Every read is a whole column of the select list, maybe aliased: (column index,
    /// whether it is `@@GLOBAL.`).
    Columns(Vec<(usize, bool)>),
    /// Some read is not (in an expression, a condition, a subquery, after DISTINCT).
    Opaque,
}

/// Words that end a select list.
const AFTER_SELECT_LIST: [&str; 13] = [
    "FROM",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "INTO",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "FOR",
    "LOCK",
    "WINDOW",
];

/// Where `sql` reads `@@query_cache_type`; None when it does not (a string or a column of
/// that name is no read). Tokens, so comments, case and spacing do not matter.
pub fn qct_read(sql: &[u8]) -> Option<QctRead> {
    // One byte search rules out nearly every statement before the case-insensitive one.
    if !sql.contains(&b'@') || !contains_ci(sql, b"query_cache_type") {
        return None;
    }
    let toks: Vec<Token> = Lexer::new(sql).collect();
    let word = |t: Option<&Token>, w: &str| t.is_some_and(|t| t.is_kw(sql, w));
    // Each read: (first token, token after it, global).
    let mut reads = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.tok != Tok::Var {
            continue;
        }
        let b = t.bytes(sql);
        if b.eq_ignore_ascii_case(b"@@query_cache_type") {
            reads.push((i, i + 1, false));
        } else if b.starts_with(b"@@")
            && toks.get(i + 1).is_some_and(|d| d.is_punct(b'.'))
            && word(toks.get(i + 2), "QUERY_CACHE_TYPE")
        {
            let scope = &b[2..];
            let global = scope.eq_ignore_ascii_case(b"global");
            if !global
                && !scope.eq_ignore_ascii_case(b"session")
                && !scope.eq_ignore_ascii_case(b"local")
            {
                // A scope the server refuses: its error stands.
                return Some(QctRead::Opaque);
            }
            reads.push((i, i + 3, global));
        }
    }
    if reads.is_empty() {
        return None;
    }
    if !word(toks.first(), "SELECT") {
        return Some(QctRead::Opaque);
    }
    // The select list's items, split at top-level commas.
    let mut items = Vec::new();
    let (mut depth, mut from, mut end) = (0usize, 1usize, toks.len());
    for (i, t) in toks.iter().enumerate().skip(1) {
        match t.tok {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth = depth.saturating_sub(1),
            Tok::Punct(b',') if depth == 0 => {
                items.push((from, i));
                from = i + 1;
            }
            Tok::Punct(b';') if depth == 0 => {
                end = i;
                break;
            }
            Tok::Word if depth == 0 && AFTER_SELECT_LIST.iter().any(|w| t.is_kw(sql, w)) => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    items.push((from, end));
    let alias = |t: &Token| {
        matches!(
            t.tok,
            Tok::Word | Tok::Backquoted | Tok::Str | Tok::DoubleQuoted
        )
    };
    let mut cols = Vec::new();
    for (n, &(a, b)) in items.iter().enumerate() {
        let Some(&(_, after, global)) = reads.iter().find(|r| r.0 == a) else {
            continue;
        };
        let whole = match toks.get(after..b).unwrap_or(&[]) {
            [] => true,
            [x] => alias(x),
            [as_, x] => as_.is_kw(sql, "AS") && alias(x),
            _ => false,
        };
        if whole {
            cols.push((n, global));
        }
    }
    Some(if cols.len() == reads.len() {
        QctRead::Columns(cols)
    } else {
        QctRead::Opaque
    })
}

/// Whether `needle` occurs in `hay`, ASCII case ignored.
pub fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// How qcache answers a SELECT of its `query_cache_type`.
#[derive(Debug, PartialEq, Eq)]
pub enum QctAnswer {
    /// The server's result with qcache's values in these columns (MariaDB, which has the
    /// variable).
    Columns(Vec<(usize, String)>),
    /// One row of qcache's own, named as the client spelled the variable (MySQL 8.0, which
    /// has none): (name, value).
    Own(String, String),
}

/// How qcache answers `stmt`'s reads of `@@query_cache_type`, with `value(global)` the
/// session's or the configured default. None: relayed with the server's answer (a read in
/// an expression or a condition; on MySQL anything but the bare one-column form).
pub fn qct_answer(stmt: &[u8], mariadb: bool, value: impl Fn(bool) -> String) -> Option<QctAnswer> {
    let cols = match qct_read(stmt)? {
        QctRead::Columns(cols) => cols,
        QctRead::Opaque => return None,
    };
    if mariadb {
        let values = cols.iter().map(|&(i, g)| (i, value(g))).collect();
        return Some(QctAnswer::Columns(values));
    }
    let norm: String = String::from_utf8_lossy(stmt)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let name = norm.trim_end_matches(';').trim().strip_prefix("select ")?;
    match name {
        "@@query_cache_type" | "@@session.query_cache_type" | "@@local.query_cache_type" => {
            Some(QctAnswer::Own(name.to_string(), value(false)))
        }
        "@@global.query_cache_type" => Some(QctAnswer::Own(name.to_string(), value(true))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per spelling: which columns qcache puts its value in.
    #[test]
    fn reads_of_query_cache_type() {
        use QctRead::{Columns, Opaque};
        let cases: &[(&str, Option<QctRead>)] = &[
            ("SELECT @@query_cache_type", Some(Columns(vec![(0, false)]))),
            (
                "select @@SESSION.query_cache_type AS q",
                Some(Columns(vec![(0, false)])),
            ),
            (
                "SELECT @@session . query_cache_type q",
                Some(Columns(vec![(0, false)])),
            ),
            (
                "SELECT @@local.query_cache_type `x`",
                Some(Columns(vec![(0, false)])),
            ),
            (
                "SELECT @@GLOBAL.query_cache_type",
                Some(Columns(vec![(0, true)])),
            ),
            (
                "SELECT @@query_cache_type, 1",
                Some(Columns(vec![(0, false)])),
            ),
            (
                "SELECT 1, @@query_cache_type AS a, NOW(), @@global.query_cache_type;",
                Some(Columns(vec![(1, false), (3, true)])),
            ),
            (
                "SELECT /*x*/ @@query_cache_type FROM t WHERE a = 1",
                Some(Columns(vec![(0, false)])),
            ),
            ("SELECT CONCAT(@@query_cache_type, 'x')", Some(Opaque)),
            ("SELECT @@query_cache_type = 'ON'", Some(Opaque)),
            (
                "SELECT 1 FROM t WHERE @@query_cache_type = 'ON'",
                Some(Opaque),
            ),
            ("SELECT DISTINCT @@query_cache_type", Some(Opaque)),
            (
                "SELECT @@query_cache_type, @@query_cache_type + 0",
                Some(Opaque),
            ),
            ("SELECT @@nope.query_cache_type", Some(Opaque)),
            ("SELECT '@@query_cache_type'", None),
            ("SELECT query_cache_type FROM t WHERE @a = 1", None),
            ("SELECT @@query_cache_size", None),
        ];
        for (sql, want) in cases {
            assert_eq!(&qct_read(sql.as_bytes()), want, "{sql}");
        }
    }

    /// Any case, anywhere in the text; an empty needle is in every text but the empty one
    /// (no window of length 0 is walked over nothing).
    #[test]
    fn contains_ignores_ascii_case() {
        let cases: &[(&str, &str, bool)] = &[
            ("SELECT @@Query_Cache_Type", "query_cache_type", true),
            ("query_cache_type", "QUERY_CACHE_TYPE", true),
            ("SELECT @@query_cache_typ", "query_cache_type", false),
            ("", "x", false),
            ("ab", "abc", false),
        ];
        for (hay, needle, want) in cases {
            assert_eq!(
                contains_ci(hay.as_bytes(), needle.as_bytes()),
                *want,
                "{hay}"
            );
        }
    }

    /// A statement that is not a SELECT but reads the variable gets the server's answer
    /// (qcache answers only a select list it can see whole).
    #[test]
    fn reads_outside_a_select_are_opaque() {
        for sql in [
            "SET @a = @@query_cache_type",
            "DO @@query_cache_type",
            "INSERT INTO t VALUES (@@query_cache_type)",
            "(SELECT @@query_cache_type)",
        ] {
            assert_eq!(qct_read(sql.as_bytes()), Some(QctRead::Opaque), "{sql}");
        }
    }

    /// The select list ends at the first clause keyword or `;` at depth 0: what follows
    /// (a second statement too) is not a column.
    #[test]
    fn the_select_list_ends_at_its_clause() {
        let cases: &[(&str, QctRead)] = &[
            (
                "SELECT @@query_cache_type; SELECT 1",
                QctRead::Columns(vec![(0, false)]),
            ),
            (
                "SELECT @@query_cache_type LIMIT 1",
                QctRead::Columns(vec![(0, false)]),
            ),
            (
                "SELECT @@query_cache_type INTO @x",
                QctRead::Columns(vec![(0, false)]),
            ),
            (
                "SELECT @@query_cache_type UNION SELECT @@query_cache_type",
                QctRead::Opaque,
            ),
            (
                "SELECT (1), @@GLOBAL.query_cache_type",
                QctRead::Columns(vec![(1, true)]),
            ),
        ];
        for (sql, want) in cases {
            assert_eq!(qct_read(sql.as_bytes()).as_ref(), Some(want), "{sql}");
        }
    }

    /// An alias may be a word, a quoted name or a string, with or without AS; two words
    /// after the read are not an alias.
    #[test]
    fn aliases_keep_a_read_whole() {
        let cases: &[(&str, bool)] = &[
            ("SELECT @@query_cache_type AS \"q\"", true),
            ("SELECT @@query_cache_type 'q'", true),
            ("SELECT @@query_cache_type AS `q`", true),
            ("SELECT @@query_cache_type a b", false),
            ("SELECT @@query_cache_type IS NULL", false),
        ];
        for (sql, whole) in cases {
            let want = if *whole {
                QctRead::Columns(vec![(0, false)])
            } else {
                QctRead::Opaque
            };
            assert_eq!(qct_read(sql.as_bytes()), Some(want), "{sql}");
        }
    }

    fn values(global: bool) -> String {
        if global { "DEMAND" } else { "ON" }.to_string()
    }

    /// MariaDB: the server's result, with qcache's value in each column that reads it, the
    /// session's or (for `@@GLOBAL.`) the configured default.
    #[test]
    fn mariadb_gets_its_columns_rewritten() {
        let cases: &[(&str, Option<QctAnswer>)] = &[
            (
                "SELECT @@query_cache_type",
                Some(QctAnswer::Columns(vec![(0, "ON".into())])),
            ),
            (
                "SELECT 1, @@global.query_cache_type g, @@query_cache_type",
                Some(QctAnswer::Columns(vec![
                    (1, "DEMAND".into()),
                    (2, "ON".into()),
                ])),
            ),
            ("SELECT @@query_cache_type = 1", None),
            ("SELECT 1", None),
        ];
        for (sql, want) in cases {
            assert_eq!(&qct_answer(sql.as_bytes(), true, values), want, "{sql}");
        }
    }

    /// MySQL 8.0: only the bare one-column form, answered as a row of qcache's own named as
    /// the client spelled it (lower-cased, spacing collapsed).
    #[test]
    fn mysql_gets_a_row_of_its_own() {
        let own = |n: &str, v: &str| Some(QctAnswer::Own(n.into(), v.into()));
        let cases: &[(&str, Option<QctAnswer>)] = &[
            ("SELECT @@query_cache_type", own("@@query_cache_type", "ON")),
            (
                "select   @@SESSION.query_cache_type ;",
                own("@@session.query_cache_type", "ON"),
            ),
            (
                "SELECT @@local.query_cache_type",
                own("@@local.query_cache_type", "ON"),
            ),
            (
                "SELECT @@GLOBAL.query_cache_type",
                own("@@global.query_cache_type", "DEMAND"),
            ),
            // Aliased, beside another column, spaced around the dot: the server's answer.
            ("SELECT @@query_cache_type AS q", None),
            ("SELECT @@query_cache_type, 1", None),
            ("SELECT @@session . query_cache_type", None),
        ];
        for (sql, want) in cases {
            assert_eq!(&qct_answer(sql.as_bytes(), false, values), want, "{sql}");
        }
    }
}
