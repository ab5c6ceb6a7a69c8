//! One run: device thread with the clients on one core, the caller's server on another (or
//! N server cores, one queue set each, on N others).

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
    cores_for, pin_current_thread, DeviceOptions, EmuDevice, EmuPort, ThreadedQueues,
};
use datapath_mlx5::emu::{EmuConfig, EmuStats};
use datapath_mlx5::{core_flow_rules, core_port, DeviceCaps, Mlx5Config, Mlx5Datapath};
use loadgen::canary::{Canary, Speed};
use loadgen::interference::{CpuSnapshot, Interference};
use loadgen::{Bound, Counters, RunReport, Schedule, ScheduleConfig};

use crate::frames::{Request, RequestFrames};
use crate::wire::{Ends, LoadWire, ReplyCheck};

const SERVER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x02]);
const CLIENT_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x01]);
const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 5000);

/// A device thread busier than this fraction of the measured window is called saturated.
pub const DEVICE_SATURATED: f64 = 0.9;

/// The default [`EmuRunConfig::check_every`]. Why 8: with it the device's instructions per
/// 4 KiB echo request are 2811 against 4382 checking every reply and 2600 at 64 (callgrind;
/// `crates/emu-bench/README.md`, docs/performance.md "How replies are checked").
pub const DEFAULT_CHECK_EVERY: u64 = 8;

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
    /// Every reply is read whole (every byte of every descriptor, as a NIC's DMA reads it)
    /// and its headers, length, type, id and answering core checked. A reply whose payload is
    /// checked ([`check_every`](Self::check_every)) is given to the [`ReplyCheck`] when it is
    /// the first reply to its distinct request, when its bytes differ from the last reply the
    /// checker accepted for that request (compared by a 64-bit hash), and for a random
    /// sample of 1 in `sample_every` of the rest (1: every checked reply goes to the
    /// checker). So a wrong byte in any checked reply is caught; what this sample adds is a
    /// re-check of replies identical to an accepted one.
    pub sample_every: u64,
    /// Which replies' payloads are checked at all (the hash above and, when it says so, the
    /// [`ReplyCheck`]): every reply that must be — every reply to a request the checker
    /// [sees every](ReplyCheck::sees_every) reply of (a write), the first reply to each
    /// distinct request, the first to each in the measured window, and any whose length
    /// differs from the last checked one — and a random 1 in `check_every` of the rest
    /// (a stream of draws seeded by `seed`: the same seed, the same draws). 1 checks every reply. The others are still read
    /// whole, as a NIC's DMA reads them, and their headers, length, type, id and core are
    /// checked; only the payload check is sampled. Every distinct request answered in the
    /// measured window, and so every core, has a checked reply there
    /// ([`EmuReport::coverage_complete`]). Default [`DEFAULT_CHECK_EVERY`].
    pub check_every: u64,
    /// Replies to one request may change length during the run (a key-value store's writes
    /// change what a read returns): a reply whose length differs from the last reply to the
    /// same request is then read whole and checked, instead of counted as mismatched.
    pub replies_vary: bool,
    /// The device's time per data segment (gather entry); zero by default.
    pub delay_per_segment: Duration,
    /// Server cores (1 by default): the device gets one queue set per core, core `i`'s
    /// steered by destination UDP port `7000 + i` ([`datapath_mlx5::core_flow_rules`]), and
    /// [`run_cores`] runs one server thread per core. Each request goes to its
    /// [`Request::core`]. `rate_rps` is the load offered to all cores together.
    pub cores: usize,
    /// Pin every server thread and the device thread to its own CPU: `cores + 1` distinct
    /// CPUs, an error naming the count when the machine has fewer. `false` lets the threads
    /// share CPUs (the device yields when idle): **functional only** — for tests of the
    /// plumbing (e.g. 2 server cores and the device on a 2-CPU machine); throughput and
    /// latency of such a run mean nothing.
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
            check_every: DEFAULT_CHECK_EVERY,
            replies_vary: false,
            delay_per_segment: Duration::ZERO,
            cores: 1,
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

