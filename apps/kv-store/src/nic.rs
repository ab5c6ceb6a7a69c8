//! `kv server --datapath mlx5 | ice`: the KV server on a kernel-bypass NIC.
//!
//! Each datapath is behind the cargo feature of the same name (rdma-core or DPDK at build
//! time, the NIC at run time); opening the device is the NIC crate's (`hw::open_server`,
//! `datapath::open`), shared with the echo server. The server loop is the same generic
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
    Err("--datapath mlx5 needs the `mlx5` feature (rdma-core: apt-get install -y $(cat datapath-mlx5/APT_PACKAGES)): \
         cargo run --release -p kv-store --features mlx5 --bin kv -- server ..."
        .to_owned())
}

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
    Err("--datapath ice needs the `ice` feature (DPDK: apt-get install -y $(cat datapath-ice/APT_PACKAGES)): \
         cargo run --release -p kv-store --features ice --bin kv -- server ..."
        .to_owned())
}
