//! [`Archives`]: the archive sink a run was given, a folder or an object store, behind one type.

use async_trait::async_trait;
use gc_core::ports::{ArchiveKey, ArchiveSink, StoreError};

use crate::{ArchiveEntry, DirectorySink, ObjectSink};

/// The archive sink of a run: a folder ([`DirectorySink`]) or an object store.
#[derive(Debug, Clone)]
pub enum Archives {
    /// Files in a folder.
    Directory(DirectorySink),
    /// Objects in an S3-compatible store.
    Object(ObjectSink),
}

impl Archives {
    /// Proves the sink takes archives before anything is pinned, dry runs too: writes the
    /// probe of `cluster_id` (one fixed name per cluster outside the archives' names, replaced
    /// each run) and reads it back, so that denied writes, a read-only bucket or file system, a
    /// full disk, an unreachable store or refused credentials stop the run.
    ///
    /// # Errors
    /// [`StoreError`] saying what is wrong with the sink.
    pub async fn probe(&self, cluster_id: &str) -> Result<(), StoreError> {
        match self {
            Self::Directory(sink) => sink.probe(cluster_id).await,
            Self::Object(sink) => sink.probe(cluster_id).await,
        }
    }

    /// Every archive the sink holds for `cluster_id` (all clusters when `None`).
    ///
    /// # Errors
    /// [`StoreError`] when the sink cannot be listed.
    pub async fn list(&self, cluster_id: Option<&str>) -> Result<Vec<ArchiveEntry>, StoreError> {
        match self {
            Self::Directory(sink) => sink.list(cluster_id).await,
            Self::Object(sink) => sink.list(cluster_id).await,
        }
    }

    /// Whether `uri` names a place in this sink (archives of another sink cannot be read here).
    pub fn holds(&self, uri: &str) -> bool {
        match self {
            Self::Directory(sink) => sink.holds(uri),
            Self::Object(sink) => {
                uri.starts_with(&format!("{}/", sink.url().trim_end_matches('/')))
            }
        }
    }

    /// The sink as it may be shown: the folder, or the object store's URL.
    pub fn shown(&self) -> String {
        match self {
            Self::Directory(sink) => sink.root().display().to_string(),
            Self::Object(sink) => sink.url().to_owned(),
        }
    }
}

#[async_trait]
impl ArchiveSink for Archives {
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        match self {
            Self::Directory(sink) => sink.write(key, bytes).await,
            Self::Object(sink) => sink.write(key, bytes).await,
        }
    }

    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        match self {
            Self::Directory(sink) => sink.read(uri).await,
            Self::Object(sink) => sink.read(uri).await,
        }
    }
}
