//! The pinned memory a datapath's partly received frames hold, together: a cap, and the order
//! in which they give way (`docs/tcp.md`, "Memory").
//!
//! A frame cut by the end of a read is held until the rest of it arrives. One connection holds
//! at most one such frame, in a buffer that grows with the bytes that arrived
//! ([`crate::frame::Deframer`]); [`PartialFrames`] bounds what all connections hold together.
//! When a new or growing frame would take the total above the cap, the frames that started
//! longest ago give way first (their connections are closed), and a frame still unfinished
//! [`StreamConfig::frame_timeout`](crate::StreamConfig::frame_timeout) after its first byte is
//! dropped with its connection. A frame whose connection the datapath is not reading on
//! purpose (it waits for room for replies, [`crate::flow`]) is not timed: that wait has a
//! timeout of its own.
//!
//! Plain bookkeeping (no sockets, no clock of its own), shared by the stream datapaths.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::frame::Deframer;

/// What [`PartialFrames`] needs of a connection to charge and drop its partial frame.
pub trait Holder {
    /// Its deframer.
    fn deframer(&mut self) -> &mut Deframer;
    /// The pinned bytes it is charged (kept with the connection, so that one without a partial
    /// frame costs no lookup here).
    fn charged(&mut self) -> &mut usize;
    /// Marks it as closing for its partial frame (evicted, timed out); false when it already
    /// was.
    fn doom(&mut self) -> bool;
}

/// One connection's partial frame.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Pinned bytes charged.
    bytes: usize,
    /// Stream offset of the frame's first byte (which frame this is).
    frame: u64,
    /// When its first byte arrived, or when reading its connection resumed.
    since: Instant,
    /// Its connection is not read on purpose: not timed.
    paused: bool,
}

/// The partly received frames of one datapath: the pinned bytes they hold against a cap, and
/// their age order for eviction and the frame timeout.
#[derive(Debug)]
pub struct PartialFrames {
    limit: usize,
    held: usize,
    peak: usize,
    entries: HashMap<u32, Entry>,
    /// `(since, connection)`, oldest first.
    by_age: BTreeSet<(Instant, u32)>,
}

impl PartialFrames {
    /// Frames may hold `limit` pinned bytes together.
    pub fn new(limit: usize) -> PartialFrames {
        PartialFrames {
            limit,
            held: 0,
            peak: 0,
            entries: HashMap::new(),
            by_age: BTreeSet::new(),
        }
    }

    /// The cap.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Pinned bytes held by partial frames now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The most they have held at once.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Connections with a partial frame.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no connection has a partial frame.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Pinned bytes charged to `conn`.
    pub fn charged(&self, conn: u32) -> usize {
        self.entries.get(&conn).map_or(0, |e| e.bytes)
    }

    /// Records that `conn` holds `bytes` for its partial frame starting at stream offset
    /// `frame` (0 bytes: it has none). A frame not seen before is timed from `now()`.
    pub fn set(&mut self, conn: u32, bytes: usize, frame: u64, now: impl FnOnce() -> Instant) {
        let old = self.entries.get(&conn).copied();
        if bytes == 0 {
            self.remove(conn);
            return;
        }
        let e = match old {
            Some(e) if e.frame == frame => Entry { bytes, ..e },
            Some(e) => {
                self.by_age.remove(&(e.since, conn));
                let since = now();
                self.by_age.insert((since, conn));
                Entry {
                    bytes,
                    frame,
                    since,
                    paused: e.paused,
                }
            }
            None => {
                let since = now();
                self.by_age.insert((since, conn));
                Entry {
                    bytes,
                    frame,
                    since,
                    paused: false,
                }
            }
        };
        self.held = self.held - old.map_or(0, |o| o.bytes) + bytes;
        self.peak = self.peak.max(self.held);
        self.entries.insert(conn, e);
    }

