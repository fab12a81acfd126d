//! What a successful SET leaves the session with (`policy::context` decides each
//! assignment): literal values followed by their text, and the variables whose values
//! must be read back from the server, which the session reads and hands back.

use super::slices::Planner;
use super::state::SessionState;
use super::write;
use crate::analysis::{QcAssign, SetInfo, SqlLevel};
use crate::config::QueryCacheType;
use crate::policy::context::{self, Assignment};
use crate::policy::{classify, privileges, qct};
use crate::protocol::rows::Values;

/// What following a SET asks of the server.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReadBack {
    /// The variables to read back; none when the text said all.
    pub names: Vec<String>,
    /// qcache can no longer tell the session's settings.
    pub lost: bool,
}

/// Brings the session's state up to what a successful SET `i` left it with, as far as
/// the text tells: literal values by their text, GLOBAL assignments and user variables not
/// at all; what must be read back from the server, in the answer. None: qcache can tell
/// neither what changed nor what to read back (the session has lost track).
pub fn follow_set(st: &mut SessionState, i: Option<&SetInfo>) -> Option<ReadBack> {
    let Some(i) = i else {
        st.lost_track = true;
        return None;
    };
    let mut read_back: Vec<String> = Vec::new();
    let mut lost = false;
    // The server reads every value before it assigns any: a literal instant is read under
    // the zone the session had before this SET (`context::ZONED`).
    let zone_before = st.vars.get("time_zone").cloned();
    for ((k, v), global) in i.assignments.iter().zip(&i.globals) {
        match context::assignment(k, v, *global) {
            Assignment::Ignore => continue,
            Assignment::Literal => {}
            Assignment::Keyed { value, .. } => {
                st.txn.isolation_set(
                    context::reads_uncommitted(value),
                    context::serializable(value),
                );
            }
            Assignment::ReadBack(names) => {
                read_back.extend(names.iter().map(|n| n.to_string()));
                continue;
            }
            Assignment::ReadBackNamed => {
                read_back.push(k.clone());
                continue;
            }
            Assignment::Lost => {
                lost = true;
                continue;
            }
        }
        if k == "transaction" && v.to_ascii_uppercase().contains("ISOLATION") {
            let ru = context::reads_uncommitted(v);
            let ser = context::serializable(v);
            if i.next_transaction_only {
                st.txn.next_isolation_set(ru, ser);
            } else {
                st.txn.isolation_set(ru, ser);
            }
        }
        match context::key_entries(k, v, i.next_transaction_only) {
            Some(entries) => st.vars.extend(entries.into_iter().map(|(name, value)| {
                let value = context::zoned_value(&name, value, zone_before.as_deref());
                (name, value)
            })),
            None => {
                st.vars.insert(k.clone(), v.clone());
                read_back.push(context::isolation_variable(st.mariadb).to_string());
            }
        }
    }
    // What the SET turned on that records the session's statements, by its text: the
    // read-back is a statement such a recorder would show.
    let recorders = i
        .assignments
        .iter()
        .zip(&i.globals)
        .filter(|((k, _), global)| !**global && (k.starts_with("@@") || !k.starts_with('@')))
        .fold(st.recorders(), |r, ((k, v), _)| r.after_set(k, v));
    (st.optimizer_traced, st.profiling) = (recorders.optimizer_trace, recorders.profiling);
    if !read_back.is_empty() && recorders.quiet() {
        // Read with the rest when the session is quiet again, or never.
        let mariadb = st.mariadb;
        if read_back
            .iter()
            .all(|n| context::read_at_connect(n, mariadb))
        {
            st.ctx_stale = true;
        } else {
            lost = true;
        }
        read_back.clear();
    }
    Some(ReadBack {
        names: read_back,
        lost,
    })
}

/// Whether the read-back may be sent: it would clear the SET's warnings, or those of an
/// earlier statement that the SET left in place, which the client may ask for. In an XA
/// transaction past XA END the server refuses any read of a table (1399), so the restore
/// of FOUND_ROWS() the read-back owes would fail where the client sees it: the session is
/// given up instead (never served, as in XA anyway).
pub fn may_read_back(st: &SessionState, warnings: u32) -> bool {
    warnings == 0 && !st.diag_may_persist && !st.txn.xa()
}

