//! Cached aggregates patched from known inserted rows (issue #37, first cut): which reads
//! qcache can bring up to date itself, and their new result bytes, exactly as the server
//! would send them. Sans IO; the session gives the statement texts, the catalog's columns
//! and the stored bytes.
//!
//! Eligible, on purpose narrow: one base table, no GROUP BY, a select list of `COUNT(*)`,
//! `COUNT(col)`, `SUM(col)`, `MIN(col)` and `MAX(col)` over integer columns, a WHERE that
//! is a conjunction of `col = n`, `col IN (n, …)`, `col < n`, `col <= n`, `col > n`,
//! `col >= n` and `col BETWEEN a AND b` on integer columns with integer literals (compared
//! as integers, as the server compares an integer column with an integer literal, signed
//! or unsigned; NULL matches none of them). Such a read always answers exactly one row, and
//! a row inserted changes it by arithmetic qcache does exactly (integers as `i128`; `SUM`
//! of integers is a `DECIMAL(…,0)`, sent as its digits; `SUM` of no value is NULL;
//! `MIN`/`MAX` of no value is NULL, a new value replaces it when smaller or larger, and it
//! is sent in the column's own integer type, whose metadata the stored result must carry,
//! see [`IntType`]). Inserts only: any other write invalidates (a deleted row may have been
//! the minimum). The inserts that patch it: `INSERT [INTO] t [(cols)] VALUES (…), …`
//! whose values are all literals, and whose values in the columns the read uses are integer
//! literals inside the column's range or NULL where the column allows it. Everything else is
//! refused with a [`Refusal`], and the caller invalidates as it would without patching.
//!
//! The statement texts are gated by their tokens before they are parsed: only the words and
//! punctuation these shapes need, so nothing sqlparser reads otherwise than the server does
//! (comments, `||`, `XOR`, double quotes, backslashes, executable comments) can reach the
//! shape check.

use bytes::{BufMut, Bytes, BytesMut};
use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, InTarget,
    SelectItem, SetExpr, Statement, TableFactor, TableObject, UnaryOperator, Value,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Whitespace};

use crate::analysis::slices::{split_and, ColType, ColumnInfo};
use crate::analysis::TableRef;
use crate::protocol::packets::{put_lenenc_str, read_lenenc, read_lenenc_str};

/// MySQL column types the results of these aggregates carry: COUNT a LONGLONG, SUM of
/// integers a NEWDECIMAL, MIN/MAX the column's own integer type.
const TYPE_TINY: u8 = 0x01;
const TYPE_SHORT: u8 = 0x02;
const TYPE_LONG: u8 = 0x03;
const TYPE_LONGLONG: u8 = 0x08;
const TYPE_INT24: u8 = 0x09;
const TYPE_NEWDECIMAL: u8 = 0xf6;
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

/// Why a read or a write is not patched: the caller invalidates as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A token the shapes do not use (a keyword, comment, operator, quote, placeholder).
    Token,
    /// sqlparser could not read it, or it is not one statement.
    Unparsable,
    /// Not a plain SELECT of one table (joins, subqueries, DISTINCT, GROUP BY, …).
    NotSimple,
    /// A select item other than COUNT(*), COUNT(col), SUM(col), MIN(col), MAX(col).
    Aggregate,
    /// A WHERE other than a conjunction of `col = n`, `col IN (n, …)`, `col < n`, `<=`,
    /// `>`, `>=`, `col BETWEEN a AND b`.
    Predicate,
    /// A column the table does not have, or that is not an integer column.
    Column,
    /// A column the server fills itself (AUTO_INCREMENT).
    Generated,
    /// Not a plain `INSERT … VALUES` (IGNORE, REPLACE, ON DUPLICATE KEY, SET, SELECT, …).
    NotInsert,
    /// A value that is not a literal, or not an integer where the read uses the column.
    Value,
    /// A column the read uses that the INSERT leaves to its default.
    Omitted,
    /// An integer outside the column's range, or NULL into a NOT NULL column: the server
    /// converts or refuses it.
    Range,
    /// The stored result is not the one-row result the read's shape gives.
    Result,
    /// The arithmetic left `i128` (never for real data; refused rather than wrapped).
    Overflow,
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
        }
    }
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
}

impl Agg {
    /// The column the aggregate reads, if any.
    pub fn column(&self) -> Option<&String> {
        match self {
            Agg::CountStar => None,
            Agg::Count(c) | Agg::Sum(c) | Agg::Min(c) | Agg::Max(c) => Some(c),
        }
    }
}

