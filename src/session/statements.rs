//! Session statements: SET (followed into the key, or qcache's own `query_cache_type`),
//! `SELECT @@query_cache_type`, the SHOW rows whose values are qcache's (`Qcache%` status,
//! `query_cache_type`, the client leg's TLS and compression), FLUSH/RESET QUERY CACHE.

use bytes::Bytes;

use super::diagnostics::CLIENT_LEG_STATUS;
use super::{Session, SessionError};
use crate::admin::statements;
use crate::analysis::{self, QcAssign, QctAnswer, StatementKind};
use crate::invalidation;
use crate::policy::classify;
use crate::policy::diagnostics;
use crate::policy::privileges::{self};
use crate::protocol::codec::Packet;
use crate::protocol::packets::{self};
use crate::protocol::response::Expect;
use crate::protocol::rows::Rewrite;

impl Session {
    pub(super) async fn set_statement(
        &mut self,
        pkt: Packet,
        sql: &Bytes,
    ) -> Result<(), SessionError> {
        let text = String::from_utf8_lossy(sql).into_owned();
        let info = analysis::analyze_set(&text);
        if let Some(why) = classify::set_writes(info.as_ref(), &text) {
            // `SET @x = f()` runs a function that may write anything.
            self.plan_unknown_write_for(why);
        }
        if let Some(i) = &info {
            if let Some(q) = i.query_cache_type {
                self.st.qct = match q {
                    QcAssign::Value(v) => v,
                    QcAssign::Default => self.shared.config().cache.query_cache_type,
                };
                let only_ours = i.assignments.iter().all(|(k, _)| k == "query_cache_type");
                if only_ours {
                    // qcache's own variable: MySQL 8.0 would reject it, so it never goes up.
                    return self.send_ok(pkt.seq.wrapping_add(1)).await;
                }
            }
        }
        // SET DEFAULT ROLE, SET PASSWORD; and SET ROLE, after which the server recomputes the
        // session's privileges and role.
        self.plan_privileges(sql);
        let role = privileges::sets_role(sql);
        let epoch_before = self.shared.cache.versions().privileges.epoch();
        let resp = self.relay_command(&pkt, Expect::Results).await?;
        if role {
            // Even a failed SET ROLE is asked about again: qcache does not guess.
            let before = if resp.error {
                self.st.priv_baseline
            } else {
                epoch_before
            };
            crate::engine::write::role_set(&mut self.st, before);
        }
        if resp.error {
            return Ok(());
        }
        let assignments = info.as_ref().map(|i| i.assignments.as_slice());
        if crate::policy::context::set_may_change_idle_timers(assignments) {
            // A new idle timer: read before the next cacheable read (`keep_alive_after`).
            self.st.ctx_stale = true;
        }
        if crate::policy::context::set_may_change_begin(assignments) {
            // The server's answer to BEGIN may now say more than qcache's would.
            self.st.txn.begin_needs_server();
        }
        self.follow_set(info, resp.warnings).await
    }

