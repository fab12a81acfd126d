//! What the server's answers about the session mean for its state: its settings read
//! back (`policy::context::ReadBack`), the privileges its identity has, and what qcache's
//! own SELECTs owe the session's diagnostics. The session asks; this decides.

use super::state::{Identity, SessionState};
use crate::cache::privileges::Privileges;
use crate::config::Config;
use crate::faults::Faults;
use crate::policy::{context, diagnostics, privileges};
use tracing::debug;

/// The most `FOUND_ROWS()` a read-back puts back: the server can only be made to count rows
/// by producing them, which takes about 0.2 s per 100,000 (`policy::diagnostics::resetter`);
/// above this the session reads 1 after a read-back (docs/reliability.md).
const MAX_RESTORED_FOUND_ROWS: u64 = 100_000;

/// The optional key variables each server version (its id and flavour) has, learnt by the
/// first connect that asked (`Shared::optional_vars`).
pub type VersionMemo = std::sync::Mutex<Vec<VersionVars>>;

use crate::shared::OptionalVars as VersionVars;

/// Reading the session's settings at connect, in tiers: the flavour's key variables with
/// the optional names this server version has (asked once per version, by a probe in the
/// first connect's batch); when the server refuses, the flavour's list alone, then the
/// common one; one that refuses all leaves the session uncached (fail closed).
pub struct ContextRead {
    version: (u32, bool),
    optional: &'static [&'static str],
    known: Option<Vec<&'static str>>,
    tiers: [Vec<&'static str>; 3],
    probe: Option<String>,
    mariadb: bool,
}

/// One tier's question: the names, the probe sent in the same batch, and whether the
/// account and role ride along (MariaDB's CURRENT_ROLE(), so that the first lookup need not
/// ask who the session is).
pub struct Tier<'a> {
    pub names: &'a [&'static str],
    pub probe: Option<&'a str>,
    pub identity: bool,
}

fn memo_of(memo: &VersionMemo) -> std::sync::MutexGuard<'_, Vec<VersionVars>> {
    memo.lock().unwrap_or_else(|e| e.into_inner())
}

impl ContextRead {
    pub fn new(st: &SessionState, memo: &VersionMemo) -> ContextRead {
        let mariadb = st.mariadb;
        let version = (st.server.id, st.server.mariadb);
        let optional = context::optional_key_variables(mariadb);
        let known = if optional.is_empty() {
            Some(Vec::new())
        } else {
            memo_of(memo)
                .iter()
                .find(|(v, _)| *v == version)
                .map(|(_, names)| names.clone())
        };
        let mandatory = context::key_variables(mariadb);
        let mut first: Vec<&'static str> = mandatory.to_vec();
        first.extend(known.iter().flatten());
        let probe = match &known {
            Some(_) => None,
            None => context::probe_sql(optional),
        };
        ContextRead {
            version,
            optional,
            known,
            tiers: [
                first,
                mandatory.to_vec(),
                context::COMMON_KEY_VARIABLES.to_vec(),
            ],
            probe,
            mariadb,
        }
    }

    /// The `i`-th tier's question, None after the last.
    pub fn tier(&self, i: usize) -> Option<Tier<'_>> {
        let names = self.tiers.get(i)?;
        Some(Tier {
            names,
            probe: if i == 0 { self.probe.as_deref() } else { None },
            identity: i == 0 && self.mariadb,
        })
    }

    /// The server refused the `i`-th tier. When it lost a name it had (another server behind
    /// the same address and version?), the next connect asks again.
    pub fn refused(&self, i: usize, memo: &VersionMemo) {
        if i == 0 && self.known.as_ref().is_some_and(|k| !k.is_empty()) {
            memo_of(memo).retain(|(v, _)| *v != self.version);
        }
    }

    /// The optional names the probe found present (its error, no such table: none), which
    /// this server version is remembered to have.
    pub fn probed(
        &self,
        rows: Option<&[Vec<Option<String>>]>,
        memo: &VersionMemo,
    ) -> Vec<&'static str> {
        let found = context::probed(self.optional, rows.unwrap_or(&[]));
        let present: Vec<&'static str> = found.iter().map(|(n, _)| *n).collect();
        debug!(?present, "the server's optional key variables");
        let mut memo = memo_of(memo);
        if !memo.iter().any(|(v, _)| *v == self.version) {
            memo.push((self.version, present.clone()));
        }
        present
    }
}

