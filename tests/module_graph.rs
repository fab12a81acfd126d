//! The module graph: reads `src/**/*.rs`, collects every `crate::X` path (and `qcache::X` in
//! `main.rs`) between top-level modules, and in every folder, at every depth, the `super::X`
//! / `crate::folder::X` paths between its files, then checks that no arrow points up a layer
//! and that there is no circle, at each level. The folders' layers are in [`FOLDERS`].
//!
//! The layers, top to bottom (an arrow may go down, or sideways inside one layer as long as
//! no circle forms):
//!
//! ```text
//! main                                   the binary
//! server · listener                      listen, accept, signals; TCP and the Unix socket
//! session                                one client: handshake relay, command loop
//! engine                                 the per-statement decisions, sans IO
//! admin                                  operator surfaces over the shared state
//! shared                                 what every session shares
//! invalidation                           what changed elsewhere (binlog tail, catalog)
//! l2                                     the shared second level in Redis
//! cache                                  results and versions
//! observe                                counters, latency histograms, per-digest statistics
//! policy · transport                     the cache's decisions, sans-IO; the packet connection
//! analysis                               what a statement is, reads and writes
//! cli                                    where a config comes from
//! config · check
//! tls · rules
//! protocol · shutdown · workers · faults
//! ```
//!
//! Why the ones the issue left open sit where they do:
//! - `engine` is the per-statement decisions a session carries out (its state, the row
//!   slices of reads and writes): it reads the catalog, which `cache` may not import, so it
//!   sits above `shared` and everything under it, and below the session that drives it.
//! - `admin` is below `session` because a session answers `SHOW QCACHE …` through
//!   `admin::statements`, and above `shared` because every admin surface reads the shared
//!   state; the listener starts its HTTP endpoint.
//! - `invalidation` is above `l2` because the binlog tail reports its position to L2's
//!   health (`l2::TailStatus`); `l2` is above `cache` because it stores entries under cache
//!   keys and raises the versions of `cache::versions`.
//! - `observe` only counts (what the cache, L2 and sessions record), so it sits under them;
//!   it names the reasons of `policy`.
//! - `policy` is plain functions over plain data: the cache and invalidation may ask it, and
//!   it may ask `analysis` what a statement is, but it reads no cache or catalog state
//!   itself (the caller passes what a rule needs), so it sits under them.
//! - `cli` is the description of a config's sources (flags, environment, file), and `shared`
//!   re-reads it on SIGHUP and POST /reload, so it sits under `shared`, just above `config`;
//!   the binary, which parses it, is the top.
//! - `check` is `qcache check-consistency`, a client of a running qcache that shares no code
//!   with the proxy; `cli` maps its flags onto it.
//! - `config` is read by nearly everything, so it sits under the modules whose sections it
//!   holds; the sections of `tls` (which validation builds) and `rules` live in those modules,
//!   which import nothing from above them.
//! - `transport` is the packet connection of both legs (a session's, the listener's and the
//!   server's refusal): it frames with `protocol` and names ciphers as `policy` does, so it
//!   sits beside `policy`, under everything that holds a connection.
//! - `protocol` (sans-IO packets), `shutdown` (the stop switches) and `workers` (the session
//!   runtimes) depend on no other module; nor does `faults` (the debug-build switches that
//!   `cache` holds per instance).
//!
//! Run with `cargo test --test module_graph`; it needs no server. `MODULE_GRAPH_SRC=dir`
//! checks another checkout's `src/` instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules and their layer (0 is the top).
const LAYERS: &[(&str, u32)] = &[
    ("main", 0),
    ("server", 1),
    ("listener", 1),
    ("session", 2),
    ("engine", 3),
    ("admin", 4),
    ("shared", 5),
    ("invalidation", 6),
    ("l2", 7),
    ("cache", 8),
    ("observe", 9),
    ("policy", 10),
    ("transport", 10),
    ("analysis", 11),
    ("cli", 12),
    ("config", 13),
    ("check", 13),
    ("tls", 14),
    ("rules", 14),
    ("protocol", 15),
    ("shutdown", 15),
    ("workers", 15),
    ("faults", 15),
    ("clock", 15),
];

