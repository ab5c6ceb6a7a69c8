//! [`DemiDatapath`]: the runtime's datapath traits over Demikernel's TCP (catpowder LibOS), so
//! that the apps' handlers run on `app_server::Server` over Demikernel unchanged.
//!
//! It is the kernel TCP datapath's one stream datapath ([`datapath_tcp::StreamDatapath`]) with
//! Demikernel's queues in place of sockets and epoll ([`DemiQueues`], a
//! [`ByteStream`] device): the same stream framing, receive side (each popped buffer is copied
//! into a pinned receive buffer through the datapath's deframer, so a frame lying in one buffer
//! is a view of it and a frame cut by a pop is gathered once), send queue, backpressure, caps,
//! timeouts and counters (`docs/tcp.md`, "Backpressure", "Memory", "Closing"). What differs is
//! the device: Demikernel 1.5.13 takes one LibOS-allocated segment per push (`docs/tcp.md`,
//! "Demikernel"), so a write copies the connection's queue into `sgaalloc`ed segments of at
//! most [`MAX_PUSH`] bytes, frames of one batch sharing segments, and pushes them; the
//! references are released at that copy, and the pushed bytes count against the connection's
//! queue until Demikernel reports the pushes done (a push unfinished for the stall timeout is a
//! stall). Demikernel has no half-close, so a stream that turns bad closes once the replies to
//! the frames before it are pushed and done.
//!
//! Every operation is non-blocking: one `accept` in flight on the listening queue, at most one
//! `pop` per connection (none while the datapath does not read it, so Demikernel's receive
//! window stops the peer), any number of pushes; a poll runs Demikernel's scheduler (which
//! also moves its clock, for retransmissions) and reports what completed.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use cornflakes::datapath::{DelegateDatapath, SendCounters};
use cornflakes::PinnedMemory;
use datapath_tcp::stream::{ByteStream, Event, Ready, StreamConfig, StreamDatapath, Wrote};
use datapath_tcp::txq::TxQueue;
use datapath_tcp::StreamStats;
use demikernel::runtime::fail::Fail;
use demikernel::runtime::types::{demi_opcode_t, demi_qresult_t};
use demikernel::{demi_sgarray_t, LibOS, QDesc};

use crate::{io_error, segment, segment_mut, MAX_PUSH};

/// Configuration of a [`DemiDatapath`]: the stream datapath's knobs, those of
/// `datapath_tcp::TcpConfig::stream` (the address is Demikernel's own, from its configuration
/// file; `linger` is unused: Demikernel 1.5.13 has no half-close).
pub type DemiConfig = StreamConfig;

/// Counts of the Demikernel device (beside the datapath's, in [`StreamStats::device`]); they
/// only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DemiStats {
    /// Pops completed with data (each copied once into pinned memory).
    pub pops: u64,
    /// Bytes popped.
    pub popped_bytes: u64,
    /// Pushes made (each copied once from the send queue).
    pub pushes: u64,
    /// Bytes pushed.
    pub pushed_bytes: u64,
    /// Pushes Demikernel reported done.
    pub pushes_done: u64,
}

/// Most scheduler runs per `recv_burst` while pops keep completing.
pub const POP_ROUNDS: usize = 8;

/// What an operation in flight was for.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Accept,
    Pop(u32),
    Push(u32, usize),
    Close,
}

/// A popped buffer being read, and how far.
struct Popped {
    sga: demi_sgarray_t,
    at: usize,
}

impl std::fmt::Debug for Popped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Popped")
            .field("len", &segment(&self.sga).len())
            .field("at", &self.at)
            .finish()
    }
}

/// One connection's queue.
#[derive(Debug)]
struct Queue {
    qd: QDesc,
    /// A pop is in flight.
    popping: bool,
    /// The last pop's buffer, not yet all read.
    popped: Option<Popped>,
    /// An empty pop: the peer ended its stream.
    ended: bool,
    /// A failed pop.
    failed: bool,
    /// The datapath reads it.
    read: bool,
    /// In the list of queues with something to read.
    listed: bool,
}

impl Queue {
    fn has_input(&self) -> bool {
        self.popped.is_some() || self.ended || self.failed
    }
}

