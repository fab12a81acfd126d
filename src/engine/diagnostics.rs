//! What a command owes the server's diagnostics before it goes up: whether the restore a
//! hit left owed is made now or skipped (a cacheable read sets them all itself), what the
//! command does to `Last_query_cost`, the text that may later replay it and the context it
//! ran under, and what a replay sends (`policy::diagnostics` holds the rules; this applies
//! them to the session's state).

use crate::policy::diagnostics::{self, CostContext, CostEffect, LastQueryCost, Replay};
use crate::protocol::packets::com;

use super::last::{Last, LAST_SQL_MAX};
use super::state::SessionState;

/// What [`before_command`] decided for one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed {
    /// What the command does to `Last_query_cost`.
    pub effect: CostEffect,
    /// A hit left a restore owed (its `FOUND_ROWS()` word, `SessionState::after_hit`):
    /// made before the command unless `skipped`.
    pub restore: Option<u64>,
    /// The command is a cacheable read: it sets every diagnostic itself, so the restore is
    /// not made first (the caller makes it afterwards if the server refused the read).
    pub skipped: bool,
    /// The hit's own statement is now what last set the cost (it was not a read-back's).
    pub hit_cost: bool,
    /// The command's text as a later replay of the cost would send it: a cacheable read's
    /// ([`Owed::read_text`]).
    pub read: Option<CostText>,
}

/// Where a cacheable read's replayable text is, without a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CostText {
    /// The command's own text (a COM_QUERY's, after its command byte).
    Query,
    /// A prepared statement's text, as a replay sends it.
    Prepared(bytes::Bytes),
}

impl Owed {
    /// The replayable text of command `payload`, if any.
    pub fn read_text<'a>(&'a self, payload: &'a [u8]) -> Option<&'a [u8]> {
        match self.read.as_ref()? {
            CostText::Query => payload.get(1..),
            CostText::Prepared(sql) => Some(sql),
        }
    }
}

/// Before command `payload` goes up (`cacheable_read`: a read the cache could hold, which
/// runs nothing that writes). None for a command that leaves the diagnostics alone (a ping,
/// COM_STATISTICS); else what is owed, the hit's restore taken from the state.
pub fn before_command(st: &mut SessionState, payload: &[u8], cacheable_read: bool) -> Option<Owed> {
    if matches!(payload.first(), Some(&com::PING | &com::STATISTICS)) {
        return None;
    }
    let effect = if cacheable_read {
        CostEffect::Sets
    } else {
        cost_effect(st, payload)
    };
    let restore = st.after_hit.take();
    let hit_cost = restore.is_some_and(|f| f & diagnostics::AFTER_READ_BACK == 0);
    let read = match payload.first() {
        _ if !cacheable_read => None,
        Some(&com::QUERY) => Some(CostText::Query),
        // Its text as the server parsed it at PREPARE: replayable as text only under the
        // context it was prepared in (the database, the sql_mode, …), which is the session's
        // now or the execute is no cacheable read (`policy::context::prepared_context_moved`).
        Some(&com::STMT_EXECUTE) => executed(st, payload)
            .filter(|s| s.context == st.prepare_ctx)
            .and_then(|s| {
                diagnostics::replay_text(&s.sql, true, false)
                    .map(|t| CostText::Prepared(s.sql.slice_ref(t)))
            }),
        _ => None,
    };
    Some(Owed {
        effect,
        restore,
        skipped: cacheable_read,
        hit_cost,
        read,
    })
}

/// What command `payload` does to `Last_query_cost` (`policy::diagnostics::cost_effect`): a
/// query's text, an execute's prepared text (unknown statement: `Unknown`); a prepare runs
/// nothing, unless its text may read it (MariaDB runs a prepare and an execute in one round
/// trip); other commands keep it.
pub fn cost_effect(st: &SessionState, payload: &[u8]) -> CostEffect {
    match payload.first() {
        Some(&com::QUERY) => diagnostics::cost_effect(&payload[1..]),
        Some(&com::STMT_PREPARE) if diagnostics::observes_last_query(&payload[1..]) => {
            CostEffect::Unknown
        }
        Some(&com::STMT_EXECUTE) => executed_sql(st, payload)
            .map_or(CostEffect::Unknown, |sql| diagnostics::cost_effect(sql)),
        _ => CostEffect::Keeps,
    }
}

