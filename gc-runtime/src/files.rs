//! Output files (metrics files, and the CLI's plans and ledgers) written atomically and
//! privately: through a fresh temporary file with an unpredictable name, created exclusively
//! (never through a symlink or a file someone else prepared) in the target's folder with mode
//! 0600, synced, then renamed over the target.

use std::io::Write;
use std::path::Path;

use crate::Context as _;

/// The mode of every file written.
#[cfg(unix)]
const MODE: u32 = 0o600;

/// Writes `text` to `path` atomically: readers see the old file or the whole new one.
///
/// # Errors
/// When the folder cannot hold a temporary file, or the write, sync or rename fails; the
/// temporary file is removed then.
pub fn write_file(path: &Path, text: &str) -> crate::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let context = || format!("cannot write {}", path.display());
    // `tempfile` opens with O_CREAT | O_EXCL and a random name: a symlink or a file planted at
    // a predictable name is never followed or reused.
    let mut tmp = tempfile::Builder::new()
        .prefix(".gc-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(context)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(MODE))
            .with_context(context)?;
    }
    tmp.write_all(text.as_bytes()).with_context(context)?;
    tmp.as_file().sync_all().with_context(context)?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(context)?;
    // The rename itself survives a crash once the folder is synced (best effort: not every
    // file system lets a folder be opened for that).
    if let Ok(folder) = std::fs::File::open(dir) {
        let _ = folder.sync_all();
    }
    Ok(())
}
