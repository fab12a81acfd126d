//! Policy: statements that change what a user may read (GRANT, REVOKE, roles, user changes,
//! writes to the privilege tables) and how far their invalidation must reach.
//!
//! A change reaches the users it names, or every user when qcache cannot name them: a
//! grantee without a host may be a role (whose holders, transitively, are unknown here),
//! `PUBLIC`, `FLUSH PRIVILEGES` (edits of the grant tables nobody saw become effective),
//! anything that does not parse. A change is *sticky* when sessions connected before it keep
//! the old privileges: the server reads global privileges at connect (and at `SET ROLE`)
//! and the current database's privileges at `USE`, so after a global- or database-level
//! change, old and new sessions of one user may get different answers to the same SELECT
//! and must not share entries. Table-, column- and routine-level changes apply to every
//! session at its next statement.

use crate::analysis::lexer::{Lexer, Tok, Token};

/// The `mysql` tables whose contents are privileges (MariaDB and MySQL names). A write to
/// them takes effect at `FLUSH PRIVILEGES`, but is counted as a change at once as well.
pub const PRIVILEGE_TABLES: [&str; 12] = [
    "user",
    "global_priv",
    "db",
    "tables_priv",
    "columns_priv",
    "procs_priv",
    "proxies_priv",
    "roles_mapping",
    "role_edges",
    "default_roles",
    "global_grants",
    "password_history",
];

/// Whether `schema.name` (lower-case) is a privilege table.
pub fn is_privilege_table(schema: &str, name: &str) -> bool {
    schema == "mysql" && PRIVILEGE_TABLES.contains(&name)
}

/// The schema of the pseudo-tables that stand for an account's privileges in an entry's
/// stamps. No real schema has an empty name, so no write or DDL ever names one.
///
/// A read through a `SQL SECURITY DEFINER` view runs with the definer's privileges as the
/// server holds them at that moment: a REVOKE from the definer (or dropping it) changes what
/// every reader of the view gets, though no reader's own privileges changed. So the catalog
/// stamps such a read with [`definer_stamps`] of the view's definer, and every privilege
/// change bumps [`change_stamps`]: the named users' stamps, or the stamp every definer view
/// carries when the change may reach anyone (a role, PUBLIC, FLUSH PRIVILEGES, a grant-table
/// write, an unreadable statement).
pub const STAMP_SCHEMA: &str = "";

/// The stamp every definer view's read carries, bumped by a change that may reach any user.
const ANY_USER_STAMP: &str = "*";

/// The stamp every change that names its users raises beside theirs: what an L2 read of
/// users who share entries (`cache.shared_between_users`) depends on. Their key holds the
/// instance's privilege epoch (every change counts, `cache::privileges`), which is numbered
/// per instance, so only a fleet-wide stamp tells an entry filled before a change from one
/// filled after it: the same number on an instance that started later (or saw fewer
/// changes) stands for another state of the grants. Learned back it names nobody (the
/// users' stamps raised with it carry the change).
const EVERY_CHANGE_STAMP: &str = "changes";

fn user_stamp(user: &str) -> String {
    format!("user {user}")
}

/// The stamps of a read through a view whose definer is `definer` (`user@host` as
/// information_schema spells it, or a role's name).
pub fn definer_stamps(definer: &str) -> [(String, String); 2] {
    [
        (STAMP_SCHEMA.to_string(), ANY_USER_STAMP.to_string()),
        (STAMP_SCHEMA.to_string(), user_stamp(account_user(definer))),
    ]
}

/// The stamps a privilege change bumps: the every-user stamp for a change that may reach
/// anyone, else its users' stamps and the every-change stamp.
pub fn change_stamps(c: &PrivilegeChange) -> Vec<(String, String)> {
    if c.all {
        return vec![(STAMP_SCHEMA.to_string(), ANY_USER_STAMP.to_string())];
    }
    c.users
        .iter()
        .map(|u| user_stamp(u))
        .chain(std::iter::once(EVERY_CHANGE_STAMP.to_string()))
        .map(|n| (STAMP_SCHEMA.to_string(), n))
        .collect()
}

/// The stamps an L2 read by `user` depends on (None: sessions of every user share entries,
/// so every change counts, as it does for their key: the every-change stamp): a privilege
/// change that reached the reader raised one of them in the fleet's versions, so an entry
/// filled before it is never served, whatever instance filled it and whatever its
/// generations are numbered.
pub fn reader_stamps(user: Option<&str>) -> Vec<(String, String)> {
    let mut v = vec![(STAMP_SCHEMA.to_string(), ANY_USER_STAMP.to_string())];
    let own = match user {
        Some(u) => user_stamp(u),
        None => EVERY_CHANGE_STAMP.to_string(),
    };
    v.push((STAMP_SCHEMA.to_string(), own));
    v
}

