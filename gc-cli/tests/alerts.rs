//! The shipped alert rules (`deploy/prometheus/gc-alerts.yaml`): checked and unit-tested with
//! promtool, and evaluated end to end by a real Prometheus scraping a real Pushgateway that real
//! runs push to, and a real `gc-cli serve`: failures fire `GcRunFailing` from the first one,
//! `GcNoRecentSuccess` fires whether a success was ever recorded or not, a success resolves both,
//! and `serve`'s counters never go down.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{Result, command, namespace, pushgateway, sqlite};

/// The folder of the shipped rules and their unit tests.
const RULES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/prometheus");

/// The folder holding `prometheus` and `promtool` (`GC_TEST_PROMETHEUS`, printed by
/// `scripts/prometheus.sh`); `None` (the test skips) outside CI.
fn prometheus_bin() -> Option<PathBuf> {
    let dir = std::env::var_os("GC_TEST_PROMETHEUS").map(PathBuf::from);
    if dir.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Prometheus: set GC_TEST_PROMETHEUS to the folder holding prometheus \
             and promtool (scripts/test.sh does, with scripts/prometheus.sh)"
        );
        eprintln!("SKIPPING: GC_TEST_PROMETHEUS is unset (run scripts/test.sh)");
    }
    dir
}

/// Runs `promtool args` in the rules' folder; its output when it succeeded.
fn promtool(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin.join("promtool"))
        .args(args)
        .current_dir(RULES_DIR)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}/promtool: {e}", bin.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let Some(bin) = prometheus_bin() else {
        return;
    };
    let checked = promtool(&bin, &["check", "rules", "gc-alerts.yaml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&bin, &["test", "rules", "gc-alerts.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// The shipped rules, as JSON.
fn rules() -> Value {
    let text = std::fs::read_to_string(Path::new(RULES_DIR).join("gc-alerts.yaml")).unwrap();
    let yaml: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    serde_json::to_value(yaml).unwrap()
}

#[test]
fn the_rules_speak_only_of_metrics_a_run_exports() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gc.prom");
    let out = command()
        .args([
            "run",
            "pods",
            "-n",
            "batch",
            "--metrics-prefix",
            "streamspace",
        ])
        .args(["--api-url", "https://127.0.0.1:1", "--trust-certs"])
        .args(["--store", &sqlite(dir.path(), "s.db")])
        .args(["--metrics-file", file.to_str().unwrap()])
        .env_remove("GC_PUSHGATEWAY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let exposition = std::fs::read_to_string(&file).unwrap();
    // A failed run carries every family but the last success, which only a success sets.
    let mut exported: Vec<&str> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .collect();
    exported.push("streamspace_last_success_timestamp_seconds");
    let rules = rules();
    let list = rules["groups"][0]["rules"].as_array().unwrap();
    assert!(list.len() >= 4);
    for rule in list {
        let expr = rule["expr"].as_str().unwrap();
        let names: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("streamspace_"))
            .collect();
        assert!(!names.is_empty(), "{expr}");
        for name in names {
            assert!(exported.contains(&name), "{name} in {expr}: {exposition}");
        }
        assert!(
            !expr.contains("increase("),
            "no increase() of a restarting series: {expr}"
        );
    }
}

/// The thresholds of `GcNoRecentSuccess`, one per collector, as the rule writes them.
const THRESHOLDS: [&str; 2] = ["12 * 3600", "48 * 3600"];

/// The shipped rules for a test: `GcNoRecentSuccess` after `seconds` instead of 12 or 48 hours,
/// and every `for:` at 0s.
fn rules_for_test(seconds: u64) -> String {
    let mut rules = rules();
    let mut replaced = 0;
    for rule in rules["groups"][0]["rules"].as_array_mut().unwrap() {
        for threshold in THRESHOLDS {
            if let Some(expr) = rule["expr"].as_str()
                && expr.contains(threshold)
            {
                rule["expr"] = expr.replace(threshold, &seconds.to_string()).into();
                replaced += 1;
            }
        }
        if rule.get("for").is_some() {
            rule["for"] = "0s".into();
        }
    }
    assert_eq!(
        replaced,
        THRESHOLDS.len(),
        "the GcNoRecentSuccess thresholds moved: {rules}"
    );
    serde_norway::to_string(&rules).unwrap()
}

/// A loopback address with a port free a moment ago.
fn free_addr() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// A `GET` through curl: the body, or what went wrong.
fn curl(url: &str, query: &[(&str, &str)]) -> std::result::Result<String, String> {
    let mut c = Command::new("curl");
    c.args(["-fsS", "--max-time", "10", "-G", url]);
    for (name, value) in query {
        c.args(["--data-urlencode", &format!("{name}={value}")]);
    }
    let out = c.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into())
    }
}

