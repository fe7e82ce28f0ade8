//! The RBAC rules the collectors need in their namespace, and nothing more.
//!
//! The Helm chart's Role mirrors [`rules_for`] ([`required_rules`] with both collectors and
//! Events on): the Pod rule only with `failedPods.enabled`, the session kinds only with
//! `gc.enabled`, the Event rule with `events.enabled` (without it, the runs pass `--no-events`),
//! and the run lock of each rendered collector: `get` and `update` on its own Lease only
//! ([`PODS_LEASE`], [`SESSIONS_LEASE`], by `resourceNames`), and `create` on Leases, which RBAC
//! cannot limit by name (a new object has none when the request is authorized; creating a name
//! that exists fails anyway). The chart's ValidatingAdmissionPolicy limits that `create` to the
//! same names, and refuses every write in the system namespaces.
//! The live tests prove that a ServiceAccount granted exactly these rules can run every call of
//! [`crate::KubeCluster`] and is refused anything else.

use k8s_openapi::api::rbac::v1::PolicyRule;

/// The failed-Pod collector's run lock: the Lease `gc-cli` takes in each namespace it runs in.
pub const PODS_LEASE: &str = "gc-pods";

/// The session collector's run lock: the Lease `gc-cli` takes in each namespace it runs in.
pub const SESSIONS_LEASE: &str = "gc-sessions";

/// Which parts of the rules a Role is for: the chart's `failedPods.enabled`, `gc.enabled` and
/// `events.enabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collectors {
    /// The failed-Pod collector: Pods, and its Lease.
    pub failed_pods: bool,
    /// The session collector: the StreamSpace kinds, and its Lease.
    pub sessions: bool,
    /// Events from live runs.
    pub events: bool,
}

impl Collectors {
    /// Both collectors, with Events: [`required_rules`].
    pub const ALL: Self = Self {
        failed_pods: true,
        sessions: true,
        events: true,
    };

    /// The Leases of these collectors, by name.
    pub fn leases(self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.sessions {
            names.push(SESSIONS_LEASE);
        }
        if self.failed_pods {
            names.push(PODS_LEASE);
        }
        names
    }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of the collectors' namespaced Role, with both collectors and Events
/// ([`rules_for`]`(`[`Collectors::ALL`]`)`):
///
/// | API group | resources | names | verbs | for |
/// | --- | --- | --- | --- | --- |
/// | `""` | `pods` | any | get, list, patch, delete | the failed-Pod collector |
/// | `coordination.k8s.io` | `leases` | `gc-pods`, `gc-sessions` | get, update | the run lock of each collector, its own Lease only |
/// | `coordination.k8s.io` | `leases` | any (RBAC cannot name a new object) | create | a first run's lock |
/// | `apps` | `deployments` | any | get, list, delete | the session collector |
/// | `""` | `services`, `persistentvolumeclaims` | any | get, list, delete | the session collector |
/// | `stream.space`, `stream.streamspace.io` | `sessions` | any | get, list, delete | the session collector (StreamSpace's two groups) |
/// | `events.k8s.io` | `events` | any | create | an Event per deletion, refusal and failure of both |
///
/// No `watch`, no `deletecollection`, no `patch` or `delete` of Leases, no Secrets, no
/// cluster-wide rule. Events are only created: never read, updated or deleted (each is posted
/// once; the API server expires them).
pub fn required_rules() -> Vec<PolicyRule> {
    rules_for(Collectors::ALL)
}

/// The rules of the namespaced Role for `collectors`: each part of [`required_rules`] only
/// with its collector (the Leases' names too), the Event rule only with Events; nothing when
/// neither collector is on.
pub fn rules_for(collectors: Collectors) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    if collectors.failed_pods {
        rules.push(rule("", &["pods"], &["get", "list", "patch", "delete"]));
    }
    let leases = collectors.leases();
    if !leases.is_empty() {
        rules.push(PolicyRule {
            resource_names: Some(leases.iter().map(|n| (*n).to_owned()).collect()),
            ..rule("coordination.k8s.io", &["leases"], &["get", "update"])
        });
        rules.push(rule("coordination.k8s.io", &["leases"], &["create"]));
    }
    if collectors.sessions {
        rules.push(rule("apps", &["deployments"], &["get", "list", "delete"]));
        rules.push(rule(
            "",
            &["services", "persistentvolumeclaims"],
            &["get", "list", "delete"],
        ));
        rules.push(rule(
            "stream.space",
            &["sessions"],
            &["get", "list", "delete"],
        ));
        rules.push(rule(
            "stream.streamspace.io",
            &["sessions"],
            &["get", "list", "delete"],
        ));
    }
    if collectors.events && !leases.is_empty() {
        rules.push(rule("events.k8s.io", &["events"], &["create"]));
    }
    rules
}

