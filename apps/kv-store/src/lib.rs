//! The key-value store of the Cornflakes paper (§6.2) and its benchmark.
//!
//! Keys are strings; each holds a list of one or more values kept in the datapath's pinned
//! memory ([`store`]), so a reply sends a value by reference instead of copying it. Requests
//! and replies are the messages of `schemas/kv.proto`, compiled by `cornflakes-codegen` in
//! build.rs ([`schema`]), or Redis's RESP ([`resp`]); one server binary speaks every
//! [serialization](serialization::Serialization).
//!
//! - [`server::KvServer`]: the server loop over any [`cornflakes::Datapath`].
//! - [`client`]: requests over a datapath, the load generator's transport, and the checker
//!   that verifies every reply against what the store must hold.
//! - [`bench`](mod@bench): `kv bench` — load a workload, sweep offered loads per serialization, tables,
//!   JSON and plots.
//! - [`peers`]: `kv bench --peers` — redis-server and memcached beside the store.
//! - `xdp` (feature `xdp`): the server over AF_XDP in a network namespace.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod cf;
pub mod client;
pub mod emu;
pub mod libs;
pub mod ops;
pub mod peers;
pub mod resp;
pub mod serialization;
pub mod server;
pub mod steer;
pub mod store;
#[cfg(feature = "xdp")]
pub mod xdp;

/// The KV messages generated from `schemas/kv.proto` by `cornflakes-codegen` (build.rs).
#[allow(missing_docs)]
pub mod schema {
    cornflakes::include_schema!("kv");
}

pub use ops::{Op, OpKind, Reply, Status};
pub use serialization::Serialization;
