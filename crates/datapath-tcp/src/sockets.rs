//! [`TcpSockets`]: Linux kernel TCP as a [`ByteStream`] device — a listening socket, the
//! connections' sockets and one level-triggered epoll instance; gathered `sendmsg` writes,
//! `MSG_ZEROCOPY` or io_uring `SENDMSG_ZC` for large zero-copy fields, and the completions
//! that release their buffers (`docs/tcp.md`, "Zero-copy sends").

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use cornflakes_datapath::SendCounters;

use crate::stream::{ByteStream, Event, Ready, Wrote};
use crate::sys::{self, Epoll, ZcCompletion};
use crate::txq::{TxQueue, ZcInFlight};
use crate::uring::{self, BatchSend, ZcRing};
use crate::{ZeroCopy, ZeroCopyMode};

/// The epoll token of the listening socket (connection tokens are their `u32` ids).
const LISTENER: u64 = u64::MAX;

/// Submission entries of a [`ZeroCopyMode::IoUring`] ring (one send is submitted at a time).
const URING_ENTRIES: u32 = 64;

/// Counts of the kernel TCP device (beside the datapath's, in
/// [`StreamStats::device`](crate::stream::StreamStats::device)); they only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketStats {
    /// `sendmsg` calls (and io_uring zero-copy sends).
    pub sendmsg_calls: u64,
    /// Calls the kernel took only part of.
    pub partial_writes: u64,
    /// Calls that found the socket buffer full (`EAGAIN`).
    pub would_block: u64,
    /// Zero-copy sends (`MSG_ZEROCOPY` or `SENDMSG_ZC`).
    pub zero_copy_sends: u64,
    /// Zero-copy sends the kernel reported complete.
    pub zero_copy_completed: u64,
    /// Of those, sends the kernel reported it copied after all (`SO_EE_CODE_ZEROCOPY_COPIED`,
    /// `IORING_NOTIF_USAGE_ZC_COPIED`; loopback always copies).
    pub zero_copy_copied: u64,
    /// Zero-copy sends refused with `ENOBUFS` (the socket's optmem limit) and retried as
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

/// One connection's socket.
#[derive(Debug)]
pub struct Socket {
    /// Shared with the zero-copy record of the connection, which keeps it open after the close
    /// until the kernel has reported every zero-copy send done.
    stream: Rc<TcpStream>,
    /// Events registered with epoll.
    interest: u32,
    /// Zero-copy sends are on for this socket (`SO_ZEROCOPY`, or an io_uring ring).
    zero_copy: bool,
}

impl Socket {
    fn new(stream: TcpStream) -> Socket {
        Socket {
            stream: Rc::new(stream),
            interest: 0,
            zero_copy: false,
        }
    }
}

/// The zero-copy sends of one connection, from its first one on (the kernel numbers a socket's
/// sends), kept past the connection's close while some are in flight.
#[derive(Debug)]
struct ZcConn {
    stream: Rc<TcpStream>,
    inflight: ZcInFlight,
    /// The connection is closed: the socket (shut down, out of epoll) is kept only to read the
    /// completions.
    closed: bool,
}

/// The sockets of one kernel TCP datapath (see the [module docs](self)).
pub struct TcpSockets {
    epoll: Epoll,
    listener: Option<TcpListener>,
    zero_copy: ZeroCopy,
    events_per_poll: usize,
    socket_buffer: Option<usize>,
    ready: Vec<(u64, u32)>,
    iov: Vec<libc::iovec>,
    completions: Vec<ZcCompletion>,
    /// Zero-copy sends by connection.
    zc: HashMap<u32, ZcConn>,
    /// Connections with zero-copy sends in flight (live or closed).
    zc_conns: Vec<u32>,
    /// Buffer references held for zero-copy sends in flight (all connections).
    zc_held: usize,
    /// Buffers released since the last `poll_completions`.
    completed: usize,
    /// The io_uring of [`ZeroCopyMode::IoUring`].
    uring: Option<ZcRing>,
    notifications: Vec<uring::Notification>,
    /// The io_uring sends a flush gathers from several connections.
    batch: Vec<BatchSend>,
    batch_open: bool,
    batch_failed: bool,
    stats: SocketStats,
    sends: SendCounters,
}

