//! The echo server: a [`Handler`] of the shared server skeleton (`app-server`) that echoes
//! each message the way its mode says. It runs over any [`Datapath`]; bad input is counted and
//! dropped, never fatal.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use app_server::{AppCounters, Handler, Unanswered};
use cornflakes::{Arena, Datapath, PinnedMemory, RcBuf, RxMsg, SendError};
use datapath_socket::SocketConfig;
use percore::CoresConfig;

use crate::cf::Service;
use crate::libs::LibCodec;
use crate::manual;
use crate::mode::{Format, Library, Mode};
use crate::schema::EchoServer as Dispatch;
use crate::shape::Kind;
use cornflakes_rpc::{Dispatcher, SendPath};

pub use app_server::WORK_SAMPLE_EVERY;

/// What the server does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// How each message is echoed.
    pub mode: Mode,
    /// The hybrid threshold of the `cornflakes` and `cornflakes-no-ssend` modes.
    pub threshold: usize,
}

/// The echo server's own counters: none; its replies are reported as `echoed=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Echoed;

impl AppCounters for Echoed {
    const REPLIED: &'static str = "echoed";
    fn add(&mut self, _: &Echoed) {}
    fn write(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

/// What the echo server has seen ([`app_server::ServerStats`]; `replied` is the echoes).
pub type ServerStats = app_server::ServerStats<Echoed>;

/// An echo server on one datapath queue (one per core, as in the paper).
pub type EchoServer<D> = app_server::Server<D, Echo>;

/// Echo server cores over the socket datapath ([`spawn`], [`spawn_cores`]).
pub type ServerHandle = app_server::ServerHandle<Echoed>;

/// An echo server of `cfg` on `dp`.
pub fn new<D: Datapath>(dp: D, cfg: ServerConfig) -> Result<EchoServer<D>, String> {
    let echo = Echo::new(dp.memory(), cfg)?;
    Ok(EchoServer::new(dp, echo))
}

/// Binds `sock.bind` and starts serving on one new, unpinned thread (blocking briefly when
/// idle, or yielding when `spin`). Returns once the socket is bound.
pub fn spawn(
    cfg: ServerConfig,
    sock: SocketConfig,
    report: Option<Duration>,
    spin: bool,
) -> Result<ServerHandle, String> {
    let name = format!("echo-server-{}", cfg.mode);
    ServerHandle::spawn_one(&name, sock, report, spin, move |mem, _| Echo::new(mem, cfg))
}

/// Starts `cores.cores` share-nothing server cores, core *i* on `sock.bind`'s port plus *i*.
/// Returns once every core's socket is bound.
pub fn spawn_cores(
    cfg: ServerConfig,
    sock: SocketConfig,
    cores: &CoresConfig,
    report: Option<Duration>,
    spin: bool,
) -> Result<ServerHandle, String> {
    ServerHandle::spawn(sock, cores, report, spin, move |mem, _| Echo::new(mem, cfg))
}

/// [`spawn_cores`] over kernel TCP (`--datapath tcp`) with `tcp`'s zero-copy sends: core *i*
/// listens on `sock.bind`'s port plus *i*.
pub fn spawn_cores_tcp(
    cfg: ServerConfig,
    sock: SocketConfig,
    tcp: &app_server::TcpSpec,
    cores: &CoresConfig,
    report: Option<Duration>,
    spin: bool,
) -> Result<ServerHandle, String> {
    ServerHandle::spawn_tcp(sock, tcp, cores, report, spin, move |mem, _| {
        Echo::new(mem, cfg)
    })
}

fn malformed(why: &str) -> Unanswered {
    Unanswered::Malformed(why.to_owned())
}

/// How the echo server answers: its mode and that mode's state (in the Cornflakes modes, the
/// generated dispatcher of service `echo.Echo` and its arena and send path).
pub struct Echo {
    mode: Mode,
    rt: Dispatcher,
    codec: Option<LibCodec>,
    fields: Vec<Range<usize>>,
    scratch: Vec<u8>,
    sga: Vec<RcBuf>,
}

impl Echo {
    /// The echo handler of `cfg`, its arena on `mem` (the datapath's memory).
    pub fn new(mem: &PinnedMemory, cfg: ServerConfig) -> Result<Self, String> {
        let codec = match cfg.mode.format() {
            Format::Library(lib) => Some(LibCodec::new(lib)),
            _ => None,
        };
        let arena = Arena::with_memory(mem).with_threshold(cfg.mode.threshold(cfg.threshold));
        let path = match cfg.mode.format() {
            Format::Cornflakes(c) => c.send_path(),
            _ => SendPath::SerializeAndSend,
        };
        Ok(Echo {
            mode: cfg.mode,
            rt: Dispatcher::with_arena(arena, path),
            codec,
            fields: Vec::new(),
            scratch: Vec::new(),
            sga: Vec::new(),
        })
    }
}

impl Handler for Echo {
    type Counters = Echoed;

    fn label(&self) -> String {
        self.mode.to_string()
    }

    fn counters(&self) -> Echoed {
        Echoed
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        if self.mode == Mode::Raw {
            return Ok(dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data))?);
        }
        let kind =
            || Kind::from_msg_type(m.msg.ty).ok_or_else(|| malformed("unknown message type"));
        match self.mode.format() {
            // A type no method has gets the service's error reply.
            Format::Cornflakes(_) => Dispatch::dispatch_to(&mut Service, &mut self.rt, dp, m),
            Format::Manual => {
                let kind = kind()?;
                manual::parse(&m.data, kind, &mut self.fields)
                    .map_err(|_| malformed("bad hand-written message"))?;
                match self.mode {
                    Mode::ZeroCopy => self.zero_copy(dp, m),
                    Mode::OneCopy => self.one_copy(dp, m),
                    _ => self.two_copy(dp, m),
                }
            }
            Format::Library(Library::Capnp) => {
                let kind = kind()?;
                // Cap'n Proto's own network path (paper §6.1.3): the reply is built in pinned
                // segments, sent as the segment table plus one entry per segment.
                // The list is reused: per reply only the Builder's segment table is allocated.
                let built = baselines::capnp_echo_sga_into(
                    crate::libs::shape(kind),
                    &m.data,
                    dp.memory(),
                    &mut self.sga,
                );
                let res = match built {
                    Ok(Ok(())) => dp.send_sga(m.conn, m.msg, &self.sga).map_err(Into::into),
                    Ok(Err(e)) => Err(SendError::from(e).into()),
                    Err(_) => Err(malformed("bad Cap'n Proto message")),
                };
                // Drop the list's references so the buffers go back when sent.
                self.sga.clear();
                res
            }
            Format::Library(_) => {
                let kind = kind()?;
                let Some(codec) = self.codec.as_mut() else {
                    return Err(malformed("no codec"));
                };
                let mem = dp.memory();
                let cap = (m.data.len() * 2 + 1024).min(mem.max_item_size());
                let mut out = mem.alloc(cap).map_err(SendError::from)?;
                let n = codec
                    .echo(kind, &m.data, &mut out)
                    .map_err(|_| malformed("bad library message"))?;
                out.set_len(n);
                Ok(dp.send_sga(m.conn, m.msg, &[out.freeze()])?)
            }
        }
    }
}

