//! Archives as files in a folder: `<root>/<cluster>/<namespace>/<uid>.<sha256>.json`, written once.
//!
//! Every part of a file's path comes from the [`ArchiveKey`] and is checked against a pattern
//! that has no room for `.`, `/` or anything a Pod's author chooses, so no key can name a file
//! outside the root. URIs are `file://` and the root's absolute path; [`DirectorySink::read`]
//! takes back only URIs of that form, so a receipt edited to point elsewhere reads nothing.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use gc_core::input::is_dns_label;
use gc_core::ports::{ArchiveKey, ArchiveSink, StoreError};

/// The default archive folder: `archives` next to the embedded database ([`crate::default_path`]),
/// so `$GC_STATE_DIR/archives`, else `$XDG_STATE_HOME/gc/archives`, else
/// `~/.local/state/gc/archives`.
pub fn default_archive_dir() -> PathBuf {
    crate::default_path().with_file_name("archives")
}

/// Archives in a folder, one JSON file per Pod. Implements [`ArchiveSink`].
///
/// # Guarantees
/// A write is durable before it returns: the bytes go to a temporary file in the target's folder
/// (created exclusively, mode 0600), which is synced, linked to the target's name (never over
/// another file: archives are write-once) and whose folder is synced; so a reader sees a whole
/// archive or none. Folders are created with mode 0700.
///
/// # Caveats
/// A crash mid-write can leave a temporary file (`.<uid>.<pid>.<n>.tmp`) next to the target;
/// it is never read, a later write does not reuse its name, and `archives verify` lists it. Unix only for the
/// modes; elsewhere files get the platform's defaults.
#[derive(Debug, Clone)]
pub struct DirectorySink {
    root: PathBuf,
    /// The folder syncs the writes in flight share.
    folders: std::sync::Arc<FolderSyncs>,
}

impl DirectorySink {
    /// A sink under `root`, made absolute against the current folder. Nothing is created until
    /// the first write.
    pub fn new(root: PathBuf) -> Self {
        let root = std::path::absolute(&root).unwrap_or(root);
        // Rebuilt from its components: no trailing `/` or inner `.`, so URIs have one form.
        let root = root.components().collect();
        Self {
            root,
            folders: std::sync::Arc::default(),
        }
    }

    /// The folder archives are written under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The URI prefix of this sink's archives: `file://` and the root, percent-encoded.
    fn uri_prefix(&self) -> Result<String, StoreError> {
        if !self.root.is_absolute() {
            // Only an empty root, or no current folder to resolve one against, gets here.
            return Err(StoreError::Other(format!(
                "archive folder {:?} is not an absolute path",
                self.root
            )));
        }
        let root = encode_path(&self.root);
        Ok(format!("file://{}/", root.trim_end_matches('/')))
    }

    /// The file's path and URI for `key`'s archive of sha256 `digest`, after checking every part.
    fn locate(&self, key: &ArchiveKey, digest: String) -> Result<Located, StoreError> {
        let parts = Parts::of(key, digest)?;
        Ok(Located {
            uri: format!("{}{}", self.uri_prefix()?, parts.relative()),
            folder: self.root.join(&parts.cluster).join(&parts.namespace),
            parts,
        })
    }

    /// Whether `uri` names a place under this sink's root (whether or not an archive is there).
    pub fn holds(&self, uri: &str) -> bool {
        self.uri_prefix()
            .is_ok_and(|prefix| uri.starts_with(&prefix))
    }

    /// The path of an archive URI this sink wrote, or a refusal.
    fn path_of_uri(&self, uri: &str) -> Result<PathBuf, StoreError> {
        let refuse = |why: &str| {
            Err(StoreError::Other(format!(
                "refusing to read archive {uri:?}: {why}"
            )))
        };
        let prefix = self.uri_prefix()?;
        let Some(relative) = uri.strip_prefix(&prefix) else {
            return refuse(&format!(
                "not a file URI under {}",
                prefix.trim_end_matches('/')
            ));
        };
        let parts = Parts::parse(relative).map_err(|why| match why {
            Refusal::Shape(why) => {
                StoreError::Other(format!("refusing to read archive {uri:?}: {why}"))
            }
            Refusal::Part(e) => e,
        })?;
        Ok(self.root.join(parts.relative()))
    }
}

