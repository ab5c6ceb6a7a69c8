//! Everything that calls DPDK: the only modules with `unsafe` code. Each exposes safe types
//! (or `unsafe fn`s with a `# Safety` contract) to the datapath.

pub mod eal;
pub mod mbuf;
pub mod pinned;
pub mod port;
mod sys;
