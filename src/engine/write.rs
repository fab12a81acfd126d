//! Writes, text or prepared: what a statement changes, planned before it goes upstream
//! (named tables through the catalog, or a conservative scope, `invalidation.unknown_write`
//! and `invalidation.call`) into the session's `pending` writes, which the session applies
//! before the OK reaches the client; privilege changes planned with them; temporary tables
//! and a dropped default database followed after the answer.

use super::slices::Planner;
use super::state::SessionState;
use crate::analysis::{self, Analysis, ReadInfo, StatementKind, TableRef, WriteInfo, WriteTargets};
use crate::config::Conservative;
use crate::policy::locks::{self, TableLocks};
use crate::policy::privileges::{self, PrivilegeChange};
use crate::policy::qct::CodeRan;
use crate::policy::{classify, context};

impl Planner<'_> {
    /// A write statement, text or prepared (`sql`, `digest`: its text and the digest of it
    /// as the server reads it; `payload`: what goes upstream): everything it changes is
    /// planned before it is sent, privileges first, then the views and stored code it
    /// names, the tables (or rows) it writes, and last what it patches, which depends on
    /// all it invalidates. Anonymous code is planned as a CALL. Returns its analysis when it
    /// is a write the session follows after the answer ([`after_write`]).
    pub fn plan_statement_write(
        &self,
        st: &mut SessionState,
        sql: &[u8],
        digest: u64,
        payload: &[u8],
        cache: &crate::cache::Cache,
    ) -> Option<std::sync::Arc<Analysis>> {
        let text = analysis::server_text(sql, st.server);
        plan_privileges(st, &text);
        if analysis::is_compound(&text) {
            self.plan_compound(st, &text);
            return None;
        }
        self.plan_code_views(st, &text);
        let an = self.analyzer.analyze(&text, digest);
        self.plan_ddl_code(st, &text);
        match &*an {
            // Names in a client character set qcache does not read (latin1's `café` is the
            // byte e9 to it): the tables the analysis names may not be the ones written.
            Analysis::Write(w)
                if context::names_undecodable(st.client_utf8(), st.db.as_deref(), &text)
                    .is_some() =>
            {
                self.plan_write(
                    st,
                    &WriteInfo {
                        targets: WriteTargets::Unknown,
                        ..w.clone()
                    },
                );
                Some(an)
            }
            Analysis::Write(w) => {
                self.plan_write(st, w);
                let inserted = self.plan_write_rows(st, w, &text, payload);
                self.plan_patch(st, &text, payload, cache, inserted.as_deref());
                Some(an)
            }
            _ => {
                self.plan_unknown_write(st);
                None
            }
        }
    }

    /// What a text statement of `kind` (`text`, as the server reads it) owes before it is
    /// sent, whichever command carries it: what it may write that the analysis of writes
    /// does not see (`classify::relayed_write`), and the views with stored code that a
    /// SET's or DO's subquery or a SHOW's WHERE names (reads plan theirs as side effects,
    /// writes in [`plan_statement_write`](Self::plan_statement_write)).
    pub fn plan_text_statement(&self, st: &mut SessionState, kind: StatementKind, text: &[u8]) {
        if let Some(why) = classify::relayed_write(kind, text) {
            self.plan_unknown_write_for(st, why);
        }
        if !matches!(
            kind,
            StatementKind::Select
                | StatementKind::Write
                | StatementKind::Call
                | StatementKind::Execute
                | StatementKind::Empty
        ) {
            self.plan_code_views(st, text);
        }
    }

    pub fn plan_write(&self, st: &mut SessionState, w: &WriteInfo) {
        st.pending.implicit_commit |= w.implicit_commit;
        if self.writes_rows_elsewhere(st, w) {
            self.plan_unknown_write(st);
        }
        match &w.targets {
            WriteTargets::Tables(list) => {
                let mut named = Vec::with_capacity(list.len());
                for t in list {
                    match st.qualify(t.schema.as_deref(), &t.name) {
                        Some(q) => named.push(q),
                        // No default database: the server will refuse it; nothing changes.
                        None => continue,
                    }
                }
                if named
                    .iter()
                    .any(|(s, n)| privileges::is_privilege_table(s, n))
                {
                    plan_privilege_change(st, PrivilegeChange::privilege_table());
                }
                if !w.ddl {
                    // A trigger may SET the writer's session variables.
                    let named: Vec<_> = named
                        .iter()
                        .filter(|t| !st.temp_tables.contains(*t))
                        .cloned()
                        .collect();
                    if !named.is_empty()
                        && context::context_stale_after(self.catalog.write_triggers(&named))
                    {
                        st.ctx_stale = true;
                        self.code_may_set_qct(st, CodeRan::FunctionOrTrigger);
                    }
                    if !named.is_empty() && self.catalog.write_may_create_temporaries(&named) {
                        self.temporaries_after_code(st);
                    }
                }
                let catalog = self.catalog;
                let expanded = if w.ddl {
                    catalog.expand_write(&named)
                } else {
                    catalog.expand_data_write(&named)
                };
                match expanded {
                    Some(all) => {
                        let v = self.versions;
                        for (s, n) in all {
                            st.pending.tables.push(v.table(&s, &n));
                        }
                    }
                    None => self.plan_unknown_write_of(st, w),
                }
            }
            WriteTargets::Schema(s) => st.pending.schemas.push(s.to_lowercase()),
            WriteTargets::Unknown => self.plan_unknown_write_of(st, w),
        }
        if w.ddl {
            st.pending.ddl = true;
            match &w.targets {
                WriteTargets::Tables(list) if !list.is_empty() => {
                    let named: Vec<_> = list
                        .iter()
                        .filter_map(|t| st.qualify(t.schema.as_deref(), &t.name))
                        .collect();
                    st.pending.ddl_changed.objects.extend(named);
                }
                WriteTargets::Schema(s) => {
                    st.pending.ddl_changed.schemas.push(s.to_lowercase());
                }
                // DDL naming nothing (DROP TRIGGER t, routines) or unreadable.
                _ => st.pending.ddl_changed.everything = true,
            }
        }
    }

    /// [`plan_privileges`] for a path that holds the planner (a prepared statement's
    /// execute): what the statement, `text` as the server reads it, does to privileges.
    pub fn plan_privileges_of(&self, st: &mut SessionState, text: &[u8]) {
        plan_privileges(st, text);
    }

    /// An unknown write run in database `db` rather than the session's current one (a
    /// statement prepared there): `invalidation.unknown_write` applied to it.
    pub fn plan_unknown_write_in(&self, st: &mut SessionState, db: Option<&str>) {
        self.stored_code_runs(st);
        match (self.cfg.invalidation.unknown_write, db) {
            (Conservative::Schema, Some(db)) => st.pending.schemas.push(db.to_lowercase()),
            _ => st.pending.all = true,
        }
    }

    /// A write whose tables qcache cannot name. DDL runs no stored code of its own (a
    /// CREATE TABLE … SELECT is judged by its text: `plan_ddl_code`), so only its scope is
    /// planned, and the settings read again as before.
    fn plan_unknown_write_of(&self, st: &mut SessionState, w: &WriteInfo) {
        if !w.ddl {
            return self.plan_unknown_write(st);
        }
        st.ctx_stale |= context::context_stale_after(context::WriteTriggers::Unknown);
        let scope = self.cfg.invalidation.unknown_write;
        plan_scope(st, scope);
    }

    /// A DDL statement, before it is sent: the code it creates is judged at once
    /// (`Catalog::note_ddl`), and the code it runs (`policy::classify::ddl_runs_code`) is
    /// planned as any statement's.
    pub fn plan_ddl_code(&self, st: &mut SessionState, text: &[u8]) {
        let body = analysis::statement_body(text);
        let text: &[u8] = &body;
        if analysis::first_keyword_is(text, "CREATE") {
            let db = st.db.as_deref().unwrap_or_default();
            self.catalog.note_ddl(&String::from_utf8_lossy(text), db);
            if classify::ddl_runs_code(text) {
                // Its query's function may write any table, as in a read.
                self.plan_unknown_write(st);
            }
        }
    }

    pub fn plan_unknown_write(&self, st: &mut SessionState) {
        // Whatever it writes may fire triggers.
        self.stored_code_runs(st);
        let scope = self.cfg.invalidation.unknown_write;
        plan_scope(st, scope);
    }

    /// A statement of a shape that writes nothing by itself still runs code, or ends a
    /// transaction, whose writes qcache cannot name (`policy::classify`).
    pub fn plan_unknown_write_for(&self, st: &mut SessionState, why: classify::UnknownWrite) {
        tracing::debug!(reason = why.as_str(), "statement may write unknown tables");
        self.plan_unknown_write(st);
    }

    /// Stored code (a trigger, a function, a view that calls one) may run in the session:
    /// it may SET the session's variables, read again before the next cacheable read
    /// (`policy::context::context_stale_after`), and create a temporary table no statement
    /// names (`policy::classify::after_stored_code`).
    pub fn stored_code_runs(&self, st: &mut SessionState) {
        st.ctx_stale |= context::context_stale_after(context::WriteTriggers::Unknown);
        self.code_may_set_qct(st, CodeRan::FunctionOrTrigger);
        self.temporaries_after_code(st);
    }

    /// Applies [`classify::after_stored_code`] with what the catalog says now; also asked
    /// before each read while the answer is unknown.
    pub fn temporaries_after_code(&self, st: &mut SessionState) {
        match classify::after_stored_code(self.catalog.code_temporaries()) {
            classify::AfterStoredCode::Named(names) => {
                st.temporaries_unknown = false;
                // Of an engine no statement here showed: their rows may be elsewhere.
                st.temp_elsewhere.extend(names.iter().cloned());
                st.temp_tables.extend(names);
            }
            classify::AfterStoredCode::Lost => {
                st.temporaries_unknown = false;
                st.lost_track = true;
                st.temps_unseen = true;
            }
            classify::AfterStoredCode::Unknown => st.temporaries_unknown = true,
        }
    }

    /// A statement other than a plain read that may read a view whose definition runs
    /// stored code (`Catalog::mentions_code_view`): that code may write any table, as
    /// in a read of the view (`Session::plan_side_effects`).
    pub fn plan_code_views(&self, st: &mut SessionState, text: &[u8]) {
        if self.catalog.mentions_code_view(text) {
            self.plan_unknown_write(st);
        }
    }

    /// A compound statement (`analysis::is_compound`): anonymous stored code, planned as a
    /// CALL; and since its body may define or change relations, the catalog is reloaded
    /// whole after it when its text names DDL.
    pub fn plan_compound(&self, st: &mut SessionState, text: &[u8]) {
        // A multi-statement's parts may have planned DDL already.
        let ddl = st.pending.ddl;
        self.plan_call(st, text);
        // It may PREPARE any name: none is known to hold a SET any longer.
        st.sql_prepared_sets.clear();
        st.pending.ddl = ddl;
        if ["create", "alter", "drop", "rename"]
            .iter()
            .any(|k| analysis::contains_ci(text, k.as_bytes()))
        {
            st.pending.ddl = true;
            st.pending.ddl_changed.everything = true;
        }
    }

    /// Code qcache does not read as statements ran (`text`: what the client sent, as the
    /// server reads it): it may have created temporary tables of unknown engines
    /// (`classify::unseen_code_may_create_temporaries`).
    pub fn code_ran_unseen(&self, st: &mut SessionState, text: &[u8]) {
        if !st.temps_unseen {
            let procedures = self.catalog.procedures_may_create_temporaries();
            st.temps_unseen = classify::unseen_code_may_create_temporaries(text, procedures);
        }
    }

    /// Whether write `w` may change rows of tables it does not name through a temporary
    /// table whose rows are other tables' (`policy::classify::temporary_rows_elsewhere`):
    /// one it writes, or one it creates or alters into such a table (which it then
    /// follows as one; a `CREATE … SELECT` into it writes them already). Base tables of
    /// that kind are the catalog's (their writes are unknown there).
    fn writes_rows_elsewhere(&self, st: &mut SessionState, w: &WriteInfo) -> bool {
        let WriteTargets::Tables(list) = &w.targets else {
            return false;
        };
        if st.temps_unseen && !w.ddl && !list.is_empty() {
            return true;
        }
        if st.temp_tables.is_empty() && w.temp_created.is_empty() {
            // No temporary table involved: the common write allocates nothing here.
            return false;
        }
        let named: Vec<(String, String)> = list
            .iter()
            .filter_map(|t| st.qualify(t.schema.as_deref(), &t.name))
            .collect();
        let created: Vec<(String, String)> = w
            .temp_created
            .iter()
            .filter_map(|t| st.qualify(t.schema.as_deref(), &t.name))
            .collect();
        let temps: Vec<(String, String)> = named
            .iter()
            .filter(|t| st.temp_tables.contains(*t) || created.contains(t))
            .cloned()
            .collect();
        if temps.is_empty() {
            return false;
        }
        let like = w.like_source.as_ref().map(|src| {
            match st.qualify(src.schema.as_deref(), &src.name) {
                None => classify::LikeSource::Unknown,
                Some(q) if st.temp_elsewhere.contains(&q) => classify::LikeSource::Elsewhere,
                // A temporary table (not elsewhere) holds its own rows, whatever base
                // table its name shadows.
                Some(q) if st.temp_tables.contains(&q) => classify::LikeSource::OwnRows,
                Some(q) => match self.catalog.expand_data_write(&[q]) {
                    Some(_) => classify::LikeSource::OwnRows,
                    None => classify::LikeSource::Unknown,
                },
            }
        });
        let elsewhere = classify::temporary_rows_elsewhere(w.other_rows, like);
        if elsewhere {
            st.temp_elsewhere.extend(temps.iter().cloned());
        }
        elsewhere || temps.iter().any(|t| st.temp_elsewhere.contains(t))
    }

    /// A CALL, a SQL-level EXECUTE or anonymous code (`text`, as the server reads it): it may
    /// write any table and SET any variable, so it invalidates as configured, and the
    /// session's context is no longer trusted; and it may have created temporary tables
    /// unseen ([`code_ran_unseen`](Self::code_ran_unseen)).
    pub fn plan_call(&self, st: &mut SessionState, text: &[u8]) {
        self.code_ran_unseen(st, text);
        self.code_may_set_qct(st, Self::code_ran(st, text));
        let scope = self.cfg.invalidation.call;
        plan_scope(st, scope);
        if scope == Conservative::Schema {
            // A SQL-level EXECUTE runs its statement in the database it was prepared in.
            let dbs = st.sql_prepared_in.clone();
            st.pending.schemas.extend(dbs);
        }
        st.pending.ddl = false;
        st.lost_track = true;
    }
}

