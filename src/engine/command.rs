//! What a client command is, by its first byte, and what it changes in the session's state
//! before it goes up (a statement forgotten, long data noted, a schema about to be dropped):
//! the session's command loop carries out the [`Route`] and does the IO.

use crate::protocol::commands::stmt_id;
use crate::protocol::packets::com;
use crate::protocol::response::{Expect, Response};

use super::state::SessionState;

/// How the session carries out one command.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Relayed as it came, its response read to the end `Expect` says: one packet (an
    /// empty packet, for the server's error; COM_STMT_RESET, COM_PING, …), rows
    /// (COM_STMT_FETCH), column definitions (COM_FIELD_LIST), or results (a command unknown
    /// to qcache: the server's answer decides how it ends).
    Relay(Expect),
    /// COM_QUIT: sent, and the session ends.
    Quit,
    /// A text statement: the statement pipeline.
    Query,
    /// COM_INIT_DB: relayed; the default database follows the server's OK.
    InitDb,
    Prepare,
    /// COM_STMT_EXECUTE: the statement pipeline; `id` the statement it names (MariaDB's -1
    /// resolved), for its digest; `release`: long data held for it, sent first.
    Execute {
        id: Option<u32>,
        release: Option<Release>,
    },
    /// MariaDB's COM_STMT_BULK_EXECUTE: the write path of an execute, no digest.
    BulkExecute {
        release: Option<Release>,
    },
    /// COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA: sent, never answered.
    Unanswered,
    /// COM_STMT_SEND_LONG_DATA held back until its execute (`SessionState::long_data`):
    /// nothing is sent, nothing answered.
    Held,
    /// COM_DROP_DB: relayed, `schema` (lower-cased) noted as a pending write; the default
    /// database is forgotten once the server dropped it.
    DropDb {
        schema: String,
    },
    ChangeUser,
    /// COM_RESET_CONNECTION: relayed; once the server reset, so does the session.
    ResetConnection,
    /// A replica's binlog dump: relayed as a stream until either side closes.
    BinlogStream,
}

/// Long data held back for an execute (`SessionState::release_long_data`): the execute the
/// server did not see, to send again first (its answer dropped; None when its parameters
/// were too large to keep), then the held packets, never answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Release {
    pub replay: Option<Vec<u8>>,
    pub held: Vec<bytes::Bytes>,
}

#[inline]
fn release(st: &mut SessionState, payload: &[u8]) -> Option<Release> {
    if st.holding_long_data == 0 {
        return None;
    }
    let (replay, held) = st.release_long_data(stmt_id(payload)?)?;
    Some(Release { replay, held })
}

/// The route of command `payload`, with what it changes in `st` before it is sent.
#[inline]
pub fn route(st: &mut SessionState, payload: &[u8]) -> Route {
    let Some(&cmd) = payload.first() else {
        return Route::Relay(Expect::OnePacket);
    };
    match cmd {
        com::QUIT => Route::Quit,
        com::QUERY => Route::Query,
        com::INIT_DB => Route::InitDb,
        com::STMT_PREPARE => Route::Prepare,
        com::STMT_EXECUTE => Route::Execute {
            id: stmt_id(payload).and_then(|id| st.resolve_stmt(id)),
            release: release(st, payload),
        },
        com::STMT_BULK_EXECUTE => Route::BulkExecute {
            release: release(st, payload),
        },
        com::STMT_FETCH => Route::Relay(Expect::Rows),
        com::STMT_CLOSE => {
            if let Some(id) = stmt_id(payload) {
                st.close_stmt(id);
            }
            Route::Unanswered
        }
        com::STMT_SEND_LONG_DATA => match stmt_id(payload) {
            Some(id) if st.long_data(id, payload) => Route::Held,
            _ => Route::Unanswered,
        },
        com::STMT_RESET => {
            if let Some(id) = stmt_id(payload) {
                st.stmt_reset(id);
            }
            Route::Relay(Expect::OnePacket)
        }
        com::FIELD_LIST => Route::Relay(Expect::FieldList),
        com::STATISTICS
        | com::PING
        | com::PROCESS_KILL
        | com::SET_OPTION
        | com::DEBUG
        | com::REFRESH
        | com::SHUTDOWN
        | com::CREATE_DB => Route::Relay(Expect::OnePacket),
        com::DROP_DB => {
            let schema = String::from_utf8_lossy(&payload[1..]).to_lowercase();
            st.pending.schemas.push(schema.clone());
            Route::DropDb { schema }
        }
        com::CHANGE_USER => Route::ChangeUser,
        com::RESET_CONNECTION => Route::ResetConnection,
        com::BINLOG_DUMP | com::BINLOG_DUMP_GTID => Route::BinlogStream,
        _ => Route::Relay(Expect::Results),
    }
}

