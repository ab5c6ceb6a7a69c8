//! `kv bench`: one server per serialization (each loaded with the workload's contents) and
//! open-loop client threads over the socket datapath on 127.0.0.1, offered loads interleaved
//! across serializations, every reply verified; then JSON, throughput–p99 plots and tables in
//! the form of the paper's Tables 1, 2, 4 and 5.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datapath_socket::{SocketConfig, SocketDatapath};
use kv_workloads::{Stats, Workload, WorkloadConfig};
use loadgen::{
    max_kept_up, max_kept_up_within_p99, plot_p99_curves, run, write_json, Bound, Record,
    RunConfig, RunReport, Schedule, ScheduleConfig, DEFAULT_KEEP_UP,
};

use crate::client::{Checker, Expected, KvClient, RunRequests};
use crate::ops::Op;
use crate::serialization::Serialization;
use crate::server::{memory_config, ServerConfig, ServerHandle, ServerStats, DEFAULT_MAX_ITEM};
use crate::store::{Store, StoreConfig, DEFAULT_MEMORY_LIMIT};

/// How the AF_XDP runs are labelled in tables and JSON.
pub const XDP_LABEL: &str = "AF_XDP in copy mode on a veth pair (datapath-xdp): each server a process in its own network namespace, the clients on kernel UDP sockets at the other end";

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

/// Default offered loads (requests per second), lowest first.
pub const DEFAULT_RATES: [f64; 8] = [
    5_000.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 60_000.0, 80_000.0, 100_000.0,
];

/// Default coarse grid on the emulated NIC (`--datapath emu`), where the server core saturates
/// between a few hundred thousand and a few million requests per second; the saturation search
/// bisects between its points.
pub const EMU_RATES: [f64; 6] = [
    100_000.0,
    200_000.0,
    400_000.0,
    800_000.0,
    1_600_000.0,
    3_200_000.0,
];

/// IP MTU of the socket datapath: a jumbo frame, as in the paper (§6.1).
pub const DEFAULT_MTU: usize = 9000;

/// Which datapath the benchmark's server runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatapathKind {
    /// Kernel UDP sockets on 127.0.0.1: server and client threads in this process.
    Socket,
    /// The ConnectX driver (datapath-mlx5) against the emulated ConnectX on its own core,
    /// which plays the wire and the open-loop clients (crates/emu-bench).
    Emu,
    /// AF_XDP on a veth pair (feature `xdp`, root): each server a process in a network
    /// namespace, the clients on kernel sockets at the other end (module `xdp`, feature `xdp`).
    Xdp,
}

impl DatapathKind {
    /// How tables and JSON name it.
    pub fn label(self) -> &'static str {
        match self {
            DatapathKind::Socket => DATAPATH_LABEL,
            DatapathKind::Emu => EMU_LABEL,
            DatapathKind::Xdp => XDP_LABEL,
        }
    }
}

/// The emulated NIC, as reported with every table.
pub const EMU_LABEL: &str = "the ConnectX driver (datapath-mlx5) on one core against the emulated ConnectX on another, which plays the wire and the clients (emu-bench): the server core's work, not a network";

