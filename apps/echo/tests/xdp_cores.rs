//! `echo server --datapath xdp --cores 2` end to end (feature `xdp`, root): the server as a
//! child process in a network namespace on the server end of a veth with two queues, one XDP
//! program (`XdpProgram::for_cores`) redirecting port `BASE + i` on queue *i* to core *i*'s
//! AF_XDP socket; its clients here on kernel sockets (`docs/cores.md`, `docs/xdp.md`).
//!
//! A veth delivers a frame on the receive queue with the index of the transmit queue it was
//! sent on, which XPS picks by the sending CPU: so client thread *i* is pinned to the CPU
//! whose transmit queue is *i* and sends only to core *i*'s port. Every request must be
//! answered once, from the port it was sent to, and verified by the echo client's verifier
//! (every value compared with what was sent); each core's counters must equal what it was
//! sent. Then, from core 0's queue, one request for core 1's port (the program drops it and
//! counts it `misteered`) and one for a port no core owns (the program passes it to the
//! namespace's kernel, which has no address there and drops it; counted `passed`): neither is
//! answered, and the program's counters account for every datagram the clients sent.
//!
//! Without root, `ip`/`ethtool`, AF_XDP or the `xdp` feature the test says SKIPPED on stderr
//! (and fails instead under `CORNFLAKES_REQUIRE_XDP=1`). The namespace is removed again, also
//! when the test fails.

use netns_harness::Suite;

/// `cfecq-*` namespace, `ceq*` interfaces (the subnet leased from `netns_harness::subnet`).
const SUITE: Suite = Suite {
    root_needed_for: "AF_XDP, XDP programs and network namespaces",
    ..Suite::new("cfecq", "ceq", "CORNFLAKES_REQUIRE_XDP")
};
const TEST: &str = "two_af_xdp_echo_cores_each_answer_their_own_port";

#[cfg(not(feature = "xdp"))]
#[test]
fn two_af_xdp_echo_cores_each_answer_their_own_port() {
    SUITE.skip(
        TEST,
        "built without `--features xdp` (needs clang, libbpf-dev, root)",
    );
}

#[cfg(feature = "xdp")]
mod with_xdp {
    use super::{SUITE, TEST};

    use std::collections::HashMap;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::path::Path;
    use std::time::{Duration, Instant};

    use cornflakes::datapath::{Connect, Receive, Transmit};
    use cornflakes::{ConnId, RxMsg};
    use datapath_socket::{SocketConfig, SocketDatapath};
    use echo::client::{RequestBuilder, Verifier};
    use echo::xdp::{parse_core_stats, parse_program_stats, READY};
    use echo::{Mode, Serialization, ShapeSpec};
    use loadgen::request_id;
    use netns_harness::host::on_queue_cpus;
    use netns_harness::{namespace_exists, ChildServer, HostVeth};

    const CORES: usize = 2;
    /// Requests each client thread sends its core.
    const REQUESTS: u64 = 120;
    /// Requests in flight per client thread.
    const WINDOW: u64 = 16;
    /// Core 0 of the first mode's server listens here; each mode's server 10 ports higher.
    const BASE: u16 = 7500;
    /// Hybrid Cornflakes sends 600-byte fields zero-copy from the receive buffer.
    const SHAPE: &str = "list-2x600";

    /// What one client thread saw.
    #[derive(Debug, Default)]
    struct Seen {
        /// Replies per request id.
        answers: HashMap<u64, u32>,
        /// Ids of replies that were not their request echoed.
        bad: Vec<u64>,
        /// Replies from anywhere but the port the thread sent to.
        from_elsewhere: u64,
        /// Replies to the two requests no core should answer, or after every request was
        /// answered.
        extra: u64,
        /// Datagrams sent: the requests to the thread's core, then the stray ones.
        sent: u64,
    }

