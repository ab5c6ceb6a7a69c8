//! The emulated ConnectX on its own thread, running concurrently with the driver as the
//! hardware does, and playing the wire (and whatever sits behind it: clients, a peer) there too.
//!
//! The driver side is the unchanged hot path ([`crate::queue`], [`crate::Mlx5Datapath`]) over
//! [`ThreadedQueues`]. The device thread loops:
//! 1. it acquires the SQ doorbell record and consumes every WQE below it: validates the
//!    segments (lkeys, ranges, MTU), hands the frame to the [`Wire`] (which reads as much of it
//!    as it needs), then writes the send CQE (release on `op_own`) if the WQE asked for one;
//! 2. it lets the wire inject frames ([`RxPort`]): each takes the next posted receive WQE
//!    (below the acquired RQ doorbell record), is written into its buffer, and gets a receive
//!    CQE;
//! 3. it answers the rare control requests of the driver (QP reset, ready, detach) through an
//!    atomic request word.
//!
//! A port may have several **queue sets** ([`EmuDevice::spawn_queues`]): one QP (send and
//! receive queue) with its two CQs, its own memory-region table and its own flow rules per
//! server core. The device thread serves all of them in turn; a received frame goes to the
//! queue set whose flow rules match it (one rule per destination UDP port makes them
//! disjoint: the client picks the core by port), and each [`EmuPort`] is the driver side of
//! one queue set, to be used on that core's thread.
//!
//! Nothing on the hot path takes a lock: the shared queue memory is handed over by the
//! release/acquire words described in [`crate::mmio`], and the memory-region table is
//! append-only with an atomic count.
//!
//! The thread measures how busy it is with one clock read per loop iteration: an iteration's
//! time runs from its read to the next iteration's, and counts as busy when the iteration did
//! any work (so a device thread descheduled right after such an iteration is counted busy
//! while it waits; the benches' interference check reports other processes on its CPU). A
//! wire reads that time ([`DeviceClock`]) to tell whether the device, not the driver, was the
//! bottleneck. (A clock read costs tens of nanoseconds, 37 ns on the development VM while
//! busy; a second read at the end of every working iteration would cost the device that much
//! per iteration.)

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cornflakes_mem::PinnedMemory;

use super::device::{Device, Shared, DB_QP, DB_RCQ, DB_SCQ};
use super::{register_with, EmuConfig, EmuStats, TxFrame};
use crate::prm::*;
use crate::queue::{QueueMemory, Ring};
use crate::FlowRule;

/// The device thread's time: nanoseconds since it started, and how many of them it was busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceClock {
    /// Now, in nanoseconds since the device thread started.
    pub now_ns: u64,
    /// Nanoseconds of loop iterations that did work (sending, receiving, the wire's work)
    /// since the device thread started, up to the iteration before this one (an iteration's
    /// time is known when the next one reads the clock).
    pub busy_ns: u64,
}

/// What is on the other side of the port, running on the device thread: it receives every
/// frame the device sends and injects frames into the device's receive queue.
pub trait Wire: Send + 'static {
    /// A frame the device sent (at `now_ns`, device time). Read what is needed now: the
    /// frame's buffers go back to the driver when this returns.
    fn transmit(&mut self, frame: &TxFrame<'_>, now_ns: u64);

    /// Called once per device loop iteration: inject whatever is due through `rx`. Returns
    /// whether it did any work (for the busy time).
    fn poll(&mut self, clock: &DeviceClock, rx: &mut RxPort<'_>) -> bool;

    /// Whether the wire has nothing left to do (then [`EmuDevice::wire_finished`] says so).
    fn finished(&self) -> bool;
}

/// One queue set as the device thread sees it: the memory shared with its driver, the
/// control word, and the device's own state of it.
struct DevQueue {
    sh: Arc<Shared>,
    ctl: Arc<QueueCtl>,
    dev: Device,
}

/// The device's receive side, lent to [`Wire::poll`].
pub struct RxPort<'a> {
    queues: &'a mut [DevQueue],
}

