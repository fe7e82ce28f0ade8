//! The failed-Pod engine (`apply`, `recover`) against `mockall` expectations of its ports.
//!
//! Each test is a table of the calls a run must make, in order (one [`Sequence`] across the
//! cluster, the store and the sink), with the answer each gets. The mocks are strict: a call
//! that is not in the table fails the test, so "`delete` is never called" is the absence of a
//! `Delete` row, and "released exactly once" is one `Release` row. The stateful fake of
//! `pods/apply/tests.rs` keeps the fault matrix; these tables state the interactions plainly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mockall::Sequence;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::lease::Held;
use crate::pods::apply::{Ports, TargetResult, apply, recover};
use crate::pods::config::{DEFAULT_COLLECT_LABEL, DEFAULT_PIN_FINALIZER, PodConfig, PodInputs};
use crate::pods::inventory;
use crate::pods::ledger::PreviousLedger;
use crate::pods::plan::{Target, plan_pods};
use crate::ports::{
    ArchiveKey, Cluster, ClusterError, MockArchiveSink, MockClock, MockStore, Page, PodQuery,
    Preconditions, Receipt, StoreError,
};
use crate::testing::{GO_ON, block_on};

const NOW: f64 = 1_795_953_600.0;
const NS: &str = "work";
const PIN: &str = DEFAULT_PIN_FINALIZER;
const OTHER: &str = "example.com/other";
const FINISHED: &str = "2026-11-20T10:00:00Z";

mockall::mock! {
    /// The calls of the [`Cluster`] port, with the continue token owned: `automock` cannot name
    /// the elided lifetime of `Option<&str>`, so the port delegates to these one to one.
    Api {
        fn list_pod_metadata(&self, namespace: &str, continue_token: Option<String>) -> Result<Page, ClusterError>;
        fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError>;
        fn patch_pod(&self, namespace: &str, name: &str, patch: &[u8], dry_run: bool) -> Result<Vec<u8>, ClusterError>;
        fn delete_pod(&self, namespace: &str, name: &str, preconditions: &Preconditions, dry_run: bool) -> Result<Option<Vec<u8>>, ClusterError>;
    }
}

#[async_trait]
impl Cluster for MockApi {
    async fn list_pods(&self, _: &PodQuery, _: Option<&str>) -> Result<Page, ClusterError> {
        panic!("the engine never lists Pods by selector")
    }
    async fn list_pod_metadata(
        &self,
        namespace: &str,
        _limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        MockApi::list_pod_metadata(self, namespace, continue_token.map(str::to_owned))
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        MockApi::get_pod(self, namespace, name)
    }
    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        MockApi::patch_pod(self, namespace, name, patch, dry_run)
    }
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        MockApi::delete_pod(self, namespace, name, preconditions, dry_run)
    }
}

/// What a read of the archive gives back.
#[derive(Debug, Clone, Copy)]
enum Back {
    /// The bytes written.
    Same,
    /// Other bytes.
    Other,
    /// An error.
    Fails,
}

/// What the store gives back for the receipt.
#[derive(Debug, Clone, Copy)]
enum Kept {
    /// The receipt stored.
    Same,
    /// A receipt with another hash.
    Stale,
    /// None.
    Missing,
}

/// One expected call, in order, and its answer.
enum Call {
    /// `list_pod_metadata`: these Pods.
    List(Vec<Value>),
    /// `get_pod` of a name: the Pod as it is now, or gone.
    Get(String, Option<Value>),
    /// `patch_pod` with the pin patch of this Pod as read: exactly `test` uid, resourceVersion,
    /// phase, then `add` the pin.
    Pin(Value, Result<Value, ClusterError>),
    /// `patch_pod` with the release patch of this Pod as read: exactly `test` uid,
    /// resourceVersion, phase and its finalizers, then `remove` the pin alone.
    Release(Value, Result<(), ClusterError>),
    /// `delete_pod` of this Pod as fenced: its uid and resourceVersion as preconditions.
    Delete(Value, Result<Option<Value>, ClusterError>),
    /// `ArchiveSink::write` under the Pod's key.
    Write(Result<(), StoreError>),
    /// `ArchiveSink::read` of the URI written.
    Read(Back),
    /// `Store::put_receipt` of the archive written.
    PutReceipt(Result<(), StoreError>),
    /// `Store::get_receipt` of the Pod's uid.
    GetReceipt(Kept),
    /// Not a call: the run lock is lost right after the previous call answers.
    Stop,
}

