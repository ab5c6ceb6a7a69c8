//! `kv-peers`: redis-server and memcached, loaded with the KV workloads and driven open-loop over
//! kernel TCP, reported in the same records and table shape as `kv bench`.

#![forbid(unsafe_code)]

use cli_args::Args;
use kv_peers::bench::{run_bench, table, BenchConfig};
use kv_peers::server::Peer;
use kv_workloads::{GoogleConfig, WorkloadConfig, YcsbAccess, YcsbConfig};
use loadgen::args::LoadFlags;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: kv-peers [--peers redis,memcached] [--workload ycsb|google|twitter|cdn]
                [--shape NxSIZE] [--access getm|getlist] [--keys N]       (ycsb)
                [--list-lens MIN-MAX] [--prototype-lists] [--keys N]      (google)
                [--trace PATH] [--keys N]                                 (twitter)
                [--total-mb N] [--max-object N]                           (cdn)
                [--rates R,R,..] [--duration SECS] [--warmup SECS] [--timeout-ms MS]
                [--requests N] [--threads N] [--connections N] [--seed N] [--all-points]
                [--memcached-threads N] [--memcached-mb N] [--out DIR] [--json PATH] [--quiet]

Starts each peer (redis-server, memcached; from PATH) on 127.0.0.1 at a free port, loads it
with the workload's initial contents, sweeps the offered loads (units/s: requests, or objects
for cdn) with Poisson arrivals over --threads client threads x --connections TCP connections
(pipelined), verifies every reply, and stops the server. Writes DIR/peers-WORKLOAD.json
(loadgen records, as `kv bench`), DIR/peers-WORKLOAD.svg/.png (p99 vs throughput) and
DIR/peers-WORKLOAD.md (tables); DIR defaults to results/kv-peers. These are different systems
from the Cornflakes KV store: their own servers, over kernel TCP.
";

fn workload(a: &mut Args) -> Result<WorkloadConfig, String> {
    let name = a.take("--workload")?.unwrap_or_else(|| "ycsb".to_owned());
    let mut w = WorkloadConfig::default_for(&name).map_err(|e| e.to_string())?;
    let keys: Option<u64> = a.parse("--keys")?;
    match &mut w {
        WorkloadConfig::Ycsb(c) => {
            let access = match a.take("--access")?.as_deref() {
                None | Some("getm") => YcsbAccess::GetM,
                Some("getlist") => YcsbAccess::GetList,
                Some(o) => return Err(format!("--access {o:?}: expected getm or getlist")),
            };
            if let Some(shape) = a.take("--shape")? {
                *c = YcsbConfig::with_shape(&shape, access).map_err(|e| e.to_string())?;
            }
            c.access = access;
            if let Some(k) = keys {
                c.keys = k;
            }
        }
        WorkloadConfig::Google(c) => {
            if a.take("--lists")?.is_some() {
                return Err("--lists is now --list-lens, as in `kv bench`".to_owned());
            }
            if let Some(l) = a.take("--list-lens")? {
                *c = GoogleConfig::with_list_lens(&l).map_err(|e| format!("--list-lens {e}"))?;
            }
            c.prototype_exclusive_max = a.switch("--prototype-lists");
            if let Some(k) = keys {
                c.keys = k;
            }
        }
        WorkloadConfig::Twitter(c) => {
            c.trace = a.take("--trace")?.map(PathBuf::from);
            if let Some(k) = keys {
                c.keys = k;
            }
        }
        WorkloadConfig::Cdn(c) => {
            if let Some(mb) = a.parse::<u64>("--total-mb")? {
                c.total_bytes = mb << 20;
            }
            if let Some(m) = a.parse::<u64>("--max-object")? {
                c.max_object = m;
            }
        }
    }
    Ok(w)
}

/// A file-name-safe form of a workload name: `ycsb-c 2x2048 getm` → `ycsb-c-2x2048-getm`.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// The load flags ([`loadgen::args::LoadFlags`]) kv-peers honours: not `--mtu` (kernel TCP)
/// nor `--spin` (its clients block on their connections).
const LOAD_FLAGS: &[&str] = &[
    "--rates",
    "--duration",
    "--warmup",
    "--timeout-ms",
    "--threads",
    "--out",
];

/// What the command line asks for: the run, the output directory and the JSON path.
#[derive(Debug)]
struct Cli {
    cfg: BenchConfig,
    out: PathBuf,
    json: Option<PathBuf>,
}

/// Reads the command line (all but `--help`); refuses what is left, with the usage.
fn parse(mut a: Args) -> Result<Cli, String> {
    let mut cfg = BenchConfig {
        workload: workload(&mut a)?,
        ..BenchConfig::default()
    };
    if let Some(p) = a.list::<Peer>("--peers")? {
        cfg.peers = p;
    }
    let load = LoadFlags::from_args(&mut a)?.only("kv-peers", LOAD_FLAGS)?;
    if let Some(r) = load.rates {
        cfg.loads = r;
    }
    if let Some(d) = load.duration {
        cfg.duration = d;
    }
    if let Some(d) = load.warmup {
        cfg.warmup = d;
    }
    if let Some(t) = load.timeout {
        cfg.timeout = t;
    }
    if let Some(n) = load.threads {
        cfg.threads = n;
    }
    if let Some(n) = a.parse("--requests")? {
        cfg.requests = n;
    }
    if let Some(n) = a.parse("--connections")? {
        cfg.connections = n;
    }
    if let Some(n) = a.parse("--seed")? {
        cfg.seed = n;
    }
    if a.switch("--all-points") {
        cfg.stop_after_misses = 0;
    }
    if let Some(n) = a.parse("--memcached-threads")? {
        cfg.server.memcached_threads = n;
    }
    if let Some(n) = a.parse("--memcached-mb")? {
        cfg.server.memory_mib = n;
    }
    cfg.progress = !a.switch("--quiet");
    let out = load
        .out
        .unwrap_or_else(|| PathBuf::from("results/kv-peers"));
    let json = a.take("--json")?.map(PathBuf::from);
    if let Err(e) = a.finish() {
        return Err(format!("{e}\n\n{USAGE}"));
    }
    if cfg.connections == 0 || cfg.requests == 0 || cfg.loads.is_empty() {
        return Err("--connections and --requests must be >= 1, --rates non-empty".into());
    }
    Ok(Cli { cfg, out, json })
}

