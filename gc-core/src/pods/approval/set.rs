//! A plan over several namespaces: one section per namespace (its policy, targets and counts)
//! under one lifetime and one seal. Each section is checked exactly as a one-namespace
//! [`PlanFile`], against the policy apply gives for its namespace; a section for a namespace
//! apply does not name refuses the whole file.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    KIND, MAX_TTL_SECONDS, PlanFile, PlanFileError, SealKey, check_seal, malformed, seal_of,
};
use crate::pods::config::PodConfig;
use crate::pods::plan::{PodPlan, Target};

/// The document kind and version of a plan over several namespaces.
pub const SET_KIND: &str = "gc/failed-pod-plan-set/v1";

/// A plan file over several namespaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanSet {
    /// [`SET_KIND`].
    pub kind: String,
    /// When it was made (seconds since the epoch).
    pub created_at: f64,
    /// When it stops being valid.
    pub expires_at: f64,
    /// One section per namespace, each namespace once.
    pub sections: Vec<Section>,
    /// The seal over the whole document, as a [`PlanFile`]'s.
    pub digest: String,
}

/// The plan of one namespace in a [`PlanSet`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Section {
    /// The policy the section was planned with; its namespace is the section's.
    pub config: PodConfig,
    /// The targets, in the order apply takes them.
    pub targets: Vec<Target>,
    /// Held and deferred counts, for the reviewer.
    pub held: usize,
    /// See `held`.
    pub deferred: usize,
}

impl PlanSet {
    /// A sealed plan over the namespaces of `plans` (one per namespace), made at `now`, valid
    /// for `ttl_seconds`, sealed with `key` when given.
    pub fn seal(
        plans: &[(PodConfig, PodPlan)],
        now: f64,
        ttl_seconds: u32,
        key: Option<&SealKey>,
    ) -> Self {
        let mut set = Self {
            kind: SET_KIND.into(),
            created_at: now,
            expires_at: now + f64::from(ttl_seconds.min(MAX_TTL_SECONDS)),
            sections: plans
                .iter()
                .map(|(config, plan)| Section {
                    config: config.clone(),
                    targets: plan.targets.clone(),
                    held: plan.held,
                    deferred: plan.deferred,
                })
                .collect(),
            digest: String::new(),
        };
        set.digest = seal_of(&serde_json::to_value(&set).unwrap_or(Value::Null), key);
        set
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Reads a plan file of either kind for apply: one [`PlanFile`] per namespace it covers, each
/// checked as [`PlanFile::open`] checks one against `policy_for(namespace)`, apply's policy in
/// that namespace (an error when apply does not name it).
///
/// # Errors
/// [`PlanFileError`]: as [`PlanFile::open`], for the file or any of its sections (a member
/// given twice in any object of the file refuses it before its seal is read); a namespace
/// listed twice; [`PlanFileError::Mismatch`] naming `namespace` for a section apply does not
/// name.
pub fn open_plans(
    bytes: &[u8],
    policy_for: impl Fn(&str) -> Option<PodConfig>,
    key: Option<&SealKey>,
    now: f64,
) -> Result<Vec<PlanFile>, PlanFileError> {
    // Before anything reads the document: its parsed form keeps the last of repeated members.
    super::unique::check(bytes).map_err(|e| malformed(e.to_string()))?;
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
    let refused = |namespace: &str| PlanFileError::Mismatch {
        field: "namespace",
        planned: namespace.to_owned(),
        given: "namespaces that do not include it".to_owned(),
    };
    if doc.get("kind").and_then(Value::as_str) != Some(SET_KIND) {
        let namespace = doc
            .pointer("/config/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let policy = policy_for(namespace).ok_or_else(|| refused(namespace))?;
        return PlanFile::open_doc(doc, &policy, key, now).map(|file| vec![file]);
    }
    check_seal(&doc, key)?;
    let set: PlanSet = serde_json::from_value(doc).map_err(|e| malformed(e.to_string()))?;
    let mut seen = std::collections::BTreeSet::new();
    let mut files = Vec::with_capacity(set.sections.len());
    for (i, section) in set.sections.into_iter().enumerate() {
        let namespace = section.config.namespace.clone();
        if !seen.insert(namespace.clone()) {
            return Err(malformed(format!(
                "sections[{i}]: namespace {namespace} is listed twice"
            )));
        }
        let policy = policy_for(&namespace).ok_or_else(|| refused(&namespace))?;
        // The section as the one-namespace file it stands for, sealed as such, so that every
        // check of `PlanFile::open` applies to it unchanged.
        let mut file = PlanFile {
            kind: KIND.into(),
            config: section.config,
            created_at: set.created_at,
            expires_at: set.expires_at,
            targets: section.targets,
            held: section.held,
            deferred: section.deferred,
            approved_by: None,
            digest: String::new(),
        };
        file.digest = seal_of(&serde_json::to_value(&file).unwrap_or(Value::Null), key);
        let text = file.to_json();
        files.push(
            PlanFile::open(text.as_bytes(), &policy, key, now).map_err(|e| match e {
                PlanFileError::Malformed(why) => malformed(format!("sections[{i}]: {why}")),
                other => other,
            })?,
        );
    }
    if files.is_empty() {
        return Err(malformed("sections: none"));
    }
    Ok(files)
}

#[cfg(test)]
mod tests;
