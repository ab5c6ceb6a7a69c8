//! An in-process software NIC pair for tests, running the full Ethernet/IPv4/UDP stack of
//! `cornflakes-stack`: this crate is only the NIC's rings ([`LoopbackNic`], a [`Device`]);
//! [`Loopback`] is the stack's [`EthDatapath`] over them.
//!
//! Sends post descriptors — a pointer, a length, and a clone of the [`RcBuf`] that keeps the
//! memory alive — to the sender's transmit ring, exactly as a NIC driver would. Nothing is read
//! then: the bytes are gathered ("DMA") only when the peer polls ([`Receive::recv_burst`](cornflakes_datapath::Receive::recv_burst)),
//! and only descriptors made visible by [`Transmit::flush`](cornflakes_datapath::Transmit::flush) are gathered. The sender learns of
//! completions at its next [`Completions::poll_completions`](cornflakes_datapath::Completions::poll_completions), which is when it drops the
//! buffer references. So a test can observe the whole ownership protocol: what the application
//! may do with its buffers between a send and the device reading them, and when each buffer
//! is released.
//!
//! Control frames (ARP) are sent at once: a poll or connect that sends one makes every queued
//! descriptor visible, as a flush would.
//!
//! Tests can also inject raw frames ([`Loopback::inject_frame`]), capture every frame put on
//! the wire ([`Loopback::set_capture`]), and make the wire lose and duplicate frames
//! ([`LoopbackConfig::faults`], [`Faults`]).
//!
//! [`Loopback::multi_queue`] gives one end several queue pairs, as a NIC with one receive and
//! one transmit queue per server core (`docs/cores.md`): each queue is its own [`Loopback`] —
//! its own pinned memory, stack, connection table and UDP port — and the NIC steers every
//! frame from the other end to the queue whose port is the frame's UDP destination port (an
//! exact-match flow rule per queue, as `ibv_create_flow` or `rte_flow` would install);
//! anything else (ARP, other ports) goes to queue 0. The link is in-process and
//! single-threaded (`Rc`), so the queues are polled in turn on one thread: it checks the
//! steering and the per-core state, not parallel speed.

//! ```
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use cornflakes_datapath::{Completions, Connect, Receive, Transmit};
//! use cornflakes_datapath::Msg;
//! use cornflakes_stack::{MacAddr, StackConfig};
//! use datapath_loopback::{Loopback, LoopbackConfig};
//!
//! let a_addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
//! let b_addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);
//! let a = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), a_addr);
//! let b = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), b_addr);
//! let (mut a, mut b) = Loopback::pair(LoopbackConfig::new(a), LoopbackConfig::new(b)).unwrap();
//!
//! let conn = a.connect(b_addr).unwrap(); // sends an ARP request
//! let mut rx = Vec::new();
//! b.recv_burst(&mut rx).unwrap(); // B answers it
//! a.recv_burst(&mut rx).unwrap(); // A learns B's MAC address
//! a.send_copy(conn, Msg::new(1, 0), b"hello").unwrap();
//! a.flush().unwrap();
//! b.recv_burst(&mut rx).unwrap(); // B gathers the frame ("DMA")
//! assert_eq!(&rx[0].data[..], b"hello");
//! assert_eq!(a.poll_completions(), 2); // the ARP request and the data frame
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use cornflakes_datapath::{DelegateDatapath, DropCounters};
use cornflakes_datapath::{RxMsg, SendError};
use cornflakes_mem::{AllocError, MemoryConfig};
use cornflakes_mem::{PinnedMemory, RcBuf};
use cornflakes_stack::device::{Device, EthDatapath};
use cornflakes_stack::tx::TxSink;
use cornflakes_stack::{EthStack, StackConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Configuration of one loopback NIC.
#[derive(Clone, Debug)]
pub struct LoopbackConfig {
    /// The stack (addresses, MTU, checksums, limits).
    pub stack: StackConfig,
    /// The pinned memory.
    pub memory: MemoryConfig,
    /// Transmit ring size in descriptors.
    pub tx_ring: usize,
    /// Most frames gathered per poll.
    pub rx_burst: usize,
    /// Most descriptors per frame.
    pub max_segments: usize,
    /// Loss and duplication of the frames this end receives (none by default).
    pub faults: Faults,
}

/// A lossy wire: each IPv4 frame an end receives from its peer is lost with probability
/// `loss`, else delivered twice with probability `duplicate`, decided by a generator seeded
/// with `seed` (so a run is reproducible). ARP frames and injected frames are never touched.
/// Give both ends faults for loss and duplication in both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame (not lost) arrives twice.
    pub duplicate: f64,
    /// Seed of the generator.
    pub seed: u64,
}

