//! The Cornflakes datapath over Linux kernel TCP (`docs/tcp.md`).
//!
//! A connection is a TCP connection; messages are length-delimited frames on its byte stream
//! (the 20-byte framing header with one segment, then the message; `docs/wire-format.md`,
//! "Stream framing"). Everything is non-blocking and driven by one `epoll` instance per
//! datapath (one per core), polled by [`Receive::recv_burst`]:
//!
//! - **Receive** reads into pinned buffers ([`frame::Deframer`]): a message wholly inside one
//!   read is handed to the application as a view of the receive buffer (zero-copy); a message
//!   cut by the end of a read is gathered into one pinned item sized by the bytes that arrived
//!   (counted in [`TcpStats::gathered`]). An idle connection holds no receive buffer.
//! - **Send** ([`Transmit::send_object`]) queues one pinned buffer with the frame header and
//!   the object's header and copy areas, then one reference per zero-copy field; the
//!   connection's queue leaves with one gathered `sendmsg` per [`Transmit::flush`] (several
//!   when the kernel takes part of it). A send whose iovecs include a zero-copy field at least
//!   [`TcpConfig::zero_copy_threshold`] long uses `MSG_ZEROCOPY`: the kernel then refers to the
//!   buffers until it reports the send complete on the socket's error queue, and the datapath
//!   keeps their references until then ([`Completions::poll_completions`]), so a value
//!   replaced by the application during the send never changes the bytes on the wire.
//! - **Backpressure** ([`flow`]): a request is handed over only when its connection's queue
//!   has room for its reply ([`TcpConfig::reply_reserve`] of [`TcpConfig::tx_limit`]), and
//!   that reply is then never refused; requests beyond the room wait, in order, and the
//!   connection is not read meanwhile, so a peer that pipelines any number of requests gets
//!   every reply and a peer that never reads stalls only itself, until
//!   [`TcpConfig::stall_timeout`] closes it (its waiting requests never run).
//! - **Memory** ([`budget`]): a partial frame's buffer grows with the bytes that arrived; all
//!   partial frames together hold at most [`TcpConfig::partial_limit`] (the oldest give way)
//!   and each at most [`TcpConfig::frame_timeout`]; closing connections trims the pinned pool.
//! - **Bad input**: a frame header that is not a one-segment version-1 header, or announces
//!   more than [`TcpConfig::max_message_len`] bytes, ends that connection's input: the frames
//!   before it are answered, then the connection sends a FIN, lingers and closes (counted); a
//!   reset or end of stream in the middle of a frame drops the partial frame (counted). Other
//!   connections are unaffected.

#![deny(unsafe_code)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod budget;
mod conn;
pub mod flow;
pub mod frame;
#[allow(unsafe_code)]
mod sys;
pub mod txq;
#[allow(unsafe_code)]
mod uring;

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use cornflakes_datapath::{Completions, Connect, DatapathMemory, DropCounters, Receive, Transmit};
use cornflakes_datapath::{ConnId, Msg, RxMsg, SendError, SendObject};
use cornflakes_mem::MemoryConfig;
use cornflakes_mem::{PinnedMemory, RcBuf};

use budget::PartialFrames;
use conn::{Close, Conn, Input};
use flow::{Inbox, ReplyRoom, Requests};
use frame::{Deframer, HEADER_LEN};
use sys::{Epoll, ZcCompletion};

use txq::{FramedObject, TxQueue, ZcInFlight};

