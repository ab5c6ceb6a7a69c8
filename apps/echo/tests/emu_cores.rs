//! `echo bench --datapath emu --cores N`: N echo servers, one per core, each on its own queue
//! set of the emulated ConnectX. The plumbing is tested unpinned (functional only: 2 server
//! cores and the device share this machine's CPUs, so no number of it means anything); the
//! pinned command must refuse clearly when the machine lacks N + 1 CPUs.

use std::process::Command;
use std::time::Duration;

use echo::bench::{BenchConfig, DatapathKind};
use echo::emu::{request_payloads, run_point_with, spread_over_cores};
use echo::server::ServerStats;
use echo::{Mode, Serialization, ShapeSpec};
use loadgen::args::LoadConfig;
use percore::allowed_cores;

#[test]
fn two_echo_cores_each_answer_exactly_their_round_robin_share() {
    let cfg = BenchConfig {
        datapath: DatapathKind::Emu,
        load: LoadConfig {
            duration: Duration::from_millis(150),
            warmup: Duration::from_millis(20),
            // Generous: three threads share the CPUs.
            timeout: Duration::from_millis(800),
            ..BenchConfig::default().load
        },
        device: emu_bench::EmuSettings {
            sample_every: 1,
            check_every: 1,
            ..Default::default()
        },
        cores: 2,
        ..BenchConfig::default()
    };
    let shape: ShapeSpec = "list-2x512".parse().unwrap();
    for mode in [
        Mode::Shared(Serialization::CORNFLAKES),
        Mode::Shared(Serialization::PROTOBUF),
    ] {
        let cfg = BenchConfig {
            shape,
            ..cfg.clone()
        };
        let mut reqs = request_payloads(mode, shape, 16, cfg.load.mtu).expect("requests");
        spread_over_cores(&mut reqs, 2);
        assert!(reqs.iter().enumerate().all(|(k, r)| r.core == k % 2));
        let (report, per_core) = run_point_with(&cfg, mode, &reqs, 6_000.0, 7, false).expect("run");
        let c = report.run.counters;
        assert!(c.sent > 500, "{mode}: {c}");
        // Every reply deserialized to the values sent and came from the core (port and queue
        // set) its request went to, exactly once.
        assert_eq!(
            c.mismatched + c.unexpected + c.malformed,
            0,
            "{mode}: {c} {:?}",
            report.failures
        );
        assert_eq!(c.lost, report.not_delivered, "{mode}: {c}");
        assert_eq!(report.sampled, c.verified, "{mode}");
        assert_eq!((report.cores, per_core.len()), (2, 2));
        for (i, (core, st)) in report.per_core.iter().zip(&per_core).enumerate() {
            let delivered = core.device.frames_received;
            assert!(
                core.counters.sent > c.sent / 3,
                "{mode} core {i}: {}",
                core.counters
            );
            assert_eq!(core.counters.verified, delivered, "{mode} core {i}");
            // Each core's own server received and echoed exactly its share.
            assert_eq!(
                (st.received, st.replied),
                (delivered, delivered),
                "{mode} core {i}: {st}"
            );
            assert_eq!(st.malformed + st.send_failed + st.io_errors, 0, "{st}");
        }
        let sum = ServerStats::sum(&per_core);
        assert_eq!(sum.replied, per_core[0].replied + per_core[1].replied);
        assert_eq!(sum.replied, c.verified, "{mode}: {sum}");
        assert_eq!(
            sum.work.len(),
            per_core[0].work.len() + per_core[1].work.len()
        );
    }
}

#[test]
fn bench_with_more_cores_than_the_machine_has_cpus_for_is_a_clear_error() {
    // N = every CPU: N servers plus the device need one more than there are, on any machine.
    let n = allowed_cores().expect("affinity").len();
    let out = Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["bench", "--datapath", "emu", "--cores"])
        .arg(n.to_string())
        .args(["--duration", "0.05", "--rates", "1000"])
        .output()
        .expect("run echo bench");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--cores {n}"))
            && stderr.contains(&format!("needs {} CPUs", n + 1)),
        "{stderr}"
    );
    // And --cores is refused on the bench's datapath that runs one server core (xdp).
    let out = Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["bench", "--datapath", "xdp", "--cores", "2"])
        .args(["--duration", "0.05", "--rates", "1000"])
        .output()
        .expect("run echo bench");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("runs on the socket and emu datapaths"),
        "{stderr}"
    );
}
