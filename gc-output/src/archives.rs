//! Archives read back (`archives list|show|verify`): the receipts, one archive as the object it
//! was, and what verification found; and what `archives prune` removed and kept.

use std::io::Write;

use anyhow::Context;
use gc_core::ports::Receipt;
use gc_runtime::adapters::archives::Checked;
use gc_runtime::adapters::archives::prune::{Fate, Prune, Pruned};
use gc_store::ListedReceipt;
use serde::Serialize;
use serde_json::Value;

use crate::{Output, escape, object_name, rfc3339, write_columns, write_doc};

/// A receipt as `list -o json` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed<'a> {
    archived_at: &'a str,
    cluster_id: &'a str,
    namespace: &'a str,
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    /// A session resource's session id (`null` for a Pod, or an object without the label).
    session: Option<&'a str>,
    /// A deleted claim's volume, set to `Retain` before the delete (`null`: none was kept).
    retained_volume: Option<&'a str>,
    /// That volume's reclaim policy before.
    volume_policy: Option<&'a str>,
    uid: &'a str,
    uri: &'a str,
    sha256: &'a str,
    bytes: u64,
}

/// The receipts `kept`, newest first, as `output` says: a row each (`wide` adds the sha256), the
/// archived objects' names, or the documents.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_list(
    out: &mut impl Write,
    kept: &[ListedReceipt],
    output: Output,
) -> anyhow::Result<()> {
    match output {
        Output::Json | Output::Yaml => {
            let doc: Vec<Listed> = kept.iter().map(|l| listed(l)).collect();
            write_doc(out, &doc, output)?;
        }
        Output::Name => {
            for l in kept {
                writeln!(out, "{}", name_of(&l.receipt))?;
            }
        }
        Output::Table | Output::Wide | Output::Kestra => {
            // The session a session resource's manifest belongs to (`-` for a Pod's archive).
            let session = |r: &gc_core::ports::Receipt| {
                let id = r.session.as_ref().and_then(|s| s.session.clone());
                id.unwrap_or_else(|| "-".to_owned())
            };
            let rows: Vec<[String; 9]> = kept
                .iter()
                .map(|l| {
                    let r = &l.receipt;
                    [
                        l.archived_at.clone(),
                        r.namespace.clone(),
                        r.kind().to_owned(),
                        r.name.clone(),
                        session(r),
                        r.uid.clone(),
                        r.bytes.to_string(),
                        r.sha256.clone(),
                        r.uri.clone(),
                    ]
                })
                .collect();
            let header = [
                "ARCHIVED",
                "NAMESPACE",
                "KIND",
                "NAME",
                "SESSION",
                "UID",
                "BYTES",
                "SHA256",
                "URI",
            ];
            if output == Output::Wide {
                write_columns(out, header, &rows)?;
            } else {
                // The digest and the URI (often 200 characters) in `-o wide` only.
                let [h @ .., _, _] = header;
                let rows: Vec<[String; 7]> = (rows.into_iter())
                    .map(|[a, n, k, p, s, u, b, _, _]| [a, n, k, p, s, u, b])
                    .collect();
                write_columns(out, h, &rows)?;
            }
        }
    }
    Ok(())
}

fn listed(l: &ListedReceipt) -> Listed<'_> {
    let r = &l.receipt;
    let retained = r.session.as_ref().and_then(|s| s.retained.as_ref());
    Listed {
        archived_at: &l.archived_at,
        cluster_id: &r.cluster_id,
        namespace: &r.namespace,
        api_version: r.api_version(),
        kind: r.kind(),
        name: &r.name,
        session: r.session.as_ref().and_then(|s| s.session.as_deref()),
        retained_volume: retained.map(|v| v.name.as_str()),
        volume_policy: retained.map(|v| v.policy.as_str()),
        uid: &r.uid,
        uri: &r.uri,
        sha256: &r.sha256,
        bytes: r.bytes,
    }
}

