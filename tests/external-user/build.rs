//! Both compilers read the same `.proto` into the same `$OUT_DIR`: prost-build writes
//! `shop.rs`, cornflakes-codegen `shop.cornflakes.rs`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::compile_protos(&["proto/shop.proto"], &["proto"])?;
    prost_build::compile_protos(&["proto/shop.proto"], &["proto"])?;
    Ok(())
}
