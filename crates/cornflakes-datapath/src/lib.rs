//! # Cornflakes datapath interface
//!
//! The interface between the runtime and a datapath: a kernel UDP socket, the in-process
//! loopback NIC, AF_XDP, or a kernel-bypass NIC driver. See `docs/stack.md`. The runtime
//! (`cornflakes-runtime`, library `cornflakes`) re-exports this crate as `cornflakes::datapath`
//! and its main types at its root.
//!
//! The interface is split into small traits, one per capability, with no optional methods:
//!
//! - [`DatapathMemory`]: the pinned memory the datapath sends from and receives into. Each
//!   region's [`registration`](cornflakes_mem::Region::registration) holds this datapath's
//!   handle.
//! - [`Connect`]: turns a peer address into a [`ConnId`] (a per-connection header template).
//! - [`Receive`]: a burst of received messages ([`RxMsg`]), each a zero-copy [`RcBuf`] of the
//!   payload after the framing header, and the drop counters ([`DropCounters`]).
//! - [`Transmit`]: serialize-and-send ([`Transmit::send_object`]), a prepared scatter-gather
//!   array ([`Transmit::send_sga`]), contiguous bytes ([`Transmit::send_copy`]), and an explicit
//!   [`Transmit::flush`] that ends a batch. Capabilities are data: [`Transmit::mtu`],
//!   [`Transmit::max_segments`], [`Transmit::max_message_len`]; what the sends handed over by
//!   reference and what was copied is [`Transmit::send_counters`] ([`SendCounters`]), where a
//!   datapath chooses that per send.
//! - [`Completions`]: reclaims transmit descriptors the device is done with, dropping the
//!   [`RcBuf`]s they kept alive.
//!
//! [`Datapath`] is all five together (blanket-implemented). [`DelegateDatapath`] gives a type
//! the five traits of a datapath it wraps. The traits take generic objects
//! (`send_object<O: SendObject>`), so a datapath is chosen at compile time, not behind `dyn`.
//!
//! # Objects
//! A datapath sends any [`SendObject`]: its [`Sizes`], its head (HEADER AREA and COPY AREA)
//! written into a buffer, and its zero-copy leaves ([`SendPlan`] keeps them together, with a
//! [`Demote`] plan when the device takes fewer entries). The runtime's objects
//! (`cornflakes::CornflakesObj`, all generated code) implement it; this crate needs no object
//! code, only pinned memory (`cornflakes-mem`).
//!
//! # Buffer ownership on send
//! A send takes a counted reference (reference count + 1, an [`RcBuf`]) to every buffer it
//! posts and keeps it until the device completes that descriptor. The application may drop or replace its buffers as soon
//! as the send call returns; a pinned buffer is never written while any reference exists, so
//! the bytes on the wire are the bytes at the time of the call.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::io;
use std::net::SocketAddrV4;

use cornflakes_mem::{AllocError, PinnedMemory, RcBuf};

mod object;
mod send;

pub use object::{BufferTooSmall, Demote, SendObject, SizedLeaf, Sizes};
pub use send::SendPlan;

/// Why a kernel-socket datapath (`datapath-socket`, `datapath-tcp`) could not be created.
#[derive(Debug)]
pub enum SetupError {
    /// A socket, epoll or io_uring instance could not be created, bound or configured.
    Io {
        /// Which datapath failed ("UDP socket", "TCP").
        datapath: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
    /// The pinned memory could not be created.
    Memory(AllocError),
}

impl SetupError {
    /// `map_err` adapter: an I/O error of datapath `datapath`.
    pub fn io(datapath: &'static str) -> impl Fn(io::Error) -> SetupError {
        move |source| SetupError::Io { datapath, source }
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Io { datapath, source } => {
                write!(f, "{datapath} datapath setup failed: {source}")
            }
            SetupError::Memory(e) => write!(f, "pinned memory setup failed: {e}"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SetupError::Io { source, .. } => Some(source),
            SetupError::Memory(e) => Some(e),
        }
    }
}

/// A connection (a peer address and its prepared packet header) of one datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// The message identity carried by the framing header of every packet: the sender's
/// incarnation, an id chosen by the sender (requests and their responses share both) and an
/// application-defined type.
///
/// The incarnation names one life of a client: a random non-zero 64-bit number it picks once
/// per process and keeps across reconnects (`cornflakes-rpc`'s `ids` module), so a server can
/// tell a retry of an earlier request from a new request that reuses its id. 0 means "no
/// identity" (a client that picked none; [`Msg::new`]). A server replying with a received
/// message's `msg` echoes all three (`docs/wire-format.md`, "Packet framing").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Msg {
    /// The sender's incarnation (0: anonymous).
    pub incarnation: u64,
    /// Message id (never reused by a sender within one incarnation).
    pub id: u32,
    /// Message type (application-defined, e.g. which RPC).
    pub ty: u16,
}

