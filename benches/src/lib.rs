//! Generated Pod inventories for the benchmarks: realistic Failed, Running and Succeeded Pods.
//!
//! Sizes follow what a namespace of batch Pods looks like in `kubectl get pods -o json`: about
//! 1.2 KB of metadata and status per Pod in the flow's `{size, metadataItems, statusItems}`
//! shape, a quarter of them eligible.

use serde_json::{Value, json};

/// A small deterministic generator (xorshift), so inventories are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn pod(i: usize, rng: &mut Rng) -> (Value, Value) {
    let name = format!("batch-{i:06}-{:05x}", rng.below(1 << 20));
    let uid = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        rng.next() as u32,
        rng.below(1 << 16),
        rng.below(1 << 12),
        rng.below(1 << 12),
        rng.below(1 << 48)
    );
    let phase = match rng.below(8) {
        0..=3 => "Failed",
        4..=5 => "Succeeded",
        _ => "Running",
    };
    let finished = format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}Z",
        20 + rng.below(9),
        rng.below(24),
        rng.below(60),
        rng.below(60)
    );
    let labelled = rng.below(4) != 0;
    let mut labels =
        json!({"app": "nightly-report", "team": "data", "pod-template-hash": "7d9c8f6b5"});
    if labelled {
        labels["diagnostics.example.com/collect"] = json!("true");
    }
    let meta = json!({
        "name": name,
        "namespace": "batch",
        "uid": uid,
        "resourceVersion": format!("{}", 100_000 + i),
        "creationTimestamp": "2026-11-19T08:00:00Z",
        "labels": labels,
        "annotations": {"kubectl.kubernetes.io/default-container": "main"},
        "managedFields": [{
            "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-19T08:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:team": {}}}}
        }]
    });
    let state = if phase == "Running" {
        json!({"running": {"startedAt": "2026-11-19T08:00:05Z"}})
    } else {
        json!({"terminated": {"exitCode": if phase == "Failed" { 1 } else { 0 }, "reason": if phase == "Failed" { "Error" } else { "Completed" },
            "startedAt": "2026-11-19T08:00:05Z", "finishedAt": finished,
            "containerID": format!("containerd://{:016x}{:016x}", rng.next(), rng.next())}})
    };
    let status = json!({
        "phase": phase,
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-19T08:00:00Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-19T08:10:00Z", "reason": "PodFailed"}
        ],
        "hostIP": "10.0.3.17", "podIP": format!("10.244.{}.{}", rng.below(256), rng.below(256)),
        "startTime": "2026-11-19T08:00:00Z",
        "containerStatuses": [{
            "name": "main", "ready": false, "restartCount": 0, "started": false,
            "image": "registry.example.com/reports/nightly:1.42.0",
            "imageID": "registry.example.com/reports/nightly@sha256:0f3c9a7d5e2b1c4a8f6e9d0b3a5c7e1f2d4b6a8c0e2f4a6b8d0c2e4f6a8b0c2d",
            "state": state, "lastState": {}
        }]
    });
    (meta, status)
}

/// An inventory of `n` Pods in the reference flow's shape, as JSON text.
pub fn native_inventory(n: usize) -> Vec<u8> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (metas, statuses): (Vec<Value>, Vec<Value>) = (0..n).map(|i| pod(i, &mut rng)).unzip();
    let statuses: Vec<Value> = statuses.into_iter().map(|s| json!({"status": s})).collect();
    serde_json::to_vec(&json!({"size": n, "metadataItems": metas, "statusItems": statuses}))
        .unwrap_or_default()
}
