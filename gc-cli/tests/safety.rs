//! The safety promise tried as a user and as an adversary would, on a real API server: an
//! approved plan binds each Pod as reviewed and apply's own policy; a forged or keyed plan; an
//! archive over the ceiling after pinning; pins found whatever the labels; pins that cannot be
//! removed fail the run; the lock is per namespace; and a run killed with SIGKILL is finished by
//! an immediate rerun.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gc_core::ports::{Lock, Store as _};
use gc_core::pyjson::{self, Layout};
use gc_testbed::{FailedPod, TestBed, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

mod common;

use common::{COLLECT, PIN, Result, command, old, sqlite, target};

/// One namespace, a store, an archive folder and the flags every command shares.
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
    fn archives(&self) -> PathBuf {
        self.path("archives")
    }
    /// `gc-cli` with `args`, the connection, the store, the namespace and the archive folder.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = command();
        c.args(args)
            .args(["--kubeconfig", &self.kubeconfig, "--store", &self.store])
            .args(["-n", self.ns.name()])
            .env_remove("GC_SEAL_KEY");
        c
    }
    fn gc(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
    /// `head`, then the archive folder, JSON output and `extra`.
    fn json_args(&self, head: &[&str], extra: &[&str]) -> Vec<String> {
        let archives = self.archives();
        let tail = ["--archive-dir", archives.to_str().unwrap(), "-o", "json"];
        [head, &tail, extra]
            .concat()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }
    fn apply_args(&self, plan: &Path, extra: &[&str]) -> Vec<String> {
        let head = [
            "apply",
            plan.to_str().unwrap(),
            "--retention-seconds",
            "3600",
        ];
        self.json_args(&head, extra)
    }
    fn apply(&self, plan: &Path, extra: &[&str]) -> Output {
        self.gc(&strs(&self.apply_args(plan, extra)))
    }
    fn run_args(&self, extra: &[&str]) -> Vec<String> {
        let head = [
            "run",
            "pods",
            "--retention-seconds",
            "3600",
            "--max-pods",
            "50",
            "--dry-run",
            "false",
            "--auto-remediate",
        ];
        self.json_args(&head, extra)
    }
    fn run_pods(&self, extra: &[&str]) -> Output {
        self.gc(&strs(&self.run_args(extra)))
    }
    /// Plans with `--out` and apply's default policy (retention 3600).
    fn plan(&self, extra: &[&str]) -> PathBuf {
        let plan = self.path("plan.json");
        let mut args = vec![
            "plan",
            "pods",
            "--retention-seconds",
            "3600",
            "--out",
            plan.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(&self.gc(&args));
        plan
    }
    async fn pods(&self) -> Result<BTreeMap<String, Pod>> {
        let list = self.ns.api::<Pod>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|p| (p.metadata.name.clone().unwrap(), p))
            .collect())
    }
    async fn pinned(&self) -> Result<Vec<String>> {
        Ok(self
            .pods()
            .await?
            .into_iter()
            .filter(|(_, p)| finalizers(p).iter().any(|f| f == PIN))
            .map(|(n, _)| n)
            .collect())
    }
    /// Only the Pod `name` is left, and without any finalizer.
    async fn only_unpinned(&self, name: &str) -> Result {
        let left = self.pods().await?;
        assert_eq!(left.keys().collect::<Vec<_>>(), [name]);
        assert!(finalizers(&left[name]).is_empty());
        Ok(())
    }
    async fn add_pin(&self, name: &str) -> Result {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": [PIN]}}));
        self.ns
            .api::<Pod>()
            .patch(name, &PatchParams::default(), &patch)
            .await?;
        Ok(())
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn finalizers(p: &Pod) -> Vec<String> {
    p.metadata.finalizers.clone().unwrap_or_default()
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: &Output) -> Value {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("no report: {}", text(out)))
}

