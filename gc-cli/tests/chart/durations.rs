//! Duration values: each takes a duration as people write it (`24h`, `7d`, `90m`) or its older
//! bare integer (in the value's own unit, kept for one release); the collectors get the new
//! flags (`--grace`, `--volume-retention`, `--retention`, `--interval`, `--stall`), a string as
//! written and an integer with its unit made explicit; the Kubernetes fields and the alert
//! thresholds get their numbers; a value out of its range fails the install naming it. And the
//! rendered containers, run as the kubelet would run them, are accepted by the real binary and
//! honour the duration: an orphan is held until the grace period written as `2d` has passed.

use gc_testbed::TestBed;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::install::{
    Rendered, cron_pod, install_with, live_and_gone, on_state, out_of_cluster, rendered,
    run_rendered, session_database, token_file,
};
use super::{API_VERSIONS, CHART, container_args, documents, helm, object, pod_spec, template};
use crate::common::{Result, command, one_live_session, target};

/// The args of the rendered `kind` `name` starting with one of `flags`.
fn flags_of(objects: &[Value], kind: &str, name: &str, flags: &[&str]) -> Vec<String> {
    container_args(object(objects, kind, name))
        .into_iter()
        .filter(|a| flags.iter().any(|f| a.starts_with(&format!("{f}="))))
        .collect()
}

const SESSION_FLAGS: [&str; 2] = ["--grace", "--volume-retention"];

#[test]
fn durations_render_as_the_new_flags_from_either_form() {
    // The defaults: durations as people write them.
    let defaults = documents(&template(&["failedPods.enabled=true"]));
    assert_eq!(
        flags_of(&defaults, "CronJob", "gc-sessions", &SESSION_FLAGS),
        ["--grace=24h", "--volume-retention=7d"]
    );
    assert_eq!(
        flags_of(&defaults, "CronJob", "gc-failed-pods", &["--retention"]),
        ["--retention=1d"]
    );
    // Strings as written; the older integers with their unit made explicit.
    for (sets, sessions, pods) in [
        (
            &[
                "gc.gracePeriod=36h",
                "gc.retainVolumeDays=2w",
                "failedPods.retentionSeconds=90m",
            ][..],
            ["--grace=36h", "--volume-retention=2w"],
            "--retention=90m",
        ),
        (
            &[
                "gc.gracePeriod=1d12h",
                "gc.retainVolumeDays=0d",
                "failedPods.retentionSeconds=1h30m",
            ],
            ["--grace=1d12h", "--volume-retention=0d"],
            "--retention=1h30m",
        ),
        (
            &[
                "gc.gracePeriod=24",
                "gc.retainVolumeDays=7",
                "failedPods.retentionSeconds=86400",
            ],
            ["--grace=24h", "--volume-retention=7d"],
            "--retention=86400s",
        ),
    ] {
        let all: Vec<&str> = sets
            .iter()
            .copied()
            .chain(["failedPods.enabled=true"])
            .collect();
        let objects = documents(&template(&all));
        assert_eq!(
            flags_of(&objects, "CronJob", "gc-sessions", &SESSION_FLAGS),
            sessions,
            "{sets:?}"
        );
        assert_eq!(
            flags_of(&objects, "CronJob", "gc-failed-pods", &["--retention"]),
            [pods],
            "{sets:?}"
        );
    }
    // serve's interval and stall, the Pod's grace period in seconds; the prune Job's window.
    for (sets, flags, grace) in [
        (
            &["serve.enabled=true"][..],
            ["--interval=6h", "--stall=1h"],
            120,
        ),
        (
            &[
                "serve.enabled=true",
                "serve.intervalSeconds=90m",
                "serve.stallSeconds=0s",
                "serve.terminationGracePeriodSeconds=5m",
            ],
            ["--interval=90m", "--stall=0s"],
            300,
        ),
        (
            &[
                "serve.enabled=true",
                "serve.intervalSeconds=21600",
                "serve.stallSeconds=3600",
                "serve.terminationGracePeriodSeconds=120",
            ],
            ["--interval=21600s", "--stall=3600s"],
            120,
        ),
    ] {
        let objects = documents(&template(sets));
        let deployment = object(&objects, "Deployment", "gc-sessions");
        assert_eq!(
            flags_of(
                &objects,
                "Deployment",
                "gc-sessions",
                &["--interval", "--stall"]
            ),
            flags,
            "{sets:?}"
        );
        assert_eq!(
            pod_spec(deployment)["terminationGracePeriodSeconds"],
            grace,
            "{sets:?}"
        );
    }
    let pruned = documents(&template(&[
        "archives.prune.enabled=true",
        "gc.retainVolumeDays=3",
    ]));
    assert_eq!(
        flags_of(
            &pruned,
            "CronJob",
            "gc-sessions-prune",
            &["--volume-retention"]
        ),
        ["--volume-retention=3d"]
    );
    // The Jobs' deadlines, numbers of seconds as Kubernetes takes them.
    let deadlines = documents(&template(&[
        "startingDeadlineSeconds=15m",
        "activeDeadlineSeconds=1h",
    ]));
    let cron = object(&deadlines, "CronJob", "gc-sessions");
    assert_eq!(cron["spec"]["startingDeadlineSeconds"], 900);
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"],
        3600
    );
    // The alert thresholds, in hours, and their windows twice them.
    let rules = template(&[
        "prometheusRule.enabled=true",
        "prometheusRule.noSuccessHours.sessions=1d",
        "prometheusRule.noSuccessHours.pods=72",
    ]);
    for want in ["> 24 * 3600", "[48h]", "> 72 * 3600", "[144h]"] {
        assert!(rules.contains(want), "no {want}:\n{rules}");
    }
}

