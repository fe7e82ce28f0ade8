//! helm as a helm user runs it: `helm template` and `helm lint --strict` with the READMEs' values
//! and no flag the READMEs lack render with no cluster (no `--api-versions`: the volumes' admission
//! policy comes with them), and an install without the values the chart has no default for (the
//! image, the session database) or with the placeholder image of earlier charts fails at render,
//! naming each value and how to set it, before anything reaches the cluster.

use std::process::Output;

use super::{CHART, documents, helm, install, names, object};
use crate::common::{Result, namespace};

/// `helm template gc CHART --namespace streamspace` and `args`, nothing else.
fn render(args: &[&str]) -> Output {
    helm(
        &[
            &["template", "gc", CHART, "--namespace", "streamspace"][..],
            args,
        ]
        .concat(),
    )
}

/// What helm said on stderr of a render that must fail.
fn refused(args: &[&str]) -> String {
    let out = render(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} rendered");
    stderr
}

/// The project README's install (its section "Install in a cluster"), as `helm template` with
/// the same words: rendered with no cluster, the session collector with its volume rules and
/// their admission policy, the image and database as the README sets them.
#[test]
fn the_readmes_install_renders_with_helm_template_alone() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme.find("## Install in a cluster").expect("the section")..];
    let commands = super::docs::doc_commands(section);
    let install = commands
        .iter()
        .find(|c| c[..2] == ["helm", "install"])
        .expect("the README's helm install");
    assert_eq!(install[2..4], ["gc", "./chart"], "{install:?}");
    let flags: Vec<&str> = install[4..].iter().map(String::as_str).collect();
    assert!(
        !flags.iter().any(|f| f.starts_with("--api-versions")),
        "{flags:?}"
    );
    let out = helm(&[&["template", "gc", CHART][..], &flags].concat());
    assert!(
        out.status.success(),
        "helm template gc ./chart {}: {}",
        flags.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let objects = documents(&String::from_utf8(out.stdout).unwrap());
    let cron = object(&objects, "CronJob", "gc-sessions");
    let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], "gc-cli:0.1.0");
    let env = pod["containers"][0]["env"].as_array().unwrap();
    let host = env.iter().find(|e| e["name"] == "DB_HOST").unwrap();
    assert_eq!(host["value"], "streamspace-postgresql");
    object(&objects, "ClusterRole", "gc-streamspace-volumes");
    object(
        &objects,
        "ValidatingAdmissionPolicy",
        "gc-streamspace-volumes",
    );
    object(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "gc-streamspace-volumes",
    );
}

