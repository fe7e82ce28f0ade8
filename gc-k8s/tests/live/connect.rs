//! Connection sources and connection failures, against the real server and dead addresses.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gc_core::ports::{Cluster, PodQuery};
use gc_k8s::{ConnectError, Connection, Explicit, KubeCluster, SecretString, Source, connect};
use gc_testbed::{FailedPod, TestBed};
use k8s_openapi::api::core::v1::Pod;
use secrecy::ExposeSecret as _;

use crate::{Result, item_names, json, namespace};

/// The admin's token on the test bed.
fn admin_token(bed: &TestBed) -> Result<SecretString> {
    Ok(bed
        .config()
        .auth_info
        .token
        .clone()
        .ok_or("the test bed's admin has a token")?)
}

/// PEM text of DER certificates, base64-encoded: the form of the flow's `ca_cert_data`.
fn ca_cert_data(ders: &[Vec<u8>]) -> String {
    let mut pem = String::new();
    for der in ders {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = STANDARD.encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    STANDARD.encode(pem)
}

/// The test bed's CA as `ca_cert_data`.
fn bed_ca(bed: &TestBed) -> Result<String> {
    let ders = bed
        .config()
        .root_cert
        .as_ref()
        .ok_or("the test bed's config has its CA")?;
    Ok(ca_cert_data(ders))
}

/// A fresh self-signed certificate that signed nothing the server holds, as `ca_cert_data`.
fn unrelated_ca() -> Result<String> {
    let output = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args([
            "-nodes",
            "-keyout",
            "/dev/null",
            "-subj",
            "/CN=unrelated",
            "-days",
            "1",
        ])
        .output()?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned().into());
    }
    Ok(STANDARD.encode(output.stdout))
}

fn explicit(api_url: &str, token: Option<SecretString>, ca: Option<String>) -> Connection {
    Connection {
        source: Source::Explicit(Explicit {
            api_url: api_url.to_owned(),
            token,
            ca_cert_data: ca,
            trust_certs: false,
        }),
        ..Connection::default()
    }
}

/// Lists the Pods of the namespace through `cluster`.
async fn names(cluster: &KubeCluster, namespace: &str) -> Result<Vec<String>> {
    let query = PodQuery {
        namespace: namespace.to_owned(),
        label_selector: String::new(),
        field_selector: String::new(),
        limit: 50,
    };
    Ok(item_names(&json(
        &cluster.list_pods(&query, None).await?.text,
    )?))
}

/// A connection that must fail; the error, checked never to show `secret`.
async fn refused(connection: &Connection, secret: &str) -> ConnectError {
    let error = connect(connection)
        .await
        .expect_err("the connection is refused");
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains(secret), "the token leaked: {text}");
    }
    error
}

#[tokio::test]
async fn a_kubeconfig_file_connects() -> Result {
    let bed = TestBed::shared().await?;
    let ns = namespace("kubeconfig").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let connection = Connection {
        source: Source::Kubeconfig {
            path: Some(bed.kubeconfig_path().to_owned()),
            context: None,
        },
        ..Connection::default()
    };
    let cluster = connect(&connection).await?;
    assert_eq!(names(&cluster, ns.name()).await?, ["p"]);
    Ok(())
}

#[tokio::test]
async fn a_missing_kubeconfig_or_context_is_a_kubeconfig_error() -> Result {
    let bed = TestBed::shared().await?;
    let missing = Connection {
        source: Source::Kubeconfig {
            path: Some(PathBuf::from("/nonexistent/kubeconfig")),
            context: None,
        },
        ..Connection::default()
    };
    let error = refused(&missing, "gc-testbed-admin").await;
    assert!(
        matches!(&error, ConnectError::Kubeconfig(m) if m.contains("/nonexistent/kubeconfig")),
        "{error}"
    );
    let no_context = Connection {
        source: Source::Kubeconfig {
            path: Some(bed.kubeconfig_path().to_owned()),
            context: Some("elsewhere".into()),
        },
        ..Connection::default()
    };
    let error = refused(&no_context, "gc-testbed-admin").await;
    assert!(
        matches!(&error, ConnectError::Kubeconfig(m) if m.contains("elsewhere")),
        "{error}"
    );
    Ok(())
}

