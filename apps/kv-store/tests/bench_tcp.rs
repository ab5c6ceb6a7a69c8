//! `kv bench --datapath tcp` end to end on tiny parameters: every serialization over kernel TCP
//! on 127.0.0.1, two client threads with three connections each to each of two server cores,
//! every reply verified. Nothing is timed.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kv_store::Serialization;

#[test]
fn bench_over_tcp_verifies_every_reply_of_every_serialization() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kv-bench-tcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kv"));
    cmd.args([
        "bench",
        "--datapath",
        "tcp",
        "--conns",
        "3",
        "--threads",
        "2",
    ])
    .args(["--cores", "2", "--workload", "google", "--list-lens", "1-4"])
    .args(["--keys", "300", "--rates", "300,600", "--duration", "0.05"])
    .args([
        "--warmup",
        "0.01",
        "--timeout-ms",
        "2000",
        "--requests",
        "300",
    ])
    .arg("--out")
    .arg(&dir);
    let out = test_skip::success_within(cmd, Duration::from_secs(240), "kv bench tcp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Datapath: kernel TCP"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
    let recs = v.as_array().unwrap();
    for s in Serialization::ALL {
        let mine: Vec<_> = recs.iter().filter(|r| r["mode"] == s.name()).collect();
        assert!(!mine.is_empty(), "no record for {s}");
        for r in mine {
            let sent = r["sent"].as_u64().unwrap();
            assert!(sent > 0, "{r}");
            // A stream loses nothing: every request answered and verified.
            assert_eq!(r["verified"].as_u64().unwrap(), sent, "{r}");
            for f in ["mismatched", "lost", "unexpected", "malformed", "errors"] {
                assert_eq!(r[f], 0, "{f}: {r}");
            }
            // The speed canary ran before every point.
            assert!(r["canary_ratio"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    for s in run["servers"].as_array().unwrap() {
        assert_eq!(s["malformed"], 0, "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
