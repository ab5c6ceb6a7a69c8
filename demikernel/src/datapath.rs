//! [`DemiDatapath`]: the runtime's datapath traits over Demikernel's TCP (catpowder LibOS), so
//! that the apps' handlers run on `app_server::Server` over Demikernel unchanged.
//!
//! It is the kernel TCP datapath (`crates/datapath-tcp`) with Demikernel's queues in place of
//! sockets and epoll: the same stream framing ([`datapath_tcp::frame`]), the same receive side
//! (each popped buffer copied into a pinned receive buffer through a [`Deframer`], so a frame
//! lying in one buffer is a view of it and a frame cut by a pop is gathered once), and the same
//! send queue ([`TxQueue`]: a pinned head buffer with the frame header, the object header and
//! the copy area, then one reference per zero-copy field). What differs is the send: Demikernel
//! 1.5.13 takes one LibOS-allocated segment per push (`docs/tcp.md`, "Demikernel"), so
//! [`Transmit::flush`] copies each connection's queue into `sgaalloc`ed segments of at most
//! [`MAX_PUSH`] bytes, frames of one batch sharing segments, and pushes them. The references
//! are released at that copy.
//!
//! Every operation is non-blocking: one `accept` in flight on the listening queue, one `pop`
//! per connection, any number of pushes; [`Receive::recv_burst`] runs Demikernel's scheduler
//! (which also moves its clock, for retransmissions) and handles what completed.
//!
//! The limits are the kernel TCP datapath's (`docs/tcp.md`, "Backpressure", "Memory",
//! "Closing"), from the same pieces: a request is handed over only with room reserved for its
//! reply ([`datapath_tcp::flow`]), the rest wait in order and the connection is not popped
//! meanwhile (so Demikernel's receive window stops the peer); a peer whose pushes stay
//! unfinished for [`DemiConfig::stall_timeout`] is closed; partial frames grow with the bytes
//! popped and are capped together ([`datapath_tcp::budget`]) and timed; a stream that turns bad
//! is closed only once the replies to the frames before it are pushed.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{
    Completions, Connect, DatapathMemory, DropCounters, Receive, SendObject, Transmit,
};
use cornflakes::mem::MemoryConfig;
use cornflakes::{ConnId, Msg, PinnedMemory, RcBuf, RxMsg, SendError};
use datapath_tcp::budget::{Holder, PartialFrames};
use datapath_tcp::flow::{Carrier, Inbox, ReplyRoom, Requests};
use datapath_tcp::frame::{DeframeError, Deframer, HEADER_LEN};
use datapath_tcp::txq::{framed_copy, sga_header, FramedObject, TxQueue};
use datapath_tcp::StreamLimits;
use demikernel::runtime::types::{demi_opcode_t, demi_qresult_t};
use demikernel::{demi_sgarray_t, LibOS, QDesc, QToken};

use crate::{io_error, segment_mut, MAX_PUSH};

/// Configuration of a [`DemiDatapath`] (the same knobs as `datapath_tcp::TcpConfig`).
#[derive(Clone, Debug)]
pub struct DemiConfig {
    /// Address to listen on (Demikernel's own address, from its configuration file), or
    /// `None` for a datapath that only connects.
    pub listen: Option<SocketAddrV4>,
    /// Pinned memory for receive buffers and send heads. Its largest item bounds the largest
    /// message (a received message is gathered into one item).
    pub memory: MemoryConfig,
    /// Largest message sent or accepted; clamped to the largest pinned item minus the frame
    /// header. A received frame header announcing more closes the connection.
    pub max_message_len: usize,
    /// Bytes of the receive buffer a popped buffer is copied into (larger for a frame that
    /// needs more).
    pub rx_buffer: usize,
    /// Most bytes per connection queued or pushed and not yet reported done by Demikernel. A
    /// request is handed over only while [`DemiConfig::reply_reserve`] bytes of it are free
    /// for its reply, which is then never refused; other sends beyond it fail with
    /// [`SendError::Full`]. At least one largest message.
    pub tx_limit: usize,
    /// Bytes reserved per request handed over on an accepted connection (`None`: the largest
    /// frame), as `datapath_tcp::TcpConfig::reply_reserve`.
    pub reply_reserve: Option<usize>,
    /// A connection whose pushes have stayed unfinished this long (its peer reads nothing) is
    /// closed; its requests still waiting for reply room never run.
    pub stall_timeout: Duration,
    /// Most pinned bytes of partly received frames, all connections together (at least two
    /// largest frames, at most a quarter of `memory.max_bytes`); the oldest give way.
    pub partial_limit: usize,
    /// A frame unfinished this long after its first byte (while popped) closes its connection.
    pub frame_timeout: Duration,
    /// Most zero-copy fields of one object queued by reference (they are copied at the push
    /// anyway); smaller ones beyond it are copied into the head buffer.
    pub max_segments: usize,
    /// Most connections; further accepted ones are closed at once
    /// ([`DropCounters::conn_table_full`]).
    pub max_conns: usize,
}

