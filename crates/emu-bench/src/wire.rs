//! [`LoadWire`]: the clients, on the device thread. It injects prepared request frames at
//! their scheduled times, matches every transmitted reply to its request, checks it (and that
//! the core the request was sent to answered it), and records latency.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cornflakes_stack::iface::FRAME_OVERHEAD;
use cornflakes_stack::wire::{ethernet, framing, ipv4, udp, MacAddr};
use datapath_mlx5::emu::threaded::{DeviceClock, RxPort, Wire};
use datapath_mlx5::emu::TxFrame;
use datapath_mlx5::prm::{MLX5_ETH_WQE_L3_CSUM, MLX5_ETH_WQE_L4_CSUM};
use loadgen::{Counters, LatencyHistogram};

use crate::frames::RequestFrames;

/// Decides whether a reply payload is the correct answer to request `request` (an index into
/// the requests given to [`crate::run`]). Runs on the device thread.
pub trait ReplyCheck: Send + 'static {
    /// `Ok` when `reply` (the reply message's bytes) is right; otherwise why not.
    fn check(&mut self, request: usize, reply: &[u8]) -> Result<(), String>;
}

impl<F> ReplyCheck for F
where
    F: FnMut(usize, &[u8]) -> Result<(), String> + Send + 'static,
{
    fn check(&mut self, request: usize, reply: &[u8]) -> Result<(), String> {
        self(request, reply)
    }
}

/// Descriptions of failed replies kept per run (the counters count all of them).
pub const MAX_FAILURES_KEPT: usize = 16;

/// Most requests injected per device-loop iteration, so transmitted replies are still taken
/// (and their buffers returned) while injection catches up after a stall.
const INJECT_BURST: usize = 32;

const UNSENT: u8 = 0;
const OUTSTANDING: u8 = 1;
const SETTLED: u8 = 2;

/// Addresses of the two ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ends {
    pub client_mac: MacAddr,
    pub client_port: u16,
    /// Server core `i` listens at `base_port + i`.
    pub base_port: u16,
}

/// The open-loop clients of one run, as a [`Wire`] of the emulated device.
pub struct LoadWire<C: ReplyCheck> {
    frames: RequestFrames,
    offsets: Vec<u64>,
    state: Vec<u8>,
    ends: Ends,
    warmup_ns: u64,
    timeout_ns: u64,
    sample_every: u64,
    replies_vary: bool,
    checker: C,
    /// One flag per server core, set when its datapath is up: injection starts when all are.
    ready: Arc<[AtomicBool]>,
    /// Device time of schedule offset 0 (set when the server is ready).
    t0: Option<u64>,
    next: usize,
    expire: usize,
    outstanding: usize,
    /// The reply length of each request, learned from its first (fully verified) reply.
    reply_len: Vec<Option<usize>>,
    scratch: Vec<u8>,
    /// Request outcomes per server core (a request's by the core it was sent to; a malformed
    /// or unexpected reply's by the queue set that sent it). Their sum is the run's.
    pub(crate) per_core: Vec<Counters>,
    pub(crate) latency: LatencyHistogram,
    /// Parts verified so far of the measured groups (split requests) not yet complete, by
    /// the wire sequence number of their first part.
    group_parts: HashMap<usize, usize>,
    /// Measured requests answered and verified, per server core.
    pub(crate) measured_verified: Vec<u64>,
    pub(crate) last_measured_reply_ns: u64,
    /// Replies read whole and given to the checker.
    pub(crate) sampled: u64,
    /// Requests the device could not deliver (no receive buffer posted): lost.
    pub(crate) not_delivered: u64,
    /// Largest delay between a request's scheduled time and its injection.
    pub(crate) max_inject_lag_ns: u64,
    /// Device clock when the first measured request was injected and when the last was.
    pub(crate) window_start: Option<DeviceClock>,
    pub(crate) window_end: Option<DeviceClock>,
    pub(crate) failures: Vec<String>,
}

