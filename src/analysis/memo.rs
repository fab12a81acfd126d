//! The analysis memo: one sqlparser run per statement shape, remembered by digest; and the
//! row-slice shapes (`slices::Shape`), one more parse per shape, so that a miss or a write
//! reads its slice values from its tokens instead of parsing again.

use std::sync::Arc;

use quick_cache::sync::Cache;

use super::parse::analyze;
use super::scan::{scan, StatementKind};
use super::slices::Shape;
use super::Analysis;

/// A bounded memo (quick_cache) from digest to analysis. Only reads and writes are
/// remembered: a shape's tables do not depend on its literals, while SET and the rest are
/// either cheap or literal-dependent.
pub struct Analyzer {
    memo: Cache<u64, Arc<Analysis>>,
    /// Slice shapes by digest and placeholder places (`Shape::key`).
    shapes: Cache<u64, Arc<Shape>>,
}

impl Analyzer {
    /// `capacity`: distinct statement shapes remembered (at least one).
    pub fn new(capacity: usize) -> Self {
        Analyzer {
            memo: Cache::new(capacity.max(1)),
            shapes: Cache::new(capacity.max(1)),
        }
    }

    /// The row-slice shape of `sql`'s digest (and placeholder places, `Shape::key`), built
    /// from `sql` on first sight. None when `sql` itself is doubtful for slices (a comment,
    /// a backslash): such a text is not remembered, so it cannot stand for the other
    /// statements of its digest. Every statement of one key has its literals at the same
    /// places of the shape, which is what `Shape::read_slices` and `Shape::write_rows` rely
    /// on (and check: literal count and placeholder places).
    pub fn slice_shape(&self, sql: &str) -> Option<Arc<Shape>> {
        let d = Shape::key(sql);
        if let Some(hit) = self.shapes.get(&d) {
            return Some(hit);
        }
        let shape = Arc::new(Shape::build(sql)?);
        self.shapes.insert(d, shape.clone());
        Some(shape)
    }

    /// The analysis of a client's statement `stmt` as `server` reads it (its digest when
    /// already known).
    pub fn of(
        &self,
        stmt: &[u8],
        server: super::ServerVersion,
        digest: Option<u64>,
    ) -> Arc<Analysis> {
        let text = super::server_text(stmt, server);
        let digest = digest.unwrap_or_else(|| super::digest(&text));
        self.analyze(&text, digest)
    }

    /// The analysis of `sql`, whose [`digest`](super::digest) is `digest`. Statements that are
    /// not valid UTF-8 (a latin1 client, say) are analysed from their lossy decoding, which
    /// maps equal bytes to equal names, so reads and writes of one table still agree.
    pub fn analyze(&self, sql: &[u8], digest: u64) -> Arc<Analysis> {
        if let Some(hit) = self.memo.get(&digest) {
            return hit;
        }
        let text = String::from_utf8_lossy(sql);
        let analysis = Arc::new(analyze(&text));
        let memoisable = matches!(scan(sql).kind, StatementKind::Select | StatementKind::Write)
            && matches!(*analysis, Analysis::Read(_) | Analysis::Write(_));
        if memoisable {
            self.memo.insert(digest, analysis.clone());
        }
        analysis
    }

    /// Shapes currently remembered.
    pub fn len(&self) -> usize {
        self.memo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.memo.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{digest, TableRef};
    use super::*;

    fn run(a: &Analyzer, sql: &str) -> Arc<Analysis> {
        a.analyze(sql.as_bytes(), digest(sql.as_bytes()))
    }

    #[test]
    fn one_parse_per_shape() {
        let a = Analyzer::new(16);
        let x = run(&a, "SELECT c FROM t WHERE id = 1");
        let y = run(&a, "SELECT c FROM t WHERE id = 2");
        assert!(Arc::ptr_eq(&x, &y));
        assert_eq!(a.len(), 1);
        let z = run(&a, "SELECT c FROM u WHERE id = 2");
        assert!(!Arc::ptr_eq(&x, &z));
        match &*z {
            Analysis::Read(r) => assert_eq!(r.tables, vec![TableRef::new(None, "u")]),
            other => panic!("{other:?}"),
        }
        run(&a, "UPDATE t SET a = 1");
        assert_eq!(a.len(), 3);
    }

    #[test]
    fn set_and_other_are_not_memoised() {
        let a = Analyzer::new(16);
        run(&a, "SET sql_mode = ''");
        run(&a, "SHOW TABLES");
        run(&a, "BEGIN");
        assert!(a.is_empty());
    }

    #[test]
    fn bounded() {
        let a = Analyzer::new(4);
        for i in 0..100 {
            run(&a, &format!("SELECT c FROM t{i}"));
        }
        assert!(a.len() <= 8, "{}", a.len());
    }

    #[test]
    fn non_utf8_is_analysed() {
        let a = Analyzer::new(4);
        let sql = b"SELECT c FROM t WHERE name = 'caf\xe9'";
        match &*a.analyze(sql, digest(sql)) {
            Analysis::Read(r) => {
                assert_eq!(r.tables, vec![TableRef::new(None, "t")]);
                assert_eq!(r.verdict, Ok(()));
            }
            other => panic!("{other:?}"),
        }
    }

    /// A prepared text and a text with literals share a digest (both are `?` in it), but
    /// not a slice shape: which constant is a placeholder decides where values come from.
    #[test]
    fn placeholders_and_literals_get_their_own_shapes() {
        let a = Analyzer::new(16);
        let p = a.slice_shape("INSERT INTO t (a, b) VALUES (?, 5)").unwrap();
        let q = a.slice_shape("INSERT INTO t (a, b) VALUES (5, ?)").unwrap();
        let r = a.slice_shape("INSERT INTO t (a, b) VALUES (6, ?)").unwrap();
        assert!(!Arc::ptr_eq(&p, &q));
        assert!(Arc::ptr_eq(&q, &r));
        assert!(a.slice_shape("SELECT 1 /* c */").is_none());
    }
}
