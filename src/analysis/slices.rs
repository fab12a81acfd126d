//! Row slices: which rows of each table a cacheable read depends on, and which rows a write
//! changes, as far as the statement alone proves it (sans-IO; column types come from the
//! caller).
//!
//! A *slice* is `(table, column, value)`: the rows whose column equals the value under the
//! column's own comparison. A read depends on slices when the top-level AND of its WHERE (and
//! of its inner joins' ON) pins a column to constants by `=` or `IN`, directly or through a
//! chain of column equalities. A write names its rows' values for the columns it pins, sets
//! or inserts. Everything doubtful gives no slice: the read depends on the whole table, the
//! write's rows are unknown for that column.
//!
//! Values are normalised so that two values the column compares equal always map to the same
//! key ([`normalize`]); a value that cannot be mapped soundly is not a slice. That is the one
//! property the whole scheme rests on: a write bumps the key of each value it touches, and a
//! read stamps the key of each value it pins, so equal-under-the-column must mean equal keys.

use std::collections::HashMap;
use std::sync::Arc;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, InTarget, JoinConstraint, JoinOperator, ObjectName, SetExpr,
    Statement, TableFactor, TableObject, TableWithJoins, UnaryOperator, Value, Visit,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::digest::{literal_tokens, LitTok};
use super::lexer::Tok;
use super::parse::table_ref;
use super::TableRef;

/// How a column compares, as far as slices care (from the catalog).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColType {
    /// An integer column holding values in `min..=max`.
    Int { min: i128, max: i128 },
    /// A CHAR/VARCHAR column whose collation qcache knows: `fold` says how its equal values
    /// are made identical; `collation` tells two string columns apart in a join chain.
    Str {
        fold: Fold,
        max_chars: u64,
        collation: String,
    },
    /// A DATE (`date_only`) or DATETIME column with `fsp` fractional digits: never an
    /// equality slice, but ranges on it are sliced by calendar buckets ([`range_keys`]).
    /// TIMESTAMP is not here: its comparisons depend on the session's time zone.
    Temporal { date_only: bool, fsp: u8 },
    /// A DECIMAL(precision, scale) column: never a slice (only patched aggregates read
    /// its exact type, `policy::patch`).
    Decimal {
        precision: u8,
        scale: u8,
        unsigned: bool,
    },
    /// Anything else: never a slice.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fold {
    /// Binary collation: equal means the same bytes.
    Exact,
    /// A case-insensitive collation whose equalities among printable ASCII strings are exactly
    /// ASCII case-folding.
    AsciiLower,
}

/// One column of a table, as the catalog reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnInfo {
    pub ty: ColType,
    pub nullable: bool,
    /// AUTO_INCREMENT: NULL or 0 written to it stores a generated value.
    pub auto_increment: bool,
}

impl ColType {
    /// Whether slices may key on the column's values: DECIMAL and unknown types never.
    pub fn sliceable(&self) -> bool {
        !matches!(self, ColType::Other | ColType::Decimal { .. })
    }

    /// From information_schema.COLUMNS: DATA_TYPE, COLUMN_TYPE, COLLATION_NAME,
    /// CHARACTER_MAXIMUM_LENGTH. Unknown or doubtful → Other.
    pub fn from_catalog(
        data_type: &str,
        column_type: &str,
        collation: &str,
        max_chars: Option<u64>,
    ) -> ColType {
        let unsigned = column_type.to_ascii_lowercase().contains("unsigned");
        let bits = match data_type.to_ascii_lowercase().as_str() {
            "tinyint" => 8,
            "smallint" => 16,
            "mediumint" => 24,
            "int" | "integer" => 32,
            "bigint" => 64,
            "date" => {
                return ColType::Temporal {
                    date_only: true,
                    fsp: 0,
                }
            }
            "decimal" => {
                // `decimal(P,S)`, possibly `unsigned` (ZEROFILL pads its text: Other).
                let ct = column_type.to_ascii_lowercase();
                let body = ct.strip_suffix(" unsigned").unwrap_or(&ct);
                let parsed = body
                    .strip_prefix("decimal(")
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|r| r.split_once(','))
                    .and_then(|(p, s)| Some((p.parse::<u8>().ok()?, s.parse::<u8>().ok()?)));
                return match parsed {
                    Some((precision, scale))
                        if (1..=65).contains(&precision) && scale <= 38 && scale <= precision =>
                    {
                        ColType::Decimal {
                            precision,
                            scale,
                            unsigned,
                        }
                    }
                    _ => ColType::Other,
                };
            }
            "datetime" => {
                // `datetime` or `datetime(N)`.
                let ct = column_type.to_ascii_lowercase();
                let fsp = match ct.strip_prefix("datetime") {
                    Some("") => 0,
                    Some(rest) => match rest
                        .strip_prefix('(')
                        .and_then(|r| r.strip_suffix(')'))
                        .and_then(|n| n.parse::<u8>().ok())
                    {
                        Some(n) if n <= 6 => n,
                        _ => return ColType::Other,
                    },
                    None => return ColType::Other,
                };
                return ColType::Temporal {
                    date_only: false,
                    fsp,
                };
            }
            "char" | "varchar" => {
                let Some(fold) = collation_fold(collation) else {
                    return ColType::Other;
                };
                let Some(max_chars) = max_chars else {
                    return ColType::Other;
                };
                return ColType::Str {
                    fold,
                    max_chars,
                    collation: collation.to_ascii_lowercase(),
                };
            }
            _ => return ColType::Other,
        };
        if unsigned {
            ColType::Int {
                min: 0,
                max: (1i128 << bits) - 1,
            }
        } else {
            ColType::Int {
                min: -(1i128 << (bits - 1)),
                max: (1i128 << (bits - 1)) - 1,
            }
        }
    }
}

/// The collations whose equality over printable ASCII qcache can reproduce. Language-specific
/// collations (contractions such as Danish `aa`, Turkish dotless i), accent- or
/// case-sensitive variants, and anything unrecognised are left out: their columns are never
/// sliced.
fn collation_fold(collation: &str) -> Option<Fold> {
    let c = collation.to_ascii_lowercase();
    let (charset, rest) = c.split_once('_')?;
    if !matches!(charset, "utf8mb4" | "utf8mb3" | "utf8" | "latin1" | "ascii") {
        return None;
    }
    match rest {
        "bin" | "nopad_bin" => Some(Fold::Exact),
        "general_ci"
        | "unicode_ci"
        | "unicode_520_ci"
        | "swedish_ci"
        | "general_nopad_ci"
        | "unicode_nopad_ci"
        | "unicode_520_nopad_ci"
        | "swedish_nopad_ci"
        | "0900_ai_ci"
        | "uca1400_ai_ci"
        | "uca1400_nopad_ai_ci" => Some(Fold::AsciiLower),
        _ => None,
    }
}

/// A constant as written in a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lit {
    /// An unsigned-or-negated decimal integer literal, as written (`-12`, `0`).
    Int(String),
    /// A plain single-quoted string.
    Str(String),
    Null,
    /// The n-th `?` of a prepared statement (0-based, in text order).
    Param(usize),
    /// A DATE / DATETIME / TIMESTAMP-typed parameter of an execute, as
    /// `YYYY-MM-DD HH:MM:SS.ffffff`: a temporal value, never compared as a string.
    Time(String),
}

/// The key of a value in a column, or None when the value cannot be mapped soundly.
/// Integers: the value itself (`'123'` and `123` are one slice; only canonical spellings of
/// strings, and only below 2^53 where MySQL compares strings with integers as doubles).
/// Strings: printable ASCII without trailing spaces (PAD SPACE collations ignore them),
/// within the column's length (longer values would be truncated), case-folded as the
/// collation folds.
pub fn normalize(ty: &ColType, lit: &Lit) -> Option<String> {
    match (ty, lit) {
        (ColType::Int { min, max }, Lit::Int(s)) => {
            let n = canonical_int(s)?;
            (n >= *min && n <= *max).then(|| format!("i{n}"))
        }
        (ColType::Int { min, max }, Lit::Str(s)) => {
            let n = canonical_int(s)?;
            (n.abs() < (1i128 << 53) && n >= *min && n <= *max).then(|| format!("i{n}"))
        }
        (
            ColType::Str {
                fold, max_chars, ..
            },
            Lit::Str(s),
        ) => {
            let printable = s.bytes().all(|b| (0x20..0x7f).contains(&b));
            if !printable || s.ends_with(' ') || s.len() as u64 > *max_chars {
                return None;
            }
            Some(match fold {
                Fold::Exact => format!("s{s}"),
                Fold::AsciiLower => format!("s{}", s.to_ascii_lowercase()),
            })
        }
        _ => None,
    }
}

/// `-?(0|[1-9][0-9]*)`, at most 20 digits, as an integer.
fn canonical_int(s: &str) -> Option<i128> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let ok = !digits.is_empty()
        && digits.len() <= 20
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !ok {
        return None;
    }
    let n: i128 = digits.parse().ok()?;
    Some(if s.starts_with('-') { -n } else { n })
}

/// A DATE / DATETIME value spelled strictly: `YYYY-MM-DD`, optionally followed by
/// ` HH:MM:SS` and `.` with 1 to 6 digits. Returns (days since 1970-01-01, seconds into the
/// day, the fraction's digits). Any other spelling (MySQL takes many: `2026-1-5`,
/// `20260105`, `T` separators, out-of-range parts it may warn about or clip) is refused: a
/// value qcache reads differently from the server must not pick a bucket.
fn parse_temporal(s: &str) -> Option<(i64, u32, &str)> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    if !(1000..=9999).contains(&y) || !(1..=12).contains(&m) || d < 1 || d > month_days(y, m) {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, d);
    if b.len() == 10 {
        return Some((days, 0, ""));
    }
    if b.len() < 19 || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, se) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if h > 23 || mi > 59 || se > 59 {
        return None;
    }
    let frac = match &s[19..] {
        "" => "",
        f => {
            let f = f.strip_prefix('.')?;
            if f.is_empty() || f.len() > 6 || !f.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            f
        }
    };
    Some((days, h * 3600 + mi * 60 + se, frac))
}

fn leap(y: u32) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn month_days(y: u32, m: u32) -> u32 {
    match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (the era arithmetic of the civil
/// calendar: 400-year eras of 146,097 days, years starting in March).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number of [`days_from_civil`].
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The day number of a stored date's parts (a row image's), or None for a zero date, a
/// zero month or day (which `ALLOW_INVALID_DATES` and zero-date modes may store), or a date
/// outside 1000..=9999.
pub fn temporal_day(y: u16, m: u8, d: u8) -> Option<i64> {
    let (y, m, d) = (u32::from(y), u32::from(m), u32::from(d));
    let ok = (1000..=9999).contains(&y) && (1..=12).contains(&m) && d >= 1 && d <= month_days(y, m);
    ok.then(|| days_from_civil(i64::from(y), m, d))
}

/// The calendar buckets a stored temporal value is in: its day, its month and its year. A
/// write bumps all three; a range read stamps the coarsest buckets that tile it
/// ([`range_keys`]), so whichever bucket the read stamped for a day, a write on that day
/// bumped it.
pub fn temporal_keys(days: i64) -> Vec<String> {
    let (y, m, _) = civil_from_days(days);
    vec![format!("d{days}"), format!("m{y}-{m}"), format!("y{y}")]
}

/// The buckets a write of `lit` into a temporal column stores in, or None when what the
/// server stores is not certain: a spelling [`parse_temporal`] refuses, a time of day into a
/// DATE (truncated, or refused under a strict sql_mode), more fractional digits than the
/// column keeps (the server rounds, which may carry into the next day).
fn temporal_write_keys(date_only: bool, fsp: u8, lit: &Lit) -> Option<Vec<String>> {
    let (Lit::Str(s) | Lit::Time(s)) = lit else {
        return None;
    };
    let (days, secs, frac) = parse_temporal(s)?;
    let excess = frac.get(usize::from(fsp)..).unwrap_or("");
    let fraction = frac.bytes().any(|c| c != b'0');
    if excess.bytes().any(|c| c != b'0') || (date_only && (secs != 0 || fraction)) {
        return None;
    }
    Some(temporal_keys(days))
}

/// Whether a read's pin `keys` on a column names one value of it: one equality key
/// ([`normalize`]: `i…`, `s…`). Calendar buckets ([`range_keys`]: `d…`, `m…`, `y…`) are
/// never one value, even one bucket: a year holds every date of it, a day every time of it
/// (row order is data: `policy::order`'s "at most one row" needs a key value).
pub fn pins_one_value(keys: &[String]) -> bool {
    matches!(keys, [k] if k.starts_with('i') || k.starts_with('s'))
}

/// Beyond this many buckets a range read depends on its whole table.
const MAX_RANGE_KEYS: usize = 40;

/// The buckets that tile the days `lo..=hi`: whole years as year buckets, whole months as
/// month buckets, the rest as days; None when that takes more than [`MAX_RANGE_KEYS`] or the
/// range is empty.
pub fn range_keys(lo: i64, hi: i64) -> Option<Vec<String>> {
    if lo > hi {
        return None;
    }
    let mut out = Vec::new();
    let mut d = lo;
    while d <= hi {
        let (y, m, day) = civil_from_days(d);
        let next_year = days_from_civil(y + 1, 1, 1);
        let next_month = if m == 12 {
            next_year
        } else {
            days_from_civil(y, m + 1, 1)
        };
        if m == 1 && day == 1 && next_year - 1 <= hi {
            out.push(format!("y{y}"));
            d = next_year;
        } else if day == 1 && next_month - 1 <= hi {
            out.push(format!("m{y}-{m}"));
            d = next_month;
        } else {
            out.push(format!("d{d}"));
            d += 1;
        }
        if out.len() > MAX_RANGE_KEYS {
            return None;
        }
    }
    Some(out)
}

/// One bound of a range on a temporal column: `col > v` / `>=` (lower) or `<` / `<=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Lower,
    /// `strict`: `<`.
    Upper {
        strict: bool,
    },
}

/// The day a bound puts on the column's values, conservatively: every stored value that
/// satisfies the bound is on that day or after it (lower), or on it or before (upper). The
/// server converts the constant to the column's temporal type and may round a fraction, so
/// a fraction moves an upper bound one day on; only `< 'D 00:00:00'` (or `< 'D'`) excludes D.
fn bound_day(bound: Bound, lit: &Lit) -> Option<i64> {
    let (Lit::Str(s) | Lit::Time(s)) = lit else {
        return None;
    };
    let (days, secs, frac) = parse_temporal(s)?;
    let zero_frac = frac.bytes().all(|c| c == b'0');
    Some(match bound {
        Bound::Lower => days,
        Bound::Upper { .. } if !zero_frac => days + 1,
        Bound::Upper { strict: true } if secs == 0 => days - 1,
        Bound::Upper { .. } => days,
    })
}

/// Parses one statement for slice analysis. None when anything about the text makes the AST
/// doubtful: a backslash (its meaning depends on sql_mode), an executable comment the server
/// runs but sqlparser skips, several statements, a parse error, or an operator sqlparser
/// binds differently from the server ([`misparsed_operators`]).
pub fn parse_one(sql: &str) -> Option<Statement> {
    if doubtful_text(sql) {
        return None;
    }
    let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).ok()?;
    if stmts.len() != 1 || misparsed_operators(&stmts[0]) {
        return None;
    }
    stmts.pop()
}

/// Whether `stmt` holds an operator whose precedence sqlparser's MySQL dialect gets wrong, so
/// that the tree's top-level AND is not the server's: `XOR` (the server binds it looser than
/// AND, sqlparser tighter than `=`) and `||` (the server's OR unless PIPES_AS_CONCAT;
/// sqlparser's concatenation, as tight as `*`). `a = 1 AND b = 2 XOR 1` is all rows but
/// those to the server, `a = 1 AND b = (2 XOR 1)` to the tree.
fn misparsed_operators(stmt: &Statement) -> bool {
    struct Find(bool);
    impl sqlparser::ast::Visitor for Find {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if let Expr::BinaryOp {
                op: BinaryOperator::Xor | BinaryOperator::StringConcat,
                ..
            } = e
            {
                self.0 = true;
                return std::ops::ControlFlow::Break(());
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut f = Find(false);
    let _ = stmt.visit(&mut f);
    f.0
}

/// The slices a read depends on, per table as written: (column, literals). A table not in
/// the map depends on all its rows. `columns(table, column)` is the catalog's answer for the
/// table as written (the caller qualifies it).
pub type ReadPins = HashMap<TableRef, (String, Vec<String>)>;

/// Whether the text itself rules slices out (see [`parse_one`]): checked on every statement
/// a shape is applied to, since the digest folds comments away. A `[` outside strings is a
/// name under sql_mode=MSSQL (`[x']` opens no string): the literals and conditions the
/// default reading finds are not the server's there.
fn doubtful_text(sql: &str) -> bool {
    sql.len() > super::parse::MAX_PARSE_BYTES
        || sql.contains('\\')
        || sql.contains("/*")
        || sql.contains('#')
        || sql.contains("--")
        || super::lexer::brackets_read_otherwise(sql.as_bytes())
}

/// Where a constant of a statement comes from, in a [`Shape`] shared by every statement of
/// one digest: each statement's literals are read from its own tokens, never from the
/// statement the shape was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// The k-th literal of the digest's walk, with the sign the walk folds into it.
    Lit(usize),
    /// The n-th `?` of a prepared statement.
    Param(usize),
    Null,
}

/// A column of a reference of the FROM: (reference index, lower-cased column).
type Col = (usize, String);

/// One top-level conjunct of a read, as far as slices care.
#[derive(Debug, Clone)]
enum Fact {
    /// `a = b` between two columns.
    Eq(Col, Col),
    /// `a = constant`.
    Const(Col, Slot),
    /// `a IN (constants)`; None for an item that is not a constant.
    In(Col, Vec<Option<Slot>>),
    /// `a > constant`, `>=`, `<`, `<=`, or one side of `a BETWEEN x AND y`.
    Range(Col, Bound, Slot),
}

/// A cacheable SELECT's slice structure without its constants.
#[derive(Debug)]
struct ReadShape {
    refs: Vec<Ref>,
    facts: Vec<Fact>,
    /// References per table anywhere in the statement (subqueries, derived tables…).
    everywhere: HashMap<TableRef, usize>,
    /// Every name the statement spells ([`read_words`]): a superset of the columns it reads
    /// of any table. None when it may read columns it does not name.
    words: Option<Vec<String>>,
    /// Column equalities of a LEFT JOIN's ON (top-level AND), with the index of the
    /// reference the join null-extends: no filter on the result, but every row of that
    /// reference the result holds satisfies them (derived slices).
    outer: Vec<(usize, Col, Col)>,
    /// What decides whether the order its plan walks rows shows in its result.
    order: Box<OrderShape>,
}

/// A value a read shows or sorts by, as far as `policy::order::result_keeps_order` cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// A plain column: (index of its reference in the top-level FROM, lower-cased name).
    Column(usize, String),
    /// Reads columns only inside `COUNT(…)`: the number of rows (or of values) of its group,
    /// whichever order they come in.
    Count,
    /// Anything else (another aggregate, an expression, a subquery): not known to be the same
    /// under every plan.
    Other,
}