/// What one conjunct of the WHERE asks of its column's value (never met by NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// One of the listed integers (`col = n`, `col IN (n, …)`).
    In(Vec<i128>),
    /// Inside `lo..=hi`, a missing bound unbounded: `col >= n` is `lo: n`, `col > n` is
    /// `lo: n + 1` (the column holds integers only), `col BETWEEN a AND b` is both (empty
    /// when `a > b`, as on the server).
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

/// A patchable SELECT as written: its table (not yet qualified), select list and filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadShape {
    pub table: TableRef,
    pub aggs: Vec<Agg>,
    /// Conjunction: each column's value must meet its condition.
    pub filter: Vec<(String, Cond)>,
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
    pub filter: Vec<(String, Cond)>,
    /// Binary protocol rows (an execute's result) rather than text rows.
    pub binary: bool,
    /// The statement's digest: what the verifier turns off when a patch proved wrong.
    pub digest: u64,
    /// The statement's text (a text read's, or the prepared SQL): what the verifier reads.
    pub sql: String,
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
    /// Any other literal (a string, a decimal): fine in a column the read does not use.
    Other,
}

/// The tokens the shapes are made of; anything else refuses the statement. Words are
/// judged after the parse ([`words_allowed`]).
fn lex(sql: &str) -> Result<Vec<Token>, Refusal> {
    // sqlparser reads some comments (executable ones among them) as text: any comment
    // opener refuses, even inside a string (a lost patch, never a wrong one).
    if sql.contains('\\') || sql.contains("/*") || sql.contains('#') || sql.contains("--") {
        return Err(Refusal::Token);
    }
    let tokens = Tokenizer::new(&MySqlDialect {}, sql)
        .tokenize()
        .map_err(|_| Refusal::Token)?;
    for t in &tokens {
        let ok = match t {
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
    Ok(tokens)
}

/// Every unquoted keyword is one the shapes use, or a name the parsed shape holds (a
/// column called `id` or `status`): a keyword the shape does not account for (`OR`, `XOR`,
/// `DIV`, `GROUP`, `DEFAULT`, `IGNORE`, …) refuses the statement, whatever sqlparser made
/// of it.
fn words_allowed(tokens: &[Token], names: &[String]) -> Result<(), Refusal> {
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
        );
        if !used && !names.iter().any(|n| n.eq_ignore_ascii_case(&w.value)) {
            return Err(Refusal::Token);
        }
    }
    Ok(())
}

fn parse_one(sql: &str) -> Result<(Statement, Vec<Token>), Refusal> {
    let tokens = lex(sql)?;
    let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).map_err(|_| Refusal::Unparsable)?;
    if stmts.len() != 1 {
        return Err(Refusal::Unparsable);
    }
    Ok((stmts.remove(0), tokens))
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

fn conjunct(e: &Expr) -> Result<(String, Cond), Refusal> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (column_name(left), column_name(right)) {
            (Some(c), None) => int_literal(right).map(|n| (c, Cond::In(vec![n]))),
            (None, Some(c)) => int_literal(left).map(|n| (c, Cond::In(vec![n]))),
            _ => None,
        },
        Expr::BinaryOp { left, op, right } => match (column_name(left), column_name(right)) {
            (Some(c), None) => bound_literal(right)
                .and_then(|n| range(op, n))
                .map(|r| (c, r)),
            (None, Some(c)) => bound_literal(left)
                .zip(flipped(op))
                .and_then(|(n, op)| range(&op, n))
                .map(|r| (c, r)),
            _ => None,
        },
        Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } => column_name(expr)
            .zip(bound_literal(low).zip(bound_literal(high)))
            .map(|(c, (lo, hi))| {
                (
                    c,
                    Cond::Range {
                        lo: Some(lo),
                        hi: Some(hi),
                    },
                )
            }),
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            global: false,
        } => {
            let c = column_name(expr);
            let ns: Option<Vec<i128>> = list.iter().map(int_literal).collect();
            c.zip(ns)
                .filter(|(_, ns)| !ns.is_empty())
                .map(|(c, ns)| (c, Cond::In(ns)))
        }
        Expr::Nested(inner) => return conjunct(inner),
        _ => None,
    }
    .ok_or(Refusal::Predicate)
}

