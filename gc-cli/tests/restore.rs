//! Undoing a session delete with Kubernetes' own controllers running (the volume binder, the
//! garbage collector, the protection and Deployment controllers of `kube-controller-manager`):
//! the claim really binds, the Deployment's delete really cascades, the claim really goes once
//! nothing uses it, and the restored claim binds to the very volume the user's data is on.

use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Service};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

mod common;

use common::{Result, command, create_session, eventually};

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

/// A namespace with two sessions' objects (one gone from the database, one live), the claim of
/// the gone one bound to its own static volume, a store and an archive folder: `gc-cli` runs on
/// them.
struct Story {
    ns: TestNamespace,
    db: TestDatabase,
    gone: &'static str,
    claim: String,
    pv: String,
    store: String,
    archives: tempfile::TempDir,
    kubeconfig: String,
}

impl Story {
    async fn new(name: &str) -> Result<Option<Self>> {
        let Some(db) = TestDatabase::fresh(name).await? else {
            return Ok(None);
        };
        let bed = TestBed::with_controllers().await?;
        let session = bed.install_session_crd().await?;
        let ns = bed.namespace(name).await?;
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
        eventually("the Deployments' ReplicaSets", async || {
            let sets = ns
                .api::<ReplicaSet>()
                .list(&ListParams::default())
                .await?
                .items;
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
        let archives = tempfile::tempdir()?;
        let store = format!("sqlite:{}", archives.path().join("gc.sqlite3").display());
        let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
        Ok(Some(Self {
            ns,
            db,
            gone,
            claim,
            pv,
            store,
            archives,
            kubeconfig,
        }))
    }

    /// `gc-cli ARGS` on the story's namespace, store and archives; the command and its output
    /// on stderr: the story, as `--nocapture` shows it.
    fn gc(&self, args: &[&str]) -> std::process::Output {
        self.gc_with(args, &[])
    }

    /// [`Story::gc`] with `env` set besides.
    fn gc_with(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let archives = self.archives.path().join("archives");
        let archives = archives.to_str().unwrap();
        // Its own cluster id: the volumes it keeps are reviewed by its runs alone, not by the
        // runs of the other tests sharing the API server.
        let scope = ["-n", self.ns.name(), "--cluster-id", self.ns.name()];
        let at = ["--store", &self.store, "--kubeconfig", &self.kubeconfig];
        let sink = ["--archive-dir", archives];
        // `archives list` reads only the store: no cluster, no sink.
        let at = if args[0] == "archives" {
            &at[..2]
        } else {
            &[&at[..], &sink].concat()
        };
        let out = command()
            .args(args)
            .args(scope)
            .args(at)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        eprintln!(
            "$ gc-cli {} -n {} ...\n{}{}",
            args.join(" "),
            self.ns.name(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `run sessions` with no grace: its audit lines, asserted a success.
    fn run(&self) -> Vec<Value> {
        self.run_at(None)
    }

    /// [`Story::run`], judged at `now` (RFC 3339) when given.
    fn run_at(&self, now: Option<&str>) -> Vec<Value> {
        let now = now.map(|t| format!("--now={t}"));
        let mut args = vec![
            "run",
            "sessions",
            "--grace-hours",
            "0",
            "--database-url",
            self.db.url(),
            "--dry-run=none",
        ];
        args.extend(now.as_deref());
        let out = self.gc_with(&args, &[("GC_ALLOW_FUTURE_NOW", "1")]);
        assert!(out.status.success(), "{}", log(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `restore sessions` of the gone session, with `extra` flags: its exit and its records.
    fn restore(&self, extra: &[&str]) -> (std::process::Output, Vec<Value>) {
        let args = [
            &["restore", "sessions", "--session", self.gone, "-o", "json"][..],
            extra,
        ];
        let out = self.gc(&args.concat());
        let records = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out, records)
    }

    /// The volume's reclaim policy and gc's record on it.
    async fn volume(&self) -> Result<(String, Option<Value>)> {
        let pv = Api::<PersistentVolume>::all(self.ns.client().clone())
            .get(&self.pv)
            .await?;
        let note = pv.metadata.annotations.unwrap_or_default();
        let note = note.get("gc.example.com/retained");
        Ok((
            pv.spec.unwrap().persistent_volume_reclaim_policy.unwrap(),
            note.map(|n| serde_json::from_str(n)).transpose()?,
        ))
    }

    /// Waits for the gone session's claim to be gone and its volume `Released`.
    async fn released(&self, after: &str) -> Result<()> {
        eventually(&format!("the claim gone after\n{after}"), async || {
            let now = phases(&self.ns, &self.claim, &self.pv).await?;
            Ok((now == (None, Some("Released".to_owned())), now))
        })
        .await
        .map(drop)
    }
}

/// A command's stdout and stderr.
fn log(out: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn a_deleted_session_comes_back_on_its_own_volume() -> Result {
    let Some(story) = Story::new("restore-kcm").await? else {
        return Ok(());
    };
    let Story {
        ns,
        gone,
        claim,
        pv,
        ..
    } = &story;
    let bound = Some("Bound".to_owned());
    let replica_sets = || ns.api::<ReplicaSet>();
    // One run: the claim is deleted first (its Pods' stop, later in the run, would change it).
    let lines = story.run();
    let ran = format!("{lines:?}");
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
            let now = phases(ns, claim, pv).await?;
            let done = sets == 1 && pods == 0 && now == (None, Some("Released".to_owned()));
            Ok((done, (sets, pods, now)))
        },
    )
    .await?;
    let volumes: Api<PersistentVolume> = Api::all(ns.client().clone());
    assert_eq!(story.volume().await?.0, "Retain");

    // The restore, one command: the four objects again, the claim bound by the binder to the
    // same volume and the volume's policy given back before it returns, the Deployment's
    // ReplicaSet made again.
    let (out, restored) = story.restore(&[]);
    assert!(out.status.success(), "{}", log(&out));
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
    assert_eq!(story.volume().await?, ("Delete".to_owned(), None));
    // The binder binds the volume first, then marks the claim.
    eventually("the restored claim bound", async || {
        let now = phases(ns, claim, pv).await?;
        Ok((now == (bound.clone(), bound.clone()), now))
    })
    .await?;
    let new_claim = ns.api::<PersistentVolumeClaim>().get(claim).await?;
    assert_eq!(
        new_claim.spec.unwrap().volume_name.as_deref(),
        Some(pv.as_str())
    );
    let kept = volumes.get(pv).await?.metadata;
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
    let before = volumes.get(pv).await?.metadata.resource_version;
    let (out, again) = story.restore(&[]);
    assert!(out.status.success(), "{}", log(&out));
    assert!(again.iter().all(|r| r["result"] == "exists"), "{again:?}");
    assert!(again.iter().all(|r| r["note"].is_null()), "{again:?}");
    assert_eq!(volumes.get(pv).await?.metadata.resource_version, before);
    let uids = |records: &[Value]| records.iter().map(|r| r["uid"].clone()).collect::<Vec<_>>();
    assert_eq!(uids(&again), uids(&restored));
    Ok(())
}

/// A session restored without waiting for its claim to bind (`--bind-wait-seconds 0`), and
/// deleted again by the next run (its row still gone): the volume is kept again for the claim
/// deleted now, the claim's receipt names it, and a later restore brings the session back on it,
/// not on an empty claim. While another claim holds the claim's name, a restore refuses (exit
/// non-zero), creates nothing of the session and leaves the kept volume as it is.
#[tokio::test]
async fn a_restored_session_deleted_again_keeps_its_volume() -> Result {
    let Some(story) = Story::new("restore-again").await? else {
        return Ok(());
    };
    let lines = story.run();
    story.released(&format!("{lines:?}")).await?;

    // Restored, not waiting for the bind: the volume is moved to the new claim, still Retain.
    let (out, restored) = story.restore(&["--bind-wait-seconds", "0"]);
    assert!(out.status.success(), "{}", log(&out));
    let new_uid = restored[0]["uid"].as_str().unwrap().to_owned();
    let (policy, record) = story.volume().await?;
    assert_eq!(policy, "Retain");
    assert_eq!(record.unwrap()["restoredTo"], new_uid.as_str());

    // The session is still gone: the next run deletes what the restore created, the claim first,
    // and keeps the volume again, for that claim.
    let lines = story.run();
    let claim_line = lines
        .iter()
        .find(|l| l["kind"] == "PersistentVolumeClaim" && l["name"] == story.claim.as_str())
        .unwrap();
    assert_eq!(claim_line["result"], "deleted", "{lines:?}");
    let (policy, record) = story.volume().await?;
    assert_eq!(policy, "Retain", "{lines:?}");
    let record = record.expect("gc's record");
    assert_eq!(record["claimUid"], new_uid.as_str(), "{record}");
    assert!(record.get("restoredTo").is_none(), "{record}");
    let volume_line = lines
        .iter()
        .find(|l| l["kind"] == "PersistentVolume")
        .unwrap();
    assert_eq!(volume_line["decision"], "held", "{volume_line}");
    let listed = story.gc(&[
        "archives",
        "list",
        "--kind",
        "PersistentVolumeClaim",
        "--pod",
        &story.claim,
        "-o",
        "json",
    ]);
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout)?;
    let newest = listed.iter().find(|r| r["uid"] == new_uid.as_str());
    let newest = newest.unwrap_or_else(|| panic!("no receipt of {new_uid}: {listed:?}"));
    assert_eq!(newest["retainedVolume"], story.pv.as_str(), "{newest}");
    story.released(&format!("{lines:?}")).await?;

    // Another claim takes the name: the restore refuses, creates nothing, moves nothing.
    let foreign = serde_json::from_value(json!({
        "metadata": {"name": story.claim},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    let claims = story.ns.api::<PersistentVolumeClaim>();
    claims.create(&PostParams::default(), &foreign).await?;
    let before = story.volume().await?;
    let (out, refused) = story.restore(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", log(&out));
    assert!(
        refused[0]["result"]
            .as_str()
            .unwrap()
            .starts_with("failed: conflict: another claim"),
        "{refused:?}"
    );
    assert!(
        refused[0]["result"].as_str().unwrap().contains(&story.pv),
        "{refused:?}"
    );
    assert!(
        refused[1..].iter().all(|r| r["result"]
            .as_str()
            .unwrap()
            .starts_with("failed: not restored")),
        "{refused:?}"
    );
    let deployment = story.ns.api::<Deployment>().get_opt(story.gone).await?;
    assert!(deployment.is_none(), "nothing of the session created");
    assert_eq!(story.volume().await?, before);
    claims.delete(&story.claim, &Default::default()).await?;
    eventually("the other claim gone", async || {
        Ok((claims.get_opt(&story.claim).await?.is_none(), ()))
    })
    .await?;

    // Then the session comes back on its volume, and the volume gets its policy back.
    let (out, restored) = story.restore(&[]);
    assert!(out.status.success(), "{}", log(&out));
    assert_eq!(
        restored[0]["note"],
        format!(
            "on its volume {}, bound again: reclaim policy Delete given back",
            story.pv
        ),
        "{restored:?}"
    );
    assert_eq!(story.volume().await?, ("Delete".to_owned(), None));
    Ok(())
}

/// A claim a restore created that someone deletes again (not a run of gc: a user, StreamSpace),
/// before it was bound: its volume stays kept for it (Retain, gc's record), and the next restore
/// moves the volume to the claim it creates, and gives it back its policy once bound. Before, the
/// restore refused ("restored already") for the whole window, after which the volume was deleted.
#[tokio::test]
async fn a_restored_claim_deleted_by_someone_else_can_be_restored_again() -> Result {
    let Some(story) = Story::new("restore-user").await? else {
        return Ok(());
    };
    let lines = story.run();
    story.released(&format!("{lines:?}")).await?;
    let (out, restored) = story.restore(&["--bind-wait-seconds", "0"]);
    assert!(out.status.success(), "{}", log(&out));
    let first = restored[0]["uid"].as_str().unwrap().to_owned();

    // Someone deletes the claim the restore created; Kubernetes releases the volume from it.
    let claims = story.ns.api::<PersistentVolumeClaim>();
    claims.delete(&story.claim, &Default::default()).await?;
    story
        .released(&format!("the claim {first} deleted"))
        .await?;
    let (policy, record) = story.volume().await?;
    assert_eq!(policy, "Retain");
    assert_eq!(record.unwrap()["restoredTo"], first.as_str());

    // Restored again: on its volume, bound, its policy given back.
    let (out, restored) = story.restore(&[]);
    assert!(out.status.success(), "{}", log(&out));
    let claim = restored
        .iter()
        .find(|r| r["kind"] == "PersistentVolumeClaim")
        .unwrap();
    assert_eq!(claim["result"], "created", "{restored:?}");
    assert_ne!(claim["uid"], first.as_str());
    assert_eq!(
        claim["note"],
        format!(
            "on its volume {}, bound again: reclaim policy Delete given back",
            story.pv
        ),
        "{restored:?}"
    );
    assert_eq!(story.volume().await?, ("Delete".to_owned(), None));
    Ok(())
}

/// A claim a restore created, deleted before it was bound to its volume (by a user, as here,
/// or by a run): the volume's keeping still ends. The next run finds that claim gone and notes
/// it on gc's record, its window starting then; each run until it passed holds the volume
/// (`Retain`), and the first run after gives it back its policy, so that Kubernetes reclaims it
/// as it would have at the first delete: no volume is kept for ever.
#[tokio::test]
async fn a_restored_claim_deleted_before_it_binds_ends_its_window() -> Result {
    let Some(story) = Story::new("restore-unbound").await? else {
        return Ok(());
    };
    let lines = story.run();
    story.released(&format!("{lines:?}")).await?;
    let (out, restored) = story.restore(&["--bind-wait-seconds", "0"]);
    assert!(out.status.success(), "{}", log(&out));
    story
        .ns
        .api::<PersistentVolumeClaim>()
        .delete(&story.claim, &Default::default())
        .await?;
    story.released(&format!("{restored:?}")).await?;

    let volume_line = |lines: &[Value]| {
        lines
            .iter()
            .find(|l| l["kind"] == "PersistentVolume" && l["name"] == story.pv.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("no line of {}: {lines:?}", story.pv))
    };
    let held = volume_line(&story.run());
    assert_eq!(held["decision"], "held", "{held}");
    let reason = held["reason"].as_str().unwrap();
    assert!(
        reason.contains("which is gone (deleted before it was bound; found gone ")
            && reason.contains("): keeps Retain for --volume-retention 7d from then"),
        "{held}"
    );
    assert_eq!(story.volume().await?.0, "Retain");
    let day = 86_400;
    let past = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() + 7 * day + 3600,
    )?
    .to_string();
    let back = volume_line(&story.run_at(Some(&past)));
    assert_eq!(back["decision"], "delete", "{back}");
    assert_eq!(back["result"], "deleted", "{back}");
    let pv = Api::<PersistentVolume>::all(story.ns.client().clone())
        .get_opt(&story.pv)
        .await?;
    let policy = pv.and_then(|pv| pv.spec?.persistent_volume_reclaim_policy);
    assert_ne!(policy.as_deref(), Some("Retain"), "{back}");
    Ok(())
}

/// StreamSpace's reconciler as it would be with gc (`examples/streamspace`, Go, through the
/// client in `clients/go`): the control plane ends a session (its row `terminated`) and the
/// reconciler asks `serve`'s request API to collect it; gc checks the reconciler's projected
/// token and right, then archives and deletes the session's claim, Deployment, Service and
/// `Session`, its volume kept, and nothing of the live session. The reconciler lists the
/// session's archives and restores it through the API: gc acts as the restore account (a token
/// it asks for), and the session comes back on its own volume.
#[tokio::test]
async fn the_streamspace_reconciler_collects_and_restores_a_session_through_the_api() -> Result {
    use k8s_openapi::api::rbac::v1::{
        ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
    };
    let Some(story) = Story::new("restore-api").await? else {
        return Ok(());
    };
    let Story {
        ns,
        gone,
        claim,
        pv,
        ..
    } = &story;
    let pool = story.db.pool().await?;
    sqlx::query("INSERT INTO sessions VALUES ($1, 'terminated')")
        .bind(*gone)
        .execute(&pool)
        .await?;
    pool.close().await;
    // The reconciler's account, allowed gc's calls in this namespace; the restore account, as
    // the chart's (gc-k8s' rules), its volumes' rule cluster-wide.
    ns.service_account_client("streamspace-api").await?;
    let rule = |resources: &[&str], verb: &str| PolicyRule {
        api_groups: Some(vec!["gc.stream.space".into()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: vec![verb.to_owned()],
        ..PolicyRule::default()
    };
    let calls = vec![
        rule(&["sessions/collect", "sessions/restore"], "create"),
        rule(&["runs", "archives"], "get"),
    ];
    ns.grant("streamspace-api", calls).await?;
    ns.service_account_client("gc-restore").await?;
    ns.grant("gc-restore", gc_k8s::rbac::restore_rules(true))
        .await?;
    let volumes_role = format!("{}-restore-volumes", ns.name());
    let post = PostParams::default();
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(volumes_role.clone()),
            ..Default::default()
        },
        rules: Some(gc_k8s::rbac::restore_volume_rules()),
        ..Default::default()
    };
    Api::<ClusterRole>::all(ns.client().clone())
        .create(&post, &role)
        .await?;
    let binding = ClusterRoleBinding {
        metadata: role.metadata.clone(),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: volumes_role,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "gc-restore".into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(ns.client().clone())
        .create(&post, &binding)
        .await?;
    let token = ns
        .service_account_token_for("streamspace-api", &["gc"])
        .await?;
    let token_file = story.archives.path().join("token");
    std::fs::write(&token_file, token)?;

    let (metrics, api) = (common::free_address(), common::free_address());
    let archives = story.archives.path().join("archives");
    let restore_account = format!("{}/gc-restore", ns.name());
    let serve = [
        "serve",
        "--listen",
        &metrics,
        "--api-listen",
        &api,
        "--interval",
        "6h",
        // The objects may be less than a second old: the grace is not what this is about.
        "--request-grace",
        "0s",
        "--api-restore-account",
        &restore_account,
    ];
    let sessions = [
        "sessions",
        "-n",
        ns.name(),
        "--cluster-id",
        ns.name(),
        "--store",
        &story.store,
        "--kubeconfig",
        &story.kubeconfig,
        "--archive-dir",
        archives.to_str().unwrap(),
        "--database-url",
        story.db.url(),
        "--state-column",
        "state",
        "--terminal-state",
        "terminated",
        "--dry-run=none",
    ];
    let mut child = command()
        .args(serve)
        .args(sessions)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/streamspace");
    let reconciler = story.archives.path().join("streamspace");
    let built = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&reconciler)
        .arg(".")
        .current_dir(example)
        .env("CGO_ENABLED", "0")
        .output()?;
    assert!(built.status.success(), "{}", log(&built));
    eventually("the request API answers", async || {
        Ok((std::net::TcpStream::connect(&api).is_ok(), ()))
    })
    .await?;
    let database = if story.db.url().contains('?') {
        format!("{}&sslmode=disable", story.db.url())
    } else {
        format!("{}?sslmode=disable", story.db.url())
    };
    let url = format!("http://{api}");
    let reconcile = |args: &[&str]| {
        let out = std::process::Command::new(&reconciler)
            .args(args)
            .args(["-gc-url", &url, "-namespace", ns.name(), "-token-file"])
            .arg(&token_file)
            .env("DATABASE_URL", &database)
            .output()
            .unwrap();
        eprintln!("$ streamspace {}\n{}", args.join(" "), log(&out));
        out
    };

    // One pass of the reconciler: the terminated session is collected, its volume kept.
    let out = reconcile(&["-once"]);
    assert!(out.status.success(), "{}", log(&out));
    let said = log(&out);
    for kind in ["PersistentVolumeClaim", "Deployment", "Service", "Session"] {
        assert!(said.contains(&format!("delete {kind} ")), "{kind}: {said}");
    }
    assert_eq!(said.matches(": deleted ").count(), 4, "{said}");
    story.released(&said).await?;
    assert_eq!(story.volume().await?.0, "Retain");
    let gone_objects = (
        ns.api::<Deployment>().get_opt(gone).await?,
        ns.api::<Service>().get_opt(gone).await?,
    );
    assert!(
        gone_objects
            .0
            .is_none_or(|d| d.metadata.deletion_timestamp.is_some())
    );
    assert!(gone_objects.1.is_none());
    let live = "alice-firefox-0000000a";
    assert!(ns.api::<Deployment>().get_opt(live).await?.is_some());
    assert!(ns.api::<Service>().get_opt(live).await?.is_some());
    // A reconciler started again asks again (it remembers in memory only): nothing is left to
    // delete, and nothing is.
    let again = reconcile(&["-once"]);
    assert!(again.status.success(), "{}", log(&again));
    assert!(!log(&again).contains(": deleted "), "{}", log(&again));

    // The restore, through the API, once the session's row is back (while it is terminal the
    // reconciler refuses: the next pass would collect it again): its archives listed, its
    // objects created again as the restore account, the claim on its own volume.
    let refused = reconcile(&["restore", gone]);
    assert!(!refused.status.success(), "{}", log(&refused));
    assert!(
        log(&refused).contains("put the session's row back first"),
        "{}",
        log(&refused)
    );
    assert!(
        ns.api::<Service>().get_opt(gone).await?.is_none(),
        "nothing restored"
    );
    let pool = story.db.pool().await?;
    sqlx::query("UPDATE sessions SET state = 'running' WHERE id = $1")
        .bind(*gone)
        .execute(&pool)
        .await?;
    pool.close().await;
    let out = reconcile(&["restore", gone]);
    assert!(out.status.success(), "{}", log(&out));
    let said = log(&out);
    assert_eq!(said.matches(": archived ").count(), 4, "{said}");
    assert_eq!(said.matches(": created").count(), 4, "{said}");
    let restorer = format!("system:serviceaccount:{}:gc-restore", ns.name());
    assert!(said.contains(&format!("restored as {restorer}")), "{said}");
    let bound = Some("Bound".to_owned());
    eventually("the restored claim bound", async || {
        let now = phases(ns, claim, pv).await?;
        Ok((now == (bound.clone(), bound.clone()), now))
    })
    .await?;
    let new_claim = ns.api::<PersistentVolumeClaim>().get(claim).await?;
    assert_eq!(
        new_claim.spec.unwrap().volume_name.as_deref(),
        Some(pv.as_str())
    );
    assert!(ns.api::<Service>().get_opt(gone).await?.is_some());
    // Bound within the restore's wait: the volume has its policy back.
    assert!(said.contains("reclaim policy Delete given back"), "{said}");
    assert_eq!(story.volume().await?, ("Delete".to_owned(), None));

    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    assert!(sent.success());
    let status = child.wait()?;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)?;
    assert!(status.success(), "{stderr}");
    Api::<ClusterRoleBinding>::all(ns.client().clone())
        .delete(
            &format!("{}-restore-volumes", ns.name()),
            &Default::default(),
        )
        .await?;
    Api::<ClusterRole>::all(ns.client().clone())
        .delete(
            &format!("{}-restore-volumes", ns.name()),
            &Default::default(),
        )
        .await?;
    Ok(())
}
