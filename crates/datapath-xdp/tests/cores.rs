//! Two server cores over AF_XDP on a veth with two queues (`docs/cores.md`): core *i* runs its
//! own `XdpDatapath` (socket on queue *i*, own UMEM, stack and connection table) on its own
//! pinned thread, all sharing one XDP program that redirects port `BASE + i` on queue *i*.
//! Keys are owned by core `key mod 2`; the client in namespace B sends each key to its core's
//! port from a thread on the CPU whose transmit queue (XPS) reaches that core's receive queue.
//! Every request must be answered once, by the core owning its key, from that core's port;
//! per-core counters must match what was sent; a datagram sent for core 1's port on core 0's
//! queue must be dropped and counted by the program. Needs root and `--features xdp`;
//! otherwise prints why it was skipped (and fails under CORNFLAKES_REQUIRE_XDP=1).

mod common;

#[cfg(not(feature = "xdp"))]
#[test]
fn xdp_cores_tests_need_the_xdp_feature() {
    common::XDP.skip(
        "cores",
        "built without `--features xdp` (needs clang, libbpf-dev, root)",
    );
}

#[cfg(feature = "xdp")]
mod with_xdp {
    use super::common::{in_netns, Held, VethPair, XDP};
    use cornflakes::datapath::{Receive, Transmit};
    use cornflakes::{Msg, RxMsg};
    use cornflakes_stack::wire::framing;
    use datapath_xdp::bpf::XdpProgram;
    use datapath_xdp::{XdpConfig, XdpDatapath};
    use percore::{Cores, CoresConfig};
    use std::collections::HashSet;
    use std::net::{SocketAddrV4, UdpSocket};
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    const BASE: u16 = 7400;
    const CORES: usize = 2;
    const KEYS: u32 = 200;

    /// The core that owns key `k`.
    fn owner(k: u32) -> usize {
        k as usize % CORES
    }

    /// What one server core counted.
    #[derive(Debug, Default)]
    struct CoreStats {
        received: u64,
        replied: u64,
        /// Requests for a key another core owns.
        foreign: u64,
        /// Why the last reply could not be sent, if one could not.
        send_error: Option<String>,
    }

    /// Core `core`'s server: answers each request (a 4-byte key) with its core index and the
    /// key, from its own port.
    fn serve(mut dp: XdpDatapath, core: usize, stop: &std::sync::atomic::AtomicBool) -> CoreStats {
        let mut st = CoreStats::default();
        let mut rx: Vec<RxMsg> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            rx.clear();
            if dp.recv_burst(&mut rx).is_err() || rx.is_empty() {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
            for m in &rx {
                st.received += 1;
                let Ok(key) = <[u8; 4]>::try_from(&m.data[..]) else {
                    continue;
                };
                if owner(u32::from_le_bytes(key)) != core {
                    st.foreign += 1;
                }
                let mut reply = vec![core as u8];
                reply.extend_from_slice(&key);
                match dp.send_copy(m.conn, m.msg, &reply) {
                    Ok(()) => st.replied += 1,
                    Err(e) => st.send_error = Some(e.to_string()),
                }
            }
            let _ = dp.flush();
        }
        st
    }

    fn framed(id: u32, key: u32) -> Vec<u8> {
        let mut d = vec![0u8; framing::HEADER_LEN + 4];
        framing::Repr::single(Msg::new(id, 1), 4).emit(&mut d);
        d[framing::HEADER_LEN..].copy_from_slice(&key.to_le_bytes());
        d
    }