pub fn plan_scope(st: &mut SessionState, scope: Conservative) {
    match (scope, &st.db) {
        (Conservative::Schema, Some(db)) => {
            let db = db.to_lowercase();
            st.pending.schemas.push(db);
        }
        _ => st.pending.all = true,
    }
}

/// At the final ERR of a statement that commits implicitly (`Pending::implicit_commit`)
/// inside a transaction qcache follows: the server committed the transaction before it
/// refused the statement (a DDL naming a table that exists, or a missing one), and an ERR
/// carries no status to say so. The transaction's writes are every session's from then
/// on, so what its end owes (`invalidation::writes::transaction_end`) is owed now, before
/// the client sees the ERR. The transaction is still followed as open until the server's
/// next status says otherwise (reads in it stay as guarded as inside one), and its end
/// invalidates the same again.
pub fn refused_implicit_commit(st: &SessionState) -> Option<crate::invalidation::Invalidation> {
    if !st.pending.implicit_commit {
        return None;
    }
    st.txn
        .writes()
        .filter(|t| !t.written.is_empty() || !t.written_schemas.is_empty() || t.written_unknown)
        .map(crate::invalidation::writes::transaction_end)
}

pub fn after_write(st: &mut SessionState, w: &WriteInfo, error: bool) {
    if error && w.implicit_commit {
        // The server commits the open transaction before it runs a statement that commits
        // implicitly, and may then refuse the statement itself (a table that exists, a
        // missing one): its error carries no status to say so. The metadata locks the
        // transaction's reads took are then released, so none is counted on any longer
        // (`Txn::read`, `policy::read::may_serve`).
        if let Some(txn) = st.txn.writes_mut() {
            txn.read.clear();
        }
    }
    let outcome = if error {
        classify::Outcome::Failed
    } else {
        forget_dropped_db(st, w);
        classify::Outcome::Done
    };
    track_temporary(st, w, outcome);
}

