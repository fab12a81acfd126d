//! What a command owes the server's diagnostics before it goes up: whether the restore a
//! hit left owed is made now or skipped (a cacheable read sets them all itself), what the
//! command does to `Last_query_cost`, and the text that may later replay it
//! (`policy::diagnostics` holds the rules; this applies them to the session's state).

use crate::policy::diagnostics::{self, CostEffect};
use crate::protocol::packets::com;

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
        Some(&com::STMT_EXECUTE) => executed_sql(st, payload).and_then(|sql| {
            diagnostics::replay_text(sql, true, false).map(|t| CostText::Prepared(sql.slice_ref(t)))
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
    let id = crate::protocol::commands::stmt_id(payload)?;
    let id = st.resolve_stmt(id)?;
    st.stmts.get(&id).map(|s| &s.sql)
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
                owed(CostEffect::Reads, None, false, false, None),
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
        ];
        for (rule, packet, cacheable, after_hit, want) in rows {
            let mut st = w.session(None);
            st.stmts.insert(5, stmt("SELECT b FROM t"));
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
}
