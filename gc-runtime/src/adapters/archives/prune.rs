//! `archives prune`: the receipts older than a window removed with their archives, never one
//! that could still be restored. [`decide`] is the rule (pure, `now` an argument, a unit table
//! beside it); [`prune`] reads the receipts, applies it and removes, archive first, one receipt
//! at a time, stopping at the first failure.
//!
//! The rule:
//! - a receipt's time is when it was written (`archivedAt`, the store's clock) or, for a session
//!   resource's manifest, its run's instant (`runAt`), whichever is later;
//! - the receipts of one session (same namespace and session id) go only all together, once the
//!   newest of them is older than the window: `restore sessions` needs every one;
//! - a receipt naming a kept volume holds its whole session until `--retain-volume-days` past
//!   its run's instant, whatever the window: within it, `restore sessions` brings the session
//!   back on that volume;
//! - a receipt whose archive is in another sink than the one given, or whose time does not read,
//!   is kept (and its session with it);
//! - every other receipt older than the window goes (a Pod's, or a manifest without session id,
//!   on its own).

use std::collections::HashMap;
use std::time::Duration;

use crate::Context as _;
use gc_core::isotime::{format_timestamp, parse_timestamp};
use gc_core::ports::Store as _;
use gc_store::{Archives, ListedReceipt, ReceiptQuery, Store};
use serde::Serialize;

/// What [`prune`] removes and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Receipts older than this go (with the rule's exceptions).
    pub older_than: Duration,
    /// A receipt naming a kept volume stays this many days past its run's instant (the session
    /// collector's `--retain-volume-days`).
    pub retain_volume_days: u32,
    /// List what would go; remove nothing.
    pub dry_run: bool,
}

impl Policy {
    /// A policy of these values.
    #[must_use]
    pub fn new(older_than: Duration, retain_volume_days: u32, dry_run: bool) -> Self {
        Self {
            older_than,
            retain_volume_days,
            dry_run,
        }
    }
}

/// What became of a receipt [`prune`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Fate {
    /// The archive (unless already missing), then the receipt, removed.
    Removed,
    /// A dry run: would be removed.
    WouldRemove,
    /// Older than the window, and kept: `detail` says why.
    Kept,
}

/// One receipt older than the window, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// The receipt as listed.
    pub listed: ListedReceipt,
    /// Removed, would be, or kept.
    pub fate: Fate,
    /// The archive was already missing (removed or would be: the receipt all the same).
    pub archive_missing: bool,
    /// Why it was kept, or what removing it found; empty when there is nothing to say.
    pub detail: String,
}

/// What [`prune`] did.
#[derive(Debug)]
pub struct Prune {
    /// Every receipt older than the window, in the order acted on: each removed (or that would
    /// be), then each kept. After a stop, the receipts not reached are left out.
    pub rows: Vec<Pruned>,
    /// Receipts in the window, left alone (neither listed nor counted as kept).
    pub newer: usize,
    /// The receipts of the cluster (and namespace) read.
    pub receipts: usize,
    /// Receipts older than this instant (seconds) are older than the window.
    pub cutoff: f64,
    /// A dry run: nothing was removed.
    pub dry_run: bool,
    /// The failure that stopped the removals: nothing was removed after it.
    pub stopped: Option<crate::Error>,
}

/// The receipts [`decide`] sorted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decided {
    /// To remove, oldest session (or receipt) first.
    pub go: Vec<ListedReceipt>,
    /// Older than the window and kept, with why.
    pub kept: Vec<(ListedReceipt, String)>,
    /// In the window.
    pub newer: usize,
}

/// `--older-than`'s value: a positive duration with a unit (`90d`, `12h`, `90m`, `3600s`, or
/// what else `humantime` reads, such as `1h 30m`, `1.5d` or `2weeks`).
///
/// # Errors
/// A message with an example: for a bare number (no unit), zero, a negative or unreadable value.
pub fn parse_window(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let example = "e.g. 90d, 12h, 90m or 3600s";
    if text.starts_with('-') {
        return Err(format!(
            "{text} is negative: give a window above zero, {example}"
        ));
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        if text.bytes().all(|b| b == b'0') {
            return Err(format!(
                "0 would make every receipt old at once: give a window above zero, {example}"
            ));
        }
        return Err(format!(
            "{text} has no unit: say {text}d (days), {text}h, {text}m or {text}s"
        ));
    }
    let window = humantime::parse_duration(text)
        .map_err(|e| format!("{e}: give a number and a unit, {example}"))?;
    if window.is_zero() {
        return Err(format!(
            "{text} is zero: give a window above zero, {example}"
        ));
    }
    Ok(window)
}

/// `window` as the largest whole unit it is a number of: `90d`, `12h`, `90m`, `3600s`.
#[must_use]
pub fn shown(window: Duration) -> String {
    let s = window.as_secs();
    match [(86_400, "d"), (3_600, "h"), (60, "m")]
        .into_iter()
        .find(|&(unit, _)| s > 0 && s.is_multiple_of(unit))
    {
        Some((unit, name)) => format!("{}{name}", s / unit),
        None => format!("{s}s"),
    }
}