impl Msg {
    /// A message header with id `id` and type `ty`, from an anonymous sender (incarnation 0).
    pub const fn new(id: u32, ty: u16) -> Msg {
        Msg {
            incarnation: 0,
            id,
            ty,
        }
    }

    /// The same header sent by incarnation `incarnation`.
    pub const fn with_incarnation(self, incarnation: u64) -> Msg {
        Msg {
            incarnation,
            ..self
        }
    }
}

/// One received message.
#[derive(Debug)]
pub struct RxMsg {
    /// The connection the message came from (created on first contact).
    pub conn: ConnId,
    /// The sender's IPv4 address and UDP port.
    pub peer: SocketAddrV4,
    /// Incarnation, id and type from the framing header.
    pub msg: Msg,
    /// The message bytes (after the framing header). For a single-frame message this is a
    /// view into the receive buffer itself; a message reassembled from several frames is one
    /// new pinned buffer holding all of them.
    pub data: RcBuf,
}

/// Why a send failed. Nothing was queued when a send returns an error.
#[derive(Debug)]
#[non_exhaustive]
pub enum SendError {
    /// The connection id is not one this datapath handed out.
    UnknownConn(ConnId),
    /// The peer's link-layer address is still being resolved (ARP); poll and retry. A
    /// resolution that gave up (counted in [`DropCounters::arp_failures`]) is restarted by
    /// calling [`Connect::connect`] again.
    Resolving(ConnId),
    /// The message is longer than the datapath can send ([`Transmit::max_message_len`]).
    TooLarge {
        /// Length of the message.
        len: usize,
        /// The datapath's limit.
        max: usize,
    },
    /// A scatter-gather array has more entries than one send can carry.
    TooManySegments {
        /// Entries in the array.
        entries: usize,
        /// The most one send carries.
        max: usize,
    },
    /// No transmit descriptors are free: flush, poll completions, then retry.
    Full,
    /// A transmit or header buffer could not be allocated.
    Alloc(AllocError),
    /// The buffer given for an object's head was shorter than the plan needs (a datapath
    /// that sized it from something other than [`SendPlan::head_len`]).
    BufferTooSmall(BufferTooSmall),
    /// The operating system refused the send.
    Io(io::Error),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::UnknownConn(c) => write!(f, "unknown connection {}", c.0),
            SendError::Resolving(c) => {
                write!(f, "connection {}: peer address still being resolved", c.0)
            }
            SendError::TooLarge { len, max } => {
                write!(f, "message of {len} bytes exceeds the limit of {max} bytes")
            }
            SendError::TooManySegments { entries, max } => {
                write!(
                    f,
                    "{entries} scatter-gather entries exceed the limit of {max}"
                )
            }
            SendError::Full => write!(f, "transmit queue full"),
            SendError::Alloc(e) => write!(f, "transmit buffer allocation failed: {e}"),
            SendError::BufferTooSmall(e) => write!(f, "transmit buffer too small: {e}"),
            SendError::Io(e) => write!(f, "send failed: {e}"),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Alloc(e) => Some(e),
            SendError::Io(e) => Some(e),
            SendError::BufferTooSmall(e) => Some(e),
            _ => None,
        }
    }
}

impl From<AllocError> for SendError {
    fn from(e: AllocError) -> Self {
        SendError::Alloc(e)
    }
}

impl From<BufferTooSmall> for SendError {
    fn from(e: BufferTooSmall) -> Self {
        SendError::BufferTooSmall(e)
    }
}

impl From<io::Error> for SendError {
    fn from(e: io::Error) -> Self {
        SendError::Io(e)
    }
}

