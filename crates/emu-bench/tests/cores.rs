//! N server cores over one emulated port: one queue set per core steered by destination UDP
//! port, one server thread per core. The plumbing runs unpinned (`pin: false`), so 2 server
//! cores and the device fit a 2-CPU machine; no test asserts a speed (and an unpinned run's
//! numbers mean nothing).

mod common;

use cornflakes::PinnedMemory;
use datapath_mlx5::emu::threaded::allowed_cores;
use emu_bench::{cores_for, run, run_cores, EmuReport, EmuRunConfig, Request, ServerPort};

use common::{cfg, check_echo, echo_until_stopped, requests, serial};

/// What one core's server did.
#[derive(Debug)]
struct Served {
    core: usize,
    echoed: u64,
    live_after: usize,
}

/// A zero-copy echo server on its own memory and datapath; yields when idle (the test's
/// threads share CPUs).
fn echo_core(port: ServerPort) -> Served {
    let mem = PinnedMemory::new(port.memory_config()).expect("memory");
    let mut dp = port.datapath(mem.clone()).expect("datapath");
    let echoed = echo_until_stopped(&mut dp, &port);
    drop(dp);
    Served {
        core: port.core(),
        echoed,
        live_after: mem.stats().live_items,
    }
}

/// `reqs` on two unpinned echo cores, every reply checked byte for byte against its request.
fn echo_on_two_cores(reqs: &[Request]) -> (EmuReport, Vec<Served>) {
    run_cores(&cfg(2), reqs, check_echo(reqs), echo_core).expect("run")
}

#[test]
fn two_server_cores_each_answer_exactly_the_requests_sent_to_their_port() {
    let _g = serial();
    let (report, served) = echo_on_two_cores(&requests(16, 2));
    assert_eq!(report.cores, 2);
    assert_eq!(report.per_core.len(), 2);
    assert_eq!(served.len(), 2);
    let c = report.run.counters;
    assert!(c.sent > 1000, "{c}");
    // Every reply came from the core (port and queue set) its request was sent to, was right,
    // and came once: a reply from another core counts as mismatched, a second reply to the
    // same request as unexpected.
    assert_eq!(
        c.mismatched + c.unexpected + c.malformed,
        0,
        "{c} {:?}",
        report.failures
    );
    // Nothing lost but what the device could not deliver (no posted buffer).
    assert_eq!(c.lost, report.not_delivered, "{c}");
    assert_eq!(report.device.rx_steered_away, 0);
    let mut sum = loadgen::Counters::default();
    for (i, (core, s)) in report.per_core.iter().zip(&served).enumerate() {
        let k = core.counters;
        assert_eq!(s.core, i, "results come back in core order");
        // Requests alternate between the cores: each gets about half.
        assert!(k.sent > c.sent / 3, "core {i}: {k} of {c}");
        let delivered = core.device.frames_received;
        assert_eq!(k.sent - k.lost, delivered, "core {i}: {k}");
        assert_eq!(k.verified, delivered, "core {i}: {k}");
        // This core's server echoed exactly what its queue set received, and its queue set
        // sent exactly that many replies.
        assert_eq!(s.echoed, delivered, "core {i}");
        assert_eq!(core.device.frames_sent, delivered, "core {i}");
        assert_eq!(
            s.live_after, 0,
            "core {i}: every pinned buffer back in its pool"
        );
        assert!(core.achieved_rps > 0.0);
        sum.merge(&k);
    }
    assert_eq!(sum, c, "per-core counters sum to the run's");
    assert_eq!(
        report.sampled, c.verified,
        "sample_every 1 reads every reply"
    );
}

