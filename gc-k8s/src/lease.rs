//! [`Lock`] on [`KubeCluster`]: one run at a time, through a `coordination.k8s.io/v1` Lease
//! written with resourceVersion fencing.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use gc_core::ports::{ClusterError, LeaseHolder, Lock, Renewal};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::KubeCluster;
use crate::cluster::{FIELD_MANAGER, check_name, check_namespace};
use crate::errors::{Call, cluster_error};

/// How many times `release` reads the Lease again after another write got there first.
const RELEASE_ATTEMPTS: usize = 3;

/// Now, to the microsecond: the precision a Lease stores, so a written time reads back equal.
fn now() -> Timestamp {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The Lease's holder, `None` when empty.
fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// Whether `holder` may take `lease` at `now`: nobody holds it, `holder` does, or the holder's
/// last renewal (its acquisition when never renewed) plus the lease duration is past. A Lease
/// without those times has expired.
fn takeable(lease: &Lease, holder: &str, now: Timestamp) -> bool {
    let Some(current) = holder_of(lease) else {
        return true;
    };
    if current == holder {
        return true;
    }
    let Some(spec) = &lease.spec else {
        return true;
    };
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref());
    let (Some(renewed), Some(seconds)) = (renewed, spec.lease_duration_seconds) else {
        return true;
    };
    renewed
        .0
        .checked_add(SignedDuration::from_secs(i64::from(seconds)))
        .is_ok_and(|expiry| expiry <= now)
}

/// `spec` taken (or renewed) by `holder` at `now` for `seconds`: the acquisition time and the
/// transition count change only when the holder does.
fn taken(spec: Option<LeaseSpec>, holder: &str, seconds: i32, now: Timestamp) -> LeaseSpec {
    let spec = spec.unwrap_or_default();
    let renewing = spec.holder_identity.as_deref() == Some(holder);
    let had_holder = spec
        .holder_identity
        .as_deref()
        .is_some_and(|h| !h.is_empty());
    let transitions = spec.lease_transitions.unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(holder.to_owned()),
        lease_duration_seconds: Some(seconds),
        acquire_time: if renewing {
            spec.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if had_holder && !renewing {
            transitions.saturating_add(1)
        } else {
            transitions
        }),
        ..spec
    }
}

/// Whether the stored Lease is exactly what this call wrote (`holder`, renewed at `now`): after
/// a 409, that tells a replayed request whose first attempt succeeded from a lost race.
fn is_our_write(lease: Option<&Lease>, holder: &str, now: Timestamp) -> bool {
    lease.is_some_and(|l| {
        holder_of(l) == Some(holder)
            && l.spec.as_ref().and_then(|s| s.renew_time.as_ref()) == Some(&MicroTime(now))
    })
}

/// Checks the arguments of a lock call before any request.
fn check(namespace: &str, name: &str, holder: &str) -> Result<(), ClusterError> {
    check_namespace(namespace)?;
    check_name("lease", name)?;
    if holder.is_empty() {
        return Err(ClusterError::Other(
            "a lease holder must not be empty".into(),
        ));
    }
    Ok(())
}

/// The lease duration in the Lease's type: 1 second at least.
fn duration(ttl_seconds: u32) -> Result<i32, ClusterError> {
    i32::try_from(ttl_seconds)
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| {
            ClusterError::Other(format!(
                "invalid lease duration {ttl_seconds} s: 1 to {} s",
                i32::MAX
            ))
        })
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// The Lease calls in one namespace, with errors mapped for `leases` there.
struct Leases<'a> {
    api: Api<Lease>,
    namespace: &'a str,
}

impl<'a> Leases<'a> {
    fn new(cluster: &KubeCluster, namespace: &'a str) -> Self {
        Self {
            api: Api::namespaced(cluster.client().clone(), namespace),
            namespace,
        }
    }

    fn error(&self, verb: &'static str, error: kube::Error) -> ClusterError {
        let call = Call {
            verb,
            resource: "leases",
            namespace: self.namespace,
        };
        cluster_error(error, call)
    }

    async fn get(&self, name: &str) -> Result<Option<Lease>, ClusterError> {
        self.api
            .get_opt(name)
            .await
            .map_err(|e| self.error("get", e))
    }

