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
//! - after a write that may fire a trigger (which may SET the writer's variables unseen) the
//!   values are read again before the session's next cacheable read ([`context_stale_after`]);
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

use super::Reason;

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
    // The optimizer's settings: they choose the plan, and the plan decides the order of a
    // result the query does not order (a join's, a LIMIT's, a GROUP_CONCAT's) and whether a
    // statement runs out of a buffer. Row order is data.
    "optimizer_switch",
    "optimizer_search_depth",
    "optimizer_prune_level",
    "join_buffer_size",
    "sort_buffer_size",
    "max_seeks_for_key",
    // Where an implicit temporary table lives (memory or disk: the order of an unordered
    // GROUP BY / DISTINCT), and whether a result row fits the session's packet.
    "tmp_table_size",
    "max_heap_table_size",
    "max_allowed_packet",
    // What the server's own COMMIT does besides committing (chain a new transaction, or
    // close the connection): a session that sets it does not get a locally answered
    // BEGIN/COMMIT (`begin_needs_server`).
    "completion_type",
    // Read, not keyed (`UNKEYED`): how long the server lets the connection idle, which hits
    // must not let run out (`keep_alive_after`).
    "wait_timeout",
];

/// Whether the session's `sql_select_limit` among `pairs` (as read back) may cut results:
/// anything but the default (the largest unsigned 64-bit value), an unreadable one too.
pub fn select_limited(pairs: &[(&str, Option<&str>)]) -> bool {
    pairs.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("sql_select_limit")
            && v.is_none_or(|v| v.trim() != "18446744073709551615")
    })
}

/// Settings under which the server refuses a read once its tables have grown enough
/// (`max_join_size` / `sql_big_selects`: ERROR 1104 for a GROUP BY whose estimate passed it;
/// a disk temporary table's size, the session's memory, a statement's time), each with the
/// value as read back under which it never does.
pub const READ_LIMITS: &[(&str, &str)] = &[
    ("max_join_size", "18446744073709551615"),
    ("sql_big_selects", "1"),
    ("tmp_disk_table_size", "18446744073709551615"),
    ("max_session_mem_used", "9223372036854775807"),
    ("max_statement_time", "0"),
    ("max_execution_time", "0"),
];

/// Whether `pairs` (as read back) hold a [`READ_LIMITS`] setting at anything but the value
/// that never refuses (numerically: `0.000000` is `0`); an unreadable value counts as a limit.
pub fn reads_limited(pairs: &[(&str, Option<&str>)]) -> bool {
    pairs.iter().any(|(n, v)| {
        READ_LIMITS.iter().any(|(name, free)| {
            n.eq_ignore_ascii_case(name)
                && !v.is_some_and(|v| {
                    let v = v.trim();
                    v == *free
                        || (*free == "0" && v.parse::<f64>() == Ok(0.0))
                        || (*name == "sql_big_selects" && v.eq_ignore_ascii_case("ON"))
                })
        })
    })
}

/// Whether a session SET of `name` may limit its reads ([`READ_LIMITS`]): any value, the
/// default too (it is the global's, which may be a limit).
pub fn is_read_limit(name: &str) -> bool {
    READ_LIMITS
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// Character sets in which the server sends the text of numbers and dates (digits, `-`,
/// `.`, `:`, spaces) as those ASCII bytes. Not the wide ones (`ucs2`, `utf16`, `utf16le`,
/// `utf32`: `1` is `0x0031`…) nor `filename` (`-5` is `@002d5`).
pub const ASCII_RESULTS: &[&str] = &[
    "armscii8", "ascii", "big5", "binary", "cp1250", "cp1251", "cp1256", "cp1257", "cp850",
    "cp852", "cp866", "cp932", "dec8", "eucjpms", "euckr", "gb2312", "gbk", "geostd8", "greek",
    "hebrew", "hp8", "keybcs2", "koi8r", "koi8u", "latin1", "latin2", "latin5", "latin7", "macce",
    "macroman", "sjis", "swe7", "tis620", "ujis", "utf8", "utf8mb3", "utf8mb4",
];

/// Whether a `character_set_results` value (as read back, or a SET's literal text, quoted
/// or not) sends numbers and dates as ASCII text: one of [`ASCII_RESULTS`]. NULL (no
/// conversion), `DEFAULT`, an unreadable value or an unknown name: not known to, false.
pub fn results_ascii(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim().trim_matches(|c| c == '\'' || c == '"' || c == '`');
        ASCII_RESULTS.iter().any(|a| a.eq_ignore_ascii_case(v))
    })
}

/// Whether `character_set_results` among `pairs` (as read back) is not known to send
/// numbers and dates as ASCII text ([`results_ascii`]).
pub fn results_not_ascii(pairs: &[(&str, Option<&str>)]) -> bool {
    pairs
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("character_set_results") && !results_ascii(*v))
}

/// Client character sets whose bytes beyond ASCII are UTF-8, as the catalog's names (read
/// from information_schema) and qcache's reading of a statement's text (`from_utf8_lossy`)
/// take them.
pub const UTF8_CLIENTS: &[&str] = &["utf8", "utf8mb3", "utf8mb4"];

/// Whether a `character_set_client` value (as read back, or a SET's literal text, quoted or
/// not) is one of [`UTF8_CLIENTS`]. NULL, `DEFAULT`, an unreadable value: not known to be.
pub fn client_utf8(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim().trim_matches(|c| c == '\'' || c == '"' || c == '`');
        UTF8_CLIENTS.iter().any(|u| u.eq_ignore_ascii_case(v))
    })
}

/// Whether `character_set_client` among `pairs` (as read back) is not known to be UTF-8
/// ([`client_utf8`]); absent counts as not known.
pub fn client_not_utf8(pairs: &[(&str, Option<&str>)]) -> bool {
    !pairs
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("character_set_client") && client_utf8(*v))
}

/// Whether a collation id (a binlog event's `character_set_client` is given as one) is of a
/// UTF-8 character set, as MariaDB 10.11 numbers them (`information_schema.COLLATIONS`:
/// utf8mb3 and utf8mb4). Any other id counts as not UTF-8 (fail closed: MySQL 8's
/// `utf8mb4_0900_*` and MariaDB's `uca1400` ids too, which only costs DDL with a name
/// beyond ASCII its precise invalidation).
pub fn collation_utf8(id: u16) -> bool {
    matches!(
        id,
        33 | 45
            | 46
            | 83
            | 192..=215
            | 223
            | 224..=247
            | 576..=578
            | 608..=610
            | 1057
            | 1069
            | 1070
            | 1107
            | 1216
            | 1238
            | 1248
            | 1270
    )
}

/// Whether a statement's names may not be the ones qcache reads: a session whose client
/// character set is not UTF-8 (`client_utf8`) sends names in that character set, which
/// the server converts and qcache cannot: `café` in latin1 is the byte e9, which qcache
/// reads as no name the catalog has, so a write to it invalidated nothing; and under a
/// multi-byte set (GBK, BIG5, SJIS, GB18030) a character's second byte may be a backquote,
/// which does not close the name to the server (`` `<81 60>…` `` is one name). So a name
/// with a byte beyond ASCII (`analysis::names_beyond_ascii`) in such a session makes a
/// read not cached and a write one to unknown tables. Strings are not names: their bytes
/// change no table a statement names.
/// `db`: the session's default database as qcache holds it, which qualifies the names the
/// statement leaves unqualified: one a USE (or COM_INIT_DB) sent beyond ASCII in such a
/// character set is not the server's either.
pub fn names_undecodable(client_utf8: bool, db: Option<&str>, sql: &[u8]) -> Option<super::Reason> {
    (!client_utf8
        && (db.is_some_and(|d| !d.is_ascii()) || crate::analysis::names_beyond_ascii(sql)))
    .then_some(super::Reason::ClientCharsetNames)
}

/// Whether accounts a privilege statement names (`users`, as qcache read them) may be
/// others to the server: a name beyond ASCII sent in a client character set that is not
/// UTF-8 ([`names_undecodable`]'s reason; account names are strings, which it leaves out).
pub fn accounts_undecodable(client_utf8: bool, users: &[String]) -> bool {
    !client_utf8 && users.iter().any(|u| !u.is_ascii())
}

/// Names read with the key's but not part of it: they change no result.
pub const UNKEYED: &[&str] = &["wait_timeout"];

/// The server's idle timers: it ends a connection (or its transaction) that sent no command
/// for this many seconds. A session whose reads are hits sends none.
pub const IDLE_TIMERS: &[&str] = &[
    "wait_timeout",
    "idle_transaction_timeout",
    "idle_readonly_transaction_timeout",
    "idle_write_transaction_timeout",
];

/// How long a session may go on being served from the cache before qcache sends the server
/// a COM_PING, so that a client the server would see as active (every hit is a command to
/// it) is not ended as idle: half the shortest idle timer set among `pairs` (values as read
/// back, seconds; 0 is off), at least 100 ms. An unreadable value counts as 1 s.
pub fn keep_alive_after(pairs: &[(&str, Option<&str>)]) -> std::time::Duration {
    let shortest = pairs
        .iter()
        .filter(|(n, _)| IDLE_TIMERS.iter().any(|t| n.eq_ignore_ascii_case(t)))
        .filter_map(
            |(_, v)| match v.and_then(|v| v.trim().parse::<f64>().ok()) {
                Some(secs) if secs > 0.0 => Some(secs),
                Some(_) => None,
                None => Some(1.0),
            },
        )
        .fold(f64::INFINITY, f64::min);
    if shortest.is_infinite() {
        // No timer at all: the server ends no idle connection (MySQL's minimum is 1 s; a
        // value never read is treated above).
        return std::time::Duration::from_secs(3600);
    }
    std::time::Duration::from_secs_f64((shortest / 2.0).max(0.1))
}

/// MariaDB's own names, read after the common ones.
const MARIADB_EXTRA: &[&str] = &[
    "tx_isolation",
    "old_mode",
    "max_recursive_iterations",
    // Whether a recursive CTE the standard forbids is refused (ERROR 4008) or run.
    "standard_compliant_cte",
    "system_versioning_asof",
    // REGEXP's default flags: inherited from the global at connect.
    "default_regex_flags",
    // Whether a read fails: killed after this long, a disk temporary table or the
    // session's memory over its limit.
    "max_statement_time",
    "tmp_disk_table_size",
    "max_session_mem_used",
    // MariaDB's optimizer settings (see the common list).
    "join_cache_level",
    "join_buffer_space_limit",
    "mrr_buffer_size",
    "optimizer_use_condition_selectivity",
    "optimizer_selectivity_sampling_limit",
    "use_stat_tables",
    "histogram_size",
    "histogram_type",
    "expensive_subquery_limit",
    "rowid_merge_buff_size",
    "max_length_for_sort_data",
    // Whether a BEGIN opens a read-only transaction (`begin_needs_server`): inherited from
    // the global, set by init_connect, a procedure or a SET qcache did not follow.
    "tx_read_only",
];

