//! A cached result: the response's wire bytes, where its status flags sit, the table versions
//! it was computed under, and how to write it for a session (status flags patched).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use super::l2::L2Entry;
use super::versions::{Stamps, TableHandle};
use crate::policy::diagnostics::EntryDiagnostics;
use crate::policy::patch::Recipe;
use crate::protocol::packets::status::PER_SESSION;

/// The L2 versions an entry was computed under: dependency names and values, in the order
/// `l2::L2Deps::deps` gives (kept here, under the entry that holds them, so that the cache
/// does not import the L2 client).
pub type L2Stamps = Arc<[(String, u64)]>;

/// Longest SQL preview kept for admin listings; longer statements are cut at a char boundary.
pub const SQL_PREVIEW_BYTES: usize = 200;

/// Bookkeeping per entry outside `Entry` itself: the quick_cache slab slot (key, `Arc`, clock
/// state, links), its hash-table slot and ghost share, the `Arc` header, and the shared header
/// `Bytes` allocates when it is cloned. Measured from the layouts, rounded up.
const OVERHEAD_BYTES: u64 = 128;

/// `repr(C)`, fields in the order a hit reads them: the ones every hit reads (the bytes'
/// handle and offsets, the expiry, the counters, the diagnostics, then `stamps`, whose own
/// first fields are the ones its check reads) sit together after the `Arc`'s counts, so
/// that a hit reads the fewest lines of an entry that has gone cold since its last hit
/// (#36); what only listings, patches, L2, stale serving and misses read comes after.
#[derive(Debug)]
#[repr(C)]
pub struct Entry {
    /// The whole response as wire frames (4-byte headers), sequence ids from 1, so a hit
    /// is one write with no re-framing. Should be a right-sized buffer: a slice of a larger
    /// allocation keeps all of it alive while `weight()` counts only the slice.
    pub bytes: Bytes,
    /// Absolute offset in `bytes` of the final packet's two status-flag bytes, the only bytes
    /// that differ between sessions (in-transaction, autocommit, ...).
    pub status_at: usize,
    /// Offset of the status flags of the EOF that ends the column definitions (classic EOF
    /// protocol only): they describe the session too, so they are patched alike.
    pub meta_status_at: Option<usize>,
    /// Set by the store from the configured TTL; an expired entry is dropped on lookup.
    pub expires: Option<Instant>,
    /// Times served, for admin listings. Relaxed: a statistic, not a synchroniser.
    pub hits: AtomicU64,
    /// The statement's digest (literals replaced), to group entries by query shape in listings.
    pub digest: u64,
    /// Rows in the result (and `shape`, below): what a hit adds to its digest's statistics
    /// without looking at the statement.
    pub rows: u64,
    /// `FOUND_ROWS()` after the statement ran: what the server's diagnostics must say after
    /// a hit (`policy::diagnostics`).
    pub found_rows: u64,
    /// Table generations read before the query went upstream; the entry is valid only while
    /// they are unchanged.
    pub stamps: Stamps,
    /// The L2 versions this result was computed under, when L2 vouched for it: what strict
    /// mode (`l2.validate_hits = "remote"`) checks before serving it.
    pub l2: Option<L2Stamps>,
    /// The statement's normalised text (literals as `?`, shared by every entry of the
    /// shape), for the digest's statistics.
    pub shape: Option<std::sync::Arc<str>>,
    /// Statement preview for admin listings (at most `SQL_PREVIEW_BYTES`).
    pub sql: Option<Box<str>>,
    pub created: Instant,
    /// From the read's rule: once a data change outdates it, it may still be served to
    /// other sessions this long after `created` while one refreshes it (`policy::stale`).
    pub max_stale: Option<Duration>,
    /// How a write's known rows patch this result (`policy::patch`), when they can.
    pub patch: Option<Arc<Recipe>>,
    /// What the miss that filled it took upstream (ns; 0 when unknown): the server time a
    /// patch that keeps it saves, once it is served (`policy::verify`).
    pub fill_ns: u64,
    /// For a patched version: `hits` when it was stored. Whether it was served since says
    /// whether its patch saved a miss. None for a result from the server.
    pub hits_at_patch: Option<u64>,
}

