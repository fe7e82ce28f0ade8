//! `gc-cli plan sessions` and `gc-cli run sessions` end to end: the real API server with the
//! `Session` CRD, and the real PostgreSQL holding StreamSpace's `sessions` table.
//!
//! A namespace holds what StreamSpace's agent leaves (Deployment `<id>`, Service `<id>`, PVC
//! `<id>-home`, Session `<id>`, all labelled `app=streamspace-session, session=<id>, user, template`)
//! for live, hibernated, hard-deleted, soft-deleted and young sessions, next to look-alikes
//! without the app label, an object without a session label, and labelled objects in another
//! namespace. The tests show exactly the right objects deleted, a rerun deleting nothing more, a
//! dry run reporting the same set and deleting nothing, and every doubt (database down, wrong
//! password, empty table, a table holding none of the ids, unreachable cluster) deleting nothing
//! with a clear error.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;

use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

mod common;

use common::{Result, command, example};

const APP: &str = "streamspace-session";

/// StreamSpace's table, as its control plane creates it.
const SCHEMA: &str = "CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, user_id VARCHAR(255), \
     template_name VARCHAR(255), state VARCHAR(50), created_at TIMESTAMP, updated_at TIMESTAMP)";

/// Session ids in StreamSpace's form `{user}-{template}-{8 hex}`.
const LIVE: [&str; 3] = [
    "alice-firefox-0000000a",
    "bob-firefox-0000000b",
    "carol-vscode-0000000c",
];
const HIBERNATED: &str = "dave-gimp-0000000d";
const GONE: [&str; 2] = ["erin-firefox-0000000e", "frank-vscode-0000000f"];
const SOFT: &str = "grace-firefox-00000010";
const YOUNG: &str = "heidi-gimp-00000011";

fn gc_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    gc_cli_command(args, env).output().unwrap()
}

/// The `gc-cli` command [`gc_cli`] runs: a `run sessions` without `--dry-run` deletes
/// ([`common::live_unless_dry`]).
fn gc_cli_command(args: &[&str], env: &[(&str, &str)]) -> std::process::Command {
    as_given(&common::live_unless_dry(args), env)
}

/// The `gc-cli` command of `args` as they are, with `env` and no other database setting.
fn as_given(args: &[String], env: &[(&str, &str)]) -> std::process::Command {
    let mut command = command();
    command.env("GC_ALLOW_FUTURE_NOW", "1");
    command.args(args).env_remove("GC_SESSION_DATABASE_URL");
    for name in gc_store::DB_VARIABLES {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A store and an archive folder of the test's own.
struct Scratch {
    dir: tempfile::TempDir,
    store: String,
    archives: std::path::PathBuf,
}

impl Scratch {
    fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
        let archives = dir.path().join("archives");
        Ok(Self {
            dir,
            store,
            archives,
        })
    }

    /// `--store` and `--archive-dir` naming them.
    fn flags(&self) -> [&str; 4] {
        let archives = self.archives.to_str().unwrap();
        ["--store", &self.store, "--archive-dir", archives]
    }
}

/// The JSON lines of an audit log.
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The audit line of the volume `pv`, asserted given its policy back (`delete`, `deleted`).
fn given_back<'a>(records: &'a [Value], pv: &str) -> &'a Value {
    let line = records
        .iter()
        .find(|r| r["kind"] == "PersistentVolume" && r["name"] == pv)
        .unwrap_or_else(|| panic!("no line of {pv}: {records:?}"));
    assert_eq!(
        (line["decision"].as_str(), line["result"].as_str()),
        (Some("delete"), Some("deleted")),
        "{line}"
    );
    line
}

/// `kind/name` of every audit record with `result`.
fn with_result(records: &[Value], result: &str) -> BTreeSet<String> {
    kind_names(records, "result", result)
}

/// `kind/name` of every record whose `field` is `value`.
fn kind_names(records: &[Value], field: &str, value: &str) -> BTreeSet<String> {
    records
        .iter()
        .filter(|r| r[field] == value)
        .map(|r| {
            format!(
                "{}/{}",
                r["kind"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// How many files are under `folder` but the sink probe's (none when it does not exist).
fn files_under(folder: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name() != ".gc-probe")
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&e.path()),
            _ => 1,
        })
        .sum()
}

/// `kind/name` of every object StreamSpace leaves for session `id`.
fn objects_of(id: &str, pvc: bool) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = [
        format!("Deployment/{id}"),
        format!("Service/{id}"),
        format!("Session/{id}"),
    ]
    .into();
    if pvc {
        set.insert(format!("PersistentVolumeClaim/{id}-home"));
    }
    set
}

/// One namespace's StreamSpace objects, and the database beside it.
struct Fixture {
    ns: TestNamespace,
    other: TestNamespace,
    db: TestDatabase,
    session: ApiResource,
    kubeconfig: String,
    /// An instant at which every object made before the young session is older than 24 hours
    /// and the young session's objects are not.
    now: String,
}

fn labels(id: &str, app: Option<&str>) -> Value {
    let (user, rest) = id.split_once('-').unwrap();
    let template = rest.split('-').next().unwrap();
    let mut labels = json!({ "session": id, "user": user, "template": template });
    if let Some(app) = app {
        labels["app"] = json!(app);
    }
    labels
}

/// Creates what the agent creates for session `id` (with `labels`), the PVC only when `pvc`.
async fn create_session(
    ns: &TestNamespace,
    session: &ApiResource,
    id: &str,
    labels: &Value,
    replicas: i32,
    pvc: bool,
) -> Result {
    let post = PostParams::default();
    let meta = json!({ "name": id, "labels": labels });
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "session": id } },
            "template": {
                "metadata": { "labels": labels },
                "spec": { "containers": [{ "name": "session", "image": "lscr.io/linuxserver/firefox" }] },
            },
        },
    }))?;
    ns.api::<Deployment>().create(&post, &deployment).await?;
    let service: Service = serde_json::from_value(json!({
        "metadata": meta,
        "spec": { "type": "ClusterIP", "selector": { "session": id }, "ports": [{ "port": 3000 }] },
    }))?;
    ns.api::<Service>().create(&post, &service).await?;
    if pvc {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": { "name": format!("{id}-home"), "labels": labels },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": { "requests": { "storage": "10Gi" } },
            },
        }))?;
        ns.api::<PersistentVolumeClaim>()
            .create(&post, &claim)
            .await?;
    }
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": session.api_version,
        "kind": session.kind,
        "metadata": meta,
        "spec": { "user": labels["user"], "template": labels["template"] },
    }))?;
    Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), session)
        .create(&post, &object)
        .await?;
    Ok(())
}

/// Objects by `kind/name`: (uid, deleting).
type Snapshot = BTreeMap<String, (String, bool)>;

/// Every object of the four kinds in `ns`.
async fn snapshot(ns: &TestNamespace, session: &ApiResource) -> Result<Snapshot> {
    let mut out = BTreeMap::new();
    let lp = ListParams::default();
    let mut add = |kind: &str, meta: kube::api::ObjectMeta| {
        out.insert(
            format!("{kind}/{}", meta.name.unwrap()),
            (meta.uid.unwrap(), meta.deletion_timestamp.is_some()),
        );
    };
    for d in ns.api::<Deployment>().list(&lp).await? {
        add("Deployment", d.metadata);
    }
    for s in ns.api::<Service>().list(&lp).await? {
        add("Service", s.metadata);
    }
    for p in ns.api::<PersistentVolumeClaim>().list(&lp).await? {
        add("PersistentVolumeClaim", p.metadata);
    }
    let sessions = Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), session);
    for s in sessions.list(&lp).await? {
        add("Session", s.metadata);
    }
    Ok(out)
}

