//! Target 1: the runtime decoder through generated code. The first byte picks one of the
//! message types of schemas/kv.proto, schemas/echo.proto and the rich test schemas
//! (`cornflakes_fuzz::MESSAGES`); the rest is decoded, every field read, re-encoded, decoded
//! again, and must be the same value (the round-trip oracle in `cornflakes_fuzz::roundtrip!`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((m, bytes)) = cornflakes_fuzz::split(data) {
        (m.roundtrip)(bytes);
    }
});