#[test]
fn more_server_cores_than_cpus_is_a_clear_error() {
    let cpus = allowed_cores().expect("affinity").len();
    // Pinned, `cpus` server cores need `cpus + 1` CPUs: refused before anything starts.
    let c = EmuRunConfig {
        pin: true,
        ..cfg(cpus)
    };
    let err = run_cores(
        &c,
        &requests(4, cpus),
        |_: usize, _: &[u8]| Ok(()),
        echo_core,
    )
    .expect_err("too few CPUs");
    assert!(err.contains(&format!("needs {} CPUs", cpus + 1)), "{err}");
    assert!(err.contains(&format!("may only run on {cpus}")), "{err}");
    if cpus >= 2 {
        let (servers, device) = cores_for(cpus - 1).expect("enough CPUs");
        assert_eq!(servers.len(), cpus - 1);
        assert!(!servers.contains(&device));
    }
    assert!(cores_for(0).is_err());
}

#[test]
fn requests_for_a_core_the_run_lacks_and_run_with_several_cores_are_refused() {
    let _g = serial();
    let err = run_cores(
        &cfg(2),
        &requests(6, 3),
        |_: usize, _: &[u8]| Ok(()),
        echo_core,
    )
    .expect_err("core 2 of 2");
    assert!(
        err.contains("request 2 is for server core 2, but the run has 2"),
        "{err}"
    );
    let err = run(
        &cfg(2),
        &requests(4, 2),
        |_: usize, _: &[u8]| Ok(()),
        echo_core,
    )
    .expect_err("one-core run");
    assert!(err.contains("use run_cores"), "{err}");
}

#[test]
fn a_split_requests_parts_go_out_together_and_count_once_in_the_latency() {
    let _g = serial();
    // Groups of two: request 2i for core 0, then its part 2i + 1 for core 1.
    let mut reqs = requests(16, 2);
    for r in reqs.iter_mut().skip(1).step_by(2) {
        r.with_previous = true;
    }
    let (report, _) = echo_on_two_cores(&reqs);
    let c = report.run.counters;
    assert_eq!(c.mismatched + c.unexpected + c.malformed, 0, "{c}");
    // Offered stays in wire requests (parts); both halves of every group were sent.
    assert_eq!(report.run.offered_rps, 8_000.0);
    let (a, b) = (report.per_core[0].counters, report.per_core[1].counters);
    assert_eq!(a.sent, b.sent, "{a} {b}");
    // One latency sample per measured group whose two parts were both verified: at most half
    // the measured parts, and all of them when nothing was lost.
    let measured_parts: u64 = report.per_core.iter().map(|k| k.counters.verified).sum();
    let groups = report.run.latency.len();
    assert!(groups > 0);
    assert!(
        2 * groups <= measured_parts,
        "{groups} groups, {measured_parts} parts"
    );
    if c.lost == 0 {
        // Warm-up parts are verified but not measured; every measured group is complete.
        assert!(
            2 * groups >= report.run.measured_requests - 2,
            "{groups} groups of {} measured parts",
            report.run.measured_requests
        );
    }
}

/// Sampled checking on two cores: each core, and each distinct request, still has a checked
/// reply in the measured window, while most replies are read but not checked.
#[test]
fn sampled_checking_covers_every_core() {
    let _g = serial();
    let reqs = requests(16, 2);
    let c = EmuRunConfig {
        check_every: 1 << 40,
        sample_every: 1 << 40,
        ..cfg(2)
    };
    let (report, _) = run_cores(&c, &reqs, check_echo(&reqs), echo_core).expect("run");
    let k = report.run.counters;
    assert_eq!(k.mismatched + k.malformed, 0, "{k} {:?}", report.failures);
    assert_eq!(report.checked() + report.unchecked, k.verified);
    assert!(
        report.unchecked > k.verified / 2,
        "{}",
        report.coverage_note()
    );
    assert_eq!(
        (report.cores_verified, report.cores),
        (2, 2),
        "{}",
        report.coverage_note()
    );
    assert_eq!(
        (report.distinct_verified, report.distinct_answered),
        (16, 16),
        "{}",
        report.coverage_note()
    );
    assert!(report.coverage_complete());
}