/// Demikernel's TCP queues as a [`ByteStream`] device: one LibOS, an optional listening queue,
/// any number of connections.
pub struct DemiQueues {
    libos: LibOS,
    listener: Option<QDesc>,
    pending: HashMap<u64, Pending>,
    queues: HashMap<u32, Queue>,
    /// Queues with something to read (reported ready, level-triggered, while read).
    readable: Vec<u32>,
    results: Vec<demi_qresult_t>,
    /// Buffers released (copied into pushes) since the last `poll_completions`.
    completed: usize,
    stats: DemiStats,
    sends: SendCounters,
}

impl DemiQueues {
    /// Takes `libos` and listens on `listen` (Demikernel's own address), if given.
    pub fn new(mut libos: LibOS, listen: Option<SocketAddrV4>) -> io::Result<DemiQueues> {
        let mut pending = HashMap::new();
        let listener = match listen {
            Some(addr) => {
                let qd = libos
                    .socket(libc::AF_INET, libc::SOCK_STREAM, 0)
                    .map_err(io_error)?;
                libos.bind(qd, SocketAddr::V4(addr)).map_err(io_error)?;
                libos.listen(qd, 128).map_err(io_error)?;
                let qt = libos.accept(qd).map_err(io_error)?;
                pending.insert(u64::from(qt), Pending::Accept);
                Some(qd)
            }
            None => None,
        };
        Ok(DemiQueues {
            libos,
            listener,
            pending,
            queues: HashMap::new(),
            readable: Vec::new(),
            results: Vec::new(),
            completed: 0,
            stats: DemiStats::default(),
            sends: SendCounters::default(),
        })
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

    fn on_accept(&mut self, r: &demi_qresult_t, events: &mut Vec<Event<QDesc>>) {
        if r.qr_opcode == demi_opcode_t::DEMI_OPC_ACCEPT {
            // SAFETY: an ACCEPT result carries `ares`.
            let qd = QDesc::from(unsafe { r.qr_value.ares.qd } as u32);
            let peer = self
                .libos
                .getpeername(qd)
                .unwrap_or(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0));
            events.push(Event::Accepted(qd, peer));
        } else {
            events.push(Event::AcceptFailed);
        }
        // The next connection.
        if let Some(l) = self.listener {
            if let Ok(qt) = self.libos.accept(l) {
                self.pending.insert(u64::from(qt), Pending::Accept);
            }
        }
    }

    fn on_pop(&mut self, id: u32, r: &demi_qresult_t) {
        let popped = r.qr_opcode == demi_opcode_t::DEMI_OPC_POP;
        let Some(q) = self.queues.get_mut(&id) else {
            if popped {
                // SAFETY: a POP result carries `sga`.
                let _ = self.libos.sgafree(unsafe { r.qr_value.sga });
            }
            return;
        };
        q.popping = false;
        if !popped {
            q.failed = true;
        } else {
            // SAFETY: a POP result carries `sga`.
            let sga: demi_sgarray_t = unsafe { r.qr_value.sga };
            let len = segment(&sga).len();
            if len == 0 {
                let _ = self.libos.sgafree(sga);
                q.ended = true;
            } else {
                self.stats.pops += 1;
                self.stats.popped_bytes += len as u64;
                q.popped = Some(Popped { sga, at: 0 });
            }
        }
        if !q.listed {
            q.listed = true;
            self.readable.push(id);
        }
    }

    /// Issues `q`'s next pop unless one is in flight or the stream is over.
    fn pop(
        libos: &mut LibOS,
        pending: &mut HashMap<u64, Pending>,
        id: u32,
        q: &mut Queue,
    ) -> Result<(), Fail> {
        if q.popping || q.has_input() {
            return Ok(());
        }
        let qt = libos.pop(q.qd, None)?;
        q.popping = true;
        pending.insert(u64::from(qt), Pending::Pop(id));
        Ok(())
    }
}

impl ByteStream for DemiQueues {
    type Conn = QDesc;
    type Stats = DemiStats;

    fn max_segments(&self) -> usize {
        usize::MAX
    }

    /// Never: every byte is copied at the push.
    fn zero_copy_threshold(&self) -> usize {
        usize::MAX
    }

