//! `HttpServer` with static bearer tokens, as the clients people run meet
//! it: a refusal says what is wrong in its `WWW-Authenticate` challenge
//! (`error`, `error_description`), the OAuth discovery paths such a client
//! probes after a 401 answer JSON it can read, and every request, on any
//! path, leaves one access-log line with its path.

use serde_json::Value;
use toolhost_mcp::server::TokenRole;
use toolhost_mcp::{ClientToken, HttpOptions, HttpServer, McpServer, ServerOptions};
use toolhost_runtime::Runtime;

use crate::oauth::call;

const TOKEN: &str = "s3cret-token";

/// The calc plugin served over HTTP, taking `TOKEN`.
async fn serve() -> String {
    // reqwest here has no TLS provider of its own (`rustls-no-provider`).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    toolhost_test_support::copy_plugin(&toolhost_test_support::plugins_dir(), "calc", dir.path());
    let runtime = Runtime::builder()
        .plugin_dir(dir.path())
        .cache_dir(None)
        .build()
        .await
        .unwrap();
    std::mem::forget(dir);
    let mut options = HttpOptions::local(0);
    options.tokens = vec![ClientToken {
        token: TOKEN.to_owned(),
        agent: None,
        role: TokenRole::Caller,
        asks: None,
    }];
    options.stateless = true;
    let server = McpServer::new(runtime, ServerOptions::default());
    let bound = HttpServer::bind(server, options).await.unwrap();
    let base = format!("http://{}", bound.local_addr());
    tokio::spawn(bound.run(std::future::pending()));
    base
}

/// GETs `path`: status, `Content-Type`, body.
async fn get(base: &str, path: &str) -> (u16, String, String) {
    let response = reqwest::get(format!("{base}{path}")).await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

#[tokio::test]
async fn a_refused_token_is_told_apart_from_a_missing_one_in_the_challenge() {
    let base = serve().await;
    let (status, challenge, body) = call(&base, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    assert!(
        challenge.contains(r#"error_description="a bearer token is required"#),
        "{challenge}"
    );
    let rpc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(rpc["error"]["code"], -32001, "{body}");

    let (status, challenge, body) = call(&base, Some("wrong")).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        challenge
            .contains(r#"error_description="the bearer token is not one this server accepts""#),
        "{challenge}"
    );
    assert!(
        !challenge.contains("wrong") && !body.contains("wrong"),
        "never quoted"
    );

    let (status, _, body) = call(&base, Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("14"), "{body}");
}

#[tokio::test]
async fn the_oauth_probes_after_a_401_read_json_that_says_there_is_no_oauth() {
    let base = serve().await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        // Where opencode registers itself when it finds no metadata.
        "/register",
    ] {
        let (status, kind, body) = get(&base, path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(kind, "application/json", "{path}");
        let error: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert_eq!(error["error"], "not_found", "{path}");
        assert!(
            error["error_description"]
                .as_str()
                .unwrap()
                .contains("static bearer tokens"),
            "{path}: {body}"
        );
    }
    let (status, kind, body) = get(&base, "/nothing/here").await;
    assert_eq!((status, kind.as_str()), (404, "application/json"), "{body}");
    assert!(body.contains("/mcp"), "{body}");
    // The extras keep answering as before.
    assert_eq!(get(&base, "/healthz").await.0, 200);
}

/// Set in the process [`every_request_on_every_path_leaves_one_access_line_with_its_path`]
/// starts to run [`access_log_of_one_server`].
const CHILD: &str = "TOOLHOST_TEST_ACCESS_LOG_CHILD";

/// The requests whose access log the test below reads, in a process of
/// their own with a global subscriber: a subscriber set for one thread
/// misses lines once other tests' threads have cached a callsite's
/// interest.
#[tokio::test]
#[ignore = "run by every_request_on_every_path_leaves_one_access_line_with_its_path"]
async fn access_log_of_one_server() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    tracing_subscriber::fmt()
        .with_env_filter("toolhost::mcp::access=info")
        .with_ansi(false)
        .with_writer(std::io::stdout)
        .init();
    let base = serve().await;
    call(&base, None).await;
    call(&base, Some(TOKEN)).await;
    get(&base, "/.well-known/oauth-protected-resource").await;
    get(&base, "/healthz").await;
    let long = format!("/{}", "x".repeat(5000));
    get(&base, &long).await;
}

#[test]
fn every_request_on_every_path_leaves_one_access_line_with_its_path() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "static_tokens::access_log_of_one_server",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line_of = |needle: &str| -> Vec<&str> {
        text.lines()
            .filter(|l| l.contains("toolhost::mcp::access") && l.contains(needle))
            .collect()
    };
    let mcp = line_of("path=\"/mcp\" ");
    assert_eq!(mcp.len(), 2, "{text}");
    assert!(mcp.iter().any(|l| l.contains("status=401")), "{text}");
    assert!(mcp.iter().any(|l| l.contains("status=200")), "{text}");
    let probe = line_of("path=\"/.well-known/oauth-protected-resource\" ");
    assert_eq!(probe.len(), 1, "{text}");
    assert!(
        probe[0].contains("status=404") && probe[0].contains("method=GET"),
        "{text}"
    );
    assert_eq!(line_of("path=\"/healthz\" ").len(), 1, "{text}");
    let long_line = line_of("path=\"/xxx");
    assert_eq!(long_line.len(), 1, "{text}");
    assert!(
        long_line[0].len() < 600,
        "a path is cut in the log: {}",
        long_line[0].len()
    );
}
