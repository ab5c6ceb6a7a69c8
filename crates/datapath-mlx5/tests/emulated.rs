//! The driver's hot path against the emulated ConnectX: wire bytes, buffer lifetimes, error
//! completions, queue wrap-around and the receive path end to end.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{
    object_to_sga, Completions, Connect, DatapathMemory, Receive, Transmit,
};
use cornflakes::handwritten::GetM;
use cornflakes::mem::MemoryConfig;
use cornflakes::{
    Arena, CFBytes, CFPtr, CFString, ConnId, CornflakesObj, DecodeObj, Msg, PinnedMemory, RxMsg,
    SendError,
};
use cornflakes_stack::iface::{StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::wire::{ipv4, udp, MacAddr};
use datapath_mlx5::emu::{EmuConfig, EmuNic, EmuQueues};
use datapath_mlx5::prm::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 4791;

type Dp = Mlx5Datapath<EmuQueues>;

/// The datapath is a complete `cornflakes::Datapath` (usable by generic apps such as the echo
/// server).
const _: fn() = || {
    fn is_datapath<D: cornflakes::Datapath>() {}
    is_datapath::<Dp>();
};

struct Node {
    nic: EmuNic,
    dp: Dp,
}

fn memory() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        max_item_size: 64 * 1024,
        ..MemoryConfig::default()
    })
    .expect("pinned memory")
}

fn node(me: (MacAddr, Ipv4Addr), peer: (MacAddr, Ipv4Addr), emu: EmuConfig, caps: Caps) -> Node {
    node_with(me, Some(peer), emu, caps)
}

fn node_with(
    me: (MacAddr, Ipv4Addr),
    peer: Option<(MacAddr, Ipv4Addr)>,
    emu: EmuConfig,
    caps: Caps,
) -> Node {
    let nic = EmuNic::new(emu).expect("emulated device");
    let mem = memory();
    nic.register(&mem).expect("register");
    nic.set_flows(&flow_rules(me.0, PORT));
    let mut scfg = StackConfig::new(me.0, SocketAddrV4::new(me.1, PORT));
    scfg.static_arp = peer.map(|(mac, ip)| (ip, mac)).into_iter().collect();
    let caps = DeviceCaps {
        max_send_sge: caps.sge,
        inline_len: caps.inline_len,
        mtu: if caps.mtu == 0 { nic.mtu() } else { caps.mtu },
        csum_offload: caps.csum,
    };
    let dp = Mlx5Datapath::new(nic.queues(), mem, caps, Mlx5Config::new(scfg)).expect("datapath");
    Node { nic, dp }
}

#[derive(Clone, Copy)]
struct Caps {
    /// The port MTU the driver is told (0: the emulated device's).
    mtu: usize,
    sge: usize,
    inline_len: usize,
    csum: bool,
}

const CAPS: Caps = Caps {
    mtu: 0,
    sge: 16,
    inline_len: 18,
    csum: true,
};

fn pair(emu: EmuConfig, caps: Caps) -> (Node, Node) {
    let a = node((MAC_A, IP_A), (MAC_B, IP_B), emu.clone(), caps);
    let b = node((MAC_B, IP_B), (MAC_A, IP_A), emu, caps);
    EmuNic::link(&a.nic, &b.nic);
    (a, b)
}

fn connect(n: &mut Node, ip: Ipv4Addr) -> ConnId {
    n.dp.connect(SocketAddrV4::new(ip, PORT)).expect("connect")
}

/// The message bytes of a captured frame (after all headers, before padding); checks the
/// IPv4 and UDP checksums on the way.
fn message_of(frame: &[u8]) -> Vec<u8> {
    let ip = ipv4::Packet::new_checked(&frame[14..]).expect("ipv4");
    assert!(ip.verify_checksum(), "IPv4 checksum");
    let u = udp::Packet::new_checked(ip.payload()).expect("udp");
    assert!(
        u.verify_checksum(ip.src_addr(), ip.dst_addr()),
        "UDP checksum"
    );
    let end = 14 + ip.total_len() as usize;
    frame[FRAME_OVERHEAD..end].to_vec()
}