/// The session's settings as the server reported them (`pairs`: names and values, in the
/// order a later connect reads them), into its state. The caller recomputes the
/// fingerprint.
pub fn server_context(st: &mut SessionState, pairs: &[(&str, Option<&str>)]) {
    // An instant shown under a zone with daylight saving time is one the key cannot tell
    // (`policy::context::instant_shown`): hashed as one of its own.
    let zone = pairs
        .iter()
        .find(|(n, _)| context::key_name(n) == "time_zone")
        .and_then(|(_, v)| *v);
    // Only a value so marked is copied.
    let shown: Vec<(&str, Option<std::borrow::Cow<str>>)> = pairs
        .iter()
        .map(|(n, v)| {
            let v = v.map(|v| match context::instant_shown(n, v, zone) {
                true => std::borrow::Cow::Borrowed(v),
                false => std::borrow::Cow::Owned(instant_unknown(v)),
            });
            (*n, v)
        })
        .collect();
    let pairs: Vec<(&str, Option<&str>)> = shown.iter().map(|(n, v)| (*n, v.as_deref())).collect();
    let pairs = pairs.as_slice();
    let rb = context::ReadBack::of(pairs);
    st.server_ctx = rb.server_ctx;
    st.server_sql_mode = pairs
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("sql_mode"))
        .and_then(|(_, v)| v.map(str::to_owned));
    // What the session SET of these since the last read is in the values now: keyed
    // twice, a stale SET text beside the value a trigger gave it, two sessions with
    // different values could share a key.
    st.vars
        .retain(|k, _| !pairs.iter().any(|(n, _)| context::key_name(n) == k));
    // What it SET of a `ZONED` name that this read did not report (only the common list:
    // the server refused the flavour's) names an instant under the zone of that SET, or of
    // the connect's read this one replaces: a zone the key no longer holds, which a trigger
    // may have moved since.
    for (_, v) in st
        .vars
        .iter_mut()
        .filter(|(k, _)| context::ZONED.contains(&k.as_str()))
    {
        *v = instant_unknown(v);
    }
    st.auto_is_null_inherited = rb.auto_is_null;
    st.optimizer_traced = rb.optimizer_traced;
    st.profiling = rb.profiling;
    st.keep_alive_after = rb.keep_alive_after;
    st.select_limit_inherited = rb.select_limited;
    st.results_not_ascii_inherited = rb.results_not_ascii;
    st.client_not_utf8_inherited = rb.client_not_utf8;
    st.reads_limit_inherited = rb.reads_limited;
    if rb.begin_needs_server {
        // COMMIT chains or releases, or a timer ends idle transactions: the server's
        // BEGIN and COMMIT, not qcache's answer (`session/begin.rs`).
        st.txn.begin_needs_server();
    }
    st.txn.isolation_set(rb.read_uncommitted, rb.serializable);
}

/// The key's value for a `ZONED` value whose instant it cannot tell
/// (`policy::context::instant_unknown`), each call a new one, unlike any other session's of
/// this or another qcache instance (they share L2).
pub fn instant_unknown(value: &str) -> String {
    context::instant_unknown(value, crate::config::random_id())
}

/// The identity is known: the privilege generation and epoch the key is computed under,
/// from `privileges` (the versions'), and whether the session's privileges may now differ
/// from a new session's. Recomputes the fingerprint under `cfg` and `faults`.
pub fn privileges_known(
    st: &mut SessionState,
    cfg: &Config,
    faults: &Faults,
    privileges: &Privileges,
) {
    let user = st
        .identity
        .as_ref()
        .map(|id| privileges::account_user(&id.account).to_string());
    st.refresh_fingerprint_under(cfg, faults);
    let shared = st.shared_users;
    let view = privileges.view(if shared { None } else { user.as_deref() });
    if st.priv_epoch != u64::MAX && st.priv_epoch != view.epoch {
        // A privilege change: RELOAD may have come or gone too.
        st.admin_allowed = None;
    }
    st.priv_epoch = view.epoch;
    st.priv_generation = view.generation;
    if privileges::session_diverged(st.priv_baseline, view.sticky) && st.priv_private == 0 {
        // The server keeps this session's global and database privileges as they were
        // when it connected: what it is answered may differ from what a session
        // connecting now is, so its entries are its own from here on.
        st.make_private();
    }
    st.refresh_fingerprint_under(cfg, faults);
}

