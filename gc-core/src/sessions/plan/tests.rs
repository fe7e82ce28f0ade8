//! The session plan, decision by decision: orphans, grace, cap, spared resources and the
//! mass-deletion guard, and the settings it refuses.

use super::*;
use crate::input::InputError;
use crate::sessions::config::{Kind, SessionInputs};

const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

fn res(kind: &str, session: Option<&str>, created: &str) -> Resource {
    Resource {
        api_version: "v1".into(),
        kind: kind.into(),
        name: format!("{}-{kind}", session.unwrap_or("none")),
        uid: format!("uid-{}-{kind}", session.unwrap_or("none")),
        resource_version: "1".into(),
        session: session.map(Into::into),
        created: Some(created.into()),
        deleting: false,
    }
}

fn cfg(edit: impl FnOnce(&mut SessionInputs)) -> SessionConfig {
    let mut i = SessionInputs {
        guard_floor: 2,
        ..Default::default()
    };
    edit(&mut i);
    i.validate().unwrap()
}

fn rows(entries: &[(&str, Row)]) -> HashMap<String, Row> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn decisions(plan: &SessionPlan) -> Vec<(String, &'static str)> {
    plan.judged
        .iter()
        .map(|j| (j.resource.name.clone(), j.decision.name()))
        .collect()
}

#[test]
fn live_gone_soft_deleted_young_and_unlabelled() {
    let old = "2026-11-27T12:00:00Z";
    let young = "2026-11-29T06:00:00Z";
    let mut deleting = res("Service", Some("gone"), old);
    deleting.name = "deleting".into();
    deleting.deleting = true;
    let resources = vec![
        res("Deployment", Some("live"), old),
        res("Deployment", Some("gone"), old),
        res("PersistentVolumeClaim", Some("soft"), old),
        res("Service", Some("young"), young),
        res("Session", None, old),
        res("Session", Some(""), old),
        deleting,
        res("Deployment", Some("hibernated"), old),
    ];
    let db = rows(&[
        (
            "live",
            Row::Present {
                state: Some("running".into()),
            },
        ),
        (
            "hibernated",
            Row::Present {
                state: Some("hibernated".into()),
            },
        ),
        ("gone", Row::Missing),
        (
            "soft",
            Row::Present {
                state: Some("deleted".into()),
            },
        ),
        ("young", Row::Missing),
    ]);
    assert_eq!(
        session_ids(&resources),
        ["gone", "hibernated", "live", "soft", "young"]
    );
    let c = cfg(|i| i.guard_floor = 10);
    let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
    assert_eq!(
        decisions(&plan),
        [
            ("live-Deployment".into(), "kept"),
            ("gone-Deployment".into(), "delete"),
            ("soft-PersistentVolumeClaim".into(), "kept"),
            ("young-Service".into(), "held"),
            ("none-Session".into(), "skipped"),
            ("-Session".into(), "skipped"),
            ("deleting".into(), "skipped"),
            ("hibernated-Deployment".into(), "kept"),
        ]
    );
    // Soft deletes count as gone only when configured.
    let c = cfg(|i| {
        i.guard_floor = 10;
        i.terminal_states = vec!["deleted".into()];
    });
    let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
    assert_eq!(
        decisions(&plan)[2],
        ("soft-PersistentVolumeClaim".into(), "delete")
    );
    assert_eq!(plan.deletes().count(), 2);
    // A scoped lookup: the reason says which rows count here, not that the row is missing.
    let reason = |c: &SessionConfig| {
        let plan = plan_sessions(&resources, &db, c, NOW).unwrap();
        match &plan.judged[1].decision {
            SessionDecision::Delete { reason } => reason.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        reason(&cfg(|i| i.guard_floor = 10)),
        "no session gone in the database"
    );
    let scoped = cfg(|i| {
        i.guard_floor = 10;
        i.lookup_scope = vec![
            ("cluster_id".into(), "prod".into()),
            ("namespace".into(), "s".into()),
        ];
    });
    assert_eq!(
        reason(&scoped),
        "no session gone in the database with cluster_id = 'prod' and namespace = 's' \
         (or those columns empty)"
    );
}

#[test]
fn the_selector_reaches_the_server_canonical() {
    let c = cfg(|i| i.selector = " !canary , app in (streamspace-session)".into());
    assert_eq!(c.selector, "app in (streamspace-session),!canary");
    assert_eq!(cfg(|_| {}).selector, "app=streamspace-session");
    assert_eq!(
        labels_of(&serde_json::json!({"labels": {"a": "1", "b": 2}})),
        Labels::from([("a".into(), "1".into()), ("b".into(), "2".into())])
    );
    assert_eq!(labels_of(&serde_json::json!({})), Labels::new());
}

/// Protected and excluded resources are never deleted, whatever their session; the guard
/// weighs only the others; the cap is not spent on them.
#[test]
fn protected_and_excluded_resources_are_spared() {
    let old = "2026-11-20T00:00:00Z";
    let label = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let resources: Vec<_> = ["a", "b", "c", "d", "e", "live"]
        .iter()
        .map(|s| res("Deployment", Some(s), old))
        .collect();
    let labels = vec![
        label(&[("gc.example.com/protect", "true"), ("team", "payments")]),
        label(&[("team", "payments")]),
        label(&[("gc.example.com/protect", "yes")]),
        label(&[]),
        label(&[("team", "search")]),
        label(&[("gc.example.com/protect", "true")]),
    ];
    let mut db: HashMap<String, Row> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|s| ((*s).to_owned(), Row::Missing))
        .collect();
    db.insert("live".into(), Row::Present { state: None });
    let c = cfg(|i| {
        i.guard_floor = 0;
        i.guard_ratio = 1.0;
        i.max_deletes = 2;
        i.exclude_selector = Some("team in (payments)".into());
    });
    // The live id is only on a protected resource: it shows nothing of the table, and the
    // no-row refusal stands whatever the share.
    let err = plan_labelled(&resources, &labels, &db, &c, NOW).unwrap_err();
    assert_eq!(err, SessionPlanError::NoRowFound { ids: 3, orphans: 3 });
    // With its Service judged (no labels known past the end of `labels`), it does.
    let with_live = [&resources[..], &[res("Service", Some("live"), old)]].concat();
    let plan = plan_labelled(&with_live, &labels, &db, &c, NOW).unwrap();
    assert_eq!(
        decisions(&plan),
        [
            ("a-Deployment".into(), "protected"),
            ("b-Deployment".into(), "excluded"),
            ("c-Deployment".into(), "delete"),
            ("d-Deployment".into(), "delete"),
            ("e-Deployment".into(), "deferred"),
            ("live-Deployment".into(), "protected"),
            ("live-Service".into(), "kept"),
        ]
    );
    assert_eq!((plan.scanned, plan.orphans, plan.spared), (7, 3, 3));
    let json = serde_json::to_value(&plan.judged[..2]).unwrap();
    assert_eq!(json[0]["decision"], "protected");
    assert_eq!(
        json[0]["reason"],
        "carries the protect label gc.example.com/protect=true"
    );
    assert_eq!(json[1]["decision"], "excluded");
    assert_eq!(
        json[1]["reason"],
        "matches the exclude selector team in (payments)"
    );
    assert_eq!(plan.judged[1].decision.spared(), Some(Spared::Excluded));
    // Without labels known, nothing is spared.
    let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
    assert_eq!(plan.spared, 0);
    assert_eq!(plan.deletes().count(), 2);
    // The guard weighs the three gone sessions among the three judged (the live one is only
    // on a protected resource), not among the six scanned: a share of 1, over 0.9.
    let guarded = cfg(|i| {
        i.guard_floor = 2;
        i.guard_ratio = 0.9;
        i.exclude_selector = Some("team in (payments)".into());
    });
    let err = plan_labelled(&resources, &labels, &db, &guarded, NOW).unwrap_err();
    assert!(
        matches!(
            err,
            SessionPlanError::MassDeletion {
                orphaned: 3,
                judged: 3,
                ..
            }
        ),
        "{err}"
    );
    // Unspared, the same resources are five gone sessions of six: under the ratio of 0.9.
    let plan = plan_labelled(&resources, &[], &db, &guarded, NOW).unwrap();
    assert_eq!(plan.orphans, 5);
}