impl RxPort<'_> {
    /// The queue set that receives `steer`: the first whose flow rules match it. A frame no
    /// rule matches goes to queue set 0, which counts it as steered away.
    fn steer(&self, steer: &[u8]) -> usize {
        if self.queues.len() == 1 {
            return 0;
        }
        self.queues
            .iter()
            .position(|q| q.dev.accepts(steer))
            .unwrap_or(0)
    }

    /// Delivers a frame as if it came off the wire: steered by the flow rules, written into the
    /// next posted receive buffer, completed with checksum verdicts computed from it. Returns
    /// whether a receive WQE took it (drops are counted in [`EmuStats`]).
    pub fn deliver(&mut self, frame: &[u8]) -> bool {
        let q = &mut self.queues[self.steer(frame)];
        q.dev.deliver(&q.sh, frame)
    }

    /// Delivers a frame of `len` bytes written by `write` straight into the receive buffer
    /// (which holds exactly `len` bytes), with precomputed CQE checksum flags
    /// ([`super::rx_offload_flags`] of the frame). `steer` is the frame as the flow rules see
    /// it (a template with the same headers and length will do). This is the cheap path for a
    /// load generator: one copy into the buffer, no checksum computation.
    pub fn deliver_prepared(
        &mut self,
        len: usize,
        flags: (u8, u8),
        steer: &[u8],
        write: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        let q = &mut self.queues[self.steer(steer)];
        q.dev.deliver_with(&q.sh, len, Some(flags), steer, write)
    }

    /// The device's counters so far, summed over its queue sets.
    pub fn stats(&self) -> EmuStats {
        let mut s = EmuStats::default();
        for q in self.queues.iter() {
            s.accumulate(&q.dev.stats);
        }
        s
    }

    /// The counters of queue set `i` so far (`None` when there is no such queue set).
    pub fn queue_stats(&self, i: usize) -> Option<EmuStats> {
        self.queues.get(i).map(|q| q.dev.stats)
    }

    /// How many queue sets the port has.
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }
}

/// How the device thread runs.
#[derive(Clone, Debug, Default)]
pub struct DeviceOptions {
    /// Time the device spends per data segment (gather entry) it reads: a model of a slower
    /// gather engine. Zero (the default) models a device that costs nothing per descriptor.
    pub delay_per_segment: Duration,
    /// Pin the device thread to this CPU.
    pub core: Option<usize>,
    /// Yield the CPU when a loop iteration found nothing to do (for unpinned runs sharing
    /// cores, e.g. tests); a pinned device spins, as hardware polls.
    pub yield_when_idle: bool,
}

const REQ_NONE: u32 = 0;
const REQ_RESET: u32 = 1;
const REQ_READY: u32 = 2;
const REQ_DETACH: u32 = 3;

/// The control channel between one queue set's driver and the device thread (not on the hot
/// path).
#[derive(Default)]
struct QueueCtl {
    /// A request from the driver; the device answers by storing `result` and resetting this
    /// to `REQ_NONE` (release).
    req: AtomicU32,
    /// 0: done; 1: refused (send WQEs pending); 2: refused (stale doorbell records).
    result: AtomicU32,
    /// Doorbell words written to the stand-in BlueFlame register.
    bf_word: AtomicU64,
}

/// The device thread's own state, shared with its owner and every queue set's driver.
struct Control {
    /// The device thread runs.
    alive: AtomicBool,
    /// The owner asks the device thread to end.
    stop: AtomicBool,
    /// The wire said it is finished.
    wire_done: AtomicBool,
}

/// What the device thread did, returned when it ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceReport {
    /// The device's counters, summed over its queue sets.
    pub stats: EmuStats,
    /// The counters of each queue set.
    pub per_queue: Vec<EmuStats>,
    /// The device clock when it ended (busy and total time).
    pub clock: DeviceClock,
}

/// An emulated ConnectX running on its own thread, with `W` on its wire.
pub struct EmuDevice<W: Wire> {
    queues: Vec<(Arc<Shared>, Arc<QueueCtl>)>,
    ctl: Arc<Control>,
    join: Option<JoinHandle<(W, DeviceReport)>>,
}

impl<W: Wire> EmuDevice<W> {
    /// Starts the device thread with queue geometry `cfg`, receive steering `flows` and `wire`
    /// attached: one queue set. The driver side is [`port`](Self::port).
    pub fn spawn(
        cfg: EmuConfig,
        flows: Vec<FlowRule>,
        opts: DeviceOptions,
        wire: W,
    ) -> io::Result<EmuDevice<W>> {
        Self::spawn_queues(cfg, vec![flows], opts, wire)
    }

