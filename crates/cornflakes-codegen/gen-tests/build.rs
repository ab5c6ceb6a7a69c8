//! Compiles the test schemas with cornflakes-codegen, as a user crate would.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new().compile_protos(
        &[
            "protos/features.proto",
            "protos/common/types.proto",
            "protos/legacy.proto",
            "protos/examples.proto",
            "../../../schemas/echo.proto",
            "../../../schemas/kv.proto",
        ],
        &["protos", "../../../schemas"],
    )?;
    Ok(())
}