/// What one server core saw in a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoreReport {
    /// Outcomes of the requests sent to this core (and replies from its queue set that
    /// matched no request).
    pub counters: Counters,
    /// Measured requests this core answered correctly, per second of the measured window.
    pub achieved_rps: f64,
    /// The device's counters of this core's queue set.
    pub device: EmuStats,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct EmuReport {
    /// Throughput, latency and request outcomes (as the socket load generator reports them,
    /// so [`loadgen::Record::from_report`] and the sweeps apply), over all server cores.
    pub run: RunReport,
    /// Server cores of the run.
    pub cores: usize,
    /// Per server core: its requests' outcomes, throughput and device counters (they sum to
    /// `run.counters` and `device`).
    pub per_core: Vec<CoreReport>,
    /// Fraction of the injection window the device thread was busy (0–1).
    pub device_busy: f64,
    /// The emulated device's counters, summed over the cores' queue sets.
    pub device: EmuStats,
    /// Replies whose payload the [`ReplyCheck`] checked.
    pub sampled: u64,
    /// Replies right by their headers whose payload was read but not checked (outside the
    /// 1-in-[`check_every`](EmuRunConfig::check_every) sample). `sampled + hash_matched +
    /// unchecked` is every reply that verified.
    pub unchecked: u64,
    /// The run's [`EmuRunConfig::check_every`].
    pub check_every: u64,
    /// Replies whose gathered payload equalled (by hash) a reply the checker accepted for
    /// the same request: checked without decoding.
    pub hash_matched: u64,
    /// Distinct requests with a reply in the measured window whose payload was checked and
    /// accepted, of `distinct_answered`.
    pub distinct_verified: usize,
    /// Distinct requests with a reply in the measured window right by its headers (checked
    /// or not).
    pub distinct_answered: usize,
    /// Distinct requests of the run.
    pub distinct: usize,
    /// Server cores with a reply in the measured window whose payload was checked and
    /// accepted, of `cores`.
    pub cores_verified: usize,
    /// What else ran on the run's CPUs (server cores and device) from the device's start to
    /// its stop; `None` for an unpinned run (its CPUs are not its own) or without `/proc`.
    pub interference: Option<Interference>,
    /// The speed canary timed on the run's CPUs just before it started, against the process's
    /// first ([`loadgen::canary`]: a machine that slows down by itself, which `interference`
    /// cannot see); `None` for an unpinned run.
    pub canary: Option<Speed>,
    /// The device's time per gather entry (`EmuRunConfig::delay_per_segment`), nanoseconds.
    pub desc_ns: u64,
    /// Requests dropped by the device for want of a posted receive buffer (counted lost).
    pub not_delivered: u64,
    /// Largest delay between a request's scheduled time and its injection, nanoseconds.
    pub max_inject_lag_ns: u64,
    /// The first few failures, described.
    pub failures: Vec<String>,
    /// Mean request frame length in bytes (Ethernet header to payload end, no FCS).
    pub mean_request_frame: f64,
    /// Mean reply frame length, as `mean_request_frame` (`None` when nothing was answered).
    pub mean_reply_frame: Option<f64>,
    /// Frames per request in this report's rates: 1, unless a caller counts several frames
    /// as one request (the KV bench's split requests) and divided the rates by this.
    pub frames_per_request: f64,
}

/// Bytes a frame occupies on an Ethernet link beyond its length without FCS: FCS (4),
/// preamble and start delimiter (8), inter-frame gap (12).
pub const ETHERNET_WIRE_OVERHEAD: f64 = 24.0;

/// The link speed the line-rate column assumes, the paper's NICs' (Gbit/s).
pub const LINE_RATE_GBPS: f64 = 100.0;

impl EmuReport {
    /// The most requests per second (in this report's units) an Ethernet link of `gbps`
    /// Gbit/s could carry with this run's mean request and reply frames, each direction
    /// being its own limit (full duplex). The emulated wire has no speed; a result above
    /// this would be wire-bound on a real port of that speed. `None` when nothing was
    /// answered.
    pub fn line_rate_rps(&self, gbps: f64) -> Option<f64> {
        let reply = self.mean_reply_frame?;
        let on_wire = |len: f64| len.max(60.0) + ETHERNET_WIRE_OVERHEAD;
        let bytes = on_wire(self.mean_request_frame).max(on_wire(reply));
        Some(gbps * 1e9 / 8.0 / bytes / self.frames_per_request.max(1.0))
    }

