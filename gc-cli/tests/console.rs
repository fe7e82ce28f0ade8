//! `gc-cli console` as an operator meets it: the real binary on the test bed's API server (with
//! its controller manager) and PostgreSQL, driven in headless Chromium through its WebDriver
//! (`$GC_TEST_CHROMEDRIVER`, installed by `scripts/test.sh`), with the keyboard alone; and the
//! refusals a browser never shows, over plain HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use gc_testbed::{FailedPod, TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

mod common;

use common::{Result, command, create_session};

/// The Enter key, as WebDriver sends it.
const ENTER: &str = "\u{E007}";

/// A console serving one namespace: the process, its URL, its audit lines (stdout).
struct Console {
    child: Child,
    url: String,
    audit: Arc<Mutex<String>>,
    _state: tempfile::TempDir,
    archives: std::path::PathBuf,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Console {
    /// `gc-cli console` on `ns` with `connect` (how to reach the cluster), judging at a time
    /// past every grace.
    fn start(ns: &TestNamespace, db: &TestDatabase, connect: &[&str]) -> Result<Self> {
        let state = tempfile::tempdir()?;
        let archives = state.path().join("archives");
        let store = format!("sqlite:{}", state.path().join("gc.sqlite3").display());
        let mut child = command()
            .args(["console", "--listen", "127.0.0.1:0", "-n", ns.name()])
            .args(["--cluster-id", ns.name(), "--database-url", db.url()])
            .args([
                "--store",
                &store,
                "--archive-dir",
                archives.to_str().unwrap(),
            ])
            .arg("--now=2099-01-01T00:00:00Z")
            .args(connect)
            .env("GC_ALLOW_FUTURE_NOW", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let audit = Arc::new(Mutex::new(String::new()));
        let mut stdout = child.stdout.take().unwrap();
        let lines = Arc::clone(&audit);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                lines
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(std::io::Result::ok) {
                eprintln!("console: {line}");
                if let Some((_, url)) = line.split_once("works once): ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(60))?;
        Ok(Self {
            child,
            url,
            audit,
            _state: state,
            archives,
        })
    }

    /// `host:port` of the console.
    fn host(&self) -> &str {
        let rest = self.url.trim_start_matches("http://");
        rest.split('/').next().unwrap()
    }

    /// The audit lines written so far.
    fn audit(&self) -> Vec<Value> {
        let text = self.audit.lock().unwrap().clone();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// One HTTP/1.1 exchange with the console: the status, the headers, the body.
fn http(host: &str, request: &str) -> Result<(u16, String, String)> {
    let mut stream = TcpStream::connect(host)?;
    stream.write_all(request.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).unwrap_or_default().parse()?;
    Ok((status, head.to_owned(), body.to_owned()))
}

fn get(host: &str, path: &str, cookie: Option<&str>) -> Result<(u16, String, String)> {
    let cookie = cookie
        .map(|c| format!("Cookie: gc-console={c}\r\n"))
        .unwrap_or_default();
    http(
        host,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{cookie}Connection: close\r\n\r\n"),
    )
}

fn post(host: &str, path: &str, cookie: &str, body: &str) -> Result<(u16, String, String)> {
    http(
        host,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nCookie: gc-console={cookie}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// The session cookie a console hands out for its link.
fn open(console: &Console) -> Result<String> {
    let path = console.url.split(console.host()).nth(1).unwrap().to_owned();
    let (status, head, _) = get(console.host(), &path, None)?;
    assert_eq!(status, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: gc-console="));
    let cookie = cookie.unwrap_or_else(|| panic!("no cookie in {head}"));
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    Ok(cookie.split(';').next().unwrap().to_owned())
}

/// A namespace with StreamSpace's session objects for `gone` (no row) and `live` (a running
/// row), and the session table.
async fn story(
    prefix: &str,
    gone: &[&str],
) -> Result<Option<(&'static TestBed, TestNamespace, TestDatabase)>> {
    let Some(db) = TestDatabase::fresh(prefix).await? else {
        return Ok(None);
    };
    let bed = TestBed::with_controllers().await?;
    let ns = bed.namespace(prefix).await?;
    let crd = bed.install_session_crd().await?;
    common::one_live_session(&db).await?;
    for id in gone.iter().chain(&["live-1"]) {
        create_session(&ns, &crd, id).await?;
    }
    Ok(Some((bed, ns, db)))
}

/// The WebDriver session of a headless Chromium, or `None` when no driver is installed here.
async fn browser() -> Result<Option<(Client, Child)>> {
    let Ok(driver) = std::env::var("GC_TEST_CHROMEDRIVER") else {
        eprintln!("GC_TEST_CHROMEDRIVER is not set: the browser tests do not run");
        return Ok(None);
    };
    let port = common::free_address()
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let child = std::process::Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let profile = tempfile::tempdir()?.keep();
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1000",
        &format!("--user-data-dir={}", profile.display()),
    ];
    let chromium = std::env::var("GC_TEST_CHROMIUM").unwrap_or("/usr/bin/chromium".into());
    let caps = json!({"goog:chromeOptions": {"args": args, "binary": chromium}});
    let caps = caps.as_object().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let mut builder = ClientBuilder::new(connector);
        match builder
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => return Ok(Some((client, child))),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The page's text once it contains `text` (the page after a form was sent).
async fn page_with(client: &Client, text: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // The page may change between the find and the read (a form's answer coming in).
        let body = match client.find(Locator::Css("body")).await {
            Ok(found) => found.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if body.contains(text) {
            return Ok(body);
        }
        assert!(
            Instant::now() < deadline,
            "no {text:?} on the page:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Saves a screenshot of the page as `name`.png in the test's folder.
async fn screenshot(client: &Client, name: &str) -> Result {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{name}.png")), client.screenshot().await?)?;
    Ok(())
}

/// The serious and critical accessibility violations axe-core finds on the page
/// (`$GC_TEST_AXE`: its `axe.min.js`).
async fn violations(client: &Client) -> Result<Vec<String>> {
    let Ok(axe) = std::env::var("GC_TEST_AXE") else {
        eprintln!("GC_TEST_AXE is not set: no accessibility check");
        return Ok(Vec::new());
    };
    client
        .execute(&std::fs::read_to_string(axe)?, vec![])
        .await?;
    let found = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document).then(r => done(r.violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => v.id + ': ' + v.help + ' ' + v.nodes.map(n => n.html).join(' | '))))
               .catch(e => done(['axe failed: ' + e]));",
            vec![],
        )
        .await?;
    Ok(serde_json::from_value(found)?)
}

/// Presses a control with the keyboard alone: Tab moves the focus from where it is until it is
/// on the control (as a person tabs through the page), then `key`: Space toggles a checkbox,
/// Enter sends a form or follows a link.
async fn press(client: &Client, css: &str, key: &str) -> Result {
    let found = match css.strip_prefix("xpath:") {
        Some(path) => client.find(Locator::XPath(path)).await?,
        None => client.find(Locator::Css(css)).await?,
    };
    let target = found.html(false).await?;
    for _ in 0..300 {
        let focused = client.active_element().await?;
        if focused.html(false).await? == target {
            focused.send_keys(key).await?;
            return Ok(());
        }
        focused.send_keys("\u{E004}").await?;
    }
    Err(format!("{css} cannot be reached with Tab").into())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_reviews_collects_reads_and_restores_sessions_in_a_browser() -> Result {
    let Some((_bed, ns, db)) = story("console", &["gone-1", "gone-2", "gone-3"]).await? else {
        return Ok(());
    };
    // Two more live sessions: three of six gone is not more than the guard's half.
    let crd = _bed.install_session_crd().await?;
    let pool = db.pool().await?;
    for id in ["live-2", "live-3"] {
        sqlx::query("INSERT INTO sessions VALUES ($1, 'running')")
            .bind(id)
            .execute(&pool)
            .await?;
        create_session(&ns, &crd, id).await?;
    }
    pool.close().await;
    let Some((client, mut driver)) = browser().await? else {
        return Ok(());
    };
    let kubeconfig = _bed.kubeconfig_path().to_str().unwrap().to_owned();
    let pods_at = ["--kubeconfig", &kubeconfig, "--pods-namespace", ns.name()];
    let console = Console::start(&ns, &db, &pods_at)?;
    let journey = async {
        // The link opens the console once, and hands the browser its cookie.
        client.goto(&console.url).await?;
        let overview = page_with(&client, "Acting as").await?;
        assert!(
            overview.contains(&format!("Namespace {}", ns.name())),
            "{overview}"
        );
        assert!(!client.current_url().await?.as_str().contains("token"));
        assert_eq!(violations(&client).await?, Vec::<String>::new(), "overview");
        screenshot(&client, "overview").await?;

        // The sessions, as the next run would judge them: the three gone, the live one kept.
        client
            .goto(&format!(
                "http://{}/sessions?ns={}",
                console.host(),
                ns.name()
            ))
            .await?;
        let sessions = page_with(&client, "Sessions in").await?;
        let guard = "3 of 6 sessions judged look gone (50%), 12 objects";
        assert!(sessions.contains(guard), "the guard's figures: {sessions}");
        for id in ["gone-1", "gone-2", "gone-3", "live-1"] {
            assert!(sessions.contains(id), "{id} in\n{sessions}");
        }
        assert_eq!(violations(&client).await?, Vec::<String>::new(), "sessions");
        screenshot(&client, "sessions").await?;

        // Two chosen with the keyboard, a dry run first: exactly their eight objects.
        press(&client, "input[value=gone-1]", " ").await?;
        press(&client, "input[value=gone-2]", " ").await?;
        press(&client, "form[action='/sessions/preview'] button", ENTER).await?;
        let preview = page_with(&client, "Confirm").await?;
        assert_eq!(preview.matches("would delete").count(), 8, "{preview}");
        assert!(!preview.contains("gone-3"), "{preview}");
        assert_eq!(violations(&client).await?, Vec::<String>::new(), "preview");
        screenshot(&client, "collect-preview").await?;
        let deployments = ns.api::<Deployment>();
        assert!(
            deployments.get_opt("gone-1").await?.is_some(),
            "a dry run deletes nothing"
        );

        // Confirmed: deleted, each archived first.
        press(&client, "form[action='/sessions/collect'] button", ENTER).await?;
        let collected = page_with(&client, "What the collection did").await?;
        assert_eq!(collected.matches("deleted").count(), 8, "{collected}");
        screenshot(&client, "collected").await?;
        for id in ["gone-1", "gone-2"] {
            assert!(deployments.get_opt(id).await?.is_none(), "{id} deleted");
        }
        for id in ["gone-3", "live-1"] {
            assert!(deployments.get_opt(id).await?.is_some(), "{id} left alone");
        }

        // The archives, each verified; one edited on disk is shown refused, in red, and its
        // manifest is not shown.
        let archives = format!("http://{}/archives?ns={}", console.host(), ns.name());
        client.goto(&archives).await?;
        let listed = page_with(&client, "8 verified, 0 failed").await?;
        assert!(listed.contains("gone-2"), "{listed}");
        let tampered = tamper(&console.archives, "gone-2")?;
        client.goto(&archives).await?;
        page_with(&client, "7 verified, 1 failed").await?;
        screenshot(&client, "archives-tampered").await?;
        let row = client
            .find(Locator::Css("tr.tampered"))
            .await?
            .text()
            .await?;
        assert!(row.contains("refused"), "{row}");
        press(&client, "tr.tampered a", ENTER).await?;
        let refused = page_with(&client, "Refused: this archive is not shown").await?;
        assert!(
            !refused.contains("\"kind\""),
            "no manifest of a tampered archive: {refused}"
        );
        assert!(refused.contains("does not match its receipt"), "{refused}");
        let file = std::path::Path::new(&tampered)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            refused.contains(file),
            "the archive refused is the one edited: {refused}"
        );
        let _ = client.back().await;

        // A sound archive's manifest.
        client.goto(&archives).await?;
        page_with(&client, "7 verified").await?;
        press(&client, "tr:not(.tampered) th a", ENTER).await?;
        let manifest = page_with(&client, "Manifest").await?;
        assert!(
            manifest.contains("verified") && manifest.contains("\"metadata\""),
            "{manifest}"
        );
        screenshot(&client, "archive").await?;

        // One session restored: what it would do first, then done, as the operator.
        let restore = format!(
            "http://{}/restore?ns={}&session=gone-1",
            console.host(),
            ns.name()
        );
        client.goto(&restore).await?;
        let would = page_with(&client, "What a restore would do").await?;
        assert_eq!(would.matches("would create").count(), 4, "{would}");
        assert_eq!(violations(&client).await?, Vec::<String>::new(), "restore");
        screenshot(&client, "restore-preview").await?;
        press(
            &client,
            "form[method=post][action='/restore'] button",
            ENTER,
        )
        .await?;
        let restored = page_with(&client, "What the restore did").await?;
        assert_eq!(restored.matches("created").count(), 4, "{restored}");
        screenshot(&client, "restored").await?;
        assert!(
            deployments.get_opt("gone-1").await?.is_some(),
            "gone-1 is back"
        );
        assert!(deployments.get_opt("gone-2").await?.is_none());

        // An archive beside its live object: the restored Deployment, and an object of gone-2
        // (still gone).
        let of = |session: &str| format!("{archives}&session={session}");
        client.goto(&of("gone-1")).await?;
        page_with(&client, "4 verified").await?;
        let row = "xpath://tr[th/a/code[text()='Deployment/gone-1']]//a";
        press(&client, row, ENTER).await?;
        let compared = page_with(&client, "Compared with the live object").await?;
        assert!(
            compared.contains("has every archived field as archived"),
            "{compared}"
        );
        let label = json!({"metadata": {"labels": {"edited": "after-restore"}}});
        let patch = kube::api::Patch::Merge(&label);
        deployments
            .patch("gone-1", &kube::api::PatchParams::default(), &patch)
            .await?;
        client.refresh().await?;
        let compared = page_with(&client, "Lines starting").await?;
        let added = client
            .find(Locator::Css("pre.diff .ins"))
            .await?
            .text()
            .await?;
        assert!(
            added.contains("\"edited\": \"after-restore\""),
            "{added}\n{compared}"
        );
        let scroll = "document.querySelector('pre.diff').scrollIntoView()";
        client.execute(scroll, vec![]).await?;
        screenshot(&client, "archive-compared").await?;
        client.goto(&of("gone-2")).await?;
        page_with(&client, "3 verified, 1 failed").await?;
        let row = "xpath://tr[not(contains(@class, 'tampered'))]/th/a";
        press(&client, row, ENTER).await?;
        page_with(&client, "does not exist now").await?;

        // The overview now: the run's deletes and the kept volumes, drawn.
        client.goto(&format!("http://{}/", console.host())).await?;
        let now = page_with(&client, "Objects archived and deleted per run").await?;
        assert!(now.contains("Archives\n8, "), "{now}");
        let plots = client.find_all(Locator::Css("svg.plot")).await?;
        assert_eq!(
            plots.len(),
            2,
            "deletes per run, and the kept volumes' windows"
        );
        assert!(now.contains(&format!("pv-{}-gone-2", ns.name())), "{now}");
        let back = format!("pv-{}-gone-1", ns.name());
        assert!(
            !now.contains(&back),
            "restored: its volume is the claim's again\n{now}"
        );
        let windows = client.find_all(Locator::Css("svg.plot text.value")).await?;
        let mut written = Vec::new();
        for w in windows {
            written.push(w.text().await?);
        }
        assert!(
            written.contains(&"7 days".to_owned()),
            "judged at the console's instant: {written:?}"
        );
        let volumes: kube::Api<k8s_openapi::api::core::v1::PersistentVolume> =
            kube::Api::all(ns.client().clone());
        let given_back = volumes.get(&back).await?.spec.unwrap();
        assert_eq!(
            given_back.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete"),
            "the restored claim's volume has its policy back"
        );
        assert_eq!(
            violations(&client).await?,
            Vec::<String>::new(),
            "overview after"
        );
        screenshot(&client, "overview-after").await?;

        // Failed Pods: two due; one changes after the page is drawn, and the approval of the
        // plan as shown skips it and says so: it is not deleted.
        let pods = ns.api::<Pod>();
        let finished = Timestamp::from_second(Timestamp::now().as_second() - 3 * 86_400)?;
        for name in ["crashed-1", "crashed-2"] {
            let pod = FailedPod::new(name).label(common::COLLECT, "true");
            pod.finished_at(finished).create(&pods).await?;
        }
        client
            .goto(&format!("http://{}/pods?ns={}", console.host(), ns.name()))
            .await?;
        let planned = page_with(&client, "Approve and apply").await?;
        assert_eq!(planned.matches("targeted").count(), 2, "{planned}");
        assert_eq!(violations(&client).await?, Vec::<String>::new(), "pods");
        screenshot(&client, "pods").await?;
        let touched = json!({"metadata": {"labels": {"touched": "after-the-page-was-drawn"}}});
        let patch = kube::api::Patch::Merge(&touched);
        pods.patch("crashed-2", &kube::api::PatchParams::default(), &patch)
            .await?;
        press(&client, "form[action='/pods/approve'] button", ENTER).await?;
        let approved = page_with(&client, "What the approval did").await?;
        assert!(approved.contains("collected"), "{approved}");
        let row = "//tr[th/code[text()='pod/crashed-2']]/td";
        let result = client.find(Locator::XPath(row)).await?.text().await?;
        assert_eq!(result, "changed", "{approved}");
        screenshot(&client, "pods-approved").await?;
        common::eventually("crashed-1 removed", async || {
            Ok((pods.get_opt("crashed-1").await?.is_none(), ()))
        })
        .await?;
        let kept = pods
            .get_opt("crashed-2")
            .await?
            .expect("a changed Pod is not deleted");
        let finalizers = kept.metadata.finalizers.unwrap_or_default();
        assert!(
            !finalizers.contains(&common::PIN.to_owned()),
            "no pin left: {finalizers:?}"
        );
        // The overview counts the Pod archived, beside the sessions' archives.
        client.goto(&format!("http://{}/", console.host())).await?;
        let now = page_with(&client, &format!("Failed Pods in {}", ns.name())).await?;
        assert!(now.contains("Pods archived\n1, "), "{now}");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(overview)
    };
    let outcome = journey.await;
    let _ = client.close().await;
    let _ = driver.kill();
    let overview = outcome?;

    // Each action's audit lines name the operator the page named.
    let operator = overview
        .split("Acting as ")
        .nth(1)
        .unwrap()
        .split([' ', '\n'])
        .next()
        .unwrap();
    let audit = console.audit();
    let deleted: Vec<&Value> = audit.iter().filter(|l| l["result"] == "deleted").collect();
    assert_eq!(deleted.len(), 8, "{audit:?}");
    assert!(
        deleted
            .iter()
            .all(|l| l["requestedBy"] == json!([operator])),
        "{audit:?}"
    );
    // The restore's dry run and the restore: four objects each, as the desk writes them.
    let restored: Vec<&Value> = audit
        .iter()
        .filter(|l| l["decision"] == "restore")
        .collect();
    let live = restored.iter().filter(|l| l["dryRun"] == false).count();
    assert_eq!((restored.len(), live), (8, 4), "{audit:?}");
    assert!(
        restored.iter().all(|l| l["requestedBy"] == operator),
        "{audit:?}"
    );
    Ok(())
}

/// Appends a byte to an archive of session `session` in `dir`: the path changed.
fn tamper(dir: &std::path::Path, session: &str) -> Result<String> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(at)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read_to_string(&path)?
                .contains(&format!("\"session\":\"{session}\""))
            {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)?
                    .write_all(b" ")?;
                return Ok(path.display().to_string());
            }
        }
    }
    Err(format!("no archive of {session} in {}", dir.display()).into())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_refuses_what_lacks_its_cookie_its_token_or_its_host() -> Result {
    let Some((bed, ns, db)) = story("console-refuse", &["gone-1"]).await? else {
        return Ok(());
    };
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let console = Console::start(&ns, &db, &["--kubeconfig", &kubeconfig])?;
    let host = console.host().to_owned();
    // No cookie: refused, every page.
    for path in ["/", "/sessions", "/archives", "/restore", "/console.css"] {
        let (status, head, _) = get(&host, path, None)?;
        assert_eq!(status, 401, "{path}: {head}");
        assert!(
            head.contains("content-security-policy: default-src 'none'"),
            "{head}"
        );
    }
    // A wrong token opens nothing, and does not spend the link.
    let (status, head, _) = get(&host, "/?token=0123", None)?;
    assert_eq!(status, 401, "{head}");
    assert!(!head.contains("set-cookie"), "{head}");
    let cookie = open(&console)?;
    // Once opened, the link opens nothing for a browser without the cookie...
    let path = console.url.split(&host).nth(1).unwrap();
    let (status, _, body) = get(&host, path, None)?;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("used already"), "{body}");
    // ... and sends the one with it on to the page, with no new cookie.
    let (status, head, _) = get(&host, path, Some(&cookie))?;
    assert_eq!(status, 303, "{head}");
    assert!(!head.contains("set-cookie"), "{head}");
    // A redirect goes to a path of the console's only.
    let token = path.split("token=").nth(1).unwrap();
    let (_, head, _) = get(
        &host,
        &format!("//evil.example/?token={token}"),
        Some(&cookie),
    )?;
    assert!(head.contains("location: /\r\n"), "{head}");
    // Another host name (a rebinding page): refused even with the cookie.
    let request = format!(
        "GET / HTTP/1.1\r\nHost: evil.example:80\r\nCookie: gc-console={cookie}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(http(&host, &request)?.0, 421);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_form_without_its_csrf_token_does_nothing() -> Result {
    let Some((bed, ns, db)) = story("console-csrf", &["gone-1"]).await? else {
        return Ok(());
    };
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let console = Console::start(&ns, &db, &["--kubeconfig", &kubeconfig])?;
    let host = console.host().to_owned();
    let cookie = open(&console)?;
    // The cookie opens the pages.
    let (status, _, page) = get(&host, &format!("/sessions?ns={}", ns.name()), Some(&cookie))?;
    assert_eq!(status, 200);
    assert!(page.contains("gone-1"), "{page}");
    let body = format!("ns={}&session=gone-1", ns.name());
    for path in [
        "/sessions/collect",
        "/sessions/preview",
        "/restore",
        "/pods/approve",
    ] {
        let (status, _, answer) = post(&host, path, &cookie, &body)?;
        assert_eq!(status, 403, "{path}: {answer}");
        assert!(answer.contains("CSRF"), "{answer}");
        let with_wrong = format!("{body}&csrf=00");
        assert_eq!(post(&host, path, &cookie, &with_wrong)?.0, 403);
    }
    assert!(ns.api::<Deployment>().get_opt("gone-1").await?.is_some());
    // Nothing was audited: nothing was done (the lines would be written before the answer).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(console.audit().is_empty(), "{:?}", console.audit());
    Ok(())
}

/// The CSRF token of a page's forms.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_whose_rbac_forbids_the_delete_sees_the_refusal_and_nothing_goes() -> Result {
    let Some((bed, ns, db)) = story("console-rbac", &["gone-1"]).await? else {
        return Ok(());
    };
    // A viewer: reads everything of the namespace, takes the run's Lease, deletes nothing.
    let read = ["get", "list", "watch"].map(String::from).to_vec();
    let rule = |groups: &[&str], resources: &[&str], verbs: Vec<String>| PolicyRule {
        api_groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs,
        ..PolicyRule::default()
    };
    let lease = ["get", "create", "update", "patch", "delete"]
        .map(String::from)
        .to_vec();
    ns.service_account_client("viewer").await?;
    ns.grant(
        "viewer",
        vec![
            rule(
                &["", "apps"],
                &["deployments", "services", "persistentvolumeclaims"],
                read.clone(),
            ),
            rule(
                &["stream.space", "stream.streamspace.io"],
                &["sessions"],
                read,
            ),
            rule(&["coordination.k8s.io"], &["leases"], lease),
        ],
    )
    .await?;
    let token = ns.service_account_token("viewer").await?;
    let token_file = tempfile::NamedTempFile::new()?;
    std::fs::write(token_file.path(), token)?;
    let connect = [
        "--api-url",
        bed.server_url(),
        "--token-file",
        token_file.path().to_str().unwrap(),
        "--trust-certs",
    ];
    let console = Console::start(&ns, &db, &connect)?;
    let host = console.host().to_owned();
    let cookie = open(&console)?;
    let (_, _, page) = get(&host, "/", Some(&cookie))?;
    assert!(
        page.contains(&format!("system:serviceaccount:{}:viewer", ns.name())),
        "{page}"
    );
    let (_, _, sessions) = get(&host, &format!("/sessions?ns={}", ns.name()), Some(&cookie))?;
    let body = format!(
        "ns={}&session=gone-1&csrf={}",
        ns.name(),
        csrf_of(&sessions)
    );
    let (status, _, done) = post(&host, "/sessions/collect", &cookie, &body)?;
    assert_eq!(status, 200, "{done}");
    assert!(
        done.contains("forbidden"),
        "the API server's refusal is shown: {done}"
    );
    assert!(!done.contains(">deleted<"), "{done}");
    assert!(
        ns.api::<Deployment>().get_opt("gone-1").await?.is_some(),
        "nothing deleted"
    );
    Ok(())
}

/// docs/console.md's command, run as the page writes it (the session database in
/// `$GC_SESSION_DATABASE_URL`, the kubeconfig the environment names, the default address): it
/// prints the link, which opens the console on namespace `streamspace`.
#[tokio::test(flavor = "multi_thread")]
async fn the_console_starts_as_its_page_says() -> Result {
    let Some(db) = TestDatabase::fresh("console-page").await? else {
        return Ok(());
    };
    common::one_live_session(&db).await?;
    let bed = TestBed::with_controllers().await?;
    let _ns = bed.namespace_exact("streamspace").await?;
    let page = include_str!("../../docs/console.md");
    let commands = common::markdown::fenced_commands(page);
    let words = commands
        .iter()
        .find(|c| {
            c.first().is_some_and(|w| w == "gc-cli") && c.get(1).is_some_and(|w| w == "console")
        })
        .expect("docs/console.md runs `gc-cli console`");
    // What a shell would make of the page's words: the variable it names, set.
    let args: Vec<String> = (words[1..].iter())
        .map(|w| w.replace("$GC_SESSION_DATABASE_URL", db.url()))
        .collect();
    let work = tempfile::tempdir()?;
    let mut child = command()
        .args(&args)
        .current_dir(work.path())
        .env("KUBECONFIG", bed.kubeconfig_path())
        .env_remove("GC_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let Some(line) = lines.next() else {
            let _ = child.kill();
            return Err("the console ended before printing its link".into());
        };
        let line = line?;
        eprintln!("console: {line}");
        if let Some((_, url)) = line.split_once("works once): ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let answer = (|| -> Result<String> {
        assert!(url.starts_with("http://127.0.0.1:8731/?token="), "{url}");
        let host = "127.0.0.1:8731";
        let (status, head, _) = get(host, url.split(host).nth(1).unwrap(), None)?;
        assert_eq!(status, 303, "{head}");
        let cookie = head
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: gc-console="));
        let cookie = cookie
            .and_then(|c| c.split(';').next())
            .ok_or("no cookie")?;
        let (status, _, page) = get(host, "/", Some(cookie))?;
        assert_eq!(status, 200, "{page}");
        Ok(page)
    })();
    let _ = child.kill();
    let _ = child.wait();
    let page = answer?;
    assert!(page.contains("Namespace streamspace"), "{page}");
    Ok(())
}
