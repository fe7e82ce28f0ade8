//! [`Archives`]: the archive sink a run was given, a folder or an object store, behind one type.

use async_trait::async_trait;
use gc_core::ports::{ArchiveKey, ArchiveSink, StoreError};

use crate::{ArchiveEntry, DirectorySink, ObjectOptions, ObjectSink};

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

    /// The sink that wrote the archive `uri` names: the folder, or the bucket and prefix (opened
    /// with `options`), above its `<cluster>/<namespace>/<file>`. Makes no request. `None` when
    /// the URI names no sink gc writes to.
    pub fn of_uri(uri: &str, options: &ObjectOptions) -> Option<Self> {
        let mut segments = uri.rsplitn(4, '/');
        let (_file, _namespace, _cluster) = (segments.next()?, segments.next()?, segments.next()?);
        let root = segments.next()?;
        let sink = if let Some(path) = root.strip_prefix("file://") {
            let path = crate::percent_decode(path).filter(|p| p.starts_with('/'))?;
            Self::Directory(DirectorySink::new(path.into()))
        } else if root.starts_with("s3://") {
            Self::Object(ObjectSink::open(root, options).ok()?)
        } else {
            return None;
        };
        sink.holds(uri).then_some(sink)
    }

    /// Proves the sink is there to read, writing nothing: the folder exists (an unmounted volume
    /// would make every archive look missing), or the object store answers a listing with these
    /// credentials and has the bucket.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] saying what is wrong with the sink.
    pub async fn check(&self) -> Result<(), StoreError> {
        match self {
            Self::Directory(sink) if sink.root().is_dir() => Ok(()),
            Self::Directory(sink) => Err(StoreError::Unavailable(format!(
                "the archive folder {} does not exist or is not a folder",
                sink.root().display()
            ))),
            Self::Object(sink) => sink.check().await,
        }
    }

    /// Removes the archive `uri` names from the sink: `true` when it was there, `false` when it
    /// was already missing.
    ///
    /// # Errors
    /// [`StoreError::Other`] for a URI this sink would not write (nothing is touched), otherwise
    /// [`StoreError`] saying why it could not be removed.
    pub async fn remove(&self, uri: &str) -> Result<bool, StoreError> {
        match self {
            Self::Directory(sink) => sink.remove(uri).await,
            Self::Object(sink) => sink.remove(uri).await,
        }
    }

    /// Whether the archive `uri` names is in the sink.
    ///
    /// # Errors
    /// As [`Archives::remove`], touching nothing.
    pub async fn exists(&self, uri: &str) -> Result<bool, StoreError> {
        match self {
            Self::Directory(sink) => sink.exists(uri).await,
            Self::Object(sink) => sink.exists(uri).await,
        }
    }

    /// The URIs of what the sink holds that is neither an archive nor a sink probe, sorted.
    ///
    /// # Errors
    /// [`StoreError`] when the sink cannot be listed.
    pub async fn unexpected(&self) -> Result<Vec<String>, StoreError> {
        match self {
            Self::Directory(sink) => sink.unexpected().await,
            Self::Object(sink) => sink.unexpected().await,
        }
    }

    /// Whether `uri` names a place in this sink (archives of another sink cannot be read here).
    pub fn holds(&self, uri: &str) -> bool {
        match self {
            Self::Directory(sink) => sink.holds(uri),
            Self::Object(sink) => sink.holds(uri),
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

#[async_trait]
impl gc_core::ports::Sink for Archives {
    async fn probe(&self, cluster_id: &str) -> Result<(), StoreError> {
        Archives::probe(self, cluster_id).await
    }
    fn shown(&self) -> String {
        Archives::shown(self)
    }
    fn holds(&self, uri: &str) -> bool {
        Archives::holds(self, uri)
    }
}
