//! The Cornflakes datapath over Linux kernel TCP (`docs/tcp.md`).
//!
//! A connection is a TCP connection; messages are length-delimited frames on its byte stream
//! (the framing header, [`frame::HEADER_LEN`] bytes, with one segment, then the message;
//! `docs/wire-format.md`, "Stream framing"). [`TcpDatapath`] is the crate's one stream datapath
//! ([`stream::StreamDatapath`], also the Demikernel datapath's in `demikernel/`) over the
//! kernel's sockets ([`sockets::TcpSockets`]): everything is non-blocking and driven by one
//! `epoll` instance per datapath (one per core), polled by [`Receive::recv_burst`]:
//!
//! - **Receive** reads into pinned buffers ([`frame::Deframer`]): a message wholly inside one
//!   read is handed to the application as a view of the receive buffer (zero-copy); a message
//!   cut by the end of a read is gathered into one pinned item sized by the bytes that arrived
//!   (counted in [`StreamStats::gathered`]). An idle connection holds no receive buffer.
//! - **Send** ([`Transmit::send_object`]) queues one pinned buffer with the frame header and
//!   the object's header and copy areas, then one reference per zero-copy field; the
//!   connection's queue leaves with one gathered `sendmsg` per [`Transmit::flush`] (several
//!   when the kernel takes part of it). A send whose iovecs include a zero-copy field at least
//!   [`ZeroCopy::threshold`] long uses `MSG_ZEROCOPY` (or io_uring `SENDMSG_ZC`): the kernel
//!   then refers to the buffers until it reports the send complete, and the datapath keeps
//!   their references until then ([`Completions::poll_completions`]), so a value replaced by
//!   the application during the send never changes the bytes on the wire.
//!   [`Transmit::send_counters`] says what went zero-copy and what the kernel copied.
//! - **Backpressure** ([`flow`]): a request is handed over only when its connection's queue
//!   has room for its reply ([`StreamConfig::reply_reserve`] of [`StreamConfig::tx_limit`]) and
//!   all connections' queues together have it under [`StreamConfig::total_tx_limit`]; that
//!   reply is then never refused. Requests beyond the room wait, in order, and the connection
//!   is not read meanwhile, so a peer that pipelines any number of requests gets every reply
//!   and a peer that never reads stalls only itself, until [`StreamConfig::stall_timeout`]
//!   closes it (its waiting requests never run), or the total cap does (the longest stalled
//!   first).
//! - **Memory** ([`budget`]): a partial frame's buffer grows with the bytes that arrived; all
//!   partial frames together hold at most [`StreamConfig::partial_limit`] (the oldest give way)
//!   and each at most [`StreamConfig::frame_timeout`]; closing connections trims the pinned
//!   pool.
//! - **Bad input**: a frame header that is not a one-segment version-1 header, or announces
//!   more than [`StreamConfig::max_message_len`] bytes, ends that connection's input: the
//!   frames before it are answered, then the connection sends a FIN, lingers and closes
//!   (counted); a reset or end of stream in the middle of a frame drops the partial frame
//!   (counted). Other connections are unaffected.

#![deny(unsafe_code)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod budget;
pub mod flow;
pub mod frame;
pub mod sockets;
pub mod stream;
#[allow(unsafe_code)]
mod sys;
pub mod txq;
#[allow(unsafe_code)]
mod uring;

use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::Duration;

#[cfg(doc)]
use cornflakes_datapath::{Completions, Receive, Transmit};
use cornflakes_mem::PinnedMemory;
use std::net::SocketAddrV4;

pub use cornflakes_datapath::SetupError;
pub use sockets::{SocketStats, TcpSockets};
pub use stream::{
    ByteStream, StreamConfig, StreamDatapath, StreamStats, DEFAULT_LINGER, DEFAULT_MAX_ITEM,
    DEFAULT_PARTIAL_LIMIT, DEFAULT_TIMEOUT, DEFAULT_TOTAL_TX_LIMIT,
};

/// Configuration of a [`TcpDatapath`].
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// The knobs every stream datapath takes (the address, the pinned memory, the limits and
    /// timeouts; the Demikernel datapath takes the same).
    pub stream: StreamConfig,
    /// Which sends are zero-copy, and how.
    pub zero_copy: ZeroCopy,
    /// Most epoll events handled per poll.
    pub events_per_poll: usize,
    /// Kernel socket buffer size to ask for (send and receive), if any.
    pub socket_buffer: Option<usize>,
}

impl TcpConfig {
    /// Defaults: listen on `listen`, the stream limits of [`StreamConfig::new`], `MSG_ZEROCOPY`
    /// for fields of 16 KiB and more ([`ZeroCopy::default`]), 256 events per poll, the kernel's
    /// socket buffers.
    pub fn new(listen: Option<SocketAddrV4>) -> TcpConfig {
        TcpConfig {
            stream: StreamConfig::new(listen),
            zero_copy: ZeroCopy::default(),
            events_per_poll: 256,
            socket_buffer: None,
        }
    }
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
    /// Never: the kernel copies every send during the call.
    Off,
}

