//! The apps over Demikernel: `demi-server echo` and `demi-server kv` (the apps' own handlers on
//! `app_server::Server` over [`DemiDatapath`](cornflakes_demikernel::datapath::DemiDatapath))
//! in namespace A of a veth pair the test creates, and the apps' own bench clients
//! (`echo::bench::sweep_mode`, `kv_store::bench::run_client` — what `echo client --datapath tcp`
//! and `kv client --datapath tcp` run) over kernel TCP in namespace B, for every echo mode and
//! every KV serialization at a low load. Every request must be answered and every reply
//! verified; nothing is timed. Needs root and `ip`; prints SKIPPED otherwise
//! (`CORNFLAKES_REQUIRE_NETNS=1` turns that into a failure).

use std::io::{BufRead, BufReader};
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use loadgen::Record;
use netns_harness::host::format_mac;
use netns_harness::{in_netns, Suite, VethPair};

const SUITE: Suite = Suite::new("cfdapp", "cda", "CORNFLAKES_REQUIRE_NETNS");
const PORT: u16 = 7400;

/// A `demi-server` child in namespace A; its stderr is echoed (indented) and kept.
struct DemiServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    addr: SocketAddrV4,
}

impl DemiServer {
    fn start(v: &VethPair, app_args: &[&str]) -> Result<DemiServer, String> {
        let addr = SocketAddrV4::new(v.ip_a, PORT);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &v.ns_a])
            .arg(env!("CARGO_BIN_EXE_demi-server"))
            .args(app_args)
            .args(["--bind", &addr.to_string(), "--ifname", &v.if_a])
            .args(["--peer", &format!("{}={}", v.ip_b, format_mac(v.mac_b))])
            .arg("--until-stdin-closes")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting demi-server: {e}"))?;
        let stdin = child.stdin.take();
        let stderr = child.stderr.take().ok_or("no stderr pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("  {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let s = DemiServer {
            child,
            stdin,
            lines,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match s.lines.recv_timeout(left) {
                Ok(l) if l.starts_with("[server] ready:") => {
                    if !l.contains("Demikernel catpowder TCP") {
                        return Err(format!("unexpected ready line {l:?}"));
                    }
                    return Ok(s);
                }
                Ok(_) => {}
                Err(_) => return Err(format!("demi-server {app_args:?} never became ready")),
            }
        }
    }

    /// Closes stdin, waits for the exit and returns the final counters line, then the
    /// datapath's own counters (`StreamStats`, Demikernel's `DemiStats` in it) on a second
    /// line.
    fn stop(mut self) -> Result<String, String> {
        drop(self.stdin.take());
        let status = self.child.wait().map_err(|e| e.to_string())?;
        let lines: Vec<String> = self.lines.iter().collect();
        if !status.success() {
            return Err(format!("demi-server exited with {status}"));
        }
        // The final counters line, then the datapath's own counters (`StreamStats`).
        let done = lines
            .iter()
            .find(|l| l.contains(" done: "))
            .ok_or_else(|| "no final counters line".to_owned())?;
        let demi = lines.iter().find(|l| l.contains("demikernel: StreamStats"));
        Ok(format!("{done}\n{}", demi.map_or("", |l| l.as_str())))
    }
}

impl Drop for DemiServer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What `echo client --mode M --datapath tcp --conns 2 --rates 200 --duration 0.3` runs from
/// side B against `server` (10 s allowed per reply).
fn echo_plan(mode: echo::Mode, server: SocketAddrV4, v: &VethPair) -> echo::bench::SweepPlan {
    // The bench's defaults otherwise: one thread, the jumbo MTU, no busy-polling.
    let mut load = echo::bench::BenchConfig::default().load;
    load.rates = vec![200.0];
    load.duration = Duration::from_millis(300);
    load.warmup = Duration::from_millis(100);
    load.timeout = Duration::from_secs(10);
    echo::bench::SweepPlan {
        mode,
        shape: echo::bench::BenchConfig::default().shape,
        server,
        bind: v.ip_b,
        load,
        stop_after_misses: 0,
        other_cores: Vec::new(),
        tcp_conns: Some(2),
        tcp: app_server::TcpSpec::default(),
    }
}

/// Every request answered and verified, nothing else.
fn check(what: &str, records: &[Record]) {
    assert!(!records.is_empty(), "{what}: no record");
    for r in records {
        assert!(r.sent > 0, "{what}: nothing sent: {r:?}");
        assert_eq!(
            r.verified, r.sent,
            "{what}: not every reply verified: {r:?}"
        );
        assert_eq!(
            (r.mismatched, r.lost, r.unexpected, r.malformed, r.errors),
            (0, 0, 0, 0, 0),
            "{what}: {r:?}"
        );
    }
}

