//! Which functions a cacheable statement may call: the non-deterministic and session-dependent
//! built-ins (never cached), the sequence functions, and the deterministic built-ins.
//!
//! A name in none of these lists is a stored function or a UDF: it is not cached, and since
//! it may write, the statement counts as a write to unknown tables. So an omission here costs
//! a cache miss and an invalidation, never a stale read.

use std::sync::atomic::{AtomicBool, Ordering};

/// What calling a function means for caching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FnClass {
    Deterministic,
    /// Result changes between calls, or depends on the session or the server's state.
    NonDeterministic(&'static str),
    /// Sequences: each call advances (writes) the sequence.
    Sequence,
    /// `DEFAULT(col)`: evaluates the column's default at each call, which may be
    /// `CURRENT_TIMESTAMP`, `RAND()`, `UUID()` or `NEXTVAL(s)` (advancing `s`). The catalog
    /// does not hold column defaults, so such a read is never cached, and it counts as a
    /// write nobody can name (the sequence a default may advance).
    ColumnDefault,
    /// Not a built-in.
    Unknown,
}

impl FnClass {
    /// Calling it may change tables the statement does not name.
    pub(crate) fn may_write(self) -> bool {
        matches!(
            self,
            FnClass::Unknown | FnClass::Sequence | FnClass::ColumnDefault
        )
    }
}

/// Classifies a lower-case, unqualified function name. `no_args` tells `UNIX_TIMESTAMP()`
/// (now) from `UNIX_TIMESTAMP(d)` (a conversion).
pub(crate) fn classify(name: &str, no_args: bool) -> FnClass {
    if name == "unix_timestamp" {
        return if no_args {
            FnClass::NonDeterministic("unix_timestamp")
        } else {
            FnClass::Deterministic
        };
    }
    if name == "default" {
        return FnClass::ColumnDefault;
    }
    if !MYSQL_UPSTREAM.load(Ordering::Relaxed) && NOT_ON_MARIADB.binary_search(&name).is_ok() {
        return FnClass::Unknown;
    }
    if let Ok(i) = NON_DETERMINISTIC.binary_search(&name) {
        return FnClass::NonDeterministic(NON_DETERMINISTIC[i]);
    }
    if SEQUENCE.contains(&name) {
        return FnClass::Sequence;
    }
    if DETERMINISTIC.binary_search(&name).is_ok()
        && (MYSQL_UPSTREAM.load(Ordering::Relaxed) || MYSQL_ONLY.binary_search(&name).is_err())
    {
        return FnClass::Deterministic;
    }
    FnClass::Unknown
}

/// MySQL built-ins of [`DETERMINISTIC`] that MariaDB (10.11) does not have. On MariaDB an
/// unqualified call of one of these names runs the stored function of that name in the
/// current database, which may read or write anything: so they are built-ins only once the
/// upstream said it is MySQL ([`upstream_is`]). Sorted (a test checks). Each was checked
/// against MariaDB 10.11, where `SELECT name(…)` with any argument count answers 1305
/// (FUNCTION does not exist); some are built in on later MariaDB versions, where they are
/// counted as stored code all the same (a miss, never a wrong answer).
const MYSQL_ONLY: &[&str] = &[
    "any_value",
    "bin_to_uuid",
    "can_access_column",
    "format_bytes",
    "format_pico_time",
    "grouping",
    "gtid_subset",
    "gtid_subtract",
    "is_uuid",
    "json_array_intersect",
    "json_key_value",
    "json_object_filter_keys",
    "json_object_to_array",
    "json_schema_valid",
    "json_schema_validation_report",
    "json_storage_free",
    "json_storage_size",
    "json_table",
    "mbrcoveredby",
    "mbrcovers",
    "regexp_like",
    "st_isvalid",
    "st_latitude",
    "st_longitude",
    "st_simplify",
    "statement_digest",
    "statement_digest_text",
    "uuid_to_bin",
];

