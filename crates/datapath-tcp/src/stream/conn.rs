//! One connection's state, and the receive side and life cycle of a [`StreamDatapath`]'s
//! connections: reading under backpressure ([`crate::flow`]), partial frames under the memory
//! cap ([`crate::budget`]), the timeouts, the total cap on queued replies, and closing without
//! losing a reply (`docs/tcp.md`, "Backpressure", "Memory" and "Closing").

use std::io;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use cornflakes_datapath::{ConnId, RxMsg};

use super::{ByteStream, StreamConfig, StreamDatapath};
use crate::budget::Holder;
use crate::flow::{Carrier, Inbox, ReplyRoom};
use crate::frame::{DeframeError, Deframer};
use crate::txq::TxQueue;

/// How often the timeouts are checked (at most; only while something is timed).
pub(crate) const TICK: Duration = Duration::from_millis(20);
/// Least time between two trims of the pinned memory after connections closed.
pub(crate) const TRIM_EVERY: Duration = Duration::from_secs(1);
/// Bytes read per call while discarding what follows a bad frame.
const DISCARD_CHUNK: usize = 64 << 10;
/// A connection's peer must have taken nothing for this share of the stall timeout before the
/// cap on all queued replies may close it.
const EVICT_AFTER_STALL: u32 = 10;

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
    /// discards) whatever still comes for up to [`StreamConfig::linger`], so the peer's TCP
    /// sees no reset while the replies may still be unread, then closes (at once, on a device
    /// without a half-close).
    Bad,
}

/// One connection: the device's part (`io`) and the datapath's.
#[derive(Debug)]
pub(crate) struct Conn<S> {
    pub id: u32,
    pub io: S,
    pub peer: SocketAddrV4,
    pub outgoing: bool,
    pub rx: Deframer,
    pub tx: TxQueue,
    /// Bytes the device took and will report done later ([`super::Wrote::in_flight`]).
    pub unfinished: usize,
    /// The reply room its requests need (none for a connection that carries replies).
    pub room: ReplyRoom,
    /// Requests read and not yet handed over, and the replies reserved this burst.
    pub inbox: Inbox,
    pub input: Input,
    /// The last write found the device full: wait until it is writable.
    pub blocked: bool,
    /// A batched write of this flush found the device full: the flush does not write it again.
    pub batch_blocked: bool,
    /// Since when bytes have been queued (or in flight) with nothing taken by the peer.
    pub stalled_since: Option<Instant>,
    /// Lingering after a bad stream (FIN sent): closed at this instant at the latest.
    pub linger_until: Option<Instant>,
    /// In the datapath's list of connections with queued sends.
    pub dirty: bool,
    /// In the datapath's list of stalled connections.
    pub stall_listed: bool,
    /// Pinned bytes of its partial frame charged to the datapath's cap.
    pub charged: usize,
    /// Evicted or timed out: closed at the start of the next burst, not read meanwhile.
    pub doomed: bool,
}

impl<S> Conn<S> {
    /// A new connection, carrying replies (`outgoing`: opened by this datapath) or requests.
    pub fn new(id: u32, io: S, peer: SocketAddrV4, outgoing: bool, cfg: &StreamConfig) -> Conn<S> {
        let room = ReplyRoom {
            limit: cfg.tx_limit,
            // A connection this datapath opened carries replies: reading it never waits.
            reserve: if outgoing {
                0
            } else {
                cfg.reply_reserve.unwrap_or(cfg.tx_limit)
            },
        };
        Conn {
            id,
            io,
            peer,
            outgoing,
            rx: Deframer::new(cfg.max_message_len, cfg.rx_buffer),
            tx: TxQueue::default(),
            unfinished: 0,
            room,
            inbox: Inbox::default(),
            input: Input::Open,
            blocked: false,
            batch_blocked: false,
            stalled_since: None,
            linger_until: None,
            dirty: false,
            stall_listed: false,
            charged: 0,
            doomed: false,
        }
    }

    /// Bytes queued and not yet sent, or sent and not yet done.
    #[inline]
    pub fn queued(&self) -> usize {
        self.tx.bytes() + self.unfinished
    }

