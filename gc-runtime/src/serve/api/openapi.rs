//! The request API's OpenAPI document (`GET /v1/openapi.json`): every schema derived from the
//! type its answer or body is (de)serialized from, gc-core's included (`utoipa::ToSchema`), and
//! each call's path, parameters, body and answers named here beside the routes.

use utoipa::OpenApi as _;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, PathsBuilder, Ref, Required,
    ResponseBuilder, Type,
};

use super::answers::{Archives, Problem, RestoreAnswer, Status};
use super::bodies::{Asking, Restoring};
use crate::requests::RequestedRun;
use gc_core::sessions::run::Planned;

/// The schemas, each with those it refers to.
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(
    Status,
    Planned,
    RequestedRun,
    RestoreAnswer,
    Archives,
    Asking,
    Restoring,
    Problem
)))]
struct Schemas;

/// One call: `method path`, its id and what it does, its path parameters, the schema of its
/// body (if any) and of its answer, and the statuses it refuses with.
struct Call {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    parameters: &'static [(&'static str, &'static str)],
    query: &'static [(&'static str, &'static str)],
    body: Option<&'static str>,
    answer: (&'static str, &'static str),
    refusals: &'static [(&'static str, &'static str)],
}

/// The refusals every authorized call may answer.
const CHECKED: [(&str, &str); 4] = [
    (
        "401",
        "No bearer token, or one the API server does not accept for this audience",
    ),
    ("403", "The caller may not make this call here"),
    (
        "429",
        "Too many tokens to review from the caller's address: try again after Retry-After",
    ),
    (
        "503",
        "The API server could not say who the caller is or what it may do (no answer is no), every place for an authenticated connection is taken, or the process is stopping",
    ),
];

const NS: (&str, &str) = ("ns", "The namespace of the sessions' objects");

const CALLS: [Call; 7] = [
    Call {
        method: HttpMethod::Get,
        path: "/v1/status",
        id: "status",
        summary: "The version, the namespaces served, and each one's queue and latest request (`get status`, any namespace)",
        parameters: &[],
        query: &[],
        body: None,
        answer: ("200", "Status"),
        refusals: &[],
    },
    Call {
        method: HttpMethod::Post,
        path: "/v1/namespaces/{ns}/sessions/plan",
        id: "planSessions",
        summary: "What a collection of the sessions given (none: all) would do now; writes nothing (`create sessions/plan`)",
        parameters: &[NS],
        query: &[],
        body: Some("Asking"),
        answer: ("200", "Planned"),
        refusals: &[
            ("400", "Bad input, the field named"),
            (
                "422",
                "The plan is refused (the mass-deletion guard, no answer for an id)",
            ),
        ],
    },
    Call {
        method: HttpMethod::Post,
        path: "/v1/namespaces/{ns}/sessions/collect",
        id: "collectSessions",
        summary: "A collection of the sessions given (none: all), run as a scheduled run is: the request, ended if it did within the answer wait (`create sessions/collect`)",
        parameters: &[NS],
        query: &[],
        body: Some("Asking"),
        answer: ("202", "RequestedRun"),
        refusals: &[
            ("400", "Bad input, the field named"),
            (
                "409",
                "Another process holds the namespace's Lease: try again after Retry-After",
            ),
            (
                "429",
                "The namespace's queue is full, or too many tokens to review from the caller's address: try again after Retry-After",
            ),
        ],
    },
    Call {
        method: HttpMethod::Get,
        path: "/v1/runs/{id}",
        id: "run",
        summary: "A requested collection as it is now, with the audit records of its sessions (`get runs` in its namespace)",
        parameters: &[("id", "The request's id, as its collection answered")],
        query: &[],
        body: None,
        answer: ("200", "RequestedRun"),
        refusals: &[("404", "No such request in this process")],
    },
    Call {
        method: HttpMethod::Post,
        path: "/v1/namespaces/{ns}/sessions/{session}/restore",
        id: "restoreSession",
        summary: "The session's archived objects that do not exist now, created again from their verified archives, as the restore account (`create sessions/restore`)",
        parameters: &[NS, ("session", "The session id")],
        query: &[],
        body: Some("Restoring"),
        answer: ("200", "RestoreAnswer"),
        refusals: &[
            ("400", "Bad input, the field named"),
            ("404", "The session has no archive"),
            (
                "409",
                "Another restore of the session is in progress: try again after Retry-After",
            ),
            ("501", "This server offers no restore (no restore account)"),
        ],
    },
    Call {
        method: HttpMethod::Get,
        path: "/v1/namespaces/{ns}/archives",
        id: "archives",
        summary: "The receipts of the session's archived objects, newest first (`get archives`)",
        parameters: &[NS],
        query: &[("session", "The session id")],
        body: None,
        answer: ("200", "Archives"),
        refusals: &[("400", "Bad input, the field named")],
    },
    Call {
        method: HttpMethod::Get,
        path: "/v1/openapi.json",
        id: "openapi",
        summary: "This document (no token needed: it holds no data)",
        parameters: &[],
        query: &[],
        body: None,
        answer: ("200", ""),
        refusals: &[],
    },
];