impl TcpSockets {
    /// The epoll instance (and, for [`ZeroCopyMode::IoUring`] with zero-copy sends, the ring),
    /// listening on `listen` if given. Returns the device and the address it listens on.
    pub fn new(
        listen: Option<SocketAddrV4>,
        zero_copy: ZeroCopy,
        events_per_poll: usize,
        socket_buffer: Option<usize>,
    ) -> io::Result<(TcpSockets, SocketAddrV4)> {
        let epoll = Epoll::new(events_per_poll)?;
        let uring = match zero_copy.mode {
            ZeroCopyMode::IoUring => Some(ZcRing::new(URING_ENTRIES)?),
            ZeroCopyMode::MsgZerocopy | ZeroCopyMode::Off => None,
        };
        let (listener, local) = match listen {
            Some(addr) => {
                let l = TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                let local = match l.local_addr()? {
                    SocketAddr::V4(a) => a,
                    SocketAddr::V6(_) => return Err(io::Error::other("bound an IPv6 address")),
                };
                epoll.add(l.as_fd(), sys::IN, LISTENER)?;
                (Some(l), local)
            }
            None => (None, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)),
        };
        let dev = TcpSockets {
            epoll,
            listener,
            zero_copy,
            events_per_poll,
            socket_buffer,
            ready: Vec::with_capacity(events_per_poll),
            iov: Vec::with_capacity(sys::MAX_IOV),
            completions: Vec::new(),
            zc: HashMap::new(),
            zc_conns: Vec::new(),
            zc_held: 0,
            completed: 0,
            uring,
            notifications: Vec::new(),
            batch: Vec::new(),
            batch_open: false,
            batch_failed: false,
            stats: SocketStats::default(),
            sends: SendCounters::default(),
        };
        Ok((dev, local))
    }

    /// How zero-copy sends are made, and from which field size.
    pub fn zero_copy(&self) -> ZeroCopy {
        self.zero_copy
    }

    /// Zero-copy sends in flight (sent, completion not yet read), all connections.
    pub fn zero_copy_in_flight(&self) -> usize {
        self.zc.values().map(|z| z.inflight.sends()).sum()
    }

    /// Waits up to `timeout_ms` for a socket event without taking it (it stays for the next
    /// poll). Returns whether one is ready.
    pub(crate) fn wait_ready(&self, timeout_ms: i32) -> io::Result<bool> {
        self.epoll.wait_ready(timeout_ms)
    }

    fn accept_all(&mut self, events: &mut Vec<Event<Socket>>) {
        let Some(l) = &self.listener else {
            return;
        };
        for _ in 0..self.events_per_poll {
            match l.accept() {
                Ok((s, SocketAddr::V4(peer))) => events.push(Event::Accepted(Socket::new(s), peer)),
                Ok((_, SocketAddr::V6(_))) => events.push(Event::NotIpv4),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ECONNABORTED, EMFILE, …: this connection is lost; try again next poll.
                Err(_) => {
                    events.push(Event::AcceptFailed);
                    break;
                }
            }
        }
    }

    /// The zero-copy record of connection `id`, made at its first zero-copy send.
    fn zc_of(&mut self, id: u32, c: &Socket) -> &mut ZcConn {
        self.zc.entry(id).or_insert_with(|| ZcConn {
            stream: c.stream.clone(),
            inflight: ZcInFlight::default(),
            closed: false,
        })
    }

    /// The tag of `id`'s next zero-copy send: the connection and the send's number.
    fn user_data(&mut self, id: u32, c: &Socket) -> u64 {
        (u64::from(id) << 32) | u64::from(self.zc_of(id, c).inflight.next_id())
    }

    /// A failed io_uring zero-copy send whose notification is still to come (the kernel posts
    /// one for a send that failed with `EAGAIN`, too): its send number is taken by an empty
    /// record, so that the notification completes that and not the next send, whose buffers
    /// the kernel may still be reading.
    fn reserve_notification(&mut self, id: u32, c: &Socket) {
        let z = self.zc_of(id, c);
        let first = z.inflight.sends() == 0;
        z.inflight.record(Vec::new(), 0);
        if first {
            self.zc_conns.push(id);
        }
    }

    /// Accounts for `n` bytes the kernel took from `tx` in one send that offered `offered`
    /// bytes; `zc`: a zero-copy send, whose buffers are held until its notification.
    fn took(&mut self, id: u32, c: &Socket, tx: &mut TxQueue, n: usize, zc: bool, offered: usize) {
        if n < tx.bytes() && n < offered {
            self.stats.partial_writes += 1;
        }
        if zc {
            let mut keep = Vec::new();
            tx.advance(n, Some(&mut keep));
            self.zc_held += keep.len();
            let z = self.zc_of(id, c);
            let first = z.inflight.sends() == 0;
            z.inflight.record(keep, n);
            if first {
                self.zc_conns.push(id);
            }
            self.sends.zero_copy_sends += 1;
            self.sends.zero_copy_bytes += n as u64;
            // Wholly sent buffers are released at the completion, not now.
        } else {
            self.completed += tx.advance(n, None);
            if n > 0 {
                self.sends.copied_sends += 1;
                self.sends.copied_bytes += n as u64;
            }
        }
    }

    /// Reads the zero-copy completions on `id`'s error queue; returns the buffers released.
    fn read_completions_of(&mut self, id: u32) -> usize {
        let Some(z) = self.zc.get_mut(&id) else {
            return 0;
        };
        self.completions.clear();
        // A socket error here shows up again on the next read or write, which closes it.
        let _ = sys::read_completions(z.stream.as_fd(), &mut self.completions);
        let mut released = 0;
        for c in &self.completions {
            let (n, bytes) = z.inflight.complete(c.lo, c.hi);
            released += n;
            let count = c.hi.wrapping_sub(c.lo) as u64 + 1;
            completed_sends(&mut self.stats, &mut self.sends, count, bytes, c.copied);
        }
        self.zc_held -= released;
        released
    }

    /// Releases the buffers of the io_uring sends whose notifications have arrived.
    fn poll_uring(&mut self) -> usize {
        let Some(ring) = self.uring.as_mut() else {
            return 0;
        };
        ring.drain(&mut self.notifications);
        let mut released = 0;
        let notifications = std::mem::take(&mut self.notifications);
        for n in &notifications {
            let (id, send) = ((n.user_data >> 32) as u32, n.user_data as u32);
            let Some(z) = self.zc.get_mut(&id) else {
                continue;
            };
            let (bufs, bytes) = z.inflight.complete(send, send);
            // A failed send's notification completes its empty record: not a zero-copy send.
            if bufs > 0 {
                completed_sends(&mut self.stats, &mut self.sends, 1, bytes, n.copied);
            }
            released += bufs;
        }
        self.notifications = notifications;
        self.notifications.clear();
        self.zc_held -= released;
        self.forget_done();
        released
    }

    /// Reads zero-copy completions of every connection with sends in flight; returns the
    /// buffers released.
    fn poll_zero_copy(&mut self) -> usize {
        if self.uring.is_some() {
            return self.poll_uring();
        }
        let mut released = 0;
        for id in std::mem::take(&mut self.zc_conns) {
            released += self.read_completions_of(id);
            self.zc_conns.push(id);
        }
        self.forget_done();
        released
    }

    /// Drops the connections without zero-copy sends in flight from the list, and the records
    /// of closed ones (their sockets close).
    fn forget_done(&mut self) {
        let zc = &mut self.zc;
        self.zc_conns.retain(|id| match zc.get(id) {
            Some(z) if z.inflight.sends() > 0 => true,
            Some(z) => {
                if z.closed {
                    zc.remove(id);
                }
                false
            }
            None => false,
        });
    }

    /// One send of `tx` on `c`: zero-copy when `allow_zc` and a field asks for it. Returns the
    /// bytes taken and whether the send was a zero-copy one.
    fn send_once(
        &mut self,
        id: u32,
        c: &Socket,
        tx: &TxQueue,
        allow_zc: bool,
    ) -> io::Result<(usize, bool)> {
        if self.uring.is_some() && allow_zc && sys::fill_iov(tx, &mut self.iov) {
            let user_data = self.user_data(id, c);
            let ring = self.uring.as_mut().expect("checked above");
            let r = ring.send(c.stream.as_fd(), &mut self.iov, user_data);
            return match r.result {
                Ok(n) => Ok((n, r.more)),
                Err(e) => {
                    if r.more {
                        self.reserve_notification(id, c);
                    }
                    Err(e)
                }
            };
        }
        let zc = allow_zc && self.uring.is_none();
        sys::send_queue(c.stream.as_fd(), tx, &mut self.iov, zc)
    }
}

