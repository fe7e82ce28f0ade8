//! The orphaned-session policy: which session-labelled resources have no live session behind them.
//!
//! StreamSpace creates, per session id, a Deployment, a Service, a PVC and a `Session` object, all
//! labelled `app=streamspace-session` and `session=<id>`, in one namespace. A resource is an
//! orphan when the database has no row for its id, or (when configured) a row in a terminal state
//! such as StreamSpace's soft delete `deleted`. Orphans younger than the grace period (from
//! `creationTimestamp`) are held; a per-run cap defers the rest; and a mass-deletion guard refuses
//! the whole run when the sessions that look gone are more than a set share of the sessions
//! judged against the database and their resources more than a set floor, or when not one judged
//! id has a row (however few they are): an
//! empty or wrong database makes everything look orphaned, and that is a misconfiguration until
//! proven otherwise. Ids match exactly.
//!
//! The guard weighs session ids, not resources: a session is judged when its id labels at least
//! one resource judged against the database (kept, or an orphan), and looks gone when that id has
//! no row (or a terminal one); each counts once however many resources carry its id. Counting
//! resources would let anyone who can label objects dilute the share of orphans until a wrong
//! database passed, with copies of a live id read off any session's resources. A resource skipped
//! for having no session id or for being deleted already was never judged, and neither is one
//! with the protect label or one the exclude selector matches (judged `protected` or `excluded`
//! before anything else, and never deleted): an id seen only on such resources is counted by
//! neither refusal.
//!
//! Like the Pod planner, this is pure: resources and the database's answers come in, decisions
//! with reasons go out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

use super::config::SessionConfig;
use crate::isotime;
use crate::selector::{Labels, Spared};

/// A scanned resource: the metadata the policy needs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Its `apiVersion` (`group/version`, or `version` for the core group).
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// The session id label's value, when present.
    pub session: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created: Option<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

/// What the database says of a session id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "row", rename_all = "camelCase")]
pub enum Row {
    /// No row.
    Missing,
    /// A row, with its state when the directory reads one.
    Present {
        /// The state column's value.
        state: Option<String>,
    },
}

/// The decision for one resource. In JSON and audit lines it is `"decision"` (`kept`, `held`,
/// `delete`, `deferred`, `unrequested`, `skipped`, and for spared resources `protected` or
/// `excluded`) with its `"reason"` (and `"until"` when held).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionDecision {
    /// Its session is live.
    Kept {
        /// Why (the session's state).
        reason: String,
    },
    /// An orphan younger than the grace period.
    Held {
        /// Why.
        reason: String,
        /// When the grace period ends (seconds since the epoch).
        until: f64,
    },
    /// An orphan past the grace period: delete it.
    Delete {
        /// Why.
        reason: String,
    },
    /// An orphan beyond this run's cap.
    Deferred {
        /// Why.
        reason: String,
    },
    /// An orphan of a session a requested collection did not ask for: left for a scheduled run
    /// (or a request that names it).
    Unrequested {
        /// Why.
        reason: String,
    },
    /// Not judged: being deleted, no usable session id, or spared by the protect label, the
    /// exclude selector or a claim's name that is not its session's (`spared` says which).
    Skipped {
        /// Why.
        reason: String,
        /// The protect label or the exclude selector spares it: never deleted, whatever its
        /// session.
        spared: Option<Spared>,
    },
}

impl SessionDecision {
    /// The decision's name, as JSON and audit lines write it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Kept { .. } => "kept",
            Self::Held { .. } => "held",
            Self::Delete { .. } => "delete",
            Self::Deferred { .. } => "deferred",
            Self::Unrequested { .. } => "unrequested",
            Self::Skipped {
                spared: Some(s), ..
            } => s.as_str(),
            Self::Skipped { .. } => "skipped",
        }
    }

    /// Why: the decision's reason, in words.
    pub fn reason(&self) -> &str {
        match self {
            Self::Kept { reason }
            | Self::Held { reason, .. }
            | Self::Delete { reason }
            | Self::Deferred { reason }
            | Self::Unrequested { reason }
            | Self::Skipped { reason, .. } => reason,
        }
    }

    /// Why the protect label or the exclude selector spares the resource, when they do.
    pub fn spared(&self) -> Option<Spared> {
        match self {
            Self::Skipped { spared, .. } => *spared,
            _ => None,
        }
    }
}

