//! `calibrate run`: the paper's §5 measurement as one command (docs/calibration.md).
//!
//! For every cell (S, K) of the grid, the saturation load of both [`Policy`]s against a
//! [`CalibServer`](crate::server::CalibServer), found with the project's saturation search ([`loadgen::search`]: median of
//! up to K trials per load, a doubling grid until a sustained miss, bisection to a resolution),
//! copy and scatter-gather of a cell interleaved trial by trial (on the emulated NIC through
//! the emulated benches' skeleton, [`emu_bench::EmuBench`], which reruns a trial slowed by the
//! machine's slow state). Per cell and policy: the
//! median achieved load at the highest load kept up and the min–max spread of the trials
//! around saturation ([`PolicyResult`]); a cell has a clear winner only when the two spreads
//! do not overlap ([`CellResult::outcome`]), and the recommended threshold rests only on clear
//! scatter-gather wins ([`recommend`]). Writes `calibration.json` (cells with their spreads,
//! every trial, the recommendation), `heatmap.svg`/`heatmap.png` (sg / copy per cell, the
//! paper's Figure 5) and prints the recommended threshold, which the runtime takes from
//! `CORNFLAKES_CALIBRATION=<dir>/calibration.json`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::time::Duration;

use cornflakes::mem::MemoryConfig;
use cornflakes::threshold::CALIBRATION_KEY;
use cornflakes::Arena;
use datapath_socket::{SocketConfig, SocketDatapath};
use loadgen::args::LoadConfig;
use loadgen::search::{doubling_grid, search, SearchConfig};
use loadgen::{plot_heatmap, run, Heatmap, Record, RunReport, DEFAULT_KEEP_UP};
use serde_json::json;

use crate::server::{
    CalibClient, Cell, Policy, ServerHandle, ServerStats, ARRAY_ITEM, MAX_SEGMENTS,
};

mod rule;
pub use rule::{recommend, CalibTrial, CellResult, Outcome, PolicyResult};

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

/// The datapath the calibration server runs on (`run --datapath`, one of [`RUN_DATAPATHS`]).
pub use app_server::DatapathKind;

/// What `calibrate run` runs on: kernel UDP sockets on 127.0.0.1 (server and clients in this
/// process), AF_XDP on a veth in a network namespace (server in a child process; feature `xdp`,
/// root), or the ConnectX driver on one core against the emulated ConnectX on a second core,
/// which also plays the clients (2 CPUs).
pub const RUN_DATAPATHS: [DatapathKind; 3] =
    [DatapathKind::Socket, DatapathKind::Xdp, DatapathKind::Emu];

/// IP MTU of the datapaths unless `--mtu` says otherwise: a jumbo frame, as in the paper
/// (§6.1), so a 2 × 2048 B message is one datagram; the C API's socket default too.
pub use datapath_socket::JUMBO_MTU as DEFAULT_MTU;

/// Everything `calibrate run` does.
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
    /// The load flags: `load.rates` is the saturation search's coarse grid of offered loads
    /// (default: [`default_rates`] of the datapath; each policy's search ends at its first
    /// sustained miss, then bisects), `load.duration` and `load.warmup` are per trial
    /// (default: [`CALIB_DURATION`], or [`CALIB_EMU_DURATION`] on the emulated NIC, and
    /// [`CALIB_WARMUP`]); the outputs go to `load.out_dir` (default `results/calibrate`).
    pub load: LoadConfig,
    /// Trials per load at most (the median decides whether a load is kept up).
    pub trials: usize,
    /// Bisection stops when the saturation bracket is within this fraction of its lower end.
    pub resolution: f64,
    /// Run every grid load (for plots) before bisecting (`--all-points`).
    pub whole_grid: bool,
    /// Measure a `calibrate server` running elsewhere instead of starting one.
    pub remote: Option<Remote>,
}

/// A calibration server started separately (`calibrate server`, e.g. on a NIC machine).
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
    /// (`calibrate server --cores`; `docs/cores.md`); requests are spread round-robin.
    pub cores: usize,
}

