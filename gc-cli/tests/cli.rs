//! The command line a kubectl user expects: `-o` forms (and `--format`, the older spelling),
//! `--dry-run=none|server` (and the older forms), `-n` from the kubeconfig context, shell
//! completions a real bash completes with, and man pages.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;

use common::{Result, command, gc_cli, namespace, ok, run_pods, sqlite, target};

/// A corpus inventory (targets, held and not-eligible Pods in namespace `work`) in `dir`.
fn inventory(dir: &Path) -> PathBuf {
    let case = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/plan/eligibility-clauses.json"
    );
    let body: Value = serde_json::from_slice(&std::fs::read(case).unwrap()).unwrap();
    let path = dir.join("inventory.json");
    std::fs::write(&path, serde_json::to_vec(&body["inventory"]).unwrap()).unwrap();
    path
}

/// `plan pods` over the corpus inventory, with `extra` flags.
fn plan(dir: &Path, extra: &[&str]) -> Output {
    let inventory = inventory(dir);
    let mut args = vec!["plan", "pods", "--inventory", inventory.to_str().unwrap()];
    args.extend(["--now", "2026-11-29T12:00:00Z", "--max-pods", "50"]);
    args.extend(extra);
    gc_cli(&args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The usage error of `out`: exit 2, and stderr naming `says`.
fn usage_error(out: &Output, says: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(stderr(out).contains(says), "{says}: {}", stderr(out));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_plan_prints_in_every_form_and_the_forms_agree() {
    let dir = tempfile::tempdir().unwrap();
    let json: Value =
        serde_json::from_str(&ok(&plan(dir.path(), &["-n", "work", "-o", "json"]))).unwrap();
    let targets: Vec<&str> = json["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!targets.is_empty(), "{json}");
    // The older spelling gives the same document.
    let older: Value =
        serde_json::from_str(&ok(&plan(dir.path(), &["-n", "work", "--format", "json"]))).unwrap();
    assert_eq!(older, json);
    // YAML is the same document.
    let yaml = ok(&plan(dir.path(), &["-n", "work", "-o", "yaml"]));
    let from_yaml: Value = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(from_yaml, json);
    // Names: one `pod/NAME` per target, in plan order.
    let names = ok(&plan(dir.path(), &["-n", "work", "--output", "name"]));
    let expected: Vec<String> = targets.iter().map(|t| format!("pod/{t}")).collect();
    assert_eq!(names.lines().collect::<Vec<_>>(), expected);
    // Wide: the table's rows, more columns, and the not-eligible Pods with their reasons.
    let table = ok(&plan(dir.path(), &["-n", "work"]));
    let wide = ok(&plan(dir.path(), &["-n", "work", "-o", "wide"]));
    assert!(
        wide.starts_with("STATE") && wide.contains("RESOURCEVERSION"),
        "{wide}"
    );
    assert!(!table.contains("RESOURCEVERSION"), "{table}");
    let not_eligible = json["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["decision"] == "notEligible")
        .count();
    let rows = |text: &str, state: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!("{state} ")))
            .count()
    };
    assert!(not_eligible > 0, "{json}");
    assert_eq!(rows(&wide, "not eligible"), not_eligible, "{wide}");
    assert_eq!(rows(&table, "not eligible"), 0, "{table}");
    assert_eq!(rows(&wide, "targeted"), targets.len());
    assert_eq!(rows(&table, "targeted"), targets.len());
}

#[test]
fn unknown_or_unfit_output_forms_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    usage_error(&plan(dir.path(), &["-n", "work", "-o", "xml"]), "xml");
    let store = sqlite(dir.path(), "s.db");
    // `kestra` belongs to `plan pods` only.
    usage_error(
        &gc_cli(&["archives", "list", "--store", &store, "-o", "kestra"]),
        "kestra",
    );
    usage_error(
        &gc_cli(&[
            "run",
            "pods",
            "--api-url",
            "https://127.0.0.1:1",
            "-o",
            "kestra",
        ]),
        "kestra",
    );
    assert!(!dir.path().join("s.db").exists(), "no store was opened");
}

#[test]
fn dry_run_takes_kubectls_values_and_refuses_others_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-plan.json");
    let missing = missing.to_str().unwrap();
    for bad in ["client", "maybe"] {
        let flag = format!("--dry-run={bad}");
        usage_error(&gc_cli(&["apply", missing, &flag]), "--dry-run");
        usage_error(
            &gc_cli(&[
                "run",
                "sessions",
                &flag,
                "--database-url",
                "postgres://x@127.0.0.1:1/x",
            ]),
            "--dry-run",
        );
        usage_error(&gc_cli(&["run", "pods", "--dry-run", bad]), "--dry-run");
    }
    // `apply --dry-run PLAN` still reads PLAN as the plan (a bare `--dry-run` is `server`).
    usage_error(
        &gc_cli(&["apply", "--dry-run", missing]),
        "missing-plan.json",
    );
    usage_error(
        &gc_cli(&["apply", "--dry-run=server", missing]),
        "missing-plan.json",
    );
    // Acting without a reviewed plan needs both flags, in either spelling.
    for old_or_new in ["false", "none"] {
        usage_error(
            &gc_cli(&["run", "pods", "--dry-run", old_or_new]),
            "--auto-remediate",
        );
    }
}

