//! Images in tool results, as each wire format carries them to the fake
//! model server: OpenAI-compatible `image_url` parts with `data:` URLs (in a
//! user message after the results, since a `tool` message takes text only),
//! Anthropic `image` blocks inside the `tool_result`; a line of text instead
//! for a model that does not read images, and for an image that is not one.

use serde_json::{Value, json};
use toolhost_content::Content;
use toolhost_providers::{CompletionRequest, Message, ToolCall};
use toolhost_test_support::fake_model::FakeModel as Server;

use crate::support::*;

/// A real 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn png_base64() -> String {
    toolhost_content::encode(PNG)
}

/// A request whose last message is a chart tool's result: text, an image,
/// an audio clip; then (optionally) an image that is not what it says.
fn request_with_image(with_a_liar: bool) -> CompletionRequest {
    let call = ToolCall {
        id: "call_c".into(),
        name: "chart".into(),
        arguments: "{}".into(),
    };
    let mut attachments = vec![
        Content::image(png_base64(), "image/png"),
        Content::audio("UklGRg==", "audio/wav"),
    ];
    if with_a_liar {
        attachments.push(Content::image_bytes(b"<svg/>", "image/png"));
    }
    let mut req = request(vec![calc_tool()]);
    req.messages.push(Message {
        tool_calls: vec![call.clone()],
        ..Message::assistant("")
    });
    req.messages.push(
        Message::tool_result(&call, "A chart of 3 values.", false).with_attachments(attachments),
    );
    req
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

#[tokio::test]
async fn an_openai_compatible_model_that_reads_images_gets_them_as_data_urls_after_the_results() {
    bounded(async {
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk("A rising chart."),
            finish_chunk("stop"),
        ]))])
        .await;
        let provider = openai(&server).with_images(true);
        let (r, _) = run(&provider, &request_with_image(true)).await;
        r.unwrap();
        let body = &server.received()[0].body;
        let m = messages(body);
        // system, user, assistant (call), tool, then the images' user message.
        assert_eq!(m.len(), 5, "{m:#?}");
        assert_eq!(m[3]["role"], "tool");
        let text = m[3]["content"].as_str().unwrap();
        assert!(text.starts_with("A chart of 3 values.\n"), "{text}");
        assert!(
            text.contains(&format!("[image image/png, {} bytes: in the next message]", PNG.len())),
            "{text}"
        );
        assert!(text.contains("[audio audio/wav, 4 bytes]"), "{text}");
        assert!(
            text.contains("[image image/png, 6 bytes] (not shown: the data is not an image of type image/png)"),
            "{text}"
        );
        assert_eq!(m[4]["role"], "user");
        let parts = m[4]["content"].as_array().unwrap();
        assert_eq!(parts[0]["type"], "text");
        assert_eq!(parts.len(), 2, "one image: the liar is not sent: {parts:#?}");
        assert_eq!(
            parts[1],
            json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", png_base64())}})
        );
    })
    .await;
}

#[tokio::test]
async fn a_model_that_does_not_read_images_gets_a_line_for_each() {
    bounded(async {
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk("ok"),
            finish_chunk("stop"),
        ]))])
        .await;
        let (r, _) = run(&openai(&server), &request_with_image(false)).await;
        r.unwrap();
        let body = &server.received()[0].body;
        let m = messages(body);
        assert_eq!(m.len(), 4, "no message of images: {m:#?}");
        let text = m[3]["content"].as_str().unwrap();
        assert!(
            text.contains(&format!(
                "[image image/png, {} bytes] (not shown: this model does not read images)",
                PNG.len()
            )),
            "{text}"
        );
        assert!(!body.to_string().contains("image_url"), "{body}");
        assert!(!body.to_string().contains(&png_base64()), "no data at all");
    })
    .await;
}

#[tokio::test]
async fn an_anthropic_model_gets_the_images_inside_the_tool_result() {
    bounded(async {
        let server =
            Server::replies(vec![sse(anthropic_frames(&anthropic_text_events("ok")))]).await;
        let (r, _) = run(&anthropic(&server), &request_with_image(false)).await;
        r.unwrap();
        let body = &server.received()[0].body;
        let m = messages(body);
        let last = m.last().unwrap();
        assert_eq!(last["role"], "user");
        let result = &last["content"][0];
        assert_eq!(result["type"], "tool_result");
        assert_eq!(result["tool_use_id"], "call_c");
        let blocks = result["content"].as_array().unwrap();
        assert_eq!(
            blocks[0],
            json!({"type": "text", "text": "A chart of 3 values.\n[audio audio/wav, 4 bytes]"})
        );
        assert_eq!(
            blocks[1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png_base64()}})
        );

        // Told that the model does not read images: a line instead.
        let server =
            Server::replies(vec![sse(anthropic_frames(&anthropic_text_events("ok")))]).await;
        let blind = anthropic(&server).with_images(false);
        let (r, _) = run(&blind, &request_with_image(false)).await;
        r.unwrap();
        let body = &server.received()[0].body;
        assert!(!body.to_string().contains("\"image\""), "{body}");
        assert!(
            body.to_string().contains("this model does not read images"),
            "{body}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_users_images_are_parts_of_the_users_message() {
    bounded(async {
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk("a dot"),
            finish_chunk("stop"),
        ]))])
        .await;
        let mut req = request(vec![]);
        req.messages = vec![
            Message::user("What is this?")
                .with_attachments(vec![Content::image(png_base64(), "image/png")]),
        ];
        let (r, _) = run(&openai(&server).with_images(true), &req).await;
        r.unwrap();
        let m = messages(&server.received()[0].body).clone();
        assert_eq!(
            m[1]["content"],
            json!([
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", png_base64())}},
            ])
        );
    })
    .await;
}
