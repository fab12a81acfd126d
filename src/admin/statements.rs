//! The admin statements qcache answers over the MySQL protocol: what they look like, and the
//! rows they return. The session decides who may run them (see `session::admin`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::protocol::packets::{TYPE_LONGLONG, TYPE_VAR_STRING};
use crate::shared::Shared;

/// MySQL's ER_SPECIFIC_ACCESS_DENIED_ERROR, as the query cache's FLUSH/RESET gave it.
pub const ACCESS_DENIED_CODE: u16 = 1227;
pub const ACCESS_DENIED_STATE: &str = "42000";
pub const ACCESS_DENIED_MESSAGE: &str =
    "Access denied; you need (at least one of) the RELOAD privilege(s) for this operation";
/// ER_PARSE_ERROR for a `SHOW QCACHE …` / `QCACHE …` qcache does not know.
pub const PARSE_ERROR_CODE: u16 = 1064;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminStatement {
    /// `SHOW QCACHE STATUS`
    Status,
    /// `SHOW QCACHE ENTRIES [LIMIT n]`
    Entries { limit: Option<usize> },
    /// `SHOW QCACHE TABLES`
    Tables,
    /// `QCACHE INVALIDATE TABLE [db.]t`
    InvalidateTable {
        schema: Option<String>,
        table: String,
    },
}

impl AdminStatement {
    /// Whether the RELOAD privilege (or `admin.users`) is needed, as FLUSH QUERY CACHE needed
    /// it in MySQL. Not only for statements that change state: cached statement text carries
    /// literals (emails, password hashes, tokens) and cached results carry rows of tables the
    /// asking user may not read, so every listing needs it too. Only the counters are public,
    /// as `SHOW STATUS` is. Fail closed: a statement is privileged unless named here.
    pub fn needs_privilege(&self) -> bool {
        !matches!(self, AdminStatement::Status)
    }
}

/// None when `sql` is not an admin statement (relay it); Some(Err) for one qcache owns but
/// cannot read, answered with a syntax error.
pub fn parse(sql: &[u8]) -> Option<Result<AdminStatement, String>> {
    // Cheap prefix test first: every SHOW and unknown statement passes here.
    let head: Vec<u8> = sql
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take(12)
        .map(|b| b.to_ascii_lowercase())
        .collect();
    if !(head.starts_with(b"show") || head.starts_with(b"qcache")) {
        return None;
    }
    let text = String::from_utf8_lossy(sql);
    let text = text.trim().trim_end_matches(';').trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let lw: Vec<&str> = lower.iter().map(String::as_str).collect();
    let bad = |what: &str| Some(Err(format!("unknown {what} statement: {text}")));
    match lw.as_slice() {
        ["show", "qcache", rest @ ..] => match rest {
            ["status"] => Some(Ok(AdminStatement::Status)),
            ["tables"] => Some(Ok(AdminStatement::Tables)),
            ["entries"] => Some(Ok(AdminStatement::Entries { limit: None })),
            ["entries", "limit", n] => match n.parse() {
                Ok(n) => Some(Ok(AdminStatement::Entries { limit: Some(n) })),
                Err(_) => bad("SHOW QCACHE"),
            },
            _ => bad("SHOW QCACHE"),
        },
        ["qcache", "invalidate", "table", _] => {
            let name = words[3].replace('`', "");
            let (schema, table) = match name.split_once('.') {
                Some((s, t)) => (Some(s.to_string()), t.to_string()),
                None => (None, name),
            };
            if table.is_empty() || schema.as_deref() == Some("") {
                return bad("QCACHE");
            }
            Some(Ok(AdminStatement::InvalidateTable { schema, table }))
        }
        ["qcache", ..] => bad("QCACHE"),
        _ => None,
    }
}

/// A statement's text lowercased, for [`words`].
pub fn lowercase(sql: &[u8]) -> String {
    String::from_utf8_lossy(sql).to_ascii_lowercase()
}

/// The words of a short statement qcache answers itself, without a trailing `;`.
pub fn words(text: &str) -> Vec<&str> {
    text.trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect()
}

/// The pattern of `SHOW [GLOBAL|SESSION|LOCAL] STATUS LIKE 'qcache…'`, lowercased, which
/// qcache answers from its own counters as MySQL's query cache did; None for any other
/// statement (relayed).
pub fn status_like_pattern(sql: &[u8]) -> Option<String> {
    let text = lowercase(sql);
    let words = words(&text);
    let rest = match words.as_slice() {
        ["show", "status", rest @ ..] => rest,
        ["show", "global" | "session" | "local", "status", rest @ ..] => rest,
        _ => return None,
    };
    let pattern = match rest {
        ["like", p] => p.trim_matches(|c| c == '\'' || c == '"'),
        _ => return None,
    };
    pattern.starts_with("qcache").then(|| pattern.to_string())
}

