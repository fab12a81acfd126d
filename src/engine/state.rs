//! What qcache follows of one session: identity, default database, session variables (the
//! key's context fingerprint), query_cache_type, transaction, temporary tables, prepared
//! statements, and the writes waiting for their OK.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;

use crate::analysis::{Hint, ServerVersion, StatementKind};
use crate::cache::versions::Snapshot;
use crate::config::{Config, QueryCacheType};
use crate::faults::Faults;
use crate::observe::digests::{row_key, RowHint};
use crate::policy::context;
use crate::protocol::handshake::{Greeting, HandshakeResponse};
use crate::protocol::negotiate::AuthLegs;
use crate::protocol::packets::cap;
use crate::shared::Shared;

/// Moved to `cache::writes`, beside the invalidation they feed; re-exported while the branches
/// that edit this file merge.
use crate::cache::writes::{Pending, Txn};

/// The session's transaction state machine over the cache's version points and writes.
pub type Transaction = crate::policy::txn::Transaction<Snapshot, Txn>;

/// What both ends agreed on in the connection phase (`session::handshake`), which a
/// session's state starts from.
#[derive(Debug, Clone)]
pub struct Negotiated {
    pub greeting: Greeting,
    pub response: HandshakeResponse,
    /// Capabilities in force: what the client asked for out of what was offered.
    pub caps: u32,
    /// Status flags of the OK that ended authentication.
    pub status: u16,
    /// TLS on each leg, and the nonce a later COM_CHANGE_USER authenticates with.
    pub legs: AuthLegs,
}

impl Negotiated {
    /// The connection phase's outcome: the server's greeting as `greeted`, the client's
    /// `response`, the status of the OK that ended authentication, the legs it ran over.
    pub fn new(
        greeted: crate::protocol::negotiate::Greeted,
        response: HandshakeResponse,
        status: u16,
        legs: AuthLegs,
    ) -> Negotiated {
        Negotiated {
            caps: greeted.caps_in_force(&response),
            greeting: greeted.greeting,
            response,
            status,
            legs,
        }
    }
}

/// Who the server says the session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `CURRENT_USER()`: the account whose privileges apply (`user@host`), which for a proxy
    /// user or an anonymous match differs from the login name.
    pub account: String,
    /// `CURRENT_ROLE()`; None where roles do not exist.
    pub role: Option<String>,
}

/// The parameter types an execute packet going upstream carries, for
/// `Prepared::types_sent` (`engine::prepared`).
#[derive(Debug, PartialEq, Eq)]
pub enum SentTypes {
    /// None: the server keeps what it holds.
    None,
    /// These.
    Known(Bytes),
    /// Some qcache could not read (a malformed packet): the server's are unknown.
    Unknown,
}

/// A prepared statement as qcache remembers it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub sql: Bytes,
    /// `sql` without trace comments at either end (`analysis::key_text`): what an execute's
    /// key hashes. A slice of `sql`, taken once at prepare, so an execute scans nothing.
    pub key_sql: Bytes,
    /// The statement's digest, computed once at prepare: every miss of every execute needs it.
    pub digest: u64,
    pub kind: StatementKind,
    /// SQL_CACHE / SQL_NO_CACHE, stripped from the SQL before it was prepared upstream.
    pub hint: Hint,
    pub params: u16,
    pub columns: u16,
    /// Parameter types from the last execute that sent them (new-params-bound flag 1, or a
    /// bulk execute with types): later executes with the flag 0 reuse them, so they belong
    /// in the key, and the server must hold them when such an execute reaches it.
    pub types: Option<Bytes>,
    /// COM_STMT_SEND_LONG_DATA since the last execute: the values are not in the packet.
    pub long_data: bool,
    /// Long data named a parameter it lacks: the server refuses every execute of it
    /// (ER_WRONG_ARGUMENTS) until COM_STMT_RESET, so none may be answered from the cache
    /// (`SessionState::long_data`).
    pub long_data_refused: bool,
    /// The parameter types the server holds for this statement, as last sent to it; None
    /// when it has none or qcache cannot tell (a reset, a malformed execute). An execute
    /// answered from the cache does not change them, so they may lag behind `types`.
    pub server_types: Option<Bytes>,
    /// [`SessionState::prepare_ctx`] when it was prepared: the server parsed it, and runs
    /// it, in the database and under the settings of that moment.
    pub context: u64,
    /// The default database when it was prepared: where its unqualified names live.
    pub db: Option<String>,
    /// A bulk execute of it reached the server. MariaDB refuses a bulk SELECT before it reads
    /// the types the bulk carries (`prepared::bulk_answered`); what the server holds after
    /// one is followed, but such history is rare and no key holds it: its executes are
    /// never cached.
    pub bulk_seen: bool,
    /// The server holds a cursor an execute of it opened (`policy::read::cursor_after_execute`):
    /// its next execute must reach the server, which closes that cursor.
    pub cursor_open: bool,
    /// How its last execute was keyed, for `QCACHE EXPLAIN STATEMENT` (`session::explain`).
    pub last_execute: LastExecute,
    /// The last keyed execute (`last_execute`'s material) did not reach the server: it was
    /// served from the cache, L2 or another session's fill, so the server still holds the
    /// values of an earlier one. MariaDB reads long data as the kind of value each
    /// parameter last received (`Prepared::replay_before_long_data`).
    pub values_unsent: bool,
    /// COM_STMT_SEND_LONG_DATA packets held back while `values_unsent`: they go up right
    /// before the execute that consumes them, after the served execute is sent again
    /// (`SessionState::release_long_data`), so that nothing the client does in between
    /// sees that replay's diagnostics or read view.
    pub held_long_data: Vec<bytes::Bytes>,
}

