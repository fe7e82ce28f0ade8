//! The run lifecycle of the gc collectors, as a library an embedder calls exactly as `gc-cli`
//! does.
//!
//! # Where to start
//!
//! 1. [`Builder`], the one door to both collectors: the parts in one order (the cluster, the
//!    application's session directory, gc's store, the archive sink, the clock), each a port
//!    of [`gc_core::ports`], then the stop ([`Builder::stop`]), then
//!    [`pods()`](Builder::pods) or [`sessions()`](Builder::sessions). A part not given stays
//!    `()`, and a collector built for less has no operation that needs it.
//! 2. [`pods::PodCollector::collect`] and [`sessions::SessionCollector::collect`]: a
//!    **collection** over a selection of namespaces, resolved by
//!    [`namespaces::Selection::resolve`] over the [`Namespaces`](gc_core::ports::Namespaces)
//!    port; one **run** per namespace under that namespace's run lock, each ending as a
//!    [`NamespaceRun`]; the metrics file merged when there are several.
//! 3. [`gc_core::ports`]: the traits a part implements, with their error contracts; their
//!    fakes are `gc_core::testing` (gc-core's feature `test-util`).
//! 4. `adapters` (feature `adapters`, off by default): the standard wiring over `gc-k8s` and
//!    `gc-store` (`connect`, `open_store`, `connect_pods`, `run_selected`, `SessionsApi`, the
//!    archives' listing, verification and pruning), the one module that names an adapter.
//!    Without it this crate depends on no adapter.
//!
//! # What it holds to
//!
//! It holds no process-wide state, handles no OS signal and never exits the process: the stop
//! is passed in, and every failure is a typed [`Error`] whose kind is data ([`Error::kind`]).
//!
//! - [`Cancel`], [`StopToken`]: the embedder's stop, given once; what is in flight finishes,
//!   nothing new starts, and a run so stopped is [`Stopped`].
//! - [`RunLock`]: one run at a time per namespace, on a renewed `coordination.k8s.io` Lease;
//!   a run that lost it writes nothing more ([`RunLock::held`]) and never takes it back.
//! - [`metrics`]: what a run reports (the Pushgateway, a metrics file, a webhook alert, the
//!   in-memory exposition of a long-running process); [`events`]: its Kubernetes Events, which
//!   report and never decide; [`audit`]: its audit lines.
//! - [`Settings::default`] is a dry run.

#[cfg(feature = "adapters")]
pub mod adapters;
pub mod audit;
mod builder;
pub mod clock;
pub mod durations;
mod error;
pub mod events;
pub mod files;
pub mod inventory;
pub mod ledger;
mod lock;
pub mod metrics;
pub mod namespaces;
pub mod options;
mod outcome;
pub mod pods;
pub mod requests;
pub mod restore;
pub mod serve;
pub mod sessions;
mod settings;
mod stop;
#[cfg(test)]
mod testing;

pub use builder::Builder;
pub use error::{Context, Error, Result, causes};
pub use lock::{LockError, LockLost, LockOptions, RunLock, holder};
pub use outcome::{
    Failure, FailureKind, NamespaceRun, NamespacesFailed, Outcome, Stage, outcome, outcome_of,
};
pub use settings::{Progress, STORE_TIMEOUT, Settings, SettingsError};
pub use stop::{Cancel, NeverCancel, Shutdown, StopToken, Stopped, stopped};
