//! `echo bench | server | client`: the echo benchmark of the Cornflakes paper (§6.1).

#![forbid(unsafe_code)]

use loadgen::args::Args;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use app_server::cli::serve_until;
use app_server::{CargoRun, Launch, Transport};
use datapath_socket::SocketConfig;
use echo::bench::{self, BenchConfig, DatapathKind, SweepPlan, DEFAULT_MTU};
use echo::server::{Echo, ServerConfig};
use echo::{Mode, ShapeSpec};

const USAGE: &str = "\
usage:
  echo bench  [--modes M,M,..] [--shape S] [--rates R,R,..] [--fixed-rps R] [--duration SECS]
              [--warmup SECS] [--timeout-ms MS] [--threads N] [--threshold N] [--mtu N]
              [--out DIR] [--json PATH] [--all-points] [--spin] [--datapath emu|socket|tcp|xdp] [--conns N]
              [--sample-every N] [--check-every N] [--desc-ns NS] [--rx-ring N] [--demote-lines N] [--trials K] [--resolution F] [--cores N]
      Every mode (or --modes), one offered-load sweep each; prints the comparison table and
      writes DIR/echo.json (or --json), DIR/echo.svg, DIR/echo.png and DIR/table.md
      (DIR defaults to results/echo).
      --datapath emu (the default with at least 2 CPUs): the server core's throughput, not a
      network measurement. Each mode's server runs the ConnectX driver on one CPU against
      the emulated ConnectX on a second CPU, which also injects the clients' prepared
      requests at Poisson times and checks every reply (reads every byte; headers, length,
      id). Payloads are checked for the first reply to each distinct request, its first in
      the measured window, and a random 1 in --check-every (default 8; 1: every reply):
      hashed against the last reply the mode's checker accepted for the request, and a
      random 1 in --sample-every of those (default 64) deserialized again. Every table
      prints the share checked and whether every distinct request and core was covered. --desc-ns NS: the
      device's time per gather entry (descriptor), printed in every table (default 0: the
      paper's crossover comes from CPU-side costs and its NICs were not the limit, §5.2;
      --delay-ns is the old name). --rx-ring N: receive-queue entries (power of two, default 1024).
      --demote-lines N: after writing a request frame the device moves its first N cache
      lines to the last-level cache (cldemote), where a DDIO NIC's DMA leaves them (default
      0). Each mode's saturation load is searched, the modes interleaved trial by trial: a doubling grid of --rates (default 0.125 to 8 M req/s) until a load's
      median of up to --trials K trials (default 3) misses 95 % of offered, then bisection
      until the bracket is within --resolution F (default 0.05); --all-points runs the whole
      grid first. The table gives per mode the highest load kept up (median), the spread of
      its trials, p99, device utilisation, the 100 GbE line rate of its frames
      (above it a 100 Gbit/s port would be the limit), server time and what bounded it
      (server or device). About 1-2 minutes for all modes. Writes DIR/emu-summary.json (per mode) and
      DIR/emu-points.json (every trial) too. --cores N (default 1): N server
      cores per mode, each its own echo server on its own queue set, requests spread
      round-robin by destination port; the table gives their total and the counters are
      summed. Needs N + 1 CPUs (an error otherwise).
      --datapath socket (the default with 1 CPU): server and client threads over the socket
      datapath on 127.0.0.1. Idle server threads block on the socket and idle client threads
      yield; --spin busy-polls both instead. --cores N: N pinned server cores per mode,
      requests spread round-robin over their ports (docs/cores.md). --datapath tcp: the same
      over kernel TCP (crates/datapath-tcp, docs/tcp.md), each client thread with --conns N
      (default 1) connections to each server core, every reply verified. --datapath xdp (feature `xdp`, root): the
      server runs over AF_XDP in a network namespace the command creates and deletes, one
      mode after another; the clients use kernel sockets on the veth's peer.
  echo server --mode M [--bind IP:PORT] [--threshold N] [--mtu N] [--seconds SECS] [--spin]
              [--cores N] [--until-stdin-closes] [--datapath socket|tcp|xdp --ifname IF [--peer IP=MAC]]
              [--datapath mlx5 --mlx5-dev DEV] [--datapath ice --dpdk-args ARGS]
      Serves until killed (or for SECS, or until stdin closes), printing its counters every
      second on stderr. --cores N (every datapath): N share-nothing cores pinned one per CPU,
      core i on PORT+i (xdp: on queue i of IF, which needs N queues and a NIC steering each
      port to its queue; mlx5/ice: its own queue set and one flow rule for its port);
      per-core and summed counters at the end (docs/cores.md). With --datapath xdp (feature `xdp`, root) over AF_XDP on IF; with
      mlx5 (feature `mlx5`) on a ConnectX device (RDMA name or PCI address); with ice
      (feature `ice`) on the DPDK port the EAL arguments name (e.g. '-l 2 -a 0000:3b:00.0').
      --datapath tcp: kernel TCP (stream frames). Over Demikernel's TCP the same server is
      `demi-server echo --mode M --bind IP:PORT --ifname IF --peer IP=MAC`, a nightly binary
      in demikernel/ run with `ip netns exec` (docs/tcp.md, section The apps over Demikernel).
  echo client --server IP:PORT --mode M [--shape S] [--rates R,..] [--duration SECS]
              [--warmup SECS] [--timeout-ms MS] [--threads N] [--mtu N] [--bind IP]
              [--out DIR] [--json PATH] [--spin] [--cores N] [--datapath socket|tcp [--conns N]]
      Sweeps the offered loads against a running `echo server` of the same mode. --cores N:
      the server runs N cores on PORT..PORT+N-1; requests are spread round-robin over them.
      --datapath tcp: over kernel TCP, --conns N connections (default 1) per server core and
      client thread, against `echo server --datapath tcp` or the same handler over
      Demikernel's TCP (`demi-server echo`, built with nightly in demikernel/; docs/tcp.md).

