//! The kept volume's rule over random histories, on the engine's own calls (`plan_keep`/`keep`,
//! `expire`, `kept_for`/`rebind`/`claimed_again`) and a volume patched as the API server patches
//! it, beside a binder that acts as Kubernetes' does: a claim deleted releases its volume, a
//! claim a restore moved a volume to binds it (at once, or some steps later), and a volume whose
//! policy is `Delete` and that no live claim holds is deleted.
//!
//! The rule, checked after every step against a model kept apart from the engine (when the window
//! of the volume's keeping started: its claim's last delete, or the restore that moved it):
//! gc never gives a volume back its policy before the window passed unless it is bound to a live
//! claim, and no volume no claim holds stays kept past the window plus one review (a claim a
//! restore created, deleted before it was bound, is seen gone by the next review).

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::isotime::format_timestamp;
use crate::lease::Held;
use crate::ports::{Receipt, SessionObject, Store};
use crate::sessions::volumes::{self, RETAINED_LABEL};
use crate::sessions::{Resource, SessionConfig};
use crate::testing::{Kept, block_on};

const DAY: f64 = 86_400.0;
const DAYS: u32 = 7;
const START: f64 = 1_800_000_000.0;

/// What happens next.
#[derive(Debug, Clone)]
enum Step {
    /// A run deletes the claim (its session's row is gone), keeping its volume first.
    RunDeletes,
    /// Someone else deletes the claim.
    UserDeletes,
    /// `restore sessions` creates the claim again on its kept volume; it waits for the bind
    /// (and gives the policy back then) or not.
    Restore { waits: bool },
    /// Kubernetes' binder binds the claim a restore created (until then its volume stays
    /// `Released`, claimed by it).
    Bind,
    /// A run reviews the volumes gc kept.
    Review,
    /// Time passes, in hours.
    Wait(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => Just(Step::RunDeletes),
        1 => Just(Step::UserDeletes),
        2 => any::<bool>().prop_map(|waits| Step::Restore { waits }),
        2 => Just(Step::Bind),
        4 => Just(Step::Review),
        4 => (1u32..=72).prop_map(Step::Wait),
    ]
}

/// The volume, its claim (the uid of the live claim it is bound to, if any), and the model.
struct World {
    kept: Kept,
    cfg: SessionConfig,
    now: f64,
    claim: Option<String>,
    /// Whether the binder has bound the live claim.
    bound: bool,
    uids: u32,
    /// The model: when the window of its keeping started (once gc kept it), and the first review
    /// since.
    start: f64,
    reviewed: Option<f64>,
    flags: [AtomicBool; 2],
}

impl World {
    fn new() -> Self {
        let kept = Kept::default();
        let cfg = SessionConfig {
            retain_volume_days: DAYS,
            ..crate::testing::session_config()
        };
        let volume = json!({
            "metadata": {"name": "pv", "uid": "uid-pv", "resourceVersion": "1"},
            "spec": {
                "claimRef": {"namespace": cfg.namespace, "name": "home", "uid": "claim-0"},
                "persistentVolumeReclaimPolicy": "Delete",
            },
            "status": {"phase": "Bound", "lastPhaseTransitionTime": format_timestamp(START)},
        });
        kept.volumes.lock().unwrap().insert("pv".into(), volume);
        *kept.claims.lock().unwrap() = Some(std::collections::BTreeMap::new());
        let mut world = Self {
            kept,
            cfg,
            now: START,
            claim: Some("claim-0".into()),
            bound: true,
            uids: 0,
            start: START,
            reviewed: None,
            flags: [AtomicBool::new(false), AtomicBool::new(false)],
        };
        world.set_claim(Some("claim-0".into()));
        world
    }

    /// The live claim `home` now (`None`: there is none), as Kubernetes holds it.
    fn set_claim(&mut self, uid: Option<String>) {
        let key = format!("{}/home", self.cfg.namespace);
        let mut claims = self.kept.claims.lock().unwrap();
        let claims = claims.as_mut().unwrap();
        match &uid {
            Some(uid) => claims.insert(key, json!({"metadata": {"uid": uid}})),
            None => claims.remove(&key),
        };
        self.claim = uid;
    }

    /// The model's window starts now.
    fn starts(&mut self) {
        self.start = self.now;
        self.reviewed = None;
    }

