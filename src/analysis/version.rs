//! Which upstream server a statement is read for: its version and whether it is MariaDB,
//! which decide the executable comments it runs (read by the lexer and by `comments`).

/// The upstream server, as far as executable comments care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerVersion {
    /// MYSQL_VERSION_ID: major * 10000 + minor * 100 + patch (10.11.19 → 101119).
    pub id: u32,
    pub mariadb: bool,
}

impl ServerVersion {
    /// The reading used where no server is known (unit tests, tools): a recent MariaDB.
    pub const DEFAULT: ServerVersion = ServerVersion {
        id: 101199,
        mariadb: true,
    };

    /// From the greeting's version string: `5.5.5-10.11.19-MariaDB-0+deb12u1` (MariaDB's
    /// replication-compatible prefix), `11.4.2-MariaDB`, `8.0.36`, `8.4.0-commercial`.
    /// A string with no readable version gives [`ServerVersion::DEFAULT`]'s id.
    pub fn from_greeting(version: &str) -> ServerVersion {
        let mariadb = version.to_ascii_lowercase().contains("mariadb");
        let v = match version.strip_prefix("5.5.5-") {
            Some(rest) if mariadb => rest,
            _ => version,
        };
        let mut parts = v
            .split(|c: char| !c.is_ascii_digit())
            .take(3)
            .map(|p| p.parse::<u32>().ok());
        let (major, minor, patch) = (parts.next(), parts.next(), parts.next());
        let id = match (major, minor, patch) {
            (Some(Some(a)), Some(Some(b)), Some(Some(c))) if b < 100 && c < 100 => {
                a.saturating_mul(10000).saturating_add(b * 100 + c)
            }
            _ => Self::DEFAULT.id,
        };
        ServerVersion { id, mariadb }
    }

    /// Whether this server runs a comment marked with `version` (`maria_marker`: `/*M!`).
    pub fn runs(&self, version: u32, maria_marker: bool) -> bool {
        if version > self.id {
            return false;
        }
        if self.mariadb {
            maria_marker || !(50700..=99999).contains(&version)
        } else {
            !maria_marker
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(id: u32, mariadb: bool) -> ServerVersion {
        ServerVersion { id, mariadb }
    }

    /// One row per greeting spelling: the id and the flavour read from it.
    #[test]
    fn versions_from_greetings() {
        let cases = [
            ("5.5.5-10.11.19-MariaDB-0+deb12u1", v(101119, true)),
            ("11.4.2-MariaDB", v(110402, true)),
            ("10.6.18-mariadb-log", v(100618, true)),
            ("8.0.36", v(80036, false)),
            ("8.4.0-commercial", v(80400, false)),
            ("5.7.44-log", v(50744, false)),
        ];
        for (greeting, want) in cases {
            assert_eq!(ServerVersion::from_greeting(greeting), want, "{greeting}");
        }
    }

    /// MariaDB's `5.5.5-` prefix is a replication-compatibility mask, dropped only for
    /// MariaDB: a MySQL 5.5.5 is read as itself.
    #[test]
    fn the_replication_prefix_is_mariadbs_only() {
        assert_eq!(
            ServerVersion::from_greeting("5.5.5-10.3.39-MariaDB").id,
            100339
        );
        assert_eq!(ServerVersion::from_greeting("5.5.5-log").id, 50505);
    }

    /// A version that cannot be read as major.minor.patch (or with a part of 100 or more)
    /// is read as the default's id, keeping the flavour.
    #[test]
    fn unreadable_versions_fall_back() {
        let cases = [
            ("", false),
            ("MariaDB", true),
            ("8.0", false),
            ("8.100.1", false),
            ("x.y.z-MariaDB", true),
        ];
        for (greeting, mariadb) in cases {
            assert_eq!(
                ServerVersion::from_greeting(greeting),
                v(ServerVersion::DEFAULT.id, mariadb),
                "{greeting:?}"
            );
        }
    }

    /// A comment marked for a newer server than this one never runs.
    #[test]
    fn newer_comments_do_not_run() {
        for server in [v(80036, false), v(101119, true)] {
            assert!(!server.runs(server.id + 1, false), "{server:?}");
            assert!(!server.runs(server.id + 1, true), "{server:?}");
            assert!(server.runs(server.id, server.mariadb), "{server:?}");
        }
    }

    /// Which marked comments each flavour runs: MySQL never runs `/*M!`; MariaDB runs its
    /// own, and plain `/*!` ones except those numbered as MySQL 5.7 and later (50700–99999),
    /// which it skips as MySQL-only.
    #[test]
    fn flavours_run_their_own_comments() {
        let mysql = v(80036, false);
        let maria = v(101119, true);
        let cases = [
            (mysql, 50100, false, true),
            (mysql, 80000, false, true),
            (mysql, 50100, true, false),
            (maria, 50100, false, true),
            (maria, 50700, false, false),
            (maria, 80000, false, false),
            (maria, 99999, false, false),
            (maria, 100000, false, true),
            (maria, 80000, true, true),
            (maria, 100500, true, true),
        ];
        for (server, version, marker, want) in cases {
            assert_eq!(
                server.runs(version, marker),
                want,
                "{server:?} {version} M!={marker}"
            );
        }
    }
}
