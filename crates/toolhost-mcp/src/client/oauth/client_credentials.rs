//! The client-credentials grant (SEP-1046) for an unattended gateway: a
//! client secret or a private key JWT, sent only to the trusted
//! authorization server.

use rmcp::transport::auth::{AuthorizationManager, ClientCredentialsConfig, JwtSigningAlgorithm};
use url::Url;

use super::discovery::{Discovered, Trusted, discover};
use super::error::{SignInError, failed};
use super::settings::UpstreamOAuth;
use super::token_store::TokenStore;

/// What one client-credentials grant answers.
pub(super) struct Grant<'a> {
    /// The `WWW-Authenticate` of the refusal, if any.
    pub(super) challenge: Option<&'a str>,
    /// The scope it names.
    pub(super) challenged: Option<String>,
    /// The authorization server the client's credentials may go to.
    pub(super) trusted: &'a Trusted,
    /// What to run to sign in anew.
    pub(super) hint: Option<&'a str>,
}

impl Grant<'_> {
    /// A manager over `store` for the server at `url`, and what discovery
    /// found there, once the authorization server it names is the one
    /// trusted: the grant's credentials are sent there only, and nothing
    /// is sent before.
    pub(super) async fn trusted_manager(
        &self,
        url: &Url,
        store: &TokenStore,
    ) -> Result<(AuthorizationManager, Discovered), SignInError> {
        let mut manager = AuthorizationManager::new(url.clone())
            .await
            .map_err(failed)?;
        manager.set_credential_store(store.clone());
        let found = discover(&mut manager, url, self.challenge).await?;
        self.trusted.admit(&found, self.hint)?;
        Ok((manager, found))
    }

    /// The scopes to ask for: the settings', else the challenge's, else none.
    pub(super) fn scopes(&self, settings: &UpstreamOAuth) -> Vec<String> {
        if settings.scopes.is_empty() {
            self.challenged
                .as_deref()
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        } else {
            settings.scopes.clone()
        }
    }
}

/// A manager over `store` holding a token of the client-credentials grant.
pub(super) async fn client_credentials(
    url: Url,
    store: TokenStore,
    settings: &UpstreamOAuth,
    grant: Grant<'_>,
) -> Result<AuthorizationManager, SignInError> {
    crate::crypto::jwt_crypto();
    let Some(client_id) = settings.client_id.clone() else {
        return Err(SignInError::Failed(
            "the client-credentials grant needs a client id".into(),
        ));
    };
    let (mut manager, found) = grant.trusted_manager(&url, &store).await?;
    let scopes = grant.scopes(settings);
    // RFC 8707: the resource is this server.
    let resource = Some(url.to_string());
    let config = match (&settings.private_key_pem, &settings.client_secret) {
        (Some(pem), _) => ClientCredentialsConfig::PrivateKeyJwt {
            client_id,
            signing_key: pem.as_bytes().to_vec(),
            signing_algorithm: signing_algorithm(settings.signing_algorithm.as_deref())?,
            token_endpoint_audience: None,
            scopes,
            resource,
        },
        (None, Some(secret)) => ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret: secret.clone(),
            scopes,
            resource,
        },
        (None, None) => {
            return Err(SignInError::Failed(
                "the client-credentials grant needs a client secret or a private key".into(),
            ));
        }
    };
    manager
        .validate_client_credentials_metadata(&config)
        .map_err(failed)?;
    manager
        .configure_client_credentials(&config)
        .map_err(failed)?;
    manager
        .exchange_client_credentials(&config)
        .await
        .map_err(failed)?;
    store.set_issuer(found.issuer).map_err(failed)?;
    Ok(manager)
}

fn signing_algorithm(name: Option<&str>) -> Result<JwtSigningAlgorithm, SignInError> {
    Ok(match name.unwrap_or("ES256") {
        "ES256" => JwtSigningAlgorithm::ES256,
        "ES384" => JwtSigningAlgorithm::ES384,
        "RS256" => JwtSigningAlgorithm::RS256,
        "RS384" => JwtSigningAlgorithm::RS384,
        "RS512" => JwtSigningAlgorithm::RS512,
        other => {
            return Err(SignInError::Failed(format!(
                "unknown signing algorithm `{}` (ES256, ES384, RS256, RS384 or RS512)",
                toolhost_text::line(other, 40)
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signing_algorithms_are_named_as_jose_names_them() {
        assert!(signing_algorithm(None).is_ok());
        assert!(signing_algorithm(Some("RS256")).is_ok());
        assert!(signing_algorithm(Some("none")).is_err());
    }
}