/// The objects of `before` (not yet deleting there) that are gone or deleting in `after`.
fn removed(before: &Snapshot, after: &Snapshot) -> BTreeSet<String> {
    before
        .iter()
        .filter(|(_, (_, deleting))| !deleting)
        .filter(|(k, _)| after.get(*k).is_none_or(|(_, deleting)| *deleting))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The earliest and latest `creationTimestamp` of the objects in `ns` (seconds).
async fn creation_span(ns: &TestNamespace) -> Result<(i64, i64)> {
    let mut seen = Vec::new();
    let lp = ListParams::default();
    for d in ns.api::<Deployment>().list(&lp).await? {
        seen.push(
            d.metadata
                .creation_timestamp
                .ok_or("no creationTimestamp")?
                .0,
        );
    }
    for s in ns.api::<Service>().list(&lp).await? {
        seen.push(
            s.metadata
                .creation_timestamp
                .ok_or("no creationTimestamp")?
                .0,
        );
    }
    for p in ns.api::<PersistentVolumeClaim>().list(&lp).await? {
        seen.push(
            p.metadata
                .creation_timestamp
                .ok_or("no creationTimestamp")?
                .0,
        );
    }
    let secs: Vec<i64> = seen.iter().map(|t| t.as_second()).collect();
    Ok((
        *secs.iter().min().ok_or("no objects")?,
        *secs.iter().max().ok_or("no objects")?,
    ))
}

impl Fixture {
    /// The namespaces, the objects and the table, with a snapshot of the objects as they start;
    /// `None` when no PostgreSQL is configured.
    async fn new(prefix: &str) -> Result<Option<(Self, Snapshot)>> {
        let Some(db) = TestDatabase::fresh(prefix).await? else {
            return Ok(None);
        };
        let bed = TestBed::shared().await?;
        let session = bed.install_session_crd().await?;
        let ns = bed.namespace(prefix).await?;
        let other = bed.namespace(&format!("{prefix}-other")).await?;
        let app = Some(APP);
        for id in LIVE {
            create_session(&ns, &session, id, &labels(id, app), 1, id != LIVE[1]).await?;
        }
        create_session(&ns, &session, HIBERNATED, &labels(HIBERNATED, app), 0, true).await?;
        for id in GONE.into_iter().chain([SOFT]) {
            create_session(&ns, &session, id, &labels(id, app), 1, true).await?;
        }
        // Look-alikes: a hard-deleted session's name and labels, but not the app label.
        let lookalike = "ivan-firefox-00000012";
        create_session(&ns, &session, lookalike, &labels(lookalike, None), 1, true).await?;
        let mut other_app = labels(lookalike, Some("streamspace-api"));
        other_app["session"] = json!("judy-firefox-00000013");
        create_session(&ns, &session, "judy-firefox-00000013", &other_app, 1, false).await?;
        // Selected, but no session id: never judged.
        let no_id = json!({ "app": APP, "user": "x", "template": "y" });
        let svc: Service = serde_json::from_value(json!({
            "metadata": { "name": "streamspace-session-unlabelled", "labels": no_id },
            "spec": { "type": "ClusterIP", "ports": [{ "port": 3000 }] },
        }))?;
        ns.api::<Service>()
            .create(&PostParams::default(), &svc)
            .await?;
        // The same hard-deleted sessions, labelled, in another namespace.
        for id in GONE {
            create_session(&other, &session, id, &labels(id, app), 1, true).await?;
        }
        // The young session comes a clear second later than everything else.
        let (_, old_latest) = creation_span(&ns).await?;
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        create_session(&ns, &session, YOUNG, &labels(YOUNG, app), 1, true).await?;
        let (_, young_latest) = creation_span(&ns).await?;
        assert!(young_latest > old_latest, "the young session is younger");
        let now = k8s_openapi::jiff::Timestamp::from_second(old_latest + 24 * 3600)?.to_string();

        let pool = db.pool().await?;
        sqlx::raw_sql(SCHEMA).execute(&pool).await?;
        let rows = LIVE
            .iter()
            .map(|id| (*id, "running"))
            .chain([(HIBERNATED, "hibernated"), (SOFT, "deleted")]);
        for (id, state) in rows {
            let (user, rest) = id.split_once('-').unwrap();
            sqlx::query(
                "INSERT INTO sessions VALUES ($1, $2, $3, $4, now()::timestamp, now()::timestamp)",
            )
            .bind(id)
            .bind(user)
            .bind(rest.split('-').next().unwrap())
            .bind(state)
            .execute(&pool)
            .await?;
        }
        pool.close().await;
        let f = Self {
            ns,
            other,
            db,
            session,
            kubeconfig: bed.kubeconfig_path().to_str().unwrap().to_owned(),
            now,
        };
        let before = f.snapshot().await?;
        Ok(Some((f, before)))
    }

    /// `gc-cli <verb> sessions` on this namespace and database, with `extra` flags.
    fn cli(&self, verb: &str, extra: &[&str]) -> Output {
        let database = ["--database-url", self.db.url()];
        self.cli_env(verb, &[&database[..], extra].concat(), &[])
    }

    /// `gc-cli <verb> sessions` in the fixture's namespace at its `now`, with `args` and `env`
    /// (no database unless they name one).
    fn cli_env(&self, verb: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(verb, args, env).output().unwrap()
    }

    /// The command [`Self::cli_env`] runs.
    fn command(&self, verb: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Command {
        let base = [verb, "sessions", "-n", self.ns.name()];
        let at = ["--kubeconfig", &self.kubeconfig, "--now", &self.now];
        gc_cli_command(&[&base[..], &at, args].concat(), env)
    }

    async fn snapshot(&self) -> Result<Snapshot> {
        snapshot(&self.ns, &self.session).await
    }

    /// Binds `claim` to a new volume `pv-<namespace>` whose policy is `Delete` (a static,
    /// pre-bound volume, as the binder would leave it); the volume's name and the claim's uid.
    async fn bind_to_volume(&self, claim: &str) -> Result<(String, String)> {
        use k8s_openapi::api::core::v1::PersistentVolume;
        use kube::api::{Patch, PatchParams};
        let claims = self.ns.api::<PersistentVolumeClaim>();
        let claim_uid = claims.get(claim).await?.metadata.uid.unwrap();
        let pv_name = format!("pv-{}", self.ns.name());
        let pv = serde_json::from_value(json!({
            "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": format!("/tmp/{pv_name}")},
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {"namespace": self.ns.name(), "name": claim, "uid": claim_uid},
            },
        }))?;
        Api::<PersistentVolume>::all(self.ns.client().clone())
            .create(&PostParams::default(), &pv)
            .await?;
        let bind = json!({"spec": {"volumeName": pv_name}});
        claims
            .patch(claim, &PatchParams::default(), &Patch::Merge(&bind))
            .await?;
        Ok((pv_name, claim_uid))
    }
}

