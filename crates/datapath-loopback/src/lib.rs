//! An in-process software NIC pair for tests, running the full Ethernet/IPv4/UDP stack of
//! `cornflakes-stack`.
//!
//! Sends post descriptors — a pointer, a length, and a clone of the [`RcBuf`] that keeps the
//! memory alive — to the sender's transmit ring, exactly as a NIC driver would. Nothing is read
//! then: the bytes are gathered ("DMA") only when the peer polls ([`Receive::recv_burst`]),
//! and only descriptors made visible by [`Transmit::flush`] are gathered. The sender learns of
//! completions at its next [`Completions::poll_completions`], which is when it drops the
//! buffer references. So a test can observe the whole ownership protocol: what the application
//! may do with its buffers between a send and the device reading them, and when each buffer
//! is released.
//!
//! Control frames (ARP) are sent at once: a poll or connect that sends one makes every queued
//! descriptor visible, as a flush would.
//!
//! Tests can also inject raw frames ([`Loopback::inject_frame`]) and capture every frame put on
//! the wire ([`Loopback::set_capture`]).

//! ```
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
//! use cornflakes::Msg;
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
use std::io;
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::time::Instant;

use cornflakes::datapath::{Completions, Connect, DatapathMemory, DropCounters, Receive, Transmit};
use cornflakes::mem::{AllocError, MemoryConfig};
use cornflakes::{ConnId, CornflakesObj, Msg, PinnedMemory, RcBuf, RxMsg, SendError};
use cornflakes_stack::tx::{self, TxSink};
use cornflakes_stack::{EthStack, StackConfig};

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

/// The two directions of a link.
struct Link {
    rings: [Ring; 2],
    capture: [Option<Vec<Vec<u8>>>; 2],
}

/// One end of a loopback link.
pub struct Loopback {
    side: usize,
    link: Rc<RefCell<Link>>,
    stack: EthStack,
    mem: PinnedMemory,
    cfg: LoopbackConfig,
    injected: VecDeque<Vec<u8>>,
}

struct RingSink<'a> {
    ring: &'a mut Ring,
    cap: usize,
}

impl TxSink for RingSink<'_> {
    fn free_slots(&self) -> usize {
        self.cap.saturating_sub(self.ring.descs.len())
    }

    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        self.ring.descs.push_back(Desc {
            addr: buf.as_ptr(),
            len: buf.len(),
            buf,
            end_of_frame,
        });
    }
}

impl Loopback {
    /// Two NICs connected back to back.
    pub fn pair(a: LoopbackConfig, b: LoopbackConfig) -> Result<(Loopback, Loopback), AllocError> {
        let link = Rc::new(RefCell::new(Link {
            rings: [Ring::default(), Ring::default()],
            capture: [None, None],
        }));
        let mk = |side: usize, mut cfg: LoopbackConfig| -> Result<Loopback, AllocError> {
            let mem = PinnedMemory::new(cfg.memory.clone())?;
            // A message is received into one pinned buffer: never promise more than that.
            cfg.stack.max_message_len = cfg.stack.max_message_len.min(mem.max_item_size());
            Ok(Loopback {
                side,
                link: link.clone(),
                stack: EthStack::new(cfg.stack.clone()),
                mem,
                cfg,
                injected: VecDeque::new(),
            })
        };
        Ok((mk(0, a)?, mk(1, b)?))
    }

    /// The stack (configuration and counters).
    pub fn stack(&self) -> &EthStack {
        &self.stack
    }

    /// Queues a raw frame as if it had arrived from the wire (processed at the next poll).
    pub fn inject_frame(&mut self, frame: &[u8]) {
        self.injected.push_back(frame.to_vec());
    }

    /// Starts (or stops) recording copies of every frame this end puts on the wire.
    pub fn set_capture(&mut self, on: bool) {
        self.link.borrow_mut().capture[self.side] = on.then(Vec::new);
    }

