//! Writes exactly once under retries: a bounded table of recent write outcomes, as RAMCloud's
//! RIFL (Lee et al., SOSP '15) and eRPC keep them.
//!
//! UDP loses and duplicates datagrams, and a client that does not hear back sends its request
//! again. A `put` or `getm` can simply run again, but a second `append` adds the value twice,
//! and a second `delete` answers `NOT_FOUND` for a key it did remove. So every write's outcome
//! is remembered under its *write tag* — the client (its source address and port), the
//! request id the client chose (the framing header's message id, `docs/wire-format.md`), and a
//! fingerprint of the request — and a request whose tag is in the table is answered with the
//! first outcome instead of running again.
//!
//! The table is bounded: it remembers the last [`DEFAULT_WINDOW`] writes of the server core
//! (configurable, [`crate::store::StoreConfig::dedup_window`]), dropping the oldest first,
//! and at most an eighth of them per client, so one busy client cannot push the others'
//! outcomes out. A retry arriving after its write left the window runs again. The fingerprint (message type,
//! length and first 64 bytes of the request) tells a retry from a new request that reuses an
//! id (a restarted client on the same port): a mismatch runs the request and replaces the
//! entry.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;

use cornflakes::datapath::Connect;
use cornflakes::{ConnId, Msg};

use crate::ops::Status;

/// Writes remembered per server core by default: with 1 µs writes, the last 65 ms of a
/// saturated core, far longer at ordinary loads; at most 8 192 of them per client. Once full
/// it holds about 7 MiB (a hash table of 131 072 buckets of 41 bytes, the 16-byte tags in
/// recording order, each client's ids), not charged to the store's memory limit.
pub const DEFAULT_WINDOW: usize = 1 << 16;

/// Bytes of a request the fingerprint covers (with its length and type).
const FINGERPRINT_BYTES: usize = 64;

/// A write's identity: which client sent it, the id it chose, and a fingerprint of the
/// request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteTag {
    /// The client's address and port, packed.
    client: u64,
    /// The client's request id.
    id: u32,
    fingerprint: u64,
}

impl WriteTag {
    /// The tag of request `msg` with body `data` from `client`.
    pub fn new(client: SocketAddrV4, msg: Msg, data: &[u8]) -> WriteTag {
        WriteTag {
            client: (u64::from(u32::from(*client.ip())) << 16) | u64::from(client.port()),
            id: msg.id,
            fingerprint: fingerprint(msg.ty, data),
        }
    }

    /// The tag of request `msg` with body `data` received on `conn` of `dp`; `None` when the
    /// connection is gone (then the write is not deduplicated).
    pub fn of<D: Connect>(dp: &D, conn: ConnId, msg: Msg, data: &[u8]) -> Option<WriteTag> {
        dp.peer_addr(conn)
            .map(|peer| WriteTag::new(peer, msg, data))
    }
}

/// The type, the length and the first [`FINGERPRINT_BYTES`] of a request, mixed into 64 bits
/// a word at a time (a retry has the very same bytes).
fn fingerprint(ty: u16, data: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (u64::from(ty) << 32 | data.len() as u64).wrapping_mul(K);
    for w in data[..data.len().min(FINGERPRINT_BYTES)].chunks(8) {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K).rotate_left(29);
    }
    h
}

/// What a write answered: its status and, for an append, the list's new length.
pub type Outcome = Result<usize, Status>;

/// The dedup table's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DedupStats {
    /// Retries answered with the first outcome (not run again).
    pub hits: u64,
    /// Writes recorded.
    pub recorded: u64,
    /// Outcomes dropped from the window to make room.
    pub evicted: u64,
    /// Requests whose client and id were remembered with another fingerprint (run as new).
    pub reused_ids: u64,
}

impl DedupStats {
    /// Adds another core's counters.
    pub fn add(&mut self, o: &DedupStats) {
        self.hits += o.hits;
        self.recorded += o.recorded;
        self.evicted += o.evicted;
        self.reused_ids += o.reused_ids;
    }
}

/// The recent write outcomes of one server core.
#[derive(Clone)]
pub struct Dedup {
    window: usize,
    per_client: usize,
    outcomes: HashMap<(u64, u32), (u64, Outcome)>,
    /// Tags in the order they were recorded, oldest first (with tags a client's own bound
    /// already dropped: skipped when they come up).
    order: VecDeque<(u64, u32)>,
    /// Each client's remembered ids, oldest first.
    clients: HashMap<u64, VecDeque<u32>>,
    stats: DedupStats,
}

impl Dedup {
    /// A table remembering the last `window` writes of the core (0: none, every retry runs
    /// again), and at most an eighth of them (at least 1 024) per client, so one busy client
    /// cannot push every other client's outcomes out.
    pub fn new(window: usize) -> Dedup {
        Dedup {
            window,
            per_client: (window / 8).max(1024).min(window),
            outcomes: HashMap::default(),
            order: VecDeque::new(),
            clients: HashMap::new(),
            stats: DedupStats::default(),
        }
    }

