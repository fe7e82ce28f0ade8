//! Many namespaces in one run, on the real API server (and PostgreSQL for sessions): `-n`
//! repeated and `-A` with `--namespace-selector` and `--exclude-namespace`; each namespace keeps
//! its own ledger, Lease, plan section and report; one namespace's failure does not stop the
//! others but makes the exit code non-zero; a sealed plan names its namespaces and `apply`
//! refuses one for namespaces its flags do not name.

use std::process::{Command, Output};

use gc_core::ports::Lock as _;
use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

mod common;

use common::{Result, command, ok, sqlite, target};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Namespaces of one test, a store, and the flags every command shares.
struct Env {
    bed: &'static TestBed,
    namespaces: Vec<TestNamespace>,
    dir: tempfile::TempDir,
    store: String,
}

impl Env {
    async fn new(prefix: &str, count: usize) -> Result<Self> {
        let bed = TestBed::shared().await?;
        let mut namespaces = Vec::new();
        for i in 0..count {
            namespaces.push(bed.namespace(&format!("{prefix}-{i}")).await?);
        }
        let dir = tempfile::tempdir()?;
        Ok(Self {
            bed,
            store: sqlite(dir.path(), "gc.sqlite3"),
            dir,
            namespaces,
        })
    }

    fn name(&self, i: usize) -> &str {
        self.namespaces[i].name()
    }

    /// `gc-cli ARGS` with the connection, the store and an archive folder.
    fn gc(&self, args: &[&str]) -> Command {
        let mut c = command();
        c.args(args)
            .args(["--kubeconfig", self.bed.kubeconfig_path().to_str().unwrap()])
            .args(["--store", &self.store])
            .env_remove("GC_SEAL_KEY");
        c
    }

    fn archives(&self) -> String {
        self.dir.path().join("archives").display().to_string()
    }

    /// A live `run pods` with `namespace_flags`.
    fn run_pods(&self, namespace_flags: &[&str]) -> Output {
        self.gc(&["run", "pods", "--retention-seconds", "3600"])
            .args(["--dry-run", "false", "--auto-remediate", "-o", "json"])
            .args(["--archive-dir", &self.archives()])
            .args(namespace_flags)
            .output()
            .unwrap()
    }

    async fn pods(&self, i: usize) -> Result<Vec<String>> {
        let list = self.namespaces[i]
            .api::<Pod>()
            .list(&ListParams::default())
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect())
    }

    /// Takes the Lease `lease` of namespace `i` as another run would; release it with the
    /// adapter returned.
    async fn held_by_another(&self, i: usize, lease: &str) -> Result<gc_k8s::KubeCluster> {
        let other = gc_k8s::KubeCluster::new(self.namespaces[i].client().clone());
        assert!(
            other
                .try_acquire(self.name(i), lease, "another-run", 60)
                .await?
        );
        Ok(other)
    }

    /// Labels namespace `i` with `labels`.
    async fn label(&self, i: usize, labels: Value) -> Result {
        let api: Api<Namespace> = Api::all(self.bed.client());
        let patch = Patch::Merge(json!({"metadata": {"labels": labels}}));
        api.patch(self.name(i), &PatchParams::default(), &patch)
            .await?;
        Ok(())
    }
}

