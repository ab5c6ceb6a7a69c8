//! End to end against real redis-server and memcached on loopback (a few hundred requests per
//! workload), and against a fake server that answers garbage. Prints `SKIPPED <test>: <why>`
//! when a server binary is absent.

use kv_peers::load::load;
use kv_peers::plan::Plan;
use kv_peers::server::{find_binary, Peer, ServerConfig, ServerProcess};
use kv_peers::transport::PeerTransport;
use kv_workloads::*;
use loadgen::{run, Bound, RunConfig, RunReport, Schedule, ScheduleConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

fn start_or_skip(peer: Peer, test: &str) -> Option<ServerProcess> {
    if find_binary(peer.binary()).is_none() {
        test_skip::skip(
            test,
            &format!(
                "{} is not installed (crates/kv-peers/APT_PACKAGES)",
                peer.binary()
            ),
        );
        return None;
    }
    Some(
        ServerProcess::start(
            peer,
            &ServerConfig {
                memory_mib: 256,
                ..Default::default()
            },
        )
        .expect("server starts"),
    )
}

fn drive(plan: &Plan, addr: SocketAddr, units: u64, threads: usize) -> RunReport {
    drive_on(plan, addr, units, threads, 2)
}

/// [`drive`] with `connections` TCP connections per client thread.
fn drive_on(
    plan: &Plan,
    addr: SocketAddr,
    units: u64,
    threads: usize,
    connections: usize,
) -> RunReport {
    let schedule = Schedule::poisson(&ScheduleConfig {
        rate_rps: 4000.0,
        bound: Bound::Count(units),
        threads,
        seed: 3,
    })
    .unwrap();
    let cfg = RunConfig {
        timeout: Duration::from_secs(2),
        busy_poll: false,
        ..RunConfig::default()
    };
    run(
        &schedule,
        &cfg,
        |_| PeerTransport::connect(plan, addr, connections, threads),
        &|id: u64, p: &[u8]| plan.check(id, threads, p),
    )
    .unwrap()
}

fn workloads() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(
            Ycsb::new(YcsbConfig {
                keys: 500,
                ..Default::default()
            })
            .unwrap(),
        ),
        Box::new(
            Ycsb::new(YcsbConfig {
                keys: 500,
                ..YcsbConfig::with_shape("2x2048", YcsbAccess::GetM).unwrap()
            })
            .unwrap(),
        ),
        Box::new(
            Ycsb::new(YcsbConfig {
                keys: 500,
                ..YcsbConfig::with_shape("4x1024", YcsbAccess::GetList).unwrap()
            })
            .unwrap(),
        ),
        Box::new(
            Google::new(GoogleConfig {
                keys: 500,
                ..GoogleConfig::with_lists(1, 4)
            })
            .unwrap(),
        ),
        Box::new(
            Twitter::new(TwitterConfig {
                keys: 2000,
                ..Default::default()
            })
            .unwrap(),
        ),
        Box::new(
            Cdn::new(CdnConfig {
                total_bytes: 2 << 20,
                ..Default::default()
            })
            .unwrap(),
        ),
    ]
}

#[test]
fn every_workload_is_served_and_verified() {
    for peer in [Peer::Redis, Peer::Memcached] {
        let Some(server) = start_or_skip(peer, "every_workload_is_served_and_verified") else {
            continue;
        };
        for w in workloads() {
            let plan = Plan::new(peer, w.as_ref(), w.requests(300, 5)).unwrap();
            let loaded = load(peer, server.addr(), w.as_ref(), plan.layout).unwrap();
            assert!(loaded.keys > 0);
            let units = plan.units.len() as u64;
            let r = drive(&plan, server.addr(), units, 2);
            let c = &r.counters;
            println!("{} {}: {c}", peer.binary(), w.name());
            assert_eq!(c.sent, units, "{} {}", peer.binary(), w.name());
            assert_eq!(c.verified, units, "{} {}: {c}", peer.binary(), w.name());
            assert_eq!(c.errors(), 0, "{} {}: {c}", peer.binary(), w.name());
        }
        server.stop();
    }
}