/// Every folder of `src/` and the layer of each of its files (a sub-folder counts as a file;
/// `mod.rs` is the folder itself, whose items its files may use), with why it sits there. An
/// arrow between two files of one folder is a `super::X` or `crate::folder::X` path naming a
/// file; it may go down, or sideways inside one layer as long as no circle forms.
type Layer = (&'static str, u32, &'static str);
#[rustfmt::skip]
const FOLDERS: &[(&str, &[Layer])] = &[
    ("admin", &[
        ("http", 0, "the HTTP endpoint serves what metrics and statements render"),
        ("metrics", 1, "the Prometheus text of the shared state"),
        ("statements", 1, "SHOW QCACHE … and QCACHE … answered to a session"),
    ]),
    ("analysis", &[
        ("memo", 0, "remembers analyses: asks parse, scan and slices"),
        ("params", 0, "an execute's parameters as the literals slices read"),
        ("slices", 1, "row slices of a parsed statement: asks parse and digest"),
        ("parse", 2, "the sqlparser analysis, with fallback where it cannot"),
        ("set", 2, "SET and USE, with fallback's test for unknown code"),
        ("fallback", 3, "token-level analysis where sqlparser gives up"),
        ("digest", 3, "normalised text and literal tokens, from the lexer"),
        ("scan", 3, "the hit path's first look at a statement, from the lexer"),
        ("comments", 3, "executable comments as the server reads them, lexed"),
        ("sysvar", 3, "reads of qcache's @@query_cache_type, lexed"),
        ("functions", 4, "the table of SQL functions and their class; reads nothing"),
        ("lexer", 4, "the tokenizer everything above reads"),
        ("version", 5, "which server a statement is read for (lexer and comments ask)"),
    ]),
    ("cache", &[
        ("writes", 0, "what a session owes as invalidation, over version handles"),
        ("store", 1, "holds entries under keys"),
        ("patches", 1, "patchable entries' keys per table, and what a write means to patch"),
        ("sliceplans", 1, "slice plans of reads, over versions (and the L2 read they memoise)"),
        ("entry", 2, "an entry holds version handles and its L2 stamps"),
        ("plans", 2, "read plans hold version handles"),
        ("key", 3, "the cache key; reads nothing"),
        ("versions", 3, "table and slice versions, with what is known of parent rows"),
        ("privileges", 4, "the privilege epoch versions carry"),
        ("fkmap", 4, "what is known of parent rows"),
    ]),
    ("engine", &[
        ("answered", 0, "what a write's answer applies: invalidation, DDL, patches, parent maps"),
        ("answers", 0, "what qcache answers of its own variable and status rows"),
        ("command", 0, "what a client command is and what it changes before it goes up"),
        ("connect", 0, "the connection phase's legs and authentication rounds, as steps"),
        ("context", 0, "what the server's answers about the session mean for its state"),
        ("diagnostics", 0, "what a command owes the server's diagnostics before it goes up"),
        ("exchange", 0, "a command's send point, answer packets and end, over the state"),
        ("explain", 0, "what QCACHE EXPLAIN and SHOW QCACHE LAST say, from what they are given"),
        ("multi", 0, "several statements in one COM_QUERY, planned over the planner"),
        ("fill", 0, "a miss's stamps, read under its slice plan through the planner"),
        ("read", 0, "a read's plan, lookup, miss start and entry, over the state and the fill"),
        ("store", 0, "where a miss's result goes: L1 through the claim, L2's copy, its recipe"),
        ("fkslices", 0, "a write's and a read's foreign-key-derived slices, over the planner"),
        ("patch", 0, "a read's patch recipe and a write's patches, over the planner and the state"),
        ("sliceplan", 0, "a read's slice plan through the shared memo, over the planner"),
        ("write", 0, "what a write changes, planned over the planner and the state"),
        ("settings", 0, "what a SET leaves the session with, and what it reads back"),
        ("slices", 1, "the planner: row slices of reads and writes, over the session's state"),
        ("prepared", 1, "a prepared statement's types, an execute's dispatch and key, over the planner"),
        ("state", 2, "what a session holds between commands; reads no other file"),
        ("last", 2, "what a session records of its statement and the one before"),
    ]),
    ("invalidation", &[
        // The sources: each produces invalidation values and applies them through `apply`.
        ("admin", 0, "operators' statements as invalidation values"),
        ("binlog", 0, "the binlog tail names tables through the catalog"),
        ("ddl", 0, "the catalog reload after DDL as an invalidation value"),
        ("l2", 0, "bumps learned from L2's channel as invalidation values"),
        ("writes", 0, "writes and transaction ends as invalidation values"),
        ("apply", 1, "the one entry point: applies a value to the versions; reads no source"),
        ("catalog", 1, "what the server's tables are"),
        ("pending", 2, "the DDL whose catalog reload has not landed; reads no other file"),
    ]),
    ("l2", &[
        ("read", 0, "a read's way through L2: a hit confirmed, the lookup and lease, a fill"),
        ("resp", 0, "the RESP codec of the lookup connections; reads nothing"),
        ("tails", 0, "the fleet's binlog lease: slots, heartbeats, DDL for standbys"),
    ]),
    ("config", &[
        ("layers", 0, "file, variables and flags as layers of one configuration"),
    ]),
    ("observe", &[
        ("digests", 0, "per-digest statistics count in the stripes of stats"),
        ("latency", 1, "histograms; read nothing"),
        ("stats", 1, "counters; read nothing"),
    ]),
    ("policy", &[
        ("stored_code", 0, "which temporary tables stored code may create, and whether it may set query_cache_type"),
        ("qct", 0, "whether the session's query_cache_type is still known after code the server ran"),
        ("tails", 0, "which instances stream the binlog: the lease state machine"),
        ("lag", 0, "how far behind the server a binlog tail is, and when hits stop"),
        ("classify", 0, "what a statement's class means for the cache"),
        ("context", 0, "which session settings are part of a key"),
        ("diagnostics", 0, "what a hit must restore of the statement's diagnostics"),
        ("l2", 0, "what may go to and come from L2"),
        ("locks", 0, "which statements take and release table locks"),
        ("order", 0, "which updates may move rows in an unordered read"),
        ("patch", 0, "which cached aggregates known inserted rows patch, and their new bytes"),
        ("verify", 0, "which patched aggregates the verifier re-reads: a budget of server time"),
        ("decide", 0, "one read's steps as a machine, over the read decisions"),
        ("read", 0, "the order of decisions for one read, over the snapshot rule and its reasons"),
        ("privileges", 0, "which statements change privileges"),
        ("txn", 0, "the transaction state machine, over the snapshot rule and its reasons"),
        ("snapshot", 0, "the snapshot rule, which answers with a reason"),
        ("stale", 0, "bounded staleness and empty results (max_stale, cache_empty), over reasons"),
        ("timecol", 0, "which reads may convert a TIME value with the current date, over reasons"),
        ("reason", 1, "why a read was not cached: the labels every rule returns"),
    ]),
    ("protocol", &[
        ("answer", 0, "a private statement's answer as qcache reads it, over response and rows"),
        ("commands", 0, "command bytes; reads nothing"),
        ("compress", 0, "the compressed protocol; reads nothing"),
        ("negotiate", 0, "the connection phase's decisions, over handshake packets"),
        ("handshake", 0, "handshake packets, written with the packet helpers"),
        ("response", 0, "the response state machine over packets"),
        ("rows", 0, "text-protocol rows read and rewritten, over packets"),
        ("packets", 1, "packet payloads, framed by codec"),
        ("codec", 2, "framing: length, sequence id, 16 MiB splits"),
    ]),
    ("session", &[
        ("explain", 0, "QCACHE EXPLAIN walks the read and prepared pipelines, sending nothing"),
        ("prepared", 1, "the binary protocol; drives the read machine as read does, with its plan"),
        ("read", 2, "the text read pipeline: L1, L2, fill through relay, stored by the engine"),
        // The steps of a command (impl Session): they reach one another through methods,
        // not imports, so they share a layer.
        ("admin", 3, "SHOW QCACHE … and QCACHE … on the session's connection"),
        ("begin", 3, "BEGIN sent with the next statement"),
        ("context", 3, "the session's settings read back from the server"),
        ("diagnostics", 3, "what a hit restores: warnings, found rows, ROW_COUNT"),
        ("digests", 3, "the session's part in per-digest statistics"),
        ("l2", 3, "an L2 hit served, and the wait for the session's writes to reach L2"),
        ("privileges", 3, "who the server says the session is"),
        ("query", 3, "COM_QUERY dispatch"),
        ("statements", 3, "statements qcache answers or rewrites itself"),
        ("write", 3, "writes sent, with the engine's plan of what they owe"),
        ("relay", 4, "forwards a response, teeing it into a fill"),
        ("private", 4, "a statement qcache sends for itself, its answer read, not relayed"),
        ("handshake", 6, "the login relay, whose outcome state starts from"),
    ]),
    ("shared", &[
        ("reload", 0, "SIGHUP and POST /reload over the shared state"),
        ("verify", 0, "the background verifier of patched aggregates, over the shared state"),
    ]),
    ("tls", &[("sha2", 0, "SHA-256 for caching_sha2_password; reads nothing")]),
];

