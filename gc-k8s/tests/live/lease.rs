//! The run lock on a real `coordination.k8s.io/v1` Lease: taking, renewing, releasing, expiry
//! and a race between two runs.

use std::time::Duration;

use gc_core::ports::{ClusterError, Lock};
use k8s_openapi::api::coordination::v1::Lease;

use gc_core::ports::Renewal;

use crate::{Result, admin, namespace};

const TTL: u32 = 60;

/// The Lease as stored.
async fn stored(ns: &gc_testbed::TestNamespace, name: &str) -> Result<Lease> {
    Ok(ns.api::<Lease>().get(name).await?)
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

#[tokio::test]
async fn one_holder_at_a_time_until_released() -> Result {
    let ns = namespace("lease").await?;
    let lock = admin(&ns);
    let name = "gc-pods-prod";

    assert!(lock.try_acquire(ns.name(), name, "run-a", TTL).await?);
    let first = stored(&ns, name).await?;
    let spec = first.spec.clone().ok_or("a Lease has a spec")?;
    assert_eq!(spec.holder_identity.as_deref(), Some("run-a"));
    assert_eq!(spec.lease_duration_seconds, Some(60));
    assert!(spec.acquire_time.is_some());
    assert_eq!(spec.acquire_time, spec.renew_time);

    assert!(!lock.try_acquire(ns.name(), name, "run-b", TTL).await?);
    assert_eq!(holder(&stored(&ns, name).await?), Some("run-a"));

    assert!(
        lock.try_acquire(ns.name(), name, "run-a", TTL).await?,
        "renew"
    );
    let renewed = stored(&ns, name).await?;
    let renewed_spec = renewed.spec.clone().ok_or("a Lease has a spec")?;
    assert_eq!(renewed_spec.acquire_time, spec.acquire_time);
    assert!(renewed_spec.renew_time > spec.renew_time);
    assert_ne!(
        renewed.metadata.resource_version,
        first.metadata.resource_version
    );

    // Releasing a lease one does not hold changes nothing.
    lock.release(ns.name(), name, "run-b").await?;
    assert_eq!(stored(&ns, name).await?.metadata, renewed.metadata);

    lock.release(ns.name(), name, "run-a").await?;
    assert_eq!(holder(&stored(&ns, name).await?), None);
    assert!(lock.try_acquire(ns.name(), name, "run-b", TTL).await?);
    let taken = stored(&ns, name).await?;
    assert_eq!(holder(&taken), Some("run-b"));
    assert_eq!(
        taken.spec.as_ref().and_then(|s| s.lease_transitions),
        Some(0)
    );

    // Releasing a lease that does not exist is nothing to do.
    lock.release(ns.name(), "gc-never-taken", "run-a").await?;
    Ok(())
}

/// Who holds a Lease, as `/v1/status` asks: its holder until its renewal plus its duration;
/// nobody once released, expired, or when there is no Lease.
#[tokio::test]
async fn the_holder_is_read_until_it_releases_or_expires() -> Result {
    let ns = namespace("lease-holder").await?;
    let lock = admin(&ns);
    let name = "gc-sessions";
    assert_eq!(lock.holder(ns.name(), name).await?, None, "no Lease");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    assert!(lock.try_acquire(ns.name(), name, "run-a", TTL).await?);
    let held = lock.holder(ns.name(), name).await?.ok_or("held")?;
    assert_eq!(held.holder, "run-a");
    let ends = f64::from(TTL) + before;
    assert!((held.until - ends).abs() <= 2.0, "{} vs {ends}", held.until);
    lock.release(ns.name(), name, "run-a").await?;
    assert_eq!(lock.holder(ns.name(), name).await?, None, "released");
    assert!(lock.try_acquire(ns.name(), name, "run-b", 1).await?);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(lock.holder(ns.name(), name).await?, None, "expired");
    Ok(())
}

#[tokio::test]
async fn of_two_concurrent_runs_exactly_one_takes_the_lease() -> Result {
    let ns = namespace("lease-race").await?;
    for round in 0..5 {
        let name = format!("gc-race-{round}");
        let (a, b) = (admin(&ns), admin(&ns));
        let (got_a, got_b) = tokio::join!(
            a.try_acquire(ns.name(), &name, "run-a", TTL),
            b.try_acquire(ns.name(), &name, "run-b", TTL),
        );
        let (got_a, got_b) = (got_a?, got_b?);
        assert!(got_a ^ got_b, "round {round}: a {got_a}, b {got_b}");
        let winner = if got_a { "run-a" } else { "run-b" };
        assert_eq!(holder(&stored(&ns, &name).await?), Some(winner));

        // The same race over an existing, released lease: the replaces are fenced too.
        a.release(ns.name(), &name, winner).await?;
        let (got_a, got_b) = tokio::join!(
            a.try_acquire(ns.name(), &name, "run-c", TTL),
            b.try_acquire(ns.name(), &name, "run-d", TTL),
        );
        let (got_a, got_b) = (got_a?, got_b?);
        assert!(
            got_a ^ got_b,
            "round {round} (replace): a {got_a}, b {got_b}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn an_expired_lease_can_be_taken_by_another_holder() -> Result {
    let ns = namespace("lease-expiry").await?;
    let lock = admin(&ns);
    assert!(lock.try_acquire(ns.name(), "gc-expiry", "run-a", 1).await?);
    assert!(!lock.try_acquire(ns.name(), "gc-expiry", "run-b", 1).await?);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        lock.try_acquire(ns.name(), "gc-expiry", "run-b", TTL)
            .await?
    );
    let lease = stored(&ns, "gc-expiry").await?;
    let spec = lease.spec.ok_or("a Lease has a spec")?;
    assert_eq!(spec.holder_identity.as_deref(), Some("run-b"));
    assert_eq!(spec.lease_duration_seconds, Some(60));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.acquire_time, spec.renew_time);

    // The old holder, late, neither takes it back nor releases it.
    assert!(!lock.try_acquire(ns.name(), "gc-expiry", "run-a", 1).await?);
    lock.release(ns.name(), "gc-expiry", "run-a").await?;
    assert_eq!(holder(&stored(&ns, "gc-expiry").await?), Some("run-b"));
    Ok(())
}

#[tokio::test]
async fn bad_names_are_refused_before_any_request() -> Result {
    let ns = namespace("lease-names").await?;
    let lock = admin(&ns);
    for (name, holder, ttl) in [
        ("Gc-Pods", "run-a", TTL),
        ("gc/pods", "run-a", TTL),
        ("", "run-a", TTL),
        ("gc-pods", "", TTL),
        ("gc-pods", "run-a", 0),
    ] {
        let error = lock
            .try_acquire(ns.name(), name, holder, ttl)
            .await
            .expect_err("refused");
        assert!(
            matches!(error, ClusterError::Other(_)),
            "{name:?}: {error:?}"
        );
    }
    assert!(ns.api::<Lease>().get_opt("gc-pods").await?.is_none());
    Ok(())
}

/// `acquire` hands back the Lease as written; `renew` renews only that exact write: once anyone
/// else wrote the Lease (taken and given back, taken by another, released) or it expired, the
/// renewal is `Lost` and the Lease is left as it is, never taken back.
#[tokio::test]
async fn a_renewal_keeps_only_the_lease_as_last_written() -> Result {
    let ns = namespace("lease-renew").await?;
    let (lock, other) = (admin(&ns), admin(&ns));
    let name = "gc-pods";
    let held = lock.acquire(ns.name(), name, "run-a", TTL).await?;
    let held = held.ok_or("a free Lease is taken")?;
    assert!(
        other
            .acquire(ns.name(), name, "run-b", TTL)
            .await?
            .is_none()
    );
    let renewed = match lock.renew(ns.name(), name, "run-a", TTL, &held).await? {
        Renewal::Renewed(next) => next,
        Renewal::Lost(why) => return Err(format!("renewal lost: {why}").into()),
    };
    // Renewed again from the renewal's write.
    let renewed = match lock.renew(ns.name(), name, "run-a", TTL, &renewed).await? {
        Renewal::Renewed(next) => next,
        Renewal::Lost(why) => return Err(format!("second renewal lost: {why}").into()),
    };
    // The old write is no longer the Lease: a renewal against it is lost.
    let stale = lock.renew(ns.name(), name, "run-a", TTL, &held).await?;
    assert!(matches!(stale, Renewal::Lost(_)), "{stale:?}");

    // Released and taken by another: lost, and the other keeps it.
    lock.release(ns.name(), name, "run-a").await?;
    assert!(
        other
            .acquire(ns.name(), name, "run-b", TTL)
            .await?
            .is_some()
    );
    let lost = lock.renew(ns.name(), name, "run-a", TTL, &renewed).await?;
    let Renewal::Lost(why) = lost else {
        return Err(format!("{lost:?}").into());
    };
    assert!(why.contains("held by run-b"), "{why}");
    assert_eq!(holder(&stored(&ns, name).await?), Some("run-b"));

    // Expired while nobody took it: lost all the same, and not taken back.
    let short = lock.acquire(ns.name(), "gc-short", "run-a", 1).await?;
    let short = short.ok_or("a free Lease is taken")?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = stored(&ns, "gc-short").await?;
    let expired = lock
        .renew(ns.name(), "gc-short", "run-a", 1, &short)
        .await?;
    let Renewal::Lost(why) = expired else {
        return Err(format!("{expired:?}").into());
    };
    assert!(why.contains("expired"), "{why}");
    assert_eq!(stored(&ns, "gc-short").await?.metadata, before.metadata);
    Ok(())
}

/// A write the server refuses for another reason than a conflict (here: an identity that may
/// read Leases but not create or update them) is an error naming it, never a race lost to
/// another run.
#[tokio::test]
async fn a_refused_lease_write_is_an_error_not_a_lost_race() -> Result {
    use k8s_openapi::api::rbac::v1::PolicyRule;
    let ns = namespace("lease-refused").await?;
    let read_only = PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".into()]),
        resources: Some(vec!["leases".into()]),
        verbs: vec!["get".into(), "list".into()],
        ..PolicyRule::default()
    };
    ns.grant("reader", vec![read_only]).await?;
    let reader = gc_k8s::KubeCluster::new(ns.service_account_client("reader").await?);
    // No Lease yet: the create is refused.
    let created = reader.acquire(ns.name(), "gc-pods", "run-r", TTL).await;
    assert!(
        matches!(created, Err(ClusterError::Forbidden { ref verb, .. }) if verb == "create"),
        "{created:?}"
    );
    // A free Lease: the replace is refused.
    let admin = admin(&ns);
    assert!(
        admin
            .try_acquire(ns.name(), "gc-pods", "run-a", TTL)
            .await?
    );
    admin.release(ns.name(), "gc-pods", "run-a").await?;
    let replaced = reader.acquire(ns.name(), "gc-pods", "run-r", TTL).await;
    assert!(
        matches!(replaced, Err(ClusterError::Forbidden { ref verb, .. }) if verb == "update"),
        "{replaced:?}"
    );
    Ok(())
}
