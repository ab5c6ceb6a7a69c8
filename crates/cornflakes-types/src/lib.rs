//! # cornflakes-types
//!
//! Protobuf's well-known types (`google.protobuf.Timestamp`, `Duration`, `Any`, `Struct`,
//! `Value`, the wrappers, `FieldMask`, `Empty`, the descriptors, …) as Cornflakes objects,
//! what `prost-types` is to prost. Code that `cornflakes-codegen` generates for a schema
//! importing `google/protobuf/*.proto` refers to these types (`::cornflakes_types::Timestamp`)
//! instead of generating them again (`Config::extern_path`).
//!
//! With conversions:
//!
//! - [`Timestamp`] ↔ [`std::time::SystemTime`] and [`Duration`] ↔ [`std::time::Duration`],
//!   refused ([`RangeError`]) where the ranges differ (a timestamp outside years 1 to 9999,
//!   a negative duration into `std`), and their text in protobuf's JSON mapping
//!   ([`timestamp_to_rfc3339`], [`duration_to_json`] and back);
//! - [`Any::pack`] / [`Any::unpack`] by type URL;
//! - [`Struct`], [`Value`], [`ListValue`] ↔ `serde_json::Value` with the `json` feature (off by
//!   default, so a crate that only uses the types does not build a JSON library).
//!
//! ```
//! use cornflakes::{Arena, CornflakesObj};
//! use cornflakes_types::Timestamp;
//!
//! let arena = Arena::new();
//! let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_500);
//! let ts = Timestamp::from_system_time(t, &arena)?;
//! assert_eq!(ts.to_rfc3339()?, "1970-01-01T00:00:01.500Z");
//! let bytes = ts.serialize_to_vec();
//! let back = Timestamp::deserialize(&bytes, &arena)?;
//! assert_eq!(back.to_system_time()?, t);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The generated code is checked in (`src/generated/`, written by `cornflakes-codegen` from the
//! `.proto` files it ships; a test regenerates it and fails on a difference), so depending on
//! this crate builds no code generator and runs no build script.

#![deny(warnings)]
#![forbid(unsafe_code)]

include!("generated/google.protobuf.cornflakes.rs");

/// `package google.protobuf.compiler;` (the protoc plugin protocol).
pub mod compiler {
    include!("generated/google.protobuf.compiler.cornflakes.rs");
}

mod any;
#[cfg(feature = "json")]
mod json;
mod time;

pub use any::{AnyError, TYPE_URL_PREFIX};
pub use time::{
    duration_from_json, duration_to_json, timestamp_from_rfc3339, timestamp_to_rfc3339, RangeError,
    MAX_DURATION_SECONDS, MAX_TIMESTAMP_SECONDS, MIN_TIMESTAMP_SECONDS,
};
