//! The miss-path analysis: sqlparser (MySqlDialect) tells which tables a read reads and
//! whether it may be cached, or which tables a write changes. Shapes sqlparser does not parse
//! are handled by the token-level fallbacks, and whatever neither can follow is reported as
//! not cacheable (reads) or as a write to unknown tables.

use std::ops::ControlFlow;

use sqlparser::ast::{
    AlterTableOperation, FromTable, FunctionArguments, ObjectName, ObjectType, Query,
    RenameTableNameKind, Select, SetExpr, Statement, TableFactor, TableObject, TableWithJoins,
    UpdateTableFromKind, Visit, Visitor,
};
use sqlparser::ast::{Delete, Update};
use sqlparser::ast::{Expr, Function, Ident};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::fallback;
use super::functions::{self, FnClass};
use super::lexer::Lexer;
use super::scan::{scan, strip_hints, StatementKind};
use super::{Analysis, NotCached, ReadInfo, TableRef, WriteInfo, WriteTargets};

/// Longer statements are not parsed: sqlparser's cost grows with them, and a statement this
/// long is not a shape worth caching. Reads are then not cached; writes invalidate
/// conservatively.
pub(crate) const MAX_PARSE_BYTES: usize = 256 * 1024;

const SYSTEM_SCHEMAS: &[&str] = &["mysql", "information_schema", "performance_schema", "sys"];

/// Parses with sqlparser (MySqlDialect) and classifies. Never panics, whatever the input.
///
/// A statement whose strings end elsewhere under NO_BACKSLASH_ESCAPES (`'x\'` is a whole
/// string there) or ANSI_QUOTES (`"x\"` is a whole identifier there) is analysed under each
/// reading and the results merged ([`either_reading`]):
/// the tables either names, unknown code either calls. That is right under whichever
/// sql_mode it runs (a session's, a binlog event's), so no path needs to know the mode.
pub fn analyze(sql: &str) -> Analysis {
    let a = analyze_reading(sql);
    let a = super::lexer::other_readings(sql.as_bytes())
        .into_iter()
        .fold(a, |a, alt| {
            either_reading(a, analyze_reading(&String::from_utf8_lossy(&alt)))
        });
    // Under a single-byte client character set `--` and a high byte open a comment
    // (`lexer::single_byte_reading`); read so, its text may run other code.
    match super::lexer::single_byte_reading(sql.as_bytes()) {
        Some(alt) => either_reading(a, analyze(&String::from_utf8_lossy(&alt))),
        None => a,
    }
}

/// The analysis of a statement the server may read in two ways: fail closed on each count.
fn either_reading(a: Analysis, b: Analysis) -> Analysis {
    match (a, b) {
        (Analysis::Read(mut x), Analysis::Read(y)) => {
            x.tables.extend(y.tables);
            x.tables.sort();
            x.tables.dedup();
            x.may_write |= y.may_write;
            // Which tables it reads depends on a mode the entry's key does not decide.
            if x.verdict.is_ok() {
                x.verdict = y.verdict.and(Err(NotCached::Unparsable));
            }
            Analysis::Read(x)
        }
        (Analysis::Write(x), Analysis::Write(y)) => Analysis::Write(merge_writes(x, y)),
        (Analysis::Other, Analysis::Other) => Analysis::Other,
        (Analysis::Read(r), Analysis::Other) | (Analysis::Other, Analysis::Read(r)) => {
            Analysis::Read(ReadInfo {
                verdict: Err(r.verdict.err().unwrap_or(NotCached::Unparsable)),
                ..r
            })
        }
        // A read one way and a write the other, or a write and something else: whatever
        // it writes cannot be named.
        (Analysis::Write(w), _) | (_, Analysis::Write(w)) => Analysis::Write(WriteInfo {
            targets: WriteTargets::Unknown,
            ..w
        }),
    }
}

fn analyze_reading(sql: &str) -> Analysis {
    let a = match analyze_reading_parsed(sql) {
        // Whichever way it was read: the table options decide.
        Analysis::Write(mut w) => {
            (w.other_rows, w.like_source) = fallback::table_rows_elsewhere(sql);
            Analysis::Write(w)
        }
        a => a,
    };
    if !fallback::spaced_builtin_call(sql) {
        return a;
    }
    // `substr (s, 2)`: a stored function's call, which sqlparser reads as the built-in.
    match a {
        Analysis::Read(mut r) => {
            if r.verdict.is_ok() {
                r.verdict = Err(NotCached::StoredFunction);
            }
            r.may_write = true;
            Analysis::Read(r)
        }
        Analysis::Write(w) => Analysis::Write(WriteInfo {
            targets: WriteTargets::Unknown,
            ..w
        }),
        Analysis::Other => Analysis::Other,
    }
}

fn analyze_reading_parsed(sql: &str) -> Analysis {
    let sc = scan(sql.as_bytes());
    let text = prepare(sql, &sc);
    let body = fallback::inner_statement(&text);
    let kind = sc.kind;
    if text.len() > MAX_PARSE_BYTES {
        if kind == StatementKind::Write && !sc.multi {
            if let Some(w) = fallback::bulk_insert_target(body) {
                return Analysis::Write(w);
            }
        }
        return not_parsed(kind, body, sc.multi);
    }
    // The token fallbacks see one statement; with more behind it they would miss writes.
    if kind == StatementKind::Write && !sc.multi {
        if let Some(w) = fallback::write_without_parser(body) {
            return Analysis::Write(w);
        }
    }
    // sqlparser reads `UPDATE IGNORE t` as table `ignore` aliased `t`: the modifiers go
    // before it sees them. `TABLE t` becomes the SELECT it means.
    let rewritten = if kind == StatementKind::Write {
        fallback::without_modifiers(body)
    } else {
        fallback::table_statement_as_select(body)
    };
    let to_parse = rewritten.as_deref().unwrap_or(body);
    match Parser::parse_sql(&MySqlDialect {}, to_parse) {
        Ok(stmts) if !stmts.is_empty() => {
            let a = classify_statements(&stmts, kind);
            if sc.multi && stmts.len() == 1 && text.contains('\\') {
                // The scan saw several statements where sqlparser saw one: they read `\'`
                // differently, and the server's reading (its sql_mode) is unknown here.
                // (Without a backslash, that is a compound body `BEGIN …; …; END`, which
                // sqlparser reads as the server does.)
                return ambiguous(a);
            }
            match a {
                Analysis::Read(mut r) if r.verdict.is_ok() && backslash_ambiguous(to_parse) => {
                    r.verdict = Err(NotCached::Unparsable);
                    Analysis::Read(r)
                }
                a => a,
            }
        }
        _ => not_parsed(kind, body, sc.multi),
    }
}

/// True when a NO_BACKSLASH_ESCAPES server would split the statement into other, well-formed
/// tokens than sqlparser did: then the tables sqlparser found may not be those the server
/// reads. (`'O\'Brien'` alone is not ambiguous: read the other way it leaves a quote open,
/// which the server would reject.)
fn backslash_ambiguous(sql: &str) -> bool {
    super::lexer::other_lexers(sql.as_bytes())
        .into_iter()
        .any(|alt| ambiguous_under(sql, alt))
}

/// [`backslash_ambiguous`] for one other reading's lexer.
fn ambiguous_under<'a>(sql: &'a str, mut alt: Lexer<'a>) -> bool {
    let b = sql.as_bytes();
    if !b
        .windows(2)
        .any(|w| w[0] == b'\\' && (w[1] == b'\'' || w[1] == b'"'))
    {
        return false;
    }

    let mut std = Lexer::new(b);
    let mut differ = false;
    let mut last = None;
    loop {
        let (x, y) = (std.next_token(), alt.next_token());
        if x.map(|t| (t.start, t.end)) != y.map(|t| (t.start, t.end)) {
            differ = true;
        }
        match y {
            Some(t) => last = Some(t),
            None => break,
        }
    }
    let closed = last.is_none_or(|t| {
        let tok = t.bytes(b);
        match t.tok {
            super::lexer::Tok::Str | super::lexer::Tok::DoubleQuoted => {
                tok.len() >= 2 && tok.last() == tok.first()
            }
            _ => true,
        }
    });
    differ && closed
}

