//! The cluster adapter against a real kube-apiserver (one per test binary, a namespace per test):
//! lists, reads, fenced writes, RBAC, connection sources and failures, a live plan that agrees
//! with the offline one, metadata-only lists and fenced deletes of StreamSpace's kinds, and the
//! run lock on a Lease, and Events posted as exactly the required rules allow.

mod access;
mod connect;
mod events;
mod lease;
mod objects;
mod plan;
mod pods;
mod rbac;

use std::time::{SystemTime, UNIX_EPOCH};

use gc_k8s::KubeCluster;
use gc_testbed::{TestBed, TestNamespace};
use serde_json::Value;

/// Test results: any error fails the test with its message.
type Result<T = (), E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

/// The label the collector selects on (the default).
const COLLECT: &str = "diagnostics.example.com/collect";
/// The collector's pin finalizer (the default).
const PIN: &str = "diagnostics.example.com/collector";

/// A fresh namespace on this binary's API server.
async fn namespace(prefix: &str) -> Result<TestNamespace> {
    Ok(TestBed::shared().await?.namespace(prefix).await?)
}

/// The adapter acting as the admin in `ns`'s runtime.
fn admin(ns: &TestNamespace) -> KubeCluster {
    KubeCluster::new(ns.client().clone())
}

/// JSON text as a value.
fn json(text: &[u8]) -> Result<Value> {
    Ok(serde_json::from_slice(text)?)
}

/// `metadata.name` of every item of a list's text.
fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Seconds since the epoch, now.
fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