fn main_inner() -> Result<(), String> {
    let mut a = Args::new(std::env::args().skip(1).collect());
    if a.switch("--help") || a.switch("-h") {
        print!("{USAGE}");
        return Ok(());
    }
    let Cli { cfg, out, json } = parse(a)?;

    let (stats, results) = run_bench(&cfg)?;
    let name = cfg.workload.build().map_err(|e| e.to_string())?.name();
    let file = format!("peers-{}", slug(&name));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let records: Vec<loadgen::Record> = results.iter().flat_map(|r| r.records.clone()).collect();
    let json = json.unwrap_or_else(|| out.join(format!("{file}.json")));
    loadgen::write_json(&json, &records).map_err(|e| format!("{}: {e}", json.display()))?;
    let md = table(&name, &stats, &results);
    let md_path = out.join(format!("{file}.md"));
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let (svg, png) = (
        out.join(format!("{file}.svg")),
        out.join(format!("{file}.png")),
    );
    let title = format!("peers (TCP): {name}");
    if let Err(e) = loadgen::plot_p99_curves(&records, &title, &svg, &png) {
        eprintln!("[kv-peers] no plot: {e}");
    }
    print!("{md}");
    eprintln!(
        "[kv-peers] wrote {}, {}, {} and {}",
        json.display(),
        md_path.display(),
        svg.display(),
        png.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kv-peers: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn google(args: &[&str]) -> Result<GoogleConfig, String> {
        let mut a = Args::new(args.iter().map(|s| s.to_string()).collect());
        let w = workload(&mut a)?;
        a.finish()?;
        match w {
            WorkloadConfig::Google(c) => Ok(c),
            other => panic!("not google: {other:?}"),
        }
    }

    /// The whole configuration a command line gives, as its `Debug` text (every field).
    fn cli(line: &str) -> Result<String, String> {
        parse(Args::from_line(line)).map(|c| format!("{c:?}"))
    }

    #[test]
    fn a_full_command_line_sets_every_field() {
        let got = cli(
            "--peers memcached --workload ycsb --shape 2x2048 --access getlist --keys 1000 \
             --rates 100,200 --duration 1.5 --warmup 0.25 --timeout-ms 40 --requests 5000 \
             --threads 2 --connections 3 --seed 7 --all-points --memcached-threads 2 \
             --memcached-mb 128 --out o --json j.json --quiet",
        )
        .unwrap();
        let mut cfg = BenchConfig {
            peers: vec![Peer::Memcached],
            workload: WorkloadConfig::Ycsb(YcsbConfig {
                keys: 1000,
                ..YcsbConfig::with_shape("2x2048", YcsbAccess::GetList).unwrap()
            }),
            requests: 5000,
            seed: 7,
            loads: vec![100.0, 200.0],
            duration: Duration::from_millis(1500),
            warmup: Duration::from_millis(250),
            timeout: Duration::from_millis(40),
            threads: 2,
            connections: 3,
            stop_after_misses: 0,
            progress: false,
            ..BenchConfig::default()
        };
        cfg.server.memcached_threads = 2;
        cfg.server.memory_mib = 128;
        let want = Cli {
            cfg,
            out: PathBuf::from("o"),
            json: Some(PathBuf::from("j.json")),
        };
        assert_eq!(got, format!("{want:?}"));
        // Nothing given: the defaults.
        let want = Cli {
            cfg: BenchConfig::default(),
            out: PathBuf::from("results/kv-peers"),
            json: None,
        };
        assert_eq!(cli("").unwrap(), format!("{want:?}"));
    }

    #[test]
    fn an_unknown_flag_is_refused_with_the_usage() {
        let e = cli("--rates 100 --bogus 1").unwrap_err();
        assert!(
            e.starts_with("unexpected argument \"--bogus\"") && e.ends_with(USAGE),
            "{e}"
        );
        assert!(cli("--rates")
            .unwrap_err()
            .contains("--rates needs a value"));
    }

    #[test]
    fn list_lens_takes_a_range_or_one_length_as_kv_bench_does() {
        let c = google(&["--workload", "google", "--list-lens", "1-8"]).unwrap();
        assert_eq!((c.min_list_len, c.max_list_len), (1, 8));
        let c = google(&["--workload", "google", "--list-lens", "4", "--keys", "10"]).unwrap();
        assert_eq!((c.min_list_len, c.max_list_len, c.keys), (4, 4, 10));
        let d = GoogleConfig::default();
        let c = google(&["--workload", "google"]).unwrap();
        assert_eq!(
            (c.min_list_len, c.max_list_len),
            (d.min_list_len, d.max_list_len)
        );
        let e = google(&["--workload", "google", "--list-lens", "1-x"]).unwrap_err();
        assert!(
            e.contains("--list-lens \"1-x\"") && e.contains("MIN-MAX"),
            "{e}"
        );
        let e = google(&["--workload", "google", "--lists", "1-8"]).unwrap_err();
        assert!(e.contains("--list-lens"), "{e}");
    }
}