/// StreamSpace's `DB_*` variables naming the database of `url` (`postgres://USER:PASS@HOST:PORT/NAME`).
fn db_variables(url: &str) -> [(&'static str, &str); 5] {
    let url = url.strip_prefix("postgres://").unwrap();
    let (auth, rest) = url.split_once('@').unwrap();
    let (user, password) = auth.split_once(':').unwrap();
    let (host_port, name) = rest.split_once('/').unwrap();
    let (host, port) = host_port.split_once(':').unwrap();
    [
        ("DB_HOST", host),
        ("DB_PORT", port),
        ("DB_USER", user),
        ("DB_PASSWORD", password),
        ("DB_NAME", name),
    ]
}

/// A run that exited `code` and said `says` as its error.
fn refuse(out: &Output, code: i32, says: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
    assert!(stderr.contains("gc-cli: error:"), "{stderr}");
}

/// What a run should delete by default: the hard-deleted sessions' objects.
fn hard_deleted() -> BTreeSet<String> {
    GONE.iter().flat_map(|id| objects_of(id, true)).collect()
}

#[tokio::test]
async fn plan_dry_run_run_and_rerun_delete_exactly_the_orphans() -> Result {
    let Some((f, before)) = Fixture::new("sessions-run").await? else {
        return Ok(());
    };
    let other_before = snapshot(&f.other, &f.session).await?;

    // The plan: the hard-deleted sessions' objects, the young one held, the rest kept.
    let plan: Value = serde_json::from_str(&ok(&f.cli("plan", &["-o", "json"])))?;
    let decided = |decision: &str| -> BTreeSet<String> {
        kind_names(plan["judged"].as_array().unwrap(), "decision", decision)
    };
    assert_eq!(decided("delete"), hard_deleted(), "{plan:#}");
    assert_eq!(decided("held"), objects_of(YOUNG, true));
    assert_eq!(
        decided("skipped"),
        BTreeSet::from(["Service/streamspace-session-unlabelled".to_owned()])
    );
    let kept = decided("kept");
    assert!(kept.is_superset(&objects_of(HIBERNATED, true)));
    assert!(
        kept.is_superset(&objects_of(SOFT, true)),
        "soft deletes are kept by default"
    );
    assert_eq!(plan["deleteCount"], 8);
    assert_eq!(plan["lookups"], 1);
    assert_eq!(plan["missingKinds"], json!([]));
    assert!(
        !decided("delete")
            .iter()
            .any(|n| n.contains("ivan") || n.contains("judy"))
    );
    // The table says the same for people.
    let table = ok(&f.cli("plan", &[]));
    assert!(
        table.contains("8 to delete, 0 deferred, 4 held, 1 skipped, 19 kept, of 32 resources"),
        "{table}"
    );
    // On the real clock everything is younger than the grace period: nothing to delete.
    let out = gc_cli(
        &[
            "plan",
            "sessions",
            "-n",
            f.ns.name(),
            "--kubeconfig",
            &f.kubeconfig,
            "--database-url",
            f.db.url(),
            "-o",
            "json",
        ],
        &[],
    );
    let real_clock: Value = serde_json::from_str(&ok(&out))?;
    assert_eq!(real_clock["deleteCount"], 0);
    assert_eq!(f.snapshot().await?, before, "plan changes nothing");

    // Dry run, with the database from StreamSpace's DB_* variables: the same set, nothing deleted.
    let env = db_variables(f.db.url());
    // Manifests and receipts go to a folder and store of the test's own.
    let scratch = Scratch::new()?;
    let (dir, store, archives) = (&scratch.dir, &scratch.store, &scratch.archives);
    let kept = scratch.flags();
    let out = f.cli_env("run", &[&["--dry-run"][..], &kept].concat(), &env);
    let dry = lines(&ok(&out));
    assert_eq!(files_under(archives), 0, "a dry run archives nothing");
    assert!(dry.iter().all(|r| r["archive"].is_null()));
    assert_eq!(dry.len(), 32, "one audit line per resource scanned");
    assert_eq!(with_result(&dry, "would delete"), hard_deleted());
    assert!(
        dry.iter()
            .all(|r| r["dryRun"] == true && r["cluster"] == "primary")
    );
    assert!(
        dry.iter()
            .all(|r| r["namespace"] == f.ns.name() && r["time"].is_string())
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains("8 would delete (dry run)"), "{stderr}");
    assert_eq!(f.snapshot().await?, before, "a dry run deletes nothing");
    // A dry run is the default, as `run pods`': without `--dry-run`, the same.
    let base = [
        "run",
        "sessions",
        "-n",
        f.ns.name(),
        "--kubeconfig",
        &f.kubeconfig,
    ];
    let args: Vec<String> = [&base[..], &["--now", &f.now], &kept[..]]
        .concat()
        .into_iter()
        .map(String::from)
        .collect();
    let out = as_given(&args, &env).output()?;
    let by_default = lines(&ok(&out));
    assert_eq!(with_result(&by_default, "would delete"), hard_deleted());
    assert!(by_default.iter().all(|r| r["dryRun"] == true));
    assert_eq!(files_under(archives), 0, "a dry run archives nothing");
    assert_eq!(f.snapshot().await?, before, "a dry run deletes nothing");

    // The run: exactly those objects, each with an audit line; the audit log is appended to.
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap();
    let out = f.cli("run", &[&["--audit-log", audit_arg][..], &kept].concat());
    assert!(ok(&out).is_empty(), "audit lines go to the file");
    let records = lines(&std::fs::read_to_string(&audit)?);
    assert_eq!(with_result(&records, "deleted"), hard_deleted());
    let line = records
        .iter()
        .find(|r| r["name"] == GONE[0] && r["kind"] == "Deployment")
        .unwrap();
    // Every line carries every field docs/sessions.md lists: `null` where there is none.
    const FIELDS: [&str; 12] = [
        "cluster",
        "namespace",
        "kind",
        "name",
        "uid",
        "session",
        "decision",
        "reason",
        "result",
        "dryRun",
        "apiVersion",
        "archive",
    ];
    for key in &FIELDS[..8] {
        assert!(line[key].is_string(), "{key} in {line}");
    }
    assert_eq!(line["dryRun"], false);
    assert_eq!(line["session"], GONE[0]);
    for record in &records {
        for key in FIELDS {
            assert!(record.get(key).is_some(), "{key} in {record}");
        }
    }
    let kept_line = records.iter().find(|r| r["decision"] == "kept").unwrap();
    assert!(kept_line["result"].is_null(), "{kept_line}");
    assert!(kept_line["archive"].is_null(), "{kept_line}");

    // Each object deleted was archived first: its manifest verified against its receipt, with
    // its labels and spec and without its uid or status.
    let deleted: Vec<&Value> = records
        .iter()
        .filter(|r| r["result"] == "deleted")
        .collect();
    let archived: BTreeSet<&str> = deleted
        .iter()
        .filter_map(|r| r["archive"].as_str())
        .collect();
    assert_eq!(archived.len(), deleted.len(), "{deleted:?}");
    let verify = gc_cli(
        &[
            &["archives", "verify", "-n", f.ns.name(), "-o", "json"][..],
            &kept,
        ]
        .concat(),
        &[],
    );
    let checked: Vec<Value> = serde_json::from_str(&ok(&verify))?;
    let ok_uris: BTreeSet<&str> = checked
        .iter()
        .filter(|c| c["result"] == "ok")
        .filter_map(|c| c["uri"].as_str())
        .collect();
    assert_eq!(ok_uris, archived, "{checked:?}");
    // One session's archives: its receipts only, each row naming the object's kind.
    let one = gc_cli(
        &[
            &["archives", "verify", "--session", GONE[0], "-o", "json"][..],
            &kept,
        ]
        .concat(),
        &[],
    );
    let of_one: Vec<Value> = serde_json::from_str(&ok(&one))?;
    let mut kinds: Vec<&str> = of_one.iter().filter_map(|c| c["kind"].as_str()).collect();
    kinds.sort_unstable();
    let of_gone = deleted.iter().filter(|r| r["session"] == GONE[0]);
    let mut expected: Vec<&str> = of_gone.filter_map(|r| r["kind"].as_str()).collect();
    expected.sort_unstable();
    assert_eq!(kinds, expected, "{of_one:?}");
    assert!(of_one.iter().all(|c| c["result"] == "ok"), "{of_one:?}");
    let none = [
        &["archives", "verify", "--session", "no-such-session"][..],
        &kept,
    ]
    .concat();
    let none = gc_cli(&none, &[]);
    assert_eq!(none.status.code(), Some(1), "nothing verified is a failure");
    let said = text(&none.stderr);
    assert!(
        said.contains("no receipt of cluster") && said.contains("of session no-such-session"),
        "{said}"
    );
    let of_session = gc_cli(
        &[
            &["archives", "list", "--session", GONE[0], "-o", "json"][..],
            &["--store", store],
        ]
        .concat(),
        &[],
    );
    let listed: Vec<Value> = serde_json::from_str(&ok(&of_session))?;
    let names: BTreeSet<String> = listed
        .iter()
        .map(|l| {
            format!(
                "{}/{}",
                l["kind"].as_str().unwrap(),
                l["name"].as_str().unwrap()
            )
        })
        .collect();
    let of_gone: Vec<Value> = records
        .iter()
        .filter(|r| r["session"] == GONE[0])
        .cloned()
        .collect();
    assert_eq!(names, with_result(&of_gone, "deleted"), "{listed:?}");
    let deployment = line["archive"]
        .as_str()
        .unwrap()
        .strip_prefix("file://")
        .unwrap();
    let doc: Value = serde_json::from_slice(&std::fs::read(deployment)?)?;
    let manifest = &doc["manifest"];
    assert_eq!(manifest["metadata"]["labels"]["session"], GONE[0], "{doc}");
    assert!(manifest["spec"]["template"].is_object(), "{doc}");
    assert!(manifest["metadata"].get("uid").is_none() && manifest.get("status").is_none());
    assert_eq!(doc["archivedFrom"]["uid"], line["uid"]);
    // `archives show` verifies it and names the object and its session; `-o name` as kubectl.
    let uid = line["uid"].as_str().unwrap();
    let show = |form: &str| {
        let args = [&["archives", "show", uid, "-o", form][..], &kept].concat();
        ok(&gc_cli(&args, &[]))
    };
    let shown = show("table");
    assert!(
        shown.contains(&format!("Session:  {}", GONE[0]))
            && shown.contains(&format!("/deployment.apps/{} ({uid})", GONE[0]))
            && shown.contains("verified"),
        "{shown}"
    );
    assert_eq!(show("name").trim(), format!("deployment.apps/{}", GONE[0]));
    // By name, as kubectl takes it: the kind, its plural or short name, in any case, with its
    // group or without.
    let ns = f.ns.name();
    for object in [
        "deployment.apps",
        "deploy",
        "Deployment",
        "deployments",
        "DEPLOY.apps",
    ] {
        let object = format!("{object}/{}", GONE[0]);
        let args = [
            &["archives", "show", &object, "-n", ns, "-o", "name"][..],
            &kept,
        ]
        .concat();
        let shown = ok(&gc_cli(&args, &[]));
        assert_eq!(
            shown.trim(),
            format!("deployment.apps/{}", GONE[0]),
            "{object}"
        );
    }
    let object = format!("deployment.stream.space/{}", GONE[0]);
    let args = [&["archives", "show", &object, "-n", ns][..], &kept].concat();
    let out = gc_cli(&args, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no archive of deployment.stream.space/")
            && err.contains("deployment or deploy, service or svc, persistentvolumeclaim or pvc"),
        "{err}"
    );
    let unlabelled = records
        .iter()
        .find(|r| r["name"] == "streamspace-session-unlabelled")
        .unwrap();
    assert!(unlabelled["session"].is_null(), "{unlabelled}");
    assert_eq!(
        line["reason"],
        format!("no session {} in the database", GONE[0])
    );
    let after = f.snapshot().await?;
    assert_eq!(removed(&before, &after), hard_deleted());
    // PVCs keep the pvc-protection finalizer on a bare API server: they are deleting, not gone.
    for id in GONE {
        assert_eq!(
            after
                .get(&format!("PersistentVolumeClaim/{id}-home"))
                .map(|v| v.1),
            Some(true)
        );
    }
    for (name, value) in &before {
        if !hard_deleted().contains(name) {
            assert_eq!(after.get(name), Some(value), "{name} is untouched");
        }
    }
    assert_eq!(snapshot(&f.other, &f.session).await?, other_before);

    // A rerun deletes nothing more; the deleting PVCs are skipped.
    ok(&f.cli("run", &["--audit-log", audit_arg]));
    let records = lines(&std::fs::read_to_string(&audit)?);
    assert_eq!(
        records.len(),
        32 + 26,
        "appended: the Deployments, Services and Sessions are gone"
    );
    let rerun = &records[32..];
    assert!(
        rerun
            .iter()
            .all(|r| r["result"].is_null() && r["decision"] != "delete")
    );
    assert_eq!(f.snapshot().await?, after);

    // Soft-deleted sessions go with --terminal-state deleted.
    let out = f.cli("run", &["--terminal-state", "deleted"]);
    let soft = lines(&ok(&out));
    assert_eq!(with_result(&soft, "deleted"), objects_of(SOFT, true));
    let last = f.snapshot().await?;
    assert_eq!(removed(&after, &last), objects_of(SOFT, true));
    assert_eq!(snapshot(&f.other, &f.session).await?, other_before);
    Ok(())
}

#[tokio::test]
async fn every_doubt_deletes_nothing_and_says_why() -> Result {
    let Some((f, before)) = Fixture::new("sessions-refuse").await? else {
        return Ok(());
    };

    // The database down: a closed port.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let down = format!("postgres://gc:gc@127.0.0.1:{closed}/streamspace");
    let with = |verb: &'static str, extra: &[&str]| f.cli_env(verb, extra, &[]);
    for verb in ["plan", "run"] {
        let out = with(verb, &["--database-url", &down]);
        refuse(&out, 1, "cannot open the session table");
        refuse(&out, 1, "refused");
    }
    // The URL from the environment variable counts too, and never shows its password.
    let out = f.cli_env(
        "run",
        &[],
        &[(
            "GC_SESSION_DATABASE_URL",
            &down.replace("gc:gc", "gc:Sekr1t-Pw"),
        )],
    );
    refuse(&out, 1, &format!("127.0.0.1:{closed}"));
    assert!(!text(&out.stderr).contains("Sekr1t-Pw"));

    // A wrong password.
    let wrong = f.db.url().replacen("gc:gc@", "gc:not-the-password@", 1);
    assert_ne!(
        wrong,
        f.db.url(),
        "the test database's URL holds the test role gc:gc"
    );
    let out = with("run", &["--database-url", &wrong]);
    refuse(&out, 1, "password");
    assert!(!text(&out.stderr).contains("not-the-password"));

    // A table that does not exist.
    let out = with("run", &["--database-url", f.db.url(), "--table", "session"]);
    refuse(&out, 1, "table session does not exist");

    // A table that answers nothing: the guard refuses (and says so in the audit log too).
    let empty = TestDatabase::fresh("sessions-empty")
        .await?
        .ok_or("no database")?;
    let pool = empty.pool().await?;
    sqlx::raw_sql(SCHEMA).execute(&pool).await?;
    pool.close().await;
    let out = with("run", &["--database-url", empty.url()]);
    // (8 sessions, 31 resources: the share counts sessions, the floor what would be deleted; the
    // Service without a session label is scanned, but not weighed)
    refuse(
        &out,
        3,
        "refused: 8 of 8 sessions judged against the database look gone (more than 0.5 of them;",
    );
    refuse(&out, 3, "and their 31 resources are more than 10;");
    // Above the floor, the no-row refusal speaks.
    let floor = ["--database-url", empty.url(), "--guard-floor", "40"];
    refuse(
        &with("run", &floor),
        3,
        "refused: none of the 8 session ids judged against the database has a row in the session \
         table, so 31 session resources look orphaned",
    );
    let audit = lines(&text(&out.stdout));
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["decision"], "refused");
    // The refusal line carries every field (no resource: `null`), and what the guard counted.
    for key in ["apiVersion", "kind", "name", "uid", "session", "result"] {
        assert!(audit[0][key].is_null(), "{key} in {}", audit[0]);
    }
    assert_eq!(
        audit[0]["counted"],
        json!({"sessions": 8, "gone": 8, "resources": 31})
    );
    let out = with("plan", &["--database-url", empty.url()]);
    refuse(&out, 3, "override the guard");
    refuse(
        &out,
        3,
        "no plan (`plan sessions --override-guard` shows what a guard refused)",
    );
    // ...and a dry run with the guard overridden shows what it guarded against.
    let out = with(
        "run",
        &[
            "--database-url",
            empty.url(),
            "--override-guard",
            "--dry-run",
        ],
    );
    // (everything with a session id but the young session)
    assert_eq!(with_result(&lines(&ok(&out)), "would delete").len(), 27);

    // The cluster unreachable.
    let out = gc_cli(
        &[
            "run",
            "sessions",
            "-n",
            f.ns.name(),
            "--api-url",
            &format!("https://127.0.0.1:{closed}"),
            "--database-url",
            f.db.url(),
        ],
        &[],
    );
    refuse(&out, 1, "cannot connect to the cluster");

    // Bad settings are usage errors.
    let out = with(
        "run",
        &["--database-url", f.db.url(), "--grace-hours", "-1"],
    );
    refuse(&out, 2, "grace_hours");
    let out = with(
        "run",
        &[
            "--database-url",
            f.db.url(),
            "--kinds",
            "Deployment,deployments",
        ],
    );
    refuse(&out, 2, "given twice");
    let out = gc_cli(
        &[
            "run",
            "sessions",
            "-n",
            "kube-system",
            "--kubeconfig",
            &f.kubeconfig,
            "--database-url",
            f.db.url(),
        ],
        &[],
    );
    refuse(&out, 2, "invalid namespace");

    assert_eq!(f.snapshot().await?, before, "nothing was deleted");

    // Objects with the app label but no session label are never judged, so they do not dilute
    // the guard. With one live session in the table, the Services carry 7 gone sessions of the
    // 8 judged; counted as resources, the fixture's unlabelled Service and 6 more would have made
    // it 7 of 15, under the ratio.
    let pool = empty.pool().await?;
    sqlx::query("INSERT INTO sessions (id, state) VALUES ($1, 'running')")
        .bind(LIVE[0])
        .execute(&pool)
        .await?;
    pool.close().await;
    for i in 0..6 {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {
                "name": format!("streamspace-session-unlabelled-{i}"),
                "labels": { "app": APP },
            },
            "spec": { "type": "ClusterIP", "ports": [{ "port": 3000 }] },
        }))?;
        f.ns.api::<Service>()
            .create(&PostParams::default(), &svc)
            .await?;
    }
    let before = f.snapshot().await?;
    let diluted = [
        "--database-url",
        empty.url(),
        "--kinds",
        "services",
        "--guard-floor",
        "5",
    ];
    let why = "refused: 7 of 8 sessions judged against the database look gone";
    refuse(&with("run", &diluted), 3, why);
    // ...as when the selector leaves them out.
    let only_ids = ["--selector", "app=streamspace-session,session"];
    refuse(&with("plan", &[&diluted[..], &only_ids].concat()), 3, why);
    assert_eq!(f.snapshot().await?, before, "nothing was deleted");
    // Nor do objects labelled with the live session's id, read off its own: a session counts
    // once, however many resources carry its id. 7 more Services would have made it 7 of 15.
    for i in 0..7 {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {
                "name": format!("streamspace-session-copy-{i}"),
                "labels": labels(LIVE[0], Some(APP)),
            },
            "spec": { "type": "ClusterIP", "ports": [{ "port": 3000 }] },
        }))?;
        f.ns.api::<Service>()
            .create(&PostParams::default(), &svc)
            .await?;
    }
    let before = f.snapshot().await?;
    refuse(&with("run", &diluted), 3, why);
    refuse(&with("plan", &[&diluted[..], &only_ids].concat()), 3, why);
    assert_eq!(f.snapshot().await?, before, "nothing was deleted");
    Ok(())
}