/// A decision as JSON and audit lines write it: its name in `decision`, beside its reason.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = SessionDecision))]
#[derive(Serialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
enum Wire<'a> {
    Kept {
        reason: &'a str,
    },
    Held {
        reason: &'a str,
        /// When the grace period ends (seconds since the epoch); `null` when it cannot be known
        /// (the creation time is missing or unreadable: held until it can).
        until: Option<f64>,
    },
    Delete {
        reason: &'a str,
    },
    Deferred {
        reason: &'a str,
    },
    Unrequested {
        reason: &'a str,
    },
    Skipped {
        reason: &'a str,
    },
    Protected {
        reason: &'a str,
    },
    Excluded {
        reason: &'a str,
    },
}

/// The schema of what [`SessionDecision`]'s `Serialize` writes: its wire form's.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for SessionDecision {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <Wire<'static> as utoipa::PartialSchema>::schema()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for SessionDecision {}

impl Serialize for SessionDecision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Kept { reason } => Wire::Kept { reason },
            Self::Held { reason, until } => Wire::Held {
                reason,
                until: until.is_finite().then_some(*until),
            },
            Self::Delete { reason } => Wire::Delete { reason },
            Self::Deferred { reason } => Wire::Deferred { reason },
            Self::Unrequested { reason } => Wire::Unrequested { reason },
            Self::Skipped {
                reason,
                spared: None,
            } => Wire::Skipped { reason },
            Self::Skipped {
                reason,
                spared: Some(Spared::Protected),
            } => Wire::Protected { reason },
            Self::Skipped {
                reason,
                spared: Some(Spared::Excluded),
            } => Wire::Excluded { reason },
        }
        .serialize(s)
    }
}

/// One resource and its decision: the audit record's substance.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Judged {
    /// The resource.
    #[serde(flatten)]
    pub resource: Resource,
    /// The decision and its reason.
    #[serde(flatten)]
    pub decision: SessionDecision,
}

/// The session plan.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPlan {
    /// Every resource scanned, judged, in scan order.
    pub judged: Vec<Judged>,
    /// Resources scanned.
    pub scanned: usize,
    /// Orphans (held, due, deferred, and those of sessions a request did not ask for).
    pub orphans: usize,
    /// Resources spared by the protect label, the exclude selector or a claim's name that is not
    /// its session's (scanned, but their ids weighed by neither side of the guard, like every
    /// other skipped resource's).
    pub spared: usize,
    /// Rows in a state that is neither live nor terminal (when live states are configured):
    /// each such state with the number of distinct session ids in it. Their resources are kept;
    /// a state the application added shows here instead of passing unseen.
    pub unknown_states: BTreeMap<String, usize>,
}

impl SessionPlan {
    /// The resources to delete, in order.
    pub fn deletes(&self) -> impl Iterator<Item = &Resource> {
        self.judged
            .iter()
            .filter(|j| matches!(j.decision, SessionDecision::Delete { .. }))
            .map(|j| &j.resource)
    }
}

/// Why there is no session plan.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SessionPlanError {
    /// The database did not answer for an id: fail closed.
    #[error("the database gave no answer for session {0:?}: nothing is deleted")]
    NoAnswer(String),
    /// Too many sessions look gone: likely an empty or wrong database.
    #[error(
        "refused: {orphaned} of {judged} sessions judged against the database look gone (more than \
         {ratio} of them; a session counts once however many resources carry its id, and ids found \
         only on skipped, protected or excluded resources are not counted), and their {orphans} \
         resources are more than {floor}; an empty or wrong database looks like this. Check the \
         database settings, or override the guard if this is expected"
    )]
    MassDeletion {
        /// Distinct session ids that look gone (no row, or a terminal one), each labelling at
        /// least one resource judged against the database.
        orphaned: usize,
        /// Distinct session ids labelling at least one resource judged against the database
        /// (kept, or an orphan); not ids seen only on resources skipped (already being deleted)
        /// or spared by the protect label or the exclude selector.
        judged: usize,
        /// The resources of the sessions that look gone: what would be deleted, the count the
        /// floor bounds.
        orphans: usize,
        /// The configured share.
        ratio: f64,
        /// The configured floor, in resources.
        floor: usize,
    },
    /// Not one judged id has a row: the table is not the application's (whatever the floor).
    #[error(
        "refused: none of the {ids} session ids judged against the database has a row in the \
         session table, so {orphans} session resources look orphaned (ids found only on skipped, \
         protected or excluded resources are not counted); a wrong database, a wrong schema on \
         search_path or an empty replica looks like this (ids match exactly, case-sensitive). Check \
         the database settings, or override the guard if this is expected"
    )]
    NoRowFound {
        /// Distinct session ids labelling at least one resource judged against the database.
        ids: usize,
        /// Orphans found.
        orphans: usize,
    },
}

