//! The benchmark: for each mode, a server thread and load-generator client thread(s) over the
//! socket datapath on 127.0.0.1, an offered-load sweep, then a table, JSON and a plot.

use std::net::{Ipv4Addr, SocketAddrV4};

use datapath_socket::{SocketConfig, SocketDatapath};
use datapath_tcp::TcpDatapath;
use loadgen::args::LoadConfig;
use loadgen::{run, sweep, ModePoints, Record, RunReport};

use crate::client::{EchoClient, Verifier};
pub use crate::config::{BenchConfig, BenchOutcome, DatapathKind, DEFAULT_MTU, DEFAULT_RATES};
pub use crate::plan::SweepPlan;
pub use crate::report::table;
use crate::report::write_outputs;
use crate::server::ServerConfig;

/// Runs one offered load of `plan` against its server (a fresh client socket per thread).
pub fn run_point(
    plan: &SweepPlan,
    verifier: &Verifier,
    rate: f64,
    seed: u64,
) -> Result<RunReport, String> {
    let checker = |id: u64, payload: &[u8]| verifier.check(id, payload);
    let run_cfg = plan.load.run_config();
    let schedule = plan.load.schedule(rate, seed)?;
    let cores: Vec<SocketAddrV4> = std::iter::once(plan.server)
        .chain(plan.other_cores.iter().copied())
        .collect();
    let result = match plan.tcp_conns {
        None => {
            let make = |thread: usize| {
                let mut sc = SocketConfig::new(SocketAddrV4::new(plan.bind, 0));
                sc.mtu = plan.load.mtu;
                let dp = SocketDatapath::new(sc).map_err(std::io::Error::other)?;
                EchoClient::spread(dp, &cores, thread, plan.mode, plan.shape)
            };
            run(&schedule, &run_cfg, make, &checker)
        }
        Some(n) => {
            let make = |thread: usize| {
                let dp = TcpDatapath::new(plan.tcp.config(None)).map_err(std::io::Error::other)?;
                EchoClient::over_tcp(dp, &cores, n, thread, plan.mode, plan.shape)
            };
            run(&schedule, &run_cfg, make, &checker)
        }
    };
    result.map_err(|e| format!("{} at {rate} req/s: {e}", plan.mode))
}

/// Sweeps the offered loads of `plan` against its server; one record per point.
pub fn sweep_mode(plan: &SweepPlan) -> Result<Vec<Record>, String> {
    let verifier = Verifier::new(plan.mode, plan.shape)?;
    let mut seed = 1u64;
    sweep(&plan.sweep_config(), |rate| {
        seed += 1;
        run_point(plan, &verifier, rate, seed)
    })
}

/// Runs every mode of `cfg` (one server each, loads interleaved across modes) and writes JSON,
/// plot and table.
pub fn run_bench(cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    if cfg.cores != 1 && !matches!(cfg.datapath, DatapathKind::Socket | DatapathKind::Emu) {
        return Err(format!(
            "--cores {} runs on the socket and emu datapaths, not {} (docs/cores.md)",
            cfg.cores,
            crate::config::datapath_label(cfg.datapath)
        ));
    }
    if cfg.tcp_conns.is_some() && cfg.datapath != DatapathKind::Socket {
        return Err(format!(
            "TCP runs on the kernel, not on the {}",
            crate::config::datapath_label(cfg.datapath)
        ));
    }
    if cfg.datapath == DatapathKind::Xdp {
        return run_bench_xdp(cfg);
    }
    if cfg.datapath == DatapathKind::Emu {
        let (mut out, emu) = crate::emu::run_bench_emu(cfg)?;
        out.emu = Some(emu);
        write_outputs(cfg, &out)?;
        return Ok(out);
    }
    let mut out = BenchOutcome::default();
    let loads = cfg.loads();
    if loads.is_empty() {
        return Err("no offered load to run".to_owned());
    }
    let runnable = &cfg.modes;
    eprintln!(
        "[bench] {} modes x {} loads, shape {}, {:?} per point (+{:?} warm-up), {} client thread(s), {}{}, MTU {}",
        runnable.len(),
        loads.len(),
        cfg.shape,
        cfg.load.duration,
        cfg.load.warmup,
        cfg.load.threads,
        cfg.datapath_label(),
        match cfg.tcp_conns {
            Some(n) => format!(" ({n} connection(s) per thread per server core)"),
            None => String::new(),
        },
        cfg.load.mtu
    );
    // One server per mode, all started up front; idle servers sleep on their sockets. Each
    // load is then run for every mode in turn (not mode after mode), so a burst of
    // background load on this shared machine hits all modes alike rather than one.
    let mut servers = Vec::with_capacity(runnable.len());
    for &mode in runnable {
        let mut sc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        sc.mtu = cfg.load.mtu;
        let mut cores = percore::CoresConfig::new(&format!("echo-server-{mode}"), cfg.cores);
        // One core floats, as it always has; several are pinned one per CPU.
        cores.pin = cfg.cores > 1;
        let scfg = ServerConfig {
            mode,
            threshold: cfg.threshold,
        };
        let server = match cfg.tcp_conns {
            None => crate::server::spawn_cores(scfg, sc, &cores, None, cfg.load.spin)?,
            Some(_) => {
                crate::server::spawn_cores_tcp(scfg, sc, &cfg.tcp, &cores, None, cfg.load.spin)?
            }
        };
        let plan = SweepPlan {
            other_cores: server.addrs()[1..].to_vec(),
            mode,
            shape: cfg.shape,
            server: server.addr(),
            bind: Ipv4Addr::LOCALHOST,
            load: LoadConfig {
                rates: loads.clone(),
                ..cfg.load.clone()
            },
            stop_after_misses: cfg.stop_after_misses,
            tcp_conns: cfg.tcp_conns,
            tcp: cfg.tcp,
        };
        let verifier = Verifier::new(mode, cfg.shape)?;
        servers.push((server, plan, verifier, ModePoints::default()));
    }
    // Each point's record with the speed canary taken before it, re-judged together once the
    // run is over (`loadgen::canary::rebase_records`).
    let result = (|| {
        for (li, &load) in loads.iter().enumerate() {
            for (_, plan, verifier, sweep) in servers.iter_mut() {
                let shape = cfg.shape.to_string();
                sweep.run_point(
                    cfg.stop_after_misses,
                    (plan.mode.name(), &shape),
                    (li, loads.len(), load),
                    || run_point(plan, verifier, load, 1 + li as u64),
                )?;
            }
        }
        Ok::<(), String>(())
    })();
    let mut points = Vec::new();
    for (server, plan, _, sweep) in servers {
        let stats = server.stop().map_err(|e| e.to_string())?;
        eprintln!("[bench] {} server: {stats}", plan.mode);
        out.servers.push((plan.mode, stats));
        points.extend(sweep.points);
    }
    result?;
    // The tables and JSON judge every point's speed canary against the whole run's readings,
    // not the first one the progress lines had.
    loadgen::canary::rebase_records(&mut points);
    out.records = points.into_iter().map(|(r, _)| r).collect();
    write_outputs(cfg, &out)?;
    Ok(out)
}

