//! Cache keys: xxh3-128 of a statement under a session fingerprint, and the fingerprint itself.
//!
//! The hit path computes `key()` on every cacheable statement, so it is one seeded one-shot
//! hash with no allocation. The fingerprint is the expensive, allocating part and is computed
//! only when the session's state changes.

use xxhash_rust::xxh3::{xxh3_128_with_seed, Xxh3};

/// A cache key. 128 bits so that accidental collisions between distinct statements are out of
/// reach (a collision would serve one query's result for another).
pub type Key = u128;

/// Protocol tags: the same SQL answered in the text and the binary protocol has different
/// bytes, so the two are keyed apart.
pub const TAG_TEXT: u8 = 1;
pub const TAG_BINARY: u8 = 2;

/// Odd 64-bit constant (2^64 / golden ratio) spreading the protocol tag over the whole seed.
const TAG_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// The key of `stmt` in a session whose context hashes to `session_fingerprint`, for the
/// protocol variant `protocol_tag` (text vs binary, and the negotiated flags that change the
/// result's bytes; the session chooses the encoding).
///
/// The fingerprint and tag become the xxh3 seed, so no buffer is built. Two distinct
/// (fingerprint, tag) pairs share a seed only with probability 2^-64, which is no weaker than
/// the fingerprint itself (64 bits).
#[inline]
pub fn key(session_fingerprint: u64, protocol_tag: u8, stmt: &[u8]) -> Key {
    let seed = session_fingerprint ^ (u64::from(protocol_tag) + 1).wrapping_mul(TAG_MIX);
    xxh3_128_with_seed(stmt, seed)
}

/// Builds the 64-bit fingerprint of everything in a session that changes result bytes or
/// semantics: user, default database, capability flags, character set and every session
/// variable the client set.
///
/// Variables are canonicalised (names lower-cased, sorted, the last value of a name wins), so
/// `SET a=1, b=2` and `SET b=2, a=1` give the same fingerprint and share cached results.
#[derive(Debug, Clone, Default)]
pub struct Fingerprint {
    /// `None` when the config shares entries between users.
    user: Option<String>,
    /// `None` when the session has no default database, which differs from an empty name.
    db: Option<String>,
    capabilities: u32,
    charset: u8,
    /// (lower-cased name, value); sorted and de-duplicated in `finish`.
    vars: Vec<(String, String)>,
}

/// Field tags, so that a value of one field can never be read as another's.
const F_USER: u8 = 1;
const F_DB: u8 = 2;
const F_CAPS: u8 = 3;
const F_CHARSET: u8 = 4;
const F_VAR: u8 = 5;

impl Fingerprint {
    pub fn new() -> Fingerprint {
        Fingerprint::default()
    }

    /// The authenticated user; pass `None` when users share one view of the data.
    pub fn user(&mut self, user: Option<&str>) -> &mut Self {
        self.user = user.map(str::to_owned);
        self
    }

    /// The default database (`USE db` / handshake / COM_INIT_DB).
    pub fn db(&mut self, db: Option<&str>) -> &mut Self {
        self.db = db.map(str::to_owned);
        self
    }

    /// The negotiated capability bits that change result bytes (the session masks them).
    pub fn capabilities(&mut self, caps: u32) -> &mut Self {
        self.capabilities = caps;
        self
    }

    /// The handshake character set / collation id.
    pub fn charset(&mut self, charset: u8) -> &mut Self {
        self.charset = charset;
        self
    }

