//! Runs a server loop on whichever kernel-bypass NIC was chosen, on one core or N: the NIC
//! arms of [`crate::launch`].
//!
//! `echo server`, `calibrate server` and `kv server` take `--datapath mlx5 --mlx5-dev DEV`
//! or `--datapath ice --dpdk-args ARGS` (a [`NicSpec`]). Opening the device, and for `--cores N`
//! opening, pinning and spawning one queue set per core, is the NIC crates'
//! (`datapath_mlx5::hw::open_server` / `spawn_server_cores`, `datapath_ice::datapath::open` /
//! `spawn_cores`); this module is the rest: the choice of NIC, the dispatch to its crate, the
//! "needs the feature" errors of a build without it, and for N cores the ready lines and the
//! sum of the cores' counters. The launcher brings the server loop, generic over any
//! [`Datapath`], as a [`NicApp`] (one core) or a [`NicCoreApp`] (each of N cores).
//!
//! Each NIC is behind app-server's cargo feature of the same name (`mlx5`: rdma-core, `ice`: DPDK at
//! build time; the NIC at run time). Without it, choosing that NIC is an error that says how
//! to build with it ([`needs_feature`]).

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::Datapath;
use percore::QueueInfo;

use crate::ready::CoreStats;

/// Where a NIC server runs.
#[derive(Clone, Debug, PartialEq, Eq)]
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

impl NicSpec {
    /// The `--datapath` value, which is also the cargo feature it needs (`mlx5`, `ice`).
    pub fn feature(&self) -> &'static str {
        match self {
            NicSpec::Mlx5 { .. } => "mlx5",
            NicSpec::Ice { .. } => "ice",
        }
    }

    /// The device for a ready line: `ConnectX {device}` or `DPDK {dpdk_args}`.
    pub fn label(&self) -> String {
        match self {
            NicSpec::Mlx5 { device } => format!("ConnectX {device}"),
            NicSpec::Ice { dpdk_args } => format!("DPDK {dpdk_args}"),
        }
    }
}

/// How to build and run an app with a NIC feature, for the error of a build without it:
/// `cargo run --release -p {package} --features {feature}[ --bin {bin}] -- {args}`.
#[derive(Clone, Copy, Debug)]
pub struct CargoRun {
    /// The app's package (`-p`).
    pub package: &'static str,
    /// Its binary, when the package has one not named after it (`--bin`).
    pub bin: Option<&'static str>,
    /// What follows `--` (e.g. `server ...`).
    pub args: &'static str,
}

impl CargoRun {
    /// The command line that builds and runs the app with `feature`.
    pub fn command(&self, feature: &str) -> String {
        let bin = self.bin.map(|b| format!(" --bin {b}")).unwrap_or_default();
        format!(
            "cargo run --release -p {} --features {feature}{bin} -- {}",
            self.package, self.args
        )
    }
}

/// The error of choosing `nic` in a build without its feature: which feature, the system
/// packages it needs, and `run`'s command line with it.
pub fn needs_feature(nic: &NicSpec, run: &CargoRun) -> String {
    let (f, needs) = match nic {
        NicSpec::Mlx5 { .. } => ("mlx5", "rdma-core"),
        NicSpec::Ice { .. } => ("ice", "DPDK"),
    };
    let pkgs = match nic {
        NicSpec::Mlx5 { .. } => "crates/datapath-mlx5",
        NicSpec::Ice { .. } => "crates/datapath-ice",
    };
    format!(
        "--datapath {f} needs the `{f}` feature ({needs}: apt-get install -y $(cat {pkgs}/APT_PACKAGES)): {}",
        run.command(f)
    )
}

/// An app's server on one NIC queue: `echo server`, `calibrate server`, `kv server`
/// with `--datapath mlx5 | ice` and one core.
pub trait NicApp {
    /// The counters the server returns when stopped.
    type Stats;
    /// How to build the app with a NIC feature (for [`needs_feature`]).
    fn cargo_run(&self) -> CargoRun;

    /// The largest item the server sends from its own pinned memory, so the NIC registers
    /// memory pools for it (`datapath_mlx5::hw::open_server`'s `min_item`; 0: packet
    /// buffers only). Only ConnectX uses it.
    fn min_item(&self) -> usize {
        0
    }

    /// Extra pinned memory the app allocates beyond packet buffers (e.g. the calibration's
    /// array), so the NIC's memory is sized for it. Only ConnectX uses it.
    fn extra_bytes(&self) -> usize {
        0
    }

