//! The run lock's lifecycle, and the one door to the engine's writes.
//!
//! A live run writes only while it holds its namespace's Lease: a [`Lease`] is taken through the
//! [`Lock`] port ([`Lease::acquire`], the only way to make one), renewed through it, and lost for
//! good when a renewal finds it taken, or when it goes unrenewed for two thirds of its duration
//! (a process frozen past its lease included: checked before every write). The engine's writing
//! entry points (the session run, the failed-Pod apply, recovery and release) take a [`Held`]:
//! made from a [`Lease`], or a dry run's ([`Held::dry_run`]), whose writes are all server-side
//! dry runs. No caller can hand the engine a lock of its own making.
//!
//! The lifecycle is one state machine ([`LeaseState`], [`LeaseEvent`], [`step`]), tested pair by
//! pair.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::ports::{ClusterError, Lock, Renewal};

/// A monotonic clock: the time since an origin of the caller's choosing, never going back. The
/// runtime passes its timer's (which its tests pause and advance), so that a frozen process is
/// seen as one.
pub type Monotonic = std::sync::Arc<dyn Fn() -> Duration + Send + Sync>;

/// Where a Lease stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// Held, last renewed at the instant given (the acquisition counts as one).
    Held(Duration),
    /// Lost, and why (the first reason stays). Never held again.
    Lost(String),
}

/// What happens to a Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEvent {
    /// A renewal sent at this instant succeeded.
    Renewed(Duration),
    /// A renewal found the Lease taken, expired or written by anyone else: why.
    Taken(String),
    /// A renewal failed (the API server could not be reached): no loss by itself.
    Failed,
    /// A write is about to be sent (or the renewal task wakes): is the Lease still held?
    Checked,
}

/// The next state of a Lease in `state` after `event`, at `now`, for a lease of `seconds`
/// (`grace`, two thirds of it, is how long it may go unrenewed: the Lease cannot have expired on
/// the server before that).
#[must_use]
pub fn step(state: LeaseState, event: LeaseEvent, now: Duration, seconds: u32) -> LeaseState {
    let grace = grace(seconds);
    match (state, event) {
        (LeaseState::Lost(why), _) => LeaseState::Lost(why),
        (LeaseState::Held(_), LeaseEvent::Taken(why)) => LeaseState::Lost(why),
        // A renewal sent before an earlier one's answer keeps the later instant.
        (LeaseState::Held(last), LeaseEvent::Renewed(sent)) if sent <= now => {
            LeaseState::Held(last.max(sent))
        }
        (LeaseState::Held(last), _) => {
            let since = now.saturating_sub(last);
            if since >= grace {
                LeaseState::Lost(format!(
                    "the run lock was not renewed for {}s (it lasts {seconds}s): another run may \
                     hold it",
                    since.as_secs()
                ))
            } else {
                LeaseState::Held(last)
            }
        }
    }
}

/// How long a lease of `seconds` may go unrenewed: two thirds of it.
fn grace(seconds: u32) -> Duration {
    Duration::from_secs(u64::from(seconds)) * 2 / 3
}

/// A namespace's run lock, held: taken through the [`Lock`] port (the only way to make one),
/// renewed through it ([`Lease::renew`]), and given up ([`Lease::release`]). `T` is the port's
/// fence on its last write.
pub struct Lease<T> {
    namespace: String,
    name: String,
    holder: String,
    seconds: u32,
    clock: Monotonic,
    state: Mutex<LeaseState>,
    token: Mutex<T>,
}

/// What a renewal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewed {
    /// Still held.
    Held,
    /// Lost (now or before): the run writes nothing more.
    Lost,
    /// The port failed; still held until two thirds of the lease pass without a renewal.
    Failed(ClusterError),
}

