//! `calibrate server --datapath ice` measured by `calibrate run --server` (feature `ice`, root): the
//! server on DPDK's `net_af_packet` virtual device on one end of a veth pair in namespace A,
//! the calibration's clients on kernel sockets in namespace B, every reply verified. It proves
//! the NIC arm's plumbing (no E810 here); SKIPPED without root.
#![cfg(feature = "ice")]

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};

use netns_harness::{Suite, VethPair};

const SUITE: Suite = Suite::new("cfcal", "cc", "CORNFLAKES_REQUIRE_ICE");

#[test]
fn calibrate_measures_the_ice_datapath_on_a_virtual_device() {
    let test = "calibrate_measures_the_ice_datapath_on_a_virtual_device";
    if let Some(why) = SUITE.skip_reason() {
        SUITE.skip(test, &why);
        return;
    }
    let v = match VethPair::create(&SUITE, 1500) {
        Ok(v) => v,
        Err(e) => {
            SUITE.skip(
                test,
                &format!("cannot create namespaces and a veth pair: {e}"),
            );
            return;
        }
    };
    let exe = env!("CARGO_BIN_EXE_calibrate");
    let server_addr = format!("{}:7000", v.ip_a);
    let mut server = Command::new("ip")
        .args(["netns", "exec", &v.ns_a, exe, "server", "--datapath", "ice"])
        .args([
            "--dpdk-args",
            &format!("--vdev net_af_packet0,iface={}", v.if_a),
        ])
        .args([
            "--bind",
            &server_addr,
            "--array-bytes",
            "2097152",
            "--mtu",
            "1500",
        ])
        .arg("--until-stdin-closes")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let ready = loop {
        match lines.next() {
            Some(Ok(l)) if l.starts_with("[server] ready: calibrate") => break true,
            Some(Ok(l)) => seen.push(l),
            _ => break false,
        }
    };
    assert!(ready, "the ice server did not start: {seen:?}");
    let dir = std::env::temp_dir().join(format!("calibrate-ice-{}", std::process::id()));
    let client = Command::new("ip")
        .args([
            "netns",
            "exec",
            &v.ns_b,
            exe,
            "run",
            "--server",
            &server_addr,
        ])
        .args([
            "--bind",
            &v.ip_b.to_string(),
            "--array-mib",
            "2",
            "--mtu",
            "1500",
        ])
        .args([
            "--sizes", "64,1024", "--counts", "1,2", "--rates", "300", "--trials", "1",
        ])
        .args(["--max-segments", "8", "--max-reply", "16384"])
        .args([
            "--duration",
            "0.2",
            "--warmup",
            "0.1",
            "--timeout-ms",
            "2000",
            "--out",
        ])
        .arg(&dir)
        .output()
        .expect("run the clients");
    let _ = server.stdin.take().map(|mut s| s.flush());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = server.wait().unwrap();
    let err = String::from_utf8_lossy(&client.stderr);
    // `calibrate run` fails when any reply did not verify.
    assert!(client.status.success(), "{err}\nserver: {rest:?}");
    assert!(status.success(), "server: {rest:?}");
    let done = rest.iter().find(|l| l.contains("calibrate done")).unwrap();
    assert!(
        done.contains("malformed=0") && done.contains("send_failed=0"),
        "{done}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("calibration.json")).unwrap())
            .unwrap();
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 8, "4 cells x 2 policies");
    assert!(records.iter().all(|r| r["verified"].as_u64() > Some(0)));
    std::fs::remove_dir_all(&dir).unwrap();
}
