//! `kv bench | server | client`: the key-value store of the Cornflakes paper (§6.2).

#![forbid(unsafe_code)]

use cli_args::Args;
use loadgen::args::LoadFlags;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;

use app_server::cli::serve_until;
use app_server::{CargoRun, DatapathKind, DatapathSpec, Launch};
use kv_store::bench::{self, BenchConfig};
use kv_store::load::load_store;
use kv_store::server::{Kv, ServerConfig};
use kv_store::store::StoreConfig;
use kv_store::{Serialization, Shared};
// The workload flags are parsed in the library, shared with `demi-server kv` (demikernel/).
use kv_store::load::workload_from_args as workload;

/// How to build `kv` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "kv-store",
    bin: Some("kv"),
    args: "server ...",
};

const USAGE: &str = "\
usage:
  kv bench  [--workload ycsb|google|twitter|cdn] [workload options] [--serializations S,S,..]
            [--rates R,R,..] [--duration SECS] [--warmup SECS] [--timeout-ms MS] [--threads N]
            [--threshold N] [--mtu N] [--max-item BYTES] [--memory-limit BYTES]
            [--requests N] [--seed N] [--out DIR] [--json PATH] [--spin] [--datapath emu|socket|xdp]
            [--client-datapath xdp|socket]
            [--datapath tcp [--conns N] [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]]
            [--sample-every N] [--check-every N] [--desc-ns NS] [--demote-lines N] [--slowed-retries N] [--trials K] [--resolution F] [--repeat N] [--peers redis,memcached] [--cores N]
      One server per serialization (each loads the workload's contents), offered loads
      interleaved across serializations, every reply verified against what the store must
      hold. Prints the tables and writes DIR/kv.json (or --json), DIR/run.json, DIR/tables.md,
      DIR/kv.png (the highest load each kept up) and DIR/kv-latency.png (p50 and p99 against
      offered load), with their SVGs (DIR defaults to results/kv). --datapath emu (the default
      with 2+ CPUs): the server on the ConnectX driver on one core, the emulated ConnectX on
      the other playing wire and clients (measures the server core's work; the store is
      loaded once, and every trial serves a snapshot of it). Every reply is read whole and its
      headers, length, type and id checked. Its payload is checked when it answers a write,
      is the first to its distinct request or the first in the measured window, and for a
      random 1 in --check-every of the rest (default 8; 1: every reply); a checked payload
      is decoded and verified against what its keys hold now when its bytes differ from the
      last verified reply to that request under the same writes, and for a random 1 in
      --sample-every (default 64). Every table prints the share checked and the coverage. --desc-ns NS: the
      device's time per gather entry (descriptor), printed in every table (default 0: the
      paper's crossover comes from CPU-side costs and its NICs were not the limit, §5.2). --demote-lines N: the device moves each request frame's first N cache lines
      to the last-level cache after writing it, as a DDIO NIC's DMA leaves them (default 0). Each serialization's saturation load is searched: a doubling grid of --rates
      (default 0.1 to 3.2 M req/s) until a load's median of up to --trials K trials (default
      3) misses 95 % of offered, then bisection until the bracket is within --resolution F
      (default 0.05; a grid load that missed is decided once more before bisecting). It
      prints a compact table first (per serialization: the highest load kept up, its spread,
      ÷ the best library, what bounded it, the server's ns per request and where its time
      went) and the ratios against their floors; the full tables go to DIR/tables.md (and the
      search's to DIR/emu.md), with DIR/emu-summary.json, DIR/emu-points.json and
      DIR/ratios.json. --repeat N: the whole search N times (default 1), each ratio the median
      of the N with their min-max.
      A trial whose speed canary read the machine's slow state (over 1.3 x the run's
      readings so far) is rerun up to --slowed-retries N times (default 2; 0: never) and the
      runs thrown away are counted in the table and JSON (docs/performance.md, \"How trials are
      judged\").
      --cores N there: N server cores, each with its shard, on N + 1 CPUs (the device on the
      last); each request to its key's core, a getm/putm over several cores sent as one part
      per core (rates count whole requests, counters parts; docs/cores.md).
      --datapath socket: open-loop client threads over kernel UDP
      sockets on 127.0.0.1; --cores N there: N pinned server cores, key-steered clients.
      --datapath tcp: the same over kernel TCP, --conns N connections per client thread and
      server core; --tcp-zc/--tcp-zc-threshold as for kv server.
      --datapath xdp (feature `xdp`, root): each server a process over
      AF_XDP in a network namespace on a veth pair, driven by one AF_XDP client core at the
      other end (one --threads: a veth steers by the sending CPU), or with --client-datapath
      socket by --threads N kernel-socket client threads there; the first line and the tables
      say which. Serializations run one after another. --peers (with --datapath socket): then
      redis-server and memcached (crates/kv-peers: different systems, their own servers over
      kernel TCP) with the same workload, requests and loads; DIR/peers.json, DIR/peers.md,
      and a side-by-side table appended to DIR/tables.md.
  kv server --serialization S [--bind IP:PORT] [--threshold N] [--mtu N] [--max-item BYTES]
            [--memory-limit BYTES] [--workload W [workload options]] [--seconds SECS] [--spin]
            [--until-stdin-closes] [--cores N]
            [--datapath socket | tcp | xdp --ifname IF [--peer IP=MAC] | mlx5 --mlx5-dev DEV | ice --dpdk-args ARGS]
            [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]
      Serves until killed (or for SECS, or until its stdin closes), printing its counters
      every second; with --workload, loads that workload's contents first. xdp (feature
      `xdp`, root): AF_XDP on interface IF, with a static ARP entry for the peer; mlx5
      (feature `mlx5`): a ConnectX device (RDMA name or PCI address); ice (feature `ice`):
      the DPDK port the EAL arguments name.
      --cores N (every datapath): N share-nothing cores pinned one per CPU, core i on
      PORT+i holding only the keys k with kv_store::steer::core_of(k, N) = i (xdp: on queue i
      of IF, which needs N queues and a NIC steering each port to its queue; mlx5/ice: its
      own queue set and one flow rule for its port; docs/cores.md). --memory-limit is per core.
      --datapath tcp: kernel TCP (stream frames); --tcp-zc MODE (msg-zerocopy, the default;
      io-uring; off) and --tcp-zc-threshold BYTES (default 16384): which replies are sent
      zero-copy, those with a value at least BYTES long (the ready line says it, the counters
      show zc_sends/zc_bytes and what the kernel copied; docs/tcp.md). Over Demikernel's TCP the same server is
      `demi-server kv --serialization S --bind IP:PORT --ifname IF --peer IP=MAC [--workload W
      ...]`, a nightly binary in demikernel/ run with `ip netns exec` (docs/tcp.md).
  kv client --server IP:PORT --serialization S --workload W [workload options] [--rates ..]
            [--duration SECS] [--warmup SECS] [--timeout-ms MS] [--threads N] [--requests N]
            [--seed N] [--out DIR] [--json PATH] [--spin] [--cores N] [--datapath socket|tcp [--conns N]
            [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]]
            [--datapath xdp --ifname IF [--peer IP=MAC] | mlx5 --mlx5-dev DEV | ice --dpdk-args ARGS
             --bind IP:PORT]
      Sweeps the offered loads against a running `kv server` loaded with the same workload.
      Fails when a reply does not verify. --datapath xdp | mlx5 | ice (features `xdp`, `mlx5`,
      `ice`): --threads N client cores on that NIC, core i at --bind's port + i on its own queue
      (pinned with N > 1), opened once for the sweep; each waits for the server's ARP answer
      (or takes --peer IP=MAC) before the first point.
      --datapath tcp: over kernel TCP, --conns N connections (default 1) per server core and
      client thread, against `kv server --datapath tcp` or the same handler over Demikernel's
      TCP (`demi-server kv`, built with nightly in demikernel/; docs/tcp.md).
      --cores N: the server runs N cores on PORT..PORT+N-1; each request goes to the core
      owning its key, a getm/putm over several cores is split and its replies merged.

  kv merge --inputs A.json,B.json,.. [--json PATH]
      Merges the JSON of several `kv client` machines that loaded one server at once (the same
      sweep on each): per point, the offered and achieved loads and the counters summed, each
      latency percentile the largest of the machines' (an upper bound), the mean weighted.
      Writes PATH (default results/kv/kv-merged.json) and prints the merged points.

  kv faults [--serializations S,S,..] [--loss P] [--duplicate P] [--writes N] [--keys N]
            [--seed N] [--dedup-window N] [--tries N]
      Every acknowledged write applied exactly once under loss and duplication: a server and
      a retrying client on the in-process loopback NIC whose wire loses (--loss, default
      0.05) and duplicates (--duplicate, 0.01) frames both ways; a seeded mix of appends,
      puts and put/delete cycles (--writes, default 3000), then a full read-back. Prints a
      table per serialization (writes acked, lost, applied twice: both must be 0); fails
      otherwise. --dedup-window 0 turns the server's retry table off, to see what it fixes.

