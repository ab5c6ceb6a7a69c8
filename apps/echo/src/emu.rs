//! `echo bench --datapath emu`: every mode's server on one core, driving the ConnectX driver
//! against the emulated ConnectX on a second core, whose thread also plays the clients
//! ([`emu_bench`]). What it measures is the **server core's** throughput with a NIC that costs
//! it nothing beyond descriptors and completions; it is not a network measurement.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use cornflakes::datapath::{Completions, Connect, Transmit};
use cornflakes::mem::MemoryConfig;
use cornflakes::PinnedMemory;
use cornflakes_stack::iface::{StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::wire::{ethernet, framing, ipv4, MacAddr};
use datapath_mlx5::emu::{EmuConfig, EmuNic};
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};
use emu_bench::{EmuReport, EmuRunConfig, Request};
use loadgen::{max_kept_up, sweep, Record, SweepConfig, DEFAULT_KEEP_UP};

use crate::bench::{BenchConfig, BenchOutcome};
use crate::client::{RequestBuilder, Verifier};
use crate::mode::Mode;
use crate::server::{EchoServer, ServerConfig, ServerStats, IDLE_SPINS};
use crate::shape::ShapeSpec;

/// Default offered loads of the emulated-NIC sweep (requests per second): from well below to
/// well above what one core serves for the default shape.
pub const EMU_RATES: [f64; 12] = [
    100_000.0,
    250_000.0,
    500_000.0,
    750_000.0,
    1_000_000.0,
    1_250_000.0,
    1_500_000.0,
    2_000_000.0,
    2_500_000.0,
    3_000_000.0,
    4_000_000.0,
    5_000_000.0,
];

/// Distinct requests per mode (the schedule cycles through them).
pub const DISTINCT_REQUESTS: usize = 64;

/// What the device saw at one load point of one mode.
#[derive(Clone, Debug)]
pub struct EmuPoint {
    /// Mode.
    pub mode: Mode,
    /// Offered load.
    pub offered_rps: f64,
    /// Verified replies per second.
    pub achieved_rps: f64,
    /// Fraction of the window the device thread was busy.
    pub device_busy: f64,
    /// "kept up", "server saturated" or "device saturated".
    pub bottleneck: String,
    /// The server's median handling time per message at this point.
    pub work_p50_ns: Option<f64>,
    /// Replies read whole and deserialized by the mode's codec.
    pub sampled: u64,
    /// Requests the device dropped (no receive buffer posted: the server fell behind).
    pub not_delivered: u64,
    /// First failure descriptions.
    pub failures: Vec<String>,
}

const C_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x01]);
const S_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x02]);

/// The first `n` requests of `mode` and `shape` as the echo client sends them (request `i`
/// carries the values of id `i`), captured from a client datapath on a single-threaded
/// emulated ConnectX. Each must fit one frame of IP MTU `mtu`.
pub fn request_payloads(
    mode: Mode,
    shape: ShapeSpec,
    n: usize,
    mtu: usize,
) -> Result<Vec<Request>, String> {
    let err =
        |what: &str, e: &dyn std::fmt::Display| format!("preparing {mode} requests: {what}: {e}");
    let nic = EmuNic::new(EmuConfig {
        mtu,
        ..EmuConfig::default()
    })
    .map_err(|e| err("device", &e))?;
    let mem = PinnedMemory::new(MemoryConfig {
        max_item_size: 64 * 1024,
        ..MemoryConfig::default()
    })
    .map_err(|e| err("memory", &e))?;
    nic.register(&mem).map_err(|e| err("register", &e))?;
    let me = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 5000);
    let server = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7000);
    nic.set_flows(&flow_rules(C_MAC, me.port()));
    let mut stack = StackConfig::new(C_MAC, me);
    stack.mtu = mtu;
    stack.static_arp = vec![(*server.ip(), S_MAC)];
    let caps = DeviceCaps {
        max_send_sge: 30,
        inline_len: 18,
        mtu,
        csum_offload: true,
    };
    let mut cfg = Mlx5Config::new(stack);
    cfg.rx_buf_size = mtu + ethernet::HEADER_LEN;
    let mut dp =
        Mlx5Datapath::new(nic.queues(), mem, caps, cfg).map_err(|e| err("datapath", &e))?;
    let conn = dp.connect(server).map_err(|e| err("connect", &e))?;
    let mut b = RequestBuilder::new(mode, shape)?;
    let mut out = Vec::with_capacity(n);
    for id in 0..n as u64 {
        nic.clear_wire();
        b.send(&mut dp, conn, id).map_err(|e| err("send", &e))?;
        dp.flush().map_err(|e| err("flush", &e))?;
        nic.process();
        dp.poll_completions();
        let wire = nic.wire();
        let [frame] = wire.as_slice() else {
            return Err(format!(
                "a {mode} request of shape {shape} takes {} frames at IP MTU {mtu}; the \
                 emulated wire carries single-frame messages (raise --mtu)",
                wire.len()
            ));
        };
        let ip = ipv4::Packet::new_checked(&frame[ethernet::HEADER_LEN..])
            .map_err(|e| err("captured frame", &format!("{e:?}")))?;
        let end = ethernet::HEADER_LEN + ip.total_len() as usize;
        let f = framing::Packet::new_checked(&frame[FRAME_OVERHEAD - framing::HEADER_LEN..end])
            .map_err(|e| err("captured frame", &format!("{e:?}")))?;
        out.push(Request {
            msg_type: f.msg_type(),
            payload: frame[FRAME_OVERHEAD..end].to_vec(),
        });
    }
    Ok(out)
}