fn ambiguous(a: Analysis) -> Analysis {
    match a {
        Analysis::Read(mut r) => {
            r.verdict = Err(NotCached::MultiStatement);
            r.may_write = true;
            Analysis::Read(r)
        }
        Analysis::Write(mut w) => {
            w.targets = WriteTargets::Unknown;
            Analysis::Write(w)
        }
        Analysis::Other => Analysis::Other,
    }
}

/// The text sqlparser should see: the query cache hints cut (sqlparser would read
/// `SQL_CACHE` as a column) and executable-comment markers blanked, because the server runs
/// their content and sqlparser would skip it as a comment.
fn prepare(sql: &str, sc: &super::Scan) -> String {
    let stripped = strip_hints(sql.as_bytes(), sc);
    let mut lx = Lexer::recording_marks(&stripped);
    for _ in lx.by_ref() {}
    let marks = lx.take_marks();
    let mut bytes = stripped.into_owned();
    for m in marks {
        if let Some(r) = bytes.get_mut(m) {
            r.fill(b' ');
        }
    }
    // Only ASCII was replaced by ASCII, so this is the input's own validity.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `multi`: more statements may follow, and we cannot see what they do.
fn not_parsed(kind: StatementKind, body: &str, multi: bool) -> Analysis {
    match kind {
        StatementKind::Select => {
            let mut r = fallback::unparsed_read(body);
            if multi {
                r.verdict = Err(NotCached::MultiStatement);
                r.may_write = true;
            }
            Analysis::Read(r)
        }
        StatementKind::Write => {
            let known = if multi {
                None
            } else {
                fallback::unparsed_write(body)
            };
            Analysis::Write(known.unwrap_or_else(|| {
                // Still DDL, even if we cannot tell of what.
                let ddl = fallback::starts_ddl(body);
                WriteInfo {
                    ddl,
                    implicit_commit: ddl,
                    ..WriteInfo::unknown()
                }
            }))
        }
        StatementKind::Call => Analysis::Write(WriteInfo::unknown()),
        _ => Analysis::Other,
    }
}

fn classify_statements(stmts: &[Statement], kind: StatementKind) -> Analysis {
    let mut read: Option<ReadInfo> = None;
    let mut write: Option<WriteInfo> = None;
    for stmt in stmts {
        match classify_statement(stmt, kind) {
            Analysis::Read(r) => {
                read = Some(match read {
                    None => r,
                    Some(mut acc) => {
                        acc.tables.extend(r.tables);
                        acc.may_write |= r.may_write;
                        acc.verdict = acc.verdict.and(r.verdict);
                        acc
                    }
                })
            }
            Analysis::Write(w) => {
                write = Some(match write {
                    None => w,
                    Some(acc) => merge_writes(acc, w),
                })
            }
            Analysis::Other => {}
        }
    }
    let multi = stmts.len() > 1;
    match (read, write) {
        (_, Some(mut w)) => {
            if multi && kind == StatementKind::Call {
                w.targets = WriteTargets::Unknown;
            }
            Analysis::Write(w)
        }
        (Some(mut r), None) => {
            if multi {
                r.verdict = Err(NotCached::MultiStatement);
                r.tables.sort();
                r.tables.dedup();
            }
            Analysis::Read(r)
        }
        (None, None) => Analysis::Other,
    }
}

fn merge_writes(a: WriteInfo, b: WriteInfo) -> WriteInfo {
    let targets = match (a.targets, b.targets) {
        (WriteTargets::Tables(mut x), WriteTargets::Tables(y)) => {
            x.extend(y);
            x.sort();
            x.dedup();
            WriteTargets::Tables(x)
        }
        (WriteTargets::Schema(x), WriteTargets::Schema(y)) if x == y => WriteTargets::Schema(x),
        (WriteTargets::Schema(x), WriteTargets::Tables(t))
        | (WriteTargets::Tables(t), WriteTargets::Schema(x))
            if t.is_empty() =>
        {
            WriteTargets::Schema(x)
        }
        _ => WriteTargets::Unknown,
    };
    let mut temp_created = a.temp_created;
    temp_created.extend(b.temp_created);
    let mut temp_dropped = a.temp_dropped;
    temp_dropped.extend(b.temp_dropped);
    let mut renamed = a.renamed;
    renamed.extend(b.renamed);
    WriteInfo {
        targets,
        ddl: a.ddl || b.ddl,
        implicit_commit: a.implicit_commit || b.implicit_commit,
        temp_created,
        temp_dropped,
        renamed,
        other_rows: a.other_rows || b.other_rows,
        like_source: a.like_source.or(b.like_source),
    }
}

pub(crate) fn table_ref(name: &ObjectName) -> Option<TableRef> {
    let parts: Vec<&str> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(|i| i.value.as_str()))
        .collect::<Option<Vec<_>>>()?;
    match parts.as_slice() {
        [t] => Some(TableRef::new(None, t)),
        [.., s, t] => Some(TableRef::new(Some(s), t)),
        [] => None,
    }
}

fn classify_statement(stmt: &Statement, kind: StatementKind) -> Analysis {
    match stmt {
        Statement::Query(q) => match &*q.body {
            SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) => {
                classify_statement(s, kind)
            }
            _ => Analysis::Read(analyze_read(stmt)),
        },
        _ => match write_info(stmt) {
            Some(mut w) => {
                // A stored function or a sequence called anywhere in a write may change
                // tables nobody named.
                let r = analyze_read(stmt);
                if r.may_write {
                    w.targets = WriteTargets::Unknown;
                }
                Analysis::Write(w)
            }
            // A statement the scan took for a read or a write that parses as something
            // else qcache does not know to be harmless: fail closed.
            None if matches!(
                kind,
                StatementKind::Write | StatementKind::Call | StatementKind::Select
            ) =>
            {
                Analysis::Write(WriteInfo::unknown())
            }
            None => Analysis::Other,
        },
    }
}

/// One query scope: the CTE names its body can see, and for each of its own CTE bodies the
/// names that body can see (earlier CTEs; all of them under RECURSIVE).
struct Scope {
    visible: Vec<String>,
    cte_bodies: Vec<(*const Query, Vec<String>)>,
}

/// Whether every time zone a `CONVERT_TZ(dt, from, to)` names is a string literal the
/// server reads without its time zone tables (`functions::fixed_time_zone`). Only a
/// single-quoted one: sqlparser reads `"…"` as a string, but under ANSI_QUOTES the server
/// reads a column there, whose value may name any zone.
fn fixed_zones(args: &FunctionArguments) -> bool {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, Value};
    let FunctionArguments::List(l) = args else {
        return false;
    };
    l.args.iter().skip(1).all(|a| match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match &v.value {
            Value::SingleQuotedString(z) => functions::fixed_time_zone(z),
            _ => false,
        },
        _ => false,
    })
}

struct ReadVisitor {
    tables: Vec<TableRef>,
    verdict: Option<NotCached>,
    may_write: bool,
    scopes: Vec<Scope>,
}

impl ReadVisitor {
    fn refuse(&mut self, why: NotCached) {
        if self.verdict.is_none() {
            self.verdict = Some(why);
        }
    }

    fn check_function(&mut self, f: &Function) {
        let unqualified = match f.name.0.as_slice() {
            [p] => p.as_ident().filter(|i| i.quote_style.is_none()),
            _ => None,
        };
        let Some(ident) = unqualified else {
            self.refuse(NotCached::StoredFunction);
            self.may_write = true;
            return;
        };
        let name = ident.value.to_ascii_lowercase();
        let n_args = match &f.args {
            FunctionArguments::None => 0,
            FunctionArguments::List(l) => l.args.len(),
            FunctionArguments::Subquery(_) => 1,
        };
        if name == "convert_tz" && !fixed_zones(&f.args) {
            // A named zone is read from the server's mysql.time_zone* tables (NULL until
            // it is loaded there), which no key or table version follows.
            self.refuse(NotCached::NonDeterministic("convert_tz"));
        }
        match functions::classify_call(&name, n_args, false) {
            FnClass::Deterministic => {}
            FnClass::NonDeterministic(n) => self.refuse(NotCached::NonDeterministic(n)),
            FnClass::Sequence => {
                self.refuse(NotCached::Sequence);
                self.may_write = true;
            }
            FnClass::ColumnDefault => {
                self.refuse(NotCached::NonDeterministic("default"));
                self.may_write = true;
            }
            FnClass::Unknown => {
                self.refuse(NotCached::StoredFunction);
                self.may_write = true;
            }
        }
    }

