//! `redis-cf-bench --datapath emu`: the patched redis-server on the real mlx5 driver against
//! the emulated ConnectX (`cornflakes-datapath "emu DIR"`, the C API's `cf_dp_emu_new`), the
//! device on the second CPU playing the wire and the open-loop clients, so Redis's core is
//! what saturates. Per experiment and format the server is started, loaded over its normal TCP
//! port, and handed a plan (the workload's requests as the device injects them, and each
//! reply's expected values); the device runs emu-bench's saturation search inside the server's
//! process and writes its report, read back here with the server's `INFO cornflakes`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use cornflakes::{Arena, CFBytes, CFString, CornflakesObj};
use emu_bench::{EmuSummary, Roles, SearchReport};
use kv_peers::load::load;
use kv_peers::plan::Plan;
use kv_peers::server::Peer;
use kv_workloads::{OpKind, Request};
use loadgen::{Record, DEFAULT_KEEP_UP};
use serde_json::{json, Value};

use crate::udp::{kv, Format};
use crate::{CfServer, Cli, Experiment};

/// Distinct requests in a plan (the device cycles through them).
const PLAN_REQUESTS: usize = 2048;

/// What one format's search on the emulated device came to.
pub struct EmuResult {
    /// `resp` or `cornflakes`.
    pub format: Format,
    /// The highest load kept up (median trial), req/s.
    pub max_rps: Option<f64>,
    /// Its p99, µs.
    pub p99_us: Option<f64>,
    /// The device thread's busy share there.
    pub device_busy: Option<f64>,
    /// What bounded the search, in words (emu-bench's note, with Redis's time split).
    pub bound_note: String,
    /// Redis's thread at the best load and the first miss: its share of the trials on its CPU
    /// and waiting for it (schedstat), in words.
    pub thread_note: String,
    /// Replies that failed their checks (must be 0).
    pub bad: u64,
    /// The server's `cornflakes_zero_copy_values_sent` and `cornflakes_copied_values_sent`.
    pub zero_copy: u64,
    /// See `zero_copy`.
    pub copied: u64,
    /// emu-bench's full table of the search (each repeat's).
    pub table: String,
    /// The search's summary in each repeat (`--repeat`), for the compact table and the chart.
    pub summaries: Vec<EmuSummary>,
    /// The median repeat's points: each load's median trial, by offered load (for the
    /// latency curves and Figure 8).
    pub records: Vec<Record>,
}

fn pair(blob: &mut Vec<u8>, bytes: &[u8]) -> Value {
    let at = blob.len();
    blob.extend_from_slice(bytes);
    json!([at, bytes.len()])
}

/// RESP's bulk string.
fn bulk(out: &mut Vec<u8>, v: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
}

/// Request `r` as a kv.proto object: its bytes, its reply's message and the reply's field of
/// values (`None` for a write's reply, which carries none).
fn object_request(r: &Request) -> Result<(Vec<u8>, &'static str, Option<&'static str>), String> {
    let a = Arena::new();
    Ok(match r {
        Request::Get { key } => {
            let mut m = kv::GetReq::new_in(&a);
            m.set_key(CFString::new(key, &a));
            (m.serialize_to_vec(), "kv.GetResp", Some("val"))
        }
        Request::GetM { keys } => {
            let mut m = kv::GetMReq::new_in(&a);
            m.init_keys(keys.len());
            for k in keys {
                m.get_mut_keys().append(CFString::new(k, &a));
            }
            (m.serialize_to_vec(), "kv.GetMResp", Some("vals"))
        }
        Request::GetList { key } => {
            let mut m = kv::GetListReq::new_in(&a);
            m.set_key(CFString::new(key, &a));
            (m.serialize_to_vec(), "kv.GetListResp", Some("vals"))
        }
        Request::Put { key, val } => {
            let mut m = kv::PutReq::new_in(&a);
            m.set_key(CFString::new(key, &a));
            m.set_val(CFBytes::new(val, &a));
            (m.serialize_to_vec(), "kv.PutResp", None)
        }
        o => {
            return Err(format!(
                "{} is not a request the emulated run sends (get, getm, getlist, put)",
                o.kind()
            ))
        }
    })
}

