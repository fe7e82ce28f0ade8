//! The session run against `mockall` expectations of its ports: the cluster's lists and deletes,
//! the session directory.
//!
//! The cluster mock is strict on deletes: a table without a delete row means `delete_object` is
//! never called, and each delete row names its object, uid, resourceVersion and dry run.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;
use mockall::Sequence;
use serde_json::{Value, json};

use crate::lease::Held;
use crate::ports::{
    ClusterError, MockSessionDirectory, ObjectCluster, Page, Preconditions, StoreError,
};
use crate::sessions::run::{DeleteResult, SessionRunError, run};
use crate::sessions::{Kind, Row, SessionConfig, SessionPlanError};
use crate::testing::block_on;

const NOW: f64 = 1_795_953_600.0;
const SESSIONS: [&str; 5] = ["a", "b", "c", "d", "e"];

mockall::mock! {
    /// The calls of the [`ObjectCluster`] port, with the kind by name and the continue token
    /// owned: `automock` cannot name the elided lifetime of `Option<&str>`, so the port
    /// delegates to these one to one.
    Objects {
        fn list_metadata(&self, kind: &str, namespace: &str, selector: &str, continue_token: Option<String>) -> Result<Page, ClusterError>;
        fn get_object(&self, kind: &str, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError>;
        fn delete_object(&self, kind: &str, namespace: &str, name: &str, preconditions: &Preconditions, dry_run: bool) -> Result<(), ClusterError>;
    }
}

#[async_trait]
impl ObjectCluster for MockObjects {
    async fn list_metadata(
        &self,
        kind: &Kind,
        namespace: &str,
        selector: &str,
        _limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        MockObjects::list_metadata(
            self,
            &kind.kind,
            namespace,
            selector,
            continue_token.map(str::to_owned),
        )
    }
    async fn get_object(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        MockObjects::get_object(self, &kind.kind, namespace, name)
    }
    async fn delete_object(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        MockObjects::delete_object(self, &kind.kind, namespace, name, preconditions, dry_run)
    }
}

use crate::testing::session_config as cfg;

/// The Deployment and the `Session` of each session, each with its own uid and
/// resourceVersion; no Services or claims.
fn objects(kind: &str) -> Vec<Value> {
    let n = match kind {
        "Deployment" => 1,
        "Session" => 2,
        _ => return vec![],
    };
    SESSIONS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"metadata": {"name": format!("{s}-{kind}"), "uid": format!("uid-{s}-{kind}"),
                   "resourceVersion": format!("{}{n}", i + 1), "creationTimestamp": "2026-11-20T00:00:00Z",
                   "labels": {"app": "streamspace-session", "session": s}}})
        })
        .collect()
}