/// name -> outcome of every result and recovered Pod.
fn outcomes(report: &Value) -> BTreeMap<String, String> {
    ["recovered", "results"]
        .iter()
        .flat_map(|k| report[k].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Re-seals a plan document as anyone can: the unkeyed digest recomputed.
fn reseal(mut doc: Value) -> String {
    doc.as_object_mut().unwrap().remove("digest");
    let text = pyjson::to_string(&doc, Layout::Canonical);
    let hex: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    doc["digest"] = format!("sha256:{hex}").into();
    doc.to_string()
}

/// Defect 1: a Pod changed after the plan (an annotation) is `changed` and left alone.
#[tokio::test]
async fn an_approved_plan_binds_each_pod_as_reviewed() -> Result {
    let env = Env::new("bind").await?;
    for name in ["a", "b", "c"] {
        target(&env.ns, name).await?;
    }
    let plan = env.plan(&[]);
    let patch =
        Patch::Merge(json!({"metadata": {"annotations": {"example.com/note": "do-not-delete"}}}));
    env.ns
        .api::<Pod>()
        .patch("b", &PatchParams::default(), &patch)
        .await?;
    let out = env.apply(&plan, &[]);
    let r = ok(&out);
    let got = outcomes(&r);
    assert_eq!(got["a"], "collected", "{r:#}");
    assert_eq!(got["c"], "collected", "{r:#}");
    assert_eq!(got["b"], "changed", "{r:#}");
    let b = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "b")
        .unwrap();
    assert!(
        b["message"].as_str().unwrap().contains("resourceVersion"),
        "{b}"
    );
    env.only_unpinned("b").await
}

/// Defect 2: a re-sealed plan cannot bring its own policy; the keyed seal admits only holders
/// of the key; the lifetime is bounded.
#[tokio::test]
async fn a_forged_plan_is_refused_and_only_key_holders_can_approve() -> Result {
    let env = Env::new("forged").await?;
    let pods = env.ns.api::<Pod>();
    target(&env.ns, "labelled").await?;
    let recent = FailedPod::new("unlabelled-recent")
        .finished_at(Timestamp::from_second(Timestamp::now().as_second() - 60)?)
        .create(&pods)
        .await?;
    FailedPod::new("foreign")
        .label(COLLECT, "true")
        .finalizer("example.com/keep")
        .finished_at(old())
        .create(&pods)
        .await?;
    let before = env.pods().await?;
    let plan = env.path("unkeyed.json");
    std::fs::rename(env.plan(&[]), &plan)?;
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan)?)?;
    let mut forged = doc.clone();
    forged["config"]["retentionSeconds"] = 1.into();
    forged["config"]["collectLabel"] = "example.com/any".into();
    forged["config"]["pinFinalizer"] = "example.com/keep".into();
    let mut extra = forged["targets"][0].clone();
    extra["name"] = "unlabelled-recent".into();
    extra["uid"] = recent.metadata.uid.clone().unwrap().into();
    extra["resourceVersion"] = recent.metadata.resource_version.clone().unwrap().into();
    forged["targets"].as_array_mut().unwrap().push(extra);
    let forged_path = env.path("forged.json");
    std::fs::write(&forged_path, reseal(forged))?;
    let out = env.apply(&forged_path, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("retention_seconds"), "{}", text(&out));
    // The same forgery applied with flags that match its policy still meets apply's checks.
    let mut long = doc.clone();
    long["expiresAt"] = (doc["createdAt"].as_f64().unwrap() + 31.0 * 365.0 * 86_400.0).into();
    std::fs::write(&forged_path, reseal(long))?;
    let out = env.apply(&forged_path, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("lifetime"), "{}", text(&out));
    let out = env.gc(&["plan", "pods", "--ttl-seconds", "100000", "--out", "x.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("ttl_seconds"), "{}", text(&out));
    assert_eq!(env.pods().await?, before, "refusals change nothing");

    // Keyed: a plan sealed with the key; apply without it, or with another, is refused.
    let key = env.path("seal.key");
    std::fs::write(&key, "a-secret-key-of-more-than-16-bytes\n")?;
    let other = env.path("other.key");
    std::fs::write(&other, "another-secret-key-of-32-bytes!!")?;
    let keyed = env.plan(&["--seal-key-file", key.to_str().unwrap()]);
    let out = env.apply(&keyed, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("sealed with a key"), "{}", text(&out));
    let out = env.apply(&keyed, &["--seal-key-file", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("altered"), "{}", text(&out));
    // An unkeyed plan is refused where apply holds the key (GC_SEAL_KEY, as from a Secret).
    let args = env.apply_args(&plan, &[]);
    let out = env
        .command(&strs(&args))
        .env("GC_SEAL_KEY", "a-secret-key-of-more-than-16-bytes")
        .output()?;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(env.pods().await?, before, "refusals change nothing");
    let args = env.apply_args(&keyed, &[]);
    let out = env
        .command(&strs(&args))
        .env("GC_SEAL_KEY", "a-secret-key-of-more-than-16-bytes")
        .output()?;
    let got = outcomes(&ok(&out));
    assert_eq!(
        got,
        BTreeMap::from([("labelled".into(), "collected".into())])
    );
    let left = env.pods().await?;
    assert_eq!(
        left.keys().collect::<Vec<_>>(),
        ["foreign", "unlabelled-recent"]
    );
    assert_eq!(finalizers(&left["foreign"]), ["example.com/keep"]);
    Ok(())
}

/// Defect 3: an archive over the ceiling after pinning releases the pin and reports `tooLarge`;
/// a pin left by an earlier run never wedges the collector behind a failing plan.
#[tokio::test]
async fn an_archive_over_the_ceiling_after_pinning_releases_the_pin() -> Result {
    let env = Env::new("ceiling").await?;
    FailedPod::new("big")
        .label(COLLECT, "true")
        .annotation("example.com/padding", &"x".repeat(1200))
        .finished_at(old())
        .create(&env.ns.api::<Pod>())
        .await?;
    let planned = ok(&env.gc(&["plan", "pods", "--retention-seconds", "3600", "-o", "json"]));
    let bytes = planned["targets"][0]["archiveBytes"].as_u64().unwrap();
    let ceiling = (bytes + 8).to_string();
    let plan = env.plan(&["--max-archive-bytes", &ceiling]);
    let out = env.apply(&plan, &["--max-archive-bytes", &ceiling]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(outcomes(&report(&out))["big"], "tooLarge", "{}", text(&out));
    assert!(env.pinned().await?.is_empty(), "the pin is released");
    assert!(env.pods().await?.contains_key("big"));

    // A pin left behind, and a ceiling the pinned Pod exceeds: recovery runs before the plan.
    env.add_pin("big").await?;
    let below = (bytes - 8).to_string();
    let out = env.run_pods(&["--max-archive-bytes", &below]);
    assert_eq!(out.status.code(), Some(3), "the plan fails: {}", text(&out));
    assert!(
        env.pinned().await?.is_empty(),
        "recovery ran first: {}",
        text(&out)
    );
    Ok(())
}

/// Defect 4: recovery finds the pin by the finalizer, whatever the labels.
#[tokio::test]
async fn recovery_finds_every_pin_whatever_the_labels() -> Result {
    let env = Env::new("unlabelled-pin").await?;
    let pods = env.ns.api::<Pod>();
    for name in ["unlabelled", "deleting"] {
        FailedPod::new(name).finalizer(PIN).create(&pods).await?;
    }
    pods.delete("deleting", &DeleteParams::default()).await?;
    let out = env.run_pods(&[]);
    let got = outcomes(&ok(&out));
    assert_eq!(got["unlabelled"], "released", "{}", text(&out));
    assert_eq!(got["deleting"], "released", "{}", text(&out));
    env.only_unpinned("unlabelled").await
}

/// Defect 9: a pin the run finds and cannot remove fails the run and is named.
#[tokio::test]
async fn a_pin_left_at_the_end_of_a_live_run_fails_it() -> Result {
    let env = Env::new("pin-left").await?;
    FailedPod::new("pending")
        .phase("Pending")
        .finalizer(PIN)
        .create(&env.ns.api::<Pod>())
        .await?;
    let out = env.run_pods(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("pin is still on pending"),
        "{}",
        text(&out)
    );
    assert_eq!(report(&out)["pinsLeft"], json!(["pending"]));
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    env.ns
        .api::<Pod>()
        .patch("pending", &PatchParams::default(), &patch)
        .await?;
    Ok(())
}

/// Defect 5: one lock per namespace, whatever the cluster id.
#[tokio::test]
async fn the_run_lock_is_per_namespace_whatever_the_cluster_id() -> Result {
    let env = Env::new("lock").await?;
    target(&env.ns, "a").await?;
    let other = gc_k8s::KubeCluster::new(env.ns.client().clone());
    assert!(
        other
            .try_acquire(env.ns.name(), "gc-pods", "another-run", 60)
            .await?
    );
    let out = env.run_pods(&["--cluster-id", "other-cluster", "--lock-wait-seconds", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("another run holds lease gc-pods"),
        "{}",
        text(&out)
    );
    other
        .release(env.ns.name(), "gc-pods", "another-run")
        .await?;
    assert!(env.pods().await?.contains_key("a"));
    Ok(())
}

/// Defect 5 and the crash promise: a live run killed with SIGKILL at several points, then an
/// immediate rerun with default lock flags: no pin left, every deleted Pod archived and
/// receipted, exit 0, within one lease duration plus its work.
#[tokio::test]
async fn a_rerun_right_after_sigkill_finishes_the_work() -> Result {
    for (round, kill_after) in [1usize, 3, 5].into_iter().enumerate() {
        kill_then_rerun(&format!("crash-{round}"), 6, kill_after, &[]).await?;
    }
    Ok(())
}

/// The crash promise with many Pods in flight: a run working on 16 at once, killed with SIGKILL
/// mid-batch (Pods pinned, archived, receipted, deleted, released in every mix), leaves nothing
/// its rerun does not finish.
#[tokio::test]
async fn a_run_killed_with_many_pods_in_flight_is_finished_by_the_next() -> Result {
    kill_then_rerun("crash-batch", 40, 12, &["--concurrency", "16"]).await
}

/// `pods` Pods in a namespace `name`, a live run (with `extra`) killed with SIGKILL once
/// `kill_after` archives were written, then the same run again at once: see
/// [`a_rerun_right_after_sigkill_finishes_the_work`].
async fn kill_then_rerun(name: &str, pods: usize, kill_after: usize, extra: &[&str]) -> Result {
    let env = Env::new(name).await?;
    let mut uids = BTreeMap::new();
    for i in 0..pods {
        let p = target(&env.ns, &format!("t-{i}")).await?;
        uids.insert(p.metadata.name.unwrap(), p.metadata.uid.unwrap());
    }
    let args = env.run_args(extra);
    let mut child = env
        .command(&strs(&args))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    // Kill once `kill_after` archives were written (or the run ended).
    let archives = env.archives();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let written = walk(&archives).len();
        if written >= kill_after || child.try_wait()?.is_some() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill()?;
    child.wait()?;
    let started = Instant::now();
    let out = env.run_pods(extra);
    let took = started.elapsed();
    ok(&out);
    // Within one lease (30 s) plus the work (2 s settle each at most), well under the lock wait.
    let work = u64::try_from(pods).unwrap() * 3;
    assert!(
        took < Duration::from_secs(30 + work + 10),
        "{name}: took {took:?}"
    );
    assert!(env.pinned().await?.is_empty(), "{name}");
    assert!(env.pods().await?.is_empty(), "{name}: {}", text(&out));
    let store = gc_store::open(&env.store).await?;
    for (pod, uid) in &uids {
        let receipt = store
            .get_receipt("primary", uid)
            .await?
            .unwrap_or_else(|| panic!("{name}: no receipt for {pod}"));
        let path = receipt.uri.strip_prefix("file://").unwrap();
        let sum: String = Sha256::digest(std::fs::read(path)?)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sum, receipt.sha256, "{name}: {pod}");
    }
    store.close().await;
    Ok(())
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files
}

/// A Pod without `finishedAt` is held from its first observation as recorded (the store, or a
/// ledger file apply is given): a plan for another instant (`--now`) records nothing, and a plan
/// naming an earlier first observation than any record, or one nothing records, collects
/// nothing. A Pod seen moments ago stays.
#[tokio::test]
async fn a_first_observation_is_never_backdated() -> Result {
    let env = Env::new("backdate").await?;
    FailedPod::new("fresh")
        .label(COLLECT, "true")
        .create(&env.ns.api::<Pod>())
        .await?;
    // No container status, so no `finishedAt`: retention runs from the first observation.
    let unfinished = Patch::Merge(json!({"status": {"containerStatuses": null}}));
    let fresh = env
        .ns
        .api::<Pod>()
        .patch_status("fresh", &PatchParams::default(), &unfinished)
        .await?;
    let uid = fresh.metadata.uid.clone().unwrap();
    // `gc-cli` with `args` and the store `store` instead of the usual one.
    let with_store = |store: &str, args: &[String]| {
        command()
            .args(args)
            .args(["--kubeconfig", &env.kubeconfig, "--store", store])
            .args(["-n", env.ns.name()])
            .env_remove("GC_SEAL_KEY")
            .output()
            .unwrap()
    };
    let outcome = |out: &Output| -> Value { ok(out)["results"][0].clone() };

    // A plan for 2020 records nothing; the run after it records the Pod now, and keeps it.
    let past = [
        "--now",
        "2020-01-01T00:00:00Z",
        "--retention-seconds",
        "3600",
    ];
    ok(&env.gc(&[&["plan", "pods"][..], &past].concat()));
    let export = command()
        .args([
            "ledger",
            "export",
            "--cluster-id",
            "primary",
            "-n",
            env.ns.name(),
        ])
        .args(["--store", &env.store])
        .output()?;
    assert_eq!(ok(&export), json!({}));
    let report = ok(&env.run_pods(&[]));
    assert_eq!(report["results"], json!([]), "{report:#}");
    assert!(env.pods().await?.contains_key("fresh"));

    // A plan made from a ledger file that backdates the Pod: it is a target, but apply takes
    // the latest first observation recorded (the store's, now), so it is held.
    let ledger = env.path("ledger.json");
    let backdated = json!({ &uid: {"first": 1_577_836_800.0, "name": "fresh"} });
    std::fs::write(&ledger, backdated.to_string())?;
    let out = env.path("out.json");
    let file = ["--ledger", ledger.to_str().unwrap()];
    let plan = env.plan(&[&file[..], &["--ledger-out", out.to_str().unwrap()]].concat());
    assert!(std::fs::read_to_string(&plan)?.contains("\"fresh\""));
    let held = outcome(&env.apply(&plan, &[]));
    assert_eq!(held["outcome"], "skipped", "{held:#}");
    let reason = held["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("retention has not passed"), "{held:#}");
    // With a store that records nothing, the plan's value is not taken either.
    let empty = sqlite(env.dir.path(), "empty.sqlite3");
    let held = outcome(&with_store(&empty, &env.apply_args(&plan, &[])));
    assert_eq!(held["outcome"], "skipped", "{held:#}");
    // The ledger file given to apply is a record as the store is: with the store's (now) the
    // latest wins; alone, its record stands, but never earlier than the Pod's creation, seconds
    // ago: held at a retention of an hour.
    let held = outcome(&env.apply(&plan, &file));
    assert_eq!(held["outcome"], "skipped", "{held:#}");
    let held = outcome(&with_store(&empty, &env.apply_args(&plan, &file)));
    assert_eq!(held["outcome"], "skipped", "{held:#}");
    assert!(env.pods().await?.contains_key("fresh"));
    // At a retention of two seconds, past since its creation: without a record the apply's
    // clock is the first observation (held); with the ledger file's, bounded by the creation,
    // it is collected.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let short = ["--retention-seconds", "2"];
    let plan2 = env.path("plan2.json");
    let planned = [
        &["plan", "pods"][..],
        &short,
        &file,
        &["--ledger-out", out.to_str().unwrap()],
    ];
    ok(&env.gc(&[&planned.concat()[..], &["--out", plan2.to_str().unwrap()]].concat()));
    let apply2 = |extra: &[&str]| {
        let head = [&["apply", plan2.to_str().unwrap()][..], &short].concat();
        with_store(&empty, &env.json_args(&head, extra))
    };
    let held = outcome(&apply2(&[]));
    assert_eq!(held["outcome"], "skipped", "{held:#}");
    assert!(env.pods().await?.contains_key("fresh"));
    let collected = outcome(&apply2(&file));
    assert_eq!(collected["outcome"], "collected", "{collected:#}");
    assert!(!env.pods().await?.contains_key("fresh"));
    Ok(())
}
