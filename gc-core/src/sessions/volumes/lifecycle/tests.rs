//! The kept volume's state machine: every (state, event) pair has its row, and what a review
//! sees of a volume.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{Action, EVENTS, Event, STATES, State, Window, next, proven, review, state_of};
use crate::sessions::volumes::Retained;

/// Every pair: (state, event, action, state after).
const TABLE: [(State, Event, Action, State); 72] = {
    use Action as A;
    use Event as E;
    use State as S;
    [
        // Never kept: a claim's delete keeps it; nothing else concerns gc.
        (S::Unkept, E::ClaimDeleted, A::Keep, S::Kept),
        (S::Unkept, E::ClaimRestored, A::Refuse, S::Unkept),
        (S::Unkept, E::Bound, A::Nothing, S::Unkept),
        (S::Unkept, E::ForeignClaim, A::Nothing, S::Unkept),
        (S::Unkept, E::WindowOpen, A::Nothing, S::Unkept),
        (S::Unkept, E::WindowPassed, A::Nothing, S::Unkept),
        (S::Unkept, E::OutOfScope, A::Nothing, S::Unkept),
        (S::Unkept, E::RetentionOff, A::Nothing, S::Unkept),
        (S::Unkept, E::ClaimGone, A::Nothing, S::Unkept),
        // Kept for its deleted claim.
        // A second delete (the first did not follow its keep): renewed, the window from now.
        (S::Kept, E::ClaimDeleted, A::Renew, S::Kept),
        (S::Kept, E::ClaimRestored, A::Move, S::Restored),
        // Only the claim a restore moved it to is looked for bound.
        (S::Kept, E::Bound, A::Refuse, S::Kept),
        (S::Kept, E::ForeignClaim, A::GiveBack, S::Taken),
        (S::Kept, E::WindowOpen, A::Hold, S::Kept),
        (S::Kept, E::WindowPassed, A::GiveBack, S::Expired),
        (S::Kept, E::OutOfScope, A::Nothing, S::Kept),
        (S::Kept, E::RetentionOff, A::GiveBack, S::Expired),
        (S::Kept, E::ClaimGone, A::Nothing, S::Kept),
        // Moved to the claim a restore created, not yet bound to it.
        // That claim deleted again: kept again, renewed for it (its receipt names the volume).
        (S::Restored, E::ClaimDeleted, A::Renew, S::Kept),
        (S::Restored, E::ClaimRestored, A::Refuse, S::Restored),
        (S::Restored, E::Bound, A::GiveBack, S::GivenBack),
        (S::Restored, E::ForeignClaim, A::GiveBack, S::Taken),
        // Not bound within the window (the claim created again deleted by someone else, or
        // never bound): its policy back once the window from the restore passed.
        (S::Restored, E::WindowOpen, A::Hold, S::Restored),
        (S::Restored, E::WindowPassed, A::GiveBack, S::Expired),
        (S::Restored, E::OutOfScope, A::Nothing, S::Restored),
        (S::Restored, E::RetentionOff, A::GiveBack, S::Expired),
        // Its claim found gone before it was bound: the record notes when; the window from then.
        (S::Restored, E::ClaimGone, A::Note, S::Abandoned),
        // Moved to the claim a restore created, and that claim gone before it was bound: kept
        // for it as for any claim deleted (its window from that delete), restorable again.
        (S::Abandoned, E::ClaimDeleted, A::Renew, S::Kept),
        (S::Abandoned, E::ClaimRestored, A::Move, S::Restored),
        (S::Abandoned, E::Bound, A::Refuse, S::Abandoned),
        (S::Abandoned, E::ForeignClaim, A::GiveBack, S::Taken),
        (S::Abandoned, E::WindowOpen, A::Hold, S::Abandoned),
        (S::Abandoned, E::WindowPassed, A::GiveBack, S::Expired),
        (S::Abandoned, E::OutOfScope, A::Nothing, S::Abandoned),
        (S::Abandoned, E::RetentionOff, A::GiveBack, S::Expired),
        (S::Abandoned, E::ClaimGone, A::Nothing, S::Abandoned),
        // gc's label and record without gc's receipt of the keep: not gc's, never written to.
        (S::Unproven, E::ClaimDeleted, A::Nothing, S::Unproven),
        (S::Unproven, E::ClaimRestored, A::Refuse, S::Unproven),
        (S::Unproven, E::Bound, A::Nothing, S::Unproven),
        (S::Unproven, E::ForeignClaim, A::Nothing, S::Unproven),
        (S::Unproven, E::WindowOpen, A::Nothing, S::Unproven),
        (S::Unproven, E::WindowPassed, A::Nothing, S::Unproven),
        (S::Unproven, E::OutOfScope, A::Nothing, S::Unproven),
        (S::Unproven, E::RetentionOff, A::Nothing, S::Unproven),
        (S::Unproven, E::ClaimGone, A::Nothing, S::Unproven),
        // Its keeping over: as never kept.
        (S::GivenBack, E::ClaimDeleted, A::Keep, S::Kept),
        (S::GivenBack, E::ClaimRestored, A::Refuse, S::GivenBack),
        (S::GivenBack, E::Bound, A::Nothing, S::GivenBack),
        (S::GivenBack, E::ForeignClaim, A::Nothing, S::GivenBack),
        (S::GivenBack, E::WindowOpen, A::Nothing, S::GivenBack),
        (S::GivenBack, E::WindowPassed, A::Nothing, S::GivenBack),
        (S::GivenBack, E::OutOfScope, A::Nothing, S::GivenBack),
        (S::GivenBack, E::RetentionOff, A::Nothing, S::GivenBack),
        (S::GivenBack, E::ClaimGone, A::Nothing, S::GivenBack),
        (S::Expired, E::ClaimDeleted, A::Keep, S::Kept),
        (S::Expired, E::ClaimRestored, A::Refuse, S::Expired),
        (S::Expired, E::Bound, A::Nothing, S::Expired),
        (S::Expired, E::ForeignClaim, A::Nothing, S::Expired),
        (S::Expired, E::WindowOpen, A::Nothing, S::Expired),
        (S::Expired, E::WindowPassed, A::Nothing, S::Expired),
        (S::Expired, E::OutOfScope, A::Nothing, S::Expired),
        (S::Expired, E::RetentionOff, A::Nothing, S::Expired),
        (S::Expired, E::ClaimGone, A::Nothing, S::Expired),
        (S::Taken, E::ClaimDeleted, A::Keep, S::Kept),
        (S::Taken, E::ClaimRestored, A::Refuse, S::Taken),
        (S::Taken, E::Bound, A::Nothing, S::Taken),
        (S::Taken, E::ForeignClaim, A::Nothing, S::Taken),
        (S::Taken, E::WindowOpen, A::Nothing, S::Taken),
        (S::Taken, E::WindowPassed, A::Nothing, S::Taken),
        (S::Taken, E::OutOfScope, A::Nothing, S::Taken),
        (S::Taken, E::RetentionOff, A::Nothing, S::Taken),
        (S::Taken, E::ClaimGone, A::Nothing, S::Taken),
    ]
};

