//! Where the test bed's kube-apiserver and etcd binaries are.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Error, Result};

/// The environment variable naming the folder with `kube-apiserver` and `etcd`.
pub const BIN_ENV: &str = "GC_TESTBED_BIN";

/// The binaries the test bed runs.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub(crate) kube_apiserver: PathBuf,
    pub(crate) etcd: PathBuf,
    /// The folder, where `kube-controller-manager` is too (checked only when a test needs it).
    dir: PathBuf,
}

impl Binaries {
    /// Finds the binaries in `$GC_TESTBED_BIN`, or builds them (once, cached outside the
    /// repository) with `scripts/testbed-build.sh all` when the variable is unset.
    pub(crate) fn locate() -> Result<Self> {
        let dir = match std::env::var_os(BIN_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => build()?,
        };
        let binaries = Self {
            kube_apiserver: dir.join("kube-apiserver"),
            etcd: dir.join("etcd"),
            dir,
        };
        for path in [&binaries.kube_apiserver, &binaries.etcd] {
            if !path.is_file() {
                return Err(Error::Start(format!(
                    "{} is missing; run scripts/testbed-build.sh all and set {BIN_ENV} to the \
                     folder it prints",
                    path.display()
                )));
            }
        }
        Ok(binaries)
    }
}

impl Binaries {
    /// `kube-controller-manager`, of the API server's version.
    ///
    /// # Errors
    /// When it is missing.
    pub(crate) fn kube_controller_manager(&self) -> Result<PathBuf> {
        in_dir(&self.dir, "kube-controller-manager")
    }
}

/// `name` in `dir`, if it is there.
fn in_dir(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Start(format!(
            "{} is missing; run scripts/testbed-build.sh all and set {BIN_ENV} to the folder it \
             prints",
            path.display()
        )))
    }
}

/// A tool the test bed builds beside the API server (`kubectl`, `krew`, `helm`): from
/// `$GC_TESTBED_BIN`, or built now (once, cached) when it is unset.
///
/// # Errors
/// The build failed, or the tool is missing.
pub fn tool(name: &str) -> Result<PathBuf> {
    let dir = match std::env::var_os(BIN_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => build()?,
    };
    in_dir(&dir, name)
}

/// Runs `scripts/testbed-build.sh all` from the workspace root; its last stdout line is the folder.
fn build() -> Result<PathBuf> {
    let script = workspace_root().join("scripts/testbed-build.sh");
    eprintln!(
        "gc-testbed: {BIN_ENV} is unset; running {}",
        script.display()
    );
    let output = Command::new("bash")
        .arg(&script)
        .arg("all")
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::io(format!("run {}", script.display()), e))?;
    if !output.status.success() {
        return Err(Error::Start(format!(
            "{} failed ({})",
            script.display(),
            output.status
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default().trim();
    if last.is_empty() {
        return Err(Error::Start(format!(
            "{} printed no folder",
            script.display()
        )));
    }
    Ok(PathBuf::from(last))
}

/// The workspace root: this crate's parent folder.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
}
