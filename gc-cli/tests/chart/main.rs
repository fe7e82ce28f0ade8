//! The Helm chart with the real `helm` and the real API server: lint, templates for several
//! values, an install the API server accepts, its ServiceAccount proven to do exactly what the
//! collectors need there and nothing else, a default install's session CronJob and a `serve`
//! install's Deployment run exactly as rendered, the PersistentVolume writes of its accounts held
//! to gc's own volumes and fields by its admission policies, the README's and NOTES' commands
//! naming only objects the chart renders, and `helm template` and `helm lint` with no cluster.

use std::process::{Command, Output};

use gc_testbed::{TestBed, TestNamespace};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

#[path = "../common/mod.rs"]
mod common;

mod api;
mod docs;
mod durations;
mod install;
mod offline;
mod privilege;
mod prune;
mod rbac;
mod restore;
mod schema;
mod serve;
mod streamspace;
mod templates;
mod volumes;

use common::Result;

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart");

/// The values every install sets and the chart has no default for (`tests/chart/values.yaml`:
/// the image, the session database), as `--values`, before a test's own.
const INSTALL_VALUES: [&str; 2] = [
    "--values",
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/chart/values.yaml"),
];

fn helm(args: &[&str]) -> Output {
    Command::new(gc_testbed::tool("helm").unwrap())
        .args(args)
        .output()
        .unwrap()
}

/// `helm install gc CHART` into `ns` of the test bed, with [`INSTALL_VALUES`] and `flags`.
fn install(ns: &TestNamespace, flags: &[&str]) -> Output {
    let kubeconfig = ns.bed().kubeconfig_path().to_str().unwrap();
    let head = ["install", "gc", CHART, "--namespace", ns.name()];
    helm(
        &[
            &head[..],
            &["--kubeconfig", kubeconfig],
            &INSTALL_VALUES,
            flags,
        ]
        .concat(),
    )
}

fn template(sets: &[&str]) -> String {
    template_as("gc", "streamspace", sets)
}

/// What `helm template` is told the cluster serves, as `helm install` learns it from the test
/// bed's API server (Kubernetes 1.30+): the volumes' admission policy can be enforced, so the
/// chart renders the volume rules with it. (`helm template` alone knows no kind of any API group
/// and renders the same, for 1.30 or later: `offline.rs`; a cluster known to lack the policy is
/// refused unless `gc.volumes.unrestrictedAccess`: `volumes.rs`.)
const API_VERSIONS: [&str; 2] = [
    "--api-versions",
    "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
];

