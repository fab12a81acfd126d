//! A binary-protocol prepared statement's parameter types (what the client last sent, what
//! the server holds, and the packet that keeps the two equal) and an execute's key. The
//! rule: what qcache forwards always gives the server the types the client last sent, even
//! after executes answered from the cache never reached it.

use bytes::{BufMut, Bytes, BytesMut};

use super::slices::Planner;
use super::state::{LastExecute, Prepared, SessionState};
use super::KEEP_SCRATCH;
use crate::analysis::{self, Hint, StatementKind};
use crate::cache::key::{key, Key, TAG_BINARY};
use crate::policy::classify;
use crate::policy::context::prepared_context_moved;
use crate::policy::snapshot;
use crate::policy::txn::XaSent;
use crate::policy::Reason;
use crate::protocol::commands::{self, ExecuteParams};
use crate::protocol::packets::com;

pub use super::state::SentTypes;

impl Prepared {
    /// How an execute `payload` of this statement came, for the read machine's `Via` step
    /// (`policy::read::keyable`): a cursor asked for (a flag byte qcache cannot read counts
    /// as one), a cursor the server holds open, long data sent, a bulk execute seen, the
    /// context moved since PREPARE (`prepare_ctx`: the session's now), parameters qcache
    /// could not read (`readable`).
    #[inline]
    pub fn execute_via(
        &self,
        payload: &[u8],
        long_data: bool,
        prepare_ctx: u64,
        readable: bool,
    ) -> crate::policy::read::Via {
        crate::policy::read::Via::Execute(crate::policy::read::Execute {
            cursor: payload.get(5).map(|f| f & 0x07 != 0).unwrap_or(true),
            cursor_open: self.cursor_open,
            long_data,
            bulk_seen: self.bulk_seen,
            context_moved: prepared_context_moved(self.context, prepare_ctx),
            malformed: !readable,
        })
    }

    /// Keeps what an execute's key was built of (`scratch`, swapped, not copied) for
    /// `QCACHE EXPLAIN STATEMENT`; `scratch` gets the previous buffer back.
    #[inline]
    pub fn keep_key_material(&mut self, scratch: &mut Vec<u8>) {
        let mut kept = match std::mem::take(&mut self.last_execute) {
            LastExecute::Keyed(v) => v,
            _ => Vec::new(),
        };
        std::mem::swap(&mut kept, scratch);
        if scratch.capacity() > KEEP_SCRATCH {
            // A large parameter passed before; an idle session keeps no large buffer.
            *scratch = Vec::new();
        }
        // Not sent yet: a hit leaves it so, an execute that goes up clears it (`types_sent`).
        // A large material is kept until then: a hit's may be needed for its replay.
        self.values_unsent = true;
        self.last_execute = if kept.is_empty() {
            LastExecute::None
        } else {
            LastExecute::Keyed(kept)
        };
    }

    /// Before an execute's decision is carried out: one refused before its parameters were
    /// read (`came` false) still teaches qcache the types it sends (the client's last); one
    /// not keyed records why, for EXPLAIN STATEMENT.
    pub fn before_decided(&mut self, payload: &[u8], came: bool, not_keyed: Option<Reason>) {
        if !came {
            self.learn_types(payload);
        }
        if let Some(reason) = not_keyed {
            self.last_execute = LastExecute::NotKeyed(reason);
        }
    }

    /// After an execute went to the server with `typed`: the server holds those types, and
    /// it closed the cursor it held for the statement or opened one (`answer`; None, not
    /// seen, counts as a cursor left open: fail closed). The columns its result had are the
    /// statement's as the server holds it now: a re-prepare after DDL took the new ones.
    pub fn after_execute(&mut self, typed: SentTypes, answer: Option<ReadAnswer>) {
        self.types_sent(typed);
        self.cursor_open = match answer {
            Some(a) => {
                crate::policy::read::cursor_after_execute(self.cursor_open, a.cursor, a.error)
            }
            None => true,
        };
        if let Some(n) = answer.and_then(|a| a.columns) {
            self.columns = n;
        }
    }
}

/// What the answer to the last read a session sent upstream said, for its statement
/// (`Prepared::after_execute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadAnswer {
    /// It said a cursor exists.
    pub cursor: bool,
    pub error: bool,
    /// The columns of its result set, when it had one (and they fit the prepare's count).
    pub columns: Option<u16>,
}

impl ReadAnswer {
    pub fn of(resp: &crate::protocol::response::Response) -> ReadAnswer {
        ReadAnswer {
            cursor: resp.cursor,
            error: resp.error,
            columns: resp.columns.and_then(|n| u16::try_from(n).ok()),
        }
    }
}

/// After COM_STMT_PREPARE's answer (`prepared`: the id, columns and parameters of an OK):
/// the statement as qcache keeps it, `sql` its hint-free text and `scan` its scan, taken in
/// the session's context now (the server parsed it under that context and runs it so).
/// A failed prepare leaves MariaDB's -1 naming no statement.
pub fn prepare_answered(
    st: &mut SessionState,
    prepared: Option<(u32, u16, u16)>,
    sql: Bytes,
    scan: &crate::analysis::Scan,
) {
    let Some((id, columns, params)) = prepared else {
        st.last_stmt = None;
        return;
    };
    let stmt = Prepared {
        digest: analysis::digest(&analysis::server_text(&sql, st.server)),
        hint: scan.hint,
        context: st.prepare_ctx,
        db: st.db.clone(),
        ..Prepared::new(sql, scan.kind, params, columns)
    };
    st.stmts.insert(id, stmt);
    st.last_stmt = Some(id);
}

/// What an arriving COM_STMT_EXECUTE (or MariaDB's bulk execute) is, decided before
/// anything is sent ([`execute_came`]).
#[derive(Debug, PartialEq, Eq)]
pub enum ExecuteCame {
    /// Relayed as it came, for the server's own answer: an id that names no statement, or
    /// MariaDB's -1 without its parameters' types (which it refuses as malformed: neither
    /// served nor given the types).
    AsIs,
    /// An execute of a prepared SELECT (not a bulk one): the read path.
    Select {
        id: u32,
        hint: Hint,
        long_data: bool,
    },
    /// A prepared BEGIN, COMMIT or ROLLBACK, which the session may answer itself (drivers,
    /// sysbench among them, prepare them once and execute them); when it does not,
    /// [`Planner::execute_up`] goes on.
    Transaction {
        id: u32,
        sql: Bytes,
        kind: StatementKind,
    },
    /// Anything else: [`Planner::execute_up`].
    Up { id: u32 },
}

/// What the session does with an execute it sends upstream ([`Planner::execute_up`]).
#[derive(Debug, PartialEq, Eq)]
pub enum ExecuteUp {
    /// A write, planned and applied as a text write of its prepared SQL.
    Write { sql: Bytes, digest: u64 },
    /// Relayed, its effects already planned; `qct`: the `query_cache_type` it sets, which
    /// qcache follows once the server accepted it (`settings::qct_answered`).
    Relay {
        qct: Option<crate::config::QueryCacheType>,
    },
    /// A transaction boundary: the server's answer settles what it ended
    /// (`Txn::execute_answered`).
    Boundary(XaSent),
}

