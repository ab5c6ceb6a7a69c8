//! `echo server` and `echo client` as separate processes, over UDP and over TCP (`--datapath
//! tcp`): the client's sweep verifies every reply, and the server, stopped by closing its
//! standard input, reports what it echoed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn client_process_against_server_process() {
    client_against_server(&[], &[]);
}

/// The bench client against a separate TCP server (the way it measures a Demikernel server):
/// on a stream nothing may be lost, so every request is answered and verified.
#[test]
fn tcp_client_process_against_tcp_server_process() {
    client_against_server(
        &["--datapath", "tcp"],
        &["--datapath", "tcp", "--conns", "3"],
    );
}

fn client_against_server(server_args: &[&str], client_args: &[&str]) {
    let tcp = !server_args.is_empty();
    let exe = env!("CARGO_BIN_EXE_echo");
    let mut server = Command::new(exe)
        .args([
            "server",
            "--mode",
            "cornflakes",
            "--bind",
            "127.0.0.1:0",
            "--until-stdin-closes",
        ])
        .args(server_args)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("[server] ready:"))
        .expect("server ready line");
    let addr = ready
        .split(" on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap();
    assert!(!addr.ends_with(":0"), "{ready}");

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "two-{}-{}",
        std::process::id(),
        if tcp { "tcp" } else { "udp" }
    ));
    let json = dir.join("client.json");
    let out = Command::new(exe)
        .args([
            "client",
            "--server",
            addr,
            "--mode",
            "cornflakes",
            "--shape",
            "tree2-700",
        ])
        .args([
            "--rates",
            "400",
            "--duration",
            "0.2",
            "--warmup",
            "0.05",
            "--timeout-ms",
            "3000",
        ])
        .args(client_args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &recs[0];
    assert_eq!(
        (r["mode"].as_str(), r["shape"].as_str()),
        (Some("cornflakes"), Some("tree2-700"))
    );
    assert!(r["verified"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["mismatched"], 0, "{r}");
    if tcp {
        assert_eq!(r["verified"], r["sent"], "{r}");
        for f in ["lost", "unexpected", "malformed", "errors"] {
            assert_eq!(r[f], 0, "{f}: {r}");
        }
    }

    drop(server.stdin.take());
    let done = lines
        .map_while(Result::ok)
        .find(|l| l.contains(" done: "))
        .expect("server summary");
    assert!(server.wait().unwrap().success());
    assert!(done.contains("malformed=0"), "{done}");
    let echoed: u64 = done
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("echoed="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert_eq!(echoed, r["sent"].as_u64().unwrap(), "{done}");
    let _ = std::fs::remove_dir_all(&dir);
}