/// The prepared SQL an execute names, if known (MariaDB's -1 resolved).
fn executed_sql<'a>(st: &'a SessionState, payload: &[u8]) -> Option<&'a bytes::Bytes> {
    executed(st, payload).map(|s| &s.sql)
}

fn executed<'a>(st: &'a SessionState, payload: &[u8]) -> Option<&'a super::state::Prepared> {
    let id = crate::protocol::commands::stmt_id(payload)?;
    let id = st.resolve_stmt(id)?;
    st.stmts.get(&id)
}

/// The session's `Last_query_cost` record, and the context its statements run under now
/// (`policy::diagnostics::CostContext`): its default database, its `sql_mode` as qcache
/// knows the text (set since the connect's read, or that read's), and what its bytes are
/// read as (`policy::context::literal_charset`). What a replay is compared against and run
/// under, for a text read, an execute and an SQL-level EXECUTE alike: every path records
/// and replays through the functions below.
fn cost_now(st: &mut SessionState) -> (&mut LastQueryCost, CostContext<'_>) {
    let SessionState {
        cost,
        db,
        vars,
        server_sql_mode,
        charset,
        ..
    } = st;
    let at = CostContext {
        db: db.as_deref(),
        sql_mode: vars
            .get("sql_mode")
            .or(server_sql_mode.as_ref())
            .map(String::as_str),
        charset: crate::policy::context::literal_charset(*charset, vars),
    };
    (cost, at)
}

/// The command after a hit: the hit, on `text` (None: not replayable), is what last set
/// the cost, under the session's context now (nothing went up since the hit).
pub fn note_hit(st: &mut SessionState, text: Option<&[u8]>) {
    let (cost, at) = cost_now(st);
    cost.hit(text.map(|t| (t, at)));
}

/// Command `payload`, of which [`before_command`] said `owed`, is on its way up: what it
/// does to the cost (a cacheable read's text kept with the context it runs under).
pub fn command_sent(st: &mut SessionState, owed: &Owed, payload: &[u8]) {
    match owed.read_text(payload) {
        Some(read) => {
            let (cost, at) = cost_now(st);
            cost.after(owed.effect, Some((read, at)));
        }
        None => st.cost.after(owed.effect, None),
    }
}

/// The statement sent was answered with a final ERR `code`: one the server could not parse
/// ran nothing and left `Last_query_cost` as it was
/// (`policy::diagnostics::LastQueryCost::error_answered`).
pub fn error_answered(st: &mut SessionState, code: Option<u16>) {
    st.cost.error_answered(code);
}

/// Before a statement of `effect`: what to send so that the server's `Last_query_cost` is
/// what the client would read, if it is owed (`policy::diagnostics::LastQueryCost::before`):
/// the text that set it, moved back to the database and `sql_mode` it ran under where they
/// moved since, or nothing where that cannot be done (a database or mode qcache cannot
/// spell back, a text beyond ASCII under another character set).
pub fn replay(st: &mut SessionState, effect: CostEffect) -> Option<Replay> {
    let (cost, now) = cost_now(st);
    cost.before(effect, now)
}

/// Whether a statement qcache sends may read tables now
/// (`policy::diagnostics::may_replay`): outside a transaction, or before a BEGIN qcache
/// answered and has not sent.
fn may_replay(st: &SessionState) -> bool {
    diagnostics::may_replay(
        st.txn.statement_runs_in_transaction(),
        st.txn.begin_pending(),
    )
}

/// The deferred BEGIN goes up on its own, ahead of a command that is not a cacheable read,
/// right after what is owed before it: the server's BEGIN sets `ROW_COUNT()` to 0 as the
/// `DO 0` a local BEGIN's OK owes would, so that one is not sent
/// (`policy::diagnostics::after_server_begin`, as when BEGIN rides along a read).
pub fn begin_goes_first(st: &mut SessionState) {
    st.after_hit = diagnostics::after_server_begin(st.after_hit);
}