workload options:
  ycsb:    --keys N  --shape COUNTxSIZE (1x4096, 2x2048, 4x1024)  --access getm|getlist
  google:  --keys N  --list-lens MIN-MAX (1, 1-4, 1-8, 1-16)  --no-resample
  twitter: --keys N  --trace PATH (CSV of twitter/cache-trace; synthetic cluster-4 model without)
  cdn:     --total-mb N  --piece-size BYTES
serializations: cornflakes cornflakes-sg cornflakes-copy cornflakes-no-ssend protobuf capnp flatbuffers resp
";

/// The flags of every command that runs the store or its clients: the load flags
/// ([`loadgen::args::LoadFlags`]) and the store's.
fn common(a: &mut Args, cfg: &mut BenchConfig) -> Result<(), String> {
    LoadFlags::from_args(a)?.apply(&mut cfg.load);
    if let Some(n) = a.parse::<usize>("--requests")? {
        cfg.requests = n.max(1);
    }
    if let Some(n) = a.parse::<u64>("--seed")? {
        cfg.seed = n;
    }
    cfg.json = a.take("--json")?.map(PathBuf::from);
    if let Some(m) = a.parse::<usize>("--max-item")? {
        cfg.max_item = m;
    }
    if let Some(m) = a.parse::<usize>("--memory-limit")? {
        cfg.memory_limit = m;
    }
    if let Some(n) = a.parse::<usize>("--cores")? {
        cfg.cores = n;
    }
    Ok(())
}