    /// Client thread `core`: sends its core `REQUESTS` requests (ids `request_id(core, seq)`)
    /// to `server`'s port + `core`, `WINDOW` at a time, and collects the replies; thread 0 then
    /// sends one request to core 1's port and one to the port after the last core's.
    fn client(core: usize, mode: Mode, client_ip: Ipv4Addr, server: SocketAddrV4) -> Seen {
        let spec: ShapeSpec = SHAPE.parse().unwrap();
        let port = |i: usize| SocketAddrV4::new(*server.ip(), server.port() + i as u16);
        let mut sc = SocketConfig::new(SocketAddrV4::new(client_ip, 0));
        sc.mtu = 1500;
        let mut dp = SocketDatapath::new(sc).unwrap();
        let conn = dp.connect(port(core)).unwrap();
        let mut req = RequestBuilder::new(mode, spec).unwrap();
        let verifier = Verifier::new(mode, spec).unwrap();
        let mut seen = Seen::default();
        let mut rx: Vec<RxMsg> = Vec::new();
        let mut drain = |dp: &mut SocketDatapath, seen: &mut Seen| {
            rx.clear();
            dp.recv_burst(&mut rx).unwrap();
            for m in &rx {
                let id = request_id(core, u64::from(m.msg.id));
                if m.conn != conn {
                    seen.from_elsewhere += 1;
                } else if !verifier.check(id, &m.data) {
                    seen.bad.push(id);
                }
                *seen.answers.entry(id).or_default() += 1;
            }
        };
        let send = |dp: &mut SocketDatapath, req: &mut RequestBuilder, to: ConnId, id: u64| {
            req.send(dp, to, id)
                .unwrap_or_else(|e| panic!("{mode}: sending request {id}: {e}"));
            dp.flush().unwrap();
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        for seq in 0..REQUESTS {
            while seq >= seen.answers.len() as u64 + WINDOW && Instant::now() < deadline {
                drain(&mut dp, &mut seen);
            }
            send(&mut dp, &mut req, conn, request_id(core, seq));
            seen.sent += 1;
        }
        while seen.answers.len() < REQUESTS as usize && Instant::now() < deadline {
            drain(&mut dp, &mut seen);
            std::thread::sleep(Duration::from_micros(200));
        }
        let answered = seen.answers.len();
        if core == 0 {
            // From queue 0: core 1's port (misteered) and a port no core owns.
            for (i, to) in [port(1), port(CORES)].into_iter().enumerate() {
                let stray = dp.connect(to).unwrap();
                send(
                    &mut dp,
                    &mut req,
                    stray,
                    request_id(core, REQUESTS + i as u64),
                );
                seen.sent += 1;
            }
        }
        // Nothing more may come: no request answered twice, the strays not at all.
        std::thread::sleep(Duration::from_millis(300));
        drain(&mut dp, &mut seen);
        seen.extra = seen.answers.values().map(|&n| u64::from(n)).sum::<u64>() - answered as u64;
        seen
    }

    #[test]
    fn two_af_xdp_echo_cores_each_answer_their_own_port() {
        if let Some(why) = SUITE.xdp_skip_reason() {
            SUITE.skip(TEST, &why);
            return;
        }
        let cpus = percore::allowed_cores().unwrap();
        if cpus.len() < CORES {
            SUITE.skip(
                TEST,
                &format!("two server cores need 2 CPUs, have {cpus:?}"),
            );
            return;
        }
        let cpus = &cpus[..CORES];
        let ns = HostVeth::create_with_queues(&SUITE, 1500, CORES as u32)
            .expect("namespace and a veth with 2 queues");
        let name = ns.name.clone();
        ns.map_tx_queues_to_cpus(cpus)
            .expect("XPS on the client end");
        let exe = Path::new(env!("CARGO_BIN_EXE_echo"));
        for (m, mode) in [
            Mode::Raw,
            Mode::Shared(Serialization::CORNFLAKES),
            Mode::Shared(Serialization::PROTOBUF),
        ]
        .into_iter()
        .enumerate()
        {
            let base = BASE + 10 * m as u16;
            let args = ["server", "--mode", mode.name(), "--threshold", "512"]
                .into_iter()
                // Below the veth's 1500: the server must take --mtu, not the interface's.
                .chain(["--mtu", "1400", "--cores", "2"])
                .map(str::to_owned)
                .collect::<Vec<_>>();
            let server = ChildServer::spawn(&ns, exe, &args, base, READY, Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("{mode}: {e}"));
            let startup = server.startup_lines().to_vec();
            let (client_ip, addr) = (ns.client_ip, server.addr);
            let seen = on_queue_cpus(cpus, |core| client(core, mode, client_ip, addr))
                .expect("one client thread per queue, pinned");
            let lines = server.stop().unwrap_or_else(|e| panic!("{mode}: {e}"));
            // (`spawn` returned at core 0's ready line; core 1's comes after it.)
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(READY) && l.contains("queue 1, core 1 of 2)")),
                "{mode}: core 1 not on queue 1: {lines:#?}"
            );
            for q in 0..CORES {
                let want = format!("[server] queue {q}: IP MTU 1400");
                assert!(
                    startup.iter().chain(&lines).any(|l| l == &want),
                    "{mode}: no `{want}`: {startup:#?} {lines:#?}"
                );
            }
            let per_core = parse_core_stats(&lines);
            assert_eq!(per_core.len(), CORES, "{mode}: {lines:#?}");
            for (core, (s, st)) in seen.iter().zip(&per_core).enumerate() {
                let what = format!("{mode} core {core}");
                assert!(
                    s.bad.is_empty(),
                    "{what}: replies not verified: {:?}",
                    s.bad
                );
                assert_eq!(s.from_elsewhere, 0, "{what}: replies from another port");
                assert_eq!(s.extra, 0, "{what}: replies beyond one per request");
                let lost: Vec<u64> = (0..REQUESTS)
                    .map(|seq| request_id(core, seq))
                    .filter(|id| !s.answers.contains_key(id))
                    .collect();
                assert!(lost.is_empty(), "{what}: not answered: {lost:?}");
                // Each core received and echoed exactly what was sent to its port.
                assert_eq!(
                    (st.received, st.replied),
                    (REQUESTS, REQUESTS),
                    "{what}: {st}"
                );
                assert_eq!((st.malformed, st.send_failed), (0, 0), "{what}: {st}");
            }
            let prog = parse_program_stats(&lines)
                .unwrap_or_else(|| panic!("{mode}: no XDP program counters: {lines:#?}"))
                .unwrap_or_else(|e| panic!("{mode}: {e}"));
            let sent: u64 = seen.iter().map(|s| s.sent).sum();
            let served: u64 = per_core.iter().map(|s| s.received).sum();
            // Every request to a core's port on its queue went to that core; the one for core
            // 1's port on queue 0 was dropped by the program; the one for no core's port
            // went to the kernel (the only frame it passed: the clients' end sends nothing
            // else, it has a permanent neighbour entry for the server).
            assert_eq!(prog.redirected, served, "{mode}: {prog}");
            assert_eq!(prog.misteered, 1, "{mode}: {prog}");
            assert_eq!(prog.passed, 1, "{mode}: {prog}");
            assert_eq!(
                prog.redirected + prog.misteered + prog.passed,
                sent,
                "{mode}: {prog}"
            );
        }
        drop(ns);
        assert!(!namespace_exists(&name).unwrap(), "{name} left behind");
    }
}
