//! Exactly-once under retries: a bounded table of recent request outcomes, as RAMCloud's RIFL
//! (Lee et al., SOSP '15) and eRPC keep them.
//!
//! UDP loses and duplicates datagrams, a connection can break after a request was applied but
//! before its reply left, and a client that does not hear back sends its request again. A read
//! can simply run again; a write cannot (a second append adds the value twice). So a server
//! runs each write through an [`OnceTable`]: the first time, the write runs and its outcome is
//! recorded; a retry is answered with the recorded outcome and does not run.
//!
//! # What names a request
//! The **key** is the client's incarnation and the request's id, both from the framing header
//! ([`crate::ids`], `docs/wire-format.md`). A client that sends incarnation 0 (anonymous: a
//! client that picked none) is keyed by its source address and port instead, as before
//! incarnations existed: its retries are still recognised as long as it keeps its port.
//!
//! Each record also holds a **keyed 128-bit hash of every byte of the request** (its message
//! type and its whole body): SipHash-1-3 with 128-bit output, under a key drawn from the
//! operating system for each table. A request whose key is recorded is a retry only if its
//! hash is the recorded one. If the hash differs, the client broke the rule that ids are never
//! reused within an incarnation (or an anonymous client restarted on the same port): the
//! request is **refused** ([`Check::Refused`], counted in [`OnceStats::refused`]): it is
//! neither run nor answered from the table, and the server answers it with an error. So a
//! request is never answered with another request's outcome, and never acknowledged without
//! having run.
//!
//! The chance that a different request of a live key has the recorded hash is 2^−128 for any
//! one such request (SipHash is a pseudorandom function of its key; the data's length is part
//! of its input). Since every record is checked only by requests of its own key, the chance
//! that any of N reused-id requests over a table's life is taken for a retry is at most
//! N × 2^−128: at 10^9 refused requests a second for a century, below 10^−20. Someone who
//! does not know the table's key cannot aim for a collision either: without the key the
//! hashes of chosen inputs are unpredictable, so each attempt succeeds with probability
//! 2^−128 and costs a request the server refuses and counts. (With the key, a collision would
//! still only give the attacker its own previous outcome for its own key.) Keeping the request
//! bytes themselves instead would cost the table's window times the largest request: gigabytes
//! per core at 65 536 records of up to 16 KiB and more.
//!
//! # What a record stores, and how many
//! A record is the key (client and id, 16 bytes), the hash (16 bytes) and the outcome `O`,
//! which the table's user chooses: it must be `Copy` (kept by value, answered by copy). The
//! KV store keeps `Result<usize, Status>` (16 bytes): a record is a 48-byte slot of the hash
//! table plus 16 bytes in the eviction queue and 4 in its client's queue. With the spare room
//! of the hash table (at most half its slots used right after it grows) and of the queues
//! (which grow by doubling), that is about 140 bytes a record when a few clients made the
//! records, and about 245 when every record is a different client's (each client then also
//! has its own entry and queue). Measured with a counting allocator, a full default window
//! takes 8.6 MiB per core with 8 busy clients, and 15.3 MiB with 65 536 clients of one record
//! each, the most it can take.
//!
//! A generic service may want to keep its whole encoded reply so a retry gets the same bytes;
//! that makes a record as large as the reply, and a reply that references stored values by
//! zero-copy pointers would have to keep those buffers alive (or copy them) for as long as the
//! record lives, although they may have been overwritten since: memory that grows with the
//! window times the reply size, not with the store. Keeping only what the write decided (its
//! status and a small result) avoids both, at the price that a retried read-after-write reply
//! is rebuilt rather than replayed.
//!
//! The table is a window over the most recent records: at most [`Window::per_core`] (65 536
//! by default) for the whole table, of which at most [`Window::per_client`] (8 192 by
//! default) per client, oldest first out. A busy client pushes out its own oldest records,
//! not the others': a client's record stays until it has issued `per_client` newer writes or
//! the core `per_core` newer ones. A retry that arrives after its record left the window runs
//! again (at least once); a client that gave up on a write knows it ran at most once.
//!
//! # Use
//! ```
//! use cornflakes::Msg;
//! use cornflakes_rpc::once::{Check, Incoming, OnceTable, Window};
//!
//! let mut table: OnceTable<u32> = OnceTable::new(Window::DEFAULT);
//! let mut applied = 0;
//! let msg = Msg::new(1, 7).with_incarnation(42); // the request's framing header
//! let mut serve = |body: &[u8]| {
//!     // The peer's address is asked for only when the client is anonymous.
//!     let req = Incoming::new(msg, body, || None).expect("a client with an incarnation");
//!     match table.check(&req) {
//!         Check::Run(fresh) => {
//!             applied += 1; // run the write
//!             let outcome = applied;
//!             table.record(fresh, outcome);
//!             Ok(outcome)
//!         }
//!         Check::Answered(outcome) => Ok(outcome), // a retry
//!         Check::Refused => Err("reused id"),      // answer with an error
//!     }
//! };
//! assert_eq!(serve(b"append k x"), Ok(1));
//! assert_eq!(serve(b"append k x"), Ok(1)); // the retry is not run again
//! assert_eq!(serve(b"append k y"), Err("reused id"));
//! ```

