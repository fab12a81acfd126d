//! Token-level analysis for the MySQL statements sqlparser does not parse (LOAD DATA,
//! OPTIMIZE/REPAIR/ANALYZE TABLE, DO, multi-table `UPDATE a, b`, trigger and routine DDL,
//! `TABLE t`, `… INTO OUTFILE`, `LOCK IN SHARE MODE`, `NEXT VALUE FOR`) or misreads
//! (MariaDB's `DELETE HISTORY FROM t`).
//!
//! Each fallback recognises one narrow shape and gives up (None) on anything else, so the
//! caller's conservative default — not cached, or a write to unknown tables — applies.

use super::functions::{self, FnClass};
use super::lexer::{Lexer, Tok, Token};
use super::{NotCached, ReadInfo, TableRef, WriteInfo};

struct Toks<'a> {
    sql: &'a [u8],
    t: Vec<Token>,
}

impl<'a> Toks<'a> {
    /// Whether something (a space, a comment) separates token `k` from the next.
    fn spaced(&self, k: usize) -> bool {
        match (self.t.get(k), self.t.get(k + 1)) {
            (Some(a), Some(b)) => a.end != b.start,
            _ => false,
        }
    }

    fn new(sql: &'a str) -> Self {
        let sql = sql.as_bytes();
        Toks {
            sql,
            t: Lexer::new(sql).collect(),
        }
    }

    fn kw(&self, i: usize, kw: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is_kw(self.sql, kw))
    }

    fn punct(&self, i: usize, c: u8) -> bool {
        self.t.get(i).is_some_and(|t| t.is_punct(c))
    }

    /// An identifier at `i`, unquoted.
    fn ident(&self, i: usize) -> Option<String> {
        let t = self.t.get(i)?;
        let b = t.bytes(self.sql);
        let s = match t.tok {
            Tok::Word => String::from_utf8_lossy(b).into_owned(),
            Tok::Backquoted | Tok::DoubleQuoted if b.len() >= 2 => {
                let q = b[0] as char;
                let inner = String::from_utf8_lossy(&b[1..b.len() - 1]).into_owned();
                inner.replace(&format!("{q}{q}"), &q.to_string())
            }
            _ => return None,
        };
        Some(s)
    }

    /// `name` or `schema.name` at `i`; returns it and the index after it.
    fn table_name(&self, i: usize) -> Option<(TableRef, usize)> {
        let first = self.ident(i)?;
        if self.punct(i + 1, b'.') {
            let second = self.ident(i + 2)?;
            Some((TableRef::new(Some(&first), &second), i + 3))
        } else {
            Some((TableRef::new(None, &first), i + 1))
        }
    }

    /// How many arguments the call whose `(` is at `open` passes: its top-level commas
    /// plus one, none for `()`.
    fn arg_count(&self, open: usize) -> usize {
        let close = self.close_of(open);
        if close == open + 1 {
            return 0;
        }
        let mut depth = 0usize;
        let mut n = 1;
        for t in self.t.iter().take(close).skip(open + 1) {
            if t.is_punct(b'(') {
                depth += 1;
            } else if t.is_punct(b')') {
                depth = depth.saturating_sub(1);
            } else if depth == 0 && t.is_punct(b',') {
                n += 1;
            }
        }
        n
    }

    /// Index of the `)` matching the `(` at `open` (or the end).
    fn close_of(&self, open: usize) -> usize {
        let mut depth = 0usize;
        for (k, t) in self.t.iter().enumerate().skip(open) {
            if t.is_punct(b'(') {
                depth += 1;
            } else if t.is_punct(b')') {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k;
                }
            }
        }
        self.t.len()
    }

    /// Index of the first of `kws` at parenthesis depth 0, from `from`.
    fn find_top(&self, from: usize, kws: &[&str]) -> Option<usize> {
        let mut depth = 0usize;
        for (k, t) in self.t.iter().enumerate().skip(from) {
            if t.is_punct(b'(') {
                depth += 1;
            } else if t.is_punct(b')') {
                depth = depth.saturating_sub(1);
            } else if depth == 0 && kws.iter().any(|kw| t.is_kw(self.sql, kw)) {
                return Some(k);
            }
        }
        None
    }
}

/// The statement that runs: for MariaDB `SET STATEMENT … FOR <statement>`, MariaDB
/// `ANALYZE [FORMAT=…] <statement>` and MySQL `EXPLAIN ANALYZE <statement>`, the inner
/// statement (prefixes nest); else `sql`.
pub(crate) fn inner_statement(sql: &str) -> &str {
    let mut body = sql;
    // Each round strips one prefix; hostile nesting is bounded like the scan's.
    for _ in 0..8 {
        match strip_prefix(body) {
            Some(inner) => body = inner,
            None => break,
        }
    }
    body
}

fn strip_prefix(sql: &str) -> Option<&str> {
    let toks = Toks::new(sql);
    let rest = |k: usize| toks.t.get(k).and_then(|t| sql.get(t.start..));
    if toks.kw(0, "SET") && toks.kw(1, "STATEMENT") {
        let k = toks.find_top(2, &["FOR"])?;
        return toks.t.get(k).map(|t| sql.get(t.end..).unwrap_or(""));
    }
    let analyze = if toks.kw(0, "ANALYZE") {
        1
    } else if (toks.kw(0, "EXPLAIN") || toks.kw(0, "DESCRIBE") || toks.kw(0, "DESC"))
        && toks.kw(1, "ANALYZE")
    {
        2
    } else {
        return None;
    };
    let mut k = analyze;
    if toks.kw(k, "FORMAT") {
        k += if toks.punct(k + 1, b'=') { 3 } else { 2 };
    }
    if ["TABLE", "TABLES", "LOCAL", "NO_WRITE_TO_BINLOG"]
        .iter()
        .any(|w| toks.kw(k, w))
    {
        return None;
    }
    rest(k)
}

