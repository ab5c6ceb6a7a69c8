//! Backpressure on a stream that carries requests: nothing read is handed to the application
//! unless there is room to queue its reply (`docs/tcp.md`, "Backpressure").
//!
//! A reply's size is unknown before the request runs, so each request handed over reserves
//! [`ReplyRoom::reserve`] bytes (by default the largest frame) of its connection's send queue
//! limit, and the reply it leads to is queued against that reservation, never refused. Requests
//! read beyond the room wait, in order, in the connection's [`Inbox`] — not run, not lost —
//! and the connection is not read further until they are handed over; the kernel's receive
//! window then stops the peer. So a peer that pipelines more than fits gets every reply, in
//! order, as fast as it reads them, and a peer that does not read at all stalls only itself
//! (and is closed after a timeout, its waiting requests never run).
//!
//! All connections together share one more limit ([`SharedRoom`]): the bytes queued for
//! sending and the reservations of the current burst may not pass a total cap, so many peers
//! that do not read cannot each hold a full queue. A request the total keeps waiting is held
//! like one its own connection has no room for, and the datapath makes room by closing the
//! connections whose peers have read nothing for longest (`docs/tcp.md`, "A cap on the
//! replies all connections queue").
//!
//! Plain bookkeeping (no sockets), shared by the stream datapaths.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;

use cornflakes_datapath::{ConnId, Msg, RxMsg};
use cornflakes_mem::RcBuf;

/// How much send-queue room a request needs before it is handed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyRoom {
    /// Most bytes queued for sending on one connection (the datapath's `tx_limit`).
    pub limit: usize,
    /// Bytes reserved per request handed over; 0 for a connection that carries replies (a
    /// client's), whose reading never waits for send room.
    pub reserve: usize,
}

impl ReplyRoom {
    /// Whether one more request may be handed over on a connection with `queued` bytes waiting
    /// to be sent and `owed` replies already reserved.
    #[inline]
    pub fn admits(&self, queued: usize, owed: usize) -> bool {
        queued.saturating_add((owed + 1).saturating_mul(self.reserve)) <= self.limit
    }

    /// Bytes of the limit not reserved for `owed` replies: what other sends may fill.
    #[inline]
    pub fn unreserved(&self, owed: usize) -> usize {
        self.limit.saturating_sub(owed.saturating_mul(self.reserve))
    }
}

/// The room the replies of all connections share: bytes queued for sending (or in flight, where
/// a datapath counts those) on every connection, plus the reservations of the requests handed
/// over in the current burst, against a cap.
#[derive(Clone, Copy, Debug)]
pub struct SharedRoom {
    limit: usize,
    queued: usize,
    reserved: usize,
    peak: usize,
}

impl SharedRoom {
    /// Room for `limit` bytes, all connections together.
    pub fn new(limit: usize) -> SharedRoom {
        SharedRoom {
            limit,
            queued: 0,
            reserved: 0,
            peak: 0,
        }
    }

    /// The cap.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes queued now (reservations not counted).
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// The most bytes queued and reserved at once so far.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Whether `bytes` more fit beside what is queued and reserved.
    #[inline]
    pub fn admits(&self, bytes: usize) -> bool {
        self.queued
            .saturating_add(self.reserved)
            .saturating_add(bytes)
            <= self.limit
    }

    /// How many bytes must be freed for `bytes` more to fit (0: they fit).
    pub fn shortfall(&self, bytes: usize) -> usize {
        (self.queued + self.reserved + bytes).saturating_sub(self.limit)
    }

    /// `bytes` more were queued (a reply against its reservation may pass the cap by what it
    /// exceeds the reservation).
    #[inline]
    pub fn add(&mut self, bytes: usize) {
        self.queued += bytes;
        self.peak = self.peak.max(self.queued + self.reserved);
    }

    /// `bytes` queued left: sent, or dropped with their connection.
    #[inline]
    pub fn sub(&mut self, bytes: usize) {
        debug_assert!(bytes <= self.queued);
        self.queued -= bytes.min(self.queued);
    }

    fn reserve(&mut self, bytes: usize) {
        self.reserved += bytes;
        self.peak = self.peak.max(self.queued + self.reserved);
    }

    fn unreserve(&mut self, bytes: usize) {
        self.reserved -= bytes.min(self.reserved);
    }
}

/// Requests read from one connection and not yet handed to the application (held for want of
/// reply room), and the replies reserved for the requests handed over in this burst.
#[derive(Debug, Default)]
pub struct Inbox {
    held: VecDeque<(Msg, RcBuf)>,
    owed: usize,
    /// In [`Requests`]' list of connections handed requests this burst.
    owing_listed: bool,
    /// In [`Requests`]' list of connections holding requests.
    ready_listed: bool,
}

