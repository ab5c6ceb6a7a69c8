//! # cornflakes-codegen
//!
//! The Cornflakes schema compiler: `.proto` files (proto2 or proto3) → Rust types that build,
//! serialize and decode Cornflakes objects (`docs/wire-format.md`), in the shape of the paper's
//! Listing 1. Parsing is pure Rust (no `protoc`), output is formatted without `rustfmt`.
//!
//! ## From `build.rs`
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     cornflakes_codegen::Config::new().compile_protos(&["schemas/kv.proto"], &["schemas"])?;
//!     Ok(())
//! }
//! ```
//!
//! This writes `$OUT_DIR/<package>.cornflakes.rs` (one file per package, `_.cornflakes.rs`
//! without a package; a name of its own, so prost-build's `<package>.rs` from the same `.proto`
//! in the same `$OUT_DIR` is left alone), only when its contents change, and prints `cargo:rerun-if-changed` for every `.proto` read. Include
//! it where the package's module should be:
//!
//! ```ignore
//! pub mod kv {
//!     cornflakes::include_schema!("kv");
//! }
//! ```
//!
//! Packages map onto modules (`a.b` → `a::b`), so types imported from another package are found
//! when each package's file is included at its module path, as with prost.
//!
//! ## Pieces
//!
//! - [`Schema`]: the front end (parse, resolve, validate); also drives the [`dynamic`] codec.
//! - [`Config`]: the back end and its options.
//! - [`dynamic`]: a schema-driven message model, with JSON conversion behind the `json` feature;
//!   the `cornflakes` command's `encode` and `decode` (crate `cornflakes-cli`) use it.
//!
//! ## Features
//!
//! - `json` (off): JSON conversion of the dynamic codec (pulls `serde_json` and `base64`).
//!   A `build.rs` needs nothing beyond the default.

#![forbid(unsafe_code)]

pub mod dynamic;
mod error;
mod gen;
mod imports;
mod options;
mod parse;
mod place;
pub mod schema;
mod source;

use std::path::{Path, PathBuf};

pub use error::{Error, ErrorKind, Warning};
pub use options::{OPTIONS_PROTO, OPTIONS_PROTO_PATH};
pub use schema::Schema;

/// Generated files: `(file name, contents)`, sorted by file name.
pub type Files = Vec<(String, String)>;

/// Options of the code generator (builder style, like `prost_build::Config`).
#[derive(Clone, Debug)]
pub struct Config {
    out_dir: Option<PathBuf>,
    runtime_path: String,
    rerun_if_changed: bool,
    include_file: Option<PathBuf>,
    services: bool,
    refuse_streaming: bool,
    rpc_path: String,
    method_ids: Vec<(String, u16)>,
    exactly_once: Vec<String>,
    print_warnings: bool,
    extern_paths: Vec<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            out_dir: None,
            runtime_path: "::cornflakes".to_string(),
            rerun_if_changed: true,
            include_file: None,
            services: true,
            refuse_streaming: false,
            rpc_path: "::cornflakes_rpc".to_string(),
            method_ids: Vec::new(),
            exactly_once: Vec::new(),
            print_warnings: true,
            extern_paths: vec![(
                "google.protobuf".to_string(),
                "::cornflakes_types".to_string(),
            )],
        }
    }
}

impl Config {
    /// The default configuration: output in `$OUT_DIR`, runtime at `::cornflakes`.
    pub fn new() -> Config {
        Config::default()
    }

    /// Writes files to `dir` instead of `$OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The path generated code uses for the runtime crate, for crates that re-export it
    /// (default `::cornflakes`).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut c = cornflakes_codegen::Config::new();
    /// c.runtime_path("crate::rt");
    /// ```
    pub fn runtime_path(&mut self, path: &str) -> &mut Self {
        self.runtime_path = path.to_string();
        self
    }

    /// Whether to print `cargo:rerun-if-changed=<file>` for each `.proto` read (default: yes,
    /// when running under Cargo, i.e. `OUT_DIR` is set).
    pub fn rerun_if_changed(&mut self, on: bool) -> &mut Self {
        self.rerun_if_changed = on;
        self
    }