#[test]
fn a_corrupted_value_is_caught() {
    for peer in [Peer::Redis, Peer::Memcached] {
        let Some(server) = start_or_skip(peer, "a_corrupted_value_is_caught") else {
            continue;
        };
        let w = Ycsb::new(YcsbConfig {
            keys: 100,
            value_size: 64,
            ..Default::default()
        })
        .unwrap();
        let plan = Plan::new(peer, &w, w.requests(300, 6)).unwrap();
        load(peer, server.addr(), &w, plan.layout).unwrap();
        // Overwrite the most popular key with other bytes of the same length.
        let key = Ycsb::key(0);
        let mut s = TcpStream::connect(server.addr()).unwrap();
        let mut cmd = Vec::new();
        match peer {
            Peer::Redis => resp::Out::command(&mut cmd, &[b"SET", key.as_bytes(), &[b'x'; 64]]),
            Peer::Memcached => {
                kv_peers::memcache::encode_store(&mut cmd, "set", key.as_bytes(), &[b'x'; 64])
                    .unwrap()
            }
        }
        s.write_all(&cmd).unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        let r = drive(&plan, server.addr(), 300, 1);
        println!("{}: {}", peer.binary(), r.counters);
        assert!(
            r.counters.mismatched > 10,
            "{}: {}",
            peer.binary(),
            r.counters
        );
        assert!(r.counters.verified > 100);
        assert_eq!(r.counters.mismatched + r.counters.verified, 300);
    }
}

#[test]
fn servers_stop_when_dropped() {
    for peer in [Peer::Redis, Peer::Memcached] {
        let Some(server) = start_or_skip(peer, "servers_stop_when_dropped") else {
            continue;
        };
        let addr = server.addr();
        assert!(!server.version().is_empty());
        TcpStream::connect(addr).unwrap();
        drop(server);
        assert!(
            TcpStream::connect(addr).is_err(),
            "{} still listening on {addr}",
            peer.binary()
        );
    }
}

#[test]
fn garbage_replies_are_errors_not_panics() {
    // A fake server answering every read with bytes that are neither RESP nor memcached.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(b"?garbage\r\n\xff\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let w = Ycsb::new(YcsbConfig {
        keys: 10,
        value_size: 8,
        ..Default::default()
    })
    .unwrap();
    for peer in [Peer::Redis, Peer::Memcached] {
        let plan = Plan::new(peer, &w, w.requests(50, 1)).unwrap();
        let schedule = Schedule::poisson(&ScheduleConfig {
            rate_rps: 5000.0,
            bound: Bound::Count(50),
            threads: 1,
            seed: 1,
        })
        .unwrap();
        let cfg = RunConfig {
            timeout: Duration::from_millis(200),
            busy_poll: false,
            ..RunConfig::default()
        };
        let r = run(
            &schedule,
            &cfg,
            |_| PeerTransport::connect(&plan, addr, 2, 1),
            &|id: u64, p: &[u8]| plan.check(id, 1, p),
        )
        .unwrap();
        assert_eq!(r.counters.verified, 0, "{}", r.counters);
        assert!(r.counters.poll_errors > 0, "{}", r.counters);
        assert_eq!(
            r.counters.lost + r.counters.send_errors,
            50,
            "{}",
            r.counters
        );
        // Loading through a garbage stream fails with an error too.
        let e = load(peer, addr, &w, plan.layout).unwrap_err();
        assert!(
            e.to_string().contains("malformed") || e.to_string().contains("protocol"),
            "{e}"
        );
    }
}

#[test]
fn a_trace_with_appends_and_deletes_replays_verified() {
    let dir = std::env::temp_dir().join(format!("kv-peers-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.csv");
    let mut text = String::new();
    let ops = [
        "get", "set", "get", "append", "get", "delete", "get", "add", "gets", "incr",
    ];
    for i in 0..200 {
        let key = format!("key{}", i % 7);
        let op = ops[i % ops.len()];
        let size = 20 + (i * 37) % 900;
        text.push_str(&format!("{i},{key},12,{size},{},{op},0\n", i % 3));
    }
    std::fs::write(&path, text).unwrap();
    let w = Twitter::new(TwitterConfig {
        trace: Some(path),
        ..Default::default()
    })
    .unwrap();
    for peer in [Peer::Redis, Peer::Memcached] {
        let Some(server) = start_or_skip(peer, "a_trace_with_appends_and_deletes_replays_verified")
        else {
            continue;
        };
        let reqs = w.requests(400, 0);
        for kind in ["append", "delete", "put", "get"] {
            assert!(reqs.iter().any(|r| r.kind() == kind), "{kind}");
        }
        let plan = Plan::new(peer, &w, reqs).unwrap();
        load(peer, server.addr(), &w, plan.layout).unwrap();
        // One connection: appends and deletes of one key must reach the server in the run's
        // order. The checker accepts any state a key passes through in that order, which
        // covers sets overtaking each other on parallel connections, but an append overtaking
        // a delete makes a list the run never had (and was reported mismatched, now and then,
        // under load).
        let r = drive_on(&plan, server.addr(), 400, 1, 1);
        println!("{} trace: {}", peer.binary(), r.counters);
        assert_eq!(
            r.counters.verified,
            400,
            "{}: {}",
            peer.binary(),
            r.counters
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
