//! Acting as a ServiceAccount: RBAC grants and clients authenticated by a `TokenRequest` token.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::{Error, Result, TestNamespace, status_code};

impl TestNamespace {
    /// Creates (if missing) the ServiceAccount `name` in this namespace, asks the API server for a
    /// token through `TokenRequest`, and returns a client that authenticates with it.
    ///
    /// The account can do nothing until a Role grants it something ([`TestNamespace::grant`]).
    ///
    /// # Errors
    ///
    /// [`Error::Kube`] when the API server refuses the account or the token request.
    pub async fn service_account_client(&self, name: &str) -> Result<Client> {
        let accounts: Api<ServiceAccount> = self.api();
        let account = ServiceAccount {
            metadata: meta(name),
            ..ServiceAccount::default()
        };
        create_or_keep(&accounts, &account).await?;
        let token = self.service_account_token(name).await?;
        let user = format!("system:serviceaccount:{}:{name}", self.name());
        let config = self.bed().config_with_token(&user, &token).await?;
        Ok(Client::try_from(config)?)
    }

    /// Asks the API server for an hour's token for the existing ServiceAccount `name` in this
    /// namespace, through `TokenRequest` (as the kubelet's projected token).
    ///
    /// # Errors
    ///
    /// [`Error::Kube`] when the API server refuses the token request; [`Error::Start`] when it
    /// returns no token.
    pub async fn service_account_token(&self, name: &str) -> Result<String> {
        self.service_account_token_for(name, &[]).await
    }

    /// [`TestNamespace::service_account_token`] for `audiences` (none: the API server's own), as
    /// a projected token for another service is.
    ///
    /// # Errors
    ///
    /// As [`TestNamespace::service_account_token`].
    pub async fn service_account_token_for(
        &self,
        name: &str,
        audiences: &[&str],
    ) -> Result<String> {
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                audiences: (!audiences.is_empty())
                    .then(|| audiences.iter().map(|a| (*a).to_owned()).collect()),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let issued = self
            .api::<ServiceAccount>()
            .create_token_request(name, &PostParams::default(), &request)
            .await?;
        issued
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::Start(format!("TokenRequest for {name} returned no token")))
    }

    /// Grants the ServiceAccount `service_account` of this namespace exactly `rules`, through a
    /// Role and a RoleBinding both named after it (replacing an earlier grant is not supported).
    ///
    /// # Errors
    ///
    /// [`Error::Kube`] when the API server refuses the Role or the RoleBinding.
    pub async fn grant(&self, service_account: &str, rules: Vec<PolicyRule>) -> Result<()> {
        let role = Role {
            metadata: meta(service_account),
            rules: Some(rules),
        };
        self.api::<Role>()
            .create(&PostParams::default(), &role)
            .await?;
        let binding = RoleBinding {
            metadata: meta(service_account),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "Role".to_owned(),
                name: service_account.to_owned(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: service_account.to_owned(),
                namespace: Some(self.name().to_owned()),
                ..Subject::default()
            }]),
        };
        self.api::<RoleBinding>()
            .create(&PostParams::default(), &binding)
            .await?;
        Ok(())
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

/// Creates `object`, or keeps the one that already exists.
async fn create_or_keep(api: &Api<ServiceAccount>, object: &ServiceAccount) -> Result<()> {
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(409) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
