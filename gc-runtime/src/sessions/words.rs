//! The session collector's words: what a run says of itself in its log and one-line summary,
//! and the order its tables list decisions in.

use gc_core::sessions::{Kind, SessionDecision};

/// Says once, for every namespace of a run, which of `kinds` the API server does not serve
/// (`missing`, as `group/version Kind`): a warning, or a debug note when the same Kind is served
/// under another group of `kinds` (StreamSpace installs its `Session` definition under one of
/// two groups, so the other is not installed).
pub fn report_missing<'a>(missing: impl IntoIterator<Item = &'a String>, kinds: &[Kind]) {
    let missing: std::collections::BTreeSet<&String> = missing.into_iter().collect();
    let named = |k: &Kind| format!("{}/{} {}", k.group, k.version, k.kind);
    for entry in &missing {
        let kind = entry.rsplit(' ').next().unwrap_or(entry);
        let served = kinds
            .iter()
            .any(|k| k.kind == kind && !missing.contains(&named(k)));
        if served {
            // The usual case with StreamSpace (one group of two installed): said at `-vv` only.
            tracing::debug!(
                "{entry} is not installed: {kind} objects are scanned in its other group"
            );
        } else {
            tracing::warn!(
                "{entry} is not served by the API server (definition not installed); not scanned"
            );
        }
    }
}

/// Decisions in the order a table lists them; kept resources and the orphans a request did not
/// ask for (ranks 4 and up) are only counted. Protected and excluded resources rank with the
/// skipped ones (the table names them apart).
#[must_use]
pub fn rank(d: &SessionDecision) -> usize {
    match d {
        SessionDecision::Delete { .. } => 0,
        SessionDecision::Deferred { .. } => 1,
        SessionDecision::Held { .. } => 2,
        SessionDecision::Skipped { .. } => 3,
        SessionDecision::Kept { .. } => 4,
        SessionDecision::Unrequested { .. } => 5,
    }
}

/// How many of each decision, by [`rank`].
pub type Ranked = [usize; 6];

/// `, N not requested` when a request left orphans of other sessions (none: nothing).
#[must_use]
pub fn unrequested_words(counts: &Ranked) -> String {
    match counts[5] {
        0 => String::new(),
        n => format!(", {n} not requested"),
    }
}

/// Says, once, which rows are in a state the settings call neither live nor gone (their
/// resources are kept): a state the application added is noticed, not silently kept.
pub fn report_unknown_states(namespace: &str, states: &std::collections::BTreeMap<String, usize>) {
    if states.is_empty() {
        return;
    }
    let sessions: usize = states.values().sum();
    let listed: Vec<String> = states.iter().map(|(s, n)| format!("{s} ({n})")).collect();
    tracing::warn!(
        "{sessions} session(s) in namespace {namespace} have a state that is neither live nor \
         gone: {}; their resources are kept. Name each state in `live_states` or \
         `terminal_states`",
        listed.join(", ")
    );
}

/// `n database round trip(s)`.
#[must_use]
pub fn round_trips(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} database round trip{s}")
}
