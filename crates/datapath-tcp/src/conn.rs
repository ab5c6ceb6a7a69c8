//! One connection's state, and the receive side and life cycle of a [`TcpDatapath`]'s
//! connections: reading under backpressure ([`crate::flow`]), partial frames under the memory
//! cap ([`crate::budget`]), the timeouts, and closing without losing a reply
//! (`docs/tcp.md`, "Backpressure", "Memory" and "Closing").

use std::io::{self, Read};
use std::net::{Shutdown, SocketAddrV4, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use cornflakes_datapath::{ConnId, RxMsg};

use crate::budget::Holder;
use crate::flow::{Carrier, Inbox, ReplyRoom};
use crate::frame::{DeframeError, Deframer};
use crate::sys;
use crate::txq::{TxQueue, ZcInFlight};
use crate::TcpDatapath;

/// How often the timeouts are checked (at most; only while something is timed).
pub(crate) const TICK: Duration = Duration::from_millis(20);
/// Least time between two trims of the pinned memory after connections closed.
pub(crate) const TRIM_EVERY: Duration = Duration::from_secs(1);
/// Bytes read per call while discarding what follows a bad frame.
const DISCARD_CHUNK: usize = 64 << 10;

/// What may still be read from a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// Frames are read and handed over.
    Open,
    /// The peer ended its stream: nothing more to read. Closed once every request read is
    /// answered and the replies are sent.
    Ended,
    /// The stream stopped being valid framing. The frames before that point are handed over
    /// and answered; once the replies are sent the datapath sends a FIN and reads (and
    /// discards) whatever still comes for up to [`TcpConfig::linger`](crate::TcpConfig::linger),
    /// so the peer's TCP sees no reset while the replies may still be unread, then closes.
    Bad,
}

/// One TCP connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub id: u32,
    pub stream: TcpStream,
    pub peer: SocketAddrV4,
    pub outgoing: bool,
    pub rx: Deframer,
    pub tx: TxQueue,
    pub zc: ZcInFlight,
    /// The reply room its requests need (none for a connection that carries replies).
    pub room: ReplyRoom,
    /// Requests read and not yet handed over, and the replies reserved this burst.
    pub inbox: Inbox,
    pub input: Input,
    /// Events registered with epoll.
    pub interest: u32,
    /// The last send found the socket buffer full: wait for EPOLLOUT.
    pub blocked: bool,
    /// Since when the socket buffer has been full with bytes still queued, nothing taken.
    pub stalled_since: Option<Instant>,
    /// Lingering after a bad stream (FIN sent): closed at this instant at the latest.
    pub linger_until: Option<Instant>,
    /// `SO_ZEROCOPY` is on for this socket.
    pub zero_copy: bool,
    /// In the datapath's list of connections with queued sends.
    pub dirty: bool,
    /// In the datapath's list of stalled connections.
    pub stall_listed: bool,
    /// Pinned bytes of its partial frame charged to the datapath's cap.
    pub charged: usize,
    /// Evicted or timed out: closed at the start of the next burst, not read meanwhile.
    pub doomed: bool,
}

impl Conn {
    /// Whether the datapath reads this connection now: input open, no request held, and room
    /// for the reply of at least one more.
    pub fn readable(&self) -> bool {
        self.input == Input::Open
            && !self.doomed
            && self.inbox.is_empty()
            && self.room.admits(self.tx.bytes(), 0)
    }

    /// The epoll events this connection waits for.
    pub fn wanted(&self) -> u32 {
        let rd = self.readable() || self.linger_until.is_some();
        (if rd { sys::IN } else { 0 }) | if self.blocked { sys::OUT } else { 0 }
    }

    /// Everything read was handed over and answered (no reservation left), and sent.
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

    fn queued(&self) -> usize {
        self.tx.bytes()
    }

    fn room(&self) -> ReplyRoom {
        self.room
    }

    fn doomed(&self) -> bool {
        self.doomed
    }