    /// Starts the device thread with one queue set per entry of `flows` (one per server
    /// core), each steering the frames its rules match to its receive queue. Queue set `i` has
    /// the geometry `cfg.for_queue(i)` (its own QP number and lkey range); its driver side is
    /// [`port_of(i)`](Self::port_of). Use [`crate::core_flow_rules`] for one destination
    /// UDP port per core.
    pub fn spawn_queues(
        cfg: EmuConfig,
        flows: Vec<Vec<FlowRule>>,
        opts: DeviceOptions,
        wire: W,
    ) -> io::Result<EmuDevice<W>> {
        if flows.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an emulated port needs at least one queue set",
            ));
        }
        let mut queues = Vec::with_capacity(flows.len());
        for i in 0..flows.len() {
            queues.push((
                Arc::new(Shared::new(cfg.for_queue(i))?),
                Arc::new(QueueCtl::default()),
            ));
        }
        let ctl = Arc::new(Control {
            alive: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            wire_done: AtomicBool::new(false),
        });
        let ctl2 = ctl.clone();
        let mut dev_queues: Vec<DevQueue> = queues
            .iter()
            .zip(flows)
            .enumerate()
            .map(|(i, ((sh, qc), flows))| {
                let mut dev = Device::new();
                dev.flows = flows;
                dev.queue = i;
                dev.delay_per_segment = opts.delay_per_segment;
                DevQueue {
                    sh: sh.clone(),
                    ctl: qc.clone(),
                    dev,
                }
            })
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let join = std::thread::Builder::new()
            .name("emu-nic".to_owned())
            .spawn(move || {
                let pinned = match opts.core {
                    Some(c) => pin_current_thread(c),
                    None => Ok(()),
                };
                let ok = pinned.is_ok();
                let _ = tx.send(pinned);
                let mut wire = wire;
                let clock = if ok {
                    device_loop(&ctl2, &mut dev_queues, &mut wire, opts.yield_when_idle)
                } else {
                    DeviceClock::default()
                };
                ctl2.alive.store(false, Ordering::Release);
                let per_queue: Vec<EmuStats> = dev_queues.iter().map(|q| q.dev.stats).collect();
                let mut stats = EmuStats::default();
                for q in &per_queue {
                    stats.accumulate(q);
                }
                (
                    wire,
                    DeviceReport {
                        stats,
                        per_queue,
                        clock,
                    },
                )
            })?;
        let pinned = rx
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the device thread exited at start")));
        let mut d = EmuDevice {
            queues,
            ctl,
            join: Some(join),
        };
        if let Err(e) = pinned {
            let _ = d.finish();
            return Err(e);
        }
        Ok(d)
    }

    /// The driver's side of the device (queue memory and registration) for queue set 0, for
    /// the thread that runs the driver.
    pub fn port(&self) -> EmuPort {
        self.port_at(0)
    }

    /// The driver's side of queue set `i` (`None` when there is no such queue set). The
    /// [`EmuPort`] is `Send`: hand it to the core that will run that queue set's driver.
    pub fn port_of(&self, i: usize) -> Option<EmuPort> {
        (i < self.queues.len()).then(|| self.port_at(i))
    }

    /// The driver's side of every queue set, in order.
    pub fn ports(&self) -> Vec<EmuPort> {
        (0..self.queues.len()).map(|i| self.port_at(i)).collect()
    }

    /// How many queue sets the port has.
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    fn port_at(&self, i: usize) -> EmuPort {
        let (sh, qc) = &self.queues[i];
        EmuPort {
            sh: sh.clone(),
            ctl: self.ctl.clone(),
            qc: qc.clone(),
            index: i,
        }
    }

    /// Whether the wire reported it is finished.
    pub fn wire_finished(&self) -> bool {
        self.ctl.wire_done.load(Ordering::Acquire)
    }

    /// Whether the device thread is still running.
    pub fn is_running(&self) -> bool {
        self.ctl.alive.load(Ordering::Acquire)
    }

    fn finish(&mut self) -> io::Result<(W, DeviceReport)> {
        self.ctl.stop.store(true, Ordering::Release);
        match self.join.take() {
            Some(j) => j
                .join()
                .map_err(|_| io::Error::other("the emulated device thread panicked")),
            None => Err(io::Error::other("the device thread was already stopped")),
        }
    }

    /// Stops the device thread and returns the wire and what the device did. The driver should
    /// be gone first (or idle): a stopped device processes nothing.
    pub fn stop(mut self) -> io::Result<(W, DeviceReport)> {
        self.finish()
    }
}

