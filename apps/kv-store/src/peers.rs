//! `kv bench --datapath socket --peers redis,memcached`: after the KV store's sweeps, the same
//! workload against what a KV user would run instead (crates/kv-peers: redis-server and
//! memcached, their own servers over kernel TCP), on the same machine with the same requests,
//! offered loads and point lengths, reported beside ours and labelled as different systems.

use loadgen::fmt_us;
use std::fmt::Write as _;

use kv_peers::bench::{mode_label, run_bench, table, BenchConfig as PeersConfig, PeerResult};
use kv_peers::server::Peer;
use kv_workloads::WorkloadConfig;
use loadgen::{summarize, Record, DEFAULT_KEEP_UP};

use crate::config::{BenchConfig, BenchOutcome, DatapathKind};

/// The peers' configuration for a `kv bench` configuration: same workload, requests, seed,
/// point lengths, timeout and client threads; the offered loads in the peers' unit (a CDN
/// object is one unit for them, `requests_per_unit` requests for us).
pub fn peers_config(cfg: &BenchConfig, peers: &[Peer], requests_per_unit: f64) -> PeersConfig {
    let per_unit = if matches!(cfg.workload, WorkloadConfig::Cdn(_)) {
        requests_per_unit.max(1.0)
    } else {
        1.0
    };
    PeersConfig {
        peers: peers.to_vec(),
        workload: cfg.workload.clone(),
        requests: cfg.requests,
        seed: cfg.seed,
        loads: cfg.loads().iter().map(|r| r / per_unit).collect(),
        duration: cfg.load.duration,
        warmup: cfg.load.warmup,
        timeout: cfg.load.timeout,
        threads: cfg.load.threads,
        stop_after_misses: cfg.stop_after_misses,
        ..PeersConfig::default()
    }
}