/// MySQL's own names, read after the common ones.
const MYSQL_EXTRA: &[&str] = &[
    "transaction_isolation",
    "cte_max_recursion_depth",
    "block_encryption_mode",
    // Whether a read fails (a SELECT killed after this many milliseconds), and the
    // optimizer's settings MySQL has beside the common ones.
    "max_execution_time",
    "range_optimizer_max_mem_size",
    "big_tables",
    "eq_range_index_dive_limit",
    // A session that traces the optimizer is not served (`traces_optimizer`).
    "optimizer_trace",
    // Nor one that profiles its statements (`profiles`).
    "profiling",
    // Whether a BEGIN opens a read-only transaction (`begin_needs_server`).
    "transaction_read_only",
];

/// Key variables only some versions of MariaDB have, read at connect where the server has
/// them (an unknown name in the one `SELECT @@…` would fail it whole, and the fallback
/// lists would then lose the flavour's other names). Which of them a server has is asked
/// once per server version, with [`probe_sql`] (no error for a missing name), in the same
/// pipelined batch as the first connect's read, which then reads the ones it has as
/// `@@session.` spells them (one more round trip: information_schema writes `OFF` for 0);
/// later connects read them with the others, at no extra cost.
const MARIADB_OPTIONAL: &[&str] = &[
    // 10.6.16 / 10.11.6 / 11.0.4 on: which notes a read gets (a hit must not hide the
    // "Cannot use key" note, nor invent it); inherited from the global at connect.
    "note_verbosity",
    // 11.1 on: the standard name of `tx_isolation`, which stays (read under both).
    "transaction_isolation",
    // 11.2 on: each charset's default collation, which `SET NAMES`, casts and literals take.
    "character_set_collations",
    // Optimizer settings and limits some versions have (see the common list): deprecated
    // (`big_tables`), or added by later releases (10.4 `max_rowid_filter_size`, the 10.6
    // and 10.11 maintenance releases' `optimizer_*` limits, 11.0's cost model, 11.5's
    // temporary-space limit, which fails a read that exceeds it), or whose first MariaDB
    // release is later than the oldest qcache may meet (`eq_range_index_dive_limit`,
    // `in_predicate_conversion_threshold`): a name missing from the fixed list would send
    // every connect to the fallback list.
    "big_tables",
    "eq_range_index_dive_limit",
    "in_predicate_conversion_threshold",
    "tmp_memory_table_size",
    "max_rowid_filter_size",
    "optimizer_max_sel_arg_weight",
    "optimizer_max_sel_args",
    "optimizer_adjust_secondary_key_costs",
    "optimizer_extra_pruning_depth",
    "optimizer_join_limit_pref_ratio",
    "optimizer_disk_read_cost",
    "optimizer_disk_read_ratio",
    "optimizer_index_block_copy_cost",
    "optimizer_key_compare_cost",
    "optimizer_key_copy_cost",
    "optimizer_key_lookup_cost",
    "optimizer_key_next_find_cost",
    "optimizer_row_copy_cost",
    "optimizer_row_lookup_cost",
    "optimizer_row_next_find_cost",
    "optimizer_rowid_compare_cost",
    "optimizer_rowid_copy_cost",
    "optimizer_scan_setup_cost",
    "optimizer_where_cost",
    "max_tmp_session_space_usage",
    // 11.2 on (MDEV-9069): AES_ENCRYPT / AES_DECRYPT's cipher mode, which changes their
    // result as MySQL's variable of that name does.
    "block_encryption_mode",
    // 11.3 on: optimizer fixes a session turns on (`FIX_DISK_TMPTABLE_COSTS`, …), which
    // change plans, and with them the order of unordered results.
    "new_mode",
    // 10.3 on: an idle transaction is ended by the server after this long, which a BEGIN
    // that qcache answered and kept would not be (`begin_needs_server`).
    "idle_transaction_timeout",
    "idle_readonly_transaction_timeout",
    "idle_write_transaction_timeout",
    // 10.4 on: a session that traces the optimizer is not served (`traces_optimizer`).
    "optimizer_trace",
    // A session that profiles its statements is not served and sent nothing of qcache's
    // (`profiles`); inherited from the global at connect. Optional: a server built without
    // profiling lacks it.
    "profiling",
];

/// The flavour's optional key variables ([`MARIADB_OPTIONAL`]; none for MySQL, whose
/// supported versions all have its list).
pub fn optional_key_variables(mariadb: bool) -> &'static [&'static str] {
    if mariadb {
        MARIADB_OPTIONAL
    } else {
        &[]
    }
}

/// The statement that says which of `names` the server has and their session values, one
/// row `(VARIABLE_NAME, VARIABLE_VALUE)` each, without an error for the names it lacks (the
/// names are qcache's constants, never a client's). None for no names.
pub fn probe_sql(names: &[&str]) -> Option<String> {
    if names.is_empty() || read_back_sql(names).is_none() {
        return None;
    }
    let list: Vec<String> = names
        .iter()
        .map(|n| format!("'{}'", n.to_ascii_uppercase()))
        .collect();
    Some(format!(
        "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES \
         WHERE VARIABLE_NAME IN ({})",
        list.join(", ")
    ))
}

/// Of `names`, those the probe's rows name (any case), in `names`' order, with their values.
pub fn probed<'a>(
    names: &[&'a str],
    rows: &[Vec<Option<String>>],
) -> Vec<(&'a str, Option<String>)> {
    names
        .iter()
        .filter_map(|n| {
            rows.iter()
                .find(|r| {
                    r.first()
                        .and_then(|c| c.as_deref())
                        .is_some_and(|c| c.eq_ignore_ascii_case(n))
                })
                .map(|r| (*n, r.get(1).cloned().flatten()))
        })
        .collect()
}

/// The session context the server reported at connect, as the key holds it: a hash of each
/// name and value in order (never 0, which means "not read"), and whether an isolation
/// variable says READ UNCOMMITTED.
pub fn server_context(pairs: &[(&str, Option<&str>)]) -> (u64, bool) {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut ru = false;
    for (n, v) in pairs {
        if UNKEYED.contains(n) {
            continue;
        }
        h.update(n.as_bytes());
        h.update(&[0]);
        match v {
            Some(v) => {
                if is_isolation(n) && reads_uncommitted(v) {
                    ru = true;
                }
                h.update(v.as_bytes());
                h.update(&[0]);
            }
            None => h.update(&[1]),
        }
    }
    (h.digest() | 1, ru)
}

/// What a read-back of the session's settings (names and values, as read) means for the
/// session: its server context and every setting a rule of this module reads off it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBack {
    /// [`server_context`]'s hash of the values.
    pub server_ctx: u64,
    pub read_uncommitted: bool,
    pub serializable: bool,
    /// `sql_auto_is_null` is on ([`auto_is_null_on`]).
    pub auto_is_null: bool,
    pub optimizer_traced: bool,
    /// `profiling` is on ([`profiled`]).
    pub profiling: bool,
    pub keep_alive_after: std::time::Duration,
    pub select_limited: bool,
    /// `character_set_results` is not known to send numbers as ASCII ([`results_not_ascii`]).
    pub results_not_ascii: bool,
    /// `character_set_client` is not known to be UTF-8 ([`client_not_utf8`]).
    pub client_not_utf8: bool,
    /// A setting may refuse a read once its tables grow ([`reads_limited`]).
    pub reads_limited: bool,
    /// BEGIN and COMMIT must reach the server ([`begin_needs_server`]).
    pub begin_needs_server: bool,
}

impl ReadBack {
    pub fn of(pairs: &[(&str, Option<&str>)]) -> ReadBack {
        let (server_ctx, read_uncommitted) = server_context(pairs);
        ReadBack {
            server_ctx,
            read_uncommitted,
            serializable: pairs
                .iter()
                .any(|(n, v)| is_isolation(n) && v.is_some_and(serializable)),
            auto_is_null: pairs
                .iter()
                .any(|(n, v)| *n == AUTO_IS_NULL && auto_is_null_on(*v)),
            optimizer_traced: optimizer_traced(pairs),
            profiling: profiled(pairs),
            keep_alive_after: keep_alive_after(pairs),
            select_limited: select_limited(pairs),
            results_not_ascii: results_not_ascii(pairs),
            client_not_utf8: client_not_utf8(pairs),
            reads_limited: reads_limited(pairs),
            begin_needs_server: begin_needs_server(pairs),
        }
    }
}

/// Settings under which the server's BEGIN or COMMIT does more than qcache's local answer
/// to a plain one would (`session/begin.rs`): COMMIT chains a new transaction or closes the
/// connection, or a timer ends a transaction left idle.
pub const BEGIN_SENSITIVE: &[&str] = &[
    "completion_type",
    // A read-only session's BEGIN answers SERVER_STATUS_IN_TRANS_READONLY besides IN_TRANS.
    "tx_read_only",
    "transaction_read_only",
    "idle_transaction_timeout",
    "idle_readonly_transaction_timeout",
    "idle_write_transaction_timeout",
];

/// Whether a successful SET (its assignments; None when qcache could not read them) may
/// have set one of the [`IDLE_TIMERS`]: then the timers are read back before the next
/// cacheable read, for [`keep_alive_after`].
pub fn set_may_change_idle_timers(assignments: Option<&[(String, String)]>) -> bool {
    assignments.is_none_or(|a| a.iter().any(|(k, _)| IDLE_TIMERS.contains(&k.as_str())))
}

/// Whether a successful SET (None: unread) may make the server's answer to BEGIN say more
/// than qcache's local one would: the transaction state a tracking client asked for
/// (`session_track_*`), a transaction characteristic (read-only, isolation), or one of
/// [`BEGIN_SENSITIVE`]. Then BEGIN goes to the server until the settings are read back.
pub fn set_may_change_begin(assignments: Option<&[(String, String)]>) -> bool {
    assignments.is_none_or(|a| {
        a.iter().any(|(k, _)| {
            k.starts_with("session_track")
                || k.contains("transaction")
                || k.contains("tx_")
                || BEGIN_SENSITIVE.contains(&k.as_str())
        })
    })
}