/// What an execute `payload` is, noting what the statement's state keeps of it (its long
/// data consumed, a bulk execute seen).
#[inline]
pub fn execute_came(st: &mut SessionState, payload: &[u8]) -> ExecuteCame {
    // MariaDB's -1 is the statement prepared last, or none (`SessionState::resolve_stmt`).
    let Some(id) = commands::stmt_id(payload).and_then(|id| st.resolve_stmt(id)) else {
        return ExecuteCame::AsIs;
    };
    let Some(stmt) = st.stmts.get_mut(&id) else {
        return ExecuteCame::AsIs;
    };
    if commands::stmt_id(payload) == Some(u32::MAX) && !sends_types(payload, stmt.params) {
        return ExecuteCame::AsIs;
    }
    // A statement the server refuses until a reset counts as one with long data: no execute
    // of it is keyed, and each reaches the server for its error.
    let long_data = std::mem::take(&mut stmt.long_data) || stmt.long_data_refused;
    let kind = stmt.kind;
    let bulk = payload.first() == Some(&com::STMT_BULK_EXECUTE);
    stmt.bulk_seen |= bulk;
    let came = match kind {
        _ if bulk => ExecuteCame::Up { id },
        StatementKind::Select => ExecuteCame::Select {
            id,
            hint: stmt.hint,
            long_data,
        },
        StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback => {
            ExecuteCame::Transaction {
                id,
                sql: stmt.sql.clone(),
                kind,
            }
        }
        _ => ExecuteCame::Up { id },
    };
    // The values sent as long data are not in this packet: the ones after them would be
    // read in their place (`Session::execute_literals`).
    st.execute_long_data = long_data;
    came
}

impl Planner<'_> {
    /// An execute of statement `id` that goes upstream: the packet to send (with the types
    /// the client last sent, [`Prepared::execute_for_upstream`]) and what the session does
    /// with it, its effects planned: a statement prepared in another database or under other
    /// settings writes as an unknown write where it was prepared; a SET changes the session
    /// in ways the packet does not show; a CALL runs code unseen; a LOCK takes table locks.
    pub fn execute_up(
        &self,
        st: &mut SessionState,
        id: u32,
        payload: &Bytes,
    ) -> (Bytes, ExecuteUp) {
        let Some(s) = st.stmts.get(&id) else {
            return (payload.clone(), ExecuteUp::Relay { qct: None });
        };
        let (kind, sql, digest) = (s.kind, s.sql.clone(), s.digest);
        // Prepared in another database or under other settings: what it writes is not what
        // its text read now says.
        if let Some(db) = prepared_context_moved(s.context, st.prepare_ctx).map(|_| s.db.clone()) {
            self.plan_unknown_write_in(st, db.as_deref());
        }
        let bulk = payload.first() == Some(&com::STMT_BULK_EXECUTE);
        let up = match st.stmts.get_mut(&id) {
            None => payload.clone(),
            Some(s) => {
                if bulk {
                    // What the server takes of it is in its answer (`bulk_answered`).
                    let (up, sent) = s.bulk_for_upstream(payload);
                    st.bulk_in_flight = Some((id, sent));
                    up
                } else {
                    // Later executes may come without types (new-params-bound = 0): remember
                    // them, or those writes' rows could not be read and would bump whole
                    // tables.
                    s.learn_types(payload);
                    let (up, sent) = s.execute_for_upstream(payload);
                    s.types_sent(sent);
                    up
                }
            }
        };
        let text = analysis::server_text(&sql, st.server);
        if kind != StatementKind::Write {
            // What it does to privileges, as the same text does (a write plans its own with
            // its analysis): a prepared FLUSH PRIVILEGES makes grant-table edits effective.
            self.plan_privileges_of(st, &text);
        }
        let next = match kind {
            StatementKind::Write => ExecuteUp::Write { sql, digest },
            StatementKind::Call | StatementKind::Execute => {
                self.plan_call(st, &text);
                let qct = self.before_sql_level(st, &text);
                ExecuteUp::Relay { qct }
            }
            StatementKind::Set | StatementKind::Use => {
                st.lost_track = true;
                self.relayed_write(st, kind, &text);
                // qcache's own query_cache_type, which it cannot read back, is followed.
                let qct = match kind {
                    StatementKind::Set => {
                        self.qct_run_by_server(st, &String::from_utf8_lossy(&text))
                    }
                    _ => None,
                };
                ExecuteUp::Relay { qct }
            }
            StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback => {
                self.relayed_write(st, kind, &text);
                ExecuteUp::Boundary(st.txn.boundary_sent(snapshot::xa(&text)))
            }
            _ => {
                self.relayed_write(st, kind, &text);
                if matches!(kind, StatementKind::Other | StatementKind::Flush) {
                    // A prepared LOCK / FLUSH … WITH READ LOCK takes table locks; a prepared
                    // UNLOCK is not followed (the session stays marked: fail closed).
                    self.plan_table_locks(st, &text);
                }
                ExecuteUp::Relay { qct: None }
            }
        };
        (up, next)
    }

    /// What a relayed statement of `kind` and server text `text` may write that the
    /// analysis of writes does not see (`policy::classify::relayed_write`, a SET's
    /// `set_writes`), and the views and code it names.
    pub fn relayed_write(&self, st: &mut SessionState, kind: StatementKind, text: &[u8]) {
        self.plan_code_views(st, text);
        let why = if kind == StatementKind::Set {
            let text = String::from_utf8_lossy(text);
            classify::set_writes(analysis::analyze_set(&text).as_ref(), &text)
        } else {
            classify::relayed_write(kind, text)
        };
        if let Some(why) = why {
            self.plan_unknown_write_for(st, why);
        }
    }
}

/// A MariaDB bulk execute's flag: the types follow the flags.
const BULK_SEND_TYPES: u16 = 128;

impl Prepared {
    /// Remembers the parameter types an execute `payload` carries, if they differ from
    /// those remembered.
    pub fn learn_types(&mut self, payload: &[u8]) {
        if let Some(ExecuteParams {
            types: Some(types), ..
        }) = commands::execute_params(payload, self.params, None)
        {
            if self.types.as_deref() != Some(types) {
                self.types = Some(Bytes::copy_from_slice(types));
            }
        }
    }

    /// Records what the server holds once a packet carrying `sent` went to it. The server
    /// takes the types before it reads the values, so an execute it refuses still leaves
    /// them set.
    pub fn types_sent(&mut self, sent: SentTypes) {
        self.values_unsent = false;
        // The server has these values: a large material is not kept for a replay (EXPLAIN
        // STATEMENT then says its parameters were too large to keep).
        if matches!(&self.last_execute, LastExecute::Keyed(m) if m.capacity() > KEEP_SCRATCH) {
            self.last_execute = LastExecute::None;
        }
        self.types_held(sent);
    }

