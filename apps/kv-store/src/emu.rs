//! `kv bench --datapath emu`: the KV server on the ConnectX driver, the emulated ConnectX on
//! another core playing the wire and the open-loop clients (crates/emu-bench). This measures
//! the server core's work per request, as the paper's setup does with a real NIC.
//!
//! The server cores are resident ([`emu_bench::resident`], [`KvEmu::with_cores`]): each core's
//! thread creates its pinned memory and loads its shard of the store (with one core the whole
//! store) once, before the first trial. Each point is one [`emu_bench::Resident::run`]: every
//! core opens a datapath on its own queue set of that run's device and serves a
//! [`Store::snapshot`] of its loaded store, so every trial starts from the loaded contents
//! (the buffers are shared, not copied; a trial's writes go to its snapshot and are dropped
//! with it). Every reply is read whole by the device and its headers, length, type, id and
//! answering core checked. The checker tracks the value each key holds in the trial's store:
//! every write's reply is decoded and its write applied in the order the owning core answered
//! (late ones too), and a read is right only against the current value ([`Current`]); a read
//! whose bytes equal the last verified reply to the same request, with none of its keys
//! written since, is accepted by hash, the rest (and a random 1 in `--sample-every`) decoded.
//! Each serialization's saturation load is found by the emulated-NIC bench skeleton
//! ([`emu_bench::EmuBench`]: [`emu_bench::search_rerunning_slowed`] over [`loadgen::search`],
//! median of `--trials` per load, grid then bisection, serializations interleaved trial by
//! trial, a trial whose speed canary read the machine's slow state rerun up to
//! `--slowed-retries` times), reported with [`emu_bench::EmuSummary`].
//!
//! **Several cores** ([`CorePlan`], `docs/cores.md`): each request goes to the core that
//! owns its key ([`crate::steer::core_of`], by destination port, [`Request::core`]). A
//! `getm`/`putm` whose keys span cores is split as the socket client splits it
//! ([`crate::steer::split`]): its parts are separate requests of the emulated wire (each
//! matched to its reply by its own message id, sent to its core, scheduled one after the
//! other), each part's reply is verified against the part's own request, and the first time
//! every part of a request has a verified reply the parts are merged
//! ([`crate::steer::merge`]) and the merged reply verified against the whole request.
//! **Throughput is counted in whole requests**, as the socket bench counts a split request
//! once: the device is offered `load × parts per request` frames per second and every rate
//! of the report is divided back by that factor ([`CorePlan::parts_per_request`]); the
//! request counters (sent, verified, lost) and each core's server counters count parts, as
//! the socket bench's per-core server counters do. Latency is per part.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cornflakes::datapath::DatapathMemory as _;
use cornflakes::PinnedMemory;
use emu_bench::{About, EmuBench, EmuReport, EmuRunConfig, EmuTrial, ReplyCheck, Request};
use kv_workloads::WorkloadConfig;
use loadgen::search::SearchConfig;

use crate::cf;
use crate::client::{decode_reply, Current, Expected, RunRequests};
use crate::config::{prepare, BenchConfig, BenchOutcome, EMU_LABEL};
use crate::load::load_store;
use crate::ops::{Op, OpKind, Reply};
use crate::report::write_outputs;
use crate::resp;
use crate::serialization::Serialization;
use crate::server::{Kv, ServerConfig, ServerStats};
use crate::steer::{self, Part};
use crate::store::StoreStats;
use crate::store::{Store, StoreConfig};

/// One request of the emulated wire: a whole request, or one part of a split one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    /// The run's request (index into the ops).
    op: usize,
    /// Its part (index into the op's parts), `None` when it is sent whole.
    part: Option<usize>,
    /// The core that owns its keys.
    core: usize,
}

/// A run's requests as the emulated wire sends them to `cores` server cores: each request to
/// the core that owns its key, a `getm`/`putm` whose keys span cores split into one part per
/// core ([`steer::split`]), the parts in place of the request (consecutive, in core order).
/// With one core it is the run's requests as they are.
#[derive(Debug)]
pub struct CorePlan {
    cores: usize,
    reqs: Arc<RunRequests>,
    /// Per request, its parts when it is split (empty otherwise: most requests).
    parts: Vec<Vec<Part>>,
    slots: Vec<Slot>,
    /// Per wire request, the ids of the keys it names (ids index the in-order checker's
    /// per-key write counts).
    key_ids: Vec<Vec<u32>>,
    /// Distinct keys named by the run.
    keys: usize,
}

