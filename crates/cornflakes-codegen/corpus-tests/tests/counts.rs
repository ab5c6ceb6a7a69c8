//! The corpus is whole: every vendored file of every source was compiled (and, since this
//! crate built, its generated code passed `#![deny(warnings)]`).

use std::collections::BTreeMap;

#[test]
fn every_vendored_file_is_compiled() {
    let mut per_source: BTreeMap<&str, usize> = BTreeMap::new();
    for line in cornflakes_codegen_corpus::MANIFEST.lines() {
        let source = line.split(' ').next().unwrap();
        *per_source.entry(source).or_default() += 1;
    }
    let expected = BTreeMap::from([("grpc", 25), ("otlp", 11), ("prost", 56), ("protobuf", 65)]);
    assert_eq!(per_source, expected);
    for must in [
        "protobuf 0 google/protobuf/test_messages_proto3.proto",
        "google/protobuf/unittest.proto",
        "google/protobuf/map_unittest.proto",
        "grpc/health/v1/health.proto",
        "grpc/reflection/v1/reflection.proto",
        "opentelemetry/proto/trace/v1/trace.proto",
        "tests/src/ident_conversion.proto",
    ] {
        assert!(
            cornflakes_codegen_corpus::MANIFEST.contains(must),
            "{must} not compiled"
        );
    }
}
