//! The echo server: receives a burst, echoes each message the way its mode says, flushes once
//! per burst. It runs over any [`Datapath`]; bad input is counted and dropped, never fatal.

use std::fmt;
use std::io;
use std::net::SocketAddrV4;
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes::datapath::DropCounters;
use cornflakes::{Arena, Datapath, RcBuf, RxMsg, SendError};
use datapath_socket::cores::{spawn_socket_cores, SocketCores, SocketServer};
use datapath_socket::{SocketConfig, SocketDatapath};
use loadgen::LatencyHistogram;
use percore::CoresConfig;

use crate::cf::{self, CfError, SendPath};
use crate::libs::LibCodec;
use crate::manual;
use crate::mode::{Format, Lib, Mode};
use crate::shape::Kind;

/// What the server does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// How each message is echoed.
    pub mode: Mode,
    /// The hybrid threshold of the `cornflakes` and `cornflakes-no-ssend` modes.
    pub threshold: usize,
}

/// The handling time ([`ServerStats::work`]) is timed for one message in this many: two clock
/// reads cost ~60 instructions, several percent of a cheap mode's whole handling, and a
/// systematic 1-in-16 sample estimates the median and tail as well at any rate the benchmarks
/// reach. The counts and the throughput cover every message.
pub const WORK_SAMPLE_EVERY: u64 = 16;

/// What the server has seen so far.
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    /// Messages the datapath delivered.
    pub received: u64,
    /// Replies queued.
    pub echoed: u64,
    /// Messages that did not parse (unknown type, bad encoding): dropped.
    pub malformed: u64,
    /// Replies that could not be sent (e.g. too large, no buffer): dropped.
    pub send_failed: u64,
    /// Errors from the datapath's receive or flush calls.
    pub io_errors: u64,
    /// Time to handle a received message (deserialize, build the reply, queue it), excluding
    /// the receive and flush calls, for one message in [`WORK_SAMPLE_EVERY`] (the first, then
    /// every 16th): a sample of the population, whose median and tail estimate its own. On a
    /// shared machine a sample can include the thread being preempted, so read the median,
    /// not the mean.
    pub work: LatencyHistogram,
    /// The datapath's own drop counters (frames it discarded before they became messages).
    pub datapath: DropCounters,
}

impl ServerStats {
    /// Adds another core's counters to these.
    pub fn add(&mut self, o: &ServerStats) {
        self.received += o.received;
        self.echoed += o.echoed;
        self.malformed += o.malformed;
        self.send_failed += o.send_failed;
        self.io_errors += o.io_errors;
        self.work.merge(&o.work);
        self.datapath.add(&o.datapath);
    }

    /// The counters of several cores, summed.
    pub fn sum(per_core: &[ServerStats]) -> ServerStats {
        let mut all = ServerStats::default();
        for s in per_core {
            all.add(s);
        }
        all
    }

    /// Median handling time per message, in nanoseconds (see [`Self::work`]).
    pub fn work_p50_ns(&self) -> Option<f64> {
        self.work.p50_us().map(|us| us * 1000.0)
    }
}

impl fmt::Display for ServerStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "received={} echoed={} malformed={} send_failed={} io_errors={} datapath_drops={} work_p50={:.0}ns",
            self.received,
            self.echoed,
            self.malformed,
            self.send_failed,
            self.io_errors,
            self.datapath.total_drops(),
            self.work_p50_ns().unwrap_or(0.0)
        )
    }
}

/// Why one message was not echoed.
enum Skip {
    Malformed,
    Send(SendError),
}

impl From<SendError> for Skip {
    fn from(e: SendError) -> Self {
        Skip::Send(e)
    }
}

impl From<CfError> for Skip {
    fn from(e: CfError) -> Self {
        match e {
            CfError::Decode(_) | CfError::IncompleteTree => Skip::Malformed,
            CfError::Send(e) => Skip::Send(e),
        }
    }
}

/// An echo server on one datapath queue (one per core, as in the paper).
pub struct EchoServer<D: Datapath> {
    dp: D,
    mode: Mode,
    arena: Arena,
    codec: Option<LibCodec>,
    rx: Vec<RxMsg>,
    fields: Vec<Range<usize>>,
    scratch: Vec<u8>,
    sga: Vec<RcBuf>,
    stats: ServerStats,
}

impl<D: Datapath> EchoServer<D> {
    /// A server on `dp`.
    pub fn new(dp: D, cfg: ServerConfig) -> Result<Self, String> {
        let codec = match cfg.mode.format() {
            Format::Library(lib) => Some(LibCodec::new(lib)),
            _ => None,
        };
        let arena =
            Arena::with_memory(dp.memory()).with_threshold(cfg.mode.threshold(cfg.threshold));
        Ok(EchoServer {
            dp,
            mode: cfg.mode,
            arena,
            codec,
            rx: Vec::with_capacity(64),
            fields: Vec::new(),
            scratch: Vec::new(),
            sga: Vec::new(),
            stats: ServerStats::default(),
        })
    }

