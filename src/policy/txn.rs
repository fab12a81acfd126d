//! Policy: one session's transaction state, as one state machine. It owns what qcache follows
//! of a session's transaction (the server's status flags, the transaction open and its read
//! view, the deferred BEGIN, table locks, XA, the isolation level) and each method is one
//! event that moves it; the session calls the method for what happened and does the I/O its
//! answer asks for (sending, invalidating what a finished transaction wrote).
//!
//! `S` is the cache's version point (`cache::Snapshot`) and `W` what a transaction wrote
//! (`cache::writes::Txn`): the rules only move them, so both stay opaque here.

use super::reason::Reason;
use super::snapshot::{self, ReadView, TxnView, Xa};
use crate::protocol::packets::status;

/// A transaction qcache follows: what it knows of the server's read view, and the writes
/// the transaction owes the cache when it ends.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Open<S, W> {
    pub view: TxnView<S>,
    pub writes: W,
}

/// What a transaction statement (BEGIN, COMMIT, ROLLBACK, XA …) sent to the server did to
/// the XA state before its answer: handed back with the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XaSent {
    /// The session was (or may have been) in an XA transaction before the statement.
    was_xa: bool,
    /// The statement is XA COMMIT / XA ROLLBACK: accepted, it ends the XA transaction.
    ends: bool,
}

/// One session's transaction state (see the module's doc).
#[derive(Debug, PartialEq, Eq)]
pub struct Transaction<S, W> {
    /// Status flags of the last OK/EOF from the server (or of qcache's own answer to a
    /// deferred BEGIN and its COMMIT).
    status: u16,
    /// The transaction qcache follows: opened when the server reports IN_TRANS, or by a
    /// write acknowledged inside one; gone when it ends.
    open: Option<Open<S, W>>,
    /// The statement in flight begins or ends a transaction whatever the status flags say
    /// (BEGIN inside a transaction commits it; COMMIT AND CHAIN keeps IN_TRANS set).
    boundary: bool,
    /// Versions read before the statement in flight was sent; becomes the point of a
    /// transaction that this statement opens (`policy::snapshot::Points::candidate`).
    candidate: Option<S>,
    /// A plain BEGIN qcache answered that has not gone to the server yet
    /// (`session/begin.rs`).
    begin_pending: bool,
    /// BEGIN may be deferred in this session: `server.defer_begin`, until the server's
    /// answer to BEGIN could say more than qcache's (tracked transaction state, a read-only
    /// transaction, a chaining COMMIT, idle timeouts).
    defer_begin: bool,
    /// The session holds, or may hold, table locks (`policy::locks`): it is neither served
    /// from the cache nor fills it until `UNLOCK TABLES` or a reset.
    table_locks: bool,
    /// The session is, or may be, in an XA transaction (`policy::snapshot::xa`): it is
    /// neither served from the cache nor fills it, and its BEGIN goes to the server, until
    /// `XA COMMIT` / `XA ROLLBACK` succeeds or a reset.
    xa: bool,
    /// The session's isolation level is SERIALIZABLE (at connect, or set since): reads in a
    /// transaction are locking reads (`policy::snapshot::locking_read`).
    isolation_ser: bool,
    /// `SET TRANSACTION ISOLATION LEVEL SERIALIZABLE` for the next transaction: kept until a
    /// reset, like `next_txn_ru`.
    next_txn_ser: bool,
    /// The session's isolation level is READ UNCOMMITTED (read from the server at connect,
    /// or set since).
    isolation_ru: bool,
    /// `SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED` for the next transaction: kept
    /// until a reset, since qcache does not follow which statement consumes it.
    next_txn_ru: bool,
    /// Results must never be stored nor served (READ UNCOMMITTED): `isolation_ru ||
    /// next_txn_ru` as of the last [`refresh_dirty_reads`](Self::refresh_dirty_reads), which
    /// the session calls where it recomputes the key's fingerprint (which holds it).
    dirty_reads: bool,
}

impl<S: Copy, W: Default> Transaction<S, W> {
    /// A session just connected: the greeting's status flags, and whether the configuration
    /// lets BEGIN be deferred.
    pub fn new(status: u16, defer_begin: bool) -> Self {
        Transaction {
            status,
            open: None,
            boundary: false,
            candidate: None,
            begin_pending: false,
            defer_begin,
            table_locks: false,
            xa: false,
            isolation_ser: false,
            next_txn_ser: false,
            isolation_ru: false,
            next_txn_ru: false,
            dirty_reads: false,
        }
    }

    // ---- Queries -------------------------------------------------------------------------

    /// Status flags of the last OK/EOF (what qcache's own answers and hits carry).
    #[inline]
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Inside a transaction: one qcache follows, or the server's last status says so.
    #[inline]
    pub fn in_transaction(&self) -> bool {
        self.open.is_some() || self.status & status::IN_TRANS != 0
    }

    /// A statement sent now would run inside a transaction: one is open, a deferred BEGIN
    /// waits, or autocommit is off (the statement opens one).
    pub fn statement_runs_in_transaction(&self) -> bool {
        self.open.is_some()
            || self.begin_pending
            || self.status & (status::IN_TRANS | status::AUTOCOMMIT) != status::AUTOCOMMIT
    }

    /// qcache follows an open transaction.
    #[inline]
    pub fn followed(&self) -> bool {
        self.open.is_some()
    }

    /// What the transaction qcache follows has written, if it follows one.
    #[inline]
    pub fn writes(&self) -> Option<&W> {
        self.open.as_ref().map(|o| &o.writes)
    }

    /// A plain BEGIN qcache answered waits to be sent.
    #[inline]
    pub fn begin_pending(&self) -> bool {
        self.begin_pending
    }