#[test]
fn the_namespace_defaults_to_the_kubeconfig_contexts() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: team\n\
         clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n\
         users:\n- name: u\n  user:\n    token: t\n\
         contexts:\n- name: team\n  context:\n    cluster: c\n    user: u\n    namespace: work\n\
         - name: bare\n  context:\n    cluster: c\n    user: u\n\
         - name: sys\n  context:\n    cluster: c\n    user: u\n    namespace: kube-system\n",
    )
    .unwrap();
    let config = kubeconfig.to_str().unwrap();
    let namespace = |extra: &[&str]| {
        let mut args = vec!["-o", "json", "--kubeconfig", config];
        args.extend(extra);
        let doc: Value = serde_json::from_str(&ok(&plan(dir.path(), &args))).unwrap();
        doc["config"]["namespace"].as_str().unwrap().to_owned()
    };
    assert_eq!(namespace(&[]), "work", "the current context's namespace");
    assert_eq!(
        namespace(&["--context", "bare"]),
        "default",
        "a context without one"
    );
    assert_eq!(namespace(&["-n", "other"]), "other", "-n wins");
    // Where `default` came from is said too.
    let bare = plan(dir.path(), &["--kubeconfig", config, "--context", "bare"]);
    assert!(
        stderr(&bare).contains("no kubeconfig context names a namespace"),
        "{}",
        stderr(&bare)
    );
    // A context naming a system namespace is refused, saying where the namespace came from.
    let refused = plan(dir.path(), &["--kubeconfig", config, "--context", "sys"]);
    usage_error(&refused, "kube-system");
    assert!(
        stderr(&refused).contains("kubeconfig context sys"),
        "{}",
        stderr(&refused)
    );
    // The same through $KUBECONFIG, as kubectl reads it; `-v` says where it came from.
    let inventory = inventory(dir.path());
    let out = command()
        .args([
            "plan",
            "pods",
            "--inventory",
            inventory.to_str().unwrap(),
            "-o",
            "json",
            "-v",
        ])
        .args(["--now", "2026-11-29T12:00:00Z"])
        .env("KUBECONFIG", config)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(doc["config"]["namespace"], "work");
    assert!(
        stderr(&out).contains("kubeconfig context team"),
        "{}",
        stderr(&out)
    );
    // RUST_LOG naming a library adds its lines; gc's own stay.
    let out = command()
        .args(["plan", "pods", "--inventory", inventory.to_str().unwrap()])
        .args(["--now", "2026-11-29T12:00:00Z"])
        .env("KUBECONFIG", config)
        .env("RUST_LOG", "kube=debug")
        .output()
        .unwrap();
    ok(&out);
    assert!(
        stderr(&out).contains("kubeconfig context team"),
        "{}",
        stderr(&out)
    );
    // The help says where the default comes from, and what it is now.
    for words in [&["plan", "pods"][..], &["apply"], &["run", "pods"]] {
        let out = command()
            .args(words)
            .arg("--help")
            .env("KUBECONFIG", config)
            .output()
            .unwrap();
        let help = ok(&out);
        assert!(
            help.contains("Now: `work`, from kubeconfig context team."),
            "{words:?}: {help}"
        );
    }
}

#[test]
fn the_final_error_is_written_in_the_log_format_whatever_the_level() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |extra: &[&str], rust_log: Option<&str>| {
        let mut c = command();
        c.args(extra).args(["plan", "pods", "-n", "kube-system"]);
        c.env("GC_STATE_DIR", dir.path())
            .env_remove("GC_LOG_FORMAT");
        match rust_log {
            Some(spec) => c.env("RUST_LOG", spec),
            None => c.env_remove("RUST_LOG"),
        };
        let out = c.output().unwrap();
        usage_error(&out, "kube-system");
        stderr(&out)
    };
    // JSON logs: every line an object, the last the error.
    let json = refused(&["--log-format", "json"], None);
    let lines: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(last["level"], "ERROR", "{json}");
    assert_eq!(last["target"], "gc_cli", "{json}");
    assert!(last["timestamp"].as_str().unwrap().ends_with('Z'), "{json}");
    let message = last["message"].as_str().unwrap();
    assert!(message.contains("system namespace"), "{json}");
    // Text, even with every log line turned off.
    for (extra, rust_log) in [(&[][..], Some("off")), (&["-q"][..], None)] {
        let text = refused(extra, rust_log);
        assert!(text.starts_with("gc-cli: error: "), "{text}");
        assert!(text.contains("system namespace"), "{text}");
    }
    let off = refused(&["--log-format", "json"], Some("off"));
    assert_eq!(off.lines().count(), 1, "{off}");
}

