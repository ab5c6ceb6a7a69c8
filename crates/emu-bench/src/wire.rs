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
use latency::LatencyHistogram;
use loadgen::Counters;

use crate::frames::RequestFrames;
use loadgen::payload_hash::PayloadHasher;

/// Decides whether a reply payload is the correct answer to request `request` (an index into
/// the requests given to [`crate::run`]). Runs on the device thread.
///
/// The device reads every reply and accepts one whose payload hashes equal to a reply `check`
/// accepted for the same request **under the same [`version`](Self::version)**; every other
/// reply goes to `check`. A checker whose right answers change during a run (a key-value
/// store's reads after writes) says so with `version` and [`sees_every`](Self::sees_every).
pub trait ReplyCheck: Send + 'static {
    /// `Ok` when `reply` (the reply message's bytes) is right; otherwise why not.
    fn check(&mut self, request: usize, reply: &[u8]) -> Result<(), String>;

    /// A token of what the right reply to `request` depends on now (e.g. how often each key it
    /// reads has been written): an identical reply is accepted by hash only under the token
    /// it was checked under. The default, 0, says the right reply never changes.
    fn version(&mut self, _request: usize) -> u64 {
        0
    }

    /// Whether every reply to `request` must reach [`check`](Self::check) (e.g. a write,
    /// whose effect the checker applies in order). Default: no.
    fn sees_every(&self, _request: usize) -> bool {
        false
    }

    /// A reply to `request` that came after its request timed out: not counted, but the
    /// server did handle it, so a checker that applies writes in order (`sees_every`) may
    /// apply it here. Default: nothing.
    fn late(&mut self, _request: usize, _reply: &[u8]) {}

    /// `request`, one whose every reply the checker sees ([`sees_every`](Self::sees_every)),
    /// timed out with no reply: the server may still have done it (its reply lost or yet to
    /// come, then given to [`late`](Self::late)), or not. Default: nothing.
    fn unanswered(&mut self, _request: usize) {}
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
    /// Per distinct request, the hash ([`loadgen::payload_hash`]) of the last reply payload the
    /// checker accepted and the checker's [`ReplyCheck::version`] then: a reply with the same
    /// bytes under the same version is right without decoding it again.
    verified_hash: Vec<Option<(u64, u64)>>,
    /// The random sample of checked replies the checker reads even when their bytes equal a
    /// verified reply's (1 in `sample_every`).
    decode_sample: Sample,
    /// The random sample of replies whose payload is checked at all (1 in `check_every`,
    /// besides those that must be), its own stream so that the checker's sample among them
    /// is the same whatever `check_every`.
    check_sample: Sample,
    /// Per distinct request, whether a reply to it in the measured window was answered
    /// (headers right), and whether one had its payload checked and accepted.
    measured_answered: Vec<bool>,
    measured_checked: Vec<bool>,
    /// The gathered frame, for the checker (and as the DMA of a reply not checked).
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
    /// Replies given to the checker (first replies, changed bytes, and the random sample).
    pub(crate) sampled: u64,
    /// Replies answered right by their headers whose payload was read (DMA) but not checked:
    /// outside the 1-in-`check_every` sample and not a reply that must be checked.
    pub(crate) unchecked: u64,
    /// Replies whose gathered bytes hashed equal to a reply the checker accepted for the
    /// same request.
    pub(crate) hash_matched: u64,
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
            replies_vary: cfg.replies_vary,
            checker,
            ready,
            t0: None,
            next: 0,
            expire: 0,
            outstanding: 0,
            reply_len: vec![None; k],
            verified_hash: vec![None; k],
            decode_sample: Sample::new(cfg.seed, cfg.sample_every),
            check_sample: Sample::new(cfg.seed ^ CHECK_STREAM, cfg.check_every),
            measured_answered: vec![false; k],
            measured_checked: vec![false; k],
            scratch: Vec::with_capacity(16 * 1024),
            per_core: vec![Counters::default(); cores],
            latency: LatencyHistogram::new(),
            group_parts: HashMap::new(),
            measured_verified: vec![0; cores],
            last_measured_reply_ns: 0,
            sampled: 0,
            unchecked: 0,
            hash_matched: 0,
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

    /// Distinct requests of the run.
    pub(crate) fn distinct(&self) -> usize {
        self.frames.len()
    }

    /// What the measured window's payload checks covered.
    pub(crate) fn coverage(&self) -> Coverage {
        let cores = self.per_core.len();
        let mut checked = vec![false; cores];
        for k in 0..self.frames.len() {
            checked[self.frames.core(k)] |= self.measured_checked[k];
        }
        let count = |v: &[bool]| v.iter().filter(|&&b| b).count();
        Coverage {
            distinct_checked: count(&self.measured_checked),
            distinct_answered: count(&self.measured_answered),
            cores_checked: count(&checked),
        }
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
        if f.incarnation() != self.frames.incarnation() {
            return Err(format!(
                "reply carries incarnation {:#x}, not its request's {:#x}",
                f.incarnation(),
                self.frames.incarnation()
            ));
        }
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
    fn verify_full(&mut self, buf: &[u8], cs: u8, request: usize) -> Result<(), String> {
        let r = (|| {
            let ip = ipv4::Packet::new_checked(&buf[ethernet::HEADER_LEN..])
                .map_err(|e| format!("reply IPv4: {e:?}"))?;
            if cs & MLX5_ETH_WQE_L3_CSUM == 0 && !ip.verify_checksum() {
                return Err("reply IPv4 checksum wrong".to_owned());
            }
            let u = udp::Packet::new_checked(ip.payload()).map_err(|e| format!("{e:?}"))?;
            if cs & MLX5_ETH_WQE_L4_CSUM == 0 && !u.verify_checksum(ip.src_addr(), ip.dst_addr()) {
                return Err("reply UDP checksum wrong".to_owned());
            }
            self.checker.check(request, &buf[FRAME_OVERHEAD..])
        })();
        self.sampled += 1;
        r
    }

    /// Reads the whole frame where its descriptors lie, as the device's DMA pulls it: one
    /// load of every cache line of every piece ([`touch_lines`]), nothing copied; an error
    /// when it reads short. A reply whose payload is not checked costs the device this.
    fn read_whole(&mut self, frame: &TxFrame<'_>) -> Result<(), String> {
        let seen = frame.visit(|piece| {
            touch_lines(piece);
            true
        });
        if seen == frame.len() {
            Ok(())
        } else {
            Err(format!("reply frame read {seen} of {} bytes", frame.len()))
        }
    }

    /// Copies the whole frame into `scratch`, for the checker; an error when it reads short.
    fn gather(&mut self, frame: &TxFrame<'_>) -> Result<(), String> {
        self.scratch.clear();
        self.scratch.resize(frame.len(), 0);
        let got = frame.read_prefix(&mut self.scratch);
        if got == frame.len() {
            Ok(())
        } else {
            Err(format!("reply frame read {got} of {} bytes", frame.len()))
        }
    }

    /// Checks the payload (`payload_len` bytes) of `frame`, a reply to distinct request `k`
    /// whose headers were right; `measured` when its request is in the measured window.
    /// Returns whether the payload was checked (`false`: read but outside the sample).
    ///
    /// A reply must be checked when the checker sees every reply to `k` (a write), when it
    /// is the first to `k`, the first to `k` in the measured window, or its length differs
    /// from the last checked one; of the others, a random 1 in `check_every` is. A checked
    /// reply is hashed where its descriptors lie ([`PayloadHasher`]): bytes equal to a reply
    /// the checker accepted for `k` under the same [`ReplyCheck::version`] are right unless
    /// the checker's own random sample (1 in `sample_every`) picks the reply; any other goes
    /// to the checker, and when it is accepted its hash becomes `k`'s. A reply not checked
    /// is still read whole (the DMA).
    fn check_payload(
        &mut self,
        frame: &TxFrame<'_>,
        k: usize,
        payload_len: usize,
        measured: bool,
    ) -> Result<bool, String> {
        let every = self.checker.sees_every(k);
        let must = every
            || self.reply_len[k] != Some(payload_len)
            || (measured && !self.measured_checked[k]);
        if !must && !self.check_sample.next() {
            self.read_whole(frame)?;
            self.unchecked += 1;
            return Ok(false);
        }
        let mut hasher = PayloadHasher::new(payload_len);
        let mut skip = FRAME_OVERHEAD;
        let seen = frame.visit(|piece| {
            let s = skip.min(piece.len());
            skip -= s;
            hasher.update(&piece[s..]);
            true
        });
        if seen != frame.len() {
            return Err(format!("reply frame read {seen} of {} bytes", frame.len()));
        }
        let h = hasher.finish();
        let sampled = self.decode_sample.next();
        let version = if every { 0 } else { self.checker.version(k) };
        if !every && !sampled && self.verified_hash[k] == Some((h, version)) {
            self.hash_matched += 1;
            return Ok(true);
        }
        self.gather(frame)?;
        let buf = std::mem::take(&mut self.scratch);
        let r = self.verify_full(&buf, frame.cs_flags(), k);
        self.scratch = buf;
        r?;
        self.verified_hash[k] = Some((h, version));
        self.reply_len[k] = Some(payload_len);
        Ok(true)
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
                let k = self.expire % self.frames.len();
                self.per_core[self.frames.core(k)].lost += 1;
                if self.checker.sees_every(k) {
                    self.checker.unanswered(k);
                }
            }
            self.expire += 1;
        }
    }
}

