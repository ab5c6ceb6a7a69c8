//! `echo calibrate`: the paper's §5 measurement as one command (docs/calibration.md).
//!
//! For every cell (S, K) of the grid and both [`Policy`]s, an open-loop load sweep against a
//! [`CalibServer`] (load raised until the server no longer keeps up); per cell the highest
//! throughput achieved at any load (the paper's metric), and the highest load kept up with
//! (within 95 % of offered) and the p99 there. Writes `calibration.json` (cells,
//! every sweep point, the recommendation), `heatmap.svg`/`heatmap.png` (sg / copy per cell, the
//! paper's Figure 5) and prints the recommended threshold, which the runtime takes from
//! `CORNFLAKES_CALIBRATION=<dir>/calibration.json`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cornflakes::datapath::Transmit as _;
use cornflakes::mem::MemoryConfig;
use cornflakes::threshold::CALIBRATION_KEY;
use cornflakes::Arena;
use datapath_socket::{SocketConfig, SocketDatapath};
use loadgen::{
    max_kept_up, plot_heatmap, run, sweep, Bound, Heatmap, Record, RunConfig, RunReport, Schedule,
    ScheduleConfig, SweepConfig, DEFAULT_KEEP_UP,
};
use serde_json::json;

use crate::bench::DatapathKind;
use crate::calib_server::{CalibClient, CalibServer, Cell, Policy, ARRAY_ITEM, MAX_SEGMENTS};
use crate::server::ServerStats;

/// Segment sizes S measured by default (bytes).
pub const DEFAULT_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 2048, 4096];
/// Segment counts K measured by default (clamped to the datapath's descriptor limit).
pub const DEFAULT_COUNTS: [usize; 4] = [1, 2, 4, 8];
/// The array is this many times the last-level cache by default (as in the paper).
pub const LLC_MULTIPLE: usize = 10;
/// Array size when the last-level cache size cannot be read.
pub const FALLBACK_ARRAY_BYTES: usize = 256 << 20;
/// Largest pinned buffer of the socket datapath's memory here (a copied reply is one buffer).
pub const SOCKET_MAX_ITEM: usize = 64 * 1024;
/// Room for the object and packet headers next to the K × S payload bytes.
const REPLY_OVERHEAD: usize = 512;

/// Everything `echo calibrate` does.
#[derive(Clone, Debug)]
pub struct CalibConfig {
    /// The server's datapath.
    pub datapath: DatapathKind,
    /// Segment sizes S (bytes).
    pub sizes: Vec<usize>,
    /// Segments per request K.
    pub counts: Vec<usize>,
    /// The array's size; `None`: [`LLC_MULTIPLE`] × the last-level cache.
    pub array_bytes: Option<usize>,
    /// Offered loads, ascending; each policy's sweep stops once it saturates (default:
    /// [`default_rates`] of the datapath).
    pub rates: Vec<f64>,
    /// Measured time per point.
    pub duration: Duration,
    /// Warm-up per point.
    pub warmup: Duration,
    /// Loss timeout.
    pub timeout: Duration,
    /// Client threads.
    pub threads: usize,
    /// IP MTU.
    pub mtu: usize,
    /// Stop a sweep after this many consecutive points below 95 % (0: run all).
    pub stop_after_misses: usize,
    /// Busy-poll server and clients.
    pub spin: bool,
    /// Where the outputs go.
    pub out_dir: PathBuf,
    /// Measure a `calibrate-server` running elsewhere instead of starting one.
    pub remote: Option<Remote>,
}

/// A calibration server started separately (`echo calibrate-server`, e.g. on a NIC machine).
#[derive(Clone, Debug)]
pub struct Remote {
    /// Its address.
    pub server: SocketAddrV4,
    /// The clients' address (`0.0.0.0`: any).
    pub bind: Ipv4Addr,
    /// Its descriptors per packet (header included; cells needing more are skipped).
    pub max_segments: usize,
    /// The largest reply it can copy into one buffer.
    pub max_reply: usize,
    /// Server cores on `server`'s port and the next ones, each holding `1/cores` of the array
    /// (`calibrate-server --cores`; `docs/cores.md`); requests are spread round-robin.
    pub cores: usize,
}

/// Descriptor limit assumed for `--server` without `--max-segments` (the E810's 8, the
/// smaller of the paper's NICs; a ConnectX takes 30).
pub const REMOTE_MAX_SEGMENTS: usize = 8;

