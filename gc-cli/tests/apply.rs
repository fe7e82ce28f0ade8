//! `gc-cli apply` end to end on a real API server: a reviewed plan of twenty Failed Pods is
//! archived and removed exactly, every archive matches its receipt under `sha256sum`, no pin is
//! left, decoys are untouched; dry run changes nothing; altered or misdirected plans and a held
//! run lock are refused.

use std::process::Command;

use gc_core::ports::{Lock, Store as _};
use gc_testbed::{FailedPod, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::Value;

mod common;

use common::{
    COLLECT, PIN, Result, gc_cli, namespace, ok, old, run_pods, snapshot, sqlite, target,
};

async fn populate(ns: &TestNamespace) -> Result {
    let pods = ns.api::<Pod>();
    let old = old();
    for i in 0..20 {
        let mut p = FailedPod::new(&format!("target-{i:02}"))
            .label(COLLECT, "true")
            .finished_at(old);
        if i % 3 == 1 {
            p = p.terminated_container("sidecar", 137);
        }
        if i % 5 == 2 {
            p = p.annotation("note", "a diagnostic worth keeping: é");
        }
        p.create(&pods).await?;
    }
    FailedPod::new("decoy-unlabelled")
        .finished_at(old)
        .create(&pods)
        .await?;
    FailedPod::new("decoy-recent")
        .label(COLLECT, "true")
        .create(&pods)
        .await?;
    FailedPod::new("decoy-running")
        .label(COLLECT, "true")
        .running_container("main")
        .create(&pods)
        .await?;
    FailedPod::new("decoy-foreign")
        .label(COLLECT, "true")
        .finalizer("example.com/keep")
        .finished_at(old)
        .create(&pods)
        .await?;
    let owner = OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: "j".into(),
        uid: "1234".into(),
        ..Default::default()
    };
    FailedPod::new("decoy-owned")
        .label(COLLECT, "true")
        .owner_reference(owner)
        .finished_at(old)
        .create(&pods)
        .await?;
    Ok(())
}

