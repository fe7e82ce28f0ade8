//! The process's log subscriber: what the libraries and the binary log through `tracing`, as
//! text for people or one JSON object a line for machines, always on stderr (stdout carries
//! plans, reports and audit lines).
//!
//! The level: `RUST_LOG` when it is set (its full directive syntax, for any crate); otherwise
//! warnings and errors of every crate and the binary's own progress and summaries (info), `-q`
//! errors only, and each `-v` one level more (info, debug, trace) for gc's own crates (`gc_cli`, `gc_core`, `gc_k8s`, `gc_store`): the
//! dependencies' debug lines would drown them, and `RUST_LOG=kube=debug` asks for those.

use std::io::IsTerminal;

use clap::{ArgAction, Args, ValueEnum};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Readable lines: time, level, where, message and fields.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message` and the fields.
    Json,
}

/// The global logging flags: they go before or after any command.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// Log lines as text or as one JSON object a line; always on stderr.
    #[arg(
        long,
        global = true,
        env = "GC_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        value_name = "FORMAT"
    )]
    log_format: LogFormat,
    /// More log lines from gc itself: -v info, -vv debug, -vvv trace (RUST_LOG, when set,
    /// decides instead).
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Log errors only (RUST_LOG, when set, decides instead).
    #[arg(short, long, global = true)]
    quiet: bool,
}

/// gc's own crates, which `-v` makes more verbose.
const OURS: [&str; 4] = ["gc_cli", "gc_core", "gc_k8s", "gc_store"];

impl LogArgs {
    /// The filter directives these flags give when `RUST_LOG` is not set.
    fn directives(&self) -> String {
        let (rest, ours) = match (self.quiet, self.verbose) {
            (true, _) => ("error", "error"),
            (false, 0) => ("warn", "warn"),
            (false, 1) => ("warn", "info"),
            (false, 2) => ("warn", "debug"),
            (false, _) => ("warn", "trace"),
        };
        let mut directives = rest.to_owned();
        for krate in OURS {
            // The binary's own progress and summaries (info) show unless `-q`.
            let level = match (krate, ours) {
                ("gc_cli", "warn") => "info",
                _ => ours,
            };
            directives.push_str(&format!(",{krate}={level}"));
        }
        directives
    }

    /// The filter: `rust_log` (the value of `RUST_LOG`) when set and not blank, else these
    /// flags'. Invalid `RUST_LOG` directives are ignored, each named on stderr.
    fn filter(&self, rust_log: Option<String>) -> EnvFilter {
        match rust_log.filter(|spec| !spec.trim().is_empty()) {
            Some(spec) => EnvFilter::builder().parse_lossy(spec),
            None => EnvFilter::new(self.directives()),
        }
    }
}

/// Installs the subscriber for the rest of the process. Colours only on a terminal, and never
/// with `NO_COLOR` set.
pub(crate) fn init(args: &LogArgs) {
    let filter = args.filter(std::env::var("RUST_LOG").ok());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second subscriber cannot be installed; the first stays (only tests would try).
    let _ = match args.log_format {
        LogFormat::Text => {
            let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            builder.with_ansi(ansi).try_init()
        }
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(quiet: bool, verbose: u8) -> LogArgs {
        LogArgs {
            log_format: LogFormat::Text,
            verbose,
            quiet,
        }
    }

    /// The directives of `-q` (`quiet`) and `verbose` times `-v`, without `RUST_LOG`.
    fn check(quiet: bool, verbose: u8, rest: &str, cli: &str, ours: &str) {
        let expected = format!("{rest},gc_cli={cli},gc_core={ours},gc_k8s={ours},gc_store={ours}");
        let flags = args(quiet, verbose);
        assert_eq!(flags.directives(), expected, "-q {quiet}, -v x{verbose}");
        let filter = flags.filter(None).to_string();
        assert_eq!(filter, EnvFilter::new(expected).to_string());
    }

    #[test]
    fn flags_choose_the_levels() {
        check(false, 0, "warn", "info", "warn");
        check(false, 1, "warn", "info", "info");
        check(false, 2, "warn", "debug", "debug");
        check(false, 3, "warn", "trace", "trace");
        check(false, 9, "warn", "trace", "trace");
        check(true, 0, "error", "error", "error");
    }

    #[test]
    fn rust_log_wins_when_set() {
        for (quiet, verbose) in [(false, 0), (false, 2), (true, 0)] {
            let flags = args(quiet, verbose);
            assert_eq!(flags.filter(Some("off".into())).to_string(), "off");
            let kube = flags.filter(Some("kube=debug".into())).to_string();
            assert_eq!(kube, "kube=debug");
            // Blank is unset.
            let blank = flags.filter(Some(" ".into())).to_string();
            assert_eq!(blank, flags.filter(None).to_string());
        }
    }
}
