//! The orphaned-session policy: which session-labelled resources have no live session behind them.
//!
//! StreamSpace creates, per session id, a Deployment, a Service, a PVC and a `Session` object, all
//! labelled `app=streamspace-session` and `session=<id>`, in one namespace. A resource is an
//! orphan when the database has no row for its id, or (when configured) a row in a terminal state
//! such as StreamSpace's soft delete `deleted`. Orphans younger than the grace period (from
//! `creationTimestamp`) are held; a per-run cap defers the rest; and a mass-deletion guard refuses
//! the whole run when orphans are more than a set share of the resources judged against the
//! database, or when not one scanned id has a row (however few they are): an empty or wrong
//! database makes everything look orphaned, and that is a misconfiguration until proven
//! otherwise. Ids match exactly.
//!
//! The guard weighs only resources judged against the database (kept, or an orphan). A resource
//! skipped for having no session id or for being deleted already was never judged: counting it
//! would let anyone who can create objects with the selector's labels dilute the share of
//! orphans until a wrong database passed. A resource with the protect label, or one the exclude
//! selector matches, is never deleted: it is judged `protected` or `excluded` before anything
//! else, and is not weighed either (it can never be deleted, so it must not dilute the share of
//! orphans among those that can).
//!
//! Like the Pod planner, this is pure: resources and the database's answers come in, decisions
//! with reasons go out.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

use super::config::SessionConfig;
use crate::isotime;
use crate::selector::{Labels, Spared};

/// A scanned resource: the metadata the policy needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
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
/// `delete`, `deferred`, `skipped`, and for spared resources `protected` or `excluded`) with its
/// `"reason"` (and `"until"` when held).
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
    /// Not judged: being deleted, no usable session id, or spared by the protect label or the
    /// exclude selector (`spared` says which).
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
            Self::Skipped {
                spared: Some(s), ..
            } => s.as_str(),
            Self::Skipped { .. } => "skipped",
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