    /// Also writes `name` (in the output directory): the nested `pub mod` tree of every
    /// generated package, each including its file, so one `include!` brings in all packages at
    /// module paths where references across packages resolve.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// // build.rs
    /// cornflakes_codegen::Config::new()
    ///     .include_file("schemas.rs")
    ///     .compile_protos(&["schemas/kv.proto", "schemas/echo.proto"], &["schemas"])
    ///     .unwrap();
    /// // lib.rs: include!(concat!(env!("OUT_DIR"), "/schemas.rs")); // kv::…, echo::…
    /// ```
    pub fn include_file(&mut self, name: impl Into<PathBuf>) -> &mut Self {
        self.include_file = Some(name.into());
        self
    }

    /// The path generated services use for the `cornflakes-rpc` crate (default
    /// `::cornflakes_rpc`), for crates that re-export it.
    pub fn rpc_path(&mut self, path: &str) -> &mut Self {
        self.rpc_path = path.to_string();
        self
    }

    /// Gives method `method` (`package.Service.Method`) the number `id`, as
    /// `option (cornflakes.method_id) = id;` in the schema would (this setting wins over it).
    /// A method's number is the framing header's message type of its requests and replies;
    /// without either, it is the method's position in its service, from 1.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut c = cornflakes_codegen::Config::new();
    /// c.method_id("echo.Echo.EchoTree1", 11);
    /// ```
    pub fn method_id(&mut self, method: &str, id: u16) -> &mut Self {
        self.method_ids.push((method.to_string(), id));
        self
    }

    /// Runs method `method` (`package.Service.Method`) exactly once per request under retries,
    /// as `option (cornflakes.exactly_once) = true;` in the schema would.
    pub fn exactly_once(&mut self, method: &str) -> &mut Self {
        self.exactly_once.push(method.to_string());
        self
    }

    /// Whether to generate code for the input files' `service`s (default: yes). Off, services
    /// are read and checked but only messages and enums are generated, as when
    /// prost-build has no service generator.
    pub fn services(&mut self, on: bool) -> &mut Self {
        self.services = on;
        self
    }

    /// Declares that the types of proto package `proto_path` (`.google.protobuf`, `.acme.v1`;
    /// its sub-packages too) live in the Rust module `rust_path` (`::cornflakes_types`,
    /// `::acme_types::v1`), generated elsewhere: code that uses them refers to them there and
    /// they are not generated again (prost-build's `extern_path`). `.google.protobuf` maps to
    /// the `cornflakes-types` crate by default; see
    /// [`compile_well_known_types`](Self::compile_well_known_types).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut c = cornflakes_codegen::Config::new();
    /// c.extern_path(".acme.common", "::acme_common");
    /// ```
    pub fn extern_path(&mut self, proto_path: &str, rust_path: &str) -> &mut Self {
        let proto = proto_path.trim_start_matches('.').to_string();
        self.extern_paths.retain(|(p, _)| *p != proto);
        self.extern_paths.push((proto, rust_path.to_string()));
        self
    }

    /// Generates protobuf's well-known types (`google.protobuf.Timestamp`, …) like any other
    /// package instead of referring to the `cornflakes-types` crate (what that crate itself
    /// is built with).
    pub fn compile_well_known_types(&mut self) -> &mut Self {
        self.extern_paths.retain(|(p, _)| p != "google.protobuf");
        self
    }

    /// Whether to print the schema's notes and the generator's warnings (default: yes: as
    /// `cargo:warning=` lines in a build script, on stderr elsewhere). Off, they are still in
    /// [`Schema::notes`] and [`generate_with_warnings`](Self::generate_with_warnings).
    pub fn print_warnings(&mut self, on: bool) -> &mut Self {
        self.print_warnings = on;
        self
    }

    /// Whether a streaming rpc (`stream` on either side) is an error (default: no, it is
    /// skipped with a warning naming it, so files such as gRPC's health service compile).
    pub fn refuse_streaming(&mut self, on: bool) -> &mut Self {
        self.refuse_streaming = on;
        self
    }