    /// Brings the key up to what a successful SET left the session with
    /// (`policy::context`): literal values by their text, other values as the server reports
    /// them, GLOBAL assignments and user variables not at all.
    pub(super) async fn follow_set(
        &mut self,
        info: Option<analysis::SetInfo>,
        warnings: u32,
    ) -> Result<(), SessionError> {
        use crate::policy::context::{self, Assignment};
        let Some(i) = info else {
            // qcache can tell neither what changed nor what to read back.
            self.st.lost_track = true;
            return Ok(());
        };
        let mut read_back: Vec<String> = Vec::new();
        let mut lost = false;
        for ((k, v), global) in i.assignments.iter().zip(&i.globals) {
            match context::assignment(k, v, *global) {
                Assignment::Ignore => continue,
                Assignment::Literal => {}
                Assignment::Keyed { value, .. } => {
                    self.st.txn.isolation_set(
                        context::reads_uncommitted(value),
                        context::serializable(value),
                    );
                }
                Assignment::ReadBack(names) => {
                    read_back.extend(names.iter().map(|n| n.to_string()));
                    continue;
                }
                Assignment::ReadBackNamed => {
                    read_back.push(k.clone());
                    continue;
                }
                Assignment::Lost => {
                    lost = true;
                    continue;
                }
            }
            if k == "transaction" && v.to_ascii_uppercase().contains("ISOLATION") {
                let ru = context::reads_uncommitted(v);
                let ser = context::serializable(v);
                if i.next_transaction_only {
                    self.st.txn.next_isolation_set(ru, ser);
                } else {
                    self.st.txn.isolation_set(ru, ser);
                }
            }
            match context::key_entries(k, v, i.next_transaction_only) {
                Some(entries) => self.st.vars.extend(entries),
                None => {
                    self.st.vars.insert(k.clone(), v.clone());
                    read_back.push(context::isolation_variable(self.st.mariadb).to_string());
                }
            }
        }
        // What the SET turned on that records the session's statements, by its text: the
        // read-back below is a statement such a recorder would show.
        let recorders = i
            .assignments
            .iter()
            .zip(&i.globals)
            .filter(|((k, _), global)| !**global && (k.starts_with("@@") || !k.starts_with('@')))
            .fold(self.st.recorders(), |r, ((k, v), _)| r.after_set(k, v));
        (self.st.optimizer_traced, self.st.profiling) =
            (recorders.optimizer_trace, recorders.profiling);
        if !read_back.is_empty() && recorders.quiet() {
            // Read with the rest when the session is quiet again, or never.
            let mariadb = self.st.mariadb;
            if read_back
                .iter()
                .all(|n| context::read_at_connect(n, mariadb))
            {
                self.st.ctx_stale = true;
            } else {
                lost = true;
            }
            read_back.clear();
        }
        if !read_back.is_empty() {
            let names: Vec<&str> = read_back.iter().map(String::as_str).collect();
            // The read-back would clear the SET's warnings, or those of an earlier statement
            // that the SET left in place, which the client may ask for. In an XA transaction
            // past XA END the server refuses any read of a table (1399), so the restore of
            // FOUND_ROWS() the read-back owes would fail where the client sees it: the
            // session is given up instead (never served, as in XA anyway).
            let values = if warnings == 0 && !self.st.diag_may_persist && !self.st.txn.xa() {
                self.read_back(&names).await?
            } else {
                None
            };
            match values {
                Some(values) => {
                    for (n, v) in names.iter().zip(values) {
                        let v = v.unwrap_or_else(|| "\u{0}NULL".to_string());
                        if context::is_isolation(n) {
                            self.st.txn.isolation_set(
                                context::reads_uncommitted(&v),
                                context::serializable(&v),
                            );
                        }
                        if context::is_optimizer_trace(n) {
                            self.st.optimizer_traced = context::traces_optimizer(&v);
                        }
                        self.st.vars.insert(context::key_name(n).to_string(), v);
                    }
                }
                None => lost = true,
            }
        }
        if lost {
            self.st.lost_track = true;
        }
        self.st.refresh_fingerprint(&self.shared);
        Ok(())
    }

    /// A SELECT reading `@@query_cache_type`, qcache's variable: on MariaDB the server's
    /// result (its metadata, its other columns) is relayed with qcache's value in each
    /// column that is the bare variable, in any spelling (`@@`, `@@SESSION.`, `@@local.`,
    /// `@@GLOBAL.` for the configured default), with or without an alias, beside other
    /// columns. A read qcache cannot rewrite (in an expression, a WHERE) is None: relayed
    /// like any read of a system variable, never cached, with the server's value
    /// (docs/design.md says so). MySQL 8.0 has no such variable: qcache answers the bare
    /// one-column form alone.
    pub(super) fn session_variable_answer(&self, stmt: &[u8]) -> Option<VarAnswer> {
        let value = |global: bool| {
            if global {
                self.shared.config().cache.query_cache_type
            } else {
                self.st.qct
            }
            .as_str()
            .to_string()
        };
        Some(match analysis::qct_answer(stmt, self.st.mariadb, value)? {
            QctAnswer::Columns(values) => VarAnswer::Relay(Rewrite::Columns(values)),
            QctAnswer::Own(name, value) => VarAnswer::Own((name, value)),
        })
    }

    /// Answers a [`session_variable_answer`](Self::session_variable_answer).
    pub(super) async fn answer_variable(
        &mut self,
        pkt: &Packet,
        v: VarAnswer,
    ) -> Result<(), SessionError> {
        match v {
            VarAnswer::Relay(rw) => self.relay_rewriting(pkt, rw).await,
            VarAnswer::Own(row) => self.send_status_rows_named(row).await,
        }
    }

