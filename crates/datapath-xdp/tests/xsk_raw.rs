//! The socket layer alone (no UDP stack): frames steered by the XDP program arrive in pinned
//! buffers, including multi-buffer jumbo frames. Needs root and `--features xdp`.

mod common;

#[cfg(not(feature = "xdp"))]
#[test]
fn xsk_raw_tests_need_the_xdp_feature() {
    common::XDP.skip(
        "xsk_raw",
        "built without `--features xdp` (needs clang, libbpf-dev, root)",
    );
}

#[cfg(feature = "xdp")]
mod with_xdp {
    use super::common::{in_netns, Held, VethPair, XDP};
    use datapath_xdp::bpf::{AttachMode, Program, XdpProgram};
    use datapath_xdp::sys::{ifindex, BindMode, RingSizes};
    use datapath_xdp::xsk::{umem_memory, Xsk, XskConfig};
    use std::net::{SocketAddrV4, UdpSocket};
    use std::time::{Duration, Instant};

    const PORT: u16 = 7100;

    fn config(ifindex: u32) -> XskConfig {
        XskConfig {
            ifindex,
            queue: 0,
            mode: BindMode::Copy,
            rings: RingSizes {
                fill: 1024,
                completion: 1024,
                rx: 1024,
                tx: 1024,
            },
            rx_frames: 512,
            max_rx_frame: 16 * 1024,
            multi_buffer: true,
        }
    }

    /// Sends `payloads` from a kernel socket in B to our port on A and returns what our socket
    /// received (whole Ethernet frames).
    fn receive_from_peer(mtu: u32, payloads: Vec<Vec<u8>>, peer_pass: bool) -> Vec<Vec<u8>> {
        if let Some(why) = XDP.skip_reason() {
            XDP.skip("xsk_raw", &why);
            return Vec::new();
        }
        let v = VethPair::create(&XDP, mtu).expect("create the veth pair");
        let (ip_a, ip_b, mac_a) = (v.ip_a, v.ip_b, v.mac_a);
        // A static neighbour entry in B: this test has no ARP responder on A.
        let mac = mac_a.map(|b| format!("{b:02x}")).join(":");
        let st = std::process::Command::new("ip")
            .args([
                "-n",
                &v.ns_b,
                "neigh",
                "replace",
                &ip_a.to_string(),
                "lladdr",
                &mac,
            ])
            .args(["dev", &v.if_b, "nud", "permanent"])
            .status()
            .unwrap();
        assert!(st.success());
        let if_b = v.if_b.clone();
        let pass = if peer_pass {
            Some(
                Held::new(&v.ns_b, move || {
                    XdpProgram::attach(ifindex(&if_b)?, Program::Pass, AttachMode::Native)
                })
                .unwrap(),
            )
        } else {
            None
        };
        let peer = in_netns(&v.ns_b, move || UdpSocket::bind(SocketAddrV4::new(ip_b, 0)))
            .unwrap()
            .unwrap();
        let if_a = v.if_a.clone();
        let n = payloads.len();
        let got = in_netns(&v.ns_a, move || {
            let idx = ifindex(&if_a).unwrap();
            let prog = XdpProgram::attach(idx, Program::Redirect, AttachMode::Native).unwrap();
            prog.set_port(PORT).unwrap();
            let mem = umem_memory(8 << 20).unwrap();
            let mut xsk = Xsk::new(mem, &config(idx)).unwrap();
            prog.register_socket(0, xsk.fd()).unwrap();
            for p in &payloads {
                peer.send_to(p, SocketAddrV4::new(ip_a, PORT)).unwrap();
            }
            let mut frames = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while frames.len() < n && Instant::now() < deadline {
                xsk.recv(&mut frames, 64);
                std::thread::sleep(Duration::from_millis(1));
            }
            let stats = (
                xsk.stats(),
                prog.stats().unwrap(),
                xsk.kernel_stats().unwrap(),
            );
            eprintln!(
                "xsk {:?}\nprog {:?}\nkernel rx_dropped {} invalid {} ring_full {} fill_empty {}",
                stats.0,
                stats.1,
                stats.2.rx_dropped,
                stats.2.rx_invalid_descs,
                stats.2.rx_ring_full,
                stats.2.rx_fill_ring_empty_descs
            );
            let out: Vec<Vec<u8>> = frames.iter().map(|f| f.to_vec()).collect();
            // Every frame is a pinned buffer of the UMEM memory.
            for f in &frames {
                assert!(xsk.memory().recover_ptr(f).is_some());
            }
            out
        })
        .unwrap();
        drop(pass);
        got
    }

    fn udp_payload(frame: &[u8]) -> &[u8] {
        // Ethernet (14) + IPv4 without options (20) + UDP (8); the test sender uses no options.
        &frame[42..]
    }

    #[test]
    fn small_datagrams_arrive_in_pinned_frames() {
        let payloads: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 100 + i as usize]).collect();
        let got = receive_from_peer(1500, payloads.clone(), false);
        if got.is_empty() && XDP.skip_reason().is_some() {
            return;
        }
        assert_eq!(got.len(), payloads.len());
        for (f, p) in got.iter().zip(&payloads) {
            assert_eq!(udp_payload(f), &p[..]);
        }
    }

    #[test]
    fn jumbo_datagrams_arrive_as_multi_buffer_and_are_reassembled() {
        let payloads: Vec<Vec<u8>> = (0..4u32)
            .map(|i| (0..8900u32).map(|k| (k * 7 + i) as u8).collect())
            .collect();
        let got = receive_from_peer(9000, payloads.clone(), false);
        if got.is_empty() && XDP.skip_reason().is_some() {
            return;
        }
        assert_eq!(got.len(), payloads.len());
        for (f, p) in got.iter().zip(&payloads) {
            assert_eq!(udp_payload(f), &p[..]);
        }
    }

    /// Same with an `XDP_PASS` program on the far end (some setups attach one so veth runs its
    /// native XDP path both ways): the result must not change.
    #[test]
    fn jumbo_datagrams_with_a_program_on_the_peer_end() {
        let payloads: Vec<Vec<u8>> = (0..3u32)
            .map(|i| (0..8500u32).map(|k| (k * 3 + i) as u8).collect())
            .collect();
        let got = receive_from_peer(9000, payloads.clone(), true);
        if got.is_empty() && XDP.skip_reason().is_some() {
            return;
        }
        assert_eq!(got.len(), payloads.len());
        for (f, p) in got.iter().zip(&payloads) {
            assert_eq!(udp_payload(f), &p[..]);
        }
    }
}
