//! `gc-cli`: plan, apply and run the collectors. `main` only parses the command line, runs the
//! command and maps its error to an exit code, in one place: [`exit::code`].

mod archives;
mod cli;
mod clock;
mod console;
mod dry_run;
mod events;
mod exit;
mod files;
mod ledger;
mod live;
mod logging;
mod metrics;
mod namespaces;
mod output;
mod pods;
mod run;
mod serve;
mod sessions;
mod signals;

use std::process::ExitCode;

use gc_output::plugin;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let invoked = plugin::invoked(args.first().map_or("", String::as_str));
    // kubectl completing `kubectl gc ...`: as `kubectl_complete-gc`, or `kubectl-gc __complete`.
    let completing = match (invoked, args.get(1).map(String::as_str)) {
        (plugin::Invoked::Completer, _) => Some(&args[1..]),
        (_, Some("__complete")) => Some(&args[2..]),
        _ => None,
    };
    if let Some(words) = completing {
        let text = plugin::complete(cli::Cli::command_for(plugin::Invoked::Plugin), words);
        print!("{text}");
        return ExitCode::from(exit::OK);
    }
    let result = match cli::Cli::parse_args(invoked) {
        Ok(cli) => {
            logging::init(&cli.log);
            let format = cli.log.format();
            cli.execute().map_err(|error| (format, error))
        }
        // `--help` and `--version` are not errors: clap prints them and exits 0.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // clap's own message, with the usage line; the code comes from the error's type.
            let _ = e.print();
            return ExitCode::from(exit::code(&e.into()));
        }
    };
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err((format, error)) => {
            logging::final_error(format, &error);
            ExitCode::from(exit::code(&error))
        }
    }
}
