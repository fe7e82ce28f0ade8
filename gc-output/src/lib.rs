//! What gc's plans, runs, restores and archives look like to people and scripts, as `gc-cli`
//! prints them: aligned tables ([`write_columns`], every cell [`escape`]d), kubectl's
//! `kind.group/NAME` ([`object_name`]), whole documents as JSON or YAML ([`write_doc`]) and the
//! Kestra flow's output line ([`pods::kestra_line`]). An embedder shows its runs with the same
//! functions: each writes to any [`Write`].

use std::io::{IsTerminal, Write};

pub mod archives;
#[cfg(feature = "clap")]
pub mod help;
pub mod options;
#[cfg(feature = "clap")]
pub mod plugin;
pub mod pods;
pub mod sessions;

/// An instant in seconds as RFC 3339 (UTC, whole seconds).
pub use gc_core::isotime::format_timestamp as rfc3339;

/// An instant in seconds since the epoch as RFC 3339 in UTC, as kubectl prints times in `-o
/// json|yaml`: whole seconds, and the fraction when there is one (to the microsecond, trailing
/// zeros dropped: `2026-11-28T07:00:00.25Z`); a value that is not finite as it is.
#[must_use]
pub fn rfc3339_exact(seconds: f64) -> String {
    if !seconds.is_finite() {
        return seconds.to_string();
    }
    #[allow(clippy::cast_possible_truncation)]
    let micros = (seconds * 1e6).round() as i64;
    #[allow(clippy::cast_precision_loss)]
    let whole = rfc3339(micros.div_euclid(1_000_000) as f64);
    match micros.rem_euclid(1_000_000) {
        0 => whole,
        fraction => {
            let digits = format!("{fraction:06}");
            format!(
                "{}.{}Z",
                &whole[..whole.len() - 1],
                digits.trim_end_matches('0')
            )
        }
    }
}

/// `doc` as a document whose number at each of `paths` is written as an RFC 3339 instant
/// ([`rfc3339_exact`]), as kubectl shows times; its keys in their order. A path is keys joined
/// by `/`, `*` standing for each element of a list or each value of a map. What is not a finite
/// number there (absent, or a hold without end) stays as it is.
///
/// # Errors
/// When `doc` cannot be serialized.
pub fn times_as_rfc3339(
    doc: &(impl serde::Serialize + ?Sized),
    paths: &[&str],
) -> anyhow::Result<serde_norway::Value> {
    fn at(value: &mut serde_norway::Value, path: &[&str]) {
        use serde_norway::Value;
        match (path, value) {
            ([], value) => {
                if let Some(seconds) = value.as_f64().filter(|s| s.is_finite()) {
                    *value = Value::String(rfc3339_exact(seconds));
                }
            }
            (["*", rest @ ..], Value::Sequence(items)) => {
                items.iter_mut().for_each(|v| at(v, rest));
            }
            (["*", rest @ ..], Value::Mapping(map)) => map.values_mut().for_each(|v| at(v, rest)),
            ([key, rest @ ..], Value::Mapping(map)) => {
                if let Some(v) = map.get_mut(*key) {
                    at(v, rest);
                }
            }
            _ => {}
        }
    }
    let mut doc = serde_norway::to_value(doc)?;
    for path in paths {
        at(&mut doc, &path.split('/').collect::<Vec<_>>());
    }
    Ok(doc)
}

/// [`write_doc`] of `doc` with the times at `paths` as RFC 3339 ([`times_as_rfc3339`]).
///
/// # Errors
/// When `doc` cannot be serialized or `out` written.
pub fn write_timed_doc(
    out: &mut impl Write,
    doc: &(impl serde::Serialize + ?Sized),
    paths: &[&str],
    output: Output,
) -> anyhow::Result<()> {
    write_doc(out, &times_as_rfc3339(doc, paths)?, output)
}