/// A read request's bytes in `format` and its expected reply check (the reply is fixed: the
/// run has no writes).
fn request_and_check(
    plan: &Plan,
    i: usize,
    format: Format,
    values: &[Vec<u8>],
    blob: &mut Vec<u8>,
) -> Result<Value, String> {
    let r = &plan.requests[i];
    let (payload, expect) = match format {
        Format::Resp => {
            let mut cmd = Vec::new();
            plan.encode(i, &mut cmd);
            let mut reply = Vec::new();
            match r {
                Request::Get { .. } => bulk(&mut reply, &values[0]),
                _ => {
                    reply.extend_from_slice(format!("*{}\r\n", values.len()).as_bytes());
                    values.iter().for_each(|v| bulk(&mut reply, v));
                }
            }
            (cmd, json!({ "bytes": pair(blob, &reply) }))
        }
        Format::Cornflakes => {
            let (bytes, msg, field) = object_request(r)?;
            let vals: Vec<Value> = values.iter().map(|v| pair(blob, v)).collect();
            (
                bytes,
                json!({ "object": msg, "field": field, "values": vals }),
            )
        }
    };
    Ok(json!({
        "type": OpKind::of(r).msg_type(),
        "payload": pair(blob, &payload),
        "expect": expect,
    }))
}

/// Request `i` of a run with writes, in `format`, with its key-value check: the device
/// checks its reply against what its keys hold when Redis handles it (the C API's `kv`
/// expectation: every write's reply applied in order, a stale value wrong).
fn kv_request_and_check(
    plan: &Plan,
    i: usize,
    format: Format,
    blob: &mut Vec<u8>,
) -> Result<Value, String> {
    let r = &plan.requests[i];
    let vals: Vec<Value> = match r {
        Request::Put { val, .. } => vec![pair(blob, val)],
        Request::Get { .. } | Request::GetM { .. } | Request::GetList { .. } => Vec::new(),
        o => {
            return Err(format!(
                "{} is not a request the emulated run sends (get, getm, getlist, put)",
                o.kind()
            ))
        }
    };
    let mut kv = json!({ "op": r.kind(), "keys": r.keys(), "vals": vals });
    let payload = match format {
        Format::Resp => {
            let mut cmd = Vec::new();
            plan.encode(i, &mut cmd);
            cmd
        }
        Format::Cornflakes => {
            let (bytes, msg, field) = object_request(r)?;
            kv["object"] = json!(msg);
            if let Some(f) = field {
                kv["field"] = json!(f);
            }
            bytes
        }
    };
    Ok(json!({
        "type": OpKind::of(r).msg_type(),
        "payload": pair(blob, &payload),
        "expect": { "kv": kv },
    }))
}

/// The loaded values of every key `requests` name, for the key-value checks (`kv.initial`).
fn initial_values(
    workload: &dyn kv_workloads::Workload,
    requests: &[Request],
    blob: &mut Vec<u8>,
) -> Value {
    let mut initial = serde_json::Map::new();
    for k in requests.iter().flat_map(Request::keys) {
        if initial.contains_key(k) {
            continue;
        }
        if let Some(vals) = workload.initial_value(k) {
            let v: Vec<Value> = vals.iter().map(|v| pair(blob, v)).collect();
            initial.insert(k.to_owned(), json!(v));
        }
    }
    Value::Object(initial)
}

/// The IP MTU the device needs so that every request and reply of the plan is one frame
/// (the emulated wire carries single-frame messages): at least its default of 9000, for a
/// run whose longest value is `longest` bytes and longest request `request` bytes.
fn mtu_for(longest: usize, request: usize) -> usize {
    let need = longest.max(request) + 256 + 128;
    need.next_multiple_of(1024).clamp(9000, 65_000)
}