fn bench_cmd(mut a: Args) -> Result<(), String> {
    let (cfg, peers) = bench_config(&mut a)?;
    a.finish()?;
    if peers.is_some() && cfg.datapath != bench::DatapathKind::Socket {
        return Err("--peers runs redis-server/memcached over kernel TCP beside the store: use it with --datapath socket".to_owned());
    }
    let out = bench::run_bench(&cfg)?;
    if let Some(p) = peers {
        kv_store::peers::run_beside(&cfg, &p, &out)?;
    }
    // A wrong reply at any point fails the bench (the emulated NIC's search checks every
    // trial itself, before it returns).
    let bad: u64 = out.records.iter().map(|r| r.mismatched + r.malformed).sum();
    if bad > 0 {
        return Err(format!(
            "{bad} replies did not verify (mismatched or malformed; see the table's columns)"
        ));
    }
    Ok(())
}

/// The peers `kv bench --peers` runs beside the store.
type Peers = Option<Vec<kv_peers::server::Peer>>;

/// What `kv bench`'s flags ask for (`a` keeps what it does not know).
fn bench_config(a: &mut Args) -> Result<(BenchConfig, Peers), String> {
    let mut cfg = BenchConfig::default();
    // As `echo bench`: the emulated NIC when there are CPUs for it (the server cores are then
    // what the run measures), else the kernel sockets.
    // --cores N on the emulated NIC needs N + 1 CPUs; without them, the kernel sockets.
    if let Some(n) = a.parse::<usize>("--cores")? {
        cfg.cores = n;
    }
    let cores = cfg.cores.max(1);
    let emu_cpus = || {
        emu_bench::cores_for(cores)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let unknown = |o: &str| {
        format!(
        "--datapath {o:?}: kv bench runs on emu, socket, tcp or xdp (mlx5 and ice: `kv server` on the NIC machine and `kv client`; see apps/kv-store/README.md)"
    )
    };
    let accepts = app_server::cli::BENCH_DATAPATHS;
    let (spec, conns) = app_server::cli::bench_datapath(a, &accepts, emu_cpus, unknown)?;
    match spec.kind {
        // Kernel TCP is the socket sweep over TCP connections.
        DatapathKind::Tcp => (cfg.tcp_conns, cfg.tcp) = (conns, spec.tcp),
        kind => cfg.datapath = kind,
    }
    // The AF_XDP bench's client core: its interface is the veth the bench creates.
    cfg.client_datapath = app_server::cli::bench_clients(a, cfg.datapath)?
        .filter(|&k| k == DatapathKind::Xdp)
        .map(DatapathSpec::new);
    if cfg.datapath == DatapathKind::Emu {
        cfg.load.rates = bench::EMU_RATES.to_vec();
    }
    cfg.device.apply_args(a)?;
    let name = a.take("--workload")?.unwrap_or_else(|| "ycsb".to_owned());
    cfg.workload = workload(a, &name)?;
    if let Some(s) = a.list::<Serialization>("--serializations")? {
        cfg.serializations = s;
    }
    if let Some(t) = app_server::cli::threshold(a, "[bench]")? {
        cfg.threshold = t;
    }
    let peers = a.list::<kv_peers::server::Peer>("--peers")?;
    common(a, &mut cfg)?;
    Ok((cfg, peers))
}

fn client_cmd(mut a: Args) -> Result<(), String> {
    let (cfg, server) = client_config(&mut a)?;
    a.finish()?;
    let out = bench::run_client(&cfg, server)?;
    // As in the bench: a wrong reply fails the client (after its tables and JSON are written).
    let bad: u64 = out.records.iter().map(|r| r.mismatched + r.malformed).sum();
    if bad > 0 {
        return Err(format!(
            "{bad} replies did not verify (mismatched or malformed; see the table's columns)"
        ));
    }
    Ok(())
}

/// What `kv client`'s flags ask for: the run and the server.
fn client_config(a: &mut Args) -> Result<(BenchConfig, SocketAddrV4), String> {
    let mut cfg = BenchConfig::default();
    let server = a
        .parse::<SocketAddrV4>("--server")?
        .ok_or("--server IP:PORT is required")?;
    let ser = a
        .parse::<Serialization>("--serialization")?
        .ok_or("--serialization is required")?;
    cfg.serializations = vec![ser];
    let name = a.take("--workload")?.ok_or("--workload is required")?;
    cfg.workload = workload(a, &name)?;
    cfg.client_bind = a.parse::<SocketAddrV4>("--bind")?;
    // The client cores' MTU is an explicit --mtu only: without it AF_XDP takes the
    // interface's, the NICs the load flags' default.
    let explicit_mtu = a.has("--mtu");
    common(a, &mut cfg)?;
    (cfg.tcp_conns, cfg.tcp, cfg.client_datapath) = app_server::cli::client_transport(a)?;
    if let Some(spec) = &mut cfg.client_datapath {
        spec.mtu = explicit_mtu.then_some(cfg.load.mtu);
    }
    if cfg.client_bind.is_some() && cfg.client_datapath.is_none() {
        return Err(
            "--bind goes with --datapath xdp | mlx5 | ice (kernel sockets pick their own address)"
                .to_owned(),
        );
    }
    Ok((cfg, server))
}

fn merge_cmd(mut a: Args) -> Result<(), String> {
    let inputs = a
        .list::<PathBuf>("--inputs")?
        .ok_or("--inputs A.json,B.json,.. is required")?;
    let json = a
        .take("--json")?
        .map_or_else(|| PathBuf::from("results/kv/kv-merged.json"), PathBuf::from);
    a.finish()?;
    let hosts = inputs
        .iter()
        .map(|p| loadgen::read_json(p).map_err(|e| format!("{}: {e}", p.display())))
        .collect::<Result<Vec<_>, _>>()?;
    let merged = loadgen::merge_hosts(&hosts)?;
    for r in &merged {
        println!(
            "{:<20} offered {:>9.0}  achieved {:>9.0}  p50 <= {:>8}  p99 <= {:>8}  threads {}  verified {}  errors {}",
            r.mode,
            r.offered_rps,
            r.achieved_rps,
            loadgen::fmt_us(r.p50_us),
            loadgen::fmt_us(r.p99_us),
            r.threads,
            r.verified,
            r.errors
        );
    }
    loadgen::save_json(&json, &merged)?;
    eprintln!("[merge] {} machines, wrote {}", hosts.len(), json.display());
    Ok(())
}

fn faults_cmd(mut a: Args) -> Result<(), String> {
    use kv_store::faults::{self, FaultConfig, FaultReport};
    let sers: Vec<Serialization> = match a.take("--serializations")? {
        Some(list) => list.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => Serialization::ALL.to_vec(),
    };
    let mut base = FaultConfig::new(Serialization::Shared(Shared::CORNFLAKES));
    if let Some(p) = a.parse::<f64>("--loss")? {
        base.loss = p;
    }
    if let Some(p) = a.parse::<f64>("--duplicate")? {
        base.duplicate = p;
    }
    if let Some(n) = a.parse::<usize>("--writes")? {
        base.writes = n;
    }
    if let Some(n) = a.parse::<usize>("--keys")? {
        base.keys = n;
    }
    if let Some(n) = a.parse::<u64>("--seed")? {
        base.seed = n;
    }
    if let Some(n) = a.parse::<usize>("--dedup-window")? {
        base.dedup_window = n;
    }
    if let Some(n) = a.parse::<u32>("--tries")? {
        base.retry.tries = n.max(1);
    }
    a.finish()?;
    println!(
        "loss {:.1} %, duplicates {:.1} %, both ways; {} writes over 3 x {} keys; server retry table: {}",
        base.loss * 100.0,
        base.duplicate * 100.0,
        base.writes,
        base.keys,
        if base.dedup_window == 0 {
            "off".to_owned()
        } else {
            format!("last {} writes", base.dedup_window)
        }
    );
    println!("{}", FaultReport::header());
    let mut failed = Vec::new();
    for ser in sers {
        let r = faults::run(&FaultConfig {
            serialization: ser,
            ..base.clone()
        })?;
        println!("{r}");
        if !r.exactly_once() {
            failed.push(if r.refused > 0 {
                format!("{ser} ({} writes refused as reused ids)", r.refused)
            } else {
                ser.to_string()
            });
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "acknowledged writes lost or applied twice: {}",
            failed.join(", ")
        ))
    }
}

