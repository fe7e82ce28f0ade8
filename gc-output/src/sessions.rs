//! The orphaned-session collector's plans and runs (a row per resource judged, the names of those
//! deleted, the documents), and its restores.

use std::io::Write;

use gc_core::selector::Spared;
use gc_core::sessions::run::{DeleteResult, Planned, SessionReport};
use gc_core::sessions::{SessionConfig, SessionDecision};
use gc_runtime::audit::{AuditLine, RefusedLine};
use gc_runtime::restore::Restored;
use gc_runtime::sessions::{rank, round_trips};
use serde::Serialize;

use crate::{Output, escape, object_name, rfc3339, times_as_rfc3339, write_columns, write_doc};

/// Where a session plan's document has times other than `now` (which it writes as RFC 3339).
const PLAN_TIMES: &[&str] = &["judged/*/until"];

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

/// The plans of `plans`, planned at `now`, as `output` says: each namespace's table (under a
/// `namespace NS:` line when `several`) or names; in JSON or YAML the one namespace's document,
/// or a list of them when `several`.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_plans(
    out: &mut impl Write,
    plans: &[(SessionConfig, Planned)],
    now: f64,
    several: bool,
    output: Output,
) -> anyhow::Result<()> {
    for (cfg, planned) in plans {
        match output {
            Output::Table | Output::Wide => {
                if several {
                    writeln!(out, "namespace {}:", cfg.namespace)?;
                }
                write_table(out, planned, cfg, now, output == Output::Wide)?;
            }
            Output::Name => write_names(out, planned)?,
            _ => {}
        }
    }
    if matches!(output, Output::Json | Output::Yaml) {
        write_doc(out, &plans_doc(plans, now, several)?, output)?;
    }
    Ok(())
}

/// The plans as the JSON file `plan sessions --out` writes: as [`write_plans`] writes them.
///
/// # Errors
/// Never in practice: the documents are plain data.
pub fn plans_json(
    plans: &[(SessionConfig, Planned)],
    now: f64,
    several: bool,
) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&plans_doc(
        plans, now, several,
    )?)?)
}

