//! The runtime's datapath traits over a [`StreamDatapath`], and what they drive: a burst polls
//! the device and handles its [`Event`]s, sends are queued on their connection (replies
//! against their reservation), and a flush writes every connection's queue.

use std::io;
use std::net::SocketAddrV4;
use std::time::Instant;

use cornflakes_datapath::{Completions, Connect, DatapathMemory, DropCounters, Receive, Transmit};
use cornflakes_datapath::{ConnId, Msg, RxMsg, SendCounters, SendError, SendObject};
use cornflakes_mem::{PinnedMemory, RcBuf};

use super::conn::{Close, Conn, Input};
use super::{ByteStream, Event, Ready, StreamDatapath, Wrote};
use crate::flow::SharedRoom;
use crate::frame::HEADER_LEN;
use crate::txq::{self, FramedObject, TxQueue};

impl<D: ByteStream> StreamDatapath<D> {
    /// Handles one event of the device.
    fn handle(&mut self, ev: Event<D::Conn>, out: &mut Vec<RxMsg>) {
        match ev {
            Event::Accepted(c, peer) => {
                if self.conns.len() >= self.cfg.max_conns {
                    self.counters.conn_table_full += 1;
                    self.dev.refuse(c);
                } else {
                    match self.add_conn(c, peer, false) {
                        Ok(_) => self.stats.accepted += 1,
                        Err(_) => self.stats.failed += 1,
                    }
                }
            }
            Event::AcceptFailed => self.stats.failed += 1,
            Event::NotIpv4 => self.counters.non_ipv4 += 1,
            Event::Ready(id, r) => self.on_ready(id, r, out),
            Event::Done(id, bytes) => {
                let Some(c) = self.conns.get_mut(&id) else {
                    return;
                };
                let done = bytes.min(c.unfinished);
                c.unfinished -= done;
                self.requests.shared_mut().sub(done);
                stall_clock(c, true, &mut self.stalled);
                self.settle_conn(id);
            }
            Event::Failed(id) => self.closing.push((id, Close::Failed)),
        }
    }

    /// Connection `id` is ready: writes what waited for room, reads what arrived.
    fn on_ready(&mut self, id: u32, r: Ready, out: &mut Vec<RxMsg>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let hup = r.hangup || r.peer_ended || r.error;
        let r = self.dev.ready(id, &mut c.io, r);
        let read = r.read || r.hangup || r.peer_ended || r.error;
        // Input closed and a hang-up: a write tells whether the peer is gone.
        let rx_closed = c.input != Input::Open;
        if (r.write || (hup && rx_closed)) && !self.write_conn(id, true) {
            self.closing.push((id, Close::Failed));
            return;
        }
        if read {
            match self.conns.get(&id) {
                Some(c) if c.readable() || c.linger_until.is_some() => self.read_conn(id, out),
                Some(_) => self.hung_up(id, r.hangup),
                None => {}
            }
        }
    }

    /// Writes `id`'s queue until it is empty or the device is full (with `send` false, only
    /// settles what the device watches: a batch just found it full). False when the
    /// connection failed.
    fn write_conn(&mut self, id: u32, send: bool) -> bool {
        let Some(c) = self.conns.get_mut(&id) else {
            return true;
        };
        c.dirty = false;
        let ok = if send && !c.tx.is_empty() {
            let before = (c.tx.len(), c.queued());
            let r = self.dev.write(id, &mut c.io, &mut c.tx);
            let shared = self.requests.shared_mut();
            took(c, before, r, &mut self.queued, shared, &mut self.stalled)
        } else {
            stall_clock(c, false, &mut self.stalled);
            true
        };
        if ok {
            self.settle_conn(id);
        }
        ok
    }

    /// A flush of several connections: the device's batch (io_uring) takes the first write of
    /// each that it can; those it found full are not written again by this flush.
    fn write_batch(&mut self, ids: &[u32]) {
        let mut any = false;
        for &id in ids {
            if let Some(c) = self.conns.get_mut(&id) {
                any |= self.dev.batch_add(id, &mut c.io, &c.tx);
            }
        }
        if !any {
            return;
        }
        self.dev.batch_submit();
        for &id in ids {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            let before = (c.tx.len(), c.queued());
            let Some(r) = self.dev.batch_take(id, &mut c.io, &mut c.tx) else {
                continue;
            };
            let blocked = r.as_ref().is_ok_and(|w| w.blocked);
            let shared = self.requests.shared_mut();
            if took(c, before, r, &mut self.queued, shared, &mut self.stalled) {
                c.batch_blocked = blocked;
            } else {
                self.closing.push((id, Close::Failed));
            }
        }
    }

    /// Queues a message of `len` bytes on `conn` (`push` appends its buffers): a reply to a
    /// request handed over in this burst against its reservation, whatever the queue holds;
    /// any other send only into the room no reply has reserved, on its connection and under
    /// the total cap.
    fn enqueue(
        &mut self,
        conn: ConnId,
        len: usize,
        push: impl FnOnce(&mut TxQueue),
    ) -> Result<(), SendError> {
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
        if !self.requests.reply(&mut c.inbox, c.room.reserve) {
            let frame = HEADER_LEN + len;
            if c.queued() + frame > c.room.unreserved(c.inbox.owed())
                || !self.requests.shared().admits(frame)
            {
                self.stats.tx_full += 1;
                return Err(SendError::Full);
            }
        }
        let (n, bytes) = (c.tx.len(), c.tx.bytes());
        push(&mut c.tx);
        self.queued += c.tx.len() - n;
        self.requests.shared_mut().add(c.tx.bytes() - bytes);
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn.0);
        }
        Ok(())
    }
}