    /// Replies whose payload was checked (by hash or by the checker).
    pub fn checked(&self) -> u64 {
        self.sampled + self.hash_matched
    }

    /// Whether the payload checks covered the run: every distinct request answered in the
    /// measured window and every server core had a checked reply there. Sampling
    /// ([`EmuRunConfig::check_every`]) guarantees it whenever every core answered; a run
    /// where it fails is flagged in the tables.
    pub fn coverage_complete(&self) -> bool {
        self.distinct_verified == self.distinct_answered && self.cores_verified == self.cores
    }

    /// The coverage in words: replies checked of those answered, distinct requests and cores.
    pub fn coverage_note(&self) -> String {
        let all = self.checked() + self.unchecked;
        format!(
            "payload checked: {} of {} replies ({} decoded, {} by hash; 1 in {} sampled), \
             distinct requests {}/{} answered (of {}), cores {}/{}{}",
            self.checked(),
            all,
            self.sampled,
            self.hash_matched,
            self.check_every,
            self.distinct_verified,
            self.distinct_answered,
            self.distinct,
            self.cores_verified,
            self.cores,
            if self.coverage_complete() {
                ""
            } else {
                " INCOMPLETE"
            }
        )
    }

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

/// A pinned-memory configuration whose items hold the receive buffers of a run with IP MTU
/// `mtu` ([`EmuRunConfig::mtu`]): what [`ServerPort::memory_config`] gives, for memory made
/// before the run (a [`Resident`](crate::Resident) core's).
pub fn memory_config(mtu: usize) -> MemoryConfig {
    MemoryConfig {
        max_item_size: (mtu + ethernet::HEADER_LEN)
            .next_power_of_two()
            .max(64 * 1024),
        ..MemoryConfig::default()
    }
}

/// The server's side of a run, handed to the server closure on its core: one queue set of the
/// emulated port.
pub struct ServerPort {
    port: EmuPort,
    core: usize,
    stop: Arc<AtomicBool>,
    ready: Arc<[AtomicBool]>,
    mtu: usize,
    max_send_sge: usize,
}

impl ServerPort {
    /// A pinned-memory configuration whose items hold the port's receive buffers
    /// ([`memory_config`] of the run's MTU).
    pub fn memory_config(&self) -> MemoryConfig {
        memory_config(self.mtu)
    }

    /// Which server core this is (0 to `cores - 1`).
    pub fn core(&self) -> usize {
        self.core
    }

    /// Where this core listens: 10.77.0.2, UDP port `7000 + core`.
    pub fn addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(*SERVER.ip(), SERVER.port() + self.core as u16)
    }