/// A verified archive (`bytes`) and its receipt, as `output` says: JSON as stored, YAML, the
/// object's name, or its fields (a Pod's status and containers, a manifest's session and labels).
///
/// # Errors
/// When `out` cannot be written, or the archive is not JSON.
pub fn write_show(
    out: &mut impl Write,
    receipt: &Receipt,
    bytes: &[u8],
    output: Output,
) -> anyhow::Result<()> {
    match output {
        Output::Json => {
            out.write_all(bytes)?;
            writeln!(out)?;
        }
        Output::Name => writeln!(out, "{}", name_of(receipt))?,
        Output::Yaml | Output::Table | Output::Wide | Output::Kestra => {
            let doc: Value = serde_json::from_slice(bytes)
                .with_context(|| format!("archive {} is not JSON", receipt.uri))?;
            if output == Output::Yaml {
                write_doc(out, &doc, Output::Yaml)?;
            } else if receipt.session.is_some() {
                write_manifest(out, receipt, &doc)?;
            } else {
                write_archive(out, receipt, &doc)?;
            }
        }
    }
    Ok(())
}

/// Text at `pointer` in `doc`, or "".
fn text(doc: &Value, pointer: &str) -> String {
    match doc.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// One line of at most 120 characters: a container's message can be a whole log tail.
fn one_line(s: &str) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 120 {
        format!("{}...", line.chars().take(117).collect::<String>())
    } else {
        line
    }
}

/// `NAME:   value` lines, each value escaped; empty values left out.
fn write_fields<const N: usize>(
    out: &mut impl Write,
    fields: [(&str, String); N],
) -> std::io::Result<()> {
    for (name, value) in fields {
        if !value.is_empty() {
            writeln!(out, "{:<10}{}", format!("{name}:"), escape(&value))?;
        }
    }
    Ok(())
}

/// The archive line of a `show`: where, how large, its digest, verified.
fn archive_line(receipt: &Receipt) -> String {
    format!(
        "{} ({} bytes, sha256 {}, verified)",
        receipt.uri, receipt.bytes, receipt.sha256
    )
}

/// `kind.group/NAME` of the archived object, as `kubectl -o name` prints it.
pub fn name_of(receipt: &Receipt) -> String {
    object_name(receipt.api_version(), receipt.kind(), &receipt.name)
}

/// A session resource's archive: the object it was, its session, and the manifest's labels.
fn write_manifest(out: &mut impl Write, receipt: &Receipt, doc: &Value) -> std::io::Result<()> {
    let from = |field: &str| text(doc, &format!("/archivedFrom/{field}"));
    let labels = doc
        .pointer("/manifest/metadata/labels")
        .and_then(Value::as_object);
    let labels: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let object = format!(
        "{}/{} ({})",
        receipt.namespace,
        name_of(receipt),
        receipt.uid
    );
    write_fields(
        out,
        [
            ("Object", object),
            ("Session", from("session")),
            ("Created", from("creationTimestamp")),
            ("Archived", from("runAt")),
            ("Labels", labels.join(",")),
            ("Archive", archive_line(receipt)),
        ],
    )
}

fn write_archive(out: &mut impl Write, receipt: &Receipt, doc: &Value) -> std::io::Result<()> {
    let fields = [
        (
            "Pod",
            format!("{}/{} ({})", receipt.namespace, receipt.name, receipt.uid),
        ),
        ("Phase", text(doc, "/status/phase")),
        ("Reason", text(doc, "/status/reason")),
        ("Message", one_line(&text(doc, "/status/message"))),
        ("Created", text(doc, "/metadata/creationTimestamp")),
        ("Started", text(doc, "/status/startTime")),
        (
            "Finished",
            match doc.get("anchor").and_then(Value::as_f64) {
                Some(anchor) => format!("{} ({})", rfc3339(anchor), text(doc, "/retentionBasis")),
                None => String::new(),
            },
        ),
        ("Archive", archive_line(receipt)),
    ];
    write_fields(out, fields)?;
    let mut rows = Vec::new();
    for (list, kind) in [
        ("initContainerStatuses", "init"),
        ("containerStatuses", "container"),
        ("ephemeralContainerStatuses", "ephemeral"),
    ] {
        let statuses = doc
            .pointer(&format!("/status/{list}"))
            .and_then(Value::as_array);
        for status in statuses.into_iter().flatten() {
            // The state it ended in; a restarted container's previous end otherwise.
            let ended = ["/state/terminated", "/lastState/terminated"]
                .iter()
                .find_map(|p| status.pointer(p));
            let field = |name: &str| ended.map(|t| text(t, name)).unwrap_or_default();
            rows.push([
                text(status, "/name"),
                kind.to_owned(),
                field("/exitCode"),
                field("/reason"),
                one_line(&field("/message")),
            ]);
        }
    }
    if !rows.is_empty() {
        writeln!(out)?;
    }
    write_columns(
        out,
        ["CONTAINER", "KIND", "EXIT CODE", "REASON", "MESSAGE"],
        &rows,
    )
}

