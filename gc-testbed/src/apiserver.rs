//! One etcd and one kube-apiserver per test binary, started on first use and shared by its tests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::sync::OnceCell;

use crate::binaries::Binaries;
use crate::namespace::TestNamespace;
use crate::process::{Supervised, free_port};
use crate::{Error, Result};

/// How long etcd and the API server may take to become ready (cold start on two busy cores).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The test binary's API server; a failed start is kept too, so every test reports it at once.
static SHARED: OnceCell<Result<TestBed, String>> = OnceCell::const_new();
/// The test binary's API server with a controller manager ([`TestBed::with_controllers`]).
static CONTROLLED: OnceCell<Result<TestBed, String>> = OnceCell::const_new();

/// The controllers [`TestBed::with_controllers`] runs: claims bind to volumes and volumes are
/// released, protected objects wait for their users, owners cascade to what they own
/// (Deployments to ReplicaSets to Pods), a deleted namespace's objects go and then it does.
const CONTROLLERS: &str = "persistentvolume-binder-controller,persistentvolume-protection-controller,\
persistentvolumeclaim-protection-controller,garbage-collector-controller,deployment-controller,\
replicaset-controller,namespace-controller";

/// A running kube-apiserver backed by its own etcd, with an admin identity.
///
/// There is one per test binary ([`TestBed::shared`]); tests isolate themselves with
/// [`TestBed::namespace`].
#[derive(Debug)]
pub struct TestBed {
    server_url: String,
    ca_file: PathBuf,
    kubeconfig_path: PathBuf,
    config: Config,
    _etcd: Supervised,
    _apiserver: Supervised,
    _controllers: Option<Supervised>,
}

