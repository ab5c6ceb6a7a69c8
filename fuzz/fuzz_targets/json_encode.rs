//! Target 4b: the JSON side of `cornflakes encode`. The first byte picks a message of the fuzz
//! schema; the rest is JSON text. Whatever `from_json` accepts encodes to an object the dynamic
//! decoder reads back, and its JSON form encodes to the same bytes again; whatever it refuses
//! gets an error naming where (the field path) and what.
#![no_main]

use cornflakes::{Arena, CornflakesObj};
use cornflakes_codegen::dynamic::DynMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((m, text)) = cornflakes_fuzz::split(data) else {
        return;
    };
    let json: serde_json::Value = match serde_json::from_slice(text) {
        Ok(j) => j,
        Err(e) => {
            assert!(e.line() > 0 || e.is_eof());
            return;
        }
    };
    let schema = cornflakes_fuzz::schema();
    let id = schema.message(m.name).expect("in the schema");
    let arena = Arena::new();
    let msg = match DynMessage::from_json(schema, id, &json, &arena) {
        Ok(msg) => msg,
        Err(e) => {
            // The position of a JSON error is the field path from the message down.
            let root = &schema.messages[id].name;
            assert!(
                e.path.starts_with(root.as_str()) && !e.message.is_empty(),
                "an error that does not say where: {e}"
            );
            return;
        }
    };
    let bytes = msg.serialize_to_vec();
    assert_eq!(msg.sizes().total(), bytes.len());
    // The same through pinned memory: long values go to the ZERO-COPY AREA, so the bytes
    // differ, but they decode to the same value (its canonical encoding is `bytes`).
    let zarena = Arena::with_memory(cornflakes_fuzz::memory()).with_threshold(4);
    let zmsg = DynMessage::from_json(schema, id, &json, &zarena)
        .expect("accepted once, accepted with pinned memory");
    let zbytes = zmsg.serialize_to_vec();
    let zview = cornflakes_fuzz::dynamic(m.name, &zbytes)
        .unwrap_or_else(|e| panic!("pinned-memory encoding does not decode ({e})"));
    assert_eq!(
        zview.bytes, bytes,
        "pinned-memory encoding holds another value"
    );
    let view = cornflakes_fuzz::dynamic(m.name, &bytes)
        .unwrap_or_else(|e| panic!("encode produced bytes decode refuses ({e})"));
    assert_eq!(view.bytes, bytes, "encode's output is not canonical");
    // The generated decoder takes them too.
    assert_eq!(
        (m.roundtrip)(&bytes).as_deref(),
        Some(&bytes[..]),
        "generated decoder disagrees on encode's output"
    );
    if let Ok(text) = view.json {
        let again: serde_json::Value = serde_json::from_str(&text).expect("printed JSON parses");
        let arena2 = Arena::new();
        let back = DynMessage::from_json(schema, id, &again, &arena2)
            .unwrap_or_else(|e| panic!("printed JSON is refused ({e}): {text}"));
        assert_eq!(
            back.serialize_to_vec(),
            bytes,
            "JSON round trip changed the value: {text}"
        );
    }
});
