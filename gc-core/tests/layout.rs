//! The layout of `gc-core/src` is an architecture: no two of its files import each other, directly
//! or through a chain of files (no file circle). A parent that re-exports its child's items, or a
//! child that uses `super::*`, is no edge of a circle: only imports between modules neither of
//! which contains the other count. What two files both need belongs in a module below them.
//!
//! The graph is read from the text by `gc_testbed::layout`, as gc-runtime's and gc-cli's: a
//! module depends on every module named by a `crate::`, `super::` or `self::` path in its code
//! (the longest module the path starts with; comments and strings are not code) and on each child
//! module it names by a relative path. Test code is left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use gc_testbed::layout::{self, Module};

#[test]
fn no_two_files_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Some(circle) = layout::file_circle(&src) {
        panic!(
            "gc-core's files import each other in a circle: {circle}\nwhat they share belongs in \
             a module of its own that imports none of them"
        );
    }
    // The graph is read: the check would see a circle if one of these edges were turned back.
    let imports = layout::across(&layout::imports(&layout::modules(&src)));
    for (from, to) in [
        ("sessions::run", "sessions::volumes"),
        ("sessions::run", "sessions::deletes"),
        ("pods::apply", "pods::plan"),
        ("ports", "sessions::manifest"),
    ] {
        assert!(
            imports[from].contains_key(to),
            "{from} -> {to}: {imports:#?}"
        );
    }
}

fn texts(modules: &[(&str, &str)]) -> BTreeMap<Module, String> {
    modules
        .iter()
        .map(|(m, t)| ((*m).to_owned(), layout::without_tests(t)))
        .collect()
}

fn names(ms: &[&str]) -> Vec<Module> {
    ms.iter().map(|m| (*m).to_owned()).collect()
}

fn set(ms: &[&str]) -> BTreeSet<Module> {
    ms.iter().map(|m| (*m).to_owned()).collect()
}

/// The reader on small texts: what makes an edge of a file circle and what does not.
#[test]
fn a_circle_is_between_files_neither_of_which_contains_the_other() {
    // Siblings that import each other, through `crate::` one way and `super::` the other.
    let siblings = texts(&[
        ("", "pub mod a;"),
        ("a", "pub mod b;\npub mod c;\npub use b::B;"),
        ("a::b", "use crate::a::c::C;"),
        ("a::c", "use super::b::B;"),
    ]);
    assert_eq!(
        layout::file_circle_of(&siblings),
        Some(names(&["a::b", "a::c", "a::b"]))
    );
    // A chain of three, and a shorter circle beside it: the shortest is named.
    let chain = texts(&[
        ("x", "use crate::y::Y;"),
        ("y", "use crate::z::{self, Z};"),
        ("z", "fn f() { crate::x::g(); crate::w::h(); }"),
        ("w", "use crate::z::Z;"),
    ]);
    assert_eq!(
        layout::file_circle_of(&chain),
        Some(names(&["w", "z", "w"]))
    );
    let without_w = texts(&[
        ("x", "use crate::y::Y;"),
        ("y", "use crate::z::{self, Z};"),
        ("z", "fn f() { crate::x::g(); }"),
    ]);
    assert_eq!(
        layout::file_circle_of(&without_w),
        Some(names(&["x", "y", "z", "x"]))
    );
    // A parent and its descendants import each other freely: re-exports, `super::*`, the root.
    let nested = texts(&[
        ("", "pub mod a;\npub use a::b::B;"),
        ("a", "pub mod b;\npub use b::c::C;\npub use self::b::B;"),
        ("a::b", "use super::*;\nuse crate::B;\npub mod c;"),
        ("a::b::c", "use crate::a::A;\nuse super::super::b::B;"),
    ]);
    assert_eq!(layout::file_circle_of(&nested), None);
    // ... but a descendant of one with another that is not its ancestor is a circle.
    let cousins = texts(&[
        ("a", ""),
        ("a::b", "use crate::d::D;"),
        ("d", "use crate::a::b::B;"),
    ]);
    assert_eq!(
        layout::file_circle_of(&cousins),
        Some(names(&["a::b", "d", "a::b"]))
    );
}