/// Offered loads from `start` growing by `factor` up to `end`.
pub fn geometric_loads(start: f64, end: f64, factor: f64) -> Vec<f64> {
    let mut v = Vec::new();
    let mut r = start;
    while r <= end * 1.0001 && factor > 1.0 && r > 0.0 {
        v.push(r.round());
        r *= factor;
    }
    v
}

/// The default offered loads of `datapath`: from 10 k req/s (kernel datapaths), or 100 k
/// (emulated NIC: one core's throughput, no kernel), growing by 1.3× to 2 M / 5 M.
pub fn default_rates(datapath: DatapathKind) -> Vec<f64> {
    match datapath {
        DatapathKind::Emu => geometric_loads(100_000.0, 5_000_000.0, 1.3),
        _ => geometric_loads(10_000.0, 2_000_000.0, 1.3),
    }
}

impl Default for CalibConfig {
    fn default() -> Self {
        CalibConfig {
            datapath: DatapathKind::Socket,
            sizes: DEFAULT_SIZES.to_vec(),
            counts: DEFAULT_COUNTS.to_vec(),
            array_bytes: None,
            rates: default_rates(DatapathKind::Socket),
            duration: Duration::from_millis(300),
            warmup: Duration::from_millis(100),
            timeout: Duration::from_millis(200),
            threads: 1,
            mtu: crate::bench::DEFAULT_MTU,
            stop_after_misses: 2,
            spin: false,
            out_dir: PathBuf::from("results/calibrate"),
            remote: None,
        }
    }
}

/// Parses a cache size as sysfs writes it (`32768K`, `1M`, `512`).
pub fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mul) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

/// The size of CPU 0's highest-level data or unified cache, from `cache_dir`
/// (`/sys/devices/system/cpu/cpu0/cache`).
pub fn llc_bytes(cache_dir: &Path) -> Option<usize> {
    let mut best: Option<(u32, usize)> = None;
    for e in std::fs::read_dir(cache_dir).ok()?.flatten() {
        let p = e.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
        let (Some(level), Some(ty), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        if ty.trim() == "Instruction" {
            continue;
        }
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_cache_size(&size)) else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, s)| s)
}

/// The array size to use and how it was chosen.
pub fn array_size(cfg: &CalibConfig) -> (usize, String) {
    match cfg.array_bytes {
        Some(b) => (b, "--array-mib".to_owned()),
        None => match llc_bytes(Path::new("/sys/devices/system/cpu/cpu0/cache")) {
            Some(llc) => (
                LLC_MULTIPLE * llc,
                format!("{LLC_MULTIPLE} x the {} MiB last-level cache", llc >> 20),
            ),
            None => (
                FALLBACK_ARRAY_BYTES,
                "last-level cache size unreadable: fixed 256 MiB (set --array-mib)".to_owned(),
            ),
        },
    }
}

/// One policy's result in one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyResult {
    /// Highest achieved throughput (verified replies per second) across all offered loads —
    /// the paper's metric (§5.1). Past saturation an open-loop server answers at its
    /// capacity, so this is not limited to the steps of the load ladder. `None` when nothing
    /// was verified.
    pub max_rps: Option<f64>,
    /// Highest achieved load within 95 % of offered, if any point kept up.
    pub kept_up_rps: Option<f64>,
    /// p99 latency at that kept-up point (µs).
    pub p99_us: Option<f64>,
}

impl PolicyResult {
    /// Summarizes one policy's sweep.
    pub fn from_records(recs: &[Record]) -> PolicyResult {
        let best = max_kept_up(recs, DEFAULT_KEEP_UP);
        PolicyResult {
            max_rps: recs
                .iter()
                .filter(|r| r.verified > 0)
                .map(|r| r.achieved_rps)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
            kept_up_rps: best.map(|b| b.achieved_rps),
            p99_us: best.and_then(|b| b.p99_us),
        }
    }

    fn none() -> PolicyResult {
        PolicyResult {
            max_rps: None,
            kept_up_rps: None,
            p99_us: None,
        }
    }
}

/// One (S, K) cell's result.
#[derive(Clone, Debug, PartialEq)]
pub struct CellResult {
    /// Segment size.
    pub size: usize,
    /// Segments per request.
    pub count: usize,
    /// Copy policy.
    pub copy: PolicyResult,
    /// Scatter-gather policy.
    pub sg: PolicyResult,
    /// Why the cell was not measured, if it was not.
    pub skipped: Option<String>,
}