use Call::{Delete, GetReceipt, List, PutReceipt, Read, Release, Stop, Write};

/// What the mocks share: the archive and the receipt as written.
#[derive(Default)]
struct Written {
    archive: Option<Vec<u8>>,
    receipt: Option<Receipt>,
}

/// The mocked ports of one run, and the flag that stops it.
struct Script {
    api: MockApi,
    store: MockStore,
    sink: MockArchiveSink,
    clock: MockClock,
    stop: Arc<AtomicBool>,
    /// Whether the run is a dry run (every write in server-side dry run).
    dry_run: bool,
}

fn meta<'v>(pod: &'v Value, key: &str) -> &'v Value {
    &pod["metadata"][key]
}

fn text(pod: &Value, key: &str) -> String {
    meta(pod, key).as_str().unwrap().to_owned()
}

fn bytes(pod: &Value) -> Vec<u8> {
    pod.to_string().into_bytes()
}

fn tests(pod: &Value) -> Vec<Value> {
    vec![
        json!({"op": "test", "path": "/metadata/uid", "value": text(pod, "uid")}),
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": text(pod, "resourceVersion")}),
        json!({"op": "test", "path": "/status/phase", "value": "Failed"}),
    ]
}

/// The exact pin patch of `pod` as read.
fn pin_ops(pod: &Value) -> Value {
    let mut ops = tests(pod);
    ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [PIN]}));
    Value::Array(ops)
}

/// The exact release patch of `pod` as read: every other finalizer kept.
fn release_ops(pod: &Value) -> Value {
    let finalizers = meta(pod, "finalizers").as_array().unwrap().clone();
    let at = finalizers.iter().position(|f| f == PIN).unwrap();
    let mut ops = tests(pod);
    ops.push(json!({"op": "test", "path": "/metadata/finalizers", "value": finalizers}));
    ops.push(json!({"op": "remove", "path": format!("/metadata/finalizers/{at}")}));
    Value::Array(ops)
}

/// One JSON patch of the Pod `name`, exactly `ops`, sent with `dry_run`; it answers `answer`
/// after `stops()`.
fn expect_patch(
    api: &mut MockApi,
    seq: &mut Sequence,
    (name, ops, dry_run): (String, Value, bool),
    answer: Result<Vec<u8>, ClusterError>,
    stops: impl Fn() + Send + 'static,
) {
    api.expect_patch_pod()
        .withf(move |ns, n, patch, dry| {
            ns == NS && *n == name && patch_is(patch, &ops) && *dry == dry_run
        })
        .times(1)
        .in_sequence(seq)
        .returning(move |_, _, _, _| {
            stops();
            answer.clone()
        });
}

fn patch_is(patch: &[u8], expected: &Value) -> bool {
    serde_json::from_slice::<Value>(patch).is_ok_and(|p| p == *expected)
}

