//! Policy: where a transaction's read view was opened, and which entries it may be served or
//! may store.
//!
//! The server opens a transaction's read view at a moment qcache cannot see: InnoDB takes it
//! at the first consistent read, and what reads is not only a SELECT (`CHECKSUM TABLE`,
//! `ANALYZE SELECT`, `HANDLER … READ`, a subquery in `SET` or `DO`, `EXPLAIN` of a subquery,
//! `START TRANSACTION WITH CONSISTENT SNAPSHOT` however it is spelled, XA START …). So the
//! rule does not look at the statement at all: **the read view is opened no later than the
//! first statement of the transaction that reaches the server**, whatever it is, and the
//! version point qcache judges the transaction by is read just before that statement is
//! sent. A point taken earlier than the server's view is only conservative (fewer hits); one
//! taken later would let a result of an old view be stored as current or a newer entry be
//! served to the old view.
//!
//! The server says when a transaction exists (SERVER_STATUS_IN_TRANS on every OK/EOF); a
//! transaction qcache opened itself (the deferred BEGIN) has sent nothing yet, so its point
//! is still to come.

use super::reason::Reason;
use crate::analysis::lexer::{Lexer, Token};

/// What a statement does to the session's XA transaction. From `XA START` until `XA COMMIT`
/// or `XA ROLLBACK` succeeds the server answers the session's reads by the XA state (ACTIVE:
/// its snapshot; IDLE after `XA END` and PREPARED: ERROR 1399 XAER_RMFAIL), which no entry
/// knows: such a session is never served and never stores, and its BEGIN is the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Xa {
    /// `XA START` / `XA BEGIN`: marks the session before it is sent, whatever the answer
    /// (a session already in one stays in it).
    Start,
    /// `XA COMMIT` / `XA ROLLBACK`: the session is out of its XA transaction once the server
    /// accepted it (it refuses one for another xid while the session has its own).
    End,
    /// Anything else, `XA END` and `XA PREPARE` included (the transaction goes on).
    None,
}

/// Reads a statement's effect on the XA state from its text (as the server reads it).
pub fn xa(sql: &[u8]) -> Xa {
    // `SET STATEMENT … FOR XA START` starts one too.
    let body = crate::analysis::statement_body(sql);
    let sql: &[u8] = &body;
    let toks: Vec<Token> = Lexer::new(sql).take(2).collect();
    let kw = |k: usize, w: &str| toks.get(k).is_some_and(|t| t.is_kw(sql, w));
    if !kw(0, "XA") {
        return Xa::None;
    }
    if kw(1, "START") || kw(1, "BEGIN") {
        Xa::Start
    } else if kw(1, "COMMIT") || kw(1, "ROLLBACK") {
        Xa::End
    } else {
        Xa::None
    }
}

/// The version points a session holds when a statement is about to reach the server.
/// `Snapshot` is the cache's version point (`cache::Snapshot`); the rules only move it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Points<Snapshot> {
    /// `None` outside a transaction qcache knows of; `Some(None)` inside one whose read view
    /// may not be open yet (nothing of it reached the server); `Some(Some(s))` once it is.
    pub txn: Option<Option<Snapshot>>,
    /// Taken before the statement in flight was sent: the point of a transaction that this
    /// statement opens (BEGIN, XA START, the first statement under autocommit=0, a COMMIT
    /// AND CHAIN, a BEGIN that implicitly commits the one before). Cleared after each
    /// response.
    pub candidate: Option<Snapshot>,
}

/// The points after a statement is sent at `now`: a transaction without a point gets `now`
/// (this statement may open its view), and the candidate for a transaction this statement
/// may open is `now` unless an earlier send of the same command already took one (the
/// earlier point is the safe one).
pub fn before_send<Snapshot: Copy>(p: Points<Snapshot>, now: Snapshot) -> Points<Snapshot> {
    Points {
        txn: p.txn.map(|s| s.or(Some(now))),
        candidate: p.candidate.or(Some(now)),
    }
}

/// What a transaction qcache follows knows of its read view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxnView<Snapshot> {
    /// The version point read before the first statement of the transaction was sent: the
    /// server's view is no older than it. `None` while nothing of the transaction reached
    /// the server (a deferred BEGIN).
    pub point: Option<Snapshot>,
    /// A statement of the transaction certainly opened the view: a forwarded cacheable read,
    /// which reads tables with a consistent read. Until then the view may open at any later
    /// statement, and a hit served before it would show data older than what the
    /// transaction's later reads see (the server opens the view after the hit).
    pub view_open: bool,
}

/// Which cached results a read may use and which it may store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadView<Snapshot> {
    /// No transaction, autocommit on: the read sees "now"; entries valid now are valid.
    Plain,
    /// Inside a transaction whose view is open and was opened after `Snapshot`: served only
    /// entries unchanged since then; stores only results whose tables did not change since.
    Snapshot(Snapshot),
    /// The view may not be open yet: this read goes to the server (never a hit), so that the
    /// view opens no later than it. With a point (some statement of the transaction already
    /// reached the server and may have opened the view, `CHECKSUM TABLE` say), its result
    /// is stored only under the same rule as [`ReadView::Snapshot`]; without one, the view
    /// opens at this read, after its stamps were read, and its result is current.
    Establishing(Option<Snapshot>),
}

impl<Snapshot: Copy> ReadView<Snapshot> {
    /// The point a result must be unchanged since to be stored, if any.
    pub fn store_point(self) -> Option<Snapshot> {
        match self {
            ReadView::Plain | ReadView::Establishing(None) => None,
            ReadView::Snapshot(s) | ReadView::Establishing(Some(s)) => Some(s),
        }
    }
}

