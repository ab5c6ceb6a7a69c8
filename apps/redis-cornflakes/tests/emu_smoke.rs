//! `redis-cf-bench --datapath emu` end to end, short: the patched redis-server on the mlx5
//! driver against the emulated ConnectX, GET, LRANGE and Twitter's GETs and SETs in both
//! formats at one load, every reply checked by the device (Twitter's against what its key holds
//! when Redis handles it). Functional, not a measurement: it asserts that nothing was answered
//! wrong, that the objects arm sent its values by reference (the INFO counts in the table), and
//! that the tables, Figure 8 and the charts were written — not which load was kept up.
//!
//! It needs the patched server (`scripts/redis-cornflakes.sh` builds it in a minute or two), so
//! it is ignored in the workspace's tests: `apps/redis-cornflakes/test/run.sh` builds the server
//! and runs it (`cargo test -p redis-cornflakes --test emu_smoke -- --ignored`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[test]
#[ignore = "needs the patched redis-server: apps/redis-cornflakes/test/run.sh builds it and runs this"]
fn redis_on_the_emulated_connectx_answers_every_request_right_in_both_formats() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        test_skip::skip(
            "redis_on_the_emulated_connectx_answers_every_request_right_in_both_formats",
            &format!("the emulated ConnectX needs two CPUs (server and device); this has {cpus}"),
        );
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let server = target.join("redis-cornflakes/src/src/redis-server");
    assert!(
        server.is_file(),
        "{} is missing: build it with scripts/redis-cornflakes.sh",
        server.display()
    );
    let out = std::env::temp_dir().join(format!("redis-cf-emu-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redis-cf-bench"));
    cmd.args(["--datapath", "emu", "--experiments", "get,lrange2,twitter"])
        .args(["--rates", "10000", "--duration", "0.2", "--warmup", "0.05"])
        .args(["--trials", "1", "--slowed-retries", "0", "--no-stock"])
        .arg("--redis-server")
        .arg(&server)
        .arg("--out")
        .arg(&out);
    let run = test_skip::success_within(
        cmd,
        Duration::from_secs(120),
        "redis-cf-bench --datapath emu",
    );
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(!text.contains("WRONG REPLIES"), "{text}");
    // Table 3's rows: per experiment, the Cornflakes arm's zero-copy / copied values. Every
    // value is 2 KiB or 4 KiB, over the 512-byte threshold: all by reference, none copied.
    for label in ["YCSB GET 1x4096", "YCSB LRANGE 2x2048"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no Table 3 row for {label}:\n{text}"));
        let counts = row.trim_end_matches(" |").rsplit("| ").next().unwrap();
        let (zero_copy, copied) = counts.split_once(" / ").expect(row);
        assert!(zero_copy.parse::<u64>().unwrap() > 0, "{row}");
        assert_eq!(copied, "0", "{row}");
    }
    // The compact table of each experiment: a row per format, the search's mismatched 0.
    for mode in ["| redis resp |", "| redis cornflakes |"] {
        assert_eq!(text.matches(mode).count(), 3, "{text}");
    }
    let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(
        tables.contains("max req/s within 95% of offered"),
        "{tables}"
    );
    assert!(
        text.contains("Figure 8 on the emulated ConnectX: Twitter"),
        "{text}"
    );
    for f in [
        "redis.svg",
        "redis.png",
        "redis-latency-get.png",
        "redis-latency-lrange2.png",
        "redis-latency-twitter.svg",
        "redis-latency-twitter.png",
    ] {
        assert!(out.join(f).is_file(), "{f} was not written");
    }
    for exp in ["get", "lrange2", "twitter"] {
        for format in ["Resp", "Cornflakes"] {
            let report = out.join(format!("emu-{exp}-{format}/report.json"));
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
            let s = &r["repeats"][0]["summary"];
            assert_eq!(s["mismatched"], 0, "{report:?}: {s:#}");
            assert_eq!(s["malformed"], 0, "{report:?}: {s:#}");
            assert_eq!(s["incomplete_coverage_trials"], 0, "{report:?}: {s:#}");
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}
