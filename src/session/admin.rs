//! The session side of the admin statements: answering them, and asking the server once
//! per session whether its user holds RELOAD before running one that shows or changes
//! cached data.

use tracing::info;

use super::{Session, SessionError};
use crate::admin::statements::{self, AdminStatement, Rows};
use crate::analysis;
use crate::invalidation;
use crate::protocol::codec::Packet;
use crate::protocol::packets::{self, status};

/// The server's error for a table it does not have.
const ER_NO_SUCH_TABLE: u16 = 1146;

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
            Err(msg) => {
                self.send_own_error(seq, statements::PARSE_ERROR_CODE, "42000", &msg)
                    .await?;
                return Ok(true);
            }
        };
        if stmt.needs_privilege() && !self.may_administer().await? {
            self.deny(seq).await?;
            return Ok(true);
        }
        let rows = match stmt {
            AdminStatement::Status => statements::status(&self.shared),
            AdminStatement::Entries { limit } => statements::entries(&self.shared, limit),
            AdminStatement::Tables => statements::tables(&self.shared),
            AdminStatement::Digests(q) => statements::digests(&self.shared, &q),
            AdminStatement::FlushDigests => {
                self.shared.digests.reset();
                info!("FLUSH QCACHE DIGESTS");
                self.send_ok(seq).await?;
                return Ok(true);
            }
            AdminStatement::Last => crate::engine::explain::last_rows(&self.last),
            AdminStatement::Explain { sql } => {
                // A read's verdict tells whether a table or view of some kind exists: only
                // where the server itself would explain it (one private round trip, outside
                // a transaction, whose read view it could open, and of a single read whose
                // EXPLAIN runs nothing: otherwise only the privileged are answered;
                // `statements::explain_check`).
                let text = analysis::server_text(&sql, self.st.server).into_owned();
                let an = self.shared.analyzer.analyze(&text, analysis::digest(&text));
                let check = statements::explain_check(&analysis::scan(&sql), &an);
                let in_txn = self.st.txn.statement_runs_in_transaction();
                let ask = match check {
                    statements::ExplainCheck::None => false,
                    // The privileged are shown every table anyway (SHOW QCACHE ENTRIES):
                    // nothing to ask, so nothing of the statement runs for them.
                    statements::ExplainCheck::AskServer if !in_txn => {
                        !self.may_administer().await?
                    }
                    _ => {
                        if !self.may_administer().await? {
                            self.deny(seq).await?;
                            return Ok(true);
                        }
                        false
                    }
                };
                if ask {
                    let mut ask = b"EXPLAIN ".to_vec();
                    ask.extend_from_slice(&sql);
                    let denied = |e: &Vec<u8>| statements::explain_denied(e);
                    if let Some(err) = self.ask_refusal(&ask).await?.filter(denied) {
                        self.client
                            .send(seq, &err)
                            .await
                            .map_err(SessionError::client)?;
                        return Ok(true);
                    }
                }
                self.explain(&sql).await?
            }
            AdminStatement::ExplainStatement { id } => self.explain_statement(id).await?,
            AdminStatement::InvalidateTable { schema, table } => {
                let Some((s, t)) = self.st.qualify(schema.as_deref(), &table) else {
                    self.send_own_error(seq, 1046, "3D000", "No database selected")
                        .await?;
                    return Ok(true);
                };
                // Invalidated whether or not the server knows the name: dropping entries
                // of a table that is not there costs nothing, and one it does not list (a
                // temporary table) is dropped all the same.
                self.shared
                    .invalidate(&invalidation::admin::invalidate_table(&s, &t));
                info!(table = %format!("{s}.{t}"), "QCACHE INVALIDATE TABLE");
                if !self.table_exists(&s, &t).await? {
                    let msg = format!("Table '{s}.{t}' doesn't exist");
                    self.send_own_error(seq, ER_NO_SUCH_TABLE, "42S02", &msg)
                        .await?;
                    return Ok(true);
                }
                self.send_ok(seq).await?;
                return Ok(true);
            }
        };
        self.send_rows(rows).await?;
        Ok(true)
    }

    async fn send_rows(&mut self, r: Rows) -> Result<(), SessionError> {
        self.send_text_result(&r.columns, &r.rows).await
    }

    /// Answers the current command with a result set qcache built, in the session's format.
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

    /// MySQL's answer to a user without RELOAD.
    pub(crate) async fn deny(&mut self, seq: u8) -> Result<(), SessionError> {
        self.send_own_error(
            seq,
            statements::ACCESS_DENIED_CODE,
            statements::ACCESS_DENIED_STATE,
            statements::ACCESS_DENIED_MESSAGE,
        )
        .await
    }

    /// An ERR qcache produced itself, logged with its code (ERRs from the server are only
    /// relayed).
    async fn send_own_error(
        &mut self,
        seq: u8,
        code: u16,
        state: &str,
        msg: &str,
    ) -> Result<(), SessionError> {
        info!(
            code,
            sql_state = state,
            error = msg,
            "answered with an error"
        );
        self.client
            .send(seq, &packets::err_payload(code, state, msg))
            .await
            .map_err(SessionError::client)?;
        Ok(())
    }

    /// Whether this session's user may run the privileged admin statements (those that show
    /// or change cached data): listed in `admin.users`, or holding RELOAD (asked once per
    /// session and user).
    pub(crate) async fn may_administer(&mut self) -> Result<bool, SessionError> {
        if self.shared.config().admin.users.contains(&self.st.user) {
            return Ok(true);
        }
        if let Some(known) = self.st.admin_allowed {
            return Ok(known);
        }
        let allowed = self.ask_reload_privilege().await?;
        self.st.admin_allowed = Some(allowed);
        Ok(allowed)
    }

    /// Runs [`statements::RELOAD_QUERY`] on the session's own upstream connection (the server knows the
    /// account; qcache does not) and reads the answer without relaying it.
    async fn ask_reload_privilege(&mut self) -> Result<bool, SessionError> {
        self.ask_yes_no(statements::RELOAD_QUERY).await
    }

    /// Whether the server lists `schema.table` (a table or a view) to this session's user,
    /// asked as [`statements::RELOAD_QUERY`] is. The names go as hex, which every sql_mode reads alike.
    async fn table_exists(&mut self, schema: &str, table: &str) -> Result<bool, SessionError> {
        self.ask_yes_no(&statements::table_exists_query(schema, table))
            .await
    }

    /// Runs `sql`, a one-row, one-column query answering 1 or 0, on the session's upstream
    /// connection and reads the answer without relaying it; an error is a no.
    async fn ask_yes_no(&mut self, sql: &str) -> Result<bool, SessionError> {
        self.send_private(sql).await?;
        // Packet 0 is the column count, 1 the column; then (classic protocol) an EOF; the
        // first row follows.
        let row_at = if self.st.deprecate_eof { 2 } else { 3 };
        let mut allowed = false;
        let mut n = 0;
        let resp = self
            .read_private("a yes-or-no query", |resp, _, p| {
                if n == row_at && !resp.error {
                    allowed = packets::read_lenenc_str(p).is_some_and(|(v, _)| v == b"1");
                }
                n += 1;
            })
            .await?;
        Ok(allowed && !resp.error)
    }
}
