//! Metrics pushed to a real Pushgateway and read back; a failure alert received by a local
//! webhook in Slack's format; metrics written to a file (privately, never through a planted
//! symlink); a stalled Pushgateway or webhook given up on in bounded time; a webhook URL never
//! shown.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gc_core::ports::Store as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;

mod common;

use common::{
    PIN, Result, Webhook, command, namespace, pushed, pushgateway, run_pods, scrape, sqlite, target,
};

/// `gc-cli run pods` in `batch` against an API server that is not there, its store in `dir`.
fn unreachable_run(dir: &Path) -> Command {
    unreachable_run_in(dir, "batch")
}

/// `gc-cli run pods` in `ns` against an API server that is not there, its store in `dir`.
fn unreachable_run_in(dir: &Path, ns: &str) -> Command {
    let mut c = command();
    c.args(["run", "pods", "-n", ns])
        .args(["--api-url", "https://127.0.0.1:1", "--trust-certs"])
        .args(["--store", &sqlite(dir, "s.db")]);
    c
}

#[test]
fn a_failed_run_alerts_the_webhook_and_counts_the_error() {
    let hook = Webhook::start();
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("gc.prom");
    let out = unreachable_run(dir.path())
        .args([
            "--alert-webhook",
            &hook.url,
            "--metrics-file",
            metrics.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let texts = hook.texts();
    let [text] = &texts[..] else {
        panic!("one alert: {texts:?}")
    };
    assert!(
        text.contains("pods collector failed in namespace batch")
            && text.contains("cannot connect"),
        "{text}"
    );
    // `run pods` connects and takes the lock before it recovers and plans: an unreachable
    // cluster is a failure of the run, not of the plan.
    let exposition = std::fs::read_to_string(&metrics).unwrap();
    for line in [
        r#"gc_last_run_errors{collector="pods",namespace="batch",stage="run"} 1"#,
        r#"gc_last_run_success{collector="pods",namespace="batch"} 0"#,
        "# TYPE gc_last_run_errors gauge",
    ] {
        assert!(exposition.contains(line), "{line}: {exposition}");
    }
    assert!(
        !exposition.contains("_total") && !exposition.contains("# EOF"),
        "gauges in the text format: {exposition}"
    );
}

/// Several webhooks, each in its format: Slack's `{"text"}` (the default), a Teams message card,
/// an Adaptive Card message and the JSON body with its counts; a format prefix that names none is refused (exit 2)
/// without showing the URL.
#[test]
fn each_webhook_gets_the_alert_in_its_format() {
    let (slack, teams, json) = (Webhook::start(), Webhook::start(), Webhook::start());
    let adaptive = Webhook::start();
    let dir = tempfile::tempdir().unwrap();
    let out = unreachable_run(dir.path())
        .env_remove("GC_ALERT_WEBHOOK")
        .env_remove("GC_ALERT_FORMAT")
        .args(["--alert-webhook", &slack.url])
        .args(["--alert-webhook", &format!("teams={}", teams.url)])
        .args(["--alert-webhook", &format!("json={}", json.url)])
        .args(["--alert-webhook", &format!("adaptive={}", adaptive.url)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let [text] = &slack.texts()[..] else {
        panic!("one Slack alert: {:?}", slack.texts())
    };
    assert!(
        text.contains("pods collector failed in namespace batch"),
        "{text}"
    );
    let [card] = &teams.bodies()[..] else {
        panic!("one Teams alert: {:?}", teams.bodies())
    };
    assert_eq!(card["@type"], "MessageCard");
    assert_eq!(card["title"], "gc pods collector failed in namespace batch");
    assert_eq!(card["themeColor"], "D70000");
    let [message] = &adaptive.bodies()[..] else {
        panic!("one Adaptive Card alert: {:?}", adaptive.bodies())
    };
    assert_eq!(message["type"], "message");
    let [attachment] = &message["attachments"].as_array().unwrap()[..] else {
        panic!("one attachment: {message}")
    };
    assert_eq!(
        attachment["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    let card = &attachment["content"];
    assert_eq!(card["type"], "AdaptiveCard");
    let blocks = card["body"].as_array().unwrap();
    assert_eq!(
        blocks[0]["text"],
        "gc pods collector failed in namespace batch"
    );
    assert_eq!(blocks[0]["color"], "Attention");
    assert!(
        blocks[1]["text"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{message}"
    );
    let facts = blocks[2]["facts"].as_array().unwrap();
    let fact = |name: &str| {
        facts
            .iter()
            .find(|f| f["title"] == name)
            .map(|f| f["value"].clone())
    };
    assert_eq!(fact("errors"), Some(serde_json::json!("1")), "{message}");
    assert!(
        fact("runId")
            .unwrap()
            .as_str()
            .unwrap()
            .starts_with("pods-batch-")
    );
    let [body] = &json.bodies()[..] else {
        panic!("one JSON alert: {:?}", json.bodies())
    };
    assert_eq!(
        (&body["collector"], &body["namespace"], &body["outcome"]),
        (
            &serde_json::json!("pods"),
            &serde_json::json!("batch"),
            &serde_json::json!("failed")
        )
    );
    assert!(
        body["error"].as_str().unwrap().contains("cannot connect"),
        "{body}"
    );
    assert_eq!(body["counts"]["errors"], 1, "{body}");
    assert!(
        body["runId"].as_str().unwrap().starts_with("pods-batch-"),
        "{body}"
    );
    // `--alert-format` sets the format of a webhook without a prefix.
    let plain = Webhook::start();
    let out = unreachable_run(dir.path())
        .env_remove("GC_ALERT_WEBHOOK")
        .args(["--alert-webhook", &plain.url, "--alert-format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(plain.bodies()[0]["outcome"], "failed");
    let secret = "discord=https://hooks.example.com/Sekr1t";
    let out = unreachable_run(dir.path())
        .args(["--alert-webhook", secret])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is not slack, teams, adaptive or json") && !stderr.contains("Sekr1t"),
        "{stderr}"
    );
}

/// A loopback port that accepts connections and never answers; how many it accepted.
fn stalled() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (url, accepted)
}

/// `gc-cli run pods` against an API server that is not there (the run fails at once), with
/// `extra` flags and environment; killed and reported when it outlives `bound`.
fn failing_run(extra: &[&str], env: &[(&str, &str)], bound: Duration) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut child = unreachable_run(dir.path())
        .args(extra)
        .env_remove("GC_ALERT_WEBHOOK")
        .env_remove("GC_PUSHGATEWAY")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "gc-cli still running after {bound:?}: a stalled endpoint hangs the run\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_stalled_pushgateway_and_webhook_time_out_and_are_reported() {
    let (gateway, pushes) = stalled();
    let gateway = gateway.replace("http://", "http://gc:Push-Pw@");
    let (hook, posts) = stalled();
    let hook = format!("{hook}/services/T000/B000/Sekr1t-Hook-Path");
    // Each call gives up after 10 seconds; the bound is generous, not a measurement.
    let out = failing_run(
        &["--pushgateway", &gateway, "--alert-webhook", &hook],
        &[],
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot connect"),
        "the run's own error: {stderr}"
    );
    let push = stderr
        .lines()
        .find(|l| l.contains("cannot push metrics"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let gateway_shown = gateway.replace("gc:Push-Pw", "***");
    assert!(
        push.contains(&format!("{gateway_shown}/metrics/job/gc/collector/pods"))
            && push.contains("no answer within 10 seconds"),
        "{push}"
    );
    let alert = stderr
        .lines()
        .find(|l| l.contains("cannot post the alert"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let hook_host = hook.split("/services").next().unwrap();
    assert!(
        alert.contains("--alert-webhook")
            && alert.contains(hook_host)
            && alert.contains("no answer within 10 seconds"),
        "{alert}"
    );
    assert!(
        !stderr.contains("Sekr1t-Hook-Path") && !stderr.contains("Push-Pw"),
        "{stderr}"
    );
    // Both were tried: a stalled Pushgateway does not swallow the alert.
    assert!(pushes.load(Ordering::SeqCst) >= 1 && posts.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_webhook_url_without_a_scheme_is_never_echoed() {
    // Scheme-relative, host and path, path only: the path is the secret.
    let secrets = [
        "//hooks.example.com/services/T000/B000/Sekr1t-Hook-Path",
        "hooks.example.com/services/T000/B000/Sekr1t-Hook-Path",
        "/services/T000/B000/Sekr1t-Hook-Path",
    ];
    for secret in secrets {
        let from_flag = failing_run(&["--alert-webhook", secret], &[], Duration::from_secs(60));
        let from_env = failing_run(
            &[],
            &[("GC_ALERT_WEBHOOK", secret)],
            Duration::from_secs(60),
        );
        for out in [from_flag, from_env] {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(
                !stderr.contains("Sekr1t") && !stderr.contains("hooks.example.com"),
                "{secret}: {stderr}"
            );
            assert!(
                stderr.contains("--alert-webhook or $GC_ALERT_WEBHOOK")
                    && stderr.contains("has no scheme"),
                "{secret}: {stderr}"
            );
            assert!(!String::from_utf8_lossy(&out.stdout).contains("Sekr1t"));
        }
    }
}

#[cfg(unix)]
#[test]
fn the_metrics_file_is_private_and_planted_symlinks_are_not_followed() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    // The names an earlier version wrote through, planted.
    for planted in ["gc.tmp", "gc.prom.tmp"] {
        symlink(&victim, dir.path().join(planted)).unwrap();
    }
    let metrics = dir.path().join("gc.prom");
    let out = failing_run(
        &["--metrics-file", metrics.to_str().unwrap()],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    let meta = std::fs::symlink_metadata(&metrics).unwrap();
    assert!(meta.file_type().is_file(), "a plain file, not a symlink");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(
        std::fs::read_to_string(&metrics)
            .unwrap()
            .contains(r#"gc_last_run_errors{collector="pods",namespace="batch",stage="#)
    );
}

/// A successful run's metrics reach the Pushgateway; a failed run's replace every per-run series
/// of the group (a stage or kind it did not touch reads 0) and keep the last success, in the
/// Pushgateway and in the metrics file.
#[tokio::test]
async fn metrics_reach_a_real_pushgateway() -> Result {
    let Some(gateway) = pushgateway() else {
        return Ok(());
    };
    let (bed, ns) = namespace("metrics").await?;
    for i in 0..3 {
        target(&ns, &format!("p{i}")).await?;
    }
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("gc.prom");
    let delivery = [
        "--pushgateway",
        &gateway,
        "--metrics-prefix",
        "streamspace",
        "--metrics-file",
        file.to_str().unwrap(),
    ];
    let out = command()
        .args(run_pods(ns.name()))
        .args(["--max-pods", "2"])
        .args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()])
        .args(["--store", &sqlite(dir.path(), "s.db")])
        .args(["--archive-dir", dir.path().join("a").to_str().unwrap()])
        .args(delivery)
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = scrape(&gateway);
    let value = |text: &str, name: &str, extra: Option<&str>| {
        pushed(text, &format!("streamspace_{name}"), ns.name(), extra)
    };
    assert_eq!(
        value(&text, "last_run_objects_scanned", None),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "last_run_objects_deferred", None),
        Some(1.0),
        "{text}"
    );
    assert_eq!(value(&text, "last_run_success", None), Some(1.0), "{text}");
    let success = value(&text, "last_success_timestamp_seconds", None);
    assert!(success.is_some_and(|at| at > 1.7e9), "{text}");
    assert_eq!(
        value(&text, "last_attempt_timestamp_seconds", None),
        success
    );

    // The same group, from a run that cannot reach the cluster.
    let out = unreachable_run_in(dir.path(), ns.name())
        .args(delivery)
        .output()?;
    assert_eq!(out.status.code(), Some(1));
    let text = scrape(&gateway);
    let stage = |s: &str| format!("stage=\"{s}\"");
    assert_eq!(value(&text, "last_run_success", None), Some(0.0), "{text}");
    assert_eq!(
        value(&text, "last_run_errors", Some(&stage("run"))),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "last_run_errors", Some(&stage("Pin"))),
        Some(0.0)
    );
    assert_eq!(
        value(&text, "last_run_objects_scanned", None),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "last_success_timestamp_seconds", None),
        success,
        "a failure keeps the last success: {text}"
    );
    let attempt = value(&text, "last_attempt_timestamp_seconds", None);
    assert!(attempt > success, "{text}");
    let file = std::fs::read_to_string(&file)?;
    assert!(
        file.contains(&format!(
            "streamspace_last_success_timestamp_seconds{{collector=\"pods\",namespace=\"{}\"}} ",
            ns.name()
        )) && file.contains("streamspace_last_run_success{collector=\"pods\""),
        "{file}"
    );
    Ok(())
}

/// One `GET` on `addr`: the status, the content type and the body.
fn get(addr: &str, path: &str, accept: &str) -> std::io::Result<(u16, String, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\naccept: {accept}\r\nconnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    Ok((status, content_type, body.to_owned()))
}

/// Prometheus' Accept header (2.42).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A `gc-cli serve` on a free loopback port.
struct Served {
    child: std::process::Child,
    addr: String,
}

impl Served {
    /// Starts `gc-cli serve --interval-seconds interval` with the collector's `run` arguments.
    fn start(interval: u64, run: &[&str]) -> Self {
        Self::start_with(&["--interval-seconds", &interval.to_string()], run)
    }

    /// Starts `gc-cli serve` with its own flags `serve` and the collector's `run` arguments.
    fn start_with(serve: &[&str], run: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = command()
            .args(["serve", "--listen", &addr])
            .args(serve)
            .args(run)
            .env_remove("GC_PUSHGATEWAY")
            .env_remove("GC_ALERT_WEBHOOK")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self { child, addr }
    }

    /// `/metrics` as Prometheus gets it, once it has a sample `name{labels}` for which `until`
    /// holds; its value. Panics after 60 seconds.
    fn metrics_until(
        &self,
        name: &str,
        labels: &str,
        until: impl Fn(f64) -> bool,
    ) -> (String, f64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let prefix = format!("{name}{{{labels}}} ");
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok((200, _, text)) = get(&self.addr, "/metrics", PROMETHEUS_ACCEPT) {
                let value = text
                    .lines()
                    .find_map(|l| l.strip_prefix(prefix.as_str())?.parse::<f64>().ok());
                if let Some(value) = value.filter(|v| until(*v)) {
                    return (text, value);
                }
                last = text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no {name}{{{labels}}} as expected within 60s; last /metrics:\n{last}");
    }

    /// Sends `signal` (`-TERM`, `-INT`) to the process.
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits for the exit (killing the process after `bound`): the status, its stderr and how
    /// long it took.
    fn exit_within(mut self, bound: Duration) -> (std::process::ExitStatus, String, Duration) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > bound {
                self.child.kill().unwrap();
                panic!(
                    "gc-cli serve still running {bound:?} after the signal\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status, self.stderr(), started.elapsed())
    }

    /// What the process wrote to stderr (once it exited).
    fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn serve_runs_on_a_schedule_and_serves_metrics() -> Result {
    let (bed, ns) = namespace("serve").await?;
    target(&ns, "p").await?;
    let dir = tempfile::tempdir()?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut child = command()
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--interval-seconds",
            "3",
            "--runs",
            "2",
        ])
        .args([
            "pods",
            "-n",
            ns.name(),
            "--retention-seconds",
            "3600",
            "--kubeconfig",
            bed.kubeconfig_path().to_str().unwrap(),
        ])
        .args(["--store", &sqlite(dir.path(), "s.db")])
        .args(["--archive-dir", dir.path().join("a").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let mut text = String::new();
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = Command::new("curl").args(["-fsS", &url]).output()?;
        text = String::from_utf8(out.stdout)?;
        if text.contains("gc_objects_scanned_total") {
            break;
        }
    }
    let pod = format!(
        r#"{{collector="pods",kind="Pod",namespace="{}"}}"#,
        ns.name()
    );
    for line in [
        format!("gc_objects_scanned_total{pod} 1"),
        format!("gc_last_run_objects_scanned{pod} 1"),
        "# TYPE gc_objects_scanned_total counter".into(),
    ] {
        assert!(text.contains(&line), "{line}: {text}");
    }
    assert!(!text.contains("# EOF"), "the text format for curl: {text}");
    let addr = format!("127.0.0.1:{port}");
    let (status, content_type, body) = get(&addr, "/metrics", PROMETHEUS_ACCEPT)?;
    assert_eq!(
        (status, content_type.as_str()),
        (
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        )
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    let (status, content_type, _) = get(&addr, "/metrics", "*/*")?;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(get(&addr, "/healthz", "*/*")?.0, 200);
    assert_eq!(get(&addr, "/nothing", "*/*")?.0, 404);
    assert!(child.wait()?.success());
    Ok(())
}

/// `serve`'s counters add up its runs (they never go down between scrapes) while its gauges
/// describe the last run; a SIGTERM while it sleeps between runs ends it at once, with status 0.
#[test]
fn serve_counts_every_run_and_a_sigterm_ends_its_sleep_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path(), "s.db");
    let unreachable = [
        "pods",
        "-n",
        "batch",
        "--api-url",
        "https://127.0.0.1:1",
        "--trust-certs",
        "--store",
        &store,
    ];
    let ns = r#"collector="pods",namespace="batch""#;
    let failures = format!(r#"{ns},result="failure""#);
    let run_stage = format!(r#"{ns},stage="run""#);
    let served = Served::start(1, &unreachable);
    let mut seen = Vec::new();
    for runs in 1..=3 {
        let (text, _) = served.metrics_until("gc_runs_total", &failures, |n| n >= f64::from(runs));
        let value = |name: &str, labels: &str| {
            let prefix = format!("{name}{{{labels}}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str())?.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no {prefix}in {text}"))
        };
        let errors = value("gc_errors_total", &run_stage);
        assert_eq!(errors, value("gc_runs_total", &failures), "{text}");
        assert_eq!(value("gc_last_run_errors", &run_stage), 1.0, "{text}");
        assert_eq!(value("gc_last_run_success", ns), 0.0, "{text}");
        seen.push(errors);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    drop(served);

    let served = Served::start(3600, &unreachable);
    served.metrics_until("gc_runs_total", &failures, |n| n >= 1.0);
    served.signal("-TERM");
    let (status, stderr, took) = served.exit_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(2), "{took:?}: {stderr}");
    assert!(
        stderr.contains("SIGTERM received: exiting after 1 run(s)")
            && !stderr.contains("run 2 starting"),
        "{stderr}"
    );
}

/// How many failed Pods the signal tests collect (within `--max-pods 50`).
const TARGETS: usize = 40;

/// A namespace holding [`TARGETS`] failed Pods due for collection, their uids by name, and the
/// flags of a live `pods` run there (its store and archives in `dir`).
async fn live_targets(
    prefix: &str,
    dir: &Path,
) -> Result<(
    gc_testbed::TestNamespace,
    BTreeMap<String, String>,
    Vec<String>,
)> {
    let (bed, ns) = namespace(prefix).await?;
    let mut uids = BTreeMap::new();
    for i in 0..TARGETS {
        let pod = target(&ns, &format!("t-{i:02}")).await?;
        uids.insert(pod.metadata.name.unwrap(), pod.metadata.uid.unwrap());
    }
    let flags = [
        "pods",
        "-n",
        ns.name(),
        "--retention-seconds",
        "3600",
        "--max-pods",
        "50",
        "--dry-run",
        "false",
        "--auto-remediate",
        "--kubeconfig",
        bed.kubeconfig_path().to_str().unwrap(),
        "--store",
        &sqlite(dir, "s.db"),
        "--archive-dir",
        dir.join("a").to_str().unwrap(),
    ]
    .map(str::to_owned)
    .to_vec();
    Ok((ns, uids, flags))
}

/// The finalizers of the Pods left in `ns`, by name.
async fn pods_left(ns: &gc_testbed::TestNamespace) -> Result<BTreeMap<String, Vec<String>>> {
    let list = ns.api::<Pod>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|p| {
            let finalizers = p.metadata.finalizers.unwrap_or_default();
            (p.metadata.name.unwrap(), finalizers)
        })
        .collect())
}

/// Waits (at most 60 s) until the run in `child` collected at least one target, then sends it
/// SIGTERM; panics when the run ended first.
async fn sigterm_mid_run(
    ns: &gc_testbed::TestNamespace,
    child: &mut std::process::Child,
) -> Result {
    let deadline = Instant::now() + Duration::from_secs(60);
    while pods_left(ns).await?.len() == TARGETS {
        assert!(
            child.try_wait()?.is_none(),
            "the run ended before collecting anything"
        );
        assert!(Instant::now() < deadline, "nothing collected within 60s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    assert!(sent.success());
    Ok(())
}

/// After a run stopped by a signal: the run lock is released; every target is collected (Pod
/// gone, its receipt stored, its archive matching it) or untouched (no pin, no receipt), but the
/// one in progress when the signal came, which may keep its pin: the engine checks the stop flag
/// before each write, not only between targets. The next run's recovery finishes it and the
/// next run collects everything. The number of targets the stopped run collected.
async fn after_the_signal(
    ns: &gc_testbed::TestNamespace,
    uids: &BTreeMap<String, String>,
    flags: &[String],
    dir: &Path,
) -> Result<usize> {
    let lease = ns.api::<Lease>().get_opt("gc-pods").await?;
    let holder = lease.and_then(|l| l.spec?.holder_identity);
    assert!(
        holder.as_deref().is_none_or(str::is_empty),
        "the lock is released: {holder:?}"
    );
    let left = pods_left(ns).await?;
    let pinned: Vec<&String> = left
        .iter()
        .filter(|(_, finalizers)| finalizers.iter().any(|f| f == PIN))
        .map(|(name, _)| name)
        .collect();
    assert!(pinned.is_empty(), "pins left: {pinned:?}");
    let collected = uids.len() - left.len();
    eprintln!("after the signal: {collected} collected, pins left on {pinned:?}");
    assert!(
        collected >= 1 && !left.is_empty(),
        "the signal stopped the run mid-way: {collected} collected"
    );
    let store = gc_store::open(&sqlite(dir, "s.db")).await?;
    let mut receipts = 0;
    for (name, uid) in uids {
        let receipt = store.get_receipt("primary", uid).await?.is_some();
        // The pinned one may have stopped before or after its receipt.
        if !pinned.contains(&name) {
            assert_eq!(receipt, !left.contains_key(name), "{name}");
        }
        receipts += usize::from(receipt);
    }
    store.close().await;
    let verify = |expected: usize| {
        let out = command()
            .args(["archives", "verify"])
            .args(["--store", &sqlite(dir, "s.db")])
            .args(["--archive-dir", dir.join("a").to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success()
                && stderr.contains(&format!(
                    "{expected} archive(s) match their receipts, 0 problem(s)"
                )),
            "{stderr}"
        );
    };
    verify(receipts);
    let out = command().arg("run").args(flags).output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = pods_left(ns).await?;
    assert!(
        left.is_empty(),
        "the next run collects the rest: {left:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    verify(uids.len());
    Ok(collected)
}

/// SIGTERM while `serve` collects: nothing more is written, no other target or run starts, the
/// run releases its lock, the process exits 0 at once; the next run finishes the rest.
#[tokio::test]
async fn sigterm_during_a_serve_run_stops_it_releases_the_lock_and_exits_0() -> Result {
    let dir = tempfile::tempdir()?;
    let (ns, uids, flags) = live_targets("sigterm-serve", dir.path()).await?;
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut served = Served::start(3600, &args);
    let started = Instant::now();
    sigterm_mid_run(&ns, &mut served.child).await?;
    let signalled = started.elapsed();
    let (status, stderr, took) = served.exit_within(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("SIGTERM received: finishing the target in progress")
            && stderr.contains("SIGTERM received: exiting after 1 run(s)")
            && !stderr.contains("run 2 starting")
            && !stderr.contains("lost the run lock"),
        "{stderr}"
    );
    let collected = after_the_signal(&ns, &uids, &flags, dir.path()).await?;
    eprintln!(
        "signal after {signalled:?}; exit {took:?} later; {collected} of {TARGETS} collected"
    );
    Ok(())
}

/// SIGTERM during a one-shot `run pods`: the same stop, the lock released, and a failure status
/// with messages that name the signal (never a lost lock).
#[tokio::test]
async fn sigterm_during_run_pods_stops_it_releases_the_lock_and_fails() -> Result {
    let dir = tempfile::tempdir()?;
    let (ns, uids, flags) = live_targets("sigterm-run", dir.path()).await?;
    let log = dir.path().join("run.log");
    let mut child = command()
        .arg("run")
        .args(&flags)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    sigterm_mid_run(&ns, &mut child).await?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still running 30s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let stderr = std::fs::read_to_string(&log)?;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("SIGTERM received: finishing the target in progress")
            && stderr.contains(&format!(
                "SIGTERM received: releasing the run lock gc-pods in namespace {}",
                ns.name()
            ))
            && !stderr.contains("lost the run lock")
            && stderr.contains("error: stopped by SIGTERM: "),
        "{stderr}"
    );
    after_the_signal(&ns, &uids, &flags, dir.path()).await?;
    Ok(())
}

/// Another run holds the failed-Pod collector's run lock in `ns` (for 300 seconds).
async fn hold_the_lock(ns: &gc_testbed::TestNamespace) -> Result {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    let held = Lease {
        metadata: ObjectMeta {
            name: Some("gc-pods".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("another-run".into()),
            lease_duration_seconds: Some(300),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    ns.api::<Lease>().create(&Default::default(), &held).await?;
    Ok(())
}

/// SIGTERM while `serve`'s run waits for a run lock another run holds: the wait ends at once,
/// nothing is changed (the other run's lease neither), and the process exits 0.
#[tokio::test]
async fn sigterm_while_waiting_for_the_run_lock_ends_serve_at_once() -> Result {
    let dir = tempfile::tempdir()?;
    let (ns, _, flags) = live_targets("sigterm-wait", dir.path()).await?;
    let leases = ns.api::<Lease>();
    hold_the_lock(&ns).await?;
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend(["--lock-wait-seconds", "300"]);
    let served = Served::start(3600, &args);
    // Listening means the signals are hooked; give the run a moment to reach the lock.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !get(&served.addr, "/healthz", "*/*").is_ok_and(|(status, ..)| status == 200) {
        assert!(Instant::now() < deadline, "serve did not listen within 30s");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    served.signal("-TERM");
    let (status, stderr, took) = served.exit_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(3), "{took:?}: {stderr}");
    let lock = format!(
        "the run lock gc-pods in namespace {}; nothing was changed",
        ns.name()
    );
    assert!(
        stderr.contains("stopped by SIGTERM") && stderr.contains(&lock),
        "{stderr}"
    );
    let lease = leases.get("gc-pods").await?;
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("another-run")
    );
    assert_eq!(pods_left(&ns).await?.len(), TARGETS);
    Ok(())
}

/// A run that outlasts `--stall-seconds` (here waiting for a run lock another run holds) makes
/// `/healthz` answer 503, so that a liveness probe restarts the process; before, it answers 200.
#[tokio::test]
async fn healthz_fails_once_a_run_outlasts_the_stall_deadline() -> Result {
    let (bed, ns) = namespace("healthz-stall").await?;
    hold_the_lock(&ns).await?;
    let dir = tempfile::tempdir()?;
    let store = sqlite(dir.path(), "s.db");
    let archives = dir.path().join("a");
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap();
    let run = [
        &run_pods(ns.name())[1..],
        &["--kubeconfig", kubeconfig, "--store", &store],
        &["--archive-dir", archives.to_str().unwrap()],
        // A live run waits for the held lock (a dry run takes none).
        &[
            "--lock-wait-seconds",
            "300",
            "--dry-run=none",
            "--auto-remediate",
        ],
    ]
    .concat();
    let serve = ["--interval-seconds", "3600", "--stall-seconds", "3"];
    let served = Served::start_with(&serve, &run);
    let health = || get(&served.addr, "/healthz", "*/*");
    let started = Instant::now();
    let mut seen = Vec::new();
    let body = loop {
        if let Ok((status, _, body)) = health() {
            if seen.last() != Some(&status) {
                seen.push(status);
            }
            if status == 503 {
                break body;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no 503 within 30s: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(seen, [200, 503], "{body}");
    assert!(
        body.starts_with("stalled: run 1 has lasted ") && body.contains("--stall-seconds 3"),
        "{body}"
    );
    served.signal("-TERM");
    let (status, stderr, _) = served.exit_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{stderr}");
    Ok(())
}