/// What a private SELECT of qcache's leaves owed, given the `FOUND_ROWS()` and
/// `ROW_COUNT()` it read before it set its own (the read-back, the identity ask): it left
/// 1 and -1, so nothing when the session had just those (a fresh MariaDB session has),
/// else their restore (`policy::diagnostics::after_read_back`). A count too large (or
/// unreadable) to put back is guessed 0.
pub fn owe_after_private_select(
    st: &mut SessionState,
    found_rows: Option<&str>,
    row_count: Option<&str>,
) {
    let guess = 0;
    let mut found_rows = found_rows
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(guess);
    let row_count = row_count.and_then(|v| v.parse::<i64>().ok());
    if found_rows > MAX_RESTORED_FOUND_ROWS {
        debug!(
            found_rows,
            "FOUND_ROWS() too large to put back after a private SELECT"
        );
        found_rows = guess;
    }
    st.after_hit = diagnostics::after_read_back(found_rows, row_count);
}

/// Takes the `FOUND_ROWS()` and `ROW_COUNT()` the identity query read off its row and
/// owes them back (`policy::diagnostics::after_read_back`), unless a restore is owed
/// already (a hit's, which the server's values did not hold anyway). The rest of the row.
pub fn owed_after_ask(st: &mut SessionState, mut row: Vec<Option<String>>) -> Vec<Option<String>> {
    if row.len() < 2 {
        return row;
    }
    let rest = row.split_off(2);
    if st.after_hit.is_none() {
        owe_after_private_select(st, row[0].as_deref(), row[1].as_deref());
    }
    rest
}

/// After each read-back: `ROW_COUNT()` back to 0 and no warnings, as a fresh session and a
/// SET both leave them (the read-back's SELECT, and the FOUND_ROWS() restorer, change them).
pub const RESTORE: &str = "DO 0";

/// Who the session is, asked once per session (again after SET ROLE, COM_CHANGE_USER,
/// COM_RESET_CONNECTION), in turn until one answers a row: MySQL before 8.0 has no
/// CURRENT_ROLE(), and then roles do not exist. `FOUND_ROWS()` and `ROW_COUNT()` first,
/// read before the SELECT sets its own: what it changed is owed back should the read it
/// comes before be refused (`Session::after_refused_read`). They touch no table, so they
/// open no snapshot.
pub const IDENTITY_QUESTIONS: [&str; 2] = [
    "SELECT FOUND_ROWS(), ROW_COUNT(), CURRENT_USER(), CURRENT_ROLE()",
    "SELECT FOUND_ROWS(), ROW_COUNT(), CURRENT_USER()",
];

/// The first row one of [`IDENTITY_QUESTIONS`] answered: what it owes back
/// ([`owed_after_ask`]), and the identity (None: the server named no account).
pub fn identity_answered(st: &mut SessionState, row: Vec<Option<String>>) -> Option<Identity> {
    let mut it = owed_after_ask(st, row).into_iter();
    let account = it.next().flatten()?;
    Some(Identity {
        account,
        role: it.next().flatten(),
    })
}

/// The read-back of `names` (with `identity`, the account and role too) as one SELECT,
/// `FOUND_ROWS()` and `ROW_COUNT()` first: evaluated before this SELECT sets its own. None
/// when the names cannot be asked for (`policy::context::read_back_sql`).
pub fn read_back_question(names: &[&str], identity: bool) -> Option<String> {
    let sql = context::read_back_sql(names)?;
    let mut sql = sql.replacen("SELECT ", "SELECT FOUND_ROWS(), ROW_COUNT(), ", 1);
    if identity {
        sql.push_str(", CURRENT_USER(), CURRENT_ROLE()");
    }
    Some(sql)
}