fn server_cmd(mut a: Args) -> Result<(), String> {
    let ser = a
        .parse::<Serialization>("--serialization")?
        .ok_or("--serialization is required")?;
    let bind = a
        .parse::<SocketAddrV4>("--bind")?
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878));
    let mut bc = BenchConfig::default();
    let threshold = app_server::cli::threshold(&mut a, "[server]")?.unwrap_or(bc.threshold);
    let wl = match a.take("--workload")? {
        Some(n) => Some(workload(&mut a, &n)?),
        None => None,
    };
    let seconds = a.secs("--seconds")?;
    let until_stdin_closes = a.switch("--until-stdin-closes");
    // AF_XDP takes an explicit --mtu only: without it the interface's MTU applies.
    let spec = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS)?;
    common(&mut a, &mut bc)?;
    bc.load.mtu = spec.mtu_or(bc.load.mtu);
    a.finish()?;
    let cfg = ServerConfig {
        serialization: ser,
        threshold,
        store: StoreConfig {
            memory_limit: bc.memory_limit,
            ..StoreConfig::default()
        },
    };
    let mut l = Launch::new(spec, bc.socket(bind), ser.name(), CARGO_RUN);
    l.umem_bytes = Some(kv_store::server::umem_bytes(bc.memory_limit));
    l.cores = bc.cores;
    l.spin = bc.load.spin;
    l.name = format!("kv-server-{ser}");
    l.min_item = bc.max_item;
    let st = serve_until(seconds, until_stdin_closes, |stop| {
        app_server::launch(
            &l,
            move |mem, core| {
                let mut kv = Kv::new(mem, cfg).with_core(core.index, core.count);
                if let Some(wl) = &wl {
                    let done = load_store(wl, kv.store_mut())
                        .map_err(|e| format!("loading the store: {e}"))?;
                    eprintln!("[server {ser} core {}] {done}", core.index);
                }
                Ok(kv)
            },
            stop,
        )
    })?;
    eprintln!("[server] {st}");
    Ok(())
}

