//! Policy: every reason a statement is neither served from nor stored in the cache, as one
//! typed enum. Its label ([`Reason::as_str`]) is the suffix of `Qcache_not_cached_<label>`,
//! the `reason` label of `qcache_not_cached` on `/metrics`, and the word logs use: a public
//! surface, so a label never changes once shipped.
//!
//! The analysis names its own refusals ([`NotCached`]), being below this module; each
//! converts into one reason here.

use crate::analysis::NotCached;

/// Why a statement was not served from or stored in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    // ----- the statement's text (analysis) ---------------------------------------------
    /// sqlparser could not parse it, or it is not a plain query.
    Unparsable,
    /// Calls a non-deterministic or session-dependent built-in (`NOW()`, `RAND()`, …).
    NonDeterministic,
    /// Calls a function that is not a known built-in: a stored function or a UDF.
    StoredFunction,
    /// Reads a user variable (`@x`).
    UserVariable,
    /// Reads a system variable (`@@x`).
    SystemVariable,
    /// `FOR UPDATE`, `FOR SHARE`, `LOCK IN SHARE MODE`.
    Locking,
    /// `SELECT … INTO` a file or variables.
    Into,
    /// Reads mysql, information_schema, performance_schema or sys.
    SystemSchema,
    /// Reads no table at all (`SELECT 1`): nothing would ever invalidate it.
    NoTable,
    /// More than one statement in one COM_QUERY.
    MultiStatement,
    /// `SQL_CALC_FOUND_ROWS`: a later `FOUND_ROWS()` would see the cached query's count.
    CalcFoundRows,
    /// Uses a sequence (`NEXTVAL`, `NEXT VALUE FOR`, …): it advances on every call.
    Sequence,
    /// A full-text search (`MATCH … AGAINST`): global-only settings no binlog records
    /// (`ft_boolean_syntax`) change its result for every session at once.
    FullText,
    /// The statement analysed as something other than a read (a write spelled like one).
    NotARead,

    // ----- the session -------------------------------------------------------------------
    /// `query_cache_type` OFF, DEMAND without SQL_CACHE, or SQL_NO_CACHE.
    NotRequested,
    /// The session's state is no longer followed (until a reset or change-user).
    SessionUntracked,
    /// The session ran stored code before the catalog could say which temporary tables
    /// stored code may create (`policy::classify::after_stored_code`): no read is served
    /// or stored until it can.
    TemporariesUnknown,
    /// The account, role or privilege generation the key needs could not be read.
    IdentityUnknown,
    /// Hits are suspended (the binlog tail lost its place, or an operator asked).
    HitsSuspended,
    /// The session reads uncommitted data: it never stores and is never served.
    ReadUncommitted,
    /// The session reads under `sql_auto_is_null = 1` (`policy::context::auto_is_null_on`):
    /// `WHERE pk IS NULL` finds the row it inserted last, which no other session sees.
    AutoIsNull,
    /// A `SET STATEMENT … FOR` whose values the text does not decide (`DEFAULT`, `@v`,
    /// `@@GLOBAL.x`, an expression: `policy::context::statement_settings`).
    StatementSettings,
    /// The session's optimizer trace is on: every read runs on the server, so the trace
    /// shows the read and not qcache's diagnostics resetter (`policy::context`).
    OptimizerTrace,
    /// The session profiles its statements (`profiling`): every read runs on the server, so
    /// `SHOW PROFILES` lists it, and qcache sends nothing of its own (`policy::context`).
    Profiling,
    /// A SERIALIZABLE transaction's read: the server locks what it reads.
    LockingRead,
    /// The session holds (or may hold) table locks (`policy::locks`): the server answers
    /// ERROR 1100 for a table it did not lock.
    TableLocks,
    /// The session is in an XA transaction (`policy::snapshot::xa`): the server refuses or
    /// snapshots its reads in ways no entry knows.
    XaTransaction,
    /// Its transaction wrote one of the tables it reads.
    WrittenInTransaction,
    /// A table it read changed since its transaction's snapshot point.
    ChangedSinceSnapshot,
    /// Its stamps were read while a child write's derived slices it reads were pending
    /// (`cache::versions::DerivedPending`): such an entry is never served, so it is not
    /// stored, and the entry it would replace may be served again once they clear.
    DerivedPending,

    // ----- prepared statements -----------------------------------------------------------
    /// An execute that opens a cursor, or a result the server sent through one.
    Cursor,
    /// An execute of a statement whose cursor, opened by an earlier execute, is still open on
    /// the server: only an execute that reaches the server closes it (`read::Execute`).
    CursorOpen,
    /// An execute whose parameters came with COM_STMT_SEND_LONG_DATA.
    LongData,
    /// An execute whose parameters qcache could not read (the server answers it).
    MalformedExecute,
    /// An execute in a default database or under settings other than those of its
    /// prepare: the server runs what it parsed then (`policy::context::prepare_context`).
    PreparedContextMoved,

    // ----- the catalog and the operator's rules ----------------------------------------
    /// Names a table without a schema in a session with no default database.
    NoDatabase,
    /// Reads a temporary table of this session.
    TemporaryTable,
    /// Reads a view whose definition cannot be expanded into cacheable base tables.
    OpaqueView,
    /// May turn a TIME column's value into a DATETIME or DATE, which the server does with
    /// the session's current date (`policy::timecol`): its answer moves at midnight, with
    /// `SET timestamp` and with the time zone.
    TimeWithDate,
    /// Reads a table the catalog does not know (even after a refresh).
    UnknownTable,
    /// Names a relation with bytes beyond ASCII in a session whose client character set is
    /// not UTF-8 (`policy::context::names_undecodable`): the server reads the name in that
    /// character set, which the catalog's UTF-8 names and qcache's lexer do not.
    ClientCharsetNames,
    /// A DDL named a relation the read depends on (or the catalog does not list a name it
    /// reads while some DDL is pending), and the catalog's reload after it has not landed:
    /// the catalog cannot vouch for what the read depends on yet.
    DdlPending,
    /// The schema catalog could not be loaded at all (qcache's own account cannot log in
    /// or read information_schema): no table is known, so none is cached.
    CatalogUnavailable,
    /// An operator rule says never to cache it.
    Rule,

    // ----- the result (store verdict) ---------------------------------------------------
    /// The server answered with an error.
    Error,
    /// The result exceeds `max_result_bytes` (or a cache shard).
    TooLarge,
    /// More than one result set, or OK packets beside it.
    MultiResult,
    /// The result came with warnings, which a hit could not reproduce.
    Warnings,
    /// The server flagged more results, a session-state change or a re-prepare's new
    /// metadata (an execute's) in the last status.
    SessionStateChanged,
    /// What `FOUND_ROWS()` would say after it could not be worked out.
    FoundRowsUnknown,
    /// The result's packets did not have the shape the store keeps.
    UnexpectedShape,
    /// No rows, and the read's rule says `cache_empty = false` (`policy::stale::store_empty`).
    EmptyResult,

    // ----- the store ---------------------------------------------------------------------
    /// A table changed while the result was being computed (the fill race).
    StaleFill,
    /// The status-flag offset does not point into the bytes (a session bug, never served).
    Malformed,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: &'static [Reason] = &[
        Reason::Unparsable,
        Reason::NonDeterministic,
        Reason::StoredFunction,
        Reason::UserVariable,
        Reason::SystemVariable,
        Reason::Locking,
        Reason::Into,
        Reason::SystemSchema,
        Reason::NoTable,
        Reason::MultiStatement,
        Reason::CalcFoundRows,
        Reason::Sequence,
        Reason::FullText,
        Reason::NotARead,
        Reason::NotRequested,
        Reason::SessionUntracked,
        Reason::TemporariesUnknown,
        Reason::IdentityUnknown,
        Reason::HitsSuspended,
        Reason::ReadUncommitted,
        Reason::AutoIsNull,
        Reason::StatementSettings,
        Reason::OptimizerTrace,
        Reason::Profiling,
        Reason::LockingRead,
        Reason::TableLocks,
        Reason::XaTransaction,
        Reason::WrittenInTransaction,
        Reason::ChangedSinceSnapshot,
        Reason::DerivedPending,
        Reason::Cursor,
        Reason::CursorOpen,
        Reason::LongData,
        Reason::MalformedExecute,
        Reason::PreparedContextMoved,
        Reason::NoDatabase,
        Reason::TemporaryTable,
        Reason::OpaqueView,
        Reason::TimeWithDate,
        Reason::UnknownTable,
        Reason::ClientCharsetNames,
        Reason::DdlPending,
        Reason::CatalogUnavailable,
        Reason::Rule,
        Reason::Error,
        Reason::TooLarge,
        Reason::MultiResult,
        Reason::Warnings,
        Reason::SessionStateChanged,
        Reason::FoundRowsUnknown,
        Reason::UnexpectedShape,
        Reason::EmptyResult,
        Reason::StaleFill,
        Reason::Malformed,
    ];

    /// The stable label: `Qcache_not_cached_<label>`, `/metrics` `reason="<label>"`, logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Unparsable => "unparsable",
            Reason::NonDeterministic => "non_deterministic",
            Reason::StoredFunction => "stored_function",
            Reason::UserVariable => "user_variable",
            Reason::SystemVariable => "system_variable",
            Reason::Locking => "locking",
            Reason::Into => "into",
            Reason::SystemSchema => "system_schema",
            Reason::NoTable => "no_table",
            Reason::MultiStatement => "multi_statement",
            Reason::CalcFoundRows => "calc_found_rows",
            Reason::Sequence => "sequence",
            Reason::FullText => "fulltext",
            Reason::NotARead => "not_a_read",
            Reason::NotRequested => "not_requested",
            Reason::SessionUntracked => "session_untracked",
            Reason::TemporariesUnknown => "temporaries_unknown",
            Reason::IdentityUnknown => "identity_unknown",
            Reason::HitsSuspended => "hits_suspended",
            Reason::ReadUncommitted => "read_uncommitted",
            Reason::AutoIsNull => "auto_is_null",
            Reason::StatementSettings => "statement_settings",
            Reason::OptimizerTrace => "optimizer_trace",
            Reason::Profiling => "profiling",
            Reason::LockingRead => "locking_read",
            Reason::TableLocks => "table_locks",
            Reason::XaTransaction => "xa_transaction",
            Reason::WrittenInTransaction => "written_in_transaction",
            Reason::ChangedSinceSnapshot => "changed_since_snapshot",
            Reason::DerivedPending => "derived_pending",
            Reason::Cursor => "cursor",
            Reason::CursorOpen => "cursor_open",
            Reason::LongData => "long_data",
            Reason::MalformedExecute => "malformed_execute",
            Reason::PreparedContextMoved => "prepared_context_moved",
            Reason::NoDatabase => "no_database",
            Reason::TemporaryTable => "temporary_table",
            Reason::OpaqueView => "opaque_view",
            Reason::TimeWithDate => "time_with_date",
            Reason::UnknownTable => "unknown_table",
            Reason::ClientCharsetNames => "client_charset_names",
            Reason::DdlPending => "ddl_pending",
            Reason::CatalogUnavailable => "catalog_unavailable",
            Reason::Rule => "rule",
            Reason::Error => "error",
            Reason::TooLarge => "too_large",
            Reason::MultiResult => "multi_result",
            Reason::Warnings => "warnings",
            Reason::SessionStateChanged => "session_state_changed",
            Reason::FoundRowsUnknown => "found_rows_unknown",
            Reason::UnexpectedShape => "unexpected_shape",
            Reason::EmptyResult => "empty_result",
            Reason::StaleFill => "stale_fill",
            Reason::Malformed => "malformed",
        }
    }

    /// Its position in [`Reason::ALL`], for counters kept in an array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The `SHOW STATUS` row that counts it.
    pub fn status_name(self) -> String {
        format!("Qcache_not_cached_{}", self.as_str())
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<NotCached> for Reason {
    fn from(n: NotCached) -> Reason {
        match n {
            NotCached::Unparsable => Reason::Unparsable,
            NotCached::NonDeterministic(_) => Reason::NonDeterministic,
            NotCached::StoredFunction => Reason::StoredFunction,
            NotCached::UserVariable => Reason::UserVariable,
            NotCached::SystemVariable => Reason::SystemVariable,
            NotCached::Locking => Reason::Locking,
            NotCached::Into => Reason::Into,
            NotCached::SystemSchema => Reason::SystemSchema,
            NotCached::NoTable => Reason::NoTable,
            NotCached::MultiStatement => Reason::MultiStatement,
            NotCached::CalcFoundRows => Reason::CalcFoundRows,
            NotCached::Sequence => Reason::Sequence,
            NotCached::FullText => Reason::FullText,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn labels_are_unique_snake_case_and_listed() {
        let mut seen = HashSet::new();
        for (i, r) in Reason::ALL.iter().enumerate() {
            let s = r.as_str();
            assert!(seen.insert(s), "{s} twice");
            assert!(
                !s.is_empty()
                    && !s.starts_with('_')
                    && !s.ends_with('_')
                    && !s.contains("__")
                    && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{s} is not snake_case"
            );
            assert_eq!(r.index(), i, "ALL out of declaration order at {s}");
            assert_eq!(r.status_name(), format!("Qcache_not_cached_{s}"));
        }
        // Labels operators have already met (dashboards and alerts name them): pinned.
        let pinned = [
            (Reason::UnknownTable, "unknown_table"),
            (Reason::CatalogUnavailable, "catalog_unavailable"),
            (Reason::NoTable, "no_table"),
            (Reason::HitsSuspended, "hits_suspended"),
        ];
        for (r, label) in pinned {
            assert_eq!(r.as_str(), label);
        }
    }

    #[test]
    fn analysis_refusals_keep_their_labels() {
        let cases = [
            (NotCached::Unparsable, "unparsable"),
            (NotCached::NonDeterministic("now"), "non_deterministic"),
            (NotCached::StoredFunction, "stored_function"),
            (NotCached::UserVariable, "user_variable"),
            (NotCached::SystemVariable, "system_variable"),
            (NotCached::Locking, "locking"),
            (NotCached::Into, "into"),
            (NotCached::SystemSchema, "system_schema"),
            (NotCached::NoTable, "no_table"),
            (NotCached::MultiStatement, "multi_statement"),
            (NotCached::CalcFoundRows, "calc_found_rows"),
            (NotCached::Sequence, "sequence"),
            (NotCached::FullText, "fulltext"),
        ];
        for (n, label) in cases {
            assert_eq!(Reason::from(n).as_str(), label, "{n:?}");
        }
    }
}
