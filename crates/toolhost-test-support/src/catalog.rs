//! A large tool catalog, as a gateway in front of a few business systems
//! offers it: hundreds of look-alike tools (`crm_get_customer`,
//! `billing_list_invoices`, … every system × record × verb) with a few
//! distinct ones among them ([`NEEDLES`]), and questions as users ask them,
//! each with the one tool it needs ([`QUESTIONS`]).
//!
//! The tools are MCP tool definitions (`name`, `description`,
//! `inputSchema`); [`catalog_server`] serves them from a real MCP server
//! (the MCP Python SDK) whose tools answer with their name and arguments.
//!
//! ```
//! let tools = toolhost_test_support::catalog::look_alike_tools(300);
//! assert_eq!(tools.len(), 300);
//! assert!(tools.iter().any(|t| t["name"] == "convert_currency"));
//! ```

use serde_json::{Value, json};

const SYSTEMS: &[(&str, &str)] = &[
    ("crm", "customer relationship (CRM)"),
    ("billing", "billing"),
    ("inventory", "inventory"),
    ("hr", "human resources (HR)"),
    ("support", "customer support"),
    ("analytics", "analytics"),
    ("marketing", "marketing"),
    ("shipping", "shipping"),
    ("warehouse", "warehouse"),
    ("finance", "finance"),
];

const RECORDS: &[(&str, &str)] = &[
    ("customer", "customers"),
    ("invoice", "invoices"),
    ("order", "orders"),
    ("ticket", "tickets"),
    ("report", "reports"),
    ("campaign", "campaigns"),
    ("shipment", "shipments"),
    ("employee", "employees"),
    ("product", "products"),
    ("payment", "payments"),
];

const VERBS: &[(&str, &str)] = &[
    (
        "get",
        "Gets one {record} of the {system} system by its id, with all its fields.",
    ),
    (
        "list",
        "Lists the {records} of the {system} system, newest first, optionally filtered.",
    ),
    (
        "create",
        "Creates a new {record} in the {system} system and returns its id.",
    ),
    (
        "update",
        "Updates (changes) fields of an existing {record} in the {system} system.",
    ),
    (
        "delete",
        "Deletes (removes) a {record} from the {system} system for good.",
    ),
];

/// A tool: its name, description, and parameters as (name, description).
pub type Needle = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The distinct tools hidden among the look-alikes.
pub const NEEDLES: &[Needle] = &[
    (
        "convert_currency",
        "Converts an amount of money from one currency to another (e.g. US dollars to euros) at today's exchange rate.",
        &[
            ("amount", "How much money"),
            ("from", "ISO currency code, e.g. USD"),
            ("to", "ISO currency code, e.g. EUR"),
        ],
    ),
    (
        "get_weather_forecast",
        "The weather forecast for a city: temperature, rain and wind for the next days.",
        &[("city", "City name"), ("days", "How many days ahead")],
    ),
    (
        "translate_text",
        "Translates text into another language (French, German, Spanish, Japanese, ...).",
        &[
            ("text", "The text to translate"),
            ("target_language", "Language to translate into"),
        ],
    ),
    (
        "calculate_mortgage",
        "Monthly payment of a mortgage or home loan, from the principal, the interest rate and the term in years.",
        &[
            ("principal", "Loan amount"),
            ("rate", "Yearly interest rate in percent"),
            ("years", "Term of the loan"),
        ],
    ),
    (
        "lookup_timezone",
        "The time zone and the current local time of a city or place.",
        &[("place", "City or place name")],
    ),
    (
        "send_sms",
        "Sends a text message (SMS) to a phone number.",
        &[
            ("phone_number", "Recipient's phone number"),
            ("message", "Text of the message"),
        ],
    ),
    (
        "resize_image",
        "Resizes (scales) an image or photo to a new width and height in pixels.",
        &[
            ("url", "Where the image is"),
            ("width", "Width in pixels"),
            ("height", "Height in pixels"),
        ],
    ),
    (
        "search_flights",
        "Searches flights between two airports on a date, with prices and airlines.",
        &[
            ("origin", "Departure airport code"),
            ("destination", "Arrival airport code"),
            ("date", "Travel date"),
        ],
    ),
    (
        "get_stock_price",
        "The latest share price of a company's stock by its ticker symbol on the stock exchange.",
        &[("symbol", "Ticker symbol, e.g. AAPL")],
    ),
    (
        "generate_qr_code",
        "Generates a QR code image that encodes a link or text.",
        &[("data", "The link or text to encode")],
    ),
    (
        "count_words",
        "Counts the words, sentences and characters of a text.",
        &[("text", "The text to count")],
    ),
    (
        "ping_host",
        "Checks whether a server or website is up and how fast it answers (network latency).",
        &[("host", "Host name or IP address")],
    ),
];

