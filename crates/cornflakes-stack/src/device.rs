//! The device boundary (after smoltcp's `phy`): a [`Device`] is a NIC queue pair reduced to its
//! rings — a receive half ([`Device::receive`]) beside the transmit half ([`TxSink`]), a
//! doorbell ([`Device::flush`]) and completions — and [`EthDatapath`] is the one Ethernet
//! datapath over any device: it owns the [`EthStack`] and implements the runtime's datapath
//! traits ([`Connect`], [`Receive`], [`Transmit`], [`Completions`], [`DatapathMemory`]) once,
//! including the control-frame (ARP) plumbing every link-layer datapath needs.
//!
//! The loopback NIC, AF_XDP, ConnectX (mlx5) and E810 (ice) datapaths each implement
//! [`Device`] for their rings and keep their public type as a thin wrapper around an
//! `EthDatapath` ([`cornflakes_datapath::DelegateDatapath`]), with the device-specific
//! constructors and statistics of their own.
//!
//! ```
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use cornflakes_datapath::{Connect, DropCounters, Receive, Transmit};
//! use cornflakes_datapath::{Msg, SendError};
//! use cornflakes_mem::{PinnedMemory, RcBuf};
//! use cornflakes_stack::device::{Device, EthDatapath};
//! use cornflakes_stack::{MacAddr, StackConfig, TxSink};
//!
//! /// A device whose wire goes nowhere: frames are taken on flush and dropped.
//! struct Sink {
//!     queued: Vec<RcBuf>,
//!     sent: usize,
//! }
//!
//! impl TxSink for Sink {
//!     fn free_slots(&self) -> usize {
//!         64 - self.queued.len()
//!     }
//!     fn post(&mut self, buf: RcBuf, _end_of_frame: bool) {
//!         self.queued.push(buf);
//!     }
//! }
//!
//! impl Device for Sink {
//!     fn max_segments(&self) -> usize {
//!         4
//!     }
//!     fn receive(&mut self, _frame: impl FnMut(RcBuf)) -> u64 {
//!         0 // nothing ever arrives
//!     }
//!     fn flush(&mut self) -> Result<(), SendError> {
//!         self.sent += self.queued.len();
//!         Ok(())
//!     }
//!     fn prepare_send(&mut self) {}
//!     fn make_room(&mut self) -> Result<bool, SendError> {
//!         Ok(false)
//!     }
//!     fn poll_completions(&mut self) -> usize {
//!         let n = self.queued.len();
//!         self.queued.clear();
//!         n
//!     }
//!     fn in_flight(&self) -> usize {
//!         self.queued.len()
//!     }
//!     fn add_counters(&self, _counters: &mut DropCounters) {}
//! }
//!
//! let addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
//! let peer = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);
//! let mut cfg = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), addr);
//! cfg.static_arp.push((*peer.ip(), MacAddr([2, 0, 0, 0, 0, 2])));
//! let mem = PinnedMemory::with_defaults().unwrap();
//! let mut dp = EthDatapath::new(Sink { queued: Vec::new(), sent: 0 }, mem, cfg);
//! let conn = dp.connect(peer).unwrap(); // resolved statically: no ARP request
//! dp.send_copy(conn, Msg::new(1, 0), b"hello").unwrap();
//! dp.flush().unwrap();
//! assert_eq!(dp.device().sent, 1);
//! ```

use std::io;
use std::net::SocketAddrV4;
use std::time::Instant;

use cornflakes_datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes_datapath::{ConnId, DropCounters, Msg, RxMsg, SendCounters, SendError, SendObject};
use cornflakes_mem::{PinnedMemory, RcBuf};

use crate::iface::{EthStack, StackConfig};
use crate::tx::{self, TxSink};

/// One queue pair of a link-layer device, reduced to its rings. The transmit half is the
/// [`TxSink`] supertrait: the stack posts descriptors there; nothing reaches the wire before
/// [`flush`](Device::flush).
pub trait Device: TxSink {
    /// The most descriptors (scatter-gather entries) one frame may have, header included.
    fn max_segments(&self) -> usize;