    /// Whether a plain BEGIN may be answered by qcache now (`session/begin.rs`): deferring
    /// is on, and the server's BEGIN would do nothing qcache's answer does not.
    pub fn may_defer_begin(&self) -> bool {
        self.defer_begin
            // The server's BEGIN releases table locks; qcache's would not.
            && !self.table_locks
            // In an XA transaction the server refuses BEGIN (XAER_RMFAIL).
            && !self.xa
            && !self.begin_pending
            && !self.in_transaction()
            && self.status & status::AUTOCOMMIT != 0
    }

    /// The session holds, or may hold, table locks.
    #[inline]
    pub fn table_locks(&self) -> bool {
        self.table_locks
    }

    /// The session is, or may be, in an XA transaction.
    #[inline]
    pub fn xa(&self) -> bool {
        self.xa
    }

    /// The session reads uncommitted rows: nothing is stored or served.
    #[inline]
    pub fn dirty_reads(&self) -> bool {
        self.dirty_reads
    }

    /// Whether a plain SELECT sent now is a locking read (`policy::snapshot::locking_read`):
    /// a transaction is open or autocommit=0 opens one, and its isolation level is (or, for
    /// `SET TRANSACTION` of the next one, may be) SERIALIZABLE.
    #[inline]
    pub fn locking_reads(&self) -> bool {
        let in_txn = self.open.is_some()
            || self.status & status::IN_TRANS != 0
            || self.status & status::AUTOCOMMIT == 0;
        snapshot::locking_read(in_txn, self.isolation_ser || self.next_txn_ser)
    }

    /// The snapshot rules a read runs under now; None when the transaction state keeps it
    /// from the cache altogether (a locking read, table locks, XA).
    #[inline]
    pub fn read_view(&self) -> Option<ReadView<S>> {
        if self.locking_reads() || self.table_locks || self.xa {
            return None;
        }
        Some(snapshot::read_view(
            self.open.as_ref().map(|o| o.view),
            self.status & status::AUTOCOMMIT != 0,
        ))
    }

    /// Why a read of tables may be neither served nor stored in this transaction state, in
    /// the order the reasons are counted. `wrote`: whether the open transaction's writes
    /// cover one of the read's tables.
    pub fn read_refusal(&self, wrote: impl FnOnce(&W) -> bool) -> Result<(), Reason> {
        if self.dirty_reads {
            return Err(Reason::ReadUncommitted);
        }
        if self.locking_reads() {
            return Err(Reason::LockingRead);
        }
        if self.table_locks {
            return Err(Reason::TableLocks);
        }
        if self.xa {
            return Err(Reason::XaTransaction);
        }
        match self.writes() {
            Some(w) if wrote(w) => Err(Reason::WrittenInTransaction),
            _ => Ok(()),
        }
    }

    /// Whether the writes acknowledged by a response that reported `new_status` (None: it
    /// ended in an error) belong to a transaction.
    pub fn writes_in_transaction(&self, new_status: Option<u16>) -> bool {
        new_status.map_or(self.open.is_some(), |s| s & status::IN_TRANS != 0)
    }

    // ---- Transitions: BEGIN, COMMIT, ROLLBACK ----------------------------------------------

    /// A plain BEGIN arrived: if it may be deferred it is answered by qcache, and the
    /// status of that answer (IN_TRANS set) is returned for the session to apply.
    /// `settings_known`: the settings that decide what the server's BEGIN and COMMIT do
    /// (`policy::context::BEGIN_SENSITIVE`) are as last read; not after a CALL, an EXECUTE
    /// or a trigger that may have changed them unseen, when the server's BEGIN decides.
    pub fn begin_answered_locally(&mut self, settings_known: bool) -> Option<u16> {
        if !settings_known || !self.may_defer_begin() {
            return None;
        }
        self.begin_pending = true;
        Some(self.status | status::IN_TRANS)
    }

    /// A plain COMMIT or ROLLBACK arrived: if it ends a transaction whose BEGIN never left
    /// qcache it is answered by qcache, and the status of that answer (IN_TRANS clear) is
    /// returned for the session to apply; the transaction ends whatever the flags say.
    pub fn end_answered_locally(&mut self) -> Option<u16> {
        if !self.begin_pending {
            return None;
        }
        self.begin_pending = false;
        self.boundary = true;
        Some(self.status & !status::IN_TRANS)
    }

    /// The deferred BEGIN was queued to go to the server.
    pub fn begin_sent(&mut self) {
        self.begin_pending = false;
    }

    /// The server refused the deferred BEGIN: the transaction the client believes open is
    /// not (what it wrote, nothing yet, is dropped).
    pub fn begin_refused(&mut self) {
        self.status &= !status::IN_TRANS;
        self.open = None;
    }

    /// The server's answer to BEGIN may say more than qcache's would (a tracked transaction
    /// state, a read-only transaction, COMMIT that chains, idle timeouts): from now on
    /// BEGIN goes to the server as it comes.
    pub fn begin_needs_server(&mut self) {
        self.defer_begin = false;
    }

    /// A transaction statement (BEGIN, COMMIT, ROLLBACK, XA …) goes to the server: it begins
    /// or ends a transaction whatever the flags say, and XA START marks the session before
    /// it is sent. The answer goes back to [`boundary_answered`](Self::boundary_answered).
    pub fn boundary_sent(&mut self, xa: Xa) -> XaSent {
        self.boundary = true;
        let sent = XaSent {
            was_xa: self.xa,
            ends: xa == Xa::End,
        };
        if xa == Xa::Start {
            self.xa = true;
        }
        sent
    }

    /// The server answered a transaction statement sent as text: a refused one started no
    /// XA transaction, an accepted XA COMMIT / XA ROLLBACK ended it.
    pub fn boundary_answered(&mut self, sent: XaSent, error: bool) {
        if error && !sent.was_xa {
            self.xa = false;
        }
        if sent.ends && !error {
            self.xa = false;
        }
    }

