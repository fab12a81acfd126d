//! Policy: what a statement is for the cache (a cacheable read, a writer of named tables, or
//! an unknown that must be treated as a writer).
//!
//! The rule is an allow-list: the scan ([`StatementKind`]) names a statement anything but a
//! write only when its first keywords are a known shape, and every unrecognised statement is a
//! [`StatementKind::Write`] whose tables the analysis names or cannot name (then it invalidates as
//! `invalidation.unknown_write` says, counted as a conservative invalidation). This module
//! decides the rest: whether a statement of a known non-writing shape still writes, because
//! it runs code qcache cannot see into.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::analysis::{self, SetInfo, StatementKind, TableRef, WriteInfo};
use crate::policy::stored_code::Temporaries;

/// Why a statement qcache relays without analysing it as a write still counts as a write to
/// tables it cannot name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnknownWrite {
    /// Calls a stored function or UDF, or advances a sequence: `SHOW TABLES WHERE f(…)`,
    /// `EXPLAIN` of a subquery the optimizer evaluates, MariaDB `ANALYZE SELECT f()`,
    /// `HANDLER … READ … (f())`, `SET x = f()`.
    StoredCode,
    /// `XA COMMIT` / `XA ROLLBACK`: may end a prepared XA transaction another session (or a
    /// session that is gone) wrote in, whose tables this session never saw.
    ForeignTransaction,
}

impl UnknownWrite {
    /// A stable label for metrics and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            UnknownWrite::StoredCode => "stored_code",
            UnknownWrite::ForeignTransaction => "xa_end",
        }
    }
}

/// Whether a statement of `kind` that qcache relays as it is (not a read it plans, not a
/// write it analyses, not CALL/EXECUTE, which invalidate by `invalidation.call`) still
/// writes tables it cannot name. `sql` is the statement as the server reads it
/// ([`analysis::server_text`]).
///
/// Not on the hit path: only statements of these kinds, which are never served from the
/// cache, pay for the token scan.
pub fn relayed_write(kind: StatementKind, sql: &[u8]) -> Option<UnknownWrite> {
    match kind {
        StatementKind::Show
        | StatementKind::Other
        | StatementKind::Use
        | StatementKind::Flush
        | StatementKind::Reset
        | StatementKind::Begin => runs_stored_code(sql).then_some(UnknownWrite::StoredCode),
        StatementKind::Commit | StatementKind::Rollback => {
            analysis::first_keyword_is(&analysis::statement_body(sql), "XA")
                .then_some(UnknownWrite::ForeignTransaction)
        }
        // Set: see [`set_writes`]. Select, Write, Call, Execute: planned by their own paths.
        // Empty: the server runs nothing.
        StatementKind::Set
        | StatementKind::Select
        | StatementKind::Write
        | StatementKind::Call
        | StatementKind::Execute
        | StatementKind::Empty => None,
    }
}

/// Whether a SET runs code that may write: a stored function, UDF or sequence in a value.
/// When qcache could not read the SET at all (`info` None), the statement's calls decide.
pub fn set_writes(info: Option<&SetInfo>, sql: &str) -> Option<UnknownWrite> {
    let writes = match info {
        Some(i) => i.may_write,
        None => analysis::calls_unknown_code(sql),
    };
    writes.then_some(UnknownWrite::StoredCode)
}

/// How much qcache knows of a write's outcome, for following temporary tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered OK.
    Done,
    /// The server refused it: nothing changed.
    Failed,
    /// One statement of several in a query, which may or may not have run.
    Maybe,
}

/// Follows the session's temporary tables (qualified, lower-cased names, as `qualify`
/// gives them) through one write. Errs on the side of "still temporary": a name that may
/// be a temporary table is never cached, so it is added when it may have been created or
/// renamed to, and removed only when the drop or rename surely ran.
pub fn track_temporary(
    temps: &mut HashSet<(String, String)>,
    w: &WriteInfo,
    outcome: Outcome,
    qualify: impl Fn(&TableRef) -> Option<(String, String)>,
) {
    if outcome == Outcome::Failed {
        return;
    }
    for t in &w.temp_created {
        if let Some(q) = qualify(t) {
            temps.insert(q);
        }
    }
    // In statement order: `RENAME TABLE tmp TO x, x TO y` moves it twice.
    for (from, to) in &w.renamed {
        let (Some(f), Some(t)) = (qualify(from), qualify(to)) else {
            continue;
        };
        if temps.contains(&f) {
            if outcome == Outcome::Done {
                temps.remove(&f);
            }
            temps.insert(t);
        }
    }
    if outcome == Outcome::Done {
        for t in &w.temp_dropped {
            if let Some(q) = qualify(t) {
                temps.remove(&q);
            }
        }
    }
}