/// `helm lint --strict` with the chart README's values file (`# gc-values.yaml`): no warning,
/// and nothing that lint only logs (a template's `fail` or `required`).
#[test]
fn helm_lint_strict_passes_with_the_readmes_values() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/README.md"))
            .unwrap();
    let files = super::docs::page_files(&readme);
    let (_, values) = files
        .iter()
        .find(|(name, _)| name == "gc-values.yaml")
        .expect("the README's gc-values.yaml");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gc-values.yaml");
    std::fs::write(&file, values).unwrap();
    let file = file.to_str().unwrap();
    let out = helm(&["lint", "--strict", CHART, "-f", file]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !log.contains("Fail:") && !log.contains("Missing required"),
        "{}{log}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The same file renders with helm template alone.
    let out = render(&["-f", file]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The values with no default are refused at render, all that are missing at once, each by name
/// with an example of setting it: the image, and with the session collector the database's host
/// and password Secret. The placeholder image of earlier charts is refused by name.
#[test]
fn without_the_image_or_the_database_the_chart_says_what_to_set() {
    let image = "image.repository: the gc-cli image the collectors run";
    let image_how = [
        "docker build -t gc-cli:0.1.0 .",
        "kind load docker-image gc-cli:0.1.0",
        "--set image.repository=gc-cli",
    ];
    let host = "database.host: the host of the session database";
    let host_how = "--set database.host=streamspace-postgresql";
    let secret = "database.existingSecret: the Secret holding the session database's password";
    let secret_how = "--set database.existingSecret=";

    // `helm template gc ./chart`, as bare as it gets.
    let bare = refused(&[]);
    for said in [image, host, host_how, secret, secret_how, "3 values to set"] {
        assert!(bare.contains(said), "{said:?}: {bare}");
    }
    for said in image_how {
        assert!(bare.contains(said), "{said:?}: {bare}");
    }

    // The image set, the database not.
    let no_database = refused(&["--set", "image.repository=gc-cli"]);
    assert!(
        no_database.contains(host)
            && no_database.contains(host_how)
            && no_database.contains(secret)
            && no_database.contains(secret_how)
            && !no_database.contains("image.repository"),
        "{no_database}"
    );
    let no_secret = refused(&[
        "--set",
        "image.repository=gc-cli",
        "--set",
        "database.host=db",
    ]);
    assert!(
        no_secret.contains(secret) && !no_secret.contains(host),
        "{no_secret}"
    );

    // The database set, the image not, or the placeholder.
    let database = [
        "--set",
        "database.host=streamspace-postgresql",
        "--set",
        "database.existingSecret=streamspace-secrets",
    ];
    let no_image = refused(&database);
    assert!(
        no_image.contains(image) && !no_image.contains("database."),
        "{no_image}"
    );
    for placeholder in [
        &["--set", "image.repository=ghcr.io/example/gc-cli"][..],
        &[
            "--set",
            "image.repository=ghcr.io/example/gc-cli",
            "--set",
            "image.tag=0.1.0",
        ],
    ] {
        let said = refused(&[&database[..], placeholder].concat());
        assert!(
            said.contains("image.repository: ghcr.io/example/gc-cli is a placeholder")
                && image_how.iter().all(|how| said.contains(how)),
            "{placeholder:?}: {said}"
        );
    }

    // Without the session collector no database is asked for; the image still is.
    let pods = [
        "--set",
        "gc.enabled=false",
        "--set",
        "failedPods.enabled=true",
    ];
    let said = refused(&pods);
    assert!(
        said.contains(image) && !said.contains("database."),
        "{said}"
    );
    let out = render(&[&pods[..], &["--set", "image.repository=gc-cli"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing enabled renders nothing, and needs nothing.
    let out = render(&["--set", "gc.enabled=false"]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).trim().is_empty());
}

/// A bare `helm install` on a real API server fails the same way, and leaves nothing behind: no
/// release, no object of the chart.
#[tokio::test]
async fn a_bare_helm_install_fails_before_anything_is_installed() -> Result {
    let (bed, ns) = namespace("chart-bare").await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap();
    let out = helm(&[
        "install",
        "gc",
        CHART,
        "--namespace",
        ns.name(),
        "--kubeconfig",
        kubeconfig,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "installed");
    for value in [
        "image.repository",
        "database.host",
        "database.existingSecret",
    ] {
        assert!(stderr.contains(value), "{value}: {stderr}");
    }
    let list = helm(&[
        "list",
        "--namespace",
        ns.name(),
        "--all",
        "--short",
        "--kubeconfig",
        kubeconfig,
    ]);
    assert!(
        String::from_utf8_lossy(&list.stdout).trim().is_empty(),
        "{}",
        String::from_utf8_lossy(&list.stdout)
    );
    let crons: kube::Api<k8s_openapi::api::batch::v1::CronJob> = ns.api();
    assert!(crons.list(&Default::default()).await?.items.is_empty());

    // With the values, on a 1.30+ API server: installed with the volumes' admission policy.
    let out = install(&ns, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = helm(&[
        "get",
        "manifest",
        "gc",
        "--namespace",
        ns.name(),
        "--kubeconfig",
        kubeconfig,
    ]);
    let objects = documents(&String::from_utf8(manifest.stdout)?);
    let policy = format!("gc-{}-volumes", ns.name());
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "ValidatingAdmissionPolicy" && o["metadata"]["name"] == policy),
        "{}",
        names(&objects)
    );
    Ok(())
}
