//! The reviewable plan: what `gc-cli plan --out` writes and `gc-cli apply` acts on.
//!
//! The human approval of the reference flow (its pause) becomes a file: the plan's inputs, its
//! targets with the uid and resourceVersion they had when planned, when it was made, when it
//! expires, and a digest over all of it. Apply refuses a plan that is expired, altered, or for
//! another cluster or namespace, and acts only on the targets it lists; every write is fenced
//! again at apply time, so a plan approved an hour ago cannot touch a Pod that changed since.
//!
//! The digest is the sha256 of the document's canonical JSON without the `digest` member. It
//! detects any edit; it is not a signature (anyone can recompute it), so keep plan files where
//! only approvers can write them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::config::PodConfig;
use crate::plan::{PodPlan, Target};
use crate::pyjson::{self, Layout};

/// The document kind and version written in every plan file.
pub const KIND: &str = "gc/failed-pod-plan/v1";

/// Default lifetime of a plan: one hour, as long as the flow's approval pause.
pub const DEFAULT_TTL_SECONDS: f64 = 3600.0;

/// A plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFile {
    /// [`KIND`].
    pub kind: String,
    /// The inputs the plan was made with.
    pub config: PodConfig,
    /// When it was made (seconds since the epoch).
    pub created_at: f64,
    /// When it stops being valid.
    pub expires_at: f64,
    /// The targets, in the order apply takes them.
    pub targets: Vec<Target>,
    /// Held and deferred counts, for the reviewer.
    pub held: usize,
    /// See `held`.
    pub deferred: usize,
    /// `sha256:` and the hex digest of everything else.
    pub digest: String,
}

/// Why a plan file is refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanFileError {
    /// Not a plan file of this version.
    #[error("not a gc failed-Pod plan: {0}")]
    Malformed(String),
    /// The content does not match its digest.
    #[error("the plan was altered after it was written (digest mismatch)")]
    Altered,
    /// Past its expiry.
    #[error("the plan expired at {expires_at} (now {now}); plan again")]
    Expired {
        /// When it expired.
        expires_at: f64,
        /// Now.
        now: f64,
    },
    /// Made for another cluster or namespace than the one apply runs against.
    #[error("the plan is for {field} {planned:?}, not {given:?}")]
    Mismatch {
        /// `cluster_id` or `namespace`.
        field: &'static str,
        /// In the plan.
        planned: String,
        /// Given to apply.
        given: String,
    },
}

fn digest_of(doc: &Value) -> String {
    let mut doc = doc.clone();
    if let Value::Object(map) = &mut doc {
        map.remove("digest");
    }
    let text = pyjson::to_string(&doc, Layout::Canonical);
    let hex: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

impl PlanFile {
    /// A sealed plan file for `plan`, made at `now`, valid for `ttl_seconds`.
    pub fn seal(plan: &PodPlan, config: &PodConfig, now: f64, ttl_seconds: f64) -> Self {
        let mut file = Self {
            kind: KIND.into(),
            config: config.clone(),
            created_at: now,
            expires_at: now + ttl_seconds,
            targets: plan.targets.clone(),
            held: plan.held,
            deferred: plan.deferred,
            digest: String::new(),
        };
        file.digest = digest_of(&serde_json::to_value(&file).unwrap_or(Value::Null));
        file
    }

    /// Reads and checks a plan file for apply against `cluster_id` and `namespace` at `now`.
    ///
    /// # Errors
    /// [`PlanFileError`]: malformed, altered, expired, or for another cluster or namespace.
    pub fn open(
        bytes: &[u8],
        cluster_id: &str,
        namespace: &str,
        now: f64,
    ) -> Result<Self, PlanFileError> {
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| PlanFileError::Malformed(e.to_string()))?;
        if doc.get("kind").and_then(Value::as_str) != Some(KIND) {
            return Err(PlanFileError::Malformed(format!("kind is not {KIND}")));
        }
        if doc.get("digest").and_then(Value::as_str) != Some(digest_of(&doc).as_str()) {
            return Err(PlanFileError::Altered);
        }
        let file: Self =
            serde_json::from_value(doc).map_err(|e| PlanFileError::Malformed(e.to_string()))?;
        if now >= file.expires_at || now < file.created_at - 300.0 {
            return Err(PlanFileError::Expired {
                expires_at: file.expires_at,
                now,
            });
        }
        for (field, planned, given) in [
            ("cluster_id", &file.config.cluster_id, cluster_id),
            ("namespace", &file.config.namespace, namespace),
        ] {
            if planned != given {
                return Err(PlanFileError::Mismatch {
                    field,
                    planned: planned.clone(),
                    given: given.into(),
                });
            }
        }
        Ok(file)
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Ledger, PyNum};
    use crate::pod::Basis;

    fn file() -> (PlanFile, PodConfig) {
        let cfg = crate::config::PodInputs::default().validate().unwrap();
        let target = Target {
            name: "p".into(),
            uid: "u1".into(),
            first: PyNum::Int(1_795_000_000),
            basis: Basis::FinishedAt,
            end: PyNum::Float(1_795_000_000.5),
            resource_version: "42".into(),
            archive_bytes: 900,
        };
        let plan = PodPlan {
            now: 1e9,
            decisions: vec![],
            targets: vec![target],
            held: 1,
            deferred: 2,
            ledger: Ledger::default(),
        };
        (
            PlanFile::seal(&plan, &cfg, 1_795_953_600.0, DEFAULT_TTL_SECONDS),
            cfg,
        )
    }

    #[test]
    fn a_sealed_plan_opens_unchanged() {
        let (f, _) = file();
        let opened = PlanFile::open(
            f.to_json().as_bytes(),
            "primary",
            "default",
            1_795_953_700.0,
        )
        .unwrap();
        assert_eq!(opened, f);
        assert_eq!(opened.targets[0].first, PyNum::Int(1_795_000_000));
    }

    #[test]
    fn altered_expired_and_misdirected_plans_are_refused() {
        let (f, _) = file();
        let text = f.to_json();
        let now = 1_795_953_700.0;
        let altered = text.replace("\"u1\"", "\"u2\"");
        assert_eq!(
            PlanFile::open(altered.as_bytes(), "primary", "default", now),
            Err(PlanFileError::Altered)
        );
        let more = text.replace("\"resourceVersion\": \"42\"", "\"resourceVersion\": \"43\"");
        assert_eq!(
            PlanFile::open(more.as_bytes(), "primary", "default", now),
            Err(PlanFileError::Altered)
        );
        assert!(matches!(
            PlanFile::open(text.as_bytes(), "primary", "default", f.expires_at),
            Err(PlanFileError::Expired { .. })
        ));
        assert!(matches!(
            PlanFile::open(text.as_bytes(), "other", "default", now),
            Err(PlanFileError::Mismatch {
                field: "cluster_id",
                ..
            })
        ));
        assert!(matches!(
            PlanFile::open(text.as_bytes(), "primary", "batch", now),
            Err(PlanFileError::Mismatch {
                field: "namespace",
                ..
            })
        ));
        assert!(matches!(
            PlanFile::open(b"{}", "primary", "default", now),
            Err(PlanFileError::Malformed(_))
        ));
    }
}
