//! The failed-Pod diagnostics collector (what the Kestra flow in `deploy/kestra` runs), from inputs to fenced
//! writes: `config` (inputs, validated as the flow's first task), `skim` and `facts` (what the
//! rules read of a Pod, and the eligibility rule and anchor), `inventory` (the streaming reader),
//! `list` (a live inventory, page by page, over the cluster port), `ledger` (the flow's
//! observation ledger), `plan` (retention, ceilings, order, cap),
//! `archive` (the canonical archive), `approval` (sealed plan files), `apply` (the per-target
//! protocol and pin recovery over the ports).

pub mod apply;
pub mod approval;
pub mod archive;
pub mod config;
pub mod facts;
pub mod inventory;
pub mod ledger;
pub mod list;
pub mod plan;
pub mod skim;