    /// One session variable as the client set it. MySQL variable names are case-insensitive,
    /// values are kept byte for byte because qcache cannot know which values are.
    pub fn var(&mut self, name: &str, value: &str) -> &mut Self {
        self.vars
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// Several variables at once, e.g. straight from the session's map.
    pub fn vars<'a, I>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        for (n, v) in vars {
            self.var(n, v);
        }
        self
    }

    /// The fingerprint. Every variable-length field is length-prefixed so that, e.g., user
    /// "ab" + db "c" cannot hash like user "a" + db "bc".
    pub fn finish(&self) -> u64 {
        let mut h = Xxh3::new();
        fn field(h: &mut Xxh3, tag: u8, v: Option<&str>) {
            match v {
                None => h.update(&[tag, 0]),
                Some(s) => {
                    h.update(&[tag, 1]);
                    h.update(&(s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
            }
        }
        field(&mut h, F_USER, self.user.as_deref());
        field(&mut h, F_DB, self.db.as_deref());
        h.update(&[F_CAPS]);
        h.update(&self.capabilities.to_le_bytes());
        h.update(&[F_CHARSET, self.charset]);

        // Stable sort by name keeps insertion order among equal names, so the last one set is
        // the last of its run and the one that counts.
        let mut vars: Vec<&(String, String)> = self.vars.iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        for (i, (name, value)) in vars.iter().map(|p| (&p.0, &p.1)).enumerate() {
            if vars.get(i + 1).is_some_and(|next| &next.0 == name) {
                continue;
            }
            field(&mut h, F_VAR, Some(name));
            field(&mut h, F_VAR, Some(value));
        }
        h.digest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_differs_by_fingerprint_tag_and_stmt() {
        let base = key(1, 0, b"SELECT 1");
        assert_eq!(base, key(1, 0, b"SELECT 1"));
        assert_ne!(base, key(2, 0, b"SELECT 1"));
        assert_ne!(base, key(1, 1, b"SELECT 1"));
        assert_ne!(base, key(1, 0, b"SELECT 2"));
        assert_ne!(base, key(1, 0, b"SELECT 1 "));
        // The tag must not cancel out against the fingerprint for small values.
        assert_ne!(key(0, 1, b"x"), key(1, 0, b"x"));
        assert_ne!(key(0, 0, b""), key(0, 1, b""));
    }

    fn fp(f: impl FnOnce(&mut Fingerprint)) -> u64 {
        let mut b = Fingerprint::new();
        b.user(Some("app"))
            .db(Some("shop"))
            .capabilities(0x0100_0200);
        b.charset(45);
        f(&mut b);
        b.finish()
    }

    #[test]
    fn fingerprint_is_canonical_over_variable_order_and_case() {
        let a = fp(|b| {
            b.var("sql_mode", "ANSI").var("time_zone", "+00:00");
        });
        let c = fp(|b| {
            b.var("TIME_ZONE", "+00:00").var("Sql_Mode", "ANSI");
        });
        assert_eq!(a, c);
        // Last value of a name wins, wherever it sits.
        let d = fp(|b| {
            b.var("sql_mode", "X")
                .var("time_zone", "+00:00")
                .var("SQL_MODE", "ANSI");
        });
        assert_eq!(a, d);
    }

    #[test]
    fn fingerprint_differs_by_each_field() {
        let base = fp(|_| {});
        let mut other = Fingerprint::new();
        other
            .user(Some("app"))
            .db(Some("shop"))
            .capabilities(0x0100_0200)
            .charset(45);
        assert_eq!(base, other.finish());

        assert_ne!(
            base,
            fp(|b| {
                b.user(None);
            })
        );
        assert_ne!(
            base,
            fp(|b| {
                b.user(Some("ap"));
            })
        );
        assert_ne!(
            base,
            fp(|b| {
                b.db(None);
            })
        );
        assert_ne!(
            base,
            fp(|b| {
                b.db(Some(""));
            })
        );
        assert_ne!(
            base,
            fp(|b| {
                b.capabilities(0x0100_0000);
            })
        );
        assert_ne!(
            base,
            fp(|b| {
                b.charset(33);
            })
        );
        assert_ne!(
            base,
            fp(|b| {
                b.var("a", "1");
            })
        );
        assert_ne!(
            fp(|b| {
                b.var("a", "1");
            }),
            fp(|b| {
                b.var("a", "2");
            })
        );
        // Length prefixes: moving a byte from user to db changes the fingerprint.
        let mut x = Fingerprint::new();
        x.user(Some("ab")).db(Some("c"));
        let mut y = Fingerprint::new();
        y.user(Some("a")).db(Some("bc"));
        assert_ne!(x.finish(), y.finish());
        // Name/value boundary inside a variable.
        assert_ne!(
            fp(|b| {
                b.var("ab", "c");
            }),
            fp(|b| {
                b.var("a", "bc");
            })
        );
    }
}