/// Whether one of [`BEGIN_SENSITIVE`] holds anything but its default among `pairs` (names
/// and values as read back): then BEGIN and COMMIT must reach the server. An unknown value
/// (NULL) counts as not the default.
pub fn begin_needs_server(pairs: &[(&str, Option<&str>)]) -> bool {
    pairs.iter().any(|(n, v)| {
        BEGIN_SENSITIVE.iter().any(|b| n.eq_ignore_ascii_case(b))
            && !v.is_some_and(|v| {
                let v = v.trim();
                v == "0" || v.eq_ignore_ascii_case("NO_CHAIN") || v.eq_ignore_ascii_case("OFF")
            })
    })
}

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
/// rest change durability, logging, replication, authentication or what a new session
/// starts with (read at its connect: [`key_variables`], the identity), or plans: the
/// InnoDB statistics settings (`innodb_stats_*`) change the statistics the optimizer reads,
/// and so the order of an unordered result, as ANALYZE TABLE and the server's own
/// statistics recalculation do. That gap is not closed here: no key can hold statistics.
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
    /// The literal decides the value: keyed by its text, under [`key_name`].
    Literal,
    /// The isolation level, whichever name or spelling set it: keyed under one name with the
    /// server's spelling of the level, so that the last assignment decides the key (`SET
    /// tx_isolation = …` then `SET transaction_isolation = …` and the other order leave
    /// different levels, and must not share a key).
    Keyed {
        name: &'static str,
        value: &'static str,
    },
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

/// Variables a SET of which changes only the parts its value names: `SET optimizer_switch =
/// 'mrr=off'` leaves every other flag as the session had it (from its own SETs or the global
/// it inherited), so the text is not the value and the value is read back.
const PARTIAL_SETS: &[&str] = &["optimizer_switch", "optimizer_trace"];

/// Whether the session's `optimizer_trace` value (as the server reports it) may record
/// traces. A session that traces is never served nor stores: a hit would leave the trace of
/// the statement before it, or of qcache's diagnostics resetter, where the server shows the
/// read's. Fails closed: anything but a value that says `enabled=off` traces.
pub fn traces_optimizer(value: &str) -> bool {
    !value.to_ascii_lowercase().contains("enabled=off")
}

/// Whether the session context the server reported (`(name, value)` pairs, as for
/// [`server_context`]) has the optimizer trace on ([`traces_optimizer`]); a server without
/// the variable traces nothing.
pub fn optimizer_traced(pairs: &[(&str, Option<&str>)]) -> bool {
    pairs
        .iter()
        .any(|(n, v)| is_optimizer_trace(n) && v.is_some_and(traces_optimizer))
}

/// Whether a variable name (any case, with or without `@@session.`) is `optimizer_trace`.
pub fn is_optimizer_trace(name: &str) -> bool {
    let bare = name.rsplit('.').next().unwrap_or(name);
    bare.trim_start_matches('@')
        .eq_ignore_ascii_case("optimizer_trace")
}

/// Whether a variable name (any case, with or without `@@session.`) is `profiling`.
pub fn is_profiling(name: &str) -> bool {
    let bare = name.rsplit('.').next().unwrap_or(name);
    bare.trim_start_matches('@')
        .eq_ignore_ascii_case("profiling")
}

/// Whether a value of `profiling` (the server's, or a SET's text) may turn it on. A session
/// that profiles lists its statements in `SHOW PROFILES` and `information_schema.PROFILING`:
/// a hit would be missing there, and qcache's own statements (read-backs, the identity ask,
/// the diagnostics resetter) would show. Fails closed as [`auto_is_null_on`] does: only a
/// value that certainly means off is off (`DEFAULT` is the global's, `@v` unknown).
pub fn profiles(value: Option<&str>) -> bool {
    auto_is_null_on(value)
}

/// Whether the server, by the session context it reported (`(name, value)` pairs, as for
/// [`server_context`]), profiles the session's statements ([`profiles`]); a server without
/// the variable profiles nothing.
pub fn profiled(pairs: &[(&str, Option<&str>)]) -> bool {
    pairs.iter().any(|(n, v)| is_profiling(n) && profiles(*v))
}

/// What the server records of a session's statements where the session can read it back: its
/// optimizer trace, its profiles. While either is on, qcache serves the session nothing and
/// sends it no statement of its own: what the client reads there must be its own statements,
/// each run by the server, as directly (`Recorders::quiet`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recorders {
    pub optimizer_trace: bool,
    pub profiling: bool,
}

impl Recorders {
    /// Whether qcache must keep quiet: no hit, no private statement.
    pub fn quiet(self) -> bool {
        self.optimizer_trace || self.profiling
    }

    /// Why a read of a quiet session is not cached; None when it is not quiet.
    pub fn reason(self) -> Option<Reason> {
        if self.optimizer_trace {
            Some(Reason::OptimizerTrace)
        } else if self.profiling {
            Some(Reason::Profiling)
        } else {
            None
        }
    }

    /// After a session-scope SET of `name` to `value` (its text; a literal or not), before any
    /// read-back: a read-back is a SELECT, which a trace or the profiles would show, so what
    /// the SET turned on is known from its text alone, failing closed: `optimizer_trace` is
    /// on unless the value says `enabled=off` ([`traces_optimizer`]: a partial value such as
    /// `'one_line=on'`, `DEFAULT` and `@v` may leave it on), `profiling` unless it is a
    /// literal off ([`profiles`]). Other names change nothing.
    pub fn after_set(self, name: &str, value: &str) -> Recorders {
        let mut r = self;
        if is_optimizer_trace(name) {
            r.optimizer_trace = traces_optimizer(value);
        }
        if is_profiling(name) {
            r.profiling = profiles(Some(value));
        }
        r
    }
}

/// Whether a variable qcache would read back after a SET is among those the connect read
/// reports (`read_server_context`), so that marking the context stale reads it again as
/// well as the read-back would have: what a quiet session ([`Recorders::quiet`]) does
/// instead of reading back. Any other name, not read again there, leaves the session
/// untracked.
pub fn read_at_connect(name: &str, mariadb: bool) -> bool {
    let bare = name
        .rsplit('.')
        .next()
        .unwrap_or(name)
        .trim_start_matches('@');
    key_variables(mariadb)
        .iter()
        .chain(optional_key_variables(mariadb))
        .any(|v| v.eq_ignore_ascii_case(bare) || v.eq_ignore_ascii_case(key_name(bare)))
}

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
    if PARTIAL_SETS.contains(&name) {
        return Assignment::ReadBackNamed;
    }
    if is_isolation(name) {
        return match isolation_level(value) {
            Some(level) => Assignment::Keyed {
                name: ISOLATION_KEY,
                value: level,
            },
            None if read_back_sql(&[name]).is_some() => Assignment::ReadBackNamed,
            None => Assignment::Lost,
        };
    }
    match name {
        // Keyed by text as before (the privileges policy owns roles); `SET TRANSACTION`'s
        // value is keywords only (its isolation level: [`transaction_isolation_level`]).
        "role" | "transaction" => Assignment::Literal,
        _ if is_literal(value) => Assignment::Literal,
        _ if read_back_sql(&[name]).is_some() => Assignment::ReadBackNamed,
        _ => Assignment::Lost,
    }
}

/// The key's entries for a session-scope assignment that [`assignment`] found `Literal` or
/// `Keyed`, to record in order (an entry replaces the one of its name): the value under
/// [`key_name`], and for `SET SESSION TRANSACTION ISOLATION LEVEL …` also the level under
/// [`ISOLATION_KEY`], as `SET tx_isolation` records it. None when that level must be read
/// back from the server instead.
pub fn key_entries(
    name: &str,
    value: &str,
    next_transaction_only: bool,
) -> Option<Vec<(String, String)>> {
    if let Assignment::Keyed { name, value } = assignment(name, value, false) {
        return Some(vec![(name.to_string(), value.to_string())]);
    }
    let mut out = vec![(key_name(name).to_string(), value.to_string())];
    if name == "transaction"
        && !next_transaction_only
        && value.to_ascii_uppercase().contains("ISOLATION")
    {
        out.push((
            ISOLATION_KEY.to_string(),
            transaction_isolation_level(value)?.to_string(),
        ));
    }
    Some(out)
}

/// Variables whose value is an instant, read under the session's `time_zone`: MariaDB reads
/// `SET system_versioning_asof = '2020-01-01 03:00:00'` under the zone the session had when
/// the statement began (every value of a SET is read before any is assigned, so `SET
/// time_zone = '+05:00', system_versioning_asof = '…'` reads it under the zone before) and
/// keeps the instant, which `SELECT @@system_versioning_asof` shows under the zone of the
/// moment. So the same text set under two zones is two instants (five hours apart under
/// `+00:00` and `+05:00`), and a session that moves to another zone after the SET reads
/// history as of its old instant: neither the text nor the zone the key holds now tells it.
pub const ZONED: &[&str] = &["system_versioning_asof"];

/// The key's value of `name` set to (or read back as, when [`instant_shown`]) `value` while
/// the session's `time_zone`, as the key holds it, was `zone` (None: the zone the connect
/// read reported, which the server context holds for as long as this entry lives, since a
/// new read of the connect's settings replaces both, or, when it did not report the name,
/// makes the entry [`instant_unknown`]): for a [`ZONED`] name the value names that zone
/// too, so that only the same instant shares a key. Other names: `value` as given.
pub fn zoned_value(name: &str, value: String, zone: Option<&str>) -> String {
    match zone {
        Some(z) if ZONED.contains(&key_name(name)) => format!("{value} under time_zone {z}"),
        _ => value,
    }
}

/// Whether the key can tell the instant the server named by showing `value` for `name` (the
/// connect's read, a read-back) under the session's `time_zone` at the read, `zone` (as
/// read with it, or as the key holds it; None: not known). Under a fixed offset (`+02:00`)
/// the text names one instant. Under a zone with daylight saving time (a named one, or
/// `SYSTEM`, whose rules are the server host's) the autumn's repeated hour writes two
/// instants as one text (00:30 and 01:30 UTC are both 02:30 in Europe/Berlin on
/// 2020-10-25), and nothing the same SELECT can read tells them apart: `UNIX_TIMESTAMP()`
/// of it converts the text back under the same zone (one of the two, alike for both), and
/// `SET STATEMENT time_zone = … FOR` would hide the session's own zone from the read. False
/// then: the value is keyed as one of its own ([`instant_unknown`]). Names not [`ZONED`],
/// `DEFAULT` (no instant) and NULL name no instant.
pub fn instant_shown(name: &str, value: &str, zone: Option<&str>) -> bool {
    !ZONED.contains(&key_name(name))
        || value.eq_ignore_ascii_case("DEFAULT")
        || value == "\u{0}NULL"
        || zone.is_some_and(fixed_offset)
}

