//! The command line: the top-level clap types and the dispatch to each command. Each command's
//! own flags live with the command; nothing imports this module but `main`.

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};

use crate::archives::ArchivesCommand;
use crate::ledger::LedgerCommand;
use crate::logging::LogArgs;
use crate::pods::apply::Apply;
use crate::pods::plan::PlanPods;
use crate::run::RunCommand;
use crate::serve::Serve;
use crate::sessions::plan::PlanSessions;
use gc_output::plugin::{Invoked, PLUGIN};

/// A Kubernetes garbage collector that never deletes the wrong thing.
#[derive(Debug, Parser)]
#[command(name = "gc-cli", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// `--log-format`, `-v`, `-q`: global, installed by `main` before the command runs.
    #[command(flatten)]
    pub(crate) log: LogArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan a run: what would be collected, held or deferred, and why. Changes nothing.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Apply a reviewed plan written by `plan pods --out`: archive, then remove, its targets.
    Apply(Box<Apply>),
    /// Plan and apply in one go: a dry run unless `--dry-run=none` (pods: with
    /// `--auto-remediate` too).
    #[command(subcommand)]
    Run(RunCommand),
    /// Run a collector every interval and serve its metrics on /metrics.
    Serve(Box<Serve>),
    /// Create deleted objects again from their archives.
    #[command(subcommand)]
    Restore(RestoreCommand),
    /// Move the observation ledger in and out of the store, unchanged: import it, export it.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// A web console on loopback: review, collect and restore sessions, read archives, as your
    /// own Kubernetes identity.
    Console(Box<crate::console::Console>),
    /// Read archives back (failed Pods', session resources' manifests): list them, show one,
    /// verify them against their receipts, prune the old ones.
    #[command(subcommand)]
    Archives(ArchivesCommand),
    /// Print a shell completion script for `gc-cli` (bash: `source <(gc-cli completion bash)`).
    ///
    /// As a kubectl plugin, `kubectl gc <TAB>` completes through kubectl (1.26+), which runs
    /// `kubectl_complete-gc` from PATH: link it to this binary (or use the release archive's
    /// script of that name).
    #[command(alias = "completions")]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print gc-cli's version and platform, as `kubectl version --client`.
    Version {
        /// Output format: `table` (two lines), `json` or `yaml`.
        #[arg(long = "output", short = 'o', value_name = "FORMAT", default_value = "table",
            value_parser = crate::output::forms(gc_output::VERSION_FORMS))]
        form: crate::output::Output,
    },
    /// Print the man page (roff), or write one page per command into a folder.
    Man {
        /// Write `gc-cli.1`, `gc-cli-plan-pods.1`, ... into this folder instead.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum RestoreCommand {
    /// Every archived object of the sessions named that does not exist now, created again from
    /// its verified archive (an object that exists is never replaced); a claim whose volume was
    /// kept goes back on that volume, which gets its reclaim policy back once the new claim is
    /// bound (or the next run does). A session whose archives fail verification restores nothing.
    Sessions(Box<crate::sessions::restore::RestoreSessions>),
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// Plan the failed-Pod diagnostics collector over a Pod inventory.
    // The one command that also prints the Kestra flow's output line.
    #[command(mut_arg("form", |a| a.value_parser(crate::output::forms(crate::output::ALL_FORMS))))]
    Pods(Box<PlanPods>),
    /// Plan the orphaned-session collector against the cluster and the session database.
    ///
    /// `-o table` has one row per resource to delete, deferred, held or skipped; `-o wide` adds
    /// the kept ones and each uid; `-o name` lists the resources to delete.
    Sessions(Box<PlanSessions>),
}

impl Cli {
    /// Parses the process's arguments. When help is asked for, the help of the failed-Pod
    /// commands' `-n` also says which namespace it would take now and where that comes from.
    ///
    /// # Errors
    /// clap's error: a usage error, or the help or version to print.
    pub(crate) fn parse_args(invoked: Invoked) -> Result<Self, clap::Error> {
        let mut command = Self::command_for(invoked);
        if std::env::args().any(|a| a == "-h" || a == "--help") {
            command = gc_output::help::with_context_namespace(command);
        }
        let matches = command.try_get_matches()?;
        <Self as clap::FromArgMatches>::from_arg_matches(&matches)
    }

    /// The command line as `invoked`: as a kubectl plugin its usage and help say `kubectl gc`.
    pub(crate) fn command_for(invoked: Invoked) -> clap::Command {
        let command = gc_output::help::teach(Self::command());
        match invoked {
            Invoked::Cli => command,
            Invoked::Plugin | Invoked::Completer => command.bin_name(PLUGIN).display_name(PLUGIN),
        }
    }

    /// Runs the command. The error's type gives the exit code (`crate::exit::code`).
    pub(crate) fn execute(self) -> anyhow::Result<()> {
        match self.command {
            Command::Plan(PlanCommand::Pods(args)) => crate::pods::plan::plan(&args),
            Command::Apply(args) => crate::pods::apply::apply(&args),
            Command::Run(run) => run.run(),
            Command::Serve(args) => crate::serve::serve(*args),
            Command::Plan(PlanCommand::Sessions(args)) => crate::sessions::plan::plan(&args),
            Command::Restore(RestoreCommand::Sessions(args)) => {
                crate::sessions::restore::restore(&args)
            }
            Command::Console(args) => crate::console::console(&args),
            Command::Ledger(command) => crate::ledger::execute(&command),
            Command::Archives(command) => crate::archives::execute(&command),
            Command::Version { form } => gc_output::Version::of(env!("CARGO_PKG_VERSION"))
                .write(&mut std::io::stdout(), form),
            Command::Completion { shell } => {
                let script = gc_output::help::completion(Self::command(), shell);
                std::io::Write::write_all(&mut std::io::stdout(), script.as_bytes())
                    .context("cannot write the completion script")
            }
            Command::Man { out_dir } => gc_output::help::man(Self::command(), out_dir.as_deref()),
        }
    }
}

#[cfg(test)]
mod tests;
