//! The listener: connection limit, signals, graceful shutdown.

use crate::cli::Cli;
use crate::config::Config;

pub async fn run_until_signalled(_config: Config, _cli: Cli) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