/// Configuration of a [`TcpDatapath`].
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Address to listen on (port 0 picks one), or `None` for a datapath that only connects.
    pub listen: Option<SocketAddrV4>,
    /// Pinned memory for receive and transmit buffers. Its largest item bounds the largest
    /// message (a received message is gathered into one item).
    pub memory: MemoryConfig,
    /// Largest message sent or accepted; clamped to the largest pinned item minus the frame
    /// header. A received frame header announcing more closes the connection.
    pub max_message_len: usize,
    /// Bytes of the receive buffer a read goes into (larger for a frame that needs more).
    pub rx_buffer: usize,
    /// Most unsent bytes queued per connection. A request is handed to the application only
    /// while its connection's queue has [`TcpConfig::reply_reserve`] bytes free for its reply
    /// (beyond the replies already reserved); the reply is then queued, never refused. Other
    /// sends beyond the limit fail with [`SendError::Full`]. At least one largest frame.
    pub tx_limit: usize,
    /// Send-queue bytes reserved for the reply of each request handed over on an accepted
    /// connection; `None`: the largest frame (header and [`TcpConfig::max_message_len`]), so
    /// that no reply can ever find its queue full. A smaller reserve hands over more pipelined
    /// requests per poll; a reply larger than it is still queued (the queue may then exceed
    /// `tx_limit` by the difference). Connections this datapath opened carry replies and
    /// reserve nothing.
    pub reply_reserve: Option<usize>,
    /// A connection whose peer has not taken a single byte of its queued replies for this long
    /// (its socket buffer full all the while) is closed; the requests it sent that were still
    /// waiting for reply room are dropped unexecuted.
    pub stall_timeout: Duration,
    /// Most pinned bytes held by partly received frames, all connections together (clamped to
    /// at least two largest frames and at most a quarter of `memory.max_bytes`). When a frame
    /// would take the total above it, the partial frames that started longest ago are dropped
    /// with their connections ([`TcpStats::partial_evictions`]).
    pub partial_limit: usize,
    /// A frame not complete this long after its first byte arrived (while its connection was
    /// being read) is dropped with its connection ([`TcpStats::frame_timeouts`]).
    pub frame_timeout: Duration,
    /// After a stream turned out not to be valid framing and the replies to the frames before
    /// that point were sent with a FIN, how long what the peer still sends is read and dropped
    /// before the close (so that its TCP does not answer a reset by dropping unread replies).
    pub linger: Duration,
    /// Zero-copy fields at least this long are sent zero-copy (`MSG_ZEROCOPY` or io_uring
    /// `SENDMSG_ZC`, per [`TcpConfig::zero_copy_mode`]); `None` never does (the kernel copies
    /// every send during the call).
    pub zero_copy_threshold: Option<usize>,
    /// How zero-copy sends are made.
    pub zero_copy_mode: ZeroCopyMode,
    /// Most zero-copy fields of one object sent as their own iovec; smaller ones beyond it are
    /// copied into the head buffer ([`cornflakes_datapath::Demote`]).
    pub max_segments: usize,
    /// Most connections (accepted and opened); further accepted connections are closed at
    /// once and counted in [`DropCounters::conn_table_full`].
    pub max_conns: usize,
    /// Reads per connection per poll before the next connection's turn.
    pub read_budget: usize,
    /// Most epoll events handled per poll.
    pub events_per_poll: usize,
    /// Kernel socket buffer size to ask for (send and receive), if any.
    pub socket_buffer: Option<usize>,
}

/// How a datapath makes its zero-copy sends (see `docs/tcp.md`, "Zero-copy sends").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ZeroCopyMode {
    /// `sendmsg(MSG_ZEROCOPY)` on sockets with `SO_ZEROCOPY`; completions from each socket's
    /// error queue. The default: no ring to set up, and it works where io_uring is disabled
    /// (`kernel.io_uring_disabled`, container seccomp profiles).
    #[default]
    MsgZerocopy,
    /// io_uring `IORING_OP_SENDMSG_ZC` on one ring per datapath; completions are the ring's
    /// notification CQEs.
    IoUring,
}

/// Default largest pinned item of a TCP datapath: 256 KiB (messages up to 256 KiB − 20 B).
pub const DEFAULT_MAX_ITEM: usize = 256 << 10;
/// Default zero-copy threshold for `MSG_ZEROCOPY` (see `docs/tcp.md`, "Zero-copy threshold").
pub const DEFAULT_ZERO_COPY_THRESHOLD: usize = 16 << 10;
/// Default cap on the pinned bytes of partly received frames, all connections together.
pub const DEFAULT_PARTIAL_LIMIT: usize = 64 << 20;
/// Default [`TcpConfig::stall_timeout`] and [`TcpConfig::frame_timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`TcpConfig::linger`].
pub const DEFAULT_LINGER: Duration = Duration::from_secs(2);

impl TcpConfig {
    /// Defaults: listen on `listen`, messages up to 256 KiB − 20 B, 8 KiB receive buffers,
    /// 1 MiB of unsent bytes per connection with a largest frame reserved per request,
    /// `MSG_ZEROCOPY` for fields of 16 KiB and more, 64 iovecs per object, 16384 connections,
    /// 64 MiB of partial frames, 10 s stall and frame timeouts, 2 s linger.
    pub fn new(listen: Option<SocketAddrV4>) -> TcpConfig {
        TcpConfig {
            listen,
            memory: MemoryConfig {
                max_item_size: DEFAULT_MAX_ITEM,
                ..MemoryConfig::default()
            },
            max_message_len: DEFAULT_MAX_ITEM - HEADER_LEN,
            rx_buffer: 8 << 10,
            tx_limit: 1 << 20,
            reply_reserve: None,
            stall_timeout: DEFAULT_TIMEOUT,
            partial_limit: DEFAULT_PARTIAL_LIMIT,
            frame_timeout: DEFAULT_TIMEOUT,
            linger: DEFAULT_LINGER,
            zero_copy_threshold: Some(DEFAULT_ZERO_COPY_THRESHOLD),
            zero_copy_mode: ZeroCopyMode::MsgZerocopy,
            max_segments: 64,
            max_conns: 16384,
            read_budget: 4,
            events_per_poll: 256,
            socket_buffer: None,
        }
    }
}

pub use cornflakes_datapath::SetupError;

/// The limits of a stream datapath, as clamped for its pinned memory before use: shared by
/// [`TcpDatapath::new`] and the Demikernel datapath (`demikernel/`), which take the same knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// [`TcpConfig::max_message_len`].
    pub max_message_len: usize,
    /// [`TcpConfig::tx_limit`].
    pub tx_limit: usize,
    /// [`TcpConfig::reply_reserve`].
    pub reply_reserve: Option<usize>,
    /// [`TcpConfig::partial_limit`].
    pub partial_limit: usize,
}

