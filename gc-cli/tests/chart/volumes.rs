//! PersistentVolumes are cluster-scoped, so the volumes' ClusterRoles grant `patch` on every one:
//! the chart renders them whenever the session collector (and the restore account) is, and
//! always with the ValidatingAdmissionPolicies that limit each account to gc's own volumes and to
//! the fields gc writes, or refuses to render them on a cluster that cannot enforce those
//! (unless `gc.volumes.unrestrictedAccess`). Proven on the real API server as the installed
//! chart's ServiceAccounts, with the JSON patches gc sends (gc-core `sessions::volumes`): what gc
//! does passes, anything else is refused by the policy.

use std::time::Duration;

use gc_core::ports::{ClusterError, Volumes};
use gc_core::sessions::volumes::{RETAINED_ANNOTATION, RETAINED_LABEL, Retained};
use gc_testbed::TestNamespace;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{API_VERSIONS, CHART, documents, helm, install, names, template};
use crate::common::Result;

/// The cluster id of the volumes' label that the chart installed as `gc` in `ns` gives its
/// session collector (`gc.clusterId` empty: the install's own, `<fullname>-<namespace>`).
fn cluster_id(ns: &TestNamespace) -> String {
    let id = format!("gc-{}", ns.name());
    assert!(id.len() <= 40, "{id}: the chart would cut it");
    id
}

/// The rendered objects of `kind` whose name ends with `-volumes`.
fn volume_objects<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-volumes"))
        })
        .collect()
}

/// `(name, username)` of each volume policy, with its binding checked: same name, `Deny`.
fn volume_policies(objects: &[Value]) -> Vec<(String, String)> {
    let policies = volume_objects(objects, "ValidatingAdmissionPolicy");
    let bindings = volume_objects(objects, "ValidatingAdmissionPolicyBinding");
    assert_eq!(policies.len(), bindings.len(), "{}", names(objects));
    let mut found = Vec::new();
    for (policy, binding) in policies.iter().zip(&bindings) {
        let name = policy["metadata"]["name"].as_str().unwrap().to_owned();
        assert_eq!(binding["metadata"]["name"], name);
        assert_eq!(binding["spec"]["policyName"], name);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail", "{name}");
        assert_eq!(
            spec["matchConstraints"]["resourceRules"],
            json!([{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["persistentvolumes"], "operations": ["UPDATE"]}]),
            "{name}"
        );
        let [condition] = &spec["matchConditions"].as_array().unwrap()[..] else {
            panic!("{name}: one match condition");
        };
        let user = condition["expression"]
            .as_str()
            .unwrap()
            .strip_prefix("request.userInfo.username == '")
            .and_then(|u| u.strip_suffix('\''))
            .unwrap_or_else(|| panic!("{name}: {condition}"));
        for validation in spec["validations"].as_array().unwrap() {
            assert_eq!(validation["reason"], "Forbidden", "{name}");
            assert!(
                validation["message"].as_str().is_some_and(|m| m.len() > 40),
                "{name}: a message that says what and why: {validation}"
            );
        }
        found.push((name, user.to_owned()));
    }
    found
}

/// The first validation expression of the policy `name`: which volumes its account may change.
fn scope(objects: &[Value], name: &str) -> String {
    let policy = super::object(objects, "ValidatingAdmissionPolicy", name);
    policy["spec"]["validations"][0]["expression"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The volumes' ClusterRoles are rendered whenever the collector is (retention 0 too: a run then
/// gives back what earlier runs kept), the restore account's whenever restore is; each with its
/// admission policy on a 1.30+ cluster: judging only its account, failing closed, denying, on
/// UPDATE of PersistentVolumes; the collector's scope is the namespaces it collects (the system
/// ones and the excluded left out, cluster-wide), the restore account's those it restores into.
#[test]
fn the_volume_rules_come_with_their_admission_policy() {
    let collector = (
        "gc-streamspace-volumes",
        "system:serviceaccount:streamspace:gc",
    );
    let restore = (
        "gc-streamspace-restore-volumes",
        "system:serviceaccount:streamspace:gc-restore",
    );
    for (sets, want) in [
        (&[][..], &[collector][..]),
        (&["gc.retainVolumeDays=0"], &[collector]),
        (&["gc.restore.enabled=true"], &[collector, restore]),
        (
            &["gc.restore.enabled=true", "gc.retainVolumeDays=0"],
            &[collector, restore],
        ),
        (&["clusterWide.enabled=true"], &[collector]),
        (&["gc.enabled=false", "failedPods.enabled=true"], &[]),
        (&["gc.volumes.unrestrictedAccess=true"], &[]),
        (
            &[
                "gc.volumes.unrestrictedAccess=true",
                "gc.restore.enabled=true",
            ],
            &[],
        ),
    ] {
        let objects = documents(&template(sets));
        let got = volume_policies(&objects);
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, u)| ((*n).to_owned(), (*u).to_owned()))
            .collect();
        assert_eq!(got, want, "{sets:?}");
        // The ClusterRoles whatever the retention, whether the policy comes or not.
        let roles = volume_objects(&objects, "ClusterRole").len();
        let restoring = sets.contains(&"gc.restore.enabled=true");
        let collecting = !sets.contains(&"gc.enabled=false");
        let expected = usize::from(collecting) + usize::from(restoring);
        assert_eq!(roles, expected, "{sets:?}: {}", names(&objects));
    }
    let existing = documents(&template(&[
        "serviceAccount.create=false",
        "serviceAccount.name=existing",
    ]));
    assert_eq!(
        volume_policies(&existing)[0].1,
        "system:serviceaccount:streamspace:existing"
    );

    // Which volumes each account may change.
    let objects = documents(&template(&["gc.restore.enabled=true"]));
    assert_eq!(
        scope(&objects, collector.0),
        "variables.kept || (variables.claimNamespace in ['streamspace'])"
    );
    assert_eq!(
        scope(&objects, restore.0),
        "variables.kept && variables.claimNamespace in ['streamspace']"
    );
    let objects = documents(&template(&[
        "gc.restore.enabled=true",
        "gc.restore.namespaces={team-a,team-b}",
    ]));
    assert_eq!(
        scope(&objects, restore.0),
        "variables.kept && variables.claimNamespace in ['team-a', 'team-b']"
    );
    let objects = documents(&template(&[
        "clusterWide.enabled=true",
        "clusterWide.excludeNamespaces={batch}",
    ]));
    assert_eq!(
        scope(&objects, collector.0),
        "variables.kept || (variables.claimNamespace != '' && !(variables.claimNamespace in \
         ['kube-system', 'kube-public', 'kube-node-lease', 'batch']))"
    );
}

