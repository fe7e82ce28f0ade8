//! The failed-Pod plan: which Pods to archive and remove now, which to hold, which to defer.
//!
//! [`plan_pods`] is the reference flow's `plan` step. It is pure: the inventory, the previous
//! ledger and `now` come in; decisions with reasons, targets and the next ledger go out. Bad data
//! anywhere fails the whole plan and nothing partial is returned: an error names the Pod and the
//! field.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::pods::config::PodConfig;
use crate::pods::facts::{self as pod, BadField, Basis, Eligible, Ineligible};
use crate::pods::inventory::{Inventory, InventoryError};
use crate::pods::ledger::{Ledger, LedgerError, Observation, PreviousLedger, PyNum};
use crate::selector::Spared;

/// What the plan decided for one Pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum Decision {
    /// Not eligible, and why.
    NotEligible {
        /// The clause that excluded it.
        reason: Ineligible,
    },
    /// Eligible, but its retention has not passed.
    Held {
        /// What retention runs from.
        basis: Basis,
        /// When it started.
        anchor: PyNum,
        /// When it ends (seconds since the epoch).
        until: f64,
    },
    /// Eligible and due, but beyond this run's cap.
    Deferred {
        /// What retention runs from.
        basis: Basis,
        /// When it started.
        anchor: PyNum,
    },
    /// Due and within the cap: this run archives and removes it.
    Targeted {
        /// What retention runs from.
        basis: Basis,
        /// When it started.
        anchor: PyNum,
    },
    /// Eligible, but it carries the protect label: never a target, whatever its retention.
    Protected {
        /// What retention runs from.
        basis: Basis,
        /// When it started.
        anchor: PyNum,
    },
    /// Eligible, but the exclude selector matches it: never a target, whatever its retention.
    Excluded {
        /// What retention runs from.
        basis: Basis,
        /// When it started.
        anchor: PyNum,
    },
}

impl Decision {
    /// Why an eligible Pod is spared, when it is.
    pub fn spared(&self) -> Option<Spared> {
        match self {
            Self::Protected { .. } => Some(Spared::Protected),
            Self::Excluded { .. } => Some(Spared::Excluded),
            _ => None,
        }
    }
}

/// One Pod looked at, in inventory order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodDecision {
    /// `metadata.name`, when there is one.
    pub name: Option<String>,
    /// `metadata.uid`, when it is a string.
    pub uid: Option<String>,
    /// The decision and its reason.
    #[serde(flatten)]
    pub decision: Decision,
}

/// A Pod the plan targets, in the flow's shape plus what apply fences on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// `metadata.name` as given.
    pub name: Value,
    /// `metadata.uid`.
    pub uid: String,
    /// First observation, from the ledger or `now`.
    pub first: PyNum,
    /// What retention runs from.
    pub basis: Basis,
    /// The anchor: the latest `finishedAt`, or `first`.
    pub end: PyNum,
    /// `metadata.resourceVersion` as planned.
    pub resource_version: String,
    /// Size of the canonical archive as planned.
    pub archive_bytes: usize,
}

/// A complete plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    /// The instant the plan was made for (seconds since the epoch).
    pub now: f64,
    /// Every Pod looked at, in inventory order.
    pub decisions: Vec<PodDecision>,
    /// The Pods to act on, by `(anchor, uid)`, at most `max_pods`.
    pub targets: Vec<Target>,
    /// Eligible Pods whose retention has not passed.
    pub held: usize,
    /// Due Pods beyond the cap.
    pub deferred: usize,
    /// The ledger to keep: every currently eligible Pod (protected and excluded ones too, so
    /// that their first observation outlives the label).
    pub ledger: Ledger,
}