/// The document, for gc `version`.
#[must_use]
pub fn document(version: &str) -> OpenApi {
    let mut doc = Schemas::openapi();
    doc.info = InfoBuilder::new()
        .title("gc request API")
        .version(version)
        .description(Some(
            "A control plane asks gc to plan, collect or restore sessions of a namespace, each \
             call authenticated by the caller's Kubernetes token (a TokenReview for gc's \
             audience) and authorized by a SubjectAccessReview on gc's API group \
             gc.stream.space in that namespace. Refusals are `Problem`s.",
        ))
        .build();
    let mut paths = PathsBuilder::new();
    for call in &CALLS {
        paths = paths.path(
            call.path,
            PathItem::new(call.method.clone(), operation(call)),
        );
    }
    doc.paths = paths.build();
    if let Some(components) = doc.components.as_mut() {
        let bearer = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build();
        components.add_security_scheme("kubernetesToken", SecurityScheme::Http(bearer));
    }
    doc
}

fn operation(call: &Call) -> utoipa::openapi::path::Operation {
    let json = |schema: &str| {
        let content = ContentBuilder::new();
        let content = if schema.is_empty() {
            content.schema(Some(ObjectBuilder::new().schema_type(Type::Object)))
        } else {
            content.schema(Some(Ref::from_schema_name(schema)))
        };
        content.build()
    };
    let mut op = OperationBuilder::new()
        .operation_id(Some(call.id))
        .summary(Some(call.summary));
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let params = (call.parameters.iter()).map(|p| (p, ParameterIn::Path));
    for ((name, what), place) in params.chain(call.query.iter().map(|q| (q, ParameterIn::Query))) {
        let parameter = ParameterBuilder::new()
            .name(*name)
            .parameter_in(place)
            .required(Required::True)
            .description(Some(*what))
            .schema(Some(string()));
        op = op.parameter(parameter);
    }
    if let Some(body) = call.body {
        let body = RequestBodyBuilder::new()
            .description(Some("A JSON object; empty: every field's default"))
            .content("application/json", json(body))
            .required(Some(Required::False));
        op = op.request_body(Some(body.build()));
    }
    let (status, schema) = call.answer;
    let answer = ResponseBuilder::new()
        .description("The answer")
        .content("application/json", json(schema));
    op = op.response(status, answer);
    let checked = if call.id == "openapi" {
        &[][..]
    } else {
        &CHECKED[..]
    };
    // A status the call lists says it all (its description names the checks' cause too).
    let checked = checked
        .iter()
        .filter(|(status, _)| !call.refusals.iter().any(|(own, _)| own == status));
    for (status, why) in call.refusals.iter().chain(checked) {
        let refusal = ResponseBuilder::new()
            .description(*why)
            .content("application/json", json("Problem"));
        op = op.response(*status, refusal);
    }
    if call.id != "openapi" {
        op = op.security(SecurityRequirement::new(
            "kubernetesToken",
            Vec::<String>::new(),
        ));
    }
    op.build()
}

#[cfg(test)]
mod tests {
    /// The committed copy (`clients/go/openapi.json`, which the Go client's types are checked
    /// against) is the document the types give now: a changed answer type fails here until the
    /// copy is made again (`GC_WRITE_OPENAPI=1 cargo test -p gc-runtime --lib openapi`).
    #[test]
    fn the_committed_document_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/go/openapi.json");
        let mut generated = super::document("0.0.0").to_pretty_json().unwrap();
        generated.push('\n');
        if std::env::var_os("GC_WRITE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "{path} is not the generated document: GC_WRITE_OPENAPI=1 cargo test -p gc-runtime \
             --lib openapi"
        );
    }
}
