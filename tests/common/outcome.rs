//! The one outcome type and the one comparison of every differential test (the scenario
//! files of `tests/differential.rs`, the step lists of `steps.rs`): what a statement
//! answered, as text, and how two runs' answers are compared.
//!
//! A statement's outcome holds, for each result set, the column metadata and rows, then the
//! OK's affected rows, last insert id, warning count and info; when the server reported
//! warnings, the rows of a `SHOW WARNINGS` sent right after it on the same connection (a
//! diagnostic statement: it leaves the diagnostics area as it was, so the next statement sees
//! what it would have seen); the status flags of the response's last OK packet a client can
//! act on ([`status_text`]); or the error's code, state and message.

use std::fmt::Write as _;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

/// What one statement (or connection attempt) answered, as text.
pub type Outcome = String;

pub fn error_text(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => {
            format!("ERROR {} ({}): {}", s.code, s.state, s.message)
        }
        other => format!("CLIENT ERROR: {other}"),
    }
}

fn value_text(v: &Option<Value>) -> String {
    match v {
        None | Some(Value::NULL) => "NULL".into(),
        Some(Value::Bytes(b)) => match std::str::from_utf8(b) {
            Ok(s) => format!("{s:?}"),
            Err(_) => format!(
                "0x{}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            ),
        },
        Some(other) => format!("{other:?}"),
    }
}

fn columns_text(cols: &[mysql_async::Column]) -> String {
    let mut s = String::new();
    for c in cols {
        let _ = write!(
            s,
            "[{} org={} table={} org_table={} schema={} type={:?} flags={:?} cs={} dec={} len={}] ",
            c.name_str(),
            c.org_name_str(),
            c.table_str(),
            c.org_table_str(),
            c.schema_str(),
            c.column_type(),
            c.flags(),
            c.character_set(),
            c.decimals(),
            c.column_length()
        );
    }
    s
}

fn rows_text(rows: Vec<Row>) -> String {
    let mut s = String::new();
    for r in rows {
        let vals: Vec<String> = r.unwrap_raw().iter().map(value_text).collect();
        let _ = writeln!(s, "  ({})", vals.join(", "));
    }
    s
}

/// Every result set of a response, then its OK's counters; an error ends the text. Also
/// returns whether any OK reported warnings, and whether the response ended in an OK.
async fn results_text<P: mysql_async::prelude::Protocol>(
    mut res: mysql_async::QueryResult<'_, '_, P>,
) -> (String, bool, bool) {
    let mut out = String::new();
    let mut warned = false;
    loop {
        let cols = res.columns();
        let rows: Vec<Row> = match res.collect().await {
            Ok(rows) => rows,
            Err(e) => {
                out.push_str(&error_text(&e));
                return (out, warned, false);
            }
        };
        if let Some(cols) = cols.filter(|c| !c.is_empty()) {
            let _ = writeln!(out, "columns: {}", columns_text(&cols));
            out.push_str(&rows_text(rows));
        }
        warned |= res.warnings() > 0;
        let _ = writeln!(
            out,
            "ok: affected={} insert_id={:?} warnings={} info={:?}",
            res.affected_rows(),
            res.last_insert_id(),
            res.warnings(),
            res.info()
        );
        if res.is_empty() {
            return (out, warned, true);
        }
    }
}

/// The warnings' text, when the statement just run had any: `SHOW WARNINGS` on the same
/// connection.
async fn warnings_text(conn: &mut Conn, warned: bool) -> String {
    if !warned {
        return String::new();
    }
    match conn.query::<Row, _>("SHOW WARNINGS").await {
        Ok(rows) => format!("show warnings:\n{}", rows_text(rows)),
        Err(e) => format!("show warnings: {}\n", error_text(&e)),
    }
}

/// The status flags a client can act on from the response's last OK packet: transaction
/// state, autocommit, read-only transaction, a dropped current database, cursors, out
/// parameters, metadata changes, session state changes and the sql_mode flags. Left out:
/// the framing flag (more results), "query was slow" (a timing) and the index-use flags,
/// which follow the optimizer's plan of the moment (a hit replays its fill's, and the two
/// runs' schemas may get different plans: seen in slices/date_ranges.test).
fn status_text(conn: &Conn, ok: bool) -> String {
    use mysql_async::consts::StatusFlags as F;
    let shown = F::SERVER_STATUS_IN_TRANS
        | F::SERVER_STATUS_AUTOCOMMIT
        | F::SERVER_STATUS_IN_TRANS_READONLY
        | F::SERVER_STATUS_DB_DROPPED
        | F::SERVER_STATUS_CURSOR_EXISTS
        | F::SERVER_STATUS_LAST_ROW_SENT
        | F::SERVER_STATUS_METADATA_CHANGED
        | F::SERVER_PS_OUT_PARAMS
        | F::SERVER_STATUS_NO_BACKSLASH_ESCAPES
        | F::SERVER_STATUS_ANSI_QUOTES
        | F::SERVER_SESSION_STATE_CHANGED;
    match conn.last_ok_packet().filter(|_| ok) {
        Some(p) => format!("status: {:?}\n", p.status_flags() & shown),
        None => String::new(),
    }
}

/// A statement through the text protocol (COM_QUERY), as an [`Outcome`].
pub async fn run_text(conn: &mut Conn, sql: &str) -> Outcome {
    let (out, warned, ok) = match conn.query_iter(sql).await {
        Ok(res) => results_text(res).await,
        Err(e) => return error_text(&e),
    };
    out + &status_text(conn, ok) + &warnings_text(conn, warned).await
}

/// [`run_text`] of a statement given as bytes (which need not be UTF-8).
pub async fn run_text_bytes(conn: &mut Conn, sql: &[u8]) -> Outcome {
    let (out, warned, ok) = match conn.query_iter(sql).await {
        Ok(res) => results_text(res).await,
        Err(e) => return error_text(&e),
    };
    out + &status_text(conn, ok) + &warnings_text(conn, warned).await
}

/// A statement through the binary protocol (prepare, execute with no parameters, close), as
/// an [`Outcome`]; its warnings are read before the close.
/// Executes a statement prepared earlier (kept open), with no parameters.
pub async fn run_statement(conn: &mut Conn, stmt: &mysql_async::Statement) -> Outcome {
    run_statement_with(conn, stmt, mysql_async::Params::Empty).await
}

/// [`run_statement`] with parameters bound.
pub async fn run_statement_with(
    conn: &mut Conn,
    stmt: &mysql_async::Statement,
    params: mysql_async::Params,
) -> Outcome {
    let (out, warned, ok) = match conn.exec_iter(stmt, params).await {
        Ok(res) => results_text(res).await,
        Err(e) => (error_text(&e), false, false),
    };
    out + &status_text(conn, ok) + &warnings_text(conn, warned).await
}

pub async fn run_prepared(conn: &mut Conn, sql: &str) -> Outcome {
    run_prepared_with(conn, sql, mysql_async::Params::Empty).await
}

/// [`run_prepared`] with parameters bound (typed as the client sends them).
pub async fn run_prepared_with(conn: &mut Conn, sql: &str, params: mysql_async::Params) -> Outcome {
    let stmt = match conn.prep(sql).await {
        Ok(s) => s,
        Err(e) => return format!("prepare: {}", error_text(&e)),
    };
    let (out, warned, ok) = match conn.exec_iter(&stmt, params).await {
        Ok(res) => results_text(res).await,
        Err(e) => (error_text(&e), false, false),
    };
    let out = out + &status_text(conn, ok) + &warnings_text(conn, warned).await;
    let _ = conn.close(stmt).await;
    out
}

/// Compares two runs' outcomes, step by step, labelled by `label` (a line number, a step):
/// the first difference, or a difference in how many outcomes each run produced (never a
/// silent `zip` over the shorter one).
pub fn compare<L: std::fmt::Display>(
    want: &[(L, Outcome)],
    got: &[(L, Outcome)],
) -> Result<(), String> {
    for ((label, w), (_, g)) in want.iter().zip(got) {
        if w != g {
            return Err(format!(
                "at {label}\n-- directly:\n{w}\n-- through qcache:\n{g}"
            ));
        }
    }
    if want.len() != got.len() {
        let next = |o: &[(L, Outcome)]| match o.get(want.len().min(got.len())) {
            Some((l, o)) => format!("{l}: {o}"),
            None => "(nothing)".into(),
        };
        return Err(format!(
            "directly {} outcomes, through qcache {}; the first unmatched: directly {}, through qcache {}",
            want.len(),
            got.len(),
            next(want),
            next(got)
        ));
    }
    Ok(())
}