/// A GetM with `keys` copied keys and values of the given lengths (values of at least 512
/// bytes are zero-copy from pinned memory).
fn getm<'a>(
    arena: &'a Arena,
    mem: &PinnedMemory,
    id: u32,
    keys: usize,
    vals: &[usize],
) -> GetM<'a> {
    let mut m = GetM::new_in(arena);
    m.set_id(id);
    if keys > 0 {
        m.init_keys(keys);
        for k in 0..keys {
            m.get_mut_keys()
                .append(CFString::new(&format!("key-{id}-{k}"), arena));
        }
    }
    if !vals.is_empty() {
        m.init_vals(vals.len());
        for (i, &len) in vals.iter().enumerate() {
            let fill: Vec<u8> = (0..len)
                .map(|j| (j * 7 + i * 13 + id as usize) as u8)
                .collect();
            let v = mem.alloc_copy(&fill).expect("value");
            m.get_mut_vals()
                .append(CFBytes(CFPtr::from_rcbuf(v, arena)));
        }
    }
    m
}

/// Sends `m`, letting the device drain the send queue whenever it is full.
fn send<O: CornflakesObj>(a: &mut Node, conn: ConnId, msg: Msg, m: &O) {
    loop {
        match a.dp.send_object(conn, msg, m) {
            Ok(()) => return,
            Err(SendError::Full) => drive(a),
            Err(e) => panic!("send {msg:?}: {e}"),
        }
    }
}

fn drive(a: &mut Node) {
    a.dp.flush().expect("flush");
    a.nic.process();
    a.dp.poll_completions();
}

/// The keys and value lengths of object `id`: copy only, zero-copy only, mixed, or tiny; the
/// values of one object stay within one 1500-byte frame.
fn shape(rng: &mut SmallRng, id: u32) -> (usize, Vec<usize>) {
    let (keys, vals): (usize, Vec<usize>) = match id % 4 {
        0 => (rng.gen_range(1..6), vec![]),
        1 => (
            0,
            (0..rng.gen_range(1..8))
                .map(|_| rng.gen_range(512..1100))
                .collect(),
        ),
        2 => (
            rng.gen_range(0..4),
            (0..rng.gen_range(1..5))
                .map(|_| rng.gen_range(10..1000))
                .collect(),
        ),
        _ => (1, vec![]),
    };
    let mut total = 0;
    let vals = vals
        .into_iter()
        .map(|v| {
            total += v;
            if total > 1200 {
                16
            } else {
                v
            }
        })
        .collect();
    (keys, vals)
}

#[test]
fn wire_bytes_equal_the_contiguous_encoding_across_sq_and_cq_wraparound() {
    // A small SQ (32 WQEBBs) and CQ (32 entries): hundreds of sends wrap both many times, and
    // WQEs of several blocks straddle the end of the ring.
    let emu = EmuConfig {
        sq_wqebbs: 32,
        rq_entries: 32,
        cq_entries: 32,
        ..EmuConfig::default()
    };
    let spill = Caps {
        csum: false,
        inline_len: 40,
        ..CAPS
    };
    // Offloaded checksums take the one-walk post (entries' data segments written while the
    // object's head is): inlining 128 bytes reaches into the object's head, and a head of
    // fewer bytes is inlined whole (no data segment of its own).
    let deep = Caps {
        inline_len: 128,
        ..CAPS
    };
    for caps in [CAPS, spill, deep] {
        let (mut a, _b) = pair(emu.clone(), caps);
        let conn = connect(&mut a, IP_B);
        let mem = a.dp.memory().clone();
        let mut rng = SmallRng::seed_from_u64(7);
        let mut want = Vec::new();
        for id in 0..400u32 {
            let arena = Arena::with_memory(&mem);
            let (keys, vals) = shape(&mut rng, id);
            let m = getm(&arena, &mem, id, keys, &vals);
            want.push(m.serialize_to_vec());
            send(&mut a, conn, Msg::new(id, 1), &m);
            if id % 3 == 0 {
                drive(&mut a);
            }
        }
        drive(&mut a);
        let wire = a.nic.wire();
        assert_eq!(wire.len(), want.len());
        for (id, (frame, want)) in wire.iter().zip(&want).enumerate() {
            assert_eq!(&message_of(frame), want, "object {id}");
        }
        let st = a.nic.stats();
        assert_eq!((st.tx_errors, st.cq_overruns, st.bad_doorbells), (0, 0, 0));
        assert!(
            st.max_data_segments > 2,
            "zero-copy entries went out as data segments"
        );
        assert_eq!(a.dp.in_flight(), 0);
        assert!(
            a.dp.stats().tx.doorbells < want.len() as u64,
            "one doorbell per batch"
        );
        assert_eq!(
            mem.stats().live_items,
            a.dp.rx_posted(),
            "only receive buffers remain"
        );
    }
}

