//! Comments as the upstream server reads them: which executable comments (`/*!NNNNN … */`,
//! `/*M!NNNNNN … */`) it runs and which it skips, from the version in its greeting; and
//! which plain comments a cache key leaves out ([`key_text`]).
//!
//! The server skips a versioned comment whose version is above its own, so
//! `/*!999999 SELECT */ UPDATE t …` is an UPDATE to it. Every analysis (scan, digest,
//! sqlparser, the binlog tail's) reads [`server_text`]: the statement with each comment the
//! server skips turned into a plain comment of the same length, so byte offsets still hold.
//!
//! The rules, checked against MariaDB 10.11 (`sql_lex.cc`, and by experiment):
//! - `/*!` and, on MariaDB only, `/*M!`, followed by exactly five digits (a sixth is taken
//!   when present) carry a version; with fewer digits there is no version, the comment runs
//!   and the digits are code.
//! - MariaDB runs a versioned comment when `version <= its MYSQL_VERSION_ID`, except that a
//!   `/*!` comment whose version lies in 50700..=99999 (MySQL 5.7 and 8 syntax) is skipped;
//!   `/*M!` comments run whenever the version is low enough. `/*m!` is a plain comment.
//! - A skipped comment may hold one nested `/* … */`.
//! - MySQL runs `/*!` comments with `version <= its version`; `/*M!` is a plain comment.

use std::borrow::Cow;

use super::lexer::Lexer;
use super::version::ServerVersion;

/// `sql` as `server` reads it: every executable comment it skips becomes a plain comment of
/// the same length (`/*` … `*/`, its content blanked). Borrowed when there is none, which a
/// byte search decides for nearly every statement.
pub fn server_text(sql: &[u8], server: ServerVersion) -> Cow<'_, [u8]> {
    let any = sql
        .windows(3)
        .any(|w| w[0] == b'/' && w[1] == b'*' && (w[2] == b'!' || w[2] == b'M'));
    if !any {
        return Cow::Borrowed(sql);
    }
    let mut lx = Lexer::for_server(sql, server);
    for _ in lx.by_ref() {}
    let skipped = lx.take_skipped();
    if skipped.is_empty() {
        return Cow::Borrowed(sql);
    }
    let mut out = sql.to_vec();
    for r in skipped {
        let Some(region) = out.get_mut(r) else {
            continue;
        };
        let closed = region.len() >= 4 && region.ends_with(b"*/");
        region.fill(b' ');
        region[0] = b'/';
        if let Some(b) = region.get_mut(1) {
            *b = b'*';
        }
        if closed {
            let n = region.len();
            region[n - 2] = b'*';
            region[n - 1] = b'/';
        }
    }
    Cow::Owned(out)
}

/// [`server_text`] as a string, for the analyses that take `&str`.
pub fn server_str(sql: &str, server: ServerVersion) -> Cow<'_, str> {
    match server_text(sql.as_bytes(), server) {
        Cow::Borrowed(_) => Cow::Borrowed(sql),
        // Only ASCII replaced whole comments (whose bytes are all inside the comment), but a
        // comment may end inside a multi-byte character of invalid input: decode lossily.
        Cow::Owned(b) => Cow::Owned(
            String::from_utf8(b)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        ),
    }
}

/// The part of a statement a cache key hashes: `sql` without the plain comments (and the
/// whitespace around them) before its first token and after its last. Tracing tools
/// (sqlcommenter, marginalia, Datadog DBM) put a comment that changes on every request
/// there, and the server reads a comment as whitespace, so the reads are the same read.
///
/// Only the ends: a comment between tokens is kept, because MariaDB names a column after the
/// expression's text, comments included (`SELECT 1 /*x*/ + 2` is column `1 /*x*/ + 2`).
/// Executable comments (`/*!…*/`, `/*M!…*/`) and hints (`/*+…*/`) are code and stay. Fail
/// closed: a statement with a backslash (where a string ends depends on sql_mode's
/// NO_BACKSLASH_ESCAPES, which qcache does not follow here), an unterminated quote or
/// comment (an error, which a trimmed text would not be), or an executable comment holding
/// quotes or comment starts is returned whole.
///
/// A slice of `sql`, never a copy; on the hit path one pass over the bytes, eight at a
/// time, decides that a statement without `/`, `-` or `#` has nothing to trim.
pub fn key_text(sql: &[u8]) -> &[u8] {
    if !may_hold_comment(sql) {
        return sql;
    }
    trim_comments(sql).unwrap_or(sql)
}

