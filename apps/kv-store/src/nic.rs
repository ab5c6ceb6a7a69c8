//! `kv server --datapath mlx5 | ice`: the KV server on a kernel-bypass NIC.
//!
//! Choosing the NIC, opening it (one queue set, or one per core for `--cores N`) and the
//! errors of a build without its feature are `nic_server`'s, shared with the echo server; this
//! module is the KV server as its app, and the one-core and per-core server bodies the AF_XDP
//! server (`crate::xdp`, feature `xdp`) runs too. The server loop is the same generic
//! [`KvServer`] as over sockets; a NIC has no file descriptor to sleep on, so an idle server
//! spins and yields.

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::Datapath;
use kv_workloads::WorkloadConfig;
pub use nic_server::NicSpec;
use nic_server::{CargoRun, NicApp, NicCoreApp};

use crate::bench::load_store;
use crate::server::{Kv, KvServer, ServerConfig, ServerStats};

/// How to build `kv` with a NIC feature (the hint of a build without it).
pub const CARGO_RUN: CargoRun = CargoRun {
    package: "kv-store",
    bin: Some("kv"),
    args: "server ...",
};

/// Loads `load` (if any) into a KV server on `dp` and serves until `stop` is set.
pub fn serve_on<D: Datapath>(
    dp: D,
    cfg: ServerConfig,
    load: Option<&WorkloadConfig>,
    what: &str,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let mut server = crate::server::new(dp, cfg);
    if let Some(wl) = load {
        eprintln!(
            "[server] {}",
            load_store(wl, server.handler_mut().store_mut())?
        );
    }
    eprintln!("[server] ready: {} ({what})", cfg.serialization);
    server.run(stop, report, datapath_socket::idle::IDLE_SPINS, &mut |_| {
        std::thread::yield_now()
    });
    Ok(server.stats())
}

/// The KV server on one core, as a [`NicApp`].
struct KvNic<'a> {
    cfg: ServerConfig,
    load: Option<&'a WorkloadConfig>,
    max_item: usize,
}

impl NicApp for KvNic<'_> {
    type Stats = ServerStats;
    const CARGO_RUN: CargoRun = CARGO_RUN;

    fn min_item(&self) -> usize {
        self.max_item
    }

    fn serve<D: Datapath>(
        self,
        dp: D,
        nic: &NicSpec,
        bind: SocketAddrV4,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<ServerStats, String> {
        let what = format!("{bind}, {}", nic.label());
        serve_on(dp, self.cfg, self.load, &what, stop, report)
    }
}

/// Runs the KV server on `nic` at `bind` until `stop` is set.
#[allow(clippy::too_many_arguments)]
pub fn serve(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    max_item: usize,
    cfg: ServerConfig,
    load: Option<&WorkloadConfig>,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let app = KvNic {
        cfg,
        load,
        max_item,
    };
    nic_server::serve(nic, bind, mtu, app, stop, report)
}

/// One KV server core on its own datapath `dp` (opened on this core's thread): its store
/// holds only its shard (`steer::core_of(key, N) = i`), loaded with the keys of `load` it owns;
/// it reports ready with `info` (its address and queue), then polls until stopped (no file
/// descriptor to sleep on: an idle core yields).
pub fn serve_core<D: Datapath>(
    dp: D,
    cfg: ServerConfig,
    load: Option<&WorkloadConfig>,
    core: &percore::Core,
    ready: percore::Ready<percore::QueueInfo>,
    info: percore::QueueInfo,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let kv = Kv::new(dp.memory(), cfg).with_core(core.index(), core.count());
    let mut server = KvServer::new(dp, kv);
    if let Some(wl) = load {
        let done = load_store(wl, server.handler_mut().store_mut())
            .map_err(|e| format!("loading the store: {e}"))?;
        eprintln!(
            "[server {} core {}] {done}",
            cfg.serialization,
            core.index()
        );
    }
    ready.ready(info);
    percore::poll_loop(
        &mut server,
        core.stop(),
        report,
        datapath_socket::idle::IDLE_SPINS,
        &mut |_| std::thread::yield_now(),
    );
    Ok(server.stats())
}

/// The KV server on each of N cores, as a [`NicCoreApp`].
struct KvCores {
    cfg: ServerConfig,
    load: Option<WorkloadConfig>,
    max_item: usize,
}

impl NicCoreApp for KvCores {
    type Stats = ServerStats;
    const CARGO_RUN: CargoRun = CARGO_RUN;

    fn label(&self) -> String {
        self.cfg.serialization.to_string()
    }

    fn min_item(&self) -> usize {
        self.max_item
    }

    fn serve_core<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<percore::QueueInfo>,
        info: percore::QueueInfo,
        report: Option<Duration>,
    ) -> Result<ServerStats, String> {
        serve_core(dp, self.cfg, self.load.as_ref(), core, ready, info, report)
    }
}

/// `kv server --datapath mlx5 | ice --cores N`: N pinned share-nothing cores on one port of
/// `nic` (`nic_server::serve_cores`, `docs/cores.md`), each a KV server whose store holds
/// only its shard of the keys. Runs until `stop`, prints each core's counters and returns
/// their sum.
#[allow(clippy::too_many_arguments)]
pub fn serve_cores(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    max_item: usize,
    cfg: ServerConfig,
    load: Option<WorkloadConfig>,
    cores: usize,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let cc = percore::CoresConfig::new(&format!("kv-server-{}", cfg.serialization), cores);
    let app = KvCores {
        cfg,
        load,
        max_item,
    };
    nic_server::serve_cores(nic, bind, mtu, &cc, app, stop, report)
}