/// A time_zone value (as read, or a SET's literal) that is an offset from UTC, which no
/// daylight saving time moves: `+05:00`, `'-3:30'`.
fn fixed_offset(zone: &str) -> bool {
    let z = zone.trim();
    let z = ['\'', '"']
        .iter()
        .find_map(|q| z.strip_prefix(*q)?.strip_suffix(*q))
        .unwrap_or(z);
    let Some(rest) = z.strip_prefix(['+', '-']) else {
        return false;
    };
    let Some((h, m)) = rest.split_once(':') else {
        return false;
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    (1..=2).contains(&h.len()) && m.len() == 2 && digits(h) && digits(m)
}

/// The key's value of a [`ZONED`] name whose instant it cannot tell ([`instant_shown`],
/// or a value set under a zone the key no longer holds): `value` marked with `token`, which
/// the caller makes unique (qcache instances share L2), so that no other session shares
/// it: the session's entries under it are its own until the value is set or read again.
pub fn instant_unknown(value: &str, token: u64) -> String {
    format!("{value} at an instant the key cannot tell #{token:016x}")
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

/// The variable under which `WHERE pk IS NULL` on an AUTO_INCREMENT key finds the row the
/// session inserted last (its own `LAST_INSERT_ID()`, once, right after the INSERT): no
/// result read under it may be stored or served, whatever the key says.
pub const AUTO_IS_NULL: &str = "sql_auto_is_null";

/// Whether a value of [`AUTO_IS_NULL`] (the server's, or a SET's literal text) may turn it
/// on: only a value that certainly means off is off (fail closed; None, a NULL, is on).
pub fn auto_is_null_on(value: Option<&str>) -> bool {
    let Some(v) = value else {
        return true;
    };
    let v = v.trim();
    let v = v
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .or_else(|| v.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
        .unwrap_or(v);
    !(v == "0" || v.eq_ignore_ascii_case("off") || v.eq_ignore_ascii_case("false"))
}

/// Whether the session reads under [`AUTO_IS_NULL`]: by its own last SET of it (`set`, the
/// value as the key holds it), else as it inherited it at connect.
pub fn session_auto_is_null(set: Option<&str>, inherited: bool) -> bool {
    match set {
        Some(v) => auto_is_null_on(Some(v)),
        None => inherited,
    }
}

/// Whether a `SET STATEMENT a = x, … FOR <read>` may be cached, given its assignments
/// (names as `analysis::analyze_set` gives them; None when they could not be read). The
/// statement's text is its key, so only values its text decides may be keyed: a literal
/// (`DEFAULT` is the global's value now, `@v` a user variable's, `@@GLOBAL.x` and any
/// expression are read when it runs). And none may make the read one that is never cached
/// (`sql_auto_is_null` on, READ UNCOMMITTED).
pub fn statement_settings(assignments: Option<&[(String, String)]>) -> Result<(), Reason> {
    let Some(assignments) = assignments else {
        return Err(Reason::StatementSettings);
    };
    for (name, value) in assignments {
        if name.starts_with('@') || !is_literal(value) {
            return Err(Reason::StatementSettings);
        }
        if name == AUTO_IS_NULL && auto_is_null_on(Some(value)) {
            return Err(Reason::AutoIsNull);
        }
        if is_isolation(name) && isolation_level(value).is_none_or(reads_uncommitted) {
            return Err(Reason::ReadUncommitted);
        }
        // Traced for this statement: the trace must show it, so the server runs it.
        if is_optimizer_trace(name) && traces_optimizer(value) {
            return Err(Reason::OptimizerTrace);
        }
    }
    Ok(())
}

/// What the catalog knows of the triggers a write may fire (`Catalog::write_triggers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteTriggers {
    /// Every table it writes is known, and none has a trigger.
    None,
    /// A table it writes (or its triggers or cascades write) has a trigger.
    Some,
    /// qcache cannot tell: an unknown table or write, no catalog, a reload under way.
    Unknown,
}

/// Whether the session's settings must be read again (before its next cacheable read)
/// after a write, whether or not the write succeeded: a trigger runs in the writer's session
/// and may `SET` any of its variables (`lc_time_names`, `sql_select_limit`, …), which no
/// statement text shows, and a variable keeps the value even when the statement then
/// fails. Fail closed: only a write the catalog vouches fires no trigger keeps the context
/// (ordinary writes pay no round trip).
pub fn context_stale_after(write: WriteTriggers) -> bool {
    write != WriteTriggers::None
}

/// Whether an isolation level's text (`READ-UNCOMMITTED` from the server,
/// `ISOLATION LEVEL READ UNCOMMITTED` from a SET TRANSACTION) lets the session read
/// uncommitted rows.
pub fn reads_uncommitted(value: &str) -> bool {
    let v = value.to_ascii_uppercase();
    v.contains("UNCOMMITTED")
}

/// Whether an isolation level's value (any spelling the server or a SET uses) is
/// SERIALIZABLE, under which InnoDB turns a transaction's plain SELECTs into locking reads.
pub fn serializable(value: &str) -> bool {
    let v = value.to_ascii_uppercase();
    v.contains("SERIALIZABLE") || v.trim().trim_matches(|c| c == '\'' || c == '"') == "3"
}

/// Whether an assignment names the session's isolation level.
pub fn is_isolation(name: &str) -> bool {
    matches!(name, "tx_isolation" | "transaction_isolation")
}

/// The name the key holds the session's isolation level under, set by any of its names or
/// by `SET SESSION TRANSACTION ISOLATION LEVEL …`.
pub const ISOLATION_KEY: &str = "tx_isolation";

/// The isolation variable every version of the flavour has (MySQL 8 dropped `tx_isolation`),
/// for reading the level back.
pub fn isolation_variable(mariadb: bool) -> &'static str {
    if mariadb {
        "tx_isolation"
    } else {
        "transaction_isolation"
    }
}

/// The name the key holds an assignment to `name` under: names of one variable share one
/// (MariaDB 11.1 and MySQL call `tx_isolation` `transaction_isolation` and `tx_read_only`
/// `transaction_read_only`, and keep both), so that whichever name a session used last
/// decides its key.
pub fn key_name(name: &str) -> &str {
    match name {
        "transaction_isolation" => ISOLATION_KEY,
        "transaction_read_only" => "tx_read_only",
        // MariaDB's other name of `tmp_table_size`.
        "tmp_memory_table_size" => "tmp_table_size",
        n => n,
    }
}

/// The server's spelling of the isolation level a literal value sets (the dashed name in
/// any case, quoted or not, or the enum's index); None for a value qcache does not
/// recognise (read back from the server instead).
pub fn isolation_level(value: &str) -> Option<&'static str> {
    let v = value.trim();
    let v = v
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .or_else(|| v.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
        .unwrap_or(v);
    const LEVELS: [&str; 4] = [
        "READ-UNCOMMITTED",
        "READ-COMMITTED",
        "REPEATABLE-READ",
        "SERIALIZABLE",
    ];
    if let Ok(i) = v.parse::<usize>() {
        return LEVELS.get(i).copied();
    }
    LEVELS.iter().copied().find(|l| l.eq_ignore_ascii_case(v))
}

/// The isolation level a session-scope `SET [SESSION] TRANSACTION …` sets (its text after
/// `TRANSACTION`: `ISOLATION LEVEL READ COMMITTED, READ ONLY`); None when it sets none or
/// qcache cannot read it.
pub fn transaction_isolation_level(value: &str) -> Option<&'static str> {
    let words: Vec<String> = value
        .split(|c: char| c.is_ascii_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect();
    let at = words
        .windows(2)
        .position(|w| w[0] == "ISOLATION" && w[1] == "LEVEL")?;
    let level = match words.get(at + 2..)? {
        [a, b, ..] if a == "READ" && (b == "UNCOMMITTED" || b == "COMMITTED") => {
            format!("READ-{b}")
        }
        [a, b, ..] if a == "REPEATABLE" && b == "READ" => "REPEATABLE-READ".to_string(),
        [a, ..] if a == "SERIALIZABLE" => "SERIALIZABLE".to_string(),
        _ => return None,
    };
    isolation_level(&level)
}

/// Whether the session has no default database any more after it dropped `dropped`
/// (lower-cased by the parser): when it may have been the current one. Compared without case, because with
/// `lower_case_table_names=0` `RT` and `rt` differ but qcache does not know which setting the
/// server has; forgetting the database only stops unqualified reads from being cached.
pub fn drop_forgets_db(current: Option<&str>, dropped: &str) -> bool {
    current.is_some_and(|cur| cur.eq_ignore_ascii_case(dropped))
}

/// What a prepared statement carries from its COM_STMT_PREPARE: the server parses it then,
/// in the default database and under the parsing rules in force (sql_mode's
/// `PIPES_AS_CONCAT`, `ANSI_QUOTES`, `NO_BACKSLASH_ESCAPES`, `IGNORE_SPACE`, …, and the
/// character set of its literals), and later executes use what it parsed whatever the
/// session says by then. Every session setting counts here, as if baked at PREPARE, except
/// [`EXECUTE_TIME`]; all of them are in each execute's key as the session has them then.
pub fn prepare_context(
    db: Option<&str>,
    charset: u8,
    server_ctx: u64,
    vars: &std::collections::BTreeMap<String, String>,
) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(b"d");
    if let Some(db) = db {
        h.update(db.as_bytes());
    }
    h.update(&[0, charset]);
    h.update(&server_ctx.to_le_bytes());
    for (k, v) in vars
        .iter()
        .filter(|(k, _)| !EXECUTE_TIME.contains(&k.as_str()))
    {
        h.update(k.as_bytes());
        h.update(&[0]);
        h.update(v.as_bytes());
        h.update(&[0]);
    }
    h.digest()
}

/// What the bytes of a text's literals are read as: the character set the session
/// connected with and every character set or collation it set since (as read back: the
/// names of [`CHARSET_VARIABLES`]). Two equal values: a text reads as it read
/// (`policy::diagnostics::CostContext`).
pub fn literal_charset(charset: u8, vars: &std::collections::BTreeMap<String, String>) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&[charset]);
    for (k, v) in vars
        .iter()
        .filter(|(k, _)| k.starts_with("character_set") || k.starts_with("collation"))
    {
        h.update(k.as_bytes());
        h.update(&[0]);
        h.update(v.as_bytes());
        h.update(&[0]);
    }
    h.digest()
}

/// Capabilities that change the bytes of a result, and so are part of the fingerprint.
pub const RESULT_CAPS: u32 = crate::protocol::packets::cap::DEPRECATE_EOF
    | crate::protocol::packets::cap::PROTOCOL_41
    | crate::protocol::packets::cap::MULTI_RESULTS
    | crate::protocol::packets::cap::PS_MULTI_RESULTS
    | crate::protocol::packets::cap::SESSION_TRACK
    | crate::protocol::packets::cap::LONG_PASSWORD;

