//! Policy: which session state the cache key must hold, and when qcache must ask the server
//! for the effective values instead of trusting a SET's text.
//!
//! The key holds what the server has, not what a SET said:
//! - at connect, after COM_RESET_CONNECTION and after COM_CHANGE_USER the session's effective
//!   values of [`key_variables`] are read on its own upstream connection (one round trip,
//!   pipelined with a `DO 0` that puts ROW_COUNT() back where a fresh session has it), so
//!   sessions that inherited different globals never share entries;
//! - a session SET whose value is a literal is keyed by that literal (the literal decides
//!   the value whatever the globals); any other value (`@tz`, `CONCAT(@@sql_mode, …)`,
//!   `DEFAULT`, an expression) is read back from the server after the SET succeeded;
//! - GLOBAL / PERSIST assignments change other sessions (from their connect on), not this one;
//! - READ UNCOMMITTED, however it came (SET, SET TRANSACTION for the next transaction only,
//!   the global default at connect), means the session never stores a result and is never
//!   served one: it could see another session's uncommitted rows, which no binlog reports,
//!   so even a committed cached result may be one the server would not give it now. The
//!   session's fingerprint carries a mark for it, and since no such session stores, no
//!   entry exists under such a fingerprint: the hit path needs no extra test.
//!
//! Why not session state tracking on the upstream leg: it needs CLIENT_SESSION_TRACK
//! negotiated upstream for every client, and then every OK packet of a client that did not
//! ask for it must be rewritten (its info string changes form, the tracking data and the
//! SESSION_STATE_CHANGED flag must go), and `session_track_system_variables` would have to
//! be changed on the server in a way `SELECT @@session_track_system_variables` would show.
//! A read-back costs one round trip where a SET cannot be evaluated (rare) and one per
//! connect, and nothing per hit.

use std::sync::LazyLock;

/// Session variables whose value can change a cacheable result's bytes or meaning, read at
/// connect. `mariadb`: the server's flavour (from its greeting), which decides which names
/// exist; [`COMMON_KEY_VARIABLES`] is the fallback should a name be unknown to the server.
pub fn key_variables(mariadb: bool) -> &'static [&'static str] {
    if mariadb {
        &MARIADB_KEY_VARIABLES
    } else {
        &MYSQL_KEY_VARIABLES
    }
}

/// Names every supported server knows.
pub const COMMON_KEY_VARIABLES: &[&str] = &[
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
    "sql_mode",
    "time_zone",
    "div_precision_increment",
    "lc_time_names",
    "group_concat_max_len",
    "max_sort_length",
    "default_week_format",
    "sql_select_limit",
    "sql_auto_is_null",
    "max_join_size",
    "sql_big_selects",
    "sql_notes",
];

/// MariaDB's own names, read after the common ones.
const MARIADB_EXTRA: &[&str] = &[
    "tx_isolation",
    "old_mode",
    "max_recursive_iterations",
    "system_versioning_asof",
    // REGEXP's default flags: inherited from the global at connect.
    "default_regex_flags",
];

/// MySQL's own names, read after the common ones.
const MYSQL_EXTRA: &[&str] = &[
    "transaction_isolation",
    "cte_max_recursion_depth",
    "block_encryption_mode",
];

/// The common names followed by one flavour's: built once, so each flavour's list is the
/// common one by construction.
static MARIADB_KEY_VARIABLES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| [COMMON_KEY_VARIABLES, MARIADB_EXTRA].concat());
static MYSQL_KEY_VARIABLES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| [COMMON_KEY_VARIABLES, MYSQL_EXTRA].concat());

