//! `gc-cli run sessions`: plans under the run lock, then deletes, each delete fenced on uid and
//! resourceVersion (a dry run sends the same deletes in server-side dry run), and writes one
//! JSON audit line per resource judged.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use gc_core::collect_sessions::{self, AuditRecord, DeleteResult, SessionReport, Stop};
use gc_core::selector::Spared;
use gc_core::sessions::SessionConfig;
use serde::Serialize;

use crate::events::{EventArgs, Events};
use crate::exit::UsageError;
use crate::live;
use crate::metrics::{MetricsArgs, RunMetrics};
use crate::output::{FORMS, Output, escape, forms, rfc3339, write_columns, write_doc};
use crate::sessions::args::{
    SESSIONS_NAMESPACE, SessionArgs, Unconnected, configs, refused, try_connect, warn_missing,
};
use crate::sessions::plan::{kube_name, rank, reason, round_trips};
use crate::signals::{self, Stopped};

/// `gc-cli run sessions`
#[derive(Debug, Args)]
pub(crate) struct RunSessions {
    #[command(flatten)]
    args: SessionArgs,
    /// `server`: send every delete as a server-side dry run, to report what a run would
    /// delete; `none` (the default) deletes. A bare `--dry-run` is `server`.
    #[arg(
        long,
        value_name = "none|server",
        num_args = 0..=1,
        default_value = "none",
        default_missing_value = "server",
        value_parser = crate::dry_run::parse
    )]
    dry_run: bool,
    /// Append the audit lines to this file instead of writing them to stdout (to stderr when
    /// `-o` is given).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Print the run as `FORMAT` on stdout (`--format` is the older spelling): `table`/`wide` a
    /// row per resource judged with its result, `json`/`yaml` the audit records, `name` the
    /// resources deleted (or that would be). Without it, stdout carries the audit lines.
    #[arg(
        long = "output",
        short = 'o',
        alias = "format",
        value_name = "FORMAT",
        value_parser = forms(FORMS)
    )]
    output: Option<Output>,
    #[command(flatten)]
    lock: live::LockArgs,
    #[command(flatten)]
    pub(crate) metrics: MetricsArgs,
    #[command(flatten)]
    events: EventArgs,
}

/// The run lock of the session collector in its namespace (one per namespace, whatever the
/// cluster id).
pub(crate) const SESSIONS_LOCK: &str = "gc-sessions";

/// One kind's counts in a session run.
#[derive(Default)]
struct Counts {
    scanned: u64,
    orphaned: u64,
    held: u64,
    deferred: u64,
    deleted: u64,
}

/// Counts a session run by kind and decision.
fn record(metrics: &RunMetrics, report: &SessionReport) {
    use gc_core::sessions::SessionDecision as D;
    let mut kinds: std::collections::BTreeMap<&str, Counts> = std::collections::BTreeMap::new();
    for r in &report.records {
        let c = kinds.entry(r.judged.resource.kind.as_str()).or_default();
        c.scanned += 1;
        match &r.judged.decision {
            D::Held { .. } => {
                c.orphaned += 1;
                c.held += 1;
            }
            D::Deferred { .. } => {
                c.orphaned += 1;
                c.deferred += 1;
            }
            D::Delete { .. } => c.orphaned += 1,
            D::Kept { .. } | D::Skipped { .. } => {}
        }
        match &r.result {
            Some(DeleteResult::Deleted) => c.deleted += 1,
            Some(DeleteResult::Changed) => metrics.fence_lost("delete"),
            Some(DeleteResult::Failed(_)) => metrics.error("delete"),
            Some(DeleteResult::WouldDelete | DeleteResult::NotStarted(_)) | None => {}
        }
    }
    for (kind, c) in kinds {
        metrics.objects(kind, c.scanned, c.orphaned, c.held, c.deferred, c.deleted);
    }
}

/// One audit line: when, then the record.
#[derive(Serialize)]
struct AuditLine<'a> {
    time: &'a str,
    #[serde(flatten)]
    record: &'a AuditRecord,
}

/// The audit line of a run that deleted nothing because it was refused.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RefusedLine<'a> {
    time: &'a str,
    cluster: &'a str,
    namespace: &'a str,
    decision: &'static str,
    reason: String,
    dry_run: bool,
}

/// Where audit lines go: a file opened for appending, stdout, or stderr when stdout carries `-o`.
fn audit_sink(
    path: Option<&PathBuf>,
    output: Option<Output>,
) -> Result<Box<dyn Write>, UsageError> {
    Ok(match path {
        Some(path) => Box::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    UsageError::because(format!("cannot open --audit-log {}", path.display()), e)
                })?,
        ),
        None if output.is_some() => Box::new(std::io::stderr()),
        None => Box::new(std::io::stdout()),
    })
}

