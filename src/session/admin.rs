//! The session side of the admin statements: answering them, and asking the server once
//! per session whether its user holds RELOAD before running one that shows or changes
//! cached data (`admin::statements` says which, and what each answers).

use tracing::info;

use super::{Session, SessionError};
use crate::admin::statements::{self, AdminStatement, ExplainCheck, Gate, OwnError, Rows};
use crate::analysis;
use crate::protocol::codec::Packet;
use crate::protocol::packets::{self, status};

impl Session {
    /// Answers `pkt` when it is an admin statement; false when it is not one (relay it).
    pub(crate) async fn admin_statement(
        &mut self,
        pkt: &Packet,
        sql: &[u8],
    ) -> Result<bool, SessionError> {
        let Some(parsed) = statements::parse(sql) else {
            return Ok(false);
        };
        let seq = pkt.seq.wrapping_add(1);
        // `SHOW QCACHE LAST` after this one still speaks of the statement before.
        self.cur.admin = true;
        let stmt = match parsed {
            Ok(s) => s,
            Err(msg) => return self.send_own_error(seq, OwnError::syntax(msg)).await,
        };
        let check = match &stmt {
            AdminStatement::Explain { sql } => {
                let text = analysis::server_text(sql, self.st.server).into_owned();
                let an = self.shared.analyzer.analyze(&text, analysis::digest(&text));
                statements::explain_check(&analysis::scan(sql), &an)
            }
            _ => ExplainCheck::None,
        };
        let in_txn = self.st.txn.statement_runs_in_transaction();
        let gate = statements::gate(&stmt, check, in_txn);
        if gate != Gate::Open && !self.may_administer().await? {
            if let (Gate::AskServer, AdminStatement::Explain { sql }) = (gate, &stmt) {
                let ask = statements::explain_question(sql);
                let what = "the privilege check (EXPLAIN)";
                let answer = self.ask_one(&ask, what).await?;
                self.st.cost.disturbed();
                if let Some(err) = answer.refusal().filter(|e| statements::explain_denied(e)) {
                    self.client
                        .send(seq, &err)
                        .await
                        .map_err(SessionError::client)?;
                    return Ok(true);
                }
            } else {
                return self.send_own_error(seq, OwnError::access_denied()).await;
            }
        }
        let rows = match stmt {
            AdminStatement::Last => crate::engine::explain::last_rows(&self.last),
            AdminStatement::Explain { sql } => self.explain(&sql).await?,
            AdminStatement::ExplainStatement { id } => self.explain_statement(id).await?,
            AdminStatement::InvalidateTable { schema, table } => {
                let Some((s, t)) = self.st.qualify(schema.as_deref(), &table) else {
                    return self.send_own_error(seq, OwnError::no_database()).await;
                };
                statements::invalidate_table(&self.shared, &s, &t);
                let exists =
                    self.ask_one(statements::table_exists_query(&s, &t), "a yes-or-no query");
                if !exists.await?.yes() {
                    return self
                        .send_own_error(seq, OwnError::no_such_table(&s, &t))
                        .await;
                }
                return self.send_ok(seq).await.map(|_| true);
            }
            other => match statements::run(&self.shared, &other) {
                Some(rows) => rows,
                None => return self.send_ok(seq).await.map(|_| true),
            },
        };
        self.send_rows(rows).await?;
        Ok(true)
    }

    /// Answers the current command with a result set qcache built, in the session's format.
    pub(crate) async fn send_rows(&mut self, r: Rows) -> Result<(), SessionError> {
        self.send_text_result(&r.columns, &r.rows).await
    }

    /// [`send_rows`](Self::send_rows) of columns and rows given apart.
    pub(crate) async fn send_text_result(
        &mut self,
        columns: &[(&str, u8)],
        rows: &[Vec<Option<String>>],
    ) -> Result<(), SessionError> {
        let st = self.st.txn.status() & status::PER_SESSION;
        let format = packets::ResultFormat {
            deprecate_eof: self.st.deprecate_eof,
            extended_types: self.st.mariadb_caps & packets::mariadb_cap::EXTENDED_TYPE_INFO != 0,
        };
        let wire = packets::text_result(columns, rows, st, format);
        self.client.push_raw(&wire);
        self.client.flush().await.map_err(SessionError::client)
    }

    /// An ERR qcache produced itself, logged with its code (ERRs from the server are only
    /// relayed). True: the command is answered.
    pub(crate) async fn send_own_error(
        &mut self,
        seq: u8,
        e: OwnError,
    ) -> Result<bool, SessionError> {
        let (code, state, msg) = (e.code, e.state, e.message.as_str());
        info!(
            code,
            sql_state = state,
            error = msg,
            "answered with an error"
        );
        let err = packets::err_payload(code, state, msg);
        self.client
            .send(seq, &err)
            .await
            .map_err(SessionError::client)?;
        Ok(true)
    }

    /// Whether this session's user may run the privileged admin statements (those that show
    /// or change cached data): listed in `admin.users`, or holding RELOAD (asked once per
    /// session and user, on the session's own upstream connection: the server knows the
    /// account; qcache does not).
    pub(crate) async fn may_administer(&mut self) -> Result<bool, SessionError> {
        if self.shared.config().admin.users.contains(&self.st.user) {
            return Ok(true);
        }
        if let Some(known) = self.st.admin_allowed {
            return Ok(known);
        }
        let answer = self.ask_one(statements::RELOAD_QUERY, "a yes-or-no query");
        let allowed = answer.await?.yes();
        self.st.admin_allowed = Some(allowed);
        Ok(allowed)
    }
}
