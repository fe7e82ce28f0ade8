//! The streaming reader gives the same inventory, or the same error, however the text is cut.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::*;

/// The planner's fixture corpus, compiled in (the core reads no files, even in tests).
macro_rules! fixtures {
    ($($name:literal),* $(,)?) => {
        [$((
            $name,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../gc-cli/tests/data/plan/",
                $name,
                ".json"
            )),
        )),*]
    };
}

const FIXTURES: [(&str, &str); 29] = fixtures![
    "anchor-bases",
    "archive-ceiling",
    "archive-ceiling-ignores-held",
    "archive-under-ceiling",
    "bad-anchor-in-future",
    "bad-finished-at-not-string",
    "bad-first-in-future",
    "bad-first-not-number",
    "bad-incomplete-inventory",
    "bad-labels-list",
    "bad-ledger-entry",
    "bad-ledger-not-object",
    "bad-malformed-container-status",
    "bad-metadata-not-object",
    "bad-missing-lists",
    "bad-name-missing",
    "bad-state-null",
    "bad-timestamp-text",
    "bad-timestamp-without-zone",
    "eligibility-clauses",
    "eligibility-clauses-podlist",
    "empty-podlist",
    "empty-size-zero",
    "ignored-bad-data-in-ineligible-pod",
    "inventory-ceiling",
    "ledger-carry-and-prune",
    "retention-boundary",
    "sort-ties-and-cap",
    "unicode-name",
];

/// The script that writes the corpus: every `case(...)` in it is one fixture.
const CORPUS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../gc-cli/tests/data/plan/make_corpus.py"
));

fn rules(namespace: &str) -> Rules<'_> {
    Rules {
        namespace,
        collect_label: "diagnostics.example.com/collect",
        pin: "diagnostics.example.com/collector",
        protect: None,
        exclude: None,
    }
}

/// Chunk sizes to try on a text of `len` bytes: every size up to 64, then powers of two, then the
/// whole text.
fn sizes(len: usize) -> impl Iterator<Item = usize> {
    let small = 1..=len.min(64);
    let powers = (7..usize::BITS)
        .map(|p| 1usize << p)
        .take_while(move |&s| s < len);
    small.chain(powers).chain((len > 64).then_some(len))
}

fn chunked(
    text: &[u8],
    size: usize,
    rules: Rules<'_>,
    keep: usize,
) -> Result<Inventory, InventoryError> {
    chunked_from(text, size, rules, keep, PARALLEL_FROM)
}

/// As [`chunked`], with a second thread from `parallel_from` bytes of text at once.
fn chunked_from(
    text: &[u8],
    size: usize,
    rules: Rules<'_>,
    keep: usize,
    parallel_from: usize,
) -> Result<Inventory, InventoryError> {
    let mut reader = Reader::new(rules, keep).parallel_from(parallel_from);
    for chunk in text.chunks(size) {
        reader.feed(chunk)?;
    }
    reader.finish()
}

/// `text` fed in chunks of every size in [`sizes`] reads as `expect`, as it does when fed whole
/// (through [`read`]), keeping facts for `keep` Pods. Returns how many sizes were tried.
fn check(
    text: &[u8],
    rules: Rules<'_>,
    keep: usize,
    expect: &Result<Inventory, InventoryError>,
) -> usize {
    assert_eq!(
        &read(text, rules, keep),
        expect,
        "whole {:?}",
        String::from_utf8_lossy(text)
    );
    let mut tried = 0;
    for size in sizes(text.len()) {
        let got = chunked(text, size, rules, keep);
        assert_eq!(
            &got,
            expect,
            "chunks of {size} bytes of {:?}",
            String::from_utf8_lossy(text)
        );
        // Two threads from any length of text read the same (a thread per chunk: not on bytes).
        if size > 16 {
            assert_eq!(
                &chunked_from(text, size, rules, keep, 0),
                expect,
                "two threads, chunks of {size} bytes of {:?}",
                String::from_utf8_lossy(text)
            );
        }
        tried += 1;
    }
    tried
}

/// A result in brief: the count and how many facts were kept, or the error.
fn brief(r: &Result<Inventory, InventoryError>) -> String {
    match r {
        Ok(inv) => format!("{} pods, {} kept", inv.count, inv.pods.len()),
        Err(e) => format!("error: {e}"),
    }
}

#[derive(Deserialize)]
struct Fixture<'a> {
    #[serde(borrow)]
    args: &'a RawValue,
    #[serde(borrow)]
    inventory: &'a RawValue,
}

