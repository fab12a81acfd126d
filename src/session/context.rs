//! Reading the session's effective settings from the server, on the session's own upstream
//! connection, for the key (`policy::context`): at connect, after a reset or change-user,
//! and after a SET whose value qcache cannot evaluate.

use super::{Session, SessionError};
use crate::engine;
use crate::engine::context::ContextRead;
use crate::policy::{context, diagnostics};
use crate::protocol::rows::{self, Values};
use tracing::{debug, warn};

/// After each read-back: `ROW_COUNT()` back to 0 and no warnings, as a fresh session and a SET
/// both leave them (the read-back's SELECT, and the FOUND_ROWS() restorer, change them).
pub(super) const RESTORE: &str = "DO 0";

/// Each statement's answer in a batch: its rows, or None for an error.
type Answers = Vec<Option<Vec<Values>>>;

impl Session {
    /// Reads the key variables as the session has them now into `server_ctx`, and the
    /// isolation level into `isolation_ru`, in the tiers `engine::context::ContextRead`
    /// says. One round trip.
    pub(crate) async fn read_server_context(&mut self) -> Result<(), SessionError> {
        let read = ContextRead::new(&self.st, &self.shared.optional_vars);
        let mut i = 0;
        while let Some(tier) = read.tier(i) {
            i += 1;
            let names = tier.names;
            let (values, probed) = match self.read_values(names, tier.probe, tier.identity).await? {
                Some(v) => v,
                None => {
                    read.refused(i - 1, &self.shared.optional_vars);
                    continue;
                }
            };
            let mut found: Vec<(&str, Option<String>)> = Vec::new();
            if let Some(rows) = probed {
                let present = read.probed(rows.as_deref(), &self.shared.optional_vars);
                // information_schema spells some values otherwise than `@@session.` does
                // (`OFF` for 0, doubles with other digits): read the present ones as later
                // connects read them, or this session's key would differ from theirs. Once
                // per server version.
                if !present.is_empty() {
                    match self.read_values(&present, None, false).await? {
                        Some((values, _)) => found = present.into_iter().zip(values).collect(),
                        None => continue,
                    }
                }
            }
            // Names and values in the order a later connect reads them in one SELECT, so
            // that sessions of the two kinds share entries.
            let pairs: Vec<(&str, Option<&str>)> = names
                .iter()
                .copied()
                .zip(values.iter().map(|v| v.as_deref()))
                .chain(found.iter().map(|(n, v)| (*n, v.as_deref())))
                .collect();
            engine::context::server_context(&mut self.st, &pairs);
            self.st.refresh_fingerprint(&self.shared);
            return Ok(());
        }
        warn!("the server refused to report the session's settings: this session is not cached");
        self.st.lost_track = true;
        Ok(())
    }

    /// Reads the settings again when a write may have changed them (`st.ctx_stale`: a
    /// trigger may SET the writer's variables), before `stmt` is looked up, when `stmt` is a
    /// read the cache may serve; any other statement is answered by the server, and one that
    /// reads the diagnostics (`SELECT @@warning_count`) must find them untouched.
    pub(crate) async fn reread_stale_context(&mut self, stmt: &[u8]) -> Result<(), SessionError> {
        if !self.st.ctx_stale || !self.reads_tables(stmt) {
            return Ok(());
        }
        self.st.ctx_stale = false;
        debug!("a write may have changed the session's settings: reading them again");
        self.read_server_context().await
    }

    /// `SELECT @@session.<name>, …` on the upstream connection, its answer not relayed; the
    /// values in order, or None when the server answered with an error (or the names could
    /// not be asked for). The session's diagnostics are left as they were.
    pub(crate) async fn read_back(
        &mut self,
        names: &[&str],
    ) -> Result<Option<Values>, SessionError> {
        Ok(self.read_values(names, None, false).await?.map(|(v, _)| v))
    }