impl DirectorySink {
    /// Every archive under the root for `cluster_id` (all clusters when `None`), in no
    /// particular order. Files whose path is not `<cluster>/<namespace>/<uid>.json` with checked
    /// parts (temporary files of an interrupted write, anything else) are not archives.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a folder cannot be read; a root that does not exist yet
    /// holds no archive.
    pub async fn list(&self, cluster_id: Option<&str>) -> Result<Vec<ArchiveEntry>, StoreError> {
        let prefix = self.uri_prefix()?;
        let root = self.root.clone();
        let only = cluster_id.map(str::to_owned);
        blocking(move || {
            let mut found = Vec::new();
            for cluster in entries(&root)? {
                if only.as_ref().is_some_and(|c| *c != cluster) {
                    continue;
                }
                for namespace in entries(&root.join(&cluster))? {
                    for file in entries(&root.join(&cluster).join(&namespace))? {
                        let Ok(parts) = Parts::parse(&format!("{cluster}/{namespace}/{file}"))
                        else {
                            continue;
                        };
                        let path = root.join(parts.relative());
                        let meta = fs::symlink_metadata(&path).map_err(|e| {
                            StoreError::Unavailable(format!("cannot read {}: {e}", path.display()))
                        })?;
                        if meta.is_file() {
                            found.push(ArchiveEntry {
                                uri: format!("{prefix}{}", parts.relative()),
                                key: parts.key(),
                                bytes: meta.len(),
                            });
                        }
                    }
                }
            }
            Ok(found)
        })
        .await
    }
}

impl DirectorySink {
    /// Removes the archive `uri` names: `true` when it was there, `false` when it was already
    /// missing. The folder is synced after, so the removal is durable when this returns; the
    /// folders are left, empty or not.
    ///
    /// # Errors
    /// [`StoreError::Other`] for a URI this sink would not write (nothing is touched);
    /// [`StoreError::Unavailable`] when the file cannot be removed (permissions, a read-only
    /// file system, a folder where the file should be).
    pub async fn remove(&self, uri: &str) -> Result<bool, StoreError> {
        let path = self.path_of_uri(uri)?;
        let uri = uri.to_owned();
        blocking(move || {
            let cannot =
                |e: io::Error| StoreError::Unavailable(format!("cannot remove archive {uri}: {e}"));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(cannot(e)),
            }
            if let Some(folder) = path.parent() {
                sync_folder(folder).map_err(cannot)?;
            }
            Ok(true)
        })
        .await
    }

    /// Whether the archive `uri` names is there.
    ///
    /// # Errors
    /// As [`DirectorySink::remove`], touching nothing.
    pub async fn exists(&self, uri: &str) -> Result<bool, StoreError> {
        let path = self.path_of_uri(uri)?;
        let uri = uri.to_owned();
        blocking(move || match fs::symlink_metadata(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::Unavailable(format!(
                "cannot look for archive {uri}: {e}"
            ))),
        })
        .await
    }
}

