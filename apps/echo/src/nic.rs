//! `echo server --datapath mlx5 | ice`: the echo server on a kernel-bypass NIC.
//!
//! Each datapath is behind the cargo feature of the same name (they need rdma-core or DPDK at
//! build time, and the NIC at run time). Opening the device, and for `--cores N` opening,
//! pinning and spawning one queue set per core, is the NIC crate's (`hw::open_server`,
//! `hw::spawn_server_cores`; `datapath::open`, `datapath::spawn_cores`), shared with the KV
//! server: this module picks the NIC and runs the echo server on it. The server loop is the
//! same generic [`EchoServer`](crate::server::EchoServer) as over sockets; a NIC has no file
//! descriptor to sleep on, so an idle server spins and yields.

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::Datapath;

use crate::server::{ServerConfig, ServerStats};

/// Where a NIC server runs.
#[derive(Clone, Debug)]
pub enum NicSpec {
    /// A ConnectX device.
    Mlx5 {
        /// RDMA device name (`mlx5_0`) or PCI address (`0000:3b:00.0`).
        device: String,
    },
    /// A DPDK port (Intel E810 through the ice driver, or any DPDK device).
    Ice {
        /// EAL arguments naming the port (e.g. `-l 2 -a 0000:3b:00.0`).
        dpdk_args: String,
    },
}

