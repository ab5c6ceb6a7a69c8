//! Both compilers read the same `.proto` into the same `$OUT_DIR`: prost-build writes
//! `shop.rs`, cornflakes-codegen `shop.cornflakes.rs`.

//!
//! `second.proto` is named relative to the include directory, as protoc takes it (both
//! compilers resolve it against `proto/`), and declares a custom option
//! (`extend google.protobuf.FieldOptions`), which both read and leave out.
//!
//! `greet.proto` declares a service (cornflakes-codegen only: prost-build has no service
//! generator configured here).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::compile_protos(&["proto/shop.proto"], &["proto"])?;
    prost_build::compile_protos(&["proto/shop.proto"], &["proto"])?;
    cornflakes_codegen::compile_protos(&["second.proto"], &["proto"])?;
    prost_build::compile_protos(&["second.proto"], &["proto"])?;
    // A service: its server trait, dispatcher and client (cornflakes-rpc's runtime).
    cornflakes_codegen::compile_protos(&["proto/greet.proto"], &["proto"])?;
    Ok(())
}
