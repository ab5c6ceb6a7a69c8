//! `echo bench --datapath emu`: every mode's server on one core, driving the ConnectX driver
//! against the emulated ConnectX on a second core, whose thread also plays the clients
//! ([`emu_bench`]). What it measures is the **server core's** throughput with a NIC that costs
//! it nothing beyond descriptors and completions; it is not a network measurement.
//!
//! With `--cores N` ([`BenchConfig::cores`]) each mode runs N echo servers, one per core, each
//! with its own pinned memory, datapath and arena on its own queue set of the device, and the
//! distinct requests are spread round-robin over the cores (request `k` to core `k mod N`,
//! by destination port); the report gives the cores' total and sums their counters. It needs
//! N + 1 CPUs.

use std::time::Duration;

use cornflakes::PinnedMemory;

use emu_bench::{
    About, EmuBench, EmuReport, EmuRunConfig, EmuTrial, Floor, RatioKind, Request, Roles,
};
use loadgen::search::SearchConfig;

use crate::client::{RequestBuilder, Verifier};
use crate::config::{BenchConfig, BenchOutcome, EmuOutcome};
use crate::mode::Mode;
use crate::server::{ServerConfig, ServerStats, IDLE_SPINS};
use crate::shape::ShapeSpec;

/// Default coarse grid of the emulated-NIC saturation search (requests per second): doubling
/// from well below what one core serves for any mode to well above (bisection refines it).
pub const EMU_RATES: [f64; 7] = [
    125_000.0,
    250_000.0,
    500_000.0,
    1_000_000.0,
    2_000_000.0,
    4_000_000.0,
    8_000_000.0,
];

/// Distinct requests per mode (the schedule cycles through them).
pub const DISTINCT_REQUESTS: usize = 64;

/// The first `n` requests of `mode` and `shape` as the echo client sends them (request `i`
/// carries the values of id `i`), captured from a client datapath on the emulated ConnectX
/// ([`emu_bench::capture`]). Each must fit one frame of IP MTU `mtu`.
pub fn request_payloads(
    mode: Mode,
    shape: ShapeSpec,
    n: usize,
    mtu: usize,
) -> Result<Vec<Request>, String> {
    let mut b = RequestBuilder::new(mode, shape)?;
    emu_bench::capture(
        &format!("{mode} requests of shape {shape}"),
        n,
        mtu,
        |dp, conn, id| b.send(dp, conn, id),
    )
}

/// Spreads `requests` round-robin over `cores` server cores: request `k` to core `k mod cores`.
pub fn spread_over_cores(requests: &mut [Request], cores: usize) {
    for (k, r) in requests.iter_mut().enumerate() {
        r.core = k % cores.max(1);
    }
}

/// One load point of one mode: the echo server on each of `cfg.cores` server cores, the device
/// and clients on one more. Each request goes to its [`Request::core`]. Returns the device's
/// report and each core's server counters, in core order.
pub fn run_point(
    cfg: &BenchConfig,
    mode: Mode,
    requests: &[Request],
    rate: f64,
    seed: u64,
) -> Result<(EmuReport, Vec<ServerStats>), String> {
    run_point_with(cfg, mode, requests, rate, seed, true)
}

/// [`run_point`], with `pin: false` letting the threads share CPUs: **functional only** (for
/// tests of the N-core plumbing on a machine with fewer than N + 1 CPUs; its numbers mean
/// nothing).
pub fn run_point_with(
    cfg: &BenchConfig,
    mode: Mode,
    requests: &[Request],
    rate: f64,
    seed: u64,
    pin: bool,
) -> Result<(EmuReport, Vec<ServerStats>), String> {
    let mut run_cfg = EmuRunConfig {
        cores: cfg.cores,
        pin,
        mtu: cfg.load.mtu,
        ..cfg.device.run_config(
            rate,
            seed,
            (cfg.load.duration, cfg.load.warmup, cfg.load.timeout),
        )
    };
    if let Some(n) = cfg.rx_ring {
        run_cfg.emu.rq_entries = n;
    }
    let verifier = Verifier::new(mode, cfg.shape)?;
    let checker = move |i: usize, reply: &[u8]| {
        if verifier.check(i as u64, reply) {
            Ok(())
        } else {
            Err(format!(
                "{mode}: reply to request {i} does not decode to the values sent"
            ))
        }
    };
    let server_cfg = ServerConfig {
        mode,
        threshold: cfg.threshold,
    };
    // Each core's own server: its own pinned memory, datapath, arena and counters.
    let (report, stats) = emu_bench::run_cores(&run_cfg, requests, checker, |port| {
        let core = port.core();
        let mem = PinnedMemory::new(port.memory_config())
            .map_err(|e| format!("server core {core} memory: {e}"))?;
        let dp = port
            .datapath(mem)
            .map_err(|e| format!("server core {core} datapath: {e}"))?;
        let mut server = crate::server::new(dp, server_cfg)?;
        if pin {
            // A dedicated core: spin, never yield.
            server.run(port.stop_flag(), None, IDLE_SPINS, &mut |_| {
                std::hint::spin_loop()
            });
        } else {
            // Sharing CPUs with the other cores and the device: yield when idle.
            server.run(port.stop_flag(), None, IDLE_SPINS, &mut |_| {
                std::thread::yield_now()
            });
        }
        Ok::<ServerStats, String>(server.stats())
    })?;
    let stats = stats.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((report, stats))
}

