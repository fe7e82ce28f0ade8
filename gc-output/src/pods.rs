//! The failed-Pod collector's plans and runs: a table for people, JSON or YAML for machines,
//! `pod/NAME` lines, and the Kestra flow's output line.

use std::io::Write;

use gc_core::PodConfig;
use gc_core::pods::plan::{Decision, PodPlan};
use gc_core::pyjson::{self, Layout};
use gc_core::selector::Spared;
use serde::Serialize;

use gc_core::pods::apply::{Step, TargetOutcome};
use gc_runtime::NamespaceRun;
use gc_runtime::pods::Report;

use crate::{Output, escape, rfc3339, times_as_rfc3339, write_columns, write_doc, write_timed_doc};

/// Where a plan's document has times (seconds since the epoch in the plan, the ledger and the
/// Kestra line), which JSON and YAML show as RFC 3339.
pub const PLAN_TIMES: &[&str] = &[
    "now",
    "decisions/*/anchor",
    "decisions/*/until",
    "targets/*/first",
    "targets/*/end",
    "ledger/*/first",
];

/// A plan as JSON and YAML show it: the settings, the plan, the count of targets.
#[derive(Serialize)]
pub struct PlanDoc<'a> {
    config: &'a PodConfig,
    #[serde(flatten)]
    plan: &'a PodPlan,
    #[serde(rename = "targetCount")]
    target_count: usize,
}

impl<'a> PlanDoc<'a> {
    /// The document of `plan`, made under `cfg`.
    #[must_use]
    pub fn new(plan: &'a PodPlan, cfg: &'a PodConfig) -> Self {
        Self {
            config: cfg,
            plan,
            target_count: plan.targets.len(),
        }
    }
}

/// Writes `plan` as `output` says.
pub fn write_plan(
    out: &mut impl Write,
    plan: &PodPlan,
    cfg: &PodConfig,
    output: Output,
) -> anyhow::Result<()> {
    match output {
        Output::Table => write_table(out, plan, cfg, false)?,
        Output::Wide => write_table(out, plan, cfg, true)?,
        Output::Json | Output::Yaml => {
            write_timed_doc(out, &PlanDoc::new(plan, cfg), PLAN_TIMES, output)?;
        }
        Output::Name => write_names(out, plan)?,
        Output::Kestra => writeln!(out, "{}", kestra_line(plan))?,
    }
    Ok(())
}

/// `pod/NAME` of each target.
pub fn write_names(out: &mut impl Write, plan: &PodPlan) -> std::io::Result<()> {
    for t in &plan.targets {
        let name = t
            .name
            .as_str()
            .map_or_else(|| t.name.to_string(), str::to_owned);
        writeln!(out, "pod/{}", escape(&name))?;
    }
    Ok(())
}

/// The protected and the excluded Pods of `plan`.
fn spared(plan: &PodPlan) -> (usize, usize) {
    let count = |which| {
        plan.decisions
            .iter()
            .filter(|d| d.decision.spared() == Some(which))
            .count()
    };
    (count(Spared::Protected), count(Spared::Excluded))
}

/// `::{"outputs":{...}}::` with the keys and value shapes of the reference flow's plan task,
/// written as its `json.dumps(..., separators=(',', ':'))` writes them. When the plan spares a
/// Pod, `"protected":N,"excluded":N` follow `deferred` (the flow reads neither; without them the
/// line is the flow's byte for byte).
pub fn kestra_line(plan: &PodPlan) -> String {
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
        "],\"target_count\":{},\"held\":{},\"deferred\":{},",
        plan.targets.len(),
        plan.held,
        plan.deferred
    ));
    let (protected, excluded) = spared(plan);
    if protected + excluded > 0 {
        s.push_str(&format!(
            "\"protected\":{protected},\"excluded\":{excluded},"
        ));
    }
    s.push_str("\"state\":");
    pyjson::write_str(&mut s, &plan.ledger.to_json());
    s.push_str("}}::");
    s
}

