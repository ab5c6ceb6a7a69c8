//! The hot path, generic over where the queues live: the send-queue WQE writer with its
//! per-unit buffer table, the completion-queue poller (owner-bit protocol) and the receive
//! queue with its refill. The same code drives a real ConnectX (queue memory from
//! `mlx5dv_init_obj`) and the emulated device ([`crate::emu`]).
//!
//! # Send queue
//! The SQ is `wqebbs` basic blocks of 64 bytes, each four 16-byte units. A WQE is a control
//! segment, an Ethernet segment (checksum flags, the first `inline_len` bytes of the frame),
//! then one data segment per gather entry; it takes `ceil(units / 4)` blocks and may wrap from
//! the last block to the first. The buffer behind the data segment in unit `u` is kept in
//! `slots[u]` (one owner per unit) until a completion covers the WQE; then, and only then, it is
//! dropped. Posting writes units straight into the ring (no descriptor array in between); the
//! doorbell record and the doorbell register are written once per [`SendQueue::flush`].

use std::io;
use std::ptr::NonNull;

use cornflakes_datapath::{BufferTooSmall, SendObject, SendPlan};
use cornflakes_mem::{PinnedMemory, PinnedRef, RcBuf, RcBufMut};
use cornflakes_stack::tx::post_head_then_entries;
use cornflakes_stack::TxSink;

use crate::mmio;
use crate::prm::*;

/// One ring in queue memory: `entries` (a power of two) entries of `stride` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    pub base: NonNull<u8>,
    pub entries: u32,
    pub stride: u32,
}

/// Where a queue pair's rings, doorbell records and doorbell register live.
///
/// # Safety
/// Implementors guarantee, for as long as the value lives: every [`Ring`] points at
/// `entries * stride` bytes valid for volatile reads and writes, aligned to 64; `entries` is a
/// power of two; the SQ stride is 64 and CQ strides are 64; the RQ stride is a power of two of
/// at least 16; the doorbell-record pointers are valid, aligned `u32`s. Nothing but the driver
/// (through [`crate::mmio`]) and the device writes these.
pub unsafe trait QueueMemory {
    /// The send queue (stride 64).
    fn sq(&self) -> Ring;
    /// The receive queue (stride ≥ 16).
    fn rq(&self) -> Ring;
    /// The send completion queue (stride 64).
    fn send_cq(&self) -> Ring;
    /// The receive completion queue (stride 64).
    fn recv_cq(&self) -> Ring;
    /// The SQ doorbell record (`dbrec[MLX5_SND_DBR]`).
    fn sq_dbrec(&self) -> NonNull<u32>;
    /// The RQ doorbell record (`dbrec[MLX5_RCV_DBR]`).
    fn rq_dbrec(&self) -> NonNull<u32>;
    /// The send CQ's consumer-index record.
    fn send_cq_dbrec(&self) -> NonNull<u32>;
    /// The receive CQ's consumer-index record.
    fn recv_cq_dbrec(&self) -> NonNull<u32>;
    /// The queue pair number.
    fn qpn(&self) -> u32;
    /// Writes the first 8 bytes of the last posted WQE to the doorbell register, telling the
    /// device new WQEs are ready (called after the SQ doorbell record was updated).
    fn ring_doorbell(&mut self, word: u64);
    /// Moves the queue pair to RESET (called after an error, once every posted send WQE has
    /// completed). When this returns the device no longer touches the queues: no DMA into
    /// receive buffers, no more CQEs; it has forgotten every posted WQE.
    fn qp_reset(&mut self) -> io::Result<()>;
    /// Moves the queue pair from RESET back to ready-to-send. Both work queues restart at WQE
    /// index 0 (the driver zeroed the doorbell records while it was in RESET).
    fn qp_ready(&mut self) -> io::Result<()>;
}

/// A WQE is signalled (asks for a CQE) at least this often, so buffers come back while a long
/// batch is still being posted.
pub const SIGNAL_EVERY: u32 = 64;

