//! `kv bench`, `kv server` and `kv client` end to end on tiny parameters: every serialization
//! runs, every reply is verified (no mismatch), and the JSON, tables and plots are written.
//! Nothing is timed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use kv_store::Serialization;

fn tmp(name: &str) -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn bench_writes_records_tables_and_plots_for_every_serialization() {
    for (workload, extra) in [
        ("google", &["--list-lens", "1-4", "--keys", "300"][..]),
        ("twitter", &["--keys", "500"][..]),
        ("cdn", &["--total-mb", "2"][..]),
    ] {
        let dir = tmp(&format!("kv-bench-{workload}"));
        let out = Command::new(env!("CARGO_BIN_EXE_kv"))
            .args(["bench", "--datapath", "socket", "--workload", workload])
            .args(extra)
            .args([
                "--rates",
                "300,600",
                "--duration",
                "0.05",
                "--warmup",
                "0.01",
                "--timeout-ms",
                "2000",
                "--requests",
                "300",
                "--out",
            ])
            .arg(&dir)
            .output()
            .expect("run kv bench");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kv bench {workload} failed:\n{stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
        let recs = v.as_array().unwrap();
        for s in Serialization::ALL {
            let mine: Vec<_> = recs.iter().filter(|r| r["mode"] == s.name()).collect();
            assert!(!mine.is_empty(), "{workload}: no record for {s}");
            assert!(stdout.contains(&format!("| {} |", s.name())), "{stdout}");
        }
        for r in recs {
            assert_eq!(r["mismatched"], 0, "{workload}: {r}");
            assert!(r["verified"].as_u64().unwrap() > 0, "{workload}: {r}");
            // The speed canary ran before every point.
            assert!(r["canary_ratio"].as_f64().unwrap() > 0.0, "{workload}: {r}");
        }
        assert!(stdout.contains("Datapath: kernel UDP sockets"), "{stdout}");
        assert!(stdout.contains("Table 5 form"), "{stdout}");
        match workload {
            "google" => assert!(stdout.contains("Table 1 form"), "{stdout}"),
            "cdn" => assert!(stdout.contains("objects/s"), "{stdout}"),
            _ => {}
        }
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(
            run["servers"].as_array().unwrap().len(),
            Serialization::ALL.len()
        );
        for s in run["servers"].as_array().unwrap() {
            assert_eq!(s["malformed"], 0, "{s}");
        }
        assert!(dir.join("tables.md").exists());
        assert!(dir.join("kv.svg").exists() && dir.join("kv.png").exists());
    }
}

#[test]
fn server_and_client_as_two_processes() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args([
            "server",
            "--serialization",
            "cornflakes",
            "--bind",
            "127.0.0.1:0",
            "--workload",
            "ycsb",
            "--keys",
            "200",
            "--seconds",
            "60",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kv server");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let addr = loop {
        let l = lines.next().expect("server output").unwrap();
        if let Some(rest) = l.split(" on ").nth(1).filter(|_| l.contains("ready")) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    let dir = tmp("kv-client");
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["client", "--server", &addr, "--serialization", "cornflakes"])
        .args(["--workload", "ycsb", "--keys", "200", "--rates", "300"])
        .args([
            "--duration",
            "0.05",
            "--warmup",
            "0.01",
            "--timeout-ms",
            "2000",
            "--out",
        ])
        .arg(&dir)
        .output()
        .expect("run kv client");
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kv client failed:\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
    let r = &v.as_array().unwrap()[0];
    assert_eq!(r["mismatched"], 0, "{r}");
    assert!(r["verified"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    let mut cases = vec![
        (&["bench", "--workload", "nope"][..], "unknown workload"),
        (
            &["bench", "--serializations", "thrift"][..],
            "unknown serialization",
        ),
        (
            &["bench", "--datapath", "mlx5"][..],
            "emu, socket, tcp or xdp",
        ),
        (
            &["bench", "--datapath", "socket", "--peers", "mysql"][..],
            "mysql",
        ),
        (
            &["server", "--serialization", "resp", "--datapath", "xdp"][..],
            "--ifname",
        ),
        (
            &["server", "--serialization", "resp", "--datapath", "mlx5"][..],
            "--mlx5-dev",
        ),
        (
            &["server", "--serialization", "resp", "--datapath", "nope"][..],
            "socket, tcp, xdp, mlx5 or ice",
        ),
        (&["client", "--serialization", "resp"][..], "--server"),
        (&["frobnicate"][..], "unknown command"),
    ];
    if !cfg!(feature = "mlx5") {
        // The launcher's NIC errors themselves are tested in crates/app-server/tests/launch.rs.
        cases.push((
            &[
                "server",
                "--serialization",
                "resp",
                "--datapath",
                "mlx5",
                "--mlx5-dev",
                "mlx5_99",
            ][..],
            "cargo run --release -p kv-store --features mlx5 --bin kv",
        ));
    }
    if !cfg!(feature = "xdp") {
        cases.push((
            &["bench", "--datapath", "xdp"][..],
            "needs the `xdp` feature",
        ));
        cases.push((
            &[
                "server",
                "--serialization",
                "resp",
                "--datapath",
                "xdp",
                "--ifname",
                "lo",
            ][..],
            "needs the `xdp` feature",
        ));
    }
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_kv"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn bench_on_the_emulated_nic() {
    // Skipped only when the machine cannot run it, decided before the run: a run that fails
    // (a panic, a dead device thread, a wrong reply) fails the test, whatever it printed.
    if let Err(e) = emu_bench::two_cores() {
        test_skip::skip("bench_on_the_emulated_nic", &e.to_string());
        return;
    }
    let dir = tmp("kv-bench-emu");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kv"));
    cmd.args([
        "bench",
        "--datapath",
        "emu",
        "--workload",
        "ycsb",
        "--keys",
        "200",
    ])
    .args(["--serializations", "cornflakes,cornflakes-no-ssend,resp"])
    .args(["--rates", "2000", "--duration", "0.05", "--warmup", "0.01"])
    .args(["--sample-every", "1", "--check-every", "1", "--trials", "1"])
    // A DDIO-like device (every line of each request demoted): a cache hint, so every
    // reply must still verify.
    .args(["--demote-lines", "1000"])
    .args(["--timeout-ms", "2000", "--requests", "200", "--out"])
    .arg(&dir)
    // The whole search twice: every output per repeat, the ratios over both.
    .args(["--repeat", "2"]);
    // A panic of any thread, a non-zero exit or a hang past the limit fails the test.
    let out = test_skip::success_within(cmd, Duration::from_secs(240), "kv bench --datapath emu");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("emulated ConnectX"), "{stdout}");
    // The compact table first, then the ratios over the two repeats.
    let first = stdout
        .lines()
        .find(|l| l.starts_with("| "))
        .unwrap_or_default();
    assert!(
        first.starts_with("| mode | kept up (k req/s) | spread over 2 repeats |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Ratios: the median of the 2 repeats"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
    let recs = v.as_array().unwrap();
    // One record per load of each serialization, per repeat.
    assert_eq!(recs.len(), 6);
    for repeat in [1, 2] {
        assert_eq!(recs.iter().filter(|r| r["repeat"] == repeat).count(), 3);
    }
    for r in recs {
        assert_eq!(r["mismatched"], 0, "{r}");
        assert!(r["verified"].as_u64().unwrap() > 0, "{r}");
    }
    // The saturation search's summary per serialization, and every trial: with
    // --check-every 1 --sample-every 1 every verified reply was decoded.
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap()
    };
    let summary = read("emu-summary.json");
    assert_eq!(summary.as_array().unwrap().len(), 6);
    for s in summary.as_array().unwrap() {
        assert_eq!(s["trials"], 1, "{s}");
        assert!(s["bounded_by"].is_string(), "{s}");
        assert!(s["repeat"] == 1 || s["repeat"] == 2, "{s}");
        // Where the server's time went at its best load (when one kept up).
        if !s["best"].is_null() {
            assert!(
                s["best"]["server_time"]["requests"].as_u64().unwrap() > 0,
                "{s}"
            );
        }
    }
    // Every trial: where the server's time went.
    for p in read("emu-points.json").as_array().unwrap() {
        let t = &p["server_time"];
        assert!(t["busy_ns_per_request"].as_f64().unwrap() > 0.0, "{p}");
        assert!(
            t["parts"]["handler"]["share"].as_f64().unwrap() > 0.0,
            "{p}"
        );
        assert_eq!(t["requests"], p["verified"], "{p}");
    }
    // The ratios over both repeats (serialize-and-send's, when both modes kept a load up in
    // some repeat: a busy machine may keep neither up at this load), with its floor.
    let ratios = read("ratios.json");
    assert_eq!(ratios["repeats"], 2);
    for r in ratios["ratios"].as_array().unwrap() {
        assert_eq!(r["per_repeat"].as_array().unwrap().len(), 2, "{r}");
        if r["ratio"] == "serialize_and_send" {
            assert_eq!(r["floor"], 1.07, "{r}");
        }
    }
    for f in ["kv.svg", "kv.png", "kv-latency.svg", "kv-latency.png"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    for p in read("emu-points.json").as_array().unwrap() {
        assert_eq!(p["sampled"], p["verified"], "{p}");
        assert_eq!(p["unchecked"], 0, "{p}");
        assert_eq!(p["coverage_complete"], true, "{p}");
        assert!(p["canary"]["ratio"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["slowed"].is_boolean(), "{p}");
        // Runs thrown away as slowed before the trial (default: up to 2 reruns).
        assert_eq!(p["slowed_retries"], 2, "{p}");
        let reruns = p["thrown_slowed_runs"].as_array().unwrap().len();
        assert_eq!(p["slowed_reruns"], reruns, "{p}");
    }
    for s in summary.as_array().unwrap() {
        assert!(s["slowed_reruns"].is_u64(), "{s}");
    }
    for r in recs {
        assert!(r["canary_ratio"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["slowed_reruns"].is_u64(), "{r}");
    }
    // The search's full table (and its footnotes) in the files, per repeat.
    let full = std::fs::read_to_string(dir.join("emu.md")).unwrap();
    assert!(
        full.contains("| slowed trials (there / all) | rerun for slowness (there / all) |"),
        "{full}"
    );
    assert!(full.contains("### Repeat 2 of 2"), "{full}");
    let tables = std::fs::read_to_string(dir.join("tables.md")).unwrap();
    assert!(
        tables.contains(&full),
        "tables.md ends with the search's tables"
    );
}

#[test]
fn peers_run_beside_the_store_on_the_socket_datapath_labelled_as_other_systems() {
    let test = "peers_run_beside_the_store_on_the_socket_datapath_labelled_as_other_systems";
    let have: Vec<&str> = [("redis", "redis-server"), ("memcached", "memcached")]
        .into_iter()
        .filter(|(_, bin)| kv_peers::server::find_binary(bin).is_some())
        .map(|(p, _)| p)
        .collect();
    if have.is_empty() {
        test_skip::skip(
            test,
            "neither redis-server nor memcached is installed (crates/kv-peers/APT_PACKAGES)",
        );
        return;
    }
    let dir = tmp("kv-bench-peers");
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["bench", "--datapath", "socket", "--workload", "twitter"])
        .args(["--keys", "300", "--serializations", "cornflakes,protobuf"])
        .args(["--peers", &have.join(",")])
        .args(["--rates", "300", "--duration", "0.1", "--warmup", "0.02"])
        .args(["--timeout-ms", "2000", "--requests", "300", "--out"])
        .arg(&dir)
        .output()
        .expect("run kv bench --peers");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kv bench --peers failed:\n{stderr}");
    let peers: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("peers.json")).unwrap()).unwrap();
    let recs = peers.as_array().unwrap();
    assert!(!recs.is_empty());
    for r in recs {
        assert_eq!(r["mismatched"], 0, "{r}");
        assert!(r["verified"].as_u64().unwrap() > 0, "{r}");
        assert!(r["mode"].as_str().unwrap().contains("(TCP,"), "{r}");
    }
    let tables = std::fs::read_to_string(dir.join("tables.md")).unwrap();
    assert!(tables.contains("### Beside other systems"), "{tables}");
    assert!(
        tables.contains("| Cornflakes KV store, cornflakes | UDP"),
        "{tables}"
    );
    assert_eq!(
        tables
            .matches("— a different system | TCP, kernel |")
            .count(),
        have.len(),
        "{tables}"
    );
    assert!(dir.join("peers.md").exists());
    // The KV's own outputs are unchanged by the peers: no peer record in kv.json.
    let kv = std::fs::read_to_string(dir.join("kv.json")).unwrap();
    assert!(!kv.contains("TCP"), "{kv}");
    // Anything but the socket datapath is refused up front.
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["bench", "--datapath", "emu", "--peers", "redis"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--datapath socket"));
}
