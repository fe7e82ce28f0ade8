//! Reading archives back through their receipts: one archive as verified ([`read_verified`]),
//! and every receipt of a cluster against its archive, with the archives no receipt records
//! ([`verify`]). The check of the bytes is `gc_core::pods::archive::mismatch`, the one apply makes
//! before its receipt and its delete.
//! [`prune`] removes the receipts older than a window with their archives.

use std::collections::{HashMap, HashSet};

use crate::Context as _;
use gc_core::ports::{ArchiveSink as _, Receipt, Store as _, StoreError};
use gc_store::{Archives, ListedReceipt, ObjectOptions, ReceiptQuery, Store};
use serde::Serialize;

pub mod prune;

/// One finding of [`verify`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    /// The archived object's `apiVersion` (empty when no receipt names it).
    pub api_version: String,
    /// Its kind: `Pod`, or a session resource's (empty when no receipt names it).
    pub kind: String,
    /// Its namespace (empty for an object that is not an archive).
    pub namespace: String,
    /// Its name (empty when no receipt names it).
    pub name: String,
    /// Its uid.
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
) -> crate::Result<(Receipt, Vec<u8>)> {
    let receipt = store
        .get_receipt(cluster, uid)
        .await
        .context("cannot read the receipt")?;
    let Some(receipt) = receipt else {
        return Err(crate::Error::msg(format!(
            "no archive of uid {uid} in cluster {cluster}: no receipt in {}",
            store.location()
        )));
    };
    let bytes = crate::restore::read_receipted(sink, &receipt)
        .await
        .context("not shown")?;
    Ok((receipt, bytes))
}