/// A cluster that cannot enforce the policy gets no volume rules: the chart refuses, naming the
/// value that accepts the wider access; with that value it renders the ClusterRoles alone.
/// Without the session collector there is nothing to refuse. Such a cluster is one whose kinds
/// helm knows (`install`, `upgrade`: here as `--api-versions`) with `admissionregistration.k8s.io/v1`
/// but no `ValidatingAdmissionPolicy`, or one of Kubernetes 1.21 to 1.29. `helm template` alone
/// (no cluster: this helm says v1.20.0) renders for 1.30 or later, the policy included.
#[test]
fn without_admission_policies_the_chart_refuses_the_volume_rules_unless_told() {
    let render = |extra: &[&str], sets: &[&str]| {
        let mut args = vec!["template", "gc", CHART, "--namespace", "streamspace"];
        args.extend(super::INSTALL_VALUES);
        args.extend(extra);
        for set in sets {
            args.extend(["--set", set]);
        }
        helm(&args)
    };
    // What `helm install` knows of a 1.29 cluster, or of one with the API turned off.
    let kinds_without_policy = [
        "--api-versions",
        "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
    ];
    let old = ["--kube-version", "1.29.0"];
    let both = [&old[..], &kinds_without_policy[..]].concat();
    for (extra, sets) in [
        (&old[..], &[][..]),
        (&kinds_without_policy, &[]),
        (&both[..], &[]),
        (&old, &["gc.retainVolumeDays=0"]),
        (&kinds_without_policy, &["gc.restore.enabled=true"]),
        (&old, &["clusterWide.enabled=true"]),
    ] {
        let out = render(extra, sets);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} {sets:?}");
        assert!(
            stderr.contains("gc.volumes.unrestrictedAccess")
                && stderr.contains("ValidatingAdmissionPolicy (Kubernetes 1.30+)")
                && stderr.contains("Set gc.volumes.unrestrictedAccess=true"),
            "{extra:?} {sets:?}: {stderr}"
        );
    }
    // No cluster, or one that serves the policy: rendered with it.
    let serving = [&kinds_without_policy[..], &API_VERSIONS[..]].concat();
    for extra in [&[][..], &["--kube-version", "1.30.0"], &serving[..]] {
        let out = render(extra, &[]);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let objects = documents(&String::from_utf8(out.stdout).unwrap());
        assert_eq!(volume_policies(&objects).len(), 1, "{extra:?}");
    }
    for sets in [
        &["gc.volumes.unrestrictedAccess=true"][..],
        &[
            "gc.volumes.unrestrictedAccess=true",
            "gc.restore.enabled=true",
        ],
        &["gc.enabled=false", "failedPods.enabled=true"],
    ] {
        let out = render(&old, sets);
        assert!(
            out.status.success(),
            "{sets:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let objects = documents(&String::from_utf8(out.stdout).unwrap());
        assert!(volume_policies(&objects).is_empty(), "{sets:?}");
        let roles = volume_objects(&objects, "ClusterRole").len();
        let expected = if sets.contains(&"gc.enabled=false") {
            0
        } else if sets.contains(&"gc.restore.enabled=true") {
            2
        } else {
            1
        };
        assert_eq!(roles, expected, "{sets:?}");
    }
    let out = render(&old, &["gc.volumes.unrestrictedAccess=maybe"]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("unrestrictedAccess"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// --- On the real API server ---------------------------------------------------------------

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

/// What an admin's volume looks like: its claim (namespace, name, uid), reclaim policy, phase,
/// labels and annotations.
struct Fixture<'a> {
    claim: (&'a str, &'a str, &'a str),
    policy: &'a str,
    phase: &'a str,
    labels: Value,
    annotations: Value,
}

/// Creates the volume `name` as `admin` (a static volume, as a provisioner's would be), its
/// status phase set as the binder would have (no binder runs here); the volume as stored.
async fn volume(admin: &Client, name: &str, f: Fixture<'_>) -> Result<Value> {
    let (namespace, claim, uid) = f.claim;
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": f.labels, "annotations": f.annotations},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "", "hostPath": {"path": format!("/tmp/{name}")},
            "persistentVolumeReclaimPolicy": f.policy,
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": namespace, "name": claim, "uid": uid},
        },
    }))?;
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    volumes.create(&PostParams::default(), &pv).await?;
    set_phase(admin, name, f.phase).await
}

/// Sets the status phase of the volume `name` as the binder would; the volume as stored.
async fn set_phase(admin: &Client, name: &str, phase: &str) -> Result<Value> {
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    let status = Patch::Merge(json!({"status": {"phase": phase}}));
    let pv = volumes
        .patch_status(name, &PatchParams::default(), &status)
        .await?;
    Ok(serde_json::to_value(pv)?)
}

/// The annotation gc writes: the record of the claim a volume was kept for.
fn record(namespace: &str, claim: &str, claim_uid: &str, restored_to: Option<&str>) -> String {
    serde_json::to_string(&Retained {
        policy: "Delete".into(),
        namespace: namespace.into(),
        claim: claim.into(),
        claim_uid: claim_uid.into(),
        session: Some("s-1".into()),
        at: 1_800_000_000.0,
        restored_to: restored_to.map(str::to_owned),
        days: Some(7),
        gone_at: None,
    })
    .unwrap()
}

/// `key` as a JSON pointer's token.
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The `test` ops that fence each of gc's volume writes on the volume as read
/// (`sessions::volumes::fence`): uid, resourceVersion, the claim's uid, the phase.
fn fence(volume: &Value) -> Vec<Value> {
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/uid", "value": volume["metadata"]["uid"]}),
        json!({"op": "test", "path": "/metadata/resourceVersion",
               "value": volume["metadata"]["resourceVersion"]}),
    ];
    if volume["spec"]["claimRef"]["uid"].is_string() {
        ops.push(json!({"op": "test", "path": "/spec/claimRef/uid",
                        "value": volume["spec"]["claimRef"]["uid"]}));
    }
    if volume["status"]["phase"].is_string() {
        ops.push(json!({"op": "test", "path": "/status/phase",
                        "value": volume["status"]["phase"]}));
    }
    ops
}

/// `fence` and then `ops`, as one JSON patch.
fn fenced(volume: &Value, ops: Vec<Value>) -> Value {
    let mut patch = fence(volume);
    patch.extend(ops);
    Value::Array(patch)
}

