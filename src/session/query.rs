//! COM_QUERY: the statement is scanned once and handed to the path that owns its kind
//! (reads, writes, session statements, transactions); several statements in one packet are
//! followed for what they change and never cached.

use bytes::Bytes;

use super::{Session, SessionError};
use crate::analysis::{self, StatementKind};
use crate::engine::command::{Follow, TextRoute};
use crate::engine::Planner;
use crate::policy::snapshot;
use crate::policy::{classify, Reason};
use crate::protocol::codec::Packet;
use crate::protocol::response::Expect;

impl Session {
    /// `sql` is the packet's payload after the command byte; `looked_up`: the command loop
    /// already tried it as [`hit_before_scan`](Self::hit_before_scan) would, and found
    /// nothing (`Session::hit_at_once`).
    pub(crate) async fn query(
        &mut self,
        pkt: Packet,
        sql: &Bytes,
        looked_up: bool,
    ) -> Result<(), SessionError> {
        let looked_up = looked_up
            || match self.hit_before_scan(sql).await? {
                Some(true) => return Ok(()),
                Some(false) => true,
                None => false,
            };
        // Boxed: this future is built for every COM_QUERY, and moving the larger one of the
        // rest of the path into it wrote lines cold since the connection's last request on
        // every hit (#36, callgrind's cache model).
        Box::pin(self.query_scanned(pkt, sql, looked_up)).await
    }

    /// [`query`](Self::query) once the statement's bytes found no entry: scanned and routed.
    async fn query_scanned(
        &mut self,
        pkt: Packet,
        sql: &Bytes,
        looked_up: bool,
    ) -> Result<(), SessionError> {
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
        match Planner::new(&self.shared).text_route(&mut self.st, scan.kind, &text) {
            TextRoute::Select => self.select(pkt, sql, &scan, looked_up).await,
            TextRoute::Set => self.set_statement(pkt, &text).await,
            TextRoute::Show => {
                if let Some(rows) = self.qcache_status_rows(&text) {
                    return self.send_status_rows(rows).await;
                }
                if let Some(rw) = self.own_show_values(&text) {
                    return self.relay_rewriting(&pkt, rw).await;
                }
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            TextRoute::FlushOrReset => self.flush_or_reset(pkt, sql, scan.kind).await,
            TextRoute::Write => self.write(&pkt, sql, analysis::digest(&text)).await,
            TextRoute::SqlLevel { qct } => {
                self.relay_following(&pkt, Expect::Results, Follow::Qct(qct))
                    .await
            }
            TextRoute::Transaction => {
                if self
                    .answer_transaction_locally(pkt.seq, sql, scan.kind)
                    .await?
                {
                    return Ok(());
                }
                // Its snapshot point, however it is spelled (WITH CONSISTENT SNAPSHOT, XA
                // START), is taken as it is sent, like every statement's (`exchange_as`).
                let sent = self.st.txn.boundary_sent(snapshot::xa(&text));
                self.relay_following(&pkt, Expect::Results, Follow::Boundary(sent))
                    .await
            }
            TextRoute::Use => {
                self.relay_following(&pkt, Expect::Results, Follow::Use(&text))
                    .await
            }
            TextRoute::UnlockTables => {
                self.relay_following(&pkt, Expect::Results, Follow::UnlockTables)
                    .await
            }
            TextRoute::Relay => self.relay_command(&pkt, Expect::Results).await.map(drop),
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
        let multi = Planner::new(&self.shared).plan_multi(&mut self.st, sql);
        self.note_not_cached(Reason::MultiStatement);
        self.relay_command(&pkt, Expect::Results).await?;
        // Which statements ran is not followed: a temporary table any of them may have
        // created or renamed is one from now on.
        for w in &multi.writes {
            crate::engine::write::track_temporary(&mut self.st, w, classify::Outcome::Maybe);
        }
        if multi.lost {
            // Session state changed in ways qcache does not replay statement by statement.
            self.st.lost_track = true;
        }
        Ok(())
    }
}