/// Counters of the send queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// WQEs written.
    pub wqes: u64,
    /// Doorbells rung (batches).
    pub doorbells: u64,
    /// Successful send completions.
    pub cqes: u64,
    /// Error completions other than flushes (the device refused a WQE).
    pub error_cqes: u64,
    /// WQEs flushed after an error.
    pub flushed_cqes: u64,
    /// Syndrome of the last error completion (`MLX5_CQE_SYNDROME_*`).
    pub last_syndrome: u8,
    /// Completions that named no outstanding WQE (ignored).
    pub stale_cqes: u64,
    /// Gather entries whose memory had no registration (posted with an invalid lkey; the
    /// device fails the WQE).
    pub unregistered: u64,
    /// Send-queue recoveries after errors.
    pub recoveries: u64,
}

struct Building {
    start: u16,
    units: usize,
}

/// The send queue: WQE writer, buffer table and completion bookkeeping.
pub struct SendQueue {
    base: NonNull<u8>,
    wqebbs: u16,
    dbrec: NonNull<u32>,
    qpn: u32,
    /// Next free WQEBB (free-running, wraps at 2^16 like the WQE index).
    pi: u16,
    /// Oldest WQEBB not yet completed.
    ci: u16,
    slots: Box<[Option<RcBuf>]>,
    /// Per WQEBB: length in WQEBBs of the WQE starting there, 0 if none does.
    wqe_len: Box<[u8]>,
    building: Option<Building>,
    inline_len: usize,
    /// Units one post may need at most (`UNITS_PER_BB + eth_units + 1`, see `free_slots`).
    units_per_post: usize,
    cs_flags: u8,
    last: Option<CtrlSeg>,
    unrung: bool,
    unsignaled: u32,
    outstanding: usize,
    max_outstanding: usize,
    error: bool,
    stats: TxStats,
}

impl SendQueue {
    /// A send queue over `ring` (stride 64, at most 2^15 WQEBBs). Every frame inlines its
    /// first `inline_len` bytes (at least the Ethernet header) and asks the device for
    /// the checksums in `cs_flags`. At most `max_outstanding` WQEs are in flight: every WQE
    /// may end in a CQE (signalled, or flushed after an error), so this is the send CQ's size.
    pub fn new(
        ring: Ring,
        dbrec: NonNull<u32>,
        qpn: u32,
        inline_len: usize,
        cs_flags: u8,
        max_outstanding: usize,
    ) -> io::Result<SendQueue> {
        if ring.stride as usize != MLX5_SEND_WQE_BB
            || !ring.entries.is_power_of_two()
            || ring.entries > 1 << 15
            || ring.entries < 8
        {
            return Err(io::Error::other(format!(
                "unsupported send queue geometry: {} entries of {} bytes",
                ring.entries, ring.stride
            )));
        }
        if !(ETH_SEG_INLINE..=256).contains(&inline_len) {
            return Err(io::Error::other(format!(
                "inline header length {inline_len} outside {ETH_SEG_INLINE}..=256"
            )));
        }
        if max_outstanding == 0 {
            return Err(io::Error::other(
                "a send queue needs a non-empty completion queue",
            ));
        }
        let n = ring.entries as usize;
        let eth_units = 2 + (inline_len - ETH_SEG_INLINE).div_ceil(MLX5_SEND_WQE_DS);
        Ok(SendQueue {
            units_per_post: UNITS_PER_BB + eth_units + 1,
            max_outstanding,
            base: ring.base,
            wqebbs: n as u16,
            dbrec,
            qpn,
            pi: 0,
            ci: 0,
            slots: (0..n * UNITS_PER_BB).map(|_| None).collect(),
            wqe_len: vec![0; n].into_boxed_slice(),
            building: None,
            inline_len,
            cs_flags,
            last: None,
            unrung: false,
            unsignaled: 0,
            outstanding: 0,
            error: false,
            stats: TxStats::default(),
        })
    }

    /// Units the Ethernet segment takes, inline spill included.
    fn eth_units(&self) -> usize {
        2 + (self.inline_len - ETH_SEG_INLINE).div_ceil(MLX5_SEND_WQE_DS)
    }

