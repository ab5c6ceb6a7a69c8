//! `kv bench --datapath emu`: the KV server on the ConnectX driver on one core, the emulated
//! ConnectX on another playing the wire and the open-loop clients (crates/emu-bench). This
//! measures the server core's work per request, as the paper's setup does with a real NIC.
//!
//! Each point is one `emu_bench::run`: the server's pinned memory is created on the server
//! core, the store loaded into it (before the datapath opens, so loading is not measured),
//! then requests arrive. Every reply's headers, length, type and id are checked by the device,
//! and every reply is decoded and verified against the store's expected contents (the
//! `sample_every` of the run is 1).

use cornflakes::PinnedMemory;
use emu_bench::{EmuRunConfig, Request};
use loadgen::{Record, DEFAULT_KEEP_UP};

use crate::bench::{load_store, write_outputs, BenchConfig, BenchOutcome, Prepared, EMU_LABEL};
use crate::cf;
use crate::client::decode_reply;
use crate::ops::OpKind;
use crate::resp;
use crate::serialization::Serialization;
use crate::server::{KvServer, ServerConfig, ServerStats};
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
            Request {
                msg_type: OpKind::of(op).msg_type(),
                payload,
            }
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
        "[bench] {} serializations x {} loads, {:?} per point (+{:?} warm-up), {EMU_LABEL}, MTU {}",
        cfg.serializations.len(),
        loads.len(),
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
    let mut records: Vec<Vec<Record>> = vec![Vec::new(); cfg.serializations.len()];
    let mut misses = vec![0usize; cfg.serializations.len()];
    let mut last: Vec<Option<(ServerStats, String)>> = vec![None; cfg.serializations.len()];
    for (li, &load) in loads.iter().enumerate() {
        for (si, &ser) in cfg.serializations.iter().enumerate() {
            if cfg.stop_after_misses > 0 && misses[si] >= cfg.stop_after_misses {
                continue;
            }
            let ecfg = EmuRunConfig {
                rate_rps: load,
                duration: cfg.duration,
                warmup: cfg.warmup,
                timeout: cfg.timeout,
                seed: cfg.seed + 1 + li as u64,
                sample_every: 1,
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
            let scfg = ServerConfig {
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
                let mut store = Store::new(&mem, scfg.store);
                let loaded = load_store(&wl, &mut store)?;
                let dp = port
                    .datapath(mem)
                    .map_err(|e| format!("emulated ConnectX: {e}"))?;
                let mut server = KvServer::with_store(dp, scfg, store);
                while !port.stopped() {
                    server.poll();
                }
                Ok::<_, String>((server.stats(), loaded))
            })?;
            let (stats, loaded) = served?;
            let rec = Record::from_report(ser.name(), &name, &report.run);
            eprintln!(
                "[bench] load {}/{} {:>7.0} req/s  {:<20} achieved {:>7.0}  p99 {:>8}  device busy {:.0}%  {}  ({}; {loaded})",
                li + 1,
                loads.len(),
                load,
                ser.name(),
                rec.achieved_rps,
                rec.p99_us.map_or("–".to_owned(), |v| format!("{v:.1}")),
                report.device_busy * 100.0,
                report.bottleneck(),
                report.run.counters,
            );
            for f in &report.failures {
                eprintln!("[bench] {ser}: {f}");
            }
            misses[si] = if rec.keeps_up(DEFAULT_KEEP_UP) {
                0
            } else {
                misses[si] + 1
            };
            last[si] = Some((
                stats,
                format!(
                    "emulated NIC: {} at {:.0} req/s offered (device busy {:.0}%)",
                    report.bottleneck(),
                    load,
                    report.device_busy * 100.0
                ),
            ));
            records[si].push(rec);
        }
    }
    let mut out = BenchOutcome {
        workload: name,
        stats: Some(p.stats),
        requests_per_unit: p.per_unit,
        datapath: EMU_LABEL.to_owned(),
        ..BenchOutcome::default()
    };
    for (si, &ser) in cfg.serializations.iter().enumerate() {
        if let Some((st, bound)) = last[si].take() {
            eprintln!("[bench] {ser} server (last point): {st}");
            out.servers.push((ser, st));
            out.bounds.push((ser.name().to_owned(), bound));
        }
    }
    out.records = records.into_iter().flatten().collect();
    write_outputs(cfg, &out)?;
    Ok(out)
}