pub fn track_temporary(st: &mut SessionState, w: &WriteInfo, outcome: classify::Outcome) {
    let db = st.db.clone();
    let qualify = |t: &TableRef| {
        let schema = t.schema.clone().or_else(|| db.clone())?;
        Some((schema.to_lowercase(), t.name.to_lowercase()))
    };
    classify::track_temporary(&mut st.temp_tables, w, outcome, qualify);
    // A temporary table whose rows are elsewhere stays so under a new name.
    for (from, to) in &w.renamed {
        if let (Some(f), Some(t)) = (qualify(from), qualify(to)) {
            if st.temp_elsewhere.contains(&f) {
                st.temp_elsewhere.insert(t);
            }
        }
    }
    let temps = &st.temp_tables;
    st.temp_elsewhere.retain(|t| temps.contains(t));
}

/// After DROP DATABASE of the session's current database the server has none.
pub fn forget_dropped_db(st: &mut SessionState, w: &WriteInfo) {
    if let WriteTargets::Schema(s) = &w.targets {
        if crate::policy::context::drop_forgets_db(st.db.as_deref(), s) {
            st.set_db(None);
        }
    }
}

/// The user part of the session's account, when known.
pub fn current_user(st: &SessionState) -> Option<String> {
    st.identity
        .as_ref()
        .map(|id| privileges::account_user(&id.account).to_string())
}