    fn held(&self) -> Held<'_> {
        Held::new(&self.flags[0], &self.flags[1], false)
    }

    fn volume(&self) -> Option<Value> {
        self.kept.volumes.lock().unwrap().get("pv").cloned()
    }

    /// Whether gc keeps the volume: `Retain`, gc's label.
    fn is_kept(&self) -> bool {
        self.volume().is_some_and(|v| {
            v["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
                && v["metadata"]["labels"][RETAINED_LABEL].is_string()
        })
    }

    /// Kubernetes' binder and reclaimer, after each step: a volume whose claimRef names the
    /// live claim, bound, is `Bound`; any other is `Released`, and deleted when its policy is
    /// `Delete` and no live claim is named by it.
    fn kubernetes(&mut self) {
        let mut volumes = self.kept.volumes.lock().unwrap();
        let Some(volume) = volumes.get_mut("pv") else {
            return;
        };
        let claimed = volume["spec"]["claimRef"]["uid"]
            .as_str()
            .map(str::to_owned);
        let live = self.claim.is_some() && self.claim == claimed;
        let phase = if live && self.bound {
            "Bound"
        } else {
            "Released"
        };
        if volume["status"]["phase"] != phase {
            volume["status"] = json!({
                "phase": phase, "lastPhaseTransitionTime": format_timestamp(self.now),
            });
            let version: u64 = volume["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            volume["metadata"]["resourceVersion"] = json!((version + 1).to_string());
        }
        if !live && volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete" {
            volumes.remove("pv");
        }
    }

    fn claim_resource(&self, uid: &str) -> Resource {
        Resource {
            api_version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            name: "home".into(),
            uid: uid.into(),
            resource_version: "1".into(),
            session: Some("s".into()),
            created: None,
            deleting: false,
        }
    }

    /// A run deleting the claim, as `run` does: the volume's keep planned, the claim's receipt
    /// naming it recorded, the keep sent, then the delete.
    fn run_deletes(&mut self) {
        let Some(uid) = self.claim.clone() else {
            return;
        };
        let claim = json!({"spec": {"volumeName": "pv"}});
        let resource = self.claim_resource(&uid);
        let kept = &self.kept;
        let planned = block_on(volumes::plan_keep(
            kept, kept, &self.cfg, &claim, &resource, self.now,
        ));
        let Ok(keeping) = planned else {
            return;
        };
        let receipt = Receipt {
            cluster_id: self.cfg.cluster_id.clone(),
            namespace: self.cfg.namespace.clone(),
            uid: uid.clone(),
            name: "home".into(),
            uri: format!("mem://{uid}"),
            sha256: String::new(),
            bytes: 0,
            session: Some(SessionObject {
                api_version: "v1".into(),
                kind: "PersistentVolumeClaim".into(),
                session: Some("s".into()),
                run_at: format_timestamp(self.now),
                retained: keeping.as_ref().map(|k| k.volume.clone()),
            }),
        };
        block_on(kept.put_receipt(&receipt)).unwrap();
        if let Some(keeping) = &keeping
            && block_on(volumes::keep(kept, keeping, self.held())).is_err()
        {
            return;
        }
        self.set_claim(None);
        self.starts();
    }

    /// `restore sessions` of the session: the newest receipt that names the volume gives the
    /// claim it was kept for; the claim is created again and the volume moved to it.
    fn restore(&mut self, waits: bool) {
        if self.claim.is_some() {
            return;
        }
        let receipts = self.kept.receipts.lock().unwrap().clone();
        let Some(receipt) = receipts.iter().rev().find(|r| {
            r.session
                .as_ref()
                .and_then(|s| s.retained.as_ref())
                .is_some_and(|v| v.name == "pv")
        }) else {
            return;
        };
        let kept = &self.kept;
        let cluster = &self.cfg.cluster_id;
        let Ok((volume, record)) = block_on(volumes::kept_for(kept, "pv", &receipt.uid, cluster))
        else {
            return;
        };
        self.uids += 1;
        let uid = format!("claim-{}", self.uids);
        let moved = volumes::rebind(kept, &volume, record, "home", &uid, self.now, false);
        if block_on(moved).is_err() {
            return;
        }
        self.set_claim(Some(uid.clone()));
        self.bound = false;
        self.starts();
        if waits {
            // A binder quick enough for the restore's wait.
            self.bound = true;
            self.kubernetes();
            let (kept, cluster) = (&self.kept, &self.cfg.cluster_id);
            block_on(volumes::claimed_again(kept, "pv", &uid, cluster, false)).unwrap();
        }
    }

    fn review(&mut self) {
        let kept = &self.kept;
        block_on(volumes::expire(
            kept,
            kept,
            &self.cfg,
            self.now,
            self.held(),
        ))
        .unwrap();
        self.reviewed.get_or_insert(self.now);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// No volume gc kept is given back its policy before its window passed while no claim holds
    /// it (Kubernetes would delete it at once), and none stays kept past its window plus one
    /// review.
    #[test]
    fn a_kept_volume_is_given_back_neither_early_nor_late(steps in prop::collection::vec(step(), 1..40)) {
        let mut world = World::new();
        let window = f64::from(DAYS) * DAY;
        for step in &steps {
            let kept_before = world.is_kept();
            match step {
                Step::RunDeletes => world.run_deletes(),
                Step::UserDeletes => {
                    if world.claim.is_some() {
                        world.set_claim(None);
                        world.starts();
                    }
                }
                Step::Restore { waits } => world.restore(*waits),
                Step::Bind => world.bound = world.claim.is_some(),
                Step::Review => world.review(),
                Step::Wait(hours) => world.now += f64::from(*hours) * 3600.0,
            }
            world.kubernetes();
            // Given back while not bound to a live claim: Kubernetes reclaims it as soon as no
            // live claim names it.
            let given_back = kept_before && !world.is_kept();
            let bound = world.volume().is_some_and(|v| v["status"]["phase"] == "Bound");
            if given_back && !bound {
                prop_assert!(
                    world.now >= world.start + window,
                    "given back {}h after its window started ({} days): {steps:?}",
                    (world.now - world.start) / 3600.0,
                    DAYS
                );
            }
            // Past the window counted from the first review since it started (a claim deleted
            // before it was bound is seen gone by a review, not at its delete), reviewed again.
            let reviewed = world.reviewed.unwrap_or(f64::INFINITY);
            if matches!(step, Step::Review) && world.claim.is_none() {
                prop_assert!(
                    !(world.is_kept() && world.now >= reviewed + window),
                    "still kept {}h after its window started: {steps:?}",
                    (world.now - world.start) / 3600.0
                );
            }
        }
    }
}
