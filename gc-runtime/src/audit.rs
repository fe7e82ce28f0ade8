//! The audit log: where a run's records go ([`Audit`]) and the lines written there, each beside
//! what writes it ([`AuditLog`], as JSON lines): a resource judged ([`AuditLine`]), a run refused
//! ([`RefusedLine`]), a request API call refused for who asked ([`DeniedLine`]), an object a
//! restore created again ([`RestoredLine`]).

use std::collections::BTreeSet;
use std::io::Write;

use gc_core::sessions::SessionConfig;
use gc_core::sessions::run::{AuditRecord, SessionReport, SessionRunError};
use serde::Serialize;

use crate::Context as _;

/// Where a run's audit records go, as each namespace's run ends.
pub trait Audit: Send {
    /// The records of `cfg`'s namespace, judged at `time` (RFC 3339).
    ///
    /// # Errors
    /// When they cannot be written: the run fails.
    fn judged(
        &mut self,
        cfg: &SessionConfig,
        report: &SessionReport,
        time: &str,
    ) -> crate::Result<()>;

    /// The line of a namespace's run that deleted nothing because it was refused or failed.
    ///
    /// # Errors
    /// When it cannot be written.
    fn refused(&mut self, line: &RefusedLine<'_>) -> crate::Result<()>;

    /// The line of a request API call refused for who asked (`401`, `403`): nothing was done.
    /// An audit that keeps only the runs' records writes nothing (the default).
    ///
    /// # Errors
    /// When it cannot be written.
    fn denied(&mut self, line: &DeniedLine<'_>) -> crate::Result<()> {
        let _ = line;
        Ok(())
    }

    /// The lines of a restore asked for through the request API, one per archived object. An
    /// audit that keeps only the runs' records writes nothing (the default).
    ///
    /// # Errors
    /// When they cannot be written.
    fn restored(&mut self, lines: &[RestoredLine<'_>]) -> crate::Result<()> {
        let _ = lines;
        Ok(())
    }
}

/// Audit records as JSON lines (one per resource judged, or the refusal), each batch flushed.
pub struct AuditLog<W>(pub W);

impl<W: Write + Send> Audit for AuditLog<W> {
    fn judged(
        &mut self,
        cfg: &SessionConfig,
        report: &SessionReport,
        time: &str,
    ) -> crate::Result<()> {
        let lines: Vec<_> = report
            .records
            .iter()
            .map(|record| AuditLine {
                time,
                record,
                requested_by: requested_by(cfg),
            })
            .collect();
        write_lines(&mut self.0, &lines)
    }
    fn refused(&mut self, line: &RefusedLine<'_>) -> crate::Result<()> {
        write_lines(&mut self.0, &[line])
    }
    fn denied(&mut self, line: &DeniedLine<'_>) -> crate::Result<()> {
        write_lines(&mut self.0, &[line])
    }
    fn restored(&mut self, lines: &[RestoredLine<'_>]) -> crate::Result<()> {
        write_lines(&mut self.0, lines)
    }
}

/// Writes each value as one JSON line, then flushes.
fn write_lines<T: Serialize>(sink: &mut dyn Write, lines: &[T]) -> crate::Result<()> {
    for line in lines {
        let mut text = serde_json::to_vec(line)?;
        text.push(b'\n');
        sink.write_all(&text)?;
    }
    sink.flush().context("cannot write the audit log")
}

/// One audit line: when, then the record.
#[derive(Serialize)]
pub struct AuditLine<'a> {
    /// When the run judged the resource (RFC 3339).
    pub time: &'a str,
    /// The record.
    #[serde(flatten)]
    pub record: &'a AuditRecord,
    /// Who asked, when the run was requested ([`SessionConfig::request`]); absent otherwise.
    #[serde(rename = "requestedBy", skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<&'a BTreeSet<String>>,
}

/// Who asked for `cfg`'s run, when it was requested.
#[must_use]
pub fn requested_by(cfg: &SessionConfig) -> Option<&BTreeSet<String>> {
    cfg.request.as_ref().map(|r| &r.requested_by)
}

/// The audit line of a request API call refused for who asked: no token or one the API server
/// does not accept (`401`, the caller unknown), or a caller without the right (`403`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeniedLine<'a> {
    /// When (RFC 3339).
    pub time: &'a str,
    /// The namespace of the call (empty for a cluster-wide one, or a run not found).
    pub namespace: &'a str,
    /// `denied`.
    pub decision: &'static str,
    /// The HTTP status answered.
    pub status: u16,
    /// The call, as authorized: `create sessions/collect`, `get runs`, ...
    pub call: String,
    /// Who asked (the caller's Kubernetes user name), when the token said (a `403`).
    pub requested_by: Option<&'a str>,
    /// Why.
    pub reason: &'a str,
    /// Refusals since the line before this one that were not audited (beyond the audit's rate:
    /// a flood), counted here so the log says how many there were; absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub unaudited: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The audit line of an archived object a restore asked for through the request API created
/// again (or would have, found there, or could not).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoredLine<'a> {
    /// When the restore ended (RFC 3339).
    pub time: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// `restore`.
    pub decision: &'static str,
    /// The object, and what came of it.
    #[serde(flatten)]
    pub object: &'a crate::restore::Restored,
    /// Whether every create was a server-side dry run.
    pub dry_run: bool,
    /// Who asked (the caller's Kubernetes user name).
    pub requested_by: &'a str,
    /// The account the objects were created as.
    pub restored_as: &'a str,
}

/// The audit line of a run that deleted nothing because it was refused: every field an audit
/// line carries (`null` where a refusal has none), and for the mass-deletion guard what it
/// counted.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedLine<'a> {
    /// When the run was refused (RFC 3339).
    pub time: &'a str,
    /// The cluster id.
    pub cluster: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// No resource: `null`.
    pub api_version: Option<&'a str>,
    /// No resource: `null`.
    pub kind: Option<&'a str>,
    /// No resource: `null`.
    pub name: Option<&'a str>,
    /// No resource: `null`.
    pub uid: Option<&'a str>,
    /// No resource: `null`.
    pub session: Option<&'a str>,
    /// `refused`.
    pub decision: &'static str,
    /// Why, the whole error.
    pub reason: String,
    /// No delete: `null`.
    pub result: Option<&'a str>,
    /// Always `null`: nothing was archived.
    pub archive: Option<&'a str>,
    /// What the guard counted, when the guard refused the run.
    pub counted: Option<Counted>,
    /// Whether the run was a dry run.
    pub dry_run: bool,
    /// Who asked, when the run was requested; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<&'a BTreeSet<String>>,
}

/// What the mass-deletion guard counted when it refused a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counted {
    /// Distinct session ids judged against the database.
    pub sessions: usize,
    /// Of them, the ids that look gone.
    pub gone: usize,
    /// The resources of the sessions that look gone.
    pub resources: usize,
}

impl Counted {
    /// What the guard counted, when `error` is its refusal.
    #[must_use]
    pub fn of(error: &crate::Error) -> Option<Self> {
        use gc_core::sessions::SessionPlanError as E;
        let plan = match error.root() {
            crate::Error::SessionRun(SessionRunError::Plan(plan))
            | crate::Error::SessionPlan(plan) => plan,
            _ => return None,
        };
        match *plan {
            E::MassDeletion {
                orphaned,
                judged,
                orphans,
                ..
            } => Some(Self {
                sessions: judged,
                gone: orphaned,
                resources: orphans,
            }),
            E::NoRowFound { ids, orphans } => Some(Self {
                sessions: ids,
                gone: ids,
                resources: orphans,
            }),
            E::NoAnswer(_) => None,
        }
    }
}