impl StreamLimits {
    /// A message fits one pinned item of `mem` with its frame header (and a 32-bit length);
    /// the send queue takes at least one largest frame; the reservation per request is
    /// 1..=`tx_limit` bytes (by default the largest frame); partial frames together hold at
    /// most a quarter of `mem`'s `max_bytes`, and at least two largest frames.
    pub fn clamped(self, mem: &PinnedMemory) -> StreamLimits {
        let max_message_len = self
            .max_message_len
            .min(mem.max_item_size().saturating_sub(HEADER_LEN))
            .min(u32::MAX as usize);
        let largest = HEADER_LEN + max_message_len;
        let tx_limit = self.tx_limit.max(largest);
        StreamLimits {
            max_message_len,
            tx_limit,
            reply_reserve: Some(self.reply_reserve.unwrap_or(largest).clamp(1, tx_limit)),
            partial_limit: self
                .partial_limit
                .min(mem.config().max_bytes / 4)
                .max(2 * largest),
        }
    }
}

/// This datapath's name in [`SetupError::Io`].
const SETUP_IO: &str = "TCP";

/// Counts of the TCP datapath beyond [`DropCounters`]; they only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections opened by [`Connect::connect`] / [`TcpDatapath::open`].
    pub opened: u64,
    /// Connections closed (for any reason).
    pub closed: u64,
    /// Connections the peer ended cleanly (end of stream between frames).
    pub peer_closed: u64,
    /// Connections that failed (reset, broken pipe, other socket errors).
    pub failed: u64,
    /// Connections closed because their byte stream was not valid framing.
    pub bad_streams: u64,
    /// Frames lost because the stream ended or failed in their middle.
    pub partial_frames_lost: u64,
    /// Messages gathered from more than one read into one pinned item.
    pub gathered: u64,
    /// Bytes copied to gather them.
    pub gathered_bytes: u64,
    /// `sendmsg` calls.
    pub sendmsg_calls: u64,
    /// `sendmsg` calls the kernel took only part of.
    pub partial_writes: u64,
    /// `sendmsg` calls that found the socket buffer full (`EAGAIN`).
    pub would_block: u64,
    /// Sends refused because the connection's queue was at [`TcpConfig::tx_limit`] (never a
    /// reply to a request this datapath handed over: those have room reserved).
    pub tx_full: u64,
    /// Requests read but held, not yet handed over, for want of room for their replies (each
    /// counted once; they are handed over in order as the peer reads its replies).
    pub held_for_room: u64,
    /// Held requests dropped, never executed, because their connection closed.
    pub unexecuted_dropped: u64,
    /// Connections closed because their peer read nothing for [`TcpConfig::stall_timeout`].
    pub stall_timeouts: u64,
    /// Connections closed because a frame stayed unfinished for [`TcpConfig::frame_timeout`].
    pub frame_timeouts: u64,
    /// Connections closed because their partial frame gave way to others under
    /// [`TcpConfig::partial_limit`].
    pub partial_evictions: u64,
    /// Bytes read and dropped after a bad stream, while lingering before the close.
    pub discarded_bytes: u64,
    /// `MSG_ZEROCOPY` sends.
    pub zero_copy_sends: u64,
    /// Zero-copy sends the kernel reported complete.
    pub zero_copy_completed: u64,
    /// Of those, sends the kernel reported it copied after all (`SO_EE_CODE_ZEROCOPY_COPIED`;
    /// loopback always copies).
    pub zero_copy_copied: u64,
    /// `MSG_ZEROCOPY` sends refused with `ENOBUFS` (the socket's optmem limit) and retried as
    /// copying sends.
    pub zero_copy_enobufs: u64,
    /// Closed connections still waiting for zero-copy completions (their buffers held).
    pub draining: u64,
    /// [`ZeroCopyMode::IoUring`]: `io_uring_enter` calls made for zero-copy sends. A flush
    /// submits the zero-copy sends of all its connections together and waits for their results
    /// at once, so a batch of several connections' sends usually takes one.
    pub uring_enters: u64,
    /// [`ZeroCopyMode::IoUring`]: zero-copy sends made in such batches of two or more.
    pub uring_batched_sends: u64,
}

/// The epoll token of the listening socket (connection tokens are their `u32` ids).
const LISTENER: u64 = u64::MAX;

/// Submission entries of a [`ZeroCopyMode::IoUring`] ring (one send is submitted at a time).
const URING_ENTRIES: u32 = 64;

