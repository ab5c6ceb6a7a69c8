//! The client side: sending requests in each serialization, decoding replies, the load
//! generator's [`ClientTransport`] over a datapath, and the [`Expected`] checker that verifies
//! every reply against what the store must hold.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddrV4;
use std::sync::Arc;

use std::time::Duration;

use cornflakes::{Arena, ConnId, Datapath, Msg, RxMsg, SendError};
use cornflakes_rpc::{CallError, Client, ClientIds, RetryPolicy};
use loadgen::{request_id, split_request_id, ClientTransport, Response};

use crate::cf;
use crate::ops::{Op, OpKind, Reply, Status};
use crate::resp;
use crate::serialization::Serialization;

/// Queues request `op` on `conn` with framing header `msg` (the caller flushes). Cornflakes
/// requests are serialized-and-sent (values copied: the client's values are not pinned);
/// the other formats' requests are encoded, then copied as one buffer. `buf` and `arena` are scratch space.
pub fn send_op<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    ser: Serialization,
    op: &Op,
    arena: &mut Arena,
    buf: &mut Vec<u8>,
) -> Result<(), SendError> {
    if ser.is_cornflakes() {
        arena.reset();
        cf::Request::build(op, msg.id, arena).send(dp, conn, msg)
    } else {
        encode_request(ser, op, msg.id, buf);
        dp.send_copy(conn, msg, buf)
    }
}

/// The encoding of request `op` with id `id` in `ser`, a library's or RESP's (RESP carries no
/// id), in `out` (cleared first). Cornflakes requests are built as objects ([`cf::Request`]).
pub fn encode_request(ser: Serialization, op: &Op, id: u32, out: &mut Vec<u8>) {
    out.clear();
    match ser.library() {
        Some(lib) => crate::libs::encode_request(lib, op, id, out),
        None => resp::encode_request(op, out),
    }
}

thread_local! {
    static DECODE_ARENA: RefCell<Arena> = RefCell::new(Arena::new());
}

/// Decodes a reply to a request of `kind` in `ser`. The Cornflakes formats also return the
/// id the reply carries.
pub fn decode_reply(
    ser: Serialization,
    kind: OpKind,
    payload: &[u8],
) -> Result<(Option<u32>, Reply), String> {
    if ser.is_cornflakes() {
        DECODE_ARENA.with(|a| {
            let mut arena = a.borrow_mut();
            arena.reset();
            cf::decode_reply(kind, payload, &arena).map(|(id, r)| (Some(id), r))
        })
    } else if let Some(lib) = ser.library() {
        crate::libs::decode_reply(lib, kind, payload).map(|(id, r)| (Some(id), r))
    } else {
        resp::decode_reply(kind, payload).map(|r| (None, r))
    }
}

/// Which request of a run's list load-generator request `id` sends: thread `t`'s `seq`-th
/// request is element `(seq · threads + t) mod n`, so the threads together walk the list in
/// order and cycle when it runs out.
pub fn request_index(id: u64, threads: usize, n: usize) -> usize {
    let (t, seq) = split_request_id(id);
    ((seq as u128 * threads.max(1) as u128 + t as u128) % n.max(1) as u128) as usize
}

/// The requests of a run, shared by the client threads and the checker.
#[derive(Debug)]
pub struct RunRequests {
    /// The requests, in order.
    pub ops: Vec<Op>,
    /// Client threads of the run (see [`request_index`]).
    pub threads: usize,
}

impl RunRequests {
    /// The request load-generator request `id` sends.
    pub fn op(&self, id: u64) -> &Op {
        &self.ops[request_index(id, self.threads, self.ops.len())]
    }
}

/// A split request's parts: each part's core and, once it arrived, its reply.
type SplitParts = Vec<(usize, Option<Vec<u8>>)>;

/// Open-loop requests a load-generator thread keeps in flight at most (Cornflakes
/// serializations): the generated client's table of outstanding ids.
pub const MAX_OUTSTANDING: usize = 1 << 14;

/// Which request (the load generator's id) and which part of it (`None`: the whole request)
/// a message id of the generated client carries.
type Sent = (u64, Option<u16>);