modes:  raw zero-copy one-copy two-copy cornflakes cornflakes-sg cornflakes-copy
        cornflakes-no-ssend protobuf capnp flatbuffers
shapes: single-N, list-KxN, treeD-N (D = 1..5; N bytes per field); default list-2x2048
";

fn bench_cmd(mut a: Args) -> Result<(), String> {
    let mut cfg = BenchConfig::default();
    let explicit_threshold = a.has("--threshold");
    if !explicit_threshold {
        eprintln!(
            "[bench] hybrid threshold: {}",
            cornflakes::threshold_setting()
        );
    }
    // Without --datapath: the emulated NIC when there are CPUs for the server cores and the
    // device (--cores N needs N + 1), else the kernel sockets.
    let want_cores = a.parse::<usize>("--cores")?;
    if let Some(n) = want_cores {
        if n == 0 {
            return Err("--cores must be at least 1".to_owned());
        }
        cfg.cores = n;
    }
    match a.take("--datapath")?.as_deref() {
        None => match datapath_mlx5::emu::threaded::cores_for(cfg.cores) {
            Ok(_) => cfg.datapath = DatapathKind::Emu,
            Err(e) => eprintln!("[bench] socket datapath: {e}"),
        },
        Some("socket") => {}
        Some("tcp") => cfg.tcp_conns = Some(1),
        Some("xdp") => cfg.datapath = DatapathKind::Xdp,
        Some("emu") => cfg.datapath = DatapathKind::Emu,
        Some(other) => {
            return Err(format!(
                "unknown datapath {other:?} (emu, socket, tcp or xdp)"
            ))
        }
    }
    if let Some(n) = a.parse::<usize>("--conns")? {
        if cfg.tcp_conns.is_none() || n == 0 {
            return Err("--conns N (at least 1) goes with --datapath tcp".to_owned());
        }
        cfg.tcp_conns = Some(n);
    }
    if cfg.datapath == DatapathKind::Emu {
        cfg.rates = echo::emu::EMU_RATES.to_vec();
        cfg.fixed_rps = echo::emu::EMU_RATES[0];
        cfg.duration = echo::emu::EMU_DURATION;
        cfg.warmup = echo::emu::EMU_WARMUP;
        cfg.timeout = echo::emu::EMU_TIMEOUT;
    }
    if let Some(n) = a.parse::<u64>("--sample-every")? {
        cfg.sample_every = n.max(1);
    }
    if let Some(n) = a.parse::<u64>("--check-every")? {
        cfg.check_every = n.max(1);
    }
    if let Some(k) = a.parse::<usize>("--trials")? {
        cfg.trials = k;
    }
    if let Some(r) = a.parse::<f64>("--resolution")? {
        cfg.resolution = r;
    }
    if let Some(n) = a.parse::<usize>("--cores")? {
        if n == 0 {
            return Err("--cores must be at least 1".to_owned());
        }
        cfg.cores = n;
    }
    for flag in ["--desc-ns", "--delay-ns"] {
        if let Some(ns) = a.parse::<u64>(flag)? {
            cfg.delay_per_segment = Duration::from_nanos(ns);
        }
    }
    if let Some(n) = a.parse::<u32>("--rx-ring")? {
        if !n.is_power_of_two() || !(64..=32768).contains(&n) {
            return Err(format!(
                "--rx-ring {n}: the receive queue's entries, a power of two from 64 to 32768"
            ));
        }
        cfg.rx_ring = Some(n);
    }
    if let Some(n) = a.parse::<usize>("--demote-lines")? {
        cfg.demote_lines = n;
    }
    if let Some(m) = a.list::<Mode>("--modes")? {
        cfg.modes = m;
    }
    if let Some(s) = a.parse::<ShapeSpec>("--shape")? {
        cfg.shape = s;
    }
    if let Some(r) = a.list::<f64>("--rates")? {
        cfg.fixed_rps = r.iter().copied().fold(f64::INFINITY, f64::min);
        cfg.rates = r;
    }
    if let Some(f) = a.parse::<f64>("--fixed-rps")? {
        cfg.fixed_rps = f;
    }
    if let Some(d) = a.secs("--duration")? {
        cfg.duration = d;
    }
    if let Some(d) = a.secs("--warmup")? {
        cfg.warmup = d;
    }
    if let Some(ms) = a.parse::<u64>("--timeout-ms")? {
        cfg.timeout = Duration::from_millis(ms);
    }
    if let Some(t) = a.parse::<usize>("--threads")? {
        cfg.threads = t.max(1);
    }
    if let Some(n) = a.parse::<usize>("--cores")? {
        cfg.cores = n;
    }
    if let Some(t) = a.parse::<usize>("--threshold")? {
        cfg.threshold = t;
        eprintln!("[bench] hybrid threshold: {t} B (from --threshold)");
    }
    if let Some(m) = a.parse::<usize>("--mtu")? {
        cfg.mtu = m;
    }
    if let Some(o) = a.take("--out")? {
        cfg.out_dir = PathBuf::from(o);
    }
    if let Some(j) = a.take("--json")? {
        cfg.json = Some(PathBuf::from(j));
    }
    if a.switch("--spin") {
        cfg.spin = true;
    }
    if a.switch("--all-points") {
        cfg.stop_after_misses = 0;
    }
    a.finish()?;
    let out = bench::run_bench(&cfg)?;
    // Every trial of every load (the emulated NIC's search), not only the median ones.
    if let Some(emu) = &out.emu {
        emu_bench::replies_verified(&emu.summaries)?;
    }
    let bad: u64 = out.records.iter().map(|r| r.mismatched).sum();
    if bad > 0 {
        return Err(format!("{bad} responses did not verify"));
    }
    Ok(())
}