impl CorePlan {
    /// The plan of `reqs` over `cores` server cores.
    pub fn new(reqs: Arc<RunRequests>, cores: usize) -> CorePlan {
        let cores = cores.max(1);
        let mut parts = Vec::with_capacity(reqs.ops.len());
        let mut slots = Vec::with_capacity(reqs.ops.len());
        for (i, op) in reqs.ops.iter().enumerate() {
            match steer::owner(op, cores) {
                Some(core) => {
                    slots.push(Slot {
                        op: i,
                        part: None,
                        core,
                    });
                    parts.push(Vec::new());
                }
                None => {
                    let p = steer::split(op, cores);
                    slots.extend(p.iter().enumerate().map(|(j, part)| Slot {
                        op: i,
                        part: Some(j),
                        core: part.core,
                    }));
                    parts.push(p);
                }
            }
        }
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let key_ids = slots
            .iter()
            .map(|s| {
                let op = match s.part {
                    Some(j) => &parts[s.op][j].op,
                    None => &reqs.ops[s.op],
                };
                op.keys()
                    .into_iter()
                    .map(|k| {
                        let n = ids.len() as u32;
                        *ids.entry(k).or_insert(n)
                    })
                    .collect()
            })
            .collect();
        let keys = ids.len();
        CorePlan {
            cores,
            reqs,
            parts,
            slots,
            key_ids,
            keys,
        }
    }

    /// Server cores.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// The run's requests.
    pub fn ops(&self) -> &[Op] {
        &self.reqs.ops
    }

    /// Requests of the emulated wire (whole requests and parts).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Wire requests per run request (1 with one core; above 1 when requests are split): the
    /// factor between the frames the device sends and the requests the bench counts.
    pub fn parts_per_request(&self) -> f64 {
        if self.reqs.ops.is_empty() {
            1.0
        } else {
            self.slots.len() as f64 / self.reqs.ops.len() as f64
        }
    }

    /// The run's requests that are split (their keys span cores).
    pub fn split_requests(&self) -> usize {
        self.parts.iter().filter(|p| !p.is_empty()).count()
    }

    /// Wire request `k`: the run request it belongs to, the core it goes to, and the request
    /// it carries (the whole request or its part).
    pub fn request(&self, k: usize) -> (usize, usize, &Op) {
        let s = self.slots[k];
        (s.op, s.core, self.op_of(s))
    }

    fn op_of(&self, s: Slot) -> &Op {
        match s.part {
            Some(j) => &self.parts[s.op][j].op,
            None => &self.reqs.ops[s.op],
        }
    }

    /// The wire requests in `ser`, each for its core.
    pub fn encode(&self, ser: Serialization) -> Vec<Request> {
        let arena = cornflakes::Arena::new();
        self.slots
            .iter()
            .map(|&s| {
                let op = self.op_of(s);
                let mut payload = Vec::new();
                if ser.is_cornflakes() {
                    cf::encode_request(op, 0, &arena, &mut payload);
                } else if let Some(lib) = ser.library() {
                    crate::libs::encode_request(lib, op, 0, &mut payload);
                } else {
                    resp::encode_request(op, &mut payload);
                }
                Request {
                    msg_type: OpKind::of(op).msg_type(),
                    payload,
                    core: s.core,
                    // A split request's parts go out together; its latency is its slowest
                    // part's.
                    with_previous: s.part.is_some_and(|j| j > 0),
                }
            })
            .collect()
    }

    /// The device thread's checker of replies in `ser` against `expected`: each reply against
    /// its own (part) request; a split request's parts merged and checked whole once all have
    /// a verified reply, counted in `merged`.
    pub fn checker(
        self: &Arc<Self>,
        ser: Serialization,
        expected: Arc<Expected>,
        merged: Arc<AtomicU64>,
    ) -> impl ReplyCheck {
        PartChecker {
            plan: self.clone(),
            expected,
            ser,
            pending: HashMap::new(),
            done: vec![false; self.reqs.ops.len()],
            merged,
            now: Current::default(),
            writes: vec![0; self.keys],
        }
    }
}

