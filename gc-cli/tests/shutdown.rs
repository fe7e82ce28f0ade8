//! A stop of `gc-cli serve` with the request API while what a caller started is still at work,
//! the caller gone: the real binary, the real API server and PostgreSQL. A collection whose
//! caller went away has deleted part of its sessions when SIGTERM comes; a restore whose caller
//! went away waits for its claim to bind (no binder runs here: it never does). In both, the
//! process waits for them before it exits: every object deleted or created is an audit line,
//! the namespace's Lease is given up, not left to expire, and the process exits 0 within the
//! documented bound (docs/request-api.md, "Limits": up to 100 seconds).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

mod common;

use common::{Result, command, eventually, free_address};

const APP: &str = "streamspace-session";
/// The caller's account, allowed gc's calls in its namespace.
const CALLER: &str = "streamspace-api";
/// The documented bound of a stop's wait for the runs and restores a caller left.
const STOP_WITHIN: Duration = Duration::from_secs(100);

/// The rule of `verb` on gc's `resources`.
fn rule(resources: &[&str], verb: &str) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec!["gc.stream.space".into()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: vec![verb.to_owned()],
        ..PolicyRule::default()
    }
}

/// A Service and a `Session` of session `id`, labelled as StreamSpace's agent labels them.
async fn create_session(ns: &TestNamespace, session: &ApiResource, id: &str) -> Result {
    let post = PostParams::default();
    let meta = json!({"name": id, "labels": {"app": APP, "session": id}});
    let service: Service = serde_json::from_value(json!({
        "metadata": meta,
        "spec": {"selector": {"session": id}, "ports": [{"port": 3000}]},
    }))?;
    ns.api::<Service>().create(&post, &service).await?;
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": session.api_version, "kind": session.kind, "metadata": meta,
        "spec": {"user": "erin", "template": "firefox"},
    }))?;
    Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), session)
        .create(&post, &object)
        .await?;
    Ok(())
}

/// `kind/name` of every Service, claim and `Session` in `ns` not being deleted.
async fn present(ns: &TestNamespace, session: &ApiResource) -> Result<BTreeSet<String>> {
    let lp = ListParams::default();
    let mut out = BTreeSet::new();
    let mut add = |kind: &str, meta: kube::api::ObjectMeta| {
        if meta.deletion_timestamp.is_none() {
            out.insert(format!("{kind}/{}", meta.name.unwrap_or_default()));
        }
    };
    for s in ns.api::<Service>().list(&lp).await? {
        add("Service", s.metadata);
    }
    for c in ns.api::<PersistentVolumeClaim>().list(&lp).await? {
        add("PersistentVolumeClaim", c.metadata);
    }
    let sessions = Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), session);
    for s in sessions.list(&lp).await? {
        add("Session", s.metadata);
    }
    Ok(out)
}

/// The run lock of `ns` (the Lease `gc-sessions`): its holder, `None` when it does not exist.
async fn lock_holder(ns: &TestNamespace) -> Result<Option<Option<String>>> {
    let lease = ns.api::<Lease>().get_opt("gc-sessions").await?;
    Ok(lease.map(|l| l.spec.and_then(|s| s.holder_identity)))
}

/// StreamSpace's session table in `db`: each of `rows`, `(id, state)`.
async fn table(db: &TestDatabase, rows: &[(&str, &str)]) -> Result {
    let pool = db.pool().await?;
    sqlx::raw_sql("CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, state TEXT)")
        .execute(&pool)
        .await?;
    for (id, state) in rows {
        sqlx::query(
            "INSERT INTO sessions VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET state = $2",
        )
        .bind(id)
        .bind(state)
        .execute(&pool)
        .await?;
    }
    pool.close().await;
    Ok(())
}

/// `gc-cli serve --api-listen ... sessions` on `ns`, its audit lines and its log in files of
/// `dir`.
struct Served {
    child: Child,
    api: String,
    audit: PathBuf,
    log: PathBuf,
}

