//! Fabricated Pods in a chosen phase with chosen container states, on an API server without
//! kubelets.
//!
//! Status sent on create is dropped, so [`FailedPod::create`] creates the Pod and then writes its
//! status through the `pods/NAME/status` subresource, as Kubernetes' own apiserver-only
//! integration tests do.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::Result;

/// The image every fabricated container names (nothing pulls it).
const IMAGE: &str = "registry.invalid/gc-testbed:1";

/// One container and the state its status reports.
#[derive(Debug, Clone)]
enum State {
    Terminated { exit_code: i32 },
    Running,
    Waiting { reason: String },
}

/// A Pod to fabricate: by default phase `Failed`, one container `main` terminated with exit
/// code 1 at the time of creation.
#[derive(Debug, Clone)]
pub struct FailedPod {
    name: String,
    phase: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owner_references: Vec<OwnerReference>,
    finalizers: Vec<String>,
    containers: Vec<(String, State)>,
    finished_at: Option<Timestamp>,
}

impl FailedPod {
    /// A Failed Pod named `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            phase: "Failed".to_owned(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner_references: Vec::new(),
            finalizers: Vec::new(),
            containers: Vec::new(),
            finished_at: None,
        }
    }

    /// Another phase for `status.phase` (`Succeeded`, `Running`, ...).
    pub fn phase(mut self, phase: &str) -> Self {
        phase.clone_into(&mut self.phase);
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds an ownerReference.
    pub fn owner_reference(mut self, owner: OwnerReference) -> Self {
        self.owner_references.push(owner);
        self
    }

    /// Adds a finalizer (set on create).
    pub fn finalizer(mut self, finalizer: &str) -> Self {
        self.finalizers.push(finalizer.to_owned());
        self
    }

    /// Adds a container whose status is terminated with `exit_code`.
    ///
    /// Once any container is added, the default `main` container is not.
    pub fn terminated_container(mut self, name: &str, exit_code: i32) -> Self {
        self.containers
            .push((name.to_owned(), State::Terminated { exit_code }));
        self
    }

    /// Adds a container whose status is running.
    pub fn running_container(mut self, name: &str) -> Self {
        self.containers.push((name.to_owned(), State::Running));
        self
    }

    /// Adds a container whose status is waiting with `reason` (e.g. `CrashLoopBackOff`).
    pub fn waiting_container(mut self, name: &str, reason: &str) -> Self {
        self.containers.push((
            name.to_owned(),
            State::Waiting {
                reason: reason.to_owned(),
            },
        ));
        self
    }

    /// When terminated containers finished (default: now); running ones started then too.
    pub fn finished_at(mut self, at: Timestamp) -> Self {
        self.finished_at = Some(at);
        self
    }

    /// Creates the Pod through `api` and writes its status; returns the Pod as stored after the
    /// status write.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Kube`] when the API server refuses the Pod or its status.
    pub async fn create(&self, api: &Api<Pod>) -> Result<Pod> {
        api.create(&PostParams::default(), &self.pod()).await?;
        let patch = Patch::Merge(json!({ "status": self.status()? }));
        Ok(api
            .patch_status(&self.name, &PatchParams::default(), &patch)
            .await?)
    }

    fn containers(&self) -> Vec<(String, State)> {
        if self.containers.is_empty() {
            return vec![("main".to_owned(), State::Terminated { exit_code: 1 })];
        }
        self.containers.clone()
    }

    fn pod(&self) -> Pod {
        let nonempty = |v: &BTreeMap<String, String>| (!v.is_empty()).then(|| v.clone());
        let containers = self
            .containers()
            .into_iter()
            .map(|(name, _)| Container {
                name,
                image: Some(IMAGE.to_owned()),
                ..Container::default()
            })
            .collect();
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: nonempty(&self.labels),
                annotations: nonempty(&self.annotations),
                owner_references: (!self.owner_references.is_empty())
                    .then(|| self.owner_references.clone()),
                finalizers: (!self.finalizers.is_empty()).then(|| self.finalizers.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers,
                restart_policy: Some("Never".to_owned()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    fn status(&self) -> Result<Value> {
        let at = serde_json::to_value(Time(self.finished_at.unwrap_or_else(Timestamp::now)))?;
        let statuses: Vec<Value> = self
            .containers()
            .into_iter()
            .map(|(name, state)| {
                let (ready, state) = match state {
                    State::Terminated { exit_code } => (
                        false,
                        json!({ "terminated": {
                            "exitCode": exit_code,
                            "reason": if exit_code == 0 { "Completed" } else { "Error" },
                            "startedAt": at,
                            "finishedAt": at,
                        }}),
                    ),
                    State::Running => (true, json!({ "running": { "startedAt": at } })),
                    State::Waiting { reason } => {
                        (false, json!({ "waiting": { "reason": reason } }))
                    }
                };
                json!({
                    "name": name,
                    "image": IMAGE,
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "state": state,
                })
            })
            .collect();
        Ok(json!({
            "phase": self.phase,
            "startTime": at,
            "containerStatuses": statuses,
        }))
    }
}
