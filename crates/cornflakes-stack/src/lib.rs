//! The Cornflakes UDP stack: everything between a datapath's descriptors and the runtime's
//! objects that does not depend on the device.
//!
//! - [`wire`]: Ethernet II, IPv4, UDP, ARP and the Cornflakes framing header as typed views
//!   over buffers plus plain `Repr`s (smoltcp style), with checksum offload as a flag
//!   ([`wire::ChecksumCaps`]).
//! - [`checksum`]: the Internet checksum, incremental updates (RFC 1624) and sums over
//!   scatter-gather pieces.
//! - [`template`]: per-connection header templates patched per packet.
//! - [`arp`]: the ARP state machine (answer, resolve with retry and timeout, static entries).
//! - [`segment`] and [`reassembly`]: messages larger than one frame.
//! - [`conntable`]: the bounded connection table that evicts idle entries, shared by every
//!   datapath.
//! - [`iface`]: the receive path with drop counters and the connection table, for link-layer
//!   datapaths; [`tx`]: their transmit paths (serialize-and-send over a [`tx::TxSink`]).
//! - [`device`]: the device boundary — a [`Device`] is a NIC queue pair's rings (a receive
//!   half beside [`TxSink`]), and [`EthDatapath`] the one Ethernet datapath over any device.
//!
//! The crate has no `unsafe` code and performs no I/O; datapaths drive it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod checksum;
pub mod conntable;
pub mod device;
pub mod iface;
mod peers;
pub mod reassembly;
pub mod segment;
pub mod template;
pub mod tx;
pub mod wire;

pub use conntable::ConnTable;
pub use device::{Device, EthDatapath};
pub use iface::{EthStack, StackConfig, FRAME_OVERHEAD, IP_OVERHEAD};
pub use segment::{Cursor, FramePlan, Part};
pub use template::{HeaderTemplate, TEMPLATE_LEN};
pub use tx::{PieceWalk, TxSink};
pub use wire::{ChecksumCaps, MacAddr};
