//! Where archives go (`--archive-dir` or `--archive-url`), and `gc-cli archives list|show|verify`:
//! reading them back, from either sink, through the receipts in the store.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use gc_core::ports::Receipt;
use gc_runtime::archives::{self, Verified, read_verified};
use gc_runtime::open_store;
use gc_store::{Archives, ListedReceipt, ReceiptQuery};
use serde::Serialize;
use serde_json::Value;

use crate::clock;
use crate::exit::UsageError;
use crate::live::block_on;
use crate::output::{Output, OutputArgs, escape, object_name, rfc3339, write_columns, write_doc};

/// Where the failed-Pod collector's archives are: a folder (the default) or an object store.
#[derive(Debug, Args, Default)]
pub(crate) struct ArchiveArgs {
    /// Folder for the archives. Default: `archives` beside the embedded store.
    #[arg(
        long,
        env = "GC_ARCHIVE_DIR",
        value_name = "DIR",
        conflicts_with = "archive_url"
    )]
    archive_dir: Option<PathBuf>,
    /// An object store for the archives instead of a folder: `s3://BUCKET[/PREFIX]` (S3, MinIO,
    /// Ceph, ...). Credentials come from `$AWS_ACCESS_KEY_ID` and `$AWS_SECRET_ACCESS_KEY` (or
    /// the other standard AWS sources) or `--archive-credentials-file`, never from a flag.
    #[arg(long, env = "GC_ARCHIVE_URL", value_name = "URL")]
    archive_url: Option<String>,
    /// The object store's endpoint (MinIO, Ceph, ...). Default: `$AWS_ENDPOINT_URL`, else AWS.
    #[arg(
        long,
        env = "GC_ARCHIVE_ENDPOINT",
        value_name = "URL",
        requires = "archive_url"
    )]
    archive_endpoint: Option<String>,
    /// The object store's region. Default: `$AWS_REGION`, else `us-east-1`.
    #[arg(
        long,
        env = "GC_ARCHIVE_REGION",
        value_name = "REGION",
        requires = "archive_url"
    )]
    archive_region: Option<String>,
    /// An AWS shared-credentials file for the object store (`[default]` or `$AWS_PROFILE`), for
    /// example a mounted Secret.
    #[arg(
        long,
        env = "GC_ARCHIVE_CREDENTIALS_FILE",
        value_name = "FILE",
        requires = "archive_url"
    )]
    archive_credentials_file: Option<PathBuf>,
}

impl ArchiveArgs {
    /// The sink these flags name. Makes no request.
    ///
    /// # Errors
    /// A [`UsageError`] naming `--archive-url` when it is not an object-store URL.
    pub(crate) fn sink(&self) -> Result<Archives, UsageError> {
        let Some(url) = &self.archive_url else {
            let dir = self
                .archive_dir
                .clone()
                .unwrap_or_else(gc_store::default_archive_dir);
            return Ok(Archives::Directory(gc_store::DirectorySink::new(dir)));
        };
        gc_store::ObjectSink::open(url, &self.options())
            .map(Archives::Object)
            .map_err(|e| UsageError::because(format!("invalid --archive-url {url:?}"), e))
    }

    /// How an object store is reached: the endpoint, region and credentials these flags name.
    pub(crate) fn options(&self) -> gc_store::ObjectOptions {
        gc_store::ObjectOptions {
            endpoint: self.archive_endpoint.clone(),
            region: self.archive_region.clone(),
            credentials_file: self.archive_credentials_file.clone(),
        }
    }
}

/// `gc-cli archives ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ArchivesCommand {
    /// The receipts of archived failed Pods and of the session resources' manifests archived
    /// before their deletes, newest first.
    List(List),
    /// One archived Pod: its metadata, status and each container's exit code, reason and message;
    /// or one session resource's manifest: the object it was, its session and labels.
    ///
    /// The archive is verified against its receipt first. `-o json` prints it exactly as stored,
    /// `-o yaml` the same document as YAML, `-o name` `KIND/NAME`.
    Show(Show),
    /// Every receipt against its archive's sha256 and size, and every archive without a receipt.
    /// Exits 1 when a receipt and its archive do not match (an archive without a receipt is
    /// listed, not a failure: archives are write-once).
    ///
    /// `-o table` lists the problems only, `-o wide` every archive, `-o name` the Pods with a
    /// problem.
    Verify(Verify),
}