    /// Compiles `protos` (found through `includes`, which must contain them) into one
    /// `<package>.cornflakes.rs` per package in the output directory. Unchanged files are not rewritten.
    pub fn compile_protos(
        &mut self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(), Error> {
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or_else(|| {
                Error::io(
                    Path::new("$OUT_DIR"),
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "OUT_DIR is not set: call compile_protos from a build script, or set Config::out_dir",
                    ),
                )
            })?,
        };
        let under_cargo = std::env::var_os("OUT_DIR").is_some();
        if self.rerun_if_changed && under_cargo {
            // Before loading, so a file that fails is still watched; named as it resolves
            // (a file argument may be relative to an include directory, as with protoc).
            for p in protos {
                let p = p.as_ref();
                let found = if p.is_file() || p.is_absolute() {
                    p.to_path_buf()
                } else {
                    includes
                        .iter()
                        .map(|i| i.as_ref().join(p))
                        .find(|q| q.is_file())
                        .unwrap_or_else(|| p.to_path_buf())
                };
                println!("cargo:rerun-if-changed={}", found.display());
            }
        }
        let schema = Schema::load(protos, includes)?;
        for note in schema.notes.iter().filter(|_| self.print_warnings) {
            // What was read and left out (an `extend` of a message): a warning in Cargo's
            // output, a note on stderr elsewhere (the `cornflakes gen` command).
            if under_cargo {
                println!("cargo:warning={}", note.replace('\n', " "));
            } else {
                eprintln!("note: {note}");
            }
        }
        if self.rerun_if_changed && under_cargo {
            for f in schema.files.iter().filter(|f| !f.is_input) {
                println!("cargo:rerun-if-changed={}", f.path.display());
            }
        }
        std::fs::create_dir_all(&out_dir).map_err(error::io_at(&out_dir))?;
        let (files, warnings) = self.generate_with_warnings(&schema)?;
        for w in warnings.iter().filter(|_| self.print_warnings) {
            if under_cargo {
                // One line each: Cargo shows a `cargo:warning=` line as it is.
                println!("cargo:warning={}", w.to_string().replace('\n', " "));
            } else {
                eprintln!("warning: {w}");
            }
        }
        for (name, text) in &files {
            write_if_changed(&out_dir.join(name), text)?;
        }
        if let Some(inc) = &self.include_file {
            let text = gen::include_file(&files);
            write_if_changed(&out_dir.join(inc), &text)?;
        }
        Ok(())
    }

    /// Generates the code for the input files of `schema`: `(file name, contents)` per package.
    pub fn generate(&self, schema: &Schema) -> Result<Vec<(String, String)>, Error> {
        self.generate_with_warnings(schema).map(|(files, _)| files)
    }

    /// [`generate`](Self::generate), and what it left out (a streaming rpc, say).
    pub fn generate_with_warnings(&self, schema: &Schema) -> Result<(Files, Vec<Warning>), Error> {
        gen::generate(schema, self)
    }
}

/// [`Config::compile_protos`] with the default configuration.
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> Result<(), Error> {
    Config::new().compile_protos(protos, includes)
}

/// The Rust path of service `service`'s server trait, from the root of the module tree its
/// package's file is included in (the tree [`Config::include_file`] writes): `a.b.Svc` →
/// `a::b::Svc`. Its dispatcher, client and method numbers are that path with `Server`,
/// `Client` and `Method` appended (docs/codegen.md, "Services"). For a build script that
/// refers to the generated services of a schema it did not write.
pub fn service_rust_path(schema: &Schema, service: schema::ServiceId) -> String {
    gen::service_rust_path(schema, service)
}

/// Writes `text` to `path` unless the file already holds exactly that, so Cargo does not
/// rebuild what includes it.
pub fn write_if_changed(path: &Path, text: &str) -> Result<bool, Error> {
    if std::fs::read(path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(false);
    }
    std::fs::write(path, text).map_err(error::io_at(path))?;
    Ok(true)
}
