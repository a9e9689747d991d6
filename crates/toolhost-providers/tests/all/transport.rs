//! Retries and failures of the shared transport, through both providers:
//! statuses, `Retry-After`, refused connections, broken and invalid
//! streams, cancellation and the idle timeout.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use toolhost_providers::{
    Delta, Provider, ProviderError, openai::OpenAiCompatible, transport::RetryPolicy,
};
use toolhost_test_support::fake_model::{End, FakeModel as Server, Reply};

use crate::support::*;

#[tokio::test]
async fn retries_after_500_then_succeeds() {
    bounded(async {
        let chunks = vec![text_chunk("recovered"), finish_chunk("stop")];
        let server = Server::replies(vec![
            status_reply(500, r#"{"error":{"message":"boom"}}"#),
            status_reply(503, "unavailable"),
            sse(openai_frames(&chunks)),
        ])
        .await;
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        assert_eq!(r.unwrap().message.content, "recovered");
        assert_eq!(server.received().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn retries_after_429_honouring_retry_after() {
    bounded(async {
        let chunks = vec![text_chunk("ok"), finish_chunk("stop")];
        let server = Server::replies(vec![
            Reply::Full {
                status: 429,
                headers: vec![("retry-after", "1".into())],
                body: r#"{"error":{"type":"rate_limit_error"}}"#.into(),
            },
            sse(openai_frames(&chunks)),
        ])
        .await;
        let started = Instant::now();
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        assert_eq!(r.unwrap().message.content, "ok");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(950), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        assert_eq!(server.received().len(), 2);
    })
    .await;
}

#[tokio::test]
async fn status_400_fails_at_once_with_status_and_body() {
    bounded(async {
        let body = r#"{"error":{"message":"Invalid schema for function 'calc'","type":"invalid_request_error"}}"#;
        let server = Server::replies(vec![status_reply(400, body), status_reply(400, body)]).await;
        let (r, _) = run(&openai(&server), &request(vec![calc_tool()])).await;
        let e = r.unwrap_err();
        match &e {
            ProviderError::Status {
                provider,
                status,
                body: got,
            } => {
                assert_eq!(provider, "openai");
                assert_eq!(*status, 400);
                assert_eq!(got, body);
            }
            other => panic!("{other:?}"),
        }
        let msg = e.to_string();
        assert!(msg.contains("400") && msg.contains("Invalid schema"), "{msg}");
        assert_eq!(server.received().len(), 1, "no retry on 400");
        // 401 and 404 do not retry either.
        for status in [401, 404] {
            let server = Server::replies(vec![status_reply(status, "no"), status_reply(200, "{}")]).await;
            let (r, _) = run(&anthropic(&server), &request(vec![])).await;
            assert!(matches!(r, Err(ProviderError::Status { status: s, .. }) if s == status));
            assert_eq!(server.received().len(), 1);
        }
    })
    .await;
}

#[tokio::test]
async fn gives_up_after_max_attempts_with_an_excerpt() {
    bounded(async {
        let long = "x".repeat(2000);
        let replies = (0..4).map(|_| status_reply(502, &long)).collect();
        let server = Server::replies(replies).await;
        let (r, _) = run(&anthropic(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::Status {
                provider,
                status,
                body,
            } => {
                assert_eq!(provider, "anthropic");
                assert_eq!(status, 502);
                assert!(body.contains("gave up after 4 attempts"), "{body}");
                assert!(body.chars().filter(|c| *c == 'x').count() <= 500);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(server.received().len(), 4);
    })
    .await;
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    bounded(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let provider =
            OpenAiCompatible::new(format!("http://{addr}/v1"), "m").with_retry(RetryPolicy {
                max_attempts: 2,
                ..fast_policy()
            });
        let (r, _) = run(&provider, &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::Connect { provider, message } => {
                assert_eq!(provider, "openai");
                assert!(message.contains("gave up after 2 attempts"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn stream_cut_mid_way_is_invalid_with_partial_text() {
    bounded(async {
        // No finish_reason and no [DONE]: the server just closes the body.
        let frames: Vec<String> = [text_chunk("Half "), text_chunk("an answer")]
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect();
        let server = Server::replies(vec![sse(frames)]).await;
        let (r, deltas) = run(&openai(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::InvalidResponse { partial_text, .. } => {
                assert_eq!(partial_text, "Half an answer");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(texts(&deltas), ["Half ", "an answer"]);
        assert_eq!(server.received().len(), 1, "a broken stream is not retried");
    })
    .await;
}

#[tokio::test]
async fn invalid_json_in_a_chunk_names_the_chunk() {
    bounded(async {
        let frames = vec![
            format!("data: {}\n\n", text_chunk("Hi")),
            "data: {\"choices\": [{\"delta\": {\"content\": \"oops\"\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ];
        let server = Server::replies(vec![sse(frames)]).await;
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::InvalidResponse {
                message,
                partial_text,
                ..
            } => {
                assert!(message.contains("chunk 2"), "{message}");
                assert!(message.contains("oops"), "{message}");
                assert_eq!(partial_text, "Hi");
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn cancellation_during_streaming_returns_quickly() {
    bounded(async {
        let server = Server::replies(vec![Reply::Stream {
            frames: vec![format!("data: {}\n\n", text_chunk("Start"))],
            gap: Duration::ZERO,
            end: End::Hang,
        }])
        .await;
        let provider = openai(&server);
        let req = request(vec![]);
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let sink = move |d: Delta| {
            if matches!(d, Delta::Text(_)) {
                c2.cancel();
            }
        };
        let started = Instant::now();
        let r = provider.complete(&req, &sink, &cancel).await;
        assert!(matches!(r, Err(ProviderError::Cancelled)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        // The connection was dropped: the server's body stream goes away.
        let deadline = Instant::now() + Duration::from_secs(3);
        while !server.stream_dropped() {
            assert!(Instant::now() < deadline, "the server still streams");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // Cancelling while waiting to retry returns at once too.
        let server = Server::replies(vec![Reply::Full {
            status: 429,
            headers: vec![("retry-after", "30".into())],
            body: String::new(),
        }])
        .await;
        let provider = openai(&server).with_retry(RetryPolicy {
            max_backoff: Duration::from_secs(60),
            ..fast_policy()
        });
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c2.cancel();
        });
        let started = Instant::now();
        let r = provider.complete(&req, &|_| {}, &cancel).await;
        assert!(matches!(r, Err(ProviderError::Cancelled)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    })
    .await;
}

#[tokio::test]
async fn idle_timeout_on_an_endless_silent_stream() {
    bounded(async {
        let server = Server::replies(vec![Reply::Stream {
            frames: vec![": keep quiet\n\n".to_owned()],
            gap: Duration::ZERO,
            end: End::Hang,
        }])
        .await;
        let provider = anthropic(&server).with_retry(RetryPolicy {
            idle_timeout: Duration::from_millis(300),
            ..fast_policy()
        });
        let started = Instant::now();
        let (r, _) = run(&provider, &request(vec![])).await;
        assert!(matches!(r, Err(ProviderError::Timeout { .. })), "{r:?}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(3),
            "{took:?}"
        );
    })
    .await;
}
