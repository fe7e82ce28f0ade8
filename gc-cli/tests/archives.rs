//! Archives in an object store and `gc-cli archives`, run as users run them, on a real API server
//! and the real S3-compatible server `s3s-fs`: a live collect archives, verifies and deletes as
//! with a folder; a sink that cannot take archives stops the run before any pin; a run killed at
//! any step leaves no deleted Pod without a verified archive; `archives list|show|verify` read
//! the archives back and `verify` catches a tampered, a missing and an unreceipted archive.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gc_core::ports::Store as _;
use gc_testbed::{FailedPod, S3Server, TestBed, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use serde_json::Value;
use sha2::{Digest, Sha256};

mod common;

use common::{COLLECT, Result, command, ok, old, sqlite, target, with_s3_credentials};

const BUCKET: &str = "diagnostics";
const URL: &str = "s3://diagnostics/gc";

/// One namespace, a store, an object store and the flags every command shares.
struct Env {
    ns: TestNamespace,
    /// Keeps the store's folder alive.
    _dir: tempfile::TempDir,
    kubeconfig: String,
    store: String,
    s3: S3Server,
}

impl Env {
    async fn new(prefix: &str) -> Result<Self> {
        let bed = TestBed::shared().await?;
        let dir = tempfile::tempdir()?;
        let s3 = S3Server::start().await?;
        s3.create_bucket(BUCKET)?;
        Ok(Self {
            ns: bed.namespace(prefix).await?,
            kubeconfig: bed.kubeconfig_path().to_str().unwrap().to_owned(),
            store: sqlite(dir.path(), "gc.sqlite3"),
            _dir: dir,
            s3,
        })
    }

    /// `gc-cli` with `args`, the store, the object store and its credentials (in the
    /// environment, as a Secret would give them), and no other AWS setting of the machine's.
    fn gc_cli(&self, args: &[&str], url: Option<&str>) -> Command {
        let mut c = command();
        c.args(args).args(["--store", &self.store]);
        if let Some(url) = url {
            c.args(["--archive-url", url])
                .args(["--archive-endpoint", &self.s3.endpoint()]);
        }
        with_s3_credentials(&mut c, &self.s3);
        c
    }

    /// A live `run pods` in the namespace, archiving to `url`.
    fn run(&self, url: &str) -> Command {
        self.run_with(url, "false")
    }

    /// `run pods --dry-run DRY_RUN` in the namespace, archiving to `url`.
    fn run_with(&self, url: &str, dry_run: &str) -> Command {
        let mut c = self.gc_cli(
            &[
                "run",
                "pods",
                "--retention-seconds",
                "3600",
                "--dry-run",
                dry_run,
                "--auto-remediate",
            ],
            Some(url),
        );
        c.args(["--kubeconfig", &self.kubeconfig, "-n", self.ns.name()]);
        c
    }

    /// `gc-cli archives ARGS` against this store and (but for `list`) object store.
    fn archives(&self, args: &[&str]) -> Output {
        let url = (args[0] != "list").then_some(URL);
        self.gc_cli(&[&["archives"], args].concat(), url)
            .output()
            .unwrap()
    }

    /// The file `s3s-fs` keeps the archive of `uid` in: `<uid>.<sha256>.json` as written, or
    /// `<uid>.json` (the name of archives written before archives were write-once) when none is.
    fn object(&self, uid: &str) -> PathBuf {
        let folder = format!("gc/primary/{}", self.ns.name());
        let written = std::fs::read_dir(self.s3.object_path(BUCKET, &folder))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|f| f.starts_with(&format!("{uid}.")) && f.len() == uid.len() + 70);
        let file = written.unwrap_or_else(|| format!("{uid}.json"));
        self.s3.object_path(BUCKET, &format!("{folder}/{file}"))
    }

    /// The Pods left in the namespace, by name, with their finalizers.
    async fn pods(&self) -> Result<BTreeMap<String, Vec<String>>> {
        let list = self.ns.api::<Pod>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|p| {
                (
                    p.metadata.name.unwrap(),
                    p.metadata.finalizers.unwrap_or_default(),
                )
            })
            .collect())
    }
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn a_live_collect_archives_to_the_object_store_and_reads_back() -> Result {
    let env = Env::new("s3-collect").await?;
    let pods = env.ns.api::<Pod>();
    let mut uids = BTreeMap::new();
    for name in ["a", "b"] {
        let pod = FailedPod::new(name)
            .label(COLLECT, "true")
            .finished_at(old())
            .terminated_container("main", 137)
            .terminated_container("sidecar", 0)
            .create(&pods)
            .await?;
        uids.insert(name, pod.metadata.uid.unwrap());
    }
    ok(&env.run(URL).output()?);
    assert!(env.pods().await?.is_empty(), "both collected");

    // Each archive is in the bucket under its key, and its receipt says where and what.
    let store = gc_store::open(&env.store).await?;
    for (name, uid) in &uids {
        let receipt = store.get_receipt("primary", uid).await?.expect("a receipt");
        let bytes = std::fs::read(env.object(uid))?;
        assert_eq!(sha256(&bytes), receipt.sha256, "{name}");
        // The receipt names the exact archive: its key carries its digest.
        assert_eq!(
            receipt.uri,
            format!(
                "{URL}/primary/{}/{uid}.{}.json",
                env.ns.name(),
                receipt.sha256
            )
        );
        assert_eq!(bytes.len() as u64, receipt.bytes);
        let doc: Value = serde_json::from_slice(&bytes)?;
        assert_eq!(doc["metadata"]["name"], *name);
    }
    store.close().await;

    // list: newest first, filtered; JSON for machines.
    let out = env.archives(&["list", "-o", "json"]);
    let listed: Vec<Value> = serde_json::from_str(&ok(&out))?;
    assert_eq!(listed.len(), 2);
    assert!(listed[0]["archivedAt"].as_str() >= listed[1]["archivedAt"].as_str());
    let out = env.archives(&["list", "--pod", "a", "-n", env.ns.name()]);
    let table = ok(&out);
    assert!(
        table.starts_with("ARCHIVED") && table.contains(&uids["a"]),
        "{table}"
    );
    assert!(!table.contains(&uids["b"]), "{table}");
    // The session column (`-` for a Pod's archive); the digest and the URI in `-o wide` only.
    fn words(t: &str) -> Vec<Vec<&str>> {
        t.lines().map(|l| l.split_whitespace().collect()).collect()
    }
    let rows = words(&table);
    assert_eq!(
        rows[0],
        [
            "ARCHIVED",
            "NAMESPACE",
            "KIND",
            "NAME",
            "SESSION",
            "UID",
            "BYTES"
        ]
    );
    assert_eq!(
        (rows[1][4], rows[1][5]),
        ("-", uids["a"].as_str()),
        "{table}"
    );
    assert!(!table.contains("s3://"), "{table}");
    let wide = ok(&env.archives(&["list", "--pod", "a", "-n", env.ns.name(), "-o", "wide"]));
    assert_eq!(words(&wide)[0][7..], ["SHA256", "URI"]);
    assert!(wide.contains("s3://"), "{wide}");
    let out = env.archives(&["list", "--since", "2999-01-01T00:00:00Z", "-o", "json"]);
    assert_eq!(ok(&out).trim(), "[]");

    // show: each container's exit code and reason; -o json is the archive as stored.
    let out = env.archives(&["show", &uids["a"]]);
    let shown = ok(&out);
    let main = shown
        .lines()
        .find(|l| l.starts_with("main"))
        .unwrap_or_else(|| panic!("{shown}"));
    let cells: Vec<&str> = main.split_whitespace().collect();
    assert_eq!(cells[..4], ["main", "container", "137", "Error"], "{shown}");
    assert!(shown.contains("Phase:    Failed"), "{shown}");
    let out = env.archives(&["show", &uids["a"], "-o", "json"]);
    assert_eq!(
        ok(&out).trim_end().as_bytes(),
        std::fs::read(env.object(&uids["a"]))?
    );

    // verify: all good (said on stdout too, in one line: `-q` leaves it), then one tampered,
    // one missing, one without a receipt.
    let out = env.archives(&["verify"]);
    assert_eq!(ok(&out).lines().last(), Some("2 verified, 0 failed"));
    assert!(stderr(&out).contains("2 archive(s) match their receipts, 0 problem(s)"));
    let tampered = env.object(&uids["a"]);
    let text = std::fs::read_to_string(&tampered)?.replace("137", "0");
    std::fs::write(&tampered, text)?;
    let out = env.archives(&["show", &uids["a"]]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not match its receipt"),
        "{}",
        stderr(&out)
    );
    let unreceipted = env.object("0000-not-receipted");
    std::fs::copy(env.object(&uids["b"]), &unreceipted)?;
    std::fs::remove_file(env.object(&uids["b"]))?;
    let out = env.archives(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = String::from_utf8(out.stdout.clone())?;
    assert_eq!(
        report.lines().last(),
        Some("0 verified, 2 failed, 1 without a receipt"),
        "{report}"
    );
    // Nothing to verify is said, and fails, naming the clusters that have receipts.
    let none = env.archives(&["verify", "-n", "no-such-namespace"]);
    assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
    assert!(
        stderr(&none).contains(
            "nothing to verify: no receipt of cluster primary in namespace no-such-namespace; \
             receipts exist for --cluster-id primary"
        ),
        "{}",
        stderr(&none)
    );
    let other = env.archives(&["verify", "--cluster-id", "prod"]);
    assert_eq!(other.status.code(), Some(1), "{}", stderr(&other));
    assert!(
        stderr(&other).contains(
            "nothing to verify: no receipt of cluster prod; receipts exist for --cluster-id primary"
        ),
        "{}",
        stderr(&other)
    );
    let result_of = |needle: &str| {
        report
            .lines()
            .find(|l| l.contains(needle))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_owned)
    };
    assert_eq!(
        result_of(&uids["a"]).as_deref(),
        Some("mismatch"),
        "{report}"
    );
    assert_eq!(
        result_of(&uids["b"]).as_deref(),
        Some("missing"),
        "{report}"
    );
    assert_eq!(
        result_of("0000-not-receipted").as_deref(),
        Some("noReceipt"),
        "{report}"
    );
    assert!(
        stderr(&out).contains(
            "0 archive(s) match their receipts, 2 problem(s), 0 skipped, 1 archive(s) without a \
             receipt, 0 unexpected object(s)"
        ),
        "{}",
        stderr(&out)
    );
    Ok(())
}