impl DemiConfig {
    /// The defaults of `datapath_tcp::TcpConfig::new`: messages up to 256 KiB − 28 B, 8 KiB
    /// receive buffers, 1 MiB per connection in flight, 64 segments, 16384 connections.
    pub fn new(listen: Option<SocketAddrV4>) -> DemiConfig {
        let tcp = datapath_tcp::TcpConfig::new(None);
        DemiConfig {
            listen,
            memory: tcp.memory,
            max_message_len: tcp.max_message_len,
            rx_buffer: tcp.rx_buffer,
            tx_limit: tcp.tx_limit,
            reply_reserve: tcp.reply_reserve,
            stall_timeout: tcp.stall_timeout,
            partial_limit: tcp.partial_limit,
            frame_timeout: tcp.frame_timeout,
            max_segments: tcp.max_segments,
            max_conns: tcp.max_conns,
        }
    }
}

/// Counts of the Demikernel datapath beyond [`DropCounters`]; they only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DemiStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections opened by [`Connect::connect`].
    pub opened: u64,
    /// Connections closed (for any reason).
    pub closed: u64,
    /// Connections the peer ended (an empty pop).
    pub peer_closed: u64,
    /// Connections that failed (a failed pop or push, a reset).
    pub failed: u64,
    /// Connections closed because their byte stream was not valid framing.
    pub bad_streams: u64,
    /// Frames lost because the stream ended or failed in their middle.
    pub partial_frames_lost: u64,
    /// Messages gathered from more than one pop into one pinned item.
    pub gathered: u64,
    /// Pops completed with data, and their bytes (each copied once into pinned memory).
    pub pops: u64,
    /// Bytes popped.
    pub popped_bytes: u64,
    /// Pushes made, and their bytes (each copied once from the send queue).
    pub pushes: u64,
    /// Bytes pushed.
    pub pushed_bytes: u64,
    /// Pushes Demikernel reported done.
    pub pushes_done: u64,
    /// Sends refused because the connection had [`DemiConfig::tx_limit`] bytes in flight
    /// (never a reply to a request handed over: those have room reserved).
    pub tx_full: u64,
    /// Requests popped but held, not yet handed over, for want of room for their replies.
    pub held_for_room: u64,
    /// Held requests dropped, never executed, because their connection closed.
    pub unexecuted_dropped: u64,
    /// Connections closed because their pushes stayed unfinished for
    /// [`DemiConfig::stall_timeout`].
    pub stall_timeouts: u64,
    /// Connections closed because a frame stayed unfinished for [`DemiConfig::frame_timeout`].
    pub frame_timeouts: u64,
    /// Connections closed because their partial frame gave way under
    /// [`DemiConfig::partial_limit`].
    pub partial_evictions: u64,
}

/// Most scheduler runs per [`Receive::recv_burst`] while pops keep completing.
pub const POP_ROUNDS: usize = 8;

/// What an operation in flight was for.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Accept,
    Pop(u32),
    Push(u32, usize),
    Close,
}

#[derive(Debug)]
struct Conn {
    qd: QDesc,
    peer: SocketAddrV4,
    outgoing: bool,
    rx: Deframer,
    tx: TxQueue,
    /// Bytes pushed and not yet reported done.
    pushed: usize,
    dirty: bool,
    /// The peer ended its stream, or it stopped being valid framing (`bad`): no more pops;
    /// closed once every request handed over is answered and the replies are pushed.
    rx_closed: bool,
    bad: bool,
    /// The reply room its requests need (none for a connection that carries replies).
    room: ReplyRoom,
    /// Requests popped and not yet handed over, and the replies reserved this burst.
    inbox: Inbox,
    /// A pop is in flight.
    popping: bool,
    /// Since when pushes have been in flight without one finishing.
    stalled_since: Option<Instant>,
    /// Pinned bytes of its partial frame charged to the datapath's cap.
    charged: usize,
    /// Evicted or timed out: closed at the next burst, not popped meanwhile.
    doomed: bool,
}