    /// Reads `names` (and runs `probe`, when given, in the same batch; with `identity`, the
    /// account and role too) in one round trip, and leaves owed what the read changed of
    /// the diagnostics (`policy::diagnostics::after_read_back`, put back by
    /// `reset_diagnostics` before the next statement that needs it). The values, and the
    /// probe's rows or None for its error; None when the SELECT failed.
    async fn read_values(
        &mut self,
        names: &[&str],
        probe: Option<&str>,
        identity: bool,
    ) -> Result<Option<(Values, Option<Option<Vec<Values>>>)>, SessionError> {
        let Some(sql) = context::read_back_sql(names) else {
            return Ok(None);
        };
        // FOUND_ROWS() and ROW_COUNT() first: evaluated before this SELECT sets its own.
        let mut sql = sql.replacen("SELECT ", "SELECT FOUND_ROWS(), ROW_COUNT(), ", 1);
        if identity {
            sql.push_str(", CURRENT_USER(), CURRENT_ROLE()");
        }
        let extra = if identity { 4 } else { 2 };
        // Like any statement sent in a transaction, the read may count as its first.
        self.note_send_point();
        let guess = 0;
        let mut batch: Vec<&str> = vec![&sql];
        batch.extend(probe);
        let mut answers = self.batch(&batch).await?;
        // A SELECT: the server's `Last_query_cost` is its own now.
        self.st.cost.disturbed();
        // Nothing raised what a later SHOW WARNINGS could read: the read-back is sent only
        // when nothing could persist (`statements::follow_set`), and the restore below
        // clears what it raised itself.
        self.st.diag_may_persist = false;
        let probed = probe.map(|_| answers.get_mut(1).and_then(Option::take));
        let row = answers
            .first_mut()
            .and_then(Option::take)
            .and_then(|rows| rows.into_iter().next())
            .filter(|r| r.len() == names.len() + extra);
        // The read changed FOUND_ROWS(), ROW_COUNT() and maybe the warnings: they are put
        // back (`reset_diagnostics`) before the next statement that reaches the server,
        // unless it is a cacheable read, which sets them all itself. Most sessions' next
        // statement is one, so the restore is usually never sent (docs/reliability.md).
        let Some(mut row) = row else {
            debug!(?names, "the server refused the read-back");
            self.st.after_hit = Some(diagnostics::AFTER_READ_BACK | guess);
            return Ok(None);
        };
        let (found_rows, row_count) = (row.remove(0), row.remove(0));
        engine::context::owe_after_private_select(
            &mut self.st,
            found_rows.as_deref(),
            row_count.as_deref(),
        );
        if identity {
            let role = row.pop().flatten();
            if let Some(account) = row.pop().flatten() {
                self.st.identity = Some(crate::engine::state::Identity { account, role });
            }
        }
        debug!(?names, values = ?row, "read the session's settings back");
        Ok(Some((row, probed)))
    }

    /// Sends `sqls` as text queries, pipelined in one write (one command per write on a
    /// compressed leg, which numbers each command's frames from zero), none relayed; each
    /// one's rows, or None for an error.
    pub(super) async fn batch(&mut self, sqls: &[&str]) -> Result<Answers, SessionError> {
        let pipelined = self.upstream.compression().is_none();
        let mut out = Vec::with_capacity(sqls.len());
        if pipelined {
            self.upstream.start_command();
            for sql in sqls {
                self.upstream.push(0, &rows::query_payload(sql));
            }
            self.upstream
                .flush()
                .await
                .map_err(SessionError::upstream)?;
            for _ in sqls {
                out.push(self.read_rows_answer().await?);
            }
        } else {
            for sql in sqls {
                self.upstream.start_command();
                self.upstream.push(0, &rows::query_payload(sql));
                self.upstream
                    .flush()
                    .await
                    .map_err(SessionError::upstream)?;
                out.push(self.read_rows_answer().await?);
            }
        }
        Ok(out)
    }

    /// Reads one text answer: its rows (the first [`MAX_ROWS`] of them); None on an error.
    async fn read_rows_answer(&mut self) -> Result<Option<Vec<Values>>, SessionError> {
        /// More than any read-back or probe asks for.
        const MAX_ROWS: usize = 64;
        let mut rows: Vec<Values> = Vec::new();
        let resp = self
            .read_private("a read-back", |resp, before, p| {
                if resp.rows > before && rows.len() < MAX_ROWS {
                    if let Some(r) = rows::text_row(p) {
                        rows.push(r);
                    }
                }
            })
            .await?;
        if let Some(st) = resp.last_status {
            self.private_status = Some(st);
        }
        Ok(if resp.error { None } else { Some(rows) })
    }
}
