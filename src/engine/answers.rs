//! What qcache answers of statements about its own state: `SELECT @@query_cache_type`
//! (its variable), and the rows of `SHOW … VARIABLES` and `SHOW … STATUS` whose values are
//! qcache's (`Qcache_*`, the client leg's TLS and compression). The session sends them.

use super::state::SessionState;
use crate::admin::statements;
use crate::analysis::{self, QctAnswer};
use crate::config::QueryCacheType;
use crate::policy::diagnostics;
use crate::protocol::rows::Rewrite;

/// How qcache answers a SELECT of its `query_cache_type`.
pub enum VarAnswer {
    /// The server's result with qcache's values in these columns (MariaDB).
    Relay(Rewrite),
    /// One row of its own, named as the client spelled the variable (MySQL 8.0).
    Own((String, String)),
}

/// The session status rows that describe the connection itself.
pub const CLIENT_LEG_STATUS: [&str; 10] = [
    "compression",
    "ssl_cipher",
    "ssl_cipher_list",
    "ssl_version",
    "ssl_server_not_after",
    "ssl_server_not_before",
    "ssl_default_timeout",
    "ssl_verify_depth",
    "ssl_verify_mode",
    "ssl_sessions_reused",
];

/// A SELECT reading `@@query_cache_type`, qcache's variable: on MariaDB the server's
/// result (its metadata, its other columns) is relayed with qcache's value in each
/// column that is the bare variable, in any spelling (`@@`, `@@SESSION.`, `@@local.`,
/// `@@GLOBAL.` for the configured default), with or without an alias, beside other
/// columns. A read qcache cannot rewrite (in an expression, a WHERE) is None: relayed
/// like any read of a system variable, never cached, with the server's value
/// (docs/design.md says so). MySQL 8.0 has no such variable: qcache answers the bare
/// one-column form alone.
pub fn session_variable(
    st: &SessionState,
    default: impl Fn() -> QueryCacheType,
    stmt: &[u8],
) -> Option<VarAnswer> {
    let value = |global: bool| if global { default() } else { st.qct }.as_str().to_string();
    Some(match analysis::qct_answer(stmt, st.mariadb, value)? {
        QctAnswer::Columns(values) if st.qct_unsure() => {
            // The session's value is the one stored code set on the server (`policy::qct`):
            // its columns stay the server's.
            let Some(analysis::QctRead::Columns(cols)) = analysis::qct_read(stmt) else {
                return None;
            };
            let values: Vec<_> = values
                .into_iter()
                .filter(|(i, _)| cols.iter().any(|(c, global)| c == i && *global))
                .collect();
            if values.is_empty() {
                return None;
            }
            VarAnswer::Relay(Rewrite::Columns(values))
        }
        QctAnswer::Columns(values) => VarAnswer::Relay(Rewrite::Columns(values)),
        QctAnswer::Own(name, value) => VarAnswer::Own((name, value)),
    })
}

/// `SHOW … VARIABLES` (qcache's `query_cache_type`) and `SHOW [GLOBAL|SESSION] STATUS`
/// in any form (`LIKE`, `WHERE`, none): the rows whose values are qcache's. Status rows
/// named `Qcache_*` are qcache's counters (MariaDB's own query cache reports zeros,
/// which is what a mysqld_exporter would scrape); session status adds the client leg's
/// TLS and compression. Only rows the server returns are rewritten: a `WHERE` is the
/// server's to evaluate, so counters MariaDB has no row for appear under `LIKE 'Qcache%'`
/// (answered by qcache alone) and `SHOW QCACHE STATUS`.
pub fn show_values(
    st: &SessionState,
    sql: &[u8],
    default: QueryCacheType,
    own_rows: impl FnOnce() -> Vec<(String, String)>,
    leg: impl FnOnce() -> diagnostics::ClientLeg,
) -> Option<Rewrite> {
    let text = statements::lowercase(sql);
    let words = statements::code_words(&text);
    if let Some(global) = diagnostics::show_variables_scope(&words) {
        if !global && st.qct_unsure() {
            // The server's row: stored code set it there (`policy::qct`).
            return None;
        }
        let qct = if global { default } else { st.qct };
        return Some(Rewrite::Named(vec![(
            "query_cache_type".into(),
            qct.as_str().to_string(),
        )]));
    }
    let session = diagnostics::is_session_status(&words);
    if !session && !matches!(words.as_slice(), ["show", "global", "status", ..]) {
        return None;
    }
    let mut values: Vec<(String, String)> = own_rows()
        .into_iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v))
        .collect();
    if session {
        let leg = leg();
        values.extend(
            CLIENT_LEG_STATUS.iter().filter_map(|n| {
                diagnostics::client_leg_status(n, &leg).map(|v| (n.to_string(), v))
            }),
        );
    }
    Some(Rewrite::Named(values))
}

