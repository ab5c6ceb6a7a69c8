//! The AF_XDP datapath end to end: namespace A runs `XdpDatapath` on its veth end, namespace B
//! is a plain kernel whose UDP socket checks the bytes. Needs root and `--features xdp`;
//! otherwise each test prints why it was skipped (and fails under CORNFLAKES_REQUIRE_XDP=1).

mod common;

#[cfg(not(feature = "xdp"))]
#[test]
fn veth_tests_need_the_xdp_feature() {
    common::XDP.skip(
        "veth",
        "built without `--features xdp` (needs clang, libbpf-dev, root)",
    );
}

#[cfg(feature = "xdp")]
mod with_xdp {
    use super::common::{in_netns, VethPair, XDP};
    use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
    use cornflakes::handwritten::GetM;
    use cornflakes::{Arena, CFBytes, CFString, CornflakesObj, Msg, RcBuf, SendError};
    use cornflakes_stack::checksum::Accumulator;
    use cornflakes_stack::iface::FRAME_OVERHEAD;
    use cornflakes_stack::template::{HeaderTemplate, TEMPLATE_LEN};
    use cornflakes_stack::wire::{framing, ChecksumCaps, MacAddr};
    use datapath_xdp::sys::BindMode;
    use datapath_xdp::{XdpConfig, XdpDatapath};
    use std::net::{SocketAddrV4, UdpSocket};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::{Duration, Instant};

    const PORT: u16 = 7200;
    const PEER_PORT: u16 = 7300;

    struct Ctx {
        dp: XdpDatapath,
        peer: UdpSocket,
        peer_addr: SocketAddrV4,
        our_addr: SocketAddrV4,
    }

    /// Runs `test` in namespace A with a datapath on a fresh veth pair of `mtu`, or prints
    /// why it cannot run.
    fn with_pair(
        name: &str,
        mtu: u32,
        caps: ChecksumCaps,
        test: impl FnOnce(&mut Ctx, &VethPairInfo) + Send + 'static,
    ) {
        with_pair_cfg(name, mtu, caps, |_| {}, test)
    }

    fn with_pair_cfg(
        name: &str,
        mtu: u32,
        caps: ChecksumCaps,
        tweak: impl FnOnce(&mut XdpConfig) + Send + 'static,
        test: impl FnOnce(&mut Ctx, &VethPairInfo) + Send + 'static,
    ) {
        if let Some(why) = XDP.skip_reason() {
            XDP.skip(name, &why);
            return;
        }
        let v = VethPair::create(&XDP, mtu).expect("create the veth pair");
        let info = VethPairInfo {
            ns_b: v.ns_b.clone(),
            if_b: v.if_b.clone(),
            mac_a: v.mac_a,
            mac_b: v.mac_b,
        };
        let peer_addr = SocketAddrV4::new(v.ip_b, PEER_PORT);
        let our_addr = SocketAddrV4::new(v.ip_a, PORT);
        let peer = in_netns(&v.ns_b, move || UdpSocket::bind(peer_addr))
            .unwrap()
            .unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let if_a = v.if_a.clone();
        in_netns(&v.ns_a, move || {
            let mut cfg = XdpConfig::new(&if_a, our_addr);
            cfg.umem_bytes = 16 << 20;
            cfg.caps = caps;
            tweak(&mut cfg);
            let dp = XdpDatapath::new(cfg).expect("create the AF_XDP datapath");
            let mut ctx = Ctx {
                dp,
                peer,
                peer_addr,
                our_addr,
            };
            test(&mut ctx, &info);
        })
        .unwrap();
        drop(v);
    }

    /// What a test needs to know about side B.
    struct VethPairInfo {
        ns_b: String,
        if_b: String,
        mac_a: [u8; 6],
        mac_b: [u8; 6],
    }

