//! The `tcp-echo` commands end to end at a low load: `fig9` answers every request of every
//! mode correctly and prints and writes what its README says; `server --cores 2` echoes on
//! each core and stops after its `--seconds`. Nothing is timed: the rate is low and only
//! counts are checked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use datapath_tcp::frame::{write_header, HEADER_LEN};

const MODES: [&str; 5] = ["raw", "cornflakes", "flatbuffers", "protobuf", "capnp"];

/// Runs `tcp-echo fig9 ARGS --out DIR` (a directory of its own, `name`) to its end; returns its
/// output and the directory (removed by the caller).
fn fig9(name: &str, args: &[&str]) -> (std::process::Output, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tcp-echo-{name}-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_tcp-echo"))
        .arg("fig9")
        .args(args)
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run tcp-echo fig9");
    (out, dir)
}

#[test]
fn fig9_at_a_low_load_verifies_every_mode_and_writes_its_outputs() {
    let (out, dir) = fig9(
        "fig9",
        &[
            "--rate",
            "300",
            "--seconds",
            "0.3",
            "--warmup",
            "0.05",
            "--conns",
            "2",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("TCP echo over 127.0.0.1: 300 req/s of 1024 B, 2 connections"),
        "{stdout}"
    );
    assert!(lines[1].starts_with("mode "), "{stdout}");
    for (i, mode) in MODES.iter().enumerate() {
        let row: Vec<&str> = lines[2 + i].split_whitespace().collect();
        // mode p5 p25 p50 p75 p99 achieved lost wrong
        assert_eq!(row.len(), 9, "{stdout}");
        assert_eq!(row[0], *mode, "{stdout}");
        assert_eq!(&row[7..], ["0", "0"], "lost and wrong of {mode}: {stdout}");
    }
    let server = lines[7];
    let echoed: u64 = server
        .strip_prefix("server: ")
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("server line: {stdout}"));
    // Every scheduled request (warm-up included) is answered: ~105 per mode.
    assert!(echoed >= 5 * 50, "{stdout}");
    assert!(
        server.ends_with(" echoed, 0 bad requests, 0 replies refused"),
        "{stdout}"
    );
    // 1024-byte values are below the default zero-copy threshold: every send is copied.
    assert!(
        lines[8].starts_with(
            "server sends (zero-copy msg-zerocopy for fields of 16384 B and more): \
             0 zero-copy (0 B; 0 of them copied by the kernel), "
        ),
        "{stdout}"
    );
    assert_eq!(
        lines[9],
        format!("wrote {}/fig9.{{json,svg,png}}", dir.display())
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fig9.json")).unwrap()).unwrap();
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for (r, mode) in rows.iter().zip(MODES) {
        assert_eq!(r["mode"], mode, "{r}");
        assert_eq!(r["verified"], r["sent"], "{r}");
        assert_eq!(
            (r["lost"].as_u64(), r["wrong"].as_u64()),
            (Some(0), Some(0)),
            "{r}"
        );
    }
    for f in ["fig9.svg", "fig9.png"] {
        assert!(std::fs::metadata(dir.join(f)).unwrap().len() > 0, "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fig9 --tcp-zc-threshold 1024`: the 1024-byte values of `raw` (the received bytes sent back
/// by reference) and `cornflakes` (a zero-copy field) make the server's sends zero-copy, which
/// loopback then copies (the kernel reports it); every reply is still right.
#[test]
fn fig9_with_a_threshold_at_its_value_size_sends_zero_copy_and_says_so() {
    let (out, dir) = fig9(
        "zc",
        &[
            "--rate",
            "300",
            "--seconds",
            "0.2",
            "--warmup",
            "0",
            "--modes",
            "raw,cornflakes",
            "--tcp-zc-threshold",
            "1024",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let line = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("server sends (zero-copy msg-zerocopy for fields of 1024 B and more): ")
        })
        .unwrap_or_else(|| panic!("no sends line: {stdout}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    // zero-copy sends, their bytes, those the kernel copied, copied sends, their bytes
    assert_eq!(n.len(), 5, "{line}");
    assert!(n[0] > 0 && n[1] >= 1024 * n[0], "{line}");
    assert!(n[2] <= n[0], "{line}");
    for row in stdout
        .lines()
        .filter(|l| l.starts_with("raw ") || l.starts_with("cornflakes "))
    {
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&f[7..], ["0", "0"], "lost and wrong: {stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A load no machine sustains is said to be one before the run starts, with the flag to lower
/// it; the run still goes ahead.
#[test]
fn fig9_warns_before_it_starts_when_the_load_cannot_be_generated() {
    let (out, dir) = fig9(
        "load",
        &[
            "--rate",
            "20000000",
            "--seconds",
            "0.01",
            "--warmup",
            "0",
            "--modes",
            "raw",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let probe = stderr
        .find("[fig9] raw: about ")
        .expect("the measured rate");
    let warning = stderr
        .find("[fig9] warning: the offered 20000000 req/s cannot be generated on this machine")
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    assert!(probe < warning, "{stderr}");
    assert!(
        stderr.contains("Lower the load with --rate N (e.g. --rate "),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One framed `raw` echo of `body` on a new connection to `addr`.
fn echo_once(addr: &str, body: &[u8]) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut f = vec![0u8; HEADER_LEN];
    write_header(&mut f, cornflakes::Msg::new(7, 0), body.len() as u32);
    f.extend_from_slice(body);
    s.write_all(&f).unwrap();
    let mut reply = vec![0u8; HEADER_LEN + body.len()];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[HEADER_LEN..], body, "echo from {addr}");
}

/// `tcp-echo server --cores 2 --seconds S` on the launcher's TCP arm: two ready lines, core i
/// on its own port, each echoes a client of its own (its counters at the end say so), and the
/// server stops by itself after its seconds.
#[test]
fn server_on_two_cores_echoes_on_each_and_stops_after_its_seconds() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcp-echo"))
        .args(["server", "--listen", "127.0.0.1:0", "--cores", "2"])
        .args(["--seconds", "2", "--tcp-zc", "off"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tcp-echo server");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let ready: Vec<String> = lines
        .by_ref()
        .map_while(Result::ok)
        .inspect(|l| seen.push(l.clone()))
        .filter(|l| l.starts_with("[server] ready: "))
        .take(2)
        .collect();
    let result = std::panic::catch_unwind(|| {
        assert_eq!(ready.len(), 2, "{seen:?}");
        for (i, l) in ready.iter().enumerate() {
            assert!(
                l.starts_with("[server] ready: tcp-echo (every mode) on 127.0.0.1:")
                    && l.ends_with(&format!("(kernel TCP, zero-copy off, core {i} of 2)")),
                "{l}"
            );
            let addr = l.split(" on ").nth(1).unwrap().split(' ').next().unwrap();
            echo_once(addr, format!("hello core {i}").as_bytes());
        }
    });
    // The rest of stderr, up to the exit; a server that does not stop is killed and fails.
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    let rest = rest.join().unwrap();
    let status = status.unwrap_or_else(|| panic!("still running after 60 s: {rest:?}"));
    assert!(status.success(), "{rest:?}");
    let per_core = percore::core_lines(&rest, "[server]");
    assert_eq!(per_core.len(), 2, "{rest:?}");
    for (i, c) in per_core.iter().enumerate() {
        assert!(
            c.contains(" replied=1 ") && c.contains(" malformed=0 "),
            "core {i}: {c}"
        );
    }
    let done = rest
        .iter()
        .find_map(|l| l.strip_prefix("[server] tcp-echo done: "))
        .unwrap_or_else(|| panic!("no summary: {rest:?}"));
    assert!(
        done.starts_with("received=2 replied=2 malformed=0 "),
        "{done}"
    );
    // What went zero-copy (nothing: --tcp-zc off) and what the kernel copied: each reply.
    assert!(
        done.contains(" zc_sends=0 zc_bytes=0 zc_copied_sends=0 zc_copied_bytes=0 copied_sends="),
        "{done}"
    );
    let copied: u64 = done
        .split(" copied_bytes=")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let replies = ("hello core 0".len() + "hello core 1".len() + 2 * HEADER_LEN) as u64;
    assert_eq!(copied, replies, "{done}");
}
