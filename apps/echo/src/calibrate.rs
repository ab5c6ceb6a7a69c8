//! `echo calibrate`: the paper's §5 measurement as one command (docs/calibration.md).
//!
//! For every cell (S, K) of the grid, the saturation load of both [`Policy`]s against a
//! [`CalibServer`], found with the project's saturation search ([`loadgen::search`]: median of
//! up to K trials per load, a doubling grid until a sustained miss, bisection to a resolution),
//! copy and scatter-gather of a cell interleaved trial by trial. Per cell and policy: the
//! median achieved load at the highest load kept up and the min–max spread of the trials
//! around saturation ([`PolicyResult`]); a cell has a clear winner only when the two spreads
//! do not overlap ([`CellResult::outcome`]), and the recommended threshold rests only on clear
//! scatter-gather wins ([`recommend`]). Writes `calibration.json` (cells with their spreads,
//! every trial, the recommendation), `heatmap.svg`/`heatmap.png` (sg / copy per cell, the
//! paper's Figure 5) and prints the recommended threshold, which the runtime takes from
//! `CORNFLAKES_CALIBRATION=<dir>/calibration.json`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use cornflakes::datapath::{Connect as _, Transmit as _};
use cornflakes::mem::MemoryConfig;
use cornflakes::threshold::CALIBRATION_KEY;
use cornflakes::Arena;
use datapath_socket::{SocketConfig, SocketDatapath};
use emu_bench::Bottleneck;
use loadgen::search::{doubling_grid, search, Point, Search, SearchConfig, Trial};
use loadgen::{
    plot_heatmap, run, Bound, Heatmap, Record, RunConfig, RunReport, Schedule, ScheduleConfig,
    DEFAULT_KEEP_UP,
};
use serde_json::json;

