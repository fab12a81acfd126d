//! Cached aggregates patched from known inserted rows (issue #37): which reads qcache can
//! bring up to date itself, and their new result bytes, exactly as the server would send
//! them. Sans IO; the session gives the statement texts, the catalog's columns and the
//! stored bytes.
//!
//! Eligible, on purpose narrow: one base table; a select list of `COUNT(*)`, `COUNT(col)`,
//! `SUM(col)`, `MIN(col)` and `MAX(col)` (SUM of integer and DECIMAL columns, exact in
//! units of the last digit; MIN and MAX of integer, DECIMAL, DATE and DATETIME(0) columns,
//! answered in the column's own type) and, when
//! grouped, the GROUP BY expression; at most one GROUP BY expression, a plain integer,
//! DATE or DATETIME(0) column or `DATE(col)` of a DATE or DATETIME(0) one, no ORDER BY
//! (MariaDB sorts the groups by their key, NULL first); a WHERE that is a conjunction of
//! `col = x`, `col IN (x, …)`, `col < x`, `col <= x`, `col > x`, `col >= x` and
//! `col BETWEEN a AND b`, integer literals on integer columns (compared as integers, as
//! the server compares them, signed or unsigned), canonical `'YYYY-MM-DD'` literals on DATE
//! columns and canonical `'YYYY-MM-DD'` or `'YYYY-MM-DD HH:MM:SS'` ones on DATETIME(0)
//! columns ([`temporal`]: held as seconds, so whole-second arithmetic is the server's);
//! NULL matches none of them. Without GROUP BY such a read answers one row; with it, one
//! per group in key order. A row inserted changes it by arithmetic qcache does exactly
//! (integers as `i128`; `SUM` of integers is a `DECIMAL(…,0)`, sent as its digits, `SUM`
//! of a `DECIMAL(P,S)` one a DECIMAL of S decimals, sent with exactly S of them; `SUM`
//! of no value is NULL; `MIN`/`MAX` of no value is NULL, a new value replaces it when
//! smaller or larger, and it is sent in the column's own type (an integer type, see
//! [`IntType`]; a DECIMAL of the column's scale; a DATE; a DATETIME without fractions),
//! whose metadata the stored result must carry); a row whose key is new makes a new group,
//! placed at its key's rank. Inserts only: any other write invalidates (a deleted row may
//! have been the minimum). The inserts that patch it: `INSERT [INTO] t [(cols)] VALUES
//! (…), …` whose values are all literals, and whose values in the columns the read uses
//! are integer literals inside the column's range, canonical temporal literals (a date
//! only into a DATE), numbers (or strings of one) a DECIMAL column holds exactly (no more
//! decimals than its scale), or NULL where the column allows it. Everything else is refused with
//! a [`Refusal`], and the caller invalidates as it would without patching. A stored
//! result is patched only when its rows decode to values whose encoding is exactly their
//! bytes, in key order.
//!
//! The statement texts are gated by their tokens before they are parsed: only the words and
//! punctuation these shapes need, so nothing sqlparser reads otherwise than the server does
//! (comments, `||`, `XOR`, double quotes, backslashes, executable comments) can reach the
//! shape check.
//!
//! A prepared statement's `?` (binary protocol only; a text statement's refuses) stands for
//! the value an execute bound to it, read with its type ([`bound_params`], [`Param`]) and
//! judged as the server compares and stores that type: in a WHERE, an integer type on an
//! integer column, a DATE or a DATETIME of whole seconds, or a string read as the literal
//! would be, on a DATE or DATETIME column; in an INSERT, also a DECIMAL's text or a string
//! holding a number into a DECIMAL column. NULL in a WHERE, FLOAT, DOUBLE, TIME,
//! TIMESTAMP, YEAR, fractions of seconds, an integer compared as a date, a string
//! compared with an integer column: refused, as every other value qcache cannot judge.
//!
//! A join pinned to one row: the aggregated table joined to one other table by each
//! column of that table's primary key equated with an integer column of the aggregated
//! one, each pinned to one value ([`JoinShape`], [`Recipe::join`]), the joined table's
//! columns shown as plain select items ([`Agg::Joined`]), carried from the stored rows as
//! the server sent them. A row the WHERE keeps patches only while the stored result shows
//! that the joined row exists (an empty join does not: [`Refusal::Unjoined`]).
//!
//! A write first asks a recipe's WHERE through its [`Summary`] (the conjuncts over the
//! columns its table's summaries read, the rows' values in them read once per write): a
//! summary that rules every row out means the WHERE keeps none; a value it cannot compare
//! exactly means "may match", and the recipe decides.

use bytes::{BufMut, Bytes, BytesMut};
use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, InTarget, JoinConstraint, JoinOperator, Select, SelectItem, SetExpr, Statement,
    TableFactor, TableObject, UnaryOperator, Value,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Location, Token, Tokenizer, Whitespace};

use crate::analysis::slices::{
    date_arg, split_and, ColType, ColumnInfo, InsertValues, Lit as SliceLit, Written,
};
use crate::analysis::TableRef;
use crate::protocol::commands::ExecuteParams;
use crate::protocol::packets::{put_lenenc_str, read_lenenc, read_lenenc_str};

/// MySQL column types the results of these aggregates carry: COUNT a LONGLONG, SUM of
/// integers a NEWDECIMAL, MIN/MAX the column's own integer type.
const TYPE_TINY: u8 = 0x01;
const TYPE_SHORT: u8 = 0x02;
const TYPE_LONG: u8 = 0x03;
const TYPE_LONGLONG: u8 = 0x08;
const TYPE_INT24: u8 = 0x09;
const TYPE_DATE: u8 = 0x0a;
const TYPE_DATETIME: u8 = 0x0c;
const TYPE_NEWDECIMAL: u8 = 0xf6;
/// Seconds in a day: temporal values are held as seconds (see [`temporal`]).
const DAY: i128 = 86_400;
/// Column definition flags.
const FLAG_UNSIGNED: u16 = 0x20;
const FLAG_ZEROFILL: u16 = 0x40;

/// The integer type MIN/MAX of a column answer in: the column's own type, its signedness
/// (MariaDB sends MIN(tinyint_col) as a TINY, MIN(bigint unsigned) as an UNSIGNED
/// LONGLONG), known from the catalog's range of the column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntType {
    /// The protocol's type code.
    pub code: u8,
    pub unsigned: bool,
    pub min: i128,
    pub max: i128,
}

impl IntType {
    /// From a column's range (`ColType::Int`): the five integer types, signed or unsigned.
    pub fn of_range(min: i128, max: i128) -> Option<IntType> {
        let unsigned = min == 0;
        let bits = if unsigned {
            (max + 1).checked_ilog2()?
        } else {
            (-min).checked_ilog2()? + 1
        };
        let code = match bits {
            8 => TYPE_TINY,
            16 => TYPE_SHORT,
            24 => TYPE_INT24,
            32 => TYPE_LONG,
            64 => TYPE_LONGLONG,
            _ => return None,
        };
        let want = if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        };
        ((min, max) == want).then_some(IntType {
            code,
            unsigned,
            min,
            max,
        })
    }
}

/// Bytes of an integer type's value in a binary protocol row (INT24 travels as 4).
fn binary_width(code: u8) -> Option<usize> {
    match code {
        TYPE_TINY => Some(1),
        TYPE_SHORT => Some(2),
        TYPE_INT24 | TYPE_LONG => Some(4),
        TYPE_LONGLONG => Some(8),
        _ => None,
    }
}

/// The kind of a literal a WHERE compares with: an integer, or a canonical temporal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lit {
    Int,
    /// `'YYYY-MM-DD'`.
    Date,
    /// `'YYYY-MM-DD HH:MM:SS'`.
    DateTime,
}

/// Days from 1970-01-01 of a date qcache parsed (`analysis::slices::days_from_civil`;
/// years 1000–9999, checked before).
fn days_from_civil(y: i128, m: i128, d: i128) -> i128 {
    i128::from(crate::analysis::slices::days_from_civil(
        y as i64, m as u32, d as u32,
    ))
}

/// The date of a day count from 1970-01-01 (`analysis::slices::civil_from_days`); a count
/// beyond any date a DATETIME holds is clamped, and its text then differs from the stored
/// bytes, which refuses the patch.
fn civil_from_days(z: i128) -> (i128, i128, i128) {
    let z = z.clamp(-(1 << 40), 1 << 40) as i64;
    let (y, m, d) = crate::analysis::slices::civil_from_days(z);
    (y.into(), m.into(), d.into())
}

/// A canonical temporal literal, exactly `YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS`, a real
/// calendar date of years 1000 to 9999: its value in seconds from 1970-01-01 (so that one
/// less is the second before, whatever the date) and its kind. Every other spelling (no
/// zero padding, other separators, fractions, zero or invalid dates the server may
/// convert with a warning or under its sql_mode) is None: refused.
pub fn temporal(s: &str) -> Option<(i128, Lit)> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i128> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0i128, |n, c| n * 10 + i128::from(c - b'0')))
    };
    let (kind, time) = match b.len() {
        10 => (Lit::Date, 0),
        19 if b[10] == b' ' && b[13] == b':' && b[16] == b':' => {
            let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
            if h > 23 || mi > 59 || se > 59 {
                return None;
            }
            (Lit::DateTime, h * 3600 + mi * 60 + se)
        }
        _ => return None,
    };
    if b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1000..=9999).contains(&y) || !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if d > days_in[(m - 1) as usize] {
        return None;
    }
    Some((days_from_civil(y, m, d) * DAY + time, kind))
}

/// A temporal value as the server writes a DATE (`time`: false) or a DATETIME(0).
fn temporal_text(v: i128, time: bool) -> String {
    let (y, m, d) = civil_from_days(v.div_euclid(DAY));
    let t = v.rem_euclid(DAY);
    if time {
        format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
            t / 3600,
            t / 60 % 60,
            t % 60
        )
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// A parameter of a COM_STMT_EXECUTE as the server receives it: its value and, what decides
/// how the server compares and stores it, its type. A prepared statement's `?` stands for
/// one ([`read_shape_bound`], [`insert_rows_bound`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Param {
    /// The NULL bit set, or the NULL type.
    Null,
    /// An integer type (TINY, SHORT, INT24, LONG, LONGLONG), its UNSIGNED flag applied:
    /// compared with an integer column as an integer, stored into one exactly.
    Int(i128),
    /// A string type (VARCHAR, VAR_STRING, STRING), valid UTF-8: compared and stored as the
    /// same text written as a string literal would be.
    Str(String),
    /// A DECIMAL or NEWDECIMAL, as its text: stored as the same number written as a
    /// literal would be.
    Dec(String),
    /// A DATE (`date`: true) or DATETIME, a real calendar date of years 1000 to 9999:
    /// seconds from 1970-01-01 ([`temporal`]) and microseconds.
    Time { secs: i128, micros: u32, date: bool },
    /// Anything else (FLOAT, DOUBLE, TIME, TIMESTAMP, YEAR, blobs, a zero or invalid date,
    /// a string that is not UTF-8): refused wherever the shape uses it.
    Other,
}

/// The parameters of an execute (`n` of them, as the statement's prepare announced), in
/// order; None when the values cannot be read as their types say.
pub fn bound_params(p: &ExecuteParams<'_>, n: usize) -> Option<Vec<Param>> {
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return Some(out);
    }
    let types = p.types?;
    let mut v = p.values;
    for i in 0..n {
        if p.null_bitmap.get(i / 8)? & (1 << (i % 8)) != 0 {
            out.push(Param::Null);
            continue;
        }
        let ty = *types.get(2 * i)?;
        let unsigned = types.get(2 * i + 1)? & 0x80 != 0;
        let param = match ty {
            0x01 | 0x02 | 0x03 | 0x08 | 0x09 => {
                let len = match ty {
                    0x01 => 1,
                    0x02 => 2,
                    0x08 => 8,
                    _ => 4,
                };
                let b = take(&mut v, len)?;
                let fill = if !unsigned && b[len - 1] & 0x80 != 0 {
                    0xff
                } else {
                    0
                };
                let mut full = [fill; 16];
                full[..len].copy_from_slice(b);
                Param::Int(i128::from_le_bytes(full))
            }
            0x0d => take(&mut v, 2).map(|_| Param::Other)?,
            0x04 => take(&mut v, 4).map(|_| Param::Other)?,
            0x05 => take(&mut v, 8).map(|_| Param::Other)?,
            0x06 => Param::Null,
            0x07 | 0x0a | 0x0b | 0x0c => {
                let len = usize::from(*v.first()?);
                take(&mut v, 1)?;
                let b = take(&mut v, len)?;
                match ty {
                    0x0a | 0x0c => binary_time(b, ty == 0x0a).unwrap_or(Param::Other),
                    _ => Param::Other,
                }
            }
            0x00 | 0x0f | 0x10 | 0xf5..=0xff => {
                let (body, used) = read_lenenc_str(v)?;
                take(&mut v, used)?;
                match (ty, std::str::from_utf8(body)) {
                    (0x0f | 0xfd | 0xfe, Ok(s)) => Param::Str(s.to_string()),
                    (0x00 | 0xf6, Ok(s)) => Param::Dec(s.to_string()),
                    _ => Param::Other,
                }
            }
            _ => return None,
        };
        out.push(param);
    }
    Some(out)
}

/// The first `len` bytes of `v`, which moves past them.
fn take<'a>(v: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let b = v.get(..len)?;
    *v = &v[len..];
    Some(b)
}

/// A binary DATE (`date`) or DATETIME parameter's value (4, 7 or 11 bytes: year, month,
/// day, hour, minute, second, microseconds); None for a zero or invalid date, a year
/// outside 1000–9999, or a DATE carrying a time.
fn binary_time(b: &[u8], date: bool) -> Option<Param> {
    let t = crate::analysis::params::BinaryTemporal::read(b)?;
    if (date && t.len != 4) || t.micros > 999_999 {
        return None;
    }
    let (secs, _) = temporal(&t.seconds_text())?;
    Some(Param::Time {
        secs,
        micros: t.micros,
        date,
    })
}

/// The `?` of a prepared statement's text, by where each starts (text order is parameter
/// order), and the values bound to them; no `?` is allowed without them.
struct Binds<'a> {
    at: Vec<Location>,
    params: Option<&'a [Param]>,
}

impl Binds<'_> {
    /// The parameter a `?` stands for; None for any other expression.
    fn param(&self, e: &Expr) -> Option<&Param> {
        let Expr::Value(v) = e else { return None };
        let Value::Placeholder(p) = &v.value else {
            return None;
        };
        let i = self.at.iter().position(|l| *l == v.span.start)?;
        (p == "?").then(|| self.params?.get(i)).flatten()
    }
}

/// What a column the shape uses holds, from the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer column of `min..=max`.
    Int { min: i128, max: i128 },
    /// A DATE column: whole days.
    Date,
    /// A DATETIME column without fractional seconds (with them, `col > '…'` keeps rows the
    /// whole-second arithmetic here would not: refused).
    DateTime,
    /// A DECIMAL(precision, scale) column: its values held in units of its last digit.
    Dec {
        precision: u8,
        scale: u8,
        unsigned: bool,
    },
}

/// The GROUP BY: one plain column, or `DATE(col)` of a DATE or DATETIME column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub column: String,
    /// `DATE(col)`: a DATETIME's value truncated to its day.
    pub date_of: bool,
}

impl Group {
    /// The group's key of a row whose column holds `v` (NULL's key is NULL).
    fn key(&self, v: Option<i128>) -> Option<i128> {
        v.map(|v| {
            if self.date_of {
                v - v.rem_euclid(DAY)
            } else {
                v
            }
        })
    }
}

/// How a result column's values are held and written: integers (COUNT, MIN/MAX, an
/// integer key), a DECIMAL of this many decimals, in units of its last digit (SUM: of
/// integers 0, of a DECIMAL column its scale), a DATE or a DATETIME(0) key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    Int,
    Dec(u8),
    Date,
    DateTime,
    /// A joined table's column ([`Agg::Joined`]): its bytes are carried as the server sent
    /// them, never read as a value (held as NULL among the values).
    Opaque,
}

/// A DECIMAL of `scale` decimals as the server writes it: `-`, the integer digits (at
/// least `0`), then `.` and exactly `scale` digits.
fn decimal_text(v: i128, scale: u8) -> String {
    if scale == 0 {
        return v.to_string();
    }
    let digits = v.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if v < 0 { "-" } else { "" })
}

/// A DECIMAL's text with exactly `scale` decimals (none, and no point, for 0), in units of
/// its last digit; None for any other text.
fn decimal_scaled(s: &[u8], scale: u8) -> Option<i128> {
    if scale == 0 {
        return decimal(s);
    }
    let (int, frac) = std::str::from_utf8(s).ok()?.split_once('.')?;
    let digits = int.strip_prefix('-').unwrap_or(int);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || frac.len() != usize::from(scale)
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let n: i128 = format!("{int}{frac}").parse().ok()?;
    // "-0.00" is no value the server writes.
    (n != 0 || !int.starts_with('-')).then_some(n)
}

/// A numeric literal of an INSERT into a DECIMAL(precision, scale) column, in units of its
/// last digit: `-?digits(.digits)?`, no more decimals than the column has (the server
/// rounds those, with a note), no more integer digits than it holds, no sign into an
/// UNSIGNED one. Else the refusal.
fn decimal_literal(s: &str, precision: u8, scale: u8, unsigned: bool) -> Result<i128, Refusal> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let all_digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty()
        || !all_digits(int)
        || !all_digits(frac)
        || (body.contains('.') && frac.is_empty())
    {
        return Err(Refusal::Value);
    }
    if frac.len() > usize::from(scale) {
        return Err(Refusal::Value);
    }
    let int = int.trim_start_matches('0');
    if int.len() > usize::from(precision - scale) || (neg && unsigned) {
        return Err(Refusal::Range);
    }
    let units = format!("{int}{frac:0<width$}", width = usize::from(scale));
    let n: i128 = if units.is_empty() {
        0
    } else {
        units.parse().map_err(|_| Refusal::Range)?
    };
    Ok(if neg { -n } else { n })
}

/// Why a read or a write is not patched: the caller invalidates as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A token the shapes do not use (a keyword, comment, operator, quote); a `?` of a
    /// text statement, or not as many `?` as values bound.
    Token,
    /// sqlparser could not read it, or it is not one statement.
    Unparsable,
    /// Not a plain SELECT of one table (joins, subqueries, DISTINCT, ORDER BY, HAVING, a
    /// GROUP BY of several expressions, WITH ROLLUP or another function than `DATE()`, …).
    NotSimple,
    /// A select item other than COUNT(*), COUNT(col), SUM(col), MIN(col), MAX(col) and
    /// the GROUP BY expression; or a grouped select list without that expression.
    Aggregate,
    /// A WHERE other than a conjunction of `col = x`, `col IN (x, …)`, `col < x`, `<=`,
    /// `>`, `>=`, `col BETWEEN a AND b`, with integer or canonical temporal literals.
    Predicate,
    /// A column the table does not have, or whose type the use does not allow (SUM of
    /// other than integers and DECIMALs, MIN/MAX or GROUP BY of other than an integer
    /// type, a DATE or a DATETIME(0), a literal of another kind than the column's).
    Column,
    /// A column the server fills itself (AUTO_INCREMENT).
    Generated,
    /// Not a plain `INSERT … VALUES` (IGNORE, REPLACE, ON DUPLICATE KEY, SET, SELECT, …).
    NotInsert,
    /// A value that is not a literal, or not one the used column holds exactly (an
    /// integer, a canonical date or datetime, a number with no more decimals than the
    /// DECIMAL's scale).
    Value,
    /// A column the read uses that the INSERT leaves to its default.
    Omitted,
    /// A number outside the column's range, or NULL into a NOT NULL column: the server
    /// converts or refuses it.
    Range,
    /// The stored result is not one the read's shape gives (one row, or groups in key
    /// order), or not in the encoding qcache would write.
    Result,
    /// The arithmetic left `i128`, or a sum the result's DECIMAL length does not hold
    /// (never for real data; refused rather than wrapped).
    Overflow,
    /// The reading session's `sql_select_limit` is (or may be) not the default: the server
    /// cut its result after that many rows, and a new group could land past the cut.
    SelectLimit,
    /// The reading session's `character_set_results` is not known to send numbers and
    /// dates as ASCII text (`ucs2`, `utf16`, `utf32`, `filename`, …): a patch would write
    /// them as ASCII where the server converts them.
    ResultsCharset,
    /// The reading session has a setting under which the server refuses a read once its
    /// table grew (`max_join_size`, `sql_big_selects = 0`, …): after inserts the server may
    /// answer ERROR 1104 where a patch would answer rows.
    ReadLimit,
    /// A row the WHERE keeps joins a row of another table that the cached result does not
    /// show to exist (an empty join): whether it joins is not known.
    Unjoined,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Token => "token",
            Refusal::Unparsable => "unparsable",
            Refusal::NotSimple => "not_simple",
            Refusal::Aggregate => "aggregate",
            Refusal::Predicate => "predicate",
            Refusal::Column => "column",
            Refusal::Generated => "generated",
            Refusal::NotInsert => "not_insert",
            Refusal::Value => "value",
            Refusal::Omitted => "omitted",
            Refusal::Range => "range",
            Refusal::Result => "result",
            Refusal::Overflow => "overflow",
            Refusal::SelectLimit => "select_limit",
            Refusal::ResultsCharset => "results_charset",
            Refusal::ReadLimit => "read_limit",
            Refusal::Unjoined => "unjoined",
        }
    }
}

/// What a reading session does to its results, beyond the statement: [`session_rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRows {
    /// Its `sql_select_limit` is (or may be) not the default (`SET sql_select_limit = 1`,
    /// inherited from the global, or `DEFAULT` after either).
    pub select_limited: bool,
    /// Its `character_set_results` sends numbers and dates as ASCII text
    /// (`policy::context::results_ascii`).
    pub results_ascii: bool,
    /// A setting may refuse its reads once their tables grow (`policy::context::READ_LIMITS`:
    /// `max_join_size`, `sql_big_selects`, …).
    pub reads_limited: bool,
}

/// Whether a result read by a session can carry a recipe, by what the session does to its
/// rows. Under a select limit the server stops sending rows at the limit, so the stored
/// groups may be only the first ones, and a patch adding a group (before the cut or after
/// it) would send one row more than the server, or the wrong ones. A patch writes its values
/// as ASCII, where under `filename` the server sends `-5` as `@002d5`, and under `ucs2` `1`
/// as `0x0031` (a grouped result of no rows has no digits that could refuse it). Under a
/// read limit the server refuses the read once the inserts grew its estimate past the limit
/// (ERROR 1104 under `max_join_size`), where the patched entry would answer rows.
pub fn session_rows(s: SessionRows) -> Result<(), Refusal> {
    if s.select_limited {
        return Err(Refusal::SelectLimit);
    }
    if !s.results_ascii {
        return Err(Refusal::ResultsCharset);
    }
    if s.reads_limited {
        return Err(Refusal::ReadLimit);
    }
    Ok(())
}

/// One select item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agg {
    CountStar,
    Count(String),
    Sum(String),
    /// Patched under inserts only: a smaller new value replaces it (so does any value when
    /// no row had one: MIN of nothing is NULL).
    Min(String),
    /// As [`Agg::Min`], a larger value replacing it.
    Max(String),
    /// The GROUP BY expression itself, in the select list.
    Key,
    /// A column of the joined table (`p.name`): every row of the result joins the same
    /// row of it, so it shows that row's value, carried as the server sent it.
    Joined(String),
}

impl Agg {
    /// The column the aggregate reads, if any (the key's is the [`Group`]'s).
    pub fn column(&self) -> Option<&String> {
        match self {
            Agg::CountStar | Agg::Key | Agg::Joined(_) => None,
            Agg::Count(c) | Agg::Sum(c) | Agg::Min(c) | Agg::Max(c) => Some(c),
        }
    }
}

/// What one conjunct of the WHERE asks of its column's value (never met by NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// One of the listed values (`col = n`, `col IN (n, …)`): integers, or temporal
    /// values as seconds ([`temporal`]).
    In(Vec<i128>),
    /// Inside `lo..=hi`, a missing bound unbounded: `col >= n` is `lo: n`, `col > n` is
    /// `lo: n + 1` (the column holds integers, or whole seconds: DATETIME(0) and DATE
    /// only), `col BETWEEN a AND b` is both (empty when `a > b`, as on the server).
    Range { lo: Option<i128>, hi: Option<i128> },
}

impl Cond {
    /// Whether a row whose column holds `v` is kept; NULL never is.
    pub fn keeps(&self, v: Option<i128>) -> bool {
        let Some(v) = v else { return false };
        match self {
            Cond::In(set) => set.contains(&v),
            Cond::Range { lo, hi } => lo.is_none_or(|lo| lo <= v) && hi.is_none_or(|hi| v <= hi),
        }
    }
}

/// A recipe's WHERE as a write's rows are tested against it before its entry is looked up
/// (`cache::patches`): per conjunct, the slot of its column among the columns its table's
/// summaries read, and its condition. A conjunct whose column got no slot is left out,
/// which only widens what may match: the test fails closed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    conds: Box<[(usize, Cond)]>,
}

impl Summary {
    /// The summary of `filter` (a recipe's), `slot` giving each column's slot (None: no
    /// slot left, the conjunct is left out).
    pub fn of(filter: &[(String, Cond)], mut slot: impl FnMut(&str) -> Option<usize>) -> Summary {
        Summary {
            conds: filter
                .iter()
                .filter_map(|(c, cond)| Some((slot(c)?, cond.clone())))
                .collect(),
        }
    }

    /// Whether a write of `rows` rows may change the result: some row meets every
    /// conjunct. `values[slot]` holds each row's value in that slot's column
    /// ([`InsertRows::column_values`]); None (a value qcache cannot compare exactly, such
    /// as a string under a collation, or a slot past the end) meets every conjunct on it.
    /// When every value is known, exactly [`Recipe::keeps_any`]; else "may".
    pub fn may_match(&self, values: &[Option<Vec<Option<i128>>>], rows: usize) -> bool {
        (0..rows).any(|r| {
            self.conds
                .iter()
                .all(|(slot, cond)| match values.get(*slot) {
                    Some(Some(v)) => v.get(r).is_none_or(|x| cond.keeps(*x)),
                    _ => true,
                })
        })
    }

    /// Whether nothing is tested (no WHERE, or no conjunct got a slot): every row may match.
    pub fn is_any(&self) -> bool {
        self.conds.is_empty()
    }
}

/// A patchable SELECT as written: its table (not yet qualified), select list and filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadShape {
    pub table: TableRef,
    pub aggs: Vec<Agg>,
    /// Conjunction: each column's value must meet its condition.
    pub filter: Vec<(String, Cond)>,
    /// Per conjunct of `filter`, the kind of its literals (checked against the column's).
    pub lits: Vec<Lit>,
    pub group: Option<Group>,
    /// The joined table, when the read joins one pinned row of another table.
    pub join: Option<JoinShape>,
    /// The same read the other way round (the second table aggregated, the first joined):
    /// which one is, the catalog says ([`ReadShape::bind_with`] refuses the other).
    pub other: Option<Box<ReadShape>>,
}

/// The joined table of a [`ReadShape`]: the table, and its columns each equated with a
/// column of the aggregated table (`p.id = i.product_id` is `("id", "product_id")`), which
/// the WHERE pins to one value each (in the shape's filter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinShape {
    pub table: TableRef,
    pub on: Vec<(String, String)>,
}

/// The joined table of a [`Recipe`]: qualified, lower-cased, and its primary key's
/// columns each equated with a column of the aggregated table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    pub schema: String,
    pub table: String,
    pub on: Vec<(String, String)>,
}

/// What the catalog says of a joined table: its name, columns and primary key's columns
/// (the unique NOT NULL key it shows as one), lower-cased.
pub struct JoinedTable<'a> {
    pub q: (String, String),
    pub columns: &'a [(String, ColumnInfo)],
    pub key: &'a [String],
}

/// How to patch one entry: the shape bound to its table's columns, and the protocol its
/// bytes are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// Qualified, lower-cased.
    pub schema: String,
    pub table: String,
    pub aggs: Vec<Agg>,
    /// Per aggregate, for MIN/MAX: the integer type of its column, which its result column
    /// must carry (checked against the stored metadata before a patch).
    pub ints: Vec<Option<IntType>>,
    /// Per aggregate, for SUM: the decimals of its result (its DECIMAL column's scale, 0
    /// for an integer column), which its result column must carry.
    pub scales: Vec<u8>,
    /// Per aggregate, for MIN/MAX: how its column's values are held and written (an
    /// integer, of the type in `ints`; a DECIMAL of its scale; a DATE; a DATETIME(0)),
    /// which its result column must carry. Absent: an integer.
    pub minmax: Vec<Option<Repr>>,
    pub filter: Vec<(String, Cond)>,
    /// Per conjunct of `filter`, its column's kind (how the verifier writes its bounds).
    pub kinds: Vec<Kind>,
    pub group: Option<Group>,
    /// The key's result column: its representation, and its integer type when it is one.
    pub key: Option<(Repr, Option<IntType>)>,
    /// Binary protocol rows (an execute's result) rather than text rows.
    pub binary: bool,
    /// The statement's digest: what the verifier turns off when a patch proved wrong.
    pub digest: u64,
    /// The statement's text (a text read's, or the prepared SQL): what the verifier reads.
    pub sql: String,
    /// The one row of another table every row of the result joins (`p.name` shows its
    /// values): its table and key. Writes to it invalidate; inserts patch only while the
    /// result shows that the row exists.
    pub join: Option<Join>,
}

