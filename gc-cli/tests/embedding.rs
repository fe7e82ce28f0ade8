//! The embedding example `service` (gc-runtime, as a control plane embeds it) against `gc-cli run
//! pods`, each on its own copy of one fixture on the real API server: the same Pods collected
//! with verified archives and receipts, the same report, the same metrics, the same Events; the
//! run lock renewed during a run longer than a third of its lease; a pin left failing both; and
//! two example processes started at once as pid 1 with one host name never both acting.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gc_testbed::{FailedPod, TestNamespace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};

mod common;

use common::{COLLECT, PIN, Result, example, gc_cli, namespace, ok, sqlite, target};

/// Where one run keeps its store, archives and metrics file.
struct Place {
    dir: PathBuf,
}

impl Place {
    fn new(root: &Path, name: &str) -> Self {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }
    fn store(&self) -> String {
        sqlite(&self.dir, "gc.sqlite3")
    }
    fn archives(&self) -> String {
        self.dir.join("archives").display().to_string()
    }
    fn metrics(&self) -> String {
        self.dir.join("gc.prom").display().to_string()
    }
    /// The flags both the CLI and the example take, with these places.
    fn flags(&self, extra: &[&str]) -> Vec<String> {
        let mut flags: Vec<String> = vec![
            "--retention-seconds".into(),
            "3600".into(),
            "--store".into(),
            self.store(),
            "--archive-dir".into(),
            self.archives(),
            "--metrics-file".into(),
            self.metrics(),
            "--lock-lease-seconds".into(),
            "5".into(),
        ];
        flags.extend(extra.iter().map(|s| (*s).to_owned()));
        flags
    }
}

/// `gc-cli run pods` live in `ns`, its report as JSON.
fn cli(ns: &TestNamespace, place: &Place, extra: &[&str]) -> Output {
    let kubeconfig = kubeconfig();
    let mut args: Vec<String> = ["run", "pods", "-n", ns.name(), "--kubeconfig", &kubeconfig]
        .map(str::to_owned)
        .to_vec();
    args.extend(place.flags(extra));
    args.extend(["--dry-run=none", "--auto-remediate", "-o", "json"].map(str::to_owned));
    gc_cli(&args)
}

/// The example `service` live, once, in `ns` (whose name is as long as the CLI's namespace's:
/// archives name their namespace, and the metrics count their bytes).
fn service(ns: &TestNamespace, place: &Place, extra: &[&str]) -> Command {
    let mut c = example("service");
    c.env("KUBECONFIG", kubeconfig())
        .args(["--namespace", ns.name(), "--live", "--once"])
        .args(place.flags(extra));
    c
}

/// The test bed's kubeconfig (every namespace of this file is in the shared test bed).
fn kubeconfig() -> String {
    KUBECONFIG.get().expect("a namespace was made").clone()
}

static KUBECONFIG: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A fresh namespace of the shared test bed.
async fn fresh(prefix: &str) -> Result<TestNamespace> {
    let (bed, ns) = namespace(prefix).await?;
    KUBECONFIG.get_or_init(|| bed.kubeconfig_path().display().to_string());
    Ok(ns)
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Each Pod of a report, by name: what the run did to it.
fn outcomes(report: &Value) -> BTreeMap<String, String> {
    let mut got = BTreeMap::new();
    for key in ["recovered", "results"] {
        for r in report[key].as_array().unwrap() {
            let outcome = r["outcome"].as_str().unwrap().to_owned();
            got.insert(r["name"].as_str().unwrap().to_owned(), outcome);
        }
    }
    got
}

/// The lines of a metrics file, sorted (a family's samples come in no fixed order), with the
/// namespace named `NS` and every timestamp and duration `T`.
fn metrics(place: &Place, namespace: &str) -> Vec<String> {
    let text = std::fs::read_to_string(place.metrics()).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| {
            let line = line.replace(namespace, "NS");
            match line.rsplit_once(' ') {
                Some((name, _)) if !line.starts_with('#') && has_time(name) => format!("{name} T"),
                _ => line,
            }
        })
        .collect();
    lines.sort();
    lines
}

fn has_time(name: &str) -> bool {
    name.contains("timestamp") || name.contains("duration")
}