/// The target of an INSERT/REPLACE too long to parse (bulk loads, extended inserts), read
/// from its head with a streaming lexer so that a large statement costs no large token list.
/// None when a call in it is not a known built-in (it may write elsewhere).
pub(crate) fn bulk_insert_target(sql: &str) -> Option<WriteInfo> {
    let b = sql.as_bytes();
    let mut lx = Lexer::new(b);
    let first = lx.next_token()?;
    if !(first.is_kw(b, "INSERT") || first.is_kw(b, "REPLACE")) {
        return None;
    }
    let mut t = lx.next_token()?;
    while ["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"]
        .iter()
        .any(|k| t.is_kw(b, k))
    {
        t = lx.next_token()?;
    }
    let ident = |t: &Token| -> Option<String> {
        let raw = t.bytes(b);
        match t.tok {
            Tok::Word => Some(String::from_utf8_lossy(raw).into_owned()),
            Tok::Backquoted if raw.len() >= 2 => {
                Some(String::from_utf8_lossy(&raw[1..raw.len() - 1]).replace("``", "`"))
            }
            _ => None,
        }
    };
    let first_name = ident(&t)?;
    let mut next = lx.next_token();
    let table = if next.is_some_and(|n| n.is_punct(b'.')) {
        let second = lx.next_token()?;
        next = lx.next_token();
        TableRef::new(Some(&first_name), &ident(&second)?)
    } else {
        TableRef::new(None, &first_name)
    };
    let mut prev = next;
    for cur in lx {
        if cur.is_punct(b'(') {
            if let Some(p) = prev.filter(|p| p.tok == Tok::Word) {
                let kw = PAREN_KEYWORDS.iter().any(|k| p.is_kw(b, k));
                let name = String::from_utf8_lossy(p.bytes(b)).to_ascii_lowercase();
                if !kw
                    && (functions::classify(&name, false).may_write()
                        || functions::arity_decides(&name))
                {
                    return None;
                }
            }
        }
        prev = Some(cur);
    }
    Some(WriteInfo::tables(vec![table]))
}

/// The statement without the MySQL priority modifiers after its first keyword
/// (`DELETE LOW_PRIORITY QUICK IGNORE …`), which sqlparser does not all accept and which
/// change nothing about the tables written. None when there are none.
pub(crate) fn without_modifiers(sql: &str) -> Option<String> {
    const MODIFIERS: &[&str] = &[
        "LOW_PRIORITY",
        "QUICK",
        "IGNORE",
        "HIGH_PRIORITY",
        "DELAYED",
    ];
    let toks = Toks::new(sql);
    if !["DELETE", "UPDATE", "INSERT", "REPLACE"]
        .iter()
        .any(|k| toks.kw(0, k))
    {
        return None;
    }
    let mut out = sql.as_bytes().to_vec();
    let mut k = 1;
    while let Some(t) = toks.t.get(k) {
        if !MODIFIERS.iter().any(|m| t.is_kw(toks.sql, m)) {
            break;
        }
        if let Some(r) = out.get_mut(t.start..t.end) {
            r.fill(b' ');
        }
        k += 1;
    }
    if k == 1 {
        return None;
    }
    String::from_utf8(out).ok()
}

/// `TABLE t …` (MySQL 8.0.19) means `SELECT * FROM t …`, which sqlparser does parse.
pub(crate) fn table_statement_as_select(sql: &str) -> Option<String> {
    let toks = Toks::new(sql);
    if !toks.kw(0, "TABLE") {
        return None;
    }
    let t = toks.t.first()?;
    Some(format!("SELECT * FROM {}", sql.get(t.end..)?))
}

/// Words that take a parenthesis without being function calls.
const PAREN_KEYWORDS: &[&str] = &[
    "AGAINST",
    "ALL",
    "AND",
    "ANY",
    "AS",
    "BETWEEN",
    "BY",
    "CASE",
    "COLUMNS",
    "DISTINCT",
    "DIV",
    "ELSE",
    "EXCEPT",
    "EXISTS",
    "FORCE",
    "FROM",
    "HAVING",
    "IGNORE",
    "IN",
    "INDEX",
    "INTERSECT",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "LATERAL",
    "LIKE",
    "LIMIT",
    "MATCH",
    "MOD",
    "NOT",
    "ON",
    "OR",
    "OVER",
    "PARTITION",
    "RECURSIVE",
    "REGEXP",
    "RLIKE",
    "ROW",
    "SELECT",
    "SOME",
    "THAN",
    "THEN",
    "UNION",
    "USE",
    "USING",
    "VALUES",
    "WHEN",
    "WHERE",
    "WINDOW",
    "WITH",
    "XOR",
];

/// How the `name(` calls of an unparsed statement classify, worst first: Unknown, then
/// Sequence, then the first non-deterministic one.
fn worst_call(toks: &Toks) -> Option<FnClass> {
    let mut worst: Option<FnClass> = None;
    for (k, t) in toks.t.iter().enumerate() {
        // sql_mode=ORACLE's `s.nextval`: no parenthesis, yet it advances sequence `s`.
        if k > 0 && toks.punct(k - 1, b'.') && oracle_sequence_word(t.bytes(toks.sql)) {
            if worst
                .as_ref()
                .is_none_or(|w| !matches!(w, FnClass::Unknown))
            {
                worst = Some(FnClass::Sequence);
            }
            continue;
        }
        let quoted = matches!(t.tok, Tok::Backquoted | Tok::DoubleQuoted);
        if (quoted || t.tok == Tok::Word)
            && toks.punct(k + 1, b'(')
            && (quoted || k > 0 && toks.punct(k - 1, b'.'))
        {
            // A quoted name called (`` `g`() ``, `"g"()` under ANSI_QUOTES, which sqlparser
            // reads as a string) or a qualified one (`db.g()`): the server runs a stored
            // function or a UDF. (A quoted or qualified table before a column list, as in
            // `INSERT INTO db.t (a)`, counts too: a bare one already does.)
            worst = Some(FnClass::Unknown);
            continue;
        }
        if t.tok != Tok::Word || !toks.punct(k + 1, b'(') {
            continue;
        }
        if PAREN_KEYWORDS.iter().any(|kw| t.is_kw(toks.sql, kw)) {
            continue;
        }
        let name = String::from_utf8_lossy(t.bytes(toks.sql)).to_ascii_lowercase();
        let class = functions::classify_call(&name, toks.arg_count(k + 1), toks.spaced(k));
        let rank = |c: &FnClass| match c {
            FnClass::Unknown => 3,
            FnClass::Sequence | FnClass::ColumnDefault => 2,
            FnClass::NonDeterministic(_) => 1,
            FnClass::Deterministic => 0,
        };
        if worst.as_ref().is_none_or(|w| rank(&class) > rank(w)) {
            worst = Some(class);
        }
    }
    worst
}