/// What a session's context fingerprint covers, borrowed from its state: who it is (unless
/// entries are shared between users), its privilege generation, default database, the
/// capabilities and character set that shape a result's bytes, the server's context, the
/// settings under which nothing may be stored, and its keyed variables.
#[derive(Debug, Clone, Copy)]
pub struct Fingerprint<'a> {
    pub user: &'a str,
    /// `CURRENT_USER()` and `CURRENT_ROLE()`, once asked.
    pub identity: Option<(&'a str, Option<&'a str>)>,
    /// `cache.shared_between_users`: who the session is stays out of the key.
    pub shared_users: bool,
    pub priv_generation: u64,
    /// Non-zero: a key space of the session's own.
    pub priv_private: u64,
    pub db: Option<&'a str>,
    pub caps: u32,
    pub mariadb_caps: u32,
    pub charset: u8,
    pub server_ctx: u64,
    /// READ UNCOMMITTED: never served (see the marks in [`fingerprint`]).
    pub dirty_reads: bool,
    pub auto_is_null: bool,
    pub optimizer_traced: bool,
    /// Profiling on: never served either.
    pub profiling: bool,
    /// The keyed session variables; None leaves them out (the `ContextKeys` fault).
    pub vars: Option<&'a std::collections::BTreeMap<String, String>>,
}

/// The context fingerprint a session's keys are computed under: two sessions share entries
/// exactly when their fingerprints are equal. Its bytes are fixed: L2 shares entries between
/// qcache instances under it.
pub fn fingerprint(f: &Fingerprint<'_>) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    if !f.shared_users {
        h.update(b"u");
        h.update(f.user.as_bytes());
        h.update(&[0]);
        if let Some((account, role)) = f.identity {
            h.update(b"a");
            h.update(account.as_bytes());
            h.update(&[0]);
            h.update(b"r");
            if let Some(r) = role {
                h.update(r.as_bytes());
            }
            h.update(&[0]);
        }
    }
    h.update(b"p");
    h.update(&f.priv_generation.to_le_bytes());
    h.update(&f.priv_private.to_le_bytes());
    h.update(b"d");
    if let Some(db) = f.db {
        h.update(db.as_bytes());
    }
    h.update(&[0]);
    h.update(&(f.caps & RESULT_CAPS).to_le_bytes());
    h.update(&f.mariadb_caps.to_le_bytes());
    h.update(&[f.charset]);
    h.update(&f.server_ctx.to_le_bytes());
    if f.dirty_reads {
        // No session under this mark stores, so nothing is ever found under it: READ
        // UNCOMMITTED sessions are never served, at no cost to the hit path.
        h.update(b"\0read-uncommitted");
    }
    if f.auto_is_null {
        // The same for sql_auto_is_null: no session under it stores.
        h.update(b"\0auto-is-null");
    }
    if f.optimizer_traced {
        // Likewise: a session that traces the optimizer is never served.
        h.update(b"\0optimizer-trace");
    }
    if f.profiling {
        h.update(b"\0profiling");
    }
    for (k, v) in f.vars.into_iter().flatten() {
        h.update(k.as_bytes());
        h.update(&[0]);
        h.update(v.as_bytes());
        h.update(&[0]);
    }
    h.digest()
}

/// Session variables a prepared statement reads when it executes, not when it is prepared:
/// seen on MariaDB 10.11, a statement prepared under one value answers as a new one would
/// under the value at EXECUTE (decimals of `id / 3`, `FROM_UNIXTIME(0)`, `MONTHNAME`). The
/// execute's key holds them; a change since the prepare does not stop caching. A closed
/// list: any other variable counts as read at PREPARE.
pub const EXECUTE_TIME: &[&str] = &["div_precision_increment", "lc_time_names", "time_zone"];

/// Whether an execute of a statement prepared under context `at_prepare` (see
/// [`prepare_context`]) may be keyed and analysed with the session as it is `now`. When the
/// context moved, neither the session's key nor its default database describes what the
/// server runs: the read is not cached, and a write invalidates as an unknown write in the
/// database it was prepared in (`Session::stmt_execute`).
pub fn prepared_context_moved(at_prepare: u64, now: u64) -> Option<crate::policy::Reason> {
    (at_prepare != now).then_some(crate::policy::Reason::PreparedContextMoved)
}

#[cfg(test)]
mod tests {
    use super::{fingerprint, Fingerprint, RESULT_CAPS};
    use super::{is_optimizer_trace, optimizer_traced, traces_optimizer};
    use crate::protocol::packets::cap;
    use std::collections::BTreeMap;

    #[test]
    fn a_session_that_traces_the_optimizer_is_not_served() {
        for (value, traces, why) in [
            ("enabled=off", false, "MariaDB's default"),
            ("enabled=off,one_line=off", false, "MySQL's default"),
            ("ENABLED=OFF", false, "any case"),
            ("enabled=on", true, "on"),
            ("enabled=on,one_line=off", true, "MySQL, on"),
            ("", true, "unreadable: fails closed"),
            ("\u{0}NULL", true, "NULL: fails closed"),
        ] {
            assert_eq!(traces_optimizer(value), traces, "{why}: {value:?}");
        }
        for (pairs, traced, why) in [
            (
                vec![
                    ("sql_mode", Some("")),
                    ("optimizer_trace", Some("enabled=on")),
                ],
                true,
                "inherited from the global",
            ),
            (vec![("optimizer_trace", Some("enabled=off"))], false, "off"),
            (vec![("sql_mode", Some(""))], false, "a server without it"),
            (
                vec![("@@session.OPTIMIZER_TRACE", Some("enabled=on"))],
                true,
                "any spelling",
            ),
        ] {
            assert_eq!(optimizer_traced(&pairs), traced, "{why}");
        }
        assert!(is_optimizer_trace("optimizer_trace") && !is_optimizer_trace("optimizer_switch"));
    }

    /// One row per SET that may change what the server records of a session's statements:
    /// the recorders before, the assignment, the recorders after (known from the text alone).
    #[test]
    fn recorders_after_a_set() {
        use super::Recorders;
        let off = Recorders::default();
        let traced = Recorders {
            optimizer_trace: true,
            profiling: false,
        };
        let profiled = Recorders {
            optimizer_trace: false,
            profiling: true,
        };
        for (before, name, value, after, why) in [
            (off, "optimizer_trace", "'enabled=on'", traced, "turned on"),
            (
                traced,
                "optimizer_trace",
                "'enabled=off'",
                off,
                "turned off",
            ),
            (
                off,
                "optimizer_trace",
                "'one_line=on'",
                traced,
                "partial: may be on",
            ),
            (
                off,
                "optimizer_trace",
                "DEFAULT",
                traced,
                "the global's: may be on",
            ),
            (
                off,
                "@@session.OPTIMIZER_TRACE",
                "@v",
                traced,
                "unknown: on",
            ),
            (off, "profiling", "1", profiled, "turned on"),
            (off, "profiling", "ON", profiled, "turned on"),
            (profiled, "profiling", "0", off, "turned off"),
            (profiled, "profiling", "'OFF'", off, "turned off, quoted"),
            (profiled, "profiling", "@p", profiled, "unknown: on"),
            (
                off,
                "profiling",
                "DEFAULT",
                profiled,
                "the global's: may be on",
            ),
            (traced, "sql_mode", "''", traced, "another name: unchanged"),
            (
                profiled,
                "names",
                "latin1",
                profiled,
                "another name: unchanged",
            ),
        ] {
            let got = before.after_set(name, value);
            assert_eq!(got, after, "{why}: {name} = {value}");
            assert_eq!(got.quiet(), after != off, "{why}");
            assert_eq!(got.reason().is_some(), got.quiet(), "{why}");
        }
    }

    #[test]
    fn profiling_as_the_server_reports_it() {
        use super::{profiled, read_at_connect};
        for (pairs, want) in [
            (vec![("profiling", Some("1"))], true),
            (vec![("profiling", Some("0"))], false),
            (vec![("profiling", Some("OFF"))], false),
            (vec![("profiling", None)], true),
            (vec![("sql_mode", Some("1"))], false),
        ] {
            assert_eq!(profiled(&pairs), want, "{pairs:?}");
        }
        for (name, want) in [
            ("character_set_client", true),
            ("optimizer_trace", true),
            ("profiling", true),
            ("sql_mode", true),
            ("@@session.sql_mode", true),
            ("transaction_isolation", true),
            ("foreign_key_checks", false),
        ] {
            assert_eq!(read_at_connect(name, true), want, "{name}");
        }
    }

    use super::*;

    /// One row per change between PREPARE and EXECUTE: whether the statement's context moved.
    #[test]
    fn what_moves_a_prepared_statements_context() {
        use std::collections::BTreeMap;
        let vars = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let base = prepare_context(Some("a"), 45, 7, &vars(&[]));
        let rows: &[(&str, u64, bool)] = &[
            (
                "nothing",
                prepare_context(Some("a"), 45, 7, &vars(&[])),
                false,
            ),
            ("USE b", prepare_context(Some("b"), 45, 7, &vars(&[])), true),
            (
                "no database",
                prepare_context(None, 45, 7, &vars(&[])),
                true,
            ),
            ("names", prepare_context(Some("a"), 8, 7, &vars(&[])), true),
            (
                "server context",
                prepare_context(Some("a"), 45, 8, &vars(&[])),
                true,
            ),
            (
                "sql_mode (parse time)",
                prepare_context(Some("a"), 45, 7, &vars(&[("sql_mode", "ANSI_QUOTES")])),
                true,
            ),
            (
                "time_zone (read at execute)",
                prepare_context(Some("a"), 45, 7, &vars(&[("time_zone", "+01:00")])),
                false,
            ),
            (
                "div_precision_increment (read at execute)",
                prepare_context(Some("a"), 45, 7, &vars(&[("div_precision_increment", "7")])),
                false,
            ),
            (
                "lc_time_names (read at execute)",
                prepare_context(Some("a"), 45, 7, &vars(&[("lc_time_names", "de_DE")])),
                false,
            ),
            (
                "any other variable",
                prepare_context(Some("a"), 45, 7, &vars(&[("optimizer_switch", "x")])),
                true,
            ),
        ];
        for (what, now, moved) in rows {
            assert_eq!(
                prepared_context_moved(base, *now).is_some(),
                *moved,
                "{what}"
            );
        }
        assert_eq!(
            prepared_context_moved(base, base + 1),
            Some(crate::policy::Reason::PreparedContextMoved)
        );
    }

    #[test]
    fn writes_that_leave_the_context_unknown() {
        for (write, stale) in [
            (WriteTriggers::None, false),
            (WriteTriggers::Some, true),
            (WriteTriggers::Unknown, true),
        ] {
            assert_eq!(context_stale_after(write), stale, "{write:?}");
        }
    }

