//! Generates the protobuf, Cap'n Proto and FlatBuffers code for the schemas
//! in `schemas/` when the `baselines` feature is on.
//!
//! The generators need system tools (protoc, capnp, flatc); a missing tool
//! stops the build with a message naming the Debian package that provides it.
//! `PROTOC`, `CAPNP` and `FLATC` override the tool paths.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=schemas");
    for var in ["PROTOC", "CAPNP", "FLATC"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    #[cfg(feature = "baselines")]
    if let Err(msg) = generate::all() {
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}

#[cfg(feature = "baselines")]
mod generate {
    use std::env;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// Checks that `tool` runs; otherwise explains how to install it.
    fn require(tool: &str, apt_package: &str, what: &str) -> Result<(), String> {
        let name = Path::new(tool)
            .file_name()
            .map_or(tool.into(), |n| n.to_string_lossy());
        match Command::new(tool).arg("--version").output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!(
                "`{tool} --version` failed ({}); {what} needs a working {name}: \
                 apt-get install -y {apt_package}",
                out.status
            )),
            Err(e) => Err(format!(
                "{name} not found: running `{tool}` failed ({e}). The `baselines` feature needs it for {what}. \
                 Install it with `apt-get install -y {apt_package}` (all tools: \
                 crates/baselines/APT_PACKAGES), or build without `--features baselines`."
            )),
        }
    }

    pub(super) fn all() -> Result<(), String> {
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
        let schemas = manifest.join("schemas");
        let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
        protobuf(&schemas)?;
        capnp(&schemas)?;
        flatbuffers(&schemas, &out)
    }

    fn protobuf(schemas: &Path) -> Result<(), String> {
        let protoc = env::var("PROTOC").unwrap_or_else(|_| "protoc".into());
        require(
            &protoc,
            "protobuf-compiler",
            "protobuf code generation (prost-build)",
        )?;
        prost_build::Config::new()
            .compile_protos(&[schemas.join("echo.proto")], &[schemas])
            .map_err(|e| format!("prost-build failed on schemas/echo.proto: {e}"))
    }

    fn capnp(schemas: &Path) -> Result<(), String> {
        let capnp = env::var("CAPNP").unwrap_or_else(|_| "capnp".into());
        require(&capnp, "capnproto", "Cap'n Proto code generation (capnpc)")?;
        capnpc::CompilerCommand::new()
            .capnp_executable(&capnp)
            .src_prefix(schemas)
            .file(schemas.join("echo.capnp"))
            .default_parent_module(vec!["generated".into(), "capnp_gen".into()])
            .run()
            .map_err(|e| format!("capnpc failed on schemas/echo.capnp: {e}"))
    }

    fn flatbuffers(schemas: &Path, out: &Path) -> Result<(), String> {
        let flatc = env::var("FLATC").unwrap_or_else(|_| "flatc".into());
        require(
            &flatc,
            "flatbuffers-compiler",
            "FlatBuffers code generation",
        )?;
        let status = Command::new(&flatc)
            .arg("--rust")
            .arg("-o")
            .arg(out)
            .arg(schemas.join("echo.fbs"))
            .status()
            .map_err(|e| format!("running {flatc}: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "{flatc} --rust failed on schemas/echo.fbs ({status})"
            ))
        }
    }
}
