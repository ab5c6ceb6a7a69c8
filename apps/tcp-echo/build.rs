//! Compiles `schemas/echo.proto` into Cornflakes objects (`tcp_echo::schema`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        // The messages only: this crate serves no `echo.Echo`.
        .services(false)
        .compile_protos(&["../../schemas/echo.proto"], &["../../schemas"])?;
    Ok(())
}
