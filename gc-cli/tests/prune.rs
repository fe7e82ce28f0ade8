//! `gc-cli archives prune` as users run it, on archives real runs wrote: a failed-Pod run on the
//! real API server (a folder and SQLite; an S3-compatible bucket and PostgreSQL), and a session
//! run with a kept volume. What is older than the window goes, archive first; a dry run removes
//! nothing; a session goes only whole and never while its kept volume may be restored; a sink or
//! a store that fails mid-prune stops it, and a rerun finishes it; bad windows remove nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use gc_core::ports::{ArchiveSink as _, Receipt, Store as _};
use gc_testbed::{S3Server, TestBed, TestDatabase, TestNamespace};
use serde_json::{Value, json};

mod common;

use common::{Result, command, ok, target, with_s3_credentials};

/// A store and an archive folder of the test's own.
struct Scratch {
    _dir: tempfile::TempDir,
    store: String,
    archives: PathBuf,
}

impl Scratch {
    fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        Ok(Self {
            store: common::sqlite(dir.path(), "gc.sqlite3"),
            archives: dir.path().join("archives"),
            _dir: dir,
        })
    }

    /// `gc-cli ARGS --store STORE --archive-dir ARCHIVES`; an `archives prune` that does not
    /// say `--dry-run` acts (`--dry-run=none`: a dry run is its default).
    fn gc_cli(&self, args: &[&str]) -> Command {
        let mut c = command();
        c.args(args).args(["--store", &self.store]);
        if args.starts_with(&["archives", "prune"])
            && !args.iter().any(|a| a.starts_with("--dry-run"))
        {
            c.arg("--dry-run=none");
        }
        c.arg("--archive-dir").arg(&self.archives);
        c
    }

    /// `archives prune ARGS` (`-o json`), its document and how it exited.
    fn prune(&self, args: &[&str]) -> (Value, Output) {
        prune_with(self.gc_cli(&[&["archives", "prune", "-o", "json"], args].concat()))
    }

    /// The receipts of `cluster` in the store.
    async fn receipts(&self, cluster: &str) -> Result<Vec<Receipt>> {
        receipts(&self.store, cluster).await
    }
}

/// Runs `command` (an `archives prune -o json`): the document it printed and how it exited.
fn prune_with(mut command: Command) -> (Value, Output) {
    let out = command.output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out)
}

async fn receipts(store: &str, cluster: &str) -> Result<Vec<Receipt>> {
    let store = gc_store::open(store).await?;
    let listed = store
        .list_receipts(cluster, gc_store::ReceiptQuery::default())
        .await?;
    store.close().await;
    Ok(listed.into_iter().map(|l| l.receipt).collect())
}

/// The files under `folder` but the sink probe's, as paths.
fn files_under(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        if e.file_name() == ".gc-probe" {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(files_under(&e.path()));
        } else {
            found.push(e.path());
        }
    }
    found.sort();
    found
}