fn uri(uid: &str) -> String {
    format!("mem://{uid}")
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The mocked ports expecting `calls`, in this order and nothing else; every write checks that
/// it carries `dry_run`. The archive and the receipt belong to the Pod `uid`.
fn script(dry_run: bool, uid: &str, calls: Vec<Call>) -> Script {
    let mut s = Script {
        api: MockApi::new(),
        store: MockStore::new(),
        sink: MockArchiveSink::new(),
        clock: MockClock::new(),
        stop: Arc::new(AtomicBool::new(false)),
        dry_run,
    };
    // Reads of the clock and of the ledger write nothing: any number of them.
    s.clock.expect_now().return_const(NOW);
    s.clock.expect_sleep().return_const(());
    s.store
        .expect_load_ledger()
        .returning(|_, _| Ok(PreviousLedger::default()));
    let written = Arc::new(Mutex::new(Written::default()));
    let mut seq = Sequence::new();
    let uid = uid.to_owned();
    // A `Stop` first sets the flag before the run.
    let mut calls = calls.into_iter().peekable();
    if calls.next_if(|c| matches!(c, Stop)).is_some() {
        s.stop.store(true, Ordering::SeqCst);
    }
    while let Some(call) = calls.next() {
        // The stop flag is set as the call answers when a `Stop` follows it.
        let stop_after = matches!(calls.peek(), Some(Stop)).then(|| s.stop.clone());
        let stops = move || {
            if let Some(stop) = &stop_after {
                stop.store(true, Ordering::SeqCst);
            }
        };
        match call {
            Stop => {}
            List(pods) => {
                let page = Page {
                    text: json!({"items": pods}).to_string().into_bytes(),
                    continue_token: None,
                };
                s.api
                    .expect_list_pod_metadata()
                    .withf(|ns, token| ns == NS && token.is_none())
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning(move |_, _| {
                        stops();
                        Ok(page.clone())
                    });
            }
            Call::Get(name, pod) => {
                s.api
                    .expect_get_pod()
                    .withf(move |ns, n| ns == NS && n == name)
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning(move |_, _| {
                        stops();
                        Ok(pod.as_ref().map(bytes))
                    });
            }
            Call::Pin(pod, answer) => {
                let answer = answer.as_ref().map(bytes).map_err(Clone::clone);
                let (name, ops) = (text(&pod, "name"), pin_ops(&pod));
                expect_patch(&mut s.api, &mut seq, (name, ops, dry_run), answer, stops);
            }
            Release(pod, answer) => {
                let answer = answer.map(|()| b"{}".to_vec());
                let (name, ops) = (text(&pod, "name"), release_ops(&pod));
                expect_patch(&mut s.api, &mut seq, (name, ops, dry_run), answer, stops);
            }
            Delete(pod, answer) => {
                let name = text(&pod, "name");
                let pre = Preconditions {
                    uid: text(&pod, "uid"),
                    resource_version: text(&pod, "resourceVersion"),
                };
                s.api
                    .expect_delete_pod()
                    .withf(move |ns, n, p, dry| {
                        ns == NS && *n == name && *p == pre && *dry == dry_run
                    })
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning(move |_, _, _, _| {
                        stops();
                        answer
                            .as_ref()
                            .map(|p| p.as_ref().map(bytes))
                            .map_err(Clone::clone)
                    });
            }
            Write(answer) => {
                let (w, key) = (written.clone(), key(&uid));
                let at = uri(&uid);
                s.sink
                    .expect_write()
                    .withf(move |k, _| *k == key)
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning(move |_, b| {
                        stops();
                        answer.clone()?;
                        w.lock().unwrap().archive = Some(b.to_vec());
                        Ok(at.clone())
                    });
            }
            Read(back) => {
                let (w, at) = (written.clone(), uri(&uid));
                s.sink
                    .expect_read()
                    .withf(move |u| u == at)
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning(move |_| {
                        stops();
                        match back {
                            Back::Same => Ok(w.lock().unwrap().archive.clone().unwrap()),
                            Back::Other => Ok(b"{}".to_vec()),
                            Back::Fails => Err(StoreError::Unavailable("sink down".into())),
                        }
                    });
            }
            PutReceipt(answer) => {
                let (w, id) = (written.clone(), uid.clone());
                s.store
                    .expect_put_receipt()
                    .withf(move |r| {
                        let w = w.lock().unwrap();
                        let archive = w.archive.as_deref().unwrap_or_default();
                        r.uid == id
                            && r.uri == uri(&id)
                            && r.sha256 == sha256_hex(archive)
                            && r.bytes == archive.len() as u64
                    })
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning({
                        let w = written.clone();
                        move |r| {
                            stops();
                            answer.clone()?;
                            w.lock().unwrap().receipt = Some(r.clone());
                            Ok(())
                        }
                    });
            }
            GetReceipt(kept) => {
                let (w, id) = (written.clone(), uid.clone());
                s.store
                    .expect_get_receipt()
                    .withf(move |_, u| u == id)
                    .times(1)
                    .in_sequence(&mut seq)
                    .returning(move |_, _| {
                        stops();
                        let stored = w.lock().unwrap().receipt.clone();
                        Ok(match kept {
                            Kept::Same => stored,
                            Kept::Stale => stored.map(|r| Receipt {
                                sha256: "0".repeat(64),
                                ..r
                            }),
                            Kept::Missing => None,
                        })
                    });
            }
        }
    }
    s
}

fn key(uid: &str) -> ArchiveKey {
    ArchiveKey {
        cluster_id: config().cluster_id,
        namespace: NS.into(),
        uid: uid.into(),
    }
}

impl Script {
    fn ports(&self) -> Ports<'_, MockApi, MockStore, MockArchiveSink, MockClock> {
        Ports {
            cluster: &self.api,
            store: &self.store,
            sink: &self.sink,
            clock: &self.clock,
            held: Held::new(&*self.stop, &GO_ON, self.dry_run),
            concurrency: crate::pipeline::DEFAULT_CONCURRENCY,
        }
    }
    /// `apply` of `targets`, then the next run's `recover`, as one sequence of calls.
    fn apply_then_recover(&self, cfg: &PodConfig, targets: &[Target]) -> Vec<String> {
        let mut results = block_on(apply(&self.ports(), cfg, targets));
        results.extend(block_on(recover(&self.ports(), cfg)).unwrap());
        outcomes(&results)
    }
    /// `recover`, then `apply` of `targets`, as a run does.
    fn run(&self, cfg: &PodConfig, targets: &[Target]) -> Vec<String> {
        let mut results = block_on(recover(&self.ports(), cfg)).unwrap();
        results.extend(block_on(apply(&self.ports(), cfg, targets)));
        outcomes(&results)
    }
}

