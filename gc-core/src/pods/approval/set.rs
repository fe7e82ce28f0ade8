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
mod tests {
    use super::*;
    use crate::pods::config::PodInputs;
    use crate::pods::facts::Basis;
    use crate::pods::ledger::{Ledger, PyNum};

    const MADE: f64 = 1_795_953_600.0;
    const NOW: f64 = MADE + 100.0;

    fn policy(namespace: &str) -> PodConfig {
        PodInputs {
            namespace: namespace.into(),
            ..PodInputs::default()
        }
        .validate()
        .unwrap()
    }

    fn plan(uid: &str) -> PodPlan {
        PodPlan {
            now: MADE,
            decisions: vec![],
            targets: vec![Target {
                name: format!("p-{uid}").into(),
                uid: uid.into(),
                first: PyNum::Int(1_795_000_000),
                basis: Basis::FinishedAt,
                end: PyNum::Float(1_795_000_000.5),
                resource_version: "42".into(),
                archive_bytes: 900,
            }],
            held: 0,
            deferred: 0,
            ledger: Ledger::default(),
        }
    }

    fn set(key: Option<&SealKey>) -> PlanSet {
        PlanSet::seal(
            &[(policy("a"), plan("u1")), (policy("b"), plan("u2"))],
            MADE,
            3600,
            key,
        )
    }

    fn named(names: &'static [&'static str]) -> impl Fn(&str) -> Option<PodConfig> {
        move |ns| names.contains(&ns).then(|| policy(ns))
    }

    #[test]
    fn every_section_comes_back_checked_against_its_namespace() {
        let text = set(None).to_json();
        let files = open_plans(text.as_bytes(), named(&["a", "b", "c"]), None, NOW).unwrap();
        let covered: Vec<_> = files.iter().map(|f| f.config.namespace.as_str()).collect();
        assert_eq!(covered, ["a", "b"]);
        assert_eq!(files[1].targets[0].uid, "u2");
        let key = SealKey::new(b"0123456789abcdef").unwrap();
        let keyed = set(Some(&key)).to_json();
        assert!(open_plans(keyed.as_bytes(), named(&["a", "b"]), Some(&key), NOW).is_ok());
        assert_eq!(
            open_plans(keyed.as_bytes(), named(&["a", "b"]), None, NOW),
            Err(PlanFileError::Seal(
                "the plan is sealed with a key: give apply the same key (--seal-key-file or GC_SEAL_KEY)"
            ))
        );
    }

    #[test]
    fn a_namespace_apply_does_not_name_refuses_the_file() {
        let text = set(None).to_json();
        let err = open_plans(text.as_bytes(), named(&["a"]), None, NOW).unwrap_err();
        assert!(
            matches!(&err, PlanFileError::Mismatch { field: "namespace", planned, .. } if planned == "b"),
            "{err}"
        );
        // A one-namespace plan too.
        let one = PlanFile::seal(&plan("u1"), &policy("b"), MADE, 3600, None).to_json();
        assert!(open_plans(one.as_bytes(), named(&["a"]), None, NOW).is_err());
        assert_eq!(
            open_plans(one.as_bytes(), named(&["a", "b"]), None, NOW)
                .unwrap()
                .len(),
            1
        );
    }

    /// A member given twice anywhere in a plan set refuses it before its seal is checked.
    #[test]
    fn a_member_given_twice_is_refused() {
        let key = SealKey::new(b"0123456789abcdef").unwrap();
        for k in [None, Some(&key)] {
            let text = set(k).to_json();
            assert!(open_plans(text.as_bytes(), named(&["a", "b"]), k, NOW).is_ok());
            for (edited, path, member) in [
                (
                    text.replacen('{', r#"{"sections": [],"#, 1),
                    "member",
                    "sections",
                ),
                (
                    text.replacen(r#""uid": "u2""#, r#""uid": "u3", "uid": "u2""#, 1),
                    "sections[1].targets[0]: member",
                    "uid",
                ),
                (
                    text.replacen(
                        r#""namespace": "a""#,
                        r#""namespace": "c", "namespace": "a""#,
                        1,
                    ),
                    "sections[0].config: member",
                    "namespace",
                ),
            ] {
                assert_ne!(edited, text, "{member}: the edit did not apply");
                let result = open_plans(edited.as_bytes(), named(&["a", "b", "c"]), k, NOW);
                let twice = format!("member {member:?} given twice");
                assert!(
                    matches!(&result, Err(PlanFileError::Malformed(m))
                        if m.starts_with(path) && m.contains(&twice)),
                    "{member}: {result:?}"
                );
            }
            // A one-namespace plan given to the same door.
            let one = PlanFile::seal(&plan("u1"), &policy("a"), MADE, 3600, k).to_json();
            let edited = one.replacen('{', r#"{"targets": [], "deferred": 0,"#, 1);
            let result = open_plans(edited.as_bytes(), named(&["a"]), k, NOW);
            let twice = r#"member "targets" given twice"#;
            assert!(
                matches!(&result, Err(PlanFileError::Malformed(m)) if m.contains(twice)),
                "{result:?}"
            );
        }
    }

    #[test]
    fn edits_expiry_and_repeats_are_refused() {
        let mut doc: Value = serde_json::from_str(&set(None).to_json()).unwrap();
        doc["sections"][1]["config"]["namespace"] = "c".into();
        let edited = serde_json::to_vec(&doc).unwrap();
        assert_eq!(
            open_plans(&edited, named(&["a", "b", "c"]), None, NOW),
            Err(PlanFileError::Altered)
        );
        let text = set(None).to_json();
        assert!(matches!(
            open_plans(text.as_bytes(), named(&["a", "b"]), None, MADE + 7200.0),
            Err(PlanFileError::Expired { .. })
        ));
        let twice = PlanSet::seal(
            &[(policy("a"), plan("u1")), (policy("a"), plan("u2"))],
            MADE,
            3600,
            None,
        )
        .to_json();
        let err = open_plans(twice.as_bytes(), named(&["a"]), None, NOW).unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");
        // A section checked as a plan is: a target over the policy's archive ceiling.
        let mut doc: Value = serde_json::from_str(&set(None).to_json()).unwrap();
        doc["sections"][0]["targets"][0]["archiveBytes"] = 10_000_000.into();
        doc["digest"] = Value::String(String::new());
        let resealed = seal_of(&doc, None);
        doc["digest"] = resealed.into();
        let err = open_plans(
            &serde_json::to_vec(&doc).unwrap(),
            named(&["a", "b"]),
            None,
            NOW,
        )
        .unwrap_err();
        assert!(err.to_string().contains("sections[0]"), "{err}");
    }
}
