//! [`Mlx5Datapath`]: the Cornflakes datapath over a ConnectX queue pair, generic over where
//! the queues live (hardware or [`crate::emu`]).
//!
//! This crate supplies only the rings ([`Mlx5Nic`], a [`Device`]); the datapath traits, ARP
//! and the stack are the stack's [`EthDatapath`] over it. Transmit is the stack's
//! serialize-and-send ([`cornflakes_stack::tx`]) with the send queue as its
//! [`TxSink`]: every descriptor the stack posts becomes a data
//! segment written into the WQE on the spot. Receive polls the receive CQ, hands each frame to
//! the stack and refills the receive queue.

use std::io;

use cornflakes_datapath::DelegateDatapath;
use cornflakes_datapath::{BufferTooSmall, DropCounters, SendError, SendObject, SendPlan};
use cornflakes_mem::{PinnedMemory, RcBuf, RcBufMut};
use cornflakes_stack::device::{Device, EthDatapath};
use cornflakes_stack::iface::{EthStack, StackConfig};
use cornflakes_stack::tx::TxSink;
use cornflakes_stack::wire::{ethernet, ChecksumCaps};

use crate::prm::*;
use crate::queue::{CqPoller, QueueMemory, RecvQueue, RxCompletion, SendQueue, TxStats};

/// What the device can do, from its capabilities (hardware: `ibv_query_device_ex`, the QP's
/// granted caps and the port; emulated: the emulator's config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Gather entries per send WQE the QP was created with.
    pub max_send_sge: usize,
    /// Header bytes each WQE inlines in its Ethernet segment (at least 18: the L2 header the
    /// device needs to steer/loop back; more when the device requires L3/L4 inline).
    pub inline_len: usize,
    /// The port's IP MTU.
    pub mtu: usize,
    /// IPv4/UDP checksums offloaded on transmit and verified on receive.
    pub csum_offload: bool,
}

/// Configuration of a [`Mlx5Datapath`].
#[derive(Clone, Debug)]
pub struct Mlx5Config {
    /// The UDP stack (address, MAC, MTU cap, ARP, reassembly). Its MTU is lowered to the
    /// device's; its checksum capabilities are set from [`DeviceCaps::csum_offload`].
    pub stack: StackConfig,
    /// Bytes per receive buffer (at least one full frame).
    pub rx_buf_size: usize,
    /// Receive completions handled per
    /// [`Receive::recv_burst`](cornflakes_datapath::Receive::recv_burst).
    pub rx_burst: usize,
}

impl Mlx5Config {
    /// Defaults for `stack`: 2 KiB receive buffers, bursts of 32.
    pub fn new(stack: StackConfig) -> Mlx5Config {
        Mlx5Config {
            stack,
            rx_buf_size: 2048,
            rx_burst: 32,
        }
    }
}

/// Device-level counters (the stack's drop counters are in
/// [`Receive::counters`](cornflakes_datapath::Receive::counters)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mlx5Stats {
    pub tx: TxStats,
    /// Receive completions with a frame.
    pub rx_frames: u64,
    /// Receive error completions (`MLX5_CQE_RESP_ERR`).
    pub rx_error_cqes: u64,
    /// Syndrome of the last receive error.
    pub rx_last_syndrome: u8,
    /// Receive completions that named no posted WQE or claimed more bytes than the buffer.
    pub rx_bogus_cqes: u64,
    /// Frames whose IPv4 or UDP checksum the device found wrong.
    pub rx_bad_csum: u64,
    /// Control frames (ARP) sent.
    pub control_sent: u64,
    /// Receive WQEs the device flushed while the queue pair was in error (buffers returned).
    pub rx_flushed: u64,
    /// Receive completions discarded while resetting the queue pair after an error.
    pub rx_discarded: u64,
    /// Queue-pair resets that failed (retried on the next poll).
    pub reset_failures: u64,
}

/// The ConnectX datapath of one queue pair: the stack's [`EthDatapath`] over the queue pair's
/// rings ([`Mlx5Nic`]).
pub struct Mlx5Datapath<Q: QueueMemory> {
    eth: EthDatapath<Mlx5Nic<Q>>,
}

