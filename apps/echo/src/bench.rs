//! The benchmark: for each mode, a server thread and load-generator client thread(s) over the
//! socket datapath on 127.0.0.1, an offered-load sweep, then a table, JSON and a plot.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use datapath_socket::{SocketConfig, SocketDatapath};
use loadgen::{
    max_kept_up, plot_p99_curves, run, sweep, write_json, Bound, Record, RunConfig, RunReport,
    Schedule, ScheduleConfig, SweepConfig, DEFAULT_KEEP_UP,
};

use crate::client::{EchoClient, Verifier};
use crate::mode::Mode;
use crate::server::{ServerConfig, ServerStats};
use crate::shape::ShapeSpec;

/// Default offered loads (requests per second), lowest first; the lowest is also the fixed
/// load the latency columns report.
pub const DEFAULT_RATES: [f64; 12] = [
    10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0, 60_000.0, 70_000.0, 80_000.0, 100_000.0,
    120_000.0, 150_000.0, 200_000.0,
];

/// IP MTU of the socket datapath in the benchmark: a jumbo frame, as in the paper (§6.1), so a
/// 2 × 2048 B message is one datagram. `lo` takes up to 65536.
pub const DEFAULT_MTU: usize = 9000;

/// Which datapath the server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatapathKind {
    /// Kernel UDP sockets on 127.0.0.1 (server and clients in this process).
    Socket,
    /// AF_XDP on a veth in a network namespace (server in a child process, clients on kernel
    /// sockets at the other end of the veth). Feature `xdp`, root.
    Xdp,
    /// The ConnectX driver on one core against the emulated ConnectX on a second core, which
    /// also plays the clients ([`crate::emu`]): the server core's throughput, not a network
    /// measurement. Needs 2 CPUs (N + 1 with `--cores N`).
    Emu,
}

impl DatapathKind {
    fn label(self) -> &'static str {
        match self {
            DatapathKind::Socket => "socket datapath on 127.0.0.1",
            DatapathKind::Xdp => "AF_XDP server on a veth",
            DatapathKind::Emu => "server core with an emulated ConnectX on a second core",
        }
    }
}

/// Everything the benchmark does.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The server's datapath.
    pub datapath: DatapathKind,
    /// Modes to run, in order.
    pub modes: Vec<Mode>,
    /// Message shape.
    pub shape: ShapeSpec,
    /// Offered loads, requests per second.
    pub rates: Vec<f64>,
    /// The load whose p50/p99 the table reports (added to `rates` if missing).
    pub fixed_rps: f64,
    /// Measured time per load point.
    pub duration: Duration,
    /// Warm-up before each measured window (verified, not measured).
    pub warmup: Duration,
    /// A request unanswered this long is lost.
    pub timeout: Duration,
    /// Client threads.
    pub threads: usize,
    /// Hybrid threshold of the `cornflakes` modes (default: the process default,
    /// [`cornflakes::threshold_setting`]).
    pub threshold: usize,
    /// IP MTU of the socket datapath.
    pub mtu: usize,
    /// Stop a mode's sweep after this many consecutive points below 95 % (0: run all).
    pub stop_after_misses: usize,
    /// Busy-poll: the server never blocks and the client never yields (the paper's setup;
    /// on a shared 2-core machine it mostly measures the scheduler).
    pub spin: bool,
    /// Where the JSON, plot and table go.
    pub out_dir: PathBuf,
    /// JSON path (default `out_dir/echo.json`).
    pub json: Option<PathBuf>,
    /// `emu` only: every n-th reply is deserialized and compared (the first reply to each
    /// distinct request always is; every reply's headers, length and id are checked).
    pub sample_every: u64,
    /// `emu` only: the device's time per gather entry (default 0).
    pub delay_per_segment: Duration,
    /// `emu` only: receive-queue entries (a power of two; `None`: emu-bench's default, 1024),
    /// as `ethtool -G rx` sets them on a NIC. Fewer entries keep the buffers the device writes
    /// received frames into warm in its cache.
    pub rx_ring: Option<u32>,
    /// `emu` only: leading cache lines of each request frame the device demotes to the
    /// last-level cache after writing it, as DDIO leaves DMA writes there (0: none).
    pub demote_lines: usize,
    /// `emu` only: trials per load of the saturation search (its median decides).
    pub trials: usize,
    /// `emu` only: the search bisects until the saturation bracket is within this fraction.
    pub resolution: f64,
    /// Server cores per mode (share-nothing: each its own echo server, pinned memory, datapath
    /// and arena; requests spread round-robin). `socket`: pinned one per CPU when more than
    /// one, one port each (`docs/cores.md`); `emu`: one queue set each, needs `cores + 1`
    /// CPUs; `xdp`: one core.
    pub cores: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            datapath: DatapathKind::Socket,
            modes: Mode::ALL.to_vec(),
            shape: ShapeSpec::default(),
            rates: DEFAULT_RATES.to_vec(),
            fixed_rps: DEFAULT_RATES[0],
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            timeout: Duration::from_millis(200),
            threads: 1,
            // The process default: 512 B unless CORNFLAKES_THRESHOLD / CORNFLAKES_CALIBRATION.
            threshold: cornflakes::default_threshold(),
            mtu: DEFAULT_MTU,
            // Three, not one: on a shared machine a single point can miss by bad luck.
            stop_after_misses: 3,
            spin: false,
            out_dir: PathBuf::from("results/echo"),
            json: None,
            sample_every: 64,
            delay_per_segment: Duration::ZERO,
            rx_ring: None,
            demote_lines: 0,
            trials: loadgen::search::DEFAULT_TRIALS,
            resolution: loadgen::search::DEFAULT_RESOLUTION,
            cores: 1,
        }
    }
}