/// Everything the benchmark does.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The server's datapath.
    pub datapath: DatapathKind,
    /// The workload (generator and its knobs).
    pub workload: WorkloadConfig,
    /// Serializations to run, in order.
    pub serializations: Vec<Serialization>,
    /// Offered loads, requests per second.
    pub rates: Vec<f64>,
    /// Measured time per load point.
    pub duration: Duration,
    /// Warm-up before each measured window (verified, not measured).
    pub warmup: Duration,
    /// A request unanswered this long is lost.
    pub timeout: Duration,
    /// Client threads.
    pub threads: usize,
    /// Hybrid threshold of `cornflakes` and `cornflakes-no-ssend`.
    pub threshold: usize,
    /// IP MTU of the socket datapath.
    pub mtu: usize,
    /// Largest pinned buffer (server and clients): bounds one value and one message.
    pub max_item: usize,
    /// The store's memory limit (per server).
    pub memory_limit: usize,
    /// Requests generated for the run (the clients cycle through them).
    pub requests: usize,
    /// Seed of the run's requests (the schedule's seeds derive from the load index).
    pub seed: u64,
    /// Stop a serialization's sweep after this many consecutive points below 95 % (0: never).
    pub stop_after_misses: usize,
    /// Busy-poll server and clients instead of blocking / yielding when idle.
    pub spin: bool,
    /// Where the JSON, plots and tables go.
    pub out_dir: PathBuf,
    /// JSON path (default `out_dir/kv.json`).
    pub json: Option<PathBuf>,
    /// `emu` only: every n-th reply is decoded and verified (the first reply to each distinct
    /// request always is; every reply's headers, length, type and id are checked).
    pub sample_every: u64,
    /// `emu` only: leading cache lines of each request frame the device demotes to the
    /// last-level cache after writing it, as DDIO leaves DMA writes there (0: none).
    pub demote_lines: usize,
    /// `emu` only: trials per load of the saturation search (its median decides).
    pub trials: usize,
    /// `emu` only: the search bisects until the saturation bracket is within this fraction.
    pub resolution: f64,
    /// Server cores (socket and emu datapaths): share-nothing, one port each, the clients
    /// steering each key to its core (`docs/cores.md`). On `emu` it needs N + 1 CPUs.
    pub cores: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            datapath: DatapathKind::Socket,
            workload: WorkloadConfig::default_for("ycsb").expect("ycsb is a workload"),
            serializations: Serialization::ALL.to_vec(),
            rates: DEFAULT_RATES.to_vec(),
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            timeout: Duration::from_millis(200),
            threads: 1,
            threshold: cornflakes::default_threshold(),
            mtu: DEFAULT_MTU,
            max_item: DEFAULT_MAX_ITEM,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            requests: 20_000,
            seed: 1,
            stop_after_misses: 2,
            spin: false,
            out_dir: PathBuf::from("results/kv"),
            json: None,
            sample_every: 64,
            demote_lines: 0,
            trials: loadgen::search::DEFAULT_TRIALS,
            resolution: loadgen::search::DEFAULT_RESOLUTION,
            cores: 1,
        }
    }
}

impl BenchConfig {
    /// The loads to run, ascending, without duplicates or non-positive values.
    pub fn loads(&self) -> Vec<f64> {
        let mut v = self.rates.clone();
        v.retain(|r| r.is_finite() && *r > 0.0);
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }

    /// The JSON output path.
    pub fn json_path(&self) -> PathBuf {
        self.json
            .clone()
            .unwrap_or_else(|| self.out_dir.join("kv.json"))
    }

    /// The socket datapath settings of a server or client bound to `bind`.
    pub fn socket(&self, bind: SocketAddrV4) -> SocketConfig {
        let mut sc = SocketConfig::new(bind);
        sc.mtu = self.mtu;
        // Room for the store (per server) on top of transmit and receive buffers.
        sc.memory = memory_config(self.max_item, self.memory_limit.saturating_add(256 << 20));
        sc.max_message_len = sc.max_message_len.max(self.max_item);
        sc
    }
}

/// The datapath the benchmark ran on, as reported with every table.
pub const DATAPATH_LABEL: &str =
    "kernel UDP sockets on 127.0.0.1 (datapath-socket; server and client threads in one process)";

/// What a benchmark run produced.
#[derive(Debug, Default)]
pub struct BenchOutcome {
    /// Every measured point (mode = serialization, shape = workload name).
    pub records: Vec<Record>,
    /// Each serialization's server counters at the end.
    pub servers: Vec<(Serialization, ServerStats)>,
    /// The workload's name.
    pub workload: String,
    /// Statistics of the generated requests.
    pub stats: Option<Stats>,
    /// Requests per unit (1, or the mean number of pieces per CDN object).
    pub requests_per_unit: f64,
    /// The datapath, described.
    pub datapath: String,
    /// Per serialization, what bounded its sweep when the datapath can tell (the emulated
    /// NIC reports whether the server or the device saturated).
    pub bounds: Vec<(String, String)>,
}

/// How the bench's local server cores run: one core floats as it always has (it shares the
/// CPUs with the client threads); several are pinned one per CPU.
fn server_cores(ser: Serialization, cores: usize) -> percore::CoresConfig {
    let mut cc = percore::CoresConfig::new(&format!("kv-server-{ser}"), cores.max(1));
    cc.pin = cores > 1;
    cc
}

