//! Policy: the table locks a session takes through qcache (`LOCK TABLES`, `FLUSH TABLES …
//! WITH READ LOCK / FOR EXPORT`) and what they mean for the cache; and the statement that
//! may release a transaction's metadata locks without ending it (`ROLLBACK TO SAVEPOINT`).
//!
//! - A session that holds table locks, or may hold them, is never served from the cache and
//!   never fills it: the server answers it ERROR 1100 for a table it did not lock (an alias
//!   is another table), which no cached entry knows. It may hold them from any statement
//!   that takes them, whether or not the server accepted it, until a plain `UNLOCK TABLES`
//!   sent alone (or a reset of the session). `START TRANSACTION` also releases them on the
//!   server, but the session keeps the mark: fewer hits, never a wrong answer.
//! - A `WRITE` lock counts as a write of the tables it locks: their versions are bumped when
//!   the lock is granted, so no other session is served an entry of them while the lock is
//!   held — its reads go to the server and wait there, as they would directly. (An entry
//!   filled meanwhile is stored only by a read the server let through, after the unlock.)

use crate::analysis::lexer::{Lexer, Tok, Token};
use crate::analysis::TableRef;

/// What a statement does to the session's table locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableLocks {
    /// Takes table locks. `write`: the tables it locks for writing (views as named), or None
    /// when qcache cannot name them all (then the write is of unknown tables).
    Take { write: Option<Vec<TableRef>> },
    /// `UNLOCK TABLES`: the session holds none afterwards.
    Release,
    /// `ROLLBACK [WORK] TO [SAVEPOINT] s`: the server may release the metadata locks the
    /// transaction took after the savepoint (it does when it does not binlog the session),
    /// so the tables its reads locked are no longer known to be locked
    /// (`cache::writes::Txn::read`): each is read on the server again before it is served.
    SavepointRollback,
    /// Not a table lock statement (`GET_LOCK` is not a table lock).
    None,
}

/// Reads a statement's effect on table locks from its text (as the server reads it). A
/// MariaDB `SET STATEMENT … FOR` prefix changes nothing: the statement after FOR runs, and
/// takes or releases locks as it would alone.
pub fn table_locks(sql: &[u8]) -> TableLocks {
    let body = crate::analysis::statement_body(sql);
    let sql: &[u8] = &body;
    let toks: Vec<Token> = Lexer::new(sql).collect();
    let kw = |k: usize, w: &str| toks.get(k).is_some_and(|t| t.is_kw(sql, w));
    let tables_kw = |k: usize| kw(k, "TABLE") || kw(k, "TABLES");
    if kw(0, "UNLOCK") {
        return if tables_kw(1) && toks.len() == 2 {
            TableLocks::Release
        } else {
            // `UNLOCK TABLES` is all the server accepts; anything else changes nothing.
            TableLocks::None
        };
    }
    if kw(0, "ROLLBACK") {
        let to = if kw(1, "WORK") { 2 } else { 1 };
        if kw(to, "TO") {
            return TableLocks::SavepointRollback;
        }
        return TableLocks::None;
    }
    if kw(0, "LOCK") {
        return TableLocks::Take {
            write: if tables_kw(1) {
                write_locked(sql, &toks[2..])
            } else {
                None
            },
        };
    }
    if kw(0, "FLUSH") {
        let n = toks.len();
        let with_read_lock = n >= 3 && kw(n - 3, "WITH") && kw(n - 2, "READ") && kw(n - 1, "LOCK");
        let for_export = n >= 2 && kw(n - 2, "FOR") && kw(n - 1, "EXPORT");
        if with_read_lock || for_export {
            // Read locks: other sessions still read; this one may read only those tables.
            return TableLocks::Take {
                write: Some(Vec::new()),
            };
        }
    }
    TableLocks::None
}

