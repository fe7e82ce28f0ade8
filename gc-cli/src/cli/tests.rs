//! The command line is consistent (clap's own checks), and every `gc-cli` (and `kubectl gc`)
//! command the documentation shows parses: the README, each
//! page of `docs/` and the chart's README, fenced code blocks only. (The README's tour also runs,
//! in `tests/docs.rs`; the chart README's `kubectl` and `helm` commands are checked against what
//! the chart renders, in `tests/chart/docs.rs`.)

use clap::CommandFactory;

use super::Cli;

#[path = "../../tests/common/markdown.rs"]
mod markdown;

/// The `gc-cli` commands of `markdown`'s fenced blocks, as argument lists starting with the
/// program: `gc-cli ...`, `kubectl gc ...`, `cargo run ... -p gc-cli -- ...`.
fn commands(markdown: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for command in markdown::fenced_commands(markdown) {
        let args = match &command[..] {
            [gc, rest @ ..] if gc == "gc-cli" => rest,
            [k, gc, rest @ ..] if k == "kubectl" && gc == "gc" => rest,
            [cargo, run, rest @ ..] if cargo == "cargo" && run == "run" => {
                match rest.iter().position(|w| w == "--") {
                    Some(dash) if rest.windows(2).any(|w| w == ["-p", "gc-cli"]) => {
                        &rest[dash + 1..]
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        let mut words = vec!["gc-cli".to_owned()];
        words.extend(args.iter().cloned());
        found.push(words);
    }
    found
}

/// The README, the chart's README and every page of `docs/`.
fn pages() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut pages = vec![
        format!("{root}/README.md"),
        format!("{root}/chart/README.md"),
    ];
    for entry in std::fs::read_dir(format!("{root}/docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path.display().to_string());
        }
    }
    pages
}

/// The older names of long flags (their hidden aliases), each with the name help shows, in every
/// command of `cmd`.
fn older_names(cmd: &clap::Command, found: &mut std::collections::BTreeMap<String, String>) {
    for arg in cmd.get_arguments() {
        let (Some(long), Some(all)) = (arg.get_long(), arg.get_all_aliases()) else {
            continue;
        };
        let visible = arg.get_visible_aliases().unwrap_or_default();
        for alias in all.into_iter().filter(|a| !visible.contains(a)) {
            found.insert(alias.to_owned(), long.to_owned());
        }
    }
    for sub in cmd.get_subcommands() {
        older_names(sub, found);
    }
}

/// The documentation shows the flags as help shows them: no command uses an older name (kept
/// as a hidden alias), and a paragraph or table row that names one says it is the older name.
#[test]
fn the_documentation_uses_the_flags_help_shows() {
    let mut older = std::collections::BTreeMap::new();
    older_names(&Cli::command(), &mut older);
    for name in [
        "retention-seconds",
        "grace-hours",
        "retain-volume-days",
        "ttl-seconds",
    ] {
        assert!(older.contains_key(name), "{name}: {older:?}");
    }
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for command in commands(&text) {
            for word in &command {
                let flag = word.strip_prefix("--").unwrap_or_default();
                let flag = flag.split('=').next().unwrap_or_default();
                if let Some(name) = older.get(flag) {
                    let command = command.join(" ");
                    problems.push(format!("{page}: `{command}`: --{flag} is now --{name}"));
                }
            }
        }
        let said = |block: &str| block.contains("older") || block.contains("alias");
        let blocks = text.split("\n\n").flat_map(|b| {
            let rows = b.lines().all(|l| l.starts_with('|'));
            if rows { b.lines().collect() } else { vec![b] }
        });
        for block in blocks.filter(|b| !said(b)) {
            for (flag, name) in &older {
                let named = ["`", " ", "="].map(|end| format!("`--{flag}{end}"));
                if named.iter().any(|n| block.contains(n.as_str())) {
                    problems.push(format!("{page}: --{flag} is now --{name}: {block}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_command_the_documentation_shows_parses() {
    let pages = pages();
    let mut checked = 0;
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for command in commands(&text) {
            checked += 1;
            if let Err(e) = Cli::command().try_get_matches_from(&command) {
                use clap::error::ErrorKind;
                if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                    problems.push(format!("{page}: {}\n{e}", command.join(" ")));
                }
            }
        }
    }
    assert!(checked >= 25, "only {checked} commands found in {pages:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The path of every command (`["plan", "pods"]`, ...; the program's own is empty), `help` left
/// out.
fn command_paths(command: &clap::Command, path: &[String], found: &mut Vec<Vec<String>>) {
    found.push(path.to_vec());
    for sub in command.get_subcommands().filter(|c| c.get_name() != "help") {
        let mut path = path.to_vec();
        path.push(sub.get_name().to_owned());
        command_paths(sub, &path, found);
    }
}

/// The help `gc-cli PATH --help` prints.
fn help_of(path: &[String]) -> String {
    let command = Cli::command_for(gc_output::plugin::Invoked::Cli);
    let words = ["gc-cli"]
        .into_iter()
        .chain(path.iter().map(String::as_str));
    let error = command
        .try_get_matches_from(words.chain(["--help"]))
        .expect_err("help is an error to clap");
    assert_eq!(error.kind(), clap::error::ErrorKind::DisplayHelp);
    error.to_string()
}

/// Every command's help ends with examples, each a `#` line saying what it does and a command,
/// and clap accepts every `gc-cli` command of them as it is written (`tests/help.rs` runs those
/// that need no cluster).
#[test]
fn every_command_ends_its_help_with_examples_that_parse() {
    let mut paths = Vec::new();
    command_paths(&Cli::command(), &[], &mut paths);
    assert!(paths.len() >= 20, "{paths:?}");
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in &paths {
        let help = help_of(path);
        let Some((_, examples)) = help.split_once("\nExamples:\n") else {
            problems.push(format!("gc-cli {}: no Examples section", path.join(" ")));
            continue;
        };
        let lines: Vec<&str> = examples.lines().collect();
        assert!(
            lines.len() >= 2 && lines[0].starts_with("  # "),
            "{path:?}: {examples}"
        );
        let fenced = format!("```sh\n{examples}\n```\n");
        let found = commands(&fenced);
        if found.is_empty() {
            problems.push(format!(
                "gc-cli {}: no gc-cli command in {examples}",
                path.join(" ")
            ));
        }
        for command in found {
            checked += 1;
            // A command's examples run that command: its words in order.
            let mut words = command[1..].iter();
            if !path.iter().all(|p| words.any(|w| w == p)) {
                problems.push(format!("gc-cli {}: example {command:?}", path.join(" ")));
            }
            if let Err(e) = Cli::command().try_get_matches_from(&command) {
                problems.push(format!("{}\n{e}", command.join(" ")));
            }
        }
    }
    assert!(checked >= 50, "only {checked} examples");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Flags are grouped under headings as kubectl groups them: the connection, the output, the
/// logs, the safety flags each under their own.
#[test]
fn flags_are_grouped_under_headings() {
    let help = help_of(&["run".to_owned(), "sessions".to_owned()]);
    let heading = |flag: &str| {
        let at = [" ", "\n"]
            .iter()
            .find_map(|end| help.find(&format!("--{flag}{end}")));
        let at = at.unwrap_or_else(|| panic!("{flag}"));
        let before = &help[..at];
        let line = before
            .lines()
            .rev()
            .find(|l| l.ends_with(':') && !l.starts_with(' '));
        line.unwrap_or_default().to_owned()
    };
    assert_eq!(heading("kubeconfig"), "Connection:");
    assert_eq!(heading("output"), "Output:");
    assert_eq!(heading("log-format"), "Logging:");
    assert_eq!(heading("dry-run"), "Safety:");
    assert_eq!(heading("override-guard"), "Safety:");
    assert_eq!(heading("database-url"), "Session database:");
    assert_eq!(heading("store"), "Store and archives:");
    assert_eq!(heading("grace"), "Options:");
}

#[test]
fn command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn shell_words_group_quotes_and_drop_comments() {
    assert_eq!(
        markdown::shell_words(
            r#"gc-cli run pods --exclude-selector 'team in (a),!keep' -n "x y"  # why"#
        ),
        [
            "gc-cli",
            "run",
            "pods",
            "--exclude-selector",
            "team in (a),!keep",
            "-n",
            "x y"
        ]
    );
    assert_eq!(markdown::shell_words("a --x=''"), ["a", "--x="]);
}
