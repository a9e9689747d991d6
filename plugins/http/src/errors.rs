//! Readable messages for wasi:http error codes.

use wasi::http::types::ErrorCode;

/// The WIT name of an error case, e.g. `HTTP-request-denied`.
pub fn case_name(code: &ErrorCode) -> &'static str {
    match code {
        ErrorCode::DnsTimeout => "DNS-timeout",
        ErrorCode::DnsError(_) => "DNS-error",
        ErrorCode::DestinationNotFound => "destination-not-found",
        ErrorCode::DestinationUnavailable => "destination-unavailable",
        ErrorCode::DestinationIpProhibited => "destination-IP-prohibited",
        ErrorCode::DestinationIpUnroutable => "destination-IP-unroutable",
        ErrorCode::ConnectionRefused => "connection-refused",
        ErrorCode::ConnectionTerminated => "connection-terminated",
        ErrorCode::ConnectionTimeout => "connection-timeout",
        ErrorCode::ConnectionReadTimeout => "connection-read-timeout",
        ErrorCode::ConnectionWriteTimeout => "connection-write-timeout",
        ErrorCode::ConnectionLimitReached => "connection-limit-reached",
        ErrorCode::TlsProtocolError => "TLS-protocol-error",
        ErrorCode::TlsCertificateError => "TLS-certificate-error",
        ErrorCode::TlsAlertReceived(_) => "TLS-alert-received",
        ErrorCode::HttpRequestDenied => "HTTP-request-denied",
        ErrorCode::HttpRequestLengthRequired => "HTTP-request-length-required",
        ErrorCode::HttpRequestBodySize(_) => "HTTP-request-body-size",
        ErrorCode::HttpRequestMethodInvalid => "HTTP-request-method-invalid",
        ErrorCode::HttpRequestUriInvalid => "HTTP-request-URI-invalid",
        ErrorCode::HttpRequestUriTooLong => "HTTP-request-URI-too-long",
        ErrorCode::HttpRequestHeaderSectionSize(_) => "HTTP-request-header-section-size",
        ErrorCode::HttpRequestHeaderSize(_) => "HTTP-request-header-size",
        ErrorCode::HttpRequestTrailerSectionSize(_) => "HTTP-request-trailer-section-size",
        ErrorCode::HttpRequestTrailerSize(_) => "HTTP-request-trailer-size",
        ErrorCode::HttpResponseIncomplete => "HTTP-response-incomplete",
        ErrorCode::HttpResponseHeaderSectionSize(_) => "HTTP-response-header-section-size",
        ErrorCode::HttpResponseHeaderSize(_) => "HTTP-response-header-size",
        ErrorCode::HttpResponseBodySize(_) => "HTTP-response-body-size",
        ErrorCode::HttpResponseTrailerSectionSize(_) => "HTTP-response-trailer-section-size",
        ErrorCode::HttpResponseTrailerSize(_) => "HTTP-response-trailer-size",
        ErrorCode::HttpResponseTransferCoding(_) => "HTTP-response-transfer-coding",
        ErrorCode::HttpResponseContentCoding(_) => "HTTP-response-content-coding",
        ErrorCode::HttpResponseTimeout => "HTTP-response-timeout",
        ErrorCode::HttpUpgradeFailed => "HTTP-upgrade-failed",
        ErrorCode::HttpProtocolError => "HTTP-protocol-error",
        ErrorCode::LoopDetected => "loop-detected",
        ErrorCode::ConfigurationError => "configuration-error",
        ErrorCode::InternalError(_) => "internal-error",
    }
}

/// A sentence about what went wrong talking to `host`, ending with the WIT
/// case name in parentheses.
pub fn describe(code: &ErrorCode, host: &str) -> String {
    let what = match code {
        ErrorCode::HttpRequestDenied => {
            format!("the host has not granted this plugin access to {host}")
        }
        ErrorCode::DnsError(p) => {
            let mut detail = String::new();
            if let Some(rcode) = &p.rcode {
                detail.push_str(&format!(": {rcode}"));
            }
            format!("could not resolve the name {host}{detail}")
        }
        ErrorCode::DnsTimeout => format!("looking up {host} timed out"),
        ErrorCode::DestinationNotFound => format!("{host} was not found"),
        ErrorCode::DestinationUnavailable => format!("{host} is unavailable"),
        ErrorCode::DestinationIpProhibited => {
            format!("connecting to {host} is prohibited by the host")
        }
        ErrorCode::DestinationIpUnroutable => format!("{host} cannot be reached (unroutable)"),
        ErrorCode::ConnectionRefused => format!("{host} refused the connection"),
        ErrorCode::ConnectionTerminated => format!("{host} closed the connection unexpectedly"),
        ErrorCode::ConnectionTimeout => format!("timed out connecting to {host}"),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => {
            format!("timed out waiting for {host} to respond")
        }
        ErrorCode::ConnectionWriteTimeout => format!("timed out sending the request to {host}"),
        ErrorCode::ConnectionLimitReached => {
            format!("too many connections open; could not connect to {host}")
        }
        ErrorCode::TlsProtocolError => format!("TLS handshake with {host} failed"),
        ErrorCode::TlsCertificateError => format!("the TLS certificate of {host} is not valid"),
        ErrorCode::TlsAlertReceived(p) => match &p.alert_message {
            Some(m) => format!("{host} sent a TLS alert: {m}"),
            None => format!("{host} sent a TLS alert"),
        },
        ErrorCode::HttpResponseIncomplete => format!("{host} sent an incomplete response"),
        ErrorCode::HttpProtocolError => format!("HTTP protocol error talking to {host}"),
        ErrorCode::LoopDetected => format!("a request loop was detected at {host}"),
        ErrorCode::InternalError(Some(m)) => format!("request to {host} failed: {m}"),
        _ => format!("request to {host} failed"),
    };
    format!("{what} ({})", case_name(code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasi::http::types::DnsErrorPayload;

    #[test]
    fn messages_name_the_host_and_the_case() {
        assert_eq!(
            describe(&ErrorCode::HttpRequestDenied, "example.com"),
            "the host has not granted this plugin access to example.com (HTTP-request-denied)"
        );
        assert_eq!(
            describe(&ErrorCode::ConnectionRefused, "127.0.0.1:9"),
            "127.0.0.1:9 refused the connection (connection-refused)"
        );
        let dns = ErrorCode::DnsError(DnsErrorPayload {
            rcode: Some("address not available".into()),
            info_code: Some(0),
        });
        assert_eq!(
            describe(&dns, "nope.invalid"),
            "could not resolve the name nope.invalid: address not available (DNS-error)"
        );
        assert_eq!(
            describe(&ErrorCode::InternalError(None), "h"),
            "request to h failed (internal-error)"
        );
        assert_eq!(
            describe(&ErrorCode::HttpResponseBodySize(Some(3)), "h"),
            "request to h failed (HTTP-response-body-size)"
        );
    }
}