/// Frames a lossy end lost and duplicated ([`Loopback::faults_injected`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Frames lost.
    pub lost: u64,
    /// Frames delivered twice.
    pub duplicated: u64,
}

impl LoopbackConfig {
    /// Defaults around `stack`: 1024 descriptors, bursts of 32 frames, 8 segments per frame.
    pub fn new(stack: StackConfig) -> LoopbackConfig {
        LoopbackConfig {
            stack,
            memory: MemoryConfig::default(),
            tx_ring: 1024,
            rx_burst: 32,
            max_segments: 8,
            faults: Faults::default(),
        }
    }
}

/// One posted transmit descriptor.
struct Desc {
    /// What a NIC would be given: address and length.
    addr: *const u8,
    len: usize,
    /// The reference that keeps the memory alive until completion.
    buf: RcBuf,
    end_of_frame: bool,
}

/// A transmit ring: `[completed | visible to the device | posted, not flushed]`.
#[derive(Default)]
struct Ring {
    descs: VecDeque<Desc>,
    /// Descriptors the device has read (not yet reclaimed by the driver).
    done: usize,
    /// Descriptors made visible by a flush (`done <= visible <= descs.len()`).
    visible: usize,
}

/// A link: endpoint 0 is the single-queue end, endpoints `1..` the queues of the other end.
struct Link {
    /// Each endpoint's transmit ring.
    rings: Vec<Ring>,
    capture: Vec<Option<Vec<Vec<u8>>>>,
    /// With several queues: each queue's UDP port (its steering rule).
    ports: Vec<u16>,
    /// With several queues: frames from endpoint 0 already gathered by the NIC and steered to
    /// each queue, waiting for that queue's poll.
    steered: Vec<VecDeque<Vec<u8>>>,
}

impl Link {
    /// The queue whose port is `frame`'s IPv4/UDP destination port; queue 0 for anything else.
    fn steer(&self, frame: &[u8]) -> usize {
        let udp_dst = (|| {
            if frame.get(12..14)? != [0x08, 0x00] {
                return None;
            }
            let ihl = usize::from(frame.get(14)? & 0x0f) * 4;
            if *frame.get(23)? != 17 {
                return None;
            }
            let at = 14 + ihl + 2;
            let p = frame.get(at..at + 2)?;
            Some(u16::from_be_bytes([p[0], p[1]]))
        })();
        udp_dst
            .and_then(|d| self.ports.iter().position(|&p| p == d))
            .unwrap_or(0)
    }
}

/// One end of a loopback link (or one queue of a multi-queue end): the stack's
/// [`EthDatapath`] over this NIC's rings ([`LoopbackNic`]).
pub struct Loopback {
    eth: EthDatapath<LoopbackNic>,
}

/// The rings of one loopback endpoint: the [`Device`] under a [`Loopback`].
pub struct LoopbackNic {
    /// This endpoint: 0 for the single-queue end, `1 + q` for queue `q` of the other end.
    side: usize,
    link: Rc<RefCell<Link>>,
    mem: PinnedMemory,
    tx_ring: usize,
    rx_burst: usize,
    max_segments: usize,
    injected: VecDeque<Vec<u8>>,
    faults: Faults,
    rng: SmallRng,
    injected_faults: FaultCounts,
}

impl Loopback {
    /// Two NICs connected back to back.
    pub fn pair(a: LoopbackConfig, b: LoopbackConfig) -> Result<(Loopback, Loopback), AllocError> {
        let (a, mut b) = Loopback::multi_queue(a, vec![b])?;
        Ok((a, b.remove(0)))
    }