#[test]
fn a_path_names_the_longest_module_it_starts_with() {
    let known = texts(&[
        ("", ""),
        ("a", ""),
        ("a::b", ""),
        (
            "c",
            "use crate::a::b::Item;\nuse crate::a::Other;\nfn f() { crate::free(); }",
        ),
        ("a::d", "use self::e::E;\nuse super::b::{self, X};"),
        ("a::d::e", ""),
        // `super::` inside an inline module is read from that module: `p::shared`'s parent is `p`.
        ("p", "mod shared {\n    use super::Q;\n}\n"),
    ]);
    let imports = layout::imports(&known);
    let to = |m: &str| imports[m].keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(to("c"), set(&["", "a", "a::b"]));
    assert_eq!(imports["c"]["a::b"], "crate::a::b::Item");
    assert_eq!(to("a::d"), set(&["a::b", "a::d::e"]));
    assert_eq!(imports["a::d"]["a::b"], "super::b");
    assert_eq!(to("p"), set(&[]));
}

#[test]
fn comments_strings_and_tests_make_no_edge() {
    let known = texts(&[
        (
            "x",
            r####"//! The crate's x, beside [`crate::y`].
/// Reads [`crate::y::Y`] (see [`y`](crate::y)).
pub fn x() -> &'static str {
    /* crate::y::Y, /* nested */ crate::y */
    let quote = '"';
    let escaped = '\'';
    let message = "crate::y::Y \" crate::y";
    let raw = r#"crate::y::{a, b} " crate::y"#;
    let bytes = b"crate::y";
    let _ = (quote, escaped, message, raw, bytes);
    #[cfg(test)]
    crate::y::count();
    "no crate::y here"
}

#[cfg(test)]
fn helper() {
    crate::y::help();
}

#[cfg(test)]
impl Clone for X {
    fn clone(&self) -> Self {
        crate::y::copy()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod inline {
    use crate::y::Y;
}

// Text after the test items is read: crate::y in this comment is not.
pub fn z() {
    crate::z::run();
}
"####,
        ),
        ("y", "use crate::x::x;"),
        ("z", ""),
    ]);
    let edges = layout::graph(&known);
    assert_eq!(edges["x"], set(&["z"]), "{known:#?}");
    assert_eq!(edges["y"], set(&["x"]));
    assert_eq!(layout::file_circle_of(&known), None);
}

/// A fresh `src` folder for one test's sources, empty.
fn folder(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    dir.join("src")
}

fn write(src: &Path, file: &str, text: &str) {
    let path = src.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn files_of_test_modules_are_left_out_and_a_circle_is_named_by_its_files() {
    let src = folder("layout-files");
    write(
        &src,
        "lib.rs",
        "pub mod a;\npub mod c;\n#[cfg(test)]\nmod testing;\npub mod d;",
    );
    write(&src, "a.rs", "pub mod b;\n#[cfg(test)]\nmod tests;\n");
    write(&src, "a/b.rs", "use crate::c::C;\n");
    write(&src, "a/tests.rs", "use crate::c::C;\n");
    write(&src, "c/mod.rs", "pub mod e;\nuse crate::d::D;\n");
    write(&src, "c/e.rs", "");
    write(&src, "d.rs", "use crate::a::b::B;\n");
    write(&src, "testing.rs", "pub mod fakes;\n");
    write(&src, "testing/fakes.rs", "use crate::a::b::B;\n");
    let modules = layout::modules(&src);
    assert_eq!(
        modules.keys().cloned().collect::<BTreeSet<_>>(),
        set(&["", "a", "a::b", "c", "c::e", "d"])
    );
    assert_eq!(
        layout::file_circle(&src).as_deref(),
        Some(
            "src/a/b.rs -> src/c/mod.rs -> src/d.rs -> src/a/b.rs\n  \
             src/a/b.rs imports src/c/mod.rs (crate::c::C)\n  \
             src/c/mod.rs imports src/d.rs (crate::d::D)\n  \
             src/d.rs imports src/a/b.rs (crate::a::b::B)"
        )
    );
    std::fs::remove_dir_all(src.parent().unwrap()).unwrap();
}
