//! The prune rule as a table: which receipts go, which are kept and why, at a given instant.

use gc_core::ports::{Receipt, RetainedVolume, SessionObject};

use super::*;

const DAY: f64 = 86_400.0;
/// 2026-12-01T00:00:00Z.
const NOW: f64 = 1_795_996_800.0;

fn at(days_ago: f64) -> String {
    format_timestamp(NOW - days_ago * DAY)
}

fn pod(uid: &str, days_ago: f64) -> ListedReceipt {
    ListedReceipt {
        receipt: Receipt {
            cluster_id: "primary".into(),
            namespace: "batch".into(),
            uid: uid.into(),
            name: format!("pod-{uid}"),
            uri: format!("file:///a/primary/batch/{uid}.json"),
            sha256: "0".repeat(64),
            bytes: 10,
            session: None,
        },
        archived_at: at(days_ago),
    }
}

/// A session resource's receipt: `kind` of session `id` in `namespace`, run `days_ago`.
fn manifest(namespace: &str, id: Option<&str>, kind: &str, days_ago: f64) -> ListedReceipt {
    let uid = format!("{namespace}-{}-{kind}", id.unwrap_or("none"));
    ListedReceipt {
        receipt: Receipt {
            cluster_id: "primary".into(),
            namespace: namespace.into(),
            uid: uid.clone(),
            name: id.unwrap_or("unlabelled").into(),
            uri: format!("file:///a/primary/{namespace}/{uid}.json"),
            sha256: "0".repeat(64),
            bytes: 10,
            session: Some(SessionObject {
                api_version: "v1".into(),
                kind: kind.into(),
                session: id.map(Into::into),
                run_at: at(days_ago),
                retained: None,
            }),
        },
        archived_at: at(days_ago),
    }
}

/// A claim's receipt naming the kept volume `pv`.
fn claim(namespace: &str, id: &str, days_ago: f64, pv: &str) -> ListedReceipt {
    let mut l = manifest(namespace, Some(id), "PersistentVolumeClaim", days_ago);
    if let Some(s) = l.receipt.session.as_mut() {
        s.retained = Some(RetainedVolume {
            name: pv.into(),
            policy: "Delete".into(),
        });
    }
    l
}

fn policy(older_than_days: u64, retain_volume_days: u32) -> Policy {
    Policy {
        older_than: Duration::from_secs(older_than_days * 86_400),
        retain_volume_days,
        dry_run: false,
    }
}

fn uids(receipts: &[ListedReceipt]) -> Vec<&str> {
    receipts.iter().map(|l| l.receipt.uid.as_str()).collect()
}

fn kept(decided: &Decided) -> Vec<(&str, &str)> {
    decided
        .kept
        .iter()
        .map(|(l, why)| (l.receipt.uid.as_str(), why.as_str()))
        .collect()
}

fn everywhere(_: &str) -> bool {
    true
}

#[test]
fn a_pods_receipt_goes_on_its_own_once_older_than_the_window() {
    let listed = vec![pod("new", 10.0), pod("old", 100.0), pod("older", 200.0)];
    let decided = decide(listed, NOW, &policy(90, 7), everywhere);
    assert_eq!(uids(&decided.go), ["older", "old"], "oldest first");
    assert!(decided.kept.is_empty());
    assert_eq!(decided.newer, 1);
}

#[test]
fn a_sessions_receipts_go_only_together_once_the_newest_is_older() {
    // One session archived over two runs, its newest inside the window.
    let listed = vec![
        manifest("ns", Some("s1"), "Service", 10.0),
        manifest("ns", Some("s1"), "Deployment", 100.0),
    ];
    let decided = decide(listed.clone(), NOW, &policy(90, 7), everywhere);
    assert!(decided.go.is_empty());
    assert_eq!(decided.newer, 1);
    let [(uid, why)] = kept(&decided)[..] else {
        panic!("{decided:?}");
    };
    assert_eq!(uid, "ns-s1-Deployment");
    assert!(
        why.contains("its session s1 has a receipt of") && why.contains(&at(10.0)),
        "{why}"
    );
    // Both older than a narrower window: both go, together.
    let decided = decide(listed, NOW, &policy(5, 7), everywhere);
    assert_eq!(uids(&decided.go), ["ns-s1-Service", "ns-s1-Deployment"]);
    assert_eq!((decided.kept.len(), decided.newer), (0, 0));
}

#[test]
fn a_session_is_one_id_in_one_namespace_and_an_unlabelled_manifest_goes_alone() {
    let listed = vec![
        manifest("a", Some("s1"), "Service", 10.0),
        manifest("b", Some("s1"), "Service", 100.0),
        manifest("a", None, "Service", 100.0),
    ];
    let decided = decide(listed, NOW, &policy(90, 7), everywhere);
    assert_eq!(uids(&decided.go), ["b-s1-Service", "a-none-Service"]);
    assert_eq!(decided.newer, 1);
}

