//! The module graph: reads `src/**/*.rs`, collects every `crate::X` path (and `qcache::X` in
//! `main.rs`) between top-level modules, and `super::X` / `crate::cache::X` between the files
//! of `cache/`, then checks that no arrow points up a layer and that there is no circle.
//!
//! The layers, top to bottom (an arrow may go down, or sideways inside one layer as long as
//! no circle forms):
//!
//! ```text
//! main                                   the binary
//! server · listener                      listen, accept, signals; TCP and the Unix socket
//! session                                one client: handshake relay, command loop
//! admin                                  operator surfaces over the shared state
//! shared                                 what every session shares
//! cache · invalidation                   results and versions; what changed elsewhere
//! policy                                 the cache's decisions, sans-IO
//! analysis                               what a statement is, reads and writes
//! cli                                    where a config comes from
//! config · check
//! tls · rules
//! protocol · shutdown · workers · faults
//! ```
//!
//! Why the ones the issue left open sit where they do:
//! - `admin` is below `session` because a session answers `SHOW QCACHE …` through
//!   `admin::statements`, and above `shared` because every admin surface reads the shared
//!   state; the listener starts its HTTP endpoint.
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
    ("admin", 3),
    ("shared", 4),
    ("cache", 5),
    ("invalidation", 5),
    ("policy", 6),
    ("analysis", 7),
    ("cli", 8),
    ("config", 9),
    ("check", 9),
    ("tls", 10),
    ("rules", 10),
    ("protocol", 11),
    ("shutdown", 11),
    ("workers", 11),
    ("faults", 11),
];

/// The files of `cache/` and their layer: `writes` applies invalidation through the store;
/// the store holds entries under keys and counts in stats; entries and read plans hold
/// version handles; per-digest statistics count in the stripes of stats; versions hold
/// what is known of parent rows (fkmap).
const CACHE_LAYERS: &[(&str, u32)] = &[
    ("writes", 0),
    ("store", 1),
    ("sliceplans", 1),
    ("entry", 2),
    ("digests", 2),
    ("plans", 2),
    ("l2", 2),
    ("key", 3),
    ("latency", 3),
    ("stats", 3),
    ("versions", 3),
    ("privileges", 4),
    ("fkmap", 4),
    ("resp", 4),
];

/// Upward arrows tolerated for now: (file, module it imports from, why). Each is an import
/// through a re-export kept for a branch still in flight; the test fails when an entry is no
/// longer needed, so that the list only shrinks.
const ALLOWED_UPWARD: &[(&str, &str, &str)] = &[];

/// Re-exports left at old paths so that branches written against them still compile: (file,
/// the re-export line). Removed once branches classify, context, privs, binlog and ops have
/// merged and nothing imports the old path; the test fails when a listed line is gone, so
/// delete it here in the same change.
const TRANSITIONAL_REEXPORTS: &[(&str, &str)] = &[];

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

/// Every top-level edge and every edge between files of `cache/`.
fn collect() -> (Vec<Edge>, Vec<Edge>, BTreeMap<String, String>) {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let cache_files: BTreeSet<String> = files
        .iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&src).ok()?;
            let mut parts = rel.iter();
            (parts.next()? == "cache").then_some(())?;
            let stem = p.file_stem()?.to_str()?.to_string();
            (stem != "mod").then_some(stem)
        })
        .collect();
    let mut top = Vec::new();
    let mut cache = Vec::new();
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
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if module == "cache" && stem != "mod" {
            let mut to_files = segments_after(&code, "crate::cache::");
            to_files.extend(segments_after(&code, "super::"));
            for (to, line) in to_files {
                if cache_files.contains(&to) && to != stem {
                    cache.push(Edge {
                        file: name.clone(),
                        from: stem.to_string(),
                        to,
                        line,
                    });
                }
            }
        }
    }
    (top, cache, texts)
}

fn layer_of(table: &[(&str, u32)], name: &str) -> Option<u32> {
    table.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
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
    let (top, _, _) = collect();
    assert!(
        top.iter().any(|e| e.from == "server" && e.to == "session"),
        "the scanner found no server → session arrow: it reads nothing"
    );
    let bad = violations(&top, LAYERS, "module");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn cache_files_point_down_and_never_in_a_circle() {
    let (_, cache, _) = collect();
    assert!(
        cache
            .iter()
            .any(|e| e.from == "store" && e.to == "versions"),
        "the scanner found no store → versions arrow: it reads nothing"
    );
    let bad = violations(&cache, CACHE_LAYERS, "file cache/");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// An allowance or a re-export no longer there is removed from the lists, so they stay short.
#[test]
fn transitional_lists_are_current() {
    let (top, _, texts) = collect();
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
