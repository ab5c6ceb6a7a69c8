//! `kv server --datapath mlx5 | ice`: the KV server on a kernel-bypass NIC.
//!
//! Each datapath is behind the cargo feature of the same name (rdma-core or DPDK at build
//! time, the NIC at run time); opening the device is the NIC crate's (`hw::open_server`,
//! `datapath::open`), shared with the echo server, and so is opening, pinning and spawning
//! `--cores N` (`hw::spawn_server_cores`, `datapath::spawn_cores`): this module has only the
//! choice of NIC and the KV server each core runs. The server loop is the same generic
//! [`KvServer`] as over sockets; a NIC has no file descriptor to sleep on, so an idle server
//! spins and yields.

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::Datapath;
use kv_workloads::WorkloadConfig;

use crate::bench::load_store;
use crate::server::{KvServer, ServerConfig, ServerStats};

/// Where a NIC server runs.
#[derive(Clone, Debug)]
pub enum NicSpec {
    /// A ConnectX device: RDMA device name (`mlx5_0`) or PCI address.
    Mlx5(String),
    /// A DPDK port, named by EAL arguments (e.g. `-l 2 -a 0000:3b:00.0`).
    Ice(String),
}

/// Loads `load` (if any) into a KV server on `dp` and serves until `stop` is set.
pub fn serve_on<D: Datapath>(
    dp: D,
    cfg: ServerConfig,
    load: Option<&WorkloadConfig>,
    what: &str,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let mut server = KvServer::new(dp, cfg);
    if let Some(wl) = load {
        eprintln!("[server] {}", load_store(wl, server.store_mut())?);
    }
    eprintln!("[server] ready: {} ({what})", cfg.serialization);
    server.run(stop, report, datapath_socket::idle::IDLE_SPINS, &mut |_| {
        std::thread::yield_now()
    });
    Ok(server.stats())
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
    match nic {
        NicSpec::Mlx5(dev) => mlx5(dev, bind, mtu, max_item, cfg, load, stop, report),
        NicSpec::Ice(args) => ice(args, bind, mtu, cfg, load, stop, report),
    }
}

#[cfg(feature = "mlx5")]
#[allow(clippy::too_many_arguments)]
fn mlx5(
    dev: &str,
    bind: SocketAddrV4,
    mtu: usize,
    max_item: usize,
    cfg: ServerConfig,
    load: Option<&WorkloadConfig>,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let dp = datapath_mlx5::hw::open_server(dev, bind, mtu, max_item, 0)?;
    serve_on(
        dp,
        cfg,
        load,
        &format!("{bind}, ConnectX {dev}"),
        stop,
        report,
    )
}

#[cfg(not(feature = "mlx5"))]
#[allow(clippy::too_many_arguments)]
fn mlx5(
    _dev: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _max_item: usize,
    _cfg: ServerConfig,
    _load: Option<&WorkloadConfig>,
    _stop: &AtomicBool,
    _report: Option<Duration>,
) -> Result<ServerStats, String> {
    Err(NO_MLX5.to_owned())
}

#[cfg(not(feature = "mlx5"))]
const NO_MLX5: &str = "--datapath mlx5 needs the `mlx5` feature (rdma-core: apt-get install -y $(cat datapath-mlx5/APT_PACKAGES)): \
         cargo run --release -p kv-store --features mlx5 --bin kv -- server ...";

#[cfg(feature = "ice")]
fn ice(
    args: &str,
    bind: SocketAddrV4,
    mtu: usize,
    cfg: ServerConfig,
    load: Option<&WorkloadConfig>,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let dp = datapath_ice::datapath::open(args, bind, mtu)
        .map_err(|e| format!("starting DPDK with {args:?}: {e}"))?;
    serve_on(dp, cfg, load, &format!("{bind}, DPDK {args}"), stop, report)
}

#[cfg(not(feature = "ice"))]
fn ice(
    _args: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _cfg: ServerConfig,
    _load: Option<&WorkloadConfig>,
    _stop: &AtomicBool,
    _report: Option<Duration>,
) -> Result<ServerStats, String> {
    Err(NO_ICE.to_owned())
}

