//! The exit code, chosen in this one place from the type of the error a command returns.
//!
//! Commands return `anyhow::Error`s that carry the libraries' typed errors (and [`UsageError`]
//! for what only the command line checks); [`code`] walks the error's chain from the outside in
//! and the first error of a known type decides. No command picks a code itself.

use std::error::Error;
use std::fmt;
use std::path::Path;

use gc_runtime::FailureKind;

/// The command did what it was asked.
pub(crate) const OK: u8 = 0;
/// Anything else: the cluster, the store, the lock, I/O while writing results, a failed target.
pub(crate) const FAILURE: u8 = 1;
/// The command line or an input value is invalid, or an input file cannot be read.
pub(crate) const USAGE: u8 = 2;
/// The plan failed closed on the data: a malformed inventory or ledger, a ceiling exceeded, the
/// session guard.
pub(crate) const PLAN: u8 = 3;

/// The exit code of `error`, documented in `docs/failed-pods.md`: the first error of a known type in its
/// chain, from the outermost context in, decides; an error of no known type is [`FAILURE`].
pub(crate) fn code(error: &anyhow::Error) -> u8 {
    let mut causes = gc_runtime::causes(error.as_ref());
    causes.find_map(class).unwrap_or(FAILURE)
}

/// The code of one error in a chain, when its type decides one: the command line's own errors,
/// then the kind of a run's failure ([`FailureKind`]).
fn class(error: &(dyn Error + 'static)) -> Option<u8> {
    if error.is::<UsageError>() || error.is::<clap::Error>() {
        return Some(USAGE);
    }
    FailureKind::decided_by(error).map(|kind| match kind {
        FailureKind::Usage => USAGE,
        FailureKind::Data => PLAN,
        FailureKind::Run => FAILURE,
    })
}

/// An input that only the command line checks: a flag's value, a combination of flags, an input
/// file that cannot be read. Exit code [`USAGE`].
#[derive(Debug)]
pub(crate) struct UsageError {
    message: String,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl UsageError {
    /// A flag value or a combination of flags the command refuses; `message` names the flag.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// As [`UsageError::new`], because of `source`.
    pub(crate) fn because(
        message: impl Into<String>,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The input file (`-`: standard input) `path`, which is `what`, cannot be read.
    pub(crate) fn unreadable(what: &str, path: &Path, source: std::io::Error) -> Self {
        Self::because(format!("cannot read {what} {}", path.display()), source)
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for UsageError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gc_core::input::InputError;
    use gc_core::pods::approval::PlanFileError;
    use gc_core::pods::inventory::InventoryError;
    use gc_core::pods::ledger::LedgerError;
    use gc_core::pods::plan::PlanError;
    use gc_core::ports::{ClusterError, StoreError};
    use gc_core::sessions::SessionPlanError;
    use gc_core::sessions::run::SessionRunError;

    fn check(error: anyhow::Error, expected: u8) {
        assert_eq!(code(&error), expected, "{error:#}");
    }

    /// Every typed error of a class, bare and under a context, with a cause further in.
    #[test]
    fn each_error_type_has_its_code() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let store = || StoreError::Unavailable("db down".into());
        let bad_input = || InputError::Invalid {
            input: "max_pods",
            value: "0".into(),
            rule: "must be 1..=50",
        };
        let clap = clap::Error::new(clap::error::ErrorKind::ValueValidation);
        let usage: Vec<anyhow::Error> = vec![
            clap.into(),
            bad_input().into(),
            gc_core::pods::approval::check_ttl(0).unwrap_err().into(),
            gc_core::sessions::SessionInputs {
                selector: "no equals sign".into(),
                ..Default::default()
            }
            .validate()
            .unwrap_err()
            .into(),
            PlanFileError::Altered.into(),
            PlanFileError::WeakKey(3).into(),
            UsageError::new("--dry-run false needs --auto-remediate").into(),
            UsageError::unreadable("inventory", Path::new("pods.json"), io()).into(),
            // A typed cause further in does not change the code of the outer error.
            UsageError::because("cannot build the session database URL from DB_*", store()).into(),
        ];
        let plan: Vec<anyhow::Error> = vec![
            PlanError::InventoryCeiling { count: 2, max: 1 }.into(),
            InventoryError::Malformed("not JSON".into()).into(),
            InventoryError::Incomplete("statusItems").into(),
            LedgerError("not an object".into()).into(),
            SessionPlanError::NoAnswer("s-1".into()).into(),
            SessionRunError::Plan(SessionPlanError::NoAnswer("s-1".into())).into(),
        ];
        let failure: Vec<anyhow::Error> = vec![
            // The bug this module fixed: a store failure while loading the ledger exited 3.
            anyhow::Error::new(store()).context("cannot load the ledger"),
            StoreError::Malformed("CORRUPT".into()).into(),
            StoreError::Other("no such table: gc_ledgers".into()).into(),
            ClusterError::Unavailable("refused".into()).into(),
            SessionRunError::Database(store()).into(),
            SessionRunError::List {
                kind: "Deployment".into(),
                error: ClusterError::Unavailable("refused".into()),
            }
            .into(),
            anyhow::Error::new(io()).context("cannot write the plan"),
            anyhow::anyhow!("2 target(s) failed; the next run resumes them"),
        ];
        for (errors, expected) in [(usage, USAGE), (plan, PLAN), (failure, FAILURE)] {
            for error in errors {
                check(error.context("outer context"), expected);
            }
        }
    }

    /// Several namespaces: 1 when any failed, else 3 when any was refused on its data; a stop
    /// when a signal stopped every one.
    #[test]
    fn several_namespaces_exit_as_their_worst_failure() {
        use gc_runtime::{Error as RunError, Stopped, outcome};
        let refused = || RunError::other(LedgerError("not an object".into()));
        let failed = || RunError::msg("the cluster is unreachable");
        let stop = || RunError::from(Stopped::new("stopped by SIGTERM"));
        let run = |errors: Vec<RunError>| {
            let named = errors.into_iter().enumerate();
            let several = outcome(3, named.map(|(i, e)| (format!("ns{i}"), e)).collect());
            several.unwrap_err()
        };
        let code_of = |e: RunError| code(&e.into());
        assert_eq!(code_of(run(vec![refused()])), PLAN);
        assert_eq!(code_of(run(vec![refused(), refused()])), PLAN);
        assert_eq!(code_of(run(vec![refused(), failed()])), FAILURE);
        assert_eq!(code_of(run(vec![failed()])), FAILURE);
        assert_eq!(code_of(run(vec![refused(), stop()])), FAILURE);
        assert_eq!(
            code_of(run(vec![RunError::other(UsageError::new("x"))])),
            FAILURE
        );
        assert!(run(vec![stop(), stop()]).is_stopped());
        assert!(!run(vec![stop(), failed()]).is_stopped());
        // One namespace of one: its own error, as it is, the command line's own included.
        let one = outcome(1, vec![("a".into(), refused())]).unwrap_err();
        assert_eq!(code_of(one), PLAN);
        let usage = RunError::other(UsageError::new("x")).context("namespace a");
        let one = outcome(1, vec![("a".into(), usage)]).unwrap_err();
        assert_eq!(code_of(one), USAGE);
        assert!(outcome(3, Vec::new()).is_ok());
    }

    #[test]
    fn the_outermost_known_type_decides() {
        let inner: anyhow::Error = PlanError::InventoryCeiling { count: 2, max: 1 }.into();
        check(inner.context("plain context"), PLAN);
        let usage = UsageError::because("ledger file x", LedgerError("not an object".into()));
        check(usage.into(), USAGE);
    }

    #[test]
    fn a_usage_error_reads_as_its_message_then_its_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(UsageError::unreadable("ledger", Path::new("l.json"), io));
        assert_eq!(format!("{e:#}"), "cannot read ledger l.json: No such file");
    }
}
