//! Pure logic of the gc collectors: input validation, eligibility, anchors, planning and the
//! fenced apply protocol over ports.
//!
//! Nothing here performs I/O or reads the clock: inventories arrive as bytes, `now` as an
//! argument, and decisions leave as data with their reasons. The adapters (`gc-k8s`,
//! `gc-store`) and the binary (`gc-cli`) sit on top.
//!
//! Shared pieces sit at the top (`ports`, `pages`, `input`, `pyjson`, `raw`, `isotime`); each
//! collector has its folder (`pods`, `sessions`).

pub mod input;
#[cfg(test)]
mod interactions;
pub mod isotime;
pub mod lease;
pub mod pages;
pub mod pods;
pub mod ports;
pub mod pyjson;
pub mod raw;
pub mod selector;
pub mod sessions;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use pods::config::{PodConfig, PodInputs};
pub use pods::facts::{Basis, Ineligible, PodFacts, Rules};
pub use pods::ledger::{Ledger, PreviousLedger, PyNum};
pub use pods::plan::{Decision, PlanError, PodPlan, Target, plan_pods};

// The flat module paths of the first layout, for code written against them.
pub use pods::facts as pod;
pub use pods::{apply, approval, archive, inventory, ledger, plan, skim};
pub use sessions::run as collect_sessions;

/// The flat `config` path of the first layout: the failed-Pod inputs and the shared input rules.
pub mod config {
    pub use crate::input::*;
    pub use crate::pods::config::*;
}