/// What putting a hit's diagnostics right sends, before a statement of `effect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The hit's own statement, sent again (as `policy::diagnostics::replay_statement`
    /// wraps it): where the next statement may read `Last_query_cost`, which only the
    /// hit's run leaves. When the server refuses or warns, the rest is sent instead.
    pub replay_hit: Option<Vec<u8>>,
    /// The resetter for the `FOUND_ROWS()` owed, then its fallback where it differs, each
    /// sent only when the one before was refused or warned.
    pub resetters: Vec<String>,
    /// `ROW_COUNT()` back to 0 at the end (`DO 0`, the context's `RESTORE`): the restore is
    /// one after qcache's own read-back, as the SET before it left it.
    pub row_count_zero: bool,
}

/// [`Restore`] of restore word `pending` (`SessionState::after_hit`) before a statement of
/// `effect`, `last` being the session's record of its last statement.
pub fn restore(st: &SessionState, last: &Last, pending: u64, effect: CostEffect) -> Restore {
    let (found_rows, row_count_zero) = diagnostics::pending_restore(pending);
    let observes = matches!(
        effect,
        CostEffect::Reads | CostEffect::Shows | CostEffect::Unknown
    );
    let replay_hit = (observes && !row_count_zero && last.what.hit && may_replay(st))
        .then(|| hit_text(last))
        .flatten()
        .map(|sql| diagnostics::replay_statement(sql, st.mariadb).into_owned());
    let resetters = found_rows.map_or_else(Vec::new, |n| {
        let first = diagnostics::resetter(n, st.mariadb);
        let fallback = diagnostics::resetter_fallback(n, st.mariadb);
        let mut v = vec![first];
        if v[0] != fallback {
            v.push(fallback);
        }
        v
    });
    Restore {
        replay_hit,
        resetters,
        row_count_zero,
    }
}

/// The hit's text as a replay sends it, from `SHOW QCACHE LAST`'s record (None: not
/// replayable, `policy::diagnostics::replay_text`).
fn hit_text(last: &Last) -> Option<&[u8]> {
    let cut = last.sql.len() >= LAST_SQL_MAX;
    diagnostics::replay_text(&last.sql, last.prepared, cut)
}

/// The command after a hit, `last` being that hit's record: the hit is what last set the
/// cost ([`note_hit`]).
pub fn note_hit_cost(st: &mut SessionState, last: &Last) {
    if last.what.hit {
        note_hit(st, hit_text(last));
    }
}