/// `SHOW [GLOBAL|SESSION] STATUS LIKE 'Qcache%'`: rows qcache answers from its state.
pub fn qcache_status_rows(
    sql: &[u8],
    own_rows: impl FnOnce() -> Vec<(String, String)>,
) -> Option<Vec<(String, String)>> {
    let pattern = statements::status_like_pattern(sql)?;
    let rows = own_rows()
        .into_iter()
        .filter(|(name, _)| statements::like_match(&pattern, &name.to_ascii_lowercase()))
        .collect();
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    fn own() -> Vec<(String, String)> {
        vec![
            ("Qcache_hits".into(), "3".into()),
            ("Qcache_inserts".into(), "1".into()),
        ]
    }

    fn named(rw: Option<Rewrite>) -> Option<Vec<(String, String)>> {
        match rw? {
            Rewrite::Named(v) => Some(v),
            other => panic!("not named: {other:?}"),
        }
    }

    /// SHOW VARIABLES and SHOW STATUS: qcache's rows, the session's or the configured
    /// `query_cache_type`, the client leg for session status only.
    #[test]
    fn show_statements_answer_qcache_rows() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        st.qct = QueryCacheType::Demand;
        let leg = diagnostics::ClientLeg::default();
        let qct = |v: &str| Some(vec![("query_cache_type".to_string(), v.to_string())]);
        type Rows = Option<Vec<(String, String)>>;
        let rows: Vec<(&str, Rows)> = vec![
            ("SHOW VARIABLES LIKE 'query_cache_type'", qct("DEMAND")),
            ("SHOW SESSION VARIABLES", qct("DEMAND")),
            ("SHOW GLOBAL VARIABLES LIKE 'query%'", qct("OFF")),
            ("SELECT 1", None),
            ("SHOW TABLES", None),
        ];
        for (sql, want) in rows {
            let got = show_values(&st, sql.as_bytes(), QueryCacheType::Off, own, || {
                leg.clone()
            });
            assert_eq!(named(got), want, "{sql}");
        }
        let global = named(show_values(
            &st,
            b"SHOW GLOBAL STATUS",
            QueryCacheType::Off,
            own,
            || leg.clone(),
        ))
        .unwrap();
        let lower: Vec<_> = own()
            .into_iter()
            .map(|(n, v)| (n.to_lowercase(), v))
            .collect();
        assert_eq!(global, lower);
        let session = named(show_values(
            &st,
            b"SHOW STATUS",
            QueryCacheType::Off,
            own,
            || leg.clone(),
        ))
        .unwrap();
        assert_eq!(&session[..2], &lower[..]);
        for (n, _) in &session[2..] {
            assert!(CLIENT_LEG_STATUS.contains(&n.as_str()), "{n}");
        }
    }

    /// SHOW STATUS LIKE: the pattern over qcache's own rows.
    #[test]
    fn status_like_filters_qcache_rows() {
        let rows: &[(&str, Option<&[&str]>)] = &[
            (
                "SHOW STATUS LIKE 'Qcache%'",
                Some(&["Qcache_hits", "Qcache_inserts"]),
            ),
            (
                "SHOW GLOBAL STATUS LIKE 'qcache_hits'",
                Some(&["Qcache_hits"]),
            ),
            ("SHOW STATUS LIKE 'Qcache_none'", Some(&[])),
            ("SHOW STATUS", None),
            // As MariaDB 10.11 reads it: comments are no words, a versioned one it skips is
            // a comment, the content of one it runs is code.
            (
                "SHOW /*M!999999 FULL */ STATUS LIKE 'Qcache%'",
                Some(&["Qcache_hits", "Qcache_inserts"]),
            ),
            (
                "SHOW /*!50000 GLOBAL */ STATUS LIKE 'qcache_hits'",
                Some(&["Qcache_hits"]),
            ),
            (
                "SHOW STATUS /* x */ LIKE 'Qcache_hits' -- why",
                Some(&["Qcache_hits"]),
            ),
            ("SHOW /*!50000 FULL */ STATUS LIKE 'Qcache%'", None),
        ];
        let mariadb = crate::analysis::ServerVersion::from_greeting("5.5.5-10.11.6-MariaDB");
        for (sql, want) in rows {
            let sql = crate::analysis::server_text(sql.as_bytes(), mariadb);
            let sql = String::from_utf8_lossy(&sql);
            let got = qcache_status_rows(sql.as_bytes(), own)
                .map(|v| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>());
            let want = want.map(|w| w.iter().map(|n| n.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{sql}");
        }
    }

    /// `SELECT @@query_cache_type`: answered in MariaDB's result, the global one from the
    /// configuration (asked only then).
    #[test]
    fn the_session_variable_is_qcache_s() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        st.qct = QueryCacheType::Demand;
        let asked = std::cell::Cell::new(false);
        let default = || {
            asked.set(true);
            QueryCacheType::Off
        };
        let rows: &[(&str, Option<bool>)] = &[
            ("SELECT @@query_cache_type", Some(false)),
            ("SELECT @@GLOBAL.query_cache_type", Some(true)),
            ("SELECT 1", None),
        ];
        for (sql, global) in rows {
            asked.set(false);
            let got = session_variable(&st, default, sql.as_bytes());
            match (got, global) {
                (None, None) => {}
                (Some(VarAnswer::Relay(Rewrite::Columns(_))), Some(g)) => {
                    assert_eq!(asked.get(), *g, "{sql}")
                }
                (_, _) => panic!("{sql}: unexpected answer"),
            }
        }
    }
}