/// One load-generator thread's connection to the server over datapath `D`: to one server
/// core, or to N cores with each request steered to the core that owns its key
/// ([`crate::steer`]; a `getm`/`putm` over several cores is split, and reported once every
/// part's reply is in, as one [`crate::steer::encode_parts`] payload). The Cornflakes
/// serializations go through the generated client of `kv.Kv` (its open-loop `send_<method>`
/// and `poll`); the others build requests and read replies by hand.
pub struct KvClient<D: Datapath> {
    /// Core *i*'s connections are `conns[i]`, `conns[i + cores]`, … (one each on UDP).
    conns: Vec<ConnId>,
    cores: usize,
    thread: usize,
    reqs: Arc<RunRequests>,
    /// Split requests waiting for parts, by the load generator's id: each part's core and
    /// reply.
    pending: HashMap<u64, SplitParts>,
    parts_buf: Vec<u8>,
    arena: Arena,
    way: Way<D>,
}

enum Way<D: Datapath> {
    /// The generated client; `sent[id mod len]` is what its request `id` carries.
    Service {
        client: crate::schema::KvClient<D>,
        sent: Vec<Sent>,
    },
    /// Requests encoded by [`send_op`], replies read off the datapath.
    Hand {
        dp: D,
        ser: Serialization,
        buf: Vec<u8>,
        rx: Vec<RxMsg>,
        /// Its own incarnation: a load generator's requests never outlive its run, and a
        /// server that outlives the run must not take the next run's requests (ids
        /// restarting) for reused ids.
        ids: ClientIds,
    },
}

impl<D: Datapath> KvClient<D> {
    /// A client of `server` for load-generator thread `thread`, sending `reqs` in `ser`.
    pub fn new(
        dp: D,
        server: SocketAddrV4,
        thread: usize,
        ser: Serialization,
        reqs: Arc<RunRequests>,
    ) -> io::Result<Self> {
        Self::steered(dp, &[server], thread, ser, reqs)
    }

    /// A client of the server cores at `cores` (core *i* at `cores[i]`) that sends every
    /// request to the core owning its key.
    pub fn steered(
        mut dp: D,
        cores: &[SocketAddrV4],
        thread: usize,
        ser: Serialization,
        reqs: Arc<RunRequests>,
    ) -> io::Result<Self> {
        let conns = cornflakes::datapath::Connect::connect_all(&mut dp, cores)?;
        Self::with_conns(dp, conns, cores.len(), thread, ser, reqs)
    }

    fn with_conns(
        dp: D,
        conns: Vec<ConnId>,
        cores: usize,
        thread: usize,
        ser: Serialization,
        reqs: Arc<RunRequests>,
    ) -> io::Result<Self> {
        let way = if ser.is_cornflakes() {
            // The load generator times requests out itself: the client's timeout only frees
            // the table of requests that will never be answered.
            let policy = RetryPolicy {
                timeout: Duration::from_secs(2),
                tries: 1,
            };
            let client = Client::with_capacity(dp, conns[0], policy, MAX_OUTSTANDING)
                // Its requests never outlive the run: an identity of its own.
                .with_ids(ClientIds::fresh());
            // One entry per slot of the table (a power of two): an id picks it by its low bits.
            let sent = vec![(0, None); client.capacity()];
            Way::Service {
                client: crate::schema::KvClient::from_client(client),
                sent,
            }
        } else {
            Way::Hand {
                dp,
                ser,
                buf: Vec::new(),
                rx: Vec::with_capacity(64),
                ids: ClientIds::fresh(),
            }
        };
        Ok(KvClient {
            conns,
            cores,
            thread,
            reqs,
            pending: HashMap::new(),
            parts_buf: Vec::new(),
            arena: Arena::new(),
            way,
        })
    }

