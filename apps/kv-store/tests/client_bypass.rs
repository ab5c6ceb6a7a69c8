//! `kv client` on kernel bypass, end to end (root): its client core over AF_XDP in one network
//! namespace against `kv server --datapath xdp` in another (feature `xdp`), and over DPDK's
//! `net_af_packet` virtual device against a server on kernel sockets (feature `ice`; that
//! device has no flow rules, so one client core and no key steering). Every reply is verified
//! by the client's checker; a server loaded with other contents (a server that answers wrong)
//! makes the client count mismatches and fail. Without root, `ip`, AF_XDP or the feature,
//! each test says SKIPPED (and fails under its `CORNFLAKES_REQUIRE_*=1`).

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

const SUITE: Suite = Suite::new("cfkc", "ckc", "CORNFLAKES_REQUIRE_XDP");
const ICE: Suite = Suite::new("cfkd", "ckd", "CORNFLAKES_REQUIRE_ICE");
const KV: &str = env!("CARGO_BIN_EXE_kv");
const PORT: u16 = 7000;

/// `kv server ARGS` in namespace `ns`, listening at `addr`, once it says it is ready.
fn server(ns: &str, args: &[String], addr: &str) -> ChildServer {
    let mut all = vec!["server".to_owned()];
    all.extend_from_slice(args);
    let addr = addr.parse().expect("server address");
    ChildServer::spawn_in(
        ns,
        Path::new(KV),
        &all,
        addr,
        "[server] ready",
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `kv client` in namespace `ns` with `args`, writing its JSON to `out`.
fn client(ns: &str, args: &[String], out: &Path) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns, KV, "client"])
        .args(args)
        .args([
            "--rates",
            "2000,4000",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
        ])
        .args(["--timeout-ms", "500", "--requests", "500"])
        .arg("--out")
        .arg(out)
        .output()
        .expect("run kv client")
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The records `kv client` wrote: every request sent was answered and verified.
fn all_verified(out: &Path, what: &str) {
    let records = loadgen::read_json(&out.join("kv.json")).expect("kv.json");
    assert_eq!(records.len(), 2, "{what}: one record per load");
    for r in &records {
        assert!(r.sent > 0, "{what}: {r:?}");
        assert_eq!(r.verified, r.sent, "{what}: every reply verified: {r:?}");
        assert_eq!(r.errors, 0, "{what}: {r:?}");
    }
}

/// A `kv client` run against a server that answers right (`honest`: it succeeded, its core
/// was ready and every reply verified) or wrong (it failed, counting mismatches).
fn judged(out: &Output, dir: &Path, ser: &str, honest: bool) {
    let err = String::from_utf8_lossy(&out.stderr);
    if honest {
        assert!(out.status.success(), "{ser}: {err}");
        assert!(err.contains("[client] core 0 ready at"), "{err}");
        all_verified(dir, ser);
    } else {
        assert!(!out.status.success(), "a lying server passed: {err}");
        assert!(err.contains("replies did not verify"), "{err}");
        let records = loadgen::read_json(&dir.join("kv.json")).unwrap();
        assert!(records.iter().any(|r| r.mismatched > 0), "{records:?}");
    }
}

fn workload(shape: &str) -> Vec<String> {
    strings(&["--workload", "ycsb", "--keys", "100", "--shape", shape])
}

