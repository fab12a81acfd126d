//! What a miss's entry will depend on, decided before its query goes upstream: the stamps,
//! the slice plan they were read under, and whether the miss may still store at all (a DDL
//! registered since it was planned says no).

use std::sync::Arc;

use super::slices::Planner;
use super::state::SessionState;
use crate::cache::sliceplans::PlannedSlices;
use crate::cache::{Stamps, TableHandle};
use crate::policy::Reason;

/// The stamps a miss's entry is stored with, and the slice plan they were read under.
pub struct FillStamps {
    /// The versions its tables (or their slices) held before the query went upstream: a
    /// write that lands while the query runs makes them stale, so the result can never
    /// outlive it.
    pub stamps: Stamps,
    /// The read's slice plan through the memo; its catalog generation is what an L2 lookup
    /// names its dependencies under.
    pub planned: Arc<PlannedSlices>,
    /// Whether `stamps` were read per slice under `planned`, or the tables whole because a
    /// catalog reload raced the slicing.
    sliced: bool,
}

impl FillStamps {
    /// The slice plan the stamps follow, when they follow one.
    pub fn slicing(&self) -> Option<&PlannedSlices> {
        self.sliced.then_some(&*self.planned)
    }
}

impl Planner<'_> {
    /// Reads a miss's stamps: slices registered first (`cache::versions`), then the versions.
    /// Refused with [`Reason::DdlPending`] when a DDL was registered after the read was
    /// planned at `planned_epoch`: its plan may be the old catalog's while the stamps may
    /// already include the DDL's first bump, so it is relayed without a copy and the next
    /// read plans against what the DDL left. `sql` is the statement's text (the prepared SQL
    /// for an execute), `payload` what goes upstream.
    pub fn fill_stamps(
        &self,
        st: &SessionState,
        tables: &Arc<[TableHandle]>,
        planned_epoch: u64,
        sql: &[u8],
        payload: &[u8],
    ) -> Result<FillStamps, Reason> {
        let planned = self.planned_slices(st, tables, sql, payload);
        let cols = &planned.cols;
        let mut stamps =
            Stamps::capture_sliced(self.versions, &planned.whole, &planned.sliced, cols);
        let by_columns = !cols.tables.is_empty() || !cols.indexes.is_empty();
        let mut sliced = true;
        if (!planned.sliced.is_empty() || by_columns)
            && self.catalog.generation() != planned.generation
        {
            // A reload raced the slicing: the column types (or lists) used may predate a DDL
            // whose after-reload bump these stamps already include. Depend on the tables
            // whole.
            stamps = Stamps::capture(self.versions, tables);
            sliced = false;
        }
        // After the stamps: a DDL registered before them is seen here.
        if self.catalog.ddl_epoch() != planned_epoch {
            return Err(Reason::DdlPending);
        }
        Ok(FillStamps {
            stamps,
            planned,
            sliced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::writes::Changed;
    use crate::engine::World;

    /// (rule, row granularity, statement, DDL registered after planning, sliced or refused)
    type Row = (&'static str, bool, &'static str, bool, Result<bool, Reason>);

    /// One row per outcome: sliced stamps, the same read with slices off (whole tables),
    /// and a DDL registered after planning (refused).
    #[test]
    fn fill_stamps_follow_the_plan_or_refuse_after_a_ddl() {
        let rows: &[Row] = &[
            (
                "a pinned read under row granularity reads its slice's stamps",
                true,
                "SELECT a FROM child WHERE id = 7",
                false,
                Ok(true),
            ),
            (
                "under table granularity nothing is sliced, and no slicing is named",
                false,
                "SELECT a FROM child WHERE id = 7",
                false,
                Ok(false),
            ),
            (
                "a DDL registered after planning: relayed without a copy",
                true,
                "SELECT a FROM child WHERE id = 7",
                true,
                Err(Reason::DdlPending),
            ),
        ];
        for (rule, row, sql, ddl, want) in rows {
            let w = World::new(*row);
            let st = w.session(Some("db"));
            let tables: Arc<[TableHandle]> = vec![w.versions.table("db", "child")].into();
            let epoch = w.catalog.ddl_epoch();
            if *ddl {
                let changed = Changed {
                    objects: vec![("db".into(), "child".into())],
                    ..Changed::default()
                };
                w.catalog.register_ddl(&changed);
            }
            let got = w
                .planner()
                .fill_stamps(&st, &tables, epoch, sql.as_bytes(), sql.as_bytes())
                .map(|f| f.slicing().is_some_and(|p| !p.sliced.is_empty()));
            assert_eq!(&got, want, "{rule}");
        }
    }
}
