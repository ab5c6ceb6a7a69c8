//! The peers benchmark: start each server, load it, sweep offered loads, report.

use crate::load::{load, Loaded};
use crate::plan::Plan;
use crate::server::{Peer, ServerConfig, ServerProcess, StartError};
use crate::transport::PeerTransport;
use kv_workloads::{Stats, WorkloadConfig};
use loadgen::fmt_us;
use loadgen::{run, sweep, Bound, Record, RunConfig, Schedule, ScheduleConfig, SweepConfig};
use std::fmt::Write as _;
use std::time::Duration;

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Systems to measure, one after the other.
    pub peers: Vec<Peer>,
    /// The workload (the same one `kv bench` takes).
    pub workload: WorkloadConfig,
    /// Requests generated for the run (ids wrap around them when a point sends more).
    pub requests: usize,
    /// Seed of the run's requests and schedules.
    pub seed: u64,
    /// Offered loads, units per second (requests/s; objects/s for the CDN workload).
    pub loads: Vec<f64>,
    /// Length of each point.
    pub duration: Duration,
    /// Warm-up of each point (sent and verified, not measured).
    pub warmup: Duration,
    /// A unit unanswered this long after its scheduled time is lost.
    pub timeout: Duration,
    /// Client threads.
    pub threads: usize,
    /// TCP connections per client thread.
    pub connections: usize,
    /// Stop a sweep after this many points in a row that did not keep up (0: run all).
    pub stop_after_misses: usize,
    /// How the servers are started.
    pub server: ServerConfig,
    /// Progress lines on stderr.
    pub progress: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            peers: vec![Peer::Redis, Peer::Memcached],
            workload: WorkloadConfig::default_for("ycsb").expect("known workload"),
            requests: 200_000,
            seed: 1,
            loads: vec![10_000.0, 20_000.0, 40_000.0, 60_000.0, 80_000.0],
            duration: Duration::from_secs(2),
            warmup: Duration::from_millis(300),
            timeout: Duration::from_millis(500),
            threads: 1,
            connections: 4,
            stop_after_misses: 2,
            server: ServerConfig::default(),
            progress: true,
        }
    }
}

/// One peer's results.
#[derive(Debug, Clone)]
pub struct PeerResult {
    /// Which system.
    pub peer: Peer,
    /// The version it reported.
    pub version: String,
    /// What was loaded into it.
    pub loaded: Loaded,
    /// One record per offered load.
    pub records: Vec<Record>,
}

/// The mode label of a peer in records: system, version, transport and protocol.
pub fn mode_label(peer: Peer, version: &str) -> String {
    match peer {
        Peer::Redis => format!("redis-server {version} (TCP, RESP)"),
        Peer::Memcached => format!("memcached {version} (TCP, text)"),
    }
}

