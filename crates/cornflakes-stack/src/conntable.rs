//! The connection table: peer address → connection, bounded, evicting idle entries.
//!
//! UDP has no handshake, so any datagram with a valid framing header could make its source a
//! connection, and a flood of spoofed sources would fill any fixed table and lock every new
//! client out. So the table is bounded (`max` entries) and, when full, evicts an idle entry
//! to make room, chosen by a CLOCK sweep (second chance, an approximation of
//! least-recently-used that costs one store per packet):
//!
//! - An entry the application has sent to (*confirmed*: it answered the peer, or connected
//!   to it) gets a second chance each time it is used: the sweep skips it once, clearing the
//!   mark, and evicts it only if it was not used again before the hand came back.
//! - An entry created by a received message and never answered (what spoofed sources and
//!   junk create) gets no second chance: it is the first to go.
//! - An entry used within the last [`PROTECTED`] insertions is never evicted, so the
//!   connection of a message in the burst being processed stays valid until it is answered.
//!
//! A [`ConnId`] holds the slot and a generation: once a slot is reused for another peer, an
//! old id of it is refused ([`SendError::UnknownConn`](cornflakes_datapath::SendError)) instead of
//! reaching the new peer. The datapaths count evictions in
//! [`DropCounters::conn_evicted`](cornflakes_datapath::DropCounters) and a new peer that
//! found every entry protected in `conn_table_full` (`docs/stack.md`).

use std::net::SocketAddrV4;

use cornflakes_datapath::ConnId;

use crate::peers::PeerMap;

/// Bits of a [`ConnId`] that name the slot; the rest is the slot's generation.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

/// Most entries a table may have (the slot bits of a [`ConnId`]).
pub const MAX_ENTRIES: usize = 1 << SLOT_BITS;

/// Entries used within this many insertions are never evicted: more than any receive burst
/// holds, so a message's connection outlives the burst it arrived in.
pub const PROTECTED: u64 = 256;

struct Slot<T> {
    peer: SocketAddrV4,
    gen: u32,
    /// The insertion count when last used.
    used_at: u64,
    confirmed: bool,
    /// Used since the hand last passed (a confirmed entry's second chance).
    chance: bool,
    value: T,
}

/// A bounded peer → connection table with idle eviction; `T` is what a connection holds
/// (e.g. a header template).
pub struct ConnTable<T> {
    slots: Vec<Slot<T>>,
    index: PeerMap,
    max: usize,
    hand: usize,
    inserts: u64,
    evicted: u64,
}

