//! One run: device thread with the clients on one core, the caller's server on another.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes::mem::MemoryConfig;
use cornflakes::PinnedMemory;
use cornflakes_stack::iface::StackConfig;
use cornflakes_stack::wire::{ethernet, MacAddr};
use datapath_mlx5::emu::threaded::{
    pin_current_thread, two_cores, DeviceOptions, EmuDevice, EmuPort, ThreadedQueues,
};
use datapath_mlx5::emu::{EmuConfig, EmuStats};
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};
use loadgen::{Bound, RunReport, Schedule, ScheduleConfig};

use crate::frames::{Request, RequestFrames};
use crate::wire::{Ends, LoadWire, ReplyCheck};

const SERVER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x02]);
const CLIENT_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x01]);
const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 5000);

/// A device thread busier than this fraction of the measured window is called saturated.
pub const DEVICE_SATURATED: f64 = 0.9;

/// What one run does.
#[derive(Clone, Debug)]
pub struct EmuRunConfig {
    /// Offered load, requests per second (Poisson arrivals).
    pub rate_rps: f64,
    /// Measured time.
    pub duration: Duration,
    /// Time before it (requests verified, not measured).
    pub warmup: Duration,
    /// A request unanswered this long after its scheduled time is lost.
    pub timeout: Duration,
    /// Seed of the arrival times.
    pub seed: u64,
    /// Every n-th reply is read whole and checked by the [`ReplyCheck`] (1: all of them);
    /// the first reply to each distinct request always is. Every reply's headers, length,
    /// type and id are checked.
    pub sample_every: u64,
    /// Replies to one request may change length during the run (a key-value store's writes
    /// change what a read returns): a reply whose length differs from the last reply to the
    /// same request is then read whole and checked, instead of counted as mismatched.
    pub replies_vary: bool,
    /// The device's time per data segment (gather entry); zero by default.
    pub delay_per_segment: Duration,
    /// Pin the server and device threads to two distinct CPUs (an error with fewer than 2).
    pub pin: bool,
    /// IP MTU of the emulated port (jumbo frames by default, as in the paper).
    pub mtu: usize,
    /// Gather entries per send WQE the device offers (ConnectX-5: 30).
    pub max_send_sge: usize,
    /// Queue geometry of the emulated device.
    pub emu: EmuConfig,
}

impl Default for EmuRunConfig {
    fn default() -> Self {
        EmuRunConfig {
            rate_rps: 100_000.0,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(50),
            timeout: Duration::from_millis(20),
            seed: 1,
            sample_every: 64,
            replies_vary: false,
            delay_per_segment: Duration::ZERO,
            pin: true,
            mtu: 9000,
            max_send_sge: 30,
            emu: EmuConfig {
                sq_wqebbs: 4096,
                rq_entries: 1024,
                rq_stride: 16,
                cq_entries: 4096,
                mtu: 9000,
                ..EmuConfig::default()
            },
        }
    }
}

/// Which side limited a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bottleneck {
    /// Achieved within 95 % of offered: nothing saturated.
    None,
    /// The server fell behind while the device thread had time to spare.
    Server,
    /// The device thread was busy at least [`DEVICE_SATURATED`] of the time: the result
    /// understates the server.
    Device,
}

impl fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bottleneck::None => "kept up",
            Bottleneck::Server => "server saturated",
            Bottleneck::Device => "device saturated",
        })
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct EmuReport {
    /// Throughput, latency and request outcomes (as the socket load generator reports them,
    /// so [`loadgen::Record::from_report`] and the sweeps apply).
    pub run: RunReport,
    /// Fraction of the injection window the device thread was busy (0–1).
    pub device_busy: f64,
    /// The emulated device's counters.
    pub device: EmuStats,
    /// Replies read whole and checked by the [`ReplyCheck`].
    pub sampled: u64,
    /// Requests dropped by the device for want of a posted receive buffer (counted lost).
    pub not_delivered: u64,
    /// Largest delay between a request's scheduled time and its injection, nanoseconds.
    pub max_inject_lag_ns: u64,
    /// The first few failures, described.
    pub failures: Vec<String>,
}

