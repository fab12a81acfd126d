//! One configuration dialect: every key of the file is also a `QCACHE_<SECTION>_<KEY>`
//! variable and a `--set section.key=value` flag, and each value is read by the file's own
//! parser (serde), so `1m30s`, `256MB` and `true` mean the same everywhere. Precedence:
//! flag > variable > file > default. The `config` crate lays the sources over each other
//! and reads each text as the type its key wants; here are only qcache's names for them.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Value;

use super::{redact, redact_secret, Config, ConfigError};

/// Keys only a file can set: lists of tables.
const FILE_ONLY: &[&str] = &["rules"];
/// Keys with no default (absent unless set); each holds a duration.
const OPTIONAL: &[&str] = &["cache.ttl", "log.slow_miss"];

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

/// The variable that sets `key`: `server.upstream` → `QCACHE_SERVER_UPSTREAM`. Keys hold
/// underscores too, so the name cannot be split back: [`layered`] looks it up instead.
pub fn env_name(key: &str) -> String {
    format!("QCACHE_{}", key.replace('.', "_").to_ascii_uppercase())
}

/// One value laid over the file: its key, its text, and where it came from (for errors).
#[derive(Debug, Clone)]
pub struct Setting {
    pub key: String,
    pub raw: String,
    pub source: String,
}

/// The config of `file` (or the defaults), with every `QCACHE_*` variable in `env` that
/// names a key laid over it, then every `--set key=value` of `sets`.
pub fn layered(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    sets: &[String],
) -> Result<Config, ConfigError> {
    layered_with(file, env, Vec::new(), sets)
}

/// [`layered`] with `named` (the named flags such as `--upstream`) between the variables
/// and `--set`.
pub fn layered_with(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    named: Vec<Setting>,
    sets: &[String],
) -> Result<Config, ConfigError> {
    let mut builder = config::Config::builder();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        // Read once by itself for its error messages (line, column, key).
        Config::from_toml(&text, &path.display().to_string())?;
        builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
    }
    let by_name: BTreeMap<String, String> = keys().into_iter().map(|k| (env_name(&k), k)).collect();
    let variables = env
        .into_iter()
        .filter_map(|(name, raw)| {
            let key = by_name.get(&name)?.clone();
            Some(Setting {
                key,
                raw,
                source: name,
            })
        })
        .collect();
    let layers = [variables, named, flags(sets)?];
    for layer in &layers {
        // Keys are dotted paths already; the values stay text, which the crate converts to
        // the type each key asks for (a string key keeps `0123`).
        let map = layer
            .iter()
            .map(|s| (s.key.clone(), s.raw.clone()))
            .collect();
        builder = builder.add_source(config::Environment::default().source(Some(map)));
    }
    let built = builder.build().map_err(|e| invalid(&e, &layers))?;
    built
        .try_deserialize::<Config>()
        .map_err(|e| invalid(&e, &layers))
}

/// `raw` read as `key`'s value alone, returned as is: the value parser of the named flags,
/// so that a bad value is refused with the flag's name as the command line is parsed.
pub fn checked(key: &str, raw: &str) -> Result<String, String> {
    let alone = Setting {
        key: key.to_string(),
        raw: raw.to_string(),
        source: key.to_string(),
    };
    match layered_with(None, [], vec![alone], &[]) {
        Ok(_) => Ok(raw.to_string()),
        Err(ConfigError::Invalid(m)) => Err(m),
        Err(e) => Err(e.to_string()),
    }
}

/// `--set section.key=value` flags, each naming a key.
fn flags(sets: &[String]) -> Result<Vec<Setting>, ConfigError> {
    let keys = keys();
    sets.iter()
        .map(|set| {
            let (key, raw) = set.split_once('=').ok_or_else(|| {
                ConfigError::Invalid(format!("--set {set:?}: expected section.key=value"))
            })?;
            let key = key.trim();
            if !keys.iter().any(|k| k == key) {
                return Err(ConfigError::Invalid(format!(
                    "--set {key}: no key {key:?} (every key is documented in config/qcache.toml)"
                )));
            }
            Ok(Setting {
                key: key.to_string(),
                raw: raw.to_string(),
                source: format!("--set {key}"),
            })
        })
        .collect()
}

