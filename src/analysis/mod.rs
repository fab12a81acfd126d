//! Statement analysis: the fast scan used on every query, the digest, and the sqlparser
//! analysis of a statement shape, memoised by digest.
//!
//! API CONTRACT (filled in by the analysis work; the session code is written against it):
//!
//! ```ignore
//! /// What a statement is, from its first keyword(s). Cheap: no allocation.
//! pub enum Kind { Select, Write, Begin, Commit, Rollback, Set, Use, Show, Flush, Reset,
//!                 Call, Execute, Other, Empty }
//! pub enum Hint { None, SqlCache, SqlNoCache }
//! pub struct Scan {
//!     pub kind: Kind,
//!     pub hint: Hint,
//!     /// Byte ranges of SQL_CACHE / SQL_NO_CACHE keywords to cut before forwarding
//!     /// (inside `/*! */` comments too). Empty when there is no hint.
//!     pub hint_spans: Vec<std::ops::Range<usize>>,   // or a small inline array
//!     /// More than one statement (a `;` outside strings/comments followed by more SQL).
//!     pub multi: bool,
//! }
//! /// The hit-path scan: skips leading whitespace and comments, reads the first keyword,
//! /// and for SELECT the select options, where SQL_CACHE/SQL_NO_CACHE may stand.
//! pub fn scan(sql: &[u8]) -> Scan;
//! /// `sql` with the hint spans removed (a copy only when there are hints).
//! pub fn strip_hints<'a>(sql: &'a [u8], scan: &Scan) -> std::borrow::Cow<'a, [u8]>;
//! /// xxh3 digest of the statement with literals (numbers, single-quoted strings, hex,
//! /// bit literals) replaced, whitespace and comments folded, keywords case-folded.
//! /// Identifiers (including backquoted and double-quoted) are kept verbatim, so two
//! /// statements with the same digest name the same tables.
//! pub fn digest(sql: &[u8]) -> u64;
//!
//! pub struct TableRef { pub schema: Option<String>, pub name: String } // lower-cased
//! pub enum NotCached { Unparsable, NonDeterministic(&'static str), StoredFunction,
//!     UserVariable, SystemVariable, Locking, Into, SystemSchema, NoTable, MultiStatement,
//!     CalcFoundRows, ... }   // each with `fn as_str(&self) -> &'static str` for metrics
//! pub struct ReadInfo {
//!     pub tables: Vec<TableRef>,          // every table read, incl. subqueries/CTEs' bases
//!     pub verdict: Result<(), NotCached>,
//!     /// calls a function that is not a known built-in (stored function/UDF may write)
//!     pub may_write: bool,
//! }
//! pub enum WriteTargets { Tables(Vec<TableRef>), Schema(String), Unknown }
//! pub struct WriteInfo {
//!     pub targets: WriteTargets,
//!     pub ddl: bool,                 // schema changed: refresh the catalog
//!     pub implicit_commit: bool,     // DDL and friends end a transaction
//!     pub temp_created: Vec<TableRef>,
//!     pub temp_dropped: Vec<TableRef>,   // DROP [TEMPORARY] TABLE names
//! }
//! pub enum Analysis { Read(ReadInfo), Write(WriteInfo), Other }
//! /// Parses with sqlparser (MySqlDialect). Never panics, whatever the input.
//! pub fn analyze(sql: &str) -> Analysis;
//!
//! /// Bounded memo (quick_cache) digest -> Arc<Analysis>. Only Select/Write shapes.
//! pub struct Analyzer;
//! impl Analyzer { pub fn new(capacity: usize) -> Self;
//!                 pub fn analyze(&self, sql: &[u8], digest: u64) -> Arc<Analysis>; }
//!
//! /// SET statements: never memoised by digest (their literals matter).
//! pub struct SetInfo {
//!     /// (lower-case variable name without @@session./SESSION, value as SQL text),
//!     /// `names` / `character set` for SET NAMES / SET CHARACTER SET.
//!     pub assignments: Vec<(String, String)>,
//!     /// Some when query_cache_type is assigned (session scope).
//!     pub query_cache_type: Option<crate::config::QueryCacheType>,
//!     pub global: bool,          // any GLOBAL / @@global. assignment
//!     pub user_vars_only: bool,  // only @x = … assignments
//! }
//! pub fn analyze_set(sql: &str) -> Option<SetInfo>;   // None: could not follow it
//! /// `USE db` → Some(db)
//! pub fn use_schema(sql: &str) -> Option<String>;
//! ```

/// Placeholder until the analysis module lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Select,
    Other,
}
