//! Input validation every collector shares: one error type that names the input, the scope
//! (cluster id and namespace) and the Kubernetes name rules.

use thiserror::Error;

/// Namespaces no collector works in.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// An input outside what the collector accepts. The message names the input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InputError {
    /// `input` has `value`, which breaks `rule`.
    #[error("invalid {input} {value:?}: {rule}")]
    Invalid {
        /// The input's name as the user knows it (`cluster_id`, `max_pods`, ...).
        input: &'static str,
        /// The value given.
        value: String,
        /// What the value must be.
        rule: &'static str,
    },
}

impl InputError {
    /// The input's name as the user knows it.
    pub fn input(&self) -> &'static str {
        match self {
            Self::Invalid { input, .. } => input,
        }
    }
}

pub(crate) fn invalid(input: &'static str, value: impl ToString, rule: &'static str) -> InputError {
    InputError::Invalid {
        input,
        value: value.to_string(),
        rule,
    }
}

pub(crate) fn in_range(
    input: &'static str,
    v: i64,
    lo: i64,
    hi: i64,
    rule: &'static str,
) -> Result<(), InputError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(invalid(input, v, rule))
    }
}

/// `[a-z0-9][a-z0-9-]{0,39}`
fn is_cluster_id(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=40).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A DNS-1123 label: `[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?`
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&b.len())
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// A DNS-1123 subdomain, as object names are: dot-separated DNS labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A Kubernetes qualified name with an optional DNS-subdomain prefix, as label keys and
/// finalizer names are.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let prefix_ok =
        prefix.is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(is_dns_label));
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    prefix_ok
        && (1..=63).contains(&b.len())
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// The domains Kubernetes reserves for its own keys and finalizers; their subdomains too.
pub const RESERVED_DOMAINS: [&str; 2] = ["kubernetes.io", "k8s.io"];

/// Whether the qualified name `s` has a prefix in one of the [`RESERVED_DOMAINS`] (the domain
/// itself or a subdomain of it): `batch.kubernetes.io/job-tracking` is, `example.com/x` and
/// `kubernetes.io.example.com/x` are not. Prefixes compare as written: a valid one is lowercase.
pub(crate) fn in_reserved_domain(s: &str) -> bool {
    let Some((prefix, _)) = s.rsplit_once('/') else {
        return false;
    };
    RESERVED_DOMAINS.iter().any(|domain| {
        prefix == *domain
            || prefix
                .strip_suffix(domain)
                .is_some_and(|sub| sub.ends_with('.'))
    })
}

/// What a pin finalizer must not be: a name under a domain Kubernetes reserves.
pub const RESERVED_FINALIZER_RULE: &str = "must not be under kubernetes.io, k8s.io or a subdomain of either: Kubernetes reserves those for its own controllers' finalizers, and recovery releases every Pod carrying the pin";

/// The cluster id and namespace every collector is scoped by: the flow's rules (system
/// namespaces refused).
///
/// # Errors
/// [`InputError`] naming `cluster_id` or `namespace`.
pub fn check_scope(cluster_id: &str, namespace: &str) -> Result<(), InputError> {
    if !is_cluster_id(cluster_id) {
        return Err(invalid(
            "cluster_id",
            cluster_id,
            "must match [a-z0-9][a-z0-9-]{0,39}",
        ));
    }
    if !is_dns_label(namespace) {
        return Err(invalid(
            "namespace",
            namespace,
            "must be a DNS label of at most 63 characters",
        ));
    }
    if SYSTEM_NAMESPACES.contains(&namespace) {
        return Err(invalid("namespace", namespace, "system namespace refused"));
    }
    Ok(())
}