fn socket_config(bind: SocketAddrV4, mtu: usize) -> SocketConfig {
    let mut sc = SocketConfig::new(bind);
    sc.mtu = mtu;
    sc
}

/// How to build `echo` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "echo",
    bin: None,
    args: "server ...",
};

fn server_cmd(mut a: Args) -> Result<(), String> {
    let mode: Mode = a.parse("--mode")?.ok_or("--mode is required")?;
    let bind = a
        .parse::<SocketAddrV4>("--bind")?
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7000));
    let threshold = match a.parse("--threshold")? {
        Some(t) => {
            eprintln!("[server] hybrid threshold: {t} B (from --threshold)");
            t
        }
        None => {
            eprintln!(
                "[server] hybrid threshold: {}",
                cornflakes::threshold_setting()
            );
            cornflakes::default_threshold()
        }
    };
    let mtu_arg: Option<usize> = a.parse("--mtu")?;
    let seconds = a.secs("--seconds")?;
    let spin = a.switch("--spin");
    let until_stdin_closes = a.switch("--until-stdin-closes");
    let mut transport = Transport::from_args(&mut a)?;
    let cores = a.parse::<usize>("--cores")?;
    a.finish()?;
    if let Transport::Xdp(x) = &mut transport {
        x.mtu = mtu_arg;
    }
    let cfg = ServerConfig { mode, threshold };
    let sock = socket_config(bind, mtu_arg.unwrap_or(DEFAULT_MTU));
    let mut l = Launch::new(transport, sock, mode.name(), CARGO_RUN);
    l.cores = cores.unwrap_or(1);
    l.spin = spin;
    l.name = format!("echo-server-{mode}");
    let stats = serve_until(seconds, until_stdin_closes, |stop| {
        app_server::launch(&l, move |mem, _| Echo::new(mem, cfg), stop)
    })?;
    eprintln!("[server] {mode} done: {stats}");
    Ok(())
}

