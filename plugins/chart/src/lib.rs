//! toolhost plugin `chart`: draws a bar chart of numbers and returns it as
//! a PNG image, a content block of contract `toolhost:plugin@0.3.0`. An MCP
//! client receives the image as an `image` block; the agent loop shows it
//! to a model that reads images.

mod draw;

use toolhost_sdk::prelude::*;

/// The most values one chart shows.
const MAX_VALUES: usize = 64;

/// Draws a bar chart of a list of numbers and returns it as a PNG image, for
/// the user to see. Use it when the user asks to chart, plot or graph
/// numbers.
#[derive(Deserialize, JsonSchema)]
struct BarChart {
    /// The numbers, one bar each, in order.
    #[schemars(length(min = 1, max = 64))]
    values: Vec<f64>,
    /// What the chart shows, for its description (optional).
    #[serde(default)]
    title: Option<String>,
    /// The image's width in pixels (default 320).
    #[serde(default)]
    #[schemars(range(min = 32, max = 800))]
    width: Option<u32>,
    /// The image's height in pixels (default 200).
    #[serde(default)]
    #[schemars(range(min = 32, max = 600))]
    height: Option<u32>,
}

fn bar_chart(_cx: &Context, args: BarChart) -> Result<Output, ToolError> {
    let (width, height) = (args.width.unwrap_or(320), args.height.unwrap_or(200));
    if args.values.is_empty() || args.values.len() > MAX_VALUES {
        return Err(ToolError::invalid_arguments(format!(
            "give between 1 and {MAX_VALUES} values"
        )));
    }
    if !(32..=800).contains(&width) || !(32..=600).contains(&height) {
        return Err(ToolError::invalid_arguments(
            "the width must be 32 to 800 pixels, the height 32 to 600",
        ));
    }
    let png = draw::bar_chart(&args.values, width, height)
        .png()
        .map_err(ToolError::failed)?;
    let (min, max) = args
        .values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let what = args
        .title
        .as_deref()
        .map(|t| format!(" ({})", t.trim()))
        .unwrap_or_default();
    let text = format!(
        "A bar chart of {} values{what}, from {min} to {max}: a {width}×{height} PNG image.",
        args.values.len()
    );
    Ok(Output::new(text)
        .with_details(json!({ "width": width, "height": height, "bytes": png.len() }))
        .with_image(png, "image/png"))
}

toolhost_sdk::plugin! {
    tools: [
        bar_chart(BarChart) read_only idempotent,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_is_valid() {
        plugin().validate().unwrap();
        assert_eq!(plugin().specs()[0].name, "bar_chart");
    }

    #[test]
    fn a_chart_is_its_description_then_a_png_image() {
        let out = plugin()
            .call(
                &Context::default(),
                "bar_chart",
                r#"{"values": [3, 1, 4, 1, 5], "title": "digits of pi", "width": 100, "height": 60}"#,
            )
            .unwrap();
        assert_eq!(
            out.output(),
            "A bar chart of 5 values (digits of pi), from 1 to 5: a 100×60 PNG image."
        );
        let blocks = out.content();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].as_text(), Some(out.output()));
        assert_eq!(blocks[1].kind(), "image");
        assert_eq!(blocks[1].mime_type(), Some("image/png"));
        let png = blocks[1].bytes().unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert_eq!(out.details_json().unwrap()["bytes"], png.len());
    }

    #[test]
    fn too_many_values_are_refused() {
        let values = vec!["1"; 65].join(",");
        let err = plugin()
            .call(
                &Context::default(),
                "bar_chart",
                &format!(r#"{{"values": [{values}]}}"#),
            )
            .unwrap_err();
        assert!(err.is_invalid_arguments(), "{err}");
    }
}