impl Entry {
    /// An entry created now, with no SQL preview and no expiry (the store applies the TTL).
    pub fn new(bytes: Bytes, status_at: usize, stamps: Stamps, digest: u64) -> Entry {
        Entry {
            bytes,
            status_at,
            meta_status_at: None,
            stamps,
            digest,
            sql: None,
            created: Instant::now(),
            expires: None,
            hits: AtomicU64::new(0),
            found_rows: 0,
            l2: None,
            rows: 0,
            shape: None,
            max_stale: None,
            patch: None,
            fill_ns: 0,
            hits_at_patch: None,
        }
    }

    /// This entry with the bytes and stamps of a patch (`policy::patch`): everything else
    /// (its recipe, preview, TTL, diagnostics but the row count, which is one) kept.
    pub fn patched(&self, bytes: Bytes, status_at: usize, stamps: Stamps) -> Entry {
        Entry {
            bytes,
            status_at,
            meta_status_at: self.meta_status_at,
            stamps,
            digest: self.digest,
            sql: self.sql.clone(),
            created: self.created,
            expires: self.expires,
            hits: AtomicU64::new(self.hits.load(Ordering::Relaxed)),
            found_rows: self.found_rows,
            l2: None,
            rows: self.rows,
            shape: self.shape.clone(),
            max_stale: self.max_stale,
            patch: self.patch.clone(),
            fill_ns: self.fill_ns,
            hits_at_patch: Some(self.hits.load(Ordering::Relaxed)),
        }
    }

    /// The server time the patch that made this version saved: a miss's, when it was
    /// served since (0 for a result from the server, or a patch nobody read).
    pub fn patch_saved_ns(&self) -> u64 {
        match self.hits_at_patch {
            Some(at) if self.hits.load(Ordering::Relaxed) > at => self.fill_ns,
            _ => 0,
        }
    }

    /// Rows in the result and the shape's text, for per-digest statistics.
    pub fn with_shape(mut self, rows: u64, shape: Option<std::sync::Arc<str>>) -> Entry {
        self.rows = rows;
        self.shape = shape;
        self
    }

    pub fn with_found_rows(mut self, n: u64) -> Entry {
        self.found_rows = n;
        self
    }

    /// Sets what a hit leaves behind (`policy::diagnostics::entry_diagnostics`): the one
    /// setter both a fill and an L2 hit's copy go through.
    pub fn with_diagnostics(mut self, d: EntryDiagnostics) -> Entry {
        self.found_rows = d.found_rows;
        self.rows = d.rows;
        self
    }

    /// What a hit leaves behind, as L2 stores it with the bytes.
    pub fn diagnostics(&self) -> EntryDiagnostics {
        EntryDiagnostics {
            found_rows: self.found_rows,
            rows: self.rows,
        }
    }

    /// Records the L2 versions the result was computed under.
    pub fn with_l2(mut self, stamps: Option<L2Stamps>) -> Entry {
        self.l2 = stamps;
        self
    }

    /// L2's copy of this entry: every field a hit needs (bytes, status offsets, digest,
    /// diagnostics); the stamps are left for the caller (they are L2's versions, not the
    /// local ones).
    pub fn to_l2(&self, expires_at_ms: u64) -> L2Entry {
        L2Entry {
            stamps: Vec::new(),
            bytes: self.bytes.clone(),
            status_at: self.status_at,
            meta_status_at: self.meta_status_at,
            digest: self.digest,
            expires_at_ms,
            diag: self.diagnostics(),
        }
    }

