//! Unit tests of the metrics: names, labels, the push and file formats, `serve`'s counters.

use super::text::keep_previous;
use super::*;

/// The value of the sample `name{labels}` in `text` (`labels` as written, without braces).
fn sample<'t>(text: &'t str, name: &str, labels: &str) -> Option<&'t str> {
    let start = format!("{name}{{{labels}}} ");
    text.lines().find_map(|l| l.strip_prefix(start.as_str()))
}

/// The names of the families `text` has samples of.
fn families(text: &str) -> Vec<&str> {
    let mut names: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    names.dedup();
    names
}

const PER_RUN: [&str; 12] = [
    "gc_last_run_objects_scanned",
    "gc_last_run_objects_eligible",
    "gc_last_run_objects_held",
    "gc_last_run_objects_deferred",
    "gc_last_run_objects_deleted",
    "gc_last_run_fences_lost",
    "gc_last_run_errors",
    "gc_last_run_archive_bytes",
    "gc_last_run_success",
    "gc_last_run_duration_seconds",
    "gc_last_attempt_timestamp_seconds",
    "gc_last_success_timestamp_seconds",
];

#[test]
fn metrics_are_prefixed_labelled_gauges_of_the_last_run() {
    let m = RunMetrics::new("streamspace", "sessions", "ns1");
    m.objects("Deployment", 10, 3, 1, 0, 2);
    m.error("delete");
    m.finish(1.5, Some(1_795_953_600.0));
    let text = m.text();
    let run = r#"collector="sessions",namespace="ns1""#;
    let deleted = r#"collector="sessions",kind="Deployment",namespace="ns1""#;
    for (name, labels, value) in [
        ("streamspace_last_run_objects_deleted", deleted, "2"),
        ("streamspace_last_run_objects_scanned", deleted, "10"),
        (
            "streamspace_last_run_errors",
            &format!(r#"{run},stage="delete""#),
            "1",
        ),
        (
            "streamspace_last_run_errors",
            &format!(r#"{run},stage="run""#),
            "0",
        ),
        ("streamspace_last_run_success", run, "1"),
        ("streamspace_last_run_duration_seconds", run, "1.5"),
        (
            "streamspace_last_attempt_timestamp_seconds",
            run,
            "1795953600.0",
        ),
        (
            "streamspace_last_success_timestamp_seconds",
            run,
            "1795953600.0",
        ),
    ] {
        assert_eq!(sample(&text, name, labels), Some(value), "{name}: {text}");
    }
    assert!(!text.contains("_total"), "{text}");
    assert!(!text.contains(" counter"), "gauges only: {text}");
}

#[test]
fn a_run_that_failed_at_once_has_every_family_but_the_last_success() {
    for collector in ["pods", "sessions"] {
        let m = RunMetrics::new("gc", collector, "ns");
        m.error("run");
        m.finish(0.1, None);
        let text = m.text();
        assert_eq!(families(&text), PER_RUN[..11], "{collector}: {text}");
        let run = format!(r#"collector="{collector}",namespace="ns""#);
        assert_eq!(sample(&text, "gc_last_run_success", &run), Some("0"));
        let attempt = sample(&text, "gc_last_attempt_timestamp_seconds", &run).unwrap();
        assert!(attempt.parse::<f64>().unwrap() > 1.7e9, "{attempt}");
    }
    let pods = RunMetrics::new("gc", "pods", "ns").text();
    for stage in ["run", "plan", "PinLeft", "TooLarge", "Pin", "VerifyGone"] {
        let labels = format!(r#"collector="pods",namespace="ns",stage="{stage}""#);
        assert_eq!(
            sample(&pods, "gc_last_run_errors", &labels),
            Some("0"),
            "{pods}"
        );
    }
    let sessions = RunMetrics::new("gc", "sessions", "ns").text();
    for kind in ["Deployment", "Service", "PersistentVolumeClaim", "Session"] {
        let labels = format!(r#"collector="sessions",kind="{kind}",namespace="ns""#);
        assert_eq!(
            sample(&sessions, "gc_last_run_objects_deleted", &labels),
            Some("0")
        );
    }
}

#[test]
fn step_names_are_the_debug_names_the_results_used() {
    for step in STEPS {
        assert_eq!(step_name(step), format!("{step:?}"));
    }
}

#[test]
fn several_namespaces_merge_into_one_exposition_with_each_family_once() {
    let texts: Vec<String> = ["a", "b"]
        .iter()
        .map(|ns| {
            let m = RunMetrics::new("gc", "pods", ns);
            m.objects("Pod", 2, 1, 0, 0, 1);
            m.finish(0.5, Some(1.0));
            m.text()
        })
        .collect();
    let merged = merge(&texts);
    for family in [
        "gc_last_run_objects_deleted",
        "gc_last_run_duration_seconds",
    ] {
        for directive in ["# TYPE", "# HELP"] {
            let header = format!("{directive} {family} ");
            assert_eq!(merged.matches(&header).count(), 1, "{merged}");
        }
    }
    let lines: Vec<&str> = merged.lines().collect();
    let deleted: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("gc_last_run_objects_deleted{"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(deleted.len(), 2, "{merged}");
    assert_eq!(deleted[1], deleted[0] + 1, "one group: {merged}");
    assert!(merged.contains(r#"namespace="a""#) && merged.contains(r#"namespace="b""#));
    assert_eq!(merged.matches("# EOF").count(), 1);
    assert!(merged.ends_with("# EOF\n"));
}

/// A failed-Pod run in `ns` that deleted `deleted` Pods and succeeded at `success_at` (or
/// failed).
fn run_in(ns: &str, deleted: u64, success_at: Option<f64>) -> Record {
    let m = RunMetrics::new("gc", "pods", ns);
    m.objects("Pod", deleted, deleted, 0, 0, deleted);
    if success_at.is_none() {
        m.error("run");
    }
    m.finish(1.0, success_at);
    m.record().clone()
}

#[test]
fn serve_counts_every_run_and_shows_the_last_and_the_last_success() {
    let served = Served::new("gc");
    let ns = r#"collector="pods",namespace="ns""#;
    let pods = r#"collector="pods",kind="Pod",namespace="ns""#;
    let run_stage = r#"collector="pods",namespace="ns",stage="run""#;
    let expect = |text: &str, rows: &[(&str, &str, Option<&str>)]| {
        for (name, labels, value) in rows {
            assert_eq!(
                sample(text, name, labels),
                *value,
                "{name}{{{labels}}}: {text}"
            );
        }
    };
    served.add(&run_in("ns", 0, None));
    let failed = format!(r#"{ns},result="failure""#);
    let succeeded = format!(r#"{ns},result="success""#);
    expect(
        &served.text(),
        &[
            ("gc_runs_total", &failed, Some("1")),
            ("gc_runs_total", &succeeded, Some("0")),
            ("gc_errors_total", run_stage, Some("1")),
            ("gc_last_run_errors", run_stage, Some("1")),
            ("gc_last_run_success", ns, Some("0")),
            ("gc_last_success_timestamp_seconds", ns, None),
        ],
    );
    served.add(&run_in("ns", 3, Some(100.0)));
    served.add(&run_in("ns", 2, Some(200.0)));
    served.add(&run_in("ns", 0, None));
    let text = served.text();
    expect(
        &text,
        &[
            ("gc_runs_total", &failed, Some("2")),
            ("gc_runs_total", &succeeded, Some("2")),
            ("gc_errors_total", run_stage, Some("2")),
            ("gc_objects_deleted_total", pods, Some("5")),
            ("gc_last_run_objects_deleted", pods, Some("0")),
            ("gc_last_run_errors", run_stage, Some("1")),
            ("gc_last_run_success", ns, Some("0")),
            ("gc_last_success_timestamp_seconds", ns, Some("200.0")),
        ],
    );
    assert!(text.ends_with("# EOF\n"), "OpenMetrics: {text}");
    assert!(text.contains("# TYPE gc_errors counter\n"), "{text}");
}

/// A failed-Pod run in `ns` that a signal stopped.
fn stopped(ns: &str) -> Record {
    let m = RunMetrics::new("gc", "pods", ns);
    m.stopped(1.0);
    m.record().clone()
}

#[test]
fn a_stopped_run_is_an_attempt_neither_a_success_nor_a_failure() {
    let m = RunMetrics::new("gc", "pods", "ns");
    m.stopped(0.5);
    let text = m.text();
    let expected: Vec<&str> = PER_RUN[..11]
        .iter()
        .copied()
        .filter(|f| *f != "gc_last_run_success")
        .collect();
    assert_eq!(families(&text), expected, "{text}");
    let run = r#"collector="pods",namespace="ns""#;
    let attempt = sample(&text, "gc_last_attempt_timestamp_seconds", run).unwrap();
    assert!(attempt.parse::<f64>().unwrap() > 1.7e9, "{attempt}");
    let errors = format!(r#"{run},stage="run""#);
    assert_eq!(sample(&text, "gc_last_run_errors", &errors), Some("0"));

    // `serve` shows the success of the run before, and counts the stopped run apart.
    let served = Served::new("gc");
    served.add(&stopped("ns"));
    let text = served.text();
    assert_eq!(sample(&text, "gc_last_run_success", run), None, "{text}");
    served.add(&run_in("ns", 1, Some(100.0)));
    served.add(&stopped("ns"));
    let text = served.text();
    for (labels, value) in [
        (run.to_owned(), Some("1")),
        (format!(r#"{run},result="stopped""#), Some("2")),
        (format!(r#"{run},result="success""#), Some("1")),
        (format!(r#"{run},result="failure""#), Some("0")),
    ] {
        let name = if labels.contains("result") {
            "gc_runs_total"
        } else {
            "gc_last_run_success"
        };
        assert_eq!(
            sample(&text, name, &labels),
            value,
            "{name}{{{labels}}}: {text}"
        );
    }
    assert_eq!(
        sample(&text, "gc_last_success_timestamp_seconds", run),
        Some("100.0")
    );
    served.add(&run_in("ns", 0, None));
    served.add(&stopped("ns"));
    assert_eq!(
        sample(&served.text(), "gc_last_run_success", run),
        Some("0")
    );
}

#[test]
fn serve_forgets_the_namespaces_a_run_no_longer_covers() {
    let served = Served::new("gc");
    for ns in ["a", "b"] {
        served.add(&run_in(ns, 1, Some(1.0)));
    }
    let sessions = RunMetrics::new("gc", "sessions", "b");
    sessions.finish(1.0, Some(1.0));
    served.add(&sessions.record());
    served.retain("pods", &["a".to_owned()]);
    let text = served.text();
    let has = |labels: &str| text.contains(labels);
    assert!(has(r#"collector="pods",namespace="a""#), "{text}");
    assert!(!has(r#"collector="pods",namespace="b""#), "{text}");
    assert!(has(r#"collector="sessions",namespace="b""#), "{text}");
}

#[test]
fn lost_fences_are_counted_by_stage_in_the_run_and_in_serve() {
    let served = Served::new("gc");
    for _ in 0..2 {
        let m = RunMetrics::new("gc", "sessions", "ns");
        m.fence_lost("delete");
        m.finish(1.0, Some(1.0));
        served.add(&m.record());
        let labels = r#"collector="sessions",namespace="ns",stage="delete""#;
        assert_eq!(
            sample(&m.text(), "gc_last_run_fences_lost", labels),
            Some("1")
        );
    }
    let labels = r#"collector="sessions",namespace="ns",stage="delete""#;
    assert_eq!(
        sample(&served.text(), "gc_fences_lost_total", labels),
        Some("2")
    );
}

#[test]
fn the_text_format_names_counters_with_total_and_has_no_eof() {
    let served = Served::new("gc");
    served.add(&run_in("ns", 1, Some(1.0)));
    let text = text_format(&served.text());
    assert!(text.contains("# TYPE gc_errors_total counter\n"), "{text}");
    assert!(
        text.contains("# HELP gc_errors_total Errors since"),
        "{text}"
    );
    assert!(text.contains("# TYPE gc_last_run_errors gauge\n"), "{text}");
    assert!(!text.contains("# EOF"), "{text}");
    let samples = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(samples(&text), samples(&served.text()));
}

#[test]
fn the_file_keeps_the_last_success_a_failed_run_does_not_carry() {
    let success = |ns: &str, at: f64| {
        let m = RunMetrics::new("gc", "pods", ns);
        m.finish(1.0, Some(at));
        m.text()
    };
    let failure = |ns: &str| {
        let m = RunMetrics::new("gc", "pods", ns);
        m.finish(1.0, None);
        m.text()
    };
    let a = r#"collector="pods",namespace="a""#;
    let b = r#"collector="pods",namespace="b""#;
    let last = "gc_last_success_timestamp_seconds";
    let before = text_format(&merge(&[success("a", 10.0), success("b", 20.0)]));
    // `a` failed, `b` succeeded again.
    let now = keep_previous(&before, &merge(&[failure("a"), success("b", 30.0)]), "gc");
    assert_eq!(sample(&now, last, a), Some("10.0"), "{now}");
    assert_eq!(sample(&now, last, b), Some("30.0"), "{now}");
    assert_eq!(now.matches(&format!("# HELP {last} ")).count(), 1, "{now}");
    let again = keep_previous(&text_format(&now), &failure("a"), "gc");
    assert_eq!(sample(&again, last, a), Some("10.0"), "{again}");
    assert_eq!(sample(&again, last, b), Some("30.0"), "{again}");
    // Not the last run's success of a namespace the run did not cover.
    assert_eq!(sample(&again, "gc_last_run_success", b), None, "{again}");
    let first = failure("a");
    assert_eq!(keep_previous("", &first, "gc"), first);
    // A stopped run keeps the last run's success as well.
    let stop = |ns: &str| {
        let m = RunMetrics::new("gc", "pods", ns);
        m.stopped(1.0);
        m.text()
    };
    let kept = keep_previous(&text_format(&again), &stop("a"), "gc");
    assert_eq!(sample(&kept, "gc_last_run_success", a), Some("0"), "{kept}");
    assert_eq!(sample(&kept, last, a), Some("10.0"), "{kept}");
    assert_eq!(
        kept.matches("# TYPE gc_last_run_success gauge").count(),
        1,
        "{kept}"
    );
}

#[test]
fn a_pushgateway_url_is_shown_without_its_password_or_not_at_all() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let err = push(Some(&format!("http://u:Zq@127.0.0.1:{port}")), "job/gc", "")
        .unwrap_err()
        .to_string();
    assert!(!err.contains("Zq"), "{err}");
    assert!(
        err.starts_with(&format!(
            "cannot push metrics to http://***@127.0.0.1:{port}/metrics/job/gc: "
        )),
        "{err}"
    );
    for c in ['?', '#', '/'] {
        for gateway in [
            format!("http://u:Zq{c}Wv@127.0.0.1:{port}"),
            format!("http://u:1{c}Wv@127.0.0.1:{port}"),
        ] {
            let err = push(Some(&gateway), "job/gc", "").unwrap_err().to_string();
            assert!(!err.contains("Zq") && !err.contains("Wv"), "{err}");
            assert!(
                err.starts_with(
                    "cannot push metrics: the Pushgateway URL (`pushgateway`) \
                     is not a valid URL (its value is not shown): "
                ),
                "{err}"
            );
        }
    }
}

#[test]
fn endpoints_are_shown_without_path_or_credentials() {
    assert_eq!(
        endpoint("https://hooks.slack.com/services/T0/B0/secret"),
        Ok("https://hooks.slack.com".into())
    );
    assert_eq!(
        endpoint("HTTP://u:p@127.0.0.1:9091/x"),
        Ok("http://127.0.0.1:9091".into())
    );
    for bad in [
        "hooks.slack.com/services/T0/B0/secret",
        "ftp://hooks.slack.com/secret",
        "https:///secret",
        "https://hooks slack/secret",
    ] {
        let why = endpoint(bad).unwrap_err();
        assert!(!why.contains("secret"), "{bad}: {why}");
    }
}

#[test]
fn alerts_say_failures_and_only_the_successes_that_did_something() {
    let mut record = Record::new("pods", "etl");
    record.ended = Ended::Failed;
    let text = |alert: Option<Alert>| alert.map(|a| a.text);
    let failed = text(alert_of(&record, Some("2 target(s) failed"), false, ""));
    assert!(failed.is_some_and(|t| t.contains("failed in namespace etl: 2 target(s) failed")));
    record.ended = Ended::Succeeded(1.0);
    let said = "3 of 3 targets collected, 0 pins recovered";
    assert_eq!(
        text(alert_of(&record, None, true, said)).as_deref(),
        Some("gc pods collector in namespace etl: 3 of 3 targets collected, 0 pins recovered")
    );
    // A run that deleted nothing has no summary to post, and without the flag nothing is said.
    assert_eq!(alert_of(&record, None, true, ""), None);
    assert_eq!(alert_of(&record, None, false, said), None);
    record.ended = Ended::Stopped;
    assert_eq!(alert_of(&record, Some("stopped"), true, said), None);
}