/// One load point of one mode: the echo server on the server core, the device and clients on
/// the other. Returns the device's report and the server's counters.
pub fn run_point(
    cfg: &BenchConfig,
    mode: Mode,
    requests: &[Request],
    rate: f64,
    seed: u64,
) -> Result<(EmuReport, ServerStats), String> {
    let run_cfg = EmuRunConfig {
        rate_rps: rate,
        duration: cfg.duration,
        warmup: cfg.warmup,
        timeout: cfg.timeout,
        seed,
        sample_every: cfg.sample_every,
        delay_per_segment: cfg.delay_per_segment,
        pin: true,
        mtu: cfg.mtu,
        ..EmuRunConfig::default()
    };
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
    let (report, stats) = emu_bench::run(&run_cfg, requests, checker, move |port| {
        let mem =
            PinnedMemory::new(port.memory_config()).map_err(|e| format!("server memory: {e}"))?;
        let dp = port
            .datapath(mem)
            .map_err(|e| format!("server datapath: {e}"))?;
        let mut server = EchoServer::new(dp, server_cfg)?;
        // A dedicated core: spin, never yield.
        server.run(port.stop_flag(), None, IDLE_SPINS, &mut |_| {
            std::hint::spin_loop()
        });
        Ok::<ServerStats, String>(server.stats())
    })?;
    Ok((report, stats?))
}

/// Runs every mode's sweep on the emulated NIC.
pub fn run_bench_emu(cfg: &BenchConfig) -> Result<BenchOutcome, String> {
    let (server_core, device_core) =
        datapath_mlx5::emu::threaded::two_cores().map_err(|e| e.to_string())?;
    let mut out = BenchOutcome::default();
    let loads = cfg.loads();
    if loads.is_empty() {
        return Err("no offered load to run".to_owned());
    }
    let runnable = &cfg.modes;
    eprintln!(
        "[bench] {} modes x up to {} loads, shape {}, {:?} per point (+{:?} warm-up), MTU {}: \
         the SERVER CORE's throughput with an emulated ConnectX (server on CPU {server_core}, \
         device and clients on CPU {device_core}); not a network measurement",
        runnable.len(),
        loads.len(),
        cfg.shape,
        cfg.duration,
        cfg.warmup,
        cfg.mtu
    );
    for &mode in runnable {
        let requests = request_payloads(mode, cfg.shape, DISTINCT_REQUESTS, cfg.mtu)?;
        let sweep_cfg = SweepConfig {
            mode: mode.name().to_owned(),
            shape: cfg.shape.to_string(),
            loads_rps: loads.clone(),
            keep_up: DEFAULT_KEEP_UP,
            stop_after_misses: cfg.stop_after_misses,
            progress: false,
        };
        let mut points: Vec<(EmuPoint, ServerStats)> = Vec::new();
        let mut seed = 1u64;
        let records = sweep(&sweep_cfg, |rate| {
            seed += 1;
            let (report, stats) = run_point(cfg, mode, &requests, rate, seed)?;
            let p = EmuPoint {
                mode,
                offered_rps: rate,
                achieved_rps: report.run.achieved_rps,
                device_busy: report.device_busy,
                bottleneck: report.bottleneck().to_string(),
                work_p50_ns: stats.work_p50_ns(),
                sampled: report.sampled,
                not_delivered: report.not_delivered,
                failures: report.failures.clone(),
            };
            eprintln!(
                "[bench] {:<20} offered {:>9.0}  achieved {:>9.0}  p99 {:>8}  device busy {:>3.0}%  \
                 server work p50 {:>6}  {}  ({})",
                mode.name(),
                rate,
                p.achieved_rps,
                report
                    .run
                    .latency
                    .p99_us()
                    .map_or("–".to_owned(), |v| format!("{v:.1}µs")),
                p.device_busy * 100.0,
                p.work_p50_ns
                    .map_or("–".to_owned(), |v| format!("{v:.0}ns")),
                p.bottleneck,
                report.run.counters
            );
            for f in &p.failures {
                eprintln!("[bench]   {mode}: {f}");
            }
            points.push((p, stats));
            Ok::<_, String>(report.run)
        })?;
        // The server counters reported for the mode: those of its best point within 95 %.
        let best = max_kept_up(&records, DEFAULT_KEEP_UP).map(|r| r.offered_rps);
        let stats = points
            .iter()
            .find(|(p, _)| Some(p.offered_rps) == best)
            .or(points.first())
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        out.servers.push((mode, stats));
        out.emu.extend(points.into_iter().map(|(p, _)| p));
        out.records.extend(records);
    }
    Ok(out)
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"))
}

