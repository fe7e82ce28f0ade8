//! No secret in any message. Passwords holding `?`, `#`, `@`, `/`, `:`, `%` or a space, raw and
//! percent-encoded, in the session database URL (`--database-url`, `$GC_SESSION_DATABASE_URL`,
//! StreamSpace's `DB_PASSWORD`) and in the store URL (`--store`, `$GC_STORE`), as the URL's
//! password or as a `password` query parameter (in any case), against a server
//! that refuses (a closed loopback port) and one that rejects the password (the test
//! PostgreSQL): no piece of a password on stdout (`-o json|yaml`), on stderr (the final error,
//! and logs at every level, `-vvv` and `RUST_LOG=trace`, as text and as JSON), in the Slack,
//! Teams and JSON alerts, or in the Kubernetes Events the failed runs post. The same passwords
//! in an API server URL (`--api-url`) are never shown either.

use std::process::{Command, Output};

use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

mod common;

use common::{Result, Webhook, command, one_live_session, sqlite};

/// The two halves of every password, either side of its special character: neither may be
/// shown anywhere.
const HEAD: &str = "Qx3v";
const TAIL: &str = "Jm8w";

/// `text` with every byte outside RFC 3986's unreserved set as `%XX`.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every password tried: `HEAD`, a special character, `TAIL`, raw and percent-encoded; and, for
/// the characters that end an authority, one starting with a digit, which parses (as the host
/// `gc`, the port `7`, the rest of the password and the real host in the path, query or
/// fragment) instead of failing.
fn passwords() -> Vec<String> {
    let mut out = Vec::new();
    for c in ['?', '#', '@', '/', ':', '%', ' '] {
        let raw = format!("{HEAD}{c}{TAIL}");
        out.push(encoded(&raw));
        out.push(raw);
    }
    for c in ['?', '#', '/'] {
        out.push(format!("7{c}{TAIL}"));
    }
    out
}

/// A loopback port where nothing listens (free a moment ago).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Fails when `text` (what `what` printed or posted) holds any piece of a password.
fn assert_clean(what: &str, text: &str) {
    for piece in [HEAD, TAIL] {
        assert!(!text.contains(piece), "{what} shows {piece:?}:\n{text}");
    }
}

/// How a command logs: `-vvv` as text, or `RUST_LOG=trace` (every crate) as JSON lines.
#[derive(Clone, Copy)]
enum Logs {
    VerboseText,
    TraceJson,
}

/// Where a database is: host and port, the database's name, and `DB_*` for it.
struct Server {
    host: String,
    port: u16,
    database: String,
}

impl Server {
    /// The URL with `password` as its password, or as the value of the query parameter `param`.
    fn url(&self, password: &str, param: Option<&str>) -> String {
        let (host, port, database) = (&self.host, self.port, &self.database);
        match param {
            None => format!("postgres://gc:{password}@{host}:{port}/{database}"),
            Some(param) => {
                format!("postgres://gc@{host}:{port}/{database}?sslmode=disable&{param}={password}")
            }
        }
    }

    fn db_vars(&self, password: &str) -> [(&'static str, String); 5] {
        [
            ("DB_HOST", self.host.clone()),
            ("DB_PORT", self.port.to_string()),
            ("DB_USER", "gc".into()),
            ("DB_PASSWORD", password.into()),
            ("DB_NAME", self.database.clone()),
        ]
    }
}

/// The namespaces, webhooks and stores of the runs, and what they printed.
struct Runs {
    bed: &'static TestBed,
    sessions_ns: TestNamespace,
    pods_ns: TestNamespace,
    /// The test PostgreSQL's database holding a session table, when there is one.
    good_db: Option<TestDatabase>,
    dir: tempfile::TempDir,
    slack: Webhook,
    teams: Webhook,
    json: Webhook,
    /// How many outputs said a URL is not shown, and how many showed one with `***`.
    not_shown: usize,
    starred: usize,
}

impl Runs {
    /// `gc-cli` with none of the machine's settings, logging as `logs` says, posting alerts to
    /// the three webhooks, on the test bed's cluster.
    fn gc(&self, args: &[&str], logs: Logs, alerts: bool) -> Command {
        let mut c = self.gc_anywhere(args, logs, alerts);
        let kubeconfig = self.bed.kubeconfig_path().to_str().unwrap().to_owned();
        c.args(["--kubeconfig", &kubeconfig]);
        c
    }

