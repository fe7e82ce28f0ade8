//! One binary run per exit code, each from an error of the type that decides it: 2 for invalid
//! input, 3 for a plan refused on its data, 1 for the cluster or the store.

use std::path::Path;
use std::process::Output;

use gc_testbed::{TestBed, TestDatabase};

mod common;

use common::{Result, command};

/// Runs `gc-cli` with its state (the default store) in `state`.
fn gc_cli(state: &Path, args: &[&str]) -> Output {
    command()
        .args(args)
        .env("GC_STATE_DIR", state)
        .env_remove("GC_STORE")
        .env_remove("GC_SEAL_KEY")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

/// Asserts the exit code, and that the message says `says`.
fn check(out: &Output, code: i32, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
}

const INVENTORY: &str = r#"{"apiVersion": "v1", "kind": "List", "items": []}"#;

#[test]
fn invalid_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("pods.json");
    std::fs::write(&inventory, INVENTORY).unwrap();
    let inventory = inventory.to_str().unwrap();
    // A clap error.
    let out = gc_cli(dir.path(), &["plan", "pods", "--max-pods", "many"]);
    check(&out, 2, "--max-pods");
    // gc_core::input::InputError.
    let out = gc_cli(
        dir.path(),
        &["plan", "pods", "--inventory", inventory, "--max-pods", "0"],
    );
    check(&out, 2, "invalid max_pods");
    // An input file that cannot be read.
    let missing = dir.path().join("missing.json");
    let out = gc_cli(
        dir.path(),
        &["plan", "pods", "--inventory", missing.to_str().unwrap()],
    );
    check(&out, 2, "cannot read inventory");
    // Another controller's finalizer as the pin: recovery would strip it from every Pod that
    // carries it. Refused before any cluster is reached (there is none here).
    let out = gc_cli(
        dir.path(),
        &[
            "run",
            "pods",
            "-n",
            "jobs",
            "--pin-finalizer",
            "batch.kubernetes.io/job-tracking",
            "--dry-run=none",
            "--auto-remediate",
        ],
    );
    check(
        &out,
        2,
        r#"invalid pin_finalizer "batch.kubernetes.io/job-tracking""#,
    );
    let out = gc_cli(
        dir.path(),
        &[
            "plan",
            "pods",
            "--inventory",
            inventory,
            "--pin-finalizer",
            "k8s.io/collector",
        ],
    );
    check(&out, 2, "invalid pin_finalizer");
    // A flag the command line checks itself.
    let out = gc_cli(dir.path(), &["run", "pods", "--dry-run", "false"]);
    check(&out, 2, "--dry-run=none needs --auto-remediate");
    // A plan of the cluster for another instant writes no ledger file.
    let out = gc_cli(
        dir.path(),
        &[
            "plan",
            "pods",
            "--now",
            "2020-01-01T00:00:00Z",
            "--ledger-out",
            "l.json",
        ],
    );
    check(&out, 2, "--ledger-out with --now");
    // A run acts now: it takes no other instant.
    let out = gc_cli(
        dir.path(),
        &["run", "pods", "--now", "2020-01-01T00:00:00Z"],
    );
    check(&out, 2, "--now is for plan pods");
    // A live run judged at an instant to come would shorten the grace period.
    let out = gc_cli(
        dir.path(),
        &[
            "run",
            "sessions",
            "--dry-run=none",
            "--now",
            "2100-01-01T00:00:00Z",
            "--database-url",
            "postgres://gc@127.0.0.1:1/sessions",
        ],
    );
    check(&out, 2, "--now (2100-01-01T00:00:00Z) is in the future");
    // `serve` ends at once on flags no run could pass, rather than failing every round.
    let serve = ["serve", "--listen", "127.0.0.1:0", "--runs", "1"];
    for (collector, says) in [
        (
            &["pods", "--dry-run=none"][..],
            "--dry-run=none needs --auto-remediate",
        ),
        (&["sessions", "--grace-hours", "-1"], "invalid grace_hours"),
        (
            &["sessions", "-A", "--grace-hours", "-1"],
            "invalid grace_hours",
        ),
        (
            &[
                "pods",
                "--pin-finalizer",
                "batch.kubernetes.io/job-tracking",
            ],
            "invalid pin_finalizer",
        ),
    ] {
        check(
            &gc_cli(dir.path(), &[&serve[..], collector].concat()),
            2,
            says,
        );
    }
    // A metrics prefix Prometheus would refuse, before anything runs or is written.
    let file = dir.path().join("gc.prom");
    for prefix in ["bad-prefix", "1x", "", "a{b"] {
        let out = gc_cli(
            dir.path(),
            &[
                "run",
                "pods",
                "--inventory",
                inventory,
                "--metrics-file",
                file.to_str().unwrap(),
                "--metrics-prefix",
                prefix,
            ],
        );
        check(&out, 2, "--metrics-prefix");
        assert!(!file.exists(), "{prefix:?}");
    }
}

#[test]
fn a_plan_refused_on_its_data_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("pods.json");
    std::fs::write(&inventory, "{\"items\": [").unwrap();
    let out = gc_cli(
        dir.path(),
        &["plan", "pods", "--inventory", inventory.to_str().unwrap()],
    );
    check(&out, 3, "malformed inventory");
    let ledger = dir.path().join("ledger.json");
    std::fs::write(&ledger, "[]").unwrap();
    std::fs::write(dir.path().join("pods.json"), INVENTORY).unwrap();
    let out = gc_cli(
        dir.path(),
        &[
            "plan",
            "pods",
            "--inventory",
            inventory.to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
        ],
    );
    check(&out, 3, "malformed observation ledger");
}

#[test]
fn an_unreachable_cluster_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = gc_cli(
        dir.path(),
        &["plan", "pods", "--api-url", "https://127.0.0.1:1"],
    );
    check(&out, 1, "cannot connect to the cluster");
    // `serve --runs N` (a job) exits as its runs went: 1 when any failed.
    let serve = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--runs",
        "2",
        "--interval-seconds",
        "0",
    ];
    let pods = ["pods", "--api-url", "https://127.0.0.1:1"];
    let out = gc_cli(dir.path(), &[&serve[..], &pods].concat());
    check(&out, 1, "2 of 2 run(s) failed");
}

/// The store fails after it was opened: its ledger table is gone. This exited 3, as if the
/// ledger's data were bad; a store failure exits 1.
#[tokio::test]
async fn a_store_failure_while_loading_the_ledger_exits_1() -> Result {
    let Some(db) = TestDatabase::fresh("exit-ledger").await? else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    let dir = tempfile::tempdir()?;
    let key = ["--cluster-id", "primary", "-n", "exit-codes"];
    // Opening the store creates its tables.
    let export = gc_cli(
        dir.path(),
        &[&["ledger", "export", "--store", db.url()][..], &key[..]].concat(),
    );
    assert!(export.status.success(), "{export:?}");
    let pool = db.pool().await?;
    sqlx::raw_sql("DROP TABLE gc_ledgers")
        .execute(&pool)
        .await?;
    pool.close().await;
    let out = gc_cli(
        dir.path(),
        &[
            "plan",
            "pods",
            "--kubeconfig",
            bed.kubeconfig_path().to_str().unwrap(),
            "--store",
            db.url(),
            "-n",
            "exit-codes",
        ],
    );
    check(&out, 1, "cannot load the ledger");
    Ok(())
}