    /// A single-queue NIC `a` connected back to back with a NIC of `queues.len()` queue pairs,
    /// one per configuration (each with its own memory and stack; give them the same MAC and
    /// IP address and one UDP port each). Frames from `a` go to the queue whose port is their
    /// UDP destination port, anything else to queue 0; `a` receives from every queue.
    pub fn multi_queue(
        a: LoopbackConfig,
        queues: Vec<LoopbackConfig>,
    ) -> Result<(Loopback, Vec<Loopback>), AllocError> {
        let n = 1 + queues.len();
        let link = Rc::new(RefCell::new(Link {
            rings: (0..n).map(|_| Ring::default()).collect(),
            capture: vec![None; n],
            ports: queues.iter().map(|q| q.stack.addr.port()).collect(),
            steered: (0..queues.len()).map(|_| VecDeque::new()).collect(),
        }));
        let mk = |side: usize, mut cfg: LoopbackConfig| -> Result<Loopback, AllocError> {
            let mem = PinnedMemory::new(cfg.memory.clone())?;
            // A message is received into one pinned buffer: never promise more than that.
            cfg.stack.max_message_len = cfg.stack.max_message_len.min(mem.max_item_size());
            let nic = LoopbackNic {
                side,
                link: link.clone(),
                mem: mem.clone(),
                tx_ring: cfg.tx_ring,
                rx_burst: cfg.rx_burst,
                max_segments: cfg.max_segments,
                injected: VecDeque::new(),
                faults: cfg.faults,
                rng: SmallRng::seed_from_u64(cfg.faults.seed),
                injected_faults: FaultCounts::default(),
            };
            Ok(Loopback {
                eth: EthDatapath::new(nic, mem, cfg.stack),
            })
        };
        let a = mk(0, a)?;
        let qs = queues
            .into_iter()
            .enumerate()
            .map(|(q, cfg)| mk(1 + q, cfg))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((a, qs))
    }

    /// The stack (configuration and counters).
    pub fn stack(&self) -> &EthStack {
        self.eth.stack()
    }

    /// Frames this end's faulty wire lost and duplicated so far.
    pub fn faults_injected(&self) -> FaultCounts {
        self.eth.device().injected_faults
    }

    /// Queues a raw frame as if it had arrived from the wire (processed at the next poll).
    pub fn inject_frame(&mut self, frame: &[u8]) {
        self.eth.device_mut().injected.push_back(frame.to_vec());
    }

    /// Starts (or stops) recording copies of every frame this end puts on the wire.
    pub fn set_capture(&mut self, on: bool) {
        let nic = self.eth.device();
        nic.link.borrow_mut().capture[nic.side] = on.then(Vec::new);
    }

    /// Takes the frames recorded since the last call.
    pub fn take_captured(&mut self) -> Vec<Vec<u8>> {
        let nic = self.eth.device();
        nic.link.borrow_mut().capture[nic.side]
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Descriptors posted but not yet flushed, visible but not yet gathered, and gathered but
    /// not yet reclaimed.
    pub fn ring_state(&self) -> (usize, usize, usize) {
        let nic = self.eth.device();
        let l = nic.link.borrow();
        let r = &l.rings[nic.side];
        (r.descs.len() - r.visible, r.visible - r.done, r.done)
    }

    /// [`Receive::recv_burst`](cornflakes_datapath::Receive::recv_burst) at a given time (for deterministic timeout tests).
    pub fn recv_burst_at(&mut self, out: &mut Vec<RxMsg>, now: Instant) -> usize {
        self.eth.recv_burst_at(out, now)
    }
}

impl DelegateDatapath for Loopback {
    type Inner = EthDatapath<LoopbackNic>;

    fn inner(&self) -> &EthDatapath<LoopbackNic> {
        &self.eth
    }

    fn inner_mut(&mut self) -> &mut EthDatapath<LoopbackNic> {
        &mut self.eth
    }
}

impl LoopbackNic {
    /// Gathers up to `budget` whole frames the peer has made visible, marking their
    /// descriptors done. The single-queue end gathers from every queue of the other end in
    /// turn; with several queues, a queue takes the frames the NIC steered to it (gathering
    /// everything endpoint 0 made visible and steering it first).
    fn dma_from_peer(&mut self, budget: usize, bytes_in: &mut Vec<Vec<u8>>) {
        let mut link = self.link.borrow_mut();
        let queues = link.rings.len() - 1;
        if self.side == 0 {
            let mut progress = true;
            while bytes_in.len() < budget && progress {
                progress = false;
                for peer in 1..=queues {
                    if bytes_in.len() < budget {
                        if let Some(f) = gather_one(&mut link, peer) {
                            bytes_in.push(f);
                            progress = true;
                        }
                    }
                }
            }
        } else if queues == 1 {
            while bytes_in.len() < budget {
                match gather_one(&mut link, 0) {
                    Some(f) => bytes_in.push(f),
                    None => break,
                }
            }
        } else {
            // The NIC: every whole frame endpoint 0 made visible goes to its queue.
            while let Some(f) = gather_one(&mut link, 0) {
                let q = link.steer(&f);
                link.steered[q].push_back(f);
            }
            let mine = &mut link.steered[self.side - 1];
            while bytes_in.len() < budget {
                match mine.pop_front() {
                    Some(f) => bytes_in.push(f),
                    None => break,
                }
            }
        }
    }
}

/// Gathers ("DMA") the next whole frame endpoint `peer` made visible, marking its descriptors
/// done and recording it if `peer` captures.
fn gather_one(link: &mut Link, peer: usize) -> Option<Vec<u8>> {
    let ring = &mut link.rings[peer];
    let start = ring.done;
    let last = (start..ring.visible).find(|&i| ring.descs[i].end_of_frame)?;
    let len: usize = (start..=last).map(|i| ring.descs[i].len).sum();
    let mut bytes = Vec::with_capacity(len);
    for i in start..=last {
        let d = &ring.descs[i];
        debug_assert_eq!(d.addr, d.buf.as_ptr());
        bytes.extend_from_slice(&d.buf[..d.len]);
    }
    ring.done = last + 1;
    if let Some(c) = link.capture[peer].as_mut() {
        c.push(bytes.clone());
    }
    Some(bytes)
}

impl TxSink for LoopbackNic {
    fn free_slots(&self) -> usize {
        let link = self.link.borrow();
        self.tx_ring
            .saturating_sub(link.rings[self.side].descs.len())
    }

    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        self.link.borrow_mut().rings[self.side]
            .descs
            .push_back(Desc {
                addr: buf.as_ptr(),
                len: buf.len(),
                buf,
                end_of_frame,
            });
    }
}

