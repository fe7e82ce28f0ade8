//! The request API's refusals and answers, through its router (no socket), on the desk's fakes
//! and a fake of the API server's reviews: no token is 401, a token the API server does not
//! accept is 401, a right it denies is 403, an API server that cannot answer is 503, and bad
//! input is 400 naming the field; none of them reads or deletes anything. Answers are cached.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::Request;
use gc_core::ports::ClusterError;
use serde_json::Value;
use tower::ServiceExt as _;

use super::*;
use crate::LockOptions;
use crate::requests::RequestOptions;
use crate::requests::tests_desk::{NS, World};

/// The API server's reviews: tokens `api` (the control plane, allowed everything), `reader`
/// (allowed only `sessions/plan` in [`NS`]) and `other-audience`.
#[derive(Default)]
struct Reviews {
    /// Every review asked for.
    calls: AtomicUsize,
    /// The API server cannot be reached.
    down: AtomicBool,
}

const API: &str = "system:serviceaccount:streamspace:streamspace-api";

#[async_trait]
impl Access for Reviews {
    async fn authenticate(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<Result<Caller, String>, ClusterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(ClusterError::Unavailable("connection refused".into()));
        }
        assert_eq!(audience, "gc");
        let user = match token {
            "api" => API,
            "reader" => "system:serviceaccount:streamspace:reader",
            "other-audience" => return Ok(Err("token audiences [\"kube\"] is invalid".into())),
            _ => return Ok(Err("invalid bearer token".into())),
        };
        Ok(Ok(Caller {
            user: user.into(),
            ..Caller::default()
        }))
    }

    async fn authorize(
        &self,
        caller: &Caller,
        group: &str,
        asked: Asked<'_>,
    ) -> Result<Result<(), String>, ClusterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        assert_eq!(group, GROUP);
        let allowed = match caller.user.as_str() {
            API => true,
            _ => asked.namespace == NS && asked.subresource == "plan",
        };
        Ok(if allowed {
            Ok(())
        } else {
            Err("no RBAC rule".into())
        })
    }
}

struct Client {
    router: Router,
    world: World,
    reviews: Arc<Reviews>,
    metrics: Arc<ApiMetrics>,
}

/// The restore account: the world's cluster with creates of its own (the collector's cluster
/// never creates), or no credentials when `refused`.
struct Account {
    cluster: crate::testing::TestCluster,
    refused: AtomicBool,
    /// Its token takes ten minutes to come.
    slow: AtomicBool,
}

#[async_trait]
impl RestoreAccount<crate::testing::TestCluster> for Arc<Account> {
    fn name(&self) -> &str {
        "system:serviceaccount:gc:gc-restore"
    }
    async fn act(&self) -> Result<crate::testing::TestCluster, ClusterError> {
        if self.slow.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        }
        if self.refused.load(Ordering::SeqCst) {
            let message = "cannot create serviceaccounts/token".to_owned();
            return Err(ClusterError::Forbidden {
                verb: "create".into(),
                resource: "serviceaccounts/token".into(),
                namespace: "gc".into(),
                message,
            });
        }
        Ok(self.cluster.clone())
    }
}

impl Client {
    fn new() -> Self {
        Self::serving(false).0
    }

    /// A client of an API that restores (as the account given back) when `restores`.
    fn serving(restores: bool) -> (Self, Arc<Account>) {
        Self::over(restores, gc_core::testing::Kept::default())
    }

    /// [`Self::serving`], the store and sink `kept`.
    fn over(restores: bool, kept: gc_core::testing::Kept) -> (Self, Arc<Account>) {
        let world = World::new();
        let desk = world.desk_over(kept, RequestOptions::default(), LockOptions::default());
        let reviews = Arc::new(Reviews::default());
        let mut cluster = world.cluster.clone();
        cluster.created = Arc::default();
        let account = Arc::new(Account {
            cluster,
            refused: AtomicBool::new(false),
            slow: AtomicBool::new(false),
        });
        let restore = restores.then(|| {
            Box::new(Arc::clone(&account)) as Box<dyn RestoreAccount<crate::testing::TestCluster>>
        });
        let options = ApiOptions::default();
        let api = Api::new(desk, Arc::clone(&reviews), options, "1.2.3", restore);
        let client = Self {
            router: api.router(),
            world,
            reviews,
            metrics: api.metrics(),
        };
        (client, account)
    }

