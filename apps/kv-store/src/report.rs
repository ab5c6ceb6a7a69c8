//! A KV benchmark's outputs: JSON, throughput–p99 plots and the tables in the form of the
//! paper's Tables 1, 2, 4 and 5.

use loadgen::fmt_us;
use std::fmt::Write as _;

use kv_workloads::WorkloadConfig;
use loadgen::{max_kept_up, max_kept_up_within_p99, save_bench_records, Record, DEFAULT_KEEP_UP};

use crate::config::{BenchConfig, BenchOutcome, DatapathKind};
use crate::server::ServerStats;

/// Writes `kv.json` (the records), `run.json` (the workload, each serialization's server
/// counters, handling time and time split), `tables.md`, the charts (`kv.svg`/`kv.png`: the
/// highest load each serialization kept up; `kv-latency.svg`/`.png`: latency against offered
/// load); on the emulated NIC also `emu-summary.json`, `emu-points.json`, `ratios.json` and
/// `emu.md` (the search's full tables, also at the end of `tables.md`), and the terminal shows
/// the compact table and the ratios first; elsewhere the tables themselves.
pub(crate) fn write_outputs(cfg: &BenchConfig, out: &BenchOutcome) -> Result<(), String> {
    save_bench_records(&cfg.load.out_dir, &cfg.json_path(), &out.records)?;
    let servers: Vec<serde_json::Value> = out
        .servers
        .iter()
        .map(|(s, st)| {
            serde_json::json!({
                "serialization": s.name(),
                "workload": out.workload,
                "datapath": out.datapath,
                "received": st.received,
                "replied": st.replied,
                "malformed": st.malformed,
                "send_failed": st.send_failed,
                "io_errors": st.io_errors,
                "datapath_drops": st.datapath.total_drops(),
                "keys": st.app.keys,
                "store_bytes": st.app.used_bytes,
                "work_p50_ns": st.work_p50_ns(),
                "work_p99_ns": st.work.p99_us().map(|us| us * 1000.0),
                "server_time": emu_bench::split_json(&st.time),
            })
        })
        .collect();
    let meta = serde_json::json!({
        "workload": out.workload,
        "workload_config": cfg.workload,
        "stats": out.stats,
        "requests_per_unit": out.requests_per_unit,
        "datapath": out.datapath,
        "bounds": out.bounds,
        "servers": servers,
    });
    let meta_path = cfg.load.out_dir.join("run.json");
    std::fs::write(
        &meta_path,
        serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("writing {}: {e}", meta_path.display()))?;
    let mut tables = tables(&cfg.workload, out);
    let table_path = cfg.load.out_dir.join("tables.md");
    let printed = match &out.emu {
        Some(emu) => {
            let floors = floors(&cfg.workload);
            let texts = emu_bench::write_emu_outputs(
                &cfg.load.out_dir,
                emu,
                &emu_bench::EmuReportSpec {
                    roles: roles(),
                    floors: &floors,
                    heading: format!(
                        "## kv bench: {}\n\nDatapath: {}; each serialization's saturation load \
                         searched (docs/performance.md, \"Method\").\n\n",
                        out.workload, out.datapath,
                    ),
                    details: format!(
                        "The full tables (per serialization, the paper's tables in their form, \
                         and the search's: spread, p99, device busy, line rate, reruns and \
                         checks): {}.",
                        table_path.display()
                    ),
                },
            )?;
            let emu_md = cfg.load.out_dir.join("emu.md");
            std::fs::write(&emu_md, &texts.detail_tables)
                .map_err(|e| format!("writing {}: {e}", emu_md.display()))?;
            tables.push_str(&format!(
                "\n### The saturation search on the emulated NIC\n\n{}",
                texts.detail_tables
            ));
            texts.printed
        }
        None => tables.clone(),
    };
    std::fs::write(&table_path, &tables)
        .map_err(|e| format!("writing {}: {e}", table_path.display()))?;
    print!("{printed}");
    let dp = match cfg.datapath {
        DatapathKind::Socket if cfg.tcp_conns.is_some() => "kernel TCP",
        DatapathKind::Emu => "emulated ConnectX",
        DatapathKind::Xdp => "AF_XDP on veth",
        DatapathKind::Tcp => "kernel TCP",
        _ => "socket datapath",
    };
    emu_bench::write_charts(
        &cfg.load.out_dir,
        "kv",
        &format!("kv {}, {dp}", out.workload),
        &out.records,
        out.emu.as_ref(),
        &roles(),
    );
    Ok(())
}