#[test]
fn every_fixture_reads_the_same_in_chunks_of_any_size() {
    let mut cases: Vec<_> = CORPUS
        .split("\ncase('")
        .skip(1)
        .filter_map(|c| c.split('\'').next())
        .collect();
    cases.sort_unstable();
    let names: Vec<_> = FIXTURES.iter().map(|&(name, _)| name).collect();
    assert_eq!(names, cases, "every case of make_corpus.py is read here");
    let mut summary = Vec::new();
    let mut tried = 0;
    for (name, file) in FIXTURES {
        let fixture: Fixture<'_> = serde_json::from_str(file).expect("{args, inventory}");
        let args: serde_json::Value = serde_json::from_str(fixture.args.get()).expect("args");
        let rules = rules(args["namespace"].as_str().unwrap_or("work"));
        let inventory = fixture.inventory.get();
        let value: serde_json::Value = serde_json::from_str(inventory).expect("json");
        let compact = value.to_string();
        for keep in [1000, 1, 0] {
            let whole = read(inventory.as_bytes(), rules, keep);
            // The same inventory re-spaced (and its keys reordered) reads the same.
            assert_eq!(
                read(compact.as_bytes(), rules, keep),
                whole,
                "{name} compact"
            );
            tried += check(inventory.as_bytes(), rules, keep, &whole);
            tried += check(compact.as_bytes(), rules, keep, &whole);
            if keep == 1000 {
                summary.push(format!("{name}: {}", brief(&whole)));
            }
        }
        // The whole fixture file is an object with none of an inventory's keys.
        let whole_file = read(file.as_bytes(), rules, 1000);
        tried += check(file.as_bytes(), rules, 1000, &whole_file);
        assert_eq!(
            brief(&whole_file),
            "error: incomplete native Pod inventory: metadataItems and statusItems must both be lists",
            "{name}"
        );
    }
    // Which fixtures read and which fail, as the corpus describes them.
    let errors: Vec<_> = summary.iter().filter(|s| s.contains("error")).collect();
    assert_eq!(
        errors,
        [
            "bad-incomplete-inventory: error: incomplete native Pod inventory: metadataItems and statusItems differ in length",
            "bad-missing-lists: error: incomplete native Pod inventory: metadataItems and statusItems must both be lists",
        ]
    );
    assert!(
        summary.contains(&"eligibility-clauses: 21 pods, 21 kept".to_owned()),
        "{summary:?}"
    );
    assert!(
        summary.contains(&"eligibility-clauses-podlist: 21 pods, 21 kept".to_owned()),
        "{summary:?}"
    );
    assert!(
        summary.contains(&"empty-size-zero: 0 pods, 0 kept".to_owned()),
        "{summary:?}"
    );
    assert!(tried > 10_000, "{tried} chunkings");
}

#[test]
fn edge_texts_read_the_same_in_chunks_of_any_size() {
    let pod = r#"{"metadata": {"name": "a", "namespace": "work", "uid": "u", "resourceVersion": "1"}, "status": {"phase": "Failed"}}"#;
    let table: &[(&[u8], &str)] = &[
        (b"", "error: malformed inventory: truncated: the top-level object is not closed"),
        (b"{", "error: malformed inventory: truncated: the top-level object is not closed"),
        (b"   \n", "error: malformed inventory: truncated: the top-level object is not closed"),
        (b"[]", "error: malformed inventory: expected a JSON object"),
        (
            b"apiVersion: v1\nkind: List\nitems: []\n",
            "error: malformed inventory: expected a JSON object, found text that is not JSON \
             (YAML?): the inventory must be JSON: kubectl get pods -o json",
        ),
        (b" \n- a\n", "error: malformed inventory: expected a JSON object, found text that is not JSON (YAML?): the inventory must be JSON: kubectl get pods -o json"),
        (b"{}", "error: incomplete native Pod inventory: metadataItems and statusItems must both be lists"),
        (b" \t{ \"items\" :\n[ ] }\n", "0 pods, 0 kept"),
        (b"{\"items\": 5}", "error: malformed inventory: items is not a list"),
        (b"{\"items\": [1]}", "error: malformed inventory: an element of items has no metadata"),
        (b"{\"items\": []} x", "error: malformed inventory: unexpected 'x' (End)"),
        (b"{\"items\": [], }", "error: malformed inventory: unexpected '}' (Key)"),
        (b"{\"size\": 0}", "0 pods, 0 kept"),
        (b"{\"size\": 0.0, \"metadataItems\": 3}", "0 pods, 0 kept"),
        (b"{\"size\": false}", "0 pods, 0 kept"),
        (b"{\"size\": 1, \"metadataItems\": [{}], \"statusItems\": [5]}", "error: malformed inventory: statusItems[0] is not an object"),
        (b"{\"statusItems\": [{}], \"size\": 1, \"metadataItems\": [{}]}", "1 pods, 1 kept"),
        (b"{\"metadataItems\": [{}], \"statusItems\": [{}, {}]}", "error: incomplete native Pod inventory: metadataItems and statusItems differ in length"),
        // Brackets, braces and quotes inside strings; keys that are not an inventory's.
        (
            br#"{"x\"]}": {"items": "[{"}, "items": [{"metadata": {"name": "a\"]}\\", "uid": "}"}, "status": {"phase": "[{\""}}], "y": [[{}]]}"#,
            "1 pods, 1 kept",
        ),
        // Multi-byte characters, cut anywhere by the chunks.
        ("{\"items\": [{\"metadata\": {\"name\": \"caf\u{e9}-\u{1F600}\"}}]}".as_bytes(), "1 pods, 1 kept"),
        (b"{\"items\": [{\"metadata\": {\"name\": \"a\"}}", "error: malformed inventory: truncated: the top-level object is not closed"),
        (b"{\"items\": [{\"metadata\": {\"name\": tru}}]}", "error: malformed inventory: not JSON at byte 22 of a value: expected true, false or null"),
    ];
    for &(text, expect) in table {
        let whole = read(text, rules("work"), 10);
        assert_eq!(brief(&whole), expect, "{:?}", String::from_utf8_lossy(text));
        check(text, rules("work"), 10, &whole);
    }
    // Many Pods, over the keep limit: counted, not kept.
    let many = format!("{{\"items\": [{}]}}", vec![pod; 40].join(", "));
    let whole = read(many.as_bytes(), rules("work"), 7);
    assert_eq!(brief(&whole), "40 pods, 7 kept");
    check(many.as_bytes(), rules("work"), 7, &whole);
}