    /// Side B's client for core `core`: pinned to `cpu` (whose transmit queue reaches the
    /// core's receive queue), sends every key the core owns to its port and checks each reply.
    /// Returns the requests sent.
    fn client(ip_b: std::net::Ipv4Addr, ip_a: std::net::Ipv4Addr, core: usize, cpu: usize) -> u64 {
        percore::pin_current_thread(cpu).expect("pin the client thread");
        let sock = UdpSocket::bind(SocketAddrV4::new(ip_b, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let to = SocketAddrV4::new(ip_a, BASE + core as u16);
        let mut seen = HashSet::new();
        let mut sent = 0;
        let mut buf = [0u8; 256];
        for key in (0..KEYS).filter(|&k| owner(k) == core) {
            sock.send_to(&framed(key, key), to).unwrap();
            sent += 1;
            let (n, from) = sock.recv_from(&mut buf).expect("a reply (lost?)");
            assert_eq!(
                from,
                std::net::SocketAddr::V4(to),
                "reply from the core's port"
            );
            let hdr = framing::Repr::parse(&framing::Packet::new_unchecked(&buf[..n])).unwrap();
            let body = &buf[framing::HEADER_LEN..n];
            assert_eq!(hdr.msg_id, key);
            assert_eq!(
                usize::from(body[0]),
                core,
                "key {key} answered by core {}",
                body[0]
            );
            assert_eq!(body[1..5], key.to_le_bytes());
            assert!(seen.insert(key), "key {key} answered twice");
        }
        sent
    }

    #[test]
    fn two_queues_answer_each_key_from_its_own_core() {
        let name = "two_queues_answer_each_key_from_its_own_core";
        if let Some(why) = XDP.skip_reason() {
            XDP.skip(name, &why);
            return;
        }
        let cpus = percore::allowed_cores().unwrap();
        if cpus.len() < CORES {
            XDP.skip(
                name,
                &format!("two server cores need 2 CPUs, have {cpus:?}"),
            );
            return;
        }
        let v = VethPair::create_with_queues(&XDP, 1500, CORES as u32).expect("veth, 2 queues");
        v.map_tx_queues_to_cpus(&cpus[..CORES])
            .expect("XPS on side B");
        let ifindex_name = v.if_a.clone();
        let (tx, rx) = mpsc::channel();
        // The program lives on a thread in namespace A while the cores run.
        let prog = Held::new(&v.ns_a, move || {
            let p = XdpProgram::for_cores(&ifindex_name, BASE, CORES as u16)?;
            tx.send(p.share()?).map_err(std::io::Error::other)?;
            Ok(p)
        })
        .expect("attach the shared XDP program");
        let shared = rx.recv().unwrap();
        let (if_a, ip_a) = (v.if_a.clone(), v.ip_a);
        let shared2 = shared.clone();
        // Threads spawned in namespace A stay there.
        let cores = in_netns(&v.ns_a, move || {
            Cores::spawn(&CoresConfig::new("xdp-core", CORES), move |core, ready| {
                let mut cfg =
                    XdpConfig::new(&if_a, SocketAddrV4::new(ip_a, BASE + core.index() as u16));
                cfg.queue = core.index() as u32;
                cfg.umem_bytes = 16 << 20;
                cfg.program = Some(shared2.clone());
                let dp =
                    XdpDatapath::new(cfg).map_err(|e| format!("queue {}: {e}", core.index()))?;
                ready.ready(());
                Ok(serve(dp, core.index(), core.stop()))
            })
        })
        .unwrap()
        .expect("start two AF_XDP cores");

        let (ip_b, ns_b) = (v.ip_b, v.ns_b.clone());
        let mut sent = [0u64; CORES];
        for (core, s) in sent.iter_mut().enumerate() {
            let cpu = cpus[core];
            match in_netns(&ns_b, move || client(ip_b, ip_a, core, cpu)) {
                Ok(n) => *s = n,
                Err(e) => {
                    let st = shared.stats();
                    let per = cores.stop();
                    panic!("core {core}: {e}; program {st:?}; cores {per:?}");
                }
            }
        }
        let before = shared.stats().unwrap();
        assert_eq!(before.misteered, 0, "{before:?}");
        // Core 1's port sent on core 0's queue: the NIC (here XPS) steered it wrong.
        let cpu0 = cpus[0];
        in_netns(&ns_b, move || {
            percore::pin_current_thread(cpu0).unwrap();
            let sock = UdpSocket::bind(SocketAddrV4::new(ip_b, 0)).unwrap();
            sock.send_to(&framed(9999, 1), SocketAddrV4::new(ip_a, BASE + 1))
                .unwrap();
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while shared.stats().unwrap().misteered == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let after = shared.stats().unwrap();
        let per_core = cores.stop().unwrap();
        drop(prog);
        drop(v);
        assert_eq!(after.misteered, 1, "{after:?}");
        for (core, st) in per_core.iter().enumerate() {
            assert_eq!(st.received, sent[core], "core {core}: {st:?}");
            assert_eq!(st.replied, sent[core], "core {core}: {st:?}");
            assert_eq!(st.foreign, 0, "core {core}: {st:?}");
        }
        assert_eq!(sent.iter().sum::<u64>(), u64::from(KEYS));
    }
}