/// How the session carries out a text statement (one statement in its COM_QUERY), its
/// effects already planned ([`Planner::text_route`]).
#[derive(Debug, PartialEq, Eq)]
pub enum TextRoute {
    /// A read: the read pipeline.
    Select,
    /// A SET: followed into the key, or answered for qcache's own `query_cache_type`.
    Set,
    /// A SHOW, whose rows may be qcache's own.
    Show,
    /// FLUSH or RESET: qcache's for QUERY CACHE, else relayed.
    FlushOrReset,
    /// A write: planned from its analysis and relayed.
    Write,
    /// CALL or a SQL-level EXECUTE: relayed, having planned the writes of code qcache does
    /// not see; `qct`: the `query_cache_type` it sets, followed once the server accepted it.
    SqlLevel {
        qct: Option<crate::config::QueryCacheType>,
    },
    /// BEGIN, COMMIT, ROLLBACK (and their XA forms): answered locally where the session
    /// may, else relayed as the transaction's boundary.
    Transaction,
    /// USE: relayed; the default database follows the server's OK.
    Use,
    /// UNLOCK TABLES: relayed; the session reads through the cache again once it succeeded.
    UnlockTables,
    /// Anything else: relayed as it is.
    Relay,
}

/// What a relayed statement's answer changes in the session, applied once the server
/// answered ([`followed`]): the server's word decides each.
pub enum Follow<'a> {
    /// Nothing qcache follows.
    Nothing,
    /// CALL or a SQL-level EXECUTE that sets `query_cache_type`: kept if it succeeded.
    Qct(Option<crate::config::QueryCacheType>),
    /// A transaction boundary sent as text (a refused XA START started nothing).
    Boundary(crate::policy::txn::XaSent),
    /// A transaction boundary sent as an execute of a prepared statement.
    ExecuteBoundary(crate::policy::txn::XaSent),
    /// USE (`sql`, its text): the default database follows the server's OK.
    Use(&'a [u8]),
    /// COM_INIT_DB (`name`, its argument): likewise.
    InitDb(&'a [u8]),
    /// COM_DROP_DB of `schema`: the default database is gone if it was that one.
    DropDb(&'a str),
    /// UNLOCK TABLES: the session reads through the cache again once it succeeded.
    UnlockTables,
}

/// Applies what `follow` says a relayed statement's answer `resp` changes.
pub fn followed(st: &mut SessionState, follow: Follow<'_>, resp: &Response) {
    let ok = !resp.error;
    match follow {
        Follow::Nothing => {}
        Follow::Qct(qct) => super::settings::qct_answered(st, qct, resp.error),
        Follow::Boundary(sent) => st.txn.boundary_answered(sent, resp.error),
        Follow::ExecuteBoundary(sent) => st.txn.execute_answered(sent, resp.error),
        Follow::Use(sql) if resp.oks > 0 && ok => {
            if let Some(db) = crate::analysis::use_schema(&String::from_utf8_lossy(sql)) {
                st.set_db(Some(db));
            }
        }
        Follow::InitDb(name) if resp.oks > 0 => {
            st.set_db(Some(String::from_utf8_lossy(name).into_owned()))
        }
        Follow::DropDb(schema) if ok => {
            if crate::policy::context::drop_forgets_db(st.db.as_deref(), schema) {
                st.set_db(None);
            }
        }
        Follow::UnlockTables if ok => st.txn.locks_released(),
        Follow::Use(_) | Follow::InitDb(_) | Follow::DropDb(_) | Follow::UnlockTables => {}
    }
}

impl super::Planner<'_> {
    /// The route of one text statement of `kind` (`text`: as the server reads it), having
    /// planned what it may change: writes the analysis of writes does not see, views and
    /// code it names, table locks, a CALL's or an EXECUTE's unseen writes, a SQL-level
    /// PREPARE's database and the SET it may hold.
    pub fn text_route(
        &self,
        st: &mut SessionState,
        kind: crate::analysis::StatementKind,
        text: &[u8],
    ) -> TextRoute {
        use crate::analysis::StatementKind as K;
        self.plan_text_statement(st, kind, text);
        if matches!(kind, K::Other | K::Flush) && self.plan_table_locks(st, text) {
            return TextRoute::UnlockTables;
        }
        match kind {
            K::Select => TextRoute::Select,
            K::Set => TextRoute::Set,
            K::Show => TextRoute::Show,
            K::Flush | K::Reset => TextRoute::FlushOrReset,
            K::Write => TextRoute::Write,
            K::Call | K::Execute => {
                // A procedure or a SQL-level prepared statement may write any table and SET
                // any variable: invalidate as configured and stop trusting the context.
                self.plan_call(st, text);
                TextRoute::SqlLevel {
                    qct: self.before_sql_level(st, text),
                }
            }
            K::Begin | K::Commit | K::Rollback => TextRoute::Transaction,
            K::Use => TextRoute::Use,
            _ => {
                super::write::note_sql_prepare(st, text);
                self.before_sql_level(st, text);
                TextRoute::Relay
            }
        }
    }
}

/// What qcache does with `FLUSH QUERY CACHE` / `RESET QUERY CACHE` (after its operator
/// check), decided by [`query_cache_statement`].
#[derive(Debug, PartialEq, Eq)]
pub struct QueryCacheStatement {
    /// The server is asked first: on it both end a transaction (an implicit commit), so
    /// inside one, or where the statement would open one, it goes up and its answer (and
    /// status) is the client's; elsewhere qcache answers OK itself.
    pub relayed: bool,
    /// RESET empties the cache (unless the server refused it); FLUSH defragmented MySQL's
    /// cache, and qcache's store has nothing to defragment.
    pub empties: bool,
}

/// A FLUSH or RESET statement (`kind`, text `sql`): Some for `… QUERY CACHE`, which is
/// qcache's; None for anything else, which goes to the server, having planned what it does
/// to privileges (`FLUSH PRIVILEGES` makes grant-table edits effective). Both read as the
/// server reads it: a versioned comment it skips is a comment, not the statement's first
/// word (`/*M!999999 LOGS */ FLUSH PRIVILEGES` reloads the grants), and no comment is a word
/// (`admin::statements::code_words`: `RESET /* x */ QUERY CACHE` is qcache's).
pub fn query_cache_statement(
    st: &mut SessionState,
    sql: &[u8],
    kind: crate::analysis::StatementKind,
) -> Option<QueryCacheStatement> {
    let sql = &*crate::analysis::server_text(sql, st.server);
    let text = crate::admin::statements::lowercase(sql);
    let words = crate::admin::statements::code_words(&text);
    if words.len() == 3 && words[1] == "query" && words[2] == "cache" {
        return Some(QueryCacheStatement {
            relayed: st.txn.statement_runs_in_transaction(),
            empties: kind == crate::analysis::StatementKind::Reset,
        });
    }
    super::write::plan_privileges(st, sql);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::StatementKind;
    use crate::engine::state::{LastExecute, Prepared};
    use bytes::Bytes;

    fn held(values_unsent: bool) -> Prepared {
        // A keyed execute of one STRING parameter '7': the key's material.
        let mut material = 8u32.to_le_bytes().to_vec();
        material.extend_from_slice(b"SELECT ?");
        // One column, then the parameter's type, null bitmap and value.
        material.extend_from_slice(&[1, 0, 0xfe, 0, 0xff, 0, 0xff, 1, b'7']);
        Prepared {
            last_execute: LastExecute::Keyed(material),
            values_unsent,
            ..Prepared::new(Bytes::from_static(b"SELECT ?"), StatementKind::Select, 1, 1)
        }
    }

    fn with(cmd: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![cmd];
        p.extend_from_slice(rest);
        p
    }

    /// One row per command kind: the route, and what it left of statement 7 (held, its last
    /// execute served from the cache) and of the pending schemas.
    #[test]
    fn each_command_routes_and_changes_what_it_should() {
        let world = crate::engine::World::new(false);
        let id7 = 7u32.to_le_bytes();
        let minus_one = u32::MAX.to_le_bytes();
        let replay = {
            let mut p = vec![com::STMT_EXECUTE];
            p.extend_from_slice(&id7);
            p.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0xfe, 0, 1, b'7']);
            p
        };
        let mut long = id7.to_vec();
        long.extend_from_slice(&[0, 0, b'x']);
        let mut long_minus_one = minus_one.to_vec();
        long_minus_one.extend_from_slice(&[0, 0, b'x']);
        // (rule, packet, route, statement 7 still held, its long data noted, pending schemas)
        type Row = (&'static str, Vec<u8>, Route, bool, bool, Vec<&'static str>);
        let rows: Vec<Row> = vec![
            (
                "empty",
                vec![],
                Route::Relay(Expect::OnePacket),
                true,
                false,
                vec![],
            ),
            ("quit", vec![com::QUIT], Route::Quit, true, false, vec![]),
            (
                "query",
                with(com::QUERY, b"SELECT 1"),
                Route::Query,
                true,
                false,
                vec![],
            ),
            (
                "init db",
                with(com::INIT_DB, b"d"),
                Route::InitDb,
                true,
                false,
                vec![],
            ),
            (
                "prepare",
                with(com::STMT_PREPARE, b"SELECT ?"),
                Route::Prepare,
                true,
                false,
                vec![],
            ),
            (
                "execute names its statement",
                with(com::STMT_EXECUTE, &id7),
                Route::Execute {
                    id: Some(7),
                    release: None,
                },
                true,
                false,
                vec![],
            ),
            (
                "execute -1 names the last prepared",
                with(com::STMT_EXECUTE, &minus_one),
                Route::Execute {
                    id: Some(7),
                    release: None,
                },
                true,
                false,
                vec![],
            ),
            (
                "bulk",
                with(com::STMT_BULK_EXECUTE, &id7),
                Route::BulkExecute { release: None },
                true,
                false,
                vec![],
            ),
            (
                "fetch",
                with(com::STMT_FETCH, &id7),
                Route::Relay(Expect::Rows),
                true,
                false,
                vec![],
            ),
            (
                "close forgets",
                with(com::STMT_CLOSE, &id7),
                Route::Unanswered,
                false,
                false,
                vec![],
            ),
            (
                "close -1 forgets the last prepared",
                with(com::STMT_CLOSE, &minus_one),
                Route::Unanswered,
                false,
                false,
                vec![],
            ),
            (
                "long data after a served execute replays it first",
                with(com::STMT_SEND_LONG_DATA, &long),
                Route::Held,
                true,
                true,
                vec![],
            ),
            (
                "long data to -1",
                with(com::STMT_SEND_LONG_DATA, &long_minus_one),
                Route::Held,
                true,
                true,
                vec![],
            ),
            (
                "reset",
                with(com::STMT_RESET, &id7),
                Route::Relay(Expect::OnePacket),
                true,
                false,
                vec![],
            ),
            (
                "ping",
                vec![com::PING],
                Route::Relay(Expect::OnePacket),
                true,
                false,
                vec![],
            ),
            (
                "field list",
                with(com::FIELD_LIST, b"t\0"),
                Route::Relay(Expect::FieldList),
                true,
                false,
                vec![],
            ),
            (
                "drop db notes the schema, lower-cased",
                with(com::DROP_DB, b"Shop"),
                Route::DropDb {
                    schema: "shop".into(),
                },
                true,
                false,
                vec!["shop"],
            ),
            (
                "change user",
                vec![com::CHANGE_USER],
                Route::ChangeUser,
                true,
                false,
                vec![],
            ),
            (
                "reset connection",
                vec![com::RESET_CONNECTION],
                Route::ResetConnection,
                true,
                false,
                vec![],
            ),
            (
                "binlog dump",
                vec![com::BINLOG_DUMP],
                Route::BinlogStream,
                true,
                false,
                vec![],
            ),
            (
                "unknown",
                vec![0x60],
                Route::Relay(Expect::Results),
                true,
                false,
                vec![],
            ),
        ];
        for (rule, packet, want, still_held, noted, schemas) in rows {
            let mut st = world.session(None);
            st.stmts.insert(7, held(true));
            st.last_stmt = Some(7);
            assert_eq!(route(&mut st, &packet), want, "{rule}");
            assert_eq!(st.stmts.contains_key(&7), still_held, "{rule}: held");
            let long_data = st.stmts.get(&7).is_some_and(|s| s.long_data);
            assert_eq!(long_data, noted, "{rule}: long data");
            assert_eq!(st.pending.schemas, schemas, "{rule}: schemas");
        }
        // Long data after an execute the server saw goes up at once.
        let mut st = world.session(None);
        st.stmts.insert(7, held(false));
        assert_eq!(
            route(&mut st, &with(com::STMT_SEND_LONG_DATA, &long)),
            Route::Unanswered
        );
        // Held long data goes up before the execute that consumes it, after the replay,
        // once; a reset or a close drops it (the server never had it).
        let long_packet = with(com::STMT_SEND_LONG_DATA, &long);
        for (rule, consumer, released) in [
            (
                "an execute releases it",
                with(com::STMT_EXECUTE, &id7),
                true,
            ),
            (
                "a bulk execute too",
                with(com::STMT_BULK_EXECUTE, &id7),
                true,
            ),
            ("a reset drops it", with(com::STMT_RESET, &id7), false),
            ("a close drops it", with(com::STMT_CLOSE, &id7), false),
        ] {
            let mut st = world.session(None);
            st.stmts.insert(7, held(true));
            st.last_stmt = Some(7);
            assert_eq!(route(&mut st, &long_packet), Route::Held, "{rule}");
            assert_eq!(
                route(&mut st, &long_packet),
                Route::Held,
                "{rule}: and the next"
            );
            assert_eq!(st.holding_long_data, 1, "{rule}");
            let want = Release {
                replay: Some(replay.clone()),
                held: vec![long_packet.clone().into(); 2],
            };
            let got = match route(&mut st, &consumer) {
                Route::Execute { release, .. } | Route::BulkExecute { release } => release,
                _ => None,
            };
            assert_eq!(got, released.then_some(want), "{rule}");
            assert_eq!(st.holding_long_data, 0, "{rule}: nothing held after");
            let again = route(&mut st, &with(com::STMT_EXECUTE, &id7));
            assert!(
                matches!(again, Route::Execute { release: None, .. }),
                "{rule}: released once"
            );
        }
    }

    /// One row per statement kind: its route and what it planned (writes pending, context
    /// lost, table locks, a SQL-level PREPARE's database).
    #[test]
    fn each_text_statement_routes_and_plans() {
        use crate::config::QueryCacheType;
        let world = crate::engine::World::new(false);
        // (rule, text, route, all invalidated, context lost, table locks, prepared in db)
        type Row = (
            &'static str,
            &'static str,
            TextRoute,
            bool,
            bool,
            bool,
            bool,
        );
        let rows: Vec<Row> = vec![
            (
                "a read",
                "SELECT id FROM parent",
                TextRoute::Select,
                false,
                false,
                false,
                false,
            ),
            (
                "a SET",
                "SET @a = 1",
                TextRoute::Set,
                false,
                false,
                false,
                false,
            ),
            (
                "a SHOW",
                "SHOW TABLES",
                TextRoute::Show,
                false,
                false,
                false,
                false,
            ),
            (
                "FLUSH",
                "FLUSH QUERY CACHE",
                TextRoute::FlushOrReset,
                false,
                false,
                false,
                false,
            ),
            (
                "RESET",
                "RESET QUERY CACHE",
                TextRoute::FlushOrReset,
                false,
                false,
                false,
                false,
            ),
            (
                "a write",
                "DELETE FROM child",
                TextRoute::Write,
                false,
                false,
                false,
                false,
            ),
            (
                "a CALL invalidates as configured and loses the context",
                "CALL p()",
                TextRoute::SqlLevel { qct: None },
                true,
                true,
                false,
                false,
            ),
            (
                "EXECUTE IMMEDIATE of a SET of query_cache_type",
                "EXECUTE IMMEDIATE 'SET SESSION query_cache_type = OFF'",
                TextRoute::SqlLevel {
                    qct: Some(QueryCacheType::Off),
                },
                true,
                true,
                false,
                false,
            ),
            (
                "BEGIN",
                "BEGIN",
                TextRoute::Transaction,
                false,
                false,
                false,
                false,
            ),
            (
                "COMMIT",
                "COMMIT",
                TextRoute::Transaction,
                false,
                false,
                false,
                false,
            ),
            ("USE", "USE db", TextRoute::Use, false, false, false, false),
            (
                "LOCK TABLES takes locks",
                "LOCK TABLES parent READ",
                TextRoute::Relay,
                false,
                false,
                true,
                false,
            ),
            (
                "UNLOCK TABLES",
                "UNLOCK TABLES",
                TextRoute::UnlockTables,
                false,
                false,
                false,
                false,
            ),
            (
                "a SQL-level PREPARE notes its database",
                "PREPARE s FROM 'DELETE FROM child'",
                TextRoute::Relay,
                false,
                false,
                false,
                true,
            ),
        ];
        for (rule, text, want, all, lost, locks, prepared_in) in rows {
            let mut st = world.session(Some("db"));
            let kind = crate::analysis::scan(text.as_bytes()).kind;
            let got = world.planner().text_route(&mut st, kind, text.as_bytes());
            assert_eq!(got, want, "{rule}");
            assert_eq!(st.pending.all, all, "{rule}: all invalidated");
            assert_eq!(st.lost_track, lost, "{rule}: context lost");
            assert_eq!(st.txn.table_locks(), locks, "{rule}: table locks");
            assert_eq!(
                !st.sql_prepared_in.is_empty(),
                prepared_in,
                "{rule}: prepared in"
            );
        }
    }

    /// FLUSH and RESET QUERY CACHE are qcache's, relayed first inside a transaction (an
    /// implicit commit there); other FLUSH statements go up, privileges planned.
    #[test]
    fn query_cache_statements_are_qcaches() {
        use crate::analysis::StatementKind as K;
        let world = crate::engine::World::new(false);
        // (rule, text, kind, in a transaction, what qcache does)
        type Row = (
            &'static str,
            &'static str,
            K,
            bool,
            Option<QueryCacheStatement>,
        );
        let qc = |relayed, empties| Some(QueryCacheStatement { relayed, empties });
        let rows: Vec<Row> = vec![
            (
                "RESET",
                "RESET QUERY CACHE",
                K::Reset,
                false,
                qc(false, true),
            ),
            (
                "FLUSH",
                "flush query cache;",
                K::Flush,
                false,
                qc(false, false),
            ),
            (
                "RESET in a transaction",
                "RESET QUERY CACHE",
                K::Reset,
                true,
                qc(true, true),
            ),
            ("FLUSH TABLES", "FLUSH TABLES", K::Flush, false, None),
            ("RESET MASTER", "RESET MASTER", K::Reset, false, None),
            (
                "a comment is no word of the statement",
                "FLUSH /* all of it */ QUERY CACHE",
                K::Flush,
                false,
                qc(false, false),
            ),
            (
                "a versioned comment the server skips is a comment",
                "RESET /*M!999999 SLAVE */ QUERY CACHE",
                K::Reset,
                false,
                qc(false, true),
            ),
        ];
        for (rule, sql, kind, in_txn, want) in rows {
            let mut st = world.session(Some("db"));
            if in_txn {
                st.txn
                    .status_answered(crate::protocol::packets::status::IN_TRANS | 2);
            }
            assert_eq!(
                query_cache_statement(&mut st, sql.as_bytes(), kind),
                want,
                "{rule}"
            );
        }
        // FLUSH PRIVILEGES plans what it does to privileges.
        let mut st = world.session(Some("db"));
        assert_eq!(
            query_cache_statement(&mut st, b"FLUSH PRIVILEGES", K::Flush),
            None
        );
        assert!(st.pending.privileges.is_some(), "FLUSH PRIVILEGES");
        // Read as the server reads it: behind a versioned comment it skips, too.
        for sql in [
            "/*M!999999 LOGS */ FLUSH PRIVILEGES",
            "/*!99999 SELECT 1 */ FLUSH PRIVILEGES",
        ] {
            let mut st = world.session(Some("db"));
            assert_eq!(
                query_cache_statement(&mut st, sql.as_bytes(), K::Flush),
                None
            );
            assert!(st.pending.privileges.is_some(), "{sql}");
        }
    }

    /// (rule, what is followed, the answer: an OK or an ERR, the default database after)
    #[test]
    fn a_relayed_answer_moves_the_default_database_only_on_the_servers_word() {
        let rows: [(&str, Follow<'static>, bool, Option<&str>); 8] = [
            (
                "USE answered OK",
                Follow::Use(b"USE other"),
                true,
                Some("other"),
            ),
            ("USE refused", Follow::Use(b"USE other"), false, Some("db")),
            (
                "COM_INIT_DB answered OK",
                Follow::InitDb(b"other"),
                true,
                Some("other"),
            ),
            (
                "COM_INIT_DB refused",
                Follow::InitDb(b"other"),
                false,
                Some("db"),
            ),
            (
                "DROP of the default database",
                Follow::DropDb("db"),
                true,
                None,
            ),
            ("DROP of another", Follow::DropDb("other"), true, Some("db")),
            ("DROP refused", Follow::DropDb("db"), false, Some("db")),
            ("anything else", Follow::Nothing, true, Some("db")),
        ];
        let w = crate::engine::World::new(false);
        for (rule, follow, ok, db) in rows {
            let mut st = w.session(Some("db"));
            let mut resp = Response::new(crate::protocol::response::Expect::OnePacket, false);
            resp.oks = u32::from(ok);
            resp.error = !ok;
            followed(&mut st, follow, &resp);
            assert_eq!(st.db.as_deref(), db, "{rule}");
        }
    }

    /// (rule, the answer an error: table locks held after UNLOCK TABLES)
    #[test]
    fn unlock_tables_releases_on_the_servers_word() {
        let w = crate::engine::World::new(false);
        for (rule, error, held) in [("answered OK", false, false), ("refused", true, true)] {
            let mut st = w.session(Some("db"));
            st.txn.locks_taken();
            let mut resp = Response::new(crate::protocol::response::Expect::Results, false);
            resp.error = error;
            followed(&mut st, Follow::UnlockTables, &resp);
            assert_eq!(st.txn.table_locks(), held, "{rule}");
        }
    }
}
