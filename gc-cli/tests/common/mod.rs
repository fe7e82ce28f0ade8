//! What the integration tests of `gc-cli` share: the binary and its output, the labels of the
//! failed-Pod collector, a time old enough to collect, and the flags of a `run pods`.
//!
//! Each test crate uses part of it, so the rest is dead code there.
#![allow(dead_code)]

pub(crate) mod markdown;

use std::ffi::OsStr;
use std::process::{Command, Output};

use std::collections::BTreeMap;

use gc_testbed::{FailedPod, S3Server, TestBed, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;

pub(crate) type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> =
    std::result::Result<T, E>;

/// The label that makes a failed Pod a candidate.
pub(crate) const COLLECT: &str = "diagnostics.example.com/collect";
/// The finalizer that pins a Pod while it is archived.
pub(crate) const PIN: &str = "diagnostics.example.com/collector";

/// A free loopback address (`127.0.0.1:PORT`), for a server a test starts.
#[allow(dead_code)]
pub(crate) fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The `gc-cli` binary, ready for arguments; its embedded store and archive folder in a folder
/// of this test binary's own (`$GC_STATE_DIR`), unless a test names others.
pub(crate) fn command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gc-cli"));
    command.env("GC_STATE_DIR", state_dir());
    command
}

/// The state folder of this test binary's runs, in cargo's folder for test files: one for each
/// run of the tests.
pub(crate) fn state_dir() -> std::path::PathBuf {
    let binary = std::env::current_exe().expect("the test binary");
    let stem = binary
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let name = format!("state-{stem}-{}", std::process::id());
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// The built example `name` of the `examples` package (`cargo test --workspace --all-targets`
/// builds the examples with the tests; alone: `cargo build -p examples --examples`).
#[allow(dead_code)]
pub(crate) fn example(name: &str) -> Command {
    let deps = std::env::current_exe().unwrap();
    let dir = deps.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built: run cargo build -p examples --examples",
        path.display()
    );
    let mut command = Command::new(path);
    command.env("GC_STATE_DIR", state_dir());
    command
}

/// Runs `gc-cli args` to the end.
pub(crate) fn gc_cli<S: AsRef<OsStr>>(args: &[S]) -> Output {
    command().args(args).output().unwrap()
}

/// The standard output of a run that must have succeeded (both streams shown when it did not).
pub(crate) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// `args` with `--dry-run=none` added to a `run sessions` (or `serve ... sessions`) that names no
/// `--dry-run`: the tests
/// written when `run sessions` deleted unless told otherwise ask for the deletes they expect. A
/// dry run is the command line's default (`tests/sessions.rs` tests it apart).
pub(crate) fn live_unless_dry<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    let mut args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = words.windows(2).any(|w| w == ["run", "sessions"])
        || (words.contains(&"serve") && words.contains(&"sessions"));
    if run && !words.iter().any(|a| a.starts_with("--dry-run")) {
        args.push("--dry-run=none".to_owned());
    }
    args
}

/// Two hours ago: past a retention of an hour.
pub(crate) fn old() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second() - 7200).unwrap()
}

/// Creates the failed Pod `name` in `ns`, labelled for the collector and finished long ago.
pub(crate) async fn target(ns: &TestNamespace, name: &str) -> Result<Pod> {
    Ok(FailedPod::new(name)
        .label(COLLECT, "true")
        .finished_at(old())
        .create(&ns.api::<Pod>())
        .await?)
}

/// `run pods` in `namespace` with a retention of an hour.
pub(crate) fn run_pods(namespace: &str) -> [&str; 6] {
    [
        "run",
        "pods",
        "-n",
        namespace,
        "--retention-seconds",
        "3600",
    ]
}

/// The Pods of `ns`: name -> (uid, resourceVersion, finalizers).
pub(crate) async fn snapshot(
    ns: &TestNamespace,
) -> Result<BTreeMap<String, (String, String, Vec<String>)>> {
    let list = ns.api::<Pod>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|p| {
            let m = p.metadata;
            (
                m.name.unwrap(),
                (
                    m.uid.unwrap(),
                    m.resource_version.unwrap(),
                    m.finalizers.unwrap_or_default(),
                ),
            )
        })
        .collect())
}

/// `c` with the object store's credentials in its environment (as a Secret would give them),
/// and no other AWS or archive setting of the machine's.
pub(crate) fn with_s3_credentials<'c>(c: &'c mut Command, s3: &S3Server) -> &'c mut Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("GC_ARCHIVE") {
            c.env_remove(k);
        }
    }
    c.env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
}

/// A SQLite store URL for the file `name` in `dir`.
pub(crate) fn sqlite(dir: &std::path::Path, name: &str) -> String {
    format!("sqlite:{}", dir.join(name).display())
}

/// The shared test bed and a fresh namespace in it named after `prefix`.
pub(crate) async fn namespace(prefix: &str) -> Result<(&'static TestBed, TestNamespace)> {
    let bed = TestBed::shared().await?;
    Ok((bed, bed.namespace(prefix).await?))
}