/// A datapath over Linux kernel TCP: one listening socket (optional), any number of
/// connections, one epoll instance. Not `Send`: one per core.
pub struct TcpDatapath {
    cfg: TcpConfig,
    mem: PinnedMemory,
    epoll: Epoll,
    listener: Option<TcpListener>,
    local: SocketAddrV4,
    conns: HashMap<u32, Conn>,
    by_peer: HashMap<SocketAddrV4, ConnId>,
    next_id: u32,
    /// Connections with sends queued since their last write.
    dirty: Vec<u32>,
    /// Connections with zero-copy sends in flight.
    zc_conns: Vec<u32>,
    /// Closed connections whose zero-copy sends are still in flight (socket kept open to
    /// read their completions).
    draining: Vec<Conn>,
    events: Vec<(u64, u32)>,
    rx_frames: Vec<(Msg, RcBuf)>,
    /// Partial frames of all connections, against [`TcpConfig::partial_limit`].
    partials: PartialFrames,
    /// Requests on their way to the application: who was handed some this burst, who holds
    /// some for want of reply room.
    requests: Requests,
    /// Scratch: connections whose state changed.
    touched: Vec<u32>,
    /// Connections whose peer stopped reading (socket buffer full), maybe past the timeout.
    stalled: Vec<u32>,
    /// Connections lingering after a bad stream.
    lingering: Vec<u32>,
    /// Scratch: connections to close.
    victims: Vec<u32>,
    /// Connections evicted or timed out while their requests of this burst await replies:
    /// closed at the start of the next burst.
    doomed: Vec<(u32, Close)>,
    /// Scratch: what a lingering connection's peer sends, dropped.
    scratch: Vec<u8>,
    /// When the timeouts are checked next.
    next_tick: Instant,
    /// Connections closed since the last trim of the pinned memory.
    trim_due: bool,
    /// The earliest next trim.
    next_trim: Instant,
    iov: Vec<libc::iovec>,
    completions: Vec<ZcCompletion>,
    closing: Vec<(u32, Close)>,
    counters: DropCounters,
    stats: TcpStats,
    /// Queued buffer references of all connections.
    queued: usize,
    /// Buffer references held for zero-copy sends in flight (all connections).
    zc_held: usize,
    /// Buffers released since the last `poll_completions`.
    completed: usize,
    /// The io_uring of [`ZeroCopyMode::IoUring`].
    uring: Option<uring::ZcRing>,
    notifications: Vec<uring::Notification>,
}

impl TcpDatapath {
    /// Creates the pinned memory and the epoll instance, and listens on `cfg.listen`.
    pub fn new(cfg: TcpConfig) -> Result<TcpDatapath, SetupError> {
        let mem = PinnedMemory::new(cfg.memory.clone()).map_err(SetupError::Memory)?;
        let epoll = Epoll::new(cfg.events_per_poll).map_err(SetupError::io(SETUP_IO))?;
        let uring = match (cfg.zero_copy_mode, cfg.zero_copy_threshold) {
            (ZeroCopyMode::IoUring, Some(_)) => {
                Some(uring::ZcRing::new(URING_ENTRIES).map_err(SetupError::io(SETUP_IO))?)
            }
            _ => None,
        };
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
        cfg.max_segments = cfg.max_segments.clamp(1, sys::MAX_IOV - 1);
        cfg.read_budget = cfg.read_budget.max(1);
        let (listener, local) = match cfg.listen {
            Some(addr) => {
                let l = TcpListener::bind(addr).map_err(SetupError::io(SETUP_IO))?;
                l.set_nonblocking(true).map_err(SetupError::io(SETUP_IO))?;
                let local = match l.local_addr().map_err(SetupError::io(SETUP_IO))? {
                    SocketAddr::V4(a) => a,
                    SocketAddr::V6(_) => {
                        return Err(SetupError::io(SETUP_IO)(io::Error::other(
                            "bound an IPv6 address",
                        )))
                    }
                };
                epoll
                    .add(l.as_fd(), sys::IN, LISTENER)
                    .map_err(SetupError::io(SETUP_IO))?;
                (Some(l), local)
            }
            None => (None, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)),
        };
        Ok(TcpDatapath {
            mem,
            epoll,
            listener,
            local,
            conns: HashMap::new(),
            by_peer: HashMap::new(),
            next_id: 0,
            dirty: Vec::new(),
            zc_conns: Vec::new(),
            draining: Vec::new(),
            events: Vec::with_capacity(cfg.events_per_poll),
            rx_frames: Vec::new(),
            partials: PartialFrames::new(cfg.partial_limit),
            requests: Requests::default(),
            touched: Vec::new(),
            stalled: Vec::new(),
            lingering: Vec::new(),
            victims: Vec::new(),
            doomed: Vec::new(),
            scratch: Vec::new(),
            next_tick: Instant::now(),
            trim_due: false,
            next_trim: Instant::now(),
            iov: Vec::with_capacity(sys::MAX_IOV),
            completions: Vec::new(),
            closing: Vec::new(),
            counters: DropCounters::default(),
            stats: TcpStats::default(),
            queued: 0,
            zc_held: 0,
            completed: 0,
            uring,
            notifications: Vec::new(),
            cfg,
        })
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    /// The TCP-specific counters.
    pub fn stats(&self) -> TcpStats {
        let mut s = self.stats;
        s.held_for_room = self.requests.held_for_room();
        s.draining = self.draining.len() as u64;
        s.uring_enters = self.uring.as_ref().map_or(0, |r| r.enters());
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

    /// The pinned bytes of partial frames charged against [`TcpConfig::partial_limit`] now, and
    /// the most they have been.
    pub fn partial_bytes(&self) -> (usize, usize) {
        (self.partials.held(), self.partials.peak())
    }

    /// Requests of `conn` read and held for want of room for their replies.
    pub fn held_requests(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn.0).map(|c| c.inbox.held())
    }

