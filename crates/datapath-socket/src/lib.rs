//! The Cornflakes datapath over a kernel UDP socket: unprivileged, and the default datapath
//! of the applications.
//!
//! The kernel does Ethernet, IPv4 and UDP; the Cornflakes framing header (message id, type,
//! segments; `docs/wire-format.md`) still starts every datagram. Sends are queued and leave
//! with one `sendmmsg` per [`Transmit::flush`], each datagram an iovec list pointing straight at
//! pinned buffers: for [`Transmit::send_object`], one buffer holding the framing header and the
//! object's header and copy areas, then one iovec per zero-copy entry, added from inside
//! [`SendObject::for_each_object_leaf`]. The kernel copies during the call, so buffers are
//! released (completed) when the flush returns. Receives use `recvmmsg` into pinned buffers that
//! become the messages' [`RcBuf`]s without a copy. Objects larger than one frame are segmented
//! (cut into MTU-sized datagrams by the kernel with UDP GSO when it is available) and
//! reassembled on receive.

#![deny(unsafe_code)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

#[allow(unsafe_code)]
mod sys;

use std::io;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::time::Instant;

use cornflakes_datapath::{Completions, Connect, DatapathMemory, DropCounters, Receive, Transmit};
use cornflakes_datapath::{ConnId, Msg, RxMsg, SendCounters, SendError, SendObject, SendPlan};
use cornflakes_mem::MemoryConfig;
use cornflakes_mem::{PinnedMemory, PinnedRef, RcBuf, RcBufMut};
use cornflakes_stack::reassembly::{Reassembler, ReassemblyConfig};
use cornflakes_stack::wire::framing;
use cornflakes_stack::ConnTable;
use cornflakes_stack::{Cursor, FramePlan, PieceWalk, IP_OVERHEAD};

use sys::{Datagram, Received, RecvScratch, SendScratch, MAX_GSO_SEGMENTS, MAX_IOV};

/// The IP MTU Cornflakes' programs open their datapaths with unless told otherwise: the apps'
/// `--mtu` default and the C API's socket datapaths. Jumbo frames, so a 4 KiB reply is one
/// datagram. [`SocketConfig::new`] keeps Ethernet's 1500; a receiver's MTU must be at least its
/// senders' (a larger datagram is dropped as `truncated`, and reported once on stderr).
pub const JUMBO_MTU: usize = 9000;

/// Configuration of a [`SocketDatapath`].
#[derive(Clone, Debug)]
pub struct SocketConfig {
    /// Address to bind (port 0 picks one).
    pub bind: SocketAddrV4,
    /// Pinned memory for transmit and receive buffers.
    pub memory: MemoryConfig,
    /// IP MTU the frames are sized for (datagrams carry at most `mtu - 28` bytes); clamped to
    /// at most 65535.
    pub mtu: usize,
    /// Datagrams received per `recvmmsg`.
    pub rx_batch: usize,
    /// Most iovecs per frame (header buffer included).
    pub max_segments: usize,
    /// Most datagrams queued between flushes.
    pub tx_queue: usize,
    /// Largest message sent or accepted (also bounded by the largest pinned item).
    pub max_message_len: usize,
    /// Reassembly limits.
    pub reassembly: ReassemblyConfig,
    /// Use UDP GSO for segmented messages when the kernel supports it.
    pub gso: bool,
    /// Most connections: when full, a new peer's message evicts an idle entry (unanswered
    /// ones first, `cornflakes_stack::conntable`); counted in `conn_evicted`.
    pub max_conns: usize,
    /// Kernel socket buffer size to ask for (send and receive), if any.
    pub socket_buffer: Option<usize>,
}

impl SocketConfig {
    /// Defaults: MTU 1500, batches of 32, 64 iovecs, GSO on, 1 MiB messages (bounded by the
    /// largest pinned item), 4 MiB socket buffers requested.
    pub fn new(bind: SocketAddrV4) -> SocketConfig {
        SocketConfig {
            bind,
            memory: MemoryConfig::default(),
            mtu: 1500,
            rx_batch: 32,
            max_segments: 64,
            tx_queue: 4096,
            max_message_len: 1 << 20,
            reassembly: ReassemblyConfig::default(),
            gso: true,
            max_conns: 65536,
            socket_buffer: Some(4 << 20),
        }
    }
}

