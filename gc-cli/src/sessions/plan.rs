//! `gc-cli plan sessions`: scans, looks the ids up and plans; writes nothing anywhere but its
//! output.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use gc_core::collect_sessions::{self, Planned};
use gc_core::selector::Spared;
use gc_core::sessions::{SessionConfig, SessionDecision};
use serde::Serialize;

use crate::files::write_file;
use crate::live;
use crate::output::{Output, OutputArgs, object_name, rfc3339, write_columns, write_doc};
use crate::sessions::args::{SessionArgs, configs, connect};
use gc_runtime::sessions::{rank, refused, report_missing, round_trips};

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

/// The plan as JSON: the settings, the instant, every resource's decision.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlanDoc<'a> {
    config: &'a SessionConfig,
    now: String,
    #[serde(flatten)]
    planned: &'a Planned,
    delete_count: usize,
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
        return Err(error);
    }
    if let Some((cfg, _)) = plans.first() {
        let missing = plans.iter().flat_map(|(_, p)| &p.missing_kinds);
        report_missing(missing, &cfg.kinds);
    }
    let mut docs = Vec::with_capacity(plans.len());
    let mut out = std::io::stdout().lock();
    for (cfg, planned) in &plans {
        docs.push(PlanDoc {
            config: cfg,
            now: rfc3339(now),
            planned,
            delete_count: planned.plan.deletes().count(),
        });
        match args.output.form {
            Output::Table | Output::Wide => {
                if several {
                    writeln!(out, "namespace {}:", cfg.namespace)?;
                }
                write_table(
                    &mut out,
                    planned,
                    cfg,
                    now,
                    args.output.form == Output::Wide,
                )
                .context("cannot write the plan")?;
            }
            Output::Name => write_names(&mut out, planned)?,
            _ => {}
        }
    }
    // One namespace: its document, as ever; several: a list of them.
    let single = !several && docs.len() == 1;
    if matches!(args.output.form, Output::Json | Output::Yaml) {
        match &docs[..] {
            [one] if single => write_doc(&mut out, one, args.output.form),
            _ => write_doc(&mut out, &docs, args.output.form),
        }
        .context("cannot write the plan")?;
    }
    let json = match &docs[..] {
        [one] if single => serde_json::to_string_pretty(one),
        _ => serde_json::to_string_pretty(&docs),
    }
    .context("cannot write the plan")?;
    if let Some(path) = &args.out {
        if failed.is_empty() {
            write_file(path, &format!("{json}\n"))?;
        } else {
            tracing::warn!("no plan file written: a namespace failed to plan");
        }
    }
    crate::namespaces::outcome(plans.len() + failed.len(), failed)
}

pub(crate) fn reason(d: &SessionDecision) -> String {
    match d {
        SessionDecision::Held { reason, until } if until.is_finite() => {
            format!("{reason}; held until {}", rfc3339(*until))
        }
        SessionDecision::Kept { reason }
        | SessionDecision::Held { reason, .. }
        | SessionDecision::Delete { reason }
        | SessionDecision::Deferred { reason }
        | SessionDecision::Skipped { reason, .. } => reason.clone(),
    }
}

/// `kind.group/NAME` of each resource the plan deletes, as `kubectl -o name` prints them.
fn write_names(out: &mut impl Write, planned: &Planned) -> std::io::Result<()> {
    for j in &planned.plan.judged {
        if matches!(j.decision, SessionDecision::Delete { .. }) {
            writeln!(out, "{}", kube_name(&j.resource))?;
        }
    }
    Ok(())
}

/// A resource's `kind.group/NAME`, its group from the configured kinds.
pub(crate) fn kube_name(resource: &gc_core::sessions::Resource) -> String {
    object_name(&resource.api_version, &resource.kind, &resource.name)
}

/// The table: one row per resource to delete, deferred, held or skipped; `wide` adds the kept
/// ones, and each resource's uid.
fn write_table(
    out: &mut impl Write,
    planned: &Planned,
    cfg: &SessionConfig,
    now: f64,
    wide: bool,
) -> std::io::Result<()> {
    let mut judged: Vec<_> = planned.plan.judged.iter().collect();
    judged.sort_by_key(|j| rank(&j.decision));
    let mut counts = [0usize; 5];
    let mut rows = Vec::new();
    for j in judged {
        let r = rank(&j.decision);
        counts[r] += 1;
        if r < 4 || wide {
            let res = &j.resource;
            rows.push([
                j.decision.name().to_owned(),
                res.kind.clone(),
                res.name.clone(),
                res.uid.clone(),
                res.session.clone().unwrap_or_default(),
                res.created.clone().unwrap_or_default(),
                reason(&j.decision),
            ]);
        }
    }
    if wide {
        write_columns(
            out,
            [
                "DECISION", "KIND", "NAME", "UID", "SESSION", "CREATED", "REASON",
            ],
            &rows,
        )?;
    } else {
        let rows: Vec<[String; 6]> = rows
            .into_iter()
            .map(|[d, k, n, _, s, c, r]| [d, k, n, s, c, r])
            .collect();
        write_columns(
            out,
            ["DECISION", "KIND", "NAME", "SESSION", "CREATED", "REASON"],
            &rows,
        )?;
    }
    // Spared resources are counted apart from the other skipped ones, when there are any.
    let spared = planned.plan.spared;
    let protected = planned
        .plan
        .judged
        .iter()
        .filter(|j| j.decision.spared() == Some(Spared::Protected))
        .count();
    let skipped = if spared > 0 {
        format!(
            "{} skipped, {protected} protected, {} excluded",
            counts[3] - spared,
            spared - protected
        )
    } else {
        format!("{} skipped", counts[3])
    };
    writeln!(
        out,
        "{} to delete, {} deferred, {} held, {skipped}, {} kept, of {} resources in namespace {} \
         at {} ({})",
        counts[0],
        counts[1],
        counts[2],
        counts[4],
        planned.plan.scanned,
        cfg.namespace,
        rfc3339(now),
        round_trips(planned.lookups)
    )
}
