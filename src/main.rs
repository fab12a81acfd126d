//! The qcache binary: parse the command line, set up logging, run the server.
//!
//! Every failure ends here as one line on stderr, `qcache: <what>, <where> (<how to fix>)`,
//! and a non-zero exit: 2 for a bad command line, 1 for anything else. No error path goes
//! through `Result`'s `Termination`, which would print a backtrace under the message when
//! `RUST_BACKTRACE` is set (as it often is in images).

// No function outside tests longer than clippy.toml's too-many-lines-threshold: a long
// function is split into named steps (CI runs clippy with -D warnings).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::process::ExitCode;

use clap::Parser;

use qcache::cli::{Cli, Command};
use qcache::config::{Config, LogFormat};

/// Installs the global subscriber with its filter behind a reload handle, so that a config
/// reload can change `log.level` without a restart.
fn init_tracing(config: &Config) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{fmt, reload, EnvFilter};
    let filter = EnvFilter::try_new(&config.log.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    match config.log.format {
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true))
            .init(),
        LogFormat::Text => registry.with(fmt::layer().with_ansi(colour_logs())).init(),
    }
    qcache::shared::set_log_reloader(move |level| {
        let f = EnvFilter::try_new(level).map_err(|e| e.to_string())?;
        handle.reload(f).map_err(|e| e.to_string())
    });
}

/// Colour codes only for a person at a terminal: a file, a pipe or the journal would store
/// them as escape sequences. `NO_COLOR` (any non-empty value, no-color.org) turns them off.
fn colour_logs() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli_error(e),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("qcache: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `--help` and `--version` print as clap renders them; a usage error becomes one line with
/// clap's tip (a similar flag, a possible value) kept, and exit code 2 as clap would give.
fn cli_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    eprintln!("qcache: {}", one_line_usage_error(&e.render().to_string()));
    ExitCode::from(2)
}

/// clap's multi-line rendering ("error: …", blank lines, "tip: …", "Usage: …") folded into
/// one line: the error, its tips, and where to read more.
fn one_line_usage_error(rendered: &str) -> String {
    let mut what = String::new();
    let mut tips = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if let Some(e) = line.strip_prefix("error: ") {
            what = e.to_string();
        } else if let Some(t) = line.strip_prefix("tip: ") {
            tips.push(t.to_string());
        }
    }
    if what.is_empty() {
        what = rendered.lines().next().unwrap_or("bad command line").into();
    }
    tips.push("see qcache --help".into());
    format!("{what} ({})", tips.join("; "))
}

fn run(cli: Cli) -> Result<(), String> {
    match &cli.command {
        Some(Command::CheckConfig { file }) => {
            let c = Config::load(file).map_err(|e| e.to_string())?;
            c.validate()
                .map_err(|e| format!("config file {}: {e}", file.display()))?;
            println!("{}: ok", file.display());
            return Ok(());
        }
        Some(Command::PrintConfig) => {
            // Shared in tickets and chat: no password or URL credential in it.
            print!("{}", effective_config(&cli)?.redacted().to_toml());
            return Ok(());
        }
        Some(Command::CheckConsistency(args)) => return check_consistency(args),
        None => {}
    }
    let config = effective_config(&cli)?;
    init_tracing(&config);
    let runtime = runtime()?;
    runtime
        .block_on(qcache::server::run_until_signalled(config, cli))
        .map_err(|e| e.to_string())
}

/// The config the flags and environment make, with the file named in a validation error.
fn effective_config(cli: &Cli) -> Result<Config, String> {
    cli.effective_config().map_err(|e| match (&e, &cli.config) {
        (qcache::config::ConfigError::Invalid(_), Some(path)) => {
            format!(
                "{e} (from {} and the flags/QCACHE_* variables)",
                path.display()
            )
        }
        _ => e.to_string(),
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// `qcache check-consistency`: prints the report; an error (exit 1) when anything was stale.
fn check_consistency(args: &qcache::cli::CheckArgs) -> Result<(), String> {
    let report = runtime()?
        .block_on(qcache::check::run(&args.options()))
        .map_err(|e| format!("check-consistency: {e}"))?;
    println!("{report}");
    if !report.passed() {
        return Err("check-consistency: stale reads found (see the report above)".into());
    }
    Ok(())
}
