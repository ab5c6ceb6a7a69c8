//! An AF_XDP socket whose UMEM is a [`PinnedMemory`], with the bookkeeping that ties ring
//! descriptors to pinned buffers:
//!
//! - **Receive**: every frame on the fill ring is a 4 KiB [`RcBufMut`] allocated from the
//!   pinned memory and parked in `rx_slots` (indexed by frame number) while the kernel owns it.
//!   A received descriptor takes its buffer back out and freezes it into an [`RcBuf`] of the
//!   frame bytes: no copy. Multi-buffer frames (`XDP_PKT_CONTD`) are copied into one new
//!   buffer.
//! - **Transmit**: a frame is a list of [`RcBuf`]s in the UMEM, each split at frame boundaries
//!   into descriptors. Each descriptor's address keeps a reference to its buffer in `in_flight`
//!   until the completion ring returns that address.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;

use cornflakes_mem::{MemoryConfig, Region};
use cornflakes_mem::{PinnedMemory, RcBuf, RcBufMut};
use libc::xdp_desc;

use crate::plan::{frames_spanned, split_at_frames, Reassembled, Reassembly, FRAME_SIZE};
use crate::sys::{BindMode, BindParams, RingSizes, XskSocket};

/// Bytes the kernel reserves in front of a received packet in its frame (copy mode:
/// `XDP_PACKET_HEADROOM`).
pub const RX_HEADROOM: usize = 256;
/// Most descriptors one transmitted frame may use on Linux 6.18 (`MAX_SKB_FRAGS + 1`).
pub const MAX_TX_DESCRIPTORS: usize = 18;

/// Socket parameters.
#[derive(Clone, Debug)]
pub struct XskConfig {
    /// Interface index (in the calling thread's network namespace).
    pub ifindex: u32,
    /// Queue to bind.
    pub queue: u32,
    /// Copy or zero-copy.
    pub mode: BindMode,
    /// Ring sizes (powers of two).
    pub rings: RingSizes,
    /// Frames kept on the fill ring.
    pub rx_frames: usize,
    /// Largest frame accepted when reassembling a multi-buffer receive.
    pub max_rx_frame: usize,
    /// Bind with `XDP_USE_SG` (falls back to single-buffer frames where the kernel refuses).
    pub multi_buffer: bool,
}

/// Counters of the socket layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames delivered (after reassembly).
    pub rx_frames: u64,
    /// Multi-buffer frames reassembled.
    pub rx_multi_buffer: u64,
    /// Descriptors naming a frame we did not post (kernel or ring corruption); dropped.
    pub rx_invalid: u64,
    /// Multi-buffer frames dropped for exceeding the size or part limits.
    pub rx_oversized: u64,
    /// Receive buffers that could not be allocated (fill ring ran short; not a drop).
    pub rx_alloc_failures: u64,
    /// Multi-buffer frames dropped because no buffer for the whole frame could be allocated.
    pub rx_no_buffer: u64,
    /// Frames queued for transmit.
    pub tx_frames: u64,
    /// Descriptors queued for transmit.
    pub tx_descriptors: u64,
    /// Completion addresses that matched no in-flight descriptor.
    pub tx_unknown_completions: u64,
}

/// Why a frame could not be queued. Nothing was queued.
#[derive(Debug, PartialEq, Eq)]
pub enum TxError {
    /// A buffer does not lie in this socket's UMEM.
    NotInUmem,
    /// The frame needs more descriptors than one frame may have.
    TooManyDescriptors { needed: usize, max: usize },
    /// The TX ring has no room: flush and poll completions, then retry.
    RingFull,
}

/// Identity hasher for UMEM addresses (already well spread in their low bits).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

/// One received buffer of a (possibly multi-buffer) frame.
struct RxPart {
    buf: RcBufMut,
    off: usize,
    len: usize,
}

/// An AF_XDP socket over a pinned memory. See the module docs.
pub struct Xsk {
    // Drop order matters: the socket (and with it the kernel's use of the frames) goes first,
    // then the buffers it may have been using.
    sock: Option<XskSocket>,
    rx_slots: Vec<Option<RcBufMut>>,
    in_flight: AddrMap<(RcBuf, u32)>,
    in_flight_descs: usize,
    reasm: Reassembly<RxPart>,
    rx_target: usize,
    rx_posted: usize,
    max_rx_frame: usize,
    umem_base: usize,
    umem_len: usize,
    mem: PinnedMemory,
    scratch: Vec<xdp_desc>,
    stats: XskStats,
}

