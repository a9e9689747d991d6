//! The prompt-based tool-call parser: see `toolhost_agent::fuzzing::prompt_tool_calls`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| toolhost_agent::fuzzing::prompt_tool_calls(data));
