//! Metrics pushed to a real Pushgateway and read back; a failure alert received by a local
//! webhook in Slack's format; metrics written to a file (privately, never through a planted
//! symlink); a stalled Pushgateway or webhook given up on in bounded time; a webhook URL never
//! shown.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::{Result, command, namespace, run_pods, sqlite, target};

/// Accepts one HTTP request on a loopback port and returns its body.
fn one_request() -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .unwrap();
        String::from_utf8(body).unwrap()
    });
    (url, handle)
}

/// `gc-cli run pods` in `batch` against an API server that is not there, its store in `dir`.
fn unreachable_run(dir: &Path) -> Command {
    let mut c = command();
    c.args(["run", "pods", "-n", "batch"])
        .args(["--api-url", "https://127.0.0.1:1", "--trust-certs"])
        .args(["--store", &sqlite(dir, "s.db")]);
    c
}

#[test]
fn a_failed_run_alerts_the_webhook_and_counts_the_error() {
    let (hook, request) = one_request();
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("gc.prom");
    let out = unreachable_run(dir.path())
        .args([
            "--alert-webhook",
            &hook,
            "--metrics-file",
            metrics.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let body: serde_json::Value = serde_json::from_str(&request.join().unwrap()).unwrap();
    let text = body["text"].as_str().unwrap();
    assert!(
        text.contains("pods collector failed in namespace batch")
            && text.contains("cannot connect"),
        "{text}"
    );
    // `run pods` connects and takes the lock before it recovers and plans: an unreachable
    // cluster is a failure of the run, not of the plan.
    let exposition = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        exposition.contains(r#"gc_errors_total{collector="pods",namespace="batch",stage="run"} 1"#),
        "{exposition}"
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
            .contains(r#"gc_errors_total{collector="pods",namespace="batch",stage="#)
    );
}

#[tokio::test]
async fn metrics_reach_a_real_pushgateway() -> Result {
    let Some(gateway) = std::env::var("GC_TEST_PUSHGATEWAY").ok() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the Pushgateway (scripts/test.sh starts it)"
        );
        eprintln!("SKIPPING: GC_TEST_PUSHGATEWAY is unset (run scripts/test.sh)");
        return Ok(());
    };
    let (bed, ns) = namespace("metrics").await?;
    for i in 0..3 {
        target(&ns, &format!("p{i}")).await?;
    }
    let dir = tempfile::tempdir()?;
    let out = command()
        .args(run_pods(ns.name()))
        .args(["--max-pods", "2"])
        .args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()])
        .args(["--store", &sqlite(dir.path(), "s.db")])
        .args(["--archive-dir", dir.path().join("a").to_str().unwrap()])
        .args(["--pushgateway", &gateway, "--metrics-prefix", "streamspace"])
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let scraped = Command::new("curl")
        .args(["-fsS", &format!("{gateway}/metrics")])
        .output()?;
    let text = String::from_utf8(scraped.stdout)?;
    let line = |name: &str| {
        text.lines()
            .find(|l| {
                l.starts_with(name)
                    && l.contains(&format!("namespace=\"{}\"", ns.name()))
                    && l.contains("job=\"gc\"")
            })
            .map(str::to_owned)
    };
    assert!(
        line("streamspace_objects_scanned_total").is_some_and(|l| l.ends_with(" 3")),
        "{text}"
    );
    assert!(
        line("streamspace_objects_deferred_total").is_some_and(|l| l.ends_with(" 1")),
        "{text}"
    );
    assert!(
        line("streamspace_last_success_timestamp_seconds").is_some(),
        "{text}"
    );
    Ok(())
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
    assert!(
        text.contains(&format!(
            "gc_objects_scanned_total{{collector=\"pods\",kind=\"Pod\",namespace=\"{}\"}} 1",
            ns.name()
        )),
        "{text}"
    );
    assert!(child.wait()?.success());
    Ok(())
}
