//! The failed-Pod collector's inputs, validated exactly as the reference flow's first task does.

use serde::{Deserialize, Serialize};

use crate::input::{
    InputError, RESERVED_FINALIZER_RULE, check_scope, in_range, in_reserved_domain, invalid,
    is_qualified_name,
};
use crate::selector::{DEFAULT_PROTECT_LABEL, LabelPair, Labels, SELECTOR_RULE, Selector, Spared};

/// The default label that opts a Pod in to collection.
pub const DEFAULT_COLLECT_LABEL: &str = "diagnostics.example.com/collect";
/// The default finalizer that pins a Pod's identity while it is archived and removed.
pub const DEFAULT_PIN_FINALIZER: &str = "diagnostics.example.com/collector";

/// The failed-Pod collector's inputs as given, before validation. Numbers are wide and signed so
/// that an out-of-range value reaches validation and is named there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodInputs {
    /// Identifies the cluster in ledger keys, receipts and archive names.
    pub cluster_id: String,
    /// The one namespace the collector looks at.
    pub namespace: String,
    /// Minimum hold after complete container termination or first observed Failed status.
    pub retention_seconds: i64,
    /// At most this many Pods are targeted per run.
    pub max_pods: i64,
    /// The plan fails when the inventory holds more Pods than this.
    pub max_inventory: i64,
    /// The plan fails when a target's archive would be larger than this.
    pub max_archive_bytes: i64,
    /// Label whose value `"true"` opts a Pod in.
    pub collect_label: String,
    /// The pin finalizer's name.
    pub pin_finalizer: String,
    /// `KEY=VALUE`: a Pod with this label is never targeted (it is reported `protected`).
    pub protect_label: String,
    /// A label selector: a Pod it matches is never targeted (it is reported `excluded`).
    pub exclude_selector: Option<String>,
}

impl Default for PodInputs {
    fn default() -> Self {
        Self {
            cluster_id: "primary".into(),
            namespace: "default".into(),
            retention_seconds: 86_400,
            max_pods: 5,
            max_inventory: 1_000,
            max_archive_bytes: 262_144,
            collect_label: DEFAULT_COLLECT_LABEL.into(),
            pin_finalizer: DEFAULT_PIN_FINALIZER.into(),
            protect_label: DEFAULT_PROTECT_LABEL.into(),
            exclude_selector: None,
        }
    }
}

/// Inputs that passed [`PodInputs::validate`]; the only form the planner accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodConfig {
    /// See [`PodInputs::cluster_id`].
    pub cluster_id: String,
    /// See [`PodInputs::namespace`].
    pub namespace: String,
    /// See [`PodInputs::retention_seconds`].
    pub retention_seconds: u32,
    /// See [`PodInputs::max_pods`].
    pub max_pods: usize,
    /// See [`PodInputs::max_inventory`].
    pub max_inventory: usize,
    /// See [`PodInputs::max_archive_bytes`].
    pub max_archive_bytes: usize,
    /// See [`PodInputs::collect_label`].
    pub collect_label: String,
    /// See [`PodInputs::pin_finalizer`].
    pub pin_finalizer: String,
    /// See [`PodInputs::protect_label`].
    pub protect_label: LabelPair,
    /// See [`PodInputs::exclude_selector`] (in canonical form).
    pub exclude_selector: Option<Selector>,
}

