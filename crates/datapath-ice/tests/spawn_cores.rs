//! `spawn::spawn_cores`, the per-core server plumbing the echo and KV servers' `--datapath
//! ice --cores N` run on, on DPDK's `net_ring` virtual device (`--no-huge --vdev net_ring0`:
//! an in-process port with 16 queue pairs, no PCI, no hugepages). What runs: the CPUs chosen
//! before the EAL starts, the EAL started from the command-line arguments, the port claimed
//! with one queue pair per core, each core's thread pinned to its own CPU and opening its own
//! queue pair, the address and queue description each core is handed, every core ready before
//! `spawn_cores` returns, the steering decided by then, the cores stopping together. The
//! errors before the EAL (no device named, more cores than CPUs) say what was wrong.
//!
//! What does not run here: traffic (tests/cores.rs sends it over a two-queue `net_ring` link)
//! and `rte_flow` steering (`net_ring` has no flow API, so the steering is `Unsupported`).
//! The EAL starts once per process, so this is its own test binary with one test.

mod common;

#[cfg(not(feature = "ice"))]
#[test]
fn spawn_cores_needs_the_ice_feature() {
    common::ICE.skip(
        "datapath-ice spawn_cores",
        "built without `--features ice` (needs DPDK 22.11, see crates/datapath-ice/APT_PACKAGES)",
    );
}

#[cfg(feature = "ice")]
mod with_dpdk {
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use cornflakes::datapath::{Connect, Receive};
    use datapath_ice::spawn::spawn_cores;
    use datapath_ice::Steering;

    const ARGS: &str = "--no-huge --vdev net_ring0 --log-level warning";
    const BASE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 7100);
    const CORES: usize = 2;

    /// What one core saw on its own thread.
    #[derive(Debug)]
    struct CoreRun {
        index: usize,
        cpu: Option<usize>,
        /// The CPU the thread was running on while serving.
        ran_on: usize,
        local: SocketAddrV4,
        polls: u64,
    }

    fn current_cpu() -> usize {
        // SAFETY: sched_getcpu has no preconditions; a negative result is an error.
        let c = unsafe { libc::sched_getcpu() };
        assert!(c >= 0, "sched_getcpu: {}", std::io::Error::last_os_error());
        c as usize
    }

    #[test]
    fn spawn_cores_opens_one_pinned_queue_pair_per_core_on_a_net_ring_port() {
        let test = "spawn_cores_opens_one_pinned_queue_pair_per_core_on_a_net_ring_port";
        let allowed = percore::allowed_cores().expect("CPU affinity");

        // Errors found before DPDK starts (the EAL can start only once per process).
        let cc = percore::CoresConfig::new("spawn-test", allowed.len() + 1);
        let e = spawn_cores(ARGS, BASE, 1500, &cc, |_, _, _, _| Ok(())).unwrap_err();
        assert!(e.contains("server cores asked for"), "{e}");
        let cc = percore::CoresConfig::new("spawn-test", 1);
        let e = spawn_cores("--no-huge", BASE, 1500, &cc, |_, _, _, _| Ok(())).unwrap_err();
        assert!(
            e.starts_with("starting DPDK with \"--no-huge\" for 1 cores:")
                && e.contains("name no device"),
            "{e}"
        );

        if allowed.len() < CORES {
            super::common::ICE.skip(test, "two pinned server cores need 2 CPUs");
            return;
        }
        let cc = percore::CoresConfig::new("spawn-test", CORES);
        let (running, steering) =
            spawn_cores(ARGS, BASE, 1500, &cc, |mut dp, core, ready, info| {
                let local = dp.local_addr();
                ready.ready(info);
                let mut got = Vec::new();
                let mut polls = 0u64;
                while !core.stop().load(Ordering::Relaxed) {
                    dp.recv_burst(&mut got).map_err(|e| e.to_string())?;
                    polls += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(CoreRun {
                    index: core.index(),
                    cpu: core.cpu(),
                    ran_on: current_cpu(),
                    local,
                    polls,
                })
            })
            .expect("spawn_cores on net_ring0");

        // Every core reported ready, with its own port and queue pair.
        let ready = running.ready().to_vec();
        assert_eq!(
            ready,
            (0..CORES)
                .map(|i| (
                    SocketAddrV4::new(*BASE.ip(), BASE.port() + i as u16),
                    format!("DPDK {ARGS}, queue pair {i}")
                ))
                .collect::<Vec<_>>()
        );
        // The last core to open its queue started the port and the steering was decided.
        match &steering {
            Steering::Unsupported(why) => test_skip::skip(
                "rte_flow steering (destination UDP port -> queue)",
                &format!("net_ring has no flow API: {why}"),
            ),
            other => panic!("net_ring steering: {other:?}"),
        }

        std::thread::sleep(Duration::from_millis(50));
        let runs = running.stop().expect("cores stop cleanly");
        assert_eq!(runs.len(), CORES);
        for (i, run) in runs.iter().enumerate() {
            assert_eq!(run.index, i, "{run:?}");
            assert_eq!(
                run.local, ready[i].0,
                "core {i} serves at its reported address"
            );
            // Pinned to the i-th CPU chosen before the EAL pinned this thread to lcore 0.
            assert_eq!(run.cpu, Some(allowed[i]), "{run:?}");
            assert_eq!(run.ran_on, allowed[i], "{run:?}");
            assert!(run.polls > 0, "core {i} polled its queue: {run:?}");
        }
    }
}
