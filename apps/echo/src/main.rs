//! `echo bench | server | client`: the echo benchmark of the Cornflakes paper (§6.1).

#![forbid(unsafe_code)]

use loadgen::args::Args;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use app_server::{CargoRun, Launch, Transport};
use datapath_socket::SocketConfig;
use echo::bench::{self, BenchConfig, DatapathKind, SweepPlan, DEFAULT_MTU};
use echo::calib_server::Calib;
use echo::calibrate::{self, CalibConfig};
use echo::server::{Echo, ServerConfig};
use echo::{Mode, ShapeSpec};

const USAGE: &str = "\
usage:
  echo bench  [--modes M,M,..] [--shape S] [--rates R,R,..] [--fixed-rps R] [--duration SECS]
              [--warmup SECS] [--timeout-ms MS] [--threads N] [--threshold N] [--mtu N]
              [--out DIR] [--json PATH] [--all-points] [--spin] [--datapath emu|socket|tcp|xdp] [--conns N]
              [--sample-every N] [--desc-ns NS] [--rx-ring N] [--demote-lines N] [--trials K] [--resolution F] [--cores N]
      Every mode (or --modes), one offered-load sweep each; prints the comparison table and
      writes DIR/echo.json (or --json), DIR/echo.svg, DIR/echo.png and DIR/table.md
      (DIR defaults to results/echo).
      --datapath emu (the default with at least 2 CPUs): the server core's throughput, not a
      network measurement. Each mode's server runs the ConnectX driver on one CPU against
      the emulated ConnectX on a second CPU, which also injects the clients' prepared
      requests at Poisson times and checks every reply (reads every byte; headers, length,
      id; the payload against the last reply the mode's checker accepted for the request, and
      a random 1 in --sample-every, default 64, deserialized again). --desc-ns NS: the
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
              [--cores N] [--until-stdin-closes] [--datapath socket|xdp --ifname IF [--peer IP=MAC]]
              [--datapath mlx5 --mlx5-dev DEV] [--datapath ice --dpdk-args ARGS]
      Serves until killed (or for SECS, or until stdin closes), printing its counters every
      second on stderr. --cores N (every datapath): N share-nothing cores pinned one per CPU,
      core i on PORT+i (xdp: on queue i of IF, which needs N queues and a NIC steering each
      port to its queue; mlx5/ice: its own queue set and one flow rule for its port);
      per-core and summed counters at the end (docs/cores.md). With --datapath xdp (feature `xdp`, root) over AF_XDP on IF; with
      mlx5 (feature `mlx5`) on a ConnectX device (RDMA name or PCI address); with ice
      (feature `ice`) on the DPDK port the EAL arguments name (e.g. '-l 2 -a 0000:3b:00.0').
  echo client --server IP:PORT --mode M [--shape S] [--rates R,..] [--duration SECS]
              [--warmup SECS] [--timeout-ms MS] [--threads N] [--mtu N] [--bind IP]
              [--out DIR] [--json PATH] [--spin] [--cores N]
      Sweeps the offered loads against a running `echo server` of the same mode. --cores N:
      the server runs N cores on PORT..PORT+N-1; requests are spread round-robin over them.
  echo calibrate [--sizes S,S,..] [--counts K,K,..] [--array-mib MIB] [--rates R,R,..]
              [--trials K] [--resolution F] [--all-points]
              [--duration SECS] [--warmup SECS] [--timeout-ms MS] [--threads N] [--mtu N]
              [--out DIR] [--spin] [--datapath socket|xdp|emu]
              [--server IP:PORT [--bind IP] [--max-segments N] [--max-reply BYTES]]
      The copy-threshold calibration (paper §5, docs/calibration.md): per segment size S
      and count K, copy vs scatter-gather of K random S-byte segments of a pinned array
      (default 10 x the last-level cache). Each policy's saturation load is searched as
      `bench` does, copy and sg interleaved trial by trial: a doubling grid of --rates
      (default from 10 k req/s; emu 200 k) until the median of up to --trials K trials
      (default 3) misses 95 % of offered, then bisection to --resolution F (default 0.1).
      A cell has a winner only when the two policies' trial spreads do not overlap, and
      the recommended threshold rests only on such cells. Writes
      DIR/calibration.json, DIR/heatmap.svg, DIR/heatmap.png (DIR defaults to
      results/calibrate) and prints the recommended threshold; run a program with
      CORNFLAKES_CALIBRATION=DIR/calibration.json to use it. With --server, only the
      clients run here, against a `calibrate-server` elsewhere (e.g. on a NIC) started with
      the same --array-mib (its --array-bytes); --cores N there: the server runs N cores
      on PORT..PORT+N-1, each with 1/N of the array, requests spread round-robin.
  echo calibrate-server --array-bytes N [--bind IP:PORT] [--mtu N] [--seconds SECS]
              [--until-stdin-closes] [--datapath socket|xdp --ifname IF [--peer IP=MAC]]
              [--datapath mlx5 --mlx5-dev DEV] [--datapath ice --dpdk-args ARGS] [--cores N]
      The calibration's server alone (what `calibrate --datapath xdp` runs in its namespace;
      on a NIC machine, what `calibrate --server` on a client machine measures). --cores N
      (socket datapath): N pinned cores on PORT+i, the array sharded across them (the
      paper's Figure 13 setup; docs/cores.md).

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

/// Runs `body` until `--seconds` pass or, with `--until-stdin-closes`, standard input closes
/// (how a parent, e.g. the AF_XDP bench, stops a child server); `body` gets the stop flag.
fn serve_until<T>(
    seconds: Option<Duration>,
    until_stdin_closes: bool,
    body: impl FnOnce(&AtomicBool) -> Result<T, String>,
) -> Result<T, String> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &stop;
        if let Some(d) = seconds {
            s.spawn(move || {
                std::thread::sleep(d);
                stop.store(true, Ordering::Relaxed);
            });
        }
        if until_stdin_closes {
            s.spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                stop.store(true, Ordering::Relaxed);
            });
        }
        let r = body(stop);
        // Let the helper threads end too.
        stop.store(true, Ordering::Relaxed);
        r
    })
}

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
        tcp_conns: None,
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