/// A Prometheus of the test's own: its configuration, storage and port, scraping every second
/// and evaluating the rules every second.
struct Prometheus {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

/// What a Prometheus scrapes: a Pushgateway (honouring the pushed labels, keeping only the
/// series of one namespace) or a `gc-cli serve`.
enum Target<'a> {
    Pushgateway { addr: &'a str, namespace: &'a str },
    Serve { addr: &'a str },
}

impl Prometheus {
    fn start(bin: &Path, rules: &str, target: Target<'_>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rules.yaml"), rules).unwrap();
        let scrape = match target {
            Target::Pushgateway { addr, namespace } => format!(
                "  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      \
                 - targets: ['{addr}']\n    metric_relabel_configs:\n      \
                 - source_labels: [namespace]\n        regex: '{namespace}'\n        \
                 action: keep\n"
            ),
            Target::Serve { addr } => format!(
                "  - job_name: gc-serve\n    static_configs:\n      - targets: ['{addr}']\n"
            ),
        };
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  \
             - rules.yaml\nscrape_configs:\n{scrape}"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr = free_addr();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(bin.join("prometheus"))
            .arg(format!(
                "--config.file={}/prometheus.yml",
                dir.path().display()
            ))
            .arg(format!("--storage.tsdb.path={}/data", dir.path().display()))
            .arg(format!("--web.listen-address={addr}"))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let prometheus = Self {
            child,
            url: format!("http://{addr}"),
            dir,
        };
        prometheus.wait("Prometheus ready", Duration::from_secs(60), || {
            curl(&format!("{}/-/ready", prometheus.url), &[]).map(|_| Some(()))
        });
        prometheus
    }

