//! Kubernetes Events (`events.k8s.io/v1`) about what a collector did: built here from plain
//! data by [`event`], posted by [`KubeCluster::post_event`].
//!
//! One POST through kube's typed `Api<Event>`, not kube-runtime's `Recorder`: kube-runtime is not
//! in the dependency tree (it would come for this alone), and the Recorder's series cache, which
//! folds repeats of one event into a `series` count, has nothing to fold here: a collector posts
//! one Event per decision, each about another object.
//!
//! An Event about a Namespace (a run refused or failed as a whole) lives in that namespace, with
//! `regarding.namespace` set to it: the API server keeps an Event about a cluster-scoped object
//! with an empty `regarding.namespace` only in `default` or `kube-system`, where a namespaced
//! install may not write, and the run's own namespace is where `kubectl get events -n NS` looks.
//! It carries no uid: reading a Namespace needs a cluster-wide grant the Role does not have.

use gc_core::events::cut;
pub use gc_core::events::{EventRecord, EventType, INSTANCE_LIMIT, Regarding, Reporter};
use gc_core::ports::{ClusterError, EventSink};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

use crate::KubeCluster;
use crate::cluster::check_namespace;
use crate::errors::{Call, cluster_error};

/// The longest `note` the API server accepts, in bytes.
pub const NOTE_LIMIT: usize = 1024;
/// The longest object name (a DNS subdomain).
const NAME_LIMIT: usize = 253;

/// The Event `record` reported by `reporter` at `at`: named `<object>.<nanoseconds in hex>` as
/// client-go names them, in the namespace of the object it regards.
///
/// # Guarantees
/// - Every field the API server requires of a new `events.k8s.io/v1` Event is set.
/// - The note is at most [`NOTE_LIMIT`] bytes (a longer one is cut at a character boundary and
///   ends with `...`); the name is a DNS subdomain of at most 253 characters when the object's
///   name is one.
pub fn event(record: &EventRecord, reporter: &Reporter, at: Timestamp) -> Event {
    let r = &record.regarding;
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&r.name, at)),
            namespace: Some(r.namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(at)),
        type_: Some(record.type_.as_str().into()),
        reason: Some(record.reason.into()),
        action: Some(record.action.into()),
        note: Some(note(&record.note)),
        regarding: Some(ObjectReference {
            api_version: Some(r.api_version.clone()),
            kind: Some(r.kind.clone()),
            name: Some(r.name.clone()),
            namespace: Some(r.namespace.clone()),
            uid: r.uid.clone(),
            ..ObjectReference::default()
        }),
        reporting_controller: Some(reporter.controller().into()),
        reporting_instance: Some(reporter.instance().into()),
        ..Event::default()
    }
}

/// `<object>.<hex nanoseconds>`, the object's name cut so that the whole fits [`NAME_LIMIT`] and
/// never ends in `.` or `-` before the suffix.
fn event_name(object: &str, at: Timestamp) -> String {
    let suffix = format!(".{:x}", at.as_nanosecond().max(0));
    let base = cut(object, NAME_LIMIT - suffix.len()).trim_end_matches(['.', '-']);
    let base = if base.is_empty() { "gc" } else { base };
    format!("{base}{suffix}")
}

/// `text` within [`NOTE_LIMIT`] bytes.
fn note(text: &str) -> String {
    if text.len() <= NOTE_LIMIT {
        return text.to_owned();
    }
    format!("{}...", cut(text, NOTE_LIMIT - 3))
}

impl KubeCluster {
    /// Creates `event` in its namespace (`metadata.namespace`).
    ///
    /// # Errors
    /// The [`ClusterError`] of the POST, mapped by status code as every call of this crate: a
    /// 403 (the identity may not create `events.k8s.io` `events`) is `Forbidden` naming `create`,
    /// `events` and the namespace.
    pub async fn post_event(&self, event: &Event) -> Result<(), ClusterError> {
        let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
        check_namespace(namespace)?;
        let call = Call {
            verb: "create",
            resource: "events",
            namespace,
        };
        let api: Api<Event> = Api::namespaced(self.client().clone(), namespace);
        api.create(&PostParams::default(), event)
            .await
            .map_err(|e| cluster_error(e, call))?;
        tracing::debug!(
            namespace,
            kind = event.regarding.as_ref().and_then(|r| r.kind.as_deref()),
            name = event.regarding.as_ref().and_then(|r| r.name.as_deref()),
            reason = event.reason.as_deref(),
            "event posted"
        );
        Ok(())
    }
}

#[async_trait::async_trait]
impl EventSink for KubeCluster {
    async fn post_event(
        &self,
        record: &EventRecord,
        reporter: &Reporter,
    ) -> Result<(), ClusterError> {
        KubeCluster::post_event(self, &event(record, reporter, Timestamp::now())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        Timestamp::from_second(1_795_953_600).unwrap()
    }

    fn pod(name: &str, note: &str) -> EventRecord {
        EventRecord {
            regarding: Regarding {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: name.into(),
                namespace: "team-a".into(),
                uid: Some("u-1".into()),
            },
            type_: EventType::Normal,
            reason: "Collected",
            action: "Collect",
            note: note.into(),
        }
    }

    #[test]
    fn an_event_has_every_field_a_new_event_needs() {
        let reporter = Reporter::new("gc.example.com/gc-cli", "gc-7f9c-x2");
        let e = event(&pod("web-1", "collected"), &reporter, at());
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": "web-1.18ec8248a9158000", "namespace": "team-a"},
                "eventTime": "2026-11-29T12:00:00.000000Z",
                "type": "Normal",
                "reason": "Collected",
                "action": "Collect",
                "note": "collected",
                "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "web-1",
                              "namespace": "team-a", "uid": "u-1"},
                "reportingController": "gc.example.com/gc-cli",
                "reportingInstance": "gc-7f9c-x2",
            })
        );
    }

    #[test]
    fn notes_names_and_instances_stay_within_the_server_limits() {
        let reporter = Reporter::new("gc.example.com/gc-cli", &"h".repeat(300));
        let long = format!("{}é tail", "x".repeat(1022));
        let labels = vec!["p".repeat(63); 4].join(".");
        let e = event(&pod(&labels[..253], &long), &reporter, at());
        let note = e.note.unwrap();
        assert_eq!(note.len(), 1024);
        assert!(
            note.ends_with("x..."),
            "cut at a character boundary: {note}"
        );
        let name = e.metadata.name.unwrap();
        assert!(
            name.len() <= 253 && gc_core::input::is_dns_subdomain(&name),
            "{name}"
        );
        assert_eq!(e.reporting_instance.unwrap().len(), INSTANCE_LIMIT);
        // A cut that would end in a dot leaves none before the suffix.
        let dotted = event_name(
            &format!("{}.{}", vec!["a".repeat(58); 4].join("."), "b".repeat(15)),
            at(),
        );
        assert!(gc_core::input::is_dns_subdomain(&dotted), "{dotted}");
        assert_eq!(Reporter::new("c/x", " ").instance(), "gc");
    }

    #[test]
    fn a_namespace_event_stays_in_the_namespace() {
        let r = Regarding::namespace("team-a");
        assert_eq!(
            (r.kind.as_str(), r.namespace.as_str()),
            ("Namespace", "team-a")
        );
        assert_eq!(r.uid, None);
    }
}
