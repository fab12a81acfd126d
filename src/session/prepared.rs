//! Prepared statements: COM_STMT_PREPARE (hints stripped, kind remembered) and
//! COM_STMT_EXECUTE, whose SELECTs are keyed by statement and parameters and go through the
//! read path; parameter types are put back in when the server never saw them.

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};

use super::read::{wants_cache, TAG_BINARY};
use super::relay::KEEP_SCRATCH;
use super::state::{LastExecute, Prepared};
use super::{Session, SessionError};
use crate::analysis::{self, StatementKind};
use crate::cache::{key, Key};
use crate::config::QueryCacheType;
use crate::policy::{classify, Reason};
use crate::protocol::codec::Packet;
use crate::protocol::commands::{self, ExecuteParams};
use crate::protocol::packets::com;
use crate::protocol::response::Expect;

impl Session {
    pub(crate) async fn stmt_prepare(&mut self, pkt: Packet) -> Result<(), SessionError> {
        let sql = pkt.payload.slice(1..);
        let text = analysis::server_text(&sql, self.st.server);
        let scan = analysis::scan(&text);
        drop(text);
        let (sql, payload) = if scan.hint_spans.is_empty() {
            (sql, pkt.payload.clone())
        } else {
            let stripped = Bytes::from(analysis::strip_hints(&sql, &scan).into_owned());
            let mut p = BytesMut::with_capacity(stripped.len() + 1);
            p.put_u8(com::STMT_PREPARE);
            p.put_slice(&stripped);
            (stripped, p.freeze())
        };
        let resp = self
            .exchange(pkt.seq, &payload, Expect::Prepare, None)
            .await?;
        if let Some((id, columns, params)) = resp.prepared {
            self.st.stmts.insert(
                id,
                Prepared {
                    digest: analysis::digest(&analysis::server_text(&sql, self.st.server)),
                    sql,
                    kind: scan.kind,
                    hint: scan.hint,
                    params,
                    columns,
                    types: None,
                    long_data: false,
                    server_has_types: false,
                    last_execute: LastExecute::None,
                },
            );
            self.st.last_stmt = Some(id);
        }
        Ok(())
    }

