//! The analysis memo: one sqlparser run per statement shape, remembered by digest.

use std::sync::Arc;

use quick_cache::sync::Cache;

use super::parse::analyze;
use super::scan::{scan, StatementKind};
use super::Analysis;

/// A bounded memo (quick_cache) from digest to analysis. Only reads and writes are
/// remembered: a shape's tables do not depend on its literals, while SET and the rest are
/// either cheap or literal-dependent.
pub struct Analyzer {
    memo: Cache<u64, Arc<Analysis>>,
}

impl Analyzer {
    /// `capacity`: distinct statement shapes remembered (at least one).
    pub fn new(capacity: usize) -> Self {
        Analyzer {
            memo: Cache::new(capacity.max(1)),
        }
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
}
