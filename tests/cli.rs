//! The built binary as an operator meets it: a bad config file, a bad flag, a bad value in
//! the environment and a failed start each print one line on stderr that says what is wrong,
//! where and how to fix it, and exit non-zero; `RUST_BACKTRACE=1` (common in images) adds
//! no stack trace. No server is needed.

use std::io::Write;
use std::process::{Command, Output};

/// Runs the qcache binary with `args` and `env`, and nothing else from this environment
/// (no QCACHE_* of the developer's), with backtraces asked for.
fn qcache(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_qcache"));
    cmd.env_clear()
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the qcache binary")
}

/// Asserts a failure in the tool's shape and returns its line.
fn one_line_failure(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(
        !stderr.contains("backtrace") && !stderr.contains("Backtrace") && !stderr.contains(" at "),
        "a stack trace was printed: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {stderr}");
    assert!(lines[0].starts_with("qcache: "), "{stderr}");
    lines[0].to_string()
}

fn file_with(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("temp file");
    f.write_all(text.as_bytes()).expect("write temp file");
    f
}

#[test]
fn check_config_on_a_typo_names_the_key_line_and_file_without_a_backtrace() {
    let f = file_with("[server]\nupstream = \"db:3306\"\n\n[cache]\nmax_bytez = 1\n");
    let path = f.path().to_str().unwrap();
    let line = one_line_failure(&qcache(&["check-config", path], &[]), 1);
    for want in [
        path,
        "line 5, column 1 (max_bytez = 1)",
        "unknown field `max_bytez`",
        "max_bytes",
        "config/qcache.toml",
    ] {
        assert!(line.contains(want), "{want:?} missing: {line}");
    }
}

#[test]
fn check_config_on_an_invalid_value_names_the_key_and_file() {
    let f = file_with("[server]\nlisten = \"everywhere\"\n");
    let path = f.path().to_str().unwrap();
    let line = one_line_failure(&qcache(&["check-config", path], &[]), 1);
    assert!(line.contains(path), "{line}");
    assert!(line.contains("server.listen \"everywhere\""), "{line}");
    assert!(line.contains("IP:port"), "{line}");
}

#[test]
fn check_config_on_a_missing_file_says_which() {
    let line = one_line_failure(
        &qcache(&["check-config", "/nonexistent/qcache.toml"], &[]),
        1,
    );
    assert!(line.contains("/nonexistent/qcache.toml"), "{line}");
    assert!(line.contains("No such file"), "{line}");
}

#[test]
fn a_good_file_passes_check_config() {
    let f = file_with("[server]\nupstream = \"db:3306\"\n");
    let out = qcache(&["check-config", f.path().to_str().unwrap()], &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
}

#[test]
fn a_misspelt_flag_gets_one_line_with_the_suggestion() {
    let line = one_line_failure(&qcache(&["--lisen", "127.0.0.1:0"], &[]), 2);
    assert!(line.contains("--lisen"), "{line}");
    assert!(line.contains("--listen"), "the tip is kept: {line}");
    assert!(line.contains("qcache --help"), "{line}");
}

#[test]
fn a_bad_value_in_the_environment_gets_one_line() {
    let line = one_line_failure(
        &qcache(&["print-config"], &[("QCACHE_MAX_CONNECTIONS", "lots")]),
        2,
    );
    assert!(line.contains("lots"), "{line}");
    assert!(line.contains("--max-connections"), "{line}");
}

#[test]
fn a_bad_config_named_by_the_environment_fails_the_start() {
    let f = file_with("[log]\nlevel = \"qcache=loud\"\n");
    let path = f.path().to_str().unwrap();
    let line = one_line_failure(&qcache(&[], &[("QCACHE_CONFIG", path)]), 1);
    assert!(line.contains("log.level"), "{line}");
    assert!(line.contains(path), "{line}");
}

#[test]
fn a_listen_address_in_use_fails_the_start_with_the_setting_to_change() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = held.local_addr().unwrap().to_string();
    let out = qcache(
        &[
            "--listen",
            &addr,
            "--admin-listen",
            "",
            "--log-level",
            "off",
        ],
        &[],
    );
    let line = one_line_failure(&out, 1);
    assert!(line.contains(&format!("cannot listen on {addr}")), "{line}");
    assert!(line.contains("server.listen"), "{line}");
}

/// Issue #39 item 5: logs written to a pipe, a file or the journal carry no ANSI colour
/// codes (colour is for a terminal only).
#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let upstream = closed.local_addr().unwrap().to_string();
    drop(closed);
    let mut child = Command::new(env!("CARGO_BIN_EXE_qcache"))
        .env_clear()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "",
            "--upstream",
            &upstream,
            "--log-level",
            "info",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start qcache");
    let stdout = child.stdout.take().unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read qcache's log");
        let done = line.contains("qcache listening");
        lines.push(line);
        if done || lines.len() > 50 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = lines.join("\n");
    assert!(text.contains("qcache listening"), "{text}");
    assert!(!text.contains('\x1b'), "colour codes in a pipe: {text:?}");
}

/// Issue #39 item 8: flags and variables read values as the file does (`1m30s`, `256MB`),
/// every key is reachable by `--set` and by its `QCACHE_<SECTION>_<KEY>` variable, and a flag
/// beats a variable, which beats the file.
#[test]
fn flags_and_variables_speak_the_files_dialect() {
    let file = file_with("[cache]\nmax_result_bytes = 1024\nstampede_timeout = \"5s\"\n");
    let path = file.path().to_str().unwrap();
    let out = qcache(
        &[
            "--config",
            path,
            "--l2-timeout",
            "1m30s",
            "--max-bytes",
            "256MB",
            "--set",
            "cache.ttl=1m30s",
            "--set",
            "cache.stampede_timeout=7s",
            "print-config",
        ],
        &[
            ("QCACHE_CACHE_MAX_RESULT_BYTES", "1MiB"),
            ("QCACHE_CACHE_STAMPEDE_TIMEOUT", "6s"),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "timeout = \"1m 30s\"",
        "max_bytes = 256000000",
        "ttl = \"1m 30s\"",
        "max_result_bytes = 1048576",
        "stampede_timeout = \"7s\"",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
}

/// Issue #39 item 8: an upstream without a port fails `check-config` and the start, not
/// every session.
#[test]
fn an_upstream_without_a_port_is_refused_up_front() {
    let file = file_with("[server]\nupstream = \"nohostport\"\n");
    let line = one_line_failure(
        &qcache(&["check-config", file.path().to_str().unwrap()], &[]),
        1,
    );
    assert!(line.contains("server.upstream"), "{line}");
    let line = one_line_failure(
        &qcache(&["--upstream", "nohostport", "print-config"], &[]),
        1,
    );
    assert!(
        line.contains("server.upstream") && line.contains("host:port"),
        "{line}"
    );
}

/// The named flags kept their old spellings when they became aliases of their keys: words in
/// any case, as before (`--log-format JSON`), read into the file's spelling.
#[test]
fn named_flags_take_their_words_in_any_case() {
    let out = qcache(
        &[
            "--log-format",
            "JSON",
            "--query-cache-type",
            "demand",
            "--l2-validate-hits",
            "Remote",
            "print-config",
        ],
        &[("QCACHE_COMPRESS_UPSTREAM", "Zstd")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "format = \"json\"",
        "query_cache_type = \"DEMAND\"",
        "validate_hits = \"remote\"",
        "upstream = \"zstd\"",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
}
