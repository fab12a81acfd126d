//! Writes, text or prepared: what a statement changes is planned before it goes upstream
//! (named tables through the catalog, or a conservative scope) and applied before its OK
//! reaches the client (`apply_status`); temporary tables and a dropped default database are
//! followed after it.

use super::{Session, SessionError};
use crate::analysis::{self, Analysis, TableRef, WriteInfo, WriteTargets};
use crate::config::Conservative;
use crate::policy::privileges::{self, PrivilegeChange};
use crate::policy::{classify, context};
use crate::protocol::codec::Packet;
use crate::protocol::response::{Expect, Response};

impl Session {
    /// A write, text or prepared: what it changes is planned before it goes upstream and
    /// bumped before its OK reaches the client (in `apply_status`).
    /// `digest` is that of the statement as the server reads it ([`analysis::server_text`]).
    pub(super) async fn write(
        &mut self,
        pkt: &Packet,
        sql: &[u8],
        digest: u64,
    ) -> Result<(), SessionError> {
        let text = analysis::server_text(sql, self.st.server);
        self.plan_privileges(&text);
        if analysis::is_compound(&text) {
            self.plan_compound(&text);
            return self.relay_command(pkt, Expect::Results).await.map(drop);
        }
        self.plan_code_views(&text);
        let an = self.shared.analyzer.analyze(&text, digest);
        self.plan_ddl_code(&text);
        match &*an {
            Analysis::Write(w) => {
                self.plan_write(w);
                self.plan_write_rows(w, &text, &pkt.payload);
            }
            _ => self.plan_unknown_write(),
        }
        let resp = self.relay_command(pkt, Expect::Results).await?;
        if let Analysis::Write(w) = &*an {
            self.after_write(w, &resp);
        }
        Ok(())
    }

    pub(super) fn plan_write(&mut self, w: &WriteInfo) {
        if self.writes_rows_elsewhere(w) {
            self.plan_unknown_write();
        }
        match &w.targets {
            WriteTargets::Tables(list) => {
                let mut named = Vec::with_capacity(list.len());
                for t in list {
                    match self.st.qualify(t.schema.as_deref(), &t.name) {
                        Some(q) => named.push(q),
                        // No default database: the server will refuse it; nothing changes.
                        None => continue,
                    }
                }
                if named
                    .iter()
                    .any(|(s, n)| privileges::is_privilege_table(s, n))
                {
                    self.plan_privilege_change(PrivilegeChange::privilege_table());
                }
                if !w.ddl {
                    // A trigger may SET the writer's session variables.
                    let named: Vec<_> = named
                        .iter()
                        .filter(|t| !self.st.temp_tables.contains(*t))
                        .cloned()
                        .collect();
                    if !named.is_empty()
                        && context::context_stale_after(self.shared.catalog.write_triggers(&named))
                    {
                        self.st.ctx_stale = true;
                    }
                    if !named.is_empty() && self.shared.catalog.write_may_create_temporaries(&named)
                    {
                        self.temporaries_after_code();
                    }
                }
                let catalog = &self.shared.catalog;
                let expanded = if w.ddl {
                    catalog.expand_write(&named)
                } else {
                    catalog.expand_data_write(&named)
                };
                match expanded {
                    Some(all) => {
                        let v = self.shared.cache.versions();
                        for (s, n) in all {
                            self.st.pending.tables.push(v.table(&s, &n));
                        }
                    }
                    None => self.plan_unknown_write_of(w),
                }
            }
            WriteTargets::Schema(s) => self.st.pending.schemas.push(s.to_lowercase()),
            WriteTargets::Unknown => self.plan_unknown_write_of(w),
        }
        if w.ddl {
            self.st.pending.ddl = true;
            match &w.targets {
                WriteTargets::Tables(list) if !list.is_empty() => {
                    let named: Vec<_> = list
                        .iter()
                        .filter_map(|t| self.st.qualify(t.schema.as_deref(), &t.name))
                        .collect();
                    self.st.pending.ddl_changed.objects.extend(named);
                }
                WriteTargets::Schema(s) => {
                    self.st.pending.ddl_changed.schemas.push(s.to_lowercase());
                }
                // DDL naming nothing (DROP TRIGGER t, routines) or unreadable.
                _ => self.st.pending.ddl_changed.everything = true,
            }
        }
    }

