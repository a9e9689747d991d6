//! `HttpServer` as an OAuth 2.1 resource server, against tokens this test
//! mints with its own key pairs and an issuer it serves on loopback (its
//! metadata and key set): what a standard client reads to find the
//! authorization server, a good token calling a tool as its subject, and
//! every kind of bad token refused with 401 before any tool runs. (The
//! real authorization server and the MCP SDK's OAuth client are in the
//! CLI's tests, `oauth.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{Value, json};
use toolhost_mcp::server::{CallerRule, OAuthOptions};
use toolhost_mcp::{HttpOptions, HttpServer, McpServer, ServerOptions};
use toolhost_runtime::Runtime;

/// A signing key: its private half (to mint), its public PEM (the HMAC
/// attack's "secret") and its JWK (what the issuer publishes).
struct Signer {
    encoding: EncodingKey,
    public_pem: String,
    jwk: Value,
}

impl Signer {
    fn new(kid: &str) -> Signer {
        // The process's JWT provider, as the server selects it: a test that
        // makes its key before any server exists would find none.
        let _ = jsonwebtoken::crypto::CryptoProvider::install_default(
            &jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER,
        );
        let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
        let pem = private.to_pkcs8_pem(LineEnding::LF).unwrap();
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
        let public_pem = private
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        let mut jwk = serde_json::to_value(
            jsonwebtoken::jwk::Jwk::from_encoding_key(&encoding, Algorithm::RS256).unwrap(),
        )
        .unwrap();
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        Signer {
            encoding,
            public_pem,
            jwk,
        }
    }

