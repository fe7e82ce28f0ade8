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
/// ([`crate::pods::archive::mismatch_at`]) looks there.
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
mod tests;
