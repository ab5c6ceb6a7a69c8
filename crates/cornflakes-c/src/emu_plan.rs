//! What the emulated device of `cf_dp_emu_new` runs: a plan a bench writes into the run's
//! directory (`plan.json`, with the bytes it names in `plan.bin`), and the report it leaves
//! there (`report.json`, then `done`). Format: docs/c-api.md, "The emulated ConnectX".
//!
//! The plan gives the requests (message type and payload, as the device injects them), how
//! each reply is checked — equal to the request (`echo`), equal to given bytes (`bytes`: a
//! canonical encoding such as RESP), or a Cornflakes object of a schema whose bytes field
//! holds given values (`object`, decoded with the schema-driven decoder of
//! `cornflakes_codegen::dynamic`, its status field, when it has one, OK) — and either one
//! run at a fixed load (`fixed`) or a saturation search (`search`, run by emu-bench's bench
//! skeleton [`emu_bench::EmuBench`] on the program's CPUs, its lines written to
//! `progress.log`, nothing printed). Checking is emu-bench's: every reply read whole and its
//! headers checked, payloads sampled with coverage, the speed canary and the interference of
//! other processes judged per trial.

use std::cell::RefCell;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cornflakes::Arena;
use cornflakes_codegen::dynamic::{DynMessage, Value};
use cornflakes_codegen::schema::MsgId;
use cornflakes_codegen::Schema;
use emu_bench::{
    About, EmuBench, EmuRepeat, EmuRunConfig, EmuSettings, EmuTrial, RepeatReport, ReplyCheck,
    Request, SearchReport, ThreadReading,
};
use loadgen::search::{Point, SearchConfig};
use serde_json::{json, Value as Json};

use crate::emu_handoff::{Handoff, Served, EMU_MTU};
use crate::emu_kv::{self, KvPlan, KvTrial};

/// How one reply is checked.
#[derive(Debug)]
enum Expect {
    /// The reply's payload equals the request's.
    Echo,
    /// The reply's payload equals these bytes.
    Bytes(Vec<u8>),
    /// A key-value request: checked against what its keys hold now ([`crate::emu_kv`]).
    Kv,
    /// The reply is message `msg` of the plan's schema; its bytes field `field` (a `bytes`
    /// field or a repeated one) holds exactly `values`; its field `status`, when the message
    /// has one, is 0.
    Object {
        msg: MsgId,
        field: usize,
        status: Option<usize>,
        values: Vec<Vec<u8>>,
    },
}

/// The requests and their checks.
struct Expectations {
    requests: Vec<Request>,
    expect: Vec<Expect>,
    schema: Option<Schema>,
    /// The key-value checks, when a request has one.
    kv: Option<Arc<KvPlan>>,
}

/// The reply checker of one trial of a plan (on the device thread).
struct Checker {
    exp: Arc<Expectations>,
    kv: Option<KvTrial>,
}

impl Checker {
    fn new(exp: &Arc<Expectations>) -> Checker {
        Checker {
            exp: exp.clone(),
            kv: exp.kv.as_ref().map(KvPlan::trial),
        }
    }

    /// The key-value checker, when it covers `request`.
    fn kv(&self, request: usize) -> Option<&KvTrial> {
        let covered = self.exp.kv.as_ref().is_some_and(|k| k.covers(request));
        self.kv.as_ref().filter(|_| covered)
    }

    fn kv_mut(&mut self, request: usize) -> Option<&mut KvTrial> {
        let covered = self.exp.kv.as_ref().is_some_and(|k| k.covers(request));
        self.kv.as_mut().filter(|_| covered)
    }
}

impl ReplyCheck for Checker {
    fn version(&mut self, request: usize) -> u64 {
        self.kv(request).map_or(0, |k| k.version(request))
    }

    fn sees_every(&self, request: usize) -> bool {
        self.kv(request).is_some_and(|k| k.sees_every(request))
    }

    fn late(&mut self, request: usize, _reply: &[u8]) {
        if let Some(k) = self.kv_mut(request) {
            k.late(request);
        }
    }

    fn unanswered(&mut self, request: usize) {
        if let Some(k) = self.kv_mut(request) {
            k.unanswered(request);
        }
    }

