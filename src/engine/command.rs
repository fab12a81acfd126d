//! What a client command is, by its first byte, and what it changes in the session's state
//! before it goes up (a statement forgotten, long data noted, a schema about to be dropped):
//! the session's command loop carries out the [`Route`] and does the IO.

use crate::protocol::commands::stmt_id;
use crate::protocol::packets::com;

use super::state::SessionState;

/// How the session carries out one command.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// An empty packet: relayed for the server's error.
    Empty,
    /// COM_QUIT: sent, and the session ends.
    Quit,
    /// A text statement: the statement pipeline.
    Query,
    /// COM_INIT_DB: relayed; the default database follows the server's OK.
    InitDb,
    Prepare,
    /// COM_STMT_EXECUTE: the statement pipeline; `id` the statement it names (MariaDB's -1
    /// resolved), for its digest.
    Execute {
        id: Option<u32>,
    },
    /// MariaDB's COM_STMT_BULK_EXECUTE: the write path of an execute, no digest.
    BulkExecute,
    /// COM_STMT_FETCH: relayed, rows until the end.
    Fetch,
    /// COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA: sent, never answered. `first`: an
    /// execute to send before (`Prepared::replay_before_long_data`), its answer dropped.
    Unanswered {
        first: Option<Vec<u8>>,
    },
    /// Relayed, one packet back (COM_STMT_RESET, COM_PING, …).
    OnePacket,
    /// COM_FIELD_LIST: relayed, column definitions until the end.
    FieldList,
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
    /// Unknown to qcache: relayed, the server's answer decides how it ends.
    Unknown,
}

/// The route of command `payload`, with what it changes in `st` before it is sent.
#[inline]
pub fn route(st: &mut SessionState, payload: &[u8]) -> Route {
    let Some(&cmd) = payload.first() else {
        return Route::Empty;
    };
    match cmd {
        com::QUIT => Route::Quit,
        com::QUERY => Route::Query,
        com::INIT_DB => Route::InitDb,
        com::STMT_PREPARE => Route::Prepare,
        com::STMT_EXECUTE => Route::Execute {
            id: stmt_id(payload).and_then(|id| st.resolve_stmt(id)),
        },
        com::STMT_BULK_EXECUTE => Route::BulkExecute,
        com::STMT_FETCH => Route::Fetch,
        com::STMT_CLOSE => {
            if let Some(id) = stmt_id(payload) {
                st.close_stmt(id);
            }
            Route::Unanswered { first: None }
        }
        com::STMT_SEND_LONG_DATA => Route::Unanswered {
            first: stmt_id(payload)
                .and_then(|id| st.long_data(id))
                .map(|(_, replay)| replay),
        },
        com::STMT_RESET => {
            if let Some(id) = stmt_id(payload) {
                st.stmt_reset(id);
            }
            Route::OnePacket
        }
        com::FIELD_LIST => Route::FieldList,
        com::STATISTICS
        | com::PING
        | com::PROCESS_KILL
        | com::SET_OPTION
        | com::DEBUG
        | com::REFRESH
        | com::SHUTDOWN
        | com::CREATE_DB => Route::OnePacket,
        com::DROP_DB => {
            let schema = String::from_utf8_lossy(&payload[1..]).to_lowercase();
            st.pending.schemas.push(schema.clone());
            Route::DropDb { schema }
        }
        com::CHANGE_USER => Route::ChangeUser,
        com::RESET_CONNECTION => Route::ResetConnection,
        com::BINLOG_DUMP | com::BINLOG_DUMP_GTID => Route::BinlogStream,
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Hint, StatementKind};
    use crate::engine::state::{LastExecute, Prepared};
    use bytes::Bytes;

    fn held(values_unsent: bool) -> Prepared {
        // A keyed execute of one STRING parameter '7': the key's material.
        let mut material = 8u32.to_le_bytes().to_vec();
        material.extend_from_slice(b"SELECT ?");
        material.extend_from_slice(&[0xfe, 0, 0xff, 0, 0xff, 1, b'7']);
        Prepared {
            sql: Bytes::from_static(b"SELECT ?"),
            key_sql: Bytes::from_static(b"SELECT ?"),
            digest: 0,
            kind: StatementKind::Select,
            hint: Hint::None,
            params: 1,
            columns: 1,
            types: None,
            long_data: false,
            server_types: None,
            context: 0,
            db: None,
            bulk_seen: false,
            cursor_open: false,
            last_execute: LastExecute::Keyed(material),
            values_unsent,
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
            ("empty", vec![], Route::Empty, true, false, vec![]),
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
                Route::Execute { id: Some(7) },
                true,
                false,
                vec![],
            ),
            (
                "execute -1 names the last prepared",
                with(com::STMT_EXECUTE, &minus_one),
                Route::Execute { id: Some(7) },
                true,
                false,
                vec![],
            ),
            (
                "bulk",
                with(com::STMT_BULK_EXECUTE, &id7),
                Route::BulkExecute,
                true,
                false,
                vec![],
            ),
            (
                "fetch",
                with(com::STMT_FETCH, &id7),
                Route::Fetch,
                true,
                false,
                vec![],
            ),
            (
                "close forgets",
                with(com::STMT_CLOSE, &id7),
                Route::Unanswered { first: None },
                false,
                false,
                vec![],
            ),
            (
                "close -1 forgets the last prepared",
                with(com::STMT_CLOSE, &minus_one),
                Route::Unanswered { first: None },
                false,
                false,
                vec![],
            ),
            (
                "long data after a served execute replays it first",
                with(com::STMT_SEND_LONG_DATA, &long),
                Route::Unanswered {
                    first: Some(replay.clone()),
                },
                true,
                true,
                vec![],
            ),
            (
                "long data to -1",
                with(com::STMT_SEND_LONG_DATA, &long_minus_one),
                Route::Unanswered {
                    first: Some(replay.clone()),
                },
                true,
                true,
                vec![],
            ),
            (
                "reset",
                with(com::STMT_RESET, &id7),
                Route::OnePacket,
                true,
                false,
                vec![],
            ),
            (
                "ping",
                vec![com::PING],
                Route::OnePacket,
                true,
                false,
                vec![],
            ),
            (
                "field list",
                with(com::FIELD_LIST, b"t\0"),
                Route::FieldList,
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
            ("unknown", vec![0x60], Route::Unknown, true, false, vec![]),
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
        // Long data after an execute the server saw replays nothing.
        let mut st = world.session(None);
        st.stmts.insert(7, held(false));
        assert_eq!(
            route(&mut st, &with(com::STMT_SEND_LONG_DATA, &long)),
            Route::Unanswered { first: None }
        );
    }
}