    /// Most data segments one WQE can carry (the 6-bit `ds` field bounds it).
    pub fn max_data_segments(&self) -> usize {
        MLX5_MAX_DS - 1 - self.eth_units()
    }

    /// Counters so far.
    pub fn stats(&self) -> TxStats {
        self.stats
    }

    /// WQEs posted and not yet completed.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Whether the queue is in the error state (sends refused until recovered).
    #[inline]
    pub fn in_error(&self) -> bool {
        self.error
    }

    fn unit_ptr(&self, start: u16, k: usize) -> (usize, *mut u8) {
        let mask = self.wqebbs as usize * UNITS_PER_BB - 1;
        let idx = (start as usize * UNITS_PER_BB + k) & mask;
        // SAFETY: `idx` < wqebbs * 4, so the unit lies inside the ring (QueueMemory contract).
        (idx, unsafe {
            self.base.as_ptr().add(idx * MLX5_SEND_WQE_DS)
        })
    }

    fn write_unit(&mut self, start: u16, k: usize, unit: &[u8; 16]) -> usize {
        let (idx, p) = self.unit_ptr(start, k);
        // SAFETY: `p` is a 16-byte aligned unit inside the SQ ring (see `unit_ptr`).
        unsafe { mmio::write_unit(p, unit) };
        idx
    }

    // Always inlined: two call sites on the per-descriptor path, each a handful of stores.
    #[inline(always)]
    fn write_data_seg(&mut self, start: u16, k: usize, buf: RcBuf, skip: usize) {
        let lkey = match buf.region().registration() {
            Some(h) => h as u32,
            None => {
                self.stats.unregistered += 1;
                MLX5_INVALID_LKEY
            }
        };
        let addr = buf.as_ptr() as u64 + skip as u64;
        let seg = DataSeg::new(addr, (buf.len() - skip) as u32, lkey);
        let idx = self.write_unit(start, k, &seg.to_bytes());
        // The unit's slot is empty: `complete` empties every unit of a WQE it covers, and a
        // unit is written again only after that (`free_slots` counts from the consumer
        // index). So the old value is not tested for a buffer to drop (measured: ≈ 10
        // instructions per entry in the `count` harness's ring, which is written the same
        // way); were the invariant broken, the old buffer would leak, never be freed early.
        let old = self.slots[idx].replace(buf);
        debug_assert!(old.is_none(), "unit {idx}'s slot still held a buffer");
        std::mem::forget(old);
    }

    /// Units [`begin`](Self::begin) writes for a first buffer of `len` bytes: control and
    /// Ethernet segments, the inline spill, and a data segment when bytes remain.
    #[inline]
    fn head_units(&self, len: usize) -> usize {
        let n_inline = self.inline_len.min(len);
        3 + n_inline
            .saturating_sub(ETH_SEG_INLINE)
            .div_ceil(MLX5_SEND_WQE_DS)
            + usize::from(len > n_inline)
    }

    /// Starts a WQE at `pi`: Ethernet segment with the inlined head of `buf`, then a data
    /// segment for the rest of `buf`. (Always inlined: one copy per posting path, each on
    /// the per-frame path.)
    #[inline(always)]
    fn begin(&mut self, buf: RcBuf) -> Building {
        let start = self.pi;
        let n_inline = self.inline_len.min(buf.len());
        let [e0, e1] = match buf.first_chunk::<ETH_SEG_INLINE>() {
            // Every frame the stack builds (fixed-size copies: no `memcpy` call on the hot path).
            Some(head) => EthSeg::units(self.cs_flags, n_inline as u16, head),
            None => EthSeg::units(self.cs_flags, n_inline as u16, &short_frame_head(&buf)),
        };
        self.write_unit(start, 1, &e0);
        self.write_unit(start, 2, &e1);
        let mut units = 3;
        if n_inline > ETH_SEG_INLINE {
            for chunk in buf[ETH_SEG_INLINE..n_inline].chunks(MLX5_SEND_WQE_DS) {
                let mut u = [0u8; 16];
                u[..chunk.len()].copy_from_slice(chunk);
                self.write_unit(start, units, &u);
                units += 1;
            }
        }
        if buf.len() > n_inline {
            self.write_data_seg(start, units, buf, n_inline);
            units += 1;
        }
        Building { start, units }
    }

