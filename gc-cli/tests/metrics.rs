//! Metrics pushed to a real Pushgateway and read back; a failure alert received by a local
//! webhook in Slack's format; metrics written to a file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;

use gc_testbed::{FailedPod, TestBed};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

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

#[test]
fn a_failed_run_alerts_the_webhook_and_counts_the_error() {
    let (hook, request) = one_request();
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("gc.prom");
    let out = Command::new(env!("CARGO_BIN_EXE_gc-cli"))
        .args([
            "run",
            "pods",
            "-n",
            "batch",
            "--api-url",
            "https://127.0.0.1:1",
            "--trust-certs",
        ])
        .args([
            "--store",
            &format!("sqlite:{}", dir.path().join("s.db").display()),
        ])
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
    let exposition = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        exposition
            .contains(r#"gc_errors_total{collector="pods",namespace="batch",stage="plan"} 1"#),
        "{exposition}"
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
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("metrics").await?;
    let old = Timestamp::from_second(Timestamp::now().as_second() - 7200)?;
    for i in 0..3 {
        FailedPod::new(&format!("p{i}"))
            .label("diagnostics.example.com/collect", "true")
            .finished_at(old)
            .create(&ns.api::<Pod>())
            .await?;
    }
    let dir = tempfile::tempdir()?;
    let out = Command::new(env!("CARGO_BIN_EXE_gc-cli"))
        .args([
            "run",
            "pods",
            "-n",
            ns.name(),
            "--retention-seconds",
            "3600",
            "--max-pods",
            "2",
        ])
        .args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()])
        .args([
            "--store",
            &format!("sqlite:{}", dir.path().join("s.db").display()),
        ])
        .args([
            "--archive-dir",
            dir.path().join("a").to_str().unwrap(),
            "--pushgateway",
            &gateway,
            "--metrics-prefix",
            "streamspace",
        ])
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
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("serve").await?;
    let old = Timestamp::from_second(Timestamp::now().as_second() - 7200)?;
    FailedPod::new("p")
        .label("diagnostics.example.com/collect", "true")
        .finished_at(old)
        .create(&ns.api::<Pod>())
        .await?;
    let dir = tempfile::tempdir()?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gc-cli"))
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
        .args([
            "--store",
            &format!("sqlite:{}", dir.path().join("s.db").display()),
        ])
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
