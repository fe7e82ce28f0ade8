//! Which Pods the failed-Pod collector may take, and the instant their retention runs from.
//!
//! [`assess`] follows the reference flow's `eligible` clause by clause, in its order, and
//! [`anchor`] its `anchor`; both read a Pod's raw JSON lazily through [`crate::raw`], so that bad
//! data fails exactly where the flow fails and is ignored where the flow never looks.

use serde::{Deserialize, Serialize};

use crate::isotime::{self, TimeError};
use crate::raw::{self, keep, Kind, Raw};

/// One Pod of an inventory: its metadata and status as raw JSON text.
#[derive(Debug, Clone, Copy)]
pub struct PodRecord<'a> {
    /// `metadata`, any JSON value (the planner refuses anything but an object).
    pub metadata: Raw<'a>,
    /// `status`; `None` when absent or `null`.
    pub status: Option<Raw<'a>>,
}

/// The container status lists, in the order the rules read them.
pub const CONTAINER_FIELDS: [&str; 3] =
    ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"];

/// Why a Pod is not eligible. Each variant is one clause of the eligibility rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "clause", rename_all = "camelCase")]
pub enum Ineligible {
    /// `metadata.namespace` is not the target namespace.
    OtherNamespace,
    /// `status.phase` is not `Failed`.
    NotFailed {
        /// The phase found, when it is a string.
        phase: Option<String>,
    },
    /// `metadata.uid` is missing or empty.
    NoUid,
    /// `metadata.resourceVersion` is missing or empty.
    NoResourceVersion,
    /// The collect label is missing or not `"true"`.
    NotLabelled,
    /// The Pod has ownerReferences: its owner's controller cleans it up.
    Owned,
    /// A static Pod's mirror (annotation `kubernetes.io/config.mirror`): the kubelet owns it.
    Mirror,
    /// Finalizers other than exactly the pin.
    ForeignFinalizers,
    /// Being deleted without the pin: someone else is removing it.
    DeletingUnpinned,
    /// A container is still running or waiting.
    ContainerActive {
        /// `containerStatuses`, `initContainerStatuses` or `ephemeralContainerStatuses`.
        field: &'static str,
        /// Position in that list.
        index: usize,
        /// `running` or `waiting`.
        state: &'static str,
    },
}

impl std::fmt::Display for Ineligible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OtherNamespace => f.write_str("in another namespace"),
            Self::NotFailed { phase: Some(p) } => write!(f, "phase is {p}, not Failed"),
            Self::NotFailed { phase: None } => f.write_str("no phase, not Failed"),
            Self::NoUid => f.write_str("no uid"),
            Self::NoResourceVersion => f.write_str("no resourceVersion"),
            Self::NotLabelled => f.write_str("collect label is not \"true\""),
            Self::Owned => f.write_str("has ownerReferences"),
            Self::Mirror => f.write_str("mirror pod"),
            Self::ForeignFinalizers => f.write_str("has finalizers other than the pin"),
            Self::DeletingUnpinned => f.write_str("being deleted without the pin"),
            Self::ContainerActive { field, index, state } => {
                write!(f, "status.{field}[{index}] is {state}")
            }
        }
    }
}

/// A field of a Pod that breaks the rules' expectations: the plan fails on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadField {
    /// JSON path of the field, from the Pod (`status.containerStatuses[1].state`).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> BadField {
    BadField { field: field.into(), problem: problem.into() }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaFields<'a> {
    #[serde(borrow, default, deserialize_with = "keep")]
    namespace: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    name: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    uid: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    resource_version: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    labels: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    owner_references: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    annotations: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    finalizers: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    deletion_timestamp: Option<Raw<'a>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StatusFields<'a> {
    #[serde(borrow, default, deserialize_with = "keep")]
    phase: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    container_statuses: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    init_container_statuses: Option<Raw<'a>>,
    #[serde(borrow, default, deserialize_with = "keep")]
    ephemeral_container_statuses: Option<Raw<'a>>,
}

impl<'a> StatusFields<'a> {
    fn lists(&self) -> [(&'static str, Option<Raw<'a>>); 3] {
        [
            (CONTAINER_FIELDS[0], self.container_statuses),
            (CONTAINER_FIELDS[1], self.init_container_statuses),
            (CONTAINER_FIELDS[2], self.ephemeral_container_statuses),
        ]
    }
}