fn client_cmd(mut a: Args) -> Result<(), String> {
    let server: SocketAddrV4 = a.parse("--server")?.ok_or("--server is required")?;
    let mode: Mode = a.parse("--mode")?.ok_or("--mode is required")?;
    let d = BenchConfig::default();
    let shape = a.parse("--shape")?.unwrap_or(d.shape);
    let rates = a.list::<f64>("--rates")?.unwrap_or(d.rates);
    let duration = a.secs("--duration")?.unwrap_or(d.duration);
    let warmup = a.secs("--warmup")?.unwrap_or(d.warmup);
    let timeout = a
        .parse("--timeout-ms")?
        .map_or(d.timeout, Duration::from_millis);
    let threads = a.parse::<usize>("--threads")?.unwrap_or(1).max(1);
    let mtu = a.parse("--mtu")?.unwrap_or(DEFAULT_MTU);
    let bind = a.parse("--bind")?.unwrap_or(*server.ip());
    let out = a.take("--out")?.map_or(d.out_dir, PathBuf::from);
    let json = a
        .take("--json")?
        .map_or_else(|| out.join("echo-client.json"), PathBuf::from);
    let busy_poll = a.switch("--spin");
    let cores = a.parse::<usize>("--cores")?.unwrap_or(1).max(1);
    let tcp_conns = app_server::cli::client_transport(&mut a)?;
    a.finish()?;
    let mut loads = rates;
    loads.sort_by(f64::total_cmp);
    let plan = SweepPlan {
        other_cores: (1..cores)
            .map(|i| percore::core_addr(server, i))
            .collect::<Result<_, _>>()?,
        mode,
        shape,
        server,
        bind,
        loads,
        duration,
        warmup,
        timeout,
        threads,
        mtu,
        stop_after_misses: 2,
        busy_poll,
        tcp_conns,
    };
    let records = bench::sweep_mode(&plan)?;
    if let Some(dir) = json.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    loadgen::write_json(&json, &records).map_err(|e| format!("writing {}: {e}", json.display()))?;
    let fixed = plan.loads.first().copied().unwrap_or(0.0);
    print!("{}", bench::table(&records, fixed, &[]));
    eprintln!("[client] wrote {}", json.display());
    Ok(())
}

fn main() -> ExitCode {
    app_server::cli::main(
        "echo",
        USAGE,
        &[
            ("bench", bench_cmd),
            ("server", server_cmd),
            ("client", client_cmd),
        ],
        std::env::args().skip(1).collect(),
    )
}
