//! The `tcp-echo` commands end to end at a low load: `fig9` answers every request of every
//! mode correctly and prints and writes what its README says; `server` prints its address and
//! echoes. Nothing is timed: the rate is low and only counts are checked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use datapath_tcp::frame::{write_header, HEADER_LEN};

const MODES: [&str; 5] = ["raw", "cornflakes", "flatbuffers", "protobuf", "capnp"];

#[test]
fn fig9_at_a_low_load_verifies_every_mode_and_writes_its_outputs() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tcp-echo-fig9-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_tcp-echo"))
        .args([
            "fig9",
            "--rate",
            "300",
            "--seconds",
            "0.3",
            "--warmup",
            "0.05",
        ])
        .args(["--conns", "2", "--out"])
        .arg(&dir)
        .output()
        .expect("run tcp-echo fig9");
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
    assert_eq!(
        lines[8],
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

#[test]
fn server_prints_its_address_and_echoes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcp-echo"))
        .args(["server", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tcp-echo server");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim_end()
        .strip_prefix("tcp-echo server on ")
        .unwrap_or_else(|| panic!("ready line: {first:?}"))
        .to_owned();
    let result = std::panic::catch_unwind(|| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut f = vec![0u8; HEADER_LEN];
        write_header(&mut f, cornflakes::Msg::new(7, 0), 5);
        f.extend_from_slice(b"hello");
        s.write_all(&f).unwrap();
        let mut reply = vec![0u8; HEADER_LEN + 5];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[HEADER_LEN..], b"hello");
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
