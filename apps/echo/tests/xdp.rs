//! `echo bench --datapath xdp` end to end (feature `xdp`): the server over AF_XDP in a network
//! namespace the command creates and deletes, every response verified. Needs root; without
//! it the test says SKIPPED on stderr, and fails instead when `CORNFLAKES_REQUIRE_XDP=1` (as
//! the datapath-xdp tests do).
#![cfg(feature = "xdp")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// `echo bench --datapath xdp ARGS` at 300 req/s, 0.2 s per point, writing to `dir`.
fn bench(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["bench", "--datapath", "xdp"])
        .args(args)
        .args(["--rates", "300", "--duration", "0.2", "--warmup", "0.05"])
        .args(["--timeout-ms", "3000"])
        .arg("--out")
        .arg(dir)
        .output()
        .expect("run echo bench")
}

#[test]
fn bench_runs_over_af_xdp_and_verifies_every_reply() {
    if !is_root() {
        test_skip::skip_unless(
            "bench_runs_over_af_xdp_and_verifies_every_reply",
            "needs root",
            Some("CORNFLAKES_REQUIRE_XDP"),
        );
        return;
    }
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("xdp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let modes = [
        "raw",
        "zero-copy",
        "two-copy",
        "cornflakes",
        "cornflakes-no-ssend",
    ];
    let out = bench(&["--modes", &modes.join(",")], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "echo bench --datapath xdp failed:\n{stderr}"
    );
    let text = std::fs::read_to_string(dir.join("echo.json")).expect("json written");
    let recs: serde_json::Value = serde_json::from_str(&text).unwrap();
    for m in modes {
        let r = recs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["mode"] == m)
            .unwrap_or_else(|| panic!("no record for {m}"));
        assert!(
            r["verified"].as_u64().unwrap() > 0,
            "{m}: nothing verified: {r}"
        );
        assert_eq!(r["mismatched"], 0, "{m}: {r}");
        assert_eq!(r["verified"], r["sent"], "{m}: every reply verified: {r}");
    }
    // Driven by an AF_XDP client core on the host's end, one per mode, as said.
    assert!(stderr.contains("(an AF_XDP client core, "), "{stderr}");
    let ready = stderr.matches("[client] core 0 ready at ").count();
    assert_eq!(ready, modes.len(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("Datapath: AF_XDP server on a veth, an AF_XDP client core."),
        "{stdout}"
    );
    // The namespace the command reported is gone again.
    let name = stderr
        .split("[bench] namespace ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("namespace reported");
    assert!(
        !netns_harness::namespace_exists(name).unwrap(),
        "{name} left behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_over_af_xdp_can_be_driven_by_kernel_socket_clients() {
    let test = "bench_over_af_xdp_can_be_driven_by_kernel_socket_clients";
    if !is_root() {
        test_skip::skip_unless(test, "needs root", Some("CORNFLAKES_REQUIRE_XDP"));
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("xdp-socket-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = [
        "--client-datapath",
        "socket",
        "--modes",
        "raw",
        "--threads",
        "2",
    ];
    let out = bench(&args, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("(2 kernel-socket client thread(s), "),
        "{stderr}"
    );
    assert!(!stderr.contains("[client] core"), "{stderr}");
    let recs = loadgen::read_json(&dir.join("echo.json")).unwrap();
    assert!(
        recs.iter().all(|r| r.verified > 0 && r.mismatched == 0),
        "{recs:?}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("Datapath: AF_XDP server on a veth, kernel UDP socket clients."),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
