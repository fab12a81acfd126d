//! COM_QUERY: the statement is scanned once and handed to the path that owns its kind
//! (reads, writes, session statements, transactions); several statements in one packet are
//! followed for what they change and never cached.

use bytes::Bytes;

use super::{Session, SessionError};
use crate::analysis::{self, Analysis, StatementKind, WriteInfo};
use crate::policy::locks::{self, TableLocks};
use crate::policy::snapshot;
use crate::policy::{classify, Reason};
use crate::protocol::codec::Packet;
use crate::protocol::response::Expect;

impl Session {
    /// `sql` is the packet's payload after the command byte.
    pub(crate) async fn query(&mut self, pkt: Packet, sql: &Bytes) -> Result<(), SessionError> {
        let looked_up = match self.hit_before_scan(sql).await? {
            Some(true) => return Ok(()),
            Some(false) => true,
            None => false,
        };
        // The statement as the server reads it: versioned comments it skips are comments.
        // Same length as `sql`, so the scan's hint spans apply to `sql` too.
        let text = analysis::server_text(sql, self.st.server);
        let scan = analysis::scan(&text);
        // Before the multi-statement split: `QCACHE EXPLAIN a; b` is qcache's, and any
        // other statement qcache owns followed by more is refused whole, never relayed.
        if matches!(
            scan.kind,
            StatementKind::Show | StatementKind::Other | StatementKind::Flush
        ) && self.admin_statement(&pkt, sql).await?
        {
            return Ok(());
        }
        if scan.multi {
            return self.multi_statement(pkt, &text).await;
        }
        if let Some(why) = classify::relayed_write(scan.kind, &text) {
            self.plan_unknown_write_for(why);
        }
        if !matches!(
            scan.kind,
            StatementKind::Select
                | StatementKind::Write
                | StatementKind::Call
                | StatementKind::Execute
                | StatementKind::Empty
        ) {
            // A SET's or DO's subquery, a SHOW's WHERE (writes plan it in `write`).
            self.plan_code_views(&text);
        }
        if matches!(scan.kind, StatementKind::Other | StatementKind::Flush)
            && self.plan_table_locks(&text)
        {
            // UNLOCK TABLES: the session reads through the cache again once it succeeded.
            let resp = self.relay_command(&pkt, Expect::Results).await?;
            if !resp.error {
                self.st.txn.locks_released();
            }
            return Ok(());
        }
        match scan.kind {
            StatementKind::Select => self.select(pkt, sql, &scan, looked_up).await,
            StatementKind::Set => self.set_statement(pkt, sql).await,
            StatementKind::Show => {
                if let Some(rows) = self.qcache_status_rows(sql) {
                    return self.send_status_rows(rows).await;
                }
                if let Some(rw) = self.own_show_values(sql) {
                    return self.relay_rewriting(&pkt, rw).await;
                }
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            StatementKind::Flush | StatementKind::Reset => {
                self.flush_or_reset(pkt, sql, scan.kind).await
            }
            StatementKind::Write => self.write(&pkt, sql, analysis::digest(&text)).await,
            StatementKind::Call | StatementKind::Execute => {
                // A procedure or a SQL-level prepared statement may write any table and
                // SET any variable: invalidate as configured and stop trusting the context.
                self.plan_call();
                self.code_ran_unseen(&text);
                self.relay_command(&pkt, Expect::Results).await?;
                Ok(())
            }
            StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback => {
                if self
                    .answer_transaction_locally(pkt.seq, sql, scan.kind)
                    .await?
                {
                    return Ok(());
                }
                // Its snapshot point, however it is spelled (WITH CONSISTENT SNAPSHOT, XA
                // START), is taken as it is sent, like every statement's (`exchange_as`).
                let sent = self.st.txn.boundary_sent(snapshot::xa(&text));
                let resp = self.relay_command(&pkt, Expect::Results).await?;
                // A refused XA START (XAER_OUTSIDE in a transaction) started nothing.
                self.st.txn.boundary_answered(sent, resp.error);
                Ok(())
            }
            StatementKind::Use => {
                let resp = self.relay_command(&pkt, Expect::Results).await?;
                if resp.oks > 0 && !resp.error {
                    if let Some(db) = analysis::use_schema(&String::from_utf8_lossy(sql)) {
                        self.st.set_db(Some(db));
                    }
                }
                Ok(())
            }
            _ => {
                self.note_sql_prepare(&text);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
        }
    }

    /// A SQL-level PREPARE: its statement will run in the current database, whatever the
    /// session's when it is EXECUTEd (`Session::plan_call`).
    pub(super) fn note_sql_prepare(&mut self, text: &[u8]) {
        if analysis::first_keyword_is(text, "PREPARE") {
            if let Some(db) = self.st.db.as_ref().map(|d| d.to_lowercase()) {
                if !self.st.sql_prepared_in.contains(&db) {
                    self.st.sql_prepared_in.push(db);
                }
            }
        }
    }

    /// Several statements in one COM_QUERY: each is looked at for what it changes; nothing
    /// of it is cached.
    /// `sql` is the statement as the server reads it ([`analysis::server_text`]).
    pub(super) async fn multi_statement(
        &mut self,
        pkt: Packet,
        sql: &[u8],
    ) -> Result<(), SessionError> {
        let mut lost = false;
        let mut writes = Vec::new();
        // A compound statement anywhere, split at its inner `;` (`DO 1; IF … END IF`).
        let mut compound = analysis::is_compound(sql);
        for part in analysis::split_statements(sql) {
            self.plan_privileges(part);
            compound |= analysis::is_compound(part);
            let scan = analysis::scan(part);
            if scan.kind != StatementKind::Select {
                // Reads plan the views they read in `plan_side_effects`.
                self.plan_code_views(part);
            }
            match scan.kind {
                StatementKind::Write => {
                    let an = analysis::analyze(&String::from_utf8_lossy(part));
                    match an {
                        Analysis::Write(w) => {
                            self.plan_write(&w);
                            // Whether or not it ran: forgetting the database is only
                            // conservative.
                            self.forget_dropped_db(&w);
                            writes.push(w);
                        }
                        _ => self.plan_unknown_write(),
                    }
                }
                StatementKind::Call | StatementKind::Execute => {
                    self.plan_call();
                    self.code_ran_unseen(part);
                }
                StatementKind::Set => {
                    lost = true;
                    let text = String::from_utf8_lossy(part);
                    let info = analysis::analyze_set(&text);
                    if let Some(why) = classify::set_writes(info.as_ref(), &text) {
                        self.plan_unknown_write_for(why);
                    }
                }
                StatementKind::Use => lost = true,
                StatementKind::Select => {
                    // A read that may write, or one that is a write read another way
                    // (NO_BACKSLASH_ESCAPES): what it changes is planned either way.
                    let an = analysis::analyze(&String::from_utf8_lossy(part));
                    self.plan_side_effects(&an, part);
                }
                k => {
                    self.note_sql_prepare(part);
                    if matches!(k, StatementKind::Other | StatementKind::Flush) {
                        // Which of them ran is not followed: an UNLOCK here releases nothing.
                        self.plan_table_locks(part);
                    }
                    if matches!(
                        k,
                        StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback
                    ) {
                        // Which of them ran is not followed: an XA COMMIT here ends nothing.
                        self.st.txn.boundary_sent(snapshot::xa(part));
                    }
                    if let Some(why) = classify::relayed_write(k, part) {
                        self.plan_unknown_write_for(why);
                    }
                }
            }
        }
        // Once, for the whole text, after the parts: a routine's or trigger's compound body
        // splits into parts here, and the code it creates does not run now.
        self.plan_ddl_code(sql);
        if compound {
            // Anonymous stored code split at its inner `;`: as a CALL, whatever its parts.
            self.plan_compound(sql);
        }
        self.note_not_cached(Reason::MultiStatement);
        self.relay_command(&pkt, Expect::Results).await?;
        // Which statements ran is not followed: a temporary table any of them may have
        // created or renamed is one from now on.
        for w in &writes {
            self.track_temporary(w, classify::Outcome::Maybe);
        }
        if lost {
            // Session state changed in ways qcache does not replay statement by statement.
            self.st.lost_track = true;
        }
        Ok(())
    }

    /// Follows a statement's table locks (`policy::locks`): one that takes them marks the
    /// session before it is sent, and a WRITE lock is planned as a write of its tables, so
    /// that no session is served their entries while it is held. True for `UNLOCK TABLES`,
    /// which the caller clears once the server accepted it.
    pub(super) fn plan_table_locks(&mut self, sql: &[u8]) -> bool {
        match locks::table_locks(sql) {
            TableLocks::Take { write } => {
                self.st.txn.locks_taken();
                match write {
                    Some(t) if t.is_empty() => {}
                    Some(t) => self.plan_write(&WriteInfo::tables(t)),
                    None => self.plan_unknown_write(),
                }
                false
            }
            TableLocks::Release => true,
            TableLocks::SavepointRollback => {
                if let Some(txn) = self.st.txn.writes_mut() {
                    txn.read.clear();
                }
                false
            }
            TableLocks::None => false,
        }
    }
}