/// An INSERT as written: its table, column list (None: the table's order) and rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertRows {
    pub table: TableRef,
    pub columns: Option<Vec<String>>,
    pub rows: Vec<Vec<Val>>,
}

/// A literal of an INSERT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    Int(i128),
    Null,
    /// A string: a canonical temporal literal where the read uses a DATE or DATETIME
    /// column, and fine in a column it does not use.
    Str(String),
    /// A number with a fraction (or an exponent), as written, its sign included: exact
    /// where the read uses a DECIMAL column, and fine in a column it does not use.
    Num(String),
    /// A DATE or DATETIME parameter ([`Param::Time`]): exact into a DATETIME(0) column
    /// when it has no fraction of a second, into a DATE one when it is also a midnight.
    Time {
        secs: i128,
        micros: u32,
    },
    /// A parameter of another type ([`Param::Other`]): fine in a column the read does
    /// not use.
    Other,
}

/// The tokens the shapes are made of; anything else refuses the statement. Words are
/// judged after the parse ([`words_allowed`]). A `?` only with `params` (a prepared
/// statement's), as many as there are `?`: where each starts, in text order.
fn lex(sql: &str, params: Option<&[Param]>) -> Result<(Vec<Token>, Vec<Location>), Refusal> {
    // sqlparser reads some comments (executable ones among them) as text: any comment
    // opener refuses, even inside a string (a lost patch, never a wrong one).
    if sql.contains('\\') || sql.contains("/*") || sql.contains('#') || sql.contains("--") {
        return Err(Refusal::Token);
    }
    let spans = Tokenizer::new(&MySqlDialect {}, sql)
        .tokenize_with_location()
        .map_err(|_| Refusal::Token)?;
    let mut at = Vec::new();
    for t in &spans {
        let ok = match &t.token {
            Token::Placeholder(p) if p == "?" && params.is_some() => {
                at.push(t.span.start);
                true
            }
            Token::Word(w) => matches!(w.quote_style, None | Some('`')),
            Token::Number(_, false) => true,
            Token::SingleQuotedString(_) => true,
            Token::Comma
            | Token::LParen
            | Token::RParen
            | Token::Period
            | Token::Mul
            | Token::Minus
            | Token::Eq
            | Token::Lt
            | Token::LtEq
            | Token::Gt
            | Token::GtEq => true,
            Token::Whitespace(Whitespace::Space | Whitespace::Newline | Whitespace::Tab) => true,
            _ => false,
        };
        if !ok {
            return Err(Refusal::Token);
        }
    }
    if params.is_some_and(|p| p.len() != at.len()) {
        return Err(Refusal::Token);
    }
    Ok((spans.into_iter().map(|t| t.token).collect(), at))
}

/// Every unquoted keyword is one the shapes use, or a name the parsed shape holds (a
/// column called `id` or `status`): a keyword the shape does not account for (`OR`, `XOR`,
/// `DIV`, `GROUP`, `DEFAULT`, `IGNORE`, …) refuses the statement, whatever sqlparser made
/// of it.
/// `join`: a two-table read, whose `JOIN`, `INNER` and `ON` are the shape's.
fn words_allowed(tokens: &[Token], names: &[String], join: bool) -> Result<(), Refusal> {
    for t in tokens {
        let Token::Word(w) = t else { continue };
        if w.quote_style.is_some() || w.keyword == Keyword::NoKeyword {
            continue;
        }
        let used = matches!(
            w.keyword,
            Keyword::SELECT
                | Keyword::COUNT
                | Keyword::SUM
                | Keyword::MIN
                | Keyword::MAX
                | Keyword::FROM
                | Keyword::WHERE
                | Keyword::AND
                | Keyword::IN
                | Keyword::BETWEEN
                | Keyword::AS
                | Keyword::INSERT
                | Keyword::INTO
                | Keyword::VALUES
                | Keyword::VALUE
                | Keyword::NULL
                | Keyword::GROUP
                | Keyword::BY
                | Keyword::DATE
        ) || (join && matches!(w.keyword, Keyword::JOIN | Keyword::INNER | Keyword::ON));
        if !used && !names.iter().any(|n| n.eq_ignore_ascii_case(&w.value)) {
            return Err(Refusal::Token);
        }
    }
    Ok(())
}

fn parse_one<'a>(
    sql: &str,
    params: Option<&'a [Param]>,
) -> Result<(Statement, Vec<Token>, Binds<'a>), Refusal> {
    let (tokens, at) = lex(sql, params)?;
    let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).map_err(|_| Refusal::Unparsable)?;
    if stmts.len() != 1 {
        return Err(Refusal::Unparsable);
    }
    Ok((stmts.remove(0), tokens, Binds { at, params }))
}

fn name_parts(name: &sqlparser::ast::ObjectName) -> Vec<String> {
    name.0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.to_lowercase()))
        .collect()
}

/// An integer literal, possibly negated once: `5`, `-5`. Not `5.0`, `1e3`, `'5'`, `+5`.
fn int_literal(e: &Expr) -> Option<i128> {
    let digits = |v: &Value| match v {
        Value::Number(s, false) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse::<i128>().ok()
        }
        _ => None,
    };
    match e {
        Expr::Value(v) => digits(&v.value),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match &**expr {
            Expr::Value(v) => digits(&v.value).map(|n| -n),
            _ => None,
        },
        _ => None,
    }
}

/// A bare column name (lower-cased). Qualified names are refused in this first cut.
fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.to_lowercase()),
        _ => None,
    }
}

fn aggregate(e: &Expr) -> Result<Agg, Refusal> {
    let Expr::Function(f) = e else {
        return Err(Refusal::Aggregate);
    };
    let name = match f.name.0.as_slice() {
        [p] => p
            .as_ident()
            .filter(|i| i.quote_style.is_none())
            .map(|i| i.value.to_ascii_lowercase()),
        _ => None,
    };
    let FunctionArguments::List(l) = &f.args else {
        return Err(Refusal::Aggregate);
    };
    if l.duplicate_treatment.is_some()
        || !l.clauses.is_empty()
        || f.filter.is_some()
        || f.over.is_some()
        || !f.within_group.is_empty()
        || !matches!(f.parameters, FunctionArguments::None)
    {
        return Err(Refusal::Aggregate);
    }
    let [arg] = l.args.as_slice() else {
        return Err(Refusal::Aggregate);
    };
    match (name.as_deref(), arg) {
        (Some("count"), FunctionArg::Unnamed(FunctionArgExpr::Wildcard)) => Ok(Agg::CountStar),
        (Some("count"), FunctionArg::Unnamed(FunctionArgExpr::Expr(c))) => {
            column_name(c).map(Agg::Count).ok_or(Refusal::Aggregate)
        }
        (Some("sum"), FunctionArg::Unnamed(FunctionArgExpr::Expr(c))) => {
            column_name(c).map(Agg::Sum).ok_or(Refusal::Aggregate)
        }
        (Some("min"), FunctionArg::Unnamed(FunctionArgExpr::Expr(c))) => {
            column_name(c).map(Agg::Min).ok_or(Refusal::Aggregate)
        }
        (Some("max"), FunctionArg::Unnamed(FunctionArgExpr::Expr(c))) => {
            column_name(c).map(Agg::Max).ok_or(Refusal::Aggregate)
        }
        _ => Err(Refusal::Aggregate),
    }
}

/// An integer literal a range compares with: inside BIGINT or BIGINT UNSIGNED, where the
/// server reads it as an integer (past them it is a DECIMAL; refused rather than reasoned).
fn bound_literal(e: &Expr) -> Option<i128> {
    int_literal(e).filter(|n| (i64::MIN as i128..=u64::MAX as i128).contains(n))
}

/// `col op n` as a range of the column's integers, `op` read with the column on the left.
fn range(op: &BinaryOperator, n: i128) -> Option<Cond> {
    let (lo, hi) = match op {
        BinaryOperator::Lt => (None, Some(n - 1)),
        BinaryOperator::LtEq => (None, Some(n)),
        BinaryOperator::Gt => (Some(n + 1), None),
        BinaryOperator::GtEq => (Some(n), None),
        _ => return None,
    };
    Some(Cond::Range { lo, hi })
}

/// `n op col` as `col op' n`.
fn flipped(op: &BinaryOperator) -> Option<BinaryOperator> {
    Some(match op {
        BinaryOperator::Lt => BinaryOperator::Gt,
        BinaryOperator::LtEq => BinaryOperator::GtEq,
        BinaryOperator::Gt => BinaryOperator::Lt,
        BinaryOperator::GtEq => BinaryOperator::LtEq,
        _ => return None,
    })
}

/// A literal a condition compares with: an integer (`bounded`: inside BIGINT or BIGINT
/// UNSIGNED, as a range needs) or a canonical temporal string, as seconds ([`temporal`]);
/// or a `?` bound to a value the server compares as one of those: an integer type, a
/// string (read as the literal would be), a DATE or a DATETIME of whole seconds (a
/// DATETIME at midnight compares as its date does, with a DATE or a DATETIME column).
/// NULL, fractions of seconds, numbers of other types: None.
fn literal(e: &Expr, bounded: bool, b: &Binds) -> Option<(i128, Lit)> {
    if let Some(p) = b.param(e) {
        return match p {
            Param::Int(n) => Some((*n, Lit::Int)),
            Param::Str(s) => temporal(s),
            Param::Time {
                secs, micros: 0, ..
            } if secs.rem_euclid(DAY) == 0 => Some((*secs, Lit::Date)),
            Param::Time {
                secs,
                micros: 0,
                date: false,
            } => Some((*secs, Lit::DateTime)),
            _ => None,
        };
    }
    let n = if bounded {
        bound_literal(e)
    } else {
        int_literal(e)
    };
    if let Some(n) = n {
        return Some((n, Lit::Int));
    }
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => temporal(s),
            _ => None,
        },
        _ => None,
    }
}

fn conjunct(e: &Expr, b: &Binds) -> Result<(String, Cond, Lit), Refusal> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (column_name(left), column_name(right)) {
            (Some(c), None) => literal(right, false, b).map(|(n, k)| (c, Cond::In(vec![n]), k)),
            (None, Some(c)) => literal(left, false, b).map(|(n, k)| (c, Cond::In(vec![n]), k)),
            _ => None,
        },
        Expr::BinaryOp { left, op, right } => match (column_name(left), column_name(right)) {
            (Some(c), None) => {
                literal(right, true, b).and_then(|(n, k)| range(op, n).map(|r| (c, r, k)))
            }
            (None, Some(c)) => literal(left, true, b)
                .zip(flipped(op))
                .and_then(|((n, k), op)| range(&op, n).map(|r| (c, r, k))),
            _ => None,
        },
        Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } => column_name(expr)
            .zip(literal(low, true, b).zip(literal(high, true, b)))
            .filter(|(_, ((_, a), (_, b)))| a == b)
            .map(|(c, ((lo, k), (hi, _)))| {
                (
                    c,
                    Cond::Range {
                        lo: Some(lo),
                        hi: Some(hi),
                    },
                    k,
                )
            }),
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            global: false,
        } => {
            let c = column_name(expr);
            let ns: Option<Vec<(i128, Lit)>> = list.iter().map(|e| literal(e, false, b)).collect();
            c.zip(ns)
                .filter(|(_, ns)| !ns.is_empty() && ns.iter().all(|(_, k)| *k == ns[0].1))
                .map(|(c, ns)| {
                    let k = ns[0].1;
                    (c, Cond::In(ns.into_iter().map(|(n, _)| n).collect()), k)
                })
        }
        Expr::Nested(inner) => return conjunct(inner, b),
        _ => None,
    }
    .ok_or(Refusal::Predicate)
}

/// The GROUP BY expression: a bare column, or `DATE(col)`.
fn group_expr(e: &Expr) -> Option<Group> {
    if let Some(column) = column_name(e) {
        return Some(Group {
            column,
            date_of: false,
        });
    }
    let c = date_arg(e)?;
    column_name(c).map(|column| Group {
        column,
        date_of: true,
    })
}

/// Recognises a patchable SELECT (module docs), before its table is known.
pub fn read_shape(sql: &str) -> Result<ReadShape, Refusal> {
    read_shape_bound(sql, None)
}

/// [`read_shape`] of a prepared statement's text, its `?` bound to `params` (an execute's,
/// [`bound_params`]): each compared as its value and type say ([`literal`]); `None` for a
/// text statement, where a `?` refuses.
pub fn read_shape_bound(sql: &str, params: Option<&[Param]>) -> Result<ReadShape, Refusal> {
    let (stmt, tokens, binds) = parse_one(sql, params)?;
    let Statement::Query(q) = stmt else {
        return Err(Refusal::NotSimple);
    };
    if q.with.is_some()
        || q.order_by.is_some()
        || q.limit_clause.is_some()
        || q.fetch.is_some()
        || !q.locks.is_empty()
    {
        return Err(Refusal::NotSimple);
    }
    let SetExpr::Select(sel) = &*q.body else {
        return Err(Refusal::NotSimple);
    };
    if sel.distinct.is_some() || sel.top.is_some() || sel.into.is_some() || sel.having.is_some() {
        return Err(Refusal::NotSimple);
    }
    let from = from_tables(sel)?;
    let [(a_ref, a_names), (b_ref, b_names)] = match from.as_slice() {
        [(table, names)] => {
            return select_shape(sel, &tokens, &binds, table.clone(), names.clone(), None)
        }
        [a, b] => [a, b],
        _ => return Err(Refusal::NotSimple),
    };
    // Each table is named in the other's columns by its alias, or by its name without one
    // (the server refuses the same name twice: "Not unique table/alias").
    let qual = |r: &TableRef, names: &[String]| names.last().cloned().unwrap_or(r.name.clone());
    let (qa, qb) = (qual(a_ref, a_names), qual(b_ref, b_names));
    if qa.eq_ignore_ascii_case(&qb) {
        return Err(Refusal::NotSimple);
    }
    // Which one is aggregated is not written: each way round is read, the aggregated
    // table's columns unqualified (an unqualified name is the aggregated table's, or the
    // server refuses it as ambiguous or unknown, or the bind finds no such column there).
    let oriented = |t: (&TableRef, &Vec<String>, &str), p: (&TableRef, &Vec<String>, &str)| {
        let mut s = (**sel).clone();
        unqualify(&mut s, t.2);
        let mut names = t.1.clone();
        names.extend(p.1.iter().cloned());
        select_shape(
            &s,
            &tokens,
            &binds,
            t.0.clone(),
            names,
            Some((p.0.clone(), p.2.to_string())),
        )
    };
    let ab = oriented((a_ref, a_names, qa.as_str()), (b_ref, b_names, qb.as_str()));
    let ba = oriented((b_ref, b_names, qb.as_str()), (a_ref, a_names, qa.as_str()));
    match (ab, ba) {
        (Ok(mut s), Ok(o)) => {
            s.other = Some(Box::new(o));
            Ok(s)
        }
        (Ok(s), Err(_)) | (Err(_), Ok(s)) => Ok(s),
        (Err(e), Err(_)) => Err(e),
    }
}

/// The FROM's tables: one, or two joined by a plain (INNER) JOIN, with its ON or none, or
/// by a comma; each with its names (its name's parts, then its alias).
fn from_tables(sel: &Select) -> Result<Vec<(TableRef, Vec<String>)>, Refusal> {
    let plain = |f: &TableFactor| {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            with_hints,
            partitions,
            version: None,
            ..
        } = f
        else {
            return Err(Refusal::NotSimple);
        };
        if !with_hints.is_empty() || !partitions.is_empty() {
            return Err(Refusal::NotSimple);
        }
        if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
            return Err(Refusal::NotSimple);
        }
        let table = crate::analysis::table_ref_of(name).ok_or(Refusal::NotSimple)?;
        let mut names = name_parts(name);
        names.extend(alias.iter().map(|a| a.name.value.clone()));
        Ok((table, names))
    };
    let mut out = Vec::new();
    for f in &sel.from {
        out.push(plain(&f.relation)?);
        for j in &f.joins {
            let inner = match &j.join_operator {
                JoinOperator::Join(c) | JoinOperator::Inner(c) => {
                    matches!(c, JoinConstraint::On(_) | JoinConstraint::None)
                }
                _ => false,
            };
            if !inner || j.global {
                return Err(Refusal::NotSimple);
            }
            out.push(plain(&j.relation)?);
        }
    }
    if out.is_empty() || out.len() > 2 {
        return Err(Refusal::NotSimple);
    }
    Ok(out)
}

/// The ON condition of a two-table join written with JOIN, if any.
fn join_on(sel: &Select) -> Option<&Expr> {
    sel.from
        .iter()
        .flat_map(|f| &f.joins)
        .find_map(|j| match &j.join_operator {
            JoinOperator::Join(JoinConstraint::On(e))
            | JoinOperator::Inner(JoinConstraint::On(e)) => Some(e),
            _ => None,
        })
}

/// Every column qualified by `q` (the aggregated table's alias or name) made bare.
fn unqualify(sel: &mut Select, q: &str) {
    let _ = visit_expressions_mut(sel, |e| {
        let bare = match &*e {
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] if t.value.eq_ignore_ascii_case(q) => Some(c.clone()),
                _ => None,
            },
            _ => None,
        };
        if let Some(c) = bare {
            *e = Expr::Identifier(c);
        }
        ControlFlow::<()>::Continue(())
    });
}

/// A column of the joined table, qualified by `q` (its alias or name; lower-cased).
fn joined_column(e: &Expr, q: &str) -> Option<String> {
    match e {
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [t, c] if t.value.eq_ignore_ascii_case(q) => Some(c.value.to_lowercase()),
            _ => None,
        },
        Expr::Nested(inner) => joined_column(inner, q),
        _ => None,
    }
}

/// The join of a read ([`select_shape`]): `jt` the joined table, `q` what qualifies its
/// columns, `on` its columns equated with the aggregated table's, `pins` its columns equated
/// with values, which join the aggregated table's `filter` (and `lits`) through `on`.
#[allow(clippy::too_many_arguments)]
fn pinned_join(
    jt: TableRef,
    q: String,
    on: Vec<(String, String)>,
    pins: &[(String, i128, Lit)],
    filter: &mut Vec<(String, Cond)>,
    lits: &mut Vec<Lit>,
    aggs: &[Agg],
    names: &mut Vec<String>,
) -> Result<JoinShape, Refusal> {
    // Every joined row is the same one: each of its joined columns is equated once
    // with a column of the aggregated table, and pinned to one value, on its side
    // or on the other's (`p.id = 5` is `i.product_id = 5` once `p.id =
    // i.product_id`). That the joined columns are its primary key is the bind's.
    if on.is_empty() {
        return Err(Refusal::NotSimple);
    }
    for (i, (k, _)) in on.iter().enumerate() {
        if on[..i].iter().any(|(x, _)| x == k) {
            return Err(Refusal::NotSimple);
        }
    }
    for (k, n, lit) in pins {
        let (_, tc) = on.iter().find(|(x, _)| x == k).ok_or(Refusal::NotSimple)?;
        filter.push((tc.clone(), Cond::In(vec![*n])));
        lits.push(*lit);
    }
    let pinned = |tc: &str| {
        filter
            .iter()
            .any(|(c, cond)| c == tc && matches!(cond, Cond::In(v) if v.len() == 1))
    };
    if !on.iter().all(|(_, tc)| pinned(tc)) {
        return Err(Refusal::NotSimple);
    }
    names.push(q);
    names.extend(on.iter().flat_map(|(k, tc)| [k.clone(), tc.clone()]));
    names.extend(aggs.iter().filter_map(|a| match a {
        Agg::Joined(c) => Some(c.clone()),
        _ => None,
    }));
    Ok(JoinShape { table: jt, on })
}

/// The select list, WHERE and GROUP BY of a patchable SELECT of `table` (`names`: the
/// words naming the tables), joined to `join` (the joined table and what qualifies its
/// columns) when there is one: then the aggregated table's columns are bare, and a
/// conjunct of the ON or the WHERE is an equality of a joined column with a bare one
/// (the join), a joined column with a literal (a pin of the joined row), or a condition
/// on the aggregated table's columns as without a join.
fn select_shape(
    sel: &Select,
    tokens: &[Token],
    binds: &Binds,
    table: TableRef,
    mut names: Vec<String>,
    join: Option<(TableRef, String)>,
) -> Result<ReadShape, Refusal> {
    // One GROUP BY expression, no modifier (WITH ROLLUP adds rows), no ORDER BY (the
    // server sorts the groups by their key unless told otherwise: that order is kept).
    let group = match &sel.group_by {
        GroupByExpr::Expressions(g, m) if m.is_empty() => match g.as_slice() {
            [] => None,
            [e] => Some(group_expr(e).ok_or(Refusal::NotSimple)?),
            _ => return Err(Refusal::NotSimple),
        },
        _ => return Err(Refusal::NotSimple),
    };
    if sel.projection.is_empty() {
        return Err(Refusal::Aggregate);
    }
    let pq = join.as_ref().map(|(_, q)| q.as_str());
    // An item is an aggregate, the GROUP BY expression written the same way, or a column
    // of the joined table (one row's: the same in every row of the result).
    let item = |e: &Expr| {
        if let Some(c) = pq.and_then(|q| joined_column(e, q)) {
            return Ok(Agg::Joined(c));
        }
        match aggregate(e) {
            Err(_) if group.is_some() && group_expr(e) == group => Ok(Agg::Key),
            other => other,
        }
    };
    let aggs = sel
        .projection
        .iter()
        .map(|it| match it {
            SelectItem::UnnamedExpr(e) => item(e),
            SelectItem::ExprWithAlias { expr, alias } => {
                names.push(alias.value.clone());
                item(expr)
            }
            _ => Err(Refusal::Aggregate),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // A group's place among the others is its key's: a new group is placed by it.
    if group.is_some() && !aggs.contains(&Agg::Key) {
        return Err(Refusal::Aggregate);
    }
    let mut conj = Vec::new();
    if let Some(w) = &sel.selection {
        split_and(w, &mut conj);
    }
    if let Some(on) = join_on(sel) {
        split_and(on, &mut conj);
    }
    let mut filter = Vec::new();
    let mut lits = Vec::new();
    let mut on: Vec<(String, String)> = Vec::new();
    let mut pins: Vec<(String, i128, Lit)> = Vec::new();
    for c in conj {
        if let Some(q) = pq {
            if let Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } = c
            {
                let sides = [(&**left, &**right), (&**right, &**left)];
                if let Some((k, other)) = sides
                    .iter()
                    .find_map(|(l, r)| joined_column(l, q).map(|k| (k, *r)))
                {
                    if let Some(tc) = column_name(other) {
                        on.push((k, tc));
                    } else {
                        let (n, lit) = literal(other, false, binds).ok_or(Refusal::Predicate)?;
                        pins.push((k, n, lit));
                    }
                    continue;
                }
            }
        }
        let (col, cond, lit) = conjunct(c, binds)?;
        filter.push((col, cond));
        lits.push(lit);
    }
    let join = match join {
        None => None,
        Some((jt, q)) => Some(pinned_join(
            jt,
            q,
            on,
            &pins,
            &mut filter,
            &mut lits,
            &aggs,
            &mut names,
        )?),
    };
    names.extend(aggs.iter().filter_map(Agg::column).cloned());
    names.extend(filter.iter().map(|(c, _)| c.clone()));
    names.extend(group.iter().map(|g| g.column.clone()));
    words_allowed(tokens, &names, join.is_some())?;
    Ok(ReadShape {
        table,
        aggs,
        filter,
        lits,
        group,
        join,
        other: None,
    })
}

/// A column the shape uses, and what it holds: an integer, DATE or DATETIME(0) column the
/// server does not fill itself.
fn column_kind<'a>(
    columns: &'a [(String, ColumnInfo)],
    name: &str,
) -> Result<(Kind, &'a ColumnInfo), Refusal> {
    let (_, info) = columns
        .iter()
        .find(|(n, _)| n == name)
        .ok_or(Refusal::Column)?;
    let kind = match info.ty {
        ColType::Int { min, max } => Kind::Int { min, max },
        ColType::Temporal {
            date_only: true, ..
        } => Kind::Date,
        ColType::Temporal {
            date_only: false,
            fsp: 0,
        } => Kind::DateTime,
        ColType::Decimal {
            precision,
            scale,
            unsigned,
        } => Kind::Dec {
            precision,
            scale,
            unsigned,
        },
        _ => return Err(Refusal::Column),
    };
    if info.auto_increment {
        return Err(Refusal::Generated);
    }
    Ok((kind, info))
}

fn int_column<'a>(
    columns: &'a [(String, ColumnInfo)],
    name: &str,
) -> Result<&'a ColumnInfo, Refusal> {
    match column_kind(columns, name)? {
        (Kind::Int { .. }, info) => Ok(info),
        _ => Err(Refusal::Column),
    }
}

impl ReadShape {
    /// Binds the shape to its qualified table's columns (`columns`, the catalog's, names
    /// lower-cased): every column it names must be one the server does not fill itself;
    /// SUM of integer and DECIMAL columns, MIN and MAX of those and of DATE and DATETIME(0)
    /// ones, COUNT of any such column; a WHERE comparing an
    /// integer column with integers, a DATETIME(0) one with dates or datetimes, a DATE one
    /// with dates; a GROUP BY of an integer type's column, a DATE or DATETIME(0) one, or
    /// `DATE()` of one of those.
    pub fn bind(
        self,
        q: (String, String),
        columns: &[(String, ColumnInfo)],
        binary: bool,
        digest: u64,
        sql: &str,
    ) -> Result<Recipe, Refusal> {
        self.bind_with(q, columns, None, binary, digest, sql)
    }

    /// [`bind`](Self::bind) of a read that may join another table, `joined` what the
    /// catalog says of it (None: it names none). The joined columns must be exactly its
    /// primary key's (so one row joins, the WHERE pinning each), each an integer column
    /// equated with an integer column of the aggregated table (compared as integers: the
    /// pin passes through the equality exactly); the joined table another one than the
    /// aggregated one (an insert into it would change both sides), and its shown columns
    /// ones it has.
    pub fn bind_with(
        self,
        (schema, table): (String, String),
        columns: &[(String, ColumnInfo)],
        joined: Option<JoinedTable<'_>>,
        binary: bool,
        digest: u64,
        sql: &str,
    ) -> Result<Recipe, Refusal> {
        let join = match (&self.join, joined) {
            (None, None) => None,
            (Some(js), Some(jt)) => Some(js.bind(jt, (&schema, &table), columns, &self.aggs)?),
            _ => return Err(Refusal::NotSimple),
        };
        let mut ints = Vec::with_capacity(self.aggs.len());
        let mut scales = Vec::with_capacity(self.aggs.len());
        let mut minmax = Vec::with_capacity(self.aggs.len());
        for a in &self.aggs {
            // MIN/MAX answer in their column's own type: an integer type (below), a
            // DECIMAL of its scale, a DATE, a DATETIME(0); compared as the server does.
            minmax.push(match a {
                Agg::Min(c) | Agg::Max(c) => Some(match column_kind(columns, c)?.0 {
                    Kind::Int { .. } => Repr::Int,
                    Kind::Dec { scale, .. } => Repr::Dec(scale),
                    Kind::Date => Repr::Date,
                    Kind::DateTime => Repr::DateTime,
                }),
                _ => None,
            });
            let info = match a {
                Agg::Count(c) => {
                    column_kind(columns, c)?;
                    None
                }
                // SUM of a DECIMAL: exact, in units of its scale.
                Agg::Sum(c) => match column_kind(columns, c)? {
                    (Kind::Dec { scale, .. }, _) => {
                        scales.push(scale);
                        ints.push(None);
                        continue;
                    }
                    _ => Some(int_column(columns, c)?),
                },
                Agg::Min(c) | Agg::Max(c) if minmax.last() != Some(&Some(Repr::Int)) => {
                    scales.push(0);
                    ints.push(None);
                    continue;
                }
                _ => a.column().map(|c| int_column(columns, c)).transpose()?,
            };
            scales.push(0);
            ints.push(match (a, info.map(|i| &i.ty)) {
                (Agg::Min(_) | Agg::Max(_), Some(ColType::Int { min, max })) => {
                    Some(IntType::of_range(*min, *max).ok_or(Refusal::Column)?)
                }
                _ => None,
            });
        }
        let mut kinds = Vec::with_capacity(self.filter.len());
        for ((c, _), lit) in self.filter.iter().zip(&self.lits) {
            let (kind, _) = column_kind(columns, c)?;
            // A DATE compared with a datetime is compared as one; not reasoned here.
            let fits = matches!(
                (kind, lit),
                (Kind::Int { .. }, Lit::Int)
                    | (Kind::DateTime, Lit::Date | Lit::DateTime)
                    | (Kind::Date, Lit::Date)
            );
            if !fits {
                return Err(Refusal::Column);
            }
            kinds.push(kind);
        }
        if kinds.len() != self.filter.len() {
            return Err(Refusal::Predicate);
        }
        let key = match &self.group {
            None => None,
            Some(g) => Some(match (column_kind(columns, &g.column)?.0, g.date_of) {
                (Kind::Int { min, max }, false) => (
                    Repr::Int,
                    Some(IntType::of_range(min, max).ok_or(Refusal::Column)?),
                ),
                (Kind::Date, _) | (Kind::DateTime, true) => (Repr::Date, None),
                (Kind::DateTime, false) => (Repr::DateTime, None),
                (Kind::Int { .. }, true) | (Kind::Dec { .. }, _) => return Err(Refusal::Column),
            }),
        };
        Ok(Recipe {
            schema,
            table,
            aggs: self.aggs,
            ints,
            scales,
            minmax,
            filter: self.filter,
            kinds,
            group: self.group,
            key,
            binary,
            digest,
            sql: sql.to_string(),
            join,
        })
    }
}