/// Accounts for a write of `c` (its queue's buffers and bytes `before` it): what left the queue
/// (`queued` buffers of all connections, the bytes `shared` by all), what the device holds in
/// flight, whether the peer took anything ([`stall_clock`]). False when the connection failed.
fn took<S>(
    c: &mut Conn<S>,
    before: (usize, usize),
    r: io::Result<Wrote>,
    queued: &mut usize,
    shared: &mut SharedRoom,
    stalled: &mut Vec<u32>,
) -> bool {
    *queued -= before.0 - c.tx.len();
    let w = r.as_ref().copied().unwrap_or_default();
    c.unfinished += w.in_flight;
    c.blocked = w.blocked;
    shared.sub(before.1 - c.queued());
    if r.is_err() {
        return false;
    }
    stall_clock(c, w.sent > 0, stalled);
    true
}

/// Bytes of `c`'s queue are no longer waiting for the peer (`progress`: it took some): the
/// stall clock stops, or starts again while bytes still wait (listing `c` in `stalled`).
fn stall_clock<S>(c: &mut Conn<S>, progress: bool, stalled: &mut Vec<u32>) {
    if progress {
        c.stalled_since = None;
    }
    if c.tx.is_empty() {
        c.blocked = false;
    }
    if !(c.blocked || c.unfinished > 0) {
        c.stalled_since = None;
    } else if c.stalled_since.is_none() {
        c.stalled_since = Some(Instant::now());
        if !c.stall_listed {
            c.stall_listed = true;
            stalled.push(c.id);
        }
    }
}

impl<D: ByteStream> DatapathMemory for StreamDatapath<D> {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl<D: ByteStream> Connect for StreamDatapath<D> {
    /// The open outgoing connection to `peer`, or a new one ([`StreamDatapath::open`]).
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

impl<D: ByteStream> Receive for StreamDatapath<D> {
    /// Polls the device (again while it says more completed meanwhile), handles what it found
    /// — new connections, reads, writes that waited for room, completions — hands over the
    /// complete requests that have room for their replies (held ones first), closes what is
    /// done, and checks the timeouts. The requests of one call must be answered (their
    /// replies queued) before the next call: the room reserved for their replies lapses then.
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        let before = out.len();
        self.end_burst();
        let mut events = std::mem::take(&mut self.events);
        let mut result = Ok(());
        for round in 0.. {
            events.clear();
            let again = match self.dev.poll(round, &mut events) {
                Ok(again) => again,
                Err(e) => {
                    result = Err(e);
                    false
                }
            };
            for ev in events.drain(..) {
                self.handle(ev, out);
            }
            if !again {
                break;
            }
            self.close_pending();
        }
        self.events = events;
        self.deliver_ready(out);
        self.housekeeping();
        self.close_pending();
        result.map(|()| out.len() - before)
    }

    fn counters(&self) -> DropCounters {
        let mut c = self.counters;
        c.delivered = self.requests.delivered();
        c
    }
}

impl<D: ByteStream> Transmit for StreamDatapath<D> {
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
        let threshold = self.dev.zero_copy_threshold();
        self.enqueue(conn, f.total, |tx| {
            f.queue(tx, threshold);
        })
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        let (head, total) = txq::sga_header(&self.mem, msg, entries)?;
        let threshold = self.dev.zero_copy_threshold();
        self.enqueue(conn, total, |tx| {
            tx.push(head, false);
            for e in entries {
                tx.push(e.clone(), e.len() >= threshold);
            }
        })
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        let bufs = txq::framed_copy(&self.mem, msg, data)?;
        self.enqueue(conn, data.len(), |tx| {
            for b in bufs {
                tx.push(b, false);
            }
        })
    }

    /// Writes every connection's queue (kernel TCP: one gathered `sendmsg` each, more when
    /// the kernel takes part). What a full device leaves queued is written when it is writable
    /// again, from [`Receive::recv_burst`]; nothing is dropped. A connection whose write fails
    /// (reset, broken pipe) is closed and counted ([`super::StreamStats::failed`]); that is
    /// not an error of the flush.
    fn flush(&mut self) -> Result<(), SendError> {
        let dirty = std::mem::take(&mut self.dirty);
        if dirty.len() > 1 {
            self.write_batch(&dirty);
        }
        for &id in &dirty {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            let send = !std::mem::take(&mut c.batch_blocked);
            if !self.write_conn(id, send) {
                self.closing.push((id, Close::Failed));
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        self.close_pending();
        Ok(())
    }

    fn send_counters(&self) -> Option<SendCounters> {
        Some(self.dev.send_counters())
    }
}

impl<D: ByteStream> Completions for StreamDatapath<D> {
    /// Buffers released since the last call: those the device dropped (sends it took,
    /// zero-copy completions it read) and those of closed connections' queues.
    fn poll_completions(&mut self) -> usize {
        self.dev.poll_completions() + std::mem::take(&mut self.completed)
    }

    /// Buffers queued and not yet sent, plus those the device holds (zero-copy sends in
    /// flight).
    fn in_flight(&self) -> usize {
        self.queued + self.dev.in_flight()
    }
}

impl<D: ByteStream> Drop for StreamDatapath<D> {
    /// Closes every connection (the device then keeps what the kernel may still read).
    fn drop(&mut self) {
        let ids: Vec<u32> = self.conns.keys().copied().collect();
        self.closing
            .extend(ids.into_iter().map(|id| (id, Close::Done)));
        self.close_pending();
    }
}