    /// The local entry a hit on L2's `e` serves (and copies into L1), under the local
    /// `stamps`; `now_ms` turns L2's expiry into a local one.
    pub fn from_l2(e: L2Entry, stamps: Stamps, now_ms: u64) -> Entry {
        let mut out = Entry::new(e.bytes, e.status_at, stamps, e.digest)
            .with_diagnostics(e.diag)
            .with_meta_status_at(e.meta_status_at);
        if e.expires_at_ms != 0 {
            let left = std::time::Duration::from_millis(e.expires_at_ms.saturating_sub(now_ms));
            out.expires = out.created.checked_add(left);
        }
        out
    }

    /// Keeps the first `SQL_PREVIEW_BYTES` of `sql` (cut at a char boundary) for listings.
    pub fn with_sql(mut self, sql: &str) -> Entry {
        let mut end = sql.len().min(SQL_PREVIEW_BYTES);
        while !sql.is_char_boundary(end) {
            end -= 1;
        }
        self.sql = Some(sql[..end].into());
        self
    }

    /// True when `status_at` points at two bytes inside `bytes`. The store refuses entries
    /// where it does not, so that writing a hit can never index out of range.
    pub fn is_well_formed(&self) -> bool {
        let fits = |at: usize| at.checked_add(2).is_some_and(|end| end <= self.bytes.len());
        fits(self.status_at)
            && self
                .meta_status_at
                .is_none_or(|m| fits(m) && m < self.status_at)
    }

    /// Also patch the column-definitions EOF at `at` (see `meta_status_at`).
    pub fn with_meta_status_at(mut self, at: Option<usize>) -> Entry {
        self.meta_status_at = at;
        self
    }

    pub fn tables(&self) -> impl Iterator<Item = &TableHandle> {
        self.stamps.all_tables()
    }

