//! A miss's slice plan through the shared memo (`cache::sliceplans`): planned once per
//! statement, parameter values, database and catalog generation, and registered again on
//! every read before its stamps are read (`cache::versions`).

use std::sync::Arc;

use super::slices::{execute_literals, Planner};
use super::state::SessionState;
use crate::cache::fkmap;
use crate::cache::sliceplans::{PlanInput, PlannedSlices};
use crate::cache::TableHandle;
use crate::config::Granularity;
use crate::protocol::packets::com;

impl Planner<'_> {
    /// [`plan_slices`](Self::plan_slices), remembered: the same answer, and the same
    /// registrations before the caller reads the stamps.
    pub fn planned_slices(
        &self,
        st: &SessionState,
        tables: &Arc<[TableHandle]>,
        sql: &[u8],
        payload: &[u8],
    ) -> Arc<PlannedSlices> {
        let cfg = &self.cfg;
        let fresh = || {
            let (whole, sliced, cols, generation) = self.plan_slices(st, tables, sql, payload);
            Arc::new(PlannedSlices::new(whole, sliced, cols, generation))
        };
        // Planned quickly, or from state the memo does not key by.
        if cfg.invalidation.granularity != Granularity::Row
            || !st.temp_tables.is_empty()
            || super::slices::slices_refused(st)
        {
            return fresh();
        }
        let params = if payload.first() == Some(&com::STMT_EXECUTE) {
            match execute_literals(st, payload) {
                Some(p) => Some(p),
                None => return fresh(),
            }
        } else {
            None
        };
        let input = PlanInput {
            sql,
            db: st.db.as_deref(),
            params: params.as_deref(),
            derived_slices: cfg.invalidation.derived_slices,
        };
        let catalog = self.catalog;
        let memo = self.memo;
        if let Some(p) = memo.get(&input, tables, catalog.generation()) {
            if self.register_again(&p) {
                return p;
            }
        }
        let generation = catalog.generation();
        let p = fresh();
        if p.generation == generation && catalog.generation() == generation {
            memo.insert(&input, tables, p.clone());
        }
        p
    }

    /// Registers a remembered plan's slice columns (and the parent maps of its derived ones)
    /// as planning did; false when a column registers as another than the plan holds (never,
    /// as the registry drops none: then the plan is made afresh).
    fn register_again(&self, p: &PlannedSlices) -> bool {
        let versions = self.versions;
        for s in &p.sliced {
            if let Some((_, key)) = fkmap::parse_derived(&s.column.name) {
                versions.parents.register(&key);
            }
            if !Arc::ptr_eq(&versions.register(&s.table, &s.column.name), &s.column) {
                return false;
            }
        }
        true
    }
}