/// No receipt, no delete: a sink that refuses writes (a file where the folder should be: root
/// writes into read-only folders), a bad sink URL or a
/// store that is down stop the run before anything is deleted, and say why; the same run with
/// a sink and store that work then deletes.
#[tokio::test]
async fn a_sink_or_store_that_refuses_writes_deletes_nothing() -> Result {
    let Some((f, before)) = Fixture::new("sessions-nosink").await? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let read_only = dir.path().join("not-a-folder");
    std::fs::write(&read_only, "")?;
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let down = format!("postgres://gc:gc@127.0.0.1:{closed}/gc");
    let folder = dir.path().join("archives");
    let folder = folder.to_str().unwrap();
    for (flags, code, says) in [
        (
            [
                "--archive-dir",
                read_only.to_str().unwrap(),
                "--store",
                &store,
            ],
            1,
            "cannot use the archive sink",
        ),
        (
            ["--archive-url", "ftp://bucket", "--store", &store],
            2,
            "invalid --archive-url",
        ),
        (
            ["--archive-dir", folder, "--store", &down],
            1,
            "store unavailable",
        ),
    ] {
        let out = f.cli("run", &flags);
        refuse(&out, code, says);
        assert_eq!(f.snapshot().await?, before, "{flags:?}: nothing deleted");
    }
    assert_eq!(std::fs::read(&read_only)?, b"");
    let out = f.cli("run", &["--archive-dir", folder, "--store", &store]);
    let records = lines(&ok(&out));
    assert_eq!(with_result(&records, "deleted"), hard_deleted());
    Ok(())
}

/// A gone session's claim, bound to a volume whose policy is `Delete`: the run sets the volume to
/// `Retain` before it deletes the claim (the claim's receipt names it); a run more than
/// `--retain-volume-days` later, the volume `Released`, gives it back `Delete`, also when the
/// namespace left the selection (a run of another namespace reviews it). Without access to
/// volumes (a Role of `required_rules` alone) the claim is not deleted.
#[tokio::test]
async fn a_deleted_claims_volume_is_kept_for_the_window() -> Result {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::api::{Patch, PatchParams};
    let Some((f, _)) = Fixture::new("sessions-pv").await? else {
        return Ok(());
    };
    let claim = format!("{}-home", GONE[0]);
    let claims = f.ns.api::<PersistentVolumeClaim>();
    let (pv_name, claim_uid) = f.bind_to_volume(&claim).await?;
    let volumes: Api<PersistentVolume> = Api::all(f.ns.client().clone());
    let policy = async || -> Result<(String, Option<String>)> {
        let pv = volumes.get(&pv_name).await?;
        let policy = pv.spec.unwrap().persistent_volume_reclaim_policy.unwrap();
        let note = pv
            .metadata
            .annotations
            .and_then(|a| a.get("gc.example.com/retained").cloned());
        Ok((policy, note))
    };

    // Its own cluster id: the volumes it keeps are reviewed by its runs alone, not by the runs
    // of the other tests sharing the API server.
    let cluster = ["--cluster-id", f.ns.name()];
    // Without patch on volumes: the claim is kept, and the run says why.
    f.ns.grant("gc", gc_k8s::rbac::required_rules()).await?;
    f.ns.service_account_client("gc").await?;
    let token = f.ns.service_account_token("gc").await?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token)?;
    let server = gc_testbed::TestBed::shared().await?.server_url().to_owned();
    let as_account = [
        "run",
        "sessions",
        "-n",
        f.ns.name(),
        "--now",
        &f.now,
        "--database-url",
        f.db.url(),
        "--api-url",
        &server,
        "--token-file",
        token_file.to_str().unwrap(),
        "--trust-certs",
    ];
    let out = gc_cli(&[&as_account[..], &cluster].concat(), &[]);
    let records = lines(&text(&out.stdout));
    let line = records
        .iter()
        .find(|r| r["name"] == claim.as_str())
        .unwrap();
    let result = line["result"].as_str().unwrap();
    assert!(
        result.starts_with(&format!(
            "failed: not deleted: cannot read its volume {pv_name}: forbidden"
        )),
        "{line}"
    );
    assert!(claims.get_opt(&claim).await?.is_some());
    assert_eq!(policy().await?, ("Delete".to_owned(), None));

    // With it (the test bed's admin): retained, then deleted.
    let out = f.cli("run", &cluster);
    let records = lines(&ok(&out));
    let line = records
        .iter()
        .find(|r| r["name"] == claim.as_str())
        .unwrap();
    assert_eq!(line["result"], "deleted", "{line}");
    let (now_policy, note) = policy().await?;
    assert_eq!(now_policy, "Retain");
    let note: Value = serde_json::from_str(&note.expect("gc's annotation"))?;
    assert_eq!(
        (note["policy"].as_str(), note["claimUid"].as_str()),
        (Some("Delete"), Some(claim_uid.as_str()))
    );
    let listed = gc_cli(
        &[
            "archives",
            "list",
            "--kind",
            "pvc-is-not-a-kind",
            "-o",
            "json",
        ],
        &[],
    );
    assert_eq!(ok(&listed).trim(), "[]");
    let listed = gc_cli(
        &[
            "archives",
            "list",
            "-n",
            f.ns.name(),
            "--kind",
            "PersistentVolumeClaim",
            "--pod",
            &claim,
            "-o",
            "json",
            "--cluster-id",
            f.ns.name(),
        ],
        &[],
    );
    let listed: Vec<Value> = serde_json::from_str(&ok(&listed))?;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["retainedVolume"], pv_name.as_str());
    assert_eq!(listed[0]["volumePolicy"], "Delete");

    // Released (the claim is gone). Its namespace then leaves the selection: a run of another
    // namespace only, even with retention off, reviews it with the window it was kept for (held,
    // its reason naming the namespace), and once that window is over gives its policy back.
    let released = json!({"status": {"phase": "Released"}});
    volumes
        .patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(&released))
        .await?;
    let later = k8s_openapi::jiff::Timestamp::from_second(
        f.now.parse::<k8s_openapi::jiff::Timestamp>()?.as_second() + 8 * 86_400,
    )?
    .to_string();
    // A namespace of its own, with nothing to judge (the fixture's other namespace holds
    // orphans, which the guard would refuse).
    let empty = TestBed::shared()
        .await?
        .namespace("sessions-pv-empty")
        .await?;
    let elsewhere = |now: &str, days: &str| {
        let args = [
            "run",
            "sessions",
            "-n",
            empty.name(),
            "--kubeconfig",
            &f.kubeconfig,
            "--now",
            now,
            "--database-url",
            f.db.url(),
            "--retain-volume-days",
            days,
        ];
        lines(&ok(&gc_cli(&[&args[..], &cluster].concat(), &[])))
    };
    let records = elsewhere(&f.now, "0");
    let line = records
        .iter()
        .find(|r| r["kind"] == "PersistentVolume")
        .unwrap_or_else(|| panic!("no line of {pv_name}: {records:?}"));
    assert_eq!(line["decision"], "held", "{line}");
    assert_eq!(line["namespace"], empty.name(), "{line}");
    let reason = line["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "namespace {} is not among this run's",
            f.ns.name()
        )),
        "{reason}"
    );
    assert_eq!(policy().await?.0, "Retain");
    // Once the window is over, a run refused before its deletes (here by the mass-deletion
    // guard) still gives the volume its policy back: the review needs neither the database nor
    // the plan. Its audit says so, then why the run was refused.
    let args = [
        "run",
        "sessions",
        "-n",
        f.ns.name(),
        "--kubeconfig",
        &f.kubeconfig,
        "--now",
        &later,
        "--database-url",
        f.db.url(),
        "--guard-ratio",
        "0.01",
        "--guard-floor",
        "0",
    ];
    let out = gc_cli(&[&args[..], &cluster].concat(), &[]);
    assert!(!out.status.success(), "{}", text(&out.stderr));
    let records = lines(&text(&out.stdout));
    given_back(&records, &pv_name);
    let last = records.last().unwrap();
    assert_eq!(last["decision"], "refused", "{records:?}");
    assert_eq!(policy().await?, ("Delete".to_owned(), None));
    // Nothing left for a later review.
    let records = elsewhere(&later, "7");
    assert!(
        !records.iter().any(|r| r["name"] == pv_name.as_str()),
        "{records:?}"
    );
    volumes.delete(&pv_name, &Default::default()).await?;
    Ok(())
}