    /// Takes up to one burst of received frames from the device, handing each whole Ethernet
    /// frame to `frame` in arrival order (a zero-copy view of the receive buffer, or a copy in
    /// a pinned buffer), and refills the receive ring. Frames the device itself rejects (a
    /// checksum the hardware found wrong) are not handed over but counted for
    /// [`add_counters`](Device::add_counters). Returns the frames lost for lack of receive
    /// buffers since the last call (the stack counts them as `no_rx_buffers`). Never blocks.
    fn receive(&mut self, frame: impl FnMut(RcBuf)) -> u64;

    /// Hands every descriptor posted so far to the device (one doorbell per batch).
    fn flush(&mut self) -> Result<(), SendError>;

    /// Called before every send: a device that learns of free transmit slots only by
    /// reclaiming completions (AF_XDP) does that here; one whose [`TxSink::free_slots`] is
    /// always current does nothing.
    fn prepare_send(&mut self);

    /// A send found the transmit queue full ([`SendError::Full`]): tries to make room (flush,
    /// reclaim completed descriptors). `true` when the send should be tried once more,
    /// `false` when the caller is to see `Full` (it flushes and polls completions itself).
    fn make_room(&mut self) -> Result<bool, SendError>;

    /// Reclaims the descriptors the device has finished with, dropping the buffer references
    /// they held; returns how many.
    fn poll_completions(&mut self) -> usize;

    /// Descriptors posted and not yet completed.
    fn in_flight(&self) -> usize;

    /// Adds the receive drops the device counted itself (hardware checksum failures, frames
    /// the driver found malformed, the port's missed-buffer counter) to the stack's `counters`.
    fn add_counters(&self, counters: &mut DropCounters);

    /// Serialize-and-send of `obj` on `conn` (paper §3.2.3). The default is the stack's
    /// [`tx::send_object`] over this device's [`TxSink`]; a device whose descriptors follow
    /// other rules may plan the frame itself (AF_XDP maps leaves onto UMEM frames).
    fn send_object<O: SendObject>(
        &mut self,
        stack: &mut EthStack,
        mem: &PinnedMemory,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError>
    where
        Self: Sized,
    {
        let max_segments = self.max_segments();
        tx::send_object(stack, mem, self, max_segments, conn, msg, obj)
    }
}

/// The Ethernet/IPv4/UDP datapath over a [`Device`]: the runtime's datapath traits, once for
/// every link-layer device (see the [module docs](self)).
pub struct EthDatapath<D: Device> {
    // Field order is drop order: the device (and the buffers its rings hold) first.
    dev: D,
    stack: EthStack,
    mem: PinnedMemory,
    /// Control frames (ARP) the stack produced while the device was busy; sent after.
    ctrl: Vec<Vec<u8>>,
    control_sent: u64,
}

impl<D: Device> EthDatapath<D> {
    /// The datapath over `dev`, whose buffers come from `mem` (the pinned memory the device's
    /// rings are registered for), with a stack configured by `stack`.
    pub fn new(dev: D, mem: PinnedMemory, stack: StackConfig) -> EthDatapath<D> {
        EthDatapath {
            dev,
            stack: EthStack::new(stack),
            mem,
            ctrl: Vec::new(),
            control_sent: 0,
        }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The device, mutably (for device-specific operations between polls).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// The stack (configuration and counters).
    pub fn stack(&self) -> &EthStack {
        &self.stack
    }

    /// Control frames (ARP requests and replies) queued on the device so far.
    pub fn control_sent(&self) -> u64 {
        self.control_sent
    }

    /// [`Receive::recv_burst`] with the stack's clock fixed at `now` (for deterministic
    /// timeout tests). Returns the number of messages appended to `out`.
    pub fn recv_burst_at(&mut self, out: &mut Vec<RxMsg>, now: Instant) -> usize {
        self.recv(out, Some(now))
    }

    /// One receive poll. The clock is read once, and only when a frame or a stack timer needs
    /// it: an empty poll (most of them on a lightly loaded server) reads no clock.
    #[inline]
    fn recv(&mut self, out: &mut Vec<RxMsg>, mut now: Option<Instant>) -> usize {
        let before = out.len();
        let EthDatapath {
            dev,
            stack,
            mem,
            ctrl,
            ..
        } = self;
        let no_buffer = dev.receive(|frame| {
            let now = *now.get_or_insert_with(Instant::now);
            stack.process_frame(mem, frame, now, out, &mut |f: &[u8]| ctrl.push(f.to_vec()));
        });
        if no_buffer > 0 {
            stack.count_no_rx_buffer(no_buffer);
        }
        if stack.has_timers() {
            let now = *now.get_or_insert_with(Instant::now);
            stack.poll(now, &mut |f: &[u8]| ctrl.push(f.to_vec()));
        }
        self.send_control();
        out.len() - before
    }

    /// Queues the control frames the stack produced and rings the doorbell for them. A frame
    /// that cannot be queued is lost; ARP retries cover that.
    #[inline]
    fn send_control(&mut self) {
        if !self.ctrl.is_empty() {
            self.send_control_frames();
        }
    }

    #[cold]
    fn send_control_frames(&mut self) {
        let mut queued = 0;
        for f in self.ctrl.drain(..) {
            if tx::send_control(&self.mem, &mut self.dev, &f) {
                queued += 1;
            }
        }
        self.control_sent += queued;
        if queued > 0 {
            let _ = self.dev.flush();
        }
    }

    /// Runs `send`, and once more when the queue was full and the device made room.
    #[inline]
    fn retry_full(
        &mut self,
        mut send: impl FnMut(&mut D, &mut EthStack, &PinnedMemory) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        self.dev.prepare_send();
        match send(&mut self.dev, &mut self.stack, &self.mem) {
            Err(SendError::Full) if self.dev.make_room()? => {
                send(&mut self.dev, &mut self.stack, &self.mem)
            }
            r => r,
        }
    }
}

impl<D: Device> DatapathMemory for EthDatapath<D> {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl<D: Device> Connect for EthDatapath<D> {
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        let ctrl = &mut self.ctrl;
        let r = self
            .stack
            .connect(peer, Instant::now(), &mut |f: &[u8]| ctrl.push(f.to_vec()));
        self.send_control();
        r.map_err(|e| match e {
            SendError::Io(e) => e,
            other => io::Error::other(other.to_string()),
        })
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.stack.peer_addr(conn)
    }

