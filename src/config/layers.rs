//! One configuration dialect: every key of the file is also a `QCACHE_<SECTION>_<KEY>`
//! variable and a `--set section.key=value` flag, and each value is read by the file's own
//! parser (serde), so `1m30s`, `256MB` and `true` mean the same everywhere. Precedence:
//! flag > variable > file > default.

use std::collections::BTreeMap;
use std::path::Path;

use toml::{Table, Value};

use super::{redact, redact_secret, Config, ConfigError};

/// Keys only a file can set: lists of tables.
const FILE_ONLY: &[&str] = &["rules"];
/// Keys with no default (absent unless set); each holds a duration.
const OPTIONAL: &[&str] = &["cache.ttl", "log.slow_miss"];
/// String keys that also take a list: from a variable or a flag, commas separate its items.
const STRING_OR_LIST: &[&str] = &["l2.url"];

/// Every key a variable or a flag can set, as `section.key` (`tls.client.cert`), sorted.
pub fn keys() -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(v) = Value::try_from(Config::default()) {
        walk(&v, "", &mut out);
    }
    out.extend(OPTIONAL.iter().map(|s| s.to_string()));
    out.retain(|k| {
        !FILE_ONLY
            .iter()
            .any(|f| k == f || k.starts_with(&format!("{f}.")))
    });
    out.sort();
    out.dedup();
    out
}

fn walk(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                walk(v, &key, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// The variable that sets `key`: `server.upstream` → `QCACHE_SERVER_UPSTREAM`.
pub fn env_name(key: &str) -> String {
    format!("QCACHE_{}", key.replace('.', "_").to_ascii_uppercase())
}

fn default_at(key: &str) -> Option<Value> {
    let mut v = Value::try_from(Config::default()).ok()?;
    for part in key.split('.') {
        v = v.as_table()?.get(part)?.clone();
    }
    Some(v)
}

/// A variable's or flag's text as the TOML value the file would hold, by the kind of the
/// key's default: a string stays a string (`"0123"` too), a number or boolean is read as
/// one when it is one (else left as text, for sizes such as `256MB` or for serde to refuse
/// with its own message), a list is split at commas.
fn value_for(key: &str, raw: &str) -> Value {
    let text = || Value::String(raw.to_string());
    let list = || {
        Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )
    };
    match default_at(key) {
        Some(Value::String(_)) if STRING_OR_LIST.contains(&key) && raw.contains(',') => list(),
        Some(Value::Integer(_)) => raw
            .trim()
            .parse()
            .map(Value::Integer)
            .unwrap_or_else(|_| text()),
        Some(Value::Float(_)) => raw
            .trim()
            .parse()
            .map(Value::Float)
            .unwrap_or_else(|_| text()),
        Some(Value::Boolean(_)) => raw
            .trim()
            .parse()
            .map(Value::Boolean)
            .unwrap_or_else(|_| text()),
        Some(Value::Array(_)) => list(),
        _ => text(),
    }
}

fn insert(table: &mut Table, key: &str, value: Value) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut t = table;
    for p in parts {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        let Value::Table(inner) = entry else { return };
        t = inner;
    }
    t.insert(last.to_string(), value);
}

/// Sets `key` to `raw` in `table`, checked alone first so that an error names where the
/// value came from (`source`), never printing a secret.
fn apply(table: &mut Table, key: &str, raw: &str, source: &str) -> Result<(), ConfigError> {
    if !keys().iter().any(|k| k == key) {
        return Err(ConfigError::Invalid(format!(
            "{source}: no key {key:?} (every key is documented in config/qcache.toml)"
        )));
    }
    let value = value_for(key, raw);
    let mut alone = Table::new();
    insert(&mut alone, key, value.clone());
    if let Err(e) = Value::Table(alone).try_into::<Config>() {
        let shown = if key.ends_with("password") {
            redact_secret(raw).to_string()
        } else {
            redact(raw)
        };
        return Err(ConfigError::Invalid(format!(
            "{source} = {shown:?}: {} (the value is read as in the config file)",
            super::one_line(&e.to_string())
        )));
    }
    insert(table, key, value);
    Ok(())
}

/// The config of `file` (or the defaults), with every `QCACHE_*` variable in `env` that
/// names a key laid over it, then every `--set key=value` of `sets`.
/// `sets` (`section.key=value`) laid over an already built config.
pub fn layered_over(base: &Config, sets: &[String]) -> Result<Config, ConfigError> {
    let mut table = match Value::try_from(base) {
        Ok(Value::Table(t)) => t,
        _ => return Err(ConfigError::Invalid("cannot re-read the config".into())),
    };
    apply_sets(&mut table, sets)?;
    let mut c: Config = Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Invalid(super::one_line(&e.to_string())))?;
    // Not in the file format, so not carried through the table.
    c.l2.unsafe_skip_version_check = base.l2.unsafe_skip_version_check;
    Ok(c)
}

fn apply_sets(table: &mut Table, sets: &[String]) -> Result<(), ConfigError> {
    for set in sets {
        let (key, raw) = set.split_once('=').ok_or_else(|| {
            ConfigError::Invalid(format!("--set {set:?}: expected section.key=value"))
        })?;
        let key = key.trim();
        apply(table, key, raw, &format!("--set {key}"))?;
    }
    Ok(())
}