/// SQL LIKE with % and _ (no escapes), for SHOW STATUS patterns.
///
/// The pattern comes from the client, so this must stay cheap whatever it holds: on a
/// mismatch only the most recent % is retried one byte further, which is enough for
/// LIKE (a later % can absorb whatever an earlier one would have) and keeps the work
/// within pattern length × name length. Trying every split at every % instead takes
/// exponential time in the number of %s: `LIKE 'qcache%%%…%x'` held a runtime worker
/// for good (found by the `commands` fuzz target).
pub fn like_match(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    // Where to resume after the last %: (pattern index after it, name index it took up to).
    let mut retry: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'%') => {
                pi += 1;
                retry = Some((pi, si));
            }
            Some(&c) if c == b'_' || c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match retry {
                Some((rp, rs)) => {
                    pi = rp;
                    si = rs + 1;
                    retry = Some((rp, rs + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'%')
}

/// A result to send: column names with types, and rows of text values.
pub struct Rows {
    pub columns: Vec<(&'static str, u8)>,
    pub rows: Vec<Vec<Option<String>>>,
}

/// `SHOW QCACHE STATUS`: the Qcache_* counters, then the figures /metrics has beyond them.
pub fn status(shared: &Shared) -> Rows {
    let cache = &shared.cache;
    let mut rows: Vec<(String, String)> = cache
        .status_rows()
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    rows.push((
        "Qcache_misses".into(),
        shared.latencies.miss.count().to_string(),
    ));
    rows.push(("Qcache_entries".into(), cache.len().to_string()));
    rows.push(("Qcache_bytes".into(), cache.weight().to_string()));
    rows.push(("Qcache_max_bytes".into(), cache.max_bytes().to_string()));
    rows.push((
        "Qcache_client_connections".into(),
        shared.connections.load(Ordering::Relaxed).to_string(),
    ));
    for (reason, n) in cache.stats().not_cached_reasons() {
        rows.push((format!("Qcache_not_cached_{reason}"), n.to_string()));
    }
    let binlog = match &shared.binlog {
        None => "OFF".to_string(),
        Some(b) if b.connected() => "CONNECTED".to_string(),
        Some(b) => format!("{:?}", b.status()),
    };
    rows.push(("Qcache_binlog".into(), binlog));
    for (n, v) in shared.l2.iter().flat_map(|l| l.status_rows()) {
        rows.push((n.to_string(), v.to_string()));
    }
    if let Some(b) = &shared.binlog {
        let lag = b
            .last_event_lag()
            .map_or(String::new(), |d| d.as_millis().to_string());
        rows.push(("Qcache_binlog_lag_ms".into(), lag));
        rows.push((
            "Qcache_binlog_reconnects".into(),
            b.reconnects().to_string(),
        ));
        rows.push(("Qcache_binlog_resumes".into(), b.resumes().to_string()));
        rows.push(("Qcache_binlog_gaps".into(), b.gaps().to_string()));
    }
    Rows {
        columns: vec![
            ("Variable_name", TYPE_VAR_STRING),
            ("Value", TYPE_VAR_STRING),
        ],
        rows: rows
            .into_iter()
            .map(|(n, v)| vec![Some(n), Some(v)])
            .collect(),
    }
}

/// `SHOW QCACHE ENTRIES`: the most-hit entries first.
pub fn entries(shared: &Shared, limit: Option<usize>) -> Rows {
    let mut list = shared.cache.entries();
    list.sort_by(|a, b| b.hits.cmp(&a.hits).then(a.age.cmp(&b.age)));
    list.truncate(limit.unwrap_or(usize::MAX));
    Rows {
        columns: vec![
            ("digest", TYPE_VAR_STRING),
            ("tables", TYPE_VAR_STRING),
            ("bytes", TYPE_LONGLONG),
            ("hits", TYPE_LONGLONG),
            ("age_ms", TYPE_LONGLONG),
            ("current", TYPE_LONGLONG),
            ("sql", TYPE_VAR_STRING),
        ],
        rows: list
            .into_iter()
            .map(|e| {
                vec![
                    Some(format!("{:016x}", e.digest)),
                    Some(e.tables.join(",")),
                    Some(e.bytes.to_string()),
                    Some(e.hits.to_string()),
                    Some(e.age.as_millis().to_string()),
                    Some(u8::from(e.current).to_string()),
                    e.sql.map(|s| s.to_string()),
                ]
            })
            .collect(),
    }
}

/// `SHOW QCACHE TABLES`: every table qcache has a version for, with its entries held now.
pub fn tables(shared: &Shared) -> Rows {
    let mut per_table: HashMap<String, u64> = HashMap::new();
    for e in shared.cache.entries() {
        for t in e.tables {
            *per_table.entry(t).or_insert(0) += 1;
        }
    }
    let mut list: Vec<(String, u64)> = shared
        .cache
        .versions()
        .tables()
        .iter()
        .map(|t| (t.qualified(), t.version()))
        .collect();
    list.sort();
    Rows {
        columns: vec![
            ("table", TYPE_VAR_STRING),
            ("version", TYPE_LONGLONG),
            ("entries", TYPE_LONGLONG),
        ],
        rows: list
            .into_iter()
            .map(|(name, v)| {
                let n = per_table.get(&name).copied().unwrap_or(0);
                vec![Some(name), Some(v.to_string()), Some(n.to_string())]
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_statements() {
        assert_eq!(
            parse(b"SHOW QCACHE STATUS"),
            Some(Ok(AdminStatement::Status))
        );
        assert_eq!(
            parse(b"  show qcache tables ;"),
            Some(Ok(AdminStatement::Tables))
        );
        assert_eq!(
            parse(b"SHOW QCACHE ENTRIES LIMIT 5"),
            Some(Ok(AdminStatement::Entries { limit: Some(5) }))
        );
        assert_eq!(
            parse(b"QCACHE INVALIDATE TABLE `shop`.`orders`"),
            Some(Ok(AdminStatement::InvalidateTable {
                schema: Some("shop".into()),
                table: "orders".into()
            }))
        );
        assert_eq!(
            parse(b"qcache invalidate table t"),
            Some(Ok(AdminStatement::InvalidateTable {
                schema: None,
                table: "t".into()
            }))
        );
        assert!(matches!(parse(b"SHOW QCACHE NONSENSE"), Some(Err(_))));
        assert!(matches!(parse(b"QCACHE DROP"), Some(Err(_))));
        assert!(matches!(
            parse(b"SHOW QCACHE ENTRIES LIMIT x"),
            Some(Err(_))
        ));
        assert_eq!(parse(b"SHOW TABLES"), None);
        assert_eq!(parse(b"SHOW STATUS LIKE 'Qcache%'"), None);
        assert_eq!(parse(b"SELECT 1"), None);
    }

    /// Every admin statement that shows or changes cached data needs the privilege; only the
    /// counters do not.
    #[test]
    fn privilege_by_statement() {
        let cases = [
            ("SHOW QCACHE STATUS", false),
            ("SHOW QCACHE ENTRIES", true),
            ("SHOW QCACHE ENTRIES LIMIT 1", true),
            ("SHOW QCACHE TABLES", true),
            ("QCACHE INVALIDATE TABLE t", true),
        ];
        for (sql, want) in cases {
            let stmt = parse(sql.as_bytes()).unwrap().unwrap();
            assert_eq!(stmt.needs_privilege(), want, "{sql}");
        }
    }

    #[test]
    fn status_patterns() {
        assert_eq!(
            status_like_pattern(b"SHOW STATUS LIKE 'Qcache%'").as_deref(),
            Some("qcache%")
        );
        assert_eq!(
            status_like_pattern(b" show global status like \"qcache_hits\" ;").as_deref(),
            Some("qcache_hits")
        );
        assert_eq!(status_like_pattern(b"SHOW STATUS LIKE 'Com%'"), None);
        assert_eq!(status_like_pattern(b"SHOW STATUS"), None);
        assert!(like_match("qcache%", "qcache_hits"));
        assert!(like_match("qcache_hit_", "qcache_hits"));
        assert!(!like_match("qcache_i%", "qcache_hits"));
        assert!(like_match("%", ""));
        assert!(like_match("q%h%s", "qcache_hits"));
        assert!(!like_match("q%x%", "qcache_hits"));
        assert!(!like_match("_", ""));
        assert!(like_match("%_", "a"));
        assert!(like_match("%%a%", "xay"));
        assert!(!like_match("a%", ""));
        assert!(like_match("a%%", "a"));
    }

    /// The shape of the input the `commands` fuzz target found (`SHOW STATUS LIKE
    /// Qcache%%…%S`, 72 %s; 31 already took over 5 s): the recursive matcher took time
    /// exponential in the number of %s.
    #[test]
    fn many_percent_signs_stay_fast() {
        let sql = format!("SHOW STATUS LIKE 'qcache{}x'", "%".repeat(200));
        let pattern = status_like_pattern(sql.as_bytes()).unwrap();
        let started = std::time::Instant::now();
        assert!(!like_match(&pattern, "qcache_queries_in_cache"));
        assert!(like_match(&pattern, "qcache_x"));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    proptest::proptest! {
        /// The same answers as a regex translation of the pattern, on a small alphabet where
        /// %, _ and literal bytes collide often.
        #[test]
        fn like_agrees_with_a_regex(p in "[ab%_]{0,8}", s in "[ab]{0,8}") {
            let re: String = p
                .chars()
                .map(|c| match c {
                    '%' => ".*".to_string(),
                    '_' => ".".to_string(),
                    c => c.to_string(),
                })
                .collect();
            let re = regex::Regex::new(&format!("^(?s:{re})$")).unwrap();
            proptest::prop_assert_eq!(like_match(&p, &s), re.is_match(&s));
        }
    }
}