#[test]
fn every_state_and_event_has_its_row() {
    let pairs: HashSet<(State, Event)> = TABLE.iter().map(|&(s, e, _, _)| (s, e)).collect();
    assert_eq!(pairs.len(), TABLE.len(), "a pair listed twice");
    for state in STATES {
        for event in EVENTS {
            assert!(pairs.contains(&(state, event)), "{state:?} {event:?}");
        }
    }
    for (state, event, action, after) in TABLE {
        assert_eq!(next(state, event), (action, after), "{state:?} {event:?}");
    }
}

/// The rule, over every path: from a state holding gc's record, every sequence of events ends
/// with the policy given back or the volume held (never stranded without a review), and the only
/// way to the policy given back while the claim is gone is the window passing or retention off.
#[test]
fn no_path_leaves_a_kept_volume_without_a_way_back() {
    for state in [State::Kept, State::Restored, State::Abandoned] {
        let reviews = [Event::WindowPassed, Event::RetentionOff];
        for event in reviews {
            let (action, after) = next(state, event);
            assert_eq!(action, Action::GiveBack, "{state:?} {event:?}");
            assert_eq!(after, State::Expired);
        }
        // A review that holds always leads somewhere once the window passes.
        assert_eq!(next(state, Event::WindowOpen).1, state);
    }
    // What gives a volume back inside its window: only a live claim bound to it.
    for (state, event, action, _) in TABLE {
        if action == Action::GiveBack {
            assert!(
                matches!(
                    event,
                    Event::Bound | Event::ForeignClaim | Event::WindowPassed | Event::RetentionOff
                ),
                "{state:?} {event:?}"
            );
        }
    }
}

const CLUSTER: &str = "primary";

/// A volume gc kept for claim `c1` at time 1000, claimed by `claimed`, in `phase`.
fn kept(claimed: &str, phase: &str, restored_to: Option<&str>) -> (Value, Retained) {
    let record = Retained {
        policy: "Delete".into(),
        namespace: "streamspace".into(),
        claim: "home".into(),
        claim_uid: "c1".into(),
        session: Some("s".into()),
        at: 1000.0,
        restored_to: restored_to.map(str::to_owned),
        days: None,
        gone_at: None,
    };
    let volume = json!({
        "metadata": {
            "name": "pv",
            "labels": {"gc.example.com/retained": CLUSTER},
            "annotations": {"gc.example.com/retained": serde_json::to_string(&record).unwrap()},
        },
        "spec": {"claimRef": {"uid": claimed}, "persistentVolumeReclaimPolicy": "Retain"},
        "status": {"phase": phase},
    });
    (volume, record)
}