/// Non-deterministic built-ins of [`NON_DETERMINISTIC`] that MariaDB 10.11 does not have
/// (MySQL's, or later MariaDB releases': UUID_V4 and UUID_V7 came with 11.7). On MariaDB an
/// unqualified call of one runs the stored function of that name, which may write: so it
/// is stored code (a write to unknown tables), not merely uncacheable, until the upstream
/// said it is MySQL. Sorted (a test checks). Each was checked against MariaDB 10.11.19,
/// where `SELECT name(…)` with any argument count answers 1305 (FUNCTION does not exist).
const NOT_ON_MARIADB: &[&str] = &[
    "icu_version",
    "ps_current_thread_id",
    "ps_thread_id",
    "roles_graphml",
    "source_pos_wait",
    "uuid_v4",
    "uuid_v7",
    "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids",
];

/// Classifies a call of lower-case, unqualified `name` with `n_args` arguments, `spaced`
/// when something (a space, a comment) separates the name from its `(`: the one place a
/// call's shape decides which function the server runs ([`classify_spaced`], and the
/// geometry constructors the grammar knows only with some argument counts).
pub(crate) fn classify_call(name: &str, n_args: usize, spaced: bool) -> FnClass {
    if !grammar_arity(name, n_args) {
        return FnClass::Unknown;
    }
    if spaced {
        classify_spaced(name, n_args == 0)
    } else {
        classify(name, n_args == 0)
    }
}

/// Whether the server's grammar takes a call of `name` with `n_args` arguments as the
/// built-in. MariaDB's grammar has the geometry constructors only with these counts
/// (`POINT(x, y)`; `POLYGON(…)`, `LINESTRING(…)`, … with at least one): any other count is
/// a generic call, which runs the stored function of that name in the current database
/// (checked against MariaDB 10.11.19: `SELECT point(1)`, `SELECT polygon()` answer 1305).
/// Whether the argument count decides if a call of `name` is the built-in
/// ([`grammar_arity`]): where the count is not at hand, such a call is stored code.
pub(crate) fn arity_decides(name: &str) -> bool {
    !grammar_arity(name, 0) || !grammar_arity(name, 1)
}

fn grammar_arity(name: &str, n_args: usize) -> bool {
    match name {
        "point" => n_args == 2,
        "geometrycollection" | "linestring" | "multilinestring" | "multipoint" | "multipolygon"
        | "polygon" => n_args >= 1,
        _ => true,
    }
}

/// Whether the server reads time zone `zone` (an argument of CONVERT_TZ) without its
/// mysql.time_zone* tables: `SYSTEM` (any case) or an offset `±h:mm` the server takes as one.
/// Any other name is looked up in those tables at each call until found (a zone not loaded
/// gives NULL, and loading it, by writes to tables qcache never keys on, changes the
/// answer), so a call naming one is not cached. The server does not trim the name, and an
/// offset outside -12:59…+13:00 or with minutes past 59 (`+14:00`, `-13:00`, `+00:60`) is
/// no offset to it but a name to look up (checked against MariaDB 10.11.19: each gives NULL
/// while no zone of that name is loaded).
pub(crate) fn fixed_time_zone(zone: &str) -> bool {
    if zone.eq_ignore_ascii_case("system") {
        return true;
    }
    let (negative, rest) = match zone.as_bytes().first() {
        Some(b'+') => (false, &zone[1..]),
        Some(b'-') => (true, &zone[1..]),
        _ => return false,
    };
    let Some((h, m)) = rest.split_once(':') else {
        return false;
    };
    if h.is_empty()
        || h.len() > 2
        || m.len() != 2
        || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit())
    {
        return false;
    }
    let (Ok(h), Ok(m)) = (h.parse::<i32>(), m.parse::<i32>()) else {
        return false;
    };
    let minutes = h * 60 + m;
    m <= 59
        && if negative {
            minutes < 13 * 60
        } else {
            minutes <= 13 * 60
        }
}

