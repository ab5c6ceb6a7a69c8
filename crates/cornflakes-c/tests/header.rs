//! include/cornflakes.h is what cbindgen makes of the crate now: regenerated here and compared.
//! On a mismatch the file is rewritten and the test fails (review and commit the new header).

use std::path::Path;

#[test]
fn header_is_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    let fresh = String::from_utf8(out).expect("UTF-8 header");
    let path = dir.join("include/cornflakes.h");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        std::fs::write(&path, &fresh).expect("rewrite the header");
        panic!(
            "{} was stale and has been regenerated: review the diff and commit it",
            path.display()
        );
    }
}
