//! An echo over TCP (`datapath-tcp`) in the five modes of the paper's Figure 9, and the
//! Figure as a command (`tcp-echo fig9`, see `README.md`).
//!
//! One server serves every mode: the framing header's message type says which. The server is
//! the [`EchoAll`] handler on the apps' one server skeleton (`app-server`, its kernel-TCP arm:
//! [`spawn`]); this crate keeps only the handler, the client, the fixed-load run and the plot.
//! The client is a [`loadgen::ClientTransport`] over several TCP connections, driven
//! open-loop by [`loadgen::run`] at a fixed Poisson load.
//!
//! - `raw`: the server sends the received bytes back as they are (a reference to the receive
//!   buffer, after a frame header of its own): no serialization at all.
//! - `cornflakes`: the server decodes a `Single` (its value a reference into the receive
//!   buffer), builds a new `Single` with that value and sends it with serialize-and-send (a
//!   1024-byte value is above the 512-byte threshold: a gather entry of its own).
//! - `flatbuffers`, `protobuf`, `capnp`: the server deserializes and reserializes with the
//!   library (`baselines`) into one pinned buffer, sent after a separate frame-header buffer
//!   (the header in its own gather entry, as in the paper's baselines).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod plot;

use std::io;
use std::net::SocketAddrV4;
use std::time::Duration;

use app_server::{Handler, Unanswered};
use baselines::{Codec, EchoMsg, Shape};
use cornflakes::datapath::{Completions, Receive, Transmit};
use cornflakes::{Arena, CFBytes, CFPtr, ConnId, Datapath, Msg, PinnedMemory, RxMsg, SendError};
use datapath_socket::SocketConfig;
use datapath_tcp::{TcpConfig, TcpDatapath};
use loadgen::{ClientTransport, Response};
use percore::CoresConfig;
pub use serializations::{Library, Serialization};

#[allow(missing_docs)]
pub mod schema {
    cornflakes::include_schema!("echo");
}

use schema::Single;

/// The serializations compared: no serialization, or one every app shares
/// ([`serializations`]: Cornflakes, or a copying library).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// No serialization: the bytes echoed back.
    Raw,
    /// A shared serialization. The Figure's are [`Mode::ALL`]'s; any Cornflakes
    /// configuration is sent and served as hybrid serialize-and-send (its message type).
    Shared(Serialization),
}

impl Mode {
    /// Cornflakes serialize-and-send.
    pub const CORNFLAKES: Mode = Mode::Shared(Serialization::CORNFLAKES);
    /// FlatBuffers.
    pub const FLATBUFFERS: Mode = Mode::Shared(Serialization::FLATBUFFERS);
    /// protobuf (prost).
    pub const PROTOBUF: Mode = Mode::Shared(Serialization::PROTOBUF);
    /// Cap'n Proto.
    pub const CAPNP: Mode = Mode::Shared(Serialization::CAPNP);

    /// Every mode, in the Figure's order.
    pub const ALL: [Mode; 5] = [
        Mode::Raw,
        Mode::CORNFLAKES,
        Mode::FLATBUFFERS,
        Mode::PROTOBUF,
        Mode::CAPNP,
    ];

    /// The message type that selects this mode on the server (its place in [`Mode::ALL`]).
    pub fn msg_type(self) -> u16 {
        match self {
            Mode::Raw => 0,
            Mode::Shared(Serialization::Cornflakes(_)) => 1,
            Mode::Shared(Serialization::Library(Library::Flatbuffers)) => 2,
            Mode::Shared(Serialization::Library(Library::Protobuf)) => 3,
            Mode::Shared(Serialization::Library(Library::Capnp)) => 4,
        }
    }

    /// The mode of a message type.
    pub fn from_msg_type(ty: u16) -> Option<Mode> {
        Mode::ALL.get(ty as usize).copied()
    }

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::Shared(s) => s.name(),
        }
    }

    fn library(self) -> Option<Library> {
        match self {
            Mode::Shared(s) => s.library(),
            Mode::Raw => None,
        }
    }
}

serializations::named!(Mode, "mode");

/// The value every request carries: `size` bytes, a function of the position.
pub fn value(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 % 251) as u8).collect()
}

