//! The stream datapath, once for every byte-stream device (after the Ethernet datapaths'
//! `cornflakes_stack::device`): a [`ByteStream`] is a device's connections reduced to bytes —
//! new connections and readiness ([`ByteStream::poll`]), reads into a buffer, writes of a
//! queue, completions — and [`StreamDatapath`] is the one datapath over any of them. It owns
//! the connection table and implements the runtime's datapath traits ([`Connect`](
//! cornflakes_datapath::Connect), [`Receive`](cornflakes_datapath::Receive),
//! [`Transmit`](cornflakes_datapath::Transmit), [`Completions`](
//! cornflakes_datapath::Completions), [`DatapathMemory`](cornflakes_datapath::DatapathMemory))
//! with everything a stream of Cornflakes frames needs around the device (`docs/tcp.md`):
//!
//! - the framing ([`crate::frame`]) and each connection's [`Deframer`](crate::frame::Deframer)
//!   (a frame inside one read is a view of the receive buffer; one cut by a read is gathered
//!   into a pinned item that grows with the bytes that arrived);
//! - the send queue ([`TxQueue`]: a pinned head buffer, then a reference per zero-copy field);
//! - backpressure ([`crate::flow`]): a request is handed over only with room reserved for its
//!   reply on its connection and under the cap all connections share
//!   ([`StreamConfig::total_tx_limit`]); the connections stalled longest give way when that cap
//!   keeps requests waiting;
//! - the cap and timeout on partial frames ([`crate::budget`]), the stall timeout, closing
//!   without losing a reply, and the counters ([`StreamStats`]).
//!
//! Linux kernel TCP ([`crate::TcpDatapath`]: sockets, epoll, `MSG_ZEROCOPY` / io_uring) and
//! Demikernel's TCP (`demikernel/`, its queues) each implement [`ByteStream`] and keep their
//! public type as a thin wrapper around a `StreamDatapath`
//! ([`cornflakes_datapath::DelegateDatapath`]), with their own constructors and counters.

mod conn;
mod glue;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use cornflakes_datapath::{ConnId, DropCounters, Msg, SendCounters};
use cornflakes_mem::{MemoryConfig, PinnedMemory, RcBuf};

use crate::budget::PartialFrames;
use crate::flow::Requests;
use crate::frame::HEADER_LEN;
use crate::txq::TxQueue;

use conn::Close;
pub(crate) use conn::Conn;

/// Default largest pinned item of a stream datapath: 256 KiB (messages up to 256 KiB less the
/// frame header).
pub const DEFAULT_MAX_ITEM: usize = 256 << 10;
/// Default cap on the pinned bytes of partly received frames, all connections together.
pub const DEFAULT_PARTIAL_LIMIT: usize = 64 << 20;
/// Default cap on the bytes queued for sending by all connections together.
pub const DEFAULT_TOTAL_TX_LIMIT: usize = 256 << 20;
/// Default [`StreamConfig::stall_timeout`] and [`StreamConfig::frame_timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`StreamConfig::linger`].
pub const DEFAULT_LINGER: Duration = Duration::from_secs(2);

