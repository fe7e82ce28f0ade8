//! The run lifecycle of the gc collectors, as a library an embedder calls exactly as `gc-cli`
//! does. It holds no process-wide state, handles no OS signal and never exits the process:
//! cancellation is passed in ([`Cancel`]), and every failure is a typed error.
//!
//! - [`RunLock`]: one run at a time per namespace, on a renewed `coordination.k8s.io` Lease;
//!   a run that lost it writes nothing more ([`RunLock::halt`]) and never takes it back.

mod lock;

pub use lock::{Cancel, LockError, LockLost, LockOptions, NeverCancel, RunLock, holder};