/// The privilege change another instance made, from the bump of one of its stamps learned
/// through L2 (the inverse of [`change_stamps`]); None for any other table. The stamp does
/// not say whether the change was sticky, so it is taken as sticky: sessions of the user
/// connected before it stop sharing entries (a miss, answered by the server), which is right
/// for either kind.
pub fn learned_change(schema: &str, name: &str) -> Option<PrivilegeChange> {
    if schema != STAMP_SCHEMA {
        return None;
    }
    if name == ANY_USER_STAMP {
        return Some(PrivilegeChange::all(Reason::Learned, true));
    }
    let user = name.strip_prefix("user ")?;
    Some(PrivilegeChange {
        users: vec![user.to_string()],
        all: false,
        sticky: true,
        reason: Reason::Learned,
    })
}

/// Why a statement changes privileges, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Grant,
    Revoke,
    CreateUser,
    DropUser,
    RenameUser,
    AlterUser,
    CreateRole,
    DropRole,
    DefaultRole,
    Password,
    FlushPrivileges,
    PrivilegeTable,
    /// A privilege statement qcache could not read: every user, sticky.
    Unreadable,
    /// Another instance's change, learned from its stamp's bump through L2.
    Learned,
    /// Changes this instance may have missed: L2's channel lost or made again, its data
    /// adopted or rolled back, a binlog gap.
    Missed,
}

/// Who a privilege change reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivilegeChange {
    /// User names (the part of an account before `@`, exact case) whose privileges change.
    pub users: Vec<String>,
    /// Every user may be affected.
    pub all: bool,
    /// Sessions connected before the change keep (part of) their old privileges.
    pub sticky: bool,
    pub reason: Reason,
}

impl PrivilegeChange {
    fn all(reason: Reason, sticky: bool) -> PrivilegeChange {
        PrivilegeChange {
            users: Vec::new(),
            all: true,
            sticky,
            reason,
        }
    }

    /// What may have been missed where bumps were lost (L2's channel down or made again,
    /// its data adopted or rolled back, a binlog gap): any change, for every user, sticky.
    /// A missed sticky change (a database-level REVOKE, say) leaves the sessions connected
    /// before it with privileges new ones lack; not taking it as one let both share entries
    /// (a new session refused by the server served the old one's rows). Sessions connected
    /// before the loss keep their entries their own until they reconnect.
    pub fn missed() -> PrivilegeChange {
        PrivilegeChange::all(Reason::Missed, true)
    }

    /// Whether this change only splits the sessions connected before it from new ones,
    /// moving no generation ([`missed`](Self::missed)): a new session's privileges are
    /// whatever the server computes at its connect, as anywhere in the fleet, and a
    /// generation moved for a change that may not have happened would key this instance's
    /// reads apart from every other's for good (its numbers no longer meet theirs).
    pub fn splits_only(&self) -> bool {
        self.reason == Reason::Missed
    }

    /// A write to a privilege table (through qcache or seen in the binlog).
    pub fn privilege_table() -> PrivilegeChange {
        PrivilegeChange::all(Reason::PrivilegeTable, true)
    }

    /// Two changes made by one statement or response, as one.
    pub fn merge(&mut self, other: PrivilegeChange) {
        self.all |= other.all;
        self.sticky |= other.sticky;
        for u in other.users {
            if !self.users.contains(&u) {
                self.users.push(u);
            }
        }
        if self.all {
            self.users.clear();
        }
    }
}

