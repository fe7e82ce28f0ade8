//! The failed-Pod inputs: each rule names its input; the pin's domain and the exclude selector.

use super::*;

fn check(edit: impl FnOnce(&mut PodInputs), expect: Option<&str>) {
    let mut inputs = PodInputs::default();
    edit(&mut inputs);
    let got = inputs.validate().err().map(|e| e.to_string());
    assert_eq!(got.as_deref(), expect);
}

#[test]
fn defaults_are_valid() {
    check(|_| {}, None);
}

#[test]
fn each_rule_names_its_input() {
    check(
        |i| i.cluster_id = "Primary".into(),
        Some(r#"invalid cluster_id "Primary": must match [a-z0-9][a-z0-9-]{0,39}"#),
    );
    check(
        |i| i.cluster_id = "-a".into(),
        Some(r#"invalid cluster_id "-a": must match [a-z0-9][a-z0-9-]{0,39}"#),
    );
    check(|i| i.cluster_id = "a".repeat(40), None);
    check(
        |i| i.cluster_id = "a".repeat(41),
        Some(&format!(
            "invalid cluster_id {:?}: must match [a-z0-9][a-z0-9-]{{0,39}}",
            "a".repeat(41)
        )),
    );
    check(|i| i.cluster_id = "a-".into(), None);
    check(
        |i| i.namespace = "ns-".into(),
        Some(r#"invalid namespace "ns-": must be a DNS label of at most 63 characters"#),
    );
    check(|i| i.namespace = "x".repeat(63), None);
    check(
        |i| i.namespace = "x".repeat(64),
        Some(&format!(
            "invalid namespace {:?}: must be a DNS label of at most 63 characters",
            "x".repeat(64)
        )),
    );
    check(
        |i| i.namespace = "kube-system".into(),
        Some(r#"invalid namespace "kube-system": system namespace refused"#),
    );
    check(
        |i| i.namespace = "kube-node-lease".into(),
        Some(r#"invalid namespace "kube-node-lease": system namespace refused"#),
    );
    check(
        |i| i.retention_seconds = 0,
        Some(r#"invalid retention_seconds "0": must be between 1 and 31536000"#),
    );
    check(|i| i.retention_seconds = 31_536_000, None);
    check(
        |i| i.retention_seconds = 31_536_001,
        Some(r#"invalid retention_seconds "31536001": must be between 1 and 31536000"#),
    );
    check(
        |i| i.max_pods = 51,
        Some(r#"invalid max_pods "51": must be between 1 and 50"#),
    );
    check(
        |i| i.max_pods = 0,
        Some(r#"invalid max_pods "0": must be between 1 and 50"#),
    );
    check(
        |i| {
            i.max_pods = 10;
            i.max_inventory = 9
        },
        Some(r#"invalid max_inventory "9": must be between max_pods and 10000"#),
    );
    check(
        |i| {
            i.max_pods = 10;
            i.max_inventory = 10
        },
        None,
    );
    check(
        |i| i.max_inventory = 10_001,
        Some(r#"invalid max_inventory "10001": must be between max_pods and 10000"#),
    );
    check(
        |i| i.max_archive_bytes = 1023,
        Some(r#"invalid max_archive_bytes "1023": must be between 1024 and 1048576"#),
    );
    check(
        |i| i.max_archive_bytes = 1_048_577,
        Some(r#"invalid max_archive_bytes "1048577": must be between 1024 and 1048576"#),
    );
    check(
        |i| i.collect_label = "bad label".into(),
        Some(r#"invalid collect_label "bad label": must be a label key"#),
    );
    check(
        |i| i.pin_finalizer = "nodomain".into(),
        Some(r#"invalid pin_finalizer "nodomain": must be a domain-qualified finalizer name"#),
    );
    check(|i| i.collect_label = "example.com/gc".into(), None);
    check(
        |i| i.protect_label = "keep".into(),
        Some(r#"invalid protect_label "keep": must be KEY=VALUE"#),
    );
    check(
        |i| i.protect_label = "bad key=yes".into(),
        Some(r#"invalid protect_label "bad key=yes": must be KEY=VALUE with a label key"#),
    );
    check(|i| i.protect_label = "keep=yes".into(), None);
    check(
        |i| i.exclude_selector = Some("team in (payments".into()),
        Some(&format!(
            r#"invalid exclude_selector "team in (payments": {SELECTOR_RULE}"#
        )),
    );
    check(
        |i| i.exclude_selector = Some(String::new()),
        Some(&format!(r#"invalid exclude_selector "": {SELECTOR_RULE}"#)),
    );
    check(
        |i| i.exclude_selector = Some("team in (payments)".into()),
        None,
    );
}

/// Finalizers under the domains Kubernetes reserves belong to its own controllers (a Job's
/// `batch.kubernetes.io/job-tracking`, a volume's `kubernetes.io/pvc-protection`): as the
/// pin, recovery would release or finish every Pod carrying one, whatever its labels.
#[test]
fn a_pin_in_a_reserved_domain_is_refused() {
    for reserved in [
        "batch.kubernetes.io/job-tracking",
        "kubernetes.io/pvc-protection",
        "k8s.io/collector",
        "node.k8s.io/x",
        "a.b.kubernetes.io/x",
    ] {
        check(
            |i| i.pin_finalizer = reserved.into(),
            Some(&format!(
                "invalid pin_finalizer {reserved:?}: {RESERVED_FINALIZER_RULE}"
            )),
        );
    }
    for own in [
        "diagnostics.example.com/collector",
        "kubernetes.io.example.com/x",
        "notkubernetes.io/x",
        "k8s.io.example.com/x",
        "example.com/kubernetes.io",
    ] {
        check(|i| i.pin_finalizer = own.into(), None);
    }
    assert!(RESERVED_FINALIZER_RULE.contains("kubernetes.io"));
    assert!(RESERVED_FINALIZER_RULE.contains("k8s.io"));
}

#[test]
fn the_exclude_selector_is_kept_canonical() {
    let cfg = PodInputs {
        exclude_selector: Some("team in (b,a), !x".into()),
        ..PodInputs::default()
    }
    .validate()
    .unwrap();
    let inputs = cfg.inputs();
    assert_eq!(inputs.exclude_selector.as_deref(), Some("team in (a,b),!x"));
    assert_eq!(inputs.protect_label, "gc.example.com/protect=true");
    assert_eq!(inputs.validate(), Ok(cfg));
}
