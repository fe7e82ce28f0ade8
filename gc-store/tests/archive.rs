//! The directory archive sink's contract: round trips, modes, refused keys and URIs, atomic
//! replacement, and digests that agree with `sha256sum`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gc_core::ports::{ArchiveKey, ArchiveSink, StoreError};
use gc_store::DirectorySink;
use sha2::{Digest, Sha256};

fn key(cluster: &str, namespace: &str, uid: &str) -> ArchiveKey {
    ArchiveKey {
        cluster_id: cluster.into(),
        namespace: namespace.into(),
        uid: uid.into(),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The URI's file path (the test roots hold no bytes that need encoding).
fn path_of(uri: &str) -> &Path {
    Path::new(uri.strip_prefix("file://").unwrap())
}

fn sink_in(dir: &tempfile::TempDir) -> DirectorySink {
    DirectorySink::new(dir.path().join("archives"))
}

#[tokio::test]
async fn an_archive_comes_back_as_written_at_its_keys_path() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let bytes = br#"{"kind": "Pod", "metadata": {"name": "p\u00f6d"}}"#;
    let uid = "0f2c6a8e-1b7d-4c3e-9a51-7d2b8e4f6c10";
    let uri = sink
        .write(&key("primary", "jobs", uid), bytes)
        .await
        .unwrap();

    let digest = gc_core::pods::archive::digest(bytes);
    let expected = dir
        .path()
        .join(format!("archives/primary/jobs/{uid}.{digest}.json"));
    assert_eq!(uri, format!("file://{}", expected.display()));
    assert_eq!(std::fs::read(&expected).unwrap(), bytes);
    assert_eq!(sink.read(&uri).await.unwrap(), bytes);

    let empty = sink.write(&key("primary", "jobs", "e"), b"").await.unwrap();
    assert_eq!(sink.read(&empty).await.unwrap(), b"");
}

#[tokio::test]
async fn files_are_0600_and_folders_0700_and_no_temporary_file_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let uri = sink.write(&key("c", "ns", "u"), b"{}").await.unwrap();
    let file = path_of(&uri);
    assert_eq!(mode(file), 0o600);
    for folder in ["archives", "archives/c", "archives/c/ns"] {
        assert_eq!(mode(&dir.path().join(folder)), 0o700, "{folder}");
    }
    let entries: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let digest = gc_core::pods::archive::digest(b"{}");
    assert_eq!(entries, [format!("u.{digest}.json").as_str()]);
}

#[tokio::test]
async fn unsafe_keys_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let clusters = ["..", "c/d", "C", ""].map(|c| key(c, "ns", "u"));
    let namespaces = ["..", "ns/x", "Ns"].map(|n| key("c", n, "u"));
    let uids = [
        "..",
        "../../etc/passwd",
        "/etc/passwd",
        "my-pod.log",
        "u\0",
        "",
    ];
    let uids = uids.map(|u| key("c", "ns", u));
    for bad in clusters.into_iter().chain(namespaces).chain(uids) {
        let err = sink.write(&bad, b"x").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Other(m) if m.starts_with("refusing archive key")),
            "{bad:?}: {err}"
        );
    }
    assert!(!dir.path().join("archives").exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn uris_outside_the_root_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let uri = sink.write(&key("c", "ns", "u"), b"inside").await.unwrap();
    // A file of the right shape beside the root: readable, but not through this sink.
    let outside = dir.path().join("elsewhere/c/ns/u.json");
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    std::fs::write(&outside, "outside").unwrap();
    let root = dir.path().join("archives").display().to_string();
    for bad in [
        format!("file://{}", outside.display()),
        format!("file://{root}/../elsewhere/c/ns/u.json"),
        format!("file://{root}/c/ns/../../../elsewhere/c/ns/u.json"),
        format!("file://localhost{root}/c/ns/u.json"),
        uri.replace("file://", "file:"),
        uri.replace("file://", "http://"),
        uri.trim_start_matches("file://").to_owned(),
        "file:///etc/passwd".to_owned(),
        String::new(),
    ] {
        let err = sink.read(&bad).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Other(m) if m.starts_with("refusing to read archive")),
            "{bad}: {err}"
        );
    }
    assert_eq!(sink.read(&uri).await.unwrap(), b"inside");
}