    /// What the server holds of the types once a packet carrying `sent` went to it.
    fn types_held(&mut self, sent: SentTypes) {
        match sent {
            SentTypes::None => {}
            SentTypes::Known(t) => self.server_types = Some(t),
            SentTypes::Unknown => self.server_types = None,
        }
    }

    /// The execute packet as the server must receive it, and the types it carries. A client
    /// sends types (new-params-bound = 1) when they change and then executes with the flag
    /// 0; the server keeps the last types it received. An execute answered from the cache
    /// (a hit, or another session's fill) never reached it, so when the types the client
    /// last sent are not those the server holds, they are put back in. Re-sending types is
    /// always allowed, so the answer is the same. The caller records them as the server's
    /// ([`types_sent`](Self::types_sent)) only once the packet went upstream.
    pub fn execute_for_upstream(&self, payload: &Bytes) -> (Bytes, SentTypes) {
        let n = self.params as usize;
        let nb = n.div_ceil(8);
        let p = payload;
        if n == 0 || p.len() < 11 + nb {
            return (p.clone(), SentTypes::None);
        }
        match (p[10 + nb], &self.types) {
            (0, Some(types)) if self.server_types.as_ref() != Some(types) => {
                let mut out = BytesMut::with_capacity(p.len() + types.len());
                out.put_slice(&p[..10 + nb]);
                out.put_u8(1);
                out.put_slice(types);
                out.put_slice(&p[11 + nb..]);
                (out.freeze(), SentTypes::Known(types.clone()))
            }
            (0, _) => (p.clone(), SentTypes::None),
            // Any other flag makes the server read types; the packet's own, when readable
            // (the execute's read and `learn_types` have made them the statement's).
            (1, Some(types)) if p.get(11 + nb..11 + nb + 2 * n) == Some(&types[..]) => {
                (p.clone(), SentTypes::Known(types.clone()))
            }
            _ => (p.clone(), SentTypes::Unknown),
        }
    }

    /// After a bulk execute carrying `sent` was answered (`refused`: before the server read
    /// its types, [`bulk_refused_before_types`]): an accepted one gave the server those
    /// types, which become the client's last too; a refused one gave it nothing, and the
    /// types the client put in it are gone, as they are directly. Neither gave it the values
    /// of an execute served from the cache before it (`values_unsent` stays): long data after
    /// the bulk still needs that execute replayed (`replay_before_long_data`).
    pub fn bulk_answered(&mut self, sent: SentTypes, refused: bool) {
        if refused {
            return;
        }
        if let SentTypes::Known(t) = &sent {
            self.types = Some(t.clone());
        }
        self.types_held(sent);
    }

    /// A MariaDB COM_STMT_BULK_EXECUTE as the server must receive it: `[0xfa][id:4]
    /// [flags:2]`, then the types when flag 128 (send types) is set, then the rows; a bulk
    /// without types gets the client's last ones put in when the server holds others. What
    /// it carries counts only once the server accepted it ([`bulk_answered`](Self::bulk_answered)).
    pub fn bulk_for_upstream(&self, payload: &Bytes) -> (Bytes, SentTypes) {
        let p = payload;
        let n = self.params as usize;
        let Some(flags) = p.get(5..7).map(|f| u16::from_le_bytes([f[0], f[1]])) else {
            return (p.clone(), SentTypes::None);
        };
        if n == 0 {
            return (p.clone(), SentTypes::None);
        }
        if flags & BULK_SEND_TYPES != 0 {
            return match p.get(7..7 + 2 * n) {
                // One the server has no handler for: it refuses the bulk, whatever it holds.
                Some(types) if !types.chunks(2).all(|t| commands::type_known(t[0])) => {
                    (p.clone(), SentTypes::Unknown)
                }
                Some(types) => (p.clone(), SentTypes::Known(Bytes::copy_from_slice(types))),
                None => (p.clone(), SentTypes::Unknown),
            };
        }
        match &self.types {
            Some(types) if self.server_types.as_ref() != Some(types) => {
                let mut out = BytesMut::with_capacity(p.len() + types.len());
                out.put_slice(&p[..5]);
                out.put_u16_le(flags | BULK_SEND_TYPES);
                out.put_slice(types);
                out.put_slice(&p[7..]);
                (out.freeze(), SentTypes::Known(types.clone()))
            }
            _ => (p.clone(), SentTypes::None),
        }
    }
}

impl Prepared {
    /// Before COM_STMT_SEND_LONG_DATA for this statement (id `id`): the execute to send
    /// first, its answer dropped, when the client's last execute was answered without the
    /// server (`values_unsent`). MariaDB reads long data as the kind of value (integer,
    /// string, NULL, …) each parameter last received, not as the types sent with the
    /// execute that consumes it: after an integer the server ran and a string served from
    /// the cache, it would read the client's string as an integer (a pointer-like number)
    /// where, directly, it reads the string. Sending that served execute again gives the
    /// server its values; it is a cacheable read, which changes nothing. Built from the key's
    /// material (types, null bitmap, values), so a hit copies nothing for it; None when
    /// there is nothing to replay.
    pub fn replay_before_long_data(&mut self, id: u32) -> Option<Vec<u8>> {
        if !self.values_unsent {
            return None;
        }
        let LastExecute::Keyed(m) = &self.last_execute else {
            return None;
        };
        if self.params == 0 {
            return None;
        }
        let kept = material_params(m, self.params)?;
        let (types, nulls, values) = (kept.types?, kept.null_bitmap, kept.values);
        let mut p = Vec::with_capacity(11 + nulls.len() + types.len() + values.len());
        p.push(com::STMT_EXECUTE);
        p.extend_from_slice(&id.to_le_bytes());
        // No cursor (a keyed execute asked none), one iteration, the types bound.
        p.push(0);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(nulls);
        p.push(1);
        p.extend_from_slice(types);
        p.extend_from_slice(values);
        self.types_sent(SentTypes::Known(Bytes::copy_from_slice(types)));
        Some(p)
    }
}

/// MariaDB's ER_UNSUPPORTED_PS: its answer to a bulk execute of a statement it does not
/// run in bulk (a SELECT, INSERT … SELECT, a multi-table DELETE, SET, CALL, …).
const ER_UNSUPPORTED_PS: u16 = 1295;

/// Whether a bulk execute answered with the error `code` was refused before the server read
/// the types it carried. MariaDB checks that the statement may run in bulk before it reads
/// the types (10.11: a bulk SELECT with types leaves the statement's types as they were), and
/// answers ER_UNSUPPORTED_PS then; any other answer came after the types were read.
pub fn bulk_refused_before_types(code: Option<u16>) -> bool {
    code == Some(ER_UNSUPPORTED_PS)
}

