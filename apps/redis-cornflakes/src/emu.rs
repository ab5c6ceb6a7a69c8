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

use cornflakes::{Arena, CFString, CornflakesObj};
use emu_bench::{EmuSummary, Roles};
use kv_peers::load::load;
use kv_peers::plan::Plan;
use kv_peers::server::Peer;
use kv_workloads::{OpKind, Request};
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

/// A read request's bytes in `format` and its expected reply check.
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
            let a = Arena::new();
            let (bytes, msg, field) = match r {
                Request::Get { key } => {
                    let mut m = kv::GetReq::new_in(&a);
                    m.set_key(CFString::new(key, &a));
                    (m.serialize_to_vec(), "kv.GetResp", "val")
                }
                Request::GetM { keys } => {
                    let mut m = kv::GetMReq::new_in(&a);
                    m.init_keys(keys.len());
                    for k in keys {
                        m.get_mut_keys().append(CFString::new(k, &a));
                    }
                    (m.serialize_to_vec(), "kv.GetMResp", "vals")
                }
                Request::GetList { key } => {
                    let mut m = kv::GetListReq::new_in(&a);
                    m.set_key(CFString::new(key, &a));
                    (m.serialize_to_vec(), "kv.GetListResp", "vals")
                }
                o => {
                    return Err(format!(
                        "{} is not a read the emulated run checks",
                        o.kind()
                    ))
                }
            };
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
    for i in 0..n {
        let values = expected_values(workload.as_ref(), &plan.requests[i])?;
        reqs.push(request_and_check(&plan, i, format, &values, &mut blob)?);
    }
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
    eprintln!(
        "[redis-cf] emu {format:?}: searching (progress in {})",
        log.display()
    );
    let started = Instant::now();
    let done = loop {
        if let Ok(d) = std::fs::read_to_string(dir.join("done")) {
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
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("report.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("report.json: {e}"))?;
    let repeats = report["repeats"].as_array().cloned().unwrap_or_default();
    let summaries = repeats
        .iter()
        .map(|r| EmuSummary::from_json(&r["summary"]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("report.json's summary: {e}"))?;
    // The median repeat by its highest load kept up.
    let mut maxes: Vec<(f64, &Value)> = repeats
        .iter()
        .map(|r| {
            (
                r["summary"]["max_rps_within_95pct"].as_f64().unwrap_or(0.0),
                r,
            )
        })
        .collect();
    maxes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = maxes.get(maxes.len() / 2).map(|m| m.1);
    let s = median.map_or(Value::Null, |r| r["summary"].clone());
    let thread_note = median.map_or_else(String::new, |r| {
        [
            ("best", "at the best load"),
            ("first_sustained_miss", "at the first miss"),
        ]
        .iter()
        .filter_map(|(k, what)| {
            let load = r["summary"][k]["offered_rps"].as_f64()?;
            Some(format!(
                "{what} {}",
                thread_share(&r["server_thread"], load)?
            ))
        })
        .collect::<Vec<_>>()
        .join("; ")
    });
    let bad = repeats
        .iter()
        .map(|r| {
            r["summary"]["mismatched"].as_u64().unwrap_or(0)
                + r["summary"]["malformed"].as_u64().unwrap_or(0)
        })
        .sum();
    Ok(EmuResult {
        format,
        max_rps: s["max_rps_within_95pct"].as_f64(),
        p99_us: s["best"]["p99_us"].as_f64(),
        device_busy: s["best"]["device_busy"].as_f64(),
        bound_note: s["bound_note"].as_str().unwrap_or("").to_owned(),
        thread_note,
        bad,
        zero_copy,
        copied,
        table: report["tables"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default(),
        summaries,
    })
}

/// Redis's thread in the trials at `load` (the device's `server_thread` list): the least of
/// the trials' shares on its CPU and the most waiting for it, e.g. `Redis's thread on its CPU
/// 99% of the trial, waiting for it 1%`; `None` when the kernel gave no schedstats.
fn thread_share(threads: &Value, load: f64) -> Option<String> {
    let shares: Vec<(f64, f64)> = threads
        .as_array()?
        .iter()
        .filter(|t| t["offered_rps"].as_f64() == Some(load))
        .filter_map(|t| {
            let span = t["span_ns"].as_f64().filter(|s| *s > 0.0)?;
            Some((
                t["on_cpu_ns"].as_f64()? / span,
                t["waited_ns"].as_f64()? / span,
            ))
        })
        .collect();
    let on = shares.iter().map(|s| s.0).reduce(f64::min)?;
    let waited = shares.iter().map(|s| s.1).fold(0.0, f64::max);
    Some(format!(
        "Redis's thread on its CPU {:.0}% of the trial, waiting for it {:.0}%",
        on * 100.0,
        waited * 100.0
    ))
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
pub fn table(results: &[(Experiment, Vec<EmuResult>)]) -> String {
    let mut s = String::from(
        "Table 3 on the emulated ConnectX (Redis's core on the mlx5 driver, the device on the \
         second CPU): Gbit/s of values at the highest load kept up\n\n\
         | workload | RESP | Cornflakes | Cornflakes ÷ RESP | paper (Cf / RESP) | paper ratio | \
         zero-copy / copied values (Cornflakes) |\n|---|---|---|---|---|---|---|\n",
    );
    for (exp, rs) in results {
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
        let repeats = rs.iter().map(|r| r.summaries.len()).min().unwrap_or(0);
        let per: Vec<Vec<EmuSummary>> = (0..repeats)
            .map(|i| rs.iter().map(|r| r.summaries[i].clone()).collect())
            .collect();
        s += &format!(
            "\n{} (\"÷ best library\": ÷ RESP):\n\n{}",
            exp.label(),
            emu_bench::compact_table(&per, &ROLES)
        );
    }
    s
}

/// The bar chart of the highest load each format kept up per experiment (one bar per
/// experiment and format, its spread as a whisker), as `echo bench` and `kv bench` draw
/// theirs, to `dir/redis.svg` and `dir/redis.png`.
pub fn write_chart(dir: &Path, results: &[(Experiment, Vec<EmuResult>)]) {
    let repeats = results
        .iter()
        .flat_map(|(_, rs)| rs.iter().map(|r| r.summaries.len()))
        .min()
        .unwrap_or(0);
    let per: Vec<Vec<EmuSummary>> = (0..repeats)
        .map(|i| {
            results
                .iter()
                .flat_map(|(exp, rs)| {
                    rs.iter().map(move |r| EmuSummary {
                        mode: format!("{} {}", exp.label(), r.format.name()),
                        ..r.summaries[i].clone()
                    })
                })
                .collect()
        })
        .collect();
    let chart = emu_bench::kept_up_chart(
        &per,
        &ROLES,
        "Redis on the emulated ConnectX (RESP vs Cornflakes objects): highest load kept up",
    );
    let (svg, png) = (dir.join("redis.svg"), dir.join("redis.png"));
    match loadgen::plot_bars(&chart, &svg, &png) {
        Ok(()) => eprintln!("[redis-cf] wrote {} and {}", svg.display(), png.display()),
        Err(e) => eprintln!("[redis-cf] no chart: {e}"),
    }
}