/// Which receipts, in which store.
#[derive(Debug, Args)]
pub(crate) struct Scope {
    /// The cluster the archives belong to.
    #[arg(long, default_value = "primary", value_name = "ID")]
    cluster_id: String,
    /// The store holding the receipts: `sqlite:PATH`, a path, or `postgres://...`. Default: the
    /// embedded SQLite file.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
}

/// `gc-cli archives list`
#[derive(Debug, Args)]
pub(crate) struct List {
    #[command(flatten)]
    scope: Scope,
    /// Only this namespace.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// Only objects of this name.
    #[arg(long, alias = "name", value_name = "NAME")]
    pod: Option<String>,
    /// Only archives of this kind: `Pod` (the failed-Pod collector's) or a session resource's
    /// (`Deployment`, `Service`, `PersistentVolumeClaim`, `Session`, ...), any case.
    #[arg(long, value_name = "KIND")]
    kind: Option<String>,
    /// Only the manifests of session resources labelled with this session id.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only archives recorded at or after this instant (RFC 3339).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only archives recorded before this instant (RFC 3339).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `gc-cli archives show`
#[derive(Debug, Args)]
pub(crate) struct Show {
    /// The archived object's uid; or `KIND/NAME` as `-o name` prints it (`pod/NAME`,
    /// `deployment.apps/NAME`), with `-n`: that object's newest archive.
    #[arg(value_name = "UID|KIND/NAME")]
    uid: String,
    /// The namespace of a `KIND/NAME`.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    #[command(flatten)]
    scope: Scope,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// `gc-cli archives verify`
#[derive(Debug, Args)]
pub(crate) struct Verify {
    #[command(flatten)]
    scope: Scope,
    /// Only this namespace.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) fn execute(command: &ArchivesCommand) -> anyhow::Result<()> {
    match command {
        ArchivesCommand::List(args) => list(args),
        ArchivesCommand::Show(args) => show(args),
        ArchivesCommand::Verify(args) => verify(args),
    }
}

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

fn list(args: &List) -> anyhow::Result<()> {
    let instant =
        |flag, text: &Option<String>| text.as_deref().map(|t| clock::parse(flag, t)).transpose();
    let since = instant("--since", &args.since)?;
    let until = instant("--until", &args.until)?;
    let receipts = block_on(async {
        let store = open_store(args.scope.store.as_deref()).await?;
        let listed = store
            .list_receipts(
                &args.scope.cluster_id,
                ReceiptQuery {
                    namespace: args.namespace.as_deref(),
                    name: args.pod.as_deref(),
                    kind: args.kind.as_deref(),
                    session: args.session.as_deref(),
                },
            )
            .await
            .context("cannot list the receipts")?;
        store.close().await;
        Ok(listed)
    })?;
    let mut kept = Vec::new();
    for listed in &receipts {
        let at = clock::parse("archivedAt", &listed.archived_at)
            .with_context(|| format!("receipt of Pod {}", listed.receipt.uid))?;
        if since.is_none_or(|s| at >= s) && until.is_none_or(|u| at < u) {
            kept.push(listed);
        }
    }
    let mut out = std::io::stdout().lock();
    match args.output.form {
        Output::Json | Output::Yaml => {
            let doc: Vec<Listed> = kept.iter().map(|l| listed(l)).collect();
            write_doc(&mut out, &doc, args.output.form)?;
        }
        Output::Name => {
            for l in &kept {
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
            if args.output.form == Output::Wide {
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
                write_columns(&mut out, header, &rows)?;
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
                write_columns(&mut out, header, &rows)?;
            }
            if kept.is_empty() {
                tracing::info!("no archive matches");
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

/// The uid `show` names: its argument, or the uid of the newest archive of its `KIND/NAME`.
async fn newest_of(store: &gc_store::Store, args: &Show) -> anyhow::Result<String> {
    let Some((kind, name)) = args.uid.split_once('/') else {
        return Ok(args.uid.clone());
    };
    let Some(namespace) = args.namespace.as_deref() else {
        let why = format!("archives show {}: a KIND/NAME needs -n NAMESPACE", args.uid);
        return Err(UsageError::new(why).into());
    };
    // `deployment.apps` is the Kind `deployment` of the group `apps` (`pod`: the core group);
    // receipts match the Kind in any case, and the group exactly.
    let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
    let query = ReceiptQuery {
        namespace: Some(namespace),
        name: Some(name),
        kind: Some(kind),
        ..ReceiptQuery::default()
    };
    let listed = store.list_receipts(&args.scope.cluster_id, query).await?;
    let of_group = |r: &&ListedReceipt| match r.receipt.api_version().split_once('/') {
        Some((g, _)) => g == group,
        None => group.is_empty(),
    };
    let newest = listed.iter().find(of_group).ok_or_else(|| {
        anyhow::anyhow!(
            "no archive of {} in namespace {namespace} of cluster {} in {}",
            args.uid,
            args.scope.cluster_id,
            store.location()
        )
    })?;
    Ok(newest.receipt.uid.clone())
}

fn show(args: &Show) -> anyhow::Result<()> {
    let sink = args.archive.sink()?;
    let (receipt, bytes) = block_on(async {
        let store = open_store(args.scope.store.as_deref()).await?;
        let verified = match newest_of(&store, args).await {
            Ok(uid) => read_verified(&store, &sink, &args.scope.cluster_id, &uid).await,
            Err(e) => Err(e),
        };
        store.close().await;
        verified
    })?;
    let mut out = std::io::stdout().lock();
    match args.output.form {
        Output::Json => {
            out.write_all(&bytes)?;
            writeln!(out)?;
        }
        Output::Name => writeln!(out, "{}", name_of(&receipt))?,
        Output::Yaml | Output::Table | Output::Wide | Output::Kestra => {
            let doc: Value = serde_json::from_slice(&bytes)
                .with_context(|| format!("archive {} is not JSON", receipt.uri))?;
            if args.output.form == Output::Yaml {
                write_doc(&mut out, &doc, Output::Yaml)?;
            } else if receipt.session.is_some() {
                write_manifest(&mut out, &receipt, &doc)?;
            } else {
                write_archive(&mut out, &receipt, &doc)?;
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
fn name_of(receipt: &Receipt) -> String {
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

fn verify(args: &Verify) -> anyhow::Result<()> {
    let sink = args.archive.sink()?;
    let namespace = args.namespace.as_deref();
    let cluster = &args.scope.cluster_id;
    let options = args.archive.options();
    let verified = block_on(async {
        let store = open_store(args.scope.store.as_deref()).await?;
        let verified = archives::verify(&store, &sink, &options, cluster, namespace).await;
        store.close().await;
        verified
    })?;
    let Verified {
        checked,
        receipts,
        clusters,
    } = verified;
    // Archives are write-once: an archive without a receipt is never replaced by a later run,
    // so it is reported, not a problem (a receipt names each Pod's archive last verified).
    let count = |result: &str| checked.iter().filter(|c| c.result == result).count();
    let problems = checked.iter().filter(|c| c.is_problem()).count();
    let mut out = std::io::stdout().lock();
    match args.output.form {
        Output::Json | Output::Yaml => write_doc(&mut out, &checked, args.output.form)?,
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
            let wide = args.output.form == Output::Wide;
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
            write_columns(
                &mut out,
                ["RESULT", "NAMESPACE", "UID", "URI", "DETAIL"],
                &rows,
            )?;
        }
    }
    tracing::info!(
        "{} archive(s) match their receipts, {problems} problem(s), {} skipped, {} archive(s) \
         without a receipt, {} unexpected object(s)",
        count("ok"),
        count("skipped"),
        count("noReceipt"),
        count("unexpected"),
    );
    if problems > 0 {
        anyhow::bail!("{problems} archive(s) or receipt(s) do not match");
    }
    if receipts == 0 {
        let scope = namespace.map_or(String::new(), |ns| format!(" in namespace {ns}"));
        let elsewhere = if clusters.is_empty() {
            "the store holds no receipt at all".to_owned()
        } else {
            format!("receipts exist for --cluster-id {}", clusters.join(", "))
        };
        anyhow::bail!("nothing to verify: no receipt of cluster {cluster}{scope}; {elsewhere}");
    }
    if count("skipped") == receipts {
        anyhow::bail!("nothing verified: every one of the {receipts} receipt(s) was skipped");
    }
    Ok(())
}
