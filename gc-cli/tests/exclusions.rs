//! "Never this one", end to end on the real API server (and PostgreSQL for sessions): the
//! protect label and the exclude selector of both collectors, a plan sealed under one protect
//! label refused by `apply` under another, a Pod labelled after its plan left `changed`, and the
//! session selector in full syntax sent to the server (what it leaves out is not even scanned).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Output;

use gc_testbed::{FailedPod, TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

mod common;

use common::{COLLECT, Result, command, old, sqlite, target};

const PROTECT: &str = "gc.example.com/protect";
const PAYMENTS: &str = "team in (payments)";

/// One namespace, a store, an archive folder, and the flags every Pod command shares.
struct Env {
    ns: TestNamespace,
    dir: tempfile::TempDir,
    kubeconfig: String,
    store: String,
}

impl Env {
    async fn new(prefix: &str) -> Result<Self> {
        let bed = TestBed::shared().await?;
        let dir = tempfile::tempdir()?;
        let store = sqlite(dir.path(), "gc.sqlite3");
        Ok(Self {
            ns: bed.namespace(prefix).await?,
            kubeconfig: bed.kubeconfig_path().to_str().unwrap().to_owned(),
            dir,
            store,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `gc-cli args` on this namespace, store and archive folder (`archive` commands only).
    fn gc(&self, args: &[&str], archive: bool) -> Output {
        let archives = self.path("archives");
        let mut c = command();
        c.args(args)
            .args(["--kubeconfig", &self.kubeconfig, "--store", &self.store])
            .args(["-n", self.ns.name(), "--retention-seconds", "3600"])
            .env_remove("GC_SEAL_KEY");
        if archive {
            c.args(["--archive-dir", archives.to_str().unwrap()]);
        }
        c.output().unwrap()
    }

    /// `plan pods -o json` with `extra`: the plan's decision by Pod name.
    fn decisions(&self, extra: &[&str]) -> BTreeMap<String, String> {
        let plan = json_of(&self.gc(&[&["plan", "pods", "-o", "json"], extra].concat(), false));
        plan["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let name = d["name"].as_str().unwrap().to_owned();
                (name, d["decision"].as_str().unwrap().to_owned())
            })
            .collect()
    }

    /// A live `run pods` with `extra`: each result's outcome by Pod name.
    fn run_live(&self, extra: &[&str]) -> BTreeMap<String, String> {
        let head = [
            "run",
            "pods",
            "--dry-run",
            "false",
            "--auto-remediate",
            "-o",
            "json",
        ];
        outcomes(&json_of(&self.gc(&[&head[..], extra].concat(), true)))
    }

    async fn pods(&self) -> Result<BTreeSet<String>> {
        let list = self.ns.api::<Pod>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect())
    }

    /// A failed Pod `name`, due and opted in, with the extra `labels`.
    async fn labelled(&self, name: &str, labels: &[(&str, &str)]) -> Result<Pod> {
        let mut pod = FailedPod::new(name)
            .label(COLLECT, "true")
            .finished_at(old());
        for (k, v) in labels {
            pod = pod.label(k, v);
        }
        Ok(pod.create(&self.ns.api::<Pod>()).await?)
    }
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

/// name -> outcome of every result of a run report.
fn outcomes(report: &Value) -> BTreeMap<String, String> {
    report["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {report:#}"))
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// Of four due targets, the protected one and the excluded one are reported and kept; a live
/// run deletes exactly the other two.
#[tokio::test]
async fn a_live_run_deletes_neither_protected_nor_excluded_pods() -> Result {
    let env = Env::new("spare-pods").await?;
    target(&env.ns, "plain-a").await?;
    target(&env.ns, "plain-b").await?;
    env.labelled("protected", &[(PROTECT, "true")]).await?;
    env.labelled("payments", &[("team", "payments")]).await?;
    let exclude = ["--exclude-selector", PAYMENTS];

    // The plan says why, in JSON, in the table and in the Kestra line.
    assert_eq!(
        env.decisions(&exclude),
        map(&[
            ("payments", "excluded"),
            ("plain-a", "targeted"),
            ("plain-b", "targeted"),
            ("protected", "protected"),
        ])
    );
    let table = env.gc(&[&["plan", "pods"], &exclude[..]].concat(), false);
    let table = text(&table);
    assert!(
        table.contains("2 targeted, 0 held, 0 deferred, 1 protected, 1 excluded, 0 not eligible")
            && table.contains("label gc.example.com/protect=true")
            && table.contains("matches --exclude-selector team in (payments)"),
        "{table}"
    );
    let kestra = env.gc(
        &[&["plan", "pods", "--format", "kestra"], &exclude[..]].concat(),
        false,
    );
    let line = text(&kestra);
    assert!(
        line.contains(
            r#""target_count":2,"held":0,"deferred":0,"protected":1,"excluded":1,"state":"#
        ),
        "{line}"
    );
    // Without the selector, the excluded Pod is an ordinary target.
    assert_eq!(env.decisions(&[])["payments"], "targeted");

    // The live run: exactly the other two.
    let got = env.run_live(&exclude);
    assert_eq!(
        got,
        map(&[("plain-a", "collected"), ("plain-b", "collected")])
    );
    assert_eq!(env.pods().await?, set(&["payments", "protected"]));
    // A rerun finds nothing more to do.
    assert_eq!(env.run_live(&exclude), BTreeMap::new());
    assert_eq!(env.pods().await?, set(&["payments", "protected"]));
    Ok(())
}

/// `--protect-label keep=yes` replaces the default label; a plan made under one protect label
/// is refused by `apply` under another (exit 2, naming the input), touching nothing.
#[tokio::test]
async fn a_custom_protect_label_and_the_policy_binds_it() -> Result {
    let env = Env::new("spare-custom").await?;
    env.labelled("keep", &[("keep", "yes")]).await?;
    env.labelled("default-label", &[(PROTECT, "true")]).await?;
    let custom = ["--protect-label", "keep=yes"];
    assert_eq!(
        env.decisions(&custom),
        map(&[("default-label", "targeted"), ("keep", "protected")])
    );

    let plan = env.path("plan.json");
    let out = env.gc(
        &[
            &["plan", "pods", "--out", plan.to_str().unwrap()],
            &custom[..],
        ]
        .concat(),
        false,
    );
    assert!(out.status.success(), "{}", text(&out));
    let before = env.pods().await?;
    let apply = |extra: &[&str]| {
        env.gc(
            &[&["apply", plan.to_str().unwrap(), "-o", "json"], extra].concat(),
            true,
        )
    };
    for other in [
        &[][..],
        &["--protect-label", "keep=no"][..],
        &["--protect-label", "keep=yes", "--exclude-selector", "keep"][..],
    ] {
        let out = apply(other);
        assert_eq!(out.status.code(), Some(2), "{other:?}: {}", text(&out));
        let named = if other.len() > 2 {
            "exclude_selector"
        } else {
            "protect_label"
        };
        assert!(text(&out).contains(named), "{other:?}: {}", text(&out));
        assert_eq!(env.pods().await?, before, "a refusal touches nothing");
    }
    // A bad value is refused before anything, naming the flag.
    for (flag, value) in [
        ("--protect-label", "keep"),
        ("--exclude-selector", "team in (payments"),
    ] {
        let out = env.gc(&["plan", "pods", flag, value], false);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", text(&out));
        assert!(text(&out).contains(flag), "{}", text(&out));
    }
    // Under its own policy, the plan collects the Pod the custom label does not protect.
    let got = outcomes(&json_of(&apply(&custom)));
    assert_eq!(got, map(&[("default-label", "collected")]));
    assert_eq!(env.pods().await?, set(&["keep"]));
    Ok(())
}

/// A Pod labelled `protect` after the plan has another resourceVersion: apply reports it
/// `changed` and leaves it alone.
#[tokio::test]
async fn a_pod_protected_after_the_plan_is_changed_not_deleted() -> Result {
    let env = Env::new("spare-late").await?;
    for name in ["a", "b"] {
        target(&env.ns, name).await?;
    }
    let plan = env.path("plan.json");
    let out = env.gc(&["plan", "pods", "--out", plan.to_str().unwrap()], false);
    assert!(out.status.success(), "{}", text(&out));
    let patch = Patch::Merge(json!({"metadata": {"labels": {PROTECT: "true"}}}));
    env.ns
        .api::<Pod>()
        .patch("b", &PatchParams::default(), &patch)
        .await?;
    let out = env.gc(&["apply", plan.to_str().unwrap(), "-o", "json"], true);
    let got = outcomes(&json_of(&out));
    assert_eq!(got, map(&[("a", "collected"), ("b", "changed")]));
    assert_eq!(env.pods().await?, set(&["b"]));
    // Planned again, it is protected.
    assert_eq!(env.decisions(&[]), map(&[("b", "protected")]));
    Ok(())
}

/// A Service labelled as StreamSpace labels a session's objects, with `extra` labels.
async fn session_service(ns: &TestNamespace, id: &str, extra: &[(&str, &str)]) -> Result {
    let mut labels = json!({"app": "streamspace-session", "session": id});
    for (k, v) in extra {
        labels[*k] = json!(v);
    }
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": id, "labels": labels},
        "spec": {"type": "ClusterIP", "ports": [{"port": 3000}]},
    }))?;
    ns.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await?;
    Ok(())
}