/// See [`CorePlan::checker`].
struct PartChecker {
    plan: Arc<CorePlan>,
    expected: Arc<Expected>,
    ser: Serialization,
    /// Split requests with some parts verified: each part's last verified reply.
    pending: HashMap<usize, Vec<Option<Reply>>>,
    /// Split requests whose merged reply was verified.
    done: Vec<bool>,
    merged: Arc<AtomicU64>,
    /// The store as this trial's server holds it: the snapshot's contents after every write
    /// the device saw answered, in the order the owning core answered them (each key has one
    /// owner, whose replies leave in the order it handled the requests).
    now: Current,
    /// Changes to what `now` knows per key id ([`CorePlan::key_ids`]): writes applied, writes
    /// with no reply, reads that may have settled them.
    writes: Vec<u64>,
}

impl PartChecker {
    /// Applies wire request `k`'s write (if it is one) to the tracked store.
    fn apply(&mut self, k: usize) {
        let plan = &self.plan;
        let op = plan.op_of(plan.slots[k]);
        if op.is_write() {
            self.expected.apply_to(&mut self.now, op);
            self.bump(k);
        }
    }

    /// Wire request `k`'s keys changed (or what is known of them did): replies accepted by
    /// hash before are checked again.
    fn bump(&mut self, k: usize) {
        for &id in &self.plan.key_ids[k] {
            self.writes[id as usize] += 1;
        }
    }
}

impl ReplyCheck for PartChecker {
    /// A read's right reply depends on how often each of its keys was written.
    fn version(&mut self, k: usize) -> u64 {
        self.plan.key_ids[k].iter().fold(0u64, |h, &id| {
            h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(self.writes[id as usize])
        })
    }

    /// Every write's reply is applied, in order.
    fn sees_every(&self, k: usize) -> bool {
        self.plan.op_of(self.plan.slots[k]).is_write()
    }

    /// A write answered too late to count still changed the store.
    fn late(&mut self, k: usize, _reply: &[u8]) {
        self.apply(k);
    }

    /// A write with no reply may or may not have changed the store.
    fn unanswered(&mut self, k: usize) {
        let plan = &self.plan;
        self.expected
            .unanswered(&mut self.now, plan.op_of(plan.slots[k]));
        self.bump(k);
    }