pub use cornflakes_datapath::SetupError;

/// This datapath's name in [`SetupError::Io`].
const SETUP_IO: &str = "UDP socket";

/// A datapath over one nonblocking UDP socket.
pub struct SocketDatapath {
    sock: UdpSocket,
    local: SocketAddrV4,
    mem: PinnedMemory,
    cfg: SocketConfig,
    conns: ConnTable<()>,
    reasm: Reassembler,
    counters: DropCounters,
    gso: bool,
    rx_bufs: Vec<RcBufMut>,
    rx_meta: Vec<Received>,
    rx_scratch: RecvScratch,
    tx_bufs: Vec<RcBuf>,
    tx_dgrams: Vec<Datagram>,
    tx_scratch: SendScratch,
    completed: usize,
    tx_errors: u64,
    /// Whether a datagram larger than the receive buffers was reported on stderr yet.
    told_truncated: bool,
}

/// Bytes of the framing header.
const FH: usize = framing::HEADER_LEN;

/// What a datapath at `local` with IP MTU `mtu` says, once, when a datagram from `from` was
/// larger than its receive buffers: the sender's MTU is larger, and how to fix it. Every such
/// drop is counted (`truncated`); only the first is told, so a flood cannot fill a log.
pub fn truncation_notice(local: SocketAddrV4, from: SocketAddrV4, mtu: usize) -> String {
    format!(
        "cornflakes: the socket datapath at {local} dropped a datagram from {from} larger \
         than its receive buffers (IP MTU {mtu}): the sender uses a larger MTU. Open this \
         side with the sender's MTU (the apps' --mtu, whose default is {JUMBO_MTU}; \
         SocketConfig::mtu in Rust; cf_socket_opts.mtu in C). Further drops are only counted \
         (`truncated`)."
    )
}

impl SocketDatapath {
    /// Binds the socket and creates the pinned memory.
    pub fn new(cfg: SocketConfig) -> Result<SocketDatapath, SetupError> {
        let sock = UdpSocket::bind(cfg.bind).map_err(SetupError::io(SETUP_IO))?;
        sock.set_nonblocking(true)
            .map_err(SetupError::io(SETUP_IO))?;
        let local = match sock.local_addr().map_err(SetupError::io(SETUP_IO))? {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => {
                return Err(SetupError::io(SETUP_IO)(io::Error::other(
                    "bound an IPv6 address",
                )))
            }
        };
        let mem = PinnedMemory::new(cfg.memory.clone()).map_err(SetupError::Memory)?;
        let gso = cfg.gso && sys::gso_supported(sock.as_fd());
        if let Some(bytes) = cfg.socket_buffer {
            sys::set_buffer_sizes(sock.as_fd(), bytes);
        }
        let mut cfg = cfg;
        cfg.max_message_len = cfg.max_message_len.min(mem.max_item_size());
        cfg.max_segments = cfg.max_segments.clamp(1, MAX_IOV / 4);
        // Datagram lengths are 16-bit: keep frames inside one IPv4 packet.
        cfg.mtu = cfg.mtu.clamp(IP_OVERHEAD + 1, u16::MAX as usize);
        let mut rcfg = cfg.reassembly;
        rcfg.max_message_len = rcfg.max_message_len.min(cfg.max_message_len);
        Ok(SocketDatapath {
            sock,
            local,
            mem,
            reasm: Reassembler::new(rcfg),
            counters: DropCounters::default(),
            gso,
            conns: ConnTable::new(cfg.max_conns),
            rx_bufs: Vec::with_capacity(cfg.rx_batch),
            rx_meta: Vec::with_capacity(cfg.rx_batch),
            rx_scratch: RecvScratch::default(),
            tx_bufs: Vec::new(),
            tx_dgrams: Vec::new(),
            tx_scratch: SendScratch::default(),
            completed: 0,
            tx_errors: 0,
            told_truncated: false,
            cfg,
        })
    }