#[cfg(not(feature = "ice"))]
const NO_ICE: &str = "--datapath ice needs the `ice` feature (DPDK: apt-get install -y $(cat datapath-ice/APT_PACKAGES)): \
         cargo run --release -p kv-store --features ice --bin kv -- server ...";

/// Running KV server cores on a NIC or AF_XDP: each reported its address and a description
/// of its queue.
pub type KvCores = percore::Cores<percore::QueueInfo, ServerStats>;

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
    let mut server = KvServer::new(dp, cfg).with_core(core.index(), core.count());
    if let Some(wl) = load {
        let done =
            load_store(wl, server.store_mut()).map_err(|e| format!("loading the store: {e}"))?;
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

/// Prints each core's ready line (`[server] ready: ...`), waits until `stop`, prints
/// each core's counters and returns their sum.
pub fn serve_until(
    running: KvCores,
    ser: crate::Serialization,
    stop: &AtomicBool,
) -> Result<ServerStats, String> {
    let n = running.len();
    for (i, (addr, what)) in running.ready().iter().enumerate() {
        eprintln!("[server] ready: {ser} on {addr} ({what}, core {i} of {n})");
    }
    let per_core = running.serve_until(stop, "[server]")?;
    Ok(ServerStats::sum(&per_core))
}

/// `kv server --datapath mlx5 | ice --cores N`: N pinned share-nothing cores on one port of
/// `nic`, core *i* with its own queue set (mlx5: QP, CQs, memory and an `ibv_create_flow`
/// rule; ice: RX/TX queue pair, memory, pools and an `rte_flow` rule) answering at `bind`'s
/// port plus *i*, its store holding only its shard of the keys (`docs/cores.md`).
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
    let running = match nic {
        NicSpec::Mlx5(dev) => mlx5_cores(dev, bind, mtu, max_item, cfg, load, &cc, report)?,
        NicSpec::Ice(args) => ice_cores(args, bind, mtu, cfg, load, &cc, report)?,
    };
    serve_until(running, cfg.serialization, stop)
}

#[cfg(feature = "mlx5")]
#[allow(clippy::too_many_arguments)]
fn mlx5_cores(
    dev: &str,
    bind: SocketAddrV4,
    mtu: usize,
    max_item: usize,
    cfg: ServerConfig,
    load: Option<WorkloadConfig>,
    cc: &percore::CoresConfig,
    report: Option<Duration>,
) -> Result<KvCores, String> {
    datapath_mlx5::hw::spawn_server_cores(
        dev,
        bind,
        mtu,
        max_item,
        0,
        cc,
        move |dp, core, ready, info| serve_core(dp, cfg, load.as_ref(), core, ready, info, report),
    )
}

#[cfg(not(feature = "mlx5"))]
#[allow(clippy::too_many_arguments)]
fn mlx5_cores(
    _dev: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _max_item: usize,
    _cfg: ServerConfig,
    _load: Option<WorkloadConfig>,
    _cc: &percore::CoresConfig,
    _report: Option<Duration>,
) -> Result<KvCores, String> {
    Err(NO_MLX5.to_owned())
}

#[cfg(feature = "ice")]
#[allow(clippy::too_many_arguments)]
fn ice_cores(
    args: &str,
    bind: SocketAddrV4,
    mtu: usize,
    cfg: ServerConfig,
    load: Option<WorkloadConfig>,
    cc: &percore::CoresConfig,
    report: Option<Duration>,
) -> Result<KvCores, String> {
    let (running, steering) =
        datapath_ice::datapath::spawn_cores(args, bind, mtu, cc, move |dp, core, ready, info| {
            serve_core(dp, cfg, load.as_ref(), core, ready, info, report)
        })?;
    eprintln!("[server] DPDK steering: {steering:?}");
    Ok(running)
}

#[cfg(not(feature = "ice"))]
#[allow(clippy::too_many_arguments)]
fn ice_cores(
    _args: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _cfg: ServerConfig,
    _load: Option<WorkloadConfig>,
    _cc: &percore::CoresConfig,
    _report: Option<Duration>,
) -> Result<KvCores, String> {
    Err(NO_ICE.to_owned())
}
