//! The committed `src/generated/` is exactly what the generators produce from
//! `schemas/` (when protoc, capnp and flatc 25.12.19 are installed).

use baselines_regen as regen;

#[test]
fn committed_generated_code_matches_the_schemas() {
    if let Err(why) = regen::check_tools() {
        test_skip::skip("committed_generated_code_matches_the_schemas", &why.0);
        return;
    }
    let scratch = regen::scratch_dir("check").expect("scratch directory");
    let result = regen::generate(&scratch);
    let fresh = regen::read_tree(&scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result.expect("the generators run on schemas/");
    let fresh = fresh.expect("read the regenerated code");
    let committed = regen::read_tree(&regen::generated_dir()).expect("read src/generated");
    let diff = regen::differences(&fresh, &committed);
    assert!(
        diff.is_empty(),
        "src/generated is stale; run `cargo run -p baselines-regen` and commit:\n  {}",
        diff.join("\n  ")
    );
}
