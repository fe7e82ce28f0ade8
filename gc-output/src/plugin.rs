//! `gc-cli` as a kubectl plugin. Installed as `kubectl-gc` (krew: `deploy/krew/gc.yaml`),
//! `kubectl gc ...` runs it and its help says `kubectl gc`; as `kubectl_complete-gc` (a link to
//! it, or the archive's script that calls `kubectl-gc __complete`), kubectl 1.26+ asks it to
//! complete `kubectl gc ...`, one candidate per line and then `:DIRECTIVE`, Cobra's protocol.

use std::path::Path;

/// How the process was started, from its program name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invoked {
    /// As `gc-cli` (or any other name).
    Cli,
    /// As `kubectl-gc`: `kubectl gc`.
    Plugin,
    /// As `kubectl_complete-gc`: kubectl completing `kubectl gc ...`.
    Completer,
}

/// The name the help and usage give the program when it runs as a kubectl plugin.
pub const PLUGIN: &str = "kubectl gc";

/// How a process whose program is `argv0` was started.
pub fn invoked(argv0: &str) -> Invoked {
    let name = Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match name.strip_suffix(".exe").unwrap_or(name) {
        "kubectl-gc" => Invoked::Plugin,
        "kubectl_complete-gc" => Invoked::Completer,
        _ => Invoked::Cli,
    }
}

/// Cobra's `ShellCompDirectiveNoFileComp`: no file names, only the candidates.
const NO_FILES: u8 = 4;
/// Cobra's `ShellCompDirectiveDefault`: the shell may complete file names.
const FILES: u8 = 0;

/// The completion of `words` (what follows `kubectl gc`; the last is the word being completed,
/// possibly empty) against `command`: each candidate as `VALUE\tHELP`, then `:DIRECTIVE`.
pub fn complete(mut command: clap::Command, words: &[String]) -> String {
    command.build();
    let (partial, done) = match words.split_last() {
        Some((last, done)) => (last.as_str(), done),
        None => ("", &[][..]),
    };
    let mut current = &command;
    // The flag whose value is being completed, if the word before the partial one takes one.
    let mut pending: Option<&clap::Arg> = None;
    for word in done {
        if pending.take().is_some() {
            continue;
        }
        if let Some(flag) = word.strip_prefix('-') {
            if !word.contains('=') {
                pending = find_flag(current, flag).filter(|a| takes_value(a));
            }
        } else if let Some(sub) = current.find_subcommand(word) {
            current = sub;
        }
    }
    let mut lines = Vec::new();
    let directive = if let Some(arg) = pending {
        let values = possible(arg, partial);
        let directive = if values.is_empty() { FILES } else { NO_FILES };
        lines.extend(values);
        directive
    } else if partial.starts_with('-') {
        for arg in current.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                let flag = format!("--{long}");
                if flag.starts_with(partial) {
                    lines.push(candidate(&flag, arg.get_help()));
                }
            }
        }
        NO_FILES
    } else if current.has_subcommands() {
        for sub in current.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name().starts_with(partial) {
                lines.push(candidate(sub.get_name(), sub.get_about()));
            }
        }
        NO_FILES
    } else {
        let positional: Vec<String> = current
            .get_positionals()
            .flat_map(|a| possible(a, partial))
            .collect();
        let directive = if positional.is_empty() {
            FILES
        } else {
            NO_FILES
        };
        lines.extend(positional);
        directive
    };
    lines.push(format!(":{directive}"));
    lines.join("\n") + "\n"
}

/// The argument of `command` named by `flag` (without its first `-`): `-n`, `--namespace`.
fn find_flag<'a>(command: &'a clap::Command, flag: &str) -> Option<&'a clap::Arg> {
    command
        .get_arguments()
        .find(|a| match flag.strip_prefix('-') {
            Some(long) => a.get_long() == Some(long),
            None => flag.len() == 1 && a.get_short() == flag.chars().next(),
        })
}

fn takes_value(arg: &clap::Arg) -> bool {
    arg.get_num_args().is_none_or(|n| n.takes_values())
        && !matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
        )
}

/// The values `arg` accepts that start with `partial`.
fn possible(arg: &clap::Arg, partial: &str) -> Vec<String> {
    arg.get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(partial))
        .map(|v| candidate(v.get_name(), v.get_help()))
        .collect()
}

fn candidate(value: &str, help: Option<&clap::builder::StyledStr>) -> String {
    match help {
        Some(help) => {
            let first = help.to_string();
            let first = first.lines().next().unwrap_or_default().to_owned();
            format!("{value}\t{first}")
        }
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_name_says_how_it_was_started() {
        assert_eq!(invoked("/usr/local/bin/gc-cli"), Invoked::Cli);
        assert_eq!(invoked("/home/u/.krew/bin/kubectl-gc"), Invoked::Plugin);
        assert_eq!(invoked("kubectl-gc.exe"), Invoked::Plugin);
        assert_eq!(invoked("kubectl_complete-gc"), Invoked::Completer);
        assert_eq!(invoked("kubectl-gc-other"), Invoked::Cli);
    }
}