/// The tables of a `LOCK TABLES` list locked for writing: `name [[AS] alias] lock_type, …`
/// with `READ [LOCAL]`, `[LOW_PRIORITY] WRITE [CONCURRENT]` and MariaDB's `WAIT n` /
/// `NOWAIT` after the list. None when the list is not one qcache can read.
fn write_locked(sql: &[u8], toks: &[Token]) -> Option<Vec<TableRef>> {
    let ident = |t: &Token| -> Option<String> {
        let b = t.bytes(sql);
        match t.tok {
            Tok::Word => Some(String::from_utf8_lossy(b).into_owned()),
            Tok::Backquoted if b.len() >= 2 => {
                Some(String::from_utf8_lossy(&b[1..b.len() - 1]).replace("``", "`"))
            }
            _ => None,
        }
    };
    let mut out = Vec::new();
    let mut k = 0;
    loop {
        let first = ident(toks.get(k)?)?;
        let (schema, name) = if toks.get(k + 1).is_some_and(|t| t.is_punct(b'.')) {
            k += 2;
            (Some(first), ident(toks.get(k)?)?)
        } else {
            (None, first)
        };
        k += 1;
        let mut write = false;
        let mut saw_type = false;
        while let Some(t) = toks.get(k) {
            if t.is_punct(b',') {
                break;
            }
            if t.is_kw(sql, "WRITE") {
                write = true;
                saw_type = true;
            } else if t.is_kw(sql, "READ") {
                saw_type = true;
            } else if t.is_kw(sql, "WAIT") || t.is_kw(sql, "NOWAIT") {
                // The list ends: the rest is the timeout.
                if !saw_type {
                    return None;
                }
                if write {
                    out.push(TableRef::new(schema.as_deref(), &name));
                }
                return Some(out);
            } else if t.tok != Tok::Word && t.tok != Tok::Backquoted {
                return None;
            }
            k += 1;
        }
        if !saw_type {
            return None;
        }
        if write {
            out.push(TableRef::new(schema.as_deref(), &name));
        }
        if k >= toks.len() {
            return Some(out);
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: Option<&str>, n: &str) -> TableRef {
        TableRef::new(s, n)
    }

    #[test]
    fn lock_statements() {
        let take = |w: Option<Vec<TableRef>>| TableLocks::Take { write: w };
        for (sql, want) in [
            ("LOCK TABLES t READ", take(Some(vec![]))),
            ("lock table t read local", take(Some(vec![]))),
            ("LOCK TABLES t WRITE", take(Some(vec![t(None, "t")]))),
            (
                "LOCK TABLES t AS a READ, db.u LOW_PRIORITY WRITE, `v``w` b WRITE CONCURRENT",
                take(Some(vec![t(Some("db"), "u"), t(None, "v`w")])),
            ),
            ("LOCK TABLES t WRITE WAIT 5", take(Some(vec![t(None, "t")]))),
            ("LOCK TABLES t READ NOWAIT", take(Some(vec![]))),
            // Unreadable lists and other LOCK forms: may lock anything.
            ("LOCK TABLES t", take(None)),
            ("LOCK TABLES (t) WRITE", take(None)),
            ("LOCK INSTANCE FOR BACKUP", take(None)),
            ("FLUSH TABLES t WITH READ LOCK", take(Some(vec![]))),
            ("FLUSH TABLES WITH READ LOCK", take(Some(vec![]))),
            ("FLUSH TABLE t, u FOR EXPORT", take(Some(vec![]))),
            ("UNLOCK TABLES", TableLocks::Release),
            ("unlock table", TableLocks::Release),
            ("FLUSH TABLES", TableLocks::None),
            ("FLUSH TABLES t", TableLocks::None),
            ("SELECT GET_LOCK('x', 0)", TableLocks::None),
            ("LOCKED", TableLocks::None),
            // Metadata locks taken after a savepoint may be released.
            ("ROLLBACK TO SAVEPOINT s", TableLocks::SavepointRollback),
            ("rollback work to s", TableLocks::SavepointRollback),
            ("ROLLBACK /* c */ TO `s`", TableLocks::SavepointRollback),
            ("ROLLBACK", TableLocks::None),
            ("ROLLBACK WORK AND CHAIN", TableLocks::None),
            ("RELEASE SAVEPOINT s", TableLocks::None),
        ] {
            assert_eq!(table_locks(sql.as_bytes()), want, "{sql}");
        }
    }

    /// UNLOCK releases only as `UNLOCK TABLE[S]` alone; anything after it (the server
    /// refuses it) releases nothing.
    #[test]
    fn unlock_releases_only_alone() {
        for (sql, want) in [
            ("UNLOCK TABLES", TableLocks::Release),
            ("  unlock   TABLES  ", TableLocks::Release),
            ("UNLOCK TABLES t", TableLocks::None),
            ("UNLOCK INSTANCE", TableLocks::None),
            ("UNLOCK", TableLocks::None),
        ] {
            assert_eq!(table_locks(sql.as_bytes()), want, "{sql}");
        }
    }

    /// Comments and case are read as the server reads them; a hint comment before LOCK
    /// still takes locks.
    #[test]
    fn comments_and_case_do_not_hide_locks() {
        let take = |w: Option<Vec<TableRef>>| TableLocks::Take { write: w };
        for (sql, want) in [
            (
                "/* x */ LOCK TABLES t WRITE",
                take(Some(vec![t(None, "t")])),
            ),
            ("Lock Tables `T` Write", take(Some(vec![t(None, "t")]))),
            ("LOCK TABLES t -- c\n WRITE", take(Some(vec![t(None, "t")]))),
            (
                "LOCK TABLES db.t AS x WRITE",
                take(Some(vec![t(Some("db"), "t")])),
            ),
        ] {
            assert_eq!(table_locks(sql.as_bytes()), want, "{sql}");
        }
    }

    /// A `SET STATEMENT … FOR` prefix (MariaDB) runs the statement after FOR, which takes
    /// or releases locks as it would alone.
    #[test]
    fn set_statement_prefixes_run_their_statement() {
        let take = |w: Option<Vec<TableRef>>| TableLocks::Take { write: w };
        for (sql, want) in [
            (
                "SET STATEMENT lock_wait_timeout = 5 FOR LOCK TABLES u READ",
                take(Some(vec![])),
            ),
            (
                "set statement a = 1, b = (SELECT 1 FOR UPDATE) for LOCK TABLES t WRITE",
                take(Some(vec![t(None, "t")])),
            ),
            (
                "SET STATEMENT a = 1 FOR SET STATEMENT b = 2 FOR LOCK TABLES t WRITE",
                take(Some(vec![t(None, "t")])),
            ),
            (
                "SET STATEMENT a = 1 FOR FLUSH TABLES WITH READ LOCK",
                take(Some(vec![])),
            ),
            ("SET STATEMENT a = 1 FOR UNLOCK TABLES", TableLocks::Release),
            ("SET STATEMENT a = 1 FOR SELECT 1", TableLocks::None),
            ("SET STATEMENT a = 1", TableLocks::None),
            ("SET @lock = 1", TableLocks::None),
        ] {
            assert_eq!(table_locks(sql.as_bytes()), want, "{sql}");
        }
    }

    /// Only the WRITE-locked tables of a mixed list are writes; READ locks write nothing.
    #[test]
    fn only_write_locks_are_writes() {
        let got = table_locks(b"LOCK TABLES a READ, b WRITE, c READ LOCAL, d LOW_PRIORITY WRITE");
        assert_eq!(
            got,
            TableLocks::Take {
                write: Some(vec![t(None, "b"), t(None, "d")])
            }
        );
    }
}