    /// Runs Demikernel's scheduler and reports what completed; again (up to [`POP_ROUNDS`]
    /// times a burst) while pops complete — a pop returns one received segment, and the next
    /// is issued only when it is read — so that a backlog drains and the receive window
    /// reopens. Queues with something left to read are reported ready while read.
    fn poll(&mut self, round: usize, events: &mut Vec<Event<QDesc>>) -> io::Result<bool> {
        let r = self.collect();
        let results = std::mem::take(&mut self.results);
        let mut popped = false;
        for res in &results {
            match self.pending.remove(&res.qr_qt) {
                Some(Pending::Accept) => self.on_accept(res, events),
                Some(Pending::Pop(id)) => {
                    popped = true;
                    self.on_pop(id, res);
                }
                Some(Pending::Push(id, bytes)) => {
                    if res.qr_opcode == demi_opcode_t::DEMI_OPC_PUSH {
                        self.stats.pushes_done += 1;
                        events.push(Event::Done(id, bytes));
                    } else {
                        events.push(Event::Failed(id));
                    }
                }
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
        let queues = &mut self.queues;
        self.readable.retain(|id| match queues.get_mut(id) {
            Some(q) if q.has_input() => {
                if q.read {
                    events.push(Event::Ready(
                        *id,
                        Ready {
                            read: true,
                            ..Ready::default()
                        },
                    ));
                }
                true
            }
            Some(q) => {
                q.listed = false;
                false
            }
            None => false,
        });
        r.map(|()| popped && round + 1 < POP_ROUNDS)
    }

    /// Demikernel's connect, waited for up to 5 s.
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<QDesc> {
        let qd = self
            .libos
            .socket(libc::AF_INET, libc::SOCK_STREAM, 0)
            .map_err(io_error)?;
        let connected = self
            .libos
            .connect(qd, SocketAddr::V4(peer))
            .and_then(|qt| self.libos.wait(qt, Some(Duration::from_secs(5))));
        match connected {
            Ok(r) if r.qr_opcode == demi_opcode_t::DEMI_OPC_CONNECT => Ok(qd),
            Ok(r) => {
                let _ = self.libos.close(qd);
                Err(io::Error::from_raw_os_error(r.qr_ret as i32))
            }
            Err(e) => {
                let _ = self.libos.close(qd);
                Err(io_error(e))
            }
        }
    }

    /// Its first pop.
    fn attach(&mut self, id: u32, qd: &mut QDesc) -> io::Result<()> {
        let mut q = Queue {
            qd: *qd,
            popping: false,
            popped: None,
            ended: false,
            failed: false,
            read: true,
            listed: false,
        };
        Self::pop(&mut self.libos, &mut self.pending, id, &mut q).map_err(io_error)?;
        self.queues.insert(id, q);
        Ok(())
    }

    fn refuse(&mut self, qd: QDesc) {
        let _ = self.libos.close(qd);
    }

    /// Demikernel finishes (or cancels) the pushes and the pop in flight; their results, if
    /// any, find no connection and are dropped (a popped buffer is freed).
    fn close(&mut self, id: u32, qd: QDesc) {
        if let Some(q) = self.queues.remove(&id) {
            if let Some(p) = q.popped {
                let _ = self.libos.sgafree(p.sga);
            }
        }
        self.pending.retain(|_, p| match *p {
            Pending::Pop(i) | Pending::Push(i, _) => i != id,
            Pending::Accept | Pending::Close => true,
        });
        if let Ok(qt) = self.libos.async_close(qd) {
            self.pending.insert(u64::from(qt), Pending::Close);
        }
    }

    /// Demikernel 1.5.13's LibOS has no `shutdown`.
    fn shutdown(&mut self, _qd: &mut QDesc) -> bool {
        false
    }

    /// Reading means a pop in flight (or a popped buffer to read); not reading, none issued.
    /// Pushes never wait for room.
    fn watch(&mut self, id: u32, _qd: &mut QDesc, read: bool, _write: bool) -> io::Result<()> {
        let Some(q) = self.queues.get_mut(&id) else {
            return Ok(());
        };
        q.read = read;
        if !read {
            return Ok(());
        }
        if q.has_input() {
            if !q.listed {
                q.listed = true;
                self.readable.push(id);
            }
            return Ok(());
        }
        Self::pop(&mut self.libos, &mut self.pending, id, q).map_err(io_error)
    }

    fn failed(&mut self, id: u32, _qd: &QDesc) -> bool {
        self.queues.get(&id).is_some_and(|q| q.failed)
    }

    /// Copies from the popped buffer; once it is all read, frees it and pops the next.
    fn read(&mut self, id: u32, _qd: &mut QDesc, buf: &mut [u8]) -> io::Result<usize> {
        let Some(q) = self.queues.get_mut(&id) else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        if let Some(p) = &mut q.popped {
            let bytes = &segment(&p.sga)[p.at..];
            let k = bytes.len().min(buf.len());
            buf[..k].copy_from_slice(&bytes[..k]);
            p.at += k;
            if p.at == segment(&p.sga).len() {
                if let Some(p) = q.popped.take() {
                    let _ = self.libos.sgafree(p.sga);
                }
                Self::pop(&mut self.libos, &mut self.pending, id, q).map_err(io_error)?;
            }
            return Ok(k);
        }
        if q.failed {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "demikernel: the pop failed",
            ));
        }
        if q.ended {
            return Ok(0);
        }
        Self::pop(&mut self.libos, &mut self.pending, id, q).map_err(io_error)?;
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// The rest of the popped buffer.
    fn waiting(&mut self, id: u32, _qd: &QDesc) -> usize {
        self.queues
            .get(&id)
            .and_then(|q| q.popped.as_ref())
            .map_or(0, |p| segment(&p.sga).len() - p.at)
    }

    /// Copies the whole queue into `sgaalloc`ed segments of at most [`MAX_PUSH`] bytes and
    /// pushes them; their bytes are in flight until Demikernel reports the pushes done.
    fn write(&mut self, id: u32, qd: &mut QDesc, tx: &mut TxQueue) -> io::Result<Wrote> {
        let total = tx.bytes();
        let libos = &mut self.libos;
        let mut pushed: Vec<(u64, usize)> = Vec::with_capacity(total.div_ceil(MAX_PUSH));
        let mut cur: Option<(demi_sgarray_t, usize, usize)> = None; // (array, len, filled)
        let mut left = total;
        let mut err = None;
        tx.for_each_unsent(usize::MAX, |mut piece| {
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
                    let qt = libos.push(*qd, &sga);
                    let _ = libos.sgafree(sga);
                    match qt {
                        Ok(qt) => pushed.push((u64::from(qt), len)),
                        Err(e) => err = Some(e),
                    }
                    left -= len;
                }
            }
        });
        if let Some((sga, _, _)) = cur.take() {
            let _ = libos.sgafree(sga);
        }
        self.completed += tx.clear();
        let mut w = Wrote::default();
        for (qt, len) in pushed {
            self.stats.pushes += 1;
            self.stats.pushed_bytes += len as u64;
            self.sends.copied_sends += 1;
            self.sends.copied_bytes += len as u64;
            w.in_flight += len;
            self.pending.insert(qt, Pending::Push(id, len));
        }
        match err {
            Some(e) => Err(io_error(e)),
            None => Ok(w),
        }
    }

    /// Buffers released since the last call (at the copy into Demikernel's segments).
    fn poll_completions(&mut self) -> usize {
        std::mem::take(&mut self.completed)
    }

    /// None: the pushes hold copies.
    fn in_flight(&self) -> usize {
        0
    }

    /// Every push copied.
    fn send_counters(&self) -> SendCounters {
        self.sends
    }

    fn stats(&self) -> DemiStats {
        self.stats
    }
}

