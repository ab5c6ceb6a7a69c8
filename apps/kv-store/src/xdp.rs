//! The KV store over AF_XDP (feature `xdp`, needs root): `kv server --datapath xdp` and
//! `kv bench --datapath xdp`.
//!
//! As `echo bench --datapath xdp`: the server's XDP datapath runs on one end of a veth pair in
//! a network namespace, and one AF_XDP client core drives it from the other end, here (or, with
//! `--client-datapath socket`, client threads on kernel UDP sockets). This crate has no
//! `unsafe`, so it cannot move a thread into the namespace; each server is a child process
//! (`kv server --datapath xdp`) under `ip netns exec`. The namespace, the pair and the child
//! are netns-harness's ([`HostVeth`], [`ChildServer`]), shared with echo.
//!
//! One XDP program holds an interface, so the serializations run one after another (each
//! server loads the workload, then takes its whole sweep), not interleaved as on sockets.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use kv_workloads::WorkloadConfig;
use loadgen::ModePoints;
use netns_harness::{ChildServer, HostVeth, Suite};

use crate::client::Checker;
use crate::config::{BenchConfig, BenchOutcome, Prepared, XDP_LABEL, XDP_SOCKET_CLIENTS_LABEL};
use crate::server::ServerStats;
use crate::sweep::{sweep_one, Lane};

/// The line a server prints once its datapath is up (`app_server::launch`).
pub const READY: &str = "[server] ready";

/// The port of the benchmark's AF_XDP client core on this side's end of the veth.
pub const CLIENT_PORT: u16 = 9000;

/// Names of the benchmark's namespace and interfaces (`cfkv-…`, `ckv…s` / `ckv…c`); its subnet
/// is leased from `netns_harness::subnet`, unique among all suites running.
pub const SUITE: Suite = Suite::new("cfkv", "ckv", "CORNFLAKES_REQUIRE_XDP");

/// The counters a child server printed last (`[server] received=… work_p50=…ns`); the
/// histogram crosses the process boundary as one sample, its median.
pub fn parse_stats(lines: &[String]) -> ServerStats {
    match lines
        .iter()
        .rev()
        .find(|l| l.starts_with("[server] received="))
    {
        Some(last) => parse_counters(last.trim_start_matches("[server] ")),
        None => ServerStats::default(),
    }
}

/// Each core's final counters from a `--cores N` child's lines (`[server] core i: …`), by
/// core index (empty for a single-core server).
pub fn parse_core_stats(lines: &[String]) -> Vec<ServerStats> {
    percore::core_lines(lines, "[server]")
        .into_iter()
        .map(parse_counters)
        .collect()
}

/// `received=… replied=… …` (the [`ServerStats`] display) back into counters.
fn parse_counters(line: &str) -> ServerStats {
    ServerStats::parse(line)
}

/// A `kv server --datapath xdp` child in `ns` on `port` for `ser`, loaded with the bench's
/// workload.
pub fn spawn_server(
    ns: &HostVeth,
    cfg: &BenchConfig,
    ser: crate::Serialization,
    port: u16,
) -> Result<ChildServer, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let mut args: Vec<String> = [
        "server",
        "--serialization",
        ser.name(),
        "--threshold",
        &cfg.threshold.to_string(),
        "--memory-limit",
        &cfg.memory_limit.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(workload_args(&cfg.workload)?);
    // Loading a large workload takes a while; the child prints READY only after it.
    ChildServer::spawn(ns, &exe, &args, port, READY, Duration::from_secs(300))
}

/// The `kv server` options that load `w` (the inverse of the command line's workload options;
/// every knob the command line sets is carried).
pub fn workload_args(w: &WorkloadConfig) -> Result<Vec<String>, String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |k: &str, v: String| {
        a.push(k.to_owned());
        a.push(v);
    };
    match w {
        WorkloadConfig::Ycsb(c) => {
            push("--workload", "ycsb".into());
            push("--keys", c.keys.to_string());
            push(
                "--shape",
                format!("{}x{}", c.values_per_request, c.value_size),
            );
            let access = match c.access {
                kv_workloads::YcsbAccess::GetM => "getm",
                kv_workloads::YcsbAccess::GetList => "getlist",
            };
            push("--access", access.into());
        }
        WorkloadConfig::Google(c) => {
            push("--workload", "google".into());
            push("--keys", c.keys.to_string());
            push(
                "--list-lens",
                format!("{}-{}", c.min_list_len, c.max_list_len),
            );
            if !c.resample_over_frame {
                a.push("--no-resample".into());
            }
        }
        WorkloadConfig::Twitter(c) => {
            push("--workload", "twitter".into());
            push("--keys", c.keys.to_string());
            if let Some(t) = &c.trace {
                push("--trace", t.display().to_string());
            }
        }
        WorkloadConfig::Cdn(c) => {
            if c.total_bytes % (1 << 20) != 0 {
                return Err(format!(
                    "a CDN total of {} B cannot be passed as --total-mb",
                    c.total_bytes
                ));
            }
            push("--workload", "cdn".into());
            push("--total-mb", (c.total_bytes >> 20).to_string());
            push("--piece-size", c.piece_size.to_string());
        }
    }
    Ok(a)
}