/// `nextval` / `currval` after a dot, quoted or not: a sequence's value under
/// sql_mode=ORACLE (qcache does not know the mode, so it always counts).
fn oracle_sequence_word(bytes: &[u8]) -> bool {
    let w = bytes
        .strip_prefix(b"`")
        .and_then(|b| b.strip_suffix(b"`"))
        .unwrap_or(bytes);
    w.eq_ignore_ascii_case(b"nextval") || w.eq_ignore_ascii_case(b"currval")
}

/// Whether the statement calls something that is not a known built-in (a stored function or
/// UDF) or advances a sequence: either may write tables nobody named.
///
/// Under both readings of its strings (`super::lexer::no_backslash_escapes_reading`): the
/// session's or the binlog event's sql_mode decides which one the server ran.
/// Whether the statement calls a built-in of `functions::ADJACENT_PAREN` with something
/// between its name and `(`: on MariaDB that runs the stored function of that name, which
/// the parsed statement (whose calls keep no spacing) cannot show.
pub(crate) fn spaced_builtin_call(sql: &str) -> bool {
    let toks = Toks::new(sql);
    (0..toks.t.len()).any(|k| {
        let t = &toks.t[k];
        t.tok == Tok::Word
            && toks.punct(k + 1, b'(')
            && toks.spaced(k)
            && !(k > 0 && toks.punct(k - 1, b'.'))
            && functions::classify_spaced(
                &String::from_utf8_lossy(t.bytes(toks.sql)).to_ascii_lowercase(),
                false,
            ) == FnClass::Unknown
            && functions::classify(
                &String::from_utf8_lossy(t.bytes(toks.sql)).to_ascii_lowercase(),
                false,
            ) != FnClass::Unknown
    })
}

pub fn calls_unknown_code(sql: &str) -> bool {
    let calls = |sql: &str| worst_call(&Toks::new(sql)).is_some_and(FnClass::may_write);
    calls(sql)
        || super::lexer::other_readings(sql.as_bytes())
            .iter()
            .any(|alt| calls(&String::from_utf8_lossy(alt)))
}

/// The sequences a column's DEFAULT (or generation) expression advances each time the server
/// uses it to fill a row, read from the expression as information_schema shows it
/// (`nextval(`db`.`s`)`, `setval(`s`,5,1,0)`; MariaDB shows `NEXT VALUE FOR s` as `nextval`).
/// None when qcache cannot name everything it may write: a call of anything that is not a
/// known built-in (a qualified or quoted name is a stored function), or a sequence named by
/// other than a plain identifier.
pub fn sequences_written(expr: &str) -> Option<Vec<TableRef>> {
    let toks = Toks::new(expr);
    let mut out = Vec::new();
    for (k, t) in toks.t.iter().enumerate() {
        if toks.kw(k, "NEXT") && toks.kw(k + 1, "VALUE") && toks.kw(k + 2, "FOR") {
            let (seq, _) = toks.table_name(k + 3)?;
            out.push(seq);
            continue;
        }
        if !toks.punct(k + 1, b'(') {
            continue;
        }
        let quoted = matches!(t.tok, Tok::Backquoted | Tok::DoubleQuoted);
        if quoted || t.tok == Tok::Word && k > 0 && toks.punct(k - 1, b'.') {
            return None;
        }
        if t.tok != Tok::Word || PAREN_KEYWORDS.iter().any(|kw| t.is_kw(toks.sql, kw)) {
            continue;
        }
        let name = String::from_utf8_lossy(t.bytes(toks.sql)).to_ascii_lowercase();
        match functions::classify_call(&name, toks.arg_count(k + 1), toks.spaced(k)) {
            FnClass::Deterministic | FnClass::NonDeterministic(_) => {}
            FnClass::Unknown | FnClass::ColumnDefault => return None,
            FnClass::Sequence if name == "lastval" => {}
            FnClass::Sequence => {
                let (seq, after) = toks.table_name(k + 2)?;
                if !(toks.punct(after, b')') || toks.punct(after, b',')) {
                    return None;
                }
                out.push(seq);
            }
        }
    }
    Some(out)
}

/// A SELECT sqlparser could not parse: never cached; the reason is named when the tokens
/// show it, and a call to an unknown function still marks it as a possible write.
pub(crate) fn unparsed_read(sql: &str) -> ReadInfo {
    let toks = Toks::new(sql);
    let n = toks.t.len();
    let mut verdict = NotCached::Unparsable;
    let mut may_write = false;
    for k in 0..n {
        if (toks.kw(k, "NEXT") || toks.kw(k, "PREVIOUS"))
            && toks.kw(k + 1, "VALUE")
            && toks.kw(k + 2, "FOR")
        {
            verdict = NotCached::Sequence;
            may_write |= toks.kw(k, "NEXT");
        } else if verdict == NotCached::Unparsable
            && (toks.kw(k, "LOCK") && toks.kw(k + 1, "IN") && toks.kw(k + 2, "SHARE")
                || toks.kw(k, "FOR") && (toks.kw(k + 1, "UPDATE") || toks.kw(k + 1, "SHARE")))
        {
            verdict = NotCached::Locking;
        } else if verdict == NotCached::Unparsable
            && toks.kw(k, "INTO")
            && (toks.kw(k + 1, "OUTFILE")
                || toks.kw(k + 1, "DUMPFILE")
                || toks.t.get(k + 1).is_some_and(|t| t.tok == Tok::Var))
        {
            verdict = NotCached::Into;
        }
    }
    if worst_call(&toks).is_some_and(FnClass::may_write) {
        may_write = true;
    }
    ReadInfo {
        tables: Vec::new(),
        verdict: Err(verdict),
        may_write,
    }
}