/// The values a read returns from the loaded store.
fn expected_values(
    workload: &dyn kv_workloads::Workload,
    r: &Request,
) -> Result<Vec<Vec<u8>>, String> {
    let of = |k: &str| {
        workload
            .initial_value(k)
            .ok_or_else(|| format!("key {k} is not loaded"))
    };
    Ok(match r {
        Request::Get { key } | Request::GetList { key } => of(key)?,
        Request::GetM { keys } => {
            let mut v = Vec::new();
            for k in keys {
                v.extend(of(k)?);
            }
            v
        }
        o => {
            return Err(format!(
                "{} is not a read the emulated run checks",
                o.kind()
            ))
        }
    })
}

/// `INFO cornflakes` over TCP: the zero-copy and copied value counts.
fn sent_counts(tcp: SocketAddr) -> Result<(u64, u64), String> {
    let mut s = TcpStream::connect(tcp).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$10\r\ncornflakes\r\n")
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let text = loop {
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("INFO: connection closed".to_owned());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Ok(Some((resp::Value::Bulk(Some(b)), _))) = resp::parse(&buf) {
            break String::from_utf8_lossy(&b).into_owned();
        }
    };
    let get = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("INFO cornflakes has no {name}"))
    };
    Ok((
        get("cornflakes_zero_copy_values_sent")?,
        get("cornflakes_copied_values_sent")?,
    ))
}

/// The whole lines `path` has gained past byte `*shown` (none while it does not exist);
/// `*shown` moves past them, so a line still being written is returned once it is whole.
fn new_lines(path: &Path, shown: &mut usize) -> Vec<String> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    let Some(tail) = bytes.get(*shown..) else {
        return Vec::new();
    };
    let Some(end) = tail.iter().rposition(|&b| b == b'\n') else {
        return Vec::new();
    };
    *shown += end + 1;
    String::from_utf8_lossy(&tail[..end])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One format's search of experiment `exp` on the emulated device.
