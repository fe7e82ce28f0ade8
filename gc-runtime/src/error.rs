//! The library's one error type: a typed cause, the contexts it was met in, and its kind (the
//! CLI's exit code) as data.
//!
//! `{}` shows the outermost message; `{:#}` the whole chain joined with `: `, exactly as
//! `anyhow` shows a chain, so that an error reads the same whether the library or its caller
//! prints it. [`Error::source`](std::error::Error::source) walks the same chain: a context's
//! cause, then the typed error's own causes.

use std::error::Error as StdError;
use std::fmt;

use gc_core::input::InputError;
use gc_core::pods::approval::PlanFileError;
use gc_core::pods::inventory::InventoryError;
use gc_core::pods::ledger::LedgerError;
use gc_core::pods::plan::PlanError;
use gc_core::ports::{ClusterError, StoreError};
use gc_core::sessions::SessionPlanError;
use gc_core::sessions::run::SessionRunError;

use crate::ledger::LedgerFileError;
use crate::outcome::{FailureKind, NamespacesFailed};
use crate::{LockError, LockLost, SettingsError, Stopped};

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a run, or a call of the library, failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// What was being done when `source` failed (`cannot open the store`).
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: Box<Error>,
    },
    /// The embedder's shutdown stopped the run: neither a success nor a failure.
    Stopped(Stopped),
    /// The run lost its lock: it wrote nothing more.
    LockLost(LockLost),
    /// The run lock could not be taken.
    Lock(LockError),
    /// A collector's settings were refused.
    Settings(SettingsError),
    /// An input value is invalid.
    Input(InputError),
    /// A reviewed plan file cannot be used.
    PlanFile(PlanFileError),
    /// A ledger file cannot be used.
    LedgerFile(LedgerFileError),
    /// A plan failed closed on its data.
    Plan(PlanError),
    /// An inventory is malformed.
    Inventory(InventoryError),
    /// A ledger is malformed.
    Ledger(LedgerError),
    /// The session plan refused (the guard, no answer for an id).
    SessionPlan(SessionPlanError),
    /// A session run failed or was refused.
    SessionRun(SessionRunError),
    /// Several namespaces' runs failed.
    NamespacesFailed(NamespacesFailed),
    /// The store or an archive sink.
    Store(StoreError),
    /// The cluster.
    Cluster(ClusterError),
    /// The connection to the cluster (the cluster adapter's own error).
    Connect(Box<dyn StdError + Send + Sync + 'static>),
    /// A file or a stream.
    Io(std::io::Error),
    /// JSON that could not be written or read.
    Json(serde_json::Error),
    /// An error of a type the library does not name: an embedder's hook, a caller's own.
    Other(Box<dyn StdError + Send + Sync + 'static>),
    /// Said in words.
    Message(String),
}

impl Error {
    /// An error that says `message`.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self::Message(message.to_string())
    }

    /// An error of a type the library does not name (its kind is found in its own chain).
    pub fn other(error: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Self::Other(error.into())
    }

    /// This error, met while doing `context`.
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self::Context {
            context: context.to_string(),
            source: Box::new(self),
        }
    }

    /// The error under every context.
    #[must_use]
    pub fn root(&self) -> &Self {
        match self {
            Self::Context { source, .. } => source.root(),
            other => other,
        }
    }

    /// An error of a type the library does not name, under every context.
    #[must_use]
    pub fn as_other(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match self.root() {
            Self::Other(e) => Some(&**e),
            _ => None,
        }
    }

    /// What kind of failure it is (the CLI's exit code: 2, 3 and 1).
    #[must_use]
    pub fn kind(&self) -> FailureKind {
        match self.root() {
            Self::Input(_) | Self::Settings(_) | Self::PlanFile(_) | Self::LedgerFile(_) => {
                FailureKind::Usage
            }
            Self::Plan(_) | Self::Inventory(_) | Self::Ledger(_) | Self::SessionPlan(_) => {
                FailureKind::Data
            }
            // The plan's refusals (no answer for an id, the guard) are about the data; a list
            // or a database failure is not.
            Self::SessionRun(SessionRunError::Plan(_)) => FailureKind::Data,
            Self::NamespacesFailed(several) => several.kind(),
            Self::Other(e) => FailureKind::of_chain(&**e),
            _ => FailureKind::Run,
        }
    }

    /// Whether the run was stopped by the embedder's shutdown.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        match self.root() {
            Self::Stopped(_) => true,
            Self::Other(e) => stopped_in(&**e),
            _ => false,
        }
    }

    /// Whether the run lock could not be taken because another run held it for the whole wait.
    #[must_use]
    pub fn is_lock_held(&self) -> bool {
        matches!(self.root(), Self::Lock(crate::LockError::Held { .. }))
    }

    /// Whether the run lost its lock.
    #[must_use]
    pub fn is_lock_lost(&self) -> bool {
        matches!(self.root(), Self::LockLost(_))
    }

    /// The typed error a variant holds, as the standard library sees it.
    fn inner(&self) -> Option<&(dyn StdError + 'static)> {
        Some(match self {
            Self::Context { .. } | Self::Message(_) => return None,
            Self::Stopped(e) => e,
            Self::LockLost(e) => e,
            Self::Lock(e) => e,
            Self::Settings(e) => e,
            Self::Input(e) => e,
            Self::PlanFile(e) => e,
            Self::LedgerFile(e) => e,
            Self::Plan(e) => e,
            Self::Inventory(e) => e,
            Self::Ledger(e) => e,
            Self::SessionPlan(e) => e,
            Self::SessionRun(e) => e,
            Self::NamespacesFailed(e) => e,
            Self::Store(e) => e,
            Self::Cluster(e) => e,
            Self::Connect(e) => &**e,
            Self::Io(e) => e,
            Self::Json(e) => e,
            Self::Other(e) => &**e,
        })
    }
}

