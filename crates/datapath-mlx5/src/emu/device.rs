//! The device side of the emulated ConnectX, shared by the single-threaded [`EmuNic`] and the
//! [threaded](super::threaded) device: the queue memory ([`Shared`]: rings, doorbell records,
//! memory-region table), and the device's own state and behaviour ([`Device`]: consuming send
//! WQEs, validating and gathering their segments, writing CQEs, delivering received frames).
//!
//! Everything the driver and the device both touch lives in [`Shared`] and is accessed only
//! through [`crate::mmio`], whose hand-over words (doorbell records, CQE `op_own`) are atomic
//! with release/acquire ordering. [`Device`] is owned by whoever plays the device (the NIC
//! handle, or the device thread); the driver never sees it.
//!
//! [`EmuNic`]: super::EmuNic

use std::alloc::{self, Layout};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cornflakes_stack::wire::{ethernet, ipv4, udp};

use super::{EmuConfig, EmuStats};
use crate::mmio;
use crate::prm::*;
use crate::queue::Ring;
use crate::FlowRule;

/// One allocation standing in for DMA-able queue memory.
pub(crate) struct DmaArea {
    pub(crate) ptr: NonNull<u8>,
    layout: Layout,
}

impl DmaArea {
    fn new(len: usize, fill: Option<(usize, usize, u8)>) -> DmaArea {
        let layout = Layout::from_size_align(len.max(64), 4096).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        if let Some((stride, offset, byte)) = fill {
            for e in 0..len / stride {
                // SAFETY: `e * stride + offset < len`, inside the allocation, which no other
                // thread can see yet.
                unsafe { mmio::write_u8(ptr.as_ptr().add(e * stride + offset), byte) };
            }
        }
        DmaArea { ptr, layout }
    }
}