/// The knobs of a [`StreamDatapath`], whatever its device (`docs/tcp.md`).
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// Address to listen on (port 0 picks one, where the device can), or `None` for a datapath
    /// that only connects.
    pub listen: Option<SocketAddrV4>,
    /// Pinned memory for receive and transmit buffers. Its largest item bounds the largest
    /// message (a received message is gathered into one item).
    pub memory: MemoryConfig,
    /// Largest message sent or accepted; clamped to the largest pinned item minus the frame
    /// header. A received frame header announcing more closes the connection.
    pub max_message_len: usize,
    /// Bytes of the receive buffer a read goes into (larger for a frame that needs more).
    pub rx_buffer: usize,
    /// Most bytes queued for sending per connection (with a device that reports its sends done
    /// later, Demikernel's, also those handed to it and not yet done). A request is handed to
    /// the application only while its connection's queue has
    /// [`StreamConfig::reply_reserve`] bytes free for its reply (beyond the replies already
    /// reserved); the reply is then queued, never refused. Other sends beyond the limit fail
    /// with [`SendError::Full`](cornflakes_datapath::SendError::Full). At least one largest
    /// frame.
    pub tx_limit: usize,
    /// Send-queue bytes reserved for the reply of each request handed over on an accepted
    /// connection; `None`: the largest frame (header and [`StreamConfig::max_message_len`]),
    /// so that no reply can ever find its queue full. A smaller reserve hands over more
    /// pipelined requests per poll; a reply larger than it is still queued (the queue may then
    /// exceed `tx_limit` by the difference). Connections this datapath opened carry replies
    /// and reserve nothing.
    pub reply_reserve: Option<usize>,
    /// Most bytes queued for sending by all connections together, reservations included
    /// (clamped to at least two `tx_limit`s and at most half of `memory.max_bytes`). A request
    /// is handed over only while its reply's reservation fits under it too; when it does not,
    /// the connections whose peers have taken nothing for longest (at least a tenth of
    /// [`StreamConfig::stall_timeout`]) are closed to make room
    /// ([`StreamStats::reply_evictions`]), their waiting requests never run.
    pub total_tx_limit: usize,
    /// A connection whose peer has not taken a single byte of its queued replies for this long
    /// is closed; the requests it sent that were still waiting for reply room are dropped
    /// unexecuted.
    pub stall_timeout: Duration,
    /// Most pinned bytes held by partly received frames, all connections together (clamped to
    /// at least two largest frames and at most a quarter of `memory.max_bytes`). When a frame
    /// would take the total above it, the partial frames that started longest ago are dropped
    /// with their connections ([`StreamStats::partial_evictions`]).
    pub partial_limit: usize,
    /// A frame not complete this long after its first byte arrived (while its connection was
    /// being read) is dropped with its connection ([`StreamStats::frame_timeouts`]).
    pub frame_timeout: Duration,
    /// After a stream turned out not to be valid framing and the replies to the frames before
    /// that point were sent with a FIN, how long what the peer still sends is read and dropped
    /// before the close (so that its TCP does not answer a reset by dropping unread replies).
    /// Unused by a device without a half-close (Demikernel 1.5.13): it closes at once.
    pub linger: Duration,
    /// Most zero-copy fields of one object sent as their own buffer; smaller ones beyond it are
    /// copied into the head buffer ([`cornflakes_datapath::Demote`]). Clamped to what the
    /// device takes ([`ByteStream::max_segments`]).
    pub max_segments: usize,
    /// Most connections (accepted and opened); further accepted connections are closed at
    /// once and counted in [`DropCounters::conn_table_full`].
    pub max_conns: usize,
    /// Reads per connection per poll before the next connection's turn.
    pub read_budget: usize,
}

impl StreamConfig {
    /// Defaults: listen on `listen`, messages up to 256 KiB less the frame header, 8 KiB
    /// receive buffers, 1 MiB of unsent bytes per connection with a largest frame reserved per
    /// request, 256 MiB for all connections together, 64 iovecs per object, 16384
    /// connections, 64 MiB of partial frames, 10 s stall and frame timeouts, 2 s linger, 4
    /// reads per turn.
    pub fn new(listen: Option<SocketAddrV4>) -> StreamConfig {
        StreamConfig {
            listen,
            memory: MemoryConfig {
                max_item_size: DEFAULT_MAX_ITEM,
                ..MemoryConfig::default()
            },
            max_message_len: DEFAULT_MAX_ITEM - HEADER_LEN,
            rx_buffer: 8 << 10,
            tx_limit: 1 << 20,
            reply_reserve: None,
            total_tx_limit: DEFAULT_TOTAL_TX_LIMIT,
            stall_timeout: DEFAULT_TIMEOUT,
            partial_limit: DEFAULT_PARTIAL_LIMIT,
            frame_timeout: DEFAULT_TIMEOUT,
            linger: DEFAULT_LINGER,
            max_segments: 64,
            max_conns: 16384,
            read_budget: 4,
        }
    }