/// The file a `file://` URI names (the test folders hold no bytes that need encoding).
fn file_of(uri: &str) -> PathBuf {
    PathBuf::from(uri.strip_prefix("file://").unwrap())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `(result, uid)` of each receipt a prune document lists.
fn results(doc: &Value) -> Vec<(String, String)> {
    doc["receipts"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc}"))
        .iter()
        .map(|r| {
            let text = |f: &str| r[f].as_str().unwrap().to_owned();
            (text("result"), text("uid"))
        })
        .collect()
}

/// A pause that makes every receipt written before it older than a window of `1s`.
async fn age() {
    tokio::time::sleep(Duration::from_millis(2100)).await;
}

/// Two archives and their receipts, written as a run writes them.
async fn seeded() -> Result<Scratch> {
    let s = Scratch::new()?;
    let store = gc_store::open(&s.store).await?;
    let sink = gc_store::DirectorySink::new(s.archives.clone());
    for uid in ["a1", "a2"] {
        let bytes = json!({"metadata": {"uid": uid}}).to_string().into_bytes();
        let key = gc_core::ports::ArchiveKey {
            cluster_id: "primary".into(),
            namespace: "batch".into(),
            uid: uid.into(),
        };
        let uri = sink.write(&key, &bytes).await?;
        let receipt = Receipt {
            cluster_id: "primary".into(),
            namespace: "batch".into(),
            uid: uid.into(),
            name: format!("pod-{uid}"),
            uri,
            sha256: gc_core::pods::archive::digest(&bytes),
            bytes: bytes.len() as u64,
            session: None,
        };
        store.put_receipt(&receipt).await?;
    }
    store.close().await;
    Ok(s)
}

#[tokio::test]
async fn bad_windows_and_a_missing_folder_remove_nothing() -> Result {
    let s = seeded().await?;
    age().await;
    let before = files_under(&s.archives);
    assert_eq!(before.len(), 2);
    for (args, flag, example) in [
        (&["--older-than", "0"][..], "--older-than", "90d"),
        (&["--older-than", "0s"], "--older-than", "90d"),
        (&["--older-than", "abc"], "--older-than", "90d"),
        (&["--older-than", "-5d"], "--older-than", "90d"),
        (&["--older-than=-1h"], "--older-than", "90d"),
        (&["--older-than", "30"], "--older-than", "30d"),
        (&[], "--older-than", "<DURATION>"),
        (
            &["--older-than", "1s", "--retain-volume-days", "-1"],
            "--volume-retention",
            "is outside 0d..=3650d",
        ),
        (
            &["--older-than", "1s", "--retain-volume-days", "3651"],
            "--volume-retention",
            "is outside 0d..=3650d",
        ),
    ] {
        let out = s
            .gc_cli(&[&["archives", "prune"], args].concat())
            .output()?;
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains(flag) && said.contains(example),
            "{args:?}: {said}"
        );
    }
    assert_eq!(files_under(&s.archives), before);
    assert_eq!(s.receipts("primary").await?.len(), 2);

    // The folder not there (a volume not mounted): every archive would look missing. Nothing is
    // removed, exit 1.
    let away = s.archives.with_file_name("unmounted");
    std::fs::rename(&s.archives, &away)?;
    let out = s
        .gc_cli(&["archives", "prune", "--older-than", "1s"])
        .output()?;
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("does not exist or is not a folder") && said.contains("nothing removed"),
        "{said}"
    );
    assert_eq!(s.receipts("primary").await?.len(), 2);
    std::fs::rename(&away, &s.archives)?;
    assert_eq!(files_under(&s.archives), before);

    // The window in every accepted form, nothing old enough: nothing listed, the rest counted.
    for window in ["30d", "12h", "90m", "3600s"] {
        let (doc, out) = s.prune(&["--older-than", window]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            (&doc["receipts"], &doc["inWindow"], &doc["of"]),
            (&json!([]), &json!(2), &json!(2)),
            "{window}: {doc}"
        );
    }
    let out = s
        .gc_cli(&["archives", "prune", "--older-than", "1h"])
        .output()?;
    let table = ok(&out);
    assert!(
        table.starts_with(
            "0 removed, 0 kept, 2 in the window, of 2 receipts (older than the window: before "
        ) && table.ends_with("Z)\n"),
        "{table}"
    );
    Ok(())
}

/// One namespace of the test bed and a store and folder beside it.
struct Pods {
    ns: TestNamespace,
    kubeconfig: String,
    scratch: Scratch,
}

impl Pods {
    async fn new(prefix: &str, names: &[&str]) -> Result<Self> {
        let bed = TestBed::shared().await?;
        let ns = bed.namespace(prefix).await?;
        for name in names {
            target(&ns, name).await?;
        }
        Ok(Self {
            kubeconfig: bed.kubeconfig_path().to_str().unwrap().to_owned(),
            ns,
            scratch: Scratch::new()?,
        })
    }

    /// A live `run pods` that archives and deletes every target.
    fn run(&self, extra: &[&str]) -> Command {
        let mut c = command();
        let ns = self.ns.name();
        c.args(["run", "pods", "-n", ns, "--retention-seconds", "3600"])
            .args(["--dry-run", "none", "--auto-remediate"])
            .args(["--kubeconfig", &self.kubeconfig])
            .args(extra);
        c
    }
}