impl Prepared {
    /// A statement the server prepared, `sql` its hint-free text, before any execute: the
    /// one constructor, so that a field added here starts right everywhere (the caller sets
    /// what it knows of the PREPARE: digest, hint, context, database).
    pub fn new(sql: Bytes, kind: StatementKind, params: u16, columns: u16) -> Prepared {
        Prepared {
            key_sql: sql.slice_ref(crate::analysis::key_text(&sql)),
            sql,
            digest: 0,
            kind,
            hint: Hint::None,
            params,
            columns,
            types: None,
            long_data: false,
            long_data_refused: false,
            server_types: None,
            context: 0,
            db: None,
            bulk_seen: false,
            cursor_open: false,
            last_execute: LastExecute::None,
            values_unsent: false,
            held_long_data: Vec::new(),
        }
    }
}

/// A prepared statement's last execute, as its key saw it.
#[derive(Debug, Clone, Default)]
pub enum LastExecute {
    /// Not executed yet (or its parameters were too large to keep).
    #[default]
    None,
    /// Keyed: the key's material (statement, parameter types, null bitmap, values) without
    /// the session's fingerprint, so that it keys under the session as it is now. The
    /// buffer the key was built in, swapped in (no copy on the hit path).
    Keyed(Vec<u8>),
    /// Not keyed, for this reason (a cursor, long data, a malformed packet, or one the
    /// session had then).
    NotKeyed(crate::policy::Reason),
}

