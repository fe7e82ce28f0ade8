//! A crate's module graph read from its source text, for the tests that hold a crate's layout to
//! an architecture: gc-cli's modules import each other without a cycle, and no two files of
//! gc-core or gc-runtime import each other (no file circle).
//!
//! Each `.rs` file under `src` is a module: `a/b.rs` (or `a/b/mod.rs`) is `a::b`, `lib.rs` (or
//! `main.rs`) the root, `""`. A module depends on every module named by a `crate::`, `super::` or
//! `self::` path in it (grouped `use crate::{a, b::c}` included) and on each child module it names
//! by a relative path (`plan::run` in `pods.rs`). A path names the longest module it starts with:
//! `crate::a::b::Item` is `a::b` when `a/b.rs` is a file, else `a`. `super::` and `self::` are
//! read from the module they are written in, an inline `mod x { .. }` included.
//!
//! Only code is read: comments (doc comments and their links, `[`crate::x`]`, among them), string
//! and character literals are blanked first. Test code is left out, as tests may reach anywhere:
//! each item under `#[cfg(test)]` (`mod tests { .. }`, `mod tests;`, a test-only `fn` or `impl`)
//! and the files of the modules declared under it (`tests.rs`), with their children.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`pods::plan`), `""` for the root itself.
pub type Module = String;

/// Who imports whom: each module with the modules it names.
pub type Edges = BTreeMap<Module, BTreeSet<Module>>;

/// Who imports whom, each imported module with the first path that names it in the importer
/// (`crate::sessions::volumes::Kept`), to show why there is an edge.
pub type Imports = BTreeMap<Module, BTreeMap<Module, String>>;

/// Every module of `src` but the test-only ones, with its text, its test items left out.
pub fn modules(src: &Path) -> BTreeMap<Module, String> {
    sources(src)
        .into_iter()
        .map(|(module, (_, text))| (module, text))
        .collect()
}

/// Every module of `src` but the test-only ones: its file (relative to `src`) and its text, its
/// test items left out.
fn sources(src: &Path) -> BTreeMap<Module, (PathBuf, String)> {
    let mut all = BTreeMap::new();
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
            let relative = path.strip_prefix(src).unwrap().to_path_buf();
            let mut parts: Vec<String> = relative
                .with_extension("")
                .iter()
                .map(|p| p.to_str().unwrap().to_owned())
                .collect();
            if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
                parts.clear();
            } else if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            all.insert(parts.join("::"), (relative, text));
        }
    }
    all.iter()
        .filter(|(module, _)| !test_only(module, &all))
        .map(|(module, (file, text))| (module.clone(), (file.clone(), without_tests(text))))
        .collect()
}

/// Whether `module` is declared under `#[cfg(test)]`, or inside a module that is.
fn test_only(module: &str, all: &BTreeMap<Module, (PathBuf, String)>) -> bool {
    if module.is_empty() {
        return false;
    }
    let up = parent(module);
    if let Some((_, text)) = all.get(up) {
        let name = last(module);
        if declares(&code(text), name) && !declares(&code(&without_tests(text)), name) {
            return true;
        }
    }
    test_only(up, all)
}

/// Whether `code` declares the module `name` (`mod name;` or `mod name { .. }`).
fn declares(code: &str, name: &str) -> bool {
    words_at(code, "mod").into_iter().any(|at| {
        let rest = code[at + 3..].trim_start();
        rest.strip_prefix(name)
            .is_some_and(|after| !after.starts_with(is_ident))
    })
}

/// Where `word` stands in `code` as a word of its own (no identifier character either side).
fn words_at(code: &str, word: &str) -> Vec<usize> {
    code.match_indices(word)
        .map(|(at, _)| at)
        .filter(|&at| {
            !code[..at].ends_with(is_ident) && !code[at + word.len()..].starts_with(is_ident)
        })
        .collect()
}

/// `text` without its test items: each item under `#[cfg(test)]` (a `mod tests { .. }` or
/// `mod tests;`, a test-only `fn`, `impl`, `static` or statement), attribute included.
pub fn without_tests(text: &str) -> String {
    const TEST: &str = "#[cfg(test)]";
    let code = code(text);
    let mut out = String::with_capacity(text.len());
    let mut kept = 0;
    let mut from = 0;
    while let Some(i) = code[from..].find(TEST) {
        let start = from + i;
        let end = item_end(&code, start + TEST.len());
        out.push_str(&text[kept..start]);
        kept = end;
        from = end;
    }
    out.push_str(&text[kept..]);
    out
}