impl Drop for DmaArea {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; nothing refers to it any more (the
        // `Shared` owning it is dropped only when the queues, the NIC handle and the device
        // thread are all gone).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Most memory regions one emulated device registers.
pub const MAX_MRS: usize = 4096;

/// The device's memory-region table: append-only, so the device reads it without a lock.
/// A region's lkey is `lkey_base + index`, so a lookup is one bounds check.
pub(crate) struct MrTable {
    base: u32,
    addr: Box<[AtomicU64]>,
    len: Box<[AtomicU64]>,
    count: AtomicU32,
    /// Serializes registrations (rare: one per 2 MiB region), never taken by the device.
    add: Mutex<()>,
}

impl MrTable {
    fn new(base: u32) -> MrTable {
        MrTable {
            base,
            addr: (0..MAX_MRS).map(|_| AtomicU64::new(0)).collect(),
            len: (0..MAX_MRS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU32::new(0),
            add: Mutex::new(()),
        }
    }

    /// Registers `[addr, addr + len)` and returns its lkey.
    pub(crate) fn add(&self, addr: u64, len: u64) -> io::Result<u32> {
        let _g = self.add.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.count.load(Ordering::Relaxed) as usize;
        if n >= MAX_MRS {
            return Err(io::Error::other(format!(
                "emulated device: all {MAX_MRS} memory regions in use"
            )));
        }
        self.addr[n].store(addr, Ordering::Relaxed);
        self.len[n].store(len, Ordering::Relaxed);
        // Publishes the entry: a reader that sees the new count sees its fields.
        self.count.store(n as u32 + 1, Ordering::Release);
        Ok(self.base + n as u32)
    }

    /// Whether `[addr, addr + len)` lies inside the region `lkey` names.
    #[inline]
    pub(crate) fn check(&self, lkey: u32, addr: u64, len: u64) -> bool {
        let i = lkey.wrapping_sub(self.base) as usize;
        if i >= self.count.load(Ordering::Acquire) as usize {
            return false;
        }
        let (a, l) = (
            self.addr[i].load(Ordering::Relaxed),
            self.len[i].load(Ordering::Relaxed),
        );
        addr >= a && addr.checked_add(len).is_some_and(|end| end <= a + l)
    }
}

/// Offsets in the doorbell-record area.
pub(crate) const DB_QP: usize = 0;
pub(crate) const DB_SCQ: usize = 64;
pub(crate) const DB_RCQ: usize = 128;

/// The queue memory and memory regions, shared by the driver and the device.
pub(crate) struct Shared {
    pub(crate) cfg: EmuConfig,
    pub(crate) sq: DmaArea,
    pub(crate) rq: DmaArea,
    pub(crate) scq: DmaArea,
    pub(crate) rcq: DmaArea,
    pub(crate) dbrec: DmaArea,
    pub(crate) bf: DmaArea,
    pub(crate) mrs: MrTable,
}

// SAFETY: `Shared` is a set of raw allocations plus an atomic region table. The allocations are
// only accessed through `mmio` under the queue protocol: each WQE, CQE body and doorbell-record
// value has one writer, and the other side reads it only after an acquire of the word that
// hands it over (doorbell record, `op_own`), which the writer release-stored after writing it.
// The hand-over words themselves are accessed atomically. So sharing `&Shared` across the
// driver thread and the device thread introduces no data race.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn new(cfg: EmuConfig) -> io::Result<Shared> {
        for (what, n) in [
            ("sq_wqebbs", cfg.sq_wqebbs),
            ("rq_entries", cfg.rq_entries),
            ("rq_stride", cfg.rq_stride),
            ("cq_entries", cfg.cq_entries),
        ] {
            if !n.is_power_of_two() {
                return Err(io::Error::other(format!(
                    "{what} = {n} is not a power of two"
                )));
            }
        }
        if cfg.rq_stride < 16 {
            return Err(io::Error::other("rq_stride below 16"));
        }
        let cq = |n: u32| DmaArea::new(n as usize * 64, Some((64, 63, CQE_INIT_OP_OWN)));
        Ok(Shared {
            sq: DmaArea::new(cfg.sq_wqebbs as usize * 64, None),
            rq: DmaArea::new((cfg.rq_entries * cfg.rq_stride) as usize, None),
            scq: cq(cfg.cq_entries),
            rcq: cq(cfg.cq_entries),
            dbrec: DmaArea::new(192, None),
            bf: DmaArea::new(64, None),
            mrs: MrTable::new(cfg.lkey_base),
            cfg,
        })
    }

    /// A doorbell record (`off`: area, `idx`: u32 index inside it).
    pub(crate) fn dbrec_ptr(&self, off: usize, idx: usize) -> NonNull<u32> {
        debug_assert!(off + 4 * idx + 4 <= 192);
        // SAFETY: `off + 4 * idx + 4 <= 192`, inside the doorbell area.
        unsafe { NonNull::new_unchecked(self.dbrec.ptr.as_ptr().add(off).cast::<u32>().add(idx)) }
    }

    pub(crate) fn sq_ring(&self) -> Ring {
        Ring {
            base: self.sq.ptr,
            entries: self.cfg.sq_wqebbs,
            stride: 64,
        }
    }

    pub(crate) fn rq_ring(&self) -> Ring {
        Ring {
            base: self.rq.ptr,
            entries: self.cfg.rq_entries,
            stride: self.cfg.rq_stride,
        }
    }

    pub(crate) fn send_cq_ring(&self) -> Ring {
        Ring {
            base: self.scq.ptr,
            entries: self.cfg.cq_entries,
            stride: 64,
        }
    }

    pub(crate) fn recv_cq_ring(&self) -> Ring {
        Ring {
            base: self.rcq.ptr,
            entries: self.cfg.cq_entries,
            stride: 64,
        }
    }

    fn read_db(&self, off: usize, idx: usize) -> u32 {
        // SAFETY: a doorbell record inside the doorbell area, only accessed atomically.
        unsafe { mmio::read_dbrec(self.dbrec_ptr(off, idx).as_ptr()) }
    }

    /// The SQ doorbell record (producer index the driver published).
    pub(crate) fn sq_db(&self) -> u16 {
        self.read_db(DB_QP, MLX5_SND_DBR) as u16
    }

    /// The RQ doorbell record.
    pub(crate) fn rq_db(&self) -> u16 {
        self.read_db(DB_QP, MLX5_RCV_DBR) as u16
    }

    fn sq_unit(&self, start: u16, k: usize) -> [u8; 16] {
        let mask = self.cfg.sq_wqebbs as usize * UNITS_PER_BB - 1;
        let idx = (start as usize * UNITS_PER_BB + k) & mask;
        // SAFETY: idx < wqebbs * 4 units inside the SQ area, 16-aligned. The unit belongs to a
        // WQE below the doorbell record the device acquired, which the driver no longer writes.
        unsafe { mmio::read_unit(self.sq.ptr.as_ptr().add(idx * 16)) }
    }
}

/// A frame the device is sending: its WQE was validated (every data segment lies inside a
/// registered region), nothing was copied yet. Readers take as much as they need: a whole
/// frame ([`gather`](Self::gather)), or only its first bytes ([`read_prefix`](Self::read_prefix)),
/// as a NIC reads every byte but a host-side consumer may not care.
pub struct TxFrame<'a> {
    sh: &'a Shared,
    start: u16,
    ds: usize,
    eth: EthSeg,
    spill: usize,
    len: usize,
    data_segments: usize,
    queue: usize,
}