/// Descriptor limit assumed for `--server` without `--max-segments` (the E810's 8, the
/// smaller of the paper's NICs; a ConnectX takes 30).
pub const REMOTE_MAX_SEGMENTS: usize = 8;

/// Default bisection resolution of the calibration (coarser than the benches' 5 %: a cell
/// compares two policies' trial spreads, and the bracket's upper end is part of the spread).
pub const CALIB_RESOLUTION: f64 = 0.10;
/// Default measured time per trial on the kernel datapaths and a remote server.
pub const CALIB_DURATION: Duration = Duration::from_millis(150);
/// Default measured time per trial on the emulated NIC (100 k+ replies per trial; each trial
/// also sets up a fresh server and fills its array, which dominates the budget).
pub const CALIB_EMU_DURATION: Duration = Duration::from_millis(100);
/// Default warm-up per trial.
pub const CALIB_WARMUP: Duration = Duration::from_millis(50);

/// The default coarse grid of `datapath`: doubling from 10 k req/s (kernel datapaths and a
/// remote server) or 200 k (emulated NIC: one core's throughput, no kernel). The search stops
/// at the first sustained miss, so the high end of the grid costs nothing unless reached.
pub fn default_rates(datapath: DatapathKind) -> Vec<f64> {
    match datapath {
        DatapathKind::Emu => doubling_grid(200_000.0, 12_800_000.0),
        _ => doubling_grid(10_000.0, 5_120_000.0),
    }
}

/// The default loss timeout of `datapath` (the emulated NIC answers in microseconds).
pub fn default_timeout(datapath: DatapathKind) -> Duration {
    match datapath {
        DatapathKind::Emu => Duration::from_millis(20),
        _ => Duration::from_millis(100),
    }
}

impl CalibConfig {
    /// The defaults for `datapath` (grid, trial duration and loss timeout depend on it).
    pub fn for_datapath(datapath: DatapathKind) -> CalibConfig {
        CalibConfig {
            datapath,
            sizes: DEFAULT_SIZES.to_vec(),
            counts: DEFAULT_COUNTS.to_vec(),
            array_bytes: None,
            load: LoadConfig {
                duration: match datapath {
                    DatapathKind::Emu => CALIB_EMU_DURATION,
                    _ => CALIB_DURATION,
                },
                warmup: CALIB_WARMUP,
                timeout: default_timeout(datapath),
                ..LoadConfig::new(default_rates(datapath), DEFAULT_MTU, "results/calibrate")
            },
            trials: loadgen::search::DEFAULT_TRIALS,
            resolution: CALIB_RESOLUTION,
            whole_grid: false,
            remote: None,
        }
    }

    /// The saturation search this configuration runs per cell.
    pub fn search_config(&self) -> SearchConfig {
        SearchConfig {
            trials: self.trials,
            resolution: self.resolution,
            whole_grid: self.whole_grid,
            ..SearchConfig::new(self.load.rates.clone())
        }
    }
}