impl DirectorySink {
    /// The URIs of the files under the root that are neither archives (of any cluster) nor
    /// sink probes, sorted: temporary files an interrupted write left, anything put there by
    /// hand. gc never reads them; `archives verify` lists them. Links are not followed.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a folder cannot be read.
    pub async fn unexpected(&self) -> Result<Vec<String>, StoreError> {
        let prefix = self.uri_prefix()?;
        let root = self.root.clone();
        blocking(move || {
            let mut found = Vec::new();
            let mut folders = vec![String::new()];
            while let Some(folder) = folders.pop() {
                let path = root.join(&folder);
                let read = match fs::read_dir(&path) {
                    Ok(read) => read,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        return Err(StoreError::Unavailable(format!(
                            "cannot list {}: {e}",
                            path.display()
                        )));
                    }
                };
                for entry in read {
                    let entry = entry.map_err(|e| {
                        StoreError::Unavailable(format!("cannot list {}: {e}", path.display()))
                    })?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let relative = if folder.is_empty() {
                        name
                    } else {
                        format!("{folder}/{name}")
                    };
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        folders.push(relative);
                    } else if !is_known(&relative) {
                        found.push(format!("{prefix}{}", encode_path(Path::new(&relative))));
                    }
                }
            }
            found.sort();
            Ok(found)
        })
        .await
    }
}

/// The names in `folder` that are valid UTF-8 (no archive has another name); none when the
/// folder does not exist or is not a folder.
fn entries(folder: &Path) -> Result<Vec<String>, StoreError> {
    let read = match fs::read_dir(folder) {
        Ok(read) => read,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new());
        }
        Err(e) => {
            return Err(StoreError::Unavailable(format!(
                "cannot list {}: {e}",
                folder.display()
            )));
        }
    };
    let mut names = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| {
            StoreError::Unavailable(format!("cannot list {}: {e}", folder.display()))
        })?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// A checked key: each part safe as one path component (and one object-key segment), and the
/// archive's digest when its name carries one (every archive written since archives are
/// write-once; `<uid>.json` names the archives written before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parts {
    pub(crate) cluster: String,
    pub(crate) namespace: String,
    pub(crate) uid: String,
    pub(crate) digest: Option<String>,
}

/// Why a relative name is not an archive's.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Not `<cluster>/<namespace>/<uid>[.<sha256>].json`.
    Shape(&'static str),
    /// A part fails its check.
    Part(StoreError),
}

/// The folder (or key segment) of the sink probe, beside the clusters' folders: a cluster id
/// never starts with `.`, so no probe is ever taken for an archive.
pub(crate) const PROBE_FOLDER: &str = ".gc-probe";

/// Whether `relative` (a name under a sink's root or prefix, `/`-separated) is an archive's
/// name or a sink probe's: anything else is not gc's to read.
pub(crate) fn is_known(relative: &str) -> bool {
    Parts::parse(relative).is_ok()
        || relative
            .strip_prefix(PROBE_FOLDER)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|cluster| Parts::check(cluster, "default", "0").is_ok())
}

impl Parts {
    pub(crate) fn check(cluster: &str, namespace: &str, uid: &str) -> Result<Self, StoreError> {
        let refuse = |part: &str, value: &str, rule: &str| {
            Err(StoreError::Other(format!(
                "refusing archive key: {part} {value:?} must match {rule}"
            )))
        };
        if !is_cluster(cluster) {
            return refuse("cluster", cluster, "[a-z0-9-]{1,63}");
        }
        if !is_dns_label(namespace) {
            return refuse("namespace", namespace, "a DNS label");
        }
        if !is_uid(uid) {
            return refuse("uid", uid, "[A-Za-z0-9-]{1,128}");
        }
        Ok(Self {
            cluster: cluster.to_owned(),
            namespace: namespace.to_owned(),
            uid: uid.to_owned(),
            digest: None,
        })
    }

    /// The parts of `key`, named for the archive whose sha256 is `digest`.
    pub(crate) fn of(key: &ArchiveKey, digest: String) -> Result<Self, StoreError> {
        let parts = Self::check(&key.cluster_id, &key.namespace, &key.uid)?;
        Ok(Self {
            digest: Some(digest),
            ..parts
        })
    }