#[repr(C, align(64))]
pub struct SessionState {
    // The fields a hit reads come first, in this order (`repr(C)`, the state on a line of
    // its own): they fill its first five lines and the start of `txn`, where the compiler
    // spread them over some ten of its 23 (#36).
    /// Hash of everything besides the statement that decides a result's bytes.
    pub fingerprint: u64,
    /// The privilege epoch the fingerprint was computed under (u64::MAX: not yet).
    pub priv_epoch: u64,
    /// `observe::digests::row_key(db, user)`, kept with `db` and `user` (per-digest statistics
    /// key their rows by it on every statement).
    pub db_key: u64,
    /// What a statement prepared now is parsed and run under (`policy::context::
    /// prepare_context`): kept with `fingerprint`, compared at each execute.
    pub prepare_ctx: u64,
    /// Where this session's statements were last counted; made with `db`'s name compared,
    /// so cleared whenever `db` changes.
    pub digest_hint: RowHint,
    /// After this long with no command sent upstream a hit sends a COM_PING first
    /// (`policy::context::keep_alive_after`, from the idle timers read back).
    pub keep_alive_after: std::time::Duration,
    /// The last statement was a hit whose SELECT would have left `FOUND_ROWS()` at this:
    /// the server's diagnostics are put right before the next statement reaches it
    /// (`policy::diagnostics`). Also what qcache's own read-back owes, marked with
    /// `policy::diagnostics::AFTER_READ_BACK`.
    pub after_hit: Option<u64>,
    /// Statements holding long data back (`Prepared::held_long_data`): an execute looks
    /// for its statement's only when some does.
    pub holding_long_data: usize,
    pub last_stmt: Option<u32>,
    pub qct: QueryCacheType,
    /// Code ran before the catalog had read the server's (`policy::qct::After::WhenLoaded`,
    /// `call`: it was a CALL): judged once it has; until then as if unknown.
    pub qct_pending: Option<bool>,
    /// Code the server ran may have set the session's `query_cache_type` (`policy::qct`):
    /// `qct` is no longer its value; its reads go to the server, nothing is served or
    /// stored, until a SET of it through qcache or a reset.
    pub qct_unknown: bool,
    /// qcache can no longer tell what the session's settings are (SET inside a procedure,
    /// a prepared SET): no cache until a reset.
    pub lost_track: bool,
    /// Stored code ran and the catalog could not yet say whether it may create temporary
    /// tables (`policy::classify::after_stored_code`): asked again before each read.
    pub temporaries_unknown: bool,
    /// A write may have run a trigger that SET a session variable
    /// (`policy::context::context_stale_after`): the settings are read again before the next
    /// cacheable read is looked up (`Session::reread_stale_context`).
    pub ctx_stale: bool,
    /// The session's optimizer trace is on (`policy::context::traces_optimizer`, read from
    /// the server at connect and after each SET of it): never served nor stored.
    pub optimizer_traced: bool,
    /// The server profiles the session's statements (`policy::context::profiles`): like a
    /// trace, never served, and sent nothing of qcache's own.
    pub profiling: bool,
    /// The execute in progress had parameters sent with COM_STMT_SEND_LONG_DATA: its packet
    /// lacks their values, so no parameter of it can be read from the packet.
    pub execute_long_data: bool,
    /// A bulk execute of this statement is on its way to the server, with these types
    /// (`prepared::bulk_answered`): whether the server took them is in its answer.
    pub bulk_in_flight: Option<(u32, SentTypes)>,
    /// Keyed by ids the server assigned, so a client cannot aim them at one bucket: hashed
    /// with foldhash rather than SipHash, two lookups per execute.
    pub stmts: HashMap<u32, Prepared, foldhash::fast::FixedState>,
    pub temp_tables: HashSet<(String, String)>,
    /// The account and role the server says the session has; part of the key. None until
    /// asked, before the session's first lookup (`privileges.rs`).
    pub identity: Option<Identity>,
    /// The transaction state (`policy::txn`): status flags, the transaction open, the
    /// deferred BEGIN, table locks, XA, isolation levels.
    pub txn: Transaction,
    // What a hit does not read.
    /// This statement may commit a write (`cache::patches::WriteInFlight`): counted until
    /// its response ended, for the patch verifier.
    pub write_in_flight: Option<crate::cache::patches::WriteInFlight>,
    /// The upstream's version from its greeting: which executable comments it runs.
    pub server: ServerVersion,
    pub user: String,
    pub db: Option<String>,
    pub charset: u8,
    pub caps: u32,
    /// MariaDB's extended capabilities both ends agreed on; part of the key.
    pub mariadb_caps: u32,
    pub deprecate_eof: bool,
    /// Session variables the client set, by lower-case name; part of the key.
    pub vars: BTreeMap<String, String>,
    /// Default databases in force at a SQL-level PREPARE since the last reset: an EXECUTE
    /// may run a statement prepared in any of them (`engine::Planner::plan_call`).
    pub sql_prepared_in: Vec<String>,
    /// SQL-level prepared statements (by lower-cased name) whose literal text is a SET:
    /// an EXECUTE of one runs that SET on the server, which qcache follows as it follows
    /// a prepared SET (`engine::settings::Planner::qct_run_by_server`).
    pub sql_prepared_sets: HashMap<String, String>,
    /// The user is left out of the fingerprint (`cache.shared_between_users`).
    pub shared_users: bool,
    /// The session variables are left out of the fingerprint: only under the debug-build
    /// `Fault::ContextKeys` switch (`crate::faults`), read by `refresh_fingerprint`.
    vars_unkeyed: bool,
    /// The session's `sql_select_limit` as read back is not the default
    /// (`policy::context::select_limited`): a set operation's FOUND_ROWS() is then unknown.
    pub select_limit_inherited: bool,
    /// The session's `character_set_results` as read back is not known to send numbers and
    /// dates as ASCII (`policy::context::results_not_ascii`).
    pub results_not_ascii_inherited: bool,
    /// The session's `character_set_client` as read back is not known to be UTF-8
    /// (`policy::context::client_not_utf8`); true until the first read (fail closed).
    pub client_not_utf8_inherited: bool,
    /// A setting that may refuse a read once its tables grow (`max_join_size`, …) is not at
    /// its free value as read back (`policy::context::reads_limited`).
    pub reads_limit_inherited: bool,
    /// The session reads under `sql_auto_is_null = 1` (`policy::context::
    /// session_auto_is_null`): kept by `refresh_fingerprint`, never stores nor is served.
    pub auto_is_null: bool,
    /// `sql_auto_is_null` was on when the server context was last read (at connect).
    pub auto_is_null_inherited: bool,
    /// The server's diagnostics area may hold warnings or errors of an earlier statement
    /// (`policy::diagnostics::may_persist`): a read-back would clear them.
    pub diag_may_persist: bool,
    /// What the server's `Last_query_cost` owes the client after qcache's own SELECTs
    /// (`policy::diagnostics::LastQueryCost`).
    pub cost: crate::policy::diagnostics::LastQueryCost,
    /// Hash of the key variables' effective values as the server reported them at connect,
    /// reset or change-user (`policy::context`); 0 until read.
    pub server_ctx: u64,
    /// `sql_mode` as the server reported it with `server_ctx` (None until read): the
    /// session's mode while `vars` holds none, which a replay of `Last_query_cost`'s text
    /// may have to put back (`engine::diagnostics::replay`).
    pub server_sql_mode: Option<String>,
    /// The upstream is MariaDB (from its greeting): which variable names exist.
    pub mariadb: bool,
    /// Tables this session wrote and when (`policy::stale`: read-your-own-writes).
    pub own_writes: OwnWrites,
    /// Those of [`temp_tables`](Self::temp_tables) whose rows may be other tables' (a
    /// temporary MERGE table over base tables, one stored code created): a write to one
    /// writes tables no statement names.
    pub temp_elsewhere: HashSet<(String, String)>,
    /// Code qcache did not read (a CALL, an EXECUTE, a compound statement) may have created
    /// temporary tables of an engine it does not know, under any name: every write of the
    /// session may then be a write through one to other tables
    /// (`policy::classify::unseen_code_may_create_temporaries`). Until a reset.
    pub temps_unseen: bool,
    pub pending: Pending,
    /// The statement in flight's standing with the parent maps (derived slices).
    pub fk: FkState,
    /// Whether the user may run admin statements that change the cache; asked of the server
    /// at the first such statement, forgotten when the user changes.
    pub admin_allowed: Option<bool>,
    /// The server would not say: no cache for this session.
    pub identity_unusable: bool,
    /// The user's privilege generation, part of the key.
    pub priv_generation: u64,
    /// The epoch read before the server last computed this session's privileges (connect,
    /// COM_CHANGE_USER, SET ROLE): a sticky change after it leaves the session with privileges
    /// a new session would not get.
    pub priv_baseline: u64,
    /// Non-zero once the session's privileges may differ from a new session's: a token that
    /// keeps its entries its own.
    pub priv_private: u64,
}