/// Global-only variables (no session value to read at connect) that change what a read
/// returns, at once and for every session, with a `SET GLOBAL` that no binlog records: a
/// client anywhere may change them under qcache's feet. Keying by the value read at connect
/// would not do (it changes under open sessions), nor would invalidating on a SET GLOBAL seen
/// through qcache (one from elsewhere is never seen). So every read that depends on one is
/// never cached: each entry names the variable and a read shape that depends on it, which the
/// analysis must refuse (a unit test checks).
///
/// Of MariaDB's dynamic global-only variables (`information_schema.SYSTEM_VARIABLES`), only
/// full-text settings reach a cacheable read's result, and a full-text search
/// (`MATCH … AGAINST`, any mode, in a statement or a view's definition) is never cached
/// (`NotCached::FullText`): `ft_boolean_syntax` changes boolean mode's operators at once;
/// the InnoDB stopword, auxiliary-table and result-cache settings act on indexes built later,
/// on information_schema or by raising errors (none of which is cached), but the same rule
/// covers them. The other `ft_*` / `innodb_ft_*` variables are read-only or per session. The
/// rest change plans, durability, logging, replication, authentication or what a new session
/// starts with (read at its connect: [`key_variables`], the identity).
pub const GLOBAL_ONLY_RESULT_VARIABLES: &[(&str, &str)] = &[
    (
        "ft_boolean_syntax",
        "SELECT id FROM t WHERE MATCH (s) AGAINST ('+a -b' IN BOOLEAN MODE)",
    ),
    (
        "innodb_ft_server_stopword_table",
        "SELECT id FROM t WHERE MATCH (s) AGAINST ('a')",
    ),
    (
        "innodb_ft_aux_table",
        "SELECT id, MATCH (s) AGAINST ('a b' IN NATURAL LANGUAGE MODE) AS r FROM t",
    ),
    (
        "innodb_ft_result_cache_limit",
        "SELECT id FROM t WHERE MATCH (s) AGAINST ('a' WITH QUERY EXPANSION)",
    ),
];

/// Whether the server is MariaDB, from its greeting's version string.
pub fn is_mariadb(server_version: &str) -> bool {
    server_version.contains("MariaDB")
}

/// The statement that reads `names` as the session has them: one row, one column each.
/// None when a name is not a plain identifier (it came from a SET qcache parsed; a name
/// that could break out of the statement is never sent).
pub fn read_back_sql(names: &[&str]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    let mut sql = String::from("SELECT ");
    for (i, n) in names.iter().enumerate() {
        let plain = !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !plain || n.starts_with('.') || n.ends_with('.') {
            return None;
        }
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("@@session.");
        sql.push_str(n);
    }
    Some(sql)
}

/// What one assignment of a SET that succeeded means for the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// Changes nothing this session's results depend on: a user variable (statements that
    /// read one are never cached), or a GLOBAL / PERSIST assignment (other sessions get it
    /// at their connect, and read it then).
    Ignore,
    /// The literal decides the value: keyed by its text.
    Literal,
    /// The value depends on state qcache does not follow (`@v`, `@@x`, a function,
    /// `DEFAULT` = the global value now): read the effective values of these variables
    /// back from the server.
    ReadBack(Vec<&'static str>),
    /// Read back the variable of this name.
    ReadBackNamed,
    /// qcache cannot tell what changed nor read it back: stop caching for the session.
    Lost,
}

/// The variables behind the special SET forms (`SET NAMES`, `SET CHARACTER SET`).
const CHARSET_VARIABLES: &[&str] = &[
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

/// Key variables a SET of one of which also changes others, so that the text of each SET
/// cannot say what the session has: `character_set_connection` resets
/// `collation_connection` to the charset's default and `collation_connection` sets the
/// charset; `SET NAMES` sets three and `SET CHARACTER SET` takes the current database's
/// charset for the connection; `max_join_size` other than DEFAULT clears `sql_big_selects`.
/// The same SETs in another order (or in another database) would give another session the
/// same key with other values, so an assignment to any name of a group reads the group's
/// effective values back.
const COUPLED: &[(&[&str], &[&str])] = &[
    (
        &[
            "names",
            "character set",
            "character_set_client",
            "character_set_connection",
            "character_set_results",
            "collation_connection",
        ],
        CHARSET_VARIABLES,
    ),
    (
        &["max_join_size", "sql_max_join_size", "sql_big_selects"],
        &["max_join_size", "sql_big_selects"],
    ),
];

/// The key variables to read back after an assignment to `name`, when it is coupled.
fn coupled(name: &str) -> Option<&'static [&'static str]> {
    COUPLED
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, read)| *read)
}