impl<W: Wire> Drop for EmuDevice<W> {
    fn drop(&mut self) {
        if self.join.is_some() {
            let _ = self.finish();
        }
    }
}

fn device_loop<W: Wire>(
    ctl: &Control,
    queues: &mut [DevQueue],
    wire: &mut W,
    yield_when_idle: bool,
) -> DeviceClock {
    // One clock read per iteration: an iteration's time runs from its read to the next one's,
    // and counts as busy when it did work.
    let t0 = percore::now_ns();
    let mut clock = DeviceClock::default();
    let mut done = false;
    let mut worked = false;
    loop {
        let now = percore::now_ns().saturating_sub(t0);
        if worked {
            clock.busy_ns += now.saturating_sub(clock.now_ns);
        }
        clock.now_ns = now;
        let mut work = false;
        for q in queues.iter_mut() {
            let (sh, dev) = (&*q.sh, &mut q.dev);
            let req = q.ctl.req.load(Ordering::Acquire);
            if req != REQ_NONE {
                let result = match req {
                    REQ_RESET => dev.qp_reset().map_or(1, |_| 0),
                    REQ_READY => dev.qp_ready(sh).map_or(2, |_| 0),
                    _ => {
                        // Detach: the driver is going away with its memory; never touch the
                        // queues or its buffers again.
                        dev.in_reset = true;
                        0
                    }
                };
                q.ctl.result.store(result, Ordering::Relaxed);
                q.ctl.req.store(REQ_NONE, Ordering::Release);
                work = true;
            }
        }
        if ctl.stop.load(Ordering::Acquire) {
            return clock;
        }
        for q in queues.iter_mut() {
            let (sh, dev) = (&*q.sh, &mut q.dev);
            if dev.poll_doorbell_record(sh) || dev.sq_ci != dev.sq_db_pi {
                dev.run_sq(sh, &mut |f| wire.transmit(f, now));
                work = true;
            }
            if dev.error && !dev.in_reset {
                dev.flush_rq(sh);
            }
        }
        work |= wire.poll(&clock, &mut RxPort { queues });
        if !done && wire.finished() {
            done = true;
            ctl.wire_done.store(true, Ordering::Release);
        }
        worked = work;
        if !work {
            if yield_when_idle {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// The driver's side of one queue set of an [`EmuDevice`]: register memory, get the queue
/// memory.
#[derive(Clone)]
pub struct EmuPort {
    sh: Arc<Shared>,
    ctl: Arc<Control>,
    qc: Arc<QueueCtl>,
    index: usize,
}

impl EmuPort {
    /// Registers every region of `mem` (now and later) as a memory region of the device.
    /// `mem` must outlive the queues' use of its buffers, which it does when it is the memory
    /// of the datapath built on [`queues`](Self::queues) (dropping the datapath detaches the
    /// device first).
    pub fn register(&self, mem: &PinnedMemory) -> io::Result<()> {
        register_with(&self.sh, mem)
    }

    /// The queue memory for one driver. Dropping it detaches the device: it stops touching the
    /// queues and every buffer posted in them.
    pub fn queues(&self) -> ThreadedQueues {
        ThreadedQueues {
            sh: self.sh.clone(),
            ctl: self.ctl.clone(),
            qc: self.qc.clone(),
        }
    }

    /// The port MTU.
    pub fn mtu(&self) -> usize {
        self.sh.cfg.mtu
    }

    /// Which queue set of the port this is.
    pub fn queue_index(&self) -> usize {
        self.index
    }
}

/// Queue memory shared with a device thread ([`QueueMemory`] for the driver).
pub struct ThreadedQueues {
    sh: Arc<Shared>,
    ctl: Arc<Control>,
    qc: Arc<QueueCtl>,
}

/// How long the driver waits for the device thread to answer a control request.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

impl ThreadedQueues {
    fn request(&self, req: u32) -> io::Result<u32> {
        if !self.ctl.alive.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "the emulated device thread is not running",
            ));
        }
        self.qc.req.store(req, Ordering::Release);
        let deadline = Instant::now() + CONTROL_TIMEOUT;
        while self.qc.req.load(Ordering::Acquire) != REQ_NONE {
            if !self.ctl.alive.load(Ordering::Acquire) {
                return Err(io::Error::other("the emulated device thread ended"));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(
                    "the emulated device thread did not answer a control request in 10 s",
                ));
            }
            std::thread::yield_now();
        }
        Ok(self.qc.result.load(Ordering::Relaxed))
    }

    /// Doorbell words rung so far (the last one).
    pub fn last_doorbell(&self) -> u64 {
        self.qc.bf_word.load(Ordering::Relaxed)
    }
}

