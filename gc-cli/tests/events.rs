//! Kubernetes Events and logs, end to end on the real API server (and PostgreSQL for sessions):
//! a Normal Event on each Pod collected and each session resource deleted, read through
//! `events.k8s.io/v1` and `core/v1` (as `kubectl get events` reads them); a Warning on a Pod
//! whose fence was lost or whose archive is too large; a Warning on the Namespace for a failed
//! run and for the mass-deletion guard; none for a dry run or with `--no-events`; a 403 logged
//! once per run; and the logs on stderr as the flags and `RUST_LOG` say, stdout left clean.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

use gc_testbed::{FailedPod, TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event as CoreEvent, PersistentVolumeClaim, Pod, Service,
};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

mod common;

use common::{
    COLLECT, PIN, Result, Webhook, command, old, one_live_session, pushed, pushgateway, scrape,
    sqlite, target,
};

/// The `reportingController` of gc's Events.
const CONTROLLER: &str = "gc.example.com/gc-cli";

/// One namespace, a store, an archive folder, and the flags every Pod command shares.
struct Env {
    bed: &'static TestBed,
    ns: TestNamespace,
    dir: tempfile::TempDir,
    store: String,
}

impl Env {
    async fn new(prefix: &str) -> Result<Self> {
        let bed = TestBed::shared().await?;
        let dir = tempfile::tempdir()?;
        let store = sqlite(dir.path(), "gc.sqlite3");
        Ok(Self {
            bed,
            ns: bed.namespace(prefix).await?,
            dir,
            store,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `gc-cli args` on this namespace and store (as the admin), with `--archive-dir archives`
    /// for the commands that archive; `GC_*` and `RUST_LOG` from the environment left out.
    fn command(&self, args: &[&str], archive: bool) -> Command {
        let mut c = command();
        c.args(args)
            .args(["--store", &self.store, "-n", self.ns.name()])
            .args(["--retention-seconds", "3600"])
            .env_remove("GC_SEAL_KEY")
            .env_remove("GC_NO_EVENTS")
            .env_remove("GC_LOG_FORMAT")
            .env_remove("RUST_LOG");
        if archive {
            c.args(["--archive-dir", self.path("archives").to_str().unwrap()]);
        }
        c
    }

    /// As [`Env::command`], as the admin of the test bed.
    fn gc(&self, args: &[&str], archive: bool) -> Command {
        let mut c = self.command(args, archive);
        c.args(["--kubeconfig", self.bed.kubeconfig_path().to_str().unwrap()]);
        c
    }

    /// A live `run pods -o json` with `extra`.
    fn run_live(&self, extra: &[&str]) -> Output {
        let head = ["run", "pods", "--dry-run", "false", "--auto-remediate"];
        let tail = ["-o", "json"];
        self.gc(&[&head[..], &tail, extra].concat(), true)
            .output()
            .unwrap()
    }

    /// Every `events.k8s.io/v1` Event in the namespace, oldest first.
    async fn events(&self) -> Result<Vec<Event>> {
        let api: Api<Event> = self.ns.api();
        let mut events = api.list(&ListParams::default()).await?.items;
        events.sort_by(|a, b| a.event_time.cmp(&b.event_time));
        Ok(events)
    }

    /// `(type, reason, kind, name, uid)` of every Event gc posted, sorted.
    async fn posted(&self) -> Result<BTreeSet<Seen>> {
        Ok(self
            .events()
            .await?
            .iter()
            .filter(|e| e.reporting_controller.as_deref() == Some(CONTROLLER))
            .map(seen)
            .collect())
    }
}

/// What a test checks of an Event: type, reason, regarding kind, name and uid.
type Seen = (String, String, String, String, String);

fn seen(e: &Event) -> Seen {
    let r = e.regarding.clone().unwrap_or_default();
    (
        e.type_.clone().unwrap_or_default(),
        e.reason.clone().unwrap_or_default(),
        r.kind.unwrap_or_default(),
        r.name.unwrap_or_default(),
        r.uid.unwrap_or_default(),
    )
}

fn expect(type_: &str, reason: &str, kind: &str, name: &str, uid: &str) -> Seen {
    (
        type_.into(),
        reason.into(),
        kind.into(),
        name.into(),
        uid.into(),
    )
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON report on stdout of a run that succeeded: stdout carries nothing else.
fn report(out: &Output) -> Value {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_live_pod_run_posts_a_normal_event_on_each_pod_it_deletes() -> Result {
    let env = Env::new("events-pods").await?;
    let a = uid(&target(&env.ns, "a").await?);
    let b = uid(&target(&env.ns, "b").await?);
    // Kept (protected): no Event.
    FailedPod::new("kept")
        .label(COLLECT, "true")
        .label("gc.example.com/protect", "true")
        .finished_at(old())
        .create(&env.ns.api::<Pod>())
        .await?;

    let out = env.run_live(&[]);
    let r = report(&out);
    assert_eq!(r["results"].as_array().map(Vec::len), Some(2), "{r:#}");
    assert_eq!(
        env.posted().await?,
        BTreeSet::from([
            expect("Normal", "Collected", "Pod", "a", &a),
            expect("Normal", "Collected", "Pod", "b", &b),
        ])
    );
    let events = env.events().await?;
    let on_a = events.iter().find(|e| seen(e).4 == a).unwrap();
    assert_eq!(on_a.action.as_deref(), Some("Collect"));
    let note = on_a.note.as_deref().unwrap_or_default();
    let archive = r["results"][0]["uri"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("collected: archive ") && note.contains("the Pod is deleted"),
        "{note}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.note.as_deref().unwrap_or_default().contains(archive))
    );
    let regarding = on_a.regarding.clone().unwrap_or_default();
    assert_eq!(regarding.namespace.as_deref(), Some(env.ns.name()));
    assert_eq!(regarding.api_version.as_deref(), Some("v1"));
    assert!(on_a.event_time.is_some() && on_a.reporting_instance.is_some());

    // The core/v1 view `kubectl get events` reads, found by the Pod's uid.
    let core: Api<CoreEvent> = env.ns.api();
    let by_uid = ListParams::default().fields(&format!("involvedObject.uid={a}"));
    let listed = core.list(&by_uid).await?.items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].reason.as_deref(), Some("Collected"));
    assert_eq!(listed[0].type_.as_deref(), Some("Normal"));
    assert_eq!(listed[0].involved_object.kind.as_deref(), Some("Pod"));
    Ok(())
}

/// A Pod a stopped run left pinned, which recovery releases and the same run then collects, is
/// reported, counted and evented once: by what the run last did to it.
#[tokio::test]
async fn a_pod_recovered_then_collected_in_one_run_is_reported_once() -> Result {
    let env = Env::new("events-once").await?;
    let pinned = FailedPod::new("pinned")
        .label(COLLECT, "true")
        .finished_at(old())
        .finalizer(PIN)
        .create(&env.ns.api::<Pod>())
        .await?;
    let out = env.run_live(&[]);
    let r = report(&out);
    assert!(out.status.success(), "{r:#}");
    assert_eq!(r["recovered"], json!([]), "{r:#}");
    assert_eq!(r["results"].as_array().map(Vec::len), Some(1), "{r:#}");
    assert_eq!(r["results"][0]["outcome"], "collected", "{r:#}");
    assert_eq!(
        env.posted().await?,
        BTreeSet::from([expect(
            "Normal",
            "Collected",
            "Pod",
            "pinned",
            &uid(&pinned)
        )])
    );
    Ok(())
}

/// A Pod annotated after its plan was made: `changed`, a `FenceLost` Warning on it; the Pod
/// beside it collected, a Normal Event.
#[tokio::test]
async fn a_pod_changed_since_its_plan_gets_a_fence_lost_warning() -> Result {
    let env = Env::new("events-changed").await?;
    let a = uid(&target(&env.ns, "a").await?);
    let b = uid(&target(&env.ns, "b").await?);
    let plan = env.path("plan.json");
    let out = env
        .gc(&["plan", "pods", "--out", plan.to_str().unwrap()], false)
        .output()?;
    assert!(out.status.success(), "{}", text(&out));
    let note = Patch::Merge(json!({"metadata": {"annotations": {"example.com/note": "keep"}}}));
    env.ns
        .api::<Pod>()
        .patch("b", &PatchParams::default(), &note)
        .await?;
    let out = env
        .gc(&["apply", plan.to_str().unwrap(), "-o", "json"], true)
        .output()?;
    let r = report(&out);
    let b_result = r["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|x| x["name"] == "b"));
    assert_eq!(
        b_result.map(|x| &x["outcome"]),
        Some(&json!("changed")),
        "{r:#}"
    );
    assert_eq!(
        env.posted().await?,
        BTreeSet::from([
            expect("Normal", "Collected", "Pod", "a", &a),
            expect("Warning", "FenceLost", "Pod", "b", &b),
        ])
    );
    let events = env.events().await?;
    let on_b = events.iter().find(|e| seen(e).4 == b).unwrap();
    let note = on_b.note.as_deref().unwrap_or_default();
    assert!(
        note.starts_with("changed at ") && note.contains("resourceVersion"),
        "{note}"
    );
    Ok(())
}

/// An archive over the ceiling once pinned: `tooLarge`, a `TooLarge` Warning on the Pod.
#[tokio::test]
async fn an_archive_too_large_gets_a_too_large_warning() -> Result {
    let env = Env::new("events-large").await?;
    let big = FailedPod::new("big")
        .label(COLLECT, "true")
        .annotation("example.com/padding", &"x".repeat(1200))
        .finished_at(old())
        .create(&env.ns.api::<Pod>())
        .await?;
    let out = env.gc(&["plan", "pods", "-o", "json"], false).output()?;
    let bytes = report(&out)["targets"][0]["archiveBytes"].as_u64().unwrap();
    // Room for the plan, none for the pin's finalizer and managedFields entry.
    let ceiling = (bytes + 8).to_string();
    let out = env.run_live(&["--max-archive-bytes", &ceiling]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        env.posted().await?,
        BTreeSet::from([expect("Warning", "TooLarge", "Pod", "big", &uid(&big))])
    );
    let events = env.events().await?;
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains(&format!("over max_archive_bytes {ceiling}")),
        "{note}"
    );
    Ok(())
}

/// A Pod whose archive cannot be written: a `CollectFailed` Warning on it. A run that stops
/// before any Pod (its store cannot be opened): a `RunFailed` Warning on the Namespace, whose
/// note is the run's error.
#[tokio::test]
async fn failures_get_a_warning_on_the_pod_or_on_the_namespace() -> Result {
    let env = Env::new("events-failed").await?;
    let a = uid(&target(&env.ns, "a").await?);
    // The archive folder takes the sink's probe, but not this cluster's archives: its folder
    // is a file.
    std::fs::create_dir(env.path("archives"))?;
    std::fs::write(env.path("archives").join("primary"), "not a folder")?;
    let out = env.run_live(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        env.posted().await?,
        BTreeSet::from([expect("Warning", "CollectFailed", "Pod", "a", &a)])
    );
    let events = env.events().await?;
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(note.starts_with("failed at Archive: "), "{note}");

    let bad_store = format!(
        "sqlite:{}",
        env.path("archives")
            .join("primary")
            .join("gc.sqlite3")
            .display()
    );
    let out = command()
        .args(["run", "pods", "--dry-run", "false", "--auto-remediate"])
        .args(["-n", env.ns.name(), "--retention-seconds", "3600"])
        .args(["--kubeconfig", env.bed.kubeconfig_path().to_str().unwrap()])
        .args(["--store", &bad_store])
        .env_remove("GC_NO_EVENTS")
        .output()?;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let namespace = expect("Warning", "RunFailed", "Namespace", env.ns.name(), "");
    assert!(env.posted().await?.contains(&namespace));
    let events = env.events().await?;
    let failed = events.iter().find(|e| seen(e) == namespace).unwrap();
    let note = failed.note.as_deref().unwrap_or_default();
    assert!(note.contains("cannot open the store"), "{note}");
    assert!(stderr(&out).contains(note), "{}", text(&out));
    assert_eq!(failed.action.as_deref(), Some("Run"));
    Ok(())
}

/// Dry runs change nothing and post nothing; `--no-events` and `GC_NO_EVENTS` turn Events off.
#[tokio::test]
async fn dry_runs_and_no_events_post_none() -> Result {
    let env = Env::new("events-off").await?;
    target(&env.ns, "a").await?;
    target(&env.ns, "b").await?;
    let dry = env.gc(&["run", "pods", "-o", "json"], true).output()?;
    assert_eq!(report(&dry)["dryRun"], true);
    let plan = env.path("plan.json");
    let out = env
        .gc(&["plan", "pods", "--out", plan.to_str().unwrap()], false)
        .output()?;
    assert!(out.status.success(), "{}", text(&out));
    let dry = env
        .gc(
            &["apply", plan.to_str().unwrap(), "--dry-run", "-o", "json"],
            true,
        )
        .output()?;
    assert_eq!(report(&dry)["dryRun"], true);
    assert!(env.posted().await?.is_empty());

    let out = env.run_live(&["--no-events", "--max-pods", "1"]);
    assert_eq!(report(&out)["results"][0]["outcome"], "collected");
    let out = env
        .gc(
            &["run", "pods", "--dry-run", "false", "--auto-remediate"],
            true,
        )
        .env("GC_NO_EVENTS", "1")
        .output()?;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        env.ns
            .api::<Pod>()
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
    );
    assert!(env.posted().await?.is_empty(), "{:?}", env.events().await?);
    Ok(())
}

/// Without `create` on Events, a live run still succeeds, with one warning for the whole run;
/// `-q` hides it.
#[tokio::test]
async fn a_forbidden_post_is_one_warning_per_run_and_never_a_failure() -> Result {
    let env = Env::new("events-403").await?;
    for name in ["a", "b", "c", "d"] {
        target(&env.ns, name).await?;
    }
    let without: Vec<_> = gc_k8s::rbac::required_rules()
        .into_iter()
        .filter(|r| r.resources.as_deref() != Some(&["events".to_owned()][..]))
        .collect();
    env.ns.grant("gc", without).await?;
    env.ns.service_account_client("gc").await?;
    let token = env.ns.service_account_token("gc").await?;
    let token_file = env.path("token");
    std::fs::write(&token_file, token)?;
    let as_account = |extra: &[&str]| {
        let head = ["run", "pods", "--dry-run", "false", "--auto-remediate"];
        let connect = [
            "--api-url",
            env.bed.server_url(),
            "--token-file",
            token_file.to_str().unwrap(),
            "--trust-certs",
            "--max-pods",
            "2",
            "-o",
            "json",
        ];
        env.command(&[&head[..], &connect, extra].concat(), true)
            .output()
            .unwrap()
    };

    let out = as_account(&[]);
    let r = report(&out);
    assert_eq!(r["results"][1]["outcome"], "collected", "{r:#}");
    let err = stderr(&out);
    let warnings: Vec<_> = err
        .lines()
        .filter(|l| l.contains("cannot post Kubernetes Events"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("WARN")
            && warnings[0].contains("2 of 2 not posted")
            && warnings[0].contains("forbidden")
            && warnings[0].contains("--no-events"),
        "{err}"
    );

    let out = as_account(&["-q"]);
    assert_eq!(report(&out)["results"][1]["outcome"], "collected");
    assert!(!stderr(&out).contains("cannot post"), "{}", text(&out));
    assert!(env.posted().await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn logs_go_to_stderr_as_the_flags_and_rust_log_say() -> Result {
    let env = Env::new("events-logs").await?;
    target(&env.ns, "a").await?;
    let dry = |extra: &[&str], rust_log: Option<&str>| {
        let mut c = env.gc(&[&["run", "pods", "-o", "json"][..], extra].concat(), true);
        if let Some(spec) = rust_log {
            c.env("RUST_LOG", spec);
        }
        let out = c.output().unwrap();
        // Whatever the logs, stdout is the report alone.
        assert_eq!(report(&out)["dryRun"], true, "{}", text(&out));
        stderr(&out)
    };

    // Default: warnings only, so nothing from a clean run.
    assert_eq!(dry(&[], None), "");
    // -vv: gc-k8s's debug lines (the flag after the command, as global flags go).
    let debug = dry(&["-vv"], None);
    assert!(
        debug
            .lines()
            .any(|l| l.contains("DEBUG") && l.contains("gc_k8s") && l.contains("connected")),
        "{debug}"
    );
    // -v: info, not debug.
    assert!(!dry(&["-v"], None).contains("DEBUG"));
    // JSON: one object per line, each with its level, target and message.
    let json = dry(&["-vv", "--log-format", "json"], None);
    let lines: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["target"]
            .as_str()
            .unwrap_or_default()
            .starts_with("gc_k8s")
            && l["level"] == "DEBUG"
            && l["message"].is_string()),
        "{json}"
    );
    // RUST_LOG wins: off silences even -vv; it can also ask for one crate alone.
    assert_eq!(dry(&["-vv"], Some("off")), "");
    let only = dry(&[], Some("gc_k8s=debug"));
    assert!(only.contains("gc_k8s") && only.contains("DEBUG"), "{only}");
    // The environment chooses the format too; -v and -q together are a usage error.
    let mut c = env.gc(&["run", "pods", "-o", "json", "-vv"], true);
    let out = c.env("GC_LOG_FORMAT", "json").output()?;
    let first = stderr(&out).lines().next().unwrap_or_default().to_owned();
    assert!(serde_json::from_str::<Value>(&first).is_ok(), "{first}");
    let out = env.gc(&["run", "pods", "-v", "-q"], true).output()?;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    Ok(())
}

/// StreamSpace's objects for session `id`, in `ns`: a Deployment, a Service, a PVC and a
/// Session, or only a Service.
async fn session(ns: &TestNamespace, crd: &ApiResource, id: &str, all: bool) -> Result {
    let post = PostParams::default();
    let labels = json!({"app": "streamspace-session", "session": id});
    let meta = json!({"name": id, "labels": labels});
    let service: Service = serde_json::from_value(json!({
        "metadata": meta, "spec": {"ports": [{"port": 3000}]},
    }))?;
    ns.api::<Service>().create(&post, &service).await?;
    if !all {
        return Ok(());
    }
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {"session": id}},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "s", "image": "x"}]}},
        },
    }))?;
    ns.api::<Deployment>().create(&post, &deployment).await?;
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": meta,
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    ns.api::<PersistentVolumeClaim>()
        .create(&post, &claim)
        .await?;
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": crd.api_version, "kind": crd.kind, "metadata": meta,
    }))?;
    Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), crd)
        .create(&post, &object)
        .await?;
    Ok(())
}

