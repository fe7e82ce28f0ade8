//! The restore templates (`gc.restore.enabled`): two suspended CronJobs a restore's Job is made
//! from with `kubectl create job --from=cronjob/... SESSION`, the session read from the Job's
//! name, running `restore sessions` as the restore account in the collectors' Pod template; only
//! where that account may restore. `install.rs` runs the chart README's commands with them.

use super::{container_args, documents, object, pod_spec, template, template_as, the_container};

#[test]
fn restore_cron_jobs_read_the_session_from_the_jobs_name() {
    let names = |sets: &[&str]| -> Vec<String> {
        documents(&template(sets))
            .into_iter()
            .filter(|o| o["kind"] == "CronJob")
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
            .filter(|n| n.contains("-restore"))
            .collect()
    };
    assert!(names(&[]).is_empty());
    assert!(names(&["gc.restore.enabled=true", "gc.enabled=false"]).is_empty());
    // Only where the account may restore: the collectors' namespace.
    assert!(names(&["gc.restore.enabled=true", "gc.restore.namespaces={tenants}"]).is_empty());
    let on = [
        "gc.restore.enabled=true",
        "gc.restore.namespaces={tenants,streamspace}",
    ];
    assert_eq!(names(&on), ["gc-restore-dry-run", "gc-restore"]);

    let objects = documents(&template(&on));
    let collector = object(&objects, "CronJob", "gc-sessions");
    for (name, dry_run) in [("gc-restore-dry-run", true), ("gc-restore", false)] {
        let cron = object(&objects, "CronJob", name);
        assert_eq!(cron["spec"]["suspend"], true, "{name}");
        assert_eq!(cron["spec"]["schedule"], "0 0 30 2 *", "{name}");
        let pod = pod_spec(cron);
        assert_eq!(pod["serviceAccountName"], "gc-restore", "{name}");
        assert_eq!(pod["automountServiceAccountToken"], true, "{name}");
        let args = container_args(cron);
        let mut want = vec![
            "restore",
            "sessions",
            "--in-cluster",
            "--namespace=streamspace",
            "--cluster-id=gc-streamspace",
            "--session=$(GC_RESTORE_SESSION)",
            "--kinds=apps/v1/Deployment/deployments",
            "--kinds=/v1/Service/services",
            "--kinds=/v1/PersistentVolumeClaim/persistentvolumeclaims",
            "--kinds=stream.space/v1alpha1/Session/sessions",
            "--kinds=stream.streamspace.io/v1alpha1/Session/sessions",
        ];
        if dry_run {
            want.push("--dry-run=server");
        }
        assert_eq!(args, want, "{name}");
        let container = the_container(cron);
        let env = container["env"].as_array().unwrap();
        assert_eq!(env[0]["name"], "GC_RESTORE_SESSION");
        assert_eq!(
            env[0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.labels['batch.kubernetes.io/job-name']"
        );
        // The collector's store, archives, volume, image and security contexts.
        let collector_container = the_container(collector);
        let state: Vec<&serde_json::Value> = collector_container["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("GC_")))
            .collect();
        assert_eq!(env[1..].iter().collect::<Vec<_>>(), state, "{name}");
        for field in ["image", "securityContext", "volumeMounts", "resources"] {
            assert_eq!(
                container[field], collector_container[field],
                "{name}: {field}"
            );
        }
        for field in ["securityContext", "volumes"] {
            assert_eq!(pod[field], pod_spec(collector)[field], "{name}: {field}");
        }
        let labels = &cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["gc.example.com/collector"], "sessions-restore");
    }
    // The Events rule off: `--no-events`; the log's flags first.
    let quiet = documents(&template(&[
        "gc.restore.enabled=true",
        "events.enabled=false",
        "log.format=json",
    ]));
    let args = container_args(object(&quiet, "CronJob", "gc-restore"));
    assert_eq!(args[..3], ["--log-format=json", "restore", "sessions"]);
    assert!(args.contains(&"--no-events".to_owned()), "{args:?}");
    // A long release name: the names cut to a CronJob's 52 characters, the suffixes kept.
    let long = documents(&template_as(
        "a-release-name-long-enough-to-need-truncating-x",
        "streamspace",
        &["gc.restore.enabled=true"],
    ));
    let restore: Vec<&str> = long
        .iter()
        .filter(|o| o["kind"] == "CronJob")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .filter(|n| n.contains("-restore"))
        .collect();
    assert_eq!(restore.len(), 2, "{restore:?}");
    for name in restore {
        assert!(name.len() <= 52, "{name}");
        assert!(
            name.ends_with("-restore") || name.ends_with("-restore-dry-run"),
            "{name}"
        );
    }
}
