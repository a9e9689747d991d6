//! The server-sent-events parsing of both providers: see `toolhost_agent::fuzzing::sse_stream`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| toolhost_agent::fuzzing::sse_stream(data));