/// A duration out of its range, or not a whole number of the value's unit, fails the install
/// naming the value and showing one that would do.
#[test]
fn a_duration_out_of_range_fails_naming_the_value_and_an_example() {
    for (set, says) in [
        // Out of range: checked by the template (a schema cannot measure a string).
        (
            "serve.intervalSeconds=30s",
            "serve.intervalSeconds: 30s is outside 60s..604800s: give one such as 6h",
        ),
        (
            "gc.gracePeriod=400d",
            "gc.gracePeriod: 400d is outside 0h..8760h: give one such as 24h",
        ),
        (
            "failedPods.retentionSeconds=0s",
            "failedPods.retentionSeconds: 0s is outside 1s..31536000s: give one such as 1d",
        ),
        // Not whole hours or days: refused by the schema, with its example.
        ("gc.gracePeriod=90m", "such as 24h or 2d"),
        ("gc.retainVolumeDays=36h", "such as 7d or 2w"),
        ("failedPods.retentionSeconds=soon", "such as 1d or 12h"),
        // The older integers keep their ranges.
        ("gc.gracePeriod=8761", "maximum: got 8,761, want 8,760"),
    ] {
        let out = helm(
            &[
                &[
                    "template",
                    "gc",
                    CHART,
                    "--set",
                    set,
                    "--set",
                    "failedPods.enabled=true",
                    "--set",
                    "serve.enabled=true",
                ][..],
                &API_VERSIONS,
                &super::INSTALL_VALUES,
            ]
            .concat(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{set}");
        let name = set.split('=').next().unwrap();
        let path = format!("/{}", name.replace('.', "/"));
        assert!(
            stderr.contains(name) || stderr.contains(&path),
            "{set}: the value is not named: {stderr}"
        );
        assert!(stderr.contains(says), "{set}: no {says:?} in {stderr}");
    }
}

/// Installed with durations written as strings (the timeouts too), the session CronJob's
/// container, run as the kubelet would run it, is accepted by gc-cli and reads
/// `gc.gracePeriod=2d` as two days: the
/// orphan is held 47 hours on and deleted 49 hours on, the live session kept. The failed-Pod
/// CronJob's, with `failedPods.retentionSeconds=90m`, collects a Pod that finished long ago.
#[tokio::test]
async fn string_durations_run_as_rendered() -> Result {
    let bed = TestBed::shared().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("chart-durations").await? else {
        return Ok(());
    };
    let ns = bed.namespace("chart-durations").await?;
    let session_resource = bed.install_session_crd().await?;
    one_live_session(&db).await?;
    let mut sets = session_database(&ns, &db).await?;
    for set in [
        "gc.gracePeriod=2d",
        "gc.retainVolumeDays=2w",
        "failedPods.enabled=true",
        "failedPods.retentionSeconds=90m",
        "failedPods.dryRun=false",
        "failedPods.autoRemediate=true",
        "timeouts.store=45s",
        "timeouts.api=2m",
    ] {
        sets.push(("--set", set.to_owned()));
    }
    install_with(&ns, &sets);

    let cron_jobs = ns.api::<CronJob>();
    let sessions_job = cron_jobs.get("gc-sessions").await?;
    let Rendered { args, env, account } = rendered(&ns, &cron_pod(&sessions_job)).await?;
    assert!(
        args.contains(&"--grace=2d".to_owned())
            && args.contains(&"--volume-retention=2w".to_owned())
            && args.contains(&"--store-timeout=45s".to_owned())
            && args.contains(&"--api-timeout=2m".to_owned()),
        "{args:?}"
    );
    let dir = tempfile::tempdir()?;
    let token = token_file(&ns, &account, &dir).await?;
    let (sessions, services) = live_and_gone(&ns, &session_resource).await?;
    let hours_on = |h: i64| Timestamp::from_second(Timestamp::now().as_second() + h * 3600);

    let (out, log) = run_rendered(
        bed,
        (&args, &env),
        &token,
        dir.path(),
        hours_on(47)?,
        "gc-sessions-a",
    )?;
    assert!(out.status.success(), "{log}");
    assert!(sessions.get_opt("gone-1").await?.is_some(), "held: {log}");
    assert!(services.get_opt("gone-1").await?.is_some(), "held: {log}");
    let (out, log) = run_rendered(
        bed,
        (&args, &env),
        &token,
        dir.path(),
        hours_on(49)?,
        "gc-sessions-b",
    )?;
    assert!(out.status.success(), "{log}");
    assert!(sessions.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(services.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(sessions.get_opt("live-1").await?.is_some(), "{log}");

    let pods_job = cron_jobs.get("gc-failed-pods").await?;
    let Rendered { args, env, account } = rendered(&ns, &cron_pod(&pods_job)).await?;
    assert!(
        args.contains(&"--retention=90m".to_owned())
            && args.contains(&"--store-timeout=45s".to_owned()),
        "{args:?}"
    );
    target(&ns, "due").await?;
    let dir = tempfile::tempdir()?;
    let token = token_file(&ns, &account, &dir).await?;
    // As run_rendered runs it, but at the real time: `run pods` plans for now only.
    let argv = out_of_cluster(&args, bed, &token);
    let out = command()
        .args(&argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, on_state(v, dir.path()))))
        .env("HOSTNAME", "gc-failed-pods-a")
        .output()?;
    let log = format!(
        "{argv:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    assert!(ns.api::<Pod>().get_opt("due").await?.is_none(), "{log}");
    Ok(())
}
