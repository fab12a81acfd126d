//! Several statements in one COM_QUERY: what each may change, planned before the text goes
//! up. Nothing of it is cached, and which of its statements ran is not followed, so each is
//! planned as if it ran and the session's settings count as lost after any SET or USE.

use super::slices::Planner;
use super::state::SessionState;
use super::write;
use crate::analysis::{self, Analysis, StatementKind, WriteInfo, WriteTargets};
use crate::policy::{classify, context, snapshot};

/// What the session does after the statements' answer, from their plan.
pub struct Multi {
    /// The writes they name: a temporary table any of them may have created or renamed is
    /// one from now on.
    pub writes: Vec<WriteInfo>,
    /// A SET or USE among them: the session's settings changed in ways qcache does not
    /// replay statement by statement.
    pub lost: bool,
}

impl Planner<'_> {
    /// Plans what the statements of `sql` (as the server reads it) may change into the
    /// session's pending writes.
    pub fn plan_multi(&self, st: &mut SessionState, sql: &[u8]) -> Multi {
        let mut lost = false;
        let mut writes = Vec::new();
        // Its PREPAREs are not followed one by one: no name is known to hold a SET.
        st.sql_prepared_sets.clear();
        // A compound statement anywhere, split at its inner `;` (`DO 1; IF … END IF`).
        let mut compound = analysis::is_compound(sql);
        // A part that may change the client character set (a SET, code) leaves it unknown
        // to the parts after it; a USE, the database their unqualified names are in.
        let mut charset_moved = false;
        let mut db_moved = false;
        for part in analysis::split_statements(sql) {
            write::plan_privileges(st, part);
            compound |= analysis::is_compound(part);
            let scan = analysis::scan(part);
            if scan.kind != StatementKind::Select {
                // Reads plan the views they read in `plan_side_effects`.
                self.plan_code_views(st, part);
            }
            match scan.kind {
                StatementKind::Write => match analysis::analyze(&String::from_utf8_lossy(part)) {
                    Analysis::Write(w) => {
                        // Names in a client character set qcache does not read, or left
                        // unqualified after a USE of this text (the server ran it first;
                        // the session's database is the one before it): unknown.
                        let utf8 = st.client_utf8() && !charset_moved;
                        let unqualified = db_moved
                            && matches!(&w.targets, WriteTargets::Tables(list)
                                if list.iter().any(|t| t.schema.is_none()));
                        if unqualified
                            || context::names_undecodable(utf8, st.db.as_deref(), part).is_some()
                        {
                            let unknown = WriteInfo {
                                targets: WriteTargets::Unknown,
                                ..w.clone()
                            };
                            self.plan_write(st, &unknown);
                        } else {
                            self.plan_write(st, &w);
                        }
                        // Whether or not it ran: forgetting the database is only
                        // conservative.
                        write::forget_dropped_db(st, &w);
                        writes.push(w);
                    }
                    _ => self.plan_unknown_write(st),
                },
                StatementKind::Call | StatementKind::Execute => {
                    charset_moved = true;
                    self.plan_call(st, part);
                }
                StatementKind::Set => {
                    lost = true;
                    charset_moved = true;
                    if analysis::contains_ci(part, b"query_cache_type") {
                        // The server runs it (qcache answers only a SET sent alone).
                        self.code_may_set_qct(st, crate::policy::qct::CodeRan::UnfollowedSet);
                    }
                    let text = String::from_utf8_lossy(part);
                    let info = analysis::analyze_set(&text);
                    if let Some(why) = classify::set_writes(info.as_ref(), &text) {
                        self.plan_unknown_write_for(st, why);
                    }
                }
                StatementKind::Use => {
                    lost = true;
                    db_moved = true;
                }
                StatementKind::Select => {
                    // A read that may write, or one that is a write read another way
                    // (NO_BACKSLASH_ESCAPES): what it changes is planned either way.
                    let an = analysis::analyze(&String::from_utf8_lossy(part));
                    self.plan_side_effects(st, &an, part);
                }
                k => self.plan_other(st, k, part, !db_moved),
            }
        }
        // Once, for the whole text, after the parts: a routine's or trigger's compound body
        // splits into parts here, and the code it creates does not run now.
        self.plan_ddl_code(st, sql);
        if compound {
            // Anonymous stored code split at its inner `;`: as a CALL, whatever its parts.
            self.plan_compound(st, sql);
        }
        Multi { writes, lost }
    }

    /// One of the statements that is neither a read, a write, a call nor a SET or USE.
    /// `db_known`: no USE ran before it in this text (see `plan_table_locks_in`).
    fn plan_other(&self, st: &mut SessionState, k: StatementKind, part: &[u8], db_known: bool) {
        write::note_sql_prepare(st, part);
        if matches!(k, StatementKind::Other | StatementKind::Flush) {
            // Which of them ran is not followed: an UNLOCK here releases nothing.
            self.plan_table_locks_in(st, part, db_known);
        }
        if matches!(
            k,
            StatementKind::Begin | StatementKind::Commit | StatementKind::Rollback
        ) {
            // Which of them ran is not followed: an XA COMMIT here ends nothing.
            st.txn.boundary_sent(snapshot::xa(part));
        }
        if let Some(why) = classify::relayed_write(k, part) {
            self.plan_unknown_write_for(st, why);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::World;

    /// (rule, text, tables pending, everything pending, writes kept, settings lost)
    type Row = (
        &'static str,
        &'static str,
        &'static [&'static str],
        bool,
        usize,
        bool,
    );

    /// What each kind of statement among several plans, and what the session does after.
    #[test]
    fn several_statements_plan_what_each_may_change() {
        let rows: [Row; 10] = [
            (
                "two reads: nothing",
                "SELECT 1; SELECT 2",
                &[],
                false,
                0,
                false,
            ),
            (
                "a write among reads: its table",
                "SELECT 1; UPDATE parent SET name = 'x'",
                &["db.parent"],
                false,
                1,
                false,
            ),
            (
                "a SET: settings lost",
                "SELECT 1; SET @a = 1",
                &[],
                false,
                0,
                true,
            ),
            (
                "a USE: settings lost",
                "USE db; SELECT 1",
                &[],
                false,
                0,
                true,
            ),
            // The server runs the USE first: the write's unqualified names are in db2.
            (
                "a USE then a write: its names unknown",
                "USE db2; UPDATE parent SET name = 'x'",
                &[],
                true,
                1,
                true,
            ),
            (
                "a USE then a qualified write: its table",
                "USE db2; UPDATE db.parent SET name = 'x'",
                &["db.parent"],
                false,
                1,
                true,
            ),
            (
                "a USE then a write lock: its table unknown",
                "USE db2; LOCK TABLES child WRITE",
                &[],
                true,
                0,
                true,
            ),
            (
                "a CALL: everything",
                "SELECT 1; CALL p()",
                &[],
                true,
                0,
                false,
            ),
            (
                "a write lock: its table",
                "LOCK TABLES child WRITE; SELECT 1",
                &["db.child"],
                false,
                0,
                false,
            ),
            // Its parts split at the inner `;` read as writes the analysis cannot name.
            (
                "a compound statement: as a CALL",
                "SELECT 1; BEGIN NOT ATOMIC SELECT 2; END",
                &[],
                true,
                2,
                false,
            ),
        ];
        for (rule, sql, tables, all, writes, lost) in rows {
            let w = World::new(true);
            let mut st = w.session(Some("db"));
            let m = w.planner().plan_multi(&mut st, sql.as_bytes());
            let pending: Vec<String> = st
                .pending
                .tables
                .iter()
                .chain(st.pending.rows.iter().map(|(t, _)| t))
                .map(|t| format!("{}.{}", t.schema, t.name))
                .collect();
            assert_eq!(pending, tables, "{rule}");
            assert_eq!(st.pending.all, all, "{rule}");
            assert_eq!(m.writes.len(), writes, "{rule}");
            assert_eq!(m.lost, lost, "{rule}");
        }
    }
}
