//! `kv bench --datapath emu --cores N`: N KV servers, one per core, each with its own pinned
//! memory, shard and datapath on its own queue set of the emulated ConnectX, every request
//! sent to the core owning its key and a getm/putm over several cores split into parts whose
//! replies are verified one by one and merged (`docs/cores.md`). The plumbing is tested
//! unpinned (functional only: 2 server cores and the device share this machine's CPUs, so no
//! number of it means anything); the pinned command must refuse clearly when the machine
//! lacks N + 1 CPUs.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use app_server::{Handler, Unanswered};
use cornflakes::{Datapath, RxMsg};
use kv_store::bench::{BenchConfig, DatapathKind};
use kv_store::client::{Expected, RunRequests};
use kv_store::emu::KvEmu;
use kv_store::server::{Kv, ServerStats};
use kv_store::steer::{core_of, owner};
use kv_store::store::StoreStats;
use kv_store::{Op, OpKind, Serialization, Shared};
use kv_workloads::{Workload, WorkloadConfig, YcsbConfig};
use loadgen::args::LoadConfig;
use percore::allowed_cores;

const CORES: usize = 2;
const KEYS: u64 = 2000;

fn config() -> BenchConfig {
    BenchConfig {
        datapath: DatapathKind::Emu,
        workload: WorkloadConfig::Ycsb(YcsbConfig {
            keys: KEYS,
            values_per_request: 4,
            value_size: 1024,
            ..YcsbConfig::default()
        }),
        serializations: vec![
            Serialization::Shared(Shared::CORNFLAKES),
            Serialization::Shared(Shared::PROTOBUF),
        ],
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
        cores: CORES,
        ..BenchConfig::default()
    }
}

/// YCSB getm of 4 keys (most span both cores), then a putm over both cores and a getm of
/// the same keys (which may see the loaded or the written values).
fn requests(w: &dyn Workload) -> Vec<Op> {
    let mut ops = w.requests(150, 3);
    let mut keys: Vec<String> = Vec::new();
    for (k, _) in w.load() {
        let core = core_of(&k, CORES);
        if keys.iter().filter(|o| core_of(o, CORES) == core).count() < 2 {
            keys.push(k);
        }
        if keys.len() == 4 {
            break;
        }
    }
    let vals = (0..keys.len())
        .map(|i| vec![b'a' + i as u8; 1000])
        .collect();
    ops.push(Op::PutM {
        keys: keys.clone(),
        vals,
    });
    ops.push(Op::GetM { keys });
    ops
}

