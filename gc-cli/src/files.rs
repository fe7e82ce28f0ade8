//! Input files read whole, naming the input when they cannot be; output files (plans, ledgers,
//! metrics) written atomically and privately.
//!
//! A file is written through a fresh temporary file with an unpredictable name, created
//! exclusively (never through a symlink or a file someone else prepared) in the target's folder
//! with mode 0600, synced, then renamed over the target. A plan or a ledger names Pods and their
//! history, so no output file is readable by other users.

use std::io::Read;
use std::path::Path;

use crate::exit::UsageError;

/// Reads the input file `path` (`-`: standard input), which is `what` (`ledger`, ...).
///
/// # Errors
/// A [`UsageError`] naming `what` and `path` when the file cannot be read.
pub(crate) fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, UsageError> {
    let mut bytes = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            bytes.reserve_exact(usize::try_from(len).unwrap_or(0));
            f.read_to_end(&mut bytes).map(|_| ())
        })
    };
    read.map_err(|e| UsageError::unreadable(what, path, e))?;
    Ok(bytes)
}

pub(crate) use gc_runtime::files::write_file;

#[cfg(test)]
mod tests {
    #[cfg(unix)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A fresh folder holding `name` with `contents`, and that file's path.
    #[cfg(unix)]
    fn folder_with(name: &str, contents: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        (dir, path)
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_symlink_is_not_followed_and_the_file_is_private() {
        use std::os::unix::fs::symlink;
        let (dir, victim) = folder_with("victim", "keep me");
        let out = dir.path().join("plan.json");
        // Both names an earlier version wrote through.
        for planted in ["plan.json.tmp", "plan.tmp"] {
            symlink(&victim, dir.path().join(planted)).unwrap();
        }
        write_file(&out, "first").unwrap();
        write_file(&out, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "second");
        let meta = std::fs::symlink_metadata(&out).unwrap();
        assert!(meta.file_type().is_file(), "a plain file, not a symlink");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        for planted in ["plan.json.tmp", "plan.tmp"] {
            let link = std::fs::symlink_metadata(dir.path().join(planted)).unwrap();
            assert!(link.file_type().is_symlink(), "{planted} is left alone");
        }
        // Nothing else is left behind.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["plan.json", "plan.json.tmp", "plan.tmp", "victim"]);
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_file_is_replaced_and_made_private() {
        let (_dir, out) = folder_with("gc.prom", "old");
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_file(&out, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn an_unreadable_input_is_a_usage_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let error = anyhow::Error::new(
            read_input(&dir.path().join("missing.json"), "inventory").unwrap_err(),
        );
        assert_eq!(crate::exit::code(&error), crate::exit::USAGE);
        let message = format!("{error:#}");
        assert!(
            message.starts_with("cannot read inventory ") && message.contains("missing.json: "),
            "{message}"
        );
    }

    #[test]
    fn a_missing_folder_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("no-such-folder").join("plan.json");
        let err = format!("{:#}", write_file(&out, "x").unwrap_err());
        assert!(
            err.contains("cannot write") && err.contains("plan.json"),
            "{err}"
        );
    }
}