/// Upward arrows tolerated for now: (file, module it imports from, why). Each is an import
/// through a re-export kept for a branch still in flight, or a type whose move waits for
/// later work; the test fails when an entry is no longer needed, so the list only shrinks.
const ALLOWED_UPWARD: &[(&str, &str, &str)] = &[
    (
        "src/cache/mod.rs",
        "l2",
        "the old paths cache::l2 and cache::resp, re-exported (TRANSITIONAL_REEXPORTS)",
    ),
    (
        "src/cache/sliceplans.rs",
        "l2",
        "a slice plan memoises its L2 read (l2::L2Read); goes with the engine work, which \
         gives the plan's L2 read a home of its own",
    ),
];

/// Re-exports left at old paths so that branches written against them still compile: (file,
/// the re-export line). Removed once the branches of issues #35 and #39 have merged and
/// nothing imports the old path; the test fails when a listed line is gone, so
/// delete it here in the same change.
const TRANSITIONAL_REEXPORTS: &[(&str, &str)] = &[
    ("src/cache/mod.rs", "pub use crate::l2;"),
    ("src/cache/mod.rs", "pub use crate::l2::resp;"),
    (
        "src/cache/mod.rs",
        "pub use crate::observe::stats::{CacheStats, InvalidationSource};",
    ),
    (
        "src/cache/mod.rs",
        "pub use crate::observe::{digests, latency, stats};",
    ),
    ("src/l2/mod.rs", "pub use crate::cache::entry::L2Stamps;"),
];

