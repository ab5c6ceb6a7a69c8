//! An emulated ConnectX device: software that plays the NIC's side of the queues, so the
//! driver's hot path ([`crate::queue`]) runs unchanged in tests on machines without one.
//!
//! It owns the queue memory (rings, doorbell records, a doorbell register) and behaves as the
//! hardware does where the driver can tell:
//! - on [`EmuNic::process`] it consumes every WQE up to the last doorbell, reading control,
//!   Ethernet and data segments per the mlx5 layouts ([`crate::prm`]); it refuses a data
//!   segment whose lkey is not one of its memory regions or whose range leaves the region
//!   (error CQE `LOCAL_PROT_ERR`, then the queue is in error and flushes every later WQE);
//! - it gathers inline headers and data segments into a frame, fills the IPv4/UDP checksums
//!   when the Ethernet segment asks, pads to 60 bytes, records the frame ([`EmuNic::wire`])
//!   and delivers it to the linked peer (or itself) through the flow rules;
//! - delivery takes the next posted receive WQE, scatters the frame into its buffer and writes
//!   a receive CQE (byte count, WQE counter, checksum-ok flags, owner bit);
//! - CQEs carry the owner bit of the producer's wrap parity; a full CQ is an overrun (counted,
//!   nothing written), as on hardware.
//!
//! Memory regions come from [`EmuNic::register`], which installs a registrar on a
//! [`PinnedMemory`] exactly like the hardware path does with `ibv_reg_mr`.

use std::alloc::{self, Layout};
use std::cell::RefCell;
use std::io;
use std::ptr::NonNull;
use std::rc::{Rc, Weak};

use cornflakes::mem::Region;
use cornflakes::PinnedMemory;
use cornflakes_stack::wire::{ethernet, ipv4, udp};

use crate::mmio;
use crate::prm::*;
use crate::queue::{QueueMemory, Ring};
use crate::FlowRule;

/// Geometry and identity of an emulated device.
#[derive(Clone, Debug)]
pub struct EmuConfig {
    /// Send queue WQEBBs (power of two).
    pub sq_wqebbs: u32,
    /// Receive queue entries (power of two).
    pub rq_entries: u32,
    /// Receive WQE stride in bytes (16 for one scatter entry; 32 adds the terminator).
    pub rq_stride: u32,
    /// Entries of each completion queue (power of two).
    pub cq_entries: u32,
    /// Queue pair number.
    pub qpn: u32,
    /// First lkey handed out (each region gets the next one).
    pub lkey_base: u32,
    /// Largest IP packet the port passes (longer frames are dropped on receive).
    pub mtu: usize,
    /// Deliver sent frames to our own receive queue when no peer is linked.
    pub loopback: bool,
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            sq_wqebbs: 256,
            rq_entries: 128,
            rq_stride: 16,
            cq_entries: 512,
            qpn: 0x1c0,
            lkey_base: 0x2000,
            mtu: 1500,
            loopback: false,
        }
    }
}

/// What the emulated device observed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmuStats {
    pub doorbells: u64,
    /// Doorbell words that did not match the control segment of the last WQE.
    pub bad_doorbells: u64,
    pub wqes: u64,
    pub frames_sent: u64,
    /// Data segments gathered, in total and at most in one WQE.
    pub data_segments: u64,
    pub max_data_segments: usize,
    /// WQEs refused with an error CQE (not counting flushes).
    pub tx_errors: u64,
    pub tx_flushed: u64,
    pub frames_received: u64,
    /// Frames no flow rule matched.
    pub rx_steered_away: u64,
    /// Frames dropped because no receive WQE was posted ("rx_out_of_buffer").
    pub rx_no_wqe: u64,
    /// Frames longer than the port MTU.
    pub rx_oversize: u64,
    pub rx_errors: u64,
    /// CQEs not written because the CQ was full.
    pub cq_overruns: u64,
    /// Frames dropped because the queue pair was in the error or reset state.
    pub rx_qp_error: u64,
    /// Receive WQEs completed with a flush error (queue pair in error).
    pub rx_flushed: u64,
    /// Queue-pair resets.
    pub resets: u64,
}

