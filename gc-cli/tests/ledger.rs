//! `gc-cli ledger import|export` end to end against a SQLite store in a temporary folder: the
//! flow's ledger goes in and comes out byte for byte, and a bad file changes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary folder holding the store and the ledger files.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The store, in a folder that does not exist yet.
    fn store(&self) -> PathBuf {
        self.path("state/gc.sqlite3")
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `gc-cli ledger <args>` with the store given by `$GC_STORE`.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_gc-cli"))
            .arg("ledger")
            .args(args)
            .env("GC_STORE", format!("sqlite:{}", self.store().display()))
            .output()
            .unwrap()
    }

    fn import(&self, file: &Path, namespace: &str) -> Output {
        self.run(&[
            "import",
            "--cluster-id",
            "primary",
            "--namespace",
            namespace,
            "--file",
            file.to_str().unwrap(),
        ])
    }

    fn export(&self, namespace: &str) -> Output {
        self.run(&[
            "export",
            "--cluster-id",
            "primary",
            "--namespace",
            namespace,
        ])
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(out));
}

/// The flow's ledger as `json.dumps` writes it: an int and a float `first`, a non-ASCII name.
const FLOW_LEDGER: &str = r#"{"0f1e2d3c-aaaa-4bbb-8ccc-000000000001": {"first": 1795000000, "name": "job-a-1"}, "0f1e2d3c-aaaa-4bbb-8ccc-000000000002": {"first": 1795900000.25, "name": "job-\u00e9-2"}}"#;

#[test]
fn an_imported_ledger_is_exported_unchanged() {
    let env = Env::new();
    let file = env.write("state.json", FLOW_LEDGER);
    assert_ok(&env.import(&file, "jobs"));
    assert!(
        env.store().is_file(),
        "the store and its folder are created"
    );

    let out = env.export("jobs");
    assert_ok(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), FLOW_LEDGER);

    // `--out` writes the same text to a file.
    let copy = env.path("copy.json");
    assert_ok(&env.run(&[
        "export",
        "--cluster-id",
        "primary",
        "--namespace",
        "jobs",
        "--out",
        copy.to_str().unwrap(),
    ]));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), FLOW_LEDGER);
}

#[test]
fn any_formatting_of_the_file_is_kept() {
    let env = Env::new();
    let text = "{\n  \"u\": {\"first\": 1.0e9, \"name\": \"p\"}\n}\n";
    assert_ok(&env.import(&env.write("pretty.json", text), "jobs"));
    let out = env.export("jobs");
    assert_ok(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
}

#[test]
fn a_second_import_replaces_and_namespaces_are_separate() {
    let env = Env::new();
    assert_ok(&env.import(&env.write("a.json", FLOW_LEDGER), "jobs"));
    assert_ok(&env.import(&env.write("b.json", "{}"), "jobs"));
    assert_ok(&env.import(&env.write("c.json", FLOW_LEDGER), "batch"));
    assert_eq!(env.export("jobs").stdout, b"{}");
    assert_eq!(env.export("batch").stdout, FLOW_LEDGER.as_bytes());
}

#[test]
fn exporting_a_ledger_never_imported_gives_the_empty_ledger() {
    let env = Env::new();
    let out = env.export("jobs");
    assert_ok(&out);
    assert_eq!(out.stdout, b"{}");
    assert!(stderr(&out).contains("no ledger"), "{}", stderr(&out));
}

#[test]
fn a_bad_file_is_refused_naming_the_file_and_the_uid_and_the_store_is_untouched() {
    let env = Env::new();
    let cases = [
        (
            r#"{"u-1": {"first": 1795000000, "name": "a"}, "u-2": {"first": "soon", "name": "b"}}"#,
            "entry \"u-2\": \"first\" must be a number of seconds, found a string",
        ),
        (
            r#"{"u-3": {"name": "c"}}"#,
            "entry \"u-3\": \"first\" is missing",
        ),
        (
            r#"{"u-4": 1795000000}"#,
            "entry \"u-4\": expected an object",
        ),
        ("[]", "expected a JSON object"),
        ("{\"u-5\": ", "not JSON"),
    ];
    // Before anything was stored: not even the store is created.
    for (text, reason) in &cases {
        let file = env.write("bad.json", text);
        let out = env.import(&file, "jobs");
        assert_eq!(out.status.code(), Some(2), "{text}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(message.contains(&file.display().to_string()), "{message}");
        assert!(message.contains(reason), "{message}");
        assert!(!env.store().exists(), "{text}");
    }
    // After a good import: the stored ledger stays as it was.
    assert_ok(&env.import(&env.write("good.json", FLOW_LEDGER), "jobs"));
    for (text, _) in &cases {
        let out = env.import(&env.write("bad.json", text), "jobs");
        assert_eq!(out.status.code(), Some(2), "{text}: {}", stderr(&out));
    }
    assert_eq!(env.export("jobs").stdout, FLOW_LEDGER.as_bytes());
}

#[test]
fn a_missing_file_and_bad_names_are_usage_errors() {
    let env = Env::new();
    let out = env.import(&env.path("missing.json"), "jobs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.json"), "{}", stderr(&out));

    let file = env.write("state.json", FLOW_LEDGER);
    for namespace in ["kube-system", "Not_A_Label"] {
        let out = env.import(&file, namespace);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("namespace"), "{}", stderr(&out));
    }
    assert!(!env.store().exists());
}

#[test]
fn a_store_error_exits_1_without_showing_the_password() {
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = env.run(&[
        "export",
        "--cluster-id",
        "primary",
        "--namespace",
        "jobs",
        "--store",
        &format!("postgres://gc:Very-Secret-Pw@127.0.0.1:{port}/gc"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("store unavailable"), "{message}");
    assert!(!message.contains("Very-Secret-Pw"), "{message}");
    assert!(out.stdout.is_empty());
}

#[test]
fn help_never_shows_the_store_url_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_gc-cli"))
        .args(["ledger", "export", "--help"])
        .env("GC_STORE", "postgres://gc:Very-Secret-Pw@db/gc")
        .output()
        .unwrap();
    assert_ok(&out);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("GC_STORE"), "{help}");
    assert!(!help.contains("Very-Secret-Pw"), "{help}");
}