    /// These limits as clamped for `mem` and a device taking `max_segments` buffers per
    /// message: a message fits one pinned item of `mem` with its frame header (and a 32-bit
    /// length); the send queue takes at least one largest frame; the reservation per request
    /// is 1..=`tx_limit` bytes (by default the largest frame); all connections' queues
    /// together at least two `tx_limit`s and at most half of `mem`'s `max_bytes`; partial
    /// frames together at most a quarter of it and at least two largest frames.
    pub fn clamped(mut self, mem: &PinnedMemory, max_segments: usize) -> StreamConfig {
        let max_bytes = mem.config().max_bytes;
        self.max_message_len = self
            .max_message_len
            .min(mem.max_item_size().saturating_sub(HEADER_LEN))
            .min(u32::MAX as usize);
        let largest = HEADER_LEN + self.max_message_len;
        self.tx_limit = self.tx_limit.max(largest);
        let reserve = self
            .reply_reserve
            .unwrap_or(largest)
            .clamp(1, self.tx_limit);
        self.reply_reserve = Some(reserve);
        self.total_tx_limit = self
            .total_tx_limit
            .min(max_bytes / 2)
            .max(2 * self.tx_limit);
        self.partial_limit = self.partial_limit.min(max_bytes / 4).max(2 * largest);
        self.max_segments = self.max_segments.clamp(1, max_segments.max(1));
        self.read_budget = self.read_budget.max(1);
        self
    }
}

/// Counts of a stream datapath beyond [`DropCounters`], and its device's own (`device`); they
/// only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamStats<X> {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections opened ([`StreamDatapath::open`], `Connect::connect`).
    pub opened: u64,
    /// Connections closed (for any reason).
    pub closed: u64,
    /// Connections the peer ended cleanly (end of stream between frames).
    pub peer_closed: u64,
    /// Connections that failed (reset, broken pipe, a failed operation of the device).
    pub failed: u64,
    /// Connections closed because their byte stream was not valid framing.
    pub bad_streams: u64,
    /// Frames lost because the stream ended or failed in their middle.
    pub partial_frames_lost: u64,
    /// Messages gathered from more than one read into one pinned item.
    pub gathered: u64,
    /// Bytes copied to gather them.
    pub gathered_bytes: u64,
    /// Sends refused because the connection's queue was at [`StreamConfig::tx_limit`], or all
    /// connections' at [`StreamConfig::total_tx_limit`] (never a reply to a request this
    /// datapath handed over: those have room reserved).
    pub tx_full: u64,
    /// Requests read but held, not yet handed over, for want of room for their replies (each
    /// counted once; they are handed over in order as the peers read their replies).
    pub held_for_room: u64,
    /// Times reading a connection stopped because the replies of the requests already read
    /// had no room for more: what follows waits unread in the device (the kernel's receive
    /// queue; Demikernel's popped segment), the peer stopped by its receive window, until they
    /// do.
    pub room_waits: u64,
    /// Held requests dropped, never executed, because their connection closed.
    pub unexecuted_dropped: u64,
    /// Connections closed because their peer read nothing for
    /// [`StreamConfig::stall_timeout`].
    pub stall_timeouts: u64,
    /// Connections closed because a frame stayed unfinished for
    /// [`StreamConfig::frame_timeout`].
    pub frame_timeouts: u64,
    /// Connections closed because their partial frame gave way to others under
    /// [`StreamConfig::partial_limit`].
    pub partial_evictions: u64,
    /// Connections closed, their peer stalled longest, because all connections' queues at
    /// [`StreamConfig::total_tx_limit`] kept other requests waiting.
    pub reply_evictions: u64,
    /// Bytes read and dropped after a bad stream, while lingering before the close.
    pub discarded_bytes: u64,
    /// The device's own counters.
    pub device: X,
}

/// Readiness of one connection, as a device reports it (epoll's flags, or a completed
/// Demikernel pop).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Bytes (or the end of the stream, or an error) to read.
    pub read: bool,
    /// Room to write.
    pub write: bool,
    /// The connection is down in both directions (`EPOLLHUP`).
    pub hangup: bool,
    /// The peer ended its stream (`EPOLLRDHUP`).
    pub peer_ended: bool,
    /// An error (or, with zero-copy sends, their completions) waits (`EPOLLERR`).
    pub error: bool,
}

