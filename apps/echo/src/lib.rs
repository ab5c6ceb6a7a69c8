//! The echo server and benchmark of the Cornflakes paper (§2.2 Figures 1–2, §6.1).
//!
//! A client sends a message of some [shape](shape::ShapeSpec) — one bytes field, a list of K
//! fields, or a tree of depth 1–5 — and the server deserializes it and sends it back
//! re-serialized, in one of the [modes](mode::Mode): no serialization (`raw`), the
//! hand-written zero-, one- and two-copy baselines of Figure 1 ([`manual`]), Cornflakes with the
//! hybrid, all-scatter-gather or all-copy policy, with or without serialize-and-send ([`cf`]),
//! and protobuf, Cap'n Proto and FlatBuffers ([`libs`], feature `baselines`). Everything runs
//! over one [`cornflakes::Datapath`]; the benchmark uses the ConnectX driver against an emulated
//! device on a second core ([`emu`]), the kernel UDP socket datapath, or AF_XDP.
//!
//! - [`server::Echo`]: the echo server as a handler of the shared server skeleton
//!   (`app-server`); [`server::EchoServer`] is it on one datapath queue.
//! - [`client::EchoClient`]: the load generator's transport; [`client::Verifier`] checks that
//!   each response deserializes to exactly the values sent.
//! - [`bench`](mod@bench): sweeps ([`config`] holds their settings and outcome, [`report`]
//!   writes the table, JSON and plot).
//! - [`emu`]: `bench --datapath emu`, the server core against the emulated ConnectX on a
//!   second core (the default with 2 CPUs).
//! - `xdp` (feature `xdp`, root): the server over AF_XDP in a network namespace.
//! - [`bypass`]: `echo client --datapath xdp | mlx5 | ice`, the client cores on kernel bypass.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod bypass;
pub mod cf;
pub mod client;
pub mod config;
pub mod emu;
pub mod libs;
pub mod manual;
pub mod mode;
pub mod plan;
pub mod report;
pub mod server;
pub mod shape;
#[cfg(feature = "xdp")]
pub mod xdp;

/// The echo messages generated from `schemas/echo.proto` by `cornflakes-codegen` (build.rs).
#[allow(missing_docs)]
pub mod schema {
    cornflakes::include_schema!("echo");
}

pub use mode::{Mode, Serialization};
pub use shape::ShapeSpec;
