//! # DPDK datapath for Cornflakes (Intel E810 through the `ice` PMD)
//!
//! Sends and receives UDP through one DPDK ethdev port (one RX and one TX queue per
//! datapath, one datapath per core). Serialize-and-send (paper §3.2.3) is the stack's
//! ([`cornflakes_stack::tx`]); this crate turns each descriptor the stack posts into an mbuf
//! whose data is the pinned buffer itself, attached with `rte_pktmbuf_attach_extbuf`:
//!
//! - the head segment is a pinned buffer holding `[Ethernet/IPv4/UDP | framing | object header
//!   | copy area]`, every zero-copy entry is one more segment of the same chain;
//! - each segment keeps an [`RcBuf`](cornflakes_mem::RcBuf) clone alive until DPDK frees the mbuf
//!   (after transmission), through the external buffer's free callback;
//! - at most [`Transmit::max_segments`](cornflakes_datapath::Transmit::max_segments) segments
//!   per packet: the port's `tx_desc_lim` (8 on the E810), smaller entries demoted to copies;
//! - pinned regions are registered with DPDK (`rte_extmem_register` + `rte_dev_dma_map`) via
//!   [`PinnedMemory::set_registrar`](cornflakes_mem::PinnedMemory::set_registrar), the IOVA base
//!   stored as each region's registration handle;
//! - receive buffers are pinned too: the RX mempool is created over pinned items
//!   (`rte_pktmbuf_pool_create_extbuf`), so a received frame is an `RcBuf` view of the mbuf's
//!   data with no copy, and the mbuf returns to the pool when the last view is dropped.
//!
//! Modules: [`eal_args`] and [`limits`] are pure logic, always compiled and tested. With the
//! `ice` feature (DPDK 22.11 via pkg-config; see `APT_PACKAGES` and the README), `ffi`
//! holds every DPDK call and all of the crate's `unsafe` code (the other modules forbid it), and
//! `datapath` holds the datapath, `cores` several cores on one port (one queue pair each), and
//! `spawn` opens those cores from an application's command line and runs a server on each.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[forbid(unsafe_code)]
pub mod eal_args;
#[forbid(unsafe_code)]
pub mod limits;

#[cfg(feature = "ice")]
#[forbid(unsafe_code)]
pub mod cores;
#[cfg(feature = "ice")]
#[forbid(unsafe_code)]
pub mod datapath;
#[cfg(feature = "ice")]
pub mod ffi;
#[cfg(feature = "ice")]
#[forbid(unsafe_code)]
pub mod spawn;

#[cfg(feature = "ice")]
pub use cores::{open_cores, CorePort, Steering};
#[cfg(feature = "ice")]
pub use datapath::{IceConfig, IceDatapath, IceNic, IceStats, PortSpec};