impl CellResult {
    /// Scatter-gather's highest throughput over copy's (> 1: scatter-gather wins).
    pub fn ratio(&self) -> Option<f64> {
        match (self.sg.max_rps, self.copy.max_rps) {
            (Some(s), Some(c)) if c > 0.0 => Some(s / c),
            _ => None,
        }
    }
}

/// The recommended threshold: the smallest measured S such that scatter-gather's highest
/// throughput is above copy's for every measured K at S **and at every larger measured S**
/// (so one noisy win below the crossover does not set it). `None` when no such S exists.
/// Cells not measured (skipped, or no point kept up) are left out of "every K"; a size with
/// no measured cell cannot be recommended.
pub fn recommend(cells: &[CellResult]) -> Option<usize> {
    let mut sizes: Vec<usize> = cells.iter().map(|c| c.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let wins = |s: usize| {
        let ratios: Vec<Option<f64>> = cells
            .iter()
            .filter(|c| c.size == s && c.skipped.is_none())
            .map(CellResult::ratio)
            .collect();
        !ratios.is_empty() && ratios.iter().all(|r| r.is_some_and(|r| r > 1.0))
    };
    let mut best = None;
    for &s in sizes.iter().rev() {
        if wins(s) {
            best = Some(s);
        } else {
            break;
        }
    }
    best
}

/// What a calibration produced.
#[derive(Debug, Default)]
pub struct Calibration {
    /// Per cell.
    pub cells: Vec<CellResult>,
    /// Every sweep point (mode `copy`/`sg`, shape `KxS`).
    pub records: Vec<Record>,
    /// See [`recommend`].
    pub recommended: Option<usize>,
    /// Bytes in the server's array.
    pub array_bytes: usize,
    /// How the array size was chosen.
    pub array_why: String,
    /// The server's counters at the end.
    pub server: ServerStats,
    /// The datapath's descriptor limit (scatter-gather entries per packet).
    pub max_segments: usize,
}

/// The calibration server on its own (unpinned) thread over the socket datapath.
struct SocketServer {
    addr: SocketAddrV4,
    items: usize,
    max_segments: usize,
    core: datapath_socket::cores::SocketCores<(usize, usize), ServerStats>,
}

impl SocketServer {
    fn spawn(sock: SocketConfig, array_bytes: usize, spin: bool) -> Result<SocketServer, String> {
        let mut cores = percore::CoresConfig::new("calibrate-server", 1);
        cores.pin = false;
        let stop = Arc::new(AtomicBool::new(false));
        let core = datapath_socket::cores::spawn_socket_cores(
            sock,
            &cores,
            stop,
            spin,
            None,
            move |dp, _| {
                let server = CalibServer::new(dp, array_bytes)?;
                let info = (server.items(), server.datapath().max_segments());
                Ok((server, info))
            },
        )?;
        let (addr, (items, max_segments)) = core.ready()[0];
        Ok(SocketServer {
            addr,
            items,
            max_segments,
            core,
        })
    }

    fn stop(self) -> Result<ServerStats, String> {
        self.core.stop().map(|per| ServerStats::sum(&per))
    }
}

/// Where the clients send and what the server can take.
struct Target {
    server: SocketAddrV4,
    /// The server's cores after the first (`server`): requests are spread over all of them.
    other_cores: Vec<SocketAddrV4>,
    bind: Ipv4Addr,
    items: usize,
    max_segments: usize,
    /// Largest reply the server can build in one buffer (copy policy).
    max_reply: usize,
}

fn run_point(
    cfg: &CalibConfig,
    t: &Target,
    cell: Cell,
    rate: f64,
    seed: u64,
) -> Result<RunReport, String> {
    thread_local! {
        static CHECK: std::cell::RefCell<(Arena, Vec<u64>)> =
            std::cell::RefCell::new((Arena::new(), Vec::new()));
    }
    let checker = move |id: u64, payload: &[u8]| {
        CHECK.with(|c| {
            let mut c = c.borrow_mut();
            let (arena, offsets) = &mut *c;
            arena.reset();
            cell.check(id, payload, arena, offsets)
        })
    };
    let run_cfg = RunConfig {
        warmup: cfg.warmup,
        timeout: cfg.timeout,
        busy_poll: cfg.spin,
        progress: false,
    };
    let schedule = Schedule::poisson(&ScheduleConfig {
        rate_rps: rate,
        bound: Bound::Duration(cfg.warmup + cfg.duration),
        threads: cfg.threads.max(1),
        seed,
    })
    .map_err(|e| format!("schedule at {rate} req/s: {e}"))?;
    let make = |thread: usize| {
        let mut sc = SocketConfig::new(SocketAddrV4::new(t.bind, 0));
        sc.mtu = cfg.mtu;
        sc.memory.max_item_size = SOCKET_MAX_ITEM;
        let dp = SocketDatapath::new(sc).map_err(std::io::Error::other)?;
        let cores: Vec<SocketAddrV4> = std::iter::once(t.server)
            .chain(t.other_cores.iter().copied())
            .collect();
        CalibClient::spread(dp, &cores, thread, cell)
    };
    run(&schedule, &run_cfg, make, &checker).map_err(|e| {
        format!(
            "{} {}x{} at {rate} req/s: {e}",
            cell.policy.name(),
            cell.count,
            cell.size
        )
    })
}

fn measure(
    cfg: &CalibConfig,
    t: &Target,
    mut point: impl FnMut(Cell, f64, u64) -> Result<RunReport, String>,
) -> Result<(Vec<CellResult>, Vec<Record>), String> {
    let mut cells = Vec::new();
    let mut records = Vec::new();
    let mut seed = 1u64;
    let n = cfg.sizes.len() * cfg.counts.len();
    for &count in &cfg.counts {
        for &size in &cfg.sizes {
            let skipped = if count == 0 || size == 0 || size > ARRAY_ITEM {
                Some(format!("S must be 1..={ARRAY_ITEM} and K at least 1"))
            } else if count > MAX_SEGMENTS || count + 1 > t.max_segments {
                Some(format!(
                    "K = {count} needs {} descriptors; the datapath takes {}",
                    count + 1,
                    t.max_segments
                ))
            } else if count * size + REPLY_OVERHEAD > t.max_reply {
                Some(format!(
                    "a copied reply of {count} x {size} B exceeds the datapath's largest reply ({} B)",
                    t.max_reply
                ))
            } else {
                None
            };
            let mut res = CellResult {
                size,
                count,
                copy: PolicyResult::none(),
                sg: PolicyResult::none(),
                skipped: skipped.clone(),
            };
            if let Some(why) = skipped {
                eprintln!("[calibrate] skipping K={count} S={size}: {why}");
                cells.push(res);
                continue;
            }
            eprintln!(
                "[calibrate] cell {}/{n}: K={count} S={size}",
                cells.len() + 1
            );
            for policy in Policy::BOTH {
                let cell = Cell {
                    size,
                    count,
                    policy,
                    items: t.items,
                };
                let sc = SweepConfig {
                    mode: policy.name().to_owned(),
                    shape: format!("{count}x{size}"),
                    loads_rps: cfg.rates.clone(),
                    keep_up: DEFAULT_KEEP_UP,
                    stop_after_misses: cfg.stop_after_misses,
                    progress: true,
                };
                let recs = sweep(&sc, |rate| {
                    seed += 1;
                    point(cell, rate, seed)
                })?;
                let r = PolicyResult::from_records(&recs);
                match policy {
                    Policy::Copy => res.copy = r,
                    Policy::ScatterGather => res.sg = r,
                }
                records.extend(recs);
            }
            eprintln!(
                "[calibrate] K={count} S={size}: copy {} req/s, sg {} req/s, sg/copy {}",
                fmt_opt(res.copy.max_rps, 0),
                fmt_opt(res.sg.max_rps, 0),
                fmt_opt(res.ratio(), 2)
            );
            cells.push(res);
        }
    }
    Ok((cells, records))
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

/// Why `calibrate --datapath mlx5|ice` does not run here, and what to do instead.
pub fn unsupported_datapath(nic: &str) -> String {
    format!(
        "SKIPPED calibrate --datapath {nic}: the server needs the NIC and the clients another \
         machine; run `echo calibrate-server --datapath {nic} ...` on the NIC machine and \
         `echo calibrate --server IP:PORT ...` on a client machine (docs/calibration.md, \
         \"NIC datapaths\")"
    )
}

/// Runs the calibration and writes its outputs.
pub fn run_calibration(cfg: &CalibConfig) -> Result<Calibration, String> {
    if cfg.sizes.is_empty() || cfg.counts.is_empty() || cfg.rates.is_empty() {
        return Err("nothing to measure: --sizes, --counts and --rates need values".into());
    }
    let (array_bytes, array_why) = array_size(cfg);
    eprintln!(
        "[calibrate] {} sizes x {} counts x 2 policies, array {} MiB ({array_why}), {} loads from {:.0} req/s, {:?} per point (+{:?} warm-up), {}",
        cfg.sizes.len(),
        cfg.counts.len(),
        array_bytes >> 20,
        cfg.rates.len(),
        cfg.rates[0],
        cfg.duration,
        cfg.warmup,
        label(cfg.datapath)
    );
    let mut out = match (&cfg.remote, cfg.datapath) {
        (Some(r), _) => {
            let cores = r.cores.max(1);
            let t = Target {
                server: r.server,
                other_cores: (1..cores)
                    .map(|i| percore::core_addr(r.server, i))
                    .collect::<Result<_, _>>()?,
                bind: r.bind,
                // Each core holds its shard: the requests name items of one shard.
                items: (array_bytes / cores).div_ceil(ARRAY_ITEM).max(1),
                max_segments: r.max_segments,
                max_reply: r.max_reply,
            };
            let (cells, records) = measure(cfg, &t, |cell, rate, seed| {
                run_point(cfg, &t, cell, rate, seed)
            })?;
            Calibration {
                cells,
                records,
                max_segments: t.max_segments,
                ..Calibration::default()
            }
        }
        (None, DatapathKind::Socket) => {
            let mut sc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
            sc.mtu = cfg.mtu;
            sc.memory = MemoryConfig {
                max_item_size: SOCKET_MAX_ITEM,
                max_bytes: array_bytes + (256 << 20),
                ..MemoryConfig::default()
            };
            let server = SocketServer::spawn(sc, array_bytes, cfg.spin)?;
            let t = Target {
                server: server.addr,
                other_cores: Vec::new(),
                bind: Ipv4Addr::LOCALHOST,
                items: server.items,
                max_segments: server.max_segments,
                max_reply: SOCKET_MAX_ITEM,
            };
            let measured = measure(cfg, &t, |cell, rate, seed| {
                run_point(cfg, &t, cell, rate, seed)
            });
            let stats = server.stop()?;
            let (cells, records) = measured?;
            Calibration {
                cells,
                records,
                server: stats,
                max_segments: t.max_segments,
                ..Calibration::default()
            }
        }
        (None, DatapathKind::Xdp) => run_xdp(cfg, array_bytes)?,
        (None, DatapathKind::Emu) => run_emu(cfg, array_bytes)?,
    };
    out.array_bytes = array_bytes;
    out.array_why = array_why;
    out.recommended = recommend(&out.cells);
    write_outputs(cfg, &out)?;
    Ok(out)
}

fn label(d: DatapathKind) -> &'static str {
    match d {
        DatapathKind::Socket => "socket datapath on 127.0.0.1",
        DatapathKind::Xdp => "AF_XDP server on a veth",
        DatapathKind::Emu => "server core vs an emulated ConnectX on a second core",
    }
}

/// Distinct requests per cell on the emulated NIC (its clients cycle through prepared frames).
pub const EMU_DISTINCT_REQUESTS: usize = 1024;

/// The emulated-ConnectX variant: per load point, the calibration server on one core drives
/// the ConnectX driver against the emulated device on another, whose thread plays the clients
/// (crate `emu-bench`). It measures the **server core's side of the trade-off only**: copying
/// vs building descriptors and handling completions, with no DMA, PCIe or wire cost.
fn run_emu(cfg: &CalibConfig, array_bytes: usize) -> Result<Calibration, String> {
    use cornflakes::PinnedMemory;
    use emu_bench::{EmuRunConfig, Request};

    let items = array_bytes.div_ceil(ARRAY_ITEM).max(1);
    let defaults = EmuRunConfig::default();
    let t = Target {
        server: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        other_cores: Vec::new(),
        bind: Ipv4Addr::UNSPECIFIED,
        items,
        max_segments: defaults.max_send_sge,
        // Replies must fit one frame of the emulated wire.
        max_reply: cfg.mtu,
    };
    let mut server_stats = ServerStats::default();
    let measured = measure(cfg, &t, |cell, rate, seed| {
        let (mut offs, mut buf) = (Vec::new(), Vec::new());
        let requests: Vec<Request> = (0..EMU_DISTINCT_REQUESTS as u64)
            .map(|i| {
                cell.offsets(i, &mut offs);
                cell.encode(&offs, &mut buf);
                Request::new(crate::calib_server::CALIB_MSG_TYPE, buf.clone())
            })
            .collect();
        let run_cfg = EmuRunConfig {
            rate_rps: rate,
            duration: cfg.duration,
            warmup: cfg.warmup,
            timeout: cfg.timeout,
            seed,
            mtu: cfg.mtu,
            ..EmuRunConfig::default()
        };
        let mut check_offs = Vec::new();
        // Runs on the device thread, for sampled replies (an arena is per-thread, so per call).
        let checker = move |i: usize, reply: &[u8]| {
            let arena = Arena::new();
            if cell.check_with_id(i as u64, None, reply, &arena, &mut check_offs) {
                Ok(())
            } else {
                Err(format!(
                    "{} {}x{}: reply to request {i} does not hold its segments",
                    cell.policy.name(),
                    cell.count,
                    cell.size
                ))
            }
        };
        let (report, stats) = emu_bench::run(&run_cfg, &requests, checker, move |port| {
            let mem = PinnedMemory::new(MemoryConfig {
                // The array in one region from the start, registered with the device.
                initial_bytes: items * ARRAY_ITEM + (32 << 20),
                max_bytes: items * ARRAY_ITEM + (256 << 20),
                ..port.memory_config()
            })
            .map_err(|e| format!("server memory: {e}"))?;
            // Filled before the datapath exists: requests arrive once it does.
            let array = crate::calib_server::fill_array(&mem, items * ARRAY_ITEM)?;
            let dp = port
                .datapath(mem)
                .map_err(|e| format!("server datapath: {e}"))?;
            let mut server = CalibServer::with_array(dp, array);
            server.run(
                port.stop_flag(),
                None,
                crate::server::IDLE_SPINS,
                &mut |_| std::hint::spin_loop(),
            );
            Ok::<ServerStats, String>(server.stats())
        })?;
        for f in &report.failures {
            eprintln!("[calibrate]   {f}");
        }
        server_stats = stats?;
        Ok(report.run)
    });
    let (cells, records) = measured?;
    Ok(Calibration {
        cells,
        records,
        server: server_stats,
        max_segments: t.max_segments,
        ..Calibration::default()
    })
}

/// The AF_XDP variant: the server in a child process in a namespace (see [`crate::xdp`]).
#[cfg(feature = "xdp")]
fn run_xdp(cfg: &CalibConfig, array_bytes: usize) -> Result<Calibration, String> {
    use crate::xdp::{create_netns, ServerProcess};
    let ns = create_netns(cfg.mtu)?;
    let items = array_bytes.div_ceil(ARRAY_ITEM).max(1);
    let server = ServerProcess::spawn_args(
        &ns,
        7000,
        &[
            "calibrate-server".to_owned(),
            "--array-bytes".to_owned(),
            (items * ARRAY_ITEM).to_string(),
        ],
    )?;
    let t = Target {
        server: server.addr,
        other_cores: Vec::new(),
        bind: ns.client_ip,
        items,
        max_segments: datapath_xdp::xsk::MAX_TX_DESCRIPTORS,
        // The UMEM's largest buffer (datapath_xdp::umem_memory).
        max_reply: 16 * 1024,
    };
    let measured = measure(cfg, &t, |cell, rate, seed| {
        run_point(cfg, &t, cell, rate, seed)
    });
    let stats = server.stop()?;
    drop(ns);
    let (cells, records) = measured?;
    Ok(Calibration {
        cells,
        records,
        server: stats,
        max_segments: t.max_segments,
        ..Calibration::default()
    })
}

#[cfg(not(feature = "xdp"))]
fn run_xdp(_cfg: &CalibConfig, _array_bytes: usize) -> Result<Calibration, String> {
    Err(
        "--datapath xdp needs the `xdp` feature (clang and libbpf-dev: \
         crates/datapath-xdp/APT_PACKAGES) and root: \
         cargo run --release -p echo --features xdp -- calibrate --datapath xdp"
            .to_owned(),
    )
}

/// The calibration file's JSON (the runtime reads its top-level [`CALIBRATION_KEY`]).
pub fn to_json(cfg: &CalibConfig, c: &Calibration) -> serde_json::Value {
    let policy = |p: &PolicyResult| json!({"max_rps": p.max_rps, "kept_up_rps": p.kept_up_rps, "p99_us": p.p99_us});
    let cells: Vec<serde_json::Value> = c
        .cells
        .iter()
        .map(|x| {
            json!({
                "size": x.size,
                "count": x.count,
                "copy": policy(&x.copy),
                "sg": policy(&x.sg),
                "sg_over_copy": x.ratio(),
                "skipped": x.skipped,
            })
        })
        .collect();
    let mut v = json!({
        "datapath": cfg.remote.as_ref().map_or_else(
            || label(cfg.datapath).to_owned(),
            |r| format!("remote calibrate-server at {}", r.server),
        ),
        "max_segments": c.max_segments,
        "array_bytes": c.array_bytes,
        "array_size_from": c.array_why,
        "sizes": cfg.sizes,
        "counts": cfg.counts,
        "offered_rps": cfg.rates,
        "duration_s": cfg.duration.as_secs_f64(),
        "warmup_s": cfg.warmup.as_secs_f64(),
        "client_threads": cfg.threads,
        "keep_up": DEFAULT_KEEP_UP,
        "rule": "smallest measured segment size S at which sg/copy > 1 for every measured K, at S and at every larger measured S",
        "cells": cells,
        "server": {
            "received": c.server.received,
            "answered": c.server.echoed,
            "malformed": c.server.malformed,
            "send_failed": c.server.send_failed,
        },
        "records": c.records,
    });
    v[CALIBRATION_KEY] = json!(c.recommended);
    v
}

/// The heatmap of sg / copy per cell.
pub fn heatmap(cfg: &CalibConfig, c: &Calibration) -> Heatmap {
    let value = |size: usize, count: usize| {
        c.cells
            .iter()
            .find(|x| x.size == size && x.count == count)
            .and_then(CellResult::ratio)
    };
    let threshold = c
        .recommended
        .map_or_else(|| "none".to_owned(), |t| format!("{t} B"));
    Heatmap {
        title: format!(
            "sg vs copy max throughput, {}; threshold {threshold}",
            label(cfg.datapath)
        ),
        x_desc: "segment size S (bytes)".into(),
        y_desc: "segments per response K".into(),
        x_labels: cfg.sizes.iter().map(usize::to_string).collect(),
        y_labels: cfg.counts.iter().map(usize::to_string).collect(),
        values: cfg
            .counts
            .iter()
            .map(|&k| cfg.sizes.iter().map(|&s| value(s, k)).collect())
            .collect(),
        mark_column: c
            .recommended
            .and_then(|t| cfg.sizes.iter().position(|&s| s == t)),
    }
}

fn write_outputs(cfg: &CalibConfig, c: &Calibration) -> Result<(), String> {
    let dir = &cfg.out_dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join("calibration.json");
    let text = serde_json::to_string_pretty(&to_json(cfg, c)).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("[calibrate] wrote {}", path.display());
    let (svg, png) = (dir.join("heatmap.svg"), dir.join("heatmap.png"));
    match plot_heatmap(&heatmap(cfg, c), &svg, &png) {
        Ok(()) => eprintln!("[calibrate] wrote {} and {}", svg.display(), png.display()),
        Err(e) => eprintln!("[calibrate] no heatmap: {e}"),
    }
    print!("{}", table(cfg, c));
    match c.recommended {
        Some(t) => println!(
            "recommended threshold: {t} B\nuse it: CORNFLAKES_CALIBRATION={} <your program>   (or CORNFLAKES_THRESHOLD={t})",
            path.display()
        ),
        None => println!(
            "recommended threshold: none — scatter-gather did not beat copy for every K at any measured size \
             (keep the default, or measure larger sizes with --sizes)"
        ),
    }
    Ok(())
}

/// The per-cell table (Markdown): rows K, columns S, `sg/copy` ratios.
pub fn table(cfg: &CalibConfig, c: &Calibration) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("| K \\ S |");
    for size in &cfg.sizes {
        let _ = write!(s, " {size} |");
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(cfg.sizes.len()));
    s.push('\n');
    for &k in &cfg.counts {
        let _ = write!(s, "| {k} |");
        for &size in &cfg.sizes {
            let r = c
                .cells
                .iter()
                .find(|x| x.size == size && x.count == k)
                .and_then(CellResult::ratio);
            let _ = write!(s, " {} |", fmt_opt(r, 2));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(size: usize, count: usize, copy: f64, sg: f64) -> CellResult {
        CellResult {
            size,
            count,
            copy: PolicyResult {
                max_rps: Some(copy),
                kept_up_rps: Some(copy),
                p99_us: Some(10.0),
            },
            sg: PolicyResult {
                max_rps: Some(sg),
                kept_up_rps: Some(sg),
                p99_us: Some(10.0),
            },
            skipped: None,
        }
    }

    #[test]
    fn recommendation_is_the_smallest_size_where_sg_wins_for_every_k_from_there_up() {
        let mut cells = vec![
            cell(64, 1, 100.0, 80.0),
            cell(64, 2, 100.0, 70.0),
            cell(512, 1, 100.0, 120.0),
            cell(512, 2, 100.0, 99.0), // copy still wins at K = 2
            cell(1024, 1, 100.0, 130.0),
            cell(1024, 2, 100.0, 110.0),
        ];
        assert_eq!(recommend(&cells), Some(1024));
        cells[3].sg.max_rps = Some(101.0);
        assert_eq!(recommend(&cells), Some(512));
        // A win below a loss does not count.
        cells[0].sg.max_rps = Some(150.0);
        cells[1].sg.max_rps = Some(150.0);
        cells[3].sg.max_rps = Some(90.0);
        assert_eq!(recommend(&cells), Some(1024));
        // Never winning at the largest size: no recommendation.
        cells[5].sg.max_rps = Some(50.0);
        assert_eq!(recommend(&cells), None);
        // A cell where nothing was verified is not a win.
        cells[5].sg.max_rps = None;
        assert_eq!(recommend(&cells), None);
        // Skipped cells are left out of "every K".
        cells[5].skipped = Some("too large".into());
        assert_eq!(recommend(&cells), Some(1024));
        assert_eq!(recommend(&[]), None);
    }

    #[test]
    fn policy_result_takes_the_highest_throughput_at_any_load() {
        let rec = |offered: f64, achieved: f64, verified: u64| Record {
            mode: "sg".into(),
            shape: "2x512".into(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(5.0),
            p99_us: Some(offered / 100.0),
            p999_us: None,
            mean_us: None,
            sent: 1,
            received: verified,
            verified,
            mismatched: 0,
            lost: 0,
            unexpected: 0,
            malformed: 0,
            errors: 0,
            threads: 1,
            measured_s: 1.0,
        };
        // Kept up at 100 and 130; saturated at 169 (150 achieved) and 220 (140).
        let recs = [
            rec(100.0, 99.0, 10),
            rec(130.0, 128.0, 10),
            rec(169.0, 150.0, 10),
            rec(220.0, 140.0, 10),
        ];
        let r = PolicyResult::from_records(&recs);
        assert_eq!(r.max_rps, Some(150.0));
        assert_eq!(r.kept_up_rps, Some(128.0));
        assert_eq!(r.p99_us, Some(1.3));
        let r = PolicyResult::from_records(&[rec(100.0, 0.0, 0)]);
        assert_eq!((r.max_rps, r.kept_up_rps), (None, None));
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size("lots"), None);
    }

    #[test]
    fn llc_is_the_highest_level_data_cache() {
        let dir = std::env::temp_dir().join(format!("calib-cache-{}", std::process::id()));
        for (i, level, ty, size) in [
            (0, "1", "Data", "32K"),
            (1, "1", "Instruction", "64M"),
            (2, "3", "Unified", "16384K"),
            (3, "2", "Unified", "1M"),
        ] {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), level).unwrap();
            std::fs::write(d.join("type"), ty).unwrap();
            std::fs::write(d.join("size"), size).unwrap();
        }
        assert_eq!(llc_bytes(&dir), Some(16 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(llc_bytes(Path::new("/nonexistent")), None);
    }

    #[test]
    fn geometric_loads_grow_to_the_end() {
        assert_eq!(geometric_loads(10.0, 40.0, 2.0), vec![10.0, 20.0, 40.0]);
        assert!(geometric_loads(10.0, 40.0, 1.0).is_empty());
    }
}