    /// The datapath.
    pub fn datapath(&mut self) -> &mut D {
        match &mut self.way {
            Way::Service { client, .. } => client.inner_mut().datapath_mut(),
            Way::Hand { dp, .. } => dp,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        bench_client::flush(self.datapath())
    }

    fn send(&mut self, id: u64) -> Result<(), SendError> {
        let reqs = self.reqs.clone();
        let op = reqs.op(id);
        let (_, seq) = split_request_id(id);
        let n = self.cores;
        if let Some(core) = crate::steer::owner(op, n) {
            return self.send_to(core, id, seq as u32, None, op);
        }
        let parts = crate::steer::split(op, n);
        self.pending
            .insert(id, parts.iter().map(|p| (p.core, None)).collect());
        for (i, p) in parts.iter().enumerate() {
            // A full queue is flushed here, part by part: retrying the whole request would
            // send the parts already queued twice.
            let mut r = self.send_to(p.core, id, seq as u32, Some(i as u16), &p.op);
            if let Err(SendError::Full) = r {
                let _ = self.flush();
                r = self.send_to(p.core, id, seq as u32, Some(i as u16), &p.op);
            }
            if let Err(e) = r {
                self.pending.remove(&id);
                return Err(match e {
                    SendError::Full => SendError::Io(io::Error::other(
                        "transmit queue full in the middle of a split request",
                    )),
                    e => e,
                });
            }
        }
        Ok(())
    }

    /// Sends request `op` (part `part` of request `id`, or all of it) to core `core`, over
    /// that core's connections in turn by `seq`.
    fn send_to(
        &mut self,
        core: usize,
        id: u64,
        seq: u32,
        part: Option<u16>,
        op: &Op,
    ) -> Result<(), SendError> {
        let conn = self.conns[core + self.cores * (seq as usize % (self.conns.len() / self.cores))];
        match &mut self.way {
            Way::Service { client, sent } => {
                self.arena.reset();
                let req = cf::Request::build(op, seq, &self.arena);
                client.inner_mut().use_conn(conn);
                match req.send_with(client) {
                    Ok(wire) => {
                        let len = sent.len();
                        sent[wire as usize & (len - 1)] = (id, part);
                        Ok(())
                    }
                    Err(CallError::Send(e)) => Err(e),
                    Err(e) => Err(SendError::Io(io::Error::other(e.to_string()))),
                }
            }
            Way::Hand {
                dp, ser, buf, ids, ..
            } => {
                // Wire id `seq mod 2^32`, under an incarnation of its own for each 2^32
                // requests (the parts of a split request share their request's).
                let (_, full) = split_request_id(id);
                let msg = ids.nth(full, OpKind::of(op).msg_type());
                send_op(dp, conn, msg, *ser, op, &mut self.arena, buf)
            }
        }
    }

    /// Hands on the reply to request `id` (or part `part` of it): at once, or once every
    /// part of a split request is in.
    fn reply(
        pending: &mut HashMap<u64, SplitParts>,
        parts_buf: &mut Vec<u8>,
        id: u64,
        part: Option<usize>,
        payload: &[u8],
        on_response: &mut dyn FnMut(Response<'_>),
    ) -> usize {
        let Some(parts) = pending.get_mut(&id) else {
            on_response(Response {
                id: Some(id),
                payload,
            });
            return 1;
        };
        if let Some(slot) = part
            .and_then(|i| parts.get_mut(i))
            .filter(|s| s.1.is_none())
        {
            slot.1 = Some(payload.to_vec());
        }
        if !parts.iter().all(|(_, r)| r.is_some()) {
            return 0;
        }
        let parts = pending.remove(&id).unwrap_or_default();
        let replies: Vec<Vec<u8>> = parts.into_iter().filter_map(|(_, r)| r).collect();
        crate::steer::encode_parts(&replies, parts_buf);
        on_response(Response {
            id: Some(id),
            payload: parts_buf,
        });
        1
    }
}

impl KvClient<datapath_tcp::TcpDatapath> {
    /// [`KvClient::steered`] over kernel TCP with `per_core` connections to each server core:
    /// a request goes to its key's core, over that core's connections in turn (by wire id).
    pub fn steered_tcp(
        mut dp: datapath_tcp::TcpDatapath,
        cores: &[SocketAddrV4],
        per_core: usize,
        thread: usize,
        ser: Serialization,
        reqs: Arc<RunRequests>,
    ) -> io::Result<Self> {
        let conns = bench_client::tcp_conns(&mut dp, cores, per_core)?;
        Self::with_conns(dp, conns, cores.len(), thread, ser, reqs)
    }
}

impl<D: Datapath> ClientTransport for KvClient<D> {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        let mut r = self.send(id);
        if let Err(SendError::Full) = r {
            self.flush()?;
            r = self.send(id);
        }
        r.map_err(|e| io::Error::other(e.to_string()))
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        let (pending, parts_buf) = (&mut self.pending, &mut self.parts_buf);
        let mut n = 0;
        match &mut self.way {
            Way::Service { client, sent } => {
                client.poll(|wire, reply| {
                    let (id, part) = sent[wire as usize & (sent.len() - 1)];
                    let payload = match &reply {
                        Ok(r) => r.bytes(),
                        // The load generator counts a request with no reply as lost.
                        Err(CallError::TimedOut) => return,
                        // A refused or unreadable reply is a reply, and a wrong one.
                        Err(_) => &[],
                    };
                    let part = part.map(usize::from);
                    n += Self::reply(pending, parts_buf, id, part, payload, on_response);
                });
            }
            Way::Hand { dp, rx, .. } => {
                bench_client::flush(dp)?;
                rx.clear();
                dp.recv_burst(rx)?;
                for m in rx.iter() {
                    let id = request_id(self.thread, u64::from(m.msg.id));
                    // A part of a split request: which one, by the core it came from.
                    let part = pending.get(&id).and_then(|parts| {
                        let core = self
                            .conns
                            .iter()
                            .position(|c| *c == m.conn)
                            .map(|i| i % self.cores)?;
                        parts.iter().position(|(c, r)| *c == core && r.is_none())
                    });
                    n += Self::reply(pending, parts_buf, id, part, &m.data, on_response);
                }
                rx.clear();
            }
        }
        Ok(n)
    }
}

/// A value as the checker remembers it: [`loadgen::payload_hash`], which tells apart any two
/// values that differ in one 8-byte word and costs a fraction of SipHash (a CDN reply's
/// check was mostly SipHash over its 8 KiB value).
fn hash(v: &[u8]) -> u64 {
    loadgen::payload_hash(v)
}

/// The loaded list of a key (`None`: not loaded), as a workload recomputes it.
pub type InitialValue = Box<dyn Fn(&str) -> Option<Vec<Vec<u8>>> + Send + Sync>;

/// A key's list as the checker remembers it: one hash per value.
type ListState = Vec<u64>;

/// What the store must hold: for every key, each state its list passes through during a run
/// (the loaded list, then the list after each write of the run, in request order; `None` when
/// the key is absent). A read is correct when its reply, byte for byte, matches one of those
/// states: open-loop requests to one key may be reordered on the way (several client threads),
/// so a read may legitimately see the state before or after a concurrent write, but never a
/// value that was not stored, a wrong element, or a missing key that exists (and vice versa).
/// Writes must succeed (`OK`; a delete of an absent key answers `NOT_FOUND`).
///
/// The loaded value of every key the run names is computed once, up front, by `initial` (the
/// workload's [`kv_workloads::Workload::initial_value`]); checking a reply then hashes only
/// the reply.
pub struct Expected {
    /// Longest value a reply of the run may carry (loaded or written), bytes.
    max_value: usize,
    written: HashMap<String, Vec<Option<ListState>>>,
    initial: InitialValue,
}

/// How a checker looks a key's list up: calls the closure with each state it accepts and
/// says whether one passed.
type States<'a> = &'a dyn Fn(&str, &mut dyn FnMut(Option<&ListState>) -> bool) -> bool;

/// What a write does to one key's list.
enum Effect {
    /// The list becomes this (`None`: the key is removed).
    Set(Option<ListState>),
    /// This element is appended.
    Append(u64),
}

/// The effects of `op` on each key it writes (none for a read).
fn effects(op: &Op) -> Vec<(&str, Effect)> {
    match op {
        Op::Put { key, val } => vec![(key.as_str(), Effect::Set(Some(vec![hash(val)])))],
        Op::PutM { keys, vals } if keys.len() == vals.len() => keys
            .iter()
            .zip(vals)
            .map(|(k, v)| (k.as_str(), Effect::Set(Some(vec![hash(v)]))))
            .collect(),
        Op::Append { key, val } => vec![(key.as_str(), Effect::Append(hash(val)))],
        Op::Delete { key } => vec![(key.as_str(), Effect::Set(None))],
        _ => Vec::new(),
    }
}

/// The store's contents as an in-order checker tracks them: the lists of the keys written so
/// far (the others hold what was loaded). See [`Expected::check_now`].
#[derive(Debug, Default, Clone)]
pub struct Current {
    lists: HashMap<String, Option<ListState>>,
}

fn list_state(vals: &[Vec<u8>]) -> ListState {
    vals.iter().map(|v| hash(v)).collect()
}

impl Expected {
    /// The states of a store loaded as `initial` says, after the writes of `ops` in order.
    pub fn new(initial: InitialValue, ops: &[Op]) -> Self {
        let mut e = Expected {
            max_value: 0,
            written: HashMap::new(),
            initial,
        };
        for op in ops {
            for k in op.keys() {
                if !e.written.contains_key(k) {
                    let init = (e.initial)(k);
                    let longest = init.iter().flatten().map(Vec::len).max().unwrap_or(0);
                    e.max_value = e.max_value.max(longest);
                    let first = init.map(|v| list_state(&v));
                    e.written.insert(k.to_owned(), vec![first]);
                }
            }
        }
        for op in ops {
            e.apply(op);
        }
        e
    }