fn calibrate_cmd(mut a: Args) -> Result<(), String> {
    let datapath = match a.take("--datapath")?.as_deref() {
        None | Some("socket") => DatapathKind::Socket,
        Some("xdp") => DatapathKind::Xdp,
        Some("emu") => DatapathKind::Emu,
        Some(nic @ ("mlx5" | "ice")) => return Err(calibrate::unsupported_datapath(nic)),
        Some(other) => return Err(format!("unknown datapath {other:?} (socket, xdp or emu)")),
    };
    let mut cfg = CalibConfig::for_datapath(datapath);
    if let Some(s) = a.list::<usize>("--sizes")? {
        cfg.sizes = s;
    }
    if let Some(k) = a.list::<usize>("--counts")? {
        cfg.counts = k;
    }
    if let Some(m) = a.parse::<f64>("--array-mib")? {
        if !(m > 0.0 && m.is_finite()) {
            return Err(format!("--array-mib {m}: must be positive"));
        }
        cfg.array_bytes = Some((m * f64::from(1u32 << 20)) as usize);
    }
    if let Some(r) = a.list::<f64>("--rates")? {
        cfg.rates = r;
    }
    if let Some(k) = a.parse::<usize>("--trials")? {
        cfg.trials = k;
    }
    if let Some(r) = a.parse::<f64>("--resolution")? {
        cfg.resolution = r;
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
    if let Some(m) = a.parse::<usize>("--mtu")? {
        cfg.mtu = m;
    }
    if let Some(o) = a.take("--out")? {
        cfg.out_dir = PathBuf::from(o);
    }
    if a.switch("--spin") {
        cfg.spin = true;
    }
    if a.switch("--all-points") {
        cfg.whole_grid = true;
    }
    if let Some(server) = a.parse::<SocketAddrV4>("--server")? {
        cfg.remote = Some(calibrate::Remote {
            server,
            bind: a.parse("--bind")?.unwrap_or(Ipv4Addr::UNSPECIFIED),
            max_segments: a
                .parse("--max-segments")?
                .unwrap_or(calibrate::REMOTE_MAX_SEGMENTS),
            max_reply: a
                .parse("--max-reply")?
                .unwrap_or(calibrate::SOCKET_MAX_ITEM),
            cores: a.parse::<usize>("--cores")?.unwrap_or(1).max(1),
        });
    }
    a.finish()?;
    let out = calibrate::run_calibration(&cfg)?;
    let bad: u64 = out.records.iter().map(|r| r.mismatched).sum();
    if bad > 0 {
        return Err(format!("{bad} responses did not verify"));
    }
    Ok(())
}

fn calibrate_server_cmd(mut a: Args) -> Result<(), String> {
    let array_bytes: usize = a
        .parse("--array-bytes")?
        .ok_or("--array-bytes is required")?;
    let bind = a
        .parse::<SocketAddrV4>("--bind")?
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7000));
    let mtu_arg: Option<usize> = a.parse("--mtu")?;
    let until_stdin_closes = a.switch("--until-stdin-closes");
    let mut transport = Transport::from_args(&mut a)?;
    let seconds = a.secs("--seconds")?;
    let cores = a.parse::<usize>("--cores")?.unwrap_or(1);
    a.finish()?;
    // Each core holds its own 1/N shard of the array (the paper's Figure 13 setup).
    let shard = array_bytes / cores.max(1);
    if let Transport::Xdp(x) = &mut transport {
        x.mtu = mtu_arg;
        // The array lives in the UMEM, so zero-copy segments are in registered memory.
        x.umem_bytes = Some(shard + (64 << 20));
    }
    let mut sock = socket_config(bind, mtu_arg.unwrap_or(DEFAULT_MTU));
    sock.memory.max_item_size = calibrate::SOCKET_MAX_ITEM;
    sock.memory.max_bytes = shard + (256 << 20);
    let mut l = Launch::new(transport, sock, "calibrate", CARGO_RUN);
    l.cores = cores;
    l.name = "calibrate-server".to_owned();
    l.extra_bytes = shard;
    let stats = serve_until(seconds, until_stdin_closes, |stop| {
        app_server::launch(
            &l,
            move |mem, core| {
                let calib = Calib::new(mem, shard)?;
                eprintln!(
                    "[server] calibrate core {}: {} array items ({} MiB)",
                    core.index,
                    calib.items(),
                    shard >> 20
                );
                Ok(calib)
            },
            stop,
        )
    })?;
    eprintln!("[server] calibrate done: {stats}");
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
            ("calibrate", calibrate_cmd),
            ("calibrate-server", calibrate_server_cmd),
        ],
        std::env::args().skip(1).collect(),
    )
}
