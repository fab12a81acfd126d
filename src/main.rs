//! The qcache binary: parse the command line, set up logging, run the server.

use anyhow::Context;
use clap::Parser;

use qcache::cli::{Cli, Command};
use qcache::config::{Config, LogFormat};

fn init_tracing(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match config.log.format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::CheckConfig { file }) => {
            let c = Config::load(file)?;
            c.validate()?;
            println!("{}: ok", file.display());
            return Ok(());
        }
        Some(Command::PrintConfig) => {
            print!("{}", cli.effective_config()?.to_toml());
            return Ok(());
        }
        Some(Command::CheckConsistency(args)) => return check_consistency(args),
        None => {}
    }
    let config = cli.effective_config()?;
    init_tracing(&config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(qcache::server::run_until_signalled(config, cli))
}

/// `qcache check-consistency`: prints the report; an error (exit 1) when anything was stale.
fn check_consistency(args: &qcache::cli::CheckArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let report = runtime.block_on(qcache::check::run(&args.options()))?;
    println!("{report}");
    if !report.passed() {
        anyhow::bail!("consistency check failed");
    }
    Ok(())
}