/// What a device's [`ByteStream::poll`] found.
#[derive(Debug)]
pub enum Event<C> {
    /// A new incoming connection from the peer, not attached yet.
    Accepted(C, SocketAddrV4),
    /// Accepting a connection failed (it is lost).
    AcceptFailed,
    /// An incoming connection that is not IPv4 (refused).
    NotIpv4,
    /// Connection `id` is ready.
    Ready(u32, Ready),
    /// `bytes` of what connection `id`'s writes left in flight ([`Wrote::in_flight`]) are done.
    Done(u32, usize),
    /// An operation of connection `id` failed: it is closed.
    Failed(u32),
}

/// What one [`ByteStream::write`] did with a connection's queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wrote {
    /// Bytes the device took and is done with (the kernel has them in its send buffer).
    pub sent: usize,
    /// Bytes the device took that it reports done later ([`Event::Done`]): they still count
    /// against the connection's queue limit, and their staying unfinished is a stall.
    pub in_flight: usize,
    /// The device could take no more (a full socket buffer): the connection waits for
    /// [`Ready::write`].
    pub blocked: bool,
}

/// A device that carries byte streams: the connections of one datapath (one core), reduced
/// to what [`StreamDatapath`] needs of them. Every method is non-blocking except
/// [`connect`](ByteStream::connect).
pub trait ByteStream {
    /// One connection's state in the device (a socket; a queue descriptor).
    type Conn;
    /// The device's own counters, beside the datapath's ([`StreamStats::device`]).
    type Stats: Copy + Default + fmt::Debug;

    /// Most buffers one message may be sent as (header buffer included).
    fn max_segments(&self) -> usize;

    /// Zero-copy fields at least this long are queued marked for a zero-copy send
    /// ([`TxQueue::push`]); `usize::MAX`: never.
    fn zero_copy_threshold(&self) -> usize;

    /// Polls once: appends the new connections, readiness and completions found to `events`.
    /// `round` counts the polls made in this burst before this one; returns whether to poll
    /// again in the same burst (more may have completed meanwhile).
    fn poll(&mut self, round: usize, events: &mut Vec<Event<Self::Conn>>) -> io::Result<bool>;

    /// Opens a connection to `peer` (blocking, a few seconds at most); [`attach`](Self::attach)
    /// follows.
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<Self::Conn>;

    /// Makes `c` connection `id` (accepted or opened): ready to be read and written, watched
    /// for reading.
    fn attach(&mut self, id: u32, c: &mut Self::Conn) -> io::Result<()>;

    /// Closes a connection that was never attached (the table is full, or `attach` failed).
    fn refuse(&mut self, c: Self::Conn);

    /// Closes connection `id`. The device keeps what it must (buffers the kernel still reads).
    fn close(&mut self, id: u32, c: Self::Conn);

    /// Ends our side of the stream (a FIN) once the last reply is sent; false when the device
    /// cannot (then the connection is closed at once).
    fn shutdown(&mut self, c: &mut Self::Conn) -> bool;

    /// Watches connection `id` for reading and for room to write (only these).
    fn watch(&mut self, id: u32, c: &mut Self::Conn, read: bool, write: bool) -> io::Result<()>;

    /// A readiness event of `id` is about to be handled: the device does its own part first
    /// (kernel TCP reads zero-copy completions on `EPOLLERR`) and returns what is left.
    fn ready(&mut self, id: u32, c: &mut Self::Conn, r: Ready) -> Ready {
        let _ = (id, c);
        r
    }

    /// Whether connection `id` failed (its peer is gone), asked when it reports a hang-up or
    /// an error while the datapath does not read it.
    fn failed(&mut self, id: u32, c: &Self::Conn) -> bool;

    /// Reads into `buf`: `Ok(0)` is the end of the stream, `WouldBlock` nothing now (the
    /// connection is reported ready again when there is, while watched for reading).
    fn read(&mut self, id: u32, c: &mut Self::Conn, buf: &mut [u8]) -> io::Result<usize>;

    /// Bytes known to have arrived on `id` and not read yet (0 when unknown).
    fn waiting(&mut self, id: u32, c: &Self::Conn) -> usize;

