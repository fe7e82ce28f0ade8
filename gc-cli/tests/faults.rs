//! The failed-Pod collector under faults of what it depends on, on the real API server and a
//! real S3-compatible server behind a fault proxy (`gc_testbed::FaultProxy`): a key that may
//! list but not write, an outage, an archive write that fails after the pin, an upload
//! delivered after the run gave up, and a run frozen past its lease while another run works.
//! In each, no pin outlives the fault (but on a Pod being deleted, whose archive is owed), no
//! receipted archive is replaced, and a run that lost its lock writes nothing more. A run whose
//! bucket does not exist stops before any pin.
//!
//! Every test runs against two S3-compatible servers (`gc_testbed::S3Kind`): `s3s-fs`, and
//! `moto`, which answers as AWS does (`NoSuchBucket` on a write into a missing bucket, where
//! `s3s-fs` takes it): `s3s_fs::NAME` and `moto::NAME`.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use gc_testbed::{
    FailedPod, Fault, FaultProxy, S3Kind, S3Server, StallProxy, TestBed, TestNamespace,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams};

mod common;

use common::{
    COLLECT, PIN, Result, command, ok, old, snapshot, sqlite, target, with_s3_credentials,
};

const BUCKET: &str = "diagnostics";
const URL: &str = "s3://diagnostics/gc";

/// Each named test once against each server, as `s3s_fs::NAME` and `moto::NAME`.
macro_rules! against_each_server {
    ($($name:ident),* $(,)?) => {
        mod s3s_fs {
            $(
                #[tokio::test]
                async fn $name() -> super::Result {
                    super::$name(super::S3Kind::S3sFs).await
                }
            )*
        }
        mod moto {
            $(
                #[tokio::test]
                async fn $name() -> super::Result {
                    super::$name(super::S3Kind::Moto).await
                }
            )*
        }
    };
}

against_each_server!(
    a_missing_bucket_stops_every_run_before_any_pin,
    a_key_that_may_list_but_not_write_stops_every_run_before_any_pin,
    an_archive_write_that_fails_after_the_pin_releases_the_pin_at_once,
    an_outage_still_releases_every_pin_but_on_pods_being_deleted,
    a_late_upload_lands_beside_the_receipted_archive_never_over_it,
    a_run_frozen_past_its_lease_finds_the_lock_lost_and_writes_nothing_more,
);

/// One namespace, a store, an object store of a kind behind a fault proxy.
struct Env {
    ns: TestNamespace,
    _dir: tempfile::TempDir,
    kubeconfig: String,
    store: String,
    s3: S3Server,
    proxy: FaultProxy,
}

impl Env {
    async fn new(prefix: &str, kind: S3Kind) -> Result<Self> {
        let bed = TestBed::shared().await?;
        let dir = tempfile::tempdir()?;
        let s3 = S3Server::start_kind(kind).await?;
        s3.create_bucket(BUCKET)?;
        let proxy = FaultProxy::start(&s3.endpoint()).await?;
        Ok(Self {
            ns: bed.namespace(&format!("{prefix}-{}", kind.name())).await?,
            kubeconfig: bed.kubeconfig_path().to_str().unwrap().to_owned(),
            store: sqlite(dir.path(), "gc.sqlite3"),
            _dir: dir,
            s3,
            proxy,
        })
    }

    /// `gc-cli ARGS` with the store, the object store through the proxy, and its credentials.
    fn gc_cli(&self, args: &[&str]) -> Command {
        self.gc_cli_at(URL, args)
    }

    /// [`Env::gc_cli`] with archives at `url` instead of [`URL`].
    fn gc_cli_at(&self, url: &str, args: &[&str]) -> Command {
        let mut c = command();
        c.args(args)
            .args(["--store", &self.store])
            .args(["--archive-url", url])
            .args(["--archive-endpoint", self.proxy.endpoint()]);
        with_s3_credentials(&mut c, &self.s3);
        c
    }

    /// `run pods` in the namespace, live unless `dry_run`, with a lease of `lease` seconds.
    fn run(&self, dry_run: bool, lease: &str) -> Command {
        self.run_at(URL, dry_run, lease)
    }