    fn local_addr(&self) -> SocketAddrV4 {
        self.stack.local_addr()
    }

    fn resolved(&self, conn: ConnId) -> bool {
        self.stack.resolved(conn)
    }
}

impl<D: Device> Receive for EthDatapath<D> {
    #[inline]
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        Ok(self.recv(out, None))
    }

    fn counters(&self) -> DropCounters {
        let mut c = self.stack.counters();
        self.dev.add_counters(&mut c);
        c
    }
}

impl<D: Device> Transmit for EthDatapath<D> {
    fn mtu(&self) -> usize {
        self.stack.config().mtu
    }

    fn max_segments(&self) -> usize {
        self.dev.max_segments()
    }

    fn max_message_len(&self) -> usize {
        self.stack.config().max_message_len
    }

    #[inline]
    fn send_object<O: SendObject>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        self.retry_full(|dev, stack, mem| dev.send_object(stack, mem, conn, msg, obj))
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        self.retry_full(|dev, stack, mem| {
            let max_segments = dev.max_segments();
            tx::send_sga(stack, mem, dev, max_segments, conn, msg, entries)
        })
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.retry_full(|dev, stack, mem| tx::send_copy(stack, mem, dev, conn, msg, data))
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.dev.flush()
    }

    /// None: a NIC's descriptors reference every zero-copy field (no choice per send).
    fn send_counters(&self) -> Option<SendCounters> {
        None
    }
}

impl<D: Device> Completions for EthDatapath<D> {
    fn poll_completions(&mut self) -> usize {
        self.dev.poll_completions()
    }

    fn in_flight(&self) -> usize {
        self.dev.in_flight()
    }
}

impl<D: Device> std::fmt::Debug for EthDatapath<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EthDatapath")
            .field("stack", &self.stack)
            .field("in_flight", &self.dev.in_flight())
            .field("control_sent", &self.control_sent)
            .finish()
    }
}