/// Recognises a patchable SELECT (module docs), before its table is known.
pub fn read_shape(sql: &str) -> Result<ReadShape, Refusal> {
    let (stmt, tokens) = parse_one(sql)?;
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
    let no_group =
        matches!(&sel.group_by, GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty());
    if sel.distinct.is_some()
        || sel.top.is_some()
        || sel.into.is_some()
        || sel.having.is_some()
        || !no_group
        || sel.from.len() != 1
        || !sel.from[0].joins.is_empty()
    {
        return Err(Refusal::NotSimple);
    }
    let TableFactor::Table {
        name,
        alias,
        args: None,
        with_hints,
        partitions,
        version: None,
        ..
    } = &sel.from[0].relation
    else {
        return Err(Refusal::NotSimple);
    };
    if !with_hints.is_empty() || !partitions.is_empty() {
        return Err(Refusal::NotSimple);
    }
    let table = crate::analysis::table_ref_of(name).ok_or(Refusal::NotSimple)?;
    if sel.projection.is_empty() {
        return Err(Refusal::Aggregate);
    }
    let mut names = name_parts(name);
    names.extend(alias.iter().map(|a| a.name.value.clone()));
    let aggs = sel
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) => aggregate(e),
            SelectItem::ExprWithAlias { expr, alias } => {
                names.push(alias.value.clone());
                aggregate(expr)
            }
            _ => Err(Refusal::Aggregate),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut filter = Vec::new();
    if let Some(w) = &sel.selection {
        let mut conj = Vec::new();
        split_and(w, &mut conj);
        for c in conj {
            filter.push(conjunct(c)?);
        }
    }
    names.extend(aggs.iter().filter_map(Agg::column).cloned());
    names.extend(filter.iter().map(|(c, _)| c.clone()));
    words_allowed(&tokens, &names)?;
    Ok(ReadShape {
        table,
        aggs,
        filter,
    })
}

fn int_column<'a>(
    columns: &'a [(String, ColumnInfo)],
    name: &str,
) -> Result<&'a ColumnInfo, Refusal> {
    let (_, info) = columns
        .iter()
        .find(|(n, _)| n == name)
        .ok_or(Refusal::Column)?;
    if !matches!(info.ty, ColType::Int { .. }) {
        return Err(Refusal::Column);
    }
    if info.auto_increment {
        return Err(Refusal::Generated);
    }
    Ok(info)
}

impl ReadShape {
    /// Binds the shape to its qualified table's columns (`columns`, the catalog's, names
    /// lower-cased): every column it names must be an integer column the server does not
    /// fill itself.
    pub fn bind(
        self,
        (schema, table): (String, String),
        columns: &[(String, ColumnInfo)],
        binary: bool,
        digest: u64,
        sql: &str,
    ) -> Result<Recipe, Refusal> {
        let mut ints = Vec::with_capacity(self.aggs.len());
        for a in &self.aggs {
            let info = a.column().map(|c| int_column(columns, c)).transpose()?;
            ints.push(match (a, info.map(|i| &i.ty)) {
                (Agg::Min(_) | Agg::Max(_), Some(ColType::Int { min, max })) => {
                    Some(IntType::of_range(*min, *max).ok_or(Refusal::Column)?)
                }
                _ => None,
            });
        }
        for (c, _) in &self.filter {
            int_column(columns, c)?;
        }
        Ok(Recipe {
            schema,
            table,
            aggs: self.aggs,
            ints,
            filter: self.filter,
            binary,
            digest,
            sql: sql.to_string(),
        })
    }
}

/// Reads a plain `INSERT … VALUES` whose values are all literals (module docs).
pub fn insert_rows(sql: &str) -> Result<InsertRows, Refusal> {
    let (stmt, tokens) = parse_one(sql)?;
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
                    if let Some(n) = int_literal(e) {
                        return Ok(Val::Int(n));
                    }
                    match e {
                        Expr::Value(v) => match &v.value {
                            Value::Null => Ok(Val::Null),
                            Value::Number(..) | Value::SingleQuotedString(_) => Ok(Val::Other),
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
    words_allowed(&tokens, &names)?;
    Ok(InsertRows {
        table,
        columns,
        rows,
    })
}

impl InsertRows {
    /// Each row's values in the columns `used` (in that order), read against the table's
    /// columns in their ordinal order: an integer inside the column's range, or NULL where
    /// it is nullable; else refused.
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
            let info = int_column(table_columns, u)?;
            let mut found = order.iter().enumerate().filter(|(_, n)| **n == u.as_str());
            let i = match (found.next(), found.next()) {
                (Some((i, _)), None) => i,
                (None, _) => return Err(Refusal::Omitted),
                _ => return Err(Refusal::NotInsert),
            };
            at.push((i, info));
        }
        self.rows
            .iter()
            .map(|row| {
                if row.len() != order.len() {
                    return Err(Refusal::NotInsert);
                }
                at.iter()
                    .map(|(i, info)| match (&row[*i], &info.ty) {
                        (Val::Int(n), ColType::Int { min, max }) if min <= n && n <= max => {
                            Ok(Some(*n))
                        }
                        (Val::Null, _) if info.nullable => Ok(None),
                        (Val::Int(_) | Val::Null, _) => Err(Refusal::Range),
                        (Val::Other, _) => Err(Refusal::Value),
                    })
                    .collect()
            })
            .collect()
    }
}

