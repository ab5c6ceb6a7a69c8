//! Runs a server loop on whichever kernel-bypass NIC was chosen, on one core or N: the NIC
//! arms of [`crate::launch`].
//!
//! `echo server`, `calibrate server` and `kv server` take `--datapath mlx5 --mlx5-dev DEV`
//! or `--datapath ice --dpdk-args ARGS` (a [`DatapathSpec`]). One core's device is opened by
//! `datapath-open`'s opener ([`DatapathSpec::open`]); for `--cores N`, opening, pinning and
//! spawning one queue set per core is the NIC crates' (`datapath_mlx5::hw::spawn_server_cores`,
//! `datapath_ice::spawn::spawn_cores`); this module is the rest: the dispatch to them
//! ([`spawn_on_queues`], which the load generators' client cores use too), the "needs the
//! feature" errors of a build without one, and for N cores the ready lines and the sum of the
//! cores' counters. The launcher brings the server loop, generic over any [`Datapath`], as a
//! [`NicApp`] (one core) or a [`NicCoreApp`] (each of N cores).
//!
//! Each NIC is behind app-server's cargo feature of the same name (`mlx5`: rdma-core, `ice`:
//! DPDK at build time; the NIC at run time), which is `datapath-open`'s. Without it, choosing
//! that NIC is an error that says how to build with it ([`needs_feature`]).

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::Datapath;
use datapath_open::{DatapathSpec, OnDatapath, Open};
use percore::QueueInfo;

use crate::ready::CoreStats;

pub use datapath_open::{needs_feature, CargoRun};

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
        nic: &DatapathSpec,
        bind: SocketAddrV4,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<Self::Stats, String>;
}

/// Opens `nic` as `at` says (its address, IP MTU and memory; the app's memory needs and
/// build hint are the app's) and runs `app` on it until `stop` is set.
pub fn serve<A: NicApp>(
    nic: &DatapathSpec,
    at: &Open,
    app: A,
    stop: &AtomicBool,
    report: Option<Duration>,
) -> Result<A::Stats, String> {
    let mut at = at.clone();
    (at.min_item, at.extra_bytes, at.cargo_run) =
        (app.min_item(), app.extra_bytes(), app.cargo_run());
    let bind = at.bind();
    nic.open(
        &at,
        Serve {
            app,
            bind,
            stop,
            report,
        },
    )
}

/// A [`NicApp`] on the datapath the opener opened.
struct Serve<'s, A> {
    app: A,
    bind: SocketAddrV4,
    stop: &'s AtomicBool,
    report: Option<Duration>,
}

impl<A: NicApp> OnDatapath for Serve<'_, A> {
    type Out = A::Stats;

    fn on<D: Datapath + 'static>(self, dp: D, spec: &DatapathSpec) -> Result<A::Stats, String> {
        self.app.serve(dp, spec, self.bind, self.stop, self.report)
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
    nic: &DatapathSpec,
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
    let mut at = Open::server(bind, app.cargo_run());
    at.socket.mtu = mtu;
    (at.min_item, at.extra_bytes) = (app.min_item(), app.extra_bytes());
    let running = spawn_on_queues(nic, &at, cc, Served { app, report })?;
    crate::ready::serve_until(running, &label, stop, Clone::clone)
}

/// Opens `cc.cores` queue sets of the NIC `spec` names, one per pinned core, as `at` says
/// (core 0's address, core *i* at its port plus *i*; the IP MTU, the spec's else `at`'s; the
/// memory; the build hint), and runs `app` on each core's datapath, on that core's thread
/// (the NIC crates' spawners: `datapath_mlx5::hw::spawn_server_cores`,
/// `datapath_ice::spawn::spawn_cores`). Returns when every core is ready: the one place that
/// chooses the NIC crate for a set of cores, servers' (`at` from [`Open::server`]) and load
/// generators' (from [`Open::client`]) alike.
pub fn spawn_on_queues<A: crate::OnCore>(
    spec: &DatapathSpec,
    at: &Open,
    cc: &percore::CoresConfig,
    app: A,
) -> Result<QueueCores<A::Out>, String> {
    let (bind, mtu) = (at.bind(), spec.mtu_or(at.socket.mtu));
    match spec.kind {
        #[cfg(feature = "mlx5")]
        datapath_open::DatapathKind::Mlx5 => datapath_open::datapath_mlx5::hw::spawn_server_cores(
            &spec.device,
            bind,
            mtu,
            at.min_item,
            at.extra_bytes,
            cc,
            move |dp, core, ready, info| app.run(dp, core, ready, info),
        ),
        #[cfg(feature = "ice")]
        datapath_open::DatapathKind::Ice => {
            let (running, steering) = datapath_open::datapath_ice::spawn::spawn_cores(
                &spec.device,
                bind,
                mtu,
                cc,
                move |dp, core, r, i| app.run(dp, core, r, i),
            )?;
            let role = if at.listen { "server" } else { "client" };
            eprintln!("[{role}] DPDK steering: {steering:?}");
            Ok(running)
        }
        // The NIC whose feature is not built in.
        #[allow(unreachable_patterns)]
        _ => {
            let _ = (bind, mtu, app, cc);
            Err(needs_feature(spec.kind, &at.cargo_run))
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