/// Received frames dropped, by reason, and a few receive/transmit totals. Every counter only
/// grows. A datapath whose lower layers are done by the kernel (the socket datapath) leaves the
/// link/IP counters at zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DropCounters {
    /// Messages delivered to the application.
    pub delivered: u64,
    /// Frames shorter than a header, or whose length fields point past the frame.
    pub truncated: u64,
    /// IPv4 header or UDP checksum mismatch.
    pub bad_checksum: u64,
    /// EtherType neither IPv4 nor ARP.
    pub non_ipv4: u64,
    /// IPv4 protocol other than UDP.
    pub non_udp: u64,
    /// IPv4 fragments (more-fragments flag or non-zero offset); reassembly is not supported.
    pub ip_fragment: u64,
    /// IPv4 headers with options (IHL > 5), not supported.
    pub ip_options: u64,
    /// IPv4 version other than 4, or TTL 0, or other malformed IP header fields.
    pub bad_ip_header: u64,
    /// Destination MAC or IP address not ours (and not broadcast, for ARP).
    pub wrong_dst: u64,
    /// UDP destination port not bound.
    pub unknown_port: u64,
    /// Framing header malformed, or segment headers inconsistent with each other (forged).
    pub bad_framing: u64,
    /// Duplicate segment of a message being reassembled.
    pub duplicate_segment: u64,
    /// Messages abandoned because their segments did not all arrive in time.
    pub reassembly_timeout: u64,
    /// Segments dropped because reassembly hit its memory or message-count limit.
    pub reassembly_overflow: u64,
    /// Frames dropped because no receive buffer could be allocated.
    pub no_rx_buffers: u64,
    /// Messages from a new peer dropped because every connection-table entry was in use by
    /// the messages being received (the table evicts idle entries otherwise).
    pub conn_table_full: u64,
    /// Idle connection-table entries evicted to make room for a new peer (not a drop).
    pub conn_evicted: u64,
    /// ARP packets that were malformed or not for Ethernet/IPv4.
    pub bad_arp: u64,
    /// ARP requests for our address that were answered.
    pub arp_replies_sent: u64,
    /// ARP resolutions that gave up after the last retry.
    pub arp_failures: u64,
}

impl DropCounters {
    /// Adds `other`'s counts to these (summing the counters of several cores' datapaths).
    pub fn add(&mut self, other: &DropCounters) {
        let DropCounters {
            delivered,
            truncated,
            bad_checksum,
            non_ipv4,
            non_udp,
            ip_fragment,
            ip_options,
            bad_ip_header,
            wrong_dst,
            unknown_port,
            bad_framing,
            duplicate_segment,
            reassembly_timeout,
            reassembly_overflow,
            no_rx_buffers,
            conn_table_full,
            conn_evicted,
            bad_arp,
            arp_replies_sent,
            arp_failures,
        } = *other;
        self.delivered += delivered;
        self.truncated += truncated;
        self.bad_checksum += bad_checksum;
        self.non_ipv4 += non_ipv4;
        self.non_udp += non_udp;
        self.ip_fragment += ip_fragment;
        self.ip_options += ip_options;
        self.bad_ip_header += bad_ip_header;
        self.wrong_dst += wrong_dst;
        self.unknown_port += unknown_port;
        self.bad_framing += bad_framing;
        self.duplicate_segment += duplicate_segment;
        self.reassembly_timeout += reassembly_timeout;
        self.reassembly_overflow += reassembly_overflow;
        self.no_rx_buffers += no_rx_buffers;
        self.conn_table_full += conn_table_full;
        self.conn_evicted += conn_evicted;
        self.bad_arp += bad_arp;
        self.arp_replies_sent += arp_replies_sent;
        self.arp_failures += arp_failures;
    }

    /// Sum of all drop counters (everything except `delivered`, `conn_evicted` and
    /// `arp_replies_sent`).
    pub fn total_drops(&self) -> u64 {
        self.truncated
            + self.bad_checksum
            + self.non_ipv4
            + self.non_udp
            + self.ip_fragment
            + self.ip_options
            + self.bad_ip_header
            + self.wrong_dst
            + self.unknown_port
            + self.bad_framing
            + self.duplicate_segment
            + self.reassembly_timeout
            + self.reassembly_overflow
            + self.no_rx_buffers
            + self.conn_table_full
            + self.bad_arp
    }
}

