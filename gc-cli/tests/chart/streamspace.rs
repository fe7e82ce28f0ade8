//! `docs/streamspace.md` run as written, from nothing to an undone delete and the control plane
//! collecting and restoring through gc: its `kubectl` and `helm` commands in order, its files
//! (`# NAME.yaml` blocks) as the operator saves them, in the namespace `streamspace`, with only
//! the page's "put yours" values put in (the database's host and password). What StreamSpace
//! itself brings is StreamSpace's (`tests/data/streamspace/`): its agent's and its older
//! controller's objects, a per-user home claim, its `sessions` table with rows its reconciler
//! ended, one its batch terminate deleted, one in a state it does not know yet, its API's
//! ServiceAccount, its PostgreSQL as its chart names it. Each Job and the `serve` Deployment run
//! as the kubelet would run their Pods (see `install.rs`); the reconciler is
//! `examples/streamspace`, the page's code, with StreamSpace's own environment.

mod fixtures;
mod network;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gc_testbed::{TestBed, TestNamespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use super::install::{
    database_parts, on_state, out_of_cluster, rendered, restore_job, run_rendered, token_file,
};
use super::{CHART, install_crd_of};
use crate::common::{Result, command, eventually};
use fixtures::{Session, kubectl};
use network::{DATABASE_ADDRESS, Facade, GC_POD_ADDRESS, Network};

const NS: &str = "streamspace";
/// The page's session: its row deleted by a batch terminate, collected by the CronJob, restored.
const ALICE: &str = "alice-firefox-0000000a";
/// A running session the reconciler ends in step 7: collected through the API, then restored.
const BOB: &str = "bob-firefox-0000000b";

/// StreamSpace's sessions in the namespace: v2's agent's, one of v1's controller's.
const SESSIONS: [Session; 7] = [
    Session {
        id: ALICE,
        user: "alice",
        template: "firefox",
        state: None,
    },
    Session {
        id: BOB,
        user: "bob",
        template: "firefox",
        state: Some("running"),
    },
    Session {
        id: "carol-firefox-0000000c",
        user: "carol",
        template: "firefox",
        state: Some("failed"),
    },
    Session {
        id: "dave-chrome-0000000d",
        user: "dave",
        template: "chrome",
        state: Some("hibernated"),
    },
    Session {
        id: "erin-firefox-0000000e",
        user: "erin",
        template: "firefox",
        state: Some("paused"),
    },
    Session {
        id: "greta-firefox-0000000f",
        user: "greta",
        template: "firefox",
        state: Some("running"),
    },
    // v1's controller: its Deployment and Service owned by its `Session`.
    Session {
        id: "frank-firefox-00000010",
        user: "frank",
        template: "firefox",
        state: Some("terminated"),
    },
];

/// The sessions whose objects the CronJob collects: no row, `failed`, `terminated`.
const GONE: [&str; 3] = [ALICE, "carol-firefox-0000000c", "frank-firefox-00000010"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streamspace_page_runs_as_written() -> Result {
    let bed = TestBed::with_controllers().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("streamspace-page").await? else {
        return Ok(());
    };
    let ns = bed.namespace_exact(NS).await?;
    bed.install_session_crd().await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let [host, port, name, user, password] = database_parts(db.url());
    let gc_api = format!("gc-sessions.{NS}.svc:9443");
    let network = Network::start(
        Facade {
            upstream: format!("{host}:{port}"),
            database: name,
            user,
        },
        &[(gc_api.clone(), format!("{GC_POD_ADDRESS}:9443"))],
    )?;
    let volumes = stream_space(&ns, &kubeconfig, &db).await?;

    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/streamspace.md"
    ))?;
    // The page's "put yours": where its PostgreSQL is, and its password.
    let page = page
        .replace("streamspace-postgresql", DATABASE_ADDRESS)
        .replace(
            "postgres-password=CHANGE-ME",
            &format!("postgres-password={password}"),
        );
    let commands = super::docs::doc_commands(&page);
    assert!(commands.len() > 15, "{commands:?}");
    // The page's files, saved where its commands run.
    let files = tempfile::tempdir()?;
    for (file, text) in page_files(&page) {
        std::fs::write(files.path().join(file), text)?;
    }
    // The CA of the operator's Issuer `streamspace-ca`, and the ConfigMap StreamSpace's Pods
    // trust it from.
    let mut ca = CertificateAuthority::new(files.path())?;
    // cert-manager, as the page's Certificate needs it.
    install_crd_of(bed, "cert-manager.io", "certificates").await?;
    kubectl(
        &kubeconfig,
        &[
            "create",
            "configmap",
            "-n",
            NS,
            "streamspace-ca",
            &format!("--from-file=ca.crt={}", ca.cert.display()),
        ],
        "",
    )?;