    /// Creates `name` held by `holder`; `Ok(None)` when it already exists (409).
    async fn create(&self, name: &str, spec: LeaseSpec) -> Result<Option<Lease>, ClusterError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        match self.api.create(&post_params(), &lease).await {
            Ok(lease) => Ok(Some(lease)),
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(self.error("create", e)),
        }
    }

    /// Replaces `lease` (which carries the resourceVersion it was read at); `Ok(None)` when
    /// it changed since (409).
    async fn replace(&self, name: &str, lease: &Lease) -> Result<Option<Lease>, ClusterError> {
        match self.api.replace(name, &post_params(), lease).await {
            Ok(lease) => Ok(Some(lease)),
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(self.error("update", e)),
        }
    }

    /// After a write that conflicted at `now`: the stored Lease when it is exactly what this
    /// write made (a replayed request whose first attempt succeeded), else `None`.
    async fn ours_after_conflict(
        &self,
        name: &str,
        holder: &str,
        now: Timestamp,
    ) -> Result<Option<Lease>, ClusterError> {
        let stored = self.get(name).await?;
        let ours = is_our_write(stored.as_ref(), holder, now);
        tracing::debug!(
            namespace = self.namespace,
            name,
            holder,
            ours,
            "lease write conflicted"
        );
        Ok(stored.filter(|_| ours))
    }
}

/// A Lease as its holder last wrote it: what a renewal must find unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The resourceVersion of the holder's last write.
    resource_version: String,
    /// The renew time it wrote.
    renewed: Timestamp,
}

impl Written {
    fn of(lease: &Lease, renewed: Timestamp) -> Self {
        Self {
            resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
            renewed,
        }
    }
}

/// `lease` when it is still exactly `held` by `holder` and not expired at `now`; `Err` says why
/// not.
fn still_held(
    lease: Option<Lease>,
    holder: &str,
    held: &Written,
    seconds: i32,
    now: Timestamp,
) -> Result<Lease, String> {
    let Some(lease) = lease else {
        return Err("the Lease was deleted".into());
    };
    match holder_of(&lease) {
        Some(h) if h == holder => {}
        Some(other) => return Err(format!("it is held by {other} now")),
        None => return Err("it was released by someone else".into()),
    }
    if lease.metadata.resource_version.as_deref() != Some(held.resource_version.as_str()) {
        return Err("it was written by another run since the last renewal".into());
    }
    let expiry = held
        .renewed
        .checked_add(SignedDuration::from_secs(i64::from(seconds)))
        .unwrap_or(held.renewed);
    if expiry <= now {
        return Err(format!(
            "it expired at {expiry} before it was renewed (the process was frozen or could not reach the API server)"
        ));
    }
    Ok(lease)
}

/// # Guarantees
/// - Every write is fenced: a create fails when the Lease exists, a replace carries the
///   resourceVersion it was read at. Of two runs that race, at most one gets the Lease.
/// - A lost race is `Ok(None)`, not an error. When the client replayed a write whose first
///   attempt had succeeded (kube retries 429/503/504), the 409 of the replay is recognised by
///   reading back exactly the holder and renew time this call wrote, and answers the Lease.
/// - `release` touches the Lease only while `holder` holds it, and then only clears
///   `holderIdentity`.
///
/// # Caveats
/// Expiry compares the Lease's `renewTime` with this machine's clock: clocks more than a small
/// fraction of the lease duration apart let a run take a lease early (or late). Keep the TTL
/// well above the expected skew and above the run's length; renew with [`Lock::renew`].
///
/// # Errors
/// Invalid arguments (namespace not a DNS label, name not a DNS subdomain, empty holder, TTL 0
/// or above `i32::MAX`) are [`ClusterError::Other`] before any request; API errors are mapped
/// as for [`gc_core::ports::Cluster`], a 403 naming `leases`.
#[async_trait]
impl Lock for KubeCluster {
    type Token = Written;

