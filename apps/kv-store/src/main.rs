//! `kv bench | server | client`: the key-value store of the Cornflakes paper (§6.2).

#![forbid(unsafe_code)]

use loadgen::args::Args;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use app_server::{CargoRun, Launch, Transport};
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
            [--sample-every N] [--check-every N] [--desc-ns NS] [--demote-lines N] [--trials K] [--resolution F] [--peers redis,memcached] [--cores N]
      One server per serialization (each loads the workload's contents), offered loads
      interleaved across serializations, every reply verified against what the store must
      hold. Prints the tables and writes DIR/kv.json (or --json), DIR/run.json, DIR/kv.svg,
      DIR/kv.png and DIR/tables.md (DIR defaults to results/kv). --datapath emu (the default
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
      (default 0.05); also writes DIR/emu.md, DIR/emu-summary.json and DIR/emu-points.json.
      --cores N there: N server cores, each with its shard, on N + 1 CPUs (the device on the
      last); each request to its key's core, a getm/putm over several cores sent as one part
      per core (rates count whole requests, counters parts; docs/cores.md).
      --datapath socket: open-loop client threads over kernel UDP
      sockets on 127.0.0.1; --cores N there: N pinned server cores, key-steered clients.
      --datapath xdp (feature `xdp`, root): each server a process over
      AF_XDP in a network namespace on a veth pair, the clients on kernel sockets at the other
      end; serializations run one after another. --peers (with --datapath socket): then
      redis-server and memcached (crates/kv-peers: different systems, their own servers over
      kernel TCP) with the same workload, requests and loads; DIR/peers.json, DIR/peers.md,
      and a side-by-side table appended to DIR/tables.md.
  kv server --serialization S [--bind IP:PORT] [--threshold N] [--mtu N] [--max-item BYTES]
            [--memory-limit BYTES] [--workload W [workload options]] [--seconds SECS] [--spin]
            [--until-stdin-closes] [--cores N]
            [--datapath socket | tcp | xdp --ifname IF [--peer IP=MAC] | mlx5 --mlx5-dev DEV | ice --dpdk-args ARGS]
      Serves until killed (or for SECS, or until its stdin closes), printing its counters
      every second; with --workload, loads that workload's contents first. xdp (feature
      `xdp`, root): AF_XDP on interface IF, with a static ARP entry for the peer; mlx5
      (feature `mlx5`): a ConnectX device (RDMA name or PCI address); ice (feature `ice`):
      the DPDK port the EAL arguments name.
      --cores N (every datapath): N share-nothing cores pinned one per CPU, core i on
      PORT+i holding only the keys k with kv_store::steer::core_of(k, N) = i (xdp: on queue i
      of IF, which needs N queues and a NIC steering each port to its queue; mlx5/ice: its
      own queue set and one flow rule for its port; docs/cores.md). --memory-limit is per core.
      --datapath tcp: kernel TCP (stream frames). Over Demikernel's TCP the same server is
      `demi-server kv --serialization S --bind IP:PORT --ifname IF --peer IP=MAC [--workload W
      ...]`, a nightly binary in demikernel/ run with `ip netns exec` (docs/tcp.md).
  kv client --server IP:PORT --serialization S --workload W [workload options] [--rates ..]
            [--duration SECS] [--warmup SECS] [--timeout-ms MS] [--threads N] [--requests N]
            [--seed N] [--out DIR] [--json PATH] [--spin] [--cores N] [--datapath socket|tcp [--conns N]]
      Sweeps the offered loads against a running `kv server` loaded with the same workload.
      --datapath tcp: over kernel TCP, --conns N connections (default 1) per server core and
      client thread, against `kv server --datapath tcp` or the same handler over Demikernel's
      TCP (`demi-server kv`, built with nightly in demikernel/; docs/tcp.md).
      --cores N: the server runs N cores on PORT..PORT+N-1; each request goes to the core
      owning its key, a getm/putm over several cores is split and its replies merged.

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

fn common(a: &mut Args, cfg: &mut BenchConfig) -> Result<(), String> {
    if let Some(r) = a.list::<f64>("--rates")? {
        cfg.rates = r;
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
    if let Some(n) = a.parse::<usize>("--requests")? {
        cfg.requests = n.max(1);
    }
    if let Some(n) = a.parse::<u64>("--seed")? {
        cfg.seed = n;
    }
    if let Some(d) = a.take("--out")? {
        cfg.out_dir = PathBuf::from(d);
    }
    cfg.json = a.take("--json")?.map(PathBuf::from);
    cfg.spin = a.switch("--spin");
    if let Some(m) = a.parse::<usize>("--mtu")? {
        cfg.mtu = m;
    }
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
    let mut cfg = BenchConfig::default();
    // As `echo bench`: the emulated NIC when there are CPUs for it (the server cores are then
    // what the run measures), else the kernel sockets.
    // --cores N on the emulated NIC needs N + 1 CPUs; without them, the kernel sockets.
    if let Some(n) = a.parse::<usize>("--cores")? {
        cfg.cores = n;
    }
    let emu = match a.take("--datapath")?.as_deref() {
        None => match emu_bench::cores_for(cfg.cores.max(1)) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("[bench] socket datapath: {e}");
                false
            }
        },
        Some("socket") => false,
        Some("tcp") => {
            cfg.tcp_conns = Some(1);
            false
        }
        Some("emu") => true,
        Some("xdp") => {
            cfg.datapath = bench::DatapathKind::Xdp;
            false
        }
        Some(other) => {
            return Err(format!(
                "--datapath {other:?}: kv bench runs on emu, socket, tcp or xdp (mlx5 and ice: `kv server` on the NIC machine and `kv client`; see apps/kv-store/README.md)"
            ))
        }
    };
    if let Some(n) = a.parse::<usize>("--conns")? {
        if cfg.tcp_conns.is_none() || n == 0 {
            return Err("--conns N (at least 1) goes with --datapath tcp".to_owned());
        }
        cfg.tcp_conns = Some(n);
    }
    if emu {
        cfg.datapath = bench::DatapathKind::Emu;
        cfg.rates = bench::EMU_RATES.to_vec();
    }
    if let Some(n) = a.parse::<usize>("--demote-lines")? {
        cfg.demote_lines = n;
    }
    if let Some(n) = a.parse::<u64>("--sample-every")? {
        cfg.sample_every = n.max(1);
    }
    if let Some(n) = a.parse::<u64>("--check-every")? {
        cfg.check_every = n.max(1);
    }
    if let Some(ns) = a.parse::<u64>("--desc-ns")? {
        cfg.desc_ns = ns;
    }
    if let Some(k) = a.parse::<usize>("--trials")? {
        cfg.trials = k;
    }
    if let Some(r) = a.parse::<f64>("--resolution")? {
        cfg.resolution = r;
    }
    let name = a.take("--workload")?.unwrap_or_else(|| "ycsb".to_owned());
    cfg.workload = workload(&mut a, &name)?;
    if let Some(s) = a.list::<Serialization>("--serializations")? {
        cfg.serializations = s;
    }
    match a.parse::<usize>("--threshold")? {
        Some(t) => {
            cfg.threshold = t;
            eprintln!("[bench] hybrid threshold: {t} B (from --threshold)");
        }
        None => eprintln!(
            "[bench] hybrid threshold: {}",
            cornflakes::threshold_setting()
        ),
    }
    let peers = a.list::<kv_peers::server::Peer>("--peers")?;
    common(&mut a, &mut cfg)?;
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

fn client_cmd(mut a: Args) -> Result<(), String> {
    let mut cfg = BenchConfig::default();
    let server = a
        .parse::<SocketAddrV4>("--server")?
        .ok_or("--server IP:PORT is required")?;
    let ser = a
        .parse::<Serialization>("--serialization")?
        .ok_or("--serialization is required")?;
    cfg.serializations = vec![ser];
    let name = a.take("--workload")?.ok_or("--workload is required")?;
    cfg.workload = workload(&mut a, &name)?;
    common(&mut a, &mut cfg)?;
    cfg.tcp_conns = app_server::cli::client_transport(&mut a)?;
    a.finish()?;
    bench::run_client(&cfg, server).map(|_| ())
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
            failed.push(ser.to_string());
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
    let threshold = match a.parse::<usize>("--threshold")? {
        Some(t) => {
            eprintln!("[server] hybrid threshold: {t} B (from --threshold)");
            t
        }
        None => {
            eprintln!(
                "[server] hybrid threshold: {}",
                cornflakes::threshold_setting()
            );
            bc.threshold
        }
    };
    let wl = match a.take("--workload")? {
        Some(n) => Some(workload(&mut a, &n)?),
        None => None,
    };
    let seconds = a.secs("--seconds")?;
    let until_stdin_closes = a.switch("--until-stdin-closes");
    // AF_XDP takes an explicit --mtu only: without it the interface's MTU applies.
    let explicit_mtu = a.has("--mtu");
    let mut transport = Transport::from_args(&mut a)?;
    common(&mut a, &mut bc)?;
    a.finish()?;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    if let Some(s) = seconds {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(s);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    if until_stdin_closes {
        // How a parent (the AF_XDP bench) stops a child server: it closes our stdin.
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    let cfg = ServerConfig {
        serialization: ser,
        threshold,
        store: StoreConfig {
            memory_limit: bc.memory_limit,
            ..StoreConfig::default()
        },
    };
    if let Transport::Xdp(x) = &mut transport {
        x.mtu = explicit_mtu.then_some(bc.mtu);
        x.umem_bytes = Some(kv_store::server::umem_bytes(bc.memory_limit));
    }
    let mut l = Launch::new(transport, bc.socket(bind), ser.name(), CARGO_RUN);
    l.cores = bc.cores;
    l.spin = bc.spin;
    l.name = format!("kv-server-{ser}");
    l.min_item = bc.max_item;
    let st = app_server::launch(
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
        &stop,
    )?;
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
        ],
        std::env::args().skip(1).collect(),
    )
}