/// A read-back [`may_read_back`] refused, put off rather than given up when it can be: the
/// warnings it would clear last only until the next statement that uses tables, which
/// clears them itself. When every name is one the connect read reports
/// (`policy::context::read_at_connect`), the settings are read again before the next
/// cacheable read of tables (`ctx_stale`, as after a trigger; `server_context` drops
/// what `vars` held of them), and `rb` is left with nothing to read now. Otherwise, and in
/// an XA transaction (where that read would be refused), `rb` is returned as it was: not
/// answered, the session loses track ([`read_back_answered`]).
pub fn read_back_put_off(st: &mut SessionState, rb: ReadBack) -> ReadBack {
    let mariadb = st.mariadb;
    if st.txn.xa()
        || !rb
            .names
            .iter()
            .all(|n| context::read_at_connect(n, mariadb))
    {
        return rb;
    }
    st.ctx_stale = true;
    ReadBack {
        names: Vec::new(),
        lost: rb.lost,
    }
}

/// The server's answer to the read-back of `rb` (None: not asked, or not answered), into
/// the session's state. The caller recomputes the fingerprint.
pub fn read_back_answered(st: &mut SessionState, rb: ReadBack, values: Option<Values>) {
    let ReadBack { names, mut lost } = rb;
    if !names.is_empty() {
        match values {
            Some(values) => {
                // A read-back shows an instant under the zone of the moment: the zone read
                // with it, else the one the key holds (`context::ZONED`); one with daylight
                // saving time may show two instants alike (`context::instant_shown`).
                let zone = names
                    .iter()
                    .zip(&values)
                    .find(|(n, _)| context::key_name(n) == "time_zone")
                    .map(|(_, v)| v.clone().unwrap_or_else(|| "\u{0}NULL".to_string()))
                    .or_else(|| st.vars.get("time_zone").cloned());
                for (n, v) in names.iter().zip(values) {
                    let v = v.unwrap_or_else(|| "\u{0}NULL".to_string());
                    if context::is_isolation(n) {
                        st.txn.isolation_set(
                            context::reads_uncommitted(&v),
                            context::serializable(&v),
                        );
                    }
                    if context::is_optimizer_trace(n) {
                        st.optimizer_traced = context::traces_optimizer(&v);
                    }
                    let v = match context::instant_shown(n, &v, zone.as_deref()) {
                        true => context::zoned_value(n, v, zone.as_deref()),
                        false => super::context::instant_unknown(&v),
                    };
                    st.vars.insert(context::key_name(n).to_string(), v);
                }
            }
            None => lost = true,
        }
    }
    if lost {
        st.lost_track = true;
    }
}

/// What a SET is before it goes up.
#[derive(Debug, PartialEq, Eq)]
pub enum SetSent {
    /// It sets only qcache's own `query_cache_type`: answered with an OK by qcache (MySQL 8.0
    /// would reject the name, so it never goes up).
    Local,
    /// Sent; `role`: a SET ROLE, after which the server recomputes the session's privileges;
    /// `qct`: qcache's own `query_cache_type` it also sets, followed once the server
    /// accepted the statement (a SET the server refuses changes nothing, this included).
    Up {
        role: bool,
        qct: Option<QueryCacheType>,
    },
}

impl Planner<'_> {
    /// Plans a SET `info` (of `text`, `sql` its bytes) before it goes up: the write a
    /// function in its values may make (`SET @x = f()`), qcache's own `query_cache_type`
    /// followed, the privileges it changes (SET DEFAULT ROLE, SET PASSWORD, SET ROLE).
    pub fn before_set(
        &self,
        st: &mut SessionState,
        info: Option<&SetInfo>,
        text: &str,
        sql: &[u8],
    ) -> SetSent {
        if let Some(why) = classify::set_writes(info, text) {
            self.plan_unknown_write_for(st, why);
        }
        if info.is_none() {
            self.unread_set_may_set_qct(st, sql);
        }
        let mut qct = None;
        if let Some((i, value)) = info.and_then(|i| self.qct_assigned(i).map(|v| (i, v))) {
            if i.assignments.iter().all(|(k, _)| k == "query_cache_type") {
                st.qct = value;
                (st.qct_unknown, st.qct_pending) = (false, None);
                return SetSent::Local;
            }
            qct = Some(value);
        }
        write::plan_privileges(st, sql);
        SetSent::Up {
            role: privileges::sets_role(sql),
            qct,
        }
    }
}