impl Served {
    /// Starts it with `serve` flags and `sessions` flags (besides the namespace, cluster,
    /// store, archives, table and audit log), and waits until the request API answers and the
    /// first scheduled run (which every `serve` starts with) has given its Lease up.
    async fn start(
        ns: &TestNamespace,
        db: &TestDatabase,
        dir: &Path,
        serve: &[&str],
        sessions: &[&str],
    ) -> Result<Self> {
        let (metrics, api) = (free_address(), free_address());
        let (audit, log) = (dir.join("audit.jsonl"), dir.join("serve.log"));
        let store = format!("sqlite:{}", dir.join("gc.sqlite3").display());
        let archives = dir.join("archives");
        let kubeconfig = TestBed::shared().await?.kubeconfig_path().to_owned();
        let child = command()
            .args(["serve", "--listen", &metrics, "--api-listen", &api])
            .args(["--interval", "6h", "--request-grace", "0s"])
            .args(serve)
            .args(["sessions", "-n", ns.name(), "--cluster-id", ns.name()])
            .args(["--store", &store, "--archive-dir"])
            .arg(&archives)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--database-url", db.url(), "--state-column", "state"])
            .args(["--terminal-state", "terminated", "--dry-run=none"])
            .arg("--audit-log")
            .arg(&audit)
            .args(sessions)
            .env_remove("GC_SESSION_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let served = Self {
            child,
            api,
            audit,
            log,
        };
        eventually("the request API answers", async || {
            Ok((TcpStream::connect(&served.api).is_ok(), ()))
        })
        .await?;
        eventually("the first scheduled run gave its Lease up", async || {
            let holder = lock_holder(ns).await?;
            Ok((holder == Some(None), holder))
        })
        .await?;
        Ok(served)
    }