/// A pinned memory suitable as a UMEM: one region of `bytes` (rounded up to 2 MiB), no growth,
/// items up to 16 KiB.
pub fn umem_memory(bytes: usize) -> Result<PinnedMemory, cornflakes_mem::AllocError> {
    PinnedMemory::new(MemoryConfig {
        initial_bytes: bytes,
        grow: false,
        max_bytes: bytes.div_ceil(cornflakes_mem::CHUNK_SIZE).max(1) * cornflakes_mem::CHUNK_SIZE,
        max_item_size: 16 * 1024,
        ..MemoryConfig::default()
    })
}

impl Xsk {
    /// Creates the socket over `mem`, which must have exactly one region and must not grow
    /// (see [`umem_memory`]), and fills the fill ring.
    pub fn new(mem: PinnedMemory, cfg: &XskConfig) -> io::Result<Xsk> {
        if mem.config().grow {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the UMEM memory must not grow (MemoryConfig::grow = false)",
            ));
        }
        let mut regions = Vec::new();
        mem.for_each_region(|r: &Region| regions.push((r.base() as usize, r.len())));
        let &[(base, len)] = regions.as_slice() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the UMEM memory must have exactly one region, it has {}",
                    regions.len()
                ),
            ));
        };
        // The region's registration is its offset in the UMEM: 0, since the UMEM is the region.
        mem.set_registrar(move |r: &Region| {
            if r.base() as usize == base {
                Ok(Some(0))
            } else {
                Err(io::Error::other("the AF_XDP UMEM cannot grow"))
            }
        })?;
        // SAFETY: the region is a page-aligned mapping owned by `mem`, which we keep (a handle
        // in `self.mem`, dropped after the socket) so it stays mapped while the socket lives.
        // Frames are only handed to the kernel through the rings while we own their buffers.
        let sock = unsafe {
            XskSocket::new(
                base as *mut u8,
                len,
                &BindParams {
                    frame: FRAME_SIZE as u32,
                    sizes: cfg.rings,
                    ifindex: cfg.ifindex,
                    queue: cfg.queue,
                    mode: cfg.mode,
                    multi_buffer: cfg.multi_buffer,
                },
            )?
        };
        let frames = len / FRAME_SIZE;
        let rx_target = cfg
            .rx_frames
            .min(cfg.rings.fill as usize)
            .min(cfg.rings.rx as usize);
        let mut x = Xsk {
            sock: Some(sock),
            rx_slots: (0..frames).map(|_| None).collect(),
            in_flight: AddrMap::default(),
            in_flight_descs: 0,
            reasm: Reassembly::new(MAX_TX_DESCRIPTORS, cfg.max_rx_frame),
            rx_target,
            rx_posted: 0,
            max_rx_frame: cfg.max_rx_frame,
            umem_base: base,
            umem_len: len,
            mem,
            scratch: Vec::with_capacity(MAX_TX_DESCRIPTORS),
            stats: XskStats::default(),
        };
        x.refill();
        if x.rx_posted == 0 {
            return Err(io::Error::other("no receive buffers could be allocated"));
        }
        Ok(x)
    }

    fn sock(&mut self) -> &mut XskSocket {
        self.sock.as_mut().expect("socket lives until drop")
    }

    /// The socket descriptor (for the XSK map).
    pub fn fd(&self) -> i32 {
        self.sock.as_ref().map_or(-1, |s| s.fd())
    }

    /// Whether the kernel runs the socket zero-copy.
    pub fn is_zero_copy(&self) -> bool {
        self.sock.as_ref().is_some_and(|s| s.is_zero_copy())
    }

    /// Whether frames may have several descriptors; when false, [`send`](Self::send) refuses
    /// chains longer than one.
    pub fn is_multi_buffer(&self) -> bool {
        self.sock.as_ref().is_some_and(|s| s.is_multi_buffer())
    }

    /// Most descriptors one transmitted frame may have.
    pub fn max_descriptors(&self) -> usize {
        if self.is_multi_buffer() {
            MAX_TX_DESCRIPTORS
        } else {
            1
        }
    }

    /// The pinned memory that is the UMEM.
    pub fn memory(&self) -> &PinnedMemory {
        &self.mem
    }

    /// Counters.
    pub fn stats(&self) -> XskStats {
        self.stats
    }

    /// The kernel's counters for this socket.
    pub fn kernel_stats(&self) -> io::Result<libc::xdp_statistics> {
        match &self.sock {
            Some(s) => s.statistics(),
            None => Err(io::Error::other("socket closed")),
        }
    }

    /// Descriptors posted for transmit and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight_descs
    }

    /// The UMEM offset of `buf`'s first byte, if it lies in this UMEM.
    #[inline]
    pub fn umem_offset(&self, buf: &RcBuf) -> Option<u64> {
        let a = buf.as_ptr() as usize;
        if a >= self.umem_base && a + buf.len() <= self.umem_base + self.umem_len {
            Some((a - self.umem_base) as u64)
        } else {
            None
        }
    }

    /// Tops the fill ring up to its target with fresh 4 KiB pinned buffers.
    pub fn refill(&mut self) {
        let mut pushed = false;
        while self.rx_posted < self.rx_target {
            let mut buf = match self.mem.alloc(FRAME_SIZE) {
                Ok(b) => b,
                Err(_) => {
                    self.stats.rx_alloc_failures += 1;
                    break;
                }
            };
            let off = (buf.as_mut_ptr() as usize - self.umem_base) as u64;
            let frame = off as usize / FRAME_SIZE;
            if !self.sock().fill.push(off) {
                break; // ring full; `buf` goes back to the pool
            }
            // A frame is either posted or in our hands, never both: the slot is free.
            debug_assert!(self.rx_slots[frame].is_none());
            self.rx_slots[frame] = Some(buf);
            self.rx_posted += 1;
            pushed = true;
        }
        if pushed {
            self.sock().fill.submit();
        }
    }

    /// Receives up to `max` frames into `out` (reassembling multi-buffer ones), refills the
    /// fill ring, and returns how many frames were appended.
    pub fn recv(&mut self, out: &mut Vec<RcBuf>, max: usize) -> usize {
        let mut n = 0;
        // Keep reading past `max` while a multi-buffer frame is incomplete, so a frame is
        // never split across calls (its first parts would hold frames off the fill ring).
        while n < max || self.reasm.in_progress() {
            let Some(d) = self.sock().rx.pop() else { break };
            let frame = d.addr as usize / FRAME_SIZE;
            let off = d.addr as usize % FRAME_SIZE;
            let len = d.len as usize;
            let Some(buf) = self.rx_slots.get_mut(frame).and_then(Option::take) else {
                self.stats.rx_invalid += 1;
                continue;
            };
            self.rx_posted -= 1;
            if off + len > FRAME_SIZE {
                self.stats.rx_invalid += 1;
                continue; // `buf` returns to the pool
            }
            let more = d.options & libc::XDP_PKT_CONTD != 0;
            match self.reasm.push(RxPart { buf, off, len }, len, more) {
                Reassembled::Pending => {}
                Reassembled::Dropped(_parts) => self.stats.rx_oversized += 1,
                Reassembled::Complete(parts) => {
                    if let Some(frame) = self.assemble(parts) {
                        out.push(frame);
                        n += 1;
                        self.stats.rx_frames += 1;
                    }
                }
            }
        }
        self.sock().rx.release();
        self.refill();
        n
    }

    fn assemble(&mut self, mut parts: Vec<RxPart>) -> Option<RcBuf> {
        if parts.len() == 1 {
            let RxPart { mut buf, off, len } = parts.pop()?;
            buf.set_len(off + len);
            return buf.freeze().try_slice(off, len).ok().flatten();
        }
        let total: usize = parts.iter().map(|p| p.len).sum();
        if total > self.max_rx_frame {
            self.stats.rx_oversized += 1;
            return None;
        }
        let mut whole = match self.mem.alloc(total) {
            Ok(b) => b,
            Err(_) => {
                self.stats.rx_no_buffer += 1;
                return None;
            }
        };
        let mut at = 0;
        for p in &mut parts {
            p.buf.set_len(p.off + p.len);
            whole[at..at + p.len].copy_from_slice(&p.buf[p.off..]);
            at += p.len;
        }
        self.stats.rx_multi_buffer += 1;
        Some(whole.freeze())
    }

    /// Free slots in the TX ring (reloading the kernel's index when fewer than `want`).
    pub fn tx_free(&mut self, want: usize) -> usize {
        self.sock().tx.free(want.min(u32::MAX as usize) as u32) as usize
    }

    /// Descriptors `pieces` would take, or `None` when one lies outside this UMEM.
    pub fn descriptors_for(&self, pieces: &[RcBuf]) -> Option<usize> {
        let mut n = 0;
        for p in pieces {
            n += frames_spanned(self.umem_offset(p)?, p.len(), FRAME_SIZE);
        }
        Some(n)
    }

    /// Queues one frame made of `pieces` (all in this UMEM, in order), chained with
    /// `XDP_PKT_CONTD`. On success the pieces are moved out of the vector and kept until their
    /// descriptors complete; on error nothing was queued and `pieces` is unchanged.
    pub fn send(&mut self, pieces: &mut Vec<RcBuf>) -> Result<(), TxError> {
        let needed = self.descriptors_for(pieces).ok_or(TxError::NotInUmem)?;
        let max = self.max_descriptors();
        if needed > max {
            return Err(TxError::TooManyDescriptors { needed, max });
        }
        if needed == 0 {
            pieces.clear();
            return Ok(()); // nothing to send
        }
        self.scratch.clear();
        for p in pieces.iter() {
            let Some(addr) = self.umem_offset(p) else {
                continue;
            };
            for (a, l) in split_at_frames(addr, p.len(), FRAME_SIZE) {
                self.scratch.push(xdp_desc {
                    addr: a,
                    len: l,
                    options: libc::XDP_PKT_CONTD,
                });
            }
        }
        if let Some(last) = self.scratch.last_mut() {
            last.options = 0;
        }
        let descs = std::mem::take(&mut self.scratch);
        let ok = self.sock().tx.push_all(&descs);
        self.scratch = descs;
        if !ok {
            return Err(TxError::RingFull);
        }
        // Keep every buffer alive until its descriptors complete: one reference per distinct
        // descriptor address (a count for repeats of the same address). The caller's
        // reference moves in; only a buffer spanning several frames is cloned.
        for p in pieces.drain(..) {
            let Some(addr) = self.umem_offset(&p) else {
                continue;
            };
            let mut split = split_at_frames(addr, p.len(), FRAME_SIZE).map(|(a, _)| a);
            let Some(first) = split.next() else {
                continue;
            };
            for a in split {
                self.hold(a, || p.clone());
            }
            self.hold(first, || p);
        }
        self.in_flight_descs += needed;
        self.stats.tx_frames += 1;
        self.stats.tx_descriptors += needed as u64;
        Ok(())
    }

    /// Records one more in-flight descriptor at UMEM address `addr`, keeping the buffer `buf`
    /// gives (only called for the first descriptor at that address).
    fn hold(&mut self, addr: u64, buf: impl FnOnce() -> RcBuf) {
        match self.in_flight.get_mut(&addr) {
            Some(e) => e.1 += 1,
            None => {
                self.in_flight.insert(addr, (buf(), 1));
            }
        }
    }

    /// Publishes queued descriptors and asks the kernel to transmit them. In copy mode the
    /// kernel sends at most 32 frames per wake-up, so this kicks until the ring is drained or
    /// a kick makes no progress.
    pub fn flush(&mut self) -> io::Result<()> {
        let sock = self.sock();
        sock.tx.submit();
        let mut left = sock.tx.outstanding();
        let mut kicks = 0;
        while left > 0 || (kicks == 0 && sock.tx.needs_wakeup()) {
            sock.kick_tx()?;
            kicks += 1;
            let now = sock.tx.outstanding();
            if now >= left || kicks > 4096 {
                break; // the device is busy; the rest goes at the next flush
            }
            left = now;
        }
        Ok(())
    }

    /// Reclaims completed descriptors, dropping the references they held; returns how many.
    pub fn poll_completions(&mut self) -> usize {
        let mut n = 0;
        while let Some(addr) = self.sock().completion.pop() {
            n += 1;
            match self.in_flight.get_mut(&addr) {
                Some(e) if e.1 > 1 => e.1 -= 1,
                Some(_) => {
                    self.in_flight.remove(&addr);
                }
                None => {
                    self.stats.tx_unknown_completions += 1;
                    continue;
                }
            }
            self.in_flight_descs -= 1;
        }
        self.sock().completion.release();
        n
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // Close the socket first: afterwards the kernel touches none of the frames, and the
        // buffers parked in `rx_slots` and `in_flight` can go back to the pool.
        self.sock = None;
        self.rx_slots.clear();
        self.in_flight.clear();
    }
}