/// Writes each value as one JSON line, then flushes.
fn write_lines<T: Serialize>(sink: &mut dyn Write, lines: &[T]) -> anyhow::Result<()> {
    for line in lines {
        let mut text = serde_json::to_vec(line)?;
        text.push(b'\n');
        sink.write_all(&text)?;
    }
    sink.flush().context("cannot write the audit log")
}

/// The current time, as `--now` would give it.
fn now_of_clock() -> anyhow::Result<f64> {
    crate::clock::at(None)
}

/// The checks of `run sessions`' flags alone, which no later run could pass either (`serve`
/// makes them before its first run).
pub(crate) fn check(args: &RunSessions) -> anyhow::Result<()> {
    args.args.check()
}

pub(crate) fn run(args: &RunSessions) -> anyhow::Result<()> {
    check(args)?;
    let now = crate::clock::at(args.args.now.as_deref())?;
    // A future `--now` would treat young resources as past their grace period: a live run
    // accepts one only when the environment says this is a test.
    if !args.dry_run
        && now > now_of_clock()? + 60.0
        && std::env::var_os("GC_ALLOW_FUTURE_NOW").is_none()
    {
        return Err(UsageError::new(
            "--now is in the future: a live run would shorten the grace period (set GC_ALLOW_FUTURE_NOW=1 in tests)",
        )
        .into());
    }
    let mut sink = audit_sink(args.audit_log.as_ref(), args.output)?;
    let events = Events::new(&args.events, args.dry_run);
    live::block_on(async {
        let started = std::time::Instant::now();
        let (cluster, table) = match try_connect(&args.args).await {
            Ok(connected) => connected,
            Err(Unconnected { cluster, error }) => {
                return Err(failed_early(args, &events, cluster.as_ref(), started, error).await);
            }
        };
        let configs = match configs(&args.args, &cluster).await {
            Ok(configs) => configs,
            Err(error) => {
                table.close().await;
                return Err(failed_early(args, &events, Some(&cluster), started, error).await);
            }
        };
        let namespaces: Vec<String> = configs.iter().map(|c| c.namespace.clone()).collect();
        args.metrics.scope("sessions", &namespaces);
        let several = configs.len() > 1;
        let delivery = args.metrics.for_namespaces(configs.len());
        let (mut texts, mut failed) = (Vec::new(), Vec::new());
        let mut shown = Shown {
            output: args.output,
            // As the flags say (`-A` however many match), so that the output's shape is known.
            several: several
                || args
                    .args
                    .namespaces
                    .named(SESSIONS_NAMESPACE)
                    .is_none_or(|named| named.len() > 1),
            records: Vec::new(),
        };
        for cfg in &configs {
            let started = std::time::Instant::now();
            let metrics =
                RunMetrics::new(&args.metrics.metrics_prefix(), "sessions", &cfg.namespace);
            let run = Run {
                args,
                cluster: &cluster,
                table: &table,
                now,
                events: &events,
            };
            let result = run_once(&run, cfg, &metrics, &mut *sink, &mut shown).await;
            let elapsed = started.elapsed().as_secs_f64();
            match &result {
                Ok(summary) => {
                    metrics.finish(elapsed, now_of_clock().ok());
                    metrics.deliver(&delivery, None, summary);
                }
                Err(error) if signals::stopped(error) => {
                    metrics.stopped(elapsed);
                    metrics.deliver(&delivery, None, "");
                }
                Err(error) => metrics.fail("run", elapsed, &delivery, &format!("{error:#}")),
            }
            texts.push(metrics.text());
            if let Err(error) = result {
                failed.push((cfg.namespace.clone(), error));
            }
        }
        table.close().await;
        if several {
            args.metrics.write_merged(&texts);
        }
        shown.finish()?;
        crate::namespaces::outcome(configs.len(), failed)
    })
}

