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
use kv_workloads::expect::{Answer, Outcome};
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

    /// A client over connections `conns` already made on `dp` (core *i*'s are `conns[i]`,
    /// `conns[i + cores]`, …): what a client core that keeps its datapath across runs builds
    /// for each run, with a fresh identity.
    pub fn with_conns(
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

    /// The datapath, given back (a client core keeps it for the next run).
    pub fn into_datapath(self) -> D {
        match self.way {
            Way::Service { client, .. } => client.into_inner().into_datapath(),
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
            Way::Hand { dp, rx, ids, .. } => {
                bench_client::flush(dp)?;
                rx.clear();
                dp.recv_burst(rx)?;
                // This client's incarnation (its runs stay below 2^32 requests a thread): a
                // reply under another is a previous client's on the same datapath, late.
                let mine = ids.nth(0, 0).incarnation;
                for m in rx.iter().filter(|m| m.msg.incarnation == mine) {
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

pub use kv_workloads::expect::{Current, Expected, InitialValue};

/// The shared checker's outcome of a status: the three it tells apart, every other failure.
fn outcome(s: Status) -> Outcome {
    match s {
        Status::Ok => Outcome::Ok,
        Status::NotFound => Outcome::NotFound,
        Status::BadIndex => Outcome::BadIndex,
        _ => Outcome::Failed,
    }
}

impl Answer for Reply {
    fn outcome(&self) -> Outcome {
        outcome(self.status)
    }
    fn values(&self) -> &[Vec<u8>] {
        &self.vals
    }
    fn key_outcomes(&self) -> usize {
        self.statuses.len()
    }
    fn key_outcome(&self, i: usize) -> Outcome {
        outcome(self.statuses[i])
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

    /// The store's replies reach the shared checker with their statuses: the three it tells
    /// apart, and every other failure wrong (the checker's own cases are in kv-workloads).
    #[test]
    fn the_stores_replies_are_checked_by_their_status() {
        let e = Expected::new(
            Box::new(|k: &str| (k == "a").then(|| vec![b"a0".to_vec()])),
            &[],
        );
        let reply = |status, vals: &[&[u8]]| Reply {
            status,
            vals: vals.iter().map(|v| v.to_vec()).collect(),
            statuses: Vec::new(),
        };
        let put = Op::Put {
            key: "a".into(),
            val: b"a1".to_vec(),
        };
        assert!(e.check(&put, &reply(Status::Ok, &[])));
        assert!(!e.check(&put, &reply(Status::StoreFull, &[])));
        let getm = Op::GetM {
            keys: vec!["a".into(), "zz".into()],
        };
        let mut r = reply(Status::NotFound, &[b"a0", b""]);
        r.statuses = vec![Status::Ok, Status::NotFound];
        assert!(e.check(&getm, &r));
        r.status = Status::BadRequest;
        assert!(
            !e.check(&getm, &r),
            "overall status must be the first failure"
        );
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