/// What a read's text says of the order its plan walks rows in showing in its result (row
/// order is data: `policy::order::slices_keep_order` decides from these and the catalog).
/// Columns are (reference as the statement spells it, lower-cased name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderShape {
    /// A value made of the order rows come in (`GROUP_CONCAT`, `JSON_ARRAYAGG`,
    /// `JSON_OBJECTAGG`, `ROWNUM()`, a window function), or a `LIMIT`/`OFFSET`/`FETCH`
    /// below the top level (which rows a subquery keeps), anywhere in the statement.
    pub shown: bool,
    /// A top-level `LIMIT`, `OFFSET` or `FETCH`.
    pub limited: bool,
    /// Tables read elsewhere than in the top-level FROM (subqueries, derived tables).
    pub nested: bool,
    /// The top-level FROM's tables.
    pub tables: Vec<TableRef>,
    /// The select list holds only aggregates whose value no order changes (`COUNT`, `SUM`,
    /// `MIN`, `MAX`, `AVG`, `BIT_AND`, `BIT_OR`, `BIT_XOR`), and there is no GROUP BY: one
    /// row.
    pub aggregates_only: bool,
    /// A GROUP BY of plain columns with no modifier, the select list holding only those
    /// columns and such aggregates, and an ORDER BY, if any, of plain columns covering them
    /// all before any other column (`ORDER BY e, k` sorts by some row's `e`): one row per
    /// group, sorted by its key. The columns, or None.
    pub grouped_by: Option<Vec<(TableRef, String)>>,
    /// The top-level ORDER BY when every item is a plain column (else empty), a bare name
    /// of a select alias read as that item (ORDER BY finds aliases before columns:
    /// `SELECT c AS id … ORDER BY id` sorts by `c`).
    pub ordered_by: Vec<(TableRef, String)>,
    /// `SELECT DISTINCT`, a `HAVING`, or one table referenced twice in the top-level FROM.
    pub unmodelled: bool,
    /// A GROUP BY, or an aggregate's name anywhere in the statement (a column of that name
    /// counts too: fail closed): a column outside an aggregate shows some row of its group,
    /// which one the plan decides.
    pub aggregated: bool,
    /// The columns `MIN`/`MAX` of the select list and the HAVING read, each the whole
    /// argument: of two values equal under the column's collation (`'a'`, `'A'`) the plan
    /// decides which one shows. None when an argument is anything but a plain column.
    pub min_max: Option<Vec<(TableRef, String)>>,
    /// The columns `SUM`/`AVG` of the select list and the HAVING read, each the whole
    /// argument: a floating-point sum's last bits depend on the order it adds rows in
    /// (0.3 + 0.2 + 0.1 is 0.6, 0.1 + 0.2 + 0.3 is 0.6000000000000001). None when an
    /// argument is anything but a plain column.
    pub sums: Option<Vec<(TableRef, String)>>,
    /// The GROUP BY list by reference index (in `tables`), every item a plain column that no
    /// select alias shadows, with no modifier (empty without GROUP BY); else None.
    pub group_cols: Option<Vec<(usize, String)>>,
    /// The select list's values; None for `*` and the like.
    pub select: Option<Vec<Term>>,
    /// The ORDER BY list's values (empty without one), a bare name of a select alias
    /// resolved to that item (aliases come first in ORDER BY); None for `ORDER BY ALL`.
    pub order_terms: Option<Vec<Term>>,
    /// Column equalities every result row satisfies: (reference d, its column, reference s,
    /// its column), from the WHERE and inner joins' ON both ways, and from a LEFT JOIN's ON
    /// with d the reference it null-extends. Untyped: the engine keeps those compared exactly.
    pub equalities: Vec<(usize, String, usize, String)>,
}

/// Aggregates whose value does not depend on the order of the rows they read (exact types:
/// `SUM` of a DOUBLE column may differ in its last bits, left as it is; `STD`/`VARIANCE`
/// accumulate in floating point and are not here).
const ORDER_FREE_AGGREGATES: &[&str] = &[
    "avg", "bit_and", "bit_or", "bit_xor", "count", "max", "min", "sum",
];

/// Aggregates, order-free or not ([`OrderShape::aggregated`]).
const AGGREGATE_WORDS: &[&str] = &[
    "avg",
    "bit_and",
    "bit_or",
    "bit_xor",
    "count",
    "group_concat",
    "json_arrayagg",
    "json_objectagg",
    "max",
    "median",
    "min",
    "percentile_cont",
    "percentile_disc",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "sum",
    "var_pop",
    "var_samp",
    "variance",
];

/// The columns the aggregates named in `names` (lower-case) read in `items`
/// ([`OrderShape::min_max`], [`OrderShape::sums`]); None when one reads anything but a plain
/// column.
fn aggregate_columns(
    items: &[&Expr],
    names: &[&str],
    column: &dyn Fn(&Expr) -> Option<(TableRef, String)>,
) -> Option<Vec<(TableRef, String)>> {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    struct Walk<'c> {
        column: &'c dyn Fn(&Expr) -> Option<(TableRef, String)>,
        names: &'c [&'c str],
        found: Vec<(TableRef, String)>,
        opaque: bool,
    }
    impl sqlparser::ast::Visitor for Walk<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            let Expr::Function(f) = e else {
                return std::ops::ControlFlow::Continue(());
            };
            let name = f.name.0.last().and_then(|p| p.as_ident());
            let name = name.map(|i| i.value.to_ascii_lowercase());
            if !name.is_some_and(|n| self.names.contains(&n.as_str())) {
                return std::ops::ControlFlow::Continue(());
            }
            let arg = match &f.args {
                FunctionArguments::List(l)
                    if l.args.len() == 1 && l.duplicate_treatment.is_none() =>
                {
                    match &l.args[0] {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) => (self.column)(a),
                        _ => None,
                    }
                }
                _ => None,
            };
            match arg {
                Some(c) => self.found.push(c),
                None => self.opaque = true,
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut w = Walk {
        column,
        names,
        found: Vec::new(),
        opaque: false,
    };
    for e in items {
        let _ = sqlparser::ast::Visit::visit(*e, &mut w);
    }
    (!w.opaque).then_some(w.found)
}

/// Words whose value shows the order rows come in. The variance family among them:
/// `VARIANCE`, `STD` and their kin accumulate in floating point (Welford's recurrence), so
/// their last bits follow the order the plan adds rows in, even over integers (1, 2, 4
/// gives 1.5555555555555554, 4, 2, 1 gives 1.5555555555555556); the select list refuses
/// them as no order-free aggregate, but a HAVING on one decides whether a row shows at all
/// (adversary28), and so does one anywhere else. MySQL's `ANY_VALUE` is some row's value,
/// the first the plan met (MariaDB 10.11 has no such function: fail closed for MySQL).
const ORDER_SHOWING_WORDS: &[&str] = &[
    "any_value",
    "group_concat",
    "json_arrayagg",
    "json_objectagg",
    "over",
    "rownum",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "var_pop",
    "var_samp",
    "variance",
];

/// What a read's words say of its order, anywhere in the statement: (a word of
/// [`ORDER_SHOWING_WORDS`], how many `LIMIT`/`OFFSET`/`FETCH`, a word of [`AGGREGATE_WORDS`]).
fn order_words(sql: &str) -> (bool, usize, bool) {
    let bytes = sql.as_bytes();
    let mut lx = super::lexer::Lexer::new(bytes);
    let (mut shown, mut limits, mut aggregated) = (false, 0usize, false);
    while let Some(t) = lx.next_token() {
        if t.tok != Tok::Word {
            continue;
        }
        let w = t.bytes(bytes).to_ascii_lowercase();
        let w = std::str::from_utf8(&w).unwrap_or("");
        shown |= ORDER_SHOWING_WORDS.contains(&w);
        aggregated |= AGGREGATE_WORDS.contains(&w);
        limits += usize::from(matches!(w, "limit" | "offset" | "fetch"));
    }
    (shown, limits, aggregated)
}

/// What decides whether a read's row order shows ([`OrderShape`]).
fn order_shape(
    sql: &str,
    q: &sqlparser::ast::Query,
    sel: &sqlparser::ast::Select,
    refs: &[Ref],
    everywhere: &HashMap<TableRef, usize>,
) -> OrderShape {
    use sqlparser::ast::{GroupByExpr, SelectItem};
    let (mut shown, limits, mut aggregated) = order_words(sql);
    let limited = q.limit_clause.is_some() || q.fetch.is_some();
    // Every LIMIT/OFFSET/FETCH word the top level does not account for may cut a subquery
    // (`LIMIT 1 OFFSET 2` is two words of the top level's one clause; any doubt counts).
    let top = match (&q.limit_clause, &q.fetch) {
        (None, None) => 0,
        _ => 2,
    };
    shown |= limits > top;
    let column = |e: &Expr| column_ref(e, refs).map(|(i, c)| (refs[i].table.clone(), c));
    let aggregate = |e: &Expr| aggregates_only(e);
    let items: Option<Vec<&Expr>> = sel
        .projection
        .iter()
        .map(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .collect();
    // By reference: a table read twice (`o a JOIN o b`) has two, and `b.d` is not `a.d`.
    let group_at: Option<Vec<(usize, String)>> = match &sel.group_by {
        GroupByExpr::Expressions(g, m) if m.is_empty() => {
            g.iter().map(|e| column_ref(e, refs)).collect()
        }
        _ => None,
    };
    let groups: Option<Vec<(TableRef, String)>> = group_at.as_ref().map(|g| {
        g.iter()
            .map(|(i, c)| (refs[*i].table.clone(), c.clone()))
            .collect()
    });
    aggregated |= groups.as_ref().is_none_or(|g| !g.is_empty());
    // What the HAVING computes decides which groups show, as the select list their values.
    let shown_values: Option<Vec<&Expr>> = items
        .as_ref()
        .map(|i| i.iter().copied().chain(sel.having.as_ref()).collect());
    let read_by = |names: &[&str]| {
        shown_values
            .as_ref()
            .and_then(|i| aggregate_columns(i, names, &|e| column(e)))
    };
    let (min_max, sums) = (read_by(&["min", "max"]), read_by(&["sum", "avg"]));
    let (group_cols, select, order_terms) = result_terms(q, sel, refs, items.as_deref());
    // ORDER BY finds a select alias before a column (`order_terms` resolves bare names).
    let ordered_by: Option<Vec<(TableRef, String)>> = order_terms.as_ref().and_then(|o| {
        o.iter()
            .map(|t| match t {
                Term::Column(i, c) => Some((refs[*i].table.clone(), c.clone())),
                _ => None,
            })
            .collect()
    });
    let aggregates_only = groups.as_ref().is_some_and(|g| g.is_empty())
        && !items.as_ref().is_none_or(|i| i.is_empty())
        && items
            .as_ref()
            .is_some_and(|i| i.iter().all(|e| aggregate(e)));
    let covered =
        |g: &[(usize, String)]| ordered_by.is_some() && key_sorts_groups(g, order_terms.as_deref());
    let grouped_by = match (&group_at, &items) {
        (Some(g), Some(items))
            if !g.is_empty()
                && sel.distinct.is_none()
                && items.iter().all(|e| {
                    aggregate(e) || column_ref(e, refs).is_some_and(|c| g.contains(&c))
                })
                && covered(g) =>
        {
            groups.clone()
        }
        _ => dated_groups(sel, refs, items.as_deref(), order_terms.as_deref()),
    };
    let top_refs = refs.len();
    let anywhere: usize = everywhere.values().sum();
    let tables: Vec<TableRef> = refs.iter().map(|r| r.table.clone()).collect();
    let repeated = tables
        .iter()
        .enumerate()
        .any(|(i, t)| tables[..i].contains(t));
    OrderShape {
        shown,
        limited,
        nested: anywhere != top_refs,
        tables,
        aggregates_only,
        grouped_by,
        ordered_by: ordered_by.unwrap_or_default(),
        unmodelled: sel.distinct.is_some()
            || sel.having.is_some()
            || repeated
            || sel.from.iter().any(|f| !plain_from(f)),
        aggregated,
        min_max,
        sums,
        group_cols,
        select,
        order_terms,
        equalities: Vec::new(),
    }
}

/// Whether a GROUP BY of `groups` (by reference) comes sorted by its key under the ORDER BY
/// `order` (its terms; None when unreadable): none, or plain columns covering the whole key
/// before any other column. A column outside the GROUP BY holds the value of whichever row
/// of its group the plan met first, and sorts the groups by it (`ORDER BY e, k`) unless the
/// whole key came before it and broke every tie (`ORDER BY k, e`).
fn key_sorts_groups(groups: &[(usize, String)], order: Option<&[Term]>) -> bool {
    let Some(order) = order else { return false };
    let mut left: Vec<&(usize, String)> = groups.iter().collect();
    for t in order {
        if left.is_empty() {
            break;
        }
        let Term::Column(i, c) = t else { return false };
        if !groups.iter().any(|(gi, gc)| gi == i && gc == c) {
            return false;
        }
        left.retain(|(gi, gc)| !(gi == i && gc == c));
    }
    order.is_empty() || left.is_empty()
}

/// [`OrderShape::grouped_by`] of a GROUP BY holding `DATE(col)` (the dashboard's per-day
/// revenue): its key is a DATE value, whose equal values look alike, and the server sorts
/// the groups by it. Taken without an ORDER BY only (`order`: its terms), each item a plain
/// column or `DATE()` of one, the select list (`items`) holding only those items as written
/// and order-free aggregates; the column stands for the key (its type is the one
/// `policy::order::group_key_looks_alike` is asked of: a temporal or integer column's
/// `DATE()` is a date or NULL).
fn dated_groups(
    sel: &sqlparser::ast::Select,
    refs: &[Ref],
    items: Option<&[&Expr]>,
    order: Option<&[Term]>,
) -> Option<Vec<(TableRef, String)>> {
    let sqlparser::ast::GroupByExpr::Expressions(g, m) = &sel.group_by else {
        return None;
    };
    let keys: Vec<(usize, String, bool)> = g
        .iter()
        .map(|e| match column_ref(e, refs) {
            Some((i, c)) => Some((i, c, false)),
            None => column_ref(date_arg(e)?, refs).map(|(i, c)| (i, c, true)),
        })
        .collect::<Option<_>>()?;
    let shows_key = |e: &Expr| match column_ref(e, refs) {
        Some((i, c)) => keys.contains(&(i, c, false)),
        None => date_arg(e)
            .and_then(|a| column_ref(a, refs))
            .is_some_and(|(i, c)| keys.contains(&(i, c, true))),
    };
    (m.is_empty()
        && keys.iter().any(|(_, _, d)| *d)
        && sel.distinct.is_none()
        && order.is_some_and(<[Term]>::is_empty)
        && items?.iter().all(|e| aggregates_only(e) || shows_key(e)))
    .then(|| {
        keys.iter()
            .map(|(i, c, _)| (refs[*i].table.clone(), c.clone()))
            .collect()
    })
}

/// The argument of `DATE(x)` as MariaDB reads it: the unquoted, unqualified name `date`
/// with one plain argument, no modifier (patching's GROUP BY reads it too).
pub fn date_arg(e: &Expr) -> Option<&Expr> {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let Expr::Function(f) = e else { return None };
    let named_date = matches!(f.name.0.as_slice(), [p] if p
        .as_ident()
        .is_some_and(|i| i.quote_style.is_none() && i.value.eq_ignore_ascii_case("date")));
    let FunctionArguments::List(l) = &f.args else {
        return None;
    };
    if !named_date
        || l.duplicate_treatment.is_some()
        || !l.clauses.is_empty()
        || f.filter.is_some()
        || f.over.is_some()
        || !f.within_group.is_empty()
        || !matches!(f.parameters, FunctionArguments::None)
    {
        return None;
    }
    match l.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => Some(x),
        _ => None,
    }
}

/// Whether `e` reads columns only inside aggregates of [`ORDER_FREE_AGGREGATES`] (`COUNT(*)`,
/// `CAST(SUM(v) AS SIGNED)`, `MAX(a) - MIN(a)`), and holds at least one: its value no order
/// of the rows changes.
fn aggregates_only(e: &Expr) -> bool {
    aggregates_of(e, ORDER_FREE_AGGREGATES)
}

/// (GROUP BY columns, select values, ORDER BY values): see [`result_terms`].
type ResultTerms = (
    Option<Vec<(usize, String)>>,
    Option<Vec<Term>>,
    Option<Vec<Term>>,
);

/// The GROUP BY, select and ORDER BY of a read as `policy::order::result_keeps_order` sees
/// them ([`OrderShape::group_cols`], [`OrderShape::select`], [`OrderShape::order_terms`]).
fn result_terms(
    q: &sqlparser::ast::Query,
    sel: &sqlparser::ast::Select,
    refs: &[Ref],
    items: Option<&[&Expr]>,
) -> ResultTerms {
    use sqlparser::ast::{GroupByExpr, OrderByKind, SelectItem};
    let aliases: Vec<(String, &Expr)> = sel
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { expr, alias } => Some((alias.value.to_lowercase(), expr)),
            _ => None,
        })
        .collect();
    let bare_alias = |e: &Expr| -> Option<Vec<&Expr>> {
        let Expr::Identifier(id) = e else { return None };
        let name = id.value.to_lowercase();
        let found: Vec<&Expr> = aliases
            .iter()
            .filter(|(a, _)| *a == name)
            .map(|(_, e)| *e)
            .collect();
        (!found.is_empty()).then_some(found)
    };
    let term = |e: &Expr| -> Term {
        if let Some((i, c)) = column_ref(e, refs) {
            Term::Column(i, c)
        } else if aggregates_of(e, &["count"]) {
            Term::Count
        } else {
            Term::Other
        }
    };
    let select = items.as_ref().map(|i| i.iter().map(|e| term(e)).collect());
    let order_terms = match &q.order_by {
        None => Some(Vec::new()),
        Some(o) => match &o.kind {
            OrderByKind::Expressions(list) => Some(
                list.iter()
                    .map(|e| match bare_alias(&e.expr).as_deref() {
                        Some([one]) => term(one),
                        Some(_) => Term::Other,
                        None => term(&e.expr),
                    })
                    .collect(),
            ),
            OrderByKind::All(_) => None,
        },
    };
    let group_cols = match &sel.group_by {
        GroupByExpr::Expressions(g, m) if m.is_empty() => g
            .iter()
            .map(|e| {
                if bare_alias(e).is_some() {
                    return None;
                }
                column_ref(e, refs)
            })
            .collect(),
        _ => None,
    };
    (group_cols, select, order_terms)
}

/// Whether every table of a FROM item is read as it is now: no `FOR SYSTEM_TIME`, whose
/// history holds a primary key many times, nor table arguments.
fn plain_from(f: &TableWithJoins) -> bool {
    fn plain(tf: &TableFactor) -> bool {
        match tf {
            TableFactor::Table { args, version, .. } => args.is_none() && version.is_none(),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => plain_from(table_with_joins),
            _ => true,
        }
    }
    plain(&f.relation) && f.joins.iter().all(|j| plain(&j.relation))
}