impl std::fmt::Debug for DemiQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemiQueues")
            .field("listener", &self.listener)
            .field("queues", &self.queues.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// A datapath over Demikernel's TCP: the stream datapath over [`DemiQueues`]. Not `Send`: one
/// per process (catpowder owns one interface).
#[derive(Debug)]
pub struct DemiDatapath {
    inner: StreamDatapath<DemiQueues>,
}

impl DemiDatapath {
    /// Takes `libos` (its configuration names the address and interface) and listens on
    /// `cfg.listen`.
    pub fn new(libos: LibOS, cfg: DemiConfig) -> io::Result<DemiDatapath> {
        let mem = PinnedMemory::new(cfg.memory.clone())
            .map_err(|e| io::Error::other(format!("pinned memory: {e}")))?;
        let local = cfg
            .listen
            .unwrap_or(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0));
        let dev = DemiQueues::new(libos, cfg.listen)?;
        Ok(DemiDatapath {
            inner: StreamDatapath::with_device(dev, mem, cfg, local),
        })
    }

    /// The stream datapath (its configuration in force, connections, limits).
    pub fn stream(&self) -> &StreamDatapath<DemiQueues> {
        &self.inner
    }

    /// The counters, Demikernel's own included.
    pub fn stats(&self) -> StreamStats<DemiStats> {
        self.inner.stats()
    }
}

impl DelegateDatapath for DemiDatapath {
    type Inner = StreamDatapath<DemiQueues>;

    fn inner(&self) -> &Self::Inner {
        &self.inner
    }

    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.inner
    }
}
