//! `echo bench --datapath tcp` end to end with tiny durations: every mode over kernel TCP on
//! 127.0.0.1, two client threads with three connections each, every reply verified.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use echo::Mode;

#[test]
fn bench_over_tcp_verifies_every_reply_of_every_mode() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-tcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let json = dir.join("out.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_echo"));
    cmd.args([
        "bench",
        "--datapath",
        "tcp",
        "--conns",
        "3",
        "--threads",
        "2",
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
    let out = test_skip::success_within(cmd, Duration::from_secs(240), "echo bench tcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("kernel TCP on 127.0.0.1"), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).unwrap();
    let recs = v.as_array().expect("an array of records");
    for m in Mode::ALL {
        let mine: Vec<_> = recs.iter().filter(|r| r["mode"] == m.name()).collect();
        assert!(!mine.is_empty(), "no record for {m}");
        for r in mine {
            let sent = r["sent"].as_u64().unwrap();
            assert!(sent > 0, "{r}");
            // A stream loses nothing: every request answered, every answer the right echo.
            assert_eq!(r["verified"].as_u64().unwrap(), sent, "{r}");
            for f in ["mismatched", "lost", "unexpected", "malformed", "errors"] {
                assert_eq!(r[f], 0, "{f}: {r}");
            }
            // The speed canary ran before every point.
            assert!(r["canary_ratio"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let servers: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("servers.json")).unwrap()).unwrap();
    for s in servers.as_array().unwrap() {
        assert_eq!(s["malformed"], 0, "{s}");
        assert!(s["echoed"].as_u64().unwrap() > 0, "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn conns_without_tcp_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["bench", "--datapath", "socket", "--conns", "2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--conns"));
}