/// The crate's error, naming the variable or flag whose value it refused (the highest
/// layer that set the key it names) and never printing a secret.
fn invalid(e: &config::ConfigError, layers: &[Vec<Setting>]) -> ConfigError {
    let message = super::one_line(&e.to_string()).replace(" in the environment", "");
    let named = |s: &&Setting| {
        message.contains(&format!("`{}`", s.key)) || message.contains(&format!("`{}[", s.key))
    };
    let Some(setting) = layers.iter().rev().find_map(|l| l.iter().rev().find(named)) else {
        return ConfigError::Invalid(redact(&message));
    };
    let shown = if setting.key.ends_with("password") {
        redact_secret(&setting.raw).to_string()
    } else {
        redact(&setting.raw)
    };
    let message = if setting.raw.is_empty() {
        message
    } else {
        message.replace(&setting.raw, &shown)
    };
    ConfigError::Invalid(format!(
        "{} = {shown:?}: {message} (the value is read as in the config file)",
        setting.source
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_at(key: &str) -> Option<Value> {
        let mut v = Value::try_from(Config::default()).ok()?;
        for part in key.split('.') {
            v = v.as_table()?.get(part)?.clone();
        }
        Some(v)
    }

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
        let rows: [(&str, &str, Check); 10] = [
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
            // A string key keeps text that looks like a number.
            ("QCACHE_L2_KEY_PREFIX", "0123", |c| {
                c.l2.key_prefix == "0123"
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
        // Variables beat the file, which beats the defaults; a one-node list stays a list.
        let path = std::env::temp_dir().join(format!("qcache-layers-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            "[server]\nupstream = \"f:1\"\nworkers = 3\n[l2]\nurl = [\"redis://a:1\"]\n",
        )
        .unwrap();
        let c = layered(
            Some(&path),
            [("QCACHE_SERVER_UPSTREAM".to_string(), "v:2".to_string())],
            &[],
        );
        std::fs::remove_file(&path).unwrap();
        let c = c.unwrap();
        assert_eq!(c.server.upstream, "v:2");
        assert_eq!(c.server.workers, 3);
        assert_eq!(
            c.l2.url,
            crate::config::L2Url::Cluster(vec!["redis://a:1".into()])
        );
        assert_eq!(c.cache, Config::default().cache);
        // Flags beat variables.
        let c = layered(
            None,
            [("QCACHE_SERVER_UPSTREAM".to_string(), "a:1".to_string())],
            &["server.upstream=b:2".to_string()],
        )
        .unwrap();
        assert_eq!(c.server.upstream, "b:2");
    }

    /// A key's variable: `QCACHE_`, the section path with dots as underscores, upper case.
    #[test]
    fn variable_names_of_keys() {
        for (key, want) in [
            ("server.upstream", "QCACHE_SERVER_UPSTREAM"),
            ("tls.client.cert", "QCACHE_TLS_CLIENT_CERT"),
            ("cache.max_result_bytes", "QCACHE_CACHE_MAX_RESULT_BYTES"),
            ("l2.key_prefix", "QCACHE_L2_KEY_PREFIX"),
        ] {
            assert_eq!(env_name(key), want, "{key}");
        }
    }

    /// The key list: sorted, without the file-only `rules`, with the optional keys that
    /// have no default.
    #[test]
    fn the_key_list() {
        let keys = keys();
        assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicates"
        );
        assert!(!keys.iter().any(|k| k == "rules" || k.starts_with("rules.")));
        for k in OPTIONAL {
            assert!(keys.iter().any(|x| x == k), "{k}");
        }
        for k in ["server.upstream", "cache.max_bytes", "tls.upstream.mode"] {
            assert!(keys.iter().any(|x| x == k), "{k}");
        }
    }

    /// A named flag's value is checked alone, as that key's: returned as given when valid,
    /// refused with the key's name when not.
    #[test]
    fn flag_values_are_checked_as_their_key() {
        for (key, raw, ok) in [
            ("server.upstream", "db:3306", true),
            ("server.workers", "4", true),
            ("server.workers", "many", false),
            ("cache.max_bytes", "64MiB", true),
            ("cache.ttl", "30s", true),
            ("cache.ttl", "soon", false),
            ("server.defer_begin", "maybe", false),
        ] {
            match checked(key, raw) {
                Ok(v) => {
                    assert!(ok, "{key}={raw} accepted");
                    assert_eq!(v, raw);
                }
                Err(e) => {
                    assert!(!ok, "{key}={raw}: {e}");
                    assert!(e.contains(key), "{key}={raw}: {e}");
                }
            }
        }
    }

    /// Variables that name no key are ignored (the environment holds other programs'
    /// variables too), and a --set without `=` is refused.
    #[test]
    fn unknown_variables_are_ignored_and_bad_sets_refused() {
        let c = layered(
            None,
            [
                ("QCACHE_NO_SUCH_KEY".to_string(), "1".to_string()),
                ("PATH".to_string(), "/bin".to_string()),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(c, Config::default());
        let err = layered(None, [], &["server.upstream".to_string()]).unwrap_err();
        assert!(
            err.to_string().contains("expected section.key=value"),
            "{err}"
        );
    }
}