/// The request bytes of `mode` for a value.
pub fn encode_request(mode: Mode, val: &[u8]) -> Result<Vec<u8>, String> {
    match mode {
        Mode::Raw => Ok(val.to_vec()),
        Mode::Shared(Serialization::Cornflakes(_)) => {
            let arena = Arena::new();
            let mut m = Single::new_in(&arena);
            m.set_val(CFBytes(CFPtr::borrowed(val)));
            Ok(cornflakes::CornflakesObj::serialize_to_vec(&m))
        }
        _ => {
            let lib = mode.library().expect("a library mode");
            let mut codec = lib.codec();
            let vals = [val];
            let msg = EchoMsg {
                id: 0,
                shape: Shape::Single,
                vals: &vals,
            };
            let mut out = vec![0u8; val.len() * 2 + 1024];
            let n = codec.encode(&msg, &mut out).map_err(|e| e.to_string())?;
            out.truncate(n);
            Ok(out)
        }
    }
}

/// What the echo server has seen ([`app_server::ServerStats`]: `replied` counts the echoes,
/// `malformed` the requests that did not decode or name no mode, `send_failed` the replies
/// refused).
pub type ServerStats = app_server::ServerStats;

/// Running echo server cores over kernel TCP ([`spawn`]).
pub type ServerHandle = app_server::ServerHandle<()>;

/// Starts the echo server of every mode on one unpinned thread: the [`EchoAll`] handler on
/// the shared server skeleton's kernel-TCP arm (`app_server::ServerHandle::spawn_tcp`, what
/// `--datapath tcp` runs), listening on `listen` (port 0 picks one). An idle server waits in
/// `epoll_wait` after a few empty polls; with `spin` it polls and yields instead, for a quiet
/// machine with a core each. Returns once it listens ([`ServerHandle::addr`]).
pub fn spawn(listen: SocketAddrV4, spin: bool) -> Result<ServerHandle, String> {
    let mut cores = CoresConfig::new("tcp-echo-server", 1);
    cores.pin = false;
    ServerHandle::spawn_tcp(SocketConfig::new(listen), &cores, None, spin, |mem, _| {
        Ok(EchoAll::new(mem))
    })
}

/// The echo of every mode, as a handler of the shared server skeleton: the framing header's
/// message type ([`Mode::msg_type`]) says how to answer each request.
pub struct EchoAll {
    arena: Arena,
    codecs: Vec<(Mode, Box<dyn Codec + Send>)>,
}

impl EchoAll {
    /// The handler, its Cornflakes arena on `mem` (the datapath's pinned memory).
    pub fn new(mem: &PinnedMemory) -> EchoAll {
        let codecs = Mode::ALL
            .into_iter()
            .filter_map(|m| m.library().map(|l| (m, l.codec())))
            .collect();
        EchoAll {
            arena: Arena::with_memory(mem),
            codecs,
        }
    }
}

fn malformed(why: &str) -> Unanswered {
    Unanswered::Malformed(why.to_owned())
}

impl Handler for EchoAll {
    type Counters = ();

    fn label(&self) -> String {
        "tcp-echo".to_owned()
    }

    fn counters(&self) {}

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        let mode = Mode::from_msg_type(m.msg.ty).ok_or_else(|| malformed("unknown mode"))?;
        match mode {
            Mode::Raw => Ok(dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data))?),
            Mode::Shared(Serialization::Cornflakes(_)) => self.arena.scope(|a| {
                let req = Single::deserialize_rcbuf(&m.data, a)
                    .map_err(|e| Unanswered::Malformed(e.to_string()))?;
                let mut resp = Single::new_in(a);
                if req.has_val() {
                    resp.set_val(req.get_val().clone());
                }
                Ok(dp.send_object(m.conn, m.msg, &resp)?)
            }),
            _ => {
                let Some((_, codec)) = self.codecs.iter_mut().find(|(c, _)| *c == mode) else {
                    return Err(malformed("no codec"));
                };
                let mem = dp.memory();
                let cap = (m.data.len() * 2 + 1024).min(mem.max_item_size());
                let mut out = mem.alloc(cap).map_err(SendError::from)?;
                let n = codec
                    .echo(Shape::Single, &m.data, &mut out)
                    .map_err(|_| malformed("bad library message"))?;
                out.set_len(n);
                Ok(dp.send_sga(m.conn, m.msg, &[out.freeze()])?)
            }
        }
    }
}

/// The client side of one mode: requests round-robin over `conns` TCP connections; each
/// response is decoded (by the mode's library) and its value compared with the request's.
/// The verdict is the payload handed to the load generator's checker ([`verdict_ok`]).
pub struct Client {
    dp: TcpDatapath,
    conns: Vec<ConnId>,
    next: usize,
    mode: Mode,
    request: Vec<u8>,
    value: Vec<u8>,
    codec: Option<Box<dyn Codec + Send>>,
    rx: Vec<RxMsg>,
}