/// One import: `from` (a file) uses `to` (a module or a cache file) on `line`.
#[derive(Debug, Clone)]
struct Edge {
    file: String,
    from: String,
    to: String,
    line: usize,
}

/// `src/` of this crate, or of another checkout named by `MODULE_GRAPH_SRC` (to see what the
/// graph of a branch or an older commit looks like without building it).
fn src_dir() -> PathBuf {
    match std::env::var_os("MODULE_GRAPH_SRC") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string and character literals blanked (newlines kept, so line
/// numbers stay true): a path in a doc comment or a message is not an import.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char, out: &mut String| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(b[i], &mut out);
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // Raw string r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match b.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(&x) => {
                        blank(x, &mut out);
                        j += 1;
                    }
                }
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if let Some(&x) = b.get(i) {
                    blank(x, &mut out);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), left as is.
            if next == Some('\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first segments of the paths that follow each `prefix` (which ends in `::`), with the
/// line they are on: `crate::a::b` gives `a`; `crate::{a, b::c}` gives `a` and `b`.
fn segments_after(code: &str, prefix: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = code[from..].find(prefix) {
        let at = from + pos;
        from = at + prefix.len();
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident(c) || c == '$' || c == ':')
        {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[from..];
        let rest_trim = rest.trim_start();
        if let Some(group) = rest_trim.strip_prefix('{') {
            // Split the brace group at its top-level commas.
            let mut depth = 0;
            let mut item = String::new();
            for ch in group.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        item.push(ch);
                    }
                    '}' if depth == 0 => {
                        push_first_ident(&item, line, &mut found);
                        break;
                    }
                    '}' => {
                        depth -= 1;
                        item.push(ch);
                    }
                    ',' if depth == 0 => {
                        push_first_ident(&item, line, &mut found);
                        item.clear();
                    }
                    _ => item.push(ch),
                }
            }
        } else {
            push_first_ident(rest_trim, line, &mut found);
        }
    }
    found
}

