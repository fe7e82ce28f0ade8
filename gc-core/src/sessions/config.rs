//! The orphaned-session collector's settings: the kinds it scans, how it reads a session id,
//! the grace period, the cap and the mass-deletion guard, validated once.

use serde::{Deserialize, Serialize};

use crate::input::InputError;
use crate::selector::{DEFAULT_PROTECT_LABEL, LabelPair, Labels, SELECTOR_RULE, Selector, Spared};

/// A resource kind the collector scans, by API group, version, kind and plural.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kind {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
}

impl Kind {
    /// `group/version`, or `version` for the core group: the objects' `apiVersion`.
    #[must_use]
    pub fn api_version(&self) -> String {
        match self.group.as_str() {
            "" => self.version.clone(),
            group => format!("{group}/{}", self.version),
        }
    }

    fn new(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    /// StreamSpace's: Deployments, Services, PersistentVolumeClaims, and `Session` objects under
    /// both groups its chart installs the definition with (`stream.space` and
    /// `stream.streamspace.io`; a group not installed is reported, not an error).
    pub fn streamspace() -> Vec<Self> {
        vec![
            Self::new("apps", "v1", "Deployment", "deployments"),
            Self::new("", "v1", "Service", "services"),
            Self::new("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            Self::new("stream.space", "v1alpha1", "Session", "sessions"),
            Self::new("stream.streamspace.io", "v1alpha1", "Session", "sessions"),
        ]
    }

    /// A kind by StreamSpace name (`deployment`, `pvc`, `Session`, ... any case; a `Session`
    /// is `stream.space`'s) or as `group/version/Kind/plural` (core group: `v1/Kind/plural`).
    ///
    /// # Errors
    /// A message naming `text` and the forms accepted.
    pub fn parse(text: &str) -> Result<Self, String> {
        let known = Self::streamspace();
        let short = text.to_ascii_lowercase();
        let short = if short == "pvc" || short == "pvcs" {
            "persistentvolumeclaims".to_owned()
        } else {
            short
        };
        if let Some(kind) = known
            .iter()
            .find(|k| k.kind.to_ascii_lowercase() == short || k.plural == short)
        {
            return Ok(kind.clone());
        }
        let parts: Vec<&str> = text.split('/').collect();
        let (group, rest) = match parts.as_slice() {
            [group, version, kind, plural] => (*group, [*version, *kind, *plural]),
            [version, kind, plural] => ("", [*version, *kind, *plural]),
            _ => {
                return Err(format!(
                    "{text:?} is neither Deployment, Service, PersistentVolumeClaim, Session nor \
                     group/version/Kind/plural"
                ));
            }
        };
        let [version, kind, plural] = rest;
        if [version, kind, plural].iter().any(|p| p.is_empty()) {
            return Err(format!(
                "{text:?}: version, Kind and plural must not be empty"
            ));
        }
        Ok(Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
        })
    }
}

impl SessionConfig {
    /// The kind `resource` was scanned as (its `apiVersion` and Kind).
    #[must_use]
    pub fn kind_of(&self, resource: &crate::sessions::Resource) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.kind == resource.kind && k.api_version() == resource.api_version)
    }
}