impl ZeroCopyMode {
    /// The names [`FromStr`] takes (and [`fmt::Display`] writes), for usage texts.
    pub const NAMES: &'static str = "msg-zerocopy, io-uring or off";
}

impl FromStr for ZeroCopyMode {
    type Err = String;

    fn from_str(s: &str) -> Result<ZeroCopyMode, String> {
        match s {
            "msg-zerocopy" => Ok(ZeroCopyMode::MsgZerocopy),
            "io-uring" => Ok(ZeroCopyMode::IoUring),
            "off" => Ok(ZeroCopyMode::Off),
            _ => Err(format!(
                "unknown TCP zero-copy mode {s:?} ({})",
                ZeroCopyMode::NAMES
            )),
        }
    }
}

impl fmt::Display for ZeroCopyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZeroCopyMode::MsgZerocopy => "msg-zerocopy",
            ZeroCopyMode::IoUring => "io-uring",
            ZeroCopyMode::Off => "off",
        })
    }
}

/// Which sends of a [`TcpDatapath`] are zero-copy (`docs/tcp.md`, "Zero-copy sends"): those
/// whose iovecs include a zero-copy field (a value the application sends by reference) at
/// least `threshold` bytes long, made the [`ZeroCopyMode`] way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroCopy {
    /// How; [`ZeroCopyMode::Off`]: never.
    pub mode: ZeroCopyMode,
    /// The least field length that makes a send zero-copy.
    pub threshold: usize,
}

impl Default for ZeroCopy {
    /// `MSG_ZEROCOPY` for fields of [`DEFAULT_ZERO_COPY_THRESHOLD`] (16 KiB) and more.
    fn default() -> ZeroCopy {
        ZeroCopy {
            mode: ZeroCopyMode::MsgZerocopy,
            threshold: DEFAULT_ZERO_COPY_THRESHOLD,
        }
    }
}

impl ZeroCopy {
    /// No zero-copy send.
    pub const OFF: ZeroCopy = ZeroCopy {
        mode: ZeroCopyMode::Off,
        threshold: usize::MAX,
    };

    /// The least field length that makes a send zero-copy (`usize::MAX` when off).
    pub fn threshold(&self) -> usize {
        match self.mode {
            ZeroCopyMode::Off => usize::MAX,
            _ => self.threshold,
        }
    }
}

impl fmt::Display for ZeroCopy {
    /// `msg-zerocopy for fields of 16384 B and more`, or `off`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            ZeroCopyMode::Off => f.write_str("off"),
            mode => write!(f, "{mode} for fields of {} B and more", self.threshold),
        }
    }
}

/// Default zero-copy threshold (see `docs/tcp.md`, "Zero-copy threshold").
pub const DEFAULT_ZERO_COPY_THRESHOLD: usize = 16 << 10;

/// This datapath's name in [`SetupError::Io`].
const SETUP_IO: &str = "TCP";

/// Counts of the TCP datapath beyond [`DropCounters`](cornflakes_datapath::DropCounters):
/// the stream datapath's, with the sockets' own in [`StreamStats::device`].
pub type TcpStats = StreamStats<SocketStats>;

/// A datapath over Linux kernel TCP: one listening socket (optional), any number of
/// connections, one epoll instance. Not `Send`: one per core. The runtime's datapath traits
/// and the accessors are [`StreamDatapath`]'s.
pub type TcpDatapath = StreamDatapath<TcpSockets>;

impl StreamDatapath<TcpSockets> {
    /// Creates the pinned memory and the epoll instance (and, for [`ZeroCopyMode::IoUring`],
    /// the ring: [`SetupError::Io`] where io_uring is unavailable), and listens on
    /// `cfg.stream.listen`.
    pub fn new(cfg: TcpConfig) -> Result<TcpDatapath, SetupError> {
        let mem = PinnedMemory::new(cfg.stream.memory.clone()).map_err(SetupError::Memory)?;
        let (dev, local) = TcpSockets::new(
            cfg.stream.listen,
            cfg.zero_copy,
            cfg.events_per_poll,
            cfg.socket_buffer,
        )
        .map_err(SetupError::io(SETUP_IO))?;
        Ok(StreamDatapath::with_device(dev, mem, cfg.stream, local))
    }

    /// Zero-copy sends in flight (sent, completion not yet read), all connections.
    pub fn zero_copy_in_flight(&self) -> usize {
        self.device().zero_copy_in_flight()
    }

    /// Waits up to `timeout` for a socket event (a connection, data, room to write, a
    /// completion); returns at once when one is ready, or a held request can be handed over,
    /// and whether so. The events stay for the next [`Receive::recv_burst`]. For a server that
    /// would otherwise spin when idle; the timeouts ([`StreamConfig::stall_timeout`], …) are
    /// enforced by `recv_burst`, so call it at least every few tens of milliseconds.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        if self.has_deliverable() {
            return Ok(true);
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        self.device().wait_ready(ms)
    }
}