/// `"<name> <outcome> <step>"` of each result.
fn outcomes(results: &[TargetResult]) -> Vec<String> {
    results
        .iter()
        .map(|r| {
            let v = serde_json::to_value(r).unwrap();
            let step = v["step"]
                .as_str()
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            format!("{} {}{step}", r.name, v["outcome"].as_str().unwrap())
        })
        .collect()
}

fn config() -> PodConfig {
    PodInputs {
        namespace: NS.into(),
        max_pods: 10,
        ..Default::default()
    }
    .validate()
    .unwrap()
}

/// A failed, labelled Pod `name` at resourceVersion `rv` with `finalizers`, being deleted when
/// `deleting`.
fn pod_of(name: &str, rv: u32, finalizers: &[&str], deleting: bool) -> Value {
    let mut p = json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                     "resourceVersion": rv.to_string(), "labels": {DEFAULT_COLLECT_LABEL: "true"}},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "main",
                   "state": {"terminated": {"exitCode": 1, "finishedAt": FINISHED}}}]}
    });
    if !finalizers.is_empty() {
        p["metadata"]["finalizers"] = json!(finalizers);
    }
    if deleting {
        p["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:00:00Z");
    }
    p
}

/// Pod `p`, not pinned.
fn fresh(rv: u32) -> Value {
    pod_of("p", rv, &[], false)
}

/// Pod `p`, pinned.
fn pinned(rv: u32) -> Value {
    pod_of("p", rv, &[PIN], false)
}

/// Pod `p`, pinned and being deleted.
fn deleting(rv: u32) -> Value {
    pod_of("p", rv, &[PIN], true)
}