    /// Serves on `dp`, opened on `nic` at `bind`, until `stop` (reporting every `report`).
    /// Prints its own ready line (`nic` and `bind` are for it).
    fn serve<D: Datapath>(
        self,
        dp: D,
        nic: &NicSpec,
        bind: SocketAddrV4,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<Self::Stats, String>;
}

/// Opens `nic` at `bind` with IP MTU `mtu` and runs `app` on it until `stop` is set.
pub fn serve<A: NicApp>(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    app: A,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<A::Stats, String> {
    match nic {
        #[cfg(feature = "mlx5")]
        NicSpec::Mlx5 { device } => {
            let (min_item, extra) = (app.min_item(), app.extra_bytes());
            let dp = datapath_mlx5::hw::open_server(device, bind, mtu, min_item, extra)?;
            app.serve(dp, nic, bind, stop, report)
        }
        #[cfg(feature = "ice")]
        NicSpec::Ice { dpdk_args } => {
            let dp = datapath_ice::datapath::open(dpdk_args, bind, mtu)
                .map_err(|e| format!("starting DPDK with {dpdk_args:?}: {e}"))?;
            app.serve(dp, nic, bind, stop, report)
        }
        // The NIC whose feature is not built in.
        #[allow(unreachable_patterns)]
        _ => {
            let _ = (bind, mtu, stop, report);
            Err(needs_feature(nic, &app.cargo_run()))
        }
    }
}

/// Running server cores, each with its own device queue: each reported its address and a
/// description of its queue ([`QueueInfo`]).
pub type QueueCores<S> = percore::Cores<QueueInfo, S>;

/// An app's server on each of N cores of one NIC port (`--cores N`): core *i* gets its own
/// queue set, answers at the base port plus *i*, and shares nothing with the others.
pub trait NicCoreApp: Send + Sync + 'static {
    /// The counters each core returns when stopped.
    type Stats: CoreStats;
    /// How to build the app with a NIC feature (for [`needs_feature`]).
    fn cargo_run(&self) -> CargoRun;

    /// What the cores serve, for their ready lines (`[server] ready: {label} on ...`): e.g.
    /// the echo mode or the KV serialization.
    fn label(&self) -> String;

    /// As [`NicApp::min_item`], for each core.
    fn min_item(&self) -> usize {
        0
    }

    /// As [`NicApp::extra_bytes`], for each core.
    fn extra_bytes(&self) -> usize {
        0
    }

    /// Core `core`'s server on its own datapath `dp` (opened on this core's thread by the
    /// NIC crate's spawner): builds its state, calls `ready.ready(info)`, polls until
    /// `core.stop()` (reporting every `report`) and returns its counters.
    fn serve_core<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<QueueInfo>,
        info: QueueInfo,
        report: Option<Duration>,
    ) -> Result<Self::Stats, String>;
}

/// `--cores N` on `nic`: `cc.cores` pinned share-nothing cores on one port, core *i* with its
/// own queue set (mlx5: QP, CQs, memory and one `ibv_create_flow` rule; ice: RX/TX queue
/// pair, memory and pools, one `rte_flow` rule) answering at `bind`'s port plus *i*
/// (`docs/cores.md`), each running `app`'s per-core server. Prints each core's ready line,
/// runs until `stop`, prints each core's counters and returns their sum.
pub fn serve_cores<A: NicCoreApp>(
    nic: &NicSpec,
    bind: SocketAddrV4,
    mtu: usize,
    cc: &percore::CoresConfig,
    app: A,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<A::Stats, String> {
    if cc.cores == 0 {
        return Err("--cores 0: a server needs at least one core".to_owned());
    }
    let label = app.label();
    let queues = Queues {
        bind,
        mtu,
        min_item: app.min_item(),
        extra_bytes: app.extra_bytes(),
        cargo_run: app.cargo_run(),
        role: "server",
    };
    let running = spawn_on_queues(nic, &queues, cc, Served { app, report })?;
    crate::ready::serve_until(running, &label, stop, Clone::clone)
}

/// What every core of [`spawn_on_queues`] opens.
#[derive(Clone, Copy, Debug)]
pub struct Queues {
    /// Core 0's address; core *i* answers at its port plus *i*.
    pub bind: SocketAddrV4,
    /// The IP MTU.
    pub mtu: usize,
    /// As [`NicApp::min_item`].
    pub min_item: usize,
    /// As [`NicApp::extra_bytes`].
    pub extra_bytes: usize,
    /// How to build the app with a NIC feature (for [`needs_feature`]).
    pub cargo_run: CargoRun,
    /// Who the cores are, for what they print (`server`, `client`).
    pub role: &'static str,
}

/// Opens `cc.cores` queue sets on `nic` as [`Queues`] says, one per pinned core (the NIC
/// crates' spawners: `datapath_mlx5::hw::spawn_server_cores`, `datapath_ice::spawn::spawn_cores`),
/// and runs `app` on each core's datapath, on that core's thread. Returns when every core is
/// ready; the one place that chooses the NIC crate for a set of cores, servers' and load
/// generators' alike.
pub fn spawn_on_queues<A: crate::OnCore>(
    nic: &NicSpec,
    q: &Queues,
    cc: &percore::CoresConfig,
    app: A,
) -> Result<QueueCores<A::Out>, String> {
    let Queues {
        bind,
        mtu,
        min_item,
        extra_bytes,
        cargo_run,
        role,
    } = *q;
    match nic {
        #[cfg(feature = "mlx5")]
        NicSpec::Mlx5 { device } => datapath_mlx5::hw::spawn_server_cores(
            device,
            bind,
            mtu,
            min_item,
            extra_bytes,
            cc,
            move |dp, core, ready, info| app.run(dp, core, ready, info),
        ),
        #[cfg(feature = "ice")]
        NicSpec::Ice { dpdk_args } => {
            let (running, steering) = datapath_ice::spawn::spawn_cores(
                dpdk_args,
                bind,
                mtu,
                cc,
                move |dp, core, r, i| app.run(dp, core, r, i),
            )?;
            eprintln!("[{role}] DPDK steering: {steering:?}");
            Ok(running)
        }
        // The NIC whose feature is not built in.
        #[allow(unreachable_patterns)]
        _ => {
            let _ = (bind, mtu, min_item, extra_bytes, role, app, cc);
            Err(needs_feature(nic, &cargo_run))
        }
    }
}

/// A [`NicCoreApp`]'s server on each core, as [`spawn_on_queues`] runs a body.
struct Served<A> {
    app: A,
    report: Option<Duration>,
}

impl<A: NicCoreApp> crate::OnCore for Served<A> {
    type Out = A::Stats;

    fn run<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<QueueInfo>,
        info: QueueInfo,
    ) -> Result<A::Stats, String> {
        self.app.serve_core(dp, core, ready, info, self.report)
    }
}

#[cfg(test)]
mod tests;
