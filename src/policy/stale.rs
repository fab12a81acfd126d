//! Bounded staleness and empty results, the two per-rule relaxations of issue #37: whether
//! an entry a data change made outdated may still be served ([`may_serve_stale`], rules with
//! `max_stale`), and whether a result of no rows may be stored ([`store_empty`], rules with
//! `cache_empty = false`). Pure: the session gathers the facts and does the I/O; text reads,
//! prepared executes and `QCACHE EXPLAIN` all ask these two functions.
//!
//! What `max_stale` relaxes is invariant 1 (no stale read after an acknowledged write), for
//! other sessions only and only for a bounded time; what it never relaxes is listed in
//! docs/guarantees.md and is one row each in the tests below.

use std::time::Duration;

use super::Reason;

/// The longest `max_stale` honoured: a longer one counts as this. Bounds how long a session
/// must remember its own writes (`engine::state::OwnWrites`).
pub const MAX_STALE: Duration = Duration::from_secs(3600);

/// Why an entry was invalidated, when it was not (or not only) a change of rows: the
/// kinds of invalidation after which an entry is never served stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Dropped {
    /// DDL through qcache or in the binlog, or the catalog's reload after it.
    Catalog = 1,
    /// A privilege change (what some users may read changed).
    Privileges = 2,
    /// `RESET QUERY CACHE`, `QCACHE INVALIDATE TABLE`, `FLUSH TABLES`.
    Flush = 3,
    /// The binlog stream lost events: what changed is unknown.
    Gap = 4,
    /// A write qcache could not analyse, invalidated by schema or wholesale.
    Conservative = 5,
    /// A bump learned from L2's channel: another instance's change of unknown kind.
    Shared = 6,
    /// Such an invalidation is being applied right now: its kind is not settled yet.
    Pending = 7,
}

impl Dropped {
    /// The kind a stored byte names (`cache::versions` keeps the last one per table); an
    /// unknown byte is the strictest reading, one whose kind is unknown.
    pub fn from_u8(b: u8) -> Dropped {
        match b {
            1 => Dropped::Catalog,
            2 => Dropped::Privileges,
            3 => Dropped::Flush,
            4 => Dropped::Gap,
            5 => Dropped::Conservative,
            6 => Dropped::Shared,
            _ => Dropped::Pending,
        }
    }
}

/// What the decision reads of one outdated entry and the session asking for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The entry's rule's `max_stale`; None when it has none (the default).
    pub max_stale: Option<Duration>,
    /// The `max_stale` of the rule matching this read's own statement. Reads of different
    /// texts share a key (trace comments at either end are not keyed, nor are SQL_CACHE
    /// hints; with `shared_between_users` neither is the user) while a rule's regex or user
    /// may match one and not the other: an entry a matching read stored says nothing of
    /// what the reader asked for. Both must opt in, and the tighter bound holds.
    pub read_max_stale: Option<Duration>,
    /// Time since the entry's stamps were read (before its query was sent): at least the
    /// time since the write that outdated it, so bounding it bounds staleness.
    pub age: Duration,
    /// The session reads inside a transaction (or a view being established).
    pub in_transaction: bool,
    /// The session's settings or temporary tables are not followed right now.
    pub context_untracked: bool,
    /// The session wrote one of the entry's tables after the entry's query was sent.
    pub own_write: bool,
    /// An invalidation other than a change of rows reached the entry since it was stored.
    pub dropped: Option<Dropped>,
    /// Hits are confirmed by a shared L2, which holds only current entries.
    pub shared_level: bool,
    /// Another session is refreshing the entry right now (holds its fill claim).
    pub refresh_in_flight: bool,
}

/// Serve it stale: how old it is, against what bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleOk {
    pub age: Duration,
    pub max_stale: Duration,
}

/// Why an outdated entry is not served stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its rule, or the rule of the read asking, sets no `max_stale` (the default).
    NotOptedIn,
    /// Transactions read their snapshot, never an older one.
    InTransaction,
    /// The session's context is not followed: the cache is not used at all.
    ContextUntracked,
    /// Read-your-own-writes: the session wrote one of its tables since it was computed.
    OwnWrite,
    /// Invalidated for a reason other than a change of rows.
    Dropped(Dropped),
    /// A shared L2 confirms hits and holds only current entries.
    SharedLevel,
    /// Older than `max_stale`.
    TooOld,
    /// Nobody is refreshing it: this read refreshes it (a miss, relayed and stored).
    NoRefreshInFlight,
}

