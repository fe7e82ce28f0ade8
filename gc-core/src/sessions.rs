//! The orphaned-session collector (StreamSpace's feature request, seed 000): `config` (what it
//! scans and its limits), `plan` (orphans, grace, cap, the mass-deletion guard), `run` (one run
//! over the ports: scan, batched lookup, fenced deletes, audit records).

pub mod config;
pub mod plan;
pub mod run;

pub use config::{Kind, SessionConfig, SessionInputs};
pub use plan::*;