/// Questions as users ask them, each with the tool that answers it: the
/// needles, and look-alikes named only by what they do.
pub const QUESTIONS: &[(&str, &str)] = &[
    ("How much is 250 US dollars in euros?", "convert_currency"),
    ("convert 100 GBP to JPY", "convert_currency"),
    ("Will it rain in Lyon this weekend?", "get_weather_forecast"),
    (
        "what's the weather going to be like in Oslo tomorrow",
        "get_weather_forecast",
    ),
    ("Translate 'good morning' into Japanese", "translate_text"),
    ("How do you say thank you in German?", "translate_text"),
    (
        "What would my monthly payment be on a 300k home loan at 4% over 30 years?",
        "calculate_mortgage",
    ),
    ("What time is it in Tokyo right now?", "lookup_timezone"),
    ("Text +15551234567 that I'm running late", "send_sms"),
    ("Make this photo 800 pixels wide", "resize_image"),
    (
        "Find me a flight from JFK to LAX on March 3",
        "search_flights",
    ),
    ("What's Apple's share price today?", "get_stock_price"),
    ("Make a QR code for https://example.com", "generate_qr_code"),
    ("How many words are in this paragraph?", "count_words"),
    ("Is example.org up? How fast does it respond?", "ping_host"),
    ("Show me invoice 4711 from billing", "billing_get_invoice"),
    ("List all open support tickets", "support_list_tickets"),
    (
        "Remove employee 17 from the HR system",
        "hr_delete_employee",
    ),
    (
        "Create a new marketing campaign for the spring sale",
        "marketing_create_campaign",
    ),
    (
        "Change the address of shipment 88 in shipping",
        "shipping_update_shipment",
    ),
    (
        "list the products in the warehouse",
        "warehouse_list_products",
    ),
    ("Add a customer named Ada to the CRM", "crm_create_customer"),
];

/// An MCP tool definition.
fn tool(name: &str, description: &str, params: &[(&str, &str)]) -> Value {
    let properties: serde_json::Map<String, Value> = params
        .iter()
        .map(|(n, d)| ((*n).to_owned(), json!({"type": "string", "description": d})))
        .collect();
    let required: Vec<&str> = params.iter().map(|(n, _)| *n).collect();
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// `n` tools (at least the needles): the needles spread among look-alikes,
/// in a fixed order.
pub fn look_alike_tools(n: usize) -> Vec<Value> {
    let mut alike = Vec::new();
    for (system, system_text) in SYSTEMS {
        for (record, records) in RECORDS {
            for (verb, template) in VERBS {
                let name = match *verb {
                    "list" => format!("{system}_list_{records}"),
                    _ => format!("{system}_{verb}_{record}"),
                };
                let description = template
                    .replace("{records}", records)
                    .replace("{record}", record)
                    .replace("{system}", system_text);
                let params: &[(&str, &str)] = match *verb {
                    "list" => &[
                        ("filter", "Only records that match"),
                        ("limit", "At most this many"),
                    ],
                    "create" => &[("fields", "The new record's fields")],
                    "update" => &[("id", "Which record"), ("fields", "The fields to change")],
                    _ => &[("id", "Which record")],
                };
                alike.push(tool(&name, &description, params));
            }
        }
    }
    // The look-alikes the questions need first, so that every size keeps
    // them; then spread out in a fixed order.
    let needed = |t: &Value| QUESTIONS.iter().any(|(_, a)| t["name"] == *a);
    let (first, rest): (Vec<Value>, Vec<Value>) = alike.into_iter().partition(needed);
    let all: Vec<Value> = first.into_iter().chain(rest).collect();
    let needles: Vec<Value> = NEEDLES.iter().map(|(n, d, p)| tool(n, d, p)).collect();
    let keep = n.saturating_sub(needles.len());
    let total = all.len();
    let mut out: Vec<Value> = all.into_iter().cycle().take(keep).collect();
    // Cycled past the look-alikes: number the repeats so names stay unique.
    for (i, t) in out.iter_mut().enumerate().skip(total) {
        let name = format!("{}_{i}", t["name"].as_str().unwrap_or("tool"));
        t["name"] = json!(name);
    }
    let len = out.len().max(1);
    let mut order: Vec<(usize, Value)> = out.into_iter().enumerate().collect();
    order.sort_by_key(|(i, _)| (i * 7919) % len);
    let mut out: Vec<Value> = order.into_iter().map(|(_, t)| t).collect();
    // The needles go in at even steps, so none sits at the start or the end.
    let step = (out.len() / needles.len().max(1)).max(1);
    for (k, needle) in needles.into_iter().enumerate() {
        let at = (k * step + step / 2).min(out.len());
        out.insert(at, needle);
    }
    out
}

/// A command line that starts an MCP server (stdio, the MCP Python SDK's
/// low-level server) offering `tools`; each call answers
/// `called NAME with ARGS`. `python` must have the `mcp` package (the one
/// `cargo xtask test` installs: `TOOLHOST_TEST_PYTHON`). The catalog is
/// written into `dir`.
pub fn catalog_server(
    python: &std::path::Path,
    dir: &std::path::Path,
    tools: &[Value],
) -> Vec<String> {
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(tools).unwrap()).unwrap();
    let script = dir.join("catalog_server.py");
    std::fs::write(&script, CATALOG_SERVER).unwrap();
    vec![
        python.display().to_string(),
        script.display().to_string(),
        catalog.display().to_string(),
    ]
}

const CATALOG_SERVER: &str = r#"
import json, sys
import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

with open(sys.argv[1]) as f:
    CATALOG = json.load(f)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
        for t in CATALOG
    ])


async def call_tool(ctx, params):
    args = json.dumps(params.arguments or {}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(text=f"called {params.name} with {args}")])


server = Server("catalog", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


anyio.run(main)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_has_unique_names_and_every_answer_in_it() {
        for n in [12, 300, 1000] {
            let tools = look_alike_tools(n);
            assert_eq!(tools.len(), n);
            let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "unique names at {n}");
        }
        let tools = look_alike_tools(300);
        for (question, answer) in QUESTIONS {
            assert!(
                tools.iter().any(|t| t["name"] == *answer),
                "{question}: {answer}"
            );
        }
        assert!(QUESTIONS.len() >= 20);
    }
}