impl Conn {
    /// Whether it is popped now: input open, no request held, room for one more reply.
    fn readable(&self) -> bool {
        !self.rx_closed
            && !self.doomed
            && self.inbox.is_empty()
            && self.room.admits(self.tx.bytes() + self.pushed, 0)
    }

    /// Everything handed over was answered (no reservation left) and pushed.
    fn drained(&self) -> bool {
        self.inbox.is_empty() && self.inbox.owed() == 0 && self.tx.is_empty()
    }
}

impl Carrier for Conn {
    fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    fn inbox_mut(&mut self) -> &mut Inbox {
        &mut self.inbox
    }

    /// Queued and pushed, not yet reported done.
    fn queued(&self) -> usize {
        self.tx.bytes() + self.pushed
    }

    fn room(&self) -> ReplyRoom {
        self.room
    }

    fn doomed(&self) -> bool {
        self.doomed
    }

    fn endpoint(&self) -> (ConnId, SocketAddrV4) {
        (ConnId(u32::from(self.qd)), self.peer)
    }
}

impl Holder for Conn {
    fn deframer(&mut self) -> &mut Deframer {
        &mut self.rx
    }

    fn charged(&mut self) -> &mut usize {
        &mut self.charged
    }

    fn doom(&mut self) -> bool {
        !std::mem::replace(&mut self.doomed, true)
    }
}

/// Why a connection is being closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Close {
    Done,
    Failed,
    BadStream,
    Stalled,
    FrameTimeout,
    Evicted,
}

/// How often the timeouts are checked (at most).
const TICK: Duration = Duration::from_millis(20);

/// A datapath over Demikernel's TCP: one LibOS, an optional listening queue, any number of
/// connections. Not `Send`: one per process (catpowder owns one interface).
pub struct DemiDatapath {
    libos: LibOS,
    cfg: DemiConfig,
    mem: PinnedMemory,
    listener: Option<QDesc>,
    local: SocketAddrV4,
    conns: HashMap<u32, Conn>,
    by_peer: HashMap<SocketAddrV4, ConnId>,
    pending: HashMap<u64, Pending>,
    dirty: Vec<u32>,
    closing: Vec<(u32, Close)>,
    /// Connections evicted or timed out while requests of this burst await replies.
    doomed: Vec<(u32, Close)>,
    /// Requests on their way to the application (who was handed some this burst, who holds
    /// some for want of reply room), and scratch for the connections whose state changed.
    requests: Requests,
    touched: Vec<u32>,
    /// Partial frames of all connections, against [`DemiConfig::partial_limit`].
    partials: PartialFrames,
    victims: Vec<u32>,
    next_tick: Instant,
    /// Connections closed since the last trim of the pinned memory, and the earliest next.
    trim_due: bool,
    next_trim: Instant,
    results: Vec<demi_qresult_t>,
    rx_frames: Vec<(Msg, RcBuf)>,
    counters: DropCounters,
    stats: DemiStats,
    queued: usize,
    completed: usize,
}