/// A failed-Pod run's archives, in a folder with the receipts in SQLite: a window they are inside
/// removes nothing; a dry run lists them and removes nothing; a folder that cannot remove one
/// stops the prune there (nothing after it removed, exit 1); the rerun removes the rest, the
/// receipt whose archive is already gone too, and says so.
#[tokio::test]
async fn prune_removes_a_pod_runs_archives_and_a_failing_folder_stops_it() -> Result {
    let names = ["p1", "p2", "p3", "p4"];
    let p = Pods::new("prune-pods", &names).await?;
    let s = &p.scratch;
    let archive_dir = s.archives.to_str().unwrap();
    ok(&p
        .run(&["--store", &s.store, "--archive-dir", archive_dir])
        .output()?);
    let written = s.receipts("primary").await?;
    assert_eq!(written.len(), 4);
    assert_eq!(files_under(&s.archives).len(), 4);

    let (doc, out) = s.prune(&["--older-than", "1h", "-n", p.ns.name()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!((&doc["removed"], &doc["inWindow"]), (&json!(0), &json!(4)));
    age().await;

    // A dry run, asked for in each form or by default (no `--dry-run` at all, as typed): each
    // listed, nothing removed.
    let by_default = || {
        let mut c = command();
        c.args(["archives", "prune", "-o", "json", "--older-than", "1s"])
            .args(["--store", &s.store])
            .arg("--archive-dir")
            .arg(&s.archives);
        prune_with(c)
    };
    for (doc, out) in [
        s.prune(&["--older-than", "1s", "--dry-run"]),
        s.prune(&["--older-than", "1s", "--dry-run=server"]),
        by_default(),
    ] {
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(doc["dryRun"], true);
        assert_eq!(doc["wouldRemove"], 4, "{doc}");
        assert!(results(&doc).iter().all(|(r, _)| r == "wouldRemove"));
        assert_eq!(files_under(&s.archives).len(), 4);
        assert_eq!(s.receipts("primary").await?.len(), 4);
    }
    // Another namespace's, or another cluster's: nothing of these.
    let (doc, _) = s.prune(&["--older-than", "1s", "-n", "elsewhere"]);
    assert_eq!(doc["of"], 0);
    let (doc, _) = s.prune(&["--older-than", "1s", "--cluster-id", "other"]);
    assert_eq!(doc["of"], 0);

    // One archive a folder cannot remove (a folder in its place).
    let broken = &written[1];
    let at = file_of(&broken.uri);
    std::fs::remove_file(&at)?;
    std::fs::create_dir(&at)?;
    std::fs::write(at.join("x"), "x")?;
    let (doc, out) = s.prune(&["--older-than", "1s"]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("nothing more removed") && said.contains("cannot remove archive"),
        "{said}"
    );
    let stopped = doc["stopped"].as_str().unwrap_or_else(|| panic!("{doc}"));
    assert!(stopped.contains(&broken.uri), "{stopped}");
    let removed: Vec<String> = results(&doc).into_iter().map(|(_, uid)| uid).collect();
    assert_eq!(doc["removed"], removed.len());
    let left = s.receipts("primary").await?;
    assert_eq!(left.len(), 4 - removed.len());
    for r in &written {
        let gone = removed.contains(&r.uid);
        assert_eq!(left.iter().any(|l| l.uid == r.uid), !gone, "{}", r.name);
        // Nothing after the failure was removed: each receipt left has its archive.
        assert_eq!(file_of(&r.uri).exists(), !gone, "{}", r.name);
    }
    assert!(left.iter().any(|l| l.uid == broken.uid));

    // The folder fixed, the archive gone (as a crash between the two removals leaves it): the
    // rerun removes the receipts left, that one too, and says its archive was missing.
    std::fs::remove_dir_all(&at)?;
    let out = s
        .gc_cli(&["archives", "prune", "--older-than", "1s"])
        .output()?;
    let table = ok(&out);
    let row = table
        .lines()
        .find(|l| l.contains(&broken.name))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.starts_with("removed") && row.contains("the archive was already missing"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "{} removed (1 archive already missing), 0 kept, 0 in the window, of {} receipts",
            left.len(),
            left.len()
        )),
        "{table}"
    );
    assert!(s.receipts("primary").await?.is_empty());
    assert!(files_under(&s.archives).is_empty());
    let (doc, out) = s.prune(&["--older-than", "1s"]);
    assert!(out.status.success());
    assert_eq!(doc["of"], 0);
    Ok(())
}

/// `PL/pgSQL` that refuses to delete the receipt of `uid`: a store failing mid-prune.
fn refuse_deleting(uid: &str) -> String {
    format!(
        "CREATE FUNCTION refuse_delete() RETURNS trigger AS $$ BEGIN \
         IF OLD.uid = '{uid}' THEN RAISE EXCEPTION 'refused by the test'; END IF; \
         RETURN OLD; END $$ LANGUAGE plpgsql; \
         CREATE TRIGGER refuse_delete BEFORE DELETE ON gc_receipts \
         FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
    )
}

