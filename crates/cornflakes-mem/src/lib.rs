//! # Cornflakes pinned memory
//!
//! Pinned (DMA-safe) memory: regions, size-class pools, reference-counted buffers and pointer
//! recovery. The Cornflakes runtime (`cornflakes-runtime`, library `cornflakes`) re-exports this
//! crate as `cornflakes::mem` and its main types at its root; the datapath interface
//! (`cornflakes-datapath`) sends and receives these buffers.
//!
//! # Layout
//! A [`PinnedMemory`] owns [`Region`]s (large mappings, see [`region`]). Regions are cut into
//! 2 MiB chunks; each chunk serves one power-of-two size class, so an item never straddles a chunk
//! and its index is `(addr - chunk_base) >> shift`. Every item has a `u32` reference count: 0 =
//! free, `MUT_FLAG` = held by one [`RcBufMut`], otherwise the number of [`RcBuf`]s.
//!
//! # Threads
//! A `PinnedMemory` and its buffers belong to one thread (one per core, as in the paper):
//! reference counts are plain integers, not atomics. The types are therefore neither `Send` nor
//! `Sync`; the compiler refuses to move a buffer to another thread. Give each core its own
//! `PinnedMemory` (and its own datapath queue).
//!
//! # Lifetime
//! Buffers keep their memory alive: dropping the last `PinnedMemory` handle while buffers are
//! still out only unmaps the regions once the last buffer is released.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

// The paper's hash-map pointer recovery, a benchmark baseline (feature `fixtures`).
#[cfg(any(test, feature = "fixtures"))]
mod baseline;
mod fallback;
mod keep;
mod pool;
mod rcbuf;
pub mod region;
mod table;

#[cfg(any(test, feature = "fixtures"))]
pub use baseline::HashMapRecover;
pub use fallback::{ZeroCopyFallback, ZeroCopyFallbacks};
pub use keep::Keeper;
pub use pool::{AllocError, ConfigError, MemoryConfig, MemoryStats, PinnedMemory};
pub use rcbuf::{PinnedRef, RcBuf, RcBufMut, RefCountOverflow, MAX_REFS};
pub use region::{Backing, HugePages, Region, CHUNK_SIZE};
