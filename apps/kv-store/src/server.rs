//! The KV server: receives a burst, answers each request from the [`Store`] in its
//! serialization, flushes once per burst. It runs over any [`Datapath`]; malformed requests are
//! counted and dropped, never fatal.

use std::fmt;
use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes::datapath::DropCounters;
use cornflakes::mem::MemoryConfig;
use cornflakes::{Arena, Datapath, RxMsg, SendError};
use datapath_socket::cores::{spawn_socket_cores, SocketCores, SocketServer};
use datapath_socket::{SocketConfig, SocketDatapath};
use loadgen::LatencyHistogram;
use percore::CoresConfig;

use crate::cf::{self, SendPath, ServeError};
use crate::resp;
use crate::serialization::Serialization;
use crate::store::{Store, StoreConfig, StoreStats};

/// What the server does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Wire format and send path.
    pub serialization: Serialization,
    /// The hybrid threshold of `cornflakes` and `cornflakes-no-ssend`.
    pub threshold: usize,
    /// The store's settings.
    pub store: StoreConfig,
}

impl ServerConfig {
    /// `serialization` with the default threshold and store.
    pub fn new(serialization: Serialization) -> ServerConfig {
        ServerConfig {
            serialization,
            threshold: cornflakes::default_threshold(),
            store: StoreConfig::default(),
        }
    }
}

/// Largest pinned buffer of a KV server's memory by default: values up to this size are one
/// buffer (sent by one scatter-gather entry); larger ones are stored in pieces.
pub const DEFAULT_MAX_ITEM: usize = 256 * 1024;

/// The pinned-memory settings of a KV server: items up to `max_item` bytes, at most
/// `max_bytes` mapped.
pub fn memory_config(max_item: usize, max_bytes: usize) -> MemoryConfig {
    MemoryConfig {
        max_item_size: max_item.next_power_of_two().clamp(64, 2 << 20),
        max_bytes,
        ..MemoryConfig::default()
    }
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
    pub replied: u64,
    /// Requests that did not parse (unknown type, bad encoding): dropped. Requests that parse
    /// but are invalid are answered `BAD_REQUEST` ([`StoreStats::bad_requests`]).
    pub malformed: u64,
    /// Replies that could not be sent (e.g. no buffer): dropped.
    pub send_failed: u64,
    /// Errors from the datapath's receive or flush calls.
    pub io_errors: u64,
    /// Time to handle a request (decode, store, build and queue the reply), without the
    /// receive and flush calls, for one request in [`WORK_SAMPLE_EVERY`] (the first, then
    /// every 16th): a sample whose median and tail estimate the population's. Read the
    /// median: a sample may include preemption.
    pub work: LatencyHistogram,
    /// The datapath's drop counters.
    pub datapath: DropCounters,
    /// The store's counters.
    pub store: StoreStats,
    /// Why the last malformed request was dropped.
    pub last_malformed: Option<String>,
}

impl ServerStats {
    /// Adds another core's counters to these.
    pub fn add(&mut self, o: &ServerStats) {
        self.received += o.received;
        self.replied += o.replied;
        self.malformed += o.malformed;
        self.send_failed += o.send_failed;
        self.io_errors += o.io_errors;
        self.work.merge(&o.work);
        self.datapath.add(&o.datapath);
        self.store.add(&o.store);
        if o.last_malformed.is_some() {
            self.last_malformed.clone_from(&o.last_malformed);
        }
    }

    /// The counters of several cores, summed.
    pub fn sum(per_core: &[ServerStats]) -> ServerStats {
        let mut all = ServerStats::default();
        for s in per_core {
            all.add(s);
        }
        all
    }

    /// Median handling time per request, nanoseconds.
    pub fn work_p50_ns(&self) -> Option<f64> {
        self.work.p50_us().map(|us| us * 1000.0)
    }
}

