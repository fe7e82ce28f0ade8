//! The session collector's flags, validated into its settings, and the cluster and session
//! table they name.

use clap::Args;
use gc_core::selector::{DEFAULT_PROTECT_LABEL, LabelPair, Selector};
use gc_core::sessions::{Kind, SessionConfig, SessionInputs};
use gc_k8s::KubeCluster;
use gc_runtime::adapters::SessionSources;
use gc_store::{SessionTable, TableSpec};

use crate::exit::UsageError;
use crate::live::ConnectArgs;
use crate::namespaces::NamespaceArgs;

pub(crate) use gc_runtime::sessions::SESSIONS_NAMESPACE;

/// The environment variable that may hold the session database's URL.
const DATABASE_URL_ENV: &str = "GC_SESSION_DATABASE_URL";

/// What the session collector scans and how it judges, with StreamSpace's defaults.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// Identifies the cluster in audit records and the run lock's name.
    #[arg(long, default_value = "primary", value_name = "ID")]
    cluster_id: String,
    #[command(flatten)]
    pub(crate) namespaces: NamespaceArgs,
    /// Label selector choosing session resources, sent to the API server (in canonical form) as
    /// the list's labelSelector, so that nothing else is even scanned: comma-separated
    /// `key=value` (or `==`), `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`, `!key`.
    #[arg(
        long,
        short = 'l',
        default_value = "app=streamspace-session",
        value_parser = Selector::parse
    )]
    selector: Selector,
    /// Label holding the session id. Ids match the id column exactly: case-sensitive, byte for
    /// byte, as PostgreSQL compares them (no trimming, no case folding).
    #[arg(long, default_value = "session", value_name = "KEY")]
    id_label: String,
    /// Kinds scanned, comma separated or repeated: `Deployment`, `Service`,
    /// `PersistentVolumeClaim` (`pvc`), `Session` (`stream.space`), or
    /// `group/version/Kind/plural` (core group: `v1/Kind/plural`). Default: those four, and
    /// `Session` of `stream.streamspace.io` too (StreamSpace installs the definition under either
    /// group; one not installed is reported, not an error).
    #[arg(long, value_delimiter = ',', value_parser = Kind::parse, value_name = "KIND")]
    kinds: Vec<Kind>,
    /// Orphans younger than this (from `creationTimestamp`) are held: `24h`, `2d`; a bare number
    /// is hours (`--grace-hours`, its older name).
    #[arg(long = "grace", alias = "grace-hours", default_value = "24h", value_name = "DURATION",
        allow_negative_numbers = true, value_parser = gc_runtime::durations::hours)]
    grace_hours: i64,
    /// A database state that counts as gone, like a missing row (repeatable; StreamSpace
    /// soft-deletes with `deleted`). States match exactly, case-sensitive: a database that writes
    /// `Deleted` needs `--terminal-state Deleted`. Default: only a missing row makes an orphan.
    #[arg(long = "terminal-state", value_name = "STATE")]
    terminal_states: Vec<String>,
    /// A database state known to be live (repeatable). With any given, a row in a state that is
    /// neither live nor a --terminal-state is kept and reported once per run, so that a state
    /// the application added is noticed. Default: every state that is not terminal is live.
    #[arg(long = "live-state", value_name = "STATE")]
    live_states: Vec<String>,
    /// At most this many deletes per run (1..=10000); the rest wait for the next run.
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        allow_negative_numbers = true
    )]
    max_deletes: i64,
    /// The guard refuses the run when the sessions that look gone (no row, or a --terminal-state)
    /// are more than this share of the sessions judged against the database... (sessions are
    /// distinct ids, each counted once however many resources carry it: more resources labelled
    /// with a live id do not dilute the share; an id seen only on skipped resources, with no
    /// session id or already being deleted, or on those spared by --protect-label or
    /// --exclude-selector is counted on neither side)
    #[arg(long, default_value_t = 0.5, value_name = "RATIO")]
    guard_ratio: f64,
    /// ...and their resources (what would be deleted) are more than this many. Whatever the
    /// floor, the guard also refuses a run where not one judged id has a row in the table (a
    /// wrong database, a wrong schema on `search_path`, an empty replica).
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
    /// A resource with this label is never deleted, whatever its session: it is reported
    /// `protected` (plan, audit line) and not counted by the guard.
    #[arg(
        long,
        default_value = DEFAULT_PROTECT_LABEL,
        value_name = "KEY=VALUE",
        value_parser = LabelPair::parse
    )]
    protect_label: LabelPair,
    /// A label selector (the syntax of --selector): a resource it matches is never deleted,
    /// whatever its session: it is reported `excluded` (plan, audit line) and not counted by the
    /// guard. Default: none.
    #[arg(long, value_name = "SELECTOR", value_parser = Selector::parse)]
    exclude_selector: Option<Selector>,
    /// Before a claim is deleted, its PersistentVolume (reclaim policy `Delete`) is set to
    /// `Retain`, so the user's data survives the delete; a run this long after the claim's last
    /// delete gives it its policy back and Kubernetes deletes it: whole days, `7d`, `2w`; a bare
    /// number is days (`--retain-volume-days`, its older name) (0..=3650 days; 0: volumes go
    /// with their claims, and those kept earlier get their policy back). Needs `get`, `list` and
    /// `patch` on PersistentVolumes (cluster-scoped).
    #[arg(long = "volume-retention", alias = "retain-volume-days", default_value = "7d", value_name = "DURATION",
        allow_negative_numbers = true, value_parser = gc_runtime::durations::days)]
    retain_volume_days: i64,
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    database: DatabaseArgs,
    /// The instant to plan for (RFC 3339); default now. For tests.
    #[arg(long, value_name = "RFC3339", hide = true)]
    pub(crate) now: Option<String>,
}