/// Whether `e` reads columns only inside aggregates named in `names` (lower-case), and holds
/// at least one ([`aggregates_only`]).
fn aggregates_of(e: &Expr, names: &[&str]) -> bool {
    struct Walk<'n> {
        depth: usize,
        seen: bool,
        bare: bool,
        names: &'n [&'n str],
    }
    fn order_free(e: &Expr, names: &[&str]) -> bool {
        let Expr::Function(f) = e else {
            return false;
        };
        f.over.is_none()
            && f.filter.is_none()
            && f.within_group.is_empty()
            && f.name.0.len() == 1
            && f.name.0[0]
                .as_ident()
                .is_some_and(|i| names.contains(&i.value.to_ascii_lowercase().as_str()))
    }
    impl sqlparser::ast::Visitor for Walk<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if order_free(e, self.names) {
                self.depth += 1;
                self.seen = true;
            } else if self.depth == 0
                && matches!(
                    e,
                    Expr::Identifier(_)
                        | Expr::CompoundIdentifier(_)
                        | Expr::Subquery(_)
                        | Expr::Function(_)
                )
            {
                // A column outside an aggregate, a subquery, any other call (which may
                // itself aggregate in an order, or read a column): not known order-free.
                self.bare = true;
            }
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if order_free(e, self.names) {
                self.depth -= 1;
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut w = Walk {
        depth: 0,
        seen: false,
        bare: false,
        names,
    };
    let _ = e.visit(&mut w);
    w.seen && !w.bare
}

/// What a statement's shape says of slices, built once per digest ([`Shape::build`]) and
/// applied to each statement of that digest with its own constants ([`Shape::read_slices`],
/// [`Shape::write_rows`]): a miss or a write needs no second parse.
#[derive(Debug)]
pub struct Shape {
    /// Literals of the statement it was built from, and which `?`s of the digest are
    /// literals and which placeholders: a statement that differs in either is not of this
    /// shape (and gets no slices from it).
    nlits: usize,
    kinds: u64,
    /// Its memo key ([`Shape::key`]): what the statements of this shape share.
    key: u64,
    body: Body,
}

#[derive(Debug)]
enum Body {
    /// No slices: not a statement slices understand, or something doubtful.
    None,
    Read(ReadShape),
    Write(WriteShape),
}

/// Collects slots while a shape is built, and what the AST says each literal is, so that
/// reading literals from tokens can be checked against the parser on the building statement.
struct Builder<'a> {
    sql: &'a str,
    toks: &'a [LitTok],
    /// Literal ordinal by the (line, column) sqlparser gives its first character.
    at: HashMap<(u64, u64), usize>,
    /// False when `?` could not be numbered: no slot from a placeholder.
    params: bool,
    /// A slot whose token reading disagrees with the parser: the shape is not used.
    broken: bool,
}

impl Builder<'_> {
    fn new<'a>(sql: &'a str, toks: &'a [LitTok], params: bool) -> Builder<'a> {
        let mut at = HashMap::new();
        let (mut line, mut col, mut pos) = (1u64, 1u64, 0usize);
        for (k, t) in toks.iter().enumerate() {
            for ch in sql.get(pos..t.start).unwrap_or("").chars() {
                if ch == '\n' {
                    line += 1;
                    col = 1;
                } else {
                    col += 1;
                }
            }
            pos = t.start;
            at.insert((line, col), k);
        }
        Builder {
            sql,
            toks,
            at,
            params,
            broken: false,
        }
    }

    /// The slot of a constant expression, checked against [`literal`]'s reading of it.
    fn slot(&mut self, e: &Expr) -> Option<Slot> {
        let (v, signed) = match e {
            Expr::Value(v) => (v, false),
            Expr::UnaryOp {
                op: UnaryOperator::Minus | UnaryOperator::Plus,
                expr,
            } => match &**expr {
                Expr::Value(v) => (v, true),
                _ => return None,
            },
            Expr::Nested(inner) => return self.slot(inner),
            _ => return None,
        };
        match &v.value {
            Value::Placeholder(p) if p == "?" && !signed => {
                if !self.params {
                    return None;
                }
                placeholder_index(v).map(Slot::Param)
            }
            Value::Null if !signed => Some(Slot::Null),
            Value::Placeholder(_) | Value::Null => None,
            _ => {
                let k = *self.at.get(&(v.span.start.line, v.span.start.column))?;
                let t = self.toks[k];
                // A sign the digest keeps as a token of its own is in every statement of
                // the shape, and the parser reads it as an operator: no constant.
                if signed && t.sign.is_none() {
                    return None;
                }
                if literal(e, &|_| None) != token_lit(self.sql, &t) {
                    self.broken = true;
                    return None;
                }
                Some(Slot::Lit(k))
            }
        }
    }
}

/// A literal as its token spells it: what [`literal`] reads from the AST, without a parse.
fn token_lit(sql: &str, t: &LitTok) -> Option<Lit> {
    let body = sql.get(t.start..t.end)?;
    match (t.tok, t.sign) {
        (Tok::Number, None) => Some(Lit::Int(body.to_string())),
        (Tok::Number, Some(b'-')) if !body.starts_with('-') => Some(Lit::Int(format!("-{body}"))),
        (Tok::Str, None) => {
            let inner = body.strip_prefix('\'')?.strip_suffix('\'')?;
            // `''` is a quote; a lone quote inside would mean the token is not one string.
            let mut out = String::with_capacity(inner.len());
            let mut it = inner.chars();
            while let Some(c) = it.next() {
                if c == '\'' && it.next() != Some('\'') {
                    return None;
                }
                out.push(c);
            }
            Some(Lit::Str(out))
        }
        _ => None,
    }
}

impl Shape {
    /// The shape of `sql` (any statement; only SELECTs and single-table writes get a body).
    /// None when the text itself is doubtful ([`parse_one`]'s rules): such a text says
    /// nothing of other statements of its digest, so it is not to be remembered.
    pub fn build(sql: &str) -> Option<Shape> {
        if doubtful_text(sql) {
            return None;
        }
        let (toks, kinds) = literal_tokens(sql.as_bytes());
        let key = super::digest(sql.as_bytes()) ^ kinds.rotate_left(29);
        let none = || Shape {
            nlits: toks.len(),
            kinds,
            key,
            body: Body::None,
        };
        // Two literals in a row (`'a' 'b'` is one string to MySQL): not for slices.
        if toks.windows(2).any(|w| w[1].index == w[0].index + 1) {
            return Some(none());
        }
        let Some(stmt) = parse_one(sql) else {
            return Some(none());
        };
        let numbered = number_placeholders(&stmt);
        let mut b = Builder::new(sql, &toks, numbered);
        let body = match &stmt {
            Statement::Query(_) => read_shape(&stmt, &mut b).map(Body::Read),
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) if numbered => {
                write_shape(&stmt, &mut b).map(Body::Write)
            }
            _ => None,
        };
        let body = match body {
            Some(body) if !b.broken => body,
            _ => Body::None,
        };
        Some(Shape {
            nlits: toks.len(),
            kinds,
            key,
            body,
        })
    }

    /// Whether applying the shape can give anything (a read's slices or a write's rows).
    pub fn is_read(&self) -> bool {
        matches!(self.body, Body::Read(_))
    }

    pub fn is_write(&self) -> bool {
        matches!(self.body, Body::Write(_))
    }

    /// How a single-table write of this shape touches its table, for the parent maps
    /// (`cache::fkmap`): a plain INSERT … VALUES (with its column list and row count), an
    /// UPDATE (with the columns it assigns), or None for anything else.
    pub fn write_kind(&self) -> Option<WriteKind> {
        let Body::Write(w) = &self.body else {
            return None;
        };
        Some(match w {
            WriteShape::Insert {
                table,
                columns,
                rows,
            } => WriteKind::Insert {
                table: table.clone(),
                columns: columns.clone(),
                rows: rows.len(),
            },
            WriteShape::Update { table, set, .. } => WriteKind::Update {
                table: table.clone(),
                set: set.iter().map(|(c, _)| c.clone()).collect(),
            },
            WriteShape::Delete { table, .. } => WriteKind::Delete {
                table: table.clone(),
            },
        })
    }

    /// The memo key of `sql`'s shape: its digest, with which of the digest's `?`s are
    /// placeholders (a prepared text and a text with literals share a digest).
    pub fn key(sql: &str) -> u64 {
        let (_, kinds) = literal_tokens(sql.as_bytes());
        super::digest(sql.as_bytes()) ^ kinds.rotate_left(29)
    }

    /// This shape's memo key ([`key`](Self::key) of the statement it was built from).
    pub fn memo_key(&self) -> u64 {
        self.key
    }

    /// `sql`'s literals by ordinal, when `sql` is of this shape and not doubtful.
    fn literals(&self, sql: &str) -> Option<Vec<Option<Lit>>> {
        if doubtful_text(sql) {
            return None;
        }
        let (toks, kinds) = literal_tokens(sql.as_bytes());
        if toks.len() != self.nlits || kinds != self.kinds {
            return None;
        }
        Some(toks.iter().map(|t| token_lit(sql, t)).collect())
    }

    /// The slices `sql` (a statement of this shape's digest) depends on. `params(n)` is the
    /// n-th `?`'s value (None: unknown, no slice from it).
    pub fn read_slices(
        &self,
        sql: &str,
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
        params: &dyn Fn(usize) -> Option<Lit>,
    ) -> ReadPins {
        let Body::Read(shape) = &self.body else {
            return ReadPins::new();
        };
        let Some(lits) = self.literals(sql) else {
            return ReadPins::new();
        };
        let value = |s: &Slot| match s {
            Slot::Lit(k) => lits.get(*k).cloned().flatten(),
            Slot::Param(n) => params(*n),
            Slot::Null => Some(Lit::Null),
        };
        eval_read(shape, columns, &value)
    }

    /// What the read's text says of its row order showing in its result ([`OrderShape`]);
    /// None for no read.
    pub fn read_order(&self) -> Option<&OrderShape> {
        match &self.body {
            Body::Read(r) => Some(&*r.order),
            _ => None,
        }
    }

    /// Every name `sql` (a read of this shape's digest) spells, lower-cased and sorted: the
    /// columns it reads of each of its tables are among them. None when it may read columns
    /// it does not name (`*`, NATURAL joins, partitions, system time) or is doubtful. The
    /// names are the digest's (they are never literals), so the building statement's serve.
    pub fn read_columns(&self, sql: &str) -> Option<&[String]> {
        let Body::Read(r) = &self.body else {
            return None;
        };
        if doubtful_text(sql) {
            return None;
        }
        r.words.as_deref()
    }

    /// The columns `sql` (a single-table `UPDATE` of this shape's digest) assigns,
    /// lower-cased: the only ones it changes itself (the caller knows whether anything else
    /// changes implicitly). None when not such an UPDATE, or doubtful.
    pub fn update_columns(&self, sql: &str) -> Option<(&TableRef, Vec<String>)> {
        let Body::Write(WriteShape::Update { table, set, .. }) = &self.body else {
            return None;
        };
        // `_rowid` assigns the primary key by another name.
        if doubtful_text(sql) || set.iter().any(|(c, _)| !c.is_ascii() || c == "_rowid") {
            return None;
        }
        Some((table, set.iter().map(|(c, _)| c.clone()).collect()))
    }

    /// The derived slices of `sql` (a statement of this shape's digest): per child table
    /// the read does not pin itself, the slice of the parent value its join names
    /// ([`Derived`]). `primary_key(table)`: the table's single-column primary key.
    pub fn derived_slices(
        &self,
        sql: &str,
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
        params: &dyn Fn(usize) -> Option<Lit>,
        primary_key: &dyn Fn(&TableRef) -> Option<String>,
    ) -> Vec<Derived> {
        let Body::Read(shape) = &self.body else {
            return Vec::new();
        };
        let Some(lits) = self.literals(sql) else {
            return Vec::new();
        };
        let value = |s: &Slot| match s {
            Slot::Lit(k) => lits.get(*k).cloned().flatten(),
            Slot::Param(n) => params(*n),
            Slot::Null => Some(Lit::Null),
        };
        eval_derived(shape, columns, &value, primary_key)
    }

    /// The rows `sql` (a single-table INSERT … VALUES / UPDATE / DELETE of this shape's
    /// digest) changes, per column, or None when it is not of that shape (then every column
    /// is unknown: the caller invalidates the table). `all_columns(table)`: the table's
    /// columns in order, for an INSERT without a column list.
    pub fn write_rows(
        &self,
        sql: &str,
        columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
        all_columns: &dyn Fn(&TableRef) -> Option<Vec<String>>,
        params: &dyn Fn(usize) -> Option<Lit>,
    ) -> Option<RowWrite> {
        let Body::Write(shape) = &self.body else {
            return None;
        };
        let lits = self.literals(sql)?;
        let value = |s: &Slot| match s {
            Slot::Lit(k) => lits.get(*k).cloned().flatten(),
            Slot::Param(n) => params(*n),
            Slot::Null => Some(Lit::Null),
        };
        let mut rw = eval_write(shape, columns, all_columns, &value)?;
        if let WriteShape::Insert {
            table,
            columns,
            rows,
        } = shape
        {
            let written = |s: &Option<Slot>| match s.as_ref()? {
                Slot::Lit(k) => lits.get(*k).cloned().flatten().map(Written::Lit),
                Slot::Param(n) => Some(Written::Param(*n)),
                Slot::Null => Some(Written::Lit(Lit::Null)),
            };
            rw.inserted = Some(Arc::new(InsertValues {
                shape: self.key,
                table: table.clone(),
                columns: columns.clone(),
                rows: rows
                    .iter()
                    .map(|r| r.iter().map(written).collect())
                    .collect(),
            }));
        }
        Some(rw)
    }
}

/// A SELECT's slice structure: its top-level FROM references and the equalities of its WHERE
/// and inner joins' ON.
fn read_shape(stmt: &Statement, b: &mut Builder<'_>) -> Option<ReadShape> {
    let Statement::Query(q) = stmt else {
        return None;
    };
    if q.with.is_some() {
        return None;
    }
    let SetExpr::Select(sel) = &*q.body else {
        return None;
    };
    let mut refs: Vec<Ref> = Vec::new();
    let mut conds: Vec<&Expr> = Vec::new();
    let mut outer_on: Vec<(usize, &Expr)> = Vec::new();
    for twj in &sel.from {
        from_item(twj, &mut refs, &mut conds, &mut outer_on);
    }
    let mut outer = Vec::new();
    for (r, on) in outer_on {
        let mut conj = Vec::new();
        split_and(on, &mut conj);
        for c in conj {
            if let Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } = c
            {
                if let (Some(a), Some(b)) = (column_ref(left, &refs), column_ref(right, &refs)) {
                    outer.push((r, a, b));
                }
            }
        }
    }
    if let Some(w) = &sel.selection {
        conds.push(w);
    }
    let mut conjuncts = Vec::new();
    for c in conds {
        split_and(c, &mut conjuncts);
    }
    let mut facts = Vec::new();
    for c in conjuncts {
        conjunct_facts(c, &refs, b, &mut facts);
    }
    let mut everywhere: HashMap<TableRef, usize> = HashMap::new();
    let _ = stmt.visit(&mut RelationCounter(&mut everywhere));
    let words = read_words(b.sql, stmt);
    let mut order = order_shape(b.sql, q, sel, &refs, &everywhere);
    for f in &facts {
        if let Fact::Eq((i, a), (j, c)) = f {
            order.equalities.push((*i, a.clone(), *j, c.clone()));
            order.equalities.push((*j, c.clone(), *i, a.clone()));
        }
    }
    for (r, (i, a), (j, c)) in &outer {
        if i == r {
            order.equalities.push((*i, a.clone(), *j, c.clone()));
        } else if j == r {
            order.equalities.push((*j, c.clone(), *i, a.clone()));
        }
    }
    Some(ReadShape {
        refs,
        facts,
        everywhere,
        words,
        outer,
        order: Box::new(order),
    })
}

/// The facts one conjunct of a WHERE or an inner join's ON states: a column equal to another
/// or to a constant, in a list, or bounded (`<`, `<=`, `>`, `>=`, BETWEEN).
fn conjunct_facts(c: &Expr, refs: &[Ref], b: &mut Builder<'_>, facts: &mut Vec<Fact>) {
    match c {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (column_ref(left, refs), column_ref(right, refs)) {
            (Some(a), Some(c)) => facts.push(Fact::Eq(a, c)),
            (Some(a), None) => {
                if let Some(s) = b.slot(right) {
                    facts.push(Fact::Const(a, s));
                }
            }
            (None, Some(a)) => {
                if let Some(s) = b.slot(left) {
                    facts.push(Fact::Const(a, s));
                }
            }
            _ => {}
        },
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            ..
        } => {
            if let Some(a) = column_ref(expr, refs) {
                let slots = list.iter().map(|e| b.slot(e)).collect();
                facts.push(Fact::In(a, slots));
            }
        }
        Expr::BinaryOp { left, op, right } => {
            // `col OP constant`, or `constant OP col` read the other way round.
            let lower = match op {
                BinaryOperator::Gt | BinaryOperator::GtEq => true,
                BinaryOperator::Lt | BinaryOperator::LtEq => false,
                _ => return,
            };
            let strict = matches!(op, BinaryOperator::Lt | BinaryOperator::Gt);
            let (col, val, flipped) = match (column_ref(left, refs), column_ref(right, refs)) {
                (Some(a), None) => (a, &**right, false),
                (None, Some(a)) => (a, &**left, true),
                _ => return,
            };
            let bound = if lower != flipped {
                Bound::Lower
            } else {
                Bound::Upper { strict }
            };
            if let Some(s) = b.slot(val) {
                facts.push(Fact::Range(col, bound, s));
            }
        }
        Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } => {
            if let Some(a) = column_ref(expr, refs) {
                if let (Some(lo), Some(hi)) = (b.slot(low), b.slot(high)) {
                    facts.push(Fact::Range(a.clone(), Bound::Lower, lo));
                    facts.push(Fact::Range(a, Bound::Upper { strict: false }, hi));
                }
            }
        }
        _ => {}
    }
}

