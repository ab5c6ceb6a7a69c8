//! `echo bench | server | client`: the echo benchmark of the Cornflakes paper (§6.1).

#![forbid(unsafe_code)]

use cli_args::Args;
use loadgen::args::LoadFlags;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;

use app_server::cli::serve_until;
use app_server::{CargoRun, DatapathSpec, Launch};
use datapath_socket::SocketConfig;
use echo::bench::{self, BenchConfig, DatapathKind, SweepPlan, DEFAULT_MTU};
use echo::server::{Echo, ServerConfig};
use echo::{Mode, ShapeSpec};

const USAGE: &str = "\
usage:
  echo bench  [--modes M,M,..] [--shape S] [--rates R,R,..] [--fixed-rps R] [--duration SECS]
              [--warmup SECS] [--timeout-ms MS] [--threads N] [--threshold N] [--mtu N]
              [--out DIR] [--json PATH] [--all-points] [--spin] [--datapath emu|socket|tcp|xdp] [--conns N]
              [--client-datapath xdp|socket]
              [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]
              [--sample-every N] [--check-every N] [--desc-ns NS] [--rx-ring N] [--demote-lines N] [--slowed-retries N] [--trials K] [--resolution F] [--repeat N] [--cores N]
      Every mode (or --modes), one offered-load sweep each; prints the comparison table and
      writes DIR/echo.json (or --json), DIR/servers.json, DIR/table.md, DIR/echo.png (the
      highest load each mode kept up) and DIR/echo-latency.png (p50 and p99 against offered
      load), with their SVGs (DIR defaults to results/echo).
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
      grid first. A trial whose speed canary read the machine's slow state (over 1.3 x the
      run's readings so far) is rerun up to --slowed-retries N times (default 2; 0: never),
      the runs thrown away counted in the table and JSON (docs/performance.md, \"How trials are
      judged\"). A grid load that missed is decided once more before bisecting. It prints a
      compact table first: per mode the highest load kept up (median), its spread, ÷ raw,
      ÷ the best library, what bounded it (server or device), the server's ns per request
      with the best library's ÷ it, and where the server's time went (receive, handler,
      send, flush and reap, idle); then the ratios against their floors. The search's full
      table (spread, p99, device utilisation, the 100 GbE line rate of its frames, reruns,
      checks) goes to DIR/table.md. About 2 minutes for all modes, one repeat; --repeat N
      runs the whole search N times and prints each ratio as the median of the N with their
      min-max. Writes DIR/emu-summary.json (per mode), DIR/emu-points.json (every trial) and
      DIR/ratios.json too. --cores N (default 1): N server
      cores per mode, each its own echo server on its own queue set, requests spread
      round-robin by destination port; the table gives their total and the counters are
      summed. Needs N + 1 CPUs (an error otherwise).
      --datapath socket (the default with 1 CPU): server and client threads over the socket
      datapath on 127.0.0.1. Idle server threads block on the socket and idle client threads
      yield; --spin busy-polls both instead. --cores N: N pinned server cores per mode,
      requests spread round-robin over their ports (docs/cores.md). --datapath tcp: the same
      over kernel TCP (crates/datapath-tcp, docs/tcp.md), each client thread with --conns N
      (default 1) connections to each server core, every reply verified; --tcp-zc MODE
      (msg-zerocopy, the default; io-uring; off) and --tcp-zc-threshold BYTES (default 16384)
      choose which sends of server and clients are zero-copy: those with a zero-copy field at
      least BYTES long, so the default list-2x2048 shape never is (docs/tcp.md). --datapath xdp (feature `xdp`, root): the
      server runs over AF_XDP in a network namespace the command creates and deletes, one
      mode after another; one AF_XDP client core on the veth's other end drives it (one
      --threads: a veth steers by the sending CPU), or with --client-datapath socket --threads
      N kernel-socket client threads there. The first line and the tables say which.
  echo server --mode M [--bind IP:PORT] [--threshold N] [--mtu N] [--seconds SECS] [--spin]
              [--cores N] [--until-stdin-closes] [--datapath socket|tcp|xdp --ifname IF [--peer IP=MAC]]
              [--datapath mlx5 --mlx5-dev DEV] [--datapath ice --dpdk-args ARGS]
              [--datapath tcp [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]]
      Serves until killed (or for SECS, or until stdin closes), printing its counters every
      second on stderr. --cores N (every datapath): N share-nothing cores pinned one per CPU,
      core i on PORT+i (xdp: on queue i of IF, which needs N queues and a NIC steering each
      port to its queue; mlx5/ice: its own queue set and one flow rule for its port);
      per-core and summed counters at the end (docs/cores.md). With --datapath xdp (feature `xdp`, root) over AF_XDP on IF; with
      mlx5 (feature `mlx5`) on a ConnectX device (RDMA name or PCI address); with ice
      (feature `ice`) on the DPDK port the EAL arguments name (e.g. '-l 2 -a 0000:3b:00.0').
      --datapath tcp: kernel TCP (stream frames); --tcp-zc/--tcp-zc-threshold as for bench
      (the ready line says which sends are zero-copy, the counters what went zero-copy and
      what the kernel copied: zc_sends, zc_bytes, zc_copied_*, copied_*). Over Demikernel's TCP the same server is
      `demi-server echo --mode M --bind IP:PORT --ifname IF --peer IP=MAC`, a nightly binary
      in demikernel/ run with `ip netns exec` (docs/tcp.md, section The apps over Demikernel).
  echo client --server IP:PORT --mode M [--shape S] [--rates R,..] [--duration SECS]
              [--warmup SECS] [--timeout-ms MS] [--threads N] [--mtu N] [--bind IP]
              [--out DIR] [--json PATH] [--spin] [--cores N] [--datapath socket|tcp [--conns N]
              [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]]
              [--datapath xdp --ifname IF [--peer IP=MAC] | mlx5 --mlx5-dev DEV | ice --dpdk-args ARGS
               --bind IP:PORT]
      Sweeps the offered loads against a running `echo server` of the same mode, every reply
      verified; prints the bench's table and writes its JSON, and fails when a reply did not
      verify. --cores N:
      the server runs N cores on PORT..PORT+N-1; requests are spread round-robin over them.
      --datapath tcp: over kernel TCP, --conns N connections (default 1) per server core and
      client thread, against `echo server --datapath tcp` or the same handler over
      Demikernel's TCP (`demi-server echo`, built with nightly in demikernel/; docs/tcp.md).
      --datapath xdp | mlx5 | ice (features `xdp`, `mlx5`, `ice`): --threads N client cores on
      that NIC, core i at --bind's port + i on its own queue, opened once for the sweep; each
      waits for the server's ARP answer (or takes --peer IP=MAC) before the first point; the
      table's first line names them.

