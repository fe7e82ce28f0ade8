//! Which Pods the failed-Pod collector may take, and the instant their retention runs from.
//!
//! A Pod's metadata and status are each read once into facts ([`MetaFacts`], [`StatusFacts`]):
//! the outcome of every clause of the reference flow's `eligible` and `anchor`, including the
//! errors they would raise. [`assess`] then combines the facts in the flow's order, so bad data
//! fails exactly where the flow fails and is ignored exactly where the flow never looks. Facts
//! are small: a plan holds them, never the Pods' JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::isotime::{self, TimeError};
use crate::pods::skim::{self, Member, Schema, member};
use crate::raw::{self, JsonType, Raw};
use crate::selector::{LabelPair, Labels, Selector};

/// The list fields of a Pod status that hold container statuses, in the order the rules read them.
pub const CONTAINER_FIELDS: [&str; 3] = [
    "containerStatuses",
    "initContainerStatuses",
    "ephemeralContainerStatuses",
];

const STATE: Schema = Schema {
    keys: &[(
        "terminated",
        Schema {
            keys: &[("finishedAt", Schema::LEAF)],
            any: false,
            elements: None,
        },
    )],
    any: true,
    elements: None,
};
const CONTAINER: Schema = Schema {
    keys: &[("state", STATE)],
    any: false,
    elements: None,
};
const CONTAINERS: Schema = Schema {
    keys: &[],
    any: false,
    elements: Some(&CONTAINER),
};

/// The members of a Pod's `metadata` the rules read.
pub const METADATA: Schema = Schema {
    keys: &[
        ("namespace", Schema::LEAF),
        ("name", Schema::LEAF),
        ("uid", Schema::LEAF),
        ("resourceVersion", Schema::LEAF),
        ("labels", Schema::ANY),
        ("ownerReferences", Schema::LEAF),
        ("annotations", Schema::ANY),
        ("finalizers", Schema::LEAF),
        ("deletionTimestamp", Schema::LEAF),
    ],
    any: false,
    elements: None,
};

/// The members of a Pod's `status` the rules read.
pub const STATUS: Schema = Schema {
    keys: &[
        ("phase", Schema::LEAF),
        (CONTAINER_FIELDS[0], CONTAINERS),
        (CONTAINER_FIELDS[1], CONTAINERS),
        (CONTAINER_FIELDS[2], CONTAINERS),
    ],
    any: false,
    elements: None,
};

/// A Pod object (`{"metadata": ..., "status": ...}`).
pub const POD: Schema = Schema {
    keys: &[("metadata", METADATA), ("status", STATUS)],
    any: false,
    elements: None,
};

/// What the rules compare against: the target namespace, the label and the pin.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'c> {
    /// The one namespace collected.
    pub namespace: &'c str,
    /// Label whose value `"true"` opts a Pod in.
    pub collect_label: &'c str,
    /// The pin finalizer.
    pub pin: &'c str,
    /// The protect label, if the labels are to be read for it.
    pub protect: Option<&'c LabelPair>,
    /// The exclude selector, if any.
    pub exclude: Option<&'c Selector>,
}