impl Inbox {
    /// Requests held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Whether no request is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Replies reserved and not yet queued in this burst.
    pub fn owed(&self) -> usize {
        self.owed
    }

    /// Hands the held requests, then `frames` (drained, in order), to `deliver` while `room`
    /// admits one more given `queued` bytes waiting to be sent, and `shared` has room for its
    /// reservation (which it takes); holds the rest. Returns how many were newly held, and
    /// whether `shared` alone kept one waiting.
    pub fn admit(
        &mut self,
        frames: &mut Vec<(Msg, RcBuf)>,
        room: ReplyRoom,
        queued: usize,
        shared: &mut SharedRoom,
        mut deliver: impl FnMut(Msg, RcBuf),
    ) -> (usize, bool) {
        let before = self.held.len();
        self.held.extend(frames.drain(..));
        let newly = self.held.len() - before;
        let mut starved = false;
        while room.admits(queued, self.owed) && !self.held.is_empty() {
            if !shared.admits(room.reserve) {
                starved = true;
                break;
            }
            let Some((msg, data)) = self.held.pop_front() else {
                break;
            };
            if room.reserve > 0 {
                self.owed += 1;
                shared.reserve(room.reserve);
            }
            deliver(msg, data);
        }
        (newly.min(self.held.len()), starved)
    }

    /// A reply is being queued: uses one reservation if any is left (then the reply is
    /// queued whatever its size), and says whether it did.
    #[inline]
    pub fn reply(&mut self) -> bool {
        if self.owed > 0 {
            self.owed -= 1;
            true
        } else {
            false
        }
    }

    /// The burst is over: reservations of requests that got no reply lapse.
    pub fn end_burst(&mut self) {
        self.owed = 0;
    }

    /// Drops the held requests (their connection is closing; they never ran). Returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.held.len();
        self.held.clear();
        n
    }
}

/// What [`Requests`] needs of a connection.
pub trait Carrier {
    /// Its inbox.
    fn inbox(&self) -> &Inbox;
    /// Its inbox, to change.
    fn inbox_mut(&mut self) -> &mut Inbox;
    /// Bytes waiting to be sent on it (and, where the datapath counts them, in flight).
    fn queued(&self) -> usize;
    /// The reply room its requests need.
    fn room(&self) -> ReplyRoom;
    /// It is being closed (evicted, timed out): none of its requests is handed over any more.
    fn doomed(&self) -> bool;
    /// Its id and peer, for the messages handed over.
    fn endpoint(&self) -> (ConnId, SocketAddrV4);
}

/// The requests of one datapath's connections on their way to the application: the
/// connections handed requests in the current burst (whose reservations lapse when it ends)
/// and those holding requests for want of room (handed over as room appears), with the counts.
/// Each connection's own part is its [`Inbox`]; the room they share is a [`SharedRoom`].
#[derive(Debug)]
pub struct Requests {
    owing: Vec<u32>,
    ready: Vec<u32>,
    delivered: u64,
    held: u64,
    shared: SharedRoom,
    /// A request was kept waiting by the shared room alone since the last
    /// [`take_starved`](Self::take_starved).
    starved: bool,
}

impl Default for Requests {
    /// No cap shared by the connections.
    fn default() -> Requests {
        Requests::new(usize::MAX)
    }
}

impl Requests {
    /// The connections' replies share `limit` bytes ([`SharedRoom`]).
    pub fn new(limit: usize) -> Requests {
        Requests {
            owing: Vec::new(),
            ready: Vec::new(),
            delivered: 0,
            held: 0,
            shared: SharedRoom::new(limit),
            starved: false,
        }
    }

    /// The room the connections share.
    pub fn shared(&self) -> &SharedRoom {
        &self.shared
    }

    /// The room the connections share, to count what they queue and send.
    pub fn shared_mut(&mut self) -> &mut SharedRoom {
        &mut self.shared
    }

    /// A reply is being queued on a connection with `inbox` whose requests reserve `reserve`
    /// bytes each: uses one of its reservations if any is left (its bytes then leave the
    /// shared reservations; the reply is queued whatever its size) and says whether it did.
    #[inline]
    pub fn reply(&mut self, inbox: &mut Inbox, reserve: usize) -> bool {
        let r = inbox.reply();
        if r {
            self.shared.unreserve(reserve);
        }
        r
    }

    /// Whether a request was kept waiting by the shared room alone (with room on its own
    /// connection) since the last call.
    pub fn take_starved(&mut self) -> bool {
        std::mem::take(&mut self.starved)
    }

    /// Requests handed over so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Requests held for want of reply room so far (each counted once).
    pub fn held_for_room(&self) -> u64 {
        self.held
    }