impl TxFrame<'_> {
    /// Index of the queue set whose send queue this frame came from (0 on a device with one).
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// Frame length before padding.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame is empty (never, for a valid WQE).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Data segments (gather entries) of the WQE.
    pub fn data_segments(&self) -> usize {
        self.data_segments
    }

    /// The checksum flags of the WQE's Ethernet segment.
    pub fn cs_flags(&self) -> u8 {
        self.eth.cs_flags
    }

    /// Copies the first `out.len()` bytes of the frame (fewer if it is shorter) into `out`,
    /// without checksum offload applied; returns how many.
    pub fn read_prefix(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        self.visit(|src| {
            let n = src.len().min(out.len() - at);
            out[at..at + n].copy_from_slice(&src[..n]);
            at += n;
            at < out.len()
        });
        at
    }

    /// Reads the frame in place, as a NIC's DMA reads it: calls `f` with each piece of it in
    /// order — the inline headers, then every data segment's bytes where the driver left
    /// them (nothing is copied) — until `f` returns `false` or the frame ends. No checksum
    /// offload is applied. Returns the bytes visited (the frame's length when `f` never
    /// stopped).
    pub fn visit(&self, mut f: impl FnMut(&[u8]) -> bool) -> usize {
        let mut seen = 0;
        let mut give = |piece: &[u8], seen: &mut usize| {
            *seen += piece.len();
            piece.is_empty() || f(piece)
        };
        let n_inline = self.eth.inline_len();
        let mut head = [0u8; ETH_SEG_INLINE];
        head[..2].copy_from_slice(&self.eth.inline_hdr_start);
        head[2..].copy_from_slice(&self.eth.inline_hdr);
        if !give(&head[..n_inline.min(ETH_SEG_INLINE)], &mut seen) {
            return seen;
        }
        let mut left = n_inline.saturating_sub(ETH_SEG_INLINE);
        for k in 0..self.spill {
            let u = self.sh.sq_unit(self.start, 3 + k);
            let n = left.min(16);
            left -= n;
            if !give(&u[..n], &mut seen) {
                return seen;
            }
        }
        for k in 3 + self.spill..self.ds {
            let d = DataSeg::from_bytes(&self.sh.sq_unit(self.start, k));
            // SAFETY: the WQE was validated: `[addr, addr + len)` lies inside a registered
            // region, whose memory the driver keeps alive and unmodified until this WQE's
            // completion, which the device writes only after the sink it handed this frame
            // to has returned; the slice does not outlive this call of `f`.
            let piece =
                unsafe { std::slice::from_raw_parts(d.address() as *const u8, d.len() as usize) };
            if !give(piece, &mut seen) {
                return seen;
            }
        }
        seen
    }

    /// The whole frame as the wire carries it: gathered, checksums filled as the Ethernet
    /// segment asks, padded to 60 bytes. `out` is cleared first.
    pub fn gather(&self, out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.len, 0);
        let n = self.read_prefix(out);
        debug_assert_eq!(n, self.len);
        if self.eth.cs_flags & (MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM) != 0 {
            fill_checksums(out, self.eth.cs_flags);
        }
        if out.len() < 60 {
            out.resize(60, 0);
        }
    }
}

