//! What `gc-cli --help` teaches beyond each flag's own text, as kubectl's help does: flags grouped
//! under headings (Connection, Output, Logging, Safety, ...) and an `Examples:` section ending
//! every command's help ([`teach`]). The examples are `help/examples.txt`.
//!
//! `-h` is the short help: one line a flag, each flag's one-line summary ([`SUMMARIES`], in
//! `help/short.rs`) where its whole text is longer than [`SHORT`] characters, a command's one-line
//! about ([`ABOUTS`]) where its own is longer than [`ONE_LINE`], and the flags set once for an
//! install (the connection, the store and archives, metrics, alerts, Events and logging:
//! [`LONG_ONLY`]) left to `--help`, as kubectl leaves its global flags to `kubectl options`.
//! `--help` shows every flag and about with its whole text, as the man pages do.

mod short;

pub use short::{ABOUTS, SUMMARIES};

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

/// The longest help `-h` shows whole, in characters; a flag's longer help is summed up in
/// [`SUMMARIES`].
pub const SHORT: usize = 80;

/// The longest about of a command `-h` and `Commands:` show whole, in characters (a line of
/// clap's 100 columns); a longer one is summed up in [`ABOUTS`].
pub const ONE_LINE: usize = 100;

/// The headings whose flags only `--help` lists, as kubectl's help leaves its global flags to
/// `kubectl options`: how gc connects, keeps its receipts and archives, reports and logs, each
/// set once for an install. Each with the command groups whose `-h` lists them too: `archives`,
/// `ledger` and `restore` read back what the store keeps.
pub const LONG_ONLY: &[(&str, &[&str])] = &[
    ("Connection", &[]),
    ("Store and archives", &["archives", "ledger", "restore"]),
    ("Metrics, alerts and Events", &[]),
    ("Logging", &[]),
];

/// The flags (command, flag) whose help gc-cli ends, after [`teach`], with the namespace the
/// kubeconfig context names now (the failed-Pod commands' `-n`), in `-h` and `--help` alike:
/// their `-h` line is their summary and that.
pub const WHOLE: &[(&str, &str)] = &[
    ("apply", "--namespace"),
    ("plan pods", "--namespace"),
    ("run pods", "--namespace"),
    ("serve pods", "--namespace"),
];

/// The one-line summary `-h` shows of `flag` (`--store`, or a positional's `<VALUE>`) in the
/// command `path` (`run sessions`): its row for `path` in [`SUMMARIES`], else its row for every
/// command.
#[must_use]
pub fn summary(path: &str, flag: &str) -> Option<&'static str> {
    let rows = || SUMMARIES.iter().filter(|(f, _, _)| *f == flag);
    rows()
        .find(|(_, commands, _)| commands.contains(&path))
        .or_else(|| rows().find(|(_, commands, _)| commands.is_empty()))
        .map(|(_, _, summary)| *summary)
}

/// How [`SUMMARIES`] names `arg`: `--LONG`, else `<VALUE>` as the usage shows it.
fn flag(arg: &clap::Arg) -> String {
    match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => match arg.get_value_names().and_then(|names| names.first()) {
            Some(name) => format!("<{name}>"),
            None => format!("<{}>", arg.get_id().as_str().to_uppercase()),
        },
    }
}

/// Whether `-h` of the command `path` leaves the flags under `heading` to `--help`.
fn long_only(path: &str, heading: &str) -> bool {
    let group = path.split(' ').next().unwrap_or_default();
    LONG_ONLY
        .iter()
        .any(|(h, shown)| *h == heading && !shown.contains(&group))
}

/// `-h`'s last line where it leaves the flags under `headings` to `--help`, in [`LONG_ONLY`]'s
/// order: `Use --help for every flag in full, and for those under Connection; Logging.`
fn long_only_line(headings: &[&str]) -> Option<String> {
    let named: Vec<&str> = LONG_ONLY
        .iter()
        .map(|(heading, _)| *heading)
        .filter(|heading| headings.contains(heading))
        .collect();
    if named.is_empty() {
        return None;
    }
    Some(format!(
        "Use --help for every flag in full, and for those under {}.",
        named.join("; ")
    ))
}

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

/// `command` with its flags under [`HEADINGS`], a short `-h` and a whole `--help`, and its
/// examples ([`examples`]) ending both, and so each of its subcommands. `-h` shows one line a
/// flag: a help longer than [`SHORT`] characters its summary ([`summary`]; `--help` the whole
/// text), the flags under [`LONG_ONLY`] left out, and no flag's help moved to a line of its own.
#[must_use]
pub fn teach(command: clap::Command) -> clap::Command {
    teach_at(command, None, &[])
}