/// `count` zero-copy sends complete (`bytes` their bytes), `copied` by the kernel.
fn completed_sends(
    stats: &mut SocketStats,
    sends: &mut SendCounters,
    count: u64,
    bytes: usize,
    copied: bool,
) {
    stats.zero_copy_completed += count;
    if copied {
        stats.zero_copy_copied += count;
        sends.zero_copy_copied_sends += count;
        sends.zero_copy_copied_bytes += bytes as u64;
    }
}

impl ByteStream for TcpSockets {
    type Conn = Socket;
    type Stats = SocketStats;

    fn max_segments(&self) -> usize {
        sys::MAX_IOV - 1
    }

    fn zero_copy_threshold(&self) -> usize {
        self.zero_copy.threshold()
    }

    /// One `epoll_wait` without blocking: accepts, reads, room to write, errors (zero-copy
    /// completions); with io_uring, also collects the notifications (they do not wake epoll).
    fn poll(&mut self, _round: usize, events: &mut Vec<Event<Socket>>) -> io::Result<bool> {
        let mut ready = std::mem::take(&mut self.ready);
        let r = self.epoll.wait(0, &mut ready);
        for &(token, ev) in &ready {
            if token == LISTENER {
                self.accept_all(events);
                continue;
            }
            let has = |flag: libc::c_int| ev & flag as u32 != 0;
            events.push(Event::Ready(
                token as u32,
                Ready {
                    read: has(libc::EPOLLIN),
                    write: has(libc::EPOLLOUT),
                    hangup: has(libc::EPOLLHUP),
                    peer_ended: has(libc::EPOLLRDHUP),
                    error: has(libc::EPOLLERR),
                },
            ));
        }
        self.ready = ready;
        if self.uring.is_some() {
            let n = self.poll_uring();
            self.completed += n;
        }
        r.map(|()| false)
    }

