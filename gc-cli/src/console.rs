//! `gc-cli console`: the operator's web console (`gc_console`) with `run sessions`' flags.

use clap::Args;

/// `gc-cli console`
#[derive(Debug, Args)]
pub(crate) struct Console {
    /// The loopback address to serve on (port 0: any free one); the link to open is on stderr.
    #[arg(long, default_value = "127.0.0.1:8731", value_name = "ADDR")]
    listen: std::net::SocketAddr,
    #[command(flatten)]
    args: crate::sessions::args::SessionArgs,
    /// gc's store (`sqlite:PATH`, a path, or `postgres://...`). Default: the embedded SQLite file.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    #[command(flatten)]
    archive: crate::archives::ArchiveArgs,
    /// Append the audit lines of what is done here to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<std::path::PathBuf>,
    #[command(flatten)]
    lock: crate::live::LockArgs,
    #[command(flatten)]
    events: crate::events::EventArgs,
    /// A namespace whose failed Pods to plan and approve, with the default policy (repeatable).
    #[arg(long = "pods-namespace", value_name = "NS")]
    pods: Vec<String>,
}

pub(crate) fn console(args: &Console) -> anyhow::Result<()> {
    args.args.check()?;
    crate::signals::install()?;
    let now = (args.args.now.as_deref()).map(|now| crate::clock::at(Some(now)));
    let (lock, events, timeout) = (&args.lock, &args.events, args.archive.store_timeout);
    let audit = crate::sessions::run::audit_sink(args.audit_log.as_ref(), None)?;
    let console = gc_console::Console {
        sources: args.args.sources(),
        store: args.store.clone(),
        sink: args.archive.sink()?,
        settings: crate::sessions::run::settings_of(lock, events, timeout, now.transpose()?),
        audit: Box::new(gc_runtime::audit::AuditLog(audit)),
        pods_namespaces: args.pods.clone(),
    };
    let config = |ns: &str| args.args.config(ns).map_err(gc_runtime::Error::other);
    let ready = |url: &str| eprintln!("Open the console (the link works once): {url}");
    let selection = args.args.namespaces.selection();
    let serve = console.serve(args.listen, &selection, config, ready);
    crate::live::block_on(async { Ok(serve.await?) })
}
