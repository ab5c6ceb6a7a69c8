//! An echo benchmark's outputs: JSON, the charts and the tables.

use loadgen::fmt_us;
use std::fmt::Write as _;

use loadgen::{max_kept_up, save_bench_records, Record, DEFAULT_KEEP_UP};

pub use crate::config::{BenchConfig, BenchOutcome, DatapathKind, DEFAULT_MTU, DEFAULT_RATES};
use crate::mode::{Mode, Serialization};
use crate::server::ServerStats;

/// Writes `echo.json` (the load generator's records), `servers.json` (each mode's server
/// counters, handling time and time split), the charts (`echo.svg`/`echo.png`: the highest
/// load each mode kept up; `echo-latency.svg`/`.png`: latency against offered load) and
/// `table.md`. On the emulated NIC also `emu-summary.json`, `emu-points.json`, `ratios.json`,
/// and the terminal shows the compact table and the ratios first (the full tables are in
/// `table.md`); elsewhere the table itself.
pub(crate) fn write_outputs(cfg: &BenchConfig, out: &BenchOutcome) -> Result<(), String> {
    save_bench_records(&cfg.load.out_dir, &cfg.json_path(), &out.records)?;
    let servers_path = cfg.load.out_dir.join("servers.json");
    let servers: Vec<serde_json::Value> = out
        .servers
        .iter()
        .map(|(m, st)| {
            serde_json::json!({
                "mode": m.name(),
                "datapath": cfg.datapath_label(),
                "received": st.received,
                "echoed": st.replied,
                "malformed": st.malformed,
                "send_failed": st.send_failed,
                "io_errors": st.io_errors,
                "datapath_drops": st.datapath.total_drops(),
                "work_p50_ns": st.work_p50_ns(),
                // The AF_XDP server (a child process) reports only its median.
                "work_p99_ns": (cfg.datapath != DatapathKind::Xdp)
                    .then(|| st.work.p99_us().map(|us| us * 1000.0))
                    .flatten(),
                "server_time": emu_bench::split_json(&st.time),
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&servers).map_err(|e| e.to_string())?;
    std::fs::write(&servers_path, text)
        .map_err(|e| format!("writing {}: {e}", servers_path.display()))?;
    let table_path = cfg.load.out_dir.join("table.md");
    let printed = if let Some(emu) = &out.emu {
        let floors = crate::emu::floors(cfg.shape);
        let texts = emu_bench::write_emu_outputs(
            &cfg.load.out_dir,
            emu,
            &emu_bench::EmuReportSpec {
                roles: crate::emu::roles(),
                floors: &floors,
                heading: format!(
                    "## echo bench: {}\n\nDatapath: {} (the server core's throughput, not a \
                     network measurement); each mode's saturation load searched \
                     (docs/performance.md, \"Method\").\n\n",
                    cfg.shape,
                    cfg.datapath_label()
                ),
                details: format!(
                    "The search's full tables (the spread, p99, device busy, line rate, reruns \
                     and checks of every mode): {}.",
                    table_path.display()
                ),
            },
        )?;
        std::fs::write(&table_path, &texts.detail_tables)
            .map_err(|e| format!("writing {}: {e}", table_path.display()))?;
        texts.printed
    } else {
        let mut t = table(&out.records, cfg.fixed_rps, &out.servers);
        // Which clients drove the AF_XDP server (an AF_XDP core or kernel sockets).
        if cfg.datapath == DatapathKind::Xdp {
            t = format!("Datapath: {}.\n\n{t}", cfg.datapath_label());
        }
        std::fs::write(&table_path, &t)
            .map_err(|e| format!("writing {}: {e}", table_path.display()))?;
        t
    };
    print!("{printed}");
    emu_bench::write_charts(
        &cfg.load.out_dir,
        "echo",
        &format!("echo {}, {}", cfg.shape, cfg.datapath_label()),
        &out.records,
        out.emu.as_ref(),
        &crate::emu::roles(),
    );
    Ok(())
}

/// The comparison table (Markdown): per mode, the highest achieved load within 95 % of
/// offered, its ratio to `raw`, p50/p99 at the fixed load, the server's handling time per
/// message (no system calls), and anything that went wrong.
pub fn table(records: &[Record], fixed_rps: f64, servers: &[(Mode, ServerStats)]) -> String {
    let mut modes: Vec<&str> = Vec::new();
    for r in records {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let best = |m: &str| {
        let rs: Vec<Record> = records.iter().filter(|r| r.mode == m).cloned().collect();
        max_kept_up(&rs, DEFAULT_KEEP_UP).cloned()
    };
    let raw = best("raw").map(|r| r.achieved_rps);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| mode | max req/s within 95% of offered | vs raw | p99 there (µs) | p50 @ {:.0} req/s (µs) | p99 @ {:.0} req/s (µs) | server work p50 (ns) | server busy per request, ns (busiest part) | mismatched | lost | server malformed |",
        fixed_rps, fixed_rps
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in modes {
        let b = best(m);
        let fixed = records
            .iter()
            .find(|r| r.mode == m && (r.offered_rps - fixed_rps).abs() < 0.5);
        let mismatched: u64 = records
            .iter()
            .filter(|r| r.mode == m)
            .map(|r| r.mismatched)
            .sum();
        let lost: u64 = records.iter().filter(|r| r.mode == m).map(|r| r.lost).sum();
        let server = servers
            .iter()
            .find(|(sm, _)| sm.name() == m)
            .map(|(_, st)| st);
        let malformed = server.map_or_else(|| "–".to_owned(), |st| st.malformed.to_string());
        let work = server
            .and_then(|st| st.work_p50_ns())
            .map_or_else(|| "–".to_owned(), |w| format!("{w:.0}"));
        let busy = server.map_or_else(|| "–".to_owned(), |st| st.time.busy_cell());
        let ratio = match (&b, raw) {
            (Some(b), Some(raw)) if raw > 0.0 => format!("{:.2}", b.achieved_rps / raw),
            _ => "–".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {m} | {} | {ratio} | {} | {} | {} | {work} | {busy} | {mismatched} | {lost} | {malformed} |",
            b.as_ref().map_or_else(
                || "none kept up".to_owned(),
                |b| format!(
                    "{:.0}{}",
                    b.achieved_rps,
                    if b.slowed() { " (slowed)" } else { "" }
                )
            ),
            fmt_us(b.as_ref().and_then(|b| b.p99_us)),
            fmt_us(fixed.and_then(|r| r.p50_us)),
            fmt_us(fixed.and_then(|r| r.p99_us)),
        );
    }
    // The headline and its control: the hybrid and Cornflakes copying every field (as a
    // library does) over the best library, with the paper's copy-only ÷ protobuf.
    let rps = |m: Mode| best(m.name()).map(|r| r.achieved_rps);
    let lib = [
        Mode::Shared(Serialization::PROTOBUF),
        Mode::Shared(Serialization::CAPNP),
        Mode::Shared(Serialization::FLATBUFFERS),
    ]
    .into_iter()
    .filter_map(|m| rps(m).map(|r| (m, r)))
    .max_by(|a, b| a.1.total_cmp(&b.1));
    if let (Some((lib, l)), Some(h), Some(c)) = (
        lib,
        rps(Mode::Shared(Serialization::CORNFLAKES)),
        rps(Mode::Shared(Serialization::CORNFLAKES_COPY)),
    ) {
        let (lo, hi) = emu_bench::PAPER_CONTROL;
        let _ = writeln!(
            s,
            "\nHeadline: cornflakes ÷ best library ({lib}) = {:.2}. Control: cornflakes-copy ÷ best \
             library = {:.2} (the paper's copy-only ÷ protobuf: {lo:.2}–{hi:.2}).",
            h / l,
            c / l
        );
    }
    s + &loadgen::canary::notes(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(mode: &str, offered: f64, achieved: f64, p50: f64, p99: f64) -> Record {
        Record {
            mode: mode.to_owned(),
            shape: "list-2x2048".to_owned(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(p50),
            p99_us: Some(p99),
            p999_us: Some(p99),
            mean_us: Some(p50),
            sent: 10,
            received: 10,
            verified: 10,
            lost: 1,
            errors: 1,
            threads: 1,
            measured_s: 1.0,
            ..Record::default()
        }
    }

    #[test]
    fn loads_are_sorted_unique_and_include_the_fixed_load() {
        let mut cfg = BenchConfig {
            fixed_rps: 5.0,
            ..BenchConfig::default()
        };
        cfg.load.rates = vec![30.0, 10.0, 30.0, -1.0, f64::NAN];
        assert_eq!(cfg.loads(), vec![5.0, 10.0, 30.0]);
    }

    #[test]
    fn table_reports_best_kept_up_point_ratio_and_fixed_load() {
        let records = vec![
            rec("raw", 10.0, 10.0, 5.0, 9.0),
            rec("raw", 20.0, 19.5, 6.0, 12.0),
            rec("raw", 40.0, 20.0, 7.0, 900.0),
            rec("cornflakes", 10.0, 10.0, 4.0, 8.0),
            rec("cornflakes", 20.0, 10.0, 50.0, 700.0),
        ];
        let t = table(&records, 10.0, &[]);
        let raw = t.lines().find(|l| l.starts_with("| raw ")).unwrap();
        // Best kept-up raw point is 19.5 (40 offered / 20 achieved did not keep up).
        assert!(
            raw.starts_with("| raw | 20 | 1.00 | 12.0 | 5.0 | 9.0 |"),
            "{raw}"
        );
        let cf = t.lines().find(|l| l.starts_with("| cornflakes ")).unwrap();
        assert!(
            cf.starts_with("| cornflakes | 10 | 0.51 | 8.0 | 4.0 | 8.0 |"),
            "{cf}"
        );
        assert!(cf.ends_with("| – | 0 | 2 | – |"), "{cf}");
        assert!(!t.contains("Control:"), "no libraries measured: no control");
        assert!(!t.contains("slowed"), "{t}");
        // A point whose speed canary read slow is marked, and the table says why.
        let mut slowed = records.clone();
        slowed[1].canary_ratio = Some(2.0);
        let t = table(&slowed, 10.0, &[]);
        let raw = t.lines().find(|l| l.starts_with("| raw ")).unwrap();
        assert!(raw.starts_with("| raw | 20 (slowed) | 1.00 |"), "{raw}");
        assert!(
            t.contains("1 point(s) ran on a machine slower than its fast state"),
            "{t}"
        );
        // Far apart throughout: nothing slowed against the run, the table still says it.
        let mut far = records.clone();
        for r in &mut far {
            r.canary_pair_ns = Some(330.0);
        }
        let t = table(&far, 10.0, &[]);
        assert!(!t.contains("slower than its fast state"), "{t}");
        assert!(
            t.contains("was 330 ns a round trip at the median point"),
            "{t}"
        );
        let mut with_libs = records.clone();
        with_libs.push(rec("cornflakes-copy", 10.0, 10.0, 4.0, 8.0));
        with_libs.push(rec("protobuf", 8.0, 8.0, 4.0, 8.0));
        with_libs.push(rec("capnp", 5.0, 5.0, 4.0, 8.0));
        let t = table(&with_libs, 10.0, &[]);
        assert!(
            t.contains("Headline: cornflakes ÷ best library (protobuf) = 1.25. Control: cornflakes-copy ÷ best library = 1.25 (the paper's copy-only ÷ protobuf: 0.93–1.02)."),
            "{t}"
        );
    }
}