    /// One row per sql_auto_is_null value: whether reads under it may be cached.
    #[test]
    fn auto_is_null_values() {
        for (value, on) in [
            (Some("1"), true),
            (Some("ON"), true),
            (Some("'on'"), true),
            (Some("TRUE"), true),
            (Some("\u{0}NULL"), true),
            (None, true),
            (Some("2"), true),
            (Some("0"), false),
            (Some("OFF"), false),
            (Some("'off'"), false),
            (Some(" false "), false),
        ] {
            assert_eq!(auto_is_null_on(value), on, "{value:?}");
        }
        for (set, inherited, want) in [
            (None, false, false),
            (None, true, true),
            (Some("1"), false, true),
            (Some("0"), true, false),
        ] {
            assert_eq!(
                session_auto_is_null(set, inherited),
                want,
                "{set:?} {inherited}"
            );
        }
    }

    /// One row per `SET STATEMENT … FOR <read>`: may its read be cached by its text.
    #[test]
    fn statement_settings_rows() {
        let a = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for (pairs, want) in [
            (a(&[("sql_select_limit", "1")]), Ok(())),
            (
                a(&[("lc_time_names", "'de_DE'"), ("max_statement_time", "10")]),
                Ok(()),
            ),
            (a(&[("sql_auto_is_null", "0")]), Ok(())),
            (a(&[("tx_isolation", "'READ-COMMITTED'")]), Ok(())),
            (
                a(&[("sql_select_limit", "DEFAULT")]),
                Err(Reason::StatementSettings),
            ),
            (
                a(&[("sql_select_limit", "@n")]),
                Err(Reason::StatementSettings),
            ),
            (
                a(&[("sql_select_limit", "@@GLOBAL.sql_select_limit")]),
                Err(Reason::StatementSettings),
            ),
            (
                a(&[("sql_select_limit", "1 + 1")]),
                Err(Reason::StatementSettings),
            ),
            (
                a(&[
                    ("lc_time_names", "'de_DE'"),
                    ("sql_select_limit", "default"),
                ]),
                Err(Reason::StatementSettings),
            ),
            (a(&[("sql_auto_is_null", "1")]), Err(Reason::AutoIsNull)),
            (
                a(&[("optimizer_trace", "'enabled=on'")]),
                Err(Reason::OptimizerTrace),
            ),
            (
                a(&[("optimizer_trace", "'one_line=on'")]),
                Err(Reason::OptimizerTrace),
            ),
            (a(&[("optimizer_trace", "'enabled=off'")]), Ok(())),
            (a(&[("sql_auto_is_null", "ON")]), Err(Reason::AutoIsNull)),
            (
                a(&[("tx_isolation", "'READ-UNCOMMITTED'")]),
                Err(Reason::ReadUncommitted),
            ),
            (
                a(&[("tx_isolation", "'odd'")]),
                Err(Reason::ReadUncommitted),
            ),
        ] {
            assert_eq!(statement_settings(Some(&pairs)), want, "{pairs:?}");
        }
        assert_eq!(statement_settings(None), Err(Reason::StatementSettings));
    }

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

    /// An instant's text is keyed with the zone it was read under; other values as given.
    #[test]
    fn zoned_values_name_their_zone() {
        let at = "'2020-01-01 03:00:00'".to_string();
        let a = zoned_value("system_versioning_asof", at.clone(), Some("'+00:00'"));
        let b = zoned_value("system_versioning_asof", at.clone(), Some("'+05:00'"));
        assert_ne!(a, b, "one text, two zones: two instants");
        assert_ne!(a, at, "a zone the session set is named");
        assert_eq!(
            zoned_value("system_versioning_asof", at.clone(), None),
            at,
            "the connect's zone is the server context's"
        );
        assert_eq!(zoned_value("time_zone", at.clone(), Some("'+05:00'")), at);
        assert_eq!(zoned_value("sql_mode", at.clone(), Some("'+05:00'")), at);
    }

    /// Which shown values the key can tell the instant of: one row per zone and value.
    #[test]
    fn an_instant_shown_under_a_zone_with_dst_is_not_told() {
        let at = "2020-10-25 02:30:00.000000";
        let asof = "system_versioning_asof";
        let rows: &[(&str, &str, Option<&str>, bool)] = &[
            // (name, value, zone, told)
            (asof, at, Some("+02:00"), true),
            (asof, at, Some("'-3:30'"), true),
            (asof, at, Some("\"+05:00\""), true),
            (asof, at, Some("Europe/Berlin"), false),
            (asof, at, Some("'Europe/Berlin'"), false),
            (asof, at, Some("SYSTEM"), false),
            (asof, at, Some("+0200"), false),
            (asof, at, Some("+02:00:00"), false),
            (asof, at, Some("'+02:00"), false),
            (asof, at, Some("\u{0}NULL"), false),
            (asof, at, None, false),
            (asof, "DEFAULT", Some("Europe/Berlin"), true),
            (asof, "\u{0}NULL", None, true),
            ("time_zone", "Europe/Berlin", Some("Europe/Berlin"), true),
            ("sql_mode", at, None, true),
        ];
        for (name, value, zone, told) in rows {
            assert_eq!(
                instant_shown(name, value, *zone),
                *told,
                "{name} {value} {zone:?}"
            );
        }
        // Unknown instants are each their own.
        assert_ne!(instant_unknown(at, 1), instant_unknown(at, 2));
        assert_ne!(instant_unknown(at, 1), at);
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

    /// Folds session-scope SETs into the key's entries as `engine::settings::follow_set`
    /// does for literal values.
    fn keyed(sets: &[(&str, &str, bool)]) -> std::collections::BTreeMap<String, String> {
        let mut vars = std::collections::BTreeMap::new();
        for (name, value, next_only) in sets {
            match assignment(name, value, false) {
                Assignment::Literal | Assignment::Keyed { .. } => {
                    vars.extend(key_entries(name, value, *next_only).expect(name))
                }
                other => panic!("{name} = {value}: {other:?}"),
            }
        }
        vars
    }

    /// MariaDB 11.1 on (and MySQL) have `transaction_isolation` beside `tx_isolation`, and
    /// `SET SESSION TRANSACTION ISOLATION LEVEL` sets the same level: whichever comes last
    /// decides it, so the key must hold the level, not each name's last text.
    #[test]
    fn isolation_names_set_in_different_orders() {
        let rc = ("tx_isolation", "'READ-COMMITTED'", false);
        let ser = ("transaction_isolation", "'serializable'", false);
        let sess_rr = ("transaction", "ISOLATION LEVEL REPEATABLE READ", false);
        let next_ru = ("transaction", "ISOLATION LEVEL READ UNCOMMITTED", true);
        let level = |sets: &[(&str, &str, bool)]| keyed(sets).get(ISOLATION_KEY).cloned();
        assert_eq!(level(&[rc, ser]).as_deref(), Some("SERIALIZABLE"));
        assert_eq!(level(&[ser, rc]).as_deref(), Some("READ-COMMITTED"));
        assert_ne!(keyed(&[rc, ser]), keyed(&[ser, rc]));
        assert_eq!(level(&[rc, sess_rr]).as_deref(), Some("REPEATABLE-READ"));
        assert_eq!(level(&[sess_rr, rc]).as_deref(), Some("READ-COMMITTED"));
        assert_ne!(keyed(&[rc, sess_rr]), keyed(&[sess_rr, rc]));
        // The next transaction's level is not the session's.
        assert_eq!(level(&[rc, next_ru]).as_deref(), Some("READ-COMMITTED"));
        // The same level by any name and spelling is one key.
        assert_eq!(
            keyed(&[("tx_isolation", "1", false)]),
            keyed(&[("transaction_isolation", "read-committed", false)])
        );
        // So are the read-only flag's two names.
        assert_eq!(
            keyed(&[
                ("tx_read_only", "0", false),
                ("transaction_read_only", "1", false)
            ]),
            keyed(&[("transaction_read_only", "1", false)])
        );
        // A level qcache cannot read is read back, under the one name.
        assert_eq!(
            assignment("transaction_isolation", "@lvl", false),
            Assignment::ReadBackNamed
        );
        assert_eq!(key_name("transaction_isolation"), ISOLATION_KEY);
        assert_eq!(
            key_entries("transaction", "ISOLATION LEVEL SNAPSHOT", false),
            None,
            "unknown level: read back"
        );
        assert_eq!(isolation_variable(false), "transaction_isolation");
        for (v, want) in [
            ("'READ-UNCOMMITTED'", Some("READ-UNCOMMITTED")),
            ("\"repeatable-read\"", Some("REPEATABLE-READ")),
            ("3", Some("SERIALIZABLE")),
            ("4", None),
            ("READ COMMITTED", None),
            ("@x", None),
        ] {
            assert_eq!(isolation_level(v), want, "{v}");
        }
        for (v, want) in [
            ("ISOLATION LEVEL READ COMMITTED", Some("READ-COMMITTED")),
            ("ISOLATION LEVEL SERIALIZABLE", Some("SERIALIZABLE")),
            (
                "READ ONLY, ISOLATION LEVEL read uncommitted",
                Some("READ-UNCOMMITTED"),
            ),
            (
                "ISOLATION LEVEL REPEATABLE READ, READ WRITE",
                Some("REPEATABLE-READ"),
            ),
            ("READ ONLY", None),
        ] {
            assert_eq!(transaction_isolation_level(v), want, "{v}");
        }
    }

    /// A session that inherited READ UNCOMMITTED is seen whichever isolation name the server
    /// reports it under, and the optional names are part of the context.
    #[test]
    fn pings_before_the_shortest_idle_timer_runs_out() {
        use std::time::Duration;
        type Pairs<'a> = &'a [(&'a str, Option<&'a str>)];
        let rows: &[(Pairs, Duration, &str)] = &[
            (
                &[("wait_timeout", Some("28800"))],
                Duration::from_secs(14400),
                "the default",
            ),
            (
                &[("wait_timeout", Some("2"))],
                Duration::from_secs(1),
                "a pool's short timeout",
            ),
            (
                &[
                    ("wait_timeout", Some("600")),
                    ("idle_transaction_timeout", Some("4")),
                ],
                Duration::from_secs(2),
                "the shortest timer",
            ),
            (
                &[
                    ("wait_timeout", Some("10")),
                    ("idle_write_transaction_timeout", Some("0")),
                ],
                Duration::from_secs(5),
                "0 is off",
            ),
            (
                &[("wait_timeout", None)],
                Duration::from_millis(500),
                "unreadable: 1 s",
            ),
            (
                &[("wait_timeout", Some("0.1"))],
                Duration::from_millis(100),
                "at least 100 ms",
            ),
            (
                &[("time_zone", Some("SYSTEM"))],
                Duration::from_secs(3600),
                "no timer read",
            ),
        ];
        for (pairs, want, why) in rows {
            assert_eq!(keep_alive_after(pairs), *want, "{why}");
        }
        assert_eq!(
            server_context(&[("sql_mode", Some("")), ("wait_timeout", Some("2"))]),
            server_context(&[("sql_mode", Some("")), ("wait_timeout", Some("28800"))]),
            "wait_timeout is read, not keyed"
        );
    }

    #[test]
    fn which_settings_keep_begin_and_commit_on_the_server() {
        let rows: &[(&str, Option<&str>, bool)] = &[
            ("completion_type", Some("NO_CHAIN"), false),
            ("completion_type", Some("0"), false),
            ("completion_type", Some("CHAIN"), true),
            ("completion_type", Some("RELEASE"), true),
            ("completion_type", Some("1"), true),
            ("completion_type", None, true),
            ("idle_transaction_timeout", Some("0"), false),
            ("idle_transaction_timeout", Some("1"), true),
            ("idle_readonly_transaction_timeout", Some("30"), true),
            ("idle_write_transaction_timeout", Some("0"), false),
            ("time_zone", Some("+01:00"), false),
            ("tx_read_only", Some("0"), false),
            ("tx_read_only", Some("OFF"), false),
            ("tx_read_only", Some("1"), true),
            ("transaction_read_only", Some("ON"), true),
        ];
        for (name, value, want) in rows {
            assert_eq!(
                begin_needs_server(&[(name, *value)]),
                *want,
                "{name}={value:?}"
            );
        }
    }

    #[test]
    fn server_context_at_connect() {
        let (a, ru) = server_context(&[
            ("sql_mode", Some("")),
            ("tx_isolation", Some("READ-COMMITTED")),
        ]);
        assert!(!ru && a != 0);
        let (_, ru) = server_context(&[
            ("tx_isolation", Some("REPEATABLE-READ")),
            ("transaction_isolation", Some("READ-UNCOMMITTED")),
        ]);
        assert!(ru);
        // note_verbosity (and character_set_collations) inherited differently: other keys.
        let nv = |v| server_context(&[("sql_mode", Some("")), ("note_verbosity", Some(v))]).0;
        assert_ne!(nv("basic,explain"), nv("basic,explain,unusable_keys"));
        let cc = |v| server_context(&[("character_set_collations", Some(v))]).0;
        assert_ne!(cc(""), cc("utf8mb4=uca1400_ai_ci"));
        // A NULL is not an empty string.
        assert_ne!(
            server_context(&[("time_zone", None)]).0,
            server_context(&[("time_zone", Some(""))]).0
        );
    }

    /// The optional tier: asked without an error, read back in the list's order whatever
    /// order and case the server answers in; a server without a name simply lacks its row.
    #[test]
    fn optional_variables() {
        let opt = optional_key_variables(true);
        for v in [
            "note_verbosity",
            "transaction_isolation",
            "character_set_collations",
        ] {
            assert!(opt.contains(&v), "{v}");
            assert!(
                !key_variables(true).contains(&v),
                "{v} would fail old servers' read"
            );
        }
        assert!(optional_key_variables(false).is_empty());
        assert_eq!(
            probe_sql(&["note_verbosity", "character_set_collations"]).as_deref(),
            Some(
                "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES \
                 WHERE VARIABLE_NAME IN ('NOTE_VERBOSITY', 'CHARACTER_SET_COLLATIONS')"
            )
        );
        assert_eq!(probe_sql(&[]), None);
        assert_eq!(probe_sql(&["x'; DROP"]), None);
        let row = |n: &str, v: Option<&str>| vec![Some(n.to_string()), v.map(str::to_string)];
        // A 10.11 server: note_verbosity only.
        assert_eq!(
            probed(opt, &[row("NOTE_VERBOSITY", Some("basic,explain"))]),
            vec![("note_verbosity", Some("basic,explain".to_string()))]
        );
        // An 11.2 server, rows in another order.
        let all = probed(
            opt,
            &[
                row("CHARACTER_SET_COLLATIONS", Some("")),
                row("TRANSACTION_ISOLATION", Some("REPEATABLE-READ")),
                row("NOTE_VERBOSITY", None),
            ],
        );
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, opt[..3]);
        assert_eq!(all[0].1, None);
        // A 10.6.15 server: none.
        assert!(probed(opt, &[]).is_empty());
        // character_set_collations is keyed by its literal, read back otherwise.
        assert_eq!(
            assignment("character_set_collations", "'utf8mb4=uca1400_ai_ci'", false),
            Assignment::Literal
        );
        assert_eq!(
            assignment("character_set_collations", "DEFAULT", false),
            Assignment::ReadBackNamed
        );
        assert_eq!(
            assignment("note_verbosity", "DEFAULT", false),
            Assignment::ReadBackNamed
        );
    }