impl<T> ConnTable<T> {
    /// An empty table of at most `max` entries (clamped to 1..=[`MAX_ENTRIES`]).
    pub fn new(max: usize) -> ConnTable<T> {
        ConnTable {
            slots: Vec::new(),
            index: PeerMap::new(),
            max: max.clamp(1, MAX_ENTRIES),
            hand: 0,
            inserts: 0,
            evicted: 0,
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Entries evicted so far to make room for new peers.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    fn id(slot: usize, gen: u32) -> ConnId {
        ConnId((gen << SLOT_BITS) | slot as u32)
    }

    fn slot(&self, conn: ConnId) -> Option<usize> {
        let i = (conn.0 & SLOT_MASK) as usize;
        let s = self.slots.get(i)?;
        (Self::id(i, s.gen) == conn).then_some(i)
    }

    /// The connection of `peer`, if it has one; marks it used.
    #[inline]
    pub fn lookup(&mut self, peer: SocketAddrV4) -> Option<ConnId> {
        let c = self.index.get(peer)?;
        let s = &mut self.slots[(c.0 & SLOT_MASK) as usize];
        s.used_at = self.inserts;
        s.chance = s.confirmed;
        Some(c)
    }

    /// The connection of `peer` without marking it used.
    pub fn find(&self, peer: SocketAddrV4) -> Option<ConnId> {
        self.index.get(peer)
    }

    /// Adds `peer` holding `value`; `confirmed` when the application itself asked for it
    /// (connect), not a received message. Evicts an idle entry when the table is full;
    /// `None` when every entry is protected (used within the last [`PROTECTED`] insertions).
    pub fn insert(&mut self, peer: SocketAddrV4, value: T, confirmed: bool) -> Option<ConnId> {
        debug_assert!(self.index.get(peer).is_none(), "{peer} is in the table");
        let i = if self.slots.len() < self.max {
            self.slots.push(Slot {
                peer,
                gen: 0,
                used_at: 0,
                confirmed,
                chance: confirmed,
                value,
            });
            self.slots.len() - 1
        } else {
            let i = self.victim()?;
            let s = &mut self.slots[i];
            self.index.remove(s.peer);
            s.gen = (s.gen + 1) & (u32::MAX >> SLOT_BITS);
            s.peer = peer;
            s.confirmed = confirmed;
            s.chance = confirmed;
            s.value = value;
            self.evicted += 1;
            i
        };
        self.inserts += 1;
        self.slots[i].used_at = self.inserts;
        let c = Self::id(i, self.slots[i].gen);
        self.index.insert(peer, c);
        Some(c)
    }

    /// The CLOCK sweep: the first entry after the hand that is neither protected nor has a
    /// second chance left (taking the chances it passes).
    fn victim(&mut self) -> Option<usize> {
        let n = self.slots.len();
        for _ in 0..2 * n + 1 {
            let i = self.hand;
            self.hand = (self.hand + 1) % n;
            let s = &mut self.slots[i];
            if self.inserts.saturating_sub(s.used_at) < PROTECTED {
                continue;
            }
            if s.chance {
                s.chance = false;
                continue;
            }
            return Some(i);
        }
        None
    }

    /// Marks `conn` confirmed (the application sent to it) and used; false for an unknown
    /// or evicted id.
    #[inline]
    pub fn confirm(&mut self, conn: ConnId) -> bool {
        let Some(i) = self.slot(conn) else {
            return false;
        };
        let s = &mut self.slots[i];
        s.confirmed = true;
        s.chance = true;
        s.used_at = self.inserts;
        true
    }

    /// The peer of `conn` (`None` for an unknown or evicted id).
    #[inline]
    pub fn peer(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.slot(conn).map(|i| self.slots[i].peer)
    }

    /// What `conn` holds.
    #[inline]
    pub fn get(&self, conn: ConnId) -> Option<&T> {
        self.slot(conn).map(|i| &self.slots[i].value)
    }

    /// What `conn` holds, mutably.
    #[inline]
    pub fn get_mut(&mut self, conn: ConnId) -> Option<&mut T> {
        self.slot(conn).map(|i| &mut self.slots[i].value)
    }

    /// Every entry's value with its peer.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (SocketAddrV4, &mut T)> {
        self.slots.iter_mut().map(|s| (s.peer, &mut s.value))
    }
}

impl<T> std::fmt::Debug for ConnTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnTable")
            .field("len", &self.slots.len())
            .field("max", &self.max)
            .field("evicted", &self.evicted)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn peer(n: u32) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(0x0a00_0000 + n), 7000)
    }

    #[test]
    fn a_flood_of_unanswered_peers_never_locks_out_a_new_one_or_an_active_client() {
        let mut t: ConnTable<u32> = ConnTable::new(1024);
        let client = t.insert(peer(0), 0, false).unwrap();
        assert!(t.confirm(client), "the server answered it");
        for n in 1..100_000 {
            let c = t.insert(peer(n), n, false).expect("room for a new peer");
            assert_eq!(t.peer(c), Some(peer(n)));
            if n % 50 == 0 {
                // The client keeps talking, and is answered.
                let c = t.lookup(peer(0)).expect("the active client kept its entry");
                assert!(t.confirm(c));
            }
        }
        assert_eq!(t.len(), 1024);
        assert!(t.evicted() >= 100_000 - 1024);
        assert_eq!(t.lookup(peer(0)), Some(client), "same id all along");
        // A fresh client after the flood gets an entry.
        assert!(t.insert(peer(1 << 20), 0, false).is_some());
    }

    #[test]
    fn an_evicted_id_is_refused_not_sent_to_the_new_peer() {
        let mut t: ConnTable<()> = ConnTable::new(1);
        let a = t.insert(peer(1), (), false).unwrap();
        // Protected while recent: the table of one has no room.
        assert_eq!(t.insert(peer(2), (), false), None);
        for _ in 0..PROTECTED {
            t.inserts += 1; // as if other insertions had happened
        }
        let b = t.insert(peer(2), (), false).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.peer(a), None);
        assert!(!t.confirm(a));
        assert_eq!(t.peer(b), Some(peer(2)));
        assert_eq!(t.find(peer(1)), None);
        assert_eq!(t.evicted(), 1);
    }

    #[test]
    fn entries_used_in_the_current_burst_survive_it() {
        let mut t: ConnTable<()> = ConnTable::new(64);
        let ids: Vec<ConnId> = (0..64)
            .map(|n| t.insert(peer(n), (), false).unwrap())
            .collect();
        // 64 more new peers in the same burst: every entry is protected.
        assert_eq!(t.insert(peer(1000), (), false), None);
        for (n, c) in ids.iter().enumerate() {
            assert_eq!(t.peer(*c), Some(peer(n as u32)));
        }
    }
}