/// What a datapath's sends handed the kernel by reference and what was copied, for the datapaths
/// that choose per send (kernel TCP: `MSG_ZEROCOPY` or io_uring `SENDMSG_ZC` for large
/// zero-copy fields, a copying `sendmsg` otherwise; Demikernel: every push copied). Every
/// counter only grows. Shown in the servers' counter lines as ` zc_sends=… zc_bytes=…
/// zc_copied_sends=… zc_copied_bytes=… copied_sends=… copied_bytes=…` ([`fmt::Display`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendCounters {
    /// Sends made zero-copy (the kernel refers to the buffers until it reports them done).
    pub zero_copy_sends: u64,
    /// Bytes those sends carried.
    pub zero_copy_bytes: u64,
    /// Of the zero-copy sends completed, those the kernel reported it copied after all
    /// (loopback always does).
    pub zero_copy_copied_sends: u64,
    /// Bytes those sends carried.
    pub zero_copy_copied_bytes: u64,
    /// Sends whose bytes were copied during the call (a copying `sendmsg`; a Demikernel push).
    pub copied_sends: u64,
    /// Bytes those sends carried.
    pub copied_bytes: u64,
}

impl SendCounters {
    /// The keys of [`fmt::Display`], in order.
    pub const KEYS: [&'static str; 6] = [
        "zc_sends",
        "zc_bytes",
        "zc_copied_sends",
        "zc_copied_bytes",
        "copied_sends",
        "copied_bytes",
    ];

    fn fields(&mut self) -> [&mut u64; 6] {
        [
            &mut self.zero_copy_sends,
            &mut self.zero_copy_bytes,
            &mut self.zero_copy_copied_sends,
            &mut self.zero_copy_copied_bytes,
            &mut self.copied_sends,
            &mut self.copied_bytes,
        ]
    }

    /// Adds `other`'s counts to these (several cores' datapaths).
    pub fn add(&mut self, other: &SendCounters) {
        let mut o = *other;
        for (a, b) in self.fields().into_iter().zip(o.fields()) {
            *a += *b;
        }
    }

    /// Reads one ` key=value` pair [`fmt::Display`] wrote; false when `key` is not one of these
    /// counters.
    pub fn parse_field(&mut self, key: &str, value: u64) -> bool {
        match Self::KEYS.iter().position(|k| *k == key) {
            Some(i) => {
                *self.fields()[i] = value;
                true
            }
            None => false,
        }
    }
}