/// What the statement's text says about privileges: None when it cannot change any (every
/// statement but the privilege statements). `current_user`: the user part of the session's
/// account, for `CURRENT_USER` and the forms without `FOR`; None when unknown (from the
/// binlog), which widens those to every user.
pub fn statement_change(sql: &[u8], current_user: Option<&str>) -> Option<PrivilegeChange> {
    // Every write passes here: its first word rules nearly all of them out before any
    // allocation.
    let first = Lexer::new(sql).next_token()?;
    if first.tok != Tok::Word
        || ![
            "GRANT", "REVOKE", "CREATE", "DROP", "ALTER", "RENAME", "SET", "FLUSH",
        ]
        .iter()
        .any(|k| first.is_kw(sql, k))
    {
        return None;
    }
    // MariaDB's `SET STATEMENT var=v [, …] FOR stmt` runs `stmt`, and prefixes nest: read
    // past all of them as every reader of a statement's leading words does (one skipped
    // here missed a FLUSH PRIVILEGES under two).
    let body = crate::analysis::statement_body(sql);
    let sql: &[u8] = &body;
    let toks = tokens(sql);
    let mut w = Words {
        sql,
        toks: &toks,
        i: 0,
    };
    let first = w.word(0)?;
    let change = match first.as_str() {
        "GRANT" => grant_or_revoke(&mut w, true, current_user),
        "REVOKE" => grant_or_revoke(&mut w, false, current_user),
        "CREATE" | "DROP" | "ALTER" | "RENAME" => account_ddl(&mut w, &first, current_user)?,
        "SET" if w.kw(1, "DEFAULT") && w.kw(2, "ROLE") => {
            for_user(&mut w, Reason::DefaultRole, current_user)
        }
        "SET" if w.kw(1, "PASSWORD") => for_user(&mut w, Reason::Password, current_user),
        "FLUSH" => flush(&mut w)?,
        _ => return None,
    };
    Some(change)
}

/// `SET ROLE …` (not `SET DEFAULT ROLE`): the server recomputes the session's privileges
/// from the grants as they are now, and its active role changes.
pub fn sets_role(sql: &[u8]) -> bool {
    let toks = tokens(sql);
    let w = Words {
        sql,
        toks: &toks,
        i: 0,
    };
    w.kw(0, "SET") && w.kw(1, "ROLE")
}

/// The user part of an account as `CURRENT_USER()` spells it (`alice@%` → `alice`).
pub fn account_user(account: &str) -> &str {
    account.rsplit_once('@').map_or(account, |(u, _)| u)
}

/// Whether a session that was connected (or last ran `SET ROLE` / changed user) at privilege
/// epoch `baseline` still has the privileges a new session would get, given the newest
/// sticky change that reaches its user (`sticky`, an epoch, 0 for none). When not, its
/// entries must be its own.
pub fn session_diverged(baseline: u64, sticky: u64) -> bool {
    sticky > baseline
}

// ----- the statements ----------------------------------------------------------------------

fn tokens(sql: &[u8]) -> Vec<Token> {
    let mut lx = Lexer::new(sql);
    let mut out = Vec::new();
    // Privilege statements are short; a long statement is looked at only as far as needed.
    while let Some(t) = lx.next_token() {
        out.push(t);
        if out.len() >= 4096 {
            break;
        }
    }
    out
}

struct Words<'a> {
    sql: &'a [u8],
    toks: &'a [Token],
    /// Where the statement starts (0: the text is the body already, `statement_body`).
    i: usize,
}

impl Words<'_> {
    fn tok(&self, k: usize) -> Option<&Token> {
        self.toks.get(self.i + k)
    }

    fn kw(&self, k: usize, kw: &str) -> bool {
        self.tok(k).is_some_and(|t| t.is_kw(self.sql, kw))
    }

    fn word(&self, k: usize) -> Option<String> {
        let t = self.tok(k)?;
        (t.tok == Tok::Word).then(|| String::from_utf8_lossy(t.bytes(self.sql)).to_uppercase())
    }

    /// Index (relative) of the first top-level keyword `kw` at or after `from`.
    fn find_kw(&self, from: usize, kw: &str) -> Option<usize> {
        let mut depth = 0i32;
        let mut k = from;
        while let Some(t) = self.tok(k) {
            match t.tok {
                Tok::Punct(b'(') => depth += 1,
                Tok::Punct(b')') => depth -= 1,
                _ if depth == 0 && t.is_kw(self.sql, kw) => return Some(k),
                _ => {}
            }
            k += 1;
        }
        None
    }
}

/// One account or role name in a list: what it reaches.
enum Grantee {
    User(String),
    /// A role, PUBLIC, or a name qcache cannot read.
    Anyone,
}

