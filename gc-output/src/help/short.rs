//! The one-line help `-h` shows of each flag whose whole text is longer than
//! [`super::SHORT`] characters; `--help` shows the whole text.

/// `(flag, commands, summary)`: the summary `-h` shows of `flag` (`--volume-retention`, or a
/// positional's `<VALUE>`) in each of `commands` (`run sessions`, `archives prune`, ...), or, with
/// no commands named, in every command no other row names. A flag whose meaning differs between
/// commands (`--dry-run`'s default, what `--store` holds) has a row for each meaning.
pub const SUMMARIES: &[(&str, &[&str], &str)] = &[
    // What the failed-Pod collector works on.
    (
        "--inventory",
        &[],
        "A Pod inventory (`kubectl get pods -o json`; `-`: stdin) instead of the cluster",
    ),
    (
        "--ledger",
        &["apply"],
        "An observation ledger kept outside the store (the plan's `--ledger-out` file)",
    ),
    (
        "--ledger",
        &["plan pods", "run pods", "serve pods"],
        "Previous observation ledger file, `{uid: {first, name}}`, instead of the store's",
    ),
    (
        "--retention",
        &[],
        "Minimum hold of a failed Pod (`1d`, `12h`, `90m`; a bare number is seconds)",
    ),
    (
        "--now",
        &[],
        "The instant to plan for (RFC 3339); default now",
    ),
    (
        "--ttl",
        &[],
        "How long a plan written with `--out` stays valid (1s..=24h)",
    ),
    // What the session collector works on.
    (
        "--selector",
        &[],
        "Label selector choosing session resources, sent to the API server",
    ),
    (
        "--id-label",
        &[],
        "Label holding the session id (matched exactly: case-sensitive, byte for byte)",
    ),
    (
        "--kinds",
        &["plan sessions", "run sessions", "serve sessions", "console"],
        "Kinds scanned, comma separated or repeated (default: StreamSpace's)",
    ),
    (
        "--kinds",
        &["restore sessions"],
        "The kinds archived objects may be of (default: StreamSpace's)",
    ),
    (
        "--grace",
        &[],
        "Orphans younger than this are held (`24h`, `2d`; a bare number is hours)",
    ),
    (
        "--terminal-state",
        &[],
        "A database state that counts as gone, like a missing row (repeatable)",
    ),
    (
        "--live-state",
        &[],
        "A database state known to be live (repeatable); rows in unlisted states are kept",
    ),
    (
        "--volume-retention",
        &["plan sessions", "run sessions", "serve sessions", "console"],
        "How long a deleted claim's volume is kept (`7d`, `2w`; 0: not kept)",
    ),
    (
        "--volume-retention",
        &["archives prune"],
        "How long a receipt naming a kept volume stays past its run (whole days)",
    ),
    (
        "--bind-wait",
        &[],
        "Wait this long for a restored claim to bind, to give its volume its policy back",
    ),
    (
        "--kind",
        &[],
        "Only archives of this kind (`Pod`, `Deployment`, `Service`, ..., any case)",
    ),
    (
        "<UID|KIND/NAME>",
        &[],
        "The archived object's uid, or `KIND/NAME` with `-n` (its newest archive)",
    ),
    // How a run goes.
    (
        "--concurrency",
        &[],
        "Objects (or Pods) a run works on at once (1..=64)",
    ),
    (
        "--event-per-object",
        &[],
        "One Event on each session object deleted instead of one on each session",
    ),
    // Namespaces.
    (
        "--namespace",
        &["apply", "plan pods", "run pods", "serve pods"],
        "A namespace to work in; repeat for several (default: the kubeconfig context's)",
    ),
    (
        "--namespace",
        &["plan sessions", "run sessions", "serve sessions", "console"],
        "A namespace to work in; repeat for several (default: `streamspace`)",
    ),
    (
        "--all-namespaces",
        &[],
        "Every namespace the identity may list but system ones (needs `list` on them)",
    ),
    (
        "--namespace-selector",
        &[],
        "With `-A`: only namespaces whose labels match this selector",
    ),
    // Safety.
    (
        "--guard-ratio",
        &[],
        "The guard refuses a run when sessions that look gone are more than this share...",
    ),
    (
        "--guard-floor",
        &[],
        "...and their resources more than this many (or no judged id has a row at all)",
    ),
    (
        "--override-guard",
        &[],
        "Delete even when the guard would refuse (after checking the database is right)",
    ),
    (
        "--protect-label",
        &["apply", "plan pods", "run pods", "serve pods"],
        "A Pod with this label is never archived or deleted; a sealed plan binds it",
    ),
    (
        "--protect-label",
        &["plan sessions", "run sessions", "serve sessions", "console"],
        "A resource with this label is never deleted, nor counted by the guard",
    ),
    (
        "--exclude-selector",
        &["apply", "plan pods", "run pods", "serve pods"],
        "A selector whose Pods are never archived or deleted; a sealed plan binds it",
    ),
    (
        "--exclude-selector",
        &["plan sessions", "run sessions", "serve sessions", "console"],
        "A label selector whose resources are never deleted, nor counted by the guard",
    ),
    (
        "--seal-key-file",
        &[],
        "File holding the plan seal key (HMAC-SHA256, or `$GC_SEAL_KEY`)",
    ),
    (
        "--dry-run",
        &["run pods", "serve pods"],
        "`server` (the default): writes as dry runs; `none` acts, with `--auto-remediate`",
    ),
    (
        "--dry-run",
        &["run sessions", "serve sessions", "console"],
        "`server` (the default): every delete a server-side dry run; `none` deletes",
    ),
    (
        "--dry-run",
        &["apply"],
        "`server`: every write a dry run, no archive written; `none` (the default) acts",
    ),
    (
        "--dry-run",
        &["restore sessions"],
        "`server`: every create a server-side dry run; `none` (the default) creates",
    ),
    (
        "--dry-run",
        &["archives prune"],
        "`server` (the default): list what would be removed; `none` removes",
    ),
    // The session database.
    (
        "--database-url",
        &[],
        "The session database, `postgres://...` (default: from StreamSpace's `DB_*`)",
    ),
    (
        "--scope-column",
        &[],
        "Only rows whose COLUMN holds VALUE are this cluster's sessions (repeatable)",
    ),
    // gc's store and the archives.
    (
        "--store",
        &["apply"],
        "The store for receipts and the ledger: `sqlite:PATH`, a path or `postgres://...`",
    ),
    (
        "--store",
        &["plan pods", "run pods", "serve pods"],
        "The store for the ledger and receipts (default: the embedded SQLite file)",
    ),
    (
        "--store",
        &[
            "archives list",
            "archives prune",
            "archives show",
            "archives verify",
        ],
        "The store holding the receipts (default: the embedded SQLite file)",
    ),
    (
        "--store",
        &["ledger export", "ledger import"],
        "The store: `sqlite:PATH`, a path or `postgres://...` (default: embedded SQLite)",
    ),
    (
        "--store",
        &["run sessions", "serve sessions"],
        "gc's store, for the receipts of the archives (never the session database)",
    ),
    (
        "--store",
        &["restore sessions"],
        "gc's store, holding the receipts (default: the embedded SQLite file)",
    ),
    (
        "--store-timeout",
        &[],
        "How long a call to gc's store may wait for its answer",
    ),
    (
        "--archive-url",
        &[],
        "An object store for the archives instead of a folder: `s3://BUCKET[/PREFIX]`",
    ),
    (
        "--archive-endpoint",
        &[],
        "The object store's endpoint (default: `$AWS_ENDPOINT_URL`, else AWS)",
    ),
    (
        "--archive-credentials-file",
        &[],
        "An AWS shared-credentials file for the object store",
    ),
    // The run lock.
    (
        "--lock-wait",
        &[],
        "How long to wait for another run on the same namespace to finish",
    ),
    (
        "--lock-lease",
        &[],
        "The run lock's lease, renewed while the run works (5s..=5m)",
    ),
    // Output.
    (
        "--output",
        &["run sessions", "serve sessions", "console"],
        "Print the run as FORMAT on stdout; without it, stdout carries the audit lines",
    ),
    (
        "--store",
        &["console"],
        "gc's store of receipts (default: the embedded SQLite file)",
    ),
    (
        "--pods-namespace",
        &["console"],
        "A namespace whose failed Pods to plan and approve (repeatable)",
    ),
    (
        "--listen",
        &["console"],
        "The loopback address to serve on; the link to open is printed on stderr",
    ),
    (
        "--audit-log",
        &["console"],
        "Append the audit lines of what is done here to this file, not to stdout",
    ),
    (
        "--audit-log",
        &[],
        "Append the audit lines to this file, not to stdout (stderr with `-o`)",
    ),
    // Metrics, alerts and Events.
    (
        "--pushgateway",
        &[],
        "Push the run's metrics to this Pushgateway (a failed push is never fatal)",
    ),
    (
        "--metrics-file",
        &[],
        "Write the run's metrics to this file (text format)",
    ),
    (
        "--metrics-prefix",
        &[],
        "Prefix of every metric name (`streamspace` fits StreamSpace's alert rules)",
    ),
    (
        "--alert-webhook",
        &[],
        "Post an alert to this webhook when a run fails (`FORMAT=URL`); repeatable",
    ),
    (
        "--alert-format",
        &[],
        "The body of an alert: `slack`, `teams`, `adaptive` or `json`",
    ),
    (
        "--no-events",
        &[],
        "Post no Kubernetes Events (on what a live run collects, refuses or fails on)",
    ),
    // serve.
    (
        "--stall",
        &[],
        "`/healthz` answers 503 once a run has lasted this long (0: never)",
    ),
    (
        "--api-listen",
        &[],
        "Also serve the request API on this address (`serve sessions` only)",
    ),
    (
        "--api-tls-cert",
        &[],
        "Serve the request API over TLS with this certificate chain (PEM)",
    ),
    (
        "--api-restore-account",
        &[],
        "Offer restores through the API, done as this ServiceAccount (`NAMESPACE/NAME`)",
    ),
    // Logging.
    (
        "--verbose",
        &[],
        "More log lines from gc itself: -v info, -vv debug, -vvv trace",
    ),
];

/// `(command, summary)`: the one-line about of each command whose own is longer than
/// [`super::ONE_LINE`] characters, as `-h` and its group's `Commands:` show it; `--help` shows
/// the whole text.
pub const ABOUTS: &[(&str, &str)] = &[
    (
        "console",
        "A web console on loopback: review, collect and restore sessions, as yourself",
    ),
    (
        "archives",
        "Read archives back: list them, show one, verify them, prune the old ones",
    ),
    (
        "archives list",
        "The receipts of archived failed Pods and session resources, newest first",
    ),
    (
        "archives show",
        "One archived Pod (status, exit codes) or session resource's manifest",
    ),
    (
        "archives verify",
        "Every receipt against its archive's sha256 and size; exits 1 on a mismatch",
    ),
    (
        "archives prune",
        "Removes receipts older than `--older-than` and their archives, saying what went",
    ),
    (
        "ledger import",
        "Store a ledger file as it is, replacing the namespace's stored ledger",
    ),
    (
        "restore sessions",
        "Create the named sessions' deleted objects again from their verified archives",
    ),
];
