//! The command line is consistent (clap's own checks), and every `gc-cli` (and `kubectl gc`)
//! command the documentation shows parses: the README, each
//! page of `docs/` and the chart's README, fenced code blocks only. (The README's tour also runs,
//! in `tests/docs.rs`; the chart README's `kubectl` and `helm` commands are checked against what
//! the chart renders, in `tests/chart/docs.rs`.)

use clap::CommandFactory;

use super::Cli;

/// Splits a shell line into words: quotes group, `\` escapes, `#` starts a comment.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '\\') => word.extend(chars.next()),
            (None, '#') if !any => break,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// The `gc-cli` commands of `markdown`'s fenced blocks, as argument lists starting with the
/// program: `gc-cli ...`, `kubectl gc ...`, `cargo run ... -p gc-cli -- ...`.
fn commands(markdown: &str) -> Vec<Vec<String>> {
    let (mut found, mut fenced, mut pending) = (Vec::new(), false, String::new());
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let all = words(&std::mem::take(&mut pending));
        for part in all.split(|w| ["&&", "||", "|", ";", ">", "2>"].contains(&w.as_str())) {
            let args = match part {
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
            let mut command = vec!["gc-cli".to_owned()];
            command.extend(args.iter().cloned());
            found.push(command);
        }
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
        words(r#"gc-cli run pods --exclude-selector 'team in (a),!keep' -n "x y"  # why"#),
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
    assert_eq!(words("a --x=''"), ["a", "--x="]);
}