    /// Clients with outcomes remembered.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Counters.
    pub fn stats(&self) -> DedupStats {
        self.stats
    }

    /// Writes remembered now.
    pub fn len(&self) -> usize {
        self.outcomes.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    /// The first outcome of the write `tag`, if it is remembered (a retry).
    pub fn lookup(&mut self, tag: &WriteTag) -> Option<Outcome> {
        match self.outcomes.get(&(tag.client, tag.id)) {
            Some((fp, o)) if *fp == tag.fingerprint => {
                self.stats.hits += 1;
                Some(*o)
            }
            Some(_) => {
                self.stats.reused_ids += 1;
                None
            }
            None => None,
        }
    }

    /// Remembers the outcome of write `tag`, dropping the oldest beyond the window.
    pub fn record(&mut self, tag: &WriteTag, outcome: Outcome) {
        if self.window == 0 {
            return;
        }
        let k = (tag.client, tag.id);
        self.stats.recorded += 1;
        if self
            .outcomes
            .insert(k, (tag.fingerprint, outcome))
            .is_some()
        {
            return; // a reused id: replaced in place
        }
        self.order.push_back(k);
        let mine = self.clients.entry(tag.client).or_default();
        mine.push_back(tag.id);
        if mine.len() > self.per_client {
            // This client's own bound: its oldest goes (its tag in `order` is skipped later).
            if let Some(id) = mine.pop_front() {
                self.outcomes.remove(&(tag.client, id));
                self.stats.evicted += 1;
            }
        }
        while self.order.len() > self.window {
            let Some((client, id)) = self.order.pop_front() else {
                break;
            };
            let Some(ids) = self.clients.get_mut(&client) else {
                continue;
            };
            if ids.front() != Some(&id) {
                continue; // already dropped by the client's own bound
            }
            ids.pop_front();
            if ids.is_empty() {
                self.clients.remove(&client);
            }
            if self.outcomes.remove(&(client, id)).is_some() {
                self.stats.evicted += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn tag(port: u16, id: u32, body: &[u8]) -> WriteTag {
        WriteTag::new(
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port),
            Msg::new(id, 7),
            body,
        )
    }

    #[test]
    fn a_retry_gets_the_first_outcome_and_the_window_is_bounded() {
        let mut d = Dedup::new(2);
        let a = tag(1, 1, b"append k v");
        assert_eq!(d.lookup(&a), None);
        d.record(&a, Ok(3));
        assert_eq!(d.lookup(&a), Some(Ok(3)));
        // Same id from another client, or another id: not a retry.
        assert_eq!(d.lookup(&tag(2, 1, b"append k v")), None);
        assert_eq!(d.lookup(&tag(1, 2, b"append k v")), None);
        // Same client and id, other request: a reused id, run as new.
        assert_eq!(d.lookup(&tag(1, 1, b"delete k")), None);
        assert_eq!(d.stats().reused_ids, 1);
        d.record(&tag(1, 2, b"x"), Err(Status::NotFound));
        d.record(&tag(1, 3, b"y"), Ok(0));
        assert_eq!(d.len(), 2);
        assert_eq!(d.lookup(&a), None, "the oldest left the window");
        assert_eq!(d.lookup(&tag(1, 2, b"x")), Some(Err(Status::NotFound)));
        assert_eq!(d.stats().evicted, 1);
        assert_eq!(d.stats().hits, 2);
    }

    #[test]
    fn one_busy_client_cannot_push_out_another_clients_outcomes() {
        let mut d = Dedup::new(16 * 1024); // 2 048 per client
        let quiet = tag(1, 7, b"append k v");
        d.record(&quiet, Ok(1));
        for id in 0..10_000 {
            d.record(&tag(2, id, b"put"), Ok(0));
        }
        assert_eq!(d.lookup(&quiet), Some(Ok(1)), "the quiet client's retry");
        assert_eq!(d.len(), 1 + 2048);
        assert_eq!(d.lookup(&tag(2, 9_999, b"put")), Some(Ok(0)));
        assert_eq!(
            d.lookup(&tag(2, 0, b"put")),
            None,
            "the busy client's oldest went"
        );
        // Many clients: the core's window bounds them all, and forgotten clients go.
        for c in 0..40_000u32 {
            d.record(&tag(3 + (c % 60_000) as u16, c, b"x"), Ok(0));
        }
        assert!(d.len() <= 16 * 1024);
        assert!(d.clients() <= 16 * 1024);
        assert_eq!(d.lookup(&quiet), None, "the window moved on");
    }

    #[test]
    fn a_window_of_zero_remembers_nothing() {
        let mut d = Dedup::new(0);
        let a = tag(1, 1, b"a");
        d.record(&a, Ok(1));
        assert_eq!(d.lookup(&a), None);
        assert!(d.is_empty());
    }
}