    /// Takes the Lease, returning it as written for [`Lock::renew`]; `None` when another
    /// holder has it.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`].
    async fn acquire(
        &self,
        namespace: &str,
        name: &str,
        holder: &str,
        ttl_seconds: u32,
    ) -> Result<Option<Written>, ClusterError> {
        check(namespace, name, holder)?;
        let seconds = duration(ttl_seconds)?;
        let leases = Leases::new(self, namespace);
        let now = now();
        let written = match leases.get(name).await? {
            None => {
                leases
                    .create(name, taken(None, holder, seconds, now))
                    .await?
            }
            Some(lease) if takeable(&lease, holder, now) => {
                let lease = Lease {
                    spec: Some(taken(lease.spec, holder, seconds, now)),
                    ..lease
                };
                leases.replace(name, &lease).await?
            }
            Some(_) => return Ok(None),
        };
        let written = match written {
            Some(lease) => Some(lease),
            None => leases.ours_after_conflict(name, holder, now).await?,
        };
        if written.is_some() {
            tracing::debug!(namespace, name, holder, "lease taken");
        }
        Ok(written.map(|lease| Written::of(&lease, now)))
    }

    /// Renews a Lease `holder` took ([`Lock::acquire`]) and last wrote as `held`, fenced
    /// on that write's resourceVersion. [`Renewal::Lost`] when the Lease expired or was written
    /// by anyone else since (taken, released, taken back: `renewTime`, `leaseTransitions` and
    /// the holder all move the resourceVersion): the run must write nothing more, and the Lease
    /// is left as it is.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]; an error is no loss by itself (the caller decides how long it
    /// may go without a renewal).
    async fn renew(
        &self,
        namespace: &str,
        name: &str,
        holder: &str,
        ttl_seconds: u32,
        held: &Written,
    ) -> Result<Renewal<Written>, ClusterError> {
        check(namespace, name, holder)?;
        let seconds = duration(ttl_seconds)?;
        let leases = Leases::new(self, namespace);
        let stored = leases.get(name).await?;
        let now = now();
        let lease = match still_held(stored, holder, held, seconds, now) {
            Ok(lease) => lease,
            Err(why) => return Ok(Renewal::Lost(why)),
        };
        let lease = Lease {
            spec: Some(taken(lease.spec, holder, seconds, now)),
            ..lease
        };
        let written = match leases.replace(name, &lease).await? {
            Some(lease) => Some(lease),
            None => leases.ours_after_conflict(name, holder, now).await?,
        };
        Ok(match written {
            Some(lease) => Renewal::Renewed(Written::of(&lease, now)),
            None => Renewal::Lost("another run wrote the Lease during the renewal".into()),
        })
    }