    /// The server answered a transaction statement run as a prepared statement: an accepted
    /// XA COMMIT / XA ROLLBACK ended the XA transaction; a refused one keeps the mark (fewer
    /// hits, never a wrong answer).
    pub fn execute_answered(&mut self, sent: XaSent, error: bool) {
        if sent.ends && !error {
            self.xa = false;
        }
    }

    // ---- Transitions: the server's answers -------------------------------------------------

    /// A statement is about to reach the server at version point `now`: it may open the
    /// transaction's read view, or a transaction (`policy::snapshot::before_send`).
    pub fn before_send(&mut self, now: S) {
        let points = snapshot::before_send(
            snapshot::Points {
                txn: self.open.as_ref().map(|o| o.view.point),
                candidate: self.candidate,
            },
            now,
        );
        if let (Some(open), Some(s)) = (&mut self.open, points.txn) {
            open.view.point = s;
        }
        self.candidate = points.candidate;
    }

    /// A read was forwarded to the server: a cacheable one (a plain SELECT of tables, no
    /// locking clause) certainly opened the transaction's read view; anything else may or
    /// may not have (a `SELECT 1`, a locking read, a write) and leaves it unknown.
    pub fn read_forwarded(&mut self, cacheable_read: bool) {
        if cacheable_read {
            if let Some(open) = &mut self.open {
                open.view.view_open = true;
            }
        }
    }

    /// The writes of a transaction a write was just acknowledged in: the one qcache follows,
    /// or one it did not know of, opened at the point taken before the statement was sent.
    pub fn transaction_writes(&mut self) -> &mut W {
        let candidate = self.candidate;
        &mut self
            .open
            .get_or_insert_with(|| Open {
                view: TxnView {
                    point: candidate,
                    view_open: false,
                },
                writes: W::default(),
            })
            .writes
    }

    /// The server reported status flags `st` on an OK/EOF (or qcache answered with them):
    /// the transaction it ended, if any, is handed back for its writes to be invalidated;
    /// one it reports open where qcache knew of none is followed from the point taken
    /// before the statement that opened it (None when nothing was sent: the deferred BEGIN).
    pub fn status_answered(&mut self, st: u16) -> Option<W> {
        let was_in = self.status & status::IN_TRANS != 0;
        let ended = (was_in && st & status::IN_TRANS == 0) || self.boundary;
        let mut finished = None;
        if ended {
            self.boundary = false;
            finished = self.open.take().map(|o| o.writes);
        }
        if st & status::IN_TRANS != 0 && self.open.is_none() {
            self.open = Some(Open {
                view: TxnView {
                    point: self.candidate,
                    view_open: false,
                },
                writes: W::default(),
            });
        }
        self.status = st;
        finished
    }

    /// The response to the statement in flight is complete.
    pub fn response_ended(&mut self) {
        self.boundary = false;
        self.candidate = None;
    }

    /// The writes of the transaction qcache follows, to be extended as they are finished.
    pub fn writes_mut(&mut self) -> Option<&mut W> {
        self.open.as_mut().map(|o| &mut o.writes)
    }

    // ---- Transitions: locks, isolation, reset ----------------------------------------------

    /// A statement that takes table locks goes to the server (marked whatever the answer).
    pub fn locks_taken(&mut self) {
        self.table_locks = true;
    }

    /// The server accepted `UNLOCK TABLES` sent alone.
    pub fn locks_released(&mut self) {
        self.table_locks = false;
    }

    /// The session's isolation level is now known (SET of it, or read back from the server).
    pub fn isolation_set(&mut self, read_uncommitted: bool, serializable: bool) {
        self.isolation_ru = read_uncommitted;
        self.isolation_ser = serializable;
    }

    /// `SET TRANSACTION ISOLATION LEVEL` for the next transaction only: kept until a reset,
    /// since qcache does not follow which statement consumes it.
    pub fn next_isolation_set(&mut self, read_uncommitted: bool, serializable: bool) {
        self.next_txn_ru |= read_uncommitted;
        self.next_txn_ser |= serializable;
    }

    /// Brings [`dirty_reads`](Self::dirty_reads) up to the isolation levels, as the key's
    /// fingerprint is recomputed.
    pub fn refresh_dirty_reads(&mut self) {
        self.dirty_reads = self.isolation_ru || self.next_txn_ru;
    }

    /// The session is about to be reset (COM_RESET_CONNECTION, COM_CHANGE_USER, the
    /// connection ending): the server rolls back the open transaction, whose writes are
    /// handed back for invalidation (never committed, but bumping is harmless).
    pub fn ended_by_reset(&mut self) -> Option<W> {
        self.open.take().map(|o| o.writes)
    }

    /// The server answered an ERR with `code`: one after which it rolled back the whole
    /// transaction ([`error_rolls_back`]) ends the transaction qcache follows, whatever the
    /// last status said, and its writes are handed back for invalidation (never committed,
    /// but bumping is harmless, as for a reset). Until then hits and qcache's own answers
    /// would carry IN_TRANS, and the transaction's view would rule reads the server runs in
    /// none. Table locks, XA and the isolation levels stay as they are.
    pub fn error_answered(&mut self, code: Option<u16>) -> Option<W> {
        if !code.is_some_and(error_rolls_back) {
            return None;
        }
        self.status &= !(status::IN_TRANS | status::IN_TRANS_READONLY);
        self.begin_pending = false;
        self.open.take().map(|o| o.writes)
    }

    /// The session was reset: the server forgot the isolation levels, released the table
    /// locks, rolled back the (XA) transaction and any deferred BEGIN with it. The status
    /// flags come with the answer ([`status_after_reset`](Self::status_after_reset)).
    pub fn reset(&mut self) {
        self.isolation_ru = false;
        self.next_txn_ru = false;
        self.isolation_ser = false;
        self.next_txn_ser = false;
        self.table_locks = false;
        self.xa = false;
        self.open = None;
        self.begin_pending = false;
    }

