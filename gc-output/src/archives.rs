//! Archives read back (`archives list|show|verify`): the receipts, one archive as the object it
//! was, and what verification found.

use std::io::Write;

use anyhow::Context;
use gc_core::ports::Receipt;
use gc_runtime::archives::Checked;
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
            let rows: Vec<[String; 8]> = kept
                .iter()
                .map(|l| {
                    let r = &l.receipt;
                    [
                        l.archived_at.clone(),
                        r.namespace.clone(),
                        r.kind().to_owned(),
                        r.name.clone(),
                        r.uid.clone(),
                        r.bytes.to_string(),
                        r.sha256.clone(),
                        r.uri.clone(),
                    ]
                })
                .collect();
            if output == Output::Wide {
                let header = [
                    "ARCHIVED",
                    "NAMESPACE",
                    "KIND",
                    "NAME",
                    "UID",
                    "BYTES",
                    "SHA256",
                    "URI",
                ];
                write_columns(out, header, &rows)?;
            } else {
                let rows: Vec<[String; 7]> = rows
                    .into_iter()
                    .map(|[a, n, k, p, u, b, _, uri]| [a, n, k, p, u, b, uri])
                    .collect();
                let header = [
                    "ARCHIVED",
                    "NAMESPACE",
                    "KIND",
                    "NAME",
                    "UID",
                    "BYTES",
                    "URI",
                ];
                write_columns(out, header, &rows)?;
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
    match output {
        Output::Json | Output::Yaml => write_doc(out, checked, output)?,
        Output::Name => {
            // An archive no receipt records has no Pod name to give: the table shows its uid.
            for c in checked
                .iter()
                .filter(|c| c.is_problem() && !c.name.is_empty())
            {
                writeln!(out, "pod/{}", c.name)?;
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
        }
    }
    Ok(())
}
