//! `gc-cli plan sessions`: scans, looks the ids up and plans; writes nothing anywhere but its
//! output.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use gc_core::sessions::run as collect_sessions;
use gc_output::sessions::{plans_json, write_plans};
use gc_runtime::sessions::{refused, report_missing};

use crate::files::write_file;
use crate::live;
use crate::output::OutputArgs;
use crate::sessions::args::{SessionArgs, configs, connect};

/// `gc-cli plan sessions`
#[derive(Debug, Args)]
pub(crate) struct PlanSessions {
    #[command(flatten)]
    args: SessionArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Also write the plan as JSON to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// What a refused plan comes to.
const NO_PLAN: &str = "no plan (`plan sessions --override-guard` shows what a guard refused)";

pub(crate) fn plan(args: &PlanSessions) -> anyhow::Result<()> {
    args.args.check()?;
    let now = crate::clock::at(args.args.now.as_deref())?;
    let (plans, mut failed) = live::block_on(async {
        let (cluster, table) = connect(&args.args).await?;
        let configs = configs(&args.args, &cluster).await;
        let (mut plans, mut failed) = (Vec::new(), Vec::new());
        for cfg in configs.iter().flatten() {
            match collect_sessions::plan(&cluster, &table, cfg, now).await {
                Ok(planned) => plans.push((cfg.clone(), planned)),
                Err(e) => failed.push((cfg.namespace.clone(), refused(e, cfg, NO_PLAN))),
            }
        }
        table.close().await;
        configs.map(|_| (plans, failed))
    })?;
    let several = plans.len() + failed.len() > 1;
    if !several && let Some((_, error)) = failed.pop() {
        return Err(error.into());
    }
    if let Some((cfg, _)) = plans.first() {
        let missing = plans.iter().flat_map(|(_, p)| &p.missing_kinds);
        report_missing(missing, &cfg.kinds);
    }
    let mut out = std::io::stdout().lock();
    write_plans(&mut out, &plans, now, several, args.output.form)
        .context("cannot write the plan")?;
    if let Some(path) = &args.out {
        if failed.is_empty() {
            let json = plans_json(&plans, now, several).context("cannot write the plan")?;
            write_file(path, &format!("{json}\n"))?;
        } else {
            tracing::warn!("no plan file written: a namespace failed to plan");
        }
    }
    Ok(gc_runtime::outcome(plans.len() + failed.len(), failed)?)
}