    /// The status flags after a reset or change-user: the server's, or, when no answer told
    /// them, at least no transaction.
    pub fn status_after_reset(&mut self, st: Option<u16>) {
        match st {
            Some(st) => self.status = st,
            None => self.status &= !(status::IN_TRANS | status::IN_TRANS_READONLY),
        }
    }
}

/// `BEGIN`, `BEGIN WORK`, `START TRANSACTION`, `COMMIT [WORK]`, `ROLLBACK [WORK]` with
/// nothing else: no characteristics, no chaining, no comment that might be a hint; and
/// BEGIN or START TRANSACTION only where the session's `sql_mode` (as qcache knows its text,
/// None: unknown) cannot make `BEGIN` a block ([`begin_may_open_block`]): there the client's
/// bare BEGIN is the server's to refuse, and the deferred one qcache sends for a START
/// TRANSACTION, the word BEGIN, would be refused too.
pub fn plain(sql: &[u8], kind: crate::analysis::StatementKind, sql_mode: Option<&str>) -> bool {
    let text = match std::str::from_utf8(sql) {
        Ok(t) => t.trim().trim_end_matches(';').trim_end(),
        Err(_) => return false,
    };
    let mut words = text.split_ascii_whitespace();
    let (first, second) = (words.next().unwrap_or(""), words.next());
    if words.next().is_some() {
        return false;
    }
    let is = |w: &str, want: &str| w.eq_ignore_ascii_case(want);
    let work = second.is_none_or(|w| is(w, "work"));
    match kind {
        crate::analysis::StatementKind::Begin => {
            ((is(first, "begin") && work)
                || (is(first, "start") && second.is_some_and(|w| is(w, "transaction"))))
                && !begin_may_open_block(sql_mode)
        }
        crate::analysis::StatementKind::Commit => is(first, "commit") && work,
        crate::analysis::StatementKind::Rollback => is(first, "rollback") && work,
        _ => false,
    }
}

