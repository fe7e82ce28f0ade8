//! The run lifecycle of the gc collectors, as a library an embedder calls exactly as `gc-cli`
//! does. It holds no process-wide state, handles no OS signal and never exits the process:
//! cancellation is passed in ([`Cancel`]), and every failure is a typed error.
//!
//! - [`RunLock`]: one run at a time per namespace, on a renewed `coordination.k8s.io` Lease;
//!   a run that lost it writes nothing more ([`RunLock::held`]) and never takes it back.
//! - [`metrics`]: what a run reports (the Pushgateway, a metrics file, a webhook alert, the
//!   in-memory exposition of a long-running process); [`events`]: its Kubernetes Events.
//! - [`Cancel`], [`StopToken`]: the embedder's shutdown; a run so stopped is [`Stopped`].

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