impl DemiDatapath {
    /// Takes `libos` (its configuration names the address and interface) and listens on
    /// `cfg.listen`.
    pub fn new(mut libos: LibOS, cfg: DemiConfig) -> io::Result<DemiDatapath> {
        let mem = PinnedMemory::new(cfg.memory.clone())
            .map_err(|e| io::Error::other(format!("pinned memory: {e}")))?;
        let mut cfg = cfg;
        let l = StreamLimits {
            max_message_len: cfg.max_message_len,
            tx_limit: cfg.tx_limit,
            reply_reserve: cfg.reply_reserve,
            partial_limit: cfg.partial_limit,
        }
        .clamped(&mem);
        (cfg.max_message_len, cfg.tx_limit) = (l.max_message_len, l.tx_limit);
        (cfg.reply_reserve, cfg.partial_limit) = (l.reply_reserve, l.partial_limit);
        cfg.max_segments = cfg.max_segments.max(1);
        let mut pending = HashMap::new();
        let (listener, local) = match cfg.listen {
            Some(addr) => {
                let qd = libos
                    .socket(libc::AF_INET, libc::SOCK_STREAM, 0)
                    .map_err(io_error)?;
                libos.bind(qd, SocketAddr::V4(addr)).map_err(io_error)?;
                libos.listen(qd, 128).map_err(io_error)?;
                let qt = libos.accept(qd).map_err(io_error)?;
                pending.insert(u64::from(qt), Pending::Accept);
                (Some(qd), addr)
            }
            None => (None, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)),
        };
        Ok(DemiDatapath {
            libos,
            mem,
            listener,
            local,
            conns: HashMap::new(),
            by_peer: HashMap::new(),
            pending,
            dirty: Vec::new(),
            closing: Vec::new(),
            doomed: Vec::new(),
            requests: Requests::default(),
            touched: Vec::new(),
            partials: PartialFrames::new(cfg.partial_limit),
            victims: Vec::new(),
            next_tick: Instant::now(),
            trim_due: false,
            next_trim: Instant::now(),
            results: Vec::new(),
            rx_frames: Vec::new(),
            counters: DropCounters::default(),
            stats: DemiStats::default(),
            queued: 0,
            completed: 0,
            cfg,
        })
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> &DemiConfig {
        &self.cfg
    }

    /// The Demikernel-specific counters.
    pub fn stats(&self) -> DemiStats {
        let mut s = self.stats;
        s.held_for_room = self.requests.held_for_room();
        s
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    fn add_conn(&mut self, qd: QDesc, peer: SocketAddrV4, outgoing: bool) -> io::Result<ConnId> {
        let id = u32::from(qd);
        let qt = self.libos.pop(qd, None).map_err(io_error)?;
        self.pending.insert(u64::from(qt), Pending::Pop(id));
        let room = ReplyRoom {
            limit: self.cfg.tx_limit,
            // A connection this datapath opened carries replies: it is always popped.
            reserve: if outgoing {
                0
            } else {
                self.cfg.reply_reserve.unwrap_or(self.cfg.tx_limit)
            },
        };
        self.conns.insert(
            id,
            Conn {
                qd,
                peer,
                outgoing,
                rx: Deframer::new(self.cfg.max_message_len, self.cfg.rx_buffer),
                tx: TxQueue::default(),
                pushed: 0,
                dirty: false,
                rx_closed: false,
                bad: false,
                room,
                inbox: Inbox::default(),
                popping: true,
                stalled_since: None,
                charged: 0,
                doomed: false,
            },
        );
        Ok(ConnId(id))
    }

    /// Runs Demikernel's scheduler once and collects every operation that completed.
    fn collect(&mut self) -> io::Result<()> {
        self.libos.poll();
        let results = &mut self.results;
        match self.libos.wait_next_n(
            |r| {
                results.push(r);
                true
            },
            Some(Duration::ZERO),
        ) {
            Ok(()) => Ok(()),
            Err(e) if e.errno == libc::ETIMEDOUT => Ok(()),
            Err(e) => Err(io_error(e)),
        }
    }

    fn on_accept(&mut self, r: &demi_qresult_t) {
        if r.qr_opcode == demi_opcode_t::DEMI_OPC_ACCEPT {
            // SAFETY: an ACCEPT result carries `ares`.
            let qd = QDesc::from(unsafe { r.qr_value.ares.qd } as u32);
            if self.conns.len() >= self.cfg.max_conns {
                self.counters.conn_table_full += 1;
                let _ = self.libos.close(qd);
            } else {
                let peer = self
                    .libos
                    .getpeername(qd)
                    .unwrap_or(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0));
                match self.add_conn(qd, peer, false) {
                    Ok(_) => self.stats.accepted += 1,
                    Err(_) => {
                        self.stats.failed += 1;
                        let _ = self.libos.close(qd);
                    }
                }
            }
        } else {
            self.stats.failed += 1;
        }
        // The next connection.
        if let Some(l) = self.listener {
            if let Ok(qt) = self.libos.accept(l) {
                self.pending.insert(u64::from(qt), Pending::Accept);
            }
        }
    }

