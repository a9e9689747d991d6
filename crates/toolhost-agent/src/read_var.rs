//! The built-in `read_var` tool as the model is offered it: its spec, which
//! also tells the model how to pass a stored result on
//! ([`var_ref`](crate::var_ref)). The store answers it
//! ([`VarStore::call_read_var`](crate::VarStore::call_read_var)); the loop
//! offers it while the store holds something, unless the executor serves it
//! ([`ToolExecutor::serves_read_var`](crate::ToolExecutor::serves_read_var)).

use serde_json::json;

use crate::tools::ToolSpec;
use crate::vars::READ_VAR;

/// The spec of the built-in `read_var` tool.
pub fn read_var_spec(max_page: usize) -> ToolSpec {
    ToolSpec {
        name: READ_VAR.to_owned(),
        description: format!(
            "Read a stored tool result by its variable name (results longer than the \
             size limit reach you truncated, with the variable named in a note). \
             Returns at most {max_page} bytes from `offset`. {}",
            crate::var_ref::PROMPT
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The variable, e.g. result_1."},
                "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at (default 0)."},
                "length": {"type": "integer", "minimum": 1, "description": "Bytes to read (default and maximum: the page size)."}
            },
            "required": ["name"],
            "additionalProperties": false
        })
        .into(),
        read_only: true,
    }
}