    /// Takes the frames recorded since the last call.
    pub fn take_captured(&mut self) -> Vec<Vec<u8>> {
        self.link.borrow_mut().capture[self.side]
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Descriptors posted but not yet flushed, visible but not yet gathered, and gathered but
    /// not yet reclaimed.
    pub fn ring_state(&self) -> (usize, usize, usize) {
        let l = self.link.borrow();
        let r = &l.rings[self.side];
        (r.descs.len() - r.visible, r.visible - r.done, r.done)
    }

    /// [`Receive::recv_burst`] at a given time (for deterministic timeout tests).
    pub fn recv_burst_at(&mut self, out: &mut Vec<RxMsg>, now: Instant) -> usize {
        let before = out.len();
        let mut frames: Vec<RcBuf> = Vec::new();
        // Injected frames first, then DMA from the peer's ring.
        while frames.len() < self.cfg.rx_burst {
            let Some(f) = self.injected.pop_front() else {
                break;
            };
            match self.mem.alloc(f.len()) {
                Ok(mut b) => {
                    b.copy_from_slice(&f);
                    frames.push(b.freeze());
                }
                Err(_) => self.stack.count_no_rx_buffer(1),
            }
        }
        let budget = self.cfg.rx_burst - frames.len();
        self.dma_from_peer(budget, &mut frames);
        let mut link = self.link.borrow_mut();
        let mut sink = RingSink {
            ring: &mut link.rings[self.side],
            cap: self.cfg.tx_ring,
        };
        let mut sent_control = false;
        let mem = &self.mem;
        let mut ctrl = |f: &[u8]| sent_control |= tx::send_control(mem, &mut sink, f);
        for f in frames {
            self.stack.process_frame(&self.mem, f, now, out, &mut ctrl);
        }
        self.stack.poll(now, &mut ctrl);
        if sent_control {
            link.rings[self.side].visible = link.rings[self.side].descs.len();
        }
        out.len() - before
    }

    /// Gathers up to `budget` whole frames the peer has made visible into fresh receive
    /// buffers, marking their descriptors done.
    fn dma_from_peer(&mut self, budget: usize, frames: &mut Vec<RcBuf>) {
        let mut link = self.link.borrow_mut();
        let peer = 1 - self.side;
        let mut gathered = 0;
        while gathered < budget {
            let ring = &mut link.rings[peer];
            // Find the end of the next whole frame among the visible descriptors.
            let start = ring.done;
            let Some(last) = (start..ring.visible).find(|&i| ring.descs[i].end_of_frame) else {
                break;
            };
            let len: usize = (start..=last).map(|i| ring.descs[i].len).sum();
            let mut bytes = Vec::with_capacity(len);
            for i in start..=last {
                let d = &ring.descs[i];
                debug_assert_eq!(d.addr, d.buf.as_ptr());
                bytes.extend_from_slice(&d.buf[..d.len]);
            }
            ring.done = last + 1;
            gathered += 1;
            if let Some(c) = link.capture[peer].as_mut() {
                c.push(bytes.clone());
            }
            match self.mem.alloc(len) {
                Ok(mut b) => {
                    b.copy_from_slice(&bytes);
                    frames.push(b.freeze());
                }
                Err(_) => self.stack.count_no_rx_buffer(1),
            }
        }
    }

    fn with_sink<R>(
        &mut self,
        f: impl FnOnce(&mut EthStack, &PinnedMemory, &mut RingSink<'_>) -> R,
    ) -> R {
        let mut link = self.link.borrow_mut();
        let mut sink = RingSink {
            ring: &mut link.rings[self.side],
            cap: self.cfg.tx_ring,
        };
        f(&mut self.stack, &self.mem, &mut sink)
    }
}

impl DatapathMemory for Loopback {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl Connect for Loopback {
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        let r = self.with_sink(|stack, mem, sink| {
            let mut ctrl = |f: &[u8]| {
                tx::send_control(mem, sink, f);
            };
            stack.connect(peer, Instant::now(), &mut ctrl)
        });
        // ARP requests go out at once.
        let mut link = self.link.borrow_mut();
        let ring = &mut link.rings[self.side];
        ring.visible = ring.descs.len();
        r.map_err(|e| io::Error::other(e.to_string()))
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.stack.peer_addr(conn)
    }

    fn local_addr(&self) -> SocketAddrV4 {
        self.stack.local_addr()
    }
}

impl Receive for Loopback {
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        Ok(self.recv_burst_at(out, Instant::now()))
    }

    fn counters(&self) -> DropCounters {
        self.stack.counters()
    }
}

impl Transmit for Loopback {
    fn mtu(&self) -> usize {
        self.cfg.stack.mtu
    }

    fn max_segments(&self) -> usize {
        self.cfg.max_segments
    }

    fn max_message_len(&self) -> usize {
        self.cfg.stack.max_message_len
    }

    fn send_object<O: CornflakesObj>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        let segs = self.cfg.max_segments;
        self.with_sink(|stack, mem, sink| tx::send_object(stack, mem, sink, segs, conn, msg, obj))
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        let segs = self.cfg.max_segments;
        self.with_sink(|stack, mem, sink| tx::send_sga(stack, mem, sink, segs, conn, msg, entries))
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.with_sink(|stack, mem, sink| tx::send_copy(stack, mem, sink, conn, msg, data))
    }

    fn flush(&mut self) -> Result<(), SendError> {
        let mut link = self.link.borrow_mut();
        let ring = &mut link.rings[self.side];
        ring.visible = ring.descs.len();
        Ok(())
    }
}

impl Completions for Loopback {
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
}

impl std::fmt::Debug for Loopback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loopback")
            .field("side", &self.side)
            .field("stack", &self.stack)
            .field("ring", &self.ring_state())
            .finish()
    }
}