fn main() -> ExitCode {
    app_server::cli::main(
        "kv",
        USAGE,
        &[
            ("bench", bench_cmd),
            ("server", server_cmd),
            ("client", client_cmd),
            ("faults", faults_cmd),
            ("merge", merge_cmd),
        ],
        std::env::args().skip(1).collect(),
    )
}

#[cfg(test)]
mod tests {
    //! `kv bench` and `kv client`: every flag, and the config field it sets.
    use super::*;
    use std::time::Duration;

    /// What the load and run flags of `bench` and `client` set.
    fn run_flags(want: &mut BenchConfig) {
        want.load.rates = vec![3000.0, 1000.0];
        want.load.duration = Duration::from_millis(250);
        want.load.warmup = Duration::from_millis(500);
        want.load.timeout = Duration::from_millis(30);
        want.load.threads = 4;
        want.requests = 10;
        want.seed = 9;
        want.load.out_dir = PathBuf::from("o");
        want.json = Some(PathBuf::from("j.json"));
        want.load.spin = true;
        want.load.mtu = 9000;
        want.max_item = 1 << 16;
        want.memory_limit = 1 << 24;
        want.cores = 2;
    }

    const RUN_FLAGS: &str = "--rates 3000,1000 --duration 0.25 --warmup 0.5 --timeout-ms 30 \
        --threads 4 --requests 10 --seed 9 --out o --json j.json --spin --mtu 9000 \
        --max-item 65536 --memory-limit 16777216 --cores 2";