/// The AF_XDP variant: a namespace with a veth pair, then per mode a server process in the
/// namespace and a sweep from this side (modes one after another: one XDP program per
/// interface), driven by an AF_XDP client core on this side's end of the veth or, with
/// [`BenchConfig::client_datapath`] `Socket`, by kernel-socket client threads there.
#[cfg(feature = "xdp")]
fn run_bench_xdp(cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    use crate::xdp::{create_netns, ServerProcess, CLIENT_PORT};
    let bypass = cfg.client_datapath != Some(DatapathKind::Socket);
    if bypass {
        app_server::cli::one_veth_client_core(cfg.load.threads)?;
    }
    let mut out = BenchOutcome::default();
    let loads = cfg.loads();
    let runnable = &cfg.modes;
    let ns = create_netns(cfg.load.mtu)?;
    let clients = match bypass {
        true => "an AF_XDP client core".to_owned(),
        false => format!("{} kernel-socket client thread(s)", cfg.load.threads),
    };
    eprintln!(
        "[bench] namespace {} with {} (AF_XDP server, {}) <-> {} ({clients}, {}), MTU {}",
        ns.name, ns.server_if, ns.server_ip, ns.client_if, ns.client_ip, cfg.load.mtu
    );
    // The client core on this side's end, at the interface's MTU (the veth's, `cfg.mtu`).
    let mut spec = app_server::DatapathSpec::new(DatapathKind::Xdp);
    spec.device = ns.client_if.clone();
    let client_at = SocketAddrV4::new(ns.client_ip, CLIENT_PORT);
    for (i, &mode) in runnable.iter().enumerate() {
        let server = ServerProcess::spawn(
            &ns,
            ServerConfig {
                mode,
                threshold: cfg.threshold,
            },
            7000 + i as u16,
        )?;
        eprintln!("[bench] mode {}/{}: {mode}", i + 1, runnable.len());
        let plan = SweepPlan {
            other_cores: Vec::new(),
            mode,
            shape: cfg.shape,
            server: server.addr,
            bind: ns.client_ip,
            load: LoadConfig {
                rates: loads.clone(),
                ..cfg.load.clone()
            },
            stop_after_misses: cfg.stop_after_misses,
            tcp_conns: None,
            tcp: app_server::TcpSpec::default(),
        };
        let records = match bypass {
            true => crate::bypass::sweep_mode(&plan, &spec, client_at),
            false => sweep_mode(&plan),
        };
        let stats = server.stop()?;
        out.records.extend(records?);
        out.servers.push((mode, stats));
    }
    drop(ns);
    write_outputs(cfg, &out)?;
    Ok(out)
}

/// Without the `xdp` feature: says how to get it.
#[cfg(not(feature = "xdp"))]
fn run_bench_xdp(_cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    Err(
        "--datapath xdp needs the `xdp` feature (clang and libbpf-dev: \
         crates/datapath-xdp/APT_PACKAGES) and root: \
         cargo run --release -p echo --features xdp -- bench --datapath xdp"
            .to_owned(),
    )
}
