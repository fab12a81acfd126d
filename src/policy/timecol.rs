//! Policy: reads that may turn a TIME value into a date (issue #35).
//!
//! The server converts a TIME value to DATETIME or DATE with the session's current date
//! (`CURRENT_DATE` under its `time_zone` and `timestamp`): `CAST(t AS DATETIME)`,
//! `TIMESTAMP(t)`, `DATE(t)`, `YEAR(t)` and the other date parts, `UNIX_TIMESTAMP(t)`,
//! `DATEDIFF`, a comparison of a TIME column with a DATETIME / DATE / TIMESTAMP value, and
//! a UNION / COALESCE / IF / CASE / GREATEST mixing TIME with a date type. Such a read calls
//! no time function, yet its answer changes at midnight, after `SET timestamp` (a trigger
//! may run one, which no text shows) and with the time zone: a cached copy would be stale.
//!
//! No analysis here types expressions. The rule (fail closed) looks at the text and at what
//! the catalog says of the columns of every relation the read depends on (views resolved,
//! the views themselves included): it refuses a read that
//! - references a TIME column (its name anywhere in the text, or `*`, `TABLE t` or a NATURAL
//!   join over a relation that has one), or depends on a relation whose columns the
//!   catalog does not know, and
//! - has something that may give the TIME value a date: a date function or `EXTRACT`, the
//!   words DATE / DATETIME / TIMESTAMP / INTERVAL (a CAST or CONVERT to a date type, a
//!   typed literal), a column the catalog says is DATE / DATETIME / TIMESTAMP (by name, a
//!   NATURAL join, or `*` / `TABLE t` in a statement with a subquery, whose columns may be
//!   compared: `(tm) IN (SELECT * FROM u)`; a plain `SELECT *` only lists them side by
//!   side), a string literal that looks like a date, a UNION / INTERSECT / EXCEPT, or a `?`
//!   placeholder whose value may be a date.
//!
//! The code a read runs in the reader's session (a view's definition, a generated column's
//! expression) is asked the same question over the same relations: `SELECT id FROM v` is
//! refused when v's definition compares a TIME column with a DATETIME one.
//!
//! The TIME value need not be a column's: `CAST(x AS TIME)`, a `TIME'…'` literal, `MAKETIME`,
//! `SEC_TO_TIME`, `TIMEDIFF` and the other functions that return one, or an execute's
//! TIME-typed parameter, met by a DATETIME column or a date function, take the date the
//! same way (`WHERE dt < MAKETIME(10, 0, 0)`): the text's own TIME values count as a TIME
//! column does.
//!
//! Comparisons of a TIME column with string literals that are times (`WHERE t > '10:00'`),
//! numbers, and reads naming no date form stay cacheable. MariaDB 10.11 compares a TIME
//! column with a date-looking string or a number as TIME (probed), but MySQL and other
//! versions may not: the string case is refused anyway.

use super::Reason;
use crate::analysis::lexer::{self, Lexer, Tok, Token};
use crate::analysis::slices::Lit;

/// What the catalog says of the columns of one relation a read depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Temporals {
    /// Lower-cased names of its TIME columns.
    pub time: Vec<String>,
    /// Lower-cased names of its DATE, DATETIME and TIMESTAMP columns.
    pub dated: Vec<String>,
    /// Code the server runs in the reader's session when it reads the relation: a view's
    /// definition, a generated column's expression. Asked as the read's own text is.
    pub code: Vec<String>,
    /// The catalog listed the relation's columns: else `time` and `dated` say nothing, and
    /// it counts as a relation of unknown columns (the code is asked all the same).
    pub columns_known: bool,
}

/// What is known of an execute's parameter values (`params_known`): none is a date, none is
/// a TIME. Text has no parameters: a `?` there is no placeholder, and counts as one all the
/// same ([`Params::UNKNOWN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// No value is or may be a date (DATE / DATETIME / TIMESTAMP, or a string that looks
    /// like one).
    pub not_dates: bool,
    /// No value is or may be a TIME (a TIME-typed value, or one of a type not read).
    pub not_times: bool,
}

impl Params {
    /// Nothing known: every `?` may be a date and may be a TIME.
    pub const UNKNOWN: Params = Params {
        not_dates: false,
        not_times: false,
    };
}