impl Why {
    /// Whether no later read can be served the entry stale either: then it is dropped
    /// like any outdated entry.
    pub fn permanent(self) -> bool {
        matches!(self, Why::NotOptedIn | Why::Dropped(_) | Why::TooOld)
    }

    /// The words `QCACHE EXPLAIN` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Why::NotOptedIn => "no max_stale in its rule or this read's",
            Why::InTransaction => "inside a transaction",
            Why::ContextUntracked => "session context not followed",
            Why::OwnWrite => "this session wrote one of its tables since",
            Why::Dropped(Dropped::Catalog) => "invalidated by DDL or the catalog",
            Why::Dropped(Dropped::Privileges) => "invalidated by a privilege change",
            Why::Dropped(Dropped::Flush) => "invalidated by a flush",
            Why::Dropped(Dropped::Gap) => "invalidated by a binlog gap",
            Why::Dropped(Dropped::Conservative) => {
                "invalidated by a write qcache could not analyse"
            }
            Why::Dropped(Dropped::Shared) => "invalidated through L2",
            Why::Dropped(Dropped::Pending) => "an invalidation is being applied",
            Why::SharedLevel => "hits are confirmed by L2",
            Why::TooOld => "older than max_stale",
            Why::NoRefreshInFlight => "no refresh in flight: this read refreshes it",
        }
    }
}

/// Whether an outdated entry may be served stale. Asked only of entries found outdated:
/// the hit path of a current entry never reaches it.
pub fn may_serve_stale(f: &Facts) -> Result<StaleOk, Why> {
    let Some(max_stale) = f
        .max_stale
        .zip(f.read_max_stale)
        .map(|(e, r)| e.min(r).min(MAX_STALE))
    else {
        return Err(Why::NotOptedIn);
    };
    if f.in_transaction {
        return Err(Why::InTransaction);
    }
    if f.context_untracked {
        return Err(Why::ContextUntracked);
    }
    if f.own_write {
        return Err(Why::OwnWrite);
    }
    if let Some(d) = f.dropped {
        return Err(Why::Dropped(d));
    }
    if f.shared_level {
        return Err(Why::SharedLevel);
    }
    // Not `>=`-tolerant either way: at exactly max_stale it is too old.
    if f.age >= max_stale {
        return Err(Why::TooOld);
    }
    if !f.refresh_in_flight {
        return Err(Why::NoRefreshInFlight);
    }
    Ok(StaleOk {
        age: f.age,
        max_stale,
    })
}

