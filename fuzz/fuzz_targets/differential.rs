//! Target 2b: generated and dynamic decoders on the same bytes. They must agree on acceptance,
//! and on the value: both re-encode it canonically, to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((m, bytes)) = cornflakes_fuzz::split(data) else {
        return;
    };
    let generated = (m.roundtrip)(bytes);
    let dynamic = cornflakes_fuzz::dynamic(m.name, bytes);
    match (generated, dynamic) {
        (None, Err(_)) => {}
        (Some(g), Ok(d)) => assert_eq!(
            g, d.bytes,
            "{}: generated and dynamic codecs decode different values",
            m.name
        ),
        (Some(_), Err(e)) => panic!("{}: generated accepts, dynamic rejects: {e}", m.name),
        (None, Ok(d)) => panic!(
            "{}: dynamic accepts ({:?}), generated rejects",
            m.name, d.json
        ),
    }
});