async fn services(ns: &TestNamespace) -> Result<BTreeSet<String>> {
    let list = ns.api::<Service>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|s| s.metadata.name.unwrap())
        .collect())
}

/// Orphaned session resources, one protected, one excluded, one the selector leaves out: the
/// run deletes the others, keeps those, and its audit lines say why; what the selector leaves
/// out is not even scanned. A malformed selector exits 2 naming `--selector`, touching nothing.
#[tokio::test]
async fn sessions_spare_protected_and_excluded_and_the_selector_reaches_the_server() -> Result {
    let Some(db) = TestDatabase::fresh("spare-sessions").await? else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    bed.install_session_crd().await?;
    let ns = bed.namespace("spare-sessions").await?;
    let pool = db.pool().await?;
    sqlx::raw_sql(
        "CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50)); \
         INSERT INTO sessions VALUES ('live-1', 'running')",
    )
    .execute(&pool)
    .await?;
    pool.close().await;
    session_service(&ns, "live-1", &[]).await?;
    session_service(&ns, "gone-a", &[]).await?;
    session_service(&ns, "gone-b", &[]).await?;
    session_service(&ns, "gone-protected", &[(PROTECT, "true")]).await?;
    session_service(&ns, "gone-excluded", &[("team", "payments")]).await?;
    session_service(&ns, "gone-canary", &[("canary", "")]).await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let run = |selector: &str| {
        command()
            .args([
                "run",
                "sessions",
                "-n",
                ns.name(),
                "--kubeconfig",
                &kubeconfig,
            ])
            .args([
                "--database-url",
                db.url(),
                "--grace-hours",
                "0",
                "--dry-run=none",
            ])
            .args(["--selector", selector, "--exclude-selector", PAYMENTS])
            .env_remove("GC_SESSION_DATABASE_URL")
            .output()
            .unwrap()
    };
    let all = set(&[
        "gone-a",
        "gone-b",
        "gone-canary",
        "gone-excluded",
        "gone-protected",
        "live-1",
    ]);
    assert_eq!(services(&ns).await?, all);

    // Malformed: refused before anything, naming the flag.
    for bad in [
        "app in (streamspace-session",
        "app=streamspace-session,",
        "app >1",
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--selector") && err.contains("position"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{}", text(&out));
    }
    assert_eq!(services(&ns).await?, all, "a refusal touches nothing");

    let out = run("app in (streamspace-session),!canary");
    assert!(out.status.success(), "{}", text(&out));
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let decision = |name: &str| -> Option<(String, String)> {
        records.iter().find(|r| r["name"] == name).map(|r| {
            (
                r["decision"].as_str().unwrap().to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
            )
        })
    };
    assert_eq!(
        decision("gone-protected"),
        Some((
            "protected".into(),
            "carries the protect label gc.example.com/protect=true".into()
        )),
        "{}",
        text(&out)
    );
    assert_eq!(
        decision("gone-excluded"),
        Some((
            "excluded".into(),
            "matches the exclude selector team in (payments)".into()
        ))
    );
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("0 skipped, 1 protected, 1 excluded"),
        "{summary}"
    );
    assert_eq!(decision("gone-a").map(|d| d.0).as_deref(), Some("delete"));
    assert_eq!(decision("live-1").map(|d| d.0).as_deref(), Some("kept"));
    // The selector went to the server: the canary was never listed, so never judged.
    assert_eq!(decision("gone-canary"), None, "{}", text(&out));
    assert_eq!(
        services(&ns).await?,
        set(&["gone-canary", "gone-excluded", "gone-protected", "live-1"])
    );
    Ok(())
}