#[test]
fn the_state_is_what_the_volume_records_for_this_cluster() {
    let (volume, _) = kept("c1", "Released", None);
    assert_eq!(state_of(&volume, CLUSTER).0, State::Kept);
    assert_eq!(state_of(&volume, "other").0, State::Unkept);
    let (restored, _) = kept("c2", "Bound", Some("c2"));
    assert_eq!(state_of(&restored, CLUSTER).0, State::Restored);
    // Moved to c2 and not bound yet, or bound to another claim: still restored.
    let (moved, _) = kept("c2", "Pending", Some("c2"));
    assert_eq!(state_of(&moved, CLUSTER).0, State::Restored);
    let (other, _) = kept("c3", "Released", Some("c2"));
    assert_eq!(state_of(&other, CLUSTER).0, State::Restored);
    // The claim a restore made, not bound: restored, until a review finds it gone and notes it
    // on the record; then kept for it, as any claim deleted.
    let (not_bound, mut record) = kept("c2", "Released", Some("c2"));
    assert_eq!(state_of(&not_bound, CLUSTER).0, State::Restored);
    record.gone_at = Some(2000.0);
    let mut gone = not_bound;
    gone["metadata"]["annotations"]["gc.example.com/retained"] =
        json!(serde_json::to_string(&record).unwrap());
    assert_eq!(state_of(&gone, CLUSTER).0, State::Abandoned);
    // Without gc's receipt of the keep, none of these is gc's.
    for state in [State::Kept, State::Restored, State::Abandoned] {
        assert_eq!(proven(state, true), state);
        assert_eq!(proven(state, false), State::Unproven);
    }
    for state in [
        State::Unkept,
        State::GivenBack,
        State::Expired,
        State::Taken,
    ] {
        assert_eq!(proven(state, false), state);
    }
    let mut unreadable = volume.clone();
    unreadable["metadata"]["annotations"]["gc.example.com/retained"] = json!("{");
    assert_eq!(state_of(&unreadable, CLUSTER).0, State::Unkept);
    let mut unlabelled = volume;
    unlabelled["metadata"]["labels"] = json!({});
    assert_eq!(state_of(&unlabelled, CLUSTER).0, State::Unkept);
}

#[test]
fn a_review_sees_bound_foreign_and_the_window() {
    let week = Window { days: 7 };
    let day = 86_400.0;
    let (released, record) = kept("c1", "Released", None);
    assert_eq!(review(&released, &record, week, 1000.0), Event::WindowOpen);
    assert_eq!(
        review(&released, &record, week, 1000.0 + 7.0 * day - 1.0),
        Event::WindowOpen
    );
    assert_eq!(
        review(&released, &record, week, 1000.0 + 7.0 * day),
        Event::WindowPassed
    );
    assert_eq!(
        review(&released, &record, Window { days: 0 }, 1000.0),
        Event::RetentionOff
    );
    // Released later than kept (its claim deleted days after the keep, by anyone): the window
    // counts from then.
    let mut late = released.clone();
    late["status"]["lastPhaseTransitionTime"] = json!("1970-01-11T00:00:00Z");
    let then = 864_000.0;
    assert_eq!(
        review(&late, &record, week, then + 7.0 * day - 1.0),
        Event::WindowOpen
    );
    assert_eq!(
        review(&late, &record, week, then + 7.0 * day),
        Event::WindowPassed
    );
    // The transition time of a phase other than Released says nothing of the claim's delete.
    let mut bound_late = late.clone();
    bound_late["status"]["phase"] = json!("Bound");
    assert_eq!(
        review(&bound_late, &record, week, 1000.0 + 7.0 * day),
        Event::WindowPassed
    );
    // Still bound to its own claim (its delete did not follow, or is not done): the window.
    let (own, record) = kept("c1", "Bound", None);
    assert_eq!(review(&own, &record, week, 1000.0), Event::WindowOpen);
    // Bound to a claim gc's record does not name.
    let (foreign, record) = kept("c9", "Bound", None);
    assert_eq!(review(&foreign, &record, week, 1000.0), Event::ForeignClaim);
    // Claimed by another claim but not bound: the window, as if released.
    let (pending, record) = kept("c9", "Pending", None);
    assert_eq!(review(&pending, &record, week, 1000.0), Event::WindowOpen);
    // Restored: bound to the claim created again, or not yet.
    let (restored, record) = kept("c2", "Bound", Some("c2"));
    assert_eq!(review(&restored, &record, week, 1000.0), Event::Bound);
    assert_eq!(
        review(&restored, &record, Window { days: 0 }, 1000.0),
        Event::Bound
    );
    let (restoring, record) = kept("c2", "Released", Some("c2"));
    assert_eq!(review(&restoring, &record, week, 1000.0), Event::WindowOpen);
    let (taken, record) = kept("c9", "Bound", Some("c2"));
    assert_eq!(review(&taken, &record, week, 1000.0), Event::ForeignClaim);
}