impl Default for CalibConfig {
    fn default() -> Self {
        CalibConfig::for_datapath(DatapathKind::Socket)
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

/// What a calibration produced.
#[derive(Debug, Default)]
pub struct Calibration {
    /// Per cell.
    pub cells: Vec<CellResult>,
    /// Every trial's record (mode `copy`/`sg`, shape `KxS`), in the order run.
    pub records: Vec<Record>,
    /// See [`recommend`].
    pub recommended: Option<usize>,
    /// Bytes in the server's array.
    pub array_bytes: usize,
    /// How the array size was chosen.
    pub array_why: String,
    /// The server's counters at the end (emulated NIC: summed over every trial's server).
    pub server: ServerStats,
    /// The datapath's descriptor limit (scatter-gather entries per packet).
    pub max_segments: usize,
}

/// The calibration server on its own (unpinned) thread over the socket datapath.
struct SocketServer {
    addr: SocketAddrV4,
    items: usize,
    max_segments: usize,
    handle: ServerHandle,
}

impl SocketServer {
    fn spawn(sock: SocketConfig, array_bytes: usize, spin: bool) -> Result<SocketServer, String> {
        let handle =
            ServerHandle::spawn_one("calibrate-server", sock, None, spin, move |mem, _| {
                crate::server::Calib::new(mem, array_bytes)
            })?;
        Ok(SocketServer {
            addr: handle.addr(),
            items: crate::server::items_for(array_bytes),
            max_segments: handle.max_segments(),
            handle,
        })
    }

    fn stop(self) -> Result<ServerStats, String> {
        self.handle.stop().map_err(|e| e.to_string())
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
    let run_cfg = cfg.load.run_config();
    let schedule = cfg.load.schedule(rate, seed)?;
    let make = |thread: usize| {
        let mut sc = SocketConfig::new(SocketAddrV4::new(t.bind, 0));
        sc.mtu = cfg.load.mtu;
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

/// Which cells the datapath cannot take, and why.
fn skip_reason(t: &Target, size: usize, count: usize) -> Option<String> {
    if count == 0 || size == 0 || size > ARRAY_ITEM {
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
    }
}

/// Per cell, the saturation search of both policies (copy lane 0, scatter-gather lane 1),
/// interleaved trial by trial; `point` runs one trial of a cell's policy at an offered load.
fn measure(
    cfg: &CalibConfig,
    t: &Target,
    mut point: impl FnMut(Cell, f64, u64) -> Result<RunReport, String>,
) -> Result<(Vec<CellResult>, Vec<Record>), String> {
    let scfg = cfg.search_config();
    let mut seed = 1u64;
    measure_cells(cfg, t, |size, count| {
        let shape = format!("{count}x{size}");
        let searches = search(&scfg, Policy::BOTH.len(), |p| {
            let policy = Policy::BOTH[p.lane];
            let cell = Cell {
                size,
                count,
                policy,
                items: t.items,
            };
            seed += 1;
            let report = point(cell, p.offered_rps, seed)?;
            let record = Record::from_report(policy.name(), &shape, &report);
            eprintln!(
                "[calibrate]   {:<4} {:>6} offered {:>9.0} trial {}  achieved {:>9.0}  p99 {:>9}  {}",
                policy.name(),
                p.phase,
                p.offered_rps,
                p.trial + 1,
                record.achieved_rps,
                record.p99_us.map_or("–".to_owned(), |v| format!("{v:.1}µs")),
                report.counters
            );
            Ok::<_, String>(CalibTrial {
                point: p,
                record,
                device: None,
            })
        })?;
        let records = searches
            .iter()
            .flat_map(|s| s.loads.iter())
            .flat_map(|v| v.trials.iter().map(|t| t.record.clone()))
            .collect();
        Ok(CellSearch {
            copy: PolicyResult::from_search(&searches[0]),
            sg: PolicyResult::from_search(&searches[1]),
            records,
        })
    })
}

/// Both policies of one cell searched: their results and every trial's record (copy's
/// trials, then sg's).
struct CellSearch {
    copy: PolicyResult,
    sg: PolicyResult,
    records: Vec<Record>,
}

/// Every cell (S, K) of the grid in order: skipped with its reason when the datapath cannot
/// take it ([`skip_reason`]), else searched by `search_cell(S, K)`, and its outcome said.
fn measure_cells(
    cfg: &CalibConfig,
    t: &Target,
    mut search_cell: impl FnMut(usize, usize) -> Result<CellSearch, String>,
) -> Result<(Vec<CellResult>, Vec<Record>), String> {
    let mut cells = Vec::new();
    let mut records = Vec::new();
    let n = cfg.sizes.len() * cfg.counts.len();
    for &count in &cfg.counts {
        for &size in &cfg.sizes {
            let skipped = skip_reason(t, size, count);
            if let Some(why) = &skipped {
                eprintln!("[calibrate] skipping K={count} S={size}: {why}");
                cells.push(CellResult {
                    size,
                    count,
                    copy: PolicyResult::none(),
                    sg: PolicyResult::none(),
                    skipped,
                });
                continue;
            }
            eprintln!(
                "[calibrate] cell {}/{n}: K={count} S={size}",
                cells.len() + 1
            );
            let found = search_cell(size, count)?;
            records.extend(found.records);
            let res = CellResult {
                size,
                count,
                copy: found.copy,
                sg: found.sg,
                skipped: None,
            };
            let outcome = res.outcome();
            eprintln!(
                "[calibrate] K={count} S={size}: copy {} req/s ({}), sg {} req/s ({}), sg/copy {}: {}{}{}",
                fmt_opt(res.copy.median_rps, 0),
                res.copy.spread_text(),
                fmt_opt(res.sg.median_rps, 0),
                res.sg.spread_text(),
                fmt_opt(res.ratio(), 2),
                outcome.name(),
                match &outcome {
                    Outcome::NoClearWinner(why) => format!(" ({why})"),
                    _ => String::new(),
                },
                match res.copy.slowed_reruns + res.sg.slowed_reruns {
                    0 => String::new(),
                    n => format!("; {n} slowed trial(s) rerun"),
                }
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
         machine; run `calibrate server --datapath {nic} ...` on the NIC machine and \
         `calibrate run --server IP:PORT ...` on a client machine (docs/calibration.md, \
         \"NIC datapaths\")"
    )
}

/// Runs the calibration and writes its outputs.
pub fn run_calibration(cfg: &CalibConfig) -> Result<Calibration, String> {
    if cfg.sizes.is_empty() || cfg.counts.is_empty() || cfg.load.rates.is_empty() {
        return Err("nothing to measure: --sizes, --counts and --rates need values".into());
    }
    let mut scfg = cfg.search_config();
    scfg.validate()?;
    let (array_bytes, array_why) = array_size(cfg);
    eprintln!(
        "[calibrate] {} sizes x {} counts x 2 policies, array {} MiB ({array_why}), {}; per cell \
         and policy a saturation search over {:?} req/s, median of up to {} trials per load, \
         bisection to {:.0}%, copy and sg interleaved trial by trial; {:?} per trial (+{:?} \
         warm-up). Per policy up to ~{} trials when trials agree, at most {}",
        cfg.sizes.len(),
        cfg.counts.len(),
        array_bytes >> 20,
        label(cfg.datapath),
        scfg.grid,
        scfg.trials,
        scfg.resolution * 100.0,
        cfg.load.duration,
        cfg.load.warmup,
        scfg.typical_trials(),
        scfg.max_trials(),
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
            sc.mtu = cfg.load.mtu;
            sc.memory = MemoryConfig {
                max_item_size: SOCKET_MAX_ITEM,
                max_bytes: array_bytes + (256 << 20),
                ..MemoryConfig::default()
            };
            let server = SocketServer::spawn(sc, array_bytes, cfg.load.spin)?;
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
        (None, other) => return Err(unsupported_datapath(other.name())),
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
        other => other.name(),
    }
}

/// Distinct requests per cell on the emulated NIC (its clients cycle through prepared frames).
pub const EMU_DISTINCT_REQUESTS: usize = 1024;

/// Adds the counters of one trial's server (each trial starts a fresh server) to `total`.
fn add_counters(total: &mut ServerStats, s: &ServerStats) {
    total.received += s.received;
    total.replied += s.replied;
    total.malformed += s.malformed;
    total.send_failed += s.send_failed;
    total.io_errors += s.io_errors;
}

/// The emulated-ConnectX variant: per trial, the calibration server on one core drives
/// the ConnectX driver against the emulated device on another, whose thread plays the clients
/// (crate `emu-bench`). It measures the **server core's side of the trade-off only**: copying
/// vs building descriptors and handling completions, with no DMA, PCIe or wire cost.
///
/// Each cell's two policies are searched by the emulated benches' skeleton
/// ([`EmuBench`](emu_bench::EmuBench), lanes `copy` and `sg`): a trial whose speed canary read
/// the machine's slow state is rerun at the same point, and the canaries are judged against
/// the cell's whole search.
fn run_emu(cfg: &CalibConfig, array_bytes: usize) -> Result<Calibration, String> {
    use emu_bench::{About, EmuBench, EmuSettings, EmuTrial};

    let settings = EmuSettings {
        trials: cfg.trials,
        resolution: cfg.resolution,
        ..EmuSettings::default()
    };
    // The CPUs and the interference warning in calibrate's words: `EmuBench::new` names
    // `--cores`, a flag of the apps' benches that this run does not have, and says `[bench]`.
    let (server, device) = emu_bench::cores_for(1).map_err(|e| format!("--datapath emu: {e}"))?;
    let cpus: Vec<usize> = server.into_iter().chain([device]).collect();
    let bench = EmuBench::on_cpus(&cpus, 1, &settings, cfg.search_config())?;
    if let Some(w) = emu_bench::interference_warning() {
        eprintln!("[calibrate] {w}");
    }
    let items = array_bytes.div_ceil(ARRAY_ITEM).max(1);
    let t = Target {
        server: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        other_cores: Vec::new(),
        bind: Ipv4Addr::UNSPECIFIED,
        items,
        max_segments: emu_bench::EmuRunConfig::default().max_send_sge,
        // Replies must fit one frame of the emulated wire.
        max_reply: cfg.load.mtu,
    };
    let about = About {
        lane: ("policy", "policies"),
        what: "each cell (S, K)".to_owned(),
        per_trial: (cfg.load.duration, cfg.load.warmup),
        mtu: cfg.load.mtu,
        per_core: "",
    };
    let lanes = Policy::BOTH.map(Policy::name);
    let mut server_stats = ServerStats::default();
    let mut seed = 1u64;
    let mut said_budget = false;
    let (cells, records) = measure_cells(cfg, &t, |size, count| {
        let shape = format!("{count}x{size}");
        let mut trial_records = Vec::new();
        let run = bench.run_with(
            &about,
            &lanes,
            |p| {
                let cell = Cell {
                    size,
                    count,
                    policy: Policy::BOTH[p.lane],
                    items,
                };
                seed += 1;
                let (report, stats) = emu_point(cfg, cell, p.offered_rps, seed)?;
                add_counters(&mut server_stats, &stats);
                Ok(EmuTrial::new(
                    p,
                    cell.policy.name(),
                    &shape,
                    report,
                    None,
                    stats,
                ))
            },
            // The budget line is the same for every cell: said once.
            &mut |line| {
                if !said_budget {
                    said_budget = true;
                } else if line == bench.budget_line(&about, lanes.len()) {
                    return;
                }
                eprintln!("[calibrate]   {line}");
            },
            &mut |repeat| {
                trial_records.extend(repeat.trial_records.iter().cloned());
                Ok(())
            },
        )?;
        let result = |i: usize| {
            run.last_summaries()
                .get(i)
                .map_or_else(PolicyResult::none, PolicyResult::from_summary)
        };
        Ok(CellSearch {
            copy: result(0),
            sg: result(1),
            records: trial_records,
        })
    })?;
    Ok(Calibration {
        cells,
        records,
        server: server_stats,
        max_segments: t.max_segments,
        ..Calibration::default()
    })
}

/// One trial of `cell` at `rate` req/s on the emulated NIC with a fresh server (its array
/// filled before requests arrive): the device's report and the server's counters.
fn emu_point(
    cfg: &CalibConfig,
    cell: Cell,
    rate: f64,
    seed: u64,
) -> Result<(emu_bench::EmuReport, ServerStats), String> {
    use cornflakes::PinnedMemory;
    use emu_bench::{EmuRunConfig, Request};

    let items = cell.items;
    let (mut offs, mut buf) = (Vec::new(), Vec::new());
    let requests: Vec<Request> = (0..EMU_DISTINCT_REQUESTS as u64)
        .map(|i| {
            cell.offsets(i, &mut offs);
            cell.encode(&offs, &mut buf);
            Request::new(crate::server::CALIB_MSG_TYPE, buf.clone())
        })
        .collect();
    let run_cfg = EmuRunConfig {
        rate_rps: rate,
        duration: cfg.load.duration,
        warmup: cfg.load.warmup,
        timeout: cfg.load.timeout,
        seed,
        mtu: cfg.load.mtu,
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
        let array = crate::server::fill_array(&mem, items * ARRAY_ITEM)?;
        let dp = port
            .datapath(mem)
            .map_err(|e| format!("server datapath: {e}"))?;
        let mut server = crate::server::with_array(dp, array);
        server.run(
            port.stop_flag(),
            None,
            app_server::idle::IDLE_SPINS,
            &mut |_| std::hint::spin_loop(),
        );
        Ok::<ServerStats, String>(server.stats())
    })?;
    for f in &report.failures {
        eprintln!("[calibrate]   {f}");
    }
    Ok((report, stats?))
}

/// The AF_XDP variant: the server in a child process in a namespace (netns-harness's
/// [`HostVeth`](netns_harness::HostVeth) and [`ChildServer`](netns_harness::ChildServer)).
#[cfg(feature = "xdp")]
fn run_xdp(cfg: &CalibConfig, array_bytes: usize) -> Result<Calibration, String> {
    use netns_harness::{ChildServer, HostVeth, Suite};
    // The namespace and interfaces (`cfcalx-…`, `ccx…`); the subnet is leased
    // (`netns_harness::subnet`).
    const SUITE: Suite = Suite::new("cfcalx", "ccx", "CORNFLAKES_REQUIRE_XDP");
    let mtu =
        u32::try_from(cfg.load.mtu).map_err(|_| format!("MTU {} is too large", cfg.load.mtu))?;
    let ns = HostVeth::create(&SUITE, mtu)
        .map_err(|e| format!("creating the namespace and veth: {e}"))?;
    let items = array_bytes.div_ceil(ARRAY_ITEM).max(1);
    // This executable's `server` in the namespace, over AF_XDP on its end of the veth; it
    // stops when its standard input closes.
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let args = ["server", "--array-bytes", &(items * ARRAY_ITEM).to_string()].map(String::from);
    let server = ChildServer::spawn(
        &ns,
        &exe,
        &args,
        7000,
        "[server] ready",
        Duration::from_secs(30),
    )?;
    let t = Target {
        server: server.addr,
        other_cores: Vec::new(),
        bind: ns.client_ip,
        items,
        max_segments: app_server::datapath_xdp::xsk::MAX_TX_DESCRIPTORS,
        // The UMEM's largest buffer (datapath_xdp::umem_memory).
        max_reply: 16 * 1024,
    };
    let measured = measure(cfg, &t, |cell, rate, seed| {
        run_point(cfg, &t, cell, rate, seed)
    });
    // The counters it printed last (`[server] calibrate done: received=… echoed=…`).
    let lines = server.stop()?;
    let stats = lines
        .iter()
        .rev()
        .find_map(|l| l.split(" done: ").nth(1))
        .map(ServerStats::parse)
        .unwrap_or_default();
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
         cargo run --release -p calibrate --features xdp -- run --datapath xdp"
            .to_owned(),
    )
}

/// The rule of [`recommend`] and [`CellResult::outcome`], as the JSON states it.
pub const RULE: &str = "per cell and policy, the saturation search's median at the highest load kept up and the \
min-max spread of the trials around it (lowest trial at that load to highest trial at it or at the first \
sustained miss); a policy wins a cell when its spread lies wholly above the other's (or the other kept up \
no load), otherwise no clear winner; recommended threshold: the smallest measured segment size S at which \
every measured K is a clear scatter-gather win, at S and at every larger measured S";

/// The calibration file's JSON (the runtime reads its top-level [`CALIBRATION_KEY`]).
pub fn to_json(cfg: &CalibConfig, c: &Calibration) -> serde_json::Value {
    // The grid as the search ran it (sorted, non-positive loads dropped).
    let mut scfg = cfg.search_config();
    let grid = scfg
        .validate()
        .map_or_else(|_| cfg.load.rates.clone(), |()| scfg.grid);
    let policy = |p: &PolicyResult| {
        json!({
            "median_rps": p.median_rps,
            "offered_rps": p.offered_rps,
            "trials_min_rps": p.spread.map(|s| s.0),
            "trials_max_rps": p.spread.map(|s| s.1),
            "trials_at_best": p.trials_at_best,
            "first_miss_rps": p.first_miss_rps,
            "p99_us": p.p99_us,
            "lower_bound_only": p.capped,
            "loads": p.loads,
            "trials": p.trials,
            "slowed_reruns": p.slowed_reruns,
        })
    };
    let cells: Vec<serde_json::Value> = c
        .cells
        .iter()
        .map(|x| {
            let outcome = x.outcome();
            json!({
                "size": x.size,
                "count": x.count,
                "copy": policy(&x.copy),
                "sg": policy(&x.sg),
                "sg_over_copy": x.ratio(),
                "outcome": outcome.name(),
                "no_clear_winner_because": match &outcome {
                    Outcome::NoClearWinner(why) => Some(why.as_str()),
                    _ => None,
                },
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
        "method": "saturation search (loadgen::search), copy and sg interleaved trial by trial",
        "grid_rps": grid,
        "trials_per_load": cfg.trials,
        "resolution": cfg.resolution,
        "duration_s": cfg.load.duration.as_secs_f64(),
        "warmup_s": cfg.load.warmup.as_secs_f64(),
        "client_threads": cfg.load.threads,
        "keep_up": DEFAULT_KEEP_UP,
        "rule": RULE,
        "cells": cells,
        "server": {
            "received": c.server.received,
            "answered": c.server.replied,
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
            "sg vs copy saturation load (medians), {}; threshold {threshold}",
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
    let dir = &cfg.load.out_dir;
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
            "recommended threshold: none — no measured size has a clear scatter-gather win (spreads \
             apart) for every K at it and every larger size (keep the default; more --trials, \
             a quieter machine or larger --sizes can settle it)"
        ),
    }
    Ok(())
}

/// The per-cell table (Markdown): rows K, columns S, `sg/copy` ratios of the medians, each
/// marked with the cell's [`Outcome`]: `sg` or `copy` (clear winner), `~` (no clear winner).
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
            let text = match c.cells.iter().find(|x| x.size == size && x.count == k) {
                Some(x) if x.skipped.is_none() => {
                    let mark = match x.outcome() {
                        Outcome::ScatterGather => "sg",
                        Outcome::Copy => "copy",
                        _ => "~",
                    };
                    format!("{} {mark}", fmt_opt(x.ratio(), 2))
                }
                _ => "–".to_owned(),
            };
            let _ = write!(s, " {text} |");
        }
        s.push('\n');
    }
    s.push_str(
        "\nsg / copy of the medians; sg / copy: that policy's trial spread lies wholly above the \
         other's; ~: no clear winner; –: not measured\n",
    );
    // The speed canary's notes, as the echo and KV benches print them: trials slowed against
    // the run's fast state, and a run whose two CPUs were far apart throughout.
    s + &loadgen::canary::notes(&c.records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_when_the_whole_run_had_its_cpus_far_apart() {
        let cfg = CalibConfig::for_datapath(DatapathKind::Emu);
        let run = |pair_ns: f64| Calibration {
            records: (0..4)
                .map(|_| Record {
                    canary_pair_ns: Some(pair_ns),
                    ..Record::default()
                })
                .collect(),
            ..Calibration::default()
        };
        let quiet = table(&cfg, &run(64.0));
        assert!(quiet.ends_with("not measured\n"), "{quiet}");
        let far = table(&cfg, &run(300.0));
        assert!(
            far.contains("was 300 ns a round trip at the median point (4 of 4 points"),
            "{far}"
        );
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
}