/// Whether a clean result of `rows` rows may be stored for a read whose rule says
/// `cache_empty`: a result with no rows is not, when the rule says false.
pub fn store_empty(rows: u64, cache_empty: bool) -> Result<(), Reason> {
    if rows == 0 && !cache_empty {
        Err(Reason::EmptyResult)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(2);

    /// An entry that may be served stale: every row below changes one fact.
    fn ok() -> Facts {
        Facts {
            max_stale: Some(S),
            read_max_stale: Some(S),
            age: Duration::from_millis(500),
            in_transaction: false,
            context_untracked: false,
            own_write: false,
            dropped: None,
            shared_level: false,
            refresh_in_flight: true,
        }
    }

    #[test]
    fn one_row_per_rule() {
        let rows: Vec<(&str, Facts, Result<StaleOk, Why>)> = vec![
            (
                "a data change, within max_stale, refresh in flight: served stale",
                ok(),
                Ok(StaleOk {
                    age: Duration::from_millis(500),
                    max_stale: S,
                }),
            ),
            (
                "off by default: no max_stale in the rule",
                Facts {
                    max_stale: None,
                    ..ok()
                },
                Err(Why::NotOptedIn),
            ),
            (
                "never to a read its own rule does not opt in (same key, another text)",
                Facts {
                    read_max_stale: None,
                    ..ok()
                },
                Err(Why::NotOptedIn),
            ),
            (
                "the reader's tighter bound holds",
                Facts {
                    read_max_stale: Some(Duration::from_millis(400)),
                    ..ok()
                },
                Err(Why::TooOld),
            ),
            (
                "never inside a transaction",
                Facts {
                    in_transaction: true,
                    ..ok()
                },
                Err(Why::InTransaction),
            ),
            (
                "never to a session whose context is not followed",
                Facts {
                    context_untracked: true,
                    ..ok()
                },
                Err(Why::ContextUntracked),
            ),
            (
                "never to a session after its own write to the entry's tables",
                Facts {
                    own_write: true,
                    ..ok()
                },
                Err(Why::OwnWrite),
            ),
            (
                "never after DDL or a catalog change",
                Facts {
                    dropped: Some(Dropped::Catalog),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Catalog)),
            ),
            (
                "never after a privilege change",
                Facts {
                    dropped: Some(Dropped::Privileges),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Privileges)),
            ),
            (
                "never after an admin flush",
                Facts {
                    dropped: Some(Dropped::Flush),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Flush)),
            ),
            (
                "never after a binlog gap",
                Facts {
                    dropped: Some(Dropped::Gap),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Gap)),
            ),
            (
                "never after a write qcache could not analyse",
                Facts {
                    dropped: Some(Dropped::Conservative),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Conservative)),
            ),
            (
                "never after a bump from L2, whose kind is unknown",
                Facts {
                    dropped: Some(Dropped::Shared),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Shared)),
            ),
            (
                "never while a non-data invalidation is being applied",
                Facts {
                    dropped: Some(Dropped::Pending),
                    ..ok()
                },
                Err(Why::Dropped(Dropped::Pending)),
            ),
            (
                "never when L2 confirms hits",
                Facts {
                    shared_level: true,
                    ..ok()
                },
                Err(Why::SharedLevel),
            ),
            (
                "never at max_stale",
                Facts { age: S, ..ok() },
                Err(Why::TooOld),
            ),
            (
                "never after max_stale",
                Facts {
                    age: S * 10,
                    ..ok()
                },
                Err(Why::TooOld),
            ),
            (
                "a max_stale beyond the cap counts as the cap",
                Facts {
                    max_stale: Some(MAX_STALE * 2),
                    age: MAX_STALE,
                    ..ok()
                },
                Err(Why::TooOld),
            ),
            (
                "no refresh in flight: this read refreshes it",
                Facts {
                    refresh_in_flight: false,
                    ..ok()
                },
                Err(Why::NoRefreshInFlight),
            ),
            (
                "a transaction wins over every other fact",
                Facts {
                    in_transaction: true,
                    own_write: true,
                    age: S * 10,
                    ..ok()
                },
                Err(Why::InTransaction),
            ),
        ];
        for (rule, facts, want) in rows {
            assert_eq!(may_serve_stale(&facts), want, "{rule}");
        }
    }

    /// What outlives a refusal: an entry refused for this session's reasons stays for
    /// others; one refused for its own reasons goes.
    #[test]
    fn permanent_refusals_drop_the_entry() {
        for (why, permanent) in [
            (Why::NotOptedIn, true),
            (Why::TooOld, true),
            (Why::Dropped(Dropped::Catalog), true),
            (Why::InTransaction, false),
            (Why::OwnWrite, false),
            (Why::ContextUntracked, false),
            (Why::SharedLevel, false),
            (Why::NoRefreshInFlight, false),
        ] {
            assert_eq!(why.permanent(), permanent, "{why:?}");
        }
    }

    #[test]
    fn dropped_bytes_round_trip_and_unknown_is_pending() {
        for d in [
            Dropped::Catalog,
            Dropped::Privileges,
            Dropped::Flush,
            Dropped::Gap,
            Dropped::Conservative,
            Dropped::Shared,
            Dropped::Pending,
        ] {
            assert_eq!(Dropped::from_u8(d as u8), d);
        }
        assert_eq!(Dropped::from_u8(0), Dropped::Pending);
        assert_eq!(Dropped::from_u8(200), Dropped::Pending);
    }

    #[test]
    fn empty_results_one_row_each() {
        for (rows, cache_empty, want) in [
            (0, true, Ok(())),
            (0, false, Err(Reason::EmptyResult)),
            (1, false, Ok(())),
            (5, true, Ok(())),
        ] {
            assert_eq!(store_empty(rows, cache_empty), want, "{rows} {cache_empty}");
        }
    }
}
