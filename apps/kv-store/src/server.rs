//! The KV server: a [`Handler`] of the shared server skeleton (`app-server`) that answers each
//! request from the [`Store`] in its serialization. It runs over any [`Datapath`]; malformed
//! requests are counted and dropped, never fatal.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use app_server::{AppCounters, Handler, Unanswered};
use baselines::kv::KvCodec;
use cornflakes::mem::MemoryConfig;
use cornflakes::{Arena, Datapath, PinnedMemory, RxMsg};
use datapath_socket::SocketConfig;
use percore::CoresConfig;

use crate::cf::Service;
use crate::resp;
use crate::schema::KvServer as Dispatch;
use crate::serialization::Serialization;
use crate::store::{Store, StoreConfig, StoreStats};
use cornflakes_rpc::{Cornflakes, Dispatcher};

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

/// The AF_XDP pinned memory (UMEM) of a server whose store may hold `memory_limit` bytes: the
/// store plus room for receive and transmit frames.
pub fn umem_bytes(memory_limit: usize) -> usize {
    memory_limit.saturating_add(64 << 20)
}

pub use app_server::WORK_SAMPLE_EVERY;

impl AppCounters for StoreStats {
    fn add(&mut self, o: &StoreStats) {
        self.keys += o.keys;
        self.used_bytes += o.used_bytes;
        self.full += o.full;
        self.foreign += o.foreign;
        self.bad_requests += o.bad_requests;
        self.dedup.add(&o.dedup);
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            " keys={} store_bytes={} store_full={} foreign_keys={} bad_requests={} retries_answered={} reused_ids_refused={}",
            self.keys,
            self.used_bytes,
            self.full,
            self.foreign,
            self.bad_requests,
            self.dedup.hits,
            self.dedup.refused
        )
    }

    fn parse_field(&mut self, key: &str, v: u64) -> bool {
        match key {
            "keys" => self.keys = v as usize,
            "store_bytes" => self.used_bytes = v as usize,
            "store_full" => self.full = v,
            "foreign_keys" => self.foreign = v,
            "bad_requests" => self.bad_requests = v,
            "retries_answered" => self.dedup.hits = v,
            "reused_ids_refused" => self.dedup.refused = v,
            _ => return false,
        }
        true
    }
}

/// What the KV server has seen so far ([`app_server::ServerStats`]; `app` is the store's
/// counters).
pub type ServerStats = app_server::ServerStats<StoreStats>;

/// A KV server on one datapath queue.
pub type KvServer<D> = app_server::Server<D, Kv>;

/// KV server cores over the socket datapath ([`spawn`], [`spawn_cores`]).
pub type ServerHandle = app_server::ServerHandle<StoreStats>;

/// A KV server with an empty store on `dp`.
pub fn new<D: Datapath>(dp: D, cfg: ServerConfig) -> KvServer<D> {
    let kv = Kv::new(dp.memory(), cfg);
    KvServer::new(dp, kv)
}

/// How the KV server answers: the store as the generated service `kv.Kv` (routed by its
/// generated dispatcher in the Cornflakes serializations), or the codec of a library or RESP
/// running the same operations on the same store.
pub struct Kv {
    ser: Serialization,
    service: Service,
    /// The generated dispatcher's state: the arena replies are built in, the send path.
    rt: Dispatcher,
    codec: Option<Box<dyn KvCodec + Send>>,
    /// The library servers' reused response lists.
    scratch: crate::libs::Scratch,
    /// RESP's request parser (its argument list reused).
    parser: ::resp::Parser,
}

impl Kv {
    /// A handler with an empty store in `mem` (the datapath's memory).
    pub fn new(mem: &PinnedMemory, cfg: ServerConfig) -> Kv {
        let store = Store::new(mem, cfg.store);
        Kv::with_store(mem, cfg, store)
    }

    /// A handler with a store loaded beforehand, whose values must live in `mem`, the
    /// datapath's pinned memory (e.g. loaded before the datapath was opened on the same
    /// memory).
    pub fn with_store(mem: &PinnedMemory, cfg: ServerConfig, store: Store) -> Kv {
        let arena =
            Arena::with_memory(mem).with_threshold(cfg.serialization.threshold(cfg.threshold));
        let path = cfg
            .serialization
            .cornflakes()
            .unwrap_or(Cornflakes::Hybrid)
            .send_path();
        Kv {
            ser: cfg.serialization,
            service: Service::new(store),
            rt: Dispatcher::with_arena(arena, path),
            codec: cfg.serialization.library().map(|lib| lib.kv_codec()),
            scratch: crate::libs::Scratch::default(),
            parser: ::resp::Parser::new(),
        }
    }

