//! What `gc-cli --help` teaches beyond each flag's own text, as kubectl's help does: flags grouped
//! under headings (Connection, Output, Logging, Safety, ...) and an `Examples:` section ending
//! every command's help ([`teach`]). The examples are `help/examples.txt`.

/// Every command's examples: `[plan pods]` starts those of `gc-cli plan pods`; each is a `#` line
/// saying what it does, then the command.
pub const EXAMPLES: &str = include_str!("help/examples.txt");

/// The headings flags are grouped under, each with its flags (long names); any other flag stays
/// under `Options` (what to collect, and how much).
pub const HEADINGS: &[(&str, &[&str])] = &[
    (
        "Namespaces",
        &[
            "namespace",
            "all-namespaces",
            "namespace-selector",
            "exclude-namespace",
        ],
    ),
    (
        "Safety",
        &[
            "dry-run",
            "auto-remediate",
            "protect-label",
            "exclude-selector",
            "max-deletes",
            "guard-ratio",
            "guard-floor",
            "override-guard",
            "seal-key-file",
        ],
    ),
    (
        "Connection",
        &[
            "kubeconfig",
            "context",
            "in-cluster",
            "api-url",
            "token-file",
            "ca-cert-data",
            "trust-certs",
            "api-timeout",
        ],
    ),
    (
        "Session database",
        &[
            "database-url",
            "table",
            "id-column",
            "state-column",
            "scope-column",
        ],
    ),
    (
        "Store and archives",
        &[
            "store",
            "store-timeout",
            "archive-dir",
            "archive-url",
            "archive-endpoint",
            "archive-region",
            "archive-credentials-file",
        ],
    ),
    ("Run lock", &["lock-wait", "lock-lease"]),
    (
        "Metrics, alerts and Events",
        &[
            "pushgateway",
            "metrics-file",
            "metrics-prefix",
            "alert-webhook",
            "alert-format",
            "alert-on-success",
            "no-events",
        ],
    ),
    ("Output", &["output", "audit-log"]),
    ("Logging", &["log-format", "verbose", "quiet"]),
];

/// The examples of the command `path` (`gc-cli`, `plan pods`, ...), as its help shows them:
/// under `Examples:`, each line indented two spaces; `None` when it has none.
#[must_use]
pub fn examples(path: &str) -> Option<String> {
    let mut lines = EXAMPLES.lines().skip_while(|l| *l != format!("[{path}]"));
    lines.next()?;
    let body: Vec<String> = lines
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("  {l}"))
        .collect();
    Some(format!("Examples:\n{}", body.join("\n")))
}

/// `command` with its flags under [`HEADINGS`] and its examples ([`examples`]) ending its help,
/// and so each of its subcommands.
#[must_use]
pub fn teach(command: clap::Command) -> clap::Command {
    teach_at(command, None)
}

fn teach_at(mut command: clap::Command, parent: Option<&str>) -> clap::Command {
    let path = match parent {
        None => command.get_name().to_owned(),
        Some("gc-cli") => command.get_name().to_owned(),
        Some(parent) => format!("{parent} {}", command.get_name()),
    };
    let ids: Vec<(clap::Id, &'static str)> = command
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let (heading, _) = HEADINGS.iter().find(|(_, flags)| flags.contains(&long))?;
            Some((a.get_id().clone(), *heading))
        })
        .collect();
    for (id, heading) in ids {
        command = command.mut_arg(id, |a| a.help_heading(heading));
    }
    if let Some(text) = examples(&path) {
        command = command.after_help(text);
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |c| teach_at(c, Some(&path)));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_found_by_command() {
        let text = examples("version").unwrap();
        assert_eq!(
            text,
            "Examples:\n  # The release and the platform\n  gc-cli version\n  # As JSON, as \
             `kubectl version --client -o json`\n  gc-cli version -o json"
        );
        assert!(
            examples("plan pods")
                .unwrap()
                .contains("gc-cli plan pods --inventory")
        );
        assert_eq!(examples("no such command"), None);
    }

    #[test]
    fn every_flag_has_one_heading() {
        let mut seen = std::collections::BTreeSet::new();
        for (_, flags) in HEADINGS {
            for flag in *flags {
                assert!(seen.insert(flag), "{flag} twice");
            }
        }
    }
}
