//! Resident server cores: threads and state that last for a series of runs, each run on a
//! new device. Unpinned (`pin: false`), so the plumbing fits a 2-CPU machine; no test asserts
//! a speed.

mod common;

use cornflakes::{PinnedMemory, RcBuf};
use emu_bench::{memory_config, resident, ServerPort};

use common::{cfg, check_echo, echo_until_stopped, requests, serial};

/// A core's state: its memory, a buffer made once and kept across runs (a stand-in for a
/// store's contents), and the runs it has served.
struct CoreState {
    core: usize,
    mem: PinnedMemory,
    kept: RcBuf,
    runs: u32,
}

fn init(core: usize) -> Result<CoreState, String> {
    let mem = PinnedMemory::new(memory_config(9000)).map_err(|e| e.to_string())?;
    let kept = mem
        .alloc_copy(&[core as u8; 4096])
        .map_err(|e| e.to_string())?;
    Ok(CoreState {
        core,
        mem,
        kept,
        runs: 0,
    })
}

/// What one run did on one core.
#[derive(Debug, PartialEq)]
struct Served {
    core: usize,
    run: u32,
    echoed: u64,
    /// Live buffers after the run's datapath is gone: only the kept one.
    live_after: usize,
}

/// A zero-copy echo server on the core's kept memory.
fn echo(st: &mut CoreState, port: ServerPort) -> Served {
    assert_eq!(st.core, port.core(), "each core keeps its own state");
    st.runs += 1;
    let mut dp = port.datapath(st.mem.clone()).expect("datapath");
    let echoed = echo_until_stopped(&mut dp, &port);
    drop(dp);
    assert_eq!(
        st.kept[..],
        [st.core as u8; 4096][..],
        "the kept buffer survived"
    );
    Served {
        core: st.core,
        run: st.runs,
        echoed,
        live_after: st.mem.stats().live_items,
    }
}

#[test]
fn resident_cores_keep_their_state_and_memory_across_runs_on_new_devices() {
    let _g = serial();
    for cores in [1, 2] {
        let reqs = requests(12, cores);
        let c = cfg(cores);
        let results = resident(cores, false, init, |r| {
            assert_eq!(r.cores(), cores);
            (0..3)
                .map(|_| r.run(&c, &reqs, check_echo(&reqs), echo))
                .collect::<Result<Vec<_>, String>>()
        })
        .expect("three runs");
        for (run, (report, served)) in results.iter().enumerate() {
            let k = report.run.counters;
            assert!(k.sent > 500, "run {run}: {k}");
            assert_eq!(
                k.mismatched + k.unexpected + k.malformed,
                0,
                "run {run}: {k}"
            );
            assert_eq!(k.lost, report.not_delivered, "run {run}: {k}");
            assert_eq!(report.sampled, k.verified, "run {run}: every reply read");
            assert_eq!(served.len(), cores);
            for (i, s) in served.iter().enumerate() {
                assert_eq!(s.core, i, "results in core order");
                assert_eq!(s.run, run as u32 + 1, "core {i}: the state lasted");
                let delivered = report.per_core[i].device.frames_received;
                assert_eq!(s.echoed, delivered, "run {run} core {i}");
                assert_eq!(
                    s.live_after, 1,
                    "run {run} core {i}: every buffer of the run back in its pool"
                );
            }
        }
    }
}

#[test]
fn an_init_error_names_its_core_and_no_run_starts() {
    let _g = serial();
    let mut ran = false;
    let err = resident(
        2,
        false,
        |core| {
            if core == 1 {
                Err("no store".to_owned())
            } else {
                init(core)
            }
        },
        |_r: &emu_bench::Resident<CoreState, Served>| {
            ran = true;
            Ok(())
        },
    )
    .expect_err("core 1 fails");
    assert_eq!(err, "server core 1: no store");
    assert!(!ran);
}

#[test]
fn a_panicking_job_fails_its_run_and_retires_its_core() {
    let _g = serial();
    let reqs = requests(4, 1);
    let c = cfg(1);
    let (first, second, third) = resident(1, false, init, |r| {
        let first = r.run(&c, &reqs, check_echo(&reqs), |st: &mut CoreState, port| {
            let _dp = port.datapath(st.mem.clone()).expect("datapath");
            if st.runs == 0 {
                panic!("a bug in the server");
            }
            st.runs
        });
        let second = r.run(&c, &reqs, check_echo(&reqs), |st: &mut CoreState, _| {
            st.runs
        });
        let mismatch = r.run(
            &cfg(2),
            &requests(4, 2),
            check_echo(&reqs),
            |_: &mut CoreState, _| 0,
        );
        Ok((first, second, mismatch))
    })
    .expect("the cores started");
    assert_eq!(first.expect_err("panicked"), "the server thread panicked");
    let e = second.expect_err("retired");
    assert!(e.contains("serves no more runs"), "{e}");
    let e = third.expect_err("two cores asked of one");
    assert!(e.contains("asks for 2 server cores"), "{e}");
}