    /// The server's datapath on this core's queue set of the emulated device: `mem`
    /// registered with it, receive buffers posted, the server at [`addr`](Self::addr) (the
    /// clients are 10.77.0.1:5000). Requests start arriving once every core's datapath is up.
    /// `mem` may come from an earlier run (a [`Resident`](crate::Resident) core keeps its
    /// memory): registering it here gives every region a key of this run's device.
    pub fn datapath(&self, mem: PinnedMemory) -> io::Result<Mlx5Datapath<ThreadedQueues>> {
        self.port.register(&mem)?;
        let mut stack = StackConfig::new(SERVER_MAC, self.addr());
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
        self.ready[self.core].store(true, Ordering::Release);
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
///
/// One server core: `cfg.cores` must be 1 and every request's `core` 0; [`run_cores`] runs
/// several.
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
    if cfg.cores != 1 {
        return Err(format!(
            "EmuRunConfig::cores is {}, but emu_bench::run serves one core: use run_cores",
            cfg.cores
        ));
    }
    let (report, mut out) = run_servers(cfg, requests, checker, vec![server])?;
    let out = out.pop().ok_or("the server returned nothing")?;
    Ok((report, out))
}

/// Runs `requests` at `cfg.rate_rps` (all cores together) against `cfg.cores` server cores:
/// the device gets one queue set per core, steered by destination UDP port; core `i`'s thread
/// (pinned to its own CPU unless `cfg.pin` is false) calls `server` with its own
/// [`ServerPort`] (index `i`, its queue set), where it builds its own memory, datapath and
/// state, sharing nothing with the other cores. Request `k` goes to core `requests[k].core`,
/// and its reply must come from that core (its port and queue set), or it counts as
/// mismatched. Returns the report (summed, and per core in [`EmuReport::per_core`]) and what
/// each core's `server` returned, in core order.
pub fn run_cores<C, R, S>(
    cfg: &EmuRunConfig,
    requests: &[Request],
    checker: C,
    server: S,
) -> Result<(EmuReport, Vec<R>), String>
where
    C: ReplyCheck,
    R: Send,
    S: Fn(ServerPort) -> R + Sync,
{
    let server = &server;
    let servers = (0..cfg.cores).map(|_| move |p| server(p)).collect();
    run_servers(cfg, requests, checker, servers)
}

fn run_servers<C, R, S>(
    cfg: &EmuRunConfig,
    requests: &[Request],
    checker: C,
    servers: Vec<S>,
) -> Result<(EmuReport, Vec<R>), String>
where
    C: ReplyCheck,
    R: Send,
    S: FnOnce(ServerPort) -> R + Send,
{
    debug_assert_eq!(servers.len(), cfg.cores);
    let mut run = Run::start(cfg, requests, checker)?;
    let ports = run.take_ports();
    let server_out = std::thread::scope(|s| {
        let mut threads = Vec::with_capacity(run.n);
        for (port, server) in ports.into_iter().zip(servers) {
            let core = port.core;
            let cpu = run.cpus.as_ref().map(|c| c.0[core]);
            let spawned = std::thread::Builder::new()
                .name(format!("emu-server-{core}"))
                .spawn_scoped(s, move || {
                    if let Some(cpu) = cpu {
                        pin_current_thread(cpu).map_err(|e| format!("server core {core}: {e}"))?;
                    }
                    Ok::<R, String>(server(port))
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    // The threads already running see the stop flag and end with the scope.
                    run.stop_servers();
                    return Err(format!("spawning the thread of server core {core}: {e}"));
                }
            }
        }
        let why = run.watch(|| threads.iter().position(|t| t.is_finished()));
        run.stop_servers();
        let outs = threads
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.join().unwrap_or_else(|_| Err(run.panicked(i))))
            .collect();
        run.outcome(outs, why)
    });
    run.finish(server_out)
}

/// What the result of server core `core` of `n` says when its thread panicked.
pub(crate) fn panicked(n: usize, core: usize) -> String {
    if n == 1 {
        "the server thread panicked".to_owned()
    } else {
        format!("the server thread of core {core} panicked")
    }
}

/// One run in progress: the device and the clients started, the server cores' ports handed
/// out, and what deciding the run's outcome and its report needs. Shared by the servers
/// started per run ([`run_cores`]) and the resident ones ([`crate::Resident`]).
pub(crate) struct Run<'a, C: ReplyCheck> {
    cfg: &'a EmuRunConfig,
    /// Server cores.
    pub(crate) n: usize,
    /// The server cores' CPUs and the device's, when pinned.
    pub(crate) cpus: Option<(Vec<usize>, usize)>,
    device: EmuDevice<LoadWire<C>>,
    ports: Vec<ServerPort>,
    ready: Arc<[AtomicBool]>,
    stop: Arc<AtomicBool>,
    limit: Duration,
    /// The run's CPUs' time when it started (pinned runs).
    cpu_start: Option<CpuSnapshot>,
    /// The speed canary on the run's CPUs before it started (pinned runs).
    canary: Option<Speed>,
}

