//! A real authorization server for the OAuth client's tests: `oidc-provider`
//! (npm, OpenID Certified), which `cargo xtask test` installs beside the
//! conformance suite, with an MCP server (the MCP TypeScript SDK) that
//! takes only its tokens (`oauth_server.mjs`). The person who signs in is
//! scripted: `alice`, consenting to what is asked.
//!
//! ```no_run
//! let server = toolhost_test_support::oauth_server::OAuthServer::start(4);
//! println!("MCP server at {}, authorization server at {}", server.mcp_url(), server.issuer);
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// The running servers; stopped when dropped.
pub struct OAuthServer {
    /// The authorization server's issuer (`http://127.0.0.1:PORT`).
    pub issuer: String,
    child: Child,
    grants: Arc<Mutex<Vec<String>>>,
}

impl OAuthServer {
    /// Starts both, access tokens lasting `access_ttl_secs`.
    pub fn start(access_ttl_secs: u32) -> OAuthServer {
        let (suite, node) = crate::conformance::node();
        let modules = suite
            .ancestors()
            .find(|p| p.ends_with("node_modules"))
            .expect("the suite is inside node_modules")
            .to_path_buf();
        assert!(
            modules.join("oidc-provider").is_dir(),
            "oidc-provider is missing from {}: run the tests with `cargo xtask test`, which installs it",
            modules.display()
        );
        let script = crate::root().join("crates/toolhost-test-support/src/oauth_server.mjs");
        let mut child = Command::new(node)
            .arg(script)
            .arg(&modules)
            .arg(access_ttl_secs.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let issuer = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("listening ") {
                        break url.to_owned();
                    }
                }
                _ => panic!("the authorization server did not start"),
            }
        };
        let grants = Arc::new(Mutex::new(Vec::new()));
        let seen = grants.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(grant) = line.strip_prefix("grant ") {
                    seen.lock().unwrap().push(grant.to_owned());
                }
            }
        });
        OAuthServer {
            issuer,
            child,
            grants,
        }
    }

    /// The MCP server's URL.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.issuer)
    }

    /// The grant types of the token requests served so far
    /// (`authorization_code`, `refresh_token`).
    pub fn grants(&self) -> Vec<String> {
        self.grants.lock().unwrap().clone()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