    /// [`Env::run`] with archives at `url` instead of [`URL`].
    fn run_at(&self, url: &str, dry_run: bool, lease: &str) -> Command {
        let mode = if dry_run { "server" } else { "none" };
        let mut c = self.gc_cli_at(
            url,
            &[
                "run",
                "pods",
                "--retention-seconds",
                "3600",
                &format!("--dry-run={mode}"),
                "--auto-remediate",
                "--lock-lease-seconds",
                lease,
            ],
        );
        c.args(["--kubeconfig", &self.kubeconfig, "-n", self.ns.name()]);
        c
    }

    /// The reasons of the Events on objects of the namespace.
    async fn event_reasons(&self) -> Result<Vec<String>> {
        let api: Api<Event> = self.ns.api();
        let list = api.list(&ListParams::default()).await?;
        Ok(list.items.into_iter().filter_map(|e| e.reason).collect())
    }
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "the run should have failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn a_missing_bucket_stops_every_run_before_any_pin(kind: S3Kind) -> Result {
    let env = Env::new("fault-no-bucket", kind).await?;
    target(&env.ns, "a").await?;
    target(&env.ns, "b").await?;
    let before = snapshot(&env.ns).await?;
    for dry_run in [false, true] {
        let out = env.run_at("s3://missing/gc", dry_run, "30").output()?;
        let err = failed(&out);
        assert_eq!(out.status.code(), Some(1), "dry run {dry_run}: {err}");
        assert!(
            err.contains("cannot use the archive sink s3://missing/gc")
                && err.contains(r#"bucket "missing" does not exist"#),
            "dry run {dry_run}: {err}"
        );
        // Nothing written to any Pod, dry run or not: not even the pin.
        assert_eq!(snapshot(&env.ns).await?, before, "dry run {dry_run}");
    }
    Ok(())
}

async fn a_key_that_may_list_but_not_write_stops_every_run_before_any_pin(kind: S3Kind) -> Result {
    let env = Env::new("fault-refuse", kind).await?;
    target(&env.ns, "a").await?;
    target(&env.ns, "b").await?;
    let before = snapshot(&env.ns).await?;
    env.proxy.set(Fault::RefuseWrites(""));
    for dry_run in [false, true] {
        let err = failed(&env.run(dry_run, "30").output()?);
        assert!(
            err.contains("cannot use the archive sink")
                && err.contains("denied it (403 AccessDenied")
                && err.contains("the key needs list, put and get"),
            "dry run {dry_run}: {err}"
        );
        // Nothing written to any Pod, dry run or not: not even the pin.
        assert_eq!(snapshot(&env.ns).await?, before, "dry run {dry_run}");
    }
    Ok(())
}

async fn an_archive_write_that_fails_after_the_pin_releases_the_pin_at_once(
    kind: S3Kind,
) -> Result {
    let env = Env::new("fault-after-pin", kind).await?;
    target(&env.ns, "a").await?;
    // The probe passes; the archive's upload is refused (the store failing between the probe
    // and the upload).
    env.proxy.set(Fault::RefuseWrites(".json"));
    let err = failed(&env.run(false, "30").output()?);
    assert!(err.contains("1 target(s) failed"), "{err}");
    let pods = snapshot(&env.ns).await?;
    assert_eq!(pods["a"].2, Vec::<String>::new(), "the pin is released");
    // The store comes back: the next run collects it.
    env.proxy.set(Fault::Pass);
    ok(&env.run(false, "30").output()?);
    assert!(snapshot(&env.ns).await?.is_empty());
    Ok(())
}

async fn an_outage_still_releases_every_pin_but_on_pods_being_deleted(kind: S3Kind) -> Result {
    let env = Env::new("fault-outage", kind).await?;
    let api = env.ns.api::<Pod>();
    // Pins an earlier run left: one on a Pod nobody deletes, one on a Pod a user deleted.
    for name in ["left", "deleting"] {
        FailedPod::new(name)
            .label(COLLECT, "true")
            .finished_at(old())
            .finalizer(PIN)
            .create(&api)
            .await?;
    }
    api.delete("deleting", &DeleteParams::default()).await?;
    env.proxy.set(Fault::Down);
    let out = env.run(false, "30").output()?;
    let err = failed(&out);
    assert!(err.contains("cannot use the archive sink"), "{err}");
    assert!(
        err.contains("until their archives are written"),
        "the kept pin is named: {err}"
    );
    let pods = snapshot(&env.ns).await?;
    assert_eq!(pods["left"].2, Vec::<String>::new(), "released: {pods:?}");
    assert_eq!(pods["deleting"].2, [PIN], "its archive is owed: {pods:?}");
    // The store comes back: the Pod being deleted is archived and goes.
    env.proxy.set(Fault::Pass);
    ok(&env.run(false, "30").output()?);
    let pods = snapshot(&env.ns).await?;
    assert!(!pods.contains_key("deleting"), "{pods:?}");
    Ok(())
}

async fn a_late_upload_lands_beside_the_receipted_archive_never_over_it(kind: S3Kind) -> Result {
    let env = Env::new("fault-late", kind).await?;
    target(&env.ns, "a").await?;
    // The first run's upload never reaches the store in time: it gives up, releases the pin.
    env.proxy.set(Fault::HoldWrites(".json"));
    failed(&env.run(false, "30").output()?);
    assert!(env.proxy.held() > 0, "the upload was held");
    assert_eq!(snapshot(&env.ns).await?["a"].2, Vec::<String>::new());
    // The next run collects the Pod against its own archive.
    env.proxy.set(Fault::Pass);
    ok(&env.run(false, "30").output()?);
    assert!(snapshot(&env.ns).await?.is_empty());
    // Then the slow gateway delivers the first run's upload(s).
    let statuses = env.proxy.deliver_held().await?;
    assert!(statuses.iter().all(|s| *s != 0), "{statuses:?}");
    // Every receipt still matches its archive; the late one is listed beside it.
    let out = env.gc_cli(&["archives", "verify", "-o", "json"]).output()?;
    let checked: Vec<serde_json::Value> = serde_json::from_str(&ok(&out))?;
    let results: Vec<&str> = checked
        .iter()
        .map(|c| c["result"].as_str().unwrap())
        .collect();
    assert_eq!(
        results.iter().filter(|r| **r == "ok").count(),
        1,
        "{checked:?}"
    );
    assert!(
        results.iter().all(|r| *r == "ok" || *r == "noReceipt"),
        "{checked:?}"
    );
    Ok(())
}

/// Waits until `done` holds, for at most `seconds`.
async fn until(seconds: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn a_run_frozen_past_its_lease_finds_the_lock_lost_and_writes_nothing_more(
    kind: S3Kind,
) -> Result {
    let env = Env::new("fault-frozen", kind).await?;
    target(&env.ns, "a").await?;
    // Run A pins the Pod, then its upload hangs; it is frozen there past its 5 s lease.
    env.proxy.set(Fault::StallWrites(".json"));
    let mut a = env
        .run(false, "5")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    until(60, || env.proxy.stalled() > 0).await;
    signal(&a, "-STOP");
    tokio::time::sleep(Duration::from_secs(6)).await;
    // Run B takes the expired Lease, releases A's pin, collects the Pod and releases the Lease.
    env.proxy.set(Fault::Pass);
    let b = env.run(false, "5").output()?;
    let out = ok(&b);
    assert!(out.contains("collected"), "{out}");
    assert!(snapshot(&env.ns).await?.is_empty());
    // A resumes: its upload completes late, then it finds the lock lost and stops.
    signal(&a, "-CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.try_wait()?.is_none() {
        assert!(Instant::now() < deadline, "run A did not end");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let a = a.wait_with_output()?;
    let err = failed(&a);
    assert!(err.contains("lost the run lock gc-pods"), "{err}");
    // No Warning from A for a Pod another run collected cleanly.
    let reasons = env.event_reasons().await?;
    assert!(
        !reasons
            .iter()
            .any(|r| r == "CollectFailed" || r == "RunFailed"),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r == "Collected"), "{reasons:?}");
    // B's receipted archive is intact.
    ok(&env.gc_cli(&["archives", "verify"]).output()?);
    Ok(())
}

/// `c` spawned, its output once it ends; a failure when it runs past `seconds` (a hang: it is
/// killed).
async fn within(seconds: u64, c: &mut Command) -> Result<(Output, Duration)> {
    let started = Instant::now();
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    while child.try_wait()?.is_none() {
        if started.elapsed() > Duration::from_secs(seconds) {
            child.kill()?;
            let out = child.wait_with_output()?;
            panic!(
                "still running after {seconds} s:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((child.wait_with_output()?, started.elapsed()))
}

/// `run pods`, live, in `ns`, archives in `dir`, with the store `store` and more `args`.
fn live_run(ns: &TestNamespace, dir: &std::path::Path, store: &str, args: &[&str]) -> Command {
    let mut c = command();
    c.args(common::run_pods(ns.name()))
        .args(["--dry-run=none", "--auto-remediate", "--store", store])
        .args(["--archive-dir", dir.join("archives").to_str().unwrap()])
        .args(args);
    c
}

/// The store's connection is established and answers, then goes silent as the run records its
/// first receipt (a frozen network path): the run fails within `--store-timeout`, naming the
/// store and how long it waited, deletes nothing, releases its pin and its Lease, and the next
/// run (not waiting for any Lease) collects the Pod.
#[tokio::test]
async fn a_store_that_stops_answering_mid_run_fails_it_within_the_timeout_and_frees_the_lease()
-> Result {
    let Some(db) = gc_testbed::TestDatabase::fresh("stall").await? else {
        return Ok(());
    };
    let (bed, ns) = common::namespace("fault-store-stall").await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap();
    let dir = tempfile::tempdir()?;
    target(&ns, "a").await?;
    // postgres://USER:PASSWORD@HOST:PORT/DATABASE, through the proxy, in plain text.
    let (credentials, rest) = db.url().split_once('@').unwrap();
    let (address, database) = rest.split_once('/').unwrap();
    let upstream = tokio::net::lookup_host(address).await?.next().unwrap();
    let proxy = StallProxy::start(upstream, Some("INSERT INTO gc_receipts"))?;
    let stalling = format!(
        "{credentials}@{}/{database}?sslmode=disable",
        proxy.address()
    );
    let args = ["--kubeconfig", kubeconfig, "--store-timeout", "3s"];
    let (out, took) = within(90, &mut live_run(&ns, dir.path(), &stalling, &args)).await?;
    let err = failed(&out);
    assert!(proxy.stalled(), "the connection went silent mid-run: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The target's row names the store and how long it waited.
    let rows = String::from_utf8_lossy(&out.stdout);
    assert!(
        rows.contains("the store did not answer within 3s"),
        "{rows}\n{err}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}: {err}");
    let pods = snapshot(&ns).await?;
    assert_eq!(pods["a"].2, Vec::<String>::new(), "the pin is released");
    // The Lease is free: the next run, waiting for none, takes it and collects the Pod.
    let next = ["--kubeconfig", kubeconfig, "--lock-wait", "0s"];
    let (out, _) = within(90, &mut live_run(&ns, dir.path(), db.url(), &next)).await?;
    assert!(ok(&out).contains("collected"));
    assert!(snapshot(&ns).await?.is_empty());
    Ok(())
}

/// An object store that accepts an archive's upload and never answers: the run fails within the
/// object store's own bound (30 s a request), deletes nothing, releases its pin and its Lease,
/// and the next run, the store answering again, collects the Pod.
#[tokio::test]
async fn an_object_store_that_never_answers_fails_the_run_within_its_bound() -> Result {
    let env = Env::new("fault-s3-silent", S3Kind::S3sFs).await?;
    target(&env.ns, "a").await?;
    env.proxy.set(Fault::StallWrites(".json"));
    let (out, took) = within(120, &mut env.run(false, "30")).await?;
    let err = failed(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(env.proxy.stalled() > 0, "the upload was held: {err}");
    assert!(took < Duration::from_secs(75), "took {took:?}: {err}");
    let pods = snapshot(&env.ns).await?;
    assert_eq!(
        pods["a"].2,
        Vec::<String>::new(),
        "the pin is released: {err}"
    );
    env.proxy.set(Fault::Pass);
    let next = env.run(false, "30").args(["--lock-wait", "0s"]).output()?;
    assert!(ok(&next).contains("collected"));
    assert!(snapshot(&env.ns).await?.is_empty());
    Ok(())
}

/// The session database answers the connection, then goes silent as the lookup's statement is
/// sent (the network path frozen: the server's own `statement_timeout` cannot reach the run):
/// the run fails closed within the lookup's bound (60 s), saying the table did not answer,
/// deletes nothing, and frees its Lease for the next run, which (the database answering)
/// deletes the orphan.
#[tokio::test]
async fn a_session_database_that_stops_answering_fails_the_run_closed() -> Result {
    use k8s_openapi::api::core::v1::Service;
    let Some(db) = gc_testbed::TestDatabase::fresh("stall-sessions").await? else {
        return Ok(());
    };
    common::one_live_session(&db).await?;
    let (bed, ns) = common::namespace("fault-sessions-stall").await?;
    let services: Api<Service> = ns.api();
    for id in ["live-1", "gone-1"] {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": id, "labels": {"app": "streamspace-session", "session": id}},
            "spec": {"ports": [{"port": 3000}]},
        }))?;
        services.create(&Default::default(), &service).await?;
    }
    let (credentials, rest) = db.url().split_once('@').unwrap();
    let (address, database) = rest.split_once('/').unwrap();
    let upstream = tokio::net::lookup_host(address).await?.next().unwrap();
    // The ids' lookup (`SELECT CAST(id AS TEXT), CAST(state AS TEXT) FROM sessions ...`).
    let proxy = StallProxy::start(upstream, Some("AS TEXT), CAST("))?;
    let stalling = format!(
        "{credentials}@{}/{database}?sslmode=disable",
        proxy.address()
    );
    let dir = tempfile::tempdir()?;
    let run = |url: &str| {
        let mut c = command();
        c.args([
            "run",
            "sessions",
            "-n",
            ns.name(),
            "--dry-run=none",
            "--grace",
            "0h",
        ])
        .args(["--database-url", url, "--lock-wait", "0s"])
        .args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()])
        .args(["--store", &sqlite(dir.path(), "gc.sqlite3")])
        .args([
            "--archive-dir",
            dir.path().join("archives").to_str().unwrap(),
        ]);
        c
    };
    let (out, took) = within(150, &mut run(&stalling)).await?;
    let err = failed(&out);
    assert!(proxy.stalled(), "the lookup went silent: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("within 60 seconds"), "{err}");
    assert!(took < Duration::from_secs(100), "took {took:?}: {err}");
    assert!(
        services.get_opt("gone-1").await?.is_some(),
        "nothing deleted: {err}"
    );
    let (out, _) = within(90, &mut run(db.url())).await?;
    assert!(out.status.success(), "{}", failed_not(&out));
    assert!(services.get_opt("gone-1").await?.is_none());
    assert!(services.get_opt("live-1").await?.is_some());
    Ok(())
}

/// Both streams of a run that should have succeeded.
fn failed_not(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An API server that accepts connections and never answers: the run fails within
/// `--api-timeout`, saying so, and exits 1.
#[tokio::test]
async fn an_api_server_that_never_answers_fails_the_run_within_the_timeout() -> Result {
    let silent = StallProxy::silent()?;
    let dir = tempfile::tempdir()?;
    let token = dir.path().join("token");
    std::fs::write(&token, "t")?;
    let api = format!("https://{}", silent.address());
    let store = sqlite(dir.path(), "gc.sqlite3");
    let mut c = command();
    c.args(common::run_pods("fault-api-silent"))
        .args(["--dry-run=none", "--auto-remediate", "--store", &store])
        .args(["--api-url", &api, "--trust-certs"])
        .args([
            "--token-file",
            token.to_str().unwrap(),
            "--api-timeout",
            "2s",
        ]);
    let (out, took) = within(60, &mut c).await?;
    let err = failed(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot connect to the cluster"), "{err}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {err}");
    Ok(())
}
