//! `gc-cli`: plan, apply and run the collectors. `main` only maps a result to an exit code.

mod apply;
mod cli;
mod clock;
mod files;
mod ledger;
mod live;
mod metrics;
mod output;
mod plan_pods;
mod serve;
mod sessions;

use std::process::ExitCode;

use clap::Parser;

/// Exit codes, documented in the README.
pub(crate) mod exit {
    /// The command did what it was asked.
    pub(crate) const OK: u8 = 0;
    /// An unexpected failure (I/O while writing results, ...).
    pub(crate) const FAILURE: u8 = 1;
    /// The command line or an input value is invalid, or an input file cannot be read.
    pub(crate) const USAGE: u8 = 2;
    /// The plan failed closed: bad data in the inventory or ledger, or a ceiling exceeded.
    pub(crate) const PLAN: u8 = 3;
}

/// An error with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl Failure {
    pub(crate) fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::USAGE,
            error: error.into(),
        }
    }
    pub(crate) fn plan(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::PLAN,
            error: error.into(),
        }
    }
}

impl Failure {
    pub(crate) fn error(&self) -> &anyhow::Error {
        &self.error
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Self {
            code: exit::FAILURE,
            error,
        }
    }
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli.run() {
        Ok(()) => ExitCode::from(exit::OK),
        Err(f) => {
            eprintln!("gc-cli: error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}
