//! Content from a tool source (what an MCP server's result becomes in the
//! gateway): its blocks and its `_meta` reach the caller as the source sent
//! them, within the source's `max-output-bytes`, and are refused past it.

use std::sync::Arc;

use serde_json::json;
use toolhost_runtime::content::{Content, ContentError, JsonObject};
use toolhost_runtime::{
    CallContext, CallError, PluginSettings, Runtime, ToolSource, error::SandboxFault,
    source::SourceCall, source::SourceError, source::SourceFuture, source::SourceOutcome,
    source::SourceState, source::SourceStatus, source::SourceTool,
};

/// A source whose one tool, `blocks`, returns a text, an image of
/// `image_bytes` bytes and a resource link, with a `_meta` of about
/// `meta_bytes`.
struct Blocks {
    image_bytes: usize,
    meta_bytes: usize,
    changes: tokio::sync::watch::Sender<u64>,
}

impl Blocks {
    fn content(&self) -> Vec<Content> {
        let mut link: Content = serde_json::from_value(json!({
            "type": "resource_link", "uri": "file:///a.txt", "name": "a.txt",
            "annotations": {"audience": ["user"], "priority": 0.5},
            "_meta": {"example.com/k": [1, 2]},
        }))
        .unwrap();
        if let Content::ResourceLink(l) = &mut link {
            l.size = Some(3);
        }
        vec![
            Content::text("Here:"),
            Content::image_bytes(&vec![7; self.image_bytes], "image/png"),
            link,
        ]
    }

    fn meta(&self) -> JsonObject {
        let mut meta = JsonObject::new();
        meta.insert(
            "example.com/trace".into(),
            json!("x".repeat(self.meta_bytes)),
        );
        meta
    }
}

impl ToolSource for Blocks {
    fn name(&self) -> &str {
        "blocks"
    }
    fn status(&self) -> SourceStatus {
        SourceStatus::new("native", "in process", SourceState::Ready)
    }
    fn tools(&self) -> Arc<[SourceTool]> {
        Arc::new([SourceTool::new(
            "blocks",
            "Returns blocks.",
            json!({"type": "object"}),
        )])
    }
    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
    fn call<'a>(
        &'a self,
        _: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
        Box::pin(async move {
            Ok(SourceOutcome::Ok {
                output: "Here:".into(),
                details: None,
                structured: Some(json!({"n": 3})),
                content: self.content(),
                meta: Some(self.meta()),
            })
        })
    }
}

/// A runtime with only the `Blocks` source, whose results may be
/// `max_output_bytes` large.
async fn runtime(source: Blocks, max_output_bytes: usize) -> Runtime {
    let mut settings = PluginSettings::default();
    settings.limits.max_output_bytes = Some(max_output_bytes);
    Runtime::builder()
        .cache_dir(None)
        .plugin_settings("blocks", settings)
        .source(Arc::new(source))
        .build()
        .await
        .unwrap()
}

fn blocks(image_bytes: usize, meta_bytes: usize) -> Blocks {
    Blocks {
        image_bytes,
        meta_bytes,
        changes: tokio::sync::watch::channel(0).0,
    }
}

async fn call(rt: &Runtime) -> Result<toolhost_runtime::ToolResult, CallError> {
    rt.call("blocks__blocks", json!({}), CallContext::new())
        .await
}

#[tokio::test]
async fn a_sources_blocks_and_meta_reach_the_caller_as_they_were_sent() {
    let source = blocks(100, 10);
    let (content, meta) = (source.content(), source.meta());
    let rt = runtime(source, 4096).await;
    let r = call(&rt).await.unwrap();
    assert_eq!(r.content, content);
    assert_eq!(r.meta, Some(meta));
    assert_eq!(r.structured, Some(json!({"n": 3})));
    assert_eq!(r.output, "Here:");
}

#[tokio::test]
async fn a_sources_block_or_meta_past_its_output_limit_is_refused() {
    // The image's base64 alone is over 1000 bytes.
    let rt = runtime(blocks(900, 10), 1000).await;
    let err = call(&rt).await.unwrap_err();
    match &err {
        CallError::Sandbox {
            fault:
                SandboxFault::Content(ContentError::BlockTooLarge {
                    index: 1,
                    kind: "image",
                    limit: 1000,
                    ..
                }),
            ..
        } => {}
        other => panic!("{other:?}"),
    }

    // Each block fits, all of them together do not.
    let rt = runtime(blocks(650, 10), 1000).await;
    let err = call(&rt).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CallError::Sandbox {
                fault: SandboxFault::Content(ContentError::TooLarge { limit: 1000, .. }),
                ..
            }
        ),
        "{err:?}"
    );

    let rt = runtime(blocks(10, 2000), 1000).await;
    let err = call(&rt).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CallError::Sandbox {
                fault: SandboxFault::OutputTooLarge { what: "_meta", .. },
                ..
            }
        ),
        "{err:?}"
    );
}