impl Planner<'_> {
    /// The session-scope `query_cache_type` a SET assigns, `DEFAULT` being the configured one.
    fn qct_assigned(&self, i: &SetInfo) -> Option<QueryCacheType> {
        i.query_cache_type.map(|q| match q {
            QcAssign::Value(v) => v,
            QcAssign::Default => self.cfg.cache.query_cache_type,
        })
    }

    /// The `query_cache_type` a SET `sql` that the server itself runs gives qcache's own
    /// once the server accepted it ([`qct_answered`]): a SET prepared through the binary
    /// protocol or at SQL level, or run by EXECUTE IMMEDIATE. Such a SET is never answered
    /// locally (the server holds the statement), so the server decides, and qcache follows
    /// what it accepted, as it does for a text SET it sends up ([`Planner::before_set`]):
    /// otherwise qcache answers `@@query_cache_type`, and caches, otherwise than the session
    /// set it.
    ///
    /// A SET qcache cannot read that may assign it (its value a parameter, `?` bound at
    /// EXECUTE, a variable, a subquery) leaves it unknown (`policy::qct`,
    /// `CodeRan::UnfollowedSet`): the server sets what the value holds.
    pub fn qct_run_by_server(&self, st: &mut SessionState, sql: &str) -> Option<QueryCacheType> {
        let Some(info) = crate::analysis::analyze_set(sql) else {
            self.unread_set_may_set_qct(st, sql.as_bytes());
            return None;
        };
        self.qct_assigned(&info)
    }

    /// A SET (`sql`) qcache could not read, about to run on the server: if its text may
    /// assign `query_cache_type`, the session's value is unknown from now on (fail closed,
    /// even should the server refuse it: its reads of the variable go to the server).
    fn unread_set_may_set_qct(&self, st: &mut SessionState, sql: &[u8]) {
        if qct::text_may_set(sql) {
            self.code_may_set_qct(st, qct::CodeRan::UnfollowedSet);
        }
    }

    /// Before a SQL-level PREPARE, EXECUTE, EXECUTE IMMEDIATE or DEALLOCATE (`text`, as the
    /// server reads it) goes up: follows which prepared names hold a SET, and returns the
    /// `query_cache_type` it sets once the server accepts it ([`qct_run_by_server`]).
    pub fn before_sql_level(&self, st: &mut SessionState, text: &[u8]) -> Option<QueryCacheType> {
        let body = crate::analysis::statement_body(text);
        let text: &[u8] = &body;
        if crate::analysis::first_keyword_is(text, "CALL") {
            // A procedure may PREPARE any name (multi-statements and compound statements
            // forget them too: `plan_multi`, `plan_compound`).
            st.sql_prepared_sets.clear();
            return None;
        }
        match crate::analysis::sql_level_text(text)? {
            SqlLevel::Prepare(name, t) => {
                // A PREPARE replaces the statement of that name, even one that fails.
                st.sql_prepared_sets.remove(&name);
                if let Some(t) =
                    t.filter(|t| crate::analysis::first_keyword_is(t.as_bytes(), "SET"))
                {
                    st.sql_prepared_sets.insert(name, t);
                }
                None
            }
            SqlLevel::Execute(name) => {
                let t = st.sql_prepared_sets.get(&name).cloned()?;
                self.qct_run_by_server(st, &t)
            }
            SqlLevel::Immediate(t) => t.and_then(|t| self.qct_run_by_server(st, &t)),
            SqlLevel::Deallocate(name) => {
                st.sql_prepared_sets.remove(&name);
                None
            }
        }
    }
}

/// qcache's own `query_cache_type` after a statement that sets it to `qct` (when Some) was
/// answered: followed only when the server accepted it (a refused SET changes nothing).
pub fn qct_answered(st: &mut SessionState, qct: Option<QueryCacheType>, error: bool) {
    if let (Some(q), false) = (qct, error) {
        st.qct = q;
        (st.qct_unknown, st.qct_pending) = (false, None);
    }
}