    /// Hands connection `id`'s held requests, then `frames` (drained, in order), to `out` as
    /// far as its reply room allows, holds the rest. Returns how many were handed over.
    pub fn admit<C: Carrier>(
        &mut self,
        id: u32,
        c: &mut C,
        frames: &mut Vec<(Msg, RcBuf)>,
        out: &mut Vec<RxMsg>,
    ) -> usize {
        let (conn, peer) = c.endpoint();
        let (room, queued) = (c.room(), c.queued());
        let inbox = c.inbox_mut();
        let before = out.len();
        let (held, starved) = inbox.admit(frames, room, queued, &mut self.shared, |msg, data| {
            out.push(RxMsg {
                conn,
                peer,
                msg,
                data,
            })
        });
        self.held += held as u64;
        self.starved |= starved;
        let handed = out.len() - before;
        self.delivered += handed as u64;
        if inbox.owed() > 0 && !inbox.owing_listed {
            inbox.owing_listed = true;
            self.owing.push(id);
        }
        if !inbox.is_empty() && !inbox.ready_listed {
            inbox.ready_listed = true;
            self.ready.push(id);
        }
        handed
    }

    /// The burst is over: the reservations of the requests handed over in it lapse. Appends
    /// the connections concerned to `touched` (their state may have changed).
    pub fn end_burst<C: Carrier>(&mut self, conns: &mut HashMap<u32, C>, touched: &mut Vec<u32>) {
        self.shared.reserved = 0;
        for id in self.owing.drain(..) {
            if let Some(c) = conns.get_mut(&id) {
                let inbox = c.inbox_mut();
                inbox.end_burst();
                inbox.owing_listed = false;
                touched.push(id);
            }
        }
    }

    /// Hands over the held requests of every connection with room for their replies now (a
    /// doomed connection's are left to be dropped). Appends the connections concerned to
    /// `touched`.
    pub fn deliver_ready<C: Carrier>(
        &mut self,
        conns: &mut HashMap<u32, C>,
        out: &mut Vec<RxMsg>,
        touched: &mut Vec<u32>,
    ) {
        let ready = std::mem::take(&mut self.ready);
        for id in ready {
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            c.inbox_mut().ready_listed = false;
            if c.doomed() {
                continue;
            }
            // Re-listed by `admit` if requests are still held.
            self.admit(id, c, &mut Vec::new(), out);
            touched.push(id);
        }
    }

    /// Whether a held request could be handed over now.
    pub fn has_deliverable<C: Carrier>(&self, conns: &HashMap<u32, C>) -> bool {
        self.ready.iter().any(|id| {
            conns.get(id).is_some_and(|c| {
                !c.doomed()
                    && c.room().admits(c.queued(), c.inbox().owed())
                    && self.shared.admits(c.room().reserve)
            })
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use cornflakes_mem::PinnedMemory;

    fn frames(mem: &PinnedMemory, ids: std::ops::Range<u32>) -> Vec<(Msg, RcBuf)> {
        ids.map(|i| (Msg::new(i, 1), mem.alloc_copy(&[i as u8]).unwrap()))
            .collect()
    }

    #[test]
    fn requests_beyond_the_reply_room_wait_in_order_and_nothing_is_lost() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let room = ReplyRoom {
            limit: 1000,
            reserve: 300,
        };
        let mut inbox = Inbox::default();
        let mut got = Vec::new();
        let mut f = frames(&mem, 0..5);
        // 100 bytes queued: room for 3 reservations of 300.
        let mut shared = SharedRoom::new(usize::MAX);
        let (held, _) = inbox.admit(&mut f, room, 100, &mut shared, |m, _| got.push(m.id));
        assert!(f.is_empty());
        assert_eq!((got.as_slice(), held, inbox.owed()), (&[0, 1, 2][..], 2, 3));
        // Replies use the reservations; an extra send finds none.
        assert!(inbox.reply() && inbox.reply() && inbox.reply());
        assert!(!inbox.reply());
        // Next burst, more arrive behind the held ones: order kept.
        inbox.end_burst();
        let mut f = frames(&mem, 5..7);
        let (held, _) = inbox.admit(&mut f, room, 700, &mut shared, |m, _| got.push(m.id));
        assert_eq!(got, [0, 1, 2, 3], "one fits beside 700 queued bytes");
        assert_eq!((held, inbox.held()), (2, 3));
        inbox.end_burst();
        inbox.admit(&mut Vec::new(), room, 0, &mut shared, |m, _| got.push(m.id));
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6]);
        assert!(inbox.is_empty());
        assert_eq!(room.unreserved(inbox.owed()), 100);
    }

    struct Fake {
        inbox: Inbox,
        queued: usize,
        doomed: bool,
    }