#[test]
fn two_kv_cores_answer_each_key_from_its_owner_and_split_requests_merge() {
    let cfg = config();
    let w: Arc<dyn Workload> = Arc::from(cfg.workload.build().unwrap());
    let ops = requests(w.as_ref());
    let expected = Arc::new(Expected::for_workload(w.clone(), &ops));
    let reqs = Arc::new(RunRequests { ops, threads: 1 });
    let emu = KvEmu::new(&cfg, reqs, expected).expect("plan");
    let plan = emu.plan();

    // Every wire request goes to the core that owns all its keys; a split request's parts
    // cover its keys; the putm and the last getm are split.
    let n_ops = plan.ops().len();
    assert!(
        plan.split_requests() > n_ops / 2,
        "4-key getms mostly span 2 cores"
    );
    assert!(plan.parts_per_request() > 1.0);
    let mut keys_of = vec![0usize; n_ops];
    for k in 0..plan.len() {
        let (i, core, op) = plan.request(k);
        assert_eq!(owner(op, CORES), Some(core), "wire request {k}");
        keys_of[i] += op.keys().len();
    }
    for (i, op) in plan.ops().iter().enumerate() {
        assert_eq!(
            keys_of[i],
            op.keys().len(),
            "request {i}: every key in one part"
        );
    }
    let split_putm = (0..plan.len())
        .filter(|&k| matches!(plan.request(k).2, Op::PutM { .. }))
        .count();
    assert_eq!(split_putm, CORES, "the putm is sent as one part per core");

    // Each core's shard: the loaded keys it owns.
    let mut shard = [0u64; CORES];
    for (k, _) in w.load() {
        shard[core_of(&k, CORES)] += 1;
    }
    for ser in [
        Serialization::Shared(Shared::CORNFLAKES),
        Serialization::Shared(Shared::PROTOBUF),
    ] {
        let point = emu.run_point(&cfg, ser, 3_000.0, 7, false).expect("run");
        let (report, per_core) = (&point.report, &point.per_core);
        let c = report.run.counters;
        assert!(
            c.sent as usize > plan.len(),
            "{ser}: every wire request sent: {c}"
        );
        // Every reply decoded to what the store holds and came from the core (port and queue
        // set) its request went to, exactly once.
        assert_eq!(
            c.mismatched + c.unexpected + c.malformed,
            0,
            "{ser}: {c} {:?}",
            report.failures
        );
        assert_eq!(c.lost, report.not_delivered, "{ser}: {c}");
        assert_eq!(report.sampled, c.verified, "{ser}");
        // Every split request's parts were answered, and merged they answer the whole request.
        if c.lost == 0 {
            assert_eq!(point.merged as usize, plan.split_requests(), "{ser}");
        } else {
            assert!(point.merged > 0, "{ser}");
        }
        assert_eq!((report.cores, per_core.len()), (CORES, CORES));
        let (mut sent, mut verified, mut rps) = (0, 0, 0.0);
        for (i, (core, st)) in report.per_core.iter().zip(per_core).enumerate() {
            let delivered = core.device.frames_received;
            assert!(
                core.counters.sent > c.sent / 4,
                "{ser} core {i}: {}",
                core.counters
            );
            assert_eq!(core.counters.verified, delivered, "{ser} core {i}");
            // Each core's own server received and answered exactly the requests sent to it,
            // held exactly its shard, and never saw another core's key.
            assert_eq!(
                (st.received, st.replied),
                (delivered, delivered),
                "{ser} core {i}: {st}"
            );
            assert_eq!(st.malformed + st.send_failed + st.io_errors, 0, "{st}");
            assert_eq!(st.app.foreign, 0, "{ser} core {i}: {st}");
            assert_eq!(st.app.keys as u64, shard[i], "{ser} core {i}: {st}");
            sent += core.counters.sent;
            verified += core.counters.verified;
            rps += core.achieved_rps;
        }
        // Per-core counters sum to the run's; the rates are in whole requests (the parts'
        // rate divided by the parts per request).
        assert_eq!((sent, verified), (c.sent, c.verified), "{ser}");
        assert!(
            (rps - report.run.achieved_rps).abs() <= 1e-6 * rps.max(1.0),
            "{ser}: {rps} vs {}",
            report.run.achieved_rps
        );
        assert!(
            (report.run.offered_rps - 3_000.0).abs() < 300.0,
            "{ser}: offered {} whole requests/s",
            report.run.offered_rps
        );
        let sum = ServerStats::sum(per_core);
        assert_eq!(sum.replied, c.verified, "{ser}: {sum}");
    }
}

#[test]
fn replies_that_do_not_match_the_store_are_mismatched_part_by_part() {
    // The same run, checked against a store holding other values: every part's reply is
    // rejected, so the checker is not vacuous.
    let cfg = BenchConfig {
        serializations: vec![Serialization::Shared(Shared::CORNFLAKES)],
        ..config()
    };
    let w: Arc<dyn Workload> = Arc::from(cfg.workload.build().unwrap());
    let ops = requests(w.as_ref());
    let wrong = Arc::new(Expected::new(
        Box::new(|_: &str| Some(vec![b"not the loaded value".to_vec()])),
        &ops,
    ));
    let emu = KvEmu::new(&cfg, Arc::new(RunRequests { ops, threads: 1 }), wrong).expect("plan");
    let point = emu
        .run_point(
            &cfg,
            Serialization::Shared(Shared::CORNFLAKES),
            2_000.0,
            9,
            false,
        )
        .expect("run");
    let c = point.report.run.counters;
    assert!(c.mismatched > 0, "{c}");
    // Only the putm (its parts answer a status, no value) and the getm of the values it
    // wrote (the checker knows those) can merge; none of the loaded values' getms.
    assert!(
        point.merged <= 2,
        "{} merged from wrong parts",
        point.merged
    );
    assert!(
        point.report.failures.iter().any(|f| f.contains("part")),
        "{:?}",
        point.report.failures
    );
}