impl Rules<'_> {
    /// Whether the label `key` is one the protect label or the exclude selector reads: only
    /// those labels of a Pod are kept, so sparing costs nothing for the others.
    fn reads_label(&self, key: &str) -> bool {
        self.protect.is_some_and(|p| p.key == key)
            || self
                .exclude
                .is_some_and(|s| s.requirements().iter().any(|r| r.key == key))
    }
}

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
            Self::ContainerActive {
                field,
                index,
                state,
            } => {
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

pub(crate) fn bad(field: impl Into<String>, problem: impl Into<String>) -> BadField {
    BadField {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A fact, or the error reading it raises: boxed, since errors are rare and facts are many.
type Fact<T> = Result<T, Box<BadField>>;

/// What retention runs from.
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

fn truthy(raw: Option<Raw<'_>>) -> bool {
    raw.is_some_and(raw::truthy)
}

/// The pin finalizer list as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finalizers {
    None,
    Pin,
    Foreign,
}

/// Everything the rules need from a Pod's `metadata`, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaFacts {
    in_namespace: bool,
    /// `metadata.name` as given; `None` when absent.
    pub name: Option<Value>,
    /// `metadata.uid` when it is a string.
    pub uid: Option<String>,
    uid_truthy: bool,
    /// `metadata.resourceVersion` (its JSON text when not a string).
    pub resource_version: Option<String>,
    rv_truthy: bool,
    labelled: Fact<bool>,
    owned: bool,
    mirror: Fact<bool>,
    finalizers: Finalizers,
    deleting: bool,
    /// The labels the protect label and the exclude selector read, of a Pod that carries the
    /// collect label (no other Pod is ever eligible, so no other Pod's labels are kept); a value
    /// that is not a string is kept as its JSON text.
    labels: Labels,
    /// Canonical length of `metadata`.
    canonical_len: usize,
}

impl MetaFacts {
    /// Reads the facts of one `metadata` value from its JSON text.
    ///
    /// # Errors
    /// [`BadField`] on `metadata` when it is not JSON or not an object (the flow's `meta.get`
    /// raises).
    pub fn read(metadata: &str, rules: Rules<'_>) -> Result<Self, Box<BadField>> {
        let mut members = Vec::new();
        let len = skim::skim(metadata, &METADATA, &mut members)
            .map_err(|e| Box::new(bad("metadata", e.to_string())))?;
        Self::from_members(metadata, &members, None, len, rules)
    }

    /// The facts of the object `metadata` whose members are those of `members` under `parent`.
    pub(crate) fn from_members(
        metadata: &str,
        members: &[Member<'_>],
        parent: Option<usize>,
        canonical_len: usize,
        rules: Rules<'_>,
    ) -> Result<Self, Box<BadField>> {
        if raw::kind(metadata) != JsonType::Object {
            return Err(Box::new(bad("metadata", "not an object")));
        }
        let field = |key: &str| member(members, parent, key).map(|(_, m)| m.value);
        // Members of `labels` and `annotations` objects are recorded by the skim: no new pass.
        let inner = |key: &str, name: &str| {
            let (i, m) = member(members, parent, key)?;
            Some(match raw::kind(m.value) {
                JsonType::Object => Ok(member(members, Some(i), name).map(|(_, m)| m.value)),
                _ if !raw::truthy(m.value) => Ok(None),
                _ => Err(m.value),
            })
        };
        let labelled = match inner("labels", rules.collect_label) {
            None => Ok(false),
            Some(found) => found
                .map(|v| raw::is_str(v, "true"))
                .map_err(|_| Box::new(bad("metadata.labels", "not an object"))),
        };
        let mirror = match inner("annotations", "kubernetes.io/config.mirror") {
            None => Ok(false),
            Some(Ok(found)) => Ok(found.is_some()),
            Some(Err(other)) => raw::contains(other, "kubernetes.io/config.mirror")
                .ok_or_else(|| Box::new(bad("metadata.annotations", "not an object"))),
        };
        let finalizers = match field("finalizers").filter(|f| raw::truthy(f)) {
            None => Finalizers::None,
            Some(f)
                if raw::items(f)
                    .is_ok_and(|xs| xs.len() == 1 && raw::is_str(Some(xs[0]), rules.pin)) =>
            {
                Finalizers::Pin
            }
            Some(_) => Finalizers::Foreign,
        };
        // The protect label and the exclude selector read the labels: only a Pod that may be
        // eligible keeps them, decoded from the members the skim recorded.
        let mut labels = Labels::new();
        if labelled == Ok(true)
            && let Some((li, _)) = member(members, parent, "labels")
        {
            for (_, m) in skim::children(members, li) {
                let key = if m.escaped {
                    serde_json::from_str::<String>(m.key)
                        .map_err(|_| Box::new(bad("metadata.labels", "unreadable key")))?
                } else {
                    let key = &m.key[1..m.key.len() - 1];
                    if !rules.reads_label(key) {
                        continue;
                    }
                    key.to_owned()
                };
                if rules.reads_label(&key) {
                    let value = raw::as_str(m.value).map_or_else(|| m.value.to_owned(), Into::into);
                    labels.insert(key, value);
                }
            }
        }
        let (uid, rv) = (field("uid"), field("resourceVersion"));
        Ok(Self {
            in_namespace: raw::is_str(field("namespace"), rules.namespace),
            name: field("name").and_then(|n| match raw::as_str(n) {
                Some(text) => Some(Value::String(text.into_owned())),
                None => serde_json::from_str(n).ok(),
            }),
            uid: uid.and_then(raw::as_str).map(Into::into),
            uid_truthy: truthy(uid),
            resource_version: rv.map(|v| raw::as_str(v).map_or_else(|| v.to_owned(), Into::into)),
            rv_truthy: truthy(rv),
            labelled,
            owned: truthy(field("ownerReferences")),
            mirror,
            finalizers,
            deleting: truthy(field("deletionTimestamp")),
            labels,
            canonical_len,
        })
    }

    /// The labels of a Pod that carries the collect label that the protect label and the
    /// exclude selector read (empty for any other Pod).
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// `metadata.name` for people (its JSON text when not a string).
    pub fn display_name(&self) -> Option<String> {
        self.name
            .as_ref()
            .map(|n| n.as_str().map_or_else(|| n.to_string(), str::to_owned))
    }
}

/// Everything the rules need from a Pod's `status`, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusFacts {
    /// `Err` when the status is a truthy value that is not an object (the flow raises on it).
    object: Fact<()>,
    phase: Option<String>,
    failed: bool,
    active: Fact<Option<Ineligible>>,
    finished_at: Fact<Option<f64>>,
    /// Canonical length of the status as archived (`{}` when absent or falsy).
    canonical_len: usize,
}

impl StatusFacts {
    /// Reads the facts of one `status` value from its JSON text (`None` when absent).
    ///
    /// # Errors
    /// [`BadField`] on `status` when it is not JSON.
    pub fn read(status: Option<&str>) -> Result<Self, BadField> {
        let mut members = Vec::new();
        let len = match status {
            Some(text) => {
                skim::skim(text, &STATUS, &mut members).map_err(|e| bad("status", e.to_string()))?
            }
            None => 0,
        };
        Ok(Self::from_members(status, &members, None, len))
    }

    /// The facts of `status` whose members are those of `members` under `parent`.
    pub(crate) fn from_members(
        status: Option<&str>,
        members: &[Member<'_>],
        parent: Option<usize>,
        canonical_len: usize,
    ) -> Self {
        // `s.get('status') or {}`: a falsy status reads as an empty one.
        let Some(status) = status.filter(|s| raw::truthy(s)) else {
            return Self::from_fields(members, [None; 4], 2);
        };
        if raw::kind(status) != JsonType::Object {
            let e = Box::new(bad("status", "not an object"));
            return Self {
                object: Err(e.clone()),
                phase: None,
                failed: false,
                active: Err(e.clone()),
                finished_at: Err(e),
                canonical_len: 0,
            };
        }
        let field = |key: &str| member(members, parent, key);
        let fields = [
            field("phase"),
            field(CONTAINER_FIELDS[0]),
            field(CONTAINER_FIELDS[1]),
            field(CONTAINER_FIELDS[2]),
        ];
        Self::from_fields(members, fields, canonical_len)
    }

    fn from_fields(
        members: &[Member<'_>],
        fields: [Option<(usize, Member<'_>)>; 4],
        canonical_len: usize,
    ) -> Self {
        let [phase, lists @ ..] = fields;
        let phase = phase.map(|(_, m)| m.value);
        let failed = raw::is_str(phase, "Failed");
        let lists = [
            (CONTAINER_FIELDS[0], lists[0]),
            (CONTAINER_FIELDS[1], lists[1]),
            (CONTAINER_FIELDS[2], lists[2]),
        ];
        let (active, finished_at) = containers(members, &lists);
        Self {
            object: Ok(()),
            phase: phase.and_then(raw::as_str).map(Into::into),
            failed,
            active: active.map_err(Box::new),
            finished_at: finished_at.map_err(Box::new),
            canonical_len,
        }
    }
}

type Lists<'a> = [(&'static str, Option<(usize, Member<'a>)>); 3];

/// The flow's two walks over the container statuses, in one pass: `eligible`'s (the first running
/// or waiting container, or the first malformed status) and `anchor`'s (the latest `finishedAt`
/// when every container has one). Each result keeps the first error its walk would raise.
fn containers(
    members: &[Member<'_>],
    lists: &Lists<'_>,
) -> (
    Result<Option<Ineligible>, BadField>,
    Result<Option<f64>, BadField>,
) {
    let (mut count, mut finished) = (0usize, 0usize);
    let mut latest: Result<Option<f64>, BadField> = Ok(None);
    for &(field, list) in lists {
        let Some((li, list)) = list.filter(|(_, l)| raw::truthy(l.value)) else {
            continue;
        };
        if raw::kind(list.value) != JsonType::Array {
            let e = bad(format!("status.{field}"), "not a list");
            return (Err(e.clone()), Err(e));
        }
        for (index, (ci, c)) in skim::children(members, li).enumerate() {
            let path = || format!("status.{field}[{index}]");
            if raw::kind(c.value) != JsonType::Object {
                let e = bad(path(), "malformed container status (not an object)");
                return (Err(e.clone()), Err(e));
            }
            count += 1;
            let state = member(members, Some(ci), "state");
            // `eligible`: `state = c.get('state') or {}`; running or waiting rules the Pod out.
            if let Some((si, state)) = state.filter(|(_, s)| raw::truthy(s.value)) {
                for active in ["running", "waiting"] {
                    let found = if raw::kind(state.value) == JsonType::Object {
                        Some(member(members, Some(si), active).is_some())
                    } else {
                        raw::contains(state.value, active)
                    };
                    match found {
                        None => {
                            return (
                                Err(bad(format!("{}.state", path()), "not an object")),
                                Ok(None),
                            );
                        }
                        Some(true) => {
                            return (
                                Ok(Some(Ineligible::ContainerActive {
                                    field,
                                    index,
                                    state: active,
                                })),
                                Ok(None),
                            );
                        }
                        Some(false) => {}
                    }
                }
            }
            if latest.is_ok() {
                match anchor_of(members, state, &path) {
                    Ok(Some(t)) => {
                        finished += 1;
                        latest = Ok(Some(
                            latest
                                .clone()
                                .unwrap_or_default()
                                .map_or(t, |l: f64| l.max(t)),
                        ));
                    }
                    Ok(None) => {}
                    Err(e) => latest = Err(e),
                }
            }
        }
    }
    let latest = latest.map(|l| {
        if count > 0 && finished == count {
            l
        } else {
            None
        }
    });
    (Ok(None), latest)
}

/// `anchor`'s reading of one container: its `finishedAt` when terminated with one.
fn anchor_of(
    members: &[Member<'_>],
    state: Option<(usize, Member<'_>)>,
    path: &dyn Fn() -> String,
) -> Result<Option<f64>, BadField> {
    // `c.get('state', {})`: absent reads as `{}`, but a present `null` raises.
    let Some((si, state)) = state else {
        return Ok(None);
    };
    if raw::kind(state.value) != JsonType::Object {
        return Err(bad(format!("{}.state", path()), "not an object"));
    }
    let Some((ti, terminated)) = member(members, Some(si), "terminated") else {
        return Ok(None);
    };
    if raw::kind(terminated.value) != JsonType::Object {
        return Ok(None);
    }
    let Some((_, at)) =
        member(members, Some(ti), "finishedAt").filter(|(_, f)| raw::truthy(f.value))
    else {
        return Ok(None);
    };
    let field = || format!("{}.state.terminated.finishedAt", path());
    let text =
        raw::as_str(at.value).ok_or_else(|| bad(field(), "missing timestamp (not a string)"))?;
    isotime::parse_timestamp(&text)
        .map(Some)
        .map_err(|e| match e {
            TimeError::NoTimezone(_) => {
                bad(field(), format!("timestamp has no time zone: {text:?}"))
            }
            TimeError::Invalid(_) => bad(field(), format!("not an ISO 8601 timestamp: {text:?}")),
        })
}

/// One Pod of an inventory, as facts.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    /// The metadata's facts, or why the metadata cannot be read.
    pub meta: Result<MetaFacts, Box<BadField>>,
    /// The status's facts.
    pub status: StatusFacts,
}

/// An eligible Pod: what the plan needs to go on.
#[derive(Debug, Clone, Copy)]
pub struct Eligible<'f> {
    /// The metadata's facts.
    pub meta: &'f MetaFacts,
    /// The status's facts.
    pub status: &'f StatusFacts,
}

impl Eligible<'_> {
    /// The latest `finishedAt` when every container status has one.
    ///
    /// # Errors
    /// [`BadField`] for a container `state` that is not an object, a `finishedAt` that is not a
    /// string, or one that is not an ISO 8601 timestamp with a time zone.
    pub fn finished_at(&self) -> Result<Option<f64>, BadField> {
        self.status.finished_at.clone().map_err(|e| *e)
    }

    /// The instant retention runs from, and why: the latest `finishedAt` when every container
    /// terminated with one, else `first` (when the collector first saw the Pod eligible).
    ///
    /// # Errors
    /// As [`Self::finished_at`].
    pub fn anchor(
        &self,
        first: crate::pods::ledger::PyNum,
    ) -> Result<(crate::pods::ledger::PyNum, Basis), BadField> {
        Ok(match self.finished_at()? {
            Some(t) => (crate::pods::ledger::PyNum::Float(t), Basis::FinishedAt),
            None => (first, Basis::ObservedFailed),
        })
    }

    /// Length of the Pod's canonical archive with this anchor and basis.
    pub fn archive_len(&self, basis: Basis, anchor: crate::pods::ledger::PyNum) -> usize {
        let mut a = String::new();
        anchor.write(&mut a);
        // {"anchor":A,"metadata":M,"retentionBasis":"B","status":S}
        let fixed = r#"{"anchor":,"metadata":,"retentionBasis":"","status":}"#.len();
        fixed + a.len() + basis.as_str().len() + self.meta.canonical_len + self.status.canonical_len
    }
}

/// The reference flow's `eligible(meta, status, namespace)`, clause by clause.
///
/// # Errors
/// [`BadField`] where the flow raises: metadata or status of the wrong type, labels or
/// annotations of the wrong type, container status lists that are not lists of objects.
pub fn assess(pod: &PodFacts) -> Result<Result<Eligible<'_>, Ineligible>, BadField> {
    let meta = pod.meta.as_ref().map_err(|e| (**e).clone())?;
    let status = &pod.status;
    if !meta.in_namespace {
        return Ok(Err(Ineligible::OtherNamespace));
    }
    status.object.clone().map_err(|e| *e)?;
    if !status.failed {
        return Ok(Err(Ineligible::NotFailed {
            phase: status.phase.clone(),
        }));
    }
    let ruled_out = if !meta.uid_truthy {
        Some(Ineligible::NoUid)
    } else if !meta.rv_truthy {
        Some(Ineligible::NoResourceVersion)
    } else if !meta.labelled.clone().map_err(|e| *e)? {
        Some(Ineligible::NotLabelled)
    } else if meta.owned {
        Some(Ineligible::Owned)
    } else if meta.mirror.clone().map_err(|e| *e)? {
        Some(Ineligible::Mirror)
    } else if meta.finalizers == Finalizers::Foreign {
        Some(Ineligible::ForeignFinalizers)
    } else if meta.deleting && meta.finalizers != Finalizers::Pin {
        Some(Ineligible::DeletingUnpinned)
    } else {
        status.active.clone().map_err(|e| *e)?
    };
    Ok(match ruled_out {
        Some(reason) => Err(reason),
        None => Ok(Eligible { meta, status }),
    })
}

#[cfg(test)]
mod tests;
