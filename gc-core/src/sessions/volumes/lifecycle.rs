//! The life of a volume gc kept, as one state machine: the state recorded on the volume (gc's
//! label and annotation, [`super::Retained`]), the events that reach it (a run deletes its claim,
//! a restore creates the claim again, a run reviews it), and one transition function, [`next`].
//! [`super::plan_keep`], [`super::expire`] and [`super::kept_for`] / [`super::rebind`] /
//! [`super::claimed_again`] only read the volume (and, to prove it gc's, gc's receipt of its
//! keep: [`proven`]), ask [`next`], and send the write it names.
//!
//! The rule it keeps: a volume gc changed either returns to its original policy or stays
//! `Retain` for a bounded window ([`Window`]) counted from its claim's last delete (or the restore
//! that moved it); it is never given back its policy while it is claimed by a claim that is gone
//! inside that window (Kubernetes would reclaim it at once); and every review of it is an audit
//! line. A policy given back to a volume whose claim still lives is harmless: Kubernetes reclaims
//! a volume only once the claim it names is gone.

use serde_json::Value;

use super::Retained;

/// Where a volume is in gc's keeping, as recorded on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// gc has no record on it (never kept, or of another cluster): a claim's delete may keep it.
    Unkept,
    /// `Retain`, kept for the claim its record names (deleted, or about to be).
    Kept,
    /// `Retain`, moved by a restore to the claim created again, that claim not yet seen bound.
    Restored,
    /// `Retain`, moved by a restore to the claim created again, and that claim found gone before
    /// it was bound (deleted by a user, or by anything but a run of gc, which renews the record):
    /// its claimRef names a claim that no longer exists, and its record says since when a review
    /// saw it gone. Kept as for any claim deleted, its window from then; a restore may move it
    /// again.
    Abandoned,
    /// gc's label of this cluster and a record that reads, but gc's store holds no receipt of the
    /// keep the record claims ([`super::keep_receipt`]): copied, made up, or kept by a gc whose
    /// store this is not. Not gc's: nothing is written to it, and each review says so.
    Unproven,
    /// Its policy given back, gc's record removed: bound to the claim a restore created.
    GivenBack,
    /// Its policy given back, gc's record removed: the window passed (or retention is off).
    Expired,
    /// Its policy given back, gc's record removed: bound to a claim gc's record does not name.
    Taken,
}

/// What reaches a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A run is about to delete the claim the volume is claimed by (the first time, or again
    /// after a restore: "deleted again").
    ClaimDeleted,
    /// `restore` created the claim again and moves the volume to it.
    ClaimRestored,
    /// A review sees it bound to the claim a restore moved it to.
    Bound,
    /// A review sees it bound to a claim its record does not name.
    ForeignClaim,
    /// A review, inside the window.
    WindowOpen,
    /// A review, the window passed since its claim's last delete (or its restore).
    WindowPassed,
    /// A review finds the claim a restore moved it to gone, not bound to it (no record says so
    /// yet).
    ClaimGone,
    /// Its namespace left the run's selection (relabelled, excluded, deleted): it is still
    /// reviewed, by whichever run reviews the namespaces no run selects.
    OutOfScope,
    /// A review by a run whose retention is 0: nothing is kept any longer.
    RetentionOff,
}

/// The write an event asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Nothing written, nothing said: not gc's volume.
    Nothing,
    /// `Retain`, gc's label, and a record naming the claim, since now.
    Keep,
    /// The record rewritten: it names the claim deleted now, since now (a restored claim deleted
    /// again, or a claim whose earlier delete did not follow its keep); the policy stays `Retain`.
    Renew,
    /// The `claimRef` moved to the claim created again; the record says so, since now.
    Move,
    /// Nothing written; the review says until when it is kept.
    Hold,
    /// The record notes since when the claim a restore moved it to is gone (the review that
    /// found it): its window starts then; the policy stays `Retain`.
    Note,
    /// Its original policy back, gc's label and record removed.
    GiveBack,
    /// Nothing written: the event does not apply to the state, and the caller says why.
    Refuse,
}

/// Every state, in the order the table lists them.
pub const STATES: [State; 8] = [
    State::Unkept,
    State::Kept,
    State::Restored,
    State::Abandoned,
    State::Unproven,
    State::GivenBack,
    State::Expired,
    State::Taken,
];

/// Every event, in the order the table lists them.
pub const EVENTS: [Event; 9] = [
    Event::ClaimDeleted,
    Event::ClaimRestored,
    Event::Bound,
    Event::ForeignClaim,
    Event::WindowOpen,
    Event::WindowPassed,
    Event::ClaimGone,
    Event::OutOfScope,
    Event::RetentionOff,
];

