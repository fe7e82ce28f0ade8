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

#[test]
fn every_command_the_documentation_shows_parses() {
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