/// Writes that sqlparser does not parse, recognised before parsing is tried.
pub(crate) fn write_without_parser(sql: &str) -> Option<WriteInfo> {
    let toks = Toks::new(sql);
    if toks.kw(0, "LOAD") && (toks.kw(1, "DATA") || toks.kw(1, "XML")) {
        // LOAD DATA [LOW_PRIORITY|CONCURRENT] [LOCAL] INFILE '…' [REPLACE|IGNORE] INTO TABLE t
        let into = toks.find_top(2, &["INTO"])?;
        let at = if toks.kw(into + 1, "TABLE") {
            into + 2
        } else {
            into + 1
        };
        let (t, _) = toks.table_name(at)?;
        return Some(WriteInfo::tables(vec![t]));
    }
    if toks.kw(0, "DELETE") && toks.kw(1, "HISTORY") && toks.kw(2, "FROM") {
        // MariaDB's `DELETE HISTORY FROM t [PARTITION (…)] [BEFORE SYSTEM_TIME …]` deletes
        // t's history rows; sqlparser reads it as a multi-table DELETE of a table named
        // `history` (only a quoted `history` is that, checked against MariaDB 10.11). Its
        // BEFORE expression may call code that writes elsewhere.
        if worst_call(&toks).is_some_and(FnClass::may_write) {
            return Some(WriteInfo::unknown());
        }
        return Some(match toks.table_name(3) {
            Some((t, _)) => WriteInfo::tables(vec![t]),
            None => WriteInfo::unknown(),
        });
    }
    if toks.kw(0, "LOAD") && toks.kw(1, "INDEX") {
        // Preloads a key cache: no data changes.
        return Some(WriteInfo::tables(Vec::new()));
    }
    if toks.kw(0, "OPTIMIZE") || toks.kw(0, "REPAIR") || toks.kw(0, "ANALYZE") {
        let mut k = 1;
        if toks.kw(k, "NO_WRITE_TO_BINLOG") || toks.kw(k, "LOCAL") {
            k += 1;
        }
        if !(toks.kw(k, "TABLE") || toks.kw(k, "TABLES")) {
            return None;
        }
        k += 1;
        let mut tables = Vec::new();
        loop {
            let (t, next) = toks.table_name(k)?;
            tables.push(t);
            if !toks.punct(next, b',') {
                break;
            }
            k = next + 1;
        }
        return Some(WriteInfo {
            implicit_commit: true,
            ..WriteInfo::tables(tables)
        });
    }
    if toks.kw(0, "DO") {
        return Some(if worst_call(&toks).is_some_and(FnClass::may_write) {
            WriteInfo::unknown()
        } else {
            WriteInfo::tables(Vec::new())
        });
    }
    None
}

/// Writes sqlparser failed on: multi-table UPDATE, CREATE/ALTER TABLE with options it does
/// not know, trigger and routine DDL.
pub(crate) fn unparsed_write(sql: &str) -> Option<WriteInfo> {
    let toks = Toks::new(sql);
    // Statements that run expressions now: a stored function among them may write anywhere.
    let runs_unknown_code = || worst_call(&toks).is_some_and(FnClass::may_write);
    let defines_routine = (1..toks.t.len().min(16)).any(|k| {
        ["TRIGGER", "PROCEDURE", "FUNCTION", "EVENT"]
            .iter()
            .any(|w| toks.kw(k, w))
    });
    if !defines_routine && runs_unknown_code() {
        return None;
    }
    if toks.kw(0, "UPDATE") {
        return update_tables(&toks).map(WriteInfo::tables);
    }
    if toks.kw(0, "CREATE") {
        return create(&toks);
    }
    if toks.kw(0, "ALTER") {
        let table = toks.find_top(1, &["TABLE"])?;
        if table > 3 {
            return None;
        }
        let (t, mut k) = toks.table_name(table + 1)?;
        let mut written = vec![t.clone()];
        let mut renamed = Vec::new();
        // Every other table the statement names is written too: `EXCHANGE PARTITION p WITH
        // TABLE e` swaps rows with e, MariaDB's `CONVERT PARTITION p TO TABLE x` and
        // `CONVERT TABLE x TO PARTITION p` move them, `RENAME [TO|AS] n` renames.
        while k < toks.t.len() {
            if toks.kw(k, "TABLE") {
                let (n, next) = toks.table_name(k + 1)?;
                written.push(n);
                k = next;
            } else if toks.kw(k, "RENAME") {
                let mut j = k + 1;
                if ["COLUMN", "INDEX", "KEY", "CONSTRAINT"]
                    .iter()
                    .any(|w| toks.kw(j, w))
                {
                    k = j + 1;
                    continue;
                }
                if toks.kw(j, "TO") || toks.kw(j, "AS") {
                    j += 1;
                }
                let (n, next) = toks.table_name(j)?;
                renamed.push((t.clone(), n.clone()));
                written.push(n);
                k = next;
            } else {
                k += 1;
            }
        }
        written.sort();
        written.dedup();
        return Some(WriteInfo {
            renamed,
            ..ddl(written)
        });
    }
    None
}

/// Engines known to store a table's rows in the table itself. Any other (MERGE, FEDERATED,
/// CONNECT, SPIDER, OQGRAPH, one qcache does not know) may read and write other tables'.
const OWN_ROWS_ENGINES: &[&str] = &[
    "archive",
    "aria",
    "blackhole",
    "columnstore",
    "csv",
    "heap",
    "innodb",
    "memory",
    "myisam",
    "rocksdb",
    "s3",
    "sequence",
];

/// Table options by which another engine finds the rows it serves: MERGE's list, a
/// FEDERATED or SPIDER server, OQGRAPH's backing table, CONNECT's source.
const ELSEWHERE_OPTIONS: &[&str] = &[
    "connection",
    "data_table",
    "srcdef",
    "table_type",
    "tabname",
    "union",
];