/// `/metadata/{field}/{key}` added: the whole map when the volume has none yet
/// (`sessions::volumes::add_to`).
fn add_to(volume: &Value, field: &str, key: &str, value: &str) -> Value {
    if volume["metadata"][field].is_object() {
        json!({"op": "add", "path": format!("/metadata/{field}/{}", token(key)), "value": value})
    } else {
        json!({"op": "add", "path": format!("/metadata/{field}"), "value": {key: value}})
    }
}

/// The collector keeping a deleted claim's volume (`retain`, `Action::Keep`): `Delete` to
/// `Retain`, gc's label and record.
fn keep(volume: &Value, id: &str, record: &str) -> Value {
    fenced(
        volume,
        vec![
            json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Delete"}),
            json!({"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
            add_to(volume, "labels", RETAINED_LABEL, id),
            add_to(volume, "annotations", RETAINED_ANNOTATION, record),
        ],
    )
}

/// The collector keeping a kept volume again for a claim deleted again (`retain`,
/// `Action::Renew`): its record rewritten, fenced on gc's label as it is.
fn renew(volume: &Value, record: &str) -> Value {
    fenced(
        volume,
        vec![
            json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
            json!({"op": "test", "path": format!("/metadata/labels/{}", token(RETAINED_LABEL)),
                   "value": volume["metadata"]["labels"][RETAINED_LABEL]}),
            json!({"op": "replace",
                   "path": format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION)),
                   "value": record}),
        ],
    )
}

/// A kept volume given back its policy, gc's label and record removed (`give_back`: the
/// collector's review, or the restore account's `claimed_again`), fenced on gc's label as it is.
fn give_back(volume: &Value) -> Value {
    let label = format!("/metadata/labels/{}", token(RETAINED_LABEL));
    fenced(
        volume,
        vec![
            json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
            json!({"op": "test", "path": label,
                   "value": volume["metadata"]["labels"][RETAINED_LABEL]}),
            json!({"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Delete"}),
            json!({"op": "remove", "path": label}),
            json!({"op": "remove",
                   "path": format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION))}),
        ],
    )
}

/// The restore account moving a kept volume to the claim `namespace`/`claim` (uid `uid`)
/// (`rebind`): its claimRef replaced whole, its record rewritten.
fn rebind(volume: &Value, namespace: &str, claim: &str, uid: &str, record: &str) -> Value {
    fenced(
        volume,
        vec![
            json!({"op": "replace", "path": "/spec/claimRef", "value": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": namespace, "name": claim, "uid": uid}}),
            json!({"op": "replace",
                   "path": format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION)),
                   "value": record}),
        ],
    )
}

/// Sends `patch` to the volume `name` as gc does (gc-k8s's `patch_volume`: a JSON patch).
async fn send(
    cluster: &gc_k8s::KubeCluster,
    name: &str,
    patch: &Value,
    dry_run: bool,
) -> std::result::Result<Value, ClusterError> {
    let text = cluster
        .patch_volume(name, patch.to_string().as_bytes(), dry_run)
        .await?;
    Ok(serde_json::from_slice(&text).unwrap())
}

/// What the checks of one account found wrong.
struct Verdicts<'a> {
    cluster: gc_k8s::KubeCluster,
    /// The admission policy that must be the one refusing.
    policy: &'a str,
    failures: Vec<String>,
}

