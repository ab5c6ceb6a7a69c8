//! `echo client --datapath xdp | mlx5 | ice`: the load generator's client cores on a
//! kernel-bypass datapath. Each of `--threads N` client cores opens its own queue once
//! (`app_server::spawn_on_cores`: core *i* at the `--bind` address, port plus *i*), connects to
//! every server core, waits for ARP, and runs its part of every load point as a member of a
//! [`loadgen::Crew`] with a fresh [`EchoClient`] over the same datapath.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use app_server::{CargoRun, DatapathSpec, Launch, OnCore};
use bench_client::Members;
use cornflakes::Datapath;
use datapath_socket::SocketConfig;
use loadgen::{sweep, Crew, Record, RunConfig, Schedule};
use percore::QueueInfo;

use crate::bench::SweepPlan;
use crate::client::{EchoClient, Verifier};
use crate::mode::Mode;
use crate::shape::ShapeSpec;

/// How long a client core waits for the server's ARP answer before it gives up.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How to build `echo` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "echo",
    bin: None,
    args: "client ...",
};

/// One client core's work: connect, resolve, then each point of the sweep.
struct EchoCore {
    servers: Vec<SocketAddrV4>,
    mode: Mode,
    shape: ShapeSpec,
    members: Members,
}

impl OnCore for EchoCore {
    type Out = ();

    fn run<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<QueueInfo>,
        info: QueueInfo,
    ) -> Result<(), String> {
        let i = core.index();
        let (mode, shape) = (self.mode, self.shape);
        bench_client::client_core(
            dp,
            &self.servers,
            self.members.take(i)?,
            RESOLVE_TIMEOUT,
            || ready.ready(info),
            |d, conns| EchoClient::with_conns(d, conns.to_vec(), i, mode, shape),
            EchoClient::into_datapath,
        )
    }
}

/// Sweeps the offered loads of `plan` from `plan.threads` client cores on `spec`, core *i* at
/// `bind`'s port plus *i*; one record per point, as [`crate::bench::sweep_mode`].
pub fn sweep_mode(
    plan: &SweepPlan,
    spec: &DatapathSpec,
    bind: SocketAddrV4,
) -> Result<Vec<Record>, String> {
    let verifier = Arc::new(Verifier::new(plan.mode, plan.shape)?);
    let threads = plan.threads.max(1);
    let (crew, members) = Crew::new(threads);
    let mut sc = SocketConfig::new(bind);
    sc.mtu = plan.mtu;
    let mut l = Launch::new(spec.clone(), sc, plan.mode.name(), CARGO_RUN);
    l.cores = threads;
    l.name = format!("echo-client-{}", plan.mode);
    let body = EchoCore {
        servers: std::iter::once(plan.server)
            .chain(plan.other_cores.iter().copied())
            .collect(),
        mode: plan.mode,
        shape: plan.shape,
        members: Members::new(members),
    };
    let cores = app_server::spawn_on_cores(&l, body)?;
    for (i, (addr, what)) in cores.ready().iter().enumerate() {
        eprintln!("[client] core {i} ready at {addr} ({what})");
    }
    let run_cfg = RunConfig::quiet(plan.warmup, plan.timeout, plan.busy_poll);
    let mut seed = 1u64;
    let records = sweep(&plan.sweep_config(), |rate| {
        seed += 1;
        let schedule = Schedule::poisson_point(rate, plan.warmup, plan.duration, threads, seed)?;
        let v = verifier.clone();
        crew.run(
            schedule,
            &run_cfg,
            Arc::new(move |id: u64, p: &[u8]| v.check(id, p)),
        )
        .map_err(|e| format!("{} at {rate} req/s: {e}", plan.mode))
    });
    drop(crew);
    let joined = cores.join();
    let records = records?;
    joined?;
    Ok(records)
}
