//! `kv client --datapath xdp | mlx5 | ice` and `kv bench --datapath xdp`'s AF_XDP clients: the
//! load generator's client cores on a kernel-bypass datapath ([`bench_client::BypassClients`]:
//! core *i* at the bind address, port plus *i*, connected to every server core), each running
//! its part of every load point with a fresh [`KvClient`] (a new identity, so a late reply of
//! the last point is never taken for this one's) over the same datapath.

use std::io;
use std::net::SocketAddrV4;
use std::sync::Arc;

use app_server::{CargoRun, DatapathSpec, Launch};
use bench_client::{BypassClients, CoreClient};
use cornflakes::{ConnId, Datapath};

use crate::client::{KvClient, RunRequests};
use crate::config::BenchConfig;
use crate::serialization::Serialization;

/// How to build `kv` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "kv-store",
    bin: Some("kv"),
    args: "client ...",
};

/// A client core's [`KvClient`] for each load point, its keys steered over `servers` cores.
struct KvCore {
    servers: usize,
    ser: Serialization,
    reqs: Arc<RunRequests>,
}

impl CoreClient for KvCore {
    type Transport<D: Datapath> = KvClient<D>;

    fn client<D: Datapath>(&self, dp: D, conns: &[ConnId], core: usize) -> io::Result<KvClient<D>> {
        let (n, ser) = (self.servers, self.ser);
        KvClient::with_conns(dp, conns.to_vec(), n, core, ser, self.reqs.clone())
    }

    fn datapath<D: Datapath>(c: KvClient<D>) -> D {
        c.into_datapath()
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
    let mut l = Launch::new(spec.clone(), cfg.socket(bind), ser.name(), CARGO_RUN);
    l.cores = cfg.load.threads.max(1);
    l.name = format!("kv-client-{ser}");
    l.min_item = cfg.max_item;
    let body = KvCore {
        servers: servers.len(),
        ser,
        reqs: reqs.clone(),
    };
    BypassClients::spawn(&l, servers, body)
}