/// `kv bench --datapath xdp`: one namespace, then per serialization a loaded server process
/// and its sweep from here, by an AF_XDP client core on this side's end of the veth
/// ([`BenchConfig::client_datapath`]) or kernel-socket client threads.
pub(crate) fn run_xdp(
    cfg: &BenchConfig,
    loads: &[f64],
    prep: Prepared,
) -> Result<BenchOutcome, String> {
    let mtu =
        u32::try_from(cfg.load.mtu).map_err(|_| format!("MTU {} is too large", cfg.load.mtu))?;
    let ns = HostVeth::create(&SUITE, mtu)
        .map_err(|e| format!("creating the namespace and veth: {e}"))?;
    // The client core on this side's end, at the interface's MTU (the veth's, `cfg.mtu`).
    let spec = cfg.client_datapath.clone().map(|mut spec| {
        spec.device = ns.client_if.clone();
        spec
    });
    let (clients, label) = match &spec {
        Some(_) => ("an AF_XDP client core".to_owned(), XDP_LABEL),
        None => (
            format!("{} kernel-socket client thread(s)", cfg.load.threads),
            XDP_SOCKET_CLIENTS_LABEL,
        ),
    };
    eprintln!(
        "[bench] namespace {} with {} (AF_XDP server, {}) <-> {} ({clients}, {}), MTU {}",
        ns.name, ns.server_if, ns.server_ip, ns.client_if, ns.client_ip, cfg.load.mtu
    );
    let mut out = BenchOutcome {
        workload: prep.workload.name(),
        stats: Some(prep.stats.clone()),
        requests_per_unit: prep.per_unit,
        datapath: label.to_owned(),
        ..BenchOutcome::default()
    };
    if let Ok(item) = app_server::datapath_xdp::xsk::umem_memory(1).map(|m| m.max_item_size()) {
        let longest = prep.expected.max_value_len();
        if longest + 512 > item {
            eprintln!(
                "[bench] note: this run's values reach {longest} B, and an AF_XDP pinned item holds {item} B: \
                 a reply of protobuf, capnp, flatbuffers or resp must fit one item (capnp: one segment), so \
                 those answer TOO_LARGE for the longest values and the checker counts them mismatched; \
                 the cornflakes formats send such values by reference, in pieces"
            );
        }
    }
    let n = cfg.serializations.len();
    let mut points = Vec::new();
    for (i, &ser) in cfg.serializations.iter().enumerate() {
        eprintln!("[bench] serialization {}/{n}: {ser}", i + 1);
        let server = spawn_server(&ns, cfg, ser, 7000 + i as u16)?;
        let checker = Arc::new(Checker {
            reqs: prep.reqs.clone(),
            expected: prep.expected.clone(),
            ser,
            cores: 1,
        });
        let client_at = SocketAddrV4::new(ns.client_ip, CLIENT_PORT);
        let records = spec
            .as_ref()
            .map(|spec| crate::bypass::spawn(cfg, spec, client_at, &[server.addr], ser, &prep.reqs))
            .transpose()
            .and_then(|clients| {
                let lane = Lane {
                    ser,
                    addrs: vec![server.addr],
                    bind: ns.client_ip,
                    server: None,
                    clients,
                    checker,
                    sweep: ModePoints::default(),
                };
                sweep_one(cfg, lane, &prep.reqs, &out.workload, loads)
            });
        let stats = parse_stats(&server.stop()?);
        eprintln!("[bench] {ser} server: {stats}");
        points.extend(records?);
        out.servers.push((ser, stats));
    }
    drop(ns);
    // Every point's speed canary judged against the whole run's readings (all servers').
    loadgen::canary::rebase_records(&mut points);
    out.records = points.into_iter().map(|(r, _)| r).collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_final_counters_are_read_back() {
        let lines = [
            "[server] ready: cornflakes (10.77.1.1:7000, AF_XDP on x)".to_owned(),
            "[server cornflakes] received=1 replied=1 malformed=0".to_owned(),
            "[server] received=10 replied=9 malformed=1 send_failed=0 io_errors=2 datapath_drops=0 keys=5 store_bytes=640 store_full=3 work_p50=850ns last_malformed=\"x\"".to_owned(),
        ];
        let st = parse_stats(&lines);
        assert_eq!(
            (st.received, st.replied, st.malformed, st.io_errors),
            (10, 9, 1, 2)
        );
        assert_eq!((st.app.keys, st.app.used_bytes, st.app.full), (5, 640, 3));
        let p50 = st.work_p50_ns().unwrap();
        assert!((800.0..900.0).contains(&p50), "{p50}");
        assert_eq!(parse_stats(&[]).received, 0);
    }
}