/// Every name a read spells, lower-cased, sorted: words, backquoted and double-quoted
/// identifiers (a double-quoted string too: harmless, names are only intersected with a
/// table's columns). A column is always read by a name it spells, except through `*` (a
/// select-list or `t.*` wildcard; `COUNT(*)` reads no column), NATURAL joins (they compare
/// the columns two tables share), `PARTITION` (rows of a partition: its key decides; also
/// window functions, left out with it) and `FOR SYSTEM_TIME` (history rows, which any
/// update adds): then None. Names are compared as MySQL compares column names only for
/// ASCII (it folds accents too): a non-ASCII name gives None. Every `*` token must be
/// accounted for as `COUNT(*)` or a multiplication the parser saw, or it may be a wildcard.
fn read_words(sql: &str, stmt: &Statement) -> Option<Vec<String>> {
    use super::lexer::Lexer;
    let bytes = sql.as_bytes();
    let mut lx = Lexer::new(bytes);
    let toks: Vec<_> = std::iter::from_fn(|| lx.next_token()).collect();
    let mut words = Vec::new();
    let (mut stars, mut counted) = (0usize, 0usize);
    for (i, t) in toks.iter().enumerate() {
        match t.tok {
            Tok::Word | Tok::Backquoted | Tok::DoubleQuoted => {
                let raw = t.bytes(bytes);
                let w = match t.tok {
                    Tok::Word => raw,
                    _ => raw.get(1..raw.len().checked_sub(1)?)?,
                };
                let w = std::str::from_utf8(w).ok()?;
                if !w.is_ascii() || (t.tok == Tok::Backquoted && w.contains('`')) {
                    return None;
                }
                let w = w.to_ascii_lowercase();
                if t.tok == Tok::Word
                    && matches!(w.as_str(), "natural" | "partition" | "system_time")
                {
                    return None;
                }
                // `_rowid` reads the single-column integer primary key by a name no
                // column has (also quoted).
                if w == "_rowid" {
                    return None;
                }
                words.push(w);
            }
            Tok::Punct(b'*') => {
                stars += 1;
                let count = i >= 2
                    && toks[i - 1].is_punct(b'(')
                    && toks[i - 2].is_kw(bytes, "COUNT")
                    && toks.get(i + 1).is_some_and(|n| n.is_punct(b')'));
                if count {
                    counted += 1;
                }
            }
            _ => {}
        }
    }
    struct Products(usize);
    impl sqlparser::ast::Visitor for Products {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if let Expr::BinaryOp {
                op: BinaryOperator::Multiply,
                ..
            } = e
            {
                self.0 += 1;
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut products = Products(0);
    let _ = stmt.visit(&mut products);
    if stars != counted + products.0 {
        return None;
    }
    words.sort();
    words.dedup();
    Some(words)
}

/// What the equalities of a read say: its column nodes with their types, the classes the
/// column equalities join them into, and per reference its pinned column with the fewest
/// values.
struct Classes {
    nodes: Vec<(usize, String, ColumnInfo)>,
    parent: Vec<usize>,
    per_ref: Vec<Option<(String, Vec<String>)>>,
}

impl Classes {
    fn node(&self, c: &Col) -> Option<usize> {
        self.nodes
            .iter()
            .position(|(r, col, _)| *r == c.0 && *col == c.1)
    }

    fn root(&mut self, i: usize) -> usize {
        find(&mut self.parent, i)
    }
}

fn find(p: &mut [usize], mut i: usize) -> usize {
    while p[i] != i {
        p[i] = p[p[i]];
        i = p[i];
    }
    i
}

/// Slice extraction for a cacheable SELECT from its shape and its constants.
fn eval_read(
    shape: &ReadShape,
    columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    value: &dyn Fn(&Slot) -> Option<Lit>,
) -> ReadPins {
    let mut out = ReadPins::new();
    let mut per_ref = classes(shape, columns, value).per_ref;
    ranges(shape, columns, value, &mut per_ref);
    per_table(shape, per_ref, &mut out);
    out
}

/// Range pins: per reference, each temporal column bounded above and below by constants
/// gives the calendar buckets that tile its days ([`range_keys`]); it becomes the
/// reference's pin when it has fewer keys than its equality pin. Not for derived slices:
/// parent mappings key values by equality.
fn ranges(
    shape: &ReadShape,
    columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    value: &dyn Fn(&Slot) -> Option<Lit>,
    per_ref: &mut [Option<(String, Vec<String>)>],
) {
    // Per (reference, column): the tightest lower and upper day.
    let mut bounds: Vec<(&Col, Option<i64>, Option<i64>)> = Vec::new();
    for f in &shape.facts {
        let Fact::Range(c, bound, slot) = f else {
            continue;
        };
        if !shape.refs[c.0].pinnable {
            continue;
        }
        // A bound whose value is unknown is left out: fewer bounds, more rows, still sound.
        let Some(day) = value(slot).and_then(|lit| bound_day(*bound, &lit)) else {
            continue;
        };
        let i = match bounds.iter().position(|(x, _, _)| *x == c) {
            Some(i) => i,
            None => {
                bounds.push((c, None, None));
                bounds.len() - 1
            }
        };
        let e = &mut bounds[i];
        match bound {
            Bound::Lower => e.1 = Some(e.1.map_or(day, |d| d.max(day))),
            Bound::Upper { .. } => e.2 = Some(e.2.map_or(day, |d| d.min(day))),
        }
    }
    for (c, lo, hi) in bounds {
        let (Some(lo), Some(hi)) = (lo, hi) else {
            continue;
        };
        let temporal = columns(&shape.refs[c.0].table, &c.1)
            .is_some_and(|i| matches!(i.ty, ColType::Temporal { .. }));
        if !temporal {
            continue;
        }
        let Some(keys) = range_keys(lo, hi) else {
            continue;
        };
        let pin = &mut per_ref[c.0];
        if pin.as_ref().is_none_or(|(_, v)| keys.len() < v.len()) {
            *pin = Some((c.1.clone(), keys));
        }
    }
}

fn classes(
    shape: &ReadShape,
    columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    value: &dyn Fn(&Slot) -> Option<Lit>,
) -> Classes {
    let refs = &shape.refs;
    // Column nodes: (ref index, column) with their type; classes joined by equalities.
    let mut nodes: Vec<(usize, String, ColumnInfo)> = Vec::new();
    let mut parent: Vec<usize> = Vec::new();
    let mut consts: Vec<Option<Vec<String>>> = Vec::new();
    let node_of = |c: &Col, nodes: &mut Vec<(usize, String, ColumnInfo)>| {
        if let Some(i) = nodes
            .iter()
            .position(|(nr, nc, _)| *nr == c.0 && *nc == c.1)
        {
            return Some(i);
        }
        let info = columns(&refs[c.0].table, &c.1)?;
        if !info.ty.sliceable() {
            return None;
        }
        nodes.push((c.0, c.1.clone(), info));
        Some(nodes.len() - 1)
    };
    let mut pins: Vec<(usize, Vec<String>)> = Vec::new();
    let mut edges: Vec<(usize, usize)> = Vec::new();
    for f in &shape.facts {
        match f {
            Fact::Eq(a, b) => {
                let (Some(a), Some(b)) = (node_of(a, &mut nodes), node_of(b, &mut nodes)) else {
                    continue;
                };
                edges.push((a, b));
            }
            Fact::Const(a, s) => {
                let Some(lit) = value(s) else {
                    continue;
                };
                let Some(n) = node_of(a, &mut nodes) else {
                    continue;
                };
                if let Some(v) = normalize(&nodes[n].2.ty, &lit) {
                    pins.push((n, vec![v]));
                }
            }
            Fact::In(a, list) => {
                let Some(n) = node_of(a, &mut nodes) else {
                    continue;
                };
                let vals: Option<Vec<String>> = list
                    .iter()
                    .map(|s| {
                        let lit = value(s.as_ref()?)?;
                        normalize(&nodes[n].2.ty, &lit)
                    })
                    .collect();
                if let Some(mut vals) = vals.filter(|v| !v.is_empty()) {
                    vals.sort();
                    vals.dedup();
                    pins.push((n, vals));
                }
            }
            // Ranges pin by calendar buckets, after the classes ([`ranges`]).
            Fact::Range(..) => {}
        }
    }
    parent.extend(0..nodes.len());
    consts.resize(nodes.len(), None);
    for (a, b) in edges {
        // Only columns that compare alike: both integers, or strings of one collation.
        let same = match (&nodes[a].2.ty, &nodes[b].2.ty) {
            (ColType::Int { .. }, ColType::Int { .. }) => true,
            (ColType::Str { collation: x, .. }, ColType::Str { collation: y, .. }) => x == y,
            _ => false,
        };
        if same {
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            parent[ra] = rb;
        }
    }
    for (n, vals) in pins {
        let root = find(&mut parent, n);
        // Any one of the class's constant sets bounds it; the smallest is the tightest.
        if consts[root].as_ref().is_none_or(|c| vals.len() < c.len()) {
            consts[root] = Some(vals);
        }
    }
    // Per reference: its pinned column with the fewest values.
    let mut per_ref: Vec<Option<(String, Vec<String>)>> = vec![None; refs.len()];
    for (i, (r, col, _)) in nodes.iter().enumerate() {
        if !refs[*r].pinnable {
            continue;
        }
        let root = find(&mut parent, i);
        if let Some(vals) = &consts[root] {
            if per_ref[*r]
                .as_ref()
                .is_none_or(|(_, v)| vals.len() < v.len())
            {
                per_ref[*r] = Some((col.clone(), vals.clone()));
            }
        }
    }
    Classes {
        nodes,
        parent,
        per_ref,
    }
}

/// The pins per table: a reference's pin counts only when every reference of its table is
/// pinned alike and the table is read nowhere else.
fn per_table(shape: &ReadShape, per_ref: Vec<Option<(String, Vec<String>)>>, out: &mut ReadPins) {
    let refs = &shape.refs;
    // A table read anywhere else (a subquery, a derived table, an outer side) or by two
    // references pinned differently depends on all its rows.
    // Per table: references, the pin so far, whether every reference is pinned alike.
    type Seen = (usize, Option<(String, Vec<String>)>, bool);
    let mut by_table: HashMap<TableRef, Seen> = HashMap::new();
    for (r, pin) in refs.iter().zip(per_ref) {
        let e = by_table.entry(r.table.clone()).or_insert((0, None, true));
        e.0 += 1;
        match (pin, &mut e.1) {
            (None, _) => e.2 = false,
            (Some(p), slot @ None) => *slot = Some(p),
            (Some((c, v)), Some((c0, v0))) => {
                if c == *c0 {
                    v0.extend(v);
                    v0.sort();
                    v0.dedup();
                } else {
                    e.2 = false;
                }
            }
        }
    }
    for (t, (count, pin, ok)) in by_table {
        if !ok || shape.everywhere.get(&t).copied().unwrap_or(0) != count {
            continue;
        }
        if let Some(p) = pin {
            out.insert(t, p);
        }
    }
}

/// A derived slice: the read depends only on the rows of `child` whose `fk` names a row of
/// `parent` (by its single-column primary key `pk`) holding one of `values` in `col`. The
/// read's result holds a child row only joined to such a parent row, by an equality the
/// statement proves (the WHERE's or an inner join's top-level AND, or the child's own LEFT
/// JOIN ON), and it stamps the parent's own slices (or the parent whole), so a write that
/// moves a parent row between values invalidates it by itself (`cache::fkmap`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub child: TableRef,
    pub fk: String,
    pub parent: TableRef,
    pub pk: String,
    pub col: String,
    pub values: Vec<String>,
}

fn eval_derived(
    shape: &ReadShape,
    columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    value: &dyn Fn(&Slot) -> Option<Lit>,
    primary_key: &dyn Fn(&TableRef) -> Option<String>,
) -> Vec<Derived> {
    let refs = &shape.refs;
    let mut cl = classes(shape, columns, value);
    let is_int =
        |t: &TableRef, c: &str| columns(t, c).is_some_and(|i| matches!(i.ty, ColType::Int { .. }));
    let mut out: Vec<Derived> = Vec::new();
    for (ci, child) in refs.iter().enumerate() {
        // The child is read once, by this reference, and nowhere else.
        let once = refs.iter().filter(|r| r.table == child.table).count() == 1
            && shape.everywhere.get(&child.table).copied() == Some(1);
        if !once || !(child.pinnable || child.left_outer) {
            continue;
        }
        let mut best: Option<Derived> = None;
        for (pi, parent) in refs.iter().enumerate() {
            if pi == ci || !parent.pinnable || parent.table == child.table {
                continue;
            }
            let Some((col, vals)) = cl.per_ref[pi].clone() else {
                continue;
            };
            let Some(pk) = primary_key(&parent.table) else {
                continue;
            };
            if col == pk || !is_int(&parent.table, &pk) {
                continue;
            }
            let pk_col: Col = (pi, pk.clone());
            let pk_root = cl.node(&pk_col).map(|n| cl.root(n));
            // The child's columns equal to the parent's pk in every row the result holds.
            let mut fks: Vec<String> = Vec::new();
            if child.pinnable {
                if let Some(root) = pk_root {
                    for n in 0..cl.nodes.len() {
                        if cl.nodes[n].0 == ci && cl.root(n) == root {
                            fks.push(cl.nodes[n].1.clone());
                        }
                    }
                }
            } else {
                for (r, a, b) in &shape.outer {
                    if *r != ci {
                        continue;
                    }
                    for (mine, other) in [(a, b), (b, a)] {
                        if mine.0 != ci {
                            continue;
                        }
                        let same = *other == pk_col
                            || (pk_root.is_some() && cl.node(other).map(|n| cl.root(n)) == pk_root);
                        if same {
                            fks.push(mine.1.clone());
                        }
                    }
                }
            }
            fks.retain(|fk| is_int(&child.table, fk));
            fks.sort();
            let Some(fk) = fks.into_iter().next() else {
                continue;
            };
            if best.as_ref().is_none_or(|b| vals.len() < b.values.len()) {
                best = Some(Derived {
                    child: child.table.clone(),
                    fk,
                    parent: parent.table.clone(),
                    pk,
                    col,
                    values: vals,
                });
            }
        }
        out.extend(best);
    }
    out
}

struct RelationCounter<'a>(&'a mut HashMap<TableRef, usize>);

impl sqlparser::ast::Visitor for RelationCounter<'_> {
    type Break = ();
    fn pre_visit_relation(&mut self, relation: &ObjectName) -> std::ops::ControlFlow<()> {
        match table_ref(relation) {
            Some(t) => *self.0.entry(t).or_default() += 1,
            // A name that is not plain: count it under a name nothing matches.
            None => *self.0.entry(TableRef::new(None, "")).or_default() += 1,
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// A table reference of the top-level FROM.
#[derive(Debug)]
struct Ref {
    table: TableRef,
    /// What the statement calls it: its alias, else its name.
    alias: String,
    /// False on the nullable side of an outer join and inside nested joins.
    pinnable: bool,
    /// The plain table a LEFT JOIN null-extends, directly (not inside a nested join): its
    /// ON's equalities hold for its rows in the result.
    left_outer: bool,
}

fn from_item<'a>(
    twj: &'a TableWithJoins,
    refs: &mut Vec<Ref>,
    conds: &mut Vec<&'a Expr>,
    outer_on: &mut Vec<(usize, &'a Expr)>,
) {
    let start = refs.len();
    factor(&twj.relation, refs, true);
    for j in &twj.joins {
        match &j.join_operator {
            JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => {
                factor(&j.relation, refs, true);
                if let JoinConstraint::On(e) = c {
                    conds.push(e);
                }
            }
            JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => {
                // The right side is null-extended: all its rows matter. Its ON is no filter.
                let at = refs.len();
                factor(&j.relation, refs, false);
                let plain = matches!(
                    j.relation,
                    TableFactor::Table {
                        args: None,
                        version: None,
                        ..
                    }
                );
                if refs.len() == at + 1 && plain {
                    if let JoinConstraint::On(e) = c {
                        refs[at].left_outer = true;
                        outer_on.push((at, e));
                    }
                }
            }
            JoinOperator::Right(_) | JoinOperator::RightOuter(_) => {
                for r in &mut refs[start..] {
                    r.pinnable = false;
                }
                factor(&j.relation, refs, true);
            }
            _ => {
                for r in &mut refs[start..] {
                    r.pinnable = false;
                }
                factor(&j.relation, refs, false);
            }
        }
    }
}

fn factor(tf: &TableFactor, refs: &mut Vec<Ref>, pinnable: bool) {
    match tf {
        TableFactor::Table {
            name,
            alias,
            args,
            version,
            ..
        } => {
            let Some(t) = table_ref(name) else { return };
            let plain = args.is_none() && version.is_none();
            let alias = match alias {
                Some(a) => a.name.value.to_lowercase(),
                None => t.name.clone(),
            };
            refs.push(Ref {
                table: t,
                alias,
                pinnable: pinnable && plain,
                left_outer: false,
            });
        }
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => {
            let (mut ignored, mut ignored_on) = (Vec::new(), Vec::new());
            let start = refs.len();
            from_item(table_with_joins, refs, &mut ignored, &mut ignored_on);
            for r in &mut refs[start..] {
                r.pinnable = false;
            }
        }
        // Derived tables, table functions: their tables are counted elsewhere and stay whole.
        _ => {}
    }
}

/// The conjuncts of `e`: its `AND`s split, parentheses looked through.
pub(crate) fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            split_and(left, out);
            split_and(right, out);
        }
        Expr::Nested(inner) => split_and(inner, out),
        e => out.push(e),
    }
}

/// The (reference, column) a column expression names, if it names exactly one.
fn column_ref(e: &Expr, refs: &[Ref]) -> Option<(usize, String)> {
    let (qual, col): (Option<(Option<&Ident>, &Ident)>, &Ident) = match e {
        Expr::Identifier(c) => (None, c),
        Expr::CompoundIdentifier(p) => match p.as_slice() {
            [t, c] => (Some((None, t)), c),
            [s, t, c] => (Some((Some(s), t)), c),
            _ => return None,
        },
        Expr::Nested(inner) => return column_ref(inner, refs),
        _ => return None,
    };
    let col = col.value.to_lowercase();
    let found: Vec<usize> = match qual {
        None => {
            // Unqualified: only when the FROM has one reference (no name resolution here).
            if refs.len() == 1 {
                vec![0]
            } else {
                return None;
            }
        }
        Some((schema, t)) => {
            let t = t.value.to_lowercase();
            refs.iter()
                .enumerate()
                .filter(|(_, r)| match schema {
                    None => r.alias == t,
                    Some(s) => {
                        r.alias == r.table.name
                            && r.table.name == t
                            && r.table.schema.as_deref() == Some(&s.value.to_lowercase())
                    }
                })
                .map(|(i, _)| i)
                .collect()
        }
    };
    match found.as_slice() {
        [i] => Some((*i, col)),
        _ => None,
    }
}

/// A constant expression qcache can read: integers (possibly negated), plain single-quoted
/// strings, NULL, `?`.
fn literal(e: &Expr, params: &dyn Fn(usize) -> Option<Lit>) -> Option<Lit> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(s, false) => Some(Lit::Int(s.clone())),
            Value::SingleQuotedString(s) => Some(Lit::Str(s.clone())),
            Value::Null => Some(Lit::Null),
            Value::Placeholder(p) if p == "?" => {
                let n = placeholder_index(v);
                params(n?)
            }
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match &**expr {
            Expr::Value(v) => match &v.value {
                Value::Number(s, false) if !s.starts_with('-') => Some(Lit::Int(format!("-{s}"))),
                _ => None,
            },
            _ => None,
        },
        Expr::Nested(inner) => literal(inner, params),
        _ => None,
    }
}