/// Why there is no plan. Nothing partial is ever returned.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    /// The inventory could not be read.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// The previous ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// More Pods than `max_inventory`.
    #[error("inventory ceiling exceeded: {count} pods, max_inventory is {max}")]
    InventoryCeiling {
        /// Pods in the inventory.
        count: usize,
        /// The ceiling.
        max: usize,
    },
    /// A Pod with data the rules cannot read.
    #[error("{pod}: {field}: {problem}")]
    BadPod {
        /// Which Pod.
        pod: PodName,
        /// JSON path of the field.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// A target whose archive would exceed `max_archive_bytes`.
    #[error(
        "{pod}: diagnostic archive ceiling exceeded: {bytes} bytes, max_archive_bytes is {max}"
    )]
    ArchiveCeiling {
        /// Which Pod.
        pod: PodName,
        /// Size of its canonical archive.
        bytes: usize,
        /// The ceiling.
        max: usize,
    },
}

/// A Pod named in an error: position, name and uid as far as they are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodName {
    /// Position in the inventory (from 0).
    pub index: usize,
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.uid`.
    pub uid: Option<String>,
}

impl std::fmt::Display for PodName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pod #{}", self.index)?;
        if let Some(n) = &self.name {
            write!(f, " {n:?}")?;
        }
        if let Some(u) = &self.uid {
            write!(f, " (uid {u})")?;
        }
        Ok(())
    }
}

struct Candidate {
    decision: usize,
    target: Target,
}

/// Plans one run of the failed-Pod collector over `inventory`, as of `now` (seconds since the
/// epoch).
///
/// # Guarantees
/// Targets are eligible, past retention, within the archive ceiling, ordered by `(anchor, uid)`
/// and at most `max_pods`. An eligible Pod with the protect label is `Protected`, one the exclude
/// selector matches is `Excluded`: neither is ever a target, nor counted as held or deferred, nor
/// held to the archive ceiling, so the other Pods' decisions are those of a plan without them.
/// The ledger holds exactly the eligible Pods, keeping the first observation of those already in
/// `previous`.
///
/// # Errors
/// [`PlanError`] for a previous ledger of another cluster or namespace, an inventory over its
/// ceiling, any Pod with unreadable data (naming Pod and
/// field), a first observation or anchor that is not in `(0, now]`, or an archive over its
/// ceiling.
pub fn plan_pods(
    inventory: &Inventory,
    previous: &PreviousLedger,
    cfg: &PodConfig,
    now: f64,
) -> Result<PodPlan, PlanError> {
    previous.check_scope(&cfg.cluster_id, &cfg.namespace)?;
    if inventory.count > cfg.max_inventory {
        return Err(PlanError::InventoryCeiling {
            count: inventory.count,
            max: cfg.max_inventory,
        });
    }
    let mut plan = PodPlan {
        now,
        decisions: Vec::with_capacity(inventory.pods.len()),
        targets: Vec::new(),
        held: 0,
        deferred: 0,
        ledger: Ledger::default(),
    };
    let mut candidates = Vec::new();
    for (index, facts) in inventory.pods.iter().enumerate() {
        let (name, uid) = match &facts.meta {
            Ok(m) => (m.display_name(), m.uid.clone()),
            Err(_) => (None, None),
        };
        let pod_name = || PodName {
            index,
            name: name.clone(),
            uid: uid.clone(),
        };
        let fail = |b: BadField| PlanError::BadPod {
            pod: pod_name(),
            field: b.field,
            problem: b.problem,
        };
        let decision = match pod::assess(facts).map_err(fail)? {
            Err(reason) => Decision::NotEligible { reason },
            Ok(pod) => match (
                cfg.spared(pod.meta.labels()),
                consider(pod, previous, cfg, now, &mut plan.ledger).map_err(fail)?,
            ) {
                // Spared Pods stay in the ledger, but count nowhere else.
                (Some(spared), due) => {
                    let (basis, anchor) = due.anchor();
                    match spared {
                        Spared::Protected => Decision::Protected { basis, anchor },
                        Spared::Excluded => Decision::Excluded { basis, anchor },
                    }
                }
                (None, Due::Held { basis, anchor }) => {
                    plan.held += 1;
                    let until = anchor.seconds() + f64::from(cfg.retention_seconds);
                    Decision::Held {
                        basis,
                        anchor,
                        until,
                    }
                }
                (None, Due::Now(target)) => {
                    if target.archive_bytes > cfg.max_archive_bytes {
                        return Err(PlanError::ArchiveCeiling {
                            pod: pod_name(),
                            bytes: target.archive_bytes,
                            max: cfg.max_archive_bytes,
                        });
                    }
                    let d = Decision::Deferred {
                        basis: target.basis,
                        anchor: target.end,
                    };
                    candidates.push(Candidate {
                        decision: plan.decisions.len(),
                        target,
                    });
                    d
                }
            },
        };
        plan.decisions.push(PodDecision {
            name,
            uid,
            decision,
        });
    }
    candidates.sort_by(|a, b| {
        let (a, b) = (&a.target, &b.target);
        a.end
            .seconds()
            .total_cmp(&b.end.seconds())
            .then_with(|| a.uid.cmp(&b.uid))
    });
    plan.deferred = candidates.len().saturating_sub(cfg.max_pods);
    for c in candidates.into_iter().take(cfg.max_pods) {
        let d = &mut plan.decisions[c.decision].decision;
        *d = Decision::Targeted {
            basis: c.target.basis,
            anchor: c.target.end,
        };
        plan.targets.push(c.target);
    }
    Ok(plan)
}

enum Due {
    Held { basis: Basis, anchor: PyNum },
    Now(Target),
}

impl Due {
    fn anchor(&self) -> (Basis, PyNum) {
        match self {
            Self::Held { basis, anchor } => (*basis, *anchor),
            Self::Now(t) => (t.basis, t.end),
        }
    }
}

fn bad(field: &str, problem: impl Into<String>) -> BadField {
    BadField {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The flow's handling of an eligible Pod: ledger entry, anchor, retention, archive size.
fn consider(
    pod: Eligible<'_>,
    previous: &PreviousLedger,
    cfg: &PodConfig,
    now: f64,
    ledger: &mut Ledger,
) -> Result<Due, BadField> {
    let uid = pod
        .meta
        .uid
        .clone()
        .ok_or_else(|| bad("metadata.uid", "not a string"))?;
    let first = match previous.0.get(&uid) {
        None => PyNum::Float(now),
        Some(Value::Object(entry)) => match entry.get("first") {
            None => PyNum::Float(now),
            Some(v) => PyNum::from_json(v)
                .ok_or_else(|| bad("ledger.first", format!("invalid observation timestamp {v}")))?,
        },
        Some(other) => return Err(bad("ledger", format!("entry is not an object: {other}"))),
    };
    if !(0.0 < first.seconds() && first.seconds() <= now) {
        return Err(bad(
            "ledger.first",
            format!("invalid observation timestamp {first}: not in (0, now]"),
        ));
    }
    let name = pod
        .meta
        .name
        .clone()
        .ok_or_else(|| bad("metadata.name", "missing"))?;
    ledger.insert(
        uid.clone(),
        Observation {
            first,
            name: name.clone(),
        },
    );
    let (end, basis) = pod.anchor(first)?;
    if end.seconds() <= 0.0 || end.seconds() > now {
        return Err(bad(
            "status",
            format!(
                "invalid terminal timestamp {end} ({}): not in (0, now]",
                basis.as_str()
            ),
        ));
    }
    if now - end.seconds() < f64::from(cfg.retention_seconds) {
        return Ok(Due::Held { basis, anchor: end });
    }
    let resource_version = pod.meta.resource_version.clone().unwrap_or_default();
    let archive_bytes = pod.archive_len(basis, end);
    Ok(Due::Now(Target {
        name,
        uid,
        first,
        basis,
        end,
        resource_version,
        archive_bytes,
    }))
}

#[cfg(test)]
mod tests;