fn push_first_ident(s: &str, line: usize, out: &mut Vec<(String, usize)>) {
    let ident: String = s
        .trim_start()
        .chars()
        .take_while(|c| is_ident(*c))
        .collect();
    if !ident.is_empty() && ident != "self" {
        out.push((ident, line));
    }
}

/// What the scanner found: the arrows between top-level modules, and per folder of `src/`
/// (`session`, `cache`, `l2/…`) its files and the arrows between them.
struct Graph {
    top: Vec<Edge>,
    folders: BTreeMap<String, (BTreeSet<String>, Vec<Edge>)>,
    texts: BTreeMap<String, String>,
}

/// Folder and node name of a file under `src/`: `session/read.rs` is `read` in `session`;
/// `a/b/mod.rs` is `b` in `a` (its `super::` is `a`, like its siblings'). None for files
/// directly under `src/` (the top level) and for a folder's `mod.rs` directly under `src/`.
fn node_of(rel: &Path) -> Option<(String, String)> {
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let stem = parts.last()?.trim_end_matches(".rs").to_string();
    let (folder, name) = if stem == "mod" {
        (
            &parts[..parts.len().checked_sub(2)?],
            parts[parts.len() - 2].clone(),
        )
    } else {
        (&parts[..parts.len() - 1], stem)
    };
    (!folder.is_empty()).then(|| (folder.join("/"), name))
}

fn collect() -> Graph {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut folders: BTreeMap<String, (BTreeSet<String>, Vec<Edge>)> = BTreeMap::new();
    for p in &files {
        if let Some((folder, name)) = node_of(p.strip_prefix(&src).expect("under src")) {
            folders.entry(folder).or_default().0.insert(name);
        }
    }
    let mut top = Vec::new();
    let mut texts = BTreeMap::new();
    for path in &files {
        let rel = path.strip_prefix(&src).expect("under src");
        let name = format!("src/{}", rel.to_string_lossy());
        let text = std::fs::read_to_string(path).expect("readable source");
        texts.insert(name.clone(), text.clone());
        let first = rel.iter().next().and_then(|s| s.to_str()).expect("a path");
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let code = code_only(&text);
        let mut prefixes = vec!["crate::"];
        if module == "main" {
            prefixes.push("qcache::");
        }
        for prefix in prefixes {
            for (to, line) in segments_after(&code, prefix) {
                if to != module {
                    top.push(Edge {
                        file: name.clone(),
                        from: module.clone(),
                        to,
                        line,
                    });
                }
            }
        }
        let Some((folder, node)) = node_of(rel) else {
            continue;
        };
        let (siblings, edges) = folders.get_mut(&folder).expect("collected above");
        let mut to_files =
            segments_after(&code, &format!("crate::{}::", folder.replace('/', "::")));
        to_files.extend(segments_after(&code, "super::"));
        for (to, line) in to_files {
            if siblings.contains(&to) && to != node {
                edges.push(Edge {
                    file: name.clone(),
                    from: node.clone(),
                    to,
                    line,
                });
            }
        }
    }
    Graph {
        top,
        folders,
        texts,
    }
}