/// A failed-Pod run's archives in an S3-compatible bucket, with the receipts in PostgreSQL: a
/// bucket that does not answer removes nothing; a store that fails to remove one receipt stops
/// the prune after that receipt's archive (nothing after it removed); the rerun removes the rest,
/// that receipt too, and says its archive was already gone.
#[tokio::test]
async fn prune_on_a_bucket_and_postgresql_and_a_failing_store_stops_it() -> Result {
    let Some(db) = TestDatabase::fresh("prune-s3").await? else {
        return Ok(());
    };
    let p = Pods::new("prune-s3", &["q1", "q2", "q3"]).await?;
    let s3 = S3Server::start().await?;
    s3.create_bucket("diagnostics")?;
    let url = "s3://diagnostics/gc";
    let endpoint = s3.endpoint();
    let sink = ["--archive-url", url, "--archive-endpoint", &endpoint];
    let mut run = p.run(&[&["--store", db.url()][..], &sink].concat());
    ok(&with_s3_credentials(&mut run, &s3).output()?);
    let written = receipts(db.url(), "primary").await?;
    assert_eq!(written.len(), 3);
    age().await;
    let prune = |extra: &[&str]| {
        let mut c = command();
        c.args(["archives", "prune", "-o", "json", "--older-than", "1s"])
            .args(["--store", db.url(), "--dry-run=none"])
            .args(extra);
        with_s3_credentials(&mut c, &s3);
        prune_with(c)
    };
    let object = |r: &Receipt| {
        let key = r.uri.strip_prefix("s3://diagnostics/").unwrap();
        s3.object_path("diagnostics", key)
    };

    // Nothing answers at that endpoint: nothing removed, exit 1.
    let nowhere = [
        "--archive-url",
        url,
        "--archive-endpoint",
        "http://127.0.0.1:9",
    ];
    let out = {
        let mut c = command();
        c.args([
            "archives",
            "prune",
            "--older-than",
            "1s",
            "--store",
            db.url(),
            "--dry-run=none",
        ])
        .args(nowhere);
        with_s3_credentials(&mut c, &s3).output()?
    };
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("nothing removed"), "{said}");
    assert_eq!(receipts(db.url(), "primary").await?.len(), 3);
    assert!(written.iter().all(|r| object(r).exists()));

    // The store refuses to remove one receipt.
    let refused = &written[1];
    let pool = db.pool().await?;
    sqlx::raw_sql(&refuse_deleting(&refused.uid))
        .execute(&pool)
        .await?;
    let (doc, out) = prune(&sink);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cannot remove the receipt") && said.contains("nothing more removed"),
        "{said}"
    );
    let removed: Vec<String> = results(&doc).into_iter().map(|(_, uid)| uid).collect();
    let left = receipts(db.url(), "primary").await?;
    assert_eq!(left.len(), 3 - removed.len(), "{doc}");
    assert!(left.iter().any(|l| l.uid == refused.uid));
    // Its archive went first; nothing after it was touched.
    assert!(!object(refused).exists());
    for r in written.iter().filter(|r| r.uid != refused.uid) {
        let gone = removed.contains(&r.uid);
        assert_eq!(object(r).exists(), !gone, "{}", r.name);
        assert_eq!(left.iter().any(|l| l.uid == r.uid), !gone, "{}", r.name);
    }

    sqlx::raw_sql("DROP TRIGGER refuse_delete ON gc_receipts")
        .execute(&pool)
        .await?;
    pool.close().await;
    let (doc, out) = prune(&sink);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(doc["removed"], left.len(), "{doc}");
    let refused_row = doc["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uid"] == refused.uid.as_str())
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(refused_row["archiveMissing"], true, "{refused_row}");
    assert!(receipts(db.url(), "primary").await?.is_empty());
    assert!(written.iter().all(|r| !object(r).exists()));
    Ok(())
}