/// `pod` with another status (still Failed, still eligible).
fn restatused(mut pod: Value) -> Value {
    pod["status"]["message"] = json!("the node restarted");
    pod
}

/// `pod` without the collect label: no longer eligible.
fn unlabelled(mut pod: Value) -> Value {
    pod["metadata"]["labels"] = json!({});
    pod
}

fn get(pod: &Value) -> Call {
    Call::Get(text(pod, "name"), Some(pod.clone()))
}

fn gone(name: &str) -> Call {
    Call::Get(name.into(), None)
}

fn pin(pod: &Value, answer: Result<Value, ClusterError>) -> Call {
    Call::Pin(pod.clone(), answer)
}

fn release(pod: &Value) -> Call {
    Release(pod.clone(), Ok(()))
}

fn conflict() -> ClusterError {
    ClusterError::Changed {
        status: 409,
        message: "the object has been modified".into(),
    }
}

fn test_failed() -> ClusterError {
    ClusterError::Changed {
        status: 422,
        message: "the test operation failed".into(),
    }
}

/// The plan of `pods` at [`NOW`]: a target per eligible Pod, bound to its resourceVersion.
fn plan(pods: &[Value]) -> Vec<Target> {
    let list = json!({ "items": pods }).to_string();
    let cfg = config();
    let inv = inventory::read(list.as_bytes(), cfg.rules(), 1000).unwrap();
    plan_pods(&inv, &PreviousLedger::default(), &cfg, NOW)
        .unwrap()
        .targets
}

/// The calls of Pod `p` planned at resourceVersion 1 up to the archive write: re-read, pin, read
/// back.
fn up_to_write() -> Vec<Call> {
    vec![
        get(&fresh(1)),
        pin(&fresh(1), Ok(pinned(2))),
        get(&pinned(2)),
    ]
}

/// `calls`, then `more`.
fn then(calls: Vec<Call>, more: Vec<Call>) -> Vec<Call> {
    calls.into_iter().chain(more).collect()
}

/// The calls of Pod `p` up to its archive read back and its receipt stored.
fn up_to_receipt() -> Vec<Call> {
    then(
        up_to_write(),
        vec![Write(Ok(())), Read(Back::Same), PutReceipt(Ok(()))],
    )
}

/// The pre-delete fence of Pod `p` as `pod`: re-read, receipt read back, archive read back.
fn fence(pod: &Value) -> Vec<Call> {
    vec![get(pod), GetReceipt(Kept::Same), Read(Back::Same)]
}

/// The calls of Pod `p` up to the delete's read back.
fn up_to_deleting() -> Vec<Call> {
    then(
        then(up_to_receipt(), fence(&pinned(2))),
        vec![Delete(pinned(2), Ok(Some(deleting(3)))), get(&deleting(3))],
    )
}

/// Every call of a clean collection of `p`, in protocol order.
fn clean() -> Vec<Call> {
    then(up_to_deleting(), vec![release(&deleting(3)), gone("p")])
}

#[test]
fn a_clean_collection_calls_the_ports_in_protocol_order() {
    // The sequence is the claim: pin, archive written and read back, receipt stored, fence
    // (Pod, receipt and archive read back), and only then the delete, with the uid and the
    // resourceVersion the fence read; the release last, then the uid checked gone.
    let s = script(false, "uid-p", clean());
    let results = block_on(apply(&s.ports(), &config(), &plan(&[fresh(1)])));
    assert_eq!(outcomes(&results), ["p collected"]);
}