/// The table's last line: `12 verified, 0 failed`, then what else was found, when anything was
/// (`, 1 skipped, 2 without a receipt, 1 unexpected`): a table with no row says all is well.
fn verified_words(checked: &[Checked]) -> String {
    let count = |result: &str| checked.iter().filter(|c| c.result == result).count();
    let failed = checked.iter().filter(|c| c.is_problem()).count();
    let mut line = format!("{} verified, {failed} failed", count("ok"));
    for (n, what) in [
        (count("skipped"), "skipped"),
        (count("noReceipt"), "without a receipt"),
        (count("unexpected"), "unexpected"),
    ] {
        if n > 0 {
            line.push_str(&format!(", {n} {what}"));
        }
    }
    line
}

/// What `archives verify` found, as `output` says: the problems (`wide`: every archive), the Pods
/// with a problem, or the documents.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_checked(
    out: &mut impl Write,
    checked: &[Checked],
    output: Output,
) -> anyhow::Result<()> {
    // The library's words, its options shown as flags.
    let shown = |c: &Checked| Checked {
        detail: crate::options::shown(&c.detail),
        ..c.clone()
    };
    let checked: &[Checked] = &checked.iter().map(shown).collect::<Vec<_>>();
    match output {
        Output::Json | Output::Yaml => write_doc(out, checked, output)?,
        Output::Name => {
            // An archive no receipt records has no Pod name to give: the table shows its uid.
            for c in checked
                .iter()
                .filter(|c| c.is_problem() && !c.name.is_empty())
            {
                writeln!(
                    out,
                    "{}",
                    crate::object_name(&c.api_version, &c.kind, &c.name)
                )?;
            }
        }
        Output::Table | Output::Wide | Output::Kestra => {
            let wide = output == Output::Wide;
            let rows: Vec<[String; 5]> = checked
                .iter()
                .filter(|c| wide || c.result != "ok")
                .map(|c| {
                    [
                        c.result.to_owned(),
                        c.namespace.clone(),
                        c.uid.clone(),
                        c.uri.clone(),
                        c.detail.clone(),
                    ]
                })
                .collect();
            write_columns(out, ["RESULT", "NAMESPACE", "UID", "URI", "DETAIL"], &rows)?;
            writeln!(out, "{}", verified_words(checked))?;
        }
    }
    Ok(())
}

/// A receipt `archives prune` removed, would remove or kept, as `-o json` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrunedDoc<'a> {
    result: Fate,
    #[serde(flatten)]
    receipt: Listed<'a>,
    /// The archive was already missing: only the receipt was (or would be) removed.
    archive_missing: bool,
    /// Why it was kept, or what its removal found.
    detail: String,
}

/// What `archives prune` did, as `-o json` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PruneDoc<'a> {
    /// Receipts of before this instant were older than the window.
    cutoff: String,
    dry_run: bool,
    /// The receipts older than the window: removed (or would be), then kept.
    receipts: Vec<PrunedDoc<'a>>,
    removed: usize,
    would_remove: usize,
    kept: usize,
    /// Receipts inside the window, left alone.
    in_window: usize,
    /// Every receipt read.
    of: usize,
    /// The failure that stopped the prune (nothing removed after it), or `null`.
    stopped: Option<String>,
}

