//! Every command's help ends with examples (`gc-cli PATH --help`, as the binary prints it); each
//! example that needs no cluster runs as written, from a folder holding the repository's
//! `examples/`, with an empty store: plans of an example inventory, `archives list`, `archives
//! prune --dry-run`, `ledger export`, `version`, `completion`, `man`. (Every example, these and
//! those that need a cluster or a database, is parsed by clap in `src/cli/tests.rs`.)

use std::path::Path;

mod common;

use common::markdown::fenced_commands;

/// What `gc-cli PATH --help` prints.
fn help(work: &Path, path: &[String]) -> String {
    let out = common::command()
        .args(path)
        .arg("--help")
        .current_dir(work)
        .output()
        .unwrap();
    assert!(out.status.success(), "{path:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The names of a help's `Commands:` section (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    let Some((_, rest)) = help.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    rest.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Whether an example needs neither a cluster nor a database, nor an archive that is not there.
fn runs_alone(args: &[String]) -> bool {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match &words[..] {
        ["plan", "pods", ..] => words.contains(&"--inventory"),
        // `archives verify` of a store without receipts fails: nothing to verify.
        ["archives", "list", ..] | ["ledger", "export", ..] => true,
        ["archives", "prune", ..] => words.contains(&"--dry-run"),
        ["version" | "completion" | "man", ..] => true,
        _ => false,
    }
}

#[test]
fn every_example_that_needs_no_cluster_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root.join("examples"), work.path().join("examples")).unwrap();
    let state = work.path().join("state");
    let mut paths = vec![Vec::<String>::new()];
    let (mut examples, mut ran) = (0, Vec::new());
    while let Some(path) = paths.pop() {
        let text = help(work.path(), &path);
        for sub in subcommands(&text) {
            paths.push([path.clone(), vec![sub]].concat());
        }
        let (_, shown) = text
            .split_once("\nExamples:\n")
            .unwrap_or_else(|| panic!("gc-cli {path:?} --help: no examples\n{text}"));
        for command in fenced_commands(&format!("```sh\n{shown}\n```\n")) {
            let Some(("gc-cli", args)) = command.split_first().map(|(p, a)| (p.as_str(), a)) else {
                continue;
            };
            examples += 1;
            if !runs_alone(args) {
                continue;
            }
            let out = common::command()
                .args(args)
                .current_dir(work.path())
                .env("GC_STATE_DIR", &state)
                .env("HOME", work.path())
                .env_remove("GC_STORE")
                .env_remove("KUBECONFIG")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "gc-cli {}\nstdout: {}\nstderr: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran.push(args.join(" "));
        }
    }
    assert!(examples >= 50, "{examples} examples");
    // What ran: each kind of command that needs no cluster, at least once.
    for head in [
        "plan pods --inventory",
        "archives list",
        "archives prune",
        "ledger export",
        "version -o json",
        "completion zsh",
        "man --out-dir",
    ] {
        assert!(ran.iter().any(|r| r.starts_with(head)), "{head}: {ran:#?}");
    }
    assert!(work.path().join("man1/gc-cli.1").is_file());
}
