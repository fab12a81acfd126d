//! DDL whose catalog reload has not landed yet: what each one named, so that the catalog can
//! answer "unknown" for those relations (reads not cached, writes conservative) while it
//! learns them in the background, instead of holding the DDL's OK until it has. Pure: the
//! catalog (`catalog.rs`) owns one behind a lock and the reload tasks register and land.

pub use crate::cache::writes::Changed;

/// A lower-cased `(schema, name)` pair, as the catalog names relations.
pub type TableName = (String, String);

/// What one DDL may have changed until its reload lands.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    seq: u64,
    /// Relations it named (lower-cased): created, altered, renamed from or to, dropped.
    objects: Vec<TableName>,
    /// Schemas it changed as a whole (CREATE / ALTER / DROP DATABASE).
    schemas: Vec<String>,
    /// It could not say what it changed (`DROP TRIGGER t`, routines, unreadable text).
    anything: bool,
}

/// The DDL seen (through qcache or in the binlog) whose reload has not landed.
#[derive(Debug, Default)]
pub struct PendingDdl {
    /// The last sequence number handed out: moves on every registration, so a reader can
    /// tell that a DDL was registered while it resolved (`Catalog::ddl_epoch`).
    last: u64,
    entries: Vec<Entry>,
}

impl PendingDdl {
    /// Registers a DDL before its OK reaches anyone (or before the binlog tail reports its
    /// position past it); the number to [`landed`](Self::landed) once its reload is done.
    /// A DDL that names nothing may have changed anything.
    pub fn register(&mut self, changed: &Changed) -> u64 {
        self.last += 1;
        let anything =
            changed.everything || (changed.objects.is_empty() && changed.schemas.is_empty());
        self.entries.push(Entry {
            seq: self.last,
            objects: changed.objects.clone(),
            schemas: changed.schemas.clone(),
            anything,
        });
        self.last
    }

    /// The reload for `seq` is done (whether it succeeded or not: a failed one invalidated
    /// everything and left the catalog as it was). Unknown numbers are ignored.
    pub fn landed(&mut self, seq: u64) {
        self.entries.retain(|e| e.seq != seq);
    }

    /// The last number handed out (0 before the first registration).
    pub fn last(&self) -> u64 {
        self.last
    }

    pub fn any_pending(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Whether a pending DDL named `table`, its schema, or could not say what it changed.
    pub fn covers(&self, table: &TableName) -> bool {
        self.entries
            .iter()
            .any(|e| e.anything || e.schemas.contains(&table.0) || e.objects.contains(table))
    }

    /// Every relation a pending DDL named, or None when one could not name them (then no
    /// list of relations bounds what changed). A DDL on a schema as a whole adds no
    /// relation: it cannot give a table outside the schema a trigger or a foreign key.
    pub fn named(&self) -> Option<Vec<TableName>> {
        let mut out = Vec::new();
        for e in &self.entries {
            if e.anything {
                return None;
            }
            out.extend(e.objects.iter().cloned());
        }
        out.sort();
        out.dedup();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, n: &str) -> TableName {
        (s.to_string(), n.to_string())
    }

    fn objects(list: &[(&str, &str)]) -> Changed {
        Changed {
            objects: list.iter().map(|(s, n)| t(s, n)).collect(),
            ..Changed::default()
        }
    }

    fn schema(s: &str) -> Changed {
        Changed {
            schemas: vec![s.to_string()],
            ..Changed::default()
        }
    }

    /// One row per rule: the DDL registered (and which of them landed), the table asked
    /// about, whether it is covered, whether any DDL is pending, the relations named.
    #[test]
    fn each_rule() {
        type Named = Option<Vec<TableName>>;
        /// (rule, registered, landed, table asked about, covered, any pending, named)
        type Row = (
            &'static str,
            Vec<Changed>,
            Vec<u64>,
            TableName,
            bool,
            bool,
            Named,
        );
        let everything = Changed {
            everything: true,
            ..Changed::default()
        };
        let rows: Vec<Row> = vec![
            (
                "nothing registered: nothing covered",
                vec![],
                vec![],
                t("db", "a"),
                false,
                false,
                Some(vec![]),
            ),
            (
                "a named relation is covered",
                vec![objects(&[("db", "a")])],
                vec![],
                t("db", "a"),
                true,
                true,
                Some(vec![t("db", "a")]),
            ),
            (
                "another relation of the same schema is not",
                vec![objects(&[("db", "a")])],
                vec![],
                t("db", "b"),
                false,
                true,
                Some(vec![t("db", "a")]),
            ),
            (
                "the same name in another schema is not",
                vec![objects(&[("db", "a")])],
                vec![],
                t("other", "a"),
                false,
                true,
                Some(vec![t("db", "a")]),
            ),
            (
                "both sides of a RENAME are covered",
                vec![objects(&[("db", "a"), ("db", "tmp"), ("db", "b")])],
                vec![],
                t("db", "b"),
                true,
                true,
                Some(vec![t("db", "a"), t("db", "b"), t("db", "tmp")]),
            ),
            (
                "a schema DDL covers every relation in it",
                vec![schema("db")],
                vec![],
                t("db", "anything"),
                true,
                true,
                Some(vec![]),
            ),
            (
                "a schema DDL covers nothing elsewhere",
                vec![schema("db")],
                vec![],
                t("other", "x"),
                false,
                true,
                Some(vec![]),
            ),
            (
                "a DDL that could not say what it changed covers everything",
                vec![everything.clone()],
                vec![],
                t("other", "x"),
                true,
                true,
                None,
            ),
            (
                "a DDL that names nothing counts as one that could not say",
                vec![Changed::default()],
                vec![],
                t("other", "x"),
                true,
                true,
                None,
            ),
            (
                "a landed DDL covers nothing",
                vec![objects(&[("db", "a")])],
                vec![1],
                t("db", "a"),
                false,
                false,
                Some(vec![]),
            ),
            (
                "landing one DDL leaves the other on the same table pending",
                vec![objects(&[("db", "a")]), objects(&[("db", "a")])],
                vec![1],
                t("db", "a"),
                true,
                true,
                Some(vec![t("db", "a")]),
            ),
            (
                "landing an unknown number changes nothing",
                vec![objects(&[("db", "a")])],
                vec![7],
                t("db", "a"),
                true,
                true,
                Some(vec![t("db", "a")]),
            ),
            (
                "a pending unreadable DDL bounds nothing until it lands",
                vec![objects(&[("db", "a")]), everything],
                vec![2],
                t("db", "x"),
                false,
                true,
                Some(vec![t("db", "a")]),
            ),
        ];
        for (rule, registered, landed, table, covered, any, named) in rows {
            let mut p = PendingDdl::default();
            for (i, c) in registered.iter().enumerate() {
                assert_eq!(p.register(c), i as u64 + 1, "{rule}: numbered in order");
            }
            for seq in landed {
                p.landed(seq);
            }
            assert_eq!(p.covers(&table), covered, "{rule}: covers");
            assert_eq!(p.any_pending(), any, "{rule}: any_pending");
            assert_eq!(p.named(), named, "{rule}: named");
            assert_eq!(p.last(), registered.len() as u64, "{rule}: last");
        }
    }
}