impl<C: ReplyCheck> LoadWire<C> {
    pub(crate) fn new(
        frames: RequestFrames,
        offsets: Vec<u64>,
        ends: Ends,
        cfg: &crate::EmuRunConfig,
        checker: C,
        ready: Arc<[AtomicBool]>,
    ) -> LoadWire<C> {
        let n = offsets.len();
        let k = frames.len();
        let cores = ready.len();
        LoadWire {
            frames,
            offsets,
            state: vec![UNSENT; n],
            ends,
            warmup_ns: cfg.warmup.as_nanos() as u64,
            timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX),
            sample_every: cfg.sample_every.max(1),
            replies_vary: cfg.replies_vary,
            checker,
            ready,
            t0: None,
            next: 0,
            expire: 0,
            outstanding: 0,
            reply_len: vec![None; k],
            scratch: Vec::with_capacity(16 * 1024),
            per_core: vec![Counters::default(); cores],
            latency: LatencyHistogram::new(),
            group_parts: HashMap::new(),
            measured_verified: vec![0; cores],
            last_measured_reply_ns: 0,
            sampled: 0,
            not_delivered: 0,
            max_inject_lag_ns: 0,
            window_start: None,
            window_end: None,
            failures: Vec::new(),
        }
    }

    /// The schedule's offsets (ns from the start of the run).
    pub(crate) fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    fn fail(&mut self, why: impl FnOnce() -> String) {
        if self.failures.len() < MAX_FAILURES_KEPT {
            self.failures.push(why());
        }
    }

    /// Mean Ethernet frame length (without FCS) of the requests, and of the replies to the
    /// distinct requests that were answered (`None` when none was), each distinct request
    /// weighted alike (request `seq` is distinct request `seq mod len`).
    pub(crate) fn mean_frames(&self) -> (f64, Option<f64>) {
        let n = self.frames.len();
        let req = (0..n).map(|k| self.frames.frame(k).len()).sum::<usize>() as f64 / n as f64;
        let replies: Vec<usize> = self.reply_len.iter().flatten().copied().collect();
        let reply = (!replies.is_empty()).then(|| {
            FRAME_OVERHEAD as f64 + replies.iter().sum::<usize>() as f64 / replies.len() as f64
        });
        (req, reply)
    }

    /// The run's request outcomes, summed over the server cores.
    pub(crate) fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for k in &self.per_core {
            c.merge(k);
        }
        c
    }

    /// Checks headers and framing of a reply of `len` bytes whose first bytes are `head`;
    /// returns `(message id, message type, payload length, UDP source port)`.
    fn parse_head(&self, head: &[u8], len: usize) -> Result<(u32, u16, usize, u16), String> {
        if head.len() < FRAME_OVERHEAD {
            return Err(format!(
                "reply frame of {len} bytes is shorter than its headers"
            ));
        }
        let eth = ethernet::Frame::new_unchecked(head);
        if eth.dst_addr() != self.ends.client_mac {
            return Err(format!("reply to MAC {:?}, not the client", eth.dst_addr()));
        }
        if eth.ethertype() != ethernet::EtherType::Ipv4 {
            return Err("reply is not IPv4".to_owned());
        }
        let ip = ipv4::Packet::new_unchecked(&head[ethernet::HEADER_LEN..]);
        let total = ip.total_len() as usize;
        if ip.version() != 4
            || ip.header_len() as usize != ipv4::HEADER_LEN
            || ip.protocol() != ipv4::PROTO_UDP
            || ethernet::HEADER_LEN + total != len
        {
            return Err(format!(
                "bad IPv4 header (total length {total} in a {len}-byte frame)"
            ));
        }
        let u = udp::Packet::new_unchecked(&head[ethernet::HEADER_LEN + ipv4::HEADER_LEN..]);
        let cores = self.per_core.len();
        if u.dst_port() != self.ends.client_port
            || u.src_port() < self.ends.base_port
            || usize::from(u.src_port() - self.ends.base_port) >= cores
            || u.len() as usize != total - ipv4::HEADER_LEN
        {
            return Err(format!(
                "bad UDP header (ports {} -> {}, length {})",
                u.src_port(),
                u.dst_port(),
                u.len()
            ));
        }
        let f = framing::Packet::new_unchecked(&head[FRAME_OVERHEAD - framing::HEADER_LEN..]);
        let payload = len - FRAME_OVERHEAD;
        if f.version() != framing::VERSION
            || f.seg_count() != 1
            || f.seg_index() != 0
            || f.seg_offset() != 0
            || f.total_len() as usize != payload
        {
            return Err(format!(
                "bad framing header (segment {}/{}, total {} for {payload} bytes): the emulated \
                 wire takes single-frame replies",
                f.seg_index(),
                f.seg_count(),
                f.total_len()
            ));
        }
        Ok((f.msg_id(), f.msg_type(), payload, u.src_port()))
    }

    /// Reads a whole reply, checks the checksums the server computed itself and gives the
    /// payload to the checker. A checksum the WQE asked the NIC to fill (offload) is neither
    /// filled nor verified: the device would compute it from these very bytes, so checking
    /// it tells nothing about the server, and at 4 KiB each pass costs the device thread
    /// ~7,000 instructions.
    fn verify_full(&mut self, frame: &TxFrame<'_>, request: usize) -> Result<(), String> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        buf.resize(frame.len(), 0);
        let got = frame.read_prefix(&mut buf);
        let cs = frame.cs_flags();
        let r = (|| {
            if got != frame.len() {
                return Err(format!("reply frame read {got} of {} bytes", frame.len()));
            }
            let ip = ipv4::Packet::new_checked(&buf[ethernet::HEADER_LEN..])
                .map_err(|e| format!("reply IPv4: {e:?}"))?;
            if cs & MLX5_ETH_WQE_L3_CSUM == 0 && !ip.verify_checksum() {
                return Err("reply IPv4 checksum wrong".to_owned());
            }
            let u = udp::Packet::new_checked(ip.payload()).map_err(|e| format!("{e:?}"))?;
            if cs & MLX5_ETH_WQE_L4_CSUM == 0 && !u.verify_checksum(ip.src_addr(), ip.dst_addr()) {
                return Err("reply UDP checksum wrong".to_owned());
            }
            self.checker
                .check(request, &buf[FRAME_OVERHEAD..frame.len()])
        })();
        self.scratch = buf;
        self.sampled += 1;
        r
    }

    fn inject(&mut self, clock: &DeviceClock, rx: &mut RxPort<'_>) -> bool {
        let Some(t0) = self.t0 else { return false };
        let now = clock.now_ns;
        let mut did = 0;
        while self.next < self.offsets.len() && did < INJECT_BURST {
            let due = t0 + self.offsets[self.next];
            if due > now {
                break;
            }
            let seq = self.next;
            let k = seq % self.frames.len();
            let core = self.frames.core(k);
            let frame = self.frames.frame(k);
            let frames = &self.frames;
            let ok = rx.deliver_prepared(frame.len(), frames.flags(k), frame, &mut |buf| {
                frames.write(k, seq as u32, buf)
            });
            if self.offsets[seq] >= self.warmup_ns && self.window_start.is_none() {
                self.window_start = Some(*clock);
            }
            let c = &mut self.per_core[core];
            c.sent += 1;
            if ok {
                self.state[seq] = OUTSTANDING;
                self.outstanding += 1;
            } else {
                // Dropped at the NIC (no receive buffer): the client sent it, it is lost.
                self.state[seq] = SETTLED;
                c.lost += 1;
                self.not_delivered += 1;
            }
            self.max_inject_lag_ns = self.max_inject_lag_ns.max(now - due);
            self.next += 1;
            did += 1;
            if self.next == self.offsets.len() {
                self.window_end = Some(*clock);
            }
        }
        did > 0
    }

    fn expire(&mut self, now: u64) {
        let Some(t0) = self.t0 else { return };
        while self.expire < self.next
            && (self.state[self.expire] != OUTSTANDING
                || t0 + self.offsets[self.expire] + self.timeout_ns < now)
        {
            if self.state[self.expire] == OUTSTANDING {
                self.state[self.expire] = SETTLED;
                self.outstanding -= 1;
                let core = self.frames.core(self.expire % self.frames.len());
                self.per_core[core].lost += 1;
            }
            self.expire += 1;
        }
    }
}

