//! `gc-cli plan sessions` and `gc-cli run sessions`: the orphaned-session collector against a
//! live cluster and the application's session database.
//!
//! `plan` scans, looks the ids up and plans, and writes nothing anywhere but its output. `run`
//! does the same under the run lock and then deletes, each delete fenced on uid and
//! resourceVersion (a dry run sends the same deletes in server-side dry run), and writes one
//! JSON audit line per resource judged. Any doubt before the first delete (the cluster or the
//! database unreachable, a table that holds none of the scanned ids, the mass-deletion guard)
//! deletes nothing and exits non-zero.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use gc_core::collect_sessions::{self, AuditRecord, Planned, SessionReport, SessionRunError};
use gc_core::sessions::{Kind, SessionConfig, SessionDecision, SessionInputs};
use gc_k8s::KubeCluster;
use gc_store::{SessionTable, TableSpec};
use serde::Serialize;

use crate::Failure;
use crate::files::write_file;
use crate::live::{self, ConnectArgs};
use crate::output::rfc3339;
use crate::plan_pods::now;

/// The environment variable that may hold the session database's URL.
const DATABASE_URL_ENV: &str = "GC_SESSION_DATABASE_URL";

/// What the session collector scans and how it judges, with StreamSpace's defaults.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// Identifies the cluster in audit records and the run lock's name.
    #[arg(long, default_value = "primary", value_name = "ID")]
    cluster_id: String,
    /// The one namespace scanned.
    #[arg(long, short = 'n', default_value = "streamspace")]
    namespace: String,
    /// Label selector choosing session resources (`key=value` terms, comma separated).
    #[arg(long, short = 'l', default_value = "app=streamspace-session")]
    selector: String,
    /// Label holding the session id. Ids match the id column exactly: case-sensitive, byte for
    /// byte, as PostgreSQL compares them (no trimming, no case folding).
    #[arg(long, default_value = "session", value_name = "KEY")]
    id_label: String,
    /// Kinds scanned, comma separated or repeated: `Deployment`, `Service`,
    /// `PersistentVolumeClaim` (`pvc`), `Session`, or `group/version/Kind/plural` (core group:
    /// `v1/Kind/plural`). Default: those four.
    #[arg(long, value_delimiter = ',', value_parser = parse_kind, value_name = "KIND")]
    kinds: Vec<Kind>,
    /// Orphans younger than this (from `creationTimestamp`) are held.
    #[arg(
        long,
        default_value_t = 24,
        value_name = "HOURS",
        allow_negative_numbers = true
    )]
    grace_hours: i64,
    /// A database state that counts as gone, like a missing row (repeatable; StreamSpace
    /// soft-deletes with `deleted`). Default: only a missing row makes an orphan.
    #[arg(long = "terminal-state", value_name = "STATE")]
    terminal_states: Vec<String>,
    /// At most this many deletes per run (1..=10000); the rest wait for the next run.
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        allow_negative_numbers = true
    )]
    max_deletes: i64,
    /// The guard refuses the run when orphans are more than this share of what was scanned...
    #[arg(long, default_value_t = 0.5, value_name = "RATIO")]
    guard_ratio: f64,
    /// ...and more than this many. Whatever the floor, the guard also refuses a run where not one
    /// scanned id has a row in the table (a wrong database, a wrong schema on `search_path`, an
    /// empty replica).
    #[arg(
        long,
        default_value_t = 10,
        value_name = "N",
        allow_negative_numbers = true
    )]
    guard_floor: i64,
    /// Delete even when the guard would refuse, for too many orphans or for no row at all (after
    /// checking the database is the right one).
    #[arg(long)]
    override_guard: bool,
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    database: DatabaseArgs,
    /// The instant to plan for (RFC 3339); default now. For tests.
    #[arg(long, value_name = "RFC3339", hide = true)]
    now: Option<String>,
}

