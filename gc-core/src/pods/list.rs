//! A live Pod inventory: server-filtered pages read one at a time into the core's facts.

use crate::PodConfig;
use crate::pods::facts::Rules;
use crate::pods::inventory::{self, Inventory};
use crate::ports::{Cluster, ClusterError, PodQuery};

/// How many times a scan starts again from the first page when a continue token expires.
pub const MAX_RESTARTS: usize = 3;

/// The field selector of the failed-Pod collector: the API server returns only Failed Pods.
pub const FAILED_PHASE: &str = "status.phase=Failed";

/// The query of the failed-Pod collector for `cfg`: its namespace, Pods labelled
/// `<collect-label>=true` in phase `Failed`, `page_size` per page.
///
/// # Caveats
/// The server filters what the reference flow filters itself (`NotLabelled`, `NotFailed`), so a
/// live plan lists no decision for those Pods and counts only the selected Pods against
/// `max_inventory`. Targets, held, deferred and the ledger are the same as for the whole
/// namespace.
pub fn failed_pod_query(cfg: &PodConfig, page_size: u32) -> PodQuery {
    PodQuery {
        namespace: cfg.namespace.clone(),
        label_selector: format!("{}=true", cfg.collect_label),
        field_selector: FAILED_PHASE.to_owned(),
        limit: page_size,
    }
}