    /// Under sql_mode=ORACLE `s.nextval` advances sequence `s` and `s.currval` reads the
    /// session's last value, though both look like a column of a table `s`. The analysis
    /// does not know the sql_mode, so any qualified `nextval` / `currval` (quoted or not:
    /// the server resolves the name, not its spelling) is taken as one: at worst a column
    /// of that name is not cached.
    fn check_sequence_column(&mut self, parts: &[Ident]) {
        let [_, .., last] = parts else {
            return;
        };
        if last.value.eq_ignore_ascii_case("nextval") {
            self.refuse(NotCached::Sequence);
            self.may_write = true;
        } else if last.value.eq_ignore_ascii_case("currval") {
            self.refuse(NotCached::Sequence);
        }
    }

    fn check_identifier(&mut self, value: &str, quoted: bool) {
        if quoted {
            return;
        }
        if value.starts_with("@@") {
            self.refuse(NotCached::SystemVariable);
        } else if value.starts_with('@') {
            self.refuse(NotCached::UserVariable);
        } else if let Some(n) = functions::niladic(&value.to_ascii_lowercase()) {
            self.refuse(NotCached::NonDeterministic(n));
        }
    }
}

impl Visitor for ReadVisitor {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        let ptr = q as *const Query;
        let parent: Vec<String> = match self.scopes.last() {
            None => Vec::new(),
            Some(top) => top
                .cte_bodies
                .iter()
                .find(|(p, _)| *p == ptr)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| top.visible.clone()),
        };
        let mut visible = parent.clone();
        let mut cte_bodies = Vec::new();
        if let Some(with) = &q.with {
            let names: Vec<String> = with
                .cte_tables
                .iter()
                .map(|c| c.alias.name.value.to_lowercase())
                .collect();
            for (i, cte) in with.cte_tables.iter().enumerate() {
                let mut v = parent.clone();
                let upto = if with.recursive { names.len() } else { i };
                v.extend(names.iter().take(upto).cloned());
                cte_bodies.push((&*cte.query as *const Query, v));
            }
            visible.extend(names);
        }
        self.scopes.push(Scope {
            visible,
            cte_bodies,
        });
        if !q.locks.is_empty() {
            self.refuse(NotCached::Locking);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
        self.scopes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, s: &Select) -> ControlFlow<()> {
        if s.into.is_some() {
            self.refuse(NotCached::Into);
        }
        if s.select_modifiers
            .as_ref()
            .is_some_and(|m| m.sql_calc_found_rows)
        {
            self.refuse(NotCached::CalcFoundRows);
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, tf: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = tf {
            if args.is_some() {
                // A table-valued function: MySQL has none, so it is a stored routine.
                self.refuse(NotCached::StoredFunction);
                self.may_write = true;
                return ControlFlow::Continue(());
            }
            let Some(t) = table_ref(name) else {
                self.refuse(NotCached::Unparsable);
                return ControlFlow::Continue(());
            };
            // `FROM DUAL` is no table.
            if t.schema.is_none() && t.name == "dual" {
                return ControlFlow::Continue(());
            }
            if t.schema.is_none()
                && self
                    .scopes
                    .last()
                    .is_some_and(|s| s.visible.contains(&t.name))
            {
                return ControlFlow::Continue(());
            }
            if t.schema
                .as_deref()
                .is_some_and(|s| SYSTEM_SCHEMAS.contains(&s))
            {
                self.refuse(NotCached::SystemSchema);
            }
            self.tables.push(t);
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        match e {
            Expr::Function(f) => self.check_function(f),
            Expr::MatchAgainst { .. } => self.refuse(NotCached::FullText),
            Expr::Identifier(i) => self.check_identifier(&i.value, i.quote_style.is_some()),
            Expr::CompoundIdentifier(parts) => {
                if let Some(first) = parts.first() {
                    self.check_identifier(&first.value, first.quote_style.is_some());
                }
                self.check_sequence_column(parts);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Tables, verdict and may_write of everything a statement reads.
fn analyze_read(stmt: &Statement) -> ReadInfo {
    let mut v = ReadVisitor {
        tables: Vec::new(),
        verdict: None,
        may_write: false,
        scopes: Vec::new(),
    };
    let _ = stmt.visit(&mut v);
    v.tables.sort();
    v.tables.dedup();
    let verdict = match v.verdict {
        Some(why) => Err(why),
        None if v.tables.is_empty() => Err(NotCached::NoTable),
        None => Ok(()),
    };
    ReadInfo {
        tables: v.tables,
        verdict,
        may_write: v.may_write,
    }
}

/// Tables named in a FROM/JOIN list, not those inside derived tables (those are only read).
fn join_tables(twj: &TableWithJoins, out: &mut Vec<(TableRef, Option<String>)>) {
    factor_tables(&twj.relation, out);
    for j in &twj.joins {
        factor_tables(&j.relation, out);
    }
}

fn factor_tables(tf: &TableFactor, out: &mut Vec<(TableRef, Option<String>)>) {
    match tf {
        TableFactor::Table { name, alias, .. } => {
            if let Some(t) = table_ref(name) {
                out.push((t, alias.as_ref().map(|a| a.name.value.to_lowercase())));
            }
        }
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => join_tables(table_with_joins, out),
        _ => {}
    }
}

fn names(list: &[ObjectName]) -> Option<Vec<TableRef>> {
    list.iter().map(table_ref).collect()
}

fn ddl(targets: WriteTargets) -> WriteInfo {
    WriteInfo {
        targets,
        ddl: true,
        implicit_commit: true,
        ..WriteInfo::unknown()
    }
}

fn tables_or_unknown(t: Option<Vec<TableRef>>) -> WriteTargets {
    match t {
        Some(t) => WriteTargets::Tables(t),
        None => WriteTargets::Unknown,
    }
}

/// The write a statement makes, or None when it is not a write sqlparser told us about.
fn write_info(stmt: &Statement) -> Option<WriteInfo> {
    let w = match stmt {
        Statement::Insert(ins) => match &ins.table {
            TableObject::TableName(n) => WriteInfo {
                targets: tables_or_unknown(table_ref(n).map(|t| vec![t])),
                ..WriteInfo::unknown()
            },
            _ => WriteInfo::unknown(),
        },
        Statement::Update(u) => update_write(u),
        Statement::Delete(d) => delete_write(d),
        Statement::Truncate(tr) => {
            let t: Option<Vec<TableRef>> =
                tr.table_names.iter().map(|x| table_ref(&x.name)).collect();
            WriteInfo {
                implicit_commit: true,
                ..WriteInfo {
                    targets: tables_or_unknown(t),
                    ..WriteInfo::unknown()
                }
            }
        }
        Statement::CreateTable(ct) => created(table_ref(&ct.name), ct.temporary),
        Statement::AlterTable(at) => alter_write(&at.name, &at.operations),
        Statement::RenameTable(list) => rename_write(list),
        Statement::Drop {
            object_type,
            names: dropped,
            temporary,
            table,
            ..
        } => drop_write(object_type, dropped, *temporary, table.as_ref()),
        Statement::CreateView(cv) => ddl(tables_or_unknown(table_ref(&cv.name).map(|t| vec![t]))),
        Statement::AlterView(av) => ddl(tables_or_unknown(table_ref(&av.name).map(|t| vec![t]))),
        Statement::CreateIndex(ci) => ddl(tables_or_unknown(
            table_ref(&ci.table_name).map(|t| vec![t]),
        )),
        Statement::CreateTrigger(ct) => ddl(tables_or_unknown(
            table_ref(&ct.table_name).map(|t| vec![t]),
        )),
        Statement::DropTrigger(dt) => ddl(tables_or_unknown(
            dt.table_name.as_ref().and_then(table_ref).map(|t| vec![t]),
        )),
        // A sequence is a table: a temporary one shadows the base table of its name for the
        // session, as CREATE TEMPORARY TABLE does.
        Statement::CreateSequence {
            name, temporary, ..
        } => created(table_ref(name), *temporary),
        Statement::LoadData { table_name, .. } => WriteInfo {
            targets: tables_or_unknown(table_ref(table_name).map(|t| vec![t])),
            ..WriteInfo::unknown()
        },
        Statement::OptimizeTable { name, .. } => WriteInfo {
            implicit_commit: true,
            ..WriteInfo::tables(table_ref(name).into_iter().collect())
        },
        Statement::CreateDatabase { .. }
        | Statement::CreateSchema { .. }
        | Statement::AlterSchema(_)
        | Statement::CreateFunction(_)
        | Statement::CreateProcedure { .. }
        | Statement::DropFunction(_)
        | Statement::DropProcedure { .. }
        | Statement::CreateUser(_)
        | Statement::AlterUser(_)
        | Statement::CreateRole(_) => ddl(WriteTargets::Tables(Vec::new())),
        Statement::Grant(_) | Statement::Revoke(_) => WriteInfo {
            implicit_commit: true,
            ..WriteInfo::tables(Vec::new())
        },
        Statement::Call(_) => WriteInfo::unknown(),
        _ => return None,
    };
    Some(w)
}

/// A CREATE TABLE or CREATE SEQUENCE of `t`: DDL, unless temporary: a temporary table is
/// private to the session (no commit, no catalog change) and shadows the base table of its
/// name.
fn created(t: Option<TableRef>, temporary: bool) -> WriteInfo {
    let mut w = ddl(tables_or_unknown(t.clone().map(|t| vec![t])));
    if temporary {
        w.ddl = false;
        w.implicit_commit = false;
        w.temp_created = t.into_iter().collect();
    }
    w
}

/// An ALTER TABLE of `name`: DDL of the table and of any name it is renamed to.
fn alter_write(name: &ObjectName, ops: &[AlterTableOperation]) -> WriteInfo {
    let mut t = vec![table_ref(name)];
    let mut renamed = Vec::new();
    for op in ops {
        if let AlterTableOperation::RenameTable { table_name } = op {
            let (RenameTableNameKind::As(n) | RenameTableNameKind::To(n)) = table_name;
            t.push(table_ref(n));
            if let (Some(from), Some(to)) = (table_ref(name), table_ref(n)) {
                renamed.push((from, to));
            }
        }
    }
    WriteInfo {
        renamed,
        ..ddl(tables_or_unknown(t.into_iter().collect()))
    }
}

/// RENAME TABLE: DDL of every name on either side, and the renames.
fn rename_write(list: &[sqlparser::ast::RenameTable]) -> WriteInfo {
    let t: Option<Vec<TableRef>> = list
        .iter()
        .flat_map(|r| [table_ref(&r.old_name), table_ref(&r.new_name)])
        .collect();
    let renamed = list
        .iter()
        .filter_map(|r| Some((table_ref(&r.old_name)?, table_ref(&r.new_name)?)))
        .collect();
    WriteInfo {
        renamed,
        ..ddl(tables_or_unknown(t))
    }
}

/// The tables an UPDATE writes: its target list and the tables of its FROM.
fn update_write(u: &Update) -> WriteInfo {
    let mut found = Vec::new();
    join_tables(&u.table, &mut found);
    if let Some(from) = &u.from {
        let (UpdateTableFromKind::BeforeSet(list) | UpdateTableFromKind::AfterSet(list)) = from;
        for twj in list {
            join_tables(twj, &mut found);
        }
    }
    written(found.into_iter().map(|(t, _)| t).collect())
}

/// The tables a write names, each once; unknown when it names none.
fn written(mut t: Vec<TableRef>) -> WriteInfo {
    t.sort();
    t.dedup();
    if t.is_empty() {
        WriteInfo::unknown()
    } else {
        WriteInfo::tables(t)
    }
}

/// The tables a DELETE writes: the FROM list, or the names before FROM (each an alias or a
/// table of the list).
fn delete_write(d: &Delete) -> WriteInfo {
    let mut listed = Vec::new();
    let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
    for twj in from {
        join_tables(twj, &mut listed);
    }
    let in_from = listed.len();
    if let Some(using) = &d.using {
        for twj in using {
            join_tables(twj, &mut listed);
        }
    }
    let t = if d.tables.is_empty() {
        // `DELETE FROM t …` and `DELETE FROM t1, t2 USING …`: the FROM list.
        listed.truncate(in_from);
        listed.into_iter().map(|(t, _)| t).collect::<Vec<_>>()
    } else {
        // `DELETE a, b FROM …`: each name is an alias or a table of the list.
        let mut v = Vec::new();
        for n in &d.tables {
            let Some(r) = table_ref(n) else {
                return WriteInfo::unknown();
            };
            let by_alias = listed
                .iter()
                .find(|(_, alias)| r.schema.is_none() && alias.as_deref() == Some(r.name.as_str()));
            v.push(by_alias.map(|(t, _)| t.clone()).unwrap_or(r));
        }
        v
    };
    written(t)
}

/// What a DROP writes, by the kind of object it drops.
fn drop_write(
    object_type: &ObjectType,
    dropped: &[ObjectName],
    temporary: bool,
    table: Option<&ObjectName>,
) -> WriteInfo {
    match object_type {
        // A sequence is a table (DROP SEQUENCE drops a temporary one first, as DROP TABLE
        // does).
        ObjectType::Table | ObjectType::Sequence => {
            let t = names(dropped);
            let mut w = ddl(tables_or_unknown(t.clone()));
            w.temp_dropped = t.unwrap_or_default();
            if temporary {
                w.ddl = false;
                w.implicit_commit = false;
            }
            w
        }
        ObjectType::View => ddl(tables_or_unknown(names(dropped))),
        ObjectType::Index => ddl(tables_or_unknown(
            table.and_then(table_ref).map(|t| vec![t]),
        )),
        ObjectType::Schema | ObjectType::Database => match dropped {
            [n] => match n.0.last().and_then(|p| p.as_ident()) {
                Some(i) => ddl(WriteTargets::Schema(i.value.to_lowercase())),
                None => ddl(WriteTargets::Unknown),
            },
            _ => ddl(WriteTargets::Unknown),
        },
        _ => ddl(WriteTargets::Tables(Vec::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TableRef {
        match name.split_once('.') {
            Some((s, n)) => TableRef::new(Some(s), n),
            None => TableRef::new(None, name),
        }
    }

    fn read(sql: &str) -> ReadInfo {
        match analyze(sql) {
            Analysis::Read(r) => r,
            other => panic!("{sql}: expected a read, got {other:?}"),
        }
    }

    fn write(sql: &str) -> WriteInfo {
        match analyze(sql) {
            Analysis::Write(w) => w,
            other => panic!("{sql}: expected a write, got {other:?}"),
        }
    }

    fn tables(sql: &str) -> Vec<TableRef> {
        let r = read(sql);
        assert_eq!(r.verdict, Ok(()), "{sql}");
        assert!(!r.may_write, "{sql}");
        r.tables
    }

    fn targets(sql: &str) -> Vec<TableRef> {
        match write(sql).targets {
            WriteTargets::Tables(t) => t,
            other => panic!("{sql}: {other:?}"),
        }
    }

    fn refused(sql: &str) -> NotCached {
        match read(sql).verdict {
            Err(why) => why,
            Ok(()) => panic!("{sql}: unexpectedly cacheable"),
        }
    }

    /// One row per way a string that ends at `\'` under NO_BACKSLASH_ESCAPES hides what a
    /// statement writes when read with backslash escapes. None: targets unknown.
    #[test]
    fn writes_under_either_backslash_reading() {
        for (sql, want) in [
            (
                "LOAD DATA INFILE 'f\\' INTO TABLE t2 -- ' INTO TABLE t1",
                Some(vec![t("t1"), t("t2")]),
            ),
            ("INSERT INTO t1 VALUES ('x\\'), (f(1)) -- ')", None),
            ("UPDATE t1 SET s = 'x\\' WHERE f(2) > 0 -- '", None),
            ("DELETE FROM t1 WHERE s = 'x\\' AND f(3) > 0 -- '", None),
            (
                "INSERT INTO t1 VALUES ('x\\'); INSERT INTO t2 VALUES (6); -- ')",
                None,
            ),
            (
                "REPLACE INTO t1 VALUES ('x\\'), ((SELECT a FROM t2)) -- ')",
                Some(vec![t("t1")]),
            ),
            // Read without escapes, `'O\'` leaves `Brien'` open: the server would reject it
            // in that mode, so only the default reading counts.
            ("INSERT INTO t1 VALUES ('O\\'Brien')", Some(vec![t("t1")])),
            (
                "INSERT INTO t1 VALUES ('O\\'Brien', 'x')",
                Some(vec![t("t1")]),
            ),
            (
                "INSERT INTO t1 VALUES ('{\"a\":\"b\\\"c\"}')",
                Some(vec![t("t1")]),
            ),
        ] {
            let got = match write(sql).targets {
                WriteTargets::Tables(t) => Some(t),
                WriteTargets::Unknown => None,
                other => panic!("{sql}: {other:?}"),
            };
            assert_eq!(got, want, "{sql}");
        }
        let r = read("SELECT 'x\\' AS s, f(4) AS r -- '");
        assert!(r.may_write && r.verdict.is_err());
        assert!(fallback::calls_unknown_code("DO 'x\\', f(5) -- '"));
        assert!(!fallback::calls_unknown_code("DO 'x\\', abs(5) -- '"));
    }

    /// Under sql_mode=MSSQL `[x']` is a name, while the default rules read `[` and the hex
    /// string `X'…'`: each reading counts. One row per way the default reading hid what the
    /// server does. Reads: (text, a table the server reads, whether it may write).
    #[test]
    fn mssql_brackets_read_as_names() {
        for (sql, table, may_write) in [
            ("SELECT [x'] FROM t2 -- '] FROM t1", "t2", false),
            ("SELECT [x'] AS a, f() AS ['] FROM t2", "t2", true),
            ("SELECT [x']]'] FROM t2 -- '] FROM t1", "t2", false),
        ] {
            let r = read(sql);
            assert!(r.verdict.is_err(), "{sql}: cacheable");
            assert!(r.tables.contains(&t(table)), "{sql}: {:?}", r.tables);
            assert_eq!(r.may_write, may_write, "{sql}");
        }
        // Writes: the tables either reading names, or unknown.
        for (sql, want) in [
            (
                "UPDATE t2 SET v = 9 WHERE id = 1 AND [x'] IS NULL OR id = 2 OR [']",
                Some(vec![t("t2")]),
            ),
            (
                "UPDATE t1 SET v = [x'] WHERE 0; UPDATE t2 SET v = 0; -- ']",
                Some(vec![t("t1"), t("t2")]),
            ),
            ("UPDATE t1 SET v = [x'] + f(1) -- ']", None),
        ] {
            let got = match write(sql).targets {
                WriteTargets::Tables(t) => Some(t),
                WriteTargets::Unknown => None,
                other => panic!("{sql}: {other:?}"),
            };
            assert_eq!(got, want, "{sql}");
        }
        // A `[` inside a string is no name in any mode: the read stays cacheable.
        assert!(read("SELECT JSON_EXTRACT(j, '$[0]') FROM t1")
            .verdict
            .is_ok());
    }

    /// `DEFAULT(col)` evaluates the column's default (NEXTVAL, RAND(), CURRENT_TIMESTAMP, …):
    /// never cached, and a write nobody can name (the sequence it may advance).
    #[test]
    fn column_default_reads() {
        for sql in [
            "SELECT DEFAULT(n) FROM t",
            "SELECT id FROM t WHERE DEFAULT(n) > 0",
            "SELECT a FROM t ORDER BY DEFAULT(b)",
            "SELECT (SELECT DEFAULT(n) FROM t LIMIT 1) AS d FROM u",
        ] {
            let r = read(sql);
            assert_eq!(
                r.verdict,
                Err(NotCached::NonDeterministic("default")),
                "{sql}"
            );
            assert!(r.may_write, "{sql}");
        }
        assert_eq!(
            write("INSERT INTO t (a) SELECT DEFAULT(n) FROM u").targets,
            WriteTargets::Unknown
        );
        assert!(fallback::calls_unknown_code("DO DEFAULT(n)"));
    }

    #[test]
    fn point_select() {
        assert_eq!(
            tables("SELECT c FROM sbtest1 WHERE id=42"),
            vec![t("sbtest1")]
        );
        assert_eq!(
            tables("SELECT c FROM Db.SbTest1 WHERE id=42"),
            vec![t("db.sbtest1")]
        );
        assert_eq!(
            tables("SELECT c FROM `db`.`T` WHERE id=42"),
            vec![t("db.t")]
        );
    }

    #[test]
    fn tables_everywhere() {
        assert_eq!(
            tables("SELECT * FROM a JOIN b ON a.id = b.id LEFT JOIN c USING (id)"),
            vec![t("a"), t("b"), t("c")]
        );
        assert_eq!(
            tables("SELECT * FROM (SELECT id FROM d1.x) AS dt WHERE id IN (SELECT id FROM y) AND EXISTS (SELECT 1 FROM z)"),
            vec![t("y"), t("z"), t("d1.x")]
        );
        assert_eq!(
            tables("SELECT a FROM t1 UNION SELECT a FROM t2 UNION ALL (SELECT a FROM t3)"),
            vec![t("t1"), t("t2"), t("t3")]
        );
        assert_eq!(
            tables("SELECT (SELECT MAX(x) FROM s) FROM t"),
            vec![t("s"), t("t")]
        );
        assert_eq!(
            tables("SELECT * FROM (a JOIN b ON a.x = b.x)"),
            vec![t("a"), t("b")]
        );
    }

    #[test]
    fn ctes_are_not_tables_but_their_bodies_are() {
        assert_eq!(
            tables("WITH c AS (SELECT * FROM base) SELECT * FROM c JOIN other ON 1=1"),
            vec![t("base"), t("other")]
        );
        assert_eq!(
            tables("WITH RECURSIVE r (n) AS (SELECT 1 FROM seed UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r"),
            vec![t("seed")]
        );
        // A non-recursive CTE's body sees the real table of the same name.
        assert_eq!(
            tables("WITH t AS (SELECT * FROM t) SELECT * FROM t"),
            vec![t("t")]
        );
        // Outside the WITH's scope the name is a table again.
        assert_eq!(
            tables("SELECT * FROM (WITH c AS (SELECT * FROM b) SELECT * FROM c) x JOIN c ON 1=1"),
            vec![t("b"), t("c")]
        );
        // A qualified name is never a CTE.
        assert_eq!(
            tables("WITH c AS (SELECT * FROM b) SELECT * FROM c, db.c"),
            vec![t("b"), t("db.c")]
        );
    }

    #[test]
    fn executable_comments_are_code() {
        assert_eq!(
            tables("SELECT * FROM t1 /*!40001 JOIN t2 ON t1.a = t2.a */"),
            vec![t("t1"), t("t2")]
        );
        assert_eq!(
            tables("SELECT /*!40001 SQL_NO_CACHE */ * FROM t1"),
            vec![t("t1")]
        );
        assert_eq!(tables("SELECT SQL_CACHE a FROM t1"), vec![t("t1")]);
    }

    #[test]
    fn deterministic_builtins_are_fine() {
        tables("SELECT CONCAT(a, 'x'), UPPER(b), IFNULL(c, 0), COALESCE(d, 1), NULLIF(a, b), IF(a, 1, 2) FROM t");
        tables("SELECT CAST(a AS CHAR), CONVERT(a, CHAR), EXTRACT(YEAR FROM d), TRIM(a), SUBSTRING(a, 1), DATE_ADD(d, INTERVAL 1 DAY) FROM t");
        tables("SELECT COUNT(*), SUM(a), GROUP_CONCAT(a ORDER BY a SEPARATOR ','), ROW_NUMBER() OVER (ORDER BY a) FROM t GROUP BY b");
        tables("SELECT JSON_EXTRACT(j, '$.a'), JSON_OBJECT('a', 1), UNIX_TIMESTAMP(d), CASE WHEN a THEN 1 ELSE 2 END FROM t");
    }

    #[test]
    fn every_not_cached_reason() {
        assert_eq!(refused("SELECT * FROM t WHERE"), NotCached::Unparsable);
        for (sql, name) in [
            ("SELECT NOW(), a FROM t", "now"),
            ("SELECT a FROM t WHERE d > CURRENT_DATE", "current_date"),
            (
                "SELECT a FROM t WHERE d > CURRENT_TIMESTAMP",
                "current_timestamp",
            ),
            (
                "SELECT a FROM t WHERE d > CURRENT_TIMESTAMP()",
                "current_timestamp",
            ),
            ("SELECT a FROM t WHERE d > LOCALTIME", "localtime"),
            ("SELECT a FROM t WHERE d > UTC_DATE", "utc_date"),
            ("SELECT a FROM t WHERE d > utc_timestamp()", "utc_timestamp"),
            ("SELECT CURRENT_USER, a FROM t", "current_user"),
            ("SELECT CURRENT_USER(), a FROM t", "current_user"),
            ("SELECT UNIX_TIMESTAMP(), a FROM t", "unix_timestamp"),
            ("SELECT a FROM t ORDER BY RAND()", "rand"),
            ("SELECT UUID(), a FROM t", "uuid"),
            (
                "SELECT a FROM t WHERE id = LAST_INSERT_ID()",
                "last_insert_id",
            ),
            ("SELECT FOUND_ROWS() FROM t", "found_rows"),
            ("SELECT DATABASE(), a FROM t", "database"),
            ("SELECT SLEEP(1) FROM t", "sleep"),
            ("SELECT GET_LOCK('x', 1) FROM t", "get_lock"),
            ("SELECT SYSDATE() FROM t", "sysdate"),
            // sql_mode=ORACLE's bare SYSDATE (a column name elsewhere: refused all the same).
            ("SELECT id FROM t WHERE SYSDATE < x", "sysdate"),
            ("SELECT a, sysdate FROM t", "sysdate"),
            ("SELECT CONNECTION_ID() FROM t", "connection_id"),
            ("SELECT USER() FROM t", "user"),
            ("SELECT LOAD_FILE('/etc/passwd') FROM t", "load_file"),
        ] {
            assert_eq!(refused(sql), NotCached::NonDeterministic(name), "{sql}");
            assert!(!read(sql).may_write, "{sql}");
        }
        let r = read("SELECT my_func(a) FROM t");
        assert_eq!(r.verdict, Err(NotCached::StoredFunction));
        assert!(r.may_write);
        assert!(read("SELECT db.f(a) FROM t").may_write);
        assert!(read("SELECT `concat`(a) FROM t").may_write);
        assert_eq!(
            refused("SELECT a FROM t WHERE b = @x"),
            NotCached::UserVariable
        );
        assert_eq!(
            refused("SELECT @@sql_mode, a FROM t"),
            NotCached::SystemVariable
        );
        assert_eq!(
            refused("SELECT @@session.sql_mode, a FROM t"),
            NotCached::SystemVariable
        );
        assert_eq!(refused("SELECT a FROM t FOR UPDATE"), NotCached::Locking);
        assert_eq!(refused("SELECT a FROM t FOR SHARE"), NotCached::Locking);
        assert_eq!(
            refused("SELECT a FROM t LOCK IN SHARE MODE"),
            NotCached::Locking
        );
        assert_eq!(refused("SELECT a INTO @v FROM t"), NotCached::Into);
        assert_eq!(refused("SELECT a FROM t INTO @v"), NotCached::Into);
        assert_eq!(
            refused("SELECT a FROM t INTO OUTFILE '/tmp/x'"),
            NotCached::Into
        );
        assert_eq!(
            refused("SELECT a FROM t INTO DUMPFILE '/tmp/x'"),
            NotCached::Into
        );
        assert_eq!(refused("SELECT * FROM mysql.user"), NotCached::SystemSchema);
        assert_eq!(
            refused("SELECT * FROM INFORMATION_SCHEMA.TABLES"),
            NotCached::SystemSchema
        );
        assert_eq!(
            refused("SELECT * FROM performance_schema.threads"),
            NotCached::SystemSchema
        );
        assert_eq!(
            refused("SELECT * FROM sys.x JOIN t"),
            NotCached::SystemSchema
        );
        assert_eq!(refused("SELECT 1"), NotCached::NoTable);
        assert_eq!(refused("SELECT 1 + 1 AS two"), NotCached::NoTable);
        assert_eq!(refused("SELECT 1 FROM DUAL"), NotCached::NoTable);
        // Read without backslash escapes this is `'a\'`, `OR b IN (SELECT … FROM t2) OR c = `,
        // `'x'`: a server in NO_BACKSLASH_ESCAPES mode reads t2 too.
        assert_eq!(
            refused("SELECT a FROM t1 WHERE a = 'a\\' OR b IN (SELECT b FROM t2) OR c = 'x'"),
            NotCached::Unparsable
        );
        assert_eq!(
            tables("SELECT a FROM t WHERE n = 'O\\'Brien'"),
            vec![t("t")]
        );
        assert_eq!(
            tables("SELECT a FROM t WHERE j = '{\"a\":\"b\\\"c\"}'"),
            vec![t("t")]
        );
        // Read without escapes it is a SELECT then a DELETE of u: a write of unknown tables.
        assert_eq!(
            write("SELECT a FROM t WHERE s = 'x\\'; DELETE FROM u; -- '").targets,
            WriteTargets::Unknown
        );
        assert_eq!(
            refused("SELECT a FROM t; SELECT b FROM u"),
            NotCached::MultiStatement
        );
        assert_eq!(
            refused("SELECT SQL_CALC_FOUND_ROWS a FROM t LIMIT 1"),
            NotCached::CalcFoundRows
        );
        let r = read("SELECT NEXTVAL(s), a FROM t");
        assert_eq!(r.verdict, Err(NotCached::Sequence));
        assert!(r.may_write);
        let r = read("SELECT NEXT VALUE FOR s");
        assert_eq!(r.verdict, Err(NotCached::Sequence));
        assert!(r.may_write);
        assert_eq!(refused("SELECT PREVIOUS VALUE FOR s"), NotCached::Sequence);
        // sql_mode=ORACLE's spellings, which look like columns.
        for sql in [
            "SELECT s.nextval FROM u",
            "SELECT v FROM u WHERE `s`.NEXTVAL > 0",
            "SELECT db.s.nextval AS n, v FROM u",
        ] {
            let r = read(sql);
            assert_eq!(r.verdict, Err(NotCached::Sequence), "{sql}");
            assert!(r.may_write, "{sql}");
        }
        assert_eq!(refused("SELECT s.currval FROM u"), NotCached::Sequence);
        for sql in [
            "SELECT id FROM t WHERE MATCH (s) AGAINST ('+a -b' IN BOOLEAN MODE)",
            "SELECT id, MATCH (s) AGAINST ('a') AS r FROM t ORDER BY r",
            "SELECT id FROM t WHERE id IN (SELECT id FROM u WHERE MATCH (s, x) AGAINST ('a' WITH QUERY EXPANSION))",
            "SELECT id FROM t HAVING MATCH (s) AGAINST ('a' IN NATURAL LANGUAGE MODE) > 0",
        ] {
            assert_eq!(refused(sql), NotCached::FullText, "{sql}");
        }
    }

    #[test]
    fn table_statement_is_a_read() {
        assert_eq!(tables("TABLE t"), vec![t("t")]);
        assert_eq!(tables("TABLE db.t ORDER BY a LIMIT 3"), vec![t("db.t")]);
    }

    #[test]
    fn inserts_and_replaces() {
        assert_eq!(targets("INSERT INTO t (a) VALUES (1)"), vec![t("t")]);
        assert_eq!(
            targets("INSERT IGNORE INTO db.T VALUES (1), (2)"),
            vec![t("db.t")]
        );
        assert_eq!(targets("INSERT INTO t SET a = 1"), vec![t("t")]);
        assert_eq!(
            targets("INSERT INTO t (a) SELECT a FROM s JOIN u ON 1=1"),
            vec![t("t")]
        );
        assert_eq!(
            targets("INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)"),
            vec![t("t")]
        );
        assert_eq!(targets("REPLACE INTO t VALUES (1)"), vec![t("t")]);
        assert_eq!(targets("REPLACE t SELECT * FROM s"), vec![t("t")]);
        let w = write("INSERT INTO t VALUES (my_func())");
        assert_eq!(w.targets, WriteTargets::Unknown);
        assert!(!w.ddl && !w.implicit_commit);
    }

    #[test]
    fn updates() {
        assert_eq!(targets("UPDATE t SET a = 1 WHERE id = 2"), vec![t("t")]);
        assert_eq!(
            targets("UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = t2.b"),
            vec![t("t1"), t("t2")]
        );
        assert_eq!(
            targets("UPDATE t1, db.t2 SET t1.a = 1"),
            vec![t("t1"), t("db.t2")]
        );
        assert_eq!(
            targets("UPDATE LOW_PRIORITY IGNORE t1 AS x, t2 y SET x.a = y.b"),
            vec![t("t1"), t("t2")]
        );
        assert_eq!(
            targets("UPDATE t SET a = (SELECT MAX(b) FROM s)"),
            vec![t("t")]
        );
        assert_eq!(
            targets("WITH c AS (SELECT id FROM s) UPDATE t JOIN c ON t.id = c.id SET t.a = 1"),
            vec![t("c"), t("t")]
        );
    }

    #[test]
    fn deletes() {
        assert_eq!(targets("DELETE FROM t WHERE id = 1"), vec![t("t")]);
        assert_eq!(targets("DELETE FROM db.t"), vec![t("db.t")]);
        // MariaDB's history deletion writes the table after FROM, not one named `history`.
        assert_eq!(targets("DELETE HISTORY FROM v"), vec![t("v")]);
        assert_eq!(
            targets("DELETE HISTORY FROM db.v BEFORE SYSTEM_TIME '2020-01-01'"),
            vec![t("db.v")]
        );
        assert_eq!(
            targets("DELETE a FROM t1 AS a JOIN t2 b ON a.id = b.id"),
            vec![t("t1")]
        );
        assert_eq!(
            targets("DELETE t1, t2 FROM t1 JOIN t2 JOIN t3 WHERE t1.id = t2.id"),
            vec![t("t1"), t("t2")]
        );
        assert_eq!(
            targets("DELETE FROM t1 USING t1 JOIN t2 ON t1.id = t2.id"),
            vec![t("t1")]
        );
        assert_eq!(
            targets("DELETE FROM t1, t2 USING t1 JOIN t2 JOIN t3"),
            vec![t("t1"), t("t2")]
        );
    }

    #[test]
    fn load_data() {
        assert_eq!(
            targets("LOAD DATA INFILE '/tmp/x' INTO TABLE t"),
            vec![t("t")]
        );
        assert_eq!(
            targets("LOAD DATA LOW_PRIORITY LOCAL INFILE 'x.csv' REPLACE INTO TABLE db.T FIELDS TERMINATED BY ','"),
            vec![t("db.t")]
        );
        assert_eq!(
            targets("load data local infile 'x' ignore into table `a b` (c1, c2)"),
            vec![t("a b")]
        );
        assert_eq!(
            targets("LOAD XML INFILE 'x.xml' INTO TABLE t"),
            vec![t("t")]
        );
    }

    #[test]
    fn ddl_statements() {
        let w = write("TRUNCATE TABLE t");
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("t")]));
        assert!(w.implicit_commit);
        assert_eq!(targets("TRUNCATE db.t"), vec![t("db.t")]);
        let w = write("CREATE TABLE t (a INT)");
        assert!(w.ddl && w.implicit_commit);
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("t")]));
        assert_eq!(targets("CREATE TABLE t2 AS SELECT * FROM t"), vec![t("t2")]);
        assert_eq!(targets("CREATE TABLE t2 LIKE t"), vec![t("t2")]);
        let w = write("ALTER TABLE t ADD COLUMN b INT");
        assert!(w.ddl && w.implicit_commit);
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("t")]));
        assert_eq!(targets("ALTER TABLE t RENAME TO u"), vec![t("t"), t("u")]);
        let w = write("DROP TABLE IF EXISTS a, db.b");
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("a"), t("db.b")]));
        assert_eq!(w.temp_dropped, vec![t("a"), t("db.b")]);
        assert!(w.ddl && w.implicit_commit);
        let mut r = targets("RENAME TABLE a TO b, c TO d");
        r.sort();
        assert_eq!(r, vec![t("a"), t("b"), t("c"), t("d")]);
        let w = write("CREATE VIEW v AS SELECT * FROM t");
        assert!(w.ddl);
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("v")]));
        assert_eq!(
            targets("CREATE OR REPLACE VIEW db.v AS SELECT 1"),
            vec![t("db.v")]
        );
        assert_eq!(targets("ALTER VIEW v AS SELECT 2"), vec![t("v")]);
        assert_eq!(targets("DROP VIEW v"), vec![t("v")]);
        assert_eq!(targets("CREATE INDEX i ON t (a)"), vec![t("t")]);
        assert_eq!(
            targets("CREATE UNIQUE INDEX i ON db.t (a)"),
            vec![t("db.t")]
        );
        assert_eq!(targets("DROP INDEX i ON t"), vec![t("t")]);
        let w = write("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1");
        assert!(w.ddl);
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("t")]));
        let w = write("DROP TRIGGER tr");
        assert!(w.ddl);
        assert_eq!(w.targets, WriteTargets::Unknown);
        let w = write("DROP DATABASE Shop");
        assert_eq!(w.targets, WriteTargets::Schema("shop".into()));
        assert!(w.ddl && w.implicit_commit);
        assert_eq!(
            write("DROP SCHEMA IF EXISTS s").targets,
            WriteTargets::Schema("s".into())
        );
        let w = write("CREATE TEMPORARY TABLE tmp (a INT)");
        assert_eq!(w.temp_created, vec![t("tmp")]);
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("tmp")]));
        assert!(!w.implicit_commit);
        let w = write("DROP TEMPORARY TABLE tmp");
        assert_eq!(w.temp_dropped, vec![t("tmp")]);
        assert!(!w.implicit_commit);
        // A sequence is a table: a temporary one shadows the base table of its name.
        let w = write("CREATE TEMPORARY SEQUENCE tmp START WITH 7");
        assert_eq!(w.temp_created, vec![t("tmp")]);
        assert!(!w.implicit_commit && !w.ddl);
        assert_eq!(write("DROP SEQUENCE tmp").temp_dropped, vec![t("tmp")]);
        let w = write("CREATE SEQUENCE s");
        assert!(w.ddl && w.temp_created.is_empty());
        let w = write("CREATE DATABASE d");
        assert_eq!(w.targets, WriteTargets::Tables(vec![]));
        assert!(w.ddl);
    }

    #[test]
    fn alter_table_writes_every_table_it_names() {
        for (sql, want) in [
            (
                "ALTER TABLE t EXCHANGE PARTITION p WITH TABLE e",
                vec![t("e"), t("t")],
            ),
            (
                "alter table db.t exchange partition p with table db2.e without validation",
                vec![t("db.t"), t("db2.e")],
            ),
            (
                "ALTER TABLE t CONVERT PARTITION p TO TABLE x",
                vec![t("t"), t("x")],
            ),
            (
                "ALTER TABLE t CONVERT TABLE x TO PARTITION p VALUES LESS THAN (10)",
                vec![t("t"), t("x")],
            ),
            (
                "ALTER TABLE t RENAME COLUMN a TO b, EXCHANGE PARTITION p WITH TABLE e",
                vec![t("e"), t("t")],
            ),
        ] {
            let w = write(sql);
            assert!(w.ddl && w.implicit_commit, "{sql}");
            assert_eq!(w.targets, WriteTargets::Tables(want), "{sql}");
        }
    }

    #[test]
    fn analyze_runs_the_statement_it_explains() {
        assert_eq!(
            targets("ANALYZE FORMAT=JSON UPDATE t SET a = 1"),
            vec![t("t")]
        );
        assert_eq!(targets("ANALYZE DELETE FROM db.t"), vec![t("db.t")]);
        assert_eq!(
            targets("EXPLAIN ANALYZE INSERT INTO t VALUES (1)"),
            vec![t("t")]
        );
        assert_eq!(targets("ANALYZE TABLE t"), vec![t("t")]);
    }

    #[test]
    fn mysql_specific_write_syntax_keeps_precise_targets() {
        for (sql, want) in [
            ("INSERT LOW_PRIORITY INTO t VALUES (1)", vec![t("t")]),
            ("INSERT HIGH_PRIORITY IGNORE t (a) VALUES (1)", vec![t("t")]),
            ("INSERT INTO t PARTITION (p0) VALUES (1)", vec![t("t")]),
            (
                "INSERT INTO t VALUES (1) AS new ON DUPLICATE KEY UPDATE a = new.a",
                vec![t("t")],
            ),
            ("REPLACE INTO t SET a = 1", vec![t("t")]),
            (
                "DELETE LOW_PRIORITY QUICK IGNORE FROM t WHERE a = 1 ORDER BY b LIMIT 10",
                vec![t("t")],
            ),
            ("UPDATE t SET a = 1 ORDER BY b LIMIT 1", vec![t("t")]),
            ("UPDATE IGNORE t SET a = 1", vec![t("t")]),
            (
                "DROP TABLE IF EXISTS t1, t2 CASCADE",
                vec![t("t1"), t("t2")],
            ),
            (
                "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY AUTO_INCREMENT, KEY k (id)) \
                 ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
                vec![t("t")],
            ),
            (
                "ALTER TABLE t ADD INDEX i (a), ALGORITHM=INPLACE, LOCK=NONE",
                vec![t("t")],
            ),
            ("ALTER TABLE db.t ENGINE=InnoDB", vec![t("db.t")]),
            ("LOAD INDEX INTO CACHE t", vec![]),
        ] {
            assert_eq!(targets(sql), want, "{sql}");
        }
    }

    #[test]
    fn oversized_statements() {
        let rows = vec!["(1, 'abc', NOW(), CONCAT('a', 'b'))"; 20_000].join(", ");
        let bulk = format!("INSERT IGNORE INTO db.`Big` (a, b, c, d) VALUES {rows}");
        assert!(bulk.len() > MAX_PARSE_BYTES);
        assert_eq!(targets(&bulk), vec![t("db.big")]);
        let bulk = format!("INSERT INTO t VALUES {rows}, (my_func())");
        assert_eq!(write(&bulk).targets, WriteTargets::Unknown);
        let ids = vec!["1"; 200_000].join(",");
        let bulk = format!("UPDATE t SET a = 1 WHERE id IN ({ids})");
        assert_eq!(targets(&bulk), vec![t("t")]);
        let bulk = format!("UPDATE t SET a = my_func() WHERE id IN ({ids})");
        assert_eq!(write(&bulk).targets, WriteTargets::Unknown);
        let big_read = format!(
            "SELECT a FROM t WHERE id IN ({})",
            vec!["1"; 200_000].join(",")
        );
        assert_eq!(read(&big_read).verdict, Err(NotCached::Unparsable));
    }

    #[test]
    fn prepared_statement_placeholders() {
        assert_eq!(
            tables("SELECT c FROM sbtest1 WHERE id = ?"),
            vec![t("sbtest1")]
        );
        assert_eq!(targets("UPDATE t SET a = ? WHERE id = ?"), vec![t("t")]);
    }

    #[test]
    fn routine_and_trigger_ddl_sqlparser_does_not_parse() {
        let w = write(
            "CREATE DEFINER=`root`@`localhost` TRIGGER tr AFTER UPDATE ON db.orders \
             FOR EACH ROW BEGIN UPDATE stats SET n = n + 1; END",
        );
        assert!(w.ddl);
        assert_eq!(w.targets, WriteTargets::Tables(vec![t("db.orders")]));
        // The `;` inside BEGIN … END looks like a second statement to the scan, so this is
        // conservatively a write to unknown tables; still DDL.
        let w = write("CREATE PROCEDURE p() BEGIN SELECT 1; END");
        assert!(w.ddl && w.implicit_commit);
        let w = write("CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC RETURN x + 1");
        assert_eq!(w.targets, WriteTargets::Tables(vec![]));
        let w = write("CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO DELETE FROM t");
        assert_eq!(w.targets, WriteTargets::Tables(vec![]));
    }

    #[test]
    fn grants_and_maintenance() {
        let w = write("GRANT SELECT ON db.* TO 'u'@'%'");
        assert_eq!(w.targets, WriteTargets::Tables(vec![]));
        assert!(w.implicit_commit && !w.ddl);
        let w = write("REVOKE SELECT ON db.* FROM 'u'@'%'");
        assert_eq!(w.targets, WriteTargets::Tables(vec![]));
        assert_eq!(targets("OPTIMIZE TABLE t, db.u"), vec![t("t"), t("db.u")]);
        assert_eq!(targets("REPAIR NO_WRITE_TO_BINLOG TABLE t"), vec![t("t")]);
        assert_eq!(targets("ANALYZE LOCAL TABLE t"), vec![t("t")]);
        assert_eq!(write("CALL p(1)").targets, WriteTargets::Unknown);
        assert_eq!(
            write("IMPORT TABLE FROM '/x.sdi'").targets,
            WriteTargets::Unknown
        );
        assert_eq!(write("DO 1 + 1").targets, WriteTargets::Tables(vec![]));
        assert_eq!(write("DO my_proc_func()").targets, WriteTargets::Unknown);
        assert_eq!(write("ALTER TABLE").targets, WriteTargets::Unknown);
    }

    #[test]
    fn multi_statement_writes_merge() {
        let mut got = targets("UPDATE a SET x = 1; DELETE FROM b");
        got.sort();
        assert_eq!(got, vec![t("a"), t("b")]);
        assert_eq!(targets("SELECT 1 FROM a; UPDATE b SET x = 1"), vec![t("b")]);
    }

    #[test]
    fn unparsed_multi_statements_are_conservative() {
        let r = read("SELECT a FROM t LOCK IN SHARE MODE; UPDATE u SET a = 1");
        assert_eq!(r.verdict, Err(NotCached::MultiStatement));
        assert!(r.may_write);
        let w = write("LOAD DATA INFILE 'x' INTO TABLE t; DELETE FROM u");
        assert_eq!(w.targets, WriteTargets::Unknown);
        let w = write("OPTIMIZE TABLE t; DROP TABLE u");
        assert_eq!(w.targets, WriteTargets::Unknown);
    }

    #[test]
    fn set_statement_for_runs_the_inner_statement() {
        assert_eq!(
            targets("SET STATEMENT max_statement_time = 1 FOR UPDATE t SET a = 1"),
            vec![t("t")]
        );
        assert_eq!(
            tables("SET STATEMENT max_statement_time = 1 FOR SELECT a FROM t"),
            vec![t("t")]
        );
    }

    #[test]
    fn other_statements() {
        assert_eq!(analyze("SHOW TABLES"), Analysis::Other);
        assert_eq!(analyze("BEGIN"), Analysis::Other);
        assert_eq!(analyze("SET NAMES utf8mb4"), Analysis::Other);
        assert_eq!(analyze(""), Analysis::Other);
        assert_eq!(analyze("USE db"), Analysis::Other);
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            "\u{0}\u{1}'",
            "SELECT ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1",
            "WITH",
            "SELECT * FROM",
            "DELETE",
            "UPDATE",
            "LOAD DATA",
            "TABLE",
            "SET STATEMENT",
            "/*!",
            "SELECT 'é' FROM `ü`",
        ] {
            let _ = analyze(s);
        }
        let deep = format!("SELECT {}1{} FROM t", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(read(&deep).verdict, Err(NotCached::Unparsable));
    }

    /// Read under a single-byte client character set, `--` and 0xa0 open a comment and
    /// the call after the line runs: the analysis keeps it (the default reading hides it in
    /// a string).
    #[test]
    fn a_single_byte_comment_keeps_the_code_it_uncovers() {
        let sql = "UPDATE t1 SET a = 1 --\u{fffd}'\n + f(3) -- '\n";
        // (A latin1 0xa0 reaches the analysis as U+FFFD: the text is read lossily.)
        let default = analyze_reading(sql);
        assert!(
            matches!(&default, Analysis::Write(w) if matches!(w.targets, WriteTargets::Tables(_))),
            "the default reading names only t1: {default:?}"
        );
        let both = analyze(sql);
        assert!(
            matches!(&both, Analysis::Write(w) if matches!(w.targets, WriteTargets::Unknown)),
            "read both ways, it may write anything (f runs): {both:?}"
        );
    }
}