/// The rules of the session collector's ClusterRole for the volumes it retains, in either mode,
/// whatever `--retain-volume-days` (the chart renders it whenever the session collector runs: a
/// run with 0 still gives back the volumes earlier runs kept):
///
/// | API group | resources | verbs | for |
/// | --- | --- | --- | --- |
/// | `""` | `persistentvolumes` | get, list, patch | set a deleted claim's volume to `Retain`, and later give it back its policy |
///
/// No `delete`: a volume's policy given back, Kubernetes reclaims it. PersistentVolumes are
/// cluster-scoped, so `patch` reaches every one: the chart's ValidatingAdmissionPolicy
/// (`gc-volumes-admission.yaml`) limits it to volumes claimed from the namespaces the collector
/// collects or labelled as kept by gc, and to the fields gc writes (the reclaim policy, gc's
/// label and annotation).
pub fn volume_rules() -> Vec<PolicyRule> {
    vec![rule("", &["persistentvolumes"], &["get", "list", "patch"])]
}

/// The rules of the Role of `restore sessions` (the chart's `gc.restore.enabled`: an account of
/// its own, never the collector's), in each namespace it restores into:
///
/// | API group | resources | verbs | for |
/// | --- | --- | --- | --- |
/// | `apps` | `deployments` | get, create | an archived object read (exists?) and created again |
/// | `""` | `services`, `persistentvolumeclaims` | get, create | the same |
/// | `stream.space`, `stream.streamspace.io` | `sessions` | get, create | the same |
/// | `events.k8s.io` | `events` | create | a `Restored` Event per object created (`events`) |
///
/// No `update`, `patch` or `delete`: an object that exists is never replaced.
pub fn restore_rules(events: bool) -> Vec<PolicyRule> {
    let mut rules = vec![
        rule("apps", &["deployments"], &["get", "create"]),
        rule(
            "",
            &["services", "persistentvolumeclaims"],
            &["get", "create"],
        ),
        rule("stream.space", &["sessions"], &["get", "create"]),
        rule("stream.streamspace.io", &["sessions"], &["get", "create"]),
    ];
    if events {
        rules.push(rule("events.k8s.io", &["events"], &["create"]));
    }
    rules
}

/// The rules of the restore account's ClusterRole for kept volumes (rendered whenever the account
/// is, whatever the retention):
///
/// | API group | resources | verbs | for |
/// | --- | --- | --- | --- |
/// | `""` | `persistentvolumes` | get, patch | a kept volume moved to the claim created again, and given back its policy once bound |
///
/// The chart's ValidatingAdmissionPolicy limits `patch` to volumes gc kept (labelled) for claims
/// of the namespaces the account restores into, and their `claimRef` to a claim of the same name
/// and namespace.
pub fn restore_volume_rules() -> Vec<PolicyRule> {
    vec![rule("", &["persistentvolumes"], &["get", "patch"])]
}

