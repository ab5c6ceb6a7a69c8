//! One serialization's offered-load sweep: a lane (its server cores' addresses, its checker,
//! its clients: kernel sockets or TCP made per point, or kernel-bypass client cores kept for
//! the sweep) and its points; the socket bench interleaves lanes, the AF_XDP bench runs one
//! lane per server process, `kv client` one lane against a running server.

use loadgen::canary::Speed;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use datapath_socket::SocketDatapath;
use datapath_tcp::TcpDatapath;
use loadgen::{run, ModePoints, Record, RunReport, SharedChecker};

use bench_client::BypassClients;

use crate::client::{Checker, KvClient, RunRequests};
use crate::config::BenchConfig;
use crate::serialization::Serialization;
use crate::server::ServerHandle;

/// How the bench's local server cores run: one core floats as it always has (it shares the
/// CPUs with the client threads); several are pinned one per CPU.
pub(crate) fn server_cores(ser: Serialization, cores: usize) -> percore::CoresConfig {
    let mut cc = percore::CoresConfig::new(&format!("kv-server-{ser}"), cores.max(1));
    cc.pin = cores > 1;
    cc
}

pub(crate) struct Lane {
    pub(crate) ser: Serialization,
    /// Core *i*'s address.
    pub(crate) addrs: Vec<SocketAddrV4>,
    /// The clients' address (127.0.0.1, or the veth end facing an AF_XDP server).
    pub(crate) bind: Ipv4Addr,
    pub(crate) server: Option<ServerHandle>,
    /// `kv client --datapath xdp | mlx5 | ice`: the client cores, open for the whole sweep.
    pub(crate) clients: Option<BypassClients>,
    pub(crate) checker: Arc<Checker>,
    /// Its points so far.
    pub(crate) sweep: ModePoints,
}

fn run_point(
    cfg: &BenchConfig,
    lane: &Lane,
    reqs: &Arc<RunRequests>,
    rate: f64,
    seed: u64,
) -> Result<RunReport, String> {
    let run_cfg = cfg.load.run_config();
    let schedule = cfg.load.schedule(rate, seed)?;
    if let Some(clients) = &lane.clients {
        let checker = lane.checker.clone();
        let checker: SharedChecker = Arc::new(move |id: u64, p: &[u8]| checker.check(id, p));
        return clients
            .run(schedule, &run_cfg, checker)
            .map_err(|e| format!("{} at {rate} req/s: {e}", lane.ser));
    }
    let (lane_checker, ser, addrs, bind) = (&lane.checker, lane.ser, &lane.addrs, lane.bind);
    let checker = |id: u64, payload: &[u8]| lane_checker.check(id, payload);
    let result = match cfg.tcp_conns {
        None => {
            let make = |thread: usize| {
                let dp = SocketDatapath::new(cfg.socket(SocketAddrV4::new(bind, 0)))
                    .map_err(std::io::Error::other)?;
                KvClient::steered(dp, addrs, thread, ser, reqs.clone())
            };
            run(&schedule, &run_cfg, make, &checker)
        }
        Some(n) => {
            let make = |thread: usize| {
                let mut tc = cfg.tcp.config(None);
                tc.stream.max_message_len = tc
                    .stream
                    .max_message_len
                    .max(cfg.socket(addrs[0]).max_message_len);
                let dp = TcpDatapath::new(tc).map_err(std::io::Error::other)?;
                KvClient::steered_tcp(dp, addrs, n, thread, ser, reqs.clone())
            };
            run(&schedule, &run_cfg, make, &checker)
        }
    };
    result.map_err(|e| format!("{} at {rate} req/s: {e}", lane.ser))
}

/// The clients' address: 127.0.0.1 for the bench's own servers and a loopback `kv server`;
/// any address for another host's (a socket bound to 127.0.0.1 cannot reach it).
pub(crate) fn client_bind(remote: Option<SocketAddrV4>) -> Ipv4Addr {
    match remote {
        Some(r) if !r.ip().is_loopback() => Ipv4Addr::UNSPECIFIED,
        _ => Ipv4Addr::LOCALHOST,
    }
}

/// Runs load point `li` (of `n`, offered `load`) of `lane` unless its sweep has stopped,
/// prints it, and keeps the record ([`loadgen::ModePoints::run_point`]).
pub(crate) fn run_lane_point(
    cfg: &BenchConfig,
    lane: &mut Lane,
    reqs: &Arc<RunRequests>,
    name: &str,
    li: usize,
    n: usize,
    load: f64,
) -> Result<(), String> {
    // The point reads the lane while its sweep records the result.
    let mut sweep = std::mem::take(&mut lane.sweep);
    let r = sweep.run_point(
        cfg.stop_after_misses,
        (lane.ser.name(), name),
        (li, n, load),
        || run_point(cfg, lane, reqs, load, cfg.seed + 1 + li as u64),
    );
    lane.sweep = sweep;
    r
}

/// Sweeps `loads` for one serialization on `lane`, whose server (not the lane's to stop) is
/// already loaded, from its client cores (stopped at the end) or else kernel-socket clients
/// bound to its `bind`: the AF_XDP bench's per-server sweep. Its points keep their speed
/// canaries: the caller re-judges the whole run's together
/// ([`loadgen::canary::rebase_records`]).
#[cfg_attr(not(feature = "xdp"), allow(dead_code))]
pub(crate) fn sweep_one(
    cfg: &BenchConfig,
    mut lane: Lane,
    reqs: &Arc<RunRequests>,
    name: &str,
    loads: &[f64],
) -> Result<Vec<(Record, Option<Speed>)>, String> {
    let run = loads.iter().enumerate().try_for_each(|(li, &load)| {
        run_lane_point(cfg, &mut lane, reqs, name, li, loads.len(), load)
    });
    let stopped = lane.clients.take().map_or(Ok(()), BypassClients::stop);
    run?;
    stopped?;
    Ok(lane.sweep.points)
}
