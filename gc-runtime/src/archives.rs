//! Reading archives back through their receipts: one archive as verified ([`read_verified`]),
//! and every receipt of a cluster against its archive, with the archives no receipt records
//! ([`verify`]). The check of the bytes is `gc_core::archive::mismatch`, the one apply makes
//! before its receipt and its delete.

use std::collections::{HashMap, HashSet};

use anyhow::Context;
use gc_core::ports::{ArchiveSink as _, Receipt, Store as _, StoreError};
use gc_store::{Archives, ObjectOptions, Store};
use serde::Serialize;

/// One finding of [`verify`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    /// The namespace of the Pod (empty for an object that is not an archive).
    pub namespace: String,
    /// The Pod's name (empty when no receipt names it).
    pub name: String,
    /// The Pod's uid.
    pub uid: String,
    /// Where the archive is.
    pub uri: String,
    /// `ok`, `mismatch`, `missing`, `unreadable`, `skipped`, `noReceipt` or `unexpected`.
    pub result: &'static str,
    /// What was found, in words.
    pub detail: String,
}

impl Checked {
    /// A receipt and its archive that do not match (`mismatch`, `missing`, `unreadable`): an
    /// archive without a receipt, a skipped folder or an object that is not an archive are
    /// findings, not problems (archives are write-once).
    #[must_use]
    pub fn is_problem(&self) -> bool {
        !["ok", "skipped", "noReceipt", "unexpected"].contains(&self.result)
    }
}

/// What [`verify`] found.
#[derive(Debug)]
pub struct Verified {
    /// Each receipt's finding, then each archive without a receipt, then each object that is
    /// not an archive.
    pub checked: Vec<Checked>,
    /// How many receipts were checked.
    pub receipts: usize,
    /// With no receipt of the cluster: the clusters the store holds receipts of.
    pub clusters: Vec<String>,
}

/// The receipt of the Pod `uid` of `cluster` in `store`, and its archive read from `sink` and
/// verified against it.
///
/// # Errors
/// No receipt, an archive that cannot be read, or one that does not match its receipt.
pub async fn read_verified(
    store: &Store,
    sink: &Archives,
    cluster: &str,
    uid: &str,
) -> anyhow::Result<(Receipt, Vec<u8>)> {
    let receipt = store
        .get_receipt(cluster, uid)
        .await
        .context("cannot read the receipt")?;
    let Some(receipt) = receipt else {
        anyhow::bail!(
            "no archive of uid {uid} in cluster {cluster}: no receipt in {}",
            store.location()
        );
    };
    let bytes = read_receipted(sink, &receipt).await.context("not shown")?;
    Ok((receipt, bytes))
}

/// The archive `receipt` records, read from `sink` and verified against it.
///
/// # Errors
/// When `sink` does not hold it, it cannot be read, or it does not match `receipt`.
pub async fn read_receipted(sink: &Archives, receipt: &Receipt) -> anyhow::Result<Vec<u8>> {
    let uri = &receipt.uri;
    if !sink.holds(uri) {
        anyhow::bail!(
            "archive {uri} is not in {} (give the sink it was written to)",
            sink.shown()
        );
    }
    let bytes = sink
        .read(uri)
        .await
        .with_context(|| format!("cannot read archive {uri}"))?;
    if let Some(problem) = receipt.mismatch(&bytes) {
        anyhow::bail!("archive {uri} {problem}");
    }
    Ok(bytes)
}

/// Every receipt of `cluster` (in `namespace`, if given) against its archive, read from the sink
/// its URI names: `sink`, or the folder or bucket another receipt's URI names (a store that moved
/// from a folder to a bucket), reached with `options`; then the archives in `sink` no receipt
/// records, and the objects there that are not archives.
///
/// # Errors
/// When the receipts or the sink's archives cannot be listed.
pub async fn verify(
    store: &Store,
    sink: &Archives,
    options: &ObjectOptions,
    cluster: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Verified> {
    let cannot = "cannot list the receipts";
    let receipts = store
        .list_receipts(
            cluster,
            gc_store::ReceiptQuery {
                namespace,
                ..gc_store::ReceiptQuery::default()
            },
        )
        .await
        .context(cannot)?;
    let clusters = if receipts.is_empty() {
        store.receipt_clusters().await.context(cannot)?
    } else {
        Vec::new()
    };
    let count = receipts.len();
    let mut checked = Vec::with_capacity(count);
    let mut receipted = HashSet::new();
    let mut others = HashMap::new();
    for listed in receipts {
        let r = listed.receipt;
        let (result, detail) = check_receipt(&r, sink, &mut others, options).await;
        receipted.insert(r.uri.clone());
        checked.push(Checked {
            namespace: r.namespace,
            name: r.name,
            uid: r.uid,
            uri: r.uri,
            result,
            detail,
        });
    }
    let cannot_list = || format!("cannot list the archives in {}", sink.shown());
    let held = sink.list(Some(cluster)).await.with_context(cannot_list)?;
    let mut orphans: Vec<_> = held
        .into_iter()
        .filter(|e| namespace.is_none_or(|ns| e.key.namespace == ns))
        .filter(|e| !receipted.contains(&e.uri))
        .collect();
    orphans.sort_by(|a, b| a.uri.cmp(&b.uri));
    for e in orphans {
        checked.push(Checked {
            namespace: e.key.namespace,
            name: String::new(),
            uid: e.key.uid,
            uri: e.uri,
            result: "noReceipt",
            detail: "an archive no receipt records: a run stopped between the write and the \
                     receipt, an upload that arrived late, or an earlier archive of a Pod whose \
                     receipt names a newer one"
                .to_owned(),
        });
    }
    for uri in sink.unexpected().await.with_context(cannot_list)? {
        checked.push(Checked {
            namespace: String::new(),
            name: String::new(),
            uid: String::new(),
            uri,
            result: "unexpected",
            detail: "not an archive: gc never reads it (a temporary file an interrupted write \
                     left, or put there by other means)"
                .to_owned(),
        });
    }
    Ok(Verified {
        checked,
        receipts: count,
        clusters,
    })
}

/// One receipt against its archive, read from the sink its URI names. A folder that is not on
/// this machine is skipped, and said so.
async fn check_receipt(
    r: &Receipt,
    given: &Archives,
    others: &mut HashMap<String, Option<Archives>>,
    options: &ObjectOptions,
) -> (&'static str, String) {
    let sink = if given.holds(&r.uri) {
        given
    } else {
        let Some(root) = r.uri.rsplitn(4, '/').nth(3) else {
            return ("skipped", "not an archive URI gc writes".to_owned());
        };
        let found = others
            .entry(root.to_owned())
            .or_insert_with(|| Archives::of_uri(&r.uri, options));
        match found {
            None => return ("skipped", "not an archive URI gc writes".to_owned()),
            Some(Archives::Directory(dir)) if !dir.root().is_dir() => {
                return (
                    "skipped",
                    format!(
                        "written to the folder {}, which is not on this machine: verify it \
                         where it is (--archive-dir)",
                        dir.root().display()
                    ),
                );
            }
            Some(sink) => sink,
        }
    };
    match sink.read(&r.uri).await {
        Ok(bytes) => match r.mismatch(&bytes) {
            Some(problem) => ("mismatch", problem),
            None => ("ok", String::new()),
        },
        Err(StoreError::NotFound(_)) => {
            ("missing", "the receipt's archive does not exist".to_owned())
        }
        Err(e) => ("unreadable", e.to_string()),
    }
}