pub fn search(
    cli: &Cli,
    exp: Experiment,
    bin: &Path,
    format: Format,
    requests: &[Request],
) -> Result<EmuResult, String> {
    let workload = exp.workload().build().map_err(|e| e.to_string())?;
    let n = requests.len().min(PLAN_REQUESTS);
    let plan = Plan::new(Peer::Redis, workload.as_ref(), requests[..n].to_vec())
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cli.out).map_err(|e| e.to_string())?;
    let out = std::fs::canonicalize(&cli.out).map_err(|e| e.to_string())?;
    let dir = out.join(format!("emu-{}-{format:?}", exp.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        format!("cornflakes-datapath \"emu {}\"\n", dir.display()),
    )
    .map_err(|e| e.to_string())?;
    let log = dir.join("redis.log");
    let server = CfServer::start(bin, format, cli.threshold, &log, Some(&conf))?;
    eprintln!("[redis-cf] emu {format:?}: loading {}", workload.name());
    load(Peer::Redis, server.tcp, workload.as_ref(), plan.layout)
        .map_err(|e| format!("loading redis-cornflakes: {e}"))?;
    let mut blob = Vec::new();
    let mut reqs = Vec::with_capacity(n);
    let writes = plan.requests.iter().any(Request::is_write);
    let mut longest = 0;
    for i in 0..n {
        reqs.push(if writes {
            kv_request_and_check(&plan, i, format, &mut blob)?
        } else {
            let values = expected_values(workload.as_ref(), &plan.requests[i])?;
            longest = longest.max(values.iter().map(Vec::len).sum::<usize>());
            request_and_check(&plan, i, format, &values, &mut blob)?
        });
    }
    let kv_initial = writes.then(|| initial_values(workload.as_ref(), &plan.requests, &mut blob));
    if let Some(Value::Object(m)) = &kv_initial {
        for k in m.keys() {
            let len = workload
                .initial_value(k)
                .map_or(0, |v| v.iter().map(Vec::len).sum());
            longest = longest.max(len);
        }
    }
    for r in &plan.requests {
        if let Request::Put { val, .. } = r {
            longest = longest.max(val.len());
        }
    }
    let largest_request = reqs
        .iter()
        .filter_map(|r| r["payload"][1].as_u64())
        .max()
        .unwrap_or(0) as usize;
    let mut search = json!({
        "rates": cli.loads,
        "duration_ms": cli.duration.as_secs_f64() * 1e3,
        "warmup_ms": cli.warmup.as_secs_f64() * 1e3,
        "repeat": cli.emu.repeat.unwrap_or(1),
    });
    if let Some(k) = cli.trials {
        search["trials"] = json!(k);
    }
    if let Some(r) = cli.emu.slowed_retries {
        search["slowed_retries"] = json!(r);
    }
    let mut plan_json = json!({
        "mode": format!("redis {}", format.name()),
        "shape": exp.label(),
        "schema": crate::root().join("schemas/kv.proto"),
        "requests": reqs,
        "search": search,
    });
    if let Some(initial) = kv_initial {
        plan_json["kv"] = json!({ "initial": initial });
    }
    let mtu = mtu_for(longest, largest_request);
    if mtu > 9000 {
        eprintln!(
            "[redis-cf] emu {format:?}: the device's MTU raised to {mtu} so that the longest \
             value ({longest} B) is one frame (the emulated wire carries single-frame messages)"
        );
        plan_json["mtu"] = json!(mtu);
    }
    if let Some(c) = cli.emu.check_every {
        plan_json["check_every"] = json!(c);
    }
    if let Some(s) = cli.emu.sample_every {
        plan_json["sample_every"] = json!(s);
    }
    if !cli.pin {
        plan_json["pin"] = json!(false);
    }
    std::fs::write(dir.join("plan.bin"), &blob).map_err(|e| e.to_string())?;
    let tmp = dir.join(".plan.json.tmp");
    std::fs::write(&tmp, plan_json.to_string()).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, dir.join("plan.json")).map_err(|e| e.to_string())?;
    // The device's search prints nothing: its progress lines go to its run directory, and
    // are shown here as they come.
    let progress = dir.join("progress.log");
    eprintln!(
        "[redis-cf] emu {format:?}: searching (progress also in {})",
        progress.display()
    );
    let mut shown = 0;
    let started = Instant::now();
    let done = loop {
        let finished = std::fs::read_to_string(dir.join("done"));
        for line in new_lines(&progress, &mut shown) {
            eprintln!("{line}");
        }
        if let Ok(d) = finished {
            break d;
        }
        if !server.running() {
            return Err(format!("redis-cornflakes exited; see {}", log.display()));
        }
        if started.elapsed() > Duration::from_secs(3600) {
            return Err("the emulated run did not finish within an hour".to_owned());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if done.trim() != "ok" {
        return Err(format!("the emulated run failed: {}", done.trim()));
    }
    let (zero_copy, copied) = sent_counts(server.tcp)?;
    drop(server);
    let text = std::fs::read_to_string(dir.join("report.json")).map_err(|e| e.to_string())?;
    let report = serde_json::from_str(&text)
        .map_err(|e| e.to_string())
        .and_then(|v| SearchReport::from_json(&v))
        .map_err(|e| format!("report.json: {e}"))?;
    let median = report.median_repeat();
    let best = median.and_then(|r| r.summary.best.as_ref());
    let thread_note = median.map_or_else(String::new, |r| {
        [
            (&r.summary.best, "at the best load"),
            (&r.summary.first_miss, "at the first miss"),
        ]
        .iter()
        .filter_map(|(load, what)| {
            let share = r.thread_share_at(load.as_ref()?.offered_rps)?;
            Some(format!("{what} Redis's thread {share}"))
        })
        .collect::<Vec<_>>()
        .join("; ")
    });
    Ok(EmuResult {
        records: median.map_or_else(Vec::new, |r| r.records.clone()),
        format,
        max_rps: best.map(|b| b.median_rps),
        p99_us: best.and_then(|b| b.p99_us),
        device_busy: best.map(|b| b.device_busy),
        bound_note: median.map_or_else(String::new, |r| r.summary.bound_note()),
        thread_note,
        bad: report
            .repeats
            .iter()
            .map(|r| r.summary.mismatched + r.summary.malformed)
            .sum(),
        zero_copy,
        copied,
        table: report.tables.join("\n"),
        summaries: report.repeats.into_iter().map(|r| r.summary).collect(),
    })
}

/// The paper's Table 3 (Gbit/s: Cornflakes, RESP) per YCSB experiment.
pub fn paper(exp: Experiment) -> Option<(f64, f64)> {
    match exp {
        Experiment::Get => Some((23.37, 18.49)),
        Experiment::MGet2 => Some((14.12, 12.27)),
        Experiment::LRange2 => Some((15.07, 10.75)),
        Experiment::Twitter => None,
    }
}

/// Table 3 on the emulated device: per experiment, each format's highest load kept up in
/// Gbit/s of values (4096 B per request), the Cornflakes ÷ RESP ratio and the paper's.
/// Experiments without a Table 3 row (Twitter) are left out of the table (see [`figure8`]) but
/// not of the list of what bounded each search.
pub fn table(results: &[(Experiment, Vec<EmuResult>)]) -> String {
    let mut s = String::from(
        "Table 3 on the emulated ConnectX (Redis's core on the mlx5 driver, the device on the \
         second CPU): Gbit/s of values at the highest load kept up\n\n\
         | workload | RESP | Cornflakes | Cornflakes ÷ RESP | paper (Cf / RESP) | paper ratio | \
         zero-copy / copied values (Cornflakes) |\n|---|---|---|---|---|---|---|\n",
    );
    for (exp, rs) in results.iter().filter(|(e, _)| paper(*e).is_some()) {
        let of = |f: Format| rs.iter().find(|r| r.format == f);
        let gbps =
            |r: Option<&EmuResult>| r.and_then(|r| r.max_rps).map(|x| x * 4096.0 * 8.0 / 1e9);
        let (resp, cf) = (gbps(of(Format::Resp)), gbps(of(Format::Cornflakes)));
        let cell = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
        let ratio = match (cf, resp) {
            (Some(c), Some(r)) if r > 0.0 => format!("{:.2}", c / r),
            _ => "–".to_owned(),
        };
        let (p, pr) = paper(*exp).map_or(("–".to_owned(), "–".to_owned()), |(c, r)| {
            (format!("{c} / {r}"), format!("{:.2}", c / r))
        });
        let counts = of(Format::Cornflakes).map_or("–".to_owned(), |r| {
            format!("{} / {}", r.zero_copy, r.copied)
        });
        s += &format!(
            "| {} | {} | {} | {ratio} | {p} | {pr} | {counts} |\n",
            exp.label(),
            cell(resp),
            cell(cf)
        );
    }
    if !results.iter().any(|(e, _)| paper(*e).is_some()) {
        s.clear();
    }
    s += "\nWhat bounded each search (device busy and Redis's time split at the first miss; how \
          much of each trial Redis's thread ran, and waited for its CPU while another task held \
          it):\n";
    for (exp, rs) in results {
        for r in rs {
            s += &format!(
                "- {} {}: {} req/s kept up, p99 {} µs, device busy {}; {}{}{}\n",
                exp.label(),
                r.format.name(),
                r.max_rps.map_or("–".to_owned(), |v| format!("{v:.0}")),
                r.p99_us.map_or("–".to_owned(), |v| format!("{v:.1}")),
                r.device_busy
                    .map_or("–".to_owned(), |v| format!("{:.0}%", v * 100.0)),
                r.bound_note,
                if r.thread_note.is_empty() {
                    String::new()
                } else {
                    format!("; {}", r.thread_note)
                },
                if r.bad > 0 {
                    format!("; {} WRONG REPLIES", r.bad)
                } else {
                    String::new()
                }
            );
        }
    }
    s
}

/// RESP's and Cornflakes' roles in emu-bench's compact table: its "÷ best library" column is
/// then Cornflakes ÷ RESP (RESP's row 1.00), as the echo and KV benches' is Cornflakes ÷ the
/// best copying library.
const ROLES: Roles<'static> = Roles {
    hybrid: "redis cornflakes",
    sg: "",
    copy: "",
    no_ssend: "",
    libraries: &["redis resp"],
    raw: None,
};