thread_local! {
    /// Positions of the `?` placeholders of the statement being analysed, in text order.
    static PLACEHOLDERS: std::cell::RefCell<Vec<(u64, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A `?`'s index: its rank among the statement's placeholders by source position.
fn placeholder_index(v: &sqlparser::ast::ValueWithSpan) -> Option<usize> {
    let at = (v.span.start.line, v.span.start.column);
    PLACEHOLDERS.with(|p| p.borrow().iter().position(|x| *x == at))
}

/// Records every `?` of `stmt` by position, so that [`literal`] can number them.
fn number_placeholders(stmt: &Statement) -> bool {
    struct Collect(Vec<(u64, u64)>);
    impl sqlparser::ast::Visitor for Collect {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if let Expr::Value(v) = e {
                if matches!(&v.value, Value::Placeholder(p) if p == "?") {
                    self.0.push((v.span.start.line, v.span.start.column));
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut c = Collect(Vec::new());
    let _ = stmt.visit(&mut c);
    c.0.sort();
    let distinct = c.0.windows(2).all(|w| w[0] != w[1]);
    // A span sqlparser did not fill in (0:0) cannot be told apart.
    let known = c.0.iter().all(|(l, _)| *l > 0);
    PLACEHOLDERS.with(|p| *p.borrow_mut() = c.0);
    distinct && known
}

/// What a write's statement says of the rows it changes in its one target table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowWrite {
    pub table: TableRef,
    /// Columns whose every changed row's values (before and after) are named: the keys
    /// ([`normalize`]) of those values; rows holding NULL there add no key. A column not
    /// listed is unknown.
    pub known: Vec<(String, Vec<String>)>,
    /// An INSERT … VALUES: its values as this reading found them, for whoever else needs
    /// an insert's rows (`policy::patch`), which then reads them no second time.
    pub inserted: Option<Arc<InsertValues>>,
}

/// The values of an INSERT … VALUES of a [`Shape`], read from the statement's own tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertValues {
    /// The shape's memo key ([`Shape::memo_key`]): every statement of one key has the
    /// same structure, apart from its literals' values.
    pub shape: u64,
    pub table: TableRef,
    /// The column list; None for every column in order.
    pub columns: Option<Vec<String>>,
    /// Per row, per value: a constant as its token spells it ([`Written`]), None for
    /// anything else (an expression, a `+` sign, a literal the tokens do not read).
    pub rows: Vec<Vec<Option<Written>>>,
}

/// A value an INSERT writes, as its statement spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// A literal: `Lit::Int` for any number as written (its `-` sign included),
    /// `Lit::Str`, `Lit::Null`.
    Lit(Lit),
    /// The n-th `?` of a prepared statement.
    Param(usize),
}

/// What [`Shape::write_kind`] says of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteKind {
    Insert {
        table: TableRef,
        /// The column list; None for every column in order.
        columns: Option<Vec<String>>,
        rows: usize,
    },
    Update {
        table: TableRef,
        set: Vec<String>,
    },
    Delete {
        table: TableRef,
    },
}

/// A single-table write's slice structure without its constants.
#[derive(Debug)]
enum WriteShape {
    Insert {
        table: TableRef,
        /// The column list; None for all the table's columns in order.
        columns: Option<Vec<String>>,
        /// Per row, per value: its slot, None when it is not a constant.
        rows: Vec<Vec<Option<Slot>>>,
    },
    Update {
        table: TableRef,
        pins: Vec<(String, Vec<Slot>)>,
        /// Assigned columns (each once) and their values' slots.
        set: Vec<(String, Option<Slot>)>,
    },
    Delete {
        table: TableRef,
        pins: Vec<(String, Vec<Slot>)>,
    },
}

fn write_shape(stmt: &Statement, b: &mut Builder<'_>) -> Option<WriteShape> {
    match stmt {
        Statement::Insert(ins) => {
            if ins.replace_into
                || ins.on.is_some()
                || !ins.assignments.is_empty()
                || ins.returning.is_some()
            {
                return None;
            }
            let TableObject::TableName(name) = &ins.table else {
                return None;
            };
            let table = table_ref(name)?;
            let src = ins.source.as_ref()?;
            if src.with.is_some() {
                return None;
            }
            let SetExpr::Values(values) = &*src.body else {
                return None;
            };
            let columns: Option<Vec<String>> = if ins.columns.is_empty() {
                None
            } else {
                Some(
                    ins.columns
                        .iter()
                        .map(|c| {
                            c.0.last()
                                .and_then(|p| p.as_ident())
                                .map(|i| i.value.to_lowercase())
                        })
                        .collect::<Option<_>>()?,
                )
            };
            let rows = values
                .rows
                .iter()
                .map(|row| row.content.iter().map(|e| b.slot(e)).collect())
                .collect();
            Some(WriteShape::Insert {
                table,
                columns,
                rows,
            })
        }
        Statement::Update(u) => {
            if !u.table.joins.is_empty() || u.from.is_some() || u.returning.is_some() {
                return None;
            }
            let TableFactor::Table { name, .. } = &u.table.relation else {
                return None;
            };
            let table = table_ref(name)?;
            let pins = where_shape(u.selection.as_ref()?, &table, b);
            let mut set: Vec<(String, Option<Slot>)> = Vec::new();
            for a in &u.assignments {
                let sqlparser::ast::AssignmentTarget::ColumnName(n) = &a.target else {
                    return None;
                };
                let col = n.0.last()?.as_ident()?.value.to_lowercase();
                // Assigned twice: the second wins; keep it simple and call it unknown.
                if set.iter().any(|(c, _)| *c == col) {
                    return None;
                }
                set.push((col, b.slot(&a.value)));
            }
            Some(WriteShape::Update { table, pins, set })
        }
        Statement::Delete(d) => {
            if !d.tables.is_empty() || d.using.is_some() || d.returning.is_some() {
                return None;
            }
            let (sqlparser::ast::FromTable::WithFromKeyword(from)
            | sqlparser::ast::FromTable::WithoutKeyword(from)) = &d.from;
            let [twj] = from.as_slice() else {
                return None;
            };
            if !twj.joins.is_empty() {
                return None;
            }
            let TableFactor::Table { name, .. } = &twj.relation else {
                return None;
            };
            let table = table_ref(name)?;
            let pins = where_shape(d.selection.as_ref()?, &table, b);
            Some(WriteShape::Delete { table, pins })
        }
        _ => None,
    }
}

/// The columns a write's WHERE may pin (top-level AND, `=` / `IN` with constants, columns
/// of its single table), with their constants' slots.
fn where_shape(w: &Expr, table: &TableRef, b: &mut Builder<'_>) -> Vec<(String, Vec<Slot>)> {
    let refs = [Ref {
        table: table.clone(),
        alias: table.name.clone(),
        pinnable: true,
        left_outer: false,
    }];
    let mut conj = Vec::new();
    split_and(w, &mut conj);
    let mut out = Vec::new();
    for c in conj {
        let pin = match c {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => match (column_ref(left, &refs), column_ref(right, &refs)) {
                (Some((_, c)), None) => b.slot(right).map(|s| (c, vec![s])),
                (None, Some((_, c))) => b.slot(left).map(|s| (c, vec![s])),
                _ => None,
            },
            Expr::In {
                expr,
                target: InTarget::List(list),
                negated: false,
                ..
            } => column_ref(expr, &refs).and_then(|(_, c)| {
                let slots: Option<Vec<Slot>> = list.iter().map(|e| b.slot(e)).collect();
                slots.map(|s| (c, s))
            }),
            _ => None,
        };
        out.extend(pin);
    }
    out
}

/// The keys a write's WHERE pins, per column (the first usable conjunct per column).
fn eval_where(
    pins: &[(String, Vec<Slot>)],
    table: &TableRef,
    columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    value: &dyn Fn(&Slot) -> Option<Lit>,
) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (col, slots) in pins {
        let Some(lits) = slots.iter().map(value).collect::<Option<Vec<Lit>>>() else {
            continue;
        };
        let Some(info) = columns(table, col) else {
            continue;
        };
        let keys: Option<Vec<String>> = lits.iter().map(|l| normalize(&info.ty, l)).collect();
        if let Some(keys) = keys.filter(|k| !k.is_empty()) {
            if !out.iter().any(|(c, _)| c == col) {
                out.push((col.clone(), keys));
            }
        }
    }
    out
}

fn eval_write(
    shape: &WriteShape,
    columns: &dyn Fn(&TableRef, &str) -> Option<ColumnInfo>,
    all_columns: &dyn Fn(&TableRef) -> Option<Vec<String>>,
    value: &dyn Fn(&Slot) -> Option<Lit>,
) -> Option<RowWrite> {
    match shape {
        WriteShape::Insert {
            table,
            columns: list,
            rows,
        } => {
            let cols: Vec<String> = match list {
                Some(l) => l.clone(),
                None => all_columns(table)?,
            };
            let mut known: Vec<(String, Option<Vec<String>>)> =
                cols.iter().map(|c| (c.clone(), Some(Vec::new()))).collect();
            for row in rows {
                if row.len() != cols.len() {
                    return None;
                }
                for (slot, s) in known.iter_mut().zip(row) {
                    let Some(vals) = &mut slot.1 else { continue };
                    let key = columns(table, &slot.0).and_then(|info| {
                        let lit = value(s.as_ref()?)?;
                        write_key(&info, &lit)
                    });
                    match key {
                        Some(k) => vals.extend(k),
                        None => slot.1 = None,
                    }
                }
            }
            Some(RowWrite {
                table: table.clone(),
                known: finish(known),
                inserted: None,
            })
        }
        WriteShape::Update { table, pins, set } => {
            let pins = eval_where(pins, table, columns, value);
            let mut known = Vec::new();
            for (col, before) in pins {
                match set.iter().find(|(c, _)| *c == col) {
                    None => known.push((col, before)),
                    Some((_, s)) => {
                        let after = columns(table, &col).and_then(|info| {
                            let lit = value(s.as_ref()?)?;
                            write_key(&info, &lit)
                        });
                        if let Some(after) = after {
                            let mut v = before;
                            v.extend(after);
                            known.push((col, v));
                        }
                    }
                }
            }
            Some(RowWrite {
                table: table.clone(),
                known: finish(known.into_iter().map(|(c, v)| (c, Some(v))).collect()),
                inserted: None,
            })
        }
        WriteShape::Delete { table, pins } => {
            let pins = eval_where(pins, table, columns, value);
            Some(RowWrite {
                table: table.clone(),
                known: finish(pins.into_iter().map(|(c, v)| (c, Some(v))).collect()),
                inserted: None,
            })
        }
    }
}

fn finish(known: Vec<(String, Option<Vec<String>>)>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = known
        .into_iter()
        .filter_map(|(c, v)| {
            v.map(|mut v| {
                v.sort();
                v.dedup();
                (c, v)
            })
        })
        .collect();
    out.sort();
    out
}