pub fn layered(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    sets: &[String],
) -> Result<Config, ConfigError> {
    let mut table = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.display().to_string(),
                source,
            })?;
            // Parsed once as the config for its error messages (line, column, key).
            Config::from_toml(&text, &path.display().to_string())?;
            toml::from_str::<Table>(&text).map_err(|e| ConfigError::Parse {
                path: path.display().to_string(),
                at: String::new(),
                message: super::one_line(e.message()),
            })?
        }
        None => Table::new(),
    };
    let by_name: BTreeMap<String, String> = keys().into_iter().map(|k| (env_name(&k), k)).collect();
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .filter(|(n, _)| by_name.contains_key(n))
        .collect();
    env.sort();
    for (name, raw) in env {
        apply(&mut table, &by_name[&name], &raw, &name)?;
    }
    apply_sets(&mut table, sets)?;
    Value::Table(table)
        .try_into::<Config>()
        .map_err(|e| ConfigError::Invalid(super::one_line(&e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key: a variable and a flag set it through the file's parser, and
    /// config/qcache.toml documents it under its section.
    #[test]
    fn every_key_has_a_variable_a_flag_and_documentation() {
        let doc = include_str!("../../config/qcache.toml");
        let keys = keys();
        assert!(keys.len() > 50, "{keys:?}");
        let names: std::collections::HashSet<String> = keys.iter().map(|k| env_name(k)).collect();
        assert_eq!(names.len(), keys.len(), "two keys share a variable name");
        for key in &keys {
            let (section, leaf) = key.rsplit_once('.').expect("every key is in a section");
            // Documented: `leaf =` (or commented out, `# leaf =`) after `[section]`.
            let header = format!("[{section}]");
            let at = doc
                .find(&header)
                .unwrap_or_else(|| panic!("{header} not in config/qcache.toml"));
            let body = &doc[at + header.len()..];
            let body = &body[..body.find("\n[").unwrap_or(body.len())];
            assert!(
                body.lines().any(|l| {
                    let l = l.trim_start_matches('#').trim_start();
                    l.starts_with(&format!("{leaf} =")) || l.starts_with(&format!("{leaf}="))
                }),
                "{key} is not documented in config/qcache.toml"
            );
            // Its default, written as an operator would, round-trips through the variable
            // and through --set.
            let raw = match default_at(key) {
                Some(Value::String(s)) => s,
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                Some(v) => v.to_string(),
                None => "90s".to_string(),
            };
            let via_env = layered(None, [(env_name(key), raw.clone())], &[])
                .unwrap_or_else(|e| panic!("{}={raw}: {e}", env_name(key)));
            let via_flag = layered(None, [], &[format!("{key}={raw}")])
                .unwrap_or_else(|e| panic!("--set {key}={raw}: {e}"));
            assert_eq!(via_env, via_flag, "{key}");
            if !OPTIONAL.contains(&key.as_str()) {
                assert_eq!(via_env, Config::default(), "{key}={raw}");
            }
        }
    }

    /// One row per dialect rule: what a variable or flag's text means.
    #[test]
    fn variables_and_flags_read_values_as_the_file_does() {
        use std::time::Duration;
        type Check = fn(&Config) -> bool;
        let rows: [(&str, &str, Check); 9] = [
            ("QCACHE_CACHE_TTL", "1m30s", |c| {
                c.cache.ttl == Some(Duration::from_secs(90))
            }),
            ("QCACHE_L2_TIMEOUT", "250ms", |c| {
                c.l2.timeout == Duration::from_millis(250)
            }),
            ("QCACHE_CACHE_MAX_BYTES", "256MB", |c| {
                c.cache.max_bytes == 256_000_000
            }),
            ("QCACHE_CACHE_MAX_BYTES", "1GiB", |c| {
                c.cache.max_bytes == 1 << 30
            }),
            ("QCACHE_CACHE_MAX_RESULT_BYTES", "4096", |c| {
                c.cache.max_result_bytes == 4096
            }),
            ("QCACHE_SERVER_DEFER_BEGIN", "false", |c| {
                !c.server.defer_begin
            }),
            ("QCACHE_COMPRESSION_CLIENT", "zstd", |c| {
                c.compression.client.len() == 1
            }),
            ("QCACHE_L2_URL", "redis://a:1,redis://b:2", |c| {
                c.l2.url.nodes().len() == 2
            }),
            ("QCACHE_ADMIN_USERS", "ops,dba", |c| {
                c.admin.users == ["ops", "dba"]
            }),
        ];
        for (name, raw, check) in rows {
            let c = layered(None, [(name.to_string(), raw.to_string())], &[])
                .unwrap_or_else(|e| panic!("{name}={raw}: {e}"));
            assert!(check(&c), "{name}={raw}");
        }
        // A bad value names its variable; a secret is never echoed.
        let err = layered(None, [("QCACHE_SERVER_WORKERS".into(), "many".into())], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("QCACHE_SERVER_WORKERS"), "{err}");
        let err = layered(None, [], &["nope.key=1".to_string()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope.key"), "{err}");
        let err = layered(None, [], &["l2.url=http://u:s3cret@h,x".to_string()]);
        if let Err(e) = err {
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
        // Flags beat variables.
        let c = layered(
            None,
            [("QCACHE_SERVER_UPSTREAM".to_string(), "a:1".to_string())],
            &["server.upstream=b:2".to_string()],
        )
        .unwrap();
        assert_eq!(c.server.upstream, "b:2");
    }
}