#[test]
fn more_zero_copy_entries_than_data_segments_demotes_the_smallest() {
    // 4 gather entries per WQE: the packet/object header and 3 zero-copy values.
    let (mut a, _b) = pair(EmuConfig::default(), Caps { sge: 4, ..CAPS });
    assert_eq!(a.dp.max_segments(), 4);
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let arena = Arena::with_memory(&mem);
    let arena = arena.with_threshold(100);
    let m = getm(&arena, &mem, 9, 2, &[160, 120, 200, 130, 140, 300]);
    assert_eq!(m.sizes().zero_copy_count, 6);
    a.dp.send_object(conn, Msg::new(9, 2), &m).unwrap();
    drive(&mut a);
    let st = a.nic.stats();
    assert_eq!(
        (st.frames_sent, st.data_segments, st.max_data_segments),
        (1, 4, 4)
    );
    // The wire carries the encoding with the three smallest values demoted into the copy
    // area: the same bytes as the scatter-gather array a 4-entry sender would build.
    let sga = object_to_sga(&m, &mem, 4).unwrap();
    assert_eq!(sga.len(), 4);
    let want: Vec<u8> = sga.iter().flat_map(|b| b.iter().copied()).collect();
    let wire = message_of(&a.nic.wire()[0]);
    assert_eq!(wire, want);
    let back = GetM::deserialize(&wire, &arena).unwrap();
    let vals: Vec<&[u8]> = back.get_vals().iter().map(|v| v.as_bytes()).collect();
    let orig: Vec<&[u8]> = m.get_vals().iter().map(|v| v.as_bytes()).collect();
    assert_eq!(vals, orig);
}

#[test]
fn buffers_are_released_only_after_their_completion() {
    let (mut a, _b) = pair(EmuConfig::default(), CAPS);
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let value = mem.alloc_copy(&[0x5a; 4000]).unwrap();
    let mut arena = Arena::with_memory(&mem);
    let mut m = GetM::new_in(&arena);
    m.init_vals(2);
    m.get_mut_vals()
        .append(CFBytes(CFPtr::from_rcbuf(value.slice(..600), &arena)));
    m.get_mut_vals()
        .append(CFBytes(CFPtr::from_rcbuf(value.slice(2000..2700), &arena)));
    let base_refs = value.ref_count();
    let base_live = mem.stats().live_items;

    a.dp.send_object(conn, Msg::new(1, 1), &m).unwrap();
    assert_eq!(
        value.ref_count(),
        base_refs + 2,
        "one reference per data segment"
    );
    assert_eq!(mem.stats().live_items, base_live + 1, "the header buffer");
    a.dp.flush().unwrap();
    assert_eq!(a.dp.in_flight(), 1);
    assert_eq!(
        a.dp.poll_completions(),
        0,
        "nothing completes before the device ran"
    );
    assert_eq!(value.ref_count(), base_refs + 2);

    a.nic.process();
    assert_eq!(
        value.ref_count(),
        base_refs + 2,
        "the CQE is written but not yet polled"
    );
    assert_eq!(a.dp.poll_completions(), 1);
    assert_eq!(value.ref_count(), base_refs);
    assert_eq!(mem.stats().live_items, base_live);
    assert_eq!(a.dp.in_flight(), 0);

    // The application may drop its object, and reset its arena (which kept the slices the
    // object was given), right after the send: the WQE keeps the bytes.
    a.dp.send_object(conn, Msg::new(2, 1), &m).unwrap();
    let want = m.serialize_to_vec();
    arena.reset();
    assert_eq!(value.ref_count(), 3);
    drive(&mut a);
    assert_eq!(value.ref_count(), 1);
    assert_eq!(message_of(&a.nic.wire()[1]), want);
}

