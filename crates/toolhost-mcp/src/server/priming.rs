//! What each revision's clients can read on an SSE stream: the priming
//! event (an `id` and a `retry` with empty `data`, SEP-1699) exists from
//! 2025-11-25 on. rmcp sends it in front of every SSE stream whenever
//! `sse_retry` is set; older clients read each event's data as a JSON-RPC
//! message and fail on the empty one (`JSON.parse("")` in the TypeScript
//! SDK before 1.23), so the reference SDKs send it only to sessions at
//! 2025-11-25 or later, and so does this layer: for a request of an older
//! revision, the first event of an SSE response is dropped when it is a
//! priming event; everything else passes as it is.
//!
//! A request's revision is its `MCP-Protocol-Version` header (2025-06-18
//! on, every request after `initialize` carries it); without one, the
//! revision an `initialize` asks for (its body is read when its
//! `Content-Length` is within the request bound), else 2025-03-26, as the
//! transport says a server should assume.

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use http::header;
use rmcp::model::ProtocolVersion;

/// The first revision that defines the priming event.
const PRIMED: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The longest first event looked at; a longer one passes as it is (a
/// priming event is a few dozen bytes).
const MAX_FIRST_EVENT: usize = 4096;

/// The middleware: see the module docs. `max_body` bounds the body read
/// to see the revision an `initialize` asks for.
pub(crate) async fn by_revision(max_body: usize, request: Request, next: Next) -> Response {
    let (primed, request) = primed(request, max_body).await;
    let response = next.run(request).await;
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if primed || !sse {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, without_priming(body))
}

/// Whether the request's revision reads priming events, and the request
/// (rebuilt when its body was read).
async fn primed(request: Request, max_body: usize) -> (bool, Request) {
    if let Some(version) = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
    {
        return (version >= PRIMED.as_str(), request);
    }
    // Only a POST's body says more, read when its length is known and
    // within the bound (anything else is rmcp's to refuse, and counts as
    // older: a priming event left out harms no client).
    let length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if request.method() != http::Method::POST || length.is_none_or(|l| l > max_body) {
        return (false, request);
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body).await else {
        // Too large (or broken): rmcp refuses it the same way.
        return (false, Request::from_parts(parts, Body::empty()));
    };
    // Only the two fields it needs: the rest of the message (a call's
    // arguments) is skipped, not built into a `Value`.
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    let asked = serde_json::from_slice::<Message>(&bytes)
        .ok()
        .filter(|m| m.method.as_deref() == Some("initialize"))
        .and_then(|m| m.params?.protocol_version);
    let primed = asked.is_some_and(|v| v.as_str() >= PRIMED.as_str());
    (primed, Request::from_parts(parts, Body::from(bytes)))
}

/// Whether `event` (one SSE event, without its blank line) carries no data:
/// only `id`, `retry`, `event` fields, comments and empty `data`.
fn is_priming(event: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(event) else {
        return false;
    };
    text.lines().all(|line| {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        match field {
            "" | "id" | "retry" | "event" => true,
            "data" => value.trim().is_empty(),
            _ => false,
        }
    })
}

/// Where the first event of `buffer` ends (the index after its blank
/// line), if it is all there.
fn first_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// `body` without its first event when that is a priming event.
fn without_priming(body: Body) -> Body {
    struct State {
        stream: axum::body::BodyDataStream,
        /// The start of the stream, while the first event is not whole.
        looking: Option<Vec<u8>>,
    }
    let state = State {
        stream: body.into_data_stream(),
        looking: Some(Vec::new()),
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        let Some(mut buffer) = state.looking.take() else {
            let chunk = state.stream.next().await?;
            return Some((chunk, state));
        };
        loop {
            match state.stream.next().await {
                None => {
                    // The stream ended within its first event.
                    return (!buffer.is_empty() && !is_priming(&buffer))
                        .then(|| (Ok(Bytes::from(buffer)), state));
                }
                Some(Err(e)) => return Some((Err(e), state)),
                Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
            }
            if let Some((event_end, next)) = first_event_end(&buffer) {
                let rest = if is_priming(&buffer[..event_end]) {
                    buffer.split_off(next)
                } else {
                    buffer
                };
                if rest.is_empty() {
                    // Only the priming event so far: pass the rest as it comes.
                    let chunk = state.stream.next().await?;
                    return Some((chunk, state));
                }
                return Some((Ok(Bytes::from(rest)), state));
            }
            if buffer.len() > MAX_FIRST_EVENT {
                return Some((Ok(Bytes::from(buffer)), state));
            }
        }
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn text(body: Body) -> String {
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn chunked(parts: &[&'static str]) -> Body {
        let chunks: Vec<Result<Bytes, std::io::Error>> = parts
            .iter()
            .map(|p| Ok(Bytes::from_static(p.as_bytes())))
            .collect();
        Body::from_stream(futures::stream::iter(chunks))
    }

    #[tokio::test]
    async fn a_priming_event_is_dropped_however_the_stream_is_cut() {
        let message = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nid: 1\n\n";
        for parts in [
            vec!["data: \nid: 0\nretry: 3000\n\n", message],
            vec!["data:", " \nid: 0\nre", "try: 3000\n", "\n", message],
            vec!["id: 0\r\nretry: 3000\r\ndata: \r\n\r\ndata: {}\r\n\r\n"],
        ] {
            let out = text(without_priming(chunked(&parts))).await;
            assert!(!out.contains("retry"), "{out:?}");
            assert!(out.starts_with("data: {"), "{out:?}");
        }
    }

    #[tokio::test]
    async fn a_first_event_with_data_is_kept() {
        let stream = "data: {\"a\":1}\nid: 0\nretry: 3000\n\ndata: {}\n\n";
        let out = text(without_priming(chunked(&[stream]))).await;
        assert_eq!(out, stream);
        assert!(!is_priming(b"data: {}"));
        assert!(is_priming(b": comment\ndata:\nid: 7"));
    }
}
