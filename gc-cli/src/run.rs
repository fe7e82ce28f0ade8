//! `gc-cli run pods|sessions`: a collector run once, as the `run` command and each round of
//! `serve` run it.

use clap::Subcommand;

use crate::metrics::MetricsArgs;
use crate::pods::apply::RunPods;
use crate::sessions::run::RunSessions;

/// The collector to run, with its flags.
#[derive(Debug, Subcommand)]
pub(crate) enum RunCommand {
    /// Plan and apply the failed-Pod diagnostics collector.
    Pods(Box<RunPods>),
    /// Delete session resources whose session is gone from the database (fenced, audited).
    Sessions(Box<RunSessions>),
}

impl RunCommand {
    /// Runs the collector once.
    pub(crate) fn run(&self) -> anyhow::Result<()> {
        crate::live::block_on(self.run_async())
    }

    /// Runs the collector once, on the caller's runtime.
    pub(crate) async fn run_async(&self) -> anyhow::Result<()> {
        match self {
            Self::Pods(args) => crate::pods::apply::run(args).await,
            Self::Sessions(args) => crate::sessions::run::run(args).await,
        }
    }

    /// The checks of the collector's flags alone: an error here fails every run.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        match self {
            Self::Pods(args) => crate::pods::apply::check(args),
            Self::Sessions(args) => crate::sessions::run::check(args),
        }
    }

    /// Where the run sends its metrics.
    pub(crate) fn metrics_mut(&mut self) -> &mut MetricsArgs {
        match self {
            Self::Pods(args) => &mut args.metrics,
            Self::Sessions(args) => &mut args.metrics,
        }
    }
}
