//! Enterprise-managed authorization (SEP-990, "cross-app access"): the
//! person signed in to their organization's identity provider, whose ID
//! token (a file their sign-in tool writes, read again at each grant) is
//! traded there for an identity assertion grant (an ID-JAG, RFC 8693 token
//! exchange) naming this server's authorization server and this server,
//! and that at the authorization server for an access token (RFC 7523's
//! JWT-bearer grant). No browser opens: the organization's policy at its
//! identity provider decides. Both exchanges are rmcp's
//! (`rmcp::transport::auth::enterprise`), sent only to the identity
//! provider configured and the trusted authorization server.

use std::time::Duration;

use oauth2::{AccessToken, ClientSecret, basic::BasicTokenType};
use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
};
use rmcp::transport::auth::{
    AuthorizationManager, OAuthTokenResponse, VendorExtraTokenFields, default_oauth_http_client,
};
use url::Url;

use super::client_credentials::Grant;
use super::discovery::{get_document, http};
use super::error::{SignInError, failed};
use super::jwt_bearer::{keep_granted, read_assertion};
use super::settings::UpstreamOAuth;
use super::token_store::TokenStore;

/// The largest identity provider metadata document read.
const MAX_METADATA_BYTES: usize = 64 * 1024;
/// How long fetching it may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// A manager over `store` holding the token the person's enterprise ID
/// token was traded for.
pub(super) async fn enterprise(
    url: Url,
    store: TokenStore,
    settings: &UpstreamOAuth,
    grant: Grant<'_>,
) -> Result<AuthorizationManager, SignInError> {
    let (Some(idp), Some(client_id)) = (&settings.enterprise, &settings.client_id) else {
        return Err(SignInError::Failed(
            "enterprise-managed authorization needs the identity provider and a client id".into(),
        ));
    };
    let id_token = read_assertion(&idp.id_token_file)?;
    let (mut manager, found) = grant.trusted_manager(&url, &store).await?;
    let Some(issuer) = found.issuer.clone() else {
        return Err(SignInError::Failed(
            "the authorization server's metadata names no issuer".into(),
        ));
    };
    let idp_endpoint = match &idp.token_endpoint {
        Some(endpoint) => endpoint.clone(),
        None => idp_token_endpoint(&idp.issuer).await?,
    };
    let authentication = |secret: &Option<String>| match secret {
        Some(secret) => {
            EmaClientAuthentication::ClientSecretBasic(ClientSecret::new(secret.clone()))
        }
        None => EmaClientAuthentication::None,
    };
    let at_idp = EmaAuthorizationServer::new(&idp.issuer, idp_endpoint, &idp.client_id)
        .with_client_authentication(authentication(&idp.client_secret));
    let at_server = EmaAuthorizationServer::new(
        issuer.clone(),
        found.metadata.token_endpoint.clone(),
        client_id,
    )
    .with_client_authentication(authentication(&settings.client_secret));
    let scopes = grant.scopes(settings);
    let http = default_oauth_http_client().map_err(failed)?;
    let resource = url.to_string();
    let token = EmaExchangeRequest::new_with_id_token(at_idp, at_server, &resource, &id_token)
        .with_scopes(scopes)
        .exchange(&http, &http)
        .await
        .map_err(|e| SignInError::Failed(format!("enterprise-managed authorization: {e}")))?;
    let granted: Vec<String> = token.scopes.iter().cloned().collect();
    let mut response = OAuthTokenResponse::new(
        AccessToken::new(token.access_token.secret().clone()),
        BasicTokenType::Bearer,
        VendorExtraTokenFields::default(),
    );
    response.set_expires_in(token.expires_in.as_ref());
    keep_granted(
        &store,
        &mut manager,
        client_id.clone(),
        response,
        granted,
        Some(issuer),
    )
    .await?;
    Ok(manager)
}

/// The identity provider's token endpoint, from its OpenID configuration
/// (bounded in bytes and time, no redirects).
async fn idp_token_endpoint(issuer: &str) -> Result<String, SignInError> {
    let address = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let fail = |why: String| SignInError::Failed(format!("{address}: {why}"));
    let request = http(METADATA_TIMEOUT).map_err(fail)?.get(&address);
    let body = get_document(request, MAX_METADATA_BYTES)
        .await
        .map_err(fail)?;
    let metadata: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| fail(format!("not JSON: {e}")))?;
    // OpenID Connect Discovery 1.0, 4.3: the issuer is the one asked.
    if metadata["issuer"].as_str() != Some(issuer) {
        return Err(fail("its issuer is not the one configured".into()));
    }
    metadata["token_endpoint"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| fail("no token_endpoint".into()))
}
