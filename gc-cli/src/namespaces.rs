//! Which namespaces a run covers: `-n` (repeatable), or `-A` with `--namespace-selector` and
//! `--exclude-namespace` (`gc_runtime::namespaces::Selection`).

use clap::Args;
use gc_runtime::namespaces::Selection;

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
}

impl NamespaceArgs {
    /// The selection these flags make.
    pub(crate) fn selection(&self) -> Selection {
        Selection {
            named: self.namespaces.clone(),
            all: self.all_namespaces,
            selector: self.namespace_selector.clone(),
            exclude: self.exclude_namespace.clone(),
            context: None,
        }
    }

    /// [`Self::selection`] with the namespace `connect`'s context names as the default.
    pub(crate) fn in_context(&self, connect: &crate::live::ConnectArgs) -> Selection {
        gc_runtime::adapters::in_context(self.selection(), || connect.connection().ok())
    }
}

/// The one namespace of a command that works in one (an inventory file, the Kestra output).
///
/// # Errors
/// A [`UsageError`] naming `-n` when the flags name several namespaces or `-A`.
pub(crate) fn one(scope: &Selection, default: &str, why: &str) -> Result<String, UsageError> {
    match scope.named(default).as_deref() {
        Some([one]) => Ok(one.clone()),
        _ => Err(UsageError::new(format!(
            "{why} works in one namespace: give exactly one -n/--namespace"
        ))),
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
        let ns = parse(&[]).unwrap().selection();
        assert_eq!(ns.named("default"), Some(vec!["default".to_owned()]));
        assert_eq!(one(&ns, "streamspace", "x").unwrap(), "streamspace");
        let ns = parse(&["-n", "b", "--namespace", "a", "-n", "b"])
            .unwrap()
            .selection();
        assert_eq!(ns.named("d"), Some(vec!["b".to_owned(), "a".to_owned()]));
        assert!(ns.several("d"));
        let err = one(&ns, "d", "an inventory").unwrap_err().to_string();
        assert!(err.contains("-n/--namespace"), "{err}");
        let all = parse(&["-A", "--exclude-namespace", "x"])
            .unwrap()
            .selection();
        assert_eq!(all.named("d"), None);
        assert!(all.several("d"));
        assert!(one(&all, "d", "x").is_err());
    }

    #[test]
    fn selection_flags_need_all_namespaces_and_exclude_naming() {
        assert!(parse(&["-n", "a", "-A"]).is_err());
        assert!(parse(&["--namespace-selector", "team=a"]).is_err());
        assert!(parse(&["--exclude-namespace", "a"]).is_err());
        assert!(parse(&["-A", "--namespace-selector", "team=a"]).is_ok());
    }
}