/// Which serialization is which in the ratios (no raw baseline in the KV store).
pub fn roles() -> emu_bench::Roles<'static> {
    emu_bench::Roles::CORNFLAKES
}

/// The floors the ratios of `workload` are judged by, on the median of the repeats
/// (docs/performance.md, "The targets"): cornflakes ≥ 1.15 × the best library on Twitter,
/// ≥ 2 × on CDN, ≥ 0.98 × on Google; on every workload the hybrid ≥ only-copy and
/// serialize-and-send ≥ 1.07.
pub fn floors(workload: &WorkloadConfig) -> Vec<emu_bench::Floor> {
    let mut f = emu_bench::Floor::EVERY_RUN.to_vec();
    let best = match workload {
        WorkloadConfig::Twitter(_) => Some(1.15),
        WorkloadConfig::Cdn(_) => Some(2.0),
        WorkloadConfig::Google(_) => Some(0.98),
        WorkloadConfig::Ycsb(_) => None,
    };
    f.extend(best.map(emu_bench::Floor::best_library));
    f
}

fn best(records: &[Record], mode: &str) -> Option<Record> {
    let rs: Vec<Record> = records.iter().filter(|r| r.mode == mode).cloned().collect();
    max_kept_up(&rs, DEFAULT_KEEP_UP).cloned()
}

fn kilo(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.1}", v / 1000.0))
}

/// The paper's Table 1 / Table 4 column for a Google configuration.
fn google_column(cfg: &WorkloadConfig) -> Option<usize> {
    match cfg {
        WorkloadConfig::Google(g) => match (g.min_list_len, g.max_list_len) {
            (1, 1) => Some(0),
            (1, 4) => Some(1),
            (1, 8) => Some(2),
            (1, 16) => Some(3),
            _ => None,
        },
        _ => None,
    }
}

const GOOGLE_COLUMNS: [&str; 4] = ["1 val", "1-4 vals", "1-8 vals", "1-16 vals"];
/// Table 1 (thousand req/s): Cornflakes, Protobuf, Cap'n Proto, FlatBuffers.
const PAPER_TABLE1: [(&str, [f64; 4]); 4] = [
    ("cornflakes", [844.7, 727.2, 584.5, 441.2]),
    ("protobuf", [852.5, 741.9, 583.8, 402.0]),
    ("capnp", [678.9, 612.9, 507.1, 412.0]),
    ("flatbuffers", [778.1, 646.4, 516.8, 388.9]),
];
/// Table 2 (thousand objects/s).
const PAPER_TABLE2: [(&str, f64); 4] = [
    ("capnp", 161.0),
    ("flatbuffers", 181.2),
    ("protobuf", 186.1),
    ("cornflakes", 366.5),
];
/// Table 4 (thousand req/s, Google).
const PAPER_TABLE4: [(&str, [f64; 4]); 3] = [
    ("cornflakes", [844.7, 727.2, 584.5, 441.2]),
    ("cornflakes-sg", [846.9, 717.2, 557.4, 387.1]),
    ("cornflakes-copy", [819.0, 693.2, 547.4, 411.8]),
];