/// For `CREATE [TEMPORARY] TABLE` and `ALTER TABLE`: whether its options may make the table
/// one whose rows are other tables' (a temporary MERGE table over base tables writes
/// them: `INSERT INTO m` into the last, `UPDATE m` into all), and the source of
/// `CREATE TABLE t LIKE src` / `t (LIKE src)`, which copies `src` as it is, its engine
/// and union list included. Checked against MariaDB 10.11: a temporary MERGE table may be
/// created with `ENGINE=MERGE UNION=(…)`, with `UNION=(…)` under a MERGE
/// `default_tmp_storage_engine`, `LIKE` a MERGE table, or by `ALTER TABLE … ENGINE=MERGE
/// UNION=(…)`. Options are read up to the query of a `CREATE … SELECT`; a `UNION` in that
/// position (`… AS SELECT 1 UNION (SELECT 2)`) counts too (fail closed).
pub(crate) fn table_rows_elsewhere(sql: &str) -> (bool, Option<TableRef>) {
    // Most writes are none of these (a bulk INSERT may be megabytes): decided by the first
    // keyword before the statement is lexed whole.
    let first = |kw: &str| super::scan::first_keyword_is(sql.as_bytes(), kw);
    if ![
        "CREATE", "ALTER", "SET", "ANALYZE", "EXPLAIN", "DESCRIBE", "DESC",
    ]
    .iter()
    .any(|kw| first(kw))
    {
        return (false, None);
    }
    let toks = Toks::new(inner_statement(sql));
    if !(toks.kw(0, "CREATE") || toks.kw(0, "ALTER")) {
        return (false, None);
    }
    let limit = toks.t.len().min(16);
    let Some(k) = (1..limit)
        .take_while(|&k| !toks.punct(k, b'('))
        .find(|&k| toks.kw(k, "TABLE"))
    else {
        return (false, None);
    };
    let mut at = k + 1;
    if toks.kw(at, "IF") && toks.kw(at + 1, "NOT") && toks.kw(at + 2, "EXISTS") {
        at += 3;
    } else if toks.kw(at, "IF") && toks.kw(at + 1, "EXISTS") {
        at += 2;
    }
    let Some((_, next)) = toks.table_name(at) else {
        // A name qcache cannot read: fail closed.
        return (true, None);
    };
    let like = if toks.kw(next, "LIKE") {
        Some(next + 1)
    } else if toks.punct(next, b'(') && toks.kw(next + 1, "LIKE") {
        Some(next + 2)
    } else {
        None
    };
    if let Some(src) = like {
        return match toks.table_name(src) {
            Some((t, _)) => (false, Some(t)),
            None => (true, None),
        };
    }
    let mut depth = 0usize;
    for i in next..toks.t.len() {
        let t = &toks.t[i];
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth = depth.saturating_sub(1);
        }
        if depth > 0 || t.tok != Tok::Word {
            continue;
        }
        if ["SELECT", "WITH", "AS", "VALUES", "TABLE"]
            .iter()
            .any(|kw| t.is_kw(toks.sql, kw))
        {
            break;
        }
        if ELSEWHERE_OPTIONS.iter().any(|kw| t.is_kw(toks.sql, kw)) {
            return (true, None);
        }
        if t.is_kw(toks.sql, "ENGINE") {
            let v = if toks.punct(i + 1, b'=') {
                i + 2
            } else {
                i + 1
            };
            let own = toks
                .ident(v)
                .or_else(|| {
                    let b = toks.t.get(v)?.bytes(toks.sql);
                    (toks.t.get(v)?.tok == Tok::Str && b.len() >= 2)
                        .then(|| String::from_utf8_lossy(&b[1..b.len() - 1]).into_owned())
                })
                .is_some_and(|e| OWN_ROWS_ENGINES.contains(&e.to_ascii_lowercase().as_str()));
            if !own {
                return (true, None);
            }
        }
    }
    (false, None)
}

/// CREATE, ALTER, DROP or RENAME: a schema change, which also commits.
pub(crate) fn starts_ddl(sql: &str) -> bool {
    let toks = Toks::new(sql);
    ["CREATE", "ALTER", "DROP", "RENAME"]
        .iter()
        .any(|k| toks.kw(0, k))
}

fn ddl(tables: Vec<TableRef>) -> WriteInfo {
    WriteInfo {
        ddl: true,
        implicit_commit: true,
        ..WriteInfo::tables(tables)
    }
}

fn create(toks: &Toks) -> Option<WriteInfo> {
    // The object keyword comes within the first few tokens (OR REPLACE, DEFINER = u@h,
    // TEMPORARY, ALGORITHM = …, SQL SECURITY …), before any parenthesis.
    let limit = toks.t.len().min(16);
    let mut k = 1;
    while k < limit && !toks.punct(k, b'(') {
        if toks.kw(k, "TRIGGER") {
            let on = toks.find_top(k + 1, &["ON"])?;
            let (t, _) = toks.table_name(on + 1)?;
            return Some(ddl(vec![t]));
        }
        if toks.kw(k, "PROCEDURE") || toks.kw(k, "FUNCTION") || toks.kw(k, "EVENT") {
            return Some(ddl(Vec::new()));
        }
        // A sequence is a table, temporary ones included.
        if toks.kw(k, "TABLE") || toks.kw(k, "SEQUENCE") {
            let temporary = (1..k).any(|j| toks.kw(j, "TEMPORARY"));
            let mut at = k + 1;
            if toks.kw(at, "IF") && toks.kw(at + 1, "NOT") && toks.kw(at + 2, "EXISTS") {
                at += 3;
            }
            let (t, _) = toks.table_name(at)?;
            let mut w = ddl(vec![t.clone()]);
            if temporary {
                w.ddl = false;
                w.implicit_commit = false;
                w.temp_created = vec![t];
            }
            return Some(w);
        }
        k += 1;
    }
    None
}

