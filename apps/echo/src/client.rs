//! The client side: building each mode's requests, checking responses, and the load
//! generator's [`ClientTransport`] over a datapath.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddrV4;
use std::sync::Mutex;

use std::time::Duration;

use cornflakes::{Arena, ConnId, Datapath, Msg, RxMsg, SendError};
use cornflakes_rpc::{CallError, Client, ClientIds, RetryPolicy};
use loadgen::{split_request_id, ClientTransport, Response};

use crate::cf;
use crate::libs::LibCodec;
use crate::manual;
use crate::mode::{Format, Mode};
use crate::shape::{fill_values, ShapeSpec};

/// Builds and sends the requests of one mode and shape. The values of request `id` are
/// [`crate::shape::fill_values`]`(id)`, so a response can be checked from its id alone.
pub struct RequestBuilder {
    format: Format,
    spec: ShapeSpec,
    vals: Vec<u8>,
    buf: Vec<u8>,
    arena: Arena,
    codec: Option<LibCodec>,
    wire_base: u32,
}

impl RequestBuilder {
    /// A builder for `mode`'s wire format.
    pub fn new(mode: Mode, spec: ShapeSpec) -> Result<Self, String> {
        let codec = match mode.format() {
            Format::Library(lib) => Some(LibCodec::new(lib)),
            _ => None,
        };
        Ok(RequestBuilder {
            format: mode.format(),
            spec,
            vals: Vec::new(),
            buf: Vec::new(),
            arena: Arena::new(),
            codec,
            wire_base: 0,
        })
    }

    /// The same builder with message ids counted from `base` (request `seq` travels as `base +
    /// seq`, wrapping): a client that keeps its datapath across runs starts each run's ids at
    /// a random base, so a late reply of an earlier run is never taken for this run's.
    pub fn with_wire_base(mut self, base: u32) -> Self {
        self.wire_base = base;
        self
    }

    /// The message header request `id` travels with: the low 32 bits of its sequence number
    /// plus the builder's base (the transport takes both back and adds the thread) and the
    /// shape's message type.
    pub fn msg(&self, id: u64) -> Msg {
        let (_, seq) = split_request_id(id);
        Msg::new(
            (seq as u32).wrapping_add(self.wire_base),
            self.spec.kind.msg_type(),
        )
    }

    /// Queues request `id` on `conn` (the caller flushes).
    pub fn send<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        id: u64,
    ) -> Result<(), SendError> {
        let msg = self.msg(id);
        match self.format {
            Format::Manual => {
                manual::encode_request(id, &self.spec, &mut self.vals, &mut self.buf);
                dp.send_copy(conn, msg, &self.buf)
            }
            Format::Cornflakes(_) => {
                fill_values(id, &self.spec, &mut self.vals);
                self.arena.reset();
                cf::send_request(dp, conn, msg, id, &self.spec, &self.vals, &self.arena)
            }
            Format::Library(_) => {
                fill_values(id, &self.spec, &mut self.vals);
                let codec = self
                    .codec
                    .as_mut()
                    .ok_or_else(|| SendError::Io(io::Error::other("no codec")))?;
                codec
                    .encode_request(id, &self.spec, &self.vals, &mut self.buf)
                    .map_err(|e| SendError::Io(io::Error::other(e)))?;
                dp.send_copy(conn, msg, &self.buf)
            }
        }
    }
}

thread_local! {
    static CHECK_ARENA: RefCell<Arena> = RefCell::new(Arena::new());
}

/// Decides whether a response is the correct echo of request `id`: deserializes it in the
/// mode's format and compares every value with what was sent. Shared by client threads.
pub struct Verifier {
    format: Format,
    spec: ShapeSpec,
    codec: Option<Mutex<LibCodec>>,
}

impl Verifier {
    /// A verifier for `mode`'s responses of shape `spec`.
    pub fn new(mode: Mode, spec: ShapeSpec) -> Result<Self, String> {
        let codec = match mode.format() {
            Format::Library(lib) => Some(Mutex::new(LibCodec::new(lib))),
            _ => None,
        };
        Ok(Verifier {
            format: mode.format(),
            spec,
            codec,
        })
    }