use crate::bench::DatapathKind;
use crate::calib_server::{CalibClient, CalibServer, Cell, Policy, ARRAY_ITEM, MAX_SEGMENTS};
use crate::server::{socket_idle, ServerStats};

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
    /// The saturation search's coarse grid of offered loads (default: [`default_rates`] of
    /// the datapath); each policy's search ends at its first sustained miss, then bisects.
    pub rates: Vec<f64>,
    /// Trials per load at most (the median decides whether a load is kept up).
    pub trials: usize,
    /// Bisection stops when the saturation bracket is within this fraction of its lower end.
    pub resolution: f64,
    /// Run every grid load (for plots) before bisecting (`--all-points`).
    pub whole_grid: bool,
    /// Measured time per trial.
    pub duration: Duration,
    /// Warm-up per trial.
    pub warmup: Duration,
    /// Loss timeout.
    pub timeout: Duration,
    /// Client threads.
    pub threads: usize,
    /// IP MTU.
    pub mtu: usize,
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
            rates: default_rates(datapath),
            trials: loadgen::search::DEFAULT_TRIALS,
            resolution: CALIB_RESOLUTION,
            whole_grid: false,
            duration: match datapath {
                DatapathKind::Emu => CALIB_EMU_DURATION,
                _ => CALIB_DURATION,
            },
            warmup: CALIB_WARMUP,
            timeout: default_timeout(datapath),
            threads: 1,
            mtu: crate::bench::DEFAULT_MTU,
            spin: false,
            out_dir: PathBuf::from("results/calibrate"),
            remote: None,
        }
    }

    /// The saturation search this configuration runs per cell.
    pub fn search_config(&self) -> SearchConfig {
        SearchConfig {
            trials: self.trials,
            resolution: self.resolution,
            whole_grid: self.whole_grid,
            ..SearchConfig::new(self.rates.clone())
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

/// One trial of one policy at one load: its load-generator record (mode `copy`/`sg`, shape
/// `KxS`) and, on the emulated NIC, how busy the device thread was and what limited the trial.
#[derive(Clone, Debug)]
pub struct CalibTrial {
    /// Where the search ran it.
    pub point: Point,
    /// What the clients measured.
    pub record: Record,
    /// Emulated NIC only: the device thread's utilisation (0–1) and the trial's bottleneck.
    pub device: Option<(f64, Bottleneck)>,
}

impl Trial for CalibTrial {
    fn achieved_rps(&self) -> f64 {
        self.record.achieved_rps
    }
}

impl CalibTrial {
    fn device_bound(&self) -> bool {
        self.device.is_some_and(|(_, b)| b == Bottleneck::Device)
    }
}

/// One policy's saturation search in one cell, summarized.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyResult {
    /// The saturation load: among the loads kept up (by their median trial), the highest
    /// median trial's achieved load (verified replies per second). `None`: no load kept up.
    pub median_rps: Option<f64>,
    /// The offered load of that median.
    pub offered_rps: Option<f64>,
    /// The trials' min–max spread around saturation: from the lowest trial at that load to
    /// the highest trial at it or at the first sustained miss above it (past saturation an
    /// open-loop server answers at its capacity, so the saturation load can be up to there).
    pub spread: Option<(f64, f64)>,
    /// Trials run at the saturation load.
    pub trials_at_best: usize,
    /// The lowest offered load above it whose median trial missed (the bracket's upper end).
    pub first_miss_rps: Option<f64>,
    /// p99 latency of the median trial at the saturation load (µs).
    pub p99_us: Option<f64>,
    /// Why the saturation load is only a lower bound, if it is: `grid` (the grid's highest
    /// load was kept up) or `device` (emulated NIC: the device thread, not the server, was
    /// saturated at the best load or the first miss).
    pub capped: Option<&'static str>,
    /// Loads decided and trials run in all.
    pub loads: usize,
    /// See `loads`.
    pub trials: usize,
}

impl PolicyResult {
    /// Summarizes one policy's search.
    pub fn from_search(s: &Search<CalibTrial>) -> PolicyResult {
        let best = s.best_achieved();
        let miss = s.first_miss();
        let device = best.is_some_and(|v| v.median().device_bound())
            || miss.is_some_and(|v| v.median().device_bound());
        PolicyResult {
            median_rps: best.map(|b| b.median_rps()),
            offered_rps: best.map(|b| b.offered_rps),
            spread: best.map(|b| {
                let (lo, hi) = b.spread();
                (lo, miss.map_or(hi, |m| hi.max(m.spread().1)))
            }),
            trials_at_best: best.map_or(0, |b| b.trials.len()),
            first_miss_rps: miss.map(|m| m.offered_rps),
            p99_us: best.and_then(|b| b.median().record.p99_us),
            capped: if device {
                Some("device")
            } else if s.above_grid {
                Some("grid")
            } else {
                None
            },
            loads: s.loads.len(),
            trials: s.trials_run(),
        }
    }

    /// A policy that was not measured.
    pub fn none() -> PolicyResult {
        PolicyResult {
            median_rps: None,
            offered_rps: None,
            spread: None,
            trials_at_best: 0,
            first_miss_rps: None,
            p99_us: None,
            capped: None,
            loads: 0,
            trials: 0,
        }
    }

    fn spread_text(&self) -> String {
        self.spread.map_or_else(
            || "nothing kept up".to_owned(),
            |(lo, hi)| format!("{lo:.0}–{hi:.0}"),
        )
    }
}

/// Which policy a cell's trials show ahead, if they clearly show one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Scatter-gather's spread lies wholly above copy's.
    ScatterGather,
    /// Copy's spread lies wholly above scatter-gather's.
    Copy,
    /// The spreads overlap, or the loser's saturation load is only a lower bound: the reason.
    NoClearWinner(String),
    /// The cell was not measured (the datapath cannot take it).
    Skipped,
}

impl Outcome {
    /// Short name, as the JSON and the table give it.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::ScatterGather => "sg",
            Outcome::Copy => "copy",
            Outcome::NoClearWinner(_) => "no clear winner",
            Outcome::Skipped => "skipped",
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
    /// Scatter-gather's saturation load over copy's, medians (> 1: scatter-gather ahead).
    pub fn ratio(&self) -> Option<f64> {
        match (self.sg.median_rps, self.copy.median_rps) {
            (Some(s), Some(c)) if c > 0.0 => Some(s / c),
            _ => None,
        }
    }

