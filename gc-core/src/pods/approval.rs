//! The reviewable plan: what `gc-cli plan --out` writes and `gc-cli apply` acts on.
//!
//! The human approval of the reference flow (its pause) becomes a file: the plan's policy, its
//! targets with the uid and resourceVersion they had when planned, when it was made, when it
//! expires, and a seal over all of it. What an approval binds:
//!
//! - **Each target exactly as reviewed**: apply fences on the planned uid and resourceVersion; a
//!   Pod changed since the plan is reported `changed` and left alone.
//! - **The applying operator's policy**: apply takes its policy from its own validated flags and
//!   refuses a plan whose recorded policy differs in any field; nothing in the file is trusted
//!   as policy. Every value read from the file is validated (names, uids, counts, times).
//! - **A bounded lifetime**: at most [`MAX_TTL_SECONDS`] (24 h) from creation, and not from the
//!   future.
//!
//! The seal is `sha256:` and the hex sha256 of the document's canonical JSON without the
//! `digest` member, or, with a key, `hmac-sha256:` and the HMAC-SHA256 of the same text. The
//! unkeyed digest detects accidental edits and truncation; it is not a signature: anyone who can
//! write the file can recompute it, so it proves nothing about who approved. The keyed seal can
//! only be produced by holders of the key: give the key to approvers and to the applying job
//! (for example from a Kubernetes Secret) and apply refuses anything else. Either way the
//! policy and the fences above hold, so a forged plan can only name Pods that apply's own
//! policy would collect anyway.

mod set;
mod unique;

pub use set::{PlanSet, SET_KIND, Section, open_plans};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::input::is_dns_subdomain;
use crate::isotime::format_timestamp;
use crate::pods::config::PodConfig;
use crate::pods::plan::{PodPlan, Target};
use crate::pyjson::{self, Layout};

/// The document kind and version written in every plan file.
pub const KIND: &str = "gc/failed-pod-plan/v1";

/// Default lifetime of a plan: one hour, as long as the flow's approval pause.
pub const DEFAULT_TTL_SECONDS: u32 = 3600;

/// The longest lifetime a plan may have: 24 hours.
pub const MAX_TTL_SECONDS: u32 = 86_400;

/// How far a plan's creation may lie in the future (clock skew between machines).
const SKEW_SECONDS: f64 = 300.0;

/// The shortest key a keyed seal accepts.
pub const MIN_KEY_BYTES: usize = 16;

const UNKEYED: &str = "sha256:";
const KEYED: &str = "hmac-sha256:";

/// A plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanFile {
    /// [`KIND`].
    pub kind: String,
    /// The policy the plan was made with (apply refuses it unless it equals its own).
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
    /// Who approved it, when it was sealed as approved by someone (the console's operator);
    /// sealed with the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// The seal: `sha256:HEX`, or `hmac-sha256:HEX` when sealed with a key.
    pub digest: String,
}

/// The secret that seals plans so that only its holders can approve.
#[derive(Clone)]
pub struct SealKey(Vec<u8>);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

impl SealKey {
    /// A key from its bytes (a file's or a variable's content, trailing line ends removed).
    ///
    /// # Errors
    /// [`PlanFileError::WeakKey`] when shorter than [`MIN_KEY_BYTES`].
    pub fn new(bytes: &[u8]) -> Result<Self, PlanFileError> {
        let trimmed = bytes.trim_ascii_end();
        if trimmed.len() < MIN_KEY_BYTES {
            return Err(PlanFileError::WeakKey(trimmed.len()));
        }
        Ok(Self(trimmed.to_vec()))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        Hmac::<Sha256>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!())
    }
}

/// Why a plan file is refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanFileError {
    /// Not a plan file of this version, or a value in it is out of bounds.
    #[error("not a valid gc failed-Pod plan: {0}")]
    Malformed(String),
    /// The content does not match its seal.
    #[error("the plan was altered after it was written (seal mismatch)")]
    Altered,
    /// The plan is sealed with a key and none was given, or the reverse.
    #[error("{0}")]
    Seal(&'static str),
    /// The key is too short.
    #[error("the seal key has {0} bytes; at least 16 are needed")]
    WeakKey(usize),
    /// Past its expiry, or made in the future.
    #[error(
        "the plan is valid from {} to {} (now {}); plan again",
        format_timestamp(*.created_at),
        format_timestamp(*.expires_at),
        format_timestamp(*.now)
    )]
    Expired {
        /// When it was made.
        created_at: f64,
        /// When it expired.
        expires_at: f64,
        /// Now.
        now: f64,
    },
    /// Made with another policy than apply's own flags.
    #[error(
        "the plan was made with {field} {planned:?}, but apply runs with {given:?}: apply acts only under its own flags; plan again, or give apply the same value"
    )]
    Mismatch {
        /// The input, as `plan` names it (`cluster_id`, `retention_seconds`, ...).
        field: &'static str,
        /// In the plan.
        planned: String,
        /// Given to apply.
        given: String,
    },
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The canonical text the seal covers: the document without its `digest` member.
fn sealed_text(doc: &Value) -> String {
    let mut doc = doc.clone();
    if let Value::Object(map) = &mut doc {
        map.remove("digest");
    }
    pyjson::to_string(&doc, Layout::Canonical)
}