fn layer_of(table: &[(&str, u32)], name: &str) -> Option<u32> {
    table.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

/// The layers of a folder, from [`FOLDERS`].
fn folder_layers(folder: &str) -> Option<Vec<(&'static str, u32)>> {
    FOLDERS
        .iter()
        .find(|(f, _)| *f == folder)
        .map(|(_, files)| files.iter().map(|(n, l, _)| (*n, *l)).collect())
}

/// A circle in `edges`, as the list of nodes along it, if there is one.
fn find_cycle(edges: &[Edge]) -> Option<Vec<String>> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges {
        graph.entry(&e.from).or_default().insert(&e.to);
        graph.entry(&e.to).or_default();
    }
    // 0: not visited, 1: on the current path, 2: done.
    let mut state: BTreeMap<&str, u8> = graph.keys().map(|k| (*k, 0)).collect();
    fn visit<'a>(
        n: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(n, 1);
        path.push(n);
        for &m in &graph[n] {
            match state[m] {
                1 => {
                    let start = path.iter().position(|p| *p == m).expect("on the path");
                    let mut c: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                    c.push(m.to_string());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let nodes: Vec<&str> = graph.keys().copied().collect();
    for n in nodes {
        if state[n] == 0 {
            if let Some(c) = visit(n, &graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn allowed(e: &Edge) -> bool {
    ALLOWED_UPWARD
        .iter()
        .any(|(file, to, _)| e.file == *file && e.to == *to)
}

/// Checks `edges` against `table`; returns what is wrong, one line each.
fn violations(edges: &[Edge], table: &[(&str, u32)], what: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let mut unplaced = BTreeSet::new();
    for e in edges {
        let (Some(from), Some(to)) = (layer_of(table, &e.from), layer_of(table, &e.to)) else {
            for n in [&e.from, &e.to] {
                if layer_of(table, n).is_none() {
                    unplaced.insert(n.clone());
                }
            }
            continue;
        };
        if to < from && !allowed(e) {
            bad.push(format!(
                "{}:{}: {} (layer {from}) imports from {} (layer {to}), which is above it",
                e.file, e.line, e.from, e.to
            ));
        }
    }
    for n in unplaced {
        bad.push(format!(
            "{what} `{n}` has no layer: add it to the table in tests/module_graph.rs"
        ));
    }
    let kept: Vec<Edge> = edges.iter().filter(|e| !allowed(e)).cloned().collect();
    if let Some(c) = find_cycle(&kept) {
        let witness: Vec<String> = c
            .windows(2)
            .filter_map(|w| {
                kept.iter()
                    .find(|e| e.from == w[0] && e.to == w[1])
                    .map(|e| format!("{} → {} ({}:{})", e.from, e.to, e.file, e.line))
            })
            .collect();
        bad.push(format!("circle: {}", witness.join(", ")));
    }
    bad
}

#[test]
fn top_level_modules_point_down_and_never_in_a_circle() {
    let g = collect();
    assert!(
        g.top
            .iter()
            .any(|e| e.from == "server" && e.to == "session"),
        "the scanner found no server → session arrow: it reads nothing"
    );
    let bad = violations(&g.top, LAYERS, "module");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// One folder's files against its table: every file placed, no file listed that is gone, no
/// arrow up, no circle.
fn folder_violations(g: &Graph, folder: &str) -> Vec<String> {
    let Some(table) = folder_layers(folder) else {
        return vec![format!(
            "folder src/{folder}/ has no layers: add it to FOLDERS in tests/module_graph.rs"
        )];
    };
    let (files, edges) = &g.folders[folder];
    let mut bad = violations(edges, &table, &format!("file {folder}/"));
    for f in files {
        if layer_of(&table, f).is_none() && !bad.iter().any(|b| b.contains(&format!("`{f}`"))) {
            bad.push(format!(
                "file {folder}/ `{f}` has no layer: add it to FOLDERS in tests/module_graph.rs"
            ));
        }
    }
    for (n, _) in &table {
        if !files.contains(*n) {
            bad.push(format!(
                "{folder}/{n} is listed in FOLDERS but no longer exists"
            ));
        }
    }
    bad
}

#[test]
fn cache_files_point_down_and_never_in_a_circle() {
    let g = collect();
    assert!(
        g.folders["cache"]
            .1
            .iter()
            .any(|e| e.from == "store" && e.to == "versions"),
        "the scanner found no store → versions arrow: it reads nothing"
    );
    let bad = folder_violations(&g, "cache");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The same check in every folder of `src/`, at every depth.
#[test]
fn every_folder_points_down_and_never_in_a_circle() {
    let g = collect();
    assert!(
        g.folders["engine"]
            .1
            .iter()
            .any(|e| e.from == "store" && e.to == "read"),
        "the scanner found no engine store → read arrow: it reads nothing"
    );
    let mut bad = Vec::new();
    for folder in g.folders.keys() {
        bad.extend(folder_violations(&g, folder));
    }
    for (folder, _) in FOLDERS {
        if !g.folders.contains_key(*folder) {
            bad.push(format!(
                "src/{folder}/ is listed in FOLDERS but no longer exists"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// An allowance or a re-export no longer there is removed from the lists, so they stay short.
#[test]
fn transitional_lists_are_current() {
    let Graph { top, texts, .. } = collect();
    for (file, to, why) in ALLOWED_UPWARD {
        assert!(
            top.iter().any(|e| e.file == *file && e.to == *to),
            "{file} no longer imports from {to}: remove its ALLOWED_UPWARD entry ({why})"
        );
    }
    for (file, line) in TRANSITIONAL_REEXPORTS {
        let text = texts.get(*file).map(String::as_str).unwrap_or("");
        assert!(
            text.lines().any(|l| l.trim() == *line),
            "{file} no longer has `{line}`: remove it from TRANSITIONAL_REEXPORTS"
        );
    }
}

/// The sizes the engine issue (#34) brought the driver to, kept: the session folder only
/// drives IO (a decision that grows it belongs in `engine` or `policy`), and no function
/// outside tests grows past what a reader takes in at once. #34 left the session at 3,485
/// lines against a bound of 3,500; the hits served in the command loop (#36) and the
/// diagnostics steps of later rounds took it to 3,778, and one relay loop back to 3,729;
/// a session moving between session threads between commands (#36: its lifecycle, no
/// decision) took it to 3,800. The bound is where it stands, so that it only goes down (#34's
/// 3,500 is the aim).
const SESSION_LINES: usize = 3_800;
const FUNCTION_LINES: usize = 120;

/// Functions of `src` (the text before its first `#[cfg(test)]`) and their lengths in
/// lines: from the `fn` line to the `}` at the same indentation.
fn function_lengths(src: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = src
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        let rest = [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        let Some(name) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = name.chars().take_while(|c| is_ident(*c)).collect();
        // A declaration without a body (a trait's) ends its signature with `;`; a function
        // of one line is short.
        if t.trim_end().ends_with('}') {
            continue;
        }
        let ends = lines[i..].iter().map(|l| l.trim_end());
        if ends
            .take(40)
            .find(|l| l.ends_with('{') || l.ends_with(';'))
            .is_some_and(|l| l.ends_with(';'))
        {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| *l == close) {
            out.push((name, i + 1, end + 1));
        }
    }
    out
}

#[test]
fn the_driver_and_its_functions_stay_small() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut session = 0;
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source file");
        if f.components().any(|c| c.as_os_str() == "session") {
            session += text.lines().count();
        }
        for (name, line, len) in function_lengths(&text) {
            if len > FUNCTION_LINES {
                long.push(format!("{}:{line} {name}: {len} lines", f.display()));
            }
        }
    }
    assert!(
        session <= SESSION_LINES,
        "src/session/ has {session} lines (bound {SESSION_LINES}): move decisions to engine/"
    );
    assert!(
        long.is_empty(),
        "functions over {FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The length scanner, on a function, a declaration without a body and a nested one.
#[test]
fn function_lengths_are_read_from_fn_to_its_brace() {
    let src = "fn a() {\n    1\n}\n\nimpl X {\n    pub(crate) async fn b(&self) {\n        \
               2;\n    }\n    fn c();\n}\n#[cfg(test)]\nfn d() {\n}\n";
    let got = function_lengths(src);
    assert_eq!(got, vec![("a".into(), 1, 3), ("b".into(), 6, 3)]);
}

/// The scanner itself, on the shapes of path it must read and the ones it must not.
#[test]
fn scanner_reads_paths_not_comments_or_strings() {
    let code = code_only(
        "use crate::a::B;\n// crate::comment\nlet s = \"crate::string\";\n\
         use crate::{c::D, e};\nlet c = '\"'; x::<crate::f::G>();\n$crate::macro_path\n\
         let r = r#\"crate::raw\"#; let l: &'static str = crate::h::I;\n",
    );
    let got: Vec<String> = segments_after(&code, "crate::")
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(got, ["a", "c", "e", "f", "h"]);
    let lines: Vec<usize> = segments_after(&code, "crate::")
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(lines, [1, 4, 4, 5, 7]);
}

#[test]
fn cycle_finder_finds_a_circle_and_only_one() {
    let e = |a: &str, b: &str| Edge {
        file: String::new(),
        from: a.into(),
        to: b.into(),
        line: 0,
    };
    assert_eq!(find_cycle(&[e("a", "b"), e("b", "c"), e("a", "c")]), None);
    let c = find_cycle(&[e("a", "b"), e("b", "c"), e("c", "a")]).expect("a circle");
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 4);
}
