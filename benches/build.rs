//! Compiles the workspace's `schemas/echo.proto` into Cornflakes objects (`benches::schema`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        .compile_protos(&["../schemas/echo.proto"], &["../schemas"])?;
    Ok(())
}