/// Each experiment's compact table (emu-bench's, over the repeats: the highest load kept up,
/// its spread, Cornflakes ÷ RESP, what bounded it and where Redis's core's time went).
pub fn compact_tables(results: &[(Experiment, Vec<EmuResult>)]) -> String {
    let mut s = String::new();
    for (exp, rs) in results {
        let lanes: Vec<Vec<EmuSummary>> = rs.iter().map(|r| r.summaries.clone()).collect();
        let per = emu_bench::by_repeat(&lanes);
        s += &format!(
            "\n{} (\"÷ best library\": ÷ RESP):\n\n{}",
            exp.label(),
            emu_bench::compact_table(&per, &ROLES)
        );
    }
    s + &canary_notes(results)
}

/// The speed canary's notes under the tables, as `echo bench` and `kv bench` print them: how
/// many points ran slowed against the run's fast state, and whether the whole run had its two
/// CPUs far apart (which no point's mark can show); empty when neither.
fn canary_notes(results: &[(Experiment, Vec<EmuResult>)]) -> String {
    let records: Vec<Record> = results
        .iter()
        .flat_map(|(_, rs)| rs.iter().flat_map(|r| r.records.iter().cloned()))
        .collect();
    loadgen::canary::notes(&records)
}

/// The bar chart of the highest load each format kept up per experiment (one bar per
/// experiment and format, its spread as a whisker), as `echo bench` and `kv bench` draw
/// theirs, to `dir/redis.svg` and `dir/redis.png`.
pub fn write_chart(dir: &Path, results: &[(Experiment, Vec<EmuResult>)]) {
    // One lane per experiment and format, named after both.
    let lanes: Vec<Vec<EmuSummary>> = results
        .iter()
        .flat_map(|(exp, rs)| {
            rs.iter().map(move |r| {
                let mode = format!("{} {}", exp.label(), r.format.name());
                r.summaries
                    .iter()
                    .map(|s| EmuSummary {
                        mode: mode.clone(),
                        ..s.clone()
                    })
                    .collect()
            })
        })
        .collect();
    let chart = emu_bench::kept_up_chart(
        &emu_bench::by_repeat(&lanes),
        &ROLES,
        "Redis on the emulated ConnectX (RESP vs Cornflakes objects): highest load kept up",
    );
    let (svg, png) = (dir.join("redis.svg"), dir.join("redis.png"));
    match loadgen::plot_bars(&chart, &svg, &png) {
        Ok(()) => eprintln!("[redis-cf] wrote {} and {}", svg.display(), png.display()),
        Err(e) => eprintln!("[redis-cf] no chart: {e}"),
    }
}

