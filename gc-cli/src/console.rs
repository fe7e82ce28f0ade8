//! `gc-cli console`: the operator's web console (`gc_console`) with `run sessions`' flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::archives::ArchiveArgs;
use crate::sessions::args::SessionArgs;

/// `gc-cli console`
#[derive(Debug, Args)]
pub(crate) struct Console {
    /// The loopback address to serve on (port 0: any free port); the URL to open, with its
    /// one-time token, is printed on stderr.
    #[arg(long, default_value = "127.0.0.1:8731", value_name = "ADDR")]
    listen: SocketAddr,
    #[command(flatten)]
    args: SessionArgs,
    /// gc's store (`sqlite:PATH`, a path, or `postgres://...`). Default: the embedded SQLite file.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    #[command(flatten)]
    archive: ArchiveArgs,
    /// Append the audit lines of what is done here to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    #[command(flatten)]
    lock: crate::live::LockArgs,
    #[command(flatten)]
    events: crate::events::EventArgs,
}

pub(crate) fn console(args: &Console) -> anyhow::Result<()> {
    args.args.check()?;
    let listener = std::net::TcpListener::bind(args.listen);
    let cannot = || format!("cannot listen on --listen {}", args.listen);
    let listener = listener.map_err(|e| crate::exit::UsageError::because(cannot(), e))?;
    listener.set_nonblocking(true)?;
    crate::signals::install()?;
    let now = (args.args.now.as_deref()).map(|now| crate::clock::at(Some(now)));
    let (lock, events, timeout) = (&args.lock, &args.events, args.archive.store_timeout);
    let audit = crate::sessions::run::audit_sink(args.audit_log.as_ref(), None)?;
    let console = gc_console::Console {
        sources: args.args.sources(),
        store: args.store.clone(),
        sink: args.archive.sink()?,
        settings: crate::sessions::run::settings_of(lock, events, timeout, now.transpose()?),
        requests: gc_runtime::requests::RequestOptions::default(),
        audit: Box::new(gc_runtime::audit::AuditLog(audit)),
        bind_wait: std::time::Duration::from_secs(60),
    };
    let config = |ns: &str| args.args.config(ns).map_err(gc_runtime::Error::other);
    let selection = args.args.namespaces.selection();
    let ready = |url: &str| eprintln!("Open the console (the link works once): {url}");
    crate::live::block_on(async { Ok(console.serve(listener, &selection, config, ready).await?) })
}