/// The counters line must show no malformed request and no failed send.
fn check_server(what: &str, done: &str) {
    for bad in ["malformed=", "send_failed=", "io_errors="] {
        if let Some(i) = done.find(bad) {
            let n: String = done[i + bad.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            assert_eq!(n, "0", "{what}: {done}");
        }
    }
}

fn skip(test: &str) -> bool {
    match SUITE.skip_reason() {
        Some(why) => {
            SUITE.skip(test, &why);
            true
        }
        None => false,
    }
}

#[test]
fn echo_client_verifies_every_mode_against_demi_server_on_a_veth_pair() {
    if skip("echo_client_verifies_every_mode_against_demi_server_on_a_veth_pair") {
        return;
    }
    let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
    for mode in echo::Mode::ALL {
        let server = DemiServer::start(&v, &["echo", "--mode", mode.name()])
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        let plan = echo_plan(mode, server.addr, &v);
        let records = in_netns(&v.ns_b, move || echo::bench::sweep_mode(&plan))
            .expect("run the client in namespace B")
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        let done = server.stop().unwrap_or_else(|e| panic!("{mode}: {e}"));
        check(mode.name(), &records);
        check_server(mode.name(), &done);
    }
}

#[test]
fn kv_client_verifies_every_serialization_against_demi_server_on_a_veth_pair() {
    if skip("kv_client_verifies_every_serialization_against_demi_server_on_a_veth_pair") {
        return;
    }
    let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
    let out =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("demi-kv-{}", std::process::id()));
    for ser in kv_store::Serialization::ALL {
        let server = DemiServer::start(
            &v,
            &[
                "kv",
                "--serialization",
                ser.name(),
                "--workload",
                "google",
                "--list-lens",
                "1-4",
                "--keys",
                "300",
            ],
        )
        .unwrap_or_else(|e| panic!("{ser}: {e}"));
        let mut cfg = kv_store::bench::BenchConfig::default();
        let mut a = cli_args::Args::new(
            ["--list-lens", "1-4", "--keys", "300"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        cfg.workload = kv_store::load::workload_from_args(&mut a, "google").unwrap();
        a.finish().unwrap();
        cfg.serializations = vec![ser];
        cfg.load.rates = vec![200.0];
        cfg.load.duration = Duration::from_millis(300);
        cfg.load.warmup = Duration::from_millis(100);
        cfg.load.timeout = Duration::from_secs(10);
        cfg.requests = 300;
        cfg.load.threads = 1;
        cfg.tcp_conns = Some(2);
        cfg.load.out_dir = out.clone();
        let addr = server.addr;
        let outcome = in_netns(&v.ns_b, move || kv_store::bench::run_client(&cfg, addr))
            .expect("run the client in namespace B")
            .unwrap_or_else(|e| panic!("{ser}: {e}"));
        let done = server.stop().unwrap_or_else(|e| panic!("{ser}: {e}"));
        check(ser.name(), &outcome.records);
        check_server(ser.name(), &done);
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Bad input on one connection — a stream that is not framing, a frame cut by the end of its
/// stream — closes only that connection and is counted; a well-behaved client is served in full.
#[test]
fn a_bad_stream_closes_only_its_connection_on_demi_server() {
    if skip("a_bad_stream_closes_only_its_connection_on_demi_server") {
        return;
    }
    use std::io::{Read, Write};
    let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
    let mode = echo::Mode::ALL[4];
    let server = DemiServer::start(&v, &["echo", "--mode", mode.name()]).unwrap();
    let addr = server.addr;
    let plan = echo_plan(mode, addr, &v);
    let (closed, records) = in_netns(&v.ns_b, move || {
        let connect = || {
            let s = std::net::TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10))
                .expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        };
        // Not framing: the server closes the connection.
        let mut garbage = connect();
        garbage.write_all(&[0xff; 64]).unwrap();
        let mut buf = [0u8; 16];
        let closed = match garbage.read(&mut buf) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        };
        // A frame announcing 1000 bytes, 10 of them sent, then the end of the stream.
        let mut cut = connect();
        let mut frame = vec![0u8; datapath_tcp::frame::HEADER_LEN + 10];
        datapath_tcp::frame::write_header(&mut frame, cornflakes::Msg::new(1, 1), 1000);
        cut.write_all(&frame).unwrap();
        cut.shutdown(std::net::Shutdown::Write).unwrap();
        let _ = cut.read(&mut buf);
        (closed, echo::bench::sweep_mode(&plan))
    })
    .expect("run the clients in namespace B");
    assert!(closed, "the server kept a connection that sent no framing");
    check(mode.name(), &records.unwrap());
    let done = server.stop().unwrap();
    check_server(mode.name(), &done);
    assert!(
        done.contains("datapath_drops=2"),
        "one bad stream and one cut frame counted: {done}"
    );
}

/// Nothing lost over Demikernel either: a burst of raw echoes twice the reply queue
/// (`tx_limit`) gets every reply in order, the server putting off reading (or holding) what
/// has no room yet (counted: `room_waits`, `held_for_room`);
/// three valid frames and garbage in one write get their three replies before the connection
/// closes. (The client reads as the replies come: one that stops reading until its receive
/// window closes stalls Demikernel 1.5.13's sender for good — docs/tcp.md, "Demikernel".)
#[test]
fn a_burst_gets_every_reply_and_frames_before_garbage_are_answered_on_demi_server() {
    if skip("a_burst_gets_every_reply_and_frames_before_garbage_are_answered_on_demi_server") {
        return;
    }
    use std::io::{Read, Write};
    const BURST: u32 = 2000; // 2 MB of echoes against a 1 MiB queue
    let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
    let server = DemiServer::start(&v, &["echo", "--mode", "raw"]).unwrap();
    let addr = server.addr;
    let frame = |id: u32, body: &[u8]| {
        let mut f = vec![0u8; datapath_tcp::frame::HEADER_LEN];
        datapath_tcp::frame::write_header(&mut f, cornflakes::Msg::new(id, 1), body.len() as u32);
        f.extend_from_slice(body);
        f
    };
    let (burst_ok, garbage_ok) = in_netns(&v.ns_b, move || {
        let connect = || {
            let s = std::net::TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10))
                .expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s
        };
        let mut reader = connect();
        let mut writer = reader.try_clone().unwrap();
        writer
            .set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let burst: Vec<u8> = (0..BURST)
            .flat_map(|i| frame(i, &[i as u8; 1000]))
            .collect();
        let w = std::thread::spawn(move || writer.write_all(&burst).map_err(|e| e.to_string()));
        let mut burst_ok = Ok(());
        for i in 0..BURST {
            let mut r = vec![0u8; datapath_tcp::frame::HEADER_LEN + 1000];
            if let Err(e) = reader.read_exact(&mut r) {
                burst_ok = Err(format!("reply {i}: {e}"));
                break;
            }
            if r != frame(i, &[i as u8; 1000]) {
                burst_ok = Err(format!("reply {i} differs: {:?}", &r[..24]));
                break;
            }
        }
        let burst_ok = burst_ok.and(w.join().unwrap());
        let mut bad = connect();
        let mut w: Vec<u8> = (0..3).flat_map(|i| frame(i, b"ping")).collect();
        w.extend_from_slice(&[0xff; 64]);
        bad.write_all(&w).unwrap();
        let mut garbage_ok = true;
        for i in 0..3 {
            let mut r = vec![0u8; datapath_tcp::frame::HEADER_LEN + 4];
            garbage_ok &= bad.read_exact(&mut r).is_ok() && r == frame(i, b"ping");
        }
        let mut one = [0u8; 1];
        garbage_ok &= match bad.read(&mut one) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        };
        (burst_ok, garbage_ok)
    })
    .expect("run the clients in namespace B");
    let done = server.stop().unwrap();
    assert_eq!(burst_ok, Ok(()), "the burst missed replies: {done}");
    let count = |key: &str| -> u64 {
        done.split(key)
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let waited = count("held_for_room: ") + count("room_waits: ");
    assert!(waited > 0, "no request waited for reply room: {done}");
    assert!(
        garbage_ok,
        "the frames before the garbage were not answered, then closed: {done}"
    );
    check_server("raw", &done);
}