    /// Whether `payload` is exactly request `id` echoed.
    pub fn check(&self, id: u64, payload: &[u8]) -> bool {
        match self.format {
            Format::Manual => manual::check_response(id, &self.spec, payload),
            Format::Cornflakes(_) => CHECK_ARENA.with(|a| {
                let mut arena = a.borrow_mut();
                arena.reset();
                cf::check_response(id, &self.spec, payload, &arena)
            }),
            Format::Library(_) => match &self.codec {
                Some(c) => match c.lock() {
                    Ok(mut codec) => codec.check(id, &self.spec, payload),
                    Err(_) => false,
                },
                None => false,
            },
        }
    }
}

/// One load-generator thread's connection to the server over datapath `D`: to one server
/// core, or spread round-robin over N cores (request sequence number mod N picks the core's
/// port; `docs/cores.md`). The Cornflakes modes go through the generated client of
/// `echo.Echo` (its open-loop `send_<method>` and `poll`); the other modes build requests and
/// read replies by hand.
pub struct EchoClient<D: Datapath> {
    conns: Vec<ConnId>,
    thread: usize,
    way: Way<D>,
}

/// Open-loop requests a load-generator thread keeps in flight at most (Cornflakes modes): the
/// generated client's table of outstanding ids.
pub const MAX_OUTSTANDING: usize = 1 << 14;

enum Way<D: Datapath> {
    /// The generated client; `ids[id mod len]` is the load generator's id of its request `id`.
    Service {
        client: crate::schema::EchoClient<D>,
        spec: ShapeSpec,
        vals: Vec<u8>,
        arena: Arena,
        ids: Vec<u64>,
    },
    /// Requests built by [`RequestBuilder`], replies read off the datapath.
    Hand {
        dp: D,
        req: RequestBuilder,
        rx: Vec<RxMsg>,
        /// The requests' wire ids start here ([`RequestBuilder::with_wire_base`]).
        base: u32,
    },
}

impl<D: Datapath> EchoClient<D> {
    /// A client of `server` sending `mode`'s requests of shape `spec`, for load-generator
    /// thread `thread`.
    pub fn new(
        dp: D,
        server: SocketAddrV4,
        thread: usize,
        mode: Mode,
        spec: ShapeSpec,
    ) -> io::Result<Self> {
        Self::spread(dp, &[server], thread, mode, spec)
    }

    /// A client of the server cores at `cores`, request `seq` going to core `seq mod N`.
    pub fn spread(
        mut dp: D,
        cores: &[SocketAddrV4],
        thread: usize,
        mode: Mode,
        spec: ShapeSpec,
    ) -> io::Result<Self> {
        let conns = cornflakes::datapath::Connect::connect_all(&mut dp, cores)?;
        Self::with_conns(dp, conns, thread, mode, spec)
    }

    /// A client over connections `conns` already made on `dp` (request `seq` on `conns[seq mod
    /// N]`): what a client core that keeps its datapath across runs builds for each run.
    pub fn with_conns(
        dp: D,
        conns: Vec<ConnId>,
        thread: usize,
        mode: Mode,
        spec: ShapeSpec,
    ) -> io::Result<Self> {
        let way = match mode.format() {
            Format::Cornflakes(_) => {
                // The load generator times requests out itself: the client's timeout only
                // frees the table of requests that will never be answered.
                let policy = RetryPolicy {
                    timeout: Duration::from_secs(2),
                    tries: 1,
                };
                let client = Client::with_capacity(dp, conns[0], policy, MAX_OUTSTANDING)
                    // Its requests never outlive the run: an identity of its own.
                    .with_ids(ClientIds::fresh());
                // One entry per slot of the table (a power of two): an id picks it by its low bits.
                let ids = vec![0; client.capacity()];
                Way::Service {
                    client: crate::schema::EchoClient::from_client(client),
                    spec,
                    vals: Vec::new(),
                    arena: Arena::new(),
                    ids,
                }
            }
            _ => {
                // Ids from a random base: a late reply to another client's request (an
                // earlier run on the same datapath) matches no request of this one.
                let base = {
                    use std::hash::{BuildHasher, Hasher};
                    std::collections::hash_map::RandomState::new()
                        .build_hasher()
                        .finish() as u32
                };
                Way::Hand {
                    dp,
                    req: RequestBuilder::new(mode, spec)
                        .map_err(io::Error::other)?
                        .with_wire_base(base),
                    rx: Vec::with_capacity(64),
                    base,
                }
            }
        };
        Ok(EchoClient { conns, thread, way })
    }