    /// The holder of a Lease no other holder could take now (its last renewal plus its duration
    /// not past).
    ///
    /// # Errors
    /// The Lease could not be read.
    async fn holder(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<LeaseHolder>, ClusterError> {
        check_namespace(namespace)?;
        check_name("lease", name)?;
        let Some(lease) = Leases::new(self, namespace).get(name).await? else {
            return Ok(None);
        };
        // No holder is `""`: takeable by anyone else means held by nobody.
        if takeable(&lease, "", now()) {
            return Ok(None);
        }
        let spec = lease.spec.as_ref();
        let until = spec.and_then(|s| {
            let renewed = s.renew_time.as_ref().or(s.acquire_time.as_ref())?;
            Some(renewed.0.as_second() + i64::from(s.lease_duration_seconds?))
        });
        Ok(holder_of(&lease).map(|holder| LeaseHolder {
            holder: holder.to_owned(),
            #[allow(clippy::cast_precision_loss)] // seconds since the epoch: exact below 2^53
            until: until.unwrap_or_default() as f64,
        }))
    }

    async fn release(&self, namespace: &str, name: &str, holder: &str) -> Result<(), ClusterError> {
        check(namespace, name, holder)?;
        let leases = Leases::new(self, namespace);
        for _ in 0..RELEASE_ATTEMPTS {
            let Some(lease) = leases.get(name).await? else {
                return Ok(());
            };
            if holder_of(&lease) != Some(holder) {
                return Ok(());
            }
            let mut spec = lease.spec.clone().unwrap_or_default();
            spec.holder_identity = None;
            let released = Lease {
                spec: Some(spec),
                ..lease
            };
            if leases.replace(name, &released).await?.is_some() {
                tracing::debug!(namespace, name, holder, "lease released");
                return Ok(());
            }
        }
        Err(ClusterError::Changed {
            status: 409,
            message: format!("lease {name} kept changing while {holder} released it"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn lease(holder: Option<&str>, renewed: Option<i64>, seconds: Option<i32>) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed.map(|s| MicroTime(at(s))),
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn who_may_take_a_lease() {
        let now = at(100);
        let cases = [
            ("free", lease(None, Some(99), Some(60)), true),
            ("empty holder", lease(Some(""), Some(99), Some(60)), true),
            ("own", lease(Some("me"), Some(99), Some(60)), true),
            ("held", lease(Some("other"), Some(99), Some(60)), false),
            (
                "held to the last second",
                lease(Some("other"), Some(41), Some(60)),
                false,
            ),
            ("expired", lease(Some("other"), Some(40), Some(60)), true),
            ("no renew time", lease(Some("other"), None, Some(60)), true),
            ("no duration", lease(Some("other"), Some(99), None), true),
            ("no spec", Lease::default(), true),
        ];
        for (what, lease, expected) in cases {
            assert_eq!(takeable(&lease, "me", now), expected, "{what}");
        }
    }

    #[test]
    fn taking_and_renewing() {
        let first = taken(None, "a", 30, at(0));
        assert_eq!(first.holder_identity.as_deref(), Some("a"));
        assert_eq!(first.lease_duration_seconds, Some(30));
        assert_eq!(first.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(first.lease_transitions, Some(0));

        let renewed = taken(Some(first.clone()), "a", 30, at(10));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(10))));
        assert_eq!(renewed.lease_transitions, Some(0));

        let moved = taken(Some(renewed), "b", 60, at(50));
        assert_eq!(moved.holder_identity.as_deref(), Some("b"));
        assert_eq!(moved.acquire_time, Some(MicroTime(at(50))));
        assert_eq!(moved.lease_duration_seconds, Some(60));
        assert_eq!(moved.lease_transitions, Some(1));

        let released = LeaseSpec {
            holder_identity: None,
            ..moved
        };
        let after_release = taken(Some(released), "c", 60, at(70));
        assert_eq!(after_release.lease_transitions, Some(1));
    }

    #[test]
    fn a_renewal_finds_the_lease_lost_once_anyone_else_wrote_it_or_it_expired() {
        let ours = |rv: &str, holder: Option<&str>| Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.to_owned()),
                ..ObjectMeta::default()
            },
            ..lease(holder, Some(0), Some(30))
        };
        let held = Written {
            resource_version: "7".into(),
            renewed: at(0),
        };
        let cases = [
            ("as last written", Some(ours("7", Some("me"))), 29, true),
            (
                "expired, even if nobody took it",
                Some(ours("7", Some("me"))),
                30,
                false,
            ),
            (
                "taken and given back",
                Some(ours("9", Some("me"))),
                10,
                false,
            ),
            ("held by another", Some(ours("9", Some("other"))), 10, false),
            // Each check stands alone: another holder is refused at our own resourceVersion.
            (
                "another holder at our resourceVersion",
                Some(ours("7", Some("other"))),
                10,
                false,
            ),
            (
                "released at our resourceVersion",
                Some(ours("7", None)),
                10,
                false,
            ),
            ("released by another", Some(ours("9", None)), 10, false),
            ("deleted", None, 10, false),
        ];
        for (what, lease, seconds, kept) in cases {
            let found = still_held(lease, "me", &held, 30, at(seconds));
            assert_eq!(found.is_ok(), kept, "{what}: {found:?}");
        }
    }

    #[test]
    fn a_conflict_is_ours_only_when_the_stored_lease_is_our_write() {
        let ours = lease(Some("me"), Some(5), Some(60));
        assert!(is_our_write(Some(&ours), "me", at(5)));
        assert!(!is_our_write(Some(&ours), "me", at(6)));
        assert!(!is_our_write(Some(&ours), "other", at(5)));
        assert!(!is_our_write(None, "me", at(5)));
    }

    #[test]
    fn arguments_are_checked_before_any_request() {
        assert!(check("ns", "gc-pods-prod.eu", "run-1").is_ok());
        assert!(check("ns", "Gc", "run-1").is_err());
        assert!(check("ns", "a/b", "run-1").is_err());
        assert!(check("a/b", "gc", "run-1").is_err());
        assert!(check("ns", "gc", "").is_err());
        assert_eq!(duration(30), Ok(30));
        assert!(duration(0).is_err());
        assert!(duration(u32::MAX).is_err());
    }

    #[test]
    fn now_is_to_the_microsecond() {
        let t = now();
        assert_eq!(t.subsec_nanosecond() % 1000, 0);
        assert!(t > at(-1_000_000_000));
    }
}