    let run = |program: &str, words: &[String]| -> String {
        let words: Vec<String> = words
            .iter()
            .map(|w| {
                if w == "./chart" {
                    CHART.into()
                } else {
                    w.clone()
                }
            })
            .collect();
        let out = Command::new(gc_testbed::tool(program).unwrap())
            .args(&words)
            .args(["--kubeconfig", &kubeconfig])
            .current_dir(files.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{program} {words:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The state volume of the collector and the restore: one folder for every run.
    let volume = tempfile::tempdir()?;
    let later = Timestamp::from_second(Timestamp::now().as_second() + 25 * 3600)?;
    let mut logs: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut seen = Vec::new();
    for words in &commands {
        let line = words.join(" ");
        if words[0] == "helm" {
            run("helm", &words[1..]);
            seen.push(format!("helm {}", words[1]));
            if line.contains("-f gc-api.yaml") {
                let status = run(
                    "helm",
                    &["status".into(), "gc".into(), "-n".into(), NS.into()],
                );
                for said in [
                    "https://gc-sessions.streamspace.svc:9443",
                    "gc-streamspace-api-caller",
                    "gc-streamspace-api-restorer",
                ] {
                    assert!(status.contains(said), "{line}: {said}: {status}");
                }
            }
            continue;
        }
        assert_eq!(words[0], "kubectl", "{line}");
        if words.contains(&"job".to_owned()) && words.contains(&"create".to_owned()) {
            run("kubectl", &words[1..]);
            let job_name = words.last().unwrap().clone();
            let from = words
                .iter()
                .find_map(|w| w.strip_prefix("--from=cronjob/"))
                .expect("--from=cronjob/NAME");
            let output = run_job(bed, &ns, &job_name, from, volume.path(), later).await?;
            seen.push(format!("job {from}"));
            logs.insert(job_name, output);
        } else if let Some(job) = words.iter().find_map(|w| w.strip_prefix("job/"))
            && words.contains(&"logs".to_owned())
        {
            let (stdout, stderr) = logs
                .get(job)
                .unwrap_or_else(|| panic!("{line}: no run of {job}"));
            check_log(&seen, stdout, stderr, &line);
        } else {
            let stdout = run("kubectl", &words[1..]);
            if line.contains("reason=Restored") {
                assert!(stdout.contains("Restored"), "{line}: {stdout}");
            }
            if line.contains("apply -f gc-api-certificate.yaml") {
                ca.issue(&ns).await?;
            }
        }
        // Before the restore, the session goes back in the table (the page says so first).
        if line.contains("create job --from=cronjob/gc-restore-dry-run") {
            assert!(get::<Service>(&ns, ALICE).await?.is_none(), "{line}");
            fixtures::execute(
                &db,
                "INSERT INTO sessions (id, user_id, template_name, state) \
                 VALUES ($1, 'alice', 'firefox', 'running')",
                ALICE,
            )
            .await?;
        }
        if line.contains("create job --from=cronjob/gc-restore ") {
            assert!(get::<Service>(&ns, ALICE).await?.is_some(), "{line}");
        }
    }
    let jobs: Vec<&String> = seen.iter().filter(|s| s.starts_with("job ")).collect();
    assert_eq!(
        jobs,
        [
            "job gc-sessions",
            "job gc-sessions",
            "job gc-restore-dry-run",
            "job gc-restore"
        ],
        "the page's Jobs: a dry run, a live run, a restore's dry run, a restore"
    );
    // The volumes of the claims the live run deleted are kept; alice's was moved to her
    // restored claim.
    assert_eq!(
        policy(&ns, &volumes["carol-firefox-0000000c"]).await?,
        "Retain"
    );

    // Step 7: the control plane's reconciler, as the page shows it, against gc's `serve`
    // Deployment run as the kubelet runs it.
    let mut serve = Serve::start(bed, &ns, volume.path(), &ca, later).await?;
    let outcome = reconcile(&ns, &db, &network, &ca, &volumes).await;
    let audit = serve.stop()?;
    outcome?;
    let caller = format!("system:serviceaccount:{NS}:streamspace-api");
    let requested: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["session"] == BOB && l["result"] == "deleted")
        .collect();
    assert_eq!(requested.len(), 4, "{audit}");
    assert!(
        requested.iter().all(|l| l["requestedBy"]
            .as_array()
            .unwrap()
            .contains(&json!(caller))),
        "{requested:?}"
    );
    untouched(&ns).await
}

/// StreamSpace as it runs in the namespace: every session's objects, the per-user home claims,
/// the `sessions` table, its API's ServiceAccount. The volumes of the v2 sessions' claims.
async fn stream_space(
    ns: &TestNamespace,
    kubeconfig: &str,
    db: &gc_testbed::TestDatabase,
) -> Result<BTreeMap<&'static str, String>> {
    let mut volumes = BTreeMap::new();
    for s in &SESSIONS {
        if s.id.starts_with("frank") {
            fixtures::v1_session(kubeconfig, NS, s)?;
        } else {
            volumes.insert(s.id, fixtures::v2_session(kubeconfig, NS, s)?);
        }
    }
    fixtures::v1_home(kubeconfig, NS, "frank")?;
    // A per-user home claim that someone labelled as one of alice's objects (a copied manifest):
    // still not a claim of hers.
    let copied = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "home-alice", "labels": {
            "app": "streamspace-session", "session": ALICE, "user": "alice", "template": "firefox"}},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}}},
    });
    kubectl(
        kubeconfig,
        &["create", "-n", NS, "-f", "-"],
        &copied.to_string(),
    )?;
    fixtures::rows(db, &SESSIONS).await?;
    ns.api::<ServiceAccount>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "streamspace-api"}}))?,
        )
        .await?;
    for (s, volume) in &volumes {
        let claim = format!("{s}-home");
        eventually(&format!("{claim} bound"), async || {
            let phase = get::<PersistentVolumeClaim>(ns, &claim)
                .await?
                .and_then(|c| c.status?.phase);
            Ok((phase.as_deref() == Some("Bound"), phase))
        })
        .await?;
        assert_eq!(policy(ns, volume).await?, "Delete");
    }
    Ok(volumes)
}

