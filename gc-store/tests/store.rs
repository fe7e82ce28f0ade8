//! The store's contract, checked by the same code against SQLite (a temporary folder) and the
//! real PostgreSQL (a fresh database per test, from `gc-testbed`).

use std::time::{Duration, Instant};

use gc_core::pods::ledger::Observation;
use gc_core::ports::{Receipt, RetainedVolume, SessionObject, Store as _, StoreError};
use gc_core::{Ledger, PreviousLedger, PyNum};
use gc_store::{ReceiptQuery, Store};
use gc_testbed::TestDatabase;
use serde_json::{Value, json};

mod common;

use common::Raw;

/// One backend under test: the open store and a way to reach its tables behind its back.
struct Backend {
    store: Store,
    raw: Raw,
    /// Keeps the SQLite folder alive.
    _dir: Option<tempfile::TempDir>,
}

/// Runs `test` against SQLite, then against PostgreSQL when the test database is configured
/// (`scripts/test.sh` configures it; CI must).
async fn on_each_backend(name: &str, test: impl AsyncFn(&Backend)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.sqlite3");
    let sqlite = Backend {
        store: gc_store::open(path.to_str().unwrap()).await.unwrap(),
        raw: Raw::Sqlite(path),
        _dir: Some(dir),
    };
    eprintln!("{name}: {}", sqlite.store.location());
    test(&sqlite).await;
    sqlite.store.close().await;

    if let Some(db) = TestDatabase::fresh(name).await.unwrap() {
        let postgres = Backend {
            store: gc_store::open(db.url()).await.unwrap(),
            raw: Raw::Postgres(db),
            _dir: None,
        };
        eprintln!("{name}: {}", postgres.store.location());
        test(&postgres).await;
        postgres.store.close().await;
    }
}

fn ledger(entries: &[(&str, PyNum, &str)]) -> Ledger {
    let mut ledger = Ledger::default();
    for (uid, first, name) in entries {
        ledger.insert(
            (*uid).to_owned(),
            Observation {
                first: *first,
                name: Value::from(*name),
            },
        );
    }
    ledger
}

fn receipt(uid: &str, uri: &str, bytes: u64) -> Receipt {
    Receipt {
        cluster_id: "primary".into(),
        namespace: "jobs".into(),
        uid: uid.into(),
        name: format!("pod-{uid}"),
        uri: uri.into(),
        sha256: "ab".repeat(32),
        bytes,
        session: None,
    }
}

#[tokio::test]
async fn a_ledger_comes_back_as_saved() {
    on_each_backend("ledger_round_trip", async |b| {
        let saved = ledger(&[
            ("uid-int", PyNum::Int(1_795_000_000), "pod-a"),
            ("uid-float", PyNum::Float(1_795_900_000.25), "pöd-\"b\""),
        ]);
        b.store.save_ledger("primary", "jobs", &saved).await.unwrap();

        // Stored as the flow's text, led by the entry that names its cluster and namespace.
        let text = b.store.ledger_json("primary", "jobs").await.unwrap();
        let scoped = saved.to_scoped_json("primary", "jobs");
        assert_eq!(text.as_deref(), Some(scoped.as_str()));
        assert_eq!(
            text.unwrap(),
            r#"{"gc:scope": {"cluster": "primary", "namespace": "jobs"}, "uid-int": {"first": 1795000000, "name": "pod-a"}, "uid-float": {"first": 1795900000.25, "name": "p\u00f6d-\"b\""}}"#
        );

        let loaded = b.store.load_ledger("primary", "jobs").await.unwrap();
        assert_eq!(loaded, PreviousLedger::from(&saved));
        assert!(loaded.0["uid-int"]["first"].is_i64(), "an int stays an int");
        assert!(loaded.0["uid-float"]["first"].is_f64(), "a float stays a float");
        assert_eq!(loaded.0["uid-float"]["first"], json!(1_795_900_000.25));
    })
    .await;
}

