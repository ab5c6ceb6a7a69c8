//! datapath-ice end to end on DPDK's virtual devices, no E810 needed:
//!
//! - `net_ring`: an in-process cable. One end is the datapath; the other is read raw (the mbuf
//!   chains arrive as sent, so the number of segments per packet is visible) or is a second
//!   datapath.
//! - `net_af_packet` on one end of a veth pair between two network namespaces made here (needs
//!   root), with a kernel UDP socket in the other namespace checking the bytes.
//!
//! The EAL can be initialised once per process, so everything runs in one `#[test]`, scenario
//! after scenario, each printing its name. Without the `ice` feature, or without root for the
//! namespace part, the test says it was skipped (and fails under CORNFLAKES_REQUIRE_ICE=1).

mod common;

#[cfg(not(feature = "ice"))]
#[test]
fn dpdk_tests_need_the_ice_feature() {
    common::ICE.skip(
        "datapath-ice DPDK tests",
        "built without `--features ice` (needs DPDK 22.11, see crates/datapath-ice/APT_PACKAGES)",
    );
}

#[cfg(feature = "ice")]
mod with_dpdk {
    use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use cornflakes::cfptr::CFPtr;
    use cornflakes::datapath::{
        object_to_sga, Completions, Connect, DatapathMemory, Receive, Transmit,
    };
    use cornflakes::handwritten::GetM;
    use cornflakes::{
        Arena, CFBytes, CFString, ConnId, CornflakesObj, DecodeObj, Msg, PinnedMemory, RcBuf,
        RxMsg, SendError,
    };
    use cornflakes_stack::checksum;
    use cornflakes_stack::tx::{self, TxSink};
    use cornflakes_stack::wire::{framing, MacAddr};
    use cornflakes_stack::{EthStack, StackConfig};
    use datapath_ice::datapath::start_eal;
    use datapath_ice::eal_args::{EalOptions, HugePolicy};
    use datapath_ice::ffi::eal::RingLink;
    use datapath_ice::ffi::mbuf::{self, ExtCounters, Mempool};
    use datapath_ice::ffi::port;
    use datapath_ice::{IceConfig, IceDatapath, PortSpec};

    use super::common::{in_netns, NetnsGuard, VethPair, ICE};