/// [`teach`] of `command`, a subcommand of `parent` (its path) whose global flags `-h` leaves to
/// `--help` are under `inherited` headings.
fn teach_at(
    mut command: clap::Command,
    parent: Option<&str>,
    inherited: &[&'static str],
) -> clap::Command {
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
    // The headings `-h` leaves out here: those of the flags below, and of the global flags above.
    let mut left_out = inherited.to_vec();
    let mut global = inherited.to_vec();
    for (id, heading) in ids {
        let hidden = long_only(&path, heading);
        if hidden {
            left_out.push(heading);
            if command
                .get_arguments()
                .any(|a| *a.get_id() == id && a.is_global_set())
            {
                global.push(heading);
            }
        }
        command = command.mut_arg(id, |a| a.help_heading(heading).hide_short_help(hidden));
    }
    let summed: Vec<(clap::Id, &'static str)> = command
        .get_arguments()
        .filter_map(|a| {
            let flag = flag(a);
            let help = a.get_help()?.to_string();
            if help.chars().count() <= SHORT {
                return None;
            }
            Some((a.get_id().clone(), summary(&path, &flag)?))
        })
        .collect();
    for (id, summary) in summed {
        command = command.mut_arg(id, |a| {
            let whole = a
                .get_long_help()
                .or(a.get_help())
                .cloned()
                .unwrap_or_default();
            a.long_help(whole).help(summary)
        });
    }
    if let Some((_, about)) = ABOUTS.iter().find(|(p, _)| *p == path)
        && command
            .get_about()
            .is_some_and(|a| a.to_string().chars().count() > ONE_LINE)
    {
        let whole = command
            .get_long_about()
            .or(command.get_about())
            .cloned()
            .unwrap_or_default();
        command = command.about(*about).long_about(whole);
    }
    // One line a flag in `-h`: clap moves every help of a heading under its flag when the
    // flags' column is over 40% of the width and one help does not fit beside it.
    command = command.term_width(0);
    let examples = examples(&path);
    match long_only_line(&left_out) {
        Some(line) => {
            let short = match &examples {
                Some(text) => format!("{text}\n\n{line}"),
                None => line,
            };
            command = command.after_help(short);
            if let Some(text) = examples {
                command = command.after_long_help(text);
            }
        }
        None => {
            if let Some(text) = examples {
                command = command.after_help(text);
            }
        }
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |c| teach_at(c, Some(&path), &global));
    }
    command
}

/// `command` with the namespace the kubeconfig context names (as `--kubeconfig`/`--context`
/// absent would take it) in the help of each failed-Pod command's `-n`.
#[must_use]
pub fn with_context_namespace(command: clap::Command) -> clap::Command {
    use gc_runtime::adapters::{Connection, context_namespace};
    let now = match context_namespace(&Connection::default()) {
        Some((namespace, origin)) => format!("Now: `{namespace}`, from {origin}."),
        None => "Now: `default` (the kubeconfig context names none).".to_owned(),
    };
    with_now(command, &now)
}

/// `command` with `now` (which namespace `-n` takes now, and from where) after the help of each
/// failed-Pod command's `-n`.
#[must_use]
pub fn with_now(command: clap::Command, now: &str) -> clap::Command {
    let annotate = |c: clap::Command| {
        c.mut_arg("namespaces", |arg| {
            let said = |h: Option<&clap::builder::StyledStr>| h.map(|h| format!("{h}. {now}"));
            let (help, long) = (said(arg.get_help()), said(arg.get_long_help()));
            let arg = arg.help(help.unwrap_or_default());
            match long {
                Some(long) => arg.long_help(long),
                None => arg,
            }
        })
    };
    let annotate_pods = |c: clap::Command| c.mut_subcommand("pods", annotate);
    command
        .mut_subcommand("plan", annotate_pods)
        .mut_subcommand("run", annotate_pods)
        .mut_subcommand("serve", annotate_pods)
        .mut_subcommand("apply", annotate)
}

/// The completion script of `command` (`gc-cli`) for `shell`, each flag described by its
/// one-line summary.
#[must_use]
pub fn completion(command: clap::Command, shell: clap_complete::Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut teach(command), "gc-cli", &mut script);
    // clap_complete names a hyphenated binary's states two ways in bash (`gc__cli`,
    // `gc__subcmd__cli`), so nothing past the first word completes: one name.
    String::from_utf8_lossy(&script).replace("gc__subcmd__cli", "gc__cli")
}