    /// As [`Runs::gc`], without naming a cluster.
    fn gc_anywhere(&self, args: &[&str], logs: Logs, alerts: bool) -> Command {
        let mut c = command();
        for (k, _) in std::env::vars() {
            if (k.starts_with("GC_") && k != "GC_STATE_DIR") || k.starts_with("DB_") {
                c.env_remove(k);
            }
        }
        c.env_remove("RUST_LOG")
            .env("GC_STATE_DIR", self.dir.path().join("state"))
            .args(common::live_unless_dry(args));
        match logs {
            Logs::VerboseText => c.arg("-vvv"),
            Logs::TraceJson => c.env("RUST_LOG", "trace").args(["--log-format", "json"]),
        };
        if alerts {
            c.args(["--alert-webhook", &self.slack.url])
                .args(["--alert-webhook", &format!("teams={}", self.teams.url)])
                .args(["--alert-webhook", &format!("json={}", self.json.url)]);
        }
        c
    }

    /// Runs `c`, which must fail, and checks what it printed.
    fn check(&mut self, what: &str, mut c: Command) {
        let out: Output = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let text = format!("{stdout}\n{stderr}");
        assert!(!out.status.success(), "{what}: exit 0\n{text}");
        assert_clean(what, &text);
        if stderr.contains("(its value is not shown)") {
            self.not_shown += 1;
        }
        if stderr.contains("gc:***@") {
            self.starred += 1;
        }
    }

    /// Every command that reads the session database, with its URL (or `DB_*`) holding
    /// `password` (in the query parameter `param`, when given).
    fn session_database(
        &mut self,
        server: &Server,
        (password, param): (&str, Option<&str>),
        logs: Logs,
        env: bool,
    ) {
        let url = server.url(password, param);
        let ns = self.sessions_ns.name().to_owned();
        let store = sqlite(self.dir.path(), "gc.sqlite3");
        let run = ["run", "sessions", "-n", &ns, "--grace-hours", "0"];
        let run = [&run[..], &["--store", &store, "-o", "json"]].concat();
        let mut c = self.gc(&run, logs, true);
        if env {
            c.env("GC_SESSION_DATABASE_URL", &url);
        } else {
            c.args(["--database-url", &url]);
        }
        self.check(&format!("run sessions, database {url}"), c);

        let mut c = self.gc(&["plan", "sessions", "-n", &ns, "-o", "yaml"], logs, false);
        c.args(["--database-url", &url]);
        self.check(&format!("plan sessions, database {url}"), c);

        if param.is_none() {
            let mut c = self.gc(&run, logs, true);
            c.envs(server.db_vars(password));
            self.check(&format!("run sessions, DB_PASSWORD {password}"), c);
        }
    }

    /// Every command that opens the store, with its URL holding `password` (in the query
    /// parameter `param`, when given).
    fn store(
        &mut self,
        server: &Server,
        (password, param): (&str, Option<&str>),
        logs: Logs,
        env: bool,
    ) {
        let url = server.url(password, param);
        let with_store = |mut c: Command| {
            if env {
                c.env("GC_STORE", &url);
            } else {
                c.args(["--store", &url]);
            }
            c
        };
        let ns = self.pods_ns.name().to_owned();
        let c = self.gc(
            &[
                "run",
                "pods",
                "-n",
                &ns,
                "--retention-seconds",
                "3600",
                "-o",
                "json",
            ],
            logs,
            true,
        );
        self.check(&format!("run pods, store {url}"), with_store(c));
        let c = self.gc(&["plan", "pods", "-n", &ns, "-o", "yaml"], logs, false);
        self.check(&format!("plan pods, store {url}"), with_store(c));
        let c = self.gc_anywhere(&["archives", "list", "-n", &ns, "-o", "json"], logs, false);
        self.check(&format!("archives list, store {url}"), with_store(c));
        if let Some(db) = &self.good_db {
            let sessions = self.sessions_ns.name().to_owned();
            let run = ["run", "sessions", "-n", &sessions, "--grace-hours", "0"];
            let mut c = self.gc(&run, logs, true);
            c.args(["--database-url", db.url(), "-o", "json"]);
            self.check(&format!("run sessions, store {url}"), with_store(c));
        }
    }