/// The keys a written value gets: one per value (a temporal value's calendar buckets:
/// [`temporal_keys`]), none for a NULL stored as NULL (in no slice), None when what the server stores is not certain (NULL or 0 into an
/// AUTO_INCREMENT column, however 0 is spelled — `0`, `-0`, `'0'` —, NULL into a NOT NULL
/// one, anything [`normalize`] refuses).
fn write_key(info: &ColumnInfo, lit: &Lit) -> Option<Vec<String>> {
    match lit {
        Lit::Null => (info.nullable && !info.auto_increment).then(Vec::new),
        l => {
            if let ColType::Temporal { date_only, fsp } = info.ty {
                return temporal_write_keys(date_only, fsp, l);
            }
            let key = normalize(&info.ty, l)?;
            // The key, not the spelling: every value the column stores as 0 makes the
            // server generate the next id instead.
            (!(info.auto_increment && key == "i0")).then(|| vec![key])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> ColumnInfo {
        ColumnInfo {
            ty: ColType::from_catalog("int", "int(11)", "", None),
            nullable: false,
            auto_increment: false,
        }
    }

    fn text(collation: &str) -> ColumnInfo {
        ColumnInfo {
            ty: ColType::from_catalog("varchar", "varchar(20)", collation, Some(20)),
            nullable: true,
            auto_increment: false,
        }
    }

    /// A column of a type without collation, as the catalog reports it.
    fn typed(data_type: &str, column_type: &str, nullable: bool) -> ColumnInfo {
        ColumnInfo {
            ty: ColType::from_catalog(data_type, column_type, "", None),
            nullable,
            auto_increment: false,
        }
    }

    /// orders(id auto_increment, customer_id, status ci, code bin, note null text);
    /// customers(id, email ci); products(id, name); nothing else.
    fn cols(t: &TableRef, c: &str) -> Option<ColumnInfo> {
        match (t.name.as_str(), c) {
            ("orders", "id") => Some(ColumnInfo {
                auto_increment: true,
                ..int()
            }),
            ("orders", "customer_id") | ("orders", "product_id") => Some(int()),
            ("orders", "status") => Some(text("utf8mb4_general_ci")),
            ("orders", "code") => Some(text("utf8mb4_bin")),
            ("orders", "danish") => Some(text("utf8mb4_danish_ci")),
            ("orders", "total") => Some(typed("decimal", "decimal(10,2)", false)),
            ("orders", "created_at") => Some(typed("datetime", "datetime", true)),
            ("orders", "at3") => Some(typed("datetime", "datetime(3)", false)),
            ("orders", "day") => Some(typed("date", "date", false)),
            ("customers", "id") | ("products", "id") | ("products", "category_id") => Some(int()),
            ("customers", "email") => Some(text("utf8mb4_general_ci")),
            ("customers", "code") => Some(text("utf8mb4_bin")),
            _ => None,
        }
    }

    fn all(t: &TableRef) -> Option<Vec<String>> {
        (t.name == "orders").then(|| {
            ["id", "customer_id", "product_id", "status", "code", "total"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
    }

    fn read(sql: &str) -> Vec<(String, String, Vec<String>)> {
        read_p(sql, &[])
    }

    fn read_p(sql: &str, params: &[Lit]) -> Vec<(String, String, Vec<String>)> {
        let shape = Shape::build(sql).expect("not doubtful");
        let p = |i: usize| params.get(i).cloned();
        let mut v: Vec<_> = shape
            .read_slices(sql, &cols, &p)
            .into_iter()
            .map(|(t, (c, vals))| (t.name, c, vals))
            .collect();
        v.sort();
        v
    }

    fn pin_owned(t: &str, c: &str, vals: Vec<String>) -> (String, String, Vec<String>) {
        (t.to_string(), c.to_string(), vals)
    }

    fn pin(t: &str, c: &str, vals: &[&str]) -> (String, String, Vec<String>) {
        (
            t.to_string(),
            c.to_string(),
            vals.iter().map(|s| s.to_string()).collect(),
        )
    }

    fn day(s: &str) -> i64 {
        parse_temporal(s).unwrap().0
    }

    fn days(from: &str, n: i64) -> Vec<String> {
        let d = day(from);
        let mut v: Vec<String> = (d..d + n).map(|d| format!("d{d}")).collect();
        v.sort();
        v
    }

    #[test]
    fn calendar_arithmetic() {
        assert_eq!(day("1970-01-01"), 0);
        assert_eq!(day("2000-03-01"), 11_017);
        assert_eq!(day("1000-01-01"), -354_285);
        for d in [-354_285i64, -1, 0, 59, 60, 11_016, 20_000, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(civil_from_days(day("2024-02-29")), (2024, 2, 29));
        for bad in [
            "2026-02-29",
            "2026-13-01",
            "2026-00-10",
            "0000-00-00",
            "999-01-01",
            "2026-1-05",
            "20261105",
            "2026-11-05T10:00:00",
            "2026-11-05 24:00:00",
            "2026-11-05 10:00",
            "2026-11-05 10:00:00.",
            "2026-11-05 10:00:00.1234567",
            " 2026-11-05",
            "2026-11-05 ",
        ] {
            assert!(parse_temporal(bad).is_none(), "{bad}");
        }
        assert_eq!(parse_temporal("2026-11-05 10:00:01.25").unwrap().1, 36_001);
    }

    /// Which pins name one value of their column, one row per rule.
    #[test]
    fn one_value_pins() {
        let cases: &[(&[&str], bool, &str)] = &[
            (&["i5"], true, "an integer equality"),
            (&["sab"], true, "a string equality"),
            (&["i5", "i6"], false, "an IN list of two values"),
            (&["y2024"], false, "a year bucket: every date of the year"),
            (&["m2024-2"], false, "a month bucket"),
            (
                &["d19800"],
                false,
                "a day bucket: every time of the day in a DATETIME",
            ),
            (&[], false, "nothing"),
        ];
        for (keys, want, why) in cases {
            let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            assert_eq!(pins_one_value(&keys), *want, "{why}");
        }
    }

    #[test]
    fn ranges_tile_with_the_coarsest_buckets() {
        let r = |a: &str, b: &str| range_keys(day(a), day(b)).unwrap();
        assert_eq!(r("2026-11-01", "2026-11-07").len(), 7);
        assert_eq!(r("2026-11-01", "2026-11-30"), vec!["m2026-11"]);
        assert_eq!(r("2026-01-01", "2026-12-31"), vec!["y2026"]);
        assert_eq!(
            r("2025-12-30", "2026-02-02"),
            vec![
                format!("d{}", day("2025-12-30")),
                format!("d{}", day("2025-12-31")),
                "m2026-1".to_string(),
                format!("d{}", day("2026-02-01")),
                format!("d{}", day("2026-02-02")),
            ]
        );
        assert_eq!(r("2000-01-01", "2029-12-31").len(), 30);
        assert!(range_keys(day("2020-01-15"), day("2026-11-20")).is_none());
        assert!(range_keys(5, 4).is_none());
        // The one property: a stored day is in a range exactly when one of its buckets is
        // among the range's.
        let mut st = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st % n) as i64
        };
        let base = day("2023-06-15");
        for _ in 0..20_000 {
            let lo = base + next(900);
            let hi = lo + next(500);
            let v = base - 30 + next(1500);
            let Some(keys) = range_keys(lo, hi) else {
                continue;
            };
            let hit = temporal_keys(v).iter().any(|k| keys.contains(k));
            assert_eq!(hit, (lo..=hi).contains(&v), "{lo} {hi} {v}");
        }
    }

    #[test]
    fn temporal_ranges_pin_buckets() {
        let q = |w: &str| read(&format!("SELECT status, total FROM orders WHERE {w}"));
        let week = vec![pin_owned("orders", "created_at", days("2026-11-01", 7))];
        let eight = vec![pin_owned("orders", "created_at", days("2026-11-01", 8))];
        assert_eq!(
            q("created_at >= '2026-11-01' AND created_at < '2026-11-08'"),
            week
        );
        assert_eq!(
            q("created_at >= '2026-11-01 00:00:00' AND created_at < '2026-11-08 00:00:00.000'"),
            week
        );
        // Only `< midnight` excludes the day; a fraction may round up into the next.
        assert_eq!(
            q("created_at >= '2026-11-01' AND created_at <= '2026-11-08'"),
            eight
        );
        assert_eq!(
            q("created_at > '2026-11-01' AND created_at < '2026-11-08 00:00:01'"),
            eight
        );
        assert_eq!(
            q("created_at >= '2026-11-01' AND created_at <= '2026-11-07 23:59:59.5'"),
            eight
        );
        assert_eq!(
            q("created_at BETWEEN '2026-11-01' AND '2026-11-07 23:59:59'"),
            week
        );
        assert_eq!(
            q("'2026-11-08' > created_at AND '2026-11-01' <= created_at AND total > 3"),
            week
        );
        // The tightest bounds of several.
        assert_eq!(
            q("created_at >= '2026-10-01' AND created_at >= '2026-11-01' \
               AND created_at < '2026-11-08' AND created_at < '2026-12-01'"),
            week
        );
        assert_eq!(
            q("created_at >= '2026-11-01' AND created_at < '2026-12-01'"),
            vec![pin("orders", "created_at", &["m2026-11"])]
        );
        // A DATE column and a DATETIME(3) one bucket alike.
        assert_eq!(
            q("day >= '2026-11-01' AND day < '2026-11-08'"),
            vec![pin_owned("orders", "day", days("2026-11-01", 7))]
        );
        assert_eq!(
            q("at3 BETWEEN '2026-11-01 00:00:00.000' AND '2026-11-07 12:00:00'"),
            vec![pin_owned("orders", "at3", days("2026-11-01", 7))]
        );
        // An equality pin with fewer values wins.
        assert_eq!(
            q("customer_id = 4 AND created_at >= '2026-11-01' AND created_at < '2026-11-08'"),
            vec![pin("orders", "customer_id", &["i4"])]
        );
        // Prepared: strings and temporal parameters; an unknown one leaves its bound out.
        let sql = "SELECT status FROM orders WHERE created_at >= ? AND created_at < ?";
        assert_eq!(
            read_p(
                sql,
                &[
                    Lit::Str("2026-11-01".into()),
                    Lit::Time("2026-11-08 00:00:00.000000".into())
                ]
            ),
            week
        );
        assert_eq!(
            read_p(sql, &[Lit::Str("2026-11-01".into()), Lit::Int("5".into())]),
            vec![]
        );
        for w in [
            // One side only, or too wide.
            "created_at >= '2026-11-01'",
            "created_at < '2026-11-01'",
            "created_at >= '2000-01-15' AND created_at < '2026-11-20'",
            // Empty, or not a bound of the column.
            "created_at >= '2026-11-08' AND created_at < '2026-11-01'",
            "created_at = '2026-11-01 10:00:00'",
            "created_at IN ('2026-11-01')",
            "created_at NOT BETWEEN '2026-11-01' AND '2026-11-07'",
            "NOT created_at >= '2026-11-01' AND created_at < '2026-11-08'",
            "(created_at >= '2026-11-01' OR customer_id = 1) AND created_at < '2026-11-08'",
            "created_at >= '2026-11-01' XOR 1 AND created_at < '2026-11-08'",
            "created_at >= '2026-11-01' = 1 AND created_at < '2026-11-08'",
            "created_at >= '2026-11-01' IS TRUE AND created_at < '2026-11-08'",
            "DATE(created_at) >= '2026-11-01' AND created_at < '2026-11-08'",
            "created_at >= created_at AND created_at < '2026-11-08'",
            // Spellings the server reads but qcache does not, and non-strings.
            "created_at >= '2026-11-1' AND created_at < '2026-11-08'",
            "created_at >= 20261101 AND created_at < '2026-11-08'",
            "created_at >= DATE '2026-11-01' AND created_at < '2026-11-08'",
            "created_at >= _latin1'2026-11-01' AND created_at < '2026-11-08'",
            "created_at >= '2026-11-01' COLLATE utf8mb4_bin AND created_at < '2026-11-08'",
            "created_at >= '2026-11-01' + INTERVAL 0 DAY AND created_at < '2026-11-08'",
            "created_at >= NULL AND created_at < '2026-11-08'",
            // Ranges on a column that is not DATE / DATETIME.
            "customer_id >= 1 AND customer_id < 3",
            "status >= '2026-11-01' AND status < '2026-11-08'",
        ] {
            assert_eq!(q(w), vec![], "{w}");
        }
        // The outer side of a LEFT JOIN is not filtered by its WHERE bounds' ON.
        assert_eq!(
            read(
                "SELECT c.id, o.total FROM customers c LEFT JOIN orders o \
                 ON o.customer_id = c.id AND o.created_at >= '2026-11-01' \
                 AND o.created_at < '2026-11-08'"
            ),
            vec![]
        );
    }

    #[test]
    fn temporal_writes_name_their_buckets() {
        let keys = |s: &str| {
            let mut k = temporal_keys(day(s));
            k.sort();
            k
        };
        assert_eq!(
            write(
                "INSERT INTO orders (customer_id, created_at, day) \
                 VALUES (1, '2026-11-05 10:00:00', '2026-11-05'), (2, NULL, '2026-12-01')",
                &[]
            ),
            known(&[("customer_id", &["i1", "i2"])]).map(|mut k| {
                let mut c = keys("2026-11-05");
                c.sort();
                k.push(("created_at".into(), c));
                let mut d = keys("2026-11-05");
                d.extend(keys("2026-12-01"));
                d.sort();
                d.dedup();
                k.push(("day".into(), d));
                k.sort();
                k
            })
        );
        // What the server rounds, truncates or refuses is unknown; parameters alike.
        let created = |sql: &str, p: &[Lit]| {
            write(sql, p)
                .unwrap()
                .into_iter()
                .find(|(c, _)| c == "created_at" || c == "day" || c == "at3")
                .map(|(_, k)| k)
        };
        for v in [
            "'2026-11-05 23:59:59.5'",
            "'2026-11-5 10:00:00'",
            "20261105",
            "NOW()",
            "DEFAULT",
        ] {
            assert_eq!(
                created(
                    &format!("INSERT INTO orders (created_at) VALUES ({v})"),
                    &[]
                ),
                None,
                "{v}"
            );
        }
        assert_eq!(
            created(
                "INSERT INTO orders (day) VALUES ('2026-11-05 10:00:00')",
                &[]
            ),
            None
        );
        assert_eq!(
            created(
                "INSERT INTO orders (at3) VALUES ('2026-11-05 10:00:00.1235')",
                &[]
            ),
            None
        );
        assert_eq!(
            created(
                "INSERT INTO orders (at3) VALUES ('2026-11-05 23:59:59.1230')",
                &[]
            ),
            Some(keys("2026-11-05"))
        );
        assert_eq!(
            created(
                "INSERT INTO orders (day) VALUES (?)",
                &[Lit::Time("2026-11-05 00:00:00.000000".into())]
            ),
            Some(keys("2026-11-05"))
        );
        // An UPDATE that sets the column without pinning it: its old value is unknown.
        assert_eq!(
            created(
                "UPDATE orders SET created_at = '2026-11-05' WHERE id = 3",
                &[]
            ),
            None
        );
        assert_eq!(
            created(
                "DELETE FROM orders WHERE created_at = '2026-11-05 10:00:00'",
                &[]
            ),
            None
        );
    }

    #[test]
    fn equality_and_in() {
        assert_eq!(
            read("SELECT * FROM orders WHERE customer_id = 5"),
            vec![pin("orders", "customer_id", &["i5"])]
        );
        assert_eq!(
            read("SELECT * FROM orders WHERE 5 = customer_id AND total > 3"),
            vec![pin("orders", "customer_id", &["i5"])]
        );
        assert_eq!(
            read("SELECT * FROM orders WHERE customer_id IN (3, 1, 3) ORDER BY id LIMIT 5"),
            vec![pin("orders", "customer_id", &["i1", "i3"])]
        );
        // The column with fewer values wins; both would be sound.
        assert_eq!(
            read("SELECT * FROM orders o WHERE o.customer_id IN (1,2) AND (o.id = 9)"),
            vec![pin("orders", "id", &["i9"])]
        );
    }

    /// Literal spellings whose value the server reads differently from a naive token: a
    /// pin, if any, must carry the server's value.
    #[test]
    fn literal_spellings_pin_the_servers_value() {
        for (sql, ok) in [
            // Adjacent strings are one string to the server.
            (
                "SELECT * FROM orders WHERE status = 'ne' 'w'",
                &["snew"][..],
            ),
            (
                "SELECT * FROM orders WHERE customer_id = '1' '2'",
                &["i12"][..],
            ),
            ("SELECT * FROM orders WHERE customer_id = 0b1100", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = 1e1", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = 0x0C", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = 12.", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = .12e2", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = 1_2", &[][..]),
            (
                "SELECT * FROM orders WHERE customer_id = 12 IS TRUE",
                &[][..],
            ),
            ("SELECT * FROM orders WHERE customer_id = 12 = 1", &[][..]),
            ("SELECT * FROM orders WHERE 1 = customer_id = 0", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = 12 || 1", &[][..]),
            ("SELECT * FROM orders WHERE customer_id = 12 XOR 1", &[][..]),
            (
                "SELECT * FROM orders WHERE customer_id = 12 IN (0)",
                &[][..],
            ),
            (
                "SELECT * FROM orders WHERE customer_id = _utf8mb4'12'",
                &[][..],
            ),
            ("SELECT * FROM orders WHERE customer_id = N'12'", &[][..]),
            ("SELECT * FROM orders WHERE status = \"new\"", &[][..]),
            (
                "SELECT * FROM orders WHERE status = 'new' COLLATE utf8mb4_bin",
                &[][..],
            ),
            ("SELECT * FROM orders WHERE BINARY status = 'new'", &[][..]),
            (
                "SELECT * FROM orders WHERE customer_id = DATE '2020-01-01'",
                &[][..],
            ),
            (
                "SELECT * FROM orders WHERE customer_id = {d '2020-01-01'}",
                &[][..],
            ),
        ] {
            // A doubtful text builds no shape: it pins nothing, which is always sound.
            let Some(shape) = Shape::build(sql) else {
                continue;
            };
            let p = |_: usize| None;
            let got: Vec<String> = shape
                .read_slices(sql, &cols, &p)
                .into_values()
                .flat_map(|(_, v)| v)
                .collect();
            assert!(
                got.is_empty() || got == ok,
                "{sql}: pinned {got:?}, the server's value is {ok:?}"
            );
        }
    }

    #[test]
    fn doubtful_falls_back() {
        for sql in [
            "SELECT * FROM orders WHERE customer_id = 5 OR customer_id = 6",
            "SELECT * FROM orders WHERE ABS(customer_id) = 5",
            "SELECT * FROM orders WHERE customer_id + 0 = 5",
            "SELECT * FROM orders WHERE customer_id = NULL",
            "SELECT * FROM orders WHERE customer_id IN (1, NULL)",
            "SELECT * FROM orders WHERE customer_id NOT IN (1)",
            "SELECT * FROM orders WHERE customer_id IN (SELECT id FROM customers)",
            "SELECT * FROM orders WHERE customer_id = (SELECT 5)",
            "SELECT * FROM orders WHERE customer_id = 5.0",
            "SELECT * FROM orders WHERE customer_id = '5.0'",
            "SELECT * FROM orders WHERE customer_id = '05'",
            "SELECT * FROM orders WHERE customer_id = ' 5'",
            "SELECT * FROM orders WHERE customer_id = '1e1'",
            "SELECT * FROM orders WHERE customer_id = 99999999999",
            "SELECT * FROM orders WHERE customer_id = TRUE",
            "SELECT * FROM orders WHERE customer_id = x'05'",
            "SELECT * FROM orders WHERE customer_id <=> 5",
            "SELECT * FROM orders WHERE total = 5",
            "SELECT * FROM orders WHERE nosuch = 5",
            "SELECT * FROM orders WHERE status = 5",
            "SELECT * FROM orders WHERE status = 'é'",
            "SELECT * FROM orders WHERE status = 'new '",
            "SELECT * FROM orders WHERE danish = 'aa'",
            "SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE id = 5",
            "SELECT * FROM orders WHERE customer_id = 5 UNION SELECT * FROM orders",
            "WITH x AS (SELECT 1) SELECT * FROM orders WHERE customer_id = 5",
            "SELECT * FROM orders WHERE customer_id = 5 AND id IN (SELECT id FROM orders)",
            "SELECT * FROM (SELECT * FROM orders) o WHERE o.customer_id = 5",
        ] {
            assert_eq!(read(sql), vec![], "{sql}");
        }
        // Backslashes, executable comments: not analysed at all.
        assert!(parse_one("SELECT * FROM orders WHERE status = 'a\\'b'").is_none());
        assert!(parse_one("SELECT * FROM orders WHERE /*!50000 customer_id = 5 */ 1").is_none());
        // `XOR` and `||` bind looser than AND to the server, tighter than `=` to sqlparser:
        // its top-level AND is not the server's filter.
        for sql in [
            "SELECT * FROM orders WHERE customer_id = 5 AND total = 1 XOR 1",
            "SELECT * FROM orders WHERE customer_id = 5 AND total = 1 || 1",
            "SELECT * FROM orders WHERE created_at >= '2026-11-01' \
             AND created_at < '2026-11-08' AND total = 1 XOR 1",
            "UPDATE orders SET total = 1 WHERE customer_id = 5 AND total = 2 || 1",
            "DELETE FROM orders WHERE customer_id = 5 AND total = 2 XOR 1",
        ] {
            assert!(parse_one(sql).is_none(), "{sql}");
            assert_eq!(read(sql), vec![], "{sql}");
        }
    }

    #[test]
    fn integer_strings_are_the_same_slice() {
        assert_eq!(
            read("SELECT * FROM orders WHERE customer_id = '123'"),
            read("SELECT * FROM orders WHERE customer_id = 123")
        );
        assert_eq!(
            read("SELECT * FROM orders WHERE customer_id = -7"),
            vec![pin("orders", "customer_id", &["i-7"])]
        );
        assert_eq!(
            read("SELECT * FROM orders WHERE customer_id = '9007199254740993'"),
            vec![]
        );
    }

    #[test]
    fn collations() {
        // Case-insensitive: 'a' and 'A' are one slice.
        assert_eq!(
            read("SELECT * FROM orders WHERE status = 'NeW'"),
            vec![pin("orders", "status", &["snew"])]
        );
        assert_eq!(
            read("SELECT * FROM orders WHERE status = 'new'"),
            read("SELECT * FROM orders WHERE status = 'NEW'")
        );
        // Binary: exact bytes.
        assert_eq!(
            read("SELECT * FROM orders WHERE code = 'AbC'"),
            vec![pin("orders", "code", &["sAbC"])]
        );
    }

    #[test]
    fn join_chains() {
        assert_eq!(
            read(
                "SELECT * FROM orders o JOIN customers c ON o.customer_id = c.id \
                 WHERE c.id = 5"
            ),
            vec![
                pin("customers", "id", &["i5"]),
                pin("orders", "customer_id", &["i5"])
            ]
        );
        assert_eq!(
            read("SELECT * FROM orders o, products p WHERE o.product_id = p.id AND p.id IN (1,2)"),
            vec![
                pin("orders", "product_id", &["i1", "i2"]),
                pin("products", "id", &["i1", "i2"])
            ]
        );
        // Different collations: no propagation.
        assert_eq!(
            read("SELECT * FROM orders o JOIN customers c ON o.code = c.email WHERE c.email = 'x'"),
            vec![pin("customers", "email", &["sx"])]
        );
        // Left join: the preserved side may be pinned by WHERE; the other side never.
        assert_eq!(
            read(
                "SELECT * FROM products p LEFT JOIN orders o ON o.product_id = p.id \
                 AND o.customer_id = 3 WHERE p.category_id = 7"
            ),
            vec![pin("products", "category_id", &["i7"])]
        );
        assert_eq!(
            read(
                "SELECT * FROM orders o RIGHT JOIN products p ON o.product_id = p.id \
                 WHERE p.id = 7"
            ),
            vec![pin("products", "id", &["i7"])]
        );
        // Self-join: each reference must be pinned on the same column.
        assert_eq!(
            read(
                "SELECT * FROM orders a JOIN orders b ON a.customer_id = b.customer_id \
                 WHERE a.customer_id = 4"
            ),
            vec![pin("orders", "customer_id", &["i4"])]
        );
        assert_eq!(
            read("SELECT * FROM orders a JOIN orders b ON b.id = 1 WHERE a.customer_id = 4"),
            vec![]
        );
    }

    #[test]
    fn parameters() {
        assert_eq!(
            read_p(
                "SELECT * FROM orders WHERE customer_id = ? AND status = ?",
                &[Lit::Int("8".into()), Lit::Str("X".into())]
            ),
            vec![pin("orders", "customer_id", &["i8"])]
        );
        assert_eq!(
            read_p("SELECT * FROM orders WHERE customer_id = ?", &[Lit::Null]),
            vec![]
        );
    }

    fn write(sql: &str, params: &[Lit]) -> Option<Vec<(String, Vec<String>)>> {
        let shape = Shape::build(sql).expect("not doubtful");
        let p = |i: usize| params.get(i).cloned();
        shape.write_rows(sql, &cols, &all, &p).map(|w| w.known)
    }

    fn known(list: &[(&str, &[&str])]) -> Option<Vec<(String, Vec<String>)>> {
        Some(
            list.iter()
                .map(|(c, v)| (c.to_string(), v.iter().map(|s| s.to_string()).collect()))
                .collect(),
        )
    }

    #[test]
    fn inserts() {
        assert_eq!(
            write(
                "INSERT INTO orders (customer_id, status, total) VALUES (5, 'New', 1.5), ('6', 'x', 2)",
                &[]
            ),
            known(&[("customer_id", &["i5", "i6"]), ("status", &["snew", "sx"])])
        );
        assert_eq!(
            write(
                "INSERT INTO orders (id, customer_id, code) VALUES (?, ?, ?)",
                &[Lit::Int("3".into()), Lit::Int("4".into()), Lit::Null]
            ),
            known(&[("code", &[]), ("customer_id", &["i4"]), ("id", &["i3"])])
        );
        // Auto-increment given NULL: the stored id is the server's.
        assert_eq!(
            write("INSERT INTO orders (id, customer_id) VALUES (NULL, 1)", &[]),
            known(&[("customer_id", &["i1"])])
        );
        // Auto-increment given 0 in any spelling (a string, a signed zero, a parameter):
        // the server generates the id.
        for (sql, params) in [
            (
                "INSERT INTO orders (id, customer_id) VALUES ('0', 1)",
                vec![],
            ),
            (
                "INSERT INTO orders (id, customer_id) VALUES ('-0', 1)",
                vec![],
            ),
            (
                "INSERT INTO orders (id, customer_id) VALUES (-0, 1)",
                vec![],
            ),
            (
                "INSERT INTO orders (id, customer_id) VALUES (?, 1)",
                vec![Lit::Str("0".into())],
            ),
        ] {
            assert_eq!(
                write(sql, &params),
                known(&[("customer_id", &["i1"])]),
                "{sql}"
            );
        }
        // Without a column list: the catalog's order.
        assert_eq!(
            write("INSERT INTO orders VALUES (1, 2, 3, 'a', 'b', 4.0)", &[]),
            known(&[
                ("code", &["sb"]),
                ("customer_id", &["i2"]),
                ("id", &["i1"]),
                ("product_id", &["i3"]),
                ("status", &["sa"])
            ])
        );
        for sql in [
            "REPLACE INTO orders (id, customer_id) VALUES (1, 2)",
            "INSERT INTO orders (id, customer_id) VALUES (1, 2) ON DUPLICATE KEY UPDATE customer_id = 3",
            "INSERT INTO orders (id, customer_id) SELECT id, 1 FROM customers",
            "INSERT INTO orders SET customer_id = 1",
        ] {
            assert_eq!(write(sql, &[]), None, "{sql}");
        }
        // A computed value: that column is unknown, the others known.
        assert_eq!(
            write(
                "INSERT INTO orders (customer_id, status) VALUES (1 + 1, 'a')",
                &[]
            ),
            known(&[("status", &["sa"])])
        );
    }

    #[test]
    fn updates_and_deletes() {
        assert_eq!(
            write(
                "UPDATE orders SET total = total + 1 WHERE customer_id = 5",
                &[]
            ),
            known(&[("customer_id", &["i5"])])
        );
        // Moving rows: before and after images.
        assert_eq!(
            write(
                "UPDATE orders SET customer_id = 7 WHERE customer_id IN (5, 6)",
                &[]
            ),
            known(&[("customer_id", &["i5", "i6", "i7"])])
        );
        assert_eq!(
            write(
                "UPDATE orders SET customer_id = customer_id + 1 WHERE customer_id = 5",
                &[]
            ),
            known(&[])
        );
        assert_eq!(
            write("UPDATE orders SET status = 'x' WHERE id = 5", &[]),
            known(&[("id", &["i5"])])
        );
        assert_eq!(
            write(
                "DELETE FROM orders WHERE customer_id = ? AND total > 3",
                &[Lit::Str("9".into())]
            ),
            known(&[("customer_id", &["i9"])])
        );
        assert_eq!(
            write("DELETE FROM orders WHERE customer_id > 3", &[]),
            known(&[])
        );
        assert_eq!(write("DELETE FROM orders", &[]), None);
        assert_eq!(
            write("UPDATE orders o JOIN customers c ON c.id = o.customer_id SET o.total = 1 WHERE c.id = 1", &[]),
            None
        );
        assert_eq!(
            write("DELETE o FROM orders o WHERE o.customer_id = 1", &[]),
            None
        );
    }

    /// A shape built from one statement of a digest, applied to another of that digest,
    /// gives what that other statement's own shape gives: literals are read from each
    /// statement's tokens (signs, quotes, kinds), never from the statement that built it.
    #[test]
    fn a_shape_serves_every_statement_of_its_digest() {
        let reads = [
            [
                "SELECT * FROM orders WHERE customer_id = 5",
                "SELECT * FROM orders WHERE customer_id = -5",
                "SELECT * FROM orders WHERE customer_id = '5'",
                "SELECT * FROM orders WHERE customer_id = 1.5",
                "SELECT * FROM orders WHERE customer_id = x'05'",
                "SELECT * FROM orders WHERE customer_id = +5",
                "SELECT * FROM orders WHERE customer_id = '05'",
                "SELECT * FROM orders WHERE customer_id = - 12",
            ]
            .as_slice(),
            &[
                "SELECT * FROM orders o WHERE o.customer_id IN (1, -2) AND o.status = 'a'",
                "SELECT * FROM orders o WHERE o.customer_id IN ('3', 4) AND o.status = 'it''s'",
                "SELECT * FROM orders o WHERE o.customer_id IN (0x1, 4) AND o.status = 7",
            ],
            &[
                "SELECT * FROM orders o JOIN customers c ON o.customer_id = c.id AND c.id = 1 \
                 WHERE o.status = 'x'",
                "SELECT * FROM orders o JOIN customers c ON o.customer_id = c.id AND c.id = -3 \
                 WHERE o.status = 'Y''z'",
            ],
            &[
                "SELECT * FROM orders WHERE status = 'NEW' AND customer_id = ?",
                "SELECT * FROM orders WHERE status = 'old' AND customer_id = ?",
            ],
        ];
        let p = |i: usize| (i == 0).then(|| Lit::Int("8".into()));
        for class in reads {
            for a in class {
                let shape = Shape::build(a).unwrap();
                for b in class {
                    assert_eq!(
                        crate::analysis::digest(a.as_bytes()),
                        crate::analysis::digest(b.as_bytes()),
                        "{a} / {b}"
                    );
                    let own = Shape::build(b).unwrap();
                    assert_eq!(
                        shape.read_slices(b, &cols, &p),
                        own.read_slices(b, &cols, &p),
                        "shape of {a} applied to {b}"
                    );
                }
            }
        }
        let writes = [
            [
                "INSERT INTO orders (customer_id, status, total) VALUES (5, 'New', 1.5), ('6', 'x', 2)",
                "INSERT INTO orders (customer_id, status, total) VALUES (-5, 'a''b', 1), (x'06', 'x', 2)",
                "INSERT INTO orders (customer_id, status, total) VALUES (1.5, 3, 1), (7, '', -2)",
            ]
            .as_slice(),
            &[
                "UPDATE orders SET customer_id = 7, status = 'a' WHERE customer_id IN (5, 6)",
                "UPDATE orders SET customer_id = -7, status = 3 WHERE customer_id IN ('5', 1.5)",
            ],
            &[
                "DELETE FROM orders WHERE customer_id = 9 AND id = 3",
                "DELETE FROM orders WHERE customer_id = '9' AND id = x'03'",
            ],
        ];
        for class in writes {
            for a in class {
                let shape = Shape::build(a).unwrap();
                for b in class {
                    let own = Shape::build(b).unwrap();
                    assert_eq!(
                        shape.write_rows(b, &cols, &all, &p),
                        own.write_rows(b, &cols, &all, &p),
                        "shape of {a} applied to {b}"
                    );
                }
            }
        }
        // `?` and a literal are both `?` in the digest; a shape never reads one as the other.
        let a = "INSERT INTO orders (customer_id, status) VALUES (?, 'x')";
        let b = "INSERT INTO orders (customer_id, status) VALUES (5, ?)";
        assert_eq!(
            crate::analysis::digest(a.as_bytes()),
            crate::analysis::digest(b.as_bytes())
        );
        assert_ne!(Shape::key(a), Shape::key(b));
        let ps = |i: usize| (i == 0).then(|| Lit::Str("y".into()));
        assert_eq!(
            Shape::build(a).unwrap().write_rows(b, &cols, &all, &ps),
            None
        );
        assert_eq!(
            Shape::build(b)
                .unwrap()
                .write_rows(b, &cols, &all, &ps)
                .map(|w| w.known),
            known(&[("customer_id", &["i5"]), ("status", &["sy"])])
        );
        // A statement of the digest that is doubtful itself (a comment) gets nothing.
        let shape = Shape::build("SELECT * FROM orders WHERE customer_id = 5").unwrap();
        assert!(shape
            .read_slices(
                "SELECT * FROM orders WHERE customer_id = 5 /* x */",
                &cols,
                &p
            )
            .is_empty());
        assert!(Shape::build("SELECT * FROM orders WHERE customer_id = 5 -- x").is_none());
        // Two literals in a row are one string to MySQL: no slices for that digest.
        assert!(read("SELECT * FROM orders WHERE status = 'a' 'b'").is_empty());
    }

    /// The shop workload of scripts/bench-app (examples/shopload), statement for statement:
    /// which tables each read depends on by slices and which whole, and what each write
    /// names. What stays whole is not provable from the statement (docs/benchmarks.md, L):
    /// a join on an unpinned column, a range, a LIKE.
    #[test]
    fn read_columns_name_every_column_read() {
        let cols = |sql: &str| -> Option<Vec<String>> {
            Shape::build(sql)
                .expect("not doubtful")
                .read_columns(sql)
                .map(<[String]>::to_vec)
        };
        let has = |sql: &str, want: &[&str], not: &[&str]| {
            let w = cols(sql).unwrap_or_else(|| panic!("no columns for {sql}"));
            for c in want {
                assert!(w.iter().any(|x| x == c), "{c} missing from {w:?} ({sql})");
            }
            for c in not {
                assert!(!w.iter().any(|x| x == c), "{c} in {w:?} ({sql})");
            }
        };
        // Select list, WHERE, JOIN ON, GROUP BY, HAVING, ORDER BY, subqueries, USING,
        // backquoted names (case folded), MATCH's column list.
        has(
            "SELECT p.id, `Name` FROM products p JOIN categories c ON c.id = p.category_id              WHERE p.price > 3 AND p.id IN (SELECT product_id FROM order_items WHERE qty > 1)              GROUP BY p.id HAVING SUM(p.weight) > 0 ORDER BY p.rank",
            &[
                "id",
                "name",
                "category_id",
                "price",
                "product_id",
                "qty",
                "weight",
                "rank",
            ],
            &["stock"],
        );
        has("SELECT a FROM t JOIN u USING (k)", &["a", "k"], &[]);
        has(
            "SELECT id FROM t WHERE MATCH (body, title) AGAINST ('x')",
            &["body", "title"],
            &[],
        );
        // COUNT(*) reads no column; a product is not a wildcard.
        has(
            "SELECT COUNT(*), price * qty FROM t WHERE a = 1",
            &["price", "qty", "a"],
            &["stock"],
        );
        has("SELECT COUNT( * ) FROM t", &[], &["stock"]);
        // What may read unnamed columns: no column list.
        for sql in [
            "SELECT * FROM t WHERE id = 1",
            "SELECT t.*, u.a FROM t JOIN u ON u.id = t.id",
            "SELECT a FROM (SELECT * FROM t) x",
            "SELECT COUNT(t.*) FROM t",
            "SELECT a FROM t NATURAL JOIN u",
            "SELECT a FROM t PARTITION (p0)",
            "SELECT a, ROW_NUMBER() OVER (PARTITION BY b) FROM t",
            "SELECT a FROM t FOR SYSTEM_TIME ALL",
            "SELECT `prïce` FROM t",
            "SELECT a FROM t WHERE EXISTS (SELECT * FROM u WHERE u.id = t.id)",
            "SELECT _rowid, a FROM t WHERE b = 1",
            "SELECT a FROM t WHERE b = 1 ORDER BY `_ROWID`",
        ] {
            assert_eq!(cols(sql), None, "{sql}");
        }
        // A statement of the same shape gets the building statement's names; a doubtful
        // text none.
        let shape = Shape::build("SELECT a FROM t WHERE b = 1").unwrap();
        assert_eq!(
            shape.read_columns("SELECT a FROM t WHERE b = 2"),
            Some(
                &[
                    "a".to_string(),
                    "b".into(),
                    "from".into(),
                    "select".into(),
                    "t".into(),
                    "where".into()
                ][..]
            )
        );
        assert_eq!(shape.read_columns("SELECT a FROM t WHERE b = 2 -- c"), None);
        // Writes have none; an UPDATE says what it assigns.
        assert_eq!(
            Shape::build("UPDATE t SET a = 1 WHERE id = 2")
                .unwrap()
                .read_columns("UPDATE t SET a = 1 WHERE id = 2"),
            None
        );
        let up =
            "UPDATE products SET stock = IF(stock > 0, stock - 1, 100), Price = ? WHERE id = ?";
        assert_eq!(
            Shape::build(up).unwrap().update_columns(up).map(|(_, c)| c),
            Some(vec!["stock".to_string(), "price".to_string()])
        );
        let ins = "INSERT INTO t (a) VALUES (1)";
        assert_eq!(Shape::build(ins).unwrap().update_columns(ins), None);
        // `_rowid` is the primary key by another name.
        let rowid = "UPDATE t SET _rowid = 5 WHERE id = 1";
        assert_eq!(Shape::build(rowid).unwrap().update_columns(rowid), None);
        // Multi-table updates are not understood: no column list.
        let multi = "UPDATE t JOIN u ON u.id = t.id SET t.a = 1 WHERE u.b = 2";
        assert_eq!(Shape::build(multi).unwrap().update_columns(multi), None);
    }

    #[test]
    fn shop_workload() {
        fn shop(t: &TableRef, c: &str) -> Option<ColumnInfo> {
            let other = ColumnInfo {
                ty: ColType::Other,
                nullable: false,
                auto_increment: false,
            };
            let name = text("utf8mb4_general_ci");
            Some(match (t.name.as_str(), c) {
                ("orders", "id") => ColumnInfo {
                    auto_increment: true,
                    ..int()
                },
                ("categories", "id" | "parent_id")
                | ("products", "id" | "category_id" | "stock")
                | ("customers", "id")
                | ("orders", "customer_id")
                | ("order_items", "order_id" | "product_id" | "qty") => int(),
                ("categories" | "products" | "customers", "name") | ("orders", "status") => name,
                ("orders", "created_at") => typed("datetime", "datetime", false),
                ("orders", "total")
                | ("order_items" | "products", "price")
                | ("products", "description") => other,
                _ => return None,
            })
        }
        let no_order = |_: &TableRef| None;
        let p = |i: usize| {
            Some(match i {
                0 => Lit::Int("7".into()),
                1 => Lit::Str("2026-01-01".into()),
                _ => Lit::Str("12.50".into()),
            })
        };
        // The dashboard's window: from the second parameter to a week on.
        let dash = |i: usize| {
            Some(Lit::Str(
                if i == 0 { "2026-01-01" } else { "2026-01-08" }.into(),
            ))
        };
        let read = |sql: &str| {
            let mut v: Vec<(String, String, Vec<String>)> = Shape::build(sql)
                .unwrap()
                .read_slices(sql, &shop, &p)
                .into_iter()
                .map(|(t, (c, v))| (t.name, c, v))
                .collect();
            v.sort();
            v
        };
        // product: products by id; categories whole (joined on p.category_id, unpinned).
        assert_eq!(
            read(
                "SELECT p.id, p.name, p.price, p.stock, p.description, c.name AS category \
                 FROM products p JOIN categories c ON c.id = p.category_id WHERE p.id = ?"
            ),
            vec![pin("products", "id", &["i7"])]
        );
        // history: orders by customer; order_items whole: joined on o.id, which no constant
        // pins (the customer's order ids are in no statement).
        assert_eq!(
            read(
                "SELECT o.id, o.created_at, o.status, o.total, COUNT(*) AS items \
                 FROM orders o JOIN order_items i ON i.order_id = o.id WHERE o.customer_id = ? \
                 GROUP BY o.id, o.created_at, o.status, o.total \
                 ORDER BY o.created_at DESC, o.id DESC LIMIT 10"
            ),
            vec![pin("orders", "customer_id", &["i7"])]
        );
        // category: products by category; order_items whole (outer side, joined on p.id).
        assert_eq!(
            read(
                "SELECT p.id, p.name, p.price, COUNT(i.order_id) AS sold \
                 FROM products p LEFT JOIN order_items i ON i.product_id = p.id \
                 WHERE p.category_id = ? GROUP BY p.id, p.name, p.price \
                 ORDER BY sold DESC, p.id LIMIT 24"
            ),
            vec![pin("products", "category_id", &["i7"])]
        );
        // Derived slices (`cache::fkmap`): history's order_items by its orders' customer,
        // the category page's order_items by its products' category.
        let pk = |t: &TableRef| match t.name.as_str() {
            "orders" | "products" | "categories" | "customers" => Some("id".to_string()),
            _ => None,
        };
        let derived = |sql: &str| {
            Shape::build(sql)
                .unwrap()
                .derived_slices(sql, &shop, &p, &pk)
                .into_iter()
                .map(|d| (d.child.name, d.fk, d.parent.name, d.pk, d.col, d.values))
                .collect::<Vec<_>>()
        };
        let d = |c: &str, fk: &str, p: &str, col: &str| {
            (
                c.to_string(),
                fk.to_string(),
                p.to_string(),
                "id".to_string(),
                col.to_string(),
                vec!["i7".to_string()],
            )
        };
        assert_eq!(
            derived(
                "SELECT o.id, o.created_at, o.status, o.total, COUNT(*) AS items \
                 FROM orders o JOIN order_items i ON i.order_id = o.id WHERE o.customer_id = ? \
                 GROUP BY o.id, o.created_at, o.status, o.total \
                 ORDER BY o.created_at DESC, o.id DESC LIMIT 10"
            ),
            vec![d("order_items", "order_id", "orders", "customer_id")]
        );
        assert_eq!(
            derived(
                "SELECT p.id, p.name, p.price, COUNT(i.order_id) AS sold \
                 FROM products p LEFT JOIN order_items i ON i.product_id = p.id \
                 WHERE p.category_id = ? GROUP BY p.id, p.name, p.price \
                 ORDER BY sold DESC, p.id LIMIT 24"
            ),
            vec![d("order_items", "product_id", "products", "category_id")]
        );
        // The product page's categories: joined on p.category_id, not on a parent's pk.
        assert_eq!(
            derived(
                "SELECT p.id, c.name FROM products p JOIN categories c ON c.id = p.category_id \
                 WHERE p.id = ?"
            ),
            vec![]
        );
        // Doubtful: the child read twice, the parent on the outer side, the join through a
        // non-key column, an OR, the equality in the WHERE of a LEFT JOIN's child (a filter,
        // still provable), a join on the pk of a table without a single-column pk.
        for sql in [
            "SELECT * FROM orders o JOIN order_items i ON i.order_id = o.id \
             WHERE o.customer_id = 7 AND i.product_id IN (SELECT product_id FROM order_items)",
            "SELECT * FROM order_items i LEFT JOIN orders o ON i.order_id = o.id \
             WHERE o.customer_id = 7",
            "SELECT * FROM orders o JOIN order_items i ON i.qty = o.customer_id \
             WHERE o.customer_id = 7",
            "SELECT * FROM orders o JOIN order_items i ON i.order_id = o.id OR i.qty = 1 \
             WHERE o.customer_id = 7",
            "SELECT * FROM orders o JOIN order_items i ON i.order_id + 0 = o.id \
             WHERE o.customer_id = 7",
            "SELECT * FROM order_items i JOIN order_items j ON j.order_id = i.product_id \
             WHERE i.order_id = 7",
        ] {
            assert_eq!(derived(sql), vec![], "{sql}");
        }
        // The equality through a chain, and with literals.
        assert_eq!(
            derived(
                "SELECT * FROM orders o, order_items i WHERE o.customer_id = 7 \
                 AND i.order_id = o.id"
            ),
            vec![d("order_items", "order_id", "orders", "customer_id")]
        );
        assert_eq!(
            derived(
                "SELECT * FROM orders o LEFT JOIN order_items i ON o.id = i.order_id \
                 AND i.qty > 1 WHERE o.customer_id IN (7)"
            ),
            vec![d("order_items", "order_id", "orders", "customer_id")]
        );
        // dashboard (a range): orders by the days of its week.
        let sql = "SELECT o.status, COUNT(*) AS orders, SUM(o.total) AS revenue FROM orders o \
                   WHERE o.created_at >= ? AND o.created_at < ? GROUP BY o.status \
                   ORDER BY o.status";
        let pins: Vec<_> = Shape::build(sql)
            .unwrap()
            .read_slices(sql, &shop, &dash)
            .into_iter()
            .map(|(t, (c, v))| (t.name, c, v))
            .collect();
        assert_eq!(
            pins,
            vec![pin_owned("orders", "created_at", days("2026-01-01", 7))]
        );
        // The per-day dashboard (#37, `--dashboard daily`): the same days, and one row per
        // day sorted by its DATE key, which no plan changes: it keeps its slices.
        let sql = "SELECT DATE(created_at), COUNT(*), SUM(total) FROM orders \
                   WHERE created_at >= ? AND created_at < ? GROUP BY DATE(created_at)";
        let shape = Shape::build(sql).unwrap();
        let pins: Vec<_> = shape
            .read_slices(sql, &shop, &dash)
            .into_iter()
            .map(|(t, (c, v))| (t.name, c, v))
            .collect();
        assert_eq!(
            pins,
            vec![pin_owned("orders", "created_at", days("2026-01-01", 7))]
        );
        let order = shape.read_order().unwrap();
        assert_eq!(
            order.grouped_by,
            Some(vec![(
                TableRef::new(None, "orders"),
                "created_at".to_string()
            )])
        );
        // search (a prefix): the whole table.
        assert_eq!(
            read("SELECT id, name, price FROM products WHERE name LIKE ? ORDER BY name LIMIT 20"),
            vec![]
        );
        let write = |sql: &str| {
            Shape::build(sql)
                .unwrap()
                .write_rows(sql, &shop, &no_order, &p)
                .map(|w| w.known)
        };
        // A new order names its customer, its day (month and year) and status; its id is
        // the server's.
        let mut buckets = temporal_keys(day("2026-01-01"));
        buckets.sort();
        let b: Vec<&str> = buckets.iter().map(String::as_str).collect();
        assert_eq!(
            write(
                "INSERT INTO orders (customer_id, created_at, status, total) \
                 VALUES (?, ?, 'new', ?)"
            ),
            known(&[
                ("created_at", &b),
                ("customer_id", &["i7"]),
                ("status", &["snew"])
            ])
        );
        let ints = |i: usize| Some(Lit::Int((i + 3).to_string()));
        assert_eq!(
            Shape::build(
                "INSERT INTO order_items (order_id, product_id, qty, price) VALUES (?, ?, 1, ?)"
            )
            .unwrap()
            .write_rows(
                "INSERT INTO order_items (order_id, product_id, qty, price) VALUES (?, ?, 1, ?)",
                &shop,
                &no_order,
                &ints
            )
            .map(|w| w.known),
            known(&[
                ("order_id", &["i3"]),
                ("product_id", &["i4"]),
                ("qty", &["i1"])
            ])
        );
        // A stock update names the product, not its category: category pages go.
        assert_eq!(
            write("UPDATE products SET stock = IF(stock > 0, stock - 1, 100) WHERE id = ?"),
            known(&[("id", &["i7"])])
        );
    }

    /// What a read's text says of its row order showing (`OrderShape`), one row per fact.
    #[test]
    fn what_decides_whether_row_order_shows() {
        let t = |n: &str| TableRef::new(None, n);
        let col = |n: &str, c: &str| (t(n), c.to_string());
        let o = |sql: &str| {
            Shape::build(sql)
                .and_then(|s| s.read_order().cloned())
                .unwrap_or_else(|| panic!("no read shape: {sql}"))
        };
        let cases: Vec<(&str, OrderShape)> = vec![
            (
                "SELECT id FROM o WHERE c = 5",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT id FROM o WHERE c = 5 ORDER BY d, id LIMIT 2",
                OrderShape {
                    limited: true,
                    tables: vec![t("o")],
                    ordered_by: vec![col("o", "d"), col("o", "id")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT id FROM o WHERE c = 5 ORDER BY d + 1",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT COUNT(*), SUM(d) AS s, MAX(d) FROM o WHERE c = 5",
                OrderShape {
                    tables: vec![t("o")],
                    aggregates_only: true,
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT GROUP_CONCAT(id) FROM o WHERE c = 5",
                OrderShape {
                    shown: true,
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT COUNT(*) OVER () FROM o WHERE c = 5",
                OrderShape {
                    shown: true,
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            // A floating-point aggregate's last bits follow the order it adds rows in: in
            // a HAVING it decides whether the row shows (adversary28).
            (
                "SELECT COUNT(*) FROM o WHERE c = 5 HAVING VARIANCE(d) = 1.5",
                OrderShape {
                    shown: true,
                    tables: vec![t("o")],
                    aggregates_only: true,
                    ..OrderShape::default()
                },
            ),
            // MySQL's ANY_VALUE is the first row's the plan met.
            (
                "SELECT COUNT(*) FROM o WHERE c = 5 HAVING ANY_VALUE(d) = 1",
                OrderShape {
                    shown: true,
                    tables: vec![t("o")],
                    aggregates_only: true,
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY d HAVING stddev_samp(e) > 1",
                OrderShape {
                    shown: true,
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT DATE(d), COUNT(*) FROM o WHERE c = 5 GROUP BY DATE(d) HAVING STD(e) > 1",
                OrderShape {
                    shown: true,
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY d HAVING SUM(e) > 1",
                OrderShape {
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY d",
                OrderShape {
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, e FROM o WHERE c = 5 GROUP BY d",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            // A day's key: `DATE(col)` shown as grouped, without ORDER BY.
            (
                "SELECT DATE(d), COUNT(*), SUM(e) FROM o WHERE d >= '2024-01-01' GROUP BY DATE(d)",
                OrderShape {
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT date(o.d) AS day, COUNT(*) FROM o WHERE c = 5 GROUP BY date(o.d), c",
                OrderShape {
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d"), col("o", "c")]),
                    ..OrderShape::default()
                },
            ),
            // The column itself is some row of the day's group, not its key.
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY DATE(d)",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            // Nor is `DATE(d)` a key of a GROUP BY of `d`'s other function, or of `d`.
            (
                "SELECT DATE(d), COUNT(*) FROM o WHERE c = 5 GROUP BY YEAR(d)",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT DATE(d), COUNT(*) FROM o WHERE c = 5 GROUP BY d",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            // Ordered otherwise, a quoted name (a user function), a modifier: not modelled.
            (
                "SELECT DATE(d), COUNT(*) FROM o WHERE c = 5 GROUP BY DATE(d) ORDER BY COUNT(*)",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT `date`(d), COUNT(*) FROM o WHERE c = 5 GROUP BY `date`(d)",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT DATE(d), COUNT(*) FROM o WHERE c = 5 GROUP BY DATE(d) WITH ROLLUP",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY d ORDER BY COUNT(*)",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
            // A column outside the GROUP BY is some row's value: groups sorted by it first
            // come in the order the plan met rows (adversary28); after the whole key, it
            // breaks no tie.
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY d ORDER BY e, d",
                OrderShape {
                    tables: vec![t("o")],
                    ordered_by: vec![col("o", "e"), col("o", "d")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, e, COUNT(*) FROM o WHERE c = 5 GROUP BY d, e ORDER BY d, id, e",
                OrderShape {
                    tables: vec![t("o")],
                    ordered_by: vec![col("o", "d"), col("o", "id"), col("o", "e")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, COUNT(*) FROM o WHERE c = 5 GROUP BY d ORDER BY d DESC, e",
                OrderShape {
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ordered_by: vec![col("o", "d"), col("o", "e")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT d, e, COUNT(*) FROM o WHERE c = 5 GROUP BY d, e ORDER BY e, d, id",
                OrderShape {
                    tables: vec![t("o")],
                    grouped_by: Some(vec![col("o", "d"), col("o", "e")]),
                    ordered_by: vec![col("o", "e"), col("o", "d"), col("o", "id")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT COUNT(*) FROM o WHERE c = 5 AND d IN (SELECT d FROM p WHERE e = 1)",
                OrderShape {
                    nested: true,
                    tables: vec![t("o")],
                    aggregates_only: true,
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT COUNT(*) FROM o WHERE c = 5 AND d = (SELECT d FROM p LIMIT 1)",
                OrderShape {
                    shown: true,
                    nested: true,
                    tables: vec![t("o")],
                    aggregates_only: true,
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT o.id FROM o JOIN p ON p.o_id = o.id WHERE o.c = 5 ORDER BY o.id",
                OrderShape {
                    tables: vec![t("o"), t("p")],
                    ordered_by: vec![col("o", "id")],
                    ..OrderShape::default()
                },
            ),
            // ORDER BY finds a select alias before a column: by c, not by the key id.
            (
                "SELECT c AS id, d FROM o WHERE c = 5 ORDER BY id",
                OrderShape {
                    tables: vec![t("o")],
                    ordered_by: vec![col("o", "c")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT id AS k FROM o WHERE c = 5 ORDER BY k",
                OrderShape {
                    tables: vec![t("o")],
                    ordered_by: vec![col("o", "id")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT c AS id, d FROM o WHERE c = 5 ORDER BY o.id",
                OrderShape {
                    tables: vec![t("o")],
                    ordered_by: vec![col("o", "id")],
                    ..OrderShape::default()
                },
            ),
            // A self-join: b.d is another reference's column than the group key a.d.
            (
                "SELECT b.d, COUNT(*) FROM o a JOIN o b ON b.c = a.c WHERE a.c = 5 GROUP BY a.d",
                OrderShape {
                    tables: vec![t("o"), t("o")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT a.d, COUNT(*) FROM o a JOIN o b ON b.c = a.c WHERE a.c = 5 GROUP BY a.d \
                 ORDER BY a.d",
                OrderShape {
                    tables: vec![t("o"), t("o")],
                    grouped_by: Some(vec![col("o", "d")]),
                    ordered_by: vec![col("o", "d")],
                    ..OrderShape::default()
                },
            ),
            (
                "SELECT a.d, COUNT(*) FROM o a JOIN o b ON b.c = a.c WHERE a.c = 5 GROUP BY a.d \
                 ORDER BY b.d",
                OrderShape {
                    tables: vec![t("o"), t("o")],
                    ordered_by: vec![col("o", "d")],
                    ..OrderShape::default()
                },
            ),
            // Groups sorted by the alias d (a count), not by the group key d.
            (
                "SELECT d AS k, COUNT(*) AS d FROM o WHERE c = 5 GROUP BY d ORDER BY d",
                OrderShape {
                    tables: vec![t("o")],
                    ..OrderShape::default()
                },
            ),
        ];
        for (sql, want) in cases {
            // The facts of `policy::order::result_keeps_order` have their own test, as do
            // the aggregates (below).
            let got = OrderShape {
                unmodelled: false,
                aggregated: false,
                min_max: None,
                sums: None,
                group_cols: None,
                select: None,
                order_terms: None,
                equalities: Vec::new(),
                ..o(sql)
            };
            assert_eq!(got, want, "{sql}");
        }
    }

    /// Whether a read aggregates (a column beside an aggregate shows some row of its group)
    /// and what its `MIN`/`MAX` read, one row per rule: (statement, aggregated, min/max).
    #[test]
    fn what_a_read_aggregates() {
        let t = |n: &str| TableRef::new(None, n);
        let col = |c: &str| (t("o"), c.to_string());
        type Columns = Option<Vec<(TableRef, String)>>;
        let cases: Vec<(&str, bool, Columns)> = vec![
            (
                "SELECT id FROM o WHERE c = 5 ORDER BY id",
                false,
                Some(vec![]),
            ),
            (
                "SELECT id, COUNT(*) FROM o WHERE c = 5 ORDER BY id",
                true,
                Some(vec![]),
            ),
            (
                "SELECT id FROM o WHERE c = 5 GROUP BY id ORDER BY id",
                true,
                Some(vec![]),
            ),
            (
                "SELECT MIN(s), MAX(d) FROM o WHERE c = 5",
                true,
                Some(vec![col("s"), col("d")]),
            ),
            (
                "SELECT c, min(o.s) FROM o GROUP BY c",
                true,
                Some(vec![col("s")]),
            ),
            ("SELECT MAX(d + 1) FROM o WHERE c = 5", true, None),
            ("SELECT MAX(DISTINCT d) FROM o WHERE c = 5", true, None),
            ("SELECT SUM(d) FROM o WHERE c = 5", true, Some(vec![])),
            (
                "SELECT c, MIN(v), MAX(v) FROM o WHERE c = 1 GROUP BY c",
                true,
                Some(vec![col("v"), col("v")]),
            ),
            // A column named like an aggregate counts too (fail closed), unless quoted.
            (
                "SELECT count FROM o WHERE c = 5 ORDER BY id",
                true,
                Some(vec![]),
            ),
            (
                "SELECT `count` FROM o WHERE c = 5 ORDER BY id",
                false,
                Some(vec![]),
            ),
            ("SELECT * FROM o WHERE c = 5 ORDER BY id", false, None),
        ];
        for (sql, aggregated, min_max) in cases {
            let got = Shape::build(sql)
                .and_then(|s| s.read_order().cloned())
                .unwrap_or_else(|| panic!("no read shape: {sql}"));
            assert_eq!(
                (got.aggregated, got.min_max),
                (aggregated, min_max),
                "{sql}"
            );
        }
    }

    /// The columns `MIN`/`MAX` and `SUM`/`AVG` read, in the select list and the HAVING, one
    /// row per rule: (statement, min/max, sum/avg).
    #[test]
    fn what_a_reads_aggregates_read() {
        let col = |c: &str| (TableRef::new(None, "o"), c.to_string());
        type Columns = Option<Vec<(TableRef, String)>>;
        let cases: Vec<(&str, Columns, Columns)> = vec![
            (
                "SELECT SUM(f), AVG(o.g) FROM o WHERE c = 5",
                Some(vec![]),
                Some(vec![col("f"), col("g")]),
            ),
            (
                "SELECT c, COUNT(*) FROM o WHERE c = 5 GROUP BY c HAVING SUM(f) > 0.6",
                Some(vec![]),
                Some(vec![col("f")]),
            ),
            (
                "SELECT c, COUNT(*) FROM o GROUP BY c HAVING MIN(s) = 'a'",
                Some(vec![col("s")]),
                Some(vec![]),
            ),
            ("SELECT SUM(f * 2) FROM o WHERE c = 5", Some(vec![]), None),
            (
                "SELECT AVG(DISTINCT f) FROM o WHERE c = 5",
                Some(vec![]),
                None,
            ),
            (
                "SELECT COUNT(*) FROM o WHERE c = 5",
                Some(vec![]),
                Some(vec![]),
            ),
        ];
        for (sql, min_max, sums) in cases {
            let got = Shape::build(sql)
                .and_then(|s| s.read_order().cloned())
                .unwrap_or_else(|| panic!("no read shape: {sql}"));
            assert_eq!((got.min_max, got.sums), (min_max, sums), "{sql}");
        }
    }

    /// What a read's text says for `policy::order::result_keeps_order`, one row per fact:
    /// (statement, unmodelled, GROUP BY, select, ORDER BY, equalities).
    #[test]
    fn what_decides_whether_a_result_is_plan_free() {
        use super::Term::{self, Column, Count, Other};
        type Case = (
            &'static str,
            bool,
            Option<Vec<(usize, String)>>,
            Option<Vec<Term>>,
            Option<Vec<Term>>,
            Vec<(usize, String, usize, String)>,
        );
        let c = |i: usize, n: &str| Column(i, n.to_string());
        let g = |l: &[(usize, &str)]| Some(l.iter().map(|(i, n)| (*i, n.to_string())).collect());
        let e = |d: usize, dc: &str, s: usize, sc: &str| (d, dc.to_string(), s, sc.to_string());
        let cases: Vec<Case> = vec![
            (
                "SELECT o.id, o.created_at, COUNT(*) AS items FROM orders o JOIN order_items i \
                 ON i.order_id = o.id WHERE o.customer_id = 1 GROUP BY o.id, o.created_at \
                 ORDER BY o.created_at DESC, o.id DESC LIMIT 10",
                false,
                g(&[(0, "id"), (0, "created_at")]),
                Some(vec![c(0, "id"), c(0, "created_at"), Count]),
                Some(vec![c(0, "created_at"), c(0, "id")]),
                vec![e(1, "order_id", 0, "id"), e(0, "id", 1, "order_id")],
            ),
            (
                // An alias comes first in ORDER BY; the LEFT JOIN's ON binds the side it
                // null-extends only.
                "SELECT p.id, COUNT(i.order_id) AS sold FROM products p LEFT JOIN order_items i \
                 ON i.product_id = p.id WHERE p.category_id = 1 GROUP BY p.id \
                 ORDER BY sold DESC, p.id LIMIT 24",
                false,
                g(&[(0, "id")]),
                Some(vec![c(0, "id"), Count]),
                Some(vec![Count, c(0, "id")]),
                vec![e(1, "product_id", 0, "id")],
            ),
            (
                // An alias that shadows a column in ORDER BY is the alias; SUM is no count.
                "SELECT SUM(d) AS id, COUNT(*) + 1 FROM o GROUP BY c ORDER BY id",
                false,
                g(&[(0, "c")]),
                Some(vec![Other, Count]),
                Some(vec![Other]),
                vec![],
            ),
            (
                // GROUP BY a bare name an alias also has: which one the server takes is
                // not modelled.
                "SELECT c AS d, COUNT(*) FROM o GROUP BY d",
                false,
                None,
                Some(vec![c(0, "c"), Count]),
                Some(vec![]),
                vec![],
            ),
            (
                "SELECT DISTINCT id FROM o ORDER BY id",
                true,
                g(&[]),
                Some(vec![c(0, "id")]),
                Some(vec![c(0, "id")]),
                vec![],
            ),
            (
                "SELECT c, COUNT(*) FROM o GROUP BY c HAVING COUNT(*) > 1 ORDER BY c",
                true,
                g(&[(0, "c")]),
                Some(vec![c(0, "c"), Count]),
                Some(vec![c(0, "c")]),
                vec![],
            ),
            (
                "SELECT a.id FROM o a JOIN o b ON b.id = a.c ORDER BY a.id",
                true,
                g(&[]),
                Some(vec![c(0, "id")]),
                Some(vec![c(0, "id")]),
                vec![e(1, "id", 0, "c"), e(0, "c", 1, "id")],
            ),
            (
                "SELECT * FROM o WHERE id = 1",
                false,
                g(&[]),
                None,
                Some(vec![]),
                vec![],
            ),
        ];
        for (sql, unmodelled, group_cols, select, order_terms, equalities) in cases {
            let o = Shape::build(sql)
                .and_then(|s| s.read_order().cloned())
                .unwrap_or_else(|| panic!("no read shape: {sql}"));
            assert_eq!(
                (
                    o.unmodelled,
                    o.group_cols,
                    o.select,
                    o.order_terms,
                    o.equalities
                ),
                (unmodelled, group_cols, select, order_terms, equalities),
                "{sql}"
            );
        }
    }
}
