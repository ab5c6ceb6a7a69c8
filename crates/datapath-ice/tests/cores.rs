//! Two server cores on one DPDK port, one RX/TX queue pair each (issue 12), over a `net_ring`
//! link with two queues. What runs: the port configured with 2 queue pairs, each core's memory,
//! pools and queue set up on its own thread, the port started by the last core, every core
//! polling and transmitting on its own queue only, each core's datapath dropped on its own
//! thread. The far end is a second port shared the same way, core i of the client on the same
//! thread as core i of the server (a ring port hands the sender's mbufs to the receiver, whose
//! free callbacks must run on the sender's thread).
//!
//! What does not run here: steering by `rte_flow`. `net_ring` has no flow API (the port says
//! so in [`CorePort::steering`], printed as SKIPPED); a ring delivers on the queue the sender
//! used. So the test checks the other half: a request sent on core 0's queue to core 1's port
//! is dropped and counted by core 0 (`unknown_port`), never answered or forwarded.

#[cfg(not(feature = "ice"))]
mod common;

#[cfg(not(feature = "ice"))]
#[test]
fn dpdk_cores_need_the_ice_feature() {
    common::ICE.skip(
        "datapath-ice cores",
        "built without `--features ice` (needs DPDK 22.11, see crates/datapath-ice/APT_PACKAGES)",
    );
}

#[cfg(feature = "ice")]
mod with_dpdk {
    use std::collections::BTreeMap;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
    use cornflakes::{DropCounters, Msg, RxMsg, SendError};
    use cornflakes_stack::wire::MacAddr;
    use datapath_ice::datapath::start_eal;
    use datapath_ice::eal_args::{EalOptions, HugePolicy};
    use datapath_ice::ffi::eal::RingLink;
    use datapath_ice::{open_cores, CorePort, IceConfig, IceDatapath, PortSpec, Steering};

    const MAC_S: MacAddr = MacAddr([0x02, 0, 0, 0x79, 0, 1]);
    const MAC_C: MacAddr = MacAddr([0x02, 0, 0, 0x79, 0, 2]);
    const IP_S: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
    const IP_C: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
    const BASE: u16 = 7000;
    const CLIENT_BASE: u16 = 9000;
    const CORES: usize = 2;
    const REQUESTS: usize = 400;
    /// Requests each client core sends on its own queue to the other core's port.
    const MISDIRECTED: usize = 5;

    /// The core that owns `key`, as a key-steering client computes it.
    fn owner(key: &[u8]) -> usize {
        percore::core_of_key(key, CORES)
    }

    fn key(i: usize) -> String {
        format!("key-{i}")
    }

    fn cfg(link: &Arc<RingLink>, side: usize) -> IceConfig {
        let (addr, mac, peer) = if side == 0 {
            (SocketAddrV4::new(IP_S, BASE), MAC_S, (IP_C, MAC_C))
        } else {
            (SocketAddrV4::new(IP_C, CLIENT_BASE), MAC_C, (IP_S, MAC_S))
        };
        let mut c = IceConfig::new(PortSpec::Ring(Arc::clone(link), side), addr);
        c.mac = Some(mac);
        c.static_arp = vec![peer];
        c.rx_buffers = 512;
        c.tx_mbufs = 1024;
        c.memory.initial_bytes = 8 << 20;
        c.memory.region_bytes = 8 << 20;
        c
    }

    /// What one thread saw: the requests its server core received, the replies its client
    /// core got (id, answering core's tag, source port), both cores' drop counters.
    struct CoreRun {
        seen: Vec<usize>,
        replies: Vec<(usize, usize, u16)>,
        server: DropCounters,
    }

    fn send(d: &mut IceDatapath, conn: cornflakes::ConnId, id: usize, data: &[u8]) {
        loop {
            match d.send_copy(conn, Msg::new(id as u32, 1), data) {
                Ok(()) => return,
                Err(SendError::Full) => {
                    let _ = d.flush();
                    d.poll_completions();
                }
                Err(e) => panic!("send {id}: {e}"),
            }
        }
    }

    /// Serves one burst on the server core: every request answered with the core's number
    /// and the request.
    fn serve(s: &mut IceDatapath, core: usize, got: &mut Vec<RxMsg>, seen: &mut Vec<usize>) {
        got.clear();
        s.recv_burst(got).expect("server recv");
        for m in got.drain(..) {
            seen.push(m.msg.id as usize);
            let mut reply = vec![core as u8];
            reply.extend_from_slice(&m.data);
            send(s, m.conn, m.msg.id as usize, &reply);
        }
        s.flush().expect("server flush");
        s.poll_completions();
    }

