//! The one place where kube's errors become [`ClusterError`]s, by HTTP status code.

use std::error::Error as StdError;

use gc_core::ports::ClusterError;
use kube::core::Status;

/// What a request was doing, so that a 403 can name it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The Kubernetes verb (`list`, `get`, `patch`, `delete`, ...).
    pub(crate) verb: &'static str,
    /// The resource (`pods`, `deployments`, `leases`, ...).
    pub(crate) resource: &'a str,
    /// The namespace the request was in.
    pub(crate) namespace: &'a str,
}

impl<'a> Call<'a> {
    /// A `list` of `resource` in `namespace`.
    pub(crate) fn list(resource: &'a str, namespace: &'a str) -> Self {
        Self {
            verb: "list",
            resource,
            namespace,
        }
    }
}

/// Maps a kube error to the port's error, following the contract of
/// [`gc_core::ports::Cluster`] (which [`gc_core::ports::ObjectCluster`] and
/// [`gc_core::ports::Lock`] share): 404 `NotFound`, 409/422 `Changed`, 403 `Forbidden`, 410
/// `Expired`, 5xx/429/transport `Unavailable`, anything else (401 included) `Other`; a 400 to a
/// list says it is a bad request (a selector the server cannot parse), never a permission.
pub(crate) fn cluster_error(error: kube::Error, call: Call<'_>) -> ClusterError {
    match error {
        kube::Error::Api(status) => status_error(&status, call),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            ClusterError::Unavailable(transport(&error))
        }
        other => ClusterError::Other(chain(&other)),
    }
}

/// An API server's answer other than success.
fn status_error(status: &Status, call: Call<'_>) -> ClusterError {
    let message = status.message.clone();
    match status.code {
        404 => ClusterError::NotFound(message),
        409 => ClusterError::Changed {
            status: 409,
            message,
        },
        422 if failed_test_op(status) => ClusterError::Changed {
            status: 422,
            message: test_failure(status),
        },
        403 => ClusterError::Forbidden {
            verb: call.verb.to_owned(),
            resource: call.resource.to_owned(),
            namespace: call.namespace.to_owned(),
            message,
        },
        410 => ClusterError::Expired,
        401 => ClusterError::Other(format!(
            "unauthorized (401): the API server rejected the credentials: {message}"
        )),
        // A list the API server cannot parse: its label or field selector, not a permission.
        400 if call.verb == "list" => ClusterError::Other(format!(
            "bad request listing {} in {}: {} (a label or field selector the API server cannot \
             parse)",
            call.resource,
            call.namespace,
            describe(status)
        )),
        429 | 500..=599 => ClusterError::Unavailable(describe(status)),
        _ => ClusterError::Other(describe(status)),
    }
}

/// Whether a 422 is a JSON patch that could not be applied (a failed `test` op: the object
/// changed), not a validation error. The API server answers a patch it cannot apply with a bare
/// 422 (reason `Invalid`, a generic message, no kind and no causes), and a validation error with
/// the object's kind and a cause per field. Every patch this crate sends applies whenever its
/// `test` ops pass, so a bare 422 means a test failed.
fn failed_test_op(status: &Status) -> bool {
    status
        .details
        .as_ref()
        .is_none_or(|d| d.kind.is_empty() && d.causes.is_empty())
}

fn test_failure(status: &Status) -> String {
    format!(
        "a JSON-patch test op failed (the object changed): {}",
        status.message
    )
}

/// `CODE Reason: message`.
fn describe(status: &Status) -> String {
    let reason = if status.reason.is_empty() {
        String::new()
    } else {
        format!(" {}", status.reason)
    };
    format!("{}{reason}: {}", status.code, status.message)
}

/// A transport error (connection, TLS, timeout) as one line, without kube's wrapper name, and
/// saying so when it is a timeout.
pub(crate) fn transport(error: &kube::Error) -> String {
    let text = match error {
        kube::Error::Service(inner) => chain(inner.as_ref()),
        kube::Error::HyperError(inner) => chain(inner),
        other => chain(other),
    };
    if is_timeout(error) {
        format!("timed out: {text}")
    } else {
        text
    }
}

