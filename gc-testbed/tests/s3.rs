//! The S3-compatible servers of the test bed, each started, given a bucket, reached through the
//! fault proxy and stopped; and what tells them apart: moto answers a write into a missing bucket
//! `NoSuchBucket`, as AWS does.

use std::io::{Read, Write};
use std::net::TcpStream;

use gc_testbed::{Fault, FaultProxy, Result, S3Kind, S3Server};

/// Sends `METHOD path` with `body` to `endpoint` (`http://IP:PORT`), unsigned, and returns the
/// whole answer.
fn request(endpoint: &str, method: &str, path: &str, body: &str) -> String {
    let address = endpoint.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[tokio::test]
async fn each_server_starts_takes_a_bucket_and_stops() -> Result<()> {
    for kind in S3Kind::ALL {
        let mut server = S3Server::start_kind(kind).await?;
        assert_eq!(server.kind(), kind);
        server.create_bucket("diagnostics")?;
        let proxy = FaultProxy::start(&server.endpoint()).await?;
        // Through the proxy, unsigned: each server answers, as S3 does, with an error document
        // or a listing (s3s-fs refuses unsigned requests, moto takes them).
        let answer = request(proxy.endpoint(), "GET", "/diagnostics?list-type=2", "");
        assert!(answer.starts_with("HTTP/1.1 "), "{kind:?}: {answer}");
        assert!(answer.contains("Connection: close"), "{kind:?}: {answer}");
        proxy.set(Fault::RefuseWrites(""));
        let refused = request(proxy.endpoint(), "PUT", "/diagnostics/k", "x");
        assert!(refused.starts_with("HTTP/1.1 403"), "{kind:?}: {refused}");
        server.stop().await?;
        assert!(
            TcpStream::connect(server.endpoint().strip_prefix("http://").unwrap()).is_err(),
            "{kind:?} still listens"
        );
    }
    Ok(())
}

#[tokio::test]
async fn moto_answers_a_write_into_a_missing_bucket_no_such_bucket() -> Result<()> {
    let server = S3Server::start_kind(S3Kind::Moto).await?;
    server.create_bucket("diagnostics")?;
    // moto answers a second creation 200, as AWS does in us-east-1.
    server.create_bucket("diagnostics")?;
    let proxy = FaultProxy::start(&server.endpoint()).await?;
    let missing = request(proxy.endpoint(), "PUT", "/missing/gc/k", "x");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    assert!(missing.contains("<Code>NoSuchBucket</Code>"), "{missing}");
    let written = request(proxy.endpoint(), "PUT", "/diagnostics/gc/k", "x");
    assert!(written.starts_with("HTTP/1.1 200"), "{written}");
    Ok(())
}

#[tokio::test]
#[should_panic(expected = "moto keeps no files")]
async fn moto_has_no_object_paths() {
    let server = S3Server::start_kind(S3Kind::Moto).await.unwrap();
    let _ = server.object_path("diagnostics", "k");
}