impl Echo {
    /// A new header, then each field as a reference into the received buffer. Fields beyond
    /// what one send takes are copied into one trailing buffer.
    fn zero_copy<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        let max_entries = dp.max_segments().saturating_sub(1);
        if max_entries < 3 {
            return self.one_copy(dp, m);
        }
        let n = self.fields.len();
        let mut hdr = dp
            .memory()
            .alloc(manual::header_len(n))
            .map_err(SendError::from)?;
        manual::write_header(&mut hdr, n, self.fields.iter().map(|r| r.len()));
        self.sga.clear();
        self.sga.push(hdr.freeze());
        let by_ref = if n < max_entries { n } else { max_entries - 2 };
        for r in &self.fields[..by_ref] {
            self.sga.push(m.data.slice(r.clone()));
        }
        if by_ref < n {
            let rest = &self.fields[by_ref..];
            let len = rest.iter().map(|r| r.len()).sum();
            let mut tail = dp.memory().alloc(len).map_err(SendError::from)?;
            let mut at = 0;
            for r in rest {
                tail[at..at + r.len()].copy_from_slice(&m.data[r.clone()]);
                at += r.len();
            }
            self.sga.push(tail.freeze());
        }
        let res = dp.send_sga(m.conn, m.msg, &self.sga);
        self.sga.clear();
        Ok(res?)
    }

    /// Header and fields copied into one transmit buffer.
    fn one_copy<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        let h = manual::header_len(self.fields.len());
        let total = h + self.fields.iter().map(|r| r.len()).sum::<usize>();
        let mut buf = dp.memory().alloc(total).map_err(SendError::from)?;
        manual::write_header(
            &mut buf,
            self.fields.len(),
            self.fields.iter().map(|r| r.len()),
        );
        let mut at = h;
        for r in &self.fields {
            buf[at..at + r.len()].copy_from_slice(&m.data[r.clone()]);
            at += r.len();
        }
        Ok(dp.send_sga(m.conn, m.msg, &[buf.freeze()])?)
    }

    /// Header and fields copied into an intermediate buffer, which the datapath copies into
    /// its transmit buffer.
    fn two_copy<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        let h = manual::header_len(self.fields.len());
        self.scratch.clear();
        self.scratch.resize(h, 0);
        manual::write_header(
            &mut self.scratch,
            self.fields.len(),
            self.fields.iter().map(|r| r.len()),
        );
        for r in &self.fields {
            self.scratch.extend_from_slice(&m.data[r.clone()]);
        }
        Ok(dp.send_copy(m.conn, m.msg, &self.scratch)?)
    }
}

// The idle policies are the server skeleton's, shared by every server app (echo, kv).
pub use app_server::idle::{socket_idle, wait_readable, IDLE_SPINS, IDLE_WAIT, SOCKET_IDLE_SPINS};