#[tokio::test]
async fn a_ledger_never_saved_is_empty() {
    on_each_backend("ledger_never_saved", async |b| {
        let loaded = b.store.load_ledger("primary", "jobs").await.unwrap();
        assert_eq!(loaded, PreviousLedger::default());
        assert_eq!(b.store.ledger_json("primary", "jobs").await.unwrap(), None);
    })
    .await;
}

#[tokio::test]
async fn a_second_save_replaces_the_ledger() {
    on_each_backend("ledger_replace", async |b| {
        let first = ledger(&[("a", PyNum::Int(1), "pa"), ("b", PyNum::Int(2), "pb")]);
        let second = ledger(&[("c", PyNum::Float(3.5), "pc")]);
        b.store
            .save_ledger("primary", "jobs", &first)
            .await
            .unwrap();
        b.store
            .save_ledger("primary", "jobs", &second)
            .await
            .unwrap();
        let loaded = b.store.load_ledger("primary", "jobs").await.unwrap();
        assert_eq!(loaded, PreviousLedger::from(&second));

        b.store
            .save_ledger("primary", "jobs", &Ledger::default())
            .await
            .unwrap();
        let text = b.store.ledger_json("primary", "jobs").await.unwrap();
        assert_eq!(
            text.as_deref(),
            Some(r#"{"gc:scope": {"cluster": "primary", "namespace": "jobs"}}"#)
        );
        let loaded = b.store.load_ledger("primary", "jobs").await.unwrap();
        assert!(loaded.0.is_empty(), "{loaded:?}");
    })
    .await;
}

#[tokio::test]
async fn each_cluster_and_namespace_has_its_own_ledger() {
    on_each_backend("ledger_separate", async |b| {
        let keys = [("c1", "ns1"), ("c1", "ns2"), ("c2", "ns1")];
        for (i, (cluster, namespace)) in keys.iter().enumerate() {
            let l = ledger(&[(
                namespace,
                PyNum::Int(i64::try_from(i).unwrap() + 1),
                cluster,
            )]);
            b.store.save_ledger(cluster, namespace, &l).await.unwrap();
        }
        for (i, (cluster, namespace)) in keys.iter().enumerate() {
            let l = ledger(&[(
                namespace,
                PyNum::Int(i64::try_from(i).unwrap() + 1),
                cluster,
            )]);
            let loaded = b.store.load_ledger(cluster, namespace).await.unwrap();
            assert_eq!(loaded, PreviousLedger::from(&l), "{cluster}/{namespace}");
        }
        let other = b.store.load_ledger("c2", "ns2").await.unwrap();
        assert_eq!(other, PreviousLedger::default());
    })
    .await;
}

#[tokio::test]
async fn ledger_text_is_stored_byte_for_byte() {
    on_each_backend("ledger_text", async |b| {
        let text = "{\n  \"u\": {\"first\": 1.0e9, \"name\": \"p\"}\n}\n";
        b.store.save_ledger_json("c", "ns", text).await.unwrap();
        let back = b.store.ledger_json("c", "ns").await.unwrap();
        assert_eq!(back.as_deref(), Some(text));
        let loaded = b.store.load_ledger("c", "ns").await.unwrap();
        assert!(loaded.0["u"]["first"].is_f64());
        // A ledger naming another cluster or namespace, stored as it is, is refused on load.
        let other = r#"{"gc:scope": {"cluster": "c", "namespace": "other"}, "u": {"first": 1}}"#;
        b.store.save_ledger_json("c", "ns", other).await.unwrap();
        let err = b.store.load_ledger("c", "ns").await.unwrap_err();
        assert!(matches!(err, StoreError::Malformed(_)), "{err}");
        assert!(
            err.to_string().contains("not of cluster c namespace ns"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_ledger_that_is_not_an_object_is_refused_and_nothing_is_stored() {
    on_each_backend("ledger_refused", async |b| {
        b.store.save_ledger_json("c", "ns", "{}").await.unwrap();
        for bad in ["[]", "not json", "", "{\"a\": 1"] {
            let err = b.store.save_ledger_json("c", "ns", bad).await.unwrap_err();
            assert!(matches!(err, StoreError::Malformed(_)), "{bad:?}: {err}");
        }
        let back = b.store.ledger_json("c", "ns").await.unwrap();
        assert_eq!(back.as_deref(), Some("{}"));
    })
    .await;
}

#[tokio::test]
async fn an_unreadable_stored_ledger_is_malformed_never_empty() {
    on_each_backend("ledger_malformed", async |b| {
        for (namespace, bad) in [("ns1", "not json"), ("ns2", "[1, 2]"), ("ns3", "")] {
            b.raw.execute(&format!(
                "INSERT INTO gc_ledgers (cluster_id, namespace, ledger) VALUES ('c', '{namespace}', '{bad}')"
            ))
            .await;
            let err = b.store.load_ledger("c", namespace).await.unwrap_err();
            let StoreError::Malformed(message) = &err else {
                panic!("{namespace}: expected Malformed, got {err:?}");
            };
            assert!(message.contains(namespace), "{message}");
            // The damaged text can still be looked at.
            let text = b.store.ledger_json("c", namespace).await.unwrap();
            assert_eq!(text.as_deref(), Some(bad));
        }
    })
    .await;
}

#[tokio::test]
async fn receipts_are_put_got_and_replaced() {
    on_each_backend("receipts", async |b| {
        assert_eq!(b.store.get_receipt("primary", "u1").await.unwrap(), None);
        let r1 = receipt("u1", "file:///archive/u1.json", 5_000_000_000);
        let r2 = receipt("u2", "file:///archive/u2.json", 0);
        b.store.put_receipt(&r1).await.unwrap();
        b.store.put_receipt(&r2).await.unwrap();
        assert_eq!(
            b.store.get_receipt("primary", "u1").await.unwrap(),
            Some(r1)
        );
        assert_eq!(
            b.store.get_receipt("primary", "u2").await.unwrap(),
            Some(r2.clone())
        );
        // Another cluster's Pod with the same uid is another receipt.
        assert_eq!(b.store.get_receipt("other", "u1").await.unwrap(), None);

        let replaced = Receipt {
            uri: "s3://bucket/u1.json".into(),
            sha256: "cd".repeat(32),
            bytes: 42,
            ..receipt("u1", "", 0)
        };
        b.store.put_receipt(&replaced).await.unwrap();
        assert_eq!(
            b.store.get_receipt("primary", "u1").await.unwrap(),
            Some(replaced)
        );
        assert_eq!(
            b.store.get_receipt("primary", "u2").await.unwrap(),
            Some(r2)
        );

        let too_large = receipt("u3", "x", u64::MAX);
        let err = b.store.put_receipt(&too_large).await.unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{err}");
        assert_eq!(b.store.get_receipt("primary", "u3").await.unwrap(), None);
    })
    .await;
}

/// Receipts put at once (a run's objects in flight) are committed together: each is answered
/// once it is stored, a receipt refused for its own fault fails no other, and every one is read
/// back.
#[tokio::test]
async fn receipts_put_at_once_are_each_stored_and_answered() {
    on_each_backend("receipts_at_once", async |b| {
        let puts: Vec<_> = (0..40_u64)
            .map(|i| {
                let store = b.store.clone();
                let bytes = if i == 17 { u64::MAX } else { i };
                let r = receipt(&format!("u{i}"), &format!("file:///a/u{i}.json"), bytes);
                tokio::spawn(async move { (r.clone(), store.put_receipt(&r).await) })
            })
            .collect();
        for put in puts {
            let (r, answer) = put.await.unwrap();
            let stored = b.store.get_receipt("primary", &r.uid).await.unwrap();
            if r.uid == "u17" {
                assert!(matches!(answer, Err(StoreError::Other(_))), "{answer:?}");
                assert_eq!(stored, None);
            } else {
                answer.unwrap();
                assert_eq!(stored, Some(r));
            }
        }
    })
    .await;
}

/// `archives prune` removes a receipt as it listed it: never one written again since (another
/// archive, or the same one at a later instant), and a second removal finds nothing.
#[tokio::test]
async fn a_receipt_is_removed_only_as_it_was_listed() {
    on_each_backend("receipt_removal", async |b| {
        let listed = async || {
            b.store
                .list_receipts("primary", ReceiptQuery::default())
                .await
                .unwrap()
        };
        for uid in ["u1", "u2", "u3", "u4"] {
            let uri = format!("file:///archive/{uid}.json");
            b.store.put_receipt(&receipt(uid, &uri, 1)).await.unwrap();
        }
        let before = listed().await;
        let of = |uid: &str| {
            before
                .iter()
                .find(|l| l.receipt.uid == uid)
                .unwrap()
                .clone()
        };
        assert!(b.store.delete_receipt(&of("u1")).await.unwrap());
        assert_eq!(b.store.get_receipt("primary", "u1").await.unwrap(), None);
        assert!(!b.store.delete_receipt(&of("u1")).await.unwrap(), "gone");

        // Written again since it was listed: kept, whatever archive it names now.
        let moved = Receipt {
            uri: "s3://bucket/u2.json".into(),
            ..receipt("u2", "", 1)
        };
        b.store.put_receipt(&moved).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let same = receipt("u3", "file:///archive/u3.json", 1);
        b.store.put_receipt(&same).await.unwrap();
        for uid in ["u2", "u3"] {
            assert!(!b.store.delete_receipt(&of(uid)).await.unwrap(), "{uid}");
            assert!(b.store.get_receipt("primary", uid).await.unwrap().is_some());
        }
        let after: Vec<String> = listed().await.into_iter().map(|l| l.receipt.uid).collect();
        assert_eq!(after.len(), 3, "{after:?}");
        assert!(b.store.delete_receipt(&of("u4")).await.unwrap());
    })
    .await;
}

#[tokio::test]
async fn a_stored_receipt_with_a_negative_size_is_malformed() {
    on_each_backend("receipt_malformed", async |b| {
        // The CHECK constraint keeps this out; a database edited by hand may lack it.
        b.raw
            .execute("ALTER TABLE gc_receipts RENAME TO gc_receipts_checked")
            .await;
        b.raw
            .execute(
                "CREATE TABLE gc_receipts (cluster_id TEXT, uid TEXT, namespace TEXT, name TEXT, \
             uri TEXT, sha256 TEXT, bytes BIGINT, api_version TEXT, kind TEXT, session TEXT, \
             run_at TEXT, volume TEXT, volume_policy TEXT)",
            )
            .await;
        b.raw
            .execute(
                "INSERT INTO gc_receipts VALUES ('c', 'u', 'ns', 'p', 'file:///a', 'ab', -1, \
                 'v1', 'Pod', NULL, NULL, NULL, NULL)",
            )
            .await;
        let err = b.store.get_receipt("c", "u").await.unwrap_err();
        assert!(matches!(err, StoreError::Malformed(_)), "{err}");
    })
    .await;
}

#[tokio::test]
async fn receipts_are_listed_newest_first_by_namespace_and_name() {
    on_each_backend("list_receipts", async |b| {
        let s = &b.store;
        assert_eq!(
            s.list_receipts("primary", ReceiptQuery::default())
                .await
                .unwrap(),
            []
        );
        assert!(s.receipt_clusters().await.unwrap().is_empty());
        let mut other_ns = receipt("w", "file:///w", 1);
        other_ns.namespace = "web".into();
        let mut other_cluster = receipt("x", "file:///x", 1);
        other_cluster.cluster_id = "other".into();
        for r in [receipt("u", "file:///u", 1), other_ns, other_cluster] {
            s.put_receipt(&r).await.unwrap();
            // Receipt times have millisecond precision: keep them apart.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Replacing a receipt makes it the newest.
        s.put_receipt(&receipt("u", "file:///u2", 2)).await.unwrap();

        let all = s
            .list_receipts("primary", ReceiptQuery::default())
            .await
            .unwrap();
        let uids: Vec<_> = all.iter().map(|l| l.receipt.uid.as_str()).collect();
        assert_eq!(uids, ["u", "w"]);
        assert_eq!(all[0].receipt, receipt("u", "file:///u2", 2));
        assert!(all[0].archived_at > all[1].archived_at, "{all:?}");
        let at = &all[0].archived_at;
        assert!(
            at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
            "RFC 3339 UTC with milliseconds: {at}"
        );

        let jobs = s
            .list_receipts(
                "primary",
                ReceiptQuery {
                    namespace: Some("jobs"),
                    name: None,
                    ..ReceiptQuery::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].receipt.uid, "u");
        let named = s
            .list_receipts(
                "primary",
                ReceiptQuery {
                    namespace: None,
                    name: Some("pod-w"),
                    ..ReceiptQuery::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].receipt.uid, "w");
        assert_eq!(
            s.list_receipts(
                "primary",
                ReceiptQuery {
                    namespace: Some("web"),
                    name: Some("pod-u"),
                    ..ReceiptQuery::default()
                }
            )
            .await
            .unwrap(),
            []
        );
        assert_eq!(
            s.list_receipts("other", ReceiptQuery::default())
                .await
                .unwrap()
                .len(),
            1
        );
        assert_eq!(s.receipt_clusters().await.unwrap(), ["other", "primary"]);
    })
    .await;
}

/// A session resource's receipt keeps its kind, apiVersion, session id and run, beside Pods'
/// receipts; receipts are listed by kind (any case) and by session.
#[tokio::test]
async fn session_receipts_keep_their_kind_and_session() {
    on_each_backend("session_receipts", async |b| {
        let s = &b.store;
        let claim = Receipt {
            name: "s1-home".into(),
            session: Some(SessionObject {
                api_version: "v1".into(),
                kind: "PersistentVolumeClaim".into(),
                session: Some("s1".into()),
                run_at: "2026-12-01T00:00:00Z".into(),
                retained: Some(RetainedVolume {
                    name: "pv-1".into(),
                    policy: "Delete".into(),
                }),
            }),
            ..receipt("c", "file:///c", 3)
        };
        let unlabelled = Receipt {
            session: Some(SessionObject {
                session: None,
                retained: None,
                ..claim.session.clone().unwrap()
            }),
            ..receipt("d", "file:///d", 4)
        };
        for r in [&receipt("p", "file:///p", 1), &claim, &unlabelled] {
            s.put_receipt(r).await.unwrap();
        }
        assert_eq!(
            s.get_receipt("primary", "c").await.unwrap(),
            Some(claim.clone())
        );
        assert_eq!(
            s.get_receipt("primary", "d").await.unwrap(),
            Some(unlabelled)
        );
        let pod = s.get_receipt("primary", "p").await.unwrap().unwrap();
        assert_eq!(
            (pod.kind(), pod.api_version(), pod.session.is_none()),
            ("Pod", "v1", true)
        );
        let uids = async |query: ReceiptQuery<'_>| {
            let listed = s.list_receipts("primary", query).await.unwrap();
            let mut uids: Vec<String> = listed.into_iter().map(|l| l.receipt.uid).collect();
            uids.sort();
            uids
        };
        let kind = |kind| ReceiptQuery {
            kind: Some(kind),
            ..ReceiptQuery::default()
        };
        assert_eq!(uids(kind("pvc-not-a-kind")).await, Vec::<String>::new());
        assert_eq!(uids(kind("persistentvolumeclaim")).await, ["c", "d"]);
        assert_eq!(uids(kind("Pod")).await, ["p"]);
        let session = ReceiptQuery {
            session: Some("s1"),
            ..ReceiptQuery::default()
        };
        assert_eq!(uids(session).await, ["c"]);
    })
    .await;
}

#[tokio::test]
async fn a_store_is_opened_again_with_its_data() {
    on_each_backend("reopen", async |b| {
        let saved = ledger(&[("u", PyNum::Int(7), "p")]);
        b.store.save_ledger("c", "ns", &saved).await.unwrap();
        let url = match &b.raw {
            Raw::Sqlite(path) => format!("sqlite://{}", path.display()),
            Raw::Postgres(db) => db.url().to_owned(),
        };
        // Two at once: the schema is migrated once, and neither fails.
        let (again, twice) = tokio::join!(gc_store::open(&url), gc_store::open(&url));
        for store in [again.unwrap(), twice.unwrap()] {
            let loaded = store.load_ledger("c", "ns").await.unwrap();
            assert_eq!(loaded, PreviousLedger::from(&saved));
            store.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn new_databases_are_migrated_by_concurrent_opens() {
    // A race: one round passed most of the time before openers took turns; 20 rounds did not.
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let url = format!(
            "sqlite:{}",
            dir.path().join(format!("{round}.sqlite3")).display()
        );
        let opens = open_three(&url).await;
        assert!(opens.iter().all(Result::is_ok), "round {round}: {opens:?}");
    }

    if let Some(db) = TestDatabase::fresh("concurrent_migrate").await.unwrap() {
        let opens = open_three(db.url()).await;
        assert!(opens.iter().all(Result::is_ok), "{opens:?}");
    }
}

async fn open_three(url: &str) -> Vec<Result<Store, StoreError>> {
    let (a, b, c) = tokio::join!(
        gc_store::open(url),
        gc_store::open(url),
        gc_store::open(url)
    );
    vec![a, b, c]
}

#[tokio::test]
async fn the_sqlite_file_and_folder_are_created_on_first_use_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state").join("gc").join("gc.sqlite3");
    for url in [
        format!("sqlite:{}", path.display()),
        path.display().to_string(),
    ] {
        let store = gc_store::open(&url).await.unwrap();
        assert!(path.is_file(), "{url}");
        assert_eq!(store.location(), format!("sqlite:{}", path.display()));
        store.close().await;
    }
    let pool = sqlx::SqlitePool::connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn a_sqlite_folder_that_cannot_be_created_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let url = file.join("gc.sqlite3").display().to_string();
    let err = gc_store::open(&url).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.sqlite3");
    std::fs::write(
        &path,
        "this is not a SQLite database, not even close to one.".repeat(100),
    )
    .unwrap();
    let err = gc_store::open(path.to_str().unwrap()).await.unwrap_err();
    assert!(matches!(err, StoreError::Malformed(_)), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable_quickly_and_the_password_stays_hidden() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("postgres://gc:Very-Secret-Pw@127.0.0.1:{port}/gc");
    let started = Instant::now();
    let err = gc_store::open(&url).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    let message = format!("{err} {err:?}");
    assert!(!message.contains("Very-Secret-Pw"), "{message}");
    assert!(message.contains("gc:***@127.0.0.1"), "{message}");
}

#[tokio::test]
async fn bad_credentials_and_a_missing_database_are_unavailable() {
    let Some(db) = TestDatabase::fresh("bad_credentials").await.unwrap() else {
        return;
    };
    let url = db.url();
    let (scheme_user, rest) = url
        .split_once(':')
        .and_then(|(s, r)| {
            let (user, after) = r.split_once(':')?;
            Some((format!("{s}:{user}"), after.split_once('@')?.1))
        })
        .unwrap();
    let wrong = format!("{scheme_user}:Wrong-Secret-Pw@{rest}");
    let err = gc_store::open(&wrong).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(
        !format!("{err} {err:?}").contains("Wrong-Secret-Pw"),
        "{err}"
    );

    let missing = url.replace(db.name(), "gc_test_no_such_database");
    let err = gc_store::open(&missing).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");

    let store = gc_store::open(url).await.unwrap();
    assert!(!format!("{store:?}").contains(":gc@"), "{store:?}");
}

#[test]
fn store_urls_that_name_nothing_are_refused() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for url in ["", "sqlite:", "sqlite::memory:", "mysql://h/d"] {
        let err = rt.block_on(gc_store::open(url)).unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{url:?}: {err}");
    }
}
