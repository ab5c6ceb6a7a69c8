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
    // gRPC's health service, from the vendored corpus: its streaming `Watch` is left out with
    // a warning, which tests/health.rs reads from `health.warnings` (printed, it would show on
    // every build).
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let health = cornflakes_codegen::Schema::load(
        &["grpc/health/v1/health.proto"],
        &["../tests/corpus/grpc"],
    )?;
    println!("cargo:rerun-if-changed=../tests/corpus/grpc/grpc/health/v1/health.proto");
    let (files, warnings) = cornflakes_codegen::Config::new().generate_with_warnings(&health)?;
    for (name, text) in files {
        cornflakes_codegen::write_if_changed(&out.join(name), &text)?;
    }
    let warnings: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
    cornflakes_codegen::write_if_changed(&out.join("health.warnings"), &warnings.join("\n"))?;
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
