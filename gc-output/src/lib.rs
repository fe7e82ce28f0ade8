//! What gc's plans, runs, restores and archives look like to people and scripts, as `gc-cli`
//! prints them: aligned tables ([`write_columns`], every cell [`escape`]d), kubectl's
//! `kind.group/NAME` ([`object_name`]), whole documents as JSON or YAML ([`write_doc`]) and the
//! Kestra flow's output line ([`pods::kestra_line`]). An embedder shows its runs with the same
//! functions: each writes to any [`Write`].

use std::io::{IsTerminal, Write};

pub mod archives;
pub mod pods;
pub mod sessions;

/// An instant in seconds as RFC 3339 (UTC, whole seconds).
pub use gc_core::isotime::format_timestamp as rfc3339;

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
