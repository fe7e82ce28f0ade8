//! A new user's mistakes, each as a table row: the command, its exit code, and the line of
//! stderr the user reads, which names the input and what to give instead. None of them needs a
//! cluster or a database: each is caught before anything is connected (the cluster named is a
//! closed port, so a connection tried would fail otherwise).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;

use common::command;

/// The settings a run may inherit besides StreamSpace's `DB_*` ([`gc_store::DB_VARIABLES`]):
/// the session database URL, gc's store, the kubeconfig.
const INHERITED: [&str; 3] = ["GC_SESSION_DATABASE_URL", "GC_STORE", "KUBECONFIG"];

/// A cluster that is not there.
const NO_CLUSTER: [&str; 2] = ["--api-url", "https://127.0.0.1:1"];

/// What a session database refused before anything connects says.
const NO_DATABASE: &str = "gc-cli: error: no session database given: pass --database-url \
     postgres://USER:PASSWORD@HOST:5432/DATABASE, or set $GC_SESSION_DATABASE_URL, or \
     StreamSpace's DB_HOST, DB_PORT, DB_USER, DB_PASSWORD, DB_NAME, DB_SSL_MODE";

/// A row: the arguments, the environment, the exit code and the line of stderr (empty: none).
type Row<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, i32, &'a str);

/// `gc-cli args` with `env` and nothing inherited.
fn gc_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command();
    for name in INHERITED.iter().chain(&gc_store::DB_VARIABLES) {
        c.env_remove(name);
    }
    c.args(args).envs(env.iter().copied()).output().unwrap()
}

/// The corpus inventory of Pods in namespaces `work` and `elsewhere`, as JSON and as YAML.
fn inventories(dir: &Path) -> (String, String) {
    let case = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/plan/eligibility-clauses.json"
    );
    let body: Value = serde_json::from_slice(&std::fs::read(case).unwrap()).unwrap();
    let json = dir.join("pods.json");
    std::fs::write(&json, serde_json::to_vec(&body["inventory"]).unwrap()).unwrap();
    let yaml = dir.join("pods.yaml");
    std::fs::write(&yaml, "apiVersion: v1\nkind: List\nitems: []\n").unwrap();
    let text = |p: &Path| p.to_str().unwrap().to_owned();
    (text(&json), text(&yaml))
}