impl Serialize for SessionDecision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(tag = "decision", rename_all = "camelCase")]
        enum Wire<'a> {
            Kept { reason: &'a str },
            Held { reason: &'a str, until: f64 },
            Delete { reason: &'a str },
            Deferred { reason: &'a str },
            Skipped { reason: &'a str },
            Protected { reason: &'a str },
            Excluded { reason: &'a str },
        }
        match self {
            Self::Kept { reason } => Wire::Kept { reason },
            Self::Held { reason, until } => Wire::Held {
                reason,
                until: *until,
            },
            Self::Delete { reason } => Wire::Delete { reason },
            Self::Deferred { reason } => Wire::Deferred { reason },
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPlan {
    /// Every resource scanned, judged, in scan order.
    pub judged: Vec<Judged>,
    /// Resources scanned.
    pub scanned: usize,
    /// Orphans (held, due and deferred).
    pub orphans: usize,
    /// Resources spared by the protect label or the exclude selector (scanned, but weighed by
    /// neither side of the guard, like every other skipped resource).
    pub spared: usize,
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
    /// Too many orphans: likely an empty or wrong database.
    #[error(
        "refused: {orphans} of {scanned} session resources judged against the database look orphaned \
         (more than {ratio} of them and more than {floor}; skipped, protected and excluded resources are \
         not counted); an empty or wrong database looks like this. Check the database settings, or \
         override the guard if this is expected"
    )]
    MassDeletion {
        /// Orphans found.
        orphans: usize,
        /// Resources weighed: those judged against the database (kept, or an orphan), not those
        /// skipped (no session id, already being deleted) nor those the protect label or the
        /// exclude selector spares.
        scanned: usize,
        /// The configured share.
        ratio: f64,
        /// The configured floor.
        floor: usize,
    },
    /// Not one scanned id has a row: the table is not the application's (whatever the floor).
    #[error(
        "refused: none of the {ids} session ids scanned has a row in the session table, so \
         {orphans} session resources look orphaned; a wrong database, a wrong schema on \
         search_path or an empty replica looks like this (ids match exactly, case-sensitive). Check \
         the database settings, or override the guard if this is expected"
    )]
    NoRowFound {
        /// Distinct session ids looked up.
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
/// when the mass-deletion guard trips (unless overridden): when orphans are both more than the
/// ratio and more than the floor, or, whatever the floor, when not one scanned id has a row. The
/// share is of the resources judged against the database (kept, or an orphan): whatever is
/// `Skipped` (no session id, already being deleted, spared) counts neither as an orphan nor in
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
    let grace = f64::from(cfg.grace_hours) * 3600.0;
    let mut judged = Vec::with_capacity(resources.len());
    let (mut orphans, mut due, mut spared) = (0, 0, 0);
    let skipped = |reason: String| SessionDecision::Skipped {
        reason,
        spared: None,
    };
    for (i, r) in resources.iter().enumerate() {
        let spares = labels.get(i).and_then(|l| cfg.spared(l));
        spared += usize::from(spares.is_some());
        let decision = match r.session.as_deref() {
            _ if spares == Some(Spared::Protected) => SessionDecision::Skipped {
                reason: format!("carries the protect label {}", cfg.protect_label),
                spared: spares,
            },
            _ if spares == Some(Spared::Excluded) => SessionDecision::Skipped {
                reason: format!(
                    "matches the exclude selector {}",
                    cfg.exclude_selector
                        .as_ref()
                        .map_or_else(String::new, ToString::to_string)
                ),
                spared: spares,
            },
            _ if r.deleting => skipped("already being deleted".into()),
            None => skipped(format!("no {} label", cfg.id_label)),
            Some("") => skipped(format!("empty {} label", cfg.id_label)),
            Some(id) => match rows.get(id) {
                None => return Err(SessionPlanError::NoAnswer(id.into())),
                Some(Row::Present { state: Some(s) }) if cfg.terminal_states.contains(s) => {
                    orphans += 1;
                    orphan(
                        r,
                        &format!("session {id} is {s}"),
                        grace,
                        now,
                        &mut due,
                        cfg.max_deletes,
                    )
                }
                Some(Row::Present { state }) => SessionDecision::Kept {
                    reason: format!(
                        "session {id} exists ({})",
                        state.as_deref().unwrap_or("no state")
                    ),
                },
                Some(Row::Missing) => {
                    orphans += 1;
                    orphan(
                        r,
                        &format!("no session {id} in the database"),
                        grace,
                        now,
                        &mut due,
                        cfg.max_deletes,
                    )
                }
            },
        };
        judged.push(Judged {
            resource: r.clone(),
            decision,
        });
    }
    let scanned = resources.len();
    // The share is of the resources judged against the database. Skipped ones (no session id,
    // already being deleted, spared) were never judged: counted, anyone able to label objects
    // could dilute the orphans under the ratio.
    let weighed = judged
        .iter()
        .filter(|j| !matches!(j.decision, SessionDecision::Skipped { .. }))
        .count();
    #[allow(clippy::cast_precision_loss)]
    let share = if weighed == 0 {
        0.0
    } else {
        orphans as f64 / weighed as f64
    };
    if !cfg.override_guard && orphans > cfg.guard_floor && share > cfg.guard_ratio {
        return Err(SessionPlanError::MassDeletion {
            orphans,
            scanned: weighed,
            ratio: cfg.guard_ratio,
            floor: cfg.guard_floor,
        });
    }
    // A table that holds none of the ids is not the application's table, however few they are:
    // with a floor of 10, a small namespace would otherwise lose up to 10 objects (PVCs too).
    let ids = session_ids(resources);
    let any_row = ids
        .iter()
        .any(|id| matches!(rows.get(id), Some(Row::Present { .. })));
    if !cfg.override_guard && orphans > 0 && !any_row {
        return Err(SessionPlanError::NoRowFound {
            ids: ids.len(),
            orphans,
        });
    }
    Ok(SessionPlan {
        judged,
        scanned,
        orphans,
        spared,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputError;
    use crate::sessions::config::{Kind, SessionInputs};

    const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

    fn res(kind: &str, session: Option<&str>, created: &str) -> Resource {
        Resource {
            kind: kind.into(),
            name: format!("{}-{kind}", session.unwrap_or("none")),
            uid: format!("uid-{}-{kind}", session.unwrap_or("none")),
            resource_version: "1".into(),
            session: session.map(Into::into),
            created: Some(created.into()),
            deleting: false,
        }
    }

    fn cfg(edit: impl FnOnce(&mut SessionInputs)) -> SessionConfig {
        let mut i = SessionInputs {
            guard_floor: 2,
            ..Default::default()
        };
        edit(&mut i);
        i.validate().unwrap()
    }

    fn rows(entries: &[(&str, Row)]) -> HashMap<String, Row> {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn decisions(plan: &SessionPlan) -> Vec<(String, &'static str)> {
        plan.judged
            .iter()
            .map(|j| (j.resource.name.clone(), j.decision.name()))
            .collect()
    }

    #[test]
    fn live_gone_soft_deleted_young_and_unlabelled() {
        let old = "2026-11-27T12:00:00Z";
        let young = "2026-11-29T06:00:00Z";
        let mut deleting = res("Service", Some("gone"), old);
        deleting.name = "deleting".into();
        deleting.deleting = true;
        let resources = vec![
            res("Deployment", Some("live"), old),
            res("Deployment", Some("gone"), old),
            res("PersistentVolumeClaim", Some("soft"), old),
            res("Service", Some("young"), young),
            res("Session", None, old),
            res("Session", Some(""), old),
            deleting,
            res("Deployment", Some("hibernated"), old),
        ];
        let db = rows(&[
            (
                "live",
                Row::Present {
                    state: Some("running".into()),
                },
            ),
            (
                "hibernated",
                Row::Present {
                    state: Some("hibernated".into()),
                },
            ),
            ("gone", Row::Missing),
            (
                "soft",
                Row::Present {
                    state: Some("deleted".into()),
                },
            ),
            ("young", Row::Missing),
        ]);
        assert_eq!(
            session_ids(&resources),
            ["gone", "hibernated", "live", "soft", "young"]
        );
        let c = cfg(|i| i.guard_floor = 10);
        let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
        assert_eq!(
            decisions(&plan),
            [
                ("live-Deployment".into(), "kept"),
                ("gone-Deployment".into(), "delete"),
                ("soft-PersistentVolumeClaim".into(), "kept"),
                ("young-Service".into(), "held"),
                ("none-Session".into(), "skipped"),
                ("-Session".into(), "skipped"),
                ("deleting".into(), "skipped"),
                ("hibernated-Deployment".into(), "kept"),
            ]
        );
        // Soft deletes count as gone only when configured.
        let c = cfg(|i| {
            i.guard_floor = 10;
            i.terminal_states = vec!["deleted".into()];
        });
        let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
        assert_eq!(
            decisions(&plan)[2],
            ("soft-PersistentVolumeClaim".into(), "delete")
        );
        assert_eq!(plan.deletes().count(), 2);
    }

    #[test]
    fn the_selector_reaches_the_server_canonical() {
        let c = cfg(|i| i.selector = " !canary , app in (streamspace-session)".into());
        assert_eq!(c.selector, "app in (streamspace-session),!canary");
        assert_eq!(cfg(|_| {}).selector, "app=streamspace-session");
        assert_eq!(
            labels_of(&serde_json::json!({"labels": {"a": "1", "b": 2}})),
            Labels::from([("a".into(), "1".into()), ("b".into(), "2".into())])
        );
        assert_eq!(labels_of(&serde_json::json!({})), Labels::new());
    }

    /// Protected and excluded resources are never deleted, whatever their session; the guard
    /// weighs only the others; the cap is not spent on them.
    #[test]
    fn protected_and_excluded_resources_are_spared() {
        let old = "2026-11-20T00:00:00Z";
        let label = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let resources: Vec<_> = ["a", "b", "c", "d", "e", "live"]
            .iter()
            .map(|s| res("Deployment", Some(s), old))
            .collect();
        let labels = vec![
            label(&[("gc.example.com/protect", "true"), ("team", "payments")]),
            label(&[("team", "payments")]),
            label(&[("gc.example.com/protect", "yes")]),
            label(&[]),
            label(&[("team", "search")]),
            label(&[("gc.example.com/protect", "true")]),
        ];
        let mut db: HashMap<String, Row> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|s| ((*s).to_owned(), Row::Missing))
            .collect();
        db.insert("live".into(), Row::Present { state: None });
        let c = cfg(|i| {
            i.guard_floor = 0;
            i.guard_ratio = 1.0;
            i.max_deletes = 2;
            i.exclude_selector = Some("team in (payments)".into());
        });
        let plan = plan_labelled(&resources, &labels, &db, &c, NOW).unwrap();
        assert_eq!(
            decisions(&plan),
            [
                ("a-Deployment".into(), "protected"),
                ("b-Deployment".into(), "excluded"),
                ("c-Deployment".into(), "delete"),
                ("d-Deployment".into(), "delete"),
                ("e-Deployment".into(), "deferred"),
                ("live-Deployment".into(), "protected"),
            ]
        );
        assert_eq!((plan.scanned, plan.orphans, plan.spared), (6, 3, 3));
        let json = serde_json::to_value(&plan.judged[..2]).unwrap();
        assert_eq!(json[0]["decision"], "protected");
        assert_eq!(
            json[0]["reason"],
            "carries the protect label gc.example.com/protect=true"
        );
        assert_eq!(json[1]["decision"], "excluded");
        assert_eq!(
            json[1]["reason"],
            "matches the exclude selector team in (payments)"
        );
        assert_eq!(plan.judged[1].decision.spared(), Some(Spared::Excluded));
        // Without labels known, nothing is spared.
        let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
        assert_eq!(plan.spared, 0);
        assert_eq!(plan.deletes().count(), 2);
        // The guard weighs the three orphans among the three resources that can be deleted
        // (all of them), not among the six scanned: a share of 1, over 0.9.
        let guarded = cfg(|i| {
            i.guard_floor = 2;
            i.guard_ratio = 0.9;
            i.exclude_selector = Some("team in (payments)".into());
        });
        let err = plan_labelled(&resources, &labels, &db, &guarded, NOW).unwrap_err();
        assert!(
            matches!(
                err,
                SessionPlanError::MassDeletion {
                    orphans: 3,
                    scanned: 3,
                    ..
                }
            ),
            "{err}"
        );
        // Unspared, the same resources are five orphans of six: under the ratio of 0.9.
        let plan = plan_labelled(&resources, &[], &db, &guarded, NOW).unwrap();
        assert_eq!(plan.orphans, 5);
    }

    /// Only resources judged against the database are weighed: whatever is skipped (no session
    /// label, an empty one, already being deleted) counts on neither side of the guard, so
    /// objects that merely carry the selector's labels cannot push the orphans under the ratio.
    #[test]
    fn the_guard_weighs_only_resources_judged_against_the_database() {
        let old = "2026-11-20T00:00:00Z";
        let service = |session: Option<&str>, name: &str| Resource {
            name: name.into(),
            ..res("Service", session, old)
        };
        // One live session and 11 whose rows are gone...
        let mut db = rows(&[("live", Row::Present { state: None })]);
        let mut sessions = vec![service(Some("live"), "live")];
        for i in 0..11 {
            let id = format!("gone-{i}");
            db.insert(id.clone(), Row::Missing);
            sessions.push(service(Some(&id), &id));
        }
        // ...and 12 Services with the app label but no session label.
        let unlabelled: Vec<_> = (0..12)
            .map(|i| service(None, &format!("unlabelled-{i}")))
            .collect();
        let defaults = cfg(|i| i.guard_floor = 10);
        let refused = |resources: &[Resource]| {
            let err = plan_sessions(resources, &db, &defaults, NOW).unwrap_err();
            assert!(
                matches!(
                    err,
                    SessionPlanError::MassDeletion {
                        orphans: 11,
                        scanned: 12,
                        ..
                    }
                ),
                "{err}"
            );
            assert!(
                err.to_string().starts_with(
                    "refused: 11 of 12 session resources judged against the database look orphaned"
                ),
                "{err}"
            );
        };
        // The 11 orphans of 12 judged are refused, with or without the unlabelled ones.
        refused(&sessions);
        refused(&[&sessions[..], &unlabelled].concat());
        refused(&[&unlabelled, &sessions[..]].concat());
        // Nor do empty session labels, or resources already being deleted, whether their
        // session is live or gone.
        let others: Vec<_> = (0..18)
            .map(|i| {
                let session = ["", "live", "gone-0"][i % 3];
                let mut r = service(Some(session), &format!("other-{i}"));
                r.deleting = !session.is_empty();
                r
            })
            .collect();
        refused(&[&sessions[..], &others].concat());
        // Skipped, protected and excluded together (two unlabelled resources are also spared:
        // neither is counted twice): still 11 of 12.
        let deleting: Vec<_> = others.iter().filter(|r| r.deleting).cloned().collect();
        let c = cfg(|i| {
            i.guard_floor = 10;
            i.exclude_selector = Some("team in (payments)".into());
        });
        let all = [&unlabelled[..], &sessions, &deleting].concat();
        let mut labels = vec![Labels::new(); all.len()];
        labels[0].insert("team".into(), "payments".into());
        labels[1].insert("gc.example.com/protect".into(), "true".into());
        let err = plan_labelled(&all, &labels, &db, &c, NOW).unwrap_err();
        assert!(
            matches!(
                err,
                SessionPlanError::MassDeletion {
                    orphans: 11,
                    scanned: 12,
                    ..
                }
            ),
            "{err}"
        );
        // What is skipped is still reported, and still scanned.
        let overridden = cfg(|i| {
            i.guard_floor = 10;
            i.override_guard = true;
        });
        let both = [&sessions[..], &unlabelled].concat();
        let plan = plan_sessions(&both, &db, &overridden, NOW).unwrap();
        assert_eq!((plan.scanned, plan.orphans, plan.spared), (24, 11, 0));
        let skipped = decisions(&plan)
            .iter()
            .filter(|(_, d)| *d == "skipped")
            .count();
        assert_eq!(skipped, 12);
        // Under the ratio among the judged, the skipped change nothing either: 11 orphans of 23
        // judged pass.
        let mut more_live = both.clone();
        for i in 0..11 {
            let id = format!("live-{i}");
            db.insert(id.clone(), Row::Present { state: None });
            more_live.push(service(Some(&id), &id));
        }
        let plan = plan_sessions(&more_live, &db, &defaults, NOW).unwrap();
        assert_eq!(plan.deletes().count(), 11);
        // Nothing judged at all: nothing to weigh, nothing refused.
        let plan = plan_sessions(&unlabelled, &db, &cfg(|i| i.guard_floor = 0), NOW).unwrap();
        assert_eq!((plan.scanned, plan.orphans), (12, 0));
        // The no-row guard still looks at every scanned id, and ignores the unlabelled.
        let gone_only = rows(&[("gone-0", Row::Missing)]);
        let err = plan_sessions(
            &[&sessions[1..2], &unlabelled].concat(),
            &gone_only,
            &defaults,
            NOW,
        )
        .unwrap_err();
        assert_eq!(err, SessionPlanError::NoRowFound { ids: 1, orphans: 1 });
    }

    #[test]
    fn the_guard_refuses_an_empty_database_and_the_cap_defers() {
        let old = "2026-11-20T00:00:00Z";
        let resources: Vec<_> = (0..8)
            .map(|i| res("Deployment", Some(&format!("s{i}")), old))
            .collect();
        let empty: HashMap<String, Row> = (0..8).map(|i| (format!("s{i}"), Row::Missing)).collect();
        let err = plan_sessions(&resources, &empty, &cfg(|_| {}), NOW).unwrap_err();
        assert!(
            matches!(
                err,
                SessionPlanError::MassDeletion {
                    orphans: 8,
                    scanned: 8,
                    ..
                }
            ),
            "{err}"
        );
        let plan = plan_sessions(
            &resources,
            &empty,
            &cfg(|i| {
                i.override_guard = true;
                i.max_deletes = 3;
            }),
            NOW,
        )
        .unwrap();
        assert_eq!(plan.deletes().count(), 3);
        assert_eq!(
            decisions(&plan)
                .iter()
                .filter(|(_, d)| *d == "deferred")
                .count(),
            5
        );
    }

    #[test]
    fn a_table_holding_none_of_the_ids_deletes_nothing_whatever_the_floor() {
        let old = "2026-11-20T00:00:00Z";
        let young = "2026-11-29T11:00:00Z";
        let running = || Row::Present {
            state: Some("running".into()),
        };
        let deleted = || Row::Present {
            state: Some("deleted".into()),
        };
        // (case, resources as (session, created), rows, floor, override, terminal states,
        //  expected: Ok(deletes) or Err(ids, orphans) of the refusal)
        type Case = (
            &'static str,
            Vec<(&'static str, &'static str)>,
            Vec<(&'static str, Row)>,
            i64,
            bool,
            bool,
            Result<usize, (usize, usize)>,
        );
        let cases: Vec<Case> = vec![
            (
                "one session's three objects, no row, default floor",
                vec![("s1", old), ("s1", old), ("s1", old)],
                vec![("s1", Row::Missing)],
                10,
                false,
                false,
                Err((1, 3)),
            ),
            (
                "three sessions, no row, a floor of 1000",
                vec![("s1", old), ("s2", old), ("s3", old)],
                vec![
                    ("s1", Row::Missing),
                    ("s2", Row::Missing),
                    ("s3", Row::Missing),
                ],
                1000,
                false,
                false,
                Err((3, 3)),
            ),
            (
                "no row, overridden",
                vec![("s1", old), ("s1", old), ("s1", old)],
                vec![("s1", Row::Missing)],
                10,
                true,
                false,
                Ok(3),
            ),
            (
                "no row, all within the grace period: still refused",
                vec![("s1", young)],
                vec![("s1", Row::Missing)],
                10,
                false,
                false,
                Err((1, 1)),
            ),
            (
                "one live row among orphans: the table is the right one",
                vec![("live", old), ("s1", old), ("s2", old)],
                vec![
                    ("live", running()),
                    ("s1", Row::Missing),
                    ("s2", Row::Missing),
                ],
                10,
                false,
                false,
                Ok(2),
            ),
            (
                "rows in a terminal state are rows",
                vec![("s1", old), ("s2", old)],
                vec![("s1", deleted()), ("s2", Row::Missing)],
                10,
                false,
                true,
                Ok(2),
            ),
            (
                "every session live",
                vec![("live", old)],
                vec![("live", running())],
                10,
                false,
                false,
                Ok(0),
            ),
            ("nothing scanned", vec![], vec![], 10, false, false, Ok(0)),
        ];
        for (case, resources, db, floor, override_guard, terminal, expected) in cases {
            let resources: Vec<_> = resources
                .iter()
                .enumerate()
                .map(|(i, (s, created))| {
                    let mut r = res("Deployment", Some(s), created);
                    r.name = format!("{s}-{i}");
                    r
                })
                .collect();
            let c = cfg(|i| {
                i.guard_floor = floor;
                i.override_guard = override_guard;
                if terminal {
                    i.terminal_states = vec!["deleted".into()];
                }
            });
            let got = plan_sessions(&resources, &rows(&db), &c, NOW);
            match (got, expected) {
                (Ok(plan), Ok(n)) => assert_eq!(plan.deletes().count(), n, "{case}"),
                (Err(SessionPlanError::NoRowFound { ids, orphans }), Err(want)) => {
                    assert_eq!((ids, orphans), want, "{case}");
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
        let err = SessionPlanError::NoRowFound { ids: 1, orphans: 3 }.to_string();
        assert!(
            err.starts_with("refused: none of the 1 session ids scanned has a row")
                && err.contains("wrong schema on search_path")
                && err.contains("override the guard"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_answer_fails_closed() {
        let resources = vec![res("Service", Some("s1"), "2026-11-20T00:00:00Z")];
        let err = plan_sessions(&resources, &HashMap::new(), &cfg(|_| {}), NOW).unwrap_err();
        assert_eq!(err, SessionPlanError::NoAnswer("s1".into()));
    }

    /// Each setting at its limits: accepted at the limit, refused (and named) past it.
    #[test]
    fn settings_hold_at_their_limits() {
        let kind = |edit: fn(&mut Kind)| {
            let mut k = Kind::streamspace();
            edit(&mut k[0]);
            k
        };
        // (what, the edit, `None` when accepted, else the setting named)
        type Edit = Box<dyn Fn(&mut SessionInputs)>;
        let cases: Vec<(&str, Edit, Option<&str>)> = vec![
            ("defaults", Box::new(|_| {}), None),
            (
                "bad cluster id",
                Box::new(|i| i.cluster_id = "Not A Cluster!".into()),
                Some("cluster_id"),
            ),
            (
                "two terms",
                Box::new(|i| i.selector = "app=a,tier=b".into()),
                None,
            ),
            (
                "an empty value",
                Box::new(|i| i.selector = "app=".into()),
                None,
            ),
            (
                "set-based",
                Box::new(|i| i.selector = "app in (a,b),!canary,tier notin (x)".into()),
                None,
            ),
            (
                "an unclosed list",
                Box::new(|i| i.selector = "app in (a".into()),
                Some("selector"),
            ),
            (
                "empty",
                Box::new(|i| i.selector = String::new()),
                Some("selector"),
            ),
            (
                "a bad protect label",
                Box::new(|i| i.protect_label = "keep".into()),
                Some("protect_label"),
            ),
            (
                "a bad exclude selector",
                Box::new(|i| i.exclude_selector = Some("team in ()".into())),
                Some("exclude_selector"),
            ),
            (
                "no key",
                Box::new(|i| i.selector = "=a".into()),
                Some("selector"),
            ),
            (
                "id label with =",
                Box::new(|i| i.id_label = "a=b".into()),
                Some("id_label"),
            ),
            (
                "no kind name",
                Box::new(move |i| i.kinds = kind(|k| k.kind.clear())),
                Some("kinds"),
            ),
            (
                "no version",
                Box::new(move |i| i.kinds = kind(|k| k.version.clear())),
                Some("kinds"),
            ),
            (
                "no plural",
                Box::new(move |i| i.kinds = kind(|k| k.plural.clear())),
                Some("kinds"),
            ),
            ("no grace", Box::new(|i| i.grace_hours = 0), None),
            ("a year of grace", Box::new(|i| i.grace_hours = 8760), None),
            (
                "more",
                Box::new(|i| i.grace_hours = 8761),
                Some("grace_hours"),
            ),
            ("10000 deletes", Box::new(|i| i.max_deletes = 10_000), None),
            (
                "10001",
                Box::new(|i| i.max_deletes = 10_001),
                Some("max_deletes"),
            ),
            ("ratio 1", Box::new(|i| i.guard_ratio = 1.0), None),
            (
                "ratio over 1",
                Box::new(|i| i.guard_ratio = 1.01),
                Some("guard_ratio"),
            ),
            ("floor 0", Box::new(|i| i.guard_floor = 0), None),
            (
                "floor -1",
                Box::new(|i| i.guard_floor = -1),
                Some("guard_floor"),
            ),
        ];
        for (what, edit, refused) in cases {
            let mut i = SessionInputs::default();
            edit(&mut i);
            let result = i.validate();
            assert_eq!(
                result.as_ref().err().map(InputError::input),
                refused,
                "{what}: {result:?}"
            );
            if let Ok(c) = result {
                assert_eq!(
                    c.grace_hours,
                    u32::try_from(i.grace_hours).unwrap(),
                    "{what}"
                );
                assert_eq!(
                    c.guard_floor,
                    usize::try_from(i.guard_floor).unwrap(),
                    "{what}"
                );
            }
        }
    }

    /// The guard refuses only past both its floor and its ratio, counting soft-deleted rows as
    /// orphans when they are; the grace period ends exactly `grace_hours` after creation.
    #[test]
    fn the_guard_and_the_grace_at_their_limits() {
        let old = "2026-11-20T00:00:00Z";
        let running = Row::Present {
            state: Some("running".into()),
        };
        let deleted = Row::Present {
            state: Some("deleted".into()),
        };
        // (what, rows of the sessions s0.., floor, refused with this many orphans)
        let cases: [(&str, Vec<Row>, i64, Option<usize>); 5] = [
            (
                "orphans at the floor",
                vec![Row::Missing, Row::Missing, running.clone()],
                2,
                None,
            ),
            (
                "one past the floor",
                vec![Row::Missing, Row::Missing, Row::Missing, running.clone()],
                2,
                Some(3),
            ),
            (
                "share at the ratio",
                vec![Row::Missing, Row::Missing, running.clone(), running.clone()],
                1,
                None,
            ),
            (
                "soft-deleted count",
                vec![
                    deleted.clone(),
                    deleted.clone(),
                    deleted.clone(),
                    running.clone(),
                ],
                2,
                Some(3),
            ),
            (
                "soft-deleted at the floor",
                vec![deleted.clone(), deleted, running.clone()],
                2,
                None,
            ),
        ];
        for (what, db, floor, refused) in cases {
            let resources: Vec<_> = (0..db.len())
                .map(|i| res("Deployment", Some(&format!("s{i}")), old))
                .collect();
            let db: HashMap<String, Row> = db
                .into_iter()
                .enumerate()
                .map(|(i, r)| (format!("s{i}"), r))
                .collect();
            let c = cfg(|i| {
                i.guard_floor = floor;
                i.terminal_states = vec!["deleted".into()];
            });
            let result = plan_sessions(&resources, &db, &c, NOW);
            match refused {
                None => assert!(result.is_ok(), "{what}: {result:?}"),
                Some(n) => assert!(
                    matches!(result, Err(SessionPlanError::MassDeletion { orphans, .. }) if orphans == n),
                    "{what}: {result:?}"
                ),
            }
        }
        // Grace: 24 hours from creation, to the second.
        let live = || ("live".to_owned(), running.clone());
        for (created, decision, until) in [
            ("2026-11-28T12:00:00Z", "delete", None),
            ("2026-11-28T12:00:01Z", "held", Some(NOW + 1.0)),
            ("2026-11-29T12:00:00Z", "held", Some(NOW + 86_400.0)),
        ] {
            let resources = vec![
                res("Service", Some("gone"), created),
                res("Service", Some("live"), old),
            ];
            let db: HashMap<String, Row> = [("gone".to_owned(), Row::Missing), live()]
                .into_iter()
                .collect();
            let plan = plan_sessions(&resources, &db, &cfg(|_| {}), NOW).unwrap();
            assert_eq!(decisions(&plan)[0].1, decision, "{created}");
            let held = match &plan.judged[0].decision {
                SessionDecision::Held { until, .. } => Some(*until),
                _ => None,
            };
            assert_eq!(held, until, "{created}");
        }
    }

    #[test]
    fn bad_settings_are_named() {
        let check = |edit: fn(&mut SessionInputs), input: &str| {
            let mut i = SessionInputs::default();
            edit(&mut i);
            assert_eq!(i.validate().unwrap_err().input(), input);
        };
        check(|i| i.namespace = "kube-system".into(), "namespace");
        check(|i| i.selector = "app in a".into(), "selector");
        check(
            |i| i.exclude_selector = Some(",".into()),
            "exclude_selector",
        );
        check(|i| i.protect_label = "=x".into(), "protect_label");
        check(|i| i.id_label = String::new(), "id_label");
        check(|i| i.grace_hours = -1, "grace_hours");
        check(|i| i.max_deletes = 0, "max_deletes");
        check(|i| i.guard_ratio = 0.0, "guard_ratio");
        check(|i| i.kinds.clear(), "kinds");
    }
}