/// The man page of `command` on stdout, or of every command into `dir`.
///
/// # Errors
/// When it cannot be written.
pub fn man(command: clap::Command, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let Some(dir) = dir else {
        let page = clap_mangen::Man::new(teach(command));
        return page
            .render(&mut std::io::stdout())
            .context("cannot write the man page");
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(teach(command), dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))
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
    fn summaries_are_short_lines_each_named_once() {
        let mut seen = std::collections::BTreeSet::new();
        for (flag, commands, summary) in SUMMARIES {
            assert!(
                summary.chars().count() <= SHORT && !summary.contains('\n'),
                "{flag}: {summary}"
            );
            // `...` goes on to the next flag's line, as `--guard-ratio`'s to `--guard-floor`'s.
            assert!(
                !summary.ends_with('.') || summary.ends_with("..."),
                "{flag}: {summary}"
            );
            assert!(flag.starts_with("--") || flag.starts_with('<'), "{flag}");
            if commands.is_empty() {
                assert!(seen.insert((*flag, "")), "{flag} for every command twice");
            }
            for command in *commands {
                assert!(seen.insert((*flag, *command)), "{flag} of {command} twice");
            }
        }
        for (command, flag) in WHOLE {
            assert!(summary(command, flag).is_some(), "{command} {flag}");
        }
    }

    #[test]
    fn abouts_are_short_lines_each_named_once() {
        let mut seen = std::collections::BTreeSet::new();
        for (command, about) in ABOUTS {
            assert!(about.chars().count() <= SHORT, "{command}: {about}");
            assert!(!about.ends_with('.'), "{command}: {about}");
            assert!(seen.insert(command), "{command} twice");
        }
    }

    #[test]
    fn a_summary_is_the_commands_own_else_every_commands() {
        assert_eq!(
            summary("archives prune", "--dry-run"),
            Some("`server` (the default): list what would be removed; `none` removes")
        );
        assert!(
            summary("restore sessions", "--dry-run")
                .unwrap()
                .contains("`none` (the default)")
        );
        assert_eq!(summary("ledger export", "--dry-run"), None);
        assert_eq!(
            summary("run sessions", "--volume-retention"),
            Some("How long a deleted claim's volume is kept (`7d`, `2w`; 0: not kept)")
        );
        assert_eq!(
            summary("serve sessions", "--no-events"),
            summary("apply", "--no-events")
        );
    }

    #[test]
    fn h_ends_naming_what_it_leaves_to_help() {
        assert_eq!(long_only_line(&[]), None);
        assert_eq!(
            long_only_line(&["Logging"]).unwrap(),
            "Use --help for every flag in full, and for those under Logging."
        );
        assert_eq!(
            long_only_line(&[
                "Logging",
                "Connection",
                "Metrics, alerts and Events",
                "Logging"
            ])
            .unwrap(),
            "Use --help for every flag in full, and for those under Connection; Metrics, alerts \
             and Events; Logging."
        );
        assert!(long_only("run sessions", "Store and archives"));
        assert!(!long_only("archives list", "Store and archives"));
        assert!(long_only("archives list", "Connection"));
        assert!(!long_only("run sessions", "Safety"));
    }

    #[test]
    fn teach_sums_up_long_help_in_h_and_keeps_it_whole_in_help() {
        let long = "A very long help, ".repeat(8);
        let verbose = clap::Arg::new("verbose").long("verbose").global(true);
        let command = clap::Command::new("gc-cli")
            .arg(verbose.help(long.clone()))
            .subcommand(
                clap::Command::new("archives").subcommand(
                    clap::Command::new("prune")
                        .arg(clap::Arg::new("dry-run").long("dry-run").help(long.clone()))
                        .arg(clap::Arg::new("short").long("short").help("Short enough")),
                ),
            );
        let mut command = teach(command);
        command.build();
        let prune = command
            .find_subcommand_mut("archives")
            .unwrap()
            .find_subcommand_mut("prune")
            .unwrap();
        let short = prune.render_help().to_string();
        let whole = prune.render_long_help().to_string();
        assert!(
            short.contains(
                "--dry-run <dry-run>  `server` (the default): list what would be removed"
            ),
            "{short}"
        );
        assert!(short.contains("--short <short>  Short enough"), "{short}");
        assert!(
            !short.contains("--verbose") && !short.contains(&long),
            "{short}"
        );
        assert!(
            short.trim_end().ends_with("and for those under Logging."),
            "{short}"
        );
        assert!(
            whole.contains(&long) && whole.contains("--verbose"),
            "{whole}"
        );
        assert!(!whole.contains("Use --help"), "{whole}");
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
