//! The archive of a session resource, written before its delete: the manifest that creates the
//! object again, and where it came from.
//!
//! `{"archivedFrom": {...}, "manifest": {...}}`, keys sorted and compact as a Pod's archive is
//! (so `sha256sum` gives its receipt's digest). The manifest is the object as the API server
//! sent it, less `status` and every field of `metadata` but `name`, `namespace`, `labels` and
//! `annotations` (no uid, resourceVersion, creationTimestamp, managedFields, ownerReferences or
//! finalizers): `jq .manifest ARCHIVE | kubectl create -f -` creates it again. `archivedFrom`
//! names the object it was (cluster, namespace, uid, resourceVersion, creationTimestamp, session
//! id) and the run that archived it.

use serde_json::{Map, Value, json};

use crate::pyjson::{self, Layout};
use crate::sessions::Resource;

/// Where a session archive names the uid of the object it was: the check of an archive read back
/// ([`crate::archive::mismatch_at`]) looks there.
pub const UID_POINTER: &str = "/archivedFrom/uid";

/// The fields of `metadata` a manifest keeps.
const KEPT_METADATA: [&str; 4] = ["name", "namespace", "labels", "annotations"];

/// Whether `object` (the whole object, as the API server sent it) is still `resource` as it was
/// listed: the same uid and resourceVersion. `Err` says what changed.
///
/// # Errors
/// Another uid (another object has the name now) or resourceVersion (it changed since).
pub fn unchanged(object: &Value, resource: &Resource) -> Result<(), String> {
    let meta = &object["metadata"];
    if meta["uid"] != resource.uid.as_str() {
        return Err(format!(
            "another object has this name now (uid {}, listed {})",
            meta["uid"], resource.uid
        ));
    }
    if meta["resourceVersion"] != resource.resource_version.as_str() {
        return Err(format!(
            "it changed since it was listed (resourceVersion {}, listed {})",
            meta["resourceVersion"], resource.resource_version
        ));
    }
    Ok(())
}

/// The archive text of `object` (the whole object, as the API server sent it, [`unchanged`]),
/// which is `resource` in `namespace` of `cluster`, archived by a run at `run_at` (RFC 3339).
pub fn document(
    object: &Value,
    cluster: &str,
    namespace: &str,
    resource: &Resource,
    run_at: &str,
) -> String {
    let empty = Map::new();
    let fields = object.as_object().unwrap_or(&empty);
    let meta = &object["metadata"];
    let mut manifest: Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| !["metadata", "status"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let kept: Map<String, Value> = KEPT_METADATA
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), meta.get(*k)?.clone())))
        .collect();
    manifest.insert("metadata".into(), Value::Object(kept));
    let doc = json!({
        "archivedFrom": {
            "cluster": cluster,
            "namespace": namespace,
            "uid": resource.uid,
            "resourceVersion": resource.resource_version,
            "creationTimestamp": resource.created,
            "session": resource.session,
            "runAt": run_at,
        },
        "manifest": manifest,
    });
    let mut out = String::new();
    pyjson::write_value(&mut out, &doc, Layout::Canonical);
    out
}

