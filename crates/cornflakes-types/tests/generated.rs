//! The checked-in code of the well-known types is what `cornflakes-codegen` generates from
//! the `.proto` files it ships; a mismatch rewrites the file and fails (review the diff).

use std::path::Path;

#[test]
fn checked_in_code_matches_the_generator() {
    let protos = [
        "google/protobuf/any.proto",
        "google/protobuf/api.proto",
        "google/protobuf/descriptor.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/empty.proto",
        "google/protobuf/field_mask.proto",
        "google/protobuf/source_context.proto",
        "google/protobuf/struct.proto",
        "google/protobuf/timestamp.proto",
        "google/protobuf/type.proto",
        "google/protobuf/wrappers.proto",
        "google/protobuf/compiler/plugin.proto",
    ];
    let no_includes: [&Path; 0] = [];
    let schema = cornflakes_codegen::Schema::load(&protos, &no_includes).unwrap();
    let files = cornflakes_codegen::Config::new()
        .compile_well_known_types()
        .generate(&schema)
        .unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let mut stale = Vec::new();
    for (name, text) in &files {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text).unwrap();
            stale.push(name.clone());
        }
    }
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "google.protobuf.cornflakes.rs",
            "google.protobuf.compiler.cornflakes.rs"
        ]
    );
    assert!(
        stale.is_empty(),
        "regenerated {stale:?}: review and commit the diff"
    );
}