impl fmt::Display for SendCounters {
    /// ` zc_sends=N zc_bytes=N zc_copied_sends=N zc_copied_bytes=N copied_sends=N
    /// copied_bytes=N` (each pair with a leading space).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut c = *self;
        for (k, v) in Self::KEYS.iter().zip(c.fields()) {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// Access to the datapath's pinned memory.
pub trait DatapathMemory {
    /// The memory transmit and receive buffers come from. Applications allocate values they
    /// want to send zero-copy here; each region's `registration()` holds this datapath's
    /// handle for it (e.g. a UMEM offset), or `None` when the datapath needs none.
    fn memory(&self) -> &PinnedMemory;
}

/// Connection setup.
pub trait Connect {
    /// The connection to `peer`, creating it (and its header template) if new. For link-layer
    /// datapaths this also starts address resolution; sends return
    /// [`SendError::Resolving`] until it completes.
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId>;

    /// The peer of `conn`, if `conn` exists.
    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4>;

    /// Our IPv4 address and UDP port.
    fn local_addr(&self) -> SocketAddrV4;

    /// Whether sends on `conn` can go out: its peer's link-layer address is known. Datapaths
    /// without address resolution (kernel sockets, streams) are always resolved; link-layer
    /// ones answer `false` from [`Connect::connect`] until the ARP reply came in (receiving
    /// processes it). A load generator waits for this before its clock starts.
    fn resolved(&self, conn: ConnId) -> bool {
        let _ = conn;
        true
    }

    /// One connection to each of `peers`, in order (e.g. to each core of a server that runs
    /// one port per core). An error when `peers` is empty or a connection fails.
    fn connect_all(&mut self, peers: &[SocketAddrV4]) -> io::Result<Vec<ConnId>> {
        if peers.is_empty() {
            return Err(io::Error::other("no peer to connect to"));
        }
        peers.iter().map(|p| self.connect(*p)).collect()
    }
}

/// Receiving.
pub trait Receive {
    /// Polls the device once: receives up to one burst of frames, appends every complete
    /// message to `out`, and does the housekeeping the poll drives (ARP answers and retries,
    /// reassembly timeouts). Returns the number of messages appended. Never blocks.
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize>;

    /// The drop counters so far.
    fn counters(&self) -> DropCounters;
}

/// Transmitting. Sends are queued until [`flush`](Self::flush) (or until the queue fills, when a
/// datapath may flush on its own); all sends of one connection leave in order.
pub trait Transmit {
    /// The IP-level MTU: the largest IPv4 packet one frame carries.
    fn mtu(&self) -> usize;

    /// The most scatter-gather entries (descriptors) one frame may have, header included.
    fn max_segments(&self) -> usize;

    /// The largest message (object) this datapath sends; larger objects fail with
    /// [`SendError::TooLarge`]. Objects above one frame are segmented.
    fn max_message_len(&self) -> usize;

    /// Serialize-and-send (paper §3.2.3): writes the packet headers, the object's header area
    /// and copy area into one transmit buffer, then posts each zero-copy entry as its own
    /// descriptor straight from [`SendObject::for_each_object_leaf`]. When the object has more
    /// zero-copy entries than the device takes, the smallest are demoted to copies
    /// ([`Demote::plan`]).
    fn send_object<O: SendObject>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError>;

    /// Sends a prepared scatter-gather array: the message is the concatenation of `entries`
    /// (for the "without serialize-and-send" ablation, see [`object_to_sga`]).
    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError>;

    /// Sends contiguous bytes (copied into transmit buffers).
    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError>;

    /// Hands every queued frame to the device (one doorbell / system call per batch).
    fn flush(&mut self) -> Result<(), SendError>;

    /// What the sends so far handed over by reference and what was copied, for a datapath
    /// that chooses per send (kernel TCP, Demikernel); `None` for one without the notion (a
    /// NIC's descriptors always reference, a UDP socket always copies).
    fn send_counters(&self) -> Option<SendCounters>;
}

/// Transmit completions.
pub trait Completions {
    /// Reclaims the descriptors the device has finished with, dropping the buffer references
    /// they held. Returns how many descriptors were reclaimed.
    fn poll_completions(&mut self) -> usize;

    /// Descriptors posted and not yet completed (queued or in the device).
    fn in_flight(&self) -> usize;
}

/// A complete datapath.
pub trait Datapath: DatapathMemory + Connect + Receive + Transmit + Completions {}

impl<T: DatapathMemory + Connect + Receive + Transmit + Completions> Datapath for T {}

/// A datapath that is another datapath with an API of its own around it: implementing this
/// gives a type the five datapath traits, each forwarded to [`inner`](Self::inner). The NIC
/// datapaths use it to keep their own names, constructors and statistics around the stack's
/// one Ethernet datapath (`cornflakes_stack::device::EthDatapath`), so the traits are
/// implemented once there instead of once per NIC.
pub trait DelegateDatapath {
    /// The datapath that does the work.
    type Inner: Datapath;

    /// The datapath that does the work.
    fn inner(&self) -> &Self::Inner;

    /// The datapath that does the work, mutably.
    fn inner_mut(&mut self) -> &mut Self::Inner;
}

impl<T: DelegateDatapath> DatapathMemory for T {
    #[inline]
    fn memory(&self) -> &PinnedMemory {
        self.inner().memory()
    }
}

impl<T: DelegateDatapath> Connect for T {
    #[inline]
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        self.inner_mut().connect(peer)
    }

    #[inline]
    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.inner().peer_addr(conn)
    }

    #[inline]
    fn local_addr(&self) -> SocketAddrV4 {
        self.inner().local_addr()
    }

    #[inline]
    fn connect_all(&mut self, peers: &[SocketAddrV4]) -> io::Result<Vec<ConnId>> {
        self.inner_mut().connect_all(peers)
    }

    #[inline]
    fn resolved(&self, conn: ConnId) -> bool {
        self.inner().resolved(conn)
    }
}

impl<T: DelegateDatapath> Receive for T {
    #[inline]
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        self.inner_mut().recv_burst(out)
    }

    #[inline]
    fn counters(&self) -> DropCounters {
        self.inner().counters()
    }
}

impl<T: DelegateDatapath> Transmit for T {
    #[inline]
    fn mtu(&self) -> usize {
        self.inner().mtu()
    }

    #[inline]
    fn max_segments(&self) -> usize {
        self.inner().max_segments()
    }

    #[inline]
    fn max_message_len(&self) -> usize {
        self.inner().max_message_len()
    }

    #[inline]
    fn send_object<O: SendObject>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        self.inner_mut().send_object(conn, msg, obj)
    }

    #[inline]
    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        self.inner_mut().send_sga(conn, msg, entries)
    }

    #[inline]
    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.inner_mut().send_copy(conn, msg, data)
    }

    #[inline]
    fn flush(&mut self) -> Result<(), SendError> {
        self.inner_mut().flush()
    }

    #[inline]
    fn send_counters(&self) -> Option<SendCounters> {
        self.inner().send_counters()
    }
}