    /// Writes the control segment and publishes the WQE to the driver's bookkeeping.
    #[inline(always)]
    fn finish(&mut self, b: Building) {
        self.unsignaled += 1;
        let ce = if self.unsignaled >= SIGNAL_EVERY {
            self.unsignaled = 0;
            MLX5_WQE_CTRL_CQ_UPDATE
        } else {
            0
        };
        let ctrl = CtrlSeg::new(b.start, MLX5_OPCODE_SEND, self.qpn, b.units as u8, ce);
        self.write_unit(b.start, 0, &ctrl.to_bytes());
        let bbs = b.units.div_ceil(UNITS_PER_BB);
        self.wqe_len[(b.start & (self.wqebbs - 1)) as usize] = bbs as u8;
        self.pi = b.start.wrapping_add(bbs as u16);
        self.last = Some(ctrl);
        self.unrung = true;
        self.outstanding += 1;
        self.stats.wqes += 1;
    }

    /// Hands every WQE written since the last flush to the device: the last one is signalled
    /// (so the batch completes), then the doorbell record and the doorbell register.
    pub fn flush<Q: QueueMemory>(&mut self, q: &mut Q) {
        if !self.unrung {
            return;
        }
        let Some(mut ctrl) = self.last else { return };
        if ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE == 0 {
            ctrl.fm_ce_se |= MLX5_WQE_CTRL_CQ_UPDATE;
            let start = ctrl.wqe_index();
            let (_, p) = self.unit_ptr(start, 0);
            // SAFETY: the flag byte of the last WQE's control segment, inside the SQ ring.
            unsafe { mmio::write_u8(p.add(CTRL_FM_CE_SE_OFFSET), ctrl.fm_ce_se) };
            self.unsignaled = 0;
        }
        mmio::to_device_barrier();
        // SAFETY: the SQ doorbell record of this queue (QueueMemory contract).
        unsafe { mmio::write_dbrec(self.dbrec.as_ptr(), u32::from(self.pi)) };
        mmio::to_device_barrier();
        q.ring_doorbell(ctrl.doorbell_word());
        mmio::flush_writes();
        self.last = Some(ctrl);
        self.unrung = false;
        self.stats.doorbells += 1;
    }

    /// Applies one send completion: drops the buffers of every WQE up to and including the
    /// one it names. Returns the WQEs released.
    pub fn complete(&mut self, cqe: &Cqe) -> usize {
        let used = self.pi.wrapping_sub(self.ci);
        let dist = cqe.wqe_counter.wrapping_sub(self.ci);
        let len = self.wqe_len[(cqe.wqe_counter & (self.wqebbs - 1)) as usize];
        if dist >= used || len == 0 {
            self.stats.stale_cqes += 1;
            return 0;
        }
        match cqe.opcode {
            MLX5_CQE_REQ => self.stats.cqes += 1,
            _ if cqe.syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR => {
                self.stats.flushed_cqes += 1;
                self.error = true;
            }
            _ => {
                self.stats.error_cqes += 1;
                self.stats.last_syndrome = cqe.syndrome;
                self.error = true;
            }
        }
        let end = cqe.wqe_counter.wrapping_add(u16::from(len));
        let mut released = 0;
        while self.ci != end {
            let bb = (self.ci & (self.wqebbs - 1)) as usize;
            if self.wqe_len[bb] != 0 {
                self.wqe_len[bb] = 0;
                self.outstanding -= 1;
                released += 1;
            }
            for s in &mut self.slots[bb * UNITS_PER_BB..(bb + 1) * UNITS_PER_BB] {
                *s = None;
            }
            self.ci = self.ci.wrapping_add(1);
        }
        released
    }

