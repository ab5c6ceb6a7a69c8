//! The apps' server launcher over the one server skeleton (`crates/app-server/README.md`;
//! `docs/cores.md`, "The pieces").
//!
//! The skeleton itself ([`Server`], [`Handler`], [`Tx`], [`ServerStats`]) lives in
//! `cornflakes-rpc`, so a service generated from a `.proto` file runs on it without this
//! crate's launchers; it is re-exported here.
//!
//! [`launch`] runs a handler on the datapath a [`Launch`] names (a [`DatapathSpec`]:
//! `--datapath socket | tcp | xdp | mlx5 | ice`, its device, `--mtu` and kernel TCP's zero-copy
//! flags, parsed once by [`DatapathSpec::from_args`] of `datapath-open`), on one core or N:
//! the one place that runs servers, prints their ready lines and idles them ([`idle`]).
//! [`ServerHandle`] runs server cores on sockets in this process (tests, benchmarks). Echo,
//! the KV store and the calibration server are handlers.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod idle;
mod launch;
pub mod nic;
mod on_cores;
mod ready;
mod socket;

pub use cornflakes_rpc::{
    AppCounters, CoreId, Handler, Make, Server, ServerStats, Tx, TxCounters, Unanswered,
    WORK_SAMPLE_EVERY,
};
/// AF_XDP's crate, for what the apps' AF_XDP benches read of it (the XDP program's counters,
/// the UMEM's limits): the feature `xdp` is the one switch.
#[cfg(feature = "xdp")]
pub use datapath_open::datapath_xdp;
pub use datapath_open::{DatapathKind, DatapathSpec, TcpSpec};
pub use launch::{launch, Launch};
pub use nic::CargoRun;
pub use on_cores::{spawn_on_cores, OnCore, OnCores};
pub use ready::CoreStats;
pub use socket::ServerHandle;

#[cfg(test)]
mod tests;