impl fmt::Display for ServerStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "received={} replied={} malformed={} bad_requests={} retries_answered={} send_failed={} io_errors={} datapath_drops={} keys={} store_bytes={} store_full={} foreign_keys={} work_p50={:.0}ns",
            self.received,
            self.replied,
            self.malformed,
            self.store.bad_requests,
            self.store.dedup.hits,
            self.send_failed,
            self.io_errors,
            self.datapath.total_drops(),
            self.store.keys,
            self.store.used_bytes,
            self.store.full,
            self.store.foreign,
            self.work_p50_ns().unwrap_or(0.0)
        )?;
        if let Some(why) = &self.last_malformed {
            write!(f, " last_malformed={why:?}")?;
        }
        Ok(())
    }
}

/// A KV server on one datapath queue.
pub struct KvServer<D: Datapath> {
    dp: D,
    ser: Serialization,
    store: Store,
    arena: Arena,
    rx: Vec<RxMsg>,
    stats: ServerStats,
}

impl<D: Datapath> KvServer<D> {
    /// A server with an empty store on `dp`.
    pub fn new(dp: D, cfg: ServerConfig) -> KvServer<D> {
        let store = Store::new(dp.memory(), cfg.store);
        KvServer::with_store(dp, cfg, store)
    }

    /// A server on `dp` with a store loaded beforehand, whose values must live in `dp`'s
    /// pinned memory (e.g. loaded before the datapath was opened on the same memory).
    pub fn with_store(dp: D, cfg: ServerConfig, store: Store) -> KvServer<D> {
        let arena = Arena::with_memory(dp.memory())
            .with_threshold(cfg.serialization.threshold(cfg.threshold));
        KvServer {
            dp,
            ser: cfg.serialization,
            store,
            arena,
            rx: Vec::with_capacity(64),
            stats: ServerStats::default(),
        }
    }

    /// Makes this server core `core` of `cores`: its store is that core's shard
    /// ([`Store::set_shard`]).
    pub fn with_core(mut self, core: usize, cores: usize) -> Self {
        self.store.set_shard(core, cores);
        self
    }

    /// The store (to load it, or inspect it).
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The datapath.
    pub fn datapath(&self) -> &D {
        &self.dp
    }

    /// The datapath, mutably (tests drive completions through it).
    pub fn datapath_mut(&mut self) -> &mut D {
        &mut self.dp
    }

    /// The serialization.
    pub fn serialization(&self) -> Serialization {
        self.ser
    }

    /// Counters so far.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            datapath: self.dp.counters(),
            store: self.store.stats(),
            ..self.stats.clone()
        }
    }

    /// Receives one burst, answers every request in it and flushes. Returns the messages
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
            let outcome = match self.serve_one(&m) {
                Err(ServeError::Send(SendError::Full)) => {
                    self.flush();
                    self.serve_one(&m)
                }
                r => r,
            };
            if let Some(start) = start {
                self.stats.work.record(start.elapsed());
            }
            match outcome {
                Ok(()) => self.stats.replied += 1,
                Err(ServeError::Malformed(why)) => {
                    self.stats.malformed += 1;
                    self.stats.last_malformed = Some(why);
                }
                Err(ServeError::Send(_)) => self.stats.send_failed += 1,
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

    fn serve_one(&mut self, m: &RxMsg) -> Result<(), ServeError> {
        match self.ser {
            Serialization::Resp => {
                resp::serve(&mut self.dp, &mut self.store, m.conn, m.msg, &m.data)
            }
            ser if ser.library().is_some() => {
                let lib = ser.library().expect("checked");
                let (dp, store) = (&mut self.dp, &mut self.store);
                crate::libs::with_codec(lib, |c| {
                    crate::libs::serve(dp, store, c, m.conn, m.msg, &m.data)
                })
            }
            ser => {
                self.arena.reset();
                let path = if ser == Serialization::CornflakesNoSsend {
                    SendPath::SgaThenSend
                } else {
                    SendPath::SerializeAndSend
                };
                cf::serve(
                    &mut self.dp,
                    &mut self.store,
                    m.conn,
                    m.msg,
                    &m.data,
                    &self.arena,
                    path,
                )
            }
        }
    }

    /// Polls until `stop` is set; after `idle_after` empty polls in a row calls `idle` (which
    /// may block briefly). With `report`, prints the counters on stderr that often
    /// ([`percore::poll_loop`]).
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
}

