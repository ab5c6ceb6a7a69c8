//! The calibration's plumbing on tiny parameters (no speed is asserted): the server answers
//! both policies correctly and survives malformed requests; `run_calibration` writes the JSON,
//! the heatmap and a recommendation the runtime can read back; the CLI reports datapaths it
//! cannot run here.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use app_server::idle::socket_idle;
use calibrate::run::{run_calibration, CalibConfig};
use calibrate::server::{CalibClient, Cell, Policy, CALIB_MSG_TYPE};
use cornflakes::datapath::{Connect as _, Transmit as _};
use cornflakes::{Arena, Msg};
use datapath_socket::{SocketConfig, SocketDatapath};
use loadgen::args::LoadConfig;
use loadgen::{run, Bound, RunConfig, Schedule, ScheduleConfig};

fn socket(port: u16) -> SocketDatapath {
    SocketDatapath::new(SocketConfig::new(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        port,
    )))
    .unwrap()
}

#[test]
fn server_answers_both_policies_and_survives_bad_requests() {
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let stop = &stop;
        let server = s.spawn(move || {
            let mut server = calibrate::server::new(socket(0), 1 << 20).unwrap();
            tx.send((server.datapath().local_addr(), server.handler().items()))
                .unwrap();
            let (after, mut hook) = socket_idle(false);
            server.run(stop, None, after, &mut hook);
            server.stats()
        });
        let (addr, items) = rx.recv().unwrap();
        assert_eq!(items, 64, "1 MiB in 16 KiB items");

        // Not even a framed message, then framed ones with bad bodies.
        let raw = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        raw.send_to(b"\xff\x00garbage", addr).unwrap();
        let mut dp = socket(0);
        let conn = dp.connect(addr).unwrap();
        let bad_policy = [1, 0, 9, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let past_the_array = {
            let mut v = vec![1, 0, 0, 0, 64, 0, 0, 0];
            v.extend_from_slice(&(64u64 << 14).to_le_bytes());
            v
        };
        for body in [&bad_policy[..], &past_the_array, &[0u8; 3]] {
            dp.send_copy(conn, Msg::new(1, CALIB_MSG_TYPE), body)
                .unwrap();
        }
        dp.send_copy(conn, Msg::new(2, 2), &bad_policy).unwrap(); // not a calibration type
        dp.flush().unwrap();

        // Then real requests of both policies, every response checked byte for byte.
        for policy in Policy::BOTH {
            let cell = Cell {
                size: 512,
                count: 3,
                policy,
                items,
            };
            let schedule = Schedule::poisson(&ScheduleConfig {
                rate_rps: 2000.0,
                bound: Bound::Count(100),
                threads: 1,
                seed: 7,
            })
            .unwrap();
            let check = move |id: u64, payload: &[u8]| {
                let arena = Arena::new();
                cell.check(id, payload, &arena, &mut Vec::new())
            };
            let cfg = RunConfig {
                timeout: Duration::from_secs(2),
                busy_poll: false,
                ..RunConfig::default()
            };
            let report = run(
                &schedule,
                &cfg,
                |t| CalibClient::new(socket(0), addr, t, cell),
                &check,
            )
            .unwrap();
            assert_eq!(
                report.counters.verified, 100,
                "{policy:?}: {}",
                report.counters
            );
            assert_eq!(report.counters.mismatched, 0);
        }
        stop.store(true, Ordering::Relaxed);
        let stats = server.join().unwrap();
        assert_eq!(stats.malformed, 4, "{stats}");
        assert_eq!(stats.replied, 200, "{stats}");
        assert!(
            stats.datapath.total_drops() >= 1,
            "the unframed datagram: {stats}"
        );
    });
}

