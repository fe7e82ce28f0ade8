//! Child processes that cannot outlive the test binary, and free loopback ports.
//!
//! Each server runs under a small `sh` watchdog whose standard input is a pipe held by the test
//! process. When the test process ends, however it ends (normal exit, panic, `SIGKILL`), the
//! kernel closes the pipe, the watchdog reads end-of-file, stops the server (`SIGTERM`, then
//! `SIGKILL` after five seconds) and removes the server's directory. No signal handler, `atexit`
//! hook or `unsafe` is needed, and a recycled pid can never be mistaken for the test process.

use std::fs;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::{Error, Result};

/// The watchdog. Arguments: the directory to remove, the log file, then the server's command.
///
/// A background list gets `/dev/null` as its standard input unless redirected, hence fd 3.
/// When the server exits on its own, its exit status goes to `$dir/exited` (so the test bed can
/// report it with the log); the directory is removed only once the test process has ended.
const WATCHDOG: &str = r#"
dir=$1; log=$2; shift 2
exec 3<&0
"$@" </dev/null >"$log" 2>&1 3<&- &
child=$!
(
  while read -r _; do :; done
  [ -e "$dir/exited" ] && exit 0
  kill -TERM "$child" 2>/dev/null
  i=0
  while kill -0 "$child" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "$child" 2>/dev/null
) <&3 >/dev/null 2>&1 &
watcher=$!
exec 3<&-
wait "$child"
echo "$?" > "$dir/exited"
wait "$watcher"
rm -rf "$dir"
"#;

/// A server process under its watchdog, with its own directory and log file.
#[derive(Debug)]
pub(crate) struct Supervised {
    name: &'static str,
    dir: PathBuf,
    log: PathBuf,
    /// The watchdog; its standard input (held here) is the lifeline.
    _watchdog: Child,
}

impl Supervised {
    /// Starts `program args..` under a watchdog, in a fresh temporary directory that the
    /// watchdog removes when the server stops. `args` may refer to paths under that directory,
    /// which `args` receives.
    pub(crate) fn spawn(
        name: &'static str,
        program: &Path,
        args: impl FnOnce(&Path) -> Result<Vec<String>>,
    ) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("gc-testbed-{name}-"))
            .tempdir()
            .map_err(|e| Error::io(format!("create a directory for {name}"), e))?
            .keep();
        let log = dir.join(format!("{name}.log"));
        let args = args(&dir)?;
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg(format!("gc-testbed-{name}"))
            .arg(&dir)
            .arg(&log)
            .arg(program)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::io(format!("start {}", program.display()), e))?;
        Ok(Self {
            name,
            dir,
            log,
            _watchdog: watchdog,
        })
    }

    /// The server's directory (removed when the server stops).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Fails when the server has already exited, with its exit status and the end of its log.
    pub(crate) fn check_alive(&self) -> Result<()> {
        let Ok(status) = fs::read_to_string(self.dir.join("exited")) else {
            return Ok(());
        };
        Err(Error::Start(format!(
            "{} exited early (status {}); its log ended with:\n{}",
            self.name,
            status.trim(),
            self.log_tail()
        )))
    }

    /// The last lines of the server's log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n")
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
///
/// # Caveats
///
/// Another process may take the port between this call and the server's bind; the server then
/// exits and the test bed reports it with the server's log.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::io("find a free loopback port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("read a bound port", e))?
        .port();
    Ok(port)
}
