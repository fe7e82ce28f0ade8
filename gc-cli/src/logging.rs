//! The process's log subscriber: what the libraries and the binary log through `tracing`, as
//! text for people or one JSON object a line for machines, always on stderr (stdout carries
//! plans, reports and audit lines).
//!
//! The level: warnings and errors of every crate and the binary's own progress and summaries
//! (info), `-q` errors only, and each `-v` one level more (info, debug, trace) for gc's own crates
//! (`gc_cli`, `gc_runtime`, `gc_core`, `gc_k8s`, `gc_store`): the dependencies' debug lines would drown them.
//! `RUST_LOG` (its full directive syntax) adds to that: `RUST_LOG=kube=debug` shows kube's debug
//! lines beside gc's own; a directive without a target (`RUST_LOG=debug`, `RUST_LOG=off`) sets
//! the default level, and then `RUST_LOG` alone decides.
//!
//! A command's final error is written in the chosen format whatever the level: [`final_error`].

use std::io::IsTerminal;

use clap::{ArgAction, Args, ValueEnum};
use gc_output::options::shown;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

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
const OURS: [&str; 5] = ["gc_cli", "gc_runtime", "gc_core", "gc_k8s", "gc_store"];

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
            // The runs' progress and summaries (info) show unless `-q`.
            let level = match (krate, ours) {
                ("gc_cli" | "gc_runtime", "warn") => "info",
                _ => ours,
            };
            directives.push_str(&format!(",{krate}={level}"));
        }
        directives
    }

    /// The filter: these flags' directives, then `rust_log`'s (the value of `RUST_LOG`), which
    /// win for the targets they name; `rust_log` alone when it sets the default level. Invalid
    /// `RUST_LOG` directives are ignored, each named on stderr.
    fn filter(&self, rust_log: Option<String>) -> EnvFilter {
        let flags = self.directives();
        // Spaces around directives are allowed, as people write them.
        let rust_log =
            rust_log.map(|spec| spec.split(',').map(str::trim).collect::<Vec<_>>().join(","));
        let spec = match rust_log.filter(|spec| !spec.trim_matches(',').is_empty()) {
            Some(spec) if sets_default_level(&spec) => spec,
            Some(spec) => format!("{flags},{spec}"),
            None => flags,
        };
        EnvFilter::builder().parse_lossy(spec)
    }

    /// The format of the log lines.
    pub(crate) fn format(&self) -> LogFormat {
        self.log_format
    }
}

/// Whether a filter `spec` has a directive without a target (`debug`, `off`): the default level.
fn sets_default_level(spec: &str) -> bool {
    spec.split(',')
        .any(|directive| directive.parse::<LevelFilter>().is_ok())
}

/// Writes a command's final error on stderr, whatever the log level: `gc-cli: error: ...` as
/// text, or one JSON object as the log lines are (`timestamp`, `level`, `target`, `message`).
pub(crate) fn final_error(format: LogFormat, error: &anyhow::Error) {
    if gc_output::closed_pipe(error) {
        return;
    }
    match format {
        LogFormat::Text => eprintln!("gc-cli: error: {}", shown(&format!("{error:#}"))),
        LogFormat::Json => {
            let now = time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            let line = serde_json::json!({
                "timestamp": now,
                "level": "ERROR",
                "target": "gc_cli",
                "message": shown(&format!("{error:#}")),
            });
            eprintln!("{line}");
        }
    }
}

/// Installs the subscriber for the rest of the process. Colours only on a terminal, and never
/// with `NO_COLOR` set.
pub(crate) fn init(args: &LogArgs) {
    let filter = args.filter(std::env::var("RUST_LOG").ok());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(gc_output::options::stderr);
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
        let expected = format!(
            "{rest},gc_cli={cli},gc_runtime={cli},gc_core={ours},gc_k8s={ours},gc_store={ours}"
        );
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
    fn rust_log_adds_to_the_flags_or_decides_alone() {
        for (quiet, verbose) in [(false, 0), (false, 2), (true, 0)] {
            let flags = args(quiet, verbose);
            // A default level: RUST_LOG alone.
            assert_eq!(flags.filter(Some("off".into())).to_string(), "off");
            let debug = flags.filter(Some("kube=trace, debug".into())).to_string();
            assert_eq!(debug, EnvFilter::new("kube=trace,debug").to_string());
            // Targets only: added to the flags', winning for the targets they name.
            let kube = flags.filter(Some("kube=debug".into())).to_string();
            let both = format!("{},kube=debug", flags.directives());
            assert_eq!(kube, EnvFilter::new(both).to_string());
            let gc = flags.filter(Some("gc_k8s=trace".into())).to_string();
            assert!(gc.contains("gc_k8s=trace"), "{gc}");
            assert_eq!(gc.matches("gc_k8s=").count(), 1, "{gc}");
            // Blank is unset.
            let blank = flags.filter(Some(" ".into())).to_string();
            assert_eq!(blank, flags.filter(None).to_string());
        }
    }
}