impl Planner<'_> {
    /// The server is about to run code `ran` for the session: after it the session's
    /// `query_cache_type` may be unknown (`policy::qct::unknown_after`, judged with what the
    /// catalog knows of the code). Every path that runs code the session does not follow
    /// statement by statement comes here.
    pub fn code_may_set_qct(&self, st: &mut SessionState, ran: qct::CodeRan<'_>) {
        if st.qct_unknown || !st.mariadb {
            return;
        }
        let callee = match ran {
            qct::CodeRan::CallOf(text) => qct::called_procedure(text),
            _ => None,
        };
        let callee = callee
            .and_then(|(s, n)| Some((s.or_else(|| st.db.as_deref().map(str::to_lowercase))?, n)));
        let facts = self
            .catalog
            .qct_code_facts(callee.as_ref().map(|(s, n)| (s.as_str(), n.as_str())));
        match qct::after_code(ran, facts, st.mariadb) {
            qct::After::Known => {}
            qct::After::Unknown => {
                st.qct_unknown = true;
                st.qct_pending = None;
            }
            qct::After::WhenLoaded { call } => {
                st.qct_pending = Some(call || st.qct_pending.unwrap_or(false));
            }
        }
    }

    /// Code that ran before the catalog's first load, judged now if it has loaded
    /// (`policy::qct::judged_when_loaded`); asked before each read while pending.
    pub fn judge_pending_qct(&self, st: &mut SessionState) {
        let Some(call) = st.qct_pending else {
            return;
        };
        if let Some(unknown) = qct::judged_when_loaded(call, self.catalog.qct_code_facts(None)) {
            st.qct_pending = None;
            st.qct_unknown |= unknown;
        }
    }

    /// What kind of code a CALL, a SQL-level EXECUTE or EXECUTE IMMEDIATE, or anonymous
    /// compound code (`text`, as the server reads it) runs, for [`code_may_set_qct`]
    /// (Self::code_may_set_qct); before [`before_sql_level`](Self::before_sql_level) forgets
    /// what a name held.
    pub fn code_ran<'a>(st: &SessionState, text: &'a [u8]) -> qct::CodeRan<'a> {
        use crate::analysis::first_keyword_is;
        // Read past a SET STATEMENT prefix; the kinds hold the whole text (a CALL under a
        // prefix is one qcache cannot name: any procedure).
        let body = crate::analysis::statement_body(text);
        if first_keyword_is(&body, "CALL") {
            return qct::CodeRan::CallOf(text);
        }
        let known = match crate::analysis::sql_level_text(&body) {
            // Anonymous compound code: its text shows what it sets.
            None => return qct::CodeRan::Compound(text),
            Some(SqlLevel::Execute(name)) => st.sql_prepared_sets.get(&name).cloned(),
            Some(SqlLevel::Immediate(t)) => t,
            Some(_) => return qct::CodeRan::Call,
        };
        match known {
            // A SET is followed once the server accepted it (`qct_answered`); its values
            // may call functions, as a CALL's arguments may.
            Some(t) if first_keyword_is(t.as_bytes(), "SET") => qct::CodeRan::Call,
            Some(t) if !qct::text_may_set(t.as_bytes()) => qct::CodeRan::Call,
            _ => qct::CodeRan::OpaqueText,
        }
    }
}

