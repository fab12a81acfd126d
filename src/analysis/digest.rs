//! The statement digest: one xxh3 hash per query *shape*, the key of the analysis memo.
//!
//! Literals (numbers, single-quoted strings, hex and bit literals) become `?`; whitespace
//! and comments fold away; keywords and unquoted identifiers are lower-cased (table-name
//! invalidation is lower-cased anyway, so this merges nothing that invalidation separates).
//! Quoted identifiers — backquoted and double-quoted, which ANSI_QUOTES makes identifiers —
//! are kept verbatim, so two statements with one digest name the same tables. IN lists are
//! not folded: `IN (?, ?)` and `IN (?, ?, ?)` are two shapes, which costs one more parse and
//! keeps the digest a plain token map.
//!
//! A statement containing a backslash is hashed verbatim instead: whether `\'` ends a string
//! depends on NO_BACKSLASH_ESCAPES, which this lexer cannot see, and a misread string
//! boundary could hide a table name inside a "literal".

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed, Xxh3};

use super::lexer::{Lexer, Tok, Token};

/// Seed for the verbatim hash, so that it lives apart from normalised shapes.
const VERBATIM_SEED: u64 = 0x7163_6163_6865_5c5c;

/// Normalised bytes are gathered on the stack and hashed in chunks: no allocation, and a
/// short statement is hashed in one call.
struct Sink {
    buf: [u8; 512],
    len: usize,
    spill: Option<Box<Xxh3>>,
}

