//! What makes the crate embeddable: no process-wide state, no signal handling, no process exit,
//! and futures a multi-threaded runtime can run (`Send`).

use gc_runtime::{Cancel, LockOptions, RunLock};

/// Every source file of the crate, with its text.
fn sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src"
    ))];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if p.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p.display().to_string(), text));
        }
    }
    assert!(!out.is_empty());
    out
}

#[test]
fn the_crate_keeps_no_process_state_and_leaves_signals_and_exit_to_its_caller() {
    for (path, text) in sources() {
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for banned in [
                "static ",
                "thread_local!",
                "OnceLock",
                "lazy_static",
                "signal",
                "process::exit",
                "std::process::abort",
            ] {
                assert!(!line.contains(banned), "{path}: {banned:?} in {line:?}");
            }
        }
    }
}

/// Compiles only when the run lock's futures are `Send`; never called.
fn _futures_are_send(cluster: &gc_k8s::KubeCluster, options: &LockOptions, cancel: &dyn Cancel) {
    fn send<T: Send>(_: T) {}
    send(RunLock::take(
        cluster, "ns", "gc-pods", options, false, cancel,
    ));
}

/// Compiles only when a held lock can move to another task; never called.
fn _lock_is_send(lock: RunLock) {
    fn send<T: Send>(_: T) {}
    send(lock.release());
}