impl Drop for ThreadedQueues {
    fn drop(&mut self) {
        // A device thread that already ended touches nothing.
        let _ = self.request(REQ_DETACH);
    }
}

// SAFETY: every pointer handed out points into a `DmaArea` of the `Shared` this value keeps
// alive (Arc); the areas are sized from the same config the rings report and aligned to 4096.
// The device thread accesses them only through `mmio` under the queue protocol (see `Shared`'s
// Send/Sync argument), and once `qp_reset` returns (or the value is dropped) it touches neither
// the queues nor any posted buffer until `qp_ready`.
unsafe impl QueueMemory for ThreadedQueues {
    fn sq(&self) -> Ring {
        self.sh.sq_ring()
    }

    fn rq(&self) -> Ring {
        self.sh.rq_ring()
    }

    fn send_cq(&self) -> Ring {
        self.sh.send_cq_ring()
    }

    fn recv_cq(&self) -> Ring {
        self.sh.recv_cq_ring()
    }

    fn sq_dbrec(&self) -> NonNull<u32> {
        self.sh.dbrec_ptr(DB_QP, MLX5_SND_DBR)
    }

    fn rq_dbrec(&self) -> NonNull<u32> {
        self.sh.dbrec_ptr(DB_QP, MLX5_RCV_DBR)
    }

    fn send_cq_dbrec(&self) -> NonNull<u32> {
        self.sh.dbrec_ptr(DB_SCQ, 0)
    }

    fn recv_cq_dbrec(&self) -> NonNull<u32> {
        self.sh.dbrec_ptr(DB_RCQ, 0)
    }

    fn qpn(&self) -> u32 {
        self.sh.cfg.qpn
    }

    /// The device thread polls the doorbell record (written just before this), so the word
    /// is only kept for inspection.
    fn ring_doorbell(&mut self, word: u64) {
        self.qc.bf_word.store(word, Ordering::Relaxed);
    }

    fn qp_reset(&mut self) -> io::Result<()> {
        match self.request(REQ_RESET)? {
            0 => Ok(()),
            _ => Err(io::Error::other("send queue still has WQEs in the device")),
        }
    }

    fn qp_ready(&mut self) -> io::Result<()> {
        match self.request(REQ_READY)? {
            0 => Ok(()),
            _ => Err(io::Error::other("doorbell records not cleared before RTS")),
        }
    }
}

/// The process's CPUs and thread pinning are `percore`'s (one home for `sched_*affinity`),
/// re-exported here for the emulated device's callers.
pub use percore::{allowed_cores, pin_current_thread};

/// Two distinct CPUs for a driver (server) thread and a device thread: the first two this
/// process may use. A clear error when there are fewer: on one core the two threads would
/// take turns, and the benchmark would measure the scheduler instead of the server.
pub fn two_cores() -> io::Result<(usize, usize)> {
    let (servers, device) = cores_for(1)?;
    Ok((servers[0], device))
}

/// Distinct CPUs for `servers` driver (server) threads and one device thread: the first
/// `servers + 1` this process may use, the servers' first and the device's last. A clear
/// error naming the count when there are fewer: threads sharing a CPU take turns, and the
/// benchmark would measure the scheduler instead of the servers.
pub fn cores_for(servers: usize) -> io::Result<(Vec<usize>, usize)> {
    if servers == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at least one server core is needed",
        ));
    }
    let cores = allowed_cores()?;
    if cores.len() <= servers {
        let what = if servers == 1 {
            "one for the server, one for the device".to_owned()
        } else {
            format!("{servers} for the server cores, one for the device")
        };
        return Err(io::Error::other(format!(
            "the emulated NIC needs {} CPUs ({what}), but this process may only run on {} \
             ({:?}); run on a machine (or cgroup/taskset) with at least {}",
            servers + 1,
            cores.len(),
            cores,
            servers + 1
        )));
    }
    Ok((cores[..servers].to_vec(), cores[servers]))
}