/// Two gone sessions, `gone-1` with a claim whose volume is kept: a live `run sessions` archives
/// and deletes them. Past `--older-than`, `gone-2` goes whole; `gone-1` stays whole, its claim
/// for the volume's window (`--retain-volume-days`, 7 by default) and the rest with it, each said
/// why; with `--retain-volume-days 0` it goes too.
#[tokio::test]
async fn a_session_goes_whole_and_never_while_its_kept_volume_may_be_restored() -> Result {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Service};
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};

    let Some(db) = TestDatabase::fresh("prune-sessions").await? else {
        return Ok(());
    };
    common::one_live_session(&db).await?;
    let bed = TestBed::shared().await?;
    let resource = bed.install_session_crd().await?;
    let ns = bed.namespace("prune-sessions").await?;
    let post = PostParams::default();
    for id in ["live-1", "gone-1", "gone-2"] {
        let labels = json!({"app": "streamspace-session", "session": id});
        let session: DynamicObject = serde_json::from_value(json!({
            "apiVersion": resource.api_version, "kind": resource.kind,
            "metadata": {"name": id, "labels": labels},
            "spec": {"user": "someone", "template": "firefox"},
        }))?;
        Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), &resource)
            .create(&post, &session)
            .await?;
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": id, "labels": labels},
            "spec": {"ports": [{"port": 3000}]},
        }))?;
        ns.api::<Service>().create(&post, &service).await?;
    }
    // gone-1's home, bound to a volume whose policy is Delete: the run keeps it.
    let claims = ns.api::<PersistentVolumeClaim>();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "gone-1-home",
                     "labels": {"app": "streamspace-session", "session": "gone-1"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    let claim_uid = claims.create(&post, &claim).await?.metadata.uid.unwrap();
    let pv_name = format!("pv-{}", ns.name());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": format!("/tmp/{pv_name}")},
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": ns.name(), "name": "gone-1-home", "uid": claim_uid},
        },
    }))?;
    let volumes = Api::<PersistentVolume>::all(ns.client().clone());
    volumes.create(&post, &pv).await?;
    let bind = json!({"spec": {"volumeName": pv_name}});
    claims
        .patch("gone-1-home", &PatchParams::default(), &Patch::Merge(&bind))
        .await?;

    let s = Scratch::new()?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    // Its own cluster id: the volumes it keeps are reviewed by its runs alone.
    let cluster = ["--cluster-id", ns.name()];
    let run = [
        "run",
        "sessions",
        "-n",
        ns.name(),
        "--kubeconfig",
        &kubeconfig,
        "--database-url",
        db.url(),
        "--grace-hours",
        "0",
        "--dry-run=none",
    ];
    let out = s.gc_cli(&[&run[..], &cluster].concat()).output()?;
    ok(&out);
    let written = s.receipts(ns.name()).await?;
    let of = |id: &str| -> Vec<String> {
        let mut uids: Vec<String> = written
            .iter()
            .filter(|r| r.session.as_ref().unwrap().session.as_deref() == Some(id))
            .map(|r| r.uid.clone())
            .collect();
        uids.sort();
        uids
    };
    assert_eq!(
        (of("gone-1").len(), of("gone-2").len()),
        (3, 2),
        "{written:?}"
    );
    let kept_claim = written
        .iter()
        .find(|r| r.name == "gone-1-home")
        .and_then(|r| r.session.as_ref()?.retained.clone());
    assert_eq!(kept_claim.map(|v| v.name), Some(pv_name.clone()));
    age().await;

    let window = ["--older-than", "1s"];
    let with = |doc: &Value, result: &str| -> Vec<String> {
        let mut uids: Vec<String> = results(doc)
            .into_iter()
            .filter(|(r, _)| r == result)
            .map(|(_, uid)| uid)
            .collect();
        uids.sort();
        uids
    };
    // One session's receipts only: gone-1's, all kept for its volume; gone-2's not looked at.
    let one = ["--session", "gone-1"];
    let (doc, out) = s.prune(&[&window[..], &cluster, &one].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(with(&doc, "kept"), of("gone-1"), "{doc}");
    assert_eq!(results(&doc).len(), 3, "{doc}");
    assert_eq!(s.receipts(ns.name()).await?.len(), 5);

    let (doc, out) = s.prune(&[&window[..], &cluster].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(with(&doc, "removed"), of("gone-2"), "{doc}");
    assert_eq!(with(&doc, "kept"), of("gone-1"), "{doc}");
    for row in doc["receipts"].as_array().unwrap() {
        let detail = row["detail"].as_str().unwrap();
        match (row["result"].as_str(), row["name"].as_str()) {
            (Some("kept"), Some("gone-1-home")) => assert!(
                detail.contains(&format!("kept volume {pv_name}"))
                    && detail.contains("--volume-retention 7d")
                    && detail.contains("restore sessions"),
                "{detail}"
            ),
            (Some("kept"), _) => assert!(
                detail.starts_with("kept with its session gone-1: PersistentVolumeClaim"),
                "{detail}"
            ),
            _ => assert_eq!(detail, "", "{row}"),
        }
    }
    assert_eq!(s.receipts(ns.name()).await?.len(), 3);
    assert_eq!(files_under(&s.archives).len(), 3);

    // The volume's window given as over: the session goes, whole.
    let no_window = ["--retain-volume-days", "0"];
    let (doc, out) = s.prune(&[&window[..], &cluster, &no_window].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(with(&doc, "removed"), of("gone-1"), "{doc}");
    assert!(s.receipts(ns.name()).await?.is_empty());
    assert!(files_under(&s.archives).is_empty());
    volumes.delete(&pv_name, &Default::default()).await?;
    Ok(())
}