/// Where the sessions are.
#[derive(Debug, Args)]
struct DatabaseArgs {
    /// The session database: `postgres://...` (or a SQLite file). Default: StreamSpace's
    /// `DB_HOST`, `DB_PORT`, `DB_USER`, `DB_PASSWORD`, `DB_NAME` and `DB_SSL_MODE`.
    #[arg(long, env = DATABASE_URL_ENV, hide_env_values = true, value_name = "URL")]
    database_url: Option<String>,
    /// The session table, as `table` or `schema.table`.
    #[arg(long, default_value = "sessions", value_name = "NAME")]
    table: String,
    /// The column holding the session id (compared exactly with the label's value).
    #[arg(long, default_value = "id", value_name = "NAME")]
    id_column: String,
    /// The column holding the session's state; empty to read only whether a row exists.
    #[arg(long, default_value = "state", value_name = "NAME")]
    state_column: String,
}

/// Output formats of a session plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SessionFormat {
    /// For people: one row per resource to delete, deferred, held or skipped, and the counts.
    Table,
    /// The whole plan: every resource's decision and reason.
    Json,
}

/// `gc-cli plan sessions`
#[derive(Debug, Args)]
pub(crate) struct PlanSessions {
    #[command(flatten)]
    args: SessionArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = SessionFormat::Table)]
    format: SessionFormat,
    /// Also write the plan as JSON to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `gc-cli run sessions`
#[derive(Debug, Args)]
pub(crate) struct RunSessions {
    #[command(flatten)]
    args: SessionArgs,
    /// Send every delete as a server-side dry run: report what a run would delete.
    #[arg(long)]
    dry_run: bool,
    /// Append the audit lines to this file instead of writing them to stdout.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    #[command(flatten)]
    lock: live::LockArgs,
    #[command(flatten)]
    pub(crate) metrics: crate::metrics::MetricsArgs,
}

/// The run lock of the session collector in its namespace (one per namespace, whatever the
/// cluster id).
pub(crate) const SESSIONS_LOCK: &str = "gc-sessions";

/// Counts a session run by kind and decision.
fn record(metrics: &crate::metrics::RunMetrics, report: &SessionReport) {
    use gc_core::sessions::SessionDecision as D;
    let mut kinds: std::collections::BTreeMap<&str, [u64; 5]> = std::collections::BTreeMap::new();
    for r in &report.records {
        let c = kinds.entry(r.judged.resource.kind.as_str()).or_default();
        c[0] += 1;
        match &r.judged.decision {
            D::Held { .. } => {
                c[1] += 1;
                c[2] += 1;
            }
            D::Deferred { .. } => {
                c[1] += 1;
                c[3] += 1;
            }
            D::Delete { .. } => c[1] += 1,
            D::Kept { .. } | D::Skipped { .. } => {}
        }
        match r.result.as_deref() {
            Some("deleted") => c[4] += 1,
            Some(r) if r.starts_with("failed") => metrics.error("delete"),
            _ => {}
        }
    }
    for (kind, [scanned, orphaned, held, deferred, deleted]) in kinds {
        metrics.objects(kind, scanned, orphaned, held, deferred, deleted);
    }
}

/// A kind by StreamSpace name or as `group/version/Kind/plural`.
fn parse_kind(text: &str) -> Result<Kind, String> {
    let known = Kind::streamspace();
    let short = text.to_ascii_lowercase();
    let short = if short == "pvc" || short == "pvcs" {
        "persistentvolumeclaims".to_owned()
    } else {
        short
    };
    if let Some(kind) = known
        .iter()
        .find(|k| k.kind.to_ascii_lowercase() == short || k.plural == short)
    {
        return Ok(kind.clone());
    }
    let parts: Vec<&str> = text.split('/').collect();
    let (group, rest) = match parts.as_slice() {
        [group, version, kind, plural] => (*group, [*version, *kind, *plural]),
        [version, kind, plural] => ("", [*version, *kind, *plural]),
        _ => {
            return Err(format!(
                "{text:?} is neither Deployment, Service, PersistentVolumeClaim, Session nor \
                 group/version/Kind/plural"
            ));
        }
    };
    let [version, kind, plural] = rest;
    if [version, kind, plural].iter().any(|p| p.is_empty()) {
        return Err(format!(
            "{text:?}: version, Kind and plural must not be empty"
        ));
    }
    Ok(Kind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
    })
}

