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
