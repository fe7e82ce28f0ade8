//! Who calls the request API, and whether it may, as the API server answers: a projected token
//! for gc's audience is the ServiceAccount it was issued to; a token for another audience, the
//! API server's own and a forged one are not; a right is granted exactly by an RBAC rule on gc's
//! API group, in its namespace.

use std::time::Duration;

use gc_core::ports::{Access, Asked};
use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::{Result, admin, namespace};

const GROUP: &str = "gc.stream.space";

fn collect(namespace: &str) -> Asked<'_> {
    Asked {
        verb: "create",
        resource: "sessions",
        subresource: "collect",
        namespace,
    }
}

#[tokio::test]
async fn a_token_for_gcs_audience_is_its_account_and_a_right_is_an_rbac_rule() -> Result {
    let ns = namespace("access").await?;
    ns.service_account_client("caller").await?;
    let gc = admin(&ns);
    let token = ns.service_account_token_for("caller", &["gc"]).await?;
    let caller = gc.authenticate(&token, "gc").await??;
    let user = format!("system:serviceaccount:{}:caller", ns.name());
    assert_eq!(caller.user, user);
    assert!(!caller.uid.is_empty());
    assert!(
        caller.groups.contains(&"system:serviceaccounts".to_owned()),
        "{caller:?}"
    );
    // Another audience, the API server's own, or a forged token: not a caller of gc.
    let other = ns.service_account_token_for("caller", &["vault"]).await?;
    let why = gc.authenticate(&other, "gc").await?.unwrap_err();
    assert!(!why.is_empty());
    let own = ns.service_account_token("caller").await?;
    assert!(gc.authenticate(&own, "gc").await?.is_err());
    // One character of the signature changed, well inside it: the last character of its
    // base64 carries padding bits, so changing that one may leave the signature as it was.
    let at = token.len() - 10;
    let other_char = if &token[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{other_char}{}", &token[..at], &token[at + 1..]);
    assert!(gc.authenticate(&forged, "gc").await?.is_err());

    // No rule: not allowed, the reason naming what was asked.
    let denied = gc.authorize(&caller, GROUP, collect(ns.name())).await?;
    let why = denied.unwrap_err();
    assert!(
        why.contains(&format!(
            "{user} may not create sessions/collect in {}",
            ns.name()
        )),
        "{why}"
    );
    // A rule on gc's group for that subresource: allowed there, and only there.
    let rule = PolicyRule {
        api_groups: Some(vec![GROUP.to_owned()]),
        resources: Some(vec!["sessions/collect".to_owned()]),
        verbs: vec!["create".to_owned()],
        ..PolicyRule::default()
    };
    ns.grant("caller", vec![rule]).await?;
    let mut allowed = Err(String::new());
    for _ in 0..50 {
        allowed = gc.authorize(&caller, GROUP, collect(ns.name())).await?;
        if allowed.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(allowed, Ok(()));
    let plan = Asked {
        subresource: "plan",
        ..collect(ns.name())
    };
    assert!(gc.authorize(&caller, GROUP, plan).await?.is_err());
    assert!(
        gc.authorize(&caller, GROUP, collect("default"))
            .await?
            .is_err()
    );
    let elsewhere = Asked {
        verb: "create",
        resource: "sessions",
        subresource: "collect",
        namespace: "",
    };
    assert!(gc.authorize(&caller, GROUP, elsewhere).await?.is_err());

    Ok(())
}