/// Whether an I/O timeout is among the error's causes.
fn is_timeout(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// An error and its sources as one line, without repeating a source that the message already
/// contains (kube and hyper often include their source in their own message).
pub(crate) fn chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    fn check(code: u16, expected: ClusterError) {
        let call = Call {
            verb: "list",
            resource: "pods",
            namespace: "team-a",
        };
        assert_eq!(cluster_error(api(code, "Reason", "msg"), call), expected);
    }

    #[test]
    fn statuses_map_by_code() {
        check(404, ClusterError::NotFound("msg".into()));
        check(
            409,
            ClusterError::Changed {
                status: 409,
                message: "msg".into(),
            },
        );
        check(
            422,
            ClusterError::Changed {
                status: 422,
                message: "a JSON-patch test op failed (the object changed): msg".into(),
            },
        );
        check(410, ClusterError::Expired);
        check(
            403,
            ClusterError::Forbidden {
                verb: "list".into(),
                resource: "pods".into(),
                namespace: "team-a".into(),
                message: "msg".into(),
            },
        );
        check(429, ClusterError::Unavailable("429 Reason: msg".into()));
        check(503, ClusterError::Unavailable("503 Reason: msg".into()));
        check(
            400,
            ClusterError::Other(
                "bad request listing pods in team-a: 400 Reason: msg (a label or field selector \
                 the API server cannot parse)"
                    .into(),
            ),
        );
        check(
            401,
            ClusterError::Other(
                "unauthorized (401): the API server rejected the credentials: msg".into(),
            ),
        );
    }

    #[test]
    fn a_bad_request_to_a_list_blames_the_selector_and_to_a_write_is_plain() {
        let list = Call::list("namespaces", "(all namespaces)");
        let bad = api(
            400,
            "BadRequest",
            "found '=', expected: ',' or 'end of string'",
        );
        let ClusterError::Other(message) = cluster_error(bad, list) else {
            panic!("not Other");
        };
        assert!(
            message.starts_with("bad request listing namespaces in (all namespaces): 400")
                && message.contains("selector")
                && !message.contains("forbidden"),
            "{message}"
        );
        let patch = Call {
            verb: "patch",
            resource: "pods",
            namespace: "n",
        };
        assert_eq!(
            cluster_error(api(400, "BadRequest", "msg"), patch),
            ClusterError::Other("400 BadRequest: msg".into())
        );
    }

    #[test]
    fn a_validation_422_names_its_object_and_is_not_changed() {
        let mut status = Status::failure("Pod \"p\" is invalid", "Invalid").with_code(422);
        status.details = Some(kube::core::response::StatusDetails {
            kind: "Pod".into(),
            name: "p".into(),
            causes: vec![kube::core::response::StatusCause {
                reason: "FieldValueForbidden".into(),
                message: "no new finalizers can be added".into(),
                field: "metadata.finalizers".into(),
            }],
            group: String::new(),
            uid: String::new(),
            retry_after_seconds: 0,
        });
        let call = Call {
            verb: "patch",
            resource: "pods",
            namespace: "n",
        };
        assert_eq!(
            cluster_error(kube::Error::Api(status.boxed()), call),
            ClusterError::Other("422 Invalid: Pod \"p\" is invalid".into())
        );
    }

    #[test]
    fn transport_errors_are_unavailable_and_carry_their_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let error = kube::Error::Service(Box::new(io));
        let call = Call {
            verb: "get",
            resource: "pods",
            namespace: "n",
        };
        assert_eq!(
            cluster_error(error, call),
            ClusterError::Unavailable("connection refused".into())
        );
    }

    #[test]
    fn timeouts_say_so() {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "deadline has elapsed");
        let error = kube::Error::Service(Box::new(io));
        assert_eq!(transport(&error), "timed out: deadline has elapsed");
    }

    #[test]
    fn other_client_errors_are_other() {
        let bad = serde_json::from_str::<u8>("x").expect_err("not a number");
        let call = Call {
            verb: "get",
            resource: "pods",
            namespace: "n",
        };
        let ClusterError::Other(message) = cluster_error(kube::Error::SerdeError(bad), call) else {
            panic!("not Other");
        };
        assert!(
            message.starts_with("Error deserializing response"),
            "{message}"
        );
    }
}
