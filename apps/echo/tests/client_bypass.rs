//! `echo client` on kernel bypass, end to end (root): its client core over AF_XDP in one
//! network namespace against `echo server --datapath xdp` in another (feature `xdp`), and over
//! DPDK's `net_af_packet` virtual device against a server on kernel sockets (feature `ice`;
//! no flow rules on that device: one client core). Every reply must be verified (the echoed
//! values byte for byte). Without root, `ip`, AF_XDP or the feature, each test says SKIPPED
//! (and fails under its `CORNFLAKES_REQUIRE_*=1`).

// Without either feature only the skip below is built.
#![cfg_attr(
    not(any(feature = "xdp", feature = "ice")),
    allow(dead_code, unused_imports)
)]

use std::net::SocketAddrV4;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use netns_harness::{ChildServer, Suite, VethPair};

const SUITE: Suite = Suite::new("cfec", "cec", "CORNFLAKES_REQUIRE_XDP");
const ICE: Suite = Suite::new("cfed", "ced", "CORNFLAKES_REQUIRE_ICE");
const ECHO: &str = env!("CARGO_BIN_EXE_echo");

/// `echo server ARGS` in namespace `ns`, listening at `addr`, once it says it is ready.
fn server(ns: &str, args: &[String], addr: &str) -> ChildServer {
    let mut all = vec!["server".to_owned()];
    all.extend_from_slice(args);
    let addr = addr.parse().expect("server address");
    ChildServer::spawn_in(
        ns,
        Path::new(ECHO),
        &all,
        addr,
        "[server] ready",
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `echo client` in namespace `ns`; its JSON: every request sent was answered and verified,
/// and its table's first line names its client core on `device` (`AF_XDP on IF`, `DPDK ARGS`).
fn client_verifies_all(ns: &str, args: &[String], json: &Path, what: &str, device: &str) {
    let out: Output = Command::new("ip")
        .args(["netns", "exec", ns, ECHO, "client"])
        .args(args)
        .args([
            "--rates",
            "2000,4000",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
        ])
        .args([
            "--timeout-ms",
            "500",
            "--shape",
            "list-2x600",
            "--mtu",
            "1500",
        ])
        .arg("--json")
        .arg(json)
        .output()
        .expect("run echo client");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {err}");
    assert!(err.contains("[client] core 0 ready at"), "{what}: {err}");
    let table = String::from_utf8_lossy(&out.stdout);
    let first = format!("Datapath: 1 client core(s) on {device} to the server at ");
    assert!(table.starts_with(&first), "{what}: {table}");
    assert!(table.contains(&format!("| {what} |")), "{what}: {table}");
    let records = loadgen::read_json(json).expect("client JSON");
    assert_eq!(records.len(), 2, "{what}: one record per load");
    for r in &records {
        assert!(r.sent > 0, "{what}: {r:?}");
        assert_eq!(r.verified, r.sent, "{what}: every reply verified: {r:?}");
        assert_eq!(r.errors, 0, "{what}: {r:?}");
    }
}

#[cfg(feature = "xdp")]
#[test]
fn echo_client_over_af_xdp_against_an_af_xdp_server() {
    let test = "echo_client_over_af_xdp_against_an_af_xdp_server";
    if let Some(why) = SUITE.xdp_skip_reason() {
        SUITE.skip(test, &why);
        return;
    }
    let v = VethPair::create(&SUITE, 1500).expect("namespaces and veth");
    let json = std::env::temp_dir().join(format!("echo-client-xdp-{}.json", std::process::id()));
    let server_addr = SocketAddrV4::new(v.ip_a, 7000).to_string();
    let peer_b = format!("{}={}", v.ip_b, netns_harness::host::format_mac(v.mac_b));
    for mode in ["cornflakes", "raw", "protobuf"] {
        let mut sargs = strings(&["--mode", mode, "--datapath", "xdp", "--ifname", &v.if_a]);
        sargs.extend(strings(&["--peer", &peer_b, "--bind", &server_addr]));
        let s = server(&v.ns_a, &sargs, &server_addr);
        let mut cargs = strings(&["--mode", mode, "--server", &server_addr]);
        cargs.extend(strings(&["--datapath", "xdp", "--ifname", &v.if_b]));
        cargs.extend(strings(&["--bind", &format!("{}:9000", v.ip_b)]));
        let device = format!("AF_XDP on {}", v.if_b);
        client_verifies_all(&v.ns_b, &cargs, &json, mode, &device);
        s.stop().expect("the server stops cleanly");
    }
    let _ = std::fs::remove_file(&json);
}

#[cfg(feature = "ice")]
#[test]
fn echo_client_over_dpdk_af_packet_against_a_socket_server() {
    let test = "echo_client_over_dpdk_af_packet_against_a_socket_server";
    if let Some(why) = ICE.skip_reason() {
        ICE.skip(test, &why);
        return;
    }
    let v = VethPair::create(&ICE, 1500).expect("namespaces and veth");
    let json = std::env::temp_dir().join(format!("echo-client-ice-{}.json", std::process::id()));
    let server_addr = SocketAddrV4::new(v.ip_b, 7000).to_string();
    for mode in ["cornflakes", "raw"] {
        let sargs = strings(&["--mode", mode, "--bind", &server_addr, "--mtu", "1500"]);
        let s = server(&v.ns_b, &sargs, &server_addr);
        let mut cargs = strings(&["--mode", mode, "--server", &server_addr]);
        cargs.extend(strings(&["--datapath", "ice", "--dpdk-args"]));
        let eal = format!(
            "--no-huge --no-pci -m 256 --vdev net_af_packet0,iface={}",
            v.if_a
        );
        cargs.push(eal.clone());
        cargs.extend(strings(&["--bind", &format!("{}:9000", v.ip_a)]));
        client_verifies_all(&v.ns_a, &cargs, &json, mode, &format!("DPDK {eal}"));
        s.stop().expect("the server stops cleanly");
    }
    let _ = std::fs::remove_file(&json);
}

#[cfg(not(all(feature = "xdp", feature = "ice")))]
#[test]
fn kernel_bypass_clients_need_their_features() {
    #[cfg(not(feature = "xdp"))]
    SUITE.skip(
        "echo_client_over_af_xdp_against_an_af_xdp_server",
        "built without `--features xdp`",
    );
    #[cfg(not(feature = "ice"))]
    ICE.skip(
        "echo_client_over_dpdk_af_packet_against_a_socket_server",
        "built without `--features ice` (DPDK: crates/datapath-ice/APT_PACKAGES)",
    );
}