/// What the statement in flight owes or may teach the parent maps (`engine::fkslices`).
#[derive(Debug, Default)]
pub struct FkState {
    /// Read before the statement was sent: the window its learning and its child bumps are
    /// judged by.
    pub window: Option<crate::cache::fkmap::Window>,
    /// How its single-table write touches its table, from its shape.
    pub how: Option<((String, String), crate::cache::fkmap::Touch)>,
    /// Its standing while it may change rows (finished when dropped).
    pub tokens: Vec<crate::cache::fkmap::Token>,
    /// What it may teach once acknowledged.
    pub learn: Option<crate::cache::fkmap::Learn>,
    /// The OK packet of a statement with `learn`.
    pub ok: Option<crate::protocol::packets::OkInfo>,
}

/// What this session wrote and when, taken after the write's bump: an entry whose query
/// was sent before such a time predates the session's own write and is never served to it
/// stale (`policy::stale`). Entries older than [`policy::stale::MAX_STALE`] are never
/// served stale, so records older than that are pruned once the map grows.
#[derive(Debug, Default)]
pub struct OwnWrites {
    tables: std::collections::HashMap<(String, String), std::time::Instant>,
    schemas: std::collections::HashMap<String, std::time::Instant>,
    all: Option<std::time::Instant>,
}

impl OwnWrites {
    /// Records what `inv` bumped, now (after it was applied).
    pub fn note(&mut self, inv: &crate::invalidation::Invalidation) {
        use crate::invalidation::What;
        let now = std::time::Instant::now();
        for w in &inv.what {
            match w {
                What::Table(t)
                | What::Rows { table: t, .. }
                | What::Columns { table: t, .. }
                | What::Slices { table: t, .. } => {
                    self.tables.insert(t.clone(), now);
                }
                What::Schema(s) => {
                    self.schemas.insert(s.clone(), now);
                }
                What::Everything | What::Gap => self.all = Some(now),
                What::Privileges(_) => {}
            }
        }
        if self.tables.len() > 1024 {
            let max = crate::policy::stale::MAX_STALE;
            self.tables.retain(|_, t| t.elapsed() < max);
            self.schemas.retain(|_, t| t.elapsed() < max);
        }
    }

    /// Whether the session wrote one of `tables` after `since`.
    pub fn since<'a>(
        &self,
        mut tables: impl Iterator<Item = &'a crate::cache::TableHandle>,
        since: std::time::Instant,
    ) -> bool {
        if self.all.is_some_and(|t| t >= since) {
            return true;
        }
        if self.tables.is_empty() && self.schemas.is_empty() {
            return false;
        }
        tables.any(|t| {
            self.schemas.get(&t.schema).is_some_and(|w| *w >= since)
                || self
                    .tables
                    .get(&(t.schema.clone(), t.name.clone()))
                    .is_some_and(|w| *w >= since)
        })
    }
}

impl SessionState {
    pub fn new(shared: &Shared, n: &Negotiated) -> SessionState {
        SessionState::under(&shared.config(), &shared.cache.versions().faults, n)
    }

    /// A session's state after the connection phase `n`, under `cfg` (and the debug-build
    /// `faults`): what [`new`](Self::new) reads of the shared state, given.
    pub fn under(cfg: &Config, faults: &Faults, n: &Negotiated) -> SessionState {
        let server = ServerVersion::from_greeting(&n.greeting.server_version);
        // MySQL-only built-in names are stored code on MariaDB (`analysis::functions`).
        crate::analysis::upstream_is(server.mariadb);
        let mut s = SessionState {
            server,
            user: n.response.user.clone(),
            db: n.response.database.clone(),
            charset: n.response.charset,
            caps: n.caps,
            mariadb_caps: n.response.mariadb_caps & n.greeting.mariadb_caps,
            deprecate_eof: n.caps & cap::DEPRECATE_EOF != 0,
            qct: cfg.cache.query_cache_type,
            qct_unknown: false,
            qct_pending: None,
            vars: BTreeMap::new(),
            fingerprint: 0,
            prepare_ctx: 0,
            sql_prepared_in: Vec::new(),
            sql_prepared_sets: HashMap::new(),
            db_key: 0,
            digest_hint: RowHint::default(),
            shared_users: false,
            vars_unkeyed: false,
            lost_track: false,
            temporaries_unknown: false,
            auto_is_null: false,
            ctx_stale: false,
            select_limit_inherited: false,
            results_not_ascii_inherited: false,
            client_not_utf8_inherited: true,
            reads_limit_inherited: false,
            keep_alive_after: std::time::Duration::from_secs(1),
            auto_is_null_inherited: false,
            optimizer_traced: false,
            profiling: false,
            execute_long_data: false,
            bulk_in_flight: None,
            diag_may_persist: false,
            cost: Default::default(),
            server_ctx: 0,
            server_sql_mode: None,
            mariadb: crate::policy::context::is_mariadb(&n.greeting.server_version),
            own_writes: OwnWrites::default(),
            temp_tables: HashSet::new(),
            temp_elsewhere: HashSet::new(),
            temps_unseen: false,
            txn: Transaction::new(n.status, cfg.server.defer_begin),
            stmts: HashMap::default(),
            holding_long_data: 0,
            last_stmt: None,
            pending: Pending::default(),
            write_in_flight: None,
            fk: Default::default(),
            admin_allowed: None,
            after_hit: None,
            identity: None,
            identity_unusable: false,
            priv_epoch: u64::MAX,
            priv_generation: 0,
            priv_baseline: 0,
            priv_private: 0,
        };
        s.refresh_fingerprint_under(cfg, faults);
        s
    }

