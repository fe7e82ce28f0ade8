//! The layout of `gc-cli/src` is an architecture: its modules import each other without a cycle,
//! and nothing imports the command line (`cli`) or the crate root (`main.rs`).
//!
//! The graph is read from the text: a module depends on every module named by a `crate::` or
//! `super::` path in it (grouped `use crate::{a, b::c}` included) and on each child module it
//! names by a relative path (`plan::run` in `pods.rs`). Each file's `#[cfg(test)] mod tests` is
//! left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path, `""` for the crate root.
type Module = String;

/// Every module of `src`, with its text (tests left out).
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_str().unwrap().to_owned())
                .collect();
            if parts.last().is_some_and(|l| l == "mod" || l == "main") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(parts.join("::"), without_tests(&text).to_owned());
        }
    }
    out
}

/// `text` up to its `#[cfg(test)] mod tests`.
fn without_tests(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "#[cfg(test)]" && text[at + line.len()..].trim_start().starts_with("mod ")
        {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow `prefix::` in `text`, groups expanded: `crate::{a, b::{c}}` gives
/// `a` and `b::c`.
fn paths_after(text: &str, prefix: &str) -> Vec<String> {
    let needle = format!("{prefix}::");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let start = from + i;
        from = start + needle.len();
        if text[..start].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        expand(&text[from..], String::new(), &mut out);
    }
    out
}

/// Reads one path (or group) at the start of `text`, appending full paths to `out`; returns how
/// many bytes it read.
fn expand(text: &str, base: String, out: &mut Vec<String>) -> usize {
    let skip = |i: usize| i + text[i..].len() - text[i..].trim_start().len();
    let mut path = base;
    let mut i = 0;
    loop {
        if text[i..].starts_with('{') {
            i += 1;
            loop {
                i = skip(i);
                if text[i..].starts_with('}') {
                    return i + 1;
                }
                let n = expand(&text[i..], path.clone(), out);
                if n == 0 {
                    return i;
                }
                i = skip(i + n);
                if text[i..].starts_with(',') {
                    i += 1;
                }
            }
        }
        let n = text[i..]
            .find(|c: char| !is_ident(c))
            .unwrap_or(text.len() - i);
        if n > 0 {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(&text[i..i + n]);
            i += n;
            if text[i..].starts_with("::") {
                i += 2;
                continue;
            }
        }
        out.push(path);
        return i;
    }
}

/// The longest module that `path` (from the crate root) starts with.
fn module_of(path: &str, known: &BTreeMap<Module, String>) -> Module {
    let parts: Vec<&str> = path.split("::").filter(|p| *p != "self").collect();
    (0..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| known.contains_key(m))
        .unwrap_or_default()
}

fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(p, _)| p)
}

/// `path` read from the module `base`: each leading `super` goes one module up.
fn join(base: &str, path: &str) -> String {
    let mut parts: Vec<&str> = base.split("::").filter(|p| !p.is_empty()).collect();
    for part in path.split("::") {
        if part == "super" {
            parts.pop();
        } else {
            parts.push(part);
        }
    }
    parts.join("::")
}

/// Who imports whom.
fn graph(known: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in known {
        let mut to = BTreeSet::new();
        for path in paths_after(text, "crate") {
            to.insert(module_of(&path, known));
        }
        for path in paths_after(text, "super") {
            to.insert(module_of(&join(parent(module), &path), known));
        }
        // Children named by a relative path (`plan::run` in `pods.rs`, `cli::Cli` in `main.rs`).
        for child in known
            .keys()
            .filter(|c| !c.is_empty() && parent(c) == module)
        {
            let name = child.rsplit("::").next().unwrap();
            if !paths_after(text, name).is_empty() {
                to.insert(child.clone());
            }
        }
        to.remove(module);
        edges.insert(module.clone(), to);
    }
    edges
}

/// A cycle of `edges`, if there is one.
fn cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        m: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        done: &mut BTreeSet<Module>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut found = stack[at..].to_vec();
            found.push(m.clone());
            return Some(found);
        }
        if !done.insert(m.clone()) {
            return None;
        }
        stack.push(m.clone());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(found) = visit(next, edges, done, stack) {
                return Some(found);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut done, &mut Vec::new()))
}

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

/// The reader itself, on small texts: groups, `self`, `super`, relative child paths, tests.
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
    .map(|(m, t)| (m.to_owned(), without_tests(t).to_owned()))
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