    fn check(&mut self, k: usize, reply: &[u8]) -> Result<(), String> {
        let plan = self.plan.clone();
        let s = plan.slots[k];
        let op = plan.op_of(s);
        let decoded = decode_reply(self.ser, OpKind::of(op), reply);
        // A read may settle keys a write with no reply left uncertain.
        if self.now.uncertain() > 0 {
            self.bump(k);
        }
        // The value each key holds now, before this request's own write.
        let right = decoded
            .as_ref()
            .is_ok_and(|(_, r)| self.expected.check_now(&mut self.now, op, r));
        self.apply(k);
        let (_, r) =
            decoded.map_err(|e| format!("request {} ({}): {e}", s.op, OpKind::of(op).name()))?;
        if !right {
            return Err(match s.part {
                Some(j) => format!(
                    "request {} ({}), part {j} (core {}): wrong reply {r}",
                    s.op,
                    OpKind::of(op).name(),
                    s.core
                ),
                None => format!(
                    "request {} ({}): wrong reply {r}",
                    s.op,
                    OpKind::of(op).name()
                ),
            });
        }
        let Some(j) = s.part else { return Ok(()) };
        if self.done[s.op] {
            return Ok(());
        }
        let parts = &plan.parts[s.op];
        let got = self
            .pending
            .entry(s.op)
            .or_insert_with(|| vec![None; parts.len()]);
        got[j] = Some(r);
        if got.iter().any(Option::is_none) {
            return Ok(());
        }
        let replies = self
            .pending
            .remove(&s.op)
            .expect("present")
            .into_iter()
            .flatten()
            .collect();
        let whole = &plan.reqs.ops[s.op];
        let merged = steer::merge(whole, parts, replies)
            .map_err(|e| format!("request {} split over cores: {e}", s.op))?;
        if !self.expected.check(whole, &merged) {
            return Err(format!(
                "request {} ({}) split over cores {:?}: wrong merged reply {merged}",
                s.op,
                OpKind::of(whole).name(),
                parts.iter().map(|p| p.core).collect::<Vec<_>>()
            ));
        }
        self.done[s.op] = true;
        self.merged.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// An emulated-NIC run's fixed parts, built once for all its points: the plan over the
/// cores, what the store must hold, each serialization's wire requests and the MTU.
pub struct KvEmu {
    plan: Arc<CorePlan>,
    expected: Arc<Expected>,
    workload: WorkloadConfig,
    encoded: Vec<(Serialization, Vec<Request>)>,
    mtu: usize,
}

/// One point of an emulated-NIC run.
#[derive(Debug)]
pub struct KvPoint {
    /// The device's report. Its rates (offered, achieved, per core) are in **whole requests**
    /// per second (wire requests ÷ [`CorePlan::parts_per_request`]); its counters count wire
    /// requests (parts).
    pub report: EmuReport,
    /// Each core's server counters, in core order (parts: what each core received).
    pub per_core: Vec<ServerStats>,
    /// Split requests whose parts' replies were merged and the merged reply verified.
    pub merged: u64,
}

impl KvEmu {
    /// The run of `reqs` (whose replies must match `expected`) for `cfg` (its serializations,
    /// `cores`, workload, MTU).
    pub fn new(
        cfg: &BenchConfig,
        reqs: Arc<RunRequests>,
        expected: Arc<Expected>,
    ) -> Result<KvEmu, String> {
        let plan = Arc::new(CorePlan::new(reqs, cfg.cores));
        let encoded: Vec<(Serialization, Vec<Request>)> = cfg
            .serializations
            .iter()
            .map(|&s| (s, plan.encode(s)))
            .collect();
        // The emulated wire carries single-frame requests and replies: raise the MTU (on both
        // ends) when a request or a reply (e.g. a Twitter value of 30 KB) does not fit one
        // frame of `--mtu`. Replies of several values (getm, getlist) are bounded by the
        // request's values for writes and, for reads, by the workload's frame budget.
        let largest_req = encoded
            .iter()
            .flat_map(|(_, r)| r)
            .map(|r| r.payload.len())
            .max()
            .unwrap_or(0);
        let largest = largest_req.max(expected.max_value_len() + 256);
        let mtu = if largest + 128 > cfg.load.mtu {
            let m = (largest + 128).next_multiple_of(1024).min(65_000);
            eprintln!(
                "[bench] emu: MTU raised from {} to {m} so that the largest request or value ({largest} B) is one frame (the emulated wire carries single-frame messages)",
                cfg.load.mtu
            );
            m
        } else {
            cfg.load.mtu
        };
        Ok(KvEmu {
            plan,
            expected,
            workload: cfg.workload.clone(),
            encoded,
            mtu,
        })
    }

    /// The requests over the cores.
    pub fn plan(&self) -> &CorePlan {
        &self.plan
    }

    /// The IP MTU of the runs.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Starts `cfg.cores` resident server cores ([`emu_bench::resident`]), each pinned to its
    /// own CPU when `pin` (`false`: threads share CPUs, **functional only**), creates each
    /// core's pinned memory and loads its shard of the store (every key with one core) on
    /// its own thread, once, then calls `body` with them. Every trial on the cores
    /// ([`KvCores::run_point`]) serves from a [`Store::snapshot`] of the loaded store, so it
    /// starts from the loaded contents whatever earlier trials wrote, without loading again.
    pub fn with_cores<T>(
        &self,
        cfg: &BenchConfig,
        pin: bool,
        body: impl FnOnce(&KvCores<'_, '_>) -> Result<T, String>,
    ) -> Result<T, String> {
        let cores = self.plan.cores();
        let (max_item, limit, wl, mtu) = (cfg.max_item, cfg.memory_limit, &self.workload, self.mtu);
        let store_cfg = StoreConfig {
            memory_limit: cfg.memory_limit,
            ..StoreConfig::default()
        };
        let described = std::sync::Mutex::new(vec![String::new(); cores]);
        let init = |core: usize| -> Result<LoadedCore, String> {
            let mut mc = emu_bench::memory_config(mtu);
            mc.max_item_size = mc.max_item_size.max(max_item.next_power_of_two());
            mc.max_bytes = limit.saturating_add(256 << 20);
            let mem = PinnedMemory::new(mc).map_err(|e| format!("memory: {e}"))?;
            let mut store = Store::new(&mem, store_cfg);
            // This core's shard only (every key with one core).
            store.set_shard(core, cores);
            let loaded = load_store(wl, &mut store)?;
            described.lock().unwrap_or_else(|e| e.into_inner())[core] = loaded;
            Ok(LoadedCore { mem, store })
        };
        emu_bench::resident(cores, pin, init, |resident| {
            let loaded = std::mem::take(&mut *described.lock().unwrap_or_else(|e| e.into_inner()));
            body(&KvCores {
                emu: self,
                resident,
                pin,
                loaded,
            })
        })
    }

    /// One run of serialization `ser` at `load` on cores started for it alone: the store is
    /// loaded for this one run ([`with_cores`](Self::with_cores) and
    /// [`KvCores::run_point`] load once for many).
    pub fn run_point(
        &self,
        cfg: &BenchConfig,
        ser: Serialization,
        load: f64,
        seed: u64,
        pin: bool,
    ) -> Result<KvPoint, String> {
        self.with_cores(cfg, pin, |c| c.run_point(cfg, ser, load, seed))
    }
}

/// A resident server core's state: its pinned memory and its loaded shard, which every trial
/// serves a snapshot of.
pub struct LoadedCore {
    mem: PinnedMemory,
    store: Store,
}

/// The server cores of an emulated-NIC run with their stores loaded ([`KvEmu::with_cores`]).
pub struct KvCores<'r, 'env> {
    emu: &'r KvEmu,
    resident: &'r emu_bench::Resident<'env, LoadedCore, Result<ServerStats, String>>,
    pin: bool,
    loaded: Vec<String>,
}

impl KvCores<'_, '_> {
    /// Each core's loading, described (keys, bytes, time), in core order.
    pub fn loaded(&self) -> &[String] {
        &self.loaded
    }

    /// One run of serialization `ser` (one of `cfg.serializations`) at `load` whole requests
    /// per second: on each core a KV server with its own datapath on its own queue set,
    /// serving a snapshot of the core's loaded store, and its own counters.
    pub fn run_point(
        &self,
        cfg: &BenchConfig,
        ser: Serialization,
        load: f64,
        seed: u64,
    ) -> Result<KvPoint, String> {
        self.run_point_serving(cfg, ser, load, seed, |kv, _| kv)
    }

    /// [`Self::run_point`] with each core's handler made by `serve` from the KV handler over
    /// this trial's snapshot and a maker of more KV handlers, each over a snapshot of the
    /// loaded store no write of the trial reaches. The controls of the checker use it: a
    /// server that answers a read from such a store (a value the key held before) must be
    /// caught.
    pub fn run_point_serving<H, F>(
        &self,
        cfg: &BenchConfig,
        ser: Serialization,
        load: f64,
        seed: u64,
        serve: F,
    ) -> Result<KvPoint, String>
    where
        H: app_server::Handler<Counters = StoreStats>,
        F: Fn(Kv, &mut dyn FnMut() -> Kv) -> H + Send + Sync + 'static,
    {
        let emu = self.emu;
        let requests = emu
            .encoded
            .iter()
            .find(|(s, _)| *s == ser)
            .map(|(_, r)| r)
            .ok_or_else(|| format!("{ser} is not one of the run's serializations"))?;
        let per = emu.plan.parts_per_request();
        let mut ecfg = EmuRunConfig {
            // A write changes what later reads of its key return (e.g. an append).
            replies_vary: true,
            cores: emu.plan.cores(),
            pin: self.pin,
            mtu: emu.mtu,
            ..cfg.device.run_config(
                load * per,
                seed,
                (cfg.load.duration, cfg.load.warmup, cfg.load.timeout),
            )
        };
        ecfg.emu.mtu = ecfg.emu.mtu.max(emu.mtu);
        let merged = Arc::new(AtomicU64::new(0));
        let check = emu.plan.checker(ser, emu.expected.clone(), merged.clone());
        let server_cfg = ServerConfig {
            serialization: ser,
            threshold: cfg.threshold,
            store: StoreConfig {
                memory_limit: cfg.memory_limit,
                ..StoreConfig::default()
            },
        };
        let pin = self.pin;
        let (mut report, served) =
            self.resident
                .run(&ecfg, requests, check, move |st: &mut LoadedCore, port| {
                    let core = port.core();
                    let dp = port
                        .datapath(st.mem.clone())
                        .map_err(|e| format!("server core {core}: emulated ConnectX: {e}"))?;
                    let kv = Kv::with_store(dp.memory(), server_cfg, st.store.snapshot());
                    let (mem, store) = (dp.memory().clone(), &st.store);
                    let mut loaded = || Kv::with_store(&mem, server_cfg, store.snapshot());
                    let mut server = app_server::Server::new(dp, serve(kv, &mut loaded));
                    while !port.stopped() {
                        if server.poll() == 0 && !pin {
                            // Sharing CPUs with the other cores and the device: yield when idle
                            // (and count the yield as idle time, not the next burst's).
                            std::thread::yield_now();
                            server.waited();
                        }
                    }
                    // The server (its datapath, and the snapshot with this trial's writes)
                    // drops here; the loaded store stays for the next trial.
                    Ok(server.stats())
                })?;
        let per_core = served.into_iter().collect::<Result<Vec<_>, String>>()?;
        // Rates in whole requests, as the socket bench counts a split request once.
        if per != 1.0 {
            report.run.offered_rps /= per;
            report.run.achieved_rps /= per;
            report.frames_per_request = per;
            for c in &mut report.per_core {
                c.achieved_rps /= per;
            }
        }
        Ok(KvPoint {
            report,
            per_core,
            merged: merged.load(Ordering::Relaxed),
        })
    }
}

/// `kv bench --datapath emu`: every serialization's saturation search over `loads`
/// ([`emu_bench::EmuBench`]): this supplies the store loaded once per core, each
/// serialization's requests, its in-order checker and its server per core.
pub(crate) fn run_emu(cfg: &BenchConfig, loads: &[f64]) -> Result<BenchOutcome, String> {
    // Before generating anything: the CPUs the run needs.
    let bench = EmuBench::new(cfg.cores, &cfg.device, SearchConfig::new(loads.to_vec()))?;
    let p = prepare(cfg)?;
    let name = p.workload.name();
    let emu = KvEmu::new(cfg, p.reqs.clone(), p.expected.clone())?;
    let plan = emu.plan();
    if plan.split_requests() > 0 {
        eprintln!(
            "[bench] emu: {} of {} requests span cores and are split ({:.3} wire requests per request); rates count whole requests, counters count parts",
            plan.split_requests(),
            plan.ops().len(),
            plan.parts_per_request()
        );
    }
    let about = About {
        lane: ("serialization", "serializations"),
        what: format!("workload {name}"),
        per_trial: (cfg.load.duration, cfg.load.warmup),
        mtu: emu.mtu(),
        per_core: if cfg.cores > 1 {
            ", each with its shard of the keys"
        } else {
            ""
        },
    };
    let names: Vec<&str> = cfg.serializations.iter().map(|s| s.name()).collect();
    let mut runs = 0u64;
    let run = emu.with_cores(cfg, true, |cores| {
        eprintln!(
            "[bench] emu: {} (once; every trial serves a snapshot of it)",
            cores.loaded().join("; ")
        );
        bench.run(&about, &names, |pt| {
            runs += 1;
            let ser = cfg.serializations[pt.lane];
            let point = cores.run_point(cfg, ser, pt.offered_rps, cfg.seed + runs)?;
            let stats = ServerStats::sum(&point.per_core);
            let (work, split) = (stats.work_p50_ns(), stats.time);
            Ok(EmuTrial::new(pt, ser.name(), &name, point.report, work, stats).with_split(split))
        })
    })?;
    let mut out = BenchOutcome {
        workload: name,
        stats: Some(p.stats),
        requests_per_unit: p.per_unit,
        datapath: EMU_LABEL.to_owned(),
        ..BenchOutcome::default()
    };
    for (&ser, st) in cfg.serializations.iter().zip(&run.servers) {
        if let Some(st) = st {
            eprintln!("[bench] {ser} server (median trial of its best load): {st}");
            out.servers.push((ser, st.clone()));
        }
    }
    // Each serialization's bound (of the last repeat), with its best load's spread.
    out.bounds = cfg
        .serializations
        .iter()
        .zip(run.last_summaries())
        .map(|(ser, summary)| {
            let best = summary.best.as_ref().map_or(String::new(), |b| {
                format!(
                    "; best load's {} trials {:.0}–{:.0} req/s, device busy {:.0}%",
                    b.trials,
                    b.min_rps,
                    b.max_rps,
                    b.device_busy * 100.0
                )
            });
            (
                ser.name().to_owned(),
                format!("emulated NIC: {}{best}", summary.bound_note()),
            )
        })
        .collect();
    out.records = run.records;
    out.emu = Some(run.outcome);
    write_outputs(cfg, &out)?;
    // Any wrong reply in any trial fails the bench (after its outputs are written).
    emu_bench::replies_verified(&out.emu.as_ref().map(|e| e.summaries()).unwrap_or_default())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialization::Shared;

    fn ops() -> Vec<Op> {
        let keys: Vec<String> = (0..8).map(|i| format!("key-{i}")).collect();
        vec![
            Op::Get {
                key: keys[0].clone(),
            },
            Op::GetM { keys: keys.clone() },
            Op::PutM {
                keys: keys[..4].to_vec(),
                vals: (0..4).map(|i| vec![i as u8; 8]).collect(),
            },
            Op::Append {
                key: keys[1].clone(),
                val: b"more".to_vec(),
            },
        ]
    }

    fn plan(cores: usize) -> CorePlan {
        CorePlan::new(
            Arc::new(RunRequests {
                ops: ops(),
                threads: 1,
            }),
            cores,
        )
    }

    #[test]
    fn one_core_sends_the_requests_as_they_are() {
        let p = plan(1);
        assert_eq!((p.len(), p.split_requests()), (4, 0));
        assert_eq!(p.parts_per_request(), 1.0);
        for (k, op) in ops().iter().enumerate() {
            assert_eq!(p.request(k), (k, 0, op));
        }
        let reqs = p.encode(Serialization::Shared(Shared::PROTOBUF));
        assert!(reqs.iter().all(|r| r.core == 0));
        assert_eq!(reqs[1].msg_type, OpKind::GetM.msg_type());
    }

    #[test]
    fn requests_spanning_cores_become_consecutive_parts_on_their_owners() {
        let p = plan(2);
        let o = ops();
        let (getm, putm) = (steer::split(&o[1], 2), steer::split(&o[2], 2));
        assert_eq!((getm.len(), putm.len()), (2, 2), "both span the 2 cores");
        assert_eq!(p.len(), 1 + 2 + 2 + 1);
        assert_eq!(p.split_requests(), 2);
        assert_eq!(p.parts_per_request(), 1.5);
        let expect: Vec<(usize, usize, &Op)> = vec![
            (0, steer::core_of("key-0", 2), &o[0]),
            (1, getm[0].core, &getm[0].op),
            (1, getm[1].core, &getm[1].op),
            (2, putm[0].core, &putm[0].op),
            (2, putm[1].core, &putm[1].op),
            (3, steer::core_of("key-1", 2), &o[3]),
        ];
        for (k, (i, core, op)) in expect.into_iter().enumerate() {
            let (gi, gcore, gop) = p.request(k);
            assert_eq!((gi, gcore, gop), (i, core, op), "wire request {k}");
            assert_eq!(steer::owner(gop, 2), Some(gcore));
        }
        let reqs = p.encode(Serialization::Shared(Shared::CORNFLAKES));
        assert_eq!(
            reqs.iter().map(|r| r.core).collect::<Vec<_>>(),
            (0..p.len()).map(|k| p.request(k).1).collect::<Vec<_>>()
        );
        // A split request's later parts go out with its first (one latency per request).
        assert_eq!(
            reqs.iter().map(|r| r.with_previous).collect::<Vec<_>>(),
            vec![false, false, true, false, true, false]
        );
    }
}