/// The session collector's settings (validated by [`SessionInputs::validate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionConfig {
    /// Identifies the cluster in audit records.
    pub cluster_id: String,
    /// The one namespace scanned.
    pub namespace: String,
    /// Label selector choosing session resources (`app=streamspace-session`), in canonical form:
    /// the API server receives it as the list's `labelSelector`.
    pub selector: String,
    /// Label holding the session id (`session`).
    pub id_label: String,
    /// Kinds scanned.
    pub kinds: Vec<Kind>,
    /// Orphans younger than this many hours are held.
    pub grace_hours: u32,
    /// Database states that count as gone (empty: only a missing row is an orphan).
    pub terminal_states: Vec<String>,
    /// Database states known to be live (kept, said nothing of). A row in a state that is neither
    /// live nor terminal is kept too, and the plan counts it in
    /// [`SessionPlan::unknown_states`](crate::sessions::SessionPlan::unknown_states), so that a
    /// state the application added is noticed. Empty: every state that is not terminal is live,
    /// and nothing is counted.
    #[serde(default)]
    pub live_states: Vec<String>,
    /// At most this many deletes per run.
    pub max_deletes: usize,
    /// The guard refuses a run whose orphans exceed this share of the resources scanned...
    pub guard_ratio: f64,
    /// ...and this count.
    pub guard_floor: usize,
    /// Run even when the guard would refuse.
    pub override_guard: bool,
    /// A resource with this label is never deleted (it is reported `protected`).
    pub protect_label: LabelPair,
    /// A resource this selector matches is never deleted (it is reported `excluded`).
    pub exclude_selector: Option<Selector>,
    /// Before a claim is deleted, the volume bound to it with reclaim policy `Delete` is set to
    /// `Retain`; this many days later a run gives it back its policy (and Kubernetes deletes
    /// it). 0: volumes are no longer retained, and those kept earlier get their policy back.
    pub retain_volume_days: u32,
    /// Which kept volumes this namespace's run reviews: its own, or (one namespace of each run)
    /// also those of every namespace the run does not select.
    #[serde(skip)]
    pub volume_review: crate::sessions::volumes::VolumeReview,
    /// The `column = value` pairs a session row must hold to count as live here (the store's
    /// scope, `--scope-column`): only named in the reasons, so that a row of another scope is
    /// not called missing from the database.
    pub lookup_scope: Vec<(String, String)>,
    /// A requested collection: only the sessions asked for may be deleted, with the operator's
    /// grace for requests; every resource is still judged, and the guard still weighs the whole
    /// namespace. `None`: a scheduled run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<crate::sessions::requests::Narrowed>,
}

impl SessionConfig {
    /// Whether a resource with `labels` is spared: it carries the protect label, or matches the
    /// exclude selector (the protect label is checked first).
    pub fn spared(&self, labels: &Labels) -> Option<Spared> {
        Spared::of(labels, &self.protect_label, self.exclude_selector.as_ref())
    }
}

/// The settings as given, before validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInputs {
    /// See [`SessionConfig`].
    pub cluster_id: String,
    /// See [`SessionConfig`].
    pub namespace: String,
    /// See [`SessionConfig`].
    pub selector: String,
    /// See [`SessionConfig`].
    pub id_label: String,
    /// See [`SessionConfig`].
    pub kinds: Vec<Kind>,
    /// See [`SessionConfig`].
    pub grace_hours: i64,
    /// See [`SessionConfig`].
    pub terminal_states: Vec<String>,
    /// See [`SessionConfig`].
    #[serde(default)]
    pub live_states: Vec<String>,
    /// See [`SessionConfig`].
    pub max_deletes: i64,
    /// See [`SessionConfig`].
    pub guard_ratio: f64,
    /// See [`SessionConfig`].
    pub guard_floor: i64,
    /// See [`SessionConfig`].
    pub override_guard: bool,
    /// `KEY=VALUE`; see [`SessionConfig`].
    pub protect_label: String,
    /// A label selector; see [`SessionConfig`].
    pub exclude_selector: Option<String>,
    /// See [`SessionConfig`].
    pub retain_volume_days: i64,
    /// See [`SessionConfig`].
    #[serde(default)]
    pub lookup_scope: Vec<(String, String)>,
}

impl Default for SessionInputs {
    fn default() -> Self {
        Self {
            cluster_id: "primary".into(),
            namespace: "streamspace".into(),
            selector: "app=streamspace-session".into(),
            id_label: "session".into(),
            kinds: Kind::streamspace(),
            grace_hours: 24,
            terminal_states: Vec::new(),
            live_states: Vec::new(),
            max_deletes: 100,
            guard_ratio: 0.5,
            guard_floor: 10,
            override_guard: false,
            protect_label: DEFAULT_PROTECT_LABEL.into(),
            exclude_selector: None,
            retain_volume_days: 7,
            lookup_scope: Vec::new(),
        }
    }
}