impl EmuReport {
    /// Which side saturated, if any.
    pub fn bottleneck(&self) -> Bottleneck {
        if self.device_busy >= DEVICE_SATURATED {
            Bottleneck::Device
        } else if self.run.achieved_rps >= loadgen::DEFAULT_KEEP_UP * self.run.offered_rps {
            Bottleneck::None
        } else {
            Bottleneck::Server
        }
    }
}

/// The server's side of a run, handed to the server closure on its core.
pub struct ServerPort {
    port: EmuPort,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
    mtu: usize,
    max_send_sge: usize,
}

impl ServerPort {
    /// A pinned-memory configuration whose items hold the port's receive buffers.
    pub fn memory_config(&self) -> MemoryConfig {
        MemoryConfig {
            max_item_size: (self.mtu + ethernet::HEADER_LEN)
                .next_power_of_two()
                .max(64 * 1024),
            ..MemoryConfig::default()
        }
    }

    /// The server's datapath on the emulated device: `mem` registered with it, receive
    /// buffers posted, the server at 10.77.0.2:7000 (the clients are 10.77.0.1:5000).
    /// Requests start arriving once this returns.
    pub fn datapath(&self, mem: PinnedMemory) -> io::Result<Mlx5Datapath<ThreadedQueues>> {
        self.port.register(&mem)?;
        let mut stack = StackConfig::new(SERVER_MAC, SERVER);
        stack.mtu = self.mtu;
        stack.static_arp = vec![(*CLIENT.ip(), CLIENT_MAC)];
        let caps = DeviceCaps {
            max_send_sge: self.max_send_sge,
            inline_len: 18,
            mtu: self.port.mtu(),
            csum_offload: true,
        };
        let mut cfg = Mlx5Config::new(stack);
        cfg.rx_buf_size = self.mtu + ethernet::HEADER_LEN;
        let dp = Mlx5Datapath::new(self.port.queues(), mem, caps, cfg)?;
        self.ready.store(true, Ordering::Release);
        Ok(dp)
    }

    /// Whether the run is over (poll it in the server loop).
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The stop flag itself (for loops that take an `&AtomicBool`).
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }
}