/// Reads an account at relative index `k`; returns it and the index after it.
fn grantee(w: &Words, k: usize, current_user: Option<&str>) -> (Grantee, usize) {
    let Some(t) = w.tok(k) else {
        return (Grantee::Anyone, k);
    };
    let raw = t.bytes(w.sql);
    let name = match t.tok {
        Tok::Word if t.is_kw(w.sql, "CURRENT_USER") => {
            let mut next = k + 1;
            if w.tok(next).is_some_and(|t| t.is_punct(b'('))
                && w.tok(next + 1).is_some_and(|t| t.is_punct(b')'))
            {
                next += 2;
            }
            return match current_user {
                Some(u) => (Grantee::User(u.to_string()), next),
                None => (Grantee::Anyone, next),
            };
        }
        Tok::Word if t.is_kw(w.sql, "PUBLIC") => return (Grantee::Anyone, k + 1),
        Tok::Word => Some(String::from_utf8_lossy(raw).into_owned()),
        Tok::Str | Tok::DoubleQuoted | Tok::Backquoted => unquote(raw),
        _ => None,
    };
    let host = w
        .tok(k + 1)
        .filter(|h| h.tok == Tok::Var && !h.bytes(w.sql).starts_with(b"@@"));
    let after = k + 1 + usize::from(host.is_some());
    match (name, host) {
        // `name@host`: an account. A role has no host (MariaDB), so without one the name may
        // be a role and every holder of it is reached.
        (Some(n), Some(h)) if h.bytes(w.sql).len() > 1 => (Grantee::User(n), after),
        _ => (Grantee::Anyone, after),
    }
}

/// The text of a quoted name, when it holds no escape qcache would have to interpret.
fn unquote(raw: &[u8]) -> Option<String> {
    let (&q, rest) = raw.split_first()?;
    let inner = rest.strip_suffix(&[q])?;
    if inner.contains(&q) || inner.contains(&b'\\') {
        return None;
    }
    String::from_utf8(inner.to_vec()).ok()
}

/// A comma-separated list of accounts starting at `k`, up to the first top-level word in
/// `stop` (or the end).
fn grantee_list(
    w: &Words,
    mut k: usize,
    stop: &[&str],
    current_user: Option<&str>,
    change: &mut PrivilegeChange,
) {
    loop {
        let (g, next) = grantee(w, k, current_user);
        match g {
            Grantee::User(u) => change.merge(PrivilegeChange {
                users: vec![u],
                all: false,
                sticky: false,
                reason: change.reason,
            }),
            Grantee::Anyone => change.all = true,
        }
        // Skip the account's options (IDENTIFIED BY …) up to the next comma.
        let mut j = next;
        let mut depth = 0i32;
        loop {
            let Some(t) = w.tok(j) else {
                return;
            };
            match t.tok {
                Tok::Punct(b'(') => depth += 1,
                Tok::Punct(b')') => depth -= 1,
                Tok::Punct(b',') if depth == 0 => break,
                Tok::Punct(b';') if depth == 0 => return,
                Tok::Word if depth == 0 && stop.iter().any(|s| t.is_kw(w.sql, s)) => return,
                _ => {}
            }
            j += 1;
        }
        k = j + 1;
    }
}

/// GRANT / REVOKE: of privileges `ON` a level, of `PROXY`, or of roles.
fn grant_or_revoke(w: &mut Words, grant: bool, current_user: Option<&str>) -> PrivilegeChange {
    let reason = if grant { Reason::Grant } else { Reason::Revoke };
    let list_kw = if grant { "TO" } else { "FROM" };
    let Some(to) = w.find_kw(1, list_kw) else {
        return PrivilegeChange::all(Reason::Unreadable, true);
    };
    let on = w.find_kw(1, "ON").filter(|&on| on < to);
    // The level decides stickiness: `*.*` and `db.*` / `*` are read at connect and USE.
    let sticky = match on {
        // Role grants (and `REVOKE ALL PRIVILEGES, GRANT OPTION`, every level): a role
        // granted to a role changes its holders' global privileges, which their sessions
        // read at SET ROLE.
        None => true,
        Some(on) => level_is_sticky(w, on + 1, to),
    };
    let mut change = PrivilegeChange {
        users: Vec::new(),
        all: false,
        sticky,
        reason,
    };
    grantee_list(
        w,
        to + 1,
        &["WITH", "REQUIRE", "AS"],
        current_user,
        &mut change,
    );
    if change.all {
        change.users.clear();
    }
    change
}