    fn endpoint(&self) -> (ConnId, SocketAddrV4) {
        (ConnId(self.id), self.peer)
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
pub(crate) enum Close {
    /// The peer ended the stream and everything it asked for was answered and sent.
    Done,
    /// A socket error (reset, broken pipe).
    Failed,
    /// The stream is not valid framing (closed after the replies to the frames before it).
    BadStream,
    /// Its peer read nothing for [`TcpConfig::stall_timeout`](crate::TcpConfig::stall_timeout).
    Stalled,
    /// A frame unfinished [`TcpConfig::frame_timeout`](crate::TcpConfig::frame_timeout) after
    /// its first byte.
    FrameTimeout,
    /// Its partial frame gave way to others under the cap on partial frames.
    Evicted,
}

impl TcpDatapath {
    /// The last burst is over: the reservations of its requests lapse, connections evicted or
    /// timed out during it close, and connections whose input ended are closed (or linger)
    /// once drained.
    pub(crate) fn end_burst(&mut self) {
        self.closing.append(&mut self.doomed);
        let mut touched = std::mem::take(&mut self.touched);
        self.requests.end_burst(&mut self.conns, &mut touched);
        for id in touched.drain(..) {
            self.settle_conn(id);
        }
        self.touched = touched;
    }

    /// Hands over the held requests of every connection with room for their replies now.
    pub(crate) fn deliver_ready(&mut self, out: &mut Vec<RxMsg>) {
        let mut touched = std::mem::take(&mut self.touched);
        self.requests
            .deliver_ready(&mut self.conns, out, &mut touched);
        for id in touched.drain(..) {
            self.settle_conn(id);
        }
        self.touched = touched;
    }

    /// Reads what `id` has (up to the read budget) while it has reply room, handing over
    /// complete frames and holding those beyond the room.
    pub(crate) fn read_conn(&mut self, id: u32, out: &mut Vec<RxMsg>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.linger_until.is_some() {
            self.discard(id);
            return;
        }
        let before = c.rx.stats();
        for _ in 0..self.cfg.read_budget {
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            if !c.readable() || !c.room.admits(c.tx.bytes(), c.inbox.owed()) {
                break;
            }
            // A large frame's buffer grows with the bytes that arrived, counting those waiting
            // in the socket; others' oldest partial frames give way if that passes the cap.
            let waiting = if c.rx.asks_waiting() {
                sys::bytes_readable(c.stream.as_fd())
            } else {
                0
            };
            let extra = c.rx.growth(&self.mem, waiting).saturating_sub(c.charged);
            if extra > 0 && self.partials.held() + extra > self.partials.limit() {
                self.make_room(extra, id);
            }
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            let space = match c.rx.space_for(&self.mem, waiting) {
                Ok(s) => s,
                Err(_) => {
                    // Level-triggered: the data stays in the socket until a buffer is free.
                    self.counters.no_rx_buffers += 1;
                    break;
                }
            };
            let want = space.len();
            match c.stream.read(space) {
                Ok(0) => {
                    if c.rx.partial_bytes() > 0 {
                        self.stats.partial_frames_lost += 1;
                        self.counters.truncated += 1;
                    }
                    c.rx.reset();
                    self.stats.peer_closed += 1;
                    c.input = Input::Ended;
                    break;
                }
                Ok(n) => {
                    let r = c.rx.filled(n, &self.mem, &mut self.rx_frames);
                    self.requests.admit(id, c, &mut self.rx_frames, out);
                    if let Err(e) = r {
                        // The frames before the bad bytes are answered before the close.
                        if matches!(e, DeframeError::Frame(_)) {
                            self.counters.bad_framing += 1;
                        }
                        c.rx.reset();
                        c.input = Input::Bad;
                        break;
                    }
                    if n < want {
                        c.rx.settle(&self.mem);
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.rx.settle(&self.mem);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    if c.rx.partial_bytes() > 0 {
                        self.stats.partial_frames_lost += 1;
                        self.counters.truncated += 1;
                    }
                    self.closing.push((id, Close::Failed));
                    break;
                }
            }
        }
        if let Some(c) = self.conns.get_mut(&id) {
            if !c.readable() {
                // Not read for a while (its requests wait for reply room): a cut frame leaves
                // the read buffer it arrived in.
                c.rx.settle(&self.mem);
            }
            let after = c.rx.stats();
            self.stats.gathered += after.gathered - before.gathered;
            self.stats.gathered_bytes += after.gathered_bytes - before.gathered_bytes;
        }
        self.charge_partial(id);
        self.settle_conn(id);
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

    /// Makes the partial frames that started longest ago, other than `except`'s, give way until
    /// `extra` more bytes fit under the cap (or none is left).
    fn make_room(&mut self, extra: usize, except: u32) {
        let mut dropped = std::mem::take(&mut self.victims);
        dropped.clear();
        let lost = self
            .partials
            .evict(extra, except, &mut self.conns, &mut dropped);
        self.doom(&dropped, lost, Close::Evicted);
        self.victims = dropped;
    }

    /// Closes the connections whose partial frames were dropped (`lost` of them with bytes of a
    /// frame) for `why`: at once, or — when requests of theirs handed over in this burst await
    /// replies — at the start of the next, once those are queued. They are not read meanwhile.
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

    /// After anything changed on `id`: its epoll interest, whether its partial frame is timed,
    /// and — once its input ended and everything it asked for is answered and sent — its
    /// close, or (after a bad stream) its FIN and linger.
    pub(crate) fn settle_conn(&mut self, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.doomed {
            return;
        }
        if c.input != Input::Open && c.linger_until.is_none() && c.drained() {
            if c.input == Input::Ended {
                self.closing.push((id, Close::Done));
                return;
            }
            // A FIN after the replies; whatever the peer still sends is read and dropped.
            let _ = c.stream.shutdown(Shutdown::Write);
            c.linger_until = Some(Instant::now() + self.cfg.linger);
            self.lingering.push(id);
        }
        if c.charged > 0 {
            self.partials.pause(id, !c.readable(), Instant::now());
        }
        let want = c.wanted();
        if want != c.interest {
            match self.epoll.modify(c.stream.as_fd(), want, id as u64) {
                Ok(()) => c.interest = want,
                Err(_) => self.closing.push((id, Close::Failed)),
            }
        }
    }

    /// Reads and drops what a lingering connection's peer still sends; closes it at the end
    /// of its stream or on an error.
    fn discard(&mut self, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        self.scratch.resize(DISCARD_CHUNK, 0);
        for _ in 0..self.cfg.read_budget {
            match c.stream.read(&mut self.scratch) {
                Ok(0) => {
                    self.closing.push((id, Close::BadStream));
                    return;
                }
                Ok(n) => self.stats.discarded_bytes += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closing.push((id, Close::BadStream));
                    return;
                }
            }
        }
    }

    /// A connection the datapath does not read now reported a hang-up or an error: its peer
    /// is gone (a reset), so what it asked for can never be answered.
    pub(crate) fn hung_up(&mut self, id: u32, events: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let gone = events & libc::EPOLLHUP as u32 != 0
            || matches!(c.stream.take_error(), Ok(Some(_)) | Err(_));
        if gone {
            self.closing.push((id, Close::Failed));
        }
    }

    /// The timeouts (partial frames, stalled peers, lingering closes) and the trim of the
    /// pinned memory after closes: checked every [`TICK`] while anything is timed.
    pub(crate) fn housekeeping(&mut self) {
        if self.partials.is_empty()
            && self.stalled.is_empty()
            && self.lingering.is_empty()
            && !self.trim_due
        {
            return;
        }
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
        let (conns, closing) = (&mut self.conns, &mut self.closing);
        self.stalled.retain(|id| {
            let Some(c) = conns.get_mut(id) else {
                return false;
            };
            match c.stalled_since {
                Some(t) if now.saturating_duration_since(t) >= timeout => {
                    closing.push((*id, Close::Stalled));
                    false
                }
                Some(_) => true,
                None => {
                    c.stall_listed = false;
                    false
                }
            }
        });
        self.lingering.retain(|id| match conns.get(id) {
            Some(c) if c.linger_until.is_some_and(|t| t <= now) => {
                closing.push((*id, Close::BadStream));
                false
            }
            Some(_) => true,
            None => false,
        });
        if self.trim_due && now >= self.next_trim {
            self.trim_due = false;
            self.next_trim = now + TRIM_EVERY;
            self.mem.trim();
        }
    }

    /// Closes the connections marked for closing. Requests held for want of reply room are
    /// dropped unexecuted (counted); queued replies are dropped with the connection.
    pub(crate) fn close_pending(&mut self) {
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
            self.trim_due = true;
            let _ = self.epoll.delete(c.stream.as_fd());
            if c.outgoing && self.by_peer.get(&c.peer) == Some(&ConnId(id)) {
                self.by_peer.remove(&c.peer);
            }
            // Nothing more will be sent: release what was queued.
            self.queued -= c.tx.clear();
            if c.zc.sends() > 0 {
                // The kernel may still read these buffers: keep them (and the socket, to read
                // their completions) until it says it is done.
                let _ = c.stream.shutdown(Shutdown::Both);
                self.draining.push(c);
            }
        }
    }
}
