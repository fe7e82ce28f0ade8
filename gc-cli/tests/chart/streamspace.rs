//! `docs/streamspace.md` run as written, from nothing to an undone delete: its `kubectl` and
//! `helm` commands in order against the test bed (its namespace, database host, password and
//! session id those of the test; the test database's port, name and user added to the install),
//! each Job it makes run as the kubelet would run its Pod, each `kubectl logs` reading that run's
//! output. The dry run's audit lines say `would delete` the orphan and keep the live session; the
//! live run deletes it, archived; the restore's dry run would create it, the restore creates it.

use std::collections::BTreeMap;
use std::process::Command;

use gc_testbed::TestBed;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::install::{
    database_parts, live_and_gone, on_state, out_of_cluster, rendered, restore_job, run_rendered,
    token_file,
};
use super::{CHART, helm};
use crate::common::{Result, command, one_live_session};

#[tokio::test]
async fn the_streamspace_page_runs_as_written() -> Result {
    let bed = TestBed::shared().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("streamspace-page").await? else {
        return Ok(());
    };
    let ns = bed.namespace("streamspace-page").await?;
    let session_resource = bed.install_session_crd().await?;
    one_live_session(&db).await?;
    let (sessions, services) = live_and_gone(&ns, &session_resource).await?;
    let [host, port, name, user, password] = database_parts(db.url());

    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/streamspace.md"
    ))?;
    let page = page
        .replace("-n streamspace", &format!("-n {}", ns.name()))
        .replace(
            "--namespace streamspace",
            &format!("--namespace {}", ns.name()),
        )
        .replace("streamspace-postgresql", &host)
        .replace(
            "postgres-password=CHANGE-ME",
            &format!("postgres-password={password}"),
        )
        .replace("alice-firefox-0000000a", "gone-1");
    let commands = super::docs::doc_commands(&page);
    assert!(commands.len() > 10, "{commands:?}");

    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let run = |program: &str, words: &[String]| -> String {
        let tool = gc_testbed::tool(program).unwrap();
        let out = Command::new(tool)
            .args(words)
            .args(["--kubeconfig", &kubeconfig])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{program} {words:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The state volume of the collector and the restore: one folder for every run.
    let volume = tempfile::tempdir()?;
    let later = Timestamp::from_second(Timestamp::now().as_second() + 25 * 3600)?;
    let mut logs: BTreeMap<String, String> = BTreeMap::new();
    let mut seen = Vec::new();
    for words in &commands {
        let line = words.join(" ");
        if words[0] == "helm" {
            let mut args: Vec<String> = words[1..]
                .iter()
                .map(|w| {
                    if w == "./chart" {
                        CHART.to_owned()
                    } else {
                        w.clone()
                    }
                })
                .collect();
            if words[1] == "install" {
                // The test database's connection beyond the page's host and password.
                args.extend([
                    format!("--set=database.port={port}"),
                    format!("--set-string=database.name={name}"),
                    format!("--set-string=database.user={user}"),
                ]);
            }
            args.extend(["--kubeconfig".to_owned(), kubeconfig.clone()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = helm(&args);
            assert!(
                out.status.success(),
                "{line}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            seen.push(format!("helm {}", words[1]));
            continue;
        }
        assert_eq!(words[0], "kubectl", "{line}");
        let verb_at = words
            .iter()
            .position(|w| !w.starts_with('-') && w != "kubectl" && w != ns.name());
        let verb = words[verb_at.expect("a verb")].as_str();
        match verb {
            "create" if words.contains(&"job".to_owned()) => {
                run("kubectl", &words[1..]);
                let job_name = words.last().unwrap().clone();
                let from = words
                    .iter()
                    .find_map(|w| w.strip_prefix("--from=cronjob/"))
                    .expect("--from=cronjob/NAME");
                let job = ns.api::<Job>().get(&job_name).await?;
                let template = job.spec.expect("a Job spec").template;
                let pod = template.spec.expect("a Pod template");
                let dir = tempfile::tempdir()?;
                let output = if from == "gc-sessions" {
                    let r = rendered(&ns, &pod).await?;
                    let token = token_file(&ns, &r.account, &dir).await?;
                    let host = format!("{job_name}-{}", logs.len());
                    let (out, log) =
                        run_rendered(bed, (&r.args, &r.env), &token, volume.path(), later, &host)?;
                    assert!(out.status.success(), "{line}: {log}");
                    String::from_utf8_lossy(&out.stdout).into_owned()
                } else {
                    let r = restore_job(&ns, template.metadata.unwrap_or_default(), &pod).await?;
                    let token = token_file(&ns, &r.account, &dir).await?;
                    let out = command()
                        .args(out_of_cluster(&r.args, bed, &token))
                        .env_clear()
                        .envs(r.env.iter().map(|(k, v)| (k, on_state(v, volume.path()))))
                        .output()?;
                    let log = String::from_utf8_lossy(&out.stderr);
                    assert!(out.status.success(), "{line}: {log}");
                    String::from_utf8_lossy(&out.stdout).into_owned()
                };
                seen.push(format!("job {from}"));
                logs.insert(job_name, output);
            }
            // The Job's Pod's log: what its run printed.
            "logs" => {
                let job = words
                    .iter()
                    .find_map(|w| w.strip_prefix("job/"))
                    .expect("logs job/NAME");
                let output = logs
                    .get(job)
                    .unwrap_or_else(|| panic!("{line}: no run of {job}"));
                check_log(&seen, output, &line);
            }
            _ => {
                let stdout = run("kubectl", &words[1..]);
                if line.contains("reason=Restored") {
                    assert!(stdout.contains("Restored"), "{line}: {stdout}");
                }
            }
        }
        // Before the restore, the session goes back in the table (the page says so first).
        if line.contains("create job --from=cronjob/gc-restore ") {
            assert!(
                sessions.get_opt("gone-1").await?.is_some(),
                "{line}: restored"
            );
            assert!(
                services.get_opt("gone-1").await?.is_some(),
                "{line}: restored"
            );
        }
        if line.contains("create job --from=cronjob/gc-restore-dry-run") {
            assert!(
                sessions.get_opt("gone-1").await?.is_none(),
                "{line}: deleted before"
            );
            let pool = db.pool().await?;
            sqlx::query("INSERT INTO sessions VALUES ('gone-1', 'running')")
                .execute(&pool)
                .await?;
            pool.close().await;
        }
    }
    assert_eq!(
        seen.iter()
            .filter(|s| s.starts_with("job "))
            .collect::<Vec<_>>(),
        [
            "job gc-sessions",
            "job gc-sessions",
            "job gc-restore-dry-run",
            "job gc-restore"
        ],
        "the page's Jobs: a dry run, a live run, a restore's dry run, a restore"
    );
    assert!(sessions.get_opt("live-1").await?.is_some());
    Ok(())
}

/// The log the page reads after `seen` commands, checked against what the page says of it.
fn check_log(seen: &[String], output: &str, line: &str) {
    let jobs: Vec<&String> = seen.iter().filter(|s| s.starts_with("job ")).collect();
    let live = seen.contains(&"helm upgrade".to_owned());
    match jobs.last().map(|s| s.as_str()) {
        Some("job gc-sessions") => {
            let audit: Vec<Value> = output
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
                .collect();
            let of = |id: &str, kind: &str| {
                audit
                    .iter()
                    .find(|a| a["session"] == id && a["kind"] == kind)
                    .unwrap_or_else(|| panic!("{line}: no {kind} of {id} in {output}"))
            };
            // The fields the page reads.
            let gone = of("gone-1", "Service");
            for field in [
                "kind", "name", "session", "decision", "reason", "result", "dryRun", "archive",
            ] {
                assert!(gone.get(field).is_some(), "{line}: no {field} in {gone}");
            }
            assert_eq!(gone["decision"], "delete", "{gone}");
            assert_eq!(
                gone["reason"], "no session gone-1 in the database",
                "{gone}"
            );
            assert_eq!(of("live-1", "Service")["decision"], "kept");
            if live {
                assert_eq!(gone["result"], "deleted", "{gone}");
                assert!(gone["archive"].is_string(), "{gone}");
            } else {
                assert_eq!(gone["result"], "would delete", "{gone}");
                assert_eq!(gone["dryRun"], true, "{gone}");
            }
        }
        Some("job gc-restore-dry-run") => {
            assert!(
                output.contains("would create") && !output.contains(" created"),
                "{output}"
            );
        }
        Some("job gc-restore") => {
            assert!(output.contains("created"), "{output}");
        }
        other => panic!("{line}: logs after {other:?}"),
    }
}