/// Only resources judged against the database are weighed: whatever is skipped (no session
/// label, an empty one, already being deleted) counts on neither side of the guard, so
/// objects that merely carry the selector's labels cannot push the orphans under the ratio.
#[test]
fn the_guard_weighs_only_resources_judged_against_the_database() {
    let old = "2026-11-20T00:00:00Z";
    let service = |session: Option<&str>, name: &str| Resource {
        name: name.into(),
        ..res("Service", session, old)
    };
    // One live session and 11 whose rows are gone...
    let mut db = rows(&[("live", Row::Present { state: None })]);
    let mut sessions = vec![service(Some("live"), "live")];
    for i in 0..11 {
        let id = format!("gone-{i}");
        db.insert(id.clone(), Row::Missing);
        sessions.push(service(Some(&id), &id));
    }
    // ...and 12 Services with the app label but no session label.
    let unlabelled: Vec<_> = (0..12)
        .map(|i| service(None, &format!("unlabelled-{i}")))
        .collect();
    let defaults = cfg(|i| i.guard_floor = 10);
    let refused = |resources: &[Resource]| {
        let err = plan_sessions(resources, &db, &defaults, NOW).unwrap_err();
        assert!(
            matches!(
                err,
                SessionPlanError::MassDeletion {
                    orphaned: 11,
                    judged: 12,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("refused: 11 of 12 sessions judged against the database look gone"),
            "{err}"
        );
    };
    // The 11 orphans of 12 judged are refused, with or without the unlabelled ones.
    refused(&sessions);
    refused(&[&sessions[..], &unlabelled].concat());
    refused(&[&unlabelled, &sessions[..]].concat());
    // Nor do empty session labels, or resources already being deleted, whether their
    // session is live or gone.
    let others: Vec<_> = (0..18)
        .map(|i| {
            let session = ["", "live", "gone-0"][i % 3];
            let mut r = service(Some(session), &format!("other-{i}"));
            r.deleting = !session.is_empty();
            r
        })
        .collect();
    refused(&[&sessions[..], &others].concat());
    // Skipped, protected and excluded together (two unlabelled resources are also spared:
    // neither is counted twice): still 11 of 12.
    let deleting: Vec<_> = others.iter().filter(|r| r.deleting).cloned().collect();
    let c = cfg(|i| {
        i.guard_floor = 10;
        i.exclude_selector = Some("team in (payments)".into());
    });
    let all = [&unlabelled[..], &sessions, &deleting].concat();
    let mut labels = vec![Labels::new(); all.len()];
    labels[0].insert("team".into(), "payments".into());
    labels[1].insert("gc.example.com/protect".into(), "true".into());
    let err = plan_labelled(&all, &labels, &db, &c, NOW).unwrap_err();
    assert!(
        matches!(
            err,
            SessionPlanError::MassDeletion {
                orphaned: 11,
                judged: 12,
                ..
            }
        ),
        "{err}"
    );
    // What is skipped is still reported, and still scanned.
    let overridden = cfg(|i| {
        i.guard_floor = 10;
        i.override_guard = true;
    });
    let both = [&sessions[..], &unlabelled].concat();
    let plan = plan_sessions(&both, &db, &overridden, NOW).unwrap();
    assert_eq!((plan.scanned, plan.orphans, plan.spared), (24, 11, 0));
    let skipped = decisions(&plan)
        .iter()
        .filter(|(_, d)| *d == "skipped")
        .count();
    assert_eq!(skipped, 12);
    // Under the ratio among the judged, the skipped change nothing either: 11 orphans of 23
    // judged pass.
    let mut more_live = both.clone();
    for i in 0..11 {
        let id = format!("live-{i}");
        db.insert(id.clone(), Row::Present { state: None });
        more_live.push(service(Some(&id), &id));
    }
    let plan = plan_sessions(&more_live, &db, &defaults, NOW).unwrap();
    assert_eq!(plan.deletes().count(), 11);
    // Nothing judged at all: nothing to weigh, nothing refused.
    let plan = plan_sessions(&unlabelled, &db, &cfg(|i| i.guard_floor = 0), NOW).unwrap();
    assert_eq!((plan.scanned, plan.orphans), (12, 0));
    // The no-row guard looks at the judged ids, and ignores the unlabelled.
    let gone_only = rows(&[("gone-0", Row::Missing)]);
    let err = plan_sessions(
        &[&sessions[1..2], &unlabelled].concat(),
        &gone_only,
        &defaults,
        NOW,
    )
    .unwrap_err();
    assert_eq!(err, SessionPlanError::NoRowFound { ids: 1, orphans: 1 });
}

/// The guard's share weighs session ids, not resources: an id counts once however many
/// resources carry it, so resources labelled with a live id (readable off any of its
/// resources) cannot dilute the gone sessions under the ratio. The floor bounds what would
/// be deleted: it counts the gone sessions' resources. An id seen only on skipped, protected
/// or excluded resources is counted nowhere, by the share or by the no-row refusal.
#[test]
fn the_guard_weighs_session_ids_not_resources() {
    let old = "2026-11-20T00:00:00Z";
    let service = |session: &str, name: &str| Resource {
        name: name.into(),
        ..res("Service", Some(session), old)
    };
    let mass = |err: &SessionPlanError| match err {
        SessionPlanError::MassDeletion {
            orphaned, judged, ..
        } => Some((*orphaned, *judged)),
        _ => None,
    };
    // One live session and 11 whose rows are gone: 11 of 12 sessions.
    let mut db = rows(&[("live", Row::Present { state: None })]);
    let mut sessions = vec![service("live", "live")];
    for i in 0..11 {
        let id = format!("gone-{i}");
        db.insert(id.clone(), Row::Missing);
        sessions.push(service(&id, &id));
    }
    let defaults = cfg(|i| i.guard_floor = 10);
    let err = plan_sessions(&sessions, &db, &defaults, NOW).unwrap_err();
    assert_eq!(mass(&err), Some((11, 12)), "{err}");
    assert!(
        err.to_string().starts_with(
            "refused: 11 of 12 sessions judged against the database look gone (more than 0.5 \
             of them;"
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(
            "a session counts once however many resources carry its id, and ids found only \
             on skipped, protected or excluded resources are not counted"
        ),
        "{err}"
    );
    // 12 more Services labelled with the live id (11 of 24 resources): still 11 of 12.
    let live_copies: Vec<_> = (0..12)
        .map(|i| service("live", &format!("copy-{i}")))
        .collect();
    for resources in [
        [&sessions[..], &live_copies].concat(),
        [&live_copies[..], &sessions].concat(),
    ] {
        let err = plan_sessions(&resources, &db, &defaults, NOW).unwrap_err();
        assert_eq!(mass(&err), Some((11, 12)), "{err}");
    }
    assert!(
        err.to_string()
            .contains("and their 11 resources are more than 10;"),
        "{err}"
    );
    // The floor counts what would be deleted: 3 gone sessions of StreamSpace's four
    // resources beside one live session (3 of 4 sessions, 12 resources) are refused at the
    // floor of 10, 2 of them (8 resources) go.
    let streamspace = |gone: usize| {
        let mut resources = vec![service("live", "live")];
        for i in 0..gone {
            for kind in ["Deployment", "Service", "PersistentVolumeClaim", "Session"] {
                resources.push(res(kind, Some(&format!("gone-{i}")), old));
            }
        }
        resources
    };
    let err = plan_sessions(&streamspace(3), &db, &defaults, NOW).unwrap_err();
    assert_eq!(mass(&err), Some((3, 4)), "{err}");
    assert!(
        err.to_string()
            .contains("and their 12 resources are more than 10;"),
        "{err}"
    );
    let plan = plan_sessions(&streamspace(2), &db, &defaults, NOW).unwrap();
    assert_eq!((plan.orphans, plan.deletes().count()), (8, 8));
    // An id counts when it labels at least one judged resource, whatever else carries it;
    // an id only on protected, excluded or deleting resources counts nowhere. Here the live
    // id is only on spared or deleting resources: 11 of 11.
    let c = cfg(|i| {
        i.guard_floor = 10;
        i.exclude_selector = Some("team in (payments)".into());
    });
    let mut deleting = service("live", "deleting");
    deleting.deleting = true;
    let spared_live = [
        service("live", "protected"),
        service("live", "excluded"),
        deleting,
    ];
    let mut gone_spared = service("gone-0", "gone-0-protected");
    gone_spared.uid = "uid-gone-0-protected".into();
    let all = [&spared_live[..], &sessions[1..], &[gone_spared]].concat();
    let mut labels = vec![Labels::new(); all.len()];
    labels[0].insert("gc.example.com/protect".into(), "true".into());
    labels[1].insert("team".into(), "payments".into());
    labels[all.len() - 1].insert("gc.example.com/protect".into(), "true".into());
    let err = plan_labelled(&all, &labels, &db, &c, NOW).unwrap_err();
    assert_eq!(mass(&err), Some((11, 11)), "{err}");
    // With the live session's own Service judged again: 11 of 12.
    let all = [&all[..], &sessions[..1]].concat();
    let err = plan_labelled(&all, &labels, &db, &c, NOW).unwrap_err();
    assert_eq!(mass(&err), Some((11, 12)), "{err}");
}

/// The no-row refusal looks only at the ids of resources judged against the database: a
/// present id carried only by a protected, excluded or deleting resource does not show the
/// table is the application's.
#[test]
fn a_present_id_only_on_spared_or_deleting_resources_does_not_lift_the_no_row_refusal() {
    let old = "2026-11-20T00:00:00Z";
    let db = rows(&[
        ("live", Row::Present { state: None }),
        ("gone", Row::Missing),
    ]);
    let c = cfg(|i| {
        i.guard_floor = 10;
        i.exclude_selector = Some("team in (payments)".into());
    });
    let gone = res("Service", Some("gone"), old);
    let live = res("Deployment", Some("live"), old);
    let label = |k: &str, v: &str| Labels::from([(k.to_owned(), v.to_owned())]);
    let mut deleting = live.clone();
    deleting.deleting = true;
    for (what, resource, labels) in [
        (
            "protected",
            live.clone(),
            label("gc.example.com/protect", "true"),
        ),
        ("excluded", live.clone(), label("team", "payments")),
        ("deleting", deleting, Labels::new()),
    ] {
        let err = plan_labelled(
            &[gone.clone(), resource],
            &[Labels::new(), labels],
            &db,
            &c,
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            err,
            SessionPlanError::NoRowFound { ids: 1, orphans: 1 },
            "{what}"
        );
        assert!(
            err.to_string().starts_with(
                "refused: none of the 1 session ids judged against the database has a row"
            ),
            "{what}: {err}"
        );
    }
    // Judged, the live id is a row: the table is the right one, and the orphan goes.
    let plan = plan_labelled(&[gone, live], &[], &db, &c, NOW).unwrap();
    assert_eq!(plan.deletes().count(), 1);
}

#[test]
fn the_guard_refuses_an_empty_database_and_the_cap_defers() {
    let old = "2026-11-20T00:00:00Z";
    let resources: Vec<_> = (0..8)
        .map(|i| res("Deployment", Some(&format!("s{i}")), old))
        .collect();
    let empty: HashMap<String, Row> = (0..8).map(|i| (format!("s{i}"), Row::Missing)).collect();
    let err = plan_sessions(&resources, &empty, &cfg(|_| {}), NOW).unwrap_err();
    assert!(
        matches!(
            err,
            SessionPlanError::MassDeletion {
                orphaned: 8,
                judged: 8,
                ..
            }
        ),
        "{err}"
    );
    let plan = plan_sessions(
        &resources,
        &empty,
        &cfg(|i| {
            i.override_guard = true;
            i.max_deletes = 3;
        }),
        NOW,
    )
    .unwrap();
    assert_eq!(plan.deletes().count(), 3);
    assert_eq!(
        decisions(&plan)
            .iter()
            .filter(|(_, d)| *d == "deferred")
            .count(),
        5
    );
}

#[test]
fn a_table_holding_none_of_the_ids_deletes_nothing_whatever_the_floor() {
    let old = "2026-11-20T00:00:00Z";
    let young = "2026-11-29T11:00:00Z";
    let running = || Row::Present {
        state: Some("running".into()),
    };
    let deleted = || Row::Present {
        state: Some("deleted".into()),
    };
    // (case, resources as (session, created), rows, floor, override, terminal states,
    //  expected: Ok(deletes) or Err(ids, orphans) of the refusal)
    type Case = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Vec<(&'static str, Row)>,
        i64,
        bool,
        bool,
        Result<usize, (usize, usize)>,
    );
    let cases: Vec<Case> = vec![
        (
            "one session's three objects, no row, default floor",
            vec![("s1", old), ("s1", old), ("s1", old)],
            vec![("s1", Row::Missing)],
            10,
            false,
            false,
            Err((1, 3)),
        ),
        (
            "three sessions, no row, a floor of 1000",
            vec![("s1", old), ("s2", old), ("s3", old)],
            vec![
                ("s1", Row::Missing),
                ("s2", Row::Missing),
                ("s3", Row::Missing),
            ],
            1000,
            false,
            false,
            Err((3, 3)),
        ),
        (
            "no row, overridden",
            vec![("s1", old), ("s1", old), ("s1", old)],
            vec![("s1", Row::Missing)],
            10,
            true,
            false,
            Ok(3),
        ),
        (
            "no row, all within the grace period: still refused",
            vec![("s1", young)],
            vec![("s1", Row::Missing)],
            10,
            false,
            false,
            Err((1, 1)),
        ),
        (
            "one live row among orphans: the table is the right one",
            vec![("live", old), ("s1", old), ("s2", old)],
            vec![
                ("live", running()),
                ("s1", Row::Missing),
                ("s2", Row::Missing),
            ],
            10,
            false,
            false,
            Ok(2),
        ),
        (
            "rows in a terminal state are rows",
            vec![("s1", old), ("s2", old)],
            vec![("s1", deleted()), ("s2", Row::Missing)],
            10,
            false,
            true,
            Ok(2),
        ),
        (
            "every session live",
            vec![("live", old)],
            vec![("live", running())],
            10,
            false,
            false,
            Ok(0),
        ),
        ("nothing scanned", vec![], vec![], 10, false, false, Ok(0)),
    ];
    for (case, resources, db, floor, override_guard, terminal, expected) in cases {
        let resources: Vec<_> = resources
            .iter()
            .enumerate()
            .map(|(i, (s, created))| {
                let mut r = res("Deployment", Some(s), created);
                r.name = format!("{s}-{i}");
                r
            })
            .collect();
        let c = cfg(|i| {
            i.guard_floor = floor;
            i.override_guard = override_guard;
            if terminal {
                i.terminal_states = vec!["deleted".into()];
            }
        });
        let got = plan_sessions(&resources, &rows(&db), &c, NOW);
        match (got, expected) {
            (Ok(plan), Ok(n)) => assert_eq!(plan.deletes().count(), n, "{case}"),
            (Err(SessionPlanError::NoRowFound { ids, orphans }), Err(want)) => {
                assert_eq!((ids, orphans), want, "{case}");
            }
            (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
        }
    }
    let err = SessionPlanError::NoRowFound { ids: 1, orphans: 3 }.to_string();
    assert!(
        err.starts_with("refused: none of the 1 session ids judged against the database has a row")
            && err.contains("wrong schema on search_path")
            && err.contains("override the guard"),
        "{err}"
    );
}

#[test]
fn a_missing_answer_fails_closed() {
    let resources = vec![res("Service", Some("s1"), "2026-11-20T00:00:00Z")];
    let err = plan_sessions(&resources, &HashMap::new(), &cfg(|_| {}), NOW).unwrap_err();
    assert_eq!(err, SessionPlanError::NoAnswer("s1".into()));
}

/// Each setting at its limits: accepted at the limit, refused (and named) past it.
#[test]
fn settings_hold_at_their_limits() {
    let kind = |edit: fn(&mut Kind)| {
        let mut k = Kind::streamspace();
        edit(&mut k[0]);
        k
    };
    // (what, the edit, `None` when accepted, else the setting named)
    type Edit = Box<dyn Fn(&mut SessionInputs)>;
    let cases: Vec<(&str, Edit, Option<&str>)> = vec![
        ("defaults", Box::new(|_| {}), None),
        (
            "bad cluster id",
            Box::new(|i| i.cluster_id = "Not A Cluster!".into()),
            Some("cluster_id"),
        ),
        (
            "two terms",
            Box::new(|i| i.selector = "app=a,tier=b".into()),
            None,
        ),
        (
            "an empty value",
            Box::new(|i| i.selector = "app=".into()),
            None,
        ),
        (
            "set-based",
            Box::new(|i| i.selector = "app in (a,b),!canary,tier notin (x)".into()),
            None,
        ),
        (
            "an unclosed list",
            Box::new(|i| i.selector = "app in (a".into()),
            Some("selector"),
        ),
        (
            "empty",
            Box::new(|i| i.selector = String::new()),
            Some("selector"),
        ),
        (
            "a bad protect label",
            Box::new(|i| i.protect_label = "keep".into()),
            Some("protect_label"),
        ),
        (
            "a bad exclude selector",
            Box::new(|i| i.exclude_selector = Some("team in ()".into())),
            Some("exclude_selector"),
        ),
        (
            "no key",
            Box::new(|i| i.selector = "=a".into()),
            Some("selector"),
        ),
        (
            "id label with =",
            Box::new(|i| i.id_label = "a=b".into()),
            Some("id_label"),
        ),
        (
            "no kind name",
            Box::new(move |i| i.kinds = kind(|k| k.kind.clear())),
            Some("kinds"),
        ),
        (
            "no version",
            Box::new(move |i| i.kinds = kind(|k| k.version.clear())),
            Some("kinds"),
        ),
        (
            "no plural",
            Box::new(move |i| i.kinds = kind(|k| k.plural.clear())),
            Some("kinds"),
        ),
        ("no grace", Box::new(|i| i.grace_hours = 0), None),
        ("a year of grace", Box::new(|i| i.grace_hours = 8760), None),
        (
            "more",
            Box::new(|i| i.grace_hours = 8761),
            Some("grace_hours"),
        ),
        ("10000 deletes", Box::new(|i| i.max_deletes = 10_000), None),
        (
            "10001",
            Box::new(|i| i.max_deletes = 10_001),
            Some("max_deletes"),
        ),
        ("ratio 1", Box::new(|i| i.guard_ratio = 1.0), None),
        (
            "ratio over 1",
            Box::new(|i| i.guard_ratio = 1.01),
            Some("guard_ratio"),
        ),
        ("floor 0", Box::new(|i| i.guard_floor = 0), None),
        (
            "floor -1",
            Box::new(|i| i.guard_floor = -1),
            Some("guard_floor"),
        ),
    ];
    for (what, edit, refused) in cases {
        let mut i = SessionInputs::default();
        edit(&mut i);
        let result = i.validate();
        assert_eq!(
            result.as_ref().err().map(InputError::input),
            refused,
            "{what}: {result:?}"
        );
        if let Ok(c) = result {
            assert_eq!(
                c.grace_hours,
                u32::try_from(i.grace_hours).unwrap(),
                "{what}"
            );
            assert_eq!(
                c.guard_floor,
                usize::try_from(i.guard_floor).unwrap(),
                "{what}"
            );
        }
    }
}

/// The guard refuses only past both its floor and its ratio, counting soft-deleted rows as
/// orphans when they are; the grace period ends exactly `grace_hours` after creation.
#[test]
fn the_guard_and_the_grace_at_their_limits() {
    let old = "2026-11-20T00:00:00Z";
    let running = Row::Present {
        state: Some("running".into()),
    };
    let deleted = Row::Present {
        state: Some("deleted".into()),
    };
    // (what, rows of the sessions s0.., floor, refused with this many orphans)
    let cases: [(&str, Vec<Row>, i64, Option<usize>); 5] = [
        (
            "orphans at the floor",
            vec![Row::Missing, Row::Missing, running.clone()],
            2,
            None,
        ),
        (
            "one past the floor",
            vec![Row::Missing, Row::Missing, Row::Missing, running.clone()],
            2,
            Some(3),
        ),
        (
            "share at the ratio",
            vec![Row::Missing, Row::Missing, running.clone(), running.clone()],
            1,
            None,
        ),
        (
            "soft-deleted count",
            vec![
                deleted.clone(),
                deleted.clone(),
                deleted.clone(),
                running.clone(),
            ],
            2,
            Some(3),
        ),
        (
            "soft-deleted at the floor",
            vec![deleted.clone(), deleted, running.clone()],
            2,
            None,
        ),
    ];
    for (what, db, floor, refused) in cases {
        let resources: Vec<_> = (0..db.len())
            .map(|i| res("Deployment", Some(&format!("s{i}")), old))
            .collect();
        let db: HashMap<String, Row> = db
            .into_iter()
            .enumerate()
            .map(|(i, r)| (format!("s{i}"), r))
            .collect();
        let c = cfg(|i| {
            i.guard_floor = floor;
            i.terminal_states = vec!["deleted".into()];
        });
        let result = plan_sessions(&resources, &db, &c, NOW);
        match refused {
            None => assert!(result.is_ok(), "{what}: {result:?}"),
            Some(n) => assert!(
                matches!(result, Err(SessionPlanError::MassDeletion { orphaned, .. }) if orphaned == n),
                "{what}: {result:?}"
            ),
        }
    }
    // Grace: 24 hours from creation, to the second.
    let live = || ("live".to_owned(), running.clone());
    for (created, decision, until) in [
        ("2026-11-28T12:00:00Z", "delete", None),
        ("2026-11-28T12:00:01Z", "held", Some(NOW + 1.0)),
        ("2026-11-29T12:00:00Z", "held", Some(NOW + 86_400.0)),
    ] {
        let resources = vec![
            res("Service", Some("gone"), created),
            res("Service", Some("live"), old),
        ];
        let db: HashMap<String, Row> = [("gone".to_owned(), Row::Missing), live()]
            .into_iter()
            .collect();
        let plan = plan_sessions(&resources, &db, &cfg(|_| {}), NOW).unwrap();
        assert_eq!(decisions(&plan)[0].1, decision, "{created}");
        let held = match &plan.judged[0].decision {
            SessionDecision::Held { until, .. } => Some(*until),
            _ => None,
        };
        assert_eq!(held, until, "{created}");
    }
}

#[test]
fn bad_settings_are_named() {
    let check = |edit: fn(&mut SessionInputs), input: &str| {
        let mut i = SessionInputs::default();
        edit(&mut i);
        assert_eq!(i.validate().unwrap_err().input(), input);
    };
    check(|i| i.namespace = "kube-system".into(), "namespace");
    check(|i| i.selector = "app in a".into(), "selector");
    check(
        |i| i.exclude_selector = Some(",".into()),
        "exclude_selector",
    );
    check(|i| i.protect_label = "=x".into(), "protect_label");
    // A run finds a resource's kind by its Kind name: an embedder's inputs are checked too.
    check(
        |i| i.kinds = [Kind::streamspace(), Kind::streamspace()].concat(),
        "kinds",
    );
    check(
        |i| i.terminal_states = vec![String::new()],
        "terminal_states",
    );
    check(|i| i.id_label = String::new(), "id_label");
    check(|i| i.grace_hours = -1, "grace_hours");
    check(|i| i.max_deletes = 0, "max_deletes");
    check(|i| i.guard_ratio = 0.0, "guard_ratio");
    check(|i| i.kinds.clear(), "kinds");
}

/// A requested collection deletes only the sessions asked for, with the requests' grace; every
/// other orphan is `unrequested` (never `skipped`, which says it was not judged) and does not use
/// the cap; the guard still weighs
/// the whole namespace, so a request cannot pass a guard a scheduled run would trip.
#[test]
fn a_request_only_narrows() {
    use crate::sessions::requests::{Narrowed, Requested};
    let old = "2026-11-29T11:50:00Z"; // ten minutes old: held by a 24 h grace
    let just_now = "2026-11-29T11:59:59Z";
    let resources = vec![
        res("Deployment", Some("a"), old),
        res("Service", Some("a"), just_now),
        res("Deployment", Some("b"), old),
        res("Deployment", Some("live"), old),
    ];
    let db = rows(&[
        ("a", Row::Missing),
        (
            "b",
            Row::Present {
                state: Some("deleted".into()),
            },
        ),
        (
            "live",
            Row::Present {
                state: Some("running".into()),
            },
        ),
    ]);
    let asking = |sessions: Requested, edit: fn(&mut SessionInputs)| {
        let mut c = cfg(|i| {
            i.terminal_states = vec!["deleted".into()];
            i.guard_floor = 10;
            edit(i);
        });
        c.request = Some(Narrowed {
            sessions,
            grace_seconds: 300,
            requested_by: ["system:serviceaccount:streamspace:api".to_owned()].into(),
        });
        c
    };
    let only_a = || Requested::Ids(["a".to_owned()].into());
    // Scheduled: everything within the day's grace.
    let scheduled = cfg(|i| {
        i.terminal_states = vec!["deleted".into()];
        i.guard_floor = 10;
    });
    let plan = plan_sessions(&resources, &db, &scheduled, NOW).unwrap();
    let names: Vec<_> = decisions(&plan).into_iter().map(|(_, d)| d).collect();
    assert_eq!(names, ["held", "held", "held", "kept"]);
    // Requested: a's old Deployment goes, its second-old Service is held, b is not requested.
    let plan = plan_sessions(&resources, &db, &asking(only_a(), |_| ()), NOW).unwrap();
    assert_eq!(
        decisions(&plan),
        [
            ("a-Deployment".into(), "delete"),
            ("a-Service".into(), "held"),
            ("b-Deployment".into(), "unrequested"),
            ("live-Deployment".into(), "kept"),
        ]
    );
    let SessionDecision::Unrequested { reason } = &plan.judged[2].decision else {
        unreachable!()
    };
    assert_eq!(
        reason,
        "session b is deleted; not requested: left for a scheduled run"
    );
    let SessionDecision::Held { until, .. } = &plan.judged[1].decision else {
        unreachable!()
    };
    assert_eq!(*until, NOW - 1.0 + 300.0);
    // All requested: the namespace's grace, as a scheduled run (the requests' shorter grace is
    // for the ids a caller names).
    let plan = plan_sessions(&resources, &db, &asking(Requested::All, |_| ()), NOW).unwrap();
    let names: Vec<_> = decisions(&plan).into_iter().map(|(_, d)| d).collect();
    assert_eq!(names, ["held", "held", "held", "kept"]);
    // Both named: b too; the cap is the operator's, spent on requested orphans only.
    let both = Requested::Ids(["a".to_owned(), "b".to_owned()].into());
    let plan = plan_sessions(&resources, &db, &asking(both, |_| ()), NOW).unwrap();
    let names: Vec<_> = decisions(&plan).into_iter().map(|(_, d)| d).collect();
    assert_eq!(names, ["delete", "held", "delete", "kept"]);
    let capped = asking(Requested::Ids(["b".to_owned()].into()), |i| {
        i.max_deletes = 1
    });
    let plan = plan_sessions(&resources, &db, &capped, NOW).unwrap();
    let names: Vec<_> = decisions(&plan).into_iter().map(|(_, d)| d).collect();
    assert_eq!(names, ["unrequested", "unrequested", "delete", "kept"]);
    // The guard weighs the namespace: two of three sessions gone trips a ratio of 0.5 with a
    // floor of 1, however few the request names.
    let guarded = asking(only_a(), |i| {
        i.guard_floor = 1;
        i.guard_ratio = 0.5;
    });
    assert!(matches!(
        plan_sessions(&resources, &db, &guarded, NOW),
        Err(SessionPlanError::MassDeletion {
            orphaned: 2,
            judged: 3,
            ..
        })
    ));
}

/// A session a caller asked for whose row is not terminal is kept, and the reason says the state
/// found and the states that would count as gone; a scheduled run keeps its short reason.
#[test]
fn a_requested_live_session_says_its_state_and_the_states_that_count() {
    use crate::sessions::requests::{Narrowed, Requested};
    let old = "2026-11-27T12:00:00Z";
    let resources = vec![
        res("Deployment", Some("live"), old),
        res("Deployment", Some("other"), old),
        res("Deployment", Some("stateless"), old),
    ];
    let running = || Row::Present {
        state: Some("running".into()),
    };
    let db = rows(&[
        ("live", running()),
        ("other", running()),
        ("stateless", Row::Present { state: None }),
    ]);
    let reasons = |terminal: Vec<String>, request: bool| {
        let mut c = cfg(|i| i.terminal_states = terminal);
        if request {
            c.request = Some(Narrowed {
                sessions: Requested::Ids(["live".to_owned(), "stateless".to_owned()].into()),
                grace_seconds: 0,
                requested_by: ["caller".to_owned()].into(),
            });
        }
        let plan = plan_sessions(&resources, &db, &c, NOW).unwrap();
        plan.judged
            .iter()
            .map(|j| gc_reason(&j.decision))
            .collect::<Vec<_>>()
    };
    let states = || vec!["terminated".to_owned(), "failed".to_owned()];
    assert_eq!(
        reasons(states(), true),
        [
            "session live is running, not gone: kept; the states that count as gone are \
             terminated, failed (or no row)",
            "session other exists (running)",
            "session stateless has a row with no state, not gone: kept; the states that count \
             as gone are terminated, failed (or no row)",
        ]
    );
    assert_eq!(
        reasons(Vec::new(), true)[0],
        "session live is running, not gone: kept; only a missing row counts as gone"
    );
    assert_eq!(
        reasons(states(), false),
        [
            "session live exists (running)",
            "session other exists (running)",
            "session stateless exists (no state)",
        ]
    );
}

fn gc_reason(d: &SessionDecision) -> String {
    assert_eq!(d.name(), "kept", "{d:?}");
    d.reason().to_owned()
}

/// With live states set, a row in any other state that is not terminal is kept and counted by
/// state (distinct ids, once each however many resources carry them); without live states,
/// nothing is counted.
#[test]
fn states_neither_live_nor_terminal_are_kept_and_counted() {
    let old = "2026-11-27T12:00:00Z";
    let resources = vec![
        res("Deployment", Some("a"), old),
        res("Service", Some("a"), old),
        res("Deployment", Some("b"), old),
        res("Deployment", Some("c"), old),
        res("Deployment", Some("d"), old),
        res("Deployment", Some("e"), old),
    ];
    let state = |s: &str| Row::Present {
        state: Some(s.into()),
    };
    let db = rows(&[
        ("a", state("archived")),
        ("b", state("archived")),
        ("c", state("paused")),
        ("d", state("running")),
        ("e", state("terminated")),
    ]);
    let known = cfg(|i| {
        i.terminal_states = vec!["terminated".into()];
        i.live_states = vec!["running".into()];
        i.guard_ratio = 1.0;
    });
    let plan = plan_sessions(&resources, &db, &known, NOW).unwrap();
    assert_eq!(
        plan.unknown_states,
        BTreeMap::from([("archived".to_owned(), 2), ("paused".to_owned(), 1)])
    );
    let names: Vec<_> = decisions(&plan).into_iter().map(|(_, d)| d).collect();
    assert_eq!(names, ["kept", "kept", "kept", "kept", "kept", "delete"]);
    assert_eq!(
        gc_reason(&plan.judged[3].decision),
        "session c is paused, a state neither live (running) nor gone: kept; the states that \
         count as gone are terminated (or no row)"
    );
    assert_eq!(
        gc_reason(&plan.judged[4].decision),
        "session d exists (running)"
    );
    let unset = cfg(|i| {
        i.terminal_states = vec!["terminated".into()];
        i.guard_ratio = 1.0;
    });
    let plan = plan_sessions(&resources, &db, &unset, NOW).unwrap();
    assert!(plan.unknown_states.is_empty());
}

#[test]
fn a_state_is_live_or_terminal_not_both() {
    let mut i = SessionInputs {
        terminal_states: vec!["failed".into()],
        live_states: vec!["running".into(), "failed".into()],
        ..Default::default()
    };
    let Err(InputError::Invalid { input, value, .. }) = i.validate() else {
        panic!("accepted")
    };
    assert_eq!((input, value.as_str()), ("live_states", "failed"));
    i.live_states = vec![String::new()];
    let Err(InputError::Invalid { input, .. }) = i.validate() else {
        panic!("accepted")
    };
    assert_eq!(input, "live_states");
}

/// A claim is a session's only when its name is the session's (`ID`, `ID-...`): any other claim
/// labelled with a session id, as a per-user home claim whose labels someone copied, is protected
/// (never judged, counted on neither side of the guard); other kinds are judged by their label.
#[test]
fn a_claim_not_named_after_its_session_is_never_collected() {
    let old = "2026-11-27T12:00:00Z";
    let named = |kind: &str, name: &str| {
        let mut r = res(kind, Some("alice"), old);
        r.name = name.into();
        r
    };
    let resources = vec![
        named("PersistentVolumeClaim", "alice-home"),
        named("PersistentVolumeClaim", "alice"),
        named("PersistentVolumeClaim", "home-alice"),
        named("PersistentVolumeClaim", "alicex-home"),
        named("PersistentVolumeClaim", "alic"),
        named("Deployment", "ss-alice-firefox"),
    ];
    let db = rows(&[("alice", Row::Missing), ("bob", state_row("running"))]);
    let mut all = resources.clone();
    all.push(res("Deployment", Some("bob"), old));
    let plan = plan_sessions(&all, &db, &cfg(|i| i.guard_ratio = 1.0), NOW).unwrap();
    assert_eq!(
        decisions(&plan),
        [
            ("alice-home".into(), "delete"),
            ("alice".into(), "delete"),
            ("home-alice".into(), "protected"),
            ("alicex-home".into(), "protected"),
            ("alic".into(), "protected"),
            ("ss-alice-firefox".into(), "delete"),
            ("bob-Deployment".into(), "kept"),
        ]
    );
    assert_eq!(plan.spared, 3);
    assert!(
        plan.judged[2].decision.reason().contains("never collected"),
        "{:?}",
        plan.judged[2]
    );
}

fn state_row(state: &str) -> Row {
    Row::Present {
        state: Some(state.into()),
    }
}

/// The OpenAPI schema of a decision (feature `openapi`) describes what its `Serialize` writes:
/// each decision's JSON is one of the schema's forms, the one its `decision` names, with only
/// that form's fields and all of its required ones; and no form is never written.
#[cfg(feature = "openapi")]
#[test]
fn the_schema_of_a_decision_is_its_json() {
    use serde_json::json;
    use utoipa::PartialSchema;
    let schema = serde_json::to_value(SessionDecision::schema()).unwrap();
    let forms = schema["oneOf"].as_array().expect("one form a decision");
    let reason = || "why".to_owned();
    let decisions = [
        SessionDecision::Kept { reason: reason() },
        SessionDecision::Held {
            reason: reason(),
            until: NOW,
        },
        SessionDecision::Held {
            reason: reason(),
            until: f64::NAN,
        },
        SessionDecision::Delete { reason: reason() },
        SessionDecision::Deferred { reason: reason() },
        SessionDecision::Unrequested { reason: reason() },
        SessionDecision::Skipped {
            reason: reason(),
            spared: None,
        },
        SessionDecision::Skipped {
            reason: reason(),
            spared: Some(Spared::Protected),
        },
        SessionDecision::Skipped {
            reason: reason(),
            spared: Some(Spared::Excluded),
        },
    ];
    let mut written = BTreeSet::new();
    for decision in decisions {
        let text = serde_json::to_value(&decision).unwrap();
        let name = text["decision"].as_str().unwrap();
        let form = (forms.iter())
            .find(|f| f["properties"]["decision"]["enum"] == json!([name]))
            .unwrap_or_else(|| panic!("no form for {text}: {schema}"));
        for field in text.as_object().unwrap().keys() {
            assert!(form["properties"].get(field).is_some(), "{field} of {text}");
        }
        for field in form["required"].as_array().unwrap() {
            assert!(
                text.get(field.as_str().unwrap()).is_some(),
                "{field} of {text}"
            );
        }
        written.insert(name.to_owned());
    }
    assert_eq!(written.len(), forms.len(), "{schema}");
}
