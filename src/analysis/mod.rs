//! Statement analysis: the fast scan used on every query, the digest, and the sqlparser
//! analysis of a statement shape, memoised by digest.
//!
//! - [`scan`] (hit path, no allocation): the statement's [`StatementKind`], its SQL_CACHE /
//!   SQL_NO_CACHE [`Hint`] and whether it holds several statements; [`strip_hints`] cuts the
//!   hints before the statement is keyed and forwarded.
//! - [`digest`]: one hash per query shape (literals replaced), the memo key.
//! - [`analyze`] (miss path): which tables a read reads and whether it may be cached, or
//!   which tables a write changes. [`Analyzer`] memoises it by digest.
//! - [`analyze_set`] and [`use_schema`]: the session state changes qcache follows.
//!
//! - [`server_text`]: the statement as the upstream reads it (versioned executable comments
//!   it skips turned into plain comments, same length). Every analysis below is given this
//!   text; the original bytes are what is keyed and forwarded.
//!
//! Decisions the session code relies on:
//! - Fail closed: [`StatementKind`] is anything but `Write` only for a closed list of statement
//!   shapes; an unrecognised statement is a `Write` to tables the analysis may not name.
//! - `TABLE t` and `VALUES …` are [`StatementKind::Select`]; `WITH …` is `Select` or `Write` by its
//!   main statement (unrecognised → `Write`); MariaDB `SET STATEMENT … FOR s` has the kind
//!   of `s`, and [`analyze`] analyses `s`.
//! - Only the leading SELECT's options carry the hint (not UNION arms or subqueries).
//! - The digest keeps IN lists as they are (`IN (?, ?)` ≠ `IN (?, ?, ?)`) and hashes a
//!   statement containing a backslash verbatim (its string boundaries depend on sql_mode).
//! - [`SetInfo::query_cache_type`] is an `Option<`[`QcAssign`]`>` rather than the
//!   contract's `Option<QueryCacheType>`, because `= DEFAULT` must be representable.
//! - [`NotCached::Sequence`] is an extra reason (NEXTVAL, NEXT VALUE FOR, …), and so is
//!   [`NotCached::FullText`] (MATCH … AGAINST).
//! - [`SetInfo::may_write`] is an addition: `SET @x = stored_func()` runs code that may write.
//! - A read with [`ReadInfo::may_write`] must also be handled as a write to unknown tables.
//!   A multi-statement query that writes comes back as [`Analysis::Write`] (all statements'
//!   targets merged), even when it starts with SELECT.
//! - [`use_schema`] keeps the database name's case (it is part of the cache key); table
//!   qualification should lower-case it like [`TableRef`] does.

mod comments;
mod digest;
mod fallback;
mod functions;
pub use functions::upstream_is;
pub(crate) mod lexer;
mod memo;
pub mod params;
mod parse;
mod scan;
mod set;
pub mod slices;
mod sysvar;
mod version;

pub use comments::{key_text, server_str, server_text};
pub use digest::{digest, normalised_text};
pub use fallback::{calls_unknown_code, sequences_written};
pub use memo::Analyzer;
pub use parse::analyze;

/// The (schema, table) an object name in a statement names, lower-cased (`policy::patch`).
pub fn table_ref_of(name: &sqlparser::ast::ObjectName) -> Option<TableRef> {
    parse::table_ref(name)
}
pub use scan::{
    any_name, creates_table, first_keyword_is, is_compound, names_beyond_ascii, scan,
    split_statements, statement_body, strip_hints, Hint, Scan, StatementKind,
};
pub use set::{
    analyze_set, sql_level_text, statement_settings, use_schema, QcAssign, SetInfo, SqlLevel,
};
pub use sysvar::{contains_ci, qct_answer, qct_read, QctAnswer, QctRead};
pub use version::ServerVersion;

/// A table name as the server resolves it: `schema` when the statement qualified it, else
/// the session's default database `db`; both lower-cased. None when neither is known (the
/// server answers "No database selected").
pub fn qualify(schema: Option<&str>, name: &str, db: Option<&str>) -> Option<(String, String)> {
    let schema = match schema {
        Some(s) => s.to_lowercase(),
        None => db?.to_lowercase(),
    };
    Some((schema, name.to_lowercase()))
}

/// A table, lower-cased. `schema` is None when the statement did not qualify the name: the
/// session qualifies it with its default database.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableRef {
    pub schema: Option<String>,
    pub name: String,
}

impl TableRef {
    pub fn new(schema: Option<&str>, name: &str) -> Self {
        TableRef {
            schema: schema.map(str::to_lowercase),
            name: name.to_lowercase(),
        }
    }
}