impl SessionArgs {
    /// The validated settings.
    fn config(&self) -> Result<SessionConfig, Failure> {
        let kinds = if self.kinds.is_empty() {
            Kind::streamspace()
        } else {
            self.kinds.clone()
        };
        // The run finds a resource's kind again by its Kind name: two kinds must not share one.
        for (i, k) in kinds.iter().enumerate() {
            if kinds[..i].iter().any(|seen| seen.kind == k.kind) {
                return Err(Failure::usage(anyhow::anyhow!(
                    "invalid --kinds: kind {} is given twice",
                    k.kind
                )));
            }
        }
        if self.terminal_states.iter().any(String::is_empty) {
            return Err(Failure::usage(anyhow::anyhow!(
                "invalid --terminal-state \"\": must not be empty"
            )));
        }
        if !self.terminal_states.is_empty() && self.database.state_column.is_empty() {
            return Err(Failure::usage(anyhow::anyhow!(
                "--terminal-state needs a --state-column to read the state from"
            )));
        }
        let inputs = SessionInputs {
            cluster_id: self.cluster_id.clone(),
            namespace: self.namespace.clone(),
            selector: self.selector.clone(),
            id_label: self.id_label.clone(),
            kinds,
            grace_hours: self.grace_hours,
            terminal_states: self.terminal_states.clone(),
            max_deletes: self.max_deletes,
            guard_ratio: self.guard_ratio,
            guard_floor: self.guard_floor,
            override_guard: self.override_guard,
        };
        inputs.validate().map_err(Failure::usage)
    }
}

impl DatabaseArgs {
    /// `--database-url`, else `$GC_SESSION_DATABASE_URL`, else StreamSpace's `DB_*` variables.
    fn url(&self) -> Result<String, Failure> {
        match &self.database_url {
            Some(url) if !url.is_empty() => Ok(url.clone()),
            _ => gc_store::url_from_env(|name| std::env::var(name).ok())
                .context("cannot build the session database URL from DB_*")
                .map_err(Failure::usage),
        }
    }

    fn spec(&self) -> TableSpec {
        TableSpec {
            table: self.table.clone(),
            id_column: self.id_column.clone(),
            state_column: Some(self.state_column.clone()).filter(|c| !c.is_empty()),
        }
    }
}

/// The cluster and the session table, connected and checked.
async fn connect(args: &SessionArgs) -> Result<(KubeCluster, SessionTable), Failure> {
    let url = args.database.url()?;
    let cluster = gc_k8s::connect(&args.connect.connection()?)
        .await
        .context("cannot connect to the cluster")?;
    let table = gc_store::connect_sessions(&url, args.database.spec())
        .await
        .context("cannot open the session table")?;
    Ok((cluster, table))
}

/// Maps a run's refusal to its exit code: the plan's (guard, no answer) 3, the rest 1.
fn refused(error: SessionRunError, cfg: &SessionConfig) -> Failure {
    let context = format!(
        "namespace {} of cluster {}: nothing deleted",
        cfg.namespace, cfg.cluster_id
    );
    match error {
        SessionRunError::Plan(_) => Failure::plan(anyhow::Error::new(error).context(context)),
        _ => Failure::from(anyhow::Error::new(error).context(context)),
    }
}