#[tokio::test]
async fn a_missing_archive_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let uri = format!(
        "file://{}/c/ns/gone.json",
        dir.path().join("archives").display()
    );
    let err = sink.read(&uri).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound(m) if m.contains("gone.json")),
        "{err}"
    );
}

#[tokio::test]
async fn archives_are_write_once_a_second_write_lands_beside_never_over() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let k = key("c", "ns", "u");
    let first = sink.write(&k, &vec![b'a'; 1 << 20]).await.unwrap();
    let inode =
        |uri: &str| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path_of(uri)).unwrap());
    let before = inode(&first);
    // Other bytes (a late write of the same Pod): their own name, the first untouched.
    let second = sink.write(&k, b"short").await.unwrap();
    assert_ne!(first, second);
    assert_eq!(sink.read(&second).await.unwrap(), b"short");
    assert_eq!(sink.read(&first).await.unwrap(), vec![b'a'; 1 << 20]);
    assert_eq!(inode(&first), before);
    assert_eq!(mode(path_of(&second)), 0o600);
    // The same bytes again: the same archive, as good as written, not rewritten.
    let again = sink.write(&k, &vec![b'a'; 1 << 20]).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(inode(&again), before);
    // A file edited under an archive's name is never replaced by a write of those bytes.
    std::fs::write(path_of(&second), b"edited").unwrap();
    let err = sink.write(&k, b"short").await.unwrap_err();
    assert!(err.to_string().contains("not replaced"), "{err}");
    assert_eq!(std::fs::read(path_of(&second)).unwrap(), b"edited");
}

#[tokio::test]
async fn concurrent_writes_of_one_key_each_land_whole_under_their_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let k = key("c", "ns", "u");
    let bodies: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'0' + i % 4; 256 * 1024]).collect();
    let mut writes = tokio::task::JoinSet::new();
    for body in bodies.clone() {
        let (sink, k) = (sink.clone(), k.clone());
        writes.spawn(async move { (sink.write(&k, &body).await, body) });
    }
    let mut uris = std::collections::BTreeSet::new();
    for (uri, body) in writes.join_all().await {
        let uri = uri.unwrap();
        assert_eq!(sink.read(&uri).await.unwrap(), body, "a mix of writes");
        uris.insert(uri);
    }
    assert_eq!(uris.len(), 4, "one archive per distinct body");
    let entries = std::fs::read_dir(path_of(uris.first().unwrap()).parent().unwrap()).unwrap();
    assert_eq!(entries.count(), 4, "temporary files left behind");
}

#[tokio::test]
async fn the_probe_writes_outside_the_archives_and_fails_on_a_read_only_folder() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    sink.probe("primary").await.unwrap();
    sink.probe("primary").await.unwrap();
    assert!(dir.path().join("archives/.gc-probe/primary").is_file());
    assert!(sink.list(None).await.unwrap().is_empty(), "not an archive");
    // A file where the folder should be: the probe fails, naming the path.
    let blocked = tempfile::tempdir().unwrap();
    std::fs::write(blocked.path().join("archives"), b"a file").unwrap();
    let err = sink_in(&blocked).probe("primary").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("archives"), "{err}");
}

#[tokio::test]
async fn the_files_digest_is_the_digest_of_the_bytes_written() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let bytes: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let uri = sink.write(&key("c", "ns", "u"), &bytes).await.unwrap();
    let ours: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let output = std::process::Command::new("sha256sum")
        .arg(path_of(&uri))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let theirs = String::from_utf8(output.stdout).unwrap();
    assert_eq!(theirs.split_whitespace().next(), Some(ours.as_str()));
}

#[tokio::test]
async fn a_root_that_cannot_be_created_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let sink = DirectorySink::new(file.join("archives"));
    let err = sink.write(&key("c", "ns", "u"), b"x").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

