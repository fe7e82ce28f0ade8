//! The receipt and ledger store every command opens: the one its URL names, or the embedded
//! SQLite default.

use anyhow::Context;

/// Opens the store at `url`, or the embedded SQLite default.
///
/// # Errors
/// When the store cannot be opened.
pub async fn open_store(url: Option<&str>) -> anyhow::Result<gc_store::Store> {
    let url = match url {
        Some(url) => url.to_owned(),
        None => gc_store::default_path()
            .to_str()
            .context("the default store path is not UTF-8: give --store")?
            .to_owned(),
    };
    gc_store::open(&url).await.context("cannot open the store")
}