/// [`replay`], where one may be sent at all: a cost is owed, no earlier statement's
/// warnings may still be read (the replay would clear them, and they weigh more than the
/// cost, docs/reliability.md), and it would run in no transaction (`may_replay`): else the
/// cost stays owed.
pub fn replay_owed(st: &mut SessionState, effect: CostEffect) -> Option<Replay> {
    if !st.cost.owed() || (st.diag_may_persist && !effect.clears_diagnostics()) || !may_replay(st) {
        return None;
    }
    replay(st, effect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::StatementKind;
    use crate::engine::state::Prepared;
    use bytes::Bytes;

    fn stmt(sql: &'static str) -> Prepared {
        Prepared::new(
            Bytes::from_static(sql.as_bytes()),
            StatementKind::Select,
            0,
            1,
        )
    }

    fn with(cmd: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![cmd];
        p.extend_from_slice(rest);
        p
    }

    /// One row per kind of command, with and without a hit's restore owed.
    #[test]
    fn what_each_command_owes_the_diagnostics() {
        let w = crate::engine::World::new(false);
        let exec = |id: u32| {
            let mut p = vec![com::STMT_EXECUTE];
            p.extend_from_slice(&id.to_le_bytes());
            p.extend_from_slice(&[0, 1, 0, 0, 0]);
            p
        };
        let select = with(com::QUERY, b"SELECT a FROM t");
        let read_back = diagnostics::AFTER_READ_BACK | 3;
        // (rule, packet, cacheable read, the hit's restore owed, what is owed)
        type Row = (&'static str, Vec<u8>, bool, Option<u64>, Option<Owed>);
        let owed = |effect, restore, skipped, hit_cost, read: Option<CostText>| {
            Some(Owed {
                effect,
                restore,
                skipped,
                hit_cost,
                read,
            })
        };
        let rows: Vec<Row> = vec![
            ("a ping keeps them", vec![com::PING], false, Some(1), None),
            (
                "statistics keeps them",
                vec![com::STATISTICS],
                false,
                None,
                None,
            ),
            (
                "a cacheable read sets them: the restore skipped, its text kept",
                select.clone(),
                true,
                Some(1),
                owed(CostEffect::Sets, Some(1), true, true, Some(CostText::Query)),
            ),
            (
                "the same read, nothing owed",
                select.clone(),
                true,
                None,
                owed(CostEffect::Sets, None, true, false, Some(CostText::Query)),
            ),
            (
                "a relayed read is restored first and not replayable",
                select,
                false,
                Some(1),
                owed(CostEffect::Sets, Some(1), false, true, None),
            ),
            (
                "a restore owed by a read-back is not the hit's cost",
                with(com::QUERY, b"DO 1"),
                false,
                Some(read_back),
                owed(CostEffect::Keeps, Some(read_back), false, false, None),
            ),
            (
                "SHOW STATUS reads the cost",
                with(com::QUERY, b"SHOW SESSION STATUS"),
                false,
                None,
                owed(CostEffect::Shows, None, false, false, None),
            ),
            (
                "an execute by its prepared text",
                exec(5),
                true,
                None,
                owed(
                    CostEffect::Sets,
                    None,
                    true,
                    false,
                    Some(CostText::Prepared(Bytes::from_static(b"SELECT b FROM t"))),
                ),
            ),
            (
                "an execute prepared under another context: its text is not replayable here",
                exec(7),
                true,
                None,
                owed(CostEffect::Sets, None, true, false, None),
            ),
            (
                "an execute of an unknown statement",
                exec(6),
                false,
                None,
                owed(CostEffect::Unknown, None, false, false, None),
            ),
            (
                "a prepare runs nothing",
                with(com::STMT_PREPARE, b"SELECT 1"),
                false,
                None,
                owed(CostEffect::Keeps, None, false, false, None),
            ),
            (
                "a prepare that may read the cost",
                with(com::STMT_PREPARE, b"SHOW STATUS LIKE 'Last_query_cost'"),
                false,
                None,
                owed(CostEffect::Unknown, None, false, false, None),
            ),
            (
                "another command keeps it",
                with(com::INIT_DB, b"db"),
                false,
                Some(1),
                owed(CostEffect::Keeps, Some(1), false, true, None),
            ),
            (
                "a change-user takes a hit's restore (MariaDB keeps FOUND_ROWS() across it)",
                with(com::CHANGE_USER, b"u\0"),
                false,
                Some(1),
                owed(CostEffect::Keeps, Some(1), false, true, None),
            ),
        ];
        for (rule, packet, cacheable, after_hit, want) in rows {
            let mut st = w.session(None);
            let mut here = stmt("SELECT b FROM t");
            here.context = st.prepare_ctx;
            st.stmts.insert(5, here);
            // Prepared under another context (another database, another sql_mode).
            let mut elsewhere = stmt("SELECT b FROM t");
            elsewhere.context = st.prepare_ctx ^ 1;
            st.stmts.insert(7, elsewhere);
            st.after_hit = after_hit;
            let got = before_command(&mut st, &packet, cacheable);
            assert_eq!(got, want, "{rule}");
            // The text a replay sends: the read's own, or its prepared statement's.
            let text = got.as_ref().and_then(|o| o.read_text(&packet));
            let want_text: Option<&[u8]> = match want.as_ref().and_then(|o| o.read.as_ref()) {
                Some(CostText::Query) => Some(b"SELECT a FROM t"),
                Some(CostText::Prepared(_)) => Some(b"SELECT b FROM t"),
                None => None,
            };
            assert_eq!(text, want_text, "{rule}: replay text");
            if got.is_some() {
                assert_eq!(st.after_hit, None, "{rule}: the restore is taken");
            } else {
                assert_eq!(st.after_hit, after_hit, "{rule}: left for the next");
            }
        }
    }

    /// One row per sequence a session goes through between the read that set
    /// `Last_query_cost` (a text read or an execute, a hit or a miss) and a statement that
    /// reads it (SHOW STATUS, an SQL-level EXECUTE or a CALL), with qcache's own SELECT (a
    /// read-back, a resetter) in between: what the replay sends, if anything.
    #[test]
    fn a_replay_runs_where_the_read_ran() {
        use crate::engine::context::server_context;
        #[derive(Clone, Copy)]
        enum E {
            /// A hit on this text (the command after it records it).
            Hit(&'static str),
            /// A miss of a text read goes up.
            Miss(&'static str),
            /// A miss of an execute of statement 5 goes up.
            Execute,
            /// A client statement that is no cacheable read goes up.
            Sent(&'static str),
            /// COM_INIT_DB goes up.
            InitDb,
            /// Its answer moved the session's database.
            Db(&'static str),
            /// A SET's read-back answered: the session's sql_mode (or another variable).
            Var(&'static str, &'static str),
            /// The context read again (a reset, a trigger's possible SET): its sql_mode.
            Reread(&'static str),
            /// One of qcache's own SELECTs.
            Private,
        }
        use E::*;
        type Want = Option<(&'static str, Option<(&'static str, &'static str)>)>;
        let rows: Vec<(&str, Vec<E>, &str, Want)> = vec![
            (
                "a hit, a read-back: the text as it ran",
                vec![Hit("SELECT id FROM t"), Sent("SET @x = 1"), Private],
                "SHOW STATUS",
                Some(("SELECT id FROM t", None)),
            ),
            (
                "a hit, USE, a read-back: no replay (a USE re-reads the database's charset and privileges)",
                vec![
                    Hit("SELECT id FROM t"),
                    Sent("USE b"),
                    Db("b"),
                    Sent("SET sql_mode = CONCAT(@@sql_mode, '')"),
                    Private,
                    Var("sql_mode", "STRICT_TRANS_TABLES"),
                ],
                "SHOW SESSION STATUS LIKE 'Last_query_cost'",
                None,
            ),
            (
                "COM_INIT_DB as USE: no replay",
                vec![Hit("SELECT id FROM t"), InitDb, Db("b"), Private],
                "SHOW STATUS",
                None,
            ),
            (
                "a miss read the same way: no replay",
                vec![
                    Miss("SELECT id FROM t WHERE id > 0"),
                    Sent("USE b"),
                    Db("b"),
                    Private,
                ],
                "SHOW STATUS",
                None,
            ),
            (
                "an execute prepared in another database: no replay",
                vec![Execute, Sent("USE b"), Db("b"), Private],
                "SHOW STATUS",
                None,
            ),
            (
                "sql_mode set after the hit (read back): under the hit's mode, and back",
                vec![
                    Hit("SELECT id FROM t WHERE v = \"x\""),
                    Sent("SET SESSION sql_mode = CONCAT('ANSI_QUOTES,', @@sql_mode)"),
                    Private,
                    Var("sql_mode", "ANSI_QUOTES,STRICT_TRANS_TABLES"),
                ],
                "SHOW STATUS",
                Some((
                    "SELECT id FROM t WHERE v = \"x\"",
                    Some((
                        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                        "SET SESSION sql_mode = 'ANSI_QUOTES,STRICT_TRANS_TABLES'",
                    )),
                )),
            ),
            (
                "before an SQL-level EXECUTE, which may read it, the same",
                vec![
                    Hit("SELECT id FROM t"),
                    Sent("SET sql_mode = 'ANSI_QUOTES'"),
                    Var("sql_mode", "'ANSI_QUOTES'"),
                    Private,
                ],
                "EXECUTE s",
                Some((
                    "SELECT id FROM t",
                    Some((
                        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                        "SET SESSION sql_mode = 'ANSI_QUOTES'",
                    )),
                )),
            ),
            (
                "SET NAMES since: an ASCII text reads the same",
                vec![
                    Hit("SELECT id FROM t"),
                    Sent("SET NAMES latin1"),
                    Var("character_set_client", "latin1"),
                    Private,
                ],
                "SHOW STATUS",
                Some(("SELECT id FROM t", None)),
            ),
            (
                "SET NAMES since: a text beyond ASCII reads otherwise, not replayed",
                vec![
                    Hit("SELECT id FROM t WHERE v = 'é'"),
                    Sent("SET NAMES latin1"),
                    Var("character_set_client", "latin1"),
                    Private,
                ],
                "SHOW STATUS",
                None,
            ),
            (
                "the context read again since: under the hit's mode",
                vec![Hit("SELECT id FROM t"), Reread("ANSI"), Private],
                "SHOW STATUS",
                Some((
                    "SELECT id FROM t",
                    Some((
                        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                        "SET SESSION sql_mode = 'ANSI'",
                    )),
                )),
            ),
            (
                "an execute prepared in another database: not replayable",
                vec![Sent("USE b"), Db("b"), Execute, Private],
                "SHOW STATUS",
                None,
            ),
            (
                "a write since: the cost's source unknown",
                vec![
                    Hit("SELECT id FROM t"),
                    Sent("INSERT INTO t VALUES (2)"),
                    Private,
                ],
                "SHOW STATUS",
                None,
            ),
        ];
        let w = crate::engine::World::new(false);
        for (why, events, reader, want) in rows {
            let mut st = w.session(Some("shop"));
            server_context(&mut st, &[("sql_mode", Some("STRICT_TRANS_TABLES"))]);
            st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
            let mut prepared = stmt("SELECT id FROM t WHERE id = 1");
            prepared.context = st.prepare_ctx;
            prepared.db = Some("shop".into());
            st.stmts.insert(5, prepared);
            for e in events {
                match e {
                    Hit(text) => note_hit(&mut st, Some(text.as_bytes())),
                    Miss(text) => {
                        let p = with(com::QUERY, text.as_bytes());
                        let owed = before_command(&mut st, &p, true).unwrap();
                        command_sent(&mut st, &owed, &p);
                    }
                    Execute => {
                        let mut p = vec![com::STMT_EXECUTE];
                        p.extend_from_slice(&5u32.to_le_bytes());
                        p.extend_from_slice(&[0, 1, 0, 0, 0]);
                        let owed = before_command(&mut st, &p, true).unwrap();
                        command_sent(&mut st, &owed, &p);
                    }
                    Sent(text) => {
                        let p = with(com::QUERY, text.as_bytes());
                        let owed = before_command(&mut st, &p, false).unwrap();
                        command_sent(&mut st, &owed, &p);
                    }
                    InitDb => {
                        let p = with(com::INIT_DB, b"b");
                        let owed = before_command(&mut st, &p, false).unwrap();
                        command_sent(&mut st, &owed, &p);
                    }
                    Db(db) => st.set_db(Some(db.into())),
                    Var(k, v) => {
                        st.vars.insert(k.into(), v.into());
                        st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
                    }
                    Reread(mode) => {
                        server_context(&mut st, &[("sql_mode", Some(mode))]);
                        st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
                    }
                    Private => st.cost.disturbed(),
                }
            }
            let effect = cost_effect(&st, &with(com::QUERY, reader.as_bytes()));
            let got = replay(&mut st, effect);
            let got = got.as_ref().map(|r| {
                (
                    std::str::from_utf8(&r.text).unwrap(),
                    r.sql_mode.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                )
            });
            assert_eq!(got, want, "{why}");
            assert_eq!(replay(&mut st, effect), None, "{why}: once");
        }
    }

    /// What putting a hit's diagnostics right sends, one row per rule: the hit's SELECT
    /// again only before a statement that may read the cost, after a hit it can replay,
    /// outside a transaction and not after a read-back; the resetter and its fallback for
    /// the rows owed; `ROW_COUNT()` to 0 after a read-back.
    #[test]
    fn what_a_restore_sends() {
        use crate::engine::last::Current;
        use crate::protocol::packets::status;
        let w = crate::engine::World::new(false);
        let (reads, keeps) = (CostEffect::Reads, CostEffect::Keeps);
        let kept = diagnostics::FOUND_ROWS_KEPT | diagnostics::AFTER_READ_BACK;
        let rb = diagnostics::AFTER_READ_BACK;
        let sel = "SELECT a FROM t";
        let nowait = "SET STATEMENT lock_wait_timeout = 0 FOR SELECT a FROM t";
        type Row = (
            &'static str,
            u64,
            CostEffect,
            &'static str,
            bool,
            bool,
            bool,
            bool,
        );
        type Want = (Option<&'static str>, usize, bool);
        #[rustfmt::skip]
        let rows: &[(Row, Want)] = &[
            // ((why, pending, effect, last sql, prepared, hit, in txn, mariadb),
            //  (replay, resetters, row_count_zero))
            (("a hit, then SHOW STATUS", 5, reads, sel, false, true, false, true), (Some(nowait), 2, false)),
            (("the same on MySQL", 5, reads, sel, false, true, false, false), (Some(sel), 1, false)),
            (("an unknown effect", 5, CostEffect::Unknown, sel, false, true, false, true), (Some(nowait), 2, false)),
            (("a statement that keeps the cost", 5, keeps, sel, false, true, false, true), (None, 2, false)),
            (("in a transaction", 5, reads, sel, false, true, true, true), (None, 2, false)),
            (("the last statement no hit", 5, reads, sel, false, false, false, true), (None, 2, false)),
            (("a prepared hit with a placeholder", 5, reads, "SELECT a FROM t WHERE id = ?", true, true, false, true), (None, 2, false)),
            (("one row owed", 1, reads, sel, false, false, false, true), (None, 1, false)),
            (("after a read-back", rb, reads, sel, false, true, false, true), (None, 1, true)),
            (("after a read-back, the rows kept", kept, keeps, sel, false, true, false, true), (None, 0, true)),
        ];
        for ((why, pending, effect, sql, prepared, hit, in_txn, mariadb), want) in rows {
            let mut st = w.session(Some("db"));
            st.mariadb = *mariadb;
            if *in_txn {
                st.txn
                    .status_answered(status::IN_TRANS | status::AUTOCOMMIT);
            }
            let last = Last {
                sql: sql.as_bytes().to_vec(),
                prepared: *prepared,
                what: Current {
                    hit: *hit,
                    ..Current::default()
                },
                none: false,
            };
            let r = restore(&st, &last, *pending, *effect);
            let replay = r
                .replay_hit
                .as_deref()
                .map(|t| std::str::from_utf8(t).unwrap());
            assert_eq!(
                (replay, r.resetters.len(), r.row_count_zero),
                *want,
                "{why}"
            );
        }
    }

    /// A cost owed is replayed only where nothing may still be read of an earlier
    /// statement's warnings and no transaction would run it.
    #[test]
    fn a_cost_owed_is_replayed_where_it_may_be() {
        use crate::protocol::packets::status;
        let w = crate::engine::World::new(false);
        // (why, owed, diagnostics may persist, in a transaction, replayed)
        let rows = [
            ("owed", true, false, false, true),
            ("nothing owed", false, false, false, false),
            ("warnings may still be read", true, true, false, false),
            ("in a transaction", true, false, true, false),
        ];
        for (why, owed, persist, in_txn, want) in rows {
            let mut st = w.session(Some("db"));
            note_hit(&mut st, Some(b"SELECT id FROM t"));
            if owed {
                st.cost.disturbed();
            }
            st.diag_may_persist = persist;
            if in_txn {
                st.txn
                    .status_answered(status::IN_TRANS | status::AUTOCOMMIT);
            }
            let got = replay_owed(&mut st, CostEffect::Reads);
            assert_eq!(got.is_some(), want, "{why}");
        }
    }
}