impl Verdicts<'_> {
    /// `patch` on `name` must pass; it is written (not a dry run): the volume as stored after.
    /// What follows reads it, so a refusal ends the test, with the refusals found so far.
    async fn passes(&mut self, what: &str, name: &str, patch: &Value) -> Value {
        match send(&self.cluster, name, patch, false).await {
            Ok(stored) => stored,
            Err(e) => {
                self.failures.push(format!("{what}: refused: {e}"));
                panic!("{}", self.failures.join("\n"));
            }
        }
    }

    /// `patch` on `name` (a server-side dry run: nothing is written, admission still judges it)
    /// must be refused by the policy, with a message that holds `says`.
    async fn refused(&mut self, what: &str, name: &str, patch: &Value, says: &str) {
        match send(&self.cluster, name, patch, true).await {
            Ok(_) => self.failures.push(format!("{what}: allowed")),
            Err(ClusterError::Forbidden { message, .. })
                if message.contains(&format!("ValidatingAdmissionPolicy '{}'", self.policy))
                    && message.contains(says) => {}
            Err(e) => self.failures.push(format!(
                "{what}: not refused by {} saying {says:?}: {e}",
                self.policy
            )),
        }
    }

    /// Waits until the policy refuses `patch` on `name` (policies take effect asynchronously).
    async fn in_force(&self, name: &str, patch: &Value) -> Result {
        let mut last = String::new();
        for _ in 0..300 {
            match send(&self.cluster, name, patch, true).await {
                Err(ClusterError::Forbidden { message, .. })
                    if message.contains("ValidatingAdmissionPolicy") =>
                {
                    return Ok(());
                }
                answer => last = format!("{answer:?}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let policy = self.policy;
        Err(format!("the policy {policy} is not in force after 30 s: {last}").into())
    }

    fn check(self) {
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

/// `ops` on the volume as read, fenced as gc fences (what a leaked token could send).
fn other(volume: &Value, ops: Value) -> Value {
    let Value::Array(ops) = ops else {
        panic!("a JSON patch")
    };
    fenced(volume, ops)
}

/// The session collector's account, as installed by default: it keeps a deleted claim's volume
/// claimed from its namespace (Retain, gc's label and record), keeps it again (its record
/// rewritten) and gives it back (Delete, label and record removed), and gives back a volume gc
/// kept for another namespace (labelled). It may not touch another tenant's volume (claimed from
/// another namespace, not gc's), nor change anything else of its own: the claimRef, the
/// capacity, another label or annotation, a finalizer, another policy; nor set `Delete` on, or
/// put gc's label on, a volume of its namespace that gc did not keep.
#[tokio::test]
async fn the_collectors_account_changes_only_what_gc_writes_on_its_own_volumes() -> Result {
    let bed = gc_testbed::TestBed::shared().await?;
    let admin = bed.client();
    let ns = bed.namespace("volumes-collector").await?;
    let other_ns = bed.namespace("volumes-tenant").await?;
    installed(&ns, &[]);
    let id = cluster_id(&ns);
    let policy = format!("gc-{}-volumes", ns.name());
    let (own, theirs) = (ns.name(), other_ns.name());
    let pv = |what: &str| format!("{what}-{own}");
    let mine = volume(
        &admin,
        &pv("mine"),
        Fixture {
            claim: (own, "home", "uid-home"),
            policy: "Delete",
            phase: "Bound",
            labels: json!({"team": "a"}),
            annotations: json!({"note": "tenant's"}),
        },
    )
    .await?;
    let tenant = volume(
        &admin,
        &pv("tenant"),
        Fixture {
            claim: (theirs, "data", "uid-data"),
            policy: "Delete",
            phase: "Bound",
            labels: json!({}),
            annotations: json!({}),
        },
    )
    .await?;
    let kept_elsewhere = volume(
        &admin,
        &pv("kept-elsewhere"),
        Fixture {
            claim: (theirs, "old", "uid-old"),
            policy: "Retain",
            phase: "Released",
            labels: json!({RETAINED_LABEL: id}),
            annotations: json!({RETAINED_ANNOTATION: record(theirs, "old", "uid-old", None)}),
        },
    )
    .await?;
    // gc's label with another cluster id: kept by another gc, not this one.
    let other_gc = volume(
        &admin,
        &pv("other-gc"),
        Fixture {
            claim: (theirs, "old", "uid-old"),
            policy: "Retain",
            phase: "Released",
            labels: json!({RETAINED_LABEL: "another-cluster"}),
            annotations: json!({RETAINED_ANNOTATION: record(theirs, "old", "uid-old", None)}),
        },
    )
    .await?;
    let retained = volume(
        &admin,
        &pv("retained"),
        Fixture {
            claim: (own, "archive", "uid-archive"),
            policy: "Retain",
            phase: "Bound",
            labels: json!({}),
            annotations: json!({}),
        },
    )
    .await?;
    let client = ns.service_account_client("gc").await?;
    let mut v = Verdicts {
        cluster: gc_k8s::KubeCluster::new(client),
        policy: &policy,
        failures: Vec::new(),
    };
    let record_home = record(own, "home", "uid-home", None);
    v.in_force(
        &pv("tenant"),
        &keep(&tenant, &id, &record(theirs, "data", "uid-data", None)),
    )
    .await?;

    // Another tenant's volume, claimed from another namespace, not kept by gc: not even gc's
    // own write.
    let another = "changes no PersistentVolume but those claimed from the namespaces it collects";
    v.refused(
        "keep another tenant's volume",
        &pv("tenant"),
        &keep(&tenant, &id, &record(theirs, "data", "uid-data", None)),
        another,
    )
    .await;
    let to_delete = other(
        &tenant,
        json!([{"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}]),
    );
    v.refused(
        "retain another tenant's volume",
        &pv("tenant"),
        &to_delete,
        another,
    )
    .await;
    v.refused(
        "give back a volume another gc (another cluster id) kept",
        &pv("other-gc"),
        &other(
            &other_gc,
            json!([{"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy",
                    "value": "Delete"}]),
        ),
        another,
    )
    .await;

    // A volume of its namespace that gc did not keep: never Delete, never gc's label alone.
    v.refused(
        "set Delete on a volume of its namespace gc did not keep",
        &pv("retained"),
        &other(
            &retained,
            json!([{"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy",
                    "value": "Delete"}]),
        ),
        "or back to Delete on a volume gc kept",
    )
    .await;
    v.refused(
        "put gc's label on a volume without keeping it",
        &pv("retained"),
        &other(
            &retained,
            json!([add_to(&retained, "labels", RETAINED_LABEL, &id)]),
        ),
        "puts its label gc.example.com/retained=",
    )
    .await;

    // Its own: kept as gc keeps it.
    let kept = v
        .passes(
            "keep its own volume",
            &pv("mine"),
            &keep(&mine, &id, &record_home),
        )
        .await;
    assert_eq!(kept["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(kept["metadata"]["labels"][RETAINED_LABEL], id.as_str());
    assert_eq!(kept["metadata"]["labels"]["team"], "a");
    assert_eq!(
        kept["metadata"]["annotations"][RETAINED_ANNOTATION],
        record_home.as_str()
    );

    // Nothing else of it.
    let spec_only = "changes nothing in a PersistentVolume's spec but the reclaim policy";
    for (what, ops, says) in [
        (
            "move its claimRef to another claim",
            json!([{"op": "replace", "path": "/spec/claimRef/uid", "value": "uid-thief"}]),
            spec_only,
        ),
        (
            "move its claimRef to another namespace",
            json!([{"op": "replace", "path": "/spec/claimRef/namespace", "value": theirs}]),
            spec_only,
        ),
        (
            "drop its claimRef",
            json!([{"op": "remove", "path": "/spec/claimRef"}]),
            spec_only,
        ),
        (
            "change its capacity",
            json!([{"op": "replace", "path": "/spec/capacity/storage", "value": "2Gi"}]),
            spec_only,
        ),
        (
            "add mount options",
            json!([{"op": "add", "path": "/spec/mountOptions", "value": ["ro"]}]),
            spec_only,
        ),
        (
            "set another policy",
            json!([{"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy",
                    "value": "Recycle"}]),
            "sets a PersistentVolume's reclaim policy only to Retain",
        ),
        (
            "change another label",
            json!([{"op": "replace", "path": "/metadata/labels/team", "value": "b"}]),
            "changes no label of a PersistentVolume but gc's own",
        ),
        (
            "remove another label",
            json!([{"op": "remove", "path": "/metadata/labels/team"}]),
            "changes no label of a PersistentVolume but gc's own",
        ),
        (
            "add another label",
            json!([{"op": "add", "path": "/metadata/labels/owner", "value": "gc"}]),
            "changes no label of a PersistentVolume but gc's own",
        ),
        (
            "change another annotation",
            json!([{"op": "replace", "path": "/metadata/annotations/note", "value": "gc's"}]),
            "changes no annotation of a PersistentVolume but gc's own record",
        ),
        (
            "add a finalizer",
            json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/hold"}]),
            "changes no finalizer or owner",
        ),
    ] {
        let patch = other(&kept, ops);
        v.refused(what, &pv("mine"), &patch, says).await;
    }

    // gc's marks on its own kept volume: removed only with its record as it is given back its
    // policy, never changed; its record written only on a volume this install kept.
    let label = format!("/metadata/labels/{}", token(RETAINED_LABEL));
    let note = format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION));
    let marks = "puts its label gc.example.com/retained=";
    for (what, ops) in [
        (
            "remove gc's label from its kept volume, leaving it Retain",
            json!([{"op": "remove", "path": label}]),
        ),
        (
            "remove gc's label and record, leaving it Retain",
            json!([{"op": "remove", "path": label}, {"op": "remove", "path": note}]),
        ),
        (
            "change gc's label to another install's id",
            json!([{"op": "replace", "path": label, "value": "gc-elsewhere"}]),
        ),
    ] {
        v.refused(what, &pv("mine"), &other(&kept, ops), marks)
            .await;
    }
    v.refused(
        "write gc's record on a volume of its namespace it did not keep",
        &pv("retained"),
        &other(
            &retained,
            json!([add_to(
                &retained,
                "annotations",
                RETAINED_ANNOTATION,
                &record_home
            )]),
        ),
        "writes its record gc.example.com/retained only on a volume this install kept",
    )
    .await;

    // Kept again for a claim deleted again, then given back.
    let renewed = record(own, "home", "uid-home-2", None);
    let kept = v
        .passes(
            "renew its own volume's record",
            &pv("mine"),
            &renew(&kept, &renewed),
        )
        .await;
    assert_eq!(
        kept["metadata"]["annotations"][RETAINED_ANNOTATION],
        renewed.as_str()
    );
    let released = set_phase(&admin, &pv("mine"), "Released").await?;
    let back = v
        .passes(
            "give back its own volume",
            &pv("mine"),
            &give_back(&released),
        )
        .await;
    assert_eq!(back["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert!(
        back["metadata"]["labels"].get(RETAINED_LABEL).is_none(),
        "{back}"
    );
    assert!(
        back["metadata"]["annotations"]
            .get(RETAINED_ANNOTATION)
            .is_none(),
        "{back}"
    );
    assert_eq!(back["metadata"]["labels"]["team"], "a");
    assert_eq!(back["metadata"]["annotations"]["note"], "tenant's");

    // A volume gc kept for another namespace (a namespace no run selects any longer): given back.
    let back = v
        .passes(
            "give back a volume gc kept elsewhere",
            &pv("kept-elsewhere"),
            &give_back(&kept_elsewhere),
        )
        .await;
    assert_eq!(back["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    v.check();
    Ok(())
}

/// The restore account (`gc.restore.enabled`): it moves a volume gc kept for a claim of its
/// namespace to the claim created again (same name and namespace, a new uid) and gives it back
/// once bound. It may not move an unkept volume, nor a kept one to a claim of another name or
/// namespace, nor change anything else of it; nor touch a kept volume of a namespace it does not
/// restore into.
#[tokio::test]
async fn the_restore_account_moves_only_a_kept_volume_to_its_claim_created_again() -> Result {
    let bed = gc_testbed::TestBed::shared().await?;
    let admin = bed.client();
    let ns = bed.namespace("volumes-restore").await?;
    let other_ns = bed.namespace("volumes-stranger").await?;
    installed(&ns, &["gc.restore.enabled=true"]);
    let id = cluster_id(&ns);
    let policy = format!("gc-{}-restore-volumes", ns.name());
    let (own, theirs) = (ns.name(), other_ns.name());
    let pv = |what: &str| format!("{what}-{own}");
    let kept_fixture = |claim: &'static str, uid: &'static str| Fixture {
        claim: (own, claim, uid),
        policy: "Retain",
        phase: "Released",
        labels: json!({RETAINED_LABEL: id, "team": "a"}),
        annotations: json!({RETAINED_ANNOTATION: record(own, claim, uid, None)}),
    };
    let kept = volume(&admin, &pv("kept"), kept_fixture("home", "uid-home")).await?;
    let kept_too = volume(&admin, &pv("kept-too"), kept_fixture("data", "uid-data")).await?;
    let unkept = volume(
        &admin,
        &pv("unkept"),
        Fixture {
            claim: (own, "scratch", "uid-scratch"),
            policy: "Retain",
            phase: "Released",
            labels: json!({}),
            annotations: json!({}),
        },
    )
    .await?;
    let elsewhere = volume(
        &admin,
        &pv("elsewhere"),
        Fixture {
            claim: (theirs, "home", "uid-theirs"),
            policy: "Retain",
            phase: "Released",
            labels: json!({RETAINED_LABEL: id}),
            annotations: json!({RETAINED_ANNOTATION: record(theirs, "home", "uid-theirs", None)}),
        },
    )
    .await?;
    let client = ns.service_account_client("gc-restore").await?;
    let mut v = Verdicts {
        cluster: gc_k8s::KubeCluster::new(client),
        policy: &policy,
        failures: Vec::new(),
    };
    // `rebind`'s patch, its record added rather than replaced: it applies to an unkept volume
    // too (one without gc's annotation), so that admission judges it.
    let moved = |volume: &Value, namespace: &str, claim: &str| {
        let note = record(own, "scratch", "uid-scratch", Some("uid-new"));
        let claim_ref = json!({"op": "replace", "path": "/spec/claimRef", "value": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": namespace, "name": claim, "uid": "uid-new"}});
        fenced(
            volume,
            vec![
                claim_ref,
                add_to(volume, "annotations", RETAINED_ANNOTATION, &note),
            ],
        )
    };
    v.in_force(&pv("unkept"), &moved(&unkept, own, "scratch"))
        .await?;

    // Not gc's, or not of a namespace it restores into.
    let not_kept = "changes no PersistentVolume but those gc kept";
    v.refused(
        "move an unkept volume to a claim of its name",
        &pv("unkept"),
        &moved(&unkept, own, "scratch"),
        not_kept,
    )
    .await;
    v.refused(
        "move a kept volume of another namespace",
        &pv("elsewhere"),
        &moved(&elsewhere, theirs, "home"),
        not_kept,
    )
    .await;

    // A kept volume to a claim of its choosing, or anything else of it.
    let only_again = "moves a kept PersistentVolume only to its claim created again";
    for (what, patch, says) in [
        (
            "move a kept volume to a claim of another name",
            moved(&kept_too, own, "thief"),
            only_again,
        ),
        (
            "move a kept volume to a claim of another namespace",
            moved(&kept_too, theirs, "data"),
            only_again,
        ),
        (
            "drop a kept volume's claimRef",
            other(
                &kept_too,
                json!([{"op": "remove", "path": "/spec/claimRef"}]),
            ),
            only_again,
        ),
        (
            "change a kept volume's capacity",
            other(
                &kept_too,
                json!([{"op": "replace", "path": "/spec/capacity/storage", "value": "2Gi"}]),
            ),
            "changes nothing in a PersistentVolume's spec but the claimRef and the reclaim policy",
        ),
        (
            "change another label of a kept volume",
            other(
                &kept_too,
                json!([{"op": "replace", "path": "/metadata/labels/team", "value": "b"}]),
            ),
            "changes no label of a PersistentVolume but gc's own",
        ),
        (
            "change gc's label of a kept volume",
            other(
                &kept_too,
                json!([{"op": "replace",
                        "path": format!("/metadata/labels/{}", token(RETAINED_LABEL)),
                        "value": "elsewhere"}]),
            ),
            "removes gc's label",
        ),
        (
            "remove gc's label from a kept volume, not giving it back",
            other(
                &kept_too,
                json!([{"op": "remove",
                        "path": format!("/metadata/labels/{}", token(RETAINED_LABEL))}]),
            ),
            "removes gc's label",
        ),
        (
            "remove gc's label and record from a kept volume, not giving it back",
            other(
                &kept_too,
                json!([{"op": "remove",
                        "path": format!("/metadata/labels/{}", token(RETAINED_LABEL))},
                       {"op": "remove",
                        "path": format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION))}]),
            ),
            "removes gc's label",
        ),
        (
            "rewrite gc's record of a kept volume without moving it",
            other(
                &kept_too,
                json!([{"op": "replace",
                        "path": format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION)),
                        "value": record(own, "data", "uid-data", Some("uid-mine"))}]),
            ),
            "rewrites gc's record",
        ),
        (
            "set another policy on a kept volume",
            other(
                &kept_too,
                json!([{"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy",
                        "value": "Recycle"}]),
            ),
            "gives a kept PersistentVolume back its reclaim policy (Delete) only once it is bound",
        ),
        (
            "give back a kept volume not bound to a claim created again (Released: deleted at once)",
            give_back(&kept_too),
            "gives a kept PersistentVolume back its reclaim policy (Delete) only once it is bound",
        ),
    ] {
        v.refused(what, &pv("kept-too"), &patch, says).await;
    }

    // What a restore does: the kept volume to the claim created again, then, bound, given back.
    let note = record(own, "home", "uid-home", Some("uid-home-new"));
    let rebound = v
        .passes(
            "move a kept volume to its claim created again",
            &pv("kept"),
            &rebind(&kept, own, "home", "uid-home-new", &note),
        )
        .await;
    assert_eq!(rebound["spec"]["claimRef"]["uid"], "uid-home-new");
    assert_eq!(rebound["spec"]["claimRef"]["name"], "home");
    let bound = set_phase(&admin, &pv("kept"), "Bound").await?;
    let back = v
        .passes(
            "give back the volume, bound",
            &pv("kept"),
            &give_back(&bound),
        )
        .await;
    assert_eq!(back["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert!(
        back["metadata"]["labels"].get(RETAINED_LABEL).is_none(),
        "{back}"
    );
    assert_eq!(back["metadata"]["labels"]["team"], "a");
    v.check();
    Ok(())
}

/// Cluster-wide, the collector's volumes are those claimed from any namespace it may collect:
/// not a system namespace, not an excluded one.
#[tokio::test]
async fn cluster_wide_the_collector_keeps_volumes_of_any_namespace_it_collects() -> Result {
    let bed = gc_testbed::TestBed::shared().await?;
    let admin = bed.client();
    let ns = bed.namespace("volumes-wide").await?;
    let tenant = bed.namespace("volumes-wide-tenant").await?;
    let excluded = bed.namespace("volumes-wide-excluded").await?;
    let exclude = format!("clusterWide.excludeNamespaces={{{}}}", excluded.name());
    installed(&ns, &["clusterWide.enabled=true", &exclude]);
    let id = cluster_id(&ns);
    let policy = format!("gc-{}-volumes", ns.name());
    let client = ns.service_account_client("gc").await?;
    let mut v = Verdicts {
        cluster: gc_k8s::KubeCluster::new(client),
        policy: &policy,
        failures: Vec::new(),
    };
    let mut volumes = Vec::new();
    for (what, namespace) in [
        ("tenant", tenant.name()),
        ("system", "kube-system"),
        ("excluded", excluded.name()),
    ] {
        let name = format!("{what}-{}", ns.name());
        let stored = volume(
            &admin,
            &name,
            Fixture {
                claim: (namespace, "data", "uid-data"),
                policy: "Delete",
                phase: "Bound",
                labels: json!({}),
                annotations: json!({}),
            },
        )
        .await?;
        let patch = keep(&stored, &id, &record(namespace, "data", "uid-data", None));
        volumes.push((what, name, patch));
    }
    v.in_force(&volumes[1].1, &volumes[1].2).await?;
    for (what, name, patch) in &volumes[1..] {
        let what = format!("keep a volume claimed from the {what} namespace");
        v.refused(
            &what,
            name,
            patch,
            "but those claimed from the namespaces it collects",
        )
        .await;
    }
    let (_, name, patch) = &volumes[0];
    let kept = v.passes("keep a tenant's volume", name, patch).await;
    assert_eq!(kept["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    v.check();
    Ok(())
}

/// Waits up to 60 s for `check` to hold; `what` names it in the failure.
async fn until<F: AsyncFn() -> Result<bool>>(what: &str, check: F) -> Result {
    for _ in 0..600 {
        if check().await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("not after 60 s: {what}").into())
}

/// In `ns`: an orphaned session's claim (`gone-1-home`) on a static volume `pv-<ns>` (policy
/// Delete), bound by the binder, and a live session's Service beside it (a database with none of
/// the ids would trip the guard); the volume's name once it is bound.
async fn orphan_on_a_volume(admin: &Client, ns: &TestNamespace) -> Result<String> {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let pv = format!("pv-{}", ns.name());
    let claim = "gone-1-home";
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    let post = PostParams::default();
    volumes
        .create(
            &post,
            &serde_json::from_value(json!({
                "metadata": {"name": pv},
                "spec": {
                    "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "", "hostPath": {"path": format!("/tmp/{pv}")},
                    "persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"namespace": ns.name(), "name": claim},
                },
            }))?,
        )
        .await?;
    ns.api::<PersistentVolumeClaim>()
        .create(
            &post,
            &serde_json::from_value(json!({
                "metadata": {"name": claim,
                             "labels": {"app": "streamspace-session", "session": "gone-1"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                         "resources": {"requests": {"storage": "1Gi"}}},
            }))?,
        )
        .await?;
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "live-1",
                     "labels": {"app": "streamspace-session", "session": "live-1"}},
        "spec": {"ports": [{"port": 3000}]},
    }))?;
    ns.api().create(&post, &service).await?;
    until("the claim bound", async || {
        let status = volumes.get(&pv).await?.status;
        Ok(status.and_then(|s| s.phase).as_deref() == Some("Bound"))
    })
    .await?;
    Ok(pv)
}

/// The default install with the restore account, on an API server with the real volume binder:
/// gc's own writes, as gc sends them (not copies of them), pass both admission policies. The
/// rendered session CronJob's container, run as its account, keeps an orphaned session's claim's
/// volume (`Retain`, gc's label and record) and deletes the claim; the restore account's
/// `restore sessions` creates the claim again, moves the volume to it, and, once the binder bound
/// them, gives the volume its policy back. Both policies are proven in force first: each refuses
/// its account's patch of another tenant's volume.
#[tokio::test]
async fn the_chart_accounts_keep_and_restore_a_volume_through_the_policies() -> Result {
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::jiff::Timestamp;

    use super::install::{
        cron_pod, on_state, out_of_cluster, rendered, run_rendered, session_database, token_file,
    };
    use crate::common::{command, one_live_session};

    let bed = gc_testbed::TestBed::with_controllers().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("chart-volumes").await? else {
        return Ok(());
    };
    let ns = bed.namespace("chart-volumes").await?;
    let admin = bed.client();
    one_live_session(&db).await?;
    let mut sets = session_database(&ns, &db).await?;
    sets.push(("--set", "gc.restore.enabled=true".to_owned()));
    super::install::install_with(&ns, &sets);

    // An orphaned session's claim on a static volume (policy Delete), bound by the binder.
    let pv = orphan_on_a_volume(&admin, &ns).await?;
    let claim = "gone-1-home";
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    let claims = ns.api::<PersistentVolumeClaim>();
    let phase = async |name: &str| -> Result<Option<String>> {
        Ok(volumes.get(name).await?.status.and_then(|s| s.phase))
    };

    // Another tenant's volume: each account's patch of it is refused once its policy is in force.
    let foreign = format!("tenant-{}", ns.name());
    let stored = volume(
        &admin,
        &foreign,
        Fixture {
            claim: ("default", "data", "uid-data"),
            policy: "Retain",
            phase: "Bound",
            labels: json!({}),
            annotations: json!({}),
        },
    )
    .await?;
    // Unfenced: the binder here moves its phase (its claim does not exist).
    let to_delete = json!([{"op": "test", "path": "/metadata/uid", "value": stored["metadata"]["uid"]},
        {"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Delete"}]);
    for (account, policy) in [
        ("gc", format!("gc-{}-volumes", ns.name())),
        ("gc-restore", format!("gc-{}-restore-volumes", ns.name())),
    ] {
        let client = ns.service_account_client(account).await?;
        let v = Verdicts {
            cluster: gc_k8s::KubeCluster::new(client),
            policy: &policy,
            failures: Vec::new(),
        };
        v.in_force(&foreign, &to_delete).await?;
    }

    // The rendered CronJob's container, as its account, past the grace period.
    let cron_job = ns.api::<CronJob>().get("gc-sessions").await?;
    let pod = cron_pod(&cron_job);
    let rendered = rendered(&ns, &pod).await?;
    let dir = tempfile::tempdir()?;
    let token = token_file(&ns, &rendered.account, &dir).await?;
    let later = Timestamp::from_second(Timestamp::now().as_second() + 25 * 3600)?;
    let rendered_command = (&rendered.args[..], &rendered.env[..]);
    let (out, log) = run_rendered(bed, rendered_command, &token, dir.path(), later, "manual")?;
    assert!(out.status.success(), "{log}");
    assert!(claims.get_opt(claim).await?.is_none(), "{log}");
    let kept = volumes.get(&pv).await?;
    let spec = kept.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain"),
        "{log}"
    );
    let labels = kept.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(RETAINED_LABEL).map(String::as_str),
        Some(cluster_id(&ns).as_str())
    );
    let annotations = kept.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key(RETAINED_ANNOTATION), "{kept:?}");
    until("the volume released", async || {
        Ok(phase(&pv).await?.as_deref() == Some("Released"))
    })
    .await?;

    // The restore as the chart renders it: a Job made from its CronJob, named after the session
    // (`kubectl create job --from=cronjob/gc-restore gone-1`), its container run as the kubelet
    // would run it, as the restore account, on the collector's archives and store.
    let out = std::process::Command::new(gc_testbed::tool("kubectl")?)
        .args([
            "create",
            "job",
            "--from=cronjob/gc-restore",
            "gone-1",
            "-n",
            ns.name(),
        ])
        .args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()])
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = ns
        .api::<k8s_openapi::api::batch::v1::Job>()
        .get("gone-1")
        .await?;
    let template = job.spec.expect("a Job spec").template;
    let job_pod = template.spec.expect("a Pod template");
    let restore =
        super::install::restore_job(&ns, template.metadata.unwrap_or_default(), &job_pod).await?;
    assert_eq!(restore.account, "gc-restore");
    assert!(
        restore.args.contains(&"--session=gone-1".to_owned()),
        "{:?}",
        restore.args
    );
    let token = token_file(&ns, &restore.account, &dir).await?;
    let out = command()
        .args(out_of_cluster(&restore.args, bed, &token))
        .args(["-o", "json"])
        .env_clear()
        .envs(
            restore
                .env
                .iter()
                .map(|(k, v)| (k, on_state(v, dir.path()))),
        )
        .output()?;
    let log = format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert!(
        rows.iter()
            .any(|r| r["kind"] == "PersistentVolumeClaim" && r["result"] == "created"),
        "{log}"
    );
    let back = claims.get(claim).await?;
    until(
        "the claim created again bound to the kept volume",
        async || Ok(phase(&pv).await?.as_deref() == Some("Bound")),
    )
    .await?;
    let restored = volumes.get(&pv).await?;
    let spec = restored.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.claim_ref.and_then(|c| c.uid),
        back.metadata.uid,
        "{log}"
    );
    // Given back its policy by the restore (within its bind wait), gc's label and record gone.
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete"),
        "{log}"
    );
    let labels = restored.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key(RETAINED_LABEL), "{restored:?}\n{log}");
    // Another tenant's volume is as it was.
    let foreign = volumes.get(&foreign).await?;
    assert_eq!(
        foreign
            .spec
            .and_then(|s| s.persistent_volume_reclaim_policy),
        Some("Retain".to_owned())
    );
    Ok(())
}

