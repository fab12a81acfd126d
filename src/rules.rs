//! Operator rules (`[[rules]]`): which reads are never cached and which get their own TTL,
//! bounded staleness (`max_stale`) or no empty results (`cache_empty`), matched on a miss by
//! schema, table, user, digest or a regex on the statement.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a matching rule does to a cacheable read.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Cache as usual; with `ttl`, the entry also expires after it.
    Cache,
    /// Never store the result (counted as not cached with reason "rule").
    Never,
}

/// A compiled regex that compares, prints and parses as its source text, so that rules stay
/// part of the plain, swappable `Config`. An invalid pattern fails the config's parse.
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Serialize for Pattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pattern, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text)
            .map(Pattern)
            .map_err(serde::de::Error::custom)
    }
}

/// A statement digest written as hex (what `SHOW QCACHE ENTRIES` prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(pub u64);

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:016x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Digest, D::Error> {
        let text = String::deserialize(d)?;
        let hex = text.trim_start_matches("0x");
        u64::from_str_radix(hex, 16)
            .map(Digest)
            .map_err(|_| serde::de::Error::custom(format!("digest {text:?} is not hex")))
    }
}

/// One `[[rules]]` entry. Every match field given must match; an empty rule matches all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Schema of a table the read depends on (`*` globs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Name of a table the read depends on (`*` globs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The session's user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The statement's digest (literals replaced), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// A regex searched in the statement text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<Pattern>,
    pub action: Action,
    /// With `action = "cache"`: the entry expires this long after it is stored (the global
    /// `cache.ttl`, when shorter, still wins).
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl: Option<Duration>,
    /// With `action = "cache"`: after a data change invalidates an entry, other sessions may
    /// still be served it while one session refreshes it, as long as less than this has
    /// passed since its query was sent (`policy::stale`). Off when absent.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_stale: Option<Duration>,
    /// With `action = "cache"`: `false` stores no result of 0 rows (a read that finds nothing
    /// now is asked again next time). Absent means true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_empty: Option<bool>,
}

/// What a `cache` rule sets for the entries of the reads it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub ttl: Option<Duration>,
    pub max_stale: Option<Duration>,
    pub cache_empty: bool,
}

impl Default for Options {
    /// What a read no rule matches gets: no TTL of its own, never stale, empties stored.
    fn default() -> Options {
        Options {
            ttl: None,
            max_stale: None,
            cache_empty: true,
        }
    }
}

/// What the matching rule decided for one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No rule matched: default behaviour.
    Default,
    Never,
    Cache(Options),
}

/// What a read looks like to the rules.
pub struct Subject<'a> {
    /// (schema, table) of every base table the read depends on, lower case.
    pub tables: &'a [(String, String)],
    pub user: &'a str,
    pub digest: u64,
    pub sql: &'a str,
}

/// `*` matches any run of characters; everything else literally, case-insensitively (MySQL
/// names are compared that way on the platforms qcache runs beside).
pub fn glob(pattern: &str, s: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some((c, rest)) => s
                .first()
                .is_some_and(|x| x.eq_ignore_ascii_case(c) && go(rest, &s[1..])),
        }
    }
    go(pattern.as_bytes(), s.as_bytes())
}

impl Rule {
    pub fn matches(&self, r: &Subject) -> bool {
        if self.schema.is_some() || self.table.is_some() {
            let any = r.tables.iter().any(|(s, t)| {
                self.schema.as_deref().is_none_or(|p| glob(p, s))
                    && self.table.as_deref().is_none_or(|p| glob(p, t))
            });
            if !any {
                return false;
            }
        }
        self.user.as_deref().is_none_or(|u| u == r.user)
            && self.digest.is_none_or(|d| d.0 == r.digest)
            && self.regex.as_ref().is_none_or(|p| p.0.is_match(r.sql))
    }
}

