//! The gateway as an OAuth client of upstream HTTP MCP servers: the
//! official MCP conformance suite's `auth/*` client scenarios (its test
//! servers and authorization servers, whose consent is automatic) with
//! `host call` as the client, a "browser" that follows the sign-in page's
//! redirects, and the suite's scenario context turned into the operator's
//! `[[mcp-servers]]` entry; `host mcp login` against a real authorization
//! server (`oidc-provider`) and an upstream that takes its tokens; and what
//! a person sees when a server wants a sign-in nobody gave.

use std::path::Path;

use crate::support::*;

/// The client command for one scenario run, in `dir`: a script that
/// writes the config for the server URL the suite appends (its context's
/// pre-registered client or client credentials become the entry's `oauth`
/// table), then calls the server's tool through `host`.
fn client_command(dir: &Path) -> String {
    let host = env!("CARGO_BIN_EXE_host");
    let d = dir.display();
    command_running(
        dir,
        &format!("exec \"{host}\" --config \"{d}/host.toml\" --no-watch -v call up__test-tool"),
    )
}

/// [`client_command`] with `run` (a shell line) in place of the call.
fn command_running(dir: &Path, run: &str) -> String {
    let config = r#"
import json, os, sys
url = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
lines = ["[[mcp-servers]]", 'name = "up"', "url = " + json.dumps(url), "[mcp-servers.oauth]",
         'client-metadata-url = "https://conformance-test.local/client-metadata.json"']
def secret(name, value):
    path = os.path.join(here, name)
    with open(path, "w") as f:
        f.write(value)
    return json.dumps(path)
if "client_id" in context:
    lines.append("client-id = " + json.dumps(context["client_id"]))
if "client_secret" in context:
    lines.append("client-secret-file = " + secret("secret", context["client_secret"]))
if "private_key_pem" in context:
    lines.append("private-key-file = " + secret("key.pem", context["private_key_pem"]))
    lines.append("signing-algorithm = " + json.dumps(context.get("signing_algorithm", "ES256")))
if scenario.startswith("auth/client-credentials"):
    lines.append('grant = "client-credentials"')
if "valid_jwt" in context:
    # A workload's JWT, as its platform writes it to a file.
    lines.append('grant = "jwt-bearer"')
    jwt = context[os.environ.get("WORKLOAD_JWT", "valid_jwt")]
    lines.append("assertion-file = " + secret("workload.jwt", jwt))
if "idp_id_token" in context:
    # The person's organization signs them in: its identity provider, and
    # the ID token their sign-in tool wrote to a file.
    lines.append('grant = "enterprise"')
    lines.append("idp-issuer = " + json.dumps(context["idp_issuer"]))
    # Its token endpoint is found from its OpenID configuration (the
    # suite's context names it too: left out, so discovery is used).
    lines.append("idp-client-id = " + json.dumps(context["idp_client_id"]))
    lines.append("id-token-file = " + secret("id.jwt", context["idp_id_token"]))
if "client_secret" in context or "private_key_pem" in context or "valid_jwt" in context:
    # A client with a secret or key names the authorization server it may
    # be sent to, as an operator copies it from its metadata: here the
    # suite's, which the server's protected resource metadata names.
    from urllib.parse import urlsplit
    from urllib.request import urlopen
    def get(address):
        with urlopen(address, timeout=10) as answer:
            return json.load(answer)
    parts = urlsplit(url)
    origin = parts.scheme + "://" + parts.netloc
    try:
        prm = get(origin + "/.well-known/oauth-protected-resource" + parts.path)
    except OSError:
        prm = get(origin + "/.well-known/oauth-protected-resource")
    server = prm["authorization_servers"][0].rstrip("/")
    lines.append("issuer = " + json.dumps(get(server + "/.well-known/oauth-authorization-server")["issuer"]))
print("\n".join(lines))
"#;
    std::fs::write(dir.join("config.py"), config).unwrap();
    // The person's browser: opens the page and follows its redirects, as
    // a person who consents would.
    std::fs::write(
        dir.join("browser.sh"),
        "curl -s -o /dev/null -L --max-redirs 5 --max-time 20 \"$1\" &\n",
    )
    .unwrap();
    let d = dir.display();
    let script = format!(
        r#"#!/bin/sh
# toolhost's `host` as the conformance suite's client; $1: the server's URL.
unset RUST_LOG TOOLHOST_CONFIG TOOLHOST_POLICY
export TOOLHOST_CACHE_DIR="{d}/cache" TOOLHOST_LOCK="{d}/lock" TOOLHOST_OAUTH_DIR="{d}/oauth"
export BROWSER="sh {d}/browser.sh"
python3 "{d}/config.py" "$1" > "{d}/host.toml" || exit 3
{run}
"#
    );
    let path = dir.join("client.sh");
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

/// The sign-in scenarios of the suite's next release that toolhost does
/// not pass yet, each with the reason; the test fails when one of them
/// starts passing (then it leaves this list).
const AUTH_NOT_YET: [(&str, &str); 0] = [];

/// Every sign-in scenario (`auth/*`) of the suite's next release, each
/// with a fresh token directory, two at a time: each passes with no
/// check failed or warned (a `WARNING` is a SHOULD of the spec left
/// undone), but those of [`AUTH_NOT_YET`], which each still fail.
#[test]
fn the_next_releases_sign_in_scenarios_pass_with_host_as_the_client() {
    let scenarios: Vec<String> = conformance::client_scenarios(conformance::Release::Next)
        .into_iter()
        .filter(|s| s.starts_with("auth/"))
        .collect();
    assert!(
        scenarios.len() >= 30,
        "the release lists {} sign-in scenarios",
        scenarios.len()
    );
    for (known, _) in AUTH_NOT_YET {
        assert!(
            scenarios.iter().any(|s| s == known),
            "{known} is not listed"
        );
    }
    let failed = conformance::two_at_a_time(&scenarios, |scenario| {
        let dir = tempfile::tempdir().unwrap();
        let outcome = conformance::client_of(
            conformance::Release::Next,
            &client_command(dir.path()),
            scenario,
        );
        let warnings = outcome.warnings();
        let passed = outcome.passed() && warnings.is_empty();
        match (passed, AUTH_NOT_YET.iter().find(|(s, _)| *s == scenario)) {
            (false, None) => Some(format!("{outcome}\n{}", warnings.join("\n"))),
            (true, Some((_, why))) => Some(format!(
                "{scenario} passes now: take it out of AUTH_NOT_YET ({why})"
            )),
            _ => None,
        }
    });
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// A workload's JWT the authorization server refuses (the suite's
/// `auth/wif-jwt-bearer` with the JWT for another audience) is sent once:
/// `host serve` keeps reconnecting to the server for four seconds (at
/// 0.5, 1 and 2 s), and neither sends that JWT again nor tries another
/// grant; the call's error says what the server answered.
#[test]
fn a_refused_workload_jwt_is_sent_once_and_no_other_grant_is_tried() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let port = free_port();
    let run = format!(
        "export WORKLOAD_JWT=wrong_audience_jwt\n\
         python3 \"{d}/config.py\" \"$1\" > \"{d}/host.toml\" || exit 3\n\
         \"{host}\" --config \"{d}/host.toml\" --no-watch serve --listen 127.0.0.1:{port} \
         2> \"{d}/serve.log\" &\nsleep 4\nkill $!",
        host = env!("CARGO_BIN_EXE_host"),
    );
    let outcome = conformance::client_of(
        conformance::Release::Next,
        &command_running(dir.path(), &run),
        "auth/wif-jwt-bearer",
    );
    let said = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    let status = |id: &str| -> Vec<&str> {
        outcome
            .checks
            .iter()
            .filter(|c| c["id"] == id)
            .filter_map(|c| c["status"].as_str())
            .collect()
    };
    assert_eq!(
        status("wif-assertion-audience"),
        ["FAILURE"],
        "{outcome}\n{said}"
    );
    assert!(status("wif-no-retry").is_empty(), "{outcome}\n{said}");
    assert!(status("wif-grant-fallback").is_empty(), "{outcome}\n{said}");
    assert!(
        said.contains("refused the workload's assertion") && said.contains("invalid_grant"),
        "{said}"
    );
    assert!(
        said.contains("not sent again until the file changes"),
        "{said}"
    );
}

/// An upstream MCP server that takes only the tokens of a real
/// authorization server: `oidc-provider` (`support::oidc`) issuing JWT
/// access tokens lasting `access_ttl` seconds for
/// `http://127.0.0.1:PORT/mcp`, with refresh tokens, its consent scripted
/// (alice signs in and grants what is asked); and toolhost's own HTTP MCP
/// server there as the resource server (the calc plugin; alice may call).
struct Upstream {
    idp: oidc::OidcProvider,
    url: String,
    port: u16,
    server: Resource,
}

fn upstream(access_ttl: u32) -> Upstream {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let idp = oidc::OidcProvider::start(serde_json::json!({
        "resource": url,
        "scopes": ["tools"],
        "access_token_ttl": access_ttl,
        "refresh_tokens": true,
    }));
    let server = resource_server(port, &idp.issuer, caller("alice", None));
    Upstream {
        idp,
        url,
        port,
        server,
    }
}

/// A caller rule: a subject, or a client.
fn caller(subject: &str, client: Option<&str>) -> toolhost_mcp::server::CallerRule {
    toolhost_mcp::server::CallerRule {
        subject: client.is_none().then(|| subject.to_owned()),
        client: client.map(str::to_owned),
        ..toolhost_mcp::server::CallerRule::default()
    }
}

/// toolhost's HTTP MCP server (the calc plugin) on 127.0.0.1:`port`,
/// taking the tokens `issuer` gives `who` (scope `tools`); its protected
/// resource metadata names `issuer`. Stopped when dropped.
struct Resource {
    _runtime: tokio::runtime::Runtime,
    _plugins: tempfile::TempDir,
}

fn resource_server(port: u16, issuer: &str, who: toolhost_mcp::server::CallerRule) -> Resource {
    let plugins = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", plugins.path());
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    server.block_on(async {
        let runtime = toolhost_runtime::Runtime::builder()
            .plugin_dir(plugins.path())
            .cache_dir(None)
            .build()
            .await
            .unwrap();
        let mcp = toolhost_mcp::McpServer::new(runtime, toolhost_mcp::ServerOptions::default());
        let mut options = toolhost_mcp::HttpOptions::local(port);
        options.oauth = Some(toolhost_mcp::server::OAuthOptions {
            issuer: issuer.to_owned(),
            scopes: vec!["tools".into()],
            // Expired is expired: the client must refresh in time.
            leeway_seconds: 0,
            groups_claim: "groups".into(),
            callers: vec![who],
            ..toolhost_mcp::server::OAuthOptions::default()
        });
        // The port may have been let go of a moment ago.
        let mut tries = 0;
        let bound = loop {
            match toolhost_mcp::HttpServer::bind(mcp.clone(), options.clone()).await {
                Ok(bound) => break bound,
                Err(e) if tries < 100 => {
                    tries += 1;
                    eprintln!("binding {port} again: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("{e}"),
            }
        };
        tokio::spawn(bound.run(std::future::pending()));
    });
    Resource {
        _runtime: server,
        _plugins: plugins,
    }
}

/// A person's `host` against the upstream at `url`: `host` commands with
/// one `[[mcp-servers]]` entry, the tokens in `dir/oauth`, a browser that
/// follows the sign-in (with its cookies) when `browser`.
fn person(
    dir: &Path,
    url: &str,
    browser: bool,
) -> impl Fn(&[&str]) -> std::process::Output + use<> {
    std::fs::write(
        dir.join("host.toml"),
        format!("[[mcp-servers]]\nname = \"acme\"\nurl = \"{url}\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("browser.sh"),
        format!(
            "curl -s -o /dev/null -L --max-redirs 10 --max-time 20 -c {jar} -b {jar} \"$1\" &\n",
            jar = dir.join("cookies").display()
        ),
    )
    .unwrap();
    let dir = dir.to_path_buf();
    move |args: &[&str]| {
        let mut cmd = host(&dir.join("cache"));
        cmd.arg("--config")
            .arg(dir.join("host.toml"))
            .arg("--no-watch")
            .env("TOOLHOST_OAUTH_DIR", dir.join("oauth"))
            .env_remove("BROWSER")
            .args(args);
        if browser {
            cmd.env(
                "BROWSER",
                format!("sh {}", dir.join("browser.sh").display()),
            );
        }
        cmd.output().unwrap()
    }
}

fn text(out: &std::process::Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The access and refresh tokens kept in the token file.
fn kept_tokens(file: &Path) -> (String, String) {
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let token = &kept["credentials"]["token_response"];
    (
        token["access_token"].as_str().unwrap().to_owned(),
        token["refresh_token"].as_str().unwrap().to_owned(),
    )
}

const CALC: &[&str] = &["call", "acme__calculate", r#"{"expression":"2*(3+4)"}"#];

#[test]
fn login_keeps_a_token_only_the_user_reads_which_is_refreshed_and_logout_forgets() {
    let upstream = upstream(4);
    let dir = tempfile::tempdir().unwrap();
    let host = person(dir.path(), &upstream.url, true);

    let login = host(&["mcp", "login", "acme"]);
    assert!(login.status.success(), "{}", text(&login));
    assert!(
        text(&login).contains("Signed in to `acme`"),
        "{}",
        text(&login)
    );
    let file = dir.path().join("oauth").join("acme.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&dir.path().join("oauth")), 0o700);
    }
    let (access, refresh) = kept_tokens(&file);

    // The token works at once, without a new sign-in.
    let call = host(CALC);
    assert!(call.status.success(), "{}", text(&call));
    assert!(text(&call).contains("14"), "{}", text(&call));
    assert_eq!(upstream.idp.grants(), ["authorization_code"]);
    let plugins = host(&["plugins"]);
    assert!(
        String::from_utf8_lossy(&plugins.stdout).contains("OAuth: signed in as client"),
        "{}",
        text(&plugins)
    );

    // Expired: refreshed, not signed in again; no token in the most
    // talkative log.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let mut args = vec!["-vvv"];
    args.extend_from_slice(CALC);
    let call = host(&args);
    assert!(call.status.success(), "{}", text(&call));
    assert_eq!(
        upstream.idp.grants(),
        ["authorization_code", "refresh_token"]
    );
    let (new_access, new_refresh) = kept_tokens(&file);
    assert_ne!(new_access, access);
    let log = text(&call);
    for secret in [&access, &refresh, &new_access, &new_refresh] {
        assert!(
            !log.contains(secret.as_str()),
            "a token is in the log:\n{log}"
        );
    }

    let logout = host(&["mcp", "logout", "acme"]);
    assert!(logout.status.success(), "{}", text(&logout));
    assert!(!file.exists());

    // Nobody to ask: the error says what happened and what to run.
    let quiet = person(dir.path(), &upstream.url, false);
    let call = quiet(CALC);
    assert!(!call.status.success(), "{}", text(&call));
    let said = text(&call);
    assert!(
        said.contains("needs sign-in") && said.contains("host mcp login acme"),
        "{said}"
    );
    for secret in [&access, &refresh, &new_access, &new_refresh] {
        assert!(
            !said.contains(secret.as_str()),
            "a token is in the error:\n{said}"
        );
    }
}

/// The requests of `requests` that could carry a secret or a token (all
/// but reads).
fn posts(requests: &[String]) -> Vec<&String> {
    requests.iter().filter(|r| !r.starts_with("GET ")).collect()
}

#[test]
fn the_gateway_sends_its_client_secret_to_the_configured_issuer_only_and_keeps_serving_its_other_upstreams()
 {
    // Two real authorization servers that both know the gateway's
    // client: ours, and the one a compromised upstream (or whoever holds
    // its DNS name) names in its protected resource metadata.
    let provider = || {
        oidc::OidcProvider::start(serde_json::json!({
            "resource_pattern": "^http://127\\.0\\.0\\.1:[0-9]+/mcp$",
            "scopes": ["tools"],
            "clients": [oidc::OidcProvider::machine_client("gw", "gw-secret")],
        }))
    };
    let (ours, theirs) = (provider(), provider());
    let (good, evil) = (free_port(), free_port());
    let _good = resource_server(good, &ours.issuer, caller("", Some("gw")));
    let _evil = resource_server(evil, &theirs.issuer, caller("", Some("gw")));
    let dir = tempfile::tempdir().unwrap();
    let config = |issuer: Option<&str>| {
        let entry = |name: &str, port: u16| {
            format!(
                "[[mcp-servers]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
                 [mcp-servers.oauth]\ngrant = \"client-credentials\"\nclient-id = \"gw\"\n\
                 client-secret-env = \"GW_SECRET\"\nscopes = [\"tools\"]\n{}\n",
                issuer
                    .map(|i| format!("issuer = \"{i}\""))
                    .unwrap_or_default()
            )
        };
        crate::oauth::write(
            dir.path(),
            "gateway.toml",
            &format!("{}{}", entry("good", good), entry("evil", evil)),
        )
    };
    let plugins = tempfile::tempdir().unwrap();
    let plugins = plugins.path().display().to_string();
    let oauth_dir = dir.path().join("oauth").display().to_string();
    let env = [
        ("GW_SECRET", "gw-secret"),
        ("TOOLHOST_OAUTH_DIR", oauth_dir.as_str()),
    ];

    // A client with a secret and no `issuer`: refused at load, saying
    // what to add; nothing was asked of anyone.
    let without = config(None);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(
            &crate::mcp::host_args(
                dir.path(),
                &["--config", &without, "--plugins", &plugins, "plugins"],
            )[1..],
        )
        .envs(env)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("need `issuer`") && text(&out).contains("issuer = \"https://"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("gw-secret"), "{}", text(&out));
    assert!(ours.requests().is_empty() && theirs.requests().is_empty());

    let with = config(Some(&ours.issuer));
    let tokens = crate::oauth::write(dir.path(), "tokens", "caller-token\n");
    let served = crate::oauth::serve(
        &crate::mcp::host_args(
            dir.path(),
            &[
                "--config",
                &with,
                "--plugins",
                &plugins,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &tokens,
            ],
        ),
        &env,
    );
    // The upstream of our authorization server serves through the gateway.
    let (status, body) = crate::oauth::call_tool(&served.base, "caller-token", "good__calculate");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"42\""), "{body}");
    assert!(ours.grants().contains(&"client_credentials".to_owned()));
    // The other one is down, and says why; its authorization server was
    // read (its metadata) but sent nothing: no secret, no token request.
    let (_, body) = crate::oauth::call_tool(&served.base, "caller-token", "evil__calculate");
    assert!(
        !theirs.requests().is_empty(),
        "its metadata was read (the test looked where it should)"
    );
    assert_eq!(posts(&theirs.requests()), Vec::<&String>::new(), "{body}");
    assert!(theirs.grants().is_empty());
    assert!(
        body.contains(&format!("`{}`", theirs.issuer))
            && body.contains("not the `issuer` configured")
            && body.contains("nothing was sent there"),
        "{body}"
    );
    assert!(!body.contains("gw-secret"), "{body}");
    // And the good one still serves.
    let (status, body) = crate::oauth::call_tool(&served.base, "caller-token", "good__calculate");
    assert_eq!(status, 200, "{body}");
}

#[test]
fn kept_tokens_are_refreshed_only_at_the_authorization_server_that_issued_them() {
    let Upstream {
        idp,
        url,
        port,
        server,
    } = upstream(4);
    let dir = tempfile::tempdir().unwrap();
    let login = person(dir.path(), &url, true)(&["mcp", "login", "acme"]);
    assert!(login.status.success(), "{}", text(&login));
    let file = dir.path().join("oauth").join("acme.json");
    let (_, refresh) = kept_tokens(&file);
    let host = person(dir.path(), &url, false);
    // Expired: the next call must refresh.
    std::thread::sleep(std::time::Duration::from_secs(5));
    drop(server);

    // The server now publishes no metadata: a 2025-03-26 server is its
    // own authorization server, with `/token` at its origin. The refresh
    // token is not sent there.
    let bare = TestServer::routing(
        port,
        std::sync::Arc::new(|line: &str| {
            if line.starts_with("GET /.well-known/") {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_owned()
            } else {
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n"
                    .to_owned()
            }
        }),
    );
    let call = host(CALC);
    assert!(!call.status.success(), "{}", text(&call));
    let sent: Vec<String> = bare
        .request_lines()
        .into_iter()
        .filter(|l| l.starts_with("POST ") && !l.starts_with("POST /mcp "))
        .collect();
    assert!(sent.is_empty(), "sent to the server's origin: {sent:?}");
    assert!(
        text(&call).contains(&format!("not `{}`, which issued the tokens", idp.issuer)),
        "{}",
        text(&call)
    );
    drop(bare);

    // The server names another authorization server: nothing is sent
    // there either, the tokens are kept, and the error says what to run.
    let theirs = oidc::OidcProvider::start(serde_json::json!({
        "resource": url, "scopes": ["tools"], "refresh_tokens": true,
    }));
    let evil = resource_server(port, &theirs.issuer, caller("alice", None));
    let call = host(CALC);
    assert!(!call.status.success(), "{}", text(&call));
    let said = text(&call);
    assert!(
        said.contains(&format!("the authorization server `{}`", theirs.issuer))
            && said.contains("host mcp login acme"),
        "{said}"
    );
    assert!(!said.contains(&refresh), "{said}");
    assert_eq!(posts(&theirs.requests()), Vec::<&String>::new());
    assert_eq!(kept_tokens(&file).1, refresh, "the tokens are kept");
    let plugins = host(&["plugins"]);
    assert!(
        String::from_utf8_lossy(&plugins.stdout).contains("not in use"),
        "{}",
        text(&plugins)
    );
    drop(evil);

    // Back at its own authorization server: refreshed there, and called.
    let _back = resource_server(port, &idp.issuer, caller("alice", None));
    let call = host(CALC);
    assert!(call.status.success(), "{}", text(&call));
    assert!(text(&call).contains("14"), "{}", text(&call));
    assert_eq!(idp.grants(), ["authorization_code", "refresh_token"]);
}