    fn sign(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_owned());
        header.typ = Some("at+jwt".to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The issuer this test plays: its metadata and its key set (which a test
/// may change, as a rotation does), counting the fetches of the set; while
/// `down` is set its key set answers 500.
struct Issuer {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

async fn issuer(keys: Vec<Value>) -> Issuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let keys = Arc::new(Mutex::new(keys));
    let fetches = Arc::new(AtomicUsize::new(0));
    let metadata = json!({
        "issuer": url,
        "jwks_uri": format!("{url}/jwks"),
        "authorization_endpoint": format!("{url}/auth"),
        "token_endpoint": format!("{url}/token"),
    });
    let down = Arc::new(AtomicBool::new(false));
    let (served, counted, failing) = (keys.clone(), fetches.clone(), down.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                let keys = served.lock().clone();
                let down = failing.load(Ordering::SeqCst);
                async move {
                    if down {
                        Err(axum::http::StatusCode::INTERNAL_SERVER_ERROR)
                    } else {
                        Ok(axum::Json(json!({ "keys": keys })))
                    }
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Issuer {
        url,
        keys,
        fetches,
        down,
    }
}

/// `host serve`'s HTTP endpoint for the calc plugin, taking the tokens of
/// `issuer` (subject `alice` maps to the server's profile), stateless so
/// that one POST makes one call.
async fn serve(issuer: &str, configure: impl FnOnce(&mut OAuthOptions)) -> (String, Runtime) {
    let dir = tempfile::tempdir().unwrap();
    toolhost_test_support::copy_plugin(&toolhost_test_support::plugins_dir(), "calc", dir.path());
    let runtime = Runtime::builder()
        .plugin_dir(dir.path())
        .cache_dir(None)
        .build()
        .await
        .unwrap();
    std::mem::forget(dir);
    let mut oauth = OAuthOptions {
        issuer: issuer.to_owned(),
        scopes: vec!["tools".into()],
        leeway_seconds: 30,
        groups_claim: "groups".into(),
        callers: vec![CallerRule {
            subject: Some("alice".into()),
            ..CallerRule::default()
        }],
        ..OAuthOptions::default()
    };
    configure(&mut oauth);
    let mut options = HttpOptions::local(0);
    options.oauth = Some(oauth);
    options.stateless = true;
    let server = McpServer::new(runtime.clone(), ServerOptions::default());
    let bound = HttpServer::bind(server, options).await.unwrap();
    let base = format!("http://{}", bound.local_addr());
    tokio::spawn(bound.run(std::future::pending()));
    (base, runtime)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims of a good token for `base`'s server from `issuer`.
fn claims(issuer: &str, base: &str) -> Value {
    json!({
        "iss": issuer,
        "sub": "alice",
        "aud": format!("{base}/mcp"),
        "scope": "tools",
        "client_id": "app",
        "iat": now(),
        "exp": now() + 300,
    })
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"2*(3+4)"}}}"#;

/// POSTs `CALL` (a `calculate` call) to `/mcp` with `token`; the status,
/// `WWW-Authenticate` and body (the static-token tests use it too).
pub(crate) async fn call(base: &str, token: Option<&str>) -> (u16, String, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(CALL);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, challenge, response.text().await.unwrap())
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test]
async fn a_client_finds_the_authorization_server_from_the_401_and_the_metadata() {
    let idp = issuer(vec![]).await;
    let (base, _runtime) = serve(&idp.url, |_| {}).await;
    let (status, challenge, body) = call(&base, None).await;
    assert_eq!(status, 401, "{body}");
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"tools\""),
        "no token: no error code (RFC 6750, 3.1)"
    );
    for url in [
        metadata_url.clone(),
        format!("{base}/.well-known/oauth-protected-resource"),
    ] {
        let doc: Value =
            serde_json::from_str(&reqwest::get(&url).await.unwrap().text().await.unwrap()).unwrap();
        assert_eq!(doc["resource"], format!("{base}/mcp"), "{url}");
        assert_eq!(doc["authorization_servers"], json!([idp.url]));
        assert_eq!(doc["scopes_supported"], json!(["tools"]));
    }
}

#[tokio::test]
async fn a_good_access_token_calls_a_tool_as_its_subject() {
    let signer = Signer::new("k1");
    let idp = issuer(vec![signer.jwk.clone()]).await;
    let (base, runtime) = serve(&idp.url, |_| {}).await;
    let mut calls = runtime.watch_calls();
    let token = signer.sign("k1", &claims(&idp.url, &base));
    let (status, _, body) = call(&base, Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"14\""), "{body}");
    let event = calls.recv().await.unwrap();
    assert_eq!(
        event.client.as_deref(),
        Some("oauth:alice"),
        "the call is the subject's"
    );
    // A second request is answered from the verified tokens remembered:
    // the key set was fetched once.
    let (status, _, _) = call(&base, Some(&token)).await;
    assert_eq!(status, 200);
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn every_bad_token_is_refused_with_401_and_no_tool_runs() {
    let signer = Signer::new("k1");
    let stranger = Signer::new("k1");
    let idp = issuer(vec![signer.jwk.clone()]).await;
    let (base, runtime) = serve(&idp.url, |_| {}).await;
    let good = claims(&idp.url, &base);
    let with = |key: &str, value: Value| {
        let mut c = good.clone();
        c[key] = value;
        c
    };
    let header_b64 = |h: Value| b64(h.to_string().as_bytes());
    let payload = b64(good.to_string().as_bytes());
    let hs256_with_public_key = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        jsonwebtoken::encode(
            &header,
            &good,
            &EncodingKey::from_secret(signer.public_pem.as_bytes()),
        )
        .unwrap()
    };
    let bad: Vec<(&str, String)> = vec![
        (
            "wrong audience",
            signer.sign("k1", &with("aud", json!("https://other.example.com/mcp"))),
        ),
        (
            "wrong issuer",
            signer.sign("k1", &with("iss", json!("https://evil.example.com"))),
        ),
        (
            "expired",
            signer.sign("k1", &with("exp", json!(now() - 120))),
        ),
        (
            "not valid yet",
            signer.sign("k1", &with("nbf", json!(now() + 600))),
        ),
        (
            "bad signature (another key, the same kid)",
            stranger.sign("k1", &good),
        ),
        (
            "alg none",
            format!(
                "{}.{payload}.",
                header_b64(json!({"alg": "none", "typ": "JWT"}))
            ),
        ),
        (
            "alg none with a kid",
            format!(
                "{}.{payload}.",
                header_b64(json!({"alg": "none", "kid": "k1"}))
            ),
        ),
        (
            "HS256 signed with the RSA public key",
            hs256_with_public_key,
        ),
        (
            "no audience",
            signer.sign("k1", &{
                let mut c = good.clone();
                c.as_object_mut().unwrap().remove("aud");
                c
            }),
        ),
        ("an unknown kid", signer.sign("k9", &good)),
        ("not a JWT", "opaque-but-no-introspection".to_owned()),
    ];
    let mut calls = runtime.watch_calls();
    for (what, token) in &bad {
        let (status, challenge, body) = call(&base, Some(token)).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\", resource_metadata="),
            "{what}: {challenge}"
        );
        assert!(
            !body.contains(token.as_str()),
            "{what}: the token is not echoed"
        );
    }
    assert!(
        matches!(
            calls.try_recv(),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty)
        ),
        "no call started"
    );
    // The same request with the good token runs the tool.
    let (status, _, body) = call(&base, Some(&signer.sign("k1", &good))).await;
    assert_eq!(status, 200, "{body}");
    assert!(calls.try_recv().is_ok(), "the good token's call ran");
}