    /// The states of a workload's store after the writes of `ops`.
    pub fn for_workload(w: Arc<dyn kv_workloads::Workload>, ops: &[Op]) -> Self {
        Expected::new(Box::new(move |k| w.initial_value(k)), ops)
    }

    fn push(&mut self, key: &str, f: impl FnOnce(Option<&ListState>) -> Option<ListState>) {
        if !self.written.contains_key(key) {
            let first = (self.initial)(key).map(|v| list_state(&v));
            self.written.insert(key.to_owned(), vec![first]);
        }
        let states = self.written.get_mut(key).expect("inserted above");
        let next = f(states.last().and_then(Option::as_ref));
        if !states.contains(&next) {
            states.push(next);
        }
    }

    /// The longest value a reply of the run may carry (loaded or written), bytes.
    pub fn max_value_len(&self) -> usize {
        self.max_value
    }

    /// Records the effect of a write.
    pub fn apply(&mut self, op: &Op) {
        for v in match op {
            Op::Put { val, .. } | Op::Append { val, .. } => std::slice::from_ref(val),
            Op::PutM { vals, .. } => vals.as_slice(),
            _ => &[],
        } {
            self.max_value = self.max_value.max(v.len());
        }
        for (key, effect) in effects(op) {
            match effect {
                Effect::Set(l) => self.push(key, |_| l),
                Effect::Append(h) => self.push(key, |last| {
                    let mut l = last.cloned().unwrap_or_default();
                    l.push(h);
                    Some(l)
                }),
            }
        }
    }