/// Where the item that starts at `from` in `code` ends: after its `;` or its `{ .. }` block, or
/// where the block around it closes.
fn item_end(code: &str, from: usize) -> usize {
    let b = code.as_bytes();
    let mut depth = 0usize;
    for (i, c) in b.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b';' if depth == 0 => return i + 1,
            b'{' if depth == 0 => return block_end(b, i),
            b'}' if depth == 0 => return i,
            _ => {}
        }
    }
    b.len()
}

/// Where the `{ .. }` block that opens at `open` ends (after its `}`).
fn block_end(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// `text` with its comments (doc comments included) and the insides of its string and character
/// literals blanked: each of their bytes a space, line ends kept, so that offsets stay the same.
pub fn code(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, range: Range<usize>| {
        for c in &mut out[range] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let before_ident = i > 0 && is_ident(char::from(b[i - 1]));
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i..end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                let mut j = i;
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i..j);
                i = j;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(b.len());
                blank(&mut out, i + 1..end);
                i = end + 1;
            }
            b'r' | b'b' if !before_ident => {
                // A raw string: `r"..."`, `r#"..."#`, `br"..."`.
                let mut j = i + 1;
                if b[i] == b'b' && b.get(j) == Some(&b'r') {
                    j += 1;
                } else if b[i] == b'b' {
                    i += 1;
                    continue;
                }
                let hashes = b[j..].iter().take_while(|c| **c == b'#').count();
                j += hashes;
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let end = text[j + 1..].find(&close).map_or(b.len(), |n| j + 1 + n);
                blank(&mut out, j + 1..end);
                i = (end + close.len()).min(b.len());
            }
            b'\'' => {
                // A character literal (`'"'`, `'\''`), or else a lifetime or label (`'a`).
                let mut chars = text[i + 1..].chars();
                let end = match chars.next() {
                    Some('\\') => text[i + 3..].find('\'').map(|n| i + 3 + n),
                    Some(c) if chars.next() == Some('\'') => Some(i + 1 + c.len_utf8()),
                    _ => None,
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i + 1..end);
                        i = end + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("whole characters blanked")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow `prefix::` in `text`, groups expanded: `crate::{a, b::{c}}` gives
/// `a` and `b::c`. A `prefix` that ends another path (`x::crate::`, `my_crate::`) is not one.
pub fn paths_after(text: &str, prefix: &str) -> Vec<String> {
    paths_at(text, prefix)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// [`paths_after`], each path with the offset of its `prefix`.
fn paths_at(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let needle = format!("{prefix}::");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let start = from + i;
        from = start + needle.len();
        if text[..start].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        let mut paths = Vec::new();
        expand(&text[from..], String::new(), &mut paths);
        out.extend(paths.into_iter().map(|path| (start, path)));
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

/// The longest module of `known` that `path` (from the crate root) starts with: `a::b::Item` is
/// `a::b` if that is a module, else `a`, else the root.
pub fn module_of(path: &str, known: &BTreeMap<Module, String>) -> Module {
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

fn last(module: &str) -> &str {
    module.rsplit("::").next().unwrap_or(module)
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

/// The inline modules of `code` (`mod shared { .. }`): each block with its name, outer first.
fn inline_modules(code: &str) -> Vec<(Range<usize>, String)> {
    words_at(code, "mod")
        .into_iter()
        .filter_map(|at| {
            let rest = code[at + 3..].trim_start();
            let n = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            let open = code.len() - rest[n..].trim_start().len();
            (n > 0 && code[open..].starts_with('{'))
                .then(|| (open..block_end(code.as_bytes(), open), rest[..n].to_owned()))
        })
        .collect()
}

/// The module that the code at `at` of `module`'s text is in (`ports::shared` inside
/// `mod shared { .. }` of `ports.rs`).
fn scope(module: &str, inline: &[(Range<usize>, String)], at: usize) -> String {
    inline
        .iter()
        .filter(|(block, _)| block.contains(&at))
        .fold(module.to_owned(), |outer, (_, name)| join(&outer, name))
}

/// Who imports whom among `known` (each module's text), with the path that makes each edge.
pub fn imports(known: &BTreeMap<Module, String>) -> Imports {
    let mut edges = Imports::new();
    for (module, text) in known {
        let code = code(text);
        let inline = inline_modules(&code);
        let mut to = BTreeMap::new();
        for (_, path) in paths_at(&code, "crate") {
            to.entry(module_of(&path, known))
                .or_insert_with(|| named("crate", &path));
        }
        for (at, path) in paths_at(&code, "super") {
            let here = scope(module, &inline, at);
            to.entry(module_of(&join(parent(&here), &path), known))
                .or_insert_with(|| named("super", &path));
        }
        for (at, path) in paths_at(&code, "self") {
            let here = scope(module, &inline, at);
            to.entry(module_of(&join(&here, &path), known))
                .or_insert_with(|| named("self", &path));
        }
        // Children named by a relative path (`plan::run` in `pods.rs`, `cli::Cli` in `main.rs`).
        for child in known
            .keys()
            .filter(|c| !c.is_empty() && parent(c) == module)
        {
            let name = last(child);
            if let Some((_, path)) = paths_at(&code, name).into_iter().next() {
                to.entry(child.clone())
                    .or_insert_with(|| named(name, &path));
            }
        }
        to.remove(module);
        edges.insert(module.clone(), to);
    }
    edges
}

/// `prefix::path` as written (`crate::pods::facts` for `crate::pods::{facts::{self, Basis}}`).
fn named(prefix: &str, path: &str) -> String {
    let path = path.strip_suffix("::self").unwrap_or(path);
    let path = if path == "self" { "" } else { path };
    if path.is_empty() {
        prefix.to_owned()
    } else {
        format!("{prefix}::{path}")
    }
}

/// Who imports whom among `known` (each module's text).
pub fn graph(known: &BTreeMap<Module, String>) -> Edges {
    edges(&imports(known))
}

fn edges(imports: &Imports) -> Edges {
    imports
        .iter()
        .map(|(m, to)| (m.clone(), to.keys().cloned().collect()))
        .collect()
}

/// A cycle of `edges`, if there is one: its modules in order, the first again at the end.
pub fn cycle(edges: &Edges) -> Option<Vec<Module>> {
    fn visit(
        m: &Module,
        edges: &Edges,
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

/// One of the shortest cycles of `edges`, if there is one: its modules in order, the first again
/// at the end.
pub fn shortest_cycle(edges: &Edges) -> Option<Vec<Module>> {
    let mut best: Option<Vec<Module>> = None;
    for start in edges.keys() {
        let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        'search: while let Some(m) = queue.pop_front() {
            for next in edges.get(m).into_iter().flatten() {
                if next == start {
                    let mut found = vec![start.clone()];
                    let mut at = m;
                    while at != start {
                        found.push(at.clone());
                        at = came_from[at];
                    }
                    found.push(start.clone());
                    found.reverse();
                    if best.as_ref().is_none_or(|b| found.len() < b.len()) {
                        best = Some(found);
                    }
                    break 'search;
                }
                if next != start && !came_from.contains_key(next) {
                    came_from.insert(next, m);
                    queue.push_back(next);
                }
            }
        }
    }
    best
}

/// Whether `outer` is `inner` or one of its ancestors (the root is everyone's).
pub fn contains(outer: &str, inner: &str) -> bool {
    outer.is_empty()
        || inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// `imports` between modules neither of which contains the other: a parent that re-exports its
/// child's items, or a child that uses `super::*`, is no edge of a file circle.
pub fn across(imports: &Imports) -> Imports {
    imports
        .iter()
        .map(|(m, to)| {
            let to = to
                .iter()
                .filter(|(t, _)| !contains(m, t) && !contains(t, m))
                .map(|(t, path)| (t.clone(), path.clone()))
                .collect();
            (m.clone(), to)
        })
        .collect()
}

/// A file circle among `known` (each module's text), if there is one: modules, neither of which
/// contains the other, that import each other directly or through a chain of such imports. One
/// of the shortest, its modules in order, the first again at the end.
pub fn file_circle_of(known: &BTreeMap<Module, String>) -> Option<Vec<Module>> {
    shortest_cycle(&edges(&across(&imports(known))))
}

/// A file circle of the crate whose sources are `src`, if there is one (one of the shortest): its
/// files in order (`src/sessions/run.rs -> src/sessions/volumes.rs -> src/sessions/run.rs`), then
/// on a line each the path by which one file imports the next.
pub fn file_circle(src: &Path) -> Option<String> {
    let sources = sources(src);
    let known: BTreeMap<Module, String> = sources
        .iter()
        .map(|(module, (_, text))| (module.clone(), text.clone()))
        .collect();
    let imports = across(&imports(&known));
    let circle = shortest_cycle(&edges(&imports))?;
    let folder = src.file_name().map_or(PathBuf::new(), PathBuf::from);
    let file = |module: &Module| {
        let parts: Vec<String> = folder
            .join(&sources[module].0)
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    };
    let mut out = circle.iter().map(file).collect::<Vec<_>>().join(" -> ");
    for step in circle.windows(2) {
        out.push_str(&format!(
            "\n  {} imports {} ({})",
            file(&step[0]),
            file(&step[1]),
            imports[&step[0]][&step[1]]
        ));
    }
    Some(out)
}