/// The paper's Figure 8: Cornflakes' throughput over RESP's at a p99 target of 59 µs on its
/// testbed, +8.8 %.
pub const PAPER_TWITTER_GAIN: f64 = 0.088;

/// The highest load in `records` kept up (achieved within [`DEFAULT_KEEP_UP`] of offered)
/// with a p99 at most `target_us`: its achieved req/s and p99.
pub fn at_p99(records: &[Record], target_us: f64) -> Option<(f64, f64)> {
    records
        .iter()
        .filter(|r| r.achieved_rps >= DEFAULT_KEEP_UP * r.offered_rps)
        .filter_map(|r| Some((r.achieved_rps, r.p99_us.filter(|p| *p <= target_us)?)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// RESP's knee: the p99 at the highest load RESP kept up (among `records`' points).
pub fn knee_p99(records: &[Record]) -> Option<f64> {
    records
        .iter()
        .filter(|r| r.achieved_rps >= DEFAULT_KEEP_UP * r.offered_rps && r.p99_us.is_some())
        .max_by(|a, b| a.achieved_rps.total_cmp(&b.achieved_rps))
        .and_then(|r| r.p99_us)
}

/// Figure 8 on the emulated device: Twitter's throughput in each format at one p99 target,
/// Cornflakes ÷ RESP beside the paper's +8.8 %, and every point of both curves.
pub fn figure8(rs: &[EmuResult]) -> String {
    let of = |f: Format| rs.iter().find(|r| r.format == f);
    let (Some(resp), Some(cf)) = (of(Format::Resp), of(Format::Cornflakes)) else {
        return String::new();
    };
    let mut s = String::from(
        "\nFigure 8 on the emulated ConnectX: Twitter (gets and puts, every reply checked \
         against what its key holds when Redis handles it), throughput at a p99 target\n\n",
    );
    let Some(target) = knee_p99(&resp.records) else {
        s += "RESP kept no load up: no p99 target, no ratio (see the tables below).\n";
        return s;
    };
    s += &format!(
        "p99 target {target:.1} µs: RESP's p99 at the highest load it kept up (the knee of its \
         curve). The paper's target, 59 µs, sits at the same place on its testbed's RESP curve; \
         the emulated device has no wire or switch, so its latencies are not the testbed's and \
         the target is taken from RESP's own curve instead of the paper's number.\n\n\
         | format | req/s at p99 <= target | p99 there (µs) |\n|---|---|---|\n"
    );
    if !resp
        .records
        .iter()
        .any(|r| r.achieved_rps < DEFAULT_KEEP_UP * r.offered_rps)
    {
        s += "RESP kept up every load it was offered, so the target is not at its knee: raise \
              --rates until RESP misses one.\n\n";
    }
    let cell = |r: &EmuResult| at_p99(&r.records, target);
    for r in [resp, cf] {
        let (rps, p99) = cell(r).map_or(("–".to_owned(), "–".to_owned()), |(x, p)| {
            (format!("{x:.0}"), format!("{p:.1}"))
        });
        s += &format!("| {} | {rps} | {p99} |\n", r.format.name());
    }
    let ratio = match (cell(cf), cell(resp)) {
        (Some(c), Some(r)) if r.0 > 0.0 => format!("{:+.1} %", (c.0 / r.0 - 1.0) * 100.0),
        _ => "–".to_owned(),
    };
    s += &format!(
        "\nCornflakes ÷ RESP at the target: {ratio} (paper: {:+.1} %)\n\n\
         | format | offered req/s | achieved req/s | p50 (µs) | p99 (µs) |\n|---|---|---|---|---|\n",
        PAPER_TWITTER_GAIN * 100.0
    );
    let us = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
    for r in [resp, cf] {
        for p in &r.records {
            s += &format!(
                "| {} | {:.0} | {:.0} | {} | {} |\n",
                r.format.name(),
                p.offered_rps,
                p.achieved_rps,
                us(p.p50_us),
                us(p.p99_us)
            );
        }
    }
    s
}

/// Each experiment's latency curves: p50 and p99 against offered load up to saturation, RESP
/// and Cornflakes (the median repeat's points), to `dir/redis-latency-EXP.svg` and `.png`.
pub fn write_latency_charts(dir: &Path, results: &[(Experiment, Vec<EmuResult>)]) {
    for (exp, rs) in results {
        let records: Vec<Record> = rs
            .iter()
            .flat_map(|r| {
                r.records.iter().map(|p| Record {
                    mode: format!("redis {}", r.format.name()),
                    ..p.clone()
                })
            })
            .collect();
        let name = format!("redis-latency-{}", exp.name());
        let (svg, png) = (
            dir.join(format!("{name}.svg")),
            dir.join(format!("{name}.png")),
        );
        let title = format!(
            "Redis {} on the emulated ConnectX: latency up to saturation",
            exp.label()
        );
        match loadgen::plot_latency(&records, &title, DEFAULT_KEEP_UP, &svg, &png) {
            Ok(()) => eprintln!("[redis-cf] wrote {} and {}", svg.display(), png.display()),
            Err(e) => eprintln!("[redis-cf] no latency chart for {}: {e}", exp.label()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(offered: f64, achieved: f64, p99: f64) -> Record {
        Record {
            offered_rps: offered,
            achieved_rps: achieved,
            p99_us: Some(p99),
            ..Record::default()
        }
    }

    #[test]
    fn progress_lines_are_shown_once_each_and_only_when_whole() {
        let dir = std::env::temp_dir().join(format!("redis-cf-progress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("progress.log");
        let mut shown = 0;
        assert!(new_lines(&path, &mut shown).is_empty(), "no file yet");
        std::fs::write(&path, "[bench] one\n[bench] tw").unwrap();
        assert_eq!(new_lines(&path, &mut shown), ["[bench] one"]);
        assert!(new_lines(&path, &mut shown).is_empty(), "shown once");
        std::fs::write(&path, "[bench] one\n[bench] two\n[bench] three\n").unwrap();
        assert_eq!(
            new_lines(&path, &mut shown),
            ["[bench] two", "[bench] three"]
        );
        assert!(new_lines(&path, &mut shown).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_target_is_resps_knee_and_each_format_is_read_there() {
        let resp = vec![
            point(100e3, 100e3, 20.0),
            point(200e3, 199e3, 30.0),
            point(300e3, 250e3, 900.0),
        ];
        // The knee: the p99 at the highest load RESP kept up (200 k), not at its overload.
        assert_eq!(knee_p99(&resp), Some(30.0));
        let cf = vec![
            point(100e3, 100e3, 15.0),
            point(200e3, 200e3, 22.0),
            point(250e3, 249e3, 29.0),
            point(300e3, 299e3, 45.0),
            point(400e3, 300e3, 20.0),
        ];
        // 300 k is over the target, 400 k not kept up (however low its p99).
        assert_eq!(at_p99(&cf, 30.0), Some((249e3, 29.0)));
        assert_eq!(at_p99(&resp, 30.0), Some((199e3, 30.0)));
        assert_eq!(at_p99(&cf, 10.0), None);
        let result = |format, records| EmuResult {
            format,
            max_rps: None,
            p99_us: None,
            device_busy: None,
            bound_note: String::new(),
            thread_note: String::new(),
            bad: 0,
            zero_copy: 0,
            copied: 0,
            table: String::new(),
            summaries: Vec::new(),
            records,
        };
        let text = figure8(&[
            result(Format::Resp, resp.clone()),
            result(Format::Cornflakes, cf.clone()),
        ]);
        assert!(text.contains("p99 target 30.0 µs"), "{text}");
        assert!(
            text.contains("Cornflakes ÷ RESP at the target: +25.1 % (paper: +8.8 %)"),
            "{text}"
        );
        assert!(!text.contains("not at its knee"), "{text}");
        // The canary's notes: none for a run in the fast state; a run whose pair reading sat
        // far above a socket's throughout gets the note its slowed marks cannot give.
        let fast = |rs: &[Record], ns: f64| -> Vec<Record> {
            rs.iter()
                .map(|r| Record {
                    canary_pair_ns: Some(ns),
                    ..r.clone()
                })
                .collect()
        };
        let run = |ns: f64| {
            vec![(
                Experiment::Get,
                vec![
                    result(Format::Resp, fast(&resp, ns)),
                    result(Format::Cornflakes, fast(&cf, ns)),
                ],
            )]
        };
        assert_eq!(canary_notes(&run(64.0)), "");
        let notes = canary_notes(&run(310.0));
        assert!(
            notes.contains("was 310 ns a round trip at the median point (8 of 8 points"),
            "{notes}"
        );
        assert!(compact_tables(&run(310.0)).ends_with(&notes));
        // Without a load RESP missed, its top load is no knee: the text says so.
        let text = figure8(&[
            result(Format::Resp, resp[..2].to_vec()),
            result(Format::Cornflakes, cf),
        ]);
        assert!(text.contains("not at its knee: raise --rates"), "{text}");
    }
}