    /// Unsent bytes queued for `conn`.
    pub fn queued_bytes(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn.0).map(|c| c.tx.bytes())
    }

    /// Zero-copy sends in flight (sent, completion not yet read), all connections.
    pub fn zero_copy_in_flight(&self) -> usize {
        self.conns.values().map(|c| c.zc.sends()).sum::<usize>()
            + self.draining.iter().map(|c| c.zc.sends()).sum::<usize>()
    }

    /// Opens a new connection to `peer` (unlike [`Connect::connect`], which reuses an open
    /// one): a blocking connect of at most 5 s, then the socket is non-blocking.
    pub fn open(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        if self.conns.len() >= self.cfg.max_conns {
            return Err(io::Error::other(format!(
                "connection table full ({} connections)",
                self.cfg.max_conns
            )));
        }
        let s = TcpStream::connect_timeout(&SocketAddr::V4(peer), Duration::from_secs(5))?;
        let id = self.add_conn(s, peer, true)?;
        self.stats.opened += 1;
        self.by_peer.entry(peer).or_insert(id);
        Ok(id)
    }

    /// Waits up to `timeout` for a socket event (a connection, data, room to write, a
    /// completion); returns at once when one is ready, or a held request can be handed over,
    /// and whether so. The events stay for the next [`Receive::recv_burst`]. For a server that
    /// would otherwise spin when idle; the timeouts ([`TcpConfig::stall_timeout`], …) are
    /// enforced by `recv_burst`, so call it at least every few tens of milliseconds.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        if self.requests.has_deliverable(&self.conns) {
            return Ok(true);
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        self.epoll.wait_ready(ms)
    }

    fn add_conn(&mut self, s: TcpStream, peer: SocketAddrV4, outgoing: bool) -> io::Result<ConnId> {
        s.set_nonblocking(true)?;
        sys::set_nodelay(s.as_fd())?;
        if let Some(b) = self.cfg.socket_buffer {
            sys::set_buffer_sizes(s.as_fd(), b);
        }
        let zero_copy = self.cfg.zero_copy_threshold.is_some()
            && (self.uring.is_some() || sys::enable_zero_copy(s.as_fd()));
        let id = self.next_id;
        // Ids are not reused while a connection with the same id is open (after 2^32 opens).
        self.next_id = self.next_id.wrapping_add(1);
        self.epoll.add(s.as_fd(), sys::IN, id as u64)?;
        let room = ReplyRoom {
            limit: self.cfg.tx_limit,
            // A connection this datapath opened carries replies: reading it never waits.
            reserve: if outgoing {
                0
            } else {
                self.cfg.reply_reserve.unwrap_or(self.cfg.tx_limit)
            },
        };
        self.conns.insert(
            id,
            Conn {
                id,
                stream: s,
                peer,
                outgoing,
                rx: Deframer::new(self.cfg.max_message_len, self.cfg.rx_buffer),
                tx: TxQueue::default(),
                zc: ZcInFlight::default(),
                room,
                inbox: Inbox::default(),
                input: Input::Open,
                interest: sys::IN,
                blocked: false,
                stalled_since: None,
                linger_until: None,
                zero_copy,
                dirty: false,
                stall_listed: false,
                charged: 0,
                doomed: false,
            },
        );
        Ok(ConnId(id))
    }

    fn accept_all(&mut self) {
        let Some(l) = self.listener.take() else {
            return;
        };
        for _ in 0..self.cfg.events_per_poll {
            match l.accept() {
                Ok((s, SocketAddr::V4(peer))) => {
                    if self.conns.len() >= self.cfg.max_conns {
                        self.counters.conn_table_full += 1;
                        drop(s);
                        continue;
                    }
                    match self.add_conn(s, peer, false) {
                        Ok(_) => self.stats.accepted += 1,
                        Err(_) => self.stats.failed += 1,
                    }
                }
                Ok((_, SocketAddr::V6(_))) => self.counters.non_ipv4 += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ECONNABORTED, EMFILE, …: this connection is lost; try again next poll.
                Err(_) => {
                    self.stats.failed += 1;
                    break;
                }
            }
        }
        self.listener = Some(l);
    }

    /// A failed io_uring zero-copy send whose notification is still to come (the kernel posts
    /// one for a send that failed with `EAGAIN`, too): its send number is taken by an empty
    /// record, so that the notification completes that and not the next send, whose buffers
    /// the kernel may still be reading.
    fn reserve_notification(c: &mut Conn, zc_conns: &mut Vec<u32>) {
        if c.zc.sends() == 0 {
            zc_conns.push(c.id);
        }
        c.zc.record(Vec::new());
    }

    /// Accounts for `n` bytes the kernel took from `c`'s queue in one send that offered
    /// `offered` bytes; `zc`: a zero-copy send, whose buffers are held until its notification.
    #[allow(clippy::too_many_arguments)]
    fn took(
        c: &mut Conn,
        n: usize,
        zc: bool,
        offered: usize,
        stats: &mut TcpStats,
        queued: &mut usize,
        zc_held: &mut usize,
        completed: &mut usize,
        zc_conns: &mut Vec<u32>,
    ) {
        if n < c.tx.bytes() && n < offered {
            stats.partial_writes += 1;
        }
        if zc {
            let mut keep = Vec::new();
            let done = c.tx.advance(n, Some(&mut keep));
            *queued -= done;
            *zc_held += keep.len();
            if c.zc.sends() == 0 {
                zc_conns.push(c.id);
            }
            c.zc.record(keep);
            stats.zero_copy_sends += 1;
            // Wholly sent buffers are released at the completion, not now.
        } else {
            let done = c.tx.advance(n, None);
            *queued -= done;
            *completed += done;
        }
        c.blocked = false;
        if n > 0 {
            c.stalled_since = None;
        }
    }

    /// [`ZeroCopyMode::IoUring`]: the first zero-copy send of each of `ids`' queues, submitted
    /// together ([`uring::ZcRing::send_batch`]: one `io_uring_enter` for the batch instead of
    /// one per connection). What a send leaves queued is written by [`Self::write_conn`]
    /// afterwards. Returns the connections whose socket buffer was full (`EAGAIN`).
    fn send_zc_batch(&mut self, ids: &[u32]) -> std::collections::HashSet<u32> {
        let mut blocked = std::collections::HashSet::new();
        let Some(ring) = self.uring.as_mut() else {
            return blocked;
        };
        let mut batch = Vec::new();
        for &id in ids {
            let Some(c) = self.conns.get(&id) else {
                continue;
            };
            if !c.zero_copy || c.tx.is_empty() {
                continue;
            }
            let mut iov = Vec::new();
            if !sys::fill_iov(&c.tx, &mut iov) {
                continue; // no zero-copy field: write_conn's copying sendmsg
            }
            batch.push(uring::BatchSend {
                fd: std::os::fd::AsRawFd::as_raw_fd(&c.stream),
                len: iov.iter().map(|v| v.iov_len).sum(),
                iov,
                user_data: (u64::from(id) << 32) | u64::from(c.zc.next_id()),
                result: None,
            });
        }
        if batch.len() < 2 {
            return blocked; // one send: write_conn's own path, nothing to batch
        }
        self.stats.sendmsg_calls += batch.len() as u64;
        self.stats.uring_batched_sends += batch.len() as u64;
        let ring_failed = ring.send_batch(&mut batch).is_err();
        for b in batch {
            let id = (b.user_data >> 32) as u32;
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            let result = b.result.map(|r| match r.result {
                Ok(n) => Ok((n, r.more)),
                Err(e) => {
                    if r.more {
                        Self::reserve_notification(c, &mut self.zc_conns);
                    }
                    Err(e)
                }
            });
            match result {
                Some(Ok((n, zc))) => Self::took(
                    c,
                    n,
                    zc,
                    b.len,
                    &mut self.stats,
                    &mut self.queued,
                    &mut self.zc_held,
                    &mut self.completed,
                    &mut self.zc_conns,
                ),
                Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.would_block += 1;
                    c.blocked = true;
                    blocked.insert(id);
                }
                // Interrupted, or ENOBUFS (the optmem limit): write_conn sends it again, and
                // copies it if the limit holds.
                Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Some(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.stats.zero_copy_enobufs += 1;
                }
                Some(Err(_)) => self.closing.push((id, Close::Failed)),
                // The ring failed before this result arrived: whether the kernel took the
                // bytes is unknown, and sending them again could duplicate them on the
                // stream. The connection is closed instead.
                None if ring_failed => self.closing.push((id, Close::Failed)),
                None => {}
            }
        }
        blocked
    }

    /// Writes `id`'s queue until it is empty or the socket is full (with `send` false, only
    /// settles its epoll interest: a batch just found its socket full). An error means the
    /// connection failed.
    fn write_conn(&mut self, id: u32, send: bool) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        c.dirty = false;
        let mut allow_zc = c.zero_copy;
        let mut result = Ok(());
        while send && !c.tx.is_empty() {
            let queued = c.tx.bytes();
            self.stats.sendmsg_calls += 1;
            let sent = match self.uring.as_mut() {
                Some(ring) if allow_zc && sys::fill_iov(&c.tx, &mut self.iov) => {
                    let user_data = (u64::from(id) << 32) | u64::from(c.zc.next_id());
                    let r = ring.send(c.stream.as_fd(), &mut self.iov, user_data);
                    match r.result {
                        Ok(n) => Ok((n, r.more)),
                        Err(e) => {
                            if r.more {
                                Self::reserve_notification(c, &mut self.zc_conns);
                            }
                            Err(e)
                        }
                    }
                }
                _ => sys::send_queue(
                    c.stream.as_fd(),
                    &c.tx,
                    &mut self.iov,
                    allow_zc && self.uring.is_none(),
                ),
            };
            match sent {
                Ok((n, zc)) => {
                    let offered = self.iov.iter().map(|v| v.iov_len).sum::<usize>();
                    debug_assert!(queued >= n);
                    Self::took(
                        c,
                        n,
                        zc,
                        offered,
                        &mut self.stats,
                        &mut self.queued,
                        &mut self.zc_held,
                        &mut self.completed,
                        &mut self.zc_conns,
                    );
                    allow_zc = c.zero_copy;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.would_block += 1;
                    c.blocked = true;
                    if c.stalled_since.is_none() {
                        c.stalled_since = Some(Instant::now());
                        if !c.stall_listed {
                            c.stall_listed = true;
                            self.stalled.push(id);
                        }
                    }
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) && allow_zc => {
                    // The socket's optmem limit for zero-copy notifications: copy this one.
                    self.stats.zero_copy_enobufs += 1;
                    allow_zc = false;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if c.tx.is_empty() {
            c.blocked = false;
            c.stalled_since = None;
        }
        if result.is_ok() {
            self.settle_conn(id);
        }
        result
    }

    /// Releases the buffers of the io_uring sends whose notifications have arrived.
    fn poll_uring(&mut self) -> usize {
        let Some(ring) = self.uring.as_mut() else {
            return 0;
        };
        ring.drain(&mut self.notifications);
        let mut released = 0;
        for z in self.notifications.drain(..) {
            let (id, send) = ((z.user_data >> 32) as u32, z.user_data as u32);
            let c = match self.conns.get_mut(&id) {
                Some(c) => c,
                None => match self.draining.iter_mut().find(|c| c.id == id) {
                    Some(c) => c,
                    None => continue,
                },
            };
            let n = c.zc.complete(send, send);
            // A failed send's notification completes its empty record: not a zero-copy send.
            if n > 0 {
                self.stats.zero_copy_completed += 1;
                if z.copied {
                    self.stats.zero_copy_copied += 1;
                }
            }
            released += n;
        }
        self.zc_conns
            .retain(|id| self.conns.get(id).is_some_and(|c| c.zc.sends() > 0));
        self.draining.retain(|c| c.zc.sends() > 0);
        self.zc_held -= released;
        released
    }

    fn read_completions_of(
        c: &mut Conn,
        scratch: &mut Vec<ZcCompletion>,
        stats: &mut TcpStats,
    ) -> usize {
        scratch.clear();
        // A socket error here shows up again on the next read or write, which closes it.
        let _ = sys::read_completions(c.stream.as_fd(), scratch);
        let mut released = 0;
        for z in scratch.iter() {
            let n = z.hi.wrapping_sub(z.lo) as u64 + 1;
            stats.zero_copy_completed += n;
            if z.copied {
                stats.zero_copy_copied += n;
            }
            released += c.zc.complete(z.lo, z.hi);
        }
        released
    }

    /// Reads zero-copy completions of every connection with sends in flight.
    fn poll_zero_copy(&mut self) -> usize {
        if self.uring.is_some() {
            return self.poll_uring();
        }
        let mut released = 0;
        let mut list = std::mem::take(&mut self.zc_conns);
        list.retain(|id| {
            let Some(c) = self.conns.get_mut(id) else {
                return false;
            };
            released += Self::read_completions_of(c, &mut self.completions, &mut self.stats);
            c.zc.sends() > 0
        });
        self.zc_conns = list;
        let mut draining = std::mem::take(&mut self.draining);
        draining.retain_mut(|c| {
            released += Self::read_completions_of(c, &mut self.completions, &mut self.stats);
            c.zc.sends() > 0
        });
        self.draining = draining;
        self.zc_held -= released;
        released
    }
}

impl DatapathMemory for TcpDatapath {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl Connect for TcpDatapath {
    /// The open outgoing connection to `peer`, or a new one ([`TcpDatapath::open`]).
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        if let Some(&c) = self.by_peer.get(&peer) {
            if self.conns.contains_key(&c.0) {
                return Ok(c);
            }
        }
        self.open(peer)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.conns.get(&conn.0).map(|c| c.peer)
    }

    /// The listening address (`0.0.0.0:0` for a datapath that does not listen).
    fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }
}

