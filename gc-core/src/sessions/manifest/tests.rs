//! A session resource's archived manifest: what creates the object again, and what is left out.

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
    let sha = crate::pods::archive::digest(text.as_bytes());
    let size = Some(text.len() as u64);
    let check = |what: &str| {
        crate::pods::archive::mismatch_at(text.as_bytes(), &sha, size, UID_POINTER, what)
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