/// Whether a read of `sql` (a text read's statement, or a prepared statement's text) over
/// `relations` (one per relation it depends on; None where the catalog does not know the
/// columns) may give a TIME value the session's date. `params`: what is known of an
/// execute's parameter values ([`params_known`]; [`Params::UNKNOWN`] for text).
pub fn time_with_date(
    sql: &[u8],
    relations: &[Option<&Temporals>],
    params: Params,
) -> Result<(), Reason> {
    let unknown = relations.iter().any(|r| columns_unknown(*r));
    let has_time = relations.iter().flatten().any(|r| !r.time.is_empty());
    let code = || relations.iter().flatten().flat_map(|r| r.code.iter());
    if !unknown
        && !has_time
        && !may_make_time(sql)
        && (params.not_times || !sql.contains(&b'?'))
        && !code().any(|c| may_make_time(c.as_bytes()))
    {
        // The common case: no TIME value anywhere, nothing to look for in the text.
        return Ok(());
    }
    let refused = |text: &[u8], params| text_may_date(text, relations, has_time, params);
    if refused(sql, params) || code().any(|c| refused(c.as_bytes(), Params::UNKNOWN)) {
        return Err(Reason::TimeWithDate);
    }
    Ok(())
}

/// Whether a text may make a TIME value of its own (`CAST(x AS TIME)`, `TIME'…'`, a
/// function returning one): a cheap look for the words that can, before lexing.
fn may_make_time(text: &[u8]) -> bool {
    let has = |w: &[u8]| text.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
    has(b"time") || has(b"str_to_date") || text.contains(&b'{')
}

/// Whether the catalog does not know a relation's columns.
fn columns_unknown(r: Option<&Temporals>) -> bool {
    r.is_none_or(|r| !r.columns_known)
}

/// [`time_with_date`]'s question of one text (the read's, or code it runs).
fn text_may_date(
    sql: &[u8],
    relations: &[Option<&Temporals>],
    has_time: bool,
    params: Params,
) -> bool {
    let known = || relations.iter().flatten().copied();
    let has_dated = known().any(|r| !r.dated.is_empty());
    let mut time_ref = relations.iter().any(|r| columns_unknown(*r));
    let mut date_source = false;
    for_each_reading(sql, |toks, text| {
        // `*` and `TABLE t` only list a date column beside a TIME one, unless a subquery
        // holds them, whose columns may be compared (`(tm) IN (SELECT * FROM u)`).
        let nested = toks.windows(2).any(|w| {
            w[0].is_punct(b'(')
                && ["SELECT", "TABLE", "WITH", "VALUES"]
                    .iter()
                    .any(|k| w[1].is_kw(text, k))
        });
        for (i, t) in toks.iter().enumerate() {
            let next_is_paren = toks.get(i + 1).is_some_and(|n| n.is_punct(b'('));
            match t.tok {
                Tok::Punct(b'*') => {
                    time_ref |= has_time;
                    date_source |= has_dated && nested;
                }
                Tok::Punct(b'?') => {
                    date_source |= !params.not_dates;
                    time_ref |= !params.not_times;
                }
                Tok::Word => {
                    let w = t.bytes(text);
                    // `TABLE t` reads every column as `*` does; a NATURAL join compares
                    // every pair of columns of one name, none of which the text names.
                    if w.eq_ignore_ascii_case(b"table") {
                        time_ref |= has_time;
                        date_source |= has_dated && nested;
                    }
                    if w.eq_ignore_ascii_case(b"natural") {
                        time_ref |= has_time;
                        date_source |= has_dated;
                    }
                    date_source |= is_date_word(w) || (next_is_paren && is_date_function(w));
                    time_ref |= names_column(known(), w, |r| &r.time);
                    time_ref |= makes_time(toks, i, text, known());
                    date_source |= names_column(known(), w, |r| &r.dated);
                }
                Tok::Backquoted | Tok::DoubleQuoted => {
                    let b = t.bytes(text);
                    let inner = b.get(1..b.len().saturating_sub(1)).unwrap_or(&[]);
                    time_ref |= names_column(known(), inner, |r| &r.time);
                    date_source |= names_column(known(), inner, |r| &r.dated);
                    // `"…"` is a string unless ANSI_QUOTES.
                    date_source |= t.tok == Tok::DoubleQuoted && looks_like_date(inner);
                }
                // `[…]`: a name under sql_mode=MSSQL's reading.
                Tok::Bracketed => {
                    let inner = lexer::bracketed_name(t.bytes(text));
                    time_ref |= names_column(known(), &inner, |r| &r.time);
                    date_source |= names_column(known(), &inner, |r| &r.dated);
                }
                Tok::Str => {
                    let b = t.bytes(text);
                    date_source |= looks_like_date(b.get(1..).unwrap_or(&[]));
                }
                Tok::HexBin => date_source |= hex_bin_may_be_date(t.bytes(text)),
                _ => {}
            }
        }
    });
    time_ref && date_source
}