impl Receive for TcpDatapath {
    /// Reads what arrived and hands over the complete requests that have room for their
    /// replies (held ones first), closes what is done, and checks the timeouts. The requests
    /// of one call must be answered (their replies queued) before the next call: the room
    /// reserved for their replies lapses then.
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        let before = out.len();
        self.end_burst();
        if self.events.is_empty() {
            self.epoll.wait(0, &mut self.events)?;
        }
        let events = std::mem::take(&mut self.events);
        let hup = (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32;
        for &(token, ev) in &events {
            if token == LISTENER {
                self.accept_all();
                continue;
            }
            let id = token as u32;
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            // EPOLLERR with zero-copy sends in flight is (usually) their completions; without,
            // a socket error the next read reports.
            let mut read = ev & (sys::IN | hup) != 0;
            if ev & libc::EPOLLERR as u32 != 0 && c.zc.sends() > 0 && self.uring.is_none() {
                let n = Self::read_completions_of(c, &mut self.completions, &mut self.stats);
                self.zc_held -= n;
                self.completed += n;
                read = ev & (sys::IN | libc::EPOLLHUP as u32) != 0;
            }
            let rx_closed = c.input != Input::Open;
            if (ev & sys::OUT != 0 || (ev & hup != 0 && rx_closed))
                && self.write_conn(id, true).is_err()
            {
                self.closing.push((id, Close::Failed));
                continue;
            }
            if read {
                match self.conns.get(&id) {
                    Some(c) if c.readable() || c.linger_until.is_some() => self.read_conn(id, out),
                    Some(_) => self.hung_up(id, ev),
                    None => {}
                }
            }
        }
        self.events = events;
        self.events.clear();
        if self.uring.is_some() {
            // Notifications do not wake epoll: collect them here.
            let n = self.poll_uring();
            self.completed += n;
        }
        self.deliver_ready(out);
        self.housekeeping();
        self.close_pending();
        Ok(out.len() - before)
    }

