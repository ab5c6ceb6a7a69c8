//! Two share-nothing echo server cores over the socket datapath, one port each: a client
//! spreading its requests over both ports gets every one echoed exactly once, and each core's
//! counters show exactly the requests sent to its port (`docs/cores.md`).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use datapath_socket::{SocketConfig, SocketDatapath};
use echo::client::{EchoClient, Verifier};
use echo::server::{ServerConfig, ServerStats};
use echo::{Mode, Serialization, ShapeSpec};
use loadgen::{request_id, ClientTransport, Response};
use percore::CoresConfig;

const CORES: usize = 2;
const REQUESTS: u64 = 200;

fn run(mode: Mode) {
    let n = percore::allowed_cores().unwrap().len();
    if n < CORES {
        test_skip::skip(
            &format!("two socket server cores ({mode:?})"),
            &format!("two server cores need 2 CPUs, this process may use {n}"),
        );
        return;
    }
    let bind = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    let server = echo::server::spawn_cores(
        ServerConfig {
            mode,
            threshold: 512,
        },
        SocketConfig::new(bind),
        &CoresConfig::new("echo-test", CORES),
        None,
        false,
    )
    .unwrap();
    let addrs = server.addrs();
    assert_eq!(addrs.len(), CORES);
    assert_ne!(addrs[0], addrs[1]);
    let spec: ShapeSpec = "list-2x600".parse().unwrap();
    let dp = SocketDatapath::new(SocketConfig::new(bind)).unwrap();
    let mut client = EchoClient::spread(dp, &addrs, 0, mode, spec).unwrap();
    let verifier = Verifier::new(mode, spec).unwrap();
    let mut answers: HashMap<u64, u32> = HashMap::new();
    let mut bad = 0;
    for seq in 0..REQUESTS {
        client.send_request(request_id(0, seq)).unwrap();
        if seq % 16 == 15 {
            client
                .poll_responses(&mut |r: Response<'_>| {
                    let id = r.id.unwrap();
                    bad += u32::from(!verifier.check(id, r.payload));
                    *answers.entry(id).or_default() += 1;
                })
                .unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while answers.len() < REQUESTS as usize && Instant::now() < deadline {
        client
            .poll_responses(&mut |r: Response<'_>| {
                let id = r.id.unwrap();
                bad += u32::from(!verifier.check(id, r.payload));
                *answers.entry(id).or_default() += 1;
            })
            .unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(bad, 0, "{mode}: replies that did not verify");
    assert_eq!(answers.len(), REQUESTS as usize, "{mode}: replies lost");
    assert!(answers.values().all(|&c| c == 1), "{mode}: a reply twice");
    let per_core = server.stop_per_core().unwrap();
    for (core, s) in per_core.iter().enumerate() {
        // Request seq goes to core seq mod N.
        let want = (0..REQUESTS)
            .filter(|s| *s as usize % CORES == core)
            .count() as u64;
        assert_eq!(
            (s.received, s.replied),
            (want, want),
            "{mode} core {core}: {s}"
        );
    }
    assert_eq!(ServerStats::sum(&per_core).replied, REQUESTS);
}

#[test]
fn two_socket_cores_each_echo_their_own_port_cornflakes() {
    run(Mode::Shared(Serialization::CORNFLAKES));
}

#[test]
fn two_socket_cores_each_echo_their_own_port_zero_copy() {
    run(Mode::ZeroCopy);
}

#[test]
fn more_cores_than_cpus_is_a_clear_error() {
    let n = percore::allowed_cores().unwrap().len();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_echo"))
        .args([
            "server",
            "--mode",
            "raw",
            "--bind",
            "127.0.0.1:0",
            "--seconds",
            "1",
        ])
        .args(["--cores", &(n + 1).to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{} server cores asked for", n + 1))
            && err.contains(&format!("--cores {n} or fewer")),
        "{err}"
    );
}
