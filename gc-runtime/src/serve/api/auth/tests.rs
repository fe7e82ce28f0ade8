//! The route layer on its own: a handler runs only for a caller allowed what its route
//! declares, in the namespace its scope names; refusals are answered (and audited) by the layer.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use gc_core::ports::ClusterError;
use tower::ServiceExt as _;

use super::*;

/// Token `t` is user `u`, allowed anything in namespace `ns` and in none; every other token is
/// refused.
#[derive(Default)]
struct Reviews(AtomicUsize);

#[async_trait]
impl Access for Reviews {
    async fn authenticate(
        &self,
        token: &str,
        _: &str,
    ) -> Result<Result<Caller, String>, ClusterError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(match token {
            "t" => Ok(Caller {
                user: "u".into(),
                ..Caller::default()
            }),
            _ => Err("invalid bearer token".into()),
        })
    }

    async fn authorize(
        &self,
        _: &Caller,
        _: &str,
        asked: Asked<'_>,
    ) -> Result<Result<(), String>, ClusterError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(match asked.namespace {
            "ns" | "" => Ok(()),
            _ => Err("no RBAC rule".into()),
        })
    }
}

/// The audit lines of the refusals; the desk serves `ns` only.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Refusals for Lines {
    fn serves(&self, namespace: &str) -> bool {
        namespace == "ns"
    }
    fn denied(&self, line: &DeniedLine<'_>) {
        let text = format!("{} {} in {:?}", line.status, line.call, line.namespace);
        self.0.lock().unwrap().push(text);
    }
}

async fn call(router: &Router, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = axum::http::Request::builder().uri(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = (router.clone().oneshot(request.body(Body::empty()).unwrap())).await;
    let response = response.unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 16).await;
    (status, String::from_utf8(body.unwrap().to_vec()).unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_handler_runs_only_for_a_caller_allowed_what_its_route_declares() {
    let lines = Arc::new(Lines::default());
    let audit = Arc::clone(&lines) as Arc<dyn Refusals>;
    let gate = Arc::new(Gate::new(Reviews::default(), audit, ApiOptions::default()));
    let who = |Authorized(caller): Authorized| async move { caller.user };
    let things = || Need::to("get", "things");
    let owner = |id: &str| (id != "none").then(|| id.to_owned());
    let router = Router::new()
        .route("/cluster", guarded(get(who), &gate, things()))
        .route("/n/{ns}", guarded(get(who), &gate, things().in_path("ns")))
        .route(
            "/o/{id}",
            guarded(
                get(who),
                &gate,
                things().of("sub").in_namespace_of("id", "thing", owner),
            ),
        )
        .route("/unguarded", get(who))
        .route(
            "/wrong/{x}",
            guarded(get(who), &gate, things().in_path("ns")),
        );
    for path in ["/cluster", "/n/ns", "/o/ns"] {
        assert_eq!(
            call(&router, path, Some("t")).await,
            (200, "u".into()),
            "{path}"
        );
    }
    // Refused by the layer: the handler never runs.
    let (status, body) = call(&router, "/n/other", Some("t")).await;
    assert_eq!(
        (status, body.contains("no RBAC rule")),
        (403, true),
        "{body}"
    );
    for path in ["/cluster", "/n/ns", "/o/ns", "/o/none"] {
        let (status, _) = call(&router, path, Some("x")).await;
        assert_eq!(status, 401, "{path}: a stranger learns nothing of the id");
    }
    // An object not found, or in a namespace the caller may not read, is none.
    for id in ["none", "other"] {
        let (status, body) = call(&router, &format!("/o/{id}"), Some("t")).await;
        assert_eq!(status, 404, "{id}: {body}");
        assert!(body.contains(&format!("no thing {id}")), "{body}");
    }
    // A handler without its layer, or a layer without its parameter, refuses the call.
    assert_eq!(call(&router, "/unguarded", Some("t")).await.0, 500);
    assert_eq!(call(&router, "/wrong/x", Some("t")).await.0, 500);
    let lines = lines.0.lock().unwrap().clone();
    assert_eq!(
        lines,
        [
            "403 get things in \"\"",
            "401 get things in \"\"",
            "401 get things in \"ns\"",
            "401 get things/sub in \"\"",
            "401 get things/sub in \"\"",
            "403 get things/sub in \"\"",
        ]
    );
}