    /// [`set`](Self::set); then, if the total passed the cap, appends to `victims` the
    /// connections whose frames must give way, oldest first, never `conn` ([`Self::victims`]).
    pub fn charge(
        &mut self,
        conn: u32,
        bytes: usize,
        frame: u64,
        now: impl FnOnce() -> Instant,
        victims: &mut Vec<u32>,
    ) {
        self.set(conn, bytes, frame, now);
        if self.held > self.limit {
            self.victims(0, conn, victims);
        }
    }

    /// Charges `id`'s partial frame as its deframer holds it now. If that takes the total above
    /// the cap, the frames that started longest ago (other connections') are dropped
    /// ([`Self::drop_frame`]) and their connections appended to `dropped`. Returns how many
    /// of the dropped held bytes of a frame (frames lost).
    pub fn sync<C: Holder>(
        &mut self,
        id: u32,
        conns: &mut HashMap<u32, C>,
        dropped: &mut Vec<u32>,
    ) -> u64 {
        let Some(c) = conns.get_mut(&id) else {
            return 0;
        };
        let bytes = c.deframer().held_capacity();
        if bytes == 0 && *c.charged() == 0 {
            return 0;
        }
        *c.charged() = bytes;
        let frame = c.deframer().frame_offset();
        self.set(id, bytes, frame, Instant::now);
        if self.held <= self.limit {
            return 0;
        }
        self.evict(0, id, conns, dropped)
    }

    /// Drops the partial frames that started longest ago, other than `except`'s, until
    /// `extra` more bytes fit under the cap; their connections are appended to `dropped`.
    /// Returns the frames lost.
    pub fn evict<C: Holder>(
        &mut self,
        extra: usize,
        except: u32,
        conns: &mut HashMap<u32, C>,
        dropped: &mut Vec<u32>,
    ) -> u64 {
        let from = dropped.len();
        self.victims(extra, except, dropped);
        self.drop_all(from, conns, dropped)
    }

    /// Drops the frames unfinished `timeout` after their first byte while their connection was
    /// read; their connections are appended to `dropped`. Returns the frames lost.
    pub fn expire<C: Holder>(
        &mut self,
        now: Instant,
        timeout: Duration,
        conns: &mut HashMap<u32, C>,
        dropped: &mut Vec<u32>,
    ) -> u64 {
        let from = dropped.len();
        self.expired(now, timeout, dropped);
        self.drop_all(from, conns, dropped)
    }

    /// Drops the frames of `dropped[from..]`, keeping there the connections newly doomed.
    fn drop_all<C: Holder>(
        &mut self,
        from: usize,
        conns: &mut HashMap<u32, C>,
        dropped: &mut Vec<u32>,
    ) -> u64 {
        let mut lost = 0;
        let mut i = from;
        while i < dropped.len() {
            match self.drop_frame(dropped[i], conns) {
                Some(l) => {
                    lost += u64::from(l);
                    i += 1;
                }
                None => {
                    dropped.swap_remove(i);
                }
            }
        }
        lost
    }

    /// Drops `id`'s partial frame now (its buffer back to the pool) and dooms its connection:
    /// whether bytes of a frame were lost, or `None` when the connection is gone or was doomed
    /// already.
    pub fn drop_frame<C: Holder>(&mut self, id: u32, conns: &mut HashMap<u32, C>) -> Option<bool> {
        self.remove(id);
        let c = conns.get_mut(&id)?;
        if !c.doom() {
            return None;
        }
        let lost = c.deframer().partial_bytes() > 0;
        c.deframer().reset();
        *c.charged() = 0;
        Some(lost)
    }

    /// Forgets `conn`'s partial frame (completed, or its connection closed); returns the bytes
    /// it held.
    pub fn remove(&mut self, conn: u32) -> usize {
        match self.entries.remove(&conn) {
            Some(e) => {
                self.by_age.remove(&(e.since, conn));
                self.held -= e.bytes;
                e.bytes
            }
            None => 0,
        }
    }

