//! The orphaned-session collector (StreamSpace's leftovers): `config` (what it scans and its
//! limits), `plan` (orphans, grace, cap, the mass-deletion guard), `run` (the collection over
//! the ports: scan, batched lookup, fenced deletes, audit records; `gc_runtime` runs it under
//! the run lock).

pub mod config;
pub mod deletes;
pub mod manifest;
pub mod plan;
pub mod requests;
pub mod run;
pub mod volumes;

pub use config::{Kind, SessionConfig, SessionInputs};
pub use plan::*;