#[test]
fn a_dry_run_sends_every_write_in_dry_run_and_stores_nothing() {
    // No `Write`, `PutReceipt` or release of a planned Pod in the table: the sink and the store
    // are never written. Every patch and delete row checks `dry_run`.
    let q = pod_of("q", 4, &[PIN], false);
    let r = pod_of("r", 6, &[PIN], true);
    let s = script(
        true,
        "uid-p",
        vec![
            List(vec![q.clone(), r.clone()]),
            // Recovery: a pin released in dry run; a Pod being deleted finished in dry run
            // (pinned already: no pin patch), its delete on the resourceVersion stored.
            release(&q),
            get(&r),
            get(&r),
            Delete(r.clone(), Ok(None)),
            // The target: pin in dry run (its answer is not stored), then the delete in dry run
            // on the resourceVersion stored, not the dry-run answer's.
            get(&fresh(1)),
            pin(&fresh(1), Ok(pinned(2))),
            Delete(fresh(1), Ok(None)),
        ],
    );
    assert_eq!(
        s.run(&config(), &plan(&[fresh(1)])),
        ["q released", "r wouldCollect", "p wouldCollect"]
    );
}

#[test]
fn a_lost_fence_stops_the_target_and_the_next_recovery_releases_its_pin_once() {
    // Each row: the calls of `apply` up to the fence that holds, its outcome, then the calls of
    // the next run's `recover`. No `Delete` row follows a lost fence; the pin, when one was
    // stored, is released by exactly one fenced `Release` row, keeping other finalizers.
    let foreign = pod_of("p", 3, &[PIN, OTHER], false);
    let foreign_deleting = pod_of("p", 4, &[PIN, OTHER], true);
    let none = || vec![List(vec![])];
    let rows: Vec<(&str, Vec<Call>, &str, Vec<Call>)> = vec![
        (
            "changed since the plan",
            vec![get(&fresh(5))],
            "p changed reread",
            none(),
        ),
        (
            "the pin's test op fails",
            vec![get(&fresh(1)), pin(&fresh(1), Err(test_failed()))],
            "p changed pin",
            none(),
        ),
        (
            "the pin conflicts",
            vec![get(&fresh(1)), pin(&fresh(1), Err(conflict()))],
            "p changed pin",
            none(),
        ),
        (
            "the pin reads back unpinned",
            vec![
                get(&fresh(1)),
                pin(&fresh(1), Ok(pinned(2))),
                get(&fresh(3)),
            ],
            "p failed pin",
            none(),
        ),
        (
            "the status changed before the fence",
            then(up_to_receipt(), vec![get(&restatused(pinned(3)))]),
            "p skipped fence",
            vec![
                List(vec![restatused(pinned(3))]),
                release(&restatused(pinned(3))),
            ],
        ),
        (
            "another finalizer at the fence",
            then(up_to_receipt(), vec![get(&foreign)]),
            "p failed fence",
            vec![List(vec![foreign.clone()]), release(&foreign)],
        ),
        (
            "the delete conflicts",
            then(
                then(up_to_receipt(), fence(&pinned(2))),
                vec![Delete(pinned(2), Err(conflict()))],
            ),
            "p changed delete",
            vec![List(vec![pinned(2)]), release(&pinned(2))],
        ),
        (
            "the release's test op fails",
            then(
                up_to_deleting(),
                vec![Release(deleting(3), Err(test_failed()))],
            ),
            "p changed release",
            // Someone added a finalizer: recovery releases the pin alone, deletes nothing.
            vec![
                List(vec![foreign_deleting.clone()]),
                get(&foreign_deleting),
                release(&foreign_deleting),
            ],
        ),
    ];
    for (what, calls, outcome, recovery) in rows {
        let released = usize::from(recovery.len() > 1);
        let s = script(false, "uid-p", then(calls, recovery));
        let results = s.apply_then_recover(&config(), &plan(&[fresh(1)]));
        let mut expected = vec![outcome];
        expected.extend(["p released"].repeat(released));
        assert_eq!(results, expected, "{what}");
    }
}