    /// `conn` is not read on purpose (`true`), or is read again (`false`: its frame is timed
    /// afresh from `now`).
    pub fn pause(&mut self, conn: u32, paused: bool, now: Instant) {
        let Some(e) = self.entries.get_mut(&conn) else {
            return;
        };
        if e.paused == paused {
            return;
        }
        e.paused = paused;
        if !paused {
            self.by_age.remove(&(e.since, conn));
            e.since = now;
            self.by_age.insert((now, conn));
        }
    }

    /// Connections whose frames must give way, oldest first, so that `extra` more bytes fit
    /// under the cap; never `except` (the connection that needs the room). May not be enough
    /// when only `except` holds anything.
    pub fn victims(&self, extra: usize, except: u32, out: &mut Vec<u32>) {
        let mut over = (self.held + extra).saturating_sub(self.limit);
        for &(_, conn) in &self.by_age {
            if over == 0 {
                break;
            }
            if conn == except {
                continue;
            }
            over = over.saturating_sub(self.entries[&conn].bytes);
            out.push(conn);
        }
    }

    /// Connections whose frames started at least `timeout` before `now` while they were read,
    /// oldest first.
    pub fn expired(&self, now: Instant, timeout: Duration, out: &mut Vec<u32>) {
        for &(since, conn) in &self.by_age {
            if now.saturating_duration_since(since) < timeout {
                break;
            }
            if !self.entries[&conn].paused {
                out.push(conn);
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn the_oldest_frames_give_way_and_the_total_follows_every_change() {
        let t0 = Instant::now();
        let at = |ms: u64| move || t0 + Duration::from_millis(ms);
        let mut p = PartialFrames::new(1000);
        p.set(1, 300, 0, at(0));
        p.set(2, 300, 0, at(1));
        p.set(3, 300, 0, at(2));
        assert_eq!((p.held(), p.len()), (900, 3));
        // Growing a frame keeps its age; another frame on the same connection is younger.
        p.set(1, 400, 0, at(50));
        p.set(2, 200, 500, at(3));
        assert_eq!(p.held(), 900);
        let mut v = Vec::new();
        p.victims(0, 9, &mut v);
        assert!(v.is_empty(), "under the cap");
        p.victims(400, 3, &mut v);
        assert_eq!(v, [1], "the oldest frame, enough room once it goes");
        v.clear();
        p.victims(700, 1, &mut v);
        assert_eq!(v, [3, 2], "oldest first, never the one asking");
        v.clear();
        p.victims(5000, 1, &mut v);
        assert_eq!(v, [3, 2], "not enough even so: every other frame");
        assert_eq!(p.remove(3), 300);
        assert_eq!(p.remove(3), 0);
        p.set(2, 0, 500, at(9));
        assert_eq!((p.held(), p.len(), p.peak()), (400, 1, 1000));
    }

    #[test]
    fn frames_time_out_only_while_their_connection_is_read() {
        let t0 = Instant::now();
        let mut p = PartialFrames::new(1 << 20);
        p.set(1, 10, 0, || t0);
        p.set(2, 10, 0, || t0 + Duration::from_secs(1));
        p.set(3, 10, 0, || t0 + Duration::from_secs(2));
        p.pause(1, true, t0);
        let mut v = Vec::new();
        p.expired(
            t0 + Duration::from_millis(3500),
            Duration::from_secs(1),
            &mut v,
        );
        assert_eq!(v, [2, 3], "the paused frame is not timed");
        // Read again: timed afresh.
        v.clear();
        p.pause(1, false, t0 + Duration::from_secs(3));
        p.expired(
            t0 + Duration::from_millis(3500),
            Duration::from_secs(1),
            &mut v,
        );
        assert_eq!(v, [2, 3], "timed from when it is read again");
        v.clear();
        p.expired(t0 + Duration::from_secs(4), Duration::from_secs(1), &mut v);
        assert_eq!(v, [2, 3, 1]);
    }
}