#[test]
fn a_forged_lkey_is_refused_by_the_device_and_the_queue_recovers() {
    let (mut a, _b) = pair(EmuConfig::default(), CAPS);
    // Memory registered with another device: its registration is that device's lkey, which
    // this device does not know for that address range.
    let other = EmuNic::new(EmuConfig {
        lkey_base: 0x2000,
        ..EmuConfig::default()
    })
    .unwrap();
    let foreign = memory();
    other.register(&foreign).unwrap();
    // Memory registered nowhere: the driver posts it with the invalid lkey.
    let unregistered = memory();
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    for (round, bad) in [&foreign, &unregistered].into_iter().enumerate() {
        let value = bad.alloc_copy(&[7u8; 900]).unwrap();
        let arena = Arena::with_memory(&mem);
        let mut m = GetM::new_in(&arena);
        m.init_vals(1);
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(value.clone(), &arena)));
        a.dp.send_object(conn, Msg::new(1, 1), &m).unwrap();
        // The arena goes, and with it the clone the object was given.
        drop(arena);
        // A second, good message behind it in the same batch is flushed by the device.
        let arena2 = Arena::with_memory(&mem);
        let good = getm(&arena2, &mem, 2, 1, &[700]);
        a.dp.send_object(conn, Msg::new(2, 1), &good).unwrap();
        a.dp.flush().unwrap();
        a.nic.process();
        assert_eq!(
            value.ref_count(),
            2,
            "held until the error completion is polled"
        );
        assert_eq!(a.dp.poll_completions(), 2);
        assert_eq!(value.ref_count(), 1, "released by the error completion");
        let st = a.dp.stats();
        assert_eq!(st.tx.error_cqes, round as u64 + 1);
        assert_eq!(st.tx.flushed_cqes, round as u64 + 1);
        assert_eq!(st.tx.last_syndrome, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
        assert_eq!(st.tx.recoveries, round as u64 + 1);
        assert_eq!(
            a.nic.stats().frames_sent,
            round as u64,
            "nothing of the batch went out"
        );
        // The whole QP was in error: the device flushed every posted receive WQE, and the
        // recovery consumed those completions (releasing the buffers) before reposting.
        let e = a.nic.stats();
        assert_eq!(e.rx_flushed, 128 * (round as u64 + 1));
        assert_eq!(a.dp.stats().rx_discarded, 128 * (round as u64 + 1));
        assert_eq!((e.resets, e.bad_doorbells), (round as u64 + 1, 0));
        assert_eq!(a.dp.stats().reset_failures, 0);
        // After recovery the queue works again.
        a.dp.send_object(conn, Msg::new(3, 1), &good).unwrap();
        drive(&mut a);
        let wire = a.nic.wire();
        assert_eq!(message_of(wire.last().unwrap()), good.serialize_to_vec());
        assert_eq!(a.dp.in_flight(), 0);
        assert_eq!(
            a.dp.rx_posted(),
            128,
            "receive queue reposted after the reset"
        );
    }
    assert_eq!(a.dp.stats().tx.unregistered, 1);
}

fn recv_all(n: &mut Node) -> Vec<RxMsg> {
    let mut out = Vec::new();
    while n.dp.recv_burst(&mut out).unwrap() > 0 {}
    out
}

