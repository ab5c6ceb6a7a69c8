//! `kv bench --datapath emu`: the KV server on the ConnectX driver on one core, the emulated
//! ConnectX on another playing the wire and the open-loop clients (crates/emu-bench). This
//! measures the server core's work per request, as the paper's setup does with a real NIC.
//!
//! Each point is one `emu_bench::run`: the server's pinned memory is created on the server
//! core, the store loaded into it (before the datapath opens, so loading is not measured),
//! then requests arrive. Every reply's headers, length, type and id are checked by the device;
//! every `--sample-every`'th reply (default 1 in 64) and the first reply to each distinct
//! request are decoded and verified against the store's expected contents, so the device
//! thread does not bound large values. Each serialization's saturation load is found by the
//! shared search ([`loadgen::search`]: median of `--trials` per load, grid then bisection,
//! serializations interleaved trial by trial), reported with [`emu_bench::EmuSummary`].

use cornflakes::PinnedMemory;
use emu_bench::{median_records, trials_json, EmuRunConfig, EmuSummary, EmuTrial, Request};
use loadgen::search::{search, SearchConfig};

use crate::bench::{load_store, write_outputs, BenchConfig, BenchOutcome, Prepared, EMU_LABEL};
use crate::cf;
use crate::client::decode_reply;
use crate::ops::OpKind;
use crate::resp;
use crate::serialization::Serialization;
use crate::server::{KvServer, ServerConfig};
use crate::store::{Store, StoreConfig};

fn encode(ser: Serialization, ops: &[crate::Op]) -> Vec<Request> {
    let arena = cornflakes::Arena::new();
    ops.iter()
        .map(|op| {
            let mut payload = Vec::new();
            if ser.is_cornflakes() {
                cf::encode_request(op, 0, &arena, &mut payload);
            } else if let Some(lib) = ser.library() {
                crate::libs::encode_request(lib, op, 0, &mut payload);
            } else {
                resp::encode_request(op, &mut payload);
            }
            // One server core (core 0): `--cores` for KV on emu needs the key-owner function.
            Request::new(OpKind::of(op).msg_type(), payload)
        })
        .collect()
}

