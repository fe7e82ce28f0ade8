//! What the request API answers: its refusal ([`Problem`], each status with its `Retry-After`
//! and `WWW-Authenticate`), the desk's refusals as statuses, and the JSON of each call's answer.

use axum::http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gc_core::ports::Receipt;
use serde::Serialize;

use crate::requests::restores::RestoreError;
use crate::requests::{Lane, Planning, Refusal};
use crate::restore::{Restoration, Restored};

/// A refusal, as the API answers it.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The HTTP status.
    #[serde(skip)]
    pub status: StatusCode,
    /// What was wrong, and what to do.
    pub error: String,
    /// The request field at fault, for bad input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// When to try again, in seconds.
    #[serde(skip)]
    pub retry_after: Option<u32>,
}

impl Problem {
    pub(super) fn new(status: StatusCode, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
            field: None,
            retry_after: None,
        }
    }

    /// Bad input: `400`, naming the request's `field`.
    pub(super) fn bad(field: &str, error: impl Into<String>) -> Self {
        Self {
            field: Some(field.to_owned()),
            ..Self::new(StatusCode::BAD_REQUEST, error)
        }
    }

    pub(super) fn retry(self, seconds: u32) -> Self {
        Self {
            retry_after: Some(seconds),
            ..self
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(&self)).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Self {
        let error = refusal.to_string();
        match refusal {
            Refusal::UnknownNamespace(_) => Self::bad("namespace", error),
            Refusal::Full { .. } => Self::new(StatusCode::TOO_MANY_REQUESTS, error).retry(5),
            Refusal::Busy(_) => Self::new(StatusCode::CONFLICT, error).retry(30),
            Refusal::Stopping => Self::new(StatusCode::SERVICE_UNAVAILABLE, error).retry(5),
        }
    }
}

impl From<Planning> for Problem {
    /// A plan refused for its data (the guard, no answer for an id) is `422`; one that could
    /// not read is `503`.
    fn from(planning: Planning) -> Self {
        match planning {
            Planning::Refused(refusal) => refusal.into(),
            Planning::Failed(e) => {
                let status = match e.kind() {
                    crate::FailureKind::Data => StatusCode::UNPROCESSABLE_ENTITY,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                };
                Self::new(status, format!("{e:#}"))
            }
        }
    }
}

impl From<RestoreError> for Problem {
    fn from(error: RestoreError) -> Self {
        let why = error.to_string();
        match error {
            RestoreError::Refused(refusal) => refusal.into(),
            RestoreError::InProgress { .. } => Self::new(StatusCode::CONFLICT, why).retry(10),
            RestoreError::Account { .. } => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, why).retry(5)
            }
            RestoreError::Request(_) => Self::bad("session", why),
            RestoreError::Lost(_) => Self::new(StatusCode::INTERNAL_SERVER_ERROR, why),
        }
    }
}

/// A restore's line of no object, as a refusal of the call: no archive at all (`404`), or a
/// store that could not say (`503`). `None` for what came of an object.
pub(super) fn session_refused(ns: &str, restored: &Restored) -> Option<Problem> {
    let why = || format!("session {} in {ns}: {}", restored.session, restored.result);
    match restored.result {
        Restoration::NoArchive { .. } => Some(Problem::new(StatusCode::NOT_FOUND, why())),
        Restoration::Unlisted { .. } => {
            Some(Problem::new(StatusCode::SERVICE_UNAVAILABLE, why()).retry(5))
        }
        _ => None,
    }
}

/// `POST .../sessions/{id}/restore`: what came of each archived object of the session.
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RestoreAnswer {
    pub(super) session: String,
    pub(super) dry_run: bool,
    pub(super) requested_by: String,
    /// The account the objects were created as.
    pub(super) restored_as: String,
    /// How many objects failed (each says why in `objects`).
    pub(super) failed: usize,
    pub(super) objects: Vec<Restored>,
}

/// `GET .../archives?session=ID`: the receipts of the session's archived objects, newest first.
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Archives {
    pub(super) session: String,
    pub(super) archives: Vec<Archive>,
}

/// One receipt: an archived object, where its manifest is, and what verifies it.
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Archive {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    /// The instant of the run that archived it (RFC 3339).
    run_at: String,
    uri: String,
    sha256: String,
    bytes: u64,
    /// A deleted claim's volume gc kept (`null`: none).
    retained_volume: Option<String>,
    /// That volume's reclaim policy before.
    volume_policy: Option<String>,
}

impl From<Receipt> for Archive {
    fn from(r: Receipt) -> Self {
        let session = r.session.unwrap_or_else(|| gc_core::ports::SessionObject {
            api_version: "v1".into(),
            kind: "Pod".into(),
            session: None,
            run_at: String::new(),
            retained: None,
        });
        Self {
            api_version: session.api_version,
            kind: session.kind,
            name: r.name,
            uid: r.uid,
            run_at: session.run_at,
            uri: r.uri,
            sha256: r.sha256,
            bytes: r.bytes,
            retained_volume: session.retained.as_ref().map(|v| v.name.clone()),
            volume_policy: session.retained.map(|v| v.policy),
        }
    }
}

/// `GET /v1/status`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub(super) struct Status {
    pub(super) version: String,
    pub(super) namespaces: Vec<String>,
    /// Per namespace: its queue and its latest request.
    pub(super) requests: Vec<Lane>,
    /// Per namespace: who holds its run lock now.
    pub(super) leases: Vec<NamespaceLease>,
}

/// Who holds a namespace's run lock (a run of this process, of another replica, of the CronJob).
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NamespaceLease {
    pub(super) namespace: String,
    /// The holder now (`null`: nobody, no run works there; or unknown, see `error`).
    pub(super) holder: Option<String>,
    /// When its hold ends unless renewed (RFC 3339).
    pub(super) until: Option<String>,
    /// Why the Lease could not be read.
    pub(super) error: Option<String>,
}