    /// A blocking connect of at most 5 s.
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<Socket> {
        let s = TcpStream::connect_timeout(&SocketAddr::V4(peer), Duration::from_secs(5))?;
        Ok(Socket::new(s))
    }

    /// Non-blocking, `TCP_NODELAY`, the socket buffers asked for, `SO_ZEROCOPY` (with
    /// `MSG_ZEROCOPY`), watched for reading.
    fn attach(&mut self, id: u32, c: &mut Socket) -> io::Result<()> {
        let fd = c.stream.as_fd();
        c.stream.set_nonblocking(true)?;
        sys::set_nodelay(fd)?;
        if let Some(b) = self.socket_buffer {
            sys::set_buffer_sizes(fd, b);
        }
        c.zero_copy = match self.zero_copy.mode {
            ZeroCopyMode::Off => false,
            ZeroCopyMode::IoUring => true,
            ZeroCopyMode::MsgZerocopy => sys::enable_zero_copy(fd),
        };
        self.epoll.add(fd, sys::IN, u64::from(id))?;
        c.interest = sys::IN;
        Ok(())
    }

    fn refuse(&mut self, c: Socket) {
        drop(c);
    }

    /// Out of epoll; with zero-copy sends in flight the socket is shut down and kept until
    /// their completions arrive ([`SocketStats::draining`]).
    fn close(&mut self, id: u32, c: Socket) {
        let _ = self.epoll.delete(c.stream.as_fd());
        match self.zc.get_mut(&id) {
            Some(z) if z.inflight.sends() > 0 => {
                // The kernel may still read these buffers: keep them (and the socket, to read
                // their completions) until it says it is done.
                let _ = z.stream.shutdown(Shutdown::Both);
                z.closed = true;
            }
            Some(_) => {
                self.zc.remove(&id);
            }
            None => {}
        }
    }