    fn on_pop(&mut self, id: u32, r: &demi_qresult_t, out: &mut Vec<RxMsg>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return; // closed meanwhile
        };
        c.popping = false;
        if r.qr_opcode != demi_opcode_t::DEMI_OPC_POP {
            if c.rx.partial_bytes() > 0 {
                self.stats.partial_frames_lost += 1;
                self.counters.truncated += 1;
            }
            self.closing.push((id, Close::Failed));
            return;
        }
        // SAFETY: a POP result carries `sga`.
        let sga: demi_sgarray_t = unsafe { r.qr_value.sga };
        let seg = sga.sga_segs[0];
        // SAFETY: the popped array's one segment points at `sgaseg_len` bytes Demikernel owns
        // until the `sgafree` below; nothing else refers to them.
        let bytes = unsafe {
            std::slice::from_raw_parts(seg.sgaseg_buf as *const u8, seg.sgaseg_len as usize)
        };
        if bytes.is_empty() {
            // End of stream: the connection closes once the requests handed over are answered
            // and their replies pushed.
            let _ = self.libos.sgafree(sga);
            if c.rx.partial_bytes() > 0 {
                self.stats.partial_frames_lost += 1;
                self.counters.truncated += 1;
            }
            c.rx.reset();
            self.stats.peer_closed += 1;
            c.rx_closed = true;
            self.charge_partial(id);
            self.settle_conn(id);
            return;
        }
        self.stats.pops += 1;
        self.stats.popped_bytes += bytes.len() as u64;
        let before = c.rx.stats().gathered;
        let mut rest = bytes;
        let (mut failed, mut bad) = (false, false);
        while !rest.is_empty() {
            // A partial frame grows with the bytes that arrived: the rest of this segment.
            let space = match c.rx.space_for(&self.mem, rest.len()) {
                Ok(s) => s,
                Err(_) => {
                    failed = true;
                    self.counters.no_rx_buffers += 1;
                    break;
                }
            };
            let k = space.len().min(rest.len());
            space[..k].copy_from_slice(&rest[..k]);
            rest = &rest[k..];
            match c.rx.filled(k, &self.mem, &mut self.rx_frames) {
                Ok(()) => {}
                Err(e) => {
                    if matches!(e, DeframeError::Frame(_)) {
                        self.counters.bad_framing += 1;
                    }
                    bad = true;
                    break;
                }
            }
        }
        let _ = self.libos.sgafree(sga);
        self.stats.gathered += c.rx.stats().gathered - before;
        c.rx.settle(&self.mem);
        self.requests.admit(id, c, &mut self.rx_frames, out);
        if failed {
            self.stats.partial_frames_lost += 1;
            self.closing.push((id, Close::Failed));
            return;
        }
        if bad {
            // The frames before the bad bytes are answered before the close.
            c.rx.reset();
            c.rx_closed = true;
            c.bad = true;
        }
        self.charge_partial(id);
        self.settle_conn(id);
    }

    /// After anything changed on `id`: once its input ended and everything it asked for is
    /// answered and pushed, its close; else a pop if it is to be read and none is in flight.
    fn settle_conn(&mut self, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.doomed {
            return;
        }
        if c.rx_closed {
            if c.drained() && c.pushed == 0 {
                let why = if c.bad { Close::BadStream } else { Close::Done };
                self.closing.push((id, why));
            }
            return;
        }
        let readable = c.readable();
        if c.charged > 0 {
            self.partials.pause(id, !readable, Instant::now());
        }
        if readable && !c.popping {
            match self.libos.pop(c.qd, None) {
                Ok(qt) => {
                    c.popping = true;
                    self.pending.insert(u64::from(qt), Pending::Pop(id));
                }
                Err(_) => self.closing.push((id, Close::Failed)),
            }
        }
    }

    /// The last burst is over: its requests' reservations lapse; connections evicted or timed
    /// out meanwhile close.
    fn end_burst(&mut self) {
        self.closing.append(&mut self.doomed);
        let mut touched = std::mem::take(&mut self.touched);
        self.requests.end_burst(&mut self.conns, &mut touched);
        for id in touched.drain(..) {
            self.settle_conn(id);
        }
        self.touched = touched;
    }

    /// Hands over the held requests of every connection with room for their replies now.
    fn deliver_ready(&mut self, out: &mut Vec<RxMsg>) {
        let mut touched = std::mem::take(&mut self.touched);
        self.requests
            .deliver_ready(&mut self.conns, out, &mut touched);
        for id in touched.drain(..) {
            self.settle_conn(id);
        }
        self.touched = touched;
    }

    /// Updates the pinned bytes `id`'s partial frame is charged; past the cap, the oldest other
    /// partial frames give way.
    fn charge_partial(&mut self, id: u32) {
        let mut dropped = std::mem::take(&mut self.victims);
        dropped.clear();
        let lost = self.partials.sync(id, &mut self.conns, &mut dropped);
        self.doom(&dropped, lost, Close::Evicted);
        self.victims = dropped;
    }

    /// Closes the connections whose partial frames were dropped (`lost` of them with bytes of a
    /// frame) for `why`: at once, or at the next burst when requests of theirs handed over in
    /// this one await replies. They are not popped meanwhile.
    fn doom(&mut self, ids: &[u32], lost: u64, why: Close) {
        self.stats.partial_frames_lost += lost;
        self.counters.truncated += lost;
        for &id in ids {
            let owes = self.conns.get(&id).is_some_and(|c| c.inbox.owed() > 0);
            if owes {
                self.doomed.push((id, why));
            } else {
                self.closing.push((id, why));
            }
        }
    }

    /// The frame and stall timeouts, checked every [`TICK`] at most.
    fn housekeeping(&mut self) {
        let now = Instant::now();
        if now < self.next_tick {
            return;
        }
        self.next_tick = now + TICK;
        let mut dropped = std::mem::take(&mut self.victims);
        dropped.clear();
        let lost = self
            .partials
            .expire(now, self.cfg.frame_timeout, &mut self.conns, &mut dropped);
        self.doom(&dropped, lost, Close::FrameTimeout);
        self.victims = dropped;
        let timeout = self.cfg.stall_timeout;
        for (&id, c) in &self.conns {
            if c.stalled_since
                .is_some_and(|t| now.saturating_duration_since(t) >= timeout)
            {
                self.closing.push((id, Close::Stalled));
            }
        }
    }

    fn on_push(&mut self, id: u32, bytes: usize, r: &demi_qresult_t) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.pushed = c.pushed.saturating_sub(bytes);
        if r.qr_opcode == demi_opcode_t::DEMI_OPC_PUSH {
            self.stats.pushes_done += 1;
            // Progress: the stall clock starts again (or stops, nothing left in flight).
            c.stalled_since = (c.pushed > 0).then(Instant::now);
            self.settle_conn(id);
        } else {
            self.closing.push((id, Close::Failed));
        }
    }

    fn close_pending(&mut self) {
        while let Some((id, why)) = self.closing.pop() {
            let Some(mut c) = self.conns.remove(&id) else {
                continue;
            };
            match why {
                Close::Done => {}
                Close::Failed => self.stats.failed += 1,
                Close::BadStream => self.stats.bad_streams += 1,
                Close::Stalled => self.stats.stall_timeouts += 1,
                Close::FrameTimeout => self.stats.frame_timeouts += 1,
                Close::Evicted => self.stats.partial_evictions += 1,
            }
            self.stats.closed += 1;
            self.stats.unexecuted_dropped += c.inbox.clear() as u64;
            self.partials.remove(id);
            if c.outgoing && self.by_peer.get(&c.peer) == Some(&ConnId(id)) {
                self.by_peer.remove(&c.peer);
            }
            let n = c.tx.clear();
            self.queued -= n;
            self.completed += n;
            // Demikernel finishes (or cancels) the pushes and the pop in flight; their results,
            // if any, find no connection and are dropped (a popped buffer is freed).
            self.pending.retain(|_, p| match *p {
                Pending::Pop(i) | Pending::Push(i, _) => i != id,
                Pending::Accept | Pending::Close => true,
            });
            if let Ok(qt) = self.libos.async_close(c.qd) {
                self.pending.insert(u64::from(qt), Pending::Close);
            }
            self.trim_due = true;
        }
    }

    /// Copies `id`'s queue into `sgaalloc`ed segments of at most [`MAX_PUSH`] bytes and
    /// pushes them.
    fn push_conn(&mut self, id: u32) -> Result<(), demikernel::runtime::fail::Fail> {
        let Some(c) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        c.dirty = false;
        let total = c.tx.bytes();
        if total == 0 {
            return Ok(());
        }
        let libos = &mut self.libos;
        let mut tokens: Vec<(QToken, usize)> = Vec::with_capacity(total.div_ceil(MAX_PUSH));
        let mut cur: Option<(demi_sgarray_t, usize, usize)> = None; // (array, len, filled)
        let mut left = total;
        let mut err = None;
        c.tx.for_each_unsent(usize::MAX, |mut piece| {
            while !piece.is_empty() && err.is_none() {
                if cur.is_none() {
                    let n = left.min(MAX_PUSH);
                    match libos.sgaalloc(n) {
                        Ok(sga) => cur = Some((sga, n, 0)),
                        Err(e) => {
                            err = Some(e);
                            return;
                        }
                    }
                }
                let Some((sga, len, filled)) = cur.as_mut() else {
                    return;
                };
                let k = (*len - *filled).min(piece.len());
                segment_mut(sga)[*filled..*filled + k].copy_from_slice(&piece[..k]);
                *filled += k;
                piece = &piece[k..];
                if *filled == *len {
                    let (sga, len, _) = cur.take().expect("a segment being filled");
                    let qt = libos.push(c.qd, &sga);
                    let _ = libos.sgafree(sga);
                    match qt {
                        Ok(qt) => tokens.push((qt, len)),
                        Err(e) => err = Some(e),
                    }
                    left -= len;
                }
            }
        });
        if let Some((sga, _, _)) = cur.take() {
            let _ = libos.sgafree(sga);
        }
        let n = c.tx.clear();
        self.queued -= n;
        self.completed += n;
        for (qt, len) in tokens {
            self.stats.pushes += 1;
            self.stats.pushed_bytes += len as u64;
            c.pushed += len;
            self.pending.insert(u64::from(qt), Pending::Push(id, len));
        }
        if c.pushed > 0 && c.stalled_since.is_none() {
            c.stalled_since = Some(Instant::now());
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn conn_for_send(&mut self, conn: ConnId, len: usize) -> Result<&mut Conn, SendError> {
        if len > self.cfg.max_message_len {
            return Err(SendError::TooLarge {
                len,
                max: self.cfg.max_message_len,
            });
        }
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(SendError::UnknownConn(conn))?;
        // The reply to a request handed over has its room reserved: queued whatever is in
        // flight. Other sends may fill only the room no reply has reserved.
        if !c.inbox.reply()
            && c.tx.bytes() + c.pushed + HEADER_LEN + len > c.room.unreserved(c.inbox.owed())
        {
            self.stats.tx_full += 1;
            return Err(SendError::Full);
        }
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn.0);
        }
        Ok(c)
    }
}