#[test]
fn receive_path_end_to_end_into_rxmsg_and_back() {
    let emu = EmuConfig {
        sq_wqebbs: 32,
        rq_entries: 16,
        cq_entries: 32,
        ..EmuConfig::default()
    };
    let (mut a, mut b) = pair(emu, CAPS);
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let mut rng = SmallRng::seed_from_u64(11);
    // 100 messages through a 16-entry receive queue and a 32-entry CQ: both wrap several times.
    let mut sent = Vec::new();
    for id in 0..100u32 {
        let arena = Arena::with_memory(&mem);
        let (keys, vals) = shape(&mut rng, id);
        let m = getm(&arena, &mem, id, keys, &vals);
        send(&mut a, conn, Msg::new(id, 3), &m);
        sent.push((id, m.serialize_to_vec()));
        if id % 8 == 7 {
            drive(&mut a);
        }
        if id % 16 == 15 {
            let got = recv_all(&mut b);
            assert_eq!(got.len(), 16, "batch ending at {id}");
        }
    }
    drive(&mut a);
    let tail = recv_all(&mut b);
    assert_eq!(tail.len(), 4);
    assert_eq!(b.dp.counters().delivered, 100);
    assert_eq!(b.dp.counters().total_drops(), 0);

    // Echo one message back and decode it on A.
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, 77, 2, &[900, 40]);
    a.dp.send_object(conn, Msg::new(77, 5), &m).unwrap();
    drive(&mut a);
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 1);
    let rx = &got[0];
    assert_eq!(
        (rx.msg, rx.peer),
        (Msg::new(77, 5), SocketAddrV4::new(IP_A, PORT))
    );
    assert_eq!(&rx.data[..], &m.serialize_to_vec()[..]);
    let barena = Arena::with_memory(b.dp.memory());
    let back = GetM::deserialize(&rx.data, &barena).unwrap();
    assert_eq!(back.get_id(), 77);
    assert_eq!(
        back.get_vals().get(0).unwrap().as_bytes(),
        m.get_vals().get(0).unwrap().as_bytes()
    );
    // Echo the decoded object: its large value references B's receive buffer (zero-copy).
    let echo_obj = GetM::deserialize_rcbuf(&rx.data, &barena).unwrap();
    b.dp.send_object(rx.conn, rx.msg, &echo_obj).unwrap();
    drive(&mut b);
    let echoed = recv_all(&mut a);
    assert_eq!(echoed.len(), 1);
    assert_eq!(&echoed[0].data[..], &m.serialize_to_vec()[..]);
    drop(got);
    drop(echoed);
    drop(tail);
    b.dp.poll_completions();
    assert_eq!(b.dp.memory().stats().live_items, b.dp.rx_posted());
}

#[test]
fn messages_larger_than_a_frame_are_segmented_and_reassembled() {
    let (mut a, mut b) = pair(EmuConfig::default(), CAPS);
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, 5, 3, &[3000, 9000, 700, 20]);
    a.dp.send_object(conn, Msg::new(5, 1), &m).unwrap();
    drive(&mut a);
    assert!(a.nic.stats().frames_sent >= 9);
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].data[..], &m.serialize_to_vec()[..]);
    let data: Vec<u8> = (0..5000).map(|i| i as u8).collect();
    a.dp.send_copy(conn, Msg::new(6, 1), &data).unwrap();
    let entries = [
        mem.alloc_copy(&data[..2500]).unwrap(),
        mem.alloc_copy(&data[2500..]).unwrap(),
    ];
    a.dp.send_sga(conn, Msg::new(7, 1), &entries).unwrap();
    drive(&mut a);
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|r| r.data[..] == data[..]));
}