    /// Whether the queue is in error and every WQE has completed, so the QP may be reset.
    #[inline]
    pub fn ready_for_reset(&self) -> bool {
        self.error && self.pi == self.ci && self.building.is_none() && !self.unrung
    }

    /// Restarts at WQE index 0 while the device's queue pair is in RESET (sends stay refused
    /// until [`resume`](Self::resume)).
    pub fn reset(&mut self) {
        self.pi = 0;
        self.ci = 0;
        self.last = None;
        self.unsignaled = 0;
        // SAFETY: the SQ doorbell record of this queue.
        unsafe { mmio::write_dbrec(self.dbrec.as_ptr(), 0) };
    }

    /// Accepts sends again once the queue pair is ready.
    pub fn resume(&mut self) {
        self.error = false;
        self.stats.recoveries += 1;
    }
}

/// The inline area of a frame shorter than the Ethernet segment's: its bytes, zero-padded.
/// Out of line and cold, so the usual case keeps its fixed-size copies (LLVM would otherwise
/// merge both into one variable-length `memcpy` call).
#[cold]
#[inline(never)]
fn short_frame_head(frame: &[u8]) -> [u8; ETH_SEG_INLINE] {
    let mut head = [0u8; ETH_SEG_INLINE];
    let n = frame.len().min(ETH_SEG_INLINE);
    head[..n].copy_from_slice(&frame[..n]);
    head
}

impl TxSink for SendQueue {
    /// A conservative count: each post takes at most one unit, and each frame at most the
    /// control + Ethernet units plus three units of padding, so `units / (4 + eth_units + 1)`
    /// posts always fit however they are split into frames. Each post also ends at most one
    /// WQE, so no more posts than WQEs the completion queue still has room for.
    #[inline]
    fn free_slots(&self) -> usize {
        if self.error {
            return 0;
        }
        let free_bbs = self.wqebbs as usize - self.pi.wrapping_sub(self.ci) as usize;
        let building = self.building.as_ref().map_or(0, |b| b.units);
        let units = (free_bbs * UNITS_PER_BB).saturating_sub(building + UNITS_PER_BB);
        let by_ring = units / self.units_per_post;
        let by_cq = self
            .max_outstanding
            .saturating_sub(self.outstanding + usize::from(self.building.is_some()));
        by_ring.min(by_cq)
    }

    /// One walk: the WQE's layout after the head is known from the head's length, so each
    /// zero-copy entry's data segment is written into its unit as the object's walk reaches
    /// it; the Ethernet segment (which inlines the frame's first bytes), the head's data
    /// segment and the control segment follow once the head is written. Nothing reaches the
    /// device before [`flush`](SendQueue::flush).
    #[inline]
    fn post_object_frame<O: SendObject + ?Sized>(
        &mut self,
        mut head: RcBufMut,
        at: usize,
        plan: &SendPlan<'_, O>,
    ) -> Result<(), BufferTooSmall> {
        if self.building.is_some() {
            // A frame already being built: its descriptors come first, this head continues it
            // (the trait's one-behind posting does exactly that).
            plan.write_head(&mut head[at..])?;
            post_head_then_entries(self, head.freeze(), plan);
            return Ok(());
        }
        let start = self.pi;
        let first = self.head_units(head.len());
        let mut units = first;
        plan.write_head_and_entries(&mut head[at..], |b: PinnedRef<'_>| {
            if !b.is_empty() {
                self.write_data_seg(start, units, b.to_rcbuf(), 0);
                units += 1;
            }
        })?;
        let mut b = self.begin(head.freeze());
        debug_assert_eq!((b.start, b.units), (start, first), "head units");
        b.units = units;
        debug_assert!(b.units <= MLX5_MAX_DS, "WQE of {} units", b.units);
        self.finish(b);
        Ok(())
    }

    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        let b = match self.building.take() {
            None => self.begin(buf),
            Some(mut b) => {
                if !buf.is_empty() {
                    self.write_data_seg(b.start, b.units, buf, 0);
                    b.units += 1;
                }
                b
            }
        };
        debug_assert!(b.units <= MLX5_MAX_DS, "WQE of {} units", b.units);
        if end_of_frame {
            self.finish(b);
        } else {
            self.building = Some(b);
        }
    }
}