/// `verify` reads each receipt from the sink its URI names (a store whose archives moved from a
/// folder to a bucket verifies both), says plainly which it skipped (a folder not on this
/// machine), lists objects under the prefix that are not archives, and passes on an archive
/// without a receipt alone (archives are write-once: no later run replaces it).
#[tokio::test]
async fn verify_reads_each_receipt_from_its_own_sink_and_lists_what_is_not_an_archive() -> Result {
    let env = Env::new("s3-verify").await?;
    let pods = env.ns.api::<Pod>();
    let folder = tempfile::tempdir()?;
    let dir = folder.path().join("archives");
    let in_folder = FailedPod::new("in-folder")
        .label(COLLECT, "true")
        .finished_at(old())
        .create(&pods)
        .await?;
    let mut c = env.gc_cli(
        &[
            "run",
            "pods",
            "--retention-seconds",
            "3600",
            "--dry-run=none",
            "--auto-remediate",
        ],
        None,
    );
    c.args(["--archive-dir", dir.to_str().unwrap()]).args([
        "--kubeconfig",
        &env.kubeconfig,
        "-n",
        env.ns.name(),
    ]);
    ok(&c.output()?);
    let in_bucket = FailedPod::new("in-bucket")
        .label(COLLECT, "true")
        .finished_at(old())
        .create(&pods)
        .await?;
    // The Pod's own code writes its messages: escape sequences included.
    let hostile = "\u{1b}[2J\u{1b}]0;owned\u{7}done\r\nnext";
    let patch = serde_json::json!({ "status": { "message": hostile } });
    pods.patch_status(
        "in-bucket",
        &Default::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    ok(&env.run(URL).output()?);
    assert!(env.pods().await?.is_empty(), "both collected");
    let out = env.archives(&["show", in_bucket.metadata.uid.as_deref().unwrap()]);
    let shown = ok(&out);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(
        shown.contains("Message:  ^[[2J^[]0;owned\\u{7}done"),
        "{shown}"
    );

    // Both verified, each from where it was written.
    let out = env.archives(&["verify", "-o", "wide"]);
    let report = ok(&out);
    let folder_uid = in_folder.metadata.uid.unwrap();
    let row = report
        .lines()
        .find(|l| l.contains(&folder_uid))
        .unwrap_or_default();
    assert!(row.starts_with("ok") && row.contains("file://"), "{report}");
    assert!(
        stderr(&out).contains("2 archive(s) match their receipts, 0 problem(s), 0 skipped"),
        "{}",
        stderr(&out)
    );

    // What is not an archive under the prefix is listed; an archive without a receipt alone
    // is listed too; neither fails.
    std::fs::write(env.s3.object_path(BUCKET, "gc/notes.txt"), "by hand")?;
    let stray = env.object("0000-not-receipted");
    std::fs::create_dir_all(stray.parent().unwrap())?;
    std::fs::write(&stray, "{}")?;
    let out = env.archives(&["verify", "-o", "json"]);
    let checked: Vec<Value> = serde_json::from_str(&ok(&out))?;
    let result = |uri_part: &str| {
        checked
            .iter()
            .find(|c| c["uri"].as_str().unwrap().contains(uri_part))
            .map(|c| c["result"].as_str().unwrap().to_owned())
    };
    assert_eq!(
        result(&format!("{URL}/notes.txt")).as_deref(),
        Some("unexpected")
    );
    assert_eq!(result("0000-not-receipted").as_deref(), Some("noReceipt"));
    assert_eq!(result(&folder_uid).as_deref(), Some("ok"));

    // A folder not on this machine: its receipts are skipped, said so, not failed.
    std::fs::remove_dir_all(&dir)?;
    let out = env.archives(&["verify"]);
    let report = ok(&out);
    let row = report
        .lines()
        .find(|l| l.contains(&folder_uid))
        .unwrap_or_default();
    assert!(
        row.starts_with("skipped") && row.contains("not on this machine"),
        "{report}"
    );
    // But a folder that is here and lost the archive: missing.
    std::fs::create_dir_all(&dir)?;
    let out = env.archives(&["verify", "-o", "name"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout)?.trim(), "pod/in-folder");
    Ok(())
}

/// An object store that cannot take archives (a missing bucket, refused credentials, a server
/// that is down) stops the run, named, before any Pod is pinned; dry runs too.
#[tokio::test]
async fn a_sink_that_cannot_take_archives_stops_the_run_before_any_pin() -> Result {
    let mut env = Env::new("s3-refused").await?;
    target(&env.ns, "t").await?;
    let cases = [
        ("s3://no-such-bucket/gc", "no-such-bucket", None),
        (URL, "credentials", Some(("AKIDWRONG", "wrong-secret-key"))),
    ];
    for (url, named, credentials) in cases {
        for dry_run in ["false", "true"] {
            let mut c = env.run_with(url, dry_run);
            if let Some((id, secret)) = credentials {
                c.env("AWS_ACCESS_KEY_ID", id)
                    .env("AWS_SECRET_ACCESS_KEY", secret);
            }
            let out = c.output()?;
            assert_eq!(out.status.code(), Some(1), "{url}: {}", stderr(&out));
            assert!(stderr(&out).contains(named), "{url}: {}", stderr(&out));
            assert_eq!(
                env.pods().await?.get("t"),
                Some(&vec![]),
                "{url}: the Pod is there and was never pinned"
            );
        }
    }
    env.s3.stop().await?;
    let started = Instant::now();
    let out = env.run(URL).output()?;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("unavailable"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(60), "failed fast");
    assert_eq!(env.pods().await?.get("t"), Some(&vec![]));
    let store = gc_store::open(&env.store).await?;
    assert!(
        store
            .list_receipts("primary", gc_store::ReceiptQuery::default())
            .await?
            .is_empty()
    );
    store.close().await;
    Ok(())
}

/// The crash promise with the object store: a live run killed with SIGKILL once some archives
/// are in the bucket leaves every deleted Pod with a receipt whose archive matches; the rerun
/// finishes the work.
#[tokio::test]
async fn a_run_killed_at_any_step_leaves_no_deleted_pod_without_a_verified_archive() -> Result {
    for (round, kill_after) in [1usize, 3].into_iter().enumerate() {
        let env = Env::new(&format!("s3-crash-{round}")).await?;
        let mut uids = BTreeMap::new();
        for i in 0..5 {
            let p = target(&env.ns, &format!("t-{i}")).await?;
            uids.insert(p.metadata.name.unwrap(), p.metadata.uid.unwrap());
        }
        let mut child = env
            .run(URL)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let written = uids.values().filter(|u| env.object(u).exists()).count();
            if written >= kill_after || child.try_wait()?.is_some() || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        child.kill()?;
        child.wait()?;

        let check = async |after: &str| -> Result {
            let left = env.pods().await?;
            let store = gc_store::open(&env.store).await?;
            for (name, uid) in &uids {
                if left.contains_key(name) {
                    continue;
                }
                let receipt = store
                    .get_receipt("primary", uid)
                    .await?
                    .unwrap_or_else(|| panic!("{after}: {name} deleted without a receipt"));
                // The archive the receipt names (a killed run may have left another beside it).
                let key = receipt
                    .uri
                    .strip_prefix(&format!("s3://{BUCKET}/"))
                    .unwrap();
                let bytes = std::fs::read(env.s3.object_path(BUCKET, key))
                    .unwrap_or_else(|e| panic!("{after}: {name} deleted, archive: {e}"));
                assert_eq!(sha256(&bytes), receipt.sha256, "{after}: {name}");
            }
            store.close().await;
            Ok(())
        };
        check(&format!("round {round}, killed")).await?;
        ok(&env.run(URL).output()?);
        assert!(
            env.pods().await?.is_empty(),
            "round {round}: the rerun collects the rest"
        );
        check(&format!("round {round}, rerun")).await?;
        let out = env.archives(&["verify"]);
        ok(&out);
        assert!(
            stderr(&out).contains("5 archive(s) match their receipts, 0 problem(s)"),
            "{}",
            stderr(&out)
        );
    }
    Ok(())
}

#[test]
fn bad_archive_flags_are_usage_errors_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path(), "gc.sqlite3");
    for (args, named) in [
        (vec!["--archive-url", "http://bucket/x"], "--archive-url"),
        (vec!["--archive-url", "s3://Bad_Bucket"], "--archive-url"),
        (vec!["--archive-url", "s3://bucket/../x"], "--archive-url"),
        (
            vec!["--archive-url", "s3://bucket", "--archive-dir", "/tmp/a"],
            "--archive-dir",
        ),
        (
            vec!["--archive-endpoint", "http://127.0.0.1:1"],
            "--archive-url",
        ),
    ] {
        let out = command()
            .args(["archives", "verify", "--store", &store])
            .args(&args)
            .env_remove("GC_ARCHIVE_DIR")
            .env_remove("GC_ARCHIVE_URL")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
    assert!(
        !dir.path().join("gc.sqlite3").exists(),
        "a usage error opens no store"
    );
}
