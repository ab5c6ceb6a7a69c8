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
//!
//! Two ways to run the same device logic (`device.rs`):
//! - [`EmuNic`]: driven from the driver's thread ([`EmuNic::process`]), deterministic, for unit
//!   tests; two of them can be linked back to back;
//! - [`threaded::EmuDevice`]: on its own thread, concurrently with the driver, with a
//!   [`threaded::Wire`] behind its port (benchmarks: `crates/emu-bench`).

use std::cell::RefCell;
use std::io;
use std::ptr::NonNull;
use std::rc::{Rc, Weak};
use std::sync::Arc;

use cornflakes_mem::PinnedMemory;
use cornflakes_mem::Region;

use crate::mmio;
use crate::prm::*;
use crate::queue::{QueueMemory, Ring};
use crate::FlowRule;

mod device;
pub mod threaded;

pub use device::{rx_offload_flags, TxFrame, MAX_MRS};
use device::{Device, Shared, DB_QP, DB_RCQ, DB_SCQ};

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
    /// How many leading cache lines of each received frame the device demotes from its own
    /// core's caches to the shared last-level cache after writing them
    /// ([`crate::mmio::demote_to_llc`]), as a NIC's DMA with DDIO leaves them there (0: none,
    /// the default; `usize::MAX`: all). Without it the server reads a frame's lines out of
    /// the device core's private cache, which costs more than the LLC hit DDIO gives; with
    /// it every demoted line costs the device thread time (docs/performance.md).
    pub demote_lines: usize,
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
            demote_lines: 0,
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

impl EmuStats {
    /// Adds `o`'s counts to these (the maximum for `max_data_segments`): a port's totals
    /// over its queue sets.
    pub fn accumulate(&mut self, o: &EmuStats) {
        self.doorbells += o.doorbells;
        self.bad_doorbells += o.bad_doorbells;
        self.wqes += o.wqes;
        self.frames_sent += o.frames_sent;
        self.data_segments += o.data_segments;
        self.max_data_segments = self.max_data_segments.max(o.max_data_segments);
        self.tx_errors += o.tx_errors;
        self.tx_flushed += o.tx_flushed;
        self.frames_received += o.frames_received;
        self.rx_steered_away += o.rx_steered_away;
        self.rx_no_wqe += o.rx_no_wqe;
        self.rx_oversize += o.rx_oversize;
        self.rx_errors += o.rx_errors;
        self.cq_overruns += o.cq_overruns;
        self.rx_qp_error += o.rx_qp_error;
        self.rx_flushed += o.rx_flushed;
        self.resets += o.resets;
    }
}

impl EmuConfig {
    /// The configuration of queue set `i` of a port with several: its own QP number
    /// (`qpn + i`) and its own lkey range (`lkey_base + i * MAX_MRS`), so an lkey of one
    /// core's memory is refused on another core's queues, as with one protection domain per
    /// core on hardware.
    pub fn for_queue(&self, i: usize) -> EmuConfig {
        EmuConfig {
            qpn: self.qpn.wrapping_add(i as u32) & 0x00ff_ffff,
            lkey_base: self
                .lkey_base
                .wrapping_add((i as u32).wrapping_mul(MAX_MRS as u32)),
            ..self.clone()
        }
    }
}

/// One queue set (QP, its CQs, memory regions) and the device's state of it.
struct QueueSet {
    sh: Arc<Shared>,
    dev: Device,
}

struct State {
    sets: Vec<QueueSet>,
    memories: Vec<PinnedMemory>,
    peer: Option<Weak<RefCell<State>>>,
    /// Frames sent, with the queue set that sent each.
    wire: Vec<(usize, Vec<u8>)>,
}

impl State {
    /// The queue set that receives `frame`: the first whose flow rules match it; a frame no
    /// rule matches goes to queue set 0, which counts it as steered away.
    fn deliver(&mut self, frame: &[u8]) {
        let i = if self.sets.len() == 1 {
            0
        } else {
            self.sets
                .iter()
                .position(|q| q.dev.accepts(frame))
                .unwrap_or(0)
        };
        let q = &mut self.sets[i];
        q.dev.deliver(&q.sh, frame);
    }
}

/// A handle to an emulated device.
#[derive(Clone)]
pub struct EmuNic {
    st: Rc<RefCell<State>>,
}

impl EmuNic {
    /// A device with `cfg` and no memory regions, flow rules or peer.
    pub fn new(cfg: EmuConfig) -> io::Result<EmuNic> {
        Self::with_queues(cfg, 1)
    }