impl<C: ReplyCheck> Wire for LoadWire<C> {
    fn transmit(&mut self, frame: &TxFrame<'_>, now_ns: u64) {
        // Every byte of every gathered descriptor is read, as a NIC's DMA reads it: hashed
        // in place when the payload is checked, copied out otherwise. The headers first.
        let mut head = [0u8; FRAME_OVERHEAD];
        let got = frame.read_prefix(&mut head);
        self.settle(frame, &head[..got], now_ns);
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

impl<C: ReplyCheck> LoadWire<C> {
    /// Hands a reply that came too late to be counted to the checker, when it wants every
    /// reply to its request.
    fn late(&mut self, seq: usize, frame: &TxFrame<'_>) {
        let k = seq % self.frames.len();
        // Read whole either way (the DMA); copied only for a checker that wants it.
        if !self.checker.sees_every(k) {
            let _ = self.read_whole(frame);
        } else if self.gather(frame).is_ok() {
            self.checker.late(k, &self.scratch[FRAME_OVERHEAD..]);
        }
    }

    /// Matches the reply `frame`, whose first bytes (its headers, as far as it has them) are
    /// `head`, to its request, checks it and records the outcome.
    fn settle(&mut self, frame: &TxFrame<'_>, head: &[u8], now_ns: u64) {
        // The queue set that sent it, for replies that belong to no request.
        let sender = frame.queue().min(self.per_core.len() - 1);
        let parsed = self.parse_head(head, frame.len());
        let (id, ty, payload_len, src_port) = match parsed {
            Ok(x) => x,
            Err(e) => {
                let _ = self.read_whole(frame);
                self.per_core[sender].malformed += 1;
                self.fail(|| e);
                return;
            }
        };
        let seq = id as usize;
        let Some(t0) = self.t0 else {
            let _ = self.read_whole(frame);
            self.per_core[sender].unexpected += 1;
            return;
        };
        if seq >= self.next || self.state[seq] != OUTSTANDING {
            self.per_core[sender].unexpected += 1;
            if seq < self.next {
                // Timed out already, but handled by the server.
                self.late(seq, frame);
            } else {
                let _ = self.read_whole(frame);
            }
            return;
        }
        self.state[seq] = SETTLED;
        self.outstanding -= 1;
        let k = seq % self.frames.len();
        let core = self.frames.core(k);
        let lat = now_ns.saturating_sub(t0 + self.offsets[seq]);
        if lat > self.timeout_ns {
            self.per_core[core].lost += 1;
            self.late(seq, frame);
            return;
        }
        let measured = self.offsets[seq] >= self.warmup_ns;
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
                _ => self.check_payload(frame, k, payload_len, measured),
            }
        };
        match verdict {
            Ok(checked) => {
                self.per_core[core].verified += 1;
                if measured {
                    self.measured_answered[k] = true;
                    self.measured_checked[k] |= checked;
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
}

/// Loads one byte of every 64-byte cache line `bytes` covers, as a NIC's DMA read pulls each
/// line of a send buffer. The loaded bytes are folded together and the result goes through
/// [`std::hint::black_box`], so the compiler keeps every load (nothing is stored). Returns
/// the lines loaded.
#[inline]
pub(crate) fn touch_lines(bytes: &[u8]) -> usize {
    let Some(&first) = bytes.first() else {
        return 0;
    };
    // The offset of the second line's start (the first line is `bytes[0]`'s).
    let next = 64 - bytes.as_ptr() as usize % 64;
    let mut folded = first;
    let mut lines = 1;
    if let Some(rest) = bytes.get(next..) {
        for &b in rest.iter().step_by(64) {
            folded ^= b;
            lines += 1;
        }
    }
    std::hint::black_box(folded);
    lines
}

/// What the seed is mixed with for the payload-check sample's stream.
const CHECK_STREAM: u64 = 0x5851_F42D_4C95_7F2D;

/// A seeded random sample of 1 in `every` (xorshift64*): cheap, reproducible from its seed,
/// and not aligned with the request cycle (a `seq % n` sample would revisit the same
/// distinct requests and cores forever).
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    state: u64,
    every: u64,
}

impl Sample {
    /// A sample of 1 in `every` (0 and 1: every one) seeded by `seed`.
    pub(crate) fn new(seed: u64, every: u64) -> Sample {
        Sample {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            every: every.max(1),
        }
    }

    /// Whether the next one is in the sample (with `every` 1, always, and the state does not
    /// move).
    pub(crate) fn next(&mut self) -> bool {
        if self.every <= 1 {
            return true;
        }
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
            .is_multiple_of(self.every)
    }
}

#[cfg(test)]
mod tests {
    use super::{touch_lines, Sample};

    #[test]
    fn touching_a_buffer_reads_each_of_its_lines_once_wherever_it_starts() {
        let buf = vec![7u8; 4096 + 128];
        // The buffer's first line boundary, so each case starts where it says.
        let off = (64 - buf.as_ptr() as usize % 64) % 64;
        // (start from a line boundary, length, lines covered)
        for (start, len, lines) in [
            (0, 4096, 64),
            (1, 4096, 65),
            (63, 2, 2),
            (64, 64, 1),
            (5, 0, 0),
            (100, 1, 1),
            (0, 65, 2),
        ] {
            let piece = &buf[off + start..off + start + len];
            assert_eq!(touch_lines(piece), lines, "start {start} len {len}");
        }
    }

    #[test]
    fn a_sample_is_reproducible_from_its_seed_and_about_1_in_n() {
        let picks = |seed, every| {
            let mut s = Sample::new(seed, every);
            (0..80_000).map(|_| s.next()).collect::<Vec<bool>>()
        };
        assert_eq!(picks(7, 8), picks(7, 8), "same seed, same picks");
        assert_ne!(picks(7, 8), picks(8, 8), "another seed, other picks");
        let n = picks(7, 8).iter().filter(|&&p| p).count();
        assert!((9_000..11_000).contains(&n), "{n} of 80000 at 1 in 8");
        assert!(picks(7, 1).iter().all(|&p| p), "1 in 1 is every one");
        assert!(picks(7, 0).iter().all(|&p| p), "0 reads as 1");
    }
}

/// What a run's payload checks covered in its measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// Distinct requests with a reply in the measured window whose payload was checked and
    /// accepted.
    pub(crate) distinct_checked: usize,
    /// Distinct requests with a reply in the measured window answered right by its headers
    /// (checked or not).
    pub(crate) distinct_answered: usize,
    /// Server cores with a checked and accepted reply in the measured window.
    pub(crate) cores_checked: usize,
}