/// A plan decision's state and reason, as the plan's table shows them (`held`, `held until
/// 2026-12-06T10:00:00Z`).
#[must_use]
pub fn decision_cells(decision: &Decision, cfg: &PodConfig) -> (&'static str, String) {
    match decision {
        Decision::NotEligible { reason } => ("not eligible", reason.to_string()),
        Decision::Targeted { .. } => (
            "targeted",
            format!("retention of {}s passed", cfg.retention_seconds),
        ),
        Decision::Held { until, .. } => ("held", format!("held until {}", rfc3339(*until))),
        Decision::Deferred { .. } => (
            "deferred",
            format!("deferred by the cap (max_pods {})", cfg.max_pods),
        ),
        Decision::Protected { .. } => ("protected", format!("label {}", cfg.protect_label)),
        Decision::Excluded { .. } => (
            "excluded",
            format!(
                "matches --exclude-selector {}",
                cfg.exclude_selector
                    .as_ref()
                    .map_or_else(String::new, ToString::to_string)
            ),
        ),
    }
}

/// The table: one row per targeted, held, deferred, protected or excluded Pod; `wide` adds
/// the not-eligible Pods with their reasons, and each target's resourceVersion and archive size.
fn write_table(
    out: &mut impl Write,
    plan: &PodPlan,
    cfg: &PodConfig,
    wide: bool,
) -> std::io::Result<()> {
    let mut rows = Vec::new();
    let mut not_eligible = 0;
    for d in &plan.decisions {
        let (basis, anchor) = match &d.decision {
            Decision::NotEligible { .. } => {
                not_eligible += 1;
                if wide {
                    let name = d.name.clone().unwrap_or_default();
                    let uid = d.uid.clone().unwrap_or_default();
                    let (state, reason) = decision_cells(&d.decision, cfg);
                    rows.push([
                        state.to_owned(),
                        name,
                        uid,
                        String::new(),
                        String::new(),
                        reason,
                    ]);
                }
                continue;
            }
            Decision::Targeted { basis, anchor }
            | Decision::Held { basis, anchor, .. }
            | Decision::Deferred { basis, anchor }
            | Decision::Protected { basis, anchor }
            | Decision::Excluded { basis, anchor } => (basis, anchor),
        };
        let (state, reason) = decision_cells(&d.decision, cfg);
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
    if wide {
        let widened: Vec<[String; 8]> = rows
            .into_iter()
            .map(|[state, name, uid, basis, anchor, reason]| {
                let target = plan
                    .targets
                    .iter()
                    .find(|t| t.uid == uid && state == "targeted");
                let (version, bytes) = target.map_or_else(Default::default, |t| {
                    (t.resource_version.clone(), t.archive_bytes.to_string())
                });
                [state, name, uid, basis, anchor, version, bytes, reason]
            })
            .collect();
        write_columns(
            out,
            [
                "STATE",
                "NAME",
                "UID",
                "BASIS",
                "ANCHOR",
                "RESOURCEVERSION",
                "ARCHIVE-BYTES",
                "REASON",
            ],
            &widened,
        )?;
    } else {
        write_columns(
            out,
            ["STATE", "NAME", "UID", "BASIS", "ANCHOR", "REASON"],
            &rows,
        )?;
    }
    let (protected, excluded) = spared(plan);
    let spared = if protected + excluded > 0 {
        format!("{protected} protected, {excluded} excluded, ")
    } else {
        String::new()
    };
    writeln!(
        out,
        "{} targeted, {} held, {} deferred, {spared}{} not eligible, of {} pods in namespace {} at {}",
        plan.targets.len(),
        plan.held,
        plan.deferred,
        not_eligible,
        plan.decisions.len(),
        cfg.namespace,
        rfc3339(plan.now)
    )
}

/// Several namespaces' plans: each under a `namespace NS:` line in a table, one list of the
/// one-namespace documents in JSON or YAML, every target's name with `name`.
pub fn write_plans(
    out: &mut impl Write,
    plans: &[(PodConfig, PodPlan)],
    format: Output,
) -> anyhow::Result<()> {
    match format {
        Output::Table | Output::Wide | Output::Kestra => {
            for (cfg, plan) in plans {
                writeln!(out, "namespace {}:", cfg.namespace)?;
                write_plan(out, plan, cfg, format)?;
            }
        }
        Output::Name => {
            for (_, plan) in plans {
                write_names(out, plan)?;
            }
        }
        Output::Json | Output::Yaml => {
            let docs = plans
                .iter()
                .map(|(c, p)| times_as_rfc3339(&PlanDoc::new(p, c), PLAN_TIMES))
                .collect::<anyhow::Result<Vec<_>>>()?;
            write_doc(out, &docs, format)?;
        }
    }
    Ok(())
}

/// What an apply of a plan whose every target is gone says (`None`: a target was left): the
/// plan was applied before, or its Pods were deleted since. Nothing was done; the exit code stays
/// 0, as a second `kubectl apply` of the same manifest says `unchanged`.
#[must_use]
pub fn nothing_left(r: &Report) -> Option<String> {
    let gone = |t: &gc_core::pods::apply::TargetResult| match &t.outcome {
        TargetOutcome::Skipped { step, reason } => *step == Step::Reread && reason == POD_GONE,
        _ => false,
    };
    (!r.results.is_empty() && r.results.iter().all(gone)).then(|| {
        let all = match r.results.len() {
            1 => "its one target is".to_owned(),
            n => format!("all {n} of its targets are"),
        };
        format!("the plan was applied already: {all} gone (or were deleted since); nothing to do")
    })
}

/// The reason a target is skipped when its Pod is not found.
const POD_GONE: &str = "the Pod is gone";

/// A target's result and what it says, as the table shows them.
#[must_use]
pub fn result_cells(outcome: &TargetOutcome) -> (&'static str, String) {
    match outcome {
        TargetOutcome::Collected { uri, sha256, .. } => {
            ("collected", format!("archive {uri} sha256 {sha256}"))
        }
        TargetOutcome::WouldCollect { sha256, bytes } => (
            "would collect",
            format!("archive of {bytes} bytes, sha256 {sha256}"),
        ),
        TargetOutcome::Skipped { step, reason } => ("skipped", format!("at {step:?}: {reason}")),
        TargetOutcome::Changed { step, message } => {
            ("changed", format!("at {step:?} (fence held): {message}"))
        }
        TargetOutcome::TooLarge { bytes, max } => (
            "too large",
            format!("archive of {bytes} bytes over max_archive_bytes {max}; pin released"),
        ),
        TargetOutcome::Released { reason } => ("released", reason.clone()),
        TargetOutcome::NotStarted { reason } => ("not started", reason.clone()),
        TargetOutcome::Failed { step, error } => ("FAILED", format!("at {step:?}: {error}")),
    }
}

/// Writes a run's report: a row per target under a header (table and wide alike) and the
/// summary line, then what [`nothing_left`] says when it does; the document (JSON, YAML; what
/// [`nothing_left`] says as a warning on stderr); or `pod/NAME` of each Pod collected or that
/// would be (name).
///
/// # Errors
/// When `out` cannot be written.
pub fn write_report(out: &mut impl Write, r: &Report, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Table | Output::Wide => {}
        Output::Name => {
            for t in r.recovered.iter().chain(&r.results) {
                if matches!(
                    t.outcome,
                    TargetOutcome::Collected { .. } | TargetOutcome::WouldCollect { .. }
                ) {
                    writeln!(out, "pod/{}", escape(&t.name))?;
                }
            }
            return Ok(());
        }
        _ => {
            if let Some(note) = nothing_left(r) {
                tracing::warn!("{note}");
            }
            return write_doc(out, r, output);
        }
    }
    let rows: Vec<[String; 4]> = r
        .recovered
        .iter()
        .chain(&r.results)
        .map(|t| {
            let (result, detail) = result_cells(&t.outcome);
            [t.name.clone(), t.uid.clone(), result.to_owned(), detail]
        })
        .collect();
    write_columns(out, ["NAME", "UID", "RESULT", "DETAIL"], &rows)?;
    writeln!(out, "{}", r.summary())?;
    if let Some(note) = nothing_left(r) {
        writeln!(out, "{note}")?;
    }
    Ok(())
}