/// A server loop that runs on whichever NIC datapath was opened (the echo server, or the
/// calibration server).
pub trait NicApp {
    /// Extra pinned memory the app allocates beyond packet buffers (e.g. the calibration's
    /// array), so the NIC's memory is sized for it.
    fn extra_bytes(&self) -> usize {
        0
    }
    /// Serves on `dp` until `stop`; `what` names the device for the ready line.
    fn serve<D: Datapath>(
        self,
        dp: D,
        bind: SocketAddrV4,
        what: &str,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<ServerStats, String>;
}

/// The echo server as a [`NicApp`].
struct Echo(ServerConfig);

impl NicApp for Echo {
    fn serve<D: Datapath>(
        self,
        dp: D,
        bind: SocketAddrV4,
        what: &str,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<ServerStats, String> {
        let mut server = crate::server::EchoServer::new(dp, self.0)?;
        eprintln!("[server] ready: {} on {bind} ({what})", self.0.mode);
        server.run(stop, report, crate::server::IDLE_SPINS, &mut |_| {
            std::thread::yield_now()
        });
        Ok(server.stats())
    }
}

/// Runs the echo server on `nic` at `bind` until `stop` is set.
pub fn serve(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    cfg: ServerConfig,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    serve_app(nic, bind, mtu, Echo(cfg), stop, report)
}

/// Opens `nic` at `bind` and runs `app` on it until `stop` is set.
pub fn serve_app<A: NicApp>(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    app: A,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    match nic {
        NicSpec::Mlx5 { device } => mlx5(device, bind, mtu, app, stop, report),
        NicSpec::Ice { dpdk_args } => ice(dpdk_args, bind, mtu, app, stop, report),
    }
}

#[cfg(feature = "mlx5")]
fn mlx5<A: NicApp>(
    device: &str,
    bind: SocketAddrV4,
    mtu: usize,
    app: A,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let dp = datapath_mlx5::hw::open_server(device, bind, mtu, 0, app.extra_bytes())?;
    app.serve(dp, bind, &format!("ConnectX {device}"), stop, report)
}

#[cfg(not(feature = "mlx5"))]
fn mlx5<A: NicApp>(
    _device: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _app: A,
    _stop: &AtomicBool,
    _report: Option<Duration>,
) -> Result<ServerStats, String> {
    Err(NO_MLX5.to_owned())
}

#[cfg(not(feature = "mlx5"))]
const NO_MLX5: &str = "--datapath mlx5 needs the `mlx5` feature (rdma-core: apt-get install -y $(cat datapath-mlx5/APT_PACKAGES)): \
         cargo run --release -p echo --features mlx5 -- server ...";

#[cfg(feature = "ice")]
fn ice<A: NicApp>(
    dpdk_args: &str,
    bind: SocketAddrV4,
    mtu: usize,
    app: A,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let dp = datapath_ice::datapath::open(dpdk_args, bind, mtu)
        .map_err(|e| format!("starting DPDK with {dpdk_args:?}: {e}"))?;
    app.serve(dp, bind, &format!("DPDK: {dpdk_args}"), stop, report)
}

#[cfg(not(feature = "ice"))]
fn ice<A: NicApp>(
    _dpdk_args: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _app: A,
    _stop: &AtomicBool,
    _report: Option<Duration>,
) -> Result<ServerStats, String> {
    Err(NO_ICE.to_owned())
}

#[cfg(not(feature = "ice"))]
const NO_ICE: &str = "--datapath ice needs the `ice` feature (DPDK: apt-get install -y $(cat datapath-ice/APT_PACKAGES)): \
         cargo run --release -p echo --features ice -- server ...";

/// `echo server --datapath mlx5 | ice --cores N`: N pinned share-nothing cores on one port of
/// `nic`, core *i* with its own queue set (mlx5: QP, CQs, memory and one `ibv_create_flow`
/// rule; ice: RX/TX queue pair, memory and pools, one `rte_flow` rule) answering at `bind`'s
/// port plus *i* (`docs/cores.md`). Runs until `stop`, prints each core's counters and
/// returns their sum.
pub fn serve_cores(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    cfg: ServerConfig,
    cores: usize,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let cc = percore::CoresConfig::new(&format!("echo-server-{}", cfg.mode), cores);
    let running = match nic {
        NicSpec::Mlx5 { device } => mlx5_cores(device, bind, mtu, cfg, &cc, report)?,
        NicSpec::Ice { dpdk_args } => ice_cores(dpdk_args, bind, mtu, cfg, &cc, report)?,
    };
    for (i, (addr, what)) in running.ready().iter().enumerate() {
        eprintln!(
            "[server] ready: {} on {addr} ({what}, core {i} of {cores})",
            cfg.mode
        );
    }
    let per_core = running.serve_until(stop, "[server]")?;
    Ok(ServerStats::sum(&per_core))
}

/// Running NIC server cores: each reported its address and a description of its queue.
type NicCores = percore::Cores<percore::QueueInfo, ServerStats>;

/// One core's server on its own datapath `dp` (opened on this core's thread by the NIC
/// crate's spawner): says it is ready with `info`, then polls until stopped (a NIC has no file
/// descriptor to sleep on: an idle core yields).
#[cfg(any(feature = "mlx5", feature = "ice"))]
fn serve_core<D: Datapath>(
    dp: D,
    cfg: ServerConfig,
    core: &percore::Core,
    ready: percore::Ready<percore::QueueInfo>,
    info: percore::QueueInfo,
    report: Option<Duration>,
) -> Result<ServerStats, String> {
    let mut server = crate::server::EchoServer::new(dp, cfg)?;
    ready.ready(info);
    percore::poll_loop(
        &mut server,
        core.stop(),
        report,
        crate::server::IDLE_SPINS,
        &mut |_| std::thread::yield_now(),
    );
    Ok(server.stats())
}

#[cfg(feature = "mlx5")]
fn mlx5_cores(
    device: &str,
    bind: SocketAddrV4,
    mtu: usize,
    cfg: ServerConfig,
    cc: &percore::CoresConfig,
    report: Option<Duration>,
) -> Result<NicCores, String> {
    datapath_mlx5::hw::spawn_server_cores(
        device,
        bind,
        mtu,
        0,
        0,
        cc,
        move |dp, core, ready, info| serve_core(dp, cfg, core, ready, info, report),
    )
}

#[cfg(not(feature = "mlx5"))]
fn mlx5_cores(
    _device: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _cfg: ServerConfig,
    _cc: &percore::CoresConfig,
    _report: Option<Duration>,
) -> Result<NicCores, String> {
    Err(NO_MLX5.to_owned())
}

#[cfg(feature = "ice")]
fn ice_cores(
    dpdk_args: &str,
    bind: SocketAddrV4,
    mtu: usize,
    cfg: ServerConfig,
    cc: &percore::CoresConfig,
    report: Option<Duration>,
) -> Result<NicCores, String> {
    let (running, steering) = datapath_ice::datapath::spawn_cores(
        dpdk_args,
        bind,
        mtu,
        cc,
        move |dp, core, ready, info| serve_core(dp, cfg, core, ready, info, report),
    )?;
    eprintln!("[server] DPDK steering: {steering:?}");
    Ok(running)
}

#[cfg(not(feature = "ice"))]
fn ice_cores(
    _dpdk_args: &str,
    _bind: SocketAddrV4,
    _mtu: usize,
    _cfg: ServerConfig,
    _cc: &percore::CoresConfig,
    _report: Option<Duration>,
) -> Result<NicCores, String> {
    Err(NO_ICE.to_owned())
}