/// What a sent SET's answer leaves the session with before its assignments are followed:
/// a SET ROLE (`role_epoch`: the privilege epoch before it was sent) is asked about again
/// even when it failed, qcache does not guess; a successful one may change the idle timers
/// (read again before the next cacheable read) and what BEGIN answers. True when it
/// succeeded and its assignments are to be followed ([`follow_set`]).
pub fn set_answered(
    st: &mut SessionState,
    info: Option<&SetInfo>,
    role_epoch: Option<u64>,
    qct: Option<QueryCacheType>,
    error: bool,
) -> bool {
    if let Some(epoch_before) = role_epoch {
        let before = if error {
            st.priv_baseline
        } else {
            epoch_before
        };
        write::role_set(st, before);
    }
    qct_answered(st, qct, error);
    if error {
        return false;
    }
    let assignments = info.map(|i| i.assignments.as_slice());
    if context::set_may_change_idle_timers(assignments) {
        st.ctx_stale = true;
    }
    if context::set_may_change_begin(assignments) {
        st.txn.begin_needs_server();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    /// What a SET leaves the session with, from its text: what is keyed, what is read
    /// back, what the recorders become.
    #[test]
    fn each_set_is_followed_or_read_back() {
        struct Row {
            sql: &'static str,
            read_back: &'static [&'static str],
            vars: &'static [&'static str],
            stale: bool,
            traced: bool,
            profiling: bool,
        }
        let row = |sql, read_back, vars| Row {
            sql,
            read_back,
            vars,
            stale: false,
            traced: false,
            profiling: false,
        };
        let rows = [
            row("SET sql_mode = 'ANSI'", &[], &["sql_mode"]),
            row("SET SESSION sql_mode = DEFAULT", &["sql_mode"], &[]),
            row("SET @x = 1", &[], &[]),
            row("SET GLOBAL sql_mode = 'ANSI'", &[], &[]),
            row("SET time_zone = @@global.time_zone", &["time_zone"], &[]),
            row(
                "SET NAMES utf8mb4",
                &[
                    "character_set_client",
                    "character_set_connection",
                    "character_set_results",
                    "collation_connection",
                ],
                &[],
            ),
            row(
                "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                &[],
                &["transaction"],
            ),
            Row {
                profiling: true,
                ..row("SET profiling = 1", &[], &["profiling"])
            },
            // A trace on: the session keeps quiet, its settings read when it is not.
            Row {
                stale: true,
                traced: true,
                ..row("SET optimizer_trace = 'enabled=on'", &[], &[])
            },
        ];
        let w = World::new(false);
        for r in rows {
            let mut st = w.session(Some("db"));
            let info = crate::analysis::analyze_set(r.sql);
            let rb = follow_set(&mut st, info.as_ref()).expect(r.sql);
            assert_eq!(rb.names, r.read_back, "{}", r.sql);
            assert!(!rb.lost, "{}", r.sql);
            let vars: Vec<&str> = st.vars.keys().map(String::as_str).collect();
            assert_eq!(vars, r.vars, "{}", r.sql);
            let got = (st.ctx_stale, st.optimizer_traced, st.profiling);
            assert_eq!(got, (r.stale, r.traced, r.profiling), "{}", r.sql);
            assert!(!st.lost_track, "{}", r.sql);
        }
    }

    /// Isolation levels a SET names reach the transaction state (dirty reads are keyed).
    #[test]
    fn isolation_levels_reach_the_transaction() {
        let w = World::new(false);
        let rows: &[(&str, bool)] = &[
            ("SET tx_isolation = 'READ-UNCOMMITTED'", true),
            (
                "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
                true,
            ),
            ("SET sql_mode = 'ANSI'", false),
        ];
        for (sql, dirty) in rows {
            let mut st = w.session(Some("db"));
            follow_set(&mut st, crate::analysis::analyze_set(sql).as_ref());
            st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
            assert_eq!(st.txn.dirty_reads(), *dirty, "{sql}");
        }
    }

    /// A SET qcache cannot read loses track; so does a read-back not sent or not answered.
    #[test]
    fn what_cannot_be_followed_loses_track() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        assert_eq!(follow_set(&mut st, None), None);
        assert!(st.lost_track);
        let names = vec!["time_zone".to_string()];
        let rows: &[(Option<Values>, bool, Option<&str>)] = &[
            (Some(vec![Some("+01:00".into())]), false, Some("+01:00")),
            (Some(vec![None]), false, Some("\u{0}NULL")),
            (None, true, None),
        ];
        for (values, lost, value) in rows {
            let mut st = w.session(Some("db"));
            let rb = ReadBack {
                names: names.clone(),
                lost: false,
            };
            read_back_answered(&mut st, rb, values.clone());
            assert_eq!(st.lost_track, *lost, "{values:?}");
            assert_eq!(st.vars.get("time_zone").map(String::as_str), *value);
        }
        // Nothing to read back: nothing lost.
        let mut st = w.session(Some("db"));
        read_back_answered(&mut st, ReadBack::default(), None);
        assert!(!st.lost_track);
    }

    /// The read-back is not sent where it would clear diagnostics the client may read, nor
    /// in an XA transaction.
    #[test]
    fn the_read_back_keeps_the_diagnostics() {
        let w = World::new(false);
        let rows: &[(u32, bool, bool)] = &[(0, false, true), (1, false, false), (0, true, false)];
        for (warnings, persist, may) in rows {
            let mut st = w.session(Some("db"));
            st.diag_may_persist = *persist;
            assert_eq!(may_read_back(&st, *warnings), *may, "{warnings} {persist}");
        }
    }

    /// A read-back not sent for the diagnostics' sake is put off to the next cacheable read
    /// of tables when the connect read reports every name, and given up otherwise or in XA.
    #[test]
    fn a_read_back_not_sent_is_put_off_where_it_can_be() {
        use crate::policy::snapshot::Xa;
        let w = World::new(true);
        // (rule, names, in XA, stale after, names left, lost after)
        type Row = (
            &'static str,
            &'static [&'static str],
            bool,
            bool,
            bool,
            bool,
        );
        let rows: &[Row] = &[
            (
                "sql_mode = DEFAULT",
                &["sql_mode"],
                false,
                true,
                false,
                false,
            ),
            (
                "SET NAMES",
                &["character_set_client", "collation_connection"],
                false,
                true,
                false,
                false,
            ),
            (
                "a name the connect does not read",
                &["sql_mode", "no_such_var"],
                false,
                false,
                true,
                true,
            ),
            ("in XA", &["sql_mode"], true, false, true, true),
        ];
        for (rule, names, xa, stale, left, lost) in rows {
            let mut st = w.session(Some("db"));
            st.mariadb = true;
            st.diag_may_persist = true;
            if *xa {
                let s = st.txn.boundary_sent(Xa::Start);
                st.txn.boundary_answered(s, false);
            }
            let rb = ReadBack {
                names: names.iter().map(|n| n.to_string()).collect(),
                lost: false,
            };
            let rb = read_back_put_off(&mut st, rb);
            assert_eq!(st.ctx_stale, *stale, "{rule}");
            assert_eq!(!rb.names.is_empty(), *left, "{rule}");
            read_back_answered(&mut st, rb, None);
            assert_eq!(st.lost_track, *lost, "{rule}");
        }
    }

    /// What a SET plans before it goes up, one row per kind.
    #[test]
    fn a_set_before_it_goes_up() {
        use crate::config::QueryCacheType;
        // (rule, text, what is sent, query_cache_type after, everything pending)
        type Row = (&'static str, &'static str, SetSent, QueryCacheType, bool);
        let rows: [Row; 5] = [
            (
                "a session variable: sent",
                "SET sql_mode = 'ANSI'",
                SetSent::Up {
                    role: false,
                    qct: None,
                },
                QueryCacheType::On,
                false,
            ),
            (
                "only qcache's own variable: answered here",
                "SET query_cache_type = DEMAND",
                SetSent::Local,
                QueryCacheType::Demand,
                false,
            ),
            (
                "qcache's own and another: followed, and sent",
                "SET query_cache_type = OFF, sql_mode = ''",
                SetSent::Up {
                    role: false,
                    qct: Some(QueryCacheType::Off),
                },
                QueryCacheType::On,
                false,
            ),
            (
                "a role: sent, asked about after",
                "SET ROLE r",
                SetSent::Up {
                    role: true,
                    qct: None,
                },
                QueryCacheType::On,
                false,
            ),
            (
                "a function in a value may write anything",
                "SET @x = f()",
                SetSent::Up {
                    role: false,
                    qct: None,
                },
                QueryCacheType::On,
                true,
            ),
        ];
        for (rule, sql, sent, qct, all) in rows {
            let w = World::new(true);
            let mut st = w.session(Some("db"));
            st.qct = QueryCacheType::On;
            let info = crate::analysis::analyze_set(sql);
            let got = w
                .planner()
                .before_set(&mut st, info.as_ref(), sql, sql.as_bytes());
            assert_eq!(got, sent, "{rule}");
            assert_eq!(st.qct, qct, "{rule}");
            assert_eq!(st.pending.all, all, "{rule}");
        }
    }

    /// qcache's own query_cache_type after a SET the server runs itself (prepared through
    /// either protocol, EXECUTE IMMEDIATE): followed once the server accepted it.
    #[test]
    fn a_set_the_server_runs_is_followed() {
        use QueryCacheType::{Demand, Off, On};
        let w = World::new(true);
        let p = w.planner();
        let mut st = w.session(Some("db"));
        st.qct = On;
        // (statement, error answered, query_cache_type after)
        let rows = [
            (
                "PREPARE s FROM 'SET SESSION query_cache_type = OFF'",
                false,
                On,
            ),
            ("EXECUTE s", true, On),
            ("EXECUTE s", false, Off),
            (
                "EXECUTE IMMEDIATE 'SET query_cache_type = DEMAND'",
                false,
                Demand,
            ),
            (
                "EXECUTE IMMEDIATE 'SET GLOBAL query_cache_type = OFF'",
                false,
                Demand,
            ),
            ("EXECUTE IMMEDIATE @q", false, Demand),
            // A PREPARE replaces the statement of the name, even when it fails.
            ("PREPARE s FROM 'SELECT 1'", true, Demand),
            ("EXECUTE s", false, Demand),
            (
                "PREPARE t FROM 'SET query_cache_type = DEFAULT'",
                false,
                Demand,
            ),
            ("EXECUTE T USING @x", false, On),
            ("PREPARE u FROM 'SET query_cache_type = OFF'", false, On),
            ("DEALLOCATE PREPARE u", false, On),
            ("EXECUTE u", false, On),
            // A procedure may prepare the name again, unseen.
            ("PREPARE v FROM 'SET query_cache_type = OFF'", false, On),
            ("CALL p()", false, On),
            ("EXECUTE v", false, On),
        ];
        for (sql, error, want) in rows {
            let qct = p.before_sql_level(&mut st, sql.as_bytes());
            qct_answered(&mut st, qct, error);
            assert_eq!(st.qct, want, "{sql}");
        }
        assert_eq!(
            p.qct_run_by_server(
                &mut st,
                "SET @@session.query_cache_type = OFF, sql_mode = ''"
            ),
            Some(Off)
        );
        assert_eq!(p.qct_run_by_server(&mut st, "SET sql_mode = ''"), None);
        assert!(!st.qct_unsure());
        // So may a multi-statement or a compound statement.
        for unseen in [
            "PREPARE v FROM 'SELECT 1'; SELECT 1",
            "BEGIN NOT ATOMIC PREPARE v FROM 'SELECT 1'; END",
        ] {
            p.before_sql_level(&mut st, b"PREPARE v FROM 'SET query_cache_type = OFF'");
            match unseen.starts_with("BEGIN") {
                true => p.plan_compound(&mut st, unseen.as_bytes()),
                false => drop(p.plan_multi(&mut st, unseen.as_bytes())),
            }
            assert_eq!(p.before_sql_level(&mut st, b"EXECUTE v"), None, "{unseen}");
        }
    }

    /// A SET whose value qcache cannot read (a parameter bound at EXECUTE, a variable, a
    /// subquery) leaves the session's query_cache_type unknown, in every path the server
    /// runs it: text, prepared through either protocol, EXECUTE IMMEDIATE … USING.
    /// (rule, statement, how it reaches the server, unknown after)
    #[test]
    fn a_set_qcache_cannot_read_leaves_it_unknown() {
        #[derive(Clone, Copy)]
        enum Via {
            Text,
            Prepared,
            SqlLevel,
        }
        let rows = [
            (
                "a parameter",
                "SET SESSION query_cache_type = ?",
                Via::Prepared,
                true,
            ),
            (
                "a variable",
                "SET SESSION query_cache_type = @q",
                Via::Text,
                true,
            ),
            (
                "a subquery",
                "SET query_cache_type = (SELECT 0)",
                Via::Prepared,
                true,
            ),
            (
                "EXECUTE IMMEDIATE … USING",
                "EXECUTE IMMEDIATE 'SET SESSION query_cache_type = ?' USING 0",
                Via::SqlLevel,
                true,
            ),
            (
                "a literal: followed",
                "SET query_cache_type = OFF",
                Via::Prepared,
                false,
            ),
            ("another variable", "SET sql_mode = @m", Via::Text, false),
        ];
        for (rule, sql, via, unknown) in rows {
            let w = World::new(true);
            let p = w.planner();
            let mut st = w.session(Some("db"));
            match via {
                Via::Text => {
                    let info = crate::analysis::analyze_set(sql);
                    p.before_set(&mut st, info.as_ref(), sql, sql.as_bytes());
                }
                Via::Prepared => {
                    p.qct_run_by_server(&mut st, sql);
                }
                Via::SqlLevel => {
                    // As `text_route` takes a SQL-level statement.
                    p.plan_call(&mut st, sql.as_bytes());
                    p.before_sql_level(&mut st, sql.as_bytes());
                }
            }
            assert_eq!(st.qct_unsure(), unknown, "{rule}");
        }
    }

    /// What a SET's answer leaves before its assignments are followed.
    #[test]
    fn a_set_answered() {
        let w = World::new(true);
        let set = |sql: &str| crate::analysis::analyze_set(sql);
        // A failed SET: nothing followed; a failed SET ROLE still asks again, from the
        // baseline.
        let mut st = w.session(Some("db"));
        st.priv_baseline = 3;
        assert!(!set_answered(
            &mut st,
            set("SET ROLE r").as_ref(),
            Some(7),
            None,
            true
        ));
        assert_eq!((st.identity.is_none(), st.priv_baseline), (true, 3));
        // A successful SET ROLE: from the epoch before it was sent.
        let mut st = w.session(Some("db"));
        assert!(set_answered(
            &mut st,
            set("SET ROLE r").as_ref(),
            Some(7),
            None,
            false
        ));
        assert_eq!(st.priv_baseline, 7);
        // Idle timers are read again before the next cacheable read.
        let mut st = w.session(Some("db"));
        assert!(set_answered(
            &mut st,
            set("SET wait_timeout = 5").as_ref(),
            None,
            None,
            false
        ));
        assert!(st.ctx_stale);
        let mut st = w.session(Some("db"));
        assert!(set_answered(
            &mut st,
            set("SET sql_mode = ''").as_ref(),
            None,
            None,
            false
        ));
        assert!(!st.ctx_stale);
        // qcache's own query_cache_type set beside another variable: followed only when
        // the server accepted the SET.
        use crate::config::QueryCacheType;
        let both = set("SET query_cache_type = OFF, sql_mode = ''");
        let mut st = w.session(Some("db"));
        st.qct = QueryCacheType::On;
        let off = Some(QueryCacheType::Off);
        assert!(!set_answered(&mut st, both.as_ref(), None, off, true));
        assert_eq!(st.qct, QueryCacheType::On, "refused: unchanged");
        assert!(set_answered(&mut st, both.as_ref(), None, off, false));
        assert_eq!(st.qct, QueryCacheType::Off, "accepted: followed");
    }

    /// Sessions whose `system_versioning_asof` names two instants never share a key, however
    /// qcache had the value (`policy::context::ZONED`): shown by the server under a zone
    /// with daylight saving time, whose repeated hour writes two instants as one text (the
    /// connect's read, a SET's read-back); or set under a zone the key no longer holds (a
    /// read of the connect's settings that did not report the value but the zone, which a
    /// trigger may have moved). One row per way, with whether the two sessions may share.
    #[test]
    fn an_instant_the_key_cannot_tell_is_its_own() {
        use crate::engine::context::server_context;
        let w = World::new(true);
        let asof = "system_versioning_asof";
        let shown = "2020-10-25 02:30:00.000000";
        /// How a session came by its value.
        enum Way {
            /// The connect's read: the zone and the value as shown.
            Connect(&'static str, &'static str),
            /// `SET time_zone = <zone>, system_versioning_asof = @v`, read back as shown.
            ReadBack(&'static str, &'static str),
            /// Connect under the first zone (the whole list read), `SET asof = '<text>'`,
            /// then a read of the common list only under the second zone (a trigger moved
            /// it); the other session connects under the second, common list, same SET.
            SetThenZoneMoved(&'static str, &'static str),
        }
        let rows: &[(&str, Way, bool)] = &[
            (
                "connect, a zone with DST",
                Way::Connect("Europe/Berlin", shown),
                false,
            ),
            ("connect, SYSTEM", Way::Connect("SYSTEM", shown), false),
            (
                "connect, a fixed offset",
                Way::Connect("+02:00", shown),
                true,
            ),
            (
                "connect, no instant",
                Way::Connect("Europe/Berlin", "DEFAULT"),
                true,
            ),
            (
                "read back, a zone with DST",
                Way::ReadBack("'Europe/Berlin'", shown),
                false,
            ),
            (
                "read back, a fixed offset",
                Way::ReadBack("'+02:00'", shown),
                true,
            ),
            (
                "read back, no instant",
                Way::ReadBack("'Europe/Berlin'", "DEFAULT"),
                true,
            ),
            (
                "set, then the zone moved unseen",
                Way::SetThenZoneMoved("+00:00", "+05:00"),
                false,
            ),
            // The zone may have moved and back: qcache cannot tell.
            (
                "set, the same zone",
                Way::SetThenZoneMoved("+05:00", "+05:00"),
                false,
            ),
        ];
        let set = "SET system_versioning_asof = '2020-01-01 03:00:00'";
        for (rule, way, share) in rows {
            let session = |first: bool| {
                let mut st = w.session(Some("db"));
                st.mariadb = true;
                match *way {
                    Way::Connect(zone, v) => {
                        server_context(&mut st, &[("time_zone", Some(zone)), (asof, Some(v))]);
                    }
                    Way::ReadBack(zone, v) => {
                        server_context(
                            &mut st,
                            &[("time_zone", Some("+00:00")), (asof, Some("DEFAULT"))],
                        );
                        st.vars.insert("time_zone".into(), zone.into());
                        let rb = ReadBack {
                            names: vec![asof.to_string()],
                            lost: false,
                        };
                        read_back_answered(&mut st, rb, Some(vec![Some(v.into())]));
                    }
                    Way::SetThenZoneMoved(before, after) => {
                        let info = crate::analysis::analyze_set(set);
                        if first {
                            server_context(
                                &mut st,
                                &[("time_zone", Some(before)), (asof, Some("DEFAULT"))],
                            );
                            follow_set(&mut st, info.as_ref());
                            server_context(&mut st, &[("time_zone", Some(after))]);
                        } else {
                            server_context(&mut st, &[("time_zone", Some(after))]);
                            follow_set(&mut st, info.as_ref());
                        }
                    }
                }
                st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
                assert!(!st.lost_track, "{rule}");
                st.fingerprint
            };
            assert_eq!(session(true) == session(false), *share, "{rule}");
        }
    }
}