#[test]
fn bench_with_more_cores_than_the_machine_has_cpus_for_is_a_clear_error() {
    // N = every CPU: N servers plus the device need one more than there are, on any machine.
    let n = allowed_cores().expect("affinity").len();
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["bench", "--datapath", "emu", "--cores"])
        .arg(n.to_string())
        .args(["--duration", "0.05", "--rates", "1000", "--keys", "100"])
        .output()
        .expect("run kv bench");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--cores {n}"))
            && stderr.contains(&format!("needs {} CPUs", n + 1)),
        "{stderr}"
    );
}

/// An append of `val` to a loaded key, a getlist of that key, then 3000 gets of 63 other
/// loaded keys: more requests than a trial sends, so the append and the getlist go out once.
fn append_then_reads(w: &dyn Workload, val: &[u8]) -> Vec<Op> {
    let keys: Vec<String> = w.load().map(|(k, _)| k).take(64).collect();
    let mut ops = vec![
        Op::Append {
            key: keys[0].clone(),
            val: val.to_vec(),
        },
        Op::GetList {
            key: keys[0].clone(),
        },
    ];
    ops.extend((0..3000).map(|i| Op::Get {
        key: keys[1 + i % 63].clone(),
    }));
    ops
}

#[test]
fn every_trial_on_resident_cores_starts_from_the_loaded_store() {
    // One core, loaded once for three trials. Each trial sends an append to a key, a getlist
    // of it, then reads of other keys: more requests than a trial sends, so no trial wraps
    // around to the append again. The getlist answers the loaded list plus one value only if
    // the trial began with the loaded store; a store carried over from the trial before
    // would hold the value twice (or, with 2 cores, any other leftover) and mismatch.
    for cores in [1, CORES] {
        let cfg = BenchConfig { cores, ..config() };
        let w: Arc<dyn Workload> = Arc::from(cfg.workload.build().unwrap());
        let ops = append_then_reads(w.as_ref(), b"appended once per trial");
        let expected = Arc::new(Expected::for_workload(w.clone(), &ops));
        let emu =
            KvEmu::new(&cfg, Arc::new(RunRequests { ops, threads: 1 }), expected).expect("plan");
        let points = emu
            .with_cores(&cfg, false, |c| {
                assert_eq!(c.loaded().len(), cores);
                assert!(c.loaded()[0].starts_with("loaded "), "{:?}", c.loaded());
                [
                    Serialization::Shared(Shared::CORNFLAKES),
                    Serialization::Shared(Shared::PROTOBUF),
                    Serialization::Shared(Shared::CORNFLAKES),
                ]
                .iter()
                .enumerate()
                .map(|(i, &ser)| c.run_point(&cfg, ser, 3_000.0, 11 + i as u64))
                .collect::<Result<Vec<_>, String>>()
            })
            .expect("three trials");
        for (i, p) in points.iter().enumerate() {
            let c = p.report.run.counters;
            assert!(
                c.sent > 200 && (c.sent as usize) < 3002,
                "{cores} cores, trial {i}: no wrap: {c}"
            );
            assert_eq!(
                c.mismatched + c.unexpected + c.malformed,
                0,
                "{cores} cores, trial {i}: {c} {:?}",
                p.report.failures
            );
            assert_eq!(p.report.sampled, c.verified, "every reply decoded");
            let st = ServerStats::sum(&p.per_core);
            assert_eq!(st.app.keys as u64, KEYS, "{cores} cores, trial {i}: {st}");
        }
    }
}

/// A server that lies once: it answers the first `getlist` it receives from a store no write
/// of the trial reaches, i.e. with the value the key held before the trial's own append; every
/// other request is served honestly.
struct StaleOnce {
    live: Kv,
    stale: Option<Kv>,
}