#[test]
fn bash_completes_commands_and_flags_from_the_generated_script() {
    let script = ok(&gc_cli(&["completion", "bash"]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc-cli.bash");
    std::fs::write(&path, script).unwrap();
    // What bash offers for `gc-cli <words...>`, as programmable completion computes it.
    let complete = |words: &[&str]| {
        let line = format!("gc-cli {}", words.join(" "));
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let array = format!("gc-cli {}", quoted.join(" "));
        let program = format!(
            "source {}; COMP_WORDS=({array}); COMP_CWORD={}; COMP_LINE='{line}'; \
             COMP_POINT=${{#COMP_LINE}}; f=$(complete -p gc-cli | sed -E 's/.* -F ([^ ]+) .*/\\1/'); \
             \"$f\" gc-cli \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display(),
            words.len()
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "-c", &program])
            .output()
            .unwrap();
        ok(&out)
    };
    let top = complete(&["pl"]);
    assert_eq!(top.lines().collect::<Vec<_>>(), ["plan"], "{top}");
    let sub = complete(&["run", ""]);
    assert!(
        sub.lines().any(|l| l == "pods") && sub.lines().any(|l| l == "sessions"),
        "{sub}"
    );
    let flags = complete(&["plan", "pods", "--inv"]);
    assert_eq!(
        flags.lines().collect::<Vec<_>>(),
        ["--inventory"],
        "{flags}"
    );
    let forms = complete(&["plan", "pods", "-o", ""]);
    for form in ["table", "wide", "json", "yaml", "name", "kestra"] {
        assert!(forms.lines().any(|l| l == form), "{form}: {forms}");
    }
    // `run pods` prints a report: no `kestra` offered, in completions or in its help.
    let forms = complete(&["run", "pods", "-o", ""]);
    assert!(forms.lines().any(|l| l == "json"), "{forms}");
    assert!(!forms.contains("kestra"), "{forms}");
    let help = ok(&gc_cli(&["run", "pods", "--help"]));
    assert!(!help.contains("kestra"), "{help}");
    for shell in ["zsh", "fish"] {
        let script = ok(&gc_cli(&["completions", shell]));
        assert!(script.contains("inventory"), "{shell}");
    }
    usage_error(&gc_cli(&["completions", "tcsh"]), "tcsh");
}

#[test]
fn man_pages_are_generated_for_every_command() {
    let page = ok(&gc_cli(&["man"]));
    assert!(
        page.starts_with(".ie") || page.contains(".TH gc-cli"),
        "{page}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    ok(&gc_cli(&["man", "--out-dir", out.to_str().unwrap()]));
    for page in [
        "gc-cli.1",
        "gc-cli-plan-pods.1",
        "gc-cli-run-sessions.1",
        "gc-cli-apply.1",
    ] {
        let text = std::fs::read_to_string(out.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
    let apply = std::fs::read_to_string(out.join("gc-cli-apply.1")).unwrap();
    assert!(apply.contains("dry\\-run"), "{apply}");
}

#[tokio::test]
async fn a_live_run_prints_names_and_acts_only_with_dry_run_none() -> Result {
    let (bed, ns) = namespace("cli-forms").await?;
    target(&ns, "victim").await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let dir = tempfile::tempdir()?;
    let store = sqlite(dir.path(), "s.db");
    let archives = dir.path().join("archives");
    let live = |dry: &str, output: &str| {
        command()
            .args(run_pods(ns.name()))
            .args(["--kubeconfig", &kubeconfig])
            .args([
                "--store",
                &store,
                "--archive-dir",
                archives.to_str().unwrap(),
            ])
            .args(["--auto-remediate", dry, "-o", output])
            .output()
            .unwrap()
    };
    // A server-side dry run names what it would collect and changes nothing.
    let out = live("--dry-run=server", "name");
    assert_eq!(ok(&out), "pod/victim\n");
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    assert!(pods.get_opt("victim").await?.is_some(), "a dry run deleted");
    // `none` acts; YAML carries the report.
    let out = live("--dry-run=none", "yaml");
    let report: Value = serde_norway::from_str(&ok(&out))?;
    assert_eq!(report["dryRun"], false, "{report}");
    assert_eq!(report["results"][0]["name"], "victim", "{report}");
    assert!(pods.get_opt("victim").await?.is_none(), "not collected");
    Ok(())
}

/// `completions` (the older name) prints the same script as `completion`, as kubectl names it.
#[test]
fn completions_is_an_alias_of_completion() {
    for shell in ["bash", "zsh"] {
        assert_eq!(
            ok(&gc_cli(&["completions", shell])),
            ok(&gc_cli(&["completion", shell]))
        );
    }
}

/// `version` as `kubectl version --client`: two lines, or the document as JSON or YAML; no other
/// form.
#[test]
fn version_prints_the_release_and_platform() {
    let release = env!("CARGO_PKG_VERSION");
    let platform = format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH);
    assert_eq!(
        ok(&gc_cli(&["version"])),
        format!("Version: {release}\nPlatform: {platform}\n")
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&gc_cli(&["version", "-o", "json"]))).expect("JSON");
    assert_eq!(
        json,
        serde_json::json!({"version": release, "platform": platform})
    );
    let yaml = ok(&gc_cli(&["version", "-o", "yaml"]));
    assert_eq!(yaml, format!("version: {release}\nplatform: {platform}\n"));
    assert_eq!(ok(&gc_cli(&["--version"])), format!("gc-cli {release}\n"));
    usage_error(&gc_cli(&["version", "-o", "name"]), "name");
}

/// A reader that stops early (`gc-cli ... | head`) ends the command quietly: no error message
/// about the closed pipe, as kubectl.
#[test]
fn a_closed_pipe_is_not_reported() {
    use std::process::Stdio;
    let inventory = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/pods.json");
    for args in [
        &["man"][..],
        &[
            "plan",
            "pods",
            "--inventory",
            inventory,
            "-n",
            "batch",
            "-o",
            "json",
        ],
        &[
            "plan",
            "pods",
            "--inventory",
            inventory,
            "-n",
            "batch",
            "-o",
            "yaml",
        ],
        &[
            "plan",
            "pods",
            "--inventory",
            inventory,
            "-n",
            "batch",
            "-o",
            "wide",
        ],
    ] {
        let mut child = command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the first line.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// Durations as people write them on every duration flag, the older names and their bare
/// numbers (seconds, hours, days) still read as before; a value that is neither, or not a whole
/// number of the flag's unit, is a usage error that names the flag and says what to write.
#[test]
fn durations_read_as_people_write_them() {
    let inventory = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/pods.json");
    let plan = |flags: &[&str]| {
        let base = [
            "plan",
            "pods",
            "--inventory",
            inventory,
            "-n",
            "batch",
            "-o",
            "json",
        ];
        let plan: Value = serde_json::from_str(&ok(&gc_cli(&[&base[..], flags].concat()))).unwrap();
        plan["config"]["retentionSeconds"].clone()
    };
    let day = plan(&["--retention", "1d"]);
    assert_eq!(day, 86_400);
    assert_eq!(plan(&["--retention-seconds", "86400"]), day);
    assert_eq!(plan(&["--retention-seconds", "24h"]), day);
    assert_eq!(plan(&["--retention", "86400"]), day);
    assert_eq!(plan(&[]), day, "the default is a day");
    assert_ne!(plan(&["--retention", "1s"]), day);
    for (args, says) in [
        (
            &[
                "plan",
                "pods",
                "--inventory",
                inventory,
                "--retention",
                "soon",
            ][..],
            "invalid value 'soon' for '--retention <DURATION>': \"soon\" is not a duration",
        ),
        (
            &["plan", "sessions", "-n", "x", "--grace", "90m"],
            "invalid value '90m' for '--grace <DURATION>': 90m is not a whole number of hours",
        ),
        (
            &["run", "sessions", "-n", "x", "--retain-volume-days", "36h"],
            "36h is not a whole number of days",
        ),
        (
            &[
                "restore",
                "sessions",
                "-n",
                "x",
                "--session",
                "s",
                "--bind-wait",
                "2h",
            ],
            "2h is outside 0s..=3600s",
        ),
        (
            &["run", "pods", "-n", "x", "--lock-lease", "1s"],
            "1s is outside 5s..=300s",
        ),
    ] {
        usage_error(&gc_cli(args), says);
    }
}

/// `--concurrency` takes 1 to 64 objects at once; anything else is a usage error naming the
/// flag, before anything is read or connected.
#[test]
fn concurrency_is_one_to_sixty_four() {
    for collector in ["pods", "sessions"] {
        for bad in ["0", "65", "many", "-1"] {
            let out = gc_cli(&["run", collector, "-n", "x", "--concurrency", bad]);
            usage_error(&out, "--concurrency <CONCURRENCY>");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(said.contains(&format!("'{bad}'")), "{said}");
        }
    }
}
