//! Executable comments as the upstream server reads them: which `/*!NNNNN … */` and
//! `/*M!NNNNNN … */` it runs and which it skips, from the version in its greeting.
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
}
