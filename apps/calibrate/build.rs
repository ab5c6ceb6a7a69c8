//! Compiles `schemas/calibrate.proto` into Cornflakes objects (`calibrate::schema`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        .compile_protos(&["../../schemas/calibrate.proto"], &["../../schemas"])?;
    Ok(())
}