/// Whether MariaDB may read a bare `BEGIN [WORK]` as the start of a block, not of a
/// transaction: under `sql_mode=ORACLE` it opens an anonymous block (`BEGIN stmt; … END`),
/// so a bare `BEGIN` is refused (1064) and `BEGIN WORK` is a block calling WORK, and only
/// the server can answer it. `sql_mode` as qcache knows its text: any mention of ORACLE
/// counts, and so do a numeric mode (its bits are not decoded here) and an unknown one.
pub fn begin_may_open_block(sql_mode: Option<&str>) -> bool {
    sql_mode.is_none_or(|m| {
        let m = m.trim().trim_matches(|c| c == '\'' || c == '"').trim();
        m.to_ascii_uppercase().contains("ORACLE")
            || (!m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The ERR codes after which InnoDB has rolled back the session's whole transaction (it
/// marks the transaction for rollback, `thd_mark_transaction_to_rollback`), each seen on
/// MariaDB 10.11.19 (`@@in_transaction` 0 and the transaction's rows gone after it):
/// - 1213, ER_LOCK_DEADLOCK: the deadlock's victim;
/// - 1020, ER_CHECKREAD ("Record has changed since last read"): under
///   `innodb_snapshot_isolation` (MariaDB 10.6.18 / 10.11.8 on, a session variable), a
///   write or locking read of a row another transaction changed since the read view opened;
/// - 1206, ER_LOCK_TABLE_FULL: InnoDB ran out of room for row locks.
///
/// A lock wait timeout (1205) rolls back only the statement (unless the server runs with
/// `innodb_rollback_on_timeout`, which qcache does not read: then the next answer's status
/// tells, as before).
pub const ROLLS_BACK_TRANSACTION: &[u16] = &[1213, 1020, 1206];

/// Whether the server rolled back the session's whole transaction when it answered ERR
/// `code` ([`ROLLS_BACK_TRANSACTION`]).
pub fn error_rolls_back(code: u16) -> bool {
    ROLLS_BACK_TRANSACTION.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use status::{AUTOCOMMIT as AC, IN_TRANS as IN};

    /// A version point and a transaction's writes: the rules never look inside either.
    type T = Transaction<u64, Vec<u8>>;
    const S0: u64 = 3;
    const NOW: u64 = 9;

    fn idle() -> T {
        T::new(AC, true)
    }
    fn open(point: Option<u64>, view_open: bool, writes: Vec<u8>) -> Option<Open<u64, Vec<u8>>> {
        Some(Open {
            view: TxnView { point, view_open },
            writes,
        })
    }
    fn in_txn() -> T {
        T {
            status: AC | IN,
            open: open(Some(S0), false, vec![1]),
            ..idle()
        }
    }

    /// One row per transition rule: the state before, the event (and what it returns, as
    /// text), the state after.
    #[test]
    fn transitions() {
        type Event = fn(&mut T) -> String;
        let rows: Vec<(&str, T, Event, &str, T)> = vec![
            (
                "plain BEGIN, idle, autocommit: answered locally with IN_TRANS",
                idle(),
                |t| format!("{:?}", t.begin_answered_locally(true)),
                "Some(3)",
                T { begin_pending: true, ..idle() },
            ),
            (
                "a deadlock's ERR (1213): the server rolled the whole transaction back; its \
                 writes are handed back, IN_TRANS goes",
                in_txn(),
                |t| format!("{:?}", t.error_answered(Some(1213))),
                "Some([1])",
                T { status: AC, ..idle() },
            ),
            (
                "a deadlock's ERR under autocommit=0, table locks held: those stay",
                T {
                    status: IN,
                    table_locks: true,
                    ..in_txn()
                },
                |t| format!("{:?}", t.error_answered(Some(1213))),
                "Some([1])",
                T { status: 0, table_locks: true, ..idle() },
            ),
            (
                "innodb_snapshot_isolation's ERR (1020, ER_CHECKREAD): the whole transaction \
                 rolled back, as for a deadlock",
                in_txn(),
                |t| format!("{:?}", t.error_answered(Some(1020))),
                "Some([1])",
                T { status: AC, ..idle() },
            ),
            (
                "InnoDB's lock table full (1206): the whole transaction rolled back",
                in_txn(),
                |t| format!("{:?}", t.error_answered(Some(1206))),
                "Some([1])",
                T { status: AC, ..idle() },
            ),
            (
                "a duplicate key (1062) rolls back the statement only",
                in_txn(),
                |t| format!("{:?}", t.error_answered(Some(1062))),
                "None",
                in_txn(),
            ),
            (
                "a lock wait timeout's ERR (1205) rolls back the statement only",
                in_txn(),
                |t| format!("{:?}", t.error_answered(Some(1205))),
                "None",
                in_txn(),
            ),
            (
                "an ERR without a code read: nothing known",
                in_txn(),
                |t| format!("{:?}", t.error_answered(None)),
                "None",
                in_txn(),
            ),
            (
                "BEGIN with deferring off goes to the server",
                T { defer_begin: false, ..idle() },
                |t| format!("{:?}", t.begin_answered_locally(true)),
                "None",
                T { defer_begin: false, ..idle() },
            ),
            (
                "BEGIN after a CALL, EXECUTE or trigger that may have changed completion_type, \
                 tx_read_only or the idle timers goes to the server",
                idle(),
                |t| format!("{:?}", t.begin_answered_locally(false)),
                "None",
                idle(),
            ),
            (
                "BEGIN with table locks goes to the server (it releases them)",
                T { table_locks: true, ..idle() },
                |t| format!("{:?}", t.begin_answered_locally(true)),
                "None",
                T { table_locks: true, ..idle() },
            ),
            (
                "BEGIN in XA goes to the server (it refuses it)",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.begin_answered_locally(true)),
                "None",
                T { xa: true, ..idle() },
            ),
            (
                "BEGIN inside a transaction goes to the server (it commits)",
                in_txn(),
                |t| format!("{:?}", t.begin_answered_locally(true)),
                "None",
                in_txn(),
            ),
            (
                "BEGIN under autocommit=0 goes to the server",
                T { status: 0, ..idle() },
                |t| format!("{:?}", t.begin_answered_locally(true)),
                "None",
                T { status: 0, ..idle() },
            ),
            (
                "COMMIT of a deferred BEGIN: answered locally, ends the transaction",
                T { begin_pending: true, status: AC | IN, ..idle() },
                |t| format!("{:?}", t.end_answered_locally()),
                "Some(2)",
                T { boundary: true, status: AC | IN, ..idle() },
            ),
            (
                "COMMIT of a transaction the server knows goes to the server",
                in_txn(),
                |t| format!("{:?}", t.end_answered_locally()),
                "None",
                in_txn(),
            ),
            (
                "the deferred BEGIN is sent",
                T { begin_pending: true, ..idle() },
                |t| format!("{:?}", t.begin_sent()),
                "()",
                idle(),
            ),
            (
                "the deferred BEGIN refused: no transaction",
                in_txn(),
                |t| format!("{:?}", t.begin_refused()),
                "()",
                T { status: AC, ..idle() },
            ),
            (
                "the server's BEGIN says more: stop deferring",
                idle(),
                |t| format!("{:?}", t.begin_needs_server()),
                "()",
                T { defer_begin: false, ..idle() },
            ),
            (
                "XA START sent: marked before the answer, a boundary",
                idle(),
                |t| format!("{:?}", t.boundary_sent(Xa::Start)),
                "XaSent { was_xa: false, ends: false }",
                T { xa: true, boundary: true, ..idle() },
            ),
            (
                "XA START refused (text): out of XA again",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.boundary_answered(XaSent { was_xa: false, ends: false }, true)),
                "()",
                idle(),
            ),
            (
                "a refused statement inside XA keeps the mark",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.boundary_answered(XaSent { was_xa: true, ends: false }, true)),
                "()",
                T { xa: true, ..idle() },
            ),
            (
                "XA COMMIT accepted: out of XA",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.boundary_answered(XaSent { was_xa: true, ends: true }, false)),
                "()",
                idle(),
            ),
            (
                "XA COMMIT refused: still in XA",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.boundary_answered(XaSent { was_xa: true, ends: true }, true)),
                "()",
                T { xa: true, ..idle() },
            ),
            (
                "XA START refused as a prepared statement keeps the mark",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.execute_answered(XaSent { was_xa: false, ends: false }, true)),
                "()",
                T { xa: true, ..idle() },
            ),
            (
                "XA ROLLBACK accepted as a prepared statement: out of XA",
                T { xa: true, ..idle() },
                |t| format!("{:?}", t.execute_answered(XaSent { was_xa: true, ends: true }, false)),
                "()",
                idle(),
            ),
            (
                "sent outside a transaction: a candidate point for one it may open",
                idle(),
                |t| format!("{:?}", t.before_send(NOW)),
                "()",
                T { candidate: Some(NOW), ..idle() },
            ),
            (
                "sent in a transaction without a point (deferred BEGIN): it gets one",
                T { open: open(None, false, vec![]), ..idle() },
                |t| format!("{:?}", t.before_send(NOW)),
                "()",
                T { open: open(Some(NOW), false, vec![]), candidate: Some(NOW), ..idle() },
            ),
            (
                "a forwarded cacheable read opens the view",
                in_txn(),
                |t| format!("{:?}", t.read_forwarded(true)),
                "()",
                T { open: open(Some(S0), true, vec![1]), ..in_txn() },
            ),
            (
                "another forwarded statement leaves the view unknown",
                in_txn(),
                |t| format!("{:?}", t.read_forwarded(false)),
                "()",
                in_txn(),
            ),
            (
                "a write acknowledged in a transaction qcache did not know: opened at the candidate",
                T { candidate: Some(S0), ..idle() },
                |t| format!("{:?}", t.transaction_writes().push(7)),
                "()",
                T { candidate: Some(S0), open: open(Some(S0), false, vec![7]), ..idle() },
            ),
            (
                "IN_TRANS reported where none was followed: opened at the candidate",
                T { candidate: Some(S0), ..idle() },
                |t| format!("{:?}", t.status_answered(AC | IN)),
                "None",
                T { status: AC | IN, candidate: Some(S0), open: open(Some(S0), false, vec![]), ..idle() },
            ),
            (
                "IN_TRANS cleared: the transaction ends, its writes handed back",
                in_txn(),
                |t| format!("{:?}", t.status_answered(AC)),
                "Some([1])",
                T { status: AC, ..idle() },
            ),
            (
                "a boundary with IN_TRANS still set (COMMIT AND CHAIN): ends, and a new one opens",
                T { boundary: true, candidate: Some(NOW), ..in_txn() },
                |t| format!("{:?}", t.status_answered(AC | IN)),
                "Some([1])",
                T { candidate: Some(NOW), open: open(Some(NOW), false, vec![]), ..in_txn() },
            ),
            (
                "IN_TRANS still set: the transaction goes on",
                in_txn(),
                |t| format!("{:?}", t.status_answered(AC | IN)),
                "None",
                in_txn(),
            ),
            (
                "the response ended: boundary and candidate forgotten",
                T { boundary: true, candidate: Some(S0), ..idle() },
                |t| format!("{:?}", t.response_ended()),
                "()",
                idle(),
            ),
            (
                "LOCK TABLES sent",
                idle(),
                |t| format!("{:?}", t.locks_taken()),
                "()",
                T { table_locks: true, ..idle() },
            ),
            (
                "UNLOCK TABLES accepted",
                T { table_locks: true, ..idle() },
                |t| format!("{:?}", t.locks_released()),
                "()",
                idle(),
            ),
            (
                "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE replaces the level",
                T { isolation_ru: true, ..idle() },
                |t| format!("{:?}", t.isolation_set(false, true)),
                "()",
                T { isolation_ser: true, ..idle() },
            ),
            (
                "SET TRANSACTION ISOLATION LEVEL … for the next one accumulates",
                T { next_txn_ser: true, ..idle() },
                |t| format!("{:?}", t.next_isolation_set(true, false)),
                "()",
                T { next_txn_ser: true, next_txn_ru: true, ..idle() },
            ),
            (
                "dirty reads follow either READ UNCOMMITTED once refreshed",
                T { next_txn_ru: true, ..idle() },
                |t| format!("{:?}", t.refresh_dirty_reads()),
                "()",
                T { next_txn_ru: true, dirty_reads: true, ..idle() },
            ),
            (
                "before a reset: the open transaction's writes handed back",
                in_txn(),
                |t| format!("{:?}", t.ended_by_reset()),
                "Some([1])",
                T { open: None, ..in_txn() },
            ),
            (
                "reset: locks, XA, levels, deferred BEGIN and transaction forgotten",
                T {
                    isolation_ru: true,
                    next_txn_ru: true,
                    isolation_ser: true,
                    next_txn_ser: true,
                    table_locks: true,
                    xa: true,
                    begin_pending: true,
                    defer_begin: false,
                    dirty_reads: true,
                    ..in_txn()
                },
                |t| format!("{:?}", t.reset()),
                "()",
                T { status: AC | IN, defer_begin: false, dirty_reads: true, ..idle() },
            ),
            (
                "status after a reset the server answered",
                in_txn(),
                |t| format!("{:?}", t.status_after_reset(Some(AC))),
                "()",
                T { status: AC, ..in_txn() },
            ),
            (
                "status after a reset nothing answered: no transaction at least",
                T { status: AC | IN | status::IN_TRANS_READONLY, ..idle() },
                |t| format!("{:?}", t.status_after_reset(None)),
                "()",
                idle(),
            ),
        ];
        for (why, mut t, event, want_out, want) in rows {
            let out = event(&mut t);
            assert_eq!(out, want_out, "{why}");
            assert_eq!(t, want, "{why}");
        }
    }

    #[test]
    fn read_path_queries() {
        let v = |t: T| t.read_view();
        assert_eq!(v(idle()), Some(ReadView::Plain), "plain autocommit");
        assert_eq!(
            v(T {
                status: 0,
                ..idle()
            }),
            Some(ReadView::Establishing(None)),
            "autocommit=0"
        );
        assert_eq!(v(in_txn()), Some(ReadView::Establishing(Some(S0))));
        assert_eq!(
            v(T {
                open: open(Some(S0), true, vec![]),
                ..in_txn()
            }),
            Some(ReadView::Snapshot(S0))
        );
        assert_eq!(
            v(T {
                table_locks: true,
                ..idle()
            }),
            None,
            "table locks"
        );
        assert_eq!(v(T { xa: true, ..idle() }), None, "XA");
        assert_eq!(
            v(T {
                next_txn_ser: true,
                ..idle()
            }),
            Some(ReadView::Plain),
            "autocommit read"
        );
        assert_eq!(
            v(T {
                isolation_ser: true,
                ..in_txn()
            }),
            None,
            "locking read"
        );
        assert_eq!(
            v(T {
                next_txn_ser: true,
                status: 0,
                ..idle()
            }),
            None,
            "autocommit=0"
        );

        let r = |t: T, wrote: bool| t.read_refusal(|_| wrote);
        assert_eq!(
            r(idle(), true),
            Ok(()),
            "no transaction: its writes do not count"
        );
        assert_eq!(r(in_txn(), false), Ok(()));
        assert_eq!(r(in_txn(), true), Err(Reason::WrittenInTransaction));
        assert_eq!(
            r(
                T {
                    dirty_reads: true,
                    xa: true,
                    ..idle()
                },
                false
            ),
            Err(Reason::ReadUncommitted)
        );
        assert_eq!(
            r(
                T {
                    isolation_ser: true,
                    xa: true,
                    ..in_txn()
                },
                false
            ),
            Err(Reason::LockingRead)
        );
        assert_eq!(
            r(
                T {
                    table_locks: true,
                    xa: true,
                    ..idle()
                },
                false
            ),
            Err(Reason::TableLocks)
        );
        assert_eq!(
            r(T { xa: true, ..idle() }, false),
            Err(Reason::XaTransaction)
        );

        assert!(!idle().in_transaction());
        assert!(T {
            status: AC | IN,
            ..idle()
        }
        .in_transaction());
        assert!(T {
            open: open(None, false, vec![]),
            ..idle()
        }
        .in_transaction());
        assert!(!idle().statement_runs_in_transaction());
        assert!(T {
            begin_pending: true,
            ..idle()
        }
        .statement_runs_in_transaction());
        assert!(T {
            status: 0,
            ..idle()
        }
        .statement_runs_in_transaction());
        assert!(idle().may_defer_begin());
        assert!(!T {
            begin_pending: true,
            ..idle()
        }
        .may_defer_begin());
        assert!(!idle().writes_in_transaction(None));
        assert!(in_txn().writes_in_transaction(None));
        assert!(!in_txn().writes_in_transaction(Some(AC)));
        assert!(idle().writes_in_transaction(Some(AC | IN)));
    }

    #[test]
    fn only_plain_statements_qualify() {
        use crate::analysis::StatementKind;
        for (sql, kind) in [
            ("BEGIN", StatementKind::Begin),
            ("begin work", StatementKind::Begin),
            ("  Start  Transaction ; ", StatementKind::Begin),
            ("COMMIT", StatementKind::Commit),
            ("commit work;", StatementKind::Commit),
            ("ROLLBACK", StatementKind::Rollback),
        ] {
            assert!(
                plain(sql.as_bytes(), kind, Some("STRICT_TRANS_TABLES")),
                "{sql}"
            );
        }
        for (sql, kind) in [
            ("START TRANSACTION READ ONLY", StatementKind::Begin),
            (
                "START TRANSACTION WITH CONSISTENT SNAPSHOT",
                StatementKind::Begin,
            ),
            ("/* x */ BEGIN", StatementKind::Begin),
            ("XA START 'x'", StatementKind::Begin),
            ("COMMIT AND CHAIN", StatementKind::Commit),
            ("COMMIT RELEASE", StatementKind::Commit),
            ("ROLLBACK WORK AND NO CHAIN", StatementKind::Rollback),
            ("BEGIN", StatementKind::Commit),
            ("BEGIN\u{0}", StatementKind::Begin),
        ] {
            assert!(!plain(sql.as_bytes(), kind, Some("")), "{sql}");
        }
    }

    /// Under sql_mode=ORACLE a bare BEGIN opens a block: one row per spelling of the mode
    /// qcache may hold. START TRANSACTION is not deferred there either (qcache would send
    /// BEGIN for it); COMMIT and ROLLBACK stay plain.
    #[test]
    fn begin_under_a_mode_that_makes_it_a_block() {
        use crate::analysis::StatementKind::{Begin, Commit};
        for (mode, block) in [
            (Some("'ORACLE'"), true),
            (Some("STRICT_TRANS_TABLES,oracle"), true),
            (
                Some("PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ORACLE,NO_KEY_OPTIONS"),
                true,
            ),
            (Some("'8589934592'"), true),
            (None, true),
            (
                Some("STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO"),
                false,
            ),
            (Some("''"), false),
            (Some("MYSQL323"), false),
        ] {
            assert_eq!(begin_may_open_block(mode), block, "{mode:?}");
            assert_eq!(plain(b"BEGIN", Begin, mode), !block, "{mode:?}");
            assert_eq!(plain(b"begin work", Begin, mode), !block, "{mode:?}");
            assert_eq!(plain(b"START TRANSACTION", Begin, mode), !block, "{mode:?}");
            assert!(plain(b"COMMIT", Commit, mode), "{mode:?}");
        }
    }

    /// Only BEGIN, COMMIT and ROLLBACK kinds can be plain; every other kind is not, whatever
    /// its text.
    #[test]
    fn other_kinds_are_never_plain() {
        use crate::analysis::StatementKind;
        for kind in [
            StatementKind::Select,
            StatementKind::Set,
            StatementKind::Other,
        ] {
            assert!(!plain(b"BEGIN", kind, Some("")), "{kind:?}");
            assert!(!plain(b"COMMIT", kind, Some("")), "{kind:?}");
        }
    }

    /// A plain BEGIN may be deferred only with every condition met: one row per condition
    /// that stops it.
    #[test]
    fn what_stops_a_deferred_begin() {
        assert!(idle().may_defer_begin());
        type Edit = fn(&mut T);
        let stops: &[(&str, Edit)] = &[
            ("configured off", |t| t.begin_needs_server()),
            ("table locks", |t| t.locks_taken()),
            ("an XA transaction", |t| {
                t.boundary_sent(Xa::Start);
            }),
            ("a BEGIN already pending", |t| {
                t.begin_answered_locally(true);
            }),
            ("in a transaction", |t| {
                t.status_answered(AC | IN);
            }),
            ("autocommit off", |t| {
                t.status_answered(0);
            }),
        ];
        for (why, edit) in stops {
            let mut t = idle();
            edit(&mut t);
            assert!(!t.may_defer_begin(), "{why}");
            assert_eq!(t.begin_answered_locally(true), None, "{why}");
        }
        // Settings not known since a CALL: the server's BEGIN decides.
        assert_eq!(idle().begin_answered_locally(false), None);
    }

    /// A deferred BEGIN answers IN_TRANS; the COMMIT or ROLLBACK that ends it before it was
    /// sent answers without it, and the transaction ends at the next status.
    #[test]
    fn a_local_begin_and_its_local_end() {
        let mut t = idle();
        assert_eq!(t.begin_answered_locally(true), Some(AC | IN));
        assert!(t.begin_pending() && t.statement_runs_in_transaction());
        assert_eq!(t.end_answered_locally(), Some(AC));
        assert!(!t.begin_pending());
        // Nothing pending: COMMIT goes to the server.
        assert_eq!(t.end_answered_locally(), None);
        // Once sent, the BEGIN is the server's and so is its end.
        let mut t = idle();
        t.begin_answered_locally(true);
        t.begin_sent();
        assert_eq!(t.end_answered_locally(), None);
    }

    /// Why a read is refused, in the order the reasons are counted: one row per state, the
    /// first reason that applies.
    #[test]
    fn read_refusals_in_order() {
        type Edit = fn(&mut T);
        let rows: &[(Edit, Result<(), Reason>)] = &[
            (|_| {}, Ok(())),
            (
                |t| {
                    t.isolation_set(true, true);
                    t.refresh_dirty_reads();
                    t.locks_taken();
                },
                Err(Reason::ReadUncommitted),
            ),
            (
                |t| {
                    t.status_answered(AC | IN);
                    t.isolation_set(false, true);
                    t.locks_taken();
                },
                Err(Reason::LockingRead),
            ),
            (
                |t| {
                    t.locks_taken();
                    t.boundary_sent(Xa::Start);
                },
                Err(Reason::TableLocks),
            ),
            (
                |t| {
                    t.boundary_sent(Xa::Start);
                },
                Err(Reason::XaTransaction),
            ),
            (
                |t| {
                    t.status_answered(AC | IN);
                    t.transaction_writes().push(1);
                },
                Err(Reason::WrittenInTransaction),
            ),
        ];
        for (i, (edit, want)) in rows.iter().enumerate() {
            let mut t = idle();
            edit(&mut t);
            let got = t.read_refusal(|w| w.contains(&1));
            assert_eq!(got, *want, "row {i}");
        }
    }

    /// XA: START marks the session before it is sent; a refused START (not already in one)
    /// clears it, an accepted COMMIT/ROLLBACK clears it, a refused one keeps it.
    #[test]
    fn xa_marks_follow_the_answers() {
        let cases = [
            (Xa::Start, false, true),
            (Xa::Start, true, false),
            (Xa::None, false, true),
            (Xa::End, false, false),
            (Xa::End, true, true),
        ];
        for (xa, error, still) in cases {
            let mut t = idle();
            if xa != Xa::Start {
                let s = t.boundary_sent(Xa::Start);
                t.boundary_answered(s, false);
            }
            let sent = t.boundary_sent(xa);
            assert!(t.xa(), "{xa:?}: marked while in flight");
            t.boundary_answered(sent, error);
            assert_eq!(t.xa(), still, "{xa:?} error={error}");
        }
        // A refused XA START while already in one keeps the mark.
        let mut t = idle();
        let s = t.boundary_sent(Xa::Start);
        t.boundary_answered(s, false);
        let again = t.boundary_sent(Xa::Start);
        t.boundary_answered(again, true);
        assert!(t.xa());
        // As a prepared statement, a refused end keeps it, an accepted one clears it.
        let sent = t.boundary_sent(Xa::End);
        t.execute_answered(sent, true);
        assert!(t.xa());
        let sent = t.boundary_sent(Xa::End);
        t.execute_answered(sent, false);
        assert!(!t.xa());
    }

    /// Whether a statement sent now runs inside a transaction, one row per state.
    #[test]
    fn statements_run_in_transactions() {
        type Edit = fn(&mut T);
        let rows: &[(&str, Edit, bool)] = &[
            ("autocommit, idle", |_| {}, false),
            (
                "autocommit off",
                |t| {
                    t.status_answered(0);
                },
                true,
            ),
            (
                "server says in a transaction",
                |t| {
                    t.status_answered(AC | IN);
                },
                true,
            ),
            (
                "a deferred BEGIN waits",
                |t| {
                    t.begin_answered_locally(true);
                },
                true,
            ),
        ];
        for (why, edit, want) in rows {
            let mut t = idle();
            edit(&mut t);
            assert_eq!(t.statement_runs_in_transaction(), *want, "{why}");
        }
    }

    /// A reset forgets locks, XA, isolation levels, the open transaction and a deferred
    /// BEGIN; without an answer the status keeps autocommit and loses IN_TRANS.
    #[test]
    fn a_reset_forgets_the_transaction_state() {
        let mut t = idle();
        t.locks_taken();
        t.boundary_sent(Xa::Start);
        t.isolation_set(true, true);
        t.next_isolation_set(true, true);
        t.status_answered(AC | IN);
        t.transaction_writes().push(7);
        assert_eq!(t.ended_by_reset(), Some(vec![7]));
        t.reset();
        t.refresh_dirty_reads();
        t.status_after_reset(None);
        assert!(!t.table_locks() && !t.xa() && !t.dirty_reads() && !t.locking_reads());
        assert!(!t.in_transaction() && !t.begin_pending());
        assert_eq!(t.status(), AC);
        t.status_after_reset(Some(0));
        assert_eq!(t.status(), 0);
    }
}