    fn connect(ctx: &mut Ctx) -> cornflakes::ConnId {
        let c = ctx.dp.connect(ctx.peer_addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut out = Vec::new();
        loop {
            match ctx.dp.send_copy(c, Msg::new(0, 0), b"") {
                Err(SendError::Resolving(_)) if Instant::now() < deadline => {
                    ctx.dp.recv_burst(&mut out).unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(()) => break,
                Err(e) => panic!("resolving the peer failed: {e}"),
            }
        }
        ctx.dp.flush().unwrap();
        // The empty probe message reaches the peer; consume it.
        let mut buf = [0u8; 64];
        let (n, _) = ctx.peer.recv_from(&mut buf).unwrap();
        assert_eq!(n, framing::HEADER_LEN);
        c
    }

    /// Receives one datagram at the peer and splits it into its framing header and message.
    fn peer_recv(ctx: &Ctx) -> (framing::Repr, Vec<u8>) {
        let mut buf = vec![0u8; 65536];
        let (n, from) = ctx
            .peer
            .recv_from(&mut buf)
            .expect("the peer received a datagram");
        assert_eq!(from, std::net::SocketAddr::V4(ctx.our_addr));
        let p = framing::Packet::new_checked(&buf[..n]).unwrap();
        let hdr = framing::Repr::parse(&p).unwrap();
        (hdr, p.payload().to_vec())
    }

    fn wait_completions(ctx: &mut Ctx) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while ctx.dp.in_flight() > 0 && Instant::now() < deadline {
            ctx.dp.flush().unwrap();
            ctx.dp.poll_completions();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(ctx.dp.in_flight(), 0, "every descriptor completed");
    }

    fn pinned(ctx: &Ctx, len: usize, seed: u8) -> RcBuf {
        let data: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        ctx.dp.memory().alloc_copy(&data).unwrap()
    }

    #[test]
    fn we_resolve_the_kernel_neighbour_by_arp() {
        with_pair("arp_we_resolve", 1500, ChecksumCaps::NO_UDP_TX, |ctx, _| {
            let c = connect(ctx);
            assert_eq!(ctx.dp.peer_addr(c), Some(ctx.peer_addr));
            assert!(
                ctx.dp.program_stats().unwrap().arp >= 1,
                "the kernel's ARP reply reached us through the XDP program"
            );
            assert_eq!(ctx.dp.counters().arp_failures, 0);
        });
    }

    #[test]
    fn the_kernel_resolves_us_by_arp() {
        with_pair(
            "arp_kernel_resolves",
            1500,
            ChecksumCaps::SOFTWARE,
            |ctx, info| {
                // The kernel has never heard of us: it must ARP for our address before sending,
                // and our stack answers.
                let mut dgram = vec![0u8; framing::HEADER_LEN + 4];
                framing::Repr::single(Msg::new(1, 1), 4).emit(&mut dgram);
                ctx.peer.send_to(&dgram, ctx.our_addr).unwrap();
                let deadline = Instant::now() + Duration::from_secs(3);
                let mut out = Vec::new();
                while out.is_empty() && Instant::now() < deadline {
                    ctx.dp.recv_burst(&mut out).unwrap();
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(out.len(), 1, "counters {:?}", ctx.dp.counters());
                assert!(ctx.dp.counters().arp_replies_sent >= 1);
                let mac_s = info.mac_a.map(|b| format!("{b:02x}")).join(":");
                let neigh = std::process::Command::new("ip")
                    .args([
                        "-n",
                        &info.ns_b,
                        "neigh",
                        "show",
                        &ctx.our_addr.ip().to_string(),
                    ])
                    .args(["dev", &info.if_b])
                    .output()
                    .unwrap();
                let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
                assert!(
                    neigh.contains(&mac_s),
                    "kernel neighbour entry {neigh:?} has our MAC {mac_s}"
                );
                // Answer on the connection learned from the request (no ARP needed).
                ctx.dp
                    .send_copy(out[0].conn, Msg::new(1, 2), b"pong")
                    .unwrap();
                ctx.dp.flush().unwrap();
                let (h, b) = peer_recv(ctx);
                assert_eq!((h.msg_id, h.msg_type, &b[..]), (1, 2, &b"pong"[..]));
            },
        );
    }

    fn getm<'a>(ctx: &Ctx, arena: &'a Arena, vals: &'a [RcBuf], keys: &[&str]) -> GetM<'a> {
        let _ = ctx;
        let mut m = GetM::new_in(arena);
        m.set_id(42);
        m.init_keys(keys.len());
        for k in keys {
            m.get_mut_keys().append(CFString::new(k, arena));
        }
        m.init_vals(vals.len());
        // The values outlive the object: borrowed, so the object takes no reference.
        for v in vals {
            m.get_mut_vals().append(CFBytes::new_ref(v, arena));
        }
        m
    }

    #[test]
    fn object_goes_out_as_one_descriptor_per_zero_copy_entry() {
        with_pair(
            "multi_descriptor",
            9000,
            ChecksumCaps::SOFTWARE,
            |ctx, _| {
                let c = connect(ctx);
                let vals: Vec<RcBuf> = (0..3)
                    .map(|i| pinned(ctx, 600 + 100 * i, i as u8))
                    .collect();
                let arena = Arena::with_memory(ctx.dp.memory());
                let m = getm(ctx, &arena, &vals, &["alpha", "beta"]);
                assert_eq!(m.sizes().zero_copy_count, 3);
                let before = ctx.dp.xsk_stats();
                ctx.dp.send_object(c, Msg::new(7, 3), &m).unwrap();
                ctx.dp.flush().unwrap();
                let after = ctx.dp.xsk_stats();
                // Other frames (an ARP answer) may go out meanwhile, each with one descriptor.
                let extra = (after.tx_descriptors - before.tx_descriptors)
                    - (after.tx_frames - before.tx_frames);
                assert_eq!(
                    extra, 3,
                    "one frame of head + 3 zero-copy descriptors: {before:?} {after:?}"
                );
                let (hdr, bytes) = peer_recv(ctx);
                assert_eq!((hdr.msg_id, hdr.msg_type, hdr.seg_count), (7, 3, 1));
                assert_eq!(
                    bytes,
                    m.serialize_to_vec(),
                    "the wire bytes are the object's encoding"
                );
                // The datapath held one reference per in-flight entry; completions release them.
                wait_completions(ctx);
                for v in &vals {
                    assert_eq!(v.ref_count(), 1);
                }
            },
        );
    }

    #[test]
    fn entries_beyond_max_segments_are_demoted() {
        // A device taking 6 descriptors per frame: of 9 zero-copy entries, the 4 smallest are
        // demoted into the copy area.
        let tweak = |c: &mut XdpConfig| c.max_segments = 6;
        with_pair_cfg("demote", 9000, ChecksumCaps::SOFTWARE, tweak, |ctx, _| {
            let c = connect(ctx);
            let vals: Vec<RcBuf> = (0..9).map(|i| pinned(ctx, 900 - 40 * i, i as u8)).collect();
            let arena = Arena::with_memory(ctx.dp.memory());
            let m = getm(ctx, &arena, &vals, &["k"]);
            assert_eq!(m.sizes().zero_copy_count, 9);
            let before = ctx.dp.xsk_stats();
            ctx.dp.send_object(c, Msg::new(8, 1), &m).unwrap();
            ctx.dp.flush().unwrap();
            let after = ctx.dp.xsk_stats();
            let extra = (after.tx_descriptors - before.tx_descriptors)
                - (after.tx_frames - before.tx_frames);
            assert_eq!(
                extra, 5,
                "one frame of 6 descriptors: head + 5 kept entries"
            );
            let (hdr, bytes) = peer_recv(ctx);
            assert_eq!(hdr.seg_count, 1);
            assert_ne!(
                bytes,
                m.serialize_to_vec(),
                "demoted entries moved into the copy area"
            );
            let arena2 = Arena::new();
            let d = GetM::deserialize(&bytes, &arena2).unwrap();
            assert_eq!(d.get_id(), 42);
            assert_eq!(d.get_vals().len(), 9);
            for (got, want) in d.get_vals().iter().zip(&vals) {
                assert_eq!(got.as_bytes(), &want[..]);
            }
            wait_completions(ctx);
        });
    }

    #[test]
    fn the_longest_chain_the_kernel_takes() {
        // 17 zero-copy entries of 512 bytes + the head: 18 descriptors in one jumbo frame.
        with_pair("max_chain", 9000, ChecksumCaps::NO_UDP_TX, |ctx, _| {
            let c = connect(ctx);
            let vals: Vec<RcBuf> = (0..17).map(|i| pinned(ctx, 512, i as u8)).collect();
            let arena = Arena::with_memory(ctx.dp.memory());
            let m = getm(ctx, &arena, &vals, &[]);
            let before = ctx.dp.xsk_stats();
            ctx.dp.send_object(c, Msg::new(11, 1), &m).unwrap();
            ctx.dp.flush().unwrap();
            let after = ctx.dp.xsk_stats();
            let extra = (after.tx_descriptors - before.tx_descriptors)
                - (after.tx_frames - before.tx_frames);
            assert_eq!(extra, 17);
            let (_, bytes) = peer_recv(ctx);
            assert_eq!(bytes, m.serialize_to_vec());
            wait_completions(ctx);
        });
    }

    /// Collects the segments of one message at the peer.
    fn peer_recv_message(ctx: &Ctx) -> (framing::Repr, Vec<u8>) {
        let (first, b) = peer_recv(ctx);
        let mut got = vec![0u8; first.total_len as usize];
        got[first.seg_offset as usize..][..b.len()].copy_from_slice(&b);
        for _ in 1..first.seg_count {
            let (h, b) = peer_recv(ctx);
            assert_eq!((h.msg_id, h.total_len), (first.msg_id, first.total_len));
            got[h.seg_offset as usize..][..b.len()].copy_from_slice(&b);
        }
        (first, got)
    }

    #[test]
    fn segmented_objects_with_a_short_chain() {
        // 4 descriptors per frame: the stack demotes all but 2 leaves into an 8 KiB head,
        // whose slices may cross UMEM frames; frames that would need more descriptors get a
        // bounce buffer. The peer must see the object intact.
        let tweak = |c: &mut XdpConfig| c.max_segments = 4;
        with_pair_cfg(
            "short_chain",
            1500,
            ChecksumCaps::SOFTWARE,
            tweak,
            |ctx, _| {
                let c = connect(ctx);
                let vals: Vec<RcBuf> = (0..12).map(|i| pinned(ctx, 600, 50 + i as u8)).collect();
                let arena = Arena::with_memory(ctx.dp.memory());
                let m = getm(ctx, &arena, &vals, &["short", "chain"]);
                ctx.dp.send_object(c, Msg::new(12, 1), &m).unwrap();
                ctx.dp.flush().unwrap();
                let (first, bytes) = peer_recv_message(ctx);
                assert!(first.seg_count > 1);
                let arena2 = Arena::new();
                let d = GetM::deserialize(&bytes, &arena2).unwrap();
                assert_eq!(d.get_vals().len(), 12);
                for (got, want) in d.get_vals().iter().zip(&vals) {
                    assert_eq!(got.as_bytes(), &want[..]);
                }
                assert_eq!(ctx.dp.tx_stats().dropped, 0);
                wait_completions(ctx);
                for v in &vals {
                    assert_eq!(v.ref_count(), 1, "completions released every reference");
                }
            },
        );
    }

    #[test]
    fn scatter_gather_arrays_beyond_the_chain_are_refused() {
        let tweak = |c: &mut XdpConfig| c.max_segments = 4;
        with_pair_cfg(
            "sga_limit",
            1500,
            ChecksumCaps::SOFTWARE,
            tweak,
            |ctx, _| {
                let c = connect(ctx);
                let vals: Vec<RcBuf> = (0..4).map(|i| pinned(ctx, 300, i as u8)).collect();
                match ctx.dp.send_sga(c, Msg::new(13, 1), &vals) {
                    Err(SendError::TooManySegments { entries: 4, max: 3 }) => {}
                    other => panic!("expected TooManySegments, got {other:?}"),
                }
                assert_eq!(ctx.dp.in_flight(), 0, "nothing was queued");
                // Three entries fit (header + 3).
                ctx.dp.send_sga(c, Msg::new(13, 2), &vals[..3]).unwrap();
                ctx.dp.flush().unwrap();
                let (h, b) = peer_recv_message(ctx);
                assert_eq!(h.msg_type, 2);
                let want: Vec<u8> = vals[..3].iter().flat_map(|v| v.to_vec()).collect();
                assert_eq!(b, want);
                wait_completions(ctx);
            },
        );
    }

    #[test]
    fn jumbo_frames_both_ways() {
        with_pair("jumbo", 9000, ChecksumCaps::SOFTWARE, |ctx, _| {
            let c = connect(ctx);
            // Out: ~8.5 KB in one frame: head + 4 zero-copy entries of 2 KB (plus frame
            // splitting of none: 2 KiB items never straddle a 4 KiB frame).
            let vals: Vec<RcBuf> = (0..4).map(|i| pinned(ctx, 2048, 9 + i as u8)).collect();
            let arena = Arena::with_memory(ctx.dp.memory());
            let m = getm(ctx, &arena, &vals, &["jumbo"]);
            assert!(m.sizes().total() > 8000 && m.sizes().total() <= ctx.dp.mtu());
            ctx.dp.send_object(c, Msg::new(9, 2), &m).unwrap();
            ctx.dp.flush().unwrap();
            let (hdr, bytes) = peer_recv(ctx);
            assert_eq!(hdr.seg_count, 1, "one jumbo frame, not segments");
            assert_eq!(bytes, m.serialize_to_vec());
            // In: the peer sends an 8,900-byte message; it arrives as a multi-buffer frame.
            let body: Vec<u8> = (0..8900u32).map(|i| (i % 251) as u8).collect();
            let mut dgram = vec![0u8; framing::HEADER_LEN + body.len()];
            framing::Repr::single(Msg::new(77, 5), body.len() as u32).emit(&mut dgram);
            dgram[framing::HEADER_LEN..].copy_from_slice(&body);
            ctx.peer.send_to(&dgram, ctx.our_addr).unwrap();
            let mut out = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(3);
            while out.is_empty() && Instant::now() < deadline {
                ctx.dp.recv_burst(&mut out).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(out.len(), 1, "counters: {:?}", ctx.dp.counters());
            assert_eq!(out[0].msg, Msg::new(77, 5));
            assert_eq!(&out[0].data[..], &body[..]);
            assert!(
                ctx.dp.xsk_stats().rx_multi_buffer >= 1,
                "arrived in several buffers"
            );
            wait_completions(ctx);
        });
    }

    #[test]
    fn large_objects_are_segmented_with_zero_copy_parts() {
        with_pair("segmented", 1500, ChecksumCaps::SOFTWARE, |ctx, _| {
            let c = connect(ctx);
            let vals: Vec<RcBuf> = (0..3)
                .map(|i| pinned(ctx, 3000 + i, 20 + i as u8))
                .collect();
            let arena = Arena::with_memory(ctx.dp.memory());
            let m = getm(ctx, &arena, &vals, &["seg", "ment"]);
            let want = m.serialize_to_vec();
            ctx.dp.send_object(c, Msg::new(10, 4), &m).unwrap();
            ctx.dp.flush().unwrap();
            let (first, got) = peer_recv_message(ctx);
            assert!(first.seg_count > 1);
            assert_eq!((first.msg_id, first.msg_type), (10, 4));
            assert_eq!(got, want);
            wait_completions(ctx);
        });
    }

    #[test]
    fn received_messages_are_zero_copy_and_bad_input_is_counted() {
        with_pair("receive", 1500, ChecksumCaps::SOFTWARE, |ctx, _| {
            let _c = connect(ctx);
            let mut dgram = vec![0u8; framing::HEADER_LEN + 300];
            framing::Repr::single(Msg::new(5, 1), 300).emit(&mut dgram);
            dgram[framing::HEADER_LEN..].fill(0xab);
            ctx.peer.send_to(&dgram, ctx.our_addr).unwrap();
            // Garbage: a datagram too short for the framing header, and one with a bad
            // version.
            ctx.peer.send_to(&[1, 2, 3], ctx.our_addr).unwrap();
            let mut bad = dgram.clone();
            bad[0] = 99;
            ctx.peer.send_to(&bad, ctx.our_addr).unwrap();
            let mut out = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(3);
            while ctx.dp.counters().bad_framing < 2 && Instant::now() < deadline {
                ctx.dp.recv_burst(&mut out).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(out.len(), 1);
            assert_eq!(&out[0].data[..], &[0xab; 300][..]);
            assert_eq!(out[0].peer, ctx.peer_addr);
            assert!(
                ctx.dp.memory().recover_ptr(&out[0].data).is_some(),
                "the message is a view of the pinned receive frame"
            );
            assert_eq!(ctx.dp.counters().bad_framing, 2);
            // Echo it back by reference (send_sga) to the peer.
            let conn = out[0].conn;
            let data = out[0].data.clone();
            ctx.dp.send_sga(conn, Msg::new(5, 2), &[data]).unwrap();
            ctx.dp.flush().unwrap();
            let (h, b) = peer_recv(ctx);
            assert_eq!((h.msg_id, h.msg_type), (5, 2));
            assert_eq!(b, vec![0xab; 300]);
            drop(out);
            wait_completions(ctx);
        });
    }

    /// A raw AF_PACKET socket on side B's veth end, to send frames no kernel socket would.
    struct RawSender {
        fd: OwnedFd,
        ifindex: i32,
    }

    impl RawSender {
        fn new(ns: &str, ifname: &str) -> RawSender {
            let ifname = ifname.to_string();
            in_netns(ns, move || {
                // SAFETY: plain socket creation; checked below.
                let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
                assert!(
                    fd >= 0,
                    "AF_PACKET socket: {}",
                    std::io::Error::last_os_error()
                );
                // SAFETY: `fd` is a fresh descriptor we own.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                let ifindex = datapath_xdp::sys::ifindex(&ifname).unwrap() as i32;
                RawSender { fd, ifindex }
            })
            .unwrap()
        }

        fn send(&self, frame: &[u8]) {
            // SAFETY: sockaddr_ll is plain data; all-zero is valid.
            let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_ifindex = self.ifindex;
            sa.sll_halen = 6;
            sa.sll_addr[..6].copy_from_slice(&frame[..6]);
            // SAFETY: `frame` and `sa` are valid for the lengths passed.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&sa as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            assert_eq!(
                r,
                frame.len() as isize,
                "{}",
                std::io::Error::last_os_error()
            );
        }
    }

    /// A well-formed frame from B to `dst` carrying message `body`; `edit` may change the
    /// framing header and body before the UDP checksum is computed.
    fn frame_to(
        info: &VethPairInfo,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        body: &[u8],
        edit: impl FnOnce(&mut [u8]),
    ) -> Vec<u8> {
        let t = HeaderTemplate::new(
            MacAddr(info.mac_b),
            MacAddr(info.mac_a),
            src,
            dst,
            64,
            ChecksumCaps::SOFTWARE,
        );
        let mut f = vec![0u8; FRAME_OVERHEAD + body.len()];
        let udp_payload = framing::HEADER_LEN + body.len();
        t.write(&mut f, udp_payload, 1);
        framing::Repr::single(Msg::new(3, 1), body.len() as u32).emit(&mut f[TEMPLATE_LEN..]);
        f[FRAME_OVERHEAD..].copy_from_slice(body);
        edit(&mut f[TEMPLATE_LEN..]);
        let mut acc = Accumulator::new();
        acc.add(&f[TEMPLATE_LEN..]);
        HeaderTemplate::set_udp_checksum(&mut f, t.udp_checksum(udp_payload, acc.sum()));
        f
    }

    #[test]
    fn malformed_frames_are_counted_and_dropped() {
        with_pair("malformed", 1500, ChecksumCaps::SOFTWARE, |ctx, info| {
            let raw = RawSender::new(&info.ns_b, &info.if_b);
            let (src, dst) = (ctx.peer_addr, ctx.our_addr);
            let good = frame_to(info, src, dst, b"hello", |_| {});
            let mut frames = Vec::new();
            frames.push(good.clone());
            // IPv4 header checksum wrong.
            let mut f = good.clone();
            f[24] ^= 0xff;
            frames.push(f);
            // UDP checksum wrong.
            let mut f = good.clone();
            f[41] ^= 0x01;
            frames.push(f);
            // UDP length beyond the IP payload.
            let mut f = good.clone();
            let ulen = u16::from_be_bytes([f[38], f[39]]) + 100;
            f[38..40].copy_from_slice(&ulen.to_be_bytes());
            frames.push(f);
            // IP total length beyond the frame.
            let mut f = good.clone();
            let tlen = u16::from_be_bytes([f[16], f[17]]) + 100;
            f[16..18].copy_from_slice(&tlen.to_be_bytes());
            frames.push(f);
            // Our port, someone else's address.
            let other = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 77, 0, 99), dst.port());
            frames.push(frame_to(info, src, other, b"hello", |_| {}));
            // A framing header with an unknown version (checksums valid).
            frames.push(frame_to(info, src, dst, b"hello", |p| p[0] = 9));
            // ARP for Ethernet/IPv4 with a hardware type of 99, and an ARP frame cut short.
            let mut arp = good[..14].to_vec();
            arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
            let mut bad_arp = arp.clone();
            bad_arp.extend_from_slice(&[0, 99, 8, 0, 6, 4, 0, 1]);
            bad_arp.extend_from_slice(&[0u8; 20]);
            frames.push(bad_arp);
            let mut short_arp = arp.clone();
            short_arp.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
            frames.push(short_arp);
            for f in &frames {
                raw.send(f);
            }
            let mut out = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(3);
            let want_drops = 8;
            while (out.is_empty() || ctx.dp.counters().total_drops() < want_drops)
                && Instant::now() < deadline
            {
                ctx.dp.recv_burst(&mut out).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
            let c = ctx.dp.counters();
            assert_eq!(out.len(), 1, "{c:?}");
            assert_eq!(&out[0].data[..], b"hello");
            assert_eq!(c.bad_checksum, 2, "{c:?}");
            assert_eq!(c.truncated, 3, "{c:?}");
            assert_eq!(c.wrong_dst, 1, "{c:?}");
            assert_eq!(c.bad_framing, 1, "{c:?}");
            assert_eq!(c.bad_arp, 1, "{c:?}");
            assert_eq!(c.total_drops(), want_drops, "{c:?}");
            // Still working afterwards.
            raw.send(&good);
            let deadline = Instant::now() + Duration::from_secs(3);
            while out.len() < 2 && Instant::now() < deadline {
                ctx.dp.recv_burst(&mut out).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(out.len(), 2);
        });
    }

    #[test]
    fn many_sends_release_every_buffer() {
        with_pair("soak", 9000, ChecksumCaps::NO_UDP_TX, |ctx, info| {
            let c = connect(ctx);
            let vals: Vec<RcBuf> = (0..2).map(|i| pinned(ctx, 1500, 70 + i as u8)).collect();
            let arena = Arena::with_memory(ctx.dp.memory());
            let m = getm(ctx, &arena, &vals, &["soak"]);
            let want = m.serialize_to_vec();
            wait_completions(ctx);
            let baseline = ctx.dp.memory().stats().live_items;
            // The peer drains concurrently and checks every datagram it gets.
            let peer = ctx.peer.try_clone().unwrap();
            peer.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let expect = want.clone();
            let reader = std::thread::spawn(move || {
                let mut buf = vec![0u8; 16384];
                let mut n = 0u32;
                while let Ok((len, _)) = peer.recv_from(&mut buf) {
                    assert_eq!(&buf[framing::HEADER_LEN..len], &expect[..]);
                    n += 1;
                }
                n
            });
            const N: u32 = 3000;
            let mut full = 0;
            for i in 0..N {
                loop {
                    match ctx.dp.send_object(c, Msg::new(i, 1), &m) {
                        Ok(()) => break,
                        Err(SendError::Full) => {
                            full += 1;
                            ctx.dp.flush().unwrap();
                            ctx.dp.poll_completions();
                        }
                        Err(e) => panic!("send {i}: {e}"),
                    }
                }
                if i % 32 == 31 {
                    ctx.dp.flush().unwrap();
                    ctx.dp.poll_completions();
                }
            }
            ctx.dp.flush().unwrap();
            wait_completions(ctx);
            assert_eq!(
                ctx.dp.memory().stats().live_items,
                baseline,
                "every head buffer and reference was released"
            );
            for v in &vals {
                assert_eq!(v.ref_count(), 1, "ours only: the object borrows its values");
            }
            let got = reader.join().unwrap();
            // Every datagram reached the peer's UDP layer: delivered to the socket, or dropped
            // there because the reader fell behind (RcvbufErrors); the delivered ones were
            // checked byte for byte by the reader.
            let snmp = std::process::Command::new("ip")
                .args(["netns", "exec", &info.ns_b, "cat", "/proc/net/snmp"])
                .output()
                .unwrap();
            let snmp = String::from_utf8_lossy(&snmp.stdout).to_string();
            let udp: Vec<u64> = snmp
                .lines()
                .filter(|l| l.starts_with("Udp: "))
                .nth(1)
                .expect("Udp counters")
                .split_whitespace()
                .skip(1)
                .map(|v| v.parse().unwrap())
                .collect();
            let (in_datagrams, rcvbuf_errors) = (udp[0], udp[4]);
            eprintln!(
                "soak: {N} sent, peer socket got {got}, UDP layer saw {in_datagrams} + \
                 {rcvbuf_errors} dropped for a full socket buffer; TX ring full {full} times"
            );
            assert!(got > 0);
            assert!(
                in_datagrams + rcvbuf_errors >= u64::from(N),
                "lost before the peer's UDP layer: {in_datagrams} + {rcvbuf_errors} < {N}"
            );
            assert_eq!(ctx.dp.kernel_stats().unwrap().tx_invalid_descs, 0);
        });
    }

    #[test]
    fn without_multi_buffer_every_frame_is_one_descriptor() {
        // The fallback for kernels without XDP_USE_SG, forced here: objects are copied into
        // one buffer per frame and still arrive intact.
        let tweak = |c: &mut XdpConfig| c.multi_buffer = false;
        with_pair_cfg(
            "single_buffer",
            1500,
            ChecksumCaps::SOFTWARE,
            tweak,
            |ctx, _| {
                assert_eq!(ctx.dp.max_segments(), 1);
                let c = connect(ctx);
                let vals: Vec<RcBuf> = (0..2).map(|i| pinned(ctx, 600, 90 + i as u8)).collect();
                let arena = Arena::with_memory(ctx.dp.memory());
                let m = getm(ctx, &arena, &vals, &["one"]);
                let before = ctx.dp.xsk_stats();
                ctx.dp.send_object(c, Msg::new(14, 1), &m).unwrap();
                let big: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
                ctx.dp.send_copy(c, Msg::new(15, 1), &big).unwrap();
                ctx.dp.flush().unwrap();
                let after = ctx.dp.xsk_stats();
                assert_eq!(
                    after.tx_descriptors - before.tx_descriptors,
                    after.tx_frames - before.tx_frames,
                    "one descriptor per frame"
                );
                let (h, bytes) = peer_recv_message(ctx);
                assert_eq!(h.msg_id, 14);
                let arena2 = Arena::new();
                let d = GetM::deserialize(&bytes, &arena2).unwrap();
                for (got, want) in d.get_vals().iter().zip(&vals) {
                    assert_eq!(got.as_bytes(), &want[..]);
                }
                let (h, bytes) = peer_recv_message(ctx);
                assert_eq!((h.msg_id, bytes), (15, big));
                wait_completions(ctx);
            },
        );
    }

    #[test]
    fn an_empty_fill_ring_drops_in_the_kernel_and_recovers() {
        // 8 receive frames only: a burst of 100 datagrams overruns them while we are not
        // polling. The kernel drops the rest (and counts them); we deliver what was placed and
        // keep working once the frames are recycled.
        let tweak = |c: &mut XdpConfig| c.rx_frames = 8;
        with_pair_cfg(
            "fill_ring",
            1500,
            ChecksumCaps::SOFTWARE,
            tweak,
            |ctx, _| {
                let _c = connect(ctx);
                let mut dgram = vec![0u8; framing::HEADER_LEN + 200];
                for i in 0..100u32 {
                    framing::Repr::single(Msg::new(i, 1), 200).emit(&mut dgram);
                    ctx.peer.send_to(&dgram, ctx.our_addr).unwrap();
                }
                std::thread::sleep(Duration::from_millis(100));
                let mut out = Vec::new();
                for _ in 0..10 {
                    ctx.dp.recv_burst(&mut out).unwrap();
                }
                let ks = ctx.dp.kernel_stats().unwrap();
                assert!(!out.is_empty() && out.len() <= 8, "delivered {}", out.len());
                assert!(
                    ks.rx_dropped + ks.rx_fill_ring_empty_descs > 0,
                    "the kernel counted the overrun"
                );
                drop(out);
                // Frames were recycled to the fill ring: the next datagram arrives.
                framing::Repr::single(Msg::new(1000, 1), 200).emit(&mut dgram);
                ctx.peer.send_to(&dgram, ctx.our_addr).unwrap();
                let mut out = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(3);
                while out.is_empty() && Instant::now() < deadline {
                    ctx.dp.recv_burst(&mut out).unwrap();
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(out.len(), 1);
                assert_eq!(out[0].msg.id, 1000);
            },
        );
    }

    #[test]
    fn refused_setups_clean_up_after_themselves() {
        if let Some(why) = XDP.skip_reason() {
            XDP.skip("setup_errors", &why);
            return;
        }
        let v = VethPair::create(&XDP, 1500).expect("create the veth pair");
        let (ns_a, if_a) = (v.ns_a.clone(), v.if_a.clone());
        let addr = SocketAddrV4::new(v.ip_a, PORT);
        let has_program = move || {
            let out = std::process::Command::new("ip")
                .args(["-n", &ns_a, "link", "show", &if_a])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
        };
        let if_a = v.if_a.clone();
        in_netns(&v.ns_a, move || {
            // veth has no AF_XDP zero-copy support: refused, and the program attached on the
            // way is detached again.
            let mut zc = XdpConfig::new(&if_a, addr);
            zc.mode = BindMode::ZeroCopy;
            assert!(
                XdpDatapath::new(zc).is_err(),
                "zero-copy bind refused on veth"
            );
            assert!(!has_program(), "the failed setup detached its program");
            let dp = XdpDatapath::new(XdpConfig::new(&if_a, addr)).expect("copy mode works");
            assert!(!dp.is_zero_copy());
            assert!(has_program());
            // A second datapath on the same interface is refused without touching the first.
            assert!(XdpDatapath::new(XdpConfig::new(&if_a, addr)).is_err());
            assert!(
                has_program(),
                "the refused setup left the first program attached"
            );
            drop(dp);
            assert!(!has_program(), "dropping the datapath detached its program");
        })
        .unwrap();
    }
}