#[test]
fn no_delete_before_the_receipt_is_stored_and_the_archive_read_back() {
    // Each row ends where the protocol must stop: no `Delete` after a failed write, a read-back
    // that does not match, or a receipt that is not stored or not read back as stored. Before
    // the receipt, the pin is released at once (fenced on the Pod as pinned), so that no pin
    // outlives a failing sink or store; after it, the pin stays for recovery.
    let release = || release(&pinned(2));
    let rows: Vec<(&str, Vec<Call>, &str)> = vec![
        (
            "the archive write fails",
            vec![
                Write(Err(StoreError::Unavailable("sink down".into()))),
                release(),
            ],
            "p failed archive",
        ),
        (
            "the archive reads back other bytes",
            vec![Write(Ok(())), Read(Back::Other), release()],
            "p failed verifyArchive",
        ),
        (
            "the archive cannot be read back",
            vec![Write(Ok(())), Read(Back::Fails), release()],
            "p failed verifyArchive",
        ),
        (
            "the receipt is not stored",
            vec![
                Write(Ok(())),
                Read(Back::Same),
                PutReceipt(Err(StoreError::Unavailable("db down".into()))),
                release(),
            ],
            "p failed receipt",
        ),
        (
            "the archive write fails and the release is refused",
            vec![
                Write(Err(StoreError::Unavailable("sink down".into()))),
                Release(pinned(2), Err(conflict())),
            ],
            "p failed archive",
        ),
        (
            "the receipt is missing at the fence",
            receipted(vec![get(&pinned(2)), GetReceipt(Kept::Missing)]),
            "p failed fence",
        ),
        (
            "the receipt is stale at the fence",
            receipted(vec![get(&pinned(2)), GetReceipt(Kept::Stale)]),
            "p failed fence",
        ),
        (
            "the archive differs at the fence",
            receipted(vec![
                get(&pinned(2)),
                GetReceipt(Kept::Same),
                Read(Back::Other),
            ]),
            "p failed fence",
        ),
        (
            "the archive cannot be read at the fence",
            receipted(vec![
                get(&pinned(2)),
                GetReceipt(Kept::Same),
                Read(Back::Fails),
            ]),
            "p failed fence",
        ),
    ];
    for (what, calls, outcome) in rows {
        let s = script(false, "uid-p", then(up_to_write(), calls));
        let results = block_on(apply(&s.ports(), &config(), &plan(&[fresh(1)])));
        assert_eq!(outcomes(&results), [outcome], "{what}");
    }
}

/// The archive written and read back, the receipt stored, then `more`.
fn receipted(more: Vec<Call>) -> Vec<Call> {
    then(
        vec![Write(Ok(())), Read(Back::Same), PutReceipt(Ok(()))],
        more,
    )
}

#[test]
fn the_pin_patch_begins_with_test_ops_on_uid_resource_version_and_phase() {
    // A `Pin` row matches only the exact patch: `test` uid, `test` resourceVersion (as planned
    // and re-read), `test` phase `Failed`, then `add` the pin.
    let (a, b) = (pod_of("a", 41, &[], false), pod_of("b", 7, &[], false));
    assert_eq!(
        pin_ops(&a).as_array().unwrap()[..3],
        [
            json!({"op": "test", "path": "/metadata/uid", "value": "uid-a"}),
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "41"}),
            json!({"op": "test", "path": "/status/phase", "value": "Failed"}),
        ]
    );
    let s = script(
        false,
        "uid-a",
        vec![
            get(&a),
            pin(&a, Err(test_failed())),
            get(&b),
            pin(&b, Err(conflict())),
        ],
    );
    let results = block_on(apply(&s.ports(), &config(), &plan(&[a, b])));
    assert_eq!(outcomes(&results), ["a changed pin", "b changed pin"]);
}