impl<C: ReplyCheck> Wire for LoadWire<C> {
    fn transmit(&mut self, frame: &TxFrame<'_>, now_ns: u64) {
        let mut head = [0u8; FRAME_OVERHEAD];
        let got = frame.read_prefix(&mut head);
        // The queue set that sent it, for replies that belong to no request.
        let sender = frame.queue().min(self.per_core.len() - 1);
        let (id, ty, payload_len, src_port) = match self.parse_head(&head[..got], frame.len()) {
            Ok(x) => x,
            Err(e) => {
                self.per_core[sender].malformed += 1;
                self.fail(|| e);
                return;
            }
        };
        let seq = id as usize;
        let Some(t0) = self.t0 else {
            self.per_core[sender].unexpected += 1;
            return;
        };
        if seq >= self.next || self.state[seq] != OUTSTANDING {
            self.per_core[sender].unexpected += 1;
            return;
        }
        self.state[seq] = SETTLED;
        self.outstanding -= 1;
        let k = seq % self.frames.len();
        let core = self.frames.core(k);
        let lat = now_ns.saturating_sub(t0 + self.offsets[seq]);
        if lat > self.timeout_ns {
            self.per_core[core].lost += 1;
            return;
        }
        let from_core = usize::from(src_port - self.ends.base_port);
        let verdict = if from_core != core || frame.queue() != core {
            // Steering or a server answering for another core: the shards would not be
            // disjoint.
            Err(format!(
                "reply to request {k} (id {id}), sent to core {core}, came from port {src_port} \
                 (core {from_core}) through queue set {}",
                frame.queue()
            ))
        } else if ty != self.frames.msg_type(k) {
            Err(format!(
                "reply to request {k} (id {id}) has message type {ty}, expected {}",
                self.frames.msg_type(k)
            ))
        } else {
            match self.reply_len[k] {
                Some(l) if l != payload_len && !self.replies_vary => Err(format!(
                    "reply to request {k} (id {id}) has {payload_len} bytes, earlier ones {l}"
                )),
                Some(l) if l == payload_len && !(seq as u64).is_multiple_of(self.sample_every) => {
                    Ok(())
                }
                // Sampled, the first reply to this request, or (replies_vary) one whose length
                // changed: read it whole, and remember its length once it is right.
                _ => self.verify_full(frame, k).map(|()| {
                    self.reply_len[k] = Some(payload_len);
                }),
            }
        };
        match verdict {
            Ok(()) => {
                self.per_core[core].verified += 1;
                if self.offsets[seq] >= self.warmup_ns {
                    self.measured_verified[core] += 1;
                    self.last_measured_reply_ns = self.last_measured_reply_ns.max(now_ns - t0);
                    match self.frames.group(k) {
                        (_, 1) => self.latency.record_ns(lat),
                        (back, parts) => {
                            // The parts share their send time, so the last to be verified
                            // has the group's latency. A group with a part lost or wrong
                            // never completes and records none.
                            let head = seq - back;
                            let done = self.group_parts.entry(head).or_insert(0);
                            *done += 1;
                            if *done == parts {
                                self.group_parts.remove(&head);
                                self.latency.record_ns(lat);
                            }
                        }
                    }
                }
            }
            Err(e) => {
                self.per_core[core].mismatched += 1;
                self.fail(|| e);
            }
        }
    }

    fn poll(&mut self, clock: &DeviceClock, rx: &mut RxPort<'_>) -> bool {
        if self.t0.is_none() {
            if !self.ready.iter().all(|r| r.load(Ordering::Acquire)) {
                return false;
            }
            self.t0 = Some(clock.now_ns);
        }
        let did = self.inject(clock, rx);
        self.expire(clock.now_ns);
        did
    }

    fn finished(&self) -> bool {
        self.t0.is_some() && self.next == self.offsets.len() && self.outstanding == 0
    }
}
