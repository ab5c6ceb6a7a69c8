//! Real schemas compiled by `cornflakes-codegen` from build.rs and built under
//! `#![deny(warnings)]` (and clippy `-D warnings` in CI): protobuf's test schemas (the
//! conformance messages, `unittest*.proto`, `map_*unittest.proto`, editions included), every
//! test schema of prost, OpenTelemetry's OTLP and gRPC's schemas, vendored under
//! `../tests/corpus` (see its README for the commits). Every service in them is generated
//! (its trait, dispatcher and client; [`SERVICES`] lists them).

#![deny(warnings)]
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

/// Every compiled file: `source group path`, one per line.
pub const MANIFEST: &str = include_str!(concat!(env!("OUT_DIR"), "/manifest.txt"));

/// A service of the corpus and what was generated for it.
pub struct Service {
    /// The source (`grpc`, `otlp`, `prost`, `protobuf`).
    pub source: &'static str,
    /// Its full name (`grpc.health.v1.Health`).
    pub name: &'static str,
    /// The full names of its generated methods (its unary rpcs), as its generated
    /// `<S>Method::ALL` names them.
    pub methods: fn() -> Vec<&'static str>,
    /// The full names of its streaming rpcs, which the schema declares and generation leaves
    /// out.
    pub streaming: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/services.rs"));