impl<T: DelegateDatapath> Completions for T {
    #[inline]
    fn poll_completions(&mut self) -> usize {
        self.inner_mut().poll_completions()
    }

    #[inline]
    fn in_flight(&self) -> usize {
        self.inner().in_flight()
    }
}

/// The demotion plan for sending `obj` (whose [`object_sizes`](SendObject::object_sizes) the
/// caller has already computed) with at most `max_zero_copy` zero-copy entries, and the bytes it moves into
/// the copy area. Allocates only when entries must be demoted.
#[inline]
pub fn plan_demote<O: SendObject + ?Sized>(
    obj: &O,
    sizes: &Sizes,
    max_zero_copy: usize,
) -> (Demote, usize) {
    if sizes.zero_copy_count <= max_zero_copy {
        return (Demote::NONE, 0);
    }
    Demote::plan(&obj.object_leaf_lens(), max_zero_copy)
}

/// Turns an object into a scatter-gather array the way a stack without serialize-and-send
/// must: a new pinned buffer with the header and copy areas, then one reference per zero-copy
/// entry, collected into a new vector (at most `max_entries` entries; smaller zero-copy
/// entries are demoted to copies to fit). Used by the ablation that sends with
/// [`Transmit::send_sga`].
pub fn object_to_sga<O: SendObject + ?Sized>(
    obj: &O,
    mem: &PinnedMemory,
    max_entries: usize,
) -> Result<Vec<RcBuf>, AllocError> {
    let plan = SendPlan::new(obj, max_entries.saturating_sub(1));
    let head_len = plan.head_len();
    let mut out = Vec::with_capacity(1 + plan.zero_copy_entries());
    if head_len > 0 {
        let mut head = mem.alloc(head_len)?;
        // `alloc(head_len)` gives exactly `head_len` bytes: the head fits.
        if let Ok(n) = plan.write_head(&mut head[..]) {
            head.set_len(n);
            out.push(head.freeze());
        }
    }
    plan.for_each_zero_copy(|b| out.push(b.to_rcbuf()));
    Ok(out)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_setup_error_names_the_datapath_and_keeps_the_cause() {
        use std::error::Error;
        let e = SetupError::io("TCP")(io::Error::other("address in use"));
        assert_eq!(e.to_string(), "TCP datapath setup failed: address in use");
        assert_eq!(e.source().unwrap().to_string(), "address in use");
    }

    #[test]
    fn drop_counters_of_several_cores_add_up_field_by_field() {
        let mut a = DropCounters {
            delivered: 10,
            truncated: 1,
            bad_framing: 2,
            arp_replies_sent: 3,
            ..DropCounters::default()
        };
        let b = DropCounters {
            delivered: 5,
            bad_framing: 4,
            unknown_port: 7,
            arp_failures: 1,
            ..DropCounters::default()
        };
        a.add(&b);
        assert_eq!(
            a,
            DropCounters {
                delivered: 15,
                truncated: 1,
                bad_framing: 6,
                unknown_port: 7,
                arp_replies_sent: 3,
                arp_failures: 1,
                ..DropCounters::default()
            }
        );
        assert_eq!(a.total_drops(), 1 + 6 + 7);
    }

    #[test]
    fn send_counters_print_add_and_read_back() {
        let a = SendCounters {
            zero_copy_sends: 2,
            zero_copy_bytes: 40_000,
            zero_copy_copied_sends: 1,
            zero_copy_copied_bytes: 20_000,
            copied_sends: 7,
            copied_bytes: 900,
        };
        let line = a.to_string();
        assert_eq!(
            line,
            " zc_sends=2 zc_bytes=40000 zc_copied_sends=1 zc_copied_bytes=20000 copied_sends=7 copied_bytes=900"
        );
        let mut back = SendCounters::default();
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap();
            assert!(back.parse_field(k, v.parse().unwrap()), "{k}");
        }
        assert_eq!(back, a);
        assert!(!back.parse_field("received", 1));
        back.add(&a);
        assert_eq!((back.zero_copy_sends, back.copied_bytes), (4, 1800));
    }

    #[test]
    fn total_drops_excludes_deliveries_and_replies() {
        let c = DropCounters {
            delivered: 5,
            arp_replies_sent: 2,
            arp_failures: 1,
            truncated: 1,
            bad_framing: 2,
            ..DropCounters::default()
        };
        assert_eq!(c.total_drops(), 3);
        assert!(SendError::Full.to_string().contains("full"));
    }
}