use std::collections::{HashMap, VecDeque};
use std::hash::Hasher as _;
use std::net::SocketAddrV4;

use cornflakes::Msg;
use siphasher::sip128::{Hasher128 as _, SipHasher13};

/// How many records a table keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Records of the whole table (a server core's); 0 keeps none (every retry runs again).
    pub per_core: usize,
    /// Records of one client at most (at least 1 when `per_core` is not 0).
    pub per_client: usize,
}

impl Window {
    /// 65 536 records per core, 8 192 per client: with 1 µs writes, the last 65 ms of a
    /// saturated core, far longer at ordinary loads.
    pub const DEFAULT: Window = Window::of(1 << 16);

    /// A window of `per_core` records, an eighth of them (at least 1 024, at most all) per
    /// client.
    pub const fn of(per_core: usize) -> Window {
        let eighth = per_core / 8;
        let per_client = if eighth < 1024 { 1024 } else { eighth };
        Window {
            per_core,
            per_client: if per_client < per_core {
                per_client
            } else {
                per_core
            },
        }
    }
}

impl Default for Window {
    fn default() -> Self {
        Window::DEFAULT
    }
}

/// Who sent a request, as the table keys it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sender {
    /// A client that gave its incarnation (never 0).
    Incarnation(u64),
    /// An anonymous client (incarnation 0), known by its address and port.
    Address(SocketAddrV4),
}

impl Sender {
    /// The sender of a request with framing header `msg`: its incarnation, or for incarnation
    /// 0 its address, which `peer` is asked for only then (`None` when it is not known, e.g.
    /// the connection is gone: such a request cannot be recognised and simply runs).
    #[inline]
    pub fn of(msg: Msg, peer: impl FnOnce() -> Option<SocketAddrV4>) -> Option<Sender> {
        match msg.incarnation {
            0 => peer().map(Sender::Address),
            inc => Some(Sender::Incarnation(inc)),
        }
    }
}

/// A request as the table sees it: its sender, its framing header and its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Incoming<'a> {
    /// Who sent it.
    pub sender: Sender,
    /// Its framing header (the id and the message type are used).
    pub msg: Msg,
    /// Its body: every byte is hashed.
    pub body: &'a [u8],
}

impl<'a> Incoming<'a> {
    /// The request `msg` with body `body`; `peer` gives the sender's address, asked for only
    /// when the client is anonymous. `None`: an anonymous request whose address is not known.
    #[inline]
    pub fn new(
        msg: Msg,
        body: &'a [u8],
        peer: impl FnOnce() -> Option<SocketAddrV4>,
    ) -> Option<Incoming<'a>> {
        Sender::of(msg, peer).map(|sender| Incoming { sender, msg, body })
    }
}

/// A client as the table keys it (16 bytes): an incarnation, or a packed address and port
/// (`anonymous`), so the two never meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Client {
    id: u64,
    anonymous: bool,
}

impl From<Sender> for Client {
    #[inline]
    fn from(s: Sender) -> Client {
        match s {
            Sender::Incarnation(inc) => Client {
                id: inc,
                anonymous: false,
            },
            Sender::Address(a) => Client {
                id: (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()),
                anonymous: true,
            },
        }
    }
}

/// The table's key of a record (16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    client: u64,
    id: u32,
    anonymous: bool,
}

impl Key {
    fn new(c: Client, id: u32) -> Key {
        Key {
            client: c.id,
            id,
            anonymous: c.anonymous,
        }
    }