#[test]
fn recovery_releases_each_pin_not_in_the_plan_once_and_no_foreign_finalizer() {
    // Every pinned Pod gets exactly one fenced `Release` row (`test` of its uid,
    // resourceVersion, phase and finalizers, `remove` of the pin's index alone); a Pod with
    // only someone else's finalizer gets no call; then the plan's target is collected.
    let q = pod_of("q", 4, &[PIN], false);
    let foreign = pod_of("f", 5, &[OTHER, PIN], false);
    let foreign_deleting = pod_of("fd", 6, &[PIN, OTHER], true);
    let theirs = pod_of("t", 7, &[OTHER], false);
    let ineligible_deleting = unlabelled(pod_of("u", 8, &[PIN], true));
    let recovery = vec![
        List(vec![
            q.clone(),
            foreign.clone(),
            foreign_deleting.clone(),
            theirs,
            ineligible_deleting.clone(),
        ]),
        release(&q),
        release(&foreign),
        get(&foreign_deleting),
        release(&foreign_deleting),
        get(&ineligible_deleting),
        release(&ineligible_deleting),
    ];
    assert_eq!(
        release_ops(&foreign)[4],
        json!({"op": "remove", "path": "/metadata/finalizers/1"})
    );
    let s = script(false, "uid-p", then(recovery, clean()));
    assert_eq!(
        s.run(&config(), &plan(&[fresh(1)])),
        [
            "q released",
            "f released",
            "fd released",
            "u released",
            "p collected"
        ]
    );
}

#[test]
fn a_lost_run_lock_stops_every_write() {
    // `Stop` sets the flag as the call before it answers. After it, reads may go on (the table
    // lists them); no patch, archive write, receipt or delete follows.
    let q = pod_of("q", 4, &[PIN], false);
    let u = unlabelled(pod_of("u", 8, &[PIN], true));
    let rows: Vec<(&str, Vec<Call>, Vec<&str>)> = vec![
        (
            "before the run",
            vec![Stop, List(vec![q.clone()]), get(&fresh(1))],
            vec!["q failed release", "p failed pin"],
        ),
        (
            "while recovery reads a pin",
            vec![List(vec![u.clone()]), get(&u), Stop, get(&fresh(1))],
            vec!["u failed release", "p failed pin"],
        ),
        (
            "at the pin",
            vec![
                List(vec![]),
                get(&fresh(1)),
                pin(&fresh(1), Ok(pinned(2))),
                Stop,
                get(&pinned(2)),
            ],
            vec!["p failed archive"],
        ),
        (
            "at the archive's read back",
            then(
                then(vec![List(vec![])], up_to_write()),
                vec![Write(Ok(())), Read(Back::Same), Stop],
            ),
            vec!["p failed receipt"],
        ),
        (
            "at the receipt",
            then(
                then(vec![List(vec![])], up_to_receipt()),
                then(vec![Stop], fence(&pinned(2))),
            ),
            vec!["p failed delete"],
        ),
        (
            "at the delete",
            then(
                then(vec![List(vec![])], up_to_receipt()),
                then(
                    fence(&pinned(2)),
                    vec![
                        Delete(pinned(2), Ok(Some(deleting(3)))),
                        Stop,
                        get(&deleting(3)),
                    ],
                ),
            ),
            vec!["p failed release"],
        ),
    ];
    for (what, calls, expected) in rows {
        let s = script(false, "uid-p", calls);
        assert_eq!(s.run(&config(), &plan(&[fresh(1)])), expected, "{what}");
    }
}

#[test]
fn an_archive_too_large_after_pinning_is_released_once_and_never_written() {
    let mut small = config();
    small.max_archive_bytes = 100;
    let rows: Vec<(bool, Vec<Call>, &str)> = vec![
        (
            false,
            then(up_to_write(), vec![release(&pinned(2))]),
            "p tooLarge",
        ),
        // A dry run stored no pin: nothing to release.
        (
            true,
            vec![get(&fresh(1)), pin(&fresh(1), Ok(pinned(2)))],
            "p tooLarge",
        ),
        // The run lock lost: not even the release.
        (false, then(up_to_write(), vec![Stop]), "p failed release"),
    ];
    for (dry_run, calls, outcome) in rows {
        let s = script(dry_run, "uid-p", calls);
        let results = block_on(apply(&s.ports(), &small, &plan(&[fresh(1)])));
        assert_eq!(outcomes(&results), [outcome], "dry run: {dry_run}");
    }
}
