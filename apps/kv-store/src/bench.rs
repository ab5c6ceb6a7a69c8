//! `kv bench`: one server per serialization (each loaded with the workload's contents) and
//! open-loop client threads over the socket datapath on 127.0.0.1, offered loads interleaved
//! across serializations, every reply verified; then JSON, throughput–p99 plots and tables in
//! the form of the paper's Tables 1, 2, 4 and 5.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use crate::client::Checker;
use crate::server::ServerConfig;
use crate::store::{Store, StoreConfig};

use crate::config::{prepare, Prepared};
pub use crate::config::{
    BenchConfig, BenchOutcome, DatapathKind, DATAPATH_LABEL, DEFAULT_MTU, DEFAULT_RATES, EMU_LABEL,
    EMU_RATES, XDP_LABEL,
};
use crate::load::load_store;
pub use crate::report::tables;
use crate::report::write_outputs;
use crate::sweep::{client_bind, run_lane_point, server_cores, Lane};

#[cfg(feature = "xdp")]
use crate::xdp::run_xdp;

/// Without the `xdp` feature: says how to get it.
#[cfg(not(feature = "xdp"))]
fn run_xdp(_: &BenchConfig, _: &[f64], _: Prepared) -> Result<BenchOutcome, String> {
    Err(
        "--datapath xdp needs the `xdp` feature (clang and libbpf-dev: \
         crates/datapath-xdp/APT_PACKAGES) and root: \
         cargo run --release -p kv-store --features xdp --bin kv -- bench --datapath xdp"
            .to_owned(),
    )
}

/// Runs every serialization of `cfg` (one loaded server each, loads interleaved) and writes
/// JSON, plots and tables.
pub fn run_bench(cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    run_sweeps(cfg, None)
}

/// Sweeps the loads of `cfg` for one serialization against a running `kv server` at
/// `server` (loaded with the same workload), and writes JSON, plots and tables.
pub fn run_client(cfg: &BenchConfig, server: SocketAddrV4) -> Result<BenchOutcome, String> {
    if cfg.serializations.len() != 1 {
        return Err("kv client takes exactly one --serialization, the server's".to_owned());
    }
    run_sweeps(cfg, Some(server))
}

fn run_sweeps(cfg: &BenchConfig, remote: Option<SocketAddrV4>) -> Result<BenchOutcome, String> {
    let loads = cfg.loads();
    if loads.is_empty() {
        return Err("no offered load to run".to_owned());
    }
    if cfg.serializations.is_empty() {
        return Err("no serialization to run".to_owned());
    }
    if cfg.tcp_conns.is_some() && cfg.datapath != DatapathKind::Socket {
        return Err("--datapath tcp runs beside the socket datapath, not emu or xdp".to_owned());
    }
    if cfg.datapath == DatapathKind::Emu {
        if remote.is_some() {
            return Err("kv client runs on the socket datapath".to_owned());
        }
        return crate::emu::run_emu(cfg, &loads);
    }
    if cfg.datapath == DatapathKind::Xdp {
        if cfg.cores != 1 {
            return Err("--cores runs on the socket datapath (docs/cores.md)".to_owned());
        }
        if remote.is_some() {
            return Err("kv client runs on the socket datapath".to_owned());
        }
        if cfg.client_datapath.is_some() {
            app_server::cli::one_veth_client_core(cfg.load.threads)?;
        }
        let out = run_xdp(cfg, &loads, prepare(cfg)?)?;
        write_outputs(cfg, &out)?;
        return Ok(out);
    }
    let Prepared {
        workload,
        stats,
        per_unit,
        expected,
        reqs,
    } = prepare(cfg)?;
    eprintln!(
        "[bench] {} serializations x {} loads, {:?} per point (+{:?} warm-up), {} client thread(s), {}, MTU {}",
        cfg.serializations.len(),
        loads.len(),
        cfg.load.duration,
        cfg.load.warmup,
        cfg.load.threads,
        datapath_label(cfg, remote),
        cfg.load.mtu
    );
    let mut lanes = Vec::new();
    for &ser in &cfg.serializations {
        let wl = cfg.workload.clone();
        let server = match remote {
            Some(_) => None,
            None => Some(crate::server::spawn_cores_on(
                cfg.tcp_conns.map(|_| &cfg.tcp),
                ServerConfig {
                    serialization: ser,
                    threshold: cfg.threshold,
                    store: StoreConfig {
                        memory_limit: cfg.memory_limit,
                        ..StoreConfig::default()
                    },
                },
                cfg.socket(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)),
                &server_cores(ser, cfg.cores),
                Arc::new(move |store: &mut Store, _, _| load_store(&wl, store)),
                None,
                cfg.load.spin,
            )?),
        };
        let addrs: Vec<SocketAddrV4> = match (&server, remote) {
            (Some(s), _) => s.addrs(),
            (None, Some(base)) => (0..cfg.cores.max(1))
                .map(|i| percore::core_addr(base, i))
                .collect::<Result<_, _>>()?,
            (None, None) => unreachable!("remote when no local server"),
        };
        let clients = match (&cfg.client_datapath, remote) {
            (Some(t), Some(_)) => {
                let bind = cfg
                    .client_bind
                    .ok_or("kv client --datapath xdp|mlx5|ice needs --bind IP:PORT, the client cores' address")?;
                Some(crate::bypass::spawn(cfg, t, bind, &addrs, ser, &reqs)?)
            }
            (Some(_), None) => {
                return Err(
                    "kernel-bypass client cores run in kv client, against a running server"
                        .to_owned(),
                )
            }
            (None, _) => None,
        };
        lanes.push(Lane {
            ser,
            addrs,
            bind: client_bind(remote),
            server,
            clients,
            checker: Arc::new(Checker {
                reqs: reqs.clone(),
                expected: expected.clone(),
                ser,
                cores: cfg.cores.max(1),
            }),
            sweep: loadgen::ModePoints::default(),
        });
    }
    let name = workload.name();
    let result = (|| {
        for (li, &load) in loads.iter().enumerate() {
            for lane in lanes.iter_mut() {
                run_lane_point(cfg, lane, &reqs, &name, li, loads.len(), load)?;
            }
        }
        Ok::<(), String>(())
    })();
    let mut out = BenchOutcome {
        workload: name,
        stats: Some(stats),
        requests_per_unit: per_unit,
        datapath: datapath_label(cfg, remote),
        ..BenchOutcome::default()
    };
    let mut points = Vec::new();
    for lane in lanes {
        if let Some(clients) = lane.clients {
            clients.stop()?;
        }
        if let Some(server) = lane.server {
            let st = server.stop().map_err(|e| e.to_string())?;
            eprintln!("[bench] {} server: {st}", lane.ser);
            out.servers.push((lane.ser, st));
        }
        points.extend(lane.sweep.points);
    }
    result?;
    // The tables and JSON judge every point's speed canary against the whole run's readings,
    // not the first one the progress lines had.
    loadgen::canary::rebase_records(&mut points);
    out.records = points.into_iter().map(|(r, _)| r).collect();
    write_outputs(cfg, &out)?;
    Ok(out)
}

/// How the run's datapath is reported: the kernel sockets' label, or the client cores'
/// kernel-bypass datapath and the server's address.
fn datapath_label(cfg: &BenchConfig, remote: Option<SocketAddrV4>) -> String {
    match (&cfg.client_datapath, remote) {
        (Some(t), Some(addr)) => format!(
            "{} client core(s) on {} to the server at {addr} (this process the client)",
            cfg.load.threads.max(1),
            t.label()
        ),
        _ => cfg.socket_label(remote),
    }
}