#[cfg(test)]
mod test {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::wire::MacAddr;

    /// A device with a transmit queue of `cap` descriptors, frames to hand over on the next
    /// receive, and a `make_room` that empties the queue when `room_on_full` is set.
    struct Fake {
        cap: usize,
        queued: Vec<(RcBuf, bool)>,
        flushed: usize,
        rx: Vec<RcBuf>,
        rx_lost: u64,
        room_on_full: bool,
        prepared: usize,
    }

    impl TxSink for Fake {
        fn free_slots(&self) -> usize {
            self.cap - self.queued.len()
        }
        fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
            self.queued.push((buf, end_of_frame));
        }
    }

    impl Device for Fake {
        fn max_segments(&self) -> usize {
            4
        }
        fn receive(&mut self, mut frame: impl FnMut(RcBuf)) -> u64 {
            self.rx.drain(..).for_each(&mut frame);
            std::mem::take(&mut self.rx_lost)
        }
        fn flush(&mut self) -> Result<(), SendError> {
            self.flushed = self.queued.len();
            Ok(())
        }
        fn prepare_send(&mut self) {
            self.prepared += 1;
        }
        fn make_room(&mut self) -> Result<bool, SendError> {
            if self.room_on_full {
                self.queued.clear();
            }
            Ok(self.room_on_full)
        }
        fn poll_completions(&mut self) -> usize {
            0
        }
        fn in_flight(&self) -> usize {
            self.queued.len()
        }
        fn add_counters(&self, counters: &mut DropCounters) {
            counters.bad_checksum += 5;
        }
    }

    const PEER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

    fn datapath(cap: usize, room_on_full: bool, static_peer: bool) -> EthDatapath<Fake> {
        let addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
        let mut cfg = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), addr);
        if static_peer {
            cfg.static_arp
                .push((*PEER.ip(), MacAddr([2, 0, 0, 0, 0, 2])));
        }
        let dev = Fake {
            cap,
            queued: Vec::new(),
            flushed: 0,
            rx: Vec::new(),
            rx_lost: 0,
            room_on_full,
            prepared: 0,
        };
        EthDatapath::new(dev, PinnedMemory::with_defaults().unwrap(), cfg)
    }

    #[test]
    fn a_full_queue_is_retried_once_only_when_the_device_made_room() {
        for room in [false, true] {
            let mut dp = datapath(1, room, true);
            let c = dp.connect(PEER).unwrap();
            dp.send_copy(c, Msg::new(1, 0), b"one").unwrap();
            let second = dp.send_copy(c, Msg::new(2, 0), b"two");
            if room {
                second.unwrap();
            } else {
                assert!(matches!(second, Err(SendError::Full)), "{second:?}");
            }
            assert_eq!(dp.device().prepared, 2, "prepare_send before every send");
        }
    }

    #[test]
    fn arp_goes_out_at_once_and_device_drops_reach_the_counters() {
        let mut dp = datapath(8, false, false);
        let c = dp.connect(PEER).unwrap();
        // The ARP request was queued and the doorbell rung for it.
        assert_eq!((dp.device().queued.len(), dp.device().flushed), (1, 1));
        assert_eq!(dp.control_sent(), 1);
        assert!(matches!(
            dp.send_copy(c, Msg::new(1, 0), b"x"),
            Err(SendError::Resolving(_))
        ));
        // A runt frame, and two frames lost for want of receive buffers.
        let mem = dp.memory().clone();
        dp.device_mut().rx.push(mem.alloc_copy(&[0u8; 6]).unwrap());
        dp.device_mut().rx_lost = 2;
        let mut out = Vec::new();
        assert_eq!(dp.recv_burst(&mut out).unwrap(), 0);
        let counters = dp.counters();
        assert_eq!(counters.truncated, 1);
        assert_eq!(counters.no_rx_buffers, 2);
        assert_eq!(counters.bad_checksum, 5, "the device's own drops are added");
        assert_eq!(dp.stack().counters().bad_checksum, 0);
    }
}