    pub(crate) async fn stmt_execute(&mut self, pkt: Packet) -> Result<(), SessionError> {
        let Some(mut id) = super::stmt_id(&pkt.payload) else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        if id == u32::MAX {
            // MariaDB's "the statement prepared last" (pipelined prepare + execute).
            id = self.st.last_stmt.unwrap_or(id);
        }
        let Some(stmt) = self.st.stmts.get_mut(&id) else {
            // Unknown id: the server answers with its own error.
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        let long_data = std::mem::take(&mut stmt.long_data);
        let kind = stmt.kind;
        // The values sent as long data are not in this packet: the ones after them would be
        // read in their place (`Session::execute_literals`).
        self.st.execute_long_data = long_data;
        let bulk = pkt.first() == Some(com::STMT_BULK_EXECUTE);
        if kind == StatementKind::Select && !bulk {
            return self.execute_select(pkt, id, long_data).await;
        }
        if matches!(
            kind,
            StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback
        ) && !bulk
        {
            // Drivers (sysbench among them) prepare BEGIN and COMMIT once and execute them.
            let sql = stmt.sql.clone();
            if self.answer_transaction_locally(pkt.seq, &sql, kind).await? {
                return Ok(());
            }
        }
        if kind == StatementKind::Write && !bulk {
            // Later executes may come without types (new-params-bound = 0): remember them,
            // or those writes' rows could not be read and would bump whole tables.
            self.learn_types(id, &pkt.payload);
        }
        let pkt = if bulk {
            pkt
        } else {
            // Every path below sends it.
            let (up, typed) = self.execute_for_upstream(id, &pkt);
            self.types_sent(id, typed);
            Packet::new(pkt.seq, up)
        };
        match kind {
            StatementKind::Write => {
                // Looked up above; a miss here would only mean "relay it as it is".
                match self.st.stmts.get(&id).map(|s| (s.sql.clone(), s.digest)) {
                    Some((sql, digest)) => self.write(&pkt, &sql, digest).await,
                    None => self.relay_command(&pkt, Expect::Results).await.map(drop),
                }
            }
            StatementKind::Call | StatementKind::Execute => {
                self.plan_call();
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            StatementKind::Set | StatementKind::Use => {
                // A prepared SET changes the session in ways the packet does not show.
                self.st.lost_track = true;
                self.relayed_write_of(id);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback => {
                self.st.txn_boundary = true;
                self.relayed_write_of(id);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
            _ => {
                self.relayed_write_of(id);
                self.relay_command(&pkt, Expect::Results).await.map(drop)
            }
        }
    }

    /// [`classify::relayed_write`] for prepared statement `id`.
    pub(super) fn relayed_write_of(&mut self, id: u32) {
        let Some((kind, sql)) = self.st.stmts.get(&id).map(|s| (s.kind, s.sql.clone())) else {
            return;
        };
        let text = analysis::server_text(&sql, self.st.server);
        let why = if kind == StatementKind::Set {
            let text = String::from_utf8_lossy(&text);
            classify::set_writes(analysis::analyze_set(&text).as_ref(), &text)
        } else {
            classify::relayed_write(kind, &text)
        };
        if let Some(why) = why {
            self.plan_unknown_write_for(why);
        }
    }

    /// An execute of a prepared SELECT. The hit path borrows the statement and builds its key
    /// in the session's scratch buffer: no clone, no allocation.
    pub(super) async fn execute_select(
        &mut self,
        pkt: Packet,
        id: u32,
        long_data: bool,
    ) -> Result<(), SessionError> {
        let identified = self.privileges_current()
            || (self.st.qct != QueryCacheType::Off
                && !self.st.lost_track
                && self
                    .st
                    .stmts
                    .get(&id)
                    .map(|s| s.sql.clone())
                    .is_some_and(|sql| self.may_ask_identity(&sql))
                && self.refresh_privileges().await?);
        let Some(stmt) = self.st.stmts.get_mut(&id) else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        let wanted = wants_cache(self.st.qct, stmt.hint);
        let parts = commands::execute_params(&pkt.payload, stmt.params, stmt.types.as_deref());
        // Types the client sent that differ from the remembered ones are learned; a driver
        // that re-sends the same types on every execute costs no copy.
        let learned = match &parts {
            Some(ExecuteParams {
                types: Some(types), ..
            }) if stmt.types.as_deref() != Some(*types) => Some(Bytes::copy_from_slice(types)),
            _ => None,
        };
        let cursor = pkt.payload.get(5).map(|f| f & 0x07 != 0).unwrap_or(true);
        let reason = if !wanted {
            Some(Reason::NotRequested)
        } else if self.st.lost_track {
            Some(Reason::SessionUntracked)
        } else if !identified {
            Some(Reason::IdentityUnknown)
        } else if cursor {
            Some(Reason::Cursor)
        } else if long_data {
            Some(Reason::LongData)
        } else if parts.is_none() {
            Some(Reason::MalformedExecute)
        } else {
            None
        };
        // The same execution keys the same whether or not the client re-sent the types.
        let key = match (&parts, reason) {
            (Some(params), None) => Some(execute_key(
                &mut self.key_scratch,
                self.st.fingerprint,
                &stmt.sql,
                params,
            )),
            _ => None,
        };
        if let Some(types) = learned {
            stmt.types = Some(types);
        }
        // What the key was built of stays with the statement, for EXPLAIN: the buffers are
        // swapped, not copied.
        stmt.last_execute = match (key, std::mem::take(&mut stmt.last_execute)) {
            (Some(_), last) => {
                let mut kept = match last {
                    LastExecute::Keyed(v) => v,
                    _ => Vec::new(),
                };
                std::mem::swap(&mut kept, &mut self.key_scratch);
                // Empty when `execute_key` dropped an oversized buffer.
                if kept.is_empty() {
                    LastExecute::None
                } else {
                    LastExecute::Keyed(kept)
                }
            }
            (None, _) => LastExecute::NotKeyed(reason.unwrap_or(Reason::MalformedExecute)),
        };
        let Some(key) = key else {
            self.note_not_cached(reason.unwrap_or(Reason::MalformedExecute));
            let (up, typed) = self.execute_for_upstream(id, &pkt);
            self.types_sent(id, typed);
            self.forward_read(pkt.seq, &up, None, false).await?;
            return Ok(());
        };
        let mode = self.read_mode();
        if let Some(mode) = &mode {
            let started = Instant::now();
            if let Some(e) = self.lookup(key, mode) {
                if !self.shared.l2_remote || self.l2_confirm(key, &e).await {
                    return self.serve_hit(&e, started).await;
                }
            }
        }
        let Some((sql, digest)) = self.st.stmts.get(&id).map(|s| (s.sql.clone(), s.digest)) else {
            return self.relay_command(&pkt, Expect::Results).await.map(drop);
        };
        let an = self
            .shared
            .analyzer
            .analyze(&analysis::server_text(&sql, self.st.server), digest);
        let (up, typed) = self.execute_for_upstream(id, &pkt);
        match self.plan_read(&an, key, digest, &sql).await {
            Ok(plan) => {
                // Only an execute that reached the server taught it the types; one served
                // from another session's fill did not.
                let sent = self.miss(pkt.seq, &up, &sql, plan, mode).await?;
                self.types_sent(id, typed && sent);
                Ok(())
            }
            Err(reason) => {
                self.note_not_cached(reason);
                self.plan_side_effects(&an);
                self.types_sent(id, typed);
                self.forward_read(pkt.seq, &up, None, false).await.map(drop)
            }
        }
    }

    /// Remembers the parameter types an execute of statement `id` carries, if they differ
    /// from those remembered.
    fn learn_types(&mut self, id: u32, payload: &[u8]) {
        let Some(s) = self.st.stmts.get_mut(&id) else {
            return;
        };
        if let Some(ExecuteParams {
            types: Some(types), ..
        }) = commands::execute_params(payload, s.params, None)
        {
            if s.types.as_deref() != Some(types) {
                s.types = Some(Bytes::copy_from_slice(types));
            }
        }
    }

    /// Records that the server has parameter types for statement `id` once an execute
    /// carrying them was sent.
    pub(super) fn types_sent(&mut self, id: u32, typed: bool) {
        if typed {
            if let Some(s) = self.st.stmts.get_mut(&id) {
                s.server_has_types = true;
            }
        }
    }

    /// The execute packet as the server must receive it, and whether it carries parameter
    /// types. A client sends types once (new-params-bound = 1) and then executes with the
    /// flag 0; when the server never received that first execute (it was a cache hit, or
    /// was served from another session's fill) the types are put back in. Re-sending types
    /// is always allowed, so the answer is the same. The caller marks the types as known
    /// to the server ([`types_sent`](Self::types_sent)) only once the packet went upstream.
    pub(super) fn execute_for_upstream(&self, id: u32, pkt: &Packet) -> (Bytes, bool) {
        let Some(stmt) = self.st.stmts.get(&id) else {
            return (pkt.payload.clone(), false);
        };
        let n = stmt.params as usize;
        let nb = n.div_ceil(8);
        let p = &pkt.payload;
        if n == 0 || p.len() < 11 + nb {
            return (pkt.payload.clone(), false);
        }
        match (p[10 + nb], &stmt.types) {
            (1, _) => (pkt.payload.clone(), true),
            (0, Some(types)) if !stmt.server_has_types => {
                let mut out = BytesMut::with_capacity(p.len() + types.len());
                out.put_slice(&p[..10 + nb]);
                out.put_u8(1);
                out.put_slice(types);
                out.put_slice(&p[11 + nb..]);
                (out.freeze(), true)
            }
            _ => (pkt.payload.clone(), false),
        }
    }
}

/// The key of an execute: the prepared SQL, parameter types, null bitmap and values, built in
/// the session's scratch buffer (`scratch`) so that a hit allocates nothing. The same
/// execution keys the same whether or not the client re-sent the types.
fn execute_key(scratch: &mut Vec<u8>, fingerprint: u64, sql: &[u8], params: &ExecuteParams) -> Key {
    let m = scratch;
    execute_material(m, sql, params);
    let k = key(fingerprint, TAG_BINARY, m);
    if m.capacity() > KEEP_SCRATCH {
        // A large parameter passed; an idle session should not keep its copy.
        *m = Vec::new();
    }
    k
}

/// What an execute's key hashes with the session's fingerprint, written into `m`.
pub(super) fn execute_material(m: &mut Vec<u8>, sql: &[u8], params: &ExecuteParams) {
    // Without trace comments at either end, as a text read is keyed.
    let sql = crate::analysis::key_text(sql);
    m.clear();
    m.extend_from_slice(&(sql.len() as u32).to_le_bytes());
    m.extend_from_slice(sql);
    m.extend_from_slice(params.types.unwrap_or_default());
    m.push(0xff);
    m.extend_from_slice(params.null_bitmap);
    m.push(0xff);
    m.extend_from_slice(params.values);
}
