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

use cornflakes::mem::Region;
use cornflakes::PinnedMemory;

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

struct State {
    sh: Arc<Shared>,
    dev: Device,
    memories: Vec<PinnedMemory>,
    peer: Option<Weak<RefCell<State>>>,
    wire: Vec<Vec<u8>>,
}

/// A handle to an emulated device.
#[derive(Clone)]
pub struct EmuNic {
    st: Rc<RefCell<State>>,
}

impl EmuNic {
    /// A device with `cfg` and no memory regions, flow rules or peer.
    pub fn new(cfg: EmuConfig) -> io::Result<EmuNic> {
        let st = State {
            sh: Arc::new(Shared::new(cfg)?),
            dev: Device::new(),
            memories: Vec::new(),
            peer: None,
            wire: Vec::new(),
        };
        Ok(EmuNic {
            st: Rc::new(RefCell::new(st)),
        })
    }

    /// Registers every region of `mem` (now and later) as a memory region of this device and
    /// stores each one's lkey as the region's registration.
    pub fn register(&self, mem: &PinnedMemory) -> io::Result<()> {
        let sh = {
            let mut st = self.st.borrow_mut();
            st.memories.push(mem.clone());
            st.sh.clone()
        };
        register_with(&sh, mem)
    }

    /// Installs flow rules (replacing earlier ones): received frames matching none are dropped.
    pub fn set_flows(&self, rules: &[FlowRule]) {
        self.st.borrow_mut().dev.flows = rules.to_vec();
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
            let st = &mut *st;
            let mut frames = Vec::new();
            st.dev.run_sq(&st.sh, &mut |f| {
                let mut v = Vec::with_capacity(f.len().max(60));
                f.gather(&mut v);
                frames.push(v);
            });
            st.wire.extend(frames.iter().cloned());
            (frames, st.peer.clone(), st.sh.cfg.loopback)
        };
        let n = frames.len();
        let target = match peer.and_then(|w| w.upgrade()) {
            Some(p) => Some(p),
            None if loopback => Some(self.st.clone()),
            None => None,
        };
        if let Some(t) = target {
            let mut t = t.borrow_mut();
            let t = &mut *t;
            for f in &frames {
                t.dev.deliver(&t.sh, f);
            }
        }
        n
    }

    /// Delivers a raw frame to this device's receive side, as if it came off the wire.
    pub fn inject(&self, frame: &[u8]) {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        st.dev.deliver(&st.sh, frame);
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
        self.st.borrow().dev.stats
    }

    /// Port MTU.
    pub fn mtu(&self) -> usize {
        self.st.borrow().sh.cfg.mtu
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
}

impl EmuQueues {
    fn shared(&self) -> Arc<Shared> {
        self.st.borrow().sh.clone()
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
        let st = &mut *st;
        // SAFETY: the 64-byte stand-in register area, 8-aligned; only this thread uses it.
        unsafe { mmio::write_reg64(st.sh.bf.ptr.as_ptr().cast(), word) };
        st.dev.doorbell(&st.sh, word);
    }

    fn qp_reset(&mut self) -> io::Result<()> {
        self.st.borrow_mut().dev.qp_reset()
    }

    fn qp_ready(&mut self) -> io::Result<()> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        st.dev.qp_ready(&st.sh)
    }
}
