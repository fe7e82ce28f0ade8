//! `gc-cli plan pods` end to end: the fixture corpus in `tests/data/plan/`, snapshotted, and each
//! case checked line for line against the reference flow's own plan step.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;

use common::gc_cli;

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/reference/flow_plan.py"
);

struct Case {
    dir: tempfile::TempDir,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn arg_value(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// Writes a case's inventory and ledger to files and derives the flags and the reference's env.
fn load(path: &Path) -> Case {
    let body: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.json");
    let ledger = dir.path().join("state.json");
    std::fs::write(&inventory, serde_json::to_vec(&body["inventory"]).unwrap()).unwrap();
    let state = body
        .get("ledger")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    std::fs::write(&ledger, serde_json::to_vec(&state).unwrap()).unwrap();
    let mut args = vec![
        "plan".into(),
        "pods".into(),
        "--inventory".into(),
        path_str(&inventory),
    ];
    args.extend(["--ledger".into(), path_str(&ledger)]);
    let mut env = vec![
        ("NAMESPACE".to_owned(), "default".to_owned()),
        ("RETENTION".to_owned(), "86400".to_owned()),
        ("MAX_PODS".to_owned(), "5".to_owned()),
        ("MAX_INVENTORY".to_owned(), "1000".to_owned()),
        ("MAX_BYTES".to_owned(), "262144".to_owned()),
    ];
    for (k, v) in body["args"].as_object().unwrap() {
        let v = arg_value(v);
        args.push(format!("--{}", k.replace('_', "-")));
        args.push(v.clone());
        let key = match k.as_str() {
            "namespace" => "NAMESPACE",
            "retention_seconds" => "RETENTION",
            "max_pods" => "MAX_PODS",
            "max_inventory" => "MAX_INVENTORY",
            "max_archive_bytes" => "MAX_BYTES",
            "now" => {
                let t =
                    time::OffsetDateTime::parse(&v, &time::format_description::well_known::Rfc3339)
                        .unwrap();
                env.push(("NOW".into(), format!("{}", t.unix_timestamp_nanos() / 1000)));
                continue;
            }
            other => panic!("unknown arg {other}"),
        };
        env.retain(|(k, _)| k != key);
        env.push((key.into(), v));
    }
    Case { dir, args, env }
}

/// The case `name` of the corpus in `tests/data/plan/`.
fn corpus_case(name: &str) -> Case {
    load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/plan")
            .join(name),
    )
}

fn path_str(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

/// `args` with `flag` set to `value`, replacing a value already given.
fn set_arg(args: &[String], flag: &str, value: &str) -> Vec<String> {
    let mut a = args.to_vec();
    match a.iter().position(|x| x == flag) {
        Some(i) => a[i + 1] = value.into(),
        None => a.extend([flag.into(), value.into()]),
    }
    a
}

fn with_format(args: &[String], format: &str) -> Vec<String> {
    let mut a = args.to_vec();
    a.extend(["--format".into(), format.into()]);
    a
}

/// The outcome as a snapshot shows it: exit code and stdout, or the error.
fn outcome(out: &Output, case: &Case) -> String {
    let dir = path_str(case.dir.path());
    let text = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    format!(
        "exit {}\n{}",
        out.status.code().unwrap_or(-1),
        text.replace(&dir, "[dir]")
    )
}

/// Python 3 for the reference flow; in CI its absence is a failure, elsewhere a skip.
fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("CI").is_some() {
        panic!("python3 is required in CI for the reference-flow parity checks");
    }
    if !ok {
        eprintln!("SKIPPING reference-flow parity: python3 not found");
    }
    ok.then_some("python3")
}

/// Runs the reference flow's plan step on the case; `Some(line)` on success, `None` on failure.
fn reference(case: &Case, python: &str) -> Option<String> {
    reference_in(case.dir.path(), &case.env, python)
}

/// The reference flow's plan step on `dir/inventory.json` and `dir/state.json` with `env`
/// (`NOW` in microseconds).
fn reference_in(dir: &Path, env: &[(String, String)], python: &str) -> Option<String> {
    let mut cmd = Command::new(python);
    cmd.arg(REFERENCE)
        .arg(dir.join("inventory.json"))
        .arg(dir.join("state.json"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    // The reference wants float seconds, as `time.time()` returns.
    if let Some((_, us)) = env.iter().find(|(k, _)| k == "NOW") {
        let us: i128 = us.parse().unwrap();
        #[allow(clippy::cast_precision_loss)]
        cmd.env("NOW", format!("{:?}", us as f64 / 1e6));
    }
    let out = cmd.output().unwrap();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim_end().to_owned())
}

#[test]
fn corpus() {
    let python = python();
    insta::glob!("data/plan/*.json", |path| {
        let case = load(path);
        let kestra = gc_cli(&with_format(&case.args, "kestra"));
        let json = gc_cli(&with_format(&case.args, "json"));
        let table = gc_cli(&with_format(&case.args, "table"));
        insta::assert_snapshot!("table", outcome(&table, &case));
        insta::assert_snapshot!("json", outcome(&json, &case));
        if let Some(py) = python {
            let ours = kestra.status.success().then(|| {
                String::from_utf8(kestra.stdout.clone())
                    .unwrap()
                    .trim_end()
                    .to_owned()
            });
            assert_eq!(
                ours,
                reference(&case, py),
                "{}: differs from the reference flow",
                path.display()
            );
        }
        if !kestra.status.success() {
            assert_eq!(
                kestra.status.code(),
                Some(3),
                "{}: a plan failure exits 3",
                path.display()
            );
        }
    });
}

/// Seconds since the epoch of an RFC 3339 time.
fn epoch(text: &str) -> f64 {
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{text:?} is not RFC 3339: {e}"));
    t.unix_timestamp() as f64 + f64::from(t.nanosecond()) / 1e9
}

#[test]
fn json_and_yaml_show_times_as_rfc3339_and_kestra_keeps_the_numbers() {
    let case = corpus_case("anchor-bases.json");
    let stdout = |format| {
        let out = gc_cli(&with_format(&case.args, format));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let json: Value = serde_json::from_str(&stdout("json")).unwrap();
    let yaml: Value = serde_norway::from_str(&stdout("yaml")).unwrap();
    assert_eq!(json, yaml);
    assert_eq!(json["now"], "2026-11-29T12:00:00Z");
    // A fraction of a second is kept: the flow's anchors have them.
    assert_eq!(json["decisions"][0]["anchor"], "2026-11-27T11:00:00.25Z");
    assert_eq!(json["decisions"][3]["until"], "2026-11-30T12:00:00Z");
    // The Kestra line is the flow's: the same instants, as numbers.
    let line = stdout("kestra");
    let kestra: Value = serde_json::from_str(line.trim().trim_matches(':')).unwrap();
    let targets = kestra["outputs"]["targets"].as_array().unwrap();
    assert_eq!(targets.len(), json["targets"].as_array().unwrap().len());
    for (number, shown) in targets.iter().zip(json["targets"].as_array().unwrap()) {
        for key in ["first", "end"] {
            let shown = shown[key].as_str().unwrap();
            assert_eq!(number[key].as_f64().unwrap(), epoch(shown), "{key} {shown}");
        }
    }
    let state: Value = serde_json::from_str(kestra["outputs"]["state"].as_str().unwrap()).unwrap();
    for (uid, entry) in state.as_object().unwrap() {
        let shown = json["ledger"][uid]["first"].as_str().unwrap();
        assert_eq!(entry["first"].as_f64().unwrap(), epoch(shown), "{uid}");
    }
}

#[test]
fn ledger_out_is_the_flow_state() {
    let case = corpus_case("ledger-carry-and-prune.json");
    let out_path = case.dir.path().join("ledger-out.json");
    let mut args = with_format(&case.args, "kestra");
    args.extend(["--ledger-out".into(), path_str(&out_path)]);
    let out = gc_cli(&args);
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let outputs: Value = serde_json::from_str(line.trim().trim_matches(':')).unwrap();
    let written = std::fs::read_to_string(&out_path).unwrap();
    let state = outputs["outputs"]["state"].as_str().unwrap();
    // The file is the flow's state led by the entry naming its cluster and namespace.
    let scope = r#"{"gc:scope": {"cluster": "primary", "namespace": "work"}"#;
    let entries = state.strip_prefix('{').unwrap();
    let sep = if entries == "}" { "" } else { ", " };
    assert_eq!(written, format!("{scope}{sep}{entries}"));
    // The written ledger feeds the next plan unchanged: an hour later, first observations stay.
    let next = set_arg(&case.args, "--ledger", &path_str(&out_path));
    let next = set_arg(&next, "--now", "2026-11-29T13:00:00Z");
    let again = gc_cli(&with_format(&next, "kestra"));
    let line = String::from_utf8(again.stdout).unwrap();
    let outputs: Value = serde_json::from_str(line.trim().trim_matches(':')).unwrap();
    assert_eq!(outputs["outputs"]["state"].as_str().unwrap(), state);
    // Another cluster's or namespace's plan refuses it (exit 3), naming both.
    let elsewhere = set_arg(&next, "--cluster-id", "other");
    let out = gc_cli(&elsewhere);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "this is the ledger of cluster primary namespace work, not of cluster other \
             namespace work: refused"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_inputs_name_the_input_and_exit_2() {
    let case = corpus_case("eligibility-clauses.json");
    for (flag, value, expect) in [
        (
            "--namespace",
            "kube-system",
            "invalid namespace \"kube-system\": system namespace refused",
        ),
        (
            "--max-pods",
            "51",
            "invalid max_pods \"51\": must be between 1 and 50",
        ),
        (
            "--retention-seconds",
            "-1",
            "invalid retention_seconds \"-1\"",
        ),
        ("--cluster-id", "Prod", "invalid cluster_id \"Prod\""),
        (
            "--max-archive-bytes",
            "100",
            "invalid max_archive_bytes \"100\"",
        ),
        ("--now", "tomorrow", "invalid --now \"tomorrow\""),
    ] {
        let out = gc_cli(&set_arg(&case.args, flag, value));
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{flag} {value}: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = gc_cli::<String>(&[
        "plan".into(),
        "pods".into(),
        "--inventory".into(),
        "/nonexistent/inv.json".into(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot read inventory /nonexistent/inv.json")
    );
}

#[test]
fn failed_plan_writes_no_ledger() {
    let case = corpus_case("bad-anchor-in-future.json");
    let out_path = case.dir.path().join("ledger-out.json");
    let mut args = case.args.clone();
    args.extend(["--ledger-out".into(), path_str(&out_path)]);
    let out = gc_cli(&args);
    assert_eq!(out.status.code(), Some(3));
    assert!(!out_path.exists());
}

/// Random inventories (every clause, odd types, bad data) planned by gc-cli and by the reference
/// flow: the same output line, or both fail.
#[test]
fn random_inventories_match_the_reference_flow() {
    const CASES: usize = 200;
    let Some(python) = python() else { return };
    let generator = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/reference/random_inventory.py"
    );
    let root = tempfile::tempdir().unwrap();
    let status = Command::new(python)
        .arg(generator)
        .arg("0")
        .arg(CASES.to_string())
        .arg(root.path())
        .status()
        .unwrap();
    assert!(status.success());
    let outcomes: Vec<Option<String>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let root = root.path();
                s.spawn(move || {
                    (w..CASES)
                        .step_by(2)
                        .map(|seed| (seed, random_case(root, seed, python)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<_> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        all.sort_by_key(|(seed, _)| *seed);
        all.into_iter().map(|(_, o)| o).collect()
    });
    let failed = outcomes.iter().filter(|o| o.is_none()).count();
    let with_targets = outcomes
        .iter()
        .flatten()
        .filter(|l| !l.contains("\"target_count\":0"))
        .count();
    // The corpus must exercise both outcomes, or the comparison proves little.
    assert!(
        with_targets >= 40 && failed >= 20 && CASES - failed >= 100,
        "{with_targets} with targets, {failed} failed"
    );
}

/// Plans one generated case both ways and returns the shared outcome.
fn random_case(root: &Path, seed: usize, python: &str) -> Option<String> {
    let dir = root.join(seed.to_string());
    let args: Value =
        serde_json::from_slice(&std::fs::read(dir.join("args.json")).unwrap()).unwrap();
    let mut cli = vec![
        "plan".into(),
        "pods".into(),
        "--namespace".into(),
        "work".into(),
    ];
    cli.extend(["--inventory".into(), path_str(&dir.join("inventory.json"))]);
    cli.extend(["--ledger".into(), path_str(&dir.join("state.json"))]);
    cli.extend([
        "--now".into(),
        "2026-11-29T12:00:00Z".into(),
        "--format".into(),
        "kestra".into(),
    ]);
    let mut env = vec![
        ("NAMESPACE".to_owned(), "work".to_owned()),
        ("MAX_BYTES".into(), "262144".into()),
    ];
    for (k, v) in args.as_object().unwrap() {
        cli.extend([format!("--{}", k.replace('_', "-")), v.to_string()]);
        let key = match k.as_str() {
            "retention_seconds" => "RETENTION",
            "max_pods" => "MAX_PODS",
            _ => "MAX_INVENTORY",
        };
        env.push((key.into(), v.to_string()));
    }
    env.push(("NOW".into(), "1795953600000000".into()));
    let ours = gc_cli(&cli);
    let ours_line = ours.status.success().then(|| {
        String::from_utf8(ours.stdout.clone())
            .unwrap()
            .trim_end()
            .to_owned()
    });
    let theirs = reference_in(&dir, &env, python);
    assert_eq!(
        ours_line,
        theirs,
        "seed {seed}: differs from the reference flow (ours: {})",
        String::from_utf8_lossy(&ours.stderr)
    );
    ours_line
}