    /// Writes what it can of `tx`, removing what it took (and keeping, itself, references to
    /// buffers it still reads). An error means the connection failed.
    fn write(&mut self, id: u32, c: &mut Self::Conn, tx: &mut TxQueue) -> io::Result<Wrote>;

    /// A flush writes several connections: offers `id`'s queue for one submission shared with
    /// the others (kernel TCP's io_uring batch); false (the default) when it takes no part,
    /// and [`write`](Self::write) alone writes it.
    fn batch_add(&mut self, id: u32, c: &mut Self::Conn, tx: &TxQueue) -> bool {
        let _ = (id, c, tx);
        false
    }

    /// Submits what [`batch_add`](Self::batch_add) gathered.
    fn batch_submit(&mut self) {}

    /// The result of `id`'s part of the batch, applied to its queue as
    /// [`write`](Self::write) would (`None`: it had none; it is written by `write`).
    fn batch_take(
        &mut self,
        id: u32,
        c: &mut Self::Conn,
        tx: &mut TxQueue,
    ) -> Option<io::Result<Wrote>> {
        let _ = (id, c, tx);
        None
    }

    /// Buffer references the device dropped since the last call (sends the kernel took,
    /// completions read).
    fn poll_completions(&mut self) -> usize;

    /// Buffer references it holds (zero-copy sends the kernel may still read).
    fn in_flight(&self) -> usize;

    /// What its sends handed over by reference and what was copied.
    fn send_counters(&self) -> SendCounters;

    /// Its own counters.
    fn stats(&self) -> Self::Stats;
}

/// Messages of length-delimited frames over any [`ByteStream`] device: the runtime's datapath
/// traits, written once (see the [module docs](self)).
pub struct StreamDatapath<D: ByteStream> {
    cfg: StreamConfig,
    local: SocketAddrV4,
    conns: HashMap<u32, Conn<D::Conn>>,
    by_peer: HashMap<SocketAddrV4, ConnId>,
    next_id: u32,
    /// Connections with sends queued since their last write.
    dirty: Vec<u32>,
    events: Vec<Event<D::Conn>>,
    rx_frames: Vec<(Msg, RcBuf)>,
    /// Partial frames of all connections, against [`StreamConfig::partial_limit`].
    partials: PartialFrames,
    /// Requests on their way to the application: who was handed some this burst, who holds
    /// some for want of reply room, and the room all connections share.
    requests: Requests,
    /// Scratch: connections whose state changed.
    touched: Vec<u32>,
    /// Connections whose peer stopped taking bytes, maybe past the timeout.
    stalled: Vec<u32>,
    /// Connections lingering after a bad stream.
    lingering: Vec<u32>,
    /// Scratch: connections to close.
    victims: Vec<u32>,
    /// Connections evicted or timed out while their requests of this burst await replies:
    /// closed at the start of the next burst.
    doomed: Vec<(u32, Close)>,
    /// A request of the last burst waits for room under [`StreamConfig::total_tx_limit`] alone.
    starving: bool,
    /// Scratch: what a lingering connection's peer sends, dropped.
    scratch: Vec<u8>,
    /// When the timeouts are checked next.
    next_tick: Instant,
    /// Connections closed since the last trim of the pinned memory.
    trim_due: bool,
    /// The earliest next trim.
    next_trim: Instant,
    closing: Vec<(u32, Close)>,
    counters: DropCounters,
    stats: StreamStats<D::Stats>,
    /// Queued buffer references of all connections.
    queued: usize,
    /// Buffers released (by closes) since the last `poll_completions`.
    completed: usize,
    // Field order is drop order: the connections above close (by `Drop`) before the device
    // goes, and the device (holding buffers the kernel may still read) before the memory.
    dev: D,
    mem: PinnedMemory,
}