impl<T: Clone + Send + Sync> Lease<T> {
    /// Takes the Lease `name` in `namespace` for `holder` for `seconds` through `port`, when it
    /// is free, expired or already `holder`'s; `None` when another holder has it. `clock` is the
    /// monotonic clock every later check reads.
    ///
    /// # Errors
    /// The port's.
    pub async fn acquire<L: Lock<Token = T> + ?Sized>(
        port: &L,
        namespace: &str,
        name: &str,
        holder: &str,
        seconds: u32,
        clock: Monotonic,
    ) -> Result<Option<Self>, ClusterError> {
        let sent = clock();
        let Some(token) = port.acquire(namespace, name, holder, seconds).await? else {
            return Ok(None);
        };
        Ok(Some(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            holder: holder.to_owned(),
            seconds,
            clock,
            state: Mutex::new(LeaseState::Held(sent)),
            token: Mutex::new(token),
        }))
    }

    /// Renews the Lease through `port`, fenced on the port's last write; a Lease already lost
    /// (or unrenewed too long) is not renewed, and is never taken back.
    pub async fn renew<L: Lock<Token = T> + ?Sized>(&self, port: &L) -> Renewed {
        if self.halted() {
            return Renewed::Lost;
        }
        let token = self
            .token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let sent = (self.clock)();
        let answer = port
            .renew(
                &self.namespace,
                &self.name,
                &self.holder,
                self.seconds,
                &token,
            )
            .await;
        match answer {
            Ok(Renewal::Renewed(token)) => {
                *self.token.lock().unwrap_or_else(PoisonError::into_inner) = token;
                self.event(LeaseEvent::Renewed(sent));
                if self.halted() {
                    Renewed::Lost
                } else {
                    Renewed::Held
                }
            }
            Ok(Renewal::Lost(why)) => {
                let name = &self.name;
                self.event(LeaseEvent::Taken(format!(
                    "the run lock {name} is lost: {why}"
                )));
                Renewed::Lost
            }
            Err(e) => {
                self.event(LeaseEvent::Failed);
                if self.halted() {
                    Renewed::Lost
                } else {
                    Renewed::Failed(e)
                }
            }
        }
    }

    /// Gives the Lease up through `port`, unless it is lost (a lost Lease is left as it is).
    ///
    /// # Errors
    /// The port's: the Lease then expires by itself within its duration.
    pub async fn release<L: Lock<Token = T> + ?Sized>(&self, port: &L) -> Result<(), ClusterError> {
        if self.lost().is_some() {
            return Ok(());
        }
        port.release(&self.namespace, &self.name, &self.holder)
            .await
    }
}

impl<T> Lease<T> {
    fn event(&self, event: LeaseEvent) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = (self.clock)();
        *state = step(state.clone(), event, now, self.seconds);
    }

    /// Where the Lease stands now.
    #[must_use]
    pub fn state(&self) -> LeaseState {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the run must write nothing more: the Lease is lost, or was not renewed for two
    /// thirds of its duration (it is lost from then on). Read before every write.
    #[must_use]
    pub fn halted(&self) -> bool {
        self.event(LeaseEvent::Checked);
        self.lost().is_some()
    }

    /// Why the Lease is lost, once it is.
    #[must_use]
    pub fn lost(&self) -> Option<String> {
        match &*self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            LeaseState::Lost(why) => Some(why.clone()),
            LeaseState::Held(_) => None,
        }
    }

    /// Its duration, in seconds.
    #[must_use]
    pub fn seconds(&self) -> u32 {
        self.seconds
    }
}

/// Whether writes must stop: a Lease, or a flag in the engine's own tests.
pub(crate) trait Halt: Send + Sync {
    fn halted(&self) -> bool;
}

impl<T: Send + Sync> Lease<T> {
    /// The engine's proof of this Lease, with `stopping`, the flag the embedder sets to stop the
    /// run between objects.
    #[must_use]
    pub fn held<'a>(&'a self, stopping: &'a AtomicBool) -> Held<'a> {
        Held {
            lost: Some(self),
            stopping,
        }
    }
}

impl<T: Send + Sync> Halt for Lease<T> {
    fn halted(&self) -> bool {
        Lease::halted(self)
    }
}

#[cfg(test)]
impl Halt for AtomicBool {
    fn halted(&self) -> bool {
        self.load(Ordering::SeqCst)
    }
}