/// Loads the store with the workload `cfg` describes (run on the server's thread). A store
/// that is one core's shard ([`Store::set_shard`]) gets only that core's keys.
pub fn load_store(cfg: &WorkloadConfig, store: &mut Store) -> Result<String, String> {
    let start = Instant::now();
    let w = cfg.build().map_err(|e| e.to_string())?;
    let mut keys = 0usize;
    let mut bytes = 0usize;
    let shard = store.shard();
    for (k, vals) in w.load() {
        if shard.is_some_and(|(core, cores)| crate::steer::core_of(&k, cores) != core) {
            continue;
        }
        let refs: Vec<&[u8]> = vals.iter().map(Vec::as_slice).collect();
        bytes += refs.iter().map(|v| v.len()).sum::<usize>();
        store
            .put_list(&k, &refs)
            .map_err(|s| format!("key {k:?}: {}", s.as_str_name()))?;
        keys += 1;
    }
    Ok(format!(
        "loaded {} keys, {:.1} MB of values, in {:.1} s",
        keys,
        bytes as f64 / 1e6,
        start.elapsed().as_secs_f64()
    ))
}

/// A run's requests and what their replies must be.
pub(crate) struct Prepared {
    pub(crate) workload: Arc<dyn Workload>,
    pub(crate) stats: Stats,
    pub(crate) per_unit: f64,
    pub(crate) expected: Arc<Expected>,
    pub(crate) reqs: Arc<RunRequests>,
}

pub(crate) fn prepare(cfg: &BenchConfig) -> Result<Prepared, String> {
    let workload: Arc<dyn Workload> = Arc::from(cfg.workload.build().map_err(|e| e.to_string())?);
    let requests = workload.requests(cfg.requests.max(1), cfg.seed);
    let units = workload.unit_boundaries(&requests).len().max(1);
    let stats = workload.describe(&requests);
    let per_unit = requests.len() as f64 / units as f64;
    let ops: Vec<Op> = requests;
    eprintln!("[bench] workload {}:\n{stats}", workload.name());
    let expected = Arc::new(Expected::for_workload(workload.clone(), &ops));
    let reqs = Arc::new(RunRequests {
        ops,
        threads: cfg.threads.max(1),
    });
    Ok(Prepared {
        workload,
        stats,
        per_unit,
        expected,
        reqs,
    })
}

struct Lane {
    ser: Serialization,
    /// Core *i*'s address.
    addrs: Vec<SocketAddrV4>,
    /// The clients' address (127.0.0.1, or the veth end facing an AF_XDP server).
    bind: Ipv4Addr,
    server: Option<ServerHandle>,
    checker: Arc<Checker>,
    misses: usize,
    records: Vec<Record>,
}

fn run_point(
    cfg: &BenchConfig,
    lane: &Lane,
    reqs: &Arc<RunRequests>,
    rate: f64,
    seed: u64,
) -> Result<RunReport, String> {
    let run_cfg = RunConfig {
        warmup: cfg.warmup,
        timeout: cfg.timeout,
        busy_poll: cfg.spin,
        progress: false,
    };
    let schedule = Schedule::poisson(&ScheduleConfig {
        rate_rps: rate,
        bound: Bound::Duration(cfg.warmup + cfg.duration),
        threads: cfg.threads,
        seed,
    })
    .map_err(|e| format!("schedule at {rate} req/s: {e}"))?;
    let make = |thread: usize| {
        let dp = SocketDatapath::new(cfg.socket(SocketAddrV4::new(lane.bind, 0)))
            .map_err(std::io::Error::other)?;
        KvClient::steered(dp, &lane.addrs, thread, lane.ser, reqs.clone())
    };
    let checker = |id: u64, payload: &[u8]| lane.checker.check(id, payload);
    run(&schedule, &run_cfg, make, &checker)
        .map_err(|e| format!("{} at {rate} req/s: {e}", lane.ser))
}

/// The clients' address: 127.0.0.1 for the bench's own servers and a loopback `kv server`;
/// any address for another host's (a socket bound to 127.0.0.1 cannot reach it).
fn client_bind(remote: Option<SocketAddrV4>) -> Ipv4Addr {
    match remote {
        Some(r) if !r.ip().is_loopback() => Ipv4Addr::UNSPECIFIED,
        _ => Ipv4Addr::LOCALHOST,
    }
}