#[test]
fn a_kept_volume_holds_its_whole_session_until_its_window_ends() {
    let session = || {
        vec![
            manifest("ns", Some("s1"), "Deployment", 100.0),
            claim("ns", "s1", 100.0, "pv-1"),
        ]
    };
    // Older than --older-than, inside a 120-day volume window: everything kept, and said why.
    let decided = decide(session(), NOW, &policy(90, 120), everywhere);
    assert!(decided.go.is_empty());
    let kept = kept(&decided);
    assert_eq!(kept.len(), 2);
    let claim_why = kept[1].1;
    assert!(
        claim_why.contains("kept volume pv-1")
            && claim_why.contains(&at(-20.0))
            && claim_why.contains("`volume_retention` 120d"),
        "{claim_why}"
    );
    assert!(
        kept[0]
            .1
            .starts_with("kept with its session s1: PersistentVolumeClaim s1: it names"),
        "{}",
        kept[0].1
    );
    // The collector's default window (7 days) is long over: both go.
    let decided = decide(session(), NOW, &policy(90, 7), everywhere);
    assert_eq!(decided.go.len(), 2);
    // 0: no volume window at all.
    let decided = decide(session(), NOW, &policy(90, 0), everywhere);
    assert_eq!(decided.go.len(), 2);
    // Whatever --older-than says: one day old, a one-hour window, the volume's 7 days hold it.
    let young = vec![claim("ns", "s2", 1.0, "pv-2")];
    let mut hour = policy(0, 7);
    hour.older_than = Duration::from_secs(3600);
    let decided = decide(young.clone(), NOW, &hour, everywhere);
    assert_eq!((decided.go.len(), decided.kept.len()), (0, 1));
    hour.retain_volume_days = 0;
    assert_eq!(decide(young, NOW, &hour, everywhere).go.len(), 1);
}

#[test]
fn an_archive_in_another_sink_or_an_unreadable_time_keeps_its_session() {
    let listed = vec![
        manifest("ns", Some("s1"), "Deployment", 100.0),
        manifest("ns", Some("s1"), "Service", 100.0),
        pod("p", 100.0),
    ];
    let not_services = |uri: &str| !uri.contains("Service");
    let decided = decide(listed, NOW, &policy(90, 7), not_services);
    assert_eq!(uids(&decided.go), ["p"]);
    let kept = kept(&decided);
    assert_eq!(kept.len(), 2);
    assert!(kept[1].1.contains("not in the sink given"), "{kept:?}");
    assert!(
        kept[0]
            .1
            .starts_with("kept with its session s1: Service s1")
    );

    let mut bad = pod("bad", 100.0);
    bad.archived_at = "yesterday".into();
    let decided = decide(vec![bad], NOW, &policy(90, 7), everywhere);
    assert!(decided.go.is_empty());
    assert!(kept_reason(&decided).contains("archivedAt \"yesterday\" does not read"));
}

fn kept_reason(decided: &Decided) -> &str {
    decided.kept[0].1.as_str()
}

#[test]
fn a_receipts_time_is_the_later_of_written_and_its_runs_instant() {
    // Written long ago by the store's clock, for a run `--now` said was yesterday.
    let mut l = manifest("ns", Some("s1"), "Service", 1.0);
    l.archived_at = at(100.0);
    let decided = decide(vec![l.clone()], NOW, &policy(90, 7), everywhere);
    assert_eq!((decided.go.len(), decided.newer), (0, 1));
    // And the other way round.
    l.archived_at = at(1.0);
    if let Some(s) = l.receipt.session.as_mut() {
        s.run_at = at(100.0);
    }
    let decided = decide(vec![l], NOW, &policy(90, 7), everywhere);
    assert_eq!((decided.go.len(), decided.newer), (0, 1));
}

#[test]
fn windows_need_a_unit_and_a_value_above_zero() {
    for (text, secs) in [
        ("30d", 30 * 86_400),
        ("12h", 12 * 3_600),
        ("90m", 90 * 60),
        ("3600s", 3_600),
        ("1h 30m", 5_400),
        (" 2weeks ", 14 * 86_400),
        ("1.5d", 36 * 3_600),
    ] {
        assert_eq!(parse_window(text), Ok(Duration::from_secs(secs)), "{text}");
    }
    for (text, says) in [
        ("30", "30 has no unit: say 30d (days), 30h, 30m or 30s"),
        ("0", "give a window above zero, e.g. 90d"),
        ("0s", "0s is zero"),
        ("-5d", "-5d is negative"),
        ("abc", "e.g. 90d, 12h, 90m or 3600s"),
        ("", "e.g. 90d"),
        ("5 apples", "e.g. 90d"),
    ] {
        let err = parse_window(text).unwrap_err();
        assert!(err.contains(says), "{text}: {err}");
    }
    assert_eq!(shown(Duration::from_secs(90 * 86_400)), "90d");
    assert_eq!(shown(Duration::from_secs(36 * 3_600)), "36h");
    assert_eq!(shown(Duration::from_secs(90 * 60)), "90m");
    assert_eq!(shown(Duration::from_secs(61)), "61s");
}
