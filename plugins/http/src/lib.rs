//! toolhost plugin `http`: fetches a URL with HTTP GET through wasi:http.
//!
//! The host decides which hosts the plugin may reach; a request to any other
//! host fails with `HTTP-request-denied`, reported as a `failed` tool error
//! that names the host.

mod client;
mod errors;
mod render;
mod url;

use toolhost_sdk::prelude::*;

/// Most body bytes returned.
const MAX_BODY: usize = 64 * 1024;
/// Most redirects followed.
const MAX_REDIRECTS: usize = 5;

/// Fetches a URL with HTTP GET and returns the status line and the body as
/// text (at most 64 KiB; binary bodies are summarized, not shown). Follows
/// up to 5 redirects. Only http:// and https:// URLs, and only hosts the
/// user has allowed, can be fetched.
#[derive(Deserialize, JsonSchema)]
struct HttpGet {
    /// The absolute URL to fetch, e.g. `https://example.com/data.json`.
    url: String,
}

fn http_get(cx: &Context, args: HttpGet) -> Result<Output, ToolError> {
    let mut url = url::parse(&args.url).map_err(ToolError::invalid_arguments)?;
    let settings = client::Settings {
        user_agent: cx
            .config("user-agent")
            .unwrap_or_else(|| "toolhost-http/0.1".to_string()),
        connect_timeout_ms: config_ms(cx, "connect-timeout-ms", 10_000),
        first_byte_timeout_ms: config_ms(cx, "first-byte-timeout-ms", 20_000),
        max_body: MAX_BODY,
    };
    let mut redirects = Vec::new();
    let response = loop {
        cx.progress(format!("GET {url}"), None);
        let response = client::get(&url, &settings)?;
        let location = match response.status {
            301 | 302 | 303 | 307 | 308 => response.header("location"),
            _ => None,
        };
        let Some(location) = location else {
            break response;
        };
        if redirects.len() == MAX_REDIRECTS {
            return Err(ToolError::failed(format!(
                "too many redirects (more than {MAX_REDIRECTS}); the last one, from {url}, pointed to {location}"
            )));
        }
        let next = url::join(&url, location).map_err(|e| {
            ToolError::failed(format!("{url} redirected to an unusable location: {e}"))
        })?;
        redirects.push(next.to_string());
        url = next;
    };

    let content_type = response.header("content-type");
    let text = render::output(
        response.status,
        &response.body,
        response.truncated,
        MAX_BODY,
        content_type,
    );
    let mut headers = serde_json::Map::new();
    for (name, value) in &response.headers {
        let name = name.to_ascii_lowercase();
        match headers.get_mut(&name) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(value);
            }
            _ => {
                headers.insert(name, Value::String(value.clone()));
            }
        }
    }
    Ok(Output::new(text).with_details(json!({
        "url": url.to_string(),
        "status": response.status,
        "headers": headers,
        "bytes": response.body.len(),
        "truncated": response.truncated,
        "redirects": redirects,
    })))
}

fn config_ms(cx: &Context, key: &str, default: u64) -> u64 {
    cx.config(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

use toolhost_sdk::serde_json;

toolhost_sdk::plugin! {
    tools: [
        http_get(HttpGet) read_only open_world,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: Value) -> Result<Output, ToolError> {
        plugin().call(&Context::default(), "http_get", &args.to_string())
    }

    #[test]
    fn plugin_is_valid() {
        plugin().validate().unwrap();
        let spec = plugin().specs().remove(0);
        assert_eq!(spec.name, "http_get");
        assert!(spec.annotations.read_only && spec.annotations.open_world);
        assert!(!spec.annotations.idempotent);
    }

    #[test]
    fn bad_urls_are_invalid_arguments() {
        for url in [
            "example.com",
            "ftp://example.com/",
            "http://user@h/",
            "http://h:70000/",
        ] {
            let err = call(json!({ "url": url })).unwrap_err();
            assert!(err.is_invalid_arguments(), "{url}: {err}");
        }
    }

    #[test]
    fn natively_there_is_no_network() {
        let err = call(json!({"url": "http://127.0.0.1:8080/x"})).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed(
                "cannot fetch http://127.0.0.1:8080/x: wasi:http is only available inside the WebAssembly sandbox"
            )
        );
    }

    #[test]
    fn config_values() {
        let cx = Context::default().with_config("connect-timeout-ms", " 250 ");
        assert_eq!(config_ms(&cx, "connect-timeout-ms", 1), 250);
        assert_eq!(config_ms(&cx, "missing", 7), 7);
        let cx = Context::default().with_config("connect-timeout-ms", "soon");
        assert_eq!(config_ms(&cx, "connect-timeout-ms", 9), 9);
    }
}
