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
mod tests;