/// The Events in `ns`: (object, type, reason), sorted.
async fn events(ns: &TestNamespace) -> Result<Vec<(String, String, String)>> {
    let list = ns.api::<Event>().list(&ListParams::default()).await?;
    let mut got: Vec<_> = list
        .items
        .into_iter()
        // gc's own: the API server's controllers post theirs too.
        .filter(|e| e.reporting_controller.as_deref() == Some("gc.example.com/gc-cli"))
        .map(|e| {
            let name = e.regarding.and_then(|r| r.name).unwrap_or_default();
            let name = name.replace(ns.name(), "NS");
            (
                name,
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
            )
        })
        .collect();
    got.sort();
    Ok(got)
}

/// The Pods left in `ns`.
async fn pods(ns: &TestNamespace) -> Result<BTreeSet<String>> {
    let list = ns.api::<Pod>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect())
}

/// `due` Pods past retention, and one not yet.
async fn fixture(ns: &TestNamespace, due: usize) -> Result {
    for i in 0..due {
        target(ns, &format!("due-{i:02}")).await?;
    }
    FailedPod::new("recent")
        .label(COLLECT, "true")
        .create(&ns.api::<Pod>())
        .await?;
    Ok(())
}

/// `archives verify` of `place`: every receipt matches its archive; the number of receipts.
fn verified(place: &Place) -> usize {
    let args = [
        "archives",
        "verify",
        "--store",
        &place.store(),
        "--archive-dir",
        &place.archives(),
        "-o",
        "json",
    ];
    let out = ok(&gc_cli(&args));
    let doc: Value = serde_json::from_str(&out).unwrap();
    let checked = doc.as_array().unwrap();
    checked.iter().filter(|c| c["result"] == "ok").count()
}