/// Why the analysis refuses a read. Counted as the `policy::Reason` each converts into,
/// which owns the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotCached {
    /// sqlparser could not parse it (or it is not a plain query).
    Unparsable,
    /// Calls a non-deterministic or session-dependent built-in (the name, lower-case).
    NonDeterministic(&'static str),
    /// Calls a function that is not a known built-in: a stored function or a UDF.
    StoredFunction,
    /// Reads a user variable (`@x`).
    UserVariable,
    /// Reads a system variable (`@@x`).
    SystemVariable,
    /// `FOR UPDATE`, `FOR SHARE`, `LOCK IN SHARE MODE`.
    Locking,
    /// `SELECT … INTO` a file or variables.
    Into,
    /// Reads mysql, information_schema, performance_schema or sys.
    SystemSchema,
    /// Reads no table at all (`SELECT 1`): nothing would ever invalidate it, and it is cheap.
    NoTable,
    /// More than one statement in the query.
    MultiStatement,
    /// `SQL_CALC_FOUND_ROWS`: a later `FOUND_ROWS()` would see the cached query's count.
    CalcFoundRows,
    /// Uses a sequence (`NEXTVAL`, `NEXT VALUE FOR`, …): it advances on every call.
    Sequence,
    /// A full-text search (`MATCH … AGAINST`): its result depends on global-only settings
    /// (`ft_boolean_syntax`) that any client may change at once for every session with a
    /// `SET GLOBAL` no binlog records (`policy::context::GLOBAL_ONLY_RESULT_VARIABLES`).
    FullText,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInfo {
    /// Every table read anywhere in the statement: joins, subqueries, derived tables, CTE
    /// bodies (not the CTE names), UNION arms. Sorted, without duplicates.
    pub tables: Vec<TableRef>,
    pub verdict: Result<(), NotCached>,
    /// Calls a function that is not a known built-in (a stored function or UDF may write),
    /// or uses a sequence: the session must treat the statement as a write to unknown tables.
    pub may_write: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteTargets {
    /// Exactly these tables change (possibly none: GRANT, CREATE DATABASE, …).
    Tables(Vec<TableRef>),
    /// Every table of this schema (DROP DATABASE).
    Schema(String),
    /// Could not be analysed: invalidate conservatively.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteInfo {
    pub targets: WriteTargets,
    /// The schema changed: refresh the catalog.
    pub ddl: bool,
    /// DDL and friends end an open transaction.
    pub implicit_commit: bool,
    /// CREATE TEMPORARY TABLE names (also in `targets`).
    pub temp_created: Vec<TableRef>,
    /// DROP [TEMPORARY] TABLE names: a plain DROP TABLE may drop a temporary table too.
    pub temp_dropped: Vec<TableRef>,
    /// (old, new) names of `ALTER TABLE … RENAME` and `RENAME TABLE`, in order: a
    /// temporary table keeps being one under its new name.
    pub renamed: Vec<(TableRef, TableRef)>,
    /// A CREATE or ALTER of a table whose options make its rows other tables' (MERGE's
    /// `UNION=(…)`, a `CONNECTION`, an engine not known to store rows of its own): a write
    /// to it writes them (`fallback::table_rows_elsewhere`).
    pub other_rows: bool,
    /// `CREATE TABLE … LIKE src`: the new table is what `src` is, a MERGE table included.
    pub like_source: Option<TableRef>,
}

impl WriteInfo {
    pub(crate) fn unknown() -> Self {
        WriteInfo {
            targets: WriteTargets::Unknown,
            ddl: false,
            implicit_commit: false,
            temp_created: Vec::new(),
            temp_dropped: Vec::new(),
            renamed: Vec::new(),
            other_rows: false,
            like_source: None,
        }
    }

    pub(crate) fn tables(tables: Vec<TableRef>) -> Self {
        WriteInfo {
            targets: WriteTargets::Tables(tables),
            ..WriteInfo::unknown()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Analysis {
    Read(ReadInfo),
    Write(WriteInfo),
    /// Neither reads cacheable data nor writes tables (SHOW, SET, BEGIN, …).
    Other,
}

impl Analysis {
    /// Whether this is a read of tables the analysis lets the cache serve.
    pub fn reads_tables(&self) -> bool {
        match self {
            Analysis::Read(info) => info.verdict.is_ok() && !info.tables.is_empty(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;

    /// Literal text of several kinds, including the tricky ones: doubled quotes, `;`, `--`,
    /// `#`, `/*` inside strings.
    fn literal() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            (0u32..100000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
            "[a-zA-Z0-9 ;#*/-]{0,12}".prop_map(|s| format!("'{s}'")),
            "[a-z ;]{0,6}".prop_map(|s| format!("'{s}''{s}'")),
            "[0-9A-F]{2,8}".prop_map(|s| format!("0x{s}")),
            "[0-9A-F]{2,8}".prop_map(|s| format!("X'{s}'")),
            "[01]{1,8}".prop_map(|s| format!("b'{s}'")),
        ]
    }

    const SHAPES: &[&str] = &[
        "SELECT c FROM sbtest1 WHERE id = {0}",
        "SELECT a, b FROM db.t WHERE x = {0} AND y = {1} -- trailing",
        "SELECT * FROM t /* c */ WHERE s IN ({0}, {1}) LIMIT {1}",
        "UPDATE t SET a = {0} WHERE b = {1}",
        "INSERT INTO t (a, b) VALUES ({0}, {1})",
        "SELECT /*!40001 SQL_NO_CACHE */ a FROM t WHERE a > {0}",
    ];

    fn fill(shape: &str, a: &str, b: &str) -> String {
        shape.replace("{0}", a).replace("{1}", b)
    }

    /// SQL-ish token soup: more likely than random bytes to reach the deeper code paths.
    fn soup() -> impl Strategy<Value = String> {
        let tok = prop_oneof![
            Just("SELECT"),
            Just("FROM"),
            Just("WHERE"),
            Just("("),
            Just(")"),
            Just(","),
            Just(";"),
            Just("'"),
            Just("\""),
            Just("`"),
            Just("/*"),
            Just("*/"),
            Just("/*!"),
            Just("--"),
            Just("#"),
            Just("\n"),
            Just("@"),
            Just("@@"),
            Just("."),
            Just("t"),
            Just("db"),
            Just("1"),
            Just("0x"),
            Just("x'"),
            Just("WITH"),
            Just("AS"),
            Just("UPDATE"),
            Just("SET"),
            Just("DELETE"),
            Just("INSERT"),
            Just("INTO"),
            Just("JOIN"),
            Just("ON"),
            Just("SQL_CACHE"),
            Just("SQL_NO_CACHE"),
            Just("NOW()"),
            Just("LOAD"),
            Just("DATA"),
            Just("TABLE"),
            Just("STATEMENT"),
            Just("FOR"),
            Just("\\"),
            Just("é"),
            Just("="),
            Just("CREATE"),
            Just("TRIGGER"),
            Just("DO"),
        ];
        prop::collection::vec(tok, 0..40).prop_map(|v| v.join(" "))
    }

    proptest! {
        #[test]
        fn digest_ignores_literal_values(
            shape in prop::sample::select(SHAPES),
            a1 in literal(), b1 in literal(), a2 in literal(), b2 in literal(),
        ) {
            let x = fill(shape, &a1, &b1);
            let y = fill(shape, &a2, &b2);
            prop_assert_eq!(digest(x.as_bytes()), digest(y.as_bytes()), "{} / {}", x, y);
        }

        #[test]
        fn same_digest_same_tables(
            t1 in "[a-z]{1,3}", t2 in "[a-z]{1,3}", a in literal(), b in literal(),
        ) {
            let x = format!("SELECT * FROM {t1} WHERE v = {a}");
            let y = format!("SELECT * FROM {t2} WHERE v = {b}");
            if digest(x.as_bytes()) == digest(y.as_bytes()) {
                prop_assert_eq!(analyze(&x), analyze(&y));
            } else {
                prop_assert_ne!(t1.to_lowercase(), t2.to_lowercase());
            }
        }

        #[test]
        fn never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let s = scan(&bytes);
            let _ = strip_hints(&bytes, &s);
            let _ = digest(&bytes);
            let text = String::from_utf8_lossy(&bytes);
            let _ = analyze(&text);
            let _ = analyze_set(&text);
            let _ = use_schema(&text);
        }

        #[test]
        fn never_panics_on_sql_soup(sql in soup()) {
            let s = scan(sql.as_bytes());
            let stripped = strip_hints(sql.as_bytes(), &s);
            // Stripping hints never changes what kind of statement it is.
            prop_assert_eq!(scan(&stripped).kind, s.kind);
            let _ = digest(sql.as_bytes());
            let _ = analyze(&sql);
            let _ = analyze_set(&sql);
            let _ = use_schema(&sql);
            let _ = Analyzer::new(8).analyze(sql.as_bytes(), digest(sql.as_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name is qualified by its own schema, else the default database; both lower-cased
    /// (Unicode too, as the server folds them); with neither it names no table.
    #[test]
    fn names_are_qualified_as_the_server_resolves_them() {
        let pair = |s: &str, n: &str| Some((s.to_string(), n.to_string()));
        let cases = [
            (Some("Shop"), "Orders", None, pair("shop", "orders")),
            (Some("shop"), "t", Some("other"), pair("shop", "t")),
            (None, "T", Some("Db"), pair("db", "t")),
            (None, "Évé", Some("ÀB"), pair("àb", "évé")),
            (None, "t", None, None),
            // An empty default database is still one (it differs from none).
            (None, "t", Some(""), pair("", "t")),
        ];
        for (schema, name, db, want) in cases {
            assert_eq!(qualify(schema, name, db), want, "{schema:?} {name} {db:?}");
        }
    }
}