    fn client(&self) -> Client {
        Client {
            id: self.client,
            anonymous: self.anonymous,
        }
    }
}

/// A request's keyed hash (two words: a `u128` would align the table's slots to 16 bytes).
type Hash = [u64; 2];

/// A request the table has not seen: run it, then [`OnceTable::record`] its outcome.
#[derive(Debug)]
#[must_use = "record the outcome, or a retry will run again"]
pub struct Fresh {
    key: Key,
    hash: Hash,
}

/// What the table says of a request.
#[derive(Debug)]
pub enum Check<O> {
    /// Not seen (or forgotten): run it and record the outcome.
    Run(Fresh),
    /// A retry of a recorded request: answer this outcome, do not run it.
    Answered(O),
    /// The key is recorded for a different request (a reused id): do not run it, answer it
    /// with an error.
    Refused,
}

/// The table's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnceStats {
    /// Retries answered with their recorded outcome (not run again).
    pub hits: u64,
    /// Outcomes recorded.
    pub recorded: u64,
    /// Records dropped from the window to make room.
    pub evicted: u64,
    /// Requests refused because their key was recorded for a different request.
    pub refused: u64,
}

impl OnceStats {
    /// Adds another table's counters (another core's).
    pub fn add(&mut self, o: &OnceStats) {
        self.hits += o.hits;
        self.recorded += o.recorded;
        self.evicted += o.evicted;
        self.refused += o.refused;
    }
}

/// The recent outcomes of one server core, `O` each (see the module docs).
#[derive(Clone)]
pub struct OnceTable<O: Copy> {
    window: Window,
    /// The SipHash key.
    k: (u64, u64),
    records: HashMap<Key, (Hash, O)>,
    /// Keys in the order they were recorded, oldest first (with keys a client's own bound
    /// already dropped: skipped when they come up).
    order: VecDeque<Key>,
    /// Each client's recorded ids, oldest first.
    clients: HashMap<Client, VecDeque<u32>>,
    stats: OnceStats,
}

impl<O: Copy> OnceTable<O> {
    /// An empty table keeping `window` records, under a hash key drawn from the operating
    /// system.
    ///
    /// # Panics
    /// When the operating system gives no random bytes (neither `getrandom(2)` nor
    /// `/dev/urandom`): without a secret key, a client could aim for a hash collision.
    pub fn new(window: Window) -> OnceTable<O> {
        let mut b = [0u8; 16];
        if let Err(e) = getrandom::getrandom(&mut b) {
            // Without a secret key, a client could aim for a hash collision.
            panic!("cornflakes-rpc: no random hash key from the operating system: {e}");
        }
        let (k0, k1) = b.split_at(8);
        let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or_default());
        OnceTable::with_key(window, (word(k0), word(k1)))
    }

    /// [`OnceTable::new`] with hash key `k` (tests that need the same hashes every run).
    pub fn with_key(window: Window, k: (u64, u64)) -> OnceTable<O> {
        OnceTable {
            window,
            k,
            records: HashMap::new(),
            order: VecDeque::new(),
            clients: HashMap::new(),
            stats: OnceStats::default(),
        }
    }

    /// The window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// Counters.
    pub fn stats(&self) -> OnceStats {
        self.stats
    }

    /// Records held now.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Clients with records held.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// The keyed hash of a request: its message type, its length and every byte.
    fn hash(&self, ty: u16, body: &[u8]) -> Hash {
        let mut h = SipHasher13::new_with_keys(self.k.0, self.k.1);
        h.write_u16(ty);
        h.write_u64(body.len() as u64);
        h.write(body);
        let h = h.finish128();
        [h.h1, h.h2]
    }

    /// Looks `req` up: a request to run (then [`OnceTable::record`] its outcome), a retry to
    /// answer with its recorded outcome, or a reused id to refuse.
    pub fn check(&mut self, req: &Incoming<'_>) -> Check<O> {
        let key = Key::new(req.sender.into(), req.msg.id);
        let hash = self.hash(req.msg.ty, req.body);
        match self.records.get(&key) {
            None => Check::Run(Fresh { key, hash }),
            Some(&(h, o)) if h == hash => {
                self.stats.hits += 1;
                Check::Answered(o)
            }
            Some(_) => {
                self.stats.refused += 1;
                Check::Refused
            }
        }
    }

    /// Records the outcome of a request [`OnceTable::check`] said to run, dropping the oldest
    /// records beyond the window.
    pub fn record(&mut self, fresh: Fresh, outcome: O) {
        if self.window.per_core == 0 {
            return;
        }
        let Fresh { key, hash } = fresh;
        self.stats.recorded += 1;
        if self.records.insert(key, (hash, outcome)).is_some() {
            // Recorded meanwhile by a request checked at the same time: the same request,
            // since its hash was not refused. The newer outcome stands, in its old place.
            return;
        }
        self.order.push_back(key);
        let mine = self.clients.entry(key.client()).or_default();
        mine.push_back(key.id);
        if mine.len() > self.window.per_client.max(1) {
            // The client's own bound: its oldest goes (its key in `order` is skipped later).
            if let Some(id) = mine.pop_front() {
                self.records.remove(&Key::new(key.client(), id));
                self.stats.evicted += 1;
            }
        }
        while self.order.len() > self.window.per_core {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            let Some(ids) = self.clients.get_mut(&old.client()) else {
                continue;
            };
            if ids.front() != Some(&old.id) {
                continue; // already dropped by the client's own bound
            }
            ids.pop_front();
            if ids.is_empty() {
                self.clients.remove(&old.client());
            }
            if self.records.remove(&old).is_some() {
                self.stats.evicted += 1;
            }
        }
    }
}