/// The answer to [`read_back_question`] (`rows`: its rows, None for an error): the values
/// of `names` in order, None when the server refused it or answered another width. The
/// server's `Last_query_cost` is the SELECT's own now; nothing it raised persists (the
/// read-back is sent only when nothing could, `settings::may_read_back`, and the restore
/// clears what it raised itself). What it changed of `FOUND_ROWS()` and `ROW_COUNT()` is
/// owed back ([`owe_after_private_select`]; all of it, guessed 0 rows, when it was
/// refused): put back (`Session::reset_diagnostics`) before the next statement that reaches
/// the server, unless that is a cacheable read, which sets them all itself. Most sessions'
/// next statement is one, so the restore is usually never sent (docs/reliability.md).
pub fn read_back_answered(
    st: &mut SessionState,
    names: &[&str],
    identity: bool,
    rows: Option<Vec<Vec<Option<String>>>>,
) -> Option<Vec<Option<String>>> {
    st.cost.disturbed();
    st.diag_may_persist = false;
    let extra = if identity { 4 } else { 2 };
    let row = rows
        .and_then(|rows| rows.into_iter().next())
        .filter(|r| r.len() == names.len() + extra);
    let Some(mut row) = row else {
        debug!(?names, "the server refused the read-back");
        let guess = 0;
        st.after_hit = Some(diagnostics::AFTER_READ_BACK | guess);
        return None;
    };
    let (found_rows, row_count) = (row.remove(0), row.remove(0));
    owe_after_private_select(st, found_rows.as_deref(), row_count.as_deref());
    if identity {
        let role = row.pop().flatten();
        if let Some(account) = row.pop().flatten() {
            st.identity = Some(Identity { account, role });
        }
    }
    debug!(?names, values = ?row, "read the session's settings back");
    Some(row)
}