/// The rule for `name = value` at `global` scope (names as `analysis::analyze_set` gives
/// them: lower case, `@u` for user variables, `names`, `character set`, `transaction`,
/// `role`).
pub fn assignment(name: &str, value: &str, global: bool) -> Assignment {
    if global || (name.starts_with('@') && !name.starts_with("@@")) {
        return Assignment::Ignore;
    }
    if let Some(group) = coupled(name) {
        return Assignment::ReadBack(group.to_vec());
    }
    match name {
        // Keyed by text as before (the privileges policy owns roles); `SET TRANSACTION`'s
        // value is keywords only.
        "role" | "transaction" => Assignment::Literal,
        _ if is_literal(value) => Assignment::Literal,
        _ if read_back_sql(&[name]).is_some() => Assignment::ReadBackNamed,
        _ => Assignment::Lost,
    }
}

/// A value whose text alone decides the variable's value: a quoted string, a number, or a
/// bare word (`ON`, `utf8mb4`, `SYSTEM`) other than `DEFAULT`.
pub fn is_literal(value: &str) -> bool {
    let v = value.trim();
    let b = v.as_bytes();
    match b.first() {
        None => false,
        Some(&q @ (b'\'' | b'"')) => {
            if b.len() < 2 || b[b.len() - 1] != q {
                return false;
            }
            // No backslash escapes and no lone quote inside (`'a' 'b'` is two strings).
            let inner = &b[1..b.len() - 1];
            if inner.contains(&b'\\') {
                return false;
            }
            let mut i = 0;
            while i < inner.len() {
                if inner[i] == q {
                    if inner.get(i + 1) != Some(&q) {
                        return false;
                    }
                    i += 1;
                }
                i += 1;
            }
            true
        }
        Some(_) => {
            let body = v.strip_prefix(['-', '+']).unwrap_or(v);
            let number = !body.is_empty()
                && body.bytes().all(|c| c.is_ascii_digit() || c == b'.')
                && body.bytes().filter(|&c| c == b'.').count() <= 1;
            let word = !v.is_empty()
                && v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
                && !v.as_bytes()[0].is_ascii_digit()
                && !v.eq_ignore_ascii_case("default");
            number || word
        }
    }
}

/// Whether an isolation level's text (`READ-UNCOMMITTED` from the server,
/// `ISOLATION LEVEL READ UNCOMMITTED` from a SET TRANSACTION) lets the session read
/// uncommitted rows.
pub fn reads_uncommitted(value: &str) -> bool {
    let v = value.to_ascii_uppercase();
    v.contains("UNCOMMITTED")
}

/// Whether an assignment names the session's isolation level.
pub fn is_isolation(name: &str) -> bool {
    matches!(name, "tx_isolation" | "transaction_isolation")
}