/// The document of the plans: the one namespace's, or the list of them when `several`; its
/// times as RFC 3339.
fn plans_doc(
    plans: &[(SessionConfig, Planned)],
    now: f64,
    several: bool,
) -> anyhow::Result<serde_norway::Value> {
    let mut docs = plans
        .iter()
        .map(|(config, planned)| {
            let doc = PlanDoc {
                config,
                now: rfc3339(now),
                planned,
                delete_count: planned.plan.deletes().count(),
            };
            times_as_rfc3339(&doc, PLAN_TIMES)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(match docs.pop() {
        Some(one) if docs.is_empty() && !several => one,
        last => serde_norway::Value::Sequence(docs.into_iter().chain(last).collect()),
    })
}

/// Why a resource was judged so (a hold says until when).
#[must_use]
pub fn reason(d: &SessionDecision) -> String {
    match d {
        SessionDecision::Held { reason, until } if until.is_finite() => {
            format!("{reason}; held until {}", rfc3339(*until))
        }
        other => other.reason().to_owned(),
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
pub fn kube_name(resource: &gc_core::sessions::Resource) -> String {
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
    let mut counts: gc_runtime::sessions::Ranked = [0; 6];
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
        "{} to delete, {} deferred, {} held, {skipped}, {} kept{}, of {} resources in namespace {} \
         at {} ({})",
        counts[0],
        counts[1],
        counts[2],
        counts[4],
        gc_runtime::sessions::unrequested_words(&counts),
        planned.plan.scanned,
        cfg.namespace,
        rfc3339(now),
        round_trips(planned.lookups)
    )
}

/// A session run's audit lines, then what `-o` shows of them on stdout (`gc-cli run sessions`).
pub struct Audited {
    /// Where the audit lines go.
    pub log: gc_runtime::audit::AuditLog<Box<dyn Write + Send>>,
    /// What `-o` shows.
    pub shown: Shown,
}

impl gc_runtime::audit::Audit for Audited {
    fn judged(
        &mut self,
        cfg: &SessionConfig,
        report: &SessionReport,
        time: &str,
    ) -> gc_runtime::Result<()> {
        self.log.judged(cfg, report, time)?;
        let mut out = std::io::stdout().lock();
        (self.shown.add(&mut out, cfg, report, time)).map_err(gc_runtime::Error::other)
    }
    fn refused(&mut self, line: &RefusedLine<'_>) -> gc_runtime::Result<()> {
        self.log.refused(line)?;
        let refused = self.shown.refused(&mut std::io::stdout().lock(), line);
        refused.map_err(gc_runtime::Error::other)
    }
}

/// What `-o` prints of a session run (`None`: nothing, the audit lines say it all): each
/// namespace's rows or names as soon as it is judged, the records of them all as one document at
/// the end ([`Shown::finish`]).
#[derive(Debug)]
pub struct Shown {
    output: Option<Output>,
    several: bool,
    records: Vec<serde_norway::Value>,
}

impl Shown {
    /// Shows a run as `output` says; `several`: the flags name several namespaces (or `-A`),
    /// each table then under a `namespace NS:` line.
    #[must_use]
    pub fn new(output: Option<Output>, several: bool) -> Self {
        Self {
            output,
            several,
            records: Vec::new(),
        }
    }

    /// A namespace's run, judged at `time` (its rows or names now, its records kept).
    ///
    /// # Errors
    /// When `out` cannot be written.
    pub fn add(
        &mut self,
        out: &mut impl Write,
        cfg: &SessionConfig,
        report: &SessionReport,
        time: &str,
    ) -> anyhow::Result<()> {
        match self.output {
            None | Some(Output::Kestra) => {}
            Some(Output::Json | Output::Yaml) => {
                for record in &report.records {
                    let requested_by = gc_runtime::audit::requested_by(cfg);
                    let line = AuditLine {
                        time,
                        record,
                        requested_by,
                    };
                    self.records.push(times_as_rfc3339(&line, &["until"])?);
                }
            }
            Some(Output::Name) => {
                for r in &report.records {
                    if matches!(
                        r.result,
                        Some(DeleteResult::Deleted | DeleteResult::WouldDelete)
                    ) {
                        let res = &r.judged.resource;
                        writeln!(out, "{}", kube_name(res))?;
                    }
                }
            }
            Some(table) => {
                if self.several {
                    writeln!(out, "namespace {}:", cfg.namespace)?;
                }
                let wide = table == Output::Wide;
                let mut records: Vec<_> = report
                    .records
                    .iter()
                    .filter(|r| wide || rank(&r.judged.decision) < 4)
                    .collect();
                records.sort_by_key(|r| rank(&r.judged.decision));
                let rows: Vec<[String; 7]> = records
                    .iter()
                    .map(|r| {
                        let res = &r.judged.resource;
                        [
                            r.judged.decision.name().to_owned(),
                            r.result
                                .as_ref()
                                .map(ToString::to_string)
                                .unwrap_or_default(),
                            res.kind.clone(),
                            res.name.clone(),
                            res.uid.clone(),
                            res.session.clone().unwrap_or_default(),
                            reason(&r.judged.decision),
                        ]
                    })
                    .collect();
                if wide {
                    let header = [
                        "DECISION", "RESULT", "KIND", "NAME", "UID", "SESSION", "REASON",
                    ];
                    write_columns(out, header, &rows)?;
                } else {
                    let rows: Vec<[String; 5]> = rows
                        .into_iter()
                        .map(|[d, r, k, n, _, s, _]| [d, r, k, n, s])
                        .collect();
                    write_columns(
                        out,
                        ["DECISION", "RESULT", "KIND", "NAME", "SESSION"],
                        &rows,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// A namespace whose run failed: its refusal line in the document (so that each namespace
    /// is in it), its error under its name in a table of several.
    ///
    /// # Errors
    /// When `out` cannot be written.
    pub fn refused(&mut self, out: &mut impl Write, line: &RefusedLine<'_>) -> anyhow::Result<()> {
        match self.output {
            Some(Output::Json | Output::Yaml) => self.records.push(serde_norway::to_value(line)?),
            Some(Output::Table | Output::Wide) if self.several => {
                writeln!(out, "namespace {}:", line.namespace)?;
                writeln!(out, "FAILED: {}", escape(&line.reason))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The end of the run: the document of every record, in JSON or YAML.
    ///
    /// # Errors
    /// When `out` cannot be written.
    pub fn finish(self, out: &mut impl Write) -> anyhow::Result<()> {
        if let Some(output @ (Output::Json | Output::Yaml)) = self.output {
            write_doc(out, &self.records, output)?;
        }
        Ok(())
    }
}

/// What a restore did, as `output` says: a row per object (`wide` adds its uid), the names of
/// those created (or that would be), or the document.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_restored(
    out: &mut impl Write,
    restored: &[Restored],
    output: Output,
) -> anyhow::Result<()> {
    // The library's words, its options shown as flags.
    let shown = |mut r: Restored| {
        r.result = r.result.reworded(crate::options::shown);
        r.note = r.note.as_deref().map(crate::options::shown);
        r
    };
    let restored: Vec<Restored> = restored.iter().cloned().map(shown).collect();
    match output {
        Output::Json | Output::Yaml => write_doc(out, &restored, output)?,
        Output::Name => {
            let created = |r: &&Restored| r.result.created();
            for r in restored.iter().filter(created) {
                writeln!(out, "{}", object_name(&r.api_version, &r.kind, &r.name))?;
            }
        }
        Output::Table | Output::Wide | Output::Kestra => {
            let rows: Vec<[String; 6]> = restored
                .iter()
                .map(|r| {
                    let uid = r.uid.clone().unwrap_or_default();
                    let note = r.note.clone().unwrap_or_default();
                    [
                        r.session.clone(),
                        r.kind.clone(),
                        r.name.clone(),
                        r.result.to_string(),
                        uid,
                        note,
                    ]
                })
                .collect();
            let header = ["SESSION", "KIND", "NAME", "RESULT", "UID", "NOTE"];
            if output == Output::Wide {
                write_columns(out, header, &rows)?;
            } else {
                let rows: Vec<[String; 5]> = rows
                    .into_iter()
                    .map(|[s, k, n, r, _, note]| [s, k, n, r, note])
                    .collect();
                write_columns(out, ["SESSION", "KIND", "NAME", "RESULT", "NOTE"], &rows)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gc_core::sessions::{Judged, Resource, SessionInputs, SessionPlan};

    fn held(name: &str, until: f64) -> Judged {
        Judged {
            resource: Resource {
                api_version: "stream.space/v1alpha1".into(),
                kind: "Session".into(),
                name: name.into(),
                uid: format!("uid-{name}"),
                resource_version: "1".into(),
                session: Some(name.into()),
                created: Some("2026-11-29T11:00:00Z".into()),
                deleting: false,
            },
            decision: SessionDecision::Held {
                reason: "orphan in its grace period".into(),
                until,
            },
        }
    }

    #[test]
    fn a_plan_shows_its_times_as_rfc3339() {
        let cfg = SessionInputs::default().validate().unwrap();
        let planned = Planned {
            owners: Default::default(),
            plan: SessionPlan {
                judged: vec![held("a", 1_795_957_200.5), held("b", f64::INFINITY)],
                scanned: 2,
                orphans: 2,
                spared: 0,
                unknown_states: Default::default(),
            },
            missing_kinds: Vec::new(),
            lookups: 1,
        };
        let plans = [(cfg, planned)];
        let json: serde_json::Value =
            serde_json::from_str(&plans_json(&plans, 1_795_953_600.0, false).unwrap()).unwrap();
        assert_eq!(json["now"], "2026-11-29T12:00:00Z");
        assert_eq!(json["judged"][0]["until"], "2026-11-29T13:00:00.5Z");
        // A hold without end stays without one.
        assert_eq!(json["judged"][1]["until"], serde_json::Value::Null);
        let mut yaml = Vec::new();
        write_plans(&mut yaml, &plans, 1_795_953_600.0, false, Output::Yaml).unwrap();
        let yaml = String::from_utf8(yaml).unwrap();
        assert!(yaml.contains("until: 2026-11-29T13:00:00.5Z"), "{yaml}");
        let back: serde_json::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(back["judged"][0], json["judged"][0]);
    }
}
