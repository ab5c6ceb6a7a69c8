//! Target: the generated views (`M::view`, docs/runtime.md "Views"). The first byte picks one
//! of the message types of `cornflakes_fuzz::MESSAGES`; the rest is viewed and every field read
//! through the view; whenever `deserialize` accepts the bytes the view reads the same values
//! (the oracle in `cornflakes_fuzz::view!`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((m, bytes)) = cornflakes_fuzz::split(data) {
        (m.view)(bytes);
    }
});