    /// The checked parts of a relative name `<cluster>/<namespace>/<uid>.<sha256>.json` (or
    /// `<uid>.json`, the name of archives written before archives were write-once).
    pub(crate) fn parse(relative: &str) -> Result<Self, Refusal> {
        let mut split = relative.split('/');
        let (Some(cluster), Some(namespace), Some(file), None) =
            (split.next(), split.next(), split.next(), split.next())
        else {
            return Err(Refusal::Shape(
                "not of the form <cluster>/<namespace>/<uid>.<sha256>.json under the root",
            ));
        };
        let Some(stem) = file.strip_suffix(".json") else {
            return Err(Refusal::Shape("not a .json archive"));
        };
        let (uid, digest) = match stem.split_once('.') {
            Some((uid, digest)) if is_digest(digest) => (uid, Some(digest.to_owned())),
            Some(_) => return Err(Refusal::Shape("not <uid>.<sha256>.json")),
            None => (stem, None),
        };
        let parts = Self::check(cluster, namespace, uid).map_err(Refusal::Part)?;
        Ok(Self { digest, ..parts })
    }

    /// `<cluster>/<namespace>/<uid>.<sha256>.json` (`<uid>.json` without a digest).
    pub(crate) fn relative(&self) -> String {
        format!("{}/{}/{}", self.cluster, self.namespace, self.file())
    }

    /// The file name: `<uid>.<sha256>.json`, or `<uid>.json`.
    fn file(&self) -> String {
        match &self.digest {
            Some(digest) => format!("{}.{digest}.json", self.uid),
            None => format!("{}.json", self.uid),
        }
    }
}

/// Lowercase hex sha256.
fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_cluster(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

fn is_uid(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
}

/// An archive a sink holds, as its listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveEntry {
    /// The archive's URI, as receipts record it.
    pub uri: String,
    /// The cluster, namespace and uid its key names.
    pub key: ArchiveKey,
    /// Its size.
    pub bytes: u64,
}

impl Parts {
    pub(crate) fn key(&self) -> ArchiveKey {
        ArchiveKey {
            cluster_id: self.cluster.clone(),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
        }
    }
}

/// Where a key's archive goes.
struct Located {
    uri: String,
    folder: PathBuf,
    parts: Parts,
}

#[async_trait]
impl ArchiveSink for DirectorySink {
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        let located = self.locate(key, gc_core::pods::archive::digest(bytes))?;
        let (root, folders) = (self.root.clone(), std::sync::Arc::clone(&self.folders));
        let bytes = bytes.to_vec();
        blocking(move || {
            write_once(&root, &located, &bytes, &folders)?;
            Ok(located.uri)
        })
        .await
    }

    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of_uri(uri)?;
        let uri = uri.to_owned();
        blocking(move || {
            fs::read(&path).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => {
                    StoreError::NotFound(format!("archive {uri} does not exist"))
                }
                _ => StoreError::Unavailable(format!("cannot read archive {uri}: {e}")),
            })
        })
        .await
    }
}

/// Runs file I/O off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Other(format!("archive task failed: {e}")))?
}

