//! Connecting to an API server: kubeconfig, in-cluster ServiceAccount, or the Kestra flow's
//! explicit inputs, with bounded timeouts and a first request that proves the connection.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError,
    NamedAuthInfo, NamedCluster, NamedContext,
};
use kube::{Client, Config};
use secrecy::SecretString;
use thiserror::Error;

use crate::cluster::KubeCluster;
use crate::errors::{chain, transport};

/// The environment variable that marks a process running in a Pod.
pub const SERVICE_HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";

/// How to reach the API server, and how long to wait for it.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Where the address and credentials come from.
    pub source: Source,
    /// Bound on establishing a connection (TCP and TLS handshake).
    pub connect_timeout: Duration,
    /// Bound on waiting for each part of an answer, and on sending each request.
    pub read_timeout: Duration,
}

impl Default for Connection {
    /// [`Source::Auto`], connect timeout 10 s, read timeout 30 s.
    fn default() -> Self {
        Self {
            source: Source::Auto,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
        }
    }
}

/// Where the API server's address and the credentials come from.
#[derive(Debug, Clone, Default)]
pub enum Source {
    /// [`Source::InCluster`] when `KUBERNETES_SERVICE_HOST` is set, else the default
    /// [`Source::Kubeconfig`].
    #[default]
    Auto,
    /// A kubeconfig file, as `kubectl` reads it.
    Kubeconfig {
        /// The file; `None` reads `$KUBECONFIG` (merging the files it lists) or
        /// `~/.kube/config`.
        path: Option<PathBuf>,
        /// The context; `None` uses the file's `current-context`.
        context: Option<String>,
    },
    /// The Pod's ServiceAccount: `KUBERNETES_SERVICE_HOST`/`_PORT`, and the token and CA mounted
    /// under `/var/run/secrets/kubernetes.io/serviceaccount` (re-read as they rotate).
    InCluster,
    /// The Kestra flow's connection inputs.
    Explicit(Explicit),
}

/// The Kestra flow's inputs `api_url`, `token`, `ca_cert_data` and `trust_certs`.
#[derive(Debug, Clone)]
pub struct Explicit {
    /// The API server's URL (`https://host:port`).
    pub api_url: String,
    /// The bearer token; never shown by `Debug`, in errors or in logs.
    pub token: Option<SecretString>,
    /// The CA bundle the server's certificate must chain to: base64 of PEM text, as in a
    /// kubeconfig's `certificate-authority-data`. `None` trusts the system's roots.
    pub ca_cert_data: Option<String>,
    /// Accept any server certificate (`insecure-skip-tls-verify`). For test clusters only.
    pub trust_certs: bool,
}

/// Why no connection could be made. Messages never contain a token.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read or has no usable context.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// Not running in a Pod, or its ServiceAccount files are missing.
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    /// An explicit input cannot be used.
    #[error("invalid {input}: {problem}")]
    Invalid {
        /// `api_url` or `ca_cert_data`.
        input: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The client could not be built from the configuration (TLS settings, credentials files).
    #[error("cannot set up the client: {0}")]
    Client(String),
    /// The server could not be reached in time, or its certificate was not trusted.
    #[error("cannot connect to the API server at {url}: {message}")]
    Connection {
        /// The API server's URL.
        url: String,
        /// What failed.
        message: String,
    },
    /// The server rejected the credentials (HTTP 401).
    #[error("the API server at {url} rejected the credentials (401 Unauthorized)")]
    Unauthorized {
        /// The API server's URL.
        url: String,
    },
    /// The server answered the first request with another error.
    #[error("the API server at {url} answered {status}: {message}")]
    Refused {
        /// The API server's URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The server's message.
        message: String,
    },
}