/// Which receipts go together: a session's (namespace and id), else each on its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Session(String, String),
    One(String),
}

fn key(l: &ListedReceipt) -> Key {
    let r = &l.receipt;
    match r.session.as_ref().and_then(|s| s.session.as_ref()) {
        Some(id) => Key::Session(r.namespace.clone(), id.clone()),
        None => Key::One(r.uid.clone()),
    }
}

/// A receipt's time: when it was written, or its run's instant, whichever is later.
fn time_of(l: &ListedReceipt) -> Result<f64, String> {
    let read = |field: &str, text: &str| {
        parse_timestamp(text).map_err(|e| format!("its {field} {text:?} does not read: {e}"))
    };
    let written = read("archivedAt", &l.archived_at)?;
    match &l.receipt.session {
        Some(s) => Ok(written.max(read("runAt", &s.run_at)?)),
        None => Ok(written),
    }
}

/// `KIND NAME` of a receipt, for reasons.
fn what(l: &ListedReceipt) -> String {
    format!("{} {}", l.receipt.kind(), l.receipt.name)
}

/// Sorts the receipts `listed` by the rule (module docs) at `now` (seconds): `holds` says whether
/// an archive URI is in the sink given.
#[must_use]
pub fn decide(
    listed: Vec<ListedReceipt>,
    now: f64,
    policy: &Policy,
    holds: impl Fn(&str) -> bool,
) -> Decided {
    let window = policy.older_than.as_secs_f64();
    let cutoff = now - window;
    let mut order: Vec<Key> = Vec::new();
    let mut groups: HashMap<Key, Vec<ListedReceipt>> = HashMap::new();
    for l in listed {
        let k = key(&l);
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push(l);
    }
    let mut decided = Decided::default();
    let mut go: Vec<(f64, Vec<ListedReceipt>)> = Vec::new();
    for k in order {
        let members = groups.remove(&k).unwrap_or_default();
        let session = match &k {
            Key::Session(_, id) => Some(id.as_str()),
            Key::One(_) => None,
        };
        let times: Vec<Result<f64, String>> = members.iter().map(time_of).collect();
        // The first reason that holds the group, said of the receipt it is about.
        let mut hold: Option<(usize, String)> = times
            .iter()
            .enumerate()
            .find_map(|(i, t)| t.as_ref().err().map(|e| (i, e.clone())));
        let newest = times
            .iter()
            .filter_map(|t| t.as_ref().ok().copied())
            .fold(f64::NEG_INFINITY, f64::max);
        if hold.is_none() && newest >= cutoff {
            // In the window: the group stays; only its members older than the window are said.
            for (l, t) in members.into_iter().zip(&times) {
                match t {
                    Ok(t) if *t < cutoff => {
                        let why = format!(
                            "its session {} has a receipt of {}, in the window: a session's \
                             receipts go only all together, once the newest is older",
                            session.unwrap_or_default(),
                            format_timestamp(newest)
                        );
                        decided.kept.push((l, why));
                    }
                    _ => decided.newer += 1,
                }
            }
            continue;
        }
        if hold.is_none() {
            hold = members.iter().enumerate().find_map(|(i, l)| {
                volume_hold(l, now, policy.retain_volume_days).map(|why| (i, why))
            });
        }
        if hold.is_none() {
            hold = members.iter().enumerate().find_map(|(i, l)| {
                (!holds(&l.receipt.uri)).then(|| {
                    "its archive is not in the sink given: prune with the one it was written to \
                     (`sink`)"
                        .to_owned()
                })
                .map(|why| (i, why))
            });
        }
        match hold {
            Some((at, why)) => {
                let about = what(&members[at]);
                for (i, l) in members.into_iter().enumerate() {
                    let why = if i == at {
                        why.clone()
                    } else {
                        format!(
                            "kept with its session {}: {about}: {why}",
                            session.unwrap_or_default()
                        )
                    };
                    decided.kept.push((l, why));
                }
            }
            None => go.push((newest, members)),
        }
    }
    // Oldest first: a prune stopped part way leaves the newest.
    go.sort_by(|a, b| a.0.total_cmp(&b.0));
    decided.go = go.into_iter().flat_map(|(_, members)| members).collect();
    decided
}

/// Why `l` is held by the window of the volume it names, if it is.
fn volume_hold(l: &ListedReceipt, now: f64, days: u32) -> Option<String> {
    let session = l.receipt.session.as_ref()?;
    let volume = session.retained.as_ref()?;
    let run_at = match parse_timestamp(&session.run_at) {
        Ok(at) => at,
        Err(e) => return Some(format!("its runAt does not read: {e}")),
    };
    let until = run_at + f64::from(days) * 86_400.0;
    (now < until).then(|| {
        format!(
            "it names the kept volume {}, whose window runs until {} (`volume_retention` {days}d): \
             until then restore sessions can bring the session back on it",
            volume.name,
            format_timestamp(until)
        )
    })
}