    /// One row per setting that decides the order of an unordered result (row order is
    /// data) or whether a read fails: (name, MariaDB reads it at connect, MySQL does), in the
    /// fixed list or the optional tier.
    #[test]
    fn plan_and_outcome_variables_are_context() {
        let has = |mariadb: bool, n: &str| {
            key_variables(mariadb).contains(&n) || optional_key_variables(mariadb).contains(&n)
        };
        for (name, mariadb, mysql) in [
            ("optimizer_switch", true, true),
            ("optimizer_search_depth", true, true),
            ("optimizer_prune_level", true, true),
            ("eq_range_index_dive_limit", true, true),
            ("join_buffer_size", true, true),
            ("sort_buffer_size", true, true),
            ("max_seeks_for_key", true, true),
            ("tmp_table_size", true, true),
            ("max_heap_table_size", true, true),
            ("max_allowed_packet", true, true),
            ("max_join_size", true, true),
            ("sql_big_selects", true, true),
            ("sql_select_limit", true, true),
            ("big_tables", true, true),
            ("join_cache_level", true, false),
            ("join_buffer_space_limit", true, false),
            ("mrr_buffer_size", true, false),
            ("optimizer_use_condition_selectivity", true, false),
            ("optimizer_selectivity_sampling_limit", true, false),
            ("use_stat_tables", true, false),
            ("histogram_size", true, false),
            ("histogram_type", true, false),
            ("in_predicate_conversion_threshold", true, false),
            ("expensive_subquery_limit", true, false),
            ("rowid_merge_buff_size", true, false),
            ("max_length_for_sort_data", true, false),
            ("max_rowid_filter_size", true, false),
            ("optimizer_max_sel_arg_weight", true, false),
            ("optimizer_where_cost", true, false),
            ("max_statement_time", true, false),
            ("tmp_disk_table_size", true, false),
            ("max_session_mem_used", true, false),
            ("max_tmp_session_space_usage", true, false),
            ("max_execution_time", false, true),
            ("range_optimizer_max_mem_size", false, true),
        ] {
            assert_eq!(has(true, name), mariadb, "MariaDB: {name}");
            assert_eq!(has(false, name), mysql, "MySQL: {name}");
        }
        // No name in both tiers (the optional tier is read only where the fixed one is not).
        for m in [true, false] {
            for n in optional_key_variables(m) {
                assert!(!key_variables(m).contains(n), "{n}");
            }
            assert!(probe_sql(optional_key_variables(m)).is_some() || !m);
        }
    }

    /// A SET of optimizer_switch changes only the flags it names: never keyed by its text.
    /// Two names of one variable share one key entry.
    #[test]
    fn partial_and_aliased_sets() {
        for v in ["'mrr=off'", "'index_merge=on,mrr=off'", "DEFAULT", "@s"] {
            assert_eq!(
                assignment("optimizer_switch", v, false),
                Assignment::ReadBackNamed,
                "{v}"
            );
        }
        assert_eq!(
            assignment("optimizer_switch", "'mrr=off'", true),
            Assignment::Ignore
        );
        assert_eq!(key_name("tmp_memory_table_size"), "tmp_table_size");
        assert_eq!(
            keyed(&[
                ("tmp_table_size", "1048576", false),
                ("tmp_memory_table_size", "2097152", false)
            ]),
            keyed(&[("tmp_table_size", "2097152", false)])
        );
        assert_eq!(
            assignment("join_cache_level", "0", false),
            Assignment::Literal
        );
        assert_eq!(
            assignment("max_statement_time", "@t", false),
            Assignment::ReadBackNamed
        );
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

    fn base_fingerprint(vars: &BTreeMap<String, String>) -> Fingerprint<'_> {
        Fingerprint {
            user: "app",
            identity: Some(("app@%", Some("reader"))),
            shared_users: false,
            priv_generation: 7,
            priv_private: 0,
            db: Some("shop"),
            caps: RESULT_CAPS,
            mariadb_caps: 0,
            charset: 45,
            server_ctx: 99,
            dirty_reads: false,
            auto_is_null: false,
            optimizer_traced: false,
            profiling: false,
            vars: Some(vars),
        }
    }