#[tokio::test]
async fn a_symlink_inside_the_root_is_not_followed_for_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    std::fs::create_dir_all(dir.path().join("archives")).unwrap();
    std::fs::create_dir(dir.path().join("target")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("target"), dir.path().join("archives/c")).unwrap();
    let err = sink.write(&key("c", "ns", "u"), b"x").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path().join("target"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn the_default_folder_is_next_to_the_default_database() {
    let db = gc_store::default_path();
    assert_eq!(
        gc_store::default_archive_dir(),
        db.parent().unwrap().join("archives")
    );
}

#[tokio::test]
async fn a_listing_shows_every_archive_of_a_cluster_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    assert_eq!(
        sink.list(None).await.unwrap(),
        [],
        "no root yet: no archive"
    );
    let a = sink
        .write(&key("primary", "jobs", "a"), b"aa")
        .await
        .unwrap();
    let b = sink
        .write(&key("primary", "web", "b"), b"bbb")
        .await
        .unwrap();
    let c = sink.write(&key("other", "jobs", "c"), b"c").await.unwrap();
    // Not archives: an interrupted write's leftover, a non-JSON file, a folder named like one.
    let jobs = dir.path().join("archives/primary/jobs");
    std::fs::write(jobs.join(".a.json.1.0.tmp"), b"x").unwrap();
    std::fs::write(jobs.join("notes.txt"), b"x").unwrap();
    std::fs::create_dir(jobs.join("d.json")).unwrap();

    let mut primary = sink.list(Some("primary")).await.unwrap();
    primary.sort_by(|x, y| x.uri.cmp(&y.uri));
    let shown: Vec<_> = primary
        .iter()
        .map(|e| (e.uri.as_str(), e.key.clone(), e.bytes))
        .collect();
    assert_eq!(
        shown,
        [
            (a.as_str(), key("primary", "jobs", "a"), 2),
            (b.as_str(), key("primary", "web", "b"), 3),
        ]
    );
    let all = sink.list(None).await.unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.iter().any(|e| e.uri == c));
    for entry in &all {
        assert_eq!(
            sink.read(&entry.uri).await.unwrap().len() as u64,
            entry.bytes
        );
    }
}

/// `archives prune` removes through the sink: an archive there is removed (and said so), one
/// already missing is said missing, a URI of another root touches nothing, and what cannot be
/// removed is an error, never "missing".
#[tokio::test]
async fn an_archive_is_removed_by_its_uri_and_a_missing_one_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let uri = sink.write(&key("c", "ns", "u"), b"{}").await.unwrap();
    let other = sink.write(&key("c", "ns", "v"), b"[]").await.unwrap();
    assert!(sink.exists(&uri).await.unwrap());
    assert!(sink.remove(&uri).await.unwrap(), "it was there");
    assert!(!path_of(&uri).exists());
    assert!(!sink.exists(&uri).await.unwrap());
    assert!(!sink.remove(&uri).await.unwrap(), "already missing");
    assert!(path_of(&other).exists(), "only that archive");

    // Another root's URI, or not an archive's: refused before anything is touched.
    let elsewhere = tempfile::tempdir().unwrap();
    let foreign = sink_in(&elsewhere)
        .write(&key("c", "ns", "w"), b"{}")
        .await
        .unwrap();
    for bad in [foreign.as_str(), "file:///etc/passwd"] {
        let e = sink.remove(bad).await.unwrap_err();
        assert!(matches!(e, StoreError::Other(_)), "{bad}: {e}");
    }
    assert!(path_of(&foreign).exists());

    // A folder where the archive should be (or any file system error) is no "missing".
    std::fs::create_dir(path_of(&uri)).unwrap();
    std::fs::write(path_of(&uri).join("x"), b"x").unwrap();
    let e = sink.remove(&uri).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    assert!(e.to_string().contains("cannot remove archive"), "{e}");
}

/// Archives written at once (a run's objects in flight), by clones of one sink sharing their
/// folder's syncs, each land whole at their own name, and no temporary file is left.
// The writes run on the blocking pool, at once, whatever the runtime's flavor.
#[tokio::test]
async fn archives_written_at_once_each_land_whole() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink_in(&dir);
    let writes: Vec<_> = (0..64)
        .map(|i| {
            let sink = sink.clone();
            tokio::spawn(async move {
                let bytes = format!("{{\"n\": {i}}}").into_bytes();
                let uri = sink.write(&key("c", "ns", &format!("u{i}")), &bytes).await;
                (bytes, uri.unwrap())
            })
        })
        .collect();
    for write in writes {
        let (bytes, uri) = write.await.unwrap();
        assert_eq!(sink.read(&uri).await.unwrap(), bytes);
    }
    let names = std::fs::read_dir(dir.path().join("archives/c/ns")).unwrap();
    let names: Vec<String> = names
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 64, "{names:?}");
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}