/// Whether the privilege level between `from` and `to` (exclusive) is global or database
/// level. Unknown shapes are sticky.
fn level_is_sticky(w: &Words, from: usize, to: usize) -> bool {
    let mut k = from;
    // Object type: TABLE, FUNCTION, PROCEDURE, PACKAGE [BODY].
    if w.kw(k, "TABLE") {
        k += 1;
    } else if w.kw(k, "FUNCTION") || w.kw(k, "PROCEDURE") || w.kw(k, "PACKAGE") {
        // Routine privileges: looked up at each call.
        return false;
    }
    let parts: Vec<&Token> = (k..to).filter_map(|j| w.tok(j)).collect();
    let name = |t: &Token| matches!(t.tok, Tok::Word | Tok::Backquoted);
    match parts.as_slice() {
        // `tbl`, `db.tbl`: table level.
        [t] if name(t) => false,
        [d, dot, t] if name(d) && dot.is_punct(b'.') && name(t) => false,
        // `*`, `*.*`, `db.*`, and anything else.
        _ => true,
    }
}

/// CREATE / DROP / ALTER / RENAME of USER or ROLE.
fn account_ddl(w: &mut Words, first: &str, current_user: Option<&str>) -> Option<PrivilegeChange> {
    let mut k = 1;
    let mut replace = false;
    if first == "CREATE" && w.kw(1, "OR") && w.kw(2, "REPLACE") {
        replace = true;
        k = 3;
    }
    let role = w.kw(k, "ROLE");
    if !role && !w.kw(k, "USER") {
        return None;
    }
    k += 1;
    if w.kw(k, "IF") {
        // IF [NOT] EXISTS
        k += if w.kw(k + 1, "NOT") { 3 } else { 2 };
    }
    let reason = match (first, role) {
        ("CREATE", false) => Reason::CreateUser,
        ("CREATE", true) => Reason::CreateRole,
        ("DROP", false) => Reason::DropUser,
        ("DROP", true) => Reason::DropRole,
        ("RENAME", _) => Reason::RenameUser,
        _ => Reason::AlterUser,
    };
    if role && (first == "DROP" || replace) {
        // Every holder of the role loses it.
        return Some(PrivilegeChange::all(reason, true));
    }
    // A dropped, replaced or renamed account's open sessions keep their privileges.
    let sticky = matches!(first, "DROP" | "RENAME") || replace;
    let mut change = PrivilegeChange {
        users: Vec::new(),
        all: false,
        sticky,
        reason,
    };
    if first == "RENAME" {
        // a TO b [, c TO d]: both names of every pair.
        let mut j = k;
        loop {
            let (g, next) = grantee(w, j, current_user);
            reach(&mut change, g);
            if !w.kw(next, "TO") {
                change.all = true;
                break;
            }
            let (g2, after) = grantee(w, next + 1, current_user);
            reach(&mut change, g2);
            if !w.tok(after).is_some_and(|t| t.is_punct(b',')) {
                break;
            }
            j = after + 1;
        }
    } else {
        grantee_list(
            w,
            k,
            &[
                "WITH",
                "REQUIRE",
                "PASSWORD",
                "ACCOUNT",
                "DEFAULT",
                "COMMENT",
                "ATTRIBUTE",
            ],
            current_user,
            &mut change,
        );
    }
    if change.all {
        change.users.clear();
    }
    Some(change)
}

fn reach(change: &mut PrivilegeChange, g: Grantee) {
    match g {
        Grantee::User(u) if !change.users.contains(&u) => change.users.push(u),
        Grantee::User(_) => {}
        Grantee::Anyone => change.all = true,
    }
}

/// `SET DEFAULT ROLE … [FOR account]`, `SET PASSWORD [FOR account] = …`: the account named,
/// or the session's own.
fn for_user(w: &mut Words, reason: Reason, current_user: Option<&str>) -> PrivilegeChange {
    let mut change = PrivilegeChange {
        users: Vec::new(),
        all: false,
        sticky: false,
        reason,
    };
    match w.find_kw(1, "FOR") {
        Some(f) => {
            let (g, _) = grantee(w, f + 1, current_user);
            reach(&mut change, g);
        }
        None => reach(
            &mut change,
            match current_user {
                Some(u) => Grantee::User(u.to_string()),
                None => Grantee::Anyone,
            },
        ),
    }
    change
}

