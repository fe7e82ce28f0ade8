//! Stopping a run from outside: the embedder's shutdown, passed in as a [`Cancel`] (the CLI's is
//! its termination signals). A run asked to stop takes no lock, starts no other target, and ends
//! [`Stopped`]: neither a success nor a failure.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A future an embedder's shutdown resolves.
pub type Shutdown<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The embedder's shutdown: `Some` with what asked the runs to stop (its cause, for example
/// `SIGTERM` or `shutdown`: the runs say `stopped by {cause}` and `{cause} received: releasing the
/// run lock ...`) once they must, and the flags of the run locks taken meanwhile, to set then.
pub trait Cancel: Send + Sync {
    /// What asked the runs to stop, once something did.
    fn cancelled(&self) -> Option<String>;
    /// Sets `flag` once runs must stop (at once when they must already): a run that holds its
    /// lock finishes the target in progress and starts no other.
    fn register(&self, flag: &Arc<AtomicBool>);
    /// Resolves once runs must stop (at once when they must already): what a wait (for the next
    /// run, for another run's lock) awaits beside its timer, so that nothing polls.
    fn stopped(&self) -> Shutdown<'_>;
}

/// Never cancelled.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverCancel;

impl Cancel for NeverCancel {
    fn cancelled(&self) -> Option<String> {
        None
    }
    fn register(&self, _flag: &Arc<AtomicBool>) {}
    fn stopped(&self) -> Shutdown<'_> {
        Box::pin(std::future::pending())
    }
}

/// A [`Cancel`] the embedder stops itself ([`StopToken::stop`], from its own shutdown); clones
/// share it.
#[derive(Debug, Clone)]
pub struct StopToken {
    state: Arc<Mutex<TokenState>>,
    /// `true` once stopped: what [`Cancel::stopped`] awaits.
    stopped: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for StopToken {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            stopped: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }
}

#[derive(Debug, Default)]
struct TokenState {
    why: Option<String>,
    flags: Vec<Weak<AtomicBool>>,
}

impl StopToken {
    /// A token not stopped yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every run that reads this token to stop; `cause` is what asked (`shutdown`, ...;
    /// the first call's stays).
    pub fn stop(&self, cause: impl Into<String>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.why.get_or_insert_with(|| cause.into());
        for flag in state.flags.drain(..).filter_map(|f| f.upgrade()) {
            flag.store(true, Ordering::SeqCst);
        }
        self.stopped.send_replace(true);
    }
}

impl Cancel for StopToken {
    fn cancelled(&self) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.why.clone()
    }
    fn register(&self, flag: &Arc<AtomicBool>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.why.is_some() {
            flag.store(true, Ordering::SeqCst);
        } else {
            state.flags.retain(|f| f.strong_count() > 0);
            state.flags.push(Arc::downgrade(flag));
        }
    }
    fn stopped(&self) -> Shutdown<'_> {
        let mut stopped = self.stopped.subscribe();
        Box::pin(async move {
            // The sender lives as long as the token: the wait ends only with a stop.
            let _ = stopped.wait_for(|stopped| *stopped).await;
        })
    }
}

/// A run stopped before it finished (or before it took its lock): neither a success nor a
/// failure, so no failure alert, no Warning Event, and the last run's success and last success
/// are kept.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Stopped(String);

impl Stopped {
    /// A stop, in words that name why and what the run did and did not do.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Whether the run that ended with `error` was stopped ([`Stopped`] in its chain).
#[must_use]
pub fn stopped(error: &crate::Error) -> bool {
    error.is_stopped()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_sets_the_flags_registered_before_and_after_it_stops() {
        let token = StopToken::new();
        let before = Arc::new(AtomicBool::new(false));
        token.register(&before);
        assert_eq!(token.cancelled(), None);
        assert!(!before.load(Ordering::SeqCst));
        token.clone().stop("shutdown");
        token.stop("a later cause");
        assert!(before.load(Ordering::SeqCst));
        assert_eq!(token.cancelled().as_deref(), Some("shutdown"));
        let after = Arc::new(AtomicBool::new(false));
        token.register(&after);
        assert!(after.load(Ordering::SeqCst));
    }

    /// A wait ends when the token is stopped, whether it began before or after; never without.
    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_with_the_stop_and_only_then() {
        let token = StopToken::new();
        let stopper = token.clone();
        let waited = tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            stopper.stopped().await;
            start.elapsed()
        });
        tokio::time::sleep(std::time::Duration::from_secs(7)).await;
        assert!(!waited.is_finished());
        token.stop("SIGTERM");
        assert_eq!(waited.await.unwrap().as_secs(), 7);
        tokio::time::timeout(std::time::Duration::from_secs(1), token.stopped())
            .await
            .expect("already stopped: at once");
        let never =
            tokio::time::timeout(std::time::Duration::from_secs(3600), NeverCancel.stopped());
        assert!(never.await.is_err());
    }

    #[test]
    fn a_stop_is_found_anywhere_in_a_chain() {
        let error = crate::Error::from(Stopped::new("stopped by SIGTERM")).context("namespace a");
        assert!(stopped(&error));
        assert!(!stopped(&crate::Error::msg("failed")));
    }
}