    /// The datapath (e.g. for its local address).
    pub fn datapath(&self) -> &D {
        &self.dp
    }

    /// Counters so far.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            datapath: self.dp.counters(),
            ..self.stats.clone()
        }
    }

    /// Receives one burst, echoes every message in it and flushes. Returns the messages
    /// received. Never blocks; errors are counted, not returned.
    pub fn poll(&mut self) -> usize {
        let mut rx = std::mem::take(&mut self.rx);
        rx.clear();
        if self.dp.recv_burst(&mut rx).is_err() {
            self.stats.io_errors += 1;
        }
        let n = rx.len();
        for m in rx.drain(..) {
            let start = self
                .stats
                .received
                .is_multiple_of(WORK_SAMPLE_EVERY)
                .then(Instant::now);
            self.stats.received += 1;
            let outcome = match self.echo_one(&m) {
                Err(Skip::Send(SendError::Full)) => {
                    // The transmit queue is full: push it out and try once more.
                    self.flush();
                    self.echo_one(&m)
                }
                r => r,
            };
            if let Some(start) = start {
                self.stats.work.record(start.elapsed());
            }
            match outcome {
                Ok(()) => self.stats.echoed += 1,
                Err(Skip::Malformed) => self.stats.malformed += 1,
                Err(Skip::Send(_)) => self.stats.send_failed += 1,
            }
        }
        self.rx = rx;
        if n > 0 {
            self.flush();
        }
        self.dp.poll_completions();
        n
    }

    fn flush(&mut self) {
        if self.dp.flush().is_err() {
            self.stats.io_errors += 1;
        }
        self.dp.poll_completions();
    }

    /// Polls until `stop` is set. After `idle_after` empty polls in a row it calls `idle`
    /// (which may block briefly, e.g. until the socket is readable) so an idle server leaves
    /// the CPU to the client threads it shares cores with. With `report`, prints the counters
    /// on stderr that often ([`percore::poll_loop`]).
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        report: Option<Duration>,
        idle_after: u32,
        idle: &mut dyn FnMut(&D),
    ) {
        percore::poll_loop(self, stop, report, idle_after, &mut |s: &mut Self| {
            idle(&s.dp)
        });
    }

    fn echo_one(&mut self, m: &RxMsg) -> Result<(), Skip> {
        if self.mode == Mode::Raw {
            return Ok(self
                .dp
                .send_sga(m.conn, m.msg, std::slice::from_ref(&m.data))?);
        }
        let kind = Kind::from_msg_type(m.msg.ty).ok_or(Skip::Malformed)?;
        match self.mode.format() {
            Format::Manual => {
                manual::parse(&m.data, kind, &mut self.fields).map_err(|_| Skip::Malformed)?;
                match self.mode {
                    Mode::ZeroCopy => self.zero_copy(m),
                    Mode::OneCopy => self.one_copy(m),
                    _ => self.two_copy(m),
                }
            }
            Format::Cornflakes => {
                self.arena.reset();
                let path = if self.mode == Mode::CornflakesNoSsend {
                    SendPath::SgaThenSend
                } else {
                    SendPath::SerializeAndSend
                };
                Ok(cf::echo(
                    &mut self.dp,
                    m.conn,
                    m.msg,
                    kind,
                    &m.data,
                    &self.arena,
                    path,
                )?)
            }
            Format::Library(Lib::Capnp) => {
                // Cap'n Proto's own network path (paper §6.1.3): the reply is built in pinned
                // segments, sent as the segment table plus one entry per segment.
                let sga =
                    baselines::capnp_echo_sga(crate::libs::shape(kind), &m.data, self.dp.memory())
                        .map_err(|_| Skip::Malformed)?
                        .map_err(SendError::from)?;
                Ok(self.dp.send_sga(m.conn, m.msg, &sga)?)
            }
            Format::Library(_) => {
                let Some(codec) = self.codec.as_mut() else {
                    return Err(Skip::Malformed);
                };
                let mem = self.dp.memory();
                let cap = (m.data.len() * 2 + 1024).min(mem.max_item_size());
                let mut out = mem.alloc(cap).map_err(SendError::from)?;
                let n = codec
                    .echo(kind, &m.data, &mut out)
                    .map_err(|_| Skip::Malformed)?;
                out.set_len(n);
                Ok(self.dp.send_sga(m.conn, m.msg, &[out.freeze()])?)
            }
        }
    }

    /// A new header, then each field as a reference into the received buffer. Fields beyond
    /// what one send takes are copied into one trailing buffer.
    fn zero_copy(&mut self, m: &RxMsg) -> Result<(), Skip> {
        let max_entries = self.dp.max_segments().saturating_sub(1);
        if max_entries < 3 {
            return self.one_copy(m);
        }
        let n = self.fields.len();
        let mut hdr = self
            .dp
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
            let mut tail = self.dp.memory().alloc(len).map_err(SendError::from)?;
            let mut at = 0;
            for r in rest {
                tail[at..at + r.len()].copy_from_slice(&m.data[r.clone()]);
                at += r.len();
            }
            self.sga.push(tail.freeze());
        }
        let res = self.dp.send_sga(m.conn, m.msg, &self.sga);
        self.sga.clear();
        Ok(res?)
    }

    /// Header and fields copied into one transmit buffer.
    fn one_copy(&mut self, m: &RxMsg) -> Result<(), Skip> {
        let h = manual::header_len(self.fields.len());
        let total = h + self.fields.iter().map(|r| r.len()).sum::<usize>();
        let mut buf = self.dp.memory().alloc(total).map_err(SendError::from)?;
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
        Ok(self.dp.send_sga(m.conn, m.msg, &[buf.freeze()])?)
    }

    /// Header and fields copied into an intermediate buffer, which the datapath copies into
    /// its transmit buffer.
    fn two_copy(&mut self, m: &RxMsg) -> Result<(), Skip> {
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
        Ok(self.dp.send_copy(m.conn, m.msg, &self.scratch)?)
    }
}