    /// Whether segmented messages are sent with UDP GSO.
    pub fn gso_enabled(&self) -> bool {
        self.gso
    }

    /// Datagrams the kernel refused (dropped at flush).
    pub fn tx_errors(&self) -> u64 {
        self.tx_errors
    }

    /// Receive buffers allocated and waiting for datagrams.
    pub fn rx_buffers_held(&self) -> usize {
        self.rx_bufs.len()
    }

    /// Datagrams queued and not yet flushed.
    pub fn queued_datagrams(&self) -> usize {
        self.tx_dgrams.len()
    }

    /// The underlying socket (e.g. to wait for readability with `poll`).
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Message bytes per frame.
    fn frame_room(&self) -> usize {
        self.cfg.mtu.saturating_sub(IP_OVERHEAD).max(1)
    }

    /// The peer to send to on `conn`; sending confirms the connection (kept over unanswered
    /// ones when the table is full).
    fn peer(&mut self, conn: ConnId) -> Result<SocketAddrV4, SendError> {
        self.conns.confirm(conn);
        self.conns.peer(conn).ok_or(SendError::UnknownConn(conn))
    }

    fn plan(&self, total: usize) -> Result<FramePlan, SendError> {
        let max = self.cfg.max_message_len;
        if total > max {
            return Err(SendError::TooLarge { len: total, max });
        }
        FramePlan::new(total, self.frame_room()).map_err(|e| SendError::TooLarge {
            len: e.len,
            max: e.max,
        })
    }

    fn check_room(&self, datagrams: usize) -> Result<(), SendError> {
        if self.tx_dgrams.len() + datagrams > self.cfg.tx_queue {
            Err(SendError::Full)
        } else {
            Ok(())
        }
    }

