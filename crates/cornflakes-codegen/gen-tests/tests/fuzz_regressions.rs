//! Inputs the fuzz targets (fuzz/, docs/fuzzing.md) found, as ordinary tests. The raw inputs
//! are kept in fuzz/regressions/<target>/ and replayed by `scripts/fuzz.sh ci`.

use std::path::PathBuf;

use cornflakes::{Arena, CFString, CornflakesObj};
use cornflakes_codegen::dynamic::DynMessage;
use cornflakes_codegen::Schema;
use cornflakes_codegen_tests::features::everything::CountsEntry;
use cornflakes_codegen_tests::features::Everything;

fn schema() -> Schema {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("protos");
    Schema::load(&[dir.join("features.proto")], &[dir]).unwrap()
}

/// decode_dynamic found that a map whose wire entries repeat a key printed that key twice in
/// one JSON object, which `encode` then read back as a different map. Protobuf keeps the last
/// entry of a repeated key; so does the JSON form now, and it reads back to the same JSON.
#[test]
fn a_map_key_repeated_on_the_wire_prints_once_last_entry_wins() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    m.init_counts(3);
    for (k, v) in [("j", 1), ("k", 5), ("j", -2)] {
        let mut e = CountsEntry::new_in(&arena);
        e.set_key(CFString::new(k, &arena));
        e.set_value(v);
        m.get_mut_counts().append(e);
    }
    let bytes = m.serialize_to_vec();
    let schema = schema();
    let id = schema.message("features.Everything").unwrap();
    let d = DynMessage::decode(&schema, id, &bytes, &arena).unwrap();
    let text = d.to_json().unwrap();
    assert_eq!(
        text,
        "{\n  \"counts\": {\n    \"k\": \"5\",\n    \"j\": \"-2\"\n  }\n}"
    );
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let back = DynMessage::from_json(&schema, id, &json, &arena).unwrap();
    // (Objects read back in key order: equal as JSON values.)
    let again: serde_json::Value = serde_json::from_str(&back.to_json().unwrap()).unwrap();
    assert_eq!(again, json);
}

/// The fuzzer's own input for the finding above (selector byte 19 = features.Everything), as
/// the decode_dynamic target checks it: printed JSON reads back to the same JSON value.
#[test]
fn the_fuzzers_map_input_reads_back_as_the_same_json() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../fuzz/regressions/decode_dynamic/map-repeated-key");
    let input = std::fs::read(path).unwrap();
    assert_eq!(
        input[0], 19,
        "features.Everything in fuzz/src/lib.rs MESSAGES"
    );
    let schema = schema();
    let id = schema.message("features.Everything").unwrap();
    let arena = Arena::new();
    let d = DynMessage::decode(&schema, id, &input[1..], &arena).unwrap();
    let text = d.to_json().unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let back = DynMessage::from_json(&schema, id, &json, &arena).unwrap();
    let again: serde_json::Value = serde_json::from_str(&back.to_json().unwrap()).unwrap();
    assert_eq!(again, json);
}