impl<D: Datapath> percore::Poll for EchoServer<D> {
    type Stats = ServerStats;

    fn poll(&mut self) -> usize {
        EchoServer::poll(self)
    }

    fn stats(&self) -> ServerStats {
        EchoServer::stats(self)
    }

    fn report_line(&self) -> String {
        format!(
            "[server {} {}] {}",
            self.mode,
            self.dp.local_addr(),
            self.stats()
        )
    }
}

impl SocketServer for EchoServer<SocketDatapath> {
    fn socket_datapath(&self) -> &SocketDatapath {
        &self.dp
    }
}

// The idle policies live with the socket datapath, shared by every server app (echo, kv).
pub use datapath_socket::idle::{
    socket_idle, wait_readable, IDLE_SPINS, IDLE_WAIT, SOCKET_IDLE_SPINS,
};

/// Echo server cores over the socket datapath, each on its own thread with its own socket
/// (core *i* on the base port plus *i*; `docs/cores.md`).
pub struct ServerHandle {
    cores: SocketCores<(), ServerStats>,
}

impl ServerHandle {
    /// Binds `sock.bind` and starts serving on one new, unpinned thread (blocking briefly when
    /// idle, or yielding when `spin`). Returns once the socket is bound.
    pub fn spawn(
        cfg: ServerConfig,
        sock: SocketConfig,
        report: Option<Duration>,
        spin: bool,
    ) -> Result<ServerHandle, String> {
        let mut cores = CoresConfig::new(&format!("echo-server-{}", cfg.mode), 1);
        cores.pin = false;
        Self::spawn_cores(cfg, sock, &cores, report, spin)
    }

    /// Starts `cores.cores` share-nothing server cores, core *i* on `sock.bind`'s port plus
    /// *i*. Returns once every core's socket is bound.
    pub fn spawn_cores(
        cfg: ServerConfig,
        sock: SocketConfig,
        cores: &CoresConfig,
        report: Option<Duration>,
        spin: bool,
    ) -> Result<ServerHandle, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = spawn_socket_cores(sock, cores, stop, spin, report, move |dp, _| {
            Ok((EchoServer::new(dp, cfg)?, ()))
        })?;
        Ok(ServerHandle { cores })
    }

    /// The address core 0 listens on.
    pub fn addr(&self) -> SocketAddrV4 {
        self.cores.ready()[0].0
    }

    /// Every core's address, by core index.
    pub fn addrs(&self) -> Vec<SocketAddrV4> {
        self.cores.ready().iter().map(|r| r.0).collect()
    }

    /// Stops the server and returns its final counters, summed over the cores.
    pub fn stop(self) -> io::Result<ServerStats> {
        self.stop_per_core().map(|per| ServerStats::sum(&per))
    }

    /// Stops the server and returns each core's final counters, by core index.
    pub fn stop_per_core(self) -> io::Result<Vec<ServerStats>> {
        self.cores.stop().map_err(io::Error::other)
    }

    /// Serves until `stop` is set, then stops and returns each core's final counters (printed
    /// per core on stderr when there are several).
    pub fn serve_until(self, stop: &AtomicBool) -> Result<Vec<ServerStats>, String> {
        self.cores.serve_until(stop, "[server]")
    }
}