/// `error`, then each of its causes.
fn chain<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |&e| e.source())
}

/// `error` and each of its causes, as [`source`](StdError::source) gives them, but into an
/// [`Error::Other`]: its own error, which `source` passes over (it shows as the [`Error`] it is
/// in), comes next, then that error's causes. What a caller walks to find a type of its own.
pub fn causes<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |&e| match e.downcast_ref::<Error>() {
        Some(Error::Other(own)) => Some(&**own as &(dyn StdError + 'static)),
        _ => e.source(),
    })
}

/// Whether `error` or one of its causes is a stop ([`Stopped`], or an [`Error`] that is one).
pub(crate) fn stopped_in(error: &(dyn StdError + 'static)) -> bool {
    causes(error)
        .any(|e| e.is::<Stopped>() || e.downcast_ref::<Error>().is_some_and(Error::is_stopped))
}

/// `error` and each of its causes, joined with `: ` (as `{:#}` shows an [`Error`]).
pub(crate) fn shown(error: &(dyn StdError + 'static)) -> String {
    let texts: Vec<String> = chain(error).map(ToString::to_string).collect();
    texts.join(": ")
}

impl AsRef<dyn StdError + Send + Sync + 'static> for Error {
    fn as_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.inner()) {
            (Self::Context { context, .. }, _) => f.write_str(context)?,
            (Self::Message(message), _) => f.write_str(message)?,
            (_, Some(inner)) => write!(f, "{inner}")?,
            (_, None) => {}
        }
        if f.alternate() {
            for cause in std::iter::successors(self.source(), |&e| e.source()) {
                write!(f, ": {cause}")?;
            }
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Context { source, .. } => Some(&**source),
            other => other.inner().and_then(StdError::source),
        }
    }
}

macro_rules! typed {
    ($($variant:ident($type:ty)),* $(,)?) => {
        $(impl From<$type> for Error {
            fn from(error: $type) -> Self {
                Self::$variant(error)
            }
        })*
    };
}

typed!(
    Stopped(Stopped),
    LockLost(LockLost),
    Lock(LockError),
    Settings(SettingsError),
    Input(InputError),
    PlanFile(PlanFileError),
    LedgerFile(LedgerFileError),
    Plan(PlanError),
    Inventory(InventoryError),
    Ledger(LedgerError),
    SessionPlan(SessionPlanError),
    SessionRun(SessionRunError),
    NamespacesFailed(NamespacesFailed),
    Store(StoreError),
    Cluster(ClusterError),
    Io(std::io::Error),
    Json(serde_json::Error),
);

macro_rules! untyped {
    ($($type:ty),* $(,)?) => {
        $(impl From<$type> for Error {
            fn from(error: $type) -> Self {
                Self::Other(Box::new(error))
            }
        })*
    };
}

