//! `--no-events`: whether a live run posts Kubernetes Events (`gc_runtime::events`).

use clap::Args;
use clap::builder::BoolishValueParser;

/// The flag that turns Events off.
#[derive(Debug, Clone, Args)]
pub(crate) struct EventArgs {
    /// Post no Kubernetes Events. A live run posts one on each Pod and each session it collects,
    /// each object it refuses or fails on, and one on the Namespace when the whole run is
    /// refused or fails; this needs
    /// `create` on `events.k8s.io` `events`.
    #[arg(long, env = "GC_NO_EVENTS", value_parser = BoolishValueParser::new())]
    pub(crate) no_events: bool,
    /// One Event on each session object deleted (the earlier behaviour), instead of one on each
    /// session collected naming its objects (a quarter of the writes for StreamSpace's four).
    #[arg(long, env = "GC_EVENT_PER_OBJECT", value_parser = BoolishValueParser::new())]
    pub(crate) event_per_object: bool,
}
