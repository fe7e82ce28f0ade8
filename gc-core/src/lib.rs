//! Pure logic of the gc collectors: input validation, eligibility, anchors, planning and the
//! fenced apply protocol over ports.
//!
//! Nothing here performs I/O or reads the clock: inventories arrive as bytes, `now` as an
//! argument, and decisions leave as data with their reasons. The adapters (`gc-k8s`,
//! `gc-store`) and the binary (`gc-cli`) sit on top.
//!
//! Shared pieces sit at the top (`ports`, `pages`, `input`, `pyjson`, `raw`, `isotime`); each
//! collector has its folder (`pods`, `sessions`).

pub mod events;
pub mod input;
#[cfg(test)]
mod interactions;
pub mod isotime;
pub mod lease;
pub mod pages;
pub mod pipeline;
pub mod pods;
pub mod ports;
pub mod pyjson;
pub mod raw;
pub mod selector;
pub mod sessions;
pub mod shown;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use pods::config::{PodConfig, PodInputs};
pub use pods::facts::{Basis, Ineligible, PodFacts, Rules};
pub use pods::ledger::{Ledger, PreviousLedger, PyNum};
pub use pods::plan::{Decision, PlanError, PodPlan, Target, plan_pods};
