//! Plans as text: a table for people, JSON for machines, and the Kestra flow's output line.

use std::io::Write;

use gc_core::PodConfig;
use gc_core::plan::{Decision, PodPlan};
use gc_core::pyjson::{self, Layout};
use serde::Serialize;

use crate::cli::Format;

/// Writes `plan` in `format`.
pub(crate) fn write_plan(
    out: &mut impl Write,
    plan: &PodPlan,
    cfg: &PodConfig,
    format: Format,
) -> std::io::Result<()> {
    match format {
        Format::Table => write_table(out, plan, cfg),
        Format::Json => {
            #[derive(Serialize)]
            struct Doc<'a> {
                config: &'a PodConfig,
                #[serde(flatten)]
                plan: &'a PodPlan,
                #[serde(rename = "targetCount")]
                target_count: usize,
            }
            let doc = Doc {
                config: cfg,
                plan,
                target_count: plan.targets.len(),
            };
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)
        }
        Format::Kestra => writeln!(out, "{}", kestra_line(plan)),
    }
}

/// `::{"outputs":{...}}::` with the keys and value shapes of the reference flow's plan task,
/// written as its `json.dumps(..., separators=(',', ':'))` writes them.
pub(crate) fn kestra_line(plan: &PodPlan) -> String {
    let mut s = String::from("::{\"outputs\":{\"targets\":[");
    for (i, t) in plan.targets.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"name\":");
        pyjson::write_value(&mut s, &t.name, Layout::Compact);
        s.push_str(",\"uid\":");
        pyjson::write_str(&mut s, &t.uid);
        s.push_str(",\"first\":");
        t.first.write(&mut s);
        s.push_str(",\"basis\":");
        pyjson::write_str(&mut s, t.basis.as_str());
        s.push_str(",\"end\":");
        t.end.write(&mut s);
        s.push('}');
    }
    s.push_str(&format!(
        "],\"target_count\":{},\"held\":{},\"deferred\":{},\"state\":",
        plan.targets.len(),
        plan.held,
        plan.deferred
    ));
    pyjson::write_str(&mut s, &plan.ledger.to_json());
    s.push_str("}}::");
    s
}

/// An instant in seconds as RFC 3339 (UTC, whole seconds).
pub(crate) fn rfc3339(seconds: f64) -> String {
    #[allow(clippy::cast_possible_truncation)]
    let whole = seconds.floor() as i64;
    time::OffsetDateTime::from_unix_timestamp(whole)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{seconds}"))
}

/// Writes `rows` under `header` in aligned columns; nothing when there is no row.
pub(crate) fn write_columns<const N: usize>(
    out: &mut impl Write,
    header: [&str; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let header = header.map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

fn write_table(out: &mut impl Write, plan: &PodPlan, cfg: &PodConfig) -> std::io::Result<()> {
    let mut rows = Vec::new();
    let mut not_eligible = 0;
    for d in &plan.decisions {
        let (state, basis, anchor, reason) = match &d.decision {
            Decision::NotEligible { .. } => {
                not_eligible += 1;
                continue;
            }
            Decision::Targeted { basis, anchor } => (
                "targeted",
                basis,
                anchor,
                format!("retention of {}s passed", cfg.retention_seconds),
            ),
            Decision::Held {
                basis,
                anchor,
                until,
            } => (
                "held",
                basis,
                anchor,
                format!("held until {}", rfc3339(*until)),
            ),
            Decision::Deferred { basis, anchor } => (
                "deferred",
                basis,
                anchor,
                format!("deferred by the cap (max_pods {})", cfg.max_pods),
            ),
        };
        let name = d.name.clone().unwrap_or_default();
        let uid = d.uid.clone().unwrap_or_default();
        rows.push([
            state.to_owned(),
            name,
            uid,
            basis.as_str().to_owned(),
            rfc3339(anchor.seconds()),
            reason,
        ]);
    }
    write_columns(
        out,
        ["STATE", "NAME", "UID", "BASIS", "ANCHOR", "REASON"],
        &rows,
    )?;
    writeln!(
        out,
        "{} targeted, {} held, {} deferred, {} not eligible, of {} pods in namespace {} at {}",
        plan.targets.len(),
        plan.held,
        plan.deferred,
        not_eligible,
        plan.decisions.len(),
        cfg.namespace,
        rfc3339(plan.now)
    )
}