/// The view a read runs in. `txn`: the transaction qcache follows, if any; `autocommit`:
/// the session's flag from the server's last status.
pub fn read_view<Snapshot>(txn: Option<TxnView<Snapshot>>, autocommit: bool) -> ReadView<Snapshot> {
    match txn {
        Some(TxnView {
            point: Some(snap),
            view_open: true,
        }) => ReadView::Snapshot(snap),
        Some(t) => ReadView::Establishing(t.point),
        // Under autocommit=0 a read outside a transaction opens one (the server will say so).
        None if !autocommit => ReadView::Establishing(None),
        None => ReadView::Plain,
    }
}

/// Whether a read's result may be stored, before it is sent: `unchanged_since_point` is
/// `Snapshot::unchanged` for the read's tables at the view's [`ReadView::store_point`]
/// (ignored when it has none). The stamps' own check at insert (`valid_in`) catches a write
/// that lands meanwhile.
pub fn may_store<Snapshot: Copy>(
    view: ReadView<Snapshot>,
    unchanged_since_point: bool,
) -> Result<(), Reason> {
    match view.store_point() {
        Some(_) if !unchanged_since_point => Err(Reason::ChangedSinceSnapshot),
        _ => Ok(()),
    }
}

/// Whether a plain SELECT is a locking read: InnoDB runs every plain SELECT of a transaction
/// under SERIALIZABLE as `… LOCK IN SHARE MODE` (an autocommit SELECT stays a consistent
/// read). A locking read waits for rows other transactions locked (or times out) and makes
/// their writes wait for its own shared locks, and it reads the latest committed rows rather
/// than the snapshot: a cached answer does none of that, so it is neither served nor stored.
/// `in_transaction` counts a read under autocommit=0, which opens one.
pub fn locking_read(in_transaction: bool, serializable: bool) -> bool {
    in_transaction && serializable
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version point: the rules never look inside one.
    type Snapshot = u64;
    const S0: Snapshot = 3;
    const NOW: Snapshot = 9;

    #[test]
    fn serializable_transactions_read_with_locks() {
        for (in_txn, ser, locking) in [
            (false, false, false),
            (false, true, false),
            (true, false, false),
            (true, true, true),
        ] {
            assert_eq!(locking_read(in_txn, ser), locking, "{in_txn} {ser}");
        }
    }

    #[test]
    fn before_send_rules() {
        let p = |txn, candidate| Points { txn, candidate };
        for (why, before, after) in [
            (
                "outside a transaction: the statement may open one; its point is now",
                p(None, None),
                p(None, Some(NOW)),
            ),
            (
                "a transaction nothing of which reached the server (deferred BEGIN): \
                 this statement, whatever it is, may open the view",
                p(Some(None), None),
                p(Some(Some(NOW)), Some(NOW)),
            ),
            (
                "a transaction with its point: kept; the candidate is for a transaction \
                 this statement may open after ending this one (COMMIT AND CHAIN, BEGIN)",
                p(Some(Some(S0)), None),
                p(Some(Some(S0)), Some(NOW)),
            ),
            (
                "a second send within one command keeps the earlier candidate",
                p(None, Some(S0)),
                p(None, Some(S0)),
            ),
        ] {
            assert_eq!(before_send(before, NOW), after, "{why}");
        }
    }

    #[test]
    fn xa_states() {
        for (sql, want) in [
            ("XA START 'x'", Xa::Start),
            ("xa begin 'x', 'b', 1", Xa::Start),
            ("/* c */ XA START 'x'", Xa::Start),
            ("XA END 'x'", Xa::None),
            ("XA PREPARE 'x'", Xa::None),
            ("XA RECOVER", Xa::None),
            ("XA COMMIT 'x' ONE PHASE", Xa::End),
            ("XA ROLLBACK 'x'", Xa::End),
            ("BEGIN", Xa::None),
            ("SELECT xa FROM t", Xa::None),
            ("XA", Xa::None),
            // SET STATEMENT … FOR runs the XA statement (MariaDB).
            ("SET STATEMENT sql_mode = '' FOR XA START 'x'", Xa::Start),
            ("SET STATEMENT a = 1 FOR XA ROLLBACK 'x'", Xa::End),
        ] {
            assert_eq!(xa(sql.as_bytes()), want, "{sql}");
        }
    }

    #[test]
    fn read_view_rules() {
        let t = |point, view_open| Some(TxnView { point, view_open });
        for (why, txn, autocommit, want) in [
            ("no transaction", None, true, ReadView::Plain),
            (
                "autocommit=0: this read opens the transaction",
                None,
                false,
                ReadView::Establishing(None),
            ),
            (
                "deferred BEGIN, nothing sent",
                t(None, false),
                true,
                ReadView::Establishing(None),
            ),
            (
                "BEGIN or CHECKSUM TABLE sent: the view may be open, maybe not",
                t(Some(S0), false),
                true,
                ReadView::Establishing(Some(S0)),
            ),
            (
                "a forwarded read opened the view",
                t(Some(S0), true),
                false,
                ReadView::Snapshot(S0),
            ),
        ] {
            assert_eq!(read_view(txn, autocommit), want, "{why}");
        }
    }

    #[test]
    fn may_store_rules() {
        for (view, unchanged, want) in [
            (ReadView::Plain, false, Ok(())),
            (ReadView::Establishing(None), false, Ok(())),
            (ReadView::Establishing(Some(S0)), true, Ok(())),
            (
                ReadView::Establishing(Some(S0)),
                false,
                Err(Reason::ChangedSinceSnapshot),
            ),
            (ReadView::Snapshot(S0), true, Ok(())),
            (
                ReadView::Snapshot(S0),
                false,
                Err(Reason::ChangedSinceSnapshot),
            ),
        ] {
            assert_eq!(may_store(view, unchanged), want, "{view:?} {unchanged}");
        }
    }
}