    /// `method path` with `token` and `body`: the status, the `Retry-After`, the JSON answer.
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, Option<String>, Value) {
        self.call_from(None, method, path, token, body).await
    }

    /// [`Self::call`] from the address `source` (as a server's `ConnectInfo` gives it).
    async fn call_from(
        &self,
        source: Option<&str>,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, Option<String>, Value) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(source) = source {
            let address = SocketAddr::new(source.parse().unwrap(), 40000);
            request = request.extension(ConnectInfo(address));
        }
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request.body(Body::from(body.to_owned())).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let retry = (response.headers().get(RETRY_AFTER)).map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await;
        let value = serde_json::from_slice(&bytes.unwrap()).unwrap_or(Value::Null);
        (status, retry, value)
    }
}

const COLLECT: &str = "/v1/namespaces/streamspace/sessions/collect";
const PLAN: &str = "/v1/namespaces/streamspace/sessions/plan";

/// A collection asked for by an allowed caller: 202, the run's id, and its records; the run
/// then answers on `GET /v1/runs/{id}`, naming who asked.
#[tokio::test(start_paused = true)]
async fn an_allowed_caller_collects_a_session_and_follows_its_run() {
    let client = Client::new();
    let body = r#"{"sessions": ["d"]}"#;
    let (status, _, run) = client.call("POST", COLLECT, Some("api"), body).await;
    assert_eq!(status, 202, "{run}");
    assert_eq!(run["state"], "succeeded", "{run}");
    assert_eq!(run["requestedBy"], API);
    assert_eq!(client.world.deleted(), ["d-Deployment", "d-Session"]);
    let path = format!("/v1/runs/{}", run["id"].as_str().unwrap());
    let (status, _, again) = client.call("GET", &path, Some("api"), "").await;
    assert_eq!(status, 200);
    assert_eq!(again["records"].as_array().unwrap().len(), 2, "{again}");
    let (status, _, missing) = client.call("GET", "/v1/runs/99", Some("api"), "").await;
    assert_eq!(
        (status, missing["error"].as_str()),
        (404, Some("no run 99"))
    );
    // A caller that may not read the run is told there is none (its namespace unsaid; the
    // refusal audited); the id without its random part finds nothing, even for its caller.
    let id = run["id"].as_str().unwrap();
    let (status, _, hidden) = client.call("GET", &path, Some("reader"), "").await;
    assert_eq!(status, 404, "{hidden}");
    assert_eq!(hidden["error"], format!("no run {id}"));
    assert!(!hidden.to_string().contains(NS), "{hidden}");
    assert!(
        client
            .world
            .lines()
            .last()
            .unwrap()
            .starts_with("denied 403 get runs")
    );
    let (number, random) = id.rsplit_once('-').unwrap();
    assert_eq!(random.len(), 32, "{id}");
    let (status, _, _) = client
        .call("GET", &format!("/v1/runs/{number}"), Some("api"), "")
        .await;
    assert_eq!(status, 404);
    let (status, _, shown) = client.call("GET", "/v1/status", Some("api"), "").await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["version"], "1.2.3");
    assert_eq!(shown["namespaces"], serde_json::json!([NS]));
    let lane = &shown["requests"][0];
    assert_eq!(
        (&lane["namespace"], &lane["queued"]),
        (&NS.into(), &0.into())
    );
    assert_eq!(lane["last"]["id"], run["id"], "{shown}");
    assert_eq!(lane["last"]["state"], "succeeded");
    assert_eq!(lane["last"]["records"], serde_json::json!([]));
    assert_eq!(shown["leases"][0]["namespace"], NS);
    assert!(shown["leases"][0]["holder"].is_null(), "released: {shown}");
    // Another process's run holds the namespace: status says who, and until when.
    client.world.cluster.lease.taken_by("gc-cli@cron/1");
    let (_, _, shown) = client.call("GET", "/v1/status", Some("api"), "").await;
    let lease = &shown["leases"][0];
    assert_eq!(lease["holder"], "gc-cli@cron/1", "{shown}");
    assert_eq!(lease["until"], "2100-01-01T00:00:00Z", "{shown}");
    let (status, _, shown) = client.call("GET", "/v1/status", Some("reader"), "").await;
    assert_eq!(status, 403, "status is for any namespace: {shown}");
}