    /// Queues the frames of a message whose bytes are the pieces `walk` produces: one framing
    /// header buffer per frame, then slices of the pieces. With GSO the frames of one message
    /// form one datagram the kernel cuts at `FH + per_frame` bytes.
    fn queue_pieces(
        &mut self,
        peer: SocketAddrV4,
        msg: Msg,
        plan: FramePlan,
        pieces: usize,
        walk: &mut PieceWalk<'_>,
    ) -> Result<(), SendError> {
        let use_gso = self.gso
            && plan.frames > 1
            && plan.frames <= MAX_GSO_SEGMENTS
            && plan.total + FH * plan.frames <= 65_000
            && pieces + 2 * plan.frames <= MAX_IOV;
        self.check_room(if use_gso { 1 } else { plan.frames })?;
        let mut headers = Vec::with_capacity(plan.frames);
        for i in 0..plan.frames {
            let mut h = self.mem.alloc(FH)?;
            plan.header(i, msg).emit(&mut h);
            headers.push(h.freeze());
        }
        let gso = if use_gso {
            (FH + plan.per_frame) as u16
        } else {
            0
        };
        if plan.total == 0 {
            let start = self.tx_bufs.len();
            self.tx_bufs.extend(headers);
            self.tx_dgrams.push(Datagram {
                addr: peer,
                iov: start..self.tx_bufs.len(),
                gso: 0,
            });
            return Ok(());
        }
        let mut hdrs = headers.into_iter();
        let bufs = &mut self.tx_bufs;
        let dgrams = &mut self.tx_dgrams;
        let mut start = bufs.len();
        let mut cur = Cursor::new(plan);
        walk(&mut |b: PinnedRef<'_>| {
            cur.feed(b.len(), |p| {
                if p.starts_frame {
                    bufs.extend(hdrs.next());
                }
                // The cursor cuts pieces inside the entry it is fed: `sub` always succeeds.
                bufs.extend(b.sub(p.offset, p.len).map(|piece| piece.to_rcbuf()));
                if p.ends_frame && (!use_gso || p.frame + 1 == plan.frames) {
                    dgrams.push(Datagram {
                        addr: peer,
                        iov: start..bufs.len(),
                        gso,
                    });
                    start = bufs.len();
                }
            });
        });
        Ok(())
    }

    /// Copies `data` into pinned buffers (as few as the largest item allows) and queues it.
    fn queue_copy(&mut self, peer: SocketAddrV4, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        let plan = self.plan(data.len())?;
        let item = self.mem.max_item_size();
        let mut pieces = Vec::with_capacity(data.len().div_ceil(item));
        for chunk in data.chunks(item) {
            let mut b = self.mem.alloc(chunk.len())?;
            b.copy_from_slice(chunk);
            pieces.push(b.freeze());
        }
        let n = pieces.len();
        self.queue_pieces(peer, msg, plan, n, &mut |f| {
            for p in &pieces {
                f(p.pinned())
            }
        })
    }

    /// [`Receive::recv_burst`] at a given time (for deterministic timeout tests).
    pub fn recv_burst_at(&mut self, out: &mut Vec<RxMsg>, now: Instant) -> io::Result<usize> {
        let before = out.len();
        self.counters.reassembly_timeout += self.reasm.expire(now) as u64;
        let size = self.cfg.mtu;
        while self.rx_bufs.len() < self.cfg.rx_batch {
            match self.mem.alloc(size) {
                Ok(b) => self.rx_bufs.push(b),
                Err(_) => break,
            }
        }
        if self.rx_bufs.is_empty() {
            // No buffer at all: drain what is waiting so the socket queue does not back up.
            for _ in 0..self.cfg.rx_batch {
                if !sys::discard_one(self.sock.as_fd())? {
                    break;
                }
                self.counters.no_rx_buffers += 1;
            }
            return Ok(0);
        }
        let n = sys::recv_batch(
            self.sock.as_fd(),
            &mut self.rx_bufs,
            &mut self.rx_meta,
            &mut self.rx_scratch,
        )?;
        // Taken out for the loop (and put back) so nothing is allocated per burst.
        let meta = std::mem::take(&mut self.rx_meta);
        let mut bufs = std::mem::take(&mut self.rx_bufs);
        for (mut buf, m) in bufs.drain(..n).zip(meta.iter()) {
            let Some(from) = m.from else {
                self.counters.non_ipv4 += 1;
                continue;
            };
            if m.truncated {
                self.counters.truncated += 1;
                if !self.told_truncated {
                    self.told_truncated = true;
                    eprintln!("{}", truncation_notice(self.local, from, self.cfg.mtu));
                }
                continue;
            }
            buf.set_len(m.len);
            self.deliver(buf.freeze(), from, now, out);
        }
        self.rx_meta = meta;
        self.rx_bufs = bufs;
        Ok(out.len() - before)
    }

    fn deliver(&mut self, pkt: RcBuf, from: SocketAddrV4, now: Instant, out: &mut Vec<RxMsg>) {
        let fp = framing::Packet::new_unchecked(&pkt[..]);
        let hdr = match framing::Repr::parse(&fp) {
            Ok(h) => h,
            Err(_) => {
                self.counters.bad_framing += 1;
                return;
            }
        };
        // A whole message, before the sender gets a connection: a lone segment or junk
        // never takes a table entry.
        let (msg, data) = if hdr.seg_count == 1 {
            match pkt.try_slice(FH, pkt.len() - FH) {
                Ok(Some(data)) => (hdr.msg(), data),
                _ => {
                    self.counters.truncated += 1;
                    return;
                }
            }
        } else {
            match self.reasm.push(&self.mem, from, &hdr, fp.payload(), now) {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(d) => return d.count(&mut self.counters),
            }
        };
        let conn = match self.conns.lookup(from) {
            Some(c) => c,
            None => match self.conns.insert(from, (), false) {
                Some(c) => c,
                None => {
                    self.counters.conn_table_full += 1;
                    return;
                }
            },
        };
        self.counters.delivered += 1;
        out.push(RxMsg {
            conn,
            peer: from,
            msg,
            data,
        });
    }
}