/// [`server_context`] of a connect's read: `names` and their `values` in the order a later
/// connect reads them in one SELECT, then the optional names `found` present (read apart),
/// so that sessions of the two kinds share entries.
pub fn server_context_read(
    st: &mut SessionState,
    names: &[&str],
    values: &[Option<String>],
    found: &[(&str, Option<String>)],
) {
    let pairs: Vec<(&str, Option<&str>)> = names
        .iter()
        .copied()
        .zip(values.iter().map(|v| v.as_deref()))
        .chain(found.iter().map(|(n, v)| (*n, v.as_deref())))
        .collect();
    server_context(st, &pairs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::World;

    /// The tiers of a connect's read, and what the version memo learns and forgets: the
    /// first connect of a version probes for the optional names, later ones ask for those
    /// it has, and a server refusing them is probed again at the next connect.
    #[test]
    fn a_connect_reads_its_settings_in_tiers_and_the_memo_learns() {
        let w = World::new(true);
        let mut st = w.session(Some("db"));
        st.mariadb = true;
        let memo = VersionMemo::default();
        let optional = context::optional_key_variables(true);
        assert!(!optional.is_empty(), "MariaDB has optional key variables");
        let first = ContextRead::new(&st, &memo);
        let t0 = first.tier(0).unwrap();
        assert!(t0.probe.is_some(), "the first connect of a version probes");
        assert!(t0.identity, "MariaDB's identity rides along");
        assert_eq!(t0.names, context::key_variables(true));
        for i in [1, 2] {
            let t = first.tier(i).unwrap();
            assert!(t.probe.is_none() && !t.identity, "tier {i} asks only");
        }
        assert_eq!(first.tier(1).unwrap().names, context::key_variables(true));
        assert_eq!(first.tier(2).unwrap().names, context::COMMON_KEY_VARIABLES);
        assert!(first.tier(3).is_none());
        // The probe finds the first optional name: remembered for this version.
        let rows = vec![vec![Some(optional[0].to_uppercase()), Some("1".into())]];
        assert_eq!(first.probed(Some(&rows), &memo), vec![optional[0]]);
        let later = ContextRead::new(&st, &memo);
        let t0 = later.tier(0).unwrap();
        assert!(t0.probe.is_none(), "later connects do not probe");
        assert_eq!(
            t0.names.last(),
            Some(&optional[0]),
            "and ask for what it has"
        );
        // The server refuses the list with that name: the next connect probes again.
        later.refused(1, &memo);
        assert!(ContextRead::new(&st, &memo)
            .tier(0)
            .unwrap()
            .probe
            .is_none());
        later.refused(0, &memo);
        assert!(ContextRead::new(&st, &memo)
            .tier(0)
            .unwrap()
            .probe
            .is_some());
        // A probe answered with an error: none of them, remembered (no probe again).
        let memo = VersionMemo::default();
        let read = ContextRead::new(&st, &memo);
        assert!(read.probed(None, &memo).is_empty());
        let again = ContextRead::new(&st, &memo);
        assert!(again.tier(0).unwrap().probe.is_none());
        again.refused(0, &memo);
        assert!(
            ContextRead::new(&st, &memo)
                .tier(0)
                .unwrap()
                .probe
                .is_none(),
            "a version known to have none is not forgotten by a refusal"
        );
        // MySQL: no optional names, never a probe, no identity.
        st.mariadb = false;
        let mysql = ContextRead::new(&st, &VersionMemo::default());
        let t0 = mysql.tier(0).unwrap();
        assert!(t0.probe.is_none() && !t0.identity);
    }

    /// What qcache's own SELECT owes back, from the FOUND_ROWS() and ROW_COUNT() it read.
    #[test]
    fn a_private_select_owes_what_it_changed() {
        let w = World::new(false);
        type Row = (Option<&'static str>, Option<&'static str>, u64, Option<i64>);
        let rows: &[Row] = &[
            // (found_rows read, row_count read, as restored: found_rows, row_count)
            (Some("1"), Some("-1"), 1, Some(-1)),
            (Some("5"), Some("0"), 5, Some(0)),
            (Some("100000"), Some("3"), 100_000, Some(3)),
            (Some("100001"), Some("3"), 0, Some(3)),
            (None, None, 0, None),
            (Some("x"), Some("y"), 0, None),
        ];
        for (found, count, f, c) in rows {
            let mut st = w.session(Some("db"));
            owe_after_private_select(&mut st, *found, *count);
            let want = diagnostics::after_read_back(*f, *c);
            assert_eq!(st.after_hit, want, "{found:?} {count:?}");
        }
        // A fresh session's values: nothing owed.
        assert_eq!(diagnostics::after_read_back(1, Some(-1)), None);
    }

    /// The identity ask's row: its first two values owed back unless a restore is owed
    /// already; the rest returned.
    #[test]
    fn the_identity_row_owes_its_counts() {
        let w = World::new(false);
        let s = |v: &str| Some(v.to_string());
        let row = vec![s("7"), s("0"), s("u@%"), None];
        let mut st = w.session(Some("db"));
        assert_eq!(owed_after_ask(&mut st, row.clone()), vec![s("u@%"), None]);
        assert_eq!(st.after_hit, diagnostics::after_read_back(7, Some(0)));
        let mut st = w.session(Some("db"));
        st.after_hit = Some(42);
        assert_eq!(owed_after_ask(&mut st, row), vec![s("u@%"), None]);
        assert_eq!(st.after_hit, Some(42), "a restore owed already stands");
        let mut st = w.session(Some("db"));
        assert_eq!(owed_after_ask(&mut st, vec![s("1")]), vec![s("1")]);
        assert_eq!(st.after_hit, None);
    }

    /// Once the identity is known, the key is computed under its privilege epoch; a change
    /// of epoch forgets whether the user may administer.
    #[test]
    fn known_privileges_set_the_epoch() {
        let w = World::new(false);
        let epoch = w.versions.privileges.view(None).epoch;
        let rows: &[(u64, Option<bool>, Option<bool>)] = &[
            // (epoch before, admin_allowed before, after)
            (u64::MAX, Some(true), Some(true)),
            (epoch, Some(true), Some(true)),
            (epoch.wrapping_add(1), Some(true), None),
        ];
        for (before, admin, after) in rows {
            let mut st = w.session(Some("db"));
            st.identity = Some(crate::engine::state::Identity {
                account: "u@%".into(),
                role: None,
            });
            st.priv_epoch = *before;
            st.admin_allowed = *admin;
            let anonymous = st.fingerprint;
            privileges_known(&mut st, &w.cfg, &w.versions.faults, &w.versions.privileges);
            assert_eq!(st.priv_epoch, epoch, "{before}");
            assert_eq!(st.admin_allowed, *after, "{before}");
            assert_ne!(st.fingerprint, anonymous, "the identity is in the key");
            assert_eq!(st.priv_private, 0, "{before}");
        }
    }

    /// The settings read back replace what the session SET of them, and reach the
    /// transaction state.
    #[test]
    fn the_server_context_replaces_what_was_set() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        st.vars.insert("time_zone".into(), "'+01:00'".into());
        st.vars.insert("sql_mode".into(), "'ANSI'".into());
        let before = st.server_ctx;
        server_context(
            &mut st,
            &[
                ("time_zone", Some("+02:00")),
                ("tx_isolation", Some("READ-UNCOMMITTED")),
            ],
        );
        st.refresh_fingerprint_under(&w.cfg, &w.versions.faults);
        assert!(!st.vars.contains_key("time_zone"));
        assert!(st.vars.contains_key("sql_mode"));
        assert_ne!(st.server_ctx, before);
        assert!(st.txn.dirty_reads());
    }
    /// The identity questions' first row, one per case: what it names and what it owes.
    #[test]
    fn what_an_identity_row_says() {
        let w = World::new(false);
        let s = |v: &str| Some(v.to_string());
        type Row = (
            Vec<Option<String>>,
            Option<(&'static str, Option<&'static str>)>,
            bool,
        );
        let rows: Vec<Row> = vec![
            // (row, identity, owes a restore)
            (
                vec![s("7"), s("0"), s("u@%"), s("r")],
                Some(("u@%", Some("r"))),
                true,
            ),
            (
                vec![s("1"), s("-1"), s("u@%"), None],
                Some(("u@%", None)),
                false,
            ),
            (vec![s("1"), s("-1"), s("u@%")], Some(("u@%", None)), false),
            (vec![s("7"), s("0"), None, s("r")], None, true),
        ];
        for (row, want, owes) in rows {
            let mut st = w.session(Some("db"));
            let got = identity_answered(&mut st, row.clone());
            let got = got
                .as_ref()
                .map(|i| (i.account.as_str(), i.role.as_deref()));
            assert_eq!(got, want, "{row:?}");
            assert_eq!(st.after_hit.is_some(), owes, "{row:?}");
        }
    }

    /// The read-back's question and what its answer does, one row per case.
    #[test]
    fn what_a_read_back_answer_says() {
        let w = World::new(false);
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            read_back_question(&["time_zone"], false).as_deref(),
            Some("SELECT FOUND_ROWS(), ROW_COUNT(), @@session.time_zone")
        );
        assert_eq!(
            read_back_question(&["time_zone"], true).as_deref(),
            Some("SELECT FOUND_ROWS(), ROW_COUNT(), @@session.time_zone, CURRENT_USER(), CURRENT_ROLE()")
        );
        assert_eq!(read_back_question(&[], false), None);
        assert_eq!(read_back_question(&["a b"], false), None);
        type Row = (
            bool,
            Option<Vec<Vec<Option<String>>>>,
            Option<Vec<Option<String>>>,
            Option<u64>,
            Option<&'static str>,
        );
        let rows: Vec<Row> = vec![
            // (identity, rows, values, owed, account learnt)
            (
                false,
                Some(vec![vec![s("1"), s("-1"), s("+00:00")]]),
                Some(vec![s("+00:00")]),
                None,
                None,
            ),
            (
                false,
                Some(vec![vec![s("5"), s("0"), s("+00:00")]]),
                Some(vec![s("+00:00")]),
                diagnostics::after_read_back(5, Some(0)),
                None,
            ),
            (
                true,
                Some(vec![vec![s("1"), s("-1"), s("+00:00"), s("u@%"), None]]),
                Some(vec![s("+00:00")]),
                None,
                Some("u@%"),
            ),
            (
                true,
                Some(vec![vec![s("1"), s("-1"), s("+00:00"), None, None]]),
                Some(vec![s("+00:00")]),
                None,
                None,
            ),
            (
                false,
                Some(vec![vec![s("1"), s("-1")]]),
                None,
                Some(diagnostics::AFTER_READ_BACK),
                None,
            ),
            (
                false,
                Some(vec![]),
                None,
                Some(diagnostics::AFTER_READ_BACK),
                None,
            ),
            (false, None, None, Some(diagnostics::AFTER_READ_BACK), None),
        ];
        for (identity, answer, values, owed, account) in rows {
            let mut st = w.session(Some("db"));
            st.diag_may_persist = true;
            let got = read_back_answered(&mut st, &["time_zone"], identity, answer.clone());
            assert_eq!(got, values, "{answer:?}");
            assert_eq!(st.after_hit, owed, "{answer:?}");
            assert_eq!(
                st.identity.as_ref().map(|i| i.account.as_str()),
                account,
                "{answer:?}"
            );
            assert!(!st.diag_may_persist, "{answer:?}");
        }
    }

    /// A connect's read: names and values in order, then the optional names found.
    #[test]
    fn a_connect_read_keys_names_then_found() {
        let w = World::new(false);
        let mut st = w.session(Some("db"));
        st.vars.insert("time_zone".into(), "'+01:00'".into());
        st.vars.insert("sql_mode".into(), "'ANSI'".into());
        let found = [("sql_mode", Some("ANSI".to_string()))];
        server_context_read(&mut st, &["time_zone"], &[Some("+02:00".into())], &found);
        assert!(!st.vars.contains_key("time_zone") && !st.vars.contains_key("sql_mode"));
        assert_eq!(st.server_sql_mode.as_deref(), Some("ANSI"));
    }
}
