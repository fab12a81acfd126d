//! Deferred BEGIN: a plain `BEGIN` outside a transaction is answered by qcache and reaches
//! the server just ahead of the transaction's first statement that needs it, in the same
//! write when that statement is a cacheable read. A read-only transaction whose other reads
//! are hits then waits for the server twice (its first read, COMMIT) instead of three times,
//! and a BEGIN followed by COMMIT with nothing between never reaches the server.
//!
//! Why it is safe: InnoDB takes a transaction's snapshot at its first read, not at BEGIN, so
//! a BEGIN sent later but before that read opens the same transaction. Everything the
//! server would have done at BEGIN that the client could see (the status flag, the implicit
//! commit of an open transaction) is excluded by answering only outside a transaction.
//! Before a write or any other command, BEGIN goes up on its own and must succeed first, so
//! a write never runs outside the transaction its client opened. Only a cacheable read,
//! which changes nothing, travels in the same write as BEGIN; should BEGIN then fail, the
//! client gets BEGIN's error in place of the read's result.

use super::{Session, SessionError};
use crate::analysis::StatementKind;
use crate::engine::fill::Fill;
use crate::policy::{diagnostics, txn};
use crate::protocol::packets::{self, com, status};
use crate::protocol::response::Response;

const BEGIN: &[u8] = b"\x03BEGIN";

impl Session {
    /// Answers a transaction statement without the server when it may: a plain BEGIN
    /// outside a transaction (deferred), or a plain COMMIT / ROLLBACK of a transaction whose
    /// BEGIN never left qcache. True when the client has its answer.
    pub(crate) async fn answer_transaction_locally(
        &mut self,
        seq: u8,
        sql: &[u8],
        kind: StatementKind,
    ) -> Result<bool, SessionError> {
        if !txn::plain(sql, kind, self.st.sql_mode_text()) {
            return Ok(false);
        }
        let new_status = match kind {
            StatementKind::Begin => self.st.txn.begin_answered_locally(
                !self.st.lost_track && !self.st.ctx_stale && !self.st.quiet(),
            ),
            StatementKind::Commit | StatementKind::Rollback => self.st.txn.end_answered_locally(),
            _ => None,
        };
        let Some(new_status) = new_status else {
            return Ok(false);
        };
        // The same bookkeeping as the server's OK would get: a transaction opens (its
        // snapshot still to come from its first read) or ends.
        self.apply_status(Some(new_status)).await;
        crate::engine::exchange::ended(&mut self.st);
        self.answer_ok_locally(seq.wrapping_add(1)).await?;
        Ok(true)
    }

    /// Sends the deferred BEGIN, if any, before a command that is not a cacheable read, and
    /// waits for its OK. False when BEGIN failed: the client then has the error as the
    /// answer to its command, which must not be sent.
    pub(crate) async fn open_deferred_begin(&mut self, seq: u8) -> Result<bool, SessionError> {
        if !self.st.txn.begin_pending() {
            return Ok(true);
        }
        self.upstream.start_command();
        self.push_deferred_begin();
        self.upstream
            .flush()
            .await
            .map_err(SessionError::upstream)?;
        self.begin_answered(seq).await
    }

    /// Whether a read may travel in one write with the deferred BEGIN. A compressed leg
    /// numbers each command's frames from zero, so there BEGIN goes up on its own.
    pub(crate) fn begin_rides_along(&self) -> bool {
        self.st.txn.begin_pending() && self.upstream.compression().is_none()
    }

    /// Queues the deferred BEGIN ahead of the read about to be pushed.
    pub(crate) fn push_deferred_begin(&mut self) {
        self.st.txn.begin_sent();
        self.st.after_hit = diagnostics::after_server_begin(self.st.after_hit);
        self.upstream.push(0, BEGIN);
    }

    /// Reads the server's answer to the deferred BEGIN. On an error, `seq`'s command gets it
    /// as its answer and the transaction the client believes open is closed.
    pub(crate) async fn begin_answered(&mut self, seq: u8) -> Result<bool, SessionError> {
        let p = self
            .upstream
            .read_some()
            .await
            .map_err(SessionError::upstream)?;
        match p.first() {
            Some(0x00) => {
                let differs = status::SESSION_STATE_CHANGED | status::IN_TRANS_READONLY;
                if packets::parse_ok(&p.payload).is_some_and(|ok| ok.status & differs != 0) {
                    // The server's OK said more than qcache's did: transaction state for a
                    // client that tracks it, or a read-only transaction (the server's or the
                    // session's default). From now on BEGIN goes up as it comes.
                    self.st.txn.begin_needs_server();
                }
                Ok(true)
            }
            Some(0xff) => {
                tracing::debug!(err = ?packets::parse_err(&p.payload), "deferred BEGIN failed");
                self.st.txn.begin_refused();
                crate::engine::exchange::ended(&mut self.st);
                self.client
                    .send(seq.wrapping_add(1), &p.payload)
                    .await
                    .map_err(SessionError::client)?;
                Ok(false)
            }
            _ => Err(SessionError::Protocol(
                "unexpected answer to a deferred BEGIN".into(),
            )),
        }
    }

    /// After BEGIN failed ahead of a read sent in the same write: the read's answer is
    /// read and dropped, so the next command's answer is the next the client sees.
    pub(crate) async fn drop_answer(
        &mut self,
        fill: Option<&mut Fill>,
    ) -> Result<Response, SessionError> {
        tracing::debug!("dropping the answer of the read that carried BEGIN along");
        if let Some(f) = fill {
            f.overflow = true;
        }
        let mut resp = self.read_answer("a read").await?.resp;
        resp.error = true;
        Ok(resp)
    }
}

/// `com::QUERY` is the first byte of [`BEGIN`].
const _: () = assert!(BEGIN[0] == com::QUERY);