#[tokio::test]
async fn explicit_inputs_connect_with_the_ca_or_with_trust_certs() -> Result {
    let bed = TestBed::shared().await?;
    let ns = namespace("explicit").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let token = admin_token(bed)?;

    let with_ca = explicit(bed.server_url(), Some(token.clone()), Some(bed_ca(bed)?));
    assert_eq!(names(&connect(&with_ca).await?, ns.name()).await?, ["p"]);

    let mut trusting = explicit(bed.server_url(), Some(token), None);
    if let Source::Explicit(e) = &mut trusting.source {
        e.trust_certs = true;
    }
    assert_eq!(names(&connect(&trusting).await?, ns.name()).await?, ["p"]);
    Ok(())
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized() -> Result {
    let bed = TestBed::shared().await?;
    let wrong = "not-a-token-the-server-knows";
    let connection = explicit(bed.server_url(), Some(wrong.into()), Some(bed_ca(bed)?));
    let error = refused(&connection, wrong).await;
    assert!(
        matches!(error, ConnectError::Unauthorized { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the API server at {} rejected the credentials (401 Unauthorized)",
            bed.server_url()
        )
    );
    Ok(())
}

#[tokio::test]
async fn a_ca_that_did_not_sign_the_server_certificate_is_a_clear_error() -> Result {
    let bed = TestBed::shared().await?;
    let token = admin_token(bed)?;
    let secret = token.expose_secret().to_owned();

    let unrelated = explicit(bed.server_url(), Some(token.clone()), Some(unrelated_ca()?));
    let error = refused(&unrelated, &secret).await;
    assert!(
        matches!(&error, ConnectError::Connection { message, .. } if message.contains("certificate")),
        "{error}"
    );

    let system_roots = explicit(bed.server_url(), Some(token.clone()), None);
    let error = refused(&system_roots, &secret).await;
    assert!(
        matches!(&error, ConnectError::Connection { message, .. } if message.contains("certificate")),
        "{error}"
    );

    let garbage = explicit(
        bed.server_url(),
        Some(token.clone()),
        Some("@@not base64@@".into()),
    );
    let error = refused(&garbage, &secret).await;
    assert!(
        matches!(
            &error,
            ConnectError::Invalid {
                input: "ca_cert_data",
                ..
            }
        ),
        "{error}"
    );

    let not_pem = explicit(
        bed.server_url(),
        Some(token),
        Some(STANDARD.encode("not a pem")),
    );
    let error = refused(&not_pem, &secret).await;
    assert_eq!(
        error.to_string(),
        "invalid ca_cert_data: holds no PEM certificate"
    );
    Ok(())
}

#[tokio::test]
async fn an_unreachable_url_fails_within_a_bounded_time() -> Result {
    let started = Instant::now();
    let connection = explicit("https://127.0.0.1:1", Some("t0ken".into()), None);
    let error = refused(&connection, "t0ken").await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(
        matches!(&error, ConnectError::Connection { url, .. } if url == "https://127.0.0.1:1"),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_server_that_never_answers_fails_within_the_connect_timeout() -> Result {
    // Accepts TCP connections and never speaks: the TLS handshake cannot complete.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("https://{}", listener.local_addr()?);
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut connection = explicit(&url, Some("t0ken".into()), None);
    connection.connect_timeout = Duration::from_secs(1);
    connection.read_timeout = Duration::from_secs(2);
    let started = Instant::now();
    let error = refused(&connection, "t0ken").await;
    let took = started.elapsed();
    silent.abort();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        matches!(&error, ConnectError::Connection { message, .. } if message.starts_with("timed out")),
        "{error:?}"
    );
    Ok(())
}