    /// `SHOW … VARIABLES` (qcache's `query_cache_type`) and `SHOW [GLOBAL|SESSION] STATUS`
    /// in any form (`LIKE`, `WHERE`, none): the rows whose values are qcache's. Status rows
    /// named `Qcache_*` are qcache's counters (MariaDB's own query cache reports zeros,
    /// which is what a mysqld_exporter would scrape); session status adds the client leg's
    /// TLS and compression. Only rows the server returns are rewritten: a `WHERE` is the
    /// server's to evaluate, so counters MariaDB has no row for appear under `LIKE 'Qcache%'`
    /// (answered by qcache alone) and `SHOW QCACHE STATUS`.
    pub(super) fn own_show_values(&self, sql: &[u8]) -> Option<Rewrite> {
        let text = statements::lowercase(sql);
        let words = statements::words(&text);
        if let Some(global) = diagnostics::show_variables_scope(&words) {
            let qct = if global {
                self.shared.config().cache.query_cache_type
            } else {
                self.st.qct
            };
            return Some(Rewrite::Named(vec![(
                "query_cache_type".into(),
                qct.as_str().to_string(),
            )]));
        }
        let session = diagnostics::is_session_status(&words);
        if !session && !matches!(words.as_slice(), ["show", "global", "status", ..]) {
            return None;
        }
        let mut values: Vec<(String, String)> = self
            .own_status_rows()
            .into_iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v))
            .collect();
        if session {
            let leg = self.client_leg();
            values.extend(CLIENT_LEG_STATUS.iter().filter_map(|n| {
                diagnostics::client_leg_status(n, &leg).map(|v| (n.to_string(), v))
            }));
        }
        Some(Rewrite::Named(values))
    }

    /// qcache's `Qcache_*` status rows: the cache's, then L2's.
    fn own_status_rows(&self) -> Vec<(String, String)> {
        self.shared
            .cache
            .status_rows()
            .into_iter()
            .chain(self.shared.l2.iter().flat_map(|l| l.status_rows()))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    pub(super) async fn send_status_rows_named(
        &mut self,
        (name, value): (String, String),
    ) -> Result<(), SessionError> {
        self.send_text_result(
            &[(name.as_str(), packets::TYPE_VAR_STRING)],
            &[vec![Some(value)]],
        )
        .await
    }

    /// `SHOW [GLOBAL|SESSION] STATUS LIKE 'Qcache%'`: rows qcache answers from its state.
    pub(super) fn qcache_status_rows(&self, sql: &[u8]) -> Option<Vec<(String, String)>> {
        let pattern = statements::status_like_pattern(sql)?;
        let rows = self
            .own_status_rows()
            .into_iter()
            .filter(|(name, _)| statements::like_match(&pattern, &name.to_ascii_lowercase()))
            .collect();
        Some(rows)
    }

    pub(super) async fn send_status_rows(
        &mut self,
        rows: Vec<(String, String)>,
    ) -> Result<(), SessionError> {
        let rows: Vec<Vec<Option<String>>> = rows
            .into_iter()
            .map(|(n, v)| vec![Some(n), Some(v)])
            .collect();
        let columns = [
            ("Variable_name", packets::TYPE_VAR_STRING),
            ("Value", packets::TYPE_VAR_STRING),
        ];
        self.send_text_result(&columns, &rows).await
    }

    pub(super) async fn flush_or_reset(
        &mut self,
        pkt: Packet,
        sql: &[u8],
        kind: StatementKind,
    ) -> Result<(), SessionError> {
        let text = statements::lowercase(sql);
        let words = statements::words(&text);
        if words.len() == 3 && words[1] == "query" && words[2] == "cache" {
            if !self.may_administer().await? {
                return self.deny(pkt.seq.wrapping_add(1)).await;
            }
            // On the server both end a transaction (an implicit commit): inside one, or where
            // the statement would open one, the server is asked, so that what the session
            // wrote is committed (and invalidated as any commit) and the OK carries the
            // server's status. Elsewhere qcache answers: no transaction to end.
            let ends_transaction = self.st.txn.statement_runs_in_transaction();
            let refused =
                ends_transaction && self.relay_command(&pkt, Expect::Results).await?.error;
            if kind == StatementKind::Reset && !refused {
                self.shared
                    .invalidate(&invalidation::admin::reset_query_cache());
                self.shared.cache.drop_entries();
            }
            if ends_transaction {
                return Ok(());
            }
            // FLUSH QUERY CACHE defragmented MySQL's cache; qcache's store has nothing to
            // defragment, so it only answers.
            return self.send_ok(pkt.seq.wrapping_add(1)).await;
        }
        // FLUSH TABLES and friends change no data; FLUSH PRIVILEGES makes grant-table edits
        // effective.
        self.plan_privileges(sql);
        self.relay_command(&pkt, Expect::Results).await.map(drop)
    }
}

/// How qcache answers a SELECT of its `query_cache_type`.
pub(super) enum VarAnswer {
    /// The server's result with qcache's values in these columns (MariaDB).
    Relay(Rewrite),
    /// One row of its own, named as the client spelled the variable (MySQL 8.0).
    Own((String, String)),
}