    /// The datapath, given back (a client core keeps it for the next run).
    pub fn into_datapath(self) -> D {
        match self.way {
            Way::Service { client, .. } => client.into_inner().into_datapath(),
            Way::Hand { dp, .. } => dp,
        }
    }

    /// The datapath.
    pub fn datapath(&mut self) -> &mut D {
        match &mut self.way {
            Way::Service { client, .. } => client.inner_mut().datapath_mut(),
            Way::Hand { dp, .. } => dp,
        }
    }
}

impl EchoClient<datapath_tcp::TcpDatapath> {
    /// A client of the server cores at `cores` over kernel TCP with `per_core` connections to
    /// each: request `seq` goes to core `seq mod N`, and over that core's connections in turn.
    pub fn over_tcp(
        mut dp: datapath_tcp::TcpDatapath,
        cores: &[SocketAddrV4],
        per_core: usize,
        thread: usize,
        mode: Mode,
        spec: ShapeSpec,
    ) -> io::Result<Self> {
        // Connection k serves core k mod N, so `seq mod len` keeps the round-robin over cores.
        let conns = bench_client::tcp_conns(&mut dp, cores, per_core)?;
        Self::with_conns(dp, conns, thread, mode, spec)
    }
}

impl<D: Datapath> ClientTransport for EchoClient<D> {
    /// Queues the request; it leaves at the next [`poll_responses`](Self::poll_responses),
    /// which the load generator calls right after sending everything that is due, so
    /// requests due together share one `sendmmsg`.
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        let (_, seq) = split_request_id(id);
        let conn = self.conns[(seq % self.conns.len() as u64) as usize];
        match &mut self.way {
            Way::Service {
                client,
                spec,
                vals,
                arena,
                ids,
            } => {
                fill_values(id, spec, vals);
                arena.reset();
                let req = crate::cf::Request::build(id, spec, vals, arena);
                client.inner_mut().use_conn(conn);
                let mut sent = req.send_with(client);
                if let Err(CallError::Send(SendError::Full)) = sent {
                    bench_client::flush(client.inner_mut().datapath_mut())?;
                    sent = req.send_with(client);
                }
                let wire = sent.map_err(|e| io::Error::other(e.to_string()))?;
                let slot = wire as usize & (ids.len() - 1);
                ids[slot] = id;
                Ok(())
            }
            Way::Hand { dp, req, .. } => {
                bench_client::send_or_flush(dp, |dp| req.send(dp, conn, id))
            }
        }
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        match &mut self.way {
            Way::Service { client, ids, .. } => {
                let mut n = 0;
                client.poll(|wire, reply| {
                    let id = ids[wire as usize & (ids.len() - 1)];
                    match reply {
                        Ok(r) => {
                            n += 1;
                            on_response(Response {
                                id: Some(id),
                                payload: r.bytes(),
                            });
                        }
                        // The load generator counts a request with no reply as lost.
                        Err(CallError::TimedOut) => {}
                        // A refused or unreadable reply is a reply, and a wrong one.
                        Err(_) => {
                            n += 1;
                            on_response(Response {
                                id: Some(id),
                                payload: &[],
                            });
                        }
                    }
                });
                Ok(n)
            }
            Way::Hand { dp, rx, base, .. } => {
                bench_client::poll_replies_from(dp, rx, self.thread, *base, on_response)
            }
        }
    }
}