    /// Whether the datapath reads this connection now: input open, no request held, and room
    /// for the reply of at least one more.
    pub fn readable(&self) -> bool {
        self.input == Input::Open
            && !self.doomed
            && self.inbox.is_empty()
            && self.room.admits(self.queued(), 0)
    }

    /// Everything read was handed over and answered (no reservation left), and sent.
    fn drained(&self) -> bool {
        self.inbox.is_empty() && self.inbox.owed() == 0 && self.queued() == 0
    }
}

impl<S> Carrier for Conn<S> {
    fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    fn inbox_mut(&mut self) -> &mut Inbox {
        &mut self.inbox
    }

    fn queued(&self) -> usize {
        Conn::queued(self)
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

impl<S> Holder for Conn<S> {
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
    /// A socket error (reset, broken pipe), or a failed operation of the device.
    Failed,
    /// The stream is not valid framing (closed after the replies to the frames before it).
    BadStream,
    /// Its peer read nothing for [`StreamConfig::stall_timeout`].
    Stalled,
    /// A frame unfinished [`StreamConfig::frame_timeout`] after its first byte.
    FrameTimeout,
    /// Its partial frame gave way to others under the cap on partial frames.
    Evicted,
    /// Its peer stalled longest when all connections' queues were at the total cap.
    Overflow,
}

impl<D: ByteStream> StreamDatapath<D> {
    /// The last burst is over: the reservations of its requests lapse, connections evicted or
    /// timed out during it close, and connections whose input ended are closed (or linger)
    /// once drained.
    pub(super) fn end_burst(&mut self) {
        self.closing.append(&mut self.doomed);
        let mut touched = std::mem::take(&mut self.touched);
        self.requests.end_burst(&mut self.conns, &mut touched);
        for id in touched.drain(..) {
            self.settle_conn(id);
        }
        self.touched = touched;
    }

    /// Hands over the held requests of every connection with room for their replies now, and
    /// notes whether any request of this burst waits for room under the total cap alone (every
    /// connection holding requests is tried here, so that is known afresh each burst).
    pub(super) fn deliver_ready(&mut self, out: &mut Vec<RxMsg>) {
        let mut touched = std::mem::take(&mut self.touched);
        self.requests
            .deliver_ready(&mut self.conns, out, &mut touched);
        for id in touched.drain(..) {
            self.settle_conn(id);
        }
        self.touched = touched;
        self.starving = self.requests.take_starved();
    }

    /// Reads what `id` has (up to the read budget) while it has reply room, handing over
    /// complete frames and holding those beyond the room.
    pub(super) fn read_conn(&mut self, id: u32, out: &mut Vec<RxMsg>) {
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
            if !c.readable() || !c.room.admits(c.queued(), c.inbox.owed()) {
                if c.input == Input::Open && !c.doomed {
                    self.stats.room_waits += 1;
                }
                break;
            }
            // A large frame's buffer grows with the bytes that arrived, counting those known
            // to wait; others' oldest partial frames give way if that passes the cap.
            let waiting = if c.rx.asks_waiting() {
                self.dev.waiting(id, &c.io)
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
                    // The data stays in the device until a buffer is free (it reports the
                    // connection ready again).
                    self.counters.no_rx_buffers += 1;
                    break;
                }
            };
            let want = space.len();
            match self.dev.read(id, &mut c.io, space) {
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

    /// A request waits for room under the total cap on queued bytes alone: closes the
    /// connections whose peers have taken nothing for longest (at least a tenth of the stall
    /// timeout), until a largest reservation fits. Their requests still waiting never run; what
    /// was queued for them is dropped with them. With none stalled that long the request keeps
    /// waiting (the peers that read free the room).
    fn make_reply_room(&mut self) {
        let need = self
            .requests
            .shared()
            .shortfall(self.cfg.reply_reserve.unwrap_or(0));
        if need == 0 {
            self.starving = false;
            return;
        }
        let Some(oldest) = Instant::now().checked_sub(self.cfg.stall_timeout / EVICT_AFTER_STALL)
        else {
            return;
        };
        let mut stalled: Vec<(Instant, u32, usize)> = self
            .stalled
            .iter()
            .filter_map(|id| {
                let c = self.conns.get(id)?;
                let since = c.stalled_since.filter(|t| *t <= oldest)?;
                (!c.doomed).then_some((since, *id, c.queued()))
            })
            .collect();
        stalled.sort_unstable();
        let mut freed = 0;
        let mut victims = std::mem::take(&mut self.victims);
        victims.clear();
        for (_, id, bytes) in stalled {
            if freed >= need {
                break;
            }
            freed += bytes;
            if let Some(c) = self.conns.get_mut(&id) {
                c.doomed = true;
                victims.push(id);
            }
        }
        self.doom(&victims, 0, Close::Overflow);
        self.victims = victims;
        // Until they are closed (at the end of this burst or the start of the next) the room
        // is not free yet: look again then.
        self.starving = freed < need;
    }

    /// Closes the connections whose partial frames were dropped (`lost` of them with bytes of a
    /// frame) or whose peers stalled, for `why`: at once, or — when requests of theirs handed
    /// over in this burst await replies — at the start of the next, once those are queued.
    /// They are not read meanwhile.
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

    /// After anything changed on `id`: what the device watches it for, whether its partial
    /// frame is timed, and — once its input ended and everything it asked for is answered and
    /// sent — its close, or (after a bad stream) its FIN and linger.
    pub(super) fn settle_conn(&mut self, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.doomed {
            return;
        }
        if c.input != Input::Open && c.linger_until.is_none() && c.drained() {
            if c.input == Input::Ended || !self.dev.shutdown(&mut c.io) {
                let why = match c.input {
                    Input::Bad => Close::BadStream,
                    _ => Close::Done,
                };
                self.closing.push((id, why));
                return;
            }
            // A FIN went after the replies; whatever the peer still sends is read and dropped.
            c.linger_until = Some(Instant::now() + self.cfg.linger);
            self.lingering.push(id);
        }
        let readable = c.readable();
        if c.charged > 0 {
            self.partials.pause(id, !readable, Instant::now());
        }
        let read = readable || c.linger_until.is_some();
        if self.dev.watch(id, &mut c.io, read, c.blocked).is_err() {
            self.closing.push((id, Close::Failed));
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
            match self.dev.read(id, &mut c.io, &mut self.scratch) {
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

    /// A connection the datapath does not read now reported a hang-up or an error: if its
    /// peer is gone (a reset), what it asked for can never be answered.
    pub(super) fn hung_up(&mut self, id: u32, hangup: bool) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if hangup || self.dev.failed(id, &c.io) {
            self.closing.push((id, Close::Failed));
        }
    }

    /// The timeouts (partial frames, stalled peers, lingering closes), the room the total cap
    /// on queued replies keeps waiting requests from, and the trim of the pinned memory after
    /// closes: checked every [`TICK`] while anything is timed.
    pub(super) fn housekeeping(&mut self) {
        if self.partials.is_empty()
            && self.stalled.is_empty()
            && self.lingering.is_empty()
            && !self.trim_due
            && !self.starving
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
        if self.starving {
            self.make_reply_room();
        }
        if self.trim_due && now >= self.next_trim {
            self.trim_due = false;
            self.next_trim = now + TRIM_EVERY;
            self.mem.trim();
        }
    }

    /// Closes the connections marked for closing. Requests held for want of reply room are
    /// dropped unexecuted (counted); queued replies are dropped with the connection.
    pub(super) fn close_pending(&mut self) {
        while let Some((id, why)) = self.closing.pop() {
            let Some(mut c) = self.conns.remove(&id) else {
                continue;
            };
            let s = &mut self.stats;
            match why {
                Close::Done => {}
                Close::Failed => s.failed += 1,
                Close::BadStream => s.bad_streams += 1,
                Close::Stalled => s.stall_timeouts += 1,
                Close::FrameTimeout => s.frame_timeouts += 1,
                Close::Evicted => s.partial_evictions += 1,
                Close::Overflow => s.reply_evictions += 1,
            }
            s.closed += 1;
            s.unexecuted_dropped += c.inbox.clear() as u64;
            self.partials.remove(id);
            self.trim_due = true;
            if c.outgoing && self.by_peer.get(&c.peer) == Some(&ConnId(id)) {
                self.by_peer.remove(&c.peer);
            }
            // Nothing more will be sent: release what was queued.
            self.requests.shared_mut().sub(c.queued());
            let n = c.tx.clear();
            self.queued -= n;
            self.completed += n;
            self.dev.close(id, c.io);
        }
    }
}