/// The device's own state (never touched by the driver).
pub(crate) struct Device {
    pub(crate) sq_ci: u16,
    pub(crate) sq_db_pi: u16,
    pub(crate) error: bool,
    /// Queue pair in RESET: nothing is sent or received.
    pub(crate) in_reset: bool,
    pub(crate) scq_pi: u32,
    pub(crate) rcq_pi: u32,
    /// The send and receive CQs' consumer indexes as last read from their doorbell records.
    /// The device re-reads one only when the CQ looks full by it, as hardware does: reading the
    /// record for every CQE would pull its line from the driver's core each time.
    scq_ci_seen: u32,
    rcq_ci_seen: u32,
    pub(crate) rq_ci: u32,
    /// The receive queue's producer index as last read from its doorbell record; re-read only
    /// when every WQE below it was taken (same reason).
    rq_pi_seen: u16,
    pub(crate) flows: Vec<FlowRule>,
    pub(crate) stats: EmuStats,
    /// Time the device spends per data segment it validates and reads (the gather engine's
    /// cost, a model knob; zero by default).
    pub(crate) delay_per_segment: Duration,
    /// Index of this queue set on its port (several per port: one per server core).
    pub(crate) queue: usize,
}

impl Device {
    pub(crate) fn new() -> Device {
        Device {
            queue: 0,
            sq_ci: 0,
            sq_db_pi: 0,
            error: false,
            in_reset: false,
            scq_pi: 0,
            rcq_pi: 0,
            scq_ci_seen: 0,
            rcq_ci_seen: 0,
            rq_ci: 0,
            rq_pi_seen: 0,
            flows: Vec::new(),
            stats: EmuStats::default(),
            delay_per_segment: Duration::ZERO,
        }
    }

    /// Writes a CQE into the send (`send = true`) or receive CQ, unless it is full.
    fn post_cqe(&mut self, sh: &Shared, send: bool, mut cqe: Cqe) {
        let (area, pi, db, seen) = if send {
            (&sh.scq, self.scq_pi, DB_SCQ, &mut self.scq_ci_seen)
        } else {
            (&sh.rcq, self.rcq_pi, DB_RCQ, &mut self.rcq_ci_seen)
        };
        let entries = sh.cfg.cq_entries;
        if pi.wrapping_sub(*seen) & 0x00ff_ffff >= entries {
            // Full by the last consumer index seen: read the one the driver published now
            // (acquire: its reads of the entries it consumed happened before we overwrite
            // them; entries below an index read earlier were ordered by that read).
            *seen = sh.read_db(db, 0);
            if pi.wrapping_sub(*seen) & 0x00ff_ffff >= entries {
                self.stats.cq_overruns += 1;
                return;
            }
        }
        cqe.owner = ((pi >> entries.trailing_zeros()) & 1) as u8;
        cqe.qpn = sh.cfg.qpn;
        let idx = (pi & (entries - 1)) as usize;
        // SAFETY: idx < entries: a 64-byte, 64-aligned CQE slot inside the CQ area, which the
        // driver has consumed (checked against its consumer index above), so it only reads the
        // slot's `op_own` (atomically) until `write_cqe` release-stores the new one.
        unsafe { mmio::write_cqe(area.ptr.as_ptr().add(idx * 64), &cqe.encode()) };
        if send {
            self.scq_pi = pi.wrapping_add(1);
        } else {
            self.rcq_pi = pi.wrapping_add(1);
        }
    }

    /// The single-threaded doorbell: checks the word against the last WQE and takes the
    /// producer index from the doorbell record.
    pub(crate) fn doorbell(&mut self, sh: &Shared, word: u64) {
        self.stats.doorbells += 1;
        if self.in_reset {
            self.stats.bad_doorbells += 1;
            return;
        }
        let pi = sh.sq_db();
        // The word is the first 8 bytes of the last WQE's control segment.
        let b = word.to_ne_bytes();
        let mut u = [0u8; 16];
        u[..8].copy_from_slice(&b);
        let ctrl = CtrlSeg::from_bytes(&u);
        let last = sh.sq_unit(ctrl.wqe_index(), 0);
        if last[..8] != b[..] || ctrl.qpn() != sh.cfg.qpn {
            self.stats.bad_doorbells += 1;
            return;
        }
        self.sq_db_pi = pi;
    }

