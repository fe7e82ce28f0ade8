//! `--no-events`: whether a live run posts Kubernetes Events (`gc_runtime::events`).

use clap::Args;
use clap::builder::BoolishValueParser;

/// The flag that turns Events off.
#[derive(Debug, Clone, Args)]
pub(crate) struct EventArgs {
    /// Post no Kubernetes Events. A live run posts one on each object it deletes, refuses or
    /// fails on, and one on the Namespace when the whole run is refused or fails; this needs
    /// `create` on `events.k8s.io` `events`.
    #[arg(long, env = "GC_NO_EVENTS", value_parser = BoolishValueParser::new())]
    pub(crate) no_events: bool,
}