/// The comparison table of an emulated-NIC run (Markdown): per mode, the highest load within
/// 95 % of offered, its ratio to `raw`, its p99, the device's utilisation and the server's
/// median handling time there, and the first point that did not keep up with what limited it.
pub fn table(records: &[Record], points: &[EmuPoint]) -> String {
    let mut modes: Vec<Mode> = Vec::new();
    for p in points {
        if !modes.contains(&p.mode) {
            modes.push(p.mode);
        }
    }
    let best = |m: Mode| {
        let rs: Vec<Record> = records
            .iter()
            .filter(|r| r.mode == m.name())
            .cloned()
            .collect();
        max_kept_up(&rs, DEFAULT_KEEP_UP).cloned()
    };
    let raw = best(Mode::Raw).map(|r| r.achieved_rps);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Server core's throughput with an emulated ConnectX on a second core (not a network \
         measurement).\n"
    );
    let _ = writeln!(
        s,
        "| mode | max req/s within 95% of offered | vs raw | p99 there (µs) | device busy there | server work p50 there (ns) | first point not kept up | mismatched | lost |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---|---:|---:|");
    for m in modes {
        let b = best(m);
        let at = |offered: f64| {
            points
                .iter()
                .find(|p| p.mode == m && (p.offered_rps - offered).abs() < 0.5)
        };
        let bp = b.as_ref().and_then(|b| at(b.offered_rps));
        let miss = points
            .iter()
            .find(|p| p.mode == m && p.achieved_rps < DEFAULT_KEEP_UP * p.offered_rps);
        let mine = records.iter().filter(|r| r.mode == m.name());
        let (mismatched, lost) = mine.fold((0, 0), |(a, b), r| (a + r.mismatched, b + r.lost));
        let ratio = match (&b, raw) {
            (Some(b), Some(raw)) if raw > 0.0 => format!("{:.2}", b.achieved_rps / raw),
            _ => "–".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {m} | {} | {ratio} | {} | {} | {} | {} | {mismatched} | {lost} |",
            b.as_ref().map_or_else(
                || "none kept up".to_owned(),
                |b| format!("{:.0}", b.achieved_rps)
            ),
            us(b.as_ref().and_then(|b| b.p99_us)),
            bp.map_or("–".to_owned(), |p| format!(
                "{:.0}%",
                p.device_busy * 100.0
            )),
            bp.and_then(|p| p.work_p50_ns)
                .map_or("–".to_owned(), |w| format!("{w:.0}")),
            miss.map_or("none (raise --rates)".to_owned(), |p| format!(
                "{:.0} → {:.0}, {}",
                p.offered_rps, p.achieved_rps, p.bottleneck
            )),
        );
    }
    s
}

/// The per-point device data as JSON (`emu-points.json` next to the records).
pub fn points_json(points: &[EmuPoint]) -> serde_json::Value {
    serde_json::Value::Array(
        points
            .iter()
            .map(|p| {
                serde_json::json!({
                    "mode": p.mode.name(),
                    "offered_rps": p.offered_rps,
                    "achieved_rps": p.achieved_rps,
                    "device_busy": p.device_busy,
                    "bottleneck": p.bottleneck,
                    "work_p50_ns": p.work_p50_ns,
                    "sampled": p.sampled,
                    "not_delivered": p.not_delivered,
                    "failures": p.failures,
                })
            })
            .collect(),
    )
}

/// The default per-point time of an emulated run (the device is fast; more points matter
/// more than longer ones).
pub const EMU_DURATION: Duration = Duration::from_millis(200);
/// The default warm-up of an emulated run.
pub const EMU_WARMUP: Duration = Duration::from_millis(50);
/// The default loss timeout of an emulated run.
pub const EMU_TIMEOUT: Duration = Duration::from_millis(20);