/// Removes the receipts of `cluster` (in `namespace`, if given) in `store` that [`decide`] lets
/// go at `now` (seconds), each with its archive in `sink`; a dry run removes nothing and says
/// which archives are already missing.
///
/// Each archive goes before its receipt. A crash between the two leaves a receipt without its
/// archive, which `archives verify` reports `missing` and the next prune removes (an archive
/// already missing never stops its receipt's removal). The other order could leave an archive
/// without a receipt: a manifest with its literal env values that no prune would find again
/// (prune walks the receipts), kept for good. A receipt written again since it was listed
/// (another archive) is never removed.
///
/// # Errors
/// When the receipts cannot be listed or the sink cannot be read: nothing is removed. A failure
/// while removing stops the removals and is in [`Prune::stopped`], with the rows done before.
pub async fn prune(
    store: &Store,
    sink: &Archives,
    cluster: &str,
    (namespace, session): (Option<&str>, Option<&str>),
    policy: &Policy,
    now: f64,
) -> crate::Result<Prune> {
    let query = ReceiptQuery {
        namespace,
        session,
        ..ReceiptQuery::default()
    };
    let listed = store
        .list_receipts(cluster, query)
        .await
        .context("cannot list the receipts: nothing removed")?;
    let receipts = listed.len();
    let decided = decide(listed, now, policy, |uri| sink.holds(uri));
    // A folder that is not there (a volume not mounted) or a bucket that does not answer would
    // make every archive look missing, and every receipt go. (With nothing to remove, the sink
    // is not needed: a collector that has archived nothing yet has no folder.)
    if !decided.go.is_empty() {
        sink.check().await.with_context(|| {
            format!(
                "cannot read the archives in {}: nothing removed",
                sink.shown()
            )
        })?;
    }
    let mut rows = Vec::with_capacity(decided.go.len() + decided.kept.len());
    let mut stopped = None;
    for listed in decided.go {
        match remove(store, sink, &listed, policy.dry_run).await {
            Ok(row) => rows.push(row),
            Err(e) => {
                let removed = rows.iter().filter(|r| r.fate == Fate::Removed).count();
                stopped = Some(e.context(format!(
                    "prune stopped at {} {} in namespace {}: nothing more removed ({removed} \
                     removed before)",
                    listed.receipt.kind(),
                    listed.receipt.name,
                    listed.receipt.namespace
                )));
                break;
            }
        }
    }
    rows.extend(decided.kept.into_iter().map(|(listed, detail)| Pruned {
        listed,
        fate: Fate::Kept,
        archive_missing: false,
        detail,
    }));
    Ok(Prune {
        rows,
        newer: decided.newer,
        receipts,
        cutoff: now - policy.older_than.as_secs_f64(),
        dry_run: policy.dry_run,
        stopped,
    })
}

/// Removes one receipt's archive, then the receipt (a dry run: looks for the archive).
async fn remove(
    store: &Store,
    sink: &Archives,
    listed: &ListedReceipt,
    dry_run: bool,
) -> crate::Result<Pruned> {
    let r = &listed.receipt;
    let uri = &r.uri;
    let missing_said = "the archive was already missing";
    if dry_run {
        let there = sink
            .exists(uri)
            .await
            .with_context(|| format!("cannot look for archive {uri}"))?;
        return Ok(Pruned {
            listed: listed.clone(),
            fate: Fate::WouldRemove,
            archive_missing: !there,
            detail: if there { "" } else { missing_said }.to_owned(),
        });
    }
    let was_there = sink
        .remove(uri)
        .await
        .with_context(|| format!("cannot remove archive {uri}"))?;
    let removed = store
        .delete_receipt(listed)
        .await
        .with_context(|| format!("cannot remove the receipt of archive {uri}"))?;
    let mut detail = if was_there { "" } else { missing_said }.to_owned();
    if !removed {
        let now = store
            .get_receipt(&r.cluster_id, &r.uid)
            .await
            .with_context(|| format!("cannot read the receipt of archive {uri} back"))?;
        if now.is_some() {
            return Err(crate::Error::msg(format!(
                "the receipt of {} {} was written again while pruning (its archive {uri} is \
                 removed): left as it is; run archives verify",
                r.kind(),
                r.name
            )));
        }
        // Another prune removed it first.
        detail = "the receipt was already removed".to_owned();
    }
    Ok(Pruned {
        listed: listed.clone(),
        fate: Fate::Removed,
        archive_missing: !was_there,
        detail,
    })
}

impl Prune {
    /// Fails with the failure that stopped the removals, if one did.
    ///
    /// # Errors
    /// As said.
    pub fn outcome(self) -> crate::Result<()> {
        match self.stopped {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// How many rows met `fate`.
    #[must_use]
    pub fn count(&self, fate: Fate) -> usize {
        self.rows.iter().filter(|r| r.fate == fate).count()
    }
}

#[cfg(test)]
mod tests;
