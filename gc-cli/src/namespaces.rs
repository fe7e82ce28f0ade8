//! Which namespaces a run covers: `-n` (repeatable), or `-A` with `--namespace-selector` and
//! `--exclude-namespace`. Each namespace is then run on its own (its own ledger, Lease, plan
//! section, metrics labels and audit lines); one namespace's failure does not stop the others.

use clap::Args;
use gc_core::input::SYSTEM_NAMESPACES;

use crate::exit::UsageError;

/// The namespaces of a run.
#[derive(Debug, Clone, Args)]
pub(crate) struct NamespaceArgs {
    /// A namespace to work in; repeat for several. Default for failed Pods: the namespace of
    /// the kubeconfig context (`--context`, else the current one) or, in a Pod, of its
    /// ServiceAccount, as kubectl reads it, else `default`; for sessions: `streamspace`. The run
    /// logs where the namespace came from (`-v`).
    #[arg(
        long = "namespace",
        short = 'n',
        value_name = "NS",
        conflicts_with = "all_namespaces"
    )]
    namespaces: Vec<String>,
    /// Every namespace the identity may list (system namespaces left out); needs `list` on
    /// Namespaces (the chart's cluster-wide mode).
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// With `-A`: only namespaces whose labels match this selector (passed to the API server).
    #[arg(long, value_name = "SELECTOR", requires = "all_namespaces")]
    namespace_selector: Option<String>,
    /// With `-A`: leave this namespace out; repeat for several.
    #[arg(long, value_name = "NS", requires = "all_namespaces")]
    exclude_namespace: Vec<String>,
    /// The namespace the connection's context names, when one does ([`Self::in_context`]).
    #[arg(skip)]
    context: Option<String>,
}

impl NamespaceArgs {
    /// The namespaces named with `-n` (`default` when none), each once in the order given;
    /// `None` with `-A`, whose namespaces come from the cluster.
    pub(crate) fn named(&self, default: &str) -> Option<Vec<String>> {
        if self.all_namespaces {
            return None;
        }
        if self.namespaces.is_empty() {
            return Some(vec![self.context.as_deref().unwrap_or(default).to_owned()]);
        }
        let mut named: Vec<String> = Vec::new();
        for ns in &self.namespaces {
            if !named.contains(ns) {
                named.push(ns.clone());
            }
        }
        Some(named)
    }

    /// The one namespace of a command that works in one (an inventory file, the Kestra output).
    ///
    /// # Errors
    /// A [`UsageError`] naming `-n` when the flags name several namespaces or `-A`.
    pub(crate) fn one(&self, default: &str, why: &str) -> Result<String, UsageError> {
        match self.named(default).as_deref() {
            Some([one]) => Ok(one.clone()),
            _ => Err(UsageError::new(format!(
                "{why} works in one namespace: give exactly one -n/--namespace"
            ))),
        }
    }

    /// Whether the run covers `-A`'s choice of namespaces (so pins may lie outside it).
    pub(crate) fn all(&self) -> bool {
        self.all_namespaces
    }

    /// The namespaces of the run: the named ones, or with `-A` the cluster's (matching
    /// `--namespace-selector`, less `--exclude-namespace` and the system namespaces), sorted.
    ///
    /// # Errors
    /// When the Namespaces cannot be listed (for example a namespaced identity).
    pub(crate) async fn resolve(
        &self,
        cluster: &gc_k8s::KubeCluster,
        default: &str,
    ) -> anyhow::Result<Vec<String>> {
        if let Some(named) = self.named(default) {
            return Ok(named);
        }
        let selector = self.namespace_selector.as_deref();
        gc_runtime::namespaces::every(cluster, selector, &self.exclude_namespace).await
    }
}

impl NamespaceArgs {
    /// These flags with the namespace `connect`'s context names as the default, as kubectl
    /// takes it (for a collector whose default is not its own).
    pub(crate) fn in_context(&self, connect: &crate::live::ConnectArgs) -> Self {
        let mut scoped = self.clone();
        if self.namespaces.is_empty() && !self.all_namespaces {
            let found = connect
                .connection()
                .ok()
                .and_then(|c| gc_k8s::context_namespace(&c));
            if let Some((namespace, origin)) = found {
                if SYSTEM_NAMESPACES.contains(&namespace.as_str()) {
                    tracing::warn!(
                        namespace,
                        "the namespace comes from {origin}; the failed-Pod collector refuses \
                         system namespaces: name one with -n"
                    );
                } else {
                    tracing::info!(namespace, "namespace from {origin}");
                }
                scoped.context = Some(namespace);
            } else {
                tracing::info!(
                    namespace = "default",
                    "no kubeconfig context names a namespace"
                );
            }
        }
        scoped
    }

    /// [`Self::resolve`], connecting with `connect` only when the cluster must be asked (`-A`).
    ///
    /// # Errors
    /// When the connection fails or the Namespaces cannot be listed.
    pub(crate) async fn resolve_with(
        &self,
        connect: &crate::live::ConnectArgs,
        default: &str,
    ) -> anyhow::Result<Vec<String>> {
        if let Some(named) = self.named(default) {
            return Ok(named);
        }
        self.resolve(&connect.cluster().await?, default).await
    }
}

