//! Collections a caller asks for (the control plane, through `serve`'s request API), as one
//! state machine and one queue per namespace.
//!
//! A request can only narrow what a scheduled run would do: it names the sessions it is about
//! ([`Requested`]), and the run judges them against the database with the operator's settings
//! (selector, kinds, terminal states, caps, protect and exclude rules, the mass-deletion guard,
//! weighed over the whole namespace); an id is never deleted on the caller's word alone.
//!
//! The life of one request ([`next`]): `Queued` until a run of its namespace takes it with the
//! others queued beside it (coalesced, [`Queue::take`]), `Running` while that run holds the
//! namespace's Lease, then `Succeeded`, `Failed` or `Stopped` as the run ended. A stop asked
//! before a run took it ends it `Stopped` with nothing done; a run in flight finishes its step
//! and says how it ended. Every other (state, event) pair is refused and changes nothing.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The sessions a request is about.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Requested {
    /// Every session of the namespace, as a scheduled run.
    All,
    /// Only these ids; every other resource is left as it is.
    Ids(BTreeSet<String>),
}

impl Requested {
    /// Whether `id` is among the requested sessions.
    #[must_use]
    pub fn contains(&self, id: &str) -> bool {
        match self {
            Self::All => true,
            Self::Ids(ids) => ids.contains(id),
        }
    }

    /// What a run that serves both `self` and `other` must look at: all when either asks for
    /// all, else both sets of ids.
    #[must_use]
    pub fn union(self, other: &Self) -> Self {
        match (self, other) {
            (Self::Ids(mut mine), Self::Ids(theirs)) => {
                mine.extend(theirs.iter().cloned());
                Self::Ids(mine)
            }
            _ => Self::All,
        }
    }
}

/// How a requested collection is narrowed in its run's configuration
/// ([`super::SessionConfig::request`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Narrowed {
    /// The sessions asked for.
    pub sessions: Requested,
    /// The grace period of an orphan the request names, from its resource's creation, in
    /// seconds: the operator's setting for requests, never the caller's. A request for every
    /// session keeps the namespace's grace.
    pub grace_seconds: u32,
    /// Who asked (the callers' Kubernetes user names): every audit line of the run names them.
    #[serde(default)]
    pub requested_by: BTreeSet<String>,
}

/// Where a request is.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    /// Admitted, waiting for its namespace's next run.
    Queued,
    /// Taken by a run that holds (or is taking) the namespace's Lease.
    Running,
    /// The run ended and judged each of the request's ids (deleted, held or kept, with why).
    Succeeded,
    /// The run failed (no plan, the guard, the lock, the store, ...): see its error.
    Failed,
    /// The process was asked to stop: before the run, nothing was done; during it, what was
    /// done is in its records.
    Stopped,
}

impl State {
    /// Whether nothing more happens to a request in this state.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Stopped)
    }
}

/// What reaches a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A run of its namespace took it (with every request queued there).
    Taken,
    /// Its run ended, done.
    Succeeded,
    /// Its run failed.
    Failed,
    /// Its run ended stopped.
    RunStopped,
    /// The process is asked to stop.
    StopAsked,
}

/// Every state, in the order the table lists them.
pub const STATES: [State; 5] = [
    State::Queued,
    State::Running,
    State::Succeeded,
    State::Failed,
    State::Stopped,
];

/// Every event, in the order the table lists them.
pub const EVENTS: [Event; 5] = [
    Event::Taken,
    Event::Succeeded,
    Event::Failed,
    Event::RunStopped,
    Event::StopAsked,
];

/// The one transition function: where `event` leaves a request in `state`; `None` when the event
/// does not apply (the caller says why; the request stays where it was).
#[must_use]
pub fn next(state: State, event: Event) -> Option<State> {
    use Event as E;
    use State as S;
    match (state, event) {
        (S::Queued, E::Taken) => Some(S::Running),
        // Stopped before any run took it: nothing was done for it.
        (S::Queued, E::StopAsked) => Some(S::Stopped),
        // A run in flight finishes its step, then ends and says how.
        (S::Running, E::StopAsked) => Some(S::Running),
        (S::Running, E::Succeeded) => Some(S::Succeeded),
        (S::Running, E::Failed) => Some(S::Failed),
        (S::Running, E::RunStopped) => Some(S::Stopped),
        // A request not taken has no run to end; one taken is not taken again; a final state
        // is final.
        (S::Queued, E::Succeeded | E::Failed | E::RunStopped)
        | (S::Running, E::Taken)
        | (S::Succeeded | S::Failed | S::Stopped, _) => None,
    }
}

/// A namespace's requests waiting for its next run, at most `capacity` of them; `T` names each
/// (a run id).
#[derive(Debug, Clone)]
pub struct Queue<T> {
    capacity: usize,
    waiting: Vec<(T, Requested)>,
}

/// What a run takes from a [`Queue`]: the requests it serves, and the sessions it looks at for
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<T> {
    /// The requests served, in the order they came.
    pub requests: Vec<T>,
    /// Every session any of them asked for.
    pub sessions: Requested,
}