/// The uid of every object in `ns` by `kind/name`.
async fn uids(ns: &TestNamespace, crd: &ApiResource) -> Result<BTreeSet<(String, String)>> {
    let lp = ListParams::default();
    let mut out = BTreeSet::new();
    let mut add = |kind: &str, meta: kube::api::ObjectMeta| {
        let name = meta.name.unwrap_or_default();
        out.insert((format!("{kind}/{name}"), meta.uid.unwrap_or_default()));
    };
    for o in ns.api::<Deployment>().list(&lp).await? {
        add("Deployment", o.metadata);
    }
    for o in ns.api::<Service>().list(&lp).await? {
        add("Service", o.metadata);
    }
    for o in ns.api::<PersistentVolumeClaim>().list(&lp).await? {
        add("PersistentVolumeClaim", o.metadata);
    }
    let sessions = Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), crd);
    for o in sessions.list(&lp).await? {
        add("Session", o.metadata);
    }
    Ok(out)
}

/// `run sessions` in `ns` against the database at `db`, with `extra`.
fn run_sessions(ns: &TestNamespace, db: &str, extra: &[&str]) -> Output {
    let kubeconfig = ns.bed().kubeconfig_path();
    let head = ["run", "sessions", "-n", ns.name(), "--grace-hours", "0"];
    let at = [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--database-url",
        db,
    ];
    command()
        .args(common::live_unless_dry(&[&head[..], &at, extra].concat()))
        .env_remove("GC_NO_EVENTS")
        .output()
        .unwrap()
}