fn warn_missing(missing: &[String], namespace: &str) {
    for kind in missing {
        eprintln!(
            "gc-cli: warning: {kind} is not served by the API server (definition not installed); \
             not scanned in namespace {namespace}"
        );
    }
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

pub(crate) fn plan(args: &PlanSessions) -> Result<(), Failure> {
    let cfg = args.args.config()?;
    let now = now(args.args.now.as_deref())?;
    let planned = live::block_on(async {
        let (cluster, table) = connect(&args.args).await?;
        let planned = collect_sessions::plan(&cluster, &table, &cfg, now).await;
        table.close().await;
        planned.map_err(|e| refused(e, &cfg))
    })?;
    warn_missing(&planned.missing_kinds, &cfg.namespace);
    let doc = PlanDoc {
        config: &cfg,
        now: rfc3339(now),
        planned: &planned,
        delete_count: planned.plan.deletes().count(),
    };
    let json = serde_json::to_string_pretty(&doc).context("cannot write the plan")?;
    if let Some(path) = &args.out {
        write_file(path, &format!("{json}\n"))?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        SessionFormat::Json => writeln!(out, "{json}"),
        SessionFormat::Table => write_table(&mut out, &planned, &cfg, now),
    }
    .context("cannot write the plan")?;
    Ok(())
}

/// Decisions in the order a table lists them; kept resources are only counted.
fn rank(d: &SessionDecision) -> usize {
    match d {
        SessionDecision::Delete { .. } => 0,
        SessionDecision::Deferred { .. } => 1,
        SessionDecision::Held { .. } => 2,
        SessionDecision::Skipped { .. } => 3,
        SessionDecision::Kept { .. } => 4,
    }
}

const NAMES: [&str; 5] = ["delete", "deferred", "held", "skipped", "kept"];

fn reason(d: &SessionDecision) -> String {
    match d {
        SessionDecision::Held { reason, until } if until.is_finite() => {
            format!("{reason}; held until {}", rfc3339(*until))
        }
        SessionDecision::Kept { reason }
        | SessionDecision::Held { reason, .. }
        | SessionDecision::Delete { reason }
        | SessionDecision::Deferred { reason }
        | SessionDecision::Skipped { reason } => reason.clone(),
    }
}

fn write_table(
    out: &mut impl Write,
    planned: &Planned,
    cfg: &SessionConfig,
    now: f64,
) -> std::io::Result<()> {
    let mut judged: Vec<_> = planned.plan.judged.iter().collect();
    judged.sort_by_key(|j| rank(&j.decision));
    let mut counts = [0usize; 5];
    let mut rows = Vec::new();
    for j in judged {
        let r = rank(&j.decision);
        counts[r] += 1;
        if r < 4 {
            let res = &j.resource;
            rows.push([
                NAMES[r].to_owned(),
                res.kind.clone(),
                res.name.clone(),
                res.session.clone().unwrap_or_default(),
                res.created.clone().unwrap_or_default(),
                reason(&j.decision),
            ]);
        }
    }
    crate::output::write_columns(
        out,
        ["DECISION", "KIND", "NAME", "SESSION", "CREATED", "REASON"],
        &rows,
    )?;
    writeln!(
        out,
        "{} to delete, {} deferred, {} held, {} skipped, {} kept, of {} resources in namespace {} \
         at {} ({})",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        planned.plan.scanned,
        cfg.namespace,
        rfc3339(now),
        round_trips(planned.lookups)
    )
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

/// Where audit lines go: stdout, or a file opened for appending.
fn audit_sink(path: Option<&PathBuf>) -> Result<Box<dyn Write>, Failure> {
    Ok(match path {
        Some(path) => Box::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open --audit-log {}", path.display()))
                .map_err(Failure::usage)?,
        ),
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
fn now_of_clock() -> Result<f64, Failure> {
    now(None)
}

pub(crate) fn run(args: &RunSessions) -> Result<(), Failure> {
    let cfg = args.args.config()?;
    let started = std::time::Instant::now();
    let metrics =
        crate::metrics::RunMetrics::new(&args.metrics.metrics_prefix(), "sessions", &cfg.namespace);
    let result = run_once(args, &cfg, &metrics);
    let elapsed = started.elapsed().as_secs_f64();
    match &result {
        Ok(summary) => {
            metrics.finish(elapsed, now_of_clock().ok());
            metrics.deliver(&args.metrics, None, summary);
        }
        Err(f) => {
            metrics.error("run");
            metrics.finish(elapsed, None);
            metrics.deliver(&args.metrics, Some(&format!("{:#}", f.error)), "");
        }
    }
    result.map(drop)
}

/// One run; the summary line on success.
fn run_once(
    args: &RunSessions,
    cfg: &SessionConfig,
    metrics: &crate::metrics::RunMetrics,
) -> Result<String, Failure> {
    let cfg = cfg.clone();
    let now = now(args.args.now.as_deref())?;
    // A future `--now` would treat young resources as past their grace period: a live run
    // accepts one only when the environment says this is a test.
    let clock = now_of_clock()?;
    if !args.dry_run && now > clock + 60.0 && std::env::var_os("GC_ALLOW_FUTURE_NOW").is_none() {
        return Err(Failure::usage(anyhow::anyhow!(
            "--now is in the future: a live run would shorten the grace period (set GC_ALLOW_FUTURE_NOW=1 in tests)"
        )));
    }
    let time = rfc3339(now);
    let mut sink = audit_sink(args.audit_log.as_ref())?;
    let outcome = live::block_on(async {
        let (cluster, table) = connect(&args.args).await?;
        let lock = live::RunLock::take(&cluster, &cfg.namespace, SESSIONS_LOCK, &args.lock).await?;
        let report =
            collect_sessions::run(&cluster, &table, &cfg, now, args.dry_run, lock.stop()).await;
        table.close().await;
        lock.release().await;
        report.map_err(|e| refused(e, &cfg))
    });
    let report = match outcome {
        Ok(report) => report,
        Err(failure) => {
            // The audit log says why this run deleted nothing.
            let line = RefusedLine {
                time: &time,
                cluster: &cfg.cluster_id,
                namespace: &cfg.namespace,
                decision: "refused",
                reason: format!("{:#}", failure.error),
                dry_run: args.dry_run,
            };
            write_lines(&mut *sink, &[line])?;
            return Err(failure);
        }
    };
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
    write_lines(&mut *sink, &lines)?;
    let line = summary(&report, &cfg, args.dry_run);
    eprintln!("gc-cli: {line}");
    if report.failures > 0 {
        return Err(Failure::from(anyhow::anyhow!(
            "{} delete(s) failed; the next run tries them again",
            report.failures
        )));
    }
    Ok(line)
}

/// The run in one line: counts by decision and by result.
fn summary(report: &SessionReport, cfg: &SessionConfig, dry_run: bool) -> String {
    let mut counts = [0usize; 5];
    let (mut done, mut changed) = (0, 0);
    for r in &report.records {
        counts[rank(&r.judged.decision)] += 1;
        match r.result.as_deref() {
            Some("deleted" | "would delete") => done += 1,
            Some(other) if other.starts_with("changed") => changed += 1,
            _ => {}
        }
    }
    let verb = if dry_run {
        "would delete (dry run)"
    } else {
        "deleted"
    };
    format!(
        "sessions in namespace {} of cluster {}: {} scanned, {done} {verb}, {changed} changed \
         since listed, {} failed, {} deferred, {} held, {} skipped, {} kept; {}",
        cfg.namespace,
        cfg.cluster_id,
        report.records.len(),
        report.failures,
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        round_trips(report.lookups)
    )
}

fn round_trips(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} database round trip{s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name_or_in_full() {
        let name = |t: &str| parse_kind(t).map(|k| (k.group, k.version, k.kind, k.plural));
        let s = |a: &str, b: &str, c: &str, d: &str| Ok((a.into(), b.into(), c.into(), d.into()));
        assert_eq!(
            name("deployment"),
            s("apps", "v1", "Deployment", "deployments")
        );
        assert_eq!(
            name("pvc"),
            s("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
        );
        assert_eq!(
            name("Session"),
            s("stream.space", "v1alpha1", "Session", "sessions")
        );
        assert_eq!(
            name("example.com/v1/Widget/widgets"),
            s("example.com", "v1", "Widget", "widgets")
        );
        assert_eq!(
            name("v1/ConfigMap/configmaps"),
            s("", "v1", "ConfigMap", "configmaps")
        );
        assert_eq!(
            name("/v1/ConfigMap/configmaps"),
            s("", "v1", "ConfigMap", "configmaps")
        );
        assert!(name("widgets").is_err());
        assert!(name("example.com/v1//widgets").is_err());
        assert!(name("a/b/c/d/e").is_err());
    }
}