/// Searches every mode's saturation load on the emulated NIC, the modes interleaved trial by
/// trial, the whole search `cfg.device.repeat` times ([`emu_bench::EmuBench`]): this supplies
/// each mode's requests, reply checker and server cores.
pub fn run_bench_emu(cfg: &BenchConfig) -> Result<(BenchOutcome, EmuOutcome), String> {
    // The grid `cfg.loads()` (with `stop_after_misses == 0` every grid load is run); trials
    // per load and resolution from `cfg.device`.
    let search = SearchConfig {
        whole_grid: cfg.stop_after_misses == 0,
        ..SearchConfig::new(cfg.loads())
    };
    let bench = EmuBench::new(cfg.cores, &cfg.device, search)?;
    let modes = &cfg.modes;
    let mut requests = modes
        .iter()
        .map(|&m| request_payloads(m, cfg.shape, DISTINCT_REQUESTS, cfg.load.mtu))
        .collect::<Result<Vec<_>, _>>()?;
    for r in &mut requests {
        spread_over_cores(r, cfg.cores);
    }
    let shape = cfg.shape.to_string();
    let about = About {
        lane: ("mode", "modes"),
        what: format!("shape {shape}"),
        per_trial: (cfg.load.duration, cfg.load.warmup),
        mtu: cfg.load.mtu,
        per_core: "",
    };
    let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
    let mut seed = 1u64;
    let run = bench.run(&about, &names, |p| {
        seed += 1;
        let mode = modes[p.lane];
        let (report, per_core) = run_point(cfg, mode, &requests[p.lane], p.offered_rps, seed)?;
        let stats = ServerStats::sum(&per_core);
        let (work, split) = (stats.work_p50_ns(), stats.time);
        Ok(EmuTrial::new(p, mode.name(), &shape, report, work, stats).with_split(split))
    })?;
    let out = BenchOutcome {
        records: run.records,
        servers: modes
            .iter()
            .zip(run.servers)
            .map(|(&m, s)| (m, s.unwrap_or_default()))
            .collect(),
        emu: None,
    };
    Ok((out, run.outcome))
}

/// Which mode is which in the ratios: the Cornflakes configurations, the libraries and `raw`.
pub fn roles() -> Roles<'static> {
    Roles {
        raw: Some(Mode::Raw.name()),
        ..Roles::CORNFLAKES
    }
}

/// The floors the ratios of a run of `shape` are judged by (on the median of the repeats;
/// docs/performance.md, "The targets"): at 2 × 2048 B cornflakes ≥ 2.5 × the best library and
/// ≥ 0.8 × raw, at 1 × 64 B ≥ 0.98 × the best library; at every shape the hybrid ≥ only-copy
/// and serialize-and-send ≥ 1.07.
pub fn floors(shape: ShapeSpec) -> Vec<Floor> {
    let mut f = Floor::EVERY_RUN.to_vec();
    match shape.to_string().as_str() {
        "list-2x2048" => f.extend([
            Floor::best_library(2.5),
            Floor {
                kind: RatioKind::Raw,
                min: 0.8,
            },
        ]),
        "single-64" => f.push(Floor::best_library(0.98)),
        _ => {}
    }
    f
}

/// The default per-point time of an emulated run (the device is fast; more points matter
/// more than longer ones).
pub const EMU_DURATION: Duration = Duration::from_millis(200);
/// The default warm-up of an emulated run.
pub const EMU_WARMUP: Duration = Duration::from_millis(50);
/// The default loss timeout of an emulated run.
pub const EMU_TIMEOUT: Duration = Duration::from_millis(20);