impl<D: Datapath> percore::Poll for KvServer<D> {
    type Stats = ServerStats;

    fn poll(&mut self) -> usize {
        KvServer::poll(self)
    }

    fn stats(&self) -> ServerStats {
        KvServer::stats(self)
    }

    fn report_line(&self) -> String {
        format!(
            "[server {} {}] {}",
            self.ser,
            self.dp.local_addr(),
            self.stats()
        )
    }
}

impl SocketServer for KvServer<SocketDatapath> {
    fn socket_datapath(&self) -> &SocketDatapath {
        &self.dp
    }
}

/// Loads a store before the server starts serving (runs on the server core's thread, where
/// the pinned memory lives). Returns a description for the log, or why loading failed.
pub type Loader = Box<dyn FnOnce(&mut Store) -> Result<String, String> + Send>;

/// Loads core `core`'s shard of the store (of `cores` cores) before that core serves; runs on
/// the core's own thread. Returns a description for the log, or why loading failed.
pub type ShardLoader =
    Arc<dyn Fn(&mut Store, usize, usize) -> Result<String, String> + Send + Sync>;

/// KV server cores over the socket datapath, each on its own thread with its own socket (core
/// *i* on the base port plus *i*), store shard, arena and counters (`docs/cores.md`).
pub struct ServerHandle {
    cores: SocketCores<(), ServerStats>,
}

impl ServerHandle {
    /// Binds `sock.bind`, loads the store with `load`, and serves on one new, unpinned thread
    /// (blocking briefly on the socket when idle, or yielding when `spin`). Returns once
    /// loaded.
    pub fn spawn(
        cfg: ServerConfig,
        sock: SocketConfig,
        load: Loader,
        report: Option<Duration>,
        spin: bool,
    ) -> Result<ServerHandle, String> {
        let mut cores = CoresConfig::new(&format!("kv-server-{}", cfg.serialization), 1);
        cores.pin = false;
        let load = std::sync::Mutex::new(Some(load));
        let shard: ShardLoader = Arc::new(move |store, _, _| {
            // Setup only (one core, called once): never on the request path.
            match load.lock().ok().and_then(|mut l| l.take()) {
                Some(f) => f(store),
                None => Err("the loader ran twice".to_owned()),
            }
        });
        Self::spawn_cores(cfg, sock, &cores, shard, report, spin)
    }

    /// Starts `cores.cores` share-nothing server cores, core *i* on `sock.bind`'s port plus
    /// *i*, each loading its own shard with `load(store, i, cores)` (the keys with
    /// [`crate::steer::core_of`] = *i*). Returns once every core is bound and loaded.
    pub fn spawn_cores(
        cfg: ServerConfig,
        sock: SocketConfig,
        cores: &CoresConfig,
        load: ShardLoader,
        report: Option<Duration>,
        spin: bool,
    ) -> Result<ServerHandle, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = spawn_socket_cores(sock, cores, stop, spin, report, move |dp, core| {
            let mut server = KvServer::new(dp, cfg).with_core(core.index(), core.count());
            let what = load(server.store_mut(), core.index(), core.count())
                .map_err(|e| format!("loading the store: {e}"))?;
            if !what.is_empty() {
                eprintln!(
                    "[server {} core {}] {what}",
                    cfg.serialization,
                    core.index()
                );
            }
            Ok((server, ()))
        })?;
        Ok(ServerHandle { cores })
    }

    /// The address core 0 listens on.
    pub fn addr(&self) -> SocketAddrV4 {
        self.cores.ready()[0].0
    }

    /// Every core's address, by core index (a client steers by these).
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
