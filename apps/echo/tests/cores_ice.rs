//! `echo server --datapath ice --cores 2` end to end (feature `ice`, root): DPDK's
//! `net_af_packet` virtual device with two queue pairs (`qpairs=2`) on the server end of a veth
//! in a namespace, two pinned server cores each opening its own queue pair
//! (`open_cores` + `CorePort::open_core`), clients on kernel sockets here.
//!
//! What it exercises, and what it cannot: `net_af_packet` has no flow API, so the per-core
//! `rte_flow` rules are refused (the server prints `steering: Unsupported(..)`), and the
//! kernel spreads the frames over the two queue pairs by its `PACKET_FANOUT` flow hash, which
//! a client cannot choose. A request that lands on the other core's queue is dropped by that
//! core's stack (its port is not the core's) and never answered. So the test sends one
//! request from each of many source ports to each core's port and checks that every reply
//! comes from the port it was sent to, that nothing is answered twice, that both cores answer
//! (each flow has an even chance of the right queue: with 32 flows per core, a core answering
//! none would be a 2^-32 fluke) and that each core's counters equal the replies from its port.
//! The steering itself is the E810's (`crates/datapath-ice/README.md`).

use netns_harness::Suite;

const SUITE: Suite = Suite::new("cfice", "ci", "CORNFLAKES_REQUIRE_ICE");

#[cfg(not(feature = "ice"))]
#[test]
fn two_ice_cores_need_the_ice_feature() {
    // Through the suite, like every other skip: visible on stderr, and a failure with
    // CORNFLAKES_REQUIRE_ICE=1.
    SUITE.skip(
        "two_ice_cores_on_a_virtual_device_answer_from_their_own_ports",
        "built without `--features ice` (DPDK: crates/datapath-ice/APT_PACKAGES; and root)",
    );
}

#[cfg(feature = "ice")]
mod with_ice {

    use std::io::{BufRead, BufReader, Write as _};
    use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use cornflakes::Msg;
    use cornflakes_stack::wire::framing;
    use netns_harness::HostVeth;

    use super::SUITE;
    const BASE: u16 = 7000;
    const CORES: usize = 2;
    const FLOWS: usize = 32;

    fn framed(id: u32, payload: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; framing::HEADER_LEN + payload.len()];
        framing::Repr::single(Msg::new(id, 1), payload.len() as u32).emit(&mut d);
        d[framing::HEADER_LEN..].copy_from_slice(payload);
        d
    }

    #[test]
    fn two_ice_cores_on_a_virtual_device_answer_from_their_own_ports() {
        let test = "two_ice_cores_on_a_virtual_device_answer_from_their_own_ports";
        if let Some(why) = SUITE.skip_reason() {
            SUITE.skip(test, &why);
            return;
        }
        if percore::allowed_cores().unwrap().len() < CORES {
            SUITE.skip(test, "two server cores need 2 CPUs");
            return;
        }
        // Two veth queues only for the permanent neighbour entry HostVeth then adds (the
        // af_packet queue pairs are sockets, not veth queues).
        let v = HostVeth::create_with_queues(&SUITE, 1500, 2).expect("namespace and veth");
        let mut server = Command::new("ip")
            .args(["netns", "exec", &v.name, env!("CARGO_BIN_EXE_echo")])
            .args([
                "server",
                "--mode",
                "raw",
                "--datapath",
                "ice",
                "--dpdk-args",
            ])
            .arg(format!(
                "--vdev net_af_packet0,iface={},qpairs={CORES}",
                v.server_if
            ))
            .args(["--bind", &SocketAddrV4::new(v.server_ip, BASE).to_string()])
            .args(["--mtu", "1500", "--cores", &CORES.to_string()])
            .arg("--until-stdin-closes")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        let mut ready = 0;
        while ready < CORES {
            match lines.next() {
                Some(Ok(l)) => {
                    if l.starts_with("[server] ready: raw") {
                        ready += 1;
                    }
                    seen.push(l);
                }
                _ => break,
            }
        }
        assert_eq!(ready, CORES, "the ice cores did not start: {seen:#?}");
        let steering = seen
            .iter()
            .find(|l| l.starts_with("[server] DPDK steering:"))
            .cloned()
            .unwrap_or_default();
        let flows: Vec<(usize, u32, UdpSocket)> = (0..CORES * FLOWS)
            .map(|i| {
                let s = UdpSocket::bind(SocketAddrV4::new(v.client_ip, 0)).unwrap();
                s.set_nonblocking(true).unwrap();
                (i % CORES, i as u32 + 1, s)
            })
            .collect();
        for (core, id, s) in &flows {
            let to = SocketAddrV4::new(v.server_ip, BASE + *core as u16);
            s.send_to(&framed(*id, &id.to_le_bytes()), to).unwrap();
        }
        let mut answered = [0u64; CORES];
        let mut replies = vec![0u32; flows.len()];
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut buf = [0u8; 2048];
        while Instant::now() < deadline {
            for (i, (core, id, s)) in flows.iter().enumerate() {
                while let Ok((n, from)) = s.recv_from(&mut buf) {
                    let to = SocketAddrV4::new(v.server_ip, BASE + *core as u16);
                    assert_eq!(from, SocketAddr::V4(to), "a reply from another core's port");
                    assert_eq!(&buf[framing::HEADER_LEN..n], id.to_le_bytes(), "flow {i}");
                    replies[i] += 1;
                    answered[*core] += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = server.stdin.take().map(|mut s| s.flush());
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let status = server.wait().unwrap();
        assert!(status.success(), "server: {rest:#?}");
        eprintln!(
        "[test] {steering}; answered per core {answered:?} of {FLOWS} each (the rest hashed to the other core's queue)"
    );
        assert!(
            replies.iter().all(|&r| r <= 1),
            "answered twice: {replies:?}"
        );
        if steering.contains("Flow") {
            assert!(
                replies.iter().all(|&r| r == 1),
                "steered, yet lost: {replies:?}"
            );
        }
        for (core, &n) in answered.iter().enumerate() {
            assert!(n > 0, "core {core} answered none of {FLOWS}: {rest:#?}");
            let line = rest
                .iter()
                .find(|l| l.starts_with(&format!("[server] core {core}: ")))
                .unwrap_or_else(|| panic!("core {core}'s counters: {rest:#?}"));
            assert!(
                line.contains(&format!("received={n} echoed={n} ")),
                "core {core} counted other than the {n} replies from its port: {line}"
            );
        }
        drop(v);
    }
}