impl Sink {
    fn push(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > self.buf.len() {
            self.flush();
            if bytes.len() > self.buf.len() {
                self.spill
                    .get_or_insert_with(|| Box::new(Xxh3::new()))
                    .update(bytes);
                return;
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn push_lower(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(self.buf.len()) {
            if self.len + chunk.len() > self.buf.len() {
                self.flush();
            }
            let end = self.len + chunk.len();
            if let Some(dst) = self.buf.get_mut(self.len..end) {
                for (d, s) in dst.iter_mut().zip(chunk) {
                    *d = s.to_ascii_lowercase();
                }
                self.len = end;
            }
        }
    }

    fn flush(&mut self) {
        if self.len > 0 {
            self.spill
                .get_or_insert_with(|| Box::new(Xxh3::new()))
                .update(&self.buf[..self.len]);
            self.len = 0;
        }
    }

    fn finish(mut self) -> u64 {
        match self.spill.take() {
            None => xxh3_64(&self.buf[..self.len]),
            Some(mut h) => {
                h.update(&self.buf[..self.len]);
                h.digest()
            }
        }
    }
}

/// Whether a `-`/`+` after `p` starts a signed literal rather than subtracting.
fn sign_is_unary_after(sql: &[u8], p: &Token) -> bool {
    const BEFORE_OPERAND: &[&str] = &[
        "AND", "BETWEEN", "BY", "CASE", "ELSE", "IN", "INTERVAL", "IS", "LIKE", "LIMIT", "NOT",
        "OFFSET", "OR", "RETURN", "SELECT", "THEN", "VALUES", "WHEN", "XOR",
    ];
    match p.tok {
        Tok::Punct(c) => c != b')' && c != b'?',
        Tok::Word => BEFORE_OPERAND.iter().any(|k| p.is_kw(sql, k)),
        _ => false,
    }
}

/// xxh3 digest of the statement's shape (see the module doc). Never panics, whatever the bytes.
pub fn digest(sql: &[u8]) -> u64 {
    if sql.contains(&b'\\') {
        return xxh3_64_with_seed(sql, VERBATIM_SEED);
    }
    let mut sink = Sink {
        buf: [0; 512],
        len: 0,
        spill: None,
    };
    let mut lx = Lexer::new(sql).peekable();
    let mut prev: Option<Token> = None;
    while let Some(t) = lx.next() {
        // A sign in front of a number is part of the literal (`id = -1` is `id = 1`'s shape)
        // wherever no operand precedes it; after an operand it is subtraction and stays.
        if (t.is_punct(b'-') || t.is_punct(b'+'))
            && lx
                .peek()
                .is_some_and(|n| matches!(n.tok, Tok::Number | Tok::HexBin))
            && prev.is_none_or(|p| sign_is_unary_after(sql, &p))
        {
            prev = Some(t);
            continue;
        }
        match t.tok {
            Tok::Number | Tok::Str | Tok::HexBin => sink.push(b"?"),
            Tok::Word | Tok::Var => sink.push_lower(t.bytes(sql)),
            Tok::DoubleQuoted | Tok::Backquoted | Tok::Punct(_) => sink.push(t.bytes(sql)),
        }
        // The separator keeps `a b` and `ab` apart.
        sink.push(b" ");
        prev = Some(t);
    }
    sink.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) {
        assert_eq!(digest(a.as_bytes()), digest(b.as_bytes()), "{a} vs {b}");
    }

    fn differ(a: &str, b: &str) {
        assert_ne!(digest(a.as_bytes()), digest(b.as_bytes()), "{a} vs {b}");
    }

    #[test]
    fn literals_fold() {
        same("SELECT c FROM t WHERE id=42", "SELECT c FROM t WHERE id=7");
        same(
            "SELECT c FROM t WHERE id = 42",
            "select  c\nfrom t where id=1.5e3",
        );
        same(
            "SELECT * FROM t WHERE s = 'abc'",
            "SELECT * FROM t WHERE s = 'it''s'",
        );
        same(
            "SELECT * FROM t WHERE s = x'41'",
            "SELECT * FROM t WHERE s = 0x4243",
        );
        same(
            "SELECT * FROM t WHERE s = b'01'",
            "SELECT * FROM t WHERE s = 0b1",
        );
        same(
            "SELECT * FROM t WHERE s = .5",
            "SELECT * FROM t WHERE s = 12",
        );
        same(
            "SELECT * FROM t WHERE id IN (1, 2)",
            "SELECT * FROM t WHERE id IN (3, 4)",
        );
        same(
            "SELECT * FROM t WHERE s = 'a;b'",
            "SELECT * FROM t WHERE s = ''",
        );
    }

    #[test]
    fn comments_and_whitespace_fold() {
        same("SELECT /* x */ c FROM t -- y", "SELECT c FROM t");
        same("# lead\nSELECT c FROM t", "SELECT c\tFROM t");
        // Executable comments are code: their content counts.
        differ("SELECT c FROM t /*!40001 JOIN u */", "SELECT c FROM t");
        same(
            "SELECT c FROM t /*!40001 WHERE a = 1 */",
            "SELECT c FROM t /*!40001 WHERE a = 2 */",
        );
    }

    #[test]
    fn tables_and_quoted_identifiers_stay_apart() {
        differ("SELECT c FROM t1", "SELECT c FROM t2");
        differ("SELECT c FROM `T`", "SELECT c FROM `t`");
        differ("SELECT c FROM \"a\"", "SELECT c FROM \"b\"");
        differ("SELECT c FROM db1.t", "SELECT c FROM db2.t");
        differ("SELECT * FROM db.12", "SELECT * FROM db.13");
        differ("SELECT * FROM 1t", "SELECT * FROM 2t");
        differ("SELECT ab FROM t", "SELECT a b FROM t");
        differ(
            "SELECT * FROM t WHERE id IN (1, 2)",
            "SELECT * FROM t WHERE id IN (1, 2, 3)",
        );
        differ("SELECT @a FROM t", "SELECT @b FROM t");
        // Case folding of unquoted words is intended: invalidation lower-cases names too.
        same("SELECT C FROM T", "select c from t");
    }

    #[test]
    fn backslashes_hash_verbatim() {
        differ("SELECT 'a\\'' FROM t", "SELECT 'b\\'' FROM t");
        same("SELECT 'a\\'' FROM t", "SELECT 'a\\'' FROM t");
    }

    #[test]
    fn long_statements_spill_consistently() {
        let long_a = format!("SELECT {} FROM t", vec!["col_abcdefgh"; 400].join(", "));
        let long_b = long_a.to_lowercase();
        same(&long_a, &long_b);
        let mut other = long_a.clone();
        other.push_str(" WHERE a = 1");
        differ(&long_a, &other);
        let huge_word = "x".repeat(5000);
        differ(
            &format!("SELECT {huge_word}a"),
            &format!("SELECT {huge_word}b"),
        );
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            &b"\xff\xfe\x00'"[..],
            b"/*!",
            b"`",
            b"@",
            b"0x",
            b"\x80\x80 1e",
            b"--",
        ] {
            let _ = digest(s);
        }
    }
}