/// What the source of `CREATE TEMPORARY TABLE … LIKE src` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LikeSource {
    /// A table holding its own rows (a temporary one, or a base table the catalog knows
    /// as such).
    OwnRows,
    /// A temporary table whose rows are other tables'.
    Elsewhere,
    /// Not known (catalog not loaded, a DDL pending, a MERGE / FEDERATED / … base table,
    /// an unreadable name).
    Unknown,
}

/// Whether a CREATE or ALTER of a temporary table makes it one whose rows are other
/// tables': its options say so (`analysis::WriteInfo::other_rows`: MERGE's `UNION`, a
/// `CONNECTION`, an engine not known to hold its own rows), or it copies (`LIKE`) a table
/// that is, or may be, one (a copy of a MERGE table unions the same tables). A write to
/// such a temporary table writes those tables, which the statement does not name: it is a
/// write to unknown tables (checked against MariaDB 10.11: `INSERT INTO m` of a
/// temporary `ENGINE=MERGE UNION=(t1) INSERT_METHOD=LAST` table adds the row to base
/// table `t1`).
pub fn temporary_rows_elsewhere(options: bool, like: Option<LikeSource>) -> bool {
    options || matches!(like, Some(LikeSource::Elsewhere | LikeSource::Unknown))
}

/// Whether code qcache does not read as statements — a CALL, a SQL-level EXECUTE or
/// EXECUTE IMMEDIATE, a compound statement — may have created a temporary table, whose
/// engine qcache then does not know (a temporary MERGE table over base tables makes later
/// writes to it writes to those: [`temporary_rows_elsewhere`]). `text`: the statement as
/// the server reads it; `procedures_may`: a procedure it may call may create one
/// (`Catalog::procedures_may_create_temporaries`). True when the text says TEMPORARY, when
/// it may call a procedure that may (a CALL, or any compound statement: under
/// sql_mode=ORACLE a bare name calls one), or when it executes text qcache does not see
/// (`EXECUTE s`, `EXECUTE IMMEDIATE @v`).
pub fn unseen_code_may_create_temporaries(text: &[u8], procedures_may: bool) -> bool {
    if analysis::contains_ci(text, b"temporary") {
        return true;
    }
    let kind = analysis::scan(text).kind;
    if procedures_may
        && (kind == StatementKind::Call
            || analysis::is_compound(text)
            || analysis::contains_ci(text, b"call"))
    {
        return true;
    }
    if kind == StatementKind::Execute {
        // Only `EXECUTE IMMEDIATE '…'` shows what it runs (and it said no TEMPORARY).
        let mut toks = crate::analysis::lexer::Lexer::new(text);
        let (_, second, third) = (toks.next(), toks.next(), toks.next());
        let literal = second.is_some_and(|t| t.is_kw(text, "IMMEDIATE"))
            && third.is_some_and(|t| t.tok == crate::analysis::lexer::Tok::Str);
        return !literal;
    }
    false
}

/// What qcache knows of the session's temporary tables once stored code ran in it (a
/// function, a trigger, a view that calls one), given the temporary tables the catalog says
/// stored functions and triggers may create (`Catalog::code_temporaries`; None before it is
/// loaded). A temporary table shadows the base table of its name for the rest of the
/// session, and no statement text shows one that stored code created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterStoredCode {
    /// These may exist now: followed as if the session had created them (none, usually).
    Named(Vec<(String, String)>),
    /// Some qcache cannot name may exist: the session is no longer followed (until a
    /// reset).
    Lost,
    /// Not known yet: no read is served or stored until the catalog can say (asked again
    /// before each read).
    Unknown,
}

pub fn after_stored_code(code: Option<Temporaries>) -> AfterStoredCode {
    match code {
        Some(Temporaries::None) => AfterStoredCode::Named(Vec::new()),
        Some(Temporaries::Named(names)) => AfterStoredCode::Named(names),
        Some(Temporaries::Any) => AfterStoredCode::Lost,
        None => AfterStoredCode::Unknown,
    }
}