/// Runs the benchmark: per peer, start the server, load it, sweep, stop it. Returns the
/// workload's statistics (of the generated run) and each peer's results. A peer whose binary
/// is missing is skipped with a `SKIPPED` line on stderr; none installed is an error.
pub fn run_bench(cfg: &BenchConfig) -> Result<(Stats, Vec<PeerResult>), String> {
    let workload = cfg.workload.build().map_err(|e| e.to_string())?;
    let requests = workload.requests(cfg.requests, cfg.seed);
    let stats = workload.describe(&requests);
    if cfg.progress {
        eprint!("[kv-peers] {stats}");
    }
    let mut out = Vec::new();
    for &peer in &cfg.peers {
        let plan =
            Plan::new(peer, workload.as_ref(), requests.clone()).map_err(|e| e.to_string())?;
        let server = match ServerProcess::start(peer, &cfg.server) {
            Ok(s) => s,
            Err(StartError::NotInstalled(bin)) => {
                eprintln!("[kv-peers] SKIPPED {bin}: not installed (crates/kv-peers/APT_PACKAGES)");
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        let version = server.version().to_owned();
        let mode = mode_label(peer, &version);
        if cfg.progress {
            eprintln!(
                "[kv-peers] {mode} on {}: loading {}",
                server.addr(),
                workload.name()
            );
        }
        let loaded = load(peer, server.addr(), workload.as_ref(), plan.layout)
            .map_err(|e| format!("loading {}: {e}", peer.binary()))?;
        if cfg.progress {
            eprintln!(
                "[kv-peers] loaded {} keys, {} value bytes",
                loaded.keys, loaded.bytes
            );
        }
        let addr = server.addr();
        let sweep_cfg = SweepConfig {
            mode: mode.clone(),
            shape: workload.name(),
            loads_rps: cfg.loads.clone(),
            keep_up: loadgen::DEFAULT_KEEP_UP,
            stop_after_misses: cfg.stop_after_misses,
            progress: cfg.progress,
        };
        let run_cfg = RunConfig {
            warmup: cfg.warmup,
            timeout: cfg.timeout,
            busy_poll: false,
            progress: false,
        };
        let mut point = 0u64;
        let records = sweep(&sweep_cfg, |rate| {
            point += 1;
            let schedule = Schedule::poisson(&ScheduleConfig {
                rate_rps: rate,
                bound: Bound::Duration(cfg.duration + cfg.warmup),
                threads: cfg.threads,
                seed: cfg.seed ^ (point << 20),
            })
            .map_err(|e| e.to_string())?;
            let threads = cfg.threads;
            let plan = &plan;
            run(
                &schedule,
                &run_cfg,
                |_| PeerTransport::connect(plan, addr, cfg.connections, threads),
                &|id: u64, payload: &[u8]| plan.check(id, threads, payload),
            )
            .map_err(|e| e.to_string())
        })?;
        server.stop();
        out.push(PeerResult {
            peer,
            version,
            loaded,
            records,
        });
    }
    if out.is_empty() {
        return Err("no peer could run: none of the selected servers is installed".into());
    }
    Ok((stats, out))
}

/// The markdown report: a summary row per system (the highest offered load kept up within
/// 95%, with its latencies) and every point, labelled as different systems over TCP.
pub fn table(workload: &str, stats: &Stats, results: &[PeerResult]) -> String {
    let unit = if workload.starts_with("cdn") {
        "objects/s"
    } else {
        "req/s"
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### Peers on `{workload}`: different systems (their own servers, kernel TCP on 127.0.0.1, \
         their own protocols), not the Cornflakes KV store\n"
    );
    let _ = writeln!(
        s,
        "| system | max {unit} within 95% of offered | p50 there (µs) | p99 there (µs) | p99.9 there (µs) | mismatched | lost | keys loaded | MB loaded |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let summary = loadgen::summarize(&r.records, loadgen::DEFAULT_KEEP_UP);
        let best = summary.first().and_then(|m| m.best.clone());
        let (mis, lost): (u64, u64) = r
            .records
            .iter()
            .fold((0, 0), |a, x| (a.0 + x.mismatched, a.1 + x.lost));
        let mode = mode_label(r.peer, &r.version);
        match best {
            Some(b) => {
                let _ = writeln!(
                    s,
                    "| {mode} | {:.0} | {} | {} | {} | {mis} | {lost} | {} | {:.1} |",
                    b.achieved_rps,
                    fmt_us(b.p50_us),
                    fmt_us(b.p99_us),
                    fmt_us(b.p999_us),
                    r.loaded.keys,
                    r.loaded.bytes as f64 / 1e6
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {mode} | no point kept up | – | – | – | {mis} | {lost} | {} | {:.1} |",
                    r.loaded.keys,
                    r.loaded.bytes as f64 / 1e6
                );
            }
        }
    }
    let _ = writeln!(s, "\nEvery point:\n");
    let _ = writeln!(s, "| system | offered {unit} | achieved {unit} | p50 (µs) | p99 (µs) | p99.9 (µs) | mismatched | lost |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        for x in &r.records {
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.0} | {} | {} | {} | {} | {} |",
                x.mode,
                x.offered_rps,
                x.achieved_rps,
                fmt_us(x.p50_us),
                fmt_us(x.p99_us),
                fmt_us(x.p999_us),
                x.mismatched,
                x.lost
            );
        }
    }
    let _ = writeln!(s, "\nThe workload as generated:\n\n```\n{stats}```");
    s
}
