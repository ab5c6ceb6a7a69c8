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
//! Plain bookkeeping (no sockets), shared by the stream datapaths.

use std::collections::VecDeque;

use cornflakes_datapath::Msg;
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

/// Requests read from one connection and not yet handed to the application (held for want of
/// reply room), and the replies reserved for the requests handed over in this burst.
#[derive(Debug, Default)]
pub struct Inbox {
    held: VecDeque<(Msg, RcBuf)>,
    owed: usize,
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
    /// admits one more given `queued` bytes waiting to be sent; holds the rest. Returns how many
    /// were newly held.
    pub fn admit(
        &mut self,
        frames: &mut Vec<(Msg, RcBuf)>,
        room: ReplyRoom,
        queued: usize,
        mut deliver: impl FnMut(Msg, RcBuf),
    ) -> usize {
        let before = self.held.len();
        self.held.extend(frames.drain(..));
        let newly = self.held.len() - before;
        while room.admits(queued, self.owed) {
            let Some((msg, data)) = self.held.pop_front() else {
                break;
            };
            if room.reserve > 0 {
                self.owed += 1;
            }
            deliver(msg, data);
        }
        newly.min(self.held.len())
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
        let held = inbox.admit(&mut f, room, 100, |m, _| got.push(m.id));
        assert!(f.is_empty());
        assert_eq!((got.as_slice(), held, inbox.owed()), (&[0, 1, 2][..], 2, 3));
        // Replies use the reservations; an extra send finds none.
        assert!(inbox.reply() && inbox.reply() && inbox.reply());
        assert!(!inbox.reply());
        // Next burst, more arrive behind the held ones: order kept.
        inbox.end_burst();
        let mut f = frames(&mem, 5..7);
        let held = inbox.admit(&mut f, room, 700, |m, _| got.push(m.id));
        assert_eq!(got, [0, 1, 2, 3], "one fits beside 700 queued bytes");
        assert_eq!((held, inbox.held()), (2, 3));
        inbox.end_burst();
        inbox.admit(&mut Vec::new(), room, 0, |m, _| got.push(m.id));
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6]);
        assert!(inbox.is_empty());
        assert_eq!(room.unreserved(inbox.owed()), 100);
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
        inbox.admit(&mut frames(&mem, 0..50), room, 1000, |_, _| n += 1);
        assert_eq!((n, inbox.owed(), inbox.held()), (50, 0, 0));
        assert!(!inbox.reply(), "its sends are limited as usual");
        let mut f = frames(&mem, 0..3);
        let full = ReplyRoom {
            limit: 10,
            reserve: 20,
        };
        assert_eq!(inbox.admit(&mut f, full, 0, |_, _| n += 1), 3);
        assert_eq!(inbox.clear(), 3);
    }
}