    /// Makes this server core `core` of `cores`: its store is that core's shard
    /// ([`Store::set_shard`]).
    pub fn with_core(mut self, core: usize, cores: usize) -> Self {
        self.service.store_mut().set_shard(core, cores);
        self
    }

    /// The store (to load it, or inspect it).
    pub fn store_mut(&mut self) -> &mut Store {
        self.service.store_mut()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        self.service.store()
    }

    /// Requests of a method the store does not have, answered with an error reply
    /// (Cornflakes serializations).
    pub fn unknown_methods(&self) -> u64 {
        self.rt.counters().unknown_methods
    }

    /// The serialization.
    pub fn serialization(&self) -> Serialization {
        self.ser
    }
}

impl Handler for Kv {
    type Counters = StoreStats;

    fn label(&self) -> String {
        self.ser.to_string()
    }

    fn counters(&self) -> StoreStats {
        self.service.store().stats()
    }

    // Out of line, one call per request: the server's work per request is this function's
    // inclusive cost under callgrind (docs/performance.md), whatever the build inlines around it.
    #[inline(never)]
    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        match (self.ser, self.codec.as_mut()) {
            (Serialization::Resp, _) => {
                let (store, items) = self.service.parts();
                resp::serve(dp, store, &mut self.parser, items, m.conn, m.msg, &m.data)
            }
            (_, Some(codec)) => {
                let (store, items) = self.service.parts();
                crate::libs::serve(
                    dp,
                    store,
                    codec.as_mut(),
                    &mut self.scratch,
                    items,
                    m.conn,
                    m.msg,
                    &m.data,
                )
            }
            (_, None) => Dispatch::dispatch_to(&mut self.service, &mut self.rt, dp, m),
        }
    }
}

/// Loads a store before the server starts serving (runs on the server core's thread, where
/// the pinned memory lives). Returns a description for the log, or why loading failed.
pub type Loader = Box<dyn FnOnce(&mut Store) -> Result<String, String> + Send>;

/// Loads core `core`'s shard of the store (of `cores` cores) before that core serves; runs on
/// the core's own thread. Returns a description for the log, or why loading failed.
pub type ShardLoader =
    Arc<dyn Fn(&mut Store, usize, usize) -> Result<String, String> + Send + Sync>;

/// Binds `sock.bind`, loads the store with `load`, and serves on one new, unpinned thread
/// (blocking briefly on the socket when idle, or yielding when `spin`). Returns once loaded.
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
    spawn_cores(cfg, sock, &cores, shard, report, spin)
}

/// [`spawn_cores`] over kernel TCP with `tcp`'s zero-copy sends when given (`--datapath
/// tcp`), else over UDP sockets.
pub fn spawn_cores_on(
    tcp: Option<&app_server::TcpSpec>,
    cfg: ServerConfig,
    sock: SocketConfig,
    cores: &CoresConfig,
    load: ShardLoader,
    report: Option<Duration>,
    spin: bool,
) -> Result<ServerHandle, String> {
    let Some(tcp) = tcp else {
        return spawn_cores(cfg, sock, cores, load, report, spin);
    };
    ServerHandle::spawn_tcp(sock, tcp, cores, report, spin, move |mem, core| {
        let mut kv = Kv::new(mem, cfg).with_core(core.index, core.count);
        load(kv.store_mut(), core.index, core.count)
            .map_err(|e| format!("loading the store: {e}"))?;
        Ok(kv)
    })
}

/// Starts `cores.cores` share-nothing server cores, core *i* on `sock.bind`'s port plus *i*,
/// each loading its own shard with `load(store, i, cores)` (the keys with
/// [`crate::steer::core_of`] = *i*). Returns once every core is bound and loaded.
pub fn spawn_cores(
    cfg: ServerConfig,
    sock: SocketConfig,
    cores: &CoresConfig,
    load: ShardLoader,
    report: Option<Duration>,
    spin: bool,
) -> Result<ServerHandle, String> {
    ServerHandle::spawn(sock, cores, report, spin, move |mem, core| {
        let mut kv = Kv::new(mem, cfg).with_core(core.index, core.count);
        let what = load(kv.store_mut(), core.index, core.count)
            .map_err(|e| format!("loading the store: {e}"))?;
        if !what.is_empty() {
            eprintln!("[server {} core {}] {what}", cfg.serialization, core.index);
        }
        Ok(kv)
    })
}