/// A completion queue polled with the owner-bit protocol.
pub struct CqPoller {
    base: NonNull<u8>,
    entries: u32,
    log: u32,
    ci: u32,
    dbrec: NonNull<u32>,
    dirty: bool,
}

impl CqPoller {
    /// A poller over `ring` (stride 64) and its consumer-index record.
    pub fn new(ring: Ring, dbrec: NonNull<u32>) -> io::Result<CqPoller> {
        if ring.stride != 64 || !ring.entries.is_power_of_two() {
            return Err(io::Error::other(format!(
                "unsupported completion queue geometry: {} entries of {} bytes",
                ring.entries, ring.stride
            )));
        }
        Ok(CqPoller {
            base: ring.base,
            entries: ring.entries,
            log: ring.entries.trailing_zeros(),
            ci: 0,
            dbrec,
            dirty: false,
        })
    }

    /// The next completion, if the device has written one: its opcode is not INVALID and its
    /// owner bit equals the consumer index's wrap parity.
    #[inline]
    pub fn poll(&mut self) -> Option<Cqe> {
        let idx = (self.ci & (self.entries - 1)) as usize;
        // SAFETY: `idx` < entries, so the 64-byte entry lies inside the CQ ring.
        let p = unsafe { self.base.as_ptr().add(idx * 64) };
        // SAFETY: the last byte of that entry.
        let op_own = unsafe { mmio::read_u8(p.add(cqe_off::OP_OWN)) };
        let parity = ((self.ci >> self.log) & 1) as u8;
        if op_own >> 4 == MLX5_CQE_INVALID || (op_own & MLX5_CQE_OWNER_MASK) != parity {
            return None;
        }
        mmio::from_device_barrier();
        // SAFETY: the whole entry, 64-byte aligned inside the ring.
        let raw = unsafe { mmio::read_cqe(p) };
        self.ci = self.ci.wrapping_add(1);
        self.dirty = true;
        Some(Cqe::decode(&raw))
    }

    /// Number of entries.
    #[inline]
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// Tells the device which entries it may overwrite (once per poll burst).
    #[inline]
    pub fn update_ci(&mut self) {
        if self.dirty {
            mmio::to_device_barrier();
            // SAFETY: this CQ's consumer-index record.
            unsafe { mmio::write_dbrec(self.dbrec.as_ptr(), self.ci & 0x00ff_ffff) };
            self.dirty = false;
        }
    }
}

/// The receive queue: one pinned buffer per posted WQE, owned by its slot until the device
/// completes it.
pub struct RecvQueue {
    base: NonNull<u8>,
    entries: u32,
    stride: usize,
    dbrec: NonNull<u32>,
    pi: u32,
    ci: u32,
    bufs: Box<[Option<RcBufMut>]>,
    buf_size: usize,
}

/// What one receive completion yielded.
#[derive(Debug)]
pub enum RxCompletion {
    /// A frame of `cqe.byte_cnt` bytes in the buffer.
    Frame(RcBufMut),
    /// The device reported an error for the WQE (the buffer went back to the pool).
    Error { syndrome: u8 },
    /// The completion did not match the next posted WQE, or claimed more bytes than the
    /// buffer holds (ignored / dropped).
    Bogus,
}

impl RecvQueue {
    /// A receive queue over `ring` with buffers of `buf_size` bytes.
    pub fn new(ring: Ring, dbrec: NonNull<u32>, buf_size: usize) -> io::Result<RecvQueue> {
        let stride = ring.stride as usize;
        if !ring.entries.is_power_of_two() || stride < 16 || !stride.is_power_of_two() {
            return Err(io::Error::other(format!(
                "unsupported receive queue geometry: {} entries of {} bytes",
                ring.entries, ring.stride
            )));
        }
        Ok(RecvQueue {
            base: ring.base,
            entries: ring.entries,
            stride,
            dbrec,
            pi: 0,
            ci: 0,
            bufs: (0..ring.entries).map(|_| None).collect(),
            buf_size,
        })
    }

