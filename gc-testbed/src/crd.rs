//! StreamSpace's `Session` custom resource, installed on demand.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::{Error, Result, TestBed, status_code};

/// The `Session` API group (the one the fixtures create their objects in).
pub const SESSION_GROUP: &str = "stream.space";
/// The other group StreamSpace installs the `Session` definition under.
pub const SESSION_GROUP_IO: &str = "stream.streamspace.io";
/// The `Session` API version.
pub const SESSION_VERSION: &str = "v1alpha1";
/// The `Session` kind.
pub const SESSION_KIND: &str = "Session";
/// The `Session` plural (resource) name.
pub const SESSION_PLURAL: &str = "sessions";

/// How long a new CRD may take to be `Established`.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

/// The `Session` resource, for `Api::<DynamicObject>::namespaced_with`.
pub fn session_resource() -> ApiResource {
    session_resource_in(SESSION_GROUP)
}

/// The `Session` resource of `group`.
pub fn session_resource_in(group: &str) -> ApiResource {
    ApiResource {
        group: group.to_owned(),
        version: SESSION_VERSION.to_owned(),
        api_version: format!("{group}/{SESSION_VERSION}"),
        kind: SESSION_KIND.to_owned(),
        plural: SESSION_PLURAL.to_owned(),
    }
}

/// The CRD of `group`: namespaced, one served and stored version, any fields accepted.
fn session_crd(group: &str) -> Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{SESSION_PLURAL}.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": SESSION_KIND,
                "plural": SESSION_PLURAL,
                "singular": "session",
                "listKind": "SessionList",
            },
            "versions": [{
                "name": SESSION_VERSION,
                "served": true,
                "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                }},
            }],
        },
    }))?)
}

impl TestBed {
    /// Installs the `Session` CRD under both of StreamSpace's groups (if not already there) and
    /// waits until they are `Established`; the resource of the fixtures' group.
    ///
    /// Safe to call from every test: concurrent and repeated calls all return once the CRD
    /// serves requests.
    ///
    /// # Errors
    ///
    /// [`Error::Kube`] when the API server refuses the CRD, [`Error::Timeout`] when it is not
    /// established within 30 seconds.
    pub async fn install_session_crd(&self) -> Result<ApiResource> {
        // As StreamSpace's chart does: the definition under both of its groups.
        for group in [SESSION_GROUP, SESSION_GROUP_IO] {
            self.install_session_crd_in(group).await?;
        }
        Ok(session_resource())
    }

    /// Installs the `Session` CRD of `group` (if not already there), established.
    async fn install_session_crd_in(&self, group: &str) -> Result<()> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client());
        let crd = session_crd(group)?;
        let name = format!("{SESSION_PLURAL}.{group}");
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(409) => {}
            Err(e) => return Err(e.into()),
        }
        let deadline = Instant::now() + ESTABLISHED_TIMEOUT;
        while !established(&crds.get(&name).await?) {
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!("CRD {name} to be Established")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

fn established(crd: &CustomResourceDefinition) -> bool {
    let conditions = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    conditions
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True")
}