    fn check(&mut self, request: usize, reply: &[u8]) -> Result<(), String> {
        let e = &self.exp;
        match &e.expect[request] {
            // Parsing gave every `Kv` request its check, so `kv` is there.
            Expect::Kv => match self.kv.as_mut() {
                Some(k) => k.check(request, reply, e.schema.as_ref()),
                None => Err(format!("request {request}: no key-value check")),
            },
            Expect::Echo if reply == e.requests[request].payload => Ok(()),
            Expect::Echo => Err(format!("request {request}: the reply is not the echo")),
            Expect::Bytes(b) if reply == b.as_slice() => Ok(()),
            Expect::Bytes(b) => Err(format!(
                "request {request}: {} bytes, not the expected {} ({})",
                reply.len(),
                b.len(),
                first_difference(reply, b)
            )),
            Expect::Object {
                msg,
                field,
                status,
                values,
            } => {
                let schema = e.schema.as_ref().ok_or("no schema")?;
                let arena = Arena::new();
                let m = DynMessage::decode(schema, *msg, reply, &arena)
                    .map_err(|f| format!("request {request}: undecodable reply: {f}"))?;
                if let Some(Value::I32(s)) = status.and_then(|i| m.get(i)) {
                    if *s != 0 {
                        return Err(format!("request {request}: status {s}, not OK"));
                    }
                }
                let got: Vec<&[u8]> = match m.get(*field) {
                    None => Vec::new(),
                    Some(Value::Bytes(p) | Value::String(p)) => vec![p.as_bytes()],
                    Some(Value::Leaves(l)) => l.iter().map(|p| p.as_bytes()).collect(),
                    Some(_) => return Err(format!("request {request}: the field is not bytes")),
                };
                if got.len() != values.len() {
                    return Err(format!(
                        "request {request}: {} values, not {}",
                        got.len(),
                        values.len()
                    ));
                }
                for (i, (g, v)) in got.iter().zip(values).enumerate() {
                    if *g != v.as_slice() {
                        return Err(format!(
                            "request {request}: value {i} wrong ({})",
                            first_difference(g, v)
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("first difference at byte {i}"),
        None => "one is a prefix of the other".to_owned(),
    }
}

/// What a plan asks to run.
enum Job {
    /// One run at `rate_rps` for `requests / rate_rps` seconds, no warm-up.
    Fixed { rate_rps: f64, requests: u64 },
    /// The saturation search, `repeat` times.
    Search {
        cfg: SearchConfig,
        repeat: usize,
        retries: usize,
    },
}

/// A parsed plan.
struct Plan {
    mode: String,
    shape: String,
    exp: Arc<Expectations>,
    run: EmuRunConfig,
    job: Job,
}

/// The largest IP MTU a plan may ask for: a frame and its Ethernet header fit one 64 KiB item
/// of the datapath's pinned memory.
const MAX_MTU: usize = 65_000;

fn bad(why: impl Into<String>) -> String {
    format!("plan.json: {}", why.into())
}

/// `[offset, length]` of `blob`, as bytes.
fn bytes_of(v: &Json, blob: &[u8], what: &str) -> Result<Vec<u8>, String> {
    let pair = v
        .as_array()
        .filter(|a| a.len() == 2)
        .ok_or_else(|| bad(format!("{what} must be [offset, length] into plan.bin")))?;
    let (o, n) = (pair[0].as_u64(), pair[1].as_u64());
    let (Some(o), Some(n)) = (o, n) else {
        return Err(bad(format!("{what}: offset and length must be integers")));
    };
    let end = o.checked_add(n).filter(|&e| e <= blob.len() as u64);
    let end = end.ok_or_else(|| bad(format!("{what} leaves plan.bin")))?;
    Ok(blob[o as usize..end as usize].to_vec())
}

fn num(v: &Json, key: &str) -> Option<f64> {
    v.get(key).and_then(Json::as_f64)
}

fn parse(dir: &Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(dir.join("plan.json"))
        .map_err(|e| format!("reading plan.json: {e}"))?;
    let p: Json = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let blob = match dir.join("plan.bin") {
        b if b.exists() => std::fs::read(&b).map_err(|e| format!("reading plan.bin: {e}"))?,
        _ => Vec::new(),
    };
    let schema = match p.get("schema").and_then(Json::as_str) {
        Some(path) => {
            let path = PathBuf::from(path);
            let inc = path.parent().unwrap_or(Path::new(".")).to_path_buf();
            Some(Schema::load(&[&path], &[&inc]).map_err(|e| bad(format!("schema: {e}")))?)
        }
        None => None,
    };
    let reqs = p
        .get("requests")
        .and_then(Json::as_array)
        .filter(|r| !r.is_empty())
        .ok_or_else(|| bad("requests must be a non-empty list"))?;
    let mut requests = Vec::with_capacity(reqs.len());
    let mut expect = Vec::with_capacity(reqs.len());
    let mut kv_ops = Vec::with_capacity(reqs.len());
    let mut kv_ids = std::collections::HashMap::new();
    let blob_bytes = |v: &Json, what: &str| bytes_of(v, &blob, what);
    for (i, r) in reqs.iter().enumerate() {
        let ty = r
            .get("type")
            .and_then(Json::as_u64)
            .and_then(|t| u16::try_from(t).ok())
            .ok_or_else(|| bad(format!("request {i}: type must be a u16")))?;
        let payload = bytes_of(
            r.get("payload").unwrap_or(&Json::Null),
            &blob,
            &format!("request {i}'s payload"),
        )?;
        requests.push(Request::new(ty, payload));
        let e = r
            .get("expect")
            .ok_or_else(|| bad(format!("request {i}: no expect")))?;
        kv_ops.push(match e.get("kv") {
            Some(k) => Some(emu_kv::parse_op(
                k,
                i,
                schema.as_ref(),
                &blob_bytes,
                &mut kv_ids,
            )?),
            None => None,
        });
        expect.push(if e.get("kv").is_some() {
            Expect::Kv
        } else if e.get("echo").is_some() {
            Expect::Echo
        } else if let Some(b) = e.get("bytes") {
            Expect::Bytes(bytes_of(b, &blob, &format!("request {i}'s bytes"))?)
        } else if let Some(name) = e.get("object").and_then(Json::as_str) {
            let s = schema
                .as_ref()
                .ok_or_else(|| bad("an object check needs \"schema\""))?;
            let msg = s
                .message(name)
                .ok_or_else(|| bad(format!("no message {name} in the schema")))?;
            let def = &s.messages[msg];
            let fname = e.get("field").and_then(Json::as_str).unwrap_or("");
            let (field, _) = def
                .field_by_name(fname)
                .ok_or_else(|| bad(format!("{name} has no field {fname:?}")))?;
            let values = e
                .get("values")
                .and_then(Json::as_array)
                .ok_or_else(|| bad(format!("request {i}: values must be a list")))?
                .iter()
                .map(|v| bytes_of(v, &blob, &format!("request {i}'s value")))
                .collect::<Result<Vec<_>, _>>()?;
            Expect::Object {
                msg,
                field,
                status: def.field_by_name("status").map(|(i, _)| i),
                values,
            }
        } else {
            return Err(bad(format!(
                "request {i}: expect must have echo, bytes, object or kv"
            )));
        });
    }
    let kv = if kv_ops.iter().any(Option::is_some) {
        let initial = emu_kv::parse_initial(p.get("kv").unwrap_or(&Json::Null), &blob_bytes)?;
        Some(Arc::new(KvPlan::new(initial, kv_ops, kv_ids.len())))
    } else {
        None
    };
    let mut run = EmuRunConfig {
        mtu: EMU_MTU,
        ..EmuRunConfig::default()
    };
    if let Some(m) = p.get("mtu").and_then(Json::as_u64) {
        if !(576..=MAX_MTU as u64).contains(&m) {
            return Err(bad(format!("mtu must be 576 to {MAX_MTU}, not {m}")));
        }
        run.mtu = m as usize;
        run.emu.mtu = run.mtu;
    }
    // Writes change what a read returns, its length too.
    run.replies_vary = kv.is_some();
    if let Some(n) = p.get("check_every").and_then(Json::as_u64) {
        run.check_every = n.max(1);
    }
    if let Some(n) = p.get("sample_every").and_then(Json::as_u64) {
        run.sample_every = n.max(1);
    }
    if let Some(ms) = num(&p, "timeout_ms").filter(|ms| *ms > 0.0) {
        run.timeout = Duration::from_secs_f64(ms / 1e3);
    }
    if let Some(pin) = p.get("pin").and_then(Json::as_bool) {
        run.pin = pin;
    }
    let job = if let Some(f) = p.get("fixed") {
        let rate_rps = num(f, "rate_rps").filter(|r| *r > 0.0);
        let n = f.get("requests").and_then(Json::as_u64).filter(|n| *n > 0);
        let (Some(rate_rps), Some(requests)) = (rate_rps, n) else {
            return Err(bad("fixed needs rate_rps > 0 and requests > 0"));
        };
        run.warmup = Duration::ZERO;
        run.duration = Duration::from_secs_f64(requests as f64 / rate_rps);
        Job::Fixed { rate_rps, requests }
    } else if let Some(s) = p.get("search") {
        let rates: Vec<f64> = s
            .get("rates")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_f64).collect())
            .unwrap_or_default();
        if rates.is_empty() {
            return Err(bad("search needs rates"));
        }
        let mut cfg = SearchConfig::new(rates);
        if let Some(k) = s.get("trials").and_then(Json::as_u64) {
            cfg.trials = k.max(1) as usize;
        }
        if let Some(r) = num(s, "resolution") {
            cfg.resolution = r;
        }
        if let Some(ms) = num(s, "duration_ms") {
            run.duration = Duration::from_secs_f64(ms / 1e3);
        }
        if let Some(ms) = num(s, "warmup_ms") {
            run.warmup = Duration::from_secs_f64(ms / 1e3);
        }
        Job::Search {
            cfg,
            repeat: s.get("repeat").and_then(Json::as_u64).unwrap_or(1).max(1) as usize,
            retries: s
                .get("slowed_retries")
                .and_then(Json::as_u64)
                .map_or(emu_bench::DEFAULT_SLOWED_RETRIES, |r| r as usize),
        }
    } else {
        return Err(bad("the plan needs fixed or search"));
    };
    Ok(Plan {
        mode: p
            .get("mode")
            .and_then(Json::as_str)
            .unwrap_or("emu")
            .to_owned(),
        shape: p
            .get("shape")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned(),
        exp: Arc::new(Expectations {
            requests,
            expect,
            schema,
            kv,
        }),
        run,
        job,
    })
}

/// One trial of `plan` at `rate_rps` (arrivals seeded by `seed`), served by the program's
/// thread through `handoff`.
fn trial(
    plan: &Plan,
    handoff: &Handoff,
    point: Point,
    seed: u64,
) -> Result<(EmuTrial<u64>, Served), String> {
    let cfg = EmuRunConfig {
        rate_rps: point.offered_rps,
        seed,
        ..plan.run.clone()
    };
    let checker = Checker::new(&plan.exp);
    let (report, served) = emu_bench::run(&cfg, &plan.exp.requests, checker, |port| {
        handoff.serve(port)
    })?;
    let served = served?;
    let trial = EmuTrial::new(
        point,
        &plan.mode,
        &plan.shape,
        report,
        None,
        served.received,
    )
    .with_split(served.split);
    Ok((trial, served))
}

/// The server thread's scheduling in a trial: how long it served, and how much of that it
/// ran and waited for its CPU (another task held it).
fn thread_reading(point: &Point, s: &Served) -> ThreadReading {
    ThreadReading {
        offered_rps: point.offered_rps,
        trial: point.trial,
        span_ns: s.span_ns,
        on_cpu_ns: s.sched.map(|t| t.on_cpu_ns),
        waited_ns: s.sched.map(|t| t.waited_ns),
    }
}

/// Runs the plan in `dir` on the program's `cpus` (the first serves, the second is the
/// device's), its trials served through `handoff`; returns the report.
fn run_plan(dir: &Path, handoff: &Handoff, cpus: &[usize]) -> Result<Json, String> {
    let plan = parse(dir)?;
    // The first trial's arrivals are seeded 1 (a fixed run's) or 2 (a search's first), each
    // trial after it one more.
    let mut seed = 1u64;
    match &plan.job {
        Job::Fixed { rate_rps, requests } => {
            let point = Point {
                lane: 0,
                offered_rps: *rate_rps,
                trial: 0,
                phase: loadgen::search::Phase::Grid,
            };
            let (t, served) = trial(&plan, handoff, point, seed)?;
            let thread =
                serde_json::to_value(thread_reading(&point, &served)).map_err(|e| e.to_string())?;
            Ok(json!({
                "server_thread": thread,
                "mode": plan.mode,
                "planned_requests": requests,
                "served_received": t.server,
                "coverage_complete": t.report.coverage_complete(),
                "coverage": t.report.coverage_note(),
                "progress": t.progress(),
                "trial": t.to_json(),
            }))
        }
        Job::Search {
            cfg,
            repeat,
            retries,
        } => {
            let settings = EmuSettings {
                trials: cfg.trials,
                resolution: cfg.resolution,
                repeat: *repeat,
                slowed_retries: *retries,
                ..EmuSettings::default()
            };
            let bench = EmuBench::on_cpus(cpus, 1, &settings, cfg.clone())?;
            let about = About {
                lane: ("mode", "mode"),
                what: format!("shape {}", plan.shape),
                per_trial: (plan.run.duration, plan.run.warmup),
                mtu: plan.run.mtu,
                per_core: "",
            };
            // The skeleton's lines (budget, each trial's progress, each repeat's bound) go to
            // `progress.log`: the library prints nothing.
            let log_path = dir.join("progress.log");
            let mut log = std::fs::File::create(&log_path)
                .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
            // The server thread's scheduling in each trial run, by repeat.
            let threads = RefCell::new(Vec::new());
            let (mut repeats, mut tables) = (Vec::new(), Vec::new());
            bench.run_with(
                &about,
                &[plan.mode.as_str()],
                |p| {
                    seed += 1;
                    let (t, served) = trial(&plan, handoff, p, seed)?;
                    threads.borrow_mut().push(thread_reading(&p, &served));
                    Ok(t)
                },
                // A progress line that cannot be written loses nothing of the report.
                &mut |line| drop(writeln!(log, "[bench] {line}")),
                &mut |r: &EmuRepeat| {
                    let [summary] = r.summaries.as_slice() else {
                        return Err(format!("{} summaries of one mode", r.summaries.len()));
                    };
                    tables.push(emu_bench::table(&r.summaries, None, cfg.trials));
                    repeats.push(RepeatReport {
                        summary: summary.clone(),
                        records: r.records.clone(),
                        points: r.trials.clone(),
                        server_thread: threads.take(),
                    });
                    Ok(())
                },
            )?;
            SearchReport {
                mode: plan.mode.clone(),
                shape: plan.shape.clone(),
                repeats,
                tables,
            }
            .to_json()
        }
    }
}

/// Writes `name` in `dir` whole (a temporary file renamed into place).
fn write_whole(dir: &Path, name: &str, text: &str) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// Starts the control thread of the device opened on `dir`: it waits for `dir/plan.json`,
/// runs it on `cpus` (the process's CPUs), and writes `report.json` (on success) and `done` (`ok`, or the error).
pub(crate) fn start(dir: PathBuf, handoff: Arc<Handoff>, cpus: Vec<usize>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("cf-emu-plan".to_owned())
        .spawn(move || {
            // It inherits the pinned caller's CPU; the trials' threads need all of them.
            if let Err(e) = percore::set_current_thread_cpus(&cpus) {
                let _ = write_whole(&dir, "done", &format!("setting the CPUs {cpus:?}: {e}\n"));
                return;
            }
            while !dir.join("plan.json").exists() {
                if handoff.closed() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let done = match run_plan(&dir, &handoff, &cpus) {
                Ok(report) => match write_whole(&dir, "report.json", &format!("{report:#}\n")) {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => format!("writing report.json: {e}"),
                },
                Err(e) => e,
            };
            let _ = write_whole(&dir, "done", &format!("{done}\n"));
        })
        .map(drop)
}