#[cfg(feature = "xdp")]
#[test]
fn kv_client_over_af_xdp_against_an_af_xdp_server() {
    let test = "kv_client_over_af_xdp_against_an_af_xdp_server";
    if let Some(why) = SUITE.xdp_skip_reason() {
        SUITE.skip(test, &why);
        return;
    }
    let v = VethPair::create(&SUITE, 1500).expect("namespaces and veth");
    let tmp = std::env::temp_dir().join(format!("kv-client-xdp-{}", std::process::id()));
    let server_addr = SocketAddrV4::new(v.ip_a, PORT).to_string();
    let peer_b = format!("{}={}", v.ip_b, netns_harness::host::format_mac(v.mac_b));
    for (ser, shape) in [
        ("cornflakes", "1x1024"),
        ("protobuf", "1x1024"),
        ("cornflakes", "2x512"),
    ] {
        let mut sargs = strings(&["--serialization", ser, "--datapath", "xdp"]);
        sargs.extend(strings(&["--ifname", &v.if_a, "--peer", &peer_b]));
        sargs.extend(strings(&["--bind", &server_addr]));
        // The server of the last run holds other contents: its replies are wrong.
        sargs.extend(workload(shape));
        let s = server(&v.ns_a, &sargs, &server_addr);
        let mut cargs = strings(&["--serialization", ser, "--server", &server_addr]);
        cargs.extend(strings(&["--datapath", "xdp", "--ifname", &v.if_b]));
        cargs.extend(strings(&["--bind", &format!("{}:9000", v.ip_b)]));
        cargs.extend(workload("1x1024"));
        let out = client(&v.ns_b, &cargs, &tmp);
        s.stop().expect("the server stops cleanly");
        judged(&out, &tmp, ser, shape == "1x1024");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[cfg(feature = "ice")]
#[test]
fn kv_client_over_dpdk_af_packet_against_a_socket_server() {
    let test = "kv_client_over_dpdk_af_packet_against_a_socket_server";
    if let Some(why) = ICE.skip_reason() {
        ICE.skip(test, &why);
        return;
    }
    let v = VethPair::create(&ICE, 1500).expect("namespaces and veth");
    let tmp = std::env::temp_dir().join(format!("kv-client-ice-{}", std::process::id()));
    // The server on kernel UDP in namespace B (whose veth end has its address).
    let server_addr = SocketAddrV4::new(v.ip_b, PORT).to_string();
    for (ser, shape) in [
        ("cornflakes", "1x1024"),
        ("resp", "1x1024"),
        ("cornflakes", "2x512"),
    ] {
        let mut sargs = strings(&["--serialization", ser, "--bind", &server_addr]);
        sargs.extend(strings(&["--mtu", "1500"]));
        // The server of the last run holds other contents: its replies are wrong.
        sargs.extend(workload(shape));
        let s = server(&v.ns_b, &sargs, &server_addr);
        // The client: DPDK on namespace A's veth end, at A's address.
        let mut cargs = strings(&["--serialization", ser, "--server", &server_addr]);
        cargs.extend(strings(&["--datapath", "ice", "--dpdk-args"]));
        cargs.push(format!(
            "--no-huge --no-pci -m 256 --vdev net_af_packet0,iface={}",
            v.if_a
        ));
        cargs.extend(strings(&[
            "--bind",
            &format!("{}:9000", v.ip_a),
            "--mtu",
            "1500",
        ]));
        cargs.extend(workload("1x1024"));
        let out = client(&v.ns_a, &cargs, &tmp);
        s.stop().expect("the server stops cleanly");
        // The bench's tables, naming the DPDK client core that drove the run.
        let tables = std::fs::read_to_string(tmp.join("tables.md")).expect("tables.md");
        assert!(
            tables.contains("Datapath: 1 client core(s) on DPDK --no-huge"),
            "{tables}"
        );
        assert!(tables.contains(&format!("| {ser} |")), "{tables}");
        judged(&out, &tmp, ser, shape == "1x1024");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[cfg(not(all(feature = "xdp", feature = "ice")))]
#[test]
fn kernel_bypass_clients_need_their_features() {
    #[cfg(not(feature = "xdp"))]
    SUITE.skip(
        "kv_client_over_af_xdp_against_an_af_xdp_server",
        "built without `--features xdp`",
    );
    #[cfg(not(feature = "ice"))]
    ICE.skip(
        "kv_client_over_dpdk_af_packet_against_a_socket_server",
        "built without `--features ice` (DPDK: crates/datapath-ice/APT_PACKAGES)",
    );
}