#[tokio::test]
async fn apply_collects_exactly_the_reviewed_targets() -> Result {
    let (bed, ns) = namespace("apply").await?;
    populate(&ns).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let db = dir.path().join("gc.sqlite3");
    let store = format!("sqlite:{}", db.display());
    let archives = dir.path().join("archives");
    let plan = dir.path().join("plan.json");
    // `gc-cli` with `args`, then the connection and the store.
    let connected = |args: &[&[&str]]| {
        let conn = ["--kubeconfig", &kubeconfig, "--store", &store];
        gc_cli(&[args.concat(), conn.to_vec()].concat())
    };
    let policy = [
        "-n",
        ns.name(),
        "--retention-seconds",
        "3600",
        "--max-pods",
        "50",
    ];
    let apply_to = |plan: &std::path::Path, namespace: &[&str], extra: &[&str]| {
        let head = ["apply", plan.to_str().unwrap(), "--cluster-id", "primary"];
        connected(&[&head, namespace, extra])
    };
    ok(&connected(&[
        &["plan", "pods"],
        &policy,
        &["--out", plan.to_str().unwrap()],
    ]));
    let apply = |extra: &[&str]| {
        let archive = [
            "--archive-dir",
            archives.to_str().unwrap(),
            "--format",
            "json",
        ];
        apply_to(&plan, &policy, &[&archive[..], extra].concat())
    };
    let before = snapshot(&ns).await?;

    // Dry run: every check and server-side dry-run write, and nothing changes.
    let metrics = dir.path().join("gc.prom");
    let metrics_file = ["--metrics-file", metrics.to_str().unwrap()];
    let report: Value =
        serde_json::from_str(&ok(&apply(&[&["--dry-run"][..], &metrics_file].concat())))?;
    let would = report["results"].as_array().unwrap();
    assert_eq!(would.len(), 20);
    // The run's metrics count the reviewed targets it looked at.
    let text = std::fs::read_to_string(&metrics)?;
    for count in ["scanned", "eligible"] {
        let family = format!("gc_last_run_objects_{count}{{");
        let line = text.lines().find(|l| l.starts_with(&family));
        assert!(line.is_some_and(|l| l.ends_with(" 20")), "{count}: {text}");
    }
    assert!(
        would.iter().all(|r| r["outcome"] == "wouldCollect"),
        "{report:#}"
    );
    assert_eq!(snapshot(&ns).await?, before);
    // The dry run's one write is the sink probe: no archive.
    assert!(!archives.join("primary").exists());

    // Tampered, misdirected and held-lock applies are refused and change nothing.
    let text = std::fs::read_to_string(&plan)?;
    let tampered = dir.path().join("tampered.json");
    std::fs::write(&tampered, text.replacen("target-00", "decoy-owned", 1))?;
    let out = apply_to(&tampered, &policy, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("altered"));
    let out = apply_to(&plan, &["-n", "default"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apply's namespaces: default"), "{stderr}");
    assert!(
        stderr.contains(&format!("namespace {:?}", ns.name())),
        "{stderr}"
    );
    let other = gc_k8s::KubeCluster::new(ns.client().clone());
    assert!(
        other
            .try_acquire(ns.name(), "gc-pods", "another-run", 60)
            .await?
    );
    let out = apply(&["--lock-wait-seconds", "1"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another run holds lease"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    other.release(ns.name(), "gc-pods", "another-run").await?;
    assert_eq!(snapshot(&ns).await?, before);

    // The real apply.
    let report: Value = serde_json::from_str(&ok(&apply(&[])))?;
    let results = report["results"].as_array().unwrap();
    assert!(
        results.iter().all(|r| r["outcome"] == "collected"),
        "{report:#}"
    );
    let after = snapshot(&ns).await?;
    let names: Vec<&str> = after.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "decoy-foreign",
            "decoy-owned",
            "decoy-recent",
            "decoy-running",
            "decoy-unlabelled"
        ]
    );
    for (name, state) in &after {
        assert_eq!(Some(state), before.get(name), "{name} was touched");
        assert!(!state.2.iter().any(|f| f == PIN));
    }
    // Every archive verifies with sha256sum against its receipt.
    let store = gc_store::open(&format!("sqlite:{}", db.display())).await?;
    for (name, (uid, _, _)) in before.iter().filter(|(n, _)| n.starts_with("target-")) {
        let receipt = store.get_receipt("primary", uid).await?.expect("a receipt");
        let path = receipt.uri.strip_prefix("file://").unwrap();
        let sum = Command::new("sha256sum").arg(path).output()?;
        let sum = String::from_utf8(sum.stdout)?;
        assert_eq!(
            sum.split_whitespace().next(),
            Some(receipt.sha256.as_str()),
            "{name}"
        );
        let doc: Value = serde_json::from_slice(&std::fs::read(path)?)?;
        assert_eq!(doc["metadata"]["uid"], uid.as_str());
        assert_eq!(doc["status"]["phase"], "Failed");
    }
    // A second apply of the same plan finds nothing left to do.
    let report: Value = serde_json::from_str(&ok(&apply(&[])))?;
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "skipped"),
        "{report:#}"
    );
    // The table says so plainly, under its header; that is no failure (exit 0).
    let out = apply_to(
        &plan,
        &policy,
        &["--archive-dir", archives.to_str().unwrap()],
    );
    let table = ok(&out);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "UID", "RESULT", "DETAIL"],
        "{table}"
    );
    assert_eq!(lines.len(), 1 + 20 + 2, "{table}");
    assert!(
        lines[1..21]
            .iter()
            .all(|l| l.contains(" skipped ") && l.ends_with("at Reread: the Pod is gone")),
        "{table}"
    );
    assert_eq!(
        lines[22],
        "the plan was applied already: all 20 of its targets are gone (or were deleted since); \
         nothing to do",
    );
    Ok(())
}

#[tokio::test]
async fn run_is_a_dry_run_unless_asked_twice() -> Result {
    let (bed, ns) = namespace("run").await?;
    for i in 0..3 {
        target(&ns, &format!("target-{i}")).await?;
    }
    let dir = tempfile::tempdir()?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let store = sqlite(dir.path(), "gc.sqlite3");
    let archives = dir.path().join("archives");
    let base = [
        &run_pods(ns.name())[..],
        &["--kubeconfig", &kubeconfig, "--store", &store],
        &[
            "--archive-dir",
            archives.to_str().unwrap(),
            "--format",
            "json",
        ],
    ]
    .concat();
    let before = snapshot(&ns).await?;
    let report: Value = serde_json::from_str(&ok(&gc_cli(&base)))?;
    assert_eq!(report["dryRun"], true);
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "wouldCollect"),
        "{report:#}"
    );
    assert_eq!(snapshot(&ns).await?, before);
    let out = gc_cli(&[&base[..], &["--dry-run", "false"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--auto-remediate"));
    assert_eq!(snapshot(&ns).await?, before);
    let report: Value = serde_json::from_str(&ok(&gc_cli(
        &[&base[..], &["--dry-run", "false", "--auto-remediate"]].concat(),
    )))?;
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "collected"),
        "{report:#}"
    );
    assert!(snapshot(&ns).await?.is_empty());
    Ok(())
}