impl BenchConfig {
    /// The loads to run: `rates` plus the fixed load, ascending, without duplicates.
    pub fn loads(&self) -> Vec<f64> {
        let mut v = self.rates.clone();
        v.push(self.fixed_rps);
        v.retain(|r| r.is_finite() && *r > 0.0);
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }

    /// The JSON output path.
    pub fn json_path(&self) -> PathBuf {
        self.json
            .clone()
            .unwrap_or_else(|| self.out_dir.join("echo.json"))
    }
}

/// How one client measures one mode against a running server.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// Mode (decides the request format and the label).
    pub mode: Mode,
    /// Message shape.
    pub shape: ShapeSpec,
    /// Server address.
    pub server: SocketAddrV4,
    /// Address the client sockets bind (port 0).
    pub bind: Ipv4Addr,
    /// Offered loads.
    pub loads: Vec<f64>,
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
    /// See [`BenchConfig::stop_after_misses`].
    pub stop_after_misses: usize,
    /// Client threads busy-poll instead of yielding when idle.
    pub busy_poll: bool,
    /// The server's cores after the first (core 0 is `server`): requests are spread over
    /// all of them round-robin. Empty: one core.
    pub other_cores: Vec<SocketAddrV4>,
}

/// Runs one offered load of `plan` against its server (a fresh client socket per thread).
pub fn run_point(
    plan: &SweepPlan,
    verifier: &Verifier,
    rate: f64,
    seed: u64,
) -> Result<RunReport, String> {
    let checker = |id: u64, payload: &[u8]| verifier.check(id, payload);
    let run_cfg = RunConfig {
        warmup: plan.warmup,
        timeout: plan.timeout,
        busy_poll: plan.busy_poll,
        progress: false,
    };
    let schedule = Schedule::poisson(&ScheduleConfig {
        rate_rps: rate,
        bound: Bound::Duration(plan.warmup + plan.duration),
        threads: plan.threads,
        seed,
    })
    .map_err(|e| format!("schedule at {rate} req/s: {e}"))?;
    let make = |thread: usize| {
        let mut sc = SocketConfig::new(SocketAddrV4::new(plan.bind, 0));
        sc.mtu = plan.mtu;
        let dp = SocketDatapath::new(sc).map_err(std::io::Error::other)?;
        let cores: Vec<SocketAddrV4> = std::iter::once(plan.server)
            .chain(plan.other_cores.iter().copied())
            .collect();
        EchoClient::spread(dp, &cores, thread, plan.mode, plan.shape)
    };
    run(&schedule, &run_cfg, make, &checker)
        .map_err(|e| format!("{} at {rate} req/s: {e}", plan.mode))
}

/// Sweeps the offered loads of `plan` against its server; one record per point.
pub fn sweep_mode(plan: &SweepPlan) -> Result<Vec<Record>, String> {
    let verifier = Verifier::new(plan.mode, plan.shape)?;
    let cfg = SweepConfig {
        mode: plan.mode.name().to_owned(),
        shape: plan.shape.to_string(),
        loads_rps: plan.loads.clone(),
        keep_up: DEFAULT_KEEP_UP,
        stop_after_misses: plan.stop_after_misses,
        progress: true,
    };
    let mut seed = 1u64;
    sweep(&cfg, |rate| {
        seed += 1;
        run_point(plan, &verifier, rate, seed)
    })
}