/// The runs of several namespaces: each report under a `namespace NS:` line in a table (a failed
/// namespace's error as `FAILED: ...`), every collected Pod's name with `name`, and one list of
/// `{namespace, report | error}` in JSON or YAML.
pub fn write_runs(
    out: &mut impl Write,
    runs: &[NamespaceRun<Report>],
    output: Output,
) -> anyhow::Result<()> {
    if matches!(output, Output::Table | Output::Wide | Output::Name) {
        for run in runs {
            if output != Output::Name {
                writeln!(out, "namespace {}:", run.namespace)?;
            }
            match (&run.report, &run.failure) {
                (Some(report), _) => write_report(out, report, output)?,
                (None, Some(failure)) if output != Output::Name => {
                    writeln!(out, "FAILED: {:#}", failure.error)?;
                }
                _ => {}
            }
        }
        return Ok(());
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        namespace: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        report: Option<&'a Report>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    }
    for run in runs {
        if let Some(note) = run.report.as_ref().and_then(nothing_left) {
            tracing::warn!("namespace {}: {note}", run.namespace);
        }
    }
    let docs: Vec<Doc> = runs
        .iter()
        .map(|r| Doc {
            namespace: &r.namespace,
            report: r.report.as_ref(),
            error: r.failure.as_ref().map(|f| format!("{:#}", f.error)),
        })
        .collect();
    write_doc(out, &docs, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gc_core::pods::apply::TargetResult;

    fn report(outcomes: Vec<TargetOutcome>) -> Report {
        let results = outcomes
            .into_iter()
            .enumerate()
            .map(|(i, outcome)| TargetResult {
                name: format!("failed-{i}"),
                uid: format!("uid-{i}"),
                outcome,
            })
            .collect();
        Report {
            dry_run: false,
            recovered: Vec::new(),
            results,
            pins_left: Vec::new(),
            unusable: None,
        }
    }

    fn table(r: &Report) -> String {
        let mut out = Vec::new();
        write_report(&mut out, r, Output::Table).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn gone() -> TargetOutcome {
        TargetOutcome::Skipped {
            step: Step::Reread,
            reason: POD_GONE.into(),
        }
    }

    #[test]
    fn an_apply_table_has_a_header() {
        let collected = TargetOutcome::Collected {
            uri: "file:///a/1.json".into(),
            sha256: "ab12".into(),
            bytes: 7,
        };
        let r = report(vec![collected, gone()]);
        assert_eq!(
            table(&r),
            "NAME      UID    RESULT     DETAIL\n\
             failed-0  uid-0  collected  archive file:///a/1.json sha256 ab12\n\
             failed-1  uid-1  skipped    at Reread: the Pod is gone\n\
             1 of 2 targets collected, 0 pins recovered\n"
        );
        assert_eq!(nothing_left(&r), None);
    }

    #[test]
    fn a_plan_applied_already_is_said_to_be() {
        let r = report(vec![gone(), gone()]);
        let text = table(&r);
        assert!(
            text.ends_with(
                "0 of 2 targets collected, 0 pins recovered\nthe plan was applied already: \
                 all 2 of its targets are gone (or were deleted since); nothing to do\n"
            ),
            "{text}"
        );
        // Nothing to apply is not an apply already made.
        assert_eq!(nothing_left(&report(Vec::new())), None);
        let other = TargetOutcome::Skipped {
            step: Step::Reread,
            reason: "no longer Failed".into(),
        };
        assert_eq!(nothing_left(&report(vec![gone(), other])), None);
    }
}