    /// The cell's winner, decided from the trials' spreads, not the medians alone:
    ///
    /// - a policy wins when the lower end of its spread is above the upper end of the other's
    ///   (the difference of the medians is outside both policies' min–max trial spreads);
    /// - a policy that kept up some load wins against one that kept up none (the other missed
    ///   even the lowest grid load, by the median of its trials);
    /// - otherwise there is no clear winner: the spreads overlap, neither kept up anything, or
    ///   the would-be loser's saturation load is only a lower bound ([`PolicyResult::capped`]:
    ///   it kept up the grid's highest load, or the emulated device was the limit).
    pub fn outcome(&self) -> Outcome {
        if self.skipped.is_some() {
            return Outcome::Skipped;
        }
        let (c, s) = (&self.copy, &self.sg);
        let win = |winner: Outcome, loser: &PolicyResult, name: &str| match loser.capped {
            Some(why) => Outcome::NoClearWinner(format!(
                "{name}'s saturation load is only a lower bound ({why})"
            )),
            None => winner,
        };
        match (c.spread, s.spread) {
            (None, None) => {
                Outcome::NoClearWinner("neither policy kept up the lowest load".to_owned())
            }
            (Some(_), None) => Outcome::Copy,
            (None, Some(_)) => Outcome::ScatterGather,
            (Some((c_lo, c_hi)), Some((s_lo, s_hi))) => {
                if s_lo > c_hi {
                    win(Outcome::ScatterGather, c, "copy")
                } else if c_lo > s_hi {
                    win(Outcome::Copy, s, "sg")
                } else {
                    Outcome::NoClearWinner(format!(
                        "spreads overlap: copy {}, sg {} req/s",
                        c.spread_text(),
                        s.spread_text()
                    ))
                }
            }
        }
    }
}

/// The recommended threshold: the smallest measured S such that **every** measured cell (every
/// measured K) at S and at every larger measured S is a clear scatter-gather win
/// ([`CellResult::outcome`]). A cell without a clear winner is never evidence for a threshold:
/// one at or above S blocks S, so the recommendation rests only on cells whose trial spreads
/// separate. Cells below S may be anything (copying there is the threshold's claim; a clear
/// win below a non-win does not move it down). Skipped cells are left out of "every K"; a size
/// with no measured cell cannot be recommended. `None` when no size qualifies.
pub fn recommend(cells: &[CellResult]) -> Option<usize> {
    let mut sizes: Vec<usize> = cells.iter().map(|c| c.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let wins = |s: usize| {
        let outcomes: Vec<Outcome> = cells
            .iter()
            .filter(|c| c.size == s && c.skipped.is_none())
            .map(CellResult::outcome)
            .collect();
        !outcomes.is_empty() && outcomes.iter().all(|o| *o == Outcome::ScatterGather)
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

/// The calibration server on its own thread over the socket datapath.
struct SocketServer {
    addr: SocketAddrV4,
    items: usize,
    max_segments: usize,
    stop: Arc<AtomicBool>,
    join: JoinHandle<ServerStats>,
}

impl SocketServer {
    fn spawn(sock: SocketConfig, array_bytes: usize, spin: bool) -> Result<SocketServer, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let (tx, rx) = mpsc::channel();
        let join = std::thread::Builder::new()
            .name("calibrate-server".into())
            .spawn(move || {
                let started = SocketDatapath::new(sock)
                    .map_err(|e| format!("server socket: {e}"))
                    .and_then(|dp| CalibServer::new(dp, array_bytes));
                let mut server = match started {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return ServerStats::default();
                    }
                };
                let dp = server.datapath();
                let _ = tx.send(Ok((dp.local_addr(), server.items(), dp.max_segments())));
                let (after, mut hook) = socket_idle(spin);
                server.run(&stop2, None, after, &mut hook);
                server.stats()
            })
            .map_err(|e| format!("starting the server thread: {e}"))?;
        match rx.recv() {
            Ok(Ok((addr, items, max_segments))) => Ok(SocketServer {
                addr,
                items,
                max_segments,
                stop,
                join,
            }),
            Ok(Err(e)) => {
                let _ = join.join();
                Err(e)
            }
            Err(_) => Err("the server thread ended before starting".to_owned()),
        }
    }

    fn stop(self) -> Result<ServerStats, String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.join
            .join()
            .map_err(|_| "the server thread panicked".to_owned())
    }
}