impl DatapathMemory for SocketDatapath {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl Connect for SocketDatapath {
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        if let Some(c) = self.conns.lookup(peer) {
            self.conns.confirm(c);
            return Ok(c);
        }
        self.conns.insert(peer, (), true).ok_or_else(|| {
            io::Error::other("connection table full: every entry is in use by the current burst")
        })
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.conns.peer(conn)
    }

    fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }
}

impl Receive for SocketDatapath {
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        self.recv_burst_at(out, Instant::now())
    }

    fn counters(&self) -> DropCounters {
        let mut c = self.counters;
        c.conn_evicted = self.conns.evicted();
        c
    }
}

impl Transmit for SocketDatapath {
    fn mtu(&self) -> usize {
        self.cfg.mtu
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
        let peer = self.peer(conn)?;
        let sizes = obj.object_sizes();
        let total = sizes.total();
        let plan = self.plan(total)?;
        if plan.is_single() {
            self.check_room(1)?;
            let send = SendPlan::with_sizes(obj, sizes, self.cfg.max_segments - 1);
            let mut hb = self.mem.alloc(FH + send.head_len())?;
            framing::Repr::single(msg, total as u32).emit(&mut hb);
            send.write_head(&mut hb[FH..])?;
            let start = self.tx_bufs.len();
            self.tx_bufs.push(hb.freeze());
            let bufs = &mut self.tx_bufs;
            send.for_each_zero_copy(|b: PinnedRef<'_>| {
                if !b.is_empty() {
                    bufs.push(b.to_rcbuf());
                }
            });
            self.tx_dgrams.push(Datagram {
                addr: peer,
                iov: start..self.tx_bufs.len(),
                gso: 0,
            });
            return Ok(());
        }
        let send = SendPlan::with_sizes(obj, sizes, self.cfg.max_segments.saturating_sub(2));
        let head_len = send.head_len();
        if self.cfg.max_segments < 3 || head_len > self.mem.max_item_size() {
            let bytes = obj.object_to_vec();
            return self.queue_copy(peer, msg, &bytes);
        }
        let mut head = self.mem.alloc(head_len)?;
        send.write_head(&mut head)?;
        let head = head.freeze();
        let pieces = 1 + sizes.zero_copy_count;
        self.queue_pieces(peer, msg, plan, pieces, &mut |f| {
            f(head.pinned());
            send.for_each_zero_copy(|b: PinnedRef<'_>| f(b));
        })
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        let peer = self.peer(conn)?;
        let n = entries.iter().filter(|e| !e.is_empty()).count();
        let max = self.cfg.max_segments - 1;
        if n > max {
            return Err(SendError::TooManySegments { entries: n, max });
        }
        let plan = self.plan(entries.iter().map(|e| e.len()).sum())?;
        self.queue_pieces(peer, msg, plan, n, &mut |f| {
            for e in entries.iter().filter(|e| !e.is_empty()) {
                f(e.pinned())
            }
        })
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        let peer = self.peer(conn)?;
        self.queue_copy(peer, msg, data)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        let mut sent = 0;
        let mut last_err = None;
        let mut would_block = false;
        while sent < self.tx_dgrams.len() {
            let end = (sent + 64).min(self.tx_dgrams.len());
            match sys::send_batch(
                self.sock.as_fd(),
                &self.tx_dgrams[sent..end],
                &self.tx_bufs,
                &mut self.tx_scratch,
            ) {
                Ok(n) => sent += n.max(1),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    would_block = true;
                    break;
                }
                Err(e) => {
                    // The first datagram of the batch was refused: drop it and go on. A GSO
                    // send refused with EIO/EINVAL means no GSO here: stop using it.
                    let raw = e.raw_os_error();
                    if self.tx_dgrams[sent].gso != 0
                        && (raw == Some(libc::EIO) || raw == Some(libc::EINVAL))
                    {
                        self.gso = false;
                    }
                    self.tx_errors += 1;
                    sent += 1;
                    last_err = Some(e);
                }
            }
        }
        // Release the buffers of the datagrams handled: the kernel has copied them.
        let released = if sent == 0 {
            0
        } else {
            self.tx_dgrams[sent - 1].iov.end
        };
        self.tx_bufs.drain(..released);
        self.tx_dgrams.drain(..sent);
        for d in &mut self.tx_dgrams {
            d.iov = d.iov.start - released..d.iov.end - released;
        }
        self.completed += released;
        if would_block {
            return Err(SendError::Full);
        }
        match last_err {
            Some(e) => Err(SendError::Io(e)),
            None => Ok(()),
        }
    }

    /// None: the kernel copies every datagram (no zero-copy send to choose).
    fn send_counters(&self) -> Option<SendCounters> {
        None
    }
}

