//! Compiles the workspace's `schemas/echo.proto` into Cornflakes objects (`benches::schema`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        // The messages only: this crate serves no `echo.Echo`.
        .services(false)
        .compile_protos(&["../schemas/echo.proto"], &["../schemas"])?;
    Ok(())
}