    fn shutdown(&mut self, c: &mut Socket) -> bool {
        let _ = c.stream.shutdown(Shutdown::Write);
        true
    }

    fn watch(&mut self, id: u32, c: &mut Socket, read: bool, write: bool) -> io::Result<()> {
        let want = (if read { sys::IN } else { 0 }) | if write { sys::OUT } else { 0 };
        if want != c.interest {
            self.epoll.modify(c.stream.as_fd(), want, u64::from(id))?;
            c.interest = want;
        }
        Ok(())
    }

    /// `EPOLLERR` with `MSG_ZEROCOPY` sends in flight is (usually) their completions: read them
    /// here. Without, it is a socket error the next read reports.
    fn ready(&mut self, id: u32, _c: &mut Socket, mut r: Ready) -> Ready {
        let in_flight = self.zc.get(&id).is_some_and(|z| z.inflight.sends() > 0);
        if r.error && in_flight && self.uring.is_none() {
            let n = self.read_completions_of(id);
            self.completed += n;
            r.error = false;
        }
        r
    }

    fn failed(&mut self, _id: u32, c: &Socket) -> bool {
        matches!(c.stream.take_error(), Ok(Some(_)) | Err(_))
    }

    fn read(&mut self, _id: u32, c: &mut Socket, buf: &mut [u8]) -> io::Result<usize> {
        (&*c.stream).read(buf)
    }

    /// `FIONREAD`.
    fn waiting(&mut self, _id: u32, c: &Socket) -> usize {
        sys::bytes_readable(c.stream.as_fd())
    }

