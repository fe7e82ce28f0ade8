//! Who calls the request API, and whether it may: the API server's `TokenReview` (the token
//! checked for gc's audience) and `SubjectAccessReview` (the caller's rights on a resource of
//! gc's own API group), as kube-rbac-proxy and metrics-server delegate them; and who the
//! connection's own credentials are (`SelfSubjectReview`, for the console). gc's account needs
//! `create` on `tokenreviews` and `subjectaccessreviews`, and nothing more for this.

use async_trait::async_trait;
use gc_core::ports::{Access, Asked, Caller, ClusterError};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use crate::KubeCluster;
use crate::errors::{Call, cluster_error};

impl KubeCluster {
    /// Who this connection's credentials are, as the API server sees them: a
    /// `SelfSubjectReview` (`kubectl auth whoami`), which every authenticated user may create.
    ///
    /// # Errors
    /// The review could not be made, or names no user.
    pub async fn who_am_i(&self) -> Result<Caller, ClusterError> {
        let api: Api<SelfSubjectReview> = Api::all(self.client().clone());
        let call = Call {
            verb: "create",
            resource: "selfsubjectreviews",
            namespace: "",
        };
        let review = SelfSubjectReview::default();
        let answer = (api.create(&PostParams::default(), &review).await)
            .map_err(|e| cluster_error(e, call))?;
        let user = answer.status.and_then(|s| s.user_info).unwrap_or_default();
        let Some(name) = user.username.filter(|u| !u.is_empty()) else {
            let why = "the API server names no user for these credentials";
            return Err(ClusterError::Other(why.into()));
        };
        Ok(Caller {
            user: name,
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default().into_iter().collect(),
        })
    }
}

#[async_trait]
impl Access for KubeCluster {
    async fn authenticate(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<Result<Caller, String>, ClusterError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: Some(vec![audience.to_owned()]),
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client().clone());
        let call = Call {
            verb: "create",
            resource: "tokenreviews",
            namespace: "",
        };
        let answer = (api.create(&PostParams::default(), &review).await)
            .map_err(|e| cluster_error(e, call))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            let why = status.error.unwrap_or_else(|| "not authenticated".into());
            return Ok(Err(why));
        }
        // A token for other audiences is no token for gc, whatever else it proves.
        let audiences = status.audiences.unwrap_or_default();
        if !audiences.iter().any(|a| a == audience) {
            return Ok(Err(format!("the token is not for audience {audience}")));
        }
        let user = status.user.unwrap_or_default();
        let Some(name) = user.username.filter(|u| !u.is_empty()) else {
            return Ok(Err("the token names no user".into()));
        };
        Ok(Ok(Caller {
            user: name,
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default().into_iter().collect(),
        }))
    }

    async fn authorize(
        &self,
        caller: &Caller,
        group: &str,
        asked: Asked<'_>,
    ) -> Result<Result<(), String>, ClusterError> {
        let attributes = ResourceAttributes {
            group: Some(group.to_owned()),
            resource: Some(asked.resource.to_owned()),
            subresource: Some(asked.subresource.to_owned()).filter(|s| !s.is_empty()),
            verb: Some(asked.verb.to_owned()),
            namespace: Some(asked.namespace.to_owned()).filter(|n| !n.is_empty()),
            ..ResourceAttributes::default()
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.user.clone()),
                uid: Some(caller.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(caller.groups.clone()),
                extra: Some(caller.extra.clone().into_iter().collect()),
                resource_attributes: Some(attributes),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client().clone());
        let call = Call {
            verb: "create",
            resource: "subjectaccessreviews",
            namespace: "",
        };
        let answer = (api.create(&PostParams::default(), &review).await)
            .map_err(|e| cluster_error(e, call))?;
        let status = answer.status.unwrap_or_default();
        if status.allowed && status.denied != Some(true) {
            return Ok(Ok(()));
        }
        let reason = status.reason.filter(|r| !r.is_empty());
        let what = format!(
            "{} may not {} {}{}{} in {}",
            caller.user,
            asked.verb,
            asked.resource,
            if asked.subresource.is_empty() {
                ""
            } else {
                "/"
            },
            asked.subresource,
            if asked.namespace.is_empty() {
                "any namespace"
            } else {
                asked.namespace
            },
        );
        Ok(Err(match reason {
            Some(reason) => format!("{what}: {reason}"),
            None => what,
        }))
    }
}

/// The shortest life the API server gives a requested token, in seconds.
const TOKEN_SECONDS: i64 = 600;

impl KubeCluster {
    /// A client of the same API server as `connection`'s (its address, trust and timeouts)
    /// acting as the ServiceAccount `namespace/name`, holding nothing but a token of that
    /// account valid [`TOKEN_SECONDS`], asked for with a `TokenRequest` by this cluster's own
    /// account (which needs `create` on `serviceaccounts/token`, by a rule naming that account):
    /// so gc can do what that account may, and only then, without holding its rights itself.
    ///
    /// # Errors
    /// [`ClusterError`]: the token was refused or not answered (`Forbidden` when this account
    /// may not ask for it), or the client could not be set up (`Other`).
    pub async fn as_service_account(
        &self,
        connection: &crate::Connection,
        namespace: &str,
        name: &str,
    ) -> Result<KubeCluster, ClusterError> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let request = TokenRequest {
            // No audience: the API server's own, as a mounted token's.
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let api: Api<ServiceAccount> = Api::namespaced(self.client().clone(), namespace);
        let call = Call {
            verb: "create",
            resource: "serviceaccounts/token",
            namespace,
        };
        let answer = (api
            .create_token_request(name, &PostParams::default(), &request)
            .await)
            .map_err(|e| cluster_error(e, call))?;
        let token = answer.status.and_then(|s| s.token).unwrap_or_default();
        if token.is_empty() {
            let why = format!("the API server gave no token for {namespace}/{name}");
            return Err(ClusterError::Other(why));
        }
        let mut config = crate::connect::config(connection)
            .await
            .map_err(|e| ClusterError::Other(e.to_string()))?;
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.into()),
            ..kube::config::AuthInfo::default()
        };
        let client = kube::Client::try_from(config)
            .map_err(|e| ClusterError::Other(crate::errors::chain(&e)))?;
        Ok(KubeCluster::new(client))
    }
}

/// A ServiceAccount gc acts as with a short-lived token it asks the API server for
/// ([`KubeCluster::as_service_account`]): gc's account needs `create` on
/// `serviceaccounts/token` for that one account, and holds no right of its own to create.
pub struct TokenAccount {
    cluster: KubeCluster,
    connection: crate::Connection,
    namespace: String,
    account: String,
    user: String,
}

impl TokenAccount {
    /// The ServiceAccount `namespace/account`, asked for by `cluster`'s account, reached as
    /// `connection` says.
    pub fn new(
        cluster: KubeCluster,
        connection: crate::Connection,
        namespace: &str,
        account: &str,
    ) -> Self {
        Self {
            cluster,
            connection,
            namespace: namespace.to_owned(),
            account: account.to_owned(),
            user: format!("system:serviceaccount:{namespace}:{account}"),
        }
    }
}

#[async_trait::async_trait]
impl gc_core::ports::RestoreAccount<KubeCluster> for TokenAccount {
    fn name(&self) -> &str {
        &self.user
    }
    async fn act(&self) -> Result<KubeCluster, ClusterError> {
        let (ns, account) = (&self.namespace, &self.account);
        self.cluster
            .as_service_account(&self.connection, ns, account)
            .await
    }
}