/// The one transition function: what `event` does to a volume in `state`, and where it leaves
/// it.
#[must_use]
pub fn next(state: State, event: Event) -> (Action, State) {
    use Action as A;
    use Event as E;
    use State as S;
    match (state, event) {
        // Not proven gc's: never written to, whatever reaches it.
        (S::Unproven, E::ClaimRestored) => (A::Refuse, state),
        (S::Unproven, _) => (A::Nothing, state),
        // A claim a restore created, gone before it was bound: kept for it as for any claim
        // deleted (a run never deletes it: it is gone), and restorable again.
        (S::Abandoned, E::ClaimGone) => (A::Nothing, state),
        (S::Abandoned, E::ClaimDeleted) => (A::Renew, S::Kept),
        (S::Abandoned, E::ClaimRestored) => (A::Move, S::Restored),
        (S::Abandoned, E::Bound) => (A::Refuse, state),
        (S::Abandoned, E::ForeignClaim) => (A::GiveBack, S::Taken),
        (S::Abandoned, E::WindowOpen) => (A::Hold, state),
        (S::Abandoned, E::WindowPassed | E::RetentionOff) => (A::GiveBack, S::Expired),
        (S::Abandoned, E::OutOfScope) => (A::Nothing, state),
        // With no record (never kept, or its keeping over), only a claim's delete concerns gc.
        (S::Unkept | S::GivenBack | S::Expired | S::Taken, E::ClaimDeleted) => (A::Keep, S::Kept),
        (S::Unkept | S::GivenBack | S::Expired | S::Taken, E::ClaimRestored) => (A::Refuse, state),
        (S::Unkept | S::GivenBack | S::Expired | S::Taken, _) => (A::Nothing, state),
        // Deleted (again): kept again, for the claim deleted now, the window from now.
        (S::Kept | S::Restored, E::ClaimDeleted) => (A::Renew, S::Kept),
        (S::Kept, E::ClaimRestored) => (A::Move, S::Restored),
        // A restore of a volume already moved to a claim created again: that claim is the one.
        (S::Restored, E::ClaimRestored) => (A::Refuse, S::Restored),
        // Bound is seen only of the claim a restore moved it to.
        (S::Kept, E::Bound) => (A::Refuse, S::Kept),
        (S::Restored, E::Bound) => (A::GiveBack, S::GivenBack),
        (S::Kept | S::Restored, E::ForeignClaim) => (A::GiveBack, S::Taken),
        (S::Kept | S::Restored, E::WindowOpen) => (A::Hold, state),
        (S::Kept | S::Restored, E::WindowPassed | E::RetentionOff) => (A::GiveBack, S::Expired),
        (S::Kept | S::Restored, E::OutOfScope) => (A::Nothing, state),
        // The claim a restore created, found gone before it was bound: its window from now.
        (S::Restored, E::ClaimGone) => (A::Note, S::Abandoned),
        (S::Kept, E::ClaimGone) => (A::Nothing, state),
    }
}

/// The state a volume's record and label say it is in, for the runs of `cluster`, before its
/// keep is proven ([`proven`]). A volume moved to a claim a restore created is
/// [`State::Restored`] until a review finds that claim gone and its record says so
/// ([`State::Abandoned`]).
#[must_use]
pub fn state_of(volume: &Value, cluster: &str) -> (State, Option<Retained>) {
    match record_of(volume, cluster) {
        None => (State::Unkept, None),
        Some(r) if r.restored_to.is_some() && r.gone_at.is_some() => (State::Abandoned, Some(r)),
        Some(r) if r.restored_to.is_some() => (State::Restored, Some(r)),
        Some(r) => (State::Kept, Some(r)),
    }
}

/// `state` once gc's store was asked for the receipt of the keep its record claims: a state
/// holding gc's record is [`State::Unproven`] without that receipt.
#[must_use]
pub fn proven(state: State, receipt: bool) -> State {
    match state {
        State::Kept | State::Restored | State::Abandoned if !receipt => State::Unproven,
        state => state,
    }
}

/// gc's record on `volume`, when it carries gc's label of `cluster` and a record that reads.
#[must_use]
pub fn record_of(volume: &Value, cluster: &str) -> Option<Retained> {
    let meta = &volume["metadata"];
    if meta["labels"][super::RETAINED_LABEL] != cluster {
        return None;
    }
    meta["annotations"][super::RETAINED_ANNOTATION]
        .as_str()
        .and_then(|a| serde_json::from_str::<Retained>(a).ok())
}

/// How long a volume stays kept: `days` (the run's `--retain-volume-days`), counted from its
/// claim's last delete, or from the restore that moved it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Days; 0 is retention off.
    pub days: u32,
}

impl Window {
    /// The window's length in seconds.
    #[must_use]
    pub fn seconds(self) -> f64 {
        f64::from(self.days) * 86_400.0
    }

    /// When the window of `volume`, kept as `record` says, starts: the latest of the record's
    /// time (its keep, renewal or restore), the review that found the claim a restore created
    /// gone, and, once the volume is `Released`, the time it became so
    /// (`status.lastPhaseTransitionTime`: the claim's delete, whoever sent it).
    #[must_use]
    pub fn start(volume: &Value, record: &Retained) -> f64 {
        let released = (volume["status"]["phase"] == "Released")
            .then(|| volume["status"]["lastPhaseTransitionTime"].as_str())
            .flatten()
            .and_then(|t| crate::isotime::parse_timestamp(t).ok());
        let at = record.at.max(record.gone_at.unwrap_or(record.at));
        released.map_or(at, |t| t.max(at))
    }
}

/// What a review at `now` sees of a volume kept as `record` says ([`State::Kept`],
/// [`State::Restored`] or [`State::Abandoned`]): bound to the claim a restore moved it to, bound to a claim the record
/// does not name, or the window open or passed (retention off when it is 0 days).
#[must_use]
pub fn review(volume: &Value, record: &Retained, window: Window, now: f64) -> Event {
    let claimed = volume["spec"]["claimRef"]["uid"].as_str().unwrap_or("");
    let bound = volume["status"]["phase"] == "Bound";
    let restored_to = record.restored_to.as_deref();
    if bound && restored_to == Some(claimed) {
        return Event::Bound;
    }
    if bound && claimed != record.claim_uid && restored_to != Some(claimed) {
        return Event::ForeignClaim;
    }
    if window.days == 0 {
        return Event::RetentionOff;
    }
    if Window::start(volume, record) + window.seconds() > now {
        Event::WindowOpen
    } else {
        Event::WindowPassed
    }
}

#[cfg(test)]
mod property;
#[cfg(test)]
mod tests;