    const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0x78, 0, 1]);
    const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0x78, 0, 2]);
    const LIMIT: usize = 8;

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 78, 0, last)
    }

    fn step(name: &str) {
        eprintln!("--- {name}");
    }

    #[test]
    fn dpdk_virtual_devices() {
        // Hugepages only when asked (CF_ICE_HUGEPAGES=1 and some reserved): the default run
        // must not depend on, or use up, the machine's hugepages.
        let huge = if std::env::var("CF_ICE_HUGEPAGES").as_deref() == Ok("1") {
            HugePolicy::Auto
        } else {
            HugePolicy::Never
        };
        let opts = EalOptions {
            huge,
            log_level: Some("warning".into()),
            ..EalOptions::default()
        };
        let args = start_eal(&opts).expect("EAL init");
        eprintln!("EAL started with: {}", args.join(" "));
        assert!(args
            .iter()
            .any(|a| a == "--no-shconf" || a == "--in-memory"));

        ring_raw_scenarios();
        ring_datapath_scenarios();
        af_packet_scenarios();

        // --no-shconf: no runtime directory or hugepage files with our prefix.
        let rt = datapath_ice::ffi::eal::runtime_dir();
        assert!(rt.to_string_lossy().contains("cf-ice-"), "{rt:?}");
        assert!(!rt.exists(), "{rt:?} left behind");
        let prefix = format!("cf-ice-{}", std::process::id());
        for dir in ["/var/run/dpdk", "/run/dpdk", "/dev/hugepages"] {
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    assert!(!name.starts_with(&prefix), "{dir}/{name} left behind");
                }
            }
        }
    }

    /// Pinned bytes of `len` with a pattern depending on `seed`.
    fn pinned(mem: &PinnedMemory, len: usize, seed: u8) -> RcBuf {
        let mut b = mem.alloc(len).expect("pinned buffer");
        for (i, x) in b.iter_mut().enumerate() {
            *x = seed.wrapping_add((i as u8).wrapping_mul(7));
        }
        b.freeze()
    }

    /// `GetM { id, keys, vals }`; values at least the arena's threshold long that lie in its
    /// pinned memory become zero-copy entries.
    fn getm<'a>(arena: &'a Arena, id: u32, keys: &[&str], vals: &[&[u8]]) -> GetM<'a> {
        let mut m = GetM::new_in(arena);
        m.set_id(id);
        m.init_keys(keys.len());
        for k in keys {
            m.get_mut_keys().append(CFString::new(k, arena));
        }
        m.init_vals(vals.len());
        for v in vals {
            m.get_mut_vals().append(CFBytes::new(v, arena));
        }
        m
    }

    /// The message bytes a send of `o` with at most `limit` segments puts on the wire: the
    /// contiguous encoding when nothing is demoted; with demotion, the demoted entries sit in
    /// the copy area, as `object_to_sga` (the same plan) lays them out.
    fn wire_bytes<O: CornflakesObj>(o: &O, mem: &PinnedMemory, limit: usize) -> Vec<u8> {
        let sga = object_to_sga(o, mem, limit).expect("sga");
        sga.iter().flat_map(|b| b.iter().copied()).collect()
    }

    /// Decodes `data` as `GetM` and checks it holds `id` and `vals`.
    fn check_getm(data: &[u8], id: u32, vals: &[RcBuf]) {
        let arena = Arena::new();
        let d = GetM::deserialize_bytes(data, &arena).expect("decodes");
        assert_eq!(d.get_id(), id);
        assert_eq!(d.get_vals().len(), vals.len());
        for (got, want) in d.get_vals().iter().zip(vals) {
            assert_eq!(got.as_bytes(), &want[..]);
        }
    }

    fn ring_cfg(link: &Arc<RingLink>, side: usize, mac: MacAddr, last: u8) -> IceConfig {
        let mut c = IceConfig::new(
            PortSpec::Ring(Arc::clone(link), side),
            SocketAddrV4::new(ip(last), 7000 + side as u16),
        );
        c.mac = Some(mac);
        c.rx_buffers = 512;
        c.tx_mbufs = 1024;
        c.max_segments = Some(LIMIT);
        c.memory.initial_bytes = 8 << 20;
        c.memory.region_bytes = 8 << 20;
        c
    }

    /// The far end of a ring, read raw: frames as the segments they arrived in, parsed by a
    /// stack of its own (so headers, checksums and framing are checked).
    /// A frame read raw: segments, bytes, and the (l2, l3) lengths of a checksum offload
    /// request.
    type Frame = (usize, Vec<u8>, Option<(u16, u16)>);

    struct RawPeer {
        port: u16,
        stack: EthStack,
        mem: PinnedMemory,
        _pool: Mempool,
    }

    impl RawPeer {
        /// Configures and starts `port` with a plain mempool (a ring port's receive path takes
        /// the sender's mbufs and never uses it).
        fn new(port: u16, mac: MacAddr, addr: SocketAddrV4) -> RawPeer {
            let pool = Mempool::pktmbuf("cfice_raw", 256, 2048).expect("raw pool");
            port::configure(port, 0, 0, 1500, 256, 256, &pool).expect("configure raw port");
            port::start(port, false).expect("start raw port");
            RawPeer {
                port,
                stack: EthStack::new(StackConfig::new(mac, addr)),
                mem: PinnedMemory::with_defaults().unwrap(),
                _pool: pool,
            }
        }

        /// Transmits `frames` as they are (one single-segment mbuf each) towards the datapath.
        fn send_raw(&self, frames: &[Vec<u8>]) {
            let counters = Rc::new(ExtCounters::default());
            let mut q: Vec<mbuf::Mbuf> = frames
                .iter()
                .map(|f| {
                    let b = self.mem.alloc_copy(f).expect("copy");
                    let iova = b.as_ptr() as u64;
                    mbuf::Mbuf::attach(&self._pool, b, iova, &counters).expect("mbuf")
                })
                .collect();
            let n = q.len();
            assert_eq!(mbuf::tx_burst(self.port, &mut q), n);
        }

        /// A well-formed frame carrying `data` from this peer to `to` (MAC `mac`).
        fn valid_frame(&mut self, to: SocketAddrV4, mac: MacAddr, data: &[u8]) -> Vec<u8> {
            struct Collect(Vec<RcBuf>);
            impl TxSink for Collect {
                fn free_slots(&self) -> usize {
                    usize::MAX
                }
                fn post(&mut self, buf: RcBuf, _end_of_frame: bool) {
                    self.0.push(buf);
                }
            }
            let mut cfg = self.stack.config().clone();
            cfg.static_arp = vec![(*to.ip(), mac)];
            let mut st = EthStack::new(cfg);
            let c = st.connect(to, Instant::now(), &mut |_| {}).unwrap();
            let mut sink = Collect(Vec::new());
            tx::send_copy(&mut st, &self.mem, &mut sink, c, Msg::new(99, 1), data).unwrap();
            assert_eq!(sink.0.len(), 1);
            sink.0[0].to_vec()
        }

        /// Every frame waiting, as (segments, bytes, checksum offload request); the mbufs are
        /// freed.
        fn frames(&self) -> Vec<Frame> {
            let mut got = Vec::new();
            let mut out = Vec::new();
            while mbuf::rx_burst(self.port, &mut got, 32) > 0 {
                for m in got.drain(..) {
                    let mut b = vec![0u8; m.pkt_len()];
                    let n = m.copy_to(&mut b);
                    assert_eq!(n, b.len(), "segment lengths add up to pkt_len");
                    out.push((m.segments(), b, m.tx_checksum_offload()));
                }
            }
            out
        }

        /// The messages the frames make up; every frame must be accepted.
        fn parse(&mut self, frames: &[Frame]) -> Vec<RxMsg> {
            let mut out = Vec::new();
            for (_, f, _) in frames {
                let buf = self.mem.alloc_copy(f).expect("copy");
                self.stack
                    .process_frame(&self.mem, buf, Instant::now(), &mut out, &mut |_| {});
            }
            let c = self.stack.counters();
            assert_eq!(c.total_drops(), 0, "raw peer dropped frames: {c:?}");
            out
        }
    }

    fn live(mem: &PinnedMemory) -> usize {
        mem.stats().live_items
    }

    fn ring_raw_scenarios() {
        let link = Arc::new(RingLink::new("cfice", 1024).expect("ring link"));
        let mut bad = ring_cfg(&link, 0, MAC_A, 1);
        bad.rx_buffer_size = Some(1 << 17);
        let err = IceDatapath::new(bad).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        // The failed attempt released the port: it can be opened now.
        let mut cfg = ring_cfg(&link, 0, MAC_A, 1);
        cfg.static_arp = vec![(ip(2), MAC_B)];
        let mut a = IceDatapath::new(cfg).expect("datapath on ring side a");
        let mut raw = RawPeer::new(link.ports()[1], MAC_B, SocketAddrV4::new(ip(2), 7001));
        assert_eq!(a.port_info().driver, "net_ring");
        let again = IceDatapath::new(ring_cfg(&link, 0, MAC_A, 1));
        assert_eq!(
            again.map(|_| ()).unwrap_err().kind(),
            std::io::ErrorKind::AddrInUse,
            "one datapath per port"
        );
        assert_eq!(a.max_segments(), LIMIT, "limit lowered from the port's");
        assert!(!a.checksum_offload(), "net_ring offers no checksum offload");
        let conn = a.connect(SocketAddrV4::new(ip(2), 7001)).unwrap();
        let mem = a.memory().clone();
        let arena = Arena::with_memory(&mem).with_threshold(64);

        step("ring: copy-only object is one segment");
        {
            let o = getm(&arena, 7, &["alpha", "beta"], &[b"short", b"tiny"]);
            assert_eq!(o.sizes().zero_copy_count, 0);
            a.send_object(conn, Msg::new(1, 2), &o).unwrap();
            assert_eq!(a.in_flight(), 1);
            a.flush().unwrap();
            let f = raw.frames();
            assert_eq!(f.len(), 1);
            assert_eq!(f[0].0, 1, "copy-only: one segment");
            let rx = raw.parse(&f);
            assert_eq!(rx.len(), 1);
            assert_eq!(rx[0].msg, Msg::new(1, 2));
            assert_eq!(&rx[0].data[..], &o.serialize_to_vec()[..]);
            assert_eq!(a.in_flight(), 0);
            assert_eq!(a.poll_completions(), 1);
        }

        step("ring: zero-copy-only object, buffers held until the receiver frees the mbufs");
        {
            // An arena of this step's own: it keeps the references its object was given
            // (`CFBytes::new`) until it goes, below.
            let arena = Arena::with_memory(&mem).with_threshold(64);
            let vals: Vec<RcBuf> = (0..3)
                .map(|i| pinned(&mem, 300 + 50 * i, i as u8))
                .collect();
            let o = getm(&arena, 8, &[], &[&vals[0], &vals[1], &vals[2]]);
            assert_eq!(o.sizes().zero_copy_count, 3);
            let rc0: Vec<u32> = vals.iter().map(RcBuf::ref_count).collect();
            a.send_object(conn, Msg::new(2, 2), &o).unwrap();
            let rc1: Vec<u32> = vals.iter().map(RcBuf::ref_count).collect();
            assert_eq!(rc1, rc0.iter().map(|r| r + 1).collect::<Vec<_>>());
            a.flush().unwrap();
            assert_eq!(a.in_flight(), 4, "head + 3 entries in the ring");
            let expect = o.serialize_to_vec();
            drop(vals);
            drop(arena);
            let live_mid = live(&mem);
            let f = raw.frames();
            assert_eq!(f.len(), 1);
            assert_eq!(f[0].0, 4, "head + one segment per zero-copy entry");
            assert_eq!(
                live_mid - live(&mem),
                4,
                "the 3 entries and the head buffer are released when the mbufs are freed"
            );
            assert_eq!(a.in_flight(), 0);
            assert_eq!(a.poll_completions(), 4);
            let rx = raw.parse(&f);
            assert_eq!(&rx[0].data[..], &expect[..]);
        }

        step("ring: mixed object");
        {
            let big1 = pinned(&mem, 700, 3);
            let big2 = pinned(&mem, 400, 4);
            let o = getm(
                &arena,
                9,
                &["k1", "a-longer-key"],
                &[b"small", &big1, &[9u8; 20], &big2],
            );
            assert_eq!(o.sizes().zero_copy_count, 2);
            a.send_object(conn, Msg::new(3, 4), &o).unwrap();
            a.flush().unwrap();
            let f = raw.frames();
            assert_eq!(f[0].0, 3);
            let rx = raw.parse(&f);
            assert_eq!(&rx[0].data[..], &o.serialize_to_vec()[..]);
        }

        step("ring: 10 zero-copy entries, limit 8: the 3 smallest are demoted to copies");
        {
            let sizes = [64, 200, 72, 180, 90, 160, 100, 150, 110, 140];
            let vals: Vec<RcBuf> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| pinned(&mem, n, 10 + i as u8))
                .collect();
            let refs: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
            let o = getm(&arena, 10, &["demote"], &refs);
            assert_eq!(o.sizes().zero_copy_count, 10);
            let rc0: Vec<u32> = vals.iter().map(RcBuf::ref_count).collect();
            a.send_object(conn, Msg::new(4, 1), &o).unwrap();
            for (i, v) in vals.iter().enumerate() {
                let demoted = matches!(sizes[i], 64 | 72 | 90);
                let want = rc0[i] + u32::from(!demoted);
                assert_eq!(v.ref_count(), want, "entry {i} ({} bytes)", sizes[i]);
            }
            a.flush().unwrap();
            let f = raw.frames();
            assert_eq!(f.len(), 1);
            assert_eq!(f[0].0, LIMIT, "head + 7 zero-copy segments");
            let rx = raw.parse(&f);
            assert_eq!(&rx[0].data[..], &wire_bytes(&o, &mem, LIMIT)[..]);
            assert_ne!(
                &rx[0].data[..],
                &o.serialize_to_vec()[..],
                "demoted entries moved"
            );
            check_getm(&rx[0].data, 10, &vals);
            assert_eq!(vals.iter().map(RcBuf::ref_count).collect::<Vec<_>>(), rc0);
        }

        step("ring: object above the MTU goes out in frames of at most 8 segments");
        {
            let vals: Vec<RcBuf> = [1400, 1300, 1200, 900]
                .iter()
                .enumerate()
                .map(|(i, &n)| pinned(&mem, n, 40 + i as u8))
                .collect();
            let refs: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
            let o = getm(&arena, 11, &["big"], &refs);
            a.send_object(conn, Msg::new(5, 1), &o).unwrap();
            a.flush().unwrap();
            let f = raw.frames();
            assert!(f.len() >= 4, "{} frames", f.len());
            assert!(f.iter().all(|(s, b, _)| *s <= LIMIT && b.len() <= 1514));
            assert!(
                f.iter().any(|(s, _, _)| *s > 1),
                "zero-copy slices, not copies"
            );
            let rx = raw.parse(&f);
            assert_eq!(rx.len(), 1, "reassembled");
            assert_eq!(&rx[0].data[..], &o.serialize_to_vec()[..]);
        }

        step("ring: send_copy and send_sga");
        {
            a.send_copy(conn, Msg::new(6, 1), b"copied bytes").unwrap();
            let e1 = pinned(&mem, 256, 1);
            let e2 = pinned(&mem, 512, 2);
            a.send_sga(conn, Msg::new(7, 1), &[e1.clone(), e2.clone()])
                .unwrap();
            a.flush().unwrap();
            let f = raw.frames();
            assert_eq!(f.len(), 2);
            assert_eq!((f[0].0, f[1].0), (1, 3));
            let rx = raw.parse(&f);
            assert_eq!(&rx[0].data[..], b"copied bytes");
            let mut want = e1.to_vec();
            want.extend_from_slice(&e2);
            assert_eq!(&rx[1].data[..], &want[..]);
        }

        step("ring: every region, also ones mapped later, is registered with IOVA = VA");
        {
            let regions = mem.stats().regions;
            let hold: Vec<RcBuf> = (0..700).map(|i| pinned(&mem, 16384, i as u8)).collect();
            assert!(
                mem.stats().regions > regions,
                "the allocations mapped a new region"
            );
            let mut n = 0;
            mem.for_each_region(|r| {
                assert_eq!(r.registration(), Some(r.base() as u64), "{r:?}");
                n += 1;
            });
            assert_eq!(n, mem.stats().regions);
            let st = mem.stats();
            eprintln!(
                "    {} regions: {} on hugepages (registered in 2 MiB pages), {} locked 4 KiB pages",
                st.regions, st.hugepage_regions, st.locked_regions
            );
            // A zero-copy entry from the newest region goes out like any other.
            let last = hold.last().unwrap().slice(0..1000);
            let o = getm(&arena, 13, &[], &[&last]);
            a.send_object(conn, Msg::new(9, 1), &o).unwrap();
            a.flush().unwrap();
            let f = raw.frames();
            assert_eq!(f[0].0, 2);
            assert_eq!(&raw.parse(&f)[0].data[..], &o.serialize_to_vec()[..]);
        }

        step("ring: malformed frames are counted and dropped, the next good one delivered");
        {
            let good = raw.valid_frame(a.local_addr(), MAC_A, b"after the junk");
            let mut bad_ip_csum = good.clone();
            bad_ip_csum[24] ^= 0xff; // IPv4 header checksum
            let mut non_ipv4 = good.clone();
            non_ipv4[12..14].copy_from_slice(&[0x86, 0xdd]);
            let cut = good[..good.len() - 5].to_vec(); // IPv4 total length past the end
            let frames = vec![
                Vec::new(),
                vec![0xffu8; 10],
                non_ipv4,
                bad_ip_csum,
                cut,
                good.clone(),
            ];
            let drops0 = a.counters().total_drops();
            raw.send_raw(&frames);
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(3);
            while got.is_empty() {
                a.recv_burst(&mut got).unwrap();
                assert!(Instant::now() < deadline, "the good frame never arrived");
            }
            assert_eq!(got.len(), 1);
            assert_eq!(&got[0].data[..], b"after the junk");
            let c = a.counters();
            assert_eq!(c.total_drops() - drops0, 5, "{c:?}");
            assert!(
                c.truncated >= 3 && c.non_ipv4 >= 1 && c.bad_checksum >= 1,
                "{c:?}"
            );
        }

        step("ring: a full queue flushes itself; a full ring reports Full, then recovers");
        {
            let v = pinned(&mem, 600, 6);
            let o = getm(&arena, 15, &[], &[&v]);
            // 2 segments each: 300 sends pass the queue's 512-segment capacity, so sends
            // flush on their own; the 1024 transmit mbufs and the ring hold all 300 frames.
            for i in 0..300u32 {
                a.send_object(conn, Msg::new(1000 + i, 1), &o).unwrap();
            }
            a.flush().unwrap();
            let f = raw.frames();
            assert_eq!(f.len(), 300);
            let ids: Vec<u32> = raw.parse(&f).iter().map(|m| m.msg.id).collect();
            assert_eq!(ids, (1000..1300).collect::<Vec<_>>(), "in order");
            // Nobody reads now: every transmit mbuf ends up in the ring, and sending fails with
            // Full, queueing nothing.
            let mut sent = 0u32;
            let full = loop {
                match a.send_object(conn, Msg::new(sent, 1), &o) {
                    Ok(()) => sent += 1,
                    Err(e) => break e,
                }
                assert!(sent < 5000, "the ring never filled");
            };
            assert!(matches!(full, SendError::Full), "{full}");
            assert!(sent >= 300, "{sent} frames before Full");
            assert!(a.in_flight() >= 2 * sent as usize - 2);
            let got = raw.frames().len() as u32;
            a.flush().unwrap();
            let rest = raw.frames().len() as u32;
            assert_eq!(got + rest, sent, "every accepted send arrives once");
            assert_eq!(a.stats().tx_alloc_failures, 0);
            a.send_object(conn, Msg::new(1, 1), &o).unwrap();
            a.flush().unwrap();
            assert_eq!(raw.frames().len(), 1);
            assert_eq!(a.in_flight(), 0);
        }

        step("ring: frames left in the ring are released when the datapath goes away");
        {
            let v = pinned(&mem, 600, 5);
            let o = getm(&arena, 12, &[], &[&v]);
            a.send_object(conn, Msg::new(8, 1), &o).unwrap();
            a.flush().unwrap();
            let rc = v.ref_count();
            drop(a);
            assert_eq!(v.ref_count(), rc - 1, "the in-flight clone was dropped");
            assert!(raw.frames().is_empty(), "the ring was drained");
        }

        step("ring: checksum offload marks the frame head and leaves the sums to the NIC");
        {
            let mut cfg = ring_cfg(&link, 0, MAC_A, 1);
            cfg.static_arp = vec![(ip(2), MAC_B)];
            cfg.pretend_checksum_offload = true;
            let mut a2 = IceDatapath::new(cfg).expect("the port is free again");
            assert!(a2.checksum_offload());
            let conn = a2.connect(SocketAddrV4::new(ip(2), 7001)).unwrap();
            let mem2 = a2.memory().clone();
            let arena2 = Arena::with_memory(&mem2).with_threshold(64);
            let big = pinned(&mem2, 500, 9);
            let o = getm(&arena2, 14, &["k"], &[b"x", &big]);
            a2.send_object(conn, Msg::new(10, 1), &o).unwrap();
            a2.flush().unwrap();
            let mut f = raw.frames();
            assert_eq!(f.len(), 1);
            assert_eq!(
                (f[0].0, f[0].2),
                (2, Some((14, 20))),
                "head requests IPv4+UDP offload"
            );
            let frame = &mut f[0].1;
            assert_eq!(&frame[24..26], &[0, 0], "IPv4 checksum left to the NIC");
            let udp_len = (frame.len() - 34) as u16;
            let pseudo = checksum::pseudo_header(ip(1).octets(), ip(2).octets(), udp_len);
            assert_eq!(
                u16::from_be_bytes([frame[40], frame[41]]),
                checksum::fold(pseudo),
                "the UDP field holds the pseudo-header sum"
            );
            // Complete both sums as the NIC does; then the frame must be accepted as is.
            let ipc = checksum::finish(checksum::data(&frame[14..34]));
            frame[24..26].copy_from_slice(&ipc.to_be_bytes());
            let udpc = match checksum::finish(checksum::data(&frame[34..])) {
                0 => 0xffff,
                c => c,
            };
            frame[40..42].copy_from_slice(&udpc.to_be_bytes());
            let rx = raw.parse(&f);
            assert_eq!(&rx[0].data[..], &o.serialize_to_vec()[..]);
        }
    }

    /// Polls both datapaths until `f` returns `Some`, or panics after 3 s.
    fn until<T>(
        a: &mut IceDatapath,
        b: &mut IceDatapath,
        what: &str,
        mut f: impl FnMut(&mut IceDatapath, &mut IceDatapath, &mut Vec<RxMsg>) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut got = Vec::new();
        loop {
            a.recv_burst(&mut got).unwrap();
            b.recv_burst(&mut got).unwrap();
            if let Some(t) = f(a, b, &mut got) {
                return t;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn ring_datapath_scenarios() {
        let link = Arc::new(RingLink::new("cficedp", 1024).expect("ring link"));
        let mut a = IceDatapath::new(ring_cfg(&link, 0, MAC_A, 1)).unwrap();
        let mut b = IceDatapath::new(ring_cfg(&link, 1, MAC_B, 2)).unwrap();
        let b_addr = b.local_addr();

        step("ring datapaths: ARP resolution, then a copy send");
        let conn = a.connect(b_addr).unwrap();
        match a.send_copy(conn, Msg::new(1, 1), b"hello") {
            Err(SendError::Resolving(c)) => assert_eq!(c, conn),
            other => panic!("expected Resolving before the ARP reply, got {other:?}"),
        }
        until(&mut a, &mut b, "ARP resolution", |a, _, _| {
            match a.send_copy(conn, Msg::new(1, 1), b"hello") {
                Ok(()) => Some(()),
                Err(SendError::Resolving(_)) => None,
                Err(e) => panic!("{e}"),
            }
        });
        a.flush().unwrap();
        let hello = until(&mut b, &mut a, "hello", |_, _, got| got.pop());
        assert_eq!(&hello.data[..], b"hello");
        assert_eq!(hello.peer, a.local_addr());
        assert!(b.counters().arp_replies_sent >= 1);

        step("ring datapaths: mixed object, zero-copy deserialization at the receiver");
        let mem_a = a.memory().clone();
        let arena_a = Arena::with_memory(&mem_a).with_threshold(64);
        let big = pinned(&mem_a, 900, 77);
        let o = getm(&arena_a, 5, &["key"], &[b"x", &big]);
        a.send_object(conn, Msg::new(2, 9), &o).unwrap();
        a.flush().unwrap();
        let rx = until(&mut b, &mut a, "object", |_, _, got| got.pop());
        assert_eq!(rx.msg, Msg::new(2, 9));
        assert_eq!(&rx.data[..], &o.serialize_to_vec()[..]);
        assert!(b.stats().rx_copied >= 1, "net_ring frames are copied");
        {
            let mem_b = b.memory().clone();
            let arena_b = Arena::with_memory(&mem_b).with_threshold(64);
            let d = GetM::deserialize_rcbuf(&rx.data, &arena_b).unwrap();
            assert_eq!(d.get_id(), 5);
            let v = d.get_vals().get(1).unwrap();
            assert_eq!(v.as_bytes(), &big[..]);
            match v.ptr() {
                CFPtr::ZeroCopy(r) => {
                    let start = rx.data.as_ptr() as usize;
                    let p = r.as_ptr() as usize;
                    assert!(p >= start && p + r.len() <= start + rx.data.len());
                }
                CFPtr::Copy(_) => panic!("a 900-byte value must reference the packet"),
            }
        }

        step("ring datapaths: reassembled large message, echoed back zero-copy");
        let vals: Vec<RcBuf> = [1400, 1300, 1200]
            .iter()
            .map(|&n| pinned(&mem_a, n, n as u8))
            .collect();
        let refs: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
        let o = getm(&arena_a, 6, &["big"], &refs);
        a.send_object(conn, Msg::new(3, 9), &o).unwrap();
        a.flush().unwrap();
        let rx = until(&mut b, &mut a, "large message", |_, _, got| got.pop());
        let enc = o.serialize_to_vec();
        assert_eq!(&rx.data[..], &enc[..]);
        b.send_sga(rx.conn, rx.msg, std::slice::from_ref(&rx.data))
            .unwrap();
        b.flush().unwrap();
        let echo = until(&mut a, &mut b, "echo", |_, _, got| got.pop());
        assert_eq!(echo.msg, Msg::new(3, 9));
        assert_eq!(&echo.data[..], &enc[..]);
        let c = a.counters();
        assert_eq!(c.total_drops(), 0, "{c:?}");
    }

    /// Receives one datagram on the kernel socket: (framing header, message bytes).
    fn kernel_recv(sock: &UdpSocket) -> (framing::Repr, Vec<u8>) {
        let mut buf = vec![0u8; 65536];
        let (n, _) = sock
            .recv_from(&mut buf)
            .expect("datagram from the datapath");
        let p = framing::Packet::new_checked(&buf[..n]).expect("framing header");
        let r = framing::Repr::parse(&p).expect("framing header");
        (r, buf[framing::HEADER_LEN..n].to_vec())
    }

    /// Receives the frames of one message and joins them by their offsets.
    fn kernel_recv_message(sock: &UdpSocket) -> (u32, u16, Vec<u8>) {
        let (r, first) = kernel_recv(sock);
        let mut whole = vec![0u8; r.total_len as usize];
        let mut have = 0;
        let mut put = |r: &framing::Repr, b: &[u8]| {
            let off = r.seg_offset as usize;
            whole[off..off + b.len()].copy_from_slice(b);
            b.len()
        };
        have += put(&r, &first);
        for _ in 1..r.seg_count {
            let (r2, b) = kernel_recv(sock);
            assert_eq!(r2.msg_id, r.msg_id);
            have += put(&r2, &b);
        }
        assert_eq!(have, whole.len());
        (r.msg_id, r.msg_type, whole)
    }

    fn send_resolved<O: CornflakesObj>(d: &mut IceDatapath, conn: ConnId, msg: Msg, o: &O) {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut sink = Vec::new();
        loop {
            match d.send_object(conn, msg, o) {
                Ok(()) => return,
                Err(SendError::Resolving(_)) => {
                    assert!(Instant::now() < deadline, "ARP for the kernel peer");
                    d.recv_burst(&mut sink).unwrap();
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn af_packet_scenarios() {
        if let Some(why) = ICE.skip_reason() {
            ICE.skip("af_packet scenarios", &why);
            return;
        }
        let v = match VethPair::create(&ICE, 1500) {
            Ok(v) => v,
            Err(e) => {
                // Root without the capabilities (e.g. an unprivileged container): an
                // environment limit, not a datapath failure (CORNFLAKES_REQUIRE_ICE=1 fails).
                ICE.skip(
                    "af_packet scenarios",
                    &format!("cannot create network namespaces and a veth pair: {e}"),
                );
                return;
            }
        };
        let peer_addr = SocketAddrV4::new(v.ip_b, 7300);
        let our = SocketAddrV4::new(v.ip_a, 7200);
        let sock = in_netns(&v.ns_b, move || UdpSocket::bind(peer_addr))
            .unwrap()
            .expect("kernel socket in namespace B");
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

        // The vdev's packet socket is created in this thread's namespace: A's.
        let _ns = NetnsGuard::enter(&v.ns_a).expect("enter namespace A");
        let mut cfg = IceConfig::new(
            PortSpec::Vdev(format!("net_af_packet9,iface={},qpairs=1", v.if_a)),
            our,
        );
        cfg.max_segments = Some(LIMIT);
        cfg.rx_buffers = 1024;
        // net_af_packet copies whole 2048-byte socket frames (2016 bytes of data) into mbufs.
        cfg.rx_buffer_size = Some(4096);
        cfg.memory.initial_bytes = 8 << 20;
        cfg.memory.region_bytes = 8 << 20;
        let mut d = IceDatapath::new(cfg).expect("net_af_packet port");
        assert_eq!(d.port_info().driver, "net_af_packet");
        assert_eq!(d.mac().0, v.mac_a, "the port's MAC is the veth end's");
        let mem = d.memory().clone();

        step("af_packet: kernel -> datapath, received into pinned mbufs, zero-copy decode");
        {
            let plain = Arena::new();
            let big = vec![0x5au8; 700];
            let o = getm(&plain, 31, &["from-kernel"], &[b"v", &big]);
            let enc = o.serialize_to_vec();
            let mut dgram = vec![0u8; framing::HEADER_LEN + enc.len()];
            framing::Repr::single(Msg::new(77, 5), enc.len() as u32).emit(&mut dgram);
            dgram[framing::HEADER_LEN..].copy_from_slice(&enc);
            // A datagram too short for the framing header first: dropped and counted, its
            // mbuf returned at once.
            sock.send_to(b"junk", our).unwrap();
            sock.send_to(&dgram, our).unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut got = Vec::new();
            while got.is_empty() {
                d.recv_burst(&mut got).unwrap();
                assert!(Instant::now() < deadline, "no message from the kernel");
                std::thread::sleep(Duration::from_millis(1));
            }
            let rx = got.pop().unwrap();
            assert_eq!(rx.msg, Msg::new(77, 5));
            assert_eq!(rx.peer, peer_addr);
            assert_eq!(&rx.data[..], &enc[..]);
            let s = d.stats();
            assert!(s.rx_zero_copy >= 1, "{s:?}");
            assert_eq!(
                rx.data.item_capacity(),
                4096,
                "a view of the mbuf's data room"
            );
            assert_eq!(s.rx_held, 1, "the mbuf is held while the message is");
            assert_eq!(d.counters().bad_framing, 1, "the junk datagram");
            let free_held = d.rx_free_buffers();
            {
                let arena = Arena::with_memory(&mem).with_threshold(64);
                let dec = GetM::deserialize_rcbuf(&rx.data, &arena).unwrap();
                let v = dec.get_vals().get(1).unwrap();
                assert_eq!(v.as_bytes(), &big[..]);
                assert!(matches!(v.ptr(), CFPtr::ZeroCopy(_)));
            }
            drop(rx);
            d.recv_burst(&mut got).unwrap();
            assert_eq!(d.stats().rx_held, 0, "returned to the pool once dropped");
            assert!(d.rx_free_buffers() > free_held);
        }

        let conn = d.connect(peer_addr).unwrap();
        let arena = Arena::with_memory(&mem).with_threshold(64);
        let kinds: Vec<(&str, Vec<usize>, usize)> = vec![
            ("copy-only", vec![10, 20], 1),
            ("zero-copy-only", vec![300, 400, 500], 4),
            ("mixed", vec![10, 300, 20, 400], 3),
            (
                "10 entries, limit 8",
                vec![64, 200, 72, 180, 90, 160, 100, 150, 110, 140],
                LIMIT,
            ),
        ];
        for (i, (kind, sizes, segs)) in kinds.into_iter().enumerate() {
            step(&format!("af_packet: datapath -> kernel, {kind}"));
            let vals: Vec<RcBuf> = sizes
                .iter()
                .enumerate()
                .map(|(j, &n)| pinned(&mem, n, (i * 16 + j) as u8))
                .collect();
            let refs: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
            let o = getm(&arena, 100 + i as u32, &["k"], &refs);
            let rc0: Vec<u32> = vals.iter().map(RcBuf::ref_count).collect();
            send_resolved(&mut d, conn, Msg::new(200 + i as u32, 1), &o);
            // Completions so far were ARP frames; the object's segments are still queued.
            d.poll_completions();
            assert_eq!(d.in_flight(), segs, "queued segments");
            let held: usize = vals
                .iter()
                .zip(&rc0)
                .filter(|(v, r)| v.ref_count() == **r + 1)
                .count();
            assert_eq!(held, segs - 1, "one clone per zero-copy segment until sent");
            d.flush().unwrap();
            // net_af_packet copies into the socket ring and frees the chain in tx_burst.
            assert_eq!(d.in_flight(), 0);
            assert_eq!(vals.iter().map(RcBuf::ref_count).collect::<Vec<_>>(), rc0);
            assert_eq!(d.poll_completions(), segs);
            let (r, bytes) = kernel_recv(&sock);
            assert_eq!((r.msg_id, r.msg_type), (200 + i as u32, 1));
            assert_eq!(
                bytes,
                wire_bytes(&o, &mem, LIMIT),
                "{kind}: bytes on the wire"
            );
            if segs < LIMIT {
                assert_eq!(
                    bytes,
                    o.serialize_to_vec(),
                    "{kind}: the contiguous encoding"
                );
            }
            check_getm(&bytes, 100 + i as u32, &vals);
        }

        step("af_packet: datapath -> kernel, message of several frames");
        {
            let vals: Vec<RcBuf> = [1400, 1300, 1200]
                .iter()
                .map(|&n| pinned(&mem, n, n as u8))
                .collect();
            let refs: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
            let o = getm(&arena, 300, &["big"], &refs);
            send_resolved(&mut d, conn, Msg::new(300, 2), &o);
            d.flush().unwrap();
            let (id, ty, whole) = kernel_recv_message(&sock);
            assert_eq!((id, ty), (300, 2));
            assert_eq!(whole, o.serialize_to_vec());
        }

        let c = d.counters();
        assert_eq!(c.bad_checksum + c.truncated, 0, "{c:?}");
        assert_eq!(c.bad_framing, 1, "only the junk datagram: {c:?}");
        drop(d);
    }
}
