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
            digest: String::new(),
        };
        file.digest = seal_of(&serde_json::to_value(&file).unwrap_or(Value::Null), key);
        file
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
mod tests {
    use super::*;
    use crate::pods::config::PodInputs;
    use crate::pods::facts::Basis;
    use crate::pods::ledger::{Ledger, PyNum};

    const MADE: f64 = 1_795_953_600.0;
    const NOW: f64 = MADE + 100.0;

    fn policy() -> PodConfig {
        PodInputs::default().validate().unwrap()
    }

    fn file(key: Option<&SealKey>) -> PlanFile {
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
            now: MADE,
            decisions: vec![],
            targets: vec![target],
            held: 1,
            deferred: 2,
            ledger: Ledger::default(),
        };
        PlanFile::seal(&plan, &policy(), MADE, DEFAULT_TTL_SECONDS, key)
    }

    fn key(text: &str) -> SealKey {
        SealKey::new(text.as_bytes()).unwrap()
    }

    /// Re-seals `doc` as anyone can: the unkeyed digest recomputed.
    fn reseal(mut doc: Value, key: Option<&SealKey>) -> String {
        doc["digest"] = Value::String(seal_of(&doc, key));
        doc.to_string()
    }

    fn open(text: &str, policy: &PodConfig, key: Option<&SealKey>) -> Result<(), PlanFileError> {
        PlanFile::open(text.as_bytes(), policy, key, NOW).map(|_| ())
    }

    #[test]
    fn a_sealed_plan_opens_unchanged() {
        for k in [None, Some(key("0123456789abcdef-approvers"))] {
            let f = file(k.as_ref());
            let opened = PlanFile::open(f.to_json().as_bytes(), &policy(), k.as_ref(), NOW);
            assert_eq!(opened, Ok(f.clone()));
            assert_eq!(f.targets[0].first, PyNum::Int(1_795_000_000));
        }
    }

    #[test]
    fn an_edit_breaks_the_seal() {
        let text = file(None).to_json();
        for (from, to) in [("\"u1\"", "\"u2\""), ("\"42\"", "\"43\"")] {
            assert_eq!(
                open(&text.replace(from, to), &policy(), None),
                Err(PlanFileError::Altered)
            );
        }
        assert!(matches!(
            open("{}", &policy(), None),
            Err(PlanFileError::Malformed(_))
        ));
    }

    /// A re-sealed plan with another policy is refused: apply's own flags are the policy.
    #[test]
    fn a_resealed_policy_is_refused_field_by_field() {
        let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
        let check = |key: &str, value: Value, field: &str| {
            let mut forged = doc.clone();
            forged["config"][key] = value;
            let result = open(&reseal(forged, None), &policy(), None);
            assert!(
                matches!(&result, Err(PlanFileError::Mismatch { field: f, .. }) if *f == field),
                "{key}: {result:?}"
            );
        };
        check("clusterId", "other".into(), "cluster_id");
        check("namespace", "batch".into(), "namespace");
        check("retentionSeconds", 1.into(), "retention_seconds");
        check("maxPods", 50.into(), "max_pods");
        check("maxInventory", 10_000.into(), "max_inventory");
        check("maxArchiveBytes", 1_048_576.into(), "max_archive_bytes");
        check("collectLabel", "example.com/any".into(), "collect_label");
        check("pinFinalizer", "example.com/keep".into(), "pin_finalizer");
        check("protectLabel", "keep=yes".into(), "protect_label");
        check(
            "excludeSelector",
            "team in (payments)".into(),
            "exclude_selector",
        );
        // A plan made with one exclude selector, applied with another.
        let mut with = doc.clone();
        with["config"]["excludeSelector"] = "team".into();
        let mut given = policy();
        given.exclude_selector = Some("team notin (a)".parse().unwrap());
        let result = open(&reseal(with, None), &given, None);
        assert!(
            matches!(&result, Err(PlanFileError::Mismatch { field: "exclude_selector", planned, given })
                if planned == "team" && given == "team notin (a)"),
            "{result:?}"
        );
        // A plan without the protect label (an older plan) is not a plan of this policy.
        let mut old = doc.clone();
        old["config"]
            .as_object_mut()
            .unwrap()
            .remove("protectLabel");
        let result = open(&reseal(old, None), &policy(), None);
        assert!(
            matches!(&result, Err(PlanFileError::Malformed(m)) if m.contains("protectLabel")),
            "{result:?}"
        );
    }

    /// The seal covers the parsed document, where the last of two members of one name wins; a
    /// reader sees the first. A member given twice anywhere refuses the file before its seal
    /// is checked, so a valid seal cannot hide a second reading.
    #[test]
    fn a_member_given_twice_is_refused() {
        let approvers = key("0123456789abcdef-approvers");
        for k in [None, Some(&approvers)] {
            let text = file(k).to_json();
            assert!(open(&text, &policy(), k).is_ok());
            let refused = |edited: String, path: &str, member: &str| {
                assert_ne!(edited, text, "{member}: the edit did not apply");
                let result = open(&edited, &policy(), k);
                let twice = format!("member {member:?} given twice");
                assert!(
                    matches!(&result, Err(PlanFileError::Malformed(m))
                        if m.starts_with(path) && m.contains(&twice)),
                    "{member}: {result:?}"
                );
            };
            // An empty target list read first, the real one last.
            refused(
                text.replacen('{', r#"{"targets": [], "deferred": 0,"#, 1),
                "member",
                "targets",
            );
            // The same, its name escaped.
            refused(
                text.replacen('{', r#"{"tar\u0067ets": [],"#, 1),
                "member",
                "targets",
            );
            // Inside a target, and inside the policy.
            refused(
                text.replacen(r#""uid": "u1""#, r#""uid": "u2", "uid": "u1""#, 1),
                "targets[0]: member",
                "uid",
            );
            refused(
                text.replacen(
                    r#""namespace": "default""#,
                    r#""namespace": "batch", "namespace": "default""#,
                    1,
                ),
                "config: member",
                "namespace",
            );
            // The seal itself, twice.
            let digest = file(k).digest;
            refused(
                text.replacen(
                    &format!(r#""digest": "{digest}""#),
                    &format!(r#""digest": "sha256:00", "digest": "{digest}""#),
                    1,
                ),
                "member",
                "digest",
            );
        }
    }

    /// Members of one name in different objects are not repeats; a plan of many targets opens.
    #[test]
    fn many_targets_open_with_their_members_once_each() {
        let mut policy = policy();
        policy.max_pods = 5_000;
        let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
        let mut many = doc.clone();
        many["config"]["maxPods"] = 5_000.into();
        many["targets"] = (0..5_000)
            .map(|i| {
                let mut t = doc["targets"][0].clone();
                t["uid"] = format!("u{i}").into();
                t["name"] = format!("p{i}").into();
                t
            })
            .collect();
        let opened = open(&reseal(many, None), &policy, None);
        assert_eq!(opened, Ok(()));
    }

    #[test]
    fn values_read_from_the_file_are_bounded() {
        let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
        let check = |edit: &dyn Fn(&mut Value), expect: &str| {
            let mut forged = doc.clone();
            edit(&mut forged);
            let result = open(&reseal(forged, None), &policy(), None);
            let Err(e) = &result else {
                panic!("accepted: {expect}");
            };
            assert!(e.to_string().contains(expect), "{e} does not say {expect}");
        };
        check(
            &|d| d["expiresAt"] = json(MADE + 31.0 * 365.0 * 86_400.0),
            "lifetime",
        );
        check(&|d| d["expiresAt"] = json(MADE - 1.0), "lifetime");
        check(&|d| d["createdAt"] = json(NOW + 3600.0), "lifetime");
        check(
            &|d| d["targets"][0]["name"] = "../etc".into(),
            "targets[0].name",
        );
        check(&|d| d["targets"][0]["name"] = 7.into(), "targets[0].name");
        check(&|d| d["targets"][0]["uid"] = "".into(), "targets[0].uid");
        check(&|d| d["targets"][0]["uid"] = "a/b".into(), "targets[0].uid");
        check(
            &|d| d["targets"][0]["resourceVersion"] = "".into(),
            "resourceVersion",
        );
        check(
            &|d| d["targets"][0]["end"] = json(NOW + 10.0),
            "targets[0].end",
        );
        check(
            &|d| d["targets"][0]["first"] = json(-1.0),
            "targets[0].first",
        );
        check(
            &|d| d["targets"][0]["archiveBytes"] = 10_000_000.into(),
            "archiveBytes",
        );
        check(
            &|d| {
                let t = d["targets"][0].clone();
                d["targets"] = Value::Array(vec![t.clone(), t]);
            },
            "listed twice",
        );
        check(
            &|d| {
                let t = d["targets"][0].clone();
                let many: Vec<Value> = (0..6)
                    .map(|i| {
                        let mut t = t.clone();
                        t["uid"] = format!("u{i}").into();
                        t["name"] = format!("p{i}").into();
                        t
                    })
                    .collect();
                d["targets"] = Value::Array(many);
            },
            "more than max_pods",
        );
        check(&|d| d["config"]["maxPods"] = 0.into(), "max_pods");
        check(&|d| d["extra"] = true.into(), "unknown field");
    }

    fn json(v: f64) -> Value {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }

    #[test]
    fn expired_and_future_plans_are_refused() {
        let f = file(None);
        let text = f.to_json();
        for now in [f.expires_at, MADE - SKEW_SECONDS - 1.0] {
            let refused = PlanFile::open(text.as_bytes(), &policy(), None, now);
            assert!(matches!(refused, Err(PlanFileError::Expired { .. })));
            // Instants as dates.
            let message = refused.unwrap_err().to_string();
            assert!(
                message.starts_with("the plan is valid from 2026-11-29T12:00:00Z to "),
                "{message}"
            );
        }
    }

    #[test]
    fn only_holders_of_the_key_can_seal() {
        let approvers = key("0123456789abcdef-approvers");
        let keyed = file(Some(&approvers)).to_json();
        assert!(keyed.contains("hmac-sha256:"));
        // Without the key, a keyed plan is refused; with another key, it is altered.
        assert!(matches!(
            open(&keyed, &policy(), None),
            Err(PlanFileError::Seal(_))
        ));
        assert_eq!(
            open(&keyed, &policy(), Some(&key("another-key-of-16-bytes"))),
            Err(PlanFileError::Altered)
        );
        // An unkeyed (or re-sealed without the key) plan is refused when apply has the key.
        let doc: Value = serde_json::from_str(&keyed).unwrap();
        assert!(matches!(
            open(&reseal(doc.clone(), None), &policy(), Some(&approvers)),
            Err(PlanFileError::Seal(_))
        ));
        // An edit under a keyed seal is detected.
        let mut edited = doc;
        edited["targets"][0]["resourceVersion"] = "43".into();
        assert_eq!(
            open(&edited.to_string(), &policy(), Some(&approvers)),
            Err(PlanFileError::Altered)
        );
        assert_eq!(
            SealKey::new(b"short\n").unwrap_err(),
            PlanFileError::WeakKey(5)
        );
    }

    /// Every bound read from the file holds exactly at its limit and refuses one past it.
    #[test]
    fn bounds_hold_at_their_limits() {
        let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
        let policy = policy();
        let targets = |n: usize| {
            let t = doc["targets"][0].clone();
            let many: Vec<Value> = (0..n)
                .map(|i| {
                    let mut t = t.clone();
                    t["uid"] = format!("u{i}").into();
                    t["name"] = format!("p{i}").into();
                    t
                })
                .collect();
            Value::Array(many)
        };
        let max_bytes = policy.max_archive_bytes;
        // (what, the edit, accepted)
        type Edit<'a> = Box<dyn Fn(&mut Value) + 'a>;
        let cases: Vec<(&str, Edit, bool)> = vec![
            (
                "max_pods targets",
                Box::new(|d| d["targets"] = targets(policy.max_pods)),
                true,
            ),
            (
                "one more",
                Box::new(|d| d["targets"] = targets(policy.max_pods + 1)),
                false,
            ),
            (
                "rv of 64",
                Box::new(|d| d["targets"][0]["resourceVersion"] = "7".repeat(64).into()),
                true,
            ),
            (
                "rv of 65",
                Box::new(|d| d["targets"][0]["resourceVersion"] = "7".repeat(65).into()),
                false,
            ),
            (
                "rv with a space",
                Box::new(|d| d["targets"][0]["resourceVersion"] = "4 2".into()),
                false,
            ),
            (
                "rv with a control",
                Box::new(|d| d["targets"][0]["resourceVersion"] = "4\n".into()),
                false,
            ),
            (
                "first at creation",
                Box::new(|d| d["targets"][0]["first"] = json(MADE)),
                true,
            ),
            (
                "first after creation",
                Box::new(|d| d["targets"][0]["first"] = json(MADE + 1.0)),
                false,
            ),
            (
                "first at zero",
                Box::new(|d| d["targets"][0]["first"] = json(0.0)),
                false,
            ),
            (
                "end at zero",
                Box::new(|d| d["targets"][0]["end"] = json(0.0)),
                false,
            ),
            (
                "archive at the ceiling",
                Box::new(move |d| d["targets"][0]["archiveBytes"] = max_bytes.into()),
                true,
            ),
            (
                "archive over it",
                Box::new(move |d| d["targets"][0]["archiveBytes"] = (max_bytes + 1).into()),
                false,
            ),
            (
                "a lifetime of 24 h",
                Box::new(|d| d["expiresAt"] = json(MADE + 86_400.0)),
                true,
            ),
            (
                "24 h and a second",
                Box::new(|d| d["expiresAt"] = json(MADE + 86_401.0)),
                false,
            ),
            (
                "no lifetime",
                Box::new(|d| d["expiresAt"] = json(MADE)),
                false,
            ),
        ];
        for (what, edit, accepted) in cases {
            let mut forged = doc.clone();
            edit(&mut forged);
            let result = open(&reseal(forged, None), &policy, None);
            assert_eq!(result.is_ok(), accepted, "{what}: {result:?}");
        }
        // A plan with no lifetime is refused even within the clock skew before its creation.
        let mut forged = doc.clone();
        forged["expiresAt"] = json(MADE);
        let result = PlanFile::open(reseal(forged, None).as_bytes(), &policy, None, MADE - 1.0);
        assert!(
            matches!(&result, Err(PlanFileError::Malformed(m)) if m.contains("lifetime")),
            "{result:?}"
        );
        // Opened at the edges of its life: from 300 s before its creation (clock skew) until
        // just before it expires.
        let f = file(None);
        let text = f.to_json();
        for (now, accepted) in [
            (MADE - SKEW_SECONDS, true),
            (MADE - SKEW_SECONDS - 0.5, false),
            (f.expires_at - 0.5, true),
            (f.expires_at, false),
        ] {
            let result = PlanFile::open(text.as_bytes(), &policy, None, now);
            assert_eq!(result.is_ok(), accepted, "at {now}: {result:?}");
        }
    }

    /// A key never shows in logs or errors.
    #[test]
    fn a_seal_key_is_not_printed() {
        let k = key("0123456789abcdef-approvers");
        assert_eq!(format!("{k:?}"), "SealKey(..)");
        assert_eq!(SealKey::new(b"0123456789abcdef\n").map(|_| ()), Ok(()));
        assert_eq!(
            SealKey::new(b"0123456789abcde").unwrap_err(),
            PlanFileError::WeakKey(15)
        );
    }

    #[test]
    fn ttl_is_bounded() {
        assert_eq!(check_ttl(3600), Ok(3600));
        assert_eq!(check_ttl(86_400), Ok(86_400));
        for bad in [0, -1, 86_401, 1_000_000_000] {
            assert!(check_ttl(bad).is_err(), "{bad}");
        }
    }
}