impl Completions for SocketDatapath {
    /// The kernel copies during `sendmmsg`, so buffers were already released at the flush;
    /// this reports how many since the last call.
    fn poll_completions(&mut self) -> usize {
        std::mem::take(&mut self.completed)
    }

    fn in_flight(&self) -> usize {
        self.tx_bufs.len()
    }
}

impl std::fmt::Debug for SocketDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketDatapath")
            .field("local", &self.local)
            .field("gso", &self.gso)
            .field("queued", &self.tx_dgrams.len())
            .field("counters", &self.counters)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn framed(id: u32, body: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; FH + body.len()];
        framing::Repr::single(Msg::new(id, 1), body.len() as u32).emit(&mut f[..FH]);
        f[FH..].copy_from_slice(body);
        f
    }

    /// Issue 24, fault 3: 66 000 spoofed sources (each a datagram with a valid framing
    /// header and a junk body) filled the 65 536-entry table for good and a fresh client got
    /// no reply. Now idle, unanswered entries are evicted and the client is answered.
    #[test]
    fn a_spoofed_flood_does_not_lock_out_a_fresh_client() {
        let mut cfg = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        cfg.gso = false;
        let mut server = SocketDatapath::new(cfg).unwrap();
        let now = Instant::now();
        let mut out = Vec::new();
        for n in 0..66_000u32 {
            let from = SocketAddrV4::new(Ipv4Addr::from(0x0a09_0000 + n), 4000);
            let mut b = server.mem.alloc(FH + 8).unwrap();
            b.copy_from_slice(&framed(n, &[0xff; 8]));
            server.deliver(b.freeze(), from, now, &mut out);
            out.clear(); // the application found junk and answered nothing
        }
        let c = server.counters();
        assert_eq!(c.conn_table_full, 0, "{c:?}");
        assert!(c.conn_evicted >= 66_000 - 65_536, "{c:?}");
        // A real client now.
        let client = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        client
            .send_to(&framed(7, b"hello"), server.local_addr())
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..5000 {
            server.recv_burst(&mut got).unwrap();
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got.len(), 1, "{:?}", server.counters());
        server
            .send_copy(got[0].conn, got[0].msg, b"answer")
            .unwrap();
        server.flush().unwrap();
        let mut buf = [0u8; 64];
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[FH..n], b"answer");
    }

    /// A lone segment of a message never completed takes no connection entry.
    #[test]
    fn only_whole_messages_create_connections() {
        let cfg = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let mut server = SocketDatapath::new(cfg).unwrap();
        let mut f = vec![0u8; FH + 100];
        // Segment 0 of 2 of a 200-byte message.
        framing::Repr {
            seg_index: 0,
            seg_count: 2,
            ..framing::Repr::single(Msg::new(1, 1), 200)
        }
        .emit(&mut f[..FH]);
        let mut b = server.mem.alloc(f.len()).unwrap();
        b.copy_from_slice(&f);
        let mut out = Vec::new();
        let from = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 1);
        server.deliver(b.freeze(), from, Instant::now(), &mut out);
        assert!(out.is_empty());
        assert_eq!(server.conns.len(), 0);
    }
}