/// What a benchmark run produced.
#[derive(Debug, Default)]
pub struct BenchOutcome {
    /// Every measured point.
    pub records: Vec<Record>,
    /// Each mode's server counters at the end of its sweep (`emu`: at its best point).
    pub servers: Vec<(Mode, ServerStats)>,
    /// `emu` only: each mode's saturation search and every trial.
    pub emu: Option<crate::emu::EmuOutcome>,
}

/// Runs every mode of `cfg` (one server each, loads interleaved across modes) and writes JSON,
/// plot and table.
pub fn run_bench(cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    if cfg.cores != 1 && !matches!(cfg.datapath, DatapathKind::Socket | DatapathKind::Emu) {
        return Err(format!(
            "--cores {} runs on the socket and emu datapaths, not {} (docs/cores.md)",
            cfg.cores,
            cfg.datapath.label()
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
        "[bench] {} modes x {} loads, shape {}, {:?} per point (+{:?} warm-up), {} client thread(s), socket datapath on 127.0.0.1, MTU {}",
        runnable.len(),
        loads.len(),
        cfg.shape,
        cfg.duration,
        cfg.warmup,
        cfg.threads,
        cfg.mtu
    );
    // One server per mode, all started up front; idle servers sleep on their sockets. Each
    // load is then run for every mode in turn (not mode after mode), so a burst of
    // background load on this shared machine hits all modes alike rather than one.
    let mut servers = Vec::with_capacity(runnable.len());
    for &mode in runnable {
        let mut sc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        sc.mtu = cfg.mtu;
        let mut cores = percore::CoresConfig::new(&format!("echo-server-{mode}"), cfg.cores);
        // One core floats, as it always has; several are pinned one per CPU.
        cores.pin = cfg.cores > 1;
        let server = crate::server::spawn_cores(
            ServerConfig {
                mode,
                threshold: cfg.threshold,
            },
            sc,
            &cores,
            None,
            cfg.spin,
        )?;
        let plan = SweepPlan {
            other_cores: server.addrs()[1..].to_vec(),
            mode,
            shape: cfg.shape,
            server: server.addr(),
            bind: Ipv4Addr::LOCALHOST,
            loads: loads.clone(),
            duration: cfg.duration,
            warmup: cfg.warmup,
            timeout: cfg.timeout,
            threads: cfg.threads,
            mtu: cfg.mtu,
            stop_after_misses: cfg.stop_after_misses,
            busy_poll: cfg.spin,
        };
        let verifier = Verifier::new(mode, cfg.shape)?;
        servers.push((server, plan, verifier, 0usize));
    }
    let mut per_mode: Vec<Vec<Record>> = vec![Vec::new(); servers.len()];
    let result = (|| {
        for (li, &load) in loads.iter().enumerate() {
            for (mi, (_, plan, verifier, misses)) in servers.iter_mut().enumerate() {
                if cfg.stop_after_misses > 0 && *misses >= cfg.stop_after_misses {
                    continue;
                }
                let report = run_point(plan, verifier, load, 1 + li as u64)?;
                let rec = Record::from_report(plan.mode.name(), &cfg.shape.to_string(), &report);
                eprintln!(
                    "[bench] load {}/{} {:>7.0} req/s  {:<20} achieved {:>7.0}  p50 {:>8}  p99 {:>8}  ({})",
                    li + 1,
                    loads.len(),
                    load,
                    plan.mode.name(),
                    rec.achieved_rps,
                    us(rec.p50_us),
                    us(rec.p99_us),
                    report.counters
                );
                *misses = if rec.keeps_up(DEFAULT_KEEP_UP) {
                    0
                } else {
                    *misses + 1
                };
                if cfg.stop_after_misses > 0 && *misses == cfg.stop_after_misses {
                    eprintln!("[bench] {}: saturated, no higher loads", plan.mode);
                }
                per_mode[mi].push(rec);
            }
        }
        Ok::<(), String>(())
    })();
    for (server, plan, _, _) in servers {
        let stats = server.stop().map_err(|e| e.to_string())?;
        eprintln!("[bench] {} server: {stats}", plan.mode);
        out.servers.push((plan.mode, stats));
    }
    result?;
    out.records = per_mode.into_iter().flatten().collect();
    write_outputs(cfg, &out)?;
    Ok(out)
}

/// The AF_XDP variant: a namespace with a veth pair, then per mode a server process in the
/// namespace and a sweep from this side (modes one after another: one XDP program per
/// interface).
#[cfg(feature = "xdp")]
fn run_bench_xdp(cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    use crate::xdp::{create_netns, ServerProcess};
    let mut out = BenchOutcome::default();
    let loads = cfg.loads();
    let runnable = &cfg.modes;
    let ns = create_netns(cfg.mtu)?;
    eprintln!(
        "[bench] namespace {} with {} (AF_XDP server, {}) <-> {} (clients, {}), MTU {}",
        ns.name, ns.server_if, ns.server_ip, ns.client_if, ns.client_ip, cfg.mtu
    );
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
            loads: loads.clone(),
            duration: cfg.duration,
            warmup: cfg.warmup,
            timeout: cfg.timeout,
            threads: cfg.threads,
            mtu: cfg.mtu,
            stop_after_misses: cfg.stop_after_misses,
            busy_poll: cfg.spin,
        };
        let records = sweep_mode(&plan);
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

/// Writes `echo.json` (the load generator's records), `servers.json` (each mode's server
/// counters and handling time), `echo.svg`/`echo.png` and `table.md`.
fn write_outputs(cfg: &BenchConfig, out: &BenchOutcome) -> Result<(), String> {
    std::fs::create_dir_all(&cfg.out_dir)
        .map_err(|e| format!("creating {}: {e}", cfg.out_dir.display()))?;
    let json = cfg.json_path();
    if let Some(dir) = json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    write_json(&json, &out.records).map_err(|e| format!("writing {}: {e}", json.display()))?;
    eprintln!("[bench] wrote {}", json.display());
    let servers_path = cfg.out_dir.join("servers.json");
    let servers: Vec<serde_json::Value> = out
        .servers
        .iter()
        .map(|(m, st)| {
            serde_json::json!({
                "mode": m.name(),
                "datapath": cfg.datapath.label(),
                "received": st.received,
                "echoed": st.replied,
                "malformed": st.malformed,
                "send_failed": st.send_failed,
                "io_errors": st.io_errors,
                "datapath_drops": st.datapath.total_drops(),
                "work_p50_ns": st.work_p50_ns(),
                // The AF_XDP server (a child process) reports only its median.
                "work_p99_ns": (cfg.datapath != DatapathKind::Xdp)
                    .then(|| st.work.p99_us().map(|us| us * 1000.0))
                    .flatten(),
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&servers).map_err(|e| e.to_string())?;
    std::fs::write(&servers_path, text)
        .map_err(|e| format!("writing {}: {e}", servers_path.display()))?;
    let table = if let Some(emu) = &out.emu {
        for (name, v) in [
            (
                "emu-points.json",
                serde_json::Value::Array(emu.trials.clone()),
            ),
            ("emu-summary.json", crate::emu::summary_json(emu)),
        ] {
            let p = cfg.out_dir.join(name);
            let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
            std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
        }
        crate::emu::table(emu)
    } else {
        table(&out.records, cfg.fixed_rps, &out.servers)
    };
    let table_path = cfg.out_dir.join("table.md");
    std::fs::write(&table_path, &table)
        .map_err(|e| format!("writing {}: {e}", table_path.display()))?;
    print!("{table}");
    let (svg, png) = (cfg.out_dir.join("echo.svg"), cfg.out_dir.join("echo.png"));
    // Saturated points (achieved far below offered, p99 = the loss timeout) would squash the
    // curves into the x axis; the JSON has them all. (Very short runs may have no point
    // within 95 %: then everything is drawn.)
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
    let title = format!("echo {}, {} ({which})", cfg.shape, cfg.datapath.label());
    match plot_p99_curves(points, &title, &svg, &png) {
        Ok(()) => eprintln!("[bench] wrote {} and {}", svg.display(), png.display()),
        // A run where nothing was verified has nothing to draw; the table says so.
        Err(e) => eprintln!("[bench] no plot: {e}"),
    }
    Ok(())
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"))
}

/// The comparison table (Markdown): per mode, the highest achieved load within 95 % of
/// offered, its ratio to `raw`, p50/p99 at the fixed load, the server's handling time per
/// message (no system calls), and anything that went wrong.
pub fn table(records: &[Record], fixed_rps: f64, servers: &[(Mode, ServerStats)]) -> String {
    let mut modes: Vec<&str> = Vec::new();
    for r in records {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let best = |m: &str| {
        let rs: Vec<Record> = records.iter().filter(|r| r.mode == m).cloned().collect();
        max_kept_up(&rs, DEFAULT_KEEP_UP).cloned()
    };
    let raw = best("raw").map(|r| r.achieved_rps);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| mode | max req/s within 95% of offered | vs raw | p99 there (µs) | p50 @ {:.0} req/s (µs) | p99 @ {:.0} req/s (µs) | server work p50 (ns) | mismatched | lost | server malformed |",
        fixed_rps, fixed_rps
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in modes {
        let b = best(m);
        let fixed = records
            .iter()
            .find(|r| r.mode == m && (r.offered_rps - fixed_rps).abs() < 0.5);
        let mismatched: u64 = records
            .iter()
            .filter(|r| r.mode == m)
            .map(|r| r.mismatched)
            .sum();
        let lost: u64 = records.iter().filter(|r| r.mode == m).map(|r| r.lost).sum();
        let server = servers
            .iter()
            .find(|(sm, _)| sm.name() == m)
            .map(|(_, st)| st);
        let malformed = server.map_or_else(|| "–".to_owned(), |st| st.malformed.to_string());
        let work = server
            .and_then(|st| st.work_p50_ns())
            .map_or_else(|| "–".to_owned(), |w| format!("{w:.0}"));
        let ratio = match (&b, raw) {
            (Some(b), Some(raw)) if raw > 0.0 => format!("{:.2}", b.achieved_rps / raw),
            _ => "–".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {m} | {} | {ratio} | {} | {} | {} | {work} | {mismatched} | {lost} | {malformed} |",
            b.as_ref().map_or_else(
                || "none kept up".to_owned(),
                |b| format!("{:.0}", b.achieved_rps)
            ),
            us(b.as_ref().and_then(|b| b.p99_us)),
            us(fixed.and_then(|r| r.p50_us)),
            us(fixed.and_then(|r| r.p99_us)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(mode: &str, offered: f64, achieved: f64, p50: f64, p99: f64) -> Record {
        Record {
            mode: mode.to_owned(),
            shape: "list-2x2048".to_owned(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(p50),
            p99_us: Some(p99),
            p999_us: Some(p99),
            mean_us: Some(p50),
            sent: 10,
            received: 10,
            verified: 10,
            mismatched: 0,
            lost: 1,
            unexpected: 0,
            malformed: 0,
            errors: 1,
            threads: 1,
            measured_s: 1.0,
        }
    }

    #[test]
    fn loads_are_sorted_unique_and_include_the_fixed_load() {
        let cfg = BenchConfig {
            rates: vec![30.0, 10.0, 30.0, -1.0, f64::NAN],
            fixed_rps: 5.0,
            ..BenchConfig::default()
        };
        assert_eq!(cfg.loads(), vec![5.0, 10.0, 30.0]);
    }

    #[test]
    fn table_reports_best_kept_up_point_ratio_and_fixed_load() {
        let records = vec![
            rec("raw", 10.0, 10.0, 5.0, 9.0),
            rec("raw", 20.0, 19.5, 6.0, 12.0),
            rec("raw", 40.0, 20.0, 7.0, 900.0),
            rec("cornflakes", 10.0, 10.0, 4.0, 8.0),
            rec("cornflakes", 20.0, 10.0, 50.0, 700.0),
        ];
        let t = table(&records, 10.0, &[]);
        let raw = t.lines().find(|l| l.starts_with("| raw ")).unwrap();
        // Best kept-up raw point is 19.5 (40 offered / 20 achieved did not keep up).
        assert!(
            raw.starts_with("| raw | 20 | 1.00 | 12.0 | 5.0 | 9.0 |"),
            "{raw}"
        );
        let cf = t.lines().find(|l| l.starts_with("| cornflakes ")).unwrap();
        assert!(
            cf.starts_with("| cornflakes | 10 | 0.51 | 8.0 | 4.0 | 8.0 |"),
            "{cf}"
        );
        assert!(cf.ends_with("| 0 | 2 | – |"), "{cf}");
    }
}
