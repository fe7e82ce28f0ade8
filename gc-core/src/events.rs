//! Kubernetes Events as data: what the runtime reports (a [`EventRecord`]) and who reports it (a
//! [`Reporter`]). The cluster adapter turns a record into an `events.k8s.io/v1` Event and posts
//! it ([`crate::ports::EventSink`]).

/// The longest `reportingInstance` the API server accepts, in bytes.
pub const INSTANCE_LIMIT: usize = 128;

/// Whether an Event reports what was meant to happen or a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something done as intended (a deletion).
    Normal,
    /// A refusal or a failure.
    Warning,
}

impl EventType {
    /// The API's name for it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regarding {
    /// `v1`, `apps/v1`, `stream.space/v1alpha1`, ...
    pub api_version: String,
    /// `Pod`, `Deployment`, ..., `Namespace`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The namespace the object (and so the Event) is in.
    pub namespace: String,
    /// The object's uid, when known.
    pub uid: Option<String>,
}

impl Regarding {
    /// The Namespace `name` itself, for what concerns a whole run in it. The Event lives in that
    /// namespace (where `kubectl get events -n NS` looks, and where a namespaced install may
    /// write) and carries no uid (reading a Namespace needs a cluster-wide grant).
    #[must_use]
    pub fn namespace(name: &str) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            name: name.into(),
            namespace: name.into(),
            uid: None,
        }
    }
}

/// Who reports: `reportingController` (a qualified name such as `gc.example.com/gc-cli`) and
/// `reportingInstance` (the host or Pod name), cut to [`INSTANCE_LIMIT`] bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reporter {
    controller: String,
    instance: String,
}

impl Reporter {
    /// `instance` is cut to [`INSTANCE_LIMIT`] bytes; an empty one becomes `gc`.
    #[must_use]
    pub fn new(controller: &str, instance: &str) -> Self {
        let instance = cut(instance.trim(), INSTANCE_LIMIT);
        Self {
            controller: controller.into(),
            instance: if instance.is_empty() {
                "gc".into()
            } else {
                instance.into()
            },
        }
    }

    /// The `reportingController`.
    #[must_use]
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// The `reportingInstance`.
    #[must_use]
    pub fn instance(&self) -> &str {
        &self.instance
    }
}

/// One Event, as data: about what, of which type, why (`reason`, CamelCase), while doing what
/// (`action`), and in words (`note`, cut to the API server's limit when posted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// The object the Event is about.
    pub regarding: Regarding,
    /// Normal or Warning.
    pub type_: EventType,
    /// Why, in CamelCase: `Collected`, `FenceLost`, `GuardRefused`, ...
    pub reason: &'static str,
    /// What was done or refused: `Collect`, `Delete`, `Run`.
    pub action: &'static str,
    /// The message, in the words of the run's report or audit line.
    pub note: String,
}

/// The longest prefix of `text` of at most `max` bytes that ends at a character boundary.
#[must_use]
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_cut_at_a_character_boundary_and_an_empty_one_is_gc() {
        let long = "é".repeat(100);
        let r = Reporter::new("gc.example.com/gc-cli", &long);
        assert!(r.instance().len() <= INSTANCE_LIMIT);
        assert!(long.starts_with(r.instance()));
        assert_eq!(Reporter::new("c", "  ").instance(), "gc");
        assert_eq!(r.controller(), "gc.example.com/gc-cli");
    }
}