    fn counters(&self) -> DropCounters {
        let mut c = self.counters;
        c.delivered = self.requests.delivered();
        c
    }
}

impl TcpDatapath {
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
        // The reply to a request handed over has its room reserved: queued whatever the
        // queue holds. Other sends may fill only the room no reply has reserved.
        if !c.inbox.reply() && c.tx.bytes() + HEADER_LEN + len > c.room.unreserved(c.inbox.owed()) {
            self.stats.tx_full += 1;
            return Err(SendError::Full);
        }
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn.0);
        }
        Ok(c)
    }

    fn zc_threshold(&self) -> usize {
        self.cfg.zero_copy_threshold.unwrap_or(usize::MAX)
    }
}

impl Transmit for TcpDatapath {
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
            // The head alone is larger than a pinned item (a huge copy area): copy the message.
            let bytes = obj.object_to_vec();
            return self.send_copy(conn, msg, &bytes);
        };
        let thr = self.zc_threshold();
        let c = self.conn_for_send(conn, f.total)?;
        self.queued += f.queue(&mut c.tx, thr);
        Ok(())
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        let (head, total) = txq::sga_header(&self.mem, msg, entries)?;
        let thr = self.zc_threshold();
        let c = self.conn_for_send(conn, total)?;
        let before = c.tx.len();
        c.tx.push(head, false);
        for e in entries {
            c.tx.push(e.clone(), e.len() >= thr);
        }
        self.queued += c.tx.len() - before;
        Ok(())
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        let bufs = txq::framed_copy(&self.mem, msg, data)?;
        let c = self.conn_for_send(conn, data.len())?;
        let before = c.tx.len();
        for b in bufs {
            c.tx.push(b, false);
        }
        self.queued += c.tx.len() - before;
        Ok(())
    }

    /// Writes every connection's queue (one gathered `sendmsg` each, more when the kernel
    /// takes part). What a full socket buffer leaves queued is written when the socket is
    /// writable again, from [`Receive::recv_burst`]; nothing is dropped. A connection whose
    /// send fails (reset, broken pipe) is closed and counted ([`TcpStats::failed`]); that is
    /// not an error of the flush.
    fn flush(&mut self) -> Result<(), SendError> {
        let dirty = std::mem::take(&mut self.dirty);
        let blocked = if self.uring.is_some() && dirty.len() > 1 {
            self.send_zc_batch(&dirty)
        } else {
            std::collections::HashSet::new()
        };
        for &id in &dirty {
            if self.write_conn(id, !blocked.contains(&id)).is_err() {
                self.closing.push((id, Close::Failed));
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        self.close_pending();
        Ok(())
    }
}

impl Completions for TcpDatapath {
    /// Buffers released since the last call: those of copying sends (released when the
    /// kernel took their bytes) and those of zero-copy sends whose completions have arrived
    /// (read here from the error queues).
    fn poll_completions(&mut self) -> usize {
        let n = self.poll_zero_copy();
        std::mem::take(&mut self.completed) + n
    }

    /// Buffers queued and not yet sent, plus those held for zero-copy sends in flight.
    fn in_flight(&self) -> usize {
        self.queued + self.zc_held
    }
}

impl Drop for TcpDatapath {
    /// Closes every connection. Buffers of zero-copy sends still in flight are waited for (up
    /// to 1 s); any whose completion never arrives are leaked rather than reused, since the
    /// kernel may still read them.
    fn drop(&mut self) {
        let ids: Vec<u32> = self.conns.keys().copied().collect();
        self.closing
            .extend(ids.into_iter().map(|id| (id, Close::Done)));
        self.close_pending();
        let deadline = Instant::now() + Duration::from_secs(1);
        while !self.draining.is_empty() && Instant::now() < deadline {
            self.poll_zero_copy();
            if !self.draining.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for c in self.draining.drain(..) {
            std::mem::forget(c.zc);
        }
    }
}

impl std::fmt::Debug for TcpDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpDatapath")
            .field("local", &self.local)
            .field("connections", &self.conns.len())
            .field("counters", &self.counters)
            .field("stats", &self.stats)
            .finish()
    }
}
