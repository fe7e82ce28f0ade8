//! The cluster port on kube-rs: connection, server-filtered paginated lists, fenced writes.
//!
//! - [`connect`] turns a [`Connection`] (kubeconfig, in-cluster ServiceAccount, or the Kestra
//!   flow's `api_url` / `token` / `ca_cert_data` / `trust_certs`) into a [`KubeCluster`], with
//!   bounded timeouts and a first request that proves address, certificate and token.
//! - [`KubeCluster`] implements [`gc_core::ports::Cluster`]: Pods as the server's JSON text,
//!   JSON patches with `test` ops, deletes with `uid` and `resourceVersion` preconditions, both
//!   with server-side dry run. Errors are mapped once, by HTTP status code, into
//!   [`ClusterError`](gc_core::ports::ClusterError).
//! - [`KubeCluster`] implements [`gc_core::ports::ObjectCluster`] for the session collector:
//!   metadata-only lists (`PartialObjectMetadataList`) of any namespaced kind, a kind whose CRD
//!   is not installed answering `NotFound`, and deletes fenced on `uid` and `resourceVersion`.
//! - [`KubeCluster`] implements [`gc_core::ports::Lock`] with a `coordination.k8s.io/v1` Lease,
//!   every write fenced on its resourceVersion, so that two runs never both hold it.
//! - [`rbac::required_rules`] is the namespaced Role the collectors need, and no more;
//!   [`rbac::cluster_rules`] the ClusterRole of a cluster-wide install.
//! - [`list_namespaces`] names the Namespaces a run over many of them covers;
//!   [`context_namespace`] the namespace a kubeconfig context (or a Pod's ServiceAccount) names.
//! - [`event`] and [`KubeCluster::post_event`]: events.k8s.io/v1 Events about what a run did.
//! - [`list_inventory`] pages through a [`PodQuery`](gc_core::ports::PodQuery) (built by
//!   [`failed_pod_query`]: `<collect-label>=true`, `status.phase=Failed`) into the same
//!   [`Inventory`](gc_core::pods::inventory::Inventory) an inventory file gives, restarting on an
//!   expired continue token.
//!
//! ```no_run
//! # async fn example(cfg: &gc_core::PodConfig) -> Result<(), Box<dyn std::error::Error>> {
//! use gc_k8s::{Connection, connect, failed_pod_query, list_inventory};
//!
//! let cluster = connect(&Connection::default()).await?;
//! let rules = cfg.rules();
//! let query = failed_pod_query(cfg, 500);
//! let inventory = list_inventory(&cluster, &query, rules, cfg.max_inventory + 1, &mut |_, _| {})
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Tokens never appear in `Debug` output, errors or logs.
//!
//! The crate uses k8s-openapi's types (the Lease, the RBAC rules) and picks no Kubernetes
//! version: the binary that links it enables one `k8s-openapi` version feature.

mod access;
mod cluster;
mod connect;
mod errors;
mod events;
mod lease;
pub use lease::Written;
mod namespaces;
mod objects;
pub mod rbac;

pub use access::TokenAccount;
pub use cluster::{FIELD_MANAGER, KubeCluster};
pub use connect::{
    ConnectError, Connection, Explicit, SERVICE_HOST_ENV, Source, config, connect,
    context_namespace,
};
pub use events::{EventRecord, EventType, INSTANCE_LIMIT, NOTE_LIMIT, Regarding, Reporter, event};
pub use gc_core::pods::list::{FAILED_PHASE, MAX_RESTARTS, failed_pod_query, list_inventory};
pub use namespaces::list_namespaces;
pub use secrecy::SecretString;