/// Whether the session has no default database any more after it dropped `dropped`
/// (lower-cased by the parser): when it may have been the current one. Compared without case, because with
/// `lower_case_table_names=0` `RT` and `rt` differ but qcache does not know which setting the
/// server has; forgetting the database only stops unqualified reads from being cached.
pub fn drop_forgets_db(current: Option<&str>, dropped: &str) -> bool {
    current.is_some_and(|cur| cur.eq_ignore_ascii_case(dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        for v in [
            "'+00:00'", "\"ANSI\"", "'it''s'", "0", "-1", "4.5", "ON", "utf8mb4", "SYSTEM", "NULL",
            "''",
        ] {
            assert!(is_literal(v), "{v}");
        }
        for v in [
            "@tz",
            "@@global.sql_mode",
            "CONCAT(@@sql_mode, ',ANSI')",
            "DEFAULT",
            "default",
            "1024*1024",
            "'a' 'b'",
            "'a\\'b'",
            "'unterminated",
            "(SELECT 1)",
            "",
            "1e3",
            "x'41'",
        ] {
            assert!(!is_literal(v), "{v}");
        }
    }

    #[test]
    fn assignment_rules() {
        use Assignment::*;
        for (name, value, global, want) in [
            ("time_zone", "'+00:00'", false, Literal),
            ("time_zone", "@tz", false, ReadBackNamed),
            (
                "sql_mode",
                "CONCAT(@@sql_mode, ',ANSI')",
                false,
                ReadBackNamed,
            ),
            ("sql_mode", "DEFAULT", false, ReadBackNamed),
            ("sql_mode", "@x", true, Ignore),
            ("div_precision_increment", "4", true, Ignore),
            ("@u", "1", false, Ignore),
            (
                "names",
                "DEFAULT",
                false,
                ReadBack(CHARSET_VARIABLES.to_vec()),
            ),
            ("names", "utf8mb4", true, Ignore),
            (
                "transaction",
                "ISOLATION LEVEL READ UNCOMMITTED",
                false,
                Literal,
            ),
            ("role", "r1", false, Literal),
            ("keycache.key_buffer_size", "@v", false, ReadBackNamed),
            ("we`ird", "@v", false, Lost),
        ] {
            assert_eq!(assignment(name, value, global), want, "{name} = {value}");
        }
    }

    /// A SET of one variable that also changes others is read back whatever its value: the
    /// same literal SETs in another order (or another database) leave other values.
    #[test]
    fn coupled_variables_are_read_back() {
        let charset = Assignment::ReadBack(CHARSET_VARIABLES.to_vec());
        for (name, value) in [
            ("names", "utf8mb4"),
            ("names", "'utf8mb4' COLLATE 'utf8mb4_bin'"),
            ("character set", "latin1"),
            ("character_set_connection", "utf8mb4"),
            ("collation_connection", "utf8mb4_bin"),
            ("character_set_client", "latin1"),
            ("character_set_results", "NULL"),
        ] {
            assert_eq!(assignment(name, value, false), charset, "{name} = {value}");
        }
        let joins = Assignment::ReadBack(vec!["max_join_size", "sql_big_selects"]);
        for name in ["max_join_size", "sql_max_join_size", "sql_big_selects"] {
            assert_eq!(assignment(name, "2", false), joins, "{name}");
        }
        // Every variable read back is one the key holds from connect on.
        for (_, read) in COUPLED {
            for v in *read {
                assert!(COMMON_KEY_VARIABLES.contains(v), "{v}");
            }
        }
    }

    #[test]
    fn read_back_statements() {
        assert_eq!(
            read_back_sql(&["time_zone", "sql_mode"]).as_deref(),
            Some("SELECT @@session.time_zone, @@session.sql_mode")
        );
        assert_eq!(read_back_sql(&[]), None);
        assert_eq!(read_back_sql(&["a; DROP TABLE t"]), None);
        assert_eq!(read_back_sql(&["a`"]), None);
        assert_eq!(read_back_sql(&[".a"]), None);
    }

    #[test]
    fn isolation() {
        for (v, dirty) in [
            ("READ-UNCOMMITTED", true),
            ("ISOLATION LEVEL READ UNCOMMITTED", true),
            ("'read-uncommitted'", true),
            ("REPEATABLE-READ", false),
            ("ISOLATION LEVEL READ COMMITTED", false),
            ("SERIALIZABLE", false),
        ] {
            assert_eq!(reads_uncommitted(v), dirty, "{v}");
        }
        assert!(is_isolation("tx_isolation") && is_isolation("transaction_isolation"));
        assert!(!is_isolation("transaction"));
    }

    #[test]
    fn dropping_the_current_database() {
        for (cur, dropped, want) in [
            (Some("shop"), "shop", true),
            (Some("Shop"), "shop", true),
            (Some("shop"), "other", false),
            (None, "shop", false),
        ] {
            assert_eq!(drop_forgets_db(cur, dropped), want, "{cur:?} {dropped}");
        }
    }

    #[test]
    fn reads_depending_on_global_only_variables_are_never_cached() {
        use crate::analysis::{analyze, Analysis, NotCached};
        for (var, sql) in GLOBAL_ONLY_RESULT_VARIABLES {
            match analyze(sql) {
                Analysis::Read(r) => assert_eq!(r.verdict, Err(NotCached::FullText), "{var}"),
                other => panic!("{var}: {sql}: {other:?}"),
            }
            // Not a variable a session could be keyed by: it has no session value.
            assert!(!key_variables(true).contains(var) && !key_variables(false).contains(var));
        }
    }

    #[test]
    fn flavours() {
        assert!(is_mariadb("5.5.5-10.11.19-MariaDB-0+deb12u1"));
        assert!(!is_mariadb("8.0.36"));
        for list in [key_variables(true), key_variables(false)] {
            for v in COMMON_KEY_VARIABLES {
                assert!(list.contains(v), "{v}");
            }
            assert!(read_back_sql(list).is_some());
        }
    }
}