/// Lists every Pod matching `query`, page by page (`query.limit` per page, following continue
/// tokens), and reads each page's text with [`crate::pods::inventory::read`] under `rules`.
///
/// `progress(pages, pods)` is called after each page with the totals of the current scan.
///
/// # Guarantees
/// - Facts are kept for at most `keep_at_most` Pods; further Pods are only counted
///   ([`Inventory::count`]), so memory stays bounded however many Pods match.
/// - When a continue token expires (410) the scan starts again from the first page, with
///   nothing kept from the expired scan, at most [`MAX_RESTARTS`] times. Each Pod is then read
///   once, from one consistent scan.
///
/// # Errors
/// The first [`ClusterError`] of a page other than an expired token; [`ClusterError::Expired`]
/// after [`MAX_RESTARTS`] restarts; [`ClusterError::Other`] for a page that is not a Pod list.
pub async fn list_inventory(
    cluster: &(impl Cluster + ?Sized),
    query: &PodQuery,
    rules: Rules<'_>,
    keep_at_most: usize,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<Inventory, ClusterError> {
    let mut restarts = 0;
    // One scan from the first page to the last, started again when its token expires.
    'scan: loop {
        let mut all = Inventory::default();
        let mut token: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = match cluster.list_pods(query, token.as_deref()).await {
                Err(ClusterError::Expired) if restarts < MAX_RESTARTS => {
                    restarts += 1;
                    tracing::warn!(
                        namespace = %query.namespace,
                        restarts,
                        "continue token expired; listing again from the first page"
                    );
                    continue 'scan;
                }
                page => page?,
            };
            pages += 1;
            let room = keep_at_most.saturating_sub(all.pods.len());
            let read = inventory::read(&page.text, rules, room).map_err(|e| {
                ClusterError::Other(format!("page {pages} of the pod list is unreadable: {e}"))
            })?;
            all.extend(read, keep_at_most);
            progress(pages, all.count);
            tracing::debug!(
                namespace = %query.namespace,
                pages,
                pods = all.count,
                "listed a page of pods"
            );
            match page.continue_token {
                Some(next) => token = Some(next),
                None => return Ok(all),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use crate::ports::{Page, Preconditions};
    use async_trait::async_trait;

    use super::*;
    use crate::testing::block_on;

    /// Answers `list_pods` from a script and records the continue tokens it was asked for.
    struct Script {
        answers: Mutex<VecDeque<Result<Page, ClusterError>>>,
        asked: Mutex<Vec<Option<String>>>,
    }

    impl Script {
        fn new(answers: Vec<Result<Page, ClusterError>>) -> Self {
            Self {
                answers: Mutex::new(answers.into()),
                asked: Mutex::new(Vec::new()),
            }
        }
        fn asked(&self) -> Vec<Option<String>> {
            self.asked.lock().expect("lock").clone()
        }
    }

    #[async_trait]
    impl Cluster for Script {
        async fn list_pods(
            &self,
            _query: &PodQuery,
            token: Option<&str>,
        ) -> Result<Page, ClusterError> {
            self.asked.lock().expect("lock").push(token.map(Into::into));
            self.answers
                .lock()
                .expect("lock")
                .pop_front()
                .expect("an answer is scripted")
        }
        async fn list_pod_metadata(
            &self,
            _: &str,
            _: u32,
            _: Option<&str>,
        ) -> Result<Page, ClusterError> {
            unreachable!("not used")
        }
        async fn get_pod(&self, _: &str, _: &str) -> Result<Option<Vec<u8>>, ClusterError> {
            unreachable!("not used")
        }
        async fn patch_pod(
            &self,
            _: &str,
            _: &str,
            _: &[u8],
            _: bool,
        ) -> Result<Vec<u8>, ClusterError> {
            unreachable!("not used")
        }
        async fn delete_pod(
            &self,
            _: &str,
            _: &str,
            _: &Preconditions,
            _: bool,
        ) -> Result<Option<Vec<u8>>, ClusterError> {
            unreachable!("not used")
        }
    }

    /// A page of Pods named `names`, continuing with `next`.
    fn page(names: &[&str], next: Option<&str>) -> Result<Page, ClusterError> {
        let items: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"metadata":{{"name":"{n}","namespace":"ns","uid":"u-{n}","resourceVersion":"1"}},"status":{{"phase":"Failed"}}}}"#
                )
            })
            .collect();
        Ok(Page {
            text: format!(r#"{{"kind":"PodList","items":[{}]}}"#, items.join(",")).into_bytes(),
            continue_token: next.map(Into::into),
        })
    }

    const RULES: Rules<'static> = Rules {
        namespace: "ns",
        collect_label: "c",
        pin: "p",
        protect: None,
        exclude: None,
    };

    fn query() -> PodQuery {
        PodQuery {
            namespace: "ns".into(),
            label_selector: "c=true".into(),
            field_selector: FAILED_PHASE.into(),
            limit: 2,
        }
    }

    fn names(inventory: &Inventory) -> Vec<String> {
        inventory
            .pods
            .iter()
            .map(|p| {
                p.meta
                    .as_ref()
                    .ok()
                    .and_then(|m| m.display_name())
                    .unwrap_or_default()
            })
            .collect()
    }

    async fn run(
        script: &Script,
        keep_at_most: usize,
    ) -> (Result<Inventory, ClusterError>, Vec<(usize, usize)>) {
        let mut seen = Vec::new();
        let result = list_inventory(script, &query(), RULES, keep_at_most, &mut |pages, pods| {
            seen.push((pages, pods))
        })
        .await;
        (result, seen)
    }

    #[test]
    fn pages_follow_continue_tokens_in_order() {
        block_on(async {
            let script = Script::new(vec![
                page(&["a", "b"], Some("t1")),
                page(&["c", "d"], Some("t2")),
                page(&["e"], None),
            ]);
            let (result, progress) = run(&script, 100).await;
            let inventory = result.expect("listed");
            assert_eq!(names(&inventory), ["a", "b", "c", "d", "e"]);
            assert_eq!(inventory.count, 5);
            assert_eq!(progress, [(1, 2), (2, 4), (3, 5)]);
            assert_eq!(script.asked(), [None, Some("t1".into()), Some("t2".into())]);
        });
    }

    #[test]
    fn past_keep_at_most_pods_are_only_counted() {
        block_on(async {
            let script = Script::new(vec![page(&["a", "b"], Some("t1")), page(&["c", "d"], None)]);
            let (result, _) = run(&script, 3).await;
            let inventory = result.expect("listed");
            assert_eq!(names(&inventory), ["a", "b", "c"]);
            assert_eq!(inventory.count, 4);
        });
    }

    #[test]
    fn an_expired_token_restarts_the_scan_from_the_first_page() {
        block_on(async {
            let script = Script::new(vec![
                page(&["a", "b"], Some("t1")),
                Err(ClusterError::Expired),
                page(&["a", "c"], Some("t9")),
                page(&["d"], None),
            ]);
            let (result, progress) = run(&script, 100).await;
            let inventory = result.expect("listed");
            assert_eq!(names(&inventory), ["a", "c", "d"]);
            assert_eq!(inventory.count, 3);
            assert_eq!(progress, [(1, 2), (1, 2), (2, 3)]);
            assert_eq!(
                script.asked(),
                [None, Some("t1".into()), None, Some("t9".into())]
            );
        });
    }

    #[test]
    fn restarts_are_bounded() {
        block_on(async {
            let mut answers = Vec::new();
            for _ in 0..=MAX_RESTARTS {
                answers.push(page(&["a"], Some("t")));
                answers.push(Err(ClusterError::Expired));
            }
            let script = Script::new(answers);
            let (result, _) = run(&script, 100).await;
            assert_eq!(result, Err(ClusterError::Expired));
            assert_eq!(script.asked().len(), 2 * (MAX_RESTARTS + 1));
        });
    }

    #[test]
    fn other_errors_end_the_scan_at_once() {
        block_on(async {
            let script = Script::new(vec![
                page(&["a"], Some("t")),
                Err(ClusterError::Unavailable("503".into())),
            ]);
            let (result, _) = run(&script, 100).await;
            assert_eq!(result, Err(ClusterError::Unavailable("503".into())));
            assert_eq!(script.asked().len(), 2);
        });
    }

    #[test]
    fn an_unreadable_page_is_an_error() {
        block_on(async {
            let script = Script::new(vec![Ok(Page {
                text: b"{\"items\": [".to_vec(),
                continue_token: None,
            })]);
            let (result, _) = run(&script, 100).await;
            assert!(matches!(result, Err(ClusterError::Other(m)) if m.contains("page 1")));
        });
    }

    #[test]
    fn the_failed_pod_query_selects_on_the_server() {
        let cfg = crate::PodInputs {
            namespace: "team-a".into(),
            ..crate::PodInputs::default()
        }
        .validate()
        .expect("valid");
        let q = failed_pod_query(&cfg, 250);
        assert_eq!(q.namespace, "team-a");
        assert_eq!(q.label_selector, "diagnostics.example.com/collect=true");
        assert_eq!(q.field_selector, "status.phase=Failed");
        assert_eq!(q.limit, 250);
    }
}