/// What is known of an execute's parameter values (`params`: as
/// `analysis::params::param_literals` read them, None when they could not be read; `n`:
/// the statement's parameter count): integers, NULLs and strings that do not look like a
/// date are no date; integers, NULLs, strings and DATE / DATETIME / TIMESTAMP values are no
/// TIME (a string compared with a DATETIME is read as one, with no current date; a TIME
/// value, or one of a type not read, may be a TIME).
pub fn params_known(params: Option<&[Option<Lit>]>, n: u16) -> Params {
    if n == 0 {
        return Params {
            not_dates: true,
            not_times: true,
        };
    }
    let Some(params) = params.filter(|p| p.len() >= n as usize) else {
        return Params::UNKNOWN;
    };
    Params {
        not_dates: params.iter().all(|p| match p {
            Some(Lit::Int(_)) | Some(Lit::Null) => true,
            Some(Lit::Str(s)) => !looks_like_date(s.as_bytes()),
            Some(Lit::Time(_)) | Some(Lit::Param(_)) | None => false,
        }),
        not_times: params.iter().all(|p| match p {
            Some(Lit::Int(_)) | Some(Lit::Null) | Some(Lit::Str(_)) | Some(Lit::Time(_)) => true,
            Some(Lit::Param(_)) | None => false,
        }),
    }
}

/// Whether the word at `toks[i]` makes a TIME value of its own: a function returning one
/// (`MAKETIME(…)`, `SEC_TO_TIME(…)`, `TIMEDIFF(…)`, `TIME(…)`, …), or the type word `TIME`
/// of a `CAST(x AS TIME)`, `CONVERT(x, TIME)`, a `TIME'…'` literal or a JSON_TABLE column
/// (`x TIME PATH '$'`), or the ODBC escape `{t '…'}`. `time` is also a common column name: a bare `time` that names a
/// column of a relation read (known to be no TIME one) is that column.
fn makes_time<'a>(
    toks: &[Token],
    i: usize,
    text: &[u8],
    mut relations: impl Iterator<Item = &'a Temporals>,
) -> bool {
    const FUNCTIONS: &[&str] = &[
        "addtime",
        "current_time",
        "curtime",
        "maketime",
        "sec_to_time",
        "str_to_date",
        "subtime",
        "time",
        "timediff",
        "utc_time",
    ];
    let w = toks[i].bytes(text);
    let next = toks.get(i + 1);
    let next_is_paren = next.is_some_and(|n| n.is_punct(b'('));
    // STR_TO_DATE gives a DATE or DATETIME, not a TIME, when its format names a date part.
    if next_is_paren
        && w.eq_ignore_ascii_case(b"str_to_date")
        && literal_format(toks, i + 2, text).is_some_and(format_has_date_part)
    {
        return false;
    }
    if next_is_paren
        && FUNCTIONS
            .iter()
            .any(|k| k.as_bytes().eq_ignore_ascii_case(w))
    {
        return true;
    }
    let prev = i.checked_sub(1).and_then(|j| toks.get(j));
    let quoted = |n: &Token| matches!(n.tok, Tok::Str | Tok::DoubleQuoted);
    if w.eq_ignore_ascii_case(b"t") {
        return prev.is_some_and(|p| p.is_punct(b'{')) && next.is_some_and(quoted);
    }
    if !w.eq_ignore_ascii_case(b"time") {
        return false;
    }
    let typed = next.is_some_and(|n| {
        matches!(n.tok, Tok::Str | Tok::DoubleQuoted)
            || n.is_punct(b')')
            || n.is_kw(text, "path")
            || n.is_kw(text, "exists")
    }) || prev.is_some_and(|p| p.is_kw(text, "as"));
    typed || !relations.any(|r| r.time.iter().chain(&r.dated).any(|c| c == "time"))
}

/// Runs `f` over the tokens of every reading of `sql` the server may make (sql_mode's
/// backslash and quote rules, multi-byte and single-byte client character sets): what any
/// reading shows counts.
fn for_each_reading(sql: &[u8], mut f: impl FnMut(&[Token], &[u8])) {
    let toks: Vec<Token> = Lexer::new(sql).collect();
    f(&toks, sql);
    for lx in lexer::other_lexers(sql) {
        let toks: Vec<Token> = lx.collect();
        f(&toks, sql);
    }
    if let Some(alt) = lexer::single_byte_reading(sql) {
        let toks: Vec<Token> = Lexer::new(&alt).collect();
        f(&toks, &alt);
    }
}