impl LoopbackNic {
    /// The lossy wire: drops and duplicates the IPv4 frames of `wire` as
    /// [`LoopbackConfig::faults`] says, appending what arrives to `out`.
    fn apply_faults(&mut self, wire: Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>) {
        let f = self.faults;
        for frame in wire {
            if frame.get(12..14) != Some(&[0x08, 0x00][..]) {
                out.push(frame); // ARP and the like: untouched
                continue;
            }
            if self.rng.gen::<f64>() < f.loss {
                self.injected_faults.lost += 1;
            } else if self.rng.gen::<f64>() < f.duplicate {
                self.injected_faults.duplicated += 1;
                out.push(frame.clone());
                out.push(frame);
            } else {
                out.push(frame);
            }
        }
    }
}

impl Device for LoopbackNic {
    fn max_segments(&self) -> usize {
        self.max_segments
    }

    fn receive(&mut self, mut frame: impl FnMut(RcBuf)) -> u64 {
        // Injected frames first, then DMA from the peer's ring, each into a fresh receive
        // buffer.
        let mut bytes_in: Vec<Vec<u8>> = Vec::new();
        while bytes_in.len() < self.rx_burst {
            let Some(f) = self.injected.pop_front() else {
                break;
            };
            bytes_in.push(f);
        }
        let budget = self.rx_burst;
        let injected = bytes_in.len();
        self.dma_from_peer(budget, &mut bytes_in);
        if self.faults != Faults::default() {
            let wire = bytes_in.split_off(injected);
            self.apply_faults(wire, &mut bytes_in);
        }
        let mut no_buffer = 0;
        for bytes in bytes_in {
            match self.mem.alloc(bytes.len()) {
                Ok(mut b) => {
                    b.copy_from_slice(&bytes);
                    frame(b.freeze());
                }
                Err(_) => no_buffer += 1,
            }
        }
        no_buffer
    }

    fn flush(&mut self) -> Result<(), SendError> {
        let mut link = self.link.borrow_mut();
        let ring = &mut link.rings[self.side];
        ring.visible = ring.descs.len();
        Ok(())
    }

    fn prepare_send(&mut self) {
        // `free_slots` reads the ring itself.
    }

    fn make_room(&mut self) -> Result<bool, SendError> {
        // A full ring stays full until the peer gathers: the caller sees `Full`.
        Ok(false)
    }

    fn poll_completions(&mut self) -> usize {
        let mut link = self.link.borrow_mut();
        let ring = &mut link.rings[self.side];
        let n = ring.done;
        // Dropping the descriptors releases the buffer references they held.
        ring.descs.drain(..n);
        ring.visible -= n;
        ring.done = 0;
        n
    }

    fn in_flight(&self) -> usize {
        self.link.borrow().rings[self.side].descs.len()
    }

    fn add_counters(&self, _counters: &mut DropCounters) {
        // Every drop of this NIC is the stack's (receive buffers are counted through
        // `receive`'s return value).
    }
}

impl std::fmt::Debug for Loopback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loopback")
            .field("side", &self.eth.device().side)
            .field("stack", self.eth.stack())
            .field("ring", &self.ring_state())
            .finish()
    }
}