    /// Buffers posted and not yet completed.
    #[inline]
    pub fn posted(&self) -> usize {
        self.pi.wrapping_sub(self.ci) as usize
    }

    /// Whether a WQE is free for [`refill`](Self::refill) (a check the receive poll inlines,
    /// so a poll that consumed nothing does not call it).
    #[inline]
    pub fn needs_refill(&self) -> bool {
        self.posted() < self.entries as usize
    }

    /// Posts fresh buffers into every free WQE, then updates the doorbell record once.
    /// Returns `(posted, failed)`: `failed` is non-zero when the pool ran dry.
    pub fn refill(&mut self, mem: &PinnedMemory) -> (usize, usize) {
        let mut posted = 0;
        let mut failed = 0;
        while self.posted() < self.entries as usize {
            let mut b = match mem.alloc(self.buf_size) {
                Ok(b) => b,
                Err(_) => {
                    failed += 1;
                    break;
                }
            };
            let cap = b.capacity();
            b.set_len(cap);
            let lkey = b
                .region()
                .registration()
                .map_or(MLX5_INVALID_LKEY, |h| h as u32);
            let idx = (self.pi & (self.entries - 1)) as usize;
            let seg = DataSeg::new(b.as_mut_ptr() as u64, cap as u32, lkey);
            // SAFETY: entry `idx` < entries lies inside the RQ ring; stride ≥ 16.
            let p = unsafe { self.base.as_ptr().add(idx * self.stride) };
            // SAFETY: the first unit of that entry.
            unsafe { mmio::write_unit(p, &seg.to_bytes()) };
            if self.stride > 16 {
                let end = DataSeg::new(0, 0, MLX5_INVALID_LKEY);
                // SAFETY: the second unit of the entry (stride ≥ 32).
                unsafe { mmio::write_unit(p.add(16), &end.to_bytes()) };
            }
            // The device owns the memory now; the slot keeps the only handle to it.
            self.bufs[idx] = Some(b);
            self.pi = self.pi.wrapping_add(1);
            posted += 1;
        }
        if posted > 0 {
            mmio::to_device_barrier();
            // SAFETY: the RQ doorbell record.
            unsafe { mmio::write_dbrec(self.dbrec.as_ptr(), self.pi & 0xffff) };
        }
        (posted, failed)
    }

    /// Forgets every posted buffer (back to the pool) and restarts at WQE index 0, while the
    /// device's queue pair is in RESET (it no longer writes into them).
    pub fn reset(&mut self) {
        for b in self.bufs.iter_mut() {
            *b = None;
        }
        self.pi = 0;
        self.ci = 0;
        // SAFETY: the RQ doorbell record.
        unsafe { mmio::write_dbrec(self.dbrec.as_ptr(), 0) };
    }

    /// Takes the buffer of the next WQE for a receive completion.
    #[inline]
    pub fn complete(&mut self, cqe: &Cqe) -> RxCompletion {
        if self.posted() == 0 || cqe.wqe_counter != self.ci as u16 {
            return RxCompletion::Bogus;
        }
        let idx = (self.ci & (self.entries - 1)) as usize;
        self.ci = self.ci.wrapping_add(1);
        let Some(mut b) = self.bufs[idx].take() else {
            return RxCompletion::Bogus;
        };
        match cqe.opcode {
            MLX5_CQE_RESP_SEND if (cqe.byte_cnt as usize) <= b.capacity() => {
                b.set_len(cqe.byte_cnt as usize);
                RxCompletion::Frame(b)
            }
            MLX5_CQE_RESP_SEND => RxCompletion::Bogus,
            _ => RxCompletion::Error {
                syndrome: cqe.syndrome,
            },
        }
    }
}
