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
fn service_matches_its_golden_file() {
    check_fixture("service", "service.proto");
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

/// A file and its include directory may be named differently (relative and absolute, through
/// `..` or a symbolic link): the parser compares the paths' text, so `build.rs` files mixing
/// `CARGO_MANIFEST_DIR` with relative paths were refused as "must reside in include path".
/// (`cargo test` runs in the package directory, which the relative paths start from.)
#[test]
fn a_file_and_its_directory_may_be_named_differently() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small");
    let reference = Config::new()
        .generate(&Schema::load(&[dir.join("small.proto")], &[&dir]).unwrap())
        .unwrap();
    let link = std::env::temp_dir().join(format!("cf-codegen-link-{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let rel = Path::new("tests/fixtures/small");
    let cases: Vec<(std::path::PathBuf, std::path::PathBuf)> = vec![
        (rel.join("small.proto"), dir.clone()),
        (dir.join("small.proto"), rel.to_path_buf()),
        (rel.join("small.proto"), dir.join("../small")),
        (link.join("small.proto"), dir.clone()),
        (rel.join("small.proto"), link.clone()),
    ];
    for (input, include) in &cases {
        let schema = Schema::load(&[input], &[include])
            .unwrap_or_else(|e| panic!("{} with -I {}: {e}", input.display(), include.display()));
        assert_eq!(Config::new().generate(&schema).unwrap(), reference);
    }
    std::fs::remove_file(&link).unwrap();
}