/// Whether `name` (as written, any case) is one of the columns `pick` lists of a relation.
fn names_column<'a>(
    mut relations: impl Iterator<Item = &'a Temporals>,
    name: &[u8],
    pick: impl Fn(&Temporals) -> &Vec<String>,
) -> bool {
    !name.is_empty()
        && relations.any(|r| {
            pick(r)
                .iter()
                .any(|c| c.as_bytes().eq_ignore_ascii_case(name) || unicode_eq(c, name))
        })
}

/// Case-insensitive equality beyond ASCII (column names are case-insensitive).
fn unicode_eq(lower: &str, name: &[u8]) -> bool {
    !name.is_ascii()
        && std::str::from_utf8(name).is_ok_and(|n| n.to_lowercase() == lower.to_lowercase())
}

/// The second argument of the call whose arguments start at `toks[from]`, when it is a
/// string literal standing alone (`STR_TO_DATE(x, '%Y-%m-%d')`): its bytes inside the quotes.
fn literal_format<'t>(toks: &[Token], from: usize, text: &'t [u8]) -> Option<&'t [u8]> {
    let mut depth = 0usize;
    let mut j = from;
    while let Some(t) = toks.get(j) {
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            if depth == 0 {
                return None;
            }
            depth -= 1;
        } else if t.is_punct(b',') && depth == 0 {
            let f = toks.get(j + 1)?;
            let closes = toks.get(j + 2).is_some_and(|c| c.is_punct(b')'));
            if !closes || !matches!(f.tok, Tok::Str | Tok::DoubleQuoted) {
                return None;
            }
            let b = f.bytes(text);
            return b.get(1..b.len().saturating_sub(1));
        }
        j += 1;
    }
    None
}

/// Whether a DATE_FORMAT-style format names a date part (`%Y`, `%m`, `%d`, `%W`, …; `%%` is a
/// percent sign).
fn format_has_date_part(f: &[u8]) -> bool {
    const DATE_PARTS: &[u8] = b"abcDdejMmUuVvWwXxYy";
    let mut k = 0;
    while k + 1 < f.len() {
        if f[k] == b'%' {
            if DATE_PARTS.contains(&f[k + 1]) {
                return true;
            }
            k += 2;
        } else {
            k += 1;
        }
    }
    false
}

/// Words that name a date type or a set operation wherever they stand: `CAST(x AS DATE)`,
/// `CONVERT(x, DATETIME)`, `TIMESTAMP'…'`, `DATE(x)`, `x + INTERVAL 1 DAY`, `UNION`.
fn is_date_word(w: &[u8]) -> bool {
    const WORDS: &[&str] = &[
        "date",
        "datetime",
        "timestamp",
        "interval",
        "union",
        "intersect",
        "except",
    ];
    WORDS.iter().any(|k| k.as_bytes().eq_ignore_ascii_case(w))
}

/// Built-ins that take a date or datetime (a TIME argument gets the current date) or
/// return one (a TIME compared with or mixed with it gets the current date).
fn is_date_function(w: &[u8]) -> bool {
    const FUNCTIONS: &[&str] = &[
        "adddate",
        "add_months",
        "convert_tz",
        "date_add",
        "date_format",
        "date_sub",
        "datediff",
        "day",
        "dayname",
        "dayofmonth",
        "dayofweek",
        "dayofyear",
        "extract",
        "from_days",
        "from_unixtime",
        "last_day",
        "makedate",
        "month",
        "monthname",
        "quarter",
        "str_to_date",
        "subdate",
        "timestampadd",
        "timestampdiff",
        "to_days",
        "to_seconds",
        "unix_timestamp",
        "week",
        "weekday",
        "weekofyear",
        "year",
        "yearweek",
    ];
    FUNCTIONS
        .iter()
        .any(|k| k.as_bytes().eq_ignore_ascii_case(w))
}

/// Whether a string's value (`s`: from after its opening quote; what follows its closing
/// quote is ignored) may read as a date: leading spaces, then digits, a delimiter other
/// than `:` (a time's), digits, a delimiter, digits (`2026-01-01`, `26/1/1 10:00`); or
/// eight digits or more (`20260101`, `20260101100000`).
pub fn looks_like_date(s: &[u8]) -> bool {
    let s = match s.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(i) => &s[i..],
        None => return false,
    };
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let d1 = digits(s);
    if d1 == 0 {
        return false;
    }
    if d1 >= 8 {
        return true;
    }
    let delim = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_punctuation() && *b != b'\'');
    if !delim(s.get(d1)) || s[d1] == b':' {
        return false;
    }
    let rest = &s[d1 + 1..];
    let d2 = digits(rest);
    if d2 == 0 || !delim(rest.get(d2)) {
        return false;
    }
    digits(&rest[d2 + 1..]) > 0
}

