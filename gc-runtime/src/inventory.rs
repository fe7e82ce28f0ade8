//! What a plan from an inventory file says beside the plan: that not one of its Pods is in the
//! namespace planned (`-n` mistyped, or an inventory of another namespace), with the namespaces
//! it does hold.

use std::collections::BTreeSet;
use std::path::Path;

use gc_core::PodPlan;
use gc_core::pods::facts::Ineligible;
use gc_core::pods::plan::Decision;
use serde::Deserialize;

/// At most this many namespaces are named.
const NAMED: usize = 10;

/// Warns (on stderr, through `tracing`) when `plan`, made from the inventory at `path` for
/// `namespace`, looked at Pods and every one was in another namespace: the plan is then empty
/// for a reason its summary does not say. The warning names the namespace and those the
/// inventory holds (read again for their names alone; not named when it cannot be read again,
/// as standard input). The plan and the exit code are unchanged.
pub fn warn_if_elsewhere(plan: &PodPlan, namespace: &str, path: &Path) {
    if let Some(warning) = elsewhere(plan, namespace, path) {
        tracing::warn!("{warning}");
    }
}

/// The warning of [`warn_if_elsewhere`], if any.
pub fn elsewhere(plan: &PodPlan, namespace: &str, path: &Path) -> Option<String> {
    let other = |d: &Decision| {
        matches!(
            d,
            Decision::NotEligible {
                reason: Ineligible::OtherNamespace
            }
        )
    };
    if plan.decisions.is_empty() || !plan.decisions.iter().all(|d| other(&d.decision)) {
        return None;
    }
    let count = plan.decisions.len();
    let stdin = path == Path::new("-");
    let source = if stdin {
        "standard input".into()
    } else {
        path.display().to_string()
    };
    let mut warning = format!(
        "no Pod of inventory {source} is in namespace {namespace:?} (-n): all {count} are in \
         other namespaces"
    );
    let held = (!stdin)
        .then(|| namespaces(path))
        .flatten()
        .filter(|held| !held.is_empty());
    if let Some(held) = held {
        let names: Vec<&str> = held.iter().map(String::as_str).take(NAMED).collect();
        let more = held.len().saturating_sub(NAMED);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        warning.push_str(&format!(
            " ({}{more}): give one of those with -n",
            names.join(", ")
        ));
    }
    Some(warning)
}

/// Either shape of inventory, read for the Pods' namespaces alone (all else skipped).
#[derive(Deserialize)]
struct Shape {
    #[serde(default)]
    items: Vec<Item>,
    #[serde(default, rename = "metadataItems")]
    metadata_items: Vec<Meta>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    metadata: Meta,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    namespace: Option<serde_json::Value>,
}

/// The namespaces the inventory at `path` holds; `None` when it cannot be read so.
fn namespaces(path: &Path) -> Option<BTreeSet<String>> {
    let file = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let shape: Shape = serde_json::from_reader(file).ok()?;
    let metas = shape.items.into_iter().map(|i| i.metadata);
    Some(
        metas
            .chain(shape.metadata_items)
            .filter_map(|m| m.namespace?.as_str().map(str::to_owned))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(decisions: Vec<Decision>) -> PodPlan {
        let decisions = decisions
            .into_iter()
            .map(|decision| gc_core::pods::plan::PodDecision {
                name: Some("p".into()),
                uid: Some("u".into()),
                decision,
            })
            .collect();
        PodPlan {
            now: 0.0,
            decisions,
            targets: Vec::new(),
            held: 0,
            deferred: 0,
            ledger: Default::default(),
        }
    }

    fn elsewhere_() -> Decision {
        Decision::NotEligible {
            reason: Ineligible::OtherNamespace,
        }
    }

    #[test]
    fn an_inventory_of_other_namespaces_is_said_so_with_its_namespaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pods.json");
        let pod = |ns: &str| format!(r#"{{"metadata": {{"name": "p", "namespace": "{ns}"}}}}"#);
        let items = [pod("b"), pod("a"), pod("b"), r#"{"status": {}}"#.into()].join(",");
        std::fs::write(&path, format!(r#"{{"kind": "List", "items": [{items}]}}"#)).unwrap();
        let warning = elsewhere(&plan(vec![elsewhere_(); 4]), "nosuchns", &path).unwrap();
        assert!(
            warning.ends_with(
                "is in namespace \"nosuchns\" (-n): all 4 are in other namespaces (a, b): give \
                 one of those with -n"
            ),
            "{warning}"
        );
        // The flow's shape too.
        std::fs::write(
            &path,
            r#"{"size": 1, "metadataItems": [{"namespace": "c"}], "statusItems": [{}]}"#,
        )
        .unwrap();
        let warning = elsewhere(&plan(vec![elsewhere_()]), "x", &path).unwrap();
        assert!(warning.ends_with("other namespaces (c): give one of those with -n"));
        // Standard input is not read again.
        let warning = elsewhere(&plan(vec![elsewhere_()]), "x", Path::new("-")).unwrap();
        assert!(
            warning.ends_with("all 1 are in other namespaces"),
            "{warning}"
        );
    }

    #[test]
    fn a_plan_with_a_pod_of_the_namespace_or_none_says_nothing() {
        let path = Path::new("-");
        assert_eq!(elsewhere(&plan(Vec::new()), "x", path), None);
        let mixed = vec![
            elsewhere_(),
            Decision::NotEligible {
                reason: Ineligible::NotLabelled,
            },
        ];
        assert_eq!(elsewhere(&plan(mixed), "x", path), None);
    }
}
