//! Privilege generations: what makes an entry filled for a user unservable once that user's
//! privileges (or anyone's, when qcache cannot tell whose) may have changed.
//!
//! Every change takes the next value of one epoch. A user's generation is the epoch of the
//! last change that reached them (named, or every user); sessions fold it into their key's
//! fingerprint, so entries filled before the change are never found again (eviction drops
//! them). The hit path pays one atomic load: the epoch, compared with the one the session's
//! fingerprint was computed under; only when it moved does the session look further.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::policy::privileges::PrivilegeChange;

#[derive(Debug, Default, Clone, Copy)]
struct Gens {
    /// The last change that reached this user (or everyone).
    any: u64,
    /// The last sticky change (sessions connected before it keep their old privileges).
    sticky: u64,
}

#[derive(Debug, Default)]
pub struct Privileges {
    epoch: AtomicU64,
    /// Changes that reached every user, and per user name.
    gens: Mutex<(Gens, HashMap<String, Gens>)>,
}

/// What a session keys by: its user's generations, as of `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivilegeView {
    pub epoch: u64,
    /// Folded into the fingerprint.
    pub generation: u64,
    /// The newest sticky change that reached the user (compare with the session's baseline).
    pub sticky: u64,
}

impl Privileges {
    /// The hit path's check: unchanged since the session computed its fingerprint?
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Records a change; called after the server applied it and before its OK reaches the
    /// client (or when the binlog shows it).
    pub fn apply(&self, c: &PrivilegeChange) {
        let mut g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        let e = self.epoch.load(Ordering::Acquire) + 1;
        let mark = |x: &mut Gens| {
            if !c.splits_only() {
                x.any = e;
            }
            if c.sticky {
                x.sticky = e;
            }
        };
        if c.all {
            mark(&mut g.0);
        } else {
            for u in &c.users {
                mark(g.1.entry(u.clone()).or_default());
            }
        }
        // Published after the generations, under the lock: a session that sees the new epoch
        // sees what it covers.
        self.epoch.store(e, Ordering::Release);
    }

    /// The generations of `user` (None: users share entries, so every change counts).
    pub fn view(&self, user: Option<&str>) -> PrivilegeView {
        let g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = self.epoch.load(Ordering::Acquire);
        let own = match user {
            Some(u) => g.1.get(u).copied().unwrap_or_default(),
            None => Gens {
                any: epoch,
                sticky: g.1.values().map(|x| x.sticky).max().unwrap_or(0),
            },
        };
        PrivilegeView {
            epoch,
            generation: own.any.max(g.0.any),
            sticky: own.sticky.max(g.0.sticky),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::privileges::Reason;

    fn change(users: &[&str], all: bool, sticky: bool) -> PrivilegeChange {
        PrivilegeChange {
            users: users.iter().map(|s| s.to_string()).collect(),
            all,
            sticky,
            reason: Reason::Grant,
        }
    }

    #[test]
    fn a_change_reaches_whom_it_names() {
        let p = Privileges::default();
        let a0 = p.view(Some("alice"));
        let b0 = p.view(Some("bob"));
        p.apply(&change(&["alice"], false, false));
        let a1 = p.view(Some("alice"));
        assert_ne!(a0.generation, a1.generation);
        assert_eq!(p.view(Some("bob")).generation, b0.generation);
        assert_eq!(a1.sticky, 0);
        // Shared entries: any change counts.
        let s = p.view(None);
        p.apply(&change(&["bob"], false, true));
        assert_ne!(p.view(None).generation, s.generation);
        assert!(p.view(None).sticky > a1.epoch);
        assert_eq!(p.view(Some("alice")).generation, a1.generation);
        // Everyone.
        p.apply(&change(&[], true, true));
        let a2 = p.view(Some("alice"));
        assert!(a2.generation > a1.generation && a2.sticky == a2.epoch);
        assert_eq!(p.epoch(), a2.epoch);
    }

    /// A change that may have been missed splits the sessions connected before it (sticky,
    /// and the epoch moves so they notice) and moves no generation: new sessions key their
    /// reads as the rest of the fleet does.
    #[test]
    fn a_missed_change_splits_sessions_and_moves_no_generation() {
        let p = Privileges::default();
        p.apply(&change(&["alice"], false, false));
        let before = p.view(Some("alice"));
        p.apply(&PrivilegeChange::missed());
        let after = p.view(Some("alice"));
        assert_eq!(after.generation, before.generation, "no generation moves");
        assert!(
            after.sticky > before.epoch,
            "sessions from before are split off"
        );
        assert!(after.epoch > before.epoch, "and notice it");
        assert_eq!(
            p.view(Some("bob")).generation,
            0,
            "nor anyone else's generation"
        );
    }
}
