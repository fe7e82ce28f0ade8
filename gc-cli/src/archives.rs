//! Where archives go (`--archive-dir` or `--archive-url`), and `gc-cli archives
//! list|show|verify|prune`: reading them back, from either sink, through the receipts in the
//! store, and removing the old ones.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use gc_output::archives::{write_checked, write_list, write_pruned, write_show};
use gc_runtime::adapters::archives::prune::{Policy, parse_window};
use gc_runtime::adapters::archives::{self, read_verified};
use gc_runtime::durations::timeout;
use gc_store::{Archives, ReceiptQuery, default_archive_dir};

use crate::clock;
use crate::exit::UsageError;
use crate::live::with_store;
use crate::output::{Output, OutputArgs};

/// Where the failed-Pod collector's archives are: a folder (the default) or an object store.
#[derive(Debug, Args)]
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
    #[arg(
        long,
        env = "GC_ARCHIVE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    archive_url: Option<String>,
    /// The object store's endpoint (MinIO, Ceph, ...). Default: `$AWS_ENDPOINT_URL`, else AWS.
    #[arg(
        long,
        env = "GC_ARCHIVE_ENDPOINT",
        hide_env_values = true,
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
    /// How long a call to gc's store may wait for its answer before the run fails, saying so.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = timeout)]
    pub(crate) store_timeout: std::time::Duration,
}

impl ArchiveArgs {
    /// The sink these flags name. Makes no request.
    ///
    /// # Errors
    /// A [`UsageError`] naming `--archive-url` when it is not an object-store URL.
    pub(crate) fn sink(&self) -> Result<Archives, UsageError> {
        let Some(url) = &self.archive_url else {
            let dir = Option::unwrap_or_else(self.archive_dir.clone(), default_archive_dir);
            return Ok(Archives::Directory(gc_store::DirectorySink::new(dir)));
        };
        gc_store::ObjectSink::open(url, &self.options())
            .map(Archives::Object)
            // The error names the URL as it may be shown, or says it is not shown.
            .map_err(|e| UsageError::because("invalid --archive-url", e))
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
    Verify(Held),
    /// Removes each receipt older than `--older-than`, its archive first: a session's receipts only
    /// all together once the newest is, and none while a kept volume it names may be restored
    /// (`--volume-retention`). Lists what went and what was kept, and why (docs/archives.md).
    Prune(Prune),
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

/// `gc-cli archives verify`: the receipts of a cluster (in a namespace) and their archives.
#[derive(Debug, Args)]
pub(crate) struct Held {
    #[command(flatten)]
    scope: Scope,
    /// Only this namespace.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// Only the manifests of session resources labelled with this session id.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// `gc-cli archives prune`
#[derive(Debug, Args)]
pub(crate) struct Prune {
    /// Remove what is older than this: `90d`, `12h`, `90m`, `3600s`.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_window)]
    older_than: std::time::Duration,
    /// How long a receipt naming a kept volume stays past its run: `run sessions`'
    /// `--volume-retention` (whole days, 0d..=3650d; a bare number is days).
    #[arg(long = "volume-retention", alias = "retain-volume-days", default_value = "7d", value_name = "DURATION", allow_negative_numbers = true,
        value_parser = |s: &str| gc_runtime::durations::within(s, gc_runtime::durations::Unit::Days, 0..=3650))]
    retain_volume_days: u64,
    /// `server` (the default, as for every command that deletes): list what would be removed and
    /// remove nothing; `none` removes. A bare `--dry-run` is `server`.
    #[arg(long, value_name = "none|server", num_args = 0..=1, default_value = "server",
        default_missing_value = "server", value_parser = crate::dry_run::parse)]
    dry_run: bool,
    #[command(flatten)]
    held: Held,
}

pub(crate) fn execute(command: &ArchivesCommand) -> anyhow::Result<()> {
    match command {
        ArchivesCommand::List(args) => list(args),
        ArchivesCommand::Show(args) => show(args),
        ArchivesCommand::Verify(args) => verify(args),
        ArchivesCommand::Prune(args) => prune(args),
    }
}

fn list(args: &List) -> anyhow::Result<()> {
    let instant =
        |flag, text: &Option<String>| text.as_deref().map(|t| clock::parse(flag, t)).transpose();
    let since = instant("--since", &args.since)?;
    let until = instant("--until", &args.until)?;
    let query = ReceiptQuery {
        namespace: args.namespace.as_deref(),
        name: args.pod.as_deref(),
        kind: args.kind.as_deref(),
        session: args.session.as_deref(),
    };
    let cluster = &args.scope.cluster_id;
    let at = (args.scope.store.as_deref(), gc_store::DEFAULT_TIMEOUT);
    let kept = with_store(at, async |store| {
        archives::list(store, cluster, query, since, until).await
    })?;
    let form = args.output.form;
    if kept.is_empty() && !matches!(form, Output::Json | Output::Yaml | Output::Name) {
        tracing::info!("no archive matches");
    }
    write_list(&mut std::io::stdout().lock(), &kept, form)
}

fn show(args: &Show) -> anyhow::Result<()> {
    let sink = args.archive.sink()?;
    let cluster = &args.scope.cluster_id;
    let at = (args.scope.store.as_deref(), args.archive.store_timeout);
    let (receipt, bytes) = with_store(at, async |store| {
        let uid = archives::uid_of(store, cluster, args.namespace.as_deref(), &args.uid).await?;
        anyhow::Ok(read_verified(store, &sink, cluster, &uid).await?)
    })?;
    let out = &mut std::io::stdout().lock();
    write_show(out, &receipt, &bytes, args.output.form)
}

fn verify(args: &Held) -> anyhow::Result<()> {
    let sink = args.archive.sink()?;
    let scope = (args.namespace.as_deref(), args.session.as_deref());
    let (cluster, options) = (&args.scope.cluster_id, args.archive.options());
    let at = (args.scope.store.as_deref(), args.archive.store_timeout);
    let verified = with_store(at, async |store| {
        archives::verify(store, &sink, &options, cluster, scope).await
    })?;
    let out = &mut std::io::stdout().lock();
    write_checked(out, &verified.checked, args.output.form)?;
    Ok(verified.outcome(cluster, scope)?)
}

fn prune(args: &Prune) -> anyhow::Result<()> {
    let held = &args.held;
    let sink = held.archive.sink()?;
    let policy = Policy::new(
        args.older_than,
        u32::try_from(args.retain_volume_days).unwrap_or(3650),
        args.dry_run,
    );
    let (cluster, namespace) = (&held.scope.cluster_id, held.namespace.as_deref());
    let at = (held.scope.store.as_deref(), held.archive.store_timeout);
    let pruned = with_store(at, async |store| {
        let scope = (namespace, held.session.as_deref());
        archives::prune::prune(store, &sink, cluster, scope, &policy, clock::now()).await
    })?;
    write_pruned(&mut std::io::stdout().lock(), &pruned, held.output.form)?;
    Ok(pruned.outcome()?)
}
