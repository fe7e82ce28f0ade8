//! Pure logic of the gc collectors: input validation, eligibility, anchors and planning.
//!
//! Nothing here performs I/O or reads the clock: inventories arrive as bytes, `now` as an
//! argument, and decisions leave as data with their reasons. The adapters (`gc-k8s`,
//! `gc-store`) and the binary (`gc-cli`) sit on top.

pub mod apply;
pub mod approval;
pub mod archive;
pub mod collect_sessions;
pub mod config;
pub mod inventory;
pub mod isotime;
pub mod ledger;
pub mod pages;
pub mod plan;
pub mod pod;
pub mod ports;
pub mod pyjson;
pub mod raw;
pub mod sessions;
pub mod skim;

pub use config::{PodConfig, PodInputs};
pub use ledger::{Ledger, PreviousLedger, PyNum};
pub use plan::{Decision, PlanError, PodPlan, Target, plan_pods};
pub use pod::{Basis, Ineligible, PodFacts, Rules};