/// The page's files (`# NAME.yaml` blocks), those its commands name.
fn page_files(page: &str) -> Vec<(String, String)> {
    let files = super::docs::page_files(page);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "gc-api.yaml",
            "gc-api-certificate.yaml",
            "streamspace-calls-gc.yaml",
            "postgresql-from-gc.yaml"
        ]
    );
    files
}

/// The Job `name` made from CronJob `from` run as the kubelet would run its Pod: its stdout (the
/// log `kubectl logs` reads) and stderr.
async fn run_job(
    bed: &'static TestBed,
    ns: &TestNamespace,
    name: &str,
    from: &str,
    volume: &Path,
    later: Timestamp,
) -> Result<(String, String)> {
    let job = ns.api::<Job>().get(name).await?;
    let template = job.spec.expect("a Job spec").template;
    let pod = template.spec.expect("a Pod template");
    let dir = tempfile::tempdir()?;
    let out = if from == "gc-sessions" {
        let r = rendered(ns, &pod).await?;
        let token = token_file(ns, &r.account, &dir).await?;
        let (out, log) = run_rendered(bed, (&r.args, &r.env), &token, volume, later, name)?;
        assert!(out.status.success(), "{name}: {log}");
        out
    } else {
        let r = restore_job(ns, template.metadata.unwrap_or_default(), &pod).await?;
        let token = token_file(ns, &r.account, &dir).await?;
        let out = command()
            .args(out_of_cluster(&r.args, bed, &token))
            .env_clear()
            .envs(r.env.iter().map(|(k, v)| (k, on_state(v, volume))))
            .output()?;
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    Ok((
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

/// The log the page reads after `seen` commands, checked against what the page says of it.
fn check_log(seen: &[String], output: &str, stderr: &str, line: &str) {
    let jobs: Vec<&String> = seen.iter().filter(|s| s.starts_with("job ")).collect();
    let live = seen.contains(&"helm upgrade".to_owned());
    match jobs.last().map(|s| s.as_str()) {
        Some("job gc-sessions") => {
            let audit: Vec<Value> = output
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
                .collect();
            let at = |name: &str, kind: &str| {
                audit
                    .iter()
                    .position(|a| a["name"] == name && a["kind"] == kind)
                    .unwrap_or_else(|| panic!("{line}: no {kind} {name} in {output}"))
            };
            let of = |name: &str, kind: &str| &audit[at(name, kind)];
            // The fields the page reads.
            let gone = of(ALICE, "Service");
            for field in [
                "kind", "name", "session", "decision", "reason", "result", "dryRun", "archive",
            ] {
                assert!(gone.get(field).is_some(), "{line}: no {field} in {gone}");
            }
            assert_eq!(
                gone["reason"],
                format!("no session {ALICE} in the database"),
                "{gone}"
            );
            let carol = of("carol-firefox-0000000c-home", "PersistentVolumeClaim");
            assert_eq!(carol["reason"], "session carol-firefox-0000000c is failed");
            let frank = "frank-firefox-00000010";
            assert_eq!(
                of(frank, "Session")["reason"],
                format!("session {frank} is terminated")
            );
            // Every object of the sessions gone, v1's owned ones before their owner.
            let mut deletes: Vec<(&str, &str)> = audit
                .iter()
                .filter(|a| a["decision"] == "delete")
                .map(|a| (a["kind"].as_str().unwrap(), a["name"].as_str().unwrap()))
                .collect();
            deletes.sort_unstable();
            let mut want = vec![
                ("Deployment", "ss-frank-firefox"),
                ("Service", "ss-frank-firefox-svc"),
                ("Session", frank),
            ];
            for id in &GONE[..2] {
                let claim: &'static str = format!("{id}-home").leak();
                want.extend([
                    ("Deployment", *id),
                    ("PersistentVolumeClaim", claim),
                    ("Service", *id),
                    ("Session", *id),
                ]);
            }
            want.sort_unstable();
            assert_eq!(deletes, want, "{line}: {output}");
            assert!(
                at("ss-frank-firefox", "Deployment") < at(frank, "Session")
                    && at("ss-frank-firefox-svc", "Service") < at(frank, "Session"),
                "the owner last: {output}"
            );
            // The live ones kept, the unknown state said, the shared claim never judged.
            for id in [
                "bob-firefox-0000000b",
                "dave-chrome-0000000d",
                "greta-firefox-0000000f",
            ] {
                assert_eq!(of(id, "Deployment")["decision"], "kept", "{id}");
            }
            let erin = of("erin-firefox-0000000e", "Service");
            assert_eq!(erin["decision"], "kept");
            assert!(
                erin["reason"].as_str().unwrap().contains("neither live"),
                "{erin}"
            );
            assert!(
                stderr.contains("neither live nor gone: paused (1)"),
                "{line}: {stderr}"
            );
            let home = of("home-alice", "PersistentVolumeClaim");
            assert_eq!(home["decision"], "protected", "{home}");
            assert!(!audit.iter().any(|a| a["name"] == "home-frank"));
            for a in audit.iter().filter(|a| a["decision"] == "delete") {
                if live {
                    assert_eq!(a["result"], "deleted", "{a}");
                    assert!(a["archive"].is_string(), "{a}");
                } else {
                    assert_eq!(a["result"], "would delete", "{a}");
                    assert_eq!(a["dryRun"], true, "{a}");
                }
            }
        }
        Some("job gc-restore-dry-run") => {
            assert!(
                output.contains("would create") && !output.contains(" created"),
                "{output}"
            );
        }
        Some("job gc-restore") => {
            assert_eq!(output.matches("created").count(), 4, "{output}");
        }
        other => panic!("{line}: logs after {other:?}"),
    }
}

/// The reconciler's pass (`examples/streamspace`, the page's code): bob's row ended as
/// StreamSpace's reconciler ends it, then `CollectSessions`, the run followed; then, the row back,
/// `Restore`.
async fn reconcile(
    ns: &TestNamespace,
    db: &gc_testbed::TestDatabase,
    network: &Network,
    ca: &CertificateAuthority,
    volumes: &BTreeMap<&'static str, String>,
) -> Result {
    // The projected volume of StreamSpace's API Pods (the page's): a token for gc's audience,
    // the CA from the ConfigMap.
    let mount = tempfile::tempdir()?;
    let token = ns
        .service_account_token_for("streamspace-api", &["gc"])
        .await?;
    std::fs::write(mount.path().join("token"), token)?;
    std::fs::copy(&ca.cert, mount.path().join("ca.crt"))?;
    let reconciler = mount.path().join("streamspace");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&reconciler)
        .arg(".")
        .current_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/streamspace"
        ))
        .env("CGO_ENABLED", "0")
        .output()?;
    assert!(built.status.success(), "{}", said(&built));
    let password = database_parts(db.url())[4].clone();
    let pass = |args: &[&str]| -> Result<String> {
        let out = Command::new(&reconciler)
            .args(args)
            .args(["-gc-url", "https://gc-sessions.streamspace.svc:9443"])
            .arg("-token-file")
            .arg(mount.path().join("token"))
            .arg("-ca-bundle")
            .arg(mount.path().join("ca.crt"))
            // StreamSpace's API's own environment (its chart's values).
            .env("DB_HOST", DATABASE_ADDRESS)
            .env("DB_PORT", "5432")
            .env("DB_USER", "streamspace")
            .env("DB_PASSWORD", &password)
            .env("DB_NAME", "streamspace")
            .env("HTTPS_PROXY", &network.proxy)
            .output()?;
        let text = said(&out);
        eprintln!("$ streamspace {}\n{text}", args.join(" "));
        assert!(out.status.success(), "{text}");
        Ok(text)
    };
    fixtures::execute(
        db,
        "UPDATE sessions SET state = 'terminated', termination_reason = 'agent gone', \
         terminated_at = now() WHERE id = $1",
        BOB,
    )
    .await?;
    let collected = pass(&["-once"])?;
    assert_eq!(
        collected
            .matches(&format!("session {BOB}: delete "))
            .count(),
        4,
        "{collected}"
    );
    for kind in ["PersistentVolumeClaim", "Deployment", "Service", "Session"] {
        assert!(
            collected.contains(&format!("delete {kind} ")),
            "{kind}: {collected}"
        );
    }
    assert!(get::<Service>(ns, BOB).await?.is_none());
    let claim = format!("{BOB}-home");
    eventually("bob's claim gone", async || {
        let claim = get::<PersistentVolumeClaim>(ns, &claim).await?;
        Ok((claim.is_none(), claim.map(|c| c.metadata)))
    })
    .await?;
    assert_eq!(policy(ns, &volumes[BOB]).await?, "Retain");
    // Restored once the row is live again (while it is terminal the reconciler refuses).
    fixtures::execute(
        db,
        "UPDATE sessions SET state = 'running' WHERE id = $1",
        BOB,
    )
    .await?;
    let restored = pass(&["restore", BOB])?;
    assert_eq!(restored.matches(": created").count(), 4, "{restored}");
    assert!(get::<Service>(ns, BOB).await?.is_some());
    Ok(())
}

/// What the page's flow leaves alone: the live sessions, the one in a state StreamSpace does not
/// write yet, the per-user home claims.
async fn untouched(ns: &TestNamespace) -> Result {
    for id in [
        "dave-chrome-0000000d",
        "erin-firefox-0000000e",
        "greta-firefox-0000000f",
    ] {
        assert!(get::<Deployment>(ns, id).await?.is_some(), "{id}");
        assert!(get::<Service>(ns, id).await?.is_some(), "{id}");
        let claim = format!("{id}-home");
        assert!(get::<PersistentVolumeClaim>(ns, &claim).await?.is_some());
    }
    for claim in ["home-frank", "home-alice"] {
        assert!(get::<PersistentVolumeClaim>(ns, claim).await?.is_some());
    }
    Ok(())
}

/// gc's `serve` Deployment's container, run as the kubelet would run it: its rendered args and
/// environment, its `0.0.0.0` binds on the Pod's own address, its TLS Secret mounted, the same
/// state volume as the CronJob's.
struct Serve {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Serve {
    async fn start(
        bed: &'static TestBed,
        ns: &TestNamespace,
        volume: &Path,
        ca: &CertificateAuthority,
        later: Timestamp,
    ) -> Result<Self> {
        let deployment = ns.api::<Deployment>().get("gc-sessions").await?;
        let pod = deployment.spec.template.spec.expect("a Pod template");
        let r = rendered(ns, &pod).await?;
        let dir = tempfile::tempdir()?;
        let tls = dir.path().join("api-tls");
        std::fs::create_dir(&tls)?;
        let secret = ns.api::<Secret>().get("gc-api-tls").await?.data.unwrap();
        for key in ["tls.crt", "tls.key"] {
            std::fs::write(tls.join(key), &secret[key].0)?;
        }
        assert_eq!(ca.issued, 1, "the Certificate issued once");
        let token = token_file(ns, &r.account, &dir).await?;
        let args: Vec<String> = r
            .args
            .iter()
            .map(|a| {
                a.replace("0.0.0.0:", &format!("{GC_POD_ADDRESS}:"))
                    .replace("/etc/gc/api-tls", tls.to_str().unwrap())
            })
            .collect();
        let mut argv = out_of_cluster(&args, bed, &token);
        argv.push(format!("--now={later}"));
        let child = command()
            .args(&argv)
            .env_clear()
            .envs(r.env.iter().map(|(k, v)| (k, on_state(v, volume))))
            .env("HOSTNAME", "gc-sessions-7c9d8b6f5-q2w4e")
            .env("GC_ALLOW_FUTURE_NOW", "1")
            .stdout(std::fs::File::create(dir.path().join("stdout"))?)
            .stderr(std::fs::File::create(dir.path().join("stderr"))?)
            .spawn()?;
        let serve = Self { child, dir };
        // Ready, its first run (at start) ended: the API answers.
        let ready = eventually("serve's first run", async || {
            let metrics = http_get(&format!("{GC_POD_ADDRESS}:9898"), "/metrics");
            let done = metrics
                .as_deref()
                .is_some_and(|m| m.contains("streamspace_last_success_timestamp_seconds{"));
            Ok((done, ()))
        })
        .await;
        if let Err(e) = ready {
            let mut serve = serve;
            return Err(format!("{e}\n{}", serve.stop()?).into());
        }
        Ok(serve)
    }

    /// SIGTERM, as the kubelet stops a Pod: it exits 0; its stdout (the audit lines).
    fn stop(&mut self) -> Result<String> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        assert!(sent.success());
        let status = self.child.wait()?;
        let read = |name: &str| std::fs::read_to_string(self.dir.path().join(name));
        let (stdout, stderr) = (read("stdout")?, read("stderr")?);
        assert!(status.success(), "{status}\n{stderr}");
        eprintln!("serve:\n{stderr}");
        Ok(stdout)
    }
}

/// The CA of the operator's cert-manager Issuer, and what it issues: a Certificate's Secret as
/// cert-manager writes it (`tls.crt`, `tls.key`, `ca.crt`, for the Certificate's `dnsNames`).
struct CertificateAuthority {
    dir: PathBuf,
    cert: PathBuf,
    issued: usize,
}

impl CertificateAuthority {
    fn new(dir: &Path) -> Result<Self> {
        let dir = dir.join("ca");
        std::fs::create_dir(&dir)?;
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-subj",
                "/CN=streamspace-ca",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        )?;
        let cert = dir.join("ca.crt");
        Ok(Self {
            dir,
            cert,
            issued: 0,
        })
    }

    /// Issues every Certificate of the namespace (the page's one) into its Secret.
    async fn issue(&mut self, ns: &TestNamespace) -> Result {
        let resource = kube::discovery::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "cert-manager.io",
            "v1",
            "Certificate",
        ));
        let certificates: Api<DynamicObject> =
            Api::namespaced_with(ns.client().clone(), NS, &resource);
        let listed = certificates.list(&Default::default()).await?.items;
        let [certificate] = &listed[..] else {
            panic!("one Certificate: {listed:?}");
        };
        let spec = &certificate.data["spec"];
        let names: Vec<String> = spec["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| format!("DNS:{}", n.as_str().unwrap()))
            .collect();
        std::fs::write(
            self.dir.join("leaf.ext"),
            format!(
                "subjectAltName={}\nextendedKeyUsage=serverAuth\n",
                names.join(",")
            ),
        )?;
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "tls.key",
                "-out",
                "tls.csr",
                "-subj",
                "/CN=gc-sessions",
            ],
        )?;
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                "tls.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                "tls.crt",
                "-extfile",
                "leaf.ext",
            ],
        )?;
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f));
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": spec["secretName"], "namespace": NS},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": read("tls.crt")?, "tls.key": read("tls.key")?,
                           "ca.crt": read("ca.crt")?},
        }))?;
        ns.api::<Secret>()
            .create(&PostParams::default(), &secret)
            .await?;
        self.issued += 1;
        Ok(())
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Result {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()?;
    assert!(out.status.success(), "openssl {args:?}: {}", said(&out));
    Ok(())
}