/// Where the clients send and what the server can take.
struct Target {
    server: SocketAddrV4,
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
        CalibClient::new(dp, t.server, thread, cell)
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

/// What a trial function returns: the clients' report and, on the emulated NIC, the device
/// thread's utilisation and the trial's bottleneck.
type TrialOutcome = (RunReport, Option<(f64, Bottleneck)>);

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
    mut point: impl FnMut(Cell, f64, u64) -> Result<TrialOutcome, String>,
) -> Result<(Vec<CellResult>, Vec<Record>), String> {
    let scfg = cfg.search_config();
    let mut cells = Vec::new();
    let mut records = Vec::new();
    let mut seed = 1u64;
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
                let (report, device) = point(cell, p.offered_rps, seed)?;
                let record = Record::from_report(policy.name(), &shape, &report);
                eprintln!(
                    "[calibrate]   {:<4} {:>6} offered {:>9.0} trial {}  achieved {:>9.0}  p99 {:>9}{}  {}",
                    policy.name(),
                    p.phase,
                    p.offered_rps,
                    p.trial + 1,
                    record.achieved_rps,
                    record.p99_us.map_or("–".to_owned(), |v| format!("{v:.1}µs")),
                    device.map_or(String::new(), |(busy, b)| format!(
                        "  device busy {:>3.0}% ({b})",
                        busy * 100.0
                    )),
                    report.counters
                );
                Ok::<_, String>(CalibTrial {
                    point: p,
                    record,
                    device,
                })
            })?;
            let mut res = CellResult {
                size,
                count,
                copy: PolicyResult::none(),
                sg: PolicyResult::none(),
                skipped: None,
            };
            for (policy, s) in Policy::BOTH.iter().zip(&searches) {
                let r = PolicyResult::from_search(s);
                match policy {
                    Policy::Copy => res.copy = r,
                    Policy::ScatterGather => res.sg = r,
                }
                records.extend(
                    s.loads
                        .iter()
                        .flat_map(|v| v.trials.iter().map(|t| t.record.clone())),
                );
            }
            let outcome = res.outcome();
            eprintln!(
                "[calibrate] K={count} S={size}: copy {} req/s ({}), sg {} req/s ({}), sg/copy {}: {}{}",
                fmt_opt(res.copy.median_rps, 0),
                res.copy.spread_text(),
                fmt_opt(res.sg.median_rps, 0),
                res.sg.spread_text(),
                fmt_opt(res.ratio(), 2),
                outcome.name(),
                match &outcome {
                    Outcome::NoClearWinner(why) => format!(" ({why})"),
                    _ => String::new(),
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
        cfg.duration,
        cfg.warmup,
        scfg.typical_trials(),
        scfg.max_trials(),
    );
    let mut out = match (&cfg.remote, cfg.datapath) {
        (Some(r), _) => {
            let t = Target {
                server: r.server,
                bind: r.bind,
                items: array_bytes.div_ceil(ARRAY_ITEM).max(1),
                max_segments: r.max_segments,
                max_reply: r.max_reply,
            };
            let (cells, records) = measure(cfg, &t, |cell, rate, seed| {
                Ok((run_point(cfg, &t, cell, rate, seed)?, None))
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
                bind: Ipv4Addr::LOCALHOST,
                items: server.items,
                max_segments: server.max_segments,
                max_reply: SOCKET_MAX_ITEM,
            };
            let measured = measure(cfg, &t, |cell, rate, seed| {
                Ok((run_point(cfg, &t, cell, rate, seed)?, None))
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

/// Adds the counters of one trial's server (each trial starts a fresh server) to `total`.
fn add_counters(total: &mut ServerStats, s: &ServerStats) {
    total.received += s.received;
    total.echoed += s.echoed;
    total.malformed += s.malformed;
    total.send_failed += s.send_failed;
    total.io_errors += s.io_errors;
}

/// The emulated-ConnectX variant: per trial, the calibration server on one core drives
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
                Request {
                    msg_type: crate::calib_server::CALIB_MSG_TYPE,
                    payload: buf.clone(),
                }
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
        add_counters(&mut server_stats, &stats?);
        let device = Some((report.device_busy, report.bottleneck()));
        Ok((report.run, device))
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
        bind: ns.client_ip,
        items,
        max_segments: datapath_xdp::xsk::MAX_TX_DESCRIPTORS,
        // The UMEM's largest buffer (datapath_xdp::umem_memory).
        max_reply: 16 * 1024,
    };
    let measured = measure(cfg, &t, |cell, rate, seed| {
        Ok((run_point(cfg, &t, cell, rate, seed)?, None))
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

/// The rule of [`recommend`] and [`CellResult::outcome`], as the JSON states it.
pub const RULE: &str = "per cell and policy, the saturation search's median at the highest load kept up and the \
min-max spread of the trials around it (lowest trial at that load to highest trial at it or at the first \
sustained miss); a policy wins a cell when its spread lies wholly above the other's (or the other kept up \
no load), otherwise no clear winner; recommended threshold: the smallest measured segment size S at which \
every measured K is a clear scatter-gather win, at S and at every larger measured S";

/// The calibration file's JSON (the runtime reads its top-level [`CALIBRATION_KEY`]).
pub fn to_json(cfg: &CalibConfig, c: &Calibration) -> serde_json::Value {
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
        "grid_rps": cfg.rates,
        "trials_per_load": cfg.trials,
        "resolution": cfg.resolution,
        "duration_s": cfg.duration.as_secs_f64(),
        "warmup_s": cfg.warmup.as_secs_f64(),
        "client_threads": cfg.threads,
        "keep_up": DEFAULT_KEEP_UP,
        "rule": RULE,
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
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A measured cell from each policy's (lowest, median, highest) trial, req/s.
    fn cell(size: usize, count: usize, copy: (f64, f64, f64), sg: (f64, f64, f64)) -> CellResult {
        let p = |(lo, med, hi): (f64, f64, f64)| PolicyResult {
            median_rps: Some(med),
            offered_rps: Some(med),
            spread: Some((lo, hi)),
            trials_at_best: 3,
            first_miss_rps: Some(hi * 1.1),
            p99_us: Some(10.0),
            capped: None,
            loads: 8,
            trials: 18,
        };
        CellResult {
            size,
            count,
            copy: p(copy),
            sg: p(sg),
            skipped: None,
        }
    }

    /// Copy at 100 (95–105); sg `ahead`: clearly (120–130), tied (98–110) or behind (70–80).
    fn c(size: usize, count: usize, sg: &str) -> CellResult {
        let sg = match sg {
            "win" => (120.0, 125.0, 130.0),
            "tie" => (98.0, 104.0, 110.0),
            _ => (70.0, 75.0, 80.0),
        };
        cell(size, count, (95.0, 100.0, 105.0), sg)
    }

    #[test]
    fn a_cell_has_a_winner_only_when_the_spreads_separate() {
        assert_eq!(c(64, 1, "win").outcome(), Outcome::ScatterGather);
        assert_eq!(c(64, 1, "lose").outcome(), Outcome::Copy);
        let tie = c(64, 1, "tie");
        // The medians differ (1.04) but lie inside each other's spread.
        assert!(tie.ratio().unwrap() > 1.0);
        match tie.outcome() {
            Outcome::NoClearWinner(why) => assert!(why.contains("overlap"), "{why}"),
            o => panic!("{o:?}"),
        }
        // Touching spreads are not apart.
        let touch = cell(64, 1, (95.0, 100.0, 105.0), (105.0, 110.0, 115.0));
        assert_eq!(touch.outcome().name(), "no clear winner");
        // The loser's saturation load is only a lower bound: no clear winner.
        let mut capped = c(64, 1, "win");
        capped.copy.capped = Some("device");
        match capped.outcome() {
            Outcome::NoClearWinner(why) => assert!(why.contains("copy") && why.contains("device")),
            o => panic!("{o:?}"),
        }
        // The winner's being capped does not weaken its win.
        let mut capped = c(64, 1, "win");
        capped.sg.capped = Some("grid");
        assert_eq!(capped.outcome(), Outcome::ScatterGather);
        // Kept up something against nothing kept up; nothing on either side; skipped.
        let mut none = c(64, 1, "win");
        none.copy = PolicyResult::none();
        assert_eq!(none.outcome(), Outcome::ScatterGather);
        assert_eq!(none.ratio(), None);
        none.sg = PolicyResult::none();
        assert_eq!(none.outcome().name(), "no clear winner");
        none.skipped = Some("too large".into());
        assert_eq!(none.outcome(), Outcome::Skipped);
    }

    #[test]
    fn recommendation_rests_only_on_clear_sg_wins_for_every_k_from_there_up() {
        let grid = |rows: &[(usize, [&str; 2])]| -> Vec<CellResult> {
            rows.iter()
                .flat_map(|&(s, ks)| [c(s, 1, ks[0]), c(s, 2, ks[1])])
                .collect()
        };
        // Copy below 512, sg clearly from 512 up for every K.
        let cells = grid(&[
            (64, ["lose", "lose"]),
            (256, ["lose", "tie"]),
            (512, ["win", "win"]),
            (1024, ["win", "win"]),
        ]);
        assert_eq!(recommend(&cells), Some(512));
        // A tie at 512 for one K: the threshold cannot rest on it, so it moves up to 1024.
        let cells = grid(&[
            (64, ["lose", "lose"]),
            (512, ["win", "tie"]),
            (1024, ["win", "win"]),
        ]);
        assert_eq!(recommend(&cells), Some(1024));
        // A clear win below a tie does not count (the chain from the top is broken).
        let cells = grid(&[
            (64, ["win", "win"]),
            (512, ["tie", "win"]),
            (1024, ["win", "win"]),
        ]);
        assert_eq!(recommend(&cells), Some(1024));
        // A tie at the largest size: no recommendation, even with medians all above 1.
        let cells = grid(&[(512, ["win", "win"]), (1024, ["win", "tie"])]);
        assert!(cells.iter().all(|x| x.ratio().unwrap() > 1.0));
        assert_eq!(recommend(&cells), None);
        // Every cell tied (the noisy machine's usual answer): none.
        let cells = grid(&[(64, ["tie", "tie"]), (4096, ["tie", "tie"])]);
        assert_eq!(recommend(&cells), None);
        // Skipped cells are left out of "every K"; a size with only skipped cells blocks.
        let mut cells = grid(&[(512, ["win", "win"]), (1024, ["win", "tie"])]);
        cells[3].skipped = Some("too large".into());
        assert_eq!(recommend(&cells), Some(512));
        cells[2].skipped = Some("too large".into());
        assert_eq!(recommend(&cells), None);
        assert_eq!(recommend(&[]), None);
    }

    fn rec(offered: f64, achieved: f64) -> Record {
        Record {
            mode: "sg".into(),
            shape: "2x512".into(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(5.0),
            p99_us: Some(offered / 100.0),
            p999_us: None,
            mean_us: None,
            sent: 1,
            received: 1,
            verified: 1,
            mismatched: 0,
            lost: 0,
            unexpected: 0,
            malformed: 0,
            errors: 0,
            threads: 1,
            measured_s: 1.0,
        }
    }

    /// A search against a fake server of capacity `cap` whose first trial at every load achieves
    /// `first` of what the others do; the device is saturated from `device_at` req/s.
    fn fake_search(cap: f64, first: f64, device_at: f64) -> Search<CalibTrial> {
        let cfg = SearchConfig {
            resolution: 0.1,
            ..SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0])
        };
        let mut out = search::<_, String, _>(&cfg, 1, |p| {
            let f = if p.trial == 0 { first } else { 1.0 };
            let achieved = p.offered_rps.min(cap) * f;
            let device = if p.offered_rps >= device_at {
                (0.95, Bottleneck::Device)
            } else {
                (0.3, Bottleneck::None)
            };
            Ok(CalibTrial {
                point: p,
                record: rec(p.offered_rps, achieved),
                device: Some(device),
            })
        })
        .unwrap();
        out.pop().unwrap()
    }

    #[test]
    fn a_policy_is_summarized_by_its_median_and_the_spread_around_saturation() {
        // Capacity 300: the bracket ends within 10 %; every trial agrees.
        let r = PolicyResult::from_search(&fake_search(300.0, 1.0, f64::INFINITY));
        let (med, offered) = (r.median_rps.unwrap(), r.offered_rps.unwrap());
        assert!(offered > 250.0 && offered <= 300.0 / 0.95, "{r:?}");
        assert_eq!(med, offered.min(300.0));
        let miss = r.first_miss_rps.unwrap();
        assert!(
            miss > offered && miss - offered <= 0.1 * offered + 1.0,
            "{r:?}"
        );
        // The spread runs up to the first miss's best trial: the capacity itself.
        assert_eq!(r.spread, Some((med, 300.0)));
        assert_eq!((r.trials_at_best, r.capped), (2, None));
        assert_eq!(r.trials, 2 * r.loads);
        assert_eq!(r.p99_us, Some(offered / 100.0));
        // A descheduled first trial at every load: a third trial decides, and the spread shows it.
        let r = PolicyResult::from_search(&fake_search(300.0, 0.5, f64::INFINITY));
        let (lo, _) = r.spread.unwrap();
        assert_eq!(r.trials_at_best, 3);
        assert!(lo <= 0.5 * r.offered_rps.unwrap(), "{r:?}");
        // Above the grid, or the device saturated: only a lower bound.
        let r = PolicyResult::from_search(&fake_search(1e9, 1.0, f64::INFINITY));
        assert_eq!((r.offered_rps, r.capped), (Some(800.0), Some("grid")));
        assert_eq!(r.first_miss_rps, None);
        let r = PolicyResult::from_search(&fake_search(300.0, 1.0, 250.0));
        assert_eq!(r.capped, Some("device"));
        // Nothing kept up.
        let r = PolicyResult::from_search(&fake_search(10.0, 1.0, f64::INFINITY));
        assert_eq!(
            (r.median_rps, r.spread, r.first_miss_rps),
            (None, None, Some(100.0))
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