    pub fn set_db(&mut self, db: Option<String>) {
        self.db = db;
        self.db_key = row_key(self.db.as_deref(), &self.user);
        self.digest_hint.forget();
        if self.priv_private != 0 {
            // The server re-reads the privileges of the database a session USEs: a session
            // that kept old ones may have new ones now, unlike its entries.
            self.make_private();
        }
        self.fingerprint = self.compute_fingerprint();
        self.prepare_ctx = self.compute_prepare_ctx();
    }

    /// The session's `sql_mode` as qcache knows its text: set since the connect's read (a
    /// literal as written, or as read back), else as that read reported it; None before it.
    pub fn sql_mode_text(&self) -> Option<&str> {
        self.vars
            .get("sql_mode")
            .or(self.server_sql_mode.as_ref())
            .map(String::as_str)
    }

    /// Recomputes the context fingerprint after any change to what it covers (the config's
    /// `shared_between_users` is re-read, so a reload applies from the next change on).
    pub fn refresh_fingerprint(&mut self, shared: &Shared) {
        self.refresh_fingerprint_under(&shared.config(), &shared.cache.versions().faults);
    }

    /// [`refresh_fingerprint`](Self::refresh_fingerprint) under `cfg` and `faults`, given.
    pub fn refresh_fingerprint_under(&mut self, cfg: &Config, faults: &Faults) {
        self.shared_users = cfg.cache.shared_between_users;
        self.txn.refresh_dirty_reads();
        self.auto_is_null = crate::policy::context::session_auto_is_null(
            self.vars
                .get(crate::policy::context::AUTO_IS_NULL)
                .map(String::as_str),
            self.auto_is_null_inherited,
        );
        self.db_key = row_key(self.db.as_deref(), &self.user);
        self.digest_hint.forget();
        self.vars_unkeyed = faults.on(crate::faults::Fault::ContextKeys);
        self.fingerprint = self.compute_fingerprint();
        self.prepare_ctx = self.compute_prepare_ctx();
    }

    fn compute_prepare_ctx(&self) -> u64 {
        crate::policy::context::prepare_context(
            self.db.as_deref(),
            self.charset,
            self.server_ctx,
            &self.vars,
        )
    }

    fn compute_fingerprint(&self) -> u64 {
        crate::policy::context::fingerprint(&crate::policy::context::Fingerprint {
            user: &self.user,
            identity: self
                .identity
                .as_ref()
                .map(|id| (id.account.as_str(), id.role.as_deref())),
            shared_users: self.shared_users,
            priv_generation: self.priv_generation,
            priv_private: self.priv_private,
            db: self.db.as_deref(),
            caps: self.caps,
            mariadb_caps: self.mariadb_caps,
            charset: self.charset,
            server_ctx: self.server_ctx,
            dirty_reads: self.txn.dirty_reads(),
            auto_is_null: self.auto_is_null,
            optimizer_traced: self.optimizer_traced,
            profiling: self.profiling,
            vars: (!self.vars_unkeyed).then_some(&self.vars),
        })
    }

    /// qcache does not follow the session's settings, or its `query_cache_type`: no read is
    /// served or stored.
    pub fn untracked(&self) -> bool {
        self.lost_track || self.qct_unsure()
    }

    /// qcache cannot vouch for the session's `query_cache_type` (`policy::qct`): its reads
    /// of it go to the server.
    pub fn qct_unsure(&self) -> bool {
        self.qct_unknown || self.qct_pending.is_some()
    }

    /// Back to a fresh session (COM_RESET_CONNECTION, COM_CHANGE_USER): the server forgot
    /// variables, temporary tables and prepared statements.
    pub fn reset(&mut self, shared: &Shared, db: Option<Option<String>>) {
        self.reset_under(&shared.config(), &shared.cache.versions().faults, db);
    }

    /// [`reset`](Self::reset) under `cfg` and `faults`, given.
    pub fn reset_under(&mut self, cfg: &Config, faults: &Faults, db: Option<Option<String>>) {
        if let Some(db) = db {
            self.db = db;
        }
        self.vars.clear();
        self.lost_track = false;
        self.temporaries_unknown = false;
        self.auto_is_null_inherited = false;
        // Read again by the caller, with everything else.
        self.ctx_stale = false;
        self.optimizer_traced = false;
        self.profiling = false;
        // Isolation levels, table locks, the (XA) transaction: the server dropped them.
        self.txn.reset();
        // Read again by the caller (`Session::read_server_context`).
        self.server_ctx = 0;
        self.server_sql_mode = None;
        self.temp_tables.clear();
        self.temp_elsewhere.clear();
        self.temps_unseen = false;
        self.stmts.clear();
        self.holding_long_data = 0;
        self.last_stmt = None;
        self.sql_prepared_in.clear();
        self.sql_prepared_sets.clear();
        self.admin_allowed = None;
        // The server starts the session's diagnostics afresh.
        self.after_hit = None;
        self.cost = Default::default();
        // The role may have changed (and the account, for COM_CHANGE_USER): ask again.
        self.identity = None;
        self.identity_unusable = false;
        self.priv_epoch = u64::MAX;
        self.qct = cfg.cache.query_cache_type;
        self.qct_unknown = false;
        self.qct_pending = None;
        self.refresh_fingerprint_under(cfg, faults);
    }

