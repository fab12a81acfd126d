//! Where a miss's result goes once relayed: its target, decided before the query went up
//! (`FillTarget`), and the entry stored (`store_fill`): in L1 through the session's claim or
//! under the transaction's store point, a copy in L2 when this instance fills it, and its
//! patch recipe registered. The session relays; this stores.

use std::sync::Arc;

use bytes::BytesMut;

use super::fill::Fill;
use super::read::{dressed, filled_entry, FillFacts, ReadMode, ReadPlan};
use super::state::SessionState;
use super::Planner;
use crate::cache::entry::L2Stamps;
use crate::cache::patches::Reach;
use crate::cache::{FillGuard, Snapshot, Stamps, Versions};
use crate::l2::now_ms;
use crate::policy::patch::Param;
use crate::policy::Reason;
use crate::protocol::packets::com;
use crate::protocol::response::Response;
use crate::shared::Shared;

/// What L2 said to a miss that asks it first: its versions read before the query, and
/// whether this instance holds the fill lease.
pub type L2Fill = (Option<L2Stamps>, bool);

/// Where a miss's result goes once relayed, decided before it was sent.
pub struct FillTarget {
    /// The versions of its tables read before the query went upstream.
    pub stamps: Stamps,
    /// Whether it may be stored at all (its tables unchanged since the view's point).
    pub storable: bool,
    /// This session's claim on the key; None when it waited for another's fill in vain.
    pub guard: Option<FillGuard>,
    /// The transaction's store point, if the read runs in one.
    pub snap: Option<Snapshot>,
    /// L2's versions read before the query, and whether this instance holds the fill lease.
    pub l2_fill: Option<L2Fill>,
    /// An execute's result (binary rows): what a patch of it writes (`policy::patch`).
    pub binary: bool,
    /// An execute's parameters, read when patching is on: what its `?` stand for in the
    /// patch recipe (`engine::patch::execute_params`).
    pub params: Option<Vec<Param>>,
    /// What the query took upstream (ns), set once its answer came: the entry's fill time,
    /// what a patch that keeps it saves (`policy::verify`).
    pub took_ns: u64,
}

impl FillTarget {
    /// The target of a miss about to go up: `stamps` read before it, `mode` the view it
    /// reads in (a transaction's store point: storable only if its tables did not change
    /// since), this session's claim and what L2 said, `payload` the command sent, `params`
    /// its parameters when they matter (patching on).
    pub fn new(
        versions: &Versions,
        stamps: Stamps,
        mode: &ReadMode,
        guard: Option<FillGuard>,
        l2_fill: Option<L2Fill>,
        (payload, params): (&[u8], Option<Vec<Param>>),
    ) -> FillTarget {
        let snap = mode.store_point();
        let storable = snap.is_none_or(|s| stamps.valid_in(versions, &s));
        FillTarget {
            stamps,
            storable,
            guard,
            snap,
            l2_fill,
            binary: payload.first() == Some(&com::STMT_EXECUTE),
            params,
            took_ns: 0,
        }
    }
}

/// Stores a relayed result when it qualifies (`engine::read::filled_entry`), in L1 through
/// the claim (or directly when the session waited in vain for another's fill), and in L2
/// when this instance fills it; else lets an L2 lease go. Whether it was stored (the store
/// counts its own refusals: too large, stale fill), or why the result does not qualify; and
/// the fill's buffer, for the next fill. `shape`: the statement's normalised text for its
/// entry (asked only of an entry made).
#[allow(clippy::too_many_arguments)]
pub fn store_fill(
    shared: &Shared,
    st: &SessionState,
    plan: &ReadPlan,
    sql: &[u8],
    resp: &Response,
    fill: Fill,
    target: FillTarget,
    shape: impl FnOnce() -> Option<Arc<str>>,
) -> (Result<bool, Reason>, BytesMut) {
    let l2 = target.l2_fill.as_ref().and_then(|(s, _)| s.clone());
    let facts = FillFacts {
        stamps: target.stamps,
        storable: target.storable,
        l2,
    };
    let (entry, scratch) = filled_entry(st, plan, sql, resp, fill, facts);
    let entry = match entry {
        Ok(entry) => entry,
        Err(reason) => {
            if let (Some((_, leased)), Some(l2)) = (target.l2_fill, &shared.l2) {
                l2.after_fill(plan.key, None, leased, None);
            }
            return (Err(reason), scratch);
        }
    };
    let mut entry = dressed(entry, plan, sql, shape());
    // A result a known insert can patch (`engine::patch`).
    let recipe = Planner::new(shared).fill_recipe(
        st,
        sql,
        target.params.as_deref(),
        &plan.tables,
        target.binary,
        plan.digest,
        shared.l2.is_some(),
        target.snap.is_some(),
    );
    entry.patch = recipe.clone();
    entry.fill_ns = target.took_ns;
    if let (Some((l2_stamps, leased)), Some(l2)) = (target.l2_fill, &shared.l2) {
        let ttl = plan.opts.ttl.map_or(0, |t| now_ms() + t.as_millis() as u64);
        l2.after_fill(plan.key, l2_stamps, leased, Some(entry.to_l2(ttl)));
    }
    let cache = &shared.cache;
    // What of its table the entry's stamps depend on: which writes find it to patch.
    let reach = recipe
        .as_ref()
        .map(|r| Reach::of(&entry.stamps, &r.schema, &r.table));
    let stored = match (target.guard, target.snap) {
        (Some(g), Some(s)) => g.insert_in(entry, &s),
        (Some(g), None) => g.insert(entry),
        (None, Some(s)) => cache.insert_in(plan.key, entry, &s),
        (None, None) => cache.insert(plan.key, entry),
    };
    if let (true, Some(r), Some(reach)) = (stored, recipe, reach) {
        cache
            .patches()
            .register(&r.schema, &r.table, plan.key, &r, reach);
    }
    (Ok(stored), scratch)
}