impl<O: Copy> std::fmt::Debug for OnceTable<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnceTable")
            .field("window", &self.window)
            .field("records", &self.records.len())
            .field("clients", &self.clients.len())
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    type Table = OnceTable<Result<usize, u8>>;

    fn table(w: usize) -> Table {
        OnceTable::new(Window::of(w))
    }

    fn from(inc: u64, id: u32, body: &[u8]) -> Incoming<'_> {
        Incoming {
            sender: Sender::Incarnation(inc),
            msg: Msg::new(id, 7).with_incarnation(inc),
            body,
        }
    }

    /// Runs `req` through `t` as a server would: `apply` runs only for a fresh request.
    fn serve(
        t: &mut Table,
        req: &Incoming<'_>,
        apply: Result<usize, u8>,
    ) -> Check<Result<usize, u8>> {
        match t.check(req) {
            Check::Run(f) => {
                t.record(f, apply);
                Check::Answered(apply)
            }
            other => other,
        }
    }

    fn answered(c: Check<Result<usize, u8>>) -> Option<Result<usize, u8>> {
        match c {
            Check::Answered(o) => Some(o),
            _ => None,
        }
    }

    #[test]
    fn a_retry_is_answered_and_a_reused_id_refused() {
        let mut t = table(1 << 16);
        let first = from(1, 5, b"append k v1");
        assert!(matches!(t.check(&first), Check::Run(_)));
        assert_eq!(answered(serve(&mut t, &first, Ok(3))), Some(Ok(3)));
        // The same bytes again: a retry, answered with the first outcome.
        assert!(matches!(t.check(&first), Check::Answered(Ok(3))));
        // The same key, other bytes: refused, whatever the prefix.
        assert!(matches!(
            t.check(&from(1, 5, b"append k v2")),
            Check::Refused
        ));
        assert!(matches!(
            t.check(&from(1, 5, b"append k v1 ")),
            Check::Refused
        ));
        assert!(
            matches!(
                t.check(&Incoming {
                    msg: Msg::new(5, 8).with_incarnation(1),
                    ..first
                }),
                Check::Refused
            ),
            "another message type"
        );
        // Another incarnation or another id: a new request.
        assert!(matches!(
            t.check(&from(2, 5, b"append k v1")),
            Check::Run(_)
        ));
        assert!(matches!(
            t.check(&from(1, 6, b"append k v1")),
            Check::Run(_)
        ));
        assert_eq!(
            t.stats(),
            OnceStats {
                hits: 1,
                recorded: 1,
                evicted: 0,
                refused: 3
            }
        );
    }

    /// The hash covers every byte: two requests equal but for their last byte, of the size of
    /// the largest pinned item, are told apart.
    #[test]
    fn requests_that_differ_only_in_their_last_byte_are_told_apart() {
        let mut t = table(1 << 16);
        let a = vec![0x5a; 16 * 1024];
        let mut b = a.clone();
        *b.last_mut().unwrap() ^= 1;
        serve(&mut t, &from(9, 1, &a), Ok(0));
        assert!(matches!(t.check(&from(9, 1, &b)), Check::Refused));
        assert!(matches!(t.check(&from(9, 1, &a)), Check::Answered(Ok(0))));
        // Equal bytes and different lengths are different requests too.
        assert!(matches!(
            t.check(&from(9, 1, &a[..a.len() - 1])),
            Check::Refused
        ));
    }

    #[test]
    fn anonymous_clients_are_keyed_by_address_and_never_meet_an_incarnation() {
        let addr = |port| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port);
        let anon = |port, body| Incoming::new(Msg::new(1, 7), body, || Some(addr(port))).unwrap();
        let mut t = table(1 << 16);
        serve(&mut t, &anon(1, b"put k v"), Ok(0));
        assert!(matches!(t.check(&anon(1, b"put k v")), Check::Answered(_)));
        assert!(
            matches!(t.check(&anon(2, b"put k v")), Check::Run(_)),
            "another port"
        );
        // A restarted anonymous client on the same port reusing an id: refused, not answered.
        assert!(matches!(t.check(&anon(1, b"put k w")), Check::Refused));
        // An incarnation numerically equal to a packed address is another key space.
        let packed = (u64::from(u32::from(Ipv4Addr::new(10, 0, 0, 2))) << 16) | 1;
        assert!(matches!(
            t.check(&from(packed, 1, b"put k v")),
            Check::Run(_)
        ));
        // The address is asked for only when the client is anonymous; without it, no key.
        let mut asked = false;
        let r = Incoming::new(Msg::new(1, 7).with_incarnation(3), b"x", || {
            asked = true;
            None
        });
        assert!(r.is_some() && !asked);
        assert!(Incoming::new(Msg::new(1, 7), b"x", || None).is_none());
    }

    #[test]
    fn the_window_is_bounded_and_one_busy_client_cannot_push_out_another() {
        let mut t = table(16 * 1024); // 2 048 per client
        assert_eq!(t.window().per_client, 2048);
        let quiet = from(1, 7, b"append k v");
        serve(&mut t, &quiet, Ok(1));
        for id in 0..10_000 {
            serve(&mut t, &from(2, id, b"put"), Ok(0));
        }
        assert!(
            matches!(t.check(&quiet), Check::Answered(Ok(1))),
            "the quiet client's retry"
        );
        assert_eq!(t.len(), 1 + 2048);
        assert!(matches!(
            t.check(&from(2, 9_999, b"put")),
            Check::Answered(_)
        ));
        assert!(
            matches!(t.check(&from(2, 0, b"put")), Check::Run(_)),
            "the busy client's oldest went"
        );
        // Many clients: the core's window bounds them all, and forgotten clients go.
        for c in 0..40_000u64 {
            serve(&mut t, &from(3 + c % 60_000, c as u32, b"x"), Ok(0));
        }
        assert!(t.len() <= 16 * 1024);
        assert!(t.clients() <= 16 * 1024);
        assert!(
            matches!(t.check(&quiet), Check::Run(_)),
            "the window moved on"
        );
        assert!(t.stats().evicted > 0);
    }

    #[test]
    fn a_window_of_zero_keeps_nothing() {
        let mut t = table(0);
        assert_eq!(
            t.window(),
            Window {
                per_core: 0,
                per_client: 0
            }
        );
        let a = from(1, 1, b"a");
        serve(&mut t, &a, Ok(1));
        assert!(matches!(t.check(&a), Check::Run(_)));
        assert!(t.is_empty());
    }

    #[test]
    fn tables_have_their_own_keys() {
        let (a, b): (Table, Table) = (table(16), table(16));
        assert_ne!(a.k, b.k);
        assert_ne!(a.hash(1, b"same"), b.hash(1, b"same"));
        let c: Table = OnceTable::with_key(Window::of(16), a.k);
        assert_eq!(a.hash(1, b"same"), c.hash(1, b"same"));
        assert_ne!(a.hash(1, b"same"), a.hash(2, b"same"));
    }

    #[test]
    fn the_default_window_is_65_536_per_core_and_8_192_per_client() {
        assert_eq!(
            Window::DEFAULT,
            Window {
                per_core: 65_536,
                per_client: 8_192
            }
        );
        assert_eq!(Window::of(4096).per_client, 1024);
        assert_eq!(Window::of(100).per_client, 100);
    }
}