/// A plain `GET path` of `address`: the body of a 200, else `None`.
fn http_get(address: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// An object of the namespace, if it is there.
async fn get<K>(ns: &TestNamespace, name: &str) -> Result<Option<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Ok(ns.api::<K>().get_opt(name).await?)
}

/// A volume's reclaim policy.
async fn policy(ns: &TestNamespace, volume: &str) -> Result<String> {
    let pv = Api::<PersistentVolume>::all(ns.client().clone())
        .get(volume)
        .await?;
    Ok(pv.spec.unwrap().persistent_volume_reclaim_policy.unwrap())
}

/// What a process printed, stdout then stderr.
fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A StreamSpace v1 session whose row is gone, its Service protected: gc deletes the Deployment
/// (archived) and the `Session`, and the `Session`'s delete leaves what it owns in place
/// (propagation `Orphan`): Kubernetes' garbage collector takes the ownerReference off the
/// protected Service instead of deleting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_sessions_delete_leaves_what_it_owns_to_gc() -> Result {
    let bed = TestBed::with_controllers().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("v1-owner").await? else {
        return Ok(());
    };
    bed.install_session_crd().await?;
    let ns = bed.namespace("v1-owner").await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let gone = Session {
        id: "frank-firefox-00000010",
        user: "frank",
        template: "firefox",
        state: None,
    };
    let live = Session {
        id: "greta-firefox-0000000f",
        user: "greta",
        template: "firefox",
        state: Some("running"),
    };
    fixtures::v1_session(&kubeconfig, ns.name(), &gone)?;
    fixtures::v1_session(&kubeconfig, ns.name(), &live)?;
    fixtures::rows(&db, &[gone, live]).await?;
    kubectl(
        &kubeconfig,
        &[
            "label",
            "-n",
            ns.name(),
            "service/ss-frank-firefox-svc",
            "gc.example.com/protect=true",
        ],
        "",
    )?;
    let dir = tempfile::tempdir()?;
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let out = command()
        .args([
            "run",
            "sessions",
            "-n",
            ns.name(),
            "--cluster-id",
            ns.name(),
        ])
        .args([
            "--kubeconfig",
            &kubeconfig,
            "--store",
            &store,
            "--archive-dir",
        ])
        .arg(dir.path().join("archives"))
        .args([
            "--database-url",
            db.url(),
            "--state-column",
            "state",
            "--grace",
            "0h",
        ])
        .args(["--dry-run=none", "--guard-ratio", "1"])
        .output()?;
    assert!(out.status.success(), "{}", said(&out));
    let audit = String::from_utf8(out.stdout)?;
    let result = |kind: &str, name: &str| {
        let line = audit
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["kind"] == kind && l["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}: {audit}"));
        (line["decision"].clone(), line["result"].clone())
    };
    assert_eq!(
        result("Deployment", "ss-frank-firefox"),
        (json!("delete"), json!("deleted"))
    );
    assert_eq!(
        result("Session", "frank-firefox-00000010"),
        (json!("delete"), json!("deleted"))
    );
    assert_eq!(
        result("Service", "ss-frank-firefox-svc").0,
        json!("protected")
    );
    // The garbage collector orphans the protected Service (its ownerReference gone), and leaves
    // it.
    eventually("the Service orphaned", async || {
        let service = get::<Service>(&ns, "ss-frank-firefox-svc").await?;
        let owners = service
            .as_ref()
            .map(|s| s.metadata.owner_references.clone());
        Ok((
            matches!(&owners, Some(None)) || matches!(&owners, Some(Some(o)) if o.is_empty()),
            owners,
        ))
    })
    .await?;
    assert!(get::<Deployment>(&ns, "ss-greta-firefox").await?.is_some());
    Ok(())
}