/// Two installs in one cluster (tenant-a's and tenant-b's releases, both at the chart's defaults
/// but for their databases): each run keeps its own orphan's volume under its own install's
/// cluster id; neither install's accounts (collector or restore, their own tokens) may give back
/// the other's kept volume, remove or change gc's label on it, rewrite its record or move it. And
/// gc's marks copied onto another volume (a copied manifest is enough) prove nothing: the next
/// run of the install whose marks they are gives back the volume its receipt proves it kept, and
/// leaves the copy alone, saying so.
#[tokio::test]
async fn two_installs_keep_their_own_volumes_and_cannot_touch_each_others() -> Result {
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::jiff::Timestamp;

    use super::install::{cron_pod, rendered, run_rendered, session_database, token_file};
    use crate::common::one_live_session;

    let bed = gc_testbed::TestBed::with_controllers().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("two-installs").await? else {
        return Ok(());
    };
    one_live_session(&db).await?;
    let admin = bed.client();
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    let (a, b) = (
        bed.namespace("tenant-a").await?,
        bed.namespace("tenant-b").await?,
    );
    let dir = tempfile::tempdir()?;
    // Each install's collection, as its CronJob's container runs it, at `now`.
    let collect = async |ns: &TestNamespace, now: Timestamp| -> Result<String> {
        let cron_job = ns.api::<CronJob>().get("gc-sessions").await?;
        let rendered = rendered(ns, &cron_pod(&cron_job)).await?;
        let state = dir.path().join(ns.name());
        std::fs::create_dir_all(&state)?;
        let token = token_file(ns, &rendered.account, &dir).await?;
        let command = (&rendered.args[..], &rendered.env[..]);
        let (out, log) = run_rendered(bed, command, &token, &state, now, "manual")?;
        assert!(out.status.success(), "{log}");
        Ok(log)
    };
    let day = 86_400;
    let later = Timestamp::from_second(Timestamp::now().as_second() + day + 3600)?;
    for ns in [&a, &b] {
        let mut sets = session_database(ns, &db).await?;
        sets.push(("--set", "gc.restore.enabled=true".to_owned()));
        super::install::install_with(ns, &sets);
        orphan_on_a_volume(&admin, ns).await?;
    }
    for ns in [&a, &b] {
        let log = collect(ns, later).await?;
        let kept = volumes.get(&format!("pv-{}", ns.name())).await?;
        let labels = kept.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get(RETAINED_LABEL),
            Some(&cluster_id(ns)),
            "kept under its own install's id: {log}"
        );
    }

    // Each install's accounts against the other's kept volume: refused by their own policies.
    let label = format!("/metadata/labels/{}", token(RETAINED_LABEL));
    let note = format!("/metadata/annotations/{}", token(RETAINED_ANNOTATION));
    for (attacker, victim) in [(&a, &b), (&b, &a)] {
        let name = format!("pv-{}", victim.name());
        let kept = serde_json::to_value(volumes.get(&name).await?)?;
        let record: Retained = serde_json::from_str(
            kept["metadata"]["annotations"][RETAINED_ANNOTATION]
                .as_str()
                .unwrap(),
        )?;
        let early = serde_json::to_string(&Retained {
            at: 0.0,
            days: Some(0),
            ..record
        })?;
        for (account, suffix, says) in [
            (
                "gc",
                "volumes",
                "changes no PersistentVolume but those claimed from the namespaces it collects",
            ),
            (
                "gc-restore",
                "restore-volumes",
                "changes no PersistentVolume but those gc kept",
            ),
        ] {
            let policy = format!("gc-{}-{suffix}", attacker.name());
            let client = attacker.service_account_client(account).await?;
            let mut v = Verdicts {
                cluster: gc_k8s::KubeCluster::new(client),
                policy: &policy,
                failures: Vec::new(),
            };
            let released = json!({"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy",
                                  "value": "Delete"});
            v.in_force(&name, &other(&kept, json!([released]))).await?;
            for (what, ops) in [
                (
                    "set Delete on the other install's kept volume",
                    json!([released]),
                ),
                ("give back the other install's kept volume", {
                    let Value::Array(ops) = give_back(&kept) else {
                        unreachable!()
                    };
                    Value::Array(ops[fence(&kept).len()..].to_vec())
                }),
                (
                    "remove the other install's label",
                    json!([{"op": "remove", "path": label}]),
                ),
                (
                    "put its own install's id on the other's kept volume",
                    json!([{"op": "replace", "path": label,
                            "value": cluster_id(attacker)}]),
                ),
                (
                    "rewrite the other install's record to end its window",
                    json!([{"op": "replace", "path": note, "value": early}]),
                ),
                (
                    "move the other install's kept volume to a claim of its own",
                    json!([{"op": "replace", "path": "/spec/claimRef/uid", "value": "uid-mine"}]),
                ),
            ] {
                let what = format!("{account} of {}: {what}", attacker.name());
                v.refused(&what, &name, &other(&kept, ops), says).await;
            }
            v.check();
        }
    }

    // tenant-a's marks copied onto a volume tenant-a never kept.
    let name = format!("pv-{}", a.name());
    let kept = serde_json::to_value(volumes.get(&name).await?)?;
    let copy = format!("copy-{}", a.name());
    volume(
        &admin,
        &copy,
        Fixture {
            claim: (a.name(), "data", "uid-data"),
            policy: "Retain",
            phase: "Released",
            labels: kept["metadata"]["labels"].clone(),
            annotations: kept["metadata"]["annotations"].clone(),
        },
    )
    .await?;
    let past = Timestamp::from_second(Timestamp::now().as_second() + 9 * day)?;
    let log = collect(&a, past).await?;
    let policy = async |name: &str| -> Result<Option<String>> {
        let volume = volumes.get_opt(name).await?;
        Ok(volume.and_then(|v| v.spec?.persistent_volume_reclaim_policy))
    };
    // Its own, given back (Kubernetes may have reclaimed it since); the copy left alone, and said;
    // tenant-b's untouched.
    assert_ne!(policy(&name).await?.as_deref(), Some("Retain"), "{log}");
    assert_eq!(policy(&copy).await?.as_deref(), Some("Retain"), "{log}");
    let copied = volumes
        .get(&copy)
        .await?
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(copied.get(RETAINED_LABEL), Some(&cluster_id(&a)), "{log}");
    assert!(log.contains("not kept by this gc"), "{log}");
    let theirs = format!("pv-{}", b.name());
    assert_eq!(policy(&theirs).await?.as_deref(), Some("Retain"), "{log}");
    Ok(())
}
