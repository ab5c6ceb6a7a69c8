//! `kv client --datapath xdp | mlx5 | ice`: the load generator's client cores on a
//! kernel-bypass datapath. Each of `--threads N` client cores opens its own queue once
//! (`app_server::spawn_on_cores`: core *i* at the `--bind` address, port plus *i*), connects to
//! every server core, waits for ARP, and then runs its part of every load point as a member of
//! a [`loadgen::Crew`], with a fresh [`KvClient`] (a new identity, so a late reply of the last
//! point is never taken for this one's) over the same datapath.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use app_server::{CargoRun, DatapathSpec, Launch, OnCore, OnCores};
use bench_client::Members;
use cornflakes::Datapath;
use loadgen::Crew;
use percore::QueueInfo;

use crate::client::{KvClient, RunRequests};
use crate::config::BenchConfig;
use crate::serialization::Serialization;

/// How long a client core waits for the server's ARP answer before it gives up.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How to build `kv` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "kv-store",
    bin: Some("kv"),
    args: "client ...",
};

/// Client cores running on a kernel-bypass datapath, and the crew that hands them load points.
pub struct BypassClients {
    /// Runs a point on every client core.
    pub crew: Crew,
    cores: OnCores<()>,
}

impl BypassClients {
    /// Ends the client cores (after their current point) and closes their datapaths.
    pub fn stop(self) -> Result<(), String> {
        drop(self.crew);
        self.cores.join().map(drop)
    }

    /// What each client core reported when ready: its address and queue.
    pub fn ready(&self) -> &[QueueInfo] {
        self.cores.ready()
    }
}

/// One client core's work: connect, resolve, then each point of the sweep.
struct KvCore {
    servers: Vec<SocketAddrV4>,
    ser: Serialization,
    reqs: Arc<RunRequests>,
    members: Members,
}

impl OnCore for KvCore {
    type Out = ();

    fn run<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<QueueInfo>,
        info: QueueInfo,
    ) -> Result<(), String> {
        let i = core.index();
        let (n, ser) = (self.servers.len(), self.ser);
        bench_client::client_core(
            dp,
            &self.servers,
            self.members.take(i)?,
            RESOLVE_TIMEOUT,
            || ready.ready(info),
            |d, conns| KvClient::with_conns(d, conns.to_vec(), n, i, ser, self.reqs.clone()),
            KvClient::into_datapath,
        )
    }
}

/// Starts `cfg.threads` client cores on `spec` at `bind` (core *i* at its port plus *i*),
/// each connected to the server cores at `servers` and speaking `ser`; returns once every one
/// is ready (resolved), printing their ready lines.
pub fn spawn(
    cfg: &BenchConfig,
    spec: &DatapathSpec,
    bind: SocketAddrV4,
    servers: &[SocketAddrV4],
    ser: Serialization,
    reqs: &Arc<RunRequests>,
) -> Result<BypassClients, String> {
    let threads = cfg.threads.max(1);
    let (crew, members) = Crew::new(threads);
    let mut l = Launch::new(spec.clone(), cfg.socket(bind), ser.name(), CARGO_RUN);
    l.cores = threads;
    l.name = format!("kv-client-{ser}");
    l.min_item = cfg.max_item;
    let body = KvCore {
        servers: servers.to_vec(),
        ser,
        reqs: reqs.clone(),
        members: Members::new(members),
    };
    let cores = app_server::spawn_on_cores(&l, body)?;
    for (i, (addr, what)) in cores.ready().iter().enumerate() {
        eprintln!("[client] core {i} ready at {addr} ({what})");
    }
    Ok(BypassClients { crew, cores })
}