impl Handler for StaleOnce {
    type Counters = StoreStats;

    fn label(&self) -> String {
        self.live.label()
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        if m.msg.ty == OpKind::GetList.msg_type() {
            if let Some(mut before) = self.stale.take() {
                return before.handle(dp, m);
            }
        }
        self.live.handle(dp, m)
    }

    fn counters(&self) -> StoreStats {
        self.live.counters()
    }
}

/// The control of the checker's store model: an append to a key, then a read of the key's list
/// answered with the list as it was before the append (the previous value, one the key did
/// hold). The checker must reject exactly that reply: a checker that accepted any value a key
/// has ever held (instead of the one it holds now) passes every other test here.
#[test]
fn a_server_answering_a_read_with_the_previous_value_fails_the_checker() {
    for cores in [1, CORES] {
        let cfg = BenchConfig {
            cores,
            serializations: vec![Serialization::Shared(Shared::CORNFLAKES)],
            ..config()
        };
        let w: Arc<dyn Workload> = Arc::from(cfg.workload.build().unwrap());
        let ops = append_then_reads(w.as_ref(), b"the value after");
        let expected = Arc::new(Expected::for_workload(w.clone(), &ops));
        let emu =
            KvEmu::new(&cfg, Arc::new(RunRequests { ops, threads: 1 }), expected).expect("plan");
        let ser = Serialization::Shared(Shared::CORNFLAKES);
        let point = emu
            .with_cores(&cfg, false, |c| {
                c.run_point_serving(&cfg, ser, 3_000.0, 13, |live, loaded| StaleOnce {
                    live,
                    stale: Some(loaded()),
                })
            })
            .expect("run");
        let c = point.report.run.counters;
        assert!(
            c.sent > 200 && (c.sent as usize) < 3002,
            "{cores} cores: {c}"
        );
        assert_eq!(
            (c.mismatched, c.unexpected, c.malformed),
            (1, 0, 0),
            "{cores} cores: the one stale reply, and only it, is wrong: {c} {:?}",
            point.report.failures
        );
        assert!(
            point.report.failures.iter().any(|f| f.contains("getlist")),
            "{cores} cores: {:?}",
            point.report.failures
        );
    }
}

/// Sampled payload checks (`--check-every 4`) on the same two cores: writes still go to the
/// checker in order (every later read checked against what the store holds then), every
/// distinct request and core is covered, split requests still merge, and most reads are only
/// read (DMA) and header-checked.
#[test]
fn sampled_checks_keep_the_store_model_and_cover_every_request_and_core() {
    let mut cfg = config();
    cfg.device.check_every = 4;
    let w: Arc<dyn Workload> = Arc::from(cfg.workload.build().unwrap());
    let ops = requests(w.as_ref());
    let expected = Arc::new(Expected::for_workload(w.clone(), &ops));
    let reqs = Arc::new(RunRequests { ops, threads: 1 });
    let emu = KvEmu::new(&cfg, reqs, expected).expect("plan");
    for ser in [
        Serialization::Shared(Shared::CORNFLAKES),
        Serialization::Shared(Shared::PROTOBUF),
    ] {
        let point = emu.run_point(&cfg, ser, 3_000.0, 7, false).expect("run");
        let report = &point.report;
        let c = report.run.counters;
        assert_eq!(
            c.mismatched + c.unexpected + c.malformed,
            0,
            "{ser}: {c} {:?}",
            report.failures
        );
        assert_eq!(report.check_every, 4, "{ser}");
        assert_eq!(report.checked() + report.unchecked, c.verified, "{ser}");
        assert!(report.unchecked > 0, "{ser}: {}", report.coverage_note());
        assert!(
            report.coverage_complete(),
            "{ser}: {}",
            report.coverage_note()
        );
        assert_eq!(report.cores_verified, CORES, "{ser}");
        if c.lost == 0 {
            assert_eq!(point.merged as usize, emu.plan().split_requests(), "{ser}");
        }
    }
}
