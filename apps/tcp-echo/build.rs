//! Compiles `schemas/echo.proto` into Cornflakes objects (`tcp_echo::schema`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        .compile_protos(&["../../schemas/echo.proto"], &["../../schemas"])?;
    Ok(())
}
