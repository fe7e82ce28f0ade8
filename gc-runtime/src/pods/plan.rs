//! A live plan of one namespace: its Failed Pods listed page by page, planned against the
//! observation ledger (a file's, or the store's, saved back when asked).

use gc_core::pods::ledger::PreviousLedger;
use gc_core::pods::list::{failed_pod_query, list_inventory};
use gc_core::ports::{Cluster, Store};
use gc_core::{PodConfig, PodPlan, plan_pods};

use crate::Context as _;

/// The cluster a plan reads, the store its ledger lives in (else none is kept), and whether
/// the new ledger is recorded there.
pub(super) struct Live<'a, C, S> {
    /// The cluster.
    pub cluster: &'a C,
    /// The store of the ledger.
    pub store: Option<&'a S>,
    /// Whether the plan's new ledger goes back to the store (not for a plan for another
    /// instant, nor one whose ledger is written elsewhere).
    pub record: bool,
}

/// Plans `cfg`'s namespace from the cluster at `now`, with `file_ledger` or the store's ledger;
/// `progress` hears of each page listed (pages, Pods). Nothing is written to the cluster.
///
/// # Errors
/// When the Pods cannot be listed, the ledger cannot be loaded or saved, or the plan fails
/// closed on the data.
pub(super) async fn plan_live<C: Cluster, S: Store>(
    live: Live<'_, C, S>,
    cfg: &PodConfig,
    file_ledger: Option<&PreviousLedger>,
    now: f64,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> crate::Result<PodPlan> {
    let loaded;
    let previous = match (file_ledger, live.store) {
        (Some(ledger), _) => ledger,
        (None, Some(store)) => {
            loaded = store
                .load_ledger(&cfg.cluster_id, &cfg.namespace)
                .await
                .context("cannot load the ledger")?;
            &loaded
        }
        (None, None) => &PreviousLedger::default(),
    };
    let query = failed_pod_query(cfg, 500);
    let inventory = list_inventory(
        live.cluster,
        &query,
        cfg.rules(),
        cfg.max_inventory + 1,
        progress,
    )
    .await
    .with_context(|| format!("cannot list the Pods of namespace {}", cfg.namespace))?;
    let plan = plan_pods(&inventory, previous, cfg, now)
        .with_context(|| format!("namespace {}", cfg.namespace))?;
    if let (Some(store), true) = (live.store, live.record) {
        store
            .save_ledger(&cfg.cluster_id, &cfg.namespace, &plan.ledger)
            .await
            .context("cannot save the ledger")?;
    }
    Ok(plan)
}