#[tokio::test]
async fn a_caller_no_rule_names_or_without_the_scope_is_refused_with_403() {
    let signer = Signer::new("k1");
    let idp = issuer(vec![signer.jwk.clone()]).await;
    let (base, runtime) = serve(&idp.url, |_| {}).await;
    let mut calls = runtime.watch_calls();
    let mut mallory = claims(&idp.url, &base);
    mallory["sub"] = json!("mallory");
    let (status, _, body) = call(&base, Some(&signer.sign("k1", &mallory))).await;
    assert_eq!(status, 403, "an unmapped caller gets nothing: {body}");
    let mut no_scope = claims(&idp.url, &base);
    no_scope["scope"] = json!("profile");
    let (status, challenge, body) = call(&base, Some(&signer.sign("k1", &no_scope))).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\"")
            && challenge.contains("scope=\"tools\""),
        "{challenge}"
    );
    assert!(calls.try_recv().is_err(), "no call started");

    // With `unmapped`, such a caller runs under that profile instead.
    let (base, runtime) = serve(&idp.url, |o| o.unmapped = Some("guest".into())).await;
    let mut calls = runtime.watch_calls();
    let (status, _, body) = call(
        &base,
        Some(&signer.sign("k1", &{
            let mut c = claims(&idp.url, &base);
            c["sub"] = json!("mallory");
            c
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let event = calls.recv().await.unwrap();
    assert_eq!(event.agent.as_deref(), Some("guest"));
    assert_eq!(event.client.as_deref(), Some("oauth:mallory"));
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_made_up_kids_do_not_hammer_the_issuer() {
    let old = Signer::new("k1");
    let new = Signer::new("k2");
    let idp = issuer(vec![old.jwk.clone()]).await;
    let (base, _runtime) = serve(&idp.url, |_| {}).await;
    let (status, _, _) = call(&base, Some(&old.sign("k1", &claims(&idp.url, &base)))).await;
    assert_eq!(status, 200);
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);
    // The issuer rotates: a token signed with the new key fetches the set again.
    *idp.keys.lock() = vec![new.jwk.clone()];
    let (status, _, body) = call(&base, Some(&new.sign("k2", &claims(&idp.url, &base)))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 2);
    // Tokens naming keys nobody has: refused, and the set is not fetched
    // again within the rate limit.
    for i in 0..5 {
        let kid = format!("made-up-{i}");
        let (status, _, _) = call(&base, Some(&new.sign(&kid, &claims(&idp.url, &base)))).await;
        assert_eq!(status, 401);
    }
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_issuer_that_cannot_be_reached_gives_503_and_no_tool_runs_then_its_keys_serve_through_an_outage()
 {
    let signer = Signer::new("k1");
    let idp = issuer(vec![signer.jwk.clone()]).await;
    idp.down.store(true, Ordering::SeqCst);
    let (base, runtime) = serve(&idp.url, |_| {}).await;
    let mut calls = runtime.watch_calls();
    let token = signer.sign("k1", &claims(&idp.url, &base));
    let (status, _, body) = call(&base, Some(&token)).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("cannot be reached"), "{body}");
    // At once again: refused from the failure remembered, the issuer not
    // asked again (a client retrying cannot make the server hammer it).
    let (status, _, _) = call(&base, Some(&token)).await;
    assert_eq!(status, 503);
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);
    assert!(calls.try_recv().is_err(), "no tool ran");
    // Up again: after the wait the first failure is remembered for (5 s),
    // the same token calls.
    idp.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_millis(5_200)).await;
    let (status, _, body) = call(&base, Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    // Down again: a new token is checked with the keys fetched before.
    idp.down.store(true, Ordering::SeqCst);
    let mut other = claims(&idp.url, &base);
    other["jti"] = json!("another");
    let (status, _, body) = call(&base, Some(&signer.sign("k1", &other))).await;
    assert_eq!(status, 200, "{body}");
}

/// An issuer with an introspection endpoint, as this test plays it: a
/// `good-…` token is an access token of alice's for `resource`, the
/// `refresh-token` an active refresh token (which names the resource
/// too, as some issuers' do), any other not active. It counts the
/// requests it is sent, and holds each answer while `open` is false.
struct Introspector {
    url: String,
    resource: Arc<Mutex<String>>,
    asked: Arc<AtomicUsize>,
    open: tokio::sync::watch::Sender<bool>,
}

async fn introspector() -> Introspector {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let metadata = json!({
        "issuer": url,
        "jwks_uri": format!("{url}/jwks"),
        "authorization_endpoint": format!("{url}/auth"),
        "token_endpoint": format!("{url}/token"),
        "introspection_endpoint": format!("{url}/introspect"),
    });
    let resource = Arc::new(Mutex::new(String::new()));
    let asked = Arc::new(AtomicUsize::new(0));
    let open = tokio::sync::watch::Sender::new(true);
    let (aud, counted, gate, iss) = (resource.clone(), asked.clone(), open.clone(), url.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/introspect",
            axum::routing::post(move |body: String| {
                counted.fetch_add(1, Ordering::SeqCst);
                let (aud, iss, mut gate) = (aud.lock().clone(), iss.clone(), gate.subscribe());
                async move {
                    let _ = gate.wait_for(|open| *open).await;
                    let token = url::form_urlencoded::parse(body.as_bytes())
                        .find(|(k, _)| k == "token")
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default();
                    let active = json!({
                        "active": true, "sub": "alice", "client_id": "app", "scope": "tools",
                        "aud": aud, "iss": iss, "exp": now() + 300,
                    });
                    axum::Json(if token.starts_with("good-") {
                        let mut answer = active;
                        answer["token_type"] = json!("Bearer");
                        answer
                    } else if token == "refresh-token" {
                        let mut answer = active;
                        answer["token_type"] = json!("refresh_token");
                        answer
                    } else {
                        json!({ "active": false })
                    })
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Introspector {
        url,
        resource,
        asked,
        open,
    }
}

/// `serve` taking opaque tokens through `idp`'s introspection.
async fn serve_introspecting(idp: &Introspector) -> (String, Runtime) {
    let (base, runtime) = serve(&idp.url, |o| {
        o.introspection = Some(toolhost_mcp::server::IntrospectionOptions {
            client_id: "toolhost".into(),
            // Any variable that is set: this issuer does not check the secret.
            client_secret_env: "PATH".into(),
            ..toolhost_mcp::server::IntrospectionOptions::default()
        });
    })
    .await;
    *idp.resource.lock() = format!("{base}/mcp");
    (base, runtime)
}

/// Waits until `done` holds (checked every 10 ms, 20 s at most).
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// How many introspection requests may be in flight at once (the
/// server's bound, `introspection.rs`).
const INTROSPECTIONS_AT_ONCE: usize = 8;

#[tokio::test]
async fn a_flood_of_made_up_opaque_tokens_reaches_the_issuer_a_bounded_number_of_times_and_known_callers_still_call()
 {
    let idp = introspector().await;
    let (base, _runtime) = serve_introspecting(&idp).await;
    let (status, _, body) = call(&base, Some("good-alice")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(idp.asked.load(Ordering::SeqCst), 1);

    // The issuer is slow (it holds every answer); 256 made-up tokens at once.
    idp.open.send_replace(false);
    let answered = Arc::new(AtomicUsize::new(0));
    let flood: Vec<_> = (0..256)
        .map(|i| {
            let (base, answered) = (base.clone(), answered.clone());
            tokio::spawn(async move {
                let (status, _, _) = call(&base, Some(&format!("made-up-{i}"))).await;
                answered.fetch_add(1, Ordering::SeqCst);
                status
            })
        })
        .collect();
    // Until every request the issuer does not hold has its answer (or
    // the issuer was sent more than the bound).
    let sent = || idp.asked.load(Ordering::SeqCst) - 1;
    until(|| sent() > INTROSPECTIONS_AT_ONCE || answered.load(Ordering::SeqCst) + sent() >= 256)
        .await;
    assert!(
        sent() <= INTROSPECTIONS_AT_ONCE,
        "{} introspection requests for 256 made-up tokens",
        sent()
    );
    // Meanwhile the caller checked before still calls; a new token is
    // told to retry (503), never let in.
    let (status, _, body) = call(&base, Some("good-alice")).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = call(&base, Some("good-alice-2")).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("retry shortly"), "{body}");

    // The issuer answers: the made-up tokens it was asked about are
    // refused (401), the others were told to retry (503).
    idp.open.send_replace(true);
    let mut statuses = Vec::new();
    for call in flood {
        statuses.push(call.await.unwrap());
    }
    let refused = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(refused, sent(), "{statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| **s == 503).count(),
        256 - refused,
        "{statuses:?}"
    );
    // Once the second is over, a new good token is checked and calls.
    let mut status = 0;
    for _ in 0..50 {
        status = call(&base, Some("good-alice-2")).await.0;
        if status != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200);
}

#[tokio::test]
async fn one_opaque_token_is_asked_about_once_at_a_time_and_once_refused_is_not_asked_again() {
    let idp = introspector().await;
    let (base, _runtime) = serve_introspecting(&idp).await;
    idp.open.send_replace(false);
    // The first to bring the token leaves before the answer: the others
    // still get it, from the same request.
    let first = tokio::spawn({
        let base = base.clone();
        async move { call(&base, Some("made-up")).await }
    });
    until(|| idp.asked.load(Ordering::SeqCst) == 1).await;
    first.abort();
    let same: Vec<_> = (0..50)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move { call(&base, Some("made-up")).await.0 })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    idp.open.send_replace(true);
    for call in same {
        assert_eq!(call.await.unwrap(), 401);
    }
    assert_eq!(
        idp.asked.load(Ordering::SeqCst),
        1,
        "one request for 51 callers"
    );
    // Refused once: refused again without asking.
    let (status, _, _) = call(&base, Some("made-up")).await;
    assert_eq!(status, 401);
    assert_eq!(idp.asked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_active_refresh_token_is_not_taken_as_an_access_token() {
    let idp = introspector().await;
    let (base, runtime) = serve_introspecting(&idp).await;
    let mut calls = runtime.watch_calls();
    let (status, challenge, body) = call(&base, Some("refresh-token")).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\""),
        "{challenge}"
    );
    assert!(calls.try_recv().is_err(), "no call started");
    // The same answer with an access token's type calls.
    let (status, _, body) = call(&base, Some("good-alice")).await;
    assert_eq!(status, 200, "{body}");
}