    /// Both collectors' runs with an API server URL holding `password`, on a closed port.
    fn cluster(&mut self, password: &str, logs: Logs) {
        let api_url = format!("https://gc:{password}@127.0.0.1:{}", closed_port());
        let store = sqlite(self.dir.path(), "gc.sqlite3");
        let ns = self.pods_ns.name().to_owned();
        for collector in ["pods", "sessions"] {
            let run = ["run", collector, "-n", &ns, "--store", &store];
            let mut c = self.gc_anywhere(&run, logs, true);
            c.args(["--api-url", &api_url, "--trust-certs"]);
            if collector == "sessions" {
                c.args(["--database-url", &store]);
            }
            self.check(&format!("run {collector}, --api-url {api_url}"), c);
        }
    }

    /// The alerts posted and the Events posted in both namespaces, checked.
    async fn check_posted(&self) -> Result {
        let mut alerts = 0;
        for hook in [&self.slack, &self.teams, &self.json] {
            for body in hook.bodies() {
                assert_clean("an alert", &serde_json::to_string(&body)?);
                alerts += 1;
            }
        }
        assert!(alerts > 0, "no alert posted");
        let mut failed = 0;
        for ns in [&self.sessions_ns, &self.pods_ns] {
            let events: Api<Event> = ns.api();
            let list = events.list(&ListParams::default()).await?.items;
            assert_clean("an Event", &serde_json::to_string(&list)?);
            failed += list
                .iter()
                .filter(|e| e.reason.as_deref() == Some("RunFailed"))
                .count();
        }
        assert!(failed > 0, "no RunFailed Event posted");
        Ok(())
    }
}

#[tokio::test]
async fn no_password_is_shown_in_any_message() -> Result {
    let bed = TestBed::shared().await?;
    let wrong_password = TestDatabase::fresh("secrets").await?;
    let good_db = match &wrong_password {
        Some(_) => {
            let db = TestDatabase::fresh("secrets-sessions")
                .await?
                .ok_or("no database")?;
            one_live_session(&db).await?;
            Some(db)
        }
        None => None,
    };
    let mut runs = Runs {
        bed,
        sessions_ns: bed.namespace("secrets-sessions").await?,
        pods_ns: bed.namespace("secrets-pods").await?,
        good_db,
        dir: tempfile::tempdir()?,
        slack: Webhook::start(),
        teams: Webhook::start(),
        json: Webhook::start(),
        not_shown: 0,
        starred: 0,
    };
    // A server that refuses, and (with the test PostgreSQL) one that rejects the password.
    let mut servers = vec![Server {
        host: "127.0.0.1".into(),
        port: closed_port(),
        database: "streamspace".into(),
    }];
    if let Some(db) = &wrong_password {
        // `postgres://gc:gc@HOST:PORT/NAME`
        let authority = db.url().rsplit_once('@').ok_or("no user")?.1;
        let authority = authority.split_once('/').ok_or("no database")?.0;
        let (host, port) = authority.rsplit_once(':').ok_or("no port")?;
        servers.push(Server {
            host: host.to_owned(),
            port: port.parse()?,
            database: db.name().to_owned(),
        });
    }
    // Each password as the URL's password; and some as a `password` query parameter (in another
    // case too, which sqlx does not read), a raw `&` making its tail a parameter of its own.
    let mut cases: Vec<(String, Option<&str>)> =
        passwords().into_iter().map(|p| (p, None)).collect();
    for c in ['&', '#', ' ', '?'] {
        let raw = format!("{HEAD}{c}{TAIL}");
        for param in ["password", "PassWord"] {
            cases.push((encoded(&raw), Some(param)));
            cases.push((raw.clone(), Some(param)));
        }
    }
    for (s, server) in servers.iter().enumerate() {
        for (i, (password, param)) in cases.iter().enumerate() {
            let logs = if (s + i) % 2 == 0 {
                Logs::VerboseText
            } else {
                Logs::TraceJson
            };
            // The environment variables for the server that refuses, the flags for the other.
            let case = (password.as_str(), *param);
            runs.session_database(server, case, logs, s == 0);
            runs.store(server, case, logs, s == 0);
            if s == 0 && param.is_none() {
                runs.cluster(password, logs);
            }
        }
    }
    runs.check_posted().await?;
    // Both kinds of message were met: a URL refused unshown, and one shown with `***`.
    assert!(runs.not_shown > 0 && runs.starred > 0);
    Ok(())
}