    /// One row per thing the fingerprint covers: changing it gives another key space.
    #[test]
    fn every_covered_field_changes_the_fingerprint() {
        let vars = BTreeMap::from([("sql_mode".to_string(), "ANSI".to_string())]);
        let other = BTreeMap::from([("sql_mode".to_string(), "".to_string())]);
        let base = fingerprint(&base_fingerprint(&vars));
        type Edit = fn(&mut Fingerprint<'_>);
        let edits: &[(&str, Edit)] = &[
            ("user", |f| f.user = "other"),
            ("account", |f| {
                f.identity = Some(("app@localhost", Some("reader")))
            }),
            ("role", |f| f.identity = Some(("app@%", None))),
            ("identity not yet asked", |f| f.identity = None),
            ("privilege generation", |f| f.priv_generation = 8),
            ("private key space", |f| f.priv_private = 1),
            ("database", |f| f.db = Some("shop2")),
            ("no database", |f| f.db = None),
            ("result caps", |f| {
                f.caps = RESULT_CAPS & !cap::DEPRECATE_EOF
            }),
            ("mariadb caps", |f| f.mariadb_caps = 1 << 3),
            ("charset", |f| f.charset = 33),
            ("server context", |f| f.server_ctx = 100),
            ("read uncommitted", |f| f.dirty_reads = true),
            ("sql_auto_is_null", |f| f.auto_is_null = true),
            ("optimizer trace", |f| f.optimizer_traced = true),
            ("variables left out", |f| f.vars = None),
        ];
        for (what, edit) in edits {
            let mut f = base_fingerprint(&vars);
            edit(&mut f);
            assert_ne!(fingerprint(&f), base, "{what}");
        }
        let mut f = base_fingerprint(&vars);
        f.vars = Some(&other);
        assert_ne!(fingerprint(&f), base, "a variable's value");
    }

    /// Under `shared_between_users` who the session is stays out of the key; everything else
    /// still counts.
    #[test]
    fn shared_between_users_leaves_identity_out() {
        let vars = BTreeMap::new();
        let mut a = base_fingerprint(&vars);
        a.shared_users = true;
        let mut b = a;
        b.user = "other";
        b.identity = Some(("other@%", None));
        assert_eq!(fingerprint(&a), fingerprint(&b));
        b.identity = None;
        assert_eq!(fingerprint(&a), fingerprint(&b));
        b.db = Some("elsewhere");
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }

    /// Capabilities that do not change a result's bytes do not split the key space.
    #[test]
    fn only_result_shaping_caps_count() {
        let vars = BTreeMap::new();
        let base = fingerprint(&base_fingerprint(&vars));
        for extra in [
            cap::COMPRESS,
            cap::SSL,
            cap::CONNECT_WITH_DB,
            cap::MULTI_STATEMENTS,
            cap::PLUGIN_AUTH,
            cap::LOCAL_FILES,
        ] {
            let mut f = base_fingerprint(&vars);
            f.caps |= extra;
            assert_eq!(fingerprint(&f), base, "{extra:#x}");
        }
    }

    /// No variables and the variables left out are the same key space; the never-served
    /// marks differ from one another.
    #[test]
    fn empty_variables_and_the_never_served_marks() {
        let none = BTreeMap::new();
        let mut a = base_fingerprint(&none);
        let mut b = base_fingerprint(&none);
        b.vars = None;
        assert_eq!(fingerprint(&a), fingerprint(&b));
        a.dirty_reads = true;
        b.auto_is_null = true;
        let mut c = base_fingerprint(&none);
        c.optimizer_traced = true;
        let all = [fingerprint(&a), fingerprint(&b), fingerprint(&c)];
        assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2]);
    }

    /// The fingerprint's bytes, written out: L2 shares entries between instances under it,
    /// so a change here is a change of every key.
    #[test]
    fn fingerprint_bytes_are_fixed() {
        let vars = BTreeMap::from([("a".to_string(), "1".to_string())]);
        let mut f = base_fingerprint(&vars);
        f.dirty_reads = true;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for part in [
            &b"uapp\0aapp@%\0rreader\0p"[..],
            &7u64.to_le_bytes(),
            &0u64.to_le_bytes(),
            b"dshop\0",
            &RESULT_CAPS.to_le_bytes(),
            &0u32.to_le_bytes(),
            &[45],
            &99u64.to_le_bytes(),
            b"\0read-uncommitted",
            b"a\x001\0",
        ] {
            h.update(part);
        }
        assert_eq!(fingerprint(&f), h.digest());
    }

    fn assigned(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), "1".to_string()))
            .collect()
    }

    /// One row per SET: whether the idle timers must be read back after it.
    #[test]
    fn sets_that_may_change_idle_timers() {
        use super::set_may_change_idle_timers;
        let cases: &[(Option<&[&str]>, bool)] = &[
            (Some(&["wait_timeout"]), true),
            (Some(&["sql_mode", "idle_transaction_timeout"]), true),
            (Some(&["idle_write_transaction_timeout"]), true),
            (Some(&["sql_mode"]), false),
            (Some(&["@wait_timeout"]), false),
            (Some(&[]), false),
            // Unread: it may have set anything.
            (None, true),
        ];
        for (names, want) in cases {
            let a = names.map(assigned);
            assert_eq!(set_may_change_idle_timers(a.as_deref()), *want, "{names:?}");
        }
    }

    /// One row per SET: whether BEGIN must reach the server after it.
    #[test]
    fn sets_that_may_change_begins_answer() {
        use super::set_may_change_begin;
        let cases: &[(Option<&[&str]>, bool)] = &[
            (Some(&["session_track_transaction_info"]), true),
            (Some(&["session_track_state_change"]), true),
            (Some(&["transaction_read_only"]), true),
            (Some(&["tx_isolation"]), true),
            (Some(&["transaction"]), true),
            (Some(&["completion_type"]), true),
            (Some(&["idle_readonly_transaction_timeout"]), true),
            (Some(&["sql_mode", "time_zone"]), false),
            (Some(&["wait_timeout"]), false),
            (None, true),
        ];
        for (names, want) in cases {
            let a = names.map(assigned);
            assert_eq!(set_may_change_begin(a.as_deref()), *want, "{names:?}");
        }
    }

    /// Names in a client character set that is not UTF-8: one row per rule, (rule,
    /// character_set_client as read, statement bytes, whether the names are undecodable).
    #[test]
    fn names_in_client_charsets() {
        type Row<'a> = (&'a str, Option<&'a str>, &'a [u8], bool);
        let rows: &[Row] = &[
            (
                "latin1 é in a name",
                Some("latin1"),
                b"UPDATE caf\xe9 SET v = 2",
                true,
            ),
            ("backquoted", Some("latin1"), b"DELETE FROM `caf\xe9`", true),
            (
                "double-quoted (ANSI_QUOTES may make it a name)",
                Some("latin1"),
                b"SELECT v FROM \"caf\xe9\"",
                true,
            ),
            (
                "MSSQL's brackets",
                Some("latin1"),
                b"SELECT v FROM [caf\xe9]",
                true,
            ),
            (
                "GBK's backquote byte",
                Some("gbk"),
                b"SELECT `\x81` FROM t1 -- x` FROM t2",
                true,
            ),
            (
                "a string is no name",
                Some("latin1"),
                b"INSERT INTO t VALUES ('caf\xe9')",
                false,
            ),
            (
                "nor a comment",
                Some("latin1"),
                b"SELECT v FROM t -- caf\xe9",
                false,
            ),
            (
                "nor a user variable",
                Some("latin1"),
                b"SELECT @caf\xe9",
                false,
            ),
            ("ASCII names", Some("gbk"), b"SELECT id FROM t1", false),
            (
                "a UTF-8 client",
                Some("utf8mb4"),
                "UPDATE café SET v = 2".as_bytes(),
                false,
            ),
            (
                "utf8mb3, any case",
                Some("UTF8MB3"),
                "UPDATE café SET v = 2".as_bytes(),
                false,
            ),
            (
                "a client not read",
                None,
                "UPDATE café SET v = 2".as_bytes(),
                true,
            ),
        ];
        for (rule, client, sql, want) in rows {
            let utf8 = client_utf8(*client);
            assert_eq!(
                names_undecodable(utf8, Some("db"), sql),
                want.then_some(super::super::Reason::ClientCharsetNames),
                "{rule}"
            );
            let pairs = [("character_set_client", *client)];
            assert_eq!(client_not_utf8(&pairs), !utf8, "{rule}");
        }
        assert!(
            client_not_utf8(&[("sql_mode", Some(""))]),
            "absent: not known"
        );
        // A binlog event's client character set, by collation id.
        assert!(collation_utf8(45) && collation_utf8(33) && collation_utf8(224));
        assert!(!collation_utf8(8) && !collation_utf8(28) && !collation_utf8(0));
        let users = |u: &[&str]| u.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(accounts_undecodable(false, &users(&["jos\u{fffd}"])));
        assert!(!accounts_undecodable(true, &users(&["josé"])));
        assert!(!accounts_undecodable(false, &users(&["jose"])));
    }

    /// One row per read limit's value: free (the server's default), or a limit.
    #[test]
    fn read_limits() {
        for (name, value, want) in [
            ("max_join_size", Some("18446744073709551615"), false),
            ("max_join_size", Some("6"), true),
            ("sql_big_selects", Some("1"), false),
            ("sql_big_selects", Some("ON"), false),
            ("sql_big_selects", Some("0"), true),
            ("max_statement_time", Some("0.000000"), false),
            ("max_statement_time", Some("0.5"), true),
            ("max_execution_time", Some("0"), false),
            ("max_session_mem_used", Some("9223372036854775807"), false),
            ("max_session_mem_used", Some("8192"), true),
            ("tmp_disk_table_size", Some("18446744073709551615"), false),
            ("tmp_disk_table_size", None, true),
            ("sql_mode", Some("0"), false),
        ] {
            assert_eq!(reads_limited(&[(name, value)]), want, "{name}={value:?}");
        }
        assert!(is_read_limit("MAX_JOIN_SIZE") && !is_read_limit("sql_mode"));
    }

    /// One row per `character_set_results` value: ASCII text for numbers and dates, or not
    /// known to be.
    #[test]
    fn results_in_ascii() {
        for (value, want) in [
            (Some("utf8mb4"), true),
            (Some("'latin1'"), true),
            (Some("UTF8"), true),
            (Some("`sjis`"), true),
            (Some("binary"), true),
            (Some("filename"), false),
            (Some("'ucs2'"), false),
            (Some("utf16"), false),
            (Some("utf16le"), false),
            (Some("utf32"), false),
            (Some("DEFAULT"), false),
            (Some("\u{0}NULL"), false),
            (None, false),
        ] {
            assert_eq!(results_ascii(value), want, "{value:?}");
        }
    }

    /// One row per setting the read-back decides: a pair that turns it on, every other
    /// setting staying as the defaults leave it.
    #[test]
    fn what_a_read_back_decides() {
        use super::ReadBack;
        let defaults = ReadBack::of(&[("sql_mode", Some("STRICT_TRANS_TABLES"))]);
        assert!(!defaults.read_uncommitted && !defaults.serializable && !defaults.auto_is_null);
        assert!(!defaults.optimizer_traced && !defaults.select_limited);
        assert!(!defaults.begin_needs_server && !defaults.results_not_ascii);
        assert!(!defaults.reads_limited);
        type Check = fn(&ReadBack) -> bool;
        let rows: &[(&str, Option<&str>, Check)] = &[
            ("tx_isolation", Some("READ-UNCOMMITTED"), |r| {
                r.read_uncommitted
            }),
            ("transaction_isolation", Some("SERIALIZABLE"), |r| {
                r.serializable
            }),
            ("sql_auto_is_null", Some("1"), |r| r.auto_is_null),
            ("optimizer_trace", Some("enabled=on"), |r| {
                r.optimizer_traced
            }),
            ("sql_select_limit", Some("10"), |r| r.select_limited),
            ("character_set_results", Some("filename"), |r| {
                r.results_not_ascii
            }),
            ("completion_type", Some("CHAIN"), |r| r.begin_needs_server),
            ("wait_timeout", Some("4"), |r| {
                r.keep_alive_after == std::time::Duration::from_secs(2)
            }),
        ];
        for (name, value, check) in rows {
            let pairs = [("sql_mode", Some("STRICT_TRANS_TABLES")), (*name, *value)];
            let r = ReadBack::of(&pairs);
            assert!(check(&r), "{name}={value:?}");
            assert_eq!(r.server_ctx, server_context(&pairs).0, "{name}");
        }
        // The isolation level counts only under an isolation variable's name.
        let other = ReadBack::of(&[("sql_mode", Some("SERIALIZABLE"))]);
        assert!(!other.serializable);
    }
}