/// The rules of a cluster-wide install's ClusterRole: [`required_rules`] in every namespace,
/// and `list` on Namespaces, to find them (`--all-namespaces`, `--namespace-selector`).
///
/// | API group | resources | verbs | for |
/// | --- | --- | --- | --- |
/// | `""` | `namespaces` | list | choosing the namespaces of a run |
///
/// In the system namespaces (`kube-system`, `kube-public`, `kube-node-lease`) these rules are
/// not enough to write anything: the chart's ValidatingAdmissionPolicy refuses the account
/// every write there.
pub fn cluster_rules() -> Vec<PolicyRule> {
    cluster_rules_for(Collectors::ALL)
}

/// [`cluster_rules`] for `collectors`: [`rules_for`] and `list` on Namespaces.
pub fn cluster_rules_for(collectors: Collectors) -> Vec<PolicyRule> {
    let mut rules = rules_for(collectors);
    if !rules.is_empty() {
        rules.push(rule("", &["namespaces"], &["list"]));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination of the chart's values that renders a Role.
    fn every_collectors() -> Vec<Collectors> {
        let mut all = Vec::new();
        for failed_pods in [false, true] {
            for sessions in [false, true] {
                for events in [false, true] {
                    all.push(Collectors {
                        failed_pods,
                        sessions,
                        events,
                    });
                }
            }
        }
        all
    }

    fn every_rule_set() -> Vec<Vec<PolicyRule>> {
        every_collectors()
            .into_iter()
            .flat_map(|c| [rules_for(c), cluster_rules_for(c)])
            .collect()
    }

    #[test]
    fn the_rules_grant_no_wildcard_and_no_secret() {
        for rule in every_rule_set().into_iter().flatten() {
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

    /// Leases are read and renewed by name, only the enabled collectors' own; `create` alone
    /// is unnamed (RBAC cannot name a new object); never `patch`, `delete` or `list`.
    #[test]
    fn leases_are_read_and_written_by_name_only() {
        for collectors in every_collectors() {
            for rules in [rules_for(collectors), cluster_rules_for(collectors)] {
                let leases: Vec<_> = rules
                    .iter()
                    .filter(|r| r.resources.as_deref() == Some(&["leases".to_owned()][..]))
                    .collect();
                let names = collectors.leases();
                if names.is_empty() {
                    assert!(rules.is_empty(), "{collectors:?}");
                    continue;
                }
                let [named, create] = &leases[..] else {
                    panic!("{collectors:?}: {leases:?}");
                };
                assert_eq!(named.verbs, ["get", "update"], "{collectors:?}");
                assert_eq!(
                    named.resource_names.as_deref(),
                    Some(&names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()[..])
                );
                assert_eq!(create.verbs, ["create"], "{collectors:?}");
                assert_eq!(create.resource_names, None, "{collectors:?}");
            }
        }
        assert_eq!(Collectors::ALL.leases(), [SESSIONS_LEASE, PODS_LEASE]);
        let pods_only = Collectors {
            sessions: false,
            ..Collectors::ALL
        };
        assert_eq!(pods_only.leases(), [PODS_LEASE]);
    }

    /// Each collector's part only with it; the cluster-wide rules add only `list` on Namespaces.
    #[test]
    fn each_part_comes_with_its_collector() {
        let resources = |rules: &[PolicyRule]| -> Vec<String> {
            rules
                .iter()
                .flat_map(|r| r.resources.clone().unwrap_or_default())
                .collect()
        };
        for collectors in every_collectors() {
            let rules = rules_for(collectors);
            let has = resources(&rules);
            let any = collectors.failed_pods || collectors.sessions;
            assert_eq!(has.contains(&"pods".into()), collectors.failed_pods);
            assert_eq!(has.contains(&"sessions".into()), collectors.sessions);
            assert_eq!(has.contains(&"events".into()), any && collectors.events);
            let mut wide = cluster_rules_for(collectors);
            if any {
                let last = wide.pop().expect("list namespaces");
                assert_eq!(
                    last.resources.as_deref(),
                    Some(&["namespaces".to_owned()][..])
                );
                assert_eq!(last.verbs, ["list"]);
            }
            assert_eq!(wide, rules);
        }
    }
}
