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
    fn selection_flags_need_all_namespaces_and_exclude_naming() {
        assert!(parse(&["-n", "a", "-A"]).is_err());
        assert!(parse(&["--namespace-selector", "team=a"]).is_err());
        assert!(parse(&["--exclude-namespace", "a"]).is_err());
        assert!(parse(&["-A", "--namespace-selector", "team=a"]).is_ok());
    }
}
