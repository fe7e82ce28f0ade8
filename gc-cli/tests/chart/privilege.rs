//! Least privilege, proven on the real API server: the installed chart's ServiceAccount, with
//! its own token, is refused every write (create, update, patch, delete; server-side dry runs)
//! on the system namespaces' Pods, Deployments, Services, PVCs, Leases and Events, and on Leases
//! that are not gc's (the API server's own among them), namespaced and cluster-wide; its own
//! Leases still work. Cluster-wide, the ClusterRole alone would allow some of those writes: the
//! chart's ValidatingAdmissionPolicy refuses them.

use std::time::Duration;

use gc_core::ports::{ClusterError, Lock};
use gc_testbed::{TestBed, TestNamespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::install;
use crate::common::Result;

/// The namespaces gc never writes in.
const SYSTEM: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The write verbs, each sent as a server-side dry run.
const WRITES: [&str; 4] = ["create", "update", "patch", "delete"];

/// A kind gc's ServiceAccount might write, and a valid new object of it.
struct Probe {
    resource: ApiResource,
    object: fn(name: &str, namespace: &str) -> Value,
}

fn probes() -> Vec<Probe> {
    vec![
        Probe {
            resource: ApiResource::erase::<Pod>(&()),
            object: |name, _| {
                json!({"metadata": {"name": name},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            },
        },
        Probe {
            resource: ApiResource::erase::<Deployment>(&()),
            object: |name, _| {
                json!({"metadata": {"name": name}, "spec": {
                    "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
            },
        },
        Probe {
            resource: ApiResource::erase::<Service>(&()),
            // Headless: no cluster IP is allocated.
            object: |name, _| {
                json!({"metadata": {"name": name},
                       "spec": {"clusterIP": "None", "ports": [{"port": 80}]}})
            },
        },
        Probe {
            resource: ApiResource::erase::<PersistentVolumeClaim>(&()),
            object: |name, _| {
                json!({"metadata": {"name": name}, "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}})
            },
        },
        Probe {
            resource: ApiResource::erase::<Lease>(&()),
            object: |name, _| {
                json!({"metadata": {"name": name},
                       "spec": {"holderIdentity": "probe", "leaseDurationSeconds": 30}})
            },
        },
        Probe {
            resource: ApiResource::erase::<Event>(&()),
            // The Event a refused run would post about its namespace.
            object: |name, namespace| {
                let record = gc_k8s::EventRecord {
                    regarding: gc_k8s::Regarding::namespace(namespace),
                    type_: gc_k8s::EventType::Warning,
                    reason: "RunRefused",
                    action: "Run",
                    note: "probe".into(),
                };
                let reporter = gc_k8s::Reporter::new("gc.example.com/gc-cli", "probe");
                let mut event =
                    serde_json::to_value(gc_k8s::event(&record, &reporter, Timestamp::now()))
                        .unwrap();
                event["metadata"] = json!({"name": name});
                event
            },
        },
    ]
}

/// `object` of `resource` as a `DynamicObject`.
fn dynamic(resource: &ApiResource, object: Value) -> DynamicObject {
    let mut object = object;
    object["apiVersion"] = resource.api_version.clone().into();
    object["kind"] = resource.kind.clone().into();
    serde_json::from_value(object).unwrap()
}

fn api(client: &Client, namespace: &str, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, resource)
}

/// Creates `name` of `probe`'s kind in `namespace` as the admin, unless it is there.
async fn ensure(admin: &Client, namespace: &str, probe: &Probe, name: &str) -> Result {
    let object = dynamic(&probe.resource, (probe.object)(name, namespace));
    match api(admin, namespace, &probe.resource)
        .create(&PostParams::default(), &object)
        .await
    {
        Err(e) if gc_testbed::status_code(&e) != Some(409) => Err(e.into()),
        _ => Ok(()),
    }
}

/// `verb` on `name` (a new object of that name for `create`) of `resource` in `namespace`,
/// sent by `client` as a server-side dry run: nothing is ever stored or removed.
async fn write(
    admin: &Client,
    client: &Client,
    verb: &str,
    probe: &Probe,
    namespace: &str,
    name: &str,
) -> std::result::Result<(), kube::Error> {
    let resource = &probe.resource;
    let theirs = api(client, namespace, resource);
    let post = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match verb {
        "create" => {
            let object = dynamic(resource, (probe.object)(name, namespace));
            theirs.create(&post, &object).await.map(drop)
        }
        "update" => {
            let mut current = api(admin, namespace, resource).get(name).await?;
            current
                .metadata
                .labels
                .get_or_insert_default()
                .insert("gc-probe".into(), "update".into());
            theirs.replace(name, &post, &current).await.map(drop)
        }
        "patch" => {
            let params = PatchParams {
                dry_run: true,
                ..PatchParams::default()
            };
            let patch = Patch::Merge(json!({"metadata": {"labels": {"gc-probe": "patch"}}}));
            theirs.patch(name, &params, &patch).await.map(drop)
        }
        "delete" => {
            let params = DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            };
            theirs.delete(name, &params).await.map(drop)
        }
        other => panic!("not a write verb: {other}"),
    }
}

/// Whether RBAC alone allows `client` `verb` on `resource` (named `name`, none for `create`)
/// in `namespace`: a SelfSubjectAccessReview, which admission does not take part in.
async fn rbac_allows(
    client: &Client,
    verb: &str,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<bool> {
    let name = (verb != "create").then_some(name);
    let (group, plural) = (&resource.group, &resource.plural);
    super::allowed_named(client, verb, group, plural, Some(namespace), name).await
}

/// What a write must meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Refused with 403: by RBAC, or (when RBAC allows it) by the admission policy.
    Refused,
    /// Accepted (a dry run).
    Accepted,
}

/// Sends `verb` and checks the answer against `want`; returns a line for each way it fails.
/// A refusal where RBAC allows the write must come from the admission policy.
#[allow(clippy::too_many_arguments)]
async fn check(
    admin: &Client,
    client: &Client,
    verb: &str,
    probe: &Probe,
    namespace: &str,
    name: &str,
    want: Expect,
    failures: &mut Vec<String>,
) -> Result {
    let what = format!(
        "{verb} {}/{} {name} in {namespace}",
        probe.resource.group, probe.resource.plural
    );
    let answer = write(admin, client, verb, probe, namespace, name).await;
    match (want, answer) {
        (Expect::Accepted, Ok(())) => {}
        (Expect::Accepted, Err(e)) => failures.push(format!("{what}: refused: {e}")),
        (Expect::Refused, Ok(())) => failures.push(format!("{what}: allowed")),
        (Expect::Refused, Err(kube::Error::Api(status))) if status.code == 403 => {
            if rbac_allows(client, verb, &probe.resource, namespace, name).await?
                && !status.message.contains("ValidatingAdmissionPolicy")
            {
                failures.push(format!(
                    "{what}: RBAC allows it, refused by something else: {}",
                    status.message
                ));
            }
        }
        (Expect::Refused, Err(e)) => failures.push(format!("{what}: not a 403: {e}")),
    }
    Ok(())
}

/// Every write verb on an object of every probed kind in every system namespace, and the
/// creation of new ones, by `client`: each must be refused. The objects (named `name`, and a
/// Lease `gc-pods`, gc's own name) are created by the admin first, so that updates and deletes
/// reach admission rather than stop at a 404. With `policy`, a refusal RBAC would allow must be
/// the admission policy's.
async fn system_namespaces_refuse(admin: &Client, client: &Client, name: &str) -> Result {
    let mut failures = Vec::new();
    let lease = ApiResource::erase::<Lease>(&());
    for namespace in SYSTEM {
        for probe in probes() {
            ensure(admin, namespace, &probe, name).await?;
            let mut names = vec![name.to_owned()];
            if probe.resource == lease {
                // gc's own Lease name: RBAC's resourceNames allow it cluster-wide.
                ensure(admin, namespace, &probe, gc_k8s::rbac::PODS_LEASE).await?;
                names.push(gc_k8s::rbac::PODS_LEASE.to_owned());
            }
            for target in &names {
                for verb in WRITES {
                    let target = if verb == "create" {
                        format!("{target}-new")
                    } else {
                        target.clone()
                    };
                    check(
                        admin,
                        client,
                        verb,
                        &probe,
                        namespace,
                        &target,
                        Expect::Refused,
                        &mut failures,
                    )
                    .await?;
                }
            }
        }
    }
    // The API server's own Lease (its identity heartbeat): never writable.
    let apiserver = apiserver_lease(admin).await?;
    let lease_probe = probes().remove(4);
    assert_eq!(lease_probe.resource, lease);
    for verb in ["update", "patch", "delete"] {
        check(
            admin,
            client,
            verb,
            &lease_probe,
            "kube-system",
            &apiserver,
            Expect::Refused,
            &mut failures,
        )
        .await?;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// The name of the kube-apiserver's identity Lease in `kube-system`, once it is there.
async fn apiserver_lease(admin: &Client) -> Result<String> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-system");
    for _ in 0..300 {
        let params = kube::api::ListParams::default()
            .labels("apiserver.kubernetes.io/identity=kube-apiserver");
        if let Some(name) = leases
            .list(&params)
            .await?
            .items
            .into_iter()
            .find_map(|l| l.metadata.name)
        {
            return Ok(name);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("no kube-apiserver identity Lease in kube-system".into())
}

/// In gc's namespace `ns`, a Lease that is not gc's (`someone-elses-lock`, the admin's): not
/// readable, updatable, patchable or deletable by `client`. A new Lease of another name:
/// created only without the admission policy (RBAC cannot limit `create` by name).
async fn others_leases_refuse(admin: &Client, client: &Client, ns: &str, policy: bool) -> Result {
    let mut failures = Vec::new();
    let lease = probes().remove(4);
    ensure(admin, ns, &lease, "someone-elses-lock").await?;
    for verb in ["update", "patch", "delete"] {
        check(
            admin,
            client,
            verb,
            &lease,
            ns,
            "someone-elses-lock",
            Expect::Refused,
            &mut failures,
        )
        .await?;
    }
    let create = if policy {
        Expect::Refused
    } else {
        Expect::Accepted
    };
    check(
        admin,
        client,
        "create",
        &lease,
        ns,
        "another-lock",
        create,
        &mut failures,
    )
    .await?;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let read = leases.get("someone-elses-lock").await.unwrap_err();
    assert_eq!(gc_testbed::status_code(&read), Some(403), "{read}");
    Ok(())
}

/// gc's own run locks, through gc-k8s's Lease lock as `client` in `ns`: taken (created), renewed,
/// released; another name's lock is refused (`get`, by name).
async fn own_leases_work(client: &Client, ns: &str, leases: &[&str]) -> Result {
    let cluster = gc_k8s::KubeCluster::new(client.clone());
    for name in leases {
        assert!(
            cluster.try_acquire(ns, name, "probe-run", 30).await?,
            "{name}"
        );
        assert!(
            cluster.try_acquire(ns, name, "probe-run", 30).await?,
            "{name}"
        );
        cluster.release(ns, name, "probe-run").await?;
    }
    let refused = cluster
        .try_acquire(ns, "someone-elses-lock", "probe-run", 30)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClusterError::Forbidden { verb, .. } if verb == "get"),
        "{refused:?}"
    );
    Ok(())
}

/// Waits until the admission policy of a fresh install refuses `client` a write RBAC allows
/// (creating a Lease of another name in its namespace `ns`, a dry run): policies take effect
/// asynchronously.
async fn policy_in_force(admin: &Client, client: &Client, ns: &str) -> Result {
    let lease = probes().remove(4);
    for _ in 0..300 {
        match write(admin, client, "create", &lease, ns, "another-lock").await {
            Err(kube::Error::Api(s))
                if s.code == 403 && s.message.contains("ValidatingAdmissionPolicy") =>
            {
                return Ok(());
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    Err("the admission policy is not in force after 30 s".into())
}

/// `helm install` into `ns` with `sets`, which must succeed.
fn installed(ns: &TestNamespace, sets: &[&str]) {
    let mut flags = Vec::new();
    for set in sets {
        flags.extend(["--set", set]);
    }
    let out = install(ns, &flags);
    assert!(
        out.status.success(),
        "{sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespaced install (both collectors): its account may write nothing in a system namespace
/// and no Lease but its own; without the admission policy it may create a Lease of another name
/// in its namespace, with `admissionPolicy.enabled` not even that. Its own locks work.
#[tokio::test]
async fn a_namespaced_install_writes_only_its_own_leases() -> Result {
    let bed = TestBed::shared().await?;
    let admin = bed.client();
    for policy in [false, true] {
        let ns = bed.namespace("least-ns").await?;
        let mut sets = vec!["failedPods.enabled=true"];
        if policy {
            sets.push("admissionPolicy.enabled=true");
        }
        installed(&ns, &sets);
        let client = ns.service_account_client("gc").await?;
        let probe = format!("probe-{}", ns.name());
        if policy {
            policy_in_force(&admin, &client, ns.name()).await?;
        }
        system_namespaces_refuse(&admin, &client, &probe).await?;
        others_leases_refuse(&admin, &client, ns.name(), policy).await?;
        own_leases_work(
            &client,
            ns.name(),
            &[gc_k8s::rbac::PODS_LEASE, gc_k8s::rbac::SESSIONS_LEASE],
        )
        .await?;
    }
    Ok(())
}

/// A cluster-wide install: its ClusterRole allows deleting Pods, Deployments, Services and PVCs,
/// patching Pods, creating Leases and Events and renewing a Lease named `gc-pods` in every
/// namespace, the system ones too; the admission policy refuses all of them there, and any
/// Lease but gc's own anywhere. Its own locks work in its namespace and in another.
#[tokio::test]
async fn a_cluster_wide_install_writes_nothing_in_system_namespaces() -> Result {
    let bed = TestBed::shared().await?;
    let admin = bed.client();
    let ns = bed.namespace("least-wide").await?;
    let elsewhere = bed.namespace("least-wide-other").await?;
    installed(
        &ns,
        &[
            "gc.enabled=false",
            "failedPods.enabled=true",
            "clusterWide.enabled=true",
        ],
    );
    let client = ns.service_account_client("gc").await?;
    let probe = format!("probe-{}", ns.name());
    policy_in_force(&admin, &client, ns.name()).await?;
    system_namespaces_refuse(&admin, &client, &probe).await?;
    for namespace in [ns.name(), elsewhere.name()] {
        others_leases_refuse(&admin, &client, namespace, true).await?;
        own_leases_work(&client, namespace, &[gc_k8s::rbac::PODS_LEASE]).await?;
    }
    // Only the enabled collector's Lease: the session collector's is not gc's here.
    let cluster = gc_k8s::KubeCluster::new(client.clone());
    let refused = cluster
        .try_acquire(ns.name(), gc_k8s::rbac::SESSIONS_LEASE, "probe-run", 30)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ClusterError::Forbidden { .. }),
        "{refused:?}"
    );
    // Even its own Lease name is refused in a system namespace: by the policy.
    let refused = cluster
        .try_acquire("kube-system", gc_k8s::rbac::PODS_LEASE, "probe-run", 30)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClusterError::Forbidden { message, .. }
            if message.contains("ValidatingAdmissionPolicy")),
        "{refused:?}"
    );
    Ok(())
}