    /// The threaded device polls the SQ doorbell record instead (as a device that fetches
    /// WQEs by DMA after a doorbell does); returns whether new WQEs were posted.
    pub(crate) fn poll_doorbell_record(&mut self, sh: &Shared) -> bool {
        if self.in_reset {
            return false;
        }
        let pi = sh.sq_db();
        if pi == self.sq_db_pi {
            return false;
        }
        self.stats.doorbells += 1;
        self.sq_db_pi = pi;
        true
    }

    fn spin(&self, segments: usize) {
        if self.delay_per_segment.is_zero() || segments == 0 {
            return;
        }
        let until = Instant::now() + self.delay_per_segment * segments as u32;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Validates the WQE at `start` (`ds` units): the Ethernet segment, every data segment's
    /// length and memory region, the frame length against the MTU.
    fn validate<'a>(&self, sh: &'a Shared, start: u16, ds: usize) -> Result<TxFrame<'a>, u8> {
        let mut e = [0u8; 32];
        e[..16].copy_from_slice(&sh.sq_unit(start, 1));
        e[16..].copy_from_slice(&sh.sq_unit(start, 2));
        let eth = EthSeg::from_bytes(&e);
        let n_inline = eth.inline_len();
        let spill = n_inline.saturating_sub(ETH_SEG_INLINE).div_ceil(16);
        if 3 + spill > ds {
            return Err(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
        }
        let mut len = n_inline;
        for k in 3 + spill..ds {
            let d = DataSeg::from_bytes(&sh.sq_unit(start, k));
            let l = d.len();
            if l & MLX5_INLINE_SEG != 0 || l == 0 {
                return Err(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
            }
            if !sh.mrs.check(d.key(), d.address(), u64::from(l)) {
                return Err(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
            }
            len += l as usize;
        }
        if len > sh.cfg.mtu + ethernet::HEADER_LEN + 4 {
            return Err(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
        }
        let data_segments = ds - 3 - spill;
        self.spin(data_segments);
        Ok(TxFrame {
            sh,
            start,
            ds,
            eth,
            spill,
            len,
            data_segments,
            queue: self.queue,
        })
    }

    /// Consumes every WQE up to the producer index seen at the last doorbell: each valid one
    /// is handed to `sink` (which reads what it needs of the frame) and completed as it asked;
    /// an invalid one gets an error CQE and puts the queue in error, flushing the rest.
    /// Returns the frames sent.
    pub(crate) fn run_sq(&mut self, sh: &Shared, sink: &mut dyn FnMut(&TxFrame<'_>)) -> usize {
        if self.in_reset {
            return 0;
        }
        if self.error {
            self.flush_rq(sh);
        }
        let mut sent = 0;
        while self.sq_ci != self.sq_db_pi {
            let start = self.sq_ci;
            let ctrl = CtrlSeg::from_bytes(&sh.sq_unit(start, 0));
            let ds = ctrl.ds() as usize;
            let bbs = ds.div_ceil(UNITS_PER_BB).max(1) as u16;
            self.stats.wqes += 1;
            let valid = ctrl.opcode() == MLX5_OPCODE_SEND
                && ctrl.wqe_index() == start
                && ctrl.qpn() == sh.cfg.qpn
                && ds >= 3;
            let result = if self.error {
                Err(MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
            } else if !valid {
                Err(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR)
            } else {
                self.validate(sh, start, ds)
            };
            match result {
                Ok(frame) => {
                    self.stats.frames_sent += 1;
                    let dsegs = frame.data_segments;
                    self.stats.data_segments += dsegs as u64;
                    self.stats.max_data_segments = self.stats.max_data_segments.max(dsegs);
                    sink(&frame);
                    sent += 1;
                    // The sink has read what it wanted: the CQE (which releases the buffers to
                    // the driver) comes after.
                    if ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE != 0 {
                        self.post_cqe(
                            sh,
                            true,
                            Cqe {
                                opcode: MLX5_CQE_REQ,
                                wqe_counter: start,
                                ..Cqe::default()
                            },
                        );
                    }
                }
                Err(syndrome) => {
                    if syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR {
                        self.stats.tx_flushed += 1;
                    } else {
                        self.stats.tx_errors += 1;
                    }
                    self.error = true;
                    self.flush_rq(sh);
                    self.post_cqe(
                        sh,
                        true,
                        Cqe {
                            opcode: MLX5_CQE_REQ_ERR,
                            wqe_counter: start,
                            syndrome,
                            ..Cqe::default()
                        },
                    );
                }
            }
            self.sq_ci = start.wrapping_add(bbs);
        }
        sent
    }

    /// In the error state the device completes every posted receive WQE with a flush error,
    /// as the whole queue pair is in error.
    pub(crate) fn flush_rq(&mut self, sh: &Shared) {
        let pi = sh.rq_db();
        self.rq_pi_seen = pi;
        while self.rq_ci as u16 != pi {
            let counter = self.rq_ci as u16;
            self.rq_ci = self.rq_ci.wrapping_add(1);
            self.stats.rx_flushed += 1;
            self.post_cqe(
                sh,
                false,
                Cqe {
                    opcode: MLX5_CQE_RESP_ERR,
                    wqe_counter: counter,
                    syndrome: MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
                    ..Cqe::default()
                },
            );
        }
    }

    /// Delivers a frame of `len` bytes that `write` puts into the receive buffer (given
    /// exactly `len` bytes), with the CQE checksum flags `flags` (computed from the buffer
    /// when `None`). Returns whether a receive WQE took it.
    pub(crate) fn deliver_with(
        &mut self,
        sh: &Shared,
        len: usize,
        flags: Option<(u8, u8)>,
        steer: &[u8],
        write: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        if self.in_reset {
            self.stats.rx_qp_error += 1;
            return false;
        }
        if self.error {
            // The QP is in error: frames are not received, posted WQEs are flushed.
            self.stats.rx_qp_error += 1;
            self.flush_rq(sh);
            return false;
        }
        if !self.accepts(steer) {
            self.stats.rx_steered_away += 1;
            return false;
        }
        if len > sh.cfg.mtu + ethernet::HEADER_LEN + 4 {
            self.stats.rx_oversize += 1;
            return false;
        }
        if self.rq_pi_seen == self.rq_ci as u16 {
            // Every WQE seen posted was taken: read the doorbell record again (acquire: the
            // WQEs below it were written before).
            self.rq_pi_seen = sh.rq_db();
            if self.rq_pi_seen == self.rq_ci as u16 {
                self.stats.rx_no_wqe += 1;
                return false;
            }
        }
        let idx = (self.rq_ci & (sh.cfg.rq_entries - 1)) as usize;
        // SAFETY: entry idx of the RQ area, 16-aligned; posted (below the doorbell record we
        // acquired), so the driver no longer writes it.
        let unit =
            unsafe { mmio::read_unit(sh.rq.ptr.as_ptr().add(idx * sh.cfg.rq_stride as usize)) };
        let d = DataSeg::from_bytes(&unit);
        let counter = self.rq_ci as u16;
        self.rq_ci = self.rq_ci.wrapping_add(1);
        let syndrome = if !sh.mrs.check(d.key(), d.address(), u64::from(d.len())) {
            Some(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)
        } else if len > d.len() as usize {
            Some(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR)
        } else {
            None
        };
        if let Some(syndrome) = syndrome {
            self.stats.rx_errors += 1;
            self.post_cqe(
                sh,
                false,
                Cqe {
                    opcode: MLX5_CQE_RESP_ERR,
                    wqe_counter: counter,
                    syndrome,
                    ..Cqe::default()
                },
            );
            return false;
        }
        // SAFETY: `[addr, addr + len)` was checked against a registered region, whose memory
        // the driver keeps alive; the buffer is posted, so the driver holds no reference into
        // it until the CQE below hands it back (release in `write_cqe`).
        let buf = unsafe { std::slice::from_raw_parts_mut(d.address() as *mut u8, len) };
        write(buf);
        if sh.cfg.demote_lines > 0 {
            let n = buf.len().min(sh.cfg.demote_lines.saturating_mul(64));
            mmio::demote_to_llc(&buf[..n]);
        }
        let (hds_ip_ext, l4_hdr_type_etc) = flags.unwrap_or_else(|| rx_offload_flags(buf));
        self.stats.frames_received += 1;
        self.post_cqe(
            sh,
            false,
            Cqe {
                opcode: MLX5_CQE_RESP_SEND,
                wqe_counter: counter,
                byte_cnt: len as u32,
                hds_ip_ext,
                l4_hdr_type_etc,
                ..Cqe::default()
            },
        );
        true
    }

    /// Whether one of this queue set's flow rules matches `frame`.
    pub(crate) fn accepts(&self, frame: &[u8]) -> bool {
        self.flows.iter().any(|r| r.matches(frame))
    }

    /// Delivers a whole frame (copied into the receive buffer, checksum flags computed).
    pub(crate) fn deliver(&mut self, sh: &Shared, frame: &[u8]) -> bool {
        self.deliver_with(sh, frame.len(), None, frame, &mut |buf| {
            buf.copy_from_slice(frame)
        })
    }

    /// Moves the queue pair to RESET (refused while doorbelled send WQEs are unprocessed).
    pub(crate) fn qp_reset(&mut self) -> io::Result<()> {
        if self.sq_ci != self.sq_db_pi {
            return Err(io::Error::other("send queue still has WQEs in the device"));
        }
        self.in_reset = true;
        self.error = false;
        self.sq_ci = 0;
        self.sq_db_pi = 0;
        self.rq_ci = 0;
        self.rq_pi_seen = 0;
        self.stats.resets += 1;
        Ok(())
    }

    /// Moves the queue pair from RESET to ready (refused while a doorbell record is stale).
    pub(crate) fn qp_ready(&mut self, sh: &Shared) -> io::Result<()> {
        if sh.rq_db() != 0 || sh.sq_db() != 0 {
            // A device leaving RESET would take stale doorbell records as posted WQEs.
            return Err(io::Error::other("doorbell records not cleared before RTS"));
        }
        self.in_reset = false;
        Ok(())
    }
}

/// Computes the checksums a WQE's `cs_flags` ask for, as the device does (from scratch).
fn fill_checksums(frame: &mut [u8], cs_flags: u8) {
    let Ok(eth) = ethernet::Frame::new_checked(&frame[..]) else {
        return;
    };
    if eth.ethertype() != ethernet::EtherType::Ipv4 {
        return;
    }
    let ip_bytes = &mut frame[ethernet::HEADER_LEN..];
    let Ok(mut ip) = ipv4::Packet::new_checked(&mut ip_bytes[..]) else {
        return;
    };
    if cs_flags & MLX5_ETH_WQE_L3_CSUM != 0 {
        ip.fill_checksum();
    }
    let (src, dst, proto) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
    let hl = ip.header_len() as usize;
    let total = ip.total_len() as usize;
    if cs_flags & MLX5_ETH_WQE_L4_CSUM != 0 && proto == ipv4::PROTO_UDP && total <= ip_bytes.len() {
        if let Ok(mut u) = udp::Packet::new_checked(&mut ip_bytes[hl..total]) {
            u.fill_checksum(src, dst);
        }
    }
}

/// The receive CQE's `hds_ip_ext` and `l4_hdr_type_etc` for `frame`: the checksum verdicts a
/// ConnectX reports (computed from the frame).
pub fn rx_offload_flags(frame: &[u8]) -> (u8, u8) {
    let mut ok = MLX5_CQE_L2_OK;
    let mut types = 0u8;
    let Ok(eth) = ethernet::Frame::new_checked(frame) else {
        return (ok, types);
    };
    if eth.ethertype() != ethernet::EtherType::Ipv4 {
        return (ok, types);
    }
    let Ok(ip) = ipv4::Packet::new_checked(eth.payload()) else {
        return (ok, types);
    };
    types |= MLX5_CQE_L3_HDR_TYPE_IPV4 << 2;
    if ip.verify_checksum() {
        ok |= MLX5_CQE_L3_OK;
    }
    if ip.protocol() == ipv4::PROTO_UDP && !ip.is_fragment() {
        types |= CQE_L4_HDR_TYPE_UDP << 4;
        if let Ok(u) = udp::Packet::new_checked(ip.payload()) {
            if u.verify_checksum(ip.src_addr(), ip.dst_addr()) {
                ok |= MLX5_CQE_L4_OK;
            }
        }
    }
    (ok, types)
}