    fn any_state(&self, key: &str, f: &mut dyn FnMut(Option<&ListState>) -> bool) -> bool {
        match self.written.get(key) {
            Some(states) => states.iter().any(|s| f(s.as_ref())),
            None => f((self.initial)(key).map(|v| list_state(&v)).as_ref()),
        }
    }

    /// Whether `(status, value)` is a correct answer for element `index` of `key`.
    fn element_ok(
        states: States<'_>,
        key: &str,
        index: usize,
        status: Status,
        val: Option<&[u8]>,
    ) -> bool {
        let h = val.map(hash);
        states(key, &mut |s| match (s, status, h) {
            (None, Status::NotFound, _) => true,
            (Some(l), Status::Ok, Some(h)) => l.get(index) == Some(&h),
            (Some(l), Status::BadIndex, _) => index >= l.len(),
            _ => false,
        })
    }

    /// Whether `reply` is a correct answer to `op` in some state the store passes through
    /// during the run (see [`Expected`]: concurrent clients may reorder a read and a write).
    pub fn check(&self, op: &Op, reply: &Reply) -> bool {
        Self::check_in(&|k, f| self.any_state(k, f), op, reply)
    }

    /// Whether `reply` is a correct answer to `op` in the state `now` holds: the loaded
    /// contents after the writes applied to `now` in order ([`Expected::apply_to`]). For a
    /// checker that sees one core's replies in the order the core handled the requests.
    pub fn check_now(&self, now: &Current, op: &Op, reply: &Reply) -> bool {
        Self::check_in(
            &|k, f| match now.lists.get(k) {
                Some(l) => f(l.as_ref()),
                None => match self.written.get(k) {
                    Some(states) => f(states[0].as_ref()),
                    None => f((self.initial)(k).map(|v| list_state(&v)).as_ref()),
                },
            },
            op,
            reply,
        )
    }

    /// Applies the write `op` (if it is one) to `now`, as the store does.
    pub fn apply_to(&self, now: &mut Current, op: &Op) {
        for (key, effect) in effects(op) {
            let next = match effect {
                Effect::Set(l) => l,
                Effect::Append(h) => {
                    let mut l = match now.lists.get(key) {
                        Some(l) => l.clone(),
                        None => self
                            .written
                            .get(key)
                            .and_then(|s| s[0].clone())
                            .or_else(|| (self.initial)(key).map(|v| list_state(&v))),
                    }
                    .unwrap_or_default();
                    l.push(h);
                    Some(l)
                }
            };
            now.lists.insert(key.to_owned(), next);
        }
    }