impl TestBed {
    /// The test binary's API server, started by the first caller.
    ///
    /// # Guarantees
    ///
    /// etcd and kube-apiserver listen on loopback only, on free ports, with their data in
    /// temporary directories; both stop and their directories are removed when the test binary
    /// exits, even when it panics or is killed. `/readyz` has answered `ok` before this returns.
    ///
    /// # Errors
    ///
    /// [`Error::Start`] when the binaries are missing (see [`crate::BIN_ENV`]), a server exits
    /// early (the message carries the end of its log) or does not become ready in time. Every
    /// later call returns the same error without trying again.
    pub async fn shared() -> Result<&'static TestBed> {
        Self::once(&SHARED, false).await
    }

    /// A second API server of the test binary, with the same version's kube-controller-manager
    /// running the volume binder, the garbage collector, the protection controllers and the
    /// Deployment and ReplicaSet controllers ([`CONTROLLERS`]): for tests of what those do (a
    /// claim bound, an owner's delete cascading). No scheduler or kubelet: Pods stay Pending.
    ///
    /// # Errors
    /// As [`Self::shared`]; also when `kube-controller-manager` is missing or exits early.
    pub async fn with_controllers() -> Result<&'static TestBed> {
        Self::once(&CONTROLLED, true).await
    }

    async fn once(
        cell: &'static OnceCell<Result<TestBed, String>>,
        controllers: bool,
    ) -> Result<&'static TestBed> {
        let started = cell
            .get_or_init(|| async move {
                Self::start(controllers).await.map_err(|e| match e {
                    Error::Start(message) => message,
                    other => other.to_string(),
                })
            })
            .await;
        started.as_ref().map_err(|e| Error::Start(e.clone()))
    }

    /// A new client acting as the admin (group `system:masters`).
    ///
    /// Each call builds a client bound to the calling Tokio runtime (every `#[tokio::test]` has
    /// its own), so a client is never used after its runtime has gone.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, or if the TLS settings checked at start stop being valid.
    pub fn client(&self) -> Client {
        Client::try_from(self.config.clone()).expect("the test bed's client config is valid")
    }

    /// The admin client configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A kubeconfig file for the admin, for programs under test that read one.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The API server's URL, `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// Creates a namespace with a unique name that starts with `prefix`.
    ///
    /// `prefix` is reduced to lowercase letters, digits and `-`. Namespaces are not deleted
    /// (there is no namespace controller); they go with the API server.
    ///
    /// # Errors
    ///
    /// [`Error::Kube`] when the API server refuses the namespace.
    pub async fn namespace(&'static self, prefix: &str) -> Result<TestNamespace> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!(
            "{}-{}",
            dns_label(prefix, 50),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.namespace_exact(&name).await
    }

    /// Creates the namespace `name` as given, for a test that runs a page's commands as written
    /// (`-n streamspace`): one test of a test binary may take a name, as each binary has its own
    /// API server.
    ///
    /// # Errors
    ///
    /// [`Error::Kube`] when the API server refuses the namespace (it exists already).
    pub async fn namespace_exact(&'static self, name: &str) -> Result<TestNamespace> {
        let name = name.to_owned();
        let client = self.client();
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        Ok(TestNamespace::new(self, name, client))
    }

    /// A client configuration acting with `token`, for the same server.
    pub(crate) async fn config_with_token(&self, user: &str, token: &str) -> Result<Config> {
        let yaml = kubeconfig(&self.server_url, &self.ca_file, user, token);
        let kubeconfig = Kubeconfig::from_yaml(&yaml)?;
        Ok(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
    }

    /// Starts the servers; tries a second time when one exits early (a free port may have been
    /// taken by another process between our check and the server's bind).
    async fn start(controllers: bool) -> Result<Self> {
        let binaries = Binaries::locate()?;
        match Self::start_with(&binaries, controllers).await {
            Err(Error::Start(first)) => {
                eprintln!("gc-testbed: retrying once after: {first}");
                Self::start_with(&binaries, controllers).await
            }
            started => started,
        }
    }

    async fn start_with(binaries: &Binaries, controllers: bool) -> Result<Self> {
        let started = Instant::now();
        let etcd_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd = Supervised::spawn("etcd", &binaries.etcd, |dir| {
            let peer = format!("http://127.0.0.1:{}", free_port()?);
            Ok(vec![
                format!("--data-dir={}", dir.join("data").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer}"),
                "--unsafe-no-fsync".to_owned(),
            ])
        })?;
        let port = free_port()?;
        let server_url = format!("https://127.0.0.1:{port}");
        let token = admin_token();
        let apiserver = Supervised::spawn("kube-apiserver", &binaries.kube_apiserver, |dir| {
            apiserver_args(dir, &etcd_url, port, &token)
        })?;
        let ca_file = apiserver.dir().join("certs/apiserver.crt");
        let kubeconfig_path = apiserver.dir().join("kubeconfig");
        let deadline = started + READY_TIMEOUT;
        wait_for_file(&ca_file, deadline, &[&etcd, &apiserver]).await?;
        let text = kubeconfig(&server_url, &ca_file, "admin", &token);
        fs::write(&kubeconfig_path, &text)
            .map_err(|e| Error::io(format!("write {}", kubeconfig_path.display()), e))?;
        let config = Config::from_custom_kubeconfig(
            Kubeconfig::from_yaml(&text)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        wait_ready(&config, deadline, &[&etcd, &apiserver]).await?;
        eprintln!(
            "gc-testbed: kube-apiserver ready at {server_url} in {:.1?}",
            started.elapsed()
        );
        let controllers = if controllers {
            let binary = binaries.kube_controller_manager()?;
            let kubeconfig = kubeconfig_path.display().to_string();
            let manager = Supervised::spawn("kube-controller-manager", &binary, |_| {
                Ok(vec![
                    format!("--kubeconfig={kubeconfig}"),
                    format!("--controllers={CONTROLLERS}"),
                    "--leader-elect=false".to_owned(),
                    "--secure-port=0".to_owned(),
                    "--use-service-account-credentials=false".to_owned(),
                ])
            })?;
            eprintln!("gc-testbed: kube-controller-manager started ({CONTROLLERS})");
            Some(manager)
        } else {
            None
        };
        Ok(Self {
            server_url,
            ca_file,
            kubeconfig_path,
            config,
            _etcd: etcd,
            _apiserver: apiserver,
            _controllers: controllers,
        })
    }
}

/// The flags envtest uses, plus a static admin token in `system:masters` and a fresh
/// service-account signing key (so `TokenRequest` works).
fn apiserver_args(dir: &Path, etcd_url: &str, port: u16, token: &str) -> Result<Vec<String>> {
    let key = dir.join("sa.key");
    let public = dir.join("sa.pub");
    openssl(&["genrsa", "-out", &key.display().to_string(), "2048"])?;
    openssl(&[
        "rsa",
        "-in",
        &key.display().to_string(),
        "-pubout",
        "-out",
        &public.display().to_string(),
    ])?;
    let tokens = dir.join("tokens.csv");
    fs::write(&tokens, format!("{token},admin,admin,\"system:masters\"\n"))
        .map_err(|e| Error::io(format!("write {}", tokens.display()), e))?;
    Ok(vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--cert-dir={}", dir.join("certs").display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_owned(),
        // Loopback only: no `kubernetes` Service endpoints to reconcile (they may not be loopback).
        "--advertise-address=127.0.0.1".to_owned(),
        "--endpoint-reconciler-type=none".to_owned(),
        "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
        "--authorization-mode=RBAC".to_owned(),
        "--disable-admission-plugins=ServiceAccount".to_owned(),
        "--allow-privileged=true".to_owned(),
        format!("--service-account-issuer=https://127.0.0.1:{port}/"),
        format!("--service-account-key-file={}", public.display()),
        format!("--service-account-signing-key-file={}", key.display()),
        format!("--token-auth-file={}", tokens.display()),
    ])
}

