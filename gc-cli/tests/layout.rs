//! The layout of `gc-cli/src` is an architecture: its modules import each other without a cycle,
//! and nothing imports the command line (`cli`) or the crate root (`main.rs`).
//!
//! The graph is read from the text by `gc_testbed::layout`, as gc-core's and gc-runtime's: a
//! module depends on every module named by a `crate::`, `super::` or `self::` path in its code
//! (grouped `use crate::{a, b::c}` included; comments and strings are not code) and on each child
//! module it names by a relative path (`plan::run` in `pods.rs`). Test code (`#[cfg(test)] mod
//! tests`) is left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gc_testbed::layout::{Module, cycle, graph, modules, without_tests};

fn src_graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    graph(&modules(&src))
}

#[test]
fn the_modules_of_src_import_each_other_without_a_cycle() {
    let edges = src_graph();
    let shown = |m: &str| if m.is_empty() { "main" } else { m }.to_owned();
    let listing: Vec<String> = edges
        .iter()
        .map(|(m, to)| {
            let to: Vec<String> = to.iter().map(|t| shown(t)).collect();
            format!("{} -> {}", shown(m), to.join(", "))
        })
        .collect();
    if let Some(found) = cycle(&edges) {
        let found: Vec<String> = found.iter().map(|m| shown(m)).collect();
        panic!(
            "import cycle: {}\n{}",
            found.join(" -> "),
            listing.join("\n")
        );
    }
    // The graph is read: the test would see an edge if there were one.
    assert!(edges["pods::apply"].contains("pods::plan"), "{listing:#?}");
    assert!(edges["cli"].contains("pods::plan"), "{listing:#?}");
}

#[test]
fn only_main_imports_the_command_line_and_nothing_imports_main() {
    for (module, to) in src_graph() {
        // `cli`'s own tests (`cli::tests`) are part of it.
        assert!(
            module.is_empty() || module.starts_with("cli::") || !to.contains("cli"),
            "{module} imports crate::cli: clap types live with their command"
        );
        assert!(
            !to.contains(""),
            "{module} imports the crate root: shared items live in a module of their own"
        );
    }
}

/// The run lock is `gc-runtime`'s: the CLI takes, renews and releases no Lease itself.
#[test]
fn the_cli_holds_no_lease_itself() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    for (module, text) in modules(src) {
        for call in [
            ".acquire(",
            ".renew(",
            "try_acquire(",
            "ports::Lock",
            "Renewal::",
            "RunLock::take",
        ] {
            assert!(
                !text.contains(call),
                "{module} calls {call}: the runs of gc_runtime take their lock"
            );
        }
    }
}

/// `gc-cli` turns flags into a run of `gc_runtime` and prints what it returns: it calls no
/// engine function of `gc-core` (recovery, the fenced apply, the session run), no Lease or Event
/// call of `gc-k8s`, and none of the metrics, HTTP-server or HTTP-client crates.
#[test]
fn the_cli_runs_nothing_but_through_the_runtime() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    for (module, text) in modules(src) {
        for call in [
            "apply::recover",
            "apply::apply_until",
            "apply::release_pins",
            "apply::pinned_pods",
            "collect_sessions::run",
            ".post_event(",
            "gc_k8s::event(",
            ".release(",
            "prometheus_client",
            "axum",
            "ureq",
        ] {
            assert!(
                !text.contains(call),
                "{module} uses {call}: call gc_runtime instead"
            );
        }
    }
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("the manifest");
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    for krate in ["prometheus-client", "axum", "ureq", "hyper", "reqwest"] {
        assert!(
            !dependencies.contains(&format!("\n{krate}")),
            "gc-cli depends on {krate} itself"
        );
    }
}

/// `gc-cli` stays a thin command line: flags, one runtime call, output and exit code. Its
/// non-test lines (each file up to its first `#[cfg(test)]`, `tests.rs` files left out, as
/// `scripts/loc.py` counts them) are at most 3,000.
#[test]
fn the_cli_is_at_most_3000_lines() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut folders = vec![src.to_path_buf()];
    let mut lines = 0;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.lines().take_while(|l| l.trim() != "#[cfg(test)]");
                lines += code.count();
            }
        }
    }
    assert!(lines > 1000, "the count reads the sources: {lines}");
    assert!(
        lines <= 3000,
        "gc-cli has {lines} non-test lines: what is not flags, output or exit codes belongs in \
         gc-runtime (or gc-output)"
    );
}

/// The reader itself, on small texts: groups, `self`, `super`, relative child paths, tests.
#[test]
fn the_reader_sees_every_kind_of_path() {
    let known: BTreeMap<Module, String> = [
        ("", "mod a; fn main() { a::run(); }"),
        ("a", "use crate::{b::{self, X}, c::d::Y};\nuse super::Z;"),
        ("b", "fn f() { crate::a::g(); }"),
        ("c", ""),
        ("c::d", "use super::super::b;"),
        (
            "e",
            "use crate::c;\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
        ),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_owned(), without_tests(t)))
    .collect();
    let edges = graph(&known);
    let set = |ms: &[&str]| ms.iter().map(|m| (*m).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(edges[""], set(&["a"]));
    assert_eq!(edges["a"], set(&["", "b", "c::d"]));
    assert_eq!(edges["c::d"], set(&["b"]));
    assert_eq!(edges["e"], set(&["c"]));
    assert_eq!(cycle(&edges), Some(set_path(&["", "a", ""])));
    assert_eq!(
        cycle(&graph(
            &[
                ("x".to_owned(), "use crate::y;".to_owned()),
                ("y".to_owned(), String::new())
            ]
            .into_iter()
            .collect()
        )),
        None
    );
}

fn set_path(ms: &[&str]) -> Vec<Module> {
    ms.iter().map(|m| (*m).to_owned()).collect()
}
