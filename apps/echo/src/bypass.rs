//! `echo client --datapath xdp | mlx5 | ice`: the load generator's client cores on a
//! kernel-bypass datapath. Each of `--threads N` client cores opens its own queue once
//! (`app_server::spawn_on_cores`: core *i* at the `--bind` address, port plus *i*), connects to
//! every server core, waits for ARP, and runs its part of every load point as a member of a
//! [`loadgen::Crew`] with a fresh [`EchoClient`] over the same datapath.

use std::io;
use std::net::SocketAddrV4;
use std::sync::Arc;

use app_server::{CargoRun, DatapathSpec, Launch};
use bench_client::{BypassClients, CoreClient};
use cornflakes::{ConnId, Datapath};
use datapath_socket::SocketConfig;
use loadgen::{sweep, Record};

use crate::client::{EchoClient, Verifier};
use crate::mode::Mode;
use crate::plan::SweepPlan;
use crate::shape::ShapeSpec;

/// How to build `echo` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "echo",
    bin: None,
    args: "client ...",
};

/// A client core's [`EchoClient`] for each load point.
struct EchoCore {
    mode: Mode,
    shape: ShapeSpec,
}

impl CoreClient for EchoCore {
    type Transport<D: Datapath> = EchoClient<D>;

    fn client<D: Datapath>(
        &self,
        dp: D,
        conns: &[ConnId],
        core: usize,
    ) -> io::Result<EchoClient<D>> {
        EchoClient::with_conns(dp, conns.to_vec(), core, self.mode, self.shape)
    }

    fn datapath<D: Datapath>(c: EchoClient<D>) -> D {
        c.into_datapath()
    }
}

/// Sweeps the offered loads of `plan` from `plan.load.threads` client cores on `spec`, core *i* at
/// `bind`'s port plus *i*; one record per point, as [`crate::bench::sweep_mode`].
pub fn sweep_mode(
    plan: &SweepPlan,
    spec: &DatapathSpec,
    bind: SocketAddrV4,
) -> Result<Vec<Record>, String> {
    let verifier = Arc::new(Verifier::new(plan.mode, plan.shape)?);
    let mut sc = SocketConfig::new(bind);
    sc.mtu = plan.load.mtu;
    let mut l = Launch::new(spec.clone(), sc, plan.mode.name(), CARGO_RUN);
    l.cores = plan.load.threads.max(1);
    l.name = format!("echo-client-{}", plan.mode);
    let servers: Vec<SocketAddrV4> = std::iter::once(plan.server)
        .chain(plan.other_cores.iter().copied())
        .collect();
    let (mode, shape) = (plan.mode, plan.shape);
    let clients = BypassClients::spawn(&l, &servers, EchoCore { mode, shape })?;
    let run_cfg = plan.load.run_config();
    let mut seed = 1u64;
    let records = sweep(&plan.sweep_config(), |rate| {
        seed += 1;
        let schedule = plan.load.schedule(rate, seed)?;
        let v = verifier.clone();
        clients
            .run(
                schedule,
                &run_cfg,
                Arc::new(move |id: u64, p: &[u8]| v.check(id, p)),
            )
            .map_err(|e| format!("{} at {rate} req/s: {e}", plan.mode))
    });
    let stopped = clients.stop();
    let records = records?;
    stopped?;
    Ok(records)
}