impl JoinShape {
    /// The join bound to the catalog ([`ReadShape::bind_with`]): `q` and `columns` the
    /// aggregated table's, `aggs` the select list.
    fn bind(
        &self,
        jt: JoinedTable<'_>,
        q: (&str, &str),
        columns: &[(String, ColumnInfo)],
        aggs: &[Agg],
    ) -> Result<Join, Refusal> {
        if jt.q.0 == *q.0 && jt.q.1 == *q.1 {
            return Err(Refusal::NotSimple);
        }
        let is_int = |cols: &[(String, ColumnInfo)], c: &str| {
            cols.iter()
                .any(|(n, i)| n == c && matches!(i.ty, ColType::Int { .. }))
        };
        let keyed = !jt.key.is_empty()
            && self.on.len() == jt.key.len()
            && jt.key.iter().all(|k| self.on.iter().any(|(x, _)| x == k));
        if !keyed {
            return Err(Refusal::NotSimple);
        }
        for (k, tc) in &self.on {
            if !is_int(jt.columns, k) || !matches!(column_kind(columns, tc)?.0, Kind::Int { .. }) {
                return Err(Refusal::Column);
            }
        }
        for a in aggs {
            if let Agg::Joined(c) = a {
                if !jt.columns.iter().any(|(n, _)| n == c) {
                    return Err(Refusal::Column);
                }
            }
        }
        Ok(Join {
            schema: jt.q.0,
            table: jt.q.1,
            on: self.on.clone(),
        })
    }
}

/// Reads a plain `INSERT … VALUES` whose values are all literals (module docs).
pub fn insert_rows(sql: &str) -> Result<InsertRows, Refusal> {
    insert_rows_bound(sql, None)
}

/// [`insert_rows`] of a prepared statement's text, whose values may also be `?` bound to
/// `params` (an execute's, [`bound_params`]); `None` for a text statement.
pub fn insert_rows_bound(sql: &str, params: Option<&[Param]>) -> Result<InsertRows, Refusal> {
    let (stmt, tokens, binds) = parse_one(sql, params)?;
    let Statement::Insert(ins) = stmt else {
        return Err(Refusal::NotInsert);
    };
    if ins.ignore
        || ins.replace_into
        || ins.on.is_some()
        || !ins.assignments.is_empty()
        || ins.returning.is_some()
        || ins.priority.is_some()
        || ins.partitioned.is_some()
        || ins.insert_alias.is_some()
        || ins.table_alias.is_some()
        || ins.overwrite
        || ins.has_table_keyword
    {
        return Err(Refusal::NotInsert);
    }
    let TableObject::TableName(name) = &ins.table else {
        return Err(Refusal::NotInsert);
    };
    let table = crate::analysis::table_ref_of(name).ok_or(Refusal::NotInsert)?;
    let src = ins.source.as_ref().ok_or(Refusal::NotInsert)?;
    if src.with.is_some() || src.order_by.is_some() || src.limit_clause.is_some() {
        return Err(Refusal::NotInsert);
    }
    let SetExpr::Values(values) = &*src.body else {
        return Err(Refusal::NotInsert);
    };
    let columns = if ins.columns.is_empty() {
        None
    } else {
        Some(
            ins.columns
                .iter()
                .map(|c| match c.0.as_slice() {
                    [p] => p.as_ident().map(|i| i.value.to_lowercase()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or(Refusal::NotInsert)?,
        )
    };
    let rows = values
        .rows
        .iter()
        .map(|row| {
            row.content
                .iter()
                .map(|e| {
                    if let Some(p) = binds.param(e) {
                        return Ok(param_val(p));
                    }
                    if let Some(n) = int_literal(e) {
                        return Ok(Val::Int(n));
                    }
                    match e {
                        Expr::Value(v) => match &v.value {
                            Value::Null => Ok(Val::Null),
                            Value::SingleQuotedString(s) => Ok(Val::Str(s.clone())),
                            Value::Number(s, false) => Ok(Val::Num(s.clone())),
                            _ => Err(Refusal::Value),
                        },
                        // A negative fraction: `-` and the number.
                        Expr::UnaryOp {
                            op: UnaryOperator::Minus,
                            expr,
                        } => match &**expr {
                            Expr::Value(v) => match &v.value {
                                Value::Number(s, false) => Ok(Val::Num(format!("-{s}"))),
                                _ => Err(Refusal::Value),
                            },
                            _ => Err(Refusal::Value),
                        },
                        _ => Err(Refusal::Value),
                    }
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    if rows.is_empty() {
        return Err(Refusal::NotInsert);
    }
    let mut names = name_parts(name);
    names.extend(columns.iter().flatten().cloned());
    words_allowed(&tokens, &names, false)?;
    Ok(InsertRows {
        table,
        columns,
        rows,
    })
}

/// [`insert_rows_bound`] of a statement whose values the write's plan already read from
/// its tokens (`analysis::slices::InsertValues`, the shape's slots filled with this
/// statement's literals), so that an insert's rows are read once. Only the values are
/// judged here: the statement's structure (everything but its literals' values) is the
/// same for every statement of its shape, and must have been found one
/// [`insert_rows_bound`] takes ([`insert_structure`], remembered per shape by the caller).
/// Each value reads as that parse reads it: a number as an integer when it is all digits
/// (a `-` before them negating it) and fits, else as written; a string, NULL, or a `?`'s
/// bound parameter. A value that is no constant (an expression, a `+` sign, a literal the
/// tokens do not read) refuses the statement, as the parse does.
pub fn insert_rows_read(
    values: &InsertValues,
    params: Option<&[Param]>,
) -> Result<InsertRows, Refusal> {
    let rows = values
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v.as_ref().ok_or(Refusal::Value)? {
                    Written::Lit(SliceLit::Int(s)) => Ok(number_val(s)),
                    Written::Lit(SliceLit::Str(s)) => Ok(Val::Str(s.clone())),
                    Written::Lit(SliceLit::Null) => Ok(Val::Null),
                    Written::Lit(_) => Err(Refusal::Value),
                    Written::Param(n) => params
                        .and_then(|p| p.get(*n))
                        .map(param_val)
                        .ok_or(Refusal::Value),
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    if rows.is_empty() {
        return Err(Refusal::NotInsert);
    }
    Ok(InsertRows {
        table: values.table.clone(),
        columns: values.columns.clone(),
        rows,
    })
}

/// Whether [`insert_rows_bound`] takes the structure of `sql`, a statement of an INSERT's
/// shape (`analysis::slices::Shape`), with `params` bound: what [`insert_rows_read`] asks
/// of every statement of that shape, once for all of them. A parse's refusal of a value
/// is by its form (a function, `+5`, `(5)`), which the shape fixes; its literals' values
/// never refuse it.
pub fn insert_structure(sql: &str, params: Option<&[Param]>) -> Result<(), Refusal> {
    insert_rows_bound(sql, params).map(drop)
}

/// A number as [`insert_rows_bound`] reads it (`int_literal`, else the number as written).
fn number_val(s: &str) -> Val {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = digits.parse::<i128>() {
            return Val::Int(if neg { -n } else { n });
        }
    }
    Val::Num(s.to_string())
}

/// A bound parameter as an INSERT's value.
fn param_val(p: &Param) -> Val {
    match p {
        Param::Null => Val::Null,
        Param::Int(n) => Val::Int(*n),
        Param::Str(s) => Val::Str(s.clone()),
        Param::Dec(s) => Val::Num(s.clone()),
        Param::Time { secs, micros, .. } => Val::Time {
            secs: *secs,
            micros: *micros,
        },
        Param::Other => Val::Other,
    }
}

impl InsertRows {
    /// Each row's values in the columns `used` (in that order), read against the table's
    /// columns in their ordinal order: an integer inside the column's range, a canonical
    /// date (or datetime, into a DATETIME) as seconds ([`temporal`]), or NULL where it is
    /// nullable; else refused.
    pub fn values_of(
        &self,
        table_columns: &[(String, ColumnInfo)],
        used: &[String],
    ) -> Result<Vec<Vec<Option<i128>>>, Refusal> {
        let order: Vec<&str> = match &self.columns {
            Some(c) => c.iter().map(String::as_str).collect(),
            None => table_columns.iter().map(|(n, _)| n.as_str()).collect(),
        };
        let mut at = Vec::with_capacity(used.len());
        for u in used {
            let (kind, info) = column_kind(table_columns, u)?;
            let mut found = order.iter().enumerate().filter(|(_, n)| **n == u.as_str());
            let i = match (found.next(), found.next()) {
                (Some((i, _)), None) => i,
                (None, _) => return Err(Refusal::Omitted),
                _ => return Err(Refusal::NotInsert),
            };
            at.push((i, kind, info));
        }
        self.rows
            .iter()
            .map(|row| {
                if row.len() != order.len() {
                    return Err(Refusal::NotInsert);
                }
                at.iter()
                    .map(|(i, kind, info)| match (&row[*i], kind) {
                        (Val::Int(n), Kind::Int { min, max }) if min <= n && n <= max => {
                            Ok(Some(*n))
                        }
                        (Val::Null, _) if info.nullable => Ok(None),
                        (Val::Int(_), Kind::Int { .. }) | (Val::Null, _) => Err(Refusal::Range),
                        (
                            Val::Int(n),
                            Kind::Dec {
                                precision,
                                scale,
                                unsigned,
                            },
                        ) => {
                            decimal_literal(&n.to_string(), *precision, *scale, *unsigned).map(Some)
                        }
                        (
                            Val::Num(s),
                            Kind::Dec {
                                precision,
                                scale,
                                unsigned,
                            },
                        ) => decimal_literal(s, *precision, *scale, *unsigned).map(Some),
                        // A number as a string: converted by the server as the same
                        // number written as a literal (no note), so held alike.
                        (
                            Val::Str(s),
                            Kind::Dec {
                                precision,
                                scale,
                                unsigned,
                            },
                        ) => decimal_literal(s, *precision, *scale, *unsigned).map(Some),
                        // A DATE or DATETIME parameter: a fraction of a second is rounded
                        // or cut by the server's sql_mode, a time into a DATE cut (with a
                        // note): refused.
                        (Val::Time { secs, micros: 0 }, Kind::DateTime) => Ok(Some(*secs)),
                        (Val::Time { secs, micros: 0 }, Kind::Date)
                            if secs.rem_euclid(DAY) == 0 =>
                        {
                            Ok(Some(*secs))
                        }
                        // A date or datetime literal exactly as the server stores it: a
                        // datetime into a DATE column is truncated (with a note), refused.
                        (Val::Str(s), Kind::Date | Kind::DateTime) => match temporal(s) {
                            Some((v, Lit::Date)) => Ok(Some(v)),
                            Some((v, Lit::DateTime)) if *kind == Kind::DateTime => Ok(Some(v)),
                            _ => Err(Refusal::Value),
                        },
                        _ => Err(Refusal::Value),
                    })
                    .collect()
            })
            .collect()
    }
}

impl InsertRows {
    /// Each row's value in `column` as [`values_of`](Self::values_of) reads it, None when
    /// it refuses (what a [`Summary`] takes as "may match").
    pub fn column_values(
        &self,
        table_columns: &[(String, ColumnInfo)],
        column: &str,
    ) -> Option<Vec<Option<i128>>> {
        let rows = self.values_of(table_columns, &[column.to_string()]).ok()?;
        rows.into_iter().map(|r| r.first().copied()).collect()
    }
}

/// A stored result, cut into the pieces a patch rewrites.
struct Parsed<'a> {
    /// Frames before the rows (column count, definitions, EOF), with headers.
    head: &'a [u8],
    /// The first row's sequence id (the terminator's when there is no row).
    row_seq: u8,
    rows: Vec<&'a [u8]>,
    /// The terminator frame, with its header.
    tail: &'a [u8],
    /// Offset of `tail` in the stored bytes.
    tail_at: usize,
    /// Per column: its type, flags and decimals.
    types: Vec<ColDef>,
}

/// What a column definition says of the values it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ColDef {
    ty: u8,
    flags: u16,
    dec: u8,
    /// The column's display length (for a DECIMAL: digits, point and sign).
    len: u32,
}

/// The frames of `bytes` (header included) as (offset, seq, payload).
fn frames(bytes: &[u8]) -> Option<Vec<(usize, u8, &[u8])>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let h = bytes.get(at..at + 4)?;
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        if len >= 0xff_ffff {
            return None;
        }
        let payload = bytes.get(at + 4..at + 4 + len)?;
        out.push((at, h[3], payload));
        at += 4 + len;
    }
    Some(out)
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xfe) && p.len() < 9
}

/// A result set: column count, definitions, an EOF unless CLIENT_DEPRECATE_EOF, any number
/// of rows, the terminator (holding `status_at`); sequence ids consecutive, since the rows
/// (and so the terminator's id) are renumbered when their count changes.
fn parse_result(bytes: &[u8], status_at: usize) -> Option<Parsed<'_>> {
    let fr = frames(bytes)?;
    let seq0 = fr.first()?.1;
    if fr
        .iter()
        .enumerate()
        .any(|(i, f)| f.1 != seq0.wrapping_add(i as u8))
    {
        return None;
    }
    let (_, _, first) = fr.first()?;
    let (n, used) = read_lenenc(first)?;
    if used != first.len() || n == 0 || n > 64 {
        return None;
    }
    let n = n as usize;
    let mut types = Vec::with_capacity(n);
    for (_, _, def) in fr.get(1..1 + n)? {
        let l = def.len();
        if l < 13 || def[l - 13] != 0x0c {
            return None;
        }
        types.push(ColDef {
            ty: def[l - 6],
            flags: u16::from_le_bytes([def[l - 5], def[l - 4]]),
            dec: def[l - 3],
            len: u32::from_le_bytes([def[l - 10], def[l - 9], def[l - 8], def[l - 7]]),
        });
    }
    if fr.len() < n + 2 {
        return None;
    }
    // No row is EOF-like (a text row starting 0xfe is a long string; a binary one starts
    // 0x00): an EOF after the definitions that is not the last frame is the separator.
    let eof_between = fr.len() >= n + 3 && is_eof(fr[n + 1].2);
    let start = n + 1 + usize::from(eof_between);
    let last = fr.len() - 1;
    let (tail_at, tail_seq, tail) = fr[last];
    if tail.first() != Some(&0xfe) || status_at < tail_at {
        return None;
    }
    let rows: Vec<&[u8]> = fr[start..last].iter().map(|f| f.2).collect();
    if rows.iter().any(|r| is_eof(r) || r.first() == Some(&0xff)) {
        return None;
    }
    let (rows_at, row_seq) = fr.get(start).map_or((tail_at, tail_seq), |f| (f.0, f.1));
    Some(Parsed {
        head: &bytes[..rows_at],
        row_seq,
        rows,
        tail: &bytes[tail_at..],
        tail_at,
        types,
    })
}

/// A temporal value of the expected kind from its text, None otherwise.
fn temporal_of(s: &[u8], want: Lit) -> Option<i128> {
    temporal(std::str::from_utf8(s).ok()?).and_then(|(v, k)| (k == want).then_some(v))
}

/// A value as text: integer digits, a date, a datetime; None for what this is not.
fn decode_text(repr: Repr, s: &[u8]) -> Option<i128> {
    match repr {
        Repr::Int => decimal(s),
        Repr::Dec(scale) => decimal_scaled(s, scale),
        Repr::Date => temporal_of(s, Lit::Date),
        Repr::DateTime => temporal_of(s, Lit::DateTime),
        Repr::Opaque => None,
    }
}

/// The length of a binary protocol value of column type `ty` at the start of `rest`: an
/// integer's or float's width, a temporal's length byte and what it counts, a string's
/// (or DECIMAL's, JSON's, …) length-encoded bytes. None for a type not listed.
fn binary_len(ty: u8, rest: &[u8]) -> Option<usize> {
    Some(match ty {
        TYPE_TINY => 1,
        TYPE_SHORT | 0x0d => 2,
        TYPE_LONG | TYPE_INT24 | 0x04 => 4,
        TYPE_LONGLONG | 0x05 => 8,
        0x07 | TYPE_DATE | 0x0b | TYPE_DATETIME => 1 + usize::from(*rest.first()?),
        0x00 | 0x0f | 0x10 | 0xf5..=0xff => read_lenenc_str(rest)?.1,
        _ => return None,
    })
}

/// A row's values: Some(value) or NULL, text or binary, per the columns' representations
/// (which the metadata was checked against).
/// `shown` gets, per column, the bytes of a [`Repr::Opaque`] value (binary: as encoded;
/// text: the string's), None for NULL and for every other column.
fn row_values<'a>(
    row: &'a [u8],
    types: &[ColDef],
    reprs: &[Repr],
    binary: bool,
    shown: &mut Vec<Option<&'a [u8]>>,
) -> Option<Vec<Option<i128>>> {
    let n = types.len();
    if reprs.len() != n {
        return None;
    }
    shown.clear();
    shown.resize(n, None);
    let mut out = Vec::with_capacity(n);
    if binary {
        let bitmap_len = (n + 7 + 2) / 8;
        if row.first() != Some(&0) {
            return None;
        }
        let bitmap = row.get(1..1 + bitmap_len)?;
        let mut at = 1 + bitmap_len;
        for (i, (def, repr)) in types.iter().zip(reprs).enumerate() {
            let bit = i + 2;
            if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
                out.push(None);
                continue;
            }
            match repr {
                Repr::Opaque => {
                    let len = binary_len(def.ty, row.get(at..)?)?;
                    shown[i] = Some(row.get(at..at + len)?);
                    out.push(None);
                    at += len;
                }
                Repr::Dec(scale) => {
                    let (s, used) = read_lenenc_str(row.get(at..)?)?;
                    out.push(Some(decimal_scaled(s, *scale)?));
                    at += used;
                }
                Repr::Date | Repr::DateTime => {
                    // A length, then year (2 bytes), month, day, and hour, minute, second
                    // when the time is not midnight; fractions are not these columns'.
                    let len = usize::from(*row.get(at)?);
                    let b = row.get(at + 1..at + 1 + len)?;
                    let (date, time) = match (repr, len) {
                        (Repr::Date, 4) | (Repr::DateTime, 4) => (b, (0, 0, 0)),
                        (Repr::DateTime, 7) => (&b[..4], (b[4], b[5], b[6])),
                        _ => return None,
                    };
                    let text = format!(
                        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                        u16::from_le_bytes([date[0], date[1]]),
                        date[2],
                        date[3],
                        time.0,
                        time.1,
                        time.2
                    );
                    out.push(Some(temporal_of(text.as_bytes(), Lit::DateTime)?));
                    at += 1 + len;
                }
                Repr::Int => {
                    // Little-endian, sign- or zero-extended by the UNSIGNED flag.
                    let w = binary_width(def.ty)?;
                    let b = row.get(at..at + w)?;
                    let fill = if def.flags & FLAG_UNSIGNED == 0 && b[w - 1] & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    };
                    let mut full = [fill; 16];
                    full[..w].copy_from_slice(b);
                    out.push(Some(i128::from_le_bytes(full)));
                    at += w;
                }
            }
        }
        (at == row.len()).then_some(out)
    } else {
        let mut at = 0;
        for (i, repr) in reprs.iter().enumerate() {
            if row.get(at) == Some(&0xfb) {
                out.push(None);
                at += 1;
                continue;
            }
            let (s, used) = read_lenenc_str(row.get(at..)?)?;
            if *repr == Repr::Opaque {
                shown[i] = Some(s);
                out.push(None);
            } else {
                out.push(Some(decode_text(*repr, s)?));
            }
            at += used;
        }
        (at == row.len()).then_some(out)
    }
}

/// An integer as the server writes it: optional `-`, digits, no leading `+`, no fraction.
fn decimal(s: &[u8]) -> Option<i128> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Whether every DECIMAL value of a row has no more digits than its column's length
/// holds (less the point, and the sign unless UNSIGNED): past it the server's own sum
/// would have overflowed its type.
fn sums_fit(types: &[ColDef], row: &[Option<i128>]) -> bool {
    types.iter().zip(row).all(|(def, v)| {
        let Some(v) = v.filter(|_| def.ty == TYPE_NEWDECIMAL) else {
            return true;
        };
        let fixed = u32::from(def.dec > 0) + u32::from(def.flags & FLAG_UNSIGNED == 0);
        let digits = v.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
        digits.max(u32::from(def.dec) + 1) + fixed <= def.len
    })
}

/// What a patch leaves: the new bytes and where their final status flags now sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patched {
    pub bytes: Bytes,
    pub status_at: usize,
    /// Whether any value changed (rows the WHERE keeps out change nothing).
    pub changed: bool,
    /// Rows in the result before and after (a new group adds one): what `FOUND_ROWS()`
    /// says after the read, which the entry keeps for its hits.
    pub rows_before: u64,
    pub rows: u64,
}

/// The rows of a result, each its values in select-list order.
pub type Rows = Vec<Vec<Option<i128>>>;

/// Per result column, a joined column's bytes as the server sent them (None: NULL, or
/// not a joined column).
type Shown<'a> = Vec<Option<&'a [u8]>>;

impl Recipe {
    /// The statement the verifier asks the server (`cache.verify_patched`): the same
    /// aggregates over the same rows in the same groups, the table qualified, so that it
    /// means the same on any connection. Its values are compared with
    /// [`values`](Self::values), not its bytes (column names and character sets are the
    /// connection's).
    pub fn verify_sql(&self) -> String {
        let q = |s: &str| format!("`{}`", s.replace('`', "``"));
        // With a join each column is qualified by its table's alias (a name may be both's).
        let (tq, pq) = if self.join.is_some() {
            ("`qc_t`.", "`qc_p`.")
        } else {
            ("", "")
        };
        let col = |c: &str| format!("{tq}{}", q(c));
        let key = self.group.as_ref().map(|g| {
            if g.date_of {
                format!("DATE({})", col(&g.column))
            } else {
                col(&g.column)
            }
        });
        let items: Vec<String> = self
            .aggs
            .iter()
            .map(|a| match a {
                Agg::CountStar => "COUNT(*)".to_string(),
                Agg::Count(c) => format!("COUNT({})", col(c)),
                Agg::Sum(c) => format!("SUM({})", col(c)),
                Agg::Min(c) => format!("MIN({})", col(c)),
                Agg::Max(c) => format!("MAX({})", col(c)),
                Agg::Key => key.clone().unwrap_or_default(),
                Agg::Joined(c) => format!("{pq}{}", q(c)),
            })
            .collect();
        let mut sql = format!(
            "SELECT {} FROM {}.{}",
            items.join(", "),
            q(&self.schema),
            q(&self.table)
        );
        if let Some(j) = &self.join {
            let on: Vec<String> =
                j.on.iter()
                    .map(|(k, c)| format!("{pq}{} = {}", q(k), col(c)))
                    .collect();
            sql += &format!(
                " AS `qc_t` JOIN {}.{} AS `qc_p` ON {}",
                q(&j.schema),
                q(&j.table),
                on.join(" AND ")
            );
        }
        let mut conds = Vec::new();
        for ((c, cond), kind) in self.filter.iter().zip(&self.kinds) {
            // Temporal bounds as literals of the column's own kind: a DATE's bounds moved
            // to the whole days they admit (its values are whole days).
            let lit = |v: i128| match kind {
                Kind::Int { .. } | Kind::Dec { .. } => v.to_string(),
                Kind::DateTime => format!("'{}'", temporal_text(v, true)),
                Kind::Date => format!("'{}'", temporal_text(v, false)),
            };
            let days = *kind == Kind::Date;
            let ceil = |v: i128| {
                if days {
                    v + (DAY - v.rem_euclid(DAY)) % DAY
                } else {
                    v
                }
            };
            let floor = |v: i128| if days { v - v.rem_euclid(DAY) } else { v };
            match cond {
                Cond::In(set) => {
                    let list: Vec<String> = set.iter().map(|v| lit(*v)).collect();
                    conds.push(format!("{} IN ({})", col(c), list.join(", ")));
                }
                Cond::Range { lo, hi } => {
                    if let Some(lo) = lo {
                        conds.push(format!("{} >= {}", col(c), lit(ceil(*lo))));
                    }
                    if let Some(hi) = hi {
                        conds.push(format!("{} <= {}", col(c), lit(floor(*hi))));
                    }
                }
            }
        }
        if !conds.is_empty() {
            sql += " WHERE ";
            sql += &conds.join(" AND ");
        }
        if let Some(key) = key {
            sql += " GROUP BY ";
            sql += &key;
        }
        sql
    }