    /// A device with `n` queue sets (one per server core), queue set `i` with the geometry
    /// `cfg.for_queue(i)`, and no memory regions, flow rules or peer. Received frames go to
    /// the queue set whose flow rules ([`set_queue_flows`](Self::set_queue_flows)) match.
    /// The methods without a queue index act on queue set 0.
    pub fn with_queues(cfg: EmuConfig, n: usize) -> io::Result<EmuNic> {
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an emulated NIC needs at least one queue set",
            ));
        }
        let mut sets = Vec::with_capacity(n);
        for i in 0..n {
            let mut dev = Device::new();
            dev.queue = i;
            sets.push(QueueSet {
                sh: Arc::new(Shared::new(cfg.for_queue(i))?),
                dev,
            });
        }
        let st = State {
            sets,
            memories: Vec::new(),
            peer: None,
            wire: Vec::new(),
        };
        Ok(EmuNic {
            st: Rc::new(RefCell::new(st)),
        })
    }

    /// How many queue sets the device has.
    pub fn queue_count(&self) -> usize {
        self.st.borrow().sets.len()
    }

    fn no_queue(i: usize) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the emulated NIC has no queue set {i}"),
        )
    }

    /// Registers every region of `mem` (now and later) as a memory region of this device and
    /// stores each one's lkey as the region's registration.
    pub fn register(&self, mem: &PinnedMemory) -> io::Result<()> {
        self.register_queue(0, mem)
    }

    /// As [`register`](Self::register), for queue set `i` (each has its own memory regions,
    /// as each core has its own protection domain on hardware).
    pub fn register_queue(&self, i: usize, mem: &PinnedMemory) -> io::Result<()> {
        let sh = {
            let mut st = self.st.borrow_mut();
            let sh = st.sets.get(i).ok_or_else(|| Self::no_queue(i))?.sh.clone();
            st.memories.push(mem.clone());
            sh
        };
        register_with(&sh, mem)
    }

    /// Installs flow rules (replacing earlier ones): received frames matching none are dropped.
    pub fn set_flows(&self, rules: &[FlowRule]) {
        self.st.borrow_mut().sets[0].dev.flows = rules.to_vec();
    }

    /// Installs the flow rules of queue set `i` (replacing earlier ones).
    pub fn set_queue_flows(&self, i: usize, rules: &[FlowRule]) -> io::Result<()> {
        let mut st = self.st.borrow_mut();
        st.sets
            .get_mut(i)
            .ok_or_else(|| Self::no_queue(i))?
            .dev
            .flows = rules.to_vec();
        Ok(())
    }

    /// Connects two devices back to back: frames one sends arrive at the other.
    pub fn link(a: &EmuNic, b: &EmuNic) {
        a.st.borrow_mut().peer = Some(Rc::downgrade(&b.st));
        b.st.borrow_mut().peer = Some(Rc::downgrade(&a.st));
    }

    /// The queue memory the driver uses ([`QueueMemory`]), of queue set 0.
    pub fn queues(&self) -> EmuQueues {
        EmuQueues {
            st: self.st.clone(),
            i: 0,
        }
    }

    /// The queue memory of queue set `i` (`None` when there is no such queue set).
    pub fn queues_of(&self, i: usize) -> Option<EmuQueues> {
        (i < self.queue_count()).then(|| EmuQueues {
            st: self.st.clone(),
            i,
        })
    }

    /// Runs the device until its send queues are idle: consumes every doorbelled WQE of each
    /// queue set in turn, writes completions and delivers the frames. Returns the frames sent.
    pub fn process(&self) -> usize {
        let (frames, peer, loopback) = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let mut frames = Vec::new();
            for q in st.sets.iter_mut() {
                let i = q.dev.queue;
                q.dev.run_sq(&q.sh, &mut |f| {
                    let mut v = Vec::with_capacity(f.len().max(60));
                    f.gather(&mut v);
                    frames.push((i, v));
                });
            }
            st.wire.extend(frames.iter().cloned());
            (frames, st.peer.clone(), st.sets[0].sh.cfg.loopback)
        };
        let n = frames.len();
        let target = match peer.and_then(|w| w.upgrade()) {
            Some(p) => Some(p),
            None if loopback => Some(self.st.clone()),
            None => None,
        };
        if let Some(t) = target {
            let mut t = t.borrow_mut();
            for (_, f) in &frames {
                t.deliver(f);
            }
        }
        n
    }

    /// Delivers a raw frame to this device's receive side, as if it came off the wire
    /// (steered to the queue set whose flow rules match it).
    pub fn inject(&self, frame: &[u8]) {
        self.st.borrow_mut().deliver(frame);
    }

    /// Every frame sent so far, as it went on the wire.
    pub fn wire(&self) -> Vec<Vec<u8>> {
        self.st
            .borrow()
            .wire
            .iter()
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// Every frame sent so far, with the queue set that sent it.
    pub fn wire_by_queue(&self) -> Vec<(usize, Vec<u8>)> {
        self.st.borrow().wire.clone()
    }

    /// Forgets the recorded frames.
    pub fn clear_wire(&self) {
        self.st.borrow_mut().wire.clear();
    }

    /// Counters so far, summed over the queue sets.
    pub fn stats(&self) -> EmuStats {
        let mut s = EmuStats::default();
        for q in &self.st.borrow().sets {
            s.accumulate(&q.dev.stats);
        }
        s
    }

    /// The counters of queue set `i` (`None` when there is no such queue set).
    pub fn queue_stats(&self, i: usize) -> Option<EmuStats> {
        self.st.borrow().sets.get(i).map(|q| q.dev.stats)
    }

    /// Port MTU.
    pub fn mtu(&self) -> usize {
        self.st.borrow().sets[0].sh.cfg.mtu
    }
}