    /// The answer of an instant query.
    fn query(&self, query: &str) -> std::result::Result<Value, String> {
        let text = curl(&format!("{}/api/v1/query", self.url), &[("query", query)])?;
        serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))
    }

    /// The value of the one sample `query` returns, if it returns one.
    fn value(&self, query: &str) -> std::result::Result<Option<f64>, String> {
        let answer = self.query(query)?;
        let result = answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match &result[..] {
            [] => Ok(None),
            [one] => Ok(one["value"][1].as_str().and_then(|v| v.parse().ok())),
            _ => Err(format!("several samples: {answer}")),
        }
    }

    /// The alerts firing for `namespace`, by name (sorted).
    fn firing(&self, namespace: &str) -> std::result::Result<Vec<String>, String> {
        let text = curl(&format!("{}/api/v1/alerts", self.url), &[])?;
        let answer: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        let mut names: Vec<String> = answer["data"]["alerts"]
            .as_array()
            .ok_or(text.clone())?
            .iter()
            .filter(|a| a["state"] == "firing" && a["labels"]["namespace"] == namespace)
            .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Waits until the alerts firing for `namespace` are exactly `expected` (sorted).
    fn wait_for_exactly(&self, namespace: &str, expected: &[&str]) {
        let what = format!("alerts {expected:?} (exactly) firing for {namespace}");
        self.wait(&what, Duration::from_secs(45), || {
            let firing = self.firing(namespace)?;
            match firing == expected {
                true => Ok(Some(())),
                false => Err(format!("firing: {firing:?}")),
            }
        });
    }

    /// Waits until `alert` fires for `namespace`, among others or not.
    fn wait_for(&self, namespace: &str, alert: &str) {
        let what = format!("alert {alert} firing for {namespace}");
        self.wait(&what, Duration::from_secs(45), || {
            let firing = self.firing(namespace)?;
            match firing.iter().any(|a| a == alert) {
                true => Ok(Some(())),
                false => Err(format!("firing: {firing:?}")),
            }
        });
    }

    /// Waits until `query` returns one sample for which `until` holds; its value.
    fn wait_for_value(&self, query: &str, until: impl Fn(f64) -> bool) -> f64 {
        self.wait(query, Duration::from_secs(45), || {
            match self.value(query)? {
                Some(v) if until(v) => Ok(Some(v)),
                other => Err(format!("{query} = {other:?}")),
            }
        })
    }

    /// Polls `probe` every 200 ms until it finds something; panics after `bound` with the
    /// last answer and the Prometheus log.
    fn wait<T>(
        &self,
        what: &str,
        bound: Duration,
        mut probe: impl FnMut() -> std::result::Result<Option<T>, String>,
    ) -> T {
        let deadline = Instant::now() + bound;
        let mut last = String::new();
        loop {
            match probe() {
                Ok(Some(found)) => return found,
                Ok(None) => {}
                Err(why) => last = why,
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("prometheus.log"))
                    .unwrap_or_default();
                let alerts = curl(&format!("{}/api/v1/alerts", self.url), &[]);
                panic!(
                    "no {what} within {bound:?}; last answer: {last}\nalerts: {alerts:?}\n\
                     Prometheus log:\n{log}"
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GcNoRecentSuccess` fires this many seconds after the last success (or first attempt) in the
/// end-to-end tests, instead of 12 or 48 hours.
const THRESHOLD: u64 = 10;

/// The selector of the series of failed-Pod runs in `namespace`.
fn of(namespace: &str) -> String {
    format!(r#"{{collector="pods",namespace="{namespace}"}}"#)
}

/// Runs pushing to a real Pushgateway: the first failure fires `GcRunFailing`; runs that never
/// succeeded fire `GcNoRecentSuccess` once the threshold passed; a success resolves both;
/// failures after it keep the last success, so `GcNoRecentSuccess` fires again from it; a
/// success resolves everything.
#[tokio::test]
async fn alerts_from_pushed_runs_fire_from_the_first_failure_and_resolve_with_a_success() -> Result
{
    let (Some(bin), Some(gateway)) = (prometheus_bin(), pushgateway()) else {
        return Ok(());
    };
    let (bed, ns) = namespace("alerts").await?;
    let name = ns.name();
    let dir = tempfile::tempdir()?;
    let run = |reachable: bool| {
        let mut c = command();
        c.args(["run", "pods", "-n", name, "--retention-seconds", "3600"])
            .args(["--store", &sqlite(dir.path(), "s.db")])
            .args(["--archive-dir", dir.path().join("a").to_str().unwrap()])
            .args(["--pushgateway", &gateway, "--metrics-prefix", "streamspace"])
            .env_remove("GC_ALERT_WEBHOOK")
            .env_remove("GC_METRICS_FILE");
        if reachable {
            c.args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()]);
        } else {
            c.args(["--api-url", "https://127.0.0.1:1", "--trust-certs"]);
        }
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), reachable, "{stderr}");
    };
    let addr = gateway.trim_start_matches("http://").trim_end_matches('/');
    let target = Target::Pushgateway {
        addr,
        namespace: name,
    };
    let prometheus = Prometheus::start(&bin, &rules_for_test(THRESHOLD), target);
    let series = of(name);
    let value = |metric: &str| format!("streamspace_{metric}{series}");

    let first_run = Instant::now();
    run(false);
    prometheus.wait_for(name, "GcRunFailing");
    eprintln!(
        "GcRunFailing firing {:?} after the first failed run began",
        first_run.elapsed()
    );
    // The first failure's error series starts at 1: increase() would have read it as 0.
    let first = format!(r#"streamspace_last_run_errors{{namespace="{name}",stage="run"}}"#);
    assert_eq!(prometheus.value(&first), Ok(Some(1.0)));
    let attempt = prometheus.wait_for_value(&value("last_attempt_timestamp_seconds"), |_| true);
    run(false);
    prometheus.wait_for_value(&value("last_attempt_timestamp_seconds"), |a| a > attempt);
    // No success ever recorded: GcNoRecentSuccess counts from the earliest attempt.
    prometheus.wait_for_exactly(name, &["GcNoRecentSuccess", "GcRunFailing"]);

    let success_run = Instant::now();
    run(true);
    prometheus.wait_for_exactly(name, &[]);
    eprintln!(
        "alerts resolved {:?} after the successful run began",
        success_run.elapsed()
    );
    let success = prometheus.wait_for_value(&value("last_success_timestamp_seconds"), |_| true);

    run(false);
    run(false);
    prometheus.wait_for_value(&value("last_run_success"), |v| v == 0.0);
    prometheus.wait_for(name, "GcRunFailing");
    assert_eq!(
        prometheus.value(&value("last_success_timestamp_seconds")),
        Ok(Some(success)),
        "failures keep the last success"
    );
    prometheus.wait_for_exactly(name, &["GcNoRecentSuccess", "GcRunFailing"]);

    run(true);
    prometheus.wait_for_exactly(name, &[]);
    Ok(())
}

/// A real Prometheus scraping `gc-cli serve`: its failed runs fire `GcRunFailing`, a success
/// (the cluster reachable again) resolves it, its counters add up the runs and never went down;
/// SIGTERM between runs ends it with status 0.
#[tokio::test]
async fn alerts_from_serve_resolve_and_its_counters_never_go_down() -> Result {
    let Some(bin) = prometheus_bin() else {
        return Ok(());
    };
    let (bed, ns) = namespace("alerts-serve").await?;
    let name = ns.name();
    let dir = tempfile::tempdir()?;
    // The kubeconfig the runs read: first naming an API server that is not there.
    let reachable = std::fs::read_to_string(bed.kubeconfig_path())?;
    assert!(reachable.contains(bed.server_url()));
    let kubeconfig = dir.path().join("kubeconfig");
    let point = |text: &str| -> std::io::Result<()> {
        let next = dir.path().join("kubeconfig.next");
        std::fs::write(&next, text)?;
        std::fs::rename(&next, &kubeconfig)
    };
    point(&reachable.replace(bed.server_url(), "https://127.0.0.1:1"))?;
    let addr = free_addr();
    let log = dir.path().join("serve.log");
    let mut serve = command()
        .args(["serve", "--listen", &addr, "--interval-seconds", "2"])
        .args(["pods", "-n", name, "--retention-seconds", "3600"])
        .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["--store", &sqlite(dir.path(), "s.db")])
        .args(["--archive-dir", dir.path().join("a").to_str().unwrap()])
        .args(["--metrics-prefix", "streamspace"])
        .env_remove("GC_PUSHGATEWAY")
        .env_remove("GC_ALERT_WEBHOOK")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let prometheus = Prometheus::start(
        &bin,
        &rules_for_test(THRESHOLD),
        Target::Serve { addr: &addr },
    );
    let runs =
        |result: &str| format!(r#"streamspace_runs_total{{namespace="{name}",result="{result}"}}"#);

    prometheus.wait_for(name, "GcRunFailing");
    prometheus.wait_for_value(&runs("failure"), |n| n >= 2.0);
    point(&reachable)?;
    prometheus.wait_for_value(&runs("success"), |n| n >= 1.0);
    prometheus.wait_for_exactly(name, &[]);
    let failures = prometheus.value(&runs("failure")).unwrap().unwrap();
    prometheus.wait_for_value(&runs("success"), |n| n >= 2.0);
    assert_eq!(prometheus.value(&runs("failure")), Ok(Some(failures)));
    let errors = format!(r#"streamspace_errors_total{{namespace="{name}",stage="run"}}"#);
    assert_eq!(prometheus.value(&errors), Ok(Some(failures)));
    // Every counter of the namespace, as Prometheus scraped it run after run, only went up.
    for counter in [
        "runs",
        "objects_scanned",
        "objects_eligible",
        "objects_held",
        "objects_deferred",
        "objects_deleted",
        "fences_lost",
        "errors",
        "archive_bytes",
    ] {
        let series = format!(r#"streamspace_{counter}_total{{namespace="{name}"}}"#);
        assert!(
            prometheus
                .value(&format!("count({series})"))
                .unwrap()
                .is_some()
        );
        let resets = format!("sum(resets({series}[5m]))");
        assert_eq!(prometheus.value(&resets), Ok(Some(0.0)), "{resets}");
    }

    let sent = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()?;
    assert!(sent.success());
    let signalled = Instant::now();
    let deadline = signalled + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            serve.kill()?;
            panic!(
                "serve still running 20s after SIGTERM: {}",
                std::fs::read_to_string(&log)?
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = signalled.elapsed();
    let log = std::fs::read_to_string(&log)?;
    assert_eq!(status.code(), Some(0), "{log}");
    // Prometheus keeps its connection open: the server still stops at once, not on its bound.
    assert!(
        took < Duration::from_secs(4) && !log.contains("did not stop"),
        "{took:?}: {log}"
    );
    eprintln!("serve exited {took:?} after SIGTERM, Prometheus connected");
    Ok(())
}
