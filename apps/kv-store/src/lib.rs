//! The key-value store of the Cornflakes paper (§6.2) and its benchmark.
//!
//! Keys are strings; each holds a list of one or more values kept in the datapath's pinned
//! memory ([`store`]), so a reply sends a value by reference instead of copying it. Requests
//! and replies are the messages of `schemas/kv.proto`, compiled by `cornflakes-codegen` in
//! build.rs ([`schema`]), or Redis's RESP ([`resp`]); one server binary speaks every
//! [serialization](serialization::Serialization).
//!
//! - [`exec`]: the store's operations, run once for every serialization — a format decodes
//!   a request ([`exec::Request`]) and encodes the [`exec::Answer`]: [`cf`] (Cornflakes),
//!   [`libs`] (protobuf, Cap'n Proto, FlatBuffers), [`resp`] (RESP, over the `resp` crate).
//! - [`server::Kv`]: the KV store as a handler of the shared server skeleton (`app-server`);
//!   [`server::KvServer`] is it on one datapath queue, `app_server::launch` on any datapath.
//! - [`client`]: requests over a datapath, the load generator's transport, and the checker
//!   that verifies every reply against what the store must hold.
//! - [`bench`](mod@bench): `kv bench` — load a workload, sweep offered loads per serialization
//!   ([`sweep`] on sockets, [`emu`] on the emulated NIC), with its settings in [`config`], the
//!   store loaded by [`load`], and the tables, JSON and plots written by [`report`].
//! - [`bypass`]: `kv client --datapath xdp | mlx5 | ice`, the client cores on a kernel-bypass
//!   datapath, each keeping its queue across the sweep's points.
//! - [`peers`]: `kv bench --peers` — redis-server and memcached beside the store.
//! - `xdp` (feature `xdp`): the server over AF_XDP in a network namespace.
//! - [`validate`], [`value`], [`cost`]: whole requests checked before the first write, a stored
//!   value's buffers, what an entry really costs; writes run once under retries through the
//!   store's exactly-once table ([`store::Store::once`], `cornflakes_rpc::once`).
//! - [`call`]: a client that retries under the same incarnation and request id; [`faults`]:
//!   the exactly-once check under injected loss and duplication (`kv faults`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod bypass;
pub mod call;
pub mod cf;
pub mod client;
pub mod config;
pub mod cost;
pub mod emu;
pub mod exec;
pub mod faults;
pub mod libs;
pub mod load;
pub mod ops;
pub mod peers;
pub mod report;
pub mod resp;
pub mod serialization;
pub mod server;
pub mod steer;
pub mod store;
pub mod sweep;
pub mod validate;
pub mod value;
#[cfg(feature = "xdp")]
pub mod xdp;

/// The KV messages generated from `schemas/kv.proto` by `cornflakes-codegen` (build.rs).
#[allow(missing_docs)]
pub mod schema {
    cornflakes::include_schema!("kv");
}

pub use ops::{Op, OpKind, Reply, Status};
pub use serialization::{Serialization, Shared};