// Errors no caller tells apart: each is a run's failure, its message kept.
untyped!(gc_core::isotime::TimeError, std::str::Utf8Error);

/// What was being done when a call failed, added to its error (as `anyhow::Context` does).
pub trait Context<T> {
    /// The error, met while doing `context`.
    ///
    /// # Errors
    /// The error, with its context.
    fn context(self, context: impl fmt::Display) -> Result<T>;

    /// The error, met while doing what `context` says (made only on an error).
    ///
    /// # Errors
    /// The error, with its context.
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Error::msg(context))
    }
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.ok_or_else(|| Error::msg(context()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_reads_as_anyhow_reads_it_and_its_kind_is_its_root_cause() {
        let input = InputError::Invalid {
            input: "max_pods",
            value: "0".into(),
            rule: "must be at least 1",
        };
        let error = Error::from(input).context("namespace a").context("run");
        assert_eq!(error.to_string(), "run");
        assert_eq!(
            format!("{error:#}"),
            "run: namespace a: invalid max_pods \"0\": must be at least 1"
        );
        assert_eq!(error.kind(), FailureKind::Usage);
        let cluster =
            Error::from(ClusterError::Unavailable("timeout".into())).context("cannot list");
        assert_eq!(cluster.kind(), FailureKind::Run);
        let stopped = Error::from(Stopped::new("stopped by SIGTERM")).context("namespace a");
        assert!(stopped.is_stopped() && !cluster.is_stopped());
        // A caller's own error keeps its chain; its kind is found there.
        let io = std::io::Error::other("disk full");
        let other = Error::other(Box::new(io)).context("cannot write");
        assert_eq!(format!("{other:#}"), "cannot write: disk full");
        assert!(other.as_other().is_some());
    }

    /// Each typed cause gives its kind, under any context; a caller's own error is judged by
    /// its own chain, where `causes` walks, and a stop in it is a stop.
    #[test]
    fn every_cause_gives_its_kind() {
        use gc_core::sessions::SessionPlanError as Guard;
        let guard = || Guard::NoRowFound { ids: 1, orphans: 2 };
        let database = SessionRunError::Database(StoreError::Unavailable("down".into()));
        let several = |each: &dyn Fn() -> Error| {
            crate::outcome(2, vec![("a".into(), each()), ("b".into(), each())]).unwrap_err()
        };
        let ledger = LedgerError("not an object".into());
        let ceiling = PlanError::InventoryCeiling { count: 2, max: 1 };
        for (error, kind) in [
            (Error::from(LedgerFileError("x".into())), FailureKind::Usage),
            (Error::from(ledger), FailureKind::Data),
            (Error::from(ceiling), FailureKind::Data),
            (Error::from(guard()), FailureKind::Data),
            (
                Error::from(SessionRunError::Plan(guard())),
                FailureKind::Data,
            ),
            (Error::from(database), FailureKind::Run),
            (several(&|| Error::from(guard())), FailureKind::Data),
            (several(&|| Error::msg("y")), FailureKind::Run),
            (
                Error::other(PlanError::InventoryCeiling { count: 2, max: 1 }),
                FailureKind::Data,
            ),
            (Error::other(std::io::Error::other("x")), FailureKind::Run),
            (Error::msg("x"), FailureKind::Run),
        ] {
            let shown = format!("{error:#}");
            assert_eq!(error.context("outer").kind(), kind, "{shown}");
        }
        let stopped = anyhow_like(Error::from(Stopped::new("stopped by SIGTERM")));
        assert!(Error::other(stopped).context("namespace a").is_stopped());
        assert!(!Error::other(std::io::Error::other("x")).is_stopped());
        // `causes` goes into a caller's own error: its own type is found there.
        let own = Error::other(ledger_file()).context("namespace a");
        let found = causes(&own).any(|e| e.is::<LedgerFileError>());
        assert!(found, "{own:#}");
    }

    /// A caller's error that holds the library's (as an `anyhow::Error` holding it would).
    fn anyhow_like(error: Error) -> Box<dyn StdError + Send + Sync> {
        Box::new(error)
    }

    fn ledger_file() -> LedgerFileError {
        LedgerFileError("a caller's".into())
    }
}