/// Built-ins the server's grammar knows only when `(` follows the name at once: with a
/// space or a comment between them (and IGNORE_SPACE off) the name is an identifier, and
/// MariaDB runs the stored function of that name in the current database. Sorted (a test
/// checks). Each was checked against MariaDB 10.11: `SELECT name ()` answers 1630 (FUNCTION
/// does not exist) where `SELECT name()` is the built-in.
const ADJACENT_PAREN: &[&str] = &[
    "adddate",
    "bit_and",
    "bit_or",
    "bit_xor",
    "cast",
    "count",
    "cume_dist",
    "curdate",
    "curtime",
    "date_add",
    "date_sub",
    "dense_rank",
    "extract",
    "first_value",
    "group_concat",
    "icu_version",
    "json_arrayagg",
    "json_objectagg",
    "lag",
    "lead",
    "max",
    "median",
    "mid",
    "min",
    "now",
    "nth_value",
    "ntile",
    "percent_rank",
    "percentile_cont",
    "percentile_disc",
    "position",
    "ps_current_thread_id",
    "ps_thread_id",
    "rank",
    "roles_graphml",
    "session_user",
    "source_pos_wait",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "subdate",
    "substr",
    "substring",
    "sum",
    "system_user",
    "trim",
    "uuid_v4",
    "uuid_v7",
    "var_pop",
    "var_samp",
    "variance",
    "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids",
];

/// Whether `word` (any case) is a built-in of [`ADJACENT_PAREN`].
pub(crate) fn needs_adjacent_paren(word: &[u8]) -> bool {
    ADJACENT_PAREN
        .iter()
        .any(|n| n.as_bytes().eq_ignore_ascii_case(word))
}

/// Classifies a call of lower-case, unqualified `name` written with something (a space, a
/// comment) between it and its `(`: a built-in of [`ADJACENT_PAREN`] is then a stored
/// function's name; any other name is classified as [`classify`] does.
pub(crate) fn classify_spaced(name: &str, no_args: bool) -> FnClass {
    if ADJACENT_PAREN.binary_search(&name).is_ok() {
        return FnClass::Unknown;
    }
    classify(name, no_args)
}

/// Whether the upstream is MySQL (not MariaDB): set from the server's greeting, once per
/// process (qcache serves one upstream: a reload to another is refused). Until then, and
/// for MariaDB, [`MYSQL_ONLY`] names are stored code.
static MYSQL_UPSTREAM: AtomicBool = AtomicBool::new(false);

/// Notes the upstream's kind from its greeting (`ServerVersion::mariadb`).
pub fn upstream_is(mariadb: bool) {
    if !mariadb {
        MYSQL_UPSTREAM.store(true, Ordering::Relaxed);
    }
}

/// Keywords that MySQL evaluates as functions without parentheses. `sysdate` is one only
/// under MariaDB's sql_mode=ORACLE (a bare `SYSDATE` is SYSDATE(), the time of the call;
/// elsewhere it names a column), which the analysis does not know when it reads a statement:
/// an unquoted column of that name is refused caching too (a miss, never a wrong answer),
/// while a quoted one (`` `sysdate` ``, `"sysdate"` under ANSI_QUOTES) stays a column.
const NILADIC: &[&str] = &[
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "localtime",
    "localtimestamp",
    "sysdate",
    "utc_date",
    "utc_time",
    "utc_timestamp",
];

/// Keywords that MySQL evaluates as functions without parentheses and that sqlparser may hand
/// over as bare identifiers.
pub(crate) fn niladic(name_lower: &str) -> Option<&'static str> {
    NILADIC.iter().copied().find(|n| *n == name_lower)
}

const SEQUENCE: &[&str] = &["lastval", "nextval", "setval"];

/// Sorted (a test checks): looked up by binary search.
const NON_DETERMINISTIC: &[&str] = &[
    "benchmark",
    "binlog_gtid_pos",
    "connection_id",
    "curdate",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "curtime",
    "database",
    "des_decrypt",
    "des_encrypt",
    "encrypt",
    "found_rows",
    "get_lock",
    "icu_version",
    "is_free_lock",
    "is_used_lock",
    "last_insert_id",
    "load_file",
    "localtime",
    "localtimestamp",
    "master_gtid_wait",
    "master_pos_wait",
    "now",
    "ps_current_thread_id",
    "ps_thread_id",
    "rand",
    "random_bytes",
    "release_all_locks",
    "release_lock",
    "roles_graphml",
    "row_count",
    "schema",
    "session_user",
    "sleep",
    "source_pos_wait",
    "sys_guid",
    "sysdate",
    "system_user",
    "user",
    "utc_date",
    "utc_time",
    "utc_timestamp",
    "uuid",
    "uuid_short",
    "uuid_v4",
    "uuid_v7",
    "version",
    "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids",
];

