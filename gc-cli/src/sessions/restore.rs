//! `gc-cli restore sessions`: every archived object of the sessions named that does not exist
//! now, created again from its verified archive (`gc_runtime::restore`).

use clap::Args;
use gc_core::sessions::Kind;
use gc_output::sessions::write_restored;
use gc_runtime::Builder;
use gc_runtime::restore::RestoreRequest;

use crate::archives::ArchiveArgs;
use crate::exit::UsageError;
use crate::live::{self, ConnectArgs};
use crate::output::OutputArgs;
use crate::sessions::args::SESSIONS_NAMESPACE;

/// `gc-cli restore sessions`
#[derive(Debug, Args)]
pub(crate) struct RestoreSessions {
    /// The namespace the sessions' objects were deleted from (and are created again in).
    #[arg(long, short = 'n', value_name = "NS", default_value = SESSIONS_NAMESPACE)]
    namespace: String,
    /// A session whose archived objects to create again; repeat for several.
    #[arg(long = "session", value_name = "ID", required = true)]
    sessions: Vec<String>,
    /// The cluster id the run that deleted them archived them under.
    #[arg(long, default_value = "primary", value_name = "ID")]
    cluster_id: String,
    /// The kinds archived objects may be of (as `run sessions --kinds`). Default: StreamSpace's.
    #[arg(long, value_delimiter = ',', value_parser = Kind::parse, value_name = "KIND")]
    kinds: Vec<Kind>,
    /// `server`: every create a server-side dry run, no volume moved, to report what a restore
    /// would do; `none` (the default) creates. A bare `--dry-run` is `server`.
    #[arg(
        long,
        value_name = "none|server",
        num_args = 0..=1,
        require_equals = true,
        default_value = "none",
        default_missing_value = "server",
        value_parser = crate::dry_run::parse
    )]
    dry_run: bool,
    /// Once a session's objects are created, how long to wait for a claim created on its kept
    /// volume to be bound, to give the volume back its reclaim policy then. 0: do not wait (the
    /// volume keeps `Retain`; `restore` again once the claim is bound).
    #[arg(long = "bind-wait", alias = "bind-wait-seconds", default_value = "60s", value_name = "DURATION",
        value_parser = |s: &str| gc_runtime::durations::seconds_within(s, 0..=3600))]
    bind_wait_seconds: u64,
    #[command(flatten)]
    events: crate::events::EventArgs,
    /// gc's store, holding the receipts: `sqlite:PATH`, a path, or `postgres://...`. Default:
    /// the embedded SQLite file.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) fn restore(args: &RestoreSessions) -> anyhow::Result<()> {
    let sink = args.archive.sink()?;
    if let Some(empty) = args.sessions.iter().find(|s| s.is_empty()) {
        return Err(
            UsageError::new(format!("invalid --session {empty:?}: must not be empty")).into(),
        );
    }
    let kinds = if args.kinds.is_empty() {
        Kind::streamspace()
    } else {
        args.kinds.clone()
    };
    let request = RestoreRequest {
        cluster_id: args.cluster_id.clone(),
        namespace: args.namespace.clone(),
        kinds,
        sessions: args.sessions.clone(),
        bind_wait: std::time::Duration::from_secs(args.bind_wait_seconds),
    };
    request.check()?;
    let settings = gc_runtime::Settings {
        live: !args.dry_run,
        events: !args.events.no_events,
        ..gc_runtime::Settings::default()
    };
    let restored = live::block_on(async {
        let cluster = args.connect.cluster().await?;
        let store = gc_runtime::adapters::open_store_within(
            args.store.as_deref(),
            args.archive.store_timeout,
        );
        let store = store.await?;
        let collector = Builder::new(settings).cluster(cluster).store(store);
        let collector = collector.sink(sink).sessions()?;
        let restored = collector.restore(&request).await;
        collector.into_parts().2.close().await;
        Ok(restored?)
    })?;
    write_restored(&mut std::io::stdout().lock(), &restored, args.output.form)?;
    Ok(gc_runtime::restore::failures(&restored)?)
}