/// The queue is full: the caller should try again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// How many requests it holds.
    pub capacity: usize,
}

impl<T> Queue<T> {
    /// An empty queue holding at most `capacity` requests.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            waiting: Vec::new(),
        }
    }

    /// How many requests wait.
    #[must_use]
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no request waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Queues request `name` for `sessions`.
    ///
    /// # Errors
    /// [`Full`] when `capacity` requests already wait; nothing is queued.
    pub fn admit(&mut self, name: T, sessions: Requested) -> Result<(), Full> {
        if self.waiting.len() >= self.capacity {
            return Err(Full {
                capacity: self.capacity,
            });
        }
        self.waiting.push((name, sessions));
        Ok(())
    }

    /// Every waiting request, coalesced into one run's batch; `None` when none waits.
    pub fn take(&mut self) -> Option<Batch<T>> {
        let mut waiting = std::mem::take(&mut self.waiting).into_iter();
        let (first, sessions) = waiting.next()?;
        let mut batch = Batch {
            requests: vec![first],
            sessions,
        };
        for (name, sessions) in waiting {
            batch.requests.push(name);
            batch.sessions = batch.sessions.union(&sessions);
        }
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_and_event() {
        use Event as E;
        use State as S;
        let table: [(State, [Option<State>; 5]); 5] = [
            //             Taken            Succeeded          Failed          RunStopped        StopAsked
            (
                S::Queued,
                [Some(S::Running), None, None, None, Some(S::Stopped)],
            ),
            (
                S::Running,
                [
                    None,
                    Some(S::Succeeded),
                    Some(S::Failed),
                    Some(S::Stopped),
                    Some(S::Running),
                ],
            ),
            (S::Succeeded, [None; 5]),
            (S::Failed, [None; 5]),
            (S::Stopped, [None; 5]),
        ];
        assert_eq!(table.map(|(s, _)| s), STATES);
        for (state, row) in table {
            for (event, expected) in EVENTS.into_iter().zip(row) {
                assert_eq!(next(state, event), expected, "{state:?} + {event:?}");
            }
        }
        assert_eq!(
            EVENTS,
            [
                E::Taken,
                E::Succeeded,
                E::Failed,
                E::RunStopped,
                E::StopAsked
            ]
        );
        // Final states are exactly those nothing leaves.
        for state in STATES {
            let leaves = EVENTS.iter().any(|e| next(state, *e).is_some());
            assert_eq!(state.is_final(), !leaves, "{state:?}");
        }
    }

    fn ids(list: &[&str]) -> Requested {
        Requested::Ids(list.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn a_queue_coalesces_what_waits_and_refuses_beyond_its_capacity() {
        let mut queue = Queue::new(3);
        assert_eq!(queue.take(), None);
        queue.admit(1, ids(&["a"])).unwrap();
        queue.admit(2, ids(&["b", "a"])).unwrap();
        assert_eq!(queue.len(), 2);
        assert_eq!(
            queue.take(),
            Some(Batch {
                requests: vec![1, 2],
                sessions: ids(&["a", "b"])
            })
        );
        assert!(queue.is_empty());
        queue.admit(3, ids(&["c"])).unwrap();
        queue.admit(4, Requested::All).unwrap();
        queue.admit(5, ids(&["d"])).unwrap();
        assert_eq!(queue.admit(6, ids(&["e"])), Err(Full { capacity: 3 }));
        let batch = queue.take().unwrap();
        assert_eq!(batch.requests, [3, 4, 5]);
        assert_eq!(batch.sessions, Requested::All);
        // Nothing of the refused request was kept.
        assert_eq!(queue.take(), None);
    }

    #[test]
    fn requested_ids_contain_only_themselves_and_all_contains_every_id() {
        assert!(ids(&["a"]).contains("a"));
        assert!(!ids(&["a"]).contains("b"));
        assert!(!ids(&[]).contains("a"));
        assert!(Requested::All.contains("anything"));
        assert_eq!(Requested::All.union(&ids(&["a"])), Requested::All);
        assert_eq!(ids(&["a"]).union(&Requested::All), Requested::All);
    }

    #[test]
    fn a_queue_is_empty_exactly_when_no_request_waits() {
        let mut queue = Queue::new(1);
        assert!(queue.is_empty());
        queue.admit("first", Requested::All).unwrap();
        assert!(!queue.is_empty());
        assert_eq!(queue.len(), 1);
        // A request refused on a full queue changes nothing.
        assert_eq!(
            queue.admit("second", Requested::All),
            Err(Full { capacity: 1 })
        );
        assert!(!queue.is_empty());
        queue.take().unwrap();
        assert!(queue.is_empty());
        // A queue that holds none refuses every request, and stays empty.
        let mut closed = Queue::new(0);
        assert_eq!(
            closed.admit("any", Requested::All),
            Err(Full { capacity: 0 })
        );
        assert!(closed.is_empty());
        assert_eq!(closed.take(), None);
    }
}