/// The first matching rule's verdict.
pub fn evaluate(rules: &[Rule], r: &Subject) -> Verdict {
    match rules.iter().find(|rule| rule.matches(r)) {
        None => Verdict::Default,
        Some(rule) => match rule.action {
            Action::Never => Verdict::Never,
            Action::Cache => Verdict::Cache(Options {
                ttl: rule.ttl,
                max_stale: rule.max_stale,
                cache_empty: rule.cache_empty.unwrap_or(true),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_text: &str) -> Vec<Rule> {
        #[derive(Deserialize)]
        struct W {
            rules: Vec<Rule>,
        }
        toml::from_str::<W>(toml_text).expect("rules parse").rules
    }

    fn subject<'a>(tables: &'a [(String, String)], sql: &'a str) -> Subject<'a> {
        Subject {
            tables,
            user: "app",
            digest: 0xabc,
            sql,
        }
    }

    #[test]
    fn first_match_wins() {
        let r = rules(
            r#"
            [[rules]]
            schema = "shop"
            table = "orders"
            action = "never"
            [[rules]]
            schema = "catalog"
            table = "*"
            action = "cache"
            ttl = "60s"
            [[rules]]
            regex = "(?i)from\\s+shop\\."
            action = "never"
            "#,
        );
        let orders = [("shop".to_string(), "orders".to_string())];
        let items = [("catalog".to_string(), "items".to_string())];
        let other = [("x".to_string(), "y".to_string())];
        assert_eq!(evaluate(&r, &subject(&orders, "")), Verdict::Never);
        assert_eq!(
            evaluate(&r, &subject(&items, "")),
            Verdict::Cache(Options {
                ttl: Some(Duration::from_secs(60)),
                ..Options::default()
            })
        );
        assert_eq!(evaluate(&r, &subject(&other, "select 1")), Verdict::Default);
        assert_eq!(
            evaluate(&r, &subject(&other, "SELECT * FROM shop.x")),
            Verdict::Never
        );
    }

    #[test]
    fn user_and_digest() {
        let r =
            rules("[[rules]]\nuser = \"app\"\ndigest = \"0000000000000abc\"\naction = \"never\"\n");
        let t = [("a".to_string(), "b".to_string())];
        assert_eq!(evaluate(&r, &subject(&t, "")), Verdict::Never);
        let mut s = subject(&t, "");
        s.user = "other";
        assert_eq!(evaluate(&r, &s), Verdict::Default);
    }

    #[test]
    fn bad_fields_are_refused() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct W {
            rules: Vec<Rule>,
        }
        assert!(toml::from_str::<W>("[[rules]]\nregex = \"(\"\naction = \"never\"\n").is_err());
        assert!(toml::from_str::<W>("[[rules]]\ndigest = \"xyz\"\naction = \"never\"\n").is_err());
        assert!(toml::from_str::<W>("[[rules]]\ntabel = \"t\"\naction = \"never\"\n").is_err());
        assert!(toml::from_str::<W>("[[rules]]\naction = \"sometimes\"\n").is_err());
    }

    /// The commented examples in config/qcache.toml stay valid.
    #[test]
    fn example_file_rules_parse() {
        let text = include_str!("../config/qcache.toml");
        let start = text
            .find("# [[rules]]")
            .expect("rule examples in the example file");
        let body: String = text[start..]
            .lines()
            .take_while(|l| l.starts_with('#') || l.trim().is_empty())
            .map(|l| l.strip_prefix("# ").unwrap_or(l.trim_start_matches('#')))
            .collect::<Vec<_>>()
            .join("\n");
        let r = rules(&body);
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].action, Action::Never);
        assert_eq!(r[1].ttl, Some(Duration::from_secs(60)));
        assert!(r[2]
            .regex
            .as_ref()
            .is_some_and(|p| p.0.is_match("x group by y")));
        assert_eq!(r[3].digest, Some(Digest(0x9f2c4e1a77b03d15)));
        assert_eq!(r[4].max_stale, Some(Duration::from_secs(2)));
        assert_eq!(r[4].cache_empty, Some(false));
    }

    #[test]
    fn globs() {
        assert!(glob("*", "anything"));
        assert!(glob("cat*", "Catalog"));
        assert!(glob("*_log", "audit_log"));
        assert!(!glob("orders", "orders2"));
    }

    fn rule(schema: Option<&str>, table: Option<&str>) -> Rule {
        Rule {
            schema: schema.map(str::to_string),
            table: table.map(str::to_string),
            user: None,
            digest: None,
            regex: None,
            action: Action::Never,
            ttl: None,
            max_stale: None,
            cache_empty: None,
        }
    }

    /// Schema and table must match one and the same table the read depends on, not one
    /// table's schema and another's name.
    #[test]
    fn schema_and_table_match_one_table() {
        let tables = [
            ("shop".to_string(), "orders".to_string()),
            ("audit".to_string(), "log".to_string()),
        ];
        let s = subject(&tables, "");
        let cases = [
            (rule(Some("shop"), Some("orders")), true),
            (rule(Some("audit"), Some("log")), true),
            (rule(Some("shop"), Some("log")), false),
            (rule(Some("shop"), None), true),
            (rule(None, Some("log")), true),
            (rule(Some("s*"), Some("*ers")), true),
            (rule(Some("other"), None), false),
        ];
        for (r, want) in cases {
            assert_eq!(r.matches(&s), want, "{:?} {:?}", r.schema, r.table);
        }
        // A rule on tables never matches a read of none.
        assert!(!rule(Some("*"), None).matches(&subject(&[], "SELECT 1")));
    }

    /// A rule with no match field matches every read; its action decides.
    #[test]
    fn an_empty_rule_matches_everything() {
        let r = rule(None, None);
        assert!(r.matches(&subject(&[], "SELECT 1")));
        let cache = Rule {
            action: Action::Cache,
            ttl: Some(Duration::from_secs(5)),
            ..rule(None, None)
        };
        let want = Verdict::Cache(Options {
            ttl: Some(Duration::from_secs(5)),
            ..Options::default()
        });
        assert_eq!(evaluate(&[cache], &subject(&[], "x")), want);
        assert_eq!(evaluate(&[], &subject(&[], "x")), Verdict::Default);
    }

    /// A regex is searched anywhere in the statement, case as written.
    #[test]
    fn regexes_search_the_text() {
        let r = rules("[[rules]]\nregex = \"FROM\\\\s+orders\"\naction = \"never\"\n");
        for (sql, want) in [
            ("SELECT * FROM orders WHERE id = 1", Verdict::Never),
            ("SELECT * FROM  orders", Verdict::Never),
            ("select * from orders", Verdict::Default),
            ("SELECT 1", Verdict::Default),
        ] {
            assert_eq!(evaluate(&r, &subject(&[], sql)), want, "{sql}");
        }
    }

    /// Digests are written as 16 hex digits and read with or without `0x`.
    #[test]
    fn digests_are_hex() {
        #[derive(Serialize, Deserialize)]
        struct W {
            d: Digest,
        }
        let text = toml::to_string(&W { d: Digest(0xabc) }).unwrap();
        assert_eq!(text.trim(), "d = \"0000000000000abc\"");
        for (hex, want) in [
            ("abc", Some(0xabc)),
            ("0xABC", Some(0xabc)),
            ("0x", None),
            ("g1", None),
        ] {
            let got = toml::from_str::<W>(&format!("d = {hex:?}"))
                .ok()
                .map(|w| w.d.0);
            assert_eq!(got, want, "{hex}");
        }
    }

    /// A pattern compares and prints as its source text.
    #[test]
    fn patterns_are_their_source() {
        let a = Pattern(regex::Regex::new("a+").unwrap());
        let b = Pattern(regex::Regex::new("a+").unwrap());
        let c = Pattern(regex::Regex::new("a{1,}").unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c, "the same language, another source");
        #[derive(Serialize)]
        struct W {
            p: Pattern,
        }
        assert_eq!(toml::to_string(&W { p: a }).unwrap().trim(), "p = \"a+\"");
    }

    /// `max_stale` and `cache_empty` reach the verdict; absent, they are off and true.
    #[test]
    fn stale_and_empty_options() {
        let r = rules(
            "[[rules]]\ntable = \"dash\"\naction = \"cache\"\nmax_stale = \"1500ms\"\ncache_empty = false\n\
             [[rules]]\ntable = \"*\"\naction = \"cache\"\n",
        );
        let dash = [("s".to_string(), "dash".to_string())];
        let other = [("s".to_string(), "o".to_string())];
        assert_eq!(
            evaluate(&r, &subject(&dash, "")),
            Verdict::Cache(Options {
                ttl: None,
                max_stale: Some(Duration::from_millis(1500)),
                cache_empty: false,
            })
        );
        assert_eq!(
            evaluate(&r, &subject(&other, "")),
            Verdict::Cache(Options::default())
        );
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct W {
            rules: Vec<Rule>,
        }
        assert!(
            toml::from_str::<W>("[[rules]]\naction = \"cache\"\nmax_stale = \"soon\"\n").is_err()
        );
        assert!(
            toml::from_str::<W>("[[rules]]\naction = \"cache\"\ncache_empty = \"no\"\n").is_err()
        );
    }

    /// More glob rows: stars anywhere, any number, an empty name.
    #[test]
    fn globs_with_several_stars() {
        for (p, s, want) in [
            ("*a*b*", "xaybz", true),
            ("*a*b*", "xbya", false),
            ("**", "", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "", false),
            ("ORD*", "orders", true),
        ] {
            assert_eq!(glob(p, s), want, "{p} {s}");
        }
    }
}
