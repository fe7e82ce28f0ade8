//! Undoing a session delete with Kubernetes' own controllers running (the volume binder, the
//! garbage collector, the protection and Deployment controllers of `kube-controller-manager`):
//! the claim really binds, the Deployment's delete really cascades, the claim really goes once
//! nothing uses it, and the restored claim binds to the very volume the user's data is on.

use std::time::Duration;

use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Service};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

mod common;

use common::{Result, command};

const APP: &str = "streamspace-session";

/// Polls `check` every 200 ms for up to 60 s; the last answer when it never holds.
async fn eventually<T: std::fmt::Debug>(
    what: &str,
    mut check: impl AsyncFnMut() -> Result<(bool, T)>,
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (done, value) = check().await?;
        if done {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("not in 60 s: {what}: {value:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What StreamSpace's agent creates for session `id`: a Deployment whose Pods mount the home
/// claim, a Service, the claim (on a static volume, as a provisioner would give), the `Session`.
async fn create_session(
    ns: &TestNamespace,
    session: &kube::discovery::ApiResource,
    id: &str,
) -> Result<String> {
    let post = PostParams::default();
    let labels = json!({"app": APP, "session": id});
    let claim = format!("{id}-home");
    let pv_name = format!("pv-{}-{id}", ns.name());
    let volumes: Api<PersistentVolume> = Api::all(ns.client().clone());
    let pv = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "hostPath": {"path": format!("/tmp/{pv_name}")}, "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": ns.name(), "name": claim},
        },
    }))?;
    volumes.create(&post, &pv).await?;
    let pvc = serde_json::from_value(json!({
        "metadata": {"name": claim, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    ns.api::<PersistentVolumeClaim>()
        .create(&post, &pvc)
        .await?;
    let deployment = serde_json::from_value(json!({
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
    ns.api::<Deployment>().create(&post, &deployment).await?;
    let service = serde_json::from_value(json!({
        "metadata": {"name": id, "labels": labels},
        "spec": {"selector": {"session": id}, "ports": [{"port": 3000}]},
    }))?;
    ns.api::<Service>().create(&post, &service).await?;
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": session.api_version, "kind": session.kind,
        "metadata": {"name": id, "labels": labels},
        "spec": {"user": "erin", "template": "firefox"},
    }))?;
    Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), session)
        .create(&post, &object)
        .await?;
    Ok(pv_name)
}

/// The phase of a claim and of a volume.
async fn phases(
    ns: &TestNamespace,
    claim: &str,
    pv: &str,
) -> Result<(Option<String>, Option<String>)> {
    let claim = ns.api::<PersistentVolumeClaim>().get_opt(claim).await?;
    let volume = Api::<PersistentVolume>::all(ns.client().clone())
        .get(pv)
        .await?;
    Ok((
        claim.and_then(|c| c.status?.phase),
        volume.status.and_then(|s| s.phase),
    ))
}

#[tokio::test]
async fn a_deleted_session_comes_back_on_its_own_volume() -> Result {
    let Some(db) = TestDatabase::fresh("restore-kcm").await? else {
        return Ok(());
    };
    let bed = TestBed::with_controllers().await?;
    let session = bed.install_session_crd().await?;
    let ns = bed.namespace("restore-kcm").await?;
    let (gone, live) = ("erin-firefox-0000000e", "alice-firefox-0000000a");
    let pv = create_session(&ns, &session, gone).await?;
    create_session(&ns, &session, live).await?;
    let claim = format!("{gone}-home");
    let bound = Some("Bound".to_owned());
    eventually("the claim binds", async || {
        let now = phases(&ns, &claim, &pv).await?;
        Ok((now == (bound.clone(), bound.clone()), ()))
    })
    .await?;
    let replica_sets = || ns.api::<ReplicaSet>();
    eventually("the Deployment's ReplicaSet", async || {
        let sets = replica_sets().list(&ListParams::default()).await?.items;
        Ok((sets.len() == 2, ()))
    })
    .await?;
    let pool = db.pool().await?;
    sqlx::raw_sql("CREATE TABLE sessions (id TEXT PRIMARY KEY, state TEXT)")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO sessions VALUES ($1, 'running')")
        .bind(live)
        .execute(&pool)
        .await?;

    let dir = tempfile::tempdir()?;
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let archives = dir.path().join("archives");
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let common = [
        "-n",
        ns.name(),
        "--kubeconfig",
        &kubeconfig,
        "--store",
        &store,
        "--archive-dir",
        archives.to_str().unwrap(),
    ];
    // Each command and its output on stderr: the story, as `--nocapture` shows it.
    let gc = |args: &[&str]| {
        let out = command().args(args).args(common).output().unwrap();
        eprintln!(
            "$ gc-cli {} -n {} ...\n{}",
            args.join(" "),
            ns.name(),
            String::from_utf8_lossy(&out.stdout)
        );
        out
    };
    let log = |out: &std::process::Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // One run: the claim is deleted first (its Pods' stop, later in the run, would change it).
    let out = gc(&[
        "run",
        "sessions",
        "--grace-hours",
        "0",
        "--database-url",
        db.url(),
    ]);
    let ran = log(&out);
    assert!(out.status.success(), "{ran}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let deleted: Vec<&str> = lines
        .iter()
        .filter(|l| l["result"] == "deleted")
        .filter_map(|l| l["kind"].as_str())
        .collect();
    assert_eq!(
        deleted,
        ["PersistentVolumeClaim", "Deployment", "Service", "Session"],
        "{ran}"
    );

    // The delete cascades: ReplicaSet and Pod go with the Deployment, then the claim (nothing
    // uses it now) and the volume is Released, kept by its policy Retain.
    eventually(
        &format!("the cascade and the claim gone after\n{ran}"),
        async || {
            let sets = replica_sets()
                .list(&ListParams::default())
                .await?
                .items
                .len();
            let pods = ns
                .api::<Pod>()
                .list(&ListParams::default().labels(&format!("session={gone}")))
                .await?
                .items
                .len();
            let now = phases(&ns, &claim, &pv).await?;
            let done = sets == 1 && pods == 0 && now == (None, Some("Released".to_owned()));
            Ok((done, (sets, pods, now)))
        },
    )
    .await?;
    let volumes: Api<PersistentVolume> = Api::all(ns.client().clone());
    let policy = async || -> Result<String> {
        Ok(volumes
            .get(&pv)
            .await?
            .spec
            .unwrap()
            .persistent_volume_reclaim_policy
            .unwrap())
    };
    assert_eq!(policy().await?, "Retain");

    // The restore, one command: the four objects again, the claim bound by the binder to the
    // same volume and the volume's policy given back before it returns, the Deployment's
    // ReplicaSet made again.
    let out = gc(&["restore", "sessions", "--session", gone, "-o", "json"]);
    assert!(out.status.success(), "{}", log(&out));
    let restored: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert!(
        restored.iter().all(|r| r["result"] == "created"),
        "{restored:?}"
    );
    assert_eq!(restored.len(), 4);
    assert_eq!(
        restored[0]["note"],
        format!("on its volume {pv}, bound again: reclaim policy Delete given back"),
        "{restored:?}"
    );
    assert_eq!(policy().await?, "Delete");
    // The binder binds the volume first, then marks the claim.
    eventually("the restored claim bound", async || {
        let now = phases(&ns, &claim, &pv).await?;
        Ok((now == (bound.clone(), bound.clone()), now))
    })
    .await?;
    let new_claim = ns.api::<PersistentVolumeClaim>().get(&claim).await?;
    assert_eq!(
        new_claim.spec.unwrap().volume_name.as_deref(),
        Some(pv.as_str())
    );
    let kept = volumes.get(&pv).await?.metadata;
    assert!(
        !kept
            .annotations
            .unwrap_or_default()
            .contains_key("gc.example.com/retained")
    );
    assert!(
        !kept
            .labels
            .unwrap_or_default()
            .contains_key("gc.example.com/retained")
    );
    eventually("the restored Deployment's ReplicaSet", async || {
        let sets = replica_sets()
            .list(&ListParams::default())
            .await?
            .items
            .len();
        Ok((sets == 2, ()))
    })
    .await?;

    // A second restore changes nothing.
    let before = volumes.get(&pv).await?.metadata.resource_version;
    let out = gc(&["restore", "sessions", "--session", gone, "-o", "json"]);
    assert!(out.status.success(), "{}", log(&out));
    let again: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert!(again.iter().all(|r| r["result"] == "exists"), "{again:?}");
    assert!(again.iter().all(|r| r["note"].is_null()), "{again:?}");
    assert_eq!(volumes.get(&pv).await?.metadata.resource_version, before);
    let uids = |records: &[Value]| records.iter().map(|r| r["uid"].clone()).collect::<Vec<_>>();
    assert_eq!(uids(&again), uids(&restored));
    Ok(())
}