/// Whether a DDL statement runs stored code: only `CREATE TABLE … SELECT` whose query calls
/// a stored function; a CREATE of a routine, trigger, view or event defines code, it does
/// not run it, whatever its body calls.
pub fn ddl_runs_code(sql: &[u8]) -> bool {
    if !analysis::creates_table(sql) {
        return false;
    }
    // The query only: `x (a INT, …)` before it is no call (no column definition may hold
    // a subquery, so the first SELECT starts it; one inside a string only costs a plan).
    let Some(at) = sql
        .windows(6)
        .position(|w| w.eq_ignore_ascii_case(b"select"))
    else {
        return false;
    };
    runs_stored_code(&sql[at..])
}

fn runs_stored_code(sql: &[u8]) -> bool {
    // Only a statement with a parenthesis can call anything.
    if !sql.contains(&b'(') {
        return false;
    }
    let text: Cow<'_, str> = String::from_utf8_lossy(sql);
    analysis::calls_unknown_code(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per rule of [`unseen_code_may_create_temporaries`]: (statement, a procedure
    /// may create one, may have created one).
    #[test]
    fn unseen_code_that_may_create_temporaries() {
        let rows = [
            (
                "EXECUTE IMMEDIATE 'CREATE TEMPORARY TABLE m (i INT)'",
                false,
                true,
            ),
            ("EXECUTE IMMEDIATE 'SELECT 1'", false, false),
            ("EXECUTE IMMEDIATE 'CALL p()'", true, true),
            ("EXECUTE IMMEDIATE @q", false, true),
            ("EXECUTE s", false, true),
            ("CALL p()", false, false),
            ("CALL p()", true, true),
            (
                "BEGIN NOT ATOMIC CREATE temporary TABLE m (i INT); END",
                false,
                true,
            ),
            ("BEGIN NOT ATOMIC SELECT 1; END", false, false),
            ("BEGIN p; END", true, true),
        ];
        for (sql, procedures, want) in rows {
            assert_eq!(
                unseen_code_may_create_temporaries(sql.as_bytes(), procedures),
                want,
                "{sql} {procedures}"
            );
        }
    }

    /// One row per rule of [`temporary_rows_elsewhere`]: (options say so, LIKE source,
    /// elsewhere).
    #[test]
    fn temporary_tables_whose_rows_are_elsewhere() {
        let rows = [
            (true, None, true),
            (false, None, false),
            (false, Some(LikeSource::OwnRows), false),
            (false, Some(LikeSource::Elsewhere), true),
            (false, Some(LikeSource::Unknown), true),
            (true, Some(LikeSource::OwnRows), true),
        ];
        for (options, like, want) in rows {
            assert_eq!(
                temporary_rows_elsewhere(options, like),
                want,
                "{options} {like:?}"
            );
        }
    }
    use crate::analysis::{analyze, scan, server_text, Analysis, ServerVersion, WriteTargets};

    /// What the session does with a statement, as far as tables go.
    #[derive(Debug, PartialEq, Eq)]
    enum Effect {
        /// A read: planned for the cache (whether it is cacheable is the analysis' verdict).
        Read,
        /// Writes tables the analysis names (possibly none).
        Named,
        /// Writes tables nobody can name: conservative invalidation.
        Unknown,
        /// Changes no table.
        Nothing,
        /// CALL / EXECUTE: `invalidation.call`.
        Routine,
    }

    const MARIA: ServerVersion = ServerVersion {
        id: 101119,
        mariadb: true,
    };

    fn effect(sql: &str) -> Effect {
        let text = server_text(sql.as_bytes(), MARIA);
        let kind = scan(&text).kind;
        let text = String::from_utf8_lossy(&text).into_owned();
        match kind {
            StatementKind::Select => match analyze(&text) {
                Analysis::Read(r) if r.may_write => Effect::Unknown,
                Analysis::Read(_) => Effect::Read,
                Analysis::Write(w) if w.targets == WriteTargets::Unknown => Effect::Unknown,
                Analysis::Write(_) => Effect::Named,
                Analysis::Other => Effect::Unknown,
            },
            StatementKind::Write => match analyze(&text) {
                Analysis::Write(w) if w.targets == WriteTargets::Unknown => Effect::Unknown,
                Analysis::Write(_) => Effect::Named,
                // The session plans an unknown write for anything else.
                _ => Effect::Unknown,
            },
            StatementKind::Call | StatementKind::Execute => Effect::Routine,
            StatementKind::Set => match set_writes(analysis::analyze_set(&text).as_ref(), &text) {
                Some(_) => Effect::Unknown,
                None => Effect::Nothing,
            },
            k => match relayed_write(k, text.as_bytes()) {
                Some(_) => Effect::Unknown,
                None => Effect::Nothing,
            },
        }
    }

    /// One row per rule: a statement reaches the server as a read only when recognised as
    /// one; everything else names its tables, or is an unknown writer, or is on the closed
    /// list of shapes that change nothing.
    #[test]
    fn which_ddl_runs_stored_code() {
        let rows = [
            ("CREATE TABLE x AS SELECT mk() AS a", true),
            ("CREATE OR REPLACE TEMPORARY TABLE x SELECT mk() AS a", true),
            ("/* c */ CREATE TABLE x (a INT) SELECT f(1) AS a", true),
            ("CREATE TABLE x AS SELECT abs(1) AS a", false),
            ("CREATE TABLE x (a INT DEFAULT (abs(1)))", false),
            ("CREATE FUNCTION mk() RETURNS INT RETURN g(1)", false),
            (
                "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW SET @x = mk()",
                false,
            ),
            ("CREATE VIEW v AS SELECT mk() AS a", false),
            ("ALTER TABLE t ADD COLUMN a INT", false),
            ("CREATE TABLE x (a INT, b INT) SELECT 1 AS a", false),
            ("CREATE TABLE x (a INT, b INT) SELECT g(1) AS a", true),
        ];
        for (sql, want) in rows {
            assert_eq!(ddl_runs_code(sql.as_bytes()), want, "{sql}");
        }
    }

    #[test]
    fn after_stored_code_one_row_per_answer() {
        let t = vec![("db".to_string(), "t".to_string())];
        let rows = [
            (Some(Temporaries::None), AfterStoredCode::Named(Vec::new())),
            (
                Some(Temporaries::Named(t.clone())),
                AfterStoredCode::Named(t),
            ),
            (Some(Temporaries::Any), AfterStoredCode::Lost),
            (None, AfterStoredCode::Unknown),
        ];
        for (catalog, want) in rows {
            assert_eq!(after_stored_code(catalog.clone()), want, "{catalog:?}");
        }
    }

    #[test]
    fn every_statement_is_a_read_a_writer_or_known_harmless() {
        use Effect::*;
        let rows: &[(&str, Effect)] = &[
            // Reads.
            ("SELECT a FROM t", Read),
            ("  (select a from t)", Read),
            ("/* c */ -- x\n SELECT a FROM t", Read),
            ("WITH c AS (SELECT 1) SELECT * FROM c, t", Read),
            ("SELECT f(a) FROM t", Unknown),
            ("SELECT NEXTVAL(s)", Unknown),
            ("SELECT SETVAL(s, 10)", Unknown),
            ("SELECT NEXT VALUE FOR s", Unknown),
            // Versioned comments, as MariaDB 10.11 reads them.
            ("/*!999999 SELECT */ UPDATE t SET a = 1", Named),
            ("/*M!999999 SELECT */ DELETE FROM t", Named),
            ("/*!50700 SELECT */ INSERT INTO t VALUES (1)", Named),
            ("/*!100000 SELECT a FROM t */", Read),
            ("/*!999999 UPDATE t SET a = 1 */", Nothing),
            // MariaDB ANALYZE runs the statement; EXPLAIN does not, MySQL's EXPLAIN ANALYZE does.
            ("ANALYZE FORMAT=JSON UPDATE t SET a = 1", Named),
            ("analyze format = json delete from t", Named),
            ("ANALYZE INSERT INTO t VALUES (1)", Named),
            ("ANALYZE SELECT a FROM t", Nothing),
            ("ANALYZE SELECT f(a) FROM t", Unknown),
            ("ANALYZE TABLE t", Named),
            ("EXPLAIN UPDATE t SET a = 1", Nothing),
            ("EXPLAIN SELECT a FROM t WHERE b = (SELECT f())", Unknown),
            ("EXPLAIN ANALYZE UPDATE t SET a = 1", Named),
            ("EXPLAIN FORMAT=JSON SELECT a FROM t", Nothing),
            ("DESCRIBE t", Nothing),
            ("SHOW TABLES", Nothing),
            ("SHOW TABLES WHERE f(Tables_in_db)", Unknown),
            ("HELP 'select'", Nothing),
            // Writes with named tables.
            ("insert into t values (1) returning a", Named),
            ("DELETE FROM t WHERE a = 1 RETURNING a", Named),
            ("REPLACE INTO t SELECT * FROM s", Named),
            ("CREATE TABLE n AS SELECT * FROM t", Named),
            ("CREATE OR REPLACE TABLE n (a INT)", Named),
            ("WITH c AS (SELECT 1) DELETE FROM t", Named),
            (
                "SET STATEMENT max_statement_time = 1 FOR UPDATE t SET a = 1",
                Named,
            ),
            ("LOAD XML INFILE 'x' INTO TABLE t", Named),
            ("OPTIMIZE TABLE t", Named),
            ("TRUNCATE t", Named),
            ("RENAME TABLE a TO b, c TO a", Named),
            ("ALTER TABLE t RENAME TO u", Named),
            ("ALTER TABLE t EXCHANGE PARTITION p WITH TABLE e", Named),
            ("DROP DATABASE d", Named),
            ("DROP SCHEMA d", Named),
            (
                "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
                Named,
            ),
            ("DO 1", Named),
            // Writes nobody can name.
            ("DO f()", Unknown),
            ("BEGIN NOT ATOMIC UPDATE t SET a = 1; END", Unknown),
            ("XA COMMIT 'x'", Unknown),
            ("XA ROLLBACK 'x'", Unknown),
            ("START SLAVE", Unknown),
            ("INSTALL SONAME 'ha_x'", Unknown),
            ("IF 1 THEN UPDATE t SET a = 1; END IF", Unknown),
            ("SET @x = f()", Unknown),
            ("HANDLER t READ a = (f())", Unknown),
            ("FROBNICATE t", Unknown),
            ("CALL p()", Routine),
            ("EXECUTE s", Routine),
            // Known shapes that change no table.
            ("PREPARE s FROM 'UPDATE t SET a = 1'", Nothing),
            ("DEALLOCATE PREPARE s", Nothing),
            ("LOCK TABLES t WRITE", Nothing),
            ("UNLOCK TABLES", Nothing),
            ("HANDLER t OPEN", Nothing),
            ("HANDLER t READ FIRST", Nothing),
            ("CHECKSUM TABLE t", Nothing),
            ("CHECK TABLE t", Nothing),
            ("SAVEPOINT s", Nothing),
            ("RELEASE SAVEPOINT s", Nothing),
            ("ROLLBACK TO SAVEPOINT s", Nothing),
            ("XA END 'x'", Nothing),
            ("XA PREPARE 'x'", Nothing),
            ("XA START 'x'", Nothing),
            ("BEGIN", Nothing),
            ("COMMIT", Nothing),
            ("ROLLBACK", Nothing),
            ("USE d", Nothing),
            ("SET NAMES utf8mb4", Nothing),
            ("FLUSH TABLES", Nothing),
            ("KILL QUERY 5", Nothing),
            ("GET DIAGNOSTICS @n = NUMBER", Nothing),
            ("", Nothing),
        ];
        let mut wrong = Vec::new();
        for (sql, want) in rows {
            let got = effect(sql);
            if got != *want {
                wrong.push(format!("{sql:?}: want {want:?}, got {got:?}"));
            }
        }
        assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    }

    /// One row per way a temporary table comes to exist or gets its name.
    #[test]
    fn temporary_tables_are_followed_however_they_are_named() {
        use Outcome::*;
        let q = |t: &TableRef| Some((t.schema.clone().unwrap_or("d".into()), t.name.clone()));
        let name = |n: &str| ("d".to_string(), n.to_string());
        let write = |sql: &str| match analyze(sql) {
            Analysis::Write(w) => w,
            other => panic!("{sql}: {other:?}"),
        };
        // (statements in order with their outcome, temporary names after)
        type Steps<'a> = &'a [(&'a str, Outcome)];
        let rows: &[(Steps, &[&str])] = &[
            (&[("CREATE TEMPORARY TABLE tmp (a INT)", Done)], &["tmp"]),
            (
                &[("CREATE TEMPORARY TABLE tmp SELECT * FROM t", Done)],
                &["tmp"],
            ),
            (
                &[("CREATE TEMPORARY TABLE tmp AS SELECT * FROM t", Done)],
                &["tmp"],
            ),
            (
                &[("CREATE TEMPORARY TABLE IF NOT EXISTS tmp LIKE t", Done)],
                &["tmp"],
            ),
            (
                &[("create or replace temporary table tmp (a int)", Done)],
                &["tmp"],
            ),
            (&[("CREATE TEMPORARY TABLE tmp (a INT)", Failed)], &[]),
            (&[("CREATE TEMPORARY TABLE tmp (a INT)", Maybe)], &["tmp"]),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("ALTER TABLE tmp RENAME TO t", Done),
                ],
                &["t"],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("ALTER TABLE tmp RENAME t", Done),
                ],
                &["t"],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("RENAME TABLE tmp TO t", Done),
                ],
                &["t"],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("RENAME TABLE tmp TO x, x TO t", Done),
                ],
                &["t"],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("RENAME TABLE tmp TO t", Maybe),
                ],
                &["t", "tmp"],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("RENAME TABLE tmp TO t", Failed),
                ],
                &["tmp"],
            ),
            (&[("RENAME TABLE a TO b", Done)], &[]),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("DROP TABLE tmp", Done),
                ],
                &[],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("DROP TABLE tmp", Maybe),
                ],
                &["tmp"],
            ),
            (
                &[
                    ("CREATE TEMPORARY TABLE tmp (a INT)", Done),
                    ("ALTER TABLE tmp ADD b INT, RENAME TO t", Done),
                ],
                &["t"],
            ),
        ];
        for (steps, want) in rows {
            let mut temps = HashSet::new();
            for (sql, outcome) in *steps {
                track_temporary(&mut temps, &write(sql), *outcome, q);
            }
            let mut got: Vec<_> = temps.into_iter().collect();
            got.sort();
            let want: Vec<_> = want.iter().map(|n| name(n)).collect();
            assert_eq!(got, want, "{steps:?}");
        }
    }

    #[test]
    fn labels() {
        for w in [UnknownWrite::StoredCode, UnknownWrite::ForeignTransaction] {
            assert!(!w.as_str().is_empty());
        }
    }

    /// Which relayed kinds may write through stored code, and which end a foreign XA
    /// transaction: one row per kind.
    #[test]
    fn relayed_kinds_and_what_they_may_write() {
        use StatementKind as K;
        let f = "SHOW TABLES WHERE my_func(1)";
        let cases: &[(K, &str, Option<UnknownWrite>)] = &[
            (K::Show, f, Some(UnknownWrite::StoredCode)),
            (K::Show, "SHOW TABLES", None),
            (
                K::Other,
                "HANDLER t READ a = (my_func())",
                Some(UnknownWrite::StoredCode),
            ),
            (
                K::Commit,
                "XA COMMIT 'x'",
                Some(UnknownWrite::ForeignTransaction),
            ),
            (
                K::Rollback,
                "xa rollback 'x'",
                Some(UnknownWrite::ForeignTransaction),
            ),
            (K::Commit, "COMMIT", None),
            // Planned by their own paths, or nothing runs.
            (K::Select, f, None),
            (K::Write, f, None),
            (K::Call, f, None),
            (K::Execute, f, None),
            (K::Set, f, None),
            (K::Empty, "", None),
        ];
        for (kind, sql, want) in cases {
            assert_eq!(
                relayed_write(*kind, sql.as_bytes()),
                *want,
                "{kind:?} {sql}"
            );
        }
    }

    /// A SET writes when its analysis says a value may; unread, its calls decide.
    #[test]
    fn sets_that_may_write() {
        let read = |sql: &str| crate::analysis::analyze_set(sql);
        for (sql, want) in [
            ("SET @a = my_func(1)", true),
            ("SET @a = NEXTVAL(s)", true),
            ("SET @a = 1, @b = NOW()", false),
            ("SET sql_mode = 'ANSI'", false),
        ] {
            let info = read(sql);
            assert_eq!(set_writes(info.as_ref(), sql).is_some(), want, "{sql}");
            assert_eq!(set_writes(None, sql).is_some(), want, "{sql} unread");
        }
    }

    /// The labels metrics and logs use.
    #[test]
    fn unknown_write_labels() {
        assert_eq!(UnknownWrite::StoredCode.as_str(), "stored_code");
        assert_eq!(UnknownWrite::ForeignTransaction.as_str(), "xa_end");
    }
}
