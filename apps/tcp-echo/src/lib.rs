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
use std::time::{Duration, Instant};

use app_server::{Handler, TcpSpec, Unanswered};
use baselines::{Codec, EchoMsg, Shape};
use cornflakes::datapath::{Completions, Receive, Transmit};
use cornflakes::{Arena, CFBytes, CFPtr, ConnId, Datapath, Msg, PinnedMemory, RxMsg, SendError};
use datapath_socket::SocketConfig;
use datapath_tcp::TcpDatapath;
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
/// machine with a core each. Its zero-copy sends are `tcp`'s. Returns once it listens
/// ([`ServerHandle::addr`]).
pub fn spawn(listen: SocketAddrV4, tcp: &TcpSpec, spin: bool) -> Result<ServerHandle, String> {
    let mut cores = CoresConfig::new("tcp-echo-server", 1);
    cores.pin = false;
    ServerHandle::spawn_tcp(
        SocketConfig::new(listen),
        tcp,
        &cores,
        None,
        spin,
        |mem, _| Ok(EchoAll::new(mem)),
    )
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
    /// Opens `conns` connections to `server` for `mode` with `size`-byte values, its sends
    /// zero-copy as `tcp` says.
    pub fn connect(
        server: SocketAddrV4,
        conns: usize,
        mode: Mode,
        size: usize,
        tcp: &TcpSpec,
    ) -> io::Result<Client> {
        let mut dp = TcpDatapath::new(tcp.config(None)).map_err(io::Error::other)?;
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

/// Requests [`capacity`] keeps in flight.
pub const PROBE_WINDOW: u64 = 16;

/// The echo rate `client` gets from its server with [`PROBE_WINDOW`] requests kept in flight
/// for `time` (every reply checked): about the most a single open-loop client thread and the
/// server sustain on this machine, as it is loaded now — each request is sent and flushed on
/// its own, as the load generator does, and the window lets client and server work at once.
/// An error when a reply is wrong or none comes for [`TIMEOUT`].
pub fn capacity(client: &mut Client, time: Duration) -> io::Result<f64> {
    let start = Instant::now();
    let (mut sent, mut answered, mut wrong) = (0u64, 0u64, 0u64);
    let mut last = start;
    while start.elapsed() < time {
        while sent - answered < PROBE_WINDOW {
            client.send_request(sent)?;
            sent += 1;
        }
        let n = client.poll_responses(&mut |r| {
            answered += 1;
            wrong += u64::from(!verdict_ok(0, r.payload));
        })?;
        if n > 0 {
            last = Instant::now();
        } else if last.elapsed() > TIMEOUT {
            return Err(io::Error::other(format!(
                "no reply for {TIMEOUT:?} ({answered} of {sent} answered)"
            )));
        }
    }
    if wrong > 0 {
        return Err(io::Error::other(format!("{wrong} wrong replies")));
    }
    Ok(answered as f64 / start.elapsed().as_secs_f64())
}

/// What to say before a fixed-load run at `rate` requests/s when the machine sustains
/// `capacity` (the least of the modes', from [`capacity`], with the mode that had it):
/// nothing when the rate is below [`LOAD_MARGIN`] of it; else that the load is near or beyond
/// what can be generated here, and the flag to lower it.
pub fn load_warning(rate: f64, capacity: f64, slowest: Mode) -> Option<String> {
    if rate < LOAD_MARGIN * capacity {
        return None;
    }
    let verdict = if rate >= capacity {
        "cannot be generated on this machine"
    } else {
        "is close to what this machine sustains"
    };
    // Half the margin, rounded down to two significant digits.
    let x = capacity * LOAD_MARGIN / 2.0;
    let step = 10f64.powf((x.log10().floor() - 1.0).max(0.0));
    let suggest = (x / step).floor().max(1.0) * step;
    Some(format!(
        "warning: the offered {rate:.0} req/s {verdict} (about {capacity:.0} req/s of {slowest} \
         echoes with {PROBE_WINDOW} in flight, measured just now): latencies would measure a \
         growing backlog, not the echo, and requests would be lost. Lower the load with \
         --rate N (e.g. --rate {suggest:.0})"
    ))
}

/// The share of the measured capacity above which [`load_warning`] warns.
pub const LOAD_MARGIN: f64 = 0.8;

#[cfg(test)]
mod mode_tests {
    use super::*;

    #[test]
    fn a_load_near_or_beyond_the_capacity_is_warned_about_with_the_flag_to_lower_it() {
        assert_eq!(load_warning(20_000.0, 60_000.0, Mode::Raw), None);
        assert_eq!(load_warning(47_999.0, 60_000.0, Mode::Raw), None);
        let near = load_warning(50_000.0, 60_000.0, Mode::CAPNP).unwrap();
        assert!(
            near.contains("is close to what this machine sustains"),
            "{near}"
        );
        assert!(near.contains("about 60000 req/s of capnp"), "{near}");
        let over = load_warning(175_000.0, 60_000.0, Mode::Raw).unwrap();
        assert!(
            over.contains("cannot be generated on this machine"),
            "{over}"
        );
        assert!(over.ends_with("--rate N (e.g. --rate 24000)"), "{over}");
        let tiny = load_warning(90.0, 100.0, Mode::Raw).unwrap();
        assert!(tiny.ends_with("(e.g. --rate 40)"), "{tiny}");
        let none = load_warning(10.0, 0.5, Mode::Raw).unwrap();
        assert!(
            none.ends_with("(e.g. --rate 1)"),
            "never suggests 0: {none}"
        );
    }

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
