//! Policy: what a statement is for the cache (a cacheable read, a writer of named tables, or
//! an unknown that must be treated as a writer).
