//! `kv client --datapath tcp` against a separate `kv server --datapath tcp` process (how the
//! same client measures the store over Demikernel, `demi-server kv`): every request answered
//! and verified against what the server was loaded with. Nothing is timed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn tcp_client_process_against_tcp_server_process() {
    let exe = env!("CARGO_BIN_EXE_kv");
    let workload = [
        "--workload",
        "google",
        "--list-lens",
        "1-4",
        "--keys",
        "300",
    ];
    let mut server = Command::new(exe)
        .args([
            "server",
            "--serialization",
            "cornflakes",
            "--datapath",
            "tcp",
        ])
        .args(["--bind", "127.0.0.1:0", "--until-stdin-closes"])
        .args(workload)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kv server");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("[server] ready:"))
        .expect("server ready line");
    assert!(ready.contains("kernel TCP"), "{ready}");
    let addr = ready
        .split(" on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_owned();

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kv-client-tcp-{}", std::process::id()));
    let out = Command::new(exe)
        .args(["client", "--server", &addr, "--serialization", "cornflakes"])
        .args(workload)
        .args(["--datapath", "tcp", "--conns", "3", "--threads", "2"])
        .args(["--rates", "300", "--duration", "0.2", "--warmup", "0.05"])
        .args(["--timeout-ms", "3000", "--requests", "300"])
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run kv client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The client names the server it measured, not a loopback server of its own.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("kernel TCP to the server at {addr}")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("server and client threads in one process"),
        "{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
    let recs = v.as_array().unwrap();
    assert!(!recs.is_empty());
    let mut sent = 0;
    for r in recs {
        assert_eq!(r["mode"], "cornflakes", "{r}");
        assert!(r["sent"].as_u64().unwrap() > 0, "{r}");
        // A stream loses nothing: every request answered and verified.
        assert_eq!(r["verified"], r["sent"], "{r}");
        for f in ["mismatched", "lost", "unexpected", "malformed", "errors"] {
            assert_eq!(r[f], 0, "{f}: {r}");
        }
        sent += r["sent"].as_u64().unwrap();
    }

    drop(server.stdin.take());
    let done = lines
        .map_while(Result::ok)
        .find(|l| l.starts_with("[server] received="))
        .expect("server summary");
    assert!(server.wait().unwrap().success());
    assert!(done.contains("malformed=0"), "{done}");
    let replied: u64 = done
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("replied="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    // Warm-up requests are answered too but not in the records.
    assert!(replied >= sent, "{done}");
    let _ = std::fs::remove_dir_all(&dir);
}