pub(crate) fn run_emu(
    cfg: &BenchConfig,
    loads: &[f64],
    p: Prepared,
) -> Result<BenchOutcome, String> {
    let name = p.workload.name();
    eprintln!(
        "[bench] {} serializations, grid {:?} req/s, {:?} per trial (+{:?} warm-up), {EMU_LABEL}, MTU {}",
        cfg.serializations.len(),
        loads,
        cfg.duration,
        cfg.warmup,
        cfg.mtu
    );
    let encoded: Vec<Vec<Request>> = cfg
        .serializations
        .iter()
        .map(|&s| encode(s, &p.reqs.ops))
        .collect();
    // The emulated wire carries single-frame requests and replies: raise the MTU (on both
    // ends) when a request or a reply (e.g. a Twitter value of 30 KB) does not fit one frame
    // of `--mtu`. Replies of several values (getm, getlist) are bounded by the request's
    // values for writes and, for reads, by the workload's frame budget.
    let largest_req = encoded
        .iter()
        .flatten()
        .map(|r| r.payload.len())
        .max()
        .unwrap_or(0);
    let largest = largest_req.max(p.expected.max_value_len() + 256);
    let mtu = if largest + 128 > cfg.mtu {
        let m = (largest + 128).next_multiple_of(1024).min(65_000);
        eprintln!(
            "[bench] emu: MTU raised from {} to {m} so that the largest request or value ({largest} B) is one frame (the emulated wire carries single-frame messages)",
            cfg.mtu
        );
        m
    } else {
        cfg.mtu
    };
    let scfg = SearchConfig {
        trials: cfg.trials,
        resolution: cfg.resolution,
        ..SearchConfig::new(loads.to_vec())
    };
    eprintln!(
        "[bench] saturation search: median of up to {} trials per load, grid then bisection to \
         {:.0}%, serializations interleaved trial by trial; per serialization up to ~{} trials \
         when trials agree, at most {}",
        scfg.trials,
        scfg.resolution * 100.0,
        scfg.typical_trials(),
        scfg.max_trials()
    );
    let mut runs = 0u64;
    let searches = search(&scfg, cfg.serializations.len(), |pt| {
        runs += 1;
        let (si, load) = (pt.lane, pt.offered_rps);
        let ser = cfg.serializations[si];
        let ecfg = EmuRunConfig {
            rate_rps: load,
            duration: cfg.duration,
            warmup: cfg.warmup,
            timeout: cfg.timeout,
            seed: cfg.seed + runs,
            sample_every: cfg.sample_every,
            // A write changes what later reads of its key return (e.g. an append).
            replies_vary: true,
            mtu,
            ..EmuRunConfig::default()
        };
        let mut ecfg = ecfg;
        ecfg.emu.mtu = ecfg.emu.mtu.max(mtu);
        let reqs = p.reqs.clone();
        let expected = p.expected.clone();
        let check = move |i: usize, reply: &[u8]| {
            let op = &reqs.ops[i];
            let (_, r) = decode_reply(ser, OpKind::of(op), reply)?;
            if expected.check(op, &r) {
                Ok(())
            } else {
                Err(format!(
                    "request {i} ({}): wrong reply {r}",
                    OpKind::of(op).name()
                ))
            }
        };
        let wl = cfg.workload.clone();
        let server_cfg = ServerConfig {
            serialization: ser,
            threshold: cfg.threshold,
            store: StoreConfig {
                memory_limit: cfg.memory_limit,
            },
        };
        let (max_item, limit) = (cfg.max_item, cfg.memory_limit);
        let (report, served) = emu_bench::run(&ecfg, &encoded[si], check, move |port| {
            let mut mc = port.memory_config();
            mc.max_item_size = mc.max_item_size.max(max_item.next_power_of_two());
            mc.max_bytes = limit.saturating_add(256 << 20);
            let mem = PinnedMemory::new(mc).map_err(|e| format!("pinned memory: {e}"))?;
            let mut store = Store::new(&mem, server_cfg.store);
            let loaded = load_store(&wl, &mut store)?;
            let dp = port
                .datapath(mem)
                .map_err(|e| format!("emulated ConnectX: {e}"))?;
            let mut server = KvServer::with_store(dp, server_cfg, store);
            while !port.stopped() {
                server.poll();
            }
            Ok::<_, String>((server.stats(), loaded))
        })?;
        let (stats, loaded) = served?;
        let work = stats.work_p50_ns();
        let t = EmuTrial::new(pt, ser.name(), &name, report, work, stats);
        eprintln!("[bench] {}  ({loaded})", t.progress());
        for f in &t.report.failures {
            eprintln!("[bench] {ser}: {f}");
        }
        Ok::<_, String>(t)
    })?;
    let mut out = BenchOutcome {
        workload: name,
        stats: Some(p.stats),
        requests_per_unit: p.per_unit,
        datapath: EMU_LABEL.to_owned(),
        ..BenchOutcome::default()
    };
    let mut summaries = Vec::new();
    let mut trials = Vec::new();
    for (&ser, s) in cfg.serializations.iter().zip(&searches) {
        let summary = EmuSummary::of(ser.name(), s);
        // The server counters reported: those of the best load's median trial.
        if let Some(v) = s.best_achieved().or(s.loads.first()) {
            let st = v.median().server.clone();
            eprintln!("[bench] {ser} server (median trial of its best load): {st}");
            out.servers.push((ser, st));
        }
        out.bounds.push((
            ser.name().to_owned(),
            format!(
                "emulated NIC: {}{}",
                summary.bound_note(),
                summary.best.as_ref().map_or(String::new(), |b| format!(
                    "; best load's {} trials {:.0}–{:.0} req/s, device busy {:.0}%",
                    b.trials,
                    b.min_rps,
                    b.max_rps,
                    b.device_busy * 100.0
                ))
            ),
        ));
        out.records.extend(median_records(s));
        trials.extend(trials_json(s));
        summaries.push(summary);
    }
    write_outputs(cfg, &out)?;
    let table = emu_bench::table(&summaries, None, scfg.trials);
    println!("\n### The saturation search on the emulated NIC\n\n{table}");
    let summary = serde_json::Value::Array(summaries.iter().map(EmuSummary::to_json).collect());
    for (file, text) in [
        (
            "emu-summary.json",
            serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?,
        ),
        (
            "emu-points.json",
            serde_json::to_string_pretty(&serde_json::Value::Array(trials))
                .map_err(|e| e.to_string())?,
        ),
        ("emu.md", table),
    ] {
        let path = cfg.out_dir.join(file);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(out)
}