/// Plans the privilege change `sql` makes, if any: applied before its OK reaches the
/// client, with the statement's other invalidation.
pub fn plan_privileges(st: &mut SessionState, sql: &[u8]) {
    let me = current_user(st);
    if let Some(mut c) = privileges::statement_change(sql, me.as_deref()) {
        // An account named in a client character set qcache does not read (latin1's
        // 'josé' is the byte e9 to it) may be anyone's.
        c.all |= context::accounts_undecodable(st.client_utf8(), &c.users);
        plan_privilege_change(st, c);
    }
}

pub fn plan_privilege_change(st: &mut SessionState, c: PrivilegeChange) {
    match &mut st.pending.privileges {
        Some(p) => p.merge(c),
        None => st.pending.privileges = Some(c),
    }
}

/// A successful `SET ROLE`: the server recomputed the session's privileges from the
/// grants as of `epoch_before` (read before the statement was sent) and changed its role.
pub fn role_set(st: &mut SessionState, epoch_before: u64) {
    st.identity = None;
    st.priv_baseline = epoch_before;
    st.priv_private = 0;
    st.priv_epoch = u64::MAX;
}

impl Planner<'_> {
    /// A statement that reads may still write: a stored function can change any table, and
    /// a shape the scan took for a read may parse as a write (`WITH … UPDATE`).
    /// `sql` is the statement's text, for a read whose tables the analysis could not list
    /// (`SELECT … FROM v … INTO @x`): any name in it that is a view running code counts.
    pub fn plan_side_effects(&self, st: &mut SessionState, an: &Analysis, sql: &[u8]) {
        match an {
            Analysis::Read(r)
                if r.may_write
                    || self.reads_code_through_views(st, r)
                    || (r.tables.is_empty()
                        && self.catalog.is_loaded()
                        && self.catalog.mentions_code_view(sql)) =>
            {
                self.plan_unknown_write(st)
            }
            Analysis::Write(w) => self.plan_write(st, w),
            _ => {}
        }
    }

    /// Whether a read names a view (or one nested in it) whose definition calls a stored
    /// function or a sequence: the read runs that code though its own text calls none.
    fn reads_code_through_views(&self, st: &SessionState, info: &ReadInfo) -> bool {
        let named: Vec<_> = info
            .tables
            .iter()
            .filter_map(|t| st.qualify(t.schema.as_deref(), &t.name))
            .collect();
        !named.is_empty() && self.catalog.read_runs_code(&named)
    }

    /// Follows a statement's table locks (`policy::locks`): one that takes them marks the
    /// session before it is sent, and a WRITE lock is planned as a write of its tables, so
    /// that no session is served their entries while it is held. True for `UNLOCK TABLES`,
    /// which the caller clears once the server accepted it.
    pub fn plan_table_locks(&self, st: &mut SessionState, sql: &[u8]) -> bool {
        self.plan_table_locks_in(st, sql, true)
    }

    /// [`plan_table_locks`](Self::plan_table_locks); `db_known`: false where a USE ran
    /// before it that the session's state does not show yet (a multi-statement's parts),
    /// so that a table locked without a schema may be in any database.
    pub fn plan_table_locks_in(&self, st: &mut SessionState, sql: &[u8], db_known: bool) -> bool {
        match locks::table_locks(sql) {
            TableLocks::Take { write } => {
                st.txn.locks_taken();
                // LOCK TABLES commits an open transaction before it takes them, even when
                // it then fails (`refused_implicit_commit`).
                st.pending.implicit_commit = true;
                match write {
                    Some(t) if t.is_empty() => {}
                    Some(t) if db_known || t.iter().all(|t| t.schema.is_some()) => {
                        self.plan_write(st, &WriteInfo::tables(t))
                    }
                    _ => self.plan_unknown_write(st),
                }
                false
            }
            TableLocks::Release => true,
            TableLocks::SavepointRollback => {
                if let Some(txn) = st.txn.writes_mut() {
                    txn.read.clear();
                }
                false
            }
            TableLocks::None => false,
        }
    }
}