/// A stored one-row result, cut into the pieces a patch rewrites.
struct Parsed<'a> {
    /// Frames before the row (column count, definitions, EOF), with headers.
    head: &'a [u8],
    /// The row's sequence id.
    row_seq: u8,
    row: &'a [u8],
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

fn parse_result(bytes: &[u8], status_at: usize) -> Option<Parsed<'_>> {
    let fr = frames(bytes)?;
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
        });
    }
    let eof_between = match fr.len() {
        x if x == n + 4 => true,
        x if x == n + 3 => false,
        _ => return None,
    };
    if eof_between && !is_eof(fr[n + 1].2) {
        return None;
    }
    let (row_at, row_seq, row) = fr[fr.len() - 2];
    let (tail_at, _, last) = fr[fr.len() - 1];
    if is_eof(row) || last.first() != Some(&0xfe) || status_at < tail_at {
        return None;
    }
    Some(Parsed {
        head: &bytes[..row_at],
        row_seq,
        row,
        tail: &bytes[tail_at..],
        tail_at,
        types,
    })
}

/// The row's values: Some(digits) or NULL, text or binary, per the column types.
fn row_values(p: &Parsed<'_>, binary: bool) -> Option<Vec<Option<i128>>> {
    let n = p.types.len();
    let mut out = Vec::with_capacity(n);
    if binary {
        let bitmap_len = (n + 7 + 2) / 8;
        if p.row.first() != Some(&0) {
            return None;
        }
        let bitmap = p.row.get(1..1 + bitmap_len)?;
        let mut at = 1 + bitmap_len;
        for (i, def) in p.types.iter().enumerate() {
            let bit = i + 2;
            if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
                out.push(None);
                continue;
            }
            if def.ty == TYPE_NEWDECIMAL {
                let (s, used) = read_lenenc_str(p.row.get(at..)?)?;
                out.push(Some(decimal(s)?));
                at += used;
                continue;
            }
            // An integer type: little-endian, sign- or zero-extended by the UNSIGNED flag.
            let w = binary_width(def.ty)?;
            let b = p.row.get(at..at + w)?;
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
        (at == p.row.len()).then_some(out)
    } else {
        let mut at = 0;
        for _ in 0..n {
            if p.row.get(at) == Some(&0xfb) {
                out.push(None);
                at += 1;
                continue;
            }
            let (s, used) = read_lenenc_str(p.row.get(at..)?)?;
            out.push(Some(decimal(s)?));
            at += used;
        }
        (at == p.row.len()).then_some(out)
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

/// What a patch leaves: the new bytes and where their final status flags now sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patched {
    pub bytes: Bytes,
    pub status_at: usize,
    /// Whether any value changed (rows the WHERE keeps out change nothing).
    pub changed: bool,
}

impl Recipe {
    /// The statement the verifier asks the server (`cache.verify_patched`): the same
    /// aggregates over the same rows, the table qualified, so that it means the same on
    /// any connection. Its values are compared with [`values`](Self::values), not its bytes
    /// (column names and character sets are the connection's).
    pub fn verify_sql(&self) -> String {
        let q = |s: &str| format!("`{}`", s.replace('`', "``"));
        let items: Vec<String> = self
            .aggs
            .iter()
            .map(|a| match a {
                Agg::CountStar => "COUNT(*)".to_string(),
                Agg::Count(c) => format!("COUNT({})", q(c)),
                Agg::Sum(c) => format!("SUM({})", q(c)),
                Agg::Min(c) => format!("MIN({})", q(c)),
                Agg::Max(c) => format!("MAX({})", q(c)),
            })
            .collect();
        let mut sql = format!(
            "SELECT {} FROM {}.{}",
            items.join(", "),
            q(&self.schema),
            q(&self.table)
        );
        let mut conds = Vec::new();
        for (c, cond) in &self.filter {
            match cond {
                Cond::In(set) => {
                    let list: Vec<String> = set.iter().map(i128::to_string).collect();
                    conds.push(format!("{} IN ({})", q(c), list.join(", ")));
                }
                Cond::Range { lo, hi } => {
                    if let Some(lo) = lo {
                        conds.push(format!("{} >= {lo}", q(c)));
                    }
                    if let Some(hi) = hi {
                        conds.push(format!("{} <= {hi}", q(c)));
                    }
                }
            }
        }
        if !conds.is_empty() {
            sql += " WHERE ";
            sql += &conds.join(" AND ");
        }
        sql
    }

    /// The values a stored result of this recipe holds, None when it is not one.
    pub fn values(&self, bytes: &[u8], status_at: usize) -> Option<Vec<Option<i128>>> {
        let p = parse_result(bytes, status_at)?;
        (p.types.len() == self.aggs.len())
            .then(|| row_values(&p, self.binary))
            .flatten()
    }

    /// The values of a text row as a client reads them (the verifier's answer).
    pub fn text_values(row: &[Option<Vec<u8>>]) -> Option<Vec<Option<i128>>> {
        row.iter()
            .map(|v| match v {
                None => Some(None),
                Some(b) => decimal(b).map(Some),
            })
            .collect()
    }

    /// The columns whose values a write must know: the filter's, then the aggregates'.
    pub fn used_columns(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let names = self
            .filter
            .iter()
            .map(|(c, _)| c)
            .chain(self.aggs.iter().filter_map(Agg::column));
        for c in names {
            if !out.contains(c) {
                out.push(c.clone());
            }
        }
        out
    }

    /// The result after `rows` (each row's values in [`used_columns`](Self::used_columns)
    /// order) were inserted into the rows `bytes` (stored, `status_at` its final status
    /// flags) was computed over. `corrupt` (a debug fault) adds one to the first aggregate,
    /// so that the checkers can be shown to catch a wrong patch.
    pub fn apply(
        &self,
        bytes: &[u8],
        status_at: usize,
        rows: &[Vec<Option<i128>>],
        corrupt: bool,
    ) -> Result<Patched, Refusal> {
        let p = parse_result(bytes, status_at).ok_or(Refusal::Result)?;
        if p.types.len() != self.aggs.len() || self.ints.len() != self.aggs.len() {
            return Err(Refusal::Result);
        }
        // The metadata the server sent is kept as it is; it must be the one these values
        // are encoded for. MIN/MAX: the column's own integer type and signedness, no
        // ZEROFILL (its text would be padded), no decimals.
        for ((a, def), int) in self.aggs.iter().zip(&p.types).zip(&self.ints) {
            let fits = match a {
                Agg::CountStar | Agg::Count(_) => def.ty == TYPE_LONGLONG,
                Agg::Sum(_) => def.ty == TYPE_NEWDECIMAL && def.dec == 0,
                Agg::Min(_) | Agg::Max(_) => int.is_some_and(|it| {
                    def.ty == it.code
                        && (def.flags & FLAG_UNSIGNED != 0) == it.unsigned
                        && def.flags & FLAG_ZEROFILL == 0
                        && def.dec == 0
                }),
            };
            if !fits {
                return Err(Refusal::Result);
            }
        }
        let mut values = row_values(&p, self.binary).ok_or(Refusal::Result)?;
        let old = values.clone();
        // COUNTs are never NULL; MIN/MAX are NULL or a value of their column.
        for ((a, v), int) in self.aggs.iter().zip(&values).zip(&self.ints) {
            let ok = match a {
                Agg::CountStar | Agg::Count(_) => v.is_some(),
                Agg::Sum(_) => true,
                Agg::Min(_) | Agg::Max(_) => {
                    v.is_none_or(|n| int.is_some_and(|it| it.min <= n && n <= it.max))
                }
            };
            if !ok {
                return Err(Refusal::Result);
            }
        }
        let used = self.used_columns();
        let idx = |c: &str| used.iter().position(|u| u == c);
        for row in rows {
            if row.len() != used.len() {
                return Err(Refusal::Result);
            }
            let kept = self
                .filter
                .iter()
                .all(|(c, cond)| cond.keeps(idx(c).and_then(|i| row[i])));
            if !kept {
                continue;
            }
            for (a, v) in self.aggs.iter().zip(values.iter_mut()) {
                match a {
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
        }
        if corrupt {
            if let Some(v) = values.first_mut() {
                *v = Some(v.unwrap_or(0) + 1);
            }
        }
        for ((a, v), int) in self.aggs.iter().zip(&values).zip(&self.ints) {
            // A COUNT is a BIGINT; a SUM of integers fits DECIMAL(65) long before i128 ends;
            // MIN/MAX hold one of the column's values.
            let ok = match a {
                Agg::CountStar | Agg::Count(_) => v.is_some_and(|n| n <= i64::MAX as i128),
                Agg::Sum(_) => v.is_none_or(|n| n.unsigned_abs() < 10u128.pow(38)),
                Agg::Min(_) | Agg::Max(_) => {
                    v.is_none_or(|n| int.is_some_and(|it| it.min <= n && n <= it.max))
                }
            };
            if !ok {
                return Err(Refusal::Overflow);
            }
        }
        let changed = values != old;
        let row = self.encode_row(&p, &values).ok_or(Refusal::Result)?;
        let mut out = BytesMut::with_capacity(p.head.len() + 4 + row.len() + p.tail.len());
        out.put_slice(p.head);
        let len = row.len() as u32;
        out.put_slice(&len.to_le_bytes()[..3]);
        out.put_u8(p.row_seq);
        out.put_slice(&row);
        let new_tail_at = out.len();
        out.put_slice(p.tail);
        Ok(Patched {
            bytes: out.freeze(),
            status_at: status_at - p.tail_at + new_tail_at,
            changed,
        })
    }

    /// The row of `values` in the stored result's protocol and column types (binary: an
    /// integer type in its width, two's complement, whatever its signedness; NEWDECIMAL as
    /// its digits). None for a type it cannot encode.
    fn encode_row(&self, p: &Parsed<'_>, values: &[Option<i128>]) -> Option<BytesMut> {
        let mut row = BytesMut::new();
        if self.binary {
            let bitmap_len = (values.len() + 7 + 2) / 8;
            row.put_u8(0);
            let mut bitmap = vec![0u8; bitmap_len];
            for (i, v) in values.iter().enumerate() {
                if v.is_none() {
                    let bit = i + 2;
                    bitmap[bit / 8] |= 1 << (bit % 8);
                }
            }
            row.put_slice(&bitmap);
            for (def, v) in p.types.iter().zip(values) {
                let Some(v) = v else { continue };
                if def.ty == TYPE_NEWDECIMAL {
                    put_lenenc_str(&mut row, v.to_string().as_bytes());
                } else {
                    let w = binary_width(def.ty)?;
                    row.put_slice(&v.to_le_bytes()[..w]);
                }
            }
        } else {
            for v in values {
                match v {
                    None => row.put_u8(0xfb),
                    Some(v) => put_lenenc_str(&mut row, v.to_string().as_bytes()),
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
                "GROUP BY: refused",
                "SELECT a, COUNT(*) FROM t GROUP BY a",
                Err(NotSimple),
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
        ];
        let mut columns = table();
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
        frame(&mut out, row);
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
        let recipe = Recipe {
            schema: String::new(),
            table: String::new(),
            aggs: Vec::new(),
            ints: Vec::new(),
            filter: Vec::new(),
            binary: true,
            digest: 0,
            sql: String::new(),
        };
        let (bytes, at) = result(types, &[0], true);
        let p = parse_result(&bytes, at).unwrap();
        recipe.encode_row(&p, vals).unwrap().to_vec()
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
            assert_eq!(
                recipe.values(&got.bytes, got.status_at).as_deref(),
                Some(&ins[0][..])
                    .filter(|_| before != after)
                    .or(recipe.values(&bytes, at).as_deref()),
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
        let (bytes, at) = result(
            &[COUNT, COUNT, SUM],
            &text_row(&[Some("2"), Some("1"), None]),
            true,
        );
        assert_eq!(
            recipe.values(&bytes, at),
            Some(vec![Some(2), Some(1), None])
        );
        assert_eq!(
            Recipe::text_values(&[Some(b"2".to_vec()), None, Some(b"-4".to_vec())]),
            Some(vec![Some(2), None, Some(-4)])
        );
        assert_eq!(Recipe::text_values(&[Some(b"1.5".to_vec())]), None);
    }

    #[test]
    fn refusals_have_distinct_labels() {
        use Refusal::*;
        let all = [
            Token, Unparsable, NotSimple, Aggregate, Predicate, Column, Generated, NotInsert,
            Value, Omitted, Range, Result, Overflow,
        ];
        let mut labels: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), all.len());
    }
}
