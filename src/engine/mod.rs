//! The per-statement decisions, sans IO, between `shared`/`cache`/`policy` and `session`:
//! what a session holds between commands (`state`); what a write changes, planned before it
//! is sent (`write`); and which row slices a read stamps and a write bumps, with what a
//! write owes the foreign-key parent maps (`slices`, `sliceplan`, `fkslices`); and, before
//! any statement, the connection phase's steps under the config (`connect`). Everything
//! here reads what it is given (the catalog, versions, config, the session's state) and
//! sends nothing; the session carries out what it decides.

pub mod answered;
pub mod answers;
pub mod command;
pub mod connect;
pub mod context;
pub mod diagnostics;
pub mod exchange;
pub mod explain;
pub mod fill;
pub mod fkslices;
pub mod last;
pub mod multi;
pub mod patch;
pub mod prepared;
pub mod read;
pub mod settings;
pub mod sliceplan;
pub mod slices;
pub mod state;
pub mod store;
pub mod write;

pub use slices::Planner;

/// Largest scratch buffer a session keeps between statements: a larger one (a large result
/// or parameter passed) is dropped, so an idle session holds little.
pub const KEEP_SCRATCH: usize = 64 * 1024;

/// What the engine's unit tests read in place of the shared state: a catalog loaded with
/// no server, fresh analyses, versions and memo, and a configuration.
#[cfg(test)]
pub(crate) struct World {
    pub catalog: std::sync::Arc<crate::invalidation::catalog::Catalog>,
    pub analyzer: crate::analysis::Analyzer,
    pub versions: crate::cache::versions::Versions,
    pub memo: crate::cache::sliceplans::SlicePlans,
    pub patches: crate::cache::patches::Patchable,
    pub cfg: std::sync::Arc<crate::config::Config>,
}

#[cfg(test)]
impl World {
    /// `db.parent (id PRIMARY, name)`, `db.child (id PRIMARY, parent_id, a)` (a foreign key
    /// to `db.parent`), `db.v` a view; row slices on under `row`.
    pub fn new(row: bool) -> World {
        use crate::invalidation::catalog::{Catalog, RawCatalog, RawColumn};
        let s = |x: &str| x.to_string();
        let col = |table: &str, name: &str, ordinal: u64, primary: bool| RawColumn {
            schema: s("db"),
            table: s(table),
            name: s(name),
            ordinal,
            data_type: s("int"),
            column_type: s("int(11)"),
            collation: String::new(),
            max_chars: None,
            nullable: !primary,
            extra: String::new(),
            primary,
            generation: String::new(),
        };
        let catalog = Catalog::loaded_from(RawCatalog {
            tables: vec![
                (s("db"), s("parent"), s("BASE TABLE")),
                (s("db"), s("child"), s("BASE TABLE")),
                (s("db"), s("v"), s("VIEW")),
            ],
            views: vec![(
                s("db"),
                s("v"),
                s("select `db`.`parent`.`id` from `db`.`parent`"),
            )],
            foreign_keys: vec![(
                s("db"),
                s("child"),
                s("db"),
                s("parent"),
                s("RESTRICT"),
                s("RESTRICT"),
            )],
            columns: vec![
                col("parent", "id", 1, true),
                col("parent", "name", 2, false),
                col("child", "id", 1, true),
                col("child", "parent_id", 2, false),
                col("child", "a", 3, false),
            ],
            ..Default::default()
        });
        let mut cfg = crate::config::Config::default();
        cfg.invalidation.granularity = match row {
            true => crate::config::Granularity::Row,
            false => crate::config::Granularity::Table,
        };
        World {
            catalog,
            analyzer: crate::analysis::Analyzer::new(64),
            versions: crate::cache::versions::Versions::new(),
            memo: crate::cache::sliceplans::SlicePlans::new(64),
            patches: Default::default(),
            cfg: std::sync::Arc::new(cfg),
        }
    }

    pub fn planner(&self) -> Planner<'_> {
        Planner {
            catalog: &self.catalog,
            analyzer: &self.analyzer,
            versions: &self.versions,
            memo: &self.memo,
            patches: &self.patches,
            cfg: self.cfg.clone(),
        }
    }

    /// A session connected to MariaDB as `u`, in database `db`.
    pub fn session(&self, db: Option<&str>) -> state::SessionState {
        use crate::protocol::handshake::{Greeting, HandshakeResponse};
        let n = state::Negotiated {
            greeting: Greeting {
                server_version: "5.5.5-10.11.6-MariaDB".into(),
                connection_id: 1,
                capabilities: u32::MAX,
                mariadb_caps: 0,
                charset: 45,
                status: 2,
                auth_plugin: "mysql_native_password".into(),
            },
            response: HandshakeResponse {
                user: "u".into(),
                database: db.map(str::to_string),
                charset: 45,
                ..Default::default()
            },
            caps: crate::protocol::packets::cap::PROTOCOL_41,
            status: 2,
            legs: crate::protocol::negotiate::AuthLegs {
                delta: 0,
                plugin: String::new(),
                scramble: Vec::new(),
                client_tls: false,
                upstream_tls: false,
            },
        };
        state::SessionState::under(&self.cfg, &self.versions.faults, &n)
    }

    /// The write analysis of `sql`.
    pub fn write(&self, sql: &str) -> crate::analysis::WriteInfo {
        match crate::analysis::analyze(sql) {
            crate::analysis::Analysis::Write(w) => w,
            other => panic!("{sql}: not a write: {other:?}"),
        }
    }
}