/// Whether `sql` holds a `/`, `-` or `#` byte. A word at a time (SWAR): a per-byte loop cost
/// about 15 instructions per byte of a point select on the hit path (callgrind).
fn may_hold_comment(sql: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // Non-zero exactly when some byte of `v` is zero.
    let zero_byte = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let mut words = sql.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let v = u64::from_le_bytes(b);
        let found = zero_byte(v ^ (LO * u64::from(b'/')))
            | zero_byte(v ^ (LO * u64::from(b'-')))
            | zero_byte(v ^ (LO * u64::from(b'#')));
        if found != 0 {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| matches!(b, b'/' | b'-' | b'#'))
}

/// `sql[start..end]` without the leading and trailing plain comments; None when the
/// statement must be keyed whole (see [`key_text`]).
fn trim_comments(sql: &[u8]) -> Option<&[u8]> {
    // Anywhere, in a literal above all: `'x\' /*'` ends its string at `\'` or not by mode.
    if sql.contains(&b'\\') {
        return None;
    }
    let n = sql.len();
    let at = |i: usize| sql.get(i).copied().unwrap_or(0);
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    // Where code starts (None until the first code byte) and where the last code ends.
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut i = 0;
    while i < n {
        let b = sql[i];
        match b {
            _ if space(b) => i += 1,
            b'#' => i = line_end(sql, i),
            // The server wants whitespace or a control byte (or the end) after `--`.
            b'-' if at(i + 1) == b'-'
                && (i + 2 >= n || super::lexer::opens_dash_comment(at(i + 2))) =>
            {
                i = line_end(sql, i)
            }
            b'/' if at(i + 1) == b'*' => {
                let close = sql.get(i + 2..)?.windows(2).position(|w| w == b"*/")? + i + 2;
                let c2 = at(i + 2);
                let code =
                    c2 == b'!' || c2 == b'+' || ((c2 == b'M' || c2 == b'm') && at(i + 3) == b'!');
                if code {
                    // Its content is lexed as code by the server: keep it simple and key
                    // whole any that could hide a string or a comment.
                    let body = &sql[i + 2..close];
                    let hides = body
                        .iter()
                        .any(|&c| matches!(c, b'\'' | b'"' | b'`' | b'#'))
                        || body.windows(2).any(|w| w == b"/*" || w == b"--");
                    if hides {
                        return None;
                    }
                    start.get_or_insert(i);
                    end = close + 2;
                }
                i = close + 2;
            }
            b'\'' | b'"' | b'`' => {
                start.get_or_insert(i);
                i = quoted_end(sql, i)?;
                end = i;
            }
            _ => {
                start.get_or_insert(i);
                i += 1;
                end = i;
            }
        }
    }
    let start = start?;
    (start < end).then(|| &sql[start..end])
}

/// Past the `\n` that ends a line comment starting at `from` (or the end of `sql`).
fn line_end(sql: &[u8], from: usize) -> usize {
    match sql[from..].iter().position(|&c| c == b'\n') {
        Some(off) => from + off + 1,
        None => sql.len(),
    }
}