#[test]
fn malformed_frames_and_device_errors_are_counted_not_fatal() {
    // The port passes jumbo frames but the driver's 2 KiB buffers do not hold them.
    let emu = EmuConfig {
        mtu: 9000,
        ..EmuConfig::default()
    };
    let (mut a, mut b) = pair(emu, Caps { mtu: 1500, ..CAPS });
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, 1, 1, &[600]);
    a.dp.send_object(conn, Msg::new(1, 1), &m).unwrap();
    drive(&mut a);
    let good = a.nic.wire()[0].clone();

    // Steered away by the flow rules (wrong MAC), never reaches the driver.
    let mut wrong_mac = good.clone();
    wrong_mac[5] ^= 1;
    b.nic.inject(&wrong_mac);
    // Bad IPv4 checksum: the device says so in the CQE.
    let mut bad_ip = good.clone();
    bad_ip[14 + 10] ^= 0xff;
    b.nic.inject(&bad_ip);
    // Framing header garbage (checksums refreshed so only the framing is wrong).
    let mut bad_framing = good.clone();
    bad_framing[14 + 20 + 8] = 0xee;
    let ip_len = u16::from_be_bytes([good[16], good[17]]) as usize;
    {
        let ipb = &mut bad_framing[14..14 + ip_len];
        let mut ip = ipv4::Packet::new_unchecked(&mut ipb[..]);
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        ip.fill_checksum();
        let mut u = udp::Packet::new_unchecked(&mut ipb[20..]);
        u.fill_checksum(s, d);
    }
    b.nic.inject(&bad_framing);
    // Truncated UDP (IP length points past the frame), checksums not consistent either.
    b.nic.inject(&good[..40]);
    // Longer than the receive buffer: error CQE from the device.
    let mut long = good.clone();
    long.resize(3000, 0);
    b.nic.inject(&long);
    // Longer than the port MTU: dropped by the device.
    let mut jumbo = good.clone();
    jumbo.resize(9100, 0);
    b.nic.inject(&jumbo);
    // Frame shorter than an IPv4 header (padded like a runt): the stack counts it.
    let mut runt = good[..14 + 12].to_vec();
    runt.resize(60, 0);
    b.nic.inject(&runt);
    b.nic.inject(&good);

    let got = recv_all(&mut b);
    assert_eq!(got.len(), 2, "the frame A sent and the good copy arrive");
    let c = b.dp.counters();
    assert_eq!(c.bad_checksum, 1, "{c:?}");
    assert_eq!(c.bad_framing, 1, "{c:?}");
    assert_eq!(c.delivered, 2);
    let st = b.dp.stats();
    assert_eq!(st.rx_bad_csum, 1);
    assert_eq!(st.rx_error_cqes, 1);
    assert_eq!(
        st.rx_last_syndrome,
        datapath_mlx5::prm::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR
    );
    let e = b.nic.stats();
    assert_eq!((e.rx_steered_away, e.rx_oversize), (3, 1), "{e:?}");
    assert_eq!(c.total_drops(), 2, "{c:?}");
    assert_eq!(st.rx_frames, 4, "{st:?}");
    assert_eq!(b.dp.rx_posted(), 128);
}

#[test]
fn a_full_send_queue_reports_full_until_completions_are_polled() {
    let emu = EmuConfig {
        sq_wqebbs: 16,
        ..EmuConfig::default()
    };
    let (mut a, _b) = pair(emu, CAPS);
    let conn = connect(&mut a, IP_B);
    let mut n = 0;
    let err = loop {
        match a.dp.send_copy(conn, Msg::new(n, 0), b"ping") {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SendError::Full), "{err}");
    assert!(n >= 2, "{n} sends fit");
    a.dp.flush().unwrap();
    assert!(matches!(
        a.dp.send_copy(conn, Msg::new(99, 0), b"x"),
        Err(SendError::Full)
    ));
    a.nic.process();
    assert_eq!(a.dp.poll_completions(), n as usize);
    a.dp.send_copy(conn, Msg::new(99, 0), b"x").unwrap();
    drive(&mut a);
    assert_eq!(a.nic.wire().len(), n as usize + 1);
}

