//! Plans a failed-Pod inventory in-process with the library, as a Rust service embeds it.
//!
//! `cargo run -p examples --example plan_inventory -- examples/data/pods.json` prints each Pod's
//! decision. The same calls back `gc-cli plan pods`.

use gc_core::pods::inventory::Reader;
use gc_core::{Decision, PodInputs, PreviousLedger, plan_pods};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/data/pods.json".into());
    let cfg = PodInputs {
        namespace: "batch".into(),
        ..PodInputs::default()
    }
    .validate()?;
    let rules = cfg.rules();
    let mut reader = Reader::new(rules, cfg.max_inventory + 1);
    reader.feed(&std::fs::read(&path)?)?;
    let inventory = reader.finish()?;
    // A fixed instant keeps the example's output stable; a service passes the current time.
    let now = 1_795_953_600.0;
    let plan = plan_pods(&inventory, &PreviousLedger::default(), &cfg, now)?;
    for d in &plan.decisions {
        let what = match &d.decision {
            Decision::NotEligible { reason } => format!("not eligible: {reason}"),
            Decision::Held { until, .. } => format!("held until {until}"),
            Decision::Deferred { .. } => "deferred by the cap".to_owned(),
            Decision::Protected { .. } => "protected by its label".to_owned(),
            Decision::Excluded { .. } => "excluded by the selector".to_owned(),
            Decision::Targeted { basis, anchor } => {
                format!("targeted ({} {anchor})", basis.as_str())
            }
        };
        println!("{:<24} {what}", d.name.as_deref().unwrap_or("?"));
    }
    println!(
        "{} targeted, {} held, {} deferred",
        plan.targets.len(),
        plan.held,
        plan.deferred
    );
    Ok(())
}
