//! `gc-cli serve`: a long-running collector. Runs `run pods` or `run sessions` every interval
//! through the same code path as the one-shot commands, and serves the last run's metrics on
//! `/metrics` (and `/healthz`) for Prometheus to scrape.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::run::RunCommand;

/// `gc-cli serve`
#[derive(Debug, Args)]
pub(crate) struct Serve {
    /// Address to serve `/metrics` on.
    #[arg(long, default_value = "0.0.0.0:9898", value_name = "ADDR")]
    listen: SocketAddr,
    /// Seconds between runs.
    #[arg(long, default_value_t = 21_600, value_name = "SECONDS")]
    interval_seconds: u64,
    /// Stop after this many runs (default: never).
    #[arg(long, value_name = "N")]
    runs: Option<u64>,
    /// The collector to run, with its flags.
    #[command(subcommand)]
    run: RunCommand,
}

pub(crate) fn serve(mut args: Serve) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    // Each run writes its metrics here; the server answers with the latest.
    let file = std::env::temp_dir().join(format!("gc-serve-{}.prom", std::process::id()));
    args.run.metrics_mut().set_file(file.clone());
    eprintln!(
        "gc-cli: serving /metrics on {}",
        listener.local_addr().map_or(args.listen, |a| a)
    );
    let served = file.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(stream, &served);
        }
    });
    let mut done = 0;
    loop {
        if let Err(error) = args.run.run() {
            eprintln!("gc-cli: run failed: {error:#}");
        }
        done += 1;
        if args.runs.is_some_and(|n| done >= n) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(args.interval_seconds));
    }
}

/// One HTTP/1.1 request: `GET /metrics` or `GET /healthz`.
fn answer(stream: TcpStream, metrics: &PathBuf) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = match path {
        "/metrics" => (
            "200 OK",
            std::fs::read_to_string(metrics).unwrap_or_default(),
        ),
        "/healthz" => ("200 OK", "ok\n".to_owned()),
        _ => ("404 Not Found", "not found\n".to_owned()),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}