    pub(super) fn plan_scope(&mut self, scope: Conservative) {
        match (scope, &self.st.db) {
            (Conservative::Schema, Some(db)) => {
                let db = db.to_lowercase();
                self.st.pending.schemas.push(db);
            }
            _ => self.st.pending.all = true,
        }
    }

    /// An unknown write run in database `db` rather than the session's current one (a
    /// statement prepared there): `invalidation.unknown_write` applied to it.
    pub(super) fn plan_unknown_write_in(&mut self, db: Option<&str>) {
        self.stored_code_runs();
        match (self.shared.config().invalidation.unknown_write, db) {
            (Conservative::Schema, Some(db)) => self.st.pending.schemas.push(db.to_lowercase()),
            _ => self.st.pending.all = true,
        }
    }

    /// A write whose tables qcache cannot name. DDL runs no stored code of its own (a
    /// CREATE TABLE … SELECT is judged by its text: `plan_ddl_code`), so only its scope is
    /// planned, and the settings read again as before.
    fn plan_unknown_write_of(&mut self, w: &WriteInfo) {
        if !w.ddl {
            return self.plan_unknown_write();
        }
        self.st.ctx_stale |= context::context_stale_after(context::WriteTriggers::Unknown);
        let scope = self.shared.config().invalidation.unknown_write;
        self.plan_scope(scope);
    }

    /// A DDL statement, before it is sent: the code it creates is judged at once
    /// (`Catalog::note_ddl`), and the code it runs (`policy::classify::ddl_runs_code`) is
    /// planned as any statement's.
    pub(super) fn plan_ddl_code(&mut self, text: &[u8]) {
        if analysis::first_keyword_is(text, "CREATE") {
            let db = self.st.db.as_deref().unwrap_or_default();
            self.shared
                .catalog
                .note_ddl(&String::from_utf8_lossy(text), db);
            if classify::ddl_runs_code(text) {
                // Its query's function may write any table, as in a read.
                self.plan_unknown_write();
            }
        }
    }

    pub(super) fn plan_unknown_write(&mut self) {
        // Whatever it writes may fire triggers.
        self.stored_code_runs();
        let scope = self.shared.config().invalidation.unknown_write;
        self.plan_scope(scope);
    }

    /// A statement of a shape that writes nothing by itself still runs code, or ends a
    /// transaction, whose writes qcache cannot name (`policy::classify`).
    pub(super) fn plan_unknown_write_for(&mut self, why: classify::UnknownWrite) {
        tracing::debug!(reason = why.as_str(), "statement may write unknown tables");
        self.plan_unknown_write();
    }

    /// Stored code (a trigger, a function, a view that calls one) may run in the session:
    /// it may SET the session's variables, read again before the next cacheable read
    /// (`policy::context::context_stale_after`), and create a temporary table no statement
    /// names (`policy::classify::after_stored_code`).
    pub(super) fn stored_code_runs(&mut self) {
        self.st.ctx_stale |= context::context_stale_after(context::WriteTriggers::Unknown);
        self.temporaries_after_code();
    }

    /// Applies [`classify::after_stored_code`] with what the catalog says now; also asked
    /// before each read while the answer is unknown.
    pub(super) fn temporaries_after_code(&mut self) {
        match classify::after_stored_code(self.shared.catalog.code_temporaries()) {
            classify::AfterStoredCode::Named(names) => {
                self.st.temporaries_unknown = false;
                // Of an engine no statement here showed: their rows may be elsewhere.
                self.st.temp_elsewhere.extend(names.iter().cloned());
                self.st.temp_tables.extend(names);
            }
            classify::AfterStoredCode::Lost => {
                self.st.temporaries_unknown = false;
                self.st.lost_track = true;
                self.st.temps_unseen = true;
            }
            classify::AfterStoredCode::Unknown => self.st.temporaries_unknown = true,
        }
    }

    /// A statement other than a plain read that may read a view whose definition runs
    /// stored code (`Catalog::mentions_code_view`): that code may write any table, as
    /// in a read of the view (`Session::plan_side_effects`).
    pub(super) fn plan_code_views(&mut self, text: &[u8]) {
        if self.shared.catalog.mentions_code_view(text) {
            self.plan_unknown_write();
        }
    }