    /// Sends a call and leaves its answer unread: the caller goes away when the stream returned
    /// is dropped.
    fn call_and_leave(&self, path: &str, token: &str, body: &str) -> Result<TcpStream> {
        let mut stream = TcpStream::connect(&self.api)?;
        let (api, length) = (&self.api, body.len());
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nhost: {api}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {length}\r\n\
             connection: close\r\n\r\n{body}"
        )?;
        stream.flush()?;
        Ok(stream)
    }

    /// SIGTERM, then waits (at most twice the documented bound) for the process to exit: its
    /// status, how long it took and its log.
    async fn terminate(&mut self) -> Result<(ExitStatus, Duration, String)> {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        assert!(sent.success(), "kill -TERM");
        let signalled = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if signalled.elapsed() > 2 * STOP_WITHIN {
                self.child.kill()?;
                self.child.wait()?;
                return Err(format!("still running {:?} after SIGTERM", 2 * STOP_WITHIN).into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let took = signalled.elapsed();
        Ok((status, took, std::fs::read_to_string(&self.log)?))
    }

    /// The audit lines of `ns` with `decision`, as JSON.
    fn audited(&self, ns: &str, decision: &str) -> Result<Vec<Value>> {
        let text = std::fs::read_to_string(&self.audit).unwrap_or_default();
        let mut lines = Vec::new();
        for line in text.lines() {
            let line: Value = serde_json::from_str(line)?;
            if line["namespace"] == ns && line["decision"] == decision {
                lines.push(line);
            }
        }
        Ok(lines)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // A test that failed before its stop leaves no process behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `kind/name` of `lines` whose `result` is `result`.
fn with_result(lines: &[Value], result: &str) -> BTreeSet<String> {
    (lines.iter())
        .filter(|l| l["result"] == result)
        .map(|l| {
            format!(
                "{}/{}",
                l["kind"].as_str().unwrap(),
                l["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// A collection of 120 ended sessions (240 objects, one at a time: `--concurrency 1`) whose
/// caller went away once the run was deleting: SIGTERM stops the run before its next delete,
/// and the process exits 0 only once the run has written the audit line of every object it
/// deleted and given the namespace's Lease up.
#[tokio::test]
async fn a_stop_writes_the_audit_lines_of_a_run_its_caller_left() -> Result {
    let Some(db) = TestDatabase::fresh("shutdown-run").await? else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    let session = bed.install_session_crd().await?;
    let ns = bed.namespace("shutdown-run").await?;
    let ids: Vec<String> = (0..120).map(|i| format!("erin-firefox-{i:08x}")).collect();
    let mut created = tokio::task::JoinSet::new();
    for chunk in ids.chunks(15) {
        let (ns, session, chunk) = (ns.clone(), session.clone(), chunk.to_vec());
        created.spawn(async move {
            for id in &chunk {
                create_session(&ns, &session, id).await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
    }
    while let Some(done) = created.join_next().await {
        done??;
    }
    let running: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "running")).collect();
    table(&db, &running).await?;
    let before = present(&ns, &session).await?;
    assert_eq!(before.len(), 2 * ids.len());
    ns.service_account_client(CALLER).await?;
    let calls = vec![
        rule(&["sessions/collect"], "create"),
        rule(&["runs"], "get"),
    ];
    ns.grant(CALLER, calls).await?;
    let token = ns.service_account_token_for(CALLER, &["gc"]).await?;

    let dir = tempfile::tempdir()?;
    let sessions = [
        "--concurrency",
        "1",
        "--max-deletes",
        "1000",
        "--guard-ratio",
        "1",
    ];
    let mut served = Served::start(&ns, &db, dir.path(), &[], &sessions).await?;
    // The control plane ends every session and asks for them, then goes away once the run is
    // deleting.
    let terminated: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "terminated")).collect();
    table(&db, &terminated).await?;
    let collect = format!("/v1/namespaces/{}/sessions/collect", ns.name());
    let body = json!({ "sessions": ids }).to_string();
    let caller = served.call_and_leave(&collect, &token, &body)?;
    let held = eventually("the run deleting, its Lease held", async || {
        let gone = before.difference(&present(&ns, &session).await?).count();
        let holder = lock_holder(&ns).await?.flatten();
        Ok((gone >= 10 && holder.is_some(), (gone, holder)))
    })
    .await?;
    drop(caller);
    let (status, took, log) = served.terminate().await?;
    eprintln!("{log}");
    assert!(status.success(), "{status}: {log}");
    assert!(took < STOP_WITHIN, "stopped in {took:?}");

    let deleted: BTreeSet<String> = before
        .difference(&present(&ns, &session).await?)
        .cloned()
        .collect();
    let lines = served.audited(ns.name(), "delete")?;
    let audited = with_result(&lines, "deleted");
    eprintln!(
        "{} deleted when SIGTERM came, {} in all, {} audited",
        held.0,
        deleted.len(),
        audited.len()
    );
    assert!(
        deleted.len() < before.len(),
        "the stop came before the run's end: {} of {} deleted",
        deleted.len(),
        before.len()
    );
    assert_eq!(
        deleted, audited,
        "every object deleted, and only those, audited"
    );
    let user = format!("system:serviceaccount:{}:{CALLER}", ns.name());
    for line in lines.iter().filter(|l| l["result"] == "deleted") {
        assert_eq!(line["requestedBy"], json!([user]), "{line}");
        assert!(line["archive"].is_string(), "{line}");
    }
    // Given up, not left to expire: the holder is cleared at once.
    assert_eq!(lock_holder(&ns).await?, Some(None), "the Lease released");
    Ok(())
}

/// A restore whose caller went away while it waits for its claim to bind (`bindWaitSeconds`
/// 45, longer than a stop's wait for the calls in progress; no binder runs here): SIGTERM does
/// not cut it, and the process exits 0, within the documented bound, only once each object it
/// created is an audit line.
#[tokio::test]
async fn a_stop_writes_the_audit_lines_of_a_restore_its_caller_left() -> Result {
    let Some(db) = TestDatabase::fresh("shutdown-restore").await? else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    let session = bed.install_session_crd().await?;
    let ns = bed.namespace("shutdown-restore").await?;
    let (gone, live) = ("erin-firefox-0000000e", "alice-firefox-0000000a");
    create_session(&ns, &session, gone).await?;
    create_session(&ns, &session, live).await?;
    // The gone session's home claim, bound to a static volume of policy `Delete` (as the
    // binder would leave it).
    let post = PostParams::default();
    let claim = format!("{gone}-home");
    let claims = ns.api::<PersistentVolumeClaim>();
    let pvc = serde_json::from_value(json!({
        "metadata": {"name": claim, "labels": {"app": APP, "session": gone}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    let claim_uid = claims.create(&post, &pvc).await?.metadata.uid.unwrap();
    let pv_name = format!("pv-{}", ns.name());
    let volumes: Api<PersistentVolume> = Api::all(ns.client().clone());
    let pv = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "hostPath": {"path": format!("/tmp/{pv_name}")},
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": ns.name(), "name": claim, "uid": claim_uid},
        },
    }))?;
    volumes.create(&post, &pv).await?;
    let bind = json!({"spec": {"volumeName": pv_name}});
    claims
        .patch(&claim, &PatchParams::default(), &Patch::Merge(&bind))
        .await?;
    table(&db, &[(live, "running")]).await?;

    // A scheduled run's collection (`run sessions`): the gone session's objects archived and
    // deleted, its volume kept.
    let dir = tempfile::tempdir()?;
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let archives = dir.path().join("archives");
    let run = command()
        .args([
            "run",
            "sessions",
            "-n",
            ns.name(),
            "--cluster-id",
            ns.name(),
        ])
        .args(["--grace", "0s", "--store", &store, "--archive-dir"])
        .arg(&archives)
        .arg("--kubeconfig")
        .arg(bed.kubeconfig_path())
        .args(["--database-url", db.url(), "--dry-run=none"])
        .env_remove("GC_SESSION_DATABASE_URL")
        .output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{said}");
    // The claim's protection finalizer, removed as its controller removes it (no Pod uses it).
    let unprotect = json!({"metadata": {"finalizers": null}});
    claims
        .patch(&claim, &PatchParams::default(), &Patch::Merge(&unprotect))
        .await?;
    let archived: BTreeSet<String> = [
        format!("Service/{gone}"),
        format!("Session/{gone}"),
        format!("PersistentVolumeClaim/{claim}"),
    ]
    .into();
    eventually("the gone session's objects gone", async || {
        let now = present(&ns, &session).await?;
        Ok((now.is_disjoint(&archived), now))
    })
    .await?;
    let policy = volumes.get(&pv_name).await?.spec.unwrap();
    assert_eq!(
        policy.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain"),
        "{said}"
    );
    // Released, as the PV controller marks a volume whose claim is gone.
    let released = json!({"status": {"phase": "Released"}});
    volumes
        .patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(&released))
        .await?;
    // The session's row back, as a restore asks.
    table(&db, &[(gone, "running")]).await?;

    // The caller, allowed restores; the restore account as the chart's, its volumes' rule
    // cluster-wide.
    ns.service_account_client(CALLER).await?;
    ns.grant(CALLER, vec![rule(&["sessions/restore"], "create")])
        .await?;
    let token = ns.service_account_token_for(CALLER, &["gc"]).await?;
    ns.service_account_client("gc-restore").await?;
    ns.grant("gc-restore", gc_k8s::rbac::restore_rules(true))
        .await?;
    let volumes_role = format!("{}-restore-volumes", ns.name());
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(volumes_role.clone()),
            ..Default::default()
        },
        rules: Some(gc_k8s::rbac::restore_volume_rules()),
        ..Default::default()
    };
    let roles = Api::<ClusterRole>::all(ns.client().clone());
    let bindings = Api::<ClusterRoleBinding>::all(ns.client().clone());
    roles.create(&post, &role).await?;
    let binding = ClusterRoleBinding {
        metadata: role.metadata.clone(),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: volumes_role.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "gc-restore".into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
    };
    bindings.create(&post, &binding).await?;

    let account = format!("{}/gc-restore", ns.name());
    let serve = ["--api-restore-account", account.as_str()];
    let mut served = Served::start(&ns, &db, dir.path(), &serve, &[]).await?;
    let path = format!("/v1/namespaces/{}/sessions/{gone}/restore", ns.name());
    let body = json!({"bindWaitSeconds": 45}).to_string();
    let caller = served.call_and_leave(&path, &token, &body)?;
    // Created, and waiting for a binder that never comes.
    eventually("the restore waiting for its claim to bind", async || {
        let now = present(&ns, &session).await?;
        Ok((archived.is_subset(&now), now))
    })
    .await?;
    drop(caller);
    let (status, took, log) = served.terminate().await?;
    eprintln!("{log}");
    let lines = served.audited(ns.name(), "restore")?;
    let cleaned = (
        bindings
            .delete(&volumes_role, &DeleteParams::default())
            .await,
        roles.delete(&volumes_role, &DeleteParams::default()).await,
        volumes.delete(&pv_name, &DeleteParams::default()).await,
    );
    assert!(status.success(), "{status}: {log}");
    assert!(
        took < STOP_WITHIN,
        "stopped in {took:?}, over the documented bound"
    );
    assert_eq!(with_result(&lines, "created"), archived, "{lines:#?}");
    let user = format!("system:serviceaccount:{}:{CALLER}", ns.name());
    let restorer = format!("system:serviceaccount:{}:gc-restore", ns.name());
    for line in &lines {
        assert_eq!(line["requestedBy"], user.as_str(), "{line}");
        assert_eq!(line["restoredAs"], restorer.as_str(), "{line}");
    }
    // The claim created again is on the kept volume, still unbound: the wait ran out.
    let claim_line = (lines.iter())
        .find(|l| l["kind"] == "PersistentVolumeClaim")
        .unwrap();
    assert!(claim_line.to_string().contains(&pv_name), "{claim_line}");
    cleaned.0?;
    cleaned.1?;
    cleaned.2?;
    Ok(())
}
