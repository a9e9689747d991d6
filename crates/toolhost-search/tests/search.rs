//! The ranking on a large catalog: every question users ask finds the tool
//! that answers it in the first five, among 300 and among 1,000 look-alike
//! tools (`toolhost_test_support::catalog`).

use serde_json::Value;
use toolhost_search::{ToolIndex, ToolText};
use toolhost_test_support::catalog::{QUESTIONS, look_alike_tools};

fn names_found(tools: &[Value], index: &ToolIndex, question: &str) -> Vec<String> {
    index
        .search(question, 5)
        .into_iter()
        .map(|h| tools[h.position]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_question_finds_its_tool_in_the_top_five_of_a_large_catalog() {
    for n in [300, 1000] {
        let tools = look_alike_tools(n);
        let index = ToolIndex::build(tools.iter().map(|t| {
            ToolText::new(
                t["name"].as_str().unwrap(),
                t["description"].as_str().unwrap(),
                &t["inputSchema"],
            )
        }));
        let mut misses = Vec::new();
        for (question, answer) in QUESTIONS {
            let found = names_found(&tools, &index, question);
            if !found.iter().any(|f| f == answer) {
                misses.push(format!("{question:?} wants {answer}, found {found:?}"));
            }
        }
        assert!(misses.is_empty(), "{n} tools:\n{}", misses.join("\n"));
    }
}

/// The first tool matters most: a small model calls the first one listed.
#[test]
fn a_question_about_one_record_finds_the_right_verb_first() {
    let tools = look_alike_tools(300);
    let index = ToolIndex::build(tools.iter().map(|t| {
        ToolText::new(
            t["name"].as_str().unwrap(),
            t["description"].as_str().unwrap(),
            &t["inputSchema"],
        )
    }));
    for (question, answer) in [
        (
            "Show me invoice 4711 from the billing system",
            "billing_get_invoice",
        ),
        (
            "Remove employee 17 from the HR system",
            "hr_delete_employee",
        ),
        ("Add a customer named Ada to the CRM", "crm_create_customer"),
        (
            "Change the address of shipment 88 in shipping",
            "shipping_update_shipment",
        ),
    ] {
        let first = names_found(&tools, &index, question);
        assert_eq!(
            first.first().map(String::as_str),
            Some(answer),
            "{question}: {first:?}"
        );
    }
}

#[test]
fn the_same_query_over_the_same_catalog_gives_the_same_answer() {
    let tools = look_alike_tools(300);
    let build = || {
        ToolIndex::build(tools.iter().map(|t| {
            ToolText::new(
                t["name"].as_str().unwrap(),
                t["description"].as_str().unwrap(),
                &t["inputSchema"],
            )
        }))
    };
    let (a, b) = (build(), build());
    for (question, _) in QUESTIONS {
        assert_eq!(a.search(question, 10), b.search(question, 10), "{question}");
    }
}