impl DatapathMemory for DemiDatapath {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl Connect for DemiDatapath {
    /// The open outgoing connection to `peer`, or a new one (Demikernel's connect, waited for
    /// up to 5 s).
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        if let Some(&c) = self.by_peer.get(&peer) {
            if self.conns.contains_key(&c.0) {
                return Ok(c);
            }
        }
        if self.conns.len() >= self.cfg.max_conns {
            return Err(io::Error::other(format!(
                "connection table full ({} connections)",
                self.cfg.max_conns
            )));
        }
        let qd = self
            .libos
            .socket(libc::AF_INET, libc::SOCK_STREAM, 0)
            .map_err(io_error)?;
        let qt = self
            .libos
            .connect(qd, SocketAddr::V4(peer))
            .map_err(io_error)?;
        let r = self
            .libos
            .wait(qt, Some(Duration::from_secs(5)))
            .map_err(io_error)?;
        if r.qr_opcode != demi_opcode_t::DEMI_OPC_CONNECT {
            let _ = self.libos.close(qd);
            return Err(io::Error::from_raw_os_error(r.qr_ret as i32));
        }
        let id = self.add_conn(qd, peer, true)?;
        self.stats.opened += 1;
        self.by_peer.insert(peer, id);
        Ok(id)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.conns.get(&conn.0).map(|c| c.peer)
    }