/// Installs the registrar that makes every region of `mem` a memory region of the device
/// behind `sh` (the same path the hardware takes with `ibv_reg_mr`).
fn register_with(sh: &Arc<Shared>, mem: &PinnedMemory) -> io::Result<()> {
    let weak = Arc::downgrade(sh);
    mem.set_registrar(move |r: &Region| {
        let sh = weak
            .upgrade()
            .ok_or_else(|| io::Error::other("emulated device is gone"))?;
        let lkey = sh.mrs.add(r.base() as u64, r.len() as u64)?;
        Ok(Some(u64::from(lkey)))
    })
}

/// The emulated device's queue memory, handed to the driver.
pub struct EmuQueues {
    st: Rc<RefCell<State>>,
    /// Which queue set.
    i: usize,
}

impl EmuQueues {
    fn shared(&self) -> Arc<Shared> {
        self.st.borrow().sets[self.i].sh.clone()
    }
}

// SAFETY: every pointer handed out points into a `DmaArea` of the shared state, which this
// value keeps alive (Rc); the areas are sized from the same config the rings report, aligned to
// 4096, and accessed only through `mmio` by the driver and the emulated device.
unsafe impl QueueMemory for EmuQueues {
    fn sq(&self) -> Ring {
        self.shared().sq_ring()
    }

    fn rq(&self) -> Ring {
        self.shared().rq_ring()
    }

    fn send_cq(&self) -> Ring {
        self.shared().send_cq_ring()
    }

    fn recv_cq(&self) -> Ring {
        self.shared().recv_cq_ring()
    }

    fn sq_dbrec(&self) -> NonNull<u32> {
        self.shared().dbrec_ptr(DB_QP, MLX5_SND_DBR)
    }

    fn rq_dbrec(&self) -> NonNull<u32> {
        self.shared().dbrec_ptr(DB_QP, MLX5_RCV_DBR)
    }

    fn send_cq_dbrec(&self) -> NonNull<u32> {
        self.shared().dbrec_ptr(DB_SCQ, 0)
    }

    fn recv_cq_dbrec(&self) -> NonNull<u32> {
        self.shared().dbrec_ptr(DB_RCQ, 0)
    }

    fn qpn(&self) -> u32 {
        self.shared().cfg.qpn
    }

    fn ring_doorbell(&mut self, word: u64) {
        let mut st = self.st.borrow_mut();
        let q = &mut st.sets[self.i];
        // SAFETY: the 64-byte stand-in register area, 8-aligned; only this thread uses it.
        unsafe { mmio::write_reg64(q.sh.bf.ptr.as_ptr().cast(), word) };
        q.dev.doorbell(&q.sh, word);
    }

    fn qp_reset(&mut self) -> io::Result<()> {
        self.st.borrow_mut().sets[self.i].dev.qp_reset()
    }

    fn qp_ready(&mut self) -> io::Result<()> {
        let mut st = self.st.borrow_mut();
        let q = &mut st.sets[self.i];
        q.dev.qp_ready(&q.sh)
    }
}