    /// A compound statement (`analysis::is_compound`): anonymous stored code, planned as a
    /// CALL; and since its body may define or change relations, the catalog is reloaded
    /// whole after it when its text names DDL.
    pub(super) fn plan_compound(&mut self, text: &[u8]) {
        // A multi-statement's parts may have planned DDL already.
        let ddl = self.st.pending.ddl;
        self.plan_call();
        self.code_ran_unseen(text);
        self.st.pending.ddl = ddl;
        if ["create", "alter", "drop", "rename"]
            .iter()
            .any(|k| analysis::contains_ci(text, k.as_bytes()))
        {
            self.st.pending.ddl = true;
            self.st.pending.ddl_changed.everything = true;
        }
    }

    /// Code qcache does not read as statements ran (`text`: what the client sent, as the
    /// server reads it): it may have created temporary tables of unknown engines
    /// (`classify::unseen_code_may_create_temporaries`).
    pub(super) fn code_ran_unseen(&mut self, text: &[u8]) {
        if !self.st.temps_unseen {
            let procedures = self.shared.catalog.procedures_may_create_temporaries();
            self.st.temps_unseen = classify::unseen_code_may_create_temporaries(text, procedures);
        }
    }

    pub(super) fn plan_call(&mut self) {
        let scope = self.shared.config().invalidation.call;
        self.plan_scope(scope);
        if scope == Conservative::Schema {
            // A SQL-level EXECUTE runs its statement in the database it was prepared in.
            let dbs = self.st.sql_prepared_in.clone();
            self.st.pending.schemas.extend(dbs);
        }
        self.st.pending.ddl = false;
        self.st.lost_track = true;
    }

    pub(super) fn after_write(&mut self, w: &WriteInfo, resp: &Response) {
        let outcome = if resp.error {
            classify::Outcome::Failed
        } else {
            self.forget_dropped_db(w);
            classify::Outcome::Done
        };
        self.track_temporary(w, outcome);
    }

    pub(super) fn track_temporary(&mut self, w: &WriteInfo, outcome: classify::Outcome) {
        let st = &mut self.st;
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

    /// Whether write `w` may change rows of tables it does not name through a temporary
    /// table whose rows are other tables' (`policy::classify::temporary_rows_elsewhere`):
    /// one it writes, or one it creates or alters into such a table (which it then
    /// follows as one; a `CREATE … SELECT` into it writes them already). Base tables of
    /// that kind are the catalog's (their writes are unknown there).
    fn writes_rows_elsewhere(&mut self, w: &WriteInfo) -> bool {
        let WriteTargets::Tables(list) = &w.targets else {
            return false;
        };
        if self.st.temps_unseen && !w.ddl && !list.is_empty() {
            return true;
        }
        if self.st.temp_tables.is_empty() && w.temp_created.is_empty() {
            // No temporary table involved: the common write allocates nothing here.
            return false;
        }
        let named: Vec<(String, String)> = list
            .iter()
            .filter_map(|t| self.st.qualify(t.schema.as_deref(), &t.name))
            .collect();
        let created: Vec<(String, String)> = w
            .temp_created
            .iter()
            .filter_map(|t| self.st.qualify(t.schema.as_deref(), &t.name))
            .collect();
        let temps: Vec<(String, String)> = named
            .iter()
            .filter(|t| self.st.temp_tables.contains(*t) || created.contains(t))
            .cloned()
            .collect();
        if temps.is_empty() {
            return false;
        }
        let like = w.like_source.as_ref().map(|src| {
            match self.st.qualify(src.schema.as_deref(), &src.name) {
                None => classify::LikeSource::Unknown,
                Some(q) if self.st.temp_elsewhere.contains(&q) => classify::LikeSource::Elsewhere,
                // A temporary table (not elsewhere) holds its own rows, whatever base
                // table its name shadows.
                Some(q) if self.st.temp_tables.contains(&q) => classify::LikeSource::OwnRows,
                Some(q) => match self.shared.catalog.expand_data_write(&[q]) {
                    Some(_) => classify::LikeSource::OwnRows,
                    None => classify::LikeSource::Unknown,
                },
            }
        });
        let elsewhere = classify::temporary_rows_elsewhere(w.other_rows, like);
        if elsewhere {
            self.st.temp_elsewhere.extend(temps.iter().cloned());
        }
        elsewhere || temps.iter().any(|t| self.st.temp_elsewhere.contains(t))
    }

    /// After DROP DATABASE of the session's current database the server has none.
    pub(super) fn forget_dropped_db(&mut self, w: &WriteInfo) {
        if let WriteTargets::Schema(s) = &w.targets {
            if crate::policy::context::drop_forgets_db(self.st.db.as_deref(), s) {
                self.st.set_db(None);
            }
        }
    }
}