/// The labels of an object's `metadata` (a value that is not a string kept as its JSON text).
pub fn labels_of(metadata: &serde_json::Value) -> Labels {
    metadata["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The distinct session ids of `resources`, for one batched lookup.
pub fn session_ids(resources: &[Resource]) -> Vec<String> {
    let ids: BTreeSet<&str> = resources
        .iter()
        .filter_map(|r| r.session.as_deref())
        .filter(|s| !s.is_empty())
        .collect();
    ids.into_iter().map(str::to_owned).collect()
}

/// Judges every resource against the database's `rows`, as of `now` (seconds since the epoch),
/// for resources read without their labels: nothing is protected or excluded. A run reads the
/// labels and calls [`plan_labelled`].
///
/// # Errors
/// As [`plan_labelled`].
pub fn plan_sessions(
    resources: &[Resource],
    rows: &HashMap<String, Row>,
    cfg: &SessionConfig,
    now: f64,
) -> Result<SessionPlan, SessionPlanError> {
    plan_labelled(resources, &[], rows, cfg, now)
}

/// Judges every resource, whose labels are `labels` (the same order; a resource past the end
/// of `labels` has none known), against the database's `rows`, as of `now` (seconds since the
/// epoch).
///
/// # Guarantees
/// Only orphans past the grace period are marked `Delete`, at most `max_deletes`, and none at all
/// when the mass-deletion guard trips (unless overridden): when the sessions that look gone are
/// both more than the ratio and more than the floor, or, whatever the floor, when not one judged
/// id has a row. Both count distinct session ids labelling a resource judged against the
/// database (kept, or an orphan), each once however many resources carry it: an id seen only on
/// what is `Skipped` (no session id, already being deleted, spared) counts neither as gone nor in
/// the whole. A resource with the protect label or matched by the exclude selector is never
/// marked `Delete`: it is `Skipped` as `protected` or `excluded`.
///
/// # Errors
/// [`SessionPlanError::NoAnswer`] when `rows` lacks an id (never read a missing answer as a
/// missing row); [`SessionPlanError::MassDeletion`] or [`SessionPlanError::NoRowFound`] when the
/// guard trips.
pub fn plan_labelled(
    resources: &[Resource],
    labels: &[Labels],
    rows: &HashMap<String, Row>,
    cfg: &SessionConfig,
    now: f64,
) -> Result<SessionPlan, SessionPlanError> {
    let grace = match &cfg.request {
        // A caller that names sessions knows they ended: the operator's grace for requests.
        Some(request) if matches!(request.sessions, super::requests::Requested::Ids(_)) => {
            f64::from(request.grace_seconds)
        }
        // Every session, scheduled or requested: the namespace's grace (a request for all is no
        // reason to hold orphans less long).
        _ => f64::from(cfg.grace_hours) * 3600.0,
    };
    // A requested collection deletes only what was asked for; the rest is judged (the guard
    // weighs it) and left as it is.
    let asked = |id: &str| cfg.request.as_ref().is_none_or(|r| r.sessions.contains(id));
    let mut judged = Vec::with_capacity(resources.len());
    let (mut orphans, mut due, mut spared) = (0, 0, 0);
    // Distinct ids of the resources judged against the database, and those of them that look
    // gone: what the guard weighs.
    let (mut judged_ids, mut orphaned_ids) = (BTreeSet::new(), BTreeSet::new());
    // Ids whose row is in a state neither live nor terminal, by state.
    let mut unknown: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let skipped = |reason: String| SessionDecision::Skipped {
        reason,
        spared: None,
    };
    for (i, r) in resources.iter().enumerate() {
        let labelled = labels.get(i).and_then(|l| cfg.spared(l));
        let shared = shared_claim(r);
        let spares = labelled.or(shared.then_some(Spared::Protected));
        spared += usize::from(spares.is_some());
        let decision = match r.session.as_deref() {
            _ if labelled == Some(Spared::Protected) => SessionDecision::Skipped {
                reason: format!("carries the protect label {}", cfg.protect_label),
                spared: spares,
            },
            _ if labelled == Some(Spared::Excluded) => SessionDecision::Skipped {
                reason: format!(
                    "matches the exclude selector {}",
                    cfg.exclude_selector
                        .as_ref()
                        .map_or_else(String::new, ToString::to_string)
                ),
                spared: spares,
            },
            _ if shared => SessionDecision::Skipped {
                reason: format!(
                    "a claim not named after its session ({0} or {0}-...): a claim shared across \
                     sessions, as StreamSpace's per-user home-USER, is never collected",
                    r.session.as_deref().unwrap_or_default()
                ),
                spared: spares,
            },
            _ if r.deleting => skipped("already being deleted".into()),
            None => skipped(format!("no {} label", cfg.id_label)),
            Some("") => skipped(format!("empty {} label", cfg.id_label)),
            Some(id) => match rows.get(id) {
                None => return Err(SessionPlanError::NoAnswer(id.into())),
                Some(Row::Present { state: Some(s) }) if cfg.terminal_states.contains(s) => {
                    judged_ids.insert(id);
                    orphaned_ids.insert(id);
                    orphans += 1;
                    let why = format!("session {id} is {s}");
                    if asked(id) {
                        orphan(r, &why, grace, now, &mut due, cfg.max_deletes)
                    } else {
                        unrequested(&why)
                    }
                }
                Some(Row::Present { state }) => {
                    judged_ids.insert(id);
                    let state = state.as_deref();
                    let strange = state.filter(|s| {
                        !cfg.live_states.is_empty() && !cfg.live_states.iter().any(|l| l == s)
                    });
                    if let Some(s) = strange {
                        unknown.entry(s).or_default().insert(id);
                    }
                    let requested = cfg.request.as_ref().is_some_and(|r| {
                        matches!(r.sessions, super::requests::Requested::Ids(_)) && asked(id)
                    });
                    SessionDecision::Kept {
                        reason: kept(id, state, strange.is_some(), requested, cfg),
                    }
                }
                Some(Row::Missing) => {
                    judged_ids.insert(id);
                    orphaned_ids.insert(id);
                    orphans += 1;
                    let why = format!("no session {id} in the database{}", scope_words(cfg));
                    if asked(id) {
                        orphan(r, &why, grace, now, &mut due, cfg.max_deletes)
                    } else {
                        unrequested(&why)
                    }
                }
            },
        };
        judged.push(Judged {
            resource: r.clone(),
            decision,
        });
    }
    let scanned = resources.len();
    // The share is of the session ids judged against the database, each once. Counting
    // resources, anyone able to label objects could dilute the gone sessions under the ratio
    // (with copies of a live id); ids seen only on skipped resources (already being deleted,
    // spared) were never judged.
    let (orphaned, weighed) = (orphaned_ids.len(), judged_ids.len());
    #[allow(clippy::cast_precision_loss)]
    let share = if weighed == 0 {
        0.0
    } else {
        orphaned as f64 / weighed as f64
    };
    // The floor bounds what would be deleted, so it counts resources: a few gone sessions in a
    // small namespace pass, ten of StreamSpace's four-resource sessions do not.
    if !cfg.override_guard && orphans > cfg.guard_floor && share > cfg.guard_ratio {
        return Err(SessionPlanError::MassDeletion {
            orphaned,
            judged: weighed,
            orphans,
            ratio: cfg.guard_ratio,
            floor: cfg.guard_floor,
        });
    }
    // A table that holds none of the judged ids is not the application's table, however few they
    // are: with a floor of 10, a small namespace would otherwise lose up to 10 sessions (PVCs
    // too). A row for an id only a protected, excluded or deleting resource carries proves
    // nothing about the ids that would be deleted.
    let any_row = judged_ids
        .iter()
        .any(|id| matches!(rows.get(*id), Some(Row::Present { .. })));
    if !cfg.override_guard && orphans > 0 && !any_row {
        return Err(SessionPlanError::NoRowFound {
            ids: weighed,
            orphans,
        });
    }
    let unknown_states = unknown
        .into_iter()
        .map(|(state, ids)| (state.to_owned(), ids.len()))
        .collect();
    Ok(SessionPlan {
        judged,
        scanned,
        orphans,
        spared,
        unknown_states,
    })
}

/// Whether `r` is a claim whose name is not its session's (`ID`, or `ID-` and more, as
/// StreamSpace's `ID-home`): a claim shared across sessions, as StreamSpace v1's per-user
/// `home-USER`, which outlives every session that mounts it. Its labels prove nothing (anyone
/// may write them): only its name, which nobody can change, says whose it is.
fn shared_claim(r: &Resource) -> bool {
    let own = |id: &str| {
        r.name == id
            || r.name
                .strip_prefix(id)
                .is_some_and(|rest| rest.starts_with('-'))
    };
    r.kind == "PersistentVolumeClaim"
        && r.api_version == "v1"
        && r.session
            .as_deref()
            .is_some_and(|id| !id.is_empty() && !own(id))
}

fn unrequested(why: &str) -> SessionDecision {
    SessionDecision::Unrequested {
        reason: format!("{why}; not requested: left for a scheduled run"),
    }
}

/// Why a session whose row is there is kept: its state, and, for a state the settings do not
/// know or a session a caller asked for, which states would count as gone.
fn kept(
    id: &str,
    state: Option<&str>,
    strange: bool,
    requested: bool,
    cfg: &SessionConfig,
) -> String {
    let gone = if cfg.terminal_states.is_empty() {
        "only a missing row counts as gone".to_owned()
    } else {
        format!(
            "the states that count as gone are {} (or no row)",
            cfg.terminal_states.join(", ")
        )
    };
    match state {
        Some(s) if strange => format!(
            "session {id} is {s}, a state neither live ({}) nor gone: kept; {gone}",
            cfg.live_states.join(", ")
        ),
        Some(s) if requested => format!("session {id} is {s}, not gone: kept; {gone}"),
        None if requested => {
            format!("session {id} has a row with no state, not gone: kept; {gone}")
        }
        _ => format!("session {id} exists ({})", state.unwrap_or("no state")),
    }
}

fn orphan(
    r: &Resource,
    why: &str,
    grace: f64,
    now: f64,
    due: &mut usize,
    cap: usize,
) -> SessionDecision {
    // A missing or unreadable creation time cannot prove the grace period has passed.
    let Some(created) = r
        .created
        .as_deref()
        .and_then(|c| isotime::parse_timestamp(c).ok())
    else {
        return SessionDecision::Held {
            reason: format!("{why}; creation time unknown"),
            until: f64::INFINITY,
        };
    };
    if now - created < grace {
        return SessionDecision::Held {
            reason: format!("{why}; within the grace period"),
            until: created + grace,
        };
    }
    *due += 1;
    if *due > cap {
        return SessionDecision::Deferred {
            reason: format!("{why}; beyond this run's cap of {cap}"),
        };
    }
    SessionDecision::Delete { reason: why.into() }
}

/// How a reason names the rows that count as live here: nothing when every row counts, else
/// ` with COLUMN = 'VALUE' and ...` (a row of another scope is there, but not live here).
fn scope_words(cfg: &SessionConfig) -> String {
    if cfg.lookup_scope.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = cfg
        .lookup_scope
        .iter()
        .map(|(column, value)| format!("{column} = '{value}'"))
        .collect();
    format!(" with {} (or those columns empty)", pairs.join(" and "))
}

#[cfg(test)]
mod tests;