/// `text` safe to print on a terminal, as `kubectl` escapes what objects carry (Pod status and
/// termination messages are written by the Pod's own code): ESC as `^[`; a carriage return, a
/// line break and a tab as `\r`, `\n`, `\t` (a table cell or a `show` field is one line); every
/// other control character and bidirectional-text override as `\u{..}`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\x1b' => out.push_str("^["),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// Writes `rows` under `header` in aligned columns, each cell [`escape`]d; nothing when there
/// is no row.
pub fn write_columns<const N: usize>(
    out: &mut impl Write,
    header: [&str; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| row.each_ref().map(|c| escape(c)))
        .collect();
    let rows = &rows[..];
    let header = header.map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

/// How a command prints what it found: `-o/--output`, as kubectl's (`--format` is the older
/// spelling). Each command accepts the forms that apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Output {
    /// Aligned columns for people (the default).
    Table,
    /// The table with more columns and rows where the command has more to show (`plan`: every
    /// object looked at, with its reason; `archives list`: each sha256; `archives verify`: the
    /// archives that match too); elsewhere the table.
    Wide,
    /// The whole document, as JSON.
    Json,
    /// The whole document, as YAML.
    Yaml,
    /// One `kind/name` line per object acted on (or that would be), as `kubectl -o name`.
    Name,
    /// One line `::{"outputs":{...}}::` as a Kestra script task emits it.
    Kestra,
}

/// Every form but `kestra`.
pub const FORMS: &[Output] = &[
    Output::Table,
    Output::Wide,
    Output::Json,
    Output::Yaml,
    Output::Name,
];

/// Every form, `kestra` included (`plan pods`).
pub const ALL_FORMS: &[Output] = &[
    Output::Table,
    Output::Wide,
    Output::Json,
    Output::Yaml,
    Output::Name,
    Output::Kestra,
];

/// Writes `doc` as `output` says: YAML for `yaml`, pretty JSON otherwise; a final newline.
pub fn write_doc(
    out: &mut impl Write,
    doc: &(impl serde::Serialize + ?Sized),
    output: Output,
) -> anyhow::Result<()> {
    if output == Output::Yaml {
        // Whole, then written: a write's error stays an I/O error ([`closed_pipe`]).
        out.write_all(serde_norway::to_string(doc)?.as_bytes())?;
    } else {
        serde_json::to_writer_pretty(&mut *out, doc)?;
        writeln!(out)?;
    }
    Ok(())
}

/// Whether `error` is a write to a closed pipe (`gc-cli ... | head`): the reader has what it
/// wanted, so the command stops without a message, as kubectl does.
pub fn closed_pipe(error: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == BrokenPipe)
            || e.downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(BrokenPipe))
    })
}

/// The forms of `version`: two lines for people, or the document as JSON or YAML.
pub const VERSION_FORMS: &[Output] = &[Output::Table, Output::Json, Output::Yaml];

/// What `version` prints: the program's version and the platform it was built for, as
/// `kubectl version --client` prints its own (`{"version": "0.1.0", "platform": "linux/x86_64"}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Version {
    /// The release, as the package says it (`0.1.0`).
    pub version: String,
    /// `OS/ARCH` of this build, as Rust names them.
    pub platform: String,
}

impl Version {
    /// The version `version` of this build.
    #[must_use]
    pub fn of(version: &str) -> Self {
        let platform = format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH);
        Self {
            version: version.to_owned(),
            platform,
        }
    }

    /// Writes it as `output` says: `Version: ...` and `Platform: ...` lines for `table`, else
    /// the document ([`write_doc`]).
    pub fn write(&self, out: &mut impl Write, output: Output) -> anyhow::Result<()> {
        match output {
            Output::Json | Output::Yaml => write_doc(out, self, output),
            _ => Ok(writeln!(
                out,
                "Version: {}\nPlatform: {}",
                self.version, self.platform
            )?),
        }
    }
}

