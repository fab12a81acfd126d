//! The qcache binary: parse the command line, set up logging, run the server.

use anyhow::Context;
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
        LogFormat::Text => registry.with(fmt::layer()).init(),
    }
    qcache::admin::set_log_reloader(move |level| {
        let f = EnvFilter::try_new(level).map_err(|e| e.to_string())?;
        handle.reload(f).map_err(|e| e.to_string())
    });
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