    impl Carrier for Fake {
        fn inbox(&self) -> &Inbox {
            &self.inbox
        }
        fn inbox_mut(&mut self) -> &mut Inbox {
            &mut self.inbox
        }
        fn queued(&self) -> usize {
            self.queued
        }
        fn room(&self) -> ReplyRoom {
            ReplyRoom {
                limit: 1000,
                reserve: 400,
            }
        }
        fn doomed(&self) -> bool {
            self.doomed
        }
        fn endpoint(&self) -> (ConnId, SocketAddrV4) {
            (
                ConnId(7),
                SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 9),
            )
        }
    }

    /// Connections 1 and 2, nothing queued.
    fn fakes() -> HashMap<u32, Fake> {
        let fake = || Fake {
            inbox: Inbox::default(),
            queued: 0,
            doomed: false,
        };
        [(1, fake()), (2, fake())].into_iter().collect()
    }

    #[test]
    fn held_requests_are_handed_over_burst_after_burst_and_never_from_a_doomed_connection() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut conns = fakes();
        let mut r = Requests::default();
        let mut out = Vec::new();
        for id in [1, 2] {
            let c = conns.get_mut(&id).unwrap();
            assert_eq!(r.admit(id, c, &mut frames(&mem, 0..5), &mut out), 2);
        }
        assert_eq!((r.delivered(), r.held_for_room()), (4, 6));
        // Within the burst nothing more fits; a new burst frees the reservations.
        let mut touched = Vec::new();
        r.deliver_ready(&mut conns, &mut out, &mut touched);
        assert_eq!(out.len(), 4);
        assert!(!r.has_deliverable(&conns));
        touched.clear();
        r.end_burst(&mut conns, &mut touched);
        touched.sort_unstable();
        assert_eq!(touched, [1, 2]);
        assert!(r.has_deliverable(&conns));
        conns.get_mut(&2).unwrap().doomed = true;
        r.deliver_ready(&mut conns, &mut out, &mut touched);
        let ids: Vec<u32> = out.iter().map(|m| m.msg.id).collect();
        assert_eq!(
            ids,
            [0, 1, 0, 1, 2, 3],
            "connection 1 in order; doomed 2 not served"
        );
        assert_eq!(conns[&2].inbox.held(), 3);
        r.end_burst(&mut conns, &mut touched);
        r.deliver_ready(&mut conns, &mut out, &mut touched);
        assert_eq!(out.len(), 7);
        assert_eq!((conns[&1].inbox.held(), r.delivered()), (0, 7));
    }

    #[test]
    fn the_shared_room_holds_requests_of_every_connection_and_frees_with_replies_and_bursts() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut conns = fakes();
        // Each connection has room for two replies of 400; all together for three.
        let mut r = Requests::new(1200);
        let mut out = Vec::new();
        let c1 = conns.get_mut(&1).unwrap();
        assert_eq!(r.admit(1, c1, &mut frames(&mem, 0..2), &mut out), 2);
        assert!(
            !r.take_starved(),
            "its own room ended it, not the shared one"
        );
        let c2 = conns.get_mut(&2).unwrap();
        assert_eq!(r.admit(2, c2, &mut frames(&mem, 0..2), &mut out), 1);
        assert!(r.take_starved(), "connection 2 had room; the total did not");
        assert!(!r.take_starved());
        assert!(!r.shared().admits(1) && !r.has_deliverable(&conns));
        // A reply turns its reservation into the bytes queued: still no room.
        let c1 = conns.get_mut(&1).unwrap();
        assert!(r.reply(&mut c1.inbox, 400));
        r.shared_mut().add(300);
        assert_eq!(r.shared().shortfall(400), 300);
        // The burst ends: the reservations lapse, the 300 queued bytes stay.
        let mut touched = Vec::new();
        r.end_burst(&mut conns, &mut touched);
        assert!(r.has_deliverable(&conns));
        r.deliver_ready(&mut conns, &mut out, &mut touched);
        assert_eq!(out.len(), 4, "connection 2's held request, in order");
        assert_eq!(conns[&2].inbox.held(), 0);
        r.shared_mut().sub(300);
        assert_eq!((r.shared().queued(), r.shared().peak()), (0, 1200));
    }

    #[test]
    fn a_reply_carrying_connection_never_waits_and_reserves_nothing() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let room = ReplyRoom {
            limit: 1000,
            reserve: 0,
        };
        let mut inbox = Inbox::default();
        let mut n = 0;
        let mut shared = SharedRoom::new(0);
        inbox.admit(&mut frames(&mem, 0..50), room, 1000, &mut shared, |_, _| {
            n += 1
        });
        assert_eq!((n, inbox.owed(), inbox.held()), (50, 0, 0));
        assert!(!inbox.reply(), "its sends are limited as usual");
        let mut f = frames(&mem, 0..3);
        let full = ReplyRoom {
            limit: 10,
            reserve: 20,
        };
        assert_eq!(
            inbox.admit(&mut f, full, 0, &mut shared, |_, _| n += 1),
            (3, false)
        );
        assert_eq!(inbox.clear(), 3);
    }
}