#[tokio::test]
async fn one_run_collects_in_each_named_namespace_with_its_own_lease_and_ledger() -> Result {
    let env = Env::new("many", 2).await?;
    for i in 0..2 {
        target(&env.namespaces[i], "due").await?;
    }
    let out = env.run_pods(&["-n", env.name(0), "--namespace", env.name(1)]);
    let reports: Vec<Value> = serde_json::from_str(&ok(&out))?;
    let covered: Vec<&str> = reports
        .iter()
        .map(|r| r["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(covered, [env.name(0), env.name(1)]);
    for (i, report) in reports.iter().enumerate() {
        assert_eq!(
            report["report"]["results"][0]["outcome"], "collected",
            "{report}"
        );
        assert!(env.pods(i).await?.is_empty());
        // Each namespace's own Lease and ledger.
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> = env.namespaces[i].api();
        assert!(leases.get_opt("gc-pods").await?.is_some());
    }
    let store = gc_store::open(&env.store).await?;
    for i in 0..2 {
        let ledger = store.ledger_json("primary", env.name(i)).await?;
        assert!(ledger.is_some(), "a ledger for {}", env.name(i));
    }
    store.close().await;
    Ok(())
}

#[tokio::test]
async fn one_namespaces_failure_does_not_stop_the_others_but_fails_the_run() -> Result {
    let env = Env::new("fails", 2).await?;
    for i in 0..2 {
        target(&env.namespaces[i], "due").await?;
    }
    // Another run holds the first namespace's lock.
    let other = env.held_by_another(0, "gc-pods").await?;
    let out = env.run_pods(&[
        "-n",
        env.name(0),
        "-n",
        env.name(1),
        "--lock-wait-seconds",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains(&format!("1 of 2 namespaces failed: {}", env.name(0))),
        "{message}"
    );
    assert!(
        message.contains("another run holds lease gc-pods"),
        "{message}"
    );
    assert_eq!(
        env.pods(0).await?,
        ["due"],
        "the locked namespace is left alone"
    );
    assert!(env.pods(1).await?.is_empty(), "the other is collected");
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert!(reports[0]["error"].as_str().unwrap().contains("lease"));
    assert!(reports[0].get("report").is_none());
    other.release(env.name(0), "gc-pods", "another-run").await?;
    Ok(())
}

#[tokio::test]
async fn all_namespaces_are_chosen_by_selector_less_the_excluded() -> Result {
    let env = Env::new("sel", 3).await?;
    let team = format!("team-{}", env.name(0));
    for i in 0..3 {
        env.label(i, json!({"gc-test-team": team})).await?;
        target(&env.namespaces[i], "due").await?;
    }
    let selector = format!("gc-test-team={team}");
    // A plan of the chosen namespaces, as JSON: one document per namespace.
    let out = env
        .gc(&["plan", "pods", "-A", "--namespace-selector", &selector])
        .args(["--exclude-namespace", env.name(1), "-o", "json"])
        .args(["--retention-seconds", "3600"])
        .output()?;
    let plans: Vec<Value> = serde_json::from_str(&ok(&out))?;
    let planned: Vec<&str> = plans
        .iter()
        .map(|p| p["config"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(
        planned,
        [env.name(0), env.name(2)],
        "sorted, the excluded left out"
    );
    // The run collects there and only there.
    let out = env.run_pods(&[
        "-A",
        "--namespace-selector",
        &selector,
        "--exclude-namespace",
        env.name(1),
    ]);
    ok(&out);
    assert!(env.pods(0).await?.is_empty() && env.pods(2).await?.is_empty());
    assert_eq!(env.pods(1).await?, ["due"]);
    // Bad combinations are usage errors.
    for args in [
        vec!["-A", "-n", "x"],
        vec!["--namespace-selector", "a=b"],
        vec!["--exclude-namespace", "x"],
    ] {
        let out = env.gc(&["run", "pods"]).args(&args).output()?;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    Ok(())
}

#[tokio::test]
async fn a_plan_names_its_namespaces_and_apply_refuses_others() -> Result {
    let env = Env::new("set", 2).await?;
    for i in 0..2 {
        target(&env.namespaces[i], "due").await?;
    }
    let plan = env.dir.path().join("plan.json");
    let both = ["-n", env.name(0), "-n", env.name(1)];
    let out = env
        .gc(&["plan", "pods", "--retention-seconds", "3600"])
        .args(both)
        .args(["--out", plan.to_str().unwrap()])
        .output()?;
    let table = ok(&out);
    assert!(
        table.contains(&format!("namespace {}:", env.name(1))),
        "{table}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan)?)?;
    assert_eq!(doc["kind"], "gc/failed-pod-plan-set/v1");
    assert_eq!(doc["sections"].as_array().unwrap().len(), 2);

    let apply = |namespaces: &[&str]| {
        env.gc(&[
            "apply",
            plan.to_str().unwrap(),
            "--retention-seconds",
            "3600",
        ])
        .args(["--archive-dir", &env.archives()])
        .args(namespaces)
        .output()
        .unwrap()
    };
    // A plan covering a namespace apply does not name is refused whole: nothing is touched.
    let out = apply(&["-n", env.name(0)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(env.name(1)), "{}", stderr(&out));
    assert_eq!(env.pods(0).await?, ["due"]);
    // A ledger file is one namespace's: refused with a plan of several, before anything is done.
    let ledger = env.dir.path().join("ledger.json");
    std::fs::write(&ledger, "{}")?;
    let out = apply(&[&both[..], &["--ledger", ledger.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--ledger"), "{}", stderr(&out));
    assert_eq!(env.pods(0).await?, ["due"]);
    // Named, both are collected.
    ok(&apply(&both));
    assert!(env.pods(0).await?.is_empty() && env.pods(1).await?.is_empty());
    // One namespace's tools refuse several: an inventory file and the Kestra line.
    let out = env
        .gc(&["plan", "pods", "--format", "kestra"])
        .args(both)
        .output()?;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--format kestra"), "{}", stderr(&out));
    Ok(())
}

#[tokio::test]
async fn sessions_are_collected_in_each_namespace_with_its_audit_lines() -> Result {
    let env = Env::new("sess", 2).await?;
    let Some(db) = TestDatabase::fresh("namespaces_sessions").await? else {
        panic!("scripts/test.sh sets GC_TEST_DATABASE_URL");
    };
    let pool = db.pool().await?;
    sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO sessions VALUES ('live-a', 'running'), ('live-b', 'running')")
        .execute(&pool)
        .await?;
    pool.close().await;
    for (i, (live, gone)) in [("live-a", "gone-a"), ("live-b", "gone-b")]
        .iter()
        .enumerate()
    {
        for id in [live, gone] {
            let service: Service = serde_json::from_value(json!({
                "metadata": {"name": id, "labels": {"app": "streamspace-session", "session": id}},
                "spec": {"ports": [{"port": 3000}]},
            }))?;
            env.namespaces[i]
                .api::<Service>()
                .create(&PostParams::default(), &service)
                .await?;
        }
    }
    let later = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() + 48 * 3600,
    )?;
    let out = command()
        .args([
            "run",
            "sessions",
            "--kinds",
            "Service",
            "--now",
            &later.to_string(),
            "--dry-run=none",
        ])
        .args(["--kubeconfig", env.bed.kubeconfig_path().to_str().unwrap()])
        .args(["--database-url", db.url()])
        .args(["-n", env.name(0), "-n", env.name(1)])
        .env("GC_ALLOW_FUTURE_NOW", "1")
        .output()?;
    let audit = ok(&out);
    let deleted: Vec<(String, String)> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["result"] == "deleted")
        .map(|r| {
            (
                r["namespace"].as_str().unwrap().to_owned(),
                r["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        deleted,
        [
            (env.name(0).to_owned(), "gone-a".to_owned()),
            (env.name(1).to_owned(), "gone-b".to_owned())
        ],
        "{audit}"
    );
    for (i, live) in ["live-a", "live-b"].iter().enumerate() {
        let services = env.namespaces[i].api::<Service>();
        assert!(services.get_opt(live).await?.is_some());
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> = env.namespaces[i].api();
        assert!(leases.get_opt("gc-sessions").await?.is_some());
    }

    // -o json over several namespaces: every namespace is in the document, a failed one (its
    // lock held by another run) by its refusal.
    let other = env.held_by_another(0, "gc-sessions").await?;
    let out = command()
        .args([
            "run",
            "sessions",
            "--kinds",
            "Service",
            "-o",
            "json",
            "--dry-run=none",
        ])
        .args(["--now", &later.to_string()])
        .env("GC_ALLOW_FUTURE_NOW", "1")
        .args(["--kubeconfig", env.bed.kubeconfig_path().to_str().unwrap()])
        .args(["--database-url", db.url()])
        .args([
            "-n",
            env.name(0),
            "-n",
            env.name(1),
            "--lock-wait-seconds",
            "1",
        ])
        .output()?;
    other
        .release(env.name(0), "gc-sessions", "another-run")
        .await?;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let records: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["decision"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{records:?}");
    assert_eq!(refused[0]["namespace"], env.name(0));
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("another run holds lease gc-sessions"),
        "{records:?}"
    );
    assert!(
        records.iter().any(|r| r["namespace"] == env.name(1)),
        "{records:?}"
    );
    Ok(())
}

/// However many namespaces `-A` matches (none, one), the output is a list; several
/// namespaces all refused on their data exit 3, as one would; one refused and one failed exit 1.
#[tokio::test]
async fn several_namespaces_print_a_list_and_exit_as_their_worst_failure() -> Result {
    let env = Env::new("shape", 2).await?;
    let team = format!("team-{}", env.name(0));
    env.label(0, json!({"gc-test-team": team})).await?;
    for i in 0..2 {
        target(&env.namespaces[i], "due-a").await?;
        target(&env.namespaces[i], "due-b").await?;
    }
    let one = format!("gc-test-team={team}");
    let dry = |flags: &[&str]| {
        env.gc(&["run", "pods", "--retention-seconds", "3600", "-o", "json"])
            .args(["--archive-dir", &env.archives()])
            .args(flags)
            .output()
            .unwrap()
    };
    let out = dry(&["-A", "--namespace-selector", &one]);
    let reports: Vec<Value> = serde_json::from_str(&ok(&out))?;
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0]["namespace"], env.name(0));
    let out = dry(&["-A", "--namespace-selector", "gc-test-team=no-such-team"]);
    assert_eq!(ok(&out).trim(), "[]");

    // Both refused on their data (more Pods than --max-inventory): 3, each error in the list.
    let both = [
        "-n",
        env.name(0),
        "-n",
        env.name(1),
        "--max-pods",
        "1",
        "--max-inventory",
        "1",
    ];
    let out = dry(&both);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert_eq!(reports.len(), 2, "{reports:?}");
    for report in &reports {
        assert!(
            report["error"].as_str().unwrap().contains("max_inventory"),
            "{report}"
        );
    }
    // One refused on its data, one failed (its lock held): 1.
    let other = env.held_by_another(1, "gc-pods").await?;
    let out = env.run_pods(&[&both[..], &["--lock-wait-seconds", "1"]].concat());
    other.release(env.name(1), "gc-pods", "another-run").await?;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for i in 0..2 {
        assert_eq!(env.pods(i).await?.len(), 2, "nothing collected");
    }
    Ok(())
}

#[tokio::test]
async fn a_pin_in_a_namespace_that_left_the_selection_is_released_never_collected() -> Result {
    let env = Env::new("left", 2).await?;
    let team = env.name(0).to_owned();
    for i in 0..2 {
        env.label(i, json!({"gc-test-left": team})).await?;
    }
    // A pin an earlier run left in namespace 1, which then leaves the selection (relabelled).
    // A pin of this test's own: the live -A runs of the tests beside it release the default
    // pin in every namespace of the shared API server.
    let pin = format!("{}.example.com/pin", env.name(0));
    let pinned = gc_testbed::FailedPod::new("pinned")
        .label(common::COLLECT, "true")
        .finished_at(common::old())
        .finalizer(&pin)
        .create(&env.namespaces[1].api::<Pod>())
        .await?;
    env.label(1, json!({"gc-test-left": "elsewhere"})).await?;
    let selector = format!("gc-test-left={team}");
    for dry_run in [true, false] {
        let mode = if dry_run { "server" } else { "none" };
        let out = env
            .gc(&["run", "pods", "--retention-seconds", "3600", "-o", "json"])
            .args([&format!("--dry-run={mode}"), "--auto-remediate"])
            .args(["--archive-dir", &env.archives()])
            .args(["-A", "--namespace-selector", &selector])
            .args(["--pin-finalizer", &pin])
            .output()?;
        let reports: Vec<Value> = serde_json::from_str(&ok(&out))?;
        let outside = reports
            .iter()
            .find(|r| r["namespace"] == env.name(1))
            .unwrap_or_else(|| panic!("namespace 1 reported: {reports:?}"));
        let released = &outside["report"]["recovered"][0];
        assert_eq!(released["outcome"], "released", "{outside}");
        assert_eq!(released["uid"], *pinned.metadata.uid.as_ref().unwrap());
        assert!(
            released["reason"]
                .as_str()
                .unwrap()
                .contains("outside the run's selection"),
            "{released}"
        );
        let now = env.namespaces[1].api::<Pod>().get("pinned").await?;
        let finalizers = now.metadata.finalizers.unwrap_or_default();
        // A dry run releases nothing; a live run releases the pin, and collects nothing there.
        assert_eq!(finalizers.is_empty(), !dry_run, "dry run {dry_run}");
    }
    assert_eq!(env.pods(1).await?, ["pinned"], "never collected");

    // `apply -A` of a reviewed plan releases it too.
    let patch = Patch::Merge(json!({"metadata": {"finalizers": [&pin]}}));
    env.namespaces[1]
        .api::<Pod>()
        .patch("pinned", &PatchParams::default(), &patch)
        .await?;
    let plan = env.dir.path().join("outside-plan.json");
    let scope = [
        "-A",
        "--namespace-selector",
        &selector,
        "--pin-finalizer",
        &pin,
    ];
    let policy = ["--retention-seconds", "3600"];
    let out = env
        .gc(&["plan", "pods", "--out", plan.to_str().unwrap()])
        .args(scope)
        .args(policy)
        .output()?;
    ok(&out);
    let out = env
        .gc(&["apply", plan.to_str().unwrap(), "-o", "json"])
        .args(["--archive-dir", &env.archives()])
        .args(scope)
        .args(policy)
        .output()?;
    let reports: Vec<Value> = serde_json::from_str(&ok(&out))?;
    assert!(
        reports.iter().any(|r| r["namespace"] == env.name(1)
            && r["report"]["recovered"][0]["outcome"] == "released"),
        "{reports:?}"
    );
    let now = env.namespaces[1].api::<Pod>().get("pinned").await?;
    assert_eq!(now.metadata.finalizers, None, "released by apply -A");
    assert_eq!(env.pods(1).await?, ["pinned"], "never collected");
    Ok(())
}