impl PodConfig {
    /// The eligibility rules this config sets: its namespace, collect label and pin.
    pub fn rules(&self) -> crate::pods::facts::Rules<'_> {
        crate::pods::facts::Rules {
            namespace: &self.namespace,
            collect_label: &self.collect_label,
            pin: &self.pin_finalizer,
            protect: Some(&self.protect_label),
            exclude: self.exclude_selector.as_ref(),
        }
    }

    /// Whether a Pod with `labels` is spared: it carries the protect label, or matches the
    /// exclude selector (the protect label is checked first).
    pub fn spared(&self, labels: &Labels) -> Option<Spared> {
        Spared::of(labels, &self.protect_label, self.exclude_selector.as_ref())
    }

    /// The inputs this config was validated from.
    pub fn inputs(&self) -> PodInputs {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        PodInputs {
            cluster_id: self.cluster_id.clone(),
            namespace: self.namespace.clone(),
            retention_seconds: i64::from(self.retention_seconds),
            max_pods: n(self.max_pods),
            max_inventory: n(self.max_inventory),
            max_archive_bytes: n(self.max_archive_bytes),
            collect_label: self.collect_label.clone(),
            pin_finalizer: self.pin_finalizer.clone(),
            protect_label: self.protect_label.to_string(),
            exclude_selector: self.exclude_selector.as_ref().map(ToString::to_string),
        }
    }
}

impl PodInputs {
    /// Checks every input, in the reference flow's order, and returns the planner's config.
    ///
    /// # Errors
    /// The first input that breaks its rule, named: `cluster_id` (`[a-z0-9][a-z0-9-]{0,39}`),
    /// `namespace` (a DNS label, not a system namespace), `retention_seconds` (1..=31536000),
    /// `max_pods` (1..=50), `max_inventory` (`max_pods`..=10000), `max_archive_bytes`
    /// (1024..=1048576), the collect label and pin finalizer names (qualified names; the pin
    /// domain-qualified and not under a domain Kubernetes reserves, `kubernetes.io` and `k8s.io`
    /// with their subdomains), the protect label (`KEY=VALUE`) and the exclude selector (a label
    /// selector; see [`Selector::parse`] for where one goes wrong).
    pub fn validate(&self) -> Result<PodConfig, InputError> {
        check_scope(&self.cluster_id, &self.namespace)?;
        in_range(
            "retention_seconds",
            self.retention_seconds,
            1,
            31_536_000,
            "must be between 1 and 31536000",
        )?;
        in_range("max_pods", self.max_pods, 1, 50, "must be between 1 and 50")?;
        in_range(
            "max_inventory",
            self.max_inventory,
            self.max_pods,
            10_000,
            "must be between max_pods and 10000",
        )?;
        in_range(
            "max_archive_bytes",
            self.max_archive_bytes,
            1024,
            1_048_576,
            "must be between 1024 and 1048576",
        )?;
        if !is_qualified_name(&self.collect_label) {
            return Err(invalid(
                "collect_label",
                &self.collect_label,
                "must be a label key",
            ));
        }
        if !is_qualified_name(&self.pin_finalizer) || !self.pin_finalizer.contains('/') {
            return Err(invalid(
                "pin_finalizer",
                &self.pin_finalizer,
                "must be a domain-qualified finalizer name",
            ));
        }
        // Recovery releases or finishes every Pod carrying the pin, whatever its labels: the
        // pin must be a name only this collector writes, never another controller's.
        if in_reserved_domain(&self.pin_finalizer) {
            return Err(invalid(
                "pin_finalizer",
                &self.pin_finalizer,
                RESERVED_FINALIZER_RULE,
            ));
        }
        let protect_label = LabelPair::parse(&self.protect_label)
            .map_err(|rule| invalid("protect_label", &self.protect_label, rule))?;
        let exclude_selector = self
            .exclude_selector
            .as_deref()
            .map(|text| {
                Selector::parse(text).map_err(|_| invalid("exclude_selector", text, SELECTOR_RULE))
            })
            .transpose()?;
        let n = |v: i64| usize::try_from(v).unwrap_or(0);
        Ok(PodConfig {
            cluster_id: self.cluster_id.clone(),
            namespace: self.namespace.clone(),
            retention_seconds: u32::try_from(self.retention_seconds).unwrap_or(0),
            max_pods: n(self.max_pods),
            max_inventory: n(self.max_inventory),
            max_archive_bytes: n(self.max_archive_bytes),
            collect_label: self.collect_label.clone(),
            pin_finalizer: self.pin_finalizer.clone(),
            protect_label,
            exclude_selector,
        })
    }
}

#[cfg(test)]
mod tests {
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
}
