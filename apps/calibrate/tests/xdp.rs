//! `calibrate run --datapath xdp` end to end (feature `xdp`): the calibration server over
//! AF_XDP in a network namespace the command creates and deletes, every reply verified. Needs
//! root; without it the test says SKIPPED on stderr, and fails instead when
//! `CORNFLAKES_REQUIRE_XDP=1`.
#![cfg(feature = "xdp")]

use std::path::PathBuf;
use std::process::Command;

use netns_harness::Suite;

/// Used only to decide whether the test can run here (the command creates its own namespace).
const SUITE: Suite = Suite::new("cfcalt", "cct", "CORNFLAKES_REQUIRE_XDP");

#[test]
fn calibrate_runs_over_af_xdp_and_verifies_every_reply() {
    // Root, `ip`, `ethtool` and AF_XDP sockets, or the reason (which fails the test under
    // CORNFLAKES_REQUIRE_XDP=1).
    if let Some(why) = SUITE.xdp_skip_reason() {
        SUITE.skip("calibrate_runs_over_af_xdp_and_verifies_every_reply", &why);
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("xdp-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_calibrate"))
        .args(["run", "--datapath", "xdp", "--array-mib", "4"])
        .args([
            "--sizes", "64,4096", "--counts", "2,8", "--rates", "300", "--trials", "1",
        ])
        .args([
            "--duration",
            "0.2",
            "--warmup",
            "0.05",
            "--timeout-ms",
            "3000",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run calibrate run");
    let err = String::from_utf8_lossy(&out.stderr);
    // The command fails when any reply did not verify.
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("skipping K=8 S=4096"),
        "8 x 4096 B does not fit a 16 KiB UMEM buffer: {err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("calibration.json")).unwrap())
            .unwrap();
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 6, "3 measured cells x 2 policies");
    assert!(records.iter().all(|r| r["verified"].as_u64() > Some(0)));
    assert!(dir.join("heatmap.png").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