/// The one word (table) of a [`Fate`].
fn fate_word(fate: Fate) -> &'static str {
    match fate {
        Fate::Removed => "removed",
        Fate::WouldRemove => "would remove",
        Fate::Kept => "kept",
    }
}

/// What `archives prune` did, as `output` says: a row per receipt older than the window and a
/// summary line (`wide` adds each uid and URI), the objects removed (`name`), or the document.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_pruned(out: &mut impl Write, prune: &Prune, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json | Output::Yaml => {
            let doc = PruneDoc {
                cutoff: rfc3339(prune.cutoff),
                dry_run: prune.dry_run,
                receipts: prune
                    .rows
                    .iter()
                    .map(|r| PrunedDoc {
                        result: r.fate,
                        receipt: listed(&r.listed),
                        archive_missing: r.archive_missing,
                        detail: crate::options::shown(&r.detail),
                    })
                    .collect(),
                removed: prune.count(Fate::Removed),
                would_remove: prune.count(Fate::WouldRemove),
                kept: prune.count(Fate::Kept),
                in_window: prune.newer,
                of: prune.receipts,
                stopped: prune.stopped.as_ref().map(|e| format!("{e:#}")),
            };
            write_doc(out, &doc, output)?;
        }
        Output::Name => {
            for r in prune.rows.iter().filter(|r| r.fate != Fate::Kept) {
                writeln!(out, "{}", name_of(&r.listed.receipt))?;
            }
        }
        Output::Table | Output::Wide | Output::Kestra => {
            let row = |r: &Pruned| {
                let l = &r.listed;
                [
                    fate_word(r.fate).to_owned(),
                    l.receipt.namespace.clone(),
                    l.receipt.kind().to_owned(),
                    l.receipt.name.clone(),
                    l.archived_at.clone(),
                    l.receipt.uid.clone(),
                    l.receipt.uri.clone(),
                    crate::options::shown(&r.detail),
                ]
            };
            let rows: Vec<[String; 8]> = prune.rows.iter().map(row).collect();
            if output == Output::Wide {
                let header = [
                    "RESULT",
                    "NAMESPACE",
                    "KIND",
                    "NAME",
                    "ARCHIVED",
                    "UID",
                    "URI",
                    "DETAIL",
                ];
                write_columns(out, header, &rows)?;
            } else {
                let rows: Vec<[String; 6]> = rows
                    .into_iter()
                    .map(|[f, n, k, p, a, _, _, d]| [f, n, k, p, a, d])
                    .collect();
                let header = ["RESULT", "NAMESPACE", "KIND", "NAME", "ARCHIVED", "DETAIL"];
                write_columns(out, header, &rows)?;
            }
            writeln!(out, "{}", summary(prune))?;
        }
    }
    Ok(())
}

/// `2 removed (1 archive already missing), 1 kept, 40 in the window, of 43 receipts (older than
/// the window: before 2026-09-02T00:00:00Z)`.
fn summary(prune: &Prune) -> String {
    let (gone, word) = if prune.dry_run {
        (Fate::WouldRemove, "would be removed")
    } else {
        (Fate::Removed, "removed")
    };
    let missing = prune
        .rows
        .iter()
        .filter(|r| r.fate == gone && r.archive_missing)
        .count();
    let missing = match missing {
        0 => String::new(),
        1 => " (1 archive already missing)".to_owned(),
        n => format!(" ({n} archives already missing)"),
    };
    let stopped = if prune.stopped.is_some() {
        "; stopped: nothing more removed"
    } else {
        ""
    };
    format!(
        "{} {}{missing}, {} kept, {} in the window, of {} receipts (older than the window: \
         before {}){stopped}",
        prune.count(gone),
        word,
        prune.count(Fate::Kept),
        prune.newer,
        prune.receipts,
        rfc3339(prune.cutoff)
    )
}