/// Past the quote closing the run opened at `from` (a doubled quote stands for itself);
/// None when it is never closed. No backslash reaches here.
fn quoted_end(sql: &[u8], from: usize) -> Option<usize> {
    let q = sql[from];
    let mut i = from + 1;
    while i < sql.len() {
        if sql[i] == q {
            if sql.get(i + 1) == Some(&q) {
                i += 2;
            } else {
                return Some(i + 1);
            }
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARIA: ServerVersion = ServerVersion {
        id: 101119,
        mariadb: true,
    };
    const MYSQL: ServerVersion = ServerVersion {
        id: 80036,
        mariadb: false,
    };

    fn text(sql: &str, v: ServerVersion) -> String {
        String::from_utf8(server_text(sql.as_bytes(), v).into_owned()).unwrap()
    }

    #[test]
    fn greeting_versions() {
        for (s, id, maria) in [
            ("5.5.5-10.11.19-MariaDB-0+deb12u1", 101119, true),
            ("11.4.2-MariaDB-log", 110402, true),
            ("8.0.36", 80036, false),
            ("8.4.0-commercial", 80400, false),
            ("5.7.44-log", 50744, false),
            ("garbage", ServerVersion::DEFAULT.id, false),
            ("", ServerVersion::DEFAULT.id, false),
        ] {
            assert_eq!(
                ServerVersion::from_greeting(s),
                ServerVersion { id, mariadb: maria },
                "{s}"
            );
        }
    }

    /// One row per rule, each checked against MariaDB 10.11.19 with `SELECT 1 /*…+1 */`.
    #[test]
    fn which_comments_run() {
        for (marker_version, maria_marker, runs_on_maria, runs_on_mysql) in [
            (50699, false, true, true),
            (50700, false, false, true),
            (80036, false, false, true),
            (99999, false, false, false),
            (100000, false, true, false),
            (101119, false, true, false),
            (101120, false, false, false),
            (999999, false, false, false),
            (50700, true, true, false),
            (100000, true, true, false),
            (999999, true, false, false),
        ] {
            assert_eq!(
                MARIA.runs(marker_version, maria_marker),
                runs_on_maria,
                "{marker_version} M:{maria_marker}"
            );
            assert_eq!(
                MYSQL.runs(marker_version, maria_marker),
                runs_on_mysql,
                "{marker_version} M:{maria_marker} mysql"
            );
        }
    }

    #[test]
    fn skipped_comments_become_plain() {
        // (statement, server, the comment the server skips, if any)
        let cases: &[(&str, ServerVersion, Option<&str>)] = &[
            ("SELECT 1", MARIA, None),
            (
                "/*!999999 SELECT */ UPDATE t SET a=1",
                MARIA,
                Some("/*!999999 SELECT */"),
            ),
            (
                "/*M!999999 SELECT */ UPDATE t",
                MARIA,
                Some("/*M!999999 SELECT */"),
            ),
            (
                "/*!50700 SELECT */ DELETE FROM t",
                MARIA,
                Some("/*!50700 SELECT */"),
            ),
            ("/*!50700 SELECT */ DELETE FROM t", MYSQL, None),
            (
                "/*M!100000 SELECT */ 1",
                MYSQL,
                Some("/*M!100000 SELECT */"),
            ),
            ("/*!100000 UPDATE */ t SET a=1", MARIA, None),
            // One nested comment is part of the skipped one.
            (
                "SELECT 1 /*!999999 +1 /* x */ +2 */ +4",
                MARIA,
                Some("/*!999999 +1 /* x */ +2 */"),
            ),
            // Inside a string it is no comment at all.
            ("SELECT '/*!999999 x */' FROM t", MARIA, None),
            // Fewer than five digits: no version, the comment runs.
            ("/*!123 SELECT */", MARIA, None),
        ];
        for (sql, v, skipped) in cases {
            let want = match skipped {
                None => sql.to_string(),
                Some(c) => sql.replace(c, &format!("/*{}*/", " ".repeat(c.len() - 4))),
            };
            assert_eq!(text(sql, *v), want, "{sql}");
        }
        // Unterminated: to the end, as the server reads it.
        assert_eq!(
            text("UPDATE t /*!999999 x", MARIA),
            format!("UPDATE t /*{}", " ".repeat(9))
        );
    }

    /// Every byte value at every position of words and remainders.
    #[test]
    fn comment_bytes_are_found_anywhere() {
        for len in 0..20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut sql = vec![b'a'; len];
                    sql[at] = b;
                    let want = matches!(b, b'/' | b'-' | b'#');
                    assert_eq!(may_hold_comment(&sql), want, "{len} {at} {b}");
                }
            }
            assert!(!may_hold_comment(&vec![0x80; len]));
        }
    }

    /// One row per rule of [`key_text`]: the statement and the text its key hashes.
    #[test]
    fn key_text_leaves_out_comments_at_the_ends_only() {
        let cases: &[(&str, &str)] = &[
            // Nothing that could start a comment: the statement itself.
            ("SELECT a FROM t", "SELECT a FROM t"),
            ("SELECT a FROM t ", "SELECT a FROM t "),
            // Trace comments after and before, in each spelling.
            (
                "SELECT a FROM t /*traceparent='00-1-01'*/",
                "SELECT a FROM t",
            ),
            ("/*dddbs='x'*/ SELECT a FROM t", "SELECT a FROM t"),
            (
                "/* a */\n-- b\n# c\nSELECT a FROM t -- d",
                "SELECT a FROM t",
            ),
            ("SELECT a FROM t # e", "SELECT a FROM t"),
            ("SELECT a FROM t --\te", "SELECT a FROM t"),
            ("SELECT a FROM t --", "SELECT a FROM t"),
            // `--` without whitespace after it is code.
            ("SELECT 1--1", "SELECT 1--1"),
            ("SELECT 1 --1", "SELECT 1 --1"),
            ("SELECT 1 --- 1", "SELECT 1 -"),
            // Between tokens a comment is part of a column name: kept.
            ("SELECT 1 /*x*/ + 2", "SELECT 1 /*x*/ + 2"),
            ("SELECT 1 /*x*/ + 2 /*y*/", "SELECT 1 /*x*/ + 2"),
            ("SELECT 1 /*x*/;", "SELECT 1 /*x*/;"),
            // In strings and quoted names, comment starts are text.
            ("SELECT 'a /*x*/'", "SELECT 'a /*x*/'"),
            ("SELECT 'a -- x' -- y", "SELECT 'a -- x'"),
            ("SELECT \"a # x\" # y", "SELECT \"a # x\""),
            ("SELECT 1 AS `a /*`", "SELECT 1 AS `a /*`"),
            ("SELECT 'it''s /*' /*x*/", "SELECT 'it''s /*'"),
            // Executable comments and hints are code.
            ("SELECT 1 /*!50000 + 1 */ /*x*/", "SELECT 1 /*!50000 + 1 */"),
            ("/*!40101 SELECT 3 */", "/*!40101 SELECT 3 */"),
            ("/*x*/ /*M!100100 SELECT 3 */", "/*M!100100 SELECT 3 */"),
            ("SELECT 1 /*+ BKA(t) */", "SELECT 1 /*+ BKA(t) */"),
            // Fail closed: keyed whole.
            ("SELECT 'x\\' /*' /*y*/", "SELECT 'x\\' /*' /*y*/"),
            ("SELECT 1 /* open", "SELECT 1 /* open"),
            ("SELECT 1 /*/", "SELECT 1 /*/"),
            ("SELECT 'open /*x*/", "SELECT 'open /*x*/"),
            ("SELECT 1 /*! '*/' */ /*x*/", "SELECT 1 /*! '*/' */ /*x*/"),
            ("/*x*/", "/*x*/"),
            ("-- only", "-- only"),
        ];
        for (sql, want) in cases {
            let got = String::from_utf8_lossy(key_text(sql.as_bytes())).into_owned();
            assert_eq!(&got, want, "{sql:?}");
        }
    }
}