/// The engine's proof that a run may write: its [`Lease`] ([`Lease::held`]), or a dry run's
/// ([`Held::dry_run`]), which sends every write as a server-side dry run and no archive. With it,
/// the flag the embedder sets to stop the run between objects.
#[derive(Clone, Copy)]
pub struct Held<'a> {
    /// `None`: a dry run, which holds no Lease.
    lost: Option<&'a dyn Halt>,
    stopping: &'a AtomicBool,
}

impl std::fmt::Debug for Held<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("dry_run", &self.is_dry_run())
            .field("stopping", &self.stopping())
            .finish()
    }
}

impl<'a> Held<'a> {
    /// A dry run's: no Lease, every write a server-side dry run, no archive written.
    #[must_use]
    pub fn dry_run(stopping: &'a AtomicBool) -> Self {
        Self {
            lost: None,
            stopping,
        }
    }

    /// A live run's on `lost` (the engine's own tests: a flag they set), or a dry run's.
    #[cfg(test)]
    pub(crate) fn new(lost: &'a dyn Halt, stopping: &'a AtomicBool, dry_run: bool) -> Self {
        Self {
            lost: (!dry_run).then_some(lost),
            stopping,
        }
    }

    /// Whether every write is a server-side dry run.
    #[must_use]
    pub fn is_dry_run(&self) -> bool {
        self.lost.is_none()
    }

    /// Whether the Lease is lost (or may be): nothing more is written. A dry run's never is.
    #[must_use]
    pub fn lost(&self) -> bool {
        self.lost.is_some_and(Halt::halted)
    }

    /// Whether the embedder asked the run to stop: nothing new is started.
    #[must_use]
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (state, event) pair: a lost Lease stays lost with its first reason; a held one is
    /// lost when taken, or once two thirds of its duration pass without a renewal, whatever the
    /// event; a renewal moves its instant forward, never back.
    #[test]
    fn every_state_and_event() {
        let at = |s: u64| Duration::from_secs(1000 + s);
        let late = "the run lock was not renewed for 20s (it lasts 30s): another run may hold it";
        let lost = || LeaseState::Lost("taken".into());
        let rows: Vec<(LeaseState, LeaseEvent, u64, LeaseState)> = vec![
            // Held, fresh (renewed 5 s ago).
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Renewed(at(4)),
                5,
                LeaseState::Held(at(4)),
            ),
            (
                LeaseState::Held(at(4)),
                LeaseEvent::Renewed(at(2)),
                5,
                LeaseState::Held(at(4)),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Taken("taken".into()),
                5,
                lost(),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Failed,
                5,
                LeaseState::Held(at(0)),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Checked,
                19,
                LeaseState::Held(at(0)),
            ),
            // Held, late (20 s of a 30 s lease): lost on any event but a renewal sent in time.
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Renewed(at(19)),
                20,
                LeaseState::Held(at(19)),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Renewed(at(20)),
                20,
                LeaseState::Held(at(20)),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Taken("taken".into()),
                20,
                lost(),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Failed,
                20,
                LeaseState::Lost(late.into()),
            ),
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Checked,
                20,
                LeaseState::Lost(late.into()),
            ),
            // A renewal answered from the future is no renewal.
            (
                LeaseState::Held(at(0)),
                LeaseEvent::Renewed(at(30)),
                20,
                LeaseState::Lost(late.into()),
            ),
            // Lost: stays lost, with its first reason.
            (lost(), LeaseEvent::Renewed(at(1)), 1, lost()),
            (lost(), LeaseEvent::Taken("again".into()), 1, lost()),
            (lost(), LeaseEvent::Failed, 1, lost()),
            (lost(), LeaseEvent::Checked, 1, lost()),
        ];
        for (state, event, now, want) in rows {
            let got = step(state.clone(), event.clone(), at(now), 30);
            assert_eq!(got, want, "{state:?} + {event:?} at {now}s");
        }
    }

    #[test]
    fn a_dry_run_is_never_lost_and_a_flag_stops_it() {
        let stopping = AtomicBool::new(false);
        let held = Held::dry_run(&stopping);
        assert!(held.is_dry_run() && !held.lost() && !held.stopping());
        assert_eq!(
            format!("{held:?}"),
            "Held { dry_run: true, stopping: false }"
        );
        stopping.store(true, Ordering::SeqCst);
        assert!(held.stopping());
    }
}
