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
            "protos/rpc.proto",
        ],
        &["protos", "../../../schemas"],
    )?;
    // The same through one module tree (`Config::include_file`), in its own directory.
    let tree = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("tree");
    cornflakes_codegen::Config::new()
        .out_dir(&tree)
        .include_file("mod.rs")
        .compile_protos(
            &[
                "protos/examples.proto",
                "protos/nested/pkg.proto",
                "protos/common/types.proto",
            ],
            &["protos"],
        )?;
    Ok(())
}