/// Temporary names are unique within a process; the process id makes them unique across.
static NEXT_TEMPORARY: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` at `at`, never over another file: a synced temporary file is linked to the
/// archive's name (a link fails when the name exists) and its folder synced. An archive already
/// there with the same bytes (the same archive written again) is as good as this write.
fn write_once(
    root: &Path,
    at: &Located,
    bytes: &[u8],
    folders: &FolderSyncs,
) -> Result<(), StoreError> {
    let io_err = |what: &str, path: &Path, e: io::Error| {
        StoreError::Unavailable(format!("cannot {what} {}: {e}", path.display()))
    };
    folder_builder()
        .recursive(true)
        .create(root)
        .map_err(|e| io_err("create folder", root, e))?;
    let cluster = root.join(&at.parts.cluster);
    ensure_folder(root, &cluster).map_err(|e| io_err("create folder", &cluster, e))?;
    ensure_folder(&cluster, &at.folder).map_err(|e| io_err("create folder", &at.folder, e))?;

    let temporary = temporary_in(&at.folder, &at.parts.uid);
    let target = at.folder.join(at.parts.file());
    let written = write_synced(&temporary, bytes)
        .map_err(|e| io_err("write", &temporary, e))
        .and_then(|()| match fs::hard_link(&temporary, &target) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match fs::read(&target) {
                Ok(there) if there == bytes => Ok(()),
                Ok(_) => Err(StoreError::Other(format!(
                    "archive {} exists with other bytes: not replaced",
                    target.display()
                ))),
                Err(e) => Err(io_err("read", &target, e)),
            },
            Err(e) => Err(io_err("link", &target, e)),
        });
    // Best effort: a leftover temporary file is never read.
    let _ = fs::remove_file(&temporary);
    written?;
    (folders.sync(&at.folder)).map_err(|e| io_err("sync folder", &at.folder, e))
}

/// Folder syncs shared by the writes that need them (a group commit): a write whose link is
/// made takes a ticket and waits for the folder's turn; a sync that started after its ticket
/// was taken made its link durable too, so it returns without a sync of its own. Writes in
/// flight together sync their folder once or twice, not once each.
#[derive(Debug, Default)]
struct FolderSyncs(Mutex<HashMap<PathBuf, std::sync::Arc<FolderSync>>>);

#[derive(Debug, Default)]
struct FolderSync {
    /// Tickets taken: each after its write's link was made.
    taken: AtomicU64,
    /// The last ticket a finished sync covers (the folder's turn).
    synced: Mutex<u64>,
}

impl FolderSyncs {
    /// Makes the entries of `folder` made so far durable (on this thread: a blocking one).
    fn sync(&self, folder: &Path) -> io::Result<()> {
        let one = {
            let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            std::sync::Arc::clone(all.entry(folder.to_owned()).or_default())
        };
        let ticket = one.taken.fetch_add(1, Ordering::SeqCst) + 1;
        let mut synced = one.synced.lock().unwrap_or_else(PoisonError::into_inner);
        if *synced >= ticket {
            return Ok(());
        }
        // Every ticket up to here was taken after its link: this sync covers them all.
        let covers = one.taken.load(Ordering::SeqCst);
        sync_folder(folder)?;
        *synced = covers;
        Ok(())
    }
}

/// A fresh temporary name in `folder` (`.<stem>.<pid>.<n>.tmp`): unique within a process, and
/// across processes by the process id.
fn temporary_in(folder: &Path, stem: &str) -> PathBuf {
    let n = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
    folder.join(format!(".{stem}.{}.{n}.tmp", std::process::id()))
}

impl DirectorySink {
    /// Proves the folder takes archives: writes the probe file `<root>/.gc-probe/<cluster>`
    /// (outside the archives' names; replaced each run), syncs it, links it to a second name
    /// as archives are linked (a file system without hard links fails here) and reads it back. A
    /// read-only or full file system, or a root that is not a writable folder, fails here.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] naming the path and the error.
    pub async fn probe(&self, cluster_id: &str) -> Result<(), StoreError> {
        Parts::check(cluster_id, "default", "0")?;
        let folder = self.root.join(PROBE_FOLDER);
        let target = folder.join(cluster_id);
        let bytes = probe_bytes(cluster_id);
        let cluster_id = cluster_id.to_owned();
        blocking(move || {
            let io_err = |what: &str, path: &Path, e: io::Error| {
                StoreError::Unavailable(format!("cannot {what} {}: {e}", path.display()))
            };
            folder_builder()
                .recursive(true)
                .create(&folder)
                .map_err(|e| io_err("create folder", &folder, e))?;
            let temporary = temporary_in(&folder, &cluster_id);
            let written = write_synced(&temporary, &bytes)
                .and_then(|()| fs::rename(&temporary, &target))
                .map_err(|e| io_err("write the probe file", &target, e));
            if written.is_err() {
                let _ = fs::remove_file(&temporary);
            }
            written?;
            // Archives are linked to their names: the folder must take a hard link.
            let link = temporary_in(&folder, &cluster_id);
            fs::hard_link(&target, &link).map_err(|e| {
                io_err(
                    "link the probe file (archives are linked to their names)",
                    &link,
                    e,
                )
            })?;
            let _ = fs::remove_file(&link);
            match fs::read(&target) {
                Ok(back) if probe_read_back(&back, &bytes, &cluster_id) => Ok(()),
                Ok(_) => Err(StoreError::Unavailable(format!(
                    "the probe file {} read back other bytes",
                    target.display()
                ))),
                Err(e) => Err(io_err("read back the probe file", &target, e)),
            }
        })
        .await
    }
}

/// Whether `back`, read back from the probe of `cluster_id` just written as `ours`, proves the
/// write: `ours`, or the probe another run of the same cluster wrote since (two runs sharing a
/// sink, one in each namespace, probe at the same time).
pub(crate) fn probe_read_back(back: &[u8], ours: &[u8], cluster_id: &str) -> bool {
    back == ours
        || (back.starts_with(format!("gc sink probe: cluster {cluster_id}, process ").as_bytes())
            && back.ends_with(b"\n")
            && back.len() <= 200)
}

/// What a sink probe writes: unique to this write, so that reading it back proves this write.
pub(crate) fn probe_bytes(cluster_id: &str) -> Vec<u8> {
    let n = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!(
        "gc sink probe: cluster {cluster_id}, process {}, {at}.{n}\n",
        std::process::id()
    )
    .into_bytes()
}

/// Creates `folder` (mode 0700) inside `parent` unless it exists, syncing `parent` when it was
/// created so the new entry is durable. Refuses anything at `folder` that is not a real folder.
fn ensure_folder(parent: &Path, folder: &Path) -> io::Result<()> {
    match folder_builder().create(folder) {
        Ok(()) => sync_folder(parent),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if fs::symlink_metadata(folder)?.is_dir() {
                Ok(())
            } else {
                Err(io::Error::other("exists and is not a folder"))
            }
        }
        Err(e) => Err(e),
    }
}

/// Creates `path` exclusively (mode 0600), writes `bytes` and syncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

fn folder_builder() -> fs::DirBuilder {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
}

/// Makes a folder's entries (a rename, a new file) durable.
#[cfg(unix)]
fn sync_folder(folder: &Path) -> io::Result<()> {
    fs::File::open(folder)?.sync_all()
}

/// Folders cannot be opened for syncing here; the rename is as durable as the platform makes it.
#[cfg(not(unix))]
fn sync_folder(_folder: &Path) -> io::Result<()> {
    Ok(())
}

/// A path as a URI path: bytes outside RFC 3986's unreserved set and `/` become `%XX`.
fn encode_path(path: &Path) -> String {
    crate::percent_encode(path.as_os_str().as_encoded_bytes(), crate::PATH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reads_back_as_written_or_as_another_run_of_its_cluster_wrote_it() {
        let ours = probe_bytes("prod");
        let theirs = probe_bytes("prod");
        assert_ne!(ours, theirs, "each probe is unique");
        assert!(probe_read_back(&ours, &ours, "prod"));
        assert!(probe_read_back(&theirs, &ours, "prod"));
        assert!(!probe_read_back(&probe_bytes("prod-x"), &ours, "prod"));
        assert!(!probe_read_back(b"", &ours, "prod"));
        assert!(!probe_read_back(&ours[..ours.len() - 1], &ours, "prod"));
        let mut long = ours.clone();
        long.extend(vec![b'x'; 300]);
        long.push(b'\n');
        assert!(!probe_read_back(&long, &ours, "prod"));
    }

    fn key(cluster: &str, namespace: &str, uid: &str) -> ArchiveKey {
        ArchiveKey {
            cluster_id: cluster.into(),
            namespace: namespace.into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn uris_are_the_root_and_the_key() {
        let sink = DirectorySink::new(PathBuf::from("/var/lib/gc/arch ives/"));
        let digest = "0f".repeat(32);
        let at = sink
            .locate(&key("primary", "jobs", "0a-B9"), digest.clone())
            .unwrap();
        assert_eq!(
            at.uri,
            format!("file:///var/lib/gc/arch%20ives/primary/jobs/0a-B9.{digest}.json")
        );
        assert_eq!(
            at.folder,
            PathBuf::from("/var/lib/gc/arch ives/primary/jobs")
        );
        assert_eq!(
            sink.path_of_uri(&at.uri).unwrap(),
            PathBuf::from(format!(
                "/var/lib/gc/arch ives/primary/jobs/0a-B9.{digest}.json"
            ))
        );
        // Archives written before archives were write-once keep their name.
        assert_eq!(
            sink.path_of_uri("file:///var/lib/gc/arch%20ives/primary/jobs/0a-B9.json")
                .unwrap(),
            PathBuf::from("/var/lib/gc/arch ives/primary/jobs/0a-B9.json")
        );
    }

    #[test]
    fn a_relative_root_is_made_absolute_and_an_empty_one_refused() {
        let sink = DirectorySink::new(PathBuf::from("archives/./x"));
        assert!(sink.root().is_absolute());
        assert!(sink.root().ends_with("archives/x"));
        let empty = DirectorySink::new(PathBuf::new());
        let err = empty
            .locate(&key("c", "ns", "u"), "0".repeat(64))
            .map(|l| l.uri)
            .unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{err}");
        assert!(empty.path_of_uri("file:///c/ns/u.json").is_err());
    }

    #[test]
    fn keys_are_checked_part_by_part() {
        let sink = DirectorySink::new(PathBuf::from("/a"));
        let long = "u".repeat(129);
        let clusters = ["", "Primary", "a/b", ".."].map(|c| (c, "ns", "u"));
        let namespaces = ["..", "-ns", "n.s"].map(|n| ("c", n, "u"));
        let uids = ["", "..", "a/b", "a.json", "a b", &long].map(|u| ("c", "ns", u));
        for (c, n, u) in clusters.into_iter().chain(namespaces).chain(uids) {
            let err = sink
                .locate(&key(c, n, u), "0".repeat(64))
                .map(|l| l.uri)
                .unwrap_err();
            assert!(matches!(err, StoreError::Other(_)), "{c:?} {n:?} {u:?}");
        }
    }

    #[test]
    fn only_this_roots_uris_are_read() {
        let sink = DirectorySink::new(PathBuf::from("/a/archives"));
        let named = format!("file:///a/archives/c/ns/u.{}.json", "ab".repeat(32));
        let upper = format!("file:///a/archives/c/ns/u.{}.json", "AB".repeat(32));
        let short = format!("file:///a/archives/c/ns/u.{}.json", "ab".repeat(31));
        for uri in [
            "file:///a/archives/c/ns/u.json",
            "file:///a/archives/c/ns/u-2.json",
            named.as_str(),
        ] {
            assert!(sink.path_of_uri(uri).is_ok(), "{uri}");
        }
        for uri in [
            "/a/archives/c/ns/u.json",
            "s3://bucket/c/ns/u.json",
            "file://host/a/archives/c/ns/u.json",
            "file:///a/archives2/c/ns/u.json",
            "file:///a/archives/../c/ns/u.json",
            "file:///a/archives/c/../ns/u.json",
            "file:///a/archives/c/ns/../u.json",
            "file:///a/archives/c/ns/u.json/x",
            "file:///a/archives/c/ns/.u.json.1.2.tmp",
            "file:///a/archives/c/ns/u.txt",
            "file:///a/archives/c/ns/u%2Fx.json",
            "file:///a/archives//c/ns/u.json",
            "file:///a/archives/c/ns",
            upper.as_str(),
            short.as_str(),
            "file:///a/archives/c/ns/u.x.json",
            "file:///a/archives/.gc-probe/c",
        ] {
            let err = sink.path_of_uri(uri).unwrap_err();
            assert!(matches!(err, StoreError::Other(_)), "{uri}");
        }
    }
}