/// Runs the peers after `kv`'s sweeps (the outcome of `cfg`) and writes `DIR/peers.json`
/// (their records) and `DIR/peers.md` (the side-by-side table, then every peer point); the
/// side-by-side table is also appended to `DIR/tables.md` and returned.
pub fn run_beside(cfg: &BenchConfig, peers: &[Peer], kv: &BenchOutcome) -> Result<String, String> {
    if cfg.datapath != DatapathKind::Socket {
        return Err(
            "--peers compares with the peers over kernel TCP on this machine: use it with --datapath socket"
                .to_owned(),
        );
    }
    let pc = peers_config(cfg, peers, kv.requests_per_unit);
    eprintln!(
        "[bench] peers beside the KV store (different systems, kernel TCP): {}",
        peers
            .iter()
            .map(|p| format!("{p:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (stats, results) = run_bench(&pc)?;
    let records: Vec<Record> = results.iter().flat_map(|r| r.records.clone()).collect();
    let json = cfg.load.out_dir.join("peers.json");
    loadgen::write_json(&json, &records).map_err(|e| format!("writing {}: {e}", json.display()))?;
    let beside = beside_table(cfg, kv, &results);
    let md = format!("{beside}\n{}", table(&kv.workload, &stats, &results));
    let md_path = cfg.load.out_dir.join("peers.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    let tables = cfg.load.out_dir.join("tables.md");
    let mut all = std::fs::read_to_string(&tables).unwrap_or_default();
    all.push('\n');
    all.push_str(&beside);
    std::fs::write(&tables, all).map_err(|e| format!("writing {}: {e}", tables.display()))?;
    print!("\n{beside}");
    eprintln!(
        "[bench] wrote {} and {} (and the table into {})",
        json.display(),
        md_path.display(),
        tables.display()
    );
    Ok(beside)
}

/// The side-by-side table: each serialization of our KV store on the socket datapath, then
/// each peer, every row saying what system and transport it is.
pub fn beside_table(cfg: &BenchConfig, kv: &BenchOutcome, peers: &[PeerResult]) -> String {
    let cdn = matches!(cfg.workload, WorkloadConfig::Cdn(_));
    let (unit, per_unit) = if cdn {
        ("objects/s", kv.requests_per_unit.max(1.0))
    } else {
        ("req/s", 1.0)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### Beside other systems: `{}`, same machine, same requests and offered loads\n",
        kv.workload
    );
    let _ = writeln!(
        s,
        "The peers are **different systems**: their own servers and wire protocols over kernel TCP \
         (pipelined, {} connection(s) per client thread), not the Cornflakes KV store. Ours runs on \
         {}. Both share this machine's cores with their clients.\n",
        PeersConfig::default().connections,
        kv.datapath
    );
    let _ = writeln!(
        s,
        "| system | transport | max {unit} within 95% of offered | p50 there (µs) | p99 there (µs) | p99.9 there (µs) | mismatched | lost |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
    let mut row = |name: String, transport: &str, recs: &[Record], scale: f64| {
        let best = summarize(recs, DEFAULT_KEEP_UP)
            .first()
            .and_then(|m| m.best.clone());
        let (mis, lost) = recs
            .iter()
            .fold((0u64, 0u64), |a, x| (a.0 + x.mismatched, a.1 + x.lost));
        let (tput, p50, p99, p999) = match best {
            Some(b) => (
                format!("{:.0}", b.achieved_rps / scale),
                fmt_us(b.p50_us),
                fmt_us(b.p99_us),
                fmt_us(b.p999_us),
            ),
            None => (
                "no point kept up".to_owned(),
                "–".into(),
                "–".into(),
                "–".into(),
            ),
        };
        let _ = writeln!(
            s,
            "| {name} | {transport} | {tput} | {p50} | {p99} | {p999} | {mis} | {lost} |"
        );
    };
    for ser in &cfg.serializations {
        let recs: Vec<Record> = kv
            .records
            .iter()
            .filter(|r| r.mode == ser.name())
            .cloned()
            .collect();
        row(
            format!("Cornflakes KV store, {ser}"),
            "UDP, kernel sockets (datapath-socket)",
            &recs,
            per_unit,
        );
    }
    for p in peers {
        row(
            format!("{} — a different system", mode_label(p.peer, &p.version)),
            "TCP, kernel",
            &p.records,
            1.0,
        );
    }
    if cdn {
        let _ = writeln!(
            s,
            "\nCDN: our rows are requests/s divided by {per_unit:.2} requests per object; a peer fetches an object's pieces pipelined on one connection."
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_workloads::CdnConfig;

    #[test]
    fn the_peers_run_the_same_workload_and_loads_in_their_unit() {
        let mut cfg = BenchConfig {
            requests: 123,
            seed: 9,
            ..BenchConfig::default()
        };
        cfg.load.rates = vec![2000.0, 1000.0];
        cfg.load.threads = 2;
        let pc = peers_config(&cfg, &[Peer::Redis], 4.0);
        assert_eq!(pc.workload, cfg.workload);
        assert_eq!(pc.loads, vec![1000.0, 2000.0]);
        assert_eq!((pc.requests, pc.seed, pc.threads), (123, 9, 2));
        assert_eq!(
            (pc.duration, pc.warmup),
            (cfg.load.duration, cfg.load.warmup)
        );
        let cdn = BenchConfig {
            workload: WorkloadConfig::Cdn(CdnConfig::default()),
            ..cfg
        };
        assert_eq!(peers_config(&cdn, &[], 4.0).loads, vec![250.0, 500.0]);
    }

    #[test]
    fn the_table_labels_every_peer_as_a_different_system() {
        let cfg = BenchConfig::default();
        let rec = |mode: &str, rps: f64| Record {
            mode: mode.to_owned(),
            shape: "ycsb-c".to_owned(),
            offered_rps: rps,
            achieved_rps: rps,
            p50_us: Some(20.0),
            p99_us: Some(50.0),
            p999_us: Some(80.0),
            mean_us: Some(25.0),
            sent: 100,
            received: 100,
            verified: 100,
            threads: 1,
            measured_s: 0.1,
            ..Record::default()
        };
        let kv = BenchOutcome {
            records: vec![rec("cornflakes", 1000.0)],
            workload: "ycsb-c".to_owned(),
            datapath: crate::config::DATAPATH_LABEL.to_owned(),
            requests_per_unit: 1.0,
            ..BenchOutcome::default()
        };
        let peers = vec![PeerResult {
            peer: Peer::Redis,
            version: "7.0.15".to_owned(),
            loaded: Default::default(),
            records: vec![rec("redis", 800.0)],
        }];
        let t = beside_table(&cfg, &kv, &peers);
        assert!(
            t.contains("| Cornflakes KV store, cornflakes | UDP, kernel sockets"),
            "{t}"
        );
        assert!(t.contains("| 1000 |"), "{t}");
        assert!(
            t.contains(
                "| redis-server 7.0.15 (TCP, RESP) — a different system | TCP, kernel | 800 |"
            ),
            "{t}"
        );
        assert!(t.contains("**different systems**"), "{t}");
        // A serialization that was not run says so instead of a number.
        assert!(t.contains("| Cornflakes KV store, resp | UDP, kernel sockets (datapath-socket) | no point kept up |"), "{t}");
    }
}