/// `FLUSH [NO_WRITE_TO_BINLOG | LOCAL] PRIVILEGES [, …]`.
fn flush(w: &mut Words) -> Option<PrivilegeChange> {
    let mut k = 1;
    while let Some(t) = w.tok(k) {
        if t.is_kw(w.sql, "PRIVILEGES") {
            return Some(PrivilegeChange::all(Reason::FlushPrivileges, true));
        }
        k += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (statement, users reached, all, sticky); `me` is the session's user.
    #[test]
    fn statements_reach_who_they_name() {
        type Row = (&'static str, &'static [&'static str], bool, bool);
        let rows: &[Row] = &[
            // Table and column level: every session sees it at its next statement.
            (
                "GRANT SELECT ON db.t TO alice@'%'",
                &["alice"],
                false,
                false,
            ),
            ("GRANT SELECT ON t TO 'alice'@'%'", &["alice"], false, false),
            (
                "GRANT SELECT (a, b) ON db.t TO `alice`@`%`",
                &["alice"],
                false,
                false,
            ),
            (
                "REVOKE SELECT ON db.t FROM alice@localhost, bob@'%'",
                &["alice", "bob"],
                false,
                false,
            ),
            (
                "GRANT SELECT ON TABLE db.t TO alice@'%'",
                &["alice"],
                false,
                false,
            ),
            (
                "GRANT EXECUTE ON PROCEDURE db.p TO alice@'%'",
                &["alice"],
                false,
                false,
            ),
            (
                "grant select on db.t to alice@'%' identified by 'x,y', bob@'%'",
                &["alice", "bob"],
                false,
                false,
            ),
            (
                "GRANT SELECT ON db.t TO alice@'%' WITH GRANT OPTION",
                &["alice"],
                false,
                false,
            ),
            // Global and database level: read at connect / USE / SET ROLE.
            ("GRANT SELECT ON *.* TO alice@'%'", &["alice"], false, true),
            ("GRANT SELECT ON db.* TO alice@'%'", &["alice"], false, true),
            ("GRANT SELECT ON * TO alice@'%'", &["alice"], false, true),
            (
                "REVOKE ALL PRIVILEGES, GRANT OPTION FROM alice@'%'",
                &["alice"],
                false,
                true,
            ),
            // A name without a host may be a role; PUBLIC and CURRENT_USER unknown.
            ("GRANT SELECT ON db.t TO r1", &[], true, false),
            ("GRANT SELECT ON db.t TO PUBLIC", &[], true, false),
            ("GRANT r1 TO alice@'%'", &["alice"], false, true),
            ("GRANT r1 TO r2", &[], true, true),
            ("REVOKE r1 FROM alice@'%'", &["alice"], false, true),
            (
                "GRANT SELECT ON db.t TO CURRENT_USER",
                &["me"],
                false,
                false,
            ),
            (
                "GRANT SELECT ON db.t TO CURRENT_USER()",
                &["me"],
                false,
                false,
            ),
            ("GRANT PROXY ON a@'%' TO b@'%'", &["b"], false, true),
            // An escape qcache would have to interpret: everyone.
            ("GRANT SELECT ON db.t TO 'al\\'ice'@'%'", &[], true, false),
            ("GRANT SELECT ON db.t TO 'al''ice'@'%'", &[], true, false),
            ("GRANT", &[], true, true),
            // Accounts.
            (
                "CREATE USER alice@'%' IDENTIFIED BY 'p'",
                &["alice"],
                false,
                false,
            ),
            (
                "CREATE USER IF NOT EXISTS alice@'%'",
                &["alice"],
                false,
                false,
            ),
            ("CREATE OR REPLACE USER alice@'%'", &["alice"], false, true),
            (
                "DROP USER IF EXISTS alice@'%', bob@'%'",
                &["alice", "bob"],
                false,
                true,
            ),
            (
                "RENAME USER alice@'%' TO carol@'%', bob@'%' TO dan@'%'",
                &["alice", "carol", "bob", "dan"],
                false,
                true,
            ),
            (
                "ALTER USER alice@'%' IDENTIFIED BY 'x'",
                &["alice"],
                false,
                false,
            ),
            (
                "ALTER USER alice@'%' WITH MAX_QUERIES_PER_HOUR 10",
                &["alice"],
                false,
                false,
            ),
            ("CREATE ROLE r1", &[], true, false),
            ("DROP ROLE r1", &[], true, true),
            ("DROP ROLE IF EXISTS r1", &[], true, true),
            (
                "SET DEFAULT ROLE r1 FOR alice@'%'",
                &["alice"],
                false,
                false,
            ),
            ("SET DEFAULT ROLE r1", &["me"], false, false),
            (
                "SET PASSWORD FOR alice@'%' = PASSWORD('x')",
                &["alice"],
                false,
                false,
            ),
            ("FLUSH PRIVILEGES", &[], true, true),
            (
                "FLUSH NO_WRITE_TO_BINLOG TABLES, PRIVILEGES",
                &[],
                true,
                true,
            ),
            ("/*!50000 FLUSH */ PRIVILEGES", &[], true, true),
            (
                "SET STATEMENT max_statement_time=1 FOR GRANT SELECT ON db.t TO a@'%'",
                &["a"],
                false,
                false,
            ),
            (
                "SET STATEMENT a=1 FOR SET STATEMENT b=2 FOR FLUSH PRIVILEGES",
                &[],
                true,
                true,
            ),
            (
                "SET STATEMENT a=(1) FOR SET STATEMENT b='x' FOR REVOKE SELECT ON t FROM b@'%'",
                &["b"],
                false,
                false,
            ),
        ];
        for &(sql, users, all, sticky) in rows {
            let c = statement_change(sql.as_bytes(), Some("me"))
                .unwrap_or_else(|| panic!("{sql}: not a privilege change"));
            let mut got: Vec<&str> = c.users.iter().map(String::as_str).collect();
            let mut want = users.to_vec();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!((got, c.all, c.sticky), (want, all, sticky), "{sql}");
        }
    }

    #[test]
    fn other_statements_change_no_privilege() {
        for sql in [
            "SELECT * FROM grants",
            "INSERT INTO t VALUES ('GRANT')",
            "CREATE TABLE user (a INT)",
            "DROP TABLE user",
            "ALTER TABLE t ADD COLUMN role INT",
            "RENAME TABLE a TO b",
            "FLUSH TABLES",
            "FLUSH QUERY CACHE",
            "SET ROLE r1",
            "SET @grant = 1",
            "",
        ] {
            assert_eq!(statement_change(sql.as_bytes(), Some("me")), None, "{sql}");
        }
    }

    #[test]
    fn unknown_session_user_widens_to_everyone() {
        for sql in [
            "SET DEFAULT ROLE r1",
            "SET PASSWORD = 'x'",
            "GRANT SELECT ON t TO CURRENT_USER",
        ] {
            let c = statement_change(sql.as_bytes(), None).unwrap();
            assert!(c.all, "{sql}");
        }
    }

    /// One row per kind of change a definer's privileges may go through, as seen on the
    /// binlog (no session user): whether readers of a DEFINER view owned by `definer` stop
    /// being served (the change's stamps meet the view's).
    #[test]
    fn privilege_changes_reach_readers_of_definer_views() {
        let reaches = |c: &PrivilegeChange, definer: &str| {
            let bumped = change_stamps(c);
            definer_stamps(definer).iter().any(|s| bumped.contains(s))
        };
        for (sql, definer, want) in [
            ("REVOKE SELECT ON db.t FROM lee@'%'", "lee@%", true),
            (
                "REVOKE SELECT ON db.t FROM 'lee'@'localhost'",
                "lee@%",
                true,
            ),
            ("REVOKE SELECT ON db.t FROM lee@'%'", "mia@%", false),
            ("GRANT SELECT ON db.t TO lee@'%'", "lee@%", true),
            ("REVOKE SELECT (a) ON db.t FROM lee@'%'", "lee@%", true),
            (
                "REVOKE ALL PRIVILEGES, GRANT OPTION FROM lee@'%'",
                "lee@%",
                true,
            ),
            ("REVOKE SELECT ON db.* FROM lee@'%'", "lee@%", true),
            ("DROP USER lee@'%'", "lee@%", true),
            ("DROP USER IF EXISTS mia@'%', lee@'%'", "lee@%", true),
            ("RENAME USER lee@'%' TO ann@'%'", "lee@%", true),
            ("RENAME USER ann@'%' TO lee@'%'", "lee@%", true),
            ("ALTER USER lee@'%' ACCOUNT LOCK", "lee@%", true),
            ("CREATE USER lee@'%'", "lee@%", true),
            ("REVOKE r1 FROM lee@'%'", "lee@%", true),
            ("SET DEFAULT ROLE r1 FOR lee@'%'", "lee@%", true),
            // A role's holders are unknown here: every definer view.
            ("REVOKE SELECT ON db.t FROM r1", "lee@%", true),
            ("REVOKE SELECT ON db.t FROM r1", "r1", true),
            ("DROP ROLE r1", "lee@%", true),
            ("GRANT SELECT ON db.t TO PUBLIC", "lee@%", true),
            ("REVOKE SELECT ON db.t FROM PUBLIC", "lee@%", true),
            ("FLUSH PRIVILEGES", "lee@%", true),
            ("SET DEFAULT ROLE r1", "lee@%", true),
            ("REVOKE SELECT ON db.t FROM CURRENT_USER", "lee@%", true),
        ] {
            let c = statement_change(sql.as_bytes(), None).expect(sql);
            assert_eq!(reaches(&c, definer), want, "{sql} / definer {definer}");
        }
        assert!(reaches(&PrivilegeChange::privilege_table(), "lee@%"));
        // The stamps live where no table does.
        for (schema, _) in definer_stamps("lee@%") {
            assert!(schema.is_empty());
        }
    }

    #[test]
    fn set_role_is_told_from_set_default_role() {
        assert!(sets_role(b"SET ROLE r1"));
        assert!(sets_role(b"set role NONE"));
        assert!(!sets_role(b"SET DEFAULT ROLE r1"));
        assert!(!sets_role(b"SET @role = 1"));
    }

    /// One row per stamp kind: the change another instance made is learned back from the
    /// bump of its stamp, for every change `change_stamps` can give.
    #[test]
    fn changes_are_learned_back_from_their_stamps() {
        let named = |users: &[&str]| PrivilegeChange {
            users: users.iter().map(|s| s.to_string()).collect(),
            all: false,
            sticky: false,
            reason: Reason::Revoke,
        };
        for (rule, change, want_users, want_all) in [
            (
                "a named user's change: that user",
                named(&["bob"]),
                vec!["bob"],
                false,
            ),
            (
                "a user whose name has a space and an @",
                named(&["a b@c"]),
                vec!["a b@c"],
                false,
            ),
            (
                "a change that may reach anyone: everyone",
                PrivilegeChange::privilege_table(),
                vec![],
                true,
            ),
        ] {
            let mut learned = 0;
            for (s, n) in change_stamps(&change) {
                let Some(got) = learned_change(&s, &n) else {
                    // Raised beside the users' stamps, which carry the change.
                    assert_eq!(n, EVERY_CHANGE_STAMP, "{rule}: {n} learns nothing");
                    continue;
                };
                learned += 1;
                assert_eq!(got.all, want_all, "{rule}");
                assert_eq!(got.users, want_users, "{rule}");
                assert!(got.sticky, "{rule}: a learned change is taken as sticky");
            }
            assert_eq!(learned, want_users.len().max(1), "{rule}");
        }
        // And a reader's L2 read depends on a stamp of every change that reaches it (for
        // users sharing entries, every change: their key holds the instance's epoch).
        for (rule, change, reader, reached) in [
            (
                "a change naming the reader",
                named(&["bob"]),
                Some("bob"),
                true,
            ),
            (
                "a change naming another user",
                named(&["eve"]),
                Some("bob"),
                false,
            ),
            (
                "a change that may reach anyone",
                PrivilegeChange::privilege_table(),
                Some("bob"),
                true,
            ),
            (
                "a change that may reach anyone, users sharing entries",
                PrivilegeChange::privilege_table(),
                None,
                true,
            ),
            (
                "a change naming a user, users sharing entries",
                named(&["eve"]),
                None,
                true,
            ),
            (
                "a change naming several users, users sharing entries",
                named(&["eve", "bob"]),
                None,
                true,
            ),
        ] {
            let deps = reader_stamps(reader);
            assert_eq!(
                change_stamps(&change).iter().any(|s| deps.contains(s)),
                reached,
                "{rule}: whether the reader's L2 read depends on what it bumps"
            );
        }
        for (s, n) in [("shop", "user bob"), ("mysql", "user"), ("", "orders")] {
            assert_eq!(learned_change(s, n), None, "{s}.{n} is not a stamp");
        }
    }

    #[test]
    fn privilege_tables() {
        for (s, t, want) in [
            ("mysql", "global_priv", true),
            ("mysql", "user", true),
            ("mysql", "tables_priv", true),
            ("mysql", "roles_mapping", true),
            ("mysql", "proc", false),
            ("db", "user", false),
        ] {
            assert_eq!(is_privilege_table(s, t), want, "{s}.{t}");
        }
    }

    #[test]
    fn divergence_and_accounts() {
        assert!(!session_diverged(5, 0));
        assert!(!session_diverged(5, 5));
        assert!(session_diverged(5, 6));
        assert_eq!(account_user("alice@%"), "alice");
        assert_eq!(account_user("a@b@localhost"), "a@b");
        assert_eq!(account_user("@%"), "");
        assert_eq!(account_user("x"), "x");
    }
}
