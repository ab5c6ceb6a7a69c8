//! Target 2a: the dynamic codec behind `cornflakes decode`. The first byte picks a message of
//! the fuzz schema; the rest is decoded schema-driven, printed as JSON (what `decode` prints),
//! re-encoded and decoded again; the JSON must read back through `from_json` (what `encode`
//! does) to the same value.
#![no_main]

use cornflakes::Arena;
use cornflakes_codegen::dynamic::DynMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((m, bytes)) = cornflakes_fuzz::split(data) else {
        return;
    };
    let Ok(view) = cornflakes_fuzz::dynamic(m.name, bytes) else {
        return;
    };
    // What `cornflakes decode` prints, `cornflakes encode` must take back (when it prints:
    // a string that is not UTF-8 has no JSON form and is reported as an error).
    if let Ok(text) = view.json {
        let schema = cornflakes_fuzz::schema();
        let id = schema.message(m.name).expect("in the schema");
        let json: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("decode printed JSON that does not parse ({e}): {text}"));
        let arena = Arena::new();
        let back = DynMessage::from_json(schema, id, &json, &arena)
            .unwrap_or_else(|e| panic!("decode's JSON is refused by encode ({e}): {text}"));
        // Equal as JSON values (objects compare regardless of member order; map entries
        // come back in key order). The JSON mapping spells every NaN "NaN", so a NaN's payload
        // bits (which the binary round trips keep) are the one thing it does not carry.
        let again: serde_json::Value =
            serde_json::from_str(&back.to_json().expect("prints")).expect("printed JSON parses");
        assert_eq!(again, json, "JSON round trip changed {}: {text}", m.name);
    }
});