/// Without a token, with a token the API server does not accept, or with a right it denies,
/// nothing is read or deleted: 401, 401, 403; the reader may plan but not collect.
#[tokio::test(start_paused = true)]
async fn callers_without_a_token_or_a_right_change_nothing() {
    let client = Client::new();
    let body = r#"{"sessions": ["d"]}"#;
    for token in [None, Some("nonsense"), Some("other-audience")] {
        let (status, _, answer) = client.call("POST", COLLECT, token, body).await;
        assert_eq!(status, 401, "{token:?}: {answer}");
        assert!(answer["error"].is_string());
    }
    let (status, _, answer) = client.call("POST", COLLECT, Some("reader"), body).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"], "no RBAC rule", "{answer}");
    let (status, _, planned) = client.call("POST", PLAN, Some("reader"), body).await;
    assert_eq!(status, 200, "{planned}");
    let judged = planned["judged"].as_array().unwrap();
    assert_eq!(judged.len(), 10);
    assert!(client.world.deleted().is_empty());
    assert_eq!(client.world.cluster.lease.state().acquires, 0);
    // Each refusal is in the audit log, naming the call and, once known, who asked.
    let no_one = "denied 401 create sessions/collect in \"streamspace\" by None";
    let reader = "denied 403 create sessions/collect in \"streamspace\" by \
                  Some(\"system:serviceaccount:streamspace:reader\")";
    assert_eq!(client.world.lines(), [no_one, no_one, no_one, reader]);
    let (status, _, _) = client.call("GET", "/v1/runs/99", None, "").await;
    assert_eq!(status, 401);
    let lines = client.world.lines();
    assert_eq!(lines[4], "denied 401 get runs in \"\" by None");
    // A flood of refusals: twenty a second are audited, the rest counted in the log.
    for _ in 0..30 {
        client.call("POST", COLLECT, None, body).await;
    }
    assert_eq!(client.world.lines().len(), 20, "twenty in this second");
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    client.call("POST", COLLECT, None, body).await;
    let lines = client.world.lines();
    assert_eq!(lines.len(), 21, "one more in the next");
    // It counts the refusals of the flood that were not audited (20 audited in that second).
    assert!(lines[20].ends_with(" (15 unaudited before)"), "{lines:?}");
    client.call("POST", COLLECT, None, body).await;
    assert!(!client.world.lines()[21].contains("unaudited"));
}

/// An API server that cannot answer for the caller refuses it (503, try again), and answers
/// are reused within the cache's time: two calls, two reviews.
#[tokio::test(start_paused = true)]
async fn answers_are_cached_and_no_answer_is_no() {
    let client = Client::new();
    client.reviews.down.store(true, Ordering::SeqCst);
    let (status, retry, answer) = client.call("POST", PLAN, Some("api"), "").await;
    assert_eq!((status, retry.as_deref()), (503, Some("5")), "{answer}");
    client.reviews.down.store(false, Ordering::SeqCst);
    let before = client.reviews.calls.load(Ordering::SeqCst);
    for _ in 0..3 {
        let (status, _, answer) = client.call("POST", PLAN, Some("api"), "").await;
        assert_eq!(status, 200, "{answer}");
    }
    let reviews = client.reviews.calls.load(Ordering::SeqCst) - before;
    assert_eq!(reviews, 2, "one TokenReview and one SubjectAccessReview");
    assert!(client.world.deleted().is_empty());
}