/// A run that failed before its namespaces' runs (the database, the cluster, the kubeconfig, the
/// list of namespaces): each namespace the flags name (with `-A`, each the cluster lists, when it
/// can be asked) gets a failed run's metrics and alert, and its Warning when the cluster is
/// connected; with none to name, the webhook is alerted once. The error, as it came.
async fn failed_early(
    args: &RunSessions,
    events: &Events,
    cluster: Option<&gc_k8s::KubeCluster>,
    started: std::time::Instant,
    error: anyhow::Error,
) -> anyhow::Error {
    let scope = &args.args.namespaces;
    let namespaces = match (scope.named(SESSIONS_NAMESPACE), cluster) {
        (Some(named), _) => named,
        (None, Some(cluster)) => scope
            .resolve(cluster, SESSIONS_NAMESPACE)
            .await
            .unwrap_or_default(),
        (None, None) => Vec::new(),
    };
    let why = format!("{error:#}");
    if namespaces.is_empty() {
        args.metrics.alert_unscoped("sessions", &why);
        return error;
    }
    let delivery = args.metrics.for_namespaces(namespaces.len());
    let mut texts = Vec::with_capacity(namespaces.len());
    for namespace in &namespaces {
        let metrics = RunMetrics::new(&args.metrics.metrics_prefix(), "sessions", namespace);
        metrics.fail("run", started.elapsed().as_secs_f64(), &delivery, &why);
        texts.push(metrics.text());
        if let Some(cluster) = cluster {
            events.run_failed(cluster, namespace, &error).await;
        }
    }
    if namespaces.len() > 1 {
        args.metrics.write_merged(&texts);
    }
    error
}

/// What `-o` prints of a run: each namespace's rows or names at once, the records of them all
/// as one document at the end.
struct Shown {
    output: Option<Output>,
    several: bool,
    records: Vec<serde_json::Value>,
}

