//! Every command's help ends with examples (`gc-cli PATH --help`, as the binary prints it); each
//! example that needs no cluster runs as written, from a folder holding the repository's
//! `examples/`, with an empty store: plans of an example inventory, `archives list`, `archives
//! prune --dry-run`, `ledger export`, `version`, `completion`, `man`. The failed-Pod collector's,
//! the archives' and the ledger's examples then run in order against the test bed's API server,
//! their namespace `batch` the test's own, from a plan to an archive shown, verified and pruned.
//! The session collector's, `serve`'s and `restore`'s run against the test bed and PostgreSQL
//! in `tests/sessions.rs` (`the_session_examples_run_against_the_test_bed`). Every example is
//! parsed by clap in `src/cli/tests.rs`.

use std::path::Path;

use gc_testbed::FailedPod;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Patch, PatchParams};

mod common;

use common::markdown::fenced_commands;
use common::{COLLECT, Result};

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

/// `gc-cli --help`'s line of a command group names each of the group's commands: `archives`
/// names `list`, `show`, `verify` and `prune`.
#[test]
fn a_command_groups_line_names_each_of_its_commands() {
    let work = tempfile::tempdir().unwrap();
    let top = help(work.path(), &[]);
    for group in ["archives", "ledger"] {
        let line = top
            .lines()
            .find(|l| l.split_whitespace().next() == Some(group))
            .unwrap_or_else(|| panic!("no line of {group}: {top}"));
        let commands = subcommands(&help(work.path(), &[group.to_owned()]));
        assert!(!commands.is_empty(), "{group}");
        for command in commands {
            assert!(line.contains(&command), "{group} {command}: {line}");
        }
    }
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

/// The example lines (commands, not their `#` lines) of `gc-cli PATH --help`.
fn example_lines(work: &Path, path: &str) -> Vec<String> {
    let path: Vec<String> = path.split_whitespace().map(str::to_owned).collect();
    let text = help(work, &path);
    let (_, shown) = text.split_once("\nExamples:\n").expect("examples");
    shown
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("gc-cli "))
        .map(str::to_owned)
        .collect()
}

/// The failed-Pod collector's, the archives' and the ledger's examples, as their help shows them,
/// run in order against the test bed: namespace `batch` is the test's, labelled `team=batch`,
/// with one failed Pod `job-a-1` that opted in and finished eight days ago (past the examples'
/// `--retention 7d`). The plan is sealed, applied as a dry run then for real (the Pod archived
/// and deleted), applied again (nothing to do), run, listed, shown, verified, pruned; the ledger
/// exported and imported. Left out: the S3 example (no object store here).
#[tokio::test]
async fn the_failed_pod_examples_run_against_the_test_bed() -> Result {
    let (bed, ns) = common::namespace("help").await?;
    let label = serde_json::json!({"metadata": {"labels": {"team": "batch"}}});
    kube::Api::<Namespace>::all(bed.client())
        .patch(ns.name(), &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    let eight_days_ago = k8s_openapi::jiff::Timestamp::now().as_second() - 8 * 86_400;
    FailedPod::new("job-a-1")
        .label(COLLECT, "true")
        .finished_at(k8s_openapi::jiff::Timestamp::from_second(eight_days_ago)?)
        .create(&ns.api::<Pod>())
        .await?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let work = tempfile::tempdir()?;
    std::os::unix::fs::symlink(root.join("examples"), work.path().join("examples"))?;
    let mut ran = Vec::new();
    for path in [
        "plan pods",
        "apply",
        "run pods",
        "archives list",
        "archives show",
        "archives verify",
        "archives prune",
        "ledger export",
        "ledger import",
    ] {
        for line in example_lines(work.path(), path) {
            if line.contains("s3://") || line.contains("--inventory") {
                continue;
            }
            let (command, into) = match line.split_once(" > ") {
                Some((command, file)) => (command.to_owned(), Some(file.trim().to_owned())),
                None => (line.clone(), None),
            };
            let words = &fenced_commands(&format!("```sh\n{command}\n```\n"))[0];
            let mut args: Vec<String> = words[1..].to_vec();
            for (i, word) in words[1..].iter().enumerate() {
                if word == "batch" && i > 0 && ["-n", "--namespace"].contains(&args[i - 1].as_str())
                {
                    args[i] = ns.name().to_owned();
                }
            }
            let out = common::command()
                .args(&args)
                .current_dir(work.path())
                .env("GC_STATE_DIR", work.path().join("state"))
                .env("HOME", work.path())
                .env("KUBECONFIG", bed.kubeconfig_path())
                .env_remove("GC_STORE")
                .output()?;
            let shown = format!(
                "{line}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{shown}");
            if let Some(file) = into {
                std::fs::write(work.path().join(file), &out.stdout)?;
            }
            ran.push((line, String::from_utf8_lossy(&out.stdout).into_owned()));
        }
    }
    let output = |prefix: &str| -> &str {
        let found = ran.iter().find(|(l, _)| l.starts_with(prefix));
        &found
            .unwrap_or_else(|| panic!("no example {prefix}: {ran:#?}"))
            .1
    };
    // What the examples say they do, they did.
    assert!(output("gc-cli plan pods -n batch --retention 7d").contains("targeted  job-a-1"));
    assert!(work.path().join("plan.json").is_file());
    assert!(
        output("gc-cli apply plan.json -n batch --retention 7d --dry-run")
            .contains("would collect")
    );
    assert!(
        ns.api::<Pod>().get_opt("job-a-1").await?.is_none(),
        "applied"
    );
    assert!(output("gc-cli apply plan.json -n batch --retention 7d -o name").is_empty());
    assert!(output("gc-cli archives list -n batch").contains("job-a-1"));
    assert!(output("gc-cli archives show -n batch pod/job-a-1 -o json").contains("\"job-a-1\""));
    assert!(work.path().join("ledger.json").is_file());
    assert!(ran.len() >= 15, "{ran:#?}");
    Ok(())
}
