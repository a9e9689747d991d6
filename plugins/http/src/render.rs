//! Turning a response into text for the model.

/// The reason phrase of common status codes.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        418 => "I'm a teapot",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// `HTTP 200 OK`.
pub fn status_line(status: u16) -> String {
    match reason(status) {
        "" => format!("HTTP {status}"),
        r => format!("HTTP {status} {r}"),
    }
}

/// The body as text: UTF-8 (a character cut by truncation is dropped) or,
/// for anything else, a one-line note instead of the bytes.
pub fn body_text(
    body: &[u8],
    truncated: bool,
    content_type: Option<&str>,
) -> Result<String, String> {
    match std::str::from_utf8(body) {
        Ok(s) => Ok(s.to_string()),
        Err(e) if truncated && e.error_len().is_none() => {
            Ok(String::from_utf8_lossy(&body[..e.valid_up_to()]).into_owned())
        }
        Err(_) => Err(format!(
            "[binary body of {} bytes ({}); not shown]",
            body.len(),
            content_type.unwrap_or("no content-type")
        )),
    }
}

/// The whole output: status line, blank line, body, and a note when the
/// body was cut.
pub fn output(
    status: u16,
    body: &[u8],
    truncated: bool,
    cap: usize,
    content_type: Option<&str>,
) -> String {
    let mut out = status_line(status);
    let text = match body_text(body, truncated, content_type) {
        Ok(t) | Err(t) => t,
    };
    if !text.is_empty() {
        out.push_str("\n\n");
        out.push_str(&text);
    }
    if truncated {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[body truncated at {} KiB]", cap / 1024));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(status_line(200), "HTTP 200 OK");
        assert_eq!(status_line(404), "HTTP 404 Not Found");
        assert_eq!(status_line(299), "HTTP 299");
    }

    #[test]
    fn outputs() {
        assert_eq!(
            output(200, b"hello", false, 1024, None),
            "HTTP 200 OK\n\nhello"
        );
        assert_eq!(output(204, b"", false, 1024, None), "HTTP 204 No Content");
        assert_eq!(
            output(200, "ab\u{e9}".as_bytes(), false, 1024, None),
            "HTTP 200 OK\n\nab\u{e9}"
        );
        // A cut in the middle of a character drops the partial character.
        assert_eq!(
            output(200, &"ab\u{e9}".as_bytes()[..3], true, 2048, None),
            "HTTP 200 OK\n\nab\n[body truncated at 2 KiB]"
        );
        assert_eq!(
            output(200, b"\xff\xd8\xff\x00", false, 1024, Some("image/jpeg")),
            "HTTP 200 OK\n\n[binary body of 4 bytes (image/jpeg); not shown]"
        );
    }
}