/// `(type, reason, kind/name, uid)` of every Event gc posted in `ns`.
async fn session_events(ns: &TestNamespace) -> Result<BTreeSet<(String, String, String, String)>> {
    Ok(session_events_all(ns).await?.into_iter().collect())
}

#[tokio::test]
async fn a_session_run_posts_an_event_on_each_session_collected_and_the_guard_on_the_namespace()
-> Result {
    let Some(db) = TestDatabase::fresh("events-sessions").await? else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    let crd = bed.install_session_crd().await?;
    one_live_session(&db).await?;

    // One orphan with its four objects beside a live session: each deleted object has its
    // Normal Event, with its uid.
    let ns = bed.namespace("events-sessions").await?;
    session(&ns, &crd, "gone-1", true).await?;
    session(&ns, &crd, "live-1", false).await?;
    let before = uids(&ns, &crd).await?;
    let dry = run_sessions(&ns, db.url(), &["--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(
        session_events(&ns).await?.is_empty(),
        "a dry run posts none"
    );
    let out = run_sessions(&ns, db.url(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    // One Normal Event on the session collected, on its `Session` object (with its uid),
    // naming the four objects deleted.
    let gone: Vec<&(String, String)> = before
        .iter()
        .filter(|(n, _)| n.ends_with("/gone-1"))
        .collect();
    assert_eq!(gone.len(), 4, "{before:?}");
    let on = gone
        .iter()
        .find(|(n, _)| n.starts_with("Session/"))
        .unwrap();
    let expected = BTreeSet::from([(
        "Normal".into(),
        "SessionCollected".into(),
        on.0.clone(),
        on.1.clone(),
    )]);
    assert_eq!(session_events(&ns).await?, expected);
    let api: Api<Event> = ns.api();
    let events = api.list(&ListParams::default()).await?.items;
    let collected = events
        .iter()
        .find(|e| seen(e).2 == "Session")
        .ok_or("no Event on the Session")?;
    let regarding = collected.regarding.clone().unwrap_or_default();
    assert_eq!(
        regarding.api_version.as_deref(),
        Some("stream.space/v1alpha1")
    );
    assert_eq!(collected.action.as_deref(), Some("Collect"));
    assert_eq!(
        collected.note.as_deref(),
        Some(
            "session gone-1: deleted Deployment/gone-1, PersistentVolumeClaim/gone-1, \
             Service/gone-1, Session.stream.space/gone-1 (no session gone-1 in the database)"
        )
    );

    // With `--event-per-object`, one Normal Event on each object deleted, with its uid.
    let each = bed.namespace("events-per-object").await?;
    session(&each, &crd, "gone-1", true).await?;
    session(&each, &crd, "live-1", false).await?;
    let before = uids(&each, &crd).await?;
    let out = run_sessions(&each, db.url(), &["--event-per-object"]);
    assert!(out.status.success(), "{}", text(&out));
    let expected: BTreeSet<_> = (before.iter())
        .filter(|(name, _)| name.ends_with("/gone-1"))
        .map(|(name, uid)| ("Normal".into(), "Deleted".into(), name.clone(), uid.clone()))
        .collect();
    assert_eq!(expected.len(), 4, "{before:?}");
    assert_eq!(session_events(&each).await?, expected);
    let events = each
        .api::<Event>()
        .list(&ListParams::default())
        .await?
        .items;
    let deployment = (events.iter())
        .find(|e| seen(e).2 == "Deployment")
        .ok_or("no Event on the Deployment")?;
    let regarding = deployment.regarding.clone().unwrap_or_default();
    assert_eq!(regarding.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(
        deployment.note.as_deref(),
        Some("deleted (no session gone-1 in the database)")
    );

    // The guard: two orphans of three is too many with a floor of 0. Nothing is deleted; one
    // Warning on the Namespace says why (none for the dry run).
    let guarded = bed.namespace("events-guard").await?;
    for id in ["gone-2", "gone-3", "live-1"] {
        session(&guarded, &crd, id, false).await?;
    }
    let kept = uids(&guarded, &crd).await?;
    let dry = run_sessions(&guarded, db.url(), &["--guard-floor", "0", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(3), "{}", text(&dry));
    assert!(session_events(&guarded).await?.is_empty());
    let out = run_sessions(&guarded, db.url(), &["--guard-floor", "0"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(uids(&guarded, &crd).await?, kept);
    let namespace = format!("Namespace/{}", guarded.name());
    assert_eq!(
        session_events(&guarded).await?,
        BTreeSet::from([(
            "Warning".into(),
            "GuardRefused".into(),
            namespace,
            String::new()
        )])
    );
    let api: Api<Event> = guarded.api();
    let guard = api.list(&ListParams::default()).await?.items;
    let note = guard[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("nothing deleted") && note.contains("2 of 3 sessions judged"),
        "{note}"
    );
    // `--no-events`: the same refusal, no Event.
    let out = run_sessions(&guarded, db.url(), &["--guard-floor", "0", "--no-events"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(session_events(&guarded).await?.len(), 1);
    Ok(())
}

/// A loopback address where nothing listens (a port free a moment ago).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A session run that fails before it reaches its namespaces (here its database is down) reports
/// as any failed run does: a failed run's metrics pushed for the namespace it names, an alert, a
/// Warning on the Namespace. With `-A` and no cluster to list the namespaces, the webhook alone
/// hears of it, once.
#[tokio::test]
async fn a_session_run_that_fails_before_its_namespaces_reports_the_failure() -> Result {
    let Some(gateway) = pushgateway() else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("events-db-down").await?;
    let down = format!("postgres://gc:gc@127.0.0.1:{}/streamspace", closed_port());
    let hook = Webhook::start();
    let out = run_sessions(
        &ns,
        &down,
        &["--pushgateway", &gateway, "--alert-webhook", &hook.url],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(stderr(&out).contains("cannot open the session table"));
    let texts = hook.texts();
    let [alert] = &texts[..] else {
        panic!("one alert: {texts:?}")
    };
    assert!(
        alert.contains(&format!(
            "gc sessions collector failed in namespace {}",
            ns.name()
        )) && alert.contains("cannot open the session table"),
        "{alert}"
    );
    let pushed_now = scrape(&gateway);
    let value = |name: &str, extra: Option<&str>| pushed(&pushed_now, name, ns.name(), extra);
    let sessions = Some(r#"collector="sessions""#);
    assert_eq!(
        value("gc_last_run_success", sessions),
        Some(0.0),
        "{pushed_now}"
    );
    assert_eq!(
        value("gc_last_run_errors", Some(r#"stage="run""#)),
        Some(1.0)
    );
    assert_eq!(value("gc_last_success_timestamp_seconds", sessions), None);
    let namespace = format!("Namespace/{}", ns.name());
    assert_eq!(
        session_events(&ns).await?,
        BTreeSet::from([(
            "Warning".into(),
            "RunFailed".into(),
            namespace,
            String::new()
        )])
    );

    let all = Webhook::start();
    let out = command()
        .args([
            "run",
            "sessions",
            "-A",
            "--database-url",
            &down,
            "--dry-run=none",
        ])
        .args(["--api-url", &format!("https://127.0.0.1:{}", closed_port())])
        .args(["--trust-certs", "--alert-webhook", &all.url])
        .args(["--pushgateway", &gateway])
        .output()?;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let texts = all.texts();
    let [alert] = &texts[..] else {
        panic!("one alert: {texts:?}")
    };
    assert!(
        alert.contains("gc sessions collector failed before it knew its namespaces (-A)")
            && alert.contains("cannot connect to the cluster"),
        "{alert}"
    );
    Ok(())
}

/// `(type, reason)` of every Event gc posted in `ns`, and how many of each.
async fn event_counts(
    ns: &TestNamespace,
) -> Result<std::collections::BTreeMap<(String, String), usize>> {
    let mut counts = std::collections::BTreeMap::new();
    for (type_, reason, _, _) in session_events_all(ns).await? {
        *counts.entry((type_, reason)).or_default() += 1;
    }
    Ok(counts)
}

/// Every Event gc posted in `ns`, as [`session_events`] shows them, duplicates kept.
async fn session_events_all(ns: &TestNamespace) -> Result<Vec<(String, String, String, String)>> {
    let api: Api<Event> = ns.api();
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some(CONTROLLER))
        .map(|e| {
            let (type_, reason, kind, name, uid) = seen(e);
            (type_, reason, format!("{kind}/{name}"), uid)
        })
        .collect())
}

/// How many orphaned ConfigMaps the stop test deletes: enough that a run takes a while.
const ORPHANS: usize = 200;

/// SIGTERM during a session run: the deletes sent stand (a Normal Event each), the rest are not
/// started: no Warning Event, no failure alert, no error counted, the last run's success and the
/// last success kept in the Pushgateway, only the attempt written; the run exits 1, naming the
/// signal. The next run deletes the rest.
#[tokio::test]
async fn sigterm_during_a_session_run_stops_it_without_reporting_a_failure() -> Result {
    let (Some(gateway), Some(db)) = (pushgateway(), TestDatabase::fresh("events-stop").await?)
    else {
        return Ok(());
    };
    let pool = db.pool().await?;
    sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    pool.close().await;
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("events-stop").await?;
    let maps = ns.api::<ConfigMap>();
    let mut created = tokio::task::JoinSet::new();
    for chunk in (0..ORPHANS).collect::<Vec<_>>().chunks(ORPHANS / 8) {
        let (maps, chunk) = (maps.clone(), chunk.to_vec());
        created.spawn(async move {
            for i in chunk {
                let map: ConfigMap = serde_json::from_value(json!({"metadata": {
                    "name": format!("gone-{i:04}"),
                    "labels": {"app": "streamspace-session", "session": format!("gone-{i:04}")},
                }}))?;
                maps.create(&PostParams::default(), &map).await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
    }
    while let Some(done) = created.join_next().await {
        done??;
    }
    let selected = ListParams::default().labels("app=streamspace-session");
    let left = async || -> Result<usize> { Ok(maps.list(&selected).await?.items.len()) };
    let hook = Webhook::start();
    let flags = |max_deletes: &str| {
        let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
        let mut c = command();
        c.args(["run", "sessions", "-n", ns.name(), "--grace-hours", "0"])
            .args(["--kubeconfig", &kubeconfig, "--database-url", db.url()])
            .args(["--kinds", "v1/ConfigMap/configmaps", "--override-guard"])
            .args(["--max-deletes", max_deletes, "--dry-run=none"])
            .args(["--pushgateway", &gateway, "--alert-webhook", &hook.url])
            .env_remove("GC_NO_EVENTS");
        c
    };
    let value = |name: &str| pushed(&scrape(&gateway), name, ns.name(), None);

    // A first run deletes one: a success.
    let out = flags("1").output()?;
    assert!(out.status.success(), "{}", text(&out));
    let success = value("gc_last_success_timestamp_seconds").ok_or("no last success")?;
    assert_eq!(value("gc_last_run_success"), Some(1.0));
    assert_eq!(left().await?, ORPHANS - 1);

    // The next is stopped once it deleted something.
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("run.log");
    let audit = dir.path().join("audit.jsonl");
    let mut child = flags("10000")
        .args(["--audit-log", audit.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while left().await? == ORPHANS - 1 {
        assert!(child.try_wait()?.is_none(), "the run ended before deleting");
        assert!(
            std::time::Instant::now() < deadline,
            "nothing deleted in 60s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    assert!(sent.success());
    let status = child.wait()?;
    let stderr = std::fs::read_to_string(&log)?;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: stopped by SIGTERM: ") && stderr.contains("not started"),
        "{stderr}"
    );
    let remaining = left().await?;
    let deleted = ORPHANS - 1 - remaining;
    eprintln!("the stopped run deleted {deleted}, left {remaining}");
    assert!(
        remaining > 0,
        "the signal came after the last delete: {stderr}"
    );
    let audited: Vec<Value> = std::fs::read_to_string(&audit)?
        .lines()
        .map(serde_json::from_str)
        .collect::<std::result::Result<_, _>>()?;
    let results = |prefix: &str| {
        audited
            .iter()
            .filter(|r| r["result"].as_str().is_some_and(|t| t.starts_with(prefix)))
            .count()
    };
    assert_eq!(
        (
            results("deleted"),
            results("not started: "),
            results("failed")
        ),
        (deleted, remaining, 0)
    );
    // Events: a Normal one on each session collected (each of one object), by either run; no
    // Warning.
    let counts = event_counts(&ns).await?;
    let collected = ("Normal".into(), "SessionCollected".into());
    assert_eq!(
        counts,
        std::collections::BTreeMap::from([(collected, deleted + 1)])
    );
    assert!(hook.texts().is_empty(), "no alert: {:?}", hook.texts());
    let now = scrape(&gateway);
    let value = |name: &str, extra: Option<&str>| pushed(&now, name, ns.name(), extra);
    assert_eq!(value("gc_last_run_success", None), Some(1.0), "{now}");
    assert_eq!(
        value("gc_last_success_timestamp_seconds", None),
        Some(success)
    );
    let attempt = value("gc_last_attempt_timestamp_seconds", None).unwrap_or_default();
    assert!(attempt > success, "{now}");
    assert_eq!(
        value("gc_last_run_errors", Some(r#"stage="delete""#)),
        Some(0.0)
    );
    assert_eq!(
        value("gc_last_run_objects_deleted", Some(r#"kind="ConfigMap""#)),
        Some(deleted as f64)
    );

    // The next run deletes the rest.
    let out = flags("10000").output()?;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(left().await?, 0);
    assert!(hook.texts().is_empty());
    Ok(())
}