/// The rings of one ConnectX queue pair (send queue and CQ, receive queue and CQ): the
/// [`Device`] under a [`Mlx5Datapath`].
pub struct Mlx5Nic<Q: QueueMemory> {
    q: Q,
    mem: PinnedMemory,
    sq: SendQueue,
    scq: CqPoller,
    rq: RecvQueue,
    rcq: CqPoller,
    caps: DeviceCaps,
    max_segments: usize,
    rx_burst: usize,
    /// The queue pair is in RESET (recovery half done).
    qp_down: bool,
    /// Receive buffers that could not be posted since the last receive poll.
    no_rx_buffers: u64,
    stats: Mlx5Stats,
}

impl<Q: QueueMemory> Mlx5Datapath<Q> {
    /// A datapath over the queues `q` of a device with `caps`. Every region of `mem` must be
    /// registered with that device (its registration holds the lkey); receive buffers are
    /// posted at once.
    pub fn new(q: Q, mem: PinnedMemory, caps: DeviceCaps, cfg: Mlx5Config) -> io::Result<Self> {
        let mut scfg = cfg.stack;
        scfg.mtu = scfg.mtu.min(caps.mtu);
        scfg.caps = if caps.csum_offload {
            ChecksumCaps::OFFLOAD
        } else {
            ChecksumCaps::SOFTWARE
        };
        let frame_max = scfg.mtu + ethernet::HEADER_LEN;
        if cfg.rx_buf_size < frame_max || cfg.rx_buf_size > mem.max_item_size() {
            return Err(io::Error::other(format!(
                "receive buffers of {} bytes cannot hold {frame_max}-byte frames (or exceed the \
                 pool's {}-byte items)",
                cfg.rx_buf_size,
                mem.max_item_size()
            )));
        }
        let cs_flags = if caps.csum_offload {
            MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM
        } else {
            0
        };
        // Every receive WQE ends in a CQE: the receive CQ must hold them all.
        if q.recv_cq().entries < q.rq().entries {
            return Err(io::Error::other(format!(
                "receive completion queue ({} entries) smaller than the receive queue ({})",
                q.recv_cq().entries,
                q.rq().entries
            )));
        }
        let sq = SendQueue::new(
            q.sq(),
            q.sq_dbrec(),
            q.qpn(),
            caps.inline_len,
            cs_flags,
            q.send_cq().entries as usize,
        )?;
        let max_segments = caps.max_send_sge.min(sq.max_data_segments()).max(1);
        let scq = CqPoller::new(q.send_cq(), q.send_cq_dbrec())?;
        let rcq = CqPoller::new(q.recv_cq(), q.recv_cq_dbrec())?;
        let mut rq = RecvQueue::new(q.rq(), q.rq_dbrec(), cfg.rx_buf_size)?;
        let (_, failed) = rq.refill(&mem);
        let nic = Mlx5Nic {
            q,
            mem: mem.clone(),
            sq,
            scq,
            rq,
            rcq,
            caps,
            max_segments,
            rx_burst: cfg.rx_burst.max(1),
            qp_down: false,
            no_rx_buffers: failed as u64,
            stats: Mlx5Stats::default(),
        };
        Ok(Mlx5Datapath {
            eth: EthDatapath::new(nic, mem, scfg),
        })
    }

    /// Device-level counters.
    pub fn stats(&self) -> Mlx5Stats {
        let nic = self.eth.device();
        Mlx5Stats {
            tx: nic.sq.stats(),
            control_sent: self.eth.control_sent(),
            ..nic.stats
        }
    }

    /// The device capabilities in force.
    pub fn caps(&self) -> DeviceCaps {
        self.eth.device().caps
    }

    /// Receive buffers currently posted.
    pub fn rx_posted(&self) -> usize {
        self.eth.device().rq.posted()
    }

    /// The queue memory (for the device-specific owner).
    pub fn queues(&self) -> &Q {
        &self.eth.device().q
    }

    /// The stack (configuration and counters).
    pub fn stack(&self) -> &EthStack {
        self.eth.stack()
    }
}

impl<Q: QueueMemory> DelegateDatapath for Mlx5Datapath<Q> {
    type Inner = EthDatapath<Mlx5Nic<Q>>;

    #[inline]
    fn inner(&self) -> &EthDatapath<Mlx5Nic<Q>> {
        &self.eth
    }

    #[inline]
    fn inner_mut(&mut self) -> &mut EthDatapath<Mlx5Nic<Q>> {
        &mut self.eth
    }
}