/// A SQL-level PREPARE: its statement will run in the current database, whatever the
/// session's when it is EXECUTEd (`Planner::plan_call`).
pub fn note_sql_prepare(st: &mut SessionState, text: &[u8]) {
    if analysis::first_keyword_is(&analysis::statement_body(text), "PREPARE") {
        if let Some(db) = st.db.as_ref().map(|d| d.to_lowercase()) {
            if !st.sql_prepared_in.contains(&db) {
                st.sql_prepared_in.push(db);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    /// What a session's pending writes hold, as names: (tables, schemas, all, ddl).
    fn pending(st: &SessionState) -> (Vec<String>, Vec<String>, bool, bool) {
        let p = &st.pending;
        let tables = p
            .tables
            .iter()
            .map(|t| format!("{}.{}", t.schema, t.name))
            .collect();
        (tables, p.schemas.clone(), p.all, p.ddl)
    }

    /// A failed statement that commits implicitly: the server committed first, so the
    /// transaction's read tables (the metadata locks its reads took) count no longer; any
    /// other failed write leaves them.
    #[test]
    fn a_failed_implicit_commit_forgets_the_transactions_locks() {
        use crate::protocol::packets::status;
        let rows = [
            ("CREATE TABLE child (id int)", true, true, false),
            ("TRUNCATE TABLE child", true, true, false),
            ("CREATE TABLE child (id int)", false, true, true),
            ("UPDATE child SET a = 1", true, true, true),
            ("CREATE TEMPORARY TABLE t (id int)", true, true, true),
        ];
        for (sql, error, in_txn, kept) in rows {
            let w = World::new(true);
            let mut st = w.session(Some("db"));
            if in_txn {
                st.txn
                    .status_answered(status::AUTOCOMMIT | status::IN_TRANS);
            }
            let child = w.versions.table("db", "child");
            if let Some(txn) = st.txn.writes_mut() {
                txn.note_read(std::slice::from_ref(&child));
            }
            after_write(&mut st, &w.write(sql), error);
            let locked = st.txn.writes_mut().is_some_and(|t| t.locked(&child));
            assert_eq!(locked, kept, "{sql} (error {error})");
        }
    }

    /// A statement that commits implicitly and is refused, inside a transaction: what the
    /// transaction wrote is invalidated at the ERR, as at its end; a refused plain write,
    /// or no transaction, owes nothing more.
    #[test]
    fn a_refused_implicit_commit_owes_the_transactions_writes() {
        use crate::protocol::packets::status;
        // (statement, in a transaction, which wrote, invalidates the transaction's writes)
        let rows = [
            ("DROP TABLE no_such_table", true, true, true),
            ("CREATE TABLE child (id int)", true, true, true),
            ("LOCK TABLES no_such_table READ", true, true, true),
            ("UPDATE parent SET name = 'x'", true, true, false),
            ("DROP TABLE no_such_table", true, false, false),
            ("DROP TABLE no_such_table", false, false, false),
        ];
        for (sql, in_txn, wrote, owed) in rows {
            let w = World::new(true);
            let p = w.planner();
            let mut st = w.session(Some("db"));
            if in_txn {
                st.txn
                    .status_answered(status::AUTOCOMMIT | status::IN_TRANS);
                st.txn.transaction_writes();
            }
            if wrote {
                let child = w.versions.table("db", "child");
                st.txn.transaction_writes().written.push(child);
            }
            if sql.starts_with("LOCK") {
                p.plan_table_locks(&mut st, sql.as_bytes());
            } else {
                p.plan_write(&mut st, &w.write(sql));
            }
            let inv = refused_implicit_commit(&st);
            assert_eq!(inv.is_some(), owed, "{sql} (in a transaction: {in_txn})");
            if let Some(inv) = inv {
                assert!(format!("{inv:?}").contains("child"), "{sql}: {inv:?}");
            }
        }
    }

    /// What each kind of write plans, under the configured scopes.
    #[test]
    fn each_write_plans_its_invalidation() {
        type Plan = fn(&Planner<'_>, &mut SessionState, &World);
        type Step = Box<dyn Fn(&Planner<'_>, &mut SessionState, &World)>;
        let write = |sql: &'static str| -> Step {
            Box::new(move |p, st, w| p.plan_write(st, &w.write(sql)))
        };
        let unknown: Plan = |p, st, _| p.plan_unknown_write(st);
        let call: Plan = |p, st, _| {
            st.sql_prepared_in.push("other".into());
            p.plan_call(st, b"CALL p()")
        };
        let compound: Plan =
            |p, st, _| p.plan_compound(st, b"BEGIN NOT ATOMIC CREATE TABLE x (a int); END");
        let elsewhere: Plan = |p, st, _| p.plan_unknown_write_in(st, Some("Other"));
        type Row = (
            &'static str,
            Conservative,
            Option<&'static str>,
            Step,
            (&'static [&'static str], &'static [&'static str], bool, bool),
        );
        let s = Conservative::Schema;
        let a = Conservative::All;
        let rows: Vec<Row> = vec![
            (
                "an update of a named table",
                s,
                Some("db"),
                write("UPDATE parent SET name = 'x' WHERE id = 1"),
                (&["db.parent"], &[], false, false),
            ),
            (
                "qualified, with no default database",
                s,
                None,
                write("INSERT INTO db.child (id) VALUES (1)"),
                (&["db.child"], &[], false, false),
            ),
            (
                "unqualified with no default database: the server refuses it",
                s,
                None,
                write("DELETE FROM child"),
                (&[], &[], false, false),
            ),
            (
                "DDL of a table",
                s,
                Some("db"),
                write("DROP TABLE child"),
                (&["db.child"], &[], false, true),
            ),
            (
                "DDL of a database",
                s,
                Some("db"),
                write("DROP DATABASE Fresh"),
                (&[], &["fresh"], false, true),
            ),
            (
                "an unknown write, schema scope",
                s,
                Some("db"),
                Box::new(unknown),
                (&[], &["db"], false, false),
            ),
            (
                "an unknown write, schema scope, no database",
                s,
                None,
                Box::new(unknown),
                (&[], &[], true, false),
            ),
            (
                "an unknown write, everything",
                a,
                Some("db"),
                Box::new(unknown),
                (&[], &[], true, false),
            ),
            (
                "an unknown write of a statement prepared elsewhere",
                s,
                Some("db"),
                Box::new(elsewhere),
                (&[], &["other"], false, false),
            ),
            (
                "a CALL or EXECUTE: where it was prepared too",
                s,
                Some("db"),
                Box::new(call),
                (&[], &["db", "other"], false, false),
            ),
            (
                "a compound statement naming DDL",
                s,
                Some("db"),
                Box::new(compound),
                (&[], &["db"], false, true),
            ),
        ];
        for (why, scope, db, plan, want) in rows {
            let mut w = World::new(false);
            let mut cfg = (*w.cfg).clone();
            cfg.invalidation.unknown_write = scope;
            cfg.invalidation.call = scope;
            w.cfg = std::sync::Arc::new(cfg);
            let mut st = w.session(db);
            plan(&w.planner(), &mut st, &w);
            let (tables, schemas, all, ddl) = pending(&st);
            let strs = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
            let want = (strs(want.0), strs(want.1), want.2, want.3);
            assert_eq!((tables, schemas, all, ddl), want, "{why}");
        }
    }

    /// A write to the privilege tables, and a GRANT, plan a privilege change; a write
    /// elsewhere none.
    #[test]
    fn privilege_changes_are_planned_with_the_write() {
        let w = World::new(false);
        let rows: &[(&str, bool)] = &[
            ("UPDATE mysql.user SET plugin = 'x'", true),
            ("UPDATE parent SET name = 'x'", false),
        ];
        for (sql, change) in rows {
            let mut st = w.session(Some("db"));
            w.planner().plan_write(&mut st, &w.write(sql));
            assert_eq!(st.pending.privileges.is_some(), *change, "{sql}");
        }
        let mut st = w.session(Some("db"));
        plan_privileges(&mut st, b"GRANT SELECT ON db.* TO someone");
        assert!(st.pending.privileges.is_some());
    }

    /// After the answer: temporary tables followed, a dropped default database forgotten.
    #[test]
    fn after_a_write_the_session_follows_it() {
        let w = World::new(false);
        type Row = (
            &'static str,
            bool,
            &'static [(&'static str, &'static str)],
            Option<&'static str>,
        );
        let rows: &[Row] = &[
            // (sql, failed, temporary tables after, database after)
            (
                "CREATE TEMPORARY TABLE Tmp (a int)",
                false,
                &[("db", "tmp")],
                Some("db"),
            ),
            ("CREATE TEMPORARY TABLE tmp (a int)", true, &[], Some("db")),
            ("DROP DATABASE db", false, &[], None),
            ("DROP DATABASE db", true, &[], Some("db")),
            ("DROP DATABASE other", false, &[], Some("db")),
        ];
        for (sql, failed, temps, db) in rows {
            let mut st = w.session(Some("db"));
            after_write(&mut st, &w.write(sql), *failed);
            let mut got: Vec<_> = st.temp_tables.iter().cloned().collect();
            got.sort();
            let want: Vec<_> = temps
                .iter()
                .map(|(s, t)| (s.to_string(), t.to_string()))
                .collect();
            assert_eq!(got, want, "{sql}, failed: {failed}");
            assert_eq!(st.db.as_deref(), *db, "{sql}, failed: {failed}");
        }
    }

    /// SET ROLE: the identity is asked again, under the epoch read before it.
    #[test]
    fn role_set_forgets_the_identity() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        st.identity = Some(crate::engine::state::Identity {
            account: "u@%".into(),
            role: None,
        });
        assert_eq!(current_user(&st).as_deref(), Some("u"));
        st.priv_private = 3;
        role_set(&mut st, 7);
        assert_eq!(
            (
                st.identity.is_none(),
                st.priv_baseline,
                st.priv_private,
                st.priv_epoch
            ),
            (true, 7, 0, u64::MAX)
        );
        assert_eq!(current_user(&st), None);
    }
}