/// Deterministic built-ins of MySQL 5.7/8.x and MariaDB: their result depends only on their
/// arguments and on session settings that are part of the cache key. Sorted (a test checks).
const DETERMINISTIC: &[&str] = &[
    "abs",
    "acos",
    "adddate",
    "addtime",
    "aes_decrypt",
    "aes_encrypt",
    "any_value",
    "ascii",
    "asin",
    "atan",
    "atan2",
    "avg",
    "bin",
    "bin_to_uuid",
    "bit_and",
    "bit_count",
    "bit_length",
    "bit_or",
    "bit_xor",
    "can_access_column",
    "cast",
    "ceil",
    "ceiling",
    "char",
    "char_length",
    "character_length",
    "charset",
    "chr",
    "coalesce",
    "coercibility",
    "collation",
    "column_add",
    "column_check",
    "column_create",
    "column_delete",
    "column_exists",
    "column_get",
    "column_json",
    "column_list",
    "compress",
    "concat",
    "concat_ws",
    "conv",
    "convert",
    "convert_tz",
    "cos",
    "cot",
    "count",
    "crc32",
    "crc32c",
    "cume_dist",
    "date",
    "date_add",
    "date_format",
    "date_sub",
    "datediff",
    "day",
    "dayname",
    "dayofmonth",
    "dayofweek",
    "dayofyear",
    "decode",
    "degrees",
    "dense_rank",
    "elt",
    "encode",
    "exp",
    "export_set",
    "extract",
    "extractvalue",
    "field",
    "find_in_set",
    "first_value",
    "floor",
    "format",
    "format_bytes",
    "format_pico_time",
    "from_base64",
    "from_days",
    "from_unixtime",
    "geometrycollection",
    "get_format",
    "greatest",
    "group_concat",
    "grouping",
    "gtid_subset",
    "gtid_subtract",
    "hex",
    "hour",
    "if",
    "ifnull",
    "inet6_aton",
    "inet6_ntoa",
    "inet_aton",
    "inet_ntoa",
    "insert",
    "instr",
    "interval",
    "is_ipv4",
    "is_ipv4_compat",
    "is_ipv4_mapped",
    "is_ipv6",
    "is_uuid",
    "isnull",
    "json_array",
    "json_array_append",
    "json_array_insert",
    "json_array_intersect",
    "json_arrayagg",
    "json_compact",
    "json_contains",
    "json_contains_path",
    "json_depth",
    "json_detailed",
    "json_equals",
    "json_exists",
    "json_extract",
    "json_insert",
    "json_key_value",
    "json_keys",
    "json_length",
    "json_loose",
    "json_merge",
    "json_merge_patch",
    "json_merge_preserve",
    "json_normalize",
    "json_object",
    "json_object_filter_keys",
    "json_object_to_array",
    "json_objectagg",
    "json_overlaps",
    "json_pretty",
    "json_query",
    "json_quote",
    "json_remove",
    "json_replace",
    "json_schema_valid",
    "json_schema_validation_report",
    "json_search",
    "json_set",
    "json_storage_free",
    "json_storage_size",
    "json_table",
    "json_type",
    "json_unquote",
    "json_valid",
    "json_value",
    "lag",
    "last_day",
    "last_value",
    "lcase",
    "lead",
    "least",
    "left",
    "length",
    "lengthb",
    "linestring",
    "ln",
    "locate",
    "log",
    "log10",
    "log2",
    "lower",
    "lpad",
    "ltrim",
    "make_set",
    "makedate",
    "maketime",
    "max",
    "mbrcontains",
    "mbrcoveredby",
    "mbrcovers",
    "mbrdisjoint",
    "mbrequals",
    "mbrintersects",
    "mbroverlaps",
    "mbrtouches",
    "mbrwithin",
    "md5",
    "median",
    "microsecond",
    "mid",
    "min",
    "minute",
    "mod",
    "month",
    "monthname",
    "multilinestring",
    "multipoint",
    "multipolygon",
    "name_const",
    "natural_sort_key",
    "nth_value",
    "ntile",
    "nullif",
    "nvl",
    "nvl2",
    "oct",
    "octet_length",
    "ord",
    "percent_rank",
    "percentile_cont",
    "percentile_disc",
    "period_add",
    "period_diff",
    "pi",
    "point",
    "polygon",
    "position",
    "pow",
    "power",
    "quarter",
    "quote",
    "radians",
    "rank",
    "regexp_instr",
    "regexp_like",
    "regexp_replace",
    "regexp_substr",
    "repeat",
    "replace",
    "reverse",
    "right",
    "round",
    "row",
    "row_number",
    "rpad",
    "rtrim",
    "sec_to_time",
    "second",
    "sformat",
    "sha",
    "sha1",
    "sha2",
    "sign",
    "sin",
    "soundex",
    "space",
    "sqrt",
    "st_area",
    "st_asbinary",
    "st_asgeojson",
    "st_astext",
    "st_aswkb",
    "st_aswkt",
    "st_buffer",
    "st_centroid",
    "st_contains",
    "st_convexhull",
    "st_crosses",
    "st_difference",
    "st_dimension",
    "st_disjoint",
    "st_distance",
    "st_distance_sphere",
    "st_endpoint",
    "st_envelope",
    "st_equals",
    "st_exteriorring",
    "st_geometryn",
    "st_geometrytype",
    "st_geomfromgeojson",
    "st_geomfromtext",
    "st_geomfromwkb",
    "st_interiorringn",
    "st_intersection",
    "st_intersects",
    "st_isclosed",
    "st_isempty",
    "st_isvalid",
    "st_latitude",
    "st_length",
    "st_linefromtext",
    "st_longitude",
    "st_numgeometries",
    "st_numinteriorrings",
    "st_numpoints",
    "st_overlaps",
    "st_pointfromtext",
    "st_pointfromwkb",
    "st_pointn",
    "st_polyfromtext",
    "st_simplify",
    "st_srid",
    "st_startpoint",
    "st_symdifference",
    "st_touches",
    "st_union",
    "st_within",
    "st_x",
    "st_y",
    "statement_digest",
    "statement_digest_text",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "str_to_date",
    "strcmp",
    "subdate",
    "substr",
    "substring",
    "substring_index",
    "subtime",
    "sum",
    "tan",
    "time",
    "time_format",
    "time_to_sec",
    "timediff",
    "timestamp",
    "timestampadd",
    "timestampdiff",
    "to_base64",
    "to_char",
    "to_days",
    "to_seconds",
    "trim",
    "truncate",
    "ucase",
    "uncompress",
    "uncompressed_length",
    "unhex",
    "updatexml",
    "upper",
    "uuid_to_bin",
    "values",
    "var_pop",
    "var_samp",
    "variance",
    "week",
    "weekday",
    "weekofyear",
    "weight_string",
    "year",
    "yearweek",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_and_disjoint() {
        assert!(NON_DETERMINISTIC.windows(2).all(|w| w[0] < w[1]));
        assert!(DETERMINISTIC.windows(2).all(|w| w[0] < w[1]));
        assert!(MYSQL_ONLY.windows(2).all(|w| w[0] < w[1]));
        assert!(NOT_ON_MARIADB.windows(2).all(|w| w[0] < w[1]));
        assert!(NOT_ON_MARIADB
            .iter()
            .all(|n| NON_DETERMINISTIC.binary_search(n).is_ok()));
        assert!(ADJACENT_PAREN.windows(2).all(|w| w[0] < w[1]));
        assert!(MYSQL_ONLY
            .iter()
            .all(|n| DETERMINISTIC.binary_search(n).is_ok()));
        for n in NON_DETERMINISTIC.iter().chain(SEQUENCE) {
            assert!(DETERMINISTIC.binary_search(n).is_err(), "{n}");
        }
    }

    #[test]
    fn classes() {
        assert_eq!(classify("now", false), FnClass::NonDeterministic("now"));
        assert_eq!(
            classify("unix_timestamp", true),
            FnClass::NonDeterministic("unix_timestamp")
        );
        assert_eq!(classify("unix_timestamp", false), FnClass::Deterministic);
        assert_eq!(classify("concat", false), FnClass::Deterministic);
        assert_eq!(classify("nextval", false), FnClass::Sequence);
        assert_eq!(classify("my_func", false), FnClass::Unknown);
        // MySQL-only built-ins: a stored function of that name on MariaDB (the default
        // until the upstream says it is MySQL; no test here says so).
        assert_eq!(classify("any_value", false), FnClass::Unknown);
        assert_eq!(classify("regexp_like", false), FnClass::Unknown);
        // `substr (s, 2)`: the stored function `substr`; `concat (a, b)` stays the built-in.
        assert_eq!(classify_spaced("substr", false), FnClass::Unknown);
        assert_eq!(classify_spaced("max", false), FnClass::Unknown);
        assert_eq!(classify_spaced("concat", false), FnClass::Deterministic);
        assert_eq!(niladic("utc_date"), Some("utc_date"));
        assert_eq!(niladic("id"), None);
    }

    /// Which classes may write tables the statement does not name: unknown code, sequences
    /// and DEFAULT() (a column default may call either).
    #[test]
    fn which_classes_may_write() {
        for (class, want) in [
            (FnClass::Deterministic, false),
            (FnClass::NonDeterministic("now"), false),
            (FnClass::Sequence, true),
            (FnClass::ColumnDefault, true),
            (FnClass::Unknown, true),
        ] {
            assert_eq!(class.may_write(), want, "{class:?}");
        }
    }

    /// Every listed non-deterministic function reads as such under its own name; every
    /// sequence function as a sequence; DEFAULT as a column default.
    /// The geometry constructors are built-ins only with the argument counts the grammar
    /// takes; another count runs the stored function of that name.
    #[test]
    fn geometry_constructors_by_argument_count() {
        assert_eq!(classify_call("point", 2, false), FnClass::Deterministic);
        assert_eq!(classify_call("point", 1, false), FnClass::Unknown);
        assert_eq!(classify_call("point", 3, false), FnClass::Unknown);
        assert_eq!(classify_call("polygon", 0, false), FnClass::Unknown);
        assert_eq!(classify_call("polygon", 1, false), FnClass::Deterministic);
        assert_eq!(
            classify_call("multipoint", 4, false),
            FnClass::Deterministic
        );
        assert_eq!(classify_call("substr", 2, true), FnClass::Unknown);
        assert_eq!(classify_call("concat", 0, false), FnClass::Deterministic);
    }

    #[test]
    fn time_zones_read_without_tables() {
        for z in [
            "+00:00", "-5:30", "SYSTEM", "system", "+13:00", "-12:59", "-0:00",
        ] {
            assert!(fixed_time_zone(z), "{z}");
        }
        // The server looks these up as names: not trimmed, out of its offset range, minutes
        // past 59.
        let named = [
            " +13:00 ", "system ", "+14:00", "+13:01", "-13:00", "+00:60", "+99:99",
        ];
        for z in ["UTC", "Europe/Paris", "+0000", "+1:3", "", "+:00", "MET"]
            .into_iter()
            .chain(named)
        {
            assert!(!fixed_time_zone(z), "{z}");
        }
    }

    #[test]
    fn every_listed_name_has_its_class() {
        for n in NON_DETERMINISTIC {
            let want = if NOT_ON_MARIADB.contains(n) {
                FnClass::Unknown
            } else {
                FnClass::NonDeterministic(n)
            };
            assert_eq!(classify(n, false), want, "{n} (MariaDB upstream)");
        }
        for n in SEQUENCE {
            assert_eq!(classify(n, false), FnClass::Sequence, "{n}");
        }
        for n in DETERMINISTIC {
            let want = if MYSQL_ONLY.contains(n) {
                FnClass::Unknown
            } else {
                FnClass::Deterministic
            };
            assert_eq!(classify(n, false), want, "{n} (MariaDB upstream)");
        }
        assert_eq!(classify("default", false), FnClass::ColumnDefault);
    }

    /// Names are looked up as given (the caller lower-cases): another case is unknown.
    #[test]
    fn names_are_looked_up_lower_case() {
        assert_eq!(classify("NOW", false), FnClass::Unknown);
        assert_eq!(classify("Concat", false), FnClass::Unknown);
        assert_eq!(niladic("CURRENT_USER"), None);
    }

    /// Keywords MySQL evaluates without parentheses are niladic; each is also a
    /// non-deterministic function.
    #[test]
    fn niladic_keywords_are_non_deterministic() {
        for n in NILADIC {
            assert_eq!(niladic(n), Some(*n));
            assert_eq!(classify(n, true), FnClass::NonDeterministic(n), "{n}");
        }
        for n in ["now", "user", "id", ""] {
            assert_eq!(niladic(n), None, "{n}");
        }
    }
}