fn seal_of(doc: &Value, key: Option<&SealKey>) -> String {
    let text = sealed_text(doc);
    match key {
        None => format!("{UNKEYED}{}", hex(&Sha256::digest(text.as_bytes()))),
        Some(key) => {
            let mut mac = key.mac();
            mac.update(text.as_bytes());
            format!("{KEYED}{}", hex(&mac.finalize().into_bytes()))
        }
    }
}

/// Checks the seal of `doc` with `key` (or without one).
fn check_seal(doc: &Value, key: Option<&SealKey>) -> Result<(), PlanFileError> {
    let Some(digest) = doc.get("digest").and_then(Value::as_str) else {
        return Err(PlanFileError::Malformed("digest is missing".into()));
    };
    match (digest.strip_prefix(KEYED), key) {
        (Some(_), None) => Err(PlanFileError::Seal(
            "the plan is sealed with a key: give apply the same key (--seal-key-file or GC_SEAL_KEY)",
        )),
        (None, Some(_)) => Err(PlanFileError::Seal(
            "apply was given a seal key, but the plan is not sealed with a key: only plans sealed with the key are approved",
        )),
        (Some(mac_hex), Some(key)) => {
            let mut mac = key.mac();
            mac.update(sealed_text(doc).as_bytes());
            let given = decode_hex(mac_hex).ok_or(PlanFileError::Altered)?;
            mac.verify_slice(&given).map_err(|_| PlanFileError::Altered)
        }
        (None, None) if digest == seal_of(doc, None) => Ok(()),
        (None, None) => Err(PlanFileError::Altered),
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The first input in which the plan's policy differs from apply's.
fn policy_mismatch(planned: &PodConfig, given: &PodConfig) -> Option<PlanFileError> {
    let selector = |c: &PodConfig| {
        c.exclude_selector
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    };
    let fields: [(&'static str, String, String); 10] = [
        (
            "cluster_id",
            planned.cluster_id.clone(),
            given.cluster_id.clone(),
        ),
        (
            "namespace",
            planned.namespace.clone(),
            given.namespace.clone(),
        ),
        (
            "retention_seconds",
            planned.retention_seconds.to_string(),
            given.retention_seconds.to_string(),
        ),
        (
            "max_pods",
            planned.max_pods.to_string(),
            given.max_pods.to_string(),
        ),
        (
            "max_inventory",
            planned.max_inventory.to_string(),
            given.max_inventory.to_string(),
        ),
        (
            "max_archive_bytes",
            planned.max_archive_bytes.to_string(),
            given.max_archive_bytes.to_string(),
        ),
        (
            "collect_label",
            planned.collect_label.clone(),
            given.collect_label.clone(),
        ),
        (
            "pin_finalizer",
            planned.pin_finalizer.clone(),
            given.pin_finalizer.clone(),
        ),
        (
            "protect_label",
            planned.protect_label.to_string(),
            given.protect_label.to_string(),
        ),
        ("exclude_selector", selector(planned), selector(given)),
    ];
    fields
        .into_iter()
        .find(|(_, p, g)| p != g)
        .map(|(field, planned, given)| PlanFileError::Mismatch {
            field,
            planned,
            given,
        })
}

fn malformed(what: impl Into<String>) -> PlanFileError {
    PlanFileError::Malformed(what.into())
}

/// A uid as the API server writes them: 1 to 128 of `[A-Za-z0-9-]`.
fn is_uid(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Every target's fields are what a plan of `policy` could have written at `created_at`.
fn check_targets(file: &PlanFile, policy: &PodConfig) -> Result<(), PlanFileError> {
    if file.targets.len() > policy.max_pods {
        return Err(malformed(format!(
            "targets: {} targets, more than max_pods {}",
            file.targets.len(),
            policy.max_pods
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in file.targets.iter().enumerate() {
        let field = |f: &str, why: &str| malformed(format!("targets[{i}].{f}: {why}"));
        let name = t.name.as_str().unwrap_or_default();
        if !is_dns_subdomain(name) {
            return Err(field("name", "not a Pod name"));
        }
        if !is_uid(&t.uid) {
            return Err(field("uid", "not a uid"));
        }
        if !seen.insert(t.uid.as_str()) || !seen.insert(name) {
            return Err(field("uid", "listed twice"));
        }
        let rv = &t.resource_version;
        if rv.is_empty() || rv.len() > 64 || !rv.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(field("resourceVersion", "not a resourceVersion"));
        }
        for (f, v) in [("first", t.first.seconds()), ("end", t.end.seconds())] {
            if !(v.is_finite() && v > 0.0 && v <= file.created_at) {
                return Err(field(f, "not a time before the plan was made"));
            }
        }
        if t.archive_bytes > policy.max_archive_bytes {
            return Err(field("archiveBytes", "over max_archive_bytes"));
        }
    }
    Ok(())
}

/// `ttl_seconds` as a plan lifetime.
///
/// # Errors
/// [`crate::input::InputError`] when it is 0 or more than [`MAX_TTL_SECONDS`].
pub fn check_ttl(ttl_seconds: i64) -> Result<u32, crate::input::InputError> {
    u32::try_from(ttl_seconds)
        .ok()
        .filter(|t| (1..=MAX_TTL_SECONDS).contains(t))
        .ok_or_else(|| crate::input::InputError::Invalid {
            input: "ttl_seconds",
            value: ttl_seconds.to_string(),
            rule: "must be 1 to 86400 (a plan lives at most 24 hours)",
        })
}

impl PlanFile {
    /// A sealed plan file for `plan`, made at `now`, valid for `ttl_seconds` (see
    /// [`check_ttl`]), sealed with `key` when given.
    pub fn seal(
        plan: &PodPlan,
        config: &PodConfig,
        now: f64,
        ttl_seconds: u32,
        key: Option<&SealKey>,
    ) -> Self {
        let mut file = Self {
            kind: KIND.into(),
            config: config.clone(),
            created_at: now,
            expires_at: now + f64::from(ttl_seconds.min(MAX_TTL_SECONDS)),
            targets: plan.targets.clone(),
            held: plan.held,
            deferred: plan.deferred,
            approved_by: None,
            digest: String::new(),
        };
        file.digest = seal_of(&serde_json::to_value(&file).unwrap_or(Value::Null), key);
        file
    }

    /// This plan, sealed again (with `key`, or without one) as approved by `approver`: who
    /// approved is bound by the seal like every target.
    #[must_use]
    pub fn approved(mut self, approver: &str, key: Option<&SealKey>) -> Self {
        self.approved_by = Some(approver.to_owned());
        self.digest = String::new();
        self.digest = seal_of(&serde_json::to_value(&self).unwrap_or(Value::Null), key);
        self
    }

    /// Reads and checks a plan file for apply under `policy` (apply's own validated flags) at
    /// `now`, with the seal `key` when the plans are keyed.
    ///
    /// # Errors
    /// [`PlanFileError`]: malformed (an object giving a member twice included) or out of
    /// bounds, altered, sealed otherwise than `key` says, expired or from the future, or made
    /// under another policy.
    pub fn open(
        bytes: &[u8],
        policy: &PodConfig,
        key: Option<&SealKey>,
        now: f64,
    ) -> Result<Self, PlanFileError> {
        unique::check(bytes).map_err(|e| malformed(e.to_string()))?;
        let doc: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
        Self::open_doc(doc, policy, key, now)
    }

    /// [`PlanFile::open`] on the parsed document, its members each given once.
    fn open_doc(
        doc: Value,
        policy: &PodConfig,
        key: Option<&SealKey>,
        now: f64,
    ) -> Result<Self, PlanFileError> {
        if doc.get("kind").and_then(Value::as_str) != Some(KIND) {
            return Err(malformed(format!("kind is not {KIND}")));
        }
        check_seal(&doc, key)?;
        let file: Self = serde_json::from_value(doc).map_err(|e| malformed(e.to_string()))?;
        if let Some(mismatch) = policy_mismatch(&file.config, policy) {
            return Err(mismatch);
        }
        let lifetime = file.expires_at - file.created_at;
        if !(lifetime > 0.0 && lifetime <= f64::from(MAX_TTL_SECONDS)) {
            return Err(malformed(format!(
                "expiresAt: a lifetime of {lifetime} s; at most {MAX_TTL_SECONDS} s"
            )));
        }
        if !(now < file.expires_at && now >= file.created_at - SKEW_SECONDS) {
            return Err(PlanFileError::Expired {
                created_at: file.created_at,
                expires_at: file.expires_at,
                now,
            });
        }
        check_targets(&file, policy)?;
        Ok(file)
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