/// Bad input is 400 naming the field, and nothing is queued or deleted: an unknown namespace,
/// a system namespace, an id that is not a session id, an unknown field, an empty list, a body
/// that is not JSON or is over the limit.
#[tokio::test(start_paused = true)]
async fn bad_input_is_refused_naming_the_field() {
    let client = Client::new();
    let cases = [
        ("/v1/namespaces/other/sessions/collect", "{}", "namespace"),
        (
            "/v1/namespaces/kube-system/sessions/collect",
            "{}",
            "namespace",
        ),
        (
            COLLECT,
            r#"{"sessions": ["d", "not an id"]}"#,
            "sessions[1]",
        ),
        (COLLECT, r#"{"sessions": [""]}"#, "sessions[0]"),
        (COLLECT, r#"{"sessions": []}"#, "sessions"),
        (COLLECT, r#"{"sessions": ["d"], "graceSeconds": 0}"#, "body"),
        (COLLECT, "sessions: [d]", "body"),
        (COLLECT, r#"[["d"]]"#, "body"),
        // `null` is not "every session", whether alone or after a list; a field given twice is
        // refused, not read as its last.
        (COLLECT, r#"{"sessions": null}"#, "sessions"),
        (
            COLLECT,
            r#"{"sessions": ["d"], "sessions": null}"#,
            "sessions",
        ),
        (
            COLLECT,
            r#"{"sessions": ["a"], "sessions": ["d"]}"#,
            "sessions",
        ),
        (PLAN, r#"{"sessions": null}"#, "sessions"),
    ];
    for (path, body, field) in cases {
        let (status, _, answer) = client.call("POST", path, Some("api"), body).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert_eq!(answer["field"], field, "{path} {body}: {answer}");
    }
    let ids: Vec<String> = (0..10_000).map(|i| format!("s-{i}")).collect();
    let big = serde_json::json!({ "sessions": ids }).to_string();
    assert!(big.len() > ApiOptions::default().body_limit);
    let (status, _, answer) = client.call("POST", COLLECT, Some("api"), &big).await;
    assert_eq!((status, &answer["field"]), (400, &Value::from("body")));
    assert!(client.world.deleted().is_empty());
    assert_eq!(client.world.cluster.lease.state().acquires, 0);
    // The namespace is checked after the caller's right: an unknown one tells a stranger
    // nothing.
    let path = "/v1/namespaces/other/sessions/collect";
    let (status, _, _) = client.call("POST", path, None, "{}").await;
    assert_eq!(status, 401);
}

const RESTORE: &str = "/v1/namespaces/streamspace/sessions/d/restore";
const ARCHIVES: &str = "/v1/namespaces/streamspace/archives?session=d";

/// A collected session's receipts are listed, and its restore creates its objects again as the
/// restore account (never the collector's own): a dry run first, which creates nothing for
/// good; each answer names who asked and as whom it was done.
#[tokio::test(start_paused = true)]
async fn a_collected_session_is_listed_and_restored_as_the_restore_account() {
    let (client, account) = Client::serving(true);
    let (status, _, archives) = client.call("GET", ARCHIVES, Some("api"), "").await;
    assert_eq!(status, 200, "{archives}");
    assert_eq!(
        archives["archives"],
        serde_json::json!([]),
        "nothing archived yet"
    );
    let body = r#"{"sessions": ["d"]}"#;
    let (status, _, run) = client.call("POST", COLLECT, Some("api"), body).await;
    assert_eq!((status, &run["state"]), (202, &"succeeded".into()), "{run}");
    client.world.cluster.finish_deletes();
    let (status, _, archives) = client.call("GET", ARCHIVES, Some("api"), "").await;
    assert_eq!(status, 200, "{archives}");
    let mut kinds: Vec<&str> = (archives["archives"].as_array().unwrap().iter())
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["Deployment", "Session"], "{archives}");
    assert!(archives["archives"][0]["sha256"].as_str().unwrap().len() == 64);

    let (status, _, dry) = client
        .call("POST", RESTORE, Some("api"), r#"{"dryRun": true}"#)
        .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(
        (&dry["dryRun"], &dry["failed"]),
        (&true.into(), &0.into()),
        "{dry}"
    );
    let results: Vec<&str> = (dry["objects"].as_array().unwrap().iter())
        .map(|o| o["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["would create", "would create"], "{dry}");
    let (status, _, restored) = client.call("POST", RESTORE, Some("api"), "").await;
    assert_eq!(status, 200, "{restored}");
    assert_eq!(restored["requestedBy"], API);
    assert_eq!(
        restored["restoredAs"],
        "system:serviceaccount:gc:gc-restore"
    );
    let results: Vec<&str> = (restored["objects"].as_array().unwrap().iter())
        .map(|o| o["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["created", "created"], "{restored}");
    let created = account.cluster.created.lock().unwrap().clone();
    assert_eq!(created.len(), 4, "two dry, two for good: {created:?}");
    assert_eq!(created.iter().filter(|(_, dry)| !dry).count(), 2);
    assert!(
        client.world.cluster.created.lock().unwrap().is_empty(),
        "the collector's own account creates nothing"
    );
    // Each object restored is an audit line naming who asked and as whom.
    let restored: Vec<String> = (client.world.lines().into_iter())
        .filter(|l| l.starts_with("restored"))
        .collect();
    let by = format!("by {API} as system:serviceaccount:gc:gc-restore");
    assert_eq!(
        restored,
        [
            format!("restored Session would create {by}"),
            format!("restored Deployment would create {by}"),
            format!("restored Session created {by}"),
            format!("restored Deployment created {by}"),
        ]
    );
    // A session never archived: 404, nothing created.
    let path = "/v1/namespaces/streamspace/sessions/e/restore";
    let (status, _, answer) = client.call("POST", path, Some("api"), "").await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(account.cluster.created.lock().unwrap().len(), 4);
}

/// A restore is refused, creating nothing: without the right (403), when the server offers no
/// restore (501), when the restore account's credentials cannot be had (503), and for bad
/// input (400 naming the field).
#[tokio::test(start_paused = true)]
async fn a_restore_is_refused_without_a_right_an_account_or_good_input() {
    let (client, account) = Client::serving(true);
    let body = r#"{"sessions": ["d"]}"#;
    let (status, _, run) = client.call("POST", COLLECT, Some("api"), body).await;
    assert_eq!(status, 202, "{run}");
    client.world.cluster.finish_deletes();
    for token in [None, Some("nonsense")] {
        let (status, _, answer) = client.call("POST", RESTORE, token, "").await;
        assert_eq!(status, 401, "{answer}");
    }
    let (status, _, answer) = client.call("POST", RESTORE, Some("reader"), "").await;
    assert_eq!(status, 403, "{answer}");
    let (status, _, answer) = client.call("GET", ARCHIVES, Some("reader"), "").await;
    assert_eq!(status, 403, "{answer}");
    let cases = [
        (RESTORE, r#"{"dryRun": true, "force": true}"#, "body"),
        (RESTORE, r#"{"bindWaitSeconds": 61}"#, "bindWaitSeconds"),
        (RESTORE, "[]", "body"),
        (
            "/v1/namespaces/streamspace/sessions/-d/restore",
            "",
            "session",
        ),
        ("/v1/namespaces/other/sessions/d/restore", "", "namespace"),
        (
            "/v1/namespaces/kube-system/sessions/d/restore",
            "",
            "namespace",
        ),
    ];
    for (path, body, field) in cases {
        let (status, _, answer) = client.call("POST", path, Some("api"), body).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert_eq!(answer["field"], field, "{path} {body}: {answer}");
    }
    let cases = [
        ("/v1/namespaces/streamspace/archives", "session"),
        ("/v1/namespaces/streamspace/archives?session=", "session"),
        (
            "/v1/namespaces/streamspace/archives?session=d&session=e",
            "session",
        ),
        (
            "/v1/namespaces/streamspace/archives?session=d&kind=Pod",
            "kind",
        ),
        (
            "/v1/namespaces/streamspace/archives?session=a%20b",
            "session",
        ),
        ("/v1/namespaces/other/archives?session=d", "namespace"),
    ];
    for (path, field) in cases {
        let (status, _, answer) = client.call("GET", path, Some("api"), "").await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert_eq!(answer["field"], field, "{path}: {answer}");
    }
    account.refused.store(true, Ordering::SeqCst);
    let (status, retry, answer) = client.call("POST", RESTORE, Some("api"), "").await;
    assert_eq!((status, retry.as_deref()), (503, Some("5")), "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("gc-restore"),
        "{answer}"
    );
    assert!(account.cluster.created.lock().unwrap().is_empty());

    // A call past its time is answered 503; while it works, another restore of the session is
    // refused 409.
    account.refused.store(false, Ordering::SeqCst);
    account.slow.store(true, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let client = Arc::new(client);
    let first = tokio::spawn({
        let client = Arc::clone(&client);
        async move { client.call("POST", RESTORE, Some("api"), "").await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let (status, retry, answer) = client.call("POST", RESTORE, Some("api"), "").await;
    assert_eq!((status, retry.as_deref()), (409, Some("10")), "{answer}");
    let (status, _, answer) = first.await.unwrap();
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("longer than 120s"),
        "{answer}"
    );
    assert_eq!(started.elapsed().as_secs(), 120);
    assert!(account.cluster.created.lock().unwrap().is_empty());

    // A store that cannot be read: 503 for the restore and the archives, nothing created.
    let refusing = gc_core::testing::Kept {
        refuse_receipts: true,
        ..Default::default()
    };
    let (client, account) = Client::over(true, refusing);
    let (status, retry, answer) = client.call("POST", RESTORE, Some("api"), "").await;
    assert_eq!((status, retry.as_deref()), (503, Some("5")), "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("database down"),
        "{answer}"
    );
    let (status, _, answer) = client.call("GET", ARCHIVES, Some("api"), "").await;
    assert_eq!(status, 503, "{answer}");
    assert!(account.cluster.created.lock().unwrap().is_empty());

    let client = Client::new();
    let (status, _, answer) = client.call("POST", RESTORE, Some("api"), "").await;
    assert_eq!(status, 501, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("--api-restore-account")
    );
    assert!(client.world.cluster.created.lock().unwrap().is_empty());
}

/// Whether `value` is what the OpenAPI document's schema `name` describes: every field it has
/// is described (no more), of the type described, and every required one is there.
fn assert_described(name: &str, value: &Value) {
    let doc = serde_json::to_value(openapi::document("0.0.0")).unwrap();
    let schema = serde_json::json!({ "$ref": format!("#/components/schemas/{name}") });
    if let Err(why) = described(&doc, &schema, value, true) {
        panic!("{name}: {why}\n{value:#}");
    }
}

fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(at) => resolved(
            doc,
            &doc["components"]["schemas"][at.rsplit('/').next().unwrap()],
        ),
        None => schema,
    }
}

/// The fields `schema` describes, through its parts.
fn fields(doc: &Value, schema: &Value, out: &mut std::collections::BTreeSet<String>) {
    let schema = resolved(doc, schema);
    for part in ["allOf", "oneOf"]
        .iter()
        .filter_map(|k| schema[k].as_array())
        .flatten()
    {
        fields(doc, part, out);
    }
    if let Some(properties) = schema["properties"].as_object() {
        out.extend(properties.keys().cloned());
    }
}

/// `value` as `schema` describes it; `whole`: no field beyond those described.
fn described(doc: &Value, schema: &Value, value: &Value, whole: bool) -> Result<(), String> {
    let schema = resolved(doc, schema);
    if let Some(variants) = schema["oneOf"].as_array() {
        let why: Vec<String> = (variants.iter())
            .filter_map(|v| described(doc, v, value, whole).err())
            .collect();
        return if why.len() < variants.len() {
            Ok(())
        } else {
            Err(why.join("; "))
        };
    }
    if let Some(parts) = schema["allOf"].as_array() {
        for part in parts {
            described(doc, part, value, false)?;
        }
        if whole && let Some(object) = value.as_object() {
            let mut known = std::collections::BTreeSet::new();
            fields(doc, schema, &mut known);
            if let Some(extra) = object.keys().find(|k| !known.contains(*k)) {
                return Err(format!("{extra} is not described"));
            }
        }
        return Ok(());
    }
    let kinds: Vec<&str> = match &schema["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let fits = kinds.contains(&kind) || (kind == "integer" && kinds.contains(&"number"));
    if !kinds.is_empty() && !fits {
        return Err(format!("{value} is {kind}, described as {kinds:?}"));
    }
    if let (Some(allowed), false) = (schema["enum"].as_array(), value.is_null())
        && !allowed.contains(value)
    {
        return Err(format!("{value} is not one of {allowed:?}"));
    }
    if let Value::Array(items) = value {
        for item in items {
            described(doc, &schema["items"], item, true)?;
        }
    }
    if let Value::Object(object) = value {
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for required in schema["required"].as_array().into_iter().flatten() {
            let required = required.as_str().unwrap();
            if !object.contains_key(required) {
                return Err(format!("{required} is required"));
            }
        }
        for (key, field) in object {
            match properties.get(key) {
                Some(property) => {
                    described(doc, property, field, true).map_err(|e| format!("{key}: {e}"))?
                }
                None if whole => return Err(format!("{key} is not described")),
                None => {}
            }
        }
    }
    Ok(())
}

/// Each answer is what the OpenAPI document describes (the Go client's types are checked
/// against the same document, `clients/go`), and the document is served without a token.
#[tokio::test(start_paused = true)]
async fn the_answers_are_what_the_openapi_document_describes() {
    let (client, _) = Client::serving(true);
    let (status, _, doc) = client.call("GET", "/v1/openapi.json", None, "").await;
    assert_eq!(status, 200);
    assert_eq!(doc["paths"].as_object().unwrap().len(), 7, "{doc}");
    let (_, _, planned) = client.call("POST", PLAN, Some("api"), "").await;
    assert_described("Planned", &planned);
    let (_, _, run) = client
        .call("POST", COLLECT, Some("api"), r#"{"sessions": ["d", "e"]}"#)
        .await;
    assert!(run["records"].as_array().unwrap().len() >= 2, "{run}");
    assert_described("RequestedRun", &run);
    client.world.cluster.finish_deletes();
    let (_, _, shown) = client.call("GET", "/v1/status", Some("api"), "").await;
    assert_described("Status", &shown);
    let (_, _, archives) = client.call("GET", ARCHIVES, Some("api"), "").await;
    assert!(!archives["archives"].as_array().unwrap().is_empty());
    assert_described("Archives", &archives);
    let (_, _, restored) = client.call("POST", RESTORE, Some("api"), "").await;
    assert_described("RestoreAnswer", &restored);
    let (_, _, refused) = client
        .call("POST", COLLECT, Some("api"), r#"{"sessions": []}"#)
        .await;
    assert_described("Problem", &refused);
    // A field the document does not describe is seen.
    let mut more = restored.clone();
    more["objects"][0]["extra"] = true.into();
    let doc = serde_json::to_value(openapi::document("0.0.0")).unwrap();
    let schema = serde_json::json!({ "$ref": "#/components/schemas/RestoreAnswer" });
    assert!(described(&doc, &schema, &more, true).is_err());
}

/// A caller is known before its body is read: a body that never ends, sent without a token or
/// without the right, is answered at once (401, 403) and never waited for.
#[tokio::test(start_paused = true)]
async fn a_body_is_read_only_from_an_allowed_caller() {
    let client = Client::new();
    for (token, want) in [(None, 401), (Some("nonsense"), 401), (Some("reader"), 403)] {
        let mut request = Request::builder().method("POST").uri(COLLECT);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let endless = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let request = request.body(Body::from_stream(endless)).unwrap();
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            client.router.clone().oneshot(request),
        )
        .await
        .expect("answered without the body")
        .unwrap();
        assert_eq!(answer.status().as_u16(), want, "{token:?}");
    }
    assert!(client.world.deleted().is_empty());
}

/// The TokenReviews one source address causes: a flood of distinct junk tokens costs the
/// burst (ten), then `429` with `Retry-After` (audited), then one more per 500 ms; another
/// address is not held back; a token the API server refused, repeated, costs no more review
/// (for the cache's ten seconds); a caller's cached token passes even from the flooding
/// address.
#[tokio::test(start_paused = true)]
async fn token_reviews_are_limited_per_source_and_refusals_are_remembered() {
    let client = Client::new();
    let flooder = Some("10.0.0.1");
    let reviews = || client.reviews.calls.load(Ordering::SeqCst);
    // A caller's answers, cached before the flood (from elsewhere).
    let (status, _, _) = client.call("POST", PLAN, Some("api"), "").await;
    assert_eq!(status, 200);
    let before = reviews();
    let options = ApiOptions::default();
    let burst = usize::try_from(options.review_burst).unwrap();
    for i in 0..burst {
        let junk = format!("junk-{i}");
        let (status, retry, _) = client
            .call_from(flooder, "POST", PLAN, Some(&junk), "")
            .await;
        assert_eq!((status, retry), (401, None), "{i}");
    }
    assert_eq!(reviews() - before, burst, "each reviewed");
    for i in burst..300 {
        let junk = format!("junk-{i}");
        let (status, retry, answer) =
            (client.call_from(flooder, "POST", PLAN, Some(&junk), "")).await;
        assert_eq!(
            (status, retry.as_deref()),
            (429, Some("1")),
            "{i}: {answer}"
        );
    }
    assert_eq!(
        reviews() - before,
        burst,
        "300 junk tokens, the burst reviewed"
    );
    let lines = client.world.lines();
    assert_eq!(
        lines[burst],
        "denied 429 create sessions/plan in \"streamspace\" by None"
    );
    // The same refused token again: no review, from this address or another.
    for source in [flooder, Some("10.0.0.2"), None] {
        let (status, _, _) = (client.call_from(source, "POST", PLAN, Some("junk-0"), "")).await;
        assert_eq!(status, 401);
    }
    assert_eq!(reviews() - before, burst, "a refused token is remembered");
    // A caller's cached token passes; another address has its own burst.
    let (status, _, _) = (client.call_from(flooder, "POST", PLAN, Some("api"), "")).await;
    assert_eq!(status, 200);
    let (status, _, _) =
        (client.call_from(Some("10.0.0.2"), "GET", "/v1/runs/1", Some("new"), "")).await;
    assert_eq!(status, 401);
    assert_eq!(reviews() - before, burst + 1);
    // The rate: one more review per 500 ms, not two.
    tokio::time::advance(options.review_period).await;
    let (status, _, _) = (client.call_from(flooder, "GET", "/v1/runs/1", Some("later"), "")).await;
    assert_eq!(status, 401, "one more review");
    let (status, _, _) =
        (client.call_from(flooder, "GET", "/v1/runs/1", Some("later-2"), "")).await;
    assert_eq!(status, 429, "only one");
    assert_eq!(reviews() - before, burst + 2);
    // Refusals are remembered the cache's time, then asked again.
    tokio::time::advance(options.cache).await;
    let (status, _, _) = (client.call_from(flooder, "POST", PLAN, Some("junk-0"), "")).await;
    assert_eq!(status, 401);
    assert_eq!(
        reviews() - before,
        burst + 3,
        "reviewed again after ten seconds"
    );
}

/// Junk tokens from many addresses (each within its burst) never push a caller's answer out of
/// the cache: refused tokens are kept apart, bounded.
#[tokio::test(start_paused = true)]
async fn a_flood_of_refused_tokens_keeps_the_callers_answers() {
    let client = Client::new();
    let (status, _, _) = client.call("POST", PLAN, Some("api"), "").await;
    assert_eq!(status, 200);
    for i in 0..4200_u32 {
        let [_, _, a, b] = i.to_be_bytes();
        let source = format!("10.1.{a}.{b}");
        let junk = format!("junk-{i}");
        let (status, _, _) =
            (client.call_from(Some(&source), "GET", "/v1/runs/1", Some(&junk), "")).await;
        assert_eq!(status, 401);
    }
    let before = client.reviews.calls.load(Ordering::SeqCst);
    let (status, _, _) = client.call("POST", PLAN, Some("api"), "").await;
    assert_eq!(status, 200);
    assert_eq!(
        client.reviews.calls.load(Ordering::SeqCst),
        before,
        "the caller's token and right are still cached"
    );
}

/// The refusals the audit's rate leaves out are counted in the API's metrics, and shown on
/// `/metrics` as `<prefix>_api_refusals_unaudited_total`.
#[tokio::test(start_paused = true)]
async fn unaudited_refusals_are_counted_in_the_metrics() {
    let client = Client::new();
    let served = crate::metrics::Served::new("gc");
    served.show_api(Arc::clone(&client.metrics));
    assert!(
        (served.text()).contains("\ngc_api_refusals_unaudited_total 0\n"),
        "{}",
        served.text()
    );
    for _ in 0..35 {
        let (status, _, _) = client.call("POST", COLLECT, None, "").await;
        assert_eq!(status, 401);
    }
    assert_eq!(
        client.world.lines().len(),
        20,
        "twenty audited in this second"
    );
    assert_eq!(client.metrics.refusals_unaudited(), 15);
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    client.call("POST", COLLECT, None, "").await;
    assert_eq!(
        client.metrics.refusals_unaudited(),
        15,
        "audited: not counted"
    );
    let text = served.text();
    assert!(
        text.contains("# TYPE gc_api_refusals_unaudited counter\n")
            && text.contains("\ngc_api_refusals_unaudited_total 15\n"),
        "{text}"
    );
}

/// Connections that never present a token hold no place an authenticated caller needs: with
/// 85 of them open from another address (more than every place of the authenticated and of
/// the anonymous: a TLS handshake never begun, a request head never finished, a head sent a
/// byte at a time, a token-less call whose body never ends), a caller with a token is answered
/// at once, and the oldest of them are closed.
#[tokio::test]
async fn anonymous_slow_connections_do_not_keep_a_caller_out() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let client = Client::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Fewer places than the defaults' (512 and 64), so that the flood is held by the server
    // rather than by the kernel's listen queue.
    let options = ApiOptions {
        connections: 16,
        anonymous_connections: 8,
        ..ApiOptions::default()
    };
    // All but one in twenty (a token-less call, answered 401 at once) hold their connection
    // open: more than every place.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::serve::tls::serve(
        listener,
        client.router.clone(),
        None,
        options.limits(),
        async {
            let _ = stopped.await;
        },
    ));
    let connect = move || async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        socket.connect(addr).await.unwrap()
    };
    // The first, then the rest, each holding its connection until aborted (connecting at
    // once: a listen queue that is not served does not hold the test up).
    let mut first = connect().await;
    let open = Arc::new(AtomicUsize::new(1));
    let flood = (1..80).map(|i| {
        let open = Arc::clone(&open);
        tokio::spawn(async move {
            let mut stream = connect().await;
            let sent: &[u8] = match (i % 20, i % 2) {
                (1.., 0) => b"",
                (1.., _) => {
                    b"POST /v1/namespaces/streamspace/sessions/plan HTTP/1.1\r\nhost: x\r\nx-"
                }
                _ => {
                    b"POST /v1/namespaces/streamspace/sessions/plan HTTP/1.1\r\nhost: x\r\n\
                       content-length: 60000\r\n\r\n{\"sessions\": ["
                }
            };
            stream.write_all(sent).await.unwrap();
            open.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        })
    });
    let mut flood: Vec<_> = flood.collect();
    flood.extend((0..5).map(|_| {
        let open = Arc::clone(&open);
        tokio::spawn(async move {
            let mut stream = connect().await;
            open.fetch_add(1, Ordering::SeqCst);
            for byte in b"GET /v1/status HTTP/1.1\r\nhost: x\r\nx-slow: 1234567890\r\n\r\n" {
                if stream.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            std::future::pending::<()>().await;
        })
    }));
    // Every one connected (its handshake done by the kernel, accepted or not), then a moment
    // for the server to take what it takes.
    while open.load(Ordering::SeqCst) < 85 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let call = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let body = r#"{"sessions": ["d"]}"#;
        let request = format!(
            "POST {PLAN} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer api\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(2), call).await;
    let answer = answer.expect("the caller is answered at once, whatever the flood holds");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    // The oldest were closed to make room.
    let mut read = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        first.read_to_end(&mut read),
    );
    assert!(
        closed.await.is_ok(),
        "the oldest anonymous connection is closed"
    );
    for task in flood {
        task.abort();
    }
    stop.send(()).unwrap();
    server.await.unwrap();
}
