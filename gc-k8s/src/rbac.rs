//! The RBAC rules the collectors need in their namespace, and nothing more.
//!
//! The Helm chart's Role mirrors [`required_rules`]: the Pod rule only with `failedPods.enabled`,
//! the session kinds only with `gc.enabled`, the Lease rule whenever either collector is
//! rendered (both take the run lock; no `resourceNames`, as the lock's name is the collector's),
//! and the Event rule with `events.enabled` (without it, the runs pass `--no-events`).
//! The live tests prove that a ServiceAccount granted exactly these rules can run every call of
//! [`crate::KubeCluster`] and is refused anything else.

use k8s_openapi::api::rbac::v1::PolicyRule;

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of the collectors' namespaced Role:
///
/// | API group | resources | verbs | for |
/// | --- | --- | --- | --- |
/// | `""` | `pods` | get, list, patch, delete | the failed-Pod collector |
/// | `coordination.k8s.io` | `leases` | get, create, update | the run lock of both collectors |
/// | `apps` | `deployments` | list, delete | the session collector |
/// | `""` | `services`, `persistentvolumeclaims` | list, delete | the session collector |
/// | `stream.space` | `sessions` | list, delete | the session collector |
/// | `events.k8s.io` | `events` | create | an Event per deletion, refusal and failure of both |
///
/// No `watch`, no `deletecollection`, no Secrets, no cluster-wide rule. Events are only created:
/// never read, updated or deleted (each is posted once; the API server expires them).
pub fn required_rules() -> Vec<PolicyRule> {
    vec![
        rule("", &["pods"], &["get", "list", "patch", "delete"]),
        rule(
            "coordination.k8s.io",
            &["leases"],
            &["get", "create", "update"],
        ),
        rule("apps", &["deployments"], &["list", "delete"]),
        rule(
            "",
            &["services", "persistentvolumeclaims"],
            &["list", "delete"],
        ),
        rule("stream.space", &["sessions"], &["list", "delete"]),
        rule("events.k8s.io", &["events"], &["create"]),
    ]
}

/// The rules of a cluster-wide install's ClusterRole: [`required_rules`] in every namespace,
/// and `list` on Namespaces, to find them (`--all-namespaces`, `--namespace-selector`).
///
/// | API group | resources | verbs | for |
/// | --- | --- | --- | --- |
/// | `""` | `namespaces` | list | choosing the namespaces of a run |
pub fn cluster_rules() -> Vec<PolicyRule> {
    let mut rules = required_rules();
    rules.push(rule("", &["namespaces"], &["list"]));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_grant_no_wildcard_and_no_secret() {
        for rule in required_rules() {
            let resources = rule.resources.unwrap_or_default();
            let groups = rule.api_groups.unwrap_or_default();
            for word in resources.iter().chain(&groups).chain(&rule.verbs) {
                assert_ne!(word, "*");
            }
            assert!(!resources.iter().any(|r| r == "secrets"));
            assert!(
                !rule
                    .verbs
                    .iter()
                    .any(|v| v == "deletecollection" || v == "watch")
            );
        }
    }

    #[test]
    fn events_are_only_created() {
        for rules in [required_rules(), cluster_rules()] {
            let events: Vec<_> = rules
                .iter()
                .filter(|r| r.resources.as_deref() == Some(&["events".to_owned()][..]))
                .collect();
            assert_eq!(events.len(), 1);
            let groups = events[0].api_groups.as_deref();
            assert_eq!(groups, Some(&["events.k8s.io".to_owned()][..]));
            assert_eq!(events[0].verbs, ["create"]);
        }
    }
}