impl SessionInputs {
    /// Checks every setting.
    ///
    /// # Errors
    /// [`InputError`] naming the first bad setting. The selector and the exclude selector must
    /// be label selectors ([`Selector::parse`] says where one goes wrong); the protect label
    /// `KEY=VALUE`.
    pub fn validate(&self) -> Result<SessionConfig, InputError> {
        let bad = |input, value: String, rule| Err(InputError::Invalid { input, value, rule });
        crate::input::check_scope(&self.cluster_id, &self.namespace)?;
        let Ok(selector) = Selector::parse(&self.selector) else {
            return bad("selector", self.selector.clone(), SELECTOR_RULE);
        };
        let label = |s: &str| !s.is_empty() && !s.contains([',', '!', '(', ')', ' ']);
        if !label(&self.id_label) || self.id_label.contains('=') {
            return bad("id_label", self.id_label.clone(), "must be a label key");
        }
        if self.kinds.is_empty()
            || self
                .kinds
                .iter()
                .any(|k| k.kind.is_empty() || k.version.is_empty() || k.plural.is_empty())
        {
            return bad(
                "kinds",
                format!("{:?}", self.kinds),
                "must name at least one kind with version and plural",
            );
        }
        // A run finds a resource's kind again by its group and Kind: two kinds must not share
        // both.
        for (i, k) in self.kinds.iter().enumerate() {
            if self.kinds[..i]
                .iter()
                .any(|seen| seen.kind == k.kind && seen.group == k.group)
            {
                let named = format!("{}/{}", k.api_version(), k.kind);
                return bad("kinds", named, "a kind is given twice");
            }
        }
        for (input, states) in [
            ("terminal_states", &self.terminal_states),
            ("live_states", &self.live_states),
        ] {
            if states.iter().any(String::is_empty) {
                return bad(input, String::new(), "a state must not be empty");
            }
        }
        if let Some(both) = self
            .live_states
            .iter()
            .find(|s| self.terminal_states.contains(s))
        {
            return bad(
                "live_states",
                both.clone(),
                "a state cannot be both live and terminal",
            );
        }
        if !(0..=24 * 365).contains(&self.grace_hours) {
            return bad(
                "grace_hours",
                self.grace_hours.to_string(),
                "must be between 0 and 8760",
            );
        }
        if !(1..=10_000).contains(&self.max_deletes) {
            return bad(
                "max_deletes",
                self.max_deletes.to_string(),
                "must be between 1 and 10000",
            );
        }
        if !(self.guard_ratio > 0.0 && self.guard_ratio <= 1.0) {
            return bad(
                "guard_ratio",
                self.guard_ratio.to_string(),
                "must be in (0, 1]",
            );
        }
        if self.guard_floor < 0 {
            return bad(
                "guard_floor",
                self.guard_floor.to_string(),
                "must not be negative",
            );
        }
        if !(0..=3650).contains(&self.retain_volume_days) {
            return bad(
                "retain_volume_days",
                self.retain_volume_days.to_string(),
                "must be between 0 and 3650",
            );
        }
        let protect_label = match LabelPair::parse(&self.protect_label) {
            Ok(p) => p,
            Err(rule) => return bad("protect_label", self.protect_label.clone(), rule),
        };
        let exclude_selector = match self.exclude_selector.as_deref().map(Selector::parse) {
            None => None,
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => return bad("exclude_selector", e.input, SELECTOR_RULE),
        };
        Ok(SessionConfig {
            cluster_id: self.cluster_id.clone(),
            namespace: self.namespace.clone(),
            selector: selector.to_string(),
            id_label: self.id_label.clone(),
            kinds: self.kinds.clone(),
            grace_hours: u32::try_from(self.grace_hours).unwrap_or(0),
            terminal_states: self.terminal_states.clone(),
            live_states: self.live_states.clone(),
            max_deletes: usize::try_from(self.max_deletes).unwrap_or(0),
            guard_ratio: self.guard_ratio,
            guard_floor: usize::try_from(self.guard_floor).unwrap_or(0),
            override_guard: self.override_guard,
            protect_label,
            exclude_selector,
            retain_volume_days: u32::try_from(self.retain_volume_days).unwrap_or(0),
            volume_review: crate::sessions::volumes::VolumeReview::Own,
            lookup_scope: self.lookup_scope.clone(),
            request: None,
        })
    }
}

#[cfg(test)]
mod tests;