/// The table references between UPDATE and SET: every table that might be assigned.
fn update_tables(toks: &Toks) -> Option<Vec<TableRef>> {
    let set = toks.find_top(1, &["SET"])?;
    let mut out = Vec::new();
    let mut expecting = true;
    let mut k = 1;
    while k < set {
        let Some(t) = toks.t.get(k) else { break };
        if t.is_punct(b'(') {
            let derived = toks.kw(k + 1, "SELECT") || toks.kw(k + 1, "WITH");
            if expecting && !derived {
                // A parenthesised join list: its tables are ones we want.
                k += 1;
                continue;
            }
            k = toks.close_of(k) + 1;
            continue;
        }
        if t.is_punct(b',') || t.is_kw(toks.sql, "JOIN") || t.is_kw(toks.sql, "STRAIGHT_JOIN") {
            expecting = true;
            k += 1;
            continue;
        }
        if t.is_punct(b')') {
            k += 1;
            continue;
        }
        if expecting && !(t.is_kw(toks.sql, "LOW_PRIORITY") || t.is_kw(toks.sql, "IGNORE")) {
            let (tr, next) = toks.table_name(k)?;
            out.push(tr);
            expecting = false;
            k = next;
            continue;
        }
        k += 1;
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::WriteTargets;

    fn t(schema: Option<&str>, name: &str) -> TableRef {
        TableRef::new(schema, name)
    }

    fn targets(w: &Option<WriteInfo>) -> Option<&WriteTargets> {
        w.as_ref().map(|w| &w.targets)
    }

    /// One row per rule of [`table_rows_elsewhere`]: (statement, options say elsewhere,
    /// LIKE source).
    #[test]
    fn table_options_that_put_rows_elsewhere() {
        let rows: &[(&str, bool, Option<TableRef>)] = &[
            (
                "CREATE TEMPORARY TABLE m (id INT) ENGINE=MERGE UNION=(t1) INSERT_METHOD=LAST",
                true,
                None,
            ),
            ("CREATE TEMPORARY TABLE m (id INT) UNION (t1)", true, None),
            (
                "CREATE TEMPORARY TABLE m (id INT) ENGINE = MRG_MyISAM",
                true,
                None,
            ),
            (
                "CREATE TEMPORARY TABLE m (id INT) ENGINE='FEDERATED'",
                true,
                None,
            ),
            (
                "CREATE TABLE f (id INT) CONNECTION='mysql://u@h/db/t'",
                true,
                None,
            ),
            (
                "CREATE TEMPORARY TABLE g (id INT) ENGINE=SomethingNew",
                true,
                None,
            ),
            ("ALTER TABLE z ENGINE=MERGE UNION=(t1)", true, None),
            ("ALTER ONLINE TABLE z UNION=(t1, t2)", true, None),
            (
                "CREATE TEMPORARY TABLE IF NOT EXISTS db.x LIKE db.mb",
                false,
                Some(t(Some("db"), "mb")),
            ),
            (
                "CREATE TEMPORARY TABLE x (LIKE mb)",
                false,
                Some(t(None, "mb")),
            ),
            (
                "CREATE TEMPORARY TABLE a (id INT) ENGINE=InnoDB",
                false,
                None,
            ),
            (
                "CREATE TEMPORARY TABLE a (id INT) ENGINE MEMORY",
                false,
                None,
            ),
            (
                "CREATE TEMPORARY TABLE a (`union` INT, connection INT) ENGINE=Aria",
                false,
                None,
            ),
            (
                "CREATE TEMPORARY TABLE a ENGINE=InnoDB AS SELECT 1 AS x UNION SELECT 2",
                false,
                None,
            ),
            (
                "CREATE TEMPORARY TABLE a SELECT * FROM t WHERE s LIKE 'x'",
                false,
                None,
            ),
            ("ALTER TABLE a ADD COLUMN b INT", false, None),
            ("INSERT INTO m VALUES (1)", false, None),
            ("/*!40101 SET x = 1 */", false, None),
        ];
        for (sql, options, like) in rows {
            assert_eq!(table_rows_elsewhere(sql), (*options, like.clone()), "{sql}");
        }
    }

    /// The statement that runs under each prefix, nested ones unwrapped; a prefix that is a
    /// statement of its own (`ANALYZE TABLE`) is not one.
    #[test]
    fn inner_statements_under_prefixes() {
        let cases = [
            (
                "SET STATEMENT max_statement_time=1 FOR SELECT 1",
                " SELECT 1",
            ),
            ("ANALYZE SELECT * FROM t", "SELECT * FROM t"),
            ("ANALYZE FORMAT=JSON SELECT 1", "SELECT 1"),
            ("ANALYZE FORMAT JSON DELETE FROM t", "DELETE FROM t"),
            ("EXPLAIN ANALYZE SELECT 1", "SELECT 1"),
            ("desc analyze UPDATE t SET a=1", "UPDATE t SET a=1"),
            ("SET STATEMENT a=1 FOR ANALYZE SELECT 2", "SELECT 2"),
            ("ANALYZE TABLE t", "ANALYZE TABLE t"),
            (
                "ANALYZE NO_WRITE_TO_BINLOG TABLE t",
                "ANALYZE NO_WRITE_TO_BINLOG TABLE t",
            ),
            ("EXPLAIN SELECT 1", "EXPLAIN SELECT 1"),
            ("SELECT 1", "SELECT 1"),
        ];
        for (sql, want) in cases {
            assert_eq!(inner_statement(sql), want, "{sql}");
        }
    }

    /// A SET STATEMENT without its FOR is left as it is (the server refuses it).
    #[test]
    fn set_statement_needs_its_for() {
        let sql = "SET STATEMENT a=1 SELECT 2";
        assert_eq!(inner_statement(sql), sql);
    }

    /// A long INSERT's target from its head: modifiers skipped, quoting and schema read; a
    /// call of unknown code anywhere makes it unknown.
    #[test]
    fn bulk_insert_targets() {
        let one = |s: Option<&str>, n: &str| Some(WriteTargets::Tables(vec![t(s, n)]));
        let cases = [
            ("INSERT INTO t VALUES (1),(2)", one(None, "t")),
            (
                "insert low_priority ignore into Db.T (a) VALUES (1)",
                one(Some("db"), "t"),
            ),
            (
                "REPLACE DELAYED `we``ird` VALUES (NOW())",
                one(None, "we`ird"),
            ),
            ("INSERT INTO `s`.`t` SELECT * FROM u", one(Some("s"), "t")),
            ("INSERT INTO t VALUES (my_func(1))", None),
            // A qualified call is a stored function's.
            ("INSERT INTO t VALUES (db.f(1))", None),
            ("UPDATE t SET a = 1", None),
            ("INSERT INTO 'str' VALUES (1)", None),
        ];
        for (sql, want) in cases {
            assert_eq!(targets(&bulk_insert_target(sql)), want.as_ref(), "{sql}");
        }
    }

    /// Priority modifiers after the first keyword become spaces (offsets kept); a statement
    /// without them, or of another kind, is None.
    #[test]
    fn modifiers_are_blanked() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            (
                "DELETE LOW_PRIORITY QUICK IGNORE FROM t",
                Some(&["LOW_PRIORITY", "QUICK", "IGNORE"]),
            ),
            ("update ignore t set a=1", Some(&["ignore"])),
            (
                "INSERT HIGH_PRIORITY INTO t VALUES (1)",
                Some(&["HIGH_PRIORITY"]),
            ),
            // Only right after the first keyword.
            ("DELETE FROM t WHERE quick = 1", None),
            ("SELECT QUICK FROM t", None),
        ];
        for (sql, blanked) in cases {
            let want = blanked.map(|words| {
                words.iter().fold(sql.to_string(), |s, w| {
                    s.replacen(w, &" ".repeat(w.len()), 1)
                })
            });
            assert_eq!(without_modifiers(sql), want, "{sql}");
        }
    }

    /// MySQL's `TABLE t` is `SELECT * FROM t`, whatever follows.
    #[test]
    fn table_statements_read_as_selects() {
        let cases = [
            ("TABLE t", Some("SELECT * FROM  t")),
            (
                "table db.t ORDER BY a LIMIT 1",
                Some("SELECT * FROM  db.t ORDER BY a LIMIT 1"),
            ),
            ("SELECT * FROM t", None),
            ("DROP TABLE t", None),
        ];
        for (sql, want) in cases {
            assert_eq!(table_statement_as_select(sql).as_deref(), want, "{sql}");
        }
    }

    /// Unknown functions and sequences may write; built-ins, keywords before a parenthesis
    /// and names inside strings do not.
    #[test]
    fn unknown_code_is_found() {
        let cases = [
            ("SELECT my_func(1)", true),
            ("DO audit()", true),
            ("SELECT NEXTVAL(s)", true),
            ("SELECT NOW(), COUNT(*), CONCAT('a', 'b')", false),
            (
                "SELECT a FROM t WHERE b IN (1, 2) AND c = ANY (SELECT 1)",
                false,
            ),
            ("SELECT 'my_func(1)'", false),
            ("SELECT 1", false),
            // Quoted or qualified names called are stored functions.
            ("SET @x = `g`()", true),
            ("SET @x = \"g\"()", true),
            ("SET @x = db.g()", true),
            ("SET @x = `db`.`concat` (1)", true),
            ("SELECT \"g\" FROM t", false),
            ("SELECT t.a FROM db.t WHERE (a) = (1)", false),
            // A geometry constructor with a count its grammar does not take.
            ("SET @x = point(1)", true),
            ("SET @x = point(1, 2)", false),
            ("SET @x = polygon()", true),
            // A non-deterministic name MariaDB lacks.
            ("SET @x = uuid_v4()", true),
        ];
        for (sql, want) in cases {
            assert_eq!(calls_unknown_code(sql), want, "{sql}");
        }
    }

    /// A string that hides a call under one reading of backslashes shows it under the other:
    /// both readings count.
    #[test]
    fn both_backslash_readings_count() {
        // With backslash escapes the string runs to the end; without them it ends at `\'`
        // and `my_func(` is code.
        let sql = r"SELECT 'a\', my_func(1), 'b'";
        assert!(calls_unknown_code(sql));
    }

    /// The sequences a DEFAULT expression advances, one row per spelling; None when it may
    /// write what cannot be named.
    #[test]
    fn sequences_of_default_expressions() {
        let cases = [
            ("nextval(`db`.`s`)", Some(vec![t(Some("db"), "s")])),
            ("NEXT VALUE FOR s", Some(vec![t(None, "s")])),
            ("setval(`s`,5,1,0)", Some(vec![t(None, "s")])),
            ("lastval(s)", Some(vec![])),
            ("current_timestamp()", Some(vec![])),
            ("0", Some(vec![])),
            ("my_func()", None),
            ("`db`.`f`(1)", None),
            ("db.f(1)", None),
            ("nextval(s + 1)", None),
        ];
        for (expr, want) in cases {
            assert_eq!(sequences_written(expr), want, "{expr}");
        }
    }

    /// Why an unparsed SELECT is not cached, read off its tokens, and whether it may write.
    #[test]
    fn unparsed_reads_name_their_reason() {
        let cases = [
            ("SELECT NEXT VALUE FOR s", NotCached::Sequence, true),
            ("SELECT PREVIOUS VALUE FOR s", NotCached::Sequence, false),
            ("SELECT a FROM t FOR UPDATE ??", NotCached::Locking, false),
            (
                "SELECT a FROM t LOCK IN SHARE MODE ??",
                NotCached::Locking,
                false,
            ),
            (
                "SELECT a INTO OUTFILE '/x' FROM t ??",
                NotCached::Into,
                false,
            ),
            ("SELECT a INTO @x FROM t ??", NotCached::Into, false),
            ("SELECT ?? FROM t", NotCached::Unparsable, false),
            ("SELECT my_func(??) FROM t", NotCached::Unparsable, true),
        ];
        for (sql, reason, may_write) in cases {
            let r = unparsed_read(sql);
            assert_eq!(r.verdict, Err(reason), "{sql}");
            assert_eq!(r.may_write, may_write, "{sql}");
            assert!(r.tables.is_empty(), "{sql}");
        }
    }

    /// Writes recognised before parsing: LOAD DATA/XML name their table, LOAD INDEX writes
    /// nothing, table maintenance names its tables and commits, DO writes only by calling
    /// unknown code.
    #[test]
    fn writes_without_the_parser() {
        let tables = |v: Vec<TableRef>| Some(WriteTargets::Tables(v));
        let cases = [
            (
                "LOAD DATA LOCAL INFILE '/x' REPLACE INTO TABLE db.t",
                tables(vec![t(Some("db"), "t")]),
                false,
            ),
            (
                "LOAD XML INFILE '/x' INTO t",
                tables(vec![t(None, "t")]),
                false,
            ),
            ("LOAD INDEX INTO CACHE t", tables(vec![]), false),
            ("DELETE HISTORY FROM t", tables(vec![t(None, "t")]), false),
            (
                "delete /* c */ history from db.t partition (p0) before system_time now()",
                tables(vec![t(Some("db"), "t")]),
                false,
            ),
            (
                "DELETE HISTORY FROM t BEFORE SYSTEM_TIME f()",
                Some(WriteTargets::Unknown),
                false,
            ),
            (
                "DELETE HISTORY FROM (SELECT 1)",
                Some(WriteTargets::Unknown),
                false,
            ),
            // A quoted `history` is an alias of a multi-table DELETE: the parser's.
            ("DELETE `history` FROM t AS `history`", None, false),
            ("DELETE FROM history", None, false),
            (
                "OPTIMIZE TABLE a, db.b",
                tables(vec![t(None, "a"), t(Some("db"), "b")]),
                true,
            ),
            (
                "ANALYZE NO_WRITE_TO_BINLOG TABLE t",
                tables(vec![t(None, "t")]),
                true,
            ),
            ("REPAIR LOCAL TABLES t", tables(vec![t(None, "t")]), true),
            ("OPTIMIZE t", None, false),
            ("DO 1 + 1", tables(vec![]), false),
            ("DO my_func()", Some(WriteTargets::Unknown), false),
            ("SELECT 1", None, false),
        ];
        for (sql, want, commits) in cases {
            let w = write_without_parser(sql);
            assert_eq!(targets(&w), want.as_ref(), "{sql}");
            if let Some(w) = w {
                assert_eq!(w.implicit_commit, commits, "{sql}");
            }
        }
    }

    /// Multi-table UPDATE: every table between UPDATE and SET, derived tables skipped.
    #[test]
    fn multi_table_updates_name_every_table() {
        let cases = [
            (
                "UPDATE a JOIN db.b ON a.id = b.id SET a.x = b.x",
                Some(vec![t(None, "a"), t(Some("db"), "b")]),
            ),
            (
                "UPDATE IGNORE a, b SET a.x = 1",
                Some(vec![t(None, "a"), t(None, "b")]),
            ),
            (
                "UPDATE a JOIN (b, c) ON a.id = b.id SET a.x = 1",
                Some(vec![t(None, "a"), t(None, "b"), t(None, "c")]),
            ),
            // The derived table's body is skipped; its alias is named as a table (more
            // invalidation than needed, never less).
            (
                "UPDATE a, (SELECT id FROM c) d SET a.x = d.id",
                Some(vec![t(None, "a"), t(None, "d")]),
            ),
            (
                "UPDATE a STRAIGHT_JOIN a SET x = 1",
                Some(vec![t(None, "a")]),
            ),
            ("UPDATE a SET x = my_func(1)", None),
            ("UPDATE a", None),
        ];
        for (sql, want) in cases {
            let want = want.map(WriteTargets::Tables);
            assert_eq!(targets(&unparsed_write(sql)), want.as_ref(), "{sql}");
        }
    }

    /// CREATE: a trigger writes its table's definition, routines and events no table, a
    /// temporary table is no schema change and commits nothing.
    #[test]
    fn creates_the_parser_missed() {
        let trig = unparsed_write(
            "CREATE DEFINER=u@h TRIGGER tr BEFORE INSERT ON db.t FOR EACH ROW SET @a = my_f()",
        )
        .unwrap();
        assert_eq!(trig.targets, WriteTargets::Tables(vec![t(Some("db"), "t")]));
        assert!(trig.ddl && trig.implicit_commit);
        let proc = unparsed_write("CREATE PROCEDURE p() BEGIN CALL q(); END").unwrap();
        assert_eq!(proc.targets, WriteTargets::Tables(vec![]));
        assert!(proc.ddl);
        let temp =
            unparsed_write("CREATE TEMPORARY TABLE IF NOT EXISTS tmp LIKE src WEIRD").unwrap();
        assert_eq!(temp.targets, WriteTargets::Tables(vec![t(None, "tmp")]));
        assert_eq!(temp.temp_created, vec![t(None, "tmp")]);
        assert!(!temp.ddl && !temp.implicit_commit);
        let seq =
            unparsed_write("CREATE OR REPLACE TEMPORARY SEQUENCE s START WITH 7 WEIRD").unwrap();
        assert_eq!(seq.temp_created, vec![t(None, "s")]);
        let table = unparsed_write("CREATE TABLE x LIKE y WEIRD_OPTION=1").unwrap();
        assert!(table.ddl && table.temp_created.is_empty());
        assert_eq!(unparsed_write("CREATE (x)"), None);
        // A column list reads as a call of an unknown function: fail closed.
        assert_eq!(
            unparsed_write("CREATE TABLE x (a INT) WEIRD_OPTION=1"),
            None
        );
    }

    /// ALTER TABLE: the table, every other table it names (exchange, convert) and its new
    /// name are written; renaming a column renames no table.
    #[test]
    fn alters_name_every_table_they_touch() {
        /// (statement, tables written, renames).
        type Case = (&'static str, Vec<TableRef>, Vec<(TableRef, TableRef)>);
        let cases: &[Case] = &[
            ("ALTER TABLE t WEIRD_OPTION", vec![t(None, "t")], vec![]),
            (
                "ALTER TABLE t EXCHANGE PARTITION p WITH TABLE e",
                vec![t(None, "e"), t(None, "t")],
                vec![],
            ),
            (
                "ALTER TABLE t RENAME TO db.u",
                vec![t(None, "t"), t(Some("db"), "u")],
                vec![(t(None, "t"), t(Some("db"), "u"))],
            ),
            (
                "ALTER TABLE t RENAME COLUMN a TO b",
                vec![t(None, "t")],
                vec![],
            ),
            (
                "ALTER ONLINE IGNORE TABLE t CONVERT PARTITION p TO TABLE x",
                vec![t(None, "t"), t(None, "x")],
                vec![],
            ),
        ];
        for (sql, written, renamed) in cases {
            let w = unparsed_write(sql).unwrap_or_else(|| panic!("{sql}"));
            assert_eq!(w.targets, WriteTargets::Tables(written.clone()), "{sql}");
            assert_eq!(&w.renamed, renamed, "{sql}");
            assert!(w.ddl && w.implicit_commit, "{sql}");
        }
        // TABLE too far in: not an ALTER TABLE qcache can read.
        assert_eq!(unparsed_write("ALTER a b c d TABLE t"), None);
    }

    /// Schema changes start with CREATE, ALTER, DROP or RENAME, in any case.
    #[test]
    fn ddl_starts() {
        for (sql, want) in [
            ("CREATE TABLE t (a INT)", true),
            ("alter table t add b int", true),
            ("DROP VIEW v", true),
            ("RENAME TABLE a TO b", true),
            ("TRUNCATE t", false),
            ("SELECT 'CREATE'", false),
            ("", false),
        ] {
            assert_eq!(starts_ddl(sql), want, "{sql}");
        }
    }
}