/// `helm template RELEASE CHART --namespace NAMESPACE --set ...` for a 1.30+ cluster
/// ([`API_VERSIONS`]) with [`INSTALL_VALUES`], which must succeed; a set `--values=FILE` is that
/// values file.
fn template_as(release: &str, namespace: &str, sets: &[&str]) -> String {
    let mut args = vec!["template", release, CHART, "--namespace", namespace];
    args.extend(API_VERSIONS);
    args.extend(INSTALL_VALUES);
    for s in sets {
        match s.strip_prefix("--values=") {
            Some(file) => args.extend(["--values", file]),
            None => args.extend(["--set", s]),
        }
    }
    let out = helm(&args);
    assert!(
        out.status.success(),
        "{release} {sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template RELEASE CHART --namespace NAMESPACE --set ...` as a page writes it: no cluster
/// (helm's own idea of one: no `--api-versions`, no `--kube-version`) and only the page's values
/// (a set `--values=FILE` is that values file). It must succeed.
fn template_as_written(release: &str, namespace: &str, sets: &[&str]) -> String {
    let mut args = vec!["template", release, CHART, "--namespace", namespace];
    for s in sets {
        match s.strip_prefix("--values=") {
            Some(file) => args.extend(["--values", file]),
            None => args.extend(["--set", s]),
        }
    }
    let out = helm(&args);
    assert!(
        out.status.success(),
        "helm {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template gc CHART --set ...` for a 1.30+ cluster with [`INSTALL_VALUES`], which must
/// fail: what helm said.
fn refused(sets: &[&str]) -> String {
    let mut args = vec!["template", "gc", CHART];
    args.extend(API_VERSIONS);
    args.extend(INSTALL_VALUES);
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = helm(&args);
    assert!(!out.status.success(), "{sets:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every object of a `helm template` output (or of a YAML file), as JSON.
fn documents(rendered: &str) -> Vec<Value> {
    common::yaml_documents(rendered)
}

/// The rendered object of `kind` named `name`.
fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {}", names(objects)))
}

/// `Kind/name` of every object, for messages.
fn names(objects: &[Value]) -> String {
    let names: Vec<String> = objects
        .iter()
        .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
        .collect();
    names.join(", ")
}

/// The Pod spec of a CronJob's or a Deployment's template.
fn pod_spec(workload: &Value) -> &Value {
    match workload["kind"].as_str() {
        Some("CronJob") => &workload["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        Some("Deployment") => &workload["spec"]["template"]["spec"],
        other => panic!("not a workload: {other:?}"),
    }
}

/// The one container of a workload's Pod template.
fn the_container(workload: &Value) -> &Value {
    let containers = pod_spec(workload)["containers"].as_array().unwrap();
    let [container] = &containers[..] else {
        panic!("one container: {containers:?}");
    };
    container
}

/// The one container's args.
fn container_args(workload: &Value) -> Vec<String> {
    serde_json::from_value(the_container(workload)["args"].clone()).unwrap()
}

async fn allowed(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    allowed_named(client, verb, group, resource, namespace, None).await
}

/// Asserts, for each `(verb, lease, allowed)`, whether `client` may `verb` the Lease named
/// `lease` in `namespace` (every namespace when `None`).
async fn assert_lease_access(
    client: &kube::Client,
    namespace: Option<&str>,
    cases: &[(&str, &str, bool)],
) -> Result {
    for &(verb, name, want) in cases {
        let group = "coordination.k8s.io";
        let got = allowed_named(client, verb, group, "leases", namespace, Some(name)).await?;
        assert_eq!(got, want, "{verb} lease {name} in {namespace:?}");
    }
    Ok(())
}

/// Whether `client` may `verb` the object `name` (any object when `None`) of `resource`: a
/// SelfSubjectAccessReview.
async fn allowed_named(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(Into::into),
                name: name.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The Prometheus Operator's ServiceMonitor CRD (`tests/data`), installed once on the test bed
/// and `Established`.
async fn install_service_monitor_crd(bed: &TestBed) -> Result {
    install_crd(bed, "servicemonitors").await
}

/// The Prometheus Operator's CRD of `plural` (`tests/data/monitoring.coreos.com_PLURAL.yaml`).
async fn install_crd(bed: &TestBed, plural: &str) -> Result {
    install_crd_of(bed, "monitoring.coreos.com", plural).await
}

/// The CRD of `plural` in `group` (`tests/data/GROUP_PLURAL.yaml`), installed once on the test
/// bed and `Established`.
async fn install_crd_of(bed: &TestBed, group: &str, plural: &str) -> Result {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let text = std::fs::read_to_string(format!(
        "{}/tests/data/{group}_{plural}.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))?;
    let [crd] = &documents(&text)[..] else {
        panic!("one CRD");
    };
    let crd: CustomResourceDefinition = serde_json::from_value(crd.clone())?;
    let crds: Api<CustomResourceDefinition> = Api::all(bed.client());
    match crds.create(&PostParams::default(), &crd).await {
        Err(e) if gc_testbed::status_code(&e) != Some(409) => return Err(e.into()),
        _ => {}
    }
    let name = format!("{plural}.{group}");
    for _ in 0..300 {
        let conditions = crds
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(format!("the CRD {name} is not Established").into())
}