/// What bounded a serialization's sweep, in words: the offered loads, or the server core (its
/// whole busy time, receive to reap, from the time split: a datapath whose kernel copies each
/// frame in the server's send kick, as AF_XDP's copy mode does, keeps the core busy where its
/// request handling is a small part), or what lies outside the server (the kernel's path and
/// the clients).
fn bound_note(recs: &[Record], st: Option<&ServerStats>) -> String {
    let Some(last) = recs.last() else {
        return "not run".to_owned();
    };
    if last.keeps_up(DEFAULT_KEEP_UP) {
        return "the offered-load list (the highest load was kept up; add higher --rates)"
            .to_owned();
    }
    let Some(b) = best(recs, &last.mode).map(|b| b.achieved_rps) else {
        return format!(
            "no point reached 95% of offered (lowest: {:.0} of {:.0} req/s, {} lost)",
            recs[0].achieved_rps, recs[0].offered_rps, recs[0].lost
        );
    };
    // Shares of one core at the best load.
    let handling = st
        .and_then(ServerStats::work_p50_ns)
        .map(|ns| ns * b / 1e9 * 100.0);
    // The busy time per request is the sweep's average: at lower loads a request costs more
    // (fewer per burst), so at the best load this over-estimates, and can pass 100 %.
    let busy = st.and_then(|st| {
        let per = st.time.busy_per_request_ns()?;
        let (part, share) = st.time.busiest()?;
        let pct = per * b / 1e9 * 100.0;
        let how = format!(
            "{per:.0} ns busy a request over the sweep, {} {:.0}% of it",
            part.name(),
            share * 100.0
        );
        Some((pct, how))
    });
    match (handling, busy) {
        (Some(pct), Some((busy, how))) if busy >= SERVER_BOUND_PCT => format!(
            "saturated above {b:.0} req/s with the server core busy {} of the time ({how}) and \
             its request handling at ~{pct:.0}% of a core: the server core bound it{}",
            if busy >= 100.0 {
                "all".to_owned()
            } else {
                format!("~{busy:.0}%")
            },
            if pct < 50.0 {
                ", mostly outside serialization"
            } else {
                ""
            }
        ),
        (Some(pct), Some((busy, _))) if pct < 50.0 => format!(
            "saturated above {b:.0} req/s with the server core busy ~{busy:.0}% of the time and \
             its request handling at ~{pct:.0}% of a core: the kernel's path and the clients \
             bound it, not serialization"
        ),
        (Some(pct), None) if pct < 50.0 => format!(
            "saturated above {b:.0} req/s while the server's own request handling took \
             ~{pct:.0}% of a core: the kernel's path and the clients bound it, not serialization"
        ),
        (Some(pct), _) => format!(
            "saturated above {b:.0} req/s with the server's request handling at ~{pct:.0}% of \
             a core (server-bound)"
        ),
        (None, _) => format!("saturated above {b:.0} req/s"),
    }
}

/// A server core busy this much of the time at its best load (percent) is taken as the bound:
/// a sweep's points are seconds apart and the core's bursts are uneven, so it saturates before
/// 100 %.
const SERVER_BOUND_PCT: f64 = 70.0;