/// Connects: builds the client for `connection` and proves it with `GET /version`.
///
/// # Guarantees
/// The whole call takes at most about `connect_timeout + read_timeout`: an unreachable or
/// silent server fails with [`ConnectError::Connection`], a rejected token with
/// [`ConnectError::Unauthorized`]. The client keeps both timeouts for every later request.
///
/// # Errors
/// [`ConnectError`], naming the source or the input at fault.
pub async fn connect(connection: &Connection) -> Result<KubeCluster, ConnectError> {
    let config = config(connection).await?;
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let client = Client::try_from(config).map_err(|e| ConnectError::Client(chain(&e)))?;
    let bound = connection.connect_timeout + connection.read_timeout;
    match tokio::time::timeout(bound, client.apiserver_version()).await {
        Ok(Ok(version)) => {
            tracing::debug!(%url, version = %version.git_version, "connected to the API server");
            Ok(KubeCluster::new(client))
        }
        Ok(Err(e)) => Err(probe_error(url, e)),
        Err(_) => Err(ConnectError::Connection {
            url,
            message: format!("no answer within {bound:?}"),
        }),
    }
}

/// The namespace file of an in-cluster ServiceAccount.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The namespace `connection`'s context names, as kubectl reads it, with where it came from: the
/// kubeconfig context's `namespace`, or, in a Pod, its ServiceAccount's namespace. `None` when
/// none is named (an explicit API URL, a context without a namespace, nothing readable).
pub fn context_namespace(connection: &Connection) -> Option<(String, String)> {
    let in_cluster = std::env::var_os(SERVICE_HOST_ENV).is_some_and(|v| !v.is_empty());
    match resolve(&connection.source, in_cluster) {
        Resolved::Explicit(_) => None,
        Resolved::InCluster => std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
            .ok()
            .map(|ns| ns.trim().to_owned())
            .filter(|ns| !ns.is_empty())
            .map(|ns| (ns, "the Pod's ServiceAccount".to_owned())),
        Resolved::Kubeconfig { path, context } => {
            let file = match path {
                Some(path) => Kubeconfig::read_from(path),
                None => Kubeconfig::read(),
            }
            .ok()?;
            let name = context.or(file.current_context.as_ref())?;
            let named = file.contexts.iter().find(|c| &c.name == name)?;
            let ns = named.context.as_ref()?.namespace.clone()?;
            Some((ns, format!("kubeconfig context {name}")))
        }
    }
}

/// The client configuration for `connection`, without any request to the server.
///
/// # Errors
/// As [`connect`], except the errors of the first request.
pub async fn config(connection: &Connection) -> Result<Config, ConnectError> {
    let in_cluster = std::env::var_os(SERVICE_HOST_ENV).is_some_and(|v| !v.is_empty());
    let resolved = resolve(&connection.source, in_cluster);
    // An `@` is user information, or a piece of a password that ended the authority early: the
    // client would log the URL, and the errors name it. The text given, when there is one,
    // before anything reads it (the parsed URL has lost a fragment).
    if let Resolved::Explicit(explicit) = &resolved
        && explicit.api_url.contains('@')
    {
        return Err(user_information(&resolved));
    }
    let mut config = match &resolved {
        Resolved::Kubeconfig { path, context } => from_kubeconfig(*path, *context).await?,
        Resolved::InCluster => {
            Config::incluster().map_err(|e| ConnectError::InCluster(chain(&e)))?
        }
        Resolved::Explicit(explicit) => from_explicit(explicit).await?,
    };
    if config.cluster_url.to_string().contains('@') {
        return Err(user_information(&resolved));
    }
    config.connect_timeout = Some(connection.connect_timeout);
    config.read_timeout = Some(connection.read_timeout);
    config.write_timeout = Some(connection.read_timeout);
    // Time a pooled connection sat idle does not count against the next answer.
    config.reset_reader_on_write = true;
    Ok(config)
}

/// A [`Source`] with [`Source::Auto`] made concrete.
#[derive(Debug)]
enum Resolved<'a> {
    Kubeconfig {
        path: Option<&'a PathBuf>,
        context: Option<&'a String>,
    },
    InCluster,
    Explicit(&'a Explicit),
}