    #[test]
    fn bench_flags_set_the_config() {
        let mut a = Args::from_line(&format!(
            "--datapath socket --workload google --keys 50 --list-lens 1-4 \
             --serializations protobuf,resp --threshold 256 --peers redis --sample-every 0 --check-every 0 \
             --desc-ns 7 --demote-lines 2 --slowed-retries 1 --trials 5 --resolution 0.2 \
             --repeat 3 {RUN_FLAGS}"
        ));
        let (got, peers) = bench_config(&mut a).unwrap();
        a.finish().unwrap();
        let mut want = BenchConfig::default();
        run_flags(&mut want);
        want.workload =
            workload(&mut Args::from_line("--keys 50 --list-lens 1-4"), "google").unwrap();
        want.serializations = vec!["protobuf".parse().unwrap(), "resp".parse().unwrap()];
        want.threshold = 256;
        want.device.sample_every = 1;
        want.device.check_every = 1;
        want.device.desc_ns = 7;
        want.device.demote_lines = 2;
        want.device.slowed_retries = 1;
        want.device.trials = 5;
        want.device.resolution = 0.2;
        want.device.repeat = 3;
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert_eq!(
            format!("{peers:?}"),
            format!(
                "{:?}",
                Some(vec!["redis".parse::<kv_peers::server::Peer>().unwrap()])
            )
        );

        let (got, peers) = bench_config(&mut Args::from_line("--datapath socket")).unwrap();
        assert_eq!(format!("{got:?}"), format!("{:?}", BenchConfig::default()));
        assert!(peers.is_none());
        let got = bench_config(&mut Args::from_line("--datapath socket --threads 0"))
            .unwrap()
            .0;
        assert_eq!(got.load.threads, 1);
        let e = bench_config(&mut Args::from_line("--datapath socket --timeout-ms x")).unwrap_err();
        assert_eq!(e, "--timeout-ms \"x\": invalid digit found in string");
    }

    #[test]
    fn client_flags_set_the_config() {
        let mut a = Args::from_line(&format!(
            "--server 10.0.0.1:7878 --serialization capnp --workload cdn --total-mb 3 {RUN_FLAGS}"
        ));
        let (got, server) = client_config(&mut a).unwrap();
        a.finish().unwrap();
        assert_eq!(server, "10.0.0.1:7878".parse::<SocketAddrV4>().unwrap());
        let mut want = BenchConfig::default();
        run_flags(&mut want);
        want.serializations = vec!["capnp".parse().unwrap()];
        want.workload = workload(&mut Args::from_line("--total-mb 3"), "cdn").unwrap();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        // Flags only `bench` reads stay unread.
        let mut a = Args::from_line(
            "--server 10.0.0.1:7878 --serialization capnp --workload cdn --trials 3",
        );
        client_config(&mut a).unwrap();
        assert_eq!(a.finish().unwrap_err(), "unexpected argument \"--trials\"");
    }
}