fn truthy(raw: Option<Raw<'_>>) -> bool {
    raw.is_some_and(raw::truthy)
}

/// The fields of a Pod that identify it, decoded once.
#[derive(Debug)]
pub struct Identity<'a> {
    metadata_raw: Raw<'a>,
    meta: MetaFields<'a>,
    status: Option<StatusFields<'a>>,
    status_raw: Option<Raw<'a>>,
}

impl<'a> Identity<'a> {
    /// Reads the fields the rules use. Fails only when `metadata` is not an object (the flow's
    /// `meta.get` would raise) or a field repeats.
    ///
    /// # Errors
    /// [`BadField`] naming `metadata` or `status`.
    pub fn read(pod: PodRecord<'a>) -> Result<Self, BadField> {
        if raw::kind(pod.metadata) != Kind::Object {
            return Err(bad("metadata", "not an object"));
        }
        let meta: MetaFields<'a> = serde_json::from_str(pod.metadata.get())
            .map_err(|e| bad("metadata", e.to_string()))?;
        // `s.get('status') or {}`: a falsy status reads as an empty one.
        let status_raw = pod.status.filter(|s| raw::truthy(s));
        Ok(Self { metadata_raw: pod.metadata, meta, status: None, status_raw })
    }

    /// `metadata.name` as text for people (its JSON text when not a string).
    pub fn display_name(&self) -> Option<String> {
        self.meta.name.map(|n| raw::as_str(n).map_or_else(|| n.get().to_owned(), Into::into))
    }

    /// `metadata.name` exactly as given, when present (even `null`).
    pub fn name_raw(&self) -> Option<Raw<'a>> {
        self.meta.name
    }

    /// `metadata.uid` when it is a string.
    pub fn uid(&self) -> Option<String> {
        self.meta.uid.and_then(raw::as_str).map(Into::into)
    }

    /// `metadata.resourceVersion` (its JSON text when not a string).
    pub fn resource_version(&self) -> Option<String> {
        self.meta.resource_version.map(|v| raw::as_str(v).map_or_else(|| v.get().to_owned(), Into::into))
    }

    /// The whole `metadata` text.
    pub fn metadata_raw(&self) -> Raw<'a> {
        self.metadata_raw
    }

    /// The status as the rules read it: `{}` when absent or falsy.
    pub fn status_raw(&self) -> Option<Raw<'a>> {
        self.status_raw
    }

    fn status(&mut self) -> Result<&StatusFields<'a>, BadField> {
        if self.status.is_none() {
            let fields = match self.status_raw {
                None => StatusFields::default(),
                Some(s) if raw::kind(s) != Kind::Object => return Err(bad("status", "not an object")),
                Some(s) => serde_json::from_str(s.get()).map_err(|e| bad("status", e.to_string()))?,
            };
            self.status = Some(fields);
        }
        Ok(self.status.as_ref().unwrap_or_else(|| unreachable!()))
    }
}

