//! One HTTP GET through wasi:http/outgoing-handler, blocking on pollables.

use toolhost_sdk::ToolError;

use crate::url::Url;

/// What came back.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, in order (values converted lossily to UTF-8).
    pub headers: Vec<(String, String)>,
    /// The body, at most `max_body` bytes of it.
    pub body: Vec<u8>,
    /// Whether the body was longer than `max_body`.
    pub truncated: bool,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Request settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The User-Agent header.
    pub user_agent: String,
    /// Connect timeout, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Time allowed until the first byte of the response, in milliseconds.
    pub first_byte_timeout_ms: u64,
    /// Most body bytes kept.
    pub max_body: usize,
}

/// Sends `GET url` and reads the response (at most `settings.max_body`
/// bytes of body). Errors are `failed`, with messages that name the host.
///
/// Off the wasm target there is no wasi:http, and this fails at once.
pub fn get(url: &Url, settings: &Settings) -> Result<Response, ToolError> {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{Fields, Method, OutgoingRequest, RequestOptions, Scheme};
    use wasi::io::streams::StreamError;

    use crate::errors::describe;

    if !cfg!(target_arch = "wasm32") {
        return Err(ToolError::failed(format!(
            "cannot fetch {url}: wasi:http is only available inside the WebAssembly sandbox"
        )));
    }
    let host = url.authority();
    let failed = |what: &str| ToolError::failed(format!("{what} (request to {host})"));

    let headers = Fields::from_list(&[
        (
            "user-agent".to_string(),
            settings.user_agent.as_bytes().to_vec(),
        ),
        ("accept".to_string(), b"*/*".to_vec()),
    ])
    .map_err(|e| failed(&format!("invalid request header: {e:?}")))?;
    let request = OutgoingRequest::new(headers);
    request
        .set_method(&Method::Get)
        .map_err(|()| failed("could not set the method"))?;
    let scheme = match url.scheme {
        crate::url::Scheme::Http => Scheme::Http,
        crate::url::Scheme::Https => Scheme::Https,
    };
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| failed("could not set the scheme"))?;
    request
        .set_authority(Some(&host))
        .map_err(|()| ToolError::invalid_arguments(format!("invalid host '{host}'")))?;
    request
        .set_path_with_query(Some(&url.path_and_query))
        .map_err(|()| {
            ToolError::invalid_arguments(format!("invalid path '{}'", url.path_and_query))
        })?;

    // Hosts may not support every option; a refused option is not an error.
    let options = RequestOptions::new();
    let connect_ns = settings.connect_timeout_ms.saturating_mul(1_000_000);
    let first_byte_ns = settings.first_byte_timeout_ms.saturating_mul(1_000_000);
    let _ = options.set_connect_timeout(Some(connect_ns));
    let _ = options.set_first_byte_timeout(Some(first_byte_ns));
    let _ = options.set_between_bytes_timeout(Some(first_byte_ns));

    let future = outgoing_handler::handle(request, Some(options))
        .map_err(|code| ToolError::failed(describe(&code, &host)))?;
    let response = loop {
        match future.get() {
            Some(Ok(Ok(response))) => break response,
            Some(Ok(Err(code))) => return Err(ToolError::failed(describe(&code, &host))),
            Some(Err(())) => return Err(failed("the response was already taken")),
            None => {
                let pollable = future.subscribe();
                pollable.block();
            }
        }
    };

    let status = response.status();
    let headers: Vec<(String, String)> = {
        let fields = response.headers();
        fields
            .entries()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect()
    };

    let body = response
        .consume()
        .map_err(|()| failed("could not read the response body"))?;
    let stream = body
        .stream()
        .map_err(|()| failed("could not read the response body"))?;
    let mut data = Vec::new();
    let mut truncated = false;
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                data.extend_from_slice(&chunk);
                if data.len() > settings.max_body {
                    data.truncate(settings.max_body);
                    truncated = true;
                    break;
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(error)) => {
                let why = match wasi::http::types::http_error_code(&error) {
                    Some(code) => describe(&code, &host),
                    None => error.to_debug_string(),
                };
                return Err(ToolError::failed(format!(
                    "reading the response body failed: {why}"
                )));
            }
        }
    }
    // Children before parents: the stream, the body, the response, the future.
    drop(stream);
    drop(body);
    drop(response);
    drop(future);

    Ok(Response {
        status,
        headers,
        body: data,
        truncated,
    })
}
