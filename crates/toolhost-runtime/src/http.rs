//! Outgoing HTTP from plugins (wasi:http), limited to the hosts a plugin was granted.

use std::sync::Arc;

use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiHttpHooks};

use crate::grants::HostPattern;

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<wasmtime_wasi_http::WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

/// [`WasiHttpHooks`] that send a request only when its scheme, host and port
/// match one of the plugin's granted [`HostPattern`]s; anything else fails in
/// the plugin with `HTTP-request-denied`.
pub(crate) struct HttpAllowlist {
    plugin: String,
    allowed: Arc<[HostPattern]>,
}

impl HttpAllowlist {
    pub(crate) fn new(plugin: String, allowed: Arc<[HostPattern]>) -> Self {
        HttpAllowlist { plugin, allowed }
    }

    /// Whether `uri` may be requested.
    pub(crate) fn allows(&self, uri: &http::Uri) -> bool {
        let scheme = uri.scheme_str().unwrap_or("https");
        let Some(host) = uri.host() else {
            return false;
        };
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "http" { 80 } else { 443 });
        self.allowed.iter().any(|p| p.matches(scheme, host, port))
    }
}

impl WasiHttpHooks for HttpAllowlist {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        drop(fut);
        if !self.allows(request.uri()) {
            tracing::warn!(
                target: "toolhost::plugin",
                plugin = %self.plugin,
                uri = %request.uri(),
                "refused an HTTP request to a host that is not granted"
            );
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        tracing::debug!(target: "toolhost::plugin", plugin = %self.plugin, uri = %request.uri(), "HTTP request");
        Box::new(async move {
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_granted_hosts_are_allowed() {
        let list = HttpAllowlist::new(
            "http".into(),
            vec!["127.0.0.1:8080".parse().unwrap()].into(),
        );
        assert!(list.allows(&"http://127.0.0.1:8080/x".parse().unwrap()));
        assert!(!list.allows(&"http://127.0.0.1:8081/x".parse().unwrap()));
        assert!(!list.allows(&"http://example.com/".parse().unwrap()));
    }

    #[test]
    fn nothing_is_allowed_without_grants() {
        let list = HttpAllowlist::new("http".into(), Vec::new().into());
        assert!(!list.allows(&"https://example.com/".parse().unwrap()));
    }
}