/// After the answer to a client's command (`code`: its error, if it was one): what a bulk
/// execute in it gave the server ([`Prepared::bulk_answered`]).
pub fn bulk_answered(st: &mut SessionState, code: Option<u16>) {
    let Some((id, sent)) = st.bulk_in_flight.take() else {
        return;
    };
    if let Some(s) = st.stmts.get_mut(&id) {
        s.bulk_answered(sent, bulk_refused_before_types(code));
    }
}

/// Whether an execute (or bulk execute) packet of a statement with `params` parameters
/// carries their types: new-params-bound = 1, or a bulk's flag 128. True without parameters.
pub fn sends_types(p: &[u8], params: u16) -> bool {
    if params == 0 {
        return true;
    }
    if p.first() == Some(&com::STMT_BULK_EXECUTE) {
        return p
            .get(5)
            .is_some_and(|f| u16::from(*f) & BULK_SEND_TYPES != 0);
    }
    p.get(10 + (params as usize).div_ceil(8)) == Some(&1)
}

/// Reads an execute's parameters (learning the types it sends, `payload` its
/// COM_STMT_EXECUTE of statement `id`) and says how it came to `keyable`; when that answers
/// true, builds the key in `scratch` and keeps its material for EXPLAIN STATEMENT. The key,
/// if built; None when the statement is gone. The same execution keys the same whether or
/// not the client re-sent the types; a driver that re-sends the same types on every execute
/// costs no copy.
pub fn execute_keyed(
    st: &mut SessionState,
    scratch: &mut Vec<u8>,
    payload: &[u8],
    id: u32,
    long_data: bool,
    keyable: impl FnOnce(crate::policy::read::Via) -> bool,
) -> Option<Option<Key>> {
    let stmt = st.stmts.get_mut(&id)?;
    let parts = commands::execute_params(payload, stmt.params, stmt.types.as_deref());
    let learned = match &parts {
        Some(ExecuteParams {
            types: Some(types), ..
        }) if stmt.types.as_deref() != Some(*types) => Some(Bytes::copy_from_slice(types)),
        _ => None,
    };
    let via = stmt.execute_via(payload, long_data, st.prepare_ctx, parts.is_some());
    let mut keyed = None;
    if let (true, Some(params)) = (keyable(via), &parts) {
        keyed = Some(execute_key(
            scratch,
            st.fingerprint,
            &stmt.key_sql,
            stmt.columns,
            params,
        ));
    }
    if let Some(types) = learned {
        stmt.types = Some(types);
    }
    if keyed.is_some() {
        stmt.keep_key_material(scratch);
    }
    Some(keyed)
}

/// What the values of this execute of statement `id` (`payload`: its COM_STMT_EXECUTE) are
/// known not to hold: a date, a TIME (`policy::timecol::params_known`).
pub fn params_known(st: &SessionState, id: u32, payload: &[u8]) -> crate::policy::timecol::Params {
    let n = st.stmts.get(&id).map_or(1, |s| s.params);
    let values = super::slices::execute_literals(st, payload);
    crate::policy::timecol::params_known(values.as_deref(), n)
}

/// The key of an execute: the prepared SQL as keyed (`Prepared::key_sql`, without trace
/// comments at either end), the statement's column count as the server last told the client
/// (`Prepared::columns`), parameter types, null bitmap and values, built in the session's
/// scratch buffer (`scratch`) so that a hit allocates nothing. The same execution keys the
/// same whether or not the client re-sent the types.
///
/// Why the columns: after DDL the server re-prepares a statement at its next execute, and
/// when the column count changed that execute's answer says SERVER_STATUS_METADATA_CHANGED
/// (MariaDB's `validate_metadata`), a flag of that execution. A statement prepared before
/// the DDL (the old count) must not share an entry with one prepared after it: its execute
/// reaches the server, which re-prepares it and flags the change, as directly, and the
/// statement then has the new count ([`Prepared::after_execute`]).
pub fn execute_key(
    scratch: &mut Vec<u8>,
    fingerprint: u64,
    key_sql: &[u8],
    columns: u16,
    params: &ExecuteParams,
) -> Key {
    let m = scratch;
    write_material(m, key_sql, columns, params);
    key(fingerprint, TAG_BINARY, m)
}

/// What an execute's key hashes with the session's fingerprint, written into `m`.
pub fn execute_material(m: &mut Vec<u8>, sql: &[u8], columns: u16, params: &ExecuteParams) {
    // Without trace comments at either end, as a text read is keyed.
    write_material(m, crate::analysis::key_text(sql), columns, params);
}

/// The parameters an execute's key material ([`execute_material`]) holds, for a statement
/// of `n` parameters (a keyed execute of one with parameters always had its types); None
/// when the material does not have that shape.
pub fn material_params(m: &[u8], n: u16) -> Option<ExecuteParams<'_>> {
    let len = u32::from_le_bytes(m.get(..4)?.try_into().ok()?) as usize;
    // The SQL, then the column count (two bytes).
    let rest = m.get(4 + len + 2..)?;
    let n = n as usize;
    let (types, rest) = if n == 0 {
        (None, rest)
    } else {
        (Some(rest.get(..2 * n)?), rest.get(2 * n..)?)
    };
    let rest = rest.strip_prefix(&[0xff])?;
    let nb = n.div_ceil(8);
    let null_bitmap = rest.get(..nb)?;
    let values = rest.get(nb..)?.strip_prefix(&[0xff])?;
    Some(ExecuteParams {
        types,
        null_bitmap,
        values,
    })
}

