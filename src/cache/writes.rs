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