/// The calibration server (`demi-server calibrate`, the app's own `Calib` handler) answers both
/// policies' requests over Demikernel; the calibration client (`calibrate::server::CalibClient`
/// over kernel TCP) checks every reply's segments.
#[test]
fn calibration_client_verifies_both_policies_against_demi_server_on_a_veth_pair() {
    if skip("calibration_client_verifies_both_policies_against_demi_server_on_a_veth_pair") {
        return;
    }
    use calibrate::server::{items_for, CalibClient, Cell, Policy, ARRAY_ITEM};
    let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
    let array = 16 * ARRAY_ITEM;
    let server = DemiServer::start(&v, &["calibrate", "--array-bytes", &array.to_string()])
        .expect("start demi-server calibrate");
    let addr = server.addr;
    for policy in Policy::BOTH {
        let cell = Cell {
            size: 1024,
            count: 4,
            policy,
            items: items_for(array),
        };
        let report = in_netns(&v.ns_b, move || {
            let checker = move |id: u64, payload: &[u8]| {
                cell.check(id, payload, &cornflakes::Arena::new(), &mut Vec::new())
            };
            let schedule = loadgen::Schedule::poisson(&loadgen::ScheduleConfig {
                rate_rps: 200.0,
                bound: loadgen::Bound::Duration(Duration::from_millis(400)),
                threads: 1,
                seed: 7,
            })
            .map_err(|e| e.to_string())?;
            let run_cfg = loadgen::RunConfig {
                warmup: Duration::from_millis(100),
                timeout: Duration::from_secs(10),
                busy_poll: false,
                progress: false,
            };
            let make = |thread: usize| {
                let dp = datapath_tcp::TcpDatapath::new(datapath_tcp::TcpConfig::new(None))
                    .map_err(std::io::Error::other)?;
                CalibClient::new(dp, addr, thread, cell)
            };
            loadgen::run(&schedule, &run_cfg, make, &checker).map_err(|e| e.to_string())
        })
        .expect("run the client in namespace B")
        .unwrap_or_else(|e| panic!("{}: {e}", policy.name()));
        check(
            policy.name(),
            &[Record::from_report(policy.name(), "4x1024", &report)],
        );
    }
    let done = server.stop().unwrap();
    check_server("calibrate", &done);
}