    /// Core `core` of both ports, on this thread.
    fn run_core(server: &Arc<CorePort>, client: &Arc<CorePort>, core: usize) -> CoreRun {
        let mut s = server.open_core(core).expect("server core");
        let mut c = client.open_core(core).expect("client core");
        assert_eq!(usize::from(s.queue()), core);
        assert_eq!(s.local_addr(), SocketAddrV4::new(IP_S, BASE + core as u16));
        let conn = c
            .connect(server.core_addr(core))
            .expect("connect to our core");
        let other = c
            .connect(server.core_addr(1 - core))
            .expect("connect to the other core's port");
        let mine: Vec<usize> = (0..REQUESTS)
            .filter(|&i| owner(key(i).as_bytes()) == core)
            .collect();
        let mut run = CoreRun {
            seen: Vec::new(),
            replies: Vec::new(),
            server: DropCounters::default(),
        };
        // Misdirected first: on our queue, to the other core's port.
        for i in 0..MISDIRECTED {
            send(&mut c, other, REQUESTS + i, key(REQUESTS + i).as_bytes());
        }
        let (mut got, mut back) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut next = 0;
        while run.replies.len() < mine.len() {
            while next < mine.len() && next < run.replies.len() + 32 {
                send(&mut c, conn, mine[next], key(mine[next]).as_bytes());
                next += 1;
            }
            c.flush().expect("client flush");
            serve(&mut s, core, &mut got, &mut run.seen);
            back.clear();
            c.recv_burst(&mut back).expect("client recv");
            c.poll_completions();
            for m in back.drain(..) {
                let text = std::str::from_utf8(&m.data[1..]).expect("utf-8");
                assert_eq!(text, key(m.msg.id as usize), "reply body");
                run.replies
                    .push((m.msg.id as usize, usize::from(m.data[0]), m.peer.port()));
            }
            assert!(
                Instant::now() < deadline,
                "core {core}: {} of {} replies",
                run.replies.len(),
                mine.len()
            );
        }
        // Anything late (a duplicate would show here).
        for _ in 0..10 {
            serve(&mut s, core, &mut got, &mut run.seen);
            back.clear();
            c.recv_burst(&mut back).expect("client recv");
            for m in back.drain(..) {
                run.replies
                    .push((m.msg.id as usize, usize::from(m.data[0]), m.peer.port()));
            }
        }
        run.server = s.counters();
        assert_eq!(c.counters().total_drops(), 0, "client core {core} dropped");
        // Both datapaths of this core go away on this thread: the server's replies the client
        // freed, and the client's requests the server freed, were released here too.
        drop(s);
        drop(c);
        run
    }

    #[test]
    fn two_cores_one_queue_pair_each_on_a_net_ring_link() {
        let opts = EalOptions {
            huge: HugePolicy::Never,
            log_level: Some("warning".into()),
            ..EalOptions::default()
        };
        start_eal(&opts).expect("EAL init");
        let link = Arc::new(RingLink::with_queues("cfcores", 1024, CORES).expect("ring link"));
        assert_eq!(link.queues(), CORES);
        let server = open_cores(cfg(&link, 0), CORES).expect("server port");
        let client = open_cores(cfg(&link, 1), CORES).expect("client port");
        assert_eq!(server.steering(), Steering::NotStarted);
        assert!(server.open_core(CORES).is_err(), "no core 2");
        assert!(
            open_cores(cfg(&link, 0), CORES).is_err(),
            "the port is already claimed"
        );
        let runs: Vec<CoreRun> = std::thread::scope(|sc| {
            let ts: Vec<_> = (0..CORES)
                .map(|core| {
                    let (server, client) = (&server, &client);
                    sc.spawn(move || run_core(server, client, core))
                })
                .collect();
            ts.into_iter()
                .map(|t| t.join().expect("core thread"))
                .collect()
        });
        let mut answered: BTreeMap<usize, usize> = BTreeMap::new();
        let mut seen_all: Vec<usize> = Vec::new();
        for (core, run) in runs.iter().enumerate() {
            for &(id, tag, src) in &run.replies {
                assert!(id < REQUESTS, "a misdirected request was answered: {id}");
                assert_eq!(owner(key(id).as_bytes()), core, "reply {id} on core {core}");
                assert_eq!(tag, core, "request {id} answered by core {tag}");
                assert_eq!(src, BASE + core as u16);
                *answered.entry(id).or_default() += 1;
            }
            assert!(run.seen.iter().all(|&i| owner(key(i).as_bytes()) == core));
            seen_all.extend(&run.seen);
            // The requests to the other core's port reached this core's queue and were
            // dropped by its stack, as a NIC without steering rules would make it do.
            assert_eq!(run.server.unknown_port, MISDIRECTED as u64, "core {core}");
            assert_eq!(
                run.server.total_drops(),
                MISDIRECTED as u64,
                "core {core}: {:?}",
                run.server
            );
        }
        assert_eq!(answered.len(), REQUESTS, "every request answered");
        assert!(answered.values().all(|&n| n == 1), "none answered twice");
        seen_all.sort_unstable();
        assert_eq!(seen_all, (0..REQUESTS).collect::<Vec<_>>());
        match server.steering() {
            Steering::Flow => panic!("net_ring accepted rte_flow rules"),
            Steering::NotStarted => panic!("the port never started"),
            Steering::Unsupported(why) => test_skip::skip(
                "rte_flow steering (destination UDP port -> queue)",
                &format!("net_ring has no flow API: {why}"),
            ),
        }
        drop(server);
        drop(client);
        drop(link);
    }
}
