//! `echo server --datapath mlx5 | ice`: the echo server on a kernel-bypass NIC.
//!
//! Choosing the NIC, opening it (one queue set, or one per core for `--cores N`) and the
//! errors of a build without its feature are `nic_server`'s, shared with the KV server; this
//! module is the echo server as its app. The server loop is the same generic
//! [`EchoServer`](crate::server::EchoServer) as over sockets; a NIC has no file descriptor to
//! sleep on, so an idle server spins and yields.

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::Datapath;
pub use nic_server::NicSpec;
use nic_server::{CargoRun, NicApp, NicCoreApp};

use crate::server::{ServerConfig, ServerStats};

/// How to build `echo` with a NIC feature (the hint of a build without it).
pub const CARGO_RUN: CargoRun = CargoRun {
    package: "echo",
    bin: None,
    args: "server ...",
};

/// The device in a one-core echo or calibration server's ready line: `ConnectX {device}` or
/// `DPDK: {dpdk_args}`.
pub fn device_label(nic: &NicSpec) -> String {
    match nic {
        NicSpec::Mlx5 { .. } => nic.label(),
        NicSpec::Ice { dpdk_args } => format!("DPDK: {dpdk_args}"),
    }
}

/// The echo server on one core, as a [`NicApp`].
struct Echo(ServerConfig);

impl NicApp for Echo {
    type Stats = ServerStats;
    const CARGO_RUN: CargoRun = CARGO_RUN;

    fn serve<D: Datapath>(
        self,
        dp: D,
        nic: &NicSpec,
        bind: SocketAddrV4,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<ServerStats, String> {
        let mut server = crate::server::new(dp, self.0)?;
        let what = device_label(nic);
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
    nic_server::serve(nic, bind, mtu, Echo(cfg), stop, report)
}

/// The echo server on each of N cores, as a [`NicCoreApp`].
struct EchoCores(ServerConfig);

impl NicCoreApp for EchoCores {
    type Stats = ServerStats;
    const CARGO_RUN: CargoRun = CARGO_RUN;

    fn label(&self) -> String {
        self.0.mode.to_string()
    }

    /// One core's echo server on its own datapath `dp`: says it is ready with `info`, then
    /// polls until stopped (a NIC has no file descriptor to sleep on: an idle core yields).
    fn serve_core<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<percore::QueueInfo>,
        info: percore::QueueInfo,
        report: Option<Duration>,
    ) -> Result<ServerStats, String> {
        let mut server = crate::server::new(dp, self.0)?;
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
}

/// `echo server --datapath mlx5 | ice --cores N`: N pinned share-nothing cores on one port of
/// `nic` (`nic_server::serve_cores`, `docs/cores.md`), each running the echo server. Runs
/// until `stop`, prints each core's counters and returns their sum.
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
    nic_server::serve_cores(nic, bind, mtu, &cc, EchoCores(cfg), stop, report)
}