impl Shown {
    fn add(
        &mut self,
        cfg: &SessionConfig,
        report: &SessionReport,
        time: &str,
    ) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        match self.output {
            None | Some(Output::Kestra) => {}
            Some(Output::Json | Output::Yaml) => {
                for record in &report.records {
                    self.records
                        .push(serde_json::to_value(AuditLine { time, record })?);
                }
            }
            Some(Output::Name) => {
                for r in &report.records {
                    if matches!(
                        r.result,
                        Some(DeleteResult::Deleted | DeleteResult::WouldDelete)
                    ) {
                        let res = &r.judged.resource;
                        writeln!(out, "{}", kube_name(cfg, &res.kind, &res.name))?;
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
                    write_columns(&mut out, header, &rows)?;
                } else {
                    let rows: Vec<[String; 5]> = rows
                        .into_iter()
                        .map(|[d, r, k, n, _, s, _]| [d, r, k, n, s])
                        .collect();
                    write_columns(
                        &mut out,
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
    fn refused(&mut self, line: &RefusedLine<'_>) -> anyhow::Result<()> {
        match self.output {
            Some(Output::Json | Output::Yaml) => self.records.push(serde_json::to_value(line)?),
            Some(Output::Table | Output::Wide) if self.several => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "namespace {}:", line.namespace)?;
                writeln!(out, "FAILED: {}", escape(&line.reason))?;
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        if let Some(output @ (Output::Json | Output::Yaml)) = self.output {
            write_doc(&mut std::io::stdout().lock(), &self.records, output)?;
        }
        Ok(())
    }
}

/// What the run in each namespace shares: the flags, the connections, the instant planned for
/// and the Kubernetes Events (off for a dry run).
struct Run<'a> {
    args: &'a RunSessions,
    cluster: &'a gc_k8s::KubeCluster,
    table: &'a gc_store::SessionTable,
    now: f64,
    events: &'a Events,
}

/// One namespace's run under its own lock, then its Events; the summary line on success.
async fn run_once(
    run: &Run<'_>,
    cfg: &SessionConfig,
    metrics: &RunMetrics,
    sink: &mut dyn Write,
    shown: &mut Shown,
) -> anyhow::Result<String> {
    let Run {
        args,
        cluster,
        table,
        now,
        events,
    } = *run;
    let time = rfc3339(now);
    let outcome = async {
        let lock = live::take_lock(
            cluster,
            &cfg.namespace,
            SESSIONS_LOCK,
            &args.lock,
            args.dry_run,
        )
        .await?;
        // A lost lock fails what is left; a signal leaves it not started.
        let stop = Stop {
            lock_lost: lock.halt(),
            stopping: lock.stop(),
        };
        let report = collect_sessions::run(cluster, table, cfg, now, args.dry_run, stop).await;
        // A run that lost its lock says so, and nothing else: what it did not finish is the
        // next run's.
        let lost = live::lost(&lock);
        live::release_lock(lock).await;
        match lost {
            Some(lost) => Err(lost),
            None => report.map_err(|e| refused(e, cfg, "nothing deleted")),
        }
    }
    .await;
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            if !signals::stopped(&error) && !live::lock_lost(&error) {
                events.run_failed(cluster, &cfg.namespace, &error).await;
            }
            // The audit log says why this run deleted nothing.
            let line = RefusedLine {
                time: &time,
                cluster: &cfg.cluster_id,
                namespace: &cfg.namespace,
                decision: "refused",
                reason: format!("{error:#}"),
                dry_run: args.dry_run,
            };
            write_lines(sink, &[&line])?;
            shown.refused(&line)?;
            return Err(error);
        }
    };
    events.sessions(cluster, cfg, &report).await;
    warn_missing(&report.missing_kinds, &cfg.namespace);
    record(metrics, &report);
    let lines: Vec<_> = report
        .records
        .iter()
        .map(|record| AuditLine {
            time: &time,
            record,
        })
        .collect();
    write_lines(sink, &lines)?;
    shown.add(cfg, &report, &time)?;
    let line = summary(&report, cfg, args.dry_run);
    tracing::info!("{line}");
    if report.failures > 0 {
        anyhow::bail!(
            "{} delete(s) failed; the next run tries them again",
            report.failures
        );
    }
    let not_started = report
        .records
        .iter()
        .filter(|r| matches!(r.result, Some(DeleteResult::NotStarted(_))))
        .count();
    if not_started > 0 {
        let signal = signals::received().unwrap_or("a signal");
        return Err(Stopped::new(format!(
            "stopped by {signal}: {not_started} delete(s) not started in namespace {}; the next \
             run judges them again",
            cfg.namespace
        ))
        .into());
    }
    Ok(line)
}

/// The run in one line: counts by decision and by result.
fn summary(report: &SessionReport, cfg: &SessionConfig, dry_run: bool) -> String {
    let mut counts = [0usize; 5];
    let (mut done, mut changed, mut protected, mut excluded) = (0, 0, 0, 0);
    for r in &report.records {
        counts[rank(&r.judged.decision)] += 1;
        match r.judged.decision.spared() {
            Some(Spared::Protected) => protected += 1,
            Some(Spared::Excluded) => excluded += 1,
            None => {}
        }
        match &r.result {
            Some(DeleteResult::Deleted | DeleteResult::WouldDelete) => done += 1,
            Some(DeleteResult::Changed) => changed += 1,
            _ => {}
        }
    }
    let verb = if dry_run {
        "would delete (dry run)"
    } else {
        "deleted"
    };
    // Spared resources are counted apart from the other skipped ones, when there are any.
    let skipped = if protected + excluded > 0 {
        format!(
            "{} skipped, {protected} protected, {excluded} excluded",
            counts[3] - protected - excluded
        )
    } else {
        format!("{} skipped", counts[3])
    };
    format!(
        "sessions in namespace {} of cluster {}: {} scanned, {done} {verb}, {changed} changed \
         since listed, {} failed, {} deferred, {} held, {skipped}, {} kept; {}",
        cfg.namespace,
        cfg.cluster_id,
        report.records.len(),
        report.failures,
        counts[1],
        counts[2],
        counts[4],
        round_trips(report.lookups)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gc_core::sessions::{Judged, Resource, SessionDecision};

    /// A Service due for deletion, and what its delete did.
    fn deleted(name: &str, result: DeleteResult) -> AuditRecord {
        AuditRecord {
            cluster: "primary".into(),
            namespace: "ns".into(),
            judged: Judged {
                resource: Resource {
                    kind: "Service".into(),
                    name: name.into(),
                    uid: format!("u-{name}"),
                    resource_version: "7".into(),
                    session: Some(name.into()),
                    created: None,
                    deleting: false,
                },
                decision: SessionDecision::Delete {
                    reason: format!("no session {name} in the database"),
                },
            },
            result: Some(result),
            dry_run: false,
        }
    }

    #[test]
    fn a_run_counts_deletes_lost_fences_and_failures_but_not_what_it_did_not_start() {
        let report = SessionReport {
            records: vec![
                deleted("a", DeleteResult::Deleted),
                deleted("b", DeleteResult::Changed),
                deleted("c", DeleteResult::Changed),
                deleted("d", DeleteResult::Failed("503".into())),
                deleted("e", DeleteResult::NotStarted("stopping".into())),
            ],
            missing_kinds: Vec::new(),
            lookups: 1,
            failures: 1,
        };
        let metrics = RunMetrics::new("gc", "sessions", "ns");
        record(&metrics, &report);
        metrics.finish(1.0, None);
        let text = metrics.text();
        let run = r#"collector="sessions",namespace="ns""#;
        let service = r#"collector="sessions",kind="Service",namespace="ns""#;
        for (name, labels, value) in [
            (
                "gc_last_run_fences_lost",
                format!(r#"{run},stage="delete""#),
                2,
            ),
            ("gc_last_run_errors", format!(r#"{run},stage="delete""#), 1),
            ("gc_last_run_objects_deleted", service.to_owned(), 1),
            ("gc_last_run_objects_eligible", service.to_owned(), 5),
        ] {
            let line = format!("{name}{{{labels}}} {value}\n");
            assert!(text.contains(&line), "{line}: {text}");
        }
    }
}
