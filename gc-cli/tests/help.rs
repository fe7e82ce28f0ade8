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
            // A session's archives are verified where there are sessions (tests/sessions.rs).
            if line.contains("s3://") || line.contains("--inventory") || line.contains("--session")
            {
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

/// `gc-cli PATH ARG` as a user with nothing set sees it: no `$GC_*` value in clap's
/// `[env: ...]`, no kubeconfig.
fn shown(work: &Path, path: &[String], arg: &str) -> String {
    let out = common::command()
        .env_clear()
        .env("HOME", work)
        .env("GC_STATE_DIR", work.join("state"))
        .args(path)
        .arg(arg)
        .current_dir(work)
        .output()
        .unwrap();
    assert!(out.status.success(), "{path:?} {arg}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every command and subcommand, as the `Commands:` sections of `--help` name them (`[]` is
/// `gc-cli` itself).
fn commands(work: &Path) -> Vec<Vec<String>> {
    let (mut all, mut paths) = (Vec::new(), vec![Vec::<String>::new()]);
    while let Some(path) = paths.pop() {
        for sub in subcommands(&help(work, &path)) {
            paths.push([path.clone(), vec![sub]].concat());
        }
        all.push(path);
    }
    all.sort();
    all
}

/// How a help line names its flag: `--LONG`, else the argument's `<VALUE>`
/// (`  -n, --namespace <NS>  ...` is `--namespace`, `  <UID|KIND/NAME>` is `<UID|KIND/NAME>`).
fn flag_of(line: &str) -> String {
    let spec = line.trim_start();
    match spec
        .strip_prefix("--")
        .or_else(|| spec.get(2..).and_then(|s| s.strip_prefix(", --")))
    {
        Some(long) => {
            let long: String = long
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            format!("--{long}")
        }
        None => spec
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// The flag and argument entries of a help (`Usage:`, `Commands:` and `Examples:` left out):
/// each flag with its lines.
fn entries(help: &str) -> Vec<(String, Vec<&str>)> {
    let mut entries: Vec<(String, Vec<&str>)> = Vec::new();
    let mut in_flags = false;
    for line in help.lines() {
        if line.starts_with("Usage:") {
            in_flags = false;
        } else if !line.starts_with(' ') && line.ends_with(':') {
            in_flags = !["Commands:", "Examples:"].contains(&line);
        } else if in_flags
            && ["  -", "      --", "  <", "  ["]
                .iter()
                .any(|s| line.starts_with(s))
        {
            entries.push((flag_of(line), vec![line]));
        } else if in_flags && let Some((_, lines)) = entries.last_mut() {
            lines.push(line);
        }
    }
    // The blank lines ending each entry (and section) are no part of it.
    for (_, lines) in &mut entries {
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
    }
    entries
}

/// The help on an entry's first line (beside its flag), without clap's `[default: ...]`,
/// `[env: ...]` and `[possible values: ...]`.
fn short_text(line: &str) -> &str {
    let spec = line.trim_start();
    let Some(at) = spec.find("  ") else {
        return "";
    };
    let text = spec[at..].trim_start();
    let end = [
        " [default: ",
        " [env: ",
        " [possible values: ",
        " [aliases: ",
    ]
    .iter()
    .filter_map(|suffix| text.find(suffix))
    .min()
    .unwrap_or(text.len());
    &text[..end]
}

/// An entry's whole help in `--help`: the first paragraph under its flag, lines joined (or
/// beside it, where `--help` is laid out as `-h`).
fn whole_text(lines: &[&str]) -> String {
    if lines.len() == 1 {
        return short_text(lines[0]).to_owned();
    }
    lines[1..]
        .iter()
        .map(|l| l.trim())
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every flag of `gc-cli PATH` with its help as `-h` has it, those `-h` leaves to `--help` too:
/// as kubectl's completion of `kubectl gc PATH --` offers them.
fn short_helps(work: &Path, path: &[String]) -> Vec<(String, String)> {
    let path = [vec!["__complete".to_owned()], path.to_vec()].concat();
    shown(work, &path, "--")
        .lines()
        .filter(|l| !l.starts_with(':'))
        .map(|l| {
            let (flag, help) = l.split_once('\t').unwrap_or((l, ""));
            (flag.to_owned(), help.to_owned())
        })
        .collect()
}

/// The longest line of a flag in `-h`: its help (at most 80 characters) beside the flags'
/// column (up to 41 wide, `      --archive-credentials-file <FILE>  `), with clap's `[default:
/// ...]`, `[env: ...]` and `[possible values: ...]` (up to 65): two 80-column lines at most. The
/// widest today is 152 (`run sessions -o`), against 300 to 530 before.
const LINE: usize = 160;

/// `-h` shows each flag on one line: its help one line of at most 80 characters, no entry on two
/// lines, none longer than [`LINE`] with clap's suffixes; the command's about and those of its
/// commands on one line; `run sessions -h` in 60 lines. The failed-Pod commands' `-n` ends with
/// the namespace the kubeconfig context names now (`gc_output::help::WHOLE`), past the bound.
#[test]
fn h_shows_each_flag_on_one_line() {
    use gc_output::help::{ONE_LINE, SHORT, WHOLE};
    let work = tempfile::tempdir().unwrap();
    let all = commands(work.path());
    assert!(all.len() >= 20, "{all:?}");
    for path in &all {
        let name = format!("gc-cli {}", path.join(" "));
        let short = shown(work.path(), path, "-h");
        let long_about = |about: &str| {
            format!(
                "{name}: an about of {} characters; add a one-line one to ABOUTS in \
                 gc-output/src/help/short.rs: {about}",
                about.chars().count()
            )
        };
        let about = short.lines().next().unwrap_or_default();
        assert!(about.chars().count() <= ONE_LINE, "{}", long_about(about));
        let commands = short
            .split_once("\nCommands:\n")
            .map_or("", |(_, rest)| rest);
        for line in commands.lines().take_while(|l| l.starts_with("  ")) {
            let about = line
                .trim_start()
                .split_once("  ")
                .map_or("", |(_, a)| a.trim());
            assert!(about.chars().count() <= ONE_LINE, "{}", long_about(about));
        }
        let entries = entries(&short);
        assert!(!entries.is_empty(), "{name}: {short}");
        for (flag, lines) in entries {
            assert_eq!(
                lines.len(),
                1,
                "{name} {flag} on more than one line: {lines:#?}"
            );
            if WHOLE.contains(&(path.join(" ").as_str(), flag.as_str())) {
                assert!(lines[0].contains("Now: `"), "{name} {flag}: {}", lines[0]);
                continue;
            }
            let text = short_text(lines[0]);
            assert!(
                text.chars().count() <= SHORT,
                "{name} {flag}: -h shows {} characters: {text}",
                text.chars().count()
            );
            assert!(
                lines[0].chars().count() <= LINE,
                "{name} {flag}: {}",
                lines[0]
            );
        }
    }
    let run_sessions = shown(work.path(), &["run".into(), "sessions".into()], "-h");
    let lines = run_sessions.lines().count();
    assert!(lines <= 60, "{lines} lines:\n{run_sessions}");
    // What `-h` leaves out it says, and `--help` shows.
    assert!(
        run_sessions.trim_end().ends_with(
            "Use --help for every flag in full, and for those under Connection; Store and \
             archives; Metrics, alerts and Events; Logging."
        ),
        "{run_sessions}"
    );
    for flag in ["--kubeconfig", "--store", "--pushgateway", "--verbose"] {
        assert!(!run_sessions.contains(flag), "{flag}: {run_sessions}");
    }
    // `archives`, `ledger` and `restore` read the store: their `-h` shows where it is.
    let list = shown(work.path(), &["archives".into(), "list".into()], "-h");
    assert!(list.contains("      --store <URL>"), "{list}");
}

/// Every flag whose whole help is longer than 80 characters has a one-line summary in `-h`
/// (`gc_output::help::SUMMARIES`), the flags `-h` leaves to `--help` included; a shorter help
/// is `-h`'s as it is. Flags sharing a summary across commands share their whole text, so that
/// a summary made for one meaning of a flag is not shown for another.
#[test]
fn every_long_flag_has_a_summary_and_help_keeps_the_whole_text() {
    use gc_output::help::{SHORT, WHOLE};
    let work = tempfile::tempdir().unwrap();
    let mut meanings: std::collections::BTreeMap<(String, String), (String, String)> =
        std::collections::BTreeMap::new();
    let mut summed = 0;
    for path in commands(work.path()) {
        let name = format!("gc-cli {}", path.join(" "));
        let mut short = short_helps(work.path(), &path);
        // Arguments, which completion does not offer as flags: as `-h` shows them.
        let h = shown(work.path(), &path, "-h");
        for (flag, lines) in entries(&h) {
            if flag.starts_with('<') || flag.starts_with('[') {
                short.push((flag, short_text(lines[0]).to_owned()));
            }
        }
        let long = shown(work.path(), &path, "--help");
        let whole: std::collections::BTreeMap<String, String> = entries(&long)
            .into_iter()
            .map(|(flag, lines)| (flag, whole_text(&lines)))
            .collect();
        for (flag, summary) in short {
            if flag == "--help" || WHOLE.contains(&(path.join(" ").as_str(), flag.as_str())) {
                continue;
            }
            let text = whole
                .get(&flag)
                .unwrap_or_else(|| panic!("{name} {flag}: not in --help\n{long}"));
            if text.chars().count() > SHORT {
                assert!(
                    summary != *text && summary.chars().count() <= SHORT,
                    "{name} {flag}: its help is {} characters and has no one-line summary; add \
                     one to SUMMARIES in gc-output/src/help/short.rs",
                    text.chars().count()
                );
                summed += 1;
            } else {
                assert_eq!(
                    summary, *text,
                    "{name} {flag}: a short help is -h's as it is"
                );
            }
            let seen = meanings
                .entry((flag.clone(), summary.clone()))
                .or_insert_with(|| (name.clone(), text.clone()));
            assert_eq!(
                seen.1, *text,
                "{name} {flag} and {} {flag} share the summary {summary:?}, not their text: give \
                 each its own row in SUMMARIES",
                seen.0
            );
        }
    }
    assert!(summed >= 100, "{summed} summaries shown");
    // `--help` holds each whole text, as before.
    let work = work.path();
    let run_sessions = shown(work, &["run".into(), "sessions".into()], "--help");
    assert!(
        run_sessions.contains(
            "Before a claim is deleted, its PersistentVolume (reclaim policy `Delete`) is set to \
             `Retain`, so the user's data survives the delete; a run this long after the claim's \
             last delete gives it its policy back and Kubernetes deletes it: whole days, `7d`, \
             `2w`; a bare number is days (`--retain-volume-days`, its older name) (0..=3650 \
             days; 0: volumes go with their claims, and those kept earlier get their policy \
             back). Needs `get`, `list` and `patch` on PersistentVolumes (cluster-scoped)"
        ),
        "{run_sessions}"
    );
    for flag in ["--kubeconfig", "--store", "--pushgateway", "--verbose"] {
        assert!(run_sessions.contains(flag), "{flag}: {run_sessions}");
    }
    let short = shown(work, &["run".into(), "sessions".into()], "-h");
    assert!(
        short.contains("How long a deleted claim's volume is kept (`7d`"),
        "{short}"
    );
    // A command's about too: one line in `-h` and in its group's list, whole in `--help`.
    let prune = shown(work, &["archives".into(), "prune".into()], "--help");
    assert!(
        prune.starts_with(
            "Removes each receipt older than `--older-than`, its archive first: a session's \
             receipts only all together once the newest is"
        ),
        "{prune}"
    );
}