/// One allocation standing in for DMA-able queue memory.
struct DmaArea {
    ptr: NonNull<u8>,
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
                // SAFETY: `e * stride + offset < len`, inside the allocation.
                unsafe { mmio::write_u8(ptr.as_ptr().add(e * stride + offset), byte) };
            }
        }
        DmaArea { ptr, layout }
    }
}

impl Drop for DmaArea {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; nothing refers to it any more (the
        // state owning it is dropped only when the queues and the NIC handle are gone).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

struct Mr {
    lkey: u32,
    addr: u64,
    len: u64,
}

/// Offsets in the doorbell-record area.
const DB_QP: usize = 0;
const DB_SCQ: usize = 64;
const DB_RCQ: usize = 128;

struct State {
    cfg: EmuConfig,
    sq: DmaArea,
    rq: DmaArea,
    scq: DmaArea,
    rcq: DmaArea,
    dbrec: DmaArea,
    bf: DmaArea,
    mrs: Vec<Mr>,
    memories: Vec<PinnedMemory>,
    sq_ci: u16,
    sq_db_pi: u16,
    error: bool,
    /// Queue pair in RESET: nothing is sent or received.
    in_reset: bool,
    scq_pi: u32,
    rcq_pi: u32,
    rq_ci: u32,
    flows: Vec<FlowRule>,
    peer: Option<Weak<RefCell<State>>>,
    wire: Vec<Vec<u8>>,
    stats: EmuStats,
}

/// A handle to an emulated device.
#[derive(Clone)]
pub struct EmuNic {
    st: Rc<RefCell<State>>,
}

impl EmuNic {
    /// A device with `cfg` and no memory regions, flow rules or peer.
    pub fn new(cfg: EmuConfig) -> io::Result<EmuNic> {
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
        let st = State {
            sq: DmaArea::new(cfg.sq_wqebbs as usize * 64, None),
            rq: DmaArea::new((cfg.rq_entries * cfg.rq_stride) as usize, None),
            scq: cq(cfg.cq_entries),
            rcq: cq(cfg.cq_entries),
            dbrec: DmaArea::new(192, None),
            bf: DmaArea::new(64, None),
            mrs: Vec::new(),
            memories: Vec::new(),
            sq_ci: 0,
            sq_db_pi: 0,
            error: false,
            in_reset: false,
            scq_pi: 0,
            rcq_pi: 0,
            rq_ci: 0,
            flows: Vec::new(),
            peer: None,
            wire: Vec::new(),
            stats: EmuStats::default(),
            cfg,
        };
        Ok(EmuNic {
            st: Rc::new(RefCell::new(st)),
        })
    }

    /// Registers every region of `mem` (now and later) as a memory region of this device and
    /// stores each one's lkey as the region's registration.
    pub fn register(&self, mem: &PinnedMemory) -> io::Result<()> {
        self.st.borrow_mut().memories.push(mem.clone());
        let weak = Rc::downgrade(&self.st);
        mem.set_registrar(move |r: &Region| {
            let st = weak
                .upgrade()
                .ok_or_else(|| io::Error::other("emulated device is gone"))?;
            let mut st = st.borrow_mut();
            let lkey = st.cfg.lkey_base + st.mrs.len() as u32;
            st.mrs.push(Mr {
                lkey,
                addr: r.base() as u64,
                len: r.len() as u64,
            });
            Ok(Some(u64::from(lkey)))
        })
    }

    /// Installs flow rules (replacing earlier ones): received frames matching none are dropped.
    pub fn set_flows(&self, rules: &[FlowRule]) {
        self.st.borrow_mut().flows = rules.to_vec();
    }

    /// Connects two devices back to back: frames one sends arrive at the other.
    pub fn link(a: &EmuNic, b: &EmuNic) {
        a.st.borrow_mut().peer = Some(Rc::downgrade(&b.st));
        b.st.borrow_mut().peer = Some(Rc::downgrade(&a.st));
    }

    /// The queue memory the driver uses ([`QueueMemory`]).
    pub fn queues(&self) -> EmuQueues {
        EmuQueues {
            st: self.st.clone(),
        }
    }

    /// Runs the device until its send queue is idle: consumes every doorbelled WQE, writes
    /// completions and delivers the frames. Returns the frames sent.
    pub fn process(&self) -> usize {
        let (frames, peer, loopback) = {
            let mut st = self.st.borrow_mut();
            let frames = st.run_sq();
            (frames, st.peer.clone(), st.cfg.loopback)
        };
        let n = frames.len();
        let target = match peer.and_then(|w| w.upgrade()) {
            Some(p) => Some(p),
            None if loopback => Some(self.st.clone()),
            None => None,
        };
        if let Some(t) = target {
            let mut t = t.borrow_mut();
            for f in &frames {
                t.deliver(f);
            }
        }
        n
    }

    /// Delivers a raw frame to this device's receive side, as if it came off the wire.
    pub fn inject(&self, frame: &[u8]) {
        self.st.borrow_mut().deliver(frame);
    }

    /// Every frame sent so far, as it went on the wire.
    pub fn wire(&self) -> Vec<Vec<u8>> {
        self.st.borrow().wire.clone()
    }

    /// Forgets the recorded frames.
    pub fn clear_wire(&self) {
        self.st.borrow_mut().wire.clear();
    }

    /// Counters so far.
    pub fn stats(&self) -> EmuStats {
        self.st.borrow().stats
    }

    /// Port MTU.
    pub fn mtu(&self) -> usize {
        self.st.borrow().cfg.mtu
    }
}

impl State {
    fn cqe_slot(area: &DmaArea, entries: u32, pi: u32) -> *mut u8 {
        let idx = (pi & (entries - 1)) as usize;
        // SAFETY: idx < entries; the area holds `entries` 64-byte CQEs.
        unsafe { area.ptr.as_ptr().add(idx * 64) }
    }

    /// Writes a CQE into the send (`send = true`) or receive CQ, unless it is full.
    fn post_cqe(&mut self, send: bool, mut cqe: Cqe) {
        let (area, pi, db) = if send {
            (&self.scq, self.scq_pi, DB_SCQ)
        } else {
            (&self.rcq, self.rcq_pi, DB_RCQ)
        };
        let entries = self.cfg.cq_entries;
        // SAFETY: the CQ's consumer-index record inside the doorbell area.
        let ci = unsafe { mmio::read_dbrec(self.dbrec.ptr.as_ptr().add(db).cast()) };
        if pi.wrapping_sub(ci) & 0x00ff_ffff >= entries {
            self.stats.cq_overruns += 1;
            return;
        }
        cqe.owner = ((pi >> entries.trailing_zeros()) & 1) as u8;
        cqe.qpn = self.cfg.qpn;
        let slot = Self::cqe_slot(area, entries, pi);
        // SAFETY: a 64-byte, 64-aligned CQE slot inside the CQ area.
        unsafe { mmio::write_cqe(slot, &cqe.encode()) };
        if send {
            self.scq_pi = pi.wrapping_add(1);
        } else {
            self.rcq_pi = pi.wrapping_add(1);
        }
    }

    fn sq_unit(&self, start: u16, k: usize) -> [u8; 16] {
        let mask = self.cfg.sq_wqebbs as usize * UNITS_PER_BB - 1;
        let idx = (start as usize * UNITS_PER_BB + k) & mask;
        // SAFETY: idx < wqebbs * 4 units inside the SQ area, 16-aligned.
        unsafe { mmio::read_unit(self.sq.ptr.as_ptr().add(idx * 16)) }
    }

    /// The registered range holding `[addr, addr + len)` under `lkey`, if any.
    fn check_mr(&self, lkey: u32, addr: u64, len: u64) -> bool {
        self.mrs.iter().any(|m| {
            m.lkey == lkey
                && addr >= m.addr
                && addr
                    .checked_add(len)
                    .is_some_and(|end| end <= m.addr + m.len)
        })
    }

    fn doorbell(&mut self, word: u64) {
        self.stats.doorbells += 1;
        if self.in_reset {
            self.stats.bad_doorbells += 1;
            return;
        }
        // SAFETY: the SQ doorbell record inside the doorbell area.
        let pi = unsafe {
            mmio::read_dbrec(
                self.dbrec
                    .ptr
                    .as_ptr()
                    .add(DB_QP)
                    .cast::<u32>()
                    .add(MLX5_SND_DBR),
            )
        } as u16;
        // The word is the first 8 bytes of the last WQE's control segment.
        let b = word.to_ne_bytes();
        let mut u = [0u8; 16];
        u[..8].copy_from_slice(&b);
        let ctrl = CtrlSeg::from_bytes(&u);
        let last = self.sq_unit(ctrl.wqe_index(), 0);
        if last[..8] != b[..] || ctrl.qpn() != self.cfg.qpn {
            self.stats.bad_doorbells += 1;
            return;
        }
        self.sq_db_pi = pi;
    }

    /// Gathers one WQE (starting at `start`, `ds` units) into a frame, or gives the syndrome.
    fn gather(&self, start: u16, ds: usize) -> Result<(Vec<u8>, usize), u8> {
        let mut e = [0u8; 32];
        e[..16].copy_from_slice(&self.sq_unit(start, 1));
        e[16..].copy_from_slice(&self.sq_unit(start, 2));
        let eth = EthSeg::from_bytes(&e);
        let n_inline = eth.inline_len();
        let spill = n_inline.saturating_sub(ETH_SEG_INLINE).div_ceil(16);
        if 3 + spill > ds {
            return Err(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
        }
        let mut frame = Vec::with_capacity(2048);
        frame.extend_from_slice(&eth.inline_hdr_start);
        frame.extend_from_slice(&eth.inline_hdr);
        for k in 0..spill {
            frame.extend_from_slice(&self.sq_unit(start, 3 + k));
        }
        frame.truncate(n_inline);
        for k in 3 + spill..ds {
            let d = DataSeg::from_bytes(&self.sq_unit(start, k));
            let len = d.len();
            if len & MLX5_INLINE_SEG != 0 || len == 0 {
                return Err(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
            }
            if !self.check_mr(d.key(), d.address(), u64::from(len)) {
                return Err(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
            }
            let at = frame.len();
            frame.resize(at + len as usize, 0);
            // SAFETY: `[addr, addr+len)` lies inside a registered region of a PinnedMemory this
            // device keeps alive (`memories`); the destination was just resized to hold it.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    d.address() as *const u8,
                    frame.as_mut_ptr().add(at),
                    len as usize,
                )
            };
        }
        if eth.cs_flags & (MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM) != 0 {
            fill_checksums(&mut frame, eth.cs_flags);
        }
        if frame.len() > self.cfg.mtu + ethernet::HEADER_LEN + 4 {
            return Err(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
        }
        if frame.len() < 60 {
            frame.resize(60, 0);
        }
        Ok((frame, ds - 3 - spill))
    }

    fn run_sq(&mut self) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        if self.in_reset {
            return frames;
        }
        if self.error {
            self.flush_rq();
        }
        while self.sq_ci != self.sq_db_pi {
            let start = self.sq_ci;
            let ctrl = CtrlSeg::from_bytes(&self.sq_unit(start, 0));
            let ds = ctrl.ds() as usize;
            let bbs = ds.div_ceil(UNITS_PER_BB).max(1) as u16;
            self.stats.wqes += 1;
            let valid = ctrl.opcode() == MLX5_OPCODE_SEND
                && ctrl.wqe_index() == start
                && ctrl.qpn() == self.cfg.qpn
                && ds >= 3;
            let result = if self.error {
                Err(MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
            } else if !valid {
                Err(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR)
            } else {
                self.gather(start, ds)
            };
            match result {
                Ok((frame, dsegs)) => {
                    self.stats.frames_sent += 1;
                    self.stats.data_segments += dsegs as u64;
                    self.stats.max_data_segments = self.stats.max_data_segments.max(dsegs);
                    self.wire.push(frame.clone());
                    frames.push(frame);
                    if ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE != 0 {
                        self.post_cqe(
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
                    self.flush_rq();
                    self.post_cqe(
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
        frames
    }

    fn steer(&self, frame: &[u8]) -> bool {
        self.flows.iter().any(|r| r.matches(frame))
    }

    /// In the error state the device completes every posted receive WQE with a flush error,
    /// as the whole queue pair is in error.
    fn flush_rq(&mut self) {
        // SAFETY: the RQ doorbell record inside the doorbell area.
        let pi = unsafe {
            mmio::read_dbrec(
                self.dbrec
                    .ptr
                    .as_ptr()
                    .add(DB_QP)
                    .cast::<u32>()
                    .add(MLX5_RCV_DBR),
            )
        } as u16;
        while self.rq_ci as u16 != pi {
            let counter = self.rq_ci as u16;
            self.rq_ci = self.rq_ci.wrapping_add(1);
            self.stats.rx_flushed += 1;
            self.post_cqe(
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

    fn deliver(&mut self, frame: &[u8]) {
        if self.in_reset {
            self.stats.rx_qp_error += 1;
            return;
        }
        if self.error {
            // The QP is in error: frames are not received, posted WQEs are flushed.
            self.stats.rx_qp_error += 1;
            self.flush_rq();
            return;
        }
        if !self.steer(frame) {
            self.stats.rx_steered_away += 1;
            return;
        }
        if frame.len() > self.cfg.mtu + ethernet::HEADER_LEN + 4 {
            self.stats.rx_oversize += 1;
            return;
        }
        // SAFETY: the RQ doorbell record inside the doorbell area.
        let pi = unsafe {
            mmio::read_dbrec(
                self.dbrec
                    .ptr
                    .as_ptr()
                    .add(DB_QP)
                    .cast::<u32>()
                    .add(MLX5_RCV_DBR),
            )
        } as u16;
        if pi == self.rq_ci as u16 {
            self.stats.rx_no_wqe += 1;
            return;
        }
        let idx = (self.rq_ci & (self.cfg.rq_entries - 1)) as usize;
        // SAFETY: entry idx of the RQ area, 16-aligned.
        let unit =
            unsafe { mmio::read_unit(self.rq.ptr.as_ptr().add(idx * self.cfg.rq_stride as usize)) };
        let d = DataSeg::from_bytes(&unit);
        let counter = self.rq_ci as u16;
        self.rq_ci = self.rq_ci.wrapping_add(1);
        let syndrome = if !self.check_mr(d.key(), d.address(), u64::from(d.len())) {
            Some(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)
        } else if frame.len() > d.len() as usize {
            Some(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR)
        } else {
            None
        };
        if let Some(syndrome) = syndrome {
            self.stats.rx_errors += 1;
            self.post_cqe(
                false,
                Cqe {
                    opcode: MLX5_CQE_RESP_ERR,
                    wqe_counter: counter,
                    syndrome,
                    ..Cqe::default()
                },
            );
            return;
        }
        // SAFETY: the destination range was checked against a registered region kept alive by
        // `memories`; the driver holds no reference into a posted receive buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), d.address() as *mut u8, frame.len())
        };
        let (hds_ip_ext, l4_hdr_type_etc) = rx_offload_flags(frame);
        self.stats.frames_received += 1;
        self.post_cqe(
            false,
            Cqe {
                opcode: MLX5_CQE_RESP_SEND,
                wqe_counter: counter,
                byte_cnt: frame.len() as u32,
                hds_ip_ext,
                l4_hdr_type_etc,
                ..Cqe::default()
            },
        );
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

/// The CQE's `hds_ip_ext` and `l4_hdr_type_etc` for a received frame.
fn rx_offload_flags(frame: &[u8]) -> (u8, u8) {
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

/// The emulated device's queue memory, handed to the driver.
pub struct EmuQueues {
    st: Rc<RefCell<State>>,
}

impl EmuQueues {
    fn area_ptr(&self, f: impl Fn(&State) -> NonNull<u8>) -> NonNull<u8> {
        f(&self.st.borrow())
    }

    fn dbrec(&self, off: usize, idx: usize) -> NonNull<u32> {
        let base = self.area_ptr(|s| s.dbrec.ptr);
        // SAFETY: `off + 4 * idx + 4 <= 192`, inside the doorbell area.
        unsafe { NonNull::new_unchecked(base.as_ptr().add(off).cast::<u32>().add(idx)) }
    }
}

// SAFETY: every pointer handed out points into a `DmaArea` of the shared state, which this
// value keeps alive (Rc); the areas are sized from the same config the rings report, aligned to
// 4096, and accessed only through `mmio` by the driver and the emulated device.
unsafe impl QueueMemory for EmuQueues {
    fn sq(&self) -> Ring {
        let st = self.st.borrow();
        Ring {
            base: st.sq.ptr,
            entries: st.cfg.sq_wqebbs,
            stride: 64,
        }
    }

    fn rq(&self) -> Ring {
        let st = self.st.borrow();
        Ring {
            base: st.rq.ptr,
            entries: st.cfg.rq_entries,
            stride: st.cfg.rq_stride,
        }
    }

    fn send_cq(&self) -> Ring {
        let st = self.st.borrow();
        Ring {
            base: st.scq.ptr,
            entries: st.cfg.cq_entries,
            stride: 64,
        }
    }

    fn recv_cq(&self) -> Ring {
        let st = self.st.borrow();
        Ring {
            base: st.rcq.ptr,
            entries: st.cfg.cq_entries,
            stride: 64,
        }
    }

    fn sq_dbrec(&self) -> NonNull<u32> {
        self.dbrec(DB_QP, MLX5_SND_DBR)
    }

    fn rq_dbrec(&self) -> NonNull<u32> {
        self.dbrec(DB_QP, MLX5_RCV_DBR)
    }

    fn send_cq_dbrec(&self) -> NonNull<u32> {
        self.dbrec(DB_SCQ, 0)
    }

    fn recv_cq_dbrec(&self) -> NonNull<u32> {
        self.dbrec(DB_RCQ, 0)
    }

    fn qpn(&self) -> u32 {
        self.st.borrow().cfg.qpn
    }

    fn ring_doorbell(&mut self, word: u64) {
        let reg = self.area_ptr(|s| s.bf.ptr);
        // SAFETY: the 64-byte stand-in register area, 8-aligned.
        unsafe { mmio::write_reg64(reg.as_ptr().cast(), word) };
        self.st.borrow_mut().doorbell(word);
    }

    fn qp_reset(&mut self) -> io::Result<()> {
        let mut st = self.st.borrow_mut();
        if st.sq_ci != st.sq_db_pi {
            return Err(io::Error::other("send queue still has WQEs in the device"));
        }
        st.in_reset = true;
        st.error = false;
        st.sq_ci = 0;
        st.sq_db_pi = 0;
        st.rq_ci = 0;
        st.stats.resets += 1;
        Ok(())
    }

    fn qp_ready(&mut self) -> io::Result<()> {
        let mut st = self.st.borrow_mut();
        // SAFETY: the QP doorbell records inside the doorbell area.
        let (rq, sq) = unsafe {
            let db = st.dbrec.ptr.as_ptr().add(DB_QP).cast::<u32>();
            (
                mmio::read_dbrec(db.add(MLX5_RCV_DBR)),
                mmio::read_dbrec(db.add(MLX5_SND_DBR)),
            )
        };
        if rq != 0 || sq != 0 {
            // A device leaving RESET would take stale doorbell records as posted WQEs.
            return Err(io::Error::other("doorbell records not cleared before RTS"));
        }
        st.in_reset = false;
        Ok(())
    }
}