const BAD_UTF8: &[u8] = b"{\"items\": [{\"metadata\": {\"name\": \"\xff\"}}]}";

#[test]
fn invalid_utf8_is_refused_in_chunks_of_any_size() {
    for size in sizes(BAD_UTF8.len()) {
        let got = chunked(BAD_UTF8, size, rules("work"), 10);
        assert!(
            matches!(&got, Err(InventoryError::Malformed(m)) if m.starts_with("invalid utf-8 sequence of 1 bytes from index ")),
            "chunks of {size}: {got:?}"
        );
    }
}

/// The error should name the byte from the start of the text, whatever the chunks.
#[test]
fn invalid_utf8_offset_does_not_depend_on_the_chunking() {
    let whole = read(BAD_UTF8, rules("work"), 10);
    assert_eq!(
        brief(&whole),
        "error: malformed inventory: invalid utf-8 sequence of 1 bytes from index 34"
    );
    check(BAD_UTF8, rules("work"), 10, &whole);
}

/// A bad element anywhere in a long list, under or past the keep limit: two threads give the
/// result one does, the first error in order and its offsets, whatever the chunks.
#[test]
fn two_threads_read_as_one_whatever_the_bad_element_and_the_limit() {
    let meta = |i: usize| {
        format!(
            r#"{{"name": "p-{i}", "namespace": "work", "uid": "u{i}", "resourceVersion": "{i}", "ownerReferences": [{{"name": "x"}}, {{"name": "y"}}]}}"#
        )
    };
    let status = r#"{"status": {"phase": "Failed", "conditions": [{"type": "A"}, {"type": "B"}]}}"#;
    let pod = |i: usize| {
        format!(
            r#"{{"metadata": {}, "status": {}}}"#,
            meta(i),
            &status[11..status.len() - 1]
        )
    };
    let bads = [
        "1",
        "{\"metadata\": tru}",
        "{\"name\": 5}",
        "[]",
        "{\"status\": 3}",
    ];
    let n = 24;
    let mut texts = Vec::new();
    for bad_at in (0..n).step_by(5).map(Some).chain([None]) {
        for bad in bads {
            let element = |i: usize, good: &dyn Fn(usize) -> String| {
                if Some(i) == bad_at {
                    bad.to_owned()
                } else {
                    good(i)
                }
            };
            let metas: Vec<_> = (0..n).map(|i| element(i, &meta)).collect();
            let statuses: Vec<_> = (0..n).map(|i| element(i, &|_| status.to_owned())).collect();
            let items: Vec<_> = (0..n).map(|i| element(i, &pod)).collect();
            texts.push(format!(
                "{{\"size\": {n}, \"metadataItems\": [{}], \"statusItems\": [{}]}}",
                metas.join(", "),
                statuses.join(",\n ")
            ));
            texts.push(format!("{{\"items\": [{}]}}", items.join(",")));
        }
    }
    let taken = TAKEN.load(std::sync::atomic::Ordering::Relaxed);
    for text in &texts {
        for keep in [0, 3, 12, n - 1, n, n + 1] {
            let one = read(text.as_bytes(), rules("work"), keep);
            for size in [text.len(), 997, 128] {
                for from in [0, 256] {
                    assert_eq!(
                        chunked_from(text.as_bytes(), size, rules("work"), keep, from),
                        one,
                        "keep {keep}, chunks of {size}, two threads from {from}: {text}"
                    );
                }
            }
        }
    }
    let taken = TAKEN.load(std::sync::atomic::Ordering::Relaxed) - taken;
    assert!(
        taken > 1000,
        "the second thread's work was taken {taken} times"
    );
}
