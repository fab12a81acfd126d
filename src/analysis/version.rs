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