/// The reference flow's `eligible(meta, status, namespace)`, clause by clause.
///
/// # Errors
/// [`BadField`] where the flow raises: labels or annotations of the wrong type, a container
/// status list that is not a list of objects, a container `state` that is a number.
pub fn assess(
    pod: &mut Identity<'_>,
    namespace: &str,
    collect_label: &str,
    pin: &str,
) -> Result<Option<Ineligible>, BadField> {
    if !raw::is_str(pod.meta.namespace, namespace) {
        return Ok(Some(Ineligible::OtherNamespace));
    }
    let phase = pod.status()?.phase;
    if !raw::is_str(phase, "Failed") {
        let phase = phase.and_then(raw::as_str).map(Into::into);
        return Ok(Some(Ineligible::NotFailed { phase }));
    }
    let meta = &pod.meta;
    if !truthy(meta.uid) {
        return Ok(Some(Ineligible::NoUid));
    }
    if !truthy(meta.resource_version) {
        return Ok(Some(Ineligible::NoResourceVersion));
    }
    let label = match meta.labels.filter(|l| raw::truthy(l)) {
        None => None,
        Some(labels) => raw::get(labels, collect_label)
            .map_err(|()| bad("metadata.labels", "not an object"))?,
    };
    if !raw::is_str(label, "true") {
        return Ok(Some(Ineligible::NotLabelled));
    }
    if truthy(meta.owner_references) {
        return Ok(Some(Ineligible::Owned));
    }
    if let Some(annotations) = meta.annotations.filter(|a| raw::truthy(a)) {
        let mirror = raw::contains(annotations, "kubernetes.io/config.mirror")
            .ok_or_else(|| bad("metadata.annotations", "not an object"))?;
        if mirror {
            return Ok(Some(Ineligible::Mirror));
        }
    }
    let pinned = match meta.finalizers.filter(|f| raw::truthy(f)) {
        None => false,
        Some(f) => {
            let exactly_pin = raw::items(f).is_ok_and(|xs| xs.len() == 1 && raw::is_str(Some(xs[0]), pin));
            if !exactly_pin {
                return Ok(Some(Ineligible::ForeignFinalizers));
            }
            true
        }
    };
    if truthy(meta.deletion_timestamp) && !pinned {
        return Ok(Some(Ineligible::DeletingUnpinned));
    }
    for (field, list) in pod.status()?.lists() {
        let Some(list) = list.filter(|l| raw::truthy(l)) else { continue };
        let containers = raw::items(list).map_err(|()| bad(format!("status.{field}"), "not a list"))?;
        for (index, c) in containers.into_iter().enumerate() {
            let path = || format!("status.{field}[{index}]");
            if raw::kind(c) != Kind::Object {
                return Err(bad(path(), "malformed container status (not an object)"));
            }
            let state = raw::get(c, "state").unwrap_or_default().filter(|s| raw::truthy(s));
            let Some(state) = state else { continue };
            for active in ["running", "waiting"] {
                let found = raw::contains(state, active)
                    .ok_or_else(|| bad(format!("{}.state", path()), "not an object"))?;
                if found {
                    return Ok(Some(Ineligible::ContainerActive { field, index, state: active }));
                }
            }
        }
    }
    Ok(None)
}

/// What a retention period runs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Basis {
    /// Every container terminated: the latest `finishedAt`.
    #[serde(rename = "finishedAt")]
    FinishedAt,
    /// Otherwise: when the collector first saw the Pod eligible.
    #[serde(rename = "observedFailed")]
    ObservedFailed,
}

impl Basis {
    /// The name used in plans and archives.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FinishedAt => "finishedAt",
            Self::ObservedFailed => "observedFailed",
        }
    }
}

/// The reference flow's `anchor(status, first)`: the latest `finishedAt` when every container
/// status carries one, else `None` (the caller uses the first observation).
///
/// # Errors
/// [`BadField`] for a container `state` that is not an object, a `finishedAt` that is not a
/// string, or one that is not an ISO 8601 timestamp with a time zone.
pub fn finished_at(pod: &mut Identity<'_>) -> Result<Option<f64>, BadField> {
    let mut containers = 0usize;
    let mut latest: Option<f64> = None;
    let mut finished = 0usize;
    for (field, list) in pod.status()?.lists() {
        let Some(list) = list.filter(|l| raw::truthy(l)) else { continue };
        let items = raw::items(list).map_err(|()| bad(format!("status.{field}"), "not a list"))?;
        for (index, c) in items.into_iter().enumerate() {
            containers += 1;
            let path = format!("status.{field}[{index}].state");
            // `c.get('state', {})`: absent reads as `{}`, but a present `null` raises.
            let Some(state) = raw::get(c, "state").map_err(|()| bad(&path, "malformed container status"))? else {
                continue;
            };
            let terminated = raw::get(state, "terminated").map_err(|()| bad(&path, "not an object"))?;
            let Some(terminated) = terminated.filter(|t| raw::kind(t) == Kind::Object) else { continue };
            let at = raw::get(terminated, "finishedAt").unwrap_or_default().filter(|f| raw::truthy(f));
            let Some(at) = at else { continue };
            let field = format!("{path}.terminated.finishedAt");
            let text = raw::as_str(at).ok_or_else(|| bad(&field, "missing timestamp (not a string)"))?;
            let t = isotime::parse_timestamp(&text).map_err(|e| match e {
                TimeError::NoTimezone(_) => bad(&field, format!("timestamp has no time zone: {text:?}")),
                TimeError::Invalid(_) => bad(&field, format!("not an ISO 8601 timestamp: {text:?}")),
            })?;
            finished += 1;
            latest = Some(latest.map_or(t, |l: f64| l.max(t)));
        }
    }
    Ok(if containers > 0 && finished == containers { latest } else { None })
}