/// The payload the client reports for a correct response.
const OK: &[u8] = b"ok";
/// The payload the client reports for a wrong one.
const WRONG: &[u8] = b"wrong";

/// The checker of [`Client`]'s verdicts.
pub fn verdict_ok(_id: u64, payload: &[u8]) -> bool {
    payload == OK
}

impl Client {
    /// Opens `conns` connections to `server` for `mode` with `size`-byte values.
    pub fn connect(
        server: SocketAddrV4,
        conns: usize,
        mode: Mode,
        size: usize,
    ) -> io::Result<Client> {
        let mut dp = TcpDatapath::new(TcpConfig::new(None)).map_err(io::Error::other)?;
        let conns = (0..conns.max(1))
            .map(|_| dp.open(server))
            .collect::<io::Result<Vec<_>>>()?;
        let value = value(size);
        let request = encode_request(mode, &value).map_err(io::Error::other)?;
        Ok(Client {
            dp,
            conns,
            next: 0,
            mode,
            request,
            value,
            codec: mode.library().map(|l| l.codec()),
            rx: Vec::new(),
        })
    }

    fn correct(&mut self, payload: &[u8]) -> bool {
        match self.mode {
            Mode::Raw => payload == self.value,
            Mode::Shared(Serialization::Cornflakes(_)) => {
                let arena = Arena::new();
                Single::deserialize(payload, &arena)
                    .is_ok_and(|m| m.get_val().as_bytes() == self.value)
            }
            _ => {
                let codec = self.codec.as_mut().expect("a codec per library mode");
                let want = &self.value;
                let mut same = false;
                let r = codec.decode(Shape::Single, payload, &mut |v| same = v == want);
                r.is_ok() && same
            }
        }
    }
}

impl ClientTransport for Client {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        // One client thread: its ids fit the framing header's 32-bit message id.
        let id = u32::try_from(id).map_err(|_| io::Error::other("request id above 2^32"))?;
        let conn = self.conns[self.next % self.conns.len()];
        self.next += 1;
        self.dp
            .send_copy(conn, Msg::new(id, self.mode.msg_type()), &self.request)
            .map_err(io::Error::other)?;
        self.dp.flush().map_err(io::Error::other)
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        let mut rx = std::mem::take(&mut self.rx);
        self.dp.recv_burst(&mut rx)?;
        self.dp.poll_completions();
        let n = rx.len();
        for m in rx.drain(..) {
            let ok = m.msg.ty == self.mode.msg_type() && self.correct(&m.data);
            on_response(Response {
                id: Some(m.msg.id as u64),
                payload: if ok { OK } else { WRONG },
            });
        }
        self.rx = rx;
        Ok(n)
    }
}

/// Latency percentiles of one mode, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    /// 5th percentile.
    pub p5: f64,
    /// 25th.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th.
    pub p75: f64,
    /// 99th.
    pub p99: f64,
}

impl Percentiles {
    /// The percentiles of a histogram (`None` when it is empty).
    pub fn of(h: &latency::LatencyHistogram) -> Option<Percentiles> {
        Some(Percentiles {
            p5: h.percentile_us(5.0)?,
            p25: h.percentile_us(25.0)?,
            p50: h.percentile_us(50.0)?,
            p75: h.percentile_us(75.0)?,
            p99: h.percentile_us(99.0)?,
        })
    }
}

/// How long a request may go unanswered before it counts as lost.
pub const TIMEOUT: Duration = Duration::from_millis(500);

#[cfg(test)]
mod mode_tests {
    use super::*;

    #[test]
    fn modes_keep_their_names_and_message_types() {
        let names: Vec<String> = Mode::ALL.iter().map(Mode::to_string).collect();
        assert_eq!(
            names,
            ["raw", "cornflakes", "flatbuffers", "protobuf", "capnp"]
        );
        for (i, m) in Mode::ALL.into_iter().enumerate() {
            assert_eq!(m.msg_type(), i as u16);
            assert_eq!(Mode::from_msg_type(i as u16), Some(m));
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        assert_eq!(Mode::from_msg_type(5), None);
        assert!("cornflakes-sg".parse::<Mode>().is_err());
        assert!("resp"
            .parse::<Mode>()
            .unwrap_err()
            .contains("one of: raw, cornflakes"));
    }
}