/// [`execute_material`] of SQL already keyed: what an execute's key hashes, into `m`.
fn write_material(m: &mut Vec<u8>, key_sql: &[u8], columns: u16, params: &ExecuteParams) {
    let sql = key_sql;
    m.clear();
    m.extend_from_slice(&(sql.len() as u32).to_le_bytes());
    m.extend_from_slice(sql);
    m.extend_from_slice(&columns.to_le_bytes());
    m.extend_from_slice(params.types.unwrap_or_default());
    m.push(0xff);
    m.extend_from_slice(params.null_bitmap);
    m.push(0xff);
    m.extend_from_slice(params.values);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::StatementKind;
    use crate::engine::state::LastExecute;

    const INT: &[u8] = &[3, 0];
    const STR: &[u8] = &[253, 0];

    /// What `QCACHE EXPLAIN STATEMENT` reads back of an execute's parameters is what the
    /// execute keyed with.
    #[test]
    fn material_gives_back_its_parameters() {
        let rows: &[(&str, u16, ExecuteParams)] = &[
            (
                "none",
                0,
                ExecuteParams {
                    types: None,
                    null_bitmap: &[],
                    values: &[],
                },
            ),
            (
                "two, one NULL",
                2,
                ExecuteParams {
                    types: Some(&[3, 0, 253, 0]),
                    null_bitmap: &[2],
                    values: &[1, 0, 0, 0],
                },
            ),
            (
                "a 0xff among the types",
                1,
                ExecuteParams {
                    types: Some(&[255, 0]),
                    null_bitmap: &[0],
                    values: &[0xff, 1],
                },
            ),
        ];
        for (what, n, params) in rows {
            let mut m = Vec::new();
            execute_material(&mut m, b"SELECT ?", 1, params);
            assert_eq!(material_params(&m, *n), Some(*params), "{what}");
        }
        assert_eq!(material_params(&[1, 0], 1), None, "too short");
    }

    fn stmt(types: Option<&[u8]>, server: Option<&[u8]>) -> Prepared {
        Prepared {
            types: types.map(Bytes::copy_from_slice),
            server_types: server.map(Bytes::copy_from_slice),
            ..Prepared::new(Bytes::from_static(b"SELECT ?"), StatementKind::Select, 1, 1)
        }
    }

    /// COM_STMT_EXECUTE of statement 1 with one parameter: flags 0, one iteration, a null
    /// bitmap of one byte, new-params-bound, the types when bound, the value.
    fn execute(types: Option<&[u8]>) -> Bytes {
        let mut p = vec![com::STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        p.push(u8::from(types.is_some()));
        p.extend_from_slice(types.unwrap_or_default());
        p.extend_from_slice(&[1, b'7']);
        Bytes::from(p)
    }

    fn bulk(types: Option<&[u8]>) -> Bytes {
        let flags: u16 = if types.is_some() { BULK_SEND_TYPES } else { 0 };
        let mut p = vec![com::STMT_BULK_EXECUTE, 1, 0, 0, 0];
        p.extend_from_slice(&flags.to_le_bytes());
        p.extend_from_slice(types.unwrap_or_default());
        p.extend_from_slice(&[0, 1, b'7']);
        Bytes::from(p)
    }

    type Row = (
        &'static str,
        Option<&'static [u8]>,
        Option<&'static [u8]>,
        Option<&'static [u8]>,
        Option<&'static [u8]>,
        SentTypes,
    );

    /// (rule, the client's last types, the server's, the packet's types, the types the
    /// forwarded packet carries, what it teaches the server)
    #[test]
    fn an_execute_gives_the_server_the_types_the_client_last_sent() {
        let rows: [Row; 5] = [
            (
                "no types, the server holds the client's: as it is",
                Some(INT),
                Some(INT),
                None,
                None,
                SentTypes::None,
            ),
            (
                "no types, the server holds others (a hit came between): put back in",
                Some(STR),
                Some(INT),
                None,
                Some(STR),
                SentTypes::Known(Bytes::from_static(STR)),
            ),
            (
                "no types, the server holds none it is known to: put back in",
                Some(INT),
                None,
                None,
                Some(INT),
                SentTypes::Known(Bytes::from_static(INT)),
            ),
            (
                "types sent and learned: as they are, the server learns them",
                Some(STR),
                Some(INT),
                Some(STR),
                Some(STR),
                SentTypes::Known(Bytes::from_static(STR)),
            ),
            (
                "types sent that were not learned: the server's become unknown",
                Some(INT),
                Some(INT),
                Some(STR),
                Some(STR),
                SentTypes::Unknown,
            ),
        ];
        for (rule, last, server, sent, want, teaches) in rows {
            let s = stmt(last, server);
            let (up, got) = s.execute_for_upstream(&execute(sent));
            assert_eq!(up, execute(want), "{rule}");
            assert_eq!(got, teaches, "{rule}");
            assert_eq!(sends_types(&up, 1), want.is_some(), "{rule}");
        }
    }

    /// Long data as the server takes it: for one of the statement's parameters, only the
    /// execute after it lacks values; naming a parameter the statement lacks, every execute
    /// is refused until a reset; too short to name one, ignored. (rule, parameters, the long
    /// data's parameter or None for a packet too short, the first execute after it keyed as
    /// with long data, the second.)
    #[test]
    fn long_data_as_the_server_takes_it() {
        use crate::analysis::StatementKind;
        use crate::protocol::packets::com;
        type Row = (&'static str, u16, Option<u16>, bool, bool);
        let rows: &[Row] = &[
            (
                "its parameter: that execute's values",
                1,
                Some(0),
                true,
                false,
            ),
            (
                "a parameter it lacks: refused until reset",
                1,
                Some(1),
                true,
                true,
            ),
            ("a statement without parameters", 0, Some(0), true, true),
            (
                "too short to name a parameter: ignored",
                1,
                None,
                false,
                false,
            ),
        ];
        let execute = [com::STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0];
        let with_long_data =
            |st: &mut crate::engine::state::SessionState| match execute_came(st, &execute) {
                ExecuteCame::Select { long_data, .. } => long_data,
                other => panic!("{other:?}"),
            };
        for (rule, params, param, first, second) in rows {
            let w = crate::engine::World::new(false);
            let mut st = w.session(Some("db"));
            let sql = bytes::Bytes::from_static(b"SELECT ?");
            let p = Prepared::new(sql, StatementKind::Select, *params, 1);
            st.stmts.insert(1, p);
            st.last_stmt = Some(1);
            let mut long = vec![com::STMT_SEND_LONG_DATA, 1, 0, 0, 0];
            if let Some(n) = param {
                long.extend_from_slice(&n.to_le_bytes());
                long.extend_from_slice(b"zzz");
            }
            st.long_data(u32::MAX, &long);
            assert_eq!(with_long_data(&mut st), *first, "{rule}: the first execute");
            assert_eq!(with_long_data(&mut st), *second, "{rule}: the second");
            st.stmt_reset(1);
            assert!(!with_long_data(&mut st), "{rule}: after a reset");
        }
    }

    /// A bulk execute: the packet that goes up, then what the statement holds once the
    /// server answered it. MariaDB refuses a bulk of a statement it does not run in bulk
    /// (ER_UNSUPPORTED_PS, 1295) before it reads the types: they count only when accepted.
    #[test]
    fn a_bulk_execute_gives_types_only_when_the_server_takes_it() {
        type Row = (
            &'static str,
            // The client's last types, the server's, the bulk's own.
            (
                Option<&'static [u8]>,
                Option<&'static [u8]>,
                Option<&'static [u8]>,
            ),
            // The bulk's answer: an error code.
            Option<u16>,
            // The types the packet up carries; the client's and the server's after.
            (
                Option<&'static [u8]>,
                Option<&'static [u8]>,
                Option<&'static [u8]>,
            ),
        );
        let rows: &[Row] = &[
            (
                "types sent, accepted: the statement's and the server's",
                (Some(INT), Some(INT), Some(STR)),
                None,
                (Some(STR), Some(STR), Some(STR)),
            ),
            (
                "types sent, accepted with an error after reading them (a duplicate key)",
                (Some(INT), Some(INT), Some(STR)),
                Some(1062),
                (Some(STR), Some(STR), Some(STR)),
            ),
            (
                "types sent, refused (a bulk SELECT): nothing changes",
                (Some(INT), Some(INT), Some(STR)),
                Some(1295),
                (Some(STR), Some(INT), Some(INT)),
            ),
            (
                "types sent after a hit, refused: the server still holds its own",
                (Some(STR), Some(INT), Some(INT)),
                Some(1295),
                (Some(INT), Some(STR), Some(INT)),
            ),
            (
                "none sent while the server holds others: the client's put in, accepted",
                (Some(STR), Some(INT), None),
                None,
                (Some(STR), Some(STR), Some(STR)),
            ),
            (
                "none sent while the server holds others, refused: it holds its own",
                (Some(STR), Some(INT), None),
                Some(1295),
                (Some(STR), Some(STR), Some(INT)),
            ),
            (
                "none sent, the server holding the client's: as it came",
                (Some(STR), Some(STR), None),
                None,
                (None, Some(STR), Some(STR)),
            ),
        ];
        for (rule, (last, server, sent), code, (up_types, want_last, want_server)) in rows {
            let mut s = stmt(*last, *server);
            let (up, got) = s.bulk_for_upstream(&bulk(*sent));
            assert_eq!(up, bulk(*up_types), "{rule}: the packet up");
            s.bulk_answered(got, bulk_refused_before_types(*code));
            assert_eq!(s.types.as_deref(), *want_last, "{rule}: the client's");
            assert_eq!(
                s.server_types.as_deref(),
                *want_server,
                "{rule}: the server's"
            );
        }
        // A truncated packet tells nothing.
        let s = stmt(Some(STR), Some(INT));
        let (up, got) = s.bulk_for_upstream(&Bytes::from_static(&[com::STMT_BULK_EXECUTE, 1]));
        assert_eq!(up.len(), 2);
        assert_eq!(got, SentTypes::None);
    }

    #[test]
    fn learned_types_and_what_the_server_holds() {
        let mut s = stmt(None, None);
        s.learn_types(&execute(Some(STR)));
        assert_eq!(
            s.types.as_deref(),
            Some(STR),
            "an execute's types are learned"
        );
        s.learn_types(&execute(None));
        assert_eq!(
            s.types.as_deref(),
            Some(STR),
            "one without types keeps them"
        );
        s.types_sent(SentTypes::Known(Bytes::from_static(INT)));
        assert_eq!(s.server_types.as_deref(), Some(INT));
        s.types_sent(SentTypes::None);
        assert_eq!(
            s.server_types.as_deref(),
            Some(INT),
            "nothing sent: the server keeps"
        );
        s.types_sent(SentTypes::Unknown);
        assert_eq!(s.server_types, None, "unreadable: unknown");
    }

    #[test]
    fn an_execute_keys_alike_whether_or_not_it_resent_its_types() {
        let params = |types: Option<&'static [u8]>| ExecuteParams {
            types,
            null_bitmap: &[0],
            values: &[1, b'7'],
        };
        let mut scratch = Vec::new();
        let a = execute_key(&mut scratch, 9, b"SELECT ?", 1, &params(Some(INT)));
        let b = execute_key(&mut scratch, 9, b"SELECT ?", 1, &params(Some(INT)));
        let c = execute_key(&mut scratch, 9, b"SELECT ?", 1, &params(Some(STR)));
        let d = execute_key(&mut scratch, 9, b"SELECT ?", 2, &params(Some(INT)));
        assert_eq!(a, b);
        assert_ne!(a, c, "other types, another key");
        assert_ne!(
            a, d,
            "prepared with other columns (before DDL), another key"
        );
        let mut m = Vec::new();
        execute_material(&mut m, b"/* trace */ SELECT ?", 1, &params(Some(INT)));
        assert_eq!(
            key(9, TAG_BINARY, &m),
            a,
            "trace comments at either end are not keyed"
        );
    }

    /// Statement 1 of `kind` and text `sql`, prepared in database `db` under the session's
    /// context.
    fn prepared_as(kind: StatementKind, sql: &'static str, st: &SessionState) -> Prepared {
        Prepared {
            context: st.prepare_ctx,
            db: st.db.clone(),
            ..Prepared::new(Bytes::from_static(sql.as_bytes()), kind, 1, 1)
        }
    }

    /// One row per way an execute arrives: what it is, and the packet's id as MariaDB reads
    /// it (-1: the statement prepared last, refused without its parameters' types).
    #[test]
    fn an_execute_is_what_its_statement_is() {
        use StatementKind::*;
        let with_id = |id: u32, p: Bytes| {
            let mut p = p.to_vec();
            p[1..5].copy_from_slice(&id.to_le_bytes());
            Bytes::from(p)
        };
        // (rule, kind, id sent, last prepared, packet, what it is)
        type Row = (
            &'static str,
            StatementKind,
            u32,
            Option<u32>,
            Bytes,
            &'static str,
        );
        let rows: Vec<Row> = vec![
            (
                "a prepared SELECT reads",
                Select,
                1,
                Some(1),
                execute(Some(INT)),
                "select",
            ),
            (
                "a bulk execute of a SELECT goes up",
                Select,
                1,
                Some(1),
                bulk(Some(INT)),
                "up",
            ),
            (
                "a prepared COMMIT may be answered here",
                Commit,
                1,
                Some(1),
                execute(None),
                "txn",
            ),
            (
                "a bulk COMMIT goes up",
                Commit,
                1,
                Some(1),
                bulk(None),
                "up",
            ),
            (
                "a prepared write goes up",
                Write,
                1,
                Some(1),
                execute(None),
                "up",
            ),
            (
                "an id naming no statement is the server's",
                Select,
                9,
                Some(1),
                execute(None),
                "as is",
            ),
            (
                "-1 is the last prepared",
                Select,
                u32::MAX,
                Some(1),
                execute(Some(INT)),
                "select",
            ),
            (
                "-1 without types is refused by the server",
                Select,
                u32::MAX,
                Some(1),
                execute(None),
                "as is",
            ),
            (
                "-1 after a failed prepare names none",
                Select,
                u32::MAX,
                None,
                execute(Some(INT)),
                "as is",
            ),
        ];
        let w = crate::engine::World::new(true);
        for (rule, kind, id, last, packet, want) in rows {
            let mut st = w.session(Some("db"));
            let p = prepared_as(kind, "SELECT ?", &st);
            st.stmts.insert(1, p);
            st.last_stmt = last;
            let got = match execute_came(&mut st, &with_id(id, packet)) {
                ExecuteCame::AsIs => "as is",
                ExecuteCame::Select { id: 1, .. } => "select",
                ExecuteCame::Transaction { id: 1, .. } => "txn",
                ExecuteCame::Up { id: 1 } => "up",
                other => panic!("{rule}: {other:?}"),
            };
            assert_eq!(got, want, "{rule}");
        }
    }

    /// One row per kind of statement an execute sends upstream: what the session does with
    /// it and what it planned (a SET no longer trusts the context; a CALL runs code unseen;
    /// a statement prepared elsewhere writes as an unknown write there).
    #[test]
    fn an_execute_going_up_plans_its_effects() {
        use StatementKind::*;
        // (rule, kind, text, the session's database moved since PREPARE, what it does,
        // context lost after, an unknown write planned)
        type Row = (
            &'static str,
            StatementKind,
            &'static str,
            bool,
            &'static str,
            bool,
            bool,
        );
        let rows: &[Row] = &[
            (
                "a write is the write path's",
                Write,
                "UPDATE child SET a = ?",
                false,
                "write",
                false,
                false,
            ),
            (
                "a SET hides what it changes",
                Set,
                "SET @@sql_mode = ?",
                false,
                "relay",
                true,
                false,
            ),
            (
                "a CALL may write anything",
                Call,
                "CALL p(?)",
                false,
                "relay",
                true,
                true,
            ),
            (
                "a COMMIT is a boundary",
                Commit,
                "COMMIT",
                false,
                "boundary",
                false,
                false,
            ),
            (
                "a SELECT prepared elsewhere executed in bulk",
                Select,
                "SELECT ?",
                true,
                "relay",
                false,
                true,
            ),
        ];
        let w = crate::engine::World::new(true);
        let planner = w.planner();
        for (rule, kind, sql, moved, want, lost, unknown) in rows {
            let mut st = w.session(Some("db"));
            let p = prepared_as(*kind, sql, &st);
            st.stmts.insert(1, p);
            st.last_stmt = Some(1);
            if *moved {
                st.set_db(Some("other".into()));
            }
            let (up, next) = planner.execute_up(&mut st, 1, &execute(Some(INT)));
            let got = match next {
                ExecuteUp::Write { .. } => "write",
                ExecuteUp::Relay { .. } => "relay",
                ExecuteUp::Boundary(_) => "boundary",
            };
            assert_eq!(got, *want, "{rule}");
            assert_eq!(
                up,
                execute(Some(INT)),
                "{rule}: the packet carries its types"
            );
            assert_eq!(st.lost_track, *lost, "{rule}");
            assert_eq!(!st.pending.is_empty(), *unknown, "{rule}");
        }
    }

    /// What an execute tells the read machine of how it came, one row per fact, and what
    /// the statement keeps after: the cursor the server holds, the types, why it was not
    /// keyed, the key material for EXPLAIN.
    #[test]
    fn an_execute_says_how_it_came_and_the_statement_keeps_what_the_server_holds() {
        use crate::policy::read::{Execute, Via};
        let p = stmt(Some(INT), Some(INT));
        let plain = execute(None);
        let mut with_cursor = plain.to_vec();
        with_cursor[5] = 1;
        let facts = |v: Via| match v {
            Via::Execute(e) => e,
            other => panic!("{other:?}"),
        };
        let base = Execute {
            cursor: false,
            cursor_open: false,
            long_data: false,
            bulk_seen: false,
            context_moved: None,
            malformed: false,
        };
        // (rule, packet, long data, the session's context, readable, expected facts)
        type Row<'a> = (&'static str, &'a [u8], bool, u64, bool, Execute);
        let rows: Vec<Row> = vec![
            ("a plain execute", &plain, false, 0, true, base),
            (
                "a cursor asked for",
                &with_cursor,
                false,
                0,
                true,
                Execute {
                    cursor: true,
                    ..base
                },
            ),
            (
                "a flag byte cut off counts as a cursor",
                &plain[..5],
                false,
                0,
                true,
                Execute {
                    cursor: true,
                    ..base
                },
            ),
            (
                "long data sent",
                &plain,
                true,
                0,
                true,
                Execute {
                    long_data: true,
                    ..base
                },
            ),
            (
                "parameters not readable",
                &plain,
                false,
                0,
                false,
                Execute {
                    malformed: true,
                    ..base
                },
            ),
            (
                "the context moved since PREPARE",
                &plain,
                false,
                9,
                true,
                Execute {
                    context_moved: prepared_context_moved(0, 9),
                    ..base
                },
            ),
        ];
        for (rule, packet, long, ctx, readable, want) in rows {
            assert_eq!(
                facts(p.execute_via(packet, long, ctx, readable)),
                want,
                "{rule}"
            );
        }
        // After: a cursor the answer said exists stays open; an error keeps one open; an
        // answer not seen counts as open; the types sent are the server's.
        let mut p = stmt(Some(STR), Some(INT));
        let answer = |cursor, error, columns| {
            Some(ReadAnswer {
                cursor,
                error,
                columns,
            })
        };
        p.after_execute(
            SentTypes::Known(Bytes::from_static(STR)),
            answer(true, false, None),
        );
        assert!(p.cursor_open);
        assert_eq!(p.server_types.as_deref(), Some(STR));
        p.after_execute(SentTypes::None, answer(false, true, None));
        assert!(p.cursor_open, "an error leaves the cursor it held");
        let columns = p.columns;
        p.after_execute(SentTypes::None, answer(false, false, Some(columns + 2)));
        assert!(!p.cursor_open);
        assert_eq!(p.columns, columns + 2, "re-prepared with other columns");
        p.after_execute(SentTypes::None, None);
        assert!(p.cursor_open, "not seen: counted open");
        // Before: refused before its parameters were read, it still learns their types.
        let mut p = stmt(None, None);
        p.before_decided(&execute(Some(STR)), false, Some(Reason::Cursor));
        assert_eq!(p.types.as_deref(), Some(STR));
        assert!(matches!(
            p.last_execute,
            LastExecute::NotKeyed(Reason::Cursor)
        ));
        // The key's material is swapped in, the old buffer handed back.
        let mut scratch = b"new".to_vec();
        p.keep_key_material(&mut scratch);
        assert!(matches!(&p.last_execute, LastExecute::Keyed(m) if m == b"new"));
        assert!(scratch.is_empty());
    }

    /// What a PREPARE's answer leaves: the statement kept under the server's id in the
    /// context of the moment, with MariaDB's -1 naming it; a failed prepare leaves -1 naming
    /// none.
    #[test]
    fn a_prepare_keeps_its_statement_in_the_context_of_the_moment() {
        let w = crate::engine::World::new(false);
        let mut st = w.session(Some("shop"));
        st.prepare_ctx = 42;
        let sql = Bytes::from_static(b"/* trace */ SELECT a FROM t WHERE id = ?");
        let scan = analysis::scan(&sql);
        prepare_answered(&mut st, Some((9, 1, 1)), sql.clone(), &scan);
        let s = &st.stmts[&9];
        assert_eq!(st.last_stmt, Some(9));
        assert_eq!(
            &s.key_sql[..],
            b"SELECT a FROM t WHERE id = ?",
            "keyed without the trace"
        );
        assert_eq!((s.params, s.columns, s.kind), (1, 1, StatementKind::Select));
        assert_eq!((s.context, s.db.as_deref()), (42, Some("shop")));
        assert!(s.types.is_none() && s.server_types.is_none() && !s.values_unsent);
        // A failed prepare: -1 names nothing, the statement prepared before stays.
        prepare_answered(&mut st, None, sql, &scan);
        assert_eq!(st.last_stmt, None);
        assert!(st.stmts.contains_key(&9));
    }

    /// A large parameter's key material is kept while a hit may need it for a replay, and
    /// neither the session's scratch nor an execute the server saw keeps it.
    #[test]
    fn a_large_material_is_kept_only_while_a_replay_may_need_it() {
        let big = vec![7u8; KEEP_SCRATCH + 10];
        let mut p = stmt(Some(STR), Some(STR));
        let mut scratch = big.clone();
        scratch.reserve(0);
        p.keep_key_material(&mut scratch);
        assert!(matches!(&p.last_execute, LastExecute::Keyed(m) if m.len() == big.len()));
        assert!(p.values_unsent, "served: kept for the replay");
        // The next keyed execute hands the large buffer back: the scratch drops it.
        let mut small = b"small".to_vec();
        p.keep_key_material(&mut small);
        assert_eq!(small.capacity(), 0, "the session keeps no large scratch");
        // A large material the server has seen is not kept.
        let mut scratch = big;
        p.keep_key_material(&mut scratch);
        p.after_execute(
            SentTypes::None,
            Some(ReadAnswer {
                cursor: false,
                error: false,
                columns: None,
            }),
        );
        assert!(matches!(p.last_execute, LastExecute::None));
        assert!(p.replay_before_long_data(1).is_none());
    }

    /// Long data after an execute the server did not see: that execute is sent first,
    /// rebuilt from its key's material with its types bound, once.
    #[test]
    fn long_data_replays_the_execute_the_server_did_not_see() {
        // The execute a client sent without types, the types remembered: the replay binds them.
        let sent = execute(None);
        let mut with_types = sent[..11].to_vec();
        with_types.push(1);
        with_types.extend_from_slice(STR);
        with_types.extend_from_slice(&sent[12..]);
        let keyed = |p: &mut Prepared| {
            let params = commands::execute_params(&sent, 1, Some(STR)).unwrap();
            let mut scratch = Vec::new();
            execute_key(&mut scratch, 0, &p.key_sql.clone(), p.columns, &params);
            p.keep_key_material(&mut scratch);
        };
        type Steps = fn(&mut Prepared);
        // (rule, what happened to the statement after it was prepared, the replay)
        let rows: Vec<(&str, Steps, Option<&[u8]>)> = vec![
            ("nothing executed", |_| {}, None),
            ("served from the cache", |_| {}, Some(&with_types)),
            (
                "the execute went up",
                |p| {
                    p.after_execute(
                        SentTypes::None,
                        Some(ReadAnswer {
                            cursor: false,
                            error: false,
                            columns: None,
                        }),
                    )
                },
                None,
            ),
            (
                "its material too large to keep",
                |p| p.last_execute = LastExecute::None,
                None,
            ),
            (
                "already replayed",
                |p| {
                    p.replay_before_long_data(1);
                },
                None,
            ),
            (
                "refused before keyed (a cursor)",
                |p| p.before_decided(&execute(None), true, Some(Reason::Cursor)),
                None,
            ),
        ];
        for (i, (rule, then, want)) in rows.into_iter().enumerate() {
            let mut p = stmt(Some(STR), Some(INT));
            if i > 0 {
                keyed(&mut p);
            }
            then(&mut p);
            assert_eq!(p.replay_before_long_data(1).as_deref(), want, "{rule}");
        }
        // A bulk execute after the hit (a bulk SELECT, refused before the server read its
        // types) gave the server no values: the hit's execute is still replayed.
        let mut p = stmt(Some(STR), Some(INT));
        keyed(&mut p);
        let (_, sent) = p.bulk_for_upstream(&bulk(Some(STR)));
        p.bulk_answered(sent, bulk_refused_before_types(Some(1295)));
        assert_eq!(
            p.server_types.as_deref(),
            Some(INT),
            "the server's own types held"
        );
        assert_eq!(
            p.replay_before_long_data(1).as_deref(),
            Some(&with_types[..]),
            "a bulk after a hit"
        );
        // The replay gives the server the types it carries.
        let mut p = stmt(Some(STR), Some(INT));
        keyed(&mut p);
        p.replay_before_long_data(1);
        assert_eq!(p.server_types.as_deref(), Some(STR));
    }

    /// (rule, the statement known, the types the execute carries, whether it may be keyed:
    /// a key built, the types the statement remembers after)
    #[test]
    fn an_execute_is_keyed_alike_whether_or_not_it_resends_types() {
        let w = crate::engine::World::new(false);
        type KeyRow = (
            &'static str,
            bool,
            Option<&'static [u8]>,
            bool,
            bool,
            Option<&'static [u8]>,
        );
        let rows: [KeyRow; 4] = [
            (
                "types sent, keyable: keyed, types learned",
                true,
                Some(INT),
                true,
                true,
                Some(INT),
            ),
            (
                "no types, keyable: keyed with the remembered",
                true,
                None,
                true,
                true,
                Some(STR),
            ),
            (
                "types sent, not keyable: learned all the same",
                true,
                Some(INT),
                false,
                false,
                Some(INT),
            ),
            (
                "statement gone: nothing",
                false,
                Some(INT),
                true,
                false,
                None,
            ),
        ];
        let mut keys = Vec::new();
        for (what, known, types, keyable, keyed, after) in rows {
            let mut st = w.session(Some("db"));
            if known {
                st.stmts.insert(1, stmt(Some(STR), None));
            }
            let mut scratch = Vec::new();
            let got = execute_keyed(&mut st, &mut scratch, &execute(types), 1, false, |via| {
                assert!(
                    matches!(via, crate::policy::read::Via::Execute(_)),
                    "{what}"
                );
                keyable
            });
            assert_eq!(got.is_some(), known, "{what}");
            let got = got.flatten();
            assert_eq!(got.is_some(), keyed, "{what}");
            keys.extend(got);
            let remembered = st.stmts.get(&1).and_then(|s| s.types.clone());
            assert_eq!(remembered.as_deref(), after, "{what}");
        }
        // Rows 1 and 2 execute the same value: with INT types re-sent, and with STR ones
        // remembered; they differ in the types, so they key apart.
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        let mut st = w.session(Some("db"));
        st.stmts.insert(1, stmt(Some(INT), None));
        let again = execute_keyed(&mut st, &mut Vec::new(), &execute(None), 1, false, |_| true);
        assert_eq!(
            again.flatten(),
            Some(keys[0]),
            "the same types remembered key the same"
        );
    }
}
