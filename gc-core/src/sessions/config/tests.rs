//! The session collector's kinds, by StreamSpace name or in full.

use super::*;

#[test]
fn kinds_by_name_or_in_full() {
    let name = |t: &str| Kind::parse(t).map(|k| (k.group, k.version, k.kind, k.plural));
    for (text, (group, version, kind, plural)) in [
        ("deployment", ("apps", "v1", "Deployment", "deployments")),
        (
            "pvc",
            ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        ),
        (
            "Session",
            ("stream.space", "v1alpha1", "Session", "sessions"),
        ),
        (
            "example.com/v1/Widget/widgets",
            ("example.com", "v1", "Widget", "widgets"),
        ),
        (
            "v1/ConfigMap/configmaps",
            ("", "v1", "ConfigMap", "configmaps"),
        ),
        (
            "/v1/ConfigMap/configmaps",
            ("", "v1", "ConfigMap", "configmaps"),
        ),
    ] {
        let want = (group.into(), version.into(), kind.into(), plural.into());
        assert_eq!(name(text), Ok(want), "{text}");
    }
    assert!(name("widgets").is_err());
    assert!(name("example.com/v1//widgets").is_err());
    assert!(name("a/b/c/d/e").is_err());
}
