//! What makes the crate embeddable: no process-wide state, no signal handling, no process exit,
//! and futures a multi-threaded runtime can run (`Send`).

use gc_core::PodConfig;
use gc_core::sessions::SessionConfig;
use gc_runtime::adapters::{
    Archives, KubeCluster, KubePodCollector, SessionSources, SessionTable, Store, run_selected,
};
use gc_runtime::audit::Audit;
use gc_runtime::namespaces::Selection;
use gc_runtime::sessions::SessionCollector;
use gc_runtime::{Cancel, LockOptions, RunLock, Settings};

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
            // `static` as a keyword (an item), not the `'static` lifetime.
            let item = line.split_whitespace().any(|token| token == "static");
            assert!(!item, "{path}: a static item in {line:?}");
            for banned in [
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
fn _futures_are_send(cluster: &KubeCluster, options: &LockOptions, cancel: &dyn Cancel) {
    fn send<T: Send>(_: T) {}
    send(RunLock::take(
        cluster, "ns", "gc-pods", options, false, cancel,
    ));
}

/// Compiles only when a held lock can move to another task; never called.
fn _lock_is_send(lock: RunLock<KubeCluster>) {
    fn send<T: Send>(_: T) {}
    send(lock.release());
}

/// Compiles only when the runs' futures are `Send`: an embedder can spawn them on a
/// multi-threaded runtime. Never called.
fn _runs_are_send(
    pods: &KubePodCollector,
    configs: &[PodConfig],
    sessions: &SessionCollector<KubeCluster, SessionTable, Store, Archives>,
    session_configs: &[SessionConfig],
    audit: &mut (dyn Audit + Send),
) {
    fn send<T: Send>(_: T) {}
    send(pods.collect(configs, true, |_| unreachable!()));
    send(sessions.collect(session_configs, audit));
}

/// Compiles only when a run over a selection of namespaces, which connects its own cluster,
/// table and store, is `Send`. Never called.
fn _selected_runs_are_send(
    sources: SessionSources,
    sink: Archives,
    settings: Settings,
    selection: &Selection,
    audit: &mut (dyn Audit + Send),
) {
    fn send<T: Send>(_: T) {}
    send(run_selected(
        sources,
        None,
        sink,
        settings,
        selection,
        |_| unreachable!(),
        audit,
    ));
}

/// Compiles only when `archives prune` is `Send`: an embedder can prune on a multi-threaded
/// runtime. Never called.
fn _prune_is_send(store: &Store, sink: &Archives) {
    fn send<T: Send>(_: T) {}
    let policy = gc_runtime::adapters::archives::prune::Policy::new(
        std::time::Duration::from_secs(1),
        7,
        true,
    );
    send(gc_runtime::adapters::archives::prune::prune(
        store,
        sink,
        "primary",
        (None, None),
        &policy,
        0.0,
    ));
}

/// A collector and its settings can be shared between tasks.
fn _collectors_are_sync(pods: KubePodCollector, settings: Settings) {
    fn sync<T: Send + Sync>(_: T) {}
    sync(pods);
    sync(settings);
}