impl<'a, C: ReplyCheck> Run<'a, C> {
    /// Checks `cfg`, prepares the request frames and the arrival times, and starts the device
    /// (the clients inject nothing until every core's datapath is up).
    pub(crate) fn start(
        cfg: &'a EmuRunConfig,
        requests: &[Request],
        checker: C,
    ) -> Result<Run<'a, C>, String> {
        let n = cfg.cores;
        if n == 0 {
            return Err("a run needs at least one server core (EmuRunConfig::cores)".to_owned());
        }
        // Every core's port must exist before anything starts.
        core_port(SERVER.port(), n - 1)?;
        let cpus = if cfg.pin {
            Some(cores_for(n).map_err(|e| e.to_string())?)
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
            n,
        )?;
        // Poisson arrivals of whole requests (a split request's parts go out together), at the
        // rate that offers `cfg.rate_rps` wire requests.
        let group_rate = cfg.rate_rps * frames.groups() as f64 / frames.len() as f64;
        let schedule = Schedule::poisson(&ScheduleConfig {
            rate_rps: group_rate,
            bound: Bound::Duration(cfg.warmup + cfg.duration),
            threads: 1,
            seed: cfg.seed,
        })
        .map_err(|e| format!("schedule at {} req/s: {e}", cfg.rate_rps))?;
        let offsets = frames.expand_offsets(schedule.threads()[0].offsets_ns());
        if offsets.len() as u64 > u64::from(u32::MAX) {
            return Err("more than 2^32 requests in one run".to_owned());
        }
        // The speed canary on every CPU of the run, before any of its threads starts there.
        let canary = match &cpus {
            Some((servers, device)) => {
                let mut all = servers.clone();
                all.push(*device);
                // The pair: the first server's CPU and the device's, which share its rings and
                // buffers (every request moves cache lines between them).
                let pair = servers
                    .first()
                    .filter(|&s| s != device)
                    .map(|&s| [s, *device]);
                Some(Canary::process().check_with_pair(&all, pair)?)
            }
            None => None,
        };
        let ready: Arc<[AtomicBool]> = (0..n).map(|_| AtomicBool::new(false)).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let ends = Ends {
            client_mac: CLIENT_MAC,
            client_port: CLIENT.port(),
            base_port: SERVER.port(),
        };
        let wire = LoadWire::new(frames, offsets, ends, cfg, checker, ready.clone());
        let mut emu = cfg.emu.clone();
        emu.loopback = false;
        let flows = (0..n)
            .map(|i| core_flow_rules(SERVER_MAC, SERVER.port(), i))
            .collect::<Result<Vec<_>, _>>()?;
        let device = EmuDevice::spawn_queues(
            emu,
            flows,
            DeviceOptions {
                delay_per_segment: cfg.delay_per_segment,
                core: cpus.as_ref().map(|c| c.1),
                yield_when_idle: !cfg.pin,
            },
            wire,
        )
        .map_err(|e| format!("starting the emulated device: {e}"))?;
        let ports: Vec<ServerPort> = device
            .ports()
            .into_iter()
            .enumerate()
            .map(|(core, port)| ServerPort {
                port,
                core,
                stop: stop.clone(),
                ready: ready.clone(),
                mtu: cfg.mtu,
                max_send_sge: cfg.max_send_sge,
            })
            .collect();
        // Long enough for the schedule, the loss timeout and a slow start, and then some.
        let limit = cfg.warmup + cfg.duration + cfg.timeout + Duration::from_secs(30);
        let cpu_start = cpus.as_ref().and_then(|(servers, device)| {
            let mut all = servers.clone();
            all.push(*device);
            CpuSnapshot::take(&all)
        });
        Ok(Run {
            cpu_start,
            canary,
            cfg,
            n,
            cpus,
            device,
            ports,
            ready,
            stop,
            limit,
        })
    }

    /// The server cores' ports, in core order (once).
    pub(crate) fn take_ports(&mut self) -> Vec<ServerPort> {
        std::mem::take(&mut self.ports)
    }

    /// Tells every server core the run is over.
    pub(crate) fn stop_servers(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// What a panicked server core's result says.
    pub(crate) fn panicked(&self, core: usize) -> String {
        panicked(self.n, core)
    }

    /// Waits until the clients have sent everything and every reply has come or timed out.
    /// Returns why the run ended otherwise: a server core returned early (`returned` names
    /// one that has), the device thread ended, or the run overran its time limit.
    pub(crate) fn watch(&self, mut returned: impl FnMut() -> Option<usize>) -> Option<String> {
        let started = Instant::now();
        while !self.device.wire_finished() {
            if let Some(i) = returned() {
                return Some(if self.n == 1 {
                    "the server returned before the run ended".to_owned()
                } else {
                    format!("the server of core {i} returned before the run ended")
                });
            }
            if !self.device.is_running() {
                return Some("the device thread ended early".to_owned());
            }
            if started.elapsed() > self.limit {
                return Some(format!("the run did not finish within {:?}", self.limit));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// The run's outcome from every core's result (after [`stop_servers`](Self::stop_servers))
    /// and what [`watch`](Self::watch) returned: the first core's error, a core that never
    /// built its datapath, or `why`; else the results in core order.
    pub(crate) fn outcome<R>(
        &self,
        outs: Vec<Result<R, String>>,
        why: Option<String>,
    ) -> Result<Vec<R>, String> {
        let outs = outs.into_iter().collect::<Result<Vec<R>, String>>()?;
        if let Some(i) = self.ready.iter().position(|r| !r.load(Ordering::Acquire)) {
            return Err(if self.n == 1 {
                "the server never built its datapath (ServerPort::datapath)".to_owned()
            } else {
                format!("the server of core {i} never built its datapath (ServerPort::datapath)")
            });
        }
        match why {
            Some(w) => Err(w),
            None => Ok(outs),
        }
    }

    /// Stops the device and, when the servers' outcome is good, reports the run.
    pub(crate) fn finish<R>(
        self,
        server_out: Result<Vec<R>, String>,
    ) -> Result<(EmuReport, Vec<R>), String> {
        let (cfg, n) = (self.cfg, self.n);
        let interference = self.cpu_start.as_ref().and_then(CpuSnapshot::since);
        let (wire, dev) = self
            .device
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
        let rps = |verified: u64| {
            if window_ns == 0 {
                0.0
            } else {
                verified as f64 * 1e9 / window_ns as f64
            }
        };
        let device_busy = match (wire.window_start, wire.window_end) {
            (Some(a), Some(b)) if b.now_ns > a.now_ns => {
                (b.busy_ns - a.busy_ns) as f64 / (b.now_ns - a.now_ns) as f64
            }
            _ => 0.0,
        };
        let (mean_request_frame, mean_reply_frame) = wire.mean_frames();
        let coverage = wire.coverage();
        let per_core: Vec<CoreReport> = (0..n)
            .map(|i| CoreReport {
                counters: wire.per_core[i],
                achieved_rps: rps(wire.measured_verified[i]),
                device: dev.per_queue.get(i).copied().unwrap_or_default(),
            })
            .collect();
        let report = EmuReport {
            run: RunReport {
                offered_rps: cfg.rate_rps,
                achieved_rps: rps(wire.measured_verified.iter().sum()),
                measured_window: Duration::from_nanos(window_ns),
                measured_requests,
                counters: wire.counters(),
                latency: wire.latency.clone(),
                threads: 1,
            },
            cores: n,
            per_core,
            device_busy,
            device: dev.stats,
            sampled: wire.sampled,
            unchecked: wire.unchecked,
            check_every: cfg.check_every.max(1),
            hash_matched: wire.hash_matched,
            distinct_verified: coverage.distinct_checked,
            distinct_answered: coverage.distinct_answered,
            distinct: wire.distinct(),
            cores_verified: coverage.cores_checked,
            interference,
            canary: self.canary.clone(),
            desc_ns: u64::try_from(cfg.delay_per_segment.as_nanos()).unwrap_or(u64::MAX),
            not_delivered: wire.not_delivered,
            max_inject_lag_ns: wire.max_inject_lag_ns,
            failures: wire.failures.clone(),
            mean_request_frame,
            mean_reply_frame,
            frames_per_request: 1.0,
        };
        Ok((report, server_out))
    }
}
