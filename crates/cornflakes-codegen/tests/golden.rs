//! Golden tests: the generated code for small schemas, checked in next to them.
//!
//! On a mismatch the expected file is rewritten with the new output and the test fails, so
//! updating means: run the tests, review `git diff tests/fixtures`, commit.

use std::path::Path;

use cornflakes_codegen::{Config, Schema};

fn check_fixture(case: &str, proto: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case);
    let schema = Schema::load(&[dir.join(proto)], &[&dir]).unwrap();
    let files = Config::new().generate(&schema).unwrap();
    assert_eq!(files.len(), 1, "one package, one file");
    let (_, actual) = &files[0];
    let expected_path = dir.join("expected.rs");
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if expected != *actual {
        std::fs::write(&expected_path, actual).unwrap();
        panic!(
            "generated code for {case} changed; {} was rewritten: review the diff and commit it",
            expected_path.display()
        );
    }
}

#[test]
fn small_schema_matches_its_golden_file() {
    check_fixture("small", "small.proto");
}

#[test]
fn sparse_proto2_schema_matches_its_golden_file() {
    check_fixture("sparse", "sparse.proto");
}

/// Generated files have a name of their own, so prost-build's `<package>.rs` from the same
/// `.proto` in the same `$OUT_DIR` is not overwritten (it was `<package>.rs`).
#[test]
fn generated_files_do_not_take_prost_builds_names() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small");
    let schema = Schema::load(&[dir.join("small.proto")], &[&dir]).unwrap();
    let files = Config::new().generate(&schema).unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["small.cornflakes.rs"]);
    assert!(files[0]
        .1
        .contains("cornflakes::include_schema!(\"small\")"));
}
