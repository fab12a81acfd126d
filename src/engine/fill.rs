//! What a miss fills: what its entry will depend on, decided before its query goes upstream
//! (the stamps, the slice plan they were read under, and whether the miss may still store at
//! all: a DDL registered since it was planned says no), and the copy of the response it
//! tees as the session relays it (`Fill`).

use std::sync::Arc;

use bytes::BytesMut;

use super::slices::Planner;
use super::state::SessionState;
use super::KEEP_SCRATCH;
use crate::cache::sliceplans::PlannedSlices;
use crate::cache::{Stamps, TableHandle};
use crate::policy::Reason;
use crate::protocol::codec;

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

/// A copy of the response being relayed, for the cache.
pub struct Fill {
    pub buf: BytesMut,
    limit: usize,
    /// The response outgrew the entry limit: keep relaying, stop copying.
    pub overflow: bool,
    /// Absolute offsets of the status bytes of every EOF/OK in the copy.
    pub status_offsets: Vec<usize>,
}

impl Fill {
    /// `scratch`: a buffer to reuse (emptied here), so that a miss does not allocate one.
    pub fn new(limit: usize, mut scratch: BytesMut) -> Fill {
        scratch.clear();
        scratch.reserve(limit.min(4096));
        Fill {
            buf: scratch,
            limit,
            overflow: false,
            status_offsets: Vec::new(),
        }
    }

    /// The copy as an entry's bytes, in an allocation of exactly its size: the fill buffer
    /// has room to spare (4 KiB for a 200-byte result), which an entry would otherwise keep
    /// for its whole life while its weight counts only the bytes. The buffer comes back for
    /// the next fill.
    pub fn take(self) -> (bytes::Bytes, BytesMut) {
        let bytes = bytes::Bytes::copy_from_slice(&self.buf);
        (bytes, self.into_scratch())
    }

    /// The buffer, for the next fill.
    pub fn into_scratch(self) -> BytesMut {
        if self.buf.capacity() > KEEP_SCRATCH {
            BytesMut::new()
        } else {
            self.buf
        }
    }

    /// Copies one server packet (`status_at`: where its status bytes are, in an OK/EOF).
    pub fn add(&mut self, seq: u8, payload: &[u8], status_at: Option<usize>) {
        if self.overflow {
            return;
        }
        if self.buf.len() + payload.len() + 4 > self.limit {
            self.overflow = true;
            self.buf = BytesMut::new();
            return;
        }
        let start = self.buf.len();
        codec::encode(seq, payload, &mut self.buf);
        if let Some(at) = status_at {
            self.status_offsets.push(start + 4 + at);
        }
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