#[test]
fn each_mistake_gets_a_line_that_names_the_input_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (json, yaml) = inventories(dir.path());
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let now = "2026-11-29T12:00:00Z";
    let sessions = |verb: &'static str| [verb, "sessions", "-n", "streamspace"];
    let plan_pods = |file: &'static str| ["plan", "pods", "--inventory", file, "--now", now];
    let mysql = "gc-cli: error: unsupported URL scheme \"mysql\" in the session database URL \
                 (--database-url / $GC_SESSION_DATABASE_URL): the session database is \
                 PostgreSQL: give postgres://USER:PASSWORD@HOST:5432/DATABASE";
    let not_json = format!(
        "gc-cli: error: inventory {yaml}: malformed inventory: expected a JSON object, found \
         text that is not JSON (YAML?): the inventory must be JSON: kubectl get pods -o json"
    );
    let elsewhere = format!(
        "no Pod of inventory {json} is in namespace \"nosuchns\" (-n): all 21 are in other \
         namespaces (elsewhere, work): give one of those with -n"
    );
    let with_store = "gc-cli: error: --store with --inventory: a plan from a file records no \
                      ledger in a store: drop --store (or --inventory)";
    let serve = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--runs",
        "1",
        "sessions",
    ];
    let rows: Vec<Row> = vec![
        // No session database at all: no localhost default is tried.
        (
            [&sessions("plan")[..], &NO_CLUSTER].concat(),
            vec![],
            2,
            NO_DATABASE,
        ),
        (
            [&sessions("run")[..], &NO_CLUSTER].concat(),
            vec![("DB_HOST", "")],
            2,
            NO_DATABASE,
        ),
        ([&serve[..], &NO_CLUSTER].concat(), vec![], 2, NO_DATABASE),
        // The request API: plain HTTP on a loopback address only, and for sessions only; both
        // refused before any run starts.
        (
            [
                &["serve", "--api-listen", "0.0.0.0:9899"][..],
                &serve[1..],
                &NO_CLUSTER,
                &["--database-url", "postgres://gc@127.0.0.1:1/gc"],
            ]
            .concat(),
            vec![],
            2,
            "gc-cli: error: invalid --api-listen \"0.0.0.0:9899\": without --api-tls-cert and \
             --api-tls-key the request API is plain HTTP, served on a loopback address only \
             (127.0.0.1 or ::1)",
        ),
        // Its certificate: both files, each readable, named when it is not.
        (
            [
                &[
                    "serve",
                    "--api-listen",
                    "0.0.0.0:9899",
                    "--api-tls-cert",
                    "tls.crt",
                ][..],
                &serve[1..],
            ]
            .concat(),
            vec![],
            2,
            "error: the following required arguments were not provided:",
        ),
        (
            [
                &["serve", "--api-listen", "0.0.0.0:9899"][..],
                &[
                    "--api-tls-cert",
                    "/nonexistent/tls.crt",
                    "--api-tls-key",
                    "/nonexistent/tls.key",
                ],
                &serve[1..],
                &NO_CLUSTER,
                &["--database-url", "postgres://gc@127.0.0.1:1/gc"],
            ]
            .concat(),
            vec![],
            1,
            "gc-cli: error: cannot read the TLS certificate /nonexistent/tls.crt: No such file or \
             directory (os error 2)",
        ),
        (
            [
                &["serve", "--api-listen", "127.0.0.1:0"][..],
                &serve[1..5],
                &["pods", "-n", "x"],
                &NO_CLUSTER,
            ]
            .concat(),
            vec![],
            2,
            "gc-cli: error: --api-listen serves the session collector: `serve --api-listen ADDR \
             sessions`",
        ),
        // A bad DB_* value is named, in the session database's words.
        (
            [&sessions("plan")[..], &NO_CLUSTER].concat(),
            vec![("DB_PORT", "5432x")],
            2,
            "gc-cli: error: cannot build the session database URL from DB_*: invalid DB_PORT \
             \"5432x\": must be a port number",
        ),
        // A database that is not PostgreSQL, by flag or variable.
        (
            [
                &sessions("run")[..],
                &NO_CLUSTER,
                &["--database-url", "mysql://x"],
            ]
            .concat(),
            vec![],
            2,
            mysql,
        ),
        (
            [&sessions("plan")[..], &NO_CLUSTER].concat(),
            vec![("GC_SESSION_DATABASE_URL", "mysql://x")],
            2,
            mysql,
        ),
        // A YAML inventory.
        (
            [&plan_pods("YAML")[..], &["-n", "work"]].concat(),
            vec![],
            3,
            &not_json,
        ),
        // A namespace the inventory holds no Pod of: the plan stands (exit 0), with a warning.
        (
            [&plan_pods("JSON")[..], &["-n", "nosuchns"]].concat(),
            vec![],
            0,
            &elsewhere,
        ),
        // `--store` with an inventory (no ledger goes to a store); `$GC_STORE` set for other
        // commands is not a mistake.
        (
            [&plan_pods("JSON")[..], &["-n", "work", "--store", &store]].concat(),
            vec![],
            2,
            with_store,
        ),
        (
            [&plan_pods("JSON")[..], &["-n", "work"]].concat(),
            vec![("GC_STORE", &store)],
            0,
            "",
        ),
    ];
    for (args, env, code, line) in rows {
        let args: Vec<&str> = args
            .iter()
            .map(|a| match *a {
                "JSON" => json.as_str(),
                "YAML" => yaml.as_str(),
                a => a,
            })
            .collect();
        let out = gc_cli(&args, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?} {env:?}: {stderr}");
        if line.is_empty() {
            assert!(stderr.is_empty(), "{args:?} {env:?}: {stderr}");
        } else if code == 0 {
            // A warning, after the log's time and level.
            assert!(
                stderr
                    .lines()
                    .any(|l| l.contains(" WARN ") && l.ends_with(line)),
                "{args:?} {env:?}: expected {line:?} in: {stderr}"
            );
        } else {
            assert!(
                stderr.lines().any(|l| l == line),
                "{args:?} {env:?}: expected {line:?} in: {stderr}"
            );
            assert!(!stderr.contains("store unavailable"), "{stderr}");
        }
    }
    assert!(
        !dir.path().join("gc.sqlite3").exists(),
        "no store was opened"
    );
}