    /// Gathered `sendmsg` calls (up to `UIO_MAXIOV` buffers each) until the queue is empty
    /// or the socket buffer full; a call whose buffers include a zero-copy field at least the
    /// threshold long is a zero-copy one, its buffers held until its completion. `ENOBUFS` on a
    /// zero-copy send (the optmem limit) sends it again as a copying one.
    fn write(&mut self, id: u32, c: &mut Socket, tx: &mut TxQueue) -> io::Result<Wrote> {
        let mut w = Wrote::default();
        let mut allow_zc = c.zero_copy;
        while !tx.is_empty() {
            self.stats.sendmsg_calls += 1;
            match self.send_once(id, c, tx, allow_zc) {
                Ok((n, zc)) => {
                    let offered = self.iov.iter().map(|v| v.iov_len).sum::<usize>();
                    debug_assert!(tx.bytes() >= n);
                    self.took(id, c, tx, n, zc, offered);
                    w.sent += n;
                    w.blocked = false;
                    allow_zc = c.zero_copy;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.would_block += 1;
                    w.blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) && allow_zc => {
                    // The socket's optmem limit for zero-copy notifications: copy this one.
                    self.stats.zero_copy_enobufs += 1;
                    allow_zc = false;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(w)
    }

    /// [`ZeroCopyMode::IoUring`]: the first zero-copy send of `id`'s queue joins the flush's
    /// batch (`ZcRing::send_batch`: one `io_uring_enter` for the batch instead of one per
    /// connection).
    fn batch_add(&mut self, id: u32, c: &mut Socket, tx: &TxQueue) -> bool {
        if !self.batch_open {
            self.batch.clear();
            self.batch_open = true;
        }
        if self.uring.is_none() || !c.zero_copy || tx.is_empty() {
            return false;
        }
        let mut iov = Vec::new();
        if !sys::fill_iov(tx, &mut iov) {
            return false; // no zero-copy field: write's copying sendmsg
        }
        let user_data = self.user_data(id, c);
        self.batch.push(BatchSend {
            fd: c.stream.as_raw_fd(),
            len: iov.iter().map(|v| v.iov_len).sum(),
            iov,
            user_data,
            result: None,
        });
        true
    }

    fn batch_submit(&mut self) {
        self.batch_open = false;
        self.batch_failed = false;
        if self.batch.len() < 2 {
            self.batch.clear(); // one send: write's own path, nothing to batch
            return;
        }
        let Some(ring) = self.uring.as_mut() else {
            return;
        };
        self.stats.sendmsg_calls += self.batch.len() as u64;
        self.stats.uring_batched_sends += self.batch.len() as u64;
        self.batch_failed = ring.send_batch(&mut self.batch).is_err();
    }

    /// The send's result, handled as a single send's is: bytes taken (partial writes),
    /// `EAGAIN` (the connection waits for room), `ENOBUFS` or an interrupted send (sent again
    /// by `write`, and copied if the limit holds), errors (the connection fails). A ring error
    /// before the result arrived also fails the connection: whether the kernel took its bytes
    /// is unknown, and sending them again could duplicate them on the stream.
    fn batch_take(
        &mut self,
        id: u32,
        c: &mut Socket,
        tx: &mut TxQueue,
    ) -> Option<io::Result<Wrote>> {
        let i = self
            .batch
            .iter()
            .position(|b| (b.user_data >> 32) as u32 == id)?;
        let b = self.batch.swap_remove(i);
        let Some(r) = b.result else {
            return self
                .batch_failed
                .then(|| Err(io::Error::other("io_uring failed during a batch")));
        };
        match r.result {
            Ok(n) => {
                self.took(id, c, tx, n, r.more, b.len);
                Some(Ok(Wrote {
                    sent: n,
                    ..Wrote::default()
                }))
            }
            Err(e) => {
                if r.more {
                    self.reserve_notification(id, c);
                }
                if e.kind() == io::ErrorKind::WouldBlock {
                    self.stats.would_block += 1;
                    Some(Ok(Wrote {
                        blocked: true,
                        ..Wrote::default()
                    }))
                } else if e.kind() == io::ErrorKind::Interrupted {
                    None
                } else if e.raw_os_error() == Some(libc::ENOBUFS) {
                    self.stats.zero_copy_enobufs += 1;
                    None
                } else {
                    Some(Err(e))
                }
            }
        }
    }

    /// Buffers of copying sends (released when the kernel took their bytes) and of zero-copy
    /// sends whose completions have arrived (read here from the error queues, or the ring).
    fn poll_completions(&mut self) -> usize {
        let n = self.poll_zero_copy();
        std::mem::take(&mut self.completed) + n
    }

    /// Buffers held for zero-copy sends in flight.
    fn in_flight(&self) -> usize {
        self.zc_held
    }

    fn send_counters(&self) -> SendCounters {
        self.sends
    }

    fn stats(&self) -> SocketStats {
        let mut s = self.stats;
        s.zero_copy_sends = self.sends.zero_copy_sends;
        s.draining = self.zc.values().filter(|z| z.closed).count() as u64;
        s.uring_enters = self.uring.as_ref().map_or(0, |r| r.enters());
        s
    }
}

impl Drop for TcpSockets {
    /// Waits up to 1 s for the zero-copy completions of closed connections; the buffers of any
    /// that do not arrive are leaked rather than reused, since the kernel may still read them.
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.zc.values().any(|z| z.inflight.sends() > 0) && Instant::now() < deadline {
            self.poll_zero_copy();
            if self.zc.values().any(|z| z.inflight.sends() > 0) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for (_, z) in self.zc.drain() {
            std::mem::forget(z.inflight);
        }
    }
}

impl std::fmt::Debug for TcpSockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSockets")
            .field("listener", &self.listener)
            .field("zero_copy", &self.zero_copy)
            .field("stats", &self.stats())
            .finish()
    }
}