modes:  raw zero-copy one-copy two-copy cornflakes cornflakes-sg cornflakes-copy
        cornflakes-no-ssend protobuf capnp flatbuffers
shapes: single-N, list-KxN, treeD-N (D = 1..5; N bytes per field); default list-2x2048
";

fn bench_cmd(mut a: Args) -> Result<(), String> {
    let cfg = bench_config(&mut a)?;
    a.finish()?;
    let out = bench::run_bench(&cfg)?;
    // Every trial of every load (the emulated NIC's search), not only the median ones.
    if let Some(emu) = &out.emu {
        emu_bench::replies_verified(&emu.summaries())?;
    }
    let bad: u64 = out.records.iter().map(|r| r.mismatched).sum();
    if bad > 0 {
        return Err(format!("{bad} responses did not verify"));
    }
    Ok(())
}

/// What `echo bench`'s flags ask for (`a` keeps what it does not know).
fn bench_config(a: &mut Args) -> Result<BenchConfig, String> {
    let mut cfg = BenchConfig::default();
    if let Some(t) = app_server::cli::threshold(a, "[bench]")? {
        cfg.threshold = t;
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
    let cores = cfg.cores;
    let emu_cpus = || {
        emu_bench::cores_for(cores)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let accepts = app_server::cli::BENCH_DATAPATHS;
    let unknown = |o: &str| DatapathKind::unknown(o, &accepts);
    let (spec, conns) = app_server::cli::bench_datapath(a, &accepts, emu_cpus, unknown)?;
    match spec.kind {
        // Kernel TCP is the socket sweep over TCP connections.
        DatapathKind::Tcp => (cfg.tcp_conns, cfg.tcp) = (conns, spec.tcp),
        kind => cfg.datapath = kind,
    }
    cfg.client_datapath = app_server::cli::bench_clients(a, cfg.datapath)?;
    if cfg.datapath == DatapathKind::Emu {
        cfg.load.rates = echo::emu::EMU_RATES.to_vec();
        cfg.fixed_rps = echo::emu::EMU_RATES[0];
        cfg.load.duration = echo::emu::EMU_DURATION;
        cfg.load.warmup = echo::emu::EMU_WARMUP;
        cfg.load.timeout = echo::emu::EMU_TIMEOUT;
    }
    // --delay-ns: the old name of --desc-ns; it wins when both are given (as it did).
    let delay_ns = a.parse::<u64>("--delay-ns")?;
    cfg.device.apply_args(a)?;
    cfg.device.desc_ns = delay_ns.unwrap_or(cfg.device.desc_ns);
    let load = LoadFlags::from_args(a)?;
    load.apply(&mut cfg.load);
    if let Some(r) = &load.rates {
        cfg.fixed_rps = r.iter().copied().fold(f64::INFINITY, f64::min);
    }
    if let Some(n) = a.parse::<u32>("--rx-ring")? {
        if !n.is_power_of_two() || !(64..=32768).contains(&n) {
            return Err(format!(
                "--rx-ring {n}: the receive queue's entries, a power of two from 64 to 32768"
            ));
        }
        cfg.rx_ring = Some(n);
    }
    if let Some(m) = a.list::<Mode>("--modes")? {
        cfg.modes = m;
    }
    if let Some(s) = a.parse::<ShapeSpec>("--shape")? {
        cfg.shape = s;
    }
    if let Some(f) = a.parse::<f64>("--fixed-rps")? {
        cfg.fixed_rps = f;
    }
    if let Some(j) = a.take("--json")? {
        cfg.json = Some(PathBuf::from(j));
    }
    if a.switch("--all-points") {
        cfg.stop_after_misses = 0;
    }
    Ok(cfg)
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
    let threshold = app_server::cli::threshold(&mut a, "[server]")?
        .unwrap_or_else(cornflakes::default_threshold);
    let seconds = a.secs("--seconds")?;
    let spin = a.switch("--spin");
    let until_stdin_closes = a.switch("--until-stdin-closes");
    let spec = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS)?;
    let cores = a.parse::<usize>("--cores")?;
    a.finish()?;
    let cfg = ServerConfig { mode, threshold };
    // AF_XDP takes an explicit --mtu only: without it, the interface's.
    let sock = socket_config(bind, spec.mtu_or(DEFAULT_MTU));
    let mut l = Launch::new(spec, sock, mode.name(), CARGO_RUN);
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
    let (plan, json, bypass) = client_plan(&mut a)?;
    a.finish()?;
    let records = match &bypass {
        Some((t, bind)) => echo::bypass::sweep_mode(&plan, t, *bind)?,
        None => bench::sweep_mode(&plan)?,
    };
    loadgen::save_json(&json, &records)?;
    let fixed = plan.load.rates.first().copied().unwrap_or(0.0);
    // Which kernel-bypass client cores drove the run (kernel sockets: as always, unsaid).
    if let Some((t, _)) = &bypass {
        let n = plan.load.threads.max(1);
        println!(
            "Datapath: {n} client core(s) on {} to the server at {}.\n",
            t.label(),
            plan.server
        );
    }
    print!("{}", bench::table(&records, fixed, &[]));
    eprintln!("[client] wrote {}", json.display());
    // As in the bench: a wrong reply fails the client (after its table and JSON are written).
    let bad: u64 = records.iter().map(|r| r.mismatched + r.malformed).sum();
    if bad > 0 {
        return Err(format!(
            "{bad} replies did not verify (mismatched or malformed; see the table's columns)"
        ));
    }
    Ok(())
}

/// A kernel-bypass client's datapath and client core 0's address.
type Bypass = Option<(DatapathSpec, SocketAddrV4)>;

/// What `echo client`'s flags ask for: the sweep, where its JSON goes and, on kernel bypass,
/// the client cores' datapath and address.
fn client_plan(a: &mut Args) -> Result<(SweepPlan, PathBuf, Bypass), String> {
    // AF_XDP takes an explicit --mtu only (read before the load flags take it).
    let explicit_mtu = a.has("--mtu");
    let server: SocketAddrV4 = a.parse("--server")?.ok_or("--server is required")?;
    let mode: Mode = a.parse("--mode")?.ok_or("--mode is required")?;
    // The bench's defaults: one thread, the jumbo MTU, results/echo.
    let mut d = BenchConfig {
        shape: a.parse("--shape")?.unwrap_or_default(),
        ..BenchConfig::default()
    };
    LoadFlags::from_args(a)?.apply(&mut d.load);
    // `--bind IP`, or `IP:PORT` for kernel-bypass client cores.
    let bind_arg = a.take("--bind")?;
    let bind_port = bind_arg
        .as_deref()
        .and_then(|b| b.parse::<SocketAddrV4>().ok());
    let bind = match (&bind_arg, bind_port) {
        (_, Some(b)) => *b.ip(),
        (Some(b), None) => b
            .parse::<Ipv4Addr>()
            .map_err(|e| format!("--bind {b:?}: {e}"))?,
        (None, None) => *server.ip(),
    };
    let json = a
        .take("--json")?
        .map_or_else(|| d.load.out_dir.join("echo-client.json"), PathBuf::from);
    let cores = a.parse::<usize>("--cores")?.unwrap_or(1).max(1);
    let (tcp_conns, tcp, bypass) = app_server::cli::client_transport(a)?;
    let bypass = match (bypass, bind_port) {
        (Some(mut t), Some(b)) => {
            // The client cores' MTU is an explicit --mtu only: without it AF_XDP takes the
            // interface's, the NICs the load flags' default.
            t.mtu = explicit_mtu.then_some(d.load.mtu);
            Some((t, b))
        }
        (Some(t), None) => {
            return Err(format!(
                "--datapath {} needs --bind IP:PORT, the client cores' address",
                t.name()
            ))
        }
        (None, Some(_)) => {
            return Err(
                "--bind IP:PORT (with a port) goes with --datapath xdp | mlx5 | ice".to_owned(),
            )
        }
        (None, None) => None,
    };
    let mut load = d.load;
    load.rates.sort_by(f64::total_cmp);
    let plan = SweepPlan {
        other_cores: (1..cores)
            .map(|i| percore::core_addr(server, i))
            .collect::<Result<_, _>>()?,
        mode,
        shape: d.shape,
        server,
        bind,
        load,
        stop_after_misses: 2,
        tcp_conns,
        tcp,
    };
    Ok((plan, json, bypass))
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

#[cfg(test)]
mod tests {
    //! What each flag of `echo bench` and `echo client` sets (pinned before the load flags
    //! moved to `loadgen::args`, unchanged after).
    use super::*;
    use loadgen::args::LoadConfig;
    use std::time::Duration;

    #[test]
    fn bench_flags_set_the_config() {
        let mut a = Args::from_line(
            "--datapath socket --modes raw,protobuf --shape single-64 --rates 2000,1000 \
             --duration 0.25 --warmup 0.5 --timeout-ms 30 --threads 4 --threshold 256 \
             --mtu 9000 --out o --json j.json --all-points --spin --sample-every 0 --check-every 3 \
             --desc-ns 7 --rx-ring 256 --demote-lines 2 --slowed-retries 1 --trials 5 --resolution 0.2 --cores 2 \
             --repeat 3",
        );
        let got = bench_config(&mut a).unwrap();
        a.finish().unwrap();
        let want = BenchConfig {
            modes: vec!["raw".parse().unwrap(), "protobuf".parse().unwrap()],
            shape: "single-64".parse().unwrap(),
            load: LoadConfig {
                rates: vec![2000.0, 1000.0],
                duration: Duration::from_millis(250),
                warmup: Duration::from_millis(500),
                timeout: Duration::from_millis(30),
                threads: 4,
                mtu: 9000,
                spin: true,
                out_dir: PathBuf::from("o"),
            },
            fixed_rps: 1000.0,
            threshold: 256,
            json: Some(PathBuf::from("j.json")),
            stop_after_misses: 0,
            device: emu_bench::EmuSettings {
                sample_every: 1,
                check_every: 3,
                desc_ns: 7,
                demote_lines: 2,
                slowed_retries: 1,
                trials: 5,
                resolution: 0.2,
                repeat: 3,
            },
            rx_ring: Some(256),
            cores: 2,
            ..BenchConfig::default()
        };
        assert_eq!(format!("{got:?}"), format!("{want:?}"));

        // Without flags (on sockets): the defaults.
        let mut a = Args::from_line("--datapath socket");
        let got = bench_config(&mut a).unwrap();
        assert_eq!(format!("{got:?}"), format!("{:?}", BenchConfig::default()));
        // --fixed-rps after --rates wins; bad values name the flag.
        let got = bench_config(&mut Args::from_line(
            "--datapath socket --rates 5,6 --fixed-rps 9",
        ))
        .unwrap();
        assert_eq!((got.load.rates, got.fixed_rps), (vec![5.0, 6.0], 9.0));
        // --delay-ns, the old name of --desc-ns, wins when both are given (as it did).
        let got = bench_config(&mut Args::from_line(
            "--datapath socket --desc-ns 3 --delay-ns 9",
        ))
        .unwrap();
        assert_eq!(got.device.desc_ns, 9);
        let got = bench_config(&mut Args::from_line("--datapath socket --threads 0")).unwrap();
        assert_eq!(got.load.threads, 1);
        let e = bench_config(&mut Args::from_line("--datapath socket --threads x")).unwrap_err();
        assert_eq!(e, "--threads \"x\": invalid digit found in string");
        let e = bench_config(&mut Args::from_line("--datapath socket --duration -1")).unwrap_err();
        assert_eq!(e, "--duration -1: not a duration");
    }

    #[test]
    fn client_flags_set_the_plan() {
        let mut a = Args::from_line(
            "--server 10.0.0.1:7000 --mode cornflakes --shape list-2x64 --rates 3000,1000 \
             --duration 2 --warmup 1 --timeout-ms 40 --threads 3 --mtu 1500 --bind 10.0.0.2 \
             --out o --spin --cores 2",
        );
        let (plan, json, bypass) = client_plan(&mut a).unwrap();
        a.finish().unwrap();
        assert_eq!(json, PathBuf::from("o/echo-client.json"));
        assert!(bypass.is_none());
        let server = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
        let want = SweepPlan {
            other_cores: vec![SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7001)],
            mode: "cornflakes".parse().unwrap(),
            shape: "list-2x64".parse().unwrap(),
            server,
            bind: Ipv4Addr::new(10, 0, 0, 2),
            load: LoadConfig {
                rates: vec![1000.0, 3000.0],
                duration: Duration::from_secs(2),
                warmup: Duration::from_secs(1),
                timeout: Duration::from_millis(40),
                threads: 3,
                mtu: 1500,
                spin: true,
                out_dir: PathBuf::from("o"),
            },
            stop_after_misses: 2,
            tcp_conns: None,
            tcp: app_server::TcpSpec::default(),
        };
        assert_eq!(format!("{plan:?}"), format!("{want:?}"));

        // Defaults: the bench's load, one thread, results/echo.
        let (plan, json, _) = client_plan(&mut Args::from_line(
            "--server 10.0.0.1:7000 --mode raw --json x.json",
        ))
        .unwrap();
        let d = BenchConfig::default();
        assert_eq!(json, PathBuf::from("x.json"));
        let mut want = d.load;
        want.rates.sort_by(f64::total_cmp);
        assert_eq!(plan.load, want);
        assert_eq!((plan.load.threads, plan.load.mtu), (1, DEFAULT_MTU));
        assert!(!plan.load.spin && plan.other_cores.is_empty() && plan.bind == *server.ip());
    }

    #[test]
    fn a_kernel_bypass_client_takes_its_cores_address() {
        let (plan, _, bypass) = client_plan(&mut Args::from_line(
            "--server 10.0.0.1:7000 --mode raw --datapath xdp --ifname v0 --bind 10.0.0.2:9000 --mtu 1500",
        ))
        .unwrap();
        let (t, bind) = bypass.unwrap();
        assert_eq!(bind, "10.0.0.2:9000".parse::<SocketAddrV4>().unwrap());
        assert_eq!(plan.bind, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(
            (t.kind, t.device.as_str(), t.mtu),
            (DatapathKind::Xdp, "v0", Some(1500))
        );
        let e = client_plan(&mut Args::from_line(
            "--server 10.0.0.1:7000 --mode raw --datapath mlx5 --mlx5-dev mlx5_0 --bind 10.0.0.2",
        ))
        .unwrap_err();
        assert!(e.contains("needs --bind IP:PORT"), "{e}");
        let e = client_plan(&mut Args::from_line(
            "--server 10.0.0.1:7000 --mode raw --bind 10.0.0.2:9000",
        ))
        .unwrap_err();
        assert!(e.contains("goes with --datapath"), "{e}");
    }
}