/// Every receipt of `cluster` (in `namespace`, of `session`, when given) against its archive, read
/// from the sink its URI names: `sink`, or the folder or bucket another receipt's URI names (a
/// store that moved from a folder to a bucket), reached with `options`; then, unless one session
/// is asked for (an archive no receipt records names no session), the archives in `sink` no
/// receipt records, and the objects there that are not archives.
///
/// # Errors
/// When the receipts or the sink's archives cannot be listed.
pub async fn verify(
    store: &Store,
    sink: &Archives,
    options: &ObjectOptions,
    cluster: &str,
    (namespace, session): (Option<&str>, Option<&str>),
) -> crate::Result<Verified> {
    let cannot = "cannot list the receipts";
    let receipts = store
        .list_receipts(
            cluster,
            gc_store::ReceiptQuery {
                namespace,
                session,
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
            api_version: r.api_version().to_owned(),
            kind: r.kind().to_owned(),
            namespace: r.namespace,
            name: r.name,
            uid: r.uid,
            uri: r.uri,
            result,
            detail,
        });
    }
    if session.is_some() {
        return Ok(Verified {
            checked,
            receipts: count,
            clusters,
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
            api_version: String::new(),
            kind: String::new(),
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
            api_version: String::new(),
            kind: String::new(),
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
                         where it is (`archive_dir`)",
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

/// The receipts of `cluster` that `query` matches, newest first, recorded in `[since, until)`
/// (seconds; `None`: unbounded).
///
/// # Errors
/// When the receipts cannot be listed, or one's `archivedAt` is not a timestamp.
pub async fn list(
    store: &Store,
    cluster: &str,
    query: ReceiptQuery<'_>,
    since: Option<f64>,
    until: Option<f64>,
) -> crate::Result<Vec<ListedReceipt>> {
    let listed = store
        .list_receipts(cluster, query)
        .await
        .context("cannot list the receipts")?;
    let mut kept = Vec::with_capacity(listed.len());
    for l in listed {
        let at = gc_core::isotime::parse_timestamp(&l.archived_at)
            .with_context(|| format!("archivedAt of the receipt of {}", l.receipt.uid))?;
        if since.is_none_or(|s| at >= s) && until.is_none_or(|u| at < u) {
            kept.push(l);
        }
    }
    Ok(kept)
}

/// The uid an archive is asked for by: `object` itself when it is a uid, else the uid of the
/// newest archive of `object` in `namespace` of `cluster`, `object` being `KIND/NAME` as kubectl
/// takes it (`pod/NAME`, `deploy/NAME`, `Deployment/NAME`, `deployment.apps/NAME`): the kind, its
/// plural or short name in any case, of any group unless `.GROUP` names one.
///
/// # Errors
/// A `KIND/NAME` without `namespace` (an input error naming the object); the receipts cannot be
/// listed, or none is of that object.
pub async fn uid_of(
    store: &Store,
    cluster: &str,
    namespace: Option<&str>,
    object: &str,
) -> crate::Result<String> {
    let Some((kind, name)) = object.split_once('/') else {
        return Ok(object.to_owned());
    };
    let Some(namespace) = namespace else {
        let rule = "a KIND/NAME is looked for in one namespace: name it (`namespaces`)";
        let (input, value) = ("object", object.to_owned());
        return Err(gc_core::input::InputError::Invalid { input, value, rule }.into());
    };
    let (kind, group) = match kind.split_once('.') {
        Some((kind, group)) => (kind, Some(group)),
        None => (kind, None),
    };
    // kubectl's names of the kinds gc archives: the kind, its plural or its short name, in any
    // case; any other is taken as a kind's name as it is.
    let kind = KINDS
        .iter()
        .find(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(kind)))
        .map_or(kind, |(kind, _)| kind);
    let query = ReceiptQuery {
        namespace: Some(namespace),
        name: Some(name),
        kind: Some(kind),
        ..ReceiptQuery::default()
    };
    let listed = store.list_receipts(cluster, query).await?;
    // `KIND.GROUP` is of that group exactly; `KIND` alone of any (`pod` is core's).
    let of_group = |r: &&ListedReceipt| match (r.receipt.api_version().split_once('/'), group) {
        (_, None) => true,
        (Some((g, _)), Some(group)) => g == group,
        (None, Some(group)) => group.is_empty(),
    };
    let newest = listed.iter().find(of_group).ok_or_else(|| {
        let location = store.location();
        crate::Error::msg(format!(
            "no archive of {object} in namespace {namespace} of cluster {cluster} in {location} \
             (KIND/NAME as kubectl writes it: pod or po, deployment or deploy, service or svc, \
             persistentvolumeclaim or pvc, session, singular or plural, in any case, .GROUP to \
             name the group: deployment.apps/NAME, session.stream.space/NAME)"
        ))
    })?;
    Ok(newest.receipt.uid.clone())
}

/// The kinds gc archives, with kubectl's names for them (singular, plural, short).
const KINDS: [(&str, &[&str]); 5] = [
    ("Pod", &["pod", "pods", "po"]),
    ("Deployment", &["deployment", "deployments", "deploy"]),
    ("Service", &["service", "services", "svc"]),
    (
        "PersistentVolumeClaim",
        &["persistentvolumeclaim", "persistentvolumeclaims", "pvc"],
    ),
    ("Session", &["session", "sessions"]),
];

impl Verified {
    /// Logs what verification found, and fails when an archive and its receipt do not match,
    /// when there was no receipt of `cluster` (in `namespace`) to verify (naming the clusters
    /// the store has receipts of), or when every receipt was skipped. An archive without a
    /// receipt is reported, never a failure: archives are write-once, so a later run never
    /// replaced it.
    ///
    /// # Errors
    /// As said.
    pub fn outcome(
        &self,
        cluster: &str,
        (namespace, session): (Option<&str>, Option<&str>),
    ) -> crate::Result<()> {
        let checked = &self.checked;
        let count = |result: &str| checked.iter().filter(|c| c.result == result).count();
        let problems = checked.iter().filter(|c| c.is_problem()).count();
        tracing::info!(
            "{} archive(s) match their receipts, {problems} problem(s), {} skipped, {} archive(s) \
             without a receipt, {} unexpected object(s)",
            count("ok"),
            count("skipped"),
            count("noReceipt"),
            count("unexpected"),
        );
        if problems > 0 {
            return Err(crate::Error::msg(format!(
                "{problems} archive(s) or receipt(s) do not match"
            )));
        }
        if self.receipts == 0 {
            let mut scope = namespace.map_or(String::new(), |ns| format!(" in namespace {ns}"));
            if let Some(session) = session {
                scope.push_str(&format!(" of session {session}"));
            }
            let elsewhere = if session.is_some() {
                "no object of it was archived into this store".to_owned()
            } else if self.clusters.is_empty() {
                "the store holds no receipt at all".to_owned()
            } else {
                format!(
                    "receipts exist for `cluster_id` {}",
                    self.clusters.join(", ")
                )
            };
            return Err(crate::Error::msg(format!(
                "nothing to verify: no receipt of cluster {cluster}{scope}; {elsewhere}"
            )));
        }
        if count("skipped") == self.receipts {
            let receipts = self.receipts;
            return Err(crate::Error::msg(format!(
                "nothing verified: every one of the {receipts} receipt(s) was skipped"
            )));
        }
        Ok(())
    }
}