#[test]
fn receive_queue_overflow_is_dropped_by_the_device_and_refilled() {
    let emu = EmuConfig {
        rq_entries: 8,
        ..EmuConfig::default()
    };
    let (mut a, mut b) = pair(emu, CAPS);
    let conn = connect(&mut a, IP_B);
    for i in 0..20 {
        a.dp.send_copy(conn, Msg::new(i, 0), &[i as u8; 100])
            .unwrap();
    }
    drive(&mut a);
    assert_eq!(b.nic.stats().rx_no_wqe, 12);
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 8);
    assert_eq!(b.dp.rx_posted(), 8);
    for i in 0..8 {
        a.dp.send_copy(conn, Msg::new(100 + i, 0), &[1; 10])
            .unwrap();
    }
    drive(&mut a);
    assert_eq!(recv_all(&mut b).len(), 8);
}

#[test]
fn arp_resolves_through_the_emulated_wire() {
    let a = node((MAC_A, IP_A), (MAC_B, IP_B), EmuConfig::default(), CAPS);
    let mut a = a;
    // B has no ARP entry for A: it asks by broadcast, A answers through its send queue.
    let mut b = node_with((MAC_B, IP_B), None, EmuConfig::default(), CAPS);
    EmuNic::link(&a.nic, &b.nic);
    let conn = connect(&mut b, IP_A);
    assert!(matches!(
        b.dp.send_copy(conn, Msg::new(1, 0), b"x"),
        Err(SendError::Resolving(_))
    ));
    b.nic.process();
    let req = b.nic.wire();
    assert_eq!(req.len(), 1);
    assert_eq!(&req[0][..6], &[0xff; 6], "broadcast ARP request");
    assert_eq!(u16::from_be_bytes([req[0][12], req[0][13]]), 0x0806);
    assert!(recv_all(&mut a).is_empty());
    assert_eq!(a.dp.counters().arp_replies_sent, 1);
    a.nic.process();
    b.dp.poll_completions();
    recv_all(&mut b);
    b.dp.send_copy(conn, Msg::new(1, 0), b"hello").unwrap();
    drive(&mut b);
    let got = recv_all(&mut a);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].data[..], b"hello");
}

#[test]
fn wqes_straddling_the_end_of_the_ring_are_gathered_whole() {
    // 16 WQEBBs; each WQE is control + Ethernet + 7 data segments = 10 units = 3 WQEBBs, so
    // WQEs start at 0, 3, 6, 9, 12, then 15 (wrapping to 0 and 1), 2, ...
    let emu = EmuConfig {
        sq_wqebbs: 16,
        ..EmuConfig::default()
    };
    let (mut a, _b) = pair(emu, CAPS);
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let mut want = Vec::new();
    for id in 0..20 {
        let arena = Arena::with_memory(&mem).with_threshold(64);
        let m = getm(&arena, &mem, id, 1, &[100, 90, 80, 70, 120, 110]);
        a.dp.send_object(conn, Msg::new(id, 1), &m).unwrap();
        want.push(m.serialize_to_vec());
        drive(&mut a);
    }
    let st = a.nic.stats();
    assert_eq!(
        (st.frames_sent, st.max_data_segments, st.tx_errors),
        (20, 7, 0)
    );
    for (frame, want) in a.nic.wire().iter().zip(&want) {
        assert_eq!(&message_of(frame), want);
    }
}

#[test]
fn completions_naming_no_outstanding_wqe_are_ignored() {
    use cornflakes_stack::TxSink;
    use datapath_mlx5::prm::{Cqe, MLX5_CQE_REQ};
    use datapath_mlx5::queue::{QueueMemory, SendQueue};
    let nic = EmuNic::new(EmuConfig::default()).unwrap();
    let mem = memory();
    nic.register(&mem).unwrap();
    let q = nic.queues();
    let mut sq = SendQueue::new(q.sq(), q.sq_dbrec(), q.qpn(), 18, 0, 64).unwrap();
    let frame = mem.alloc_copy(&[1u8; 100]).unwrap();
    sq.post(frame.clone(), true);
    assert_eq!((sq.outstanding(), frame.ref_count()), (1, 2));
    for wqe_counter in [1, 5, 0xffff, 0x8000] {
        let cqe = Cqe {
            opcode: MLX5_CQE_REQ,
            wqe_counter,
            ..Cqe::default()
        };
        assert_eq!(sq.complete(&cqe), 0);
    }
    assert_eq!(sq.stats().stale_cqes, 4);
    assert_eq!((sq.outstanding(), frame.ref_count()), (1, 2));
    let cqe = Cqe {
        opcode: MLX5_CQE_REQ,
        wqe_counter: 0,
        ..Cqe::default()
    };
    assert_eq!(sq.complete(&cqe), 1);
    assert_eq!((sq.outstanding(), frame.ref_count()), (0, 1));
    assert_eq!(sq.complete(&cqe), 0, "a repeated CQE is stale");
}

