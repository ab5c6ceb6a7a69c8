//! # AF_XDP datapath for Cornflakes
//!
//! Sends and receives UDP through an AF_XDP socket whose UMEM *is* the pinned memory of a
//! [`cornflakes_mem::PinnedMemory`] (one region, no growth, 4 KiB frames). Because every `RcBuf`
//! lives inside the UMEM, a zero-copy leaf of an object is transmitted by pointing one more
//! descriptor at its bytes, with no copy and no translation (paper §3.2.3): the head buffer
//! holds the packet headers and the object's header and copy areas, each zero-copy leaf is
//! chained after it with `XDP_PKT_CONTD`. See `docs/xdp.md`.
//!
//! - [`plan`] and [`ring`]: the pure parts (descriptor-chain planning, receive reassembly, ring
//!   index arithmetic), always compiled and tested without root.
//! - With the `xdp` feature (needs clang, libbpf and root at run time): the socket, the XDP
//!   program loader and the datapath itself.

#![deny(unsafe_op_in_unsafe_fn, unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod plan;
// Ring memory shared with the kernel: raw pointers.
#[allow(unsafe_code)]
pub mod ring;

// FFI: libbpf.
#[cfg(feature = "xdp")]
#[allow(unsafe_code)]
pub mod bpf;
#[cfg(feature = "xdp")]
pub mod datapath;
// FFI: the AF_XDP system calls.
#[cfg(feature = "xdp")]
#[allow(unsafe_code)]
pub mod sys;
// Hands the pinned region to the kernel as the UMEM (one `unsafe` call).
#[cfg(feature = "xdp")]
#[allow(unsafe_code)]
pub mod xsk;

#[cfg(feature = "xdp")]
pub use datapath::{XdpConfig, XdpDatapath, XdpNic};