/// The Pushgateway at `GC_TEST_PUSHGATEWAY`; `None` (the test skips) outside CI.
pub(crate) fn pushgateway() -> Option<String> {
    let gateway = std::env::var("GC_TEST_PUSHGATEWAY").ok();
    if gateway.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the Pushgateway (scripts/test.sh starts it)"
        );
        eprintln!("SKIPPING: GC_TEST_PUSHGATEWAY is unset (run scripts/test.sh)");
    }
    gateway
}

/// The Pushgateway's exposition.
pub(crate) fn scrape(gateway: &str) -> String {
    let out = Command::new("curl")
        .args(["-fsS", &format!("{gateway}/metrics")])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the sample of `name` pushed by gc (`job="gc"`) for namespace `ns` in the
/// Pushgateway's exposition `text`, with the label `extra` too when given.
pub(crate) fn pushed(text: &str, name: &str, ns: &str, extra: Option<&str>) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{"))
                && l.contains(&format!("namespace=\"{ns}\""))
                && l.contains("job=\"gc\"")
                && extra.is_none_or(|e| l.contains(e))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// A local webhook on a loopback port: answers every request 200 and keeps its body.
pub(crate) struct Webhook {
    pub(crate) url: String,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Webhook {
    pub(crate) fn start() -> Self {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>> = std::sync::Arc::default();
        let kept = std::sync::Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let mut stream = stream;
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                let body = String::from_utf8(body).unwrap();
                kept.lock().unwrap().push(body);
            }
        });
        Self { url, bodies }
    }

    /// Each alert posted so far, as JSON.
    #[allow(dead_code)]
    pub(crate) fn bodies(&self) -> Vec<serde_json::Value> {
        let bodies = self.bodies.lock().unwrap();
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).unwrap())
            .collect()
    }

    /// The `text` of each alert posted so far.
    pub(crate) fn texts(&self) -> Vec<String> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|b| {
                let body: serde_json::Value = serde_json::from_str(b).unwrap();
                body["text"].as_str().unwrap().to_owned()
            })
            .collect()
    }
}

/// StreamSpace's session table in `db`, holding one live session, `live-1`.
pub(crate) async fn one_live_session(db: &gc_testbed::TestDatabase) -> Result {
    let pool = db.pool().await?;
    sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO sessions VALUES ('live-1', 'running')")
        .execute(&pool)
        .await?;
    pool.close().await;
    Ok(())
}

/// Every object of a multi-document YAML text (`helm template` output, a YAML file), as JSON.
pub(crate) fn yaml_documents(text: &str) -> Vec<serde_json::Value> {
    text.split("\n---")
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .map(|doc| {
            let value: serde_norway::Value = serde_norway::from_str(doc).unwrap();
            serde_json::to_value(value).unwrap()
        })
        .collect()
}

/// Polls `check` every 200 ms for up to 60 s; the last answer when it never holds.
pub(crate) async fn eventually<T: std::fmt::Debug>(
    what: &str,
    mut check: impl AsyncFnMut() -> Result<(bool, T)>,
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (done, value) = check().await?;
        if done {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("not in 60 s: {what}: {value:?}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// What StreamSpace's agent creates for session `id`: a Deployment whose Pods mount the home
/// claim, a Service, the claim (on a static volume, as a provisioner would give), the `Session`.
pub(crate) async fn create_session(
    ns: &TestNamespace,
    session: &kube::discovery::ApiResource,
    id: &str,
) -> Result<String> {
    let post = kube::api::PostParams::default();
    let labels = serde_json::json!({"app": "streamspace-session", "session": id});
    let claim = format!("{id}-home");
    let pv_name = format!("pv-{}-{id}", ns.name());
    let volumes: kube::Api<k8s_openapi::api::core::v1::PersistentVolume> =
        kube::Api::all(ns.client().clone());
    let pv = serde_json::from_value(serde_json::json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "hostPath": {"path": format!("/tmp/{pv_name}")}, "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": ns.name(), "name": claim},
        },
    }))?;
    volumes.create(&post, &pv).await?;
    let pvc = serde_json::from_value(serde_json::json!({
        "metadata": {"name": claim, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    ns.api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>()
        .create(&post, &pvc)
        .await?;
    let deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": id, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"session": id}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "session", "image": "lscr.io/linuxserver/firefox",
                                    "volumeMounts": [{"name": "home", "mountPath": "/config"}]}],
                    "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": claim}}],
                },
            },
        },
    }))?;
    ns.api::<k8s_openapi::api::apps::v1::Deployment>()
        .create(&post, &deployment)
        .await?;
    let service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": id, "labels": labels},
        "spec": {"selector": {"session": id}, "ports": [{"port": 3000}]},
    }))?;
    ns.api::<k8s_openapi::api::core::v1::Service>()
        .create(&post, &service)
        .await?;
    let object: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": session.api_version, "kind": session.kind,
        "metadata": {"name": id, "labels": labels},
        "spec": {"user": "erin", "template": "firefox"},
    }))?;
    kube::Api::<kube::api::DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), session)
        .create(&post, &object)
        .await?;
    Ok(pv_name)
}