    pub fn is_expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|e| now >= e)
    }

    /// `is_expired` now. Reading the clock costs as much as the rest of a lookup, so only
    /// entries with an expiry read it.
    pub fn expired_now(&self) -> bool {
        self.expires.is_some() && self.is_expired(Instant::now())
    }

    /// What the entry costs the cache: its bytes plus a realistic estimate of bookkeeping, so
    /// that `max_bytes` bounds memory even when results are tiny.
    pub fn weight(&self) -> u64 {
        let stamps = self.stamps.tables.len() * std::mem::size_of::<(TableHandle, u64)>()
            + self.stamps.checks_bytes()
            + self
                .stamps
                .sliced
                .iter()
                .map(|s| 64 + s.slices_len() * 16)
                .sum::<usize>();
        let sql = self.sql.as_ref().map_or(0, |s| s.len());
        let l2: usize = self
            .l2
            .as_ref()
            .map_or(0, |s| s.iter().map(|(d, _)| d.len() + 32).sum());
        (self.bytes.len() + std::mem::size_of::<Entry>() + stamps + sql + l2) as u64
            + OVERHEAD_BYTES
    }

    /// The stored status flags with the per-session bits taken from the session.
    fn patched_status(&self, session_status: u16) -> Option<[u8; 2]> {
        self.patched_at(self.status_at, session_status)
    }

    fn patched_at(&self, at: usize, session_status: u16) -> Option<[u8; 2]> {
        let stored = self.bytes.get(at..at.checked_add(2)?)?;
        let stored = u16::from_le_bytes([stored[0], stored[1]]);
        Some(((stored & !PER_SESSION) | (session_status & PER_SESSION)).to_le_bytes())
    }

    /// Appends the response to `out` with the final status flags' per-session bits replaced by
    /// `session_status`'s. A malformed entry (never stored by the store) is written unpatched
    /// rather than panicking.
    pub fn write_patched(&self, session_status: u16, out: &mut BytesMut) {
        let meta = self
            .meta_status_at
            .and_then(|m| Some((m, self.patched_at(m, session_status)?)));
        match self.patched_status(session_status) {
            Some(flags) => {
                out.reserve(self.bytes.len());
                let mut from = 0;
                if let Some((m, mflags)) = meta {
                    out.extend_from_slice(&self.bytes[..m]);
                    out.put_slice(&mflags);
                    from = m + 2;
                }
                out.extend_from_slice(&self.bytes[from..self.status_at]);
                out.put_slice(&flags);
                out.extend_from_slice(&self.bytes[self.status_at + 2..]);
            }
            None => out.extend_from_slice(&self.bytes),
        }
    }

    /// The response as three parts for a vectored write of a large entry without copying it:
    /// everything before the status flags, the patched flags, everything after. The `Bytes`
    /// are reference-counted views of the stored buffer. `None` only for a malformed entry,
    /// which the store never holds.
    pub fn patched_parts(&self, session_status: u16) -> Option<(Bytes, [u8; 2], Bytes)> {
        if self.meta_status_at.is_some() {
            return None;
        }
        let flags = self.patched_status(session_status)?;
        Some((
            self.bytes.slice(..self.status_at),
            flags,
            self.bytes.slice(self.status_at + 2..),
        ))
    }

    pub(crate) fn record_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache::versions::Versions;
    use crate::protocol::packets::status;

    /// A text result set for `SELECT 1` ending in an EOF packet with `flags`, and the offset of
    /// those flags. Not byte-exact MySQL, but framed the same way.
    pub(crate) fn response(flags: u16, filler: usize) -> (Bytes, usize) {
        let mut b = BytesMut::new();
        // column count
        b.put_slice(&[1, 0, 0, 1, 1]);
        // a row of `filler` bytes
        let row = vec![b'x'; filler];
        b.put_uint_le(row.len() as u64 + 1, 3);
        b.put_u8(2);
        b.put_u8(row.len().min(250) as u8);
        b.put_slice(&row);
        // EOF: 0xfe, warnings(2), status(2)
        b.put_slice(&[5, 0, 0, 3, 0xfe, 0, 0]);
        let at = b.len();
        b.put_u16_le(flags);
        (b.freeze(), at)
    }

    fn entry(flags: u16) -> Entry {
        let v = Versions::new();
        let (bytes, at) = response(flags, 10);
        Entry::new(bytes, at, Stamps::capture(&v, &[]), 7)
    }

    #[test]
    fn patches_only_per_session_bits() {
        // Stored under a transaction with autocommit off and a cursor-unrelated bit set.
        let stored = status::IN_TRANS | status::NO_INDEX_USED | status::SESSION_STATE_CHANGED;
        let e = entry(stored);
        let session = status::AUTOCOMMIT | status::NO_BACKSLASH_ESCAPES | status::MORE_RESULTS;
        let mut out = BytesMut::new();
        e.write_patched(session, &mut out);
        assert_eq!(out.len(), e.bytes.len());
        let got = u16::from_le_bytes([out[e.status_at], out[e.status_at + 1]]);
        assert_eq!(
            got,
            status::AUTOCOMMIT
                | status::NO_BACKSLASH_ESCAPES
                | status::NO_INDEX_USED
                | status::SESSION_STATE_CHANGED
        );
        // MariaDB's ANSI_QUOTES bit describes the session's sql_mode: the session's.
        let mut quoted = BytesMut::new();
        entry(status::AUTOCOMMIT)
            .write_patched(status::AUTOCOMMIT | status::ANSI_QUOTES, &mut quoted);
        let q = u16::from_le_bytes([quoted[e.status_at], quoted[e.status_at + 1]]);
        assert_eq!(q, status::AUTOCOMMIT | status::ANSI_QUOTES);
        // Everything else is byte-identical.
        assert_eq!(out[..e.status_at], e.bytes[..e.status_at]);
        assert_eq!(out[e.status_at + 2..], e.bytes[e.status_at + 2..]);

        let Some((pre, mid, post)) = e.patched_parts(session) else {
            panic!("well-formed entry has parts");
        };
        let mut joined = BytesMut::new();
        joined.put_slice(&pre);
        joined.put_slice(&mid);
        joined.put_slice(&post);
        assert_eq!(joined, out);
    }

    #[test]
    fn write_appends_to_existing_output() {
        let e = entry(status::AUTOCOMMIT);
        let mut out = BytesMut::from(&b"abc"[..]);
        e.write_patched(status::AUTOCOMMIT, &mut out);
        assert_eq!(&out[..3], b"abc");
        assert_eq!(&out[3..], &e.bytes[..]);
    }

    #[test]
    fn malformed_status_offset_does_not_panic() {
        let mut e = entry(0);
        e.status_at = e.bytes.len() - 1;
        assert!(!e.is_well_formed());
        let mut out = BytesMut::new();
        e.write_patched(status::IN_TRANS, &mut out);
        assert_eq!(&out[..], &e.bytes[..]);
        assert!(e.patched_parts(0).is_none());
        e.status_at = usize::MAX;
        assert!(!e.is_well_formed());
        e.write_patched(0, &mut out);
    }

    #[test]
    fn sql_preview_cut_at_char_boundary() {
        let long = "é".repeat(150); // 300 bytes
        let e = entry(0).with_sql(&long);
        let s = e.sql.as_deref().unwrap_or_default();
        assert!(s.len() <= SQL_PREVIEW_BYTES);
        assert_eq!(s.len(), SQL_PREVIEW_BYTES);
        let e = entry(0).with_sql("SELECT 1");
        assert_eq!(e.sql.as_deref(), Some("SELECT 1"));
    }

    /// Every field a hit reads from a local entry survives the trip through L2: what L1
    /// serves and what an L2 hit (and its L1 copy) serves are the same.
    #[test]
    fn an_entry_round_trips_through_l2() {
        use crate::cache::l2::{decode, encode, now_ms};
        use crate::policy::diagnostics::EntryDiagnostics;
        use std::time::Duration;
        let v = Versions::new();
        let bytes = Bytes::from_static(b"\x01\x00\x00\x01\x01\x05\x00\x00\x02\xfe\x00\x00\x22\x00");
        let local = Entry::new(bytes, 12, Stamps::capture(&v, &[]), 77)
            .with_meta_status_at(Some(3))
            .with_diagnostics(EntryDiagnostics {
                found_rows: 1234,
                rows: 17,
            });
        let now = now_ms();
        let raw = encode(&local.to_l2(now + 60_000));
        let back = Entry::from_l2(
            decode(&raw).expect("decodes"),
            Stamps::capture(&v, &[]),
            now,
        );
        // (field, what L1 has, what the L2 copy has), one row per field a hit reads.
        let rows: [(&str, String, String); 6] = [
            (
                "bytes",
                format!("{:?}", local.bytes),
                format!("{:?}", back.bytes),
            ),
            (
                "status_at",
                local.status_at.to_string(),
                back.status_at.to_string(),
            ),
            (
                "meta_status_at",
                format!("{:?}", local.meta_status_at),
                format!("{:?}", back.meta_status_at),
            ),
            ("digest", local.digest.to_string(), back.digest.to_string()),
            (
                "found_rows",
                local.found_rows.to_string(),
                back.found_rows.to_string(),
            ),
            ("rows", local.rows.to_string(), back.rows.to_string()),
        ];
        for (field, l1, l2) in rows {
            assert_eq!(l1, l2, "{field} lost on the way through L2");
        }
        assert_eq!(back.diagnostics(), local.diagnostics());
        let left = back
            .expires
            .expect("the expiry travels")
            .duration_since(back.created);
        assert!(left > Duration::from_secs(59) && left <= Duration::from_secs(60));
        // The previous format, without diagnostics, is refused rather than read as zeros.
        let mut old = raw[..raw.len() - 8].to_vec();
        old[..4].copy_from_slice(b"QC2E");
        let sum = xxhash_rust::xxh3::xxh3_64(&old);
        old.extend_from_slice(&sum.to_le_bytes());
        assert!(decode(&old).is_err());
    }

    #[test]
    fn weight_counts_bytes_and_overhead() {
        let e = entry(0);
        assert!(e.weight() > e.bytes.len() as u64 + OVERHEAD_BYTES);
        assert!(e.weight() < e.bytes.len() as u64 + 1024);
    }
}
