//! What a session owes the cache: the writes of the statement in flight ([`Pending`]) and of
//! the open transaction ([`Txn`]). Once the server has acknowledged them they become
//! invalidation values (`invalidation::writes`) applied through `invalidation::apply`.

use std::sync::Arc;

use super::versions::{KnownRows, TableHandle};
use crate::policy::privileges::PrivilegeChange;

/// What a transaction owes the cache; its state and read view are `policy::txn`'s.
#[derive(Debug, Default)]
pub struct Txn {
    /// Tables written in this transaction: never served from or stored to the cache
    /// by this session, and bumped again when it ends.
    pub written: Vec<TableHandle>,
    pub written_schemas: Vec<String>,
    /// A write in this transaction could not be analysed.
    pub written_unknown: bool,
    /// Its writes' standing with the parent maps: finished when the transaction ends and
    /// this is dropped (`cache::fkmap`).
    pub fk_tokens: Vec<super::fkmap::Token>,
    /// Tables of reads this transaction sent the server and it answered (the tables of
    /// their plans): the server holds a shared metadata lock on each until the transaction
    /// ends. Only entries of these are served in it (`policy::read::may_serve`).
    pub read: Vec<TableHandle>,
}

impl Txn {
    pub fn wrote(&self, t: &TableHandle) -> bool {
        self.written_unknown
            || self.written.iter().any(|w| Arc::ptr_eq(w, t))
            || self.written_schemas.iter().any(|s| *s == t.schema)
    }

    /// Counts a statement's writes (`pending`, at its OK inside this transaction) as this
    /// transaction's: tables written whole or by rows, schemas, and a write that could not
    /// be analysed.
    pub fn wrote_pending(&mut self, pending: &Pending) {
        self.written.extend(pending.tables.iter().cloned());
        self.written
            .extend(pending.rows.iter().map(|(t, _)| t.clone()));
        self.written_schemas.extend(pending.schemas.iter().cloned());
        self.written_unknown |= pending.all;
    }

    /// The server read `tables` in this transaction (and locked them until it ends).
    pub fn note_read(&mut self, tables: &[TableHandle]) {
        for t in tables {
            if !self.locked(t) {
                self.read.push(t.clone());
            }
        }
    }

    /// Whether a read of this transaction sent to the server read `t`.
    pub fn locked(&self, t: &TableHandle) -> bool {
        self.read
            .iter()
            .any(|r| Arc::ptr_eq(r, t) || (r.schema == t.schema && r.name == t.name))
    }
}

/// What a DDL statement may have changed in the catalog, as far as the statement says: what
/// `Catalog::refresh_changed` reloads. Names are lower-cased.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// Relations the statement names: created, altered, renamed from or to, dropped.
    pub objects: Vec<(String, String)>,
    /// Schemas created, altered or dropped as a whole.
    pub schemas: Vec<String>,
    /// The statement could not be read (or names nothing, as `DROP TRIGGER t` does): anything
    /// may have changed.
    pub everything: bool,
}

impl Changed {
    /// Adds what another statement changed.
    pub fn extend(&mut self, other: &Changed) {
        self.objects.extend(other.objects.iter().cloned());
        self.schemas.extend(other.schemas.iter().cloned());
        self.everything |= other.everything;
    }
}

/// Invalidation owed by the statement in flight, applied before its OK reaches the client.
#[derive(Debug, Default)]
pub struct Pending {
    pub tables: Vec<TableHandle>,
    /// Tables whose changed rows the statement names (granularity row): only their slices
    /// are bumped (`Versions::bump_rows`). Inside a transaction they count as written.
    pub rows: Vec<(TableHandle, Arc<KnownRows>)>,
    /// Tables of `tables` or `rows` that an UPDATE changes only in these columns (granularity
    /// row, `Catalog::update_changes_only_set`): their bump is `Versions::bump_columns`.
    pub columns: Vec<(TableHandle, Arc<[String]>)>,
    pub schemas: Vec<String>,
    pub all: bool,
    /// The statement changed the schema: reload the catalog before the client sees the OK.
    pub ddl: bool,
    /// What it changed there (what the reload covers).
    pub ddl_changed: Changed,
    /// The statement changes privileges: these users' (or every user's) entries stop being
    /// served before the client sees the OK.
    pub privileges: Option<PrivilegeChange>,
    /// Cached aggregates its known rows patch instead (`policy::patch`), if any.
    pub patch: Option<super::patches::PatchWrite>,
    /// The statement commits an open transaction before it runs, even when it then fails
    /// (`engine::write::refused_implicit_commit`).
    pub implicit_commit: bool,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
            && self.rows.is_empty()
            && self.schemas.is_empty()
            && !self.all
            && !self.ddl
            && self.privileges.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::versions::Versions;

    /// What a statement's writes leave a transaction counting as written: one row per part
    /// of `Pending`.
    #[test]
    fn a_statements_writes_count_as_the_transactions() {
        let v = Versions::new();
        let (t, r, other) = (v.table("db", "t"), v.table("db", "r"), v.table("db2", "x"));
        let ids: Arc<KnownRows> = vec![("id".to_string(), vec!["1".to_string()])].into();
        let rows: Vec<(&str, Pending, [bool; 3])> = vec![
            ("nothing written", Pending::default(), [false, false, false]),
            (
                "a table written whole",
                Pending {
                    tables: vec![t.clone()],
                    ..Pending::default()
                },
                [true, false, false],
            ),
            (
                "rows of a table",
                Pending {
                    rows: vec![(r.clone(), ids)],
                    ..Pending::default()
                },
                [false, true, false],
            ),
            (
                "a schema",
                Pending {
                    schemas: vec!["db2".to_string()],
                    ..Pending::default()
                },
                [false, false, true],
            ),
            (
                "a write not analysed: everything",
                Pending {
                    all: true,
                    ..Pending::default()
                },
                [true, true, true],
            ),
        ];
        for (rule, pending, want) in rows {
            let mut txn = Txn::default();
            txn.wrote_pending(&pending);
            let got = [txn.wrote(&t), txn.wrote(&r), txn.wrote(&other)];
            assert_eq!(got, want, "{rule}");
        }
    }
}