/// The object to create again from an archive `doc` ([`document`]'s): its manifest, less what
/// the cluster gave the old object and would refuse or misread in a new one: a Service's
/// `clusterIP`/`clusterIPs` (another may hold them now; a headless `None` stays), a claim's
/// `pv.kubernetes.io/` annotations (they say the old claim was bound), and a claim's
/// `volumeName` unless `keep_volume` (its volume was kept: the new claim binds to it).
///
/// # Errors
/// When `doc` has no manifest with `apiVersion`, `kind` and `metadata.name`.
pub fn restorable(doc: &Value, keep_volume: bool) -> Result<Value, String> {
    let mut manifest = doc["manifest"].clone();
    let named = ["/apiVersion", "/kind", "/metadata/name"]
        .iter()
        .all(|p| manifest.pointer(p).is_some_and(Value::is_string));
    if !named {
        return Err("the archive holds no manifest with apiVersion, kind and name".into());
    }
    let (api_version, kind) = (manifest["apiVersion"].clone(), manifest["kind"].clone());
    let spec = manifest["spec"].as_object_mut();
    if api_version == "v1"
        && kind == "Service"
        && let Some(spec) = spec
        && spec.get("clusterIP") != Some(&Value::from("None"))
    {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if api_version == "v1" && kind == "PersistentVolumeClaim" {
        if let Some(notes) = manifest["metadata"]["annotations"].as_object_mut() {
            notes.retain(|k, _| !k.starts_with("pv.kubernetes.io/"));
        }
        if !keep_volume && let Some(spec) = manifest["spec"].as_object_mut() {
            spec.remove("volumeName");
        }
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource() -> Resource {
        Resource {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "s1-web".into(),
            uid: "u-1".into(),
            resource_version: "7".into(),
            session: Some("s1".into()),
            created: Some("2026-11-01T00:00:00Z".into()),
            deleting: false,
        }
    }

    fn object(uid: &str, rv: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "s1-web", "namespace": "ws", "uid": uid, "resourceVersion": rv,
                         "creationTimestamp": "2026-11-01T00:00:00Z", "generation": 3,
                         "labels": {"session": "s1"}, "annotations": {"a": "b"},
                         "managedFields": [{"manager": "x"}], "finalizers": ["f"],
                         "ownerReferences": [{"uid": "owner"}]},
            "spec": {"replicas": 1},
            "status": {"readyReplicas": 1},
        })
    }

    #[test]
    fn the_manifest_keeps_what_creates_the_object_again() {
        let object = object("u-1", "7");
        assert_eq!(unchanged(&object, &resource()), Ok(()));
        let text = document(
            &object,
            "primary",
            "ws",
            &resource(),
            "2026-12-01T00:00:00Z",
        );
        assert_eq!(
            text,
            r#"{"archivedFrom":{"cluster":"primary","creationTimestamp":"2026-11-01T00:00:00Z","namespace":"ws","resourceVersion":"7","runAt":"2026-12-01T00:00:00Z","session":"s1","uid":"u-1"},"manifest":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"a":"b"},"labels":{"session":"s1"},"name":"s1-web","namespace":"ws"},"spec":{"replicas":1}}}"#
        );
        let sha = crate::archive::digest(text.as_bytes());
        let size = Some(text.len() as u64);
        let check = |what: &str| {
            crate::archive::mismatch_at(text.as_bytes(), &sha, size, UID_POINTER, what)
        };
        assert_eq!(check("Deployment u-1"), None);
        assert_eq!(
            check("Deployment u-2").unwrap(),
            "is not the archive of Deployment u-2: it names uid \"u-1\""
        );
    }

    #[test]
    fn another_object_or_version_is_not_archived() {
        let check = |o: &Value| unchanged(o, &resource()).unwrap_err();
        assert!(check(&object("u-2", "7")).contains("another object"));
        assert!(check(&object("u-1", "8")).contains("changed since it was listed"));
        assert!(check(&json!([])).contains("another object"));
    }

    #[test]
    fn what_the_cluster_gave_the_old_object_is_left_out() {
        let doc = json!({"manifest": {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "ports": [{"port": 1}]},
        }});
        let service = restorable(&doc, false).unwrap();
        assert_eq!(service["spec"], json!({"ports": [{"port": 1}]}));
        let mut headless = doc.clone();
        headless["manifest"]["spec"]["clusterIP"] = "None".into();
        assert_eq!(
            restorable(&headless, false).unwrap()["spec"]["clusterIP"],
            "None"
        );

        let claim = json!({"manifest": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "annotations": {
                "pv.kubernetes.io/bind-completed": "yes", "team": "a"}},
            "spec": {"volumeName": "pv-1", "resources": {}},
        }});
        let kept = restorable(&claim, true).unwrap();
        assert_eq!(kept["spec"]["volumeName"], "pv-1");
        assert_eq!(kept["metadata"]["annotations"], json!({"team": "a"}));
        assert!(
            restorable(&claim, false).unwrap()["spec"]
                .get("volumeName")
                .is_none()
        );
        // Only a claim loses them: another core object keeps its annotations and fields.
        let mut config = claim.clone();
        config["manifest"]["kind"] = "ConfigMap".into();
        assert_eq!(restorable(&config, false).unwrap(), config["manifest"]);
        assert!(restorable(&json!({"manifest": {"kind": "X"}}), false).is_err());
    }
}