/// Every (holder, renewTime) the Lease `gc-pods` of `ns` shows until `until` returns true.
async fn watch_lease(
    ns: &TestNamespace,
    mut until: impl FnMut() -> bool,
) -> Result<BTreeSet<(String, String)>> {
    let leases = ns.api::<Lease>();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !until() && Instant::now() < deadline {
        if let Some(lease) = leases.get_opt("gc-pods").await? {
            let spec = lease.spec.unwrap_or_default();
            if let (Some(holder), Some(renewed)) = (spec.holder_identity, spec.renew_time) {
                seen.insert((holder, renewed.0.to_string()));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(seen)
}

#[tokio::test]
async fn the_example_and_the_cli_collect_alike() -> Result {
    const DUE: usize = 12;
    let by_cli = fresh("embed-by-cli").await?;
    let by_example = fresh("embed-by-svc").await?;
    fixture(&by_cli, DUE).await?;
    fixture(&by_example, DUE).await?;
    let dir = tempfile::tempdir()?;
    let (cli_place, example_place) = (Place::new(dir.path(), "cli"), Place::new(dir.path(), "ex"));
    let max = ["--max-pods", "12"];

    let out = cli(&by_cli, &cli_place, &max);
    let cli_report: Value = serde_json::from_str(&ok(&out))?;

    let out = service(&by_example, &example_place, &max).output()?;
    assert!(out.status.success(), "{}", text(&out));
    let example_report: Value = serde_json::from_str(String::from_utf8(out.stdout)?.trim())?;

    // The same outcome for every Pod, and the same Pods left.
    let collected = outcomes(&cli_report);
    assert_eq!(collected.len(), DUE, "{cli_report}");
    assert!(collected.values().all(|o| o == "collected"), "{cli_report}");
    assert_eq!(outcomes(&example_report), collected, "{example_report}");
    assert_eq!(pods(&by_cli).await?, BTreeSet::from(["recent".to_owned()]));
    assert_eq!(pods(&by_example).await?, pods(&by_cli).await?);
    // Every archive verified against its receipt, in each store.
    assert_eq!(verified(&cli_place), DUE);
    assert_eq!(verified(&example_place), DUE);
    // The same metrics, but for the namespace and the times.
    let cli_metrics = metrics(&cli_place, by_cli.name());
    let deleted = format!(
        r#"gc_last_run_objects_deleted{{collector="pods",kind="Pod",namespace="NS"}} {DUE}"#
    );
    assert!(cli_metrics.contains(&deleted), "{cli_metrics:?}");
    assert_eq!(metrics(&example_place, by_example.name()), cli_metrics);
    // The same Events.
    let cli_events = events(&by_cli).await?;
    assert_eq!(cli_events.len(), DUE, "{cli_events:?}");
    assert_eq!(events(&by_example).await?, cli_events);
    Ok(())
}

/// Each receipt takes the store 0.4 s (a trigger in the real PostgreSQL), so the example's run
/// of 8 Pods lasts over 3 s: its 5-second lease is renewed (every third of it) while it works.
#[tokio::test]
async fn the_example_renews_its_lease_during_a_run_longer_than_a_third_of_it() -> Result {
    const DUE: usize = 8;
    let Some(db) = gc_testbed::TestDatabase::fresh("embed-renew").await? else {
        return Ok(());
    };
    let ns = fresh("embed-renew").await?;
    fixture(&ns, DUE).await?;
    // The store's tables exist once anything opened it; then each receipt is slowed down.
    ok(&gc_cli(&["archives", "list", "--store", db.url()]));
    let pool = db.pool().await?;
    sqlx::raw_sql(
        "CREATE FUNCTION gc_slow() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN PERFORM pg_sleep(0.4); RETURN NEW; END $$; \
         CREATE TRIGGER gc_slow BEFORE INSERT OR UPDATE ON gc_receipts \
         FOR EACH ROW EXECUTE FUNCTION gc_slow();",
    )
    .execute(&pool)
    .await?;
    let dir = tempfile::tempdir()?;
    let place = Place::new(dir.path(), "ex");
    // The last `--store` given is the one the example uses.
    let mut service = service(&ns, &place, &["--max-pods", "8", "--store", db.url()]);
    let started = Instant::now();
    let mut child = service
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let seen = watch_lease(&ns, || child.try_wait().unwrap().is_some()).await?;
    let took = started.elapsed();
    let out = child.wait_with_output()?;
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_str(String::from_utf8(out.stdout)?.trim())?;
    let collected = outcomes(&report);
    assert_eq!(collected.len(), DUE, "{report}");
    assert!(collected.values().all(|o| o == "collected"), "{report}");
    assert!(took > Duration::from_secs(3), "the run took {took:?}");
    // One holder, seen with at least two renew times: the lease was renewed during the run.
    let holders: BTreeSet<&String> = seen.iter().map(|(holder, _)| holder).collect();
    assert_eq!(holders.len(), 1, "{seen:?}");
    assert!(
        seen.len() >= 2,
        "the Lease was never seen renewed: {seen:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_pin_left_fails_the_example_as_it_fails_the_cli() -> Result {
    let by_cli = fresh("embed-pin-cli").await?;
    let by_example = fresh("embed-pin-svc").await?;
    for ns in [&by_cli, &by_example] {
        FailedPod::new("pending")
            .phase("Pending")
            .finalizer(PIN)
            .create(&ns.api::<Pod>())
            .await?;
    }
    let dir = tempfile::tempdir()?;
    let (cli_place, example_place) = (Place::new(dir.path(), "cli"), Place::new(dir.path(), "ex"));
    let by_the_cli = cli(&by_cli, &cli_place, &[]);
    let by_the_example = service(&by_example, &example_place, &[]).output()?;
    for out in [&by_the_cli, &by_the_example] {
        assert_eq!(out.status.code(), Some(1), "{}", text(out));
        assert!(
            text(out).contains("the pin is still on pending"),
            "{}",
            text(out)
        );
    }
    let cli_metrics = metrics(&cli_place, by_cli.name());
    let left = r#"gc_last_run_errors{collector="pods",namespace="NS",stage="PinLeft"} 1"#;
    assert!(cli_metrics.iter().any(|l| l == left), "{cli_metrics:?}");
    assert_eq!(metrics(&example_place, by_example.name()), cli_metrics);
    let unpin = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    for ns in [&by_cli, &by_example] {
        let pods = ns.api::<Pod>();
        pods.patch("pending", &PatchParams::default(), &unpin)
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn two_examples_started_at_once_as_pid_1_on_one_host_never_both_act() -> Result {
    const DUE: usize = 10;
    let ns = fresh("embed-pid1").await?;
    fixture(&ns, DUE).await?;
    let dir = tempfile::tempdir()?;
    let places = [Place::new(dir.path(), "a"), Place::new(dir.path(), "b")];
    // Each process is pid 1 of a pid namespace of its own, as in a container, with one host name.
    let mut children = Vec::new();
    for place in &places {
        let service = service(&ns, place, &["--max-pods", "10"]);
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--kill-child"])
            .arg(service.get_program())
            .args(service.get_args())
            .envs(service.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .env("HOSTNAME", "gc-0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push(c.spawn()?);
    }
    let mut done = [false, false];
    let seen = watch_lease(&ns, || {
        for (child, done) in children.iter_mut().zip(&mut done) {
            *done = *done || child.try_wait().unwrap().is_some();
        }
        done.iter().all(|d| *d)
    })
    .await?;
    let mut reports = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        assert!(out.status.success(), "{}", text(&out));
        reports.push(serde_json::from_str::<Value>(
            String::from_utf8(out.stdout)?.trim(),
        )?);
    }
    // One collected every Pod; the other waited for the lock and found nothing left to do.
    let mut collected: Vec<usize> = reports.iter().map(|r| outcomes(r).len()).collect();
    collected.sort_unstable();
    assert_eq!(collected, [0, DUE], "{reports:?}");
    // The holders were pid 1 on host gc-0, and told apart.
    assert!(!seen.is_empty(), "the Lease was never seen held");
    for (holder, _) in &seen {
        assert!(holder.starts_with("gc-0-1-"), "{holder}");
    }
    assert_eq!(pods(&ns).await?, BTreeSet::from(["recent".to_owned()]));
    Ok(())
}

/// An archive URL that is no object store's fails each namespace of a live run at stage `run`,
/// as the run met it: failed-run metrics and a Warning on the Namespace, exit 2 for one
/// namespace (its usage error) and 1 for several, each named; nothing is pinned.
#[tokio::test]
async fn a_bad_archive_url_fails_each_namespace_with_its_metrics_and_event() -> Result {
    let (a, b) = (
        fresh("embed-badurl-a").await?,
        fresh("embed-badurl-b").await?,
    );
    for ns in [&a, &b] {
        target(ns, "due").await?;
    }
    let dir = tempfile::tempdir()?;
    let metrics = dir.path().join("gc.prom").display().to_string();
    let kubeconfig = kubeconfig();
    let live = |namespaces: &[&str]| {
        let mut args = vec!["run", "pods", "--kubeconfig", &kubeconfig];
        for ns in namespaces {
            args.extend(["-n", ns]);
        }
        args.extend([
            "--archive-url",
            "http://bucket/x",
            "--metrics-file",
            &metrics,
        ]);
        args.extend(["--dry-run=none", "--auto-remediate"]);
        common::command()
            .args(&args)
            .env_remove("GC_ARCHIVE_DIR")
            .env_remove("GC_ARCHIVE_URL")
            .output()
            .unwrap()
    };
    let out = live(&[a.name()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("invalid --archive-url"),
        "{}",
        text(&out)
    );
    let file = std::fs::read_to_string(&metrics)?;
    let failed = format!(
        r#"gc_last_run_errors{{collector="pods",namespace="{}",stage="run"}} 1"#,
        a.name()
    );
    assert!(file.contains(&failed), "{file}");
    let out = live(&[a.name(), b.name()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("2 of 2 namespaces failed"),
        "{}",
        text(&out)
    );
    let file = std::fs::read_to_string(&metrics)?;
    assert!(
        file.contains(&format!(r#"namespace="{}",stage="run"}} 1"#, b.name())),
        "{file}"
    );
    for ns in [&a, &b] {
        let warnings: Vec<String> = ns
            .api::<Event>()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reporting_controller.as_deref() == Some("gc.example.com/gc-cli"))
            .filter_map(|e| e.reason)
            .collect();
        assert!(warnings.iter().any(|r| r == "RunFailed"), "{warnings:?}");
        let pod = ns.api::<Pod>().get("due").await?;
        assert!(pod.metadata.finalizers.unwrap_or_default().is_empty());
    }
    Ok(())
}
