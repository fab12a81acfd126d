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