/// Where the sessions are.
#[derive(Debug, Args)]
struct DatabaseArgs {
    /// The session database: `postgres://...`. Default: from StreamSpace's `DB_HOST`, `DB_PORT`,
    /// `DB_USER`, `DB_PASSWORD`, `DB_NAME` and `DB_SSL_MODE` (at least one set).
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
    /// Only rows whose COLUMN holds VALUE (compared as text, exactly) are sessions of this
    /// cluster; repeat for several columns (all must match). For a table several clusters share
    /// (StreamSpace's `cluster_id`, `namespace`): a session alive in another cluster then no
    /// longer keeps this cluster's leftovers. Default: every row counts.
    #[arg(long = "scope-column", value_name = "COLUMN=VALUE", value_parser = scope_pair)]
    scope_columns: Vec<(String, String)>,
}

/// `--scope-column COLUMN=VALUE`.
fn scope_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((column, value)) if !column.is_empty() => Ok((column.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not COLUMN=VALUE")),
    }
}

impl SessionArgs {
    /// The checks of these flags alone, before anything connects: each named namespace's
    /// settings (with `-A`, the settings in the default namespace; the listed ones are checked
    /// when listed), then the session database's.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        let named = self.namespaces.selection().named(SESSIONS_NAMESPACE);
        for ns in named.unwrap_or_else(|| vec![SESSIONS_NAMESPACE.to_owned()]) {
            self.config(&ns)?;
        }
        self.database.url().map(drop).map_err(Into::into)
    }

    /// The validated settings of a run in `namespace`.
    pub(crate) fn config(&self, namespace: &str) -> anyhow::Result<SessionConfig> {
        let kinds = if self.kinds.is_empty() {
            Kind::streamspace()
        } else {
            self.kinds.clone()
        };
        // As `SessionInputs::validate` checks them, in the flags' own words.
        for (i, k) in kinds.iter().enumerate() {
            if kinds[..i]
                .iter()
                .any(|seen| seen.kind == k.kind && seen.group == k.group)
            {
                let kind = format!("{}/{}", k.api_version(), k.kind);
                let message = format!("invalid --kinds: kind {kind} is given twice");
                return Err(UsageError::new(message).into());
            }
        }
        // As the core checks them, named as flags.
        let (terminal, live) = (&self.terminal_states, &self.live_states);
        let both = live.iter().find(|s| terminal.contains(s));
        let problem = [("--terminal-state", terminal), ("--live-state", live)]
            .into_iter()
            .find_map(|(flag, states)| match states {
                _ if states.iter().any(String::is_empty) => {
                    Some(format!("invalid {flag} \"\": must not be empty"))
                }
                _ if !states.is_empty() && self.database.state_column.is_empty() => Some(format!(
                    "{flag} needs a --state-column to read the state from"
                )),
                _ => None,
            })
            .or(both.map(|s| format!("invalid --live-state {s:?}: also a --terminal-state")));
        if let Some(problem) = problem {
            return Err(UsageError::new(problem).into());
        }
        let inputs = SessionInputs {
            cluster_id: self.cluster_id.clone(),
            namespace: namespace.to_owned(),
            selector: self.selector.to_string(),
            id_label: self.id_label.clone(),
            kinds,
            grace_hours: self.grace_hours,
            terminal_states: self.terminal_states.clone(),
            live_states: self.live_states.clone(),
            max_deletes: self.max_deletes,
            guard_ratio: self.guard_ratio,
            guard_floor: self.guard_floor,
            override_guard: self.override_guard,
            protect_label: self.protect_label.to_string(),
            exclude_selector: self.exclude_selector.as_ref().map(ToString::to_string),
            retain_volume_days: self.retain_volume_days,
            lookup_scope: self.database.scope_columns.clone(),
        };
        Ok(inputs.validate()?)
    }
}

impl DatabaseArgs {
    /// `--database-url`, else `$GC_SESSION_DATABASE_URL`, else StreamSpace's `DB_*` variables.
    fn url(&self) -> Result<String, UsageError> {
        let env = |name: &str| std::env::var(name).ok();
        gc_store::session_url(self.database_url.as_deref(), env)
            .map_err(|e| UsageError::new(e.to_string()))
    }

    fn spec(&self) -> TableSpec {
        TableSpec {
            table: self.table.clone(),
            id_column: self.id_column.clone(),
            state_column: Some(self.state_column.clone()).filter(|c| !c.is_empty()),
            scope: self.scope_columns.clone(),
        }
    }
}

/// The validated settings of each namespace `namespaces` name (those named are checked before
/// anything connects; `-A` lists the cluster's).
pub(crate) async fn configs(
    args: &SessionArgs,
    cluster: &KubeCluster,
) -> anyhow::Result<Vec<SessionConfig>> {
    args.namespaces
        .selection()
        .resolve(cluster, SESSIONS_NAMESPACE)
        .await?
        .iter()
        .map(|ns| args.config(ns))
        .collect()
}

impl SessionArgs {
    /// Where the cluster and the session table are.
    pub(crate) fn sources(&self) -> SessionSources {
        SessionSources {
            connection: self.connect.connection().map_err(gc_runtime::Error::other),
            database_url: self.database.url().map_err(gc_runtime::Error::other),
            table: self.database.spec(),
        }
    }
}

/// The cluster and the session table, connected and checked.
pub(crate) async fn connect(args: &SessionArgs) -> anyhow::Result<(KubeCluster, SessionTable)> {
    gc_runtime::adapters::connect_sessions(args.sources())
        .await
        .map_err(|(_, error)| error.into())
}