/// Runs the `openssl` command line tool.
fn openssl(args: &[&str]) -> Result<()> {
    let output = Command::new("openssl").args(args).output().map_err(|e| {
        Error::io(
            "run openssl (install it: apt-get install -y openssl)".to_owned(),
            e,
        )
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::Start(format!(
        "openssl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// An admin bearer token, unique per start; the server listens on loopback only.
fn admin_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("gc-testbed-admin-{}-{nanos}", std::process::id())
}

/// A kubeconfig that trusts the API server's self-signed CA and authenticates with `token`.
fn kubeconfig(server: &str, ca_file: &Path, user: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: gc-testbed
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: gc-testbed
  context:
    cluster: gc-testbed
    user: {user}
    namespace: default
current-context: gc-testbed
",
        ca = ca_file.display(),
    )
}

/// Waits for the API server to write its self-signed certificate.
async fn wait_for_file(path: &Path, deadline: Instant, servers: &[&Supervised]) -> Result<()> {
    while !path.is_file() {
        poll(deadline, servers, || {
            format!("{} to appear", path.display())
        })
        .await?;
    }
    Ok(())
}

/// Waits until `/readyz` answers `ok`.
async fn wait_ready(config: &Config, deadline: Instant, servers: &[&Supervised]) -> Result<()> {
    let client = Client::try_from(config.clone())?;
    loop {
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| Error::Start(format!("build the /readyz request: {e}")))?;
        let last = match client.request_text(request).await {
            Ok(text) if text.trim() == "ok" => return Ok(()),
            Ok(text) => text,
            Err(e) => e.to_string(),
        };
        poll(deadline, servers, || {
            format!("kube-apiserver /readyz (last answer: {last})")
        })
        .await?;
    }
}

/// One step of a wait: fails when a server died or the deadline passed, else sleeps briefly.
async fn poll(
    deadline: Instant,
    servers: &[&Supervised],
    what: impl FnOnce() -> String,
) -> Result<()> {
    for server in servers {
        server.check_alive()?;
    }
    if Instant::now() > deadline {
        let logs: Vec<String> = servers.iter().map(|s| s.log_tail()).collect();
        return Err(Error::Timeout(format!(
            "{}; logs:\n{}",
            what(),
            logs.join("\n---\n")
        )));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// `text` reduced to a DNS label of at most `max` characters (never empty).
pub(crate) fn dns_label(text: &str, max: usize) -> String {
    let mut label: String = text
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(max)
        .collect();
    label = label.trim_matches('-').to_owned();
    if label.is_empty() {
        "test".to_owned()
    } else {
        label
    }
}

#[cfg(test)]
mod tests {
    use super::dns_label;

    #[test]
    fn dns_label_is_lowercase_alphanumeric_and_dashes() {
        assert_eq!(dns_label("Json_Patch test", 50), "json-patch-test");
        assert_eq!(dns_label("--", 50), "test");
        assert_eq!(dns_label("abcdef", 3), "abc");
    }
}
