//! Token-level analysis for the MySQL statements sqlparser does not parse (LOAD DATA,
//! OPTIMIZE/REPAIR/ANALYZE TABLE, DO, multi-table `UPDATE a, b`, trigger and routine DDL,
//! `TABLE t`, `… INTO OUTFILE`, `LOCK IN SHARE MODE`, `NEXT VALUE FOR`).
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
                if !kw && functions::classify(&name, false).may_write() {
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
        if t.tok != Tok::Word
            || !toks.punct(k + 1, b'(')
            || toks.punct(k.wrapping_sub(1), b'.') && k > 0
        {
            continue;
        }
        if PAREN_KEYWORDS.iter().any(|kw| t.is_kw(toks.sql, kw)) {
            continue;
        }
        let name = String::from_utf8_lossy(t.bytes(toks.sql)).to_ascii_lowercase();
        let no_args = toks.punct(k + 2, b')');
        let class = functions::classify(&name, no_args);
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
pub fn calls_unknown_code(sql: &str) -> bool {
    let calls = |sql: &str| worst_call(&Toks::new(sql)).is_some_and(FnClass::may_write);
    calls(sql)
        || super::lexer::no_backslash_escapes_reading(sql.as_bytes())
            .is_some_and(|alt| calls(&String::from_utf8_lossy(&alt)))
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
        match functions::classify(&name, toks.punct(k + 2, b')')) {
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
        if toks.kw(k, "TABLE") {
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
