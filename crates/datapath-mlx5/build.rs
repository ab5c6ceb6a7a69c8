//! With the `mlx5` feature: generates Rust bindings for libibverbs + mlx5dv (bindgen over
//! `shim/shim.h`) and compiles the C shim that exports rdma-core's static inline functions.
//! Without it: nothing (the crate's hot path and emulator are pure Rust).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=shim/shim.h");
    println!("cargo:rerun-if-changed=shim/shim.c");
    #[cfg(feature = "mlx5")]
    mlx5::build()?;
    Ok(())
}

#[cfg(feature = "mlx5")]
mod mlx5 {
    use std::env;
    use std::path::PathBuf;

    pub fn build() -> Result<(), Box<dyn std::error::Error>> {
        let out = PathBuf::from(env::var("OUT_DIR")?);
        let bindings = bindgen::Builder::default()
            .header("shim/shim.h")
            .allowlist_function("ibv_.*|mlx5dv_.*|cf_.*")
            .allowlist_type("ibv_.*|mlx5dv_.*|mlx5_wqe_.*|mlx5_cqe64|mlx5_err_cqe")
            .allowlist_var("IBV_.*|MLX5_.*|MLX5DV_.*")
            // Packed and 4-aligned in C, which Rust cannot express: keep it an opaque blob
            // of the right size; its field offsets come from the C shim (cf_ctrl_seg_offsets).
            .opaque_type("mlx5_wqe_ctrl_seg")
            .default_enum_style(bindgen::EnumVariation::Consts)
            .prepend_enum_name(false)
            .derive_default(true)
            .generate_comments(false)
            .layout_tests(true)
            .generate()
            .map_err(|e| {
                format!(
                    "bindgen over shim/shim.h failed ({e}): the `mlx5` feature needs rdma-core \
                     headers and libclang; install the packages in crates/datapath-mlx5/APT_PACKAGES"
                )
            })?;
        bindings.write_to_file(out.join("bindings.rs"))?;
        cc::Build::new()
            .file("shim/shim.c")
            .warnings(true)
            .extra_warnings(true)
            .flag_if_supported("-Werror")
            .compile("cf_mlx5_shim");
        println!("cargo:rustc-link-lib=mlx5");
        println!("cargo:rustc-link-lib=ibverbs");
        Ok(())
    }
}