impl<Q: QueueMemory> Mlx5Nic<Q> {
    /// Resets the queue pair after a send error (once every send WQE has completed):
    /// RESET, which stops the device; then the receive completions it wrote before are
    /// consumed and their buffers released (counted as discarded), both queues restart empty
    /// with zeroed doorbell records, the QP goes back to ready-to-send and receive buffers are
    /// posted again. A failed step is counted and retried on the next poll (sends report
    /// `Full` meanwhile).
    fn recover(&mut self) {
        if !self.qp_down {
            if self.q.qp_reset().is_err() {
                self.stats.reset_failures += 1;
                return;
            }
            self.qp_down = true;
            for _ in 0..self.rcq.entries() {
                let Some(cqe) = self.rcq.poll() else { break };
                // Frames, errors and flushes alike: the buffer goes back to the pool.
                drop(self.rq.complete(&cqe));
                self.stats.rx_discarded += 1;
            }
            self.rcq.update_ci();
            self.sq.reset();
            self.rq.reset();
        }
        if self.q.qp_ready().is_err() {
            self.stats.reset_failures += 1;
            return;
        }
        self.qp_down = false;
        self.sq.resume();
        let (_, failed) = self.rq.refill(&self.mem);
        self.no_rx_buffers += failed as u64;
    }

    /// Whether the device's checksum verdict on a received frame is a failure.
    fn bad_rx_csum(&self, cqe: &Cqe) -> bool {
        if !self.caps.csum_offload || cqe.l3_hdr_type() != MLX5_CQE_L3_HDR_TYPE_IPV4 {
            return false;
        }
        let l3 = cqe.hds_ip_ext & MLX5_CQE_L3_OK != 0;
        let l4 = cqe.l4_hdr_type() != CQE_L4_HDR_TYPE_UDP || cqe.hds_ip_ext & MLX5_CQE_L4_OK != 0;
        !(l3 && l4)
    }
}

impl<Q: QueueMemory> TxSink for Mlx5Nic<Q> {
    #[inline]
    fn free_slots(&self) -> usize {
        self.sq.free_slots()
    }

    #[inline]
    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        self.sq.post(buf, end_of_frame)
    }

    #[inline]
    fn post_object_frame<O: SendObject + ?Sized>(
        &mut self,
        head: RcBufMut,
        at: usize,
        plan: &SendPlan<'_, O>,
    ) -> Result<(), BufferTooSmall> {
        self.sq.post_object_frame(head, at, plan)
    }
}

impl<Q: QueueMemory> Device for Mlx5Nic<Q> {
    fn max_segments(&self) -> usize {
        self.max_segments
    }

    #[inline]
    fn receive(&mut self, mut frame: impl FnMut(RcBuf)) -> u64 {
        for _ in 0..self.rx_burst {
            let Some(cqe) = self.rcq.poll() else { break };
            match self.rq.complete(&cqe) {
                RxCompletion::Frame(buf) => {
                    self.stats.rx_frames += 1;
                    if self.bad_rx_csum(&cqe) {
                        self.stats.rx_bad_csum += 1;
                        continue;
                    }
                    frame(buf.freeze());
                }
                RxCompletion::Error {
                    syndrome: MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
                } => self.stats.rx_flushed += 1,
                RxCompletion::Error { syndrome } => {
                    self.stats.rx_error_cqes += 1;
                    self.stats.rx_last_syndrome = syndrome;
                }
                RxCompletion::Bogus => self.stats.rx_bogus_cqes += 1,
            }
        }
        self.rcq.update_ci();
        // While the QP is in error the device would only flush new buffers.
        if self.rq.needs_refill() && !self.sq.in_error() {
            let (_, failed) = self.rq.refill(&self.mem);
            self.no_rx_buffers += failed as u64;
        }
        std::mem::take(&mut self.no_rx_buffers)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.sq.flush(&mut self.q);
        Ok(())
    }

    fn prepare_send(&mut self) {
        // `free_slots` reads the send queue's indices itself.
    }

    fn make_room(&mut self) -> Result<bool, SendError> {
        // The caller sees `Full` and decides when to flush and reap completions.
        Ok(false)
    }

    fn poll_completions(&mut self) -> usize {
        let mut released = 0;
        // At most one CQ's worth per call, so a misbehaving device cannot keep us here.
        for _ in 0..self.scq.entries() {
            let Some(cqe) = self.scq.poll() else { break };
            released += self.sq.complete(&cqe);
        }
        self.scq.update_ci();
        if self.sq.ready_for_reset() {
            self.recover();
        }
        released
    }

    fn in_flight(&self) -> usize {
        self.sq.outstanding()
    }

    fn add_counters(&self, counters: &mut DropCounters) {
        counters.bad_checksum += self.stats.rx_bad_csum;
    }
}
