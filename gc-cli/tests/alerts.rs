//! The shipped alert rules (`deploy/prometheus/gc-alerts.yaml`) and dashboard
//! (`deploy/grafana/gc.json`). The rules checked and unit-tested with promtool, and evaluated end
//! to end, as the chart renders them in its PrometheusRule, by a real Prometheus scraping a real Pushgateway that real runs push to, and a real
//! `gc-cli serve`: failures fire `GcRunFailing` from the first one, `GcNoRecentSuccess` fires
//! whether a success was ever recorded or not, a success resolves both, and `serve`'s counters
//! never go down. Every panel and variable query of the dashboard, as the chart renders it in its
//! ConfigMap, run through a real
//! Prometheus's query API after real runs, showing what those runs did.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{COLLECT, Result, command, namespace, pushgateway, sqlite, target};

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

/// The chart rendered as an install with the alert rules and the dashboard enabled (default
/// prefix): what the end-to-end tests evaluate. (`tests/chart` proves that the rendering equals
/// the shipped files, and promtool passes the files' unit tests on it.)
fn rendered_chart() -> Vec<Value> {
    let out = Command::new(gc_testbed::tool("helm").unwrap())
        .args([
            "template",
            "gc",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../chart"),
        ])
        // A 1.30+ cluster, as the test bed's: the volume rules come with their admission policy.
        .args([
            "--api-versions",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
        ])
        // The image and the session database, which every install sets (the chart has no default).
        .args([
            "--values",
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/chart/values.yaml"),
        ])
        .args(["--set", "prometheusRule.enabled=true"])
        .args(["--set", "grafana.dashboards.enabled=true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::yaml_documents(&String::from_utf8(out.stdout).unwrap())
}

/// The chart's PrometheusRule's rules (`{"groups": ...}`), as JSON.
fn rules() -> Value {
    let rule = rendered_chart()
        .into_iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    serde_json::json!({"groups": rule["spec"]["groups"]})
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

/// A kubeconfig file the runs read that names, at first, an API server that is not there, and
/// then ([`Switchable::reach`]) the test bed's: replaced whole, as a rename.
struct Switchable {
    path: PathBuf,
    reachable: String,
}

impl Switchable {
    fn new(bed: &gc_testbed::TestBed, dir: &Path) -> std::io::Result<Self> {
        let reachable = std::fs::read_to_string(bed.kubeconfig_path())?;
        assert!(reachable.contains(bed.server_url()));
        let kubeconfig = Self {
            path: dir.join("kubeconfig"),
            reachable,
        };
        kubeconfig.point(
            &kubeconfig
                .reachable
                .replace(bed.server_url(), "https://127.0.0.1:1"),
        )?;
        Ok(kubeconfig)
    }

    fn point(&self, text: &str) -> std::io::Result<()> {
        let next = self.path.with_extension("next");
        std::fs::write(&next, text)?;
        std::fs::rename(&next, &self.path)
    }

    /// From now on the kubeconfig names the test bed's API server.
    fn reach(&self) -> std::io::Result<()> {
        self.point(&self.reachable)
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
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
    let kubeconfig = Switchable::new(bed, dir.path())?;
    let addr = free_addr();
    let log = dir.path().join("serve.log");
    let mut serve = command()
        .args(["serve", "--listen", &addr, "--interval-seconds", "2"])
        .args(["pods", "-n", name, "--retention-seconds", "3600"])
        .args(["--kubeconfig", kubeconfig.path()])
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
    kubeconfig.reach()?;
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

/// The chart's dashboard ConfigMap's dashboard.
fn dashboard() -> Value {
    let map = rendered_chart()
        .into_iter()
        .find(|o| o["kind"] == "ConfigMap" && o["data"].get("gc.json").is_some())
        .expect("the dashboard's ConfigMap");
    serde_json::from_str(map["data"]["gc.json"].as_str().unwrap()).unwrap()
}

/// Every query of the dashboard's panels: (panel title, refId, expression).
fn panel_queries(dashboard: &Value) -> Vec<(String, String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            queries.push((
                panel["title"].as_str().unwrap().to_owned(),
                t["refId"].as_str().unwrap().to_owned(),
                t["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    queries
}

/// `expr` as Grafana sends it with the prefix `streamspace`, one collector and one namespace
/// chosen, and a rate interval of a minute (four scrapes of this test's Prometheus and more).
fn filled(expr: &str, collector: &str, namespace: &str) -> String {
    expr.replace("${prefix}", "streamspace")
        .replace("$collector", collector)
        .replace("$namespace", namespace)
        .replace("$__rate_interval", "1m")
}

/// The samples of an instant query, as (the labels `keys` name, joined by `/`, value), sorted.
fn samples(prometheus: &Prometheus, query: &str, keys: &[&str]) -> Vec<(String, f64)> {
    let answer = prometheus.query(query).unwrap();
    assert_eq!(answer["status"], "success", "{query}: {answer}");
    let mut found: Vec<(String, f64)> = answer["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let labels: Vec<&str> = keys
                .iter()
                .map(|k| r["metric"][k].as_str().unwrap_or("-"))
                .collect();
            let value = r["value"][1].as_str().unwrap().parse().unwrap();
            (labels.join("/"), value)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// A panel's query filled in for `collector` and `namespace`: the one query of `title`, or its
/// query `ref_id`.
fn panel(dashboard: &Value, title: &str, ref_id: &str, collector: &str, namespace: &str) -> String {
    let queries = panel_queries(dashboard);
    let (_, _, expr) = queries
        .iter()
        .find(|(t, r, _)| t == title && r == ref_id)
        .unwrap_or_else(|| panic!("no query {ref_id} in panel {title:?}"));
    filled(expr, collector, namespace)
}

/// Every panel and variable of the dashboard on a real Prometheus scraping a real Pushgateway,
/// after real runs in one namespace: a failed run (the errors panel names its stage, the result
/// panel shows 0 and no success age); a live run over four failed Pods, one inside retention,
/// capped at two (scanned 4, eligible 4, held 1, deferred 1, deleted 2, the archive bytes of the
/// two receipts, a success a moment ago); an apply whose one target changed after its plan (a
/// fence lost at the step that found it, nothing deleted).
#[tokio::test]
async fn dashboard_panels_show_what_pushed_runs_did() -> Result {
    let (Some(bin), Some(gateway)) = (prometheus_bin(), pushgateway()) else {
        return Ok(());
    };
    let (bed, ns) = namespace("dashboard").await?;
    let name = ns.name();
    let dir = tempfile::tempdir()?;
    let store = sqlite(dir.path(), "s.db");
    let archives = dir.path().join("a");
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let gc = |args: &[&str]| {
        let out = command()
            .args(args)
            .args(["--store", &store])
            .env_remove("GC_ALERT_WEBHOOK")
            .env_remove("GC_METRICS_FILE")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.stdout,
        )
    };
    // The Pushgateway outlives test runs: a group of this namespace's name is an earlier run's.
    let group = format!("{gateway}/metrics/job/gc/collector/pods/namespace/{name}");
    let deleted = Command::new("curl")
        .args(["-fsS", "-X", "DELETE", &group])
        .status()?;
    assert!(deleted.success());
    let push = [
        "--pushgateway",
        &gateway,
        "--metrics-prefix",
        "streamspace",
        "--archive-dir",
        archives.to_str().unwrap(),
    ];
    let addr = gateway.trim_start_matches("http://").trim_end_matches('/');
    let prometheus = Prometheus::start(
        &bin,
        "groups: []\n",
        Target::Pushgateway {
            addr,
            namespace: name,
        },
    );
    let board = dashboard();
    let shown = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let show = |title: &str, ref_id: &str, keys: &[&str]| {
        shown
            .borrow_mut()
            .insert((title.to_owned(), ref_id.to_owned()));
        samples(
            &prometheus,
            &panel(&board, title, ref_id, "pods", name),
            keys,
        )
    };
    let attempt = format!(
        r#"streamspace_last_attempt_timestamp_seconds{{collector="pods",namespace="{name}"}}"#
    );
    let mut last = 0.0;
    let mut scraped = |prometheus: &Prometheus| {
        last = prometheus.wait_for_value(&attempt, |a| a > last);
    };
    let one = |v: f64| vec![(name.to_owned(), v)];
    let keys = ["namespace"];
    let by_stage = ["namespace", "stage"];

    // A failed run: the cluster unreachable.
    let (ok, log, _) = gc(&[
        &["run", "pods", "-n", name, "--retention-seconds", "3600"][..],
        &["--api-url", "https://127.0.0.1:1", "--trust-certs"],
        &push,
    ]
    .concat());
    assert!(!ok, "{log}");
    scraped(&prometheus);
    assert_eq!(show("Last run result", "A", &keys), one(0.0));
    assert_eq!(show("Last success age", "A", &keys), []);
    assert_eq!(
        show("Errors by stage", "A", &by_stage),
        [(format!("{name}/run"), 1.0)]
    );
    assert_eq!(show("Fences lost by stage", "A", &by_stage), []);

    // A live run over four failed Pods: three due, one inside retention, at most two a run.
    for pod in ["due-1", "due-2", "due-3"] {
        target(&ns, pod).await?;
    }
    gc_testbed::FailedPod::new("recent")
        .label(COLLECT, "true")
        .finished_at(k8s_openapi::jiff::Timestamp::now())
        .create(&ns.api::<k8s_openapi::api::core::v1::Pod>())
        .await?;
    let started = std::time::SystemTime::now();
    let (ok, log, _) = gc(&[
        &[
            "run",
            "pods",
            "-n",
            name,
            "--retention-seconds",
            "3600",
            "--max-pods",
            "2",
        ][..],
        &[
            "--dry-run=none",
            "--auto-remediate",
            "--kubeconfig",
            &kubeconfig,
        ],
        &push,
    ]
    .concat());
    assert!(ok, "{log}");
    scraped(&prometheus);
    assert_eq!(show("Last run result", "A", &keys), one(1.0));
    let age = show("Last success age", "A", &keys);
    let since = started.elapsed()?.as_secs_f64();
    assert!(
        age.len() == 1 && age[0].1 >= 0.0 && age[0].1 <= since + 2.0,
        "{age:?} {since}"
    );
    for (ref_id, count) in [("A", 4.0), ("B", 4.0), ("C", 1.0), ("D", 1.0), ("E", 2.0)] {
        assert_eq!(
            show("Objects per run", ref_id, &keys),
            one(count),
            "{ref_id}"
        );
    }
    assert_eq!(show("Errors by stage", "A", &by_stage), []);
    // The archive bytes are those of the two receipts.
    let (ok, log, listed) = gc(&["archives", "list", "-n", name, "-o", "json"]);
    assert!(ok, "{log}");
    let listed: Vec<Value> = serde_json::from_slice(&listed)?;
    assert_eq!(listed.len(), 2);
    let bytes: f64 = listed.iter().map(|r| r["bytes"].as_f64().unwrap()).sum();
    assert_eq!(show("Archive bytes per run", "A", &keys), one(bytes));
    let duration = show("Run duration", "A", &keys);
    assert!(
        duration.len() == 1 && duration[0].1 > 0.0 && duration[0].1 < since + 1.0,
        "{duration:?}"
    );

    // A plan of the one due Pod left, the Pod changed, then the plan applied.
    let plan = dir.path().join("plan.json");
    let policy = ["-n", name, "--retention-seconds", "3600", "--max-pods", "2"];
    let (ok, log, _) = gc(&[
        &[
            "plan",
            "pods",
            "--kubeconfig",
            &kubeconfig,
            "--out",
            plan.to_str().unwrap(),
        ][..],
        &policy,
    ]
    .concat());
    assert!(ok, "{log}");
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let left: Vec<String> = pods
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| n.starts_with("due-"))
        .collect();
    let [due] = &left[..] else {
        panic!("one due Pod left: {left:?}");
    };
    let label = serde_json::json!({"metadata": {"labels": {"changed": "after-the-plan"}}});
    pods.patch(
        due,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&label),
    )
    .await?;
    let (ok, log, _) = gc(&[
        &[
            "apply",
            plan.to_str().unwrap(),
            "--cluster-id",
            "primary",
            "--kubeconfig",
            &kubeconfig,
        ][..],
        &policy,
        &push,
    ]
    .concat());
    // A changed target is not a failure: the run succeeds, and the object is left alone.
    assert!(ok, "{log}");
    scraped(&prometheus);
    assert_eq!(
        show("Fences lost by stage", "A", &by_stage),
        [(format!("{name}/Reread"), 1.0)]
    );
    assert_eq!(show("Last run result", "A", &keys), one(1.0));
    assert_eq!(show("Objects per run", "E", &keys), one(0.0));
    assert!(pods.get_opt(due).await?.is_some());

    // The variables: the collector and the namespace the runs published.
    let label_values = |label: &str, matcher: &str| -> Vec<String> {
        let text = curl(
            &format!("{}/api/v1/label/{label}/values", prometheus.url),
            &[("match[]", matcher)],
        )
        .unwrap();
        let answer: Value = serde_json::from_str(&text).unwrap();
        serde_json::from_value(answer["data"].clone()).unwrap()
    };
    for variable in board["templating"]["list"].as_array().unwrap() {
        let Some(query) = variable["query"]["query"].as_str() else {
            continue;
        };
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap();
        let (matcher, label) = inner.rsplit_once(", ").unwrap();
        let matcher = filled(matcher, "pods", name);
        let want = match variable["name"].as_str().unwrap() {
            "collector" => "pods",
            "namespace" => name,
            other => panic!("a variable this test does not know: {other}"),
        };
        assert_eq!(label_values(label, &matcher), [want], "{query}");
    }
    let listed: std::collections::BTreeSet<(String, String)> = PUSHED_PANELS
        .iter()
        .map(|(t, r)| ((*t).to_owned(), (*r).to_owned()))
        .collect();
    assert_eq!(shown.into_inner(), listed);
    Ok(())
}

/// The queries `dashboard_panels_show_what_pushed_runs_did` proves, and those
/// `dashboard_rates_show_what_serve_did` proves: together, every query of the dashboard.
const PUSHED_PANELS: [(&str, &str); 11] = [
    ("Last success age", "A"),
    ("Last run result", "A"),
    ("Run duration", "A"),
    ("Objects per run", "A"),
    ("Objects per run", "B"),
    ("Objects per run", "C"),
    ("Objects per run", "D"),
    ("Objects per run", "E"),
    ("Fences lost by stage", "A"),
    ("Errors by stage", "A"),
    ("Archive bytes per run", "A"),
];
const SERVE_PANELS: [(&str, &str); 4] = [
    ("Runs per hour by result", "A"),
    ("Objects deleted per hour", "A"),
    ("Errors and fences lost per hour", "A"),
    ("Errors and fences lost per hour", "B"),
];

/// No panel query goes unproven: the two tests' lists are the dashboard's queries, each once.
#[test]
fn every_dashboard_query_is_proven_by_a_run() {
    let mut proven: Vec<(String, String)> = PUSHED_PANELS
        .iter()
        .chain(&SERVE_PANELS)
        .map(|(t, r)| ((*t).to_owned(), (*r).to_owned()))
        .collect();
    proven.sort();
    let mut queries: Vec<(String, String)> = panel_queries(&dashboard())
        .into_iter()
        .map(|(t, r, _)| (t, r))
        .collect();
    queries.sort();
    assert_eq!(proven, queries);
    // Each query selects by the variables, so a chosen collector and namespace narrow it.
    for (title, _, expr) in panel_queries(&dashboard()) {
        for variable in [
            "${prefix}_",
            r#"collector=~"$collector""#,
            r#"namespace=~"$namespace""#,
        ] {
            assert!(expr.contains(variable), "{title}: {expr} lacks {variable}");
        }
    }
}

/// The `serve` panels on a real Prometheus scraping a real `gc-cli serve`: runs failing first
/// (the cluster unreachable), then succeeding and deleting two due Pods one a run: the runs
/// panel shows both results per hour and no stopped run, the deleted panel Pods, the errors
/// panel the `run` stage and no lost fence.
#[tokio::test]
async fn dashboard_rates_show_what_serve_did() -> Result {
    let Some(bin) = prometheus_bin() else {
        return Ok(());
    };
    let (bed, ns) = namespace("dashboard-serve").await?;
    let name = ns.name();
    let dir = tempfile::tempdir()?;
    let kubeconfig = Switchable::new(bed, dir.path())?;
    for pod in ["due-1", "due-2"] {
        target(&ns, pod).await?;
    }
    let addr = free_addr();
    let mut serve = command()
        .args(["serve", "--listen", &addr, "--interval-seconds", "1"])
        .args([
            "pods",
            "-n",
            name,
            "--retention-seconds",
            "3600",
            "--max-pods",
            "1",
        ])
        .args(["--dry-run=none", "--auto-remediate"])
        .args(["--kubeconfig", kubeconfig.path()])
        .args(["--store", &sqlite(dir.path(), "s.db")])
        .args(["--archive-dir", dir.path().join("a").to_str().unwrap()])
        .args(["--metrics-prefix", "streamspace"])
        .env_remove("GC_PUSHGATEWAY")
        .env_remove("GC_ALERT_WEBHOOK")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let prometheus = Prometheus::start(&bin, "groups: []\n", Target::Serve { addr: &addr });
    let board = dashboard();
    let show = |title: &str, ref_id: &str, keys: &[&str]| {
        samples(
            &prometheus,
            &panel(&board, title, ref_id, "pods", name),
            keys,
        )
    };
    let runs =
        |result: &str| format!(r#"streamspace_runs_total{{namespace="{name}",result="{result}"}}"#);
    // Failures Prometheus saw happen (not only their count at its first scrape).
    let first = prometheus.wait_for_value(&runs("failure"), |_| true);
    prometheus.wait_for_value(&runs("failure"), |n| n >= first + 2.0);
    kubeconfig.reach()?;
    let deleted = format!(r#"streamspace_objects_deleted_total{{namespace="{name}"}}"#);
    prometheus.wait_for_value(&deleted, |n| n >= 2.0);
    prometheus.wait_for_value(&runs("success"), |n| n >= 3.0);
    serve.kill()?;
    serve.wait()?;

    let rates = show("Runs per hour by result", "A", &["result"]);
    let rate = |of: &[(String, f64)], key: &str| {
        of.iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("no {key} in {of:?}"))
            .1
    };
    assert!(rate(&rates, "failure") > 0.0, "{rates:?}");
    assert!(rate(&rates, "success") > 0.0, "{rates:?}");
    assert_eq!(rate(&rates, "stopped"), 0.0, "{rates:?}");
    let deletes = show("Objects deleted per hour", "A", &["kind"]);
    assert!(
        deletes.len() == 1 && rate(&deletes, "Pod") > 0.0,
        "{deletes:?}"
    );
    let errors = show("Errors and fences lost per hour", "A", &["stage"]);
    assert!(rate(&errors, "run") > 0.0, "{errors:?}");
    assert!(
        errors.iter().all(|(stage, v)| stage == "run" || *v == 0.0),
        "{errors:?}"
    );
    let fences = show("Errors and fences lost per hour", "B", &["stage"]);
    assert!(
        !fences.is_empty() && fences.iter().all(|(_, v)| *v == 0.0),
        "{fences:?}"
    );
    assert!(
        ns.api::<k8s_openapi::api::core::v1::Pod>()
            .list(&Default::default())
            .await?
            .items
            .is_empty()
    );
    Ok(())
}
