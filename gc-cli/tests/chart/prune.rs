//! `archives.prune`: off by default; on, a CronJob per enabled collector running exactly
//! `gc-cli archives prune` on that collector's store, archives and volume (no database, no
//! token), the schema refusing a window without its unit by name, NOTES naming the CronJobs; and
//! the rendered command, run as the kubelet would run it, pruning what the collector's state
//! holds.

use std::collections::BTreeMap;
use std::time::Duration;

use gc_core::ports::{ArchiveKey, ArchiveSink as _, Receipt, Store as _};
use gc_testbed::TestBed;
use serde_json::{Value, json};

use super::docs::notes;
use super::{CHART, container_args, documents, helm, object, pod_spec, template, the_container};
use crate::common::{Result, command};

/// The names of the prune CronJobs rendered.
fn prune_jobs(objects: &[Value]) -> Vec<&str> {
    objects
        .iter()
        .filter(|o| o["kind"] == "CronJob")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .filter(|n| n.ends_with("-prune"))
        .collect()
}

/// The container's environment: name to value, or to `secret/KEY` for a Secret's.
fn env(workload: &Value) -> BTreeMap<String, String> {
    the_container(workload)["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let value = match e["value"].as_str() {
                Some(v) => v.to_owned(),
                None => {
                    let secret = &e["valueFrom"]["secretKeyRef"];
                    let text = |k: &str| secret[k].as_str().unwrap().to_owned();
                    format!("{}/{}", text("name"), text("key"))
                }
            };
            (e["name"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

/// The claims a workload's Pod mounts.
fn claims(workload: &Value) -> Vec<Value> {
    pod_spec(workload)["volumes"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|v| v["persistentVolumeClaim"]["claimName"].clone())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn prune_jobs_are_off_by_default_and_run_exactly_archives_prune() {
    let off = documents(&template(&["failedPods.enabled=true"]));
    assert!(prune_jobs(&off).is_empty());

    let on = documents(&template(&[
        "archives.prune.enabled=true",
        "failedPods.enabled=true",
    ]));
    assert_eq!(
        prune_jobs(&on),
        ["gc-sessions-prune", "gc-failed-pods-prune"]
    );
    let sessions = object(&on, "CronJob", "gc-sessions-prune");
    assert_eq!(
        container_args(sessions),
        [
            "archives",
            "prune",
            "--older-than=90d",
            "--volume-retention=7d",
            "--cluster-id=gc-streamspace",
            "--namespace=streamspace",
            "--dry-run=none",
        ]
    );
    assert_eq!(sessions["spec"]["schedule"], "30 4 * * *");
    // The collector's store, archives and volume; not its database, not a token.
    let collector = object(&on, "CronJob", "gc-sessions");
    let state = BTreeMap::from([
        (
            "GC_ARCHIVE_DIR".to_owned(),
            "/var/lib/gc/archives".to_owned(),
        ),
        ("GC_STATE_DIR".to_owned(), "/var/lib/gc".to_owned()),
        (
            "GC_STORE".to_owned(),
            "sqlite:/var/lib/gc/gc.sqlite3".to_owned(),
        ),
    ]);
    assert_eq!(env(sessions), state);
    assert!(env(collector).contains_key("DB_PASSWORD"));
    assert_eq!(claims(sessions), claims(collector));
    assert_eq!(claims(sessions), [json!("gc-sessions-state")]);
    assert_eq!(pod_spec(sessions)["automountServiceAccountToken"], false);
    assert_eq!(pod_spec(collector)["automountServiceAccountToken"], true);
    // Its own label: no collector's selector (serve's Service, NOTES' `get jobs -l`) picks it.
    let label = |w: &Value| {
        w["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
        ["gc.example.com/collector"]
        .clone()
    };
    assert_eq!(
        (label(sessions), label(collector)),
        (json!("sessions-prune"), json!("sessions"))
    );

    let pods = object(&on, "CronJob", "gc-failed-pods-prune");
    assert_eq!(
        container_args(pods),
        [
            "archives",
            "prune",
            "--older-than=90d",
            "--cluster-id=primary",
            "--namespace=streamspace",
            "--dry-run=none",
        ]
    );
    assert_eq!(claims(pods), [json!("gc-state")]);

    // The window, a dry run, cluster-wide, the volumes' window, a bucket and PostgreSQL, the log.
    let set = documents(&template(&[
        "archives.prune.enabled=true",
        "archives.prune.olderThan=12h",
        "archives.prune.dryRun=true",
        "archives.prune.schedule=@daily",
        "clusterWide.enabled=true",
        "gc.retainVolumeDays=0",
        "gc.archive.url=s3://manifests/gc",
        "gc.archive.endpoint=https://minio.example:9000",
        "gc.archive.credentialsSecret=s3",
        "gc.store.existingSecret=receipts",
        "log.format=json",
        "serve.enabled=true",
    ]));
    assert_eq!(prune_jobs(&set), ["gc-sessions-prune"]);
    let sessions = object(&set, "CronJob", "gc-sessions-prune");
    assert_eq!(
        container_args(sessions),
        [
            "--log-format=json",
            "archives",
            "prune",
            "--older-than=12h",
            "--volume-retention=0d",
            "--cluster-id=gc-streamspace",
            "--dry-run=server",
        ]
    );
    assert_eq!(sessions["spec"]["schedule"], "@daily");
    let env = env(sessions);
    assert_eq!(env["GC_STORE"], "receipts/url");
    assert_eq!(env["GC_ARCHIVE_URL"], "s3://manifests/gc");
    assert_eq!(env["GC_ARCHIVE_ENDPOINT"], "https://minio.example:9000");
    assert_eq!(env["AWS_SECRET_ACCESS_KEY"], "s3/AWS_SECRET_ACCESS_KEY");
    assert!(!env.contains_key("GC_ARCHIVE_DIR") && !env.contains_key("DB_PASSWORD"));
    assert!(claims(sessions).is_empty());

    // Bad values are refused at install time, by name.
    for (set, field) in [
        ("archives.prune.olderThan=90", "/archives/prune/olderThan"),
        ("archives.prune.olderThan=0d", "/archives/prune/olderThan"),
        ("archives.prune.olderThan=-5d", "/archives/prune/olderThan"),
        ("archives.prune.olderThan=1w", "/archives/prune/olderThan"),
        ("archives.prune.schedule=often", "/archives/prune/schedule"),
        ("archives.prune.keep=1", "'keep' not allowed"),
    ] {
        let out = helm(
            &[
                &["template", "gc", CHART, "--set-string", set],
                &super::INSTALL_VALUES[..],
            ]
            .concat(),
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{set}");
        assert!(said.contains(field), "{set}: {said}");
    }
}

/// NOTES names each prune CronJob, what it removes and how to run it now (a command naming a
/// rendered object), and says when it runs dry.
#[tokio::test]
async fn notes_name_the_prune_jobs() -> Result {
    let bed = TestBed::shared().await?;
    let sets = [
        "archives.prune.enabled=true",
        "archives.prune.dryRun=true",
        "failedPods.enabled=true",
    ];
    let text = notes(bed, &sets);
    for said in [
        "Archive retention (archives.prune): each receipt older than 90d is removed with its archive",
        "DRY RUN (archives.prune.dryRun=true)",
        "create job --from=cronjob/gc-sessions-prune gc-sessions-prune-now",
        "create job --from=cronjob/gc-failed-pods-prune gc-failed-pods-prune-now",
    ] {
        assert!(text.contains(said), "{said}:\n{text}");
    }
    assert!(super::docs::check_notes_commands(&text, &sets) > 0);
    assert!(!notes(bed, &[]).contains("Archive retention"));
    Ok(())
}

/// The rendered prune command, run as the kubelet would run it (the image's entrypoint, the
/// rendered args and environment, the volume's paths a folder of the test's own), on state a
/// session run left there: a receipt and its archive older than the rendered window go, one of
/// another namespace stays.
#[tokio::test]
async fn the_rendered_prune_command_prunes_the_collectors_state() -> Result {
    let objects = documents(&template(&[
        "archives.prune.enabled=true",
        "archives.prune.olderThan=1s",
    ]));
    let job = object(&objects, "CronJob", "gc-sessions-prune");
    let dir = tempfile::tempdir()?;
    let state = |v: &str| v.replace("/var/lib/gc", &dir.path().to_string_lossy());
    let env: BTreeMap<String, String> = env(job).into_iter().map(|(k, v)| (k, state(&v))).collect();

    // What a run leaves: archives in the folder, receipts in the store the environment names.
    let store = gc_store::open(&env["GC_STORE"]).await?;
    let sink = gc_store::DirectorySink::new(env["GC_ARCHIVE_DIR"].clone().into());
    let mut uris = Vec::new();
    for (namespace, uid) in [("streamspace", "u1"), ("elsewhere", "u2")] {
        let bytes = json!({"archivedFrom": {"uid": uid}})
            .to_string()
            .into_bytes();
        let key = ArchiveKey {
            cluster_id: "gc-streamspace".into(),
            namespace: namespace.into(),
            uid: uid.into(),
        };
        let uri = sink.write(&key, &bytes).await?;
        store
            .put_receipt(&Receipt {
                cluster_id: "gc-streamspace".into(),
                namespace: namespace.into(),
                uid: uid.into(),
                name: format!("svc-{uid}"),
                uri: uri.clone(),
                sha256: gc_core::pods::archive::digest(&bytes),
                bytes: bytes.len() as u64,
                session: None,
            })
            .await?;
        uris.push(uri);
    }
    store.close().await;
    tokio::time::sleep(Duration::from_millis(2100)).await;

    let out = command()
        .args(container_args(job))
        .env_clear()
        .envs(&env)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 removed, 0 kept, 0 in the window, of 1 receipts"),
        "{stdout}"
    );
    let file = |uri: &str| std::path::PathBuf::from(uri.strip_prefix("file://").unwrap());
    assert!(!file(&uris[0]).exists() && file(&uris[1]).exists());
    Ok(())
}