impl<D: ByteStream> StreamDatapath<D> {
    /// The datapath over `dev` (listening on `local`, or `0.0.0.0:0`), with `mem` for its
    /// buffers and `cfg`'s limits (clamped for `mem` and the device).
    pub fn with_device(
        dev: D,
        mem: PinnedMemory,
        cfg: StreamConfig,
        local: SocketAddrV4,
    ) -> StreamDatapath<D> {
        let cfg = cfg.clamped(&mem, dev.max_segments());
        StreamDatapath {
            local,
            conns: HashMap::new(),
            by_peer: HashMap::new(),
            next_id: 0,
            dirty: Vec::new(),
            events: Vec::new(),
            rx_frames: Vec::new(),
            partials: PartialFrames::new(cfg.partial_limit),
            requests: Requests::new(cfg.total_tx_limit),
            touched: Vec::new(),
            stalled: Vec::new(),
            lingering: Vec::new(),
            victims: Vec::new(),
            doomed: Vec::new(),
            starving: false,
            scratch: Vec::new(),
            next_tick: Instant::now(),
            trim_due: false,
            next_trim: Instant::now(),
            closing: Vec::new(),
            counters: DropCounters::default(),
            stats: StreamStats::default(),
            queued: 0,
            completed: 0,
            cfg,
            dev,
            mem,
        }
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> &StreamConfig {
        &self.cfg
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The device, mutably.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// The counters, the device's included.
    pub fn stats(&self) -> StreamStats<D::Stats> {
        let mut s = self.stats;
        s.held_for_room = self.requests.held_for_room();
        s.device = self.dev.stats();
        s
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Whether `conn` is open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn.0)
    }

    /// Pinned bytes held by receive buffers of partly received frames (all connections).
    pub fn rx_bytes_held(&self) -> usize {
        self.conns.values().map(|c| c.rx.held_capacity()).sum()
    }

    /// The pinned bytes of partial frames charged against [`StreamConfig::partial_limit`] now,
    /// and the most they have been.
    pub fn partial_bytes(&self) -> (usize, usize) {
        (self.partials.held(), self.partials.peak())
    }

    /// The bytes queued for sending by all connections now, and the most they have been with
    /// the reservations of a burst ([`StreamConfig::total_tx_limit`]).
    pub fn queued_total(&self) -> (usize, usize) {
        let s = self.requests.shared();
        (s.queued(), s.peak())
    }

    /// Requests of `conn` read and held for want of room for their replies.
    pub fn held_requests(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn.0).map(|c| c.inbox.held())
    }

    /// Bytes queued for `conn` and not yet sent (or not yet done, with a device that reports
    /// its sends done later).
    pub fn queued_bytes(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn.0).map(|c| c.queued())
    }

    /// Whether a held request could be handed over now (a server about to wait should not).
    pub fn has_deliverable(&self) -> bool {
        self.requests.has_deliverable(&self.conns)
    }

    /// Opens a new connection to `peer` (unlike `Connect::connect`, which reuses an open one):
    /// [`ByteStream::connect`], then [`ByteStream::attach`].
    pub fn open(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        if self.conns.len() >= self.cfg.max_conns {
            return Err(io::Error::other(format!(
                "connection table full ({} connections)",
                self.cfg.max_conns
            )));
        }
        let c = self.dev.connect(peer)?;
        let id = self.add_conn(c, peer, true)?;
        self.stats.opened += 1;
        self.by_peer.entry(peer).or_insert(id);
        Ok(id)
    }

    /// Enters `c` in the table and attaches it to the device (on failure it is refused).
    fn add_conn(
        &mut self,
        mut c: D::Conn,
        peer: SocketAddrV4,
        outgoing: bool,
    ) -> io::Result<ConnId> {
        let id = self.next_id;
        // Ids are not reused while a connection with the same id is open (after 2^32 opens).
        self.next_id = self.next_id.wrapping_add(1);
        if let Err(e) = self.dev.attach(id, &mut c) {
            self.dev.refuse(c);
            return Err(e);
        }
        let conn = Conn::new(id, c, peer, outgoing, &self.cfg);
        self.conns.insert(id, conn);
        Ok(ConnId(id))
    }
}

impl<D: ByteStream> fmt::Debug for StreamDatapath<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamDatapath")
            .field("local", &self.local)
            .field("connections", &self.conns.len())
            .field("counters", &self.counters)
            .field("stats", &self.stats())
            .finish()
    }
}