/// Runs load point `li` (of `n`, offered `load`) of `lane` unless its sweep has stopped,
/// prints it, and keeps the record.
fn run_lane_point(
    cfg: &BenchConfig,
    lane: &mut Lane,
    reqs: &Arc<RunRequests>,
    name: &str,
    li: usize,
    n: usize,
    load: f64,
) -> Result<(), String> {
    if cfg.stop_after_misses > 0 && lane.misses >= cfg.stop_after_misses {
        return Ok(());
    }
    let report = run_point(cfg, lane, reqs, load, cfg.seed + 1 + li as u64)?;
    let rec = Record::from_report(lane.ser.name(), name, &report);
    eprintln!(
        "[bench] load {}/{} {:>7.0} req/s  {:<20} achieved {:>7.0}  p50 {:>8}  p99 {:>8}  ({})",
        li + 1,
        n,
        load,
        lane.ser.name(),
        rec.achieved_rps,
        us(rec.p50_us),
        us(rec.p99_us),
        report.counters
    );
    lane.misses = if rec.keeps_up(DEFAULT_KEEP_UP) {
        0
    } else {
        lane.misses + 1
    };
    if cfg.stop_after_misses > 0 && lane.misses == cfg.stop_after_misses {
        eprintln!("[bench] {}: saturated, no higher loads", lane.ser);
    }
    lane.records.push(rec);
    Ok(())
}

/// Sweeps `loads` for one serialization against a server at `server` (already loaded) from
/// clients bound to `bind`: the AF_XDP bench's per-server sweep.
#[cfg_attr(not(feature = "xdp"), allow(dead_code))]
pub(crate) fn sweep_one(
    cfg: &BenchConfig,
    server: SocketAddrV4,
    bind: Ipv4Addr,
    checker: Arc<Checker>,
    reqs: &Arc<RunRequests>,
    name: &str,
    loads: &[f64],
) -> Result<Vec<Record>, String> {
    let mut lane = Lane {
        ser: checker.ser,
        addrs: vec![server],
        bind,
        server: None,
        checker,
        misses: 0,
        records: Vec::new(),
    };
    for (li, &load) in loads.iter().enumerate() {
        run_lane_point(cfg, &mut lane, reqs, name, li, loads.len(), load)?;
    }
    Ok(lane.records)
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
        "[bench] {} serializations x {} loads, {:?} per point (+{:?} warm-up), {} client thread(s), {DATAPATH_LABEL}, MTU {}",
        cfg.serializations.len(),
        loads.len(),
        cfg.duration,
        cfg.warmup,
        cfg.threads,
        cfg.mtu
    );
    let mut lanes = Vec::new();
    for &ser in &cfg.serializations {
        let wl = cfg.workload.clone();
        let server = match remote {
            Some(_) => None,
            None => Some(crate::server::spawn_cores(
                ServerConfig {
                    serialization: ser,
                    threshold: cfg.threshold,
                    store: StoreConfig {
                        memory_limit: cfg.memory_limit,
                    },
                },
                cfg.socket(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)),
                &server_cores(ser, cfg.cores),
                Arc::new(move |store: &mut Store, _, _| load_store(&wl, store)),
                None,
                cfg.spin,
            )?),
        };
        lanes.push(Lane {
            ser,
            addrs: match (&server, remote) {
                (Some(s), _) => s.addrs(),
                (None, Some(base)) => (0..cfg.cores.max(1))
                    .map(|i| percore::core_addr(base, i))
                    .collect::<Result<_, _>>()?,
                (None, None) => unreachable!("remote when no local server"),
            },
            bind: client_bind(remote),
            server,
            checker: Arc::new(Checker {
                reqs: reqs.clone(),
                expected: expected.clone(),
                ser,
                cores: cfg.cores.max(1),
            }),
            misses: 0,
            records: Vec::new(),
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
        datapath: DATAPATH_LABEL.to_owned(),
        ..BenchOutcome::default()
    };
    for lane in lanes {
        if let Some(server) = lane.server {
            let st = server.stop().map_err(|e| e.to_string())?;
            eprintln!("[bench] {} server: {st}", lane.ser);
            out.servers.push((lane.ser, st));
        }
        out.records.extend(lane.records);
    }
    result?;
    write_outputs(cfg, &out)?;
    Ok(out)
}