/// The Markdown tables: per serialization, then the paper's tables that apply to the workload,
/// our numbers beside the paper's.
pub fn tables(workload: &WorkloadConfig, out: &BenchOutcome) -> String {
    let recs = &out.records;
    let mut modes: Vec<&str> = Vec::new();
    for r in recs {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let server = |m: &str| {
        out.servers
            .iter()
            .find(|(s, _)| s.name() == m)
            .map(|(_, st)| st)
    };
    let objects = matches!(workload, WorkloadConfig::Cdn(_));
    let per_unit = out.requests_per_unit.max(1.0);
    let mut s = String::new();
    let _ = writeln!(s, "## kv bench: {}\n", out.workload);
    let _ = writeln!(s, "Datapath: {}.", out.datapath);
    let _ = writeln!(
        s,
        "Not the paper's testbed (a 100 Gbit/s ConnectX NIC, kernel bypass, dedicated cores): compare ratios between serializations, not absolute numbers.\n"
    );
    let unit_col = if objects { " | objects/s" } else { "" };
    let _ = writeln!(
        s,
        "| serialization | max req/s within 95% of offered{unit_col} | p99 there (µs) | p50 there (µs) | server work p50 (ns) | server busy per request, ns (busiest part) | mismatched | lost | server malformed | what bounded it |"
    );
    let _ = writeln!(
        s,
        "|---|---:|{}---:|---:|---:|---:|---:|---:|---:|---|",
        if objects { "---:|" } else { "" }
    );
    for m in &modes {
        let mine: Vec<Record> = recs.iter().filter(|r| r.mode == *m).cloned().collect();
        let b = best(recs, m);
        let st = server(m);
        let mismatched: u64 = mine.iter().map(|r| r.mismatched).sum();
        let lost: u64 = mine.iter().map(|r| r.lost).sum();
        let unit = if objects {
            format!(
                " | {}",
                b.as_ref().map_or("–".to_owned(), |b| format!(
                    "{:.0}",
                    b.achieved_rps / per_unit
                ))
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {m} | {}{unit} | {} | {} | {} | {} | {mismatched} | {lost} | {} | {} |",
            b.as_ref().map_or("none kept up".to_owned(), |b| format!(
                "{:.0}{}",
                b.achieved_rps,
                if b.slowed() { " (slowed)" } else { "" }
            )),
            fmt_us(b.as_ref().and_then(|b| b.p99_us)),
            fmt_us(b.as_ref().and_then(|b| b.p50_us)),
            st.and_then(ServerStats::work_p50_ns)
                .map_or("–".to_owned(), |w| format!("{w:.0}")),
            st.map_or("–".to_owned(), |st| st.time.busy_cell()),
            st.map_or("–".to_owned(), |st| st.malformed.to_string()),
            out.bounds
                .iter()
                .find(|(b, _)| b == m)
                .map_or_else(|| bound_note(&mine, st), |(_, why)| why.clone()),
        );
    }
    let ours = |m: &str| best(recs, m).map(|b| b.achieved_rps);
    if let Some(col) = google_column(workload) {
        let _ = writeln!(
            s,
            "\n### Table 1 form: Google bytes sizes, {} (thousand req/s)\n\n| system | this run | paper (Table 1) |\n|---|---:|---:|",
            GOOGLE_COLUMNS[col]
        );
        for (sys, paper) in PAPER_TABLE1 {
            let _ = writeln!(s, "| {sys} | {} | {:.1} |", kilo(ours(sys)), paper[col]);
        }
    } else if matches!(workload, WorkloadConfig::Google(_)) {
        let _ = writeln!(
            s,
            "\n(Table 1 form: the paper measured list lengths 1, 1-4, 1-8 and 1-16 only.)"
        );
    }
    if objects {
        let _ = writeln!(
            s,
            "\n### Table 2 form: CDN images (thousand objects/s; {per_unit:.1} requests per object)\n\n| system | this run | paper (Table 2) |\n|---|---:|---:|"
        );
        for (sys, paper) in PAPER_TABLE2 {
            let _ = writeln!(
                s,
                "| {sys} | {} | {paper:.1} |",
                kilo(ours(sys).map(|r| r / per_unit))
            );
        }
    }
    let hybrid = ours("cornflakes");
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".to_owned(),
    };
    if modes.contains(&"cornflakes-sg") || modes.contains(&"cornflakes-copy") {
        let col = google_column(workload);
        let _ = writeln!(
            s,
            "\n### Table 4 form: hybrid vs only scatter-gather vs only copy (thousand req/s)\n\n| policy | this run | hybrid / this | paper{} |\n|---|---:|---:|---:|",
            col.map_or(String::new(), |c| format!(" (Table 4, Google {})", GOOGLE_COLUMNS[c]))
        );
        for (sys, paper) in PAPER_TABLE4 {
            let p = col.map_or_else(
                || match (workload, sys) {
                    (WorkloadConfig::Twitter(_), "cornflakes-sg") => {
                        "hybrid 2.3–3.9% above (Twitter, §6.5.1)".to_owned()
                    }
                    _ => "–".to_owned(),
                },
                |c| format!("{:.1}", paper[c]),
            );
            let _ = writeln!(
                s,
                "| {sys} | {} | {} | {p} |",
                kilo(ours(sys)),
                ratio(hybrid, ours(sys))
            );
        }
    }
    if modes.contains(&"cornflakes-no-ssend") {
        let paper = match workload {
            WorkloadConfig::Google(_) => "727 vs 675 krps (Google 1-4 vals): 1.077",
            WorkloadConfig::Twitter(_) => "899 vs 814 krps (Twitter): 1.104",
            WorkloadConfig::Ycsb(_) => "18.9 vs 16.1 Gbps (YCSB 1024x4): 1.174",
            WorkloadConfig::Cdn(_) => "not measured",
        };
        let _ = writeln!(
            s,
            "\n### Table 5 form: with and without serialize-and-send (thousand req/s)\n\n| | with | without | with / without | paper (Table 5) |\n|---|---:|---:|---:|---|\n| this run | {} | {} | {} | {paper} |",
            kilo(hybrid),
            kilo(ours("cornflakes-no-ssend")),
            ratio(hybrid, ours("cornflakes-no-ssend")),
        );
    }
    let libs_best = ["protobuf", "capnp", "flatbuffers"]
        .iter()
        .filter_map(|m| ours(m).map(|r| (*m, r)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let (Some(h), Some((lib, r))) = (hybrid, libs_best) {
        let _ = writeln!(
            s,
            "\ncornflakes / best of protobuf, capnp, flatbuffers ({lib}): {:.2} (highest load within 95% of offered; the issue's targets: Twitter ≥ 1.15, CDN ≥ 2, Google 1 value ≥ 0.98)",
            h / r
        );
        if let Some(c) = ours("cornflakes-copy") {
            let (lo, hi) = emu_bench::PAPER_CONTROL;
            let _ = writeln!(
                s,
                "control: cornflakes-copy / best library ({lib}): {:.2} (the paper's copy-only ÷ protobuf: {lo:.2}–{hi:.2}){}",
                c / r,
                emu_bench::control_note(c / r, "cornflakes-copy")
            );
        }
        let _ = writeln!(s, "{}", equal_p99(recs, lib));
    }
    s + &loadgen::canary::notes(recs)
}

/// The paper's Figure 7 reading: cornflakes' throughput at the tail latency the best library
/// (`lib`) has at its highest load kept up, against that load. Coarse: it uses the loads the
/// run decided, not a dense latency-throughput curve.
fn equal_p99(recs: &[Record], lib: &str) -> String {
    let Some((lib_rps, bound)) = best(recs, lib).and_then(|b| Some((b.achieved_rps, b.p99_us?)))
    else {
        return format!("at equal p99: {lib} has no p99 at its highest load");
    };
    let mine: Vec<Record> = recs
        .iter()
        .filter(|r| r.mode == "cornflakes")
        .cloned()
        .collect();
    match max_kept_up_within_p99(&mine, DEFAULT_KEEP_UP, bound) {
        Some(c) => format!(
            "at equal p99 (≤ {bound:.0} µs, {lib}'s at its highest load; the paper's Figure 7 reading, over the loads this run decided): cornflakes {:.0} req/s (p99 {:.0} µs) / {lib} {lib_rps:.0} req/s = {:.2}",
            c.achieved_rps,
            c.p99_us.unwrap_or(f64::NAN),
            c.achieved_rps / lib_rps
        ),
        None => format!(
            "at equal p99 (≤ {bound:.0} µs, {lib}'s at its highest load): no load of cornflakes kept up within it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DATAPATH_LABEL;

    fn rec(mode: &str, offered: f64, achieved: f64) -> Record {
        Record {
            mode: mode.to_owned(),
            shape: "w".to_owned(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(10.0),
            p99_us: Some(20.0),
            p999_us: Some(30.0),
            mean_us: Some(11.0),
            sent: 10,
            received: 10,
            verified: 10,
            threads: 1,
            measured_s: 1.0,
            ..Record::default()
        }
    }

    /// A server whose request handling took `work_ns` a request (median) and whose core was
    /// busy `busy_ns` a request, of which `flush_ns` in flushes.
    fn server(work_ns: u64, busy_ns: u64, flush_ns: u64) -> ServerStats {
        let n = 1000;
        let (handler, receive) = (work_ns * n, (busy_ns - work_ns - flush_ns) * n);
        ServerStats::parse(&format!(
            "received={n} work_p50={work_ns}ns split_ns={receive}/{handler}/{}/0/100/{n}/0/0",
            flush_ns * n
        ))
    }

    #[test]
    fn the_bound_is_the_server_core_when_it_was_busy_whatever_its_handling_took() {
        // Kept up to 200 k req/s, missed at 300 k.
        let recs = vec![
            rec("cornflakes", 100_000.0, 100_000.0),
            rec("cornflakes", 200_000.0, 199_000.0),
            rec("cornflakes", 300_000.0, 210_000.0),
        ];
        // AF_XDP in copy mode: 800 ns handling, 4000 ns busy a request, most of it the flush
        // (the kernel copying each frame): 80 % of the core at 199 k.
        let afxdp = bound_note(&recs, Some(&server(800, 4000, 2700)));
        assert!(
            afxdp.contains(
                "the server core busy ~80% of the time (4000 ns busy a request over the sweep, \
                 flush+reap 68% of it)"
            ),
            "{afxdp}"
        );
        // An estimate past a whole core reads as the whole core.
        let whole = bound_note(&recs, Some(&server(800, 6000, 4000)));
        assert!(
            whole.contains("the server core busy all of the time (6000 ns"),
            "{whole}"
        );
        assert!(
            afxdp.ends_with("the server core bound it, mostly outside serialization"),
            "{afxdp}"
        );
        // A server busy a third of the time: the bound is outside it.
        let outside = bound_note(&recs, Some(&server(800, 1600, 300)));
        assert!(
            outside.ends_with("the kernel's path and the clients bound it, not serialization"),
            "{outside}"
        );
        // Handling itself took most of the core.
        let handling = bound_note(&recs, Some(&server(3000, 4000, 300)));
        assert!(handling.ends_with("the server core bound it"), "{handling}");
        assert!(
            handling.contains("request handling at ~60% of a core"),
            "{handling}"
        );
        // Without a time split (an older server's line): judged by the handling alone.
        let old = ServerStats::parse("received=1000 work_p50=800ns");
        assert!(bound_note(&recs, Some(&old))
            .ends_with("the kernel's path and the clients bound it, not serialization"),);
        // Every load kept up: the grid was the bound.
        assert!(bound_note(&recs[..2], None).starts_with("the offered-load list"));
    }

    #[test]
    fn tables_put_the_paper_beside_our_ratios() {
        let wl = WorkloadConfig::Google(kv_workloads::GoogleConfig {
            max_list_len: 4,
            ..Default::default()
        });
        let out = BenchOutcome {
            records: vec![
                rec("cornflakes", 1000.0, 1000.0),
                rec("cornflakes", 2000.0, 1000.0),
                rec("cornflakes-sg", 1000.0, 800.0),
                rec("cornflakes-copy", 1000.0, 1000.0),
                rec("cornflakes-no-ssend", 1000.0, 990.0),
                rec("protobuf", 800.0, 800.0),
            ],
            workload: "google 1-4".to_owned(),
            requests_per_unit: 1.0,
            datapath: DATAPATH_LABEL.to_owned(),
            ..Default::default()
        };
        let t = tables(&wl, &out);
        assert!(t.contains("Table 1 form"), "{t}");
        assert!(t.contains("| cornflakes | 1.0 | 727.2 |"), "{t}");
        assert!(t.contains("| cornflakes-sg | – | – | 717.2 |"), "{t}");
        assert!(
            t.contains("| cornflakes-copy | 1.0 | 1.00 | 693.2 |"),
            "{t}"
        );
        assert!(t.contains("| this run | 1.0 | 1.0 | 1.01 |"), "{t}");
        assert!(t.contains("saturated above 1000 req/s"), "{t}");
        assert!(t.contains(DATAPATH_LABEL));
        // The control beside the headline, with the paper's range.
        assert!(
            t.contains("control: cornflakes-copy / best library (protobuf): 1.25 (the paper's copy-only ÷ protobuf: 0.93–1.02); above the paper's range"),
            "{t}"
        );
        assert!(!t.contains("slowed"), "{t}");
        // A point whose speed canary read slow is marked, and the tables say why.
        let mut slowed = out;
        slowed.records[5].canary_ratio = Some(3.0);
        let t = tables(&wl, &slowed);
        assert!(t.contains("| protobuf | 800 (slowed) |"), "{t}");
        assert!(
            t.contains("1 point(s) ran on a machine slower than its fast state"),
            "{t}"
        );
        assert!(!t.contains("far apart"), "{t}");
        // A run whose pair reading was far above a socket's throughout: no point is slowed
        // against the run, and the tables still say the whole run was in the slow state.
        let mut far = slowed;
        far.records[5].canary_ratio = Some(1.0);
        for r in &mut far.records {
            r.canary_pair_ns = Some(317.0);
        }
        let t = tables(&wl, &far);
        assert!(!t.contains("slower than its fast state"), "{t}");
        assert!(
            t.contains("was 317 ns a round trip at the median point"),
            "{t}"
        );
    }

    #[test]
    fn the_equal_p99_reading_compares_at_the_best_librarys_tail() {
        let at = |mode: &str, offered: f64, achieved: f64, p99: f64| {
            let mut r = rec(mode, offered, achieved);
            r.p99_us = Some(p99);
            r
        };
        let wl = WorkloadConfig::default_for("twitter").unwrap();
        let mut out = BenchOutcome {
            records: vec![
                at("protobuf", 500.0, 500.0, 40.0),
                at("protobuf", 800.0, 790.0, 60.0),
                at("protobuf", 1000.0, 700.0, 900.0),
                at("flatbuffers", 600.0, 600.0, 30.0),
                at("cornflakes", 800.0, 800.0, 20.0),
                at("cornflakes", 1000.0, 1000.0, 50.0),
                at("cornflakes", 1200.0, 1190.0, 70.0),
            ],
            workload: "twitter".to_owned(),
            requests_per_unit: 1.0,
            ..Default::default()
        };
        // protobuf's best: 790 req/s at p99 60 µs; cornflakes' best within 60 µs: 1000.
        let t = tables(&wl, &out);
        assert!(
            t.contains("at equal p99 (≤ 60 µs, protobuf's") && t.contains("= 1.27"),
            "{t}"
        );
        // With every cornflakes load above the bound, it says so.
        for r in out.records.iter_mut().filter(|r| r.mode == "cornflakes") {
            r.p99_us = Some(500.0);
        }
        let t = tables(&wl, &out);
        assert!(t.contains("no load of cornflakes kept up within it"), "{t}");
    }

    #[test]
    fn cdn_tables_report_objects_per_second() {
        let wl = WorkloadConfig::default_for("cdn").unwrap();
        let out = BenchOutcome {
            records: vec![rec("cornflakes", 8000.0, 8000.0)],
            workload: "cdn".to_owned(),
            requests_per_unit: 4.0,
            ..Default::default()
        };
        let t = tables(&wl, &out);
        assert!(t.contains("| cornflakes | 8000 | 2000 |"), "{t}");
        assert!(t.contains("| cornflakes | 2.0 | 366.5 |"), "{t}");
    }

    #[test]
    fn loads_are_sorted_and_unique() {
        let mut cfg = BenchConfig::default();
        cfg.load.rates = vec![30.0, 10.0, 30.0, -1.0, f64::NAN];
        assert_eq!(cfg.loads(), vec![10.0, 30.0]);
    }
}