/// A kind whose list fails, and how.
type Failing = Option<(&'static str, ClusterError)>;

/// A cluster listing [`objects`] of every kind, except `failing` which answers that error.
fn cluster(failing: Failing) -> MockObjects {
    let mut c = MockObjects::new();
    let cfg = cfg();
    c.expect_list_metadata()
        .withf(move |_, ns, selector, token| {
            ns == cfg.namespace && selector == cfg.selector && token.is_none()
        })
        .returning(move |kind, _, _, _| match &failing {
            Some((k, e)) if *k == kind => Err(e.clone()),
            _ => Ok(Page {
                text: json!({ "items": objects(kind) }).to_string().into_bytes(),
                continue_token: None,
            }),
        });
    // An object is read whole only to archive it before its delete: as it was listed.
    c.expect_get_object().returning(|kind, _, name| {
        let found = objects(kind)
            .into_iter()
            .find(|o| o["metadata"]["name"] == name);
        Ok(found.map(|o| o.to_string().into_bytes()))
    });
    c
}

/// A directory answering `answer` once, for the ids of every session.
fn directory(answer: Result<HashMap<String, Row>, StoreError>) -> MockSessionDirectory {
    let mut d = MockSessionDirectory::new();
    d.expect_lookup()
        .withf(|ids| ids == SESSIONS)
        .times(1)
        .return_once(move |_| answer);
    d
}

/// A row for each session, present for those in `live`.
fn rows(live: &[&str]) -> HashMap<String, Row> {
    SESSIONS
        .iter()
        .map(|s| {
            let row = if live.contains(s) {
                Row::Present {
                    state: Some("running".into()),
                }
            } else {
                Row::Missing
            };
            ((*s).to_owned(), row)
        })
        .collect()
}

fn go(
    cluster: &MockObjects,
    directory: &MockSessionDirectory,
    cfg: &SessionConfig,
    dry_run: bool,
    lock_lost: bool,
) -> Result<Vec<String>, SessionRunError> {
    let (lost, stopping) = (AtomicBool::new(lock_lost), AtomicBool::new(false));
    let stop = (&lost, &stopping);
    let kept = crate::testing::Kept::default();
    let report = block_on(run(
        cluster,
        directory,
        kept.keep(),
        cfg,
        NOW,
        Held::new(stop.0, stop.1, dry_run),
    ))?;
    Ok(report
        .records
        .iter()
        .filter_map(|r| Some(format!("{} {}", r.judged.resource.name, r.result.as_ref()?)))
        .collect())
}

#[test]
fn deletes_carry_uid_and_resource_version_preconditions_and_dry_run() {
    // Session e has no row: its Deployment and its `Session` are deleted, each fenced on the uid
    // and resourceVersion it was listed with, in dry run when the run is.
    for (dry_run, result) in [
        (false, DeleteResult::Deleted),
        (true, DeleteResult::WouldDelete),
    ] {
        let mut c = cluster(None);
        let mut seq = Sequence::new();
        for (kind, rv) in [("Deployment", "51"), ("Session", "52")] {
            let name = format!("e-{kind}");
            let pre = Preconditions {
                uid: format!("uid-e-{kind}"),
                resource_version: rv.into(),
            };
            c.expect_delete_object()
                .withf(move |k, ns, n, p, dry| {
                    k == kind && ns == "streamspace" && *n == name && *p == pre && *dry == dry_run
                })
                .times(1)
                .in_sequence(&mut seq)
                .returning(|_, _, _, _, _| Ok(()));
        }
        let d = directory(Ok(rows(&["a", "b", "c", "d"])));
        assert_eq!(
            go(&c, &d, &cfg(), dry_run, false).unwrap(),
            [
                format!("e-Deployment {result}"),
                format!("e-Session {result}")
            ]
        );
    }
}

#[test]
fn any_doubt_before_the_first_delete_means_no_delete() {
    // No delete expectation: a delete in any row fails the test.
    // The guard's share set to 1: only the "no row at all" refusal is left.
    let lenient = SessionConfig {
        guard_ratio: 1.0,
        ..cfg()
    };
    let rows: Vec<(&str, Failing, Option<_>, &str)> = vec![
        (
            "the directory is unavailable",
            None,
            Some(Err(StoreError::Unavailable("connection refused".into()))),
            "database",
        ),
        (
            "the session table is missing",
            None,
            Some(Err(StoreError::Other(
                "relation \"sessions\" does not exist".into(),
            ))),
            "database",
        ),
        (
            "the directory answers malformed rows",
            None,
            Some(Err(StoreError::Malformed("id is not text".into()))),
            "database",
        ),
        (
            "the directory leaves an id out",
            None,
            Some(Ok({
                let mut partial = rows(&["a", "b", "c", "d"]);
                partial.remove("e");
                partial
            })),
            "no answer",
        ),
        (
            "the guard refuses: most sessions look orphaned",
            None,
            Some(Ok(rows(&["a"]))),
            "mass deletion",
        ),
        (
            "the guard refuses: no id has a row (share not checked)",
            None,
            Some(Ok(rows(&[]))),
            "no row found",
        ),
        (
            "a list fails (no lookup either)",
            Some(("Service", ClusterError::Unavailable("503".into()))),
            None,
            "list",
        ),
    ];
    for (what, failing, answer, error) in rows {
        let c = cluster(failing);
        let d = match answer {
            Some(answer) => directory(answer),
            None => MockSessionDirectory::new(),
        };
        let cfg = if error == "no row found" {
            lenient.clone()
        } else {
            cfg()
        };
        let err = go(&c, &d, &cfg, false, false).unwrap_err();
        let kind = match &err {
            SessionRunError::Database(_) => "database",
            SessionRunError::Plan(SessionPlanError::NoAnswer(_)) => "no answer",
            SessionRunError::Plan(SessionPlanError::MassDeletion { .. }) => "mass deletion",
            SessionRunError::Plan(SessionPlanError::NoRowFound { .. }) => "no row found",
            SessionRunError::List { .. } => "list",
        };
        assert_eq!(kind, error, "{what}: {err}");
    }
}

#[test]
fn a_lost_run_lock_sends_no_delete() {
    let c = cluster(None);
    let d = directory(Ok(rows(&["a", "b", "c", "d"])));
    let lost = "failed: not deleted: the run lock was lost";
    assert_eq!(
        go(&c, &d, &cfg(), false, true).unwrap(),
        [format!("e-Deployment {lost}"), format!("e-Session {lost}")]
    );
}