pub(crate) fn write_outputs(cfg: &BenchConfig, out: &BenchOutcome) -> Result<(), String> {
    std::fs::create_dir_all(&cfg.out_dir)
        .map_err(|e| format!("creating {}: {e}", cfg.out_dir.display()))?;
    let json = cfg.json_path();
    if let Some(dir) = json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    write_json(&json, &out.records).map_err(|e| format!("writing {}: {e}", json.display()))?;
    eprintln!("[bench] wrote {}", json.display());
    let servers: Vec<serde_json::Value> = out
        .servers
        .iter()
        .map(|(s, st)| {
            serde_json::json!({
                "serialization": s.name(),
                "workload": out.workload,
                "datapath": out.datapath,
                "received": st.received,
                "replied": st.replied,
                "malformed": st.malformed,
                "send_failed": st.send_failed,
                "io_errors": st.io_errors,
                "datapath_drops": st.datapath.total_drops(),
                "keys": st.app.keys,
                "store_bytes": st.app.used_bytes,
                "work_p50_ns": st.work_p50_ns(),
                "work_p99_ns": st.work.p99_us().map(|us| us * 1000.0),
            })
        })
        .collect();
    let meta = serde_json::json!({
        "workload": out.workload,
        "workload_config": cfg.workload,
        "stats": out.stats,
        "requests_per_unit": out.requests_per_unit,
        "datapath": out.datapath,
        "bounds": out.bounds,
        "servers": servers,
    });
    let meta_path = cfg.out_dir.join("run.json");
    std::fs::write(
        &meta_path,
        serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("writing {}: {e}", meta_path.display()))?;
    let tables = tables(&cfg.workload, out);
    let table_path = cfg.out_dir.join("tables.md");
    std::fs::write(&table_path, &tables)
        .map_err(|e| format!("writing {}: {e}", table_path.display()))?;
    print!("{tables}");
    let kept: Vec<Record> = out
        .records
        .iter()
        .filter(|r| r.keeps_up(DEFAULT_KEEP_UP))
        .cloned()
        .collect();
    let (points, which) = if kept.is_empty() {
        (&out.records, "all points")
    } else {
        (&kept, "points within 95% of offered")
    };
    let (svg, png) = (cfg.out_dir.join("kv.svg"), cfg.out_dir.join("kv.png"));
    let dp = match cfg.datapath {
        DatapathKind::Socket => "socket datapath",
        DatapathKind::Emu => "emulated ConnectX",
        DatapathKind::Xdp => "AF_XDP on veth",
    };
    let title = format!("kv {}, {dp} ({which})", out.workload);
    match plot_p99_curves(points, &title, &svg, &png) {
        Ok(()) => eprintln!("[bench] wrote {} and {}", svg.display(), png.display()),
        Err(e) => eprintln!("[bench] no plot: {e}"),
    }
    Ok(())
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"))
}

fn best(records: &[Record], mode: &str) -> Option<Record> {
    let rs: Vec<Record> = records.iter().filter(|r| r.mode == mode).cloned().collect();
    max_kept_up(&rs, DEFAULT_KEEP_UP).cloned()
}

fn kilo(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.1}", v / 1000.0))
}

/// The paper's Table 1 / Table 4 column for a Google configuration.
fn google_column(cfg: &WorkloadConfig) -> Option<usize> {
    match cfg {
        WorkloadConfig::Google(g) => match (g.min_list_len, g.max_list_len) {
            (1, 1) => Some(0),
            (1, 4) => Some(1),
            (1, 8) => Some(2),
            (1, 16) => Some(3),
            _ => None,
        },
        _ => None,
    }
}

const GOOGLE_COLUMNS: [&str; 4] = ["1 val", "1-4 vals", "1-8 vals", "1-16 vals"];
/// Table 1 (thousand req/s): Cornflakes, Protobuf, Cap'n Proto, FlatBuffers.
const PAPER_TABLE1: [(&str, [f64; 4]); 4] = [
    ("cornflakes", [844.7, 727.2, 584.5, 441.2]),
    ("protobuf", [852.5, 741.9, 583.8, 402.0]),
    ("capnp", [678.9, 612.9, 507.1, 412.0]),
    ("flatbuffers", [778.1, 646.4, 516.8, 388.9]),
];
/// Table 2 (thousand objects/s).
const PAPER_TABLE2: [(&str, f64); 4] = [
    ("capnp", 161.0),
    ("flatbuffers", 181.2),
    ("protobuf", 186.1),
    ("cornflakes", 366.5),
];
/// Table 4 (thousand req/s, Google).
const PAPER_TABLE4: [(&str, [f64; 4]); 3] = [
    ("cornflakes", [844.7, 727.2, 584.5, 441.2]),
    ("cornflakes-sg", [846.9, 717.2, 557.4, 387.1]),
    ("cornflakes-copy", [819.0, 693.2, 547.4, 411.8]),
];