    /// The listening address (`0.0.0.0:0` for a datapath that does not listen).
    fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }
}

impl Receive for DemiDatapath {
    /// Runs Demikernel's scheduler and handles what completed; while pops complete (a pop
    /// returns one received segment, and the next is issued only then), runs it again, up to
    /// [`POP_ROUNDS`] times, so that a backlog drains and the receive window reopens.
    ///
    /// Hands over the complete requests that have room for their replies (held ones first);
    /// the requests of one call must be answered before the next (their reservations lapse).
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        let before = out.len();
        self.end_burst();
        let mut r = Ok(());
        for _ in 0..POP_ROUNDS {
            r = self.collect();
            let results = std::mem::take(&mut self.results);
            let mut popped = false;
            for res in &results {
                match self.pending.remove(&res.qr_qt) {
                    Some(Pending::Accept) => self.on_accept(res),
                    Some(Pending::Pop(id)) => {
                        popped = true;
                        self.on_pop(id, res, out)
                    }
                    Some(Pending::Push(id, bytes)) => self.on_push(id, bytes, res),
                    Some(Pending::Close) | None => {
                        if res.qr_opcode == demi_opcode_t::DEMI_OPC_POP {
                            // A pop of a connection closed meanwhile: give its buffer back.
                            // SAFETY: a POP result carries `sga`.
                            let _ = self.libos.sgafree(unsafe { res.qr_value.sga });
                        }
                    }
                }
            }
            self.results = results;
            self.results.clear();
            self.close_pending();
            if !popped || r.is_err() {
                break;
            }
        }
        self.deliver_ready(out);
        self.housekeeping();
        self.close_pending();
        if self.trim_due && Instant::now() >= self.next_trim {
            // Closed connections' buffers are back in the pool: give free chunks' pages back.
            self.trim_due = false;
            self.next_trim = Instant::now() + Duration::from_secs(1);
            self.mem.trim();
        }
        r?;
        Ok(out.len() - before)
    }

    fn counters(&self) -> DropCounters {
        let mut c = self.counters;
        c.delivered = self.requests.delivered();
        c
    }
}