    fn check_in(states: States<'_>, op: &Op, reply: &Reply) -> bool {
        let first = reply.vals.first().map(Vec::as_slice);
        match op {
            Op::Get { key } => {
                reply.vals.len() <= 1 && Self::element_ok(states, key, 0, reply.status, first)
            }
            Op::GetFromList { key, index } => {
                reply.vals.len() <= 1
                    && Self::element_ok(states, key, *index as usize, reply.status, first)
            }
            Op::GetList { key } => {
                let got = list_state(&reply.vals);
                states(key, &mut |s| match (s, reply.status) {
                    (None, Status::NotFound) => true,
                    (Some(l), Status::Ok) => *l == got,
                    _ => false,
                })
            }
            Op::GetM { keys } => {
                let statuses = &reply.statuses;
                statuses.len() == keys.len()
                    && reply.vals.len() == keys.len()
                    && reply.status
                        == statuses
                            .iter()
                            .copied()
                            .find(|s| *s != Status::Ok)
                            .unwrap_or(Status::Ok)
                    && keys
                        .iter()
                        .zip(statuses)
                        .zip(&reply.vals)
                        .all(|((k, s), v)| {
                            let v = (*s == Status::Ok).then_some(v.as_slice());
                            Self::element_ok(states, k, 0, *s, v)
                        })
            }
            Op::Delete { key } => match reply.status {
                Status::Ok => states(key, &mut |s| s.is_some()),
                Status::NotFound => states(key, &mut |s| s.is_none()),
                _ => false,
            },
            Op::Put { .. } | Op::PutM { .. } | Op::Append { .. } => {
                reply.status == Status::Ok && reply.vals.is_empty()
            }
        }
    }
}

/// The load generator's checker for one serialization: decodes each reply and verifies it
/// with [`Expected`].
pub struct Checker {
    /// The run's requests.
    pub reqs: Arc<RunRequests>,
    /// What the store holds.
    pub expected: Arc<Expected>,
    /// The serialization replies are in.
    pub ser: Serialization,
    /// Server cores the client steers over (1: one server). With more, the reply to a
    /// request whose keys span cores is the [`crate::steer::encode_parts`] of its parts'
    /// replies, merged here before checking.
    pub cores: usize,
}

impl Checker {
    /// Whether `payload` is a correct reply to load-generator request `id`.
    pub fn check(&self, id: u64, payload: &[u8]) -> bool {
        let op = self.reqs.op(id);
        let (_, seq) = split_request_id(id);
        let decode = |kind, payload| match decode_reply(self.ser, kind, payload) {
            Ok((wire_id, reply)) if wire_id.is_none_or(|w| w == seq as u32) => Some(reply),
            _ => None,
        };
        if self.cores > 1 && crate::steer::owner(op, self.cores).is_none() {
            let parts = crate::steer::split(op, self.cores);
            let Ok(payloads) = crate::steer::decode_parts(payload) else {
                return false;
            };
            if payloads.len() != parts.len() {
                return false;
            }
            let replies: Option<Vec<Reply>> = parts
                .iter()
                .zip(payloads)
                .map(|(p, pl)| decode(OpKind::of(&p.op), pl))
                .collect();
            return replies
                .and_then(|r| crate::steer::merge(op, &parts, r).ok())
                .is_some_and(|merged| self.expected.check(op, &merged));
        }
        decode(OpKind::of(op), payload).is_some_and(|reply| self.expected.check(op, &reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(ops: &[Op]) -> Expected {
        Expected::new(
            Box::new(|k: &str| match k {
                "a" => Some(vec![b"a0".to_vec()]),
                "l" => Some(vec![b"x".to_vec(), b"y".to_vec()]),
                _ => None,
            }),
            ops,
        )
    }

    fn reply(status: Status, vals: &[&[u8]]) -> Reply {
        Reply {
            status,
            vals: vals.iter().map(|v| v.to_vec()).collect(),
            statuses: Vec::new(),
        }
    }

    #[test]
    fn wrong_values_statuses_and_elements_are_rejected() {
        let put = Op::Put {
            key: "a".into(),
            val: b"a1".to_vec(),
        };
        let e = expected(&[Op::Get { key: "a".into() }, put.clone()]);
        let get = Op::Get { key: "a".into() };
        // Before or after the run's put: both correct.
        assert!(e.check(&get, &reply(Status::Ok, &[b"a0"])));
        assert!(e.check(&get, &reply(Status::Ok, &[b"a1"])));
        assert!(!e.check(&get, &reply(Status::Ok, &[b"a2"])));
        assert!(!e.check(&get, &reply(Status::NotFound, &[])));
        assert!(e.check(&put, &reply(Status::Ok, &[])));
        assert!(!e.check(&put, &reply(Status::StoreFull, &[])));
        let missing = Op::Get { key: "zz".into() };
        assert!(e.check(&missing, &reply(Status::NotFound, &[])));
        assert!(!e.check(&missing, &reply(Status::Ok, &[b""])));
        let el = |i| Op::GetFromList {
            key: "l".into(),
            index: i,
        };
        assert!(e.check(&el(1), &reply(Status::Ok, &[b"y"])));
        assert!(!e.check(&el(0), &reply(Status::Ok, &[b"y"])));
        assert!(e.check(&el(2), &reply(Status::BadIndex, &[])));
        assert!(!e.check(&el(1), &reply(Status::BadIndex, &[])));
        let list = Op::GetList { key: "l".into() };
        assert!(e.check(&list, &reply(Status::Ok, &[b"x", b"y"])));
        assert!(!e.check(&list, &reply(Status::Ok, &[b"y", b"x"])));
        let getm = Op::GetM {
            keys: vec!["a".into(), "zz".into()],
        };
        let mut r = reply(Status::NotFound, &[b"a0", b""]);
        r.statuses = vec![Status::Ok, Status::NotFound];
        assert!(e.check(&getm, &r));
        r.status = Status::Ok;
        assert!(
            !e.check(&getm, &r),
            "overall status must be the first failure"
        );
    }

    #[test]
    fn in_order_a_read_must_see_the_value_the_key_holds_now() {
        let put = |v: &[u8]| Op::Put {
            key: "a".into(),
            val: v.to_vec(),
        };
        let e = expected(&[put(b"a1"), put(b"a2")]);
        let get = Op::Get { key: "a".into() };
        let mut now = Current::default();
        // Loaded: only a0 is right now, though the run's other states are right for `check`.
        assert!(e.check_now(&now, &get, &reply(Status::Ok, &[b"a0"])));
        assert!(!e.check_now(&now, &get, &reply(Status::Ok, &[b"a1"])));
        assert!(e.check(&get, &reply(Status::Ok, &[b"a1"])));
        e.apply_to(&mut now, &put(b"a1"));
        assert!(e.check_now(&now, &get, &reply(Status::Ok, &[b"a1"])));
        assert!(
            !e.check_now(&now, &get, &reply(Status::Ok, &[b"a0"])),
            "a stale value is wrong in order"
        );
        // Appends grow the list each time they are applied (a request set sent in cycles).
        let app = Op::Append {
            key: "l".into(),
            val: b"z".to_vec(),
        };
        let list = Op::GetList { key: "l".into() };
        e.apply_to(&mut now, &app);
        e.apply_to(&mut now, &app);
        assert!(e.check_now(&now, &list, &reply(Status::Ok, &[b"x", b"y", b"z", b"z"])));
        assert!(!e.check_now(&now, &list, &reply(Status::Ok, &[b"x", b"y", b"z"])));
        let del = Op::Delete { key: "a".into() };
        assert!(e.check_now(&now, &del, &reply(Status::Ok, &[])));
        e.apply_to(&mut now, &del);
        assert!(e.check_now(&now, &get, &reply(Status::NotFound, &[])));
        assert!(!e.check_now(&now, &del, &reply(Status::Ok, &[])));
    }

    #[test]
    fn request_indexes_interleave_threads_and_cycle() {
        let id = |t, s| request_id(t, s);
        assert_eq!(request_index(id(0, 0), 2, 10), 0);
        assert_eq!(request_index(id(1, 0), 2, 10), 1);
        assert_eq!(request_index(id(0, 1), 2, 10), 2);
        assert_eq!(request_index(id(1, 5), 2, 10), 1);
    }
}
