//! The receipt and ledger store every command opens: the one its URL names, or the embedded
//! SQLite default.

use crate::Context as _;

/// Opens the store at `url`, or the embedded SQLite default, each call to it waiting at most
/// [`gc_store::DEFAULT_TIMEOUT`] for its answer.
///
/// # Errors
/// When the store cannot be opened.
pub async fn open_store(url: Option<&str>) -> crate::Result<gc_store::Store> {
    open_store_within(url, gc_store::DEFAULT_TIMEOUT).await
}

/// [`open_store`], each call to the store waiting at most `timeout` for its answer
/// (`store_timeout`).
///
/// # Errors
/// When the store cannot be opened.
pub async fn open_store_within(
    url: Option<&str>,
    timeout: std::time::Duration,
) -> crate::Result<gc_store::Store> {
    let url = match url {
        Some(url) => url.to_owned(),
        None => gc_store::default_path()
            .to_str()
            .context("the default store path is not UTF-8: give `store`")?
            .to_owned(),
    };
    (gc_store::open_within(&url, timeout).await).context("cannot open the store")
}

/// An archive sink a run proves usable before its first write ([`Sink::probe`]) and names in
/// what it says ([`Sink::shown`]).
#[async_trait::async_trait]
pub trait Sink: gc_core::ports::ArchiveSink {
    /// Writes a probe and reads it back.
    ///
    /// # Errors
    /// When the sink does not take writes or does not give them back.
    async fn probe(&self, cluster_id: &str) -> Result<(), gc_core::ports::StoreError>;
    /// Where it is, with no secret in it.
    fn shown(&self) -> String;
    /// Whether the archive `uri` names is in this sink (a receipt may name another).
    fn holds(&self, uri: &str) -> bool;
}

#[async_trait::async_trait]
impl Sink for gc_store::Archives {
    async fn probe(&self, cluster_id: &str) -> Result<(), gc_core::ports::StoreError> {
        gc_store::Archives::probe(self, cluster_id).await
    }
    fn shown(&self) -> String {
        gc_store::Archives::shown(self)
    }
    fn holds(&self, uri: &str) -> bool {
        gc_store::Archives::holds(self, uri)
    }
}