#[test]
fn a_tiny_calibration_writes_json_heatmap_and_a_readable_recommendation() {
    let dir = std::env::temp_dir().join(format!("calibrate-{}", std::process::id()));
    let cfg = CalibConfig {
        sizes: vec![64, 1024],
        counts: vec![1, 2, 100],
        array_bytes: Some(2 << 20),
        load: LoadConfig {
            rates: vec![300.0],
            duration: Duration::from_millis(60),
            warmup: Duration::from_millis(20),
            timeout: Duration::from_millis(500),
            out_dir: dir.clone(),
            ..CalibConfig::default().load
        },
        trials: 1, // one trial per load: a known number of records
        ..CalibConfig::default()
    };
    let out = run_calibration(&cfg).unwrap();
    assert_eq!(out.cells.len(), 6);
    let skipped: Vec<_> = out.cells.iter().filter(|c| c.skipped.is_some()).collect();
    assert_eq!(
        skipped.len(),
        2,
        "K = 100 exceeds MAX_SEGMENTS: {skipped:?}"
    );
    assert!(out.records.iter().all(|r| r.mismatched == 0));
    assert_eq!(
        out.records.len(),
        8,
        "4 measured cells x 2 policies x 1 trial"
    );
    assert_eq!(out.array_bytes, 2 << 20);

    let text = std::fs::read_to_string(dir.join("calibration.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["cells"].as_array().unwrap().len(), 6);
    assert_eq!(v["records"].as_array().unwrap().len(), 8);
    // Every measured cell has its policies' trial spread and an outcome; skipped ones say so.
    for c in v["cells"].as_array().unwrap() {
        if c["skipped"].is_null() {
            let outcome = c["outcome"].as_str().unwrap();
            assert!(["sg", "copy", "no clear winner"].contains(&outcome), "{c}");
            for p in ["copy", "sg"] {
                let (lo, hi) = (&c[p]["trials_min_rps"], &c[p]["trials_max_rps"]);
                assert_eq!(lo.is_null(), c[p]["median_rps"].is_null(), "{c}");
                if let (Some(lo), Some(hi)) = (lo.as_f64(), hi.as_f64()) {
                    assert!(lo <= hi, "{c}");
                }
            }
        } else {
            assert_eq!(c["outcome"], "skipped", "{c}");
        }
    }
    assert_eq!(v["trials_per_load"], 1);
    assert_eq!(
        v["recommended_threshold"].as_u64().map(|t| t as usize),
        out.recommended
    );
    // The runtime reads the same file (CORNFLAKES_CALIBRATION).
    match (
        cornflakes::threshold::threshold_from_calibration(&text),
        out.recommended,
    ) {
        (Ok(t), Some(r)) => assert_eq!(t, r),
        (Err(e), None) => assert!(e.contains("null"), "{e}"),
        other => panic!("runtime and calibration disagree: {other:?}"),
    }
    let svg = std::fs::read_to_string(dir.join("heatmap.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("segment size"));
    assert_eq!(
        &std::fs::read(dir.join("heatmap.png")).unwrap()[..4],
        b"\x89PNG"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn calibrate(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_calibrate"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run calibrate");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_rejects_what_it_cannot_run_here_with_the_reason() {
    for nic in ["mlx5", "ice"] {
        let (ok, err) = calibrate(&["run", "--datapath", nic], &[]);
        assert!(
            !ok && err.contains(&format!("SKIPPED calibrate --datapath {nic}")),
            "{err}"
        );
    }
    let (ok, err) = calibrate(&["run", "--sizes", "64,big"], &[]);
    assert!(!ok && err.contains("--sizes \"big\""), "{err}");
    let (ok, err) = calibrate(&["run", "--array-mib", "0"], &[]);
    assert!(!ok && err.contains("must be positive"), "{err}");
    let (ok, err) = calibrate(&["run", "--trials", "0"], &[]);
    assert!(!ok && err.contains("--trials must be at least 1"), "{err}");
    let (ok, err) = calibrate(&["run", "--resolution", "2"], &[]);
    assert!(!ok && err.contains("--resolution 2"), "{err}");
}

/// On one CPU the emulated NIC cannot run: the error says why, in calibrate's flags.
#[test]
fn the_emulated_nic_on_one_cpu_is_a_clear_error() {
    let cpu = percore::allowed_cores().unwrap()[0];
    let out = Command::new("taskset")
        .args(["-c", &cpu.to_string()])
        .arg(env!("CARGO_BIN_EXE_calibrate"))
        .args(["run", "--datapath", "emu", "--sizes", "64", "--counts", "1"])
        .args(["--rates", "1000", "--duration", "0.05"])
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            test_skip::skip(
                "the_emulated_nic_on_one_cpu_is_a_clear_error",
                &format!("taskset (util-linux) does not run: {e}"),
            );
            return;
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--datapath emu: the emulated NIC needs 2 CPUs") && !err.contains("--cores"),
        "{err}"
    );
}

#[test]
fn a_tiny_calibration_on_the_emulated_nic_verifies_replies() {
    if let Err(e) = datapath_mlx5::emu::threaded::two_cores() {
        test_skip::skip(
            "a_tiny_calibration_on_the_emulated_nic_verifies_replies",
            &e.to_string(),
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("calibrate-emu-{}", std::process::id()));
    let cfg = CalibConfig {
        datapath: calibrate::run::DatapathKind::Emu,
        sizes: vec![64, 8192],
        counts: vec![2],
        array_bytes: Some(2 << 20),
        load: LoadConfig {
            rates: vec![2000.0],
            duration: Duration::from_millis(100),
            warmup: Duration::from_millis(50),
            timeout: Duration::from_millis(500),
            out_dir: dir.clone(),
            ..CalibConfig::default().load
        },
        trials: 1, // one trial per load: a known number of records
        ..CalibConfig::default()
    };
    let out = run_calibration(&cfg).unwrap();
    // 2 x 8192 B does not fit one 9000 B frame of the emulated wire: skipped with the reason.
    assert!(out.cells[1]
        .skipped
        .as_deref()
        .unwrap()
        .contains("largest reply"));
    assert_eq!(out.records.len(), 2, "copy and sg, one trial at one load");
    for r in &out.records {
        assert!(r.verified > 0 && r.mismatched == 0, "{r:?}");
    }
    assert!(dir.join("calibration.json").exists() && dir.join("heatmap.png").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibrate_measures_a_separately_started_server() {
    remote_calibration(1);
}

/// Figure 13's setup: two server cores on two ports, each with half of the array; the client
/// spreads its requests over both.
#[test]
fn calibrate_measures_a_server_on_two_cores() {
    let n = percore::allowed_cores().unwrap().len();
    if n < 2 {
        test_skip::skip(
            "calibrate_measures_a_server_on_two_cores",
            &format!("two server cores need 2 CPUs, this process may use {n}"),
        );
        return;
    }
    remote_calibration(2);
}

fn remote_calibration(cores: usize) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // Several cores listen on consecutive ports from a fixed one (port 0 would give each an
    // unrelated ephemeral port the client could not derive).
    let bind = if cores == 1 {
        "127.0.0.1:0".to_owned()
    } else {
        format!("127.0.0.1:{}", 30000 + (std::process::id() % 10000) * 2)
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_calibrate"))
        .args(["server", "--array-bytes", "1048576"])
        .args(["--bind", &bind, "--until-stdin-closes"])
        .args(["--cores", &cores.to_string()])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr: SocketAddrV4 = loop {
        let line = lines.next().expect("server output").unwrap();
        if let Some(rest) = line.strip_prefix("[server] ready: calibrate on ") {
            break rest.split_whitespace().next().unwrap().parse().unwrap();
        }
    };
    let dir = std::env::temp_dir().join(format!("calibrate-remote-{cores}-{}", std::process::id()));
    let cfg = CalibConfig {
        sizes: vec![256],
        counts: vec![2, 9],
        array_bytes: Some(1 << 20),
        load: LoadConfig {
            rates: vec![500.0],
            duration: Duration::from_millis(60),
            warmup: Duration::from_millis(20),
            timeout: Duration::from_millis(500),
            out_dir: dir.clone(),
            ..CalibConfig::default().load
        },
        trials: 1, // one trial per load: a known number of records
        remote: Some(calibrate::run::Remote {
            server: addr,
            bind: Ipv4Addr::LOCALHOST,
            max_segments: 8,
            max_reply: 64 * 1024,
            cores,
        }),
        ..CalibConfig::default()
    };
    let out = run_calibration(&cfg);
    drop(child.stdin.take()); // the server stops when its stdin closes
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(child.wait().unwrap().success(), "{rest:?}");
    let out = out.unwrap();
    assert!(
        out.cells[1].skipped.as_deref().unwrap().contains("takes 8"),
        "K = 9 > 8 - 1"
    );
    assert_eq!(out.records.len(), 2);
    assert!(out
        .records
        .iter()
        .all(|r| r.verified > 0 && r.mismatched == 0));
    let done = rest.iter().find(|l| l.contains("calibrate done")).unwrap();
    assert!(done.contains("malformed=0"), "{done}");
    if cores > 1 {
        for i in 0..cores {
            let line = rest
                .iter()
                .find(|l| l.starts_with(&format!("[server] core {i}: ")))
                .unwrap_or_else(|| panic!("no counters of core {i}: {rest:?}"));
            assert!(
                !line.contains("received=0 "),
                "core {i} got no request: {line}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
