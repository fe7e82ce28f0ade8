//! The text formats: several namespaces' expositions merged into one, OpenMetrics into
//! Prometheus' 0.0.4 format, and the metrics file that keeps the last successes (and the last
//! run's success through a stopped run).

use std::path::Path;

/// The help of `_last_success_timestamp_seconds`, as every earlier version pushed it (the
/// Pushgateway wants one help per name across its groups).
pub(super) const LAST_SUCCESS_HELP: &str = "When a run last succeeded";

/// The help of `_last_run_success`, as every earlier version pushed it.
pub(super) const LAST_RUN_SUCCESS_HELP: &str = "1 when the last run succeeded, 0 when it failed";

/// One exposition of several, each family's samples together (the text format wants every
/// family in one group): the families in the order of the first text, then the others' new ones.
/// A family's first `# HELP` and first `# TYPE` stand.
pub fn merge(texts: &[String]) -> String {
    let mut families: Vec<(String, Vec<&str>, Vec<&str>)> = Vec::new();
    for text in texts {
        let mut current: Option<usize> = None;
        for line in text.lines() {
            if line == "# EOF" {
                continue;
            }
            let directive = ["# HELP ", "# TYPE "]
                .into_iter()
                .find(|d| line.starts_with(d));
            if let Some(directive) = directive {
                let name = line[directive.len()..]
                    .split(' ')
                    .next()
                    .unwrap_or_default();
                let at = match families.iter().position(|(n, _, _)| n == name) {
                    Some(at) => at,
                    None => {
                        families.push((name.to_owned(), Vec::new(), Vec::new()));
                        families.len() - 1
                    }
                };
                if !families[at].1.iter().any(|h| h.starts_with(directive)) {
                    families[at].1.push(line);
                }
                current = Some(at);
            } else if line.starts_with('#') {
                if let Some(at) = current.filter(|at| !families[*at].1.contains(&line)) {
                    families[at].1.push(line);
                }
            } else if let Some(at) = current {
                families[at].2.push(line);
            }
        }
    }
    let mut out = String::new();
    for (_, header, samples) in families {
        for line in header.into_iter().chain(samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The OpenMetrics text `text` in Prometheus' text format 0.0.4, which the Pushgateway and
/// node-exporter's textfile collector read: a counter's family is named with its `_total`, and
/// there is no `# EOF` or `# UNIT` line. Samples are the same in both.
pub fn text_format(text: &str) -> String {
    let counters: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].into_iter().find_map(|directive| {
            let (name, rest) = line.strip_prefix(directive)?.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{directive}{name}_total {rest}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The labels of each sample of `family` in `text`, as written (without braces).
fn labels_of<'t>(text: &'t str, family: &str) -> Vec<&'t str> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(family)?.strip_prefix('{')?;
            Some(rest.split_once('}')?.0)
        })
        .collect()
}

/// `text` with samples of `previous` (an earlier file) that a run leaves out: the last success
/// of each collector and namespace `text` has none for (a failed run, or a namespace this run did
/// not cover), and the last run's success of each namespace `text` covers without one (a stopped
/// run). The file keeps what the Pushgateway keeps.
pub(super) fn keep_previous(previous: &str, text: &str, prefix: &str) -> String {
    let attempted = format!("{prefix}_last_attempt_timestamp_seconds");
    let covered = labels_of(text, &attempted);
    let mut blocks = vec![text.to_owned()];
    for (name, help, only_covered) in [
        ("last_success_timestamp_seconds", LAST_SUCCESS_HELP, false),
        ("last_run_success", LAST_RUN_SUCCESS_HELP, true),
    ] {
        let family = format!("{prefix}_{name}");
        let current = labels_of(text, &family);
        let kept: Vec<&str> = previous
            .lines()
            .filter(|line| {
                labels_of(line, &family)
                    .first()
                    .is_some_and(|l| !current.contains(l) && (!only_covered || covered.contains(l)))
            })
            .collect();
        if kept.is_empty() {
            continue;
        }
        let mut block = format!("# HELP {family} {help}.\n# TYPE {family} gauge\n");
        for line in kept {
            block.push_str(line);
            block.push('\n');
        }
        blocks.push(block);
    }
    if blocks.len() == 1 {
        return text.to_owned();
    }
    merge(&blocks)
}

/// Writes `text` to the metrics file (`--metrics-file` and the metrics' prefix), if given, in the
/// text format node-exporter reads, with what [`keep_previous`] keeps of the file as it was.
pub(super) fn write_metrics_file(file: Option<(&Path, &str)>, text: &str) -> crate::Result<()> {
    let Some((path, prefix)) = file else {
        return Ok(());
    };
    // Only a plain file is read back: a planted symlink is never followed.
    let previous = std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file())
        .then(|| std::fs::read_to_string(path).ok())
        .flatten()
        .unwrap_or_default();
    let text = keep_previous(&previous, text, prefix);
    crate::files::write_file(path, &text_format(&text))
}