fn resolve(source: &Source, in_cluster: bool) -> Resolved<'_> {
    match source {
        Source::Auto if in_cluster => Resolved::InCluster,
        Source::Auto => Resolved::Kubeconfig {
            path: None,
            context: None,
        },
        Source::Kubeconfig { path, context } => Resolved::Kubeconfig {
            path: path.as_ref(),
            context: context.as_ref(),
        },
        Source::InCluster => Resolved::InCluster,
        Source::Explicit(explicit) => Resolved::Explicit(explicit),
    }
}

async fn from_kubeconfig(
    path: Option<&PathBuf>,
    context: Option<&String>,
) -> Result<Config, ConnectError> {
    let options = KubeConfigOptions {
        context: context.cloned(),
        ..KubeConfigOptions::default()
    };
    // Read here (`KUBECONFIG`, or `~/.kube/config`, as kubectl), so that a context that is not
    // there is said with the ones that are.
    let file = match path {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .map_err(kubeconfig_error)?;
    let mut contexts: Vec<&str> = file.contexts.iter().map(|c| c.name.as_str()).collect();
    contexts.sort_unstable();
    let contexts = match contexts.as_slice() {
        [] => "it has none".to_owned(),
        names => format!("its contexts: {}", names.join(", ")),
    };
    let loaded = Config::from_custom_kubeconfig(file, &options).await;
    loaded.map_err(|e| match e {
        KubeconfigError::LoadContext(name) => ConnectError::Kubeconfig(format!(
            "no context {name:?} in the kubeconfig ({contexts}): give one of them (--context)"
        )),
        KubeconfigError::CurrentContextNotSet => ConnectError::Kubeconfig(format!(
            "the kubeconfig names no current context ({contexts}): give one (--context)"
        )),
        e => kubeconfig_error(e),
    })
}

/// A kubeconfig error without the YAML parser's snippet of the file, which could show a token,
/// and saying what to do where the error alone would not.
fn kubeconfig_error(error: KubeconfigError) -> ConnectError {
    ConnectError::Kubeconfig(match &error {
        KubeconfigError::ReadConfig(e, path) => format!(
            "cannot read the kubeconfig {} ({e}): name one with --kubeconfig or KUBECONFIG, give \
             the API server with --api-url, or run in the cluster (--in-cluster)",
            path.display()
        ),
        KubeconfigError::FindPath => "no kubeconfig: KUBECONFIG is not set and there is no home \
                                      folder; name one with --kubeconfig, or give --api-url"
            .to_owned(),
        KubeconfigError::Parse(e) => match e.location() {
            Some(at) => format!(
                "not a valid kubeconfig (YAML error at line {}, column {})",
                at.line(),
                at.column()
            ),
            None => "not a valid kubeconfig (YAML error)".to_owned(),
        },
        _ => chain(&error),
    })
}

/// The explicit inputs as a one-context kubeconfig, so they are read exactly as kubectl would
/// read the same values.
async fn from_explicit(explicit: &Explicit) -> Result<Config, ConnectError> {
    let api_url = explicit.api_url.trim();
    if api_url.is_empty() {
        return Err(invalid("api_url", "empty"));
    }
    let ca_cert_data = explicit
        .ca_cert_data
        .as_deref()
        .map(|d| d.split_whitespace().collect::<String>())
        .filter(|d| !d.is_empty());
    let has_ca = ca_cert_data.is_some();
    let token = explicit.token.clone().filter(|t| {
        use secrecy::ExposeSecret as _;
        !t.expose_secret().is_empty()
    });
    let name = "gc".to_owned();
    let kubeconfig = Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(api_url.to_owned()),
                insecure_skip_tls_verify: Some(explicit.trust_certs),
                certificate_authority_data: ca_cert_data,
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                token,
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(explicit_error)?;
    if has_ca && config.root_cert.as_ref().is_none_or(Vec::is_empty) {
        return Err(invalid("ca_cert_data", "holds no PEM certificate"));
    }
    Ok(config)
}

/// The refusal of a server URL holding an `@`, naming where it came from (never the URL).
fn user_information(resolved: &Resolved<'_>) -> ConnectError {
    const WHY: &str = "holds an `@` (user information, or a piece of a password): it is not \
                       shown, and not used; credentials come from the kubeconfig's user, a token \
                       or the ServiceAccount";
    match resolved {
        Resolved::Explicit(_) => invalid("api_url", WHY),
        Resolved::Kubeconfig { .. } => ConnectError::Kubeconfig(format!("the server URL {WHY}")),
        Resolved::InCluster => ConnectError::InCluster(format!("the API server URL {WHY}")),
    }
}

fn invalid(input: &'static str, problem: impl Into<String>) -> ConnectError {
    ConnectError::Invalid {
        input,
        problem: problem.into(),
    }
}

/// Errors of the explicit inputs, named by input.
fn explicit_error(error: KubeconfigError) -> ConnectError {
    match &error {
        KubeconfigError::ParseClusterUrl(e) => invalid("api_url", e.to_string()),
        KubeconfigError::LoadCertificateAuthority(LoadDataError::DecodeBase64(e)) => {
            invalid("ca_cert_data", format!("not base64: {e}"))
        }
        KubeconfigError::LoadCertificateAuthority(_) | KubeconfigError::ParseCertificates(_) => {
            invalid("ca_cert_data", chain(&error))
        }
        _ => ConnectError::Client(chain(&error)),
    }
}

/// The first request's failure.
fn probe_error(url: String, error: kube::Error) -> ConnectError {
    match error {
        kube::Error::Api(status) if status.code == 401 => ConnectError::Unauthorized { url },
        kube::Error::Api(status) => ConnectError::Refused {
            url,
            status: status.code,
            message: status.message,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => ConnectError::Connection {
            url,
            message: transport(&error),
        },
        other => ConnectError::Client(chain(&other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explicit(ca_cert_data: Option<&str>) -> Connection {
        Connection {
            source: Source::Explicit(Explicit {
                api_url: "https://127.0.0.1:6443".into(),
                token: Some("s3cret-t0ken".into()),
                ca_cert_data: ca_cert_data.map(Into::into),
                trust_certs: false,
            }),
            ..Connection::default()
        }
    }

    #[test]
    fn auto_is_in_cluster_only_in_a_pod() {
        assert!(matches!(resolve(&Source::Auto, true), Resolved::InCluster));
        assert!(matches!(
            resolve(&Source::Auto, false),
            Resolved::Kubeconfig {
                path: None,
                context: None
            }
        ));
        let explicit = explicit(None).source;
        assert!(matches!(resolve(&explicit, true), Resolved::Explicit(_)));
    }

    /// The error of an explicit connection with `ca_cert_data`, which must be refused.
    async fn refused_ca_data(ca_cert_data: &str) -> ConnectError {
        config(&explicit(Some(ca_cert_data)))
            .await
            .expect_err("refused")
    }

    #[test]
    fn debug_never_shows_the_token() {
        let text = format!("{:?}", explicit(None));
        assert!(!text.contains("s3cret-t0ken"), "{text}");
    }

    #[tokio::test]
    async fn ca_data_that_is_not_base64_names_the_input() {
        let error = refused_ca_data("%%% not base64").await;
        assert!(
            matches!(&error, ConnectError::Invalid { input: "ca_cert_data", problem } if problem.starts_with("not base64")),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn ca_data_without_a_certificate_names_the_input() {
        // base64 of "hello, not a certificate\n"
        let error = refused_ca_data("aGVsbG8sIG5vdCBhIGNlcnRpZmljYXRlCg==").await;
        assert_eq!(
            error,
            ConnectError::Invalid {
                input: "ca_cert_data",
                problem: "holds no PEM certificate".into()
            }
        );
    }

    #[tokio::test]
    async fn a_url_that_is_not_a_url_names_the_input() {
        let mut connection = explicit(None);
        if let Source::Explicit(e) = &mut connection.source {
            e.api_url = "https://exa mple".into();
        }
        let error = config(&connection).await.expect_err("refused");
        assert!(
            matches!(
                error,
                ConnectError::Invalid {
                    input: "api_url",
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_url_with_user_information_is_refused_unshown() {
        for api_url in [
            "https://u:Zq@127.0.0.1:6443",
            "https://u:Zq?Wv@127.0.0.1:6443",
            "https://u:Zq/Wv@127.0.0.1:6443",
            "https://u:1#Wv@127.0.0.1:6443",
        ] {
            let mut connection = explicit(None);
            if let Source::Explicit(e) = &mut connection.source {
                e.api_url = api_url.into();
            }
            let error = config(&connection).await.expect_err(api_url);
            let text = format!("{error} {error:?}");
            assert!(!text.contains("Zq") && !text.contains("Wv"), "{text}");
            assert!(
                matches!(
                    &error,
                    ConnectError::Invalid {
                        input: "api_url",
                        ..
                    }
                ),
                "{error:?}"
            );
        }
        let file = std::env::temp_dir().join(format!("gc-k8s-userinfo-{}", std::process::id()));
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'https://u:Zq@127.0.0.1:6443'}}]\n\
             users: [{name: u, user: {}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u}}]\n",
        )
        .unwrap();
        let connection = Connection {
            source: Source::Kubeconfig {
                path: Some(file.clone()),
                context: None,
            },
            ..Connection::default()
        };
        let error = config(&connection).await.expect_err("refused");
        std::fs::remove_file(&file).unwrap();
        let text = format!("{error} {error:?}");
        assert!(!text.contains("Zq"), "{text}");
        assert!(matches!(error, ConnectError::Kubeconfig(_)), "{error:?}");
    }

    /// A kubeconfig that is not there, or a context it does not have: said with what to do
    /// (the flags, `KUBECONFIG`) and the contexts it has.
    #[tokio::test]
    async fn kubeconfig_errors_say_what_to_do() {
        let dir = std::env::temp_dir().join(format!("gc-k8s-contexts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let with = |path: PathBuf, context: Option<&str>| Connection {
            source: Source::Kubeconfig {
                path: Some(path),
                context: context.map(str::to_owned),
            },
            ..Connection::default()
        };
        let missing = dir.join("missing");
        let error = config(&with(missing.clone(), None)).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "kubeconfig: cannot read the kubeconfig {} (No such file or directory (os error \
                 2)): name one with --kubeconfig or KUBECONFIG, give the API server with \
                 --api-url, or run in the cluster (--in-cluster)",
                missing.display()
            )
        );
        let file = dir.join("config");
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Config\ncurrent-context: kind\n\
             clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n\
             users: [{name: u, user: {}}]\n\
             contexts: [{name: kind, context: {cluster: k, user: u}}, \
                        {name: prod, context: {cluster: k, user: u}}]\n",
        )
        .unwrap();
        assert!(config(&with(file.clone(), Some("prod"))).await.is_ok());
        let error = config(&with(file.clone(), Some("nope"))).await.unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            error.to_string(),
            "kubeconfig: no context \"nope\" in the kubeconfig (its contexts: kind, prod): give \
             one of them (--context)"
        );
    }

    #[tokio::test]
    async fn timeouts_are_set_on_the_client_config() {
        let mut connection = explicit(None);
        connection.connect_timeout = Duration::from_secs(3);
        connection.read_timeout = Duration::from_secs(7);
        let config = config(&connection).await.expect("config");
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.read_timeout, Some(Duration::from_secs(7)));
        assert!(config.root_cert.is_none());
        assert!(!config.accept_invalid_certs);
    }
}