impl Transmit for DemiDatapath {
    /// No frames on a stream: the largest frame (header and message).
    fn mtu(&self) -> usize {
        HEADER_LEN + self.cfg.max_message_len
    }

    fn max_segments(&self) -> usize {
        self.cfg.max_segments
    }

    fn max_message_len(&self) -> usize {
        self.cfg.max_message_len
    }

    fn send_object<O: SendObject>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        let Some(f) = FramedObject::new(&self.mem, msg, obj, self.cfg.max_segments - 1)? else {
            let bytes = obj.object_to_vec();
            return self.send_copy(conn, msg, &bytes);
        };
        let c = self.conn_for_send(conn, f.total)?;
        // Every byte is copied at the push: no field is marked zero-copy.
        self.queued += f.queue(&mut c.tx, usize::MAX);
        Ok(())
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        let (head, total) = sga_header(&self.mem, msg, entries)?;
        let c = self.conn_for_send(conn, total)?;
        let before = c.tx.len();
        c.tx.push(head, false);
        for e in entries {
            c.tx.push(e.clone(), false);
        }
        self.queued += c.tx.len() - before;
        Ok(())
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        let bufs = framed_copy(&self.mem, msg, data)?;
        let c = self.conn_for_send(conn, data.len())?;
        let before = c.tx.len();
        for b in bufs {
            c.tx.push(b, false);
        }
        self.queued += c.tx.len() - before;
        Ok(())
    }

    /// Copies every connection's queue into Demikernel segments and pushes them. A connection
    /// whose push fails is closed and counted ([`DemiStats::failed`]); that is not an error of
    /// the flush.
    fn flush(&mut self) -> Result<(), SendError> {
        let dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            if self.push_conn(id).is_err() {
                self.closing.push((id, Close::Failed));
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        self.close_pending();
        Ok(())
    }
}

impl Completions for DemiDatapath {
    /// Buffers released since the last call (at the copy into Demikernel's segments).
    fn poll_completions(&mut self) -> usize {
        std::mem::take(&mut self.completed)
    }

    /// Buffers queued and not yet copied into a push.
    fn in_flight(&self) -> usize {
        self.queued
    }
}

impl std::fmt::Debug for DemiDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemiDatapath")
            .field("local", &self.local)
            .field("connections", &self.conns.len())
            .field("counters", &self.counters)
            .field("stats", &self.stats)
            .finish()
    }
}