    /// How each result column's values are held and written.
    fn reprs(&self) -> Option<Vec<Repr>> {
        self.aggs
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Agg::CountStar | Agg::Count(_) => Some(Repr::Int),
                Agg::Min(_) | Agg::Max(_) => {
                    Some(self.minmax.get(i).copied().flatten().unwrap_or(Repr::Int))
                }
                Agg::Sum(_) => Some(Repr::Dec(self.scales.get(i).copied()?)),
                Agg::Key => self.key.map(|k| k.0),
                Agg::Joined(_) => Some(Repr::Opaque),
            })
            .collect()
    }

    /// The rows a stored result of this recipe holds, None when it is not one.
    pub fn values(&self, bytes: &[u8], status_at: usize) -> Option<Rows> {
        let p = parse_result(bytes, status_at)?;
        let reprs = self.reprs()?;
        if p.types.len() != self.aggs.len() {
            return None;
        }
        let mut shown = Vec::new();
        p.rows
            .iter()
            .map(|r| row_values(r, &p.types, &reprs, self.binary, &mut shown))
            .collect()
    }

    /// The rows of a text result as a client reads them (the verifier's answer).
    pub fn text_rows(&self, rows: &[Vec<Option<Vec<u8>>>]) -> Option<Rows> {
        let reprs = self.reprs()?;
        rows.iter()
            .map(|row| {
                (row.len() == reprs.len()).then_some(())?;
                row.iter()
                    .zip(&reprs)
                    .map(|(v, r)| match v {
                        // The joined row's columns are not compared (the connection's
                        // character sets are not the reader's): the aggregates over the
                        // join are.
                        _ if *r == Repr::Opaque => Some(None),
                        None => Some(None),
                        Some(b) => decode_text(*r, b).map(Some),
                    })
                    .collect()
            })
            .collect()
    }

    /// The columns whose values a write must know: the filter's, the aggregates', then the
    /// group's.
    /// Whether the WHERE keeps any of `rows` (values in [`used_columns`](Self::used_columns)
    /// order): when it keeps none, the write leaves this result as it is.
    pub fn keeps_any(&self, rows: &[Vec<Option<i128>>]) -> bool {
        self.keeps_any_in(rows, &self.used_columns())
    }

    /// [`keeps_any`](Self::keeps_any) with `used` this recipe's
    /// [`used_columns`](Self::used_columns), already at hand.
    pub fn keeps_any_in(&self, rows: &[Vec<Option<i128>>], used: &[String]) -> bool {
        rows.iter()
            .any(|row| row.len() != used.len() || self.keeps_in(row, used))
    }

    /// Whether the WHERE keeps `row`, its values in `used`'s order.
    fn keeps_in(&self, row: &[Option<i128>], used: &[String]) -> bool {
        let idx = |c: &str| used.iter().position(|u| u == c);
        self.filter
            .iter()
            .all(|(c, cond)| cond.keeps(idx(c).and_then(|i| row[i])))
    }

    pub fn used_columns(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let names = self
            .filter
            .iter()
            .map(|(c, _)| c)
            .chain(self.aggs.iter().filter_map(Agg::column))
            .chain(self.group.iter().map(|g| &g.column));
        for c in names {
            if !out.contains(c) {
                out.push(c.clone());
            }
        }
        out
    }

    /// Whether the stored metadata is the one these values are encoded for. COUNT a
    /// LONGLONG, SUM a NEWDECIMAL without decimals; MIN/MAX and an integer key the
    /// column's own integer type and signedness, no ZEROFILL (its text would be padded),
    /// no decimals; a date key a DATE, a datetime key a DATETIME without decimals.
    fn metadata_fits(&self, types: &[ColDef]) -> bool {
        let int_fits = |def: &ColDef, int: Option<IntType>| {
            int.is_some_and(|it| {
                def.ty == it.code
                    && (def.flags & FLAG_UNSIGNED != 0) == it.unsigned
                    && def.flags & FLAG_ZEROFILL == 0
                    && def.dec == 0
            })
        };
        types.len() == self.aggs.len()
            && self.ints.len() == self.aggs.len()
            && self.aggs.iter().zip(types).zip(&self.ints).enumerate().all(
                |(i, ((a, def), int))| match a {
                    Agg::CountStar | Agg::Count(_) => def.ty == TYPE_LONGLONG,
                    Agg::Sum(_) => {
                        def.ty == TYPE_NEWDECIMAL && Some(&def.dec) == self.scales.get(i)
                    }
                    Agg::Min(_) | Agg::Max(_) => match self.minmax.get(i).copied().flatten() {
                        None | Some(Repr::Int) => int_fits(def, *int),
                        Some(Repr::Dec(scale)) => def.ty == TYPE_NEWDECIMAL && def.dec == scale,
                        Some(Repr::Date) => def.ty == TYPE_DATE,
                        Some(Repr::DateTime) => def.ty == TYPE_DATETIME && def.dec == 0,
                        Some(Repr::Opaque) => false,
                    },
                    Agg::Key => match self.key {
                        Some((Repr::Int, it)) => int_fits(def, it),
                        Some((Repr::Date, _)) => def.ty == TYPE_DATE,
                        Some((Repr::DateTime, _)) => def.ty == TYPE_DATETIME && def.dec == 0,
                        _ => false,
                    },
                    // Carried as sent; in binary rows its length must be known by type.
                    Agg::Joined(_) => !self.binary || binary_len(def.ty, &[0]).is_some(),
                },
            )
    }

    /// Whether a row's values are ones this shape gives: COUNTs never NULL, MIN/MAX and an
    /// integer key NULL or a value of their column, every key column the same value.
    fn row_fits(&self, row: &[Option<i128>]) -> bool {
        let key = self
            .aggs
            .iter()
            .position(|a| *a == Agg::Key)
            .map(|i| row[i]);
        self.aggs
            .iter()
            .zip(row)
            .zip(&self.ints)
            .enumerate()
            .all(|(i, ((a, v), int))| match a {
                Agg::CountStar | Agg::Count(_) => v.is_some_and(|n| n <= i64::MAX as i128),
                Agg::Sum(_) => v.is_none_or(|n| n.unsigned_abs() < 10u128.pow(38)),
                Agg::Min(_) | Agg::Max(_) => match self.minmax.get(i).copied().flatten() {
                    None | Some(Repr::Int) => {
                        v.is_none_or(|n| int.is_some_and(|it| it.min <= n && n <= it.max))
                    }
                    Some(Repr::Dec(_)) => v.is_none_or(|n| n.unsigned_abs() < 10u128.pow(38)),
                    Some(Repr::Date) => v.is_none_or(|n| n.rem_euclid(DAY) == 0),
                    Some(Repr::DateTime) => true,
                    Some(Repr::Opaque) => false,
                },
                Agg::Joined(_) => v.is_none(),
                Agg::Key => {
                    Some(*v) == key
                        && match self.key {
                            Some((Repr::Int, Some(it))) => {
                                v.is_none_or(|n| it.min <= n && n <= it.max)
                            }
                            Some((Repr::Date, _)) => v.is_none_or(|n| n.rem_euclid(DAY) == 0),
                            Some((Repr::DateTime, _)) => true,
                            _ => false,
                        }
                }
            })
    }

    /// The result after `rows` (each row's values in [`used_columns`](Self::used_columns)
    /// order) were inserted into the rows `bytes` (stored, `status_at` its final status
    /// flags) was computed over. Without GROUP BY the result is one row; with it, a row
    /// per group in the order of its key (NULL first, as the server sorts them), a new key
    /// making a new row at its place. The stored rows must decode to values whose encoding
    /// is exactly their bytes, and be in that order, or the patch is refused. `corrupt` (a
    /// debug fault) adds one to the first value that is not a key, so that the checkers
    /// can be shown to catch a wrong patch.
    pub fn apply(
        &self,
        bytes: &[u8],
        status_at: usize,
        rows: &[Vec<Option<i128>>],
        corrupt: bool,
    ) -> Result<Patched, Refusal> {
        let p = parse_result(bytes, status_at).ok_or(Refusal::Result)?;
        // The metadata the server sent is kept as it is; it must be the one these values
        // are encoded for.
        if !self.metadata_fits(&p.types) {
            return Err(Refusal::Result);
        }
        let reprs = self.reprs().ok_or(Refusal::Result)?;
        let (mut values, shown) = self.stored_rows(&p, &reprs)?;
        // Whether the joined row is known to exist (and `shown` to be its columns): some
        // row of the result joined it. Without GROUP BY an empty join still answers one
        // row, of COUNTs 0 and NULLs (the joined columns NULL too); with it, no row.
        let joined = self.join.is_none()
            || match &self.group {
                Some(_) => !values.is_empty(),
                None => values.iter().any(|r| self.joined_a_row(r)),
            };
        let key_at = self.aggs.iter().position(|a| *a == Agg::Key);
        match (&self.group, key_at) {
            (None, None) if values.len() == 1 => {}
            // Groups strictly in their key's order (Option orders NULL first).
            (Some(_), Some(k)) if values.windows(2).all(|w| w[0][k] < w[1][k]) => {}
            _ => return Err(Refusal::Result),
        }
        let old = values.clone();
        let used = self.used_columns();
        let idx = |c: &str| used.iter().position(|u| u == c);
        for row in rows {
            if row.len() != used.len() {
                return Err(Refusal::Result);
            }
            if !self.keeps_in(row, &used) {
                continue;
            }
            // The row joins the pinned row only if that row exists: unknown here.
            if !joined {
                return Err(Refusal::Unjoined);
            }
            let target = match (&self.group, key_at) {
                (Some(g), Some(k)) => {
                    let key = g.key(idx(&g.column).and_then(|i| row[i]));
                    match values.binary_search_by(|r| r[k].cmp(&key)) {
                        Ok(i) => i,
                        Err(i) => {
                            // A new group: counted from nothing, then the row added below.
                            let fresh = self
                                .aggs
                                .iter()
                                .map(|a| match a {
                                    Agg::CountStar | Agg::Count(_) => Some(0),
                                    Agg::Sum(_) | Agg::Min(_) | Agg::Max(_) => None,
                                    Agg::Joined(_) => None,
                                    Agg::Key => key,
                                })
                                .collect();
                            values.insert(i, fresh);
                            i
                        }
                    }
                }
                _ => 0,
            };
            self.add_row(&mut values[target], row, &idx)?;
        }
        if corrupt {
            // One unit of the value's own kind (a day for a DATE), so that it still
            // encodes: a wrong answer, not a refused patch.
            let first = self
                .aggs
                .iter()
                .position(|a| !matches!(a, Agg::Key | Agg::Joined(_)));
            if let (Some(row), Some(i)) = (values.first_mut(), first) {
                let unit = if reprs[i] == Repr::Date { DAY } else { 1 };
                row[i] = Some(row[i].unwrap_or(0) + unit);
            }
        }
        // A COUNT is a BIGINT; a SUM of integers fits DECIMAL(65) long before i128 ends;
        // MIN/MAX hold one of the column's values.
        if !values
            .iter()
            .all(|r| self.row_fits(r) && sums_fit(&p.types, r))
        {
            return Err(Refusal::Overflow);
        }
        let changed = values != old;
        let mut out = BytesMut::with_capacity(bytes.len() + 64);
        out.put_slice(p.head);
        let mut seq = p.row_seq;
        for v in &values {
            let row = self
                .encode_row(&p.types, v, &shown)
                .ok_or(Refusal::Result)?;
            if row.len() >= 0xff_ffff {
                return Err(Refusal::Result);
            }
            out.put_slice(&(row.len() as u32).to_le_bytes()[..3]);
            out.put_u8(seq);
            seq = seq.wrapping_add(1);
            out.put_slice(&row);
        }
        let new_tail_at = out.len();
        out.put_slice(p.tail);
        // The terminator follows the rows: its sequence id moves with their count.
        out[new_tail_at + 3] = seq;
        Ok(Patched {
            bytes: out.freeze(),
            status_at: status_at - p.tail_at + new_tail_at,
            changed,
            rows_before: old.len() as u64,
            rows: values.len() as u64,
        })
    }

    /// The stored rows' values, each checked to encode as the server wrote it, and the
    /// joined row's columns, the same bytes in every row (one row joins them all).
    fn stored_rows<'a>(
        &self,
        p: &Parsed<'a>,
        reprs: &[Repr],
    ) -> Result<(Rows, Shown<'a>), Refusal> {
        let mut values: Rows = Vec::with_capacity(p.rows.len() + 1);
        let mut shown: Option<Vec<Option<&[u8]>>> = None;
        let mut cells = Vec::new();
        for r in &p.rows {
            let v =
                row_values(r, &p.types, reprs, self.binary, &mut cells).ok_or(Refusal::Result)?;
            // What qcache writes for these values must be what the server wrote.
            if !self.row_fits(&v) || self.encode_row(&p.types, &v, &cells).as_deref() != Some(*r) {
                return Err(Refusal::Result);
            }
            if shown.get_or_insert_with(|| cells.clone()) != &cells {
                return Err(Refusal::Result);
            }
            values.push(v);
        }
        let shown = shown.unwrap_or_else(|| vec![None; p.types.len()]);
        Ok((values, shown))
    }

    /// Whether a result row of a read without GROUP BY counts or aggregates some row:
    /// then the join was not empty.
    fn joined_a_row(&self, row: &[Option<i128>]) -> bool {
        self.aggs.iter().zip(row).any(|(a, v)| match a {
            Agg::CountStar | Agg::Count(_) => v.is_some_and(|n| n > 0),
            Agg::Sum(_) | Agg::Min(_) | Agg::Max(_) => v.is_some(),
            Agg::Key | Agg::Joined(_) => false,
        })
    }

    /// Adds one inserted `row` (its values in [`used_columns`](Self::used_columns) order,
    /// found by `idx`) to the aggregates of the result row `agg` it falls in.
    fn add_row(
        &self,
        agg: &mut [Option<i128>],
        row: &[Option<i128>],
        idx: &impl Fn(&str) -> Option<usize>,
    ) -> Result<(), Refusal> {
        for (a, v) in self.aggs.iter().zip(agg.iter_mut()) {
            match a {
                Agg::Key | Agg::Joined(_) => {}
                Agg::CountStar => *v = v.map(|n| n + 1),
                Agg::Count(c) => {
                    if idx(c).and_then(|i| row[i]).is_some() {
                        *v = v.map(|n| n + 1);
                    }
                }
                Agg::Sum(c) => {
                    if let Some(x) = idx(c).and_then(|i| row[i]) {
                        let s = v.unwrap_or(0).checked_add(x).ok_or(Refusal::Overflow)?;
                        *v = Some(s);
                    }
                }
                Agg::Min(c) => {
                    if let Some(x) = idx(c).and_then(|i| row[i]) {
                        *v = Some(v.map_or(x, |m| m.min(x)));
                    }
                }
                Agg::Max(c) => {
                    if let Some(x) = idx(c).and_then(|i| row[i]) {
                        *v = Some(v.map_or(x, |m| m.max(x)));
                    }
                }
            }
        }
        Ok(())
    }

    /// A row of `values` in the stored result's protocol and column types (binary: an
    /// integer type in its width, two's complement, whatever its signedness; NEWDECIMAL as
    /// its digits; a DATE as 4 bytes, a DATETIME as 4, or 7 when its time is not
    /// midnight). None for a type it cannot encode.
    /// `shown`: per column, a joined column's bytes ([`row_values`]'s), None for NULL.
    fn encode_row(
        &self,
        types: &[ColDef],
        values: &[Option<i128>],
        shown: &[Option<&[u8]>],
    ) -> Option<BytesMut> {
        let reprs = self.reprs()?;
        if shown.len() != values.len() || reprs.len() != values.len() {
            return None;
        }
        let mut row = BytesMut::new();
        if self.binary {
            let bitmap_len = (values.len() + 7 + 2) / 8;
            row.put_u8(0);
            let mut bitmap = vec![0u8; bitmap_len];
            for (i, v) in values.iter().enumerate() {
                let null = if reprs[i] == Repr::Opaque {
                    shown[i].is_none()
                } else {
                    v.is_none()
                };
                if null {
                    let bit = i + 2;
                    bitmap[bit / 8] |= 1 << (bit % 8);
                }
            }
            row.put_slice(&bitmap);
            for (i, ((def, v), repr)) in types.iter().zip(values).zip(&reprs).enumerate() {
                if *repr == Repr::Opaque {
                    row.put_slice(shown[i].unwrap_or_default());
                    continue;
                }
                let Some(v) = v else { continue };
                match repr {
                    Repr::Opaque => return None,
                    Repr::Dec(scale) => {
                        put_lenenc_str(&mut row, decimal_text(*v, *scale).as_bytes())
                    }
                    Repr::Int => {
                        let w = binary_width(def.ty)?;
                        row.put_slice(&v.to_le_bytes()[..w]);
                    }
                    Repr::Date | Repr::DateTime => {
                        let (y, m, d) = civil_from_days(v.div_euclid(DAY));
                        let t = v.rem_euclid(DAY);
                        if *repr == Repr::Date && t != 0 {
                            return None;
                        }
                        let y = u16::try_from(y).ok()?;
                        let date = [y.to_le_bytes()[0], y.to_le_bytes()[1], m as u8, d as u8];
                        if t == 0 {
                            row.put_u8(4);
                            row.put_slice(&date);
                        } else {
                            row.put_u8(7);
                            row.put_slice(&date);
                            row.put_slice(&[(t / 3600) as u8, (t / 60 % 60) as u8, (t % 60) as u8]);
                        }
                    }
                }
            }
        } else {
            for (i, (v, repr)) in values.iter().zip(&reprs).enumerate() {
                match (v, repr) {
                    (_, Repr::Opaque) => match shown[i] {
                        Some(s) => put_lenenc_str(&mut row, s),
                        None => row.put_u8(0xfb),
                    },
                    (None, _) => row.put_u8(0xfb),
                    (Some(v), Repr::Int) => put_lenenc_str(&mut row, v.to_string().as_bytes()),
                    (Some(v), Repr::Dec(scale)) => {
                        put_lenenc_str(&mut row, decimal_text(*v, *scale).as_bytes())
                    }
                    (Some(v), Repr::Date) if v.rem_euclid(DAY) == 0 => {
                        put_lenenc_str(&mut row, temporal_text(*v, false).as_bytes())
                    }
                    (Some(_), Repr::Date) => return None,
                    (Some(v), Repr::DateTime) => {
                        put_lenenc_str(&mut row, temporal_text(*v, true).as_bytes())
                    }
                }
            }
        }
        Some(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::packets::put_lenenc;

    fn int(min: i128, max: i128, nullable: bool) -> ColumnInfo {
        ColumnInfo {
            ty: ColType::Int { min, max },
            nullable,
            auto_increment: false,
        }
    }

    /// `t (id INT AUTO_INCREMENT, a INT NULL, b BIGINT NULL, c TINYINT NOT NULL, s VARCHAR,
    /// u BIGINT UNSIGNED NULL)`.
    fn table() -> Vec<(String, ColumnInfo)> {
        let i32r = (-(1i128 << 31), (1i128 << 31) - 1);
        let i64r = (-(1i128 << 63), (1i128 << 63) - 1);
        vec![
            (
                "id".into(),
                ColumnInfo {
                    ty: ColType::Int {
                        min: i32r.0,
                        max: i32r.1,
                    },
                    nullable: false,
                    auto_increment: true,
                },
            ),
            ("a".into(), int(i32r.0, i32r.1, true)),
            ("b".into(), int(i64r.0, i64r.1, true)),
            ("c".into(), int(-128, 127, false)),
            (
                "s".into(),
                ColumnInfo {
                    ty: ColType::Other,
                    nullable: true,
                    auto_increment: false,
                },
            ),
            ("u".into(), int(0, (1i128 << 64) - 1, true)),
        ]
    }

    /// [`temporal_table`] and `m DECIMAL(10,2) NULL, q DECIMAL(5,0) UNSIGNED NOT NULL`.
    fn decimal_table() -> Vec<(String, ColumnInfo)> {
        let col = |column_type: &str, nullable| ColumnInfo {
            ty: ColType::from_catalog("decimal", column_type, "", None),
            nullable,
            auto_increment: false,
        };
        let mut t = temporal_table();
        t.push(("m".into(), col("decimal(10,2)", true)));
        t.push(("q".into(), col("decimal(5,0) unsigned", false)));
        t
    }

    /// DECIMAL columns from the catalog, their text as the server writes it, and the
    /// literals an INSERT may give them: exact, or refused.
    #[test]
    fn decimals_are_exact_or_refused() {
        let ty = |ct: &str| ColType::from_catalog("decimal", ct, "", None);
        assert_eq!(
            ty("decimal(10,2)"),
            ColType::Decimal {
                precision: 10,
                scale: 2,
                unsigned: false
            }
        );
        assert_eq!(
            ty("decimal(65,30) unsigned"),
            ColType::Decimal {
                precision: 65,
                scale: 30,
                unsigned: true
            }
        );
        for odd in [
            "decimal(10,2) unsigned zerofill",
            "decimal(10)",
            "decimal(2,3)",
            "numeric",
        ] {
            assert_eq!(ty(odd), ColType::Other, "{odd}");
        }
        assert!(!ty("decimal(10,2)").sliceable());
        // Text: (units, scale) ↔ the server's text.
        for (v, scale, text) in [
            (12345, 2, "123.45"),
            (5, 2, "0.05"),
            (-5, 2, "-0.05"),
            (0, 2, "0.00"),
            (-10030, 2, "-100.30"),
            (7, 0, "7"),
            (-7, 0, "-7"),
            (1, 4, "0.0001"),
        ] {
            assert_eq!(decimal_text(v, scale), text);
            assert_eq!(decimal_scaled(text.as_bytes(), scale), Some(v), "{text}");
        }
        for (text, scale) in [
            ("1.5", 2),
            ("1.500", 2),
            ("1", 2),
            (".50", 2),
            ("-0.00", 2),
            ("1.5", 0),
            ("+1.50", 2),
            ("1e2", 0),
        ] {
            assert_eq!(decimal_scaled(text.as_bytes(), scale), None, "{text}");
        }
        // Literals into DECIMAL(10,2) and DECIMAL(5,0) UNSIGNED.
        type Row<'a> = (&'a str, u8, u8, bool, std::result::Result<i128, Refusal>);
        let rows: &[Row] = &[
            ("12.5", 10, 2, false, Ok(1250)),
            ("-0.05", 10, 2, false, Ok(-5)),
            ("007.10", 10, 2, false, Ok(710)),
            ("99999999.99", 10, 2, false, Ok(9_999_999_999)),
            ("0", 10, 2, false, Ok(0)),
            ("1.234", 10, 2, false, Err(Refusal::Value)),
            ("1.", 10, 2, false, Err(Refusal::Value)),
            ("1e3", 10, 2, false, Err(Refusal::Value)),
            ("100000000", 10, 2, false, Err(Refusal::Range)),
            ("99999", 5, 0, true, Ok(99999)),
            ("100000", 5, 0, true, Err(Refusal::Range)),
            ("-1", 5, 0, true, Err(Refusal::Range)),
            ("1.0", 5, 0, true, Err(Refusal::Value)),
        ];
        for (lit, p, sc, u, want) in rows {
            assert_eq!(decimal_literal(lit, *p, *sc, *u), *want, "{lit}");
        }
        // Through an INSERT: numbers (integers too) exact in the column's units; strings,
        // extra decimals and out-of-range numbers refused.
        let used = ["m".to_string(), "q".to_string()];
        let values =
            |sql: &str| insert_rows(sql).and_then(|i| i.values_of(&decimal_table(), &used));
        assert_eq!(
            values("INSERT INTO t (m, q) VALUES (12.5, 3), (-0.05, 0), (NULL, 7), (4, 1)"),
            Ok(vec![
                vec![Some(1250), Some(3)],
                vec![Some(-5), Some(0)],
                vec![None, Some(7)],
                vec![Some(400), Some(1)]
            ])
        );
        assert_eq!(
            values("INSERT INTO t (m, q) VALUES (1.234, 1)"),
            Err(Refusal::Value)
        );
        assert_eq!(
            values("INSERT INTO t (m, q) VALUES ('1.5', 1)"),
            Ok(vec![vec![Some(150), Some(1)]]),
            "a number as a string: converted as the literal, no note"
        );
        assert_eq!(
            values("INSERT INTO t (m, q) VALUES ('1.5e0', 1)"),
            Err(Refusal::Value)
        );
        assert_eq!(
            values("INSERT INTO t (m, q) VALUES (1, -1)"),
            Err(Refusal::Range)
        );
        assert_eq!(
            values("INSERT INTO t (m, q) VALUES (1, NULL)"),
            Err(Refusal::Range)
        );
        // Binding: SUM and COUNT of a DECIMAL; not MIN/MAX, a WHERE or a GROUP BY on it.
        let bind = |sql: &str| {
            read_shape(sql)
                .and_then(|s| s.bind(("db".into(), "t".into()), &decimal_table(), false, 0, sql))
        };
        assert_eq!(
            bind("SELECT COUNT(m), SUM(m), SUM(q), SUM(a) FROM t").map(|r| r.scales),
            Ok(vec![0, 2, 0, 0])
        );
        assert_eq!(
            bind("SELECT MIN(m), MAX(q), MIN(dt), MAX(dd), MIN(a) FROM t").map(|r| r.minmax),
            Ok(vec![
                Some(Repr::Dec(2)),
                Some(Repr::Dec(0)),
                Some(Repr::DateTime),
                Some(Repr::Date),
                Some(Repr::Int)
            ]),
            "MIN/MAX of a DECIMAL, DATETIME(0), DATE, integer"
        );
        for sql in [
            "SELECT MIN(f) FROM t",
            "SELECT MAX(s) FROM t",
            "SELECT COUNT(*) FROM t WHERE m = 1",
            "SELECT m, COUNT(*) FROM t GROUP BY m",
        ] {
            assert_eq!(bind(sql).map(drop), Err(Refusal::Column), "{sql}");
        }
        // Applying: the sum in the column's scale; the result's metadata must carry that
        // scale, and the sum fit the length the server gave it.
        let r = bind("SELECT COUNT(*), SUM(m) FROM t").unwrap();
        let rows = [vec![Some(1250)], vec![Some(-5)], vec![None]];
        let r = Recipe {
            filter: Vec::new(),
            ..r
        };
        let (bytes, at) = result(
            &[COUNT, (TYPE_NEWDECIMAL, 2)],
            &text_row(&[Some("1"), Some("0.05")]),
            true,
        );
        let got = r.apply(&bytes, at, &rows, false).unwrap();
        let (want, _) = result(
            &[COUNT, (TYPE_NEWDECIMAL, 2)],
            &text_row(&[Some("4"), Some("12.50")]),
            true,
        );
        assert_eq!(&got.bytes[..], &want[..]);
        let (bytes, at) = result(
            &[COUNT, (TYPE_NEWDECIMAL, 0)],
            &text_row(&[Some("1"), Some("5")]),
            true,
        );
        assert_eq!(
            r.apply(&bytes, at, &rows, false),
            Err(Refusal::Result),
            "scale 0"
        );
        let (bytes, at) = result(
            &[COUNT, (TYPE_NEWDECIMAL, 2)],
            &text_row(&[Some("1"), Some("5")]),
            true,
        );
        assert_eq!(
            r.apply(&bytes, at, &rows, false),
            Err(Refusal::Result),
            "no decimals in the text"
        );
        // Past the length (21: 19 digits, the point, the sign).
        let (bytes, at) = result(
            &[COUNT, (TYPE_NEWDECIMAL, 2)],
            &text_row(&[Some("1"), Some("99999999999999999.99")]),
            true,
        );
        assert_eq!(
            r.apply(&bytes, at, &[vec![Some(1)]], false),
            Err(Refusal::Overflow)
        );
        // Binary: the same text.
        let rb = Recipe { binary: true, ..r };
        let mut row = vec![0u8, 0];
        row.extend_from_slice(&1i64.to_le_bytes());
        put_lenenc_str_vec(&mut row, b"0.05");
        let (bytes, at) = result(&[COUNT, (TYPE_NEWDECIMAL, 2)], &row, true);
        let got = rb.apply(&bytes, at, &[vec![Some(-110)]], false).unwrap();
        let mut row = vec![0u8, 0];
        row.extend_from_slice(&2i64.to_le_bytes());
        put_lenenc_str_vec(&mut row, b"-1.05");
        let (want, _) = result(&[COUNT, (TYPE_NEWDECIMAL, 2)], &row, true);
        assert_eq!(&got.bytes[..], &want[..]);
    }

    fn put_lenenc_str_vec(out: &mut Vec<u8>, s: &[u8]) {
        let mut b = BytesMut::new();
        put_lenenc_str(&mut b, s);
        out.extend_from_slice(&b);
    }

    /// [`table`] and `dt DATETIME NULL, dd DATE NOT NULL, f DATETIME(3) NULL`.
    fn temporal_table() -> Vec<(String, ColumnInfo)> {
        let col = |date_only, fsp, nullable| ColumnInfo {
            ty: ColType::Temporal { date_only, fsp },
            nullable,
            auto_increment: false,
        };
        let mut t = table();
        t.push(("dt".into(), col(false, 0, true)));
        t.push(("dd".into(), col(true, 0, false)));
        t.push(("f".into(), col(false, 3, true)));
        t
    }

    /// One row per rule of a WHERE summary (`Summary::may_match`), the test a write's rows
    /// meet before their entries are looked up: where every value is known it says exactly
    /// what the recipe's WHERE keeps; a value qcache cannot compare exactly (a string under
    /// a collation, a value its column refuses, a column the insert leaves to its default)
    /// may match. Columns: [`temporal_table`]'s and `name VARCHAR(20)` under a
    /// case-insensitive collation.
    #[test]
    fn summaries_rule_out_only_rows_the_where_cannot_keep() {
        let mut cols = temporal_table();
        cols.push((
            "name".into(),
            ColumnInfo {
                ty: ColType::Str {
                    fold: crate::analysis::slices::Fold::AsciiLower,
                    max_chars: 20,
                    collation: "utf8mb4_general_ci".into(),
                },
                nullable: true,
                auto_increment: false,
            },
        ));
        // (rule, WHERE (None: no WHERE), INSERT, may match)
        type Row = (&'static str, Option<&'static str>, &'static str, bool);
        let rows: &[Row] = &[
            (
                "equality hit",
                Some("a = 5"),
                "INSERT INTO t (a) VALUES (5)",
                true,
            ),
            (
                "equality miss",
                Some("a = 5"),
                "INSERT INTO t (a) VALUES (6)",
                false,
            ),
            (
                "IN hit",
                Some("a IN (1, 2, 3)"),
                "INSERT INTO t (a) VALUES (3)",
                true,
            ),
            (
                "IN miss",
                Some("a IN (1, 2, 3)"),
                "INSERT INTO t (a) VALUES (4)",
                false,
            ),
            (
                "one row of several hits",
                Some("a = 5"),
                "INSERT INTO t (a) VALUES (1), (5), (9)",
                true,
            ),
            (
                "no row of several",
                Some("a = 5"),
                "INSERT INTO t (a) VALUES (1), (4), (9)",
                false,
            ),
            (
                "integer range, lower bound",
                Some("a BETWEEN 1 AND 10"),
                "INSERT INTO t (a) VALUES (1)",
                true,
            ),
            (
                "integer range, upper bound",
                Some("a BETWEEN 1 AND 10"),
                "INSERT INTO t (a) VALUES (10)",
                true,
            ),
            (
                "integer range, below",
                Some("a BETWEEN 1 AND 10"),
                "INSERT INTO t (a) VALUES (0)",
                false,
            ),
            (
                "integer range, above",
                Some("a BETWEEN 1 AND 10"),
                "INSERT INTO t (a) VALUES (11)",
                false,
            ),
            (
                "strict integer bound",
                Some("a > 10"),
                "INSERT INTO t (a) VALUES (10)",
                false,
            ),
            (
                "empty BETWEEN keeps nothing",
                Some("a BETWEEN 10 AND 1"),
                "INSERT INTO t (a) VALUES (5)",
                false,
            ),
            (
                "datetime window, inside",
                Some("dt >= '2024-01-08' AND dt < '2024-01-15'"),
                "INSERT INTO t (dt) VALUES ('2024-01-10 12:00:00')",
                true,
            ),
            (
                "datetime window, its first second",
                Some("dt >= '2024-01-08' AND dt < '2024-01-15'"),
                "INSERT INTO t (dt) VALUES ('2024-01-08 00:00:00')",
                true,
            ),
            (
                "datetime window, the second before",
                Some("dt >= '2024-01-08' AND dt < '2024-01-15'"),
                "INSERT INTO t (dt) VALUES ('2024-01-07 23:59:59')",
                false,
            ),
            (
                "datetime window, its strict end",
                Some("dt >= '2024-01-08' AND dt < '2024-01-15'"),
                "INSERT INTO t (dt) VALUES ('2024-01-15')",
                false,
            ),
            (
                "datetime window, its last second",
                Some("dt >= '2024-01-08' AND dt < '2024-01-15'"),
                "INSERT INTO t (dt) VALUES ('2024-01-14 23:59:59')",
                true,
            ),
            (
                "date equality",
                Some("dd = '2024-01-08'"),
                "INSERT INTO t (dd) VALUES ('2024-01-08')",
                true,
            ),
            (
                "date equality miss",
                Some("dd = '2024-01-08'"),
                "INSERT INTO t (dd) VALUES ('2024-01-09')",
                false,
            ),
            (
                "NULL meets no equality",
                Some("a = 5"),
                "INSERT INTO t (a) VALUES (NULL)",
                false,
            ),
            (
                "NULL meets no range",
                Some("dt >= '2024-01-08'"),
                "INSERT INTO t (dt) VALUES (NULL)",
                false,
            ),
            (
                "every conjunct met",
                Some("a = 5 AND c = 1"),
                "INSERT INTO t (a, c) VALUES (5, 1)",
                true,
            ),
            (
                "one conjunct not met",
                Some("a = 5 AND c = 1"),
                "INSERT INTO t (a, c) VALUES (5, 2)",
                false,
            ),
            (
                "no WHERE: any row",
                None,
                "INSERT INTO t (a) VALUES (6)",
                true,
            ),
            (
                "a column the insert leaves to its default may match",
                Some("a = 5"),
                "INSERT INTO t (c) VALUES (1)",
                true,
            ),
            (
                "a string into an integer column may match",
                Some("a = 5"),
                "INSERT INTO t (a) VALUES ('6')",
                true,
            ),
            (
                "a value past its column's range may match",
                Some("c = 5"),
                "INSERT INTO t (c) VALUES (300)",
                true,
            ),
            (
                "a datetime into a DATE column may match",
                Some("dd = '2024-01-08'"),
                "INSERT INTO t (dd) VALUES ('2024-01-09 10:00:00')",
                true,
            ),
            (
                "a known conjunct still rules out when another is unknown",
                Some("a = 5 AND c = 1"),
                "INSERT INTO t (a, c) VALUES (6, 300)",
                false,
            ),
        ];
        let check = |why: &str, filter: &[(String, Cond)], insert: &str, want: bool| {
            let mut slots: Vec<String> = Vec::new();
            let summary = Summary::of(filter, |c| {
                Some(slots.iter().position(|x| x == c).unwrap_or_else(|| {
                    slots.push(c.to_string());
                    slots.len() - 1
                }))
            });
            let ins = insert_rows(insert).unwrap_or_else(|e| panic!("{why}: {e:?}"));
            let values: Vec<_> = slots.iter().map(|c| ins.column_values(&cols, c)).collect();
            assert_eq!(summary.may_match(&values, ins.rows.len()), want, "{why}");
            assert_eq!(summary.is_any(), filter.is_empty(), "{why}");
            // Where every value is known: exactly what the WHERE keeps.
            let used: Vec<String> = filter.iter().map(|(c, _)| c.clone()).collect();
            if let Ok(rows) = ins.values_of(&cols, &used) {
                let keeps = rows
                    .iter()
                    .any(|r| filter.iter().zip(r).all(|((_, c), v)| c.keeps(*v)));
                assert_eq!(keeps, want, "{why}: exact where known");
            }
        };
        for (why, cond, insert, want) in rows {
            let sql = match cond {
                Some(c) => format!("SELECT COUNT(*) FROM t WHERE {c}"),
                None => "SELECT COUNT(*) FROM t".to_string(),
            };
            let recipe = read_shape(&sql)
                .and_then(|s| s.bind(("db".into(), "t".into()), &cols, false, 0, &sql))
                .unwrap_or_else(|e| panic!("{why}: {e:?}"));
            check(why, &recipe.filter, insert, *want);
        }
        // A collation-sensitive string: no recipe compares one (its WHERE refuses), and a
        // summary given one falls back to "may match", whatever the string.
        let on_name = [("name".to_string(), Cond::In(vec![1]))];
        for insert in [
            "INSERT INTO t (name) VALUES ('abc')",
            "INSERT INTO t (name) VALUES ('ABC')",
            "INSERT INTO t (name) VALUES (1)",
        ] {
            check("a string column may match", &on_name, insert, true);
        }
        // A conjunct without a slot is left out: it may match more, never less.
        let left_out = Summary::of(&[("a".to_string(), Cond::In(vec![5]))], |_| None);
        assert!(left_out.is_any() && left_out.may_match(&[], 1));
        assert!(!left_out.may_match(&[], 0), "no row changes nothing");
    }

    /// One row per session setting that changes a result's rows or their text: no recipe.
    #[test]
    fn sessions_that_change_results_carry_no_recipe() {
        let free = SessionRows {
            select_limited: false,
            results_ascii: true,
            reads_limited: false,
        };
        for (s, want, why) in [
            (
                free,
                Ok(()),
                "the default sql_select_limit, ASCII results, no limit: patched",
            ),
            (
                SessionRows {
                    select_limited: true,
                    ..free
                },
                Err(Refusal::SelectLimit),
                "sql_select_limit set or inherited: a new group may land past the cut",
            ),
            (
                SessionRows {
                    results_ascii: false,
                    ..free
                },
                Err(Refusal::ResultsCharset),
                "character_set_results filename or ucs2: the server converts the digits",
            ),
            (
                SessionRows {
                    reads_limited: true,
                    ..free
                },
                Err(Refusal::ReadLimit),
                "max_join_size: the grown read may be refused (ERROR 1104)",
            ),
        ] {
            assert_eq!(session_rows(s), want, "{why}");
        }
    }

    /// Canonical temporal literals only, as seconds that order and step as the server's
    /// whole-second values do; written back the same.
    #[test]
    fn temporal_literals_are_canonical_or_refused() {
        let rows: &[(&str, Option<Lit>)] = &[
            ("2024-01-08", Some(Lit::Date)),
            ("2024-02-29", Some(Lit::Date)),
            ("2000-02-29", Some(Lit::Date)),
            ("1000-01-01", Some(Lit::Date)),
            ("9999-12-31 23:59:59", Some(Lit::DateTime)),
            ("2024-01-08 00:00:00", Some(Lit::DateTime)),
            ("1970-01-01 00:00:00", Some(Lit::DateTime)),
            ("2023-02-29", None),
            ("1900-02-29", None),
            ("2024-04-31", None),
            ("2024-13-01", None),
            ("2024-00-10", None),
            ("2024-01-00", None),
            ("0000-00-00", None),
            ("0999-12-31", None),
            ("2024-1-08", None),
            ("2024/01/08", None),
            ("20240108", None),
            ("2024-01-08 24:00:00", None),
            ("2024-01-08 10:60:00", None),
            ("2024-01-08 10:00:60", None),
            ("2024-01-08 10:00", None),
            ("2024-01-08 10:00:00.0", None),
            ("2024-01-08T10:00:00", None),
            (" 2024-01-08", None),
            ("2024-01-08 ", None),
            ("+024-01-08", None),
        ];
        for (text, want) in rows {
            let got = temporal(text);
            assert_eq!(got.map(|(_, k)| k), *want, "{text}");
            if let Some((v, k)) = got {
                assert_eq!(temporal_text(v, k == Lit::DateTime), *text, "{text}");
            }
        }
        let v = |s: &str| temporal(s).unwrap().0;
        assert_eq!(v("1970-01-01"), 0);
        assert_eq!(v("2024-01-08") - 1, v("2024-01-07 23:59:59"));
        assert_eq!(v("2024-03-01") - v("2024-02-28"), 2 * DAY);
        assert_eq!(v("2024-01-08 00:00:00"), v("2024-01-08"));
        assert!(v("1969-12-31 23:59:59") < 0);
        assert_eq!(
            temporal_text(v("1969-12-31 23:59:59"), true),
            "1969-12-31 23:59:59"
        );
    }

    /// Every read rule: recognised, or refused with its reason.
    #[test]
    fn reads_are_recognised_or_refused() {
        use Refusal::*;
        let rows: &[(&str, &str, std::result::Result<(), Refusal>)] = &[
            ("COUNT(*) of a table", "SELECT COUNT(*) FROM t", Ok(())),
            (
                "qualified table, alias",
                "SELECT COUNT(*) AS n FROM db.t",
                Ok(()),
            ),
            (
                "COUNT and SUM, filter",
                "SELECT COUNT(*), COUNT(b), SUM(b) FROM t WHERE a = 5 AND c IN (1, -2)",
                Ok(()),
            ),
            (
                "literal on the left",
                "SELECT SUM(a) FROM t WHERE 5 = c",
                Ok(()),
            ),
            (
                "parenthesised conjunction",
                "SELECT SUM(a) FROM t WHERE (a = 1 AND (c = 2))",
                Ok(()),
            ),
            (
                "backquoted names",
                "SELECT SUM(`b`) FROM `t` WHERE `a` = 1",
                Ok(()),
            ),
            (
                "names that are keywords to sqlparser",
                "SELECT COUNT(*), SUM(value) FROM status WHERE id = 1",
                Ok(()),
            ),
            (
                "a keyword as a name and as a clause",
                "SELECT SUM(a) AS `order` FROM t WHERE a = 1 ORDER BY a",
                Err(NotSimple),
            ),
            (
                "a keyword the shape does not hold",
                "SELECT COUNT(*) FROM t WHERE a = 1 AND a = 2 DIV 1",
                Err(Predicate),
            ),
            (
                "GROUP BY a column, its key selected",
                "SELECT a, COUNT(*), SUM(b) FROM t GROUP BY a",
                Ok(()),
            ),
            (
                "GROUP BY DATE(col), the key anywhere and named",
                "SELECT COUNT(*), DATE(dt) AS day, SUM(b) FROM t WHERE dt >= '2024-01-08' \
                 AND dt < '2024-01-15 00:00:00' GROUP BY DATE(dt)",
                Ok(()),
            ),
            (
                "GROUP BY whose key is not selected: refused (a new group has no place)",
                "SELECT COUNT(*) FROM t GROUP BY a",
                Err(Aggregate),
            ),
            (
                "a plain column that is not the key: refused",
                "SELECT c, COUNT(*) FROM t GROUP BY a",
                Err(Aggregate),
            ),
            (
                "DATE(col) selected, col grouped: refused",
                "SELECT DATE(dt), COUNT(*) FROM t GROUP BY dt",
                Err(Aggregate),
            ),
            (
                "a plain column without GROUP BY: refused",
                "SELECT a, COUNT(*) FROM t",
                Err(Aggregate),
            ),
            (
                "two GROUP BY expressions: refused",
                "SELECT a, c, COUNT(*) FROM t GROUP BY a, c",
                Err(NotSimple),
            ),
            (
                "GROUP BY another function: refused",
                "SELECT YEAR(dt), COUNT(*) FROM t GROUP BY YEAR(dt)",
                Err(NotSimple),
            ),
            (
                "WITH ROLLUP: refused",
                "SELECT a, COUNT(*) FROM t GROUP BY a WITH ROLLUP",
                Err(NotSimple),
            ),
            (
                "ORDER BY NULL (unsorted groups): refused",
                "SELECT a, COUNT(*) FROM t GROUP BY a ORDER BY NULL",
                Err(NotSimple),
            ),
            (
                "HAVING: refused",
                "SELECT a, COUNT(*) FROM t GROUP BY a HAVING COUNT(*) > 1",
                Err(NotSimple),
            ),
            (
                "a date not zero-padded: refused",
                "SELECT COUNT(*) FROM t WHERE dt >= '2024-1-08'",
                Err(Predicate),
            ),
            (
                "a date that does not exist: refused",
                "SELECT COUNT(*) FROM t WHERE dt < '2023-02-29'",
                Err(Predicate),
            ),
            (
                "fractional seconds: refused",
                "SELECT COUNT(*) FROM t WHERE dt < '2024-01-08 10:00:00.5'",
                Err(Predicate),
            ),
            (
                "a T separator: refused",
                "SELECT COUNT(*) FROM t WHERE dt < '2024-01-08T10:00:00'",
                Err(Predicate),
            ),
            (
                "a typed literal: refused",
                "SELECT COUNT(*) FROM t WHERE dt < DATE '2024-01-08'",
                Err(Predicate),
            ),
            (
                "an IN list of mixed kinds: refused",
                "SELECT COUNT(*) FROM t WHERE dt IN ('2024-01-08', '2024-01-08 10:00:00')",
                Err(Predicate),
            ),
            (
                "a BETWEEN of mixed kinds: refused",
                "SELECT COUNT(*) FROM t WHERE dt BETWEEN '2024-01-08' AND '2024-01-09 10:00:00'",
                Err(Predicate),
            ),
            (
                "a number compared as a date: refused at binding, read here",
                "SELECT COUNT(*) FROM t WHERE dt >= 20240108",
                Ok(()),
            ),
            (
                "DISTINCT: refused",
                "SELECT COUNT(DISTINCT a) FROM t",
                Err(Aggregate),
            ),
            (
                "OR: refused",
                "SELECT COUNT(*) FROM t WHERE a = 1 OR a = 2",
                Err(Predicate),
            ),
            (
                "|| is OR on the server: refused",
                "SELECT COUNT(*) FROM t WHERE a = 1 || a = 2",
                Err(Token),
            ),
            (
                "XOR: refused",
                "SELECT COUNT(*) FROM t WHERE a = 1 XOR a = 2",
                Err(Predicate),
            ),
            (
                "NOT IN: refused",
                "SELECT COUNT(*) FROM t WHERE a NOT IN (1)",
                Err(Predicate),
            ),
            (
                "ranges, the literal on either side",
                "SELECT COUNT(*) FROM t WHERE a > 1 AND 5 >= c AND b < -2 AND 0 <= u",
                Ok(()),
            ),
            (
                "BETWEEN with =, IN and a range",
                "SELECT SUM(b) FROM t WHERE a BETWEEN -3 AND 7 AND c = 1 AND u IN (1) AND a <= 5",
                Ok(()),
            ),
            (
                "BIGINT UNSIGNED's largest and BIGINT's smallest as bounds",
                "SELECT COUNT(*) FROM t WHERE u <= 18446744073709551615 AND b >= -9223372036854775808",
                Ok(()),
            ),
            (
                "a bound past BIGINT UNSIGNED (a DECIMAL): refused",
                "SELECT COUNT(*) FROM t WHERE u < 18446744073709551616",
                Err(Predicate),
            ),
            (
                "a bound below BIGINT (a DECIMAL): refused",
                "SELECT COUNT(*) FROM t WHERE b > -9223372036854775809",
                Err(Predicate),
            ),
            (
                "NOT BETWEEN: refused",
                "SELECT COUNT(*) FROM t WHERE a NOT BETWEEN 1 AND 2",
                Err(Predicate),
            ),
            (
                "BETWEEN columns: refused",
                "SELECT COUNT(*) FROM t WHERE a BETWEEN c AND 5",
                Err(Predicate),
            ),
            (
                "BETWEEN of a literal: refused",
                "SELECT COUNT(*) FROM t WHERE 3 BETWEEN a AND c",
                Err(Predicate),
            ),
            (
                "a range of a string: refused",
                "SELECT COUNT(*) FROM t WHERE a < '5'",
                Err(Predicate),
            ),
            (
                "a range of a decimal: refused",
                "SELECT COUNT(*) FROM t WHERE a >= 4.5",
                Err(Predicate),
            ),
            (
                "two columns compared: refused",
                "SELECT COUNT(*) FROM t WHERE a < c",
                Err(Predicate),
            ),
            (
                "a chained comparison: refused",
                "SELECT COUNT(*) FROM t WHERE a < 5 < 6",
                Err(Predicate),
            ),
            (
                "a comparison compared: refused",
                "SELECT COUNT(*) FROM t WHERE a BETWEEN 1 AND 2 = 1",
                Err(Predicate),
            ),
            (
                "<>: refused",
                "SELECT COUNT(*) FROM t WHERE a <> 1",
                Err(Token),
            ),
            (
                "!=: refused",
                "SELECT COUNT(*) FROM t WHERE a != 1",
                Err(Token),
            ),
            (
                "<=> (NULL-safe): refused",
                "SELECT COUNT(*) FROM t WHERE a <=> 1",
                Err(Token),
            ),
            (
                "a shift: refused",
                "SELECT COUNT(*) FROM t WHERE a < 1 << 2",
                Err(Token),
            ),
            (
                "a string literal: refused",
                "SELECT COUNT(*) FROM t WHERE a = '1'",
                Err(Predicate),
            ),
            (
                "a decimal literal: refused",
                "SELECT COUNT(*) FROM t WHERE a = 1.0",
                Err(Predicate),
            ),
            (
                "an exponent: refused",
                "SELECT COUNT(*) FROM t WHERE a = 1e0",
                Err(Predicate),
            ),
            (
                "double quotes (ANSI_QUOTES decides): refused",
                "SELECT COUNT(*) FROM t WHERE \"a\" = 1",
                Err(Token),
            ),
            (
                "a comment: refused",
                "SELECT COUNT(*) FROM t /* x */",
                Err(Token),
            ),
            (
                "an executable comment: refused",
                "SELECT COUNT(*) FROM t /*!50000 WHERE a = 1 */",
                Err(Token),
            ),
            (
                "a # comment: refused",
                "SELECT COUNT(*) FROM t # x",
                Err(Token),
            ),
            (
                "a placeholder: refused",
                "SELECT COUNT(*) FROM t WHERE a = ?",
                Err(Token),
            ),
            (
                "a backslash: refused",
                "SELECT COUNT(*) FROM t WHERE a = 1 AND 'x\\'",
                Err(Token),
            ),
            (
                "a join: refused",
                "SELECT COUNT(*) FROM t JOIN u ON t.a = u.a",
                Err(NotSimple),
            ),
            (
                "a comma join: refused",
                "SELECT COUNT(*) FROM t, u",
                Err(NotSimple),
            ),
            (
                "a subquery: refused",
                "SELECT COUNT(*) FROM (SELECT a FROM t) AS x",
                Err(NotSimple),
            ),
            ("a plain column: refused", "SELECT a FROM t", Err(Aggregate)),
            (
                "MIN and MAX among the others",
                "SELECT MIN(a), MAX(a), COUNT(*), MAX(u) AS `max` FROM t WHERE c > 0",
                Ok(()),
            ),
            (
                "MIN(DISTINCT): refused",
                "SELECT MIN(DISTINCT a) FROM t",
                Err(Aggregate),
            ),
            (
                "MAX of an expression: refused",
                "SELECT MAX(a * 2) FROM t",
                Err(Aggregate),
            ),
            ("MAX(*): refused", "SELECT MAX(*) FROM t", Err(Aggregate)),
            (
                "MIN of two arguments: refused",
                "SELECT MIN(a, c) FROM t",
                Err(Aggregate),
            ),
            (
                "MAX as a window: refused",
                "SELECT MAX(a) OVER () FROM t",
                Err(Aggregate),
            ),
            (
                "LEAST is no aggregate: refused",
                "SELECT LEAST(a, 1) FROM t",
                Err(Aggregate),
            ),
            ("AVG: refused", "SELECT AVG(a) FROM t", Err(Aggregate)),
            (
                "an unknown function: refused",
                "SELECT f(a) FROM t",
                Err(Aggregate),
            ),
            (
                "SUM of an expression: refused",
                "SELECT SUM(a * 2) FROM t",
                Err(Aggregate),
            ),
            ("SUM(*): refused", "SELECT SUM(*) FROM t", Err(Aggregate)),
            (
                "a qualified column: refused",
                "SELECT SUM(t.a) FROM t",
                Err(Aggregate),
            ),
            (
                "a function in WHERE: refused",
                "SELECT COUNT(*) FROM t WHERE f(a) = 1",
                Err(Predicate),
            ),
            (
                "an empty IN list is not SQL: refused",
                "SELECT COUNT(*) FROM t WHERE a IN ()",
                Err(Unparsable),
            ),
            (
                "LIMIT: refused",
                "SELECT COUNT(*) FROM t LIMIT 1",
                Err(NotSimple),
            ),
            (
                "FOR UPDATE: refused",
                "SELECT COUNT(*) FROM t FOR UPDATE",
                Err(NotSimple),
            ),
            (
                "two statements: refused",
                "SELECT COUNT(*) FROM t; SELECT 1",
                Err(Token),
            ),
            (
                "an INSERT is no read",
                "INSERT INTO t VALUES (1)",
                Err(NotSimple),
            ),
        ];
        for (why, sql, want) in rows {
            let got = read_shape(sql).map(drop);
            assert_eq!(got, *want, "{why}: {sql}");
        }
        let s =
            read_shape("SELECT COUNT(*), SUM(b) FROM db.T WHERE a = 5 AND c IN (1, -2)").unwrap();
        assert_eq!(s.table, TableRef::new(Some("db"), "t"));
        assert_eq!(s.aggs, vec![Agg::CountStar, Agg::Sum("b".into())]);
        assert_eq!(
            s.filter,
            vec![
                ("a".into(), Cond::In(vec![5])),
                ("c".into(), Cond::In(vec![1, -2]))
            ]
        );
        let s = read_shape(
            "SELECT COUNT(*) FROM t WHERE a < 5 AND 5 < a AND a <= -1 AND -1 <= a AND a BETWEEN 3 AND 2",
        )
        .unwrap();
        let r = |lo, hi| Cond::Range { lo, hi };
        let day = |s: &str| temporal(s).unwrap().0;
        let g = read_shape(
            "SELECT DATE(dt), COUNT(*) FROM t WHERE dt >= '2024-01-08' AND dt < '2024-01-15' \
             AND '2024-01-09 10:00:00' <= dt GROUP BY DATE(dt)",
        )
        .unwrap();
        assert_eq!(
            g.group,
            Some(Group {
                column: "dt".into(),
                date_of: true
            })
        );
        assert_eq!(g.aggs, vec![Agg::Key, Agg::CountStar]);
        assert_eq!(
            g.filter,
            vec![
                ("dt".into(), r(Some(day("2024-01-08")), None)),
                ("dt".into(), r(None, Some(day("2024-01-15") - 1))),
                ("dt".into(), r(Some(day("2024-01-09 10:00:00")), None)),
            ]
        );
        assert_eq!(g.lits, vec![Lit::Date, Lit::Date, Lit::DateTime]);
        assert_eq!(
            s.filter,
            vec![
                ("a".into(), r(None, Some(4))),
                ("a".into(), r(Some(6), None)),
                ("a".into(), r(None, Some(-1))),
                ("a".into(), r(Some(-1), None)),
                ("a".into(), r(Some(3), Some(2))),
            ]
        );
    }

    /// Binding to the table's columns: integer columns the server does not fill.
    #[test]
    fn shapes_bind_to_integer_columns() {
        let rows: &[(&str, &str, std::result::Result<(), Refusal>)] = &[
            (
                "integer columns",
                "SELECT SUM(b), COUNT(c) FROM t WHERE a = 1",
                Ok(()),
            ),
            ("COUNT(*) only", "SELECT COUNT(*) FROM t", Ok(())),
            (
                "a string column summed: refused",
                "SELECT SUM(s) FROM t",
                Err(Refusal::Column),
            ),
            (
                "a string column filtered: refused",
                "SELECT COUNT(*) FROM t WHERE s = 1",
                Err(Refusal::Column),
            ),
            (
                "an unknown column: refused",
                "SELECT SUM(zz) FROM t",
                Err(Refusal::Column),
            ),
            (
                "AUTO_INCREMENT: refused",
                "SELECT COUNT(*) FROM t WHERE `id` = 1",
                Err(Refusal::Generated),
            ),
            (
                "MIN and MAX of integer columns",
                "SELECT MIN(c), MAX(u), MAX(b) FROM t",
                Ok(()),
            ),
            (
                "MAX of a string column: refused",
                "SELECT MAX(s) FROM t",
                Err(Refusal::Column),
            ),
            (
                "MIN of AUTO_INCREMENT (the server fills it): refused",
                "SELECT MIN(`id`) FROM t",
                Err(Refusal::Generated),
            ),
            (
                "MAX of a column whose range is no integer type: refused",
                "SELECT MAX(odd) FROM t",
                Err(Refusal::Column),
            ),
            (
                "a DATETIME range with dates and datetimes, grouped by its day",
                "SELECT DATE(dt), COUNT(*), SUM(b) FROM t WHERE dt >= '2024-01-08' \
                 AND dt < '2024-01-15 12:00:00' GROUP BY DATE(dt)",
                Ok(()),
            ),
            (
                "a DATE compared with dates, grouped by itself or its DATE()",
                "SELECT dd, COUNT(dt) FROM t WHERE dd BETWEEN '2024-01-01' AND '2024-12-31' \
                 GROUP BY dd",
                Ok(()),
            ),
            (
                "DATE() of a DATE",
                "SELECT DATE(dd), COUNT(*) FROM t GROUP BY DATE(dd)",
                Ok(()),
            ),
            (
                "grouped by a DATETIME, an integer column",
                "SELECT dt, COUNT(*) FROM t GROUP BY dt",
                Ok(()),
            ),
            (
                "grouped by an integer",
                "SELECT c, MIN(a) FROM t GROUP BY c",
                Ok(()),
            ),
            (
                "a DATE compared with a datetime: refused",
                "SELECT COUNT(*) FROM t WHERE dd < '2024-01-08 12:00:00'",
                Err(Refusal::Column),
            ),
            (
                "a DATETIME with fractional seconds: refused",
                "SELECT COUNT(*) FROM t WHERE f >= '2024-01-08'",
                Err(Refusal::Column),
            ),
            (
                "grouped by DATE() of a DATETIME(3): refused",
                "SELECT DATE(f), COUNT(*) FROM t GROUP BY DATE(f)",
                Err(Refusal::Column),
            ),
            (
                "a DATETIME compared with a number: refused",
                "SELECT COUNT(*) FROM t WHERE dt >= 20240108",
                Err(Refusal::Column),
            ),
            (
                "an integer compared with a date: refused",
                "SELECT COUNT(*) FROM t WHERE a = '2024-01-08'",
                Err(Refusal::Column),
            ),
            (
                "DATE() of an integer: refused",
                "SELECT DATE(a), COUNT(*) FROM t GROUP BY DATE(a)",
                Err(Refusal::Column),
            ),
            (
                "grouped by a string column: refused",
                "SELECT s, COUNT(*) FROM t GROUP BY s",
                Err(Refusal::Column),
            ),
            (
                "grouped by a column whose range is no integer type: refused",
                "SELECT odd, COUNT(*) FROM t GROUP BY odd",
                Err(Refusal::Column),
            ),
            (
                "grouped by AUTO_INCREMENT: refused",
                "SELECT `id`, COUNT(*) FROM t GROUP BY `id`",
                Err(Refusal::Generated),
            ),
            (
                "SUM of a DATETIME: refused",
                "SELECT SUM(dt) FROM t",
                Err(Refusal::Column),
            ),
        ];
        let mut columns = temporal_table();
        columns.push(("odd".into(), int(0, 1000, true)));
        for (why, sql, want) in rows {
            let got = read_shape(sql)
                .and_then(|s| s.bind(("db".into(), "t".into()), &columns, false, 0, sql))
                .map(drop);
            assert_eq!(got, *want, "{why}: {sql}");
        }
    }

    /// Every write rule: the values of the used columns, or why not.
    #[test]
    fn inserts_give_known_values_or_are_refused() {
        use Refusal::*;
        type Want = std::result::Result<Vec<Vec<Option<i128>>>, Refusal>;
        let used = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let rows: &[(&str, &str, &[&str], Want)] = &[
            (
                "one row, a column list",
                "INSERT INTO t (a, b) VALUES (1, 2)",
                &["a", "b"],
                Ok(vec![vec![Some(1), Some(2)]]),
            ),
            (
                "several rows, negatives, NULL",
                "INSERT t (b, a) VALUES (-5, 1), (NULL, 2)",
                &["a", "b"],
                Ok(vec![vec![Some(1), Some(-5)], vec![Some(2), None]]),
            ),
            (
                "no column list: the table's order",
                "INSERT INTO t VALUES (1, 2, 3, 4, 'x', 5)",
                &["b", "c"],
                Ok(vec![vec![Some(3), Some(4)]]),
            ),
            (
                "unused columns may hold any literal",
                "INSERT INTO t (a, s, b) VALUES (1, 'x''y', 2.5)",
                &["a"],
                Ok(vec![vec![Some(1)]]),
            ),
            (
                "a column named like a keyword",
                "INSERT INTO t (id, a) VALUES (3, 1)",
                &["a"],
                Ok(vec![vec![Some(1)]]),
            ),
            (
                "VALUE is VALUES",
                "INSERT INTO t (a) VALUE (7)",
                &["a"],
                Ok(vec![vec![Some(7)]]),
            ),
            (
                "BIGINT's largest",
                "INSERT INTO t (b) VALUES (9223372036854775807)",
                &["b"],
                Ok(vec![vec![Some(i64::MAX as i128)]]),
            ),
            (
                "past BIGINT: refused",
                "INSERT INTO t (b) VALUES (9223372036854775808)",
                &["b"],
                Err(Range),
            ),
            (
                "past TINYINT: refused",
                "INSERT INTO t (c) VALUES (128)",
                &["c"],
                Err(Range),
            ),
            (
                "NULL into NOT NULL: refused",
                "INSERT INTO t (c) VALUES (NULL)",
                &["c"],
                Err(Range),
            ),
            (
                "a used column omitted (its default unknown): refused",
                "INSERT INTO t (a) VALUES (1)",
                &["b"],
                Err(Omitted),
            ),
            (
                "a string into a used integer column: refused",
                "INSERT INTO t (a) VALUES ('1')",
                &["a"],
                Err(Value),
            ),
            (
                "a decimal into a used integer column: refused",
                "INSERT INTO t (a) VALUES (1.0)",
                &["a"],
                Err(Value),
            ),
            (
                "an expression anywhere: refused",
                "INSERT INTO t (a, b) VALUES (1, 1 - 1)",
                &["a"],
                Err(Value),
            ),
            (
                "a function anywhere: refused",
                "INSERT INTO t (a, b) VALUES (1, f(1))",
                &["a"],
                Err(Value),
            ),
            (
                "DEFAULT: refused",
                "INSERT INTO t (a, b) VALUES (1, DEFAULT)",
                &["a"],
                Err(Value),
            ),
            (
                "IGNORE: refused",
                "INSERT IGNORE INTO t (a) VALUES (1)",
                &["a"],
                Err(NotInsert),
            ),
            (
                "REPLACE: refused",
                "REPLACE INTO t (a) VALUES (1)",
                &["a"],
                Err(NotInsert),
            ),
            (
                "ON DUPLICATE KEY: refused",
                "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = 2",
                &["a"],
                Err(NotInsert),
            ),
            (
                "INSERT … SELECT: refused",
                "INSERT INTO t (a) SELECT 1",
                &["a"],
                Err(NotInsert),
            ),
            (
                "INSERT … SET: refused",
                "INSERT INTO t SET a = 1",
                &["a"],
                Err(NotInsert),
            ),
            (
                "DELAYED: refused",
                "INSERT DELAYED INTO t (a) VALUES (1)",
                &["a"],
                Err(NotInsert),
            ),
            (
                "a placeholder: refused",
                "INSERT INTO t (a) VALUES (?)",
                &["a"],
                Err(Token),
            ),
            (
                "a row of the wrong width: refused",
                "INSERT INTO t (a, b) VALUES (1)",
                &["a"],
                Err(NotInsert),
            ),
            (
                "a column twice: refused",
                "INSERT INTO t (a, a) VALUES (1, 2)",
                &["a"],
                Err(NotInsert),
            ),
            (
                "AUTO_INCREMENT used: refused",
                "INSERT INTO t (`id`) VALUES (1)",
                &["id"],
                Err(Generated),
            ),
            (
                "a comment: refused",
                "INSERT INTO t (a) VALUES (1) -- x",
                &["a"],
                Err(Token),
            ),
        ];
        for (why, sql, u, want) in rows {
            let got = insert_rows(sql).and_then(|i| i.values_of(&table(), &used(u)));
            assert_eq!(got, *want, "{why}: {sql}");
        }
        // DATE and DATETIME columns: canonical literals, as seconds.
        let v = |s: &str| Some(temporal(s).unwrap().0);
        let rows: &[(&str, &str, &[&str], Want)] = &[
            (
                "a datetime and a date",
                "INSERT INTO t (dt, dd, a) VALUES ('2024-01-08 10:00:00', '2024-01-09', 1)",
                &["dt", "dd"],
                Ok(vec![vec![v("2024-01-08 10:00:00"), v("2024-01-09")]]),
            ),
            (
                "a date into a DATETIME is its midnight; NULL where nullable",
                "INSERT INTO t (dt, dd) VALUES ('2024-01-08', '2024-01-09'), (NULL, '2024-01-10')",
                &["dt", "dd"],
                Ok(vec![
                    vec![v("2024-01-08 00:00:00"), v("2024-01-09")],
                    vec![None, v("2024-01-10")],
                ]),
            ),
            (
                "a datetime into a DATE (truncated, with a note): refused",
                "INSERT INTO t (dd) VALUES ('2024-01-09 10:00:00')",
                &["dd"],
                Err(Value),
            ),
            (
                "a date not zero-padded: refused",
                "INSERT INTO t (dt, dd) VALUES ('2024-1-8', '2024-01-09')",
                &["dt"],
                Err(Value),
            ),
            (
                "a date that does not exist: refused",
                "INSERT INTO t (dt, dd) VALUES ('2024-02-30', '2024-01-09')",
                &["dt"],
                Err(Value),
            ),
            (
                "fractional seconds: refused",
                "INSERT INTO t (dt, dd) VALUES ('2024-01-08 10:00:00.25', '2024-01-09')",
                &["dt"],
                Err(Value),
            ),
            (
                "a number into a DATETIME: refused",
                "INSERT INTO t (dt, dd) VALUES (20240108, '2024-01-09')",
                &["dt"],
                Err(Value),
            ),
            (
                "a date into an integer column: refused",
                "INSERT INTO t (a) VALUES ('2024-01-09')",
                &["a"],
                Err(Value),
            ),
            (
                "NULL into a NOT NULL DATE: refused",
                "INSERT INTO t (dd) VALUES (NULL)",
                &["dd"],
                Err(Range),
            ),
            (
                "a DATETIME(3) used: refused",
                "INSERT INTO t (f) VALUES ('2024-01-08 10:00:00')",
                &["f"],
                Err(Column),
            ),
        ];
        for (why, sql, u, want) in rows {
            let got = insert_rows(sql).and_then(|i| i.values_of(&temporal_table(), &used(u)));
            assert_eq!(got, *want, "{why}: {sql}");
        }
        let i = insert_rows("INSERT INTO db.T (a) VALUES (1)").unwrap();
        assert_eq!(i.table, TableRef::new(Some("db"), "t"));
    }

    /// A one-row result as the server sends it: column count, definitions of `types`
    /// (type, decimals), an EOF unless `deprecate_eof`, the row, the terminator. Returns
    /// the bytes and the offset of the terminator's status flags.
    fn result(types: &[(u8, u8)], row: &[u8], deprecate_eof: bool) -> (Vec<u8>, usize) {
        let defs: Vec<(u8, u16, u8)> = types.iter().map(|(t, d)| (*t, 0x81, *d)).collect();
        result_defs(&defs, row, deprecate_eof)
    }

    /// [`result`] with each column's flags: (type, flags, decimals).
    fn result_defs(types: &[(u8, u16, u8)], row: &[u8], deprecate_eof: bool) -> (Vec<u8>, usize) {
        result_rows(types, &[row.to_vec()], deprecate_eof)
    }

    /// [`result_defs`] with any number of rows.
    fn result_rows(
        types: &[(u8, u16, u8)],
        rows: &[Vec<u8>],
        deprecate_eof: bool,
    ) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut seq = 1u8;
        let mut frame = |out: &mut Vec<u8>, p: &[u8]| {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes()[..3]);
            out.push(seq);
            seq += 1;
            out.extend_from_slice(p);
        };
        let mut count = BytesMut::new();
        put_lenenc(&mut count, types.len() as u64);
        frame(&mut out, &count);
        for (i, (ty, flags, dec)) in types.iter().enumerate() {
            let mut d = BytesMut::new();
            for s in ["def", "db", "t", "t", &format!("c{i}"), ""] {
                put_lenenc_str(&mut d, s.as_bytes());
            }
            d.put_u8(0x0c);
            d.put_u16_le(63);
            d.put_u32_le(21);
            d.put_u8(*ty);
            d.put_u16_le(*flags);
            d.put_u8(*dec);
            d.put_u16_le(0);
            frame(&mut out, &d);
        }
        if !deprecate_eof {
            frame(&mut out, &[0xfe, 0, 0, 0x02, 0]);
        }
        for row in rows {
            frame(&mut out, row);
        }
        let status_at;
        if deprecate_eof {
            status_at = out.len() + 4 + 3;
            frame(&mut out, &[0xfe, 0, 0, 0x02, 0, 0, 0]);
        } else {
            status_at = out.len() + 4 + 3;
            frame(&mut out, &[0xfe, 0, 0, 0x02, 0]);
        }
        (out, status_at)
    }

    fn text_row(vals: &[Option<&str>]) -> Vec<u8> {
        let mut r = BytesMut::new();
        for v in vals {
            match v {
                None => r.put_u8(0xfb),
                Some(s) => put_lenenc_str(&mut r, s.as_bytes()),
            }
        }
        r.to_vec()
    }

    fn binary_row(types: &[(u8, u8)], vals: &[Option<i128>]) -> Vec<u8> {
        // Each column encoded as its type says: a DECIMAL as a SUM's, the rest as integers.
        let aggs = types
            .iter()
            .map(|(t, _)| match *t {
                TYPE_NEWDECIMAL => Agg::Sum("x".into()),
                _ => Agg::CountStar,
            })
            .collect();
        let recipe = Recipe {
            schema: String::new(),
            table: String::new(),
            scales: vec![0; types.len()],
            aggs,
            ints: Vec::new(),
            minmax: Vec::new(),
            filter: Vec::new(),
            kinds: Vec::new(),
            group: None,
            key: None,
            binary: true,
            digest: 0,
            sql: String::new(),
            join: None,
        };
        let (bytes, at) = result(types, &[0], true);
        let p = parse_result(&bytes, at).unwrap();
        recipe
            .encode_row(&p.types, vals, &vec![None; vals.len()])
            .unwrap()
            .to_vec()
    }

    const COUNT: (u8, u8) = (TYPE_LONGLONG, 0);
    const SUM: (u8, u8) = (TYPE_NEWDECIMAL, 0);

    /// Every arithmetic rule, text protocol: `SELECT COUNT(*), COUNT(b), SUM(b) FROM t
    /// WHERE a IN (1, 2)`, the stored row and the rows inserted (a, b) → the new row.
    #[test]
    fn patches_compute_what_the_server_would() {
        type Row<'a> = (
            &'a str,
            [Option<&'a str>; 3],
            &'a [[Option<i128>; 2]],
            std::result::Result<[Option<&'a str>; 3], Refusal>,
        );
        let rows: &[Row] = &[
            (
                "one matching row",
                [Some("2"), Some("2"), Some("10")],
                &[[Some(1), Some(5)]],
                Ok([Some("3"), Some("3"), Some("15")]),
            ),
            (
                "a negative value",
                [Some("2"), Some("2"), Some("10")],
                &[[Some(2), Some(-15)]],
                Ok([Some("3"), Some("3"), Some("-5")]),
            ),
            (
                "a NULL summed: counted by COUNT(*) only",
                [Some("2"), Some("2"), Some("10")],
                &[[Some(1), None]],
                Ok([Some("3"), Some("2"), Some("10")]),
            ),
            (
                "a row the WHERE keeps out: unchanged",
                [Some("2"), Some("2"), Some("10")],
                &[[Some(3), Some(5)]],
                Ok([Some("2"), Some("2"), Some("10")]),
            ),
            (
                "NULL in the filtered column matches nothing",
                [Some("2"), Some("2"), Some("10")],
                &[[None, Some(5)]],
                Ok([Some("2"), Some("2"), Some("10")]),
            ),
            (
                "SUM of nothing is NULL, and stays so for NULLs",
                [Some("0"), Some("0"), None],
                &[[Some(1), None]],
                Ok([Some("1"), Some("0"), None]),
            ),
            (
                "SUM of nothing becomes the first value",
                [Some("0"), Some("0"), None],
                &[[Some(1), Some(-7)]],
                Ok([Some("1"), Some("1"), Some("-7")]),
            ),
            (
                "several rows, some kept out",
                [Some("0"), Some("0"), None],
                &[[Some(1), Some(1)], [Some(9), Some(100)], [Some(2), Some(2)]],
                Ok([Some("2"), Some("2"), Some("3")]),
            ),
            (
                "sums past BIGINT are DECIMAL digits",
                [Some("1"), Some("1"), Some("9223372036854775807")],
                &[[Some(1), Some(9223372036854775807)]],
                Ok([Some("2"), Some("2"), Some("18446744073709551614")]),
            ),
            (
                "a NULL COUNT is no result of this shape: refused",
                [None, Some("0"), None],
                &[[Some(1), Some(1)]],
                Err(Refusal::Result),
            ),
            (
                "a fraction is no DECIMAL(…,0): refused",
                [Some("1"), Some("1"), Some("1.5")],
                &[[Some(1), Some(1)]],
                Err(Refusal::Result),
            ),
        ];
        let recipe = read_shape("SELECT COUNT(*), COUNT(b), SUM(b) FROM t WHERE a IN (1, 2)")
            .unwrap()
            .bind(("db".into(), "t".into()), &table(), false, 0, "")
            .unwrap();
        assert_eq!(
            recipe.used_columns(),
            vec!["a".to_string(), "b".to_string()]
        );
        for (why, before, inserted, want) in rows {
            for deprecate_eof in [false, true] {
                let (bytes, at) = result(&[COUNT, COUNT, SUM], &text_row(before), deprecate_eof);
                let ins: Vec<Vec<Option<i128>>> = inserted.iter().map(|r| r.to_vec()).collect();
                let got = recipe.apply(&bytes, at, &ins, false);
                match want {
                    Ok(after) => {
                        let (expect, expect_at) =
                            result(&[COUNT, COUNT, SUM], &text_row(after), deprecate_eof);
                        let got = got.unwrap_or_else(|e| panic!("{why}: refused {e:?}"));
                        assert_eq!(&got.bytes[..], &expect[..], "{why}");
                        assert_eq!(got.status_at, expect_at, "{why}");
                        assert_eq!(got.changed, before != after, "{why}");
                    }
                    Err(e) => assert_eq!(got, Err(*e), "{why}"),
                }
            }
        }
    }

    /// Grouped results, text protocol: `SELECT DATE(dt), COUNT(*), SUM(a) FROM t WHERE
    /// dt >= '2024-01-08' AND dt < '2024-01-15' GROUP BY DATE(dt)`, the stored rows and
    /// the rows inserted (dt, a) → the new rows, in the key's order (NULL first, as the
    /// server sorts them).
    #[test]
    fn groups_compute_what_the_server_would() {
        type Groups<'a> = &'a [[Option<&'a str>; 3]];
        type Row<'a> = (
            &'a str,
            Groups<'a>,
            &'a [(Option<&'a str>, Option<i128>)],
            std::result::Result<Groups<'a>, Refusal>,
        );
        let g = |d: &'static str, n: &'static str, s: Option<&'static str>| [Some(d), Some(n), s];
        let rows: &[Row] = &[
            (
                "into an existing group",
                &[g("2024-01-10", "2", Some("10"))],
                &[(Some("2024-01-10 23:59:59"), Some(5))],
                Ok(&[g("2024-01-10", "3", Some("15"))]),
            ),
            (
                "a new group before, between and after the others",
                &[
                    g("2024-01-10", "2", Some("10")),
                    g("2024-01-12", "1", Some("1")),
                ],
                &[
                    (Some("2024-01-14 10:00:00"), Some(7)),
                    (Some("2024-01-09 10:00:00"), Some(2)),
                    (Some("2024-01-11 00:00:00"), Some(3)),
                ],
                Ok(&[
                    g("2024-01-09", "1", Some("2")),
                    g("2024-01-10", "2", Some("10")),
                    g("2024-01-11", "1", Some("3")),
                    g("2024-01-12", "1", Some("1")),
                    g("2024-01-14", "1", Some("7")),
                ]),
            ),
            (
                "no group yet: the first",
                &[],
                &[(Some("2024-01-08 00:00:00"), None)],
                Ok(&[g("2024-01-08", "1", None)]),
            ),
            (
                "a NULL summed in a group with a sum, and in a new group",
                &[g("2024-01-10", "2", Some("10"))],
                &[
                    (Some("2024-01-10 01:00:00"), None),
                    (Some("2024-01-11 01:00:00"), None),
                ],
                Ok(&[g("2024-01-10", "3", Some("10")), g("2024-01-11", "1", None)]),
            ),
            (
                "outside the range and at its bounds",
                &[g("2024-01-10", "2", Some("10"))],
                &[
                    (Some("2024-01-07 23:59:59"), Some(1)),
                    (Some("2024-01-15 00:00:00"), Some(1)),
                    (None, Some(1)),
                    (Some("2024-01-08 00:00:00"), Some(4)),
                    (Some("2024-01-14 23:59:59"), Some(6)),
                ],
                Ok(&[
                    g("2024-01-08", "1", Some("4")),
                    g("2024-01-10", "2", Some("10")),
                    g("2024-01-14", "1", Some("6")),
                ]),
            ),
            (
                "groups out of the key's order: refused",
                &[
                    g("2024-01-12", "1", Some("1")),
                    g("2024-01-10", "2", Some("10")),
                ],
                &[(Some("2024-01-11 00:00:00"), Some(1))],
                Err(Refusal::Result),
            ),
            (
                "a key twice: refused",
                &[
                    g("2024-01-10", "1", Some("1")),
                    g("2024-01-10", "2", Some("10")),
                ],
                &[(Some("2024-01-11 00:00:00"), Some(1))],
                Err(Refusal::Result),
            ),
            (
                "a key that is no date: refused",
                &[g("2024-01-10 00:00:00", "1", Some("1"))],
                &[(Some("2024-01-11 00:00:00"), Some(1))],
                Err(Refusal::Result),
            ),
        ];
        let recipe = read_shape(
            "SELECT DATE(dt), COUNT(*), SUM(a) FROM t WHERE dt >= '2024-01-08' \
             AND dt < '2024-01-15' GROUP BY DATE(dt)",
        )
        .unwrap()
        .bind(("db".into(), "t".into()), &temporal_table(), false, 0, "")
        .unwrap();
        assert_eq!(
            recipe.used_columns(),
            vec!["dt".to_string(), "a".to_string()]
        );
        let defs = [
            (TYPE_DATE, 0x80, 0),
            (TYPE_LONGLONG, 0x81, 0),
            (TYPE_NEWDECIMAL, 0x80, 0),
        ];
        let text_rows = |g: Groups| g.iter().map(|r| text_row(r)).collect::<Vec<_>>();
        for (why, before, inserted, want) in rows {
            for deprecate_eof in [false, true] {
                let (bytes, at) = result_rows(&defs, &text_rows(before), deprecate_eof);
                let ins: Vec<Vec<Option<i128>>> = inserted
                    .iter()
                    .map(|(d, a)| vec![d.map(|d| temporal(d).unwrap().0), *a])
                    .collect();
                let got = recipe.apply(&bytes, at, &ins, false);
                match want {
                    Ok(after) => {
                        let (expect, expect_at) =
                            result_rows(&defs, &text_rows(after), deprecate_eof);
                        let got = got.unwrap_or_else(|e| panic!("{why}: refused {e:?}"));
                        assert_eq!(&got.bytes[..], &expect[..], "{why}");
                        assert_eq!(
                            (got.rows_before, got.rows),
                            (before.len() as u64, after.len() as u64),
                            "{why}: rows"
                        );
                        assert_eq!(got.status_at, expect_at, "{why}");
                        assert_eq!(got.changed, before != after, "{why}");
                    }
                    Err(e) => assert_eq!(got, Err(*e), "{why}"),
                }
            }
        }
    }

    /// Grouped results in the binary protocol: a DATE key as 4 bytes, a DATETIME key as 4
    /// at midnight and 7 otherwise, an integer key in its width, NULL keys first; metadata
    /// of another type refused.
    #[test]
    fn grouped_binary_rows_and_metadata() {
        let bind = |sql: &str, binary| {
            read_shape(sql)
                .unwrap()
                .bind(("db".into(), "t".into()), &temporal_table(), binary, 0, sql)
                .unwrap()
        };
        let secs = |s: &str| temporal(s).unwrap().0;
        // Grouped by a DATETIME: its keys at midnight and not, a NULL key first.
        let r = bind("SELECT dt, COUNT(*) FROM t GROUP BY dt", true);
        let defs = [(TYPE_DATETIME, 0x80, 0), (TYPE_LONGLONG, 0x81, 0)];
        let mut noon = vec![0u8, 0, 7];
        noon.extend_from_slice(&2024u16.to_le_bytes());
        noon.extend_from_slice(&[1, 10, 12, 0, 5]);
        noon.extend_from_slice(&1i64.to_le_bytes());
        let mut midnight = vec![0u8, 0, 4];
        midnight.extend_from_slice(&2024u16.to_le_bytes());
        midnight.extend_from_slice(&[1, 9]);
        midnight.extend_from_slice(&2i64.to_le_bytes());
        let mut null_key = vec![0u8, 0b100];
        null_key.extend_from_slice(&1i64.to_le_bytes());
        let (bytes, at) = result_rows(&defs, &[noon.clone()], true);
        assert_eq!(
            r.values(&bytes, at),
            Some(vec![vec![Some(secs("2024-01-10 12:00:05")), Some(1)]])
        );
        let ins = [
            vec![Some(secs("2024-01-09 00:00:00"))],
            vec![Some(secs("2024-01-09 00:00:00"))],
            vec![None],
        ];
        let got = r.apply(&bytes, at, &ins, false).unwrap();
        let (want, want_at) = result_rows(&defs, &[null_key, midnight, noon.clone()], true);
        assert_eq!(&got.bytes[..], &want[..]);
        assert_eq!(got.status_at, want_at);
        // The stored DATETIME written otherwise than qcache would (7 bytes at midnight).
        let mut long_midnight = vec![0u8, 0, 7];
        long_midnight.extend_from_slice(&2024u16.to_le_bytes());
        long_midnight.extend_from_slice(&[1, 9, 0, 0, 0]);
        long_midnight.extend_from_slice(&2i64.to_le_bytes());
        let (bytes, at) = result_rows(&defs, &[long_midnight], true);
        assert_eq!(r.apply(&bytes, at, &ins, false), Err(Refusal::Result));
        // Metadata of another type, or with decimals: refused.
        for defs in [
            [(TYPE_DATE, 0x80, 0), (TYPE_LONGLONG, 0x81, 0)],
            [(TYPE_DATETIME, 0x80, 3), (TYPE_LONGLONG, 0x81, 0)],
        ] {
            let (bytes, at) = result_rows(&defs, &[noon.clone()], true);
            assert_eq!(r.apply(&bytes, at, &ins, false), Err(Refusal::Result));
        }
        // Grouped by DATE(): a DATE key, 4 bytes; by an integer: the column's width.
        let r = bind("SELECT DATE(dt), COUNT(*) FROM t GROUP BY DATE(dt)", true);
        let defs = [(TYPE_DATE, 0x80, 0), (TYPE_LONGLONG, 0x81, 0)];
        let (bytes, at) = result_rows(&defs, &[], false);
        let got = r
            .apply(
                &bytes,
                at,
                &[vec![Some(secs("2024-01-10 12:00:05"))]],
                false,
            )
            .unwrap();
        let mut day = vec![0u8, 0, 4];
        day.extend_from_slice(&2024u16.to_le_bytes());
        day.extend_from_slice(&[1, 10]);
        day.extend_from_slice(&1i64.to_le_bytes());
        let (want, _) = result_rows(&defs, &[day], false);
        assert_eq!(&got.bytes[..], &want[..]);
        let r = bind("SELECT c, COUNT(*) FROM t GROUP BY c", true);
        let defs = [(TYPE_TINY, 0x1081, 0), (TYPE_LONGLONG, 0x81, 0)];
        let (bytes, at) = result_rows(&defs, &[], true);
        let got = r
            .apply(&bytes, at, &[vec![Some(-3)], vec![Some(4)]], false)
            .unwrap();
        let rows: Vec<Vec<u8>> = [-3i8, 4]
            .iter()
            .map(|k| {
                let mut row = vec![0u8, 0, k.to_le_bytes()[0]];
                row.extend_from_slice(&1i64.to_le_bytes());
                row
            })
            .collect();
        let (want, _) = result_rows(&defs, &rows, true);
        assert_eq!(&got.bytes[..], &want[..]);
    }

    /// The binary protocol: BIGINT as 8 bytes, DECIMAL as its digits, NULL in the bitmap.
    #[test]
    fn binary_rows_are_patched_in_their_format() {
        let mut recipe = read_shape("SELECT COUNT(*), SUM(b) FROM t")
            .unwrap()
            .bind(("db".into(), "t".into()), &table(), true, 0, "")
            .unwrap();
        let types = [COUNT, SUM];
        type Case<'a> = (
            &'a str,
            [Option<i128>; 2],
            &'a [Option<i128>],
            [Option<i128>; 2],
        );
        let cases: &[Case] = &[
            (
                "from an empty table",
                [Some(0), None],
                &[Some(4)],
                [Some(1), Some(4)],
            ),
            ("a NULL", [Some(0), None], &[None], [Some(1), None]),
            (
                "negative",
                [Some(3), Some(10)],
                &[Some(-11)],
                [Some(4), Some(-1)],
            ),
        ];
        for (why, before, ins, after) in cases {
            let (bytes, at) = result(&types, &binary_row(&types, before), true);
            let ins: Vec<Vec<Option<i128>>> = ins.iter().map(|v| vec![*v]).collect();
            let got = recipe.apply(&bytes, at, &ins, false).unwrap();
            let (expect, expect_at) = result(&types, &binary_row(&types, after), true);
            assert_eq!(&got.bytes[..], &expect[..], "{why}");
            assert_eq!(got.status_at, expect_at, "{why}");
        }
        // Binary bytes read as text (or the reverse) are no result of the shape.
        recipe.binary = false;
        let (bytes, at) = result(&types, &binary_row(&types, &[Some(1), Some(1)]), true);
        assert_eq!(recipe.apply(&bytes, at, &[], false), Err(Refusal::Result));
    }

    /// Results that are not this shape's one row, and metadata that does not match.
    #[test]
    fn other_results_are_refused() {
        let recipe = read_shape("SELECT COUNT(*), SUM(b) FROM t")
            .unwrap()
            .bind(("db".into(), "t".into()), &table(), false, 0, "")
            .unwrap();
        let row = text_row(&[Some("1"), Some("1")]);
        let cases: &[(&str, Vec<u8>, usize)] = &[
            (
                "SUM typed as a DOUBLE",
                result(&[COUNT, (0x05, 31)], &row, true).0,
                0,
            ),
            (
                "SUM with decimals",
                result(&[COUNT, (TYPE_NEWDECIMAL, 2)], &row, true).0,
                0,
            ),
            (
                "COUNT typed as a LONG",
                result(&[(0x03, 0), SUM], &row, true).0,
                0,
            ),
            (
                "one column too many",
                result(
                    &[COUNT, SUM, SUM],
                    &text_row(&[Some("1"), Some("1"), Some("1")]),
                    true,
                )
                .0,
                0,
            ),
            (
                "truncated",
                result(&[COUNT, SUM], &row, true).0[..20].to_vec(),
                0,
            ),
            ("empty", Vec::new(), 0),
        ];
        for (why, bytes, _) in cases {
            let at = bytes.len().saturating_sub(4);
            assert_eq!(
                recipe.apply(bytes, at, &[], false),
                Err(Refusal::Result),
                "{why}"
            );
        }
        // No row (sql_select_limit = 0): two frames after the definitions, neither a row.
        let (mut bytes, _) = result(&[COUNT, SUM], &row, false);
        let (no_row, at) = {
            let fr = frames(&bytes).unwrap();
            let (row_at, _, _) = fr[fr.len() - 2];
            let (tail_at, _, _) = fr[fr.len() - 1];
            let tail = bytes[tail_at..].to_vec();
            bytes.truncate(row_at);
            let at = bytes.len() + 7;
            bytes.extend_from_slice(&tail);
            (bytes, at)
        };
        assert_eq!(recipe.apply(&no_row, at, &[], false), Err(Refusal::Result));
    }

    /// Every range rule, evaluated as the server compares an integer column with an integer
    /// literal: `SELECT COUNT(*) FROM t WHERE …` over no row, one row inserted with the
    /// column's value → counted or not. `a` is INT, `u` BIGINT UNSIGNED.
    #[test]
    fn ranges_keep_rows_as_the_server_does() {
        const U64: i128 = u64::MAX as i128;
        const I64: i128 = i64::MIN as i128;
        let rows: &[(&str, &str, Option<i128>, bool)] = &[
            ("< below", "a < 5", Some(4), true),
            ("< at the bound", "a < 5", Some(5), false),
            ("<= at the bound", "a <= 5", Some(5), true),
            ("<= above", "a <= 5", Some(6), false),
            ("> above", "a > 5", Some(6), true),
            ("> at the bound", "a > 5", Some(5), false),
            (">= at the bound", "a >= 5", Some(5), true),
            (">= below", "a >= 5", Some(4), false),
            ("literal left: 5 > a is a < 5", "5 > a", Some(4), true),
            ("literal left, at the bound", "5 > a", Some(5), false),
            ("literal left: 5 <= a is a >= 5", "5 <= a", Some(5), true),
            ("literal left: -5 < a, below", "-5 < a", Some(-5), false),
            ("negative bound", "a < -3", Some(-4), true),
            ("negative bound, at it", "a < -3", Some(-3), false),
            ("BETWEEN: low end", "a BETWEEN -3 AND 7", Some(-3), true),
            ("BETWEEN: high end", "a BETWEEN -3 AND 7", Some(7), true),
            ("BETWEEN: below", "a BETWEEN -3 AND 7", Some(-4), false),
            ("BETWEEN: above", "a BETWEEN -3 AND 7", Some(8), false),
            (
                "BETWEEN a reversed range: empty",
                "a BETWEEN 7 AND -3",
                Some(0),
                false,
            ),
            ("BETWEEN one value", "a BETWEEN 2 AND 2", Some(2), true),
            ("NULL is not below", "a < 5", None, false),
            ("NULL is not above", "a >= -5", None, false),
            ("NULL is not between", "a BETWEEN -3 AND 7", None, false),
            (
                "a range and IN",
                "a > 1 AND a < 9 AND a IN (2, 9)",
                Some(2),
                true,
            ),
            (
                "a range and IN, kept out",
                "a > 1 AND a < 9 AND a IN (2, 9)",
                Some(9),
                false,
            ),
            (
                "= and a range, contradictory",
                "a = 2 AND a > 2",
                Some(2),
                false,
            ),
            ("unsigned above a negative", "u > -1", Some(0), true),
            ("unsigned at most a negative", "u <= -1", Some(0), false),
            (
                "unsigned BETWEEN a negative and 3",
                "u BETWEEN -5 AND 3",
                Some(0),
                true,
            ),
            (
                "unsigned past BIGINT",
                "u >= 9223372036854775808",
                Some(U64),
                true,
            ),
            (
                "unsigned BIGINT's largest",
                "u >= 9223372036854775808",
                Some(U64 >> 1),
                false,
            ),
            (
                "unsigned below its largest",
                "u < 18446744073709551615",
                Some(U64),
                false,
            ),
            (
                "unsigned at its largest",
                "u <= 18446744073709551615",
                Some(U64),
                true,
            ),
            (
                "BIGINT's smallest, above",
                "a > -9223372036854775808",
                Some(-(1 << 31)),
                true,
            ),
            (
                "BIGINT's smallest, at it",
                "a >= -9223372036854775808",
                Some(I64),
                true,
            ),
            (
                "past the column's range",
                "a < 3000000000",
                Some((1 << 31) - 1),
                true,
            ),
        ];
        for (why, cond, value, kept) in rows {
            let sql = format!("SELECT COUNT(*) FROM t WHERE {cond}");
            let recipe = read_shape(&sql)
                .unwrap_or_else(|e| panic!("{why}: {e:?}"))
                .bind(("db".into(), "t".into()), &table(), false, 0, &sql)
                .unwrap();
            assert_eq!(recipe.used_columns().len(), 1, "{why}");
            let (bytes, at) = result(&[COUNT], &text_row(&[Some("0")]), true);
            let got = recipe.apply(&bytes, at, &[vec![*value]], false).unwrap();
            let want = if *kept { "1" } else { "0" };
            let (expect, _) = result(&[COUNT], &text_row(&[Some(want)]), true);
            assert_eq!(&got.bytes[..], &expect[..], "{why}: {sql}");
        }
    }

    /// MIN/MAX answer in the column's own integer type: each range the catalog gives maps
    /// to one type code and signedness; any other range has none (refused).
    #[test]
    fn int_types_are_the_columns_own() {
        type Row<'a> = (&'a str, i128, i128, Option<(u8, bool)>);
        let rows: &[Row] = &[
            ("TINYINT", -128, 127, Some((TYPE_TINY, false))),
            ("TINYINT UNSIGNED", 0, 255, Some((TYPE_TINY, true))),
            ("SMALLINT", -32768, 32767, Some((TYPE_SHORT, false))),
            ("SMALLINT UNSIGNED", 0, 65535, Some((TYPE_SHORT, true))),
            (
                "MEDIUMINT",
                -(1 << 23),
                (1 << 23) - 1,
                Some((TYPE_INT24, false)),
            ),
            (
                "MEDIUMINT UNSIGNED",
                0,
                (1 << 24) - 1,
                Some((TYPE_INT24, true)),
            ),
            ("INT", -(1 << 31), (1 << 31) - 1, Some((TYPE_LONG, false))),
            ("INT UNSIGNED", 0, (1 << 32) - 1, Some((TYPE_LONG, true))),
            (
                "BIGINT",
                -(1 << 63),
                (1 << 63) - 1,
                Some((TYPE_LONGLONG, false)),
            ),
            (
                "BIGINT UNSIGNED",
                0,
                (1 << 64) - 1,
                Some((TYPE_LONGLONG, true)),
            ),
            ("no type: 0..1000", 0, 1000, None),
            ("no type: -128..128", -128, 128, None),
            ("no type: 0..0", 0, 0, None),
            ("no type: 12 bits", -(1 << 11), (1 << 11) - 1, None),
        ];
        for (why, min, max, want) in rows {
            let got = IntType::of_range(*min, *max);
            assert_eq!(got.map(|t| (t.code, t.unsigned)), *want, "{why}");
            if let Some(t) = got {
                assert_eq!((t.min, t.max), (*min, *max), "{why}");
            }
        }
    }

    /// MIN/MAX flags as MariaDB sends them (BINARY, NUM; UNSIGNED for unsigned columns).
    const NUM: u16 = 0x8080;
    const LONG: (u8, u16, u8) = (TYPE_LONG, NUM, 0);
    const COUNT_DEF: (u8, u16, u8) = (TYPE_LONGLONG, 0x8081, 0);

    /// Every MIN/MAX rule, text protocol: `SELECT COUNT(*), MIN(a), MAX(a) FROM t WHERE
    /// c >= 0` (`a` INT), the stored row and the rows inserted (c, a) → the new row.
    #[test]
    fn min_and_max_compute_what_the_server_would() {
        type Row<'a> = (
            &'a str,
            [Option<&'a str>; 3],
            &'a [[Option<i128>; 2]],
            std::result::Result<[Option<&'a str>; 3], Refusal>,
        );
        let rows: &[Row] = &[
            (
                "of no row: NULL, becomes the first value",
                [Some("0"), None, None],
                &[[Some(1), Some(5)]],
                Ok([Some("1"), Some("5"), Some("5")]),
            ),
            (
                "a smaller value replaces MIN only",
                [Some("2"), Some("3"), Some("9")],
                &[[Some(1), Some(2)]],
                Ok([Some("3"), Some("2"), Some("9")]),
            ),
            (
                "a larger value replaces MAX only",
                [Some("2"), Some("3"), Some("9")],
                &[[Some(1), Some(10)]],
                Ok([Some("3"), Some("3"), Some("10")]),
            ),
            (
                "a value between changes neither",
                [Some("2"), Some("3"), Some("9")],
                &[[Some(1), Some(4)]],
                Ok([Some("3"), Some("3"), Some("9")]),
            ),
            (
                "values equal to MIN and MAX change neither",
                [Some("2"), Some("3"), Some("9")],
                &[[Some(1), Some(3)], [Some(0), Some(9)]],
                Ok([Some("4"), Some("3"), Some("9")]),
            ),
            (
                "a NULL is skipped",
                [Some("2"), Some("3"), Some("9")],
                &[[Some(1), None]],
                Ok([Some("3"), Some("3"), Some("9")]),
            ),
            (
                "a NULL into no row leaves NULL",
                [Some("0"), None, None],
                &[[Some(1), None]],
                Ok([Some("1"), None, None]),
            ),
            (
                "a row the WHERE keeps out: unchanged",
                [Some("2"), Some("3"), Some("9")],
                &[[Some(-1), Some(-100)], [None, Some(100)]],
                Ok([Some("2"), Some("3"), Some("9")]),
            ),
            (
                "several rows, negatives, some kept out",
                [Some("0"), None, None],
                &[
                    [Some(1), Some(4)],
                    [Some(2), Some(-7)],
                    [Some(-1), Some(-100)],
                    [Some(1), None],
                ],
                Ok([Some("3"), Some("-7"), Some("4")]),
            ),
            (
                "the column's extremes",
                [Some("1"), Some("0"), Some("0")],
                &[[Some(1), Some(-(1 << 31))], [Some(1), Some((1 << 31) - 1)]],
                Ok([Some("3"), Some("-2147483648"), Some("2147483647")]),
            ),
            (
                "a stored MIN outside the column's range: refused",
                [Some("1"), Some("3000000000"), Some("3000000000")],
                &[[Some(1), Some(1)]],
                Err(Refusal::Result),
            ),
            (
                "a stored fraction: refused",
                [Some("1"), Some("1.5"), Some("2")],
                &[[Some(1), Some(1)]],
                Err(Refusal::Result),
            ),
        ];
        let recipe = read_shape("SELECT COUNT(*), MIN(a), MAX(a) FROM t WHERE c >= 0")
            .unwrap()
            .bind(("db".into(), "t".into()), &table(), false, 0, "")
            .unwrap();
        assert_eq!(
            recipe.used_columns(),
            vec!["c".to_string(), "a".to_string()]
        );
        let defs = [COUNT_DEF, LONG, LONG];
        for (why, before, inserted, want) in rows {
            for deprecate_eof in [false, true] {
                let (bytes, at) = result_defs(&defs, &text_row(before), deprecate_eof);
                let ins: Vec<Vec<Option<i128>>> = inserted.iter().map(|r| r.to_vec()).collect();
                let got = recipe.apply(&bytes, at, &ins, false);
                match want {
                    Ok(after) => {
                        let (expect, expect_at) =
                            result_defs(&defs, &text_row(after), deprecate_eof);
                        let got = got.unwrap_or_else(|e| panic!("{why}: refused {e:?}"));
                        assert_eq!(&got.bytes[..], &expect[..], "{why}");
                        assert_eq!(got.status_at, expect_at, "{why}");
                        assert_eq!(got.changed, before != after, "{why}");
                    }
                    Err(e) => assert_eq!(got, Err(*e), "{why}"),
                }
            }
        }
    }

    /// MIN/MAX results whose metadata is not what the server sends for the column: the
    /// values could not be encoded as it would, so no patch.
    #[test]
    fn min_and_max_metadata_must_be_the_columns_own() {
        const U: u16 = FLAG_UNSIGNED;
        type Row<'a> = (
            &'a str,
            &'a str,
            (u8, u16, u8),
            std::result::Result<(), Refusal>,
        );
        let rows: &[Row] = &[
            ("INT as LONG", "SELECT MIN(a) FROM t", LONG, Ok(())),
            (
                "INT as LONGLONG: refused",
                "SELECT MIN(a) FROM t",
                (TYPE_LONGLONG, NUM, 0),
                Err(Refusal::Result),
            ),
            (
                "INT as UNSIGNED LONG: refused",
                "SELECT MIN(a) FROM t",
                (TYPE_LONG, NUM | U, 0),
                Err(Refusal::Result),
            ),
            (
                "ZEROFILL (padded text): refused",
                "SELECT MAX(a) FROM t",
                (TYPE_LONG, NUM | FLAG_ZEROFILL, 0),
                Err(Refusal::Result),
            ),
            (
                "with decimals: refused",
                "SELECT MAX(a) FROM t",
                (TYPE_LONG, NUM, 2),
                Err(Refusal::Result),
            ),
            (
                "as a DECIMAL: refused",
                "SELECT MAX(a) FROM t",
                (TYPE_NEWDECIMAL, NUM, 0),
                Err(Refusal::Result),
            ),
            (
                "TINYINT as TINY",
                "SELECT MAX(c) FROM t",
                (TYPE_TINY, 0x9081, 0),
                Ok(()),
            ),
            (
                "TINYINT as SHORT: refused",
                "SELECT MAX(c) FROM t",
                (TYPE_SHORT, NUM, 0),
                Err(Refusal::Result),
            ),
            (
                "BIGINT UNSIGNED as UNSIGNED LONGLONG",
                "SELECT MAX(u) FROM t",
                (TYPE_LONGLONG, NUM | U, 0),
                Ok(()),
            ),
            (
                "BIGINT UNSIGNED as signed LONGLONG: refused",
                "SELECT MAX(u) FROM t",
                (TYPE_LONGLONG, NUM, 0),
                Err(Refusal::Result),
            ),
        ];
        for (why, sql, def, want) in rows {
            let recipe = read_shape(sql)
                .unwrap()
                .bind(("db".into(), "t".into()), &table(), false, 0, sql)
                .unwrap();
            let (bytes, at) = result_defs(&[*def], &text_row(&[Some("1")]), true);
            let got = recipe.apply(&bytes, at, &[vec![Some(0)]], false).map(drop);
            assert_eq!(got, *want, "{why}");
        }
    }

    /// The binary protocol: each integer type in its own width (INT24 in 4 bytes), signed
    /// or unsigned by the column's flag, read back so (a stored 200 in a TINY UNSIGNED is
    /// no -56), NULL in the bitmap.
    #[test]
    fn min_and_max_binary_rows_in_the_columns_width() {
        let r = |min: i128, max: i128| int(min, max, true);
        let columns = vec![
            ("t8".to_string(), r(-128, 127)),
            ("u8".into(), r(0, 255)),
            ("s16".into(), r(-32768, 32767)),
            ("u16".into(), r(0, 65535)),
            ("m24".into(), r(-(1 << 23), (1 << 23) - 1)),
            ("um24".into(), r(0, (1 << 24) - 1)),
            ("i32".into(), r(-(1 << 31), (1 << 31) - 1)),
            ("u32".into(), r(0, (1 << 32) - 1)),
            ("i64".into(), r(-(1 << 63), (1 << 63) - 1)),
            ("u64".into(), r(0, (1 << 64) - 1)),
        ];
        let sql = "SELECT MIN(t8), MAX(u8), MIN(s16), MAX(u16), MIN(m24), MAX(um24), \
                   MIN(i32), MAX(u32), MIN(i64), MAX(u64) FROM t";
        let recipe = read_shape(sql)
            .unwrap()
            .bind(("db".into(), "t".into()), &columns, true, 0, sql)
            .unwrap();
        const U: u16 = FLAG_UNSIGNED;
        let defs = [
            (TYPE_TINY, NUM, 0),
            (TYPE_TINY, NUM | U, 0),
            (TYPE_SHORT, NUM, 0),
            (TYPE_SHORT, NUM | U, 0),
            (TYPE_INT24, NUM, 0),
            (TYPE_INT24, NUM | U, 0),
            (TYPE_LONG, NUM, 0),
            (TYPE_LONG, NUM | U, 0),
            (TYPE_LONGLONG, NUM, 0),
            (TYPE_LONGLONG, NUM | U, 0),
        ];
        // A binary row by hand: header, a NULL bitmap of 10 + 2 bits, the values' bytes.
        let row = |nulls: u16, values: &[&[u8]]| {
            let mut r = vec![0u8];
            r.extend_from_slice(&(nulls << 2).to_le_bytes());
            for v in values {
                r.extend_from_slice(v);
            }
            r
        };
        let extremes: &[&[u8]] = &[
            &[0x80],
            &[0xff],
            &[0x00, 0x80],
            &[0xff, 0xff],
            &[0x00, 0x00, 0x80, 0xff],
            &[0xff, 0xff, 0xff, 0x00],
            &[0x00, 0x00, 0x00, 0x80],
            &[0xff, 0xff, 0xff, 0xff],
            &[0, 0, 0, 0, 0, 0, 0, 0x80],
            &[0xff; 8],
        ];
        let extreme_values: Vec<Option<i128>> = columns
            .iter()
            .enumerate()
            .map(|(i, (_, c))| match c.ty {
                ColType::Int { min, max } => Some(if i % 2 == 0 { min } else { max }),
                _ => unreachable!(),
            })
            .collect();
        // Stored: all in their upper half (signed: -1; unsigned: past the signed range).
        let upper: &[&[u8]] = &[
            &[0xff],
            &[200],
            &[0xff, 0xff],
            &[0x00, 0x90],
            &[0xff, 0xff, 0xff, 0xff],
            &[0x00, 0x00, 0x90, 0x00],
            &[0xff, 0xff, 0xff, 0xff],
            &[0x00, 0x00, 0x00, 0x90],
            &[0xff; 8],
            &[0, 0, 0, 0, 0, 0, 0, 0x90],
        ];
        type Case<'a> = (&'a str, Vec<u8>, Vec<Vec<Option<i128>>>, Vec<u8>);
        let cases: Vec<Case> = vec![
            (
                "of no row: NULLs become the values",
                row(0x3ff, &[]),
                vec![extreme_values.clone()],
                row(0, extremes),
            ),
            (
                "a NULL into no row stays NULL",
                row(0x3ff, &[]),
                vec![vec![None; 10]],
                row(0x3ff, &[]),
            ),
            (
                "read with their signedness: smaller than MAX, larger than MIN, unchanged",
                row(0, upper),
                vec![vec![
                    Some(5),
                    Some(100),
                    Some(5),
                    Some(100),
                    Some(5),
                    Some(100),
                    Some(5),
                    Some(100),
                    Some(5),
                    Some(100),
                ]],
                row(0, upper),
            ),
            (
                "the column's extremes replace them",
                row(0, upper),
                vec![extreme_values.clone()],
                row(0, extremes),
            ),
        ];
        for (why, before, ins, after) in cases {
            let (bytes, at) = result_defs(&defs, &before, true);
            let got = recipe
                .apply(&bytes, at, &ins, false)
                .unwrap_or_else(|e| panic!("{why}: {e:?}"));
            let (expect, expect_at) = result_defs(&defs, &after, true);
            assert_eq!(&got.bytes[..], &expect[..], "{why}");
            assert_eq!(got.status_at, expect_at, "{why}");
            let read = |b: &[u8], at: usize| recipe.values(b, at).map(|mut r| r.remove(0));
            assert_eq!(
                read(&got.bytes, got.status_at).as_deref(),
                Some(&ins[0][..])
                    .filter(|_| before != after)
                    .or(read(&bytes, at).as_deref()),
                "{why}: read back"
            );
        }
    }

    /// The debug fault adds one to the first aggregate, changed or not: what the checkers
    /// must see.
    #[test]
    fn the_corrupting_fault_changes_the_answer() {
        let recipe = read_shape("SELECT COUNT(*) FROM t WHERE a = 1")
            .unwrap()
            .bind(("db".into(), "t".into()), &table(), false, 0, "")
            .unwrap();
        let (bytes, at) = result(&[COUNT], &text_row(&[Some("4")]), true);
        let kept_out = [vec![Some(2)]];
        let clean = recipe.apply(&bytes, at, &kept_out, false).unwrap();
        assert_eq!(&clean.bytes[..], &bytes[..]);
        let broken = recipe.apply(&bytes, at, &kept_out, true).unwrap();
        let (expect, _) = result(&[COUNT], &text_row(&[Some("5")]), true);
        assert_eq!(&broken.bytes[..], &expect[..]);
    }

    /// What the verifier asks, and how it reads stored values back.
    #[test]
    fn the_verifier_asks_the_same_aggregates() {
        let recipe = read_shape(
            "SELECT COUNT(*), COUNT(b), SUM(b) AS s FROM t WHERE a = 1 AND c IN (2, -3)",
        )
        .unwrap()
        .bind(("d`b".into(), "t".into()), &table(), false, 0, "")
        .unwrap();
        assert_eq!(
            recipe.verify_sql(),
            "SELECT COUNT(*), COUNT(`b`), SUM(`b`) FROM `d``b`.`t` WHERE `a` IN (1) AND `c` IN (2, -3)"
        );
        let extremes = read_shape("SELECT MIN(a), MAX(u) FROM t WHERE c = 1")
            .unwrap()
            .bind(("db".into(), "t".into()), &table(), false, 0, "")
            .unwrap();
        assert_eq!(
            extremes.verify_sql(),
            "SELECT MIN(`a`), MAX(`u`) FROM `db`.`t` WHERE `c` IN (1)"
        );
        let ranged = read_shape(
            "SELECT COUNT(*) FROM t WHERE a > 1 AND c <= -2 AND u BETWEEN 0 AND 18446744073709551615",
        )
        .unwrap()
        .bind(("db".into(), "t".into()), &table(), false, 0, "")
        .unwrap();
        assert_eq!(
            ranged.verify_sql(),
            "SELECT COUNT(*) FROM `db`.`t` WHERE `a` >= 2 AND `c` <= -2 AND `u` >= 0 AND `u` <= 18446744073709551615"
        );
        let dashboard = read_shape(
            "SELECT DATE(dt) AS day, COUNT(*), SUM(b) FROM t WHERE dt >= '2024-01-08' \
             AND dt < '2024-01-15' AND dd BETWEEN '2024-01-01' AND '2024-01-31' \
             AND dd > '2024-01-02' GROUP BY DATE(dt)",
        )
        .unwrap()
        .bind(("db".into(), "t".into()), &temporal_table(), false, 0, "")
        .unwrap();
        assert_eq!(
            dashboard.verify_sql(),
            "SELECT DATE(`dt`), COUNT(*), SUM(`b`) FROM `db`.`t` WHERE `dt` >= '2024-01-08 00:00:00' \
             AND `dt` <= '2024-01-14 23:59:59' AND `dd` >= '2024-01-01' AND `dd` <= '2024-01-31' \
             AND `dd` >= '2024-01-03' GROUP BY DATE(`dt`)"
        );
        assert_eq!(
            dashboard.text_rows(&[
                vec![Some(b"2024-01-08".to_vec()), Some(b"2".to_vec()), None],
                vec![
                    Some(b"2024-01-09".to_vec()),
                    Some(b"1".to_vec()),
                    Some(b"4".to_vec())
                ],
            ]),
            Some(vec![
                vec![Some(temporal("2024-01-08").unwrap().0), Some(2), None],
                vec![Some(temporal("2024-01-09").unwrap().0), Some(1), Some(4)],
            ])
        );
        assert_eq!(
            dashboard.text_rows(&[vec![
                Some(b"2024-01-08 00:00:00".to_vec()),
                Some(b"2".to_vec()),
                None
            ]]),
            None,
            "a DATE key written as a DATETIME"
        );
        let (bytes, at) = result(
            &[COUNT, COUNT, SUM],
            &text_row(&[Some("2"), Some("1"), None]),
            true,
        );
        assert_eq!(
            recipe.values(&bytes, at),
            Some(vec![vec![Some(2), Some(1), None]])
        );
        assert_eq!(
            recipe.text_rows(&[vec![Some(b"2".to_vec()), None, Some(b"-4".to_vec())]]),
            Some(vec![vec![Some(2), None, Some(-4)]])
        );
        assert_eq!(
            recipe.text_rows(&[vec![Some(b"1".to_vec()), None, Some(b"1.5".to_vec())]]),
            None
        );
        assert_eq!(
            recipe.text_rows(&[vec![Some(b"1".to_vec())]]),
            None,
            "a short row"
        );
    }

    #[test]
    fn refusals_have_distinct_labels() {
        use Refusal::*;
        let all = [
            Token, Unparsable, NotSimple, Aggregate, Predicate, Column, Generated, NotInsert,
            Value, Omitted, Range, Result, Overflow, Unjoined,
        ];
        let mut labels: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), all.len());
    }
    /// One parameter of each type, as the server receives it: the values the rules use,
    /// the rest `Other`; bytes that cannot be read end the reading (None).
    #[test]
    fn parameters_are_read_as_their_types_say() {
        let secs = |s: &str| temporal(s).unwrap().0;
        let dt = |y: u16, mo: u8, d: u8, h: u8, mi: u8, s: u8| {
            let mut b = y.to_le_bytes().to_vec();
            b.extend_from_slice(&[mo, d, h, mi, s]);
            b
        };
        let lenenc = |s: &[u8]| {
            let mut b = vec![s.len() as u8];
            b.extend_from_slice(s);
            b
        };
        let with_len = |b: Vec<u8>| {
            let mut o = vec![b.len() as u8];
            o.extend(b);
            o
        };
        type Row = (&'static str, u8, u8, Vec<u8>, Option<Param>);
        let rows: Vec<Row> = vec![
            ("TINY signed", 0x01, 0, vec![0xff], Some(Param::Int(-1))),
            (
                "TINY unsigned",
                0x01,
                0x80,
                vec![0xff],
                Some(Param::Int(255)),
            ),
            (
                "SHORT",
                0x02,
                0,
                (-300i16).to_le_bytes().to_vec(),
                Some(Param::Int(-300)),
            ),
            (
                "INT24 as 4",
                0x09,
                0,
                70000i32.to_le_bytes().to_vec(),
                Some(Param::Int(70000)),
            ),
            (
                "LONG",
                0x03,
                0,
                (-5i32).to_le_bytes().to_vec(),
                Some(Param::Int(-5)),
            ),
            (
                "LONGLONG",
                0x08,
                0,
                i64::MIN.to_le_bytes().to_vec(),
                Some(Param::Int(i64::MIN.into())),
            ),
            (
                "LONGLONG unsigned",
                0x08,
                0x80,
                u64::MAX.to_le_bytes().to_vec(),
                Some(Param::Int(u64::MAX.into())),
            ),
            (
                "YEAR",
                0x0d,
                0,
                2024u16.to_le_bytes().to_vec(),
                Some(Param::Other),
            ),
            (
                "FLOAT",
                0x04,
                0,
                1f32.to_le_bytes().to_vec(),
                Some(Param::Other),
            ),
            (
                "DOUBLE",
                0x05,
                0,
                12.5f64.to_le_bytes().to_vec(),
                Some(Param::Other),
            ),
            ("NULL type", 0x06, 0, vec![], Some(Param::Null)),
            (
                "VAR_STRING",
                0xfd,
                0,
                lenenc(b"2024-01-08"),
                Some(Param::Str("2024-01-08".into())),
            ),
            (
                "STRING",
                0xfe,
                0,
                lenenc(b"x"),
                Some(Param::Str("x".into())),
            ),
            (
                "VARCHAR",
                0x0f,
                0,
                lenenc(b"7"),
                Some(Param::Str("7".into())),
            ),
            (
                "not UTF-8",
                0xfd,
                0,
                lenenc(&[0xff, 0xfe]),
                Some(Param::Other),
            ),
            ("BLOB", 0xfc, 0, lenenc(b"x"), Some(Param::Other)),
            (
                "NEWDECIMAL",
                0xf6,
                0,
                lenenc(b"-12.50"),
                Some(Param::Dec("-12.50".into())),
            ),
            (
                "DECIMAL",
                0x00,
                0,
                lenenc(b"3"),
                Some(Param::Dec("3".into())),
            ),
            (
                "DATE",
                0x0a,
                0,
                with_len(dt(2024, 1, 8, 0, 0, 0)[..4].to_vec()),
                Some(Param::Time {
                    secs: secs("2024-01-08"),
                    micros: 0,
                    date: true,
                }),
            ),
            (
                "DATE with a time",
                0x0a,
                0,
                with_len(dt(2024, 1, 8, 1, 0, 0)),
                Some(Param::Other),
            ),
            (
                "DATETIME",
                0x0c,
                0,
                with_len(dt(2024, 1, 8, 10, 20, 30)),
                Some(Param::Time {
                    secs: secs("2024-01-08 10:20:30"),
                    micros: 0,
                    date: false,
                }),
            ),
            (
                "DATETIME with microseconds",
                0x0c,
                0,
                with_len({
                    let mut b = dt(2024, 1, 8, 10, 20, 30);
                    b.extend_from_slice(&500_000u32.to_le_bytes());
                    b
                }),
                Some(Param::Time {
                    secs: secs("2024-01-08 10:20:30"),
                    micros: 500_000,
                    date: false,
                }),
            ),
            ("zero DATETIME", 0x0c, 0, vec![0], Some(Param::Other)),
            (
                "invalid DATETIME",
                0x0c,
                0,
                with_len(dt(2024, 13, 8, 0, 0, 0)),
                Some(Param::Other),
            ),
            (
                "DATETIME before 1000",
                0x0c,
                0,
                with_len(dt(999, 1, 8, 0, 0, 0)),
                Some(Param::Other),
            ),
            (
                "TIMESTAMP",
                0x07,
                0,
                with_len(dt(2024, 1, 8, 10, 0, 0)),
                Some(Param::Other),
            ),
            ("TIME", 0x0b, 0, with_len(vec![0; 8]), Some(Param::Other)),
            ("a short LONG", 0x03, 0, vec![1, 2], None),
            ("a short string", 0xfd, 0, vec![5, b'a'], None),
            ("an unknown type", 0x42, 0, vec![1], None),
        ];
        for (why, ty, flags, value, want) in rows {
            // The parameter, then an INT after it: read only if this one's bytes were.
            let mut values = value.clone();
            values.extend_from_slice(&7i32.to_le_bytes());
            let types = [ty, flags, 0x03, 0];
            let p = ExecuteParams {
                types: Some(&types),
                null_bitmap: &[0],
                values: &values,
            };
            let got = bound_params(&p, 2);
            assert_eq!(got, want.map(|w| vec![w, Param::Int(7)]), "{why}");
        }
        // The NULL bit, whatever the type; no parameter; no types known.
        let types = [0x03, 0, 0x03, 0];
        let values = 9i32.to_le_bytes();
        let p = ExecuteParams {
            types: Some(&types),
            null_bitmap: &[0b01],
            values: &values,
        };
        assert_eq!(bound_params(&p, 2), Some(vec![Param::Null, Param::Int(9)]));
        let none = ExecuteParams {
            types: None,
            null_bitmap: &[],
            values: &[],
        };
        assert_eq!(bound_params(&none, 0), Some(vec![]));
        assert_eq!(bound_params(&none, 1), None);
    }

    /// A prepared read's `?`, each compared as its bound value and type say: one row per
    /// rule, over [`temporal_table`] (`a` INT, `dt` DATETIME, `dd` DATE).
    #[test]
    fn parameters_bind_as_the_server_compares_them() {
        use Refusal::*;
        let v = |s: &str| temporal(s).unwrap().0;
        let time = |s: &str, date| Param::Time {
            secs: v(s),
            micros: 0,
            date,
        };
        let str_ = |s: &str| Param::Str(s.into());
        let range = |lo: Option<i128>, hi: Option<i128>| Cond::Range { lo, hi };
        type Row = (
            &'static str,
            &'static str,
            Vec<Param>,
            std::result::Result<Vec<Cond>, Refusal>,
        );
        let week = "SELECT DATE(dt), COUNT(*) FROM t WHERE dt >= ? AND dt < ? GROUP BY DATE(dt)";
        let rows: Vec<Row> = vec![
            (
                "DATETIME parameters on a DATETIME column: the dashboard",
                week,
                vec![
                    time("2024-01-08 00:00:00", false),
                    time("2024-01-15 12:00:00", false),
                ],
                Ok(vec![
                    range(Some(v("2024-01-08")), None),
                    range(None, Some(v("2024-01-15 12:00:00") - 1)),
                ]),
            ),
            (
                "string parameters: read as the literals would be",
                week,
                vec![str_("2024-01-08"), str_("2024-01-15 00:00:00")],
                Ok(vec![
                    range(Some(v("2024-01-08")), None),
                    range(None, Some(v("2024-01-15") - 1)),
                ]),
            ),
            (
                "DATE parameters on a DATETIME column: their midnight",
                week,
                vec![time("2024-01-08", true), time("2024-01-15", true)],
                Ok(vec![
                    range(Some(v("2024-01-08")), None),
                    range(None, Some(v("2024-01-15") - 1)),
                ]),
            ),
            (
                "a midnight DATETIME on a DATE column: the date",
                "SELECT COUNT(*) FROM t WHERE dd = ?",
                vec![time("2024-01-08 00:00:00", false)],
                Ok(vec![Cond::In(vec![v("2024-01-08")])]),
            ),
            (
                "a DATETIME with a time on a DATE column: refused",
                "SELECT COUNT(*) FROM t WHERE dd < ?",
                vec![time("2024-01-08 10:00:00", false)],
                Err(Column),
            ),
            (
                "a datetime string on a DATE column: refused",
                "SELECT COUNT(*) FROM t WHERE dd < ?",
                vec![str_("2024-01-08 10:00:00")],
                Err(Column),
            ),
            (
                "a fraction of a second: refused",
                "SELECT COUNT(*) FROM t WHERE dt < ?",
                vec![Param::Time {
                    secs: v("2024-01-08 10:00:00"),
                    micros: 1,
                    date: false,
                }],
                Err(Predicate),
            ),
            (
                "an integer on a DATETIME column (converted by the server): refused",
                "SELECT COUNT(*) FROM t WHERE dt >= ?",
                vec![Param::Int(20240108)],
                Err(Column),
            ),
            (
                "a string not canonical: refused",
                "SELECT COUNT(*) FROM t WHERE dt >= ?",
                vec![str_("2024-1-08")],
                Err(Predicate),
            ),
            (
                "integers on an integer column, in text order",
                "SELECT COUNT(*) FROM t WHERE ? <= a AND a < ?",
                vec![Param::Int(3), Param::Int(9)],
                Ok(vec![range(Some(3), None), range(None, Some(8))]),
            ),
            (
                "BETWEEN and IN mixing ? and literals",
                "SELECT SUM(b) FROM t WHERE a BETWEEN ? AND 7 AND c IN (?, 2, ?)",
                vec![Param::Int(-3), Param::Int(1), Param::Int(5)],
                Ok(vec![range(Some(-3), Some(7)), Cond::In(vec![1, 2, 5])]),
            ),
            (
                "an unsigned BIGINT's largest",
                "SELECT COUNT(*) FROM t WHERE u <= ?",
                vec![Param::Int(u64::MAX.into())],
                Ok(vec![range(None, Some(u64::MAX.into()))]),
            ),
            (
                "a string on an integer column (compared as numbers): refused",
                "SELECT COUNT(*) FROM t WHERE a = ?",
                vec![str_("5")],
                Err(Predicate),
            ),
            (
                "a date string on an integer column: refused",
                "SELECT COUNT(*) FROM t WHERE a = ?",
                vec![str_("2024-01-08")],
                Err(Column),
            ),
            (
                "NULL (matches nothing): refused",
                "SELECT COUNT(*) FROM t WHERE a = ?",
                vec![Param::Null],
                Err(Predicate),
            ),
            (
                "a DECIMAL parameter: refused",
                "SELECT COUNT(*) FROM t WHERE a = ?",
                vec![Param::Dec("1".into())],
                Err(Predicate),
            ),
            (
                "a DOUBLE parameter: refused",
                "SELECT COUNT(*) FROM t WHERE a = ?",
                vec![Param::Other],
                Err(Predicate),
            ),
            (
                "fewer values than ?: refused",
                "SELECT COUNT(*) FROM t WHERE a = ? AND c = ?",
                vec![Param::Int(1)],
                Err(Token),
            ),
            (
                "a ? in the select list: refused",
                "SELECT COUNT(*), ? FROM t",
                vec![Param::Int(1)],
                Err(Aggregate),
            ),
            (
                "a ? as an aggregate's argument: refused",
                "SELECT SUM(?) FROM t",
                vec![Param::Int(1)],
                Err(Aggregate),
            ),
            (
                "a negated ?: refused",
                "SELECT COUNT(*) FROM t WHERE a = -?",
                vec![Param::Int(1)],
                Err(Predicate),
            ),
            (
                "a numbered placeholder (not MariaDB's): refused",
                "SELECT COUNT(*) FROM t WHERE a = ?1",
                vec![Param::Int(1)],
                Err(Token),
            ),
        ];
        for (why, sql, params, want) in rows {
            let got = read_shape_bound(sql, Some(&params))
                .and_then(|s| s.bind(("db".into(), "t".into()), &temporal_table(), true, 0, sql))
                .map(|r| r.filter.into_iter().map(|(_, c)| c).collect::<Vec<_>>());
            assert_eq!(got, want, "{why}");
        }
        // A text statement never holds a `?`.
        assert_eq!(
            read_shape("SELECT COUNT(*) FROM t WHERE a = ?").map(drop),
            Err(Token)
        );
        assert_eq!(
            insert_rows("INSERT INTO t (a) VALUES (?)").map(drop),
            Err(Token)
        );
    }

    /// A prepared INSERT's `?`, each stored as its bound value and type say: one row per
    /// rule, over [`decimal_table`] (`a` INT, `dt` DATETIME, `dd` DATE, `m` DECIMAL(10,2)).
    #[test]
    fn inserted_parameters_are_known_or_refused() {
        use Refusal::*;
        let v = |s: &str| temporal(s).unwrap().0;
        let time = |s: &str, micros| Param::Time {
            secs: v(s),
            micros,
            date: false,
        };
        let used = [
            "dt".to_string(),
            "dd".to_string(),
            "a".to_string(),
            "m".to_string(),
        ];
        let sql = "INSERT INTO t (dt, dd, a, m, s) VALUES (?, ?, ?, ?, ?)";
        type Row = (
            &'static str,
            Vec<Param>,
            std::result::Result<Vec<Option<i128>>, Refusal>,
        );
        let known = |dt: &str, dd: &str, a, m| Ok(vec![Some(v(dt)), Some(v(dd)), Some(a), Some(m)]);
        let ok = || {
            vec![
                time("2024-01-09 10:00:00", 0),
                time("2024-01-09 00:00:00", 0),
                Param::Int(5),
                Param::Dec("12.5".into()),
                Param::Other,
            ]
        };
        let with = |i: usize, p: Param| {
            let mut ps = ok();
            ps[i] = p;
            ps
        };
        let rows: Vec<Row> = vec![
            (
                "typed values; a DOUBLE where the read looks at nothing",
                ok(),
                known("2024-01-09 10:00:00", "2024-01-09", 5, 1250),
            ),
            (
                "strings: canonical temporals and a number",
                vec![
                    Param::Str("2024-01-09 10:00:00".into()),
                    Param::Str("2024-01-09".into()),
                    Param::Int(5),
                    Param::Str("-0.05".into()),
                    Param::Str("x".into()),
                ],
                known("2024-01-09 10:00:00", "2024-01-09", 5, -5),
            ),
            (
                "a DATE parameter into a DATETIME: its midnight",
                with(
                    0,
                    Param::Time {
                        secs: v("2024-01-09"),
                        micros: 0,
                        date: true,
                    },
                ),
                known("2024-01-09 00:00:00", "2024-01-09", 5, 1250),
            ),
            (
                "an integer into a DECIMAL",
                with(3, Param::Int(-7)),
                known("2024-01-09 10:00:00", "2024-01-09", 5, -700),
            ),
            (
                "NULL into a nullable column",
                with(0, Param::Null),
                Ok(vec![None, Some(v("2024-01-09")), Some(5), Some(1250)]),
            ),
            ("NULL into a NOT NULL one", with(1, Param::Null), Err(Range)),
            (
                "a fraction of a second (rounded or cut)",
                with(0, time("2024-01-09 10:00:00", 1)),
                Err(Value),
            ),
            (
                "a time into a DATE (cut)",
                with(1, time("2024-01-09 10:00:00", 0)),
                Err(Value),
            ),
            (
                "an integer into a DATETIME (converted)",
                with(0, Param::Int(20240109)),
                Err(Value),
            ),
            (
                "a DOUBLE into a DECIMAL (inexact)",
                with(3, Param::Other),
                Err(Value),
            ),
            (
                "more decimals than the column",
                with(3, Param::Dec("1.234".into())),
                Err(Value),
            ),
            (
                "a string into an integer column",
                with(2, Param::Str("5".into())),
                Err(Value),
            ),
            (
                "an integer past the column",
                with(2, Param::Int(1 << 40)),
                Err(Range),
            ),
            (
                "a DECIMAL into an integer column",
                with(2, Param::Dec("5".into())),
                Err(Value),
            ),
        ];
        for (why, params, want) in rows {
            let got = insert_rows_bound(sql, Some(&params))
                .and_then(|i| i.values_of(&decimal_table(), &used))
                .map(|mut rows| rows.remove(0));
            assert_eq!(got, want, "{why}");
        }
        assert_eq!(
            insert_rows_bound(sql, Some(&ok()[..4])).map(drop),
            Err(Token),
            "fewer values than ?"
        );
    }

    /// MIN/MAX of a DECIMAL, a DATETIME(0) and a DATE under inserts, text and binary: the
    /// column's own type and text, a smaller or larger value replacing it, NULL skipped.
    #[test]
    fn min_and_max_of_decimals_and_dates() {
        let sql = "SELECT MIN(m), MAX(m), MIN(dt), MAX(dd) FROM t WHERE a = 1";
        let recipe = read_shape(sql)
            .unwrap()
            .bind(("db".into(), "t".into()), &decimal_table(), false, 0, sql)
            .unwrap();
        assert_eq!(recipe.used_columns(), ["a", "m", "dt", "dd"]);
        let v = |s: &str| temporal(s).unwrap().0;
        let types = [
            (TYPE_NEWDECIMAL, 2),
            (TYPE_NEWDECIMAL, 2),
            (TYPE_DATETIME, 0),
            (TYPE_DATE, 0),
        ];
        type Row<'a> = (
            &'a str,
            [Option<&'a str>; 4],
            Vec<Vec<Option<i128>>>,
            std::result::Result<[Option<&'a str>; 4], Refusal>,
        );
        let stored = [
            Some("1.50"),
            Some("9.00"),
            Some("2024-01-08 10:00:00"),
            Some("2024-01-09"),
        ];
        let rows: Vec<Row> = vec![
            (
                "smaller and larger values replace them",
                stored,
                vec![vec![
                    Some(1),
                    Some(-5),
                    Some(v("2024-01-08 09:59:59")),
                    Some(v("2024-01-10")),
                ]],
                Ok([
                    Some("-0.05"),
                    Some("9.00"),
                    Some("2024-01-08 09:59:59"),
                    Some("2024-01-10"),
                ]),
            ),
            (
                "values between change nothing; NULL skipped; a row kept out",
                stored,
                vec![
                    vec![
                        Some(1),
                        Some(500),
                        Some(v("2024-01-09 00:00:00")),
                        Some(v("2024-01-09")),
                    ],
                    vec![Some(1), None, None, Some(v("2024-01-08"))],
                    vec![
                        Some(2),
                        Some(100_000),
                        Some(v("2000-01-01")),
                        Some(v("2030-01-01")),
                    ],
                ],
                Ok(stored),
            ),
            (
                "of no row: NULL, then the first value",
                [None, None, None, None],
                vec![vec![
                    Some(1),
                    Some(1000),
                    Some(v("2024-01-08")),
                    Some(v("2024-01-08")),
                ]],
                Ok([
                    Some("10.00"),
                    Some("10.00"),
                    Some("2024-01-08 00:00:00"),
                    Some("2024-01-08"),
                ]),
            ),
            (
                "a stored text of another scale: refused",
                [
                    Some("1.5"),
                    Some("9.00"),
                    Some("2024-01-08 10:00:00"),
                    Some("2024-01-09"),
                ],
                vec![vec![Some(1), Some(1), None, None]],
                Err(Refusal::Result),
            ),
        ];
        for (why, before, ins, want) in rows {
            let (bytes, at) = result(&types, &text_row(&before), true);
            let got = recipe
                .apply(&bytes, at, &ins, false)
                .map(|p| p.bytes.to_vec());
            let want = want.map(|w| result(&types, &text_row(&w), true).0);
            assert_eq!(got, want, "{why}");
        }
        // Metadata of another type (an integer MIN) is not these columns'.
        let ints = [
            COUNT,
            (TYPE_NEWDECIMAL, 2),
            (TYPE_DATETIME, 0),
            (TYPE_DATE, 0),
        ];
        let (bytes, at) = result(&ints, &text_row(&[Some("1"), None, None, None]), true);
        assert_eq!(recipe.apply(&bytes, at, &[], false), Err(Refusal::Result));
        // Binary: a DECIMAL as its text, a DATETIME in 7 bytes (4 at midnight), a DATE in 4.
        let rb = Recipe {
            binary: true,
            ..recipe.clone()
        };
        let bin = |m: &[u8], dt: &[u8], dd: &[u8]| {
            let mut r = vec![0u8, 0];
            put_lenenc_str_vec(&mut r, m);
            put_lenenc_str_vec(&mut r, m);
            r.extend_from_slice(dt);
            r.extend_from_slice(dd);
            r
        };
        let d = |y: u16, m: u8, d: u8| {
            let mut b = vec![4u8];
            b.extend_from_slice(&y.to_le_bytes());
            b.extend_from_slice(&[m, d]);
            b
        };
        let mut dt7 = vec![7u8];
        dt7.extend_from_slice(&2024u16.to_le_bytes());
        dt7.extend_from_slice(&[1, 8, 10, 0, 0]);
        let (bytes, at) = result(&types, &bin(b"1.50", &dt7, &d(2024, 1, 9)), true);
        let got = rb
            .apply(
                &bytes,
                at,
                &[vec![Some(1), Some(150), Some(v("2024-01-08")), None]],
                false,
            )
            .unwrap();
        let mut r = vec![0u8, 0];
        put_lenenc_str_vec(&mut r, b"1.50");
        put_lenenc_str_vec(&mut r, b"1.50");
        r.extend_from_slice(&d(2024, 1, 8));
        r.extend_from_slice(&d(2024, 1, 9));
        let (want, _) = result(&types, &r, true);
        assert_eq!(&got.bytes[..], &want[..]);
        // The corrupting fault moves a DATE by a day: still a DATE, and wrong.
        let sql = "SELECT MAX(dd) FROM t";
        let r = read_shape(sql)
            .unwrap()
            .bind(("db".into(), "t".into()), &decimal_table(), false, 0, sql)
            .unwrap();
        let (bytes, at) = result(&[(TYPE_DATE, 0)], &text_row(&[Some("2024-01-09")]), true);
        let broken = r.apply(&bytes, at, &[], true).unwrap();
        let (want, _) = result(&[(TYPE_DATE, 0)], &text_row(&[Some("2024-01-10")]), true);
        assert_eq!(&broken.bytes[..], &want[..]);
    }

    /// `i` (order items), `p` (products: key `id`), `v` (variants: key `(product_id,
    /// color)`), as the catalog would give them: (columns, primary key).
    fn join_catalog(name: &str) -> (Vec<(String, ColumnInfo)>, Vec<String>) {
        let i32r = (-(1i128 << 31), (1i128 << 31) - 1);
        let auto = ColumnInfo {
            ty: ColType::Int {
                min: i32r.0,
                max: i32r.1,
            },
            nullable: false,
            auto_increment: true,
        };
        let other = ColumnInfo {
            ty: ColType::Other,
            nullable: true,
            auto_increment: false,
        };
        let col = |n: &str, c: &ColumnInfo| (n.to_string(), c.clone());
        let int = |n: &str| (n.to_string(), int(i32r.0, i32r.1, true));
        match name {
            "i" => (
                vec![
                    col("id", &auto),
                    int("product_id"),
                    int("color"),
                    int("qty"),
                    (
                        "day".into(),
                        ColumnInfo {
                            ty: ColType::Temporal {
                                date_only: true,
                                fsp: 0,
                            },
                            nullable: true,
                            auto_increment: false,
                        },
                    ),
                    col("note", &other),
                ],
                vec!["id".into()],
            ),
            "p" => (
                vec![col("id", &auto), col("name", &other), int("sku")],
                vec!["id".into()],
            ),
            "v" => (
                vec![int("product_id"), int("color"), col("label", &other)],
                vec!["product_id".into(), "color".into()],
            ),
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// A read bound as the engine binds it: each way round, the first that binds.
    fn bind_joined(sql: &str) -> std::result::Result<Recipe, Refusal> {
        let shape = read_shape(sql)?;
        let mut first = None;
        let mut next = Some(shape);
        while let Some(mut s) = next.take() {
            next = s.other.take().map(|o| *o);
            let (cols, _) = join_catalog(&s.table.name);
            let joined = s.join.as_ref().map(|j| join_catalog(&j.table.name));
            let jq = s
                .join
                .as_ref()
                .map(|j| ("db".to_string(), j.table.name.clone()));
            let jt = joined.as_ref().zip(jq).map(|((c, k), q)| JoinedTable {
                q,
                columns: c,
                key: k,
            });
            let name = s.table.name.clone();
            match s.bind_with(("db".into(), name), &cols, jt, false, 0, sql) {
                Ok(r) => return Ok(r),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap())
    }

    /// Which joins are patched: the aggregated table joined to exactly one row of another
    /// by that table's whole primary key, pinned to one value. The server's semantics each
    /// row rests on are in its words.
    #[test]
    fn joins_pinned_to_one_row_are_recognised_or_refused() {
        use Refusal::*;
        let page = "SELECT p.name, COUNT(*), SUM(i.qty) FROM i JOIN p ON p.id = i.product_id";
        let rows: &[(&str, String, std::result::Result<(), Refusal>)] = &[
            (
                "the per-product page: every kept row has product_id 5, so joins p's row 5",
                format!("{page} WHERE i.product_id = 5"),
                Ok(()),
            ),
            (
                "INNER JOIN is JOIN",
                "SELECT p.name, COUNT(*) FROM i INNER JOIN p ON p.id = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Ok(()),
            ),
            (
                "a comma join, the condition in WHERE: the same inner join",
                "SELECT p.name, COUNT(*), SUM(i.qty) FROM i, p WHERE p.id = i.product_id \
                 AND i.product_id = 5"
                    .into(),
                Ok(()),
            ),
            (
                "pinned through p.id: p.id = 5 and p.id = product_id (integers) is product_id = 5",
                format!("{page} WHERE p.id = 5"),
                Ok(()),
            ),
            (
                "the join's own condition in ON, the rest of the WHERE on i",
                format!("{page} AND i.product_id = 5 WHERE i.qty > 0"),
                Ok(()),
            ),
            (
                "aliases, tables written the other way round: the aggregated one is i",
                "SELECT pr.name AS n, COUNT(*) FROM p AS pr JOIN i AS it \
                 ON it.product_id = pr.id WHERE it.product_id = 5"
                    .into(),
                Ok(()),
            ),
            (
                "COUNT(*) alone: read both ways, p is not the one joined by its key",
                "SELECT COUNT(*) FROM p JOIN i ON p.id = i.product_id WHERE i.product_id = 5"
                    .into(),
                Ok(()),
            ),
            (
                "an unqualified column of i: the server reads it as i's (p has none)",
                "SELECT p.name, SUM(qty) FROM i JOIN p ON p.id = i.product_id \
                 WHERE product_id = 5"
                    .into(),
                Ok(()),
            ),
            (
                "GROUP BY a column of i: one row per day, each joining p's one row; with \
                 ONLY_FULL_GROUP_BY MariaDB refuses p.name (ER_WRONG_FIELD_WITH_GROUP): \
                 nothing stored, nothing patched",
                "SELECT i.day, p.name, COUNT(*), SUM(i.qty) FROM i JOIN p \
                 ON p.id = i.product_id WHERE i.product_id = 5 GROUP BY i.day"
                    .into(),
                Ok(()),
            ),
            (
                "a key of two columns, each joined and pinned (one on either side)",
                "SELECT v.label, COUNT(*) FROM i JOIN v ON v.product_id = i.product_id \
                 AND v.color = i.color WHERE i.product_id = 5 AND v.color = 2"
                    .into(),
                Ok(()),
            ),
            (
                "a key of two columns, one joined: several rows of v may join",
                "SELECT v.label, COUNT(*) FROM i JOIN v ON v.product_id = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Err(NotSimple),
            ),
            (
                "a join on a non-key column of p: several rows may join",
                "SELECT p.name, COUNT(*) FROM i JOIN p ON p.sku = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Err(NotSimple),
            ),
            (
                "not pinned: each product's row joins",
                page.into(),
                Err(NotSimple),
            ),
            (
                "pinned to two values: two rows of p",
                format!("{page} WHERE i.product_id IN (5, 6)"),
                Err(NotSimple),
            ),
            (
                "pinned by a range: many rows of p",
                format!("{page} WHERE i.product_id BETWEEN 5 AND 5"),
                Err(NotSimple),
            ),
            (
                "a condition on another column of p: may keep no row",
                format!("{page} WHERE i.product_id = 5 AND p.sku = 3"),
                Err(NotSimple),
            ),
            (
                "LEFT JOIN: i's rows appear without p's row (not proven here)",
                "SELECT p.name, COUNT(*) FROM i LEFT JOIN p ON p.id = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Err(NotSimple),
            ),
            (
                "a second join",
                "SELECT p.name, COUNT(*) FROM i JOIN p ON p.id = i.product_id \
                 JOIN v ON v.product_id = i.product_id AND v.color = i.color \
                 WHERE i.product_id = 5 AND i.color = 1"
                    .into(),
                Err(NotSimple),
            ),
            (
                "the same table joined to itself: an insert is on both sides",
                "SELECT COUNT(*) FROM i JOIN i AS j ON j.id = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Err(NotSimple),
            ),
            (
                "a column of p aggregated: read as p's aggregate, i is not joined by its key",
                "SELECT SUM(p.sku) FROM i JOIN p ON p.id = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Err(NotSimple),
            ),
            (
                "GROUP BY a column of p",
                "SELECT p.name, COUNT(*) FROM i JOIN p ON p.id = i.product_id \
                 WHERE i.product_id = 5 GROUP BY p.name"
                    .into(),
                Err(NotSimple),
            ),
            (
                "a column of p unqualified: not i's",
                "SELECT name, COUNT(*) FROM i JOIN p ON p.id = i.product_id \
                 WHERE i.product_id = 5"
                    .into(),
                Err(Aggregate),
            ),
            (
                "joined on a column that is not an integer: compared otherwise",
                "SELECT COUNT(*) FROM i JOIN p ON p.id = i.note WHERE p.id = 5".into(),
                Err(Column),
            ),
            (
                "STRAIGHT_JOIN, USING, NATURAL: other words",
                "SELECT COUNT(*) FROM i JOIN p USING (id) WHERE i.id = 5".into(),
                Err(NotSimple),
            ),
        ];
        for (why, sql, want) in rows {
            let got = bind_joined(sql).map(drop);
            assert_eq!(got, *want, "{why}: {sql}");
        }
        let r = bind_joined(&format!("{page} WHERE p.id = 5")).unwrap();
        assert_eq!(
            (r.table.as_str(), r.join.as_ref().unwrap().table.as_str()),
            ("i", "p")
        );
        assert_eq!(r.filter, vec![("product_id".into(), Cond::In(vec![5]))]);
        assert_eq!(
            r.used_columns(),
            vec!["product_id".to_string(), "qty".into()]
        );
        assert_eq!(
            r.verify_sql(),
            "SELECT `qc_p`.`name`, COUNT(*), SUM(`qc_t`.`qty`) FROM `db`.`i` AS `qc_t` \
             JOIN `db`.`p` AS `qc_p` ON `qc_p`.`id` = `qc_t`.`product_id` \
             WHERE `qc_t`.`product_id` IN (5)"
        );
    }

    /// Patching a join: the joined row's columns carried from the result that shows it, an
    /// insert refused when no row of the result shows that it exists.
    #[test]
    fn joined_patches_carry_the_joined_row() {
        const NAME: (u8, u16, u8) = (0xfd, 0, 0);
        const CNT: (u8, u16, u8) = (TYPE_LONGLONG, 0x81, 0);
        const SM: (u8, u16, u8) = (TYPE_NEWDECIMAL, 0x81, 0);
        type Row<'a> = (
            &'a str,
            [Option<&'a str>; 3],
            &'a [[Option<i128>; 2]],
            std::result::Result<[Option<&'a str>; 3], Refusal>,
        );
        let rows: &[Row] = &[
            (
                "an insert for the pinned key: counted, the name carried",
                [Some("Lamp"), Some("2"), Some("10")],
                &[[Some(5), Some(3)]],
                Ok([Some("Lamp"), Some("3"), Some("13")]),
            ),
            (
                "an insert for another key: unchanged",
                [Some("Lamp"), Some("2"), Some("10")],
                &[[Some(6), Some(3)]],
                Ok([Some("Lamp"), Some("2"), Some("10")]),
            ),
            (
                "NULL in the joined column joins nothing: unchanged",
                [Some("Lamp"), Some("2"), Some("10")],
                &[[None, Some(3)]],
                Ok([Some("Lamp"), Some("2"), Some("10")]),
            ),
            (
                "the row's name is NULL, but counted rows show it exists",
                [None, Some("2"), Some("10")],
                &[[Some(5), Some(3)]],
                Ok([None, Some("3"), Some("13")]),
            ),
            (
                "an empty join answers one row (NULL, 0, NULL) without GROUP BY: whether \
                 p's row exists is unknown",
                [None, Some("0"), None],
                &[[Some(5), Some(3)]],
                Err(Refusal::Unjoined),
            ),
            (
                "an empty join and an insert for another key: unchanged",
                [None, Some("0"), None],
                &[[Some(6), Some(3)]],
                Ok([None, Some("0"), None]),
            ),
        ];
        let recipe =
            bind_joined("SELECT p.name, COUNT(*), SUM(i.qty) FROM i JOIN p ON p.id = i.product_id WHERE i.product_id = 5")
                .unwrap();
        for (why, stored, ins, want) in rows {
            let (bytes, at) = result_rows(&[NAME, CNT, SM], &[text_row(stored)], true);
            let ins: Vec<Vec<Option<i128>>> = ins.iter().map(|r| r.to_vec()).collect();
            let got = recipe
                .apply(&bytes, at, &ins, false)
                .map(|p| p.bytes.to_vec());
            let want = want.map(|w| result_rows(&[NAME, CNT, SM], &[text_row(&w)], true).0);
            assert_eq!(got, want, "{why}");
        }
        // The corrupting fault changes an aggregate, never the joined row's columns.
        let (bytes, at) = result_rows(
            &[NAME, CNT, SM],
            &[text_row(&[Some("Lamp"), Some("2"), Some("10")])],
            true,
        );
        let broken = recipe
            .apply(&bytes, at, &[vec![Some(5), Some(3)]], true)
            .unwrap();
        let (want, _) = result_rows(
            &[NAME, CNT, SM],
            &[text_row(&[Some("Lamp"), Some("4"), Some("13")])],
            true,
        );
        assert_eq!(&broken.bytes[..], &want[..]);
        // Binary rows: the name's length-encoded bytes carried, NULL in the bitmap.
        let rb = Recipe {
            binary: true,
            ..recipe.clone()
        };
        let bin = |name: Option<&str>, n: i64, sum: &str| {
            let mut r = vec![0u8, if name.is_none() { 0x04 } else { 0 }];
            if let Some(s) = name {
                put_lenenc_str_vec(&mut r, s.as_bytes());
            }
            r.extend_from_slice(&n.to_le_bytes());
            put_lenenc_str_vec(&mut r, sum.as_bytes());
            r
        };
        let (bytes, at) = result_rows(&[NAME, CNT, SM], &[bin(Some("Lamp"), 2, "10")], true);
        let got = rb
            .apply(&bytes, at, &[vec![Some(5), Some(3)]], false)
            .unwrap();
        let (want, _) = result_rows(&[NAME, CNT, SM], &[bin(Some("Lamp"), 3, "13")], true);
        assert_eq!(&got.bytes[..], &want[..]);
        let (bytes, at) = result_rows(&[NAME, CNT, SM], &[bin(None, 1, "1")], true);
        let got = rb
            .apply(&bytes, at, &[vec![Some(5), Some(3)]], false)
            .unwrap();
        let (want, _) = result_rows(&[NAME, CNT, SM], &[bin(None, 2, "4")], true);
        assert_eq!(&got.bytes[..], &want[..]);
        // The verifier does not compare the joined columns (its connection's character
        // sets are its own), only the aggregates over the join.
        assert_eq!(
            recipe.text_rows(&[vec![
                Some(b"L\xe4mp".to_vec()),
                Some(b"3".to_vec()),
                Some(b"13".to_vec())
            ]]),
            Some(vec![vec![None, Some(3), Some(13)]])
        );

        // Grouped: a new day's group shows the same joined row; no group, no row known.
        let grouped = bind_joined(
            "SELECT i.day, p.name, COUNT(*) FROM i JOIN p ON p.id = i.product_id \
             WHERE i.product_id = 5 GROUP BY i.day",
        )
        .unwrap();
        const DAY_T: (u8, u16, u8) = (TYPE_DATE, 0x80, 0);
        let g = |rows: &[[Option<&str>; 3]]| {
            let rows: Vec<Vec<u8>> = rows.iter().map(|r| text_row(r)).collect();
            result_rows(&[DAY_T, NAME, CNT], &rows, true)
        };
        let d = |s: &str| temporal(s).unwrap().0;
        let (bytes, at) = g(&[[Some("2024-01-02"), Some("Lamp"), Some("1")]]);
        let got = grouped
            .apply(&bytes, at, &[vec![Some(5), Some(d("2024-01-01"))]], false)
            .unwrap();
        let (want, _) = g(&[
            [Some("2024-01-01"), Some("Lamp"), Some("1")],
            [Some("2024-01-02"), Some("Lamp"), Some("1")],
        ]);
        assert_eq!(&got.bytes[..], &want[..], "a new group first");
        let (bytes, at) = g(&[]);
        assert_eq!(
            grouped.apply(&bytes, at, &[vec![Some(5), Some(d("2024-01-01"))]], false),
            Err(Refusal::Unjoined),
            "with GROUP BY an empty join answers no row"
        );
        let (bytes, at) = g(&[
            [Some("2024-01-01"), Some("Lamp"), Some("1")],
            [Some("2024-01-02"), Some("Desk"), Some("1")],
        ]);
        assert_eq!(
            grouped.apply(&bytes, at, &[vec![Some(5), Some(d("2024-01-03"))]], false),
            Err(Refusal::Result),
            "two joined rows: not this shape's result"
        );
    }
}
