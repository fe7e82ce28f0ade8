//! The core stays pure: no I/O runtime, cluster or database client in its dependencies, and no
//! clock or file access in its sources.

/// `json-patch` only with `test-util`: the fakes patch volumes as the API server does; `utoipa`
/// only with `openapi`: schemas derived from types, no I/O; `futures-util`: combinators over
/// futures (a bounded pipeline), no runtime; `url`: a parser (URLs shown without their secrets);
/// `tracing`: the logging facade (the binary installs the subscriber).
const ALLOWED: [&str; 12] = [
    "url",
    "tracing",
    "futures-util",
    "utoipa",
    "json-patch",
    "serde",
    "serde_json",
    "thiserror",
    "memchr",
    "async-trait",
    "sha2",
    "hmac",
];

#[test]
fn dependencies_are_pure() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for line in deps
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let name = line.split(['.', '=', ' ']).next().unwrap();
        assert!(ALLOWED.contains(&name), "gc-core must not depend on {name}");
    }
}

#[test]
fn sources_read_no_clock_and_do_no_io() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for banned in [
            "SystemTime",
            "Instant::now",
            "std::fs",
            "std::net",
            "std::process",
            "std::env",
            "tokio",
        ] {
            assert!(!text.contains(banned), "{} uses {banned}", p.display());
        }
    }
}