/// Runs `requests` (request `i` of the schedule is `requests[i % len]`) at `cfg.rate_rps`
/// against the server `server` runs on its own core until [`ServerPort::stopped`]; the device
/// and the clients run on another. Returns the report and what `server` returned.
pub fn run<C, R, S>(
    cfg: &EmuRunConfig,
    requests: &[Request],
    checker: C,
    server: S,
) -> Result<(EmuReport, R), String>
where
    C: ReplyCheck,
    R: Send,
    S: FnOnce(ServerPort) -> R + Send,
{
    let cores = if cfg.pin {
        Some(two_cores().map_err(|e| e.to_string())?)
    } else {
        None
    };
    if cfg.emu.mtu < cfg.mtu {
        return Err(format!(
            "the stack MTU {} exceeds the emulated port's {}",
            cfg.mtu, cfg.emu.mtu
        ));
    }
    let frames = RequestFrames::build(
        requests,
        (CLIENT_MAC, CLIENT),
        (SERVER_MAC, SERVER),
        cfg.mtu,
    )?;
    let schedule = Schedule::poisson(&ScheduleConfig {
        rate_rps: cfg.rate_rps,
        bound: Bound::Duration(cfg.warmup + cfg.duration),
        threads: 1,
        seed: cfg.seed,
    })
    .map_err(|e| format!("schedule at {} req/s: {e}", cfg.rate_rps))?;
    if schedule.total_requests() > u64::from(u32::MAX) {
        return Err("more than 2^32 requests in one run".to_owned());
    }
    let offsets = schedule.threads()[0].offsets_ns().to_vec();
    let ready = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ends = Ends {
        client_mac: CLIENT_MAC,
        client_port: CLIENT.port(),
        server_port: SERVER.port(),
    };
    let wire = LoadWire::new(frames, offsets, ends, cfg, checker, ready.clone());
    let mut emu = cfg.emu.clone();
    emu.loopback = false;
    let device = EmuDevice::spawn(
        emu,
        flow_rules(SERVER_MAC, SERVER.port()),
        DeviceOptions {
            delay_per_segment: cfg.delay_per_segment,
            core: cores.map(|c| c.1),
            yield_when_idle: !cfg.pin,
        },
        wire,
    )
    .map_err(|e| format!("starting the emulated device: {e}"))?;
    let port = ServerPort {
        port: device.port(),
        stop: stop.clone(),
        ready: ready.clone(),
        mtu: cfg.mtu,
        max_send_sge: cfg.max_send_sge,
    };
    // Long enough for the schedule, the loss timeout and a slow start, and then some.
    let limit = cfg.warmup + cfg.duration + cfg.timeout + Duration::from_secs(30);
    let server_out = std::thread::scope(|s| {
        let server_thread = std::thread::Builder::new()
            .name("emu-server".to_owned())
            .spawn_scoped(s, move || {
                if let Some((core, _)) = cores {
                    pin_current_thread(core).map_err(|e| e.to_string())?;
                }
                Ok::<R, String>(server(port))
            })
            .map_err(|e| format!("spawning the server thread: {e}"))?;
        let started = Instant::now();
        let mut why = None;
        while !device.wire_finished() {
            if server_thread.is_finished() {
                why = Some("the server returned before the run ended".to_owned());
                break;
            }
            if !device.is_running() {
                why = Some("the device thread ended early".to_owned());
                break;
            }
            if started.elapsed() > limit {
                why = Some(format!("the run did not finish within {limit:?}"));
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        let out = server_thread
            .join()
            .map_err(|_| "the server thread panicked".to_owned())??;
        if !ready.load(Ordering::Acquire) {
            return Err("the server never built its datapath (ServerPort::datapath)".to_owned());
        }
        match why {
            Some(w) => Err(w),
            None => Ok(out),
        }
    });
    let (wire, dev) = device
        .stop()
        .map_err(|e| format!("stopping the emulated device: {e}"))?;
    let server_out = server_out?;
    let warmup_ns = cfg.warmup.as_nanos() as u64;
    let offsets = wire.offsets();
    let measured_requests = offsets.iter().filter(|&&o| o >= warmup_ns).count() as u64;
    let window_end = offsets
        .last()
        .copied()
        .unwrap_or(0)
        .max(wire.last_measured_reply_ns);
    let window_ns = window_end.saturating_sub(warmup_ns);
    let achieved_rps = if window_ns == 0 {
        0.0
    } else {
        wire.measured_verified as f64 * 1e9 / window_ns as f64
    };
    let device_busy = match (wire.window_start, wire.window_end) {
        (Some(a), Some(b)) if b.now_ns > a.now_ns => {
            (b.busy_ns - a.busy_ns) as f64 / (b.now_ns - a.now_ns) as f64
        }
        _ => 0.0,
    };
    let report = EmuReport {
        run: RunReport {
            offered_rps: schedule.rate_rps(),
            achieved_rps,
            measured_window: Duration::from_nanos(window_ns),
            measured_requests,
            counters: wire.counters,
            latency: wire.latency.clone(),
            threads: 1,
        },
        device_busy,
        device: dev.stats,
        sampled: wire.sampled,
        not_delivered: wire.not_delivered,
        max_inject_lag_ns: wire.max_inject_lag_ns,
        failures: wire.failures.clone(),
    };
    Ok((report, server_out))
}
