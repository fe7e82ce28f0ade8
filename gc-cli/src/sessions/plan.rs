//! `gc-cli plan sessions`: scans, looks the ids up and plans; writes nothing anywhere but its
//! output.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use gc_output::sessions::{plans_json, write_plans};
use gc_runtime::Builder;
use gc_runtime::sessions::{report_missing, report_unknown_states};

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

pub(crate) fn plan(args: &PlanSessions) -> anyhow::Result<()> {
    args.args.check()?;
    let now = crate::clock::at(args.args.now.as_deref())?;
    let (plans, mut failed) = live::block_on(async {
        let (cluster, table) = connect(&args.args).await?;
        let configs = configs(&args.args, &cluster).await;
        let settings = gc_runtime::Settings {
            now: Some(now),
            ..gc_runtime::Settings::default()
        };
        let collector = Builder::new(settings).cluster(cluster).directory(table);
        let collector = collector.sessions()?;
        let (mut plans, mut failed) = (Vec::new(), Vec::new());
        for cfg in configs.iter().flatten() {
            match collector.plan(cfg).await {
                Ok(planned) => plans.push((cfg.clone(), planned)),
                Err(e) => failed.push((cfg.namespace.clone(), e)),
            }
        }
        collector.into_parts().1.close().await;
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
    for (cfg, planned) in &plans {
        report_unknown_states(&cfg.namespace, &planned.plan.unknown_states);
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