/// `kind/name` as `kubectl -o name` prints it: the lowercase kind, then `.group` when the
/// object's API group is not the core one.
pub fn object_name(api_version: &str, kind: &str, name: &str) -> String {
    let kind = kind.to_ascii_lowercase();
    match api_version.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// How a live plan's listing goes (`listing: N pages, M pods`), on one line of a terminal's
/// stderr; silent when stderr is not a terminal.
#[derive(Debug)]
pub struct TerminalProgress {
    on: bool,
}

impl TerminalProgress {
    /// On when stderr is a terminal.
    #[must_use]
    pub fn new() -> Self {
        Self {
            on: std::io::stderr().is_terminal(),
        }
    }
}

impl gc_runtime::Progress for TerminalProgress {
    fn page(&self, pages: usize, pods: usize) {
        if self.on {
            let _ = write!(std::io::stderr(), "\rlisting: {pages} pages, {pods} pods");
        }
    }
    fn done(&self) {
        if self.on {
            let _ = writeln!(std::io::stderr());
        }
    }
}

impl Default for TerminalProgress {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert_eq!(escape("plain: ok, é"), "plain: ok, é");
        assert_eq!(escape("\x1b[2J\x1b]0;owned\x07"), "^[[2J^[]0;owned\\u{7}");
        assert_eq!(escape("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(escape("\u{9b}31m \u{202e}txt"), "\\u{9b}31m \\u{202e}txt");
        let mut table = Vec::new();
        let rows = [["\x1b[31mred".to_owned(), "x\ny".to_owned()]];
        write_columns(&mut table, ["A", "B"], &rows).unwrap();
        assert_eq!(
            String::from_utf8(table).unwrap(),
            "A          B\n^[[31mred  x\\ny\n"
        );
    }

    #[test]
    fn names_are_kubectls() {
        assert_eq!(object_name("v1", "Pod", "a"), "pod/a");
        assert_eq!(
            object_name("apps/v1", "Deployment", "d"),
            "deployment.apps/d"
        );
        assert_eq!(
            object_name("stream.space/v1alpha1", "Session", "s"),
            "session.stream.space/s"
        );
    }

    #[test]
    fn times_are_rfc3339_to_the_microsecond() {
        assert_eq!(rfc3339_exact(1_795_953_600.0), "2026-11-29T12:00:00Z");
        assert_eq!(rfc3339_exact(1_795_777_200.25), "2026-11-27T11:00:00.25Z");
        assert_eq!(rfc3339_exact(1_796_283_424.18), "2026-12-03T07:37:04.18Z");
        assert_eq!(
            rfc3339_exact(1_795_953_599.999_999_9),
            "2026-11-29T12:00:00Z"
        );
        assert_eq!(rfc3339_exact(-0.5), "1969-12-31T23:59:59.5Z");
        assert_eq!(rfc3339_exact(f64::INFINITY), "inf");
    }

    #[test]
    fn times_at_paths_become_rfc3339_and_nothing_else_does() {
        let doc = serde_json::json!({
            "now": 1_795_953_600.0,
            "count": 5,
            "items": [{"at": 1_795_953_600, "n": 1}, {"at": null}, {"n": 2}, {"at": f64::INFINITY}],
            "ledger": {"u1": {"first": 1_795_777_200.25, "name": "a"}},
        });
        let paths = ["now", "items/*/at", "ledger/*/first", "missing/*/x"];
        let mut json = Vec::new();
        write_timed_doc(&mut json, &doc, &paths, Output::Json).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            serde_json::json!({
                "now": "2026-11-29T12:00:00Z",
                "count": 5,
                "items": [{"at": "2026-11-29T12:00:00Z", "n": 1}, {"at": null}, {"n": 2}, {"at": null}],
                "ledger": {"u1": {"first": "2026-11-27T11:00:00.25Z", "name": "a"}},
            })
        );
        // The keys keep the order the document has.
        #[derive(serde::Serialize)]
        struct Doc {
            z: u8,
            now: f64,
            a: u8,
        }
        let mut yaml = Vec::new();
        let doc = Doc {
            z: 1,
            now: 0.0,
            a: 2,
        };
        write_timed_doc(&mut yaml, &doc, &["now"], Output::Yaml).unwrap();
        assert_eq!(
            String::from_utf8(yaml).unwrap(),
            "z: 1\nnow: 1970-01-01T00:00:00Z\na: 2\n"
        );
    }

    #[test]
    fn yaml_and_json_carry_the_same_document() {
        let doc = serde_json::json!({"a": [1, 2], "b": {"c": "d"}});
        let mut json = Vec::new();
        write_doc(&mut json, &doc, Output::Json).unwrap();
        let mut yaml = Vec::new();
        write_doc(&mut yaml, &doc, Output::Yaml).unwrap();
        let back: serde_json::Value = serde_norway::from_slice(&yaml).unwrap();
        assert_eq!(back, doc);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            doc
        );
    }
}