/// The outcome of a run over `total` namespaces of which `failed` failed: one namespace's error
/// as it is; with several, each named on stderr and one error that names them all, whose exit
/// code is 3 when every namespace that failed was refused on its data, 1 when any failed
/// otherwise, and which is a stop (not a failure) when a signal stopped every one of them.
pub(crate) fn outcome(
    total: usize,
    mut failed: Vec<(String, anyhow::Error)>,
) -> anyhow::Result<()> {
    match failed.len() {
        0 => Ok(()),
        1 if total == 1 => Err(failed.remove(0).1),
        n => {
            for (namespace, error) in &failed {
                tracing::error!("{}", in_namespace(namespace, error));
            }
            let names: Vec<&str> = failed.iter().map(|(ns, _)| ns.as_str()).collect();
            let message = format!("{n} of {total} namespaces failed: {}", names.join(", "));
            if failed.iter().all(|(_, e)| crate::signals::stopped(e)) {
                return Err(crate::signals::Stopped::new(message).into());
            }
            let refused_on_data = failed
                .iter()
                .all(|(_, e)| crate::exit::code(e) == crate::exit::PLAN);
            Err(crate::exit::NamespacesFailed::new(message, refused_on_data).into())
        }
    }
}

/// [`outcome`] of the runs of each namespace.
pub(crate) fn outcome_of<R>(runs: Vec<gc_runtime::NamespaceRun<R>>) -> anyhow::Result<()> {
    let total = runs.len();
    let failed = runs
        .into_iter()
        .filter_map(|r| r.failure.map(|f| (r.namespace, f.error)))
        .collect();
    outcome(total, failed)
}

/// `error` in full, after its namespace unless it starts by naming it already.
fn in_namespace(namespace: &str, error: &anyhow::Error) -> String {
    let named = format!("namespace {namespace}");
    let text = format!("{error:#}");
    if text.starts_with(&format!("{named} ")) || text.starts_with(&format!("{named}:")) {
        text
    } else {
        format!("{named}: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ns: NamespaceArgs,
    }

    fn parse(args: &[&str]) -> Result<NamespaceArgs, clap::Error> {
        Cli::try_parse_from([&["gc"], args].concat()).map(|c| c.ns)
    }

    /// Several namespaces: 1 when any failed, else 3 when any was refused on its data; a stop
    /// when a signal stopped every one.
    #[test]
    fn several_namespaces_exit_as_their_worst_failure() {
        use crate::exit::{FAILURE, PLAN, code};
        let refused = || anyhow::Error::new(gc_core::ledger::LedgerError("not an object".into()));
        let failed = || anyhow::anyhow!("the cluster is unreachable");
        let stopped = || anyhow::Error::new(crate::signals::Stopped::new("stopped by SIGTERM"));
        let run = |errors: Vec<anyhow::Error>| {
            let named = errors.into_iter().enumerate();
            outcome(3, named.map(|(i, e)| (format!("ns{i}"), e)).collect()).unwrap_err()
        };
        assert_eq!(code(&run(vec![refused()])), PLAN);
        assert_eq!(code(&run(vec![refused(), refused()])), PLAN);
        assert_eq!(code(&run(vec![refused(), failed()])), FAILURE);
        assert_eq!(code(&run(vec![failed()])), FAILURE);
        assert_eq!(code(&run(vec![refused(), stopped()])), FAILURE);
        assert!(crate::signals::stopped(&run(vec![stopped(), stopped()])));
        assert!(!crate::signals::stopped(&run(vec![stopped(), failed()])));
        // One namespace of one: its own error, as it is.
        let one = outcome(1, vec![("a".into(), refused())]).unwrap_err();
        assert_eq!(code(&one), PLAN);
        assert!(outcome(3, Vec::new()).is_ok());
    }

    #[test]
    fn a_failed_namespace_is_named_once() {
        let own = anyhow::anyhow!("cannot read").context("namespace etl of cluster c");
        assert_eq!(
            in_namespace("etl", &own),
            "namespace etl of cluster c: cannot read"
        );
        let bare = anyhow::anyhow!("lock held");
        assert_eq!(in_namespace("etl", &bare), "namespace etl: lock held");
        let other = anyhow::anyhow!("namespace etl2: x");
        assert_eq!(
            in_namespace("etl", &other),
            "namespace etl: namespace etl2: x"
        );
    }

    #[test]
    fn named_namespaces_are_kept_once_in_order_and_default_to_default() {
        let ns = parse(&[]).unwrap();
        assert_eq!(ns.named("default"), Some(vec!["default".to_owned()]));
        assert_eq!(ns.one("streamspace", "x").unwrap(), "streamspace");
        let ns = parse(&["-n", "b", "--namespace", "a", "-n", "b"]).unwrap();
        assert_eq!(ns.named("d"), Some(vec!["b".to_owned(), "a".to_owned()]));
        let err = ns.one("d", "an inventory").unwrap_err().to_string();
        assert!(err.contains("-n/--namespace"), "{err}");
        let all = parse(&["-A", "--exclude-namespace", "x"]).unwrap();
        assert_eq!(all.named("d"), None);
        assert!(all.one("d", "x").is_err());
    }

    #[test]
    fn one_namespace_fails_as_itself_several_are_named_together() {
        let err = |m: &str| anyhow::anyhow!("{m}");
        assert!(outcome(3, Vec::new()).is_ok());
        let one = outcome(1, vec![("a".into(), err("lock held"))]).unwrap_err();
        assert_eq!(one.to_string(), "lock held");
        let some = outcome(3, vec![("a".into(), err("x")), ("c".into(), err("y"))]).unwrap_err();
        assert_eq!(some.to_string(), "2 of 3 namespaces failed: a, c");
    }

    #[test]
    fn selection_flags_need_all_namespaces_and_exclude_naming() {
        assert!(parse(&["-n", "a", "-A"]).is_err());
        assert!(parse(&["--namespace-selector", "team=a"]).is_err());
        assert!(parse(&["--exclude-namespace", "a"]).is_err());
        assert!(parse(&["-A", "--namespace-selector", "team=a"]).is_ok());
    }
}
