//! `echo bench` end to end with tiny durations: it runs every mode (the library ones
//! included) and writes JSON records with the fields the results need, a plot and a table.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use echo::Mode;

#[test]
fn bench_writes_records_plot_and_table() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let json = dir.join("out.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_echo"));
    cmd.args([
        "bench",
        "--duration",
        "0.05",
        "--warmup",
        "0.01",
        "--rates",
        "500,1000",
    ])
    .args(["--timeout-ms", "2000", "--out"])
    .arg(&dir)
    .arg("--json")
    .arg(&json);
    // A panic of any thread, a non-zero exit or a hang fails the test.
    let out = test_skip::success_within(cmd, Duration::from_secs(240), "echo bench");
    let stdout = String::from_utf8_lossy(&out.stdout);

    let text = std::fs::read_to_string(&json).expect("json written");
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid json");
    let recs = v.as_array().expect("an array of records");
    // Every mode, the library ones included (their generated code is committed).
    let expected: Vec<Mode> = Mode::ALL.to_vec();
    for m in &expected {
        let mine: Vec<_> = recs.iter().filter(|r| r["mode"] == m.name()).collect();
        assert!(!mine.is_empty(), "no record for {m}");
        assert!(
            stdout.contains(&format!("| {} |", m.name())),
            "{m} missing from table:\n{stdout}"
        );
    }
    for r in recs {
        for f in [
            "mode",
            "shape",
            "offered_rps",
            "achieved_rps",
            "p50_us",
            "p99_us",
            "p999_us",
        ] {
            assert!(r.get(f).is_some(), "record without {f}: {r}");
        }
        assert_eq!(r["shape"], "list-2x2048");
        assert!(r["offered_rps"].as_f64().unwrap() > 0.0);
        assert_eq!(r["mismatched"], 0, "{r}");
        // The speed canary ran before every point.
        assert!(r["canary_ratio"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("speed canary"),
        "the point lines print the canary"
    );
    assert!(dir.join("table.md").exists());
    let servers: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("servers.json")).unwrap()).unwrap();
    for m in &expected {
        let s = servers
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["mode"] == m.name())
            .unwrap_or_else(|| panic!("no server stats for {m}"));
        assert_eq!(s["malformed"], 0, "{s}");
        assert!(s["echoed"].as_u64().unwrap() > 0, "{s}");
        assert!(s["work_p50_ns"].as_f64().unwrap() > 0.0, "{s}");
    }
    // At 500 req/s with a 2 s loss timeout at least one point verifies, so there is a curve.
    assert!(
        dir.join("echo.svg").exists() && dir.join("echo.png").exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--datapath emu`: every available mode against the emulated ConnectX on a second core,
/// every reply deserialized and compared (`--check-every 1 --sample-every 1`).
#[test]
fn bench_on_the_emulated_nic_verifies_every_reply_of_every_mode() {
    if let Err(e) = datapath_mlx5::emu::threaded::two_cores() {
        test_skip::skip(
            "bench_on_the_emulated_nic_verifies_every_reply_of_every_mode",
            &e.to_string(),
        );
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-emu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_echo"));
    cmd.args([
        "bench",
        "--datapath",
        "emu",
        "--sample-every",
        "1",
        "--check-every",
        "1",
    ])
    .args(["--duration", "0.05", "--warmup", "0.01", "--rates", "2000"])
    .args(["--trials", "1"])
    .args(["--timeout-ms", "2000", "--out"])
    .arg(&dir);
    let out = test_skip::success_within(cmd, Duration::from_secs(240), "echo bench --datapath emu");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not a network measurement"), "{stdout}");
    let recs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("echo.json")).unwrap()).unwrap();
    let points: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("emu-points.json")).unwrap())
            .unwrap();
    for m in Mode::ALL {
        let r = recs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["mode"] == m.name())
            .unwrap_or_else(|| panic!("no record for {m}"));
        assert_eq!(r["mismatched"], 0, "{r}");
        assert_eq!(r["malformed"], 0, "{r}");
        assert!(r["verified"].as_u64().unwrap() > 0, "{r}");
        let p = points
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["mode"] == m.name())
            .unwrap_or_else(|| panic!("no device point for {m}"));
        // Every verified reply was read whole (sample 1 in 1).
        assert_eq!(p["sampled"], r["verified"], "{p} {r}");
        assert_eq!(
            (&p["unchecked"], &p["check_every"]),
            (&0.into(), &1.into()),
            "{p}"
        );
        assert_eq!(p["coverage_complete"], true, "{p}");
        let busy = p["device_busy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&busy), "{p}");
        // The speed canary of the trial's two CPUs (server, device), in the points and records.
        assert_eq!(p["canary"]["cpus"].as_array().unwrap().len(), 2, "{p}");
        assert!(p["canary"]["ratio"].as_f64().unwrap() > 0.0, "{p}");
        assert_eq!(p["slowed"], p["canary"]["slowed"], "{p}");
        assert_eq!(r["canary_ratio"], p["canary"]["ratio"], "{p} {r}");
        // ... and the pair reading between those two CPUs.
        assert_eq!(p["canary"]["pair_cpus"], p["canary"]["cpus"], "{p}");
        assert!(p["canary"]["pair_us"].as_f64().unwrap() > 0.0, "{p}");
        assert_eq!(r["canary_pair_ratio"], p["canary"]["pair_ratio"], "{p} {r}");
        // How many runs of the trial were thrown away as slowed (default: up to 2 reruns),
        // in the points and the record.
        assert_eq!(p["slowed_retries"], 2, "{p}");
        let reruns = p["thrown_slowed_runs"].as_array().unwrap().len();
        assert_eq!(p["slowed_reruns"], reruns, "{p}");
        assert_eq!(r["slowed_reruns"], reruns, "{r}");
    }
    // The compact table first on the terminal, a row per mode; the search's full table (and
    // its footnotes) in table.md.
    let first = stdout
        .lines()
        .find(|l| l.starts_with("| "))
        .unwrap_or_default();
    assert!(
        first.starts_with("| mode | kept up (k req/s) | spread (its trials) | ÷ raw |"),
        "{stdout}"
    );
    for m in Mode::ALL {
        assert!(stdout.contains(&format!("| {} |", m.name())), "{stdout}");
    }
    assert!(
        stdout.contains("Ratios of one repeat (--repeat 1)"),
        "{stdout}"
    );
    let full = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(
        full.contains("| slowed trials (there / all) | rerun for slowness (there / all) |"),
        "{full}"
    );
    for f in [
        "echo.svg",
        "echo.png",
        "echo-latency.svg",
        "echo-latency.png",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    // Per mode, what its saturation search found and what bounded it (here: the grid of one
    // load, kept up).
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("emu-summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary.as_array().unwrap().len(), Mode::ALL.len());
    for s in summary.as_array().unwrap() {
        assert_eq!(s["trials"], 1, "{s}");
        assert!(s["bounded_by"].is_string(), "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--rx-ring N` sets the emulated receive queue's size: a run with a small ring still answers
/// and verifies every reply, and a size that is not a power of two is refused before any run.
/// The run also demotes more cache lines than a frame has (`--demote-lines`, clamped to the
/// frame): a hint that must change nothing the server or the checker sees.
#[test]
fn bench_rx_ring_sets_the_receive_queue_and_rejects_bad_sizes() {
    let out = Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["bench", "--datapath", "emu", "--rx-ring", "100"])
        .output()
        .expect("run echo bench");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--rx-ring 100") && stderr.contains("power of two"),
        "{stderr}"
    );
    if let Err(e) = datapath_mlx5::emu::threaded::two_cores() {
        test_skip::skip(
            "bench_rx_ring_sets_the_receive_queue_and_rejects_bad_sizes (run)",
            &e.to_string(),
        );
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-emu-rx-ring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_echo"));
    cmd.args([
        "bench",
        "--datapath",
        "emu",
        "--rx-ring",
        "64",
        "--demote-lines",
        "1000",
        "--sample-every",
        "1",
    ])
    .args(["--modes", "cornflakes,protobuf", "--desc-ns", "20"])
    .args(["--duration", "0.05", "--warmup", "0.01", "--rates", "2000"])
    .args(["--trials", "1", "--timeout-ms", "2000", "--out"])
    .arg(&dir);
    test_skip::success_within(cmd, Duration::from_secs(240), "echo bench --rx-ring 64");
    // The device's per-descriptor cost is part of the full table.
    let full = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(full.contains("(--desc-ns): 20 ns"), "{full}");
    // Sampled payload checks by default, their share and coverage in the table.
    assert!(
        full.contains(&format!(
            "for a random 1 in {} replies (--check-every)",
            emu_bench::DEFAULT_CHECK_EVERY
        )) && full.contains("payload checked there"),
        "{full}"
    );
    let recs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("echo.json")).unwrap()).unwrap();
    for r in recs.as_array().unwrap() {
        assert_eq!(r["mismatched"], 0, "{r}");
        assert!(r["verified"].as_u64().unwrap() > 0, "{r}");
    }
}