/// The crash promise for sessions: a live run killed with SIGKILL after its first, third and
/// fifth archived manifest, then run again at once:
/// whatever the kill left, no object is gone without a receipt whose archive verifies; the rerun
/// takes the lapsed lock, deletes exactly the gone sessions' objects, and every archive matches
/// its receipt.
#[tokio::test]
async fn a_run_killed_mid_delete_leaves_nothing_deleted_unarchived() -> Result {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    for (round, kill_after) in [1usize, 3, 5].into_iter().enumerate() {
        let Some((f, before)) = Fixture::new(&format!("sessions-kill-{round}")).await? else {
            return Ok(());
        };
        let scratch = Scratch::new()?;
        let (store, archives) = (&scratch.store, &scratch.archives);
        let lock = ["--lock-lease-seconds", "5", "--database-url", f.db.url()];
        let kept = [&scratch.flags()[..], &lock].concat();
        let mut child = f
            .command("run", &kept, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while files_under(archives) < kill_after
            && child.try_wait()?.is_none()
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        child.kill()?;
        child.wait()?;
        let receipted = || -> BTreeSet<String> {
            let listed = gc_cli(&["archives", "list", "-o", "json", "--store", store], &[]);
            let listed: Vec<Value> = serde_json::from_str(&ok(&listed)).unwrap();
            let of_ns = listed.iter().filter(|r| r["namespace"] == f.ns.name());
            of_ns
                .map(|r| {
                    format!(
                        "{}/{}",
                        r["kind"].as_str().unwrap(),
                        r["name"].as_str().unwrap()
                    )
                })
                .collect()
        };
        let killed = removed(&before, &f.snapshot().await?);
        let receipts = receipted();
        let manifests = files_under(archives);
        eprintln!("round {round}: killed at {manifests} manifest(s), {killed:?} gone");
        assert!(
            killed.is_subset(&receipts),
            "round {round}: gone without a receipt: {:?}",
            killed.difference(&receipts).collect::<Vec<_>>()
        );
        let verify = [&["archives", "verify"][..], &scratch.flags()].concat();
        // Killed before its first receipt, there is nothing to verify (an error of its own).
        if !receipts.is_empty() {
            ok(&gc_cli(&verify, &[]));
        }

        ok(&f.cli_env("run", &kept, &[]));
        let gone: BTreeSet<String> = GONE.iter().flat_map(|id| objects_of(id, true)).collect();
        assert_eq!(
            removed(&before, &f.snapshot().await?),
            gone,
            "round {round}"
        );
        assert!(gone.is_subset(&receipted()), "round {round}");
        ok(&gc_cli(&verify, &[]));
    }
    Ok(())
}

/// Undoing a delete: `restore sessions` creates each archived object of a session again with its
/// labels and spec, the claim on its kept volume (moved to the new claim, fenced); an object that
/// exists is never replaced, so a second restore changes nothing; once the claim is bound, the
/// next run gives the volume its policy back. A dry run creates nothing; a session whose archive
/// was edited restores nothing.
#[tokio::test]
async fn a_deleted_session_is_restored_from_its_archives() -> Result {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::api::{Patch, PatchParams};
    let Some((f, _)) = Fixture::new("sessions-restore").await? else {
        return Ok(());
    };
    let [gone, edited] = GONE;
    let claim = format!("{gone}-home");
    let claims = f.ns.api::<PersistentVolumeClaim>();
    let (pv_name, _) = f.bind_to_volume(&claim).await?;
    let volumes: Api<PersistentVolume> = Api::all(f.ns.client().clone());
    let before = f.snapshot().await?;
    let deployment_before = f.ns.api::<Deployment>().get(gone).await?;
    let service_before = f.ns.api::<Service>().get(gone).await?;

    let scratch = Scratch::new()?;
    let store = &scratch.store;
    // Its own cluster id: the volume it keeps is reviewed by its runs alone, not by the runs of
    // the other tests sharing the API server.
    let kept = [&scratch.flags()[..], &["--cluster-id", f.ns.name()]].concat();
    ok(&f.cli("run", &kept));
    // The claims' protection finalizer, removed as its controller removes it (no Pod uses them).
    let unprotect = json!({"metadata": {"finalizers": null}});
    for id in [gone, edited] {
        let name = format!("{id}-home");
        claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(&unprotect))
            .await?;
    }
    // Before Kubernetes releases the volume it still shows bound to the deleted claim (no
    // binder runs here: set as it would have left it). A restore waits for the release, up to
    // `--bind-wait-seconds`, and says what is true when it does not come; nothing is refused as
    // "claimed again".
    let phase = |phase: &str| json!({"status": {"phase": phase}});
    volumes
        .patch_status(
            &pv_name,
            &PatchParams::default(),
            &Patch::Merge(phase("Bound")),
        )
        .await?;
    let deleted = f.snapshot().await?;
    let dry_restore = |wait: &str| {
        let args = [
            "restore",
            "sessions",
            "-n",
            f.ns.name(),
            "--session",
            gone,
            "--kubeconfig",
            f.kubeconfig.as_str(),
            "-o",
            "json",
            "--dry-run=server",
            wait,
        ];
        let mut command = gc_cli_command(&[&args[..], &kept].concat(), &[]);
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command.spawn().unwrap()
    };
    let out = dry_restore("--bind-wait-seconds=1").wait_with_output()?;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    let claim_row = rows.iter().find(|r| r["name"] == claim.as_str()).unwrap();
    let result = claim_row["result"].as_str().unwrap();
    assert!(
        result.contains("still shows bound to the deleted claim")
            && result.contains("Kubernetes has not released it yet")
            && result.contains("after --bind-wait-seconds 1: restore again shortly"),
        "{rows:?}"
    );
    assert_eq!(f.snapshot().await?, deleted);
    // Released while a restore waits (as the PV controller marks a volume whose claim is gone):
    // the restore goes on.
    let waiting = dry_restore("--bind-wait-seconds=60");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let patched = volumes
        .patch_status(
            &pv_name,
            &PatchParams::default(),
            &Patch::Merge(phase("Released")),
        )
        .await;
    let out = waiting.wait_with_output()?;
    patched?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert!(
        rows.iter().all(|r| r["result"] == "would create"),
        "{rows:?}"
    );
    assert_eq!(rows.len(), objects_of(gone, true).len(), "{rows:?}");
    let of = |id: &str| objects_of(id, true);
    assert_eq!(
        removed(&before, &deleted),
        of(gone).into_iter().chain(of(edited)).collect()
    );

    let restore_as = |form: &str, session: &str, extra: &[&str]| {
        let base = [
            "restore",
            "sessions",
            "-n",
            f.ns.name(),
            "--session",
            session,
        ];
        let at = ["--kubeconfig", f.kubeconfig.as_str(), "-o", form];
        gc_cli(&[&base[..], &at, &kept, extra].concat(), &[])
    };
    let restore = |session: &str, extra: &[&str]| restore_as("json", session, extra);
    let results = |out: &Output| -> Vec<(String, String)> {
        let restored: Vec<Value> = serde_json::from_str(&text(&out.stdout)).unwrap();
        let mut pairs: Vec<(String, String)> = restored
            .iter()
            .map(|r| {
                let kind_name = format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                );
                (kind_name, r["result"].as_str().unwrap().to_owned())
            })
            .collect();
        pairs.sort();
        pairs
    };
    let each = |id: &str, result: &str| -> Vec<(String, String)> {
        of(id).into_iter().map(|k| (k, result.to_owned())).collect()
    };

    // A dry run: what would be created, nothing created.
    let out = restore(gone, &["--dry-run=server"]);
    assert_eq!(
        results(&out),
        each(gone, "would create"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(f.snapshot().await?, deleted);
    // `-o name` as kubectl: the objects a restore would create.
    let names = ok(&restore_as("name", gone, &["--dry-run"]));
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_unstable();
    let claim_name = format!("persistentvolumeclaim/{claim}");
    let want = [
        format!("deployment.apps/{gone}"),
        claim_name,
        format!("service/{gone}"),
        format!("session.stream.space/{gone}"),
    ];
    assert_eq!(names, want);

    // The restore: each object again, with its labels and spec; the claim on its volume. No
    // binder runs here: without a wait, the volume keeps Retain until the claim is bound.
    let out = restore(gone, &["--bind-wait-seconds=0"]);
    assert_eq!(
        results(&out),
        each(gone, "created"),
        "{}",
        text(&out.stderr)
    );
    let deployment = f.ns.api::<Deployment>().get(gone).await?;
    assert_eq!(
        deployment.metadata.labels,
        deployment_before.metadata.labels
    );
    assert_eq!(deployment.spec.replicas, deployment_before.spec.replicas);
    assert_ne!(deployment.metadata.uid, deployment_before.metadata.uid);
    let service = f.ns.api::<Service>().get(gone).await?;
    assert_eq!(service.metadata.labels, service_before.metadata.labels);
    assert_eq!(
        service.spec.unwrap().ports,
        service_before.spec.unwrap().ports
    );
    let new_claim = claims.get(&claim).await?;
    assert_eq!(
        new_claim.spec.as_ref().unwrap().volume_name.as_deref(),
        Some(pv_name.as_str())
    );
    let pv = volumes.get(&pv_name).await?;
    let pv_spec = pv.spec.clone().unwrap();
    assert_eq!(pv_spec.claim_ref.unwrap().uid, new_claim.metadata.uid);
    assert_eq!(
        pv_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(f.ns.client().clone(), f.ns.name());
    let restored_events = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Restored"))
        .count();
    assert_eq!(restored_events, 4);

    // Again: everything exists, nothing is replaced.
    let now = f.snapshot().await?;
    let out = restore(gone, &[]);
    assert_eq!(results(&out), each(gone, "exists"));
    assert_eq!(f.snapshot().await?, now);

    // Bound (as the PV controller would bind it), the session's row put back: the next
    // scheduled run keeps the restored objects and gives the volume its policy back, fenced on
    // the new claim and `Bound`; a restore then has nothing left to do.
    let bound = json!({"status": {"phase": "Bound"}});
    volumes
        .patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(&bound))
        .await?;
    let pool = f.db.pool().await?;
    sqlx::query("INSERT INTO sessions (id, state) VALUES ($1, 'running')")
        .bind(gone)
        .execute(&pool)
        .await?;
    pool.close().await;
    // A restore's dry run says it would give the policy back, and changes nothing.
    let out = restore(gone, &["--dry-run=server"]);
    assert_eq!(results(&out), each(gone, "exists"));
    let rows: Vec<Value> = serde_json::from_str(&text(&out.stdout))?;
    let note = rows
        .iter()
        .find_map(|r| r["note"].as_str())
        .unwrap_or_default();
    assert!(
        note.contains("bound again: reclaim policy Delete given back"),
        "{rows:?}"
    );
    let retained = volumes.get(&pv_name).await?.spec.unwrap();
    assert_eq!(
        retained.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    let restored = f.snapshot().await?;
    let records = lines(&ok(&f.cli("run", &kept)));
    let line = given_back(&records, &pv_name);
    let reason = line["reason"].as_str().unwrap();
    let uid = new_claim.metadata.uid.clone().unwrap();
    assert!(
        reason.contains(&format!(
            "restored to claim uid {uid}, bound: reclaim policy Delete"
        )),
        "{reason}"
    );
    assert_eq!(f.snapshot().await?, restored);
    let out = restore(gone, &[]);
    assert_eq!(results(&out), each(gone, "exists"));
    let pv = volumes.get(&pv_name).await?;
    assert_eq!(
        pv.spec.unwrap().persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert!(
        !pv.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("gc.example.com/retained")
    );

    // An edited archive: nothing of that session is restored, and the run says why.
    let listed = gc_cli(
        &[
            "archives",
            "list",
            "--session",
            edited,
            "-o",
            "json",
            "--store",
            store,
            "--cluster-id",
            f.ns.name(),
        ],
        &[],
    );
    let listed: Vec<Value> = serde_json::from_str(&ok(&listed))?;
    let uri = listed[0]["uri"].as_str().unwrap();
    let path = uri.strip_prefix("file://").unwrap();
    let mut bytes = std::fs::read(path)?;
    bytes.push(b' ');
    std::fs::write(path, bytes)?;
    let out = restore(edited, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    for (_, result) in results(&out) {
        assert!(
            result.starts_with(
                "failed: not restored: an archive of the session failed verification: archive "
            ),
            "{result}"
        );
    }
    let after = f.snapshot().await?;
    assert!(
        of(edited).iter().all(|k| !after.contains_key(k)),
        "{after:?}"
    );
    volumes.delete(&pv_name, &Default::default()).await?;
    Ok(())
}

#[tokio::test]
async fn a_table_holding_none_of_the_ids_deletes_nothing_whatever_the_floor() -> Result {
    let Some(db) = TestDatabase::fresh("sessions-norow").await? else {
        return Ok(());
    };
    let bed = TestBed::shared().await?;
    let session = bed.install_session_crd().await?;
    let ns = bed.namespace("sessions-norow").await?;
    // A stopped session with persistent home: its Deployment, Service and PVC, three objects,
    // fewer than the default guard floor of 10.
    let id = "kim-firefox-000000a1";
    create_session(&ns, &session, id, &labels(id, Some(APP)), 1, true).await?;
    Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), &session)
        .delete(id, &Default::default())
        .await?;
    let before = snapshot(&ns, &session).await?;
    assert_eq!(before.len(), 3, "{before:?}");

    // The application's table (public.sessions) has the session, running; a schema first on
    // search_path has a `sessions` table of another installation, with the same id in other case.
    let pool = db.pool().await?;
    sqlx::raw_sql(&format!(
        "{SCHEMA}; CREATE SCHEMA staging; CREATE TABLE staging.sessions (LIKE public.sessions); \
         ALTER DATABASE \"{}\" SET search_path = staging, public; \
         INSERT INTO public.sessions (id, state) VALUES ('{id}', 'running'); \
         INSERT INTO staging.sessions (id, state) VALUES ('{}', 'running'), \
         ('zoe-gimp-000000b2', 'running')",
        db.name(),
        id.to_uppercase()
    ))
    .execute(&pool)
    .await?;
    pool.close().await;

    let cli = |verb: &str, extra: &[&str]| {
        let base = [
            verb,
            "sessions",
            "-n",
            ns.name(),
            "--kubeconfig",
            bed.kubeconfig_path().to_str().unwrap(),
            "--database-url",
            db.url(),
            "--grace-hours",
            "0",
        ];
        gc_cli(&[&base[..], extra].concat(), &[])
    };
    let why = "refused: none of the 1 session ids judged against the database has a row in the \
               session table";

    // The default floor: the run deletes nothing, says why, and exits as the guard does.
    let out = cli("run", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(why) && stderr.contains("wrong schema on search_path"),
        "{stderr}"
    );
    let audit = lines(&text(&out.stdout));
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["decision"], "refused");
    assert!(
        audit[0]["reason"].as_str().unwrap().contains(why),
        "{audit:?}"
    );
    assert_eq!(snapshot(&ns, &session).await?, before, "nothing deleted");
    // However high the floor; and the plan says the same.
    let out = cli("run", &["--guard-floor", "1000"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let out = cli("plan", &["-o", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
    assert_eq!(snapshot(&ns, &session).await?, before, "nothing deleted");

    // The right table keeps all three; the override shows what the guard held back.
    let out = cli("run", &["--table", "public.sessions"]);
    let kept = lines(&ok(&out));
    assert!(
        kept.iter()
            .all(|r| r["decision"] == "kept" && r["result"].is_null()),
        "{kept:?}"
    );
    let out = cli("run", &["--override-guard", "--dry-run"]);
    assert_eq!(with_result(&lines(&ok(&out)), "would delete").len(), 3);
    assert_eq!(snapshot(&ns, &session).await?, before, "nothing deleted");
    Ok(())
}

#[tokio::test]
async fn a_kind_not_installed_is_reported_not_fatal() -> Result {
    let Some((f, before)) = Fixture::new("sessions-kinds").await? else {
        return Ok(());
    };
    let out = f.cli(
        "run",
        &[
            "--kinds",
            "deployments,example.com/v1/Widget/widgets",
            "--dry-run",
        ],
    );
    let records = lines(&ok(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("example.com/v1 Widget is not served by the API server"),
        "{stderr}"
    );
    let expected: BTreeSet<String> = GONE.iter().map(|id| format!("Deployment/{id}")).collect();
    assert_eq!(with_result(&records, "would delete"), expected);
    assert_eq!(f.snapshot().await?, before);
    Ok(())
}

/// A run whose Lease another run takes while it waits (here on a slow database) has lost its lock:
/// it deletes nothing more, posts no Event, says `lost the run lock ...` and exits 1; the other
/// run keeps the Lease.
#[tokio::test]
async fn a_run_that_lost_its_lock_deletes_nothing_more_and_says_so() -> Result {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{Patch, PatchParams};
    let Some((f, before)) = Fixture::new("sess_lost").await? else {
        panic!("scripts/test.sh sets GC_TEST_DATABASE_URL");
    };
    // The run takes its Lease, then waits on the table: a view that answers after 5 s.
    let pool = f.db.pool().await?;
    sqlx::query("CREATE VIEW slow_sessions AS SELECT s.* FROM sessions s, pg_sleep(5)")
        .execute(&pool)
        .await?;
    pool.close().await;
    let mut child = command()
        .args([
            "run",
            "sessions",
            "-n",
            f.ns.name(),
            "--kubeconfig",
            &f.kubeconfig,
        ])
        .args(["--now", &f.now, "--database-url", f.db.url()])
        .args(["--table", "slow_sessions", "--lock-lease-seconds", "5"])
        .arg("--dry-run=none")
        .env("GC_ALLOW_FUTURE_NOW", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let leases: Api<Lease> = f.ns.api();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while leases.get_opt("gc-sessions").await?.is_none() {
        if child.try_wait()?.is_some() {
            let out = child.wait_with_output()?;
            panic!("the run ended first: {}", text(&out.stderr));
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run took no Lease"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Another run takes the Lease over.
    let now = k8s_openapi::jiff::Timestamp::now();
    let patch = json!({"spec": {
        "holderIdentity": "another-run",
        "leaseDurationSeconds": 60,
        "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
    }});
    leases
        .patch(
            "gc-sessions",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    let out = child.wait_with_output()?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("lost the run lock gc-sessions"), "{stderr}");
    assert_eq!(f.snapshot().await?, before, "nothing deleted");
    // The audit log still has what the run judged, each delete failed for the lost lock, and
    // then why it ended.
    let audit = lines(&text(&out.stdout));
    let (last, judged) = audit.split_last().expect("audit lines");
    assert_eq!(last["decision"], "refused", "{last}");
    let deletes: Vec<&Value> = judged
        .iter()
        .filter(|l| l["decision"] == "delete")
        .collect();
    assert_eq!(deletes.len(), 8, "{audit:?}");
    for line in deletes {
        assert_eq!(
            line["result"], "failed: not deleted: the run lock was lost",
            "{line}"
        );
    }
    let events: Api<Event> = f.ns.api();
    let mut posted = events.list(&ListParams::default()).await?.items;
    // gc's own: the API server's controllers post theirs too (a Service's ClusterIP repair).
    posted.retain(|e| e.reporting_controller.as_deref() == Some(gc_runtime_controller()));
    assert!(posted.is_empty(), "{posted:?}");
    let lease = leases.get("gc-sessions").await?;
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("another-run"));
    Ok(())
}

/// The embedding example `sessions` (gc-runtime) deletes what `gc-cli run sessions` deletes, on
/// two copies of the fixture: the same objects, audit lines, metrics and Events.
#[tokio::test]
async fn the_session_example_deletes_what_the_cli_deletes() -> Result {
    // Namespace names of one length: the metrics and Events are compared with them replaced.
    let Some((by_cli, cli_before)) = Fixture::new("sx-by-cli").await? else {
        return Ok(());
    };
    let Some((by_svc, svc_before)) = Fixture::new("sx-by-svc").await? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let metrics = |name: &str| dir.path().join(name).display().to_string();
    // Both at the clock, with no grace: every object whose session has no row is deleted.
    let (cli_metrics, svc_metrics) = (metrics("cli.prom"), metrics("svc.prom"));
    let flags = ["--grace-hours", "0", "--metrics-file"];
    let cli_out = gc_cli(
        &[
            &["run", "sessions", "-n", by_cli.ns.name(), "--kubeconfig"][..],
            &[&by_cli.kubeconfig, "--database-url", by_cli.db.url()],
            &flags,
            &[&cli_metrics],
        ]
        .concat(),
        &[],
    );
    let cli_audit = lines(&ok(&cli_out));
    let svc_out = example("sessions")
        .env("KUBECONFIG", &by_svc.kubeconfig)
        .args([
            "--namespace",
            by_svc.ns.name(),
            "--database-url",
            by_svc.db.url(),
        ])
        .args(flags)
        .args([&svc_metrics, "--live", "--once"])
        .output()?;
    let svc_audit = lines(&ok(&svc_out));

    let cli_removed = removed(&cli_before, &by_cli.snapshot().await?);
    assert!(cli_removed.is_superset(&hard_deleted()), "{cli_removed:?}");
    assert_eq!(removed(&svc_before, &by_svc.snapshot().await?), cli_removed);
    assert_eq!(with_result(&cli_audit, "deleted"), cli_removed);
    for decision in ["delete", "kept", "skipped", "held", "deferred"] {
        assert_eq!(
            kind_names(&svc_audit, "decision", decision),
            kind_names(&cli_audit, "decision", decision),
            "{decision}"
        );
    }
    assert_eq!(with_result(&svc_audit, "deleted"), cli_removed);
    let normal = |path: &str, ns: &str| {
        let mut lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !l.contains("timestamp") && !l.contains("duration"))
            .map(|l| l.replace(ns, "NS"))
            .collect();
        lines.sort();
        lines
    };
    let expected = normal(&cli_metrics, by_cli.ns.name());
    assert!(
        expected
            .iter()
            .any(|l| l.starts_with("gc_last_run_objects_deleted")),
        "{expected:?}"
    );
    assert_eq!(normal(&svc_metrics, by_svc.ns.name()), expected);
    let events = async |ns: &TestNamespace| -> Result<Vec<(String, String)>> {
        let api = ns.api::<k8s_openapi::api::events::v1::Event>();
        let mut got: Vec<(String, String)> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            // gc's own: the API server's controllers post theirs too.
            .filter(|e| e.reporting_controller.as_deref() == Some(gc_runtime_controller()))
            .map(|e| {
                let name = e.regarding.and_then(|r| r.name).unwrap_or_default();
                (name, e.reason.unwrap_or_default())
            })
            .collect();
        got.sort();
        Ok(got)
    };
    let cli_events = events(&by_cli.ns).await?;
    // One Event per session collected.
    let collected: BTreeSet<&str> = (cli_audit.iter())
        .filter(|r| r["result"] == "deleted")
        .filter_map(|r| r["session"].as_str())
        .collect();
    assert_eq!(cli_events.len(), collected.len(), "{cli_events:?}");
    assert!(
        cli_events
            .iter()
            .all(|(_, reason)| reason == "SessionCollected")
    );
    assert_eq!(events(&by_svc.ns).await?, cli_events);
    Ok(())
}

/// `--scope-column` reaches the lookup: with every row out of scope every session looks gone
/// here, so the guard refuses (exit 3) and nothing is deleted; a bad pair or a column the table lacks
/// is refused before anything is listed.
#[tokio::test]
async fn a_scope_column_limits_which_rows_count_here() -> Result {
    let Some((f, before)) = Fixture::new("sx-scope").await? else {
        return Ok(());
    };
    let out = f.cli("run", &["--scope-column", "user_id=nobody"]);
    refuse(
        &out,
        3,
        "refused: 8 of 8 sessions judged against the database look gone",
    );
    // Only alice's rows in scope: every other session looks gone here (the guard, overridden for
    // this dry run, would refuse it).
    let alice = [
        "--scope-column",
        "user_id=alice",
        "--dry-run=server",
        "--override-guard",
    ];
    let out = f.cli("run", &alice);
    let audit = lines(&ok(&out));
    assert_eq!(with_result(&audit, "would delete"), {
        let mut gone: BTreeSet<String> = hard_deleted();
        for id in LIVE.iter().chain([&HIBERNATED, &SOFT]) {
            if !id.starts_with("alice") {
                gone.extend(objects_of(id, true));
            }
        }
        gone.retain(|o| before.contains_key(o));
        gone
    });
    // A live session of another scope is not called missing from the database.
    let reason = format!(
        "no session {} in the database with user_id = 'alice' (or those columns empty)",
        LIVE.iter().find(|id| !id.starts_with("alice")).unwrap()
    );
    assert!(
        audit.iter().any(|l| l["reason"] == reason.as_str()),
        "{reason}: {audit:?}"
    );
    // A bad pair is the command line's own error (clap's words).
    let out = f.cli("run", &["--scope-column", "user_id"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("'--scope-column <COLUMN=VALUE>'"));
    refuse(
        &f.cli("run", &["--scope-column", "cluster_id=c1"]),
        1,
        "has no column cluster_id",
    );
    assert_eq!(f.snapshot().await?, before, "nothing was deleted");
    Ok(())
}

/// StreamSpace installs its `Session` definition under two groups: by default both are scanned,
/// and a `Session` of the other group whose session is gone is deleted as itself (its audit
/// line and Event name its own `apiVersion`), beside the fixture's.
#[tokio::test]
async fn sessions_of_both_groups_streamspace_installs_are_collected() -> Result {
    let Some((f, _)) = Fixture::new("sx-groups").await? else {
        return Ok(());
    };
    let other = gc_testbed::session_resource_in(gc_testbed::SESSION_GROUP_IO);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": other.api_version,
        "kind": other.kind,
        "metadata": { "name": GONE[0], "labels": labels(GONE[0], Some(APP)) },
    }))?;
    let sessions =
        Api::<DynamicObject>::namespaced_with(f.ns.client().clone(), f.ns.name(), &other);
    sessions.create(&PostParams::default(), &object).await?;

    // (made after the fixture: no grace, or it would be held at the fixture's instant)
    let out = f.cli("run", &["--grace-hours", "0"]);
    let records = lines(&ok(&out));
    let deleted: BTreeSet<(String, String)> = records
        .iter()
        .filter(|r| r["kind"] == "Session" && r["result"] == "deleted")
        .map(|r| {
            let api_version = r["apiVersion"].as_str().unwrap().to_owned();
            (api_version, r["name"].as_str().unwrap().to_owned())
        })
        .collect();
    let io = "stream.streamspace.io/v1alpha1".to_owned();
    assert!(deleted.contains(&(io, GONE[0].to_owned())), "{deleted:?}");
    assert!(deleted.contains(&("stream.space/v1alpha1".to_owned(), GONE[0].to_owned())));
    assert!(
        sessions.get_opt(GONE[0]).await?.is_none(),
        "deleted as its own kind"
    );
    let stderr = text(&out.stderr);
    assert!(
        !stderr.contains("not served"),
        "both groups are installed: {stderr}"
    );
    // The session's one Event names both of its `Session` objects, each with its group.
    let events = f.ns.api::<k8s_openapi::api::events::v1::Event>();
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SessionCollected"))
        .filter_map(|e| e.note)
        .filter(|n| n.starts_with(&format!("session {}: ", GONE[0])))
        .collect();
    let [note] = &notes[..] else {
        panic!("one Event for session {}: {notes:?}", GONE[0]);
    };
    for group in ["stream.streamspace.io", "stream.space"] {
        let named = format!("Session.{group}/{}", GONE[0]);
        assert!(note.contains(&named), "{note}");
    }
    Ok(())
}

/// The `reportingController` of gc's Events.
fn gc_runtime_controller() -> &'static str {
    "gc.example.com/gc-cli"
}

/// One HTTP/1.1 call to `addr` with `token` (`Authorization: Bearer`) and a JSON `body`: the
/// status and the JSON answer (`null` when there is none).
fn call(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let length = body.len();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-type: application/json\r\n\
         content-length: {length}\r\nconnection: close\r\n\r\n{body}"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    (
        status.unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// The control plane ends a session (its row set `terminated`) and asks gc to collect it:
/// `serve --api-listen` checks the caller's projected token and right with the API server,
/// then deletes that session's objects, each archived, and nothing else; a caller without the
/// right gets 403, one without a token 401, and neither changes anything.
#[tokio::test]
async fn a_session_the_control_plane_ends_is_collected_on_its_request() -> Result {
    let Some((f, _)) = Fixture::new("sessions-api").await? else {
        return Ok(());
    };
    let scratch = Scratch::new()?;
    f.ns.service_account_client("streamspace-api").await?;
    f.ns.service_account_client("stranger").await?;
    let rule = |resources: &[&str], verbs: &[&str]| k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(vec!["gc.stream.space".into()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    };
    let rules = vec![
        rule(&["sessions/collect"], &["create"]),
        rule(&["runs"], &["get"]),
    ];
    f.ns.grant("streamspace-api", rules).await?;
    let token =
        f.ns.service_account_token_for("streamspace-api", &["gc"])
            .await?;
    let stranger = f.ns.service_account_token_for("stranger", &["gc"]).await?;
    let wrong_audience = f.ns.service_account_token("streamspace-api").await?;

    let (metrics, api) = (common::free_address(), common::free_address());
    let serve = [
        "serve",
        "--listen",
        &metrics,
        "--api-listen",
        &api,
        "--interval",
        "6h",
    ];
    let run = [
        "sessions",
        "-n",
        f.ns.name(),
        "--kubeconfig",
        &f.kubeconfig,
        "--now",
        &f.now,
    ];
    let table = ["--database-url", f.db.url(), "--state-column", "state"];
    let terminal = ["--terminal-state", "terminated"];
    let args = [&serve[..], &run, &table, &terminal, &scratch.flags()].concat();
    let mut child = gc_cli_command(&args, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // The first scheduled run collects the hard-deleted sessions; the API answers meanwhile.
    let collect = format!("/v1/namespaces/{}/sessions/collect", f.ns.name());
    let ended = LIVE[0];
    let body = json!({ "sessions": [ended] }).to_string();
    let mut answered = (0, Value::Null);
    for _ in 0..300 {
        if std::net::TcpStream::connect(&api).is_ok() {
            answered = call(&api, "POST", &collect, None, &body);
            if answered.0 != 0 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(answered.0, 401, "{answered:?}");
    let (status, refused) = call(&api, "POST", &collect, Some(&wrong_audience), &body);
    assert_eq!(
        status, 401,
        "a token for the API server is no token for gc: {refused}"
    );
    let (status, refused) = call(&api, "POST", &collect, Some(&stranger), &body);
    assert_eq!(status, 403, "{refused}");

    // The control plane ends the session once the scheduled run is done; the next request
    // collects it, and only it.
    let collected = |s: &Snapshot| {
        (hard_deleted().iter()).all(|o| s.get(o).is_none_or(|(_, deleting)| *deleting))
    };
    let mut before = f.snapshot().await?;
    for _ in 0..600 {
        if collected(&before) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        before = f.snapshot().await?;
    }
    assert!(
        collected(&before),
        "the scheduled run collected the hard-deleted sessions"
    );
    let pool = f.db.pool().await?;
    sqlx::query("UPDATE sessions SET state = 'terminated' WHERE id = $1")
        .bind(ended)
        .execute(&pool)
        .await?;
    pool.close().await;
    let (status, run) = call(&api, "POST", &collect, Some(&token), &body);
    assert_eq!(status, 202, "{run}");
    let path = format!("/v1/runs/{}", run["id"].as_str().unwrap());
    let mut run = run;
    for _ in 0..600 {
        if ["succeeded", "failed", "stopped"].contains(&run["state"].as_str().unwrap_or("")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        run = call(&api, "GET", &path, Some(&token), "").1;
    }
    assert_eq!(run["state"], "succeeded", "{run:#}");
    let user = format!("system:serviceaccount:{}:streamspace-api", f.ns.name());
    assert_eq!(run["requestedBy"], user.as_str());
    let records = run["records"].as_array().unwrap();
    assert_eq!(
        with_result(records, "deleted"),
        objects_of(ended, true),
        "{run:#}"
    );
    assert!(records.iter().all(|r| r["archive"].is_string()), "{run:#}");
    let after = f.snapshot().await?;
    let gone: BTreeSet<String> = (before.iter())
        .filter(|(_, (_, deleting))| !deleting)
        .filter(|(name, _)| after.get(*name).is_none_or(|(_, deleting)| *deleting))
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(gone, objects_of(ended, true));
    for id in &LIVE[1..] {
        let theirs = objects_of(id, *id != LIVE[1]);
        assert!(theirs.iter().all(|o| after.contains_key(o)), "{id}");
    }

    // The Go client, as the control plane calls it: the next session ended is collected
    // through it (`clients/go`, its `TestLive`), the token read from a projected token's file.
    let pool = f.db.pool().await?;
    sqlx::query("UPDATE sessions SET state = 'terminated' WHERE id = $1")
        .bind(LIVE[1])
        .execute(&pool)
        .await?;
    pool.close().await;
    let token_file = scratch.dir.path().join("token");
    std::fs::write(&token_file, &token)?;
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/go");
    let go = std::process::Command::new("go")
        .args(["test", "-count=1", "-run", "TestLive", "-v", "./..."])
        .current_dir(client)
        .env("CGO_ENABLED", "0")
        .env("GC_API_URL", format!("http://{api}"))
        .env("GC_API_NAMESPACE", f.ns.name())
        .env("GC_API_SESSION", LIVE[1])
        .env("GC_API_TOKEN_FILE", &token_file)
        .env("GC_API_STRANGER_TOKEN", &stranger)
        .env("GC_API_DELETES", "3")
        .output()?;
    let said = format!("{}{}", text(&go.stdout), text(&go.stderr));
    assert!(go.status.success(), "{said}");
    assert!(said.contains("--- PASS: TestLive"), "{said}");
    let after_go = f.snapshot().await?;
    for object in objects_of(LIVE[1], false) {
        assert!(
            after_go.get(&object).is_none_or(|(_, deleting)| *deleting),
            "{object}"
        );
    }
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    assert!(sent.success());
    let status = child.wait()?;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)?;
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("serving the request API on"), "{stderr}");
    Ok(())
}

/// The example lines (commands, not their `#` lines) of `gc-cli PATH --help`, as words.
fn examples_of(path: &str) -> Vec<Vec<String>> {
    let out = command()
        .args(path.split_whitespace())
        .arg("--help")
        .output()
        .unwrap();
    let help = text(&out.stdout);
    let (_, shown) = help.split_once("\nExamples:\n").expect("examples");
    let lines = shown
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("gc-cli "));
    lines
        .map(|l| common::markdown::shell_words(l)[1..].to_vec())
        .collect()
}

/// The session collector's examples, as their help shows them, run in order against the test
/// bed and PostgreSQL: namespace `streamspace` is the fixture's, session `4f2a9c` a
/// hard-deleted one, the database the fixture's (by `--database-url`, or StreamSpace's `DB_*`
/// variables where the example names none). Each plan, run and serve judges at the fixture's
/// `--now` (its objects are minutes old), and each serve makes one round (`--runs 1`) on a free
/// port. The plans change nothing, the dry runs delete nothing, the live run deletes the
/// hard-deleted sessions and writes its audit log, the session's archives are listed, and its
/// restore creates its objects again.
#[tokio::test]
async fn the_session_examples_run_against_the_test_bed() -> Result {
    let Some((f, before)) = Fixture::new("sessions-help").await? else {
        return Ok(());
    };
    let env = db_variables(f.db.url());
    let work = tempfile::tempdir()?;
    let gone = GONE[0];
    let mut ran: Vec<(String, String)> = Vec::new();
    let mut snapshots = Vec::new();
    for path in [
        "plan sessions",
        "plan",
        "gc-cli",
        "run",
        "run sessions",
        "serve sessions",
        "serve",
        "archives list",
        "restore sessions",
        "restore",
    ] {
        let path = path.strip_prefix("gc-cli").unwrap_or(path);
        for words in examples_of(path) {
            let line = words.join(" ");
            let sessions = words.iter().any(|w| w == "sessions") || line.contains("4f2a9c");
            if !sessions {
                continue;
            }
            let judges = !words.iter().any(|w| w == "restore" || w == "archives");
            let mut args: Vec<String> = Vec::new();
            for (i, word) in words.iter().enumerate() {
                let after = |flag: &str| i > 0 && words[i - 1] == flag;
                args.push(match word.as_str() {
                    "streamspace" if after("-n") => f.ns.name().to_owned(),
                    "4f2a9c" => gone.to_owned(),
                    w if after("--database-url") && w.starts_with("postgres://") => {
                        f.db.url().to_owned()
                    }
                    _ if after("--listen") => "127.0.0.1:0".to_owned(),
                    w => w.to_owned(),
                });
            }
            if judges {
                args.extend(["--now".into(), f.now.clone()]);
            }
            if words[0] == "serve" {
                args.splice(1..1, ["--runs".to_owned(), "1".to_owned()]);
            }
            let out = command()
                .args(&args)
                .current_dir(work.path())
                .env("GC_STATE_DIR", work.path().join("state"))
                .env("HOME", work.path())
                .env("KUBECONFIG", &f.kubeconfig)
                .env("GC_ALLOW_FUTURE_NOW", "1")
                .env_remove("GC_STORE")
                .env_remove("GC_SESSION_DATABASE_URL")
                .envs(env)
                .output()?;
            let shown = format!(
                "gc-cli {line}\nstdout: {}\nstderr: {}",
                text(&out.stdout),
                text(&out.stderr)
            );
            assert!(out.status.success(), "{shown}");
            ran.push((line, format!("{}{}", text(&out.stdout), text(&out.stderr))));
            snapshots.push(f.snapshot().await?);
        }
    }
    let lines: Vec<&str> = ran.iter().map(|(l, _)| l.as_str()).collect();
    let said = |prefix: &str| -> (usize, &str) {
        let found = ran.iter().position(|(l, _)| l.starts_with(prefix));
        let i = found.unwrap_or_else(|| panic!("no example {prefix}: {lines:#?}"));
        (i, &ran[i].1)
    };
    // The plans and the dry runs change nothing; the first live run deletes the hard-deleted
    // sessions' objects, archived.
    let (live, _) = said("run sessions -n streamspace --dry-run=none");
    assert!(live > 3, "{lines:#?}");
    assert!(snapshots[..live].iter().all(|s| *s == before), "{lines:#?}");
    let (_, plan) = said("plan sessions -n streamspace --database-url");
    assert!(plan.contains("8 to delete"), "{plan}");
    assert!(work.path().join("sessions-plan.json").is_file());
    let gone_now = |s: &Snapshot| {
        (hard_deleted().iter()).all(|o| s.get(o).is_none_or(|(_, deleting)| *deleting))
    };
    assert!(gone_now(&snapshots[live]), "{lines:#?}");
    said("run sessions -n streamspace --dry-run=none --audit-log audit.jsonl");
    assert!(work.path().join("audit.jsonl").is_file());
    let (_, listed) = said("archives list -n streamspace --session 4f2a9c -o wide");
    for object in objects_of(gone, true) {
        let name = object.split_once('/').unwrap().1;
        assert!(listed.contains(name), "{listed}");
    }
    // Restored: the session's objects exist again, new objects (its claim is left as it is:
    // without a controller manager, the deleted claim stays behind its protection finalizer,
    // and a restore never replaces an object that exists).
    let restored = snapshots.last().unwrap();
    for object in objects_of(gone, false) {
        let (uid, deleting) = &restored[&object];
        assert!(!deleting && *uid != before[&object].0, "{object}");
    }
    for served in ["serve --interval 6h sessions", "serve --listen"] {
        assert!(
            ran.iter().any(|(l, _)| l.starts_with(served)),
            "{served}: {ran:#?}"
        );
    }
    assert!(ran.len() >= 14, "{ran:#?}");
    Ok(())
}