/// Whether a hexadecimal or bit literal (`X'…'`, `0x…`, `B'…'`, `0b…`) may hold a
/// date-looking string: a hexadecimal one is decoded and asked; a bit one is taken for one
/// when it is long enough to hold `1-1-1`.
fn hex_bin_may_be_date(t: &[u8]) -> bool {
    let lower: Vec<u8> = t.to_ascii_lowercase();
    let (hex, body) = if let Some(b) = lower.strip_prefix(b"0x") {
        (true, b)
    } else if let Some(b) = lower.strip_prefix(b"x'") {
        (true, b.strip_suffix(b"'").unwrap_or(b))
    } else if let Some(b) = lower.strip_prefix(b"0b") {
        (false, b)
    } else if let Some(b) = lower.strip_prefix(b"b'") {
        (false, b.strip_suffix(b"'").unwrap_or(b))
    } else {
        return true;
    };
    if !hex {
        return body.len() >= 40;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut bytes = Vec::with_capacity(body.len() / 2 + 1);
    // An odd count: the first digit stands alone, as the server pads it.
    let (first, pairs) = if body.len() % 2 == 1 {
        (body.first().copied(), &body[1..])
    } else {
        (None, body)
    };
    if let Some(c) = first {
        match nibble(c) {
            Some(n) => bytes.push(n),
            None => return true,
        }
    }
    for p in pairs.chunks(2) {
        match (nibble(p[0]), p.get(1).and_then(|&c| nibble(c))) {
            (Some(h), Some(l)) => bytes.push(h << 4 | l),
            _ => return true,
        }
    }
    looks_like_date(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(time: &[&str], dated: &[&str]) -> Option<Temporals> {
        Some(Temporals {
            time: time.iter().map(|s| s.to_string()).collect(),
            dated: dated.iter().map(|s| s.to_string()).collect(),
            code: Vec::new(),
            columns_known: true,
        })
    }

    /// One row per form: (what, statement, relations, parameters known not dates, refused).
    #[test]
    fn a_read_that_may_give_a_time_a_date_is_refused() {
        let t = || rel(&["tm"], &["dt"]);
        let only_time = || rel(&["tm"], &[]);
        let no_time = || rel(&[], &["dt"]);
        let code = |c: &str| {
            Some(Temporals {
                code: vec![c.to_string()],
                columns_known: true,
                ..Temporals::default()
            })
        };
        let view_cast = || code("select cast(`t`.`tm` as datetime) AS `d` from `db`.`t`");
        let view_cmp = || code("select `t`.`id` AS `id` from `db`.`t` where `t`.`tm` < `t`.`dt`");
        let view_plain = || code("select `t`.`id` AS `id`,`t`.`tm` AS `tm` from `db`.`t`");
        type Row = (
            &'static str,
            &'static str,
            Vec<Option<Temporals>>,
            bool,
            bool,
        );
        let rows: Vec<Row> = vec![
            // Conversions in the text.
            (
                "CAST AS DATETIME",
                "SELECT CAST(tm AS DATETIME) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "CAST AS DATE",
                "SELECT CAST(tm AS DATE) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "CONVERT to DATETIME",
                "SELECT CONVERT(tm, DATETIME) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "TIMESTAMP()",
                "SELECT TIMESTAMP(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "DATE()",
                "SELECT DATE(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "DATE_FORMAT",
                "SELECT DATE_FORMAT(tm, '%Y') FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "YEAR",
                "SELECT YEAR(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "MONTH",
                "select month(tm) from t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "DAYOFWEEK",
                "SELECT DAYOFWEEK(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "WEEK",
                "SELECT WEEK(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "TO_DAYS",
                "SELECT TO_DAYS(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "UNIX_TIMESTAMP",
                "SELECT UNIX_TIMESTAMP(tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "DATEDIFF",
                "SELECT DATEDIFF(tm, tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "TIMESTAMPDIFF",
                "SELECT TIMESTAMPDIFF(DAY, tm, tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "EXTRACT",
                "SELECT EXTRACT(YEAR FROM tm) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "FROM_UNIXTIME mixed in",
                "SELECT tm = FROM_UNIXTIME(0) FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "+ INTERVAL",
                "SELECT tm + INTERVAL 1 DAY FROM t",
                vec![only_time()],
                false,
                true,
            ),
            // Date-typed columns of any relation read.
            (
                "compared with a DATETIME column",
                "SELECT id FROM t WHERE tm < dt",
                vec![t()],
                false,
                true,
            ),
            (
                "a DATETIME column of another table",
                "SELECT u.id FROM t JOIN u ON t.tm = u.d",
                vec![only_time(), rel(&[], &["d"])],
                false,
                true,
            ),
            (
                "COALESCE with a DATETIME column",
                "SELECT COALESCE(tm, dt) FROM t",
                vec![t()],
                false,
                true,
            ),
            (
                "GREATEST with a DATETIME column",
                "SELECT GREATEST(tm, dt) FROM t",
                vec![t()],
                false,
                true,
            ),
            (
                "backquoted names",
                "SELECT `TM` = `Dt` FROM t",
                vec![t()],
                false,
                true,
            ),
            (
                "a NATURAL join of a TIME and a DATETIME of one name",
                "SELECT id FROM t NATURAL JOIN u",
                vec![only_time(), rel(&[], &["tm"])],
                false,
                true,
            ),
            (
                "TABLE in a UNION",
                "TABLE t UNION TABLE u",
                vec![only_time(), rel(&[], &["d"])],
                false,
                true,
            ),
            (
                "SELECT * with both lists them side by side",
                "SELECT * FROM t WHERE id = 1",
                vec![t()],
                false,
                false,
            ),
            (
                "a row compared with a subquery's *",
                "SELECT id FROM t WHERE (tm) IN (SELECT * FROM u)",
                vec![only_time(), rel(&[], &["d"])],
                false,
                true,
            ),
            // Literals.
            (
                "a datetime literal",
                "SELECT id FROM t WHERE tm = '2026-01-01 10:00:00'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "a date literal, other delimiters",
                "SELECT id FROM t WHERE tm < '26/1/1'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "a packed date literal",
                "SELECT id FROM t WHERE tm < '20260101'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "a typed literal",
                "SELECT id FROM t WHERE tm = TIMESTAMP'2026-01-01 10:00:00'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "a date literal with an introducer",
                "SELECT id FROM t WHERE tm = _latin1'2026-01-01'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "a national date literal",
                "SELECT id FROM t WHERE tm = N'2026-01-01'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "a hex date string",
                "SELECT id FROM t WHERE tm = X'323032362D30312D3031'",
                vec![only_time()],
                false,
                true,
            ),
            (
                "IF with a date literal",
                "SELECT IF(id, tm, '2026-01-01') FROM t",
                vec![only_time()],
                false,
                true,
            ),
            // Set operations.
            (
                "UNION",
                "SELECT tm FROM t UNION SELECT tm FROM t",
                vec![only_time()],
                false,
                true,
            ),
            (
                "INTERSECT",
                "SELECT tm FROM t INTERSECT SELECT id FROM t",
                vec![only_time()],
                false,
                true,
            ),
            // Parameters.
            (
                "a placeholder of unknown value",
                "SELECT id FROM t WHERE tm = ?",
                vec![only_time()],
                false,
                true,
            ),
            (
                "placeholders known not dates",
                "SELECT tm FROM t WHERE id = ?",
                vec![only_time()],
                true,
                false,
            ),
            // The catalog does not know the columns.
            (
                "unknown columns and a conversion",
                "SELECT DATE(x) FROM v",
                vec![None],
                false,
                true,
            ),
            (
                "unknown columns and a date column name is not enough",
                "SELECT x FROM v WHERE y = 1",
                vec![None],
                false,
                false,
            ),
            (
                "SELECT * of unknown columns with a CAST",
                "SELECT *, CAST(a AS DATE) FROM v",
                vec![None],
                false,
                true,
            ),
            // Code the read runs.
            (
                "a view casting a TIME column",
                "SELECT d FROM v",
                vec![view_cast(), only_time()],
                false,
                true,
            ),
            (
                "a view comparing TIME with DATETIME",
                "SELECT id FROM v",
                vec![view_cmp(), t()],
                false,
                true,
            ),
            (
                "a view reading a TIME plainly",
                "SELECT id, tm FROM v",
                vec![view_plain(), t()],
                false,
                false,
            ),
            (
                "a view of unknown columns casting a TIME column",
                "SELECT d FROM v",
                vec![
                    Some(Temporals {
                        columns_known: false,
                        ..view_cast().unwrap()
                    }),
                    only_time(),
                ],
                false,
                true,
            ),
            (
                "a view converting, no TIME anywhere",
                "SELECT d FROM v",
                vec![view_cast(), no_time()],
                false,
                false,
            ),
            (
                "a generated column's date part",
                "SELECT id FROM t",
                vec![Some(Temporals {
                    code: vec!["year(`tm`)".into()],
                    ..only_time().unwrap()
                })],
                false,
                true,
            ),
            // Readings under other sql_modes.
            (
                "a DATE() a backslash hides by default",
                r"SELECT 'a\', DATE(tm) -- ' FROM t",
                vec![only_time()],
                false,
                true,
            ),
            // Cacheable.
            (
                "a plain read of a TIME column",
                "SELECT tm FROM t WHERE id = 1",
                vec![t()],
                false,
                false,
            ),
            (
                "a TIME compared with a time literal",
                "SELECT id FROM t WHERE tm > '10:00:00'",
                vec![only_time()],
                false,
                false,
            ),
            (
                "a TIME with days",
                "SELECT id FROM t WHERE tm > '1 10:00:00.5'",
                vec![only_time()],
                false,
                false,
            ),
            (
                "a TIME compared with a number",
                "SELECT id FROM t WHERE tm > 100000",
                vec![only_time()],
                false,
                false,
            ),
            (
                "TIME functions",
                "SELECT TIME_TO_SEC(tm), HOUR(tm), ADDTIME(tm, '01:00') FROM t",
                vec![only_time()],
                false,
                false,
            ),
            (
                "a date conversion without a TIME column",
                "SELECT DATE(dt) FROM t",
                vec![no_time()],
                false,
                false,
            ),
            (
                "a DATETIME column not named",
                "SELECT tm FROM t WHERE id = 2",
                vec![t()],
                false,
                false,
            ),
            (
                "a column merely named like a date function",
                "SELECT year FROM t WHERE tm > '10:00'",
                vec![rel(&["tm"], &[])],
                false,
                false,
            ),
            // TIME values that are no column's (adversary17/time_value_not_a_column).
            (
                "MAKETIME met by a DATETIME column",
                "SELECT id FROM t WHERE dt < MAKETIME(10, 0, 0)",
                vec![no_time()],
                false,
                true,
            ),
            (
                "CAST AS TIME met by a DATETIME column",
                "SELECT id FROM t WHERE dt < CAST('10:00:00' AS TIME)",
                vec![no_time()],
                false,
                true,
            ),
            (
                "CONVERT to TIME met by a DATETIME column",
                "SELECT id FROM t WHERE dt < CONVERT('10:00:00', TIME)",
                vec![no_time()],
                false,
                true,
            ),
            (
                "SEC_TO_TIME to TIMESTAMP(), no temporal column",
                "SELECT id, TIMESTAMP(SEC_TO_TIME(3600)) FROM t",
                vec![rel(&[], &[])],
                false,
                true,
            ),
            (
                "a TIME literal in GREATEST with a DATETIME",
                "SELECT GREATEST(dt, TIME'10:00:00') FROM t",
                vec![no_time()],
                false,
                true,
            ),
            (
                "TIMEDIFF met by a DATETIME column",
                "SELECT id FROM t WHERE dt < TIMEDIFF('12:00:00', '02:00:00')",
                vec![no_time()],
                false,
                true,
            ),
            (
                "a JSON_TABLE TIME column met by a DATETIME",
                "SELECT t.id FROM t, JSON_TABLE('[1]', '$[*]' COLUMNS (x TIME PATH '$')) j WHERE t.dt < j.x",
                vec![no_time()],
                false,
                true,
            ),
            (
                "a view's TIME value met by a DATETIME",
                "SELECT id FROM v",
                vec![
                    no_time(),
                    Some(Temporals {
                        code: vec!["select `t`.`id` AS `id` from `t` where `t`.`dt` < maketime(10,0,0)".into()],
                        columns_known: true,
                        ..Temporals::default()
                    }),
                ],
                false,
                true,
            ),
            (
                "a parameter that may be a TIME met by a DATETIME",
                "SELECT id FROM t WHERE dt < ?",
                vec![no_time()],
                false,
                true,
            ),
            (
                "parameters known to be no TIME nor date",
                "SELECT id FROM t WHERE dt < ?",
                vec![no_time()],
                true,
                false,
            ),
            (
                "STR_TO_DATE with a time-only format: a TIME",
                "SELECT id FROM t WHERE dt < STR_TO_DATE('10:00', '%H:%i')",
                vec![no_time()],
                false,
                true,
            ),
            (
                "STR_TO_DATE with a format not a literal",
                "SELECT id FROM t WHERE dt < STR_TO_DATE('10', CONCAT('%', 'H'))",
                vec![no_time()],
                false,
                true,
            ),
            (
                "STR_TO_DATE with a literal percent before Y",
                "SELECT id FROM t WHERE dt < STR_TO_DATE('10 %Y', '%H %%Y')",
                vec![no_time()],
                false,
                true,
            ),
            (
                "STR_TO_DATE with a date format: no TIME",
                "SELECT id FROM t WHERE dt > STR_TO_DATE('2020-01-01', '%Y-%m-%d')",
                vec![no_time()],
                false,
                false,
            ),
            (
                "an ODBC time literal met by a DATETIME column",
                "SELECT id FROM t WHERE dt < {t '10:00:00'}",
                vec![no_time()],
                false,
                true,
            ),
            (
                "an ODBC time literal, spaced and upper case",
                "SELECT GREATEST(dt, { T '10:00:00' }) FROM t",
                vec![no_time()],
                false,
                true,
            ),
            (
                "an ODBC timestamp literal, no TIME",
                "SELECT id FROM t WHERE dt > {ts '2021-01-01 00:00:00'}",
                vec![no_time()],
                false,
                false,
            ),
            (
                "a column named t",
                "SELECT t FROM x WHERE dt > '2021-01-01'",
                vec![no_time()],
                false,
                false,
            ),
            (
                "a DATETIME column named time",
                "SELECT time FROM t WHERE time > '2026-01-01'",
                vec![rel(&[], &["time"])],
                false,
                false,
            ),
            (
                "a TIME value without a date form",
                "SELECT id, MAKETIME(10, 0, 0) FROM t",
                vec![no_time()],
                false,
                false,
            ),
            (
                "MAX of a TIME",
                "SELECT MAX(tm), COUNT(*) FROM t",
                vec![only_time()],
                false,
                false,
            ),
        ];
        for (what, sql, relations, params_ok, refused) in rows {
            let relations: Vec<Option<&Temporals>> = relations.iter().map(Option::as_ref).collect();
            let params = if params_ok {
                Params {
                    not_dates: true,
                    not_times: true,
                }
            } else {
                Params::UNKNOWN
            };
            let got = time_with_date(sql.as_bytes(), &relations, params);
            let want = if refused {
                Err(Reason::TimeWithDate)
            } else {
                Ok(())
            };
            assert_eq!(got, want, "{what}: {sql}");
        }
    }

    #[test]
    fn date_looking_strings() {
        let rows: &[(&str, bool)] = &[
            ("2026-01-01", true),
            ("2026-01-01 10:00:00", true),
            ("  26/1/1", true),
            ("2026.1.1", true),
            ("20260101", true),
            ("20260101100000", true),
            ("10:00:00", false),
            ("10:00:00.5", false),
            ("1 10:00:00", false),
            ("2026-01", false),
            ("abc", false),
            ("", false),
            ("1234567", false),
        ];
        for (s, want) in rows {
            assert_eq!(looks_like_date(s.as_bytes()), *want, "{s}");
        }
    }

    #[test]
    fn parameters_known_not_dates_nor_times() {
        let s = |x: &str| Some(Lit::Str(x.to_string()));
        // (what, values, parameter count, known no date, known no TIME)
        type Row = (&'static str, Option<Vec<Option<Lit>>>, u16, bool, bool);
        let rows: Vec<Row> = vec![
            ("no parameters", None, 0, true, true),
            ("unreadable", None, 1, false, false),
            (
                "an integer and a NULL",
                Some(vec![Some(Lit::Int("1".into())), Some(Lit::Null)]),
                2,
                true,
                true,
            ),
            ("a time string", Some(vec![s("10:00:00")]), 1, true, true),
            ("a date string", Some(vec![s("2026-01-01")]), 1, false, true),
            (
                "a DATETIME-typed value",
                Some(vec![Some(Lit::Time("2026-01-01 00:00:00.000000".into()))]),
                1,
                false,
                true,
            ),
            (
                "a TIME-typed value (not read) or another type",
                Some(vec![None]),
                1,
                false,
                false,
            ),
            (
                "fewer values than parameters",
                Some(vec![]),
                1,
                false,
                false,
            ),
        ];
        for (what, params, n, dates, times) in rows {
            let want = Params {
                not_dates: dates,
                not_times: times,
            };
            assert_eq!(params_known(params.as_deref(), n), want, "{what}");
        }
    }
}