#[test]
fn a_small_send_cq_bounds_the_wqes_in_flight() {
    // 256 WQEBBs but only 8 CQEs: at most 8 WQEs may be outstanding, or flush errors could
    // overrun the CQ.
    let emu = EmuConfig {
        sq_wqebbs: 256,
        rq_entries: 8,
        cq_entries: 8,
        ..EmuConfig::default()
    };
    let (mut a, _b) = pair(emu, CAPS);
    let conn = connect(&mut a, IP_B);
    let mut n = 0;
    while a.dp.send_copy(conn, Msg::new(n, 0), b"ping").is_ok() {
        n += 1;
    }
    assert_eq!(n, 8);
    drive(&mut a);
    assert_eq!(a.dp.in_flight(), 0);
    a.dp.send_copy(conn, Msg::new(n, 0), b"ping").unwrap();
    drive(&mut a);
    assert_eq!(
        (a.nic.stats().frames_sent, a.nic.stats().cq_overruns),
        (9, 0)
    );
}

#[test]
fn a_receive_cq_smaller_than_the_receive_queue_is_refused() {
    let nic = EmuNic::new(EmuConfig {
        rq_entries: 128,
        cq_entries: 64,
        ..EmuConfig::default()
    })
    .unwrap();
    let mem = memory();
    nic.register(&mem).unwrap();
    let caps = DeviceCaps {
        max_send_sge: 8,
        inline_len: 18,
        mtu: 1500,
        csum_offload: false,
    };
    let cfg = Mlx5Config::new(StackConfig::new(MAC_A, SocketAddrV4::new(IP_A, PORT)));
    assert!(Mlx5Datapath::new(nic.queues(), mem, caps, cfg).is_err());
}

#[test]
fn random_frames_are_counted_never_fatal() {
    for csum in [true, false] {
        random_frames(Caps { csum, ..CAPS });
    }
}

fn random_frames(caps: Caps) {
    let (mut a, mut b) = pair(EmuConfig::default(), caps);
    let conn = connect(&mut a, IP_B);
    let mem = a.dp.memory().clone();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, 1, 2, &[700]);
    a.dp.send_object(conn, Msg::new(1, 1), &m).unwrap();
    drive(&mut a);
    let good = a.nic.wire()[0].clone();
    recv_all(&mut b);
    let mut rng = SmallRng::seed_from_u64(3);
    for i in 0..3000 {
        // Keep the steering-relevant header bytes of a real frame most of the time, so the
        // garbage reaches the driver and the stack; corrupt the rest.
        let len = rng.gen_range(0..1600);
        let mut f: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if i % 4 != 0 {
            let keep = 38.min(len);
            f[..keep].copy_from_slice(&good[..keep]);
        }
        if i % 3 == 0 && len > good.len() {
            f[..good.len()].copy_from_slice(&good);
            let k = rng.gen_range(38..good.len());
            f[k] ^= 1 << rng.gen_range(0..8);
        }
        b.nic.inject(&f);
        if i % 64 == 0 {
            recv_all(&mut b);
        }
    }
    recv_all(&mut b);
    b.nic.inject(&good);
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 1, "a good frame still gets through");
    let st = b.dp.stats();
    let e = b.nic.stats();
    assert!(st.rx_frames > 300, "{st:?} {e:?}");
    assert!(b.dp.counters().total_drops() + st.rx_bad_csum > 0);
    assert_eq!(st.rx_bogus_cqes, 0);
    assert_eq!(b.dp.rx_posted(), 128);
}