fn bound_note(recs: &[Record], st: Option<&ServerStats>) -> String {
    let Some(last) = recs.last() else {
        return "not run".to_owned();
    };
    let busy = |rate: f64| {
        st.and_then(ServerStats::work_p50_ns)
            .map(|ns| ns * rate / 1e9 * 100.0)
    };
    if last.keeps_up(DEFAULT_KEEP_UP) {
        return "the offered-load list (the highest load was kept up; add higher --rates)"
            .to_owned();
    }
    let Some(b) = best(recs, &last.mode).map(|b| b.achieved_rps) else {
        return format!(
            "no point reached 95% of offered (lowest: {:.0} of {:.0} req/s, {} lost)",
            recs[0].achieved_rps, recs[0].offered_rps, recs[0].lost
        );
    };
    match busy(b) {
        Some(pct) if pct < 50.0 => format!(
            "saturated above {b:.0} req/s while the server's own request handling took ~{pct:.0}% of a core: the kernel socket path and the client threads bound it, not serialization"
        ),
        Some(pct) => format!(
            "saturated above {b:.0} req/s with the server's request handling at ~{pct:.0}% of a core (server-bound)"
        ),
        None => format!("saturated above {b:.0} req/s"),
    }
}

/// The Markdown tables: per serialization, then the paper's tables that apply to the workload,
/// our numbers beside the paper's.
pub fn tables(workload: &WorkloadConfig, out: &BenchOutcome) -> String {
    let recs = &out.records;
    let mut modes: Vec<&str> = Vec::new();
    for r in recs {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let server = |m: &str| {
        out.servers
            .iter()
            .find(|(s, _)| s.name() == m)
            .map(|(_, st)| st)
    };
    let objects = matches!(workload, WorkloadConfig::Cdn(_));
    let per_unit = out.requests_per_unit.max(1.0);
    let mut s = String::new();
    let _ = writeln!(s, "## kv bench: {}\n", out.workload);
    let _ = writeln!(s, "Datapath: {}.", out.datapath);
    let _ = writeln!(
        s,
        "Not the paper's testbed (a 100 Gbit/s ConnectX NIC, kernel bypass, dedicated cores): compare ratios between serializations, not absolute numbers.\n"
    );
    let unit_col = if objects { " | objects/s" } else { "" };
    let _ = writeln!(
        s,
        "| serialization | max req/s within 95% of offered{unit_col} | p99 there (µs) | p50 there (µs) | server work p50 (ns) | mismatched | lost | server malformed | what bounded it |"
    );
    let _ = writeln!(
        s,
        "|---|---:|{}---:|---:|---:|---:|---:|---:|---|",
        if objects { "---:|" } else { "" }
    );
    for m in &modes {
        let mine: Vec<Record> = recs.iter().filter(|r| r.mode == *m).cloned().collect();
        let b = best(recs, m);
        let st = server(m);
        let mismatched: u64 = mine.iter().map(|r| r.mismatched).sum();
        let lost: u64 = mine.iter().map(|r| r.lost).sum();
        let unit = if objects {
            format!(
                " | {}",
                b.as_ref().map_or("–".to_owned(), |b| format!(
                    "{:.0}",
                    b.achieved_rps / per_unit
                ))
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {m} | {}{unit} | {} | {} | {} | {mismatched} | {lost} | {} | {} |",
            b.as_ref().map_or("none kept up".to_owned(), |b| format!(
                "{:.0}",
                b.achieved_rps
            )),
            us(b.as_ref().and_then(|b| b.p99_us)),
            us(b.as_ref().and_then(|b| b.p50_us)),
            st.and_then(ServerStats::work_p50_ns)
                .map_or("–".to_owned(), |w| format!("{w:.0}")),
            st.map_or("–".to_owned(), |st| st.malformed.to_string()),
            out.bounds
                .iter()
                .find(|(b, _)| b == m)
                .map_or_else(|| bound_note(&mine, st), |(_, why)| why.clone()),
        );
    }
    let ours = |m: &str| best(recs, m).map(|b| b.achieved_rps);
    if let Some(col) = google_column(workload) {
        let _ = writeln!(
            s,
            "\n### Table 1 form: Google bytes sizes, {} (thousand req/s)\n\n| system | this run | paper (Table 1) |\n|---|---:|---:|",
            GOOGLE_COLUMNS[col]
        );
        for (sys, paper) in PAPER_TABLE1 {
            let _ = writeln!(s, "| {sys} | {} | {:.1} |", kilo(ours(sys)), paper[col]);
        }
    } else if matches!(workload, WorkloadConfig::Google(_)) {
        let _ = writeln!(
            s,
            "\n(Table 1 form: the paper measured list lengths 1, 1-4, 1-8 and 1-16 only.)"
        );
    }
    if objects {
        let _ = writeln!(
            s,
            "\n### Table 2 form: CDN images (thousand objects/s; {per_unit:.1} requests per object)\n\n| system | this run | paper (Table 2) |\n|---|---:|---:|"
        );
        for (sys, paper) in PAPER_TABLE2 {
            let _ = writeln!(
                s,
                "| {sys} | {} | {paper:.1} |",
                kilo(ours(sys).map(|r| r / per_unit))
            );
        }
    }
    let hybrid = ours("cornflakes");
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".to_owned(),
    };
    if modes.contains(&"cornflakes-sg") || modes.contains(&"cornflakes-copy") {
        let col = google_column(workload);
        let _ = writeln!(
            s,
            "\n### Table 4 form: hybrid vs only scatter-gather vs only copy (thousand req/s)\n\n| policy | this run | hybrid / this | paper{} |\n|---|---:|---:|---:|",
            col.map_or(String::new(), |c| format!(" (Table 4, Google {})", GOOGLE_COLUMNS[c]))
        );
        for (sys, paper) in PAPER_TABLE4 {
            let p = col.map_or_else(
                || match (workload, sys) {
                    (WorkloadConfig::Twitter(_), "cornflakes-sg") => {
                        "hybrid 2.3–3.9% above (Twitter, §6.5.1)".to_owned()
                    }
                    _ => "–".to_owned(),
                },
                |c| format!("{:.1}", paper[c]),
            );
            let _ = writeln!(
                s,
                "| {sys} | {} | {} | {p} |",
                kilo(ours(sys)),
                ratio(hybrid, ours(sys))
            );
        }
    }
    if modes.contains(&"cornflakes-no-ssend") {
        let paper = match workload {
            WorkloadConfig::Google(_) => "727 vs 675 krps (Google 1-4 vals): 1.077",
            WorkloadConfig::Twitter(_) => "899 vs 814 krps (Twitter): 1.104",
            WorkloadConfig::Ycsb(_) => "18.9 vs 16.1 Gbps (YCSB 1024x4): 1.174",
            WorkloadConfig::Cdn(_) => "not measured",
        };
        let _ = writeln!(
            s,
            "\n### Table 5 form: with and without serialize-and-send (thousand req/s)\n\n| | with | without | with / without | paper (Table 5) |\n|---|---:|---:|---:|---|\n| this run | {} | {} | {} | {paper} |",
            kilo(hybrid),
            kilo(ours("cornflakes-no-ssend")),
            ratio(hybrid, ours("cornflakes-no-ssend")),
        );
    }
    let libs_best = ["protobuf", "capnp", "flatbuffers"]
        .iter()
        .filter_map(|m| ours(m).map(|r| (*m, r)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let (Some(h), Some((lib, r))) = (hybrid, libs_best) {
        let _ = writeln!(
            s,
            "\ncornflakes / best of protobuf, capnp, flatbuffers ({lib}): {:.2} (highest load within 95% of offered; the issue's targets: Twitter ≥ 1.15, CDN ≥ 2, Google 1 value ≥ 0.98)",
            h / r
        );
        let _ = writeln!(s, "{}", equal_p99(recs, lib));
    }
    s
}

/// The paper's Figure 7 reading: cornflakes' throughput at the tail latency the best library
/// (`lib`) has at its highest load kept up, against that load. Coarse: it uses the loads the
/// run decided, not a dense latency-throughput curve.
fn equal_p99(recs: &[Record], lib: &str) -> String {
    let Some((lib_rps, bound)) = best(recs, lib).and_then(|b| Some((b.achieved_rps, b.p99_us?)))
    else {
        return format!("at equal p99: {lib} has no p99 at its highest load");
    };
    let mine: Vec<Record> = recs
        .iter()
        .filter(|r| r.mode == "cornflakes")
        .cloned()
        .collect();
    match max_kept_up_within_p99(&mine, DEFAULT_KEEP_UP, bound) {
        Some(c) => format!(
            "at equal p99 (≤ {bound:.0} µs, {lib}'s at its highest load; the paper's Figure 7 reading, over the loads this run decided): cornflakes {:.0} req/s (p99 {:.0} µs) / {lib} {lib_rps:.0} req/s = {:.2}",
            c.achieved_rps,
            c.p99_us.unwrap_or(f64::NAN),
            c.achieved_rps / lib_rps
        ),
        None => format!(
            "at equal p99 (≤ {bound:.0} µs, {lib}'s at its highest load): no load of cornflakes kept up within it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(mode: &str, offered: f64, achieved: f64) -> Record {
        Record {
            mode: mode.to_owned(),
            shape: "w".to_owned(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(10.0),
            p99_us: Some(20.0),
            p999_us: Some(30.0),
            mean_us: Some(11.0),
            sent: 10,
            received: 10,
            verified: 10,
            mismatched: 0,
            lost: 0,
            unexpected: 0,
            malformed: 0,
            errors: 0,
            threads: 1,
            measured_s: 1.0,
        }
    }

    #[test]
    fn tables_put_the_paper_beside_our_ratios() {
        let wl = WorkloadConfig::Google(kv_workloads::GoogleConfig {
            max_list_len: 4,
            ..Default::default()
        });
        let out = BenchOutcome {
            records: vec![
                rec("cornflakes", 1000.0, 1000.0),
                rec("cornflakes", 2000.0, 1000.0),
                rec("cornflakes-sg", 1000.0, 800.0),
                rec("cornflakes-copy", 1000.0, 1000.0),
                rec("cornflakes-no-ssend", 1000.0, 990.0),
            ],
            workload: "google 1-4".to_owned(),
            requests_per_unit: 1.0,
            datapath: DATAPATH_LABEL.to_owned(),
            ..Default::default()
        };
        let t = tables(&wl, &out);
        assert!(t.contains("Table 1 form"), "{t}");
        assert!(t.contains("| cornflakes | 1.0 | 727.2 |"), "{t}");
        assert!(t.contains("| cornflakes-sg | – | – | 717.2 |"), "{t}");
        assert!(
            t.contains("| cornflakes-copy | 1.0 | 1.00 | 693.2 |"),
            "{t}"
        );
        assert!(t.contains("| this run | 1.0 | 1.0 | 1.01 |"), "{t}");
        assert!(t.contains("saturated above 1000 req/s"), "{t}");
        assert!(t.contains(DATAPATH_LABEL));
    }

    #[test]
    fn the_equal_p99_reading_compares_at_the_best_librarys_tail() {
        let at = |mode: &str, offered: f64, achieved: f64, p99: f64| {
            let mut r = rec(mode, offered, achieved);
            r.p99_us = Some(p99);
            r
        };
        let wl = WorkloadConfig::default_for("twitter").unwrap();
        let mut out = BenchOutcome {
            records: vec![
                at("protobuf", 500.0, 500.0, 40.0),
                at("protobuf", 800.0, 790.0, 60.0),
                at("protobuf", 1000.0, 700.0, 900.0),
                at("flatbuffers", 600.0, 600.0, 30.0),
                at("cornflakes", 800.0, 800.0, 20.0),
                at("cornflakes", 1000.0, 1000.0, 50.0),
                at("cornflakes", 1200.0, 1190.0, 70.0),
            ],
            workload: "twitter".to_owned(),
            requests_per_unit: 1.0,
            ..Default::default()
        };
        // protobuf's best: 790 req/s at p99 60 µs; cornflakes' best within 60 µs: 1000.
        let t = tables(&wl, &out);
        assert!(
            t.contains("at equal p99 (≤ 60 µs, protobuf's") && t.contains("= 1.27"),
            "{t}"
        );
        // With every cornflakes load above the bound, it says so.
        for r in out.records.iter_mut().filter(|r| r.mode == "cornflakes") {
            r.p99_us = Some(500.0);
        }
        let t = tables(&wl, &out);
        assert!(t.contains("no load of cornflakes kept up within it"), "{t}");
    }

    #[test]
    fn cdn_tables_report_objects_per_second() {
        let wl = WorkloadConfig::default_for("cdn").unwrap();
        let out = BenchOutcome {
            records: vec![rec("cornflakes", 8000.0, 8000.0)],
            workload: "cdn".to_owned(),
            requests_per_unit: 4.0,
            ..Default::default()
        };
        let t = tables(&wl, &out);
        assert!(t.contains("| cornflakes | 8000 | 2000 |"), "{t}");
        assert!(t.contains("| cornflakes | 2.0 | 366.5 |"), "{t}");
    }

    #[test]
    fn loads_are_sorted_and_unique() {
        let cfg = BenchConfig {
            rates: vec![30.0, 10.0, 30.0, -1.0, f64::NAN],
            ..BenchConfig::default()
        };
        assert_eq!(cfg.loads(), vec![10.0, 30.0]);
    }
}
