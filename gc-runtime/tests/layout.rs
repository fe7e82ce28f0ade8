//! The layout of `gc-runtime/src` is an architecture: no two of its files import each other,
//! directly or through a chain of files (no file circle). A parent that re-exports its child's
//! items, or a child that uses `super::*`, is no edge of a circle: only imports between modules
//! neither of which contains the other count. What two files both need belongs in a module below
//! them.
//!
//! The graph is read from the text by `gc_testbed::layout`, as gc-core's (whose `tests/layout.rs`
//! tries the reader on small texts) and gc-cli's: a module depends on every module named by a
//! `crate::`, `super::` or `self::` path in its code (the longest module the path starts with;
//! comments and strings are not code) and on each child module it names by a relative path. Test
//! code is left out: tests may reach anywhere.

use std::path::Path;

use gc_testbed::layout;

#[test]
fn no_two_files_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Some(circle) = layout::file_circle(&src) {
        panic!(
            "gc-runtime's files import each other in a circle: {circle}\nwhat they share belongs \
             in a module of its own that imports none of them"
        );
    }
    // The graph is read: the check would see a circle if one of these edges were turned back
    // (the served metrics read the exposition's data, the session collector restores).
    let imports = layout::across(&layout::imports(&layout::modules(&src)));
    for (from, to) in [
        ("metrics::served", "metrics::exposition"),
        ("sessions", "restore"),
        ("serve::api", "serve::tls"),
        ("adapters::archives", "restore"),
    ] {
        assert!(
            imports[from].contains_key(to),
            "{from} -> {to}: {imports:#?}"
        );
    }
}