    /// The server accepted a COM_CHANGE_USER (`cu`, None when qcache could not read it)
    /// with status flags `status`: a fresh session of the new user, whose privileges the
    /// server computed from the grants as of `priv_baseline` (read before it was sent).
    pub fn user_changed(
        &mut self,
        (cfg, faults): (&Config, &Faults),
        status: u16,
        priv_baseline: u64,
        cu: Option<crate::protocol::handshake::ChangeUser>,
    ) {
        self.txn.status_after_reset(Some(status));
        self.priv_baseline = priv_baseline;
        self.priv_private = 0;
        let Some(cu) = cu else {
            self.reset_under(cfg, faults, None);
            self.lost_track = true;
            return;
        };
        self.user = cu.user;
        self.reset_under(cfg, faults, Some(cu.database));
        if let Some(cs) = cu.charset {
            self.charset = cs;
            self.refresh_fingerprint_under(cfg, faults);
        }
    }

    /// What a COM_CHANGE_USER (`cu`) leaves once the server answered: accepted (`status`,
    /// its OK's flags), the new user's session ([`user_changed`](Self::user_changed)).
    /// Refused, the old account's: the server kept the connection and, as MariaDB and MySQL
    /// do, put back the old account (with the privileges it had), default database and
    /// character set, but the session was reset before the attempt (variables, temporary
    /// tables, prepared statements gone, the transaction rolled back). The account and role
    /// are asked again before the next lookup; what the key needs is read back by the
    /// caller, and after a refusal the transaction's flags with it
    /// (`Transaction::status_after_reset`).
    pub fn change_user_answered(
        &mut self,
        (cfg, faults): (&Config, &Faults),
        status: Option<u16>,
        priv_baseline: u64,
        cu: Option<crate::protocol::handshake::ChangeUser>,
    ) {
        match status {
            Some(status) => self.user_changed((cfg, faults), status, priv_baseline, cu),
            None => self.reset_under(cfg, faults, None),
        }
    }

    /// What the server records of this session's statements where the client can read it.
    pub fn recorders(&self) -> context::Recorders {
        context::Recorders {
            optimizer_trace: self.optimizer_traced,
            profiling: self.profiling,
        }
    }

    /// Whether qcache must keep quiet in this session: serve nothing, send nothing of its
    /// own (`policy::context::Recorders::quiet`).
    pub fn quiet(&self) -> bool {
        self.recorders().quiet()
    }

    /// Gives the session a key space of its own (see [`priv_private`](Self::priv_private)).
    pub fn make_private(&mut self) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.priv_private = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.fingerprint = self.compute_fingerprint();
    }

    /// The statement a command's id names, as the server reads it: MariaDB's -1
    /// (0xFFFFFFFF) is the statement the last COM_STMT_PREPARE created, and none after
    /// that prepare failed or that statement was closed. None: the server knows no such
    /// statement either (qcache relays the command for the server's own error).
    pub fn resolve_stmt(&self, id: u32) -> Option<u32> {
        crate::protocol::commands::resolve_stmt(id, self.last_stmt)
    }

    /// COM_STMT_CLOSE of `id` (resolved): the server forgets the statement, and -1 names
    /// none until the next successful prepare if it was the last one.
    pub fn close_stmt(&mut self, id: u32) {
        if let Some(id) = self.resolve_stmt(id) {
            self.drop_held_long_data(id);
            self.stmts.remove(&id);
            if self.last_stmt == Some(id) {
                self.last_stmt = None;
            }
        }
    }

    /// COM_STMT_SEND_LONG_DATA `payload` for `id`: the next execute's values are not all
    /// in its packet. True when the packet is held back: the server must first be given the
    /// values of an execute it did not see ([`Prepared::replay_before_long_data`]), and that
    /// replay is made right before the execute that consumes the long data
    /// ([`release_long_data`](Self::release_long_data)), not now.
    ///
    /// MariaDB ignores a packet too short to name a parameter, and one naming a parameter the
    /// statement lacks puts the statement in an error state: every execute of it is refused
    /// until COM_STMT_RESET (`Prepared::long_data_refused`), whatever it carries.
    pub fn long_data(&mut self, id: u32, payload: &[u8]) -> bool {
        let Some(s) = self.resolve_stmt(id).and_then(|id| self.stmts.get_mut(&id)) else {
            return false;
        };
        let Some(param) = payload.get(5..7).map(|p| u16::from_le_bytes([p[0], p[1]])) else {
            return false;
        };
        s.long_data = true;
        s.long_data_refused |= param >= s.params;
        if !s.values_unsent && s.held_long_data.is_empty() {
            return false;
        }
        if s.held_long_data.is_empty() {
            self.holding_long_data += 1;
        }
        s.held_long_data
            .push(bytes::Bytes::copy_from_slice(payload));
        true
    }

    /// Before an execute (or bulk execute) of `id`: the long data held for it, to send
    /// first, after the execute to replay (None when there is nothing to replay: its
    /// parameters were too large to keep). None when none is held.
    #[inline]
    pub fn release_long_data(&mut self, id: u32) -> Option<(Option<Vec<u8>>, Vec<bytes::Bytes>)> {
        if self.holding_long_data == 0 {
            return None;
        }
        let id = self.resolve_stmt(id)?;
        let s = self.stmts.get_mut(&id)?;
        if s.held_long_data.is_empty() {
            return None;
        }
        self.holding_long_data -= 1;
        let held = std::mem::take(&mut s.held_long_data);
        Some((s.replay_before_long_data(id), held))
    }

    /// Held long data of `id` dropped (a reset or close: the server never had it).
    fn drop_held_long_data(&mut self, id: u32) {
        if let Some(s) = self.stmts.get_mut(&id) {
            if !s.held_long_data.is_empty() {
                s.held_long_data.clear();
                self.holding_long_data -= 1;
            }
        }
    }

    pub fn stmt_reset(&mut self, id: u32) {
        if let Some(id) = self.resolve_stmt(id) {
            self.drop_held_long_data(id);
        }
        if let Some(s) = self.resolve_stmt(id).and_then(|id| self.stmts.get_mut(&id)) {
            s.long_data = false;
            s.long_data_refused = false;
            // MariaDB keeps the types across a reset; re-sending them costs a few bytes and
            // needs no knowledge of what a server version keeps.
            s.server_types = None;
        }
    }

    /// Whether the session's `sql_select_limit` is, or may be, not the default: inherited
    /// from the global (as read back), or set by the session (even to `DEFAULT`). The server
    /// then cuts every result at the limit.
    pub fn select_may_be_limited(&self) -> bool {
        self.select_limit_inherited || self.vars.contains_key("sql_select_limit")
    }

    /// Whether the server sends the text of this session's numbers and dates as ASCII
    /// (`policy::context::results_ascii`): by the `character_set_results` the session set,
    /// else the one read back.
    pub fn results_ascii(&self) -> bool {
        match self.vars.get("character_set_results") {
            Some(v) => crate::policy::context::results_ascii(Some(v)),
            None => !self.results_not_ascii_inherited,
        }
    }

    /// Whether the session's client character set is UTF-8 (`policy::context::client_utf8`),
    /// as the catalog's names are: by the `character_set_client` a SET gave it (read back),
    /// else the one the context read reported; not once qcache lost track of the session.
    pub fn client_utf8(&self) -> bool {
        // A SET qcache did not follow (in a multi-statement, stored code, a prepared SET),
        // or a trigger's before the settings are read again, may have changed it: not
        // known to be.
        if self.lost_track || self.ctx_stale {
            return false;
        }
        match self.vars.get("character_set_client") {
            Some(v) => crate::policy::context::client_utf8(Some(v)),
            None => !self.client_not_utf8_inherited,
        }
    }

    /// Whether the server may refuse this session's reads once their tables grow: a read
    /// limit inherited (as read back) or set by the session (`policy::context::READ_LIMITS`).
    pub fn reads_may_be_refused(&self) -> bool {
        self.reads_limit_inherited
            || self
                .vars
                .keys()
                .any(|k| crate::policy::context::is_read_limit(k))
    }

    /// Qualifies a table name with the default database, lower-cased.
    pub fn qualify(&self, schema: Option<&str>, name: &str) -> Option<(String, String)> {
        crate::analysis::qualify(schema, name, self.db.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::World;
    use crate::invalidation::{Invalidation, Source, What};

    /// The client character set names are read in (`client_utf8`): one row per source,
    /// (rule, inherited as read, set and read back, lost track, settings stale, UTF-8).
    #[test]
    fn client_charset_sources() {
        type Row<'a> = (&'a str, bool, Option<&'a str>, bool, bool, bool);
        let rows: &[Row] = &[
            ("not read yet: not known", true, None, false, false, false),
            ("read at connect", false, None, false, false, true),
            (
                "SET NAMES latin1, read back",
                false,
                Some("latin1"),
                false,
                false,
                false,
            ),
            (
                "SET NAMES utf8mb4 after latin1",
                true,
                Some("utf8mb4"),
                false,
                false,
                true,
            ),
            (
                "a SET qcache did not follow",
                false,
                None,
                true,
                false,
                false,
            ),
            (
                "a trigger's, before the read",
                false,
                None,
                false,
                true,
                false,
            ),
        ];
        for (rule, not_utf8, set, lost, stale, want) in rows {
            let w = World::new(false);
            let mut st = w.session(Some("db"));
            st.client_not_utf8_inherited = *not_utf8;
            if let Some(v) = set {
                st.vars.insert("character_set_client".into(), v.to_string());
            }
            st.lost_track = *lost;
            st.ctx_stale = *stale;
            assert_eq!(st.client_utf8(), *want, "{rule}");
        }
    }

    /// Statement ids as the server reads them: MariaDB's -1 is the last prepared one, until
    /// it is closed.
    #[test]
    fn statement_ids_resolve_as_the_server_reads_them() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        st.last_stmt = Some(4);
        let rows: &[(u32, Option<u32>)] = &[(4, Some(4)), (9, Some(9)), (u32::MAX, Some(4))];
        for (id, want) in rows {
            assert_eq!(st.resolve_stmt(*id), *want, "id {id}");
        }
        st.close_stmt(u32::MAX);
        assert_eq!(st.last_stmt, None);
        assert_eq!(st.resolve_stmt(u32::MAX), None);
    }

    /// The default database names unqualified tables, lower-cased, and is in the key.
    #[test]
    fn the_default_database_qualifies_names_and_keys() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        let before = st.fingerprint;
        type Row = (
            Option<&'static str>,
            &'static str,
            Option<(&'static str, &'static str)>,
        );
        let rows: &[Row] = &[
            (None, "T", Some(("db", "t"))),
            (Some("Other"), "t", Some(("other", "t"))),
        ];
        for (schema, name, want) in rows {
            let want = want.map(|(s, n)| (s.to_string(), n.to_string()));
            assert_eq!(st.qualify(*schema, name), want, "{schema:?}.{name}");
        }
        st.set_db(None);
        assert_eq!(st.qualify(None, "t"), None);
        assert_ne!(st.fingerprint, before);
        st.set_db(Some("db".into()));
        assert_eq!(st.fingerprint, before);
    }

    /// What the session wrote, and since when (read-your-own-writes under `max_stale`).
    #[test]
    fn own_writes_remember_what_was_bumped() {
        let w = World::new(false);
        let t = |n: &str| w.versions.table("db", n);
        let table = |n: &str| What::Table(("db".into(), n.into()));
        let src = Source::Here(crate::observe::stats::InvalidationSource::Write);
        let rows: Vec<(&str, Vec<What>, &str, bool)> = vec![
            ("a table it wrote", vec![table("a")], "a", true),
            ("another table", vec![table("a")], "b", false),
            ("its schema", vec![What::Schema("db".into())], "b", true),
            ("everything", vec![What::Everything], "b", true),
            ("nothing", vec![], "a", false),
        ];
        for (why, what, read, wrote) in rows {
            let mut own = super::OwnWrites::default();
            let since = std::time::Instant::now();
            own.note(&Invalidation::new(src, what));
            assert_eq!(own.since([t(read)].iter(), since), wrote, "{why}");
            let later = std::time::Instant::now() + std::time::Duration::from_secs(1);
            assert!(!own.since([t(read)].iter(), later), "{why}: not after");
        }
    }

    /// COM_CHANGE_USER accepted: a fresh session of the new user (its database and
    /// character set), or, when qcache could not read the command, one it cannot follow.
    #[test]
    fn a_changed_user_starts_afresh() {
        use crate::protocol::handshake::ChangeUser;
        let w = World::new(false);
        type Row = (
            Option<ChangeUser>,
            &'static str,
            Option<&'static str>,
            u8,
            bool,
        );
        let rows: Vec<Row> = vec![
            // (command, user after, database after, charset after, lost track)
            (
                Some(ChangeUser {
                    user: "v".into(),
                    database: Some("other".into()),
                    charset: Some(8),
                }),
                "v",
                Some("other"),
                8,
                false,
            ),
            (
                Some(ChangeUser {
                    user: "v".into(),
                    database: None,
                    charset: None,
                }),
                "v",
                None,
                45,
                false,
            ),
            (None, "u", Some("db"), 45, true),
        ];
        for (cu, user, db, charset, lost) in rows {
            let mut st = w.session(Some("db"));
            st.vars.insert("sql_mode".into(), "'ANSI'".into());
            st.priv_private = 9;
            st.last_stmt = Some(1);
            let before = st.fingerprint;
            st.user_changed((&w.cfg, &w.versions.faults), 2, 5, cu);
            assert_eq!(st.user, user);
            assert_eq!(st.db.as_deref(), db, "{user}");
            assert_eq!(st.charset, charset, "{user}");
            assert_eq!(st.lost_track, lost, "{user}");
            assert_eq!((st.priv_baseline, st.priv_private), (5, 0));
            assert!(st.vars.is_empty() && st.last_stmt.is_none() && st.identity.is_none());
            if user != "u" {
                assert_ne!(st.fingerprint, before, "{user}");
            }
        }
    }

    /// COM_CHANGE_USER answered: accepted, the new user's session; refused, the old
    /// account's, reset (its database and character set kept, its settings gone).
    #[test]
    fn a_change_user_answer_leaves_one_account() {
        use crate::protocol::handshake::ChangeUser;
        let w = World::new(false);
        let cu = || {
            Some(ChangeUser {
                user: "v".into(),
                database: Some("other".into()),
                charset: Some(8),
            })
        };
        // (the server's answer, user after, database after, charset after, baseline after)
        type Row = (Option<u16>, &'static str, &'static str, u8, u64);
        let rows: &[Row] = &[(Some(2), "v", "other", 8, 5), (None, "u", "db", 45, 0)];
        for &(status, user, db, charset, baseline) in rows {
            let mut st = w.session(Some("db"));
            st.vars.insert("sql_mode".into(), "'ANSI'".into());
            st.last_stmt = Some(1);
            st.priv_baseline = 0;
            st.change_user_answered((&w.cfg, &w.versions.faults), status, 5, cu());
            assert_eq!((st.user.as_str(), st.db.as_deref()), (user, Some(db)));
            assert_eq!(
                (st.charset, st.priv_baseline),
                (charset, baseline),
                "{user}"
            );
            assert!(st.vars.is_empty() && st.last_stmt.is_none() && !st.lost_track);
        }
    }
}
